//! What the model is sent (docs §4): the system prompt, replayed history, and
//! the user message with recalled memories.
//!
//! The system prompt is built once at run set-up and never rebuilt during the
//! run (the frozen-snapshot rule of docs §4.4): anything injected into it —
//! tool list, skills, memory snapshot, state — is what it was when the run
//! began, which also keeps the prefix stable for provider prompt caching.

use std::path::Path;
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use regex::Regex;

use crate::model::{Message, Role};
use crate::store::StoredMessage;
use crate::tools::Registry;

/// The system prompt template; placeholders are `{name}`.
pub const SYSTEM_TEMPLATE: &str = include_str!("../../assets/prompts/system.md");

/// One skill as listed in the system prompt (skills arrive with the memory
/// and skills work; the builder already takes them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillLine {
    pub category: String,
    pub name: String,
    pub description: String,
}

/// A memory recalled for the current message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recalled {
    pub title: String,
    pub memory_type: String,
    pub body: String,
}

/// Per-message recall (docs §4.2): given the text sent to the model, return
/// the most relevant memories. Recall here never updates access statistics.
pub trait RecallHook: Send + Sync {
    fn recall(&self, query: &str, max_results: usize) -> Vec<Recalled>;
}

pub struct PromptInputs<'a> {
    pub registry: &'a Registry,
    pub skills: &'a [SkillLine],
    /// The workspace summary (docs §4.5).
    pub state: &'a str,
    /// The persistent-memory snapshot taken at session start; empty = none.
    pub memory_snapshot: &'a str,
    pub now: DateTime<Utc>,
}

/// Fills the template in one pass, so text substituted for one placeholder
/// (a tool description containing `{state}`, say) is never substituted again.
pub fn fill_template(template: &str, value_of: impl Fn(&str) -> Option<String>) -> String {
    let is_name = |n: &str| !n.is_empty() && n.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    crate::text::fill_braces(template, is_name, value_of)
}

pub fn system_prompt(inputs: &PromptInputs<'_>) -> String {
    fill_template(SYSTEM_TEMPLATE, |name| {
        Some(match name {
            "tool_count" => inputs.registry.len().to_string(),
            "tool_descriptions" => {
                let lines = inputs.registry.prompt_lines();
                if lines.is_empty() {
                    "(no tools)".to_string()
                } else {
                    lines
                }
            }
            "skill_count" => inputs.skills.len().to_string(),
            "skill_descriptions" => skill_descriptions(inputs.skills),
            "state" => inputs.state.to_string(),
            "memory_section" => {
                if inputs.memory_snapshot.trim().is_empty() {
                    String::new()
                } else {
                    format!(
                        "\n## Persistent Memory (cross-session)\n{}\n",
                        inputs.memory_snapshot.trim_end()
                    )
                }
            }
            "current_datetime" => inputs.now.format("%A, %B %d, %Y %H:%M UTC").to_string(),
            _ => return None,
        })
    })
}

