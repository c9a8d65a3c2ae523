//! The workstation's state and its one transition function. Everything
//! that happens (a key, a paste, an engine event, a finished turn, data
//! loaded from disk) is a [`Msg`]; [`update`] folds it into [`App`] and
//! returns side effects as data ([`Effect`]) for the runtime to perform.
//! Keys, wheel notches and pastes go through the overlay stack's one rule
//! ([`super::overlay`]) before the chat screen sees them; whether a turn
//! runs is one [`Phase`], which only `update` moves.
//! Tests drive `update` with message sequences and no terminal at all.

use crate::agent::plan::{EXECUTE_PROMPT, TurnPlan};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

use chrono::FixedOffset;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, MouseEvent, MouseEventKind};
use tokio::time::Instant;

use super::backtest::{BacktestInfo, EquitySeries, LoadRequest};
use super::browser::{Browser, BrowserEffect};
use super::cells::{CellKind, NoticeKind, Toggles};
use super::chat::Chat;
use super::composer::Composer;
use super::factor_view::{FactorData, FactorLoadError, FactorView, result_screen_file};
use super::gauge::Gauge;
use super::help::Help;
use super::keymap::{Action, Context, Keymap, typed_char};
use super::memories::{MemoryDetail, MemoryListing};
use super::overlay::{Handled, Input, Overlay, OverlayEffect, Overlays, WHEEL_LINES};
use super::swarm::{SWARM_USAGE, TeamBoard, TeamPhase};
use super::team_runs::TeamRunRow;
use super::tearsheet::{ReportError, SheetData, SheetEffect, SheetLoadError, TearSheetView};
use super::theme::Theme;
use super::tool_panel::ToolPanel;
use super::transcripts::{SessionDetail, SessionRow};
use crate::agent::events::{AgentEvent, RunStatus};
use crate::agent::input::{MessageTooLarge, check_message_size};
use crate::model::{Message, Role, Usage};
use crate::store::StoredMessage;

/// Everything that can happen to the app.
#[derive(Clone, Debug)]
pub enum Msg {
    Key(KeyEvent),
    Paste(String),
    Mouse(MouseEvent),
    Resize(u16, u16),
    /// An engine event, stamped with the time it arrived.
    Agent {
        event: AgentEvent,
        at: Instant,
    },
    /// The session worker finished a turn and is free for the next one.
    TurnDone {
        error: Option<String>,
    },
    /// A session is now open in the chat (`None` id: a new, not yet created one).
    SessionOpened {
        id: Option<String>,
        history: Vec<StoredMessage>,
        skipped: usize,
    },
    SessionFailed(String),
    /// Open this session in the chat (`--session` at start).
    OpenSession(String),
    Sessions(Vec<SessionRow>),
    Detail(Result<SessionDetail, crate::tui::transcripts::DetailError>),
    Transcript {
        name: String,
        result: Result<Vec<Message>, crate::tui::transcripts::TranscriptError>,
    },
    /// The memory entries were listed (for the browser's memory view).
    Memory(Result<MemoryListing, crate::tui::memories::MemoryViewError>),
    /// The research teams' runs on disk were listed.
    Teams(Vec<TeamRunRow>),
    /// The monitors were read for the Monitors view.
    Monitors(Result<Vec<crate::tui::monitors::MonitorLine>, crate::tui::monitors::LoadError>),
    /// One memory entry and its archived originals were read.
    MemoryEntry {
        file: String,
        result: Result<MemoryDetail, crate::tui::memories::MemoryViewError>,
    },
    Notice {
        kind: NoticeKind,
        text: String,
    },
    ModelChanged {
        label: String,
    },
    /// A backtest's series (and, when asked, its summary and metrics) were
    /// read for the cell `id`.
    BacktestLoaded {
        id: u64,
        series: Result<EquitySeries, crate::tui::backtest::EquityError>,
        info: Option<BacktestInfo>,
    },
    /// The team run's launcher returned (its events are all folded): with
    /// the error when it refused or failed.
    SwarmDone {
        error: Option<String>,
        at: Instant,
    },
    /// A tool call waits for the user's approval (docs §2.14.4).
    ApprovalAsked(Box<crate::tui::approval_view::ApprovalView>),
    /// The tear sheet for the view `id` was computed (or could not be).
    TearSheetLoaded {
        id: u64,
        result: Result<Box<SheetData>, SheetLoadError>,
    },
    /// The screen record for the factor view `id` was read (or not).
    FactorsLoaded {
        id: u64,
        result: Result<Box<FactorData>, FactorLoadError>,
    },
    /// The HTML report the view `id` asked for was written (or not).
    ReportWritten {
        id: u64,
        result: Result<PathBuf, ReportError>,
    },
}

/// What `update` asks the runtime to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Run a turn with this prompt, in this plan mode (docs §4.8).
    Send {
        prompt: String,
        plan: TurnPlan,
    },
    /// Cancel the running turn.
    Cancel,
    Quit,
    /// `/compact [focus]`.
    Compact {
        focus: Option<String>,
    },
    NewSession,
    OpenSession(String),
    /// `/export [md|html]`: write the open session's export (docs §20.3).
    Export {
        session: String,
        html: bool,
    },
    LoadSessions,
    LoadDetail(String),
    LoadTranscript(PathBuf),
    /// List the memory entries (read-only).
    LoadMemory,
    /// Read one memory entry (a file name in `entries/`) and its archives.
    LoadMemoryEntry(String),
    /// Keep (or un-keep) the model's memory in this file, then reload the
    /// list and the entry (docs §8.3).
    KeepMemory {
        file: String,
        keep: bool,
    },
    /// List the research teams' runs on disk (for the browser).
    LoadTeams,
    /// Read the monitors for the Monitors view (docs §21.5).
    LoadMonitors,
    /// `monitor run|pause|resume NAME`, then reload the view.
    MonitorCommand {
        verb: &'static str,
        name: String,
    },
    SwitchModel(String),
    /// Read a finished backtest's equity curve (and maybe its result) from
    /// its run directory.
    LoadBacktest(LoadRequest),
    /// Repaint everything (Ctrl-L).
    ClearTerminal,
    /// `/swarm NAME k=v …`: run the research team `preset` with these
    /// variables, in the order given.
    StartSwarm {
        preset: String,
        vars: Vec<(String, String)>,
    },
    /// Cancel the team run.
    CancelSwarm,
    /// The user's answer to the call waiting for approval.
    AnswerApproval(crate::tools::approval::Answer),
    /// `/approval MODE`: the session's approval mode from now on.
    SetApproval(crate::model::approval::ApprovalMode),
    /// Read and compute the tear sheet of a run directory for the view `id`.
    LoadTearSheet {
        id: u64,
        run_dir: PathBuf,
    },
    /// Read a screen record for the factor view `id`: `path`, or the
    /// newest under the data dir when `None`.
    LoadFactors {
        id: u64,
        path: Option<PathBuf>,
    },
    /// Write the HTML report of a run directory for the view `id` (docs
    /// §20.3); the answer is `Msg::ReportWritten`.
    WriteReport {
        id: u64,
        run_dir: PathBuf,
    },
}

