//! The DAG scheduler (docs §14.3). Every task runs as a full
//! [`crate::agent::Loop`] (its own context, compaction, trace and run dir)
//! on a registry holding only its agent's tools. A task starts when all its
//! dependencies succeeded, at most `max_workers` at once; it has
//! `timeout_seconds × (max_retries + 1)` in all, and a failed attempt is
//! retried with a fresh loop while budget and retries remain. A failed task
//! fails its dependents, naming itself; the other tasks go on. A `partial`
//! task (its worker answered, but some tool calls failed) passes its answer
//! on. Cancel and the whole-run deadline stop every worker at its next
//! checkpoint.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::preset::{AgentSpec, Preset};
use super::record::{EventLog, RunFiles, RunRecord, TaskRecord, new_run_id};
use super::template::{UpstreamResult, substitute, upstream_context, user_message};
use super::validate::{Catalog, Issue, VariableError, inspect, resolve_variables};
use crate::agent::compaction::CompactionRequest;
use crate::agent::events::{AgentEvent, RunStatus, SwarmTaskInfo, TaskState};
use crate::agent::{EventSink, Loop, LoopDeps, RunOutcome, RunRequest};
use crate::llm::{LlmError, Provider};
use crate::model::team_rules;
use crate::store::run_state::Status;
use crate::store::{Paths, StoreError};
use crate::tools::{BackgroundQueue, Registry};

/// Default for `[swarm] max_workers` and `--max-workers` (docs §14.3).
pub const DEFAULT_MAX_WORKERS: usize = 4;
/// Default whole-run deadline (docs §14.3; the original's `SWARM_TIMEOUT`).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(1_800);
/// The upstream section of a task that has no answer to pass on.
const NO_RESULT: &str = "(no result: the task had not delivered an answer when this one started)";
/// How long a stopped worker may take to reach its checkpoint before its
/// loop is dropped.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Builds the provider for an agent's own `model`.
pub type ProviderFactory = Arc<dyn Fn(&str) -> Result<Arc<dyn Provider>, LlmError> + Send + Sync>;

/// How to run a team.
#[derive(Clone)]
pub struct SwarmOptions {
    /// `--var k=v` values; defaults fill the rest.
    pub vars: BTreeMap<String, String>,
    pub max_workers: usize,
    /// The whole run's deadline.
    pub deadline: Duration,
    /// For agents that name a `model`; `None` gives every agent the run's
    /// provider.
    pub provider_for_model: Option<ProviderFactory>,
    /// The user's folder every member works in (`--workspace`); `None`:
    /// the team run's shared `workspace/`.
    pub workspace: Option<PathBuf>,
}

impl Default for SwarmOptions {
    fn default() -> Self {
        SwarmOptions {
            vars: BTreeMap::new(),
            max_workers: DEFAULT_MAX_WORKERS,
            deadline: DEFAULT_DEADLINE,
            provider_for_model: None,
            workspace: None,
        }
    }
}

