//! The research teams' decision rules by name (docs §14.7): a preset task
//! names its rule (`decision: risk_review`), the swarm checks the name
//! against [`RULES`] and writes it into the task's message as one
//! [`line`], and the offline planner reads that line back ([`read`]) and
//! decides by the rule it names. Both rooms read this one list.

/// Every rule the offline planner can decide by, in docs §14.7's order.
pub const RULES: &[&str] = &[
    "risk_review",
    "bull_rebuttal",
    "bear_rebuttal",
    "committee",
    "pairs",
    "validation",
    "quant_desk",
    "backtest_audit",
    "crypto",
    "equity",
    "factors",
    "macro_regimes",
    "portfolio",
    "risk_memo",
    "technical_panel",
    "options_desk",
];

/// The thresholds a rule reads from its preset, with the value it uses
/// when the preset gives none. This table is the one definition: the
/// rules' stated text is formatted from the values in force, the shipped
/// presets set each of them (`thresholds:`), and docs §14.7's threshold
/// table is compared with it by a test. Percent figures are in percent
/// (`-20` is a 20 % drawdown); counts (two points make a stance) are part
/// of a rule's shape, not thresholds.
pub const THRESHOLDS: &[(&str, &[(&str, f64)])] = &[
    ("risk_review", RISK_REVIEW),
    ("bull_rebuttal", REBUTTAL),
    ("bear_rebuttal", REBUTTAL),
    ("committee", COMMITTEE),
    (
        "pairs",
        &[
            ("pass_correlation", 0.5),
            ("fail_correlation", 0.3),
            ("pass_p_value", 0.05),
            ("fail_p_value", 0.10),
            ("pass_half_life", 30.0),
            ("fail_half_life", 60.0),
            ("pass_sharpe", 0.5),
            ("fail_sharpe", 0.0),
            ("entry_z", 2.0),
        ],
    ),
    ("validation", SURVIVAL),
    ("quant_desk", SURVIVAL),
    ("backtest_audit", &[("cost_sharpe_share", 0.5)]),
    (
        "crypto",
        &[
            ("high_risk_volatility", 80.0),
            ("elevated_risk_volatility", 50.0),
            ("crash_drawdown", -50.0),
            ("paid_sharpe", 0.5),
        ],
    ),
    (
        "equity",
        &[
            ("paid_sharpe", 0.5),
            ("deep_drawdown", -20.0),
            ("shallow_drawdown", -5.0),
        ],
    ),
    (
        "factors",
        &[("min_sharpe_margin", 0.1), ("min_low_vol_lead", 10.0)],
    ),
    ("macro_regimes", &[("min_sharpe_gap", 1.0)]),
    (
        "portfolio",
        &[
            ("crash_drawdown", -50.0),
            ("high_volatility", 40.0),
            ("high_correlation", 0.7),
            ("risk_share_multiple", 1.5),
            ("trend_sharpe_edge", 0.2),
        ],
    ),
    (
        "risk_memo",
        &[
            ("volatility_limit", 40.0),
            ("es_limit", 5.0),
            ("stress_loss_limit", 30.0),
            ("drawdown_limit", 40.0),
            ("correlation_limit", 0.8),
        ],
    ),
    ("technical_panel", &[("momentum_rsi", 50.0)]),
    (
        "options_desk",
        &[("above_ratio", 1.2), ("below_ratio", 0.8)],
    ),
];

/// The risk officer's limits (which the manager applies too), and the
/// researchers' point lines it ranks each side's strongest figure by.
const RISK_REVIEW: &[(&str, f64)] = &[
    ("paid_sharpe", 0.5),
    ("deep_drawdown", -20.0),
    ("shallow_drawdown", -5.0),
    ("high_volatility", 40.0),
    ("low_volatility", 20.0),
    ("overbought_rsi", 70.0),
    ("veto_volatility", 60.0),
    ("cap_drawdown", -50.0),
    ("cap_atr_percent", 5.0),
];

/// The researchers' point lines and the rebuttals' answer lines: the
/// rebuttals score the other side's points to find its strongest.
const REBUTTAL: &[(&str, f64)] = &[
    ("paid_sharpe", 0.5),
    ("deep_drawdown", -20.0),
    ("shallow_drawdown", -5.0),
    ("high_volatility", 40.0),
    ("low_volatility", 20.0),
    ("overbought_rsi", 70.0),
    ("answer_drawdown", -10.0),
    ("crash_drawdown", -50.0),
];

/// The manager scores both researchers, strikes answered points and
/// applies the limits, so it reads all of them.
const COMMITTEE: &[(&str, f64)] = &[
    ("paid_sharpe", 0.5),
    ("deep_drawdown", -20.0),
    ("shallow_drawdown", -5.0),
    ("high_volatility", 40.0),
    ("low_volatility", 20.0),
    ("overbought_rsi", 70.0),
    ("answer_drawdown", -10.0),
    ("crash_drawdown", -50.0),
    ("veto_volatility", 60.0),
    ("cap_drawdown", -50.0),
    ("cap_atr_percent", 5.0),
];

/// Out of sample, a rule survives at this Sharpe and this share of its
/// in-sample Sharpe.
const SURVIVAL: &[(&str, f64)] = &[("min_oos_sharpe", 0.5), ("min_kept_share", 0.5)];