/// Where the session worker is, as far as the app knows: the one place
/// that says whether a turn runs. Only [`update`] changes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Nothing runs: a message is sent at once.
    Idle,
    /// A session switch is on its way to the worker; messages wait for it.
    Opening,
    /// A turn runs in the worker; `started_at` while the engine's run has
    /// started and not finished.
    Running { started_at: Option<Instant> },
    /// The user asked the running turn to stop and it has not stopped yet.
    Cancelling { started_at: Option<Instant> },
}

impl Phase {
    /// A turn runs (cancelling or not).
    pub(crate) fn busy(self) -> bool {
        matches!(self, Phase::Running { .. } | Phase::Cancelling { .. })
    }

    /// When the running turn's engine run started.
    pub(crate) fn started_at(self) -> Option<Instant> {
        match self {
            Phase::Running { started_at } | Phase::Cancelling { started_at } => started_at,
            Phase::Idle | Phase::Opening => None,
        }
    }

    /// The same phase with the run's start time replaced.
    fn with_start(self, at: Option<Instant>) -> Phase {
        match self {
            Phase::Running { .. } => Phase::Running { started_at: at },
            Phase::Cancelling { .. } => Phase::Cancelling { started_at: at },
            other => other,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Focus {
    Input,
    Chat,
}

/// Fixed facts the app starts with.
#[derive(Clone, Debug)]
pub struct AppOptions {
    pub model_label: String,
    /// False when no provider is configured (and not `--demo`).
    pub has_model: bool,
    pub demo: bool,
    pub heartbeat: Duration,
    pub threshold: u64,
    pub gates: [u64; 3],
    /// Local time offset for timestamps.
    pub offset: FixedOffset,
    /// Shown when a prompt is sent without a model.
    pub no_model_help: String,
    /// The size limit on one message (`[agent] max_message_bytes`): a larger
    /// send or paste is refused with the engine's explanation.
    pub max_message_bytes: usize,
    /// Where session directories live, to name the workspace in that explanation.
    pub sessions_dir: PathBuf,
    /// The user's folder the agent works in (`--workspace`, `[agent]
    /// workspace`), shown in the status bar; `None`: each session's own.
    pub workspace: Option<PathBuf>,
    /// How the status bar names `workspace` (`~/research`).
    pub workspace_label: String,
    /// The approval mode the session's calls run under (docs §2.14.2).
    pub approval: crate::model::approval::ApprovalMode,
}

impl Default for AppOptions {
    fn default() -> Self {
        let cfg = crate::agent::LoopConfig::default();
        AppOptions {
            model_label: "scripted".into(),
            has_model: true,
            demo: false,
            heartbeat: cfg.scheduler.heartbeat_interval,
            threshold: cfg.token_threshold,
            gates: cfg.gates(),
            offset: chrono::Offset::fix(&chrono::Utc),
            no_model_help: String::new(),
            max_message_bytes: cfg.max_message_bytes,
            sessions_dir: PathBuf::from("sessions"),
            workspace: None,
            workspace_label: String::new(),
            approval: cfg.approval,
        }
    }
}

/// Plan mode in the workstation (docs §4.8).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanState {
    /// `/plan` is on: messages are sent as planning turns.
    pub on: bool,
    /// The running turn plans: its answer becomes `ready`.
    pub drafting: bool,
    /// The last plan, waiting for `/go`.
    pub ready: Option<String>,
}

pub struct App {
    pub plan: PlanState,
    pub theme: Theme,
    pub keymap: Keymap,
    pub options: AppOptions,
    pub chat: Chat,
    pub tools: ToolPanel,
    pub gauge: Gauge,
    pub composer: Composer,
    /// The help page and the browser over the chat screen.
    pub overlays: Overlays,
    pub focus: Focus,
    pub sidebar: bool,
    pub session_id: Option<String>,
    /// Private so that only `update` moves it.
    phase: Phase,
    pub step: Option<(u32, u32)>,
    /// Messages typed while busy, sent in order as turns finish.
    pub queued: VecDeque<String>,
    /// One Ctrl-C on an idle, empty prompt; the next quits.
    pub quit_armed: bool,
    pub should_quit: bool,
    /// A one-line message in the footer until the next key.
    pub status: Option<(NoticeKind, String)>,
    /// Tokens the provider reported for this session (this process).
    pub usage: Usage,
    /// The research team's run (the last one started), folded from its
    /// events whether or not its view is open.
    pub swarm: Option<TeamBoard>,
    /// Something changed since the last frame.
    pub dirty: bool,
}

impl App {
    pub fn new(theme: Theme, keymap: Keymap, options: AppOptions) -> Self {
        let composer = Composer::new(&theme);
        let gauge = Gauge::new(options.threshold, options.gates);
        let tools = ToolPanel::new(options.heartbeat);
        let mut app = App {
            theme,
            keymap,
            chat: Chat::default(),
            tools,
            gauge,
            composer,
            overlays: Overlays::default(),
            focus: Focus::Input,
            sidebar: true,
            session_id: None,
            phase: Phase::Idle,
            step: None,
            queued: VecDeque::new(),
            plan: PlanState::default(),
            quit_armed: false,
            should_quit: false,
            status: None,
            usage: Usage::default(),
            swarm: None,
            dirty: true,
            options,
        };
        app.welcome();
        app
    }

    fn welcome(&mut self) {
        let text = if !self.options.has_model {
            "No model is configured: the chat will explain how to connect one when you send a message. Ctrl-T browses earlier sessions; ? lists every key."
                .to_string()
        } else if self.options.demo {
            "Demo mode: a scripted model plays one research session on the real tools: a parallel batch, serial writes, heartbeats, a timeout, and all three compaction gates. Type anything and press Enter to start it (for example: study the 2008 crash). ? lists every key."
                .to_string()
        } else {
            format!(
                "Connected to {}. Enter sends, Alt-Enter adds a line, Ctrl-T browses sessions, ? lists every key.",
                self.options.model_label
            )
        };
        self.chat.notice(NoticeKind::Info, text);
    }

    /// When the screen must next be redrawn on its own (a clock changes);
    /// `None` while nothing on screen moves, so an idle app never draws.
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let mut next = self.tools.next_tick(now);
        let mut consider = |start: Instant| {
            let t = start + Duration::from_secs(now.saturating_duration_since(start).as_secs() + 1);
            next = Some(next.map_or(t, |n: Instant| n.min(t)));
        };
        if let Some(s) = self.phase.started_at() {
            consider(s);
        }
        if let Some(a) = &self.gauge.active {
            consider(a.started_at);
        }
        if let Some(b) = &self.swarm {
            let visible = matches!(self.overlays.top(), Some(Overlay::Swarm));
            if let Some(t) = b.next_tick(now, visible) {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        next
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// A turn is running in the session worker.
    pub fn busy(&self) -> bool {
        self.phase.busy()
    }

    /// The running turn was asked to stop and has not yet.
    pub fn cancelling(&self) -> bool {
        matches!(self.phase, Phase::Cancelling { .. })
    }

    /// The help page, if open.
    pub fn help(&self) -> Option<&Help> {
        self.overlays.help()
    }

    /// The transcript browser, if open.
    pub fn browser(&self) -> Option<&Browser> {
        self.overlays.browser()
    }

    pub(super) fn set_status(&mut self, kind: NoticeKind, text: impl Into<String>) {
        self.status = Some((kind, text.into()));
    }

    /// Where a key is looked up: the top overlay's contexts, else the chat
    /// screen's for the focus.
    fn contexts(&self) -> &'static [Context] {
        if let Some(top) = self.overlays.top() {
            return top.contexts();
        }
        match self.focus {
            Focus::Input => &[Context::Input, Context::Main, Context::Global],
            Focus::Chat => &[Context::Chat, Context::Main, Context::Global],
        }
    }

    fn resolve(&self, key: &KeyEvent) -> Option<Action> {
        for &ctx in self.contexts() {
            if let Some(a) = self.keymap.lookup(ctx, key) {
                // Printable keys bound in the input only act on an empty input.
                if ctx == Context::Input && typed_char(key).is_some() && !self.composer.is_empty() {
                    return None;
                }
                if a == Action::HistoryPrev && !self.composer.on_first_line() {
                    return None;
                }
                if a == Action::HistoryNext && !self.composer.on_last_line() {
                    return None;
                }
                return Some(a);
            }
        }
        None
    }

    fn dispatch(&mut self, prompt: String) -> Vec<Effect> {
        let plan = if self.plan.on {
            self.plan.drafting = true;
            self.plan.ready = None;
            TurnPlan::Draft
        } else {
            TurnPlan::Off
        };
        self.send_turn(prompt, plan)
    }

    fn send_turn(&mut self, prompt: String, plan: TurnPlan) -> Vec<Effect> {
        self.chat.push(CellKind::User {
            text: prompt.clone(),
        });
        self.chat.follow_bottom();
        self.phase = Phase::Running { started_at: None };
        vec![Effect::Send { prompt, plan }]
    }

    /// `/plan`, `/plan off`, `/plan TEXT` (docs §4.8).
    fn plan_command(&mut self, arg: Option<&str>) -> Vec<Effect> {
        if arg == Some("off") {
            self.plan = PlanState::default();
            self.chat.notice(
                NoticeKind::Info,
                "plan mode off: every tool is offered again",
            );
            return vec![];
        }
        if !self.plan.on {
            self.plan.on = true;
            self.chat.notice(
                NoticeKind::Info,
                "plan mode: the model is offered read-only tools only and answers with a numbered plan; /go runs the plan, /plan off leaves plan mode",
            );
        }
        match arg {
            Some(text) => self.send_text(text.to_string()),
            None => vec![],
        }
    }

    /// `/go [TEXT]`: runs the last plan with every tool, pinned.
    fn go_command(&mut self, arg: Option<&str>) -> Vec<Effect> {
        if self.busy() || self.phase != Phase::Idle {
            self.set_status(NoticeKind::Warning, "a turn is running: /go when it ends");
            return vec![];
        }
        let Some(plan) = self.plan.ready.take() else {
            self.chat.notice(
                NoticeKind::Warning,
                "no plan to run: /plan, then ask for one",
            );
            return vec![];
        };
        if !self.options.has_model {
            self.chat
                .notice(NoticeKind::Error, self.options.no_model_help.clone());
            return vec![];
        }
        self.plan = PlanState::default();
        let prompt = arg.map_or_else(|| EXECUTE_PROMPT.to_string(), str::to_string);
        self.send_turn(prompt, TurnPlan::Execute(plan))
    }

    /// A fresh browser, alone over the chat screen.
    fn open_browser(&mut self) -> Vec<Effect> {
        self.overlays.clear();
        let b = Browser::new(self.options.offset, self.session_id.clone());
        self.overlays.push(Overlay::Browser(Box::new(b)));
        vec![Effect::LoadSessions]
    }

    /// `/memory`: the browser, opened on its memory view.
    fn open_memory(&mut self) -> Vec<Effect> {
        self.overlays.clear();
        let mut b = Browser::new(self.options.offset, self.session_id.clone());
        let fx = b.handle(Action::Memory);
        self.overlays.push(Overlay::Browser(Box::new(b)));
        self.browser_effects(fx)
    }

    /// The tear-sheet view of `run_dir` on top of what is open; the sheet
    /// is computed off the UI thread.
    fn open_tear_sheet(&mut self, run_dir: PathBuf) -> Vec<Effect> {
        let view = TearSheetView::new(run_dir.clone());
        let id = view.id;
        self.overlays.push(Overlay::TearSheet(Box::new(view)));
        vec![Effect::LoadTearSheet { id, run_dir }]
    }

    /// A tear sheet's load or report answer, to the view that asked.
    fn tear_sheet_msg(&mut self, msg: Msg) -> Vec<Effect> {
        match msg {
            Msg::TearSheetLoaded { id, result } => {
                if let Some(v) = self.overlays.tear_sheet_mut(id) {
                    v.loaded(result.map(|b| *b));
                }
            }
            Msg::ReportWritten { id, result } => {
                if let Some(v) = self.overlays.tear_sheet_mut(id) {
                    v.message = Some(match result {
                        Ok(p) => format!("report written: {}", p.display()),
                        Err(e) => format!("no report: {e}"),
                    });
                }
            }
            _ => {}
        }
        vec![]
    }

    /// The factor view of the record at `path` (the newest when `None`)
    /// on top of what is open; the record is read off the UI thread.
    fn open_factors(&mut self, path: Option<PathBuf>) -> Vec<Effect> {
        let view = FactorView::new(path.clone());
        let id = view.id;
        self.overlays.push(Overlay::Factors(Box::new(view)));
        vec![Effect::LoadFactors { id, path }]
    }

    /// `f` on a chat cell: the factor view of the selected result, or of
    /// the nearest result above it that names a `screen_file`.
    fn factors_from_chat(&mut self) -> Vec<Effect> {
        let upto = self
            .chat
            .selected
            .unwrap_or(self.chat.cells.len().saturating_sub(1));
        let found = self
            .chat
            .cells
            .iter()
            .take(upto.saturating_add(1))
            .rev()
            .find_map(|c| match c.kind() {
                CellKind::Tool(t) => result_screen_file(&t.result),
                _ => None,
            });
        match found {
            Some(file) => self.open_factors(Some(file)),
            None => {
                self.set_status(
                    NoticeKind::Info,
                    "no factor screen result here: select one, then f (or type /factors)",
                );
                vec![]
            }
        }
    }

    /// `s` on a chat cell: the tear sheet of the selected result, or of
    /// the nearest result above it that names a run directory.
    fn tear_sheet_from_chat(&mut self) -> Vec<Effect> {
        let upto = self
            .chat
            .selected
            .unwrap_or(self.chat.cells.len().saturating_sub(1));
        let found = self
            .chat
            .cells
            .iter()
            .take(upto.saturating_add(1))
            .rev()
            .find_map(|c| match c.kind() {
                CellKind::Backtest(b) => Some(b.run_dir.clone()),
                CellKind::Tool(t) => super::backtest::result_run_dir(&t.result),
                _ => None,
            });
        match found {
            Some(dir) => self.open_tear_sheet(dir),
            None => {
                self.set_status(
                    NoticeKind::Info,
                    "no result with a run directory here: select a backtest cell, then s",
                );
                vec![]
            }
        }
    }

    /// Switches the worker to session `id`; messages wait until it is open.
    fn open_session(&mut self, id: String) -> Vec<Effect> {
        self.phase = Phase::Opening;
        vec![Effect::OpenSession(id)]
    }

    /// What the overlay at `layer` asked for, as the app's effects.
    fn overlay_effects(&mut self, layer: usize, fx: Vec<OverlayEffect>) -> Vec<Effect> {
        let mut out = Vec::new();
        for e in fx {
            match e {
                OverlayEffect::Close => self.overlays.remove(layer),
                OverlayEffect::OpenBrowser => out.extend(self.open_browser()),
                OverlayEffect::Browser(b) => out.extend(self.browser_effects(vec![b])),
                OverlayEffect::Swarm(a) => out.extend(self.swarm_action(layer, a)),
                OverlayEffect::Monitors(m) => out.push(monitors_effect(m)),
                OverlayEffect::Approval(answer) => out.push(Effect::AnswerApproval(answer)),
                OverlayEffect::TearSheet(SheetEffect::WriteReport { id, run_dir }) => {
                    out.push(Effect::WriteReport { id, run_dir })
                }
            }
        }
        out
    }

    /// What the browser asked for, as the app's effects.
    fn browser_effects(&mut self, fx: Vec<BrowserEffect>) -> Vec<Effect> {
        let mut out = Vec::new();
        for e in fx {
            match e {
                BrowserEffect::Close => self.overlays.close_browser(),
                BrowserEffect::LoadSessions => out.push(Effect::LoadSessions),
                BrowserEffect::LoadDetail(id) => out.push(Effect::LoadDetail(id)),
                BrowserEffect::LoadTranscript(p) => out.push(Effect::LoadTranscript(p)),
                BrowserEffect::LoadBacktest(r) => out.push(Effect::LoadBacktest(r)),
                BrowserEffect::LoadMemory => out.push(Effect::LoadMemory),
                BrowserEffect::LoadMemoryEntry(f) => out.push(Effect::LoadMemoryEntry(f)),
                BrowserEffect::KeepMemory { file, keep } => {
                    out.push(Effect::KeepMemory { file, keep })
                }
                BrowserEffect::LoadTeams => out.push(Effect::LoadTeams),
                BrowserEffect::TearSheet(dir) => out.extend(self.open_tear_sheet(dir)),
                BrowserEffect::Resume(id) => {
                    if self.busy() {
                        if let Some(b) = self.overlays.browser_mut() {
                            b.message = Some("a turn is running: cancel it (Esc in the chat) before switching sessions".into());
                        }
                    } else if self.session_id.as_deref() == Some(id.as_str()) {
                        self.overlays.close_browser();
                    } else {
                        self.overlays.close_browser();
                        out.extend(self.open_session(id));
                    }
                }
            }
        }
        out
    }

    fn cancel_run(&mut self) -> Vec<Effect> {
        if !self.busy() {
            return vec![];
        }
        self.phase = Phase::Cancelling {
            started_at: self.phase.started_at(),
        };
        // A question on screen goes with the run it belonged to.
        self.overlays.close_approval();
        // Queued messages come back to the input: nothing runs by surprise.
        if !self.queued.is_empty() {
            let mut parts: Vec<String> = self.queued.drain(..).collect();
            if !self.composer.is_empty() {
                parts.push(self.composer.text());
            }
            self.composer.set_text(&parts.join("\n\n"));
        }
        self.set_status(
            NoticeKind::Warning,
            "cancelling the run… (the chat is kept)",
        );
        vec![Effect::Cancel]
    }

    fn submit(&mut self) -> Vec<Effect> {
        let text = self.composer.text();
        if text.trim().is_empty() {
            return vec![];
        }
        if let Err(e) = self.check_size(text.len()) {
            // The text stays in the input: nothing the user wrote is dropped.
            self.refuse_input(format!("not sent (the text stays in the input): {e}"));
            return vec![];
        }
        self.composer.remember(&text);
        self.composer.clear();
        if let Some(rest) = text.strip_prefix("//") {
            return self.send_text(format!("/{rest}"));
        }
        if text.starts_with('/') {
            return self.slash(&text);
        }
        self.send_text(text)
    }

    /// The engine's size check on one message, naming the workspace.
    fn check_size(&self, bytes: usize) -> Result<(), MessageTooLarge> {
        check_message_size(bytes, self.options.max_message_bytes, &|| {
            if let Some(dir) = &self.options.workspace {
                return dir.display().to_string();
            }
            let sessions = &self.options.sessions_dir;
            match &self.session_id {
                Some(id) => sessions.join(id).join("workspace").display().to_string(),
                None => format!(
                    "{}/<session id>/workspace/ (a short first message creates the session; Ctrl-T shows its id)",
                    sessions.display()
                ),
            }
        })
    }

    fn refuse_input(&mut self, text: String) {
        self.chat.notice(NoticeKind::Error, text);
        self.chat.follow_bottom();
        self.set_status(NoticeKind::Error, "message too large: see the chat");
    }

    fn send_text(&mut self, text: String) -> Vec<Effect> {
        if !self.options.has_model {
            self.chat.push(CellKind::User { text });
            self.chat
                .notice(NoticeKind::Error, self.options.no_model_help.clone());
            self.chat.follow_bottom();
            return vec![];
        }
        if self.phase != Phase::Idle {
            self.queued.push_back(text);
            self.set_status(
                NoticeKind::Info,
                format!(
                    "queued ({}): it runs when the current turn ends",
                    self.queued.len()
                ),
            );
            return vec![];
        }
        self.dispatch(text)
    }

    /// `/export [md|html]`: the open session as Markdown (the default) or
    /// one HTML file, written under the session's folder.
    fn export_command(&mut self, arg: Option<&str>) -> Vec<Effect> {
        let html = match arg {
            None | Some("md") | Some("markdown") => false,
            Some("html") => true,
            Some(other) => {
                self.chat.notice(
                    NoticeKind::Error,
                    format!("/export {other}: use /export, /export md or /export html"),
                );
                return vec![];
            }
        };
        match &self.session_id {
            Some(id) => vec![Effect::Export {
                session: id.clone(),
                html,
            }],
            None => {
                self.chat.notice(
                    NoticeKind::Warning,
                    "nothing to export yet: the session is created with your first message",
                );
                vec![]
            }
        }
    }

    fn slash(&mut self, text: &str) -> Vec<Effect> {
        let mut parts = text.trim().splitn(2, char::is_whitespace);
        let cmd = parts.next().unwrap_or("");
        let arg = parts.next().map(str::trim).filter(|s| !s.is_empty());
        match cmd {
            "/help" | "/?" => {
                self.overlays.open_help();
                vec![]
            }
            "/quit" | "/exit" | "/q" => self.quit(),
            "/sessions" | "/transcripts" => self.open_browser(),
            "/monitors" | "/monitor" => {
                self.overlays.clear();
                self.overlays.push(Overlay::Monitors(Box::default()));
                vec![Effect::LoadMonitors]
            }
            "/memory" | "/memories" => self.open_memory(),
            "/factors" | "/factor" => self.open_factors(arg.map(PathBuf::from)),
            "/new" => {
                if self.busy() {
                    self.set_status(
                        NoticeKind::Warning,
                        "a turn is running: Esc cancels it first",
                    );
                    return vec![];
                }
                self.reset_session_view();
                self.session_id = None;
                self.phase = Phase::Opening;
                self.chat.notice(
                    NoticeKind::Info,
                    "new session: it is created on disk with your first message",
                );
                vec![Effect::NewSession]
            }
            "/swarm" => self.swarm_command(arg),
            "/plan" => self.plan_command(arg),
            "/go" => self.go_command(arg),
            "/approval" => self.approval_command(arg),
            "/export" => self.export_command(arg),
            "/compact" => vec![Effect::Compact {
                focus: arg.map(String::from),
            }],
            "/model" => match arg {
                None => {
                    let text = format!(
                        "model: {}. Switch with /model NAME (same provider), or restart with --provider/--model.",
                        self.options.model_label
                    );
                    self.chat.notice(NoticeKind::Info, text);
                    vec![]
                }
                Some(_) if !self.options.has_model || self.options.demo => {
                    self.chat.notice(
                        NoticeKind::Warning,
                        "no configured provider to switch models on (the demo model is fixed); see `vibedesk doctor`",
                    );
                    vec![]
                }
                Some(_) if self.busy() => {
                    self.set_status(
                        NoticeKind::Warning,
                        "a turn is running: switch models when it ends",
                    );
                    vec![]
                }
                Some(name) => vec![Effect::SwitchModel(name.to_string())],
            },
            other => {
                self.chat.notice(
                    NoticeKind::Error,
                    format!("unknown command {other}; /help lists them (start a message with // to send a literal '/')"),
                );
                vec![]
            }
        }
    }

    /// `/approval` shows the mode; `/approval MODE` changes it for the
    /// session (docs §2.14.2).
    fn approval_command(&mut self, arg: Option<&str>) -> Vec<Effect> {
        use crate::model::approval::ApprovalMode;
        let Some(name) = arg else {
            let mode = self.options.approval;
            let text = format!(
                "approval: {mode} ({}). Change with /approval ask | auto-edit | full-auto | read-only.",
                mode.describe()
            );
            self.chat.notice(NoticeKind::Info, text);
            return vec![];
        };
        match name.parse::<ApprovalMode>() {
            Ok(mode) => {
                self.options.approval = mode;
                self.chat.notice(
                    NoticeKind::Info,
                    format!("approval: {mode} from now on ({})", mode.describe()),
                );
                vec![Effect::SetApproval(mode)]
            }
            Err(e) => {
                self.chat.notice(NoticeKind::Error, e.to_string());
                vec![]
            }
        }
    }

    fn quit(&mut self) -> Vec<Effect> {
        self.should_quit = true;
        let mut out = Vec::new();
        if self.busy() {
            out.push(Effect::Cancel);
        }
        if self.swarm.as_ref().is_some_and(TeamBoard::is_active) {
            out.push(Effect::CancelSwarm);
        }
        out.push(Effect::Quit);
        out
    }

    fn reset_session_view(&mut self) {
        self.chat.clear();
        self.tools.clear();
        self.gauge.reset();
        self.usage = Usage::default();
        self.step = None;
        self.focus = Focus::Input;
    }

    /// The one dispatch rule: the top overlay gets `input` first; one that
    /// does not handle it passes it to the layer below; the chat screen gets
    /// what no overlay handled.
    fn route(&mut self, input: Input<'_>) -> Vec<Effect> {
        let mut out = Vec::new();
        let mut layer = self.overlays.len();
        while layer > 0 {
            layer -= 1;
            let Some(overlay) = self.overlays.get_mut(layer) else {
                break;
            };
            let outcome = overlay.handle(input);
            out.extend(self.overlay_effects(layer, outcome.effects));
            if outcome.handled == Handled::Yes {
                return out;
            }
            // The layer may have closed itself (or every layer went).
            layer = layer.min(self.overlays.len());
        }
        out.extend(self.on_chat_screen(input));
        out
    }

    /// What the chat screen does with an event no overlay handled.
    fn on_chat_screen(&mut self, input: Input<'_>) -> Vec<Effect> {
        match input {
            Input::Key {
                action: Some(a), ..
            } => self.chat_action(a),
            Input::Key { action: None, key } => {
                self.type_key(*key);
                vec![]
            }
            Input::Wheel { up } => {
                if up {
                    self.chat.scroll_up(WHEEL_LINES, &self.theme);
                } else {
                    self.chat.scroll_down(WHEEL_LINES, &self.theme);
                }
                vec![]
            }
            Input::Paste(text) => self.paste(text),
        }
    }

    /// A key bound to nothing types into the input.
    fn type_key(&mut self, key: KeyEvent) {
        if self.focus == Focus::Chat {
            // Typing returns to the input with that character.
            if typed_char(&key).is_some() {
                self.focus = Focus::Input;
                self.chat.selected = None;
                self.composer.textarea.input(key);
            }
        } else if key.code != KeyCode::Enter {
            // Enter variants do only what the keymap binds them to.
            self.composer.textarea.input(key);
        }
    }

    /// A paste goes to the input (what covers the chat screen closes: only a
    /// layer that passes pastes on can be there).
    fn paste(&mut self, text: &str) -> Vec<Effect> {
        self.overlays.clear();
        self.focus = Focus::Input;
        // A paste that would make the message too large is not inserted
        // (the input stays as it was; the text is still on the clipboard).
        if let Err(e) = self.check_size(self.composer.text().len() + text.len()) {
            self.refuse_input(format!("paste not inserted: {e}"));
            return vec![];
        }
        self.composer.paste(text);
        let lines = text.lines().count();
        if lines > 1 || text.len() > 200 {
            self.set_status(
                NoticeKind::Info,
                format!("pasted {lines} line(s), {} chars", text.chars().count()),
            );
        }
        vec![]
    }

    fn chat_action(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::Submit => self.submit(),
            Action::Newline => {
                self.composer.insert_newline();
                vec![]
            }
            Action::HelpFromInput => {
                self.overlays.open_help();
                vec![]
            }
            Action::HistoryPrev => {
                self.composer.history_prev();
                vec![]
            }
            Action::HistoryNext => {
                self.composer.history_next();
                vec![]
            }
            Action::FocusChat => {
                self.focus = Focus::Chat;
                if self.chat.selected.is_none() {
                    self.chat.select(false, &self.theme);
                }
                vec![]
            }
            Action::FocusInput => {
                self.focus = Focus::Input;
                self.chat.selected = None;
                vec![]
            }
            Action::SelectPrev => {
                self.chat.select(false, &self.theme);
                vec![]
            }
            Action::SelectNext => {
                self.chat.select(true, &self.theme);
                vec![]
            }
            Action::ToggleCell => {
                self.chat.toggle_selected();
                vec![]
            }
            Action::TearSheet => self.tear_sheet_from_chat(),
            Action::FactorView => self.factors_from_chat(),
            Action::CancelRun => {
                if self.busy() {
                    self.cancel_run()
                } else if self.swarm_cancellable() {
                    self.cancel_swarm()
                } else {
                    if self.focus == Focus::Chat {
                        self.focus = Focus::Input;
                        self.chat.selected = None;
                    }
                    vec![]
                }
            }
            Action::ScrollUp => {
                let p = self.chat.page();
                self.chat.scroll_up(p, &self.theme);
                vec![]
            }
            Action::ScrollDown => {
                let p = self.chat.page();
                self.chat.scroll_down(p, &self.theme);
                vec![]
            }
            Action::ScrollTop => {
                self.chat.scroll_top();
                vec![]
            }
            Action::FollowBottom => {
                self.chat.follow_bottom();
                vec![]
            }
            Action::ToggleReasoning => {
                let t = self.chat.toggles;
                self.chat.set_toggles(Toggles {
                    show_reasoning: !t.show_reasoning,
                    ..t
                });
                vec![]
            }
            Action::ToggleDetails => {
                let t = self.chat.toggles;
                self.chat.set_toggles(Toggles {
                    show_details: !t.show_details,
                    ..t
                });
                vec![]
            }
            Action::ToggleSidebar => {
                self.sidebar = !self.sidebar;
                vec![]
            }
            _ => self.global(action),
        }
    }

    pub(super) fn global(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::Quit => self.quit(),
            Action::Help => {
                self.overlays.toggle_help();
                vec![]
            }
            Action::Transcripts => self.open_browser(),
            Action::Redraw => vec![Effect::ClearTerminal],
            Action::SwarmView => {
                if self.overlays.has_swarm() {
                    self.overlays.close_swarm();
                } else if self.swarm.is_some() {
                    self.overlays.open_swarm();
                } else {
                    self.set_status(NoticeKind::Info, format!("no team run yet: {SWARM_USAGE}"));
                }
                vec![]
            }
            Action::Interrupt => {
                if self.busy() {
                    return self.cancel_run();
                }
                if self.swarm_cancellable() {
                    return self.cancel_swarm();
                }
                if self.overlays.is_empty() && !self.composer.is_empty() {
                    self.composer.clear();
                    self.set_status(NoticeKind::Info, "input cleared · Ctrl-C again to quit");
                    self.quit_armed = true;
                    return vec![];
                }
                if self.quit_armed {
                    return self.quit();
                }
                self.quit_armed = true;
                self.set_status(NoticeKind::Info, "press Ctrl-C again to quit");
                vec![]
            }
            _ => vec![],
        }
    }

    fn on_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        if key.kind == KeyEventKind::Release {
            return vec![];
        }
        self.status = None;
        let action = self.resolve(&key);
        if action != Some(Action::Interrupt) {
            self.quit_armed = false;
        }
        self.route(Input::Key { action, key: &key })
    }

