//! The team view (issue 18 item 6): `/swarm` parsed into an effect, the
//! team's events folded into each task's state and its worker's own chat,
//! tool panel and gauge, Enter/Esc/Tab navigation, cancelling, the
//! runtime's launcher, and snapshots at 80×24 and 160×48.

use std::sync::Arc;
use std::time::Duration;

use crossterm::event::KeyCode;
use futures_util::future::BoxFuture;
use serde_json::json;
use tokio::sync::mpsc::unbounded_channel;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use vibedesk::agent::EventSink;
use vibedesk::agent::events::{
    AgentEvent, BatchMode, RunStatus, SwarmTaskInfo, TaskState, ToolCallStatus,
};
use vibedesk::tui::App;
use vibedesk::tui::app::{Effect, Msg, update};
use vibedesk::tui::cells::{CellKind, NoticeKind};
use vibedesk::tui::runtime::{SwarmLaunchError, SwarmLauncher, spawn_team};
use vibedesk::tui::swarm::TeamPhase;

use super::*;

fn info(id: &str, role: &str, deps: &[&str]) -> SwarmTaskInfo {
    SwarmTaskInfo {
        id: id.into(),
        agent: role.replace(' ', "_"),
        role: role.into(),
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
    }
}

/// `swarm_started` for a team of `tasks` in `layers`.
fn started_with(layers: &[&[&str]], tasks: Vec<SwarmTaskInfo>) -> AgentEvent {
    AgentEvent::SwarmStarted {
        run_id: "swarm-20261204-173000-1a2b3c4d".into(),
        preset: "investment_committee".into(),
        title: "Investment committee".into(),
        run_dir: "/data/swarm/swarm-20261204-173000-1a2b3c4d".into(),
        layers: layers
            .iter()
            .map(|l| l.iter().map(|s| s.to_string()).collect())
            .collect(),
        tasks,
    }
}

/// The investment committee: bull and bear in parallel, the risk officer
/// reads both, the portfolio manager decides.
fn committee() -> AgentEvent {
    started_with(
        &[&["task-bull", "task-bear"], &["task-risk"], &["task-pm"]],
        vec![
            info("task-bull", "bull researcher", &[]),
            info("task-bear", "bear researcher", &[]),
            info("task-risk", "risk officer", &["task-bull", "task-bear"]),
            info("task-pm", "portfolio manager", &["task-risk"]),
        ],
    )
}

fn task_started(task: &str, attempt: u32) -> AgentEvent {
    AgentEvent::SwarmTaskStarted {
        task: task.into(),
        agent: task.trim_start_matches("task-").into(),
        attempt,
        run_dir: format!("/data/runs/{task}-{attempt}"),
    }
}

fn task_finished(task: &str, status: TaskState, reason: Option<&str>) -> AgentEvent {
    AgentEvent::SwarmTaskFinished {
        task: task.into(),
        status,
        reason: reason.map(String::from),
        seconds: 12.0,
        tokens: 3400,
    }
}

/// One of a worker's own events, wrapped as the engine forwards it.
fn w(task: &str, event: AgentEvent) -> AgentEvent {
    AgentEvent::SwarmWorker {
        task: task.into(),
        event: Box::new(event),
    }
}

fn iteration(step: u32) -> AgentEvent {
    AgentEvent::IterationStarted {
        iter: step as u64,
        step,
        max_iterations: 25,
    }
}

const BEAR_ANSWER: &str = "## Bear case\n\nAAPL trades at **31x** earnings; the 50-day average (182.4) is below the 200-day (188.9).";

/// `/swarm investment_committee target=AAPL`, then a team mid-run: the
/// bull researcher running `get_market_data`, the bear done, the risk
/// officer and the portfolio manager waiting.
fn mid_team(t0: Instant) -> App {
    let mut a = app();
    type_text(&mut a, "/swarm investment_committee target=AAPL");
    let fx = update(&mut a, key(KeyCode::Enter));
    assert!(
        matches!(fx.as_slice(), [Effect::StartSwarm { .. }]),
        "{fx:?}"
    );
    feed(
        &mut a,
        &[
            committee(),
            task_started("task-bull", 1),
            task_started("task-bear", 1),
            w("task-bull", run_started()),
            w("task-bull", iteration(1)),
            w("task-bull", watermark(1, 6_200)),
            w(
                "task-bull",
                text(1, "Loading AAPL prices for the bull case.\n"),
            ),
            w("task-bear", run_started()),
            w("task-bear", iteration(1)),
            w("task-bear", watermark(1, 5_100)),
        ],
        t0,
    );
    feed(
        &mut a,
        &[
            w(
                "task-bull",
                batch(
                    1,
                    0,
                    BatchMode::Parallel,
                    &[("c1", "get_market_data", json!({"symbol": "AAPL"}))],
                ),
            ),
            w(
                "task-bull",
                started(1, "c1", "get_market_data", true, Some(60.0)),
            ),
        ],
        t0 + Duration::from_secs(1),
    );
    feed(
        &mut a,
        &[
            w("task-bear", text(1, BEAR_ANSWER)),
            w(
                "task-bear",
                AgentEvent::Answer {
                    iter: 1,
                    content: BEAR_ANSWER.into(),
                    degraded: false,
                },
            ),
            w(
                "task-bear",
                run_finished(RunStatus::Success, "final answer delivered"),
            ),
            task_finished("task-bear", TaskState::Success, None),
        ],
        t0 + Duration::from_secs(12),
    );
    feed(
        &mut a,
        &[w(
            "task-bull",
            tool(vibedesk::agent::events::ToolEvent::ToolHeartbeat {
                call_id: "c1".into(),
                tool: "get_market_data".into(),
                elapsed_s: 19.0,
                since_progress_s: 19.0,
            }),
        )],
        t0 + Duration::from_secs(20),
    );
    a
}

