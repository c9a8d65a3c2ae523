//! Five-layer context compaction (docs §3). At the top of every iteration
//! the loop asks the run's [`Compactor`] to count the context (the
//! `watermark` event) and apply the gates, strict `>` and re-counted after
//! each layer:
//!
//! - L1 [`microcompact`] above 50 % of the threshold,
//! - L2 [`collapse`] above 70 %,
//! - L3 [`auto`] (LLM summary with a token-budget tail) above 100 %,
//! - L4: the model's `compact` tool (or `/compact`) runs L3 after the
//!   iteration's tools, with an optional focus topic,
//! - L5: a second L3 in the same run updates the previous summary.
//!
//! Unlike the original, nothing is lost: L1/L2 originals go to the session's
//! transcript archive before the change is kept, L3 writes the full list
//! first, every layer emits start/finish events and a trace record, and a
//! layer that frees less than 5 % is not retried until the context grows.

pub mod archive;
pub mod auto;
pub mod canonical;
pub mod chunks;
pub mod collapse;
pub mod inplace;
pub mod ledger;
pub mod message;
pub mod microcompact;
pub mod pairs;
#[cfg(test)]
mod props;
pub mod report;

use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;

use tokio_util::sync::CancellationToken;

use self::archive::TranscriptArchive;
use self::auto::{AutoParams, CompactError, Summarizer, SummaryError, auto_compact};
use self::collapse::{CollapseParams, collapse};
use self::microcompact::{Touched, microcompact};
pub use self::report::{Layer, LayerReport, Trigger};
use super::events::{AgentEvent, EventSink, NoticeLevel};
use crate::llm::tokens::{Estimator, message_python_len};
use crate::llm::{CallOptions, ChatRequest, Provider, stream_response};
use crate::model::Message;
use crate::store::trace_record::CompactOutcome;
use crate::store::{SharedTrace, trace_record};
use crate::tools::TypedTool;

/// The compaction constants (docs §1.1), all settable in `[compaction]`.
#[derive(Clone, Debug, PartialEq)]
pub struct CompactionSettings {
    /// `bpe` (by model), `o200k_base`, `cl100k_base` or `chars4`.
    pub estimator: String,
    pub keep_recent: usize,
    pub collapse: CollapseParams,
    pub auto: AutoParams,
    /// A layer that frees less than this share is reported as ineffective.
    pub min_gain: f64,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            estimator: "bpe".into(),
            keep_recent: 3,
            collapse: CollapseParams::default(),
            auto: AutoParams::default(),
            min_gain: 0.05,
        }
    }
}

/// A pending manual compaction (`/compact [focus]`), shared between a
/// session and its running loop; consumed at the next iteration.
#[derive(Clone, Debug, Default)]
pub struct CompactionRequest {
    inner: Arc<Mutex<Option<String>>>,
}

impl CompactionRequest {
    pub fn request(&self, focus: &str) {
        if let Ok(mut r) = self.inner.lock() {
            *r = Some(focus.trim().to_string());
        }
    }

    pub fn take(&self) -> Option<String> {
        self.inner.lock().ok().and_then(|mut r| r.take())
    }

    pub fn is_pending(&self) -> bool {
        self.inner.lock().map(|r| r.is_some()).unwrap_or(false)
    }
}

/// Summaries from the run's own provider: one non-streaming-style call per
/// chunk, no tools, bounded by the LLM timeout (docs §3.4 step 8).
pub struct ProviderSummarizer {
    pub provider: Arc<dyn Provider>,
    pub options: CallOptions,
    pub cancel: CancellationToken,
}

impl Summarizer for ProviderSummarizer {
    fn summarize(&self, prompt: String) -> BoxFuture<'_, Result<String, SummaryError>> {
        Box::pin(async move {
            let request = ChatRequest {
                messages: vec![Message::user(prompt)].into(),
                ..ChatRequest::default()
            };
            let mut ignore = |_d: crate::llm::assemble::LiveDelta<'_>| {};
            let call = stream_response(
                self.provider.as_ref(),
                request,
                self.options,
                &self.cancel,
                &mut ignore,
            );
            let response = match self.options.call_timeout {
                // A wall-clock deadline on top of the stream's own timeouts.
                Some(t) => tokio::time::timeout(t, call)
                    .await
                    .map_err(|_| SummaryError::Deadline(t))?,
                None => call.await,
            }?;
            if response.cancelled {
                return Err(SummaryError::Cancelled);
            }
            Ok(response.content)
        })
    }
}

/// Per-message token counts, kept in step with the list so that counting a
/// long history each iteration only counts what is new.
#[derive(Default)]
struct CountCache {
    /// (content length, tool-call count, tokens) per message.
    entries: Vec<(usize, usize, u64)>,
}

