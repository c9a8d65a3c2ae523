//! The workstation's event loop: one `tokio::select!` over terminal events,
//! the session's event stream, the app bus (turn finished, data loaded) and
//! the next frame deadline. Frames are drawn on demand, coalesced, at most
//! 60 per second; an idle app has no deadline and never draws.
//!
//! A session worker task owns the [`Session`] (its `send` needs `&mut`) and
//! runs one turn at a time; the UI task only holds the run's cancel token.
//! A research team (`/swarm`) runs through the [`SwarmLauncher`] the CLI
//! passes in, on a runtime of its own; its events join the session's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{Event, EventStream};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::app::{App, AppOptions, Effect, Msg, update};
use super::backtest;
use super::cells::NoticeKind;
use super::frame::FrameScheduler;
use super::keymap::Keymap;
use super::memories;
use super::team_runs;
use super::terminal::{self, Term};
use super::theme::Theme;
use super::transcripts;
use super::view;
use crate::agent::compaction::CompactionRequest;
use crate::agent::{AgentEvent, EventSink, LoopDeps};
use crate::llm::Provider;
use crate::session::Session;
use crate::store::{MessageLog, Paths};
use crate::tools::approval::{Answer, ApprovalPolicy, ApprovalRequest};

/// How long quitting waits for a cancelled turn to record its end.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// What `/compact` says until the engine exposes manual compaction.

#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    #[error("terminal: {0}")]
    Io(#[from] std::io::Error),
}

/// Why a team run could not start or failed outside its own events.
#[derive(Debug, thiserror::Error)]
pub enum SwarmLaunchError {
    #[error(
        "team runs are unavailable in this workstation (use `vibedesk swarm run NAME --var k=v` in a shell)"
    )]
    Unavailable,
    #[error("cannot start the team's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The engine refused the run (unknown team, a missing variable, …) or
    /// failed; its own error, shown as it words it.
    #[error(transparent)]
    Engine(Box<dyn std::error::Error + Send + Sync>),
    /// The run was refused, in the app's own syntax (`/swarm NAME k=v`)
    /// rather than the command line's.
    #[error("{0}")]
    Refused(String),
}

/// Starts research-team runs for `/swarm` (docs §14). The engine lives
/// outside the workstation; the CLI passes an implementation in (or none).
/// `launch` runs the team `preset` with `vars` (in the order typed),
/// sending every `swarm_*` event (workers' own events wrapped) to
/// `events`, until the run ends or `cancel` fires; it resolves when the
/// run's records are written.
pub trait SwarmLauncher: Send + Sync {
    fn launch(
        &self,
        preset: String,
        vars: Vec<(String, String)>,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<(), SwarmLaunchError>>;
}

/// Why `/model` could not switch: the setup error of the room that builds
/// providers, which the workstation shows as text.
pub(crate) type ModelSwitchError = Box<dyn std::error::Error + Send + Sync>;

/// Switches the model of the configured provider: returns the new provider
/// and its label, or why it cannot.
pub(crate) type ModelSwitch =
    Arc<dyn Fn(&str) -> Result<(Arc<dyn Provider>, String), ModelSwitchError> + Send + Sync>;

/// Everything the workstation needs to start.
pub struct Workstation {
    pub paths: Paths,
    /// `None` when no model is configured: the UI opens and explains.
    pub deps: Option<LoopDeps>,
    pub options: AppOptions,
    pub theme: Theme,
    pub keymap: Keymap,
    /// A session to resume at start.
    pub resume: Option<String>,
    pub switch_model: Option<ModelSwitch>,
    /// Shown in the chat at start (e.g. runs marked interrupted).
    pub notices: Vec<(NoticeKind, String)>,
    /// Engine events from outside a turn: the MCP servers' statuses.
    pub mcp_events: Option<UnboundedReceiver<AgentEvent>>,
    /// Runs `/swarm`; `None`: the command says team runs are unavailable.
    pub swarm: Option<Arc<dyn SwarmLauncher>>,
    /// The session's approval policy and the questions it asks (docs
    /// §2.14.4); `None` when no model is configured.
    pub approvals: Option<Approvals>,
}

/// The policy the session's loop asks through, and where its questions
/// arrive.
pub struct Approvals {
    pub policy: Arc<ApprovalPolicy>,
    pub requests: UnboundedReceiver<ApprovalRequest>,
}

/// `/compact [focus]`: asks the session's loop to compact. The handle is
/// shared with the session, so a request made while a turn runs is taken at
/// its next iteration; made while idle, at the next turn's first.
pub fn request_compaction(handle: &CompactionRequest, focus: Option<&str>) -> String {
    let focus = focus.unwrap_or("").trim();
    handle.request(focus);
    if focus.is_empty() {
        "compaction requested: it runs at the next iteration of the current turn (or at the start of the next one)".to_string()
    } else {
        format!(
            "compaction requested with focus \"{focus}\": it runs at the next iteration (or at the start of the next turn)"
        )
    }
}

enum WorkerCmd {
    Send {
        prompt: String,
        plan: crate::agent::plan::TurnPlan,
        cancel: CancellationToken,
    },
    /// Switch to a session (`None`: a new one, created on first send).
    Open(Option<String>),
    SetProvider(Arc<dyn Provider>),
}

struct Worker {
    paths: Paths,
    compaction: CompactionRequest,
    deps: Option<LoopDeps>,
    session: Option<Session>,
    /// The session to open on the next send when none is open.
    target: Option<String>,
    /// The user's folder sessions work in; `None`: each session's own.
    workspace: Option<PathBuf>,
}

/// Why the worker could not open its session.
#[derive(Debug, thiserror::Error)]
enum OpenError {
    #[error("no model is configured")]
    NoModel,
    #[error(transparent)]
    Session(#[from] crate::session::SessionError),
}

impl Worker {
    fn open(&mut self) -> Result<(), OpenError> {
        if self.session.is_some() {
            return Ok(());
        }
        let deps = self.deps.clone().ok_or(OpenError::NoModel)?;
        let mut s = Session::open(&self.paths, self.target.as_deref(), deps)?
            .with_workspace(self.workspace.clone());
        s.set_compaction_request(self.compaction.clone());
        self.target = Some(s.id().to_string());
        self.session = Some(s);
        Ok(())
    }

