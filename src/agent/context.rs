//! What the model is sent (docs §4): the system prompt, replayed history, and
//! the user message with recalled memories.
//!
//! The system prompt is built once at run set-up and never rebuilt during the
//! run (the frozen-snapshot rule of docs §4.4): anything injected into it —
//! skills, memory snapshot, state — is what it was when the run began. Its
//! stable parts come first and the parts that change from run to run (the
//! run directory, the time) last, so a server's prefix cache holds across
//! runs (docs §4.3).

use std::path::Path;
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use regex::Regex;

use crate::model::{Message, Role};
use crate::store::StoredMessage;
use crate::tools::Registry;

/// The system prompt template; placeholders are `{name}`.
pub const SYSTEM_TEMPLATE: &str = include_str!("../../assets/prompts/system.md");

/// What changes from run to run (the state, the date and time): the end of
/// the system prompt, or with a lean prompt the head of the user message.
pub const RUN_CONTEXT_TEMPLATE: &str = include_str!("../../assets/prompts/run_context.md");

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
    /// The model wrote it and the user has not kept it (docs §8.3).
    pub unconfirmed: bool,
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

/// The tool that reads a skill; without it the catalogue is not shown.
pub const LOAD_SKILL: &str = crate::model::names::LOAD_SKILL;

/// The system prompt (docs §4.3). The tools are not listed in it: their
/// schemas travel with every request already. The skills are listed only
/// when `load_skill` is offered, one line each. It ends with the run's
/// context ([`run_context`]).
pub fn system_prompt(inputs: &PromptInputs<'_>) -> String {
    let mut p = stable_system_prompt(inputs);
    p.push_str(&run_context(inputs));
    p
}

/// The system prompt without the run's context: the same for every run of
/// a session. A lean prompt sends this, and the context in the user
/// message, because chat templates put the tool schemas after the system
/// text: a date there would end the prefix a server's cache can reuse
/// before the schemas (docs §4.3).
pub fn stable_system_prompt(inputs: &PromptInputs<'_>) -> String {
    let skills: &[SkillLine] = if inputs.registry.get(LOAD_SKILL).is_some() {
        inputs.skills
    } else {
        &[]
    };
    fill_template(SYSTEM_TEMPLATE, |name| {
        Some(match name {
            "tool_count" => inputs.registry.len().to_string(),
            "skill_count" => skills.len().to_string(),
            "skills_section" => skills_section(skills),
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
            _ => return None,
        })
    })
}

/// The state (this run's directory) and the date and time.
pub fn run_context(inputs: &PromptInputs<'_>) -> String {
    fill_template(RUN_CONTEXT_TEMPLATE, |name| {
        Some(match name {
            "state" => inputs.state.to_string(),
            "current_datetime" => inputs.now.format("%A, %B %d, %Y %H:%M UTC").to_string(),
            _ => return None,
        })
    })
}

/// The user message of a lean prompt: the run's context, then the message
/// (with its recalled memories). Before it, not after: measured with the
/// 1.5B model, the block after the question (its list of other tools
/// last) drew a call to a tool named only in that list, and 4 of the
/// first 8 questions went wrong against 2 of 8 with the block first (one
/// run each). An echo of the block is cut and asked again without it
/// (docs §2.11.2).
pub fn with_run_context(context: &str, message: &str) -> String {
    format!(
        "<run-context>\n{}\n</run-context>\n\n{message}",
        context.trim_end()
    )
}

/// A message without the run's context [`with_run_context`] put before it.
pub fn without_run_context(text: &str) -> &str {
    if !text.starts_with("<run-context>\n") {
        return text;
    }
    text.split_once("\n</run-context>\n\n")
        .map_or(text, |(_, rest)| rest)
}

/// Characters of a skill's description in the catalogue.
const SKILL_LINE_CHARS: usize = 90;

/// `## Skills` with one line per skill (`- name: description`, cut), in
/// the order of [`skill_descriptions`]; empty when there are none.
pub fn skills_section(skills: &[SkillLine]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut ordered: Vec<&SkillLine> = skills.iter().collect();
    ordered.sort_by_key(|s| (category_rank(&s.category), s.category.clone()));
    let lines: Vec<String> = ordered
        .iter()
        .map(|s| {
            let desc = crate::text::one_line(&s.description, SKILL_LINE_CHARS);
            format!("- {}: {desc}", s.name)
        })
        .collect();
    format!(
        "\n## Skills (load_skill NAME reads one; they are guides, not tools)\n{}\n",
        lines.join("\n")
    )
}

/// The categories in the original's order, the rest after (docs §4.5).
const CATEGORY_ORDER: [&str; 8] = [
    "data-source",
    "strategy",
    "analysis",
    "asset-class",
    "crypto",
    "flow",
    "tool",
    "other",
];

fn category_rank(category: &str) -> usize {
    CATEGORY_ORDER
        .iter()
        .position(|o| *o == category)
        .unwrap_or(CATEGORY_ORDER.len())
}

/// Skills grouped by category in the original's order, then the rest
/// alphabetically (docs §4.5); the `/skills` listing shows them so.
pub fn skill_descriptions(skills: &[SkillLine]) -> String {
    if skills.is_empty() {
        return "(no skills)".to_string();
    }
    let mut categories: Vec<&str> = skills.iter().map(|s| s.category.as_str()).collect();
    categories.sort_by_key(|c| (category_rank(c), *c));
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
        let label = if r.unconfirmed {
            format!("; {}", crate::memory::entry::UNCONFIRMED_LABEL)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "- **{}** ({}{label}): {}\n",
            r.title, r.memory_type, body
        ));
    }
    out.push_str("</recalled-memories>\n\n");
    out.push_str(text);
    out
}