    fn on_mouse(&mut self, m: MouseEvent) -> Vec<Effect> {
        let up = match m.kind {
            MouseEventKind::ScrollUp => true,
            MouseEventKind::ScrollDown => false,
            _ => return vec![],
        };
        self.route(Input::Wheel { up })
    }

    /// The worker finished a turn: the next queued message runs.
    fn turn_done(&mut self, error: Option<String>) -> Vec<Effect> {
        if self.cancelling() {
            // The "cancelling…" hint has served its purpose.
            self.status = None;
        }
        // A switch on its way (never sent while a turn runs) stays so.
        if self.phase != Phase::Opening {
            self.phase = Phase::Idle;
        }
        if let Some(e) = error {
            self.chat.notice(NoticeKind::Error, e);
        }
        if std::mem::take(&mut self.plan.drafting) && self.plan.ready.is_some() {
            self.chat.notice(
                NoticeKind::Info,
                "plan ready: /go runs it with every tool, the plan pinned in the context; a message revises it (still in plan mode); /plan off leaves plan mode",
            );
            self.chat.follow_bottom();
        }
        if self.phase != Phase::Idle {
            return vec![];
        }
        match self.queued.pop_front() {
            Some(next) => self.dispatch(next),
            None => vec![],
        }
    }

    /// The worker finished switching sessions: send what waited for it.
    fn session_ready(&mut self) -> Vec<Effect> {
        if self.phase == Phase::Opening {
            self.phase = Phase::Idle;
        }
        if self.phase != Phase::Idle {
            return vec![];
        }
        match self.queued.pop_front() {
            Some(next) => self.dispatch(next),
            None => vec![],
        }
    }