/// The thresholds `rule` reads, by name, with their defaults.
pub fn thresholds_of(rule: &str) -> &'static [(&'static str, f64)] {
    THRESHOLDS
        .iter()
        .find(|(r, _)| *r == rule)
        .map_or(&[], |(_, t)| t)
}

/// The value of threshold `name` in `given` (from the rule line), else
/// its default. A name means one thing in every rule that has it, with one
/// default (a test holds the table to that), so a rule line that names no
/// known rule still gets the documented value, never a silent 0.
pub fn threshold(rule: &str, given: &[(String, f64)], name: &str) -> f64 {
    given
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
        .or_else(|| default_of(rule, name))
        .or_else(|| THRESHOLDS.iter().find_map(|(r, _)| default_of(r, name)))
        .unwrap_or(f64::NAN)
}

/// Each of `rule`'s thresholds in force, by name, as a prompt states it
/// (`0.5`, `-20`): a preset's prompt names them as `{name}` placeholders,
/// so the text a model reads says the values the rule decides by.
pub fn in_force(rule: &str, given: &[(String, f64)]) -> Vec<(String, String)> {
    thresholds_of(rule)
        .iter()
        .map(|(name, _)| {
            (
                name.to_string(),
                format!("{}", threshold(rule, given, name)),
            )
        })
        .collect()
}

fn default_of(rule: &str, name: &str) -> Option<f64> {
    thresholds_of(rule)
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
}

/// What the rule line starts with.
const PREFIX: &str = "Decision rule: ";

/// Whether `name` is a known rule.
pub fn is_rule(name: &str) -> bool {
    RULES.contains(&name)
}

/// The machine-readable line that carries a task's rule to its member:
/// `Decision rule: NAME`, then `; name=value, …` when it has thresholds.
pub fn line(rule: &str) -> String {
    line_with(rule, &[])
}

/// [`line`] with the preset's thresholds.
pub fn line_with(rule: &str, thresholds: &[(String, f64)]) -> String {
    if thresholds.is_empty() {
        return format!("{PREFIX}{rule}");
    }
    let given: Vec<String> = thresholds.iter().map(|(n, v)| format!("{n}={v}")).collect();
    format!("{PREFIX}{rule}; {}", given.join(", "))
}

/// The thresholds the message's rule line gives (`; name=value, …`);
/// a pair that does not read as a finite number is left out.
pub fn read_thresholds(message: &str) -> Vec<(String, f64)> {
    let Some(rest) = message
        .lines()
        .find_map(|l| l.trim_end().strip_prefix(PREFIX))
    else {
        return Vec::new();
    };
    let Some((_, list)) = rest.split_once(';') else {
        return Vec::new();
    };
    list.split(',')
        .filter_map(|pair| {
            let (n, v) = pair.split_once('=')?;
            let v: f64 = v.trim().parse().ok().filter(|v: &f64| v.is_finite())?;
            Some((n.trim().to_string(), v))
        })
        .collect()
}

/// The rule named by the message's rule line, if it has one (the first
/// line that starts with the prefix; its first word is the name).
pub fn read(message: &str) -> Option<&str> {
    message.lines().find_map(|l| {
        let rest = l.trim_end().strip_prefix(PREFIX)?;
        rest.split([';', ' ']).next().filter(|n| !n.is_empty())
    })
}

/// The message without its rule line, so the line is not read as a request.
pub fn without_line(message: &str) -> String {
    message
        .split_inclusive('\n')
        .filter(|l| !l.starts_with(PREFIX))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_round_trips_and_is_cut_from_the_request() {
        let msg = format!("Weigh AAPL.\n{}\n\n## Upstream results\n", line("pairs"));
        assert_eq!(read(&msg), Some("pairs"));
        assert_eq!(without_line(&msg), "Weigh AAPL.\n\n## Upstream results\n");
        assert_eq!(read("Weigh AAPL.\nDecision rule:\n"), None);
        assert_eq!(read("no rule here"), None);
        assert!(RULES.iter().all(|r| is_rule(r)) && !is_rule("vibes"));
        let given = vec![("min_sharpe_gap".to_string(), 0.75)];
        let with = line_with("macro_regimes", &given);
        assert_eq!(with, "Decision rule: macro_regimes; min_sharpe_gap=0.75");
        assert_eq!(read(&with), Some("macro_regimes"));
        assert_eq!(read_thresholds(&with), given);
        assert_eq!(threshold("macro_regimes", &given, "min_sharpe_gap"), 0.75);
        assert_eq!(threshold("macro_regimes", &[], "min_sharpe_gap"), 1.0);
        assert!(THRESHOLDS.iter().all(|(r, _)| is_rule(r)));
    }

    #[test]
    fn a_threshold_name_has_one_default_in_every_rule() {
        let mut seen: Vec<(&str, f64, &str)> = Vec::new();
        for (rule, list) in THRESHOLDS {
            for (name, v) in *list {
                assert!(v.is_finite(), "{rule}.{name}");
                if let Some((_, w, other)) = seen.iter().find(|(n, _, _)| n == name) {
                    assert_eq!(v, w, "{name}: {rule} and {other} differ");
                }
                seen.push((name, *v, rule));
            }
        }
        // A name no rule has is NaN: every comparison with it is false, so
        // a mistyped name decides nothing rather than deciding at 0.
        assert!(threshold("pairs", &[], "nonesuch").is_nan());
        assert_eq!(threshold("pairs", &[], "crash_drawdown"), -50.0);
    }
}
