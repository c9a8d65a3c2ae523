//! The ReAct loop (spec §1). One [`Loop::run`] is one user turn: set-up,
//! up to `max_iterations` model calls with tools in between, and a terminal
//! status with a reason on every path.
//!
//! Cancellation checkpoints (spec §1.11): A at the top of every iteration, B
//! inside the stream (partial reply returned), C right after the stream (the
//! reply's tool calls are discarded), D/E before each tool batch.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::compaction::archive::TranscriptArchive;
use super::compaction::{
    COMPACT_TOOL, CompactionRequest, Compactor, CompactorDeps, ProviderSummarizer,
};
use super::config::LoopConfig;
use super::context::{self, PromptInputs, RecallHook, SkillLine};
use super::events::{AgentEvent, EventSink, NoticeLevel, RunStatus, ToolEvent};
use super::grounding::{AnswerCheck, AnswerContext, PendingWriteCheck};
use super::input;
use super::usage::UsageLedger;
use super::watchdog::{self, Activity};
use crate::llm::assemble::{LiveDelta, contains_tool_markup};
use crate::llm::tokens::Estimator;
use crate::llm::{CallOptions, ChatRequest, LlmError, Provider, Response, stream_response};
use crate::model::{Message, Usage};
use crate::store::run_state::{RunState, Status, current_process_identity};
use crate::store::trace::{LARGE_TEXT_BYTES, refer_to_message_log};
use crate::store::{
    MessageLog, RunDir, RunStateStore, SharedTrace, StoredMessage, TraceWriter, atomic_write_json,
    trace_record,
};
use crate::tools::events::ToolCallStatus;
use crate::tools::events::ToolEventSink;
use crate::tools::{Authorizer, BackgroundQueue, Registry, Scheduler, ToolContext};

/// Everything a loop needs that outlives one run.
#[derive(Clone)]
pub struct LoopDeps {
    pub provider: Arc<dyn Provider>,
    pub registry: Arc<Registry>,
    pub config: LoopConfig,
    /// Where run directories are created (`<data>/runs`).
    pub runs_root: PathBuf,
    pub answer_check: Arc<dyn AnswerCheck>,
    pub authorizer: Option<Arc<dyn Authorizer>>,
    pub recall: Option<Arc<dyn RecallHook>>,
    pub skills: Vec<SkillLine>,
    /// Persistent-memory snapshot for the system prompt (frozen per run).
    pub memory_snapshot: String,
}

impl LoopDeps {
    pub fn new(
        provider: Arc<dyn Provider>,
        registry: Arc<Registry>,
        config: LoopConfig,
        runs_root: PathBuf,
    ) -> Self {
        LoopDeps {
            provider,
            registry,
            config,
            runs_root,
            answer_check: Arc::new(PendingWriteCheck),
            authorizer: None,
            recall: None,
            skills: Vec::new(),
            memory_snapshot: String::new(),
        }
    }
}

/// One user turn to run.
#[derive(Clone, Debug)]
pub struct RunRequest {
    pub prompt: String,
    /// Earlier turns to replay (see `context::history_from_stored`).
    pub history: Vec<Message>,
    pub session_id: String,
    /// The session directory: trace and message log live here.
    pub session_dir: PathBuf,
    /// The session's persistent workspace (file tools' root).
    pub workspace: PathBuf,
    pub background: BackgroundQueue,
    /// A manual `/compact` request, consumed at the next iteration.
    pub compaction: CompactionRequest,
    /// Warnings about what the session could not read (e.g. unreadable
    /// lines of its message log), emitted as notices right after
    /// `run_started`, so the user sees what the run's history left out.
    pub notices: Vec<String>,
}

/// `error_code` of a turn refused for an oversized message.
pub const MESSAGE_TOO_LARGE: &str = "message_too_large";

/// How a run ended.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    pub status: RunStatus,
    pub reason: String,
    /// `provider_stream_error`, `agent_loop_error`, … when the run failed on an error.
    pub error_code: Option<String>,
    pub content: String,
    pub run_id: String,
    pub run_dir: PathBuf,
    pub iterations: u32,
    pub max_iterations: u32,
    pub degraded: bool,
    pub usage: Usage,
    pub provider: String,
    pub configured_model: String,
    /// Provider-reported model if any, else the configured one.
    pub model: String,
    pub content_filter_warning: Option<String>,
}

/// A loop instance; reusable across the runs of one session so that
/// iteration numbers stay monotonic (spec §1.2 step 8).
pub struct Loop {
    deps: LoopDeps,
    iter: u64,
    counters: Vec<(String, u32)>,
}

/// Why the iteration loop ended, before the terminal-status rules apply.
enum Exit {
    /// Fell off the end of `max_iterations`.
    Exhausted,
    Cancelled,
    Answered,
    ContentFilterBreaker(u32),
    EmptyReplies,
    ProviderError(LlmError),
    StoreError(String),
    ToolsOnForcedTurn,
}

