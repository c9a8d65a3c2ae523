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

/// What the rule line starts with.
const PREFIX: &str = "Decision rule: ";

/// Whether `name` is a known rule.
pub fn is_rule(name: &str) -> bool {
    RULES.contains(&name)
}

/// The machine-readable line that carries a task's rule to its member.
pub fn line(rule: &str) -> String {
    format!("{PREFIX}{rule}")
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
    }
}
