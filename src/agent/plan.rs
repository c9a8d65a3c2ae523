//! Plan mode (docs §4.8): a turn that may only look (read-only tools) and
//! answers with a numbered plan, and the turn that carries an approved plan
//! out with every tool and the plan pinned in its system prompt, which every
//! compaction layer keeps (docs §3).

use crate::tools::Registry;

/// What a turn does about plans.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TurnPlan {
    /// A normal turn.
    #[default]
    Off,
    /// Plan only: read-only tools, the answer is a numbered plan.
    Draft,
    /// Carry out this approved plan: all tools, the plan pinned.
    Execute(String),
}

/// Longest plan pinned, in characters: a plan is a page, not a file.
pub const MAX_PLAN_CHARS: usize = 20_000;

/// The prompt of the turn that runs an approved plan when the user gives
/// none (the workstation's `/go`).
pub const EXECUTE_PROMPT: &str =
    "Carry out the approved plan now, step by step, and report what each step found.";

const DRAFT_INSTRUCTIONS: &str = "\n\n## Plan mode\n\
You are in plan mode: only read-only tools are offered. Look at what you need \
with them, then answer with a numbered plan (1., 2., 3., …) of the steps you \
would take: which tools, files, data and parameters, and what each step \
should produce. Do not act: do not write files, run code, save memories or \
claim that any step is done. The user approves the plan before anything runs.\n";

/// What the system prompt gains for this turn: the plan-mode instructions,
/// or the approved plan, pinned; nothing for a normal turn.
pub fn system_section(plan: &TurnPlan) -> String {
    match plan {
        TurnPlan::Off => String::new(),
        TurnPlan::Draft => DRAFT_INSTRUCTIONS.to_string(),
        TurnPlan::Execute(text) => format!(
            "\n\n## Approved plan (pinned)\nThe user approved this plan. Carry it out \
             step by step with the tools, keep to it, and say which steps are done \
             and what each found; if a step cannot be done, say why.\n\n{}\n",
            crate::text::prefix_chars(text.trim(), MAX_PLAN_CHARS)
        ),
    }
}

/// Whether a tool may be offered while planning: it only reads, and writes
/// no file (an MCP tool counts as read-only only when its server says
/// `readOnlyHint: true`, docs §13.3).
pub fn offered_while_planning(tool: &dyn crate::tools::Tool) -> bool {
    let caps = tool.caps();
    caps.readonly && !caps.writes_files
}

/// The tools of `all` a planning turn is offered.
pub fn planning_tools(all: &Registry) -> Registry {
    let names: Vec<String> = all
        .iter()
        .filter(|t| offered_while_planning(t.as_ref()))
        .map(|t| t.name().to_string())
        .collect();
    all.subset(&names).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::names;

    #[test]
    fn planning_offers_only_tools_that_read() {
        let tmp = tempfile::tempdir().unwrap();
        let store = crate::memory::MemoryStore::open(tmp.path(), Default::default()).unwrap();
        let mut all = Registry::new();
        crate::tools::builtin::register_defaults(&mut all).unwrap();
        crate::tools::builtin::memory::register_memory_tools(
            &mut all,
            std::sync::Arc::new(store),
            std::sync::Arc::new(crate::memory::SkillSet::load(None)),
            tmp.path().join("sessions"),
        )
        .unwrap();
        let offered = planning_tools(&all);
        let names = offered.names();
        assert!(!names.is_empty());
        for writer in [
            names::WRITE_FILE,
            names::EDIT_FILE,
            names::BASH,
            names::REMEMBER,
        ] {
            assert!(all.get(writer).is_some(), "{writer} is registered");
            assert!(!names.contains(&writer), "{writer} offered: {names:?}");
        }
        assert!(names.contains(&names::READ_FILE), "{names:?}");
        assert!(offered.iter().all(|t| t.caps().readonly));
    }

    #[test]
    fn the_plan_is_pinned_and_the_draft_asks_for_numbers() {
        assert_eq!(system_section(&TurnPlan::Off), "");
        assert!(system_section(&TurnPlan::Draft).contains("numbered plan"));
        let pinned = system_section(&TurnPlan::Execute("1. read\n2. test".into()));
        assert!(pinned.starts_with("\n\n## Approved plan (pinned)\n"));
        assert!(pinned.ends_with("\n\n1. read\n2. test\n"));
    }
}