fn notices(a: &App, kind: NoticeKind) -> Vec<String> {
    a.chat
        .cells
        .iter()
        .filter_map(|c| match c.kind() {
            CellKind::Notice { kind: k, text } if *k == kind => Some(text.clone()),
            _ => None,
        })
        .collect()
}

fn state_of(a: &App, id: &str) -> TaskState {
    a.swarm.as_ref().unwrap().task(id).unwrap().state
}

#[test]
fn swarm_command_starts_a_team_and_opens_its_view() {
    let mut a = app();
    type_text(
        &mut a,
        "/swarm investment_committee target=AAPL thesis=\"long AAPL\"",
    );
    let fx = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        fx,
        vec![Effect::StartSwarm {
            preset: "investment_committee".into(),
            vars: vec![
                ("target".into(), "AAPL".into()),
                ("thesis".into(), "long AAPL".into()),
            ],
        }]
    );
    assert!(!a.busy(), "a team run is not a chat turn");
    let board = a.swarm.as_ref().unwrap();
    assert_eq!(board.phase, TeamPhase::Starting);
    let s = screen(&mut a, 80, 24, Instant::now());
    assert!(s.contains("Team · investment_committee"), "{s}");
    assert!(s.contains("target=AAPL thesis=long AAPL"), "{s}");
}

#[test]
fn bad_swarm_syntax_is_refused_with_a_clear_notice() {
    let cases = [
        (
            "/swarm investment_committee AAPL",
            "`AAPL` is not key=value",
        ),
        ("/swarm ../teams", "`../teams` is not a team name"),
        ("/swarm desk a=1 a=2", "the variable `a` is given twice"),
        ("/swarm desk thesis=\"long", "a quote is not closed"),
    ];
    for (typed, reason) in cases {
        let mut a = app();
        type_text(&mut a, typed);
        assert!(update(&mut a, key(KeyCode::Enter)).is_empty(), "{typed}");
        assert!(a.swarm.is_none(), "{typed}: nothing starts");
        let errors = notices(&a, NoticeKind::Error);
        let last = errors.last().unwrap();
        assert!(last.contains(reason), "{typed}: {last}");
        assert!(last.contains("Usage: /swarm NAME [key=value …]"), "{last}");
    }
    // `/swarm` alone with no run says how to start one.
    let mut a = app();
    type_text(&mut a, "/swarm");
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    assert!(
        notices(&a, NoticeKind::Info)
            .iter()
            .any(|n| n.contains("no team run yet")),
    );
}