    fn on_agent(&mut self, event: AgentEvent, at: Instant) -> Vec<Effect> {
        if matches!(
            event,
            AgentEvent::SwarmStarted { .. }
                | AgentEvent::SwarmTaskStarted { .. }
                | AgentEvent::SwarmTaskRetry { .. }
                | AgentEvent::SwarmTaskFinished { .. }
                | AgentEvent::SwarmFinished { .. }
                | AgentEvent::SwarmWorker { .. }
        ) {
            return self.on_swarm_event(&event, at);
        }
        self.chat.apply(&event);
        self.gauge.apply(&event, at);
        match &event {
            AgentEvent::Tool(t) => self.tools.apply(t, at),
            AgentEvent::RunStarted {
                session_id, model, ..
            } => {
                self.phase = self.phase.with_start(Some(at));
                if self.session_id.as_deref() != Some(session_id.as_str()) {
                    self.session_id = Some(session_id.clone());
                }
                if !model.is_empty() && !self.options.model_label.contains(model.as_str()) {
                    self.options.model_label = model.clone();
                }
            }
            AgentEvent::IterationStarted {
                step,
                max_iterations,
                ..
            } => self.step = Some((*step, *max_iterations)),
            AgentEvent::LlmUsage {
                input_tokens,
                output_tokens,
                total_tokens,
                ..
            } => {
                self.usage.input_tokens += input_tokens;
                self.usage.output_tokens += output_tokens;
                self.usage.total_tokens += total_tokens;
            }
            AgentEvent::Answer { content, .. } if self.plan.drafting => {
                self.plan.ready = Some(content.clone());
            }
            AgentEvent::RunFinished { status, reason, .. } => {
                self.tools.finish_run(*status, reason.as_deref(), at);
                self.phase = match self.phase {
                    // Cancelled: the hint has served; the turn ends at TurnDone.
                    Phase::Cancelling { .. } if *status == RunStatus::Cancelled => {
                        Phase::Running { started_at: None }
                    }
                    other => other.with_start(None),
                };
            }
            _ => {}
        }
        self.loads()
    }