    async fn run(
        mut self,
        mut rx: UnboundedReceiver<WorkerCmd>,
        events: UnboundedSender<AgentEvent>,
        bus: UnboundedSender<Msg>,
    ) {
        while let Some(cmd) = rx.recv().await {
            match cmd {
                WorkerCmd::Send {
                    prompt,
                    plan,
                    cancel,
                } => {
                    if let Err(e) = self.open() {
                        let _ = bus.send(Msg::TurnDone {
                            error: Some(format!("cannot open the session: {e}")),
                        });
                        continue;
                    }
                    if let Some(s) = &mut self.session {
                        s.set_plan(plan);
                        s.send(&prompt, EventSink::new(events.clone()), cancel)
                            .await;
                    }
                    let _ = bus.send(Msg::TurnDone { error: None });
                }
                WorkerCmd::Open(id) => {
                    // Dropping the session releases its lock.
                    self.session = None;
                    self.target = id.clone();
                    let Some(id) = id else {
                        let _ = bus.send(Msg::SessionOpened {
                            id: None,
                            history: Vec::new(),
                            skipped: 0,
                        });
                        continue;
                    };
                    let msg = if self.deps.is_some() {
                        match self.open() {
                            Ok(()) => match self.session.as_ref().map(Session::messages) {
                                Some(Ok((history, skipped))) => Msg::SessionOpened {
                                    id: Some(id),
                                    history,
                                    skipped,
                                },
                                Some(Err(e)) => Msg::SessionFailed(e.to_string()),
                                None => Msg::SessionFailed(format!("session {id} did not open")),
                            },
                            Err(e) => {
                                self.target = None;
                                Msg::SessionFailed(e.to_string())
                            }
                        }
                    } else {
                        // Without a model the session is only read, never locked.
                        match MessageLog::read(&self.paths.session_dir(&id)) {
                            Ok(r) if self.paths.session_dir(&id).is_dir() => Msg::SessionOpened {
                                id: Some(id),
                                history: r.messages,
                                skipped: r.skipped_lines.len(),
                            },
                            Ok(_) => Msg::SessionFailed(format!("session {id} does not exist")),
                            Err(e) => Msg::SessionFailed(e.to_string()),
                        }
                    };
                    let _ = bus.send(msg);
                }
                WorkerCmd::SetProvider(p) => {
                    if let Some(d) = &mut self.deps {
                        d.provider = p;
                    }
                    // Reopened with the new provider on the next send.
                    if let Some(s) = self.session.take() {
                        self.target = Some(s.id().to_string());
                    }
                }
            }
        }
    }
}

/// Runs the workstation until the user quits. The terminal is restored on
/// every path out of here, panics included.
pub async fn run(ws: Workstation) -> Result<(), TuiError> {
    let mut guard = terminal::enter()?;
    let result = event_loop(&mut guard.terminal, ws).await;
    drop(guard);
    let (worker, mut running) = result?;
    for c in [running.turn.take(), running.team.take()]
        .into_iter()
        .flatten()
    {
        c.cancel();
    }
    // Let a cancelled turn (and team) record its end (state.json, trace,
    // run.json) before exit.
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, async {
        let _ = worker.await;
        if let Some(team) = running.team_task.take() {
            let _ = team.await;
        }
    })
    .await;
    Ok(())
}

async fn next_signal(sig: &mut Option<tokio::signal::unix::Signal>) {
    match sig {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending::<()>().await,
    }
}

type LoopExit = (JoinHandle<()>, Running);

/// What runs besides the UI: the turn's and the team's cancel tokens, and
/// the team's task.
#[derive(Default)]
struct Running {
    turn: Option<CancellationToken>,
    team: Option<CancellationToken>,
    team_task: Option<JoinHandle<()>>,
    /// Where the answer to the question on screen goes: the scheduler asks
    /// one call at a time, so there is at most one.
    approval: Option<tokio::sync::oneshot::Sender<Answer>>,
}

impl Running {
    /// Ctrl-C: the turn is cancelled, and a call waiting on the user's
    /// answer is told no, so the cancel does not wait on a question.
    fn cancel_turn(&mut self) {
        if let Some(reply) = self.approval.take() {
            let _ = reply.send(Answer::No(Some("the run was cancelled".into())));
        }
        if let Some(c) = &self.turn {
            c.cancel();
        }
    }