#[test]
fn team_events_fold_into_task_states_and_each_workers_own_panels() {
    let t0 = Instant::now();
    let mut a = mid_team(t0);
    let now = t0 + Duration::from_secs(22);
    let board = a.swarm.as_ref().unwrap();
    assert_eq!(board.phase, TeamPhase::Running);
    assert_eq!(board.layers.len(), 3);
    assert_eq!(board.progress(), (1, 4));

    let bull = board.task("task-bull").unwrap();
    assert_eq!(bull.state, TaskState::Running);
    assert_eq!(bull.current_tool(), Some(("get_market_data", 0)));
    assert_eq!(bull.step, Some((1, 25)));
    assert_eq!(bull.elapsed(now), Some(Duration::from_secs(22)));
    assert_eq!(
        bull.heartbeat_age(now),
        Some(Duration::from_secs(2)),
        "the age counts from the worker's last event"
    );
    assert_eq!(bull.worker.gauge.tokens, Some(6_200));
    assert_eq!(bull.worker.tools.batches.len(), 1);
    assert!(bull.worker.chat.cells.iter().any(|c| matches!(
        c.kind(),
        CellKind::Assistant { text, .. } if text.contains("bull case")
    )));

    let bear = board.task("task-bear").unwrap();
    assert_eq!(bear.state, TaskState::Success);
    assert_eq!(bear.tokens, 3400);
    assert_eq!(bear.elapsed(now), Some(Duration::from_secs(12)));
    assert_eq!(bear.heartbeat_age(now), None);
    assert_eq!(bear.current_tool(), None);
    assert_eq!(bear.worker.gauge.tokens, Some(5_100));
    assert_eq!(state_of(&a, "task-risk"), TaskState::Pending);

    // The main chat, gauge and tool panel belong to the session: the
    // workers' events never reach them.
    assert!(
        !a.chat
            .cells
            .iter()
            .any(|c| matches!(c.kind(), CellKind::Assistant { .. } | CellKind::Tool(_)))
    );
    assert_eq!(a.gauge.tokens, None);
    assert!(a.tools.batches.is_empty());
    assert!(
        notices(&a, NoticeKind::Info)
            .iter()
            .any(|n| n.contains("team Investment committee started")
                && n.contains("4 tasks in 3 layers")),
    );
    // The view's clocks tick while the team runs.
    let next = a.next_deadline(now).unwrap();
    assert!(next <= now + Duration::from_secs(1));

    let s = screen(&mut a, 160, 48, now);
    assert!(s.contains("● running 22s · 1/4 done"), "{s}");
    assert!(s.contains("⚙ get_market_data"), "{s}");
    assert!(s.contains("♥2s"), "{s}");
    assert!(s.contains("needs task-bull, task-bear"), "{s}");
    assert!(s.contains("◆ team 1/4 · 22s"), "the status line: {s}");
}

#[test]
fn retries_failures_and_the_end_of_the_run() {
    let t0 = Instant::now();
    let mut a = mid_team(t0);
    let t1 = t0 + Duration::from_secs(30);
    feed(
        &mut a,
        &[AgentEvent::SwarmTaskRetry {
            task: "task-bull".into(),
            attempt: 1,
            reason: "timed out after 300s".into(),
        }],
        t1,
    );
    assert_eq!(state_of(&a, "task-bull"), TaskState::Retrying);
    feed(&mut a, &[task_started("task-bull", 2)], t1);
    let bull = a.swarm.as_ref().unwrap().task("task-bull").unwrap();
    assert_eq!((bull.state, bull.attempt), (TaskState::Running, 2));
    assert_eq!(bull.worker.gauge.tokens, None, "a fresh loop's context");
    assert!(bull.worker.chat.cells.iter().any(|c| matches!(
        c.kind(),
        CellKind::Notice { text, .. } if text.contains("attempt 2")
    )));
    feed(
        &mut a,
        &[
            task_finished("task-bull", TaskState::TimedOut, Some("timed out")),
            task_finished(
                "task-risk",
                TaskState::Failed,
                Some("upstream task task-bull timed_out"),
            ),
            task_finished(
                "task-pm",
                TaskState::Failed,
                Some("upstream task task-risk failed"),
            ),
            AgentEvent::SwarmFinished {
                run_id: "swarm-20261204-173000-1a2b3c4d".into(),
                status: RunStatus::Failed,
                reason: Some("3 of 4 tasks failed".into()),
                seconds: 61.0,
                report: "/data/swarm/swarm-20261204-173000-1a2b3c4d/report.md".into(),
            },
        ],
        t1 + Duration::from_secs(31),
    );
    assert_eq!(state_of(&a, "task-bull"), TaskState::TimedOut);
    assert_eq!(state_of(&a, "task-risk"), TaskState::Failed);
    let s = screen(&mut a, 160, 48, t1 + Duration::from_secs(40));
    assert!(s.contains("upstream task task-bull timed_out"), "{s}");
    assert!(s.contains("failed in 1m 01s · 4/4 done"), "{s}");
    assert!(s.contains("report: /data/swarm/"), "{s}");
    assert!(
        notices(&a, NoticeKind::Warning)
            .iter()
            .any(|n| n.contains("team run failed (3 of 4 tasks failed)")),
    );
    update(
        &mut a,
        Msg::SwarmDone {
            error: None,
            at: t1,
        },
    );
    let board = a.swarm.as_ref().unwrap();
    assert!(matches!(
        board.phase,
        TeamPhase::Finished {
            status: RunStatus::Failed,
            ..
        }
    ));
    assert!(!board.is_active());
    assert_eq!(a.next_deadline(t1), None, "nothing on screen moves");
    // The next team may start now (from the chat screen's input).
    update(&mut a, key(KeyCode::Esc));
    type_text(&mut a, "/swarm risk_committee");
    assert!(matches!(
        update(&mut a, key(KeyCode::Enter)).as_slice(),
        [Effect::StartSwarm { preset, .. }] if preset == "risk_committee"
    ));
}