/// What the first request of a run costs, in estimated tokens (docs §4.7):
/// the system prompt, the tool schemas and the user's message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FirstRequest {
    pub system: u64,
    pub tools: u64,
    pub tool_count: usize,
    pub total: u64,
}

/// Counts a first request as the provider would send it.
pub fn first_request(
    system: &str,
    user: &str,
    registry: &Registry,
    estimator: &crate::llm::tokens::Estimator,
) -> FirstRequest {
    let specs: Vec<serde_json::Value> = registry.specs().iter().map(|s| s.to_openai()).collect();
    let tools = if specs.is_empty() {
        0
    } else {
        estimator.count_text(&serde_json::Value::Array(specs).to_string())
    };
    let messages = [Message::system(system), Message::user(user)];
    FirstRequest {
        system: estimator.count(&messages[..1]),
        tools,
        tool_count: registry.len(),
        total: estimator.count(&messages) + tools,
    }
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
    fn the_run_context_leads_the_message_and_comes_off_again() {
        let user = with_run_context("## State\n- run_dir: /r/1\n", "What was SPY's drawdown?");
        assert_eq!(
            user,
            "<run-context>\n## State\n- run_dir: /r/1\n</run-context>\n\nWhat was SPY's drawdown?"
        );
        assert_eq!(without_run_context(&user), "What was SPY's drawdown?");
        assert_eq!(
            without_run_context("plain <run-context>"),
            "plain <run-context>"
        );
    }

    fn skill(c: &str, n: &str) -> SkillLine {
        SkillLine {
            category: c.into(),
            name: n.into(),
            description: "d".repeat(120),
        }
    }

    #[test]
    fn prompt_counts_come_from_the_registry() {
        let reg = default_registry();
        let p = system_prompt(&PromptInputs {
            registry: &reg,
            skills: &[skill("strategy", "backtest-design")],
            state: "- run_dir: /runs/x",
            memory_snapshot: "",
            now: DateTime::from_timestamp(0, 0).unwrap(),
        });
        assert!(p.contains(&format!("You have {} tools and 0 skills", reg.len())));
        assert!(
            !p.contains("read_file") && !p.contains("## Tools"),
            "the tools travel as schemas, never repeated in the text:\n{p}"
        );
        assert!(
            !p.contains("## Skills") && !p.contains("backtest-design"),
            "no catalogue without load_skill"
        );
        assert!(!p.contains("Persistent Memory"));
        assert!(p.ends_with("Today is Thursday, January 01, 1970 00:00 UTC.\n"));
        // What changes from run to run comes after everything that does not.
        let state = p.find("## State").unwrap();
        assert!(p.find("## Guidelines").unwrap() < state);
        assert!(state < p.find("## Current Date").unwrap());
        assert!(!p.contains('{'), "unfilled placeholder in:\n{p}");
    }

    struct Named(&'static str);
    impl crate::tools::Tool for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            ""
        }
        fn parameters(&self) -> serde_json::Value {
            serde_json::json!({"type": "object"})
        }
        fn call<'a>(
            &'a self,
            _: serde_json::Value,
            _: &'a crate::tools::ToolContext,
        ) -> futures_util::future::BoxFuture<'a, crate::tools::ToolResult> {
            Box::pin(async { Ok(String::new()) })
        }
    }

    #[test]
    fn skills_are_one_line_each_when_load_skill_is_offered() {
        let mut reg = Registry::new();
        reg.register(std::sync::Arc::new(Named(LOAD_SKILL)))
            .unwrap();
        let at = |p: &str| {
            system_prompt(&PromptInputs {
                registry: &reg,
                skills: &[
                    skill("research", "r"),
                    skill("strategy", "s"),
                    skill("data-source", "d"),
                ],
                state: "(empty state)",
                memory_snapshot: "- likes 5 bp",
                now: DateTime::from_timestamp(0, 0).unwrap(),
            })
            .find(p)
            .unwrap()
        };
        let p = system_prompt(&PromptInputs {
            registry: &reg,
            skills: &[skill("strategy", "s")],
            state: "(empty state)",
            memory_snapshot: "",
            now: DateTime::from_timestamp(0, 0).unwrap(),
        });
        assert!(p.contains("You have 1 tools and 1 skills"));
        let line = p.lines().find(|l| l.starts_with("- s: ")).unwrap();
        assert!(line.chars().count() <= 6 + SKILL_LINE_CHARS, "{line}");
        assert!(at("- d: ") < at("- s: ") && at("- s: ") < at("- r: "));
        assert!(at("## Skills") < at("## Guidelines"));
        assert!(
            at("Persistent Memory") < at("## State"),
            "the session's memory before the run's state"
        );
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
            unconfirmed: false,
        };
        let planted = Recalled {
            title: "Fees".into(),
            memory_type: "project".into(),
            body: "commission 0.5".into(),
            unconfirmed: true,
        };
        assert!(
            with_recall("hi", std::slice::from_ref(&planted)).contains(
                "- **Fees** (project; unconfirmed, written by the model): commission 0.5\n"
            )
        );
        assert_eq!(
            with_recall("hi", &[r]),
            "<recalled-memories>\n- **AAPL split** (fact): 4:1 in 2020\n</recalled-memories>\n\nhi"
        );
        assert_eq!(with_recall("hi", &[]), "hi");
    }
}
