//! The ReAct loop (docs §1). One [`Loop::run`] is one user turn: set-up
//! (`start`, which makes a `Turn`), one `step` per iteration, each returning
//! whether the run goes on or why it ends, up to `max_iterations` model calls
//! with tools in between, and `finish`, which gives a terminal status with a
//! reason on every path.
//!
//! Cancellation checkpoints (docs §1.11): A at the top of every iteration, B
//! inside the stream (partial reply returned), C right after the stream (the
//! reply's tool calls are discarded), D/E before each tool batch.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::arguments::{coerce, with_warnings};
use super::attribution::{self, Misattributed, Sourced};
use super::compaction::archive::TranscriptArchive;
use super::compaction::{
    COMPACT_TOOL, CompactionRequest, Compactor, CompactorDeps, ProviderSummarizer, Trigger,
};
use super::config::LoopConfig;
use super::context::{self, PromptInputs, RecallHook, SkillLine};
use super::events::{AgentEvent, EventSink, NoticeLevel, RunStatus, ToolEvent};
use super::figures::{FigureCheck, check_figures, is_raw_error};
use super::grounding::{AnswerCheck, AnswerContext, PendingWriteCheck};
use super::input;
use super::plan::TurnPlan;
use super::repeats::{Repeat, RepeatedFailures, STOP_AT, WARN_AT};
use super::replies::{Cut, RunawayGuard, non_answer, reply_tokens};
use super::tally::ToolTally;
use super::text_tools::{
    MAX_CALLS_PER_REPLY, Refused, TextCallDecision, deferred_note, over_limit_note, screen_with,
    writes_note,
};
use super::tool_choice::{self, Choice, Fitted};
use super::traced::record_of;
use super::usage::UsageLedger;
use super::watchdog::{self, Activity};
use crate::llm::assemble::{LiveDelta, contains_tool_markup};
use crate::llm::tokens::Estimator;
use crate::llm::{
    CallOptions, ChatRequest, FINISH_UNSUPPORTED, LlmError, Provider, Response, stream_response,
};
use crate::model::contract::CompactArgs;
use crate::model::{Message, Role, ToolCall, Usage};
use crate::store::run_state::{RunState, Status, current_process_identity};
use crate::store::trace::LARGE_TEXT_BYTES;
use crate::store::trace_record::EndRecord;
use crate::store::{
    MessageLog, RunDir, RunStateStore, SharedTrace, StoredMessage, TraceRecord, TraceWriter,
    atomic_write_json, trace_record, trace_record_in_log,
};
use crate::tools::events::ToolCallStatus;
use crate::tools::events::ToolEventSink;
use crate::tools::{
    Authorizer, BackgroundQueue, CallOutcome, LateTools, Registry, Scheduler, ToolContext,
};

