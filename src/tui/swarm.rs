//! A research team's run as the workstation sees it (docs §14.4): a pure
//! fold of the `swarm_*` events into one [`TeamBoard`], plus `/swarm`'s
//! argument parser. Every task keeps its worker's own [`Chat`], [`ToolPanel`]
//! and [`Gauge`], folded from the worker's unwrapped `swarm_worker` events,
//! so the worker's detail is drawn by the same widgets as the main chat.
//! Clocks (elapsed, heartbeat age) are computed from `now` when drawn.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::backtest::{BacktestInfo, EquityError, EquitySeries, LoadRequest};
use super::cells::NoticeKind;
use super::chat::Chat;
use super::gauge::Gauge;
use super::tool_panel::ToolPanel;
use crate::agent::events::{AgentEvent, RunStatus, SwarmTaskInfo, TaskState};

/// A worker's panels: the same widgets the main chat screen folds its
/// session's events into.
#[derive(Clone, Debug)]
pub struct Worker {
    pub chat: Chat,
    pub tools: ToolPanel,
    pub gauge: Gauge,
}

impl Worker {
    fn new(settings: &BoardSettings) -> Self {
        Worker {
            chat: Chat::default(),
            tools: ToolPanel::new(settings.heartbeat),
            gauge: Gauge::new(settings.threshold, settings.gates),
        }
    }

    /// Folds one of the worker's own events, as the app folds the session's.
    fn apply(&mut self, event: &AgentEvent, at: Instant) {
        self.chat.apply(event);
        self.gauge.apply(event, at);
        match event {
            AgentEvent::Tool(t) => self.tools.apply(t, at),
            AgentEvent::RunFinished { status, reason, .. } => {
                self.tools.finish_run(*status, reason.as_deref(), at)
            }
            _ => {}
        }
    }
}

/// One task of the team and its worker.
#[derive(Clone, Debug)]
pub struct TeamTask {
    pub id: String,
    pub agent: String,
    pub role: String,
    pub depends_on: Vec<String>,
    pub state: TaskState,
    /// The attempt running or last run (1 for the first).
    pub attempt: u32,
    /// When the first attempt started.
    pub started_at: Option<Instant>,
    /// When the task finished (its clock stops).
    pub ended_at: Option<Instant>,
    /// The engine's own duration, once finished.
    pub seconds: Option<f64>,
    /// The worker's last sign of life (any of its events, or its start).
    pub last_event: Option<Instant>,
    pub reason: Option<String>,
    /// Tokens used: the provider's reports while running, the engine's
    /// total once finished.
    pub tokens: u64,
    pub run_dir: Option<String>,
    /// The worker's iteration (step, max).
    pub step: Option<(u32, u32)>,
    pub worker: Worker,
}

impl TeamTask {
    fn new(info: &SwarmTaskInfo, settings: &BoardSettings) -> Self {
        TeamTask {
            id: info.id.clone(),
            agent: info.agent.clone(),
            role: info.role.clone(),
            depends_on: info.depends_on.clone(),
            state: TaskState::Pending,
            attempt: 0,
            started_at: None,
            ended_at: None,
            seconds: None,
            last_event: None,
            reason: None,
            tokens: 0,
            run_dir: None,
            step: None,
            worker: Worker::new(settings),
        }
    }

    /// How long the task has run (or ran).
    pub fn elapsed(&self, now: Instant) -> Option<Duration> {
        if let Some(s) = self.seconds {
            return Some(Duration::from_secs_f64(s.max(0.0)));
        }
        let start = self.started_at?;
        Some(
            self.ended_at
                .unwrap_or(now)
                .saturating_duration_since(start),
        )
    }

    /// Time since the worker's last event, while it runs.
    pub fn heartbeat_age(&self, now: Instant) -> Option<Duration> {
        if !self.state.is_live() {
            return None;
        }
        self.last_event.map(|t| now.saturating_duration_since(t))
    }