#[test]
fn enter_opens_a_workers_panels_tab_walks_and_esc_goes_back() {
    let t0 = Instant::now();
    let mut a = mid_team(t0);
    let now = t0 + Duration::from_secs(22);
    let idx = |a: &App, id: &str| {
        a.swarm
            .as_ref()
            .unwrap()
            .tasks
            .iter()
            .position(|t| t.id == id)
    };
    update(&mut a, key(KeyCode::Down));
    update(&mut a, key(KeyCode::Enter));
    assert_eq!(a.swarm.as_ref().unwrap().detail, idx(&a, "task-bear"));
    let s = screen(&mut a, 160, 48, now);
    assert!(
        s.contains("task-bear · bear researcher · success 12s"),
        "{s}"
    );
    assert!(s.contains("Bear case"), "the worker's own chat: {s}");
    assert!(s.contains("5.1k / 40k"), "the worker's own gauge: {s}");

    update(&mut a, key(KeyCode::Tab));
    assert_eq!(a.swarm.as_ref().unwrap().detail, idx(&a, "task-risk"));
    update(
        &mut a,
        Msg::Key(crossterm::event::KeyEvent::new(
            KeyCode::BackTab,
            crossterm::event::KeyModifiers::SHIFT,
        )),
    );
    update(
        &mut a,
        Msg::Key(crossterm::event::KeyEvent::new(
            KeyCode::BackTab,
            crossterm::event::KeyModifiers::SHIFT,
        )),
    );
    assert_eq!(a.swarm.as_ref().unwrap().detail, idx(&a, "task-bull"));
    let s = screen(&mut a, 160, 48, now);
    assert!(
        s.contains("get_market_data"),
        "the worker's tool panel: {s}"
    );

    update(&mut a, key(KeyCode::Esc));
    assert_eq!(a.swarm.as_ref().unwrap().detail, None);
    assert!(screen(&mut a, 80, 24, now).contains("Team · Investment committee"));
    update(&mut a, key(KeyCode::Esc));
    let s = screen(&mut a, 80, 24, now);
    assert!(s.contains("Message"), "back on the chat screen: {s}");
    assert!(
        s.contains("Ctrl-G team"),
        "the footer says how to come back: {s}"
    );
    assert!(update(&mut a, ctrl('g')).is_empty());
    assert!(screen(&mut a, 80, 24, now).contains("Team · Investment committee"));
    update(&mut a, ctrl('g'));
    assert!(!screen(&mut a, 80, 24, now).contains("Team · Investment committee"));
}

#[test]
fn ctrl_c_in_the_view_and_esc_on_the_chat_cancel_the_team() {
    let t0 = Instant::now();
    let mut a = mid_team(t0);
    assert_eq!(update(&mut a, ctrl('c')), vec![Effect::CancelSwarm]);
    assert_eq!(a.swarm.as_ref().unwrap().phase, TeamPhase::Cancelling);
    let s = screen(&mut a, 160, 48, t0);
    assert!(s.contains("◆ team cancelling…"), "{s}");
    // Cancelling already: a second Ctrl-C is the usual first press.
    assert!(update(&mut a, ctrl('c')).is_empty());
    assert!(!a.should_quit);
    update(
        &mut a,
        Msg::SwarmDone {
            error: None,
            at: t0,
        },
    );
    assert!(a.status.is_none(), "the cancelling hint has served");

    // On the chat screen Esc cancels it, as it cancels a turn.
    let mut b = mid_team(t0);
    update(&mut b, key(KeyCode::Esc));
    assert_eq!(update(&mut b, key(KeyCode::Esc)), vec![Effect::CancelSwarm]);

    // Quitting cancels the team too.
    let mut c = mid_team(t0);
    assert_eq!(
        update(&mut c, ctrl('q')),
        vec![Effect::CancelSwarm, Effect::Quit]
    );
}

#[test]
fn a_second_team_waits_for_the_first() {
    let t0 = Instant::now();
    let mut a = mid_team(t0);
    update(&mut a, key(KeyCode::Esc));
    type_text(&mut a, "/swarm risk_committee");
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    assert!(
        a.status
            .as_ref()
            .is_some_and(|(_, t)| t.contains("a team run is running")),
        "{:?}",
        a.status
    );
    assert_eq!(a.swarm.as_ref().unwrap().preset, "investment_committee");
}