/// Why a run could not be set up (it then ends at once, with this reason).
#[derive(Debug, thiserror::Error)]
enum SetUpError {
    #[error("cannot create the run directory: {0}")]
    RunDir(#[source] crate::store::StoreError),
    #[error("cannot write req.json: {0}")]
    Request(#[source] crate::store::StoreError),
    #[error("cannot write state.json: {0}")]
    State(#[source] crate::store::StoreError),
    #[error("cannot create the workspace {}: {source}", path.display())]
    Workspace {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the trace: {0}")]
    Trace(#[source] crate::store::StoreError),
    #[error("cannot open the message log: {0}")]
    MessageLog(#[source] crate::store::StoreError),
}

/// Everything a loop needs that outlives one run.
#[derive(Clone)]
pub struct LoopDeps {
    pub provider: Arc<dyn Provider>,
    pub registry: Arc<Registry>,
    /// Tools that join after the session started (MCP servers', docs
    /// §13.2); each run offers `registry` plus those ready when it starts.
    pub late_tools: LateTools,
    pub config: LoopConfig,
    /// Where run directories are created (`<data>/runs`).
    pub runs_root: PathBuf,
    pub answer_check: Arc<dyn AnswerCheck>,
    pub authorizer: Option<Arc<dyn Authorizer>>,
    pub recall: Option<Arc<dyn RecallHook>>,
    pub skills: Vec<SkillLine>,
    /// Persistent-memory snapshot for the system prompt (frozen per run).
    pub memory_snapshot: String,
    /// Instructions appended to the system prompt under "Your role" (a
    /// research team's member, docs §14.3); empty for a plain session.
    pub role_instructions: String,
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
            late_tools: LateTools::default(),
            config,
            runs_root,
            answer_check: Arc::new(PendingWriteCheck),
            authorizer: None,
            recall: None,
            skills: Vec::new(),
            memory_snapshot: String::new(),
            role_instructions: String::new(),
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
    /// Plan mode (docs §4.8): plan only, or carry out an approved plan.
    pub plan: TurnPlan,
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
    /// The answer's figures found in no tool result of the run (docs §1.6).
    pub unverified_numbers: Vec<String>,
}

/// A loop instance; reusable across the runs of one session so that
/// iteration numbers stay monotonic (docs §1.2 step 8).
pub struct Loop {
    deps: LoopDeps,
    iter: u64,
    counters: Vec<(String, u32)>,
    /// The model's context window as the server said it, or as a
    /// context-size error named it; kept for the session's later runs.
    window: Option<u64>,
    /// The server was asked for its window already (once per loop).
    window_asked: bool,
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
    /// The model wrote calls to names that are not tools again, after the
    /// one correction (docs §2.11.1).
    UnknownTextTool(Vec<String>),
    /// The same failing call came back too often (docs §1.3 step 14).
    RepeatedFailure(Repeat),
    /// A reply was cut as a runaway with no second chance (docs §2.11.2);
    /// the reason says why.
    Runaway(String),
}

/// The run's conversation, shared with the request that carries it to the
/// provider: a request takes a reference, not a copy, and a write after the
/// call (when the loop is the only holder) copies nothing.
#[derive(Debug, Default)]
struct Conversation(Arc<Vec<Message>>);

impl Conversation {
    /// The conversation as a request carries it.
    fn shared(&self) -> Arc<Vec<Message>> {
        self.0.clone()
    }
}

impl std::ops::Deref for Conversation {
    type Target = Vec<Message>;
    fn deref(&self) -> &Vec<Message> {
        &self.0
    }
}

impl std::ops::DerefMut for Conversation {
    fn deref_mut(&mut self) -> &mut Vec<Message> {
        Arc::make_mut(&mut self.0)
    }
}

/// Per-run mutable state.
struct TurnState {
    messages: Conversation,
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
    /// The run's tool calls and their failures (docs §1.4).
    tools: ToolTally,
    /// The correction for a text-form call to an unknown tool was given.
    text_call_corrected: bool,
    /// Notes about calls of this reply that were not run (docs §2.11.1),
    /// sent to the model after the reply's tool results.
    notes_after_tools: Vec<String>,
    /// This iteration's reply showed calls as an example (docs §2.11.1): its
    /// call markup is what the answer is about, not a leak.
    example_answer: bool,
    /// Texts an answer's figures may come from: the conversation as the run
    /// began (the user's words, recalled memories, earlier turns), the
    /// arguments of the calls it made and the tool results it saw (docs §1.6).
    sources: Vec<String>,
    /// Which `sources` are this run's tool results, with the symbols their
    /// calls named (docs §1.6.1).
    result_symbols: Vec<(usize, Vec<String>)>,
    /// The answer's figures given to another symbol than their result's.
    misattributed: Vec<Misattributed>,
    repeats: RepeatedFailures,
    /// The delivered answer's figures, checked against `sources`.
    figures: FigureCheck,
    /// The delivered answer is a tool's raw error result.
    raw_error_answer: bool,
    /// The reply that delivered the answer finished `unsupported`: no tool
    /// offered could serve the request (docs §1.4).
    unsupported: bool,
    /// Why the delivered reply is no answer (docs §1.5), when it is not.
    non_answer: Option<String>,
    /// The model was asked once to answer after a reply that did not.
    non_answer_steered: bool,
    /// Replies cut as runaways in this run (docs §2.11.2).
    runaways: u32,
    /// Replies cut for writing the prompt back (docs §2.11.2).
    echoes: u32,
    /// The next request is the same one again, at [`RETRY_TEMPERATURE`]:
    /// after an empty reply of a local server.
    hot_retry: bool,
    /// An empty reply was asked again as it was (docs §2.11.2).
    empty_retried: bool,
    /// The last reply was cut as an echo: the next request leaves the run's
    /// context block out of the question (docs §2.11.2).
    echoed: bool,
}

impl TurnState {
    /// The answer's figures no source shows, then those given to the
    /// wrong symbol (docs §1.6, §1.6.1), each once.
    fn flagged_numbers(&self) -> Vec<String> {
        let mut n = self.figures.unverified.clone();
        for m in &self.misattributed {
            if !n.contains(&m.figure) {
                n.push(m.figure.clone());
            }
        }
        n
    }

    fn new(messages: Vec<Message>) -> Self {
        let sources = messages
            .iter()
            .filter(|m| m.role != Role::System)
            // The run directory's digits are no source of an answer's figures.
            .map(|m| context::without_run_context(&m.content).to_string())
            .collect();
        TurnState {
            messages: Conversation(Arc::new(messages)),
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
            tools: ToolTally::default(),
            text_call_corrected: false,
            notes_after_tools: Vec::new(),
            example_answer: false,
            sources,
            result_symbols: Vec::new(),
            misattributed: Vec::new(),
            repeats: RepeatedFailures::default(),
            figures: FigureCheck::default(),
            raw_error_answer: false,
            unsupported: false,
            non_answer: None,
            non_answer_steered: false,
            runaways: 0,
            echoes: 0,
            hot_retry: false,
            empty_retried: false,
            echoed: false,
        }
    }
}

/// A run in progress: what set-up made, and what its steps change.
struct Turn {
    req: RunRequest,
    events: EventSink,
    /// The caller's token; `run_cancel` is its child, which the watchdog
    /// cancels too.
    cancel: CancellationToken,
    run_cancel: CancellationToken,
    cfg: LoopConfig,
    max: u32,
    started_at: SystemTime,
    store: RunStateStore,
    run: RunDir,
    trace: SharedTrace,
    log: Option<MessageLog>,
    usage: UsageLedger,
    activity: Activity,
    watchdog_done: CancellationToken,
    scheduler: Scheduler,
    /// Every tool the run may offer; `choice` says which it does, when
    /// they were chosen for the request or cut to fit (docs §4.7.1).
    available: Arc<Registry>,
    choice: Option<Choice>,
    tool_base: ToolContext,
    compactor: Compactor,
    /// A window a context-size error named in this run (docs §3.9).
    window: Option<u64>,
    st: TurnState,
}

/// What one iteration did: go on to the next, or end the run for a reason.
type StepOutcome = ControlFlow<Exit>;

impl Loop {
    pub fn new(deps: LoopDeps) -> Self {
        Loop {
            deps,
            iter: 0,
            counters: Vec::new(),
            window: None,
            window_asked: false,
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
            unverified_numbers: Vec::new(),
        };
        events.emit(run_finished(&outcome));
        outcome
    }

    /// Runs one turn: set-up, one [`step`](Self::step) per iteration until
    /// one ends the run, and the terminal status. `cancel` may already be
    /// cancelled (a cancel that arrived while queued): the run then ends
    /// before any model call (docs §1.2).
    pub async fn run(
        &mut self,
        req: RunRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> RunOutcome {
        self.await_late_tools(&events, &cancel).await;
        self.discover_window(&cancel).await;
        let mut turn = match self.start(req, events, cancel) {
            Ok(t) => t,
            Err(refused) => return *refused,
        };
        let exit = loop {
            if let ControlFlow::Break(exit) = self.step(&mut turn).await {
                break exit;
            }
        };
        self.finish(turn, exit)
    }

    /// Asks the server for its context window once per loop, when the
    /// config names none and the provider knows how (docs §3.9).
    async fn discover_window(&mut self, cancel: &CancellationToken) {
        let cfg = &self.deps.config;
        if self.window_asked
            || self.window.is_some()
            || cfg.context_window.is_some()
            || !cfg.discover_window
        {
            return;
        }
        self.window_asked = true;
        self.window = tokio::select! {
            w = self.deps.provider.context_window() => w,
            _ = cancel.cancelled() => None,
        };
    }

    /// Waits, at most until each source's own deadline or a cancel, for
    /// tools still starting (MCP servers, docs §13.2), when the provider
    /// could call them; the offline planner never waits.
    async fn await_late_tools(&self, events: &EventSink, cancel: &CancellationToken) {
        let late = &self.deps.late_tools;
        if !late.is_pending() || !self.deps.provider.calls_offered_tools() {
            return;
        }
        let (labels, longest) = late.pending_labels();
        events.emit(AgentEvent::Notice {
            level: NoticeLevel::Info,
            message: format!(
                "waiting up to {} s for {} to start, so that the run can use its tools",
                longest.as_secs_f64().ceil(),
                labels.join(", ")
            ),
        });
        tokio::select! {
            _ = late.settled() => {}
            _ = cancel.cancelled() => {}
        }
    }

    /// Set-up: the run directory, trace and message log, the first
    /// messages, `run_started`, the watchdog, the scheduler and the
    /// compactor. A refused or failed set-up is the run's outcome.
    fn start(
        &mut self,
        req: RunRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> Result<Turn, Box<RunOutcome>> {
        let mut cfg = self.deps.config.clone();
        if let Some(w) = cfg.context_window.or(self.window) {
            cfg.fit_window(w);
        }
        cfg.scheduler.lean_results |= cfg.lean_prompt;
        let max = cfg.max_iterations.max(1);
        let provider = self.deps.provider.clone();
        let store = RunStateStore::new(&self.deps.runs_root);
        let run_cancel = cancel.child_token();
        let started_at = SystemTime::now();

        // An oversized message is refused before anything is written.
        if let Err(e) = input::check_message_size(req.prompt.len(), cfg.max_message_bytes, &|| {
            req.workspace.display().to_string()
        }) {
            return Err(Box::new(self.refuse(
                e.to_string(),
                MESSAGE_TOO_LARGE,
                &events,
            )));
        }
        // Set-up failures end the run immediately, with a reason.
        let (run, trace, mut log) = match self.set_up(&store, &req, &cfg) {
            Ok(x) => x,
            Err(reason) => {
                let outcome = self.refuse(reason.to_string(), "agent_loop_error", &events);
                return Err(Box::new(outcome));
            }
        };
        if self.iter == 0 {
            self.iter = TraceWriter::max_iter(&req.session_dir);
        }
        let usage = UsageLedger::new(
            run.path.join("llm_usage.json"),
            provider.name(),
            provider.model(),
        );
        // The tools this run may offer: the registry and the late ones
        // ready now; those chosen for the request when it chooses.
        let (available, missing) = self.offered(&cfg, &req.plan);
        let fitted = self.fit_tools(&cfg, &run, &req, &available);
        let registry = match &fitted {
            Some(f) => Arc::new(available.subset(&f.choice.offered).0),
            None => available.clone(),
        };
        let note = fitted
            .as_ref()
            .and_then(|f| tool_choice::others_note(&f.choice.held_back()));
        let messages = self.first_messages(&run, &req, &registry, cfg.lean_prompt, note.as_deref());
        self.record_start(&trace, &mut log, &req, &run.id);
        if let Some(f) = &fitted {
            trace_record(
                &trace,
                tools_chosen(self.iter + 1, f.reason.as_str(), &f.choice, Some(f.budget)),
            );
        }
        self.announce(&events, &req, &run, max);
        if !missing.is_empty() {
            events.emit(AgentEvent::Notice {
                level: NoticeLevel::Warning,
                message: format!(
                    "`tools` names {} which this session does not have; offered: {}",
                    missing.join(", "),
                    registry.names().join(", ")
                ),
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
        let overhead = tool_schema_tokens(&cfg, provider.model(), &registry);
        let scheduler = self.scheduler(registry, &cfg, &events, &activity, &trace);
        let tool_base = ToolContext {
            call_id: String::new(),
            session_id: req.session_id.clone(),
            run_dir: run.path.clone(),
            workspace: req.workspace.clone(),
            cancel: run_cancel.clone(),
            background: req.background.clone(),
        };
        let mut compactor = self.compactor(&cfg, &req, &run, &trace, &events, &run_cancel);
        compactor.set_overhead(overhead);
        Ok(Turn {
            req,
            events,
            cancel,
            run_cancel,
            cfg,
            max,
            started_at,
            store,
            run,
            trace,
            log,
            usage,
            activity,
            watchdog_done,
            scheduler,
            available,
            choice: fitted.map(|f| f.choice),
            tool_base,
            compactor,
            window: None,
            st: TurnState::new(messages),
        })
    }

    /// The tools this run offers (docs §4.7): the registry and the late ones
    /// ready now, cut to the configured subset; with the subset's names
    /// that no tool has.
    fn offered(&self, cfg: &LoopConfig, plan: &TurnPlan) -> (Arc<Registry>, Vec<String>) {
        let mut all = self.deps.late_tools.extend(&self.deps.registry);
        if *plan == TurnPlan::Draft {
            // Planning only looks (docs §4.8).
            all = Arc::new(super::plan::planning_tools(&all));
        }
        let (offered, missing) = match &cfg.tools {
            None => (all, Vec::new()),
            Some(names) => {
                let (subset, missing) = all.subset(names);
                (Arc::new(subset), missing)
            }
        };
        if cfg.lean_prompt {
            (Arc::new(Registry::clone(&offered).leaned()), missing)
        } else {
            (offered, missing)
        }
    }

    /// The tools chosen for the request when the run chooses (a local
    /// preset), or cut to fit a window the whole set would not fit, in
    /// the window learnt or configured (docs §4.7.1).
    fn fit_tools(
        &self,
        cfg: &LoopConfig,
        run: &RunDir,
        req: &RunRequest,
        available: &Registry,
    ) -> Option<Fitted> {
        let estimator = estimator_of(cfg, self.deps.provider.model());
        let window = cfg.context_window.or(self.window);
        tool_choice::fit(
            cfg,
            window,
            available,
            &req.prompt,
            &estimator,
            |offered, note| {
                estimator.count(&self.first_messages(run, req, offered, cfg.lean_prompt, note))
            },
        )
    }

    /// `[system, *history, user (with recalled memories)]`. A lean prompt
    /// moves the run's context (state, date) from the end of the system
    /// text to the head of the user message, so the system text and the
    /// tool schemas after it are the same from run to run (docs §4.3).
    /// `note` names the tools held back (docs §4.7.1): with the run's
    /// context, as it changes from request to request.
    fn first_messages(
        &self,
        run: &RunDir,
        req: &RunRequest,
        registry: &Registry,
        lean: bool,
        note: Option<&str>,
    ) -> Vec<Message> {
        let state_summary =
            context::workspace_summary(Some(&run.path), Some(&req.workspace), &self.counters);
        let inputs = PromptInputs {
            registry,
            skills: &self.deps.skills,
            state: &state_summary,
            memory_snapshot: &self.deps.memory_snapshot,
            now: chrono::Utc::now(),
        };
        let mut system = if lean {
            context::stable_system_prompt(&inputs)
        } else {
            context::system_prompt(&inputs)
        };
        if let (Some(note), false) = (note, lean) {
            system.push('\n');
            system.push_str(note);
            system.push('\n');
        }
        let role = self.deps.role_instructions.trim();
        if !role.is_empty() {
            system.push_str("\n\n## Your role\n");
            system.push_str(role);
            system.push('\n');
        }
        // In the system prompt, which no compaction layer touches, so an
        // approved plan stays pinned for the whole run (docs §3, §4.8).
        system.push_str(&super::plan::system_section(&req.plan));
        let recalled = self
            .deps
            .recall
            .as_ref()
            .map(|r| r.recall(&req.prompt, 3))
            .unwrap_or_default();
        let mut user = context::with_recall(&req.prompt, &recalled);
        if lean {
            let mut run_context = context::run_context(&inputs);
            if let Some(note) = note {
                run_context = format!("{}\n{note}\n", run_context.trim_end());
            }
            user = context::with_run_context(&run_context, &user);
        }
        let mut messages = vec![Message::system(system)];
        messages.extend(req.history.iter().cloned());
        messages.push(Message::user(user));
        messages
    }

    /// The user's message in the message log, then the `start` and user
    /// `message` records; a large prompt's records refer to the log entry.
    fn record_start(
        &self,
        trace: &SharedTrace,
        log: &mut Option<MessageLog>,
        req: &RunRequest,
        run_id: &str,
    ) {
        let logged = log.is_some() && persist(log, Message::user(req.prompt.clone()), run_id);
        let once = logged && req.prompt.len() > LARGE_TEXT_BYTES;
        let iter = self.iter + 1;
        let start = TraceRecord::Start {
            iter,
            run_id: run_id.to_string(),
            prompt: req.prompt.clone(),
        };
        let user = TraceRecord::Message {
            iter,
            role: Role::User,
            content: req.prompt.clone(),
        };
        if once {
            trace_record_in_log(trace, start, "prompt");
            trace_record_in_log(trace, user, "content");
        } else {
            trace_record(trace, start);
            trace_record(trace, user);
        }
    }

    /// `run_started`, then the warnings about what the session could not read.
    fn announce(&self, events: &EventSink, req: &RunRequest, run: &RunDir, max: u32) {
        let provider = &self.deps.provider;
        events.emit(AgentEvent::RunStarted {
            run_id: run.id.clone(),
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
    }

    /// The run's tool scheduler: tool events flow through unchanged, and a
    /// finished call counts as progress for the watchdog.
    fn scheduler(
        &self,
        registry: Arc<Registry>,
        cfg: &LoopConfig,
        events: &EventSink,
        activity: &Activity,
        trace: &SharedTrace,
    ) -> Scheduler {
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
        let scheduler =
            Scheduler::new(registry, cfg.scheduler.clone(), tool_sink).with_trace(trace.clone());
        match &self.deps.authorizer {
            Some(a) => scheduler.with_authorizer(a.clone()),
            None => scheduler,
        }
    }

    /// The run's compactor, summarising with the run's own provider.
    fn compactor(
        &self,
        cfg: &LoopConfig,
        req: &RunRequest,
        run: &RunDir,
        trace: &SharedTrace,
        events: &EventSink,
        run_cancel: &CancellationToken,
    ) -> Compactor {
        let provider = &self.deps.provider;
        let estimator = estimator_of(cfg, provider.model());
        Compactor::new(CompactorDeps {
            settings: cfg.compaction.clone(),
            estimator,
            threshold: cfg.token_threshold,
            overhead: 0,
            summarizer: Arc::new(ProviderSummarizer {
                provider: provider.clone(),
                options: CallOptions {
                    idle_timeout: cfg.idle_timeout,
                    call_timeout: cfg.llm_timeout,
                },
                cancel: run_cancel.clone(),
            }),
            archive: TranscriptArchive::new(&req.session_dir, &run.id),
            trace: Some(trace.clone()),
            events: events.clone(),
        })
    }

    /// One iteration (docs §1.3): checkpoint A, compaction, steering, the
    /// model call and checkpoint C, the content filter, then either the
    /// final-answer check or the reply's tools (checkpoints D/E) and a
    /// compaction the model asked for.
    async fn step(&mut self, t: &mut Turn) -> StepOutcome {
        let (iter, step) = self.begin_iteration(t)?;
        let last = step == t.max;
        self.compact_context(t, iter).await;
        self.steer(t, iter, step);
        let Some(response) = self.ask_model(t, iter, last).await? else {
            // A runaway reply was cut; the next iteration asks again.
            return ControlFlow::Continue(());
        };
        if t.content_filtered(iter, &response)? {
            return ControlFlow::Continue(());
        }
        let response = match t.text_tool_calls(iter, response) {
            ControlFlow::Continue(r) => r,
            ControlFlow::Break(outcome) => return outcome,
        };
        let response = t.capped_calls(iter, response);
        if response.tool_calls.is_empty() {
            return match self.final_answer_step(t, response, iter) {
                AnswerStep::Continue => ControlFlow::Continue(()),
                AnswerStep::Answered => {
                    persist(
                        &mut t.log,
                        Message::assistant(t.st.final_text.clone()),
                        &t.run.id,
                    );
                    ControlFlow::Break(Exit::Answered)
                }
                AnswerStep::EmptyLimit => ControlFlow::Break(Exit::EmptyReplies),
            };
        }
        if last {
            return ControlFlow::Break(self.tools_on_forced_turn(t, response, iter));
        }
        let held_back: Vec<String> = response
            .tool_calls
            .iter()
            .map(|c| c.name().to_string())
            .filter(|n| t.scheduler.registry().get(n).is_none())
            .collect();
        if !held_back.is_empty() {
            t.offer_asked(iter, &held_back);
        }
        let outcomes = t.run_tools(iter, &response).await?;
        self.requested_compaction(t, iter, &outcomes).await;
        ControlFlow::Continue(())
    }

    /// Checkpoint A, then the iteration's numbers `(iter, step)` and the
    /// background results that arrived since the last one.
    fn begin_iteration(&mut self, t: &mut Turn) -> ControlFlow<Exit, (u64, u32)> {
        if t.st.step >= t.max {
            return ControlFlow::Break(Exit::Exhausted);
        }
        // Checkpoint A.
        if t.run_cancel.is_cancelled() {
            trace_record(&t.trace, TraceRecord::Cancelled { iter: self.iter });
            return ControlFlow::Break(Exit::Cancelled);
        }
        t.st.step += 1;
        self.iter += 1;
        let (iter, step) = (self.iter, t.st.step);
        t.events.emit(AgentEvent::IterationStarted {
            iter,
            step,
            max_iterations: t.max,
        });

        // Finished background work of *this* session (docs §12.22).
        let notices = t.req.background.drain();
        if !notices.is_empty() {
            t.st.messages
                .push(Message::user(BackgroundQueue::render(&notices)));
            t.events.emit(AgentEvent::BackgroundResults {
                iter,
                count: notices.len(),
            });
        }
        ControlFlow::Continue((iter, step))
    }

    /// The gated layers, then a pending `/compact`.
    async fn compact_context(&self, t: &mut Turn, iter: u64) {
        let state_now = self.state_summary(&t.run.path, &t.req.workspace, t.scheduler.counters());
        t.compactor
            .on_iteration(iter, &mut t.st.messages, &state_now)
            .await;
        if let Some(focus) = t.req.compaction.take() {
            t.compactor
                .auto(iter, &mut t.st.messages, Trigger::User, &focus, &state_now)
                .await;
        }
    }

    /// The wrap-up nudge, the penultimate pending-write directive and the
    /// notice that the last iteration offers no tools (docs §1.3).
    fn steer(&self, t: &mut Turn, iter: u64, step: u32) {
        let max = t.max;
        let check = &*self.deps.answer_check;
        let ctx = answer_context(&t.req, &t.run, t.started_at, &t.st.written);
        if step == t.cfg.wrap_up_at() && 1 < step && step < max {
            let remaining = max - step;
            let mut text = format!(
                "[SYSTEM] {remaining} of {max} iterations remain. Finish any outstanding file writes now while tools are still available, do not start new analysis, then answer in plain text (say where any written file is)."
            );
            if let Some(d) = check.directive(&ctx) {
                trace_record(&t.trace, TraceRecord::PendingWriteDirective { iter });
                text.push(' ');
                text.push_str(&d);
            }
            t.st.messages.push(Message::steering(&text));
            let wrap_up = AgentEvent::WrapUp {
                iter,
                remaining,
                max_iterations: max,
            };
            emit_traced(&t.trace, &t.events, wrap_up);
        }
        // Penultimate safety net, as a user steering message rather than
        // the original's mid-conversation system message (docs §12.1).
        if max > 1
            && step == max - 1
            && let Some(d) = check.directive(&ctx)
        {
            trace_record(&t.trace, TraceRecord::PendingWriteDirective { iter });
            t.st.messages.push(Message::steering(&d));
        }
        if step == max {
            emit_traced(&t.trace, &t.events, AgentEvent::ForcedTextOnly { iter });
        }
    }

    /// The model call (no tools offered on the last iteration), checkpoint
    /// C, and what the reply reports besides its tool calls; `None` when
    /// the reply was cut as a runaway and the model is asked again.
    async fn ask_model(
        &self,
        t: &mut Turn,
        iter: u64,
        last: bool,
    ) -> ControlFlow<Exit, Option<Response>> {
        let mut fitted = false;
        // After a local reply was empty, the same request once more at a
        // higher temperature: that path is the likeliest at the preset's
        // 0.2, and a steering note is more prompt text to answer.
        let temperature = std::mem::take(&mut t.st.hot_retry).then_some(RETRY_TEMPERATURE);
        // After an echo, the question without the run's context block:
        // measured, one question's first reply opened with the block three
        // times running, at 0.7 as at 0.2 (docs §2.11.2).
        let echoed = std::mem::take(&mut t.st.echoed);
        let (response, runaway) = loop {
            let max_tokens = self.reply_cap(t);
            // Built each time: a context-size retry sends the fitted one.
            let messages = if echoed {
                without_context_block(&t.st.messages)
            } else {
                t.st.messages.shared()
            };
            let request = ChatRequest {
                messages,
                tools: if last {
                    Arc::from([])
                } else {
                    t.scheduler.registry().specs()
                },
                temperature,
                max_tokens,
                user_request: Some(t.req.prompt.clone()),
                text_tool_calls: t.cfg.text_tool_calls,
            };
            match self.call_model(t, request, iter).await {
                Ok(r) => break r,
                // A context-size error: fit the context and retry once (§3.9).
                Err(e) if !fitted && e.context_overflow().is_some() => {
                    fitted = true;
                    // Never the same request again (docs §3.9).
                    if !self.fit_after_overflow(t, iter, &e).await {
                        return ControlFlow::Break(Exit::ProviderError(e));
                    }
                }
                Err(e) => return ControlFlow::Break(Exit::ProviderError(e)),
            }
        };
        // Checkpoint C: a reply that arrived after cancel is discarded (a
        // runaway's call was cancelled by the loop, not the user).
        if (response.cancelled && runaway.is_none()) || t.run_cancel.is_cancelled() {
            trace_record(&t.trace, TraceRecord::Cancelled { iter });
            return ControlFlow::Break(Exit::Cancelled);
        }
        t.note_reply(iter, &response);
        match runaway {
            Some(cut) if cut.echo && !last && t.st.echoes < ECHO_RETRIES => {
                t.echo_cut(iter, cut.why);
                ControlFlow::Continue(None)
            }
            Some(cut) => {
                t.runaway_cut(iter, last, cut.why)?;
                ControlFlow::Continue(None)
            }
            None => ControlFlow::Continue(Some(response)),
        }
    }

    /// The `max_tokens` of the next reply of a local server (docs
    /// §2.11.2): sized to the window and what the prompt leaves of it.
    fn reply_cap(&self, t: &mut Turn) -> Option<u32> {
        if !t.cfg.size_replies {
            return None;
        }
        let window = t.window.or(t.cfg.context_window).or(self.window);
        let prompt = match window {
            Some(_) => t.compactor.count(&t.st.messages),
            None => 0,
        };
        Some(reply_tokens(window, prompt))
    }

    /// After a context-size error (docs §3.9): the window it names lowers
    /// the threshold, the request size it names calibrates the estimate,
    /// and the context is fitted under the threshold; when that is not
    /// enough (a first request has nothing to compact), the run's
    /// lowest-ranked tools are dropped to fit. Whether the request shrank:
    /// it is never sent again at the same size.
    async fn fit_after_overflow(&self, t: &mut Turn, iter: u64, e: &LlmError) -> bool {
        let over = e.context_overflow().unwrap_or_default();
        let before = t.compactor.count(&t.st.messages);
        if let Some(w) = over.window {
            t.window = Some(w);
            t.compactor.set_threshold(t.cfg.threshold_for(w));
        }
        match (over.requested, over.window) {
            (Some(reported), _) => t.compactor.calibrate(reported, before),
            // The server counted more than its window where the estimate
            // did not: the estimate is low by at least that much.
            (None, Some(w)) if before <= w => t.compactor.calibrate(w.saturating_add(1), before),
            (None, Some(_)) => {}
            // Nothing to go by: aim well below what was refused.
            (None, None) => {
                let lower = t.compactor.threshold().min(before * 3 / 4);
                t.compactor.set_threshold(lower);
            }
        }
        let counted = t.compactor.count(&t.st.messages);
        let max_chars = usize::try_from(t.compactor.threshold() * 3 / 8)
            .unwrap_or(usize::MAX)
            .max(600);
        let state_now = self.state_summary(&t.run.path, &t.req.workspace, t.scheduler.counters());
        let after = t
            .compactor
            .fit(iter, &mut t.st.messages, max_chars, &state_now)
            .await;
        trace_record(
            &t.trace,
            TraceRecord::ContextOverflow {
                iter,
                error: e.to_string(),
                window: over.window,
                tokens_before: counted,
                tokens_after: after,
            },
        );
        let limit = over
            .window
            .or(t.cfg.context_window)
            .map_or(counted * 3 / 4, tool_choice::request_limit);
        let (dropped, now) = if after > limit {
            drop_tools(t, iter, after, limit)
        } else {
            (Vec::new(), after)
        };
        let window = over
            .window
            .map_or_else(|| "its".to_string(), |w| format!("its {w}-token"));
        let what = match (dropped.is_empty(), now < counted) {
            (_, false) => {
                "nothing could be compacted or left out, so it is not sent again".to_string()
            }
            (true, true) => format!("compacted {counted} → {after} tokens, retrying once"),
            (false, true) => format!(
                "compacted {counted} → {after} tokens and left out the tools {} ({after} → {now}), retrying once",
                dropped.join(", ")
            ),
        };
        t.events.emit(AgentEvent::Notice {
            level: NoticeLevel::Warning,
            message: format!(
                "the request did not fit the model's context ({window} window): {what}"
            ),
        });
        now < counted
    }

    /// The model called tools on the iteration that offered none. The
    /// original executes them (docs §12.19); we never run tools that were
    /// not offered, and use any text as the answer.
    fn tools_on_forced_turn(&self, t: &mut Turn, response: Response, iter: u64) -> Exit {
        if response.content.trim().is_empty() || contains_tool_markup(&response.content) {
            return Exit::ToolsOnForcedTurn;
        }
        t.st.degraded_reasons
            .push("the model requested tools on the final, tools-withheld iteration; its text was kept as the answer".into());
        let mut text_only = response;
        text_only.tool_calls.clear();
        match self.final_answer_step(t, text_only, iter) {
            AnswerStep::Answered => {
                persist(
                    &mut t.log,
                    Message::assistant(t.st.final_text.clone()),
                    &t.run.id,
                );
                Exit::Answered
            }
            _ => Exit::ToolsOnForcedTurn,
        }
    }

    /// L4: the model asked for a compaction; it runs after the iteration's
    /// other tools, with the last requested focus.
    async fn requested_compaction(&self, t: &mut Turn, iter: u64, outcomes: &[CallOutcome]) {
        let requested = outcomes
            .iter()
            .rev()
            .filter(|o| o.succeeded() && o.call.name() == COMPACT_TOOL)
            .map(|o| {
                // The call succeeded, so its arguments parsed as `CompactArgs`.
                serde_json::from_value::<CompactArgs>(o.args.clone())
                    .ok()
                    .and_then(|a| a.focus_topic)
                    .unwrap_or_default()
            })
            .next();
        if let Some(focus) = requested {
            trace_record(
                &t.trace,
                TraceRecord::CompactRequested {
                    iter,
                    focus_topic: focus.clone(),
                },
            );
            let state_now =
                self.state_summary(&t.run.path, &t.req.workspace, t.scheduler.counters());
            t.compactor
                .auto(iter, &mut t.st.messages, Trigger::Tool, &focus, &state_now)
                .await;
        }
    }

    /// The end of a run: the terminal status, the `end` record, the final
    /// `state.json` and `run_finished`.
    fn finish(&mut self, mut t: Turn, exit: Exit) -> RunOutcome {
        t.watchdog_done.cancel();
        if t.window.is_some() {
            self.window = t.window;
        }
        merge_counters(&mut self.counters, t.scheduler.counters());
        let (status, reason, error_code) = self.terminal_status(&t, &exit);
        let provider = &self.deps.provider;
        // An answer was delivered: its text is kept whatever its tool calls
        // made of the status (docs §1.4).
        let answered = answered(&t, &exit);
        let degraded = answered && !t.st.degraded_reasons.is_empty();
        let iterations = t.st.step;
        let content_filter_warning = t.content_filter_warning();
        if let Some(w) = &content_filter_warning {
            t.events.emit(AgentEvent::Notice {
                level: NoticeLevel::Warning,
                message: w.clone(),
            });
        }
        let model =
            t.st.reported_model
                .clone()
                .unwrap_or_else(|| provider.model().to_string());
        let outcome = RunOutcome {
            status,
            reason,
            error_code,
            content: if answered {
                std::mem::take(&mut t.st.final_text)
            } else {
                String::new()
            },
            run_id: t.run.id.clone(),
            run_dir: t.run.path.clone(),
            iterations,
            max_iterations: t.max,
            degraded,
            usage: t.usage.totals(),
            provider: provider.name().to_string(),
            configured_model: provider.model().to_string(),
            model,
            content_filter_warning,
            unverified_numbers: if answered {
                t.st.flagged_numbers()
            } else {
                Vec::new()
            },
        };

        let stalled = t.activity.stall_reason().is_some();
        trace_record(&t.trace, end_record(&outcome, self.iter, stalled));
        let (pid, pid_start) = current_process_identity();
        let final_state = RunState {
            status: state_status(status),
            reason: (status != RunStatus::Success || degraded).then(|| outcome.reason.clone()),
            degraded,
            session_id: Some(t.req.session_id.clone()),
            pid: Some(pid),
            pid_start,
            started_at: Some(rfc3339(t.started_at)),
            finished_at: Some(rfc3339(SystemTime::now())),
        };
        if let Err(e) = t.store.write_state(&t.run, &final_state) {
            tracing::error!("cannot write state.json of {}: {e}", t.run.id);
        }
        let _ = std::fs::remove_file(t.run.path.join(PARTIAL_FILE));
        t.events.emit(run_finished(&outcome));
        outcome
    }

    /// Status, reason and error code, in the order of docs §1.4.
    fn terminal_status(&self, t: &Turn, exit: &Exit) -> (RunStatus, String, Option<String>) {
        let provider = &self.deps.provider;
        let st = &t.st;
        let max = t.max;
        let failed = |reason: String| (RunStatus::Failed, reason, None);
        if let Some(r) = t.activity.stall_reason() {
            failed(r)
        } else if matches!(exit, Exit::Cancelled)
            || (t.cancel.is_cancelled() && !matches!(exit, Exit::Answered))
        {
            (RunStatus::Cancelled, "cancelled by user".to_string(), None)
        } else if let Exit::ContentFilterBreaker(n) = exit {
            failed(format!(
                "the provider's content filter blocked {n} consecutive replies (limit {}); try rephrasing or a less aggressive provider",
                t.cfg.max_content_filter_skips
            ))
        } else if let Exit::ProviderError(e) = exit {
            (
                RunStatus::Failed,
                format!(
                    "model call failed ({} / {}): {e}",
                    provider.name(),
                    provider.model()
                ),
                Some("provider_stream_error".to_string()),
            )
        } else if let Exit::StoreError(e) = exit {
            (
                RunStatus::Failed,
                e.clone(),
                Some("agent_loop_error".to_string()),
            )
        } else if let Exit::UnknownTextTool(names) = exit {
            (
                RunStatus::Failed,
                format!(
                    "the model kept calling {} as text, which is not a tool here, after it was told the tools; no answer",
                    names.join(", ")
                ),
                Some("unknown_tool".to_string()),
            )
        } else if let Exit::RepeatedFailure(r) = exit {
            (
                RunStatus::Failed,
                r.reason(),
                Some("repeated_failure".to_string()),
            )
        } else if let Exit::Runaway(r) = exit {
            (
                RunStatus::Failed,
                r.clone(),
                Some(RUNAWAY_REPLY.to_string()),
            )
        } else if !st.final_text.trim().is_empty() {
            answered_status(st)
        } else if let Some(n) = st.empty_total_at {
            failed(format!(
                "empty_model_response: provider={} model={} iteration {n} returned no text and no tool calls",
                provider.name(),
                if provider.model().is_empty() {
                    "(unset)"
                } else {
                    provider.model()
                }
            ))
        } else if matches!(exit, Exit::ToolsOnForcedTurn) {
            failed(format!(
                "reached max iterations ({max}) without final answer: the model still requested tools on the last, tools-withheld iteration"
            ))
        } else {
            failed(format!(
                "reached max iterations ({max}) without final answer"
            ))
        }
    }

    /// The workspace summary (docs §4.5): this run's dir and workspace and
    /// the tool counters of earlier runs plus this one.
    fn state_summary(
        &self,
        run_dir: &std::path::Path,
        workspace: &std::path::Path,
        now: &[(String, u32)],
    ) -> String {
        let mut counters = self.counters.clone();
        merge_counters(&mut counters, now);
        context::workspace_summary(Some(run_dir), Some(workspace), &counters)
    }

    fn set_up(
        &self,
        store: &RunStateStore,
        req: &RunRequest,
        cfg: &LoopConfig,
    ) -> Result<(RunDir, SharedTrace, Option<MessageLog>), SetUpError> {
        let run = store
            .create_run(chrono::Utc::now())
            .map_err(SetUpError::RunDir)?;
        store
            .write_request(&run, &req.prompt, &req.session_id)
            .map_err(SetUpError::Request)?;
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
            .map_err(SetUpError::State)?;
        std::fs::create_dir_all(&req.workspace).map_err(|source| SetUpError::Workspace {
            path: req.workspace.clone(),
            source,
        })?;
        let trace = TraceWriter::open(&req.session_dir, cfg.trace).map_err(SetUpError::Trace)?;
        let log = MessageLog::open(&req.session_dir).map_err(SetUpError::MessageLog)?;
        Ok((run, Arc::new(Mutex::new(trace)), Some(log)))
    }

    /// One model call with the single stream retry (docs §1.3 step 7).
    async fn call_model(
        &self,
        t: &Turn,
        request: ChatRequest,
        iter: u64,
    ) -> Result<(Response, Option<Cut>), LlmError> {
        let (cfg, cancel) = (&t.cfg, &t.run_cancel);
        let provider = self.deps.provider.clone();
        let options = CallOptions {
            idle_timeout: cfg.idle_timeout,
            call_timeout: cfg.llm_timeout,
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            // The guard cancels this call only; the run goes on.
            let call_cancel = cancel.child_token();
            let mut live = LiveState::new(
                iter,
                t.events.clone(),
                cfg.reasoning_throttle,
                t.run.path.join(PARTIAL_FILE),
                cfg.partial_checkpoint_interval,
            );
            if cfg.cut_runaways {
                live.guard = Some((
                    RunawayGuard::for_question(&t.req.prompt),
                    call_cancel.clone(),
                ));
            }
            let result = {
                let mut on_delta = |d: LiveDelta<'_>| live.on_delta(d);
                stream_response(
                    provider.as_ref(),
                    request.clone(),
                    options,
                    &call_cancel,
                    &mut on_delta,
                )
                .await
            };
            let runaway = live.finish().await;
            match result {
                Ok(r) => return Ok((r, runaway)),
                Err(e)
                    if attempt == 1
                        && e.retryable()
                        && e.context_overflow().is_none()
                        && !cancel.is_cancelled() =>
                {
                    let wait = e
                        .retry_after()
                        .map(|d| d.min(cfg.max_retry_after))
                        .unwrap_or_default()
                        .max(cfg.stream_retry_delay);
                    let reset = AgentEvent::StreamReset {
                        iter,
                        reason: "provider_stream_retry".into(),
                        provider: provider.name().to_string(),
                        model: provider.model().to_string(),
                        error: e.to_string(),
                        retry_in_ms: wait.as_millis() as u64,
                    };
                    emit_traced(&t.trace, &t.events, reset);
                    let _ = std::fs::remove_file(t.run.path.join(PARTIAL_FILE));
                    tokio::select! {
                        _ = cancel.cancelled() => return Ok((Response { cancelled: true, ..Response::default() }, None)),
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The final-answer flow of docs §1.5: an empty reply, tool-call markup
    /// as text, the answer check, then the answer.
    fn final_answer_step(&self, t: &mut Turn, response: Response, iter: u64) -> AnswerStep {
        let draft = response.content;
        if draft.trim().is_empty() {
            return self.empty_reply(t, iter);
        }
        t.st.consecutive_empty = 0;
        t.st.unsupported = response.finish_reason.as_deref() == Some(FINISH_UNSUPPORTED);
        let screened = match t.markup_in_answer(draft, iter) {
            ControlFlow::Continue(draft) => match t.no_answer(draft, iter) {
                ControlFlow::Continue(draft) => self.check_draft(t, draft, iter),
                stop => stop,
            },
            stop => stop,
        };
        match screened {
            ControlFlow::Continue(draft) => t.deliver(draft, iter),
            ControlFlow::Break(step) => step,
        }
    }

    /// An empty reply is nudged until too many come in a row.
    fn empty_reply(&self, t: &mut Turn, iter: u64) -> AnswerStep {
        t.st.empty_total_at = Some(t.st.step);
        t.st.consecutive_empty += 1;
        let empty = AgentEvent::EmptyResponse {
            iter,
            consecutive: t.st.consecutive_empty,
        };
        emit_traced(&t.trace, &t.events, empty);
        if t.st.consecutive_empty > self.deps.config.max_empty_skips {
            return AnswerStep::EmptyLimit;
        }
        // A local server's first empty reply: the same request again,
        // hotter, rather than a note. Measured with the 1.5B model after
        // three tool results: an empty reply, then, nudged, "I didn't
        // receive any input from you" twice (docs §2.11.2).
        if t.cfg.cut_runaways && !t.st.empty_retried {
            t.st.empty_retried = true;
            t.st.hot_retry = true;
            return AnswerStep::Continue;
        }
        t.st.messages.push(Message::steering(
            "[SYSTEM] Your last reply was empty. Either call a tool or answer the user in plain text.",
        ));
        AnswerStep::Continue
    }

    /// The answer check: a rejected draft is sent back for revision a
    /// bounded number of times, then replaced by the check's fallback.
    fn check_draft(
        &self,
        t: &mut Turn,
        draft: String,
        iter: u64,
    ) -> ControlFlow<AnswerStep, String> {
        let (step, max) = (t.st.step, t.max);
        let check = &*self.deps.answer_check;
        let ctx = answer_context(&t.req, &t.run, t.started_at, &t.st.written);
        let issues = check.validate(&draft, &ctx);
        if issues.is_empty() {
            return ControlFlow::Continue(draft);
        }
        t.st.validations += 1;
        trace_record(
            &t.trace,
            TraceRecord::AnswerRejected {
                iter,
                issues: issues.clone(),
                content: draft.clone(),
            },
        );
        t.events.emit(AgentEvent::AnswerRejected {
            iter,
            issues: issues.clone(),
            revision: t.st.validations,
        });
        t.st.messages.push(Message::assistant(draft.clone()));
        let cap = if max - step >= 3 { 4 } else { 3 };
        if step < max && t.st.validations < cap {
            t.st.messages
                .push(Message::steering(&check.correction(&issues, &ctx)));
            return ControlFlow::Break(AnswerStep::Continue);
        }
        let fb = check.fallback(&draft, &issues, &ctx);
        if fb.content != draft {
            t.events.emit(AgentEvent::TextDelta {
                iter,
                delta: fb.content.clone(),
            });
        }
        t.st.degraded_reasons.push(fb.reason);
        ControlFlow::Continue(fb.content)
    }
}

impl Turn {
    /// Tool-call markup written as text is sent back; on the last
    /// iteration it is replaced by a note that asks the user to continue.
    fn markup_in_answer(&mut self, draft: String, iter: u64) -> ControlFlow<AnswerStep, String> {
        if !contains_tool_markup(&draft) || self.st.example_answer {
            return ControlFlow::Continue(draft);
        }
        trace_record(&self.trace, TraceRecord::ToolCallSyntaxInAnswer { iter });
        self.events.emit(AgentEvent::AnswerRejected {
            iter,
            issues: vec!["tool_call_markup_in_answer".into()],
            revision: self.st.validations,
        });
        self.st.messages.push(Message::assistant(draft));
        self.st.messages.push(Message::steering(
            "[SYSTEM] Your reply contained tool-call markup as plain text. Call tools through the tool interface, or answer in plain text without markup.",
        ));
        if self.st.step < self.max {
            return ControlFlow::Break(AnswerStep::Continue);
        }
        let draft = "I could not deliver a clean answer in the iterations available (the model kept emitting tool-call markup). Ask me to continue and I will pick up from here.".to_string();
        self.st
            .degraded_reasons
            .push("tool-call markup was withheld on the forced-text iteration".into());
        self.events.emit(AgentEvent::TextDelta {
            iter,
            delta: draft.clone(),
        });
        ControlFlow::Continue(draft)
    }

    /// A reply that does not answer (docs §1.5): asking for the question,
    /// or apologising after the tools gave data. It is sent back once with
    /// a steering message while iterations remain; otherwise it is
    /// delivered and the run fails with the reason.
    fn no_answer(&mut self, draft: String, iter: u64) -> ControlFlow<AnswerStep, String> {
        if self.st.unsupported {
            return ControlFlow::Continue(draft);
        }
        let tools = &self.st.tools;
        let calls = tools.calls() > 0;
        let data = tools.calls() > tools.failed();
        let Some(kind) = non_answer(&draft, &self.req.prompt, calls, data) else {
            return ControlFlow::Continue(draft);
        };
        trace_record(
            &self.trace,
            TraceRecord::NonAnswer {
                iter,
                kind: kind.describe().to_string(),
                content: draft.clone(),
            },
        );
        let retry = !self.st.non_answer_steered && self.st.step < self.max;
        self.events.emit(AgentEvent::Notice {
            level: NoticeLevel::Warning,
            message: format!(
                "the model's reply does not answer: {}; {}",
                kind.describe(),
                if retry {
                    "asking once for the answer"
                } else {
                    "the run fails"
                }
            ),
        });
        if retry {
            self.st.non_answer_steered = true;
            self.st.messages.push(Message::assistant(draft));
            self.st.messages.push(Message::steering(
                "[SYSTEM] Your last reply did not answer. The user's request is in their message above; answer it now in plain text, with the figures from the tool results (call a tool if you have none yet). If the tools cannot give what was asked, say exactly what is missing.",
            ));
            return ControlFlow::Break(AnswerStep::Continue);
        }
        self.st.non_answer = Some(format!(
            "the model's reply does not answer the request: {} ({:?})",
            kind.describe(),
            crate::tools::finalize::preview(draft.trim(), 120)
        ));
        ControlFlow::Continue(draft)
    }

    /// The answer: its record and message in the trace, then the event,
    /// then its figures that no tool result holds (docs §1.6).
    fn deliver(&mut self, draft: String, iter: u64) -> AnswerStep {
        let answer = AgentEvent::Answer {
            iter,
            content: draft.clone(),
            degraded: !self.st.degraded_reasons.is_empty(),
        };
        if let Some(record) = record_of(&answer) {
            trace_record(&self.trace, record);
        }
        trace_record(
            &self.trace,
            TraceRecord::Message {
                iter,
                role: Role::Assistant,
                content: draft.clone(),
            },
        );
        self.st.messages.push(Message::assistant(draft.clone()));
        self.events.emit(answer);
        self.check_grounding(&draft, iter);
        self.st.final_text = draft;
        AnswerStep::Answered
    }

    /// When tools were called, the answer's figures are looked up in their
    /// results and the user's own words (docs §1.6).
    fn check_grounding(&mut self, draft: &str, iter: u64) {
        if self.st.tools.calls() == 0 {
            return;
        }
        self.st.raw_error_answer = is_raw_error(draft);
        let sources: Vec<&str> = self.st.sources.iter().map(String::as_str).collect();
        self.st.figures = check_figures(draft, &sources);
        let results: Vec<Sourced<'_>> = self
            .st
            .result_symbols
            .iter()
            .filter_map(|(i, symbols)| {
                Some(Sourced {
                    symbols,
                    text: sources.get(*i)?,
                })
            })
            .collect();
        let others: Vec<&str> = sources
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.st.result_symbols.iter().any(|(r, _)| r == i))
            .map(|(_, s)| *s)
            .collect();
        self.st.misattributed = attribution::misattributed(draft, &results, &others);
        let flagged = self.st.flagged_numbers();
        if !flagged.is_empty() {
            let flagged = AgentEvent::UnverifiedNumbers {
                iter,
                numbers: flagged,
                figures: self.st.figures.figures,
            };
            emit_traced(&self.trace, &self.events, flagged);
        }
    }

    /// A reply without native calls whose text holds calls (docs §2.11.1):
    /// a reply that is its calls has them run, but never a tool that writes
    /// beyond the run; calls shown in an explanation (or asked for as an
    /// example) are the answer; another name gets one correction and is
    /// never an answer.
    fn text_tool_calls(
        &mut self,
        iter: u64,
        response: Response,
    ) -> ControlFlow<StepOutcome, Response> {
        if !self.cfg.text_tool_calls {
            return ControlFlow::Continue(response);
        }
        let draft = response.content.clone();
        self.st.example_answer = false;
        let policy = self.scheduler.has_authorizer();
        // Read again if it calls tools held back, once they are offered.
        let again = self.choice.is_some().then(|| response.clone());
        match screen_with(
            response,
            self.scheduler.registry(),
            iter,
            &self.req.prompt,
            policy,
        ) {
            TextCallDecision::NotACall(response) => ControlFlow::Continue(response),
            TextCallDecision::Example { response, record } => {
                trace_record(&self.trace, record);
                self.st.example_answer = true;
                // The stream held it back as a possible call: it is the
                // answer, so the user sees it now.
                if !response.held_back.is_empty() {
                    self.events.emit(AgentEvent::TextDelta {
                        iter,
                        delta: response.held_back.clone(),
                    });
                }
                ControlFlow::Continue(response)
            }
            TextCallDecision::Calls {
                response,
                record,
                refused,
            } => {
                trace_record(&self.trace, record);
                self.note_refused(iter, &refused);
                if !response.tool_calls.is_empty() {
                    return ControlFlow::Continue(response);
                }
                // Nothing may run: the reply and the notes go back to the
                // model, and the reply is never an answer.
                self.st.messages.push(Message::assistant(draft));
                for note in std::mem::take(&mut self.st.notes_after_tools) {
                    self.st.messages.push(Message::steering(&note));
                }
                ControlFlow::Break(ControlFlow::Continue(()))
            }
            TextCallDecision::Unknown {
                names,
                record,
                correction,
            } => {
                // Calls to tools held back ask for them (docs §4.7.1).
                if let Some(response) = again
                    && self.offer_asked(iter, &names).len() == names.len()
                {
                    return self.text_tool_calls(iter, response);
                }
                trace_record(&self.trace, record);
                if self.st.text_call_corrected || self.st.step >= self.max {
                    return ControlFlow::Break(ControlFlow::Break(Exit::UnknownTextTool(names)));
                }
                self.st.text_call_corrected = true;
                self.events.emit(AgentEvent::AnswerRejected {
                    iter,
                    issues: names
                        .iter()
                        .map(|n| format!("unknown_tool_in_text: {n}"))
                        .collect(),
                    revision: self.st.validations,
                });
                self.st.messages.push(Message::assistant(draft));
                self.st.messages.push(Message::steering(&correction));
                ControlFlow::Break(ControlFlow::Continue(()))
            }
        }
    }

    /// Offers the tools of `wanted` the run held back (docs §4.7.1): the
    /// model called them, which is how it asks for one. Returns those
    /// added; they stay offered, whatever a later shrink drops.
    fn offer_asked(&mut self, iter: u64, wanted: &[String]) -> Vec<String> {
        let Some(choice) = self.choice.as_mut() else {
            return Vec::new();
        };
        let added = choice.add(wanted, &self.available);
        if added.is_empty() {
            return added;
        }
        self.scheduler
            .set_registry(Arc::new(self.available.subset(&choice.offered).0));
        self.compactor.set_overhead(choice.tokens());
        trace_record(&self.trace, tools_chosen(iter, "asked", choice, None));
        self.events.emit(AgentEvent::Notice {
            level: NoticeLevel::Info,
            message: format!("offered {} too: the model called it", added.join(", ")),
        });
        added
    }

    /// Text-form calls that were not run: the notes for the model, a
    /// notice for the user, the over-limit record.
    fn note_refused(&mut self, iter: u64, refused: &Refused) {
        if !refused.writes.is_empty() {
            self.st.notes_after_tools.push(writes_note(&refused.writes));
            self.events.emit(AgentEvent::Notice {
                level: NoticeLevel::Warning,
                message: format!(
                    "not run: {} call(s) to {} written as text; with no approval policy set, a tool that writes is never run from text",
                    refused.writes.len(),
                    refused.writes.join(", ")
                ),
            });
        }
        if let Some(total) = refused.over_limit {
            self.calls_over_limit(iter, total);
        }
        if let (Some(step), false) = (&refused.step, refused.deferred.is_empty()) {
            self.st
                .notes_after_tools
                .push(deferred_note(step, &refused.deferred));
            self.events.emit(AgentEvent::Notice {
                level: NoticeLevel::Info,
                message: format!(
                    "ran the reply's first step ({step}); its other {} text call(s) wait for the model to see the result",
                    refused.deferred.len()
                ),
            });
        }
    }

    /// At most [`MAX_CALLS_PER_REPLY`] calls of a reply run (docs §2.11.1);
    /// native calls past it are dropped from the reply with a note.
    fn capped_calls(&mut self, iter: u64, mut response: Response) -> Response {
        let total = response.tool_calls.len();
        if total > MAX_CALLS_PER_REPLY {
            response.tool_calls.truncate(MAX_CALLS_PER_REPLY);
            self.calls_over_limit(iter, total);
        }
        response
    }

    fn calls_over_limit(&mut self, iter: u64, total: usize) {
        let refused = total.saturating_sub(MAX_CALLS_PER_REPLY);
        trace_record(
            &self.trace,
            TraceRecord::CallsOverLimit {
                iter,
                calls: total,
                limit: MAX_CALLS_PER_REPLY,
                refused,
            },
        );
        self.st.notes_after_tools.push(over_limit_note(total));
        self.events.emit(AgentEvent::Notice {
            level: NoticeLevel::Warning,
            message: format!(
                "the model's reply held {total} tool calls; {MAX_CALLS_PER_REPLY} ran, {refused} were not run"
            ),
        });
    }

    /// Content filter (docs §1.3 step 11): `true` when the reply was blocked
    /// and the iteration is skipped; the breaker ends the run.
    fn content_filtered(&mut self, iter: u64, response: &Response) -> ControlFlow<Exit, bool> {
        let st = &mut self.st;
        if !response.content_filtered {
            st.filtered_consecutive = 0;
            return ControlFlow::Continue(false);
        }
        st.filtered_total += 1;
        st.filtered_consecutive += 1;
        if st.filtered_consecutive >= self.cfg.max_content_filter_skips {
            let count = st.filtered_consecutive;
            trace_record(
                &self.trace,
                TraceRecord::ContentFilterCircuitBreaker { iter, count },
            );
            return ControlFlow::Break(Exit::ContentFilterBreaker(count));
        }
        let filtered = AgentEvent::ContentFiltered {
            iter,
            consecutive: st.filtered_consecutive,
            total: st.filtered_total,
            limit: self.cfg.max_content_filter_skips,
        };
        emit_traced(&self.trace, &self.events, filtered);
        st.messages.push(Message::steering(
            "Your previous response was blocked by the provider's content moderation. Skip that item and move on to the rest of the task.",
        ));
        ControlFlow::Continue(true)
    }

    /// A reply cut for writing the prompt back (docs §2.11.2): a trace
    /// record and a notice; the request is sent again with its question
    /// without the run's context (at the preset's temperature: measured,
    /// at 0.7 the model planned in prose and guessed parameters).
    fn echo_cut(&mut self, iter: u64, why: String) {
        self.st.echoes += 1;
        self.st.echoed = true;
        trace_record(
            &self.trace,
            TraceRecord::ReplyCut {
                iter,
                reason: why.clone(),
                cuts: self.st.runaways + self.st.echoes,
            },
        );
        self.events.emit(AgentEvent::Notice {
            level: NoticeLevel::Warning,
            message: format!("the model's reply was cut: {why}; asking again"),
        });
    }

    /// A reply cut as a runaway (docs §2.11.2): a trace record and a notice,
    /// then one steering message asking for a short answer; a second
    /// runaway, or one on the last iteration, ends the run.
    fn runaway_cut(&mut self, iter: u64, last: bool, why: String) -> ControlFlow<Exit> {
        self.st.runaways += 1;
        let retry = self.st.runaways == 1 && !last;
        trace_record(
            &self.trace,
            TraceRecord::ReplyCut {
                iter,
                reason: why.clone(),
                cuts: self.st.runaways,
            },
        );
        self.events.emit(AgentEvent::Notice {
            level: NoticeLevel::Warning,
            message: format!(
                "the model's reply was cut: {why}; {}",
                if retry {
                    "asking once for a short answer"
                } else {
                    "the run ends without an answer"
                }
            ),
        });
        if !retry {
            let reason = if self.st.runaways > 1 {
                format!(
                    "the model's reply was cut again after it was asked for a short answer: {why}"
                )
            } else {
                format!("the model's reply was cut on the last iteration: {why}")
            };
            return ControlFlow::Break(Exit::Runaway(reason));
        }
        self.st.messages.push(Message::steering(&format!(
            "[SYSTEM] Your last reply was cut off: {why}. Do not list data rows or repeat yourself. Answer the user's question in a few sentences with only the figures asked for, taken from the tool results; call a tool if you still need data."
        )));
        ControlFlow::Continue(())
    }

    /// A reply is progress; its model, usage and streamed text are recorded.
    fn note_reply(&mut self, iter: u64, response: &Response) {
        self.activity.mark();
        if let Some(m) = &response.model {
            self.st.reported_model = Some(m.clone());
            self.usage.set_model(m);
        }
        if let Some(u) = &response.usage {
            if let Err(e) = self.usage.record(iter, u) {
                tracing::warn!("cannot write llm_usage.json: {e}");
            }
            self.events.emit(AgentEvent::LlmUsage {
                iter,
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                total_tokens: u.total_tokens,
            });
        }
        if !response.content.is_empty() {
            trace_record(
                &self.trace,
                TraceRecord::Thinking {
                    iter,
                    content: response.content.clone(),
                },
            );
            self.events.emit(AgentEvent::ThinkingDone {
                iter,
                content: crate::tools::finalize::preview(&response.content, 500),
            });
        }
    }

    /// The reply's tool calls: the assistant message first, the batch, the
    /// results in call order, then checkpoint E (a batch cut short by cancel).
    async fn run_tools(
        &mut self,
        iter: u64,
        response: &Response,
    ) -> ControlFlow<Exit, Vec<CallOutcome>> {
        let store_error =
            || Exit::StoreError("cannot append to the session's messages.jsonl".into());
        let reasoning = (!response.reasoning.is_empty()).then(|| response.reasoning.clone());
        let (calls, warnings) = self.coerced_calls(&response.tool_calls);
        let assistant =
            Message::assistant_tool_calls(response.content.clone(), calls.clone(), reasoning);
        self.st.messages.push(assistant.clone());
        if !persist(&mut self.log, assistant, &self.run.id) {
            return ControlFlow::Break(store_error());
        }
        let mut outcomes = self.scheduler.run(iter, &calls, &self.tool_base).await;
        for (o, w) in outcomes.iter_mut().zip(&warnings) {
            o.model_content = with_warnings(&o.model_content, w);
        }
        for o in &outcomes {
            self.st.tools.record(o);
            // A tool that writes files declares it (docs §2.1).
            let writes_files = self
                .scheduler
                .registry()
                .get(o.call.name())
                .is_some_and(|t| t.caps().writes_files);
            if o.succeeded()
                && writes_files
                && let Some(p) = o.args.get("path").and_then(|v| v.as_str())
            {
                let full = if std::path::Path::new(p).is_absolute() {
                    PathBuf::from(p)
                } else {
                    self.req.workspace.join(p)
                };
                self.st.written.push(full);
            }
            let msg =
                Message::tool_result(o.call.id.clone(), o.call.name(), o.model_content.clone());
            if o.succeeded() {
                let symbols = attribution::call_symbols(&o.args);
                self.st
                    .result_symbols
                    .push((self.st.sources.len(), symbols));
            }
            self.st.sources.push(o.model_content.clone());
            // The call's own numbers (steps, windows, thresholds) are the
            // model's choices, not claims to verify (docs §1.6).
            self.st.sources.push(o.args.to_string());
            self.st.messages.push(msg.clone());
            if !persist(&mut self.log, msg, &self.run.id) {
                return ControlFlow::Break(store_error());
            }
        }
        for note in std::mem::take(&mut self.st.notes_after_tools) {
            self.st.messages.push(Message::steering(&note));
        }
        self.repeated_failures(iter, &outcomes)?;
        if outcomes
            .iter()
            .any(|o| o.status == ToolCallStatus::Cancelled)
            && self.run_cancel.is_cancelled()
        {
            trace_record(&self.trace, TraceRecord::Cancelled { iter });
            return ControlFlow::Break(Exit::Cancelled);
        }
        ControlFlow::Continue(outcomes)
    }

    /// The calls with harmless slips in their arguments put right against
    /// their tools' schemas (docs §2.2.1), and each call's warnings.
    fn coerced_calls(&self, calls: &[ToolCall]) -> (Vec<ToolCall>, Vec<Vec<String>>) {
        let registry = self.scheduler.registry();
        calls
            .iter()
            .map(|c| {
                let fixed = registry
                    .get(c.name())
                    .and_then(|tool| coerce(&tool.parameters(), &c.function.arguments));
                match fixed {
                    Some(f) => {
                        let mut call = c.clone();
                        call.function.arguments = f.arguments.to_string();
                        (call, f.warnings)
                    }
                    None => (c.clone(), Vec::new()),
                }
            })
            .unzip()
    }

    /// The same failing call again (docs §1.3 step 14): the second time a
    /// steering message after the results, the third time the run stops.
    fn repeated_failures(&mut self, iter: u64, outcomes: &[CallOutcome]) -> ControlFlow<Exit> {
        let mut warned = false;
        for o in outcomes {
            let Some(r) = self.st.repeats.record(o) else {
                continue;
            };
            trace_record(
                &self.trace,
                TraceRecord::RepeatedFailure {
                    iter,
                    tool: r.tool.clone(),
                    count: r.count,
                    error: r.error.clone(),
                },
            );
            if r.count >= STOP_AT {
                return ControlFlow::Break(Exit::RepeatedFailure(r));
            }
            if r.count == WARN_AT && !warned {
                warned = true;
                self.st.messages.push(Message::steering(&r.warning()));
            }
        }
        ControlFlow::Continue(())
    }

    /// A warning when more than the configured share of the run's
    /// iterations was blocked by the content filter.
    fn content_filter_warning(&self) -> Option<String> {
        let (filtered, iterations) = (self.st.filtered_total, self.st.step.max(1));
        (filtered > 0 && filtered as f64 / iterations as f64 > self.cfg.content_filter_warning_ratio)
            .then(|| {
                format!(
                    "{filtered} of {iterations} iterations ({:.0}%) were blocked by the provider's content filter; consider a less aggressive provider",
                    100.0 * filtered as f64 / iterations as f64
                )
            })
    }
}

enum AnswerStep {
    Continue,
    Answered,
    EmptyLimit,
}

/// What the answer check reads of the run.
fn answer_context<'a>(
    req: &'a RunRequest,
    run: &'a RunDir,
    run_started: SystemTime,
    written: &'a [PathBuf],
) -> AnswerContext<'a> {
    AnswerContext {
        user_message: &req.prompt,
        written,
        run_started,
        workspace: &req.workspace,
        run_dir: &run.path,
    }
}

/// The configured estimator, or the model's own.
fn estimator_of(cfg: &LoopConfig, model: &str) -> Estimator {
    Estimator::from_name(&cfg.compaction.estimator, model)
        .unwrap_or_else(|| Estimator::for_model(model))
}

/// Tokens of the tool schemas every request carries (docs §3.1), as the
/// provider sends them.
fn tool_schema_tokens(cfg: &LoopConfig, model: &str, registry: &Registry) -> u64 {
    let specs: Vec<serde_json::Value> = registry.specs().iter().map(|s| s.to_openai()).collect();
    if specs.is_empty() {
        return 0;
    }
    estimator_of(cfg, model).count_text(&serde_json::Value::Array(specs).to_string())
}

/// Drops the run's lowest-ranked tools, never a basic nor one the model
/// asked for, until the request fits `limit` tokens (docs §3.9, §4.7.1);
/// what was dropped and the tokens after.
fn drop_tools(t: &mut Turn, iter: u64, tokens: u64, limit: u64) -> (Vec<String>, u64) {
    let estimator = t.compactor.estimator();
    let choice = t
        .choice
        .get_or_insert_with(|| tool_choice::everything(&t.available, &t.req.prompt, &estimator));
    let mut dropped = Vec::new();
    let mut now = tokens;
    while now > limit {
        let Some(name) = choice.drop_lowest() else {
            break;
        };
        dropped.push(name);
        t.compactor.set_overhead(choice.tokens());
        now = t.compactor.count(&t.st.messages);
    }
    if !dropped.is_empty() {
        t.scheduler
            .set_registry(Arc::new(t.available.subset(&choice.offered).0));
        trace_record(
            &t.trace,
            TraceRecord::ToolsDropped {
                iter,
                dropped: dropped.clone(),
                tokens_before: tokens,
                tokens_after: now,
            },
        );
    }
    (dropped, now)
}

/// The `tools_chosen` record of `choice`.
fn tools_chosen(iter: u64, reason: &str, choice: &Choice, budget: Option<u64>) -> TraceRecord {
    TraceRecord::ToolsChosen {
        iter,
        reason: reason.to_string(),
        offered: choice.offered.clone(),
        held_back: choice.held_back(),
        tokens: choice.tokens(),
        budget,
    }
}

/// Writes the record `event` leaves in the trace, then emits the event.
fn emit_traced(trace: &SharedTrace, events: &EventSink, event: AgentEvent) {
    if let Some(record) = record_of(&event) {
        trace_record(trace, record);
    }
    events.emit(event);
}

/// Adds the tool counts of `now` to `counters`.
fn merge_counters(counters: &mut Vec<(String, u32)>, now: &[(String, u32)]) {
    for (name, n) in now {
        match counters.iter_mut().find(|(k, _)| k == name) {
            Some((_, k)) => *k += n,
            None => counters.push((name.clone(), *n)),
        }
    }
}

/// Whether the run ends on a delivered answer: the rows of docs §1.4 above
/// "a non-empty final answer" did not apply.
fn answered(t: &Turn, exit: &Exit) -> bool {
    let stopped = t.activity.stall_reason().is_some()
        || matches!(exit, Exit::Cancelled)
        || (t.cancel.is_cancelled() && !matches!(exit, Exit::Answered));
    let broke = matches!(
        exit,
        Exit::ContentFilterBreaker(_) | Exit::ProviderError(_) | Exit::StoreError(_)
    );
    !stopped && !broke && !t.st.final_text.trim().is_empty()
}

/// The status of an answered run (docs §1.4): `unsupported` when the
/// answering reply finished so; `failed` when it is no answer (§1.5); else
/// `success`, unless its tool calls failed (all: `failed`, some:
/// `partial`) or its answer is not grounded (a key figure or every figure
/// unverified, or a raw error result: `partial`, §1.6), with the failures
/// named first and any degradation after.
fn answered_status(st: &TurnState) -> (RunStatus, String, Option<String>) {
    if st.unsupported {
        return (RunStatus::Unsupported, UNSUPPORTED_REASON.to_string(), None);
    }
    if let Some(why) = &st.non_answer {
        return (RunStatus::Failed, why.clone(), Some(NON_ANSWER.to_string()));
    }
    let degraded = (!st.degraded_reasons.is_empty()).then(|| st.degraded_reasons.join("; "));
    let verdict = match (st.tools.verdict(), ungrounded(st)) {
        (Some((RunStatus::Failed, f)), _) => Some((RunStatus::Failed, f)),
        (Some((_, f)), Some(g)) => Some((RunStatus::Partial, format!("{f}; {g}"))),
        (Some(v), None) => Some(v),
        (None, Some(g)) => Some((RunStatus::Partial, g)),
        (None, None) => None,
    };
    match (verdict, degraded) {
        (None, None) => (
            RunStatus::Success,
            "final answer delivered".to_string(),
            None,
        ),
        (None, Some(d)) => (RunStatus::Success, d, None),
        (Some((status, failures)), degraded) => {
            let reason = match degraded {
                Some(d) => format!("{failures}; {d}"),
                None => failures,
            };
            let code = (status == RunStatus::Failed).then(|| TOOL_CALLS_FAILED.to_string());
            (status, reason, code)
        }
    }
}

/// Why an answer is not grounded in the run's tool results (docs §1.6).
fn ungrounded(st: &TurnState) -> Option<String> {
    if st.raw_error_answer {
        return Some("the answer is a tool's raw error result, not an answer".into());
    }
    if !st.misattributed.is_empty() {
        let each: Vec<String> = st.misattributed.iter().map(|m| m.describe()).collect();
        return Some(format!(
            "a key figure of the answer is given to the wrong symbol: {}",
            each.join("; ")
        ));
    }
    let f = &st.figures;
    let appear = |n: &[String]| if n.len() == 1 { "appears" } else { "appear" };
    if f.all_unverified() {
        return Some(format!(
            "every figure in the answer is unverified: {} {} in no tool result of this run",
            f.unverified.join(", "),
            appear(&f.unverified)
        ));
    }
    // A key figure is a measured quantity (decimals, a percent or a sign),
    // the kind a question asks for; an unverified count (`41 trades`) only
    // flags the answer.
    (!f.key_unverified.is_empty()).then(|| {
        format!(
            "a key figure of the answer is unverified: {} {} in no tool result of this run",
            f.key_unverified.join(", "),
            appear(&f.key_unverified)
        )
    })
}

/// The reason of a run that ended `unsupported` (docs §1.4).
pub const UNSUPPORTED_REASON: &str =
    "no tool offered in this session can serve this request; the answer says what is missing";

/// `error_code` of an answered run whose every tool call failed.
pub const TOOL_CALLS_FAILED: &str = "tool_calls_failed";

/// `error_code` of a run whose reply did not answer (docs §1.5).
pub const NON_ANSWER: &str = "non_answer";

/// The conversation with the run-context block left out of its user
/// messages (the stored conversation keeps it).
fn without_context_block(messages: &[Message]) -> Arc<Vec<Message>> {
    let mut out = messages.to_vec();
    for m in out.iter_mut().filter(|m| m.role == Role::User) {
        m.content = context::without_run_context(&m.content).to_string();
    }
    Arc::new(out)
}

/// Replies cut for writing the prompt back that are asked again as they
/// were; the next is cut as a runaway (docs §2.11.2).
const ECHO_RETRIES: u32 = 2;

/// The temperature of a request sent again after a local server's reply
/// was empty.
const RETRY_TEMPERATURE: f32 = 0.7;

/// `error_code` of a run ended by a runaway reply (docs §2.11.2).
pub const RUNAWAY_REPLY: &str = "runaway_reply";

fn state_status(status: RunStatus) -> Status {
    match status {
        RunStatus::Success => Status::Success,
        RunStatus::Partial => Status::Partial,
        RunStatus::Failed => Status::Failed,
        RunStatus::Cancelled => Status::Cancelled,
        RunStatus::Interrupted => Status::Interrupted,
        RunStatus::Unsupported => Status::Unsupported,
    }
}

/// The run's `end` record, from the outcome `run_finished` reports too.
fn end_record(o: &RunOutcome, iter: u64, stalled: bool) -> TraceRecord {
    TraceRecord::End(EndRecord {
        iter,
        status: state_status(o.status),
        iterations: o.iterations,
        reason: o.reason.clone(),
        degraded: o.degraded,
        stalled,
        run_id: None,
    })
}

/// Streamed text checkpoint for crash recovery (docs §5.2).
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
    /// The runaway guard and the call it cancels (docs §2.11.2).
    guard: Option<(RunawayGuard, CancellationToken)>,
    /// Why the guard cut the reply.
    runaway: Option<Cut>,
    /// Bytes of the reply the guard has read, and bytes shown: held text
    /// shown later is read once.
    watched: usize,
    shown: usize,
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
            guard: None,
            runaway: None,
            watched: 0,
            shown: 0,
        }
    }

    /// The guard reads each byte of the reply once, shown or held.
    fn watch(&mut self, text: &str, shown: bool) {
        let unread = if shown {
            self.shown += text.len();
            let new = self.shown.saturating_sub(self.watched);
            text.get(text.len().saturating_sub(new)..)
                .unwrap_or_default()
        } else {
            text
        };
        self.watched += unread.len();
        if let Some((guard, call)) = self.guard.as_mut()
            && let Some(cut) = guard.push_cut(unread)
        {
            self.runaway = Some(cut);
            call.cancel();
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
                self.watch(t, true);
            }
            LiveDelta::Held(t) => self.watch(t, false),
            LiveDelta::Reasoning(r) => {
                self.reasoning.push_str(r);
                // First chunk of the iteration at once, then throttled (docs §1.3).
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
    /// checkpoint is on disk before the call counts as done. Returns why
    /// the guard cut the reply, if it did.
    async fn finish(mut self) -> Option<Cut> {
        if self.reasoning.chars().count() > self.reasoning_emitted_chars {
            self.emit_reasoning();
        }
        self.checkpoint_done.cancel();
        if let Some(w) = self.writer.take() {
            let _ = w.await;
        }
        self.runaway.take()
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
        unverified_numbers: o.unverified_numbers.clone(),
    }
}