    /// The tools running in the worker's current batch: the first one's
    /// name and how many others run beside it.
    pub fn current_tool(&self) -> Option<(&str, usize)> {
        if !self.state.is_live() {
            return None;
        }
        let batch = self.worker.tools.batches.back()?;
        let mut live = batch.calls.iter().filter(|c| c.state.is_live());
        let first = live.next()?;
        Some((first.tool.as_str(), live.count()))
    }
}

/// Where the team's run is.
#[derive(Clone, Debug, PartialEq)]
pub enum TeamPhase {
    /// Asked for; `swarm_started` has not arrived.
    Starting,
    Running,
    /// The user cancelled; the workers stop at their next checkpoint.
    Cancelling,
    Finished {
        status: RunStatus,
        reason: Option<String>,
        seconds: f64,
        report: String,
    },
    /// The launcher refused or failed before the run could finish.
    Failed {
        error: String,
    },
}

/// Settings new workers' panels start with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BoardSettings {
    pub heartbeat: Duration,
    pub threshold: u64,
    pub gates: [u64; 3],
}

/// The team's run: its tasks by layer, each one's state and worker, and
/// where the view's cursor is.
#[derive(Clone, Debug)]
pub struct TeamBoard {
    pub preset: String,
    pub vars: Vec<(String, String)>,
    pub title: String,
    pub run_id: Option<String>,
    pub run_dir: Option<String>,
    /// Task indices by topological layer.
    pub layers: Vec<Vec<usize>>,
    pub tasks: Vec<TeamTask>,
    index: HashMap<String, usize>,
    pub phase: TeamPhase,
    /// The launcher has not returned yet (the run's token is live).
    pub launching: bool,
    pub started_at: Option<Instant>,
    pub ended_at: Option<Instant>,
    /// The selected task, as a position in [`TeamBoard::order`].
    pub cursor: usize,
    /// The task whose worker is open, if one is.
    pub detail: Option<usize>,
    settings: BoardSettings,
    /// Backtest series the workers' chats asked for (the app's effects).
    loads: Vec<LoadRequest>,
}

impl TeamBoard {
    /// A run of `preset` just asked for.
    pub(crate) fn new(
        preset: String,
        vars: Vec<(String, String)>,
        settings: BoardSettings,
    ) -> Self {
        TeamBoard {
            title: preset.clone(),
            preset,
            vars,
            run_id: None,
            run_dir: None,
            layers: Vec::new(),
            tasks: Vec::new(),
            index: HashMap::new(),
            phase: TeamPhase::Starting,
            launching: true,
            started_at: None,
            ended_at: None,
            cursor: 0,
            detail: None,
            settings,
            loads: Vec::new(),
        }
    }

    /// The run can still be cancelled.
    pub(crate) fn cancellable(&self) -> bool {
        self.launching && matches!(self.phase, TeamPhase::Starting | TeamPhase::Running)
    }

    /// Whether the run is still going (started, not finished or failed).
    pub fn is_active(&self) -> bool {
        self.launching
            && matches!(
                self.phase,
                TeamPhase::Starting | TeamPhase::Running | TeamPhase::Cancelling
            )
    }