#[test]
fn a_refused_launch_is_shown_in_the_view_and_the_chat() {
    let mut a = app();
    type_text(&mut a, "/swarm investment_committee");
    update(&mut a, key(KeyCode::Enter));
    let at = Instant::now();
    update(
        &mut a,
        Msg::SwarmDone {
            error: Some(SwarmLaunchError::Unavailable.to_string()),
            at,
        },
    );
    assert!(matches!(
        &a.swarm.as_ref().unwrap().phase,
        TeamPhase::Failed { error } if error.contains("unavailable")
    ));
    let s = screen(&mut a, 80, 24, at);
    assert!(s.contains("team runs are unavailable"), "{s}");
    assert!(
        notices(&a, NoticeKind::Error)
            .iter()
            .any(|n| n.contains("team runs are unavailable"))
    );
}

#[test]
fn thirty_workers_scroll_to_keep_the_cursor_in_view() {
    let mut a = app();
    type_text(&mut a, "/swarm big_desk");
    update(&mut a, key(KeyCode::Enter));
    let t0 = Instant::now();
    let ids: Vec<String> = (0..30).map(|i| format!("task-{i:02}")).collect();
    let layers: Vec<Vec<&str>> = ids
        .chunks(6)
        .map(|c| c.iter().map(String::as_str).collect())
        .collect();
    let layer_refs: Vec<&[&str]> = layers.iter().map(Vec::as_slice).collect();
    let tasks = ids.iter().map(|id| info(id, "analyst", &[])).collect();
    feed(&mut a, &[started_with(&layer_refs, tasks)], t0);
    let top = screen(&mut a, 80, 24, t0);
    assert!(top.contains("task-00") && !top.contains("task-29"), "{top}");
    update(&mut a, key(KeyCode::End));
    let bottom = screen(&mut a, 80, 24, t0);
    assert!(
        bottom.contains("task-29") && !bottom.contains("task-00"),
        "{bottom}"
    );
    update(&mut a, key(KeyCode::Enter));
    assert_eq!(a.swarm.as_ref().unwrap().detail, Some(29));
}

/// A team that starts, waits to be cancelled, and ends `cancelled`.
struct WaitsForCancel;

