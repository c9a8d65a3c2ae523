//! Property tests over the layers together: histories shaped as the loop
//! writes them (results after their calls, some missing as after a cancel),
//! then any sequence of L1, L2, L3 and pair repair, archiving as the
//! compactor does, and a final repair.

use std::collections::HashMap;
use std::path::Path;

use proptest::prelude::*;

use super::archive::{TRANSCRIPTS_DIR, TranscriptArchive, read_archive};
use super::auto::{AutoParams, CannedSummaries, auto_compact};
use super::collapse::{CollapseParams, collapse};
use super::microcompact::microcompact;
use super::pairs::{fix_tool_pairs, repair_by_ids};
use crate::model::{Message, Role, ToolCall};

#[derive(Clone, Debug)]
enum Turn {
    User(usize, bool),
    /// Calls as `(answered, result length class, CJK)`, results reversed or not.
    Calls(Vec<(bool, usize, bool)>, bool),
    Text(usize, bool),
}

const LENGTHS: [usize; 5] = [20, 120, 500, 2_600, 6_000];

/// `#n ` and filler up to `LENGTHS[class]` characters: unique per message.
fn text(n: usize, class: usize, cjk: bool) -> String {
    let len = LENGTHS[class % LENGTHS.len()];
    let filler = if cjk {
        "回测数据".repeat(len / 4 + 1)
    } else {
        "data ".repeat(len / 5 + 1)
    };
    format!("#{n} {filler}")
}

fn history(turns: &[Turn]) -> Vec<Message> {
    let mut msgs = vec![Message::system(text(0, 2, false))];
    let mut n = 1;
    let mut next = |class, cjk| {
        n += 1;
        text(n, class, cjk)
    };
    let mut call_no = 0;
    for turn in turns {
        match turn {
            Turn::User(class, cjk) => msgs.push(Message::user(next(*class, *cjk))),
            Turn::Text(class, cjk) => msgs.push(Message::assistant(next(*class, *cjk))),
            Turn::Calls(calls, reversed) => {
                let ids: Vec<String> = calls
                    .iter()
                    .map(|_| {
                        call_no += 1;
                        format!("call_{call_no}")
                    })
                    .collect();
                let tool_calls = ids
                    .iter()
                    .map(|id| ToolCall::new(id, "get_market_data", "{}"))
                    .collect();
                msgs.push(Message::assistant_tool_calls(
                    next(0, false),
                    tool_calls,
                    None,
                ));
                let mut results: Vec<Message> = calls
                    .iter()
                    .zip(&ids)
                    .filter(|((answered, _, _), _)| *answered)
                    .map(|((_, class, cjk), id)| {
                        Message::tool_result(id, "get_market_data", next(*class, *cjk))
                    })
                    .collect();
                if *reversed {
                    results.reverse();
                }
                msgs.extend(results);
            }
        }
    }
    msgs
}

fn turn() -> impl Strategy<Value = Turn> {
    prop_oneof![
        (0..5usize, any::<bool>()).prop_map(|(c, k)| Turn::User(c, k)),
        (0..5usize, any::<bool>()).prop_map(|(c, k)| Turn::Text(c, k)),
        (
            prop::collection::vec((prop::bool::weighted(0.8), 0..5usize, any::<bool>()), 1..4),
            any::<bool>()
        )
            .prop_map(|(calls, rev)| Turn::Calls(calls, rev)),
    ]
}

/// Every message content the archive and the transcripts keep.
fn kept_contents(session: &Path) -> Vec<String> {
    let mut out: Vec<String> = read_archive(session)
        .into_iter()
        .map(|a| a.message.content)
        .collect();
    if let Ok(dir) = std::fs::read_dir(session.join(TRANSCRIPTS_DIR)) {
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if !name.starts_with("transcript_") {
                continue;
            }
            let body = std::fs::read_to_string(entry.path()).unwrap();
            out.extend(
                body.lines()
                    .map(|l| serde_json::from_str::<Message>(l).unwrap().content),
            );
        }
    }
    out
}