    /// Keeps the question's reply channel and shows it.
    fn asked(&mut self, req: ApprovalRequest) -> Msg {
        // An older question left unanswered counts as no.
        if let Some(old) = self.approval.replace(req.reply) {
            let _ = old.send(Answer::No(None));
        }
        Msg::ApprovalAsked(Box::new(super::approval_view::ApprovalView::new(
            req.tool,
            req.target,
            req.mode,
            req.preview,
        )))
    }
}

async fn event_loop(term: &mut Term, ws: Workstation) -> Result<LoopExit, TuiError> {
    use tokio::signal::unix::{SignalKind, signal};

    let (agent_tx, mut agent_rx) = unbounded_channel::<AgentEvent>();
    let team_events = agent_tx.clone();
    let (bus_tx, mut bus_rx) = unbounded_channel::<Msg>();
    let (cmd_tx, cmd_rx) = unbounded_channel::<WorkerCmd>();
    let compaction = CompactionRequest::default();
    let worker = Worker {
        paths: ws.paths.clone(),
        compaction: compaction.clone(),
        deps: ws.deps,
        session: None,
        target: None,
        workspace: ws.options.workspace.clone(),
    };
    // The engine gets a runtime of its own on a dedicated thread: a turn's
    // CPU work can never delay a frame, and the turn's future need not be
    // `Send` (the UI runtime's worker threads would require it).
    let worker_bus = bus_tx.clone();
    let worker = tokio::task::spawn_blocking(move || {
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt.block_on(worker.run(cmd_rx, agent_tx, worker_bus)),
            Err(e) => {
                let _ = worker_bus.send(Msg::Notice {
                    kind: NoticeKind::Error,
                    text: format!("cannot start the engine's runtime: {e}"),
                });
            }
        }
    });