impl CountCache {
    fn count(&mut self, estimator: &Estimator, messages: &[Message]) -> u64 {
        match estimator {
            Estimator::Chars4 => {
                // The whole dump: elements, separators and brackets.
                let mut chars = 2 + 2 * messages.len().saturating_sub(1);
                self.sync(messages, |m| message_python_len(m) as u64);
                chars += self.entries.iter().map(|e| e.2 as usize).sum::<usize>();
                chars as u64 / 4
            }
            Estimator::Bpe(b) => {
                self.sync(messages, |m| b.count_message(m));
                self.entries.iter().map(|e| e.2).sum::<u64>() + 3
            }
        }
    }

    fn sync(&mut self, messages: &[Message], count: impl Fn(&Message) -> u64) {
        let valid = self
            .entries
            .iter()
            .zip(messages)
            .take_while(|(e, m)| e.0 == m.content.len() && e.1 == m.tool_calls.len())
            .count();
        self.entries.truncate(valid);
        for m in &messages[valid..] {
            self.entries
                .push((m.content.len(), m.tool_calls.len(), count(m)));
        }
    }

    fn invalidate(&mut self) {
        self.entries.clear();
    }
}

/// Everything the run's compactor needs from the loop.
pub struct CompactorDeps {
    pub settings: CompactionSettings,
    pub estimator: Estimator,
    pub threshold: u64,
    /// Tokens every request carries besides its messages: the tool
    /// schemas (docs §3.1), counted so the gauge reads what is sent.
    pub overhead: u64,
    pub summarizer: Arc<dyn Summarizer>,
    pub archive: TranscriptArchive,
    pub trace: Option<SharedTrace>,
    pub events: EventSink,
}

/// One run's compaction state (the previous summary for L5 is per run).
pub struct Compactor {
    deps: CompactorDeps,
    previous_summary: String,
    counts: CountCache,
    /// Tokens after an ineffective attempt, per layer (L1, L2, L3).
    ineffective_at: [Option<u64>; 3],
    runs: u32,
    /// Server tokens per estimated token, learned from a context-size error
    /// that named the request's size (docs §3.9); 1 until then.
    scale: f64,
}

impl Compactor {
    pub fn new(deps: CompactorDeps) -> Self {
        Compactor {
            deps,
            previous_summary: String::new(),
            counts: CountCache::default(),
            ineffective_at: [None; 3],
            runs: 0,
            scale: 1.0,
        }
    }

    pub fn threshold(&self) -> u64 {
        self.deps.threshold
    }

    /// Tokens every request carries besides its messages (the tool schemas).
    pub fn set_overhead(&mut self, tokens: u64) {
        self.deps.overhead = tokens;
    }

    /// A lower threshold, learned from the model's window (docs §3.9).
    pub fn set_threshold(&mut self, threshold: u64) {
        self.deps.threshold = threshold.max(1);
        self.ineffective_at = [None; 3];
    }

    /// The server counted `reported` tokens where the estimate said
    /// `estimated`: later counts are scaled up to the server's (never down).
    pub fn calibrate(&mut self, reported: u64, estimated: u64) {
        if estimated > 0 {
            self.scale = (self.scale * reported as f64 / estimated as f64).max(1.0);
        }
    }

    pub fn estimator(&self) -> Estimator {
        self.deps.estimator
    }

    /// Compactions done in this run.
    pub fn compactions(&self) -> u32 {
        self.runs
    }

    pub fn gates(&self) -> [u64; 3] {
        let t = self.deps.threshold;
        [t / 2, (t as f64 * 0.7) as u64, t]
    }

    /// The request's tokens: the messages, the tool schemas, scaled to the
    /// server's count once it is known.
    pub fn count(&mut self, messages: &[Message]) -> u64 {
        let raw = self.counts.count(&self.deps.estimator, messages) + self.deps.overhead;
        (raw as f64 * self.scale).round() as u64
    }