/// Per-run mutable state.
struct TurnState {
    messages: Vec<Message>,
    final_text: String,
    degraded_reasons: Vec<String>,
    empty_total_at: Option<u32>,
    consecutive_empty: u32,
    filtered_total: u32,
    filtered_consecutive: u32,
    validations: u32,
    written: Vec<PathBuf>,
    reported_model: Option<String>,
    step: u32,
}

impl Loop {
    pub fn new(deps: LoopDeps) -> Self {
        Loop {
            deps,
            iter: 0,
            counters: Vec::new(),
        }
    }

    pub fn deps(&self) -> &LoopDeps {
        &self.deps
    }

    /// Ends a turn that never started (no run dir, nothing recorded): a
    /// `failed` outcome with `reason`, announced as the run's end.
    pub fn refuse(&self, reason: String, error_code: &str, events: &EventSink) -> RunOutcome {
        let provider = &self.deps.provider;
        let outcome = RunOutcome {
            status: RunStatus::Failed,
            reason,
            error_code: Some(error_code.into()),
            content: String::new(),
            run_id: String::new(),
            run_dir: PathBuf::new(),
            iterations: 0,
            max_iterations: self.deps.config.max_iterations.max(1),
            degraded: false,
            usage: Usage::default(),
            provider: provider.name().to_string(),
            configured_model: provider.model().to_string(),
            model: provider.model().to_string(),
            content_filter_warning: None,
        };
        events.emit(run_finished(&outcome));
        outcome
    }

