//! The agent's side of persistent memory: per-message recall through
//! [`RecallHook`] (docs §4.2), the system-prompt snapshot (docs §4.4) and the
//! skill lines of the prompt (docs §4.5). The memory room cannot depend on
//! the agent room, so the adapters live here.

use std::sync::Arc;

use chrono::Utc;

use super::context::{RecallHook, Recalled, SkillLine};
use crate::memory::{MemoryStore, SkillSet};

/// Recall from a [`MemoryStore`]: the most relevant entries for the text
/// sent to the model. Errors are logged at debug level and yield nothing,
/// and recall here never counts as an access (docs §4.2).
#[derive(Clone, Debug)]
pub struct MemoryRecall {
    store: Arc<MemoryStore>,
}

impl MemoryRecall {
    pub fn new(store: Arc<MemoryStore>) -> Self {
        MemoryRecall { store }
    }

    pub fn store(&self) -> &Arc<MemoryStore> {
        &self.store
    }
}

impl RecallHook for MemoryRecall {
    fn recall(&self, query: &str, max_results: usize) -> Vec<Recalled> {
        // Only the user's own memories: outside notes (an MCP client's) are
        // never put in front of the user's message (docs §4.2, §13.4).
        match self.store.find_relevant_own(query, max_results, Utc::now()) {
            Ok(entries) => entries
                .into_iter()
                .map(|e| Recalled {
                    unconfirmed: e.is_unconfirmed(),
                    title: e.title,
                    memory_type: e.memory_type,
                    body: e.body,
                })
                .collect(),
            Err(e) => {
                tracing::debug!("memory recall failed: {e}");
                Vec::new()
            }
        }
    }
}

/// The persistent-memory section of the system prompt: the snapshot the
/// store froze when it was opened. Open a store per session (or per turn)
/// for the §4.4 rule "refreshed each user turn, frozen within a run".
pub fn memory_snapshot(store: &MemoryStore) -> String {
    store.snapshot().to_string()
}

/// One prompt line per loaded skill, in load order (user skills first);
/// the prompt's skill count is this vector's length.
pub fn skill_lines(skills: &SkillSet) -> Vec<SkillLine> {
    skills
        .skills()
        .iter()
        .map(|s| SkillLine {
            category: s.category.clone(),
            name: s.name.clone(),
            description: s.description.replace('\n', " "),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::context::skill_descriptions;
    use crate::memory::{MemoryFlags, MemoryType, NewEntry};

    #[test]
    fn recall_maps_entries_and_does_not_track_access() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Arc::new(MemoryStore::open(tmp.path(), MemoryFlags::default()).unwrap());
        store
            .add(
                NewEntry::new(
                    "BRK.B thesis",
                    "Berkshire class B: insurance float.",
                    MemoryType::Project,
                ),
                Utc::now(),
            )
            .unwrap();
        let hook = MemoryRecall::new(store.clone());
        let got = hook.recall("what about BRK.B?", 3);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].title, "BRK.B thesis");
        assert_eq!(got[0].memory_type, "project");
        assert_eq!(store.get("BRK.B thesis").unwrap().unwrap().access_count, 0);
        assert!(hook.recall("nothing matches zzz", 3).is_empty());
    }

    #[test]
    fn skill_lines_feed_the_prompt_grouping() {
        let set = SkillSet::load(None);
        let lines = skill_lines(&set);
        assert_eq!(lines.len(), set.len());
        let text = skill_descriptions(&lines);
        let pos = |s: &str| text.find(s).unwrap();
        assert!(pos("### data-source") < pos("### strategy"));
        assert!(pos("### strategy") < pos("### analysis"));
        assert!(text.contains("  - data-hygiene: "));
    }
}
