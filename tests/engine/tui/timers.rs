//! Clocks under paused tokio time: elapsed clocks, heartbeat age, overdue
//! and silent marks, and the frame scheduler (no draw while idle).

use std::time::Duration;

use serde_json::json;
use tokio::time::{Instant, advance};
use vibedesk::agent::events::{BatchMode, RunStatus, ToolCallStatus, ToolEvent};
use vibedesk::tui::app::Msg;
use vibedesk::tui::frame::{FrameScheduler, MIN_FRAME_INTERVAL};
use vibedesk::tui::theme::Theme;
use vibedesk::tui::tool_panel::{CallState, ToolPanel};
use vibedesk::tui::wrap::line_text;

use super::*;

fn panel_text(p: &ToolPanel, now: Instant) -> String {
    p.lines(60, 20, &Theme::default(), now)
        .iter()
        .map(line_text)
        .collect::<Vec<_>>()
        .join("\n")
}

fn heartbeat(id: &str) -> ToolEvent {
    ToolEvent::ToolHeartbeat {
        call_id: id.into(),
        tool: "backtest".into(),
        elapsed_s: 0.0,
        since_progress_s: 0.0,
    }
}

fn announce(p: &mut ToolPanel, at: Instant, calls: &[(&str, &str)]) {
    let calls: Vec<(&str, &str, serde_json::Value)> =
        calls.iter().map(|(i, t)| (*i, *t, json!({}))).collect();
    let AgentEvent::Tool(b) = batch(1, 0, BatchMode::Parallel, &calls) else {
        unreachable!()
    };
    p.apply(&b, at);
}

fn start(p: &mut ToolPanel, at: Instant, id: &str, tool: &str, readonly: bool, timeout: f64) {
    let AgentEvent::Tool(e) = started(1, id, tool, readonly, Some(timeout)) else {
        unreachable!()
    };
    p.apply(&e, at);
}

#[tokio::test(start_paused = true)]
async fn elapsed_clocks_tick_and_read_59s_then_1m_00s() {
    let mut p = ToolPanel::new(Duration::from_secs(3));
    let t0 = Instant::now();
    announce(&mut p, t0, &[("c1", "backtest")]);
    assert!(panel_text(&p, t0).contains("queued"));
    start(&mut p, t0, "c1", "backtest", true, 1800.0);
    advance(Duration::from_millis(59_900)).await;
    assert!(
        panel_text(&p, Instant::now()).contains("59s"),
        "{}",
        panel_text(&p, Instant::now())
    );
    advance(Duration::from_millis(100)).await;
    let s = panel_text(&p, Instant::now());
    assert!(s.contains("1m 00s"), "{s}");
    assert!(
        s.contains("running 1m 00s"),
        "the batch clock runs too: {s}"
    );
    advance(Duration::from_secs(3669)).await;
    assert!(panel_text(&p, Instant::now()).contains("1h 02m 09s"));
}