    /// Counts, reports the watermark, and applies the gated layers.
    /// Returns the tokens after compaction.
    pub async fn on_iteration(
        &mut self,
        iter: u64,
        messages: &mut Vec<Message>,
        state_summary: &str,
    ) -> u64 {
        let mut tokens = self.count(messages);
        let gates = self.gates();
        self.deps.events.emit(AgentEvent::Watermark {
            iter,
            tokens,
            threshold: self.deps.threshold,
            gates,
            estimator: self.deps.estimator.name().to_string(),
            messages: messages.len(),
        });
        let collapse = self.deps.settings.collapse;
        if tokens > gates[0] && self.may_retry(Layer::Micro, tokens) {
            tokens = self.layer_in_place(
                iter,
                messages,
                Layer::Micro,
                tokens,
                Trigger::Threshold,
                collapse,
            );
        }
        if tokens > gates[1] && self.may_retry(Layer::Collapse, tokens) {
            tokens = self.layer_in_place(
                iter,
                messages,
                Layer::Collapse,
                tokens,
                Trigger::Threshold,
                collapse,
            );
        }
        if tokens > gates[2] && self.may_retry(Layer::Auto, tokens) {
            tokens = self
                .auto(iter, messages, Trigger::Threshold, "", state_summary)
                .await;
        }
        tokens
    }

    /// A layer that was ineffective is retried only once the context has
    /// grown by the minimum gain again (so it never loops on itself).
    fn may_retry(&self, layer: Layer, tokens: u64) -> bool {
        match self.ineffective_at[layer.index()] {
            Some(at) => tokens as f64 > at as f64 * (1.0 + self.deps.settings.min_gain),
            None => true,
        }
    }

    /// Fits the context under the threshold after a context-size error
    /// (docs §3.9): old tool results cleared, every long message but the
    /// system prompt cut to `max_chars` (the newest tool result included:
    /// it is usually what overflowed), then a summary if that is not
    /// enough. Returns the tokens after.
    pub async fn fit(
        &mut self,
        iter: u64,
        messages: &mut Vec<Message>,
        max_chars: usize,
        state_summary: &str,
    ) -> u64 {
        let trigger = Trigger::ContextError;
        let mut tokens = self.count(messages);
        let tight = CollapseParams {
            preserve_recent: 0,
            min_chars: max_chars,
            head_chars: max_chars * 3 / 5,
            tail_chars: max_chars / 4,
        };
        if tokens > self.deps.threshold {
            tokens = self.layer_in_place(iter, messages, Layer::Micro, tokens, trigger, tight);
        }
        if tokens > self.deps.threshold {
            tokens = self.layer_in_place(iter, messages, Layer::Collapse, tokens, trigger, tight);
        }
        if tokens > self.deps.threshold {
            tokens = self.auto(iter, messages, trigger, "", state_summary).await;
        }
        tokens
    }

    fn layer_in_place(
        &mut self,
        iter: u64,
        messages: &mut [Message],
        layer: Layer,
        before: u64,
        trigger: Trigger,
        params: CollapseParams,
    ) -> u64 {
        let name = layer.as_str();
        // What came after the model's last turn, it has not read yet: never
        // cleared or cut. The original clears a batch's own results when the
        // batch has more than 3 calls, so the model never sees them, and the
        // 1.5B model called the same tools again (docs §3.2). After a
        // context-size error they are what overflowed, and are cut (§3.9).
        let unread = if trigger == Trigger::ContextError {
            0
        } else {
            unread_since_last_turn(messages)
        };
        let unread_results = messages[messages.len() - unread..]
            .iter()
            .filter(|m| m.role == crate::model::Role::Tool)
            .count();
        let touched: Vec<Touched> = if layer == Layer::Micro {
            microcompact(messages, self.deps.settings.keep_recent.max(unread_results))
        } else {
            let params = CollapseParams {
                preserve_recent: params.preserve_recent.max(unread),
                ..params
            };
            collapse(messages, params)
        };
        if touched.is_empty() {
            self.ineffective_at[layer.index()] = Some(before);
            return before;
        }
        self.deps.events.emit(AgentEvent::CompactionStarted {
            iter,
            layer: name.into(),
            trigger: trigger.as_str().into(),
            tokens_before: before,
        });
        // Archive before lossy: if the originals cannot be saved, undo.
        let archive = match self
            .deps
            .archive
            .archive_originals(iter, name, &touched, messages)
        {
            Ok(p) => Some(p),
            Err(e) => {
                for t in &touched {
                    if let Some(m) = messages.get_mut(t.index) {
                        m.content = t.original_text.clone();
                    }
                }
                self.deps.events.emit(AgentEvent::Notice {
                    level: NoticeLevel::Warning,
                    message: format!("{name} skipped: cannot archive the originals first ({e})"),
                });
                None
            }
        };
        let touched_n = if archive.is_some() { touched.len() } else { 0 };
        let after = self.count(messages);
        self.finish(LayerReport {
            iter,
            layer,
            trigger,
            tokens_before: before,
            tokens_after: after,
            messages_touched: touched_n,
            archive_path: archive.map(|p| p.display().to_string()),
            degraded: false,
            summary: None,
        });
        after
    }