    /// Runs one turn. `cancel` may already be cancelled (a cancel that arrived
    /// while queued): the run then ends before any model call (spec §1.2).
    pub async fn run(
        &mut self,
        req: RunRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> RunOutcome {
        let cfg = self.deps.config.clone();
        let max = cfg.max_iterations.max(1);
        let provider = self.deps.provider.clone();
        let store = RunStateStore::new(&self.deps.runs_root);
        let run_cancel = cancel.child_token();
        let started_at = SystemTime::now();

        // An oversized message is refused before anything is written.
        if let Err(e) = input::check_message_size(req.prompt.len(), cfg.max_message_bytes, &|| {
            req.workspace.display().to_string()
        }) {
            return self.refuse(e.to_string(), MESSAGE_TOO_LARGE, &events);
        }
        // Set-up failures end the run immediately, with a reason.
        let (run, trace, mut log) = match self.set_up(&store, &req, &cfg) {
            Ok(x) => x,
            Err(reason) => return self.refuse(reason, "agent_loop_error", &events),
        };
        if self.iter == 0 {
            self.iter = TraceWriter::max_iter(&req.session_dir);
        }
        let run_id = run.id.clone();
        let mut usage = UsageLedger::new(
            run.path.join("llm_usage.json"),
            provider.name(),
            provider.model(),
        );

        // Messages: [system, *history, user(with recalled memories)].
        let state_summary =
            context::workspace_summary(Some(&run.path), Some(&req.workspace), &self.counters);
        let system = context::system_prompt(&PromptInputs {
            registry: &self.deps.registry,
            skills: &self.deps.skills,
            state: &state_summary,
            memory_snapshot: &self.deps.memory_snapshot,
            now: chrono::Utc::now(),
        });
        let recalled = self
            .deps
            .recall
            .as_ref()
            .map(|r| r.recall(&req.prompt, 3))
            .unwrap_or_default();
        let mut messages = vec![Message::system(system)];
        messages.extend(req.history.iter().cloned());
        messages.push(Message::user(context::with_recall(&req.prompt, &recalled)));

        // The message log first: a large prompt's trace records refer to it.
        let logged = log.is_some() && persist(&mut log, Message::user(req.prompt.clone()), &run_id);
        let once = logged && req.prompt.len() > LARGE_TEXT_BYTES;
        let preview_chars = match trace.lock() {
            Ok(t) => t.options().preview_chars,
            Err(poisoned) => poisoned.into_inner().options().preview_chars,
        };
        let mut start = json!({"type": "start", "iter": self.iter + 1, "run_id": run_id});
        let mut user = json!({"type": "message", "iter": self.iter + 1, "role": "user"});
        for (record, field) in [(&mut start, "prompt"), (&mut user, "content")] {
            if let Some(obj) = record.as_object_mut() {
                if once {
                    refer_to_message_log(obj, field, &req.prompt, preview_chars);
                } else {
                    obj.insert(field.into(), json!(req.prompt));
                }
            }
        }
        trace_record(&trace, start);
        trace_record(&trace, user);
        events.emit(AgentEvent::RunStarted {
            run_id: run_id.clone(),
            session_id: req.session_id.clone(),
            run_dir: run.path.display().to_string(),
            provider: provider.name().to_string(),
            model: provider.model().to_string(),
            max_iterations: max,
        });
        for message in &req.notices {
            events.emit(AgentEvent::Notice {
                level: NoticeLevel::Warning,
                message: message.clone(),
            });
        }

        let activity = Activity::new();
        let watchdog_done = CancellationToken::new();
        if let Some(t) = cfg.stall_timeout {
            tokio::spawn(watchdog::watch(
                t,
                activity.clone(),
                events.clone(),
                run_cancel.clone(),
                watchdog_done.clone(),
            ));
        }

        // Tool events flow through unchanged; a finished call is progress.
        let tool_sink: ToolEventSink = {
            let events = events.clone();
            let activity = activity.clone();
            Arc::new(move |e: ToolEvent| {
                if matches!(e, ToolEvent::ToolCallFinished { .. }) {
                    activity.mark();
                }
                events.emit(AgentEvent::Tool(e));
            })
        };
        let mut scheduler =
            Scheduler::new(self.deps.registry.clone(), cfg.scheduler.clone(), tool_sink)
                .with_trace(trace.clone());
        if let Some(a) = &self.deps.authorizer {
            scheduler = scheduler.with_authorizer(a.clone());
        }
        let tool_base = ToolContext {
            call_id: String::new(),
            session_id: req.session_id.clone(),
            run_dir: run.path.clone(),
            workspace: req.workspace.clone(),
            cancel: run_cancel.clone(),
            background: req.background.clone(),
        };

        let estimator = Estimator::from_name(&cfg.compaction.estimator, provider.model())
            .unwrap_or_else(|| Estimator::for_model(provider.model()));
        let mut compactor = Compactor::new(CompactorDeps {
            settings: cfg.compaction.clone(),
            estimator,
            threshold: cfg.token_threshold,
            summarizer: Arc::new(ProviderSummarizer {
                provider: provider.clone(),
                options: CallOptions {
                    idle_timeout: cfg.idle_timeout,
                    call_timeout: cfg.llm_timeout,
                },
                cancel: run_cancel.clone(),
            }),
            archive: TranscriptArchive::new(&req.session_dir, &run_id),
            trace: Some(trace.clone()),
            events: events.clone(),
        });
        let mut st = TurnState {
            messages,
            final_text: String::new(),
            degraded_reasons: Vec::new(),
            empty_total_at: None,
            consecutive_empty: 0,
            filtered_total: 0,
            filtered_consecutive: 0,
            validations: 0,
            written: Vec::new(),
            reported_model: None,
            step: 0,
        };
        let answer_check = self.deps.answer_check.clone();
        let wrap_up_at = cfg.wrap_up_at();

        let exit = 'iterations: loop {
            if st.step >= max {
                break Exit::Exhausted;
            }
            // Checkpoint A.
            if run_cancel.is_cancelled() {
                trace_record(&trace, json!({"type": "cancelled", "iter": self.iter}));
                break Exit::Cancelled;
            }
            st.step += 1;
            self.iter += 1;
            let iter = self.iter;
            let step = st.step;
            let last = step == max;
            events.emit(AgentEvent::IterationStarted {
                iter,
                step,
                max_iterations: max,
            });

            // Finished background work of *this* session (spec §12.22).
            let notices = req.background.drain();
            if !notices.is_empty() {
                st.messages
                    .push(Message::user(BackgroundQueue::render(&notices)));
                events.emit(AgentEvent::BackgroundResults {
                    iter,
                    count: notices.len(),
                });
            }

            let state_now = self.state_summary(&run.path, &req.workspace, scheduler.counters());
            compactor
                .on_iteration(iter, &mut st.messages, &state_now)
                .await;
            if let Some(focus) = req.compaction.take() {
                compactor
                    .auto(iter, &mut st.messages, "user", &focus, &state_now)
                    .await;
            }

            let answer_ctx = AnswerContext {
                user_message: &req.prompt,
                written: &st.written,
                run_started: started_at,
                workspace: &req.workspace,
                run_dir: &run.path,
            };
            if step == wrap_up_at && 1 < step && step < max {
                let remaining = max - step;
                let mut text = format!(
                    "[SYSTEM] {remaining} of {max} iterations remain. Finish any outstanding file writes now while tools are still available, do not start new analysis, then answer in plain text (say where any written file is)."
                );
                if let Some(d) = answer_check.directive(&answer_ctx) {
                    trace_record(
                        &trace,
                        json!({"type": "pending_write_directive", "iter": iter}),
                    );
                    text.push(' ');
                    text.push_str(&d);
                }
                st.messages.push(Message::steering(&text));
                trace_record(
                    &trace,
                    json!({"type": "wrap_up", "iter": iter, "remaining": remaining}),
                );
                events.emit(AgentEvent::WrapUp {
                    iter,
                    remaining,
                    max_iterations: max,
                });
            }
            // Penultimate safety net, as a user steering message rather than
            // the original's mid-conversation system message (spec §12.1).
            if max > 1
                && step == max - 1
                && let Some(d) = answer_check.directive(&answer_ctx)
            {
                trace_record(
                    &trace,
                    json!({"type": "pending_write_directive", "iter": iter}),
                );
                st.messages.push(Message::steering(&d));
            }
            if last {
                trace_record(&trace, json!({"type": "forced_text_only", "iter": iter}));
                events.emit(AgentEvent::ForcedTextOnly { iter });
            }

            let request = ChatRequest {
                messages: st.messages.clone(),
                tools: if last {
                    Vec::new()
                } else {
                    self.deps.registry.specs()
                },
                temperature: None,
                max_tokens: None,
                user_request: Some(req.prompt.clone()),
            };
            let response = match self
                .call_model(request, iter, &cfg, &events, &run_cancel, &run, &trace)
                .await
            {
                Ok(r) => r,
                Err(e) => break Exit::ProviderError(e),
            };
            // Checkpoint C: a reply that arrived after cancel is discarded.
            if response.cancelled || run_cancel.is_cancelled() {
                trace_record(&trace, json!({"type": "cancelled", "iter": iter}));
                break Exit::Cancelled;
            }
            activity.mark();
            if let Some(m) = &response.model {
                st.reported_model = Some(m.clone());
                usage.set_model(m);
            }
            if let Some(u) = &response.usage {
                if let Err(e) = usage.record(iter, u) {
                    tracing::warn!("cannot write llm_usage.json: {e}");
                }
                events.emit(AgentEvent::LlmUsage {
                    iter,
                    input_tokens: u.input_tokens,
                    output_tokens: u.output_tokens,
                    total_tokens: u.total_tokens,
                });
            }
            if !response.content.is_empty() {
                trace_record(
                    &trace,
                    json!({"type": "thinking", "iter": iter, "content": response.content}),
                );
                events.emit(AgentEvent::ThinkingDone {
                    iter,
                    content: crate::tools::finalize::preview(&response.content, 500),
                });
            }

            // Content filter (spec §1.3 step 11).
            if response.content_filtered {
                st.filtered_total += 1;
                st.filtered_consecutive += 1;
                if st.filtered_consecutive >= cfg.max_content_filter_skips {
                    trace_record(
                        &trace,
                        json!({"type": "content_filter_circuit_breaker", "iter": iter, "count": st.filtered_consecutive}),
                    );
                    break Exit::ContentFilterBreaker(st.filtered_consecutive);
                }
                trace_record(
                    &trace,
                    json!({"type": "content_filter_skipped", "iter": iter}),
                );
                events.emit(AgentEvent::ContentFiltered {
                    iter,
                    consecutive: st.filtered_consecutive,
                    total: st.filtered_total,
                    limit: cfg.max_content_filter_skips,
                });
                st.messages.push(Message::steering(
                    "Your previous response was blocked by the provider's content moderation. Skip that item and move on to the rest of the task.",
                ));
                continue;
            }
            st.filtered_consecutive = 0;

            if response.tool_calls.is_empty() {
                match self.final_answer_step(
                    &mut st,
                    response,
                    iter,
                    max,
                    &answer_ctx_owned(&req, &run.path, started_at),
                    &*answer_check,
                    &events,
                    &trace,
                ) {
                    Step::Continue => continue,
                    Step::Answered => {
                        persist(&mut log, Message::assistant(st.final_text.clone()), &run_id);
                        break Exit::Answered;
                    }
                    Step::EmptyLimit => break Exit::EmptyReplies,
                }
            }

            // The model called tools on the iteration that offered none.
            // The original executes them (spec §12.19); we never run tools
            // that were not offered, and use any text as the answer.
            if last {
                if !response.content.trim().is_empty() && !contains_tool_markup(&response.content) {
                    let content = response.content.clone();
                    st.degraded_reasons
                        .push("the model requested tools on the final, tools-withheld iteration; its text was kept as the answer".into());
                    let mut text_only = response;
                    text_only.tool_calls.clear();
                    text_only.content = content;
                    match self.final_answer_step(
                        &mut st,
                        text_only,
                        iter,
                        max,
                        &answer_ctx_owned(&req, &run.path, started_at),
                        &*answer_check,
                        &events,
                        &trace,
                    ) {
                        Step::Answered => {
                            persist(&mut log, Message::assistant(st.final_text.clone()), &run_id);
                            break Exit::Answered;
                        }
                        _ => break Exit::ToolsOnForcedTurn,
                    }
                }
                break Exit::ToolsOnForcedTurn;
            }

            let reasoning = (!response.reasoning.is_empty()).then(|| response.reasoning.clone());
            let assistant = Message::assistant_tool_calls(
                response.content.clone(),
                response.tool_calls.clone(),
                reasoning,
            );
            st.messages.push(assistant.clone());
            if !persist(&mut log, assistant, &run_id) {
                break Exit::StoreError("cannot append to the session's messages.jsonl".into());
            }
            let outcomes = scheduler.run(iter, &response.tool_calls, &tool_base).await;
            for o in &outcomes {
                if o.succeeded()
                    && matches!(o.call.name(), "write_file" | "edit_file")
                    && let Some(p) = o.args.get("path").and_then(|v| v.as_str())
                {
                    let full = if std::path::Path::new(p).is_absolute() {
                        PathBuf::from(p)
                    } else {
                        req.workspace.join(p)
                    };
                    st.written.push(full);
                }
                let msg =
                    Message::tool_result(o.call.id.clone(), o.call.name(), o.model_content.clone());
                st.messages.push(msg.clone());
                if !persist(&mut log, msg, &run_id) {
                    break 'iterations Exit::StoreError(
                        "cannot append to the session's messages.jsonl".into(),
                    );
                }
            }
            if outcomes
                .iter()
                .any(|o| o.status == ToolCallStatus::Cancelled)
                && run_cancel.is_cancelled()
            {
                trace_record(&trace, json!({"type": "cancelled", "iter": iter}));
                break Exit::Cancelled;
            }
            // L4: the model asked for a compaction; it runs after the
            // iteration's other tools, with the last requested focus.
            let requested = outcomes
                .iter()
                .rev()
                .filter(|o| o.succeeded() && o.call.name() == COMPACT_TOOL)
                .map(|o| {
                    o.args
                        .get("focus_topic")
                        .and_then(|f| f.as_str())
                        .unwrap_or("")
                        .to_string()
                })
                .next();
            if let Some(focus) = requested {
                trace_record(
                    &trace,
                    json!({"type": "compact_requested", "iter": iter, "focus_topic": focus}),
                );
                let state_now = self.state_summary(&run.path, &req.workspace, scheduler.counters());
                compactor
                    .auto(iter, &mut st.messages, "tool", &focus, &state_now)
                    .await;
            }
        };
        watchdog_done.cancel();
        for (name, n) in scheduler.counters() {
            match self.counters.iter_mut().find(|(k, _)| k == name) {
                Some((_, k)) => *k += n,
                None => self.counters.push((name.clone(), *n)),
            }
        }