#[tokio::test(start_paused = true)]
async fn heartbeat_age_resets_on_heartbeat_and_progress() {
    let mut p = ToolPanel::new(Duration::from_secs(3));
    let t0 = Instant::now();
    announce(&mut p, t0, &[("c1", "backtest")]);
    start(&mut p, t0, "c1", "backtest", true, 1800.0);
    advance(Duration::from_secs(3)).await;
    p.apply(&heartbeat("c1"), Instant::now());
    advance(Duration::from_secs(2)).await;
    let s = panel_text(&p, Instant::now());
    assert!(s.contains("5s ♥2s"), "{s}");
    p.apply(
        &ToolEvent::ToolProgress {
            call_id: "c1".into(),
            tool: "backtest".into(),
            stage: "bars".into(),
            current: Some(120.0),
            total: Some(500.0),
            message: "AAPL 2003".into(),
            elapsed_s: 5.0,
        },
        Instant::now(),
    );
    advance(Duration::from_secs(1)).await;
    let s = panel_text(&p, Instant::now());
    assert!(s.contains("6s ♥1s"), "{s}");
    assert!(s.contains("bars 120/500: AAPL 2003 (1s ago)"), "{s}");
    let c = &p.batches[0].calls[0];
    assert_eq!(
        c.since_sign_of_life(Instant::now()),
        Some(Duration::from_secs(1))
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_without_heartbeats_is_marked_silent() {
    let hb = Duration::from_secs(3);
    let mut p = ToolPanel::new(hb);
    let t0 = Instant::now();
    announce(&mut p, t0, &[("c1", "fetch")]);
    start(&mut p, t0, "c1", "fetch", true, 1800.0);
    advance(Duration::from_secs(7)).await;
    assert!(
        !p.batches[0].calls[0].silent(Instant::now(), hb),
        "two intervals and a second of grace"
    );
    assert!(!panel_text(&p, Instant::now()).contains("silent"));
    advance(Duration::from_secs(1)).await;
    assert!(p.batches[0].calls[0].silent(Instant::now(), hb));
    let s = panel_text(&p, Instant::now());
    assert!(
        s.contains("8s ♥8s ⚠ silent"),
        "a frozen heart under a rising clock: {s}"
    );
    p.apply(&heartbeat("c1"), Instant::now());
    assert!(!panel_text(&p, Instant::now()).contains("silent"));
}

#[tokio::test(start_paused = true)]
async fn overdue_read_calls_and_write_calls_past_their_deadline_are_marked() {
    let mut p = ToolPanel::new(Duration::from_secs(3));
    let t0 = Instant::now();
    announce(&mut p, t0, &[("r", "read_file"), ("w", "write_file")]);
    start(&mut p, t0, "r", "read_file", true, 30.0);
    start(&mut p, t0, "w", "write_file", false, 30.0);
    advance(Duration::from_secs(30)).await;
    let now = Instant::now();
    assert!(
        !p.batches[0].calls[0].overdue(now),
        "at the deadline is not past it"
    );
    advance(Duration::from_secs(1)).await;
    let now = Instant::now();
    assert!(p.batches[0].calls[0].overdue(now));
    assert!(
        panel_text(&p, now).contains("31s ♥31s ⚠ overdue"),
        "{}",
        panel_text(&p, now)
    );
    // The scheduler warns about the write tool: it keeps running.
    p.apply(
        &ToolEvent::ToolTimeoutWarning {
            call_id: "w".into(),
            tool: "write_file".into(),
            elapsed_s: 31.0,
            timeout_s: 30.0,
        },
        now,
    );
    assert_eq!(p.batches[0].calls[1].state, CallState::TimeoutWarning);
    assert_eq!(p.batches[0].calls[1].state.label(), "timeout-warning");
    let s = panel_text(&p, now);
    assert!(s.contains("⚠ past deadline"), "{s}");
    // The read call is then cancelled by its deadline.
    let AgentEvent::Tool(done) = finished(
        1,
        "r",
        "read_file",
        ToolCallStatus::Timeout,
        30_000,
        "deadline of 30s passed",
    ) else {
        unreachable!()
    };
    p.apply(&done, now);
    let s = panel_text(&p, now);
    assert!(s.contains("timed out 30s"), "{s}");
    assert!(s.contains("deadline of 30s passed"), "{s}");
    // Cancelling the run folds the still-running write call into `cancelled`.
    advance(Duration::from_secs(4)).await;
    p.finish_run(RunStatus::Cancelled, None, Instant::now());
    let w = &p.batches[0].calls[1];
    assert_eq!(w.state, CallState::Finished(ToolCallStatus::Cancelled));
    assert_eq!(
        w.elapsed(Instant::now() + Duration::from_secs(99)),
        Duration::from_secs(35),
        "a finished clock stops"
    );
    assert!(panel_text(&p, Instant::now()).contains("cancelled 35s"));
}

#[tokio::test(start_paused = true)]
async fn finished_batches_fold_and_the_current_one_stays_expanded() {
    let mut p = ToolPanel::new(Duration::from_secs(3));
    let t0 = Instant::now();
    for (b, (id, tool)) in [("a", "list_dir"), ("b", "read_file"), ("c", "write_file")]
        .iter()
        .enumerate()
    {
        let AgentEvent::Tool(e) = batch(
            1,
            b as u32,
            BatchMode::Serial,
            &[(id, tool, json!({"path": "x.md"}))],
        ) else {
            unreachable!()
        };
        p.apply(&e, t0);
        start(&mut p, t0, id, tool, true, 30.0);
        let AgentEvent::Tool(f) = finished(1, id, tool, ToolCallStatus::Ok, 5, "ok") else {
            unreachable!()
        };
        p.apply(&f, t0);
        p.apply(
            &ToolEvent::ToolBatchFinished {
                iter: 1,
                batch: b as u32,
                elapsed_ms: 6,
            },
            t0,
        );
    }
    let lines: Vec<String> = p
        .lines(60, 20, &Theme::default(), t0)
        .iter()
        .map(line_text)
        .collect();
    assert_eq!(lines[0], "batch 2 · serial · 1 call · finished in 6ms");
    assert!(
        lines[1].starts_with("✓ write_file x.md") && lines[1].ends_with("done 5ms"),
        "{lines:?}"
    );
    assert_eq!(lines[2], "✓ #1 serial · read_file · 1 ok · 6ms");
    assert_eq!(lines[3], "✓ #0 serial · list_dir · 1 ok · 6ms");
    assert_eq!(lines.len(), 4);
    assert!(!p.is_live());
    assert_eq!(p.next_tick(t0), None, "nothing running: no clock to redraw");
}

#[tokio::test(start_paused = true)]
async fn clocks_ask_for_exactly_one_frame_per_second_and_idle_asks_for_none() {
    let mut a = app();
    let t0 = Instant::now();
    assert_eq!(a.next_deadline(t0), None, "an idle app never wakes up");
    type_text(&mut a, "go");
    vibedesk::tui::update(&mut a, key(crossterm::event::KeyCode::Enter));
    assert!(a.busy());
    feed(&mut a, &[run_started()], t0);
    advance(Duration::from_millis(300)).await;
    // The run clock in the status bar changes at the next whole second.
    assert_eq!(
        a.next_deadline(Instant::now()),
        Some(t0 + Duration::from_secs(1))
    );
    let call_start = Instant::now();
    feed(
        &mut a,
        &[batch(
            1,
            0,
            BatchMode::Serial,
            &[("c", "backtest", json!({}))],
        )],
        call_start,
    );
    feed(
        &mut a,
        &[started(1, "c", "backtest", true, Some(60.0))],
        call_start,
    );
    advance(Duration::from_millis(800)).await;
    // Past the run clock's second; the call's clock ticks next.
    assert_eq!(
        a.next_deadline(Instant::now()),
        Some(call_start + Duration::from_secs(1))
    );
    assert_eq!(
        a.tools.next_tick(Instant::now()),
        Some(call_start + Duration::from_secs(1))
    );
    feed(
        &mut a,
        &[finished(1, "c", "backtest", ToolCallStatus::Ok, 800, "")],
        Instant::now(),
    );
    feed(
        &mut a,
        &[tool(ToolEvent::ToolBatchFinished {
            iter: 1,
            batch: 0,
            elapsed_ms: 800,
        })],
        Instant::now(),
    );
    feed(
        &mut a,
        &[run_finished(RunStatus::Success, "final answer delivered")],
        Instant::now(),
    );
    vibedesk::tui::update(&mut a, Msg::TurnDone { error: None });
    assert_eq!(a.next_deadline(Instant::now()), None, "idle again");
}

#[tokio::test(start_paused = true)]
async fn the_frame_scheduler_coalesces_and_caps_at_60_fps() {
    let mut f = FrameScheduler::default();
    let t0 = Instant::now();
    assert_eq!(f.deadline(), None);
    f.request(t0);
    f.request(t0 + Duration::from_millis(5));
    assert_eq!(
        f.deadline(),
        Some(t0),
        "requests collapse into the earliest"
    );
    f.drew(t0);
    assert_eq!(f.deadline(), None, "no frame until something asks");
    // A burst right after a frame waits for the interval.
    advance(Duration::from_millis(2)).await;
    for _ in 0..100 {
        f.request(Instant::now());
    }
    assert_eq!(f.deadline(), Some(t0 + MIN_FRAME_INTERVAL));
    // A request long after the last frame is served at once.
    f.drew(t0 + MIN_FRAME_INTERVAL);
    advance(Duration::from_secs(1)).await;
    f.request(Instant::now());
    assert_eq!(f.deadline(), Some(Instant::now()));
    // A timer request in the future stays in the future.
    f.drew(Instant::now());
    let later = Instant::now() + Duration::from_millis(700);
    f.request(later);
    assert_eq!(f.deadline(), Some(later));
}

#[tokio::test(start_paused = true)]
async fn the_gauge_shows_how_long_a_layer_has_run() {
    let mut a = app();
    let t0 = Instant::now();
    feed(&mut a, &[watermark(1, 41_000)], t0);
    feed(
        &mut a,
        &compaction(1, "auto_compact", 41_000, 9_000, 30)[..1],
        t0,
    );
    assert_eq!(a.next_deadline(t0), Some(t0 + Duration::from_secs(1)));
    advance(Duration::from_secs(12)).await;
    let s = screen(&mut a, 160, 48, Instant::now());
    assert!(
        s.contains("⟳ L3 auto_compact running 12s · from 41k"),
        "{s}"
    );
}
