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
/// when the preset gives none (docs §14.7 states the defaults). A rule not
/// listed here reads none.
pub const THRESHOLDS: &[(&str, &[(&str, f64)])] = &[("macro_regimes", &[("min_sharpe_gap", 1.0)])];

/// The thresholds `rule` reads, by name, with their defaults.
pub fn thresholds_of(rule: &str) -> &'static [(&'static str, f64)] {
    THRESHOLDS
        .iter()
        .find(|(r, _)| *r == rule)
        .map_or(&[], |(_, t)| t)
}

/// The value of threshold `name` in `given` (from the rule line), else
/// `rule`'s default for it (0 for a name the rule does not have).
pub fn threshold(rule: &str, given: &[(String, f64)], name: &str) -> f64 {
    given
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
        .or_else(|| {
            thresholds_of(rule)
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
        })
        .unwrap_or(0.0)
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
}