    let mut app = App::new(ws.theme, ws.keymap, ws.options);
    let ctx = Ctx {
        paths: ws.paths,
        compaction,
        cmd: cmd_tx,
        bus: bus_tx,
        switch_model: ws.switch_model,
        swarm: ws.swarm,
        events: team_events,
        policy: ws.approvals.as_ref().map(|a| a.policy.clone()),
    };
    let mut approval_requests = ws.approvals.map(|a| a.requests);
    let mut running = Running::default();
    let mut start: Vec<Msg> = ws
        .notices
        .into_iter()
        .map(|(kind, text)| Msg::Notice { kind, text })
        .collect();
    start.extend(ws.resume.map(Msg::OpenSession));
    for msg in start {
        for effect in update(&mut app, msg) {
            perform(effect, &ctx, &mut running);
        }
    }
    let mut frames = FrameScheduler::default();
    frames.request(Instant::now());
    let mut input = EventStream::new();
    let mut sigterm = signal(SignalKind::terminate()).ok();
    let mut sighup = signal(SignalKind::hangup()).ok();
    let mut mcp_events = ws.mcp_events;

    loop {
        let deadline = frames.deadline();
        let mut msgs: Vec<Msg> = Vec::with_capacity(1);
        tokio::select! {
            biased;
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                let now = Instant::now();
                term.draw(|f| view::draw(f, &mut app, now))?;
                frames.drew(now);
                if let Some(t) = app.next_deadline(now) {
                    frames.request(t);
                }
                continue;
            }
            ev = input.next() => match ev {
                Some(Ok(Event::Key(k))) => msgs.push(Msg::Key(k)),
                Some(Ok(Event::Paste(s))) => msgs.push(Msg::Paste(s)),
                Some(Ok(Event::Mouse(m))) => msgs.push(Msg::Mouse(m)),
                Some(Ok(Event::Resize(w, h))) => {
                    term.autoresize()?;
                    msgs.push(Msg::Resize(w, h));
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(e.into()),
                // The terminal went away.
                None => break,
            },
            Some(event) = agent_rx.recv() => msgs.push(Msg::Agent { event, at: Instant::now() }),
            Some(event) = async { match mcp_events.as_mut() { Some(rx) => rx.recv().await, None => None } } => {
                msgs.push(Msg::Agent { event, at: Instant::now() })
            }
            Some(req) = async { match approval_requests.as_mut() { Some(rx) => rx.recv().await, None => None } } => {
                msgs.push(running.asked(req));
            }
            Some(m) = bus_rx.recv() => {
                if matches!(m, Msg::TurnDone { .. } | Msg::SwarmDone { .. }) {
                    // Every event of the finished turn (or team) is already
                    // queued: fold them in before it counts as done.
                    while let Ok(event) = agent_rx.try_recv() {
                        msgs.push(Msg::Agent { event, at: Instant::now() });
                    }
                    if matches!(m, Msg::TurnDone { .. }) {
                        running.turn = None;
                    } else {
                        running.team = None;
                    }
                }
                msgs.push(m);
            }
            _ = next_signal(&mut sigterm) => break,
            _ = next_signal(&mut sighup) => break,
        }
        for msg in msgs {
            for effect in update(&mut app, msg) {
                match effect {
                    Effect::ClearTerminal => {
                        term.clear()?;
                    }
                    other => perform(other, &ctx, &mut running),
                }
            }
        }
        if app.should_quit {
            break;
        }
        if app.dirty {
            frames.request(Instant::now());
        }
    }
    Ok((worker, running))
}

struct Ctx {
    paths: Paths,
    compaction: CompactionRequest,
    cmd: UnboundedSender<WorkerCmd>,
    bus: UnboundedSender<Msg>,
    switch_model: Option<ModelSwitch>,
    swarm: Option<Arc<dyn SwarmLauncher>>,
    /// Where the team's events go (the session's stream).
    events: UnboundedSender<AgentEvent>,
    policy: Option<Arc<ApprovalPolicy>>,
}

/// Runs a team through `launcher` on a runtime of its own (a dedicated
/// thread, so the workers' CPU work never delays a frame), its events sent
/// to `events`; [`Msg::SwarmDone`] goes to `bus` when it returns. Returns
/// the run's cancel token and its task.
pub fn spawn_team(
    launcher: Arc<dyn SwarmLauncher>,
    preset: String,
    vars: Vec<(String, String)>,
    events: UnboundedSender<AgentEvent>,
    bus: UnboundedSender<Msg>,
) -> (CancellationToken, JoinHandle<()>) {
    let token = CancellationToken::new();
    let cancel = token.clone();
    let task = tokio::task::spawn_blocking(move || {
        let result = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("vibedesk-team")
            .enable_all()
            .build()
            .map_err(SwarmLaunchError::Runtime)
            .and_then(|rt| {
                rt.block_on(launcher.launch(preset, vars, EventSink::new(events), cancel))
            });
        let _ = bus.send(Msg::SwarmDone {
            error: result.err().map(|e| e.to_string()),
            at: Instant::now(),
        });
    });
    (token, task)
}