        // Terminal status, in the order of spec §1.4.
        let stall = activity.stall_reason();
        let mut error_code = None;
        let (status, reason) = if let Some(r) = stall {
            (RunStatus::Failed, r)
        } else if matches!(exit, Exit::Cancelled)
            || (cancel.is_cancelled() && !matches!(exit, Exit::Answered))
        {
            (RunStatus::Cancelled, "cancelled by user".to_string())
        } else if let Exit::ContentFilterBreaker(n) = exit {
            (
                RunStatus::Failed,
                format!(
                    "the provider's content filter blocked {n} consecutive replies (limit {}); try rephrasing or a less aggressive provider",
                    cfg.max_content_filter_skips
                ),
            )
        } else if let Exit::ProviderError(e) = &exit {
            error_code = Some("provider_stream_error".to_string());
            (
                RunStatus::Failed,
                format!(
                    "model call failed ({} / {}): {e}",
                    provider.name(),
                    provider.model()
                ),
            )
        } else if let Exit::StoreError(e) = &exit {
            error_code = Some("agent_loop_error".to_string());
            (RunStatus::Failed, e.clone())
        } else if !st.final_text.trim().is_empty() {
            if st.degraded_reasons.is_empty() {
                (RunStatus::Success, "final answer delivered".to_string())
            } else {
                (RunStatus::Success, st.degraded_reasons.join("; "))
            }
        } else if let Some(n) = st.empty_total_at {
            (
                RunStatus::Failed,
                format!(
                    "empty_model_response: provider={} model={} iteration {n} returned no text and no tool calls",
                    provider.name(),
                    if provider.model().is_empty() {
                        "(unset)"
                    } else {
                        provider.model()
                    }
                ),
            )
        } else if matches!(exit, Exit::ToolsOnForcedTurn) {
            (
                RunStatus::Failed,
                format!(
                    "reached max iterations ({max}) without final answer: the model still requested tools on the last, tools-withheld iteration"
                ),
            )
        } else {
            (
                RunStatus::Failed,
                format!("reached max iterations ({max}) without final answer"),
            )
        };
        let degraded = status == RunStatus::Success && !st.degraded_reasons.is_empty();
        let iterations = st.step;
        let content_filter_warning = (st.filtered_total > 0
            && st.filtered_total as f64 / iterations.max(1) as f64 > cfg.content_filter_warning_ratio)
            .then(|| {
                format!(
                    "{} of {} iterations ({:.0}%) were blocked by the provider's content filter; consider a less aggressive provider",
                    st.filtered_total,
                    iterations.max(1),
                    100.0 * st.filtered_total as f64 / iterations.max(1) as f64
                )
            });
        if let Some(w) = &content_filter_warning {
            events.emit(AgentEvent::Notice {
                level: NoticeLevel::Warning,
                message: w.clone(),
            });
        }