    /// Task indices in display order: layer by layer.
    pub(crate) fn order(&self) -> impl Iterator<Item = usize> + '_ {
        self.layers.iter().flatten().copied()
    }

    /// How many tasks there are.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The task under the cursor.
    pub(crate) fn selected(&self) -> Option<usize> {
        self.order().nth(self.cursor)
    }

    pub fn task(&self, id: &str) -> Option<&TeamTask> {
        self.index.get(id).and_then(|i| self.tasks.get(*i))
    }

    /// Finished tasks, of all.
    pub fn progress(&self) -> (usize, usize) {
        let done = self.tasks.iter().filter(|t| t.state.is_finished()).count();
        (done, self.tasks.len())
    }

    /// How long the run has gone (or went).
    pub(crate) fn elapsed(&self, now: Instant) -> Option<Duration> {
        if let TeamPhase::Finished { seconds, .. } = self.phase {
            return Some(Duration::from_secs_f64(seconds.max(0.0)));
        }
        let start = self.started_at?;
        Some(
            self.ended_at
                .unwrap_or(now)
                .saturating_duration_since(start),
        )
    }

    /// Folds one of the team's events (`swarm_*`, a wrapped worker event).
    pub(crate) fn apply(&mut self, event: &AgentEvent, at: Instant) {
        match event {
            AgentEvent::SwarmStarted { .. } => self.started(event, at),
            AgentEvent::SwarmTaskStarted {
                task,
                attempt,
                run_dir,
                ..
            } => {
                let t = self.task_mut(task);
                if *attempt > 1 || t.attempt > 0 {
                    t.worker.chat.notice(
                        NoticeKind::Warning,
                        format!("attempt {attempt}: a fresh loop starts over"),
                    );
                    t.worker.gauge.reset();
                }
                t.state = TaskState::Running;
                t.attempt = *attempt;
                t.started_at.get_or_insert(at);
                t.last_event = Some(at);
                t.run_dir = Some(run_dir.clone());
                t.step = None;
            }
            AgentEvent::SwarmTaskRetry {
                task,
                attempt,
                reason,
            } => {
                let t = self.task_mut(task);
                t.state = TaskState::Retrying;
                t.last_event = Some(at);
                t.worker.chat.notice(
                    NoticeKind::Warning,
                    format!("attempt {attempt} failed: {reason}; retrying"),
                );
                t.reason = Some(reason.clone());
            }
            AgentEvent::SwarmTaskFinished {
                task,
                status,
                reason,
                seconds,
                tokens,
            } => {
                let t = self.task_mut(task);
                t.state = *status;
                t.reason = reason.clone();
                t.seconds = Some(*seconds);
                t.tokens = (*tokens).max(t.tokens);
                t.ended_at = Some(at);
            }
            AgentEvent::SwarmFinished {
                status,
                reason,
                seconds,
                report,
                ..
            } => {
                self.phase = TeamPhase::Finished {
                    status: *status,
                    reason: reason.clone(),
                    seconds: *seconds,
                    report: report.clone(),
                };
                self.ended_at = Some(at);
            }
            AgentEvent::SwarmWorker { task, event } => self.worker_event(task, event, at),
            _ => {}
        }
    }

    /// `swarm_started`: the run's tasks and layers replace what was known.
    fn started(&mut self, event: &AgentEvent, at: Instant) {
        let AgentEvent::SwarmStarted {
            run_id,
            preset,
            title,
            run_dir,
            layers,
            tasks,
        } = event
        else {
            return;
        };
        self.run_id = Some(run_id.to_string());
        self.preset = preset.to_string();
        self.title = if title.is_empty() {
            preset.to_string()
        } else {
            title.to_string()
        };
        self.run_dir = Some(run_dir.to_string()).filter(|d| !d.is_empty());
        self.started_at = Some(at);
        if self.phase == TeamPhase::Starting {
            self.phase = TeamPhase::Running;
        }
        self.tasks = tasks
            .iter()
            .map(|t| TeamTask::new(t, &self.settings))
            .collect();
        self.index = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.clone(), i))
            .collect();
        self.layers = layers
            .iter()
            .map(|l| {
                l.iter()
                    .filter_map(|id| self.index.get(id).copied())
                    .collect()
            })
            .collect();
        // A task no layer names still shows, in a last layer of its own.
        let mut placed = vec![false; self.tasks.len()];
        for i in self.layers.iter().flatten() {
            placed[*i] = true;
        }
        let rest: Vec<usize> = (0..self.tasks.len()).filter(|i| !placed[*i]).collect();
        if !rest.is_empty() {
            self.layers.push(rest);
        }
        self.layers.retain(|l| !l.is_empty());
        self.cursor = 0;
        self.detail = None;
    }

    /// The task `id`, added in a last layer when `swarm_started` did not
    /// announce it (events are folded defensively, never dropped).
    fn task_mut(&mut self, id: &str) -> &mut TeamTask {
        let i = match self.index.get(id) {
            Some(i) => *i,
            None => {
                let info = SwarmTaskInfo {
                    id: id.to_string(),
                    agent: String::new(),
                    role: String::new(),
                    depends_on: Vec::new(),
                };
                self.tasks.push(TeamTask::new(&info, &self.settings));
                let i = self.tasks.len() - 1;
                self.index.insert(id.to_string(), i);
                self.layers.push(vec![i]);
                i
            }
        };
        &mut self.tasks[i]
    }

    fn worker_event(&mut self, task: &str, event: &AgentEvent, at: Instant) {
        let t = self.task_mut(task);
        t.last_event = Some(at);
        t.worker.apply(event, at);
        match event {
            AgentEvent::IterationStarted {
                step,
                max_iterations,
                ..
            } => t.step = Some((*step, *max_iterations)),
            AgentEvent::LlmUsage { total_tokens, .. } => t.tokens += total_tokens,
            _ => {}
        }
        let loads = t.worker.chat.take_loads();
        self.loads.extend(loads);
    }

    /// Backtest loads the workers' chats asked for since the last call.
    pub(crate) fn take_loads(&mut self) -> Vec<LoadRequest> {
        std::mem::take(&mut self.loads)
    }

    /// Hands a backtest load to the worker chat that asked for it; false
    /// when none did.
    pub(crate) fn backtest_loaded(
        &mut self,
        id: u64,
        series: Result<EquitySeries, EquityError>,
        info: Option<BacktestInfo>,
    ) -> bool {
        match self
            .tasks
            .iter_mut()
            .find(|t| t.worker.chat.has_backtest(id))
        {
            Some(t) => t.worker.chat.backtest_loaded(id, series, info),
            None => false,
        }
    }

    /// The user cancelled the run.
    pub(crate) fn cancel(&mut self) {
        if self.cancellable() {
            self.phase = TeamPhase::Cancelling;
        }
    }

    /// The launcher returned: with an error when it refused or failed.
    pub(crate) fn launcher_done(&mut self, error: Option<String>, at: Instant) {
        self.launching = false;
        match error {
            Some(error) if !matches!(self.phase, TeamPhase::Finished { .. }) => {
                self.phase = TeamPhase::Failed { error };
                self.ended_at.get_or_insert(at);
            }
            None if !matches!(self.phase, TeamPhase::Finished { .. }) => {
                // Ended without `swarm_finished`: say so rather than look live.
                self.phase = TeamPhase::Failed {
                    error: "the team run ended without reporting how".into(),
                };
                self.ended_at.get_or_insert(at);
            }
            _ => {}
        }
    }

    /// Moves the cursor by `delta` rows, within the tasks.
    pub(crate) fn move_cursor(&mut self, delta: isize) {
        let n = self.tasks.len();
        if n == 0 {
            return;
        }
        self.cursor = self.cursor.saturating_add_signed(delta).min(n - 1);
    }

    pub(crate) fn cursor_to(&mut self, last: bool) {
        self.cursor = if last {
            self.tasks.len().saturating_sub(1)
        } else {
            0
        };
    }

    /// Opens the selected task's worker.
    pub(crate) fn open(&mut self) {
        self.detail = self.selected();
    }

    /// Back one level: from a worker to the team (true), or nothing left
    /// to go back from (false: the view closes).
    pub(crate) fn back(&mut self) -> bool {
        self.detail.take().is_some()
    }

    /// In a worker's detail: the next (or previous) worker in display order.
    pub(crate) fn next_worker(&mut self, forward: bool) {
        let n = self.tasks.len();
        if n == 0 || self.detail.is_none() {
            return;
        }
        self.cursor = if forward {
            (self.cursor + 1) % n
        } else {
            (self.cursor + n - 1) % n
        };
        self.detail = self.selected();
    }

    /// When a visible clock next changes: the run's, and, when the view is
    /// shown, each live task's elapsed time and heartbeat age, and the open
    /// worker's tool clocks. `None` while nothing moves.
    pub(crate) fn next_tick(&self, now: Instant, visible: bool) -> Option<Instant> {
        if !self.is_active() {
            return None;
        }
        let mut next: Option<Instant> = None;
        let mut consider = |start: Instant| {
            let t = start + Duration::from_secs(now.saturating_duration_since(start).as_secs() + 1);
            next = Some(next.map_or(t, |n: Instant| n.min(t)));
        };
        if let Some(s) = self.started_at {
            consider(s);
        }
        if visible {
            for t in self.tasks.iter().filter(|t| t.state.is_live()) {
                t.started_at.into_iter().for_each(&mut consider);
                t.last_event.into_iter().for_each(&mut consider);
            }
            if let Some(w) = self.detail.and_then(|i| self.tasks.get(i)) {
                let tool = w.worker.tools.next_tick(now);
                next = match (next, tool) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
        next
    }
}

/// Why `/swarm`'s arguments were refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum SwarmCommandError {
    #[error("name the team")]
    MissingName,
    #[error("`{0}` is not a team name (one name, no path, no `=`)")]
    BadName(String),
    #[error("`{0}` is not key=value")]
    NotAssignment(String),
    #[error("`{0}` has an empty key")]
    EmptyKey(String),
    #[error("the variable `{0}` is given twice")]
    Duplicate(String),
    #[error("a quote is not closed")]
    UnclosedQuote,
}