fn compact(msgs: &mut Vec<Message>, ops: &[u8], keep_recent: usize, session: &Path) {
    let archive = TranscriptArchive::new(session, "prop");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    for (iter, op) in ops.iter().enumerate() {
        let iter = iter as u64;
        match op {
            0 => {
                let touched = microcompact(msgs, keep_recent);
                archive
                    .archive_originals(iter, "microcompact", &touched, msgs)
                    .unwrap();
            }
            1 => {
                let touched = collapse(msgs, CollapseParams::default());
                archive
                    .archive_originals(iter, "collapse", &touched, msgs)
                    .unwrap();
            }
            2 => {
                fix_tool_pairs(msgs);
            }
            _ => {
                let summaries = CannedSummaries::new(vec![Some("summary".into()); 8]);
                let mut write = |m: &[Message]| archive.write_transcript(m);
                let params = AutoParams {
                    tail_token_budget: 2_000,
                    chunk_chars: 80_000,
                };
                let count = |t: &str| t.chars().count() as u64 / 4;
                rt.block_on(auto_compact(
                    msgs, "", "", params, &count, &summaries, &mut write, "",
                ))
                .unwrap();
            }
        }
    }
    fix_tool_pairs(msgs);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_sequence_of_layers_keeps_pairs_the_system_prompt_and_every_original(
        turns in prop::collection::vec(turn(), 1..30),
        ops in prop::collection::vec(0..4u8, 0..6),
        keep_recent in 0..4usize,
    ) {
        let original = history(&turns);
        let mut msgs = original.clone();
        let dir = tempfile::tempdir().unwrap();
        compact(&mut msgs, &ops, keep_recent, dir.path());

        // Every call has exactly one result, and every result its call.
        let mut results: HashMap<&str, usize> = HashMap::new();
        for m in msgs.iter().filter(|m| m.role == Role::Tool) {
            *results.entry(m.tool_call_id.as_deref().unwrap_or("")).or_default() += 1;
        }
        let calls: Vec<&str> = msgs.iter().flat_map(|m| m.tool_calls.iter().map(|c| c.id.as_str())).collect();
        for id in &calls {
            prop_assert_eq!(results.get(id).copied(), Some(1), "call {} has one result", id);
        }
        for id in results.keys() {
            prop_assert!(calls.contains(id), "result {} has its call", id);
        }
        prop_assert_eq!(&msgs[0], &original[0], "the system prompt is first and unchanged");
        // Nothing is unrecoverable: each original content is still in the
        // list, in the archive of L1/L2 originals, or in an L3 transcript.
        let mut kept = kept_contents(dir.path());
        kept.extend(msgs.iter().map(|m| m.content.clone()));
        for m in &original {
            prop_assert!(kept.contains(&m.content), "lost: {:.40}", m.content);
        }
    }

    /// The neighbour check that skips the id sets changes nothing the full
    /// repair would have changed, on any list (orphans, duplicates, empty
    /// ids, results far from their calls).
    #[test]
    fn the_fast_path_agrees_with_the_full_repair(
        shape in prop::collection::vec((0..4u8, 0..4u8, 0..3usize), 0..14),
    ) {
        let ids = ["a", "b", "", "c"];
        let msgs: Vec<Message> = shape
            .iter()
            .map(|&(kind, id, n)| match kind {
                0 => Message::user("u"),
                1 => Message::assistant_tool_calls(
                    "",
                    (0..n).map(|k| ToolCall::new(ids[(usize::from(id) + k) % 4], "f", "{}")).collect(),
                    None,
                ),
                2 => Message::tool_result(ids[usize::from(id)], "f", "r"),
                _ => Message {
                    tool_call_id: Some(ids[usize::from(id)].into()),
                    ..Message::assistant("x")
                },
            })
            .collect();
        let (mut fast, mut full) = (msgs.clone(), msgs);
        let a = fix_tool_pairs(&mut fast);
        let b = repair_by_ids(&mut full);
        prop_assert_eq!(a, b);
        prop_assert_eq!(fast, full);
    }
}