/// Why a team could not start.
#[derive(Debug, thiserror::Error)]
pub enum SwarmError {
    #[error("the preset has {} error(s):\n{}", .0.len(), .0.iter().map(|i| format!("  {i}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Issue>),
    #[error(transparent)]
    Variables(#[from] VariableError),
    #[error("agent '{agent}' names model '{model}', which cannot be used: {source}")]
    Model {
        agent: String,
        model: String,
        source: LlmError,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How a team run ended.
#[derive(Clone, Debug)]
pub struct SwarmOutcome {
    pub run_id: String,
    pub status: RunStatus,
    pub reason: Option<String>,
    pub dir: PathBuf,
    pub report: PathBuf,
    pub seconds: f64,
    pub record: RunRecord,
}

/// What one task's attempts came to.
#[derive(Clone, Debug)]
struct TaskResult {
    state: TaskState,
    reason: Option<String>,
    answer: String,
    seconds: f64,
    tokens: u64,
}

/// What every worker shares: the record, the event log and the sink.
struct Shared {
    run_id: String,
    files: RunFiles,
    /// Where members' file tools work: the user's folder or `files`' own.
    workspace: PathBuf,
    record: Mutex<RunRecord>,
    log: Mutex<EventLog>,
    sink: EventSink,
    /// Why the run is stopping (cancel, deadline), for the tasks it stops.
    stopping: Mutex<Option<String>>,
}

impl Shared {
    /// Appends to `events.jsonl` (synced at task and run ends) and passes
    /// the event on.
    fn emit(&self, event: AgentEvent) {
        let sync = matches!(
            event,
            AgentEvent::SwarmTaskFinished { .. } | AgentEvent::SwarmFinished { .. }
        );
        if let Ok(mut log) = self.log.lock() {
            log.append(&event);
            if sync {
                log.sync();
            }
        }
        self.sink.emit(event);
    }

    /// Changes the record and writes `run.json` (atomically).
    fn update(&self, change: impl FnOnce(&mut RunRecord)) {
        let Ok(mut record) = self.record.lock() else {
            return;
        };
        change(&mut record);
        if let Err(e) = self.files.write(&record) {
            tracing::warn!("cannot write {}: {e}", self.files.run_file().display());
        }
    }

    /// A step within a task: `run.json` is rewritten atomically, without
    /// the fsyncs (see [`RunFiles::write_in_flight`]).
    fn note_task(&self, task: &str, change: impl FnOnce(&mut TaskRecord)) {
        let Ok(mut record) = self.record.lock() else {
            return;
        };
        if let Some(t) = record.task_mut(task) {
            change(t);
        }
        if let Err(e) = self.files.write_in_flight(&record) {
            tracing::warn!("cannot write {}: {e}", self.files.run_file().display());
        }
    }

    fn update_task(&self, task: &str, change: impl FnOnce(&mut TaskRecord)) {
        self.update(|r| {
            if let Some(t) = r.task_mut(task) {
                change(t);
            }
        });
    }

    fn set_stopping(&self, reason: String) {
        if let Ok(mut s) = self.stopping.lock() {
            *s = Some(reason);
        }
    }

    fn stopping(&self) -> Option<String> {
        self.stopping.lock().ok().and_then(|s| s.clone())
    }

    /// The record as it is now (a panicked writer's last state included).
    fn snapshot(&self) -> RunRecord {
        self.record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The run dir of the task's latest attempt, if one started.
    fn last_run_dir(&self, task: &str) -> Option<String> {
        self.snapshot()
            .tasks
            .into_iter()
            .find(|t| t.id == task)
            .and_then(|t| t.run_dirs.last().cloned())
    }
}

/// One task ready to start.
struct Job {
    task: String,
    agent: AgentSpec,
    deps: LoopDeps,
    message: String,
}

/// Runs `preset` as a team (docs §14.3): validates it against the tools and
/// skills of `deps` (the template every worker's deps are made from),
/// resolves the variables, then schedules the tasks. Errors are returned
/// before anything starts; once started, the outcome says how it ended.
pub async fn run(
    preset: &Preset,
    options: SwarmOptions,
    deps: LoopDeps,
    paths: &Paths,
    events: EventSink,
    cancel: CancellationToken,
) -> Result<SwarmOutcome, SwarmError> {
    let inspection = inspect(preset, &Catalog::from_deps(&deps));
    if !inspection.is_ok() {
        return Err(SwarmError::Invalid(inspection.errors().cloned().collect()));
    }
    let vars = resolve_variables(preset, &options.vars)?;
    let agents = agent_deps(preset, &deps, &vars, &options)?;
    let started = Instant::now();
    let now = chrono::Utc::now();
    let run_id = new_run_id(now);
    let files = RunFiles::create(paths, &run_id)?;
    let max_workers = options.max_workers.max(1);
    let record = initial_record(
        preset,
        &run_id,
        &vars,
        &inspection.layers,
        max_workers,
        &files,
    );
    files.write(&record)?;
    let announced: Vec<SwarmTaskInfo> = record.tasks.iter().map(TaskRecord::info).collect();
    let shared = Arc::new(Shared {
        run_id: run_id.clone(),
        log: Mutex::new(EventLog::open(files.events_file())),
        workspace: options
            .workspace
            .clone()
            .unwrap_or_else(|| files.workspace()),
        files,
        record: Mutex::new(record),
        sink: events,
        stopping: Mutex::new(None),
    });
    shared.emit(AgentEvent::SwarmStarted {
        run_id: run_id.clone(),
        preset: preset.name.clone(),
        title: preset.title.clone(),
        run_dir: shared.files.dir.display().to_string(),
        layers: inspection.layers.clone(),
        tasks: announced,
    });
    let order: Vec<String> = inspection.layers.concat();
    let mut dag = Dag {
        preset,
        vars: &vars,
        agents: &agents,
        shared: shared.clone(),
        order,
        results: BTreeMap::new(),
        run_dirs: BTreeMap::new(),
        max_workers,
    };
    let stop = dag.schedule(options.deadline, &cancel).await;
    Ok(finish(&dag, stop, started))
}

/// Each agent's worker deps: its tools only, its skills, its iterations,
/// its model, and its system prompt as the role's instructions.
fn agent_deps(
    preset: &Preset,
    template: &LoopDeps,
    vars: &BTreeMap<String, String>,
    options: &SwarmOptions,
) -> Result<BTreeMap<String, LoopDeps>, SwarmError> {
    let mut out = BTreeMap::new();
    for agent in &preset.agents {
        let mut deps = template.clone();
        let mut registry = Registry::new();
        for name in &agent.tools {
            if let Some(tool) = template.registry.get(name.as_str()) {
                // Names are unique in the template, so this cannot collide.
                let _ = registry.register(tool.clone());
            }
        }
        deps.registry = Arc::new(registry);
        // MCP tools it names join as their servers become ready (docs §13.2).
        deps.late_tools = template
            .late_tools
            .restricted(agent.tools.iter().map(|n| n.as_str()));
        deps.skills
            .retain(|s| agent.skills.iter().any(|k| k.as_str() == s.name));
        deps.config.max_iterations = agent.max_iterations.max(1);
        // The preset names the agent's tools: kept as named, only cut to
        // fit a window (docs §4.7.1).
        deps.config.choose_tools = false;
        // The one user message is exactly the task's (team contract):
        // recalled memories are not added to it.
        deps.recall = None;
        deps.role_instructions = substitute(&agent.system_prompt, vars);
        if let (Some(model), Some(factory)) = (&agent.model, &options.provider_for_model) {
            deps.provider = factory(model).map_err(|source| SwarmError::Model {
                agent: agent.id.value.clone(),
                model: model.clone(),
                source,
            })?;
        }
        out.insert(agent.id.value.clone(), deps);
    }
    Ok(out)
}

fn initial_record(
    preset: &Preset,
    run_id: &str,
    vars: &BTreeMap<String, String>,
    layers: &[Vec<String>],
    max_workers: usize,
    files: &RunFiles,
) -> RunRecord {
    RunRecord {
        id: run_id.to_string(),
        preset: preset.name.clone(),
        title: preset.title.clone(),
        status: Status::Running,
        reason: None,
        vars: vars.clone(),
        started_at: crate::store::messages::now_rfc3339(),
        finished_at: None,
        seconds: 0.0,
        max_workers,
        layers: layers.to_vec(),
        tasks: preset
            .tasks
            .iter()
            .map(|t| TaskRecord {
                id: t.id.value.clone(),
                agent: t.agent_id.value.clone(),
                role: preset
                    .agent(t.agent_id.as_str())
                    .map(|a| a.role.clone())
                    .unwrap_or_default(),
                depends_on: t.depends_on.iter().map(|d| d.value.clone()).collect(),
                state: TaskState::Pending,
                reason: None,
                attempts: 0,
                run_dirs: Vec::new(),
                seconds: 0.0,
                tokens: 0,
                session_dir: files.task_dir(t.id.as_str()).display().to_string(),
            })
            .collect(),
        pid: None,
        pid_start: None,
    }
    .owned_by_this_process()
}

/// How the scheduling ended: every task got a result, or a stop came first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Completed,
    Cancelled,
    Deadline(Duration),
}

/// The scheduling state of one run.
struct Dag<'a> {
    preset: &'a Preset,
    vars: &'a BTreeMap<String, String>,
    agents: &'a BTreeMap<String, LoopDeps>,
    shared: Arc<Shared>,
    /// Tasks in topological order (layer by layer, file order within).
    order: Vec<String>,
    results: BTreeMap<String, TaskResult>,
    /// The last attempt's run dir of each task that ran.
    run_dirs: BTreeMap<String, String>,
    max_workers: usize,
}

impl Dag<'_> {
    /// Starts ready tasks up to the limit, collects finished ones and fails
    /// the dependents of failed ones, until every task has a result or the
    /// run is stopped (cancel, deadline).
    async fn schedule(&mut self, deadline: Duration, cancel: &CancellationToken) -> Stop {
        let workers_cancel = cancel.child_token();
        let deadline_at = Instant::now() + deadline;
        let mut running: JoinSet<(String, TaskResult, Option<String>)> = JoinSet::new();
        let mut stop = Stop::Completed;
        let mut grace_at: Option<Instant> = None;
        loop {
            // A cancel can land between two joins: notice it before
            // anything new starts or fails.
            if stop == Stop::Completed
                && cancel.is_cancelled()
                && self.results.len() < self.order.len()
            {
                stop = Stop::Cancelled;
                self.shared.set_stopping(stop_text(stop));
                grace_at = Some(Instant::now() + STOP_GRACE);
            }
            if stop == Stop::Completed {
                self.fail_blocked();
                while running.len() < self.max_workers {
                    let Some(job) = self.next_job() else { break };
                    self.shared
                        .note_task(&job.task, |t| t.state = TaskState::Running);
                    let shared = self.shared.clone();
                    let token = workers_cancel.clone();
                    running.spawn(run_task(shared, job, token));
                }
            }
            if running.is_empty() {
                break;
            }
            tokio::select! {
                joined = running.join_next() => match joined {
                    Some(Ok((task, result, run_dir))) => self.record_result(task, result, run_dir),
                    Some(Err(e)) => tracing::warn!("a swarm worker ended abnormally: {e}"),
                    None => break,
                },
                _ = cancel.cancelled(), if stop == Stop::Completed => {
                    stop = Stop::Cancelled;
                    self.shared.set_stopping(stop_text(stop));
                    grace_at = Some(Instant::now() + STOP_GRACE);
                }
                _ = tokio::time::sleep_until(deadline_at), if stop == Stop::Completed => {
                    stop = Stop::Deadline(deadline);
                    self.shared.set_stopping(stop_text(stop));
                    workers_cancel.cancel();
                    grace_at = Some(Instant::now() + STOP_GRACE);
                }
                _ = sleep_until_opt(grace_at) => {
                    // Workers that did not reach a checkpoint in time.
                    running.abort_all();
                    while running.join_next().await.is_some() {}
                    break;
                }
            }
        }
        self.settle_unfinished(stop);
        stop
    }

    /// The next task whose dependencies all succeeded, with its message.
    fn next_job(&self) -> Option<Job> {
        let id = self.order.iter().find(|id| {
            !self.results.contains_key(*id)
                && self.state_of(id) == TaskState::Pending
                && self.preset.task(id).is_some_and(|t| {
                    t.depends_on.iter().all(|d| {
                        self.results
                            .get(d.as_str())
                            .is_some_and(|r| r.state.delivered())
                    })
                })
        })?;
        let task = self.preset.task(id)?;
        let agent = self.preset.agent(task.agent_id.as_str())?.clone();
        let deps = self.agents.get(task.agent_id.as_str())?.clone();
        let upstream: Vec<UpstreamResult> = task
            .input_from
            .0
            .iter()
            .map(|(key, source)| {
                // Only a task that delivered (success or partial) has an
                // answer to pass on (an `input_from` that is not upstream
                // may have neither).
                let answer = self
                    .results
                    .get(source.as_str())
                    .filter(|r| r.state.delivered())
                    .map_or(NO_RESULT, |r| r.answer.as_str());
                UpstreamResult {
                    key,
                    task: source.as_str(),
                    role: self
                        .preset
                        .task(source.as_str())
                        .and_then(|t| self.preset.agent(t.agent_id.as_str()))
                        .map_or("", |a| a.role.as_str()),
                    answer,
                    run_dir: self
                        .run_dirs
                        .get(source.as_str())
                        .map_or("", String::as_str),
                }
            })
            .collect();
        let context = (!upstream.is_empty()).then(|| upstream_context(&upstream));
        // A reader's prompt may state its rule's thresholds as `{name}`:
        // the values in force, so the model reads what the rule decides by.
        let mut vars = self.vars.clone();
        if let Some(rule) = &task.decision {
            vars.extend(team_rules::in_force(rule.as_str(), &task.thresholds));
        }
        // The rule line goes just before the upstream results, where the
        // member's own request ends (docs §14.7).
        let context = match (&task.decision, context) {
            (Some(rule), Some(ctx)) => Some(format!(
                "{}\n\n{ctx}",
                team_rules::line_with(rule.as_str(), &task.thresholds)
            )),
            (Some(rule), None) => Some(team_rules::line_with(rule.as_str(), &task.thresholds)),
            (None, ctx) => ctx,
        };
        Some(Job {
            task: id.clone(),
            message: user_message(&task.prompt_template, &vars, context.as_deref()),
            agent,
            deps,
        })
    }

    fn state_of(&self, id: &str) -> TaskState {
        self.shared
            .record
            .lock()
            .ok()
            .and_then(|r| r.tasks.iter().find(|t| t.id == id).map(|t| t.state))
            .unwrap_or(TaskState::Pending)
    }

    fn record_result(&mut self, task: String, result: TaskResult, run_dir: Option<String>) {
        if let Some(dir) = run_dir {
            self.run_dirs.insert(task.clone(), dir);
        }
        self.results.insert(task, result);
    }

    /// Pending tasks with a failed dependency fail too, naming it; in
    /// topological order, so a chain fails in one pass.
    fn fail_blocked(&mut self) {
        for id in self.order.clone() {
            if self.results.contains_key(&id) {
                continue;
            }
            let Some(task) = self.preset.task(&id) else {
                continue;
            };
            let failed = task.depends_on.iter().find_map(|d| {
                self.results
                    .get(d.as_str())
                    .filter(|r| !r.state.delivered())
                    .map(|r| (d.as_str(), r.state))
            });
            if let Some((upstream, state)) = failed {
                let reason = format!(
                    "upstream task '{upstream}' {}",
                    match state {
                        TaskState::TimedOut => "timed out",
                        TaskState::Cancelled => "was cancelled",
                        _ => "failed",
                    }
                );
                self.settle(&id, TaskState::Failed, reason);
            }
        }
    }

    /// Gives a task that never ran its final state.
    fn settle(&mut self, id: &str, state: TaskState, reason: String) {
        self.shared.update_task(id, |t| {
            t.state = state;
            t.reason = Some(reason.clone());
        });
        self.shared.emit(AgentEvent::SwarmTaskFinished {
            task: id.to_string(),
            status: task_status(state),
            reason: Some(reason.clone()),
            seconds: 0.0,
            tokens: 0,
        });
        self.results.insert(
            id.to_string(),
            TaskResult {
                state,
                reason: Some(reason),
                answer: String::new(),
                seconds: 0.0,
                tokens: 0,
            },
        );
    }

    /// After a stop, the tasks without a result (never started, or whose
    /// worker was dropped after the grace) end `cancelled` with the stop's
    /// reason.
    fn settle_unfinished(&mut self, stop: Stop) {
        let (state, reason) = match stop {
            // Only a worker that panicked leaves a task without a result.
            Stop::Completed => (
                TaskState::Failed,
                "the task's worker ended abnormally (see the log)".to_string(),
            ),
            _ => (
                TaskState::Cancelled,
                format!("{} before the task finished", stop_text(stop)),
            ),
        };
        for id in self.order.clone() {
            if !self.results.contains_key(&id) {
                self.settle(&id, state, reason.clone());
            }
        }
    }
}

/// What stopped the run, in words.
fn stop_text(stop: Stop) -> String {
    match stop {
        Stop::Completed => "the run completed".to_string(),
        Stop::Cancelled => "the run was cancelled".to_string(),
        Stop::Deadline(d) => format!("the run's deadline of {} s passed", d.as_secs()),
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The state `swarm_task_finished` carries: a task still unfinished when
/// its end is reported counts as failed.
fn task_status(state: TaskState) -> TaskState {
    if state.is_finished() {
        state
    } else {
        TaskState::Failed
    }
}

/// How one attempt ended.
enum Attempt {
    Done(Box<RunOutcome>),
    /// The task's budget ran out and the loop did not stop in time.
    Dropped,
}

/// Runs a task's attempts: a fresh loop each, until one succeeds, the
/// retries or the budget run out, or the run is stopped. Returns the task
/// id, its result and the last attempt's run dir.
async fn run_task(
    shared: Arc<Shared>,
    job: Job,
    cancel: CancellationToken,
) -> (String, TaskResult, Option<String>) {
    let started = Instant::now();
    let budget = Duration::from_secs(job.agent.budget_seconds());
    let task_deadline = started + budget;
    let attempts = job.agent.max_retries + 1;
    let mut tokens = 0u64;
    let mut attempt = 0;
    // The last attempt's reason when its every tool call failed.
    let mut tools_failed_before: Option<String> = None;
    let (state, reason, answer) = loop {
        attempt += 1;
        shared.note_task(&job.task, |t| t.attempts = attempt);
        let ended = run_attempt(&shared, &job, attempt, task_deadline, &cancel).await;
        let (outcome, timed_out) = match ended {
            (Attempt::Done(o), timed_out) => (o, timed_out),
            (Attempt::Dropped, _) => {
                break (
                    TaskState::TimedOut,
                    Some(timeout_reason(&job.agent)),
                    String::new(),
                );
            }
        };
        tokens += outcome.usage.total_tokens;
        match outcome.status {
            RunStatus::Success => break (TaskState::Success, None, outcome.content.clone()),
            // An answer with some failed tool calls: kept, not retried.
            RunStatus::Partial => {
                break (
                    TaskState::Partial,
                    Some(outcome.reason.clone()),
                    outcome.content.clone(),
                );
            }
            // No tool offered could serve the member's request: a failure
            // of the member, not retried (the next attempt would get the
            // same answer); what it said goes to the report (docs §14.3).
            RunStatus::Unsupported => {
                let reason = format!("unsupported: {}", outcome.reason);
                break (TaskState::Failed, Some(reason), outcome.content.clone());
            }
            _ if timed_out => {
                break (
                    TaskState::TimedOut,
                    Some(timeout_reason(&job.agent)),
                    String::new(),
                );
            }
            _ if cancel.is_cancelled() => {
                let reason = shared.stopping().unwrap_or_else(|| stop_reason(&outcome));
                break (TaskState::Cancelled, Some(reason), String::new());
            }
            // The same tool failures twice (no data for a symbol, arguments
            // a tool refuses) come from the task, not from chance: a third
            // attempt would repeat them and spend the budget.
            _ if attempt < attempts
                && repeats_tool_failures(&outcome, tools_failed_before.as_deref()) =>
            {
                let reason = format!(
                    "attempt {attempt} of {attempts} failed: {}; the same tool failures as attempt {}, so not retried again",
                    outcome.reason,
                    attempt - 1
                );
                break (TaskState::Failed, Some(reason), outcome.content.clone());
            }
            _ if attempt < attempts && Instant::now() < task_deadline => {
                tools_failed_before = (outcome.error_code.as_deref()
                    == Some(crate::agent::run_loop::TOOL_CALLS_FAILED))
                .then(|| outcome.reason.clone());
                shared.emit(AgentEvent::SwarmTaskRetry {
                    task: job.task.clone(),
                    attempt,
                    reason: outcome.reason.clone(),
                });
            }
            _ => {
                let reason = format!("attempt {attempt} of {attempts} failed: {}", outcome.reason);
                // A run whose tool calls all failed may still have said
                // something: the report shows it (docs §14.4); no
                // dependent reads it.
                break (TaskState::Failed, Some(reason), outcome.content.clone());
            }
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    shared.update_task(&job.task, |t| {
        t.state = state;
        t.reason = reason.clone();
        t.seconds = seconds;
        t.tokens = tokens;
    });
    shared.emit(AgentEvent::SwarmTaskFinished {
        task: job.task.clone(),
        status: task_status(state),
        reason: reason.clone(),
        seconds,
        tokens,
    });
    let result = TaskResult {
        state,
        reason,
        answer,
        seconds,
        tokens,
    };
    let last_dir = shared.last_run_dir(&job.task);
    (job.task, result, last_dir)
}

/// Whether a failed attempt's tool calls all failed exactly as the
/// previous attempt's did (transport and provider errors are always
/// retried: those may pass).
fn repeats_tool_failures(outcome: &RunOutcome, before: Option<&str>) -> bool {
    outcome.error_code.as_deref() == Some(crate::agent::run_loop::TOOL_CALLS_FAILED)
        && before == Some(outcome.reason.as_str())
}

fn timeout_reason(agent: &AgentSpec) -> String {
    format!(
        "the task's budget of {} s (timeout_seconds {} x {} attempt(s)) ran out",
        agent.budget_seconds(),
        agent.timeout_seconds,
        agent.max_retries + 1
    )
}

fn stop_reason(outcome: &RunOutcome) -> String {
    if outcome.reason.is_empty() {
        "cancelled".to_string()
    } else {
        outcome.reason.clone()
    }
}

/// One attempt: a fresh loop whose events are forwarded wrapped with the
/// task id, stopped at the task's deadline (then dropped after a grace).
/// The flag says whether the deadline stopped it.
async fn run_attempt(
    shared: &Shared,
    job: &Job,
    attempt: u32,
    deadline: Instant,
    cancel: &CancellationToken,
) -> (Attempt, bool) {
    let session_dir = shared.files.task_dir(&job.task);
    if let Err(e) = std::fs::create_dir_all(&session_dir) {
        tracing::warn!("cannot create {}: {e}", session_dir.display());
    }
    let attempt_cancel = cancel.child_token();
    let mut deps = job.deps.clone();
    // A team's worker run dirs live with the team run.
    deps.runs_root = shared.files.runs_root();
    let mut lp = Loop::new(deps);
    let req = RunRequest {
        prompt: job.message.clone(),
        history: Vec::new(),
        session_id: format!("{}.{}", shared.run_id, job.task),
        session_dir,
        workspace: shared.workspace.clone(),
        background: BackgroundQueue::default(),
        compaction: CompactionRequest::default(),
        notices: Vec::new(),
        plan: Default::default(),
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let run = lp.run(req, EventSink::new(tx), attempt_cancel.clone());
    tokio::pin!(run);
    let mut announced = false;
    let mut timed_out = false;
    let mut grace_at: Option<Instant> = None;
    let ended = loop {
        tokio::select! {
            outcome = &mut run => break Attempt::Done(Box::new(outcome)),
            Some(event) = rx.recv() => forward(shared, job, attempt, &mut announced, event),
            _ = tokio::time::sleep_until(deadline), if !timed_out => {
                timed_out = true;
                attempt_cancel.cancel();
                grace_at = Some(Instant::now() + STOP_GRACE);
            }
            _ = sleep_until_opt(grace_at) => break Attempt::Dropped,
        }
    };
    while let Ok(event) = rx.try_recv() {
        forward(shared, job, attempt, &mut announced, event);
    }
    (ended, timed_out)
}

/// Wraps a worker's event with its task id; its `run_started` is preceded
/// by `swarm_task_started` with the run dir, and the run dir is recorded.
fn forward(shared: &Shared, job: &Job, attempt: u32, announced: &mut bool, event: AgentEvent) {
    if !*announced {
        let run_dir = match &event {
            AgentEvent::RunStarted { run_dir, .. } => Some(run_dir.clone()),
            // A loop refused before it made a run dir.
            AgentEvent::RunFinished { .. } => Some(String::new()),
            _ => None,
        };
        if let Some(run_dir) = run_dir {
            *announced = true;
            if !run_dir.is_empty() {
                shared.note_task(&job.task, |t| t.run_dirs.push(run_dir.clone()));
            }
            shared.emit(AgentEvent::SwarmTaskStarted {
                task: job.task.clone(),
                agent: job.agent.id.value.clone(),
                attempt,
                run_dir,
            });
        }
    }
    shared.emit(AgentEvent::SwarmWorker {
        task: job.task.clone(),
        event: Box::new(event),
    });
}

/// The run's end: its status, `report.md`, the final `run.json` and
/// `swarm_finished`.
fn finish(dag: &Dag<'_>, stop: Stop, started: Instant) -> SwarmOutcome {
    let shared = &dag.shared;
    let (status, reason) = match stop {
        Stop::Cancelled => (RunStatus::Cancelled, Some(stop_text(stop))),
        Stop::Deadline(_) => (RunStatus::Failed, Some(stop_text(stop))),
        Stop::Completed => team_status(&dag.order, &dag.results),
    };
    let seconds = started.elapsed().as_secs_f64();
    let report = shared.files.report_file();
    let text = super::report::render(
        dag.preset,
        dag.vars,
        &dag.order,
        &dag.results_view(),
        status,
    );
    if let Err(e) = crate::store::atomic_write(&report, text.as_bytes()) {
        tracing::warn!("cannot write {}: {e}", report.display());
    }
    shared.update(|r| {
        r.status = match status {
            RunStatus::Success => Status::Success,
            RunStatus::Partial => Status::Partial,
            RunStatus::Failed => Status::Failed,
            RunStatus::Cancelled => Status::Cancelled,
            RunStatus::Interrupted => Status::Interrupted,
            RunStatus::Unsupported => Status::Unsupported,
        };
        r.reason = reason.clone();
        r.seconds = seconds;
        r.finished_at = Some(crate::store::messages::now_rfc3339());
    });
    shared.emit(AgentEvent::SwarmFinished {
        run_id: shared.run_id.clone(),
        status,
        reason: reason.clone(),
        seconds,
        report: report.display().to_string(),
    });
    SwarmOutcome {
        run_id: shared.run_id.clone(),
        status,
        reason,
        dir: shared.files.dir.clone(),
        report,
        seconds,
        record: shared.snapshot(),
    }
}

impl Dag<'_> {
    /// Each task's answer (or why it has none) and its run dir, for the report.
    fn results_view(&self) -> BTreeMap<String, super::report::Member> {
        self.order
            .iter()
            .map(|id| {
                let result = self.results.get(id);
                (
                    id.clone(),
                    super::report::Member {
                        state: result.map_or(TaskState::Cancelled, |r| r.state),
                        answer: result.map(|r| r.answer.clone()).unwrap_or_default(),
                        reason: result.and_then(|r| r.reason.clone()),
                        run_dir: self.run_dirs.get(id).cloned().unwrap_or_default(),
                        seconds: result.map_or(0.0, |r| r.seconds),
                        tokens: result.map_or(0, |r| r.tokens),
                    },
                )
            })
            .collect()
    }
}

/// A completed team's status (docs §14.4): `failed` when its final task or
/// every task did not deliver, `partial` when any task failed or was
/// partial, else `success`; the reason names the tasks.
fn team_status(
    order: &[String],
    results: &BTreeMap<String, TaskResult>,
) -> (RunStatus, Option<String>) {
    let state = |id: &String| results.get(id).map_or(TaskState::Cancelled, |r| r.state);
    let failed: Vec<&str> = order
        .iter()
        .filter(|id| !state(id).delivered())
        .map(String::as_str)
        .collect();
    let partial: Vec<&str> = order
        .iter()
        .filter(|id| state(id) == TaskState::Partial)
        .map(String::as_str)
        .collect();
    if failed.is_empty() && partial.is_empty() {
        return (RunStatus::Success, None);
    }
    let final_failed = super::report::final_task(order).is_some_and(|last| failed.contains(&last));
    let status = if final_failed || failed.len() == order.len() {
        RunStatus::Failed
    } else {
        RunStatus::Partial
    };
    let mut parts = Vec::new();
    if !failed.is_empty() {
        parts.push(format!(
            "{} of {} task(s) failed: {}",
            failed.len(),
            order.len(),
            failed.join(", ")
        ));
    }
    if !partial.is_empty() {
        parts.push(format!(
            "{} partial (some tool calls failed): {}",
            partial.len(),
            partial.join(", ")
        ));
    }
    if final_failed && let Some(last) = super::report::final_task(order) {
        parts.push(format!("the final task {last} has no answer"));
    }
    (status, Some(parts.join("; ")))
}