/// Skills grouped by category in the original's order, then the rest
/// alphabetically (docs §4.5).
pub fn skill_descriptions(skills: &[SkillLine]) -> String {
    if skills.is_empty() {
        return "(no skills)".to_string();
    }
    const ORDER: [&str; 8] = [
        "data-source",
        "strategy",
        "analysis",
        "asset-class",
        "crypto",
        "flow",
        "tool",
        "other",
    ];
    let mut categories: Vec<&str> = skills.iter().map(|s| s.category.as_str()).collect();
    categories.sort_by_key(|c| (ORDER.iter().position(|o| o == c).unwrap_or(ORDER.len()), *c));
    categories.dedup();
    categories
        .iter()
        .map(|cat| {
            let lines: Vec<String> = skills
                .iter()
                .filter(|s| s.category == *cat)
                .map(|s| format!("  - {}: {}", s.name, s.description))
                .collect();
            format!("\n### {cat}\n{}", lines.join("\n"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `- run_dir: …`, `- workspace: …`, `- counters: a=1, b=2`; `(empty state)`
/// when there is nothing to say (docs §4.5).
pub fn workspace_summary(
    run_dir: Option<&Path>,
    workspace: Option<&Path>,
    counters: &[(String, u32)],
) -> String {
    let mut lines = Vec::new();
    if let Some(r) = run_dir {
        lines.push(format!("- run_dir: {}", r.display()));
    }
    if let Some(w) = workspace {
        lines.push(format!("- workspace: {}", w.display()));
    }
    if !counters.is_empty() {
        let c: Vec<String> = counters.iter().map(|(n, k)| format!("{n}={k}")).collect();
        lines.push(format!("- counters: {}", c.join(", ")));
    }
    if lines.is_empty() {
        "(empty state)".to_string()
    } else {
        lines.join("\n")
    }
}

/// The user message with recalled memories in front (docs §4.2).
pub fn with_recall(text: &str, recalled: &[Recalled]) -> String {
    if recalled.is_empty() {
        return text.to_string();
    }
    let mut out = String::from("<recalled-memories>\n");
    for r in recalled {
        let body: String = r.body.chars().take(500).collect();
        out.push_str(&format!(
            "- **{}** ({}): {}\n",
            r.title, r.memory_type, body
        ));
    }
    out.push_str("</recalled-memories>\n\n");
    out.push_str(text);
    out
}

static RUN_DIR_LINE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"Run directory: (\S+)").ok());

/// History replayed into a new run (docs §4.1): earlier user/assistant turns
/// with text, newest kept first within `budget` characters; tool messages and
/// engine steering are never replayed.
pub fn history_from_stored(stored: &[StoredMessage], budget: usize) -> Vec<Message> {
    // Walked from the newest: a long session only converts what fits.
    let candidates = stored
        .iter()
        .rev()
        .map(|s| &s.message)
        .filter(|m| matches!(m.role, Role::User | Role::Assistant))
        .filter(|m| !m.content.trim().is_empty() && !m.content.starts_with("<system>"))
        .map(|m| {
            let content = match RUN_DIR_LINE.as_ref() {
                Some(re) => re
                    .replace_all(&m.content, |c: &regex::Captures<'_>| {
                        let base = Path::new(&c[1])
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned());
                        format!("[prev_run: {}]", base.unwrap_or_default())
                    })
                    .into_owned(),
                None => m.content.clone(),
            };
            Message {
                tool_calls: Vec::new(),
                reasoning_content: None,
                ..Message::plain_with_role(m.role, content)
            }
        });
    let mut kept: Vec<Message> = Vec::new();
    let mut used = 0usize;
    for m in candidates {
        let len = m.content.chars().count();
        if used + len > budget {
            if kept.is_empty() {
                let cut: String = m.content.chars().take(budget).collect();
                kept.push(Message::plain_with_role(m.role, cut + "\n[... truncated]"));
            }
            break;
        }
        used += len;
        kept.push(m);
    }
    kept.reverse();
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::builtin::default_registry;

    #[test]
    fn prompt_counts_come_from_the_registry() {
        let reg = default_registry();
        let p = system_prompt(&PromptInputs {
            registry: &reg,
            skills: &[],
            state: "(empty state)",
            memory_snapshot: "",
            now: DateTime::from_timestamp(0, 0).unwrap(),
        });
        assert!(p.contains(&format!("You have {} tools and 0 skills", reg.len())));
        assert!(p.contains("- read_file: "));
        assert!(p.contains("(no skills)"));
        assert!(!p.contains("Persistent Memory"));
        assert!(p.contains("Today is Thursday, January 01, 1970 00:00 UTC."));
        assert!(!p.contains('{'), "unfilled placeholder in:\n{p}");
    }

    #[test]
    fn substituted_text_is_not_substituted_again() {
        let out = fill_template("a {x} b {y} {unknown} {", |n| match n {
            "x" => Some("{y}".into()),
            "y" => Some("Y".into()),
            _ => None,
        });
        assert_eq!(out, "a {y} b Y {unknown} {");
    }

    #[test]
    fn skills_group_in_the_original_order() {
        let s = |c: &str, n: &str| SkillLine {
            category: c.into(),
            name: n.into(),
            description: "d".into(),
        };
        let text = skill_descriptions(&[
            s("research", "r"),
            s("strategy", "s"),
            s("data-source", "d"),
        ]);
        let pos = |x: &str| text.find(x).unwrap();
        assert!(pos("### data-source") < pos("### strategy"));
        assert!(pos("### strategy") < pos("### research"));
    }

    #[test]
    fn history_keeps_newest_within_budget() {
        let stored = |role: Role, content: &str| StoredMessage {
            message: Message::plain_with_role(role, content),
            ts: String::new(),
            run_id: None,
            status: None,
        };
        let msgs = vec![
            stored(Role::User, &"a".repeat(50)),
            stored(
                Role::Assistant,
                "Run directory: /x/runs/20260101_000000_abcdef done",
            ),
            stored(Role::Tool, "tool output"),
            stored(Role::User, "<system>steer</system>"),
            stored(Role::User, "latest"),
        ];
        let h = history_from_stored(&msgs, 60);
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].content, "[prev_run: 20260101_000000_abcdef] done");
        assert_eq!(h[1].content, "latest");
        let h = history_from_stored(&msgs[..1], 10);
        assert_eq!(h[0].content, format!("{}\n[... truncated]", "a".repeat(10)));
    }

    #[test]
    fn recall_block_format() {
        let r = Recalled {
            title: "AAPL split".into(),
            memory_type: "fact".into(),
            body: "4:1 in 2020".into(),
        };
        assert_eq!(
            with_recall("hi", &[r]),
            "<recalled-memories>\n- **AAPL split** (fact): 4:1 in 2020\n</recalled-memories>\n\nhi"
        );
        assert_eq!(with_recall("hi", &[]), "hi");
    }
}