/// Keeps or un-keeps one memory through the store (the one writer of the
/// memory folder), says so, and sends the list and entry again.
fn keep_memory(dir: &std::path::Path, file: &str, keep: bool, bus: &UnboundedSender<Msg>) {
    use crate::memory::{KeepOutcome, MemoryFlags, MemoryStore};
    let flags = MemoryFlags::from_env();
    let decay = flags.decay;
    let (kind, text) = match MemoryStore::open(dir, flags).and_then(|s| s.keep(file, keep)) {
        Ok(KeepOutcome::Set { title, confirmed }) => (
            NoticeKind::Info,
            if confirmed {
                format!("kept: {title} (now yours, recalled without the unconfirmed label)")
            } else {
                format!("unkept: {title} (unconfirmed again, written by the model)")
            },
        ),
        Ok(KeepOutcome::UsersOwn { title }) => (
            NoticeKind::Info,
            format!("{title} is your own memory: nothing to keep"),
        ),
        Ok(KeepOutcome::NotFound) => (
            NoticeKind::Warning,
            format!("memory {file} no longer exists"),
        ),
        Err(e) => (NoticeKind::Error, format!("cannot keep {file}: {e}")),
    };
    let _ = bus.send(Msg::Notice { kind, text });
    let now = chrono::Utc::now();
    let _ = bus.send(Msg::Memory(memories::list(dir, now, decay)));
    let result = memories::detail(dir, file, now, decay);
    let _ = bus.send(Msg::MemoryEntry {
        file: file.to_string(),
        result,
    });
}

/// The user's answer goes to the waiting call; a new mode to the policy.
fn approval_effect(effect: Effect, ctx: &Ctx, running: &mut Running) {
    match effect {
        Effect::AnswerApproval(answer) => {
            if let Some(reply) = running.approval.take() {
                let _ = reply.send(answer);
            }
        }
        Effect::SetApproval(mode) => {
            if let Some(p) = &ctx.policy {
                p.set_mode(mode);
            }
        }
        _ => {}
    }
}

/// Computes a tear sheet or writes its report on a blocking thread; the
/// answer comes back as a message to the view that asked.
fn tear_sheet_effect(effect: Effect, ctx: &Ctx) {
    let bus = ctx.bus.clone();
    match effect {
        Effect::LoadTearSheet { id, run_dir } => {
            tokio::task::spawn_blocking(move || {
                let result = crate::tui::tearsheet::load::load(&run_dir).map(Box::new);
                let _ = bus.send(Msg::TearSheetLoaded { id, result });
            });
        }
        Effect::WriteReport { id, run_dir } => {
            tokio::task::spawn_blocking(move || {
                let result = crate::tui::tearsheet::write_report(&run_dir);
                let _ = bus.send(Msg::ReportWritten { id, result });
            });
        }
        _ => {}
    }
}

