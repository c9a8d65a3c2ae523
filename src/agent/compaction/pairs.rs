//! Tool-call pair repair (docs §3.5): orphan results are dropped and calls
//! without a result get a stub, placed directly after their assistant
//! message in call order and before that message's surviving results.

use crate::llm::tokens::FastSet;

use super::message::ChatMessage;

/// What the stub says, so the model knows where the result went.
pub const STUB_TEXT: &str = "[Result from earlier context — see summary above]";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PairRepair {
    pub removed: usize,
    pub stubbed: usize,
}

pub fn fix_tool_pairs<M: ChatMessage>(messages: &mut Vec<M>) -> PairRepair {
    if already_paired(messages) {
        return PairRepair::default();
    }
    repair_by_ids(messages)
}

/// The repair proper: the original's two id sets, then the stubs.
pub(super) fn repair_by_ids<M: ChatMessage>(messages: &mut Vec<M>) -> PairRepair {
    // Decide with ids borrowed from the list, then mutate it.
    let keep: Vec<bool> = {
        let call_ids: FastSet<&str> = messages
            .iter()
            .filter(|m| m.role() == "assistant")
            .flat_map(|m| m.tool_call_refs().map(|(id, _)| id))
            .filter(|id| !id.is_empty())
            .collect();
        messages
            .iter()
            .map(|m| m.role() != "tool" || m.tool_call_id().is_some_and(|id| call_ids.contains(id)))
            .collect()
    };
    let before = messages.len();
    let mut k = keep.iter();
    messages.retain(|_| k.next().copied().unwrap_or(true));
    let removed = before - messages.len();

    let missing: Vec<(usize, String, String)> = {
        let mut answered: FastSet<&str> = messages
            .iter()
            .filter(|m| m.role() == "tool")
            .filter_map(|m| m.tool_call_id())
            .collect();
        let mut out = Vec::new();
        for (i, m) in messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role() == "assistant")
        {
            for (id, name) in m.tool_call_refs() {
                // `insert` is true for an id not answered (nor stubbed) yet.
                if !id.is_empty() && answered.insert(id) {
                    let name = if name.is_empty() { "unknown" } else { name };
                    out.push((i + 1, id.to_string(), name.to_string()));
                }
            }
        }
        out
    };
    let stubbed = missing.len();
    for (at, id, name) in missing.into_iter().rev() {
        messages.insert(at, M::tool_result(&id, &name, STUB_TEXT));
    }
    PairRepair { removed, stubbed }
}

/// Whether each tool result sits right after its assistant turn, in call
/// order, with no other results anywhere: the shape the loop itself writes.
/// Such a list is left unchanged by the repair below, and this check compares
/// neighbouring ids instead of hashing every id twice (it was most of the
/// pass's time on a long transcript).
fn already_paired<M: ChatMessage>(messages: &[M]) -> bool {
    let mut i = 0;
    while let Some(m) = messages.get(i) {
        i += 1;
        match m.role() {
            "tool" => return false,
            "assistant" => {
                for (id, _) in m.tool_call_refs() {
                    match messages.get(i) {
                        Some(r)
                            if !id.is_empty()
                                && r.role() == "tool"
                                && r.tool_call_id() == Some(id) =>
                        {
                            i += 1
                        }
                        _ => return false,
                    }
                }
            }
            _ => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Message, ToolCall};

    fn assistant(ids: &[&str]) -> Message {
        Message::assistant_tool_calls(
            "",
            ids.iter()
                .map(|id| ToolCall::new(*id, format!("f_{id}"), "{}"))
                .collect(),
            None,
        )
    }

    // CL-4 (docs §10.3): the exact ordering.
    #[test]
    fn stubs_go_after_the_assistant_in_call_order() {
        let mut id_less = Message::tool_result("", "x", "no id");
        id_less.tool_call_id = None;
        let mut msgs = vec![
            Message::system("s"),
            assistant(&["a", "b", "c"]),
            Message::tool_result("a", "f_a", "A"),
            Message::tool_result("zzz", "orphan", "O"),
            id_less,
        ];
        let r = fix_tool_pairs(&mut msgs);
        assert_eq!(
            r,
            PairRepair {
                removed: 2,
                stubbed: 2
            }
        );
        let shape: Vec<(String, String)> = msgs
            .iter()
            .map(|m| {
                (
                    m.role.as_str().to_string(),
                    m.tool_call_id.clone().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                ("system".into(), "".into()),
                ("assistant".into(), "".into()),
                ("tool".into(), "b".into()),
                ("tool".into(), "c".into()),
                ("tool".into(), "a".into()),
            ]
        );
        assert!(msgs[2].content.contains("earlier context"));
        assert_eq!(msgs[2].name.as_deref(), Some("f_b"));
    }

    #[test]
    fn balanced_and_empty_lists_are_unchanged() {
        let mut empty: Vec<Message> = vec![];
        assert_eq!(fix_tool_pairs(&mut empty), PairRepair::default());
        let mut ok = vec![
            Message::user("q"),
            assistant(&["a"]),
            Message::tool_result("a", "f_a", "r"),
        ];
        let copy = ok.clone();
        fix_tool_pairs(&mut ok);
        assert_eq!(ok, copy);
        let mut three = vec![assistant(&["x", "y", "z"])];
        assert_eq!(fix_tool_pairs(&mut three).stubbed, 3);
    }
}
