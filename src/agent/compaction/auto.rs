//! Layer 3, auto-compact (docs §3.4), which also serves the `compact` tool
//! (L4) and iterative summary updates within a run (L5): the older messages
//! are summarised by the model into a structured handoff, a token-budget
//! tail is kept verbatim, and the list becomes `[system, user(handoff),
//! tail…]`. The full list is written to the transcript archive first; if
//! that write fails nothing is compacted.

use std::path::PathBuf;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Serialize;

use super::chunks::{ChunkError, summary_chunks};
use super::ledger::verification_ledger;
use super::message::ChatMessage;
use super::pairs::{PairRepair, fix_tool_pairs};
use crate::agent::context::fill_template;
use crate::model::HANDOFF_PREFIX;

pub const STRUCTURED_TEMPLATE: &str = include_str!("../../../assets/prompts/compact_structured.md");
pub const UPDATE_TEMPLATE: &str = include_str!("../../../assets/prompts/compact_update.md");
pub const FOCUS_TEMPLATE: &str = include_str!("../../../assets/prompts/compact_focus.md");

/// The last message's instruction after a compaction (upstream tests look
/// for "Continue from the summary above").
pub const CONTINUE_INSTRUCTION: &str = "<system>Continue from the summary above. Pick up the remaining work; do not repeat finished steps or re-fetch results listed as verified.</system>";

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoParams {
    /// Tokens of recent messages kept verbatim (spec: 20 000).
    pub tail_token_budget: u64,
    /// Characters per summary chunk (spec: 80 000).
    pub chunk_chars: usize,
}

impl Default for AutoParams {
    fn default() -> Self {
        AutoParams {
            tail_token_budget: 20_000,
            chunk_chars: 80_000,
        }
    }
}

/// Writes one summary. Errors and timeouts make the compaction degraded.
pub trait Summarizer: Send + Sync {
    fn summarize(&self, prompt: String) -> BoxFuture<'_, Result<String, SummaryError>>;
}