fn perform(effect: Effect, ctx: &Ctx, running: &mut Running) {
    match effect {
        Effect::Send { prompt, plan } => {
            let token = CancellationToken::new();
            running.turn = Some(token.clone());
            let _ = ctx.cmd.send(WorkerCmd::Send {
                prompt,
                plan,
                cancel: token,
            });
        }
        Effect::Cancel => running.cancel_turn(),
        Effect::StartSwarm { preset, vars } => match &ctx.swarm {
            Some(launcher) => {
                let (token, task) = spawn_team(
                    launcher.clone(),
                    preset,
                    vars,
                    ctx.events.clone(),
                    ctx.bus.clone(),
                );
                running.team = Some(token);
                running.team_task = Some(task);
            }
            None => {
                let _ = ctx.bus.send(Msg::SwarmDone {
                    error: Some(SwarmLaunchError::Unavailable.to_string()),
                    at: Instant::now(),
                });
            }
        },
        Effect::CancelSwarm => {
            if let Some(c) = &running.team {
                c.cancel();
            }
        }
        Effect::AnswerApproval(_) | Effect::SetApproval(_) => approval_effect(effect, ctx, running),
        Effect::Quit | Effect::ClearTerminal => {}
        Effect::Compact { focus } => {
            let text = request_compaction(&ctx.compaction, focus.as_deref());
            let _ = ctx.bus.send(Msg::Notice {
                kind: NoticeKind::Info,
                text,
            });
        }
        Effect::NewSession => {
            let _ = ctx.cmd.send(WorkerCmd::Open(None));
        }
        Effect::OpenSession(id) => {
            let _ = ctx.cmd.send(WorkerCmd::Open(Some(id)));
        }
        Effect::LoadSessions => load_sessions(ctx),
        Effect::Export { session, html } => export_session(session, html, ctx),
        Effect::LoadDetail(id) => {
            let (paths, bus) = (ctx.paths.clone(), ctx.bus.clone());
            tokio::task::spawn_blocking(move || {
                let _ = bus.send(Msg::Detail(transcripts::detail(&paths, &id)));
            });
        }
        Effect::LoadTranscript(path) => {
            let bus = ctx.bus.clone();
            tokio::task::spawn_blocking(move || {
                let name = file_name(&path);
                let result = transcripts::read_transcript(&path).map(|(m, _)| m);
                let _ = bus.send(Msg::Transcript { name, result });
            });
        }
        Effect::LoadMemory => {
            let (dir, bus) = (memories::dir(&ctx.paths), ctx.bus.clone());
            tokio::task::spawn_blocking(move || {
                let decay = crate::memory::MemoryFlags::from_env().decay;
                let r = memories::list(&dir, chrono::Utc::now(), decay);
                let _ = bus.send(Msg::Memory(r));
            });
        }
        Effect::KeepMemory { file, keep } => {
            let (dir, bus) = (memories::dir(&ctx.paths), ctx.bus.clone());
            tokio::task::spawn_blocking(move || keep_memory(&dir, &file, keep, &bus));
        }
        Effect::LoadMonitors => load_monitors(ctx),
        Effect::MonitorCommand { verb, name } => monitor_command(verb, name, ctx),
        Effect::LoadTeams => {
            let (data, bus) = (ctx.paths.data_dir.clone(), ctx.bus.clone());
            tokio::task::spawn_blocking(move || {
                let _ = bus.send(Msg::Teams(team_runs::list(&data)));
            });
        }
        Effect::LoadMemoryEntry(file) => {
            let (dir, bus) = (memories::dir(&ctx.paths), ctx.bus.clone());
            tokio::task::spawn_blocking(move || {
                let decay = crate::memory::MemoryFlags::from_env().decay;
                let result = memories::detail(&dir, &file, chrono::Utc::now(), decay);
                let _ = bus.send(Msg::MemoryEntry { file, result });
            });
        }
        Effect::LoadBacktest(req) => {
            let bus = ctx.bus.clone();
            tokio::task::spawn_blocking(move || {
                let (series, info) = backtest::load(&req.run_dir, req.info);
                let _ = bus.send(Msg::BacktestLoaded {
                    id: req.id,
                    series,
                    info,
                });
            });
        }
        Effect::LoadTearSheet { .. } | Effect::WriteReport { .. } => tear_sheet_effect(effect, ctx),
        Effect::LoadFactors { id, path } => {
            let (data, bus) = (ctx.paths.data_dir.clone(), ctx.bus.clone());
            tokio::task::spawn_blocking(move || {
                let result = crate::tui::factor_view::load(&data, path.as_deref()).map(Box::new);
                let _ = bus.send(Msg::FactorsLoaded { id, result });
            });
        }
        Effect::SwitchModel(name) => match &ctx.switch_model {
            Some(switch) => match switch(&name) {
                Ok((provider, label)) => {
                    let _ = ctx.cmd.send(WorkerCmd::SetProvider(provider));
                    let _ = ctx.bus.send(Msg::ModelChanged { label });
                }
                Err(e) => {
                    let _ = ctx.bus.send(Msg::Notice {
                        kind: NoticeKind::Error,
                        text: format!("/model {name}: {e}"),
                    });
                }
            },
            None => {
                let _ = ctx.bus.send(Msg::Notice {
                    kind: NoticeKind::Warning,
                    text: "this provider's model cannot be switched here".into(),
                });
            }
        },
    }
}