    /// Backtest cells the chat just made, as effects.
    fn loads(&mut self) -> Vec<Effect> {
        self.chat
            .take_loads()
            .into_iter()
            .map(Effect::LoadBacktest)
            .collect()
    }
}

/// The transition function: folds `msg` into `app` and returns the side
/// effects to perform. Never blocks, never does IO.
pub fn update(app: &mut App, msg: Msg) -> Vec<Effect> {
    app.dirty = true;
    match msg {
        Msg::Key(k) => app.on_key(k),
        Msg::Paste(text) => app.route(Input::Paste(&text)),
        Msg::Mouse(m) => app.on_mouse(m),
        // The next frame lays out for the new size.
        Msg::Resize(..) => vec![],
        Msg::Agent { event, at } => app.on_agent(event, at),
        Msg::TurnDone { error } => app.turn_done(error),
        Msg::SessionOpened { id: None, .. } => {
            // `/new` already cleared the view; messages typed since then stay.
            app.session_id = None;
            app.session_ready()
        }
        Msg::SessionOpened {
            id,
            history,
            skipped,
        } => app.session_opened(id, &history, skipped),
        Msg::SessionFailed(e) => {
            app.chat.notice(NoticeKind::Error, e);
            app.session_ready()
        }
        Msg::OpenSession(id) => app.open_session(id),
        Msg::Sessions(rows) => {
            if let Some(b) = app.overlays.browser_mut() {
                b.set_sessions(rows);
            }
            vec![]
        }
        Msg::Detail(r) => {
            if let Some(b) = app.overlays.browser_mut() {
                match r {
                    Ok(d) => b.set_detail(d),
                    Err(e) => b.error = Some(e.to_string()),
                }
            }
            vec![]
        }
        Msg::Transcript { name, result } => {
            if let Some(b) = app.overlays.browser_mut() {
                match result {
                    Ok(m) => b.set_transcript(&name, m),
                    Err(e) => b.error = Some(e.to_string()),
                }
            }
            vec![]
        }
        Msg::Memory(r) => {
            if let Some(b) = app.overlays.browser_mut() {
                b.set_memory(r);
            }
            vec![]
        }
        Msg::Monitors(rows) => {
            if let Some(v) = app.overlays.monitors_mut() {
                v.set_rows(rows);
            }
            vec![]
        }
        Msg::Teams(rows) => {
            if let Some(b) = app.overlays.browser_mut() {
                b.set_teams(rows);
            }
            vec![]
        }
        Msg::MemoryEntry { file, result } => {
            if let Some(b) = app.overlays.browser_mut() {
                b.set_memory_entry(&file, result);
            }
            vec![]
        }
        Msg::Notice { kind, text } => {
            // The browser covers the chat: its bottom line says it too.
            if let Some(b) = app.overlays.browser_mut() {
                b.message = Some(text.clone());
            }
            app.chat.notice(kind, text);
            vec![]
        }
        Msg::TearSheetLoaded { .. } | Msg::ReportWritten { .. } => app.tear_sheet_msg(msg),
        Msg::FactorsLoaded { id, result } => {
            if let Some(v) = app.overlays.factors_mut(id) {
                v.loaded(result.map(|b| *b));
            }
            vec![]
        }
        Msg::ApprovalAsked(view) => {
            app.overlays.push(Overlay::Approval(view));
            app.dirty = true;
            vec![]
        }
        Msg::ModelChanged { label } => {
            app.chat
                .notice(NoticeKind::Info, format!("model switched to {label}"));
            app.options.model_label = label;
            vec![]
        }
        Msg::BacktestLoaded { id, series, info } => {
            if app.chat.has_backtest(id) {
                app.chat.backtest_loaded(id, series, info);
            } else if let Some(b) = app.overlays.browser_mut() {
                b.backtest_loaded(id, series, info);
            } else if let Some(board) = &mut app.swarm {
                board.backtest_loaded(id, series, info);
            }
            vec![]
        }
        Msg::SwarmDone { error, at } => {
            if let Some(e) = &error {
                app.chat.notice(NoticeKind::Error, format!("team run: {e}"));
                // A team that never started (an unknown name, a missing
                // variable) gives the keyboard back to the input, the reason
                // in the chat: its view would take the next keys (`h` is
                // Back there).
                if app.swarm.as_ref().is_some_and(|b| b.run_id.is_none()) {
                    app.overlays.close_swarm();
                    app.chat.follow_bottom();
                }
            }
            if app
                .swarm
                .as_ref()
                .is_some_and(|b| b.phase == TeamPhase::Cancelling)
            {
                app.status = None;
            }
            if let Some(b) = &mut app.swarm {
                b.launcher_done(error, at);
            }
            vec![]
        }
    }
}