/// Why one summary call gave nothing.
#[derive(Debug, thiserror::Error)]
pub enum SummaryError {
    #[error("no summary within {}s", .0.as_secs_f64())]
    Deadline(std::time::Duration),
    #[error(transparent)]
    Llm(#[from] crate::llm::LlmError),
    #[error("cancelled")]
    Cancelled,
}

#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error("cannot write the transcript before compacting, so nothing was compacted: {0}")]
    Transcript(crate::store::StoreError),
    #[error(transparent)]
    Chunks(#[from] ChunkError),
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct AutoOutcome {
    /// True when there was nothing old enough to summarise; the list is unchanged.
    pub nothing_to_compress: bool,
    pub summary: String,
    pub chunks: usize,
    pub summary_calls: usize,
    pub degraded: bool,
    pub transcript: Option<PathBuf>,
    pub head_len: usize,
    pub tail_len: usize,
    pub repair: PairRepair,
}

/// Where the body splits: the tail is the newest messages within the token
/// budget (each costs its content's tokens + 10), never starting on a tool
/// result whose call would be summarised away.
pub fn tail_cut<M: ChatMessage>(
    body: &[M],
    budget: u64,
    count_text: &(dyn Fn(&str) -> u64 + Sync),
) -> usize {
    let mut used = 0u64;
    let mut cut = 0;
    for (i, m) in body.iter().enumerate().rev() {
        // `str(None)` is "None" in the original: 4 characters.
        let cost = m.text().map_or(1, count_text) + 10;
        if used + cost > budget {
            cut = i + 1;
            break;
        }
        used += cost;
    }
    while cut > 0 && cut < body.len() && body[cut].role() == "tool" {
        cut += 1;
    }
    cut
}

#[allow(clippy::too_many_arguments)]
pub async fn auto_compact<M: ChatMessage + Serialize>(
    messages: &mut Vec<M>,
    previous_summary: &str,
    focus: &str,
    params: AutoParams,
    count_text: &(dyn Fn(&str) -> u64 + Sync),
    summarizer: &dyn Summarizer,
    write_transcript: &mut (dyn FnMut(&[M]) -> Result<PathBuf, crate::store::StoreError> + Send),
    state_summary: &str,
) -> Result<AutoOutcome, CompactError> {
    if messages.len() < 2 {
        return Ok(AutoOutcome {
            nothing_to_compress: true,
            ..AutoOutcome::default()
        });
    }
    let body = &messages[1..];
    let mut cut = tail_cut(body, params.tail_token_budget, count_text);
    if cut == 0 {
        if body.len() > 2 {
            // Everything fits the tail budget but the context is still too
            // big: force a half split (no pair adjustment, as in the original;
            // pair repair below drops a stranded result, which the transcript keeps).
            cut = (body.len() / 2).max(1);
        } else {
            return Ok(AutoOutcome {
                nothing_to_compress: true,
                ..AutoOutcome::default()
            });
        }
    }
    // The transcript is written only when something will be compressed
    // (the original also writes one for "nothing to compress", §12.15).
    let transcript = write_transcript(messages).map_err(CompactError::Transcript)?;
    let body = &messages[1..];
    let (head, tail) = body.split_at(cut.min(body.len()));

    let focus_block = if focus.trim().is_empty() {
        String::new()
    } else {
        fill_template(FOCUS_TEMPLATE, |k| {
            (k == "focus_topic").then(|| focus.trim().to_string())
        })
    };
    let chunks = summary_chunks(head, params.chunk_chars)?;
    let mut summary = previous_summary.to_string();
    let mut degraded = false;
    let mut calls = 0;
    for chunk in &chunks {
        let prompt = if summary.is_empty() {
            fill_template(STRUCTURED_TEMPLATE, |k| match k {
                "focus" => Some(focus_block.clone()),
                "conversation" => Some(chunk.clone()),
                _ => None,
            })
        } else {
            fill_template(UPDATE_TEMPLATE, |k| match k {
                "focus" => Some(focus_block.clone()),
                "previous_summary" => Some(summary.clone()),
                "conversation" => Some(chunk.clone()),
                _ => None,
            })
        };
        calls += 1;
        match summarizer.summarize(prompt).await {
            Ok(s) if !s.trim().is_empty() => summary = s.trim().to_string(),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!("compaction summary failed: {e}");
                degraded = true;
                break;
            }
        }
    }
    if degraded && summary.trim().is_empty() {
        summary = format!(
            "[Compaction degraded: the summary call timed out or failed, so earlier messages and tool results were dropped without a summary. The full transcript is at {}.]",
            transcript.display()
        );
    }
    let ledger = verification_ledger(head);

    let mut handoff = format!(
        "{HANDOFF_PREFIX} the full transcript is at {}]\n\n{}",
        transcript.display(),
        summary
    );
    if !ledger.is_empty() {
        handoff.push_str("\n\n[Verified results from earlier context: do not re-run these]\n");
        handoff.push_str(&ledger);
    }
    if !state_summary.trim().is_empty() && state_summary.trim() != "(empty state)" {
        handoff.push_str("\n\nCurrent agent state:\n");
        handoff.push_str(state_summary.trim());
    }
    handoff.push_str("\n\n");
    handoff.push_str(CONTINUE_INSTRUCTION);

    let head_len = head.len();
    let tail: Vec<M> = tail.to_vec();
    let tail_len = tail.len();
    let system = messages[0].clone();
    let mut rebuilt = Vec::with_capacity(tail_len + 2);
    rebuilt.push(system);
    rebuilt.push(M::user(handoff));
    rebuilt.extend(tail);
    let repair = fix_tool_pairs(&mut rebuilt);
    *messages = rebuilt;
    Ok(AutoOutcome {
        nothing_to_compress: false,
        summary,
        chunks: chunks.len(),
        summary_calls: calls,
        degraded,
        transcript: Some(transcript),
        head_len,
        tail_len,
        repair,
    })
}

/// A summariser that returns canned replies in order (`None` = an error).
/// For tests and the `vibedesk compact` inspector's dry runs.
pub struct CannedSummaries {
    replies: std::sync::Mutex<std::collections::VecDeque<Option<String>>>,
    prompts: std::sync::Mutex<Vec<String>>,
    delay: Duration,
}

impl CannedSummaries {
    pub fn new(replies: Vec<Option<String>>) -> Self {
        CannedSummaries {
            replies: std::sync::Mutex::new(replies.into()),
            prompts: std::sync::Mutex::default(),
            delay: Duration::ZERO,
        }
    }