/// How `/swarm` is used, for notices and the help page.
pub(crate) const SWARM_USAGE: &str =
    "/swarm NAME [key=value …] (quote a value with spaces: thesis=\"long AAPL\")";

/// Parses `/swarm`'s arguments: a team name, then `key=value` pairs in
/// order. Words split at whitespace outside quotes (`"` or `'`), and a
/// quote may start mid-word (`thesis="long AAPL"`).
pub(crate) fn parse_swarm_args(
    args: &str,
) -> Result<(String, Vec<(String, String)>), SwarmCommandError> {
    let words = split_words(args)?;
    let mut words = words.into_iter();
    let name = words.next().ok_or(SwarmCommandError::MissingName)?;
    if name.is_empty()
        || name.contains(['/', '\\', '='])
        || name == "."
        || name == ".."
        || name.chars().any(char::is_whitespace)
    {
        return Err(SwarmCommandError::BadName(name));
    }
    let mut vars: Vec<(String, String)> = Vec::new();
    for w in words {
        let Some((k, v)) = w.split_once('=') else {
            return Err(SwarmCommandError::NotAssignment(w));
        };
        let k = k.trim();
        if k.is_empty() {
            return Err(SwarmCommandError::EmptyKey(w));
        }
        if vars.iter().any(|(have, _)| have == k) {
            return Err(SwarmCommandError::Duplicate(k.to_string()));
        }
        vars.push((k.to_string(), v.to_string()));
    }
    Ok((name, vars))
}