        let mut end = json!({"type": "end", "iter": self.iter, "status": status.as_str(), "iterations": iterations, "reason": reason});
        if degraded {
            end["degraded"] = json!(true);
        }
        if activity.stall_reason().is_some() {
            end["stalled"] = json!(true);
        }
        trace_record(&trace, end);
        let (pid, pid_start) = current_process_identity();
        let final_state = RunState {
            status: match status {
                RunStatus::Success => Status::Success,
                RunStatus::Failed => Status::Failed,
                RunStatus::Cancelled => Status::Cancelled,
                RunStatus::Interrupted => Status::Interrupted,
            },
            reason: (status != RunStatus::Success || degraded).then(|| reason.clone()),
            degraded,
            session_id: Some(req.session_id.clone()),
            pid: Some(pid),
            pid_start,
            started_at: Some(rfc3339(started_at)),
            finished_at: Some(rfc3339(SystemTime::now())),
        };
        if let Err(e) = store.write_state(&run, &final_state) {
            tracing::error!("cannot write state.json of {}: {e}", run.id);
        }
        let _ = std::fs::remove_file(run.path.join(PARTIAL_FILE));

        let model = st
            .reported_model
            .clone()
            .unwrap_or_else(|| provider.model().to_string());
        let outcome = RunOutcome {
            status,
            reason,
            error_code,
            content: if status == RunStatus::Success {
                st.final_text
            } else {
                String::new()
            },
            run_id,
            run_dir: run.path.clone(),
            iterations,
            max_iterations: max,
            degraded,
            usage: usage.totals(),
            provider: provider.name().to_string(),
            configured_model: provider.model().to_string(),
            model,
            content_filter_warning,
        };
        events.emit(run_finished(&outcome));
        outcome
    }

    /// The workspace summary (spec §4.5): this run's dir and workspace and
    /// the tool counters of earlier runs plus this one.
    fn state_summary(
        &self,
        run_dir: &std::path::Path,
        workspace: &std::path::Path,
        now: &[(String, u32)],
    ) -> String {
        let mut counters = self.counters.clone();
        for (name, n) in now {
            match counters.iter_mut().find(|(k, _)| k == name) {
                Some((_, k)) => *k += n,
                None => counters.push((name.clone(), *n)),
            }
        }
        context::workspace_summary(Some(run_dir), Some(workspace), &counters)
    }

    fn set_up(
        &self,
        store: &RunStateStore,
        req: &RunRequest,
        cfg: &LoopConfig,
    ) -> Result<(RunDir, SharedTrace, Option<MessageLog>), String> {
        let run = store
            .create_run(chrono::Utc::now())
            .map_err(|e| format!("cannot create the run directory: {e}"))?;
        store
            .write_request(&run, &req.prompt, &req.session_id)
            .map_err(|e| format!("cannot write req.json: {e}"))?;
        let (pid, pid_start) = current_process_identity();
        store
            .write_state(
                &run,
                &RunState {
                    status: Status::Running,
                    reason: None,
                    degraded: false,
                    session_id: Some(req.session_id.clone()),
                    pid: Some(pid),
                    pid_start,
                    started_at: Some(rfc3339(SystemTime::now())),
                    finished_at: None,
                },
            )
            .map_err(|e| format!("cannot write state.json: {e}"))?;
        std::fs::create_dir_all(&req.workspace).map_err(|e| {
            format!(
                "cannot create the workspace {}: {e}",
                req.workspace.display()
            )
        })?;
        let trace = TraceWriter::open(&req.session_dir, cfg.trace)
            .map_err(|e| format!("cannot open the trace: {e}"))?;
        let log = MessageLog::open(&req.session_dir)
            .map_err(|e| format!("cannot open the message log: {e}"))?;
        Ok((run, Arc::new(Mutex::new(trace)), Some(log)))
    }

    /// One model call with the single stream retry (spec §1.3 step 7).
    #[allow(clippy::too_many_arguments)]
    async fn call_model(
        &self,
        request: ChatRequest,
        iter: u64,
        cfg: &LoopConfig,
        events: &EventSink,
        cancel: &CancellationToken,
        run: &RunDir,
        trace: &SharedTrace,
    ) -> Result<Response, LlmError> {
        let provider = self.deps.provider.clone();
        let options = CallOptions {
            idle_timeout: cfg.idle_timeout,
            call_timeout: cfg.llm_timeout,
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut live = LiveState::new(
                iter,
                events.clone(),
                cfg.reasoning_throttle,
                run.path.join(PARTIAL_FILE),
                cfg.partial_checkpoint_interval,
            );
            let result = {
                let mut on_delta = |d: LiveDelta<'_>| live.on_delta(d);
                stream_response(
                    provider.as_ref(),
                    request.clone(),
                    options,
                    cancel,
                    &mut on_delta,
                )
                .await
            };
            live.finish().await;
            match result {
                Ok(r) => return Ok(r),
                Err(e) if attempt == 1 && e.retryable() && !cancel.is_cancelled() => {
                    let wait = e
                        .retry_after()
                        .map(|d| d.min(cfg.max_retry_after))
                        .unwrap_or_default()
                        .max(cfg.stream_retry_delay);
                    trace_record(
                        trace,
                        json!({"type": "stream_reset", "iter": iter, "reason": "provider_stream_retry", "error": e.to_string()}),
                    );
                    events.emit(AgentEvent::StreamReset {
                        iter,
                        reason: "provider_stream_retry".into(),
                        provider: provider.name().to_string(),
                        model: provider.model().to_string(),
                        error: e.to_string(),
                        retry_in_ms: wait.as_millis() as u64,
                    });
                    let _ = std::fs::remove_file(run.path.join(PARTIAL_FILE));
                    tokio::select! {
                        _ = cancel.cancelled() => return Ok(Response { cancelled: true, ..Response::default() }),
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The final-answer flow of spec §1.5.
    #[allow(clippy::too_many_arguments)]
    fn final_answer_step(
        &self,
        st: &mut TurnState,
        response: Response,
        iter: u64,
        max: u32,
        actx: &OwnedAnswerContext,
        check: &dyn AnswerCheck,
        events: &EventSink,
        trace: &SharedTrace,
    ) -> Step {
        let step = st.step;
        let mut draft = response.content;
        if draft.trim().is_empty() {
            trace_record(trace, json!({"type": "empty_model_response", "iter": iter}));
            st.empty_total_at = Some(step);
            st.consecutive_empty += 1;
            events.emit(AgentEvent::EmptyResponse {
                iter,
                consecutive: st.consecutive_empty,
            });
            if st.consecutive_empty > self.deps.config.max_empty_skips {
                return Step::EmptyLimit;
            }
            st.messages.push(Message::steering(
                "[SYSTEM] Your last reply was empty. Either call a tool or answer the user in plain text.",
            ));
            return Step::Continue;
        }
        st.consecutive_empty = 0;

        if contains_tool_markup(&draft) {
            trace_record(
                trace,
                json!({"type": "tool_call_syntax_in_answer", "iter": iter}),
            );
            events.emit(AgentEvent::AnswerRejected {
                iter,
                issues: vec!["tool_call_markup_in_answer".into()],
                revision: st.validations,
            });
            st.messages.push(Message::assistant(draft));
            st.messages.push(Message::steering(
                "[SYSTEM] Your reply contained tool-call markup as plain text. Call tools through the tool interface, or answer in plain text without markup.",
            ));
            if step < max {
                return Step::Continue;
            }
            draft = "I could not deliver a clean answer in the iterations available (the model kept emitting tool-call markup). Ask me to continue and I will pick up from here.".to_string();
            st.degraded_reasons
                .push("tool-call markup was withheld on the forced-text iteration".into());
            events.emit(AgentEvent::TextDelta {
                iter,
                delta: draft.clone(),
            });
        }

        let ctx = actx.borrow(&st.written);
        let issues = check.validate(&draft, &ctx);
        if !issues.is_empty() {
            st.validations += 1;
            trace_record(
                trace,
                json!({"type": "answer_rejected", "iter": iter, "issues": issues, "content": draft}),
            );
            events.emit(AgentEvent::AnswerRejected {
                iter,
                issues: issues.clone(),
                revision: st.validations,
            });
            st.messages.push(Message::assistant(draft.clone()));
            let cap = if max - step >= 3 { 4 } else { 3 };
            if step < max && st.validations < cap {
                st.messages
                    .push(Message::steering(&check.correction(&issues, &ctx)));
                return Step::Continue;
            }
            let fb = check.fallback(&draft, &issues, &ctx);
            if fb.content != draft {
                events.emit(AgentEvent::TextDelta {
                    iter,
                    delta: fb.content.clone(),
                });
            }
            draft = fb.content;
            st.degraded_reasons.push(fb.reason);
        }

        trace_record(
            trace,
            json!({"type": "answer", "iter": iter, "content": draft}),
        );
        trace_record(
            trace,
            json!({"type": "message", "iter": iter, "role": "assistant", "content": draft}),
        );
        st.messages.push(Message::assistant(draft.clone()));
        st.final_text = draft.clone();
        events.emit(AgentEvent::Answer {
            iter,
            content: draft,
            degraded: !st.degraded_reasons.is_empty(),
        });
        Step::Answered
    }
}

enum Step {
    Continue,
    Answered,
    EmptyLimit,
}

/// The parts of [`AnswerContext`] that do not change during a run.
struct OwnedAnswerContext {
    user_message: String,
    run_started: SystemTime,
    workspace: PathBuf,
    run_dir: PathBuf,
}

impl OwnedAnswerContext {
    fn borrow<'a>(&'a self, written: &'a [PathBuf]) -> AnswerContext<'a> {
        AnswerContext {
            user_message: &self.user_message,
            written,
            run_started: self.run_started,
            workspace: &self.workspace,
            run_dir: &self.run_dir,
        }
    }
}

fn answer_ctx_owned(
    req: &RunRequest,
    run_dir: &std::path::Path,
    started: SystemTime,
) -> OwnedAnswerContext {
    OwnedAnswerContext {
        user_message: req.prompt.clone(),
        run_started: started,
        workspace: req.workspace.clone(),
        run_dir: run_dir.to_path_buf(),
    }
}

/// Streamed text checkpoint for crash recovery (spec §5.2).
pub const PARTIAL_FILE: &str = "partial_response.json";

/// Live output of one model call: text deltas as they come, reasoning
/// throttled, and the partial-text checkpoint.
struct LiveState {
    iter: u64,
    events: EventSink,
    throttle: Duration,
    reasoning: String,
    reasoning_emitted_chars: usize,
    last_reasoning_emit: Option<Instant>,
    checkpoint: tokio::sync::watch::Sender<String>,
    checkpoint_done: CancellationToken,
    writer: Option<tokio::task::JoinHandle<()>>,
}

impl LiveState {
    fn new(
        iter: u64,
        events: EventSink,
        throttle: Duration,
        partial_path: PathBuf,
        interval: Duration,
    ) -> Self {
        let (tx, rx) = tokio::sync::watch::channel(String::new());
        let done = CancellationToken::new();
        let writer = tokio::spawn(checkpoint_writer(
            rx,
            done.clone(),
            iter,
            partial_path,
            interval,
        ));
        LiveState {
            iter,
            events,
            throttle,
            reasoning: String::new(),
            reasoning_emitted_chars: 0,
            last_reasoning_emit: None,
            checkpoint: tx,
            checkpoint_done: done,
            writer: Some(writer),
        }
    }

    fn on_delta(&mut self, d: LiveDelta<'_>) {
        match d {
            LiveDelta::Text(t) => {
                self.checkpoint.send_modify(|text| text.push_str(t));
                self.events.emit(AgentEvent::TextDelta {
                    iter: self.iter,
                    delta: t.to_string(),
                });
            }
            LiveDelta::Reasoning(r) => {
                self.reasoning.push_str(r);
                // First chunk of the iteration at once, then throttled (spec §1.3).
                if self
                    .last_reasoning_emit
                    .is_none_or(|t| t.elapsed() >= self.throttle)
                {
                    self.emit_reasoning();
                }
            }
        }
    }

    fn emit_reasoning(&mut self) {
        let chars = self.reasoning.chars().count();
        let tail: String = {
            let skip = chars.saturating_sub(600);
            self.reasoning.chars().skip(skip).collect()
        };
        self.events.emit(AgentEvent::ReasoningDelta {
            iter: self.iter,
            chars,
            tail,
        });
        self.reasoning_emitted_chars = chars;
        self.last_reasoning_emit = Some(Instant::now());
    }

    /// A final reasoning event so the count a UI shows is exact; the last
    /// checkpoint is on disk before the call counts as done.
    async fn finish(mut self) {
        if self.reasoning.chars().count() > self.reasoning_emitted_chars {
            self.emit_reasoning();
        }
        self.checkpoint_done.cancel();
        if let Some(w) = self.writer.take() {
            let _ = w.await;
        }
    }
}

/// Writes the streamed text: the first chunk at once, then at most once per
/// `interval`, and always the latest text after a burst, so text that
/// arrived just before a long silence is on disk too. Ends as soon as the
/// call is done (`done`), after one last write of anything unwritten.
async fn checkpoint_writer(
    mut rx: tokio::sync::watch::Receiver<String>,
    done: CancellationToken,
    iter: u64,
    path: PathBuf,
    interval: Duration,
) {
    let write = |text: &str| {
        if text.is_empty() {
            return;
        }
        let doc = json!({"iter": iter, "text": text, "updated_at": rfc3339(SystemTime::now())});
        if let Err(e) = atomic_write_json(&path, &doc) {
            tracing::warn!("cannot checkpoint the streamed text: {e}");
        }
    };
    loop {
        tokio::select! {
            biased;
            _ = done.cancelled() => break,
            changed = rx.changed() => if changed.is_err() { break },
        }
        let text = rx.borrow_and_update().clone();
        write(&text);
        tokio::select! {
            _ = done.cancelled() => break,
            _ = tokio::time::sleep(interval) => {}
        }
    }
    if rx.has_changed().unwrap_or(false) {
        let text = rx.borrow_and_update().clone();
        write(&text);
    }
}

fn persist(log: &mut Option<MessageLog>, message: Message, run_id: &str) -> bool {
    let Some(l) = log.as_mut() else {
        return true;
    };
    let stored = StoredMessage {
        message,
        ts: rfc3339(SystemTime::now()),
        run_id: Some(run_id.to_string()),
        status: None,
    };
    match l.append(&stored) {
        Ok(()) => true,
        Err(e) => {
            tracing::error!("cannot append to messages.jsonl: {e}");
            false
        }
    }
}

fn rfc3339(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t)
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

fn run_finished(o: &RunOutcome) -> AgentEvent {
    AgentEvent::RunFinished {
        run_id: o.run_id.clone(),
        status: o.status,
        reason: Some(o.reason.clone()),
        iterations: o.iterations,
        degraded: o.degraded,
        run_dir: o.run_dir.display().to_string(),
        usage: o.usage,
    }
}