    pub fn prompts(&self) -> Vec<String> {
        self.prompts.lock().map(|p| p.clone()).unwrap_or_default()
    }
}

impl Summarizer for CannedSummaries {
    fn summarize(&self, prompt: String) -> BoxFuture<'_, Result<String, SummaryError>> {
        if let Ok(mut p) = self.prompts.lock() {
            p.push(prompt);
        }
        let next = self.replies.lock().ok().and_then(|mut r| r.pop_front());
        let delay = self.delay;
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            match next {
                Some(Some(s)) => Ok(s),
                Some(None) => Err(SummaryError::Llm(crate::llm::LlmError::Config(
                    "canned failure".into(),
                ))),
                None => Ok(String::new()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Message, ToolCall};

    fn chars4(t: &str) -> u64 {
        t.chars().count() as u64 / 4
    }

    async fn run(
        msgs: &mut Vec<Message>,
        prev: &str,
        focus: &str,
        params: AutoParams,
        s: &CannedSummaries,
    ) -> AutoOutcome {
        let dir = tempfile::tempdir().unwrap();
        let archive = super::super::archive::TranscriptArchive::new(dir.path(), "r");
        let mut write = |m: &[Message]| archive.write_transcript(m);
        auto_compact(
            msgs,
            prev,
            focus,
            params,
            &chars4,
            s,
            &mut write,
            "- run_dir: /x",
        )
        .await
        .unwrap()
    }

    // CL-8 (docs §10.3): chunked summaries, the update template, empty replies.
    #[tokio::test]
    async fn chunked_summary_folds_each_chunk_once() {
        let mut msgs = vec![Message::system("sys")];
        for i in 0..8 {
            let role = if i % 2 == 0 {
                Message::user
            } else {
                Message::assistant
            };
            msgs.push(role(format!("MARKER-{i} ") + &"w".repeat(30_000)));
        }
        let s = CannedSummaries::new(vec![
            Some("summary-0".into()),
            Some(String::new()),
            Some("summary-2".into()),
        ]);
        let out = run(&mut msgs, "", "", AutoParams::default(), &s).await;
        let prompts = s.prompts();
        assert_eq!(
            prompts.len(),
            3,
            "six head messages of 30k chars in 80k chunks"
        );
        assert_eq!(out.chunks, 3);
        assert!(
            prompts[0].contains("## Constraints & Preferences")
                && prompts[0].contains("### In Progress")
        );
        assert!(prompts[1].contains("Previous summary:\nsummary-0"));
        assert!(
            prompts[2].contains("summary-0"),
            "an empty reply keeps the previous summary"
        );
        assert_eq!(out.summary, "summary-2");
        for i in 0..6 {
            let hits = prompts
                .iter()
                .filter(|p| p.contains(&format!("MARKER-{i} ")))
                .count();
            assert_eq!(hits, 1, "marker {i}");
        }
        assert_eq!(msgs.len(), 4, "system, handoff, 2 tail messages");
        assert!(msgs[1].content.contains("summary-2"));
        assert!(msgs[3].content.starts_with("MARKER-7"));
    }

    #[tokio::test]
    async fn handoff_is_a_user_message_ending_with_the_continue_instruction() {
        let mut msgs = vec![Message::system("sys"), Message::user("q".repeat(2000))];
        msgs.push(Message::assistant_tool_calls(
            "",
            vec![ToolCall::new("c1", "calc", "{}")],
            None,
        ));
        msgs.push(Message::tool_result(
            "c1",
            "financial_rigor",
            r#"{"status":"ok","command":"calc","expression":"1+1","result_exact":"2"}"#,
        ));
        msgs.push(Message::assistant("a".repeat(4000)));
        msgs.push(Message::user("latest"));
        let s = CannedSummaries::new(vec![Some("## Goal\nstuff".into())]);
        let params = AutoParams {
            tail_token_budget: 100,
            chunk_chars: 80_000,
        };
        let out = run(&mut msgs, "", "AAPL drawdown", params, &s).await;
        assert!(!out.nothing_to_compress);
        assert_eq!(msgs[0].content, "sys");
        assert_eq!(msgs[1].role, crate::model::Role::User);
        assert!(
            msgs[1].content.contains("Verified results")
                && msgs[1].content.contains("calc 1+1 = 2")
        );
        assert!(msgs[1].content.contains("- run_dir: /x"));
        assert!(msgs[1].content.ends_with(CONTINUE_INSTRUCTION));
        assert!(s.prompts()[0].contains("Focus topic: AAPL drawdown"));
        assert_eq!(msgs.last().unwrap().content, "latest");
    }

    #[tokio::test]
    async fn the_tail_never_starts_on_an_orphan_result() {
        let body = vec![
            Message::user("u".repeat(400)),
            Message::assistant_tool_calls("", vec![ToolCall::new("c", "t", "{}")], None),
            Message::tool_result("c", "t", "r".repeat(40)),
            Message::user("tail"),
        ];
        // Budget fits the last two (tool result + user): the cut lands on the
        // tool result and moves past it.
        let cut = tail_cut(&body, 35, &chars4);
        assert_eq!(cut, 3);
    }

    // CL-10: a failed summary call degrades with a note naming the transcript.
    #[tokio::test]
    async fn failed_summary_degrades_with_a_note() {
        let mut msgs = vec![Message::system("s")];
        msgs.extend((0..6).map(|i| Message::user(format!("{i}") + &"z".repeat(1000))));
        let s = CannedSummaries::new(vec![None]);
        let params = AutoParams {
            tail_token_budget: 300,
            chunk_chars: 80_000,
        };
        let out = run(&mut msgs, "", "", params, &s).await;
        assert!(out.degraded);
        assert!(msgs[1].content.contains("Compaction degraded"));
        assert!(msgs[1].content.contains("transcript_"));
    }

    #[tokio::test]
    async fn tiny_lists_have_nothing_to_compress_and_write_no_transcript() {
        let dir = tempfile::tempdir().unwrap();
        let mut msgs = vec![Message::system("s"), Message::user("hi")];
        let s = CannedSummaries::new(vec![]);
        let mut writes = 0;
        let mut write = |_m: &[Message]| {
            writes += 1;
            Ok(dir.path().join("t"))
        };
        let out = auto_compact(
            &mut msgs,
            "",
            "",
            AutoParams::default(),
            &chars4,
            &s,
            &mut write,
            "",
        )
        .await
        .unwrap();
        assert!(out.nothing_to_compress);
        assert_eq!(writes, 0);
        assert_eq!(msgs.len(), 2);
    }

    #[tokio::test]
    async fn a_failed_transcript_write_compacts_nothing() {
        let mut msgs = vec![Message::system("s")];
        msgs.extend((0..6).map(|_| Message::user("y".repeat(1000))));
        let before = msgs.clone();
        let s = CannedSummaries::new(vec![Some("x".into())]);
        let mut write = |_m: &[Message]| {
            Err::<PathBuf, _>(crate::store::StoreError::Invalid("disk full".into()))
        };
        let params = AutoParams {
            tail_token_budget: 300,
            chunk_chars: 80_000,
        };
        let e = auto_compact(&mut msgs, "", "", params, &chars4, &s, &mut write, "")
            .await
            .unwrap_err();
        assert!(e.to_string().contains("disk full"));
        assert_eq!(msgs, before);
        assert!(s.prompts().is_empty());
    }
}