fn split_words(text: &str) -> Result<Vec<String>, SwarmCommandError> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            None => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err(SwarmCommandError::UnclosedQuote);
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_a_name_and_quoted_pairs() {
        assert_eq!(
            parse_swarm_args(
                "investment_committee target=AAPL thesis=\"long AAPL\" note='a b' empty="
            ),
            Ok((
                "investment_committee".to_string(),
                pairs(&[
                    ("target", "AAPL"),
                    ("thesis", "long AAPL"),
                    ("note", "a b"),
                    ("empty", "")
                ])
            ))
        );
        assert_eq!(
            parse_swarm_args("  desk  "),
            Ok(("desk".to_string(), vec![]))
        );
        // `=` inside a value stays in the value.
        assert_eq!(
            parse_swarm_args("desk expr=a=b"),
            Ok(("desk".to_string(), pairs(&[("expr", "a=b")])))
        );
    }

    #[test]
    fn refuses_bad_syntax_with_the_reason() {
        use SwarmCommandError::*;
        assert_eq!(parse_swarm_args(""), Err(MissingName));
        assert_eq!(parse_swarm_args("../x"), Err(BadName("../x".into())));
        assert_eq!(parse_swarm_args("a=b"), Err(BadName("a=b".into())));
        assert_eq!(
            parse_swarm_args("desk AAPL"),
            Err(NotAssignment("AAPL".into()))
        );
        assert_eq!(parse_swarm_args("desk =x"), Err(EmptyKey("=x".into())));
        assert_eq!(parse_swarm_args("desk a=1 a=2"), Err(Duplicate("a".into())));
        assert_eq!(parse_swarm_args("desk a=\"open"), Err(UnclosedQuote));
    }
}