    /// L3 (and L4/L5): summarise the head, keep the tail.
    pub async fn auto(
        &mut self,
        iter: u64,
        messages: &mut Vec<Message>,
        trigger: Trigger,
        focus: &str,
        state_summary: &str,
    ) -> u64 {
        let before = self.count(messages);
        self.deps.events.emit(AgentEvent::CompactionStarted {
            iter,
            layer: Layer::Auto.as_str().into(),
            trigger: trigger.as_str().into(),
            tokens_before: before,
        });
        let estimator = self.deps.estimator;
        let count_text = move |t: &str| estimator.count_text(t);
        let archive = &self.deps.archive;
        let mut write = |m: &[Message]| archive.write_transcript(m);
        // A tail larger than half the threshold could leave the context above
        // the L3 gate after every compaction, paying for a summary each turn.
        let mut params = self.deps.settings.auto;
        params.tail_token_budget = params.tail_token_budget.min(self.deps.threshold / 2);
        let result = auto_compact(
            messages,
            &self.previous_summary,
            focus,
            params,
            &count_text,
            self.deps.summarizer.as_ref(),
            &mut write,
            state_summary,
        )
        .await;
        self.counts.invalidate();
        let after = self.count(messages);
        let mut report = LayerReport {
            iter,
            layer: Layer::Auto,
            trigger,
            tokens_before: before,
            tokens_after: after,
            messages_touched: 0,
            archive_path: None,
            degraded: false,
            summary: None,
        };
        match result {
            Ok(out) if out.nothing_to_compress => {}
            Ok(out) => {
                self.previous_summary = out.summary.clone();
                report.summary = Some(CompactOutcome::Summarized {
                    focus_topic: if focus.is_empty() { "(none)" } else { focus }.into(),
                    summary_chunks: out.chunks,
                    summary: out.summary,
                    head: out.head_len,
                    tail: out.tail_len,
                    pairs_removed: out.repair.removed,
                    pairs_stubbed: out.repair.stubbed,
                    iterative: self.runs > 0,
                });
                report.messages_touched = out.head_len;
                report.archive_path = out.transcript.map(|p| p.display().to_string());
                report.degraded = out.degraded;
            }
            Err(e) => {
                let message = match &e {
                    CompactError::Transcript(_) => e.to_string(),
                    CompactError::Chunks(c) => format!("auto-compact failed: {c}"),
                };
                self.deps.events.emit(AgentEvent::Notice {
                    level: NoticeLevel::Warning,
                    message,
                });
                report.summary = Some(CompactOutcome::Failed {
                    error: e.to_string(),
                });
            }
        }
        self.finish(report);
        // Still above the gate (a huge tail message, say): do not summarise
        // again until the context has grown.
        if after > self.deps.threshold {
            self.ineffective_at[Layer::Auto.index()] = Some(after);
        }
        // Never hand the provider a list that ends with an assistant turn.
        if messages
            .last()
            .is_some_and(|m| m.role == crate::model::Role::Assistant)
        {
            messages.push(Message::steering("Continue."));
        }
        after
    }

    /// Records a layer's run: the ineffective mark, the count of
    /// compactions, the trace record, a notice if it freed too little, and
    /// the `compaction_finished` event.
    fn finish(&mut self, report: LayerReport) {
        let (before, after) = (report.tokens_before, report.tokens_after);
        let freed = before.saturating_sub(after) as f64 / before.max(1) as f64;
        let ineffective = freed < self.deps.settings.min_gain;
        self.ineffective_at[report.layer.index()] = ineffective.then_some(after);
        if report.messages_touched > 0 {
            self.runs += 1;
        }
        if let Some(t) = &self.deps.trace {
            trace_record(
                t,
                report.trace_record(self.deps.estimator.name(), ineffective),
            );
        }
        if ineffective && report.messages_touched > 0 {
            self.deps.events.emit(AgentEvent::Notice {
                level: NoticeLevel::Info,
                message: format!(
                    "{} freed only {:.1}% of the context ({before} → {after} tokens); it will not run again until the context grows",
                    report.layer.as_str(),
                    freed * 100.0
                ),
            });
        }
        self.deps.events.emit(report.event(ineffective));
    }
}

/// The `compact` tool's name, which the loop watches for (docs §2.2 step 1).
pub const COMPACT_TOOL: &str = crate::tools::builtin::compact::CompactTool::NAME;

/// Messages after the last assistant message (the results of its calls
/// and any steering), counted from the end; 0 without an assistant turn.
fn unread_since_last_turn(messages: &[Message]) -> usize {
    messages
        .iter()
        .rposition(|m| m.role == crate::model::Role::Assistant)
        .map_or(0, |i| messages.len() - i - 1)
}