impl App {
    /// A stored session opened: its history in the chat and the composer,
    /// and what could not be read said.
    fn session_opened(
        &mut self,
        id: Option<String>,
        history: &[StoredMessage],
        skipped: usize,
    ) -> Vec<Effect> {
        self.reset_session_view();
        self.chat.load_history(history);
        self.composer.seed_history(
            history
                .iter()
                .filter(|m| m.message.role == Role::User)
                .map(|m| m.message.content.clone()),
        );
        if let Some(id) = &id {
            let n = history.len();
            self.chat.notice(
                NoticeKind::Info,
                format!("resumed session {id} ({n} message(s)); new messages continue it"),
            );
            if skipped > 0 {
                self.chat.notice(
                    NoticeKind::Warning,
                    format!("{skipped} unreadable line(s) of its message log were skipped"),
                );
            }
        }
        self.session_id = id;
        let mut out = self.loads();
        out.extend(self.session_ready());
        out
    }
}

/// The app's effect for what the Monitors view asked.
fn monitors_effect(e: super::monitors::MonitorsEffect) -> Effect {
    use super::monitors::MonitorsEffect as M;
    match e {
        M::Close | M::Reload => Effect::LoadMonitors,
        M::RunNow(name) => Effect::MonitorCommand { verb: "run", name },
        M::Pause(name) => Effect::MonitorCommand {
            verb: "pause",
            name,
        },
        M::Resume(name) => Effect::MonitorCommand {
            verb: "resume",
            name,
        },
    }
}
