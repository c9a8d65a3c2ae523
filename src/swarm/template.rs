//! Templates and upstream context (docs §14.3): `{name}` placeholders,
//! and the `## Upstream results` text a task gets from the tasks named in
//! its `input_from`, each answer cut to a budget with the cut said in the
//! text.

use std::collections::BTreeMap;

/// The placeholder the upstream results replace.
pub const UPSTREAM_CONTEXT: &str = "upstream_context";
/// One upstream answer at most (characters).
pub const SECTION_BUDGET: usize = 6_000;
/// The whole upstream context at most (characters); later sections are cut first.
pub const TOTAL_BUDGET: usize = 24_000;

/// The `{name}` placeholders of `text`, in order (names are identifiers;
/// other braces, such as JSON in a prompt, are not placeholders).
pub fn placeholders(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if is_identifier(&after[..close]) => {
                out.push(after[..close].to_string());
                rest = &after[close + 1..];
            }
            _ => rest = after,
        }
    }
    out
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Replaces each `{name}` that has a value; everything else stays as written.
pub fn substitute(text: &str, values: &BTreeMap<String, String>) -> String {
    crate::text::fill_braces(text, is_identifier, |name| values.get(name).cloned())
}

/// One upstream result for the context.
#[derive(Clone, Debug)]
pub struct UpstreamResult<'a> {
    /// The `input_from` key.
    pub key: &'a str,
    pub task: &'a str,
    pub role: &'a str,
    pub answer: &'a str,
    /// Where the full answer is (the worker's run dir).
    pub run_dir: &'a str,
}

/// The exact upstream text of the team contract:
/// `## Upstream results`, then one `### key (task, role)` section per
/// entry, each answer cut to [`SECTION_BUDGET`] characters and all of them to
/// [`TOTAL_BUDGET`] (later sections are cut first). A cut answer ends with
/// `[cut: N of M characters omitted; the full answer is in DIR]`.
pub fn upstream_context(results: &[UpstreamResult]) -> String {
    let mut out = String::from("## Upstream results\n");
    let mut used = 0usize;
    for r in results {
        let header = format!("\n### {} ({}, {})\n", r.key, r.task, r.role);
        let total = r.answer.chars().count();
        let left = TOTAL_BUDGET.saturating_sub(used);
        let keep = total.min(SECTION_BUDGET).min(left);
        let body = if keep < total {
            let kept: String = r.answer.chars().take(keep).collect();
            let sep = if kept.is_empty() || kept.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            format!(
                "{kept}{sep}[cut: {} of {total} characters omitted; the full answer is in {}]",
                total - keep,
                r.run_dir
            )
        } else {
            r.answer.to_string()
        };
        used += keep;
        out.push_str(&header);
        out.push_str(&body);
        out.push('\n');
    }
    out
}

/// The task's one user message: the template with the variables, and the
/// upstream context in place of `{upstream_context}`, or after a blank line
/// when the template has no such placeholder but the task has inputs.
pub fn user_message(
    template: &str,
    vars: &BTreeMap<String, String>,
    upstream: Option<&str>,
) -> String {
    let mut values = vars.clone();
    let has_slot = placeholders(template).iter().any(|p| p == UPSTREAM_CONTEXT);
    match upstream {
        Some(ctx) if has_slot => {
            values.insert(UPSTREAM_CONTEXT.to_string(), ctx.to_string());
            substitute(template, &values)
        }
        Some(ctx) => {
            let text = substitute(template, &values);
            format!("{}\n\n{ctx}", text.trim_end())
        }
        None => {
            values.insert(UPSTREAM_CONTEXT.to_string(), String::new());
            substitute(template, &values)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_identifiers_only() {
        assert_eq!(
            placeholders("a {x} {\"json\": 1} {y_2} {} {upstream_context}"),
            ["x", "y_2", "upstream_context"]
        );
        let vars = BTreeMap::from([("x".to_string(), "1".to_string())]);
        assert_eq!(substitute("{x}{y} {\"k\": {x}}", &vars), "1{y} {\"k\": 1}");
    }

    #[test]
    fn context_sections_and_cuts() {
        let long = "a".repeat(7_000);
        let ctx = upstream_context(&[
            UpstreamResult {
                key: "bull",
                task: "task-bull",
                role: "Bull",
                answer: "up 5%",
                run_dir: "/r/1",
            },
            UpstreamResult {
                key: "bear",
                task: "task-bear",
                role: "Bear",
                answer: &long,
                run_dir: "/r/2",
            },
        ]);
        assert!(ctx.starts_with("## Upstream results\n\n### bull (task-bull, Bull)\nup 5%\n\n### bear (task-bear, Bear)\n"));
        assert!(
            ctx.ends_with("\n[cut: 1000 of 7000 characters omitted; the full answer is in /r/2]\n")
        );
        // The whole budget: four 6,000-char answers fill it, the fifth gets nothing.
        let six = "b".repeat(6_000);
        let r = |key| UpstreamResult {
            key,
            task: "t",
            role: "r",
            answer: &six,
            run_dir: "/d",
        };
        let ctx = upstream_context(&[r("one"), r("two"), r("three"), r("four"), r("five")]);
        assert!(ctx.contains(
            "### five (t, r)\n[cut: 6000 of 6000 characters omitted; the full answer is in /d]"
        ));
        assert_eq!(ctx.matches('b').count(), TOTAL_BUDGET);
    }

    #[test]
    fn the_context_goes_in_its_slot_or_after_a_blank_line() {
        let vars = BTreeMap::from([("target".to_string(), "AAPL".to_string())]);
        assert_eq!(
            user_message(
                "Judge {target}.\n{upstream_context}\nDone.",
                &vars,
                Some("CTX")
            ),
            "Judge AAPL.\nCTX\nDone."
        );
        assert_eq!(
            user_message("Judge {target}.\n", &vars, Some("CTX")),
            "Judge AAPL.\n\nCTX"
        );
        assert_eq!(
            user_message("Go {target}{upstream_context}", &vars, None),
            "Go AAPL"
        );
    }
}
