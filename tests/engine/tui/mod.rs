//! The workstation without a terminal: `update` driven by message
//! sequences, timers under paused tokio time, insta snapshots of every panel
//! on ratatui's `TestBackend`, and the real binary in tmux.

mod app_in_tmux;
mod backtest;
mod factors;
mod memory;
mod overlays;
mod payoff;
mod snapshots;
mod swarm;
mod sweep;
mod tearsheet;
mod timers;
mod update;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;
use tokio::time::Instant;
use vibedesk::agent::events::{
    AgentEvent, BatchCall, BatchMode, RunStatus, ToolCallStatus, ToolEvent,
};
use vibedesk::model::Usage;
use vibedesk::tui::app::{App, AppOptions, Effect, Msg, update};
use vibedesk::tui::keymap::Keymap;
use vibedesk::tui::theme::Theme;
use vibedesk::tui::view;

pub fn app_with(options: AppOptions) -> App {
    App::new(Theme::default(), Keymap::default(), options)
}

pub fn app() -> App {
    app_with(AppOptions::default())
}

pub fn key(code: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

pub fn ctrl(c: char) -> Msg {
    Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}

pub fn alt(code: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(code, KeyModifiers::ALT))
}

/// Types `text` key by key; returns every effect produced.
pub fn type_text(app: &mut App, text: &str) -> Vec<Effect> {
    let mut out = Vec::new();
    for c in text.chars() {
        out.extend(update(app, key(KeyCode::Char(c))));
    }
    out
}

/// Feeds engine events, all arriving at `at`. The only effect an engine
/// event may cause is reading a finished backtest's series; those are
/// returned.
pub fn feed(app: &mut App, events: &[AgentEvent], at: Instant) -> Vec<Effect> {
    let mut out = Vec::new();
    for e in events {
        let fx = update(
            app,
            Msg::Agent {
                event: e.clone(),
                at,
            },
        );
        assert!(
            fx.iter().all(|f| matches!(f, Effect::LoadBacktest(_))),
            "engine events cause no effects but backtest loads: {fx:?}"
        );
        out.extend(fx);
    }
    out
}

/// The whole screen as text.
pub fn screen(app: &mut App, w: u16, h: u16, now: Instant) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| view::draw(f, app, now)).unwrap();
    term.backend().to_string()
}

pub fn tool(e: ToolEvent) -> AgentEvent {
    AgentEvent::Tool(e)
}

pub fn batch(
    iter: u64,
    batch: u32,
    mode: BatchMode,
    calls: &[(&str, &str, serde_json::Value)],
) -> AgentEvent {
    tool(ToolEvent::ToolBatchStarted {
        iter,
        batch,
        mode,
        calls: calls
            .iter()
            .map(|(id, t, a)| BatchCall {
                call_id: id.to_string(),
                tool: t.to_string(),
                args: a.clone(),
            })
            .collect(),
    })
}

pub fn started(iter: u64, id: &str, t: &str, readonly: bool, timeout_s: Option<f64>) -> AgentEvent {
    tool(ToolEvent::ToolCallStarted {
        iter,
        call_id: id.into(),
        tool: t.into(),
        args: json!({}),
        readonly,
        timeout_s,
    })
}

pub fn finished(
    iter: u64,
    id: &str,
    t: &str,
    status: ToolCallStatus,
    ms: u64,
    preview: &str,
) -> AgentEvent {
    tool(ToolEvent::ToolCallFinished {
        iter,
        call_id: id.into(),
        tool: t.into(),
        status,
        elapsed_ms: ms,
        preview: preview.into(),
        error_code: None,
        output: None,
    })
}

pub fn watermark(iter: u64, tokens: u64) -> AgentEvent {
    AgentEvent::Watermark {
        iter,
        tokens,
        threshold: 40_000,
        gates: [20_000, 28_000, 40_000],
        estimator: "chars4".into(),
        messages: 4,
    }
}

pub fn compaction(
    iter: u64,
    layer: &str,
    before: u64,
    after: u64,
    touched: usize,
) -> [AgentEvent; 2] {
    [
        AgentEvent::CompactionStarted {
            iter,
            layer: layer.into(),
            trigger: "threshold".into(),
            tokens_before: before,
        },
        AgentEvent::CompactionFinished {
            iter,
            layer: layer.into(),
            trigger: "threshold".into(),
            tokens_before: before,
            tokens_after: after,
            messages_touched: touched,
            archive_path: Some("transcripts/archive.jsonl".into()),
            ineffective: false,
            degraded: false,
        },
    ]
}

pub fn run_started() -> AgentEvent {
    AgentEvent::RunStarted {
        run_id: "20260101_000000_abcdef".into(),
        session_id: "5bc29f7ddcd5".into(),
        run_dir: "/tmp/runs/x".into(),
        provider: "scripted".into(),
        model: "scripted-demo".into(),
        max_iterations: 50,
    }
}

pub fn run_finished(status: RunStatus, reason: &str) -> AgentEvent {
    AgentEvent::RunFinished {
        run_id: "20260101_000000_abcdef".into(),
        status,
        reason: Some(reason.into()),
        iterations: 3,
        degraded: false,
        run_dir: "/tmp/runs/x".into(),
        usage: Usage {
            input_tokens: 5795,
            output_tokens: 421,
            total_tokens: 6216,
        },
        unverified_numbers: Vec::new(),
    }
}

pub fn text(iter: u64, delta: &str) -> AgentEvent {
    AgentEvent::TextDelta {
        iter,
        delta: delta.into(),
    }
}

/// The demo's final answer (markdown with a heading, bold text and a table).
pub const ANSWER: &str = "## Done\n\nI wrote **research-notes.md** with a checklist:\n\n| Step | What |\n|---|---|\n| 1 | Load daily prices |\n| 2 | Confirm the 2000-09-29 drop |\n\n- returns\n- moving averages\n\n```python\nprint('ok')\n```\n";
