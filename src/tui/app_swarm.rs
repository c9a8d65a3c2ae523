//! The app's side of a research team (docs §14.4): `/swarm`, the team
//! view's keys, and the team's events. Kept out of [`super::app`] so the
//! chat screen's transitions read on their own; [`super::app::update`]
//! still applies every change.

use tokio::time::Instant;

use super::app::{App, Effect};
use super::cells::NoticeKind;
use super::keymap::Action;
use super::swarm::{BoardSettings, SWARM_USAGE, TeamBoard, parse_swarm_args};
use crate::agent::events::{AgentEvent, RunStatus};

impl App {
    /// Settings a new team's worker panels start with.
    fn board_settings(&self) -> BoardSettings {
        BoardSettings {
            heartbeat: self.options.heartbeat,
            threshold: self.options.threshold,
            gates: self.options.gates,
        }
    }

    /// `/swarm NAME k=v …` starts a team run and shows its view; `/swarm`
    /// alone shows the view of the last one.
    pub(super) fn swarm_command(&mut self, arg: Option<&str>) -> Vec<Effect> {
        let Some(arg) = arg else {
            if self.swarm.is_some() {
                self.overlays.open_swarm();
            } else {
                self.chat.notice(
                    NoticeKind::Info,
                    format!("no team run yet; start one with {SWARM_USAGE}"),
                );
            }
            return vec![];
        };
        let (preset, vars) = match parse_swarm_args(arg) {
            Ok(p) => p,
            Err(e) => {
                self.chat.notice(
                    NoticeKind::Error,
                    format!("/swarm: {e}. Usage: {SWARM_USAGE}"),
                );
                self.chat.follow_bottom();
                return vec![];
            }
        };
        if self.swarm.as_ref().is_some_and(TeamBoard::is_active) {
            self.set_status(
                NoticeKind::Warning,
                "a team run is running: Ctrl-C in its view (Ctrl-G) cancels it first",
            );
            return vec![];
        }
        let settings = self.board_settings();
        self.swarm = Some(TeamBoard::new(preset.clone(), vars.clone(), settings));
        self.overlays.open_swarm();
        vec![Effect::StartSwarm { preset, vars }]
    }

    /// Cancels the team run if one can be.
    pub(super) fn cancel_swarm(&mut self) -> Vec<Effect> {
        match &mut self.swarm {
            Some(b) if b.cancellable() => {
                b.cancel();
                self.set_status(
                    NoticeKind::Warning,
                    "cancelling the team run… (each worker stops at its next checkpoint)",
                );
                vec![Effect::CancelSwarm]
            }
            _ => vec![],
        }
    }

    pub(super) fn swarm_cancellable(&self) -> bool {
        self.swarm.as_ref().is_some_and(TeamBoard::cancellable)
    }

    /// An action the team view (at `layer`) took.
    pub(super) fn swarm_action(&mut self, layer: usize, action: Action) -> Vec<Effect> {
        if action == Action::Interrupt {
            // Ctrl-C in the team view cancels the team; with none running
            // it does what it does anywhere.
            return if self.swarm_cancellable() {
                self.cancel_swarm()
            } else {
                self.global(action)
            };
        }
        let theme = &self.theme;
        let Some(b) = &mut self.swarm else {
            if action == Action::Back {
                self.overlays.remove(layer);
            }
            return vec![];
        };
        match action {
            // Back from a worker to the team; from the team, the view closes.
            Action::Back => {
                if !b.back() {
                    self.overlays.remove(layer);
                }
                return vec![];
            }
            Action::NextTab | Action::PrevTab => {
                b.next_worker(action == Action::NextTab);
                return vec![];
            }
            _ => {}
        }
        let worker = b
            .detail
            .and_then(|i| b.tasks.get_mut(i))
            .map(|t| &mut t.worker);
        match (action, worker) {
            (Action::Up, Some(w)) => w.chat.scroll_up(1, theme),
            (Action::Down, Some(w)) => w.chat.scroll_down(1, theme),
            (Action::PageUp, Some(w)) => w.chat.scroll_up(w.chat.page(), theme),
            (Action::PageDown, Some(w)) => w.chat.scroll_down(w.chat.page(), theme),
            (Action::Top, Some(w)) => w.chat.scroll_top(),
            (Action::Bottom, Some(w)) => w.chat.follow_bottom(),
            (Action::Up, None) => b.move_cursor(-1),
            (Action::Down, None) => b.move_cursor(1),
            (Action::PageUp, None) => b.move_cursor(-10),
            (Action::PageDown, None) => b.move_cursor(10),
            (Action::Top, None) => b.cursor_to(false),
            (Action::Bottom, None) => b.cursor_to(true),
            (Action::Open, None) => b.open(),
            _ => {}
        }
        vec![]
    }

    /// One of the team's events: folded into the board, and the run's
    /// start and end said in the chat too.
    pub(super) fn on_swarm_event(&mut self, event: &AgentEvent, at: Instant) -> Vec<Effect> {
        let settings = self.board_settings();
        // A run that starts while no run is active gets a fresh board (one
        // that `/swarm` made is still active and is kept).
        if matches!(event, AgentEvent::SwarmStarted { .. })
            && !self.swarm.as_ref().is_some_and(TeamBoard::is_active)
        {
            self.swarm = None;
        }
        let board = self
            .swarm
            .get_or_insert_with(|| TeamBoard::new(String::new(), Vec::new(), settings));
        board.apply(event, at);
        match event {
            AgentEvent::SwarmStarted {
                run_id,
                title,
                layers,
                tasks,
                ..
            } => {
                let key = self.keymap.hint(Action::SwarmView);
                self.chat.notice(
                    NoticeKind::Info,
                    format!(
                        "team {title} started ({run_id}): {} tasks in {} layers; {key} shows it",
                        tasks.len(),
                        layers.len()
                    ),
                );
            }
            AgentEvent::SwarmFinished {
                status,
                reason,
                seconds,
                report,
                ..
            } => {
                let kind = if *status == RunStatus::Success {
                    NoticeKind::Info
                } else {
                    NoticeKind::Warning
                };
                let why = reason
                    .as_deref()
                    .filter(|r| !r.is_empty())
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default();
                self.chat.notice(
                    kind,
                    format!(
                        "team run {}{why} in {:.0}s; report: {report}",
                        status.as_str(),
                        seconds
                    ),
                );
            }
            _ => {}
        }
        board_loads(self.swarm.as_mut())
    }
}

/// Backtest loads the team's workers asked for, as effects.
fn board_loads(board: Option<&mut TeamBoard>) -> Vec<Effect> {
    board
        .map(|b| {
            b.take_loads()
                .into_iter()
                .map(Effect::LoadBacktest)
                .collect()
        })
        .unwrap_or_default()
}