/// The sessions for the browser, after marking runs another process left
/// `running` when it died.
fn load_sessions(ctx: &Ctx) {
    let (paths, bus) = (ctx.paths.clone(), ctx.bus.clone());
    tokio::task::spawn_blocking(move || {
        // As `vibedesk sessions` does: a run another process left
        // `running` when it died is marked interrupted before listing.
        if let Some(text) = crate::session::reconcile_stale_runs(&paths) {
            let _ = bus.send(Msg::Notice {
                kind: NoticeKind::Warning,
                text,
            });
        }
        let (rows, notice) = transcripts::sessions_reporting(&paths);
        if let Some(text) = notice {
            let _ = bus.send(Msg::Notice {
                kind: NoticeKind::Warning,
                text,
            });
        }
        let _ = bus.send(Msg::Sessions(rows));
    });
}

/// `/export`: the open session as Markdown or HTML (docs §20.3).
fn export_session(session: String, html: bool, ctx: &Ctx) {
    let (dir, bus) = (ctx.paths.session_dir(&session), ctx.bus.clone());
    tokio::task::spawn_blocking(move || {
        use crate::report::export::{Format, export_session};
        let format = if html { Format::Html } else { Format::Markdown };
        let (kind, text) = match export_session(&dir, format, None) {
            Ok(path) => (NoticeKind::Info, format!("exported to {}", path.display())),
            Err(e) => (NoticeKind::Error, format!("export failed: {e}")),
        };
        let _ = bus.send(Msg::Notice { kind, text });
    });
}

/// The Monitors view's rows (docs §21.5).
fn load_monitors(ctx: &Ctx) {
    let (paths, bus) = (ctx.paths.clone(), ctx.bus.clone());
    tokio::task::spawn_blocking(move || {
        let rows = super::monitors::load(&paths, chrono::Utc::now())
            .map_err(|e| super::monitors::LoadError(e.to_string()));
        let _ = bus.send(Msg::Monitors(rows));
    });
}

fn file_name(p: &std::path::Path) -> String {
    p.file_name()
        .and_then(|n| n.to_str())
        .map(String::from)
        .unwrap_or_else(|| PathBuf::from(p).display().to_string())
}

/// `vibedesk monitor VERB NAME` as a child (a run takes a while; the
/// view stays live), then a notice and a reload of the Monitors view.
fn monitor_command(verb: &'static str, name: String, ctx: &Ctx) {
    let (paths, bus) = (ctx.paths.clone(), ctx.bus.clone());
    let _ = bus.send(Msg::Notice {
        kind: NoticeKind::Info,
        text: format!("monitor {verb} {name}…"),
    });
    tokio::spawn(async move {
        let exe = std::env::current_exe();
        let result = match exe {
            Ok(exe) => tokio::process::Command::new(exe)
                .args(["monitor", verb, &name])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .output()
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let (kind, text) = match result {
            Ok(o) if o.status.success() => (
                NoticeKind::Info,
                String::from_utf8_lossy(&o.stdout).trim().to_string(),
            ),
            Ok(o) => (
                NoticeKind::Error,
                String::from_utf8_lossy(&o.stderr).trim().to_string(),
            ),
            Err(e) => (NoticeKind::Error, format!("monitor {verb} {name}: {e}")),
        };
        let _ = bus.send(Msg::Notice { kind, text });
        let rows = tokio::task::spawn_blocking(move || {
            super::monitors::load(&paths, chrono::Utc::now())
                .map_err(|e| super::monitors::LoadError(e.to_string()))
        })
        .await
        .unwrap_or_else(|e| Err(super::monitors::LoadError(e.to_string())));
        let _ = bus.send(Msg::Monitors(rows));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_answers_the_question_waiting_on_screen_no() {
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let token = CancellationToken::new();
        let mut running = Running {
            turn: Some(token.clone()),
            approval: Some(tx),
            ..Running::default()
        };
        running.cancel_turn();
        assert!(token.is_cancelled());
        assert!(running.approval.is_none());
        match rx.try_recv() {
            Ok(Answer::No(Some(why))) => assert!(why.contains("cancelled"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