impl SwarmLauncher for WaitsForCancel {
    fn launch(
        &self,
        preset: String,
        _vars: Vec<(String, String)>,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<(), SwarmLaunchError>> {
        Box::pin(async move {
            if preset != "investment_committee" {
                return Err(SwarmLaunchError::Engine(
                    format!("no team named {preset}").into(),
                ));
            }
            events.emit(committee());
            events.emit(task_started("task-bull", 1));
            cancel.cancelled().await;
            events.emit(task_finished(
                "task-bull",
                TaskState::Cancelled,
                Some("cancelled by the user"),
            ));
            events.emit(AgentEvent::SwarmFinished {
                run_id: "swarm-20261204-173000-1a2b3c4d".into(),
                status: RunStatus::Cancelled,
                reason: Some("cancelled by the user".into()),
                seconds: 1.0,
                report: "/data/report.md".into(),
            });
            Ok(())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_runs_a_team_through_its_launcher_and_cancels_it() {
    let launcher: Arc<dyn SwarmLauncher> = Arc::new(WaitsForCancel);
    let (events_tx, mut events) = unbounded_channel();
    let (bus_tx, mut bus) = unbounded_channel();
    let (cancel, task) = spawn_team(
        launcher.clone(),
        "investment_committee".into(),
        vec![("target".into(), "AAPL".into())],
        events_tx.clone(),
        bus_tx.clone(),
    );
    let mut a = app();
    for _ in 0..2 {
        let e = events.recv().await.unwrap();
        feed(&mut a, &[e], Instant::now());
    }
    assert_eq!(state_of(&a, "task-bull"), TaskState::Running);
    cancel.cancel();
    let done = bus.recv().await.unwrap();
    assert!(
        matches!(done, Msg::SwarmDone { error: None, .. }),
        "{done:?}"
    );
    task.await.unwrap();
    // Every event was sent before the launcher returned.
    while let Ok(e) = events.try_recv() {
        feed(&mut a, &[e], Instant::now());
    }
    update(&mut a, done);
    assert_eq!(state_of(&a, "task-bull"), TaskState::Cancelled);
    assert!(matches!(
        a.swarm.as_ref().unwrap().phase,
        TeamPhase::Finished {
            status: RunStatus::Cancelled,
            ..
        }
    ));

    // An engine's refusal comes back as the launch's error.
    let (_cancel, task) = spawn_team(launcher, "nope".into(), vec![], events_tx, bus_tx);
    match bus.recv().await.unwrap() {
        Msg::SwarmDone { error: Some(e), .. } => assert_eq!(e, "no team named nope"),
        other => panic!("{other:?}"),
    }
    task.await.unwrap();
}

const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

#[test]
fn snapshot_a_four_task_team_mid_run() {
    let t0 = Instant::now();
    let mut a = mid_team(t0);
    for (w, h) in SIZES {
        insta::assert_snapshot!(
            format!("team_mid_run_{w}x{h}"),
            screen(&mut a, w, h, t0 + Duration::from_secs(22))
        );
    }
}

#[test]
fn snapshot_a_workers_detail() {
    let t0 = Instant::now();
    let mut a = mid_team(t0);
    update(&mut a, key(KeyCode::Enter));
    for (w, h) in SIZES {
        insta::assert_snapshot!(
            format!("team_worker_detail_{w}x{h}"),
            screen(&mut a, w, h, t0 + Duration::from_secs(22))
        );
    }
}

/// The committee after its members' tool calls failed (docs §14.4): the
/// bull's worker answered with one of two calls failed (`partial`), the
/// bear's every call failed (`failed`), so the risk officer and the
/// portfolio manager never ran and the team is `failed`.
fn team_with_failures(t0: Instant) -> App {
    let mut a = mid_team(t0);
    let bull_reason = "1 of 2 tool calls failed: get_market_data (no data for ZZZZ)";
    let bear_reason =
        "attempt 1 of 1 failed: 1 of 1 tool call failed: technical_indicator (no data for ZZZZ)";
    let t1 = t0 + Duration::from_secs(30);
    let nodata = "{\"status\":\"error\",\"error\":\"no data for ZZZZ\"}";
    feed(
        &mut a,
        &[
            w(
                "task-bull",
                finished(1, "c1", "get_market_data", ToolCallStatus::Ok, 900, "AAPL rows"),
            ),
            w(
                "task-bull",
                batch(
                    1,
                    1,
                    BatchMode::Serial,
                    &[("c2", "get_market_data", json!({"symbol": "ZZZZ"}))],
                ),
            ),
            w(
                "task-bull",
                started(1, "c2", "get_market_data", true, Some(60.0)),
            ),
            w(
                "task-bull",
                finished(1, "c2", "get_market_data", ToolCallStatus::Error, 30, nodata),
            ),
            w("task-bull", text(2, "AAPL only: ZZZZ has no data.")),
            w("task-bull", run_finished(RunStatus::Partial, bull_reason)),
            task_finished("task-bull", TaskState::Partial, Some(bull_reason)),
            task_finished("task-bear", TaskState::Failed, Some(bear_reason)),
            task_finished(
                "task-risk",
                TaskState::Failed,
                Some("upstream task 'task-bear' failed"),
            ),
            task_finished(
                "task-pm",
                TaskState::Failed,
                Some("upstream task 'task-risk' failed"),
            ),
            AgentEvent::SwarmFinished {
                run_id: "swarm-20261204-173000-1a2b3c4d".into(),
                status: RunStatus::Failed,
                reason: Some(
                    "3 of 4 task(s) failed: task-bear, task-risk, task-pm; 1 partial (some tool calls failed): task-bull".into(),
                ),
                seconds: 30.0,
                report: "/data/swarm/swarm-20261204-173000-1a2b3c4d/report.md".into(),
            },
        ],
        t1,
    );
    update(
        &mut a,
        Msg::SwarmDone {
            error: None,
            at: t1,
        },
    );
    a
}

#[test]
fn partial_and_failed_tasks_and_teams_show_their_glyphs() {
    let t0 = Instant::now();
    let mut a = team_with_failures(t0);
    assert_eq!(state_of(&a, "task-bull"), TaskState::Partial);
    assert_eq!(state_of(&a, "task-bear"), TaskState::Failed);
    let now = t0 + Duration::from_secs(40);
    let s = screen(&mut a, 160, 48, now);
    let row = |id: &str| {
        s.lines()
            .find(|l| l.contains(id) && l.contains(" researcher "))
            .unwrap_or_else(|| panic!("a row for {id}:\n{s}"))
            .to_string()
    };
    assert!(row("task-bull").contains("◐ task-bull"), "{s}");
    assert!(row("task-bull").contains("partial"), "{s}");
    assert!(row("task-bear").contains("✗ task-bear"), "{s}");
    assert!(s.contains("✗ failed in 30s · 4/4 done"), "{s}");
    assert!(
        notices(&a, NoticeKind::Warning)
            .iter()
            .any(|n| n.contains("team run failed (3 of 4 task(s) failed")),
    );
    for (w, h) in SIZES {
        insta::assert_snapshot!(
            format!("team_partial_and_failed_{w}x{h}"),
            screen(&mut a, w, h, now)
        );
    }
    // The partial worker's own tool panel says why.
    let bull = a.swarm.as_ref().unwrap().task("task-bull").unwrap();
    assert_eq!(
        bull.worker.tools.run_end,
        Some((
            RunStatus::Partial,
            "1 of 2 tool calls failed: get_market_data (no data for ZZZZ)".to_string()
        ))
    );

    // A team whose final task delivered though a member was partial: ◐.
    let mut b = mid_team(t0);
    feed(
        &mut b,
        &[
            task_finished(
                "task-bull",
                TaskState::Partial,
                Some("1 of 2 tool calls failed"),
            ),
            task_finished("task-risk", TaskState::Success, None),
            task_finished("task-pm", TaskState::Success, None),
            AgentEvent::SwarmFinished {
                run_id: "swarm-20261204-173000-1a2b3c4d".into(),
                status: RunStatus::Partial,
                reason: Some("1 partial (some tool calls failed): task-bull".into()),
                seconds: 50.0,
                report: "/data/report.md".into(),
            },
        ],
        t0 + Duration::from_secs(50),
    );
    let s = screen(&mut b, 160, 48, now);
    assert!(s.contains("◐ partial in 50s · 4/4 done"), "{s}");
    assert!(s.contains("◆ team partial"), "the status line: {s}");
    assert!(
        notices(&b, NoticeKind::Warning)
            .iter()
            .any(|n| n.contains("team run partial")),
    );
}

#[test]
fn a_new_run_after_a_finished_one_starts_a_fresh_board() {
    let t0 = Instant::now();
    let mut a = mid_team(t0);
    feed(
        &mut a,
        &[AgentEvent::SwarmFinished {
            run_id: "swarm-20261204-173000-1a2b3c4d".into(),
            status: RunStatus::Success,
            reason: None,
            seconds: 30.0,
            report: "/data/report.md".into(),
        }],
        t0,
    );
    update(
        &mut a,
        Msg::SwarmDone {
            error: None,
            at: t0,
        },
    );
    feed(&mut a, &[committee()], t0 + Duration::from_secs(40));
    let board = a.swarm.as_ref().unwrap();
    assert_eq!(board.phase, TeamPhase::Running);
    assert_eq!(board.progress(), (0, 4), "no state carried over");
    assert!(
        board
            .task("task-bear")
            .unwrap()
            .worker
            .chat
            .cells
            .is_empty()
    );
}

/// Two runs on disk as the engine records them (docs §14.4), one with a
/// worker's run dir.
fn runs_on_disk() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let data = vibedesk::store::Paths::under(home.path()).data_dir;
    let write = |id: &str, body: serde_json::Value| {
        let dir = vibedesk::tui::team_runs::dir(&data).join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("run.json"), body.to_string()).unwrap();
    };
    write(
        "swarm-20261204-100000-aaaaaaaa",
        json!({
            "run_id": "swarm-20261204-100000-aaaaaaaa",
            "preset": "investment_committee",
            "status": "success",
            "started_at": "2026-12-04T10:00:00Z",
            "tasks": [
                {"id": "task-bull", "state": "success", "run_dir": "/data/runs/bull-1"},
                {"id": "task-bear", "state": "success", "run_dir": "/data/runs/bear-1"},
                {"id": "task-risk", "state": "success", "run_dir": "/data/runs/risk-1"},
                {"id": "task-pm", "state": "success", "run_dir": "/data/runs/pm-1"}
            ]
        }),
    );
    write(
        "swarm-20261204-110000-bbbbbbbb",
        json!({
            "run_id": "swarm-20261204-110000-bbbbbbbb",
            "preset": "risk_committee",
            "status": "interrupted",
            "started_at": "2026-12-04T11:00:00Z",
            "tasks": [{"id": "task-var", "state": "interrupted"}]
        }),
    );
    home
}

#[test]
fn the_browser_lists_team_runs_and_their_workers() {
    let home = runs_on_disk();
    let data = vibedesk::store::Paths::under(home.path()).data_dir;
    let mut a = app();
    assert_eq!(update(&mut a, ctrl('t')), vec![Effect::LoadSessions]);
    update(&mut a, Msg::Sessions(vec![]));
    // `t`, next to the sessions and the memory.
    assert_eq!(
        update(&mut a, key(KeyCode::Char('t'))),
        vec![Effect::LoadTeams]
    );
    update(&mut a, Msg::Teams(vibedesk::tui::team_runs::list(&data)));
    let now = Instant::now();
    for (w, h) in SIZES {
        insta::assert_snapshot!(format!("browser_teams_{w}x{h}"), screen(&mut a, w, h, now));
    }
    let s = screen(&mut a, 160, 48, now);
    let newest = s.find("swarm-20261204-110000-bbbbbbbb").unwrap();
    let older = s.find("swarm-20261204-100000-aaaaaaaa").unwrap();
    assert!(newest < older, "newest first:\n{s}");
    assert!(s.contains("Teams · 2 run(s) on disk"), "{s}");

    update(&mut a, key(KeyCode::Down));
    update(&mut a, key(KeyCode::Enter));
    let s = screen(&mut a, 160, 48, now);
    assert!(
        s.contains("Team run swarm-20261204-100000-aaaaaaaa · investment_committee · success"),
        "{s}"
    );
    for (task, dir) in [
        ("task-bull", "/data/runs/bull-1"),
        ("task-pm", "/data/runs/pm-1"),
    ] {
        assert!(
            s.lines().any(|l| l.contains(task) && l.contains(dir)),
            "{task} with its run dir:\n{s}"
        );
    }
    update(&mut a, key(KeyCode::Esc));
    assert!(screen(&mut a, 160, 48, now).contains("Teams · 2 run(s) on disk"));
    // Tab goes to the sessions.
    assert!(update(&mut a, key(KeyCode::Tab)).is_empty());
    assert!(screen(&mut a, 160, 48, now).contains("Transcripts · 0 session(s) on disk"));
}

#[test]
fn the_browser_marks_partial_and_failed_team_runs_and_workers() {
    let home = tempfile::tempdir().unwrap();
    let data = vibedesk::store::Paths::under(home.path()).data_dir;
    let write = |id: &str, status: &str, tasks: serde_json::Value| {
        let dir = vibedesk::tui::team_runs::dir(&data).join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let record = json!({
            "id": id, "preset": "crypto_desk", "status": status,
            "started_at": format!("2026-12-04T1{}:00:00Z", &id[22..23]),
            "tasks": tasks,
        });
        std::fs::write(dir.join("run.json"), record.to_string()).unwrap();
    };
    write(
        "swarm-20261204-100000-1aaaaaaa",
        "partial",
        json!([
            {"id": "task-trend", "state": "partial", "run_dirs": ["/data/runs/trend-1"]},
            {"id": "task-desk", "state": "success", "run_dirs": ["/data/runs/desk-1"]}
        ]),
    );
    write(
        "swarm-20261204-110000-2bbbbbbb",
        "failed",
        json!([
            {"id": "task-trend", "state": "failed", "run_dirs": ["/data/runs/trend-2"]},
            {"id": "task-desk", "state": "failed"}
        ]),
    );
    let mut a = app();
    update(&mut a, ctrl('t'));
    update(&mut a, Msg::Sessions(vec![]));
    update(&mut a, key(KeyCode::Char('t')));
    update(&mut a, Msg::Teams(vibedesk::tui::team_runs::list(&data)));
    let now = Instant::now();
    let s = screen(&mut a, 160, 48, now);
    let line = |id: &str| s.lines().find(|l| l.contains(id)).unwrap().to_string();
    assert!(line("2bbbbbbb").contains("✗ failed"), "{s}");
    assert!(line("1aaaaaaa").contains("◐ partial"), "{s}");
    update(&mut a, key(KeyCode::Down));
    update(&mut a, key(KeyCode::Enter));
    for (w, h) in SIZES {
        insta::assert_snapshot!(
            format!("browser_team_partial_workers_{w}x{h}"),
            screen(&mut a, w, h, now)
        );
    }
    let s = screen(&mut a, 160, 48, now);
    assert!(
        s.lines()
            .any(|l| l.contains("task-trend") && l.contains("◐ partial")),
        "{s}"
    );
}

/// A `/swarm` the engine refuses before the team starts (a missing
/// variable, an unknown name) leaves the keyboard in the input: the next
/// message arrives whole. Before, the team view stayed open and took its
/// first `h` as Back.
#[test]
fn a_refused_swarm_gives_the_keyboard_back_to_the_input() {
    let mut a = app();
    type_text(&mut a, "/swarm investment_committee");
    assert!(matches!(
        update(&mut a, key(KeyCode::Enter)).as_slice(),
        [Effect::StartSwarm { .. }]
    ));
    assert!(a.overlays.has_swarm(), "the view opens while it starts");
    update(
        &mut a,
        Msg::SwarmDone {
            error: Some(
                SwarmLaunchError::Refused(
                    "missing required variable: target (the ticker); type /swarm investment_committee target=VALUE".into(),
                )
                .to_string(),
            ),
            at: Instant::now(),
        },
    );
    assert!(!a.overlays.has_swarm(), "the view closed");
    assert!(
        notices(&a, NoticeKind::Error)
            .iter()
            .any(|n| n.contains("type /swarm investment_committee target=VALUE")),
        "the reason is in the chat"
    );
    type_text(&mut a, "hello there");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::Send {
            prompt: "hello there".into(),
            plan: Default::default()
        }]
    );
}
