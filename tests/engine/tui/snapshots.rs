//! insta snapshots of every panel on ratatui's `TestBackend`, at 80×24
//! (narrow: the side panel folds under the chat) and 160×48 (wide).

use std::time::Duration;

use crossterm::event::KeyCode;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use serde_json::json;
use tokio::time::Instant;
use vibedesk::agent::events::{AgentEvent, BatchMode, RunStatus, ToolCallStatus, ToolEvent};
use vibedesk::model::Message;
use vibedesk::session::SessionMeta;
use vibedesk::store::StoredMessage;
use vibedesk::tui::App;
use vibedesk::tui::app::{AppOptions, Msg, update};
use vibedesk::tui::theme::Theme;
use vibedesk::tui::transcripts::{
    ArchiveEntry, SessionDetail, SessionRow, TranscriptFile, fingerprint,
};
use vibedesk::tui::view;

use super::*;

const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

fn snap_both(name: &str, app: &mut App, now: Instant) {
    for (w, h) in SIZES {
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), screen(app, w, h, now));
    }
}

/// A run in progress: reasoning, a committed line plus a partial one, a
/// parallel batch with a running call.
fn mid_run(t0: Instant) -> App {
    let mut a = app();
    type_text(&mut a, "Backtest an SMA crossover on AAPL and summarise");
    update(&mut a, key(KeyCode::Enter));
    feed(
        &mut a,
        &[
            run_started(),
            AgentEvent::IterationStarted {
                iter: 1,
                step: 1,
                max_iterations: 50,
            },
            watermark(1, 12_400),
            AgentEvent::ReasoningDelta {
                iter: 1,
                chars: 312,
                tail: "Load prices, then run the backtest.".into(),
            },
            text(1, "I'll load the prices and run the backtest.\n"),
        ],
        t0,
    );
    feed(
        &mut a,
        &[
            AgentEvent::ThinkingDone {
                iter: 1,
                content: "I'll load".into(),
            },
            batch(
                1,
                0,
                BatchMode::Parallel,
                &[
                    ("c1", "load_prices", json!({"symbol": "AAPL"})),
                    (
                        "c2",
                        "backtest",
                        json!({"strategy": "sma_cross", "fast": 50, "slow": 200}),
                    ),
                ],
            ),
            started(1, "c1", "load_prices", true, Some(60.0)),
            started(1, "c2", "backtest", true, Some(600.0)),
        ],
        t0,
    );
    feed(
        &mut a,
        &[finished(
            1,
            "c1",
            "load_prices",
            ToolCallStatus::Ok,
            420,
            "3,521 bars",
        )],
        t0 + Duration::from_millis(420),
    );
    feed(
        &mut a,
        &[tool(ToolEvent::ToolProgress {
            call_id: "c2".into(),
            tool: "backtest".into(),
            stage: "bars".into(),
            current: Some(2100.0),
            total: Some(3521.0),
            message: "2008-06".into(),
            elapsed_s: 40.0,
        })],
        t0 + Duration::from_secs(40),
    );
    a
}

/// A finished run with a markdown answer and compaction history.
fn finished_run(t0: Instant) -> App {
    let mut a = mid_run(t0);
    let t1 = t0 + Duration::from_secs(75);
    feed(
        &mut a,
        &[
            finished(
                1,
                "c2",
                "backtest",
                ToolCallStatus::Ok,
                75_000,
                "{\"sharpe\":0.81}",
            ),
            tool(ToolEvent::ToolBatchFinished {
                iter: 1,
                batch: 0,
                elapsed_ms: 75_000,
            }),
            AgentEvent::IterationStarted {
                iter: 2,
                step: 2,
                max_iterations: 50,
            },
            watermark(2, 29_500),
        ],
        t1,
    );
    feed(
        &mut a,
        &compaction(2, "microcompact", 29_500, 18_200, 7),
        t1,
    );
    feed(&mut a, &compaction(2, "collapse", 18_200, 15_900, 3), t1);
    feed(
        &mut a,
        &[
            text(2, ANSWER),
            AgentEvent::Answer {
                iter: 2,
                content: ANSWER.into(),
                degraded: false,
            },
            run_finished(RunStatus::Success, "final answer delivered"),
        ],
        t1,
    );
    update(&mut a, Msg::TurnDone { error: None });
    a
}

#[test]
fn chat_and_panels_mid_run() {
    let t0 = Instant::now();
    let mut a = mid_run(t0);
    snap_both("mid_run", &mut a, t0 + Duration::from_secs(41));
}

#[test]
fn chat_after_a_finished_run_with_compactions() {
    let t0 = Instant::now();
    let mut a = finished_run(t0);
    snap_both("finished_run", &mut a, t0 + Duration::from_secs(80));
}

/// A run whose two data calls came back: AAPL's, and a symbol without
/// data; then a short answer and the run's end as the engine reports it
/// (docs §1.4): `partial` when one of the two failed, `failed` when both did.
fn run_with_failed_calls(t0: Instant, both_fail: bool) -> App {
    let mut a = app();
    type_text(&mut a, "RSI of AAPL and ZZZZ");
    update(&mut a, key(KeyCode::Enter));
    let nodata = "{\"status\":\"error\",\"error\":\"no data for ZZZZ\"}";
    let first = if both_fail {
        finished(
            1,
            "c1",
            "technical_indicator",
            ToolCallStatus::Error,
            40,
            nodata,
        )
    } else {
        finished(
            1,
            "c1",
            "technical_indicator",
            ToolCallStatus::Ok,
            40,
            "RSI 14: 55.2",
        )
    };
    let (status, reason) = if both_fail {
        (
            RunStatus::Failed,
            "2 of 2 tool calls failed: technical_indicator ×2 (no data for ZZZZ)",
        )
    } else {
        (
            RunStatus::Partial,
            "1 of 2 tool calls failed: technical_indicator (no data for ZZZZ)",
        )
    };
    feed(
        &mut a,
        &[
            run_started(),
            AgentEvent::IterationStarted {
                iter: 1,
                step: 1,
                max_iterations: 50,
            },
            watermark(1, 3_100),
            batch(
                1,
                0,
                BatchMode::Parallel,
                &[
                    ("c1", "technical_indicator", json!({"symbol": "AAPL"})),
                    ("c2", "technical_indicator", json!({"symbol": "ZZZZ"})),
                ],
            ),
            started(1, "c1", "technical_indicator", true, Some(60.0)),
            started(1, "c2", "technical_indicator", true, Some(60.0)),
            first,
            finished(
                1,
                "c2",
                "technical_indicator",
                ToolCallStatus::Error,
                41,
                nodata,
            ),
            tool(ToolEvent::ToolBatchFinished {
                iter: 1,
                batch: 0,
                elapsed_ms: 41,
            }),
            AgentEvent::IterationStarted {
                iter: 2,
                step: 2,
                max_iterations: 50,
            },
            text(2, "ZZZZ has no data; see the tool errors.\n"),
            AgentEvent::Answer {
                iter: 2,
                content: "ZZZZ has no data; see the tool errors.\n".into(),
                degraded: false,
            },
            run_finished(status, reason),
        ],
        t0,
    );
    update(&mut a, Msg::TurnDone { error: None });
    a
}

#[test]
fn a_partial_and_a_failed_run_show_their_state_in_the_chat_and_the_tool_panel() {
    let t0 = Instant::now();
    let mut partial = run_with_failed_calls(t0, false);
    let s = screen(&mut partial, 160, 48, t0);
    assert!(
        s.contains("── ◐ partial · 3 iterations") && s.contains("1 of 2 tool calls failed"),
        "{s}"
    );
    assert!(s.contains("◐ run partial: 1 of 2 tool calls failed"), "{s}");
    snap_both("run_partial", &mut partial, t0);
    let mut failed = run_with_failed_calls(t0, true);
    let s = screen(&mut failed, 160, 48, t0);
    assert!(s.contains("── ✗ failed · 3 iterations"), "{s}");
    assert!(s.contains("✗ run failed: 2 of 2 tool calls failed"), "{s}");
    snap_both("run_failed", &mut failed, t0);
}

/// An `unsupported` run (docs §1.4) ends with its own mark and word, the
/// answer above it kept, and no tool-panel line (no tool ran).
#[test]
fn an_unsupported_run_ends_with_its_own_mark() {
    let t0 = Instant::now();
    let mut a = app();
    type_text(&mut a, "Kalman filter hedge ratio of KO and PEP");
    update(&mut a, key(KeyCode::Enter));
    let said = "**Not available offline: a Kalman filter.** The nearest I can run: the Engle-Granger test of KO and PEP.\n";
    feed(
        &mut a,
        &[
            run_started(),
            AgentEvent::IterationStarted {
                iter: 1,
                step: 1,
                max_iterations: 50,
            },
            text(1, said),
            AgentEvent::Answer {
                iter: 1,
                content: said.into(),
                degraded: false,
            },
            run_finished(
                RunStatus::Unsupported,
                "no tool offered in this session can serve this request",
            ),
        ],
        t0,
    );
    update(&mut a, Msg::TurnDone { error: None });
    let s = screen(&mut a, 160, 48, t0);
    assert!(
        s.contains("── ∅ unsupported · 3 iterations")
            && s.contains("no tool offered in this session can serve this request"),
        "{s}"
    );
    assert!(s.contains("Not available offline: a Kalman filter"), "{s}");
    assert!(!s.contains("run unsupported"), "{s}");
}

#[test]
fn chat_with_expanded_tool_cells_and_reasoning() {
    let t0 = Instant::now();
    let mut a = finished_run(t0);
    update(&mut a, ctrl('o'));
    update(&mut a, ctrl('r'));
    update(&mut a, ctrl('b'));
    // Scrolled up to the tool cells, sidebar hidden.
    for _ in 0..2 {
        update(&mut a, key(KeyCode::PageUp));
    }
    snap_both("expanded_scrolled", &mut a, t0 + Duration::from_secs(80));
}

#[test]
fn busy_with_queued_messages_and_a_multiline_input() {
    let t0 = Instant::now();
    let mut a = mid_run(t0);
    type_text(&mut a, "then plot the equity curve");
    update(&mut a, key(KeyCode::Enter));
    type_text(&mut a, "and compare with buy-and-hold");
    update(&mut a, alt(KeyCode::Enter));
    type_text(&mut a, "over 2000-2013");
    snap_both("queued", &mut a, t0 + Duration::from_secs(41));
}

/// A batch with a call in every state, plus folded earlier batches.
fn every_state(t0: Instant) -> App {
    let mut a = app();
    feed(&mut a, &[run_started()], t0);
    for b in 0..2u32 {
        let id = format!("old{b}");
        feed(
            &mut a,
            &[
                batch(
                    1,
                    b,
                    BatchMode::Serial,
                    &[(&id, "list_dir", json!({"path": "."}))],
                ),
                started(1, &id, "list_dir", true, Some(30.0)),
                finished(
                    1,
                    &id,
                    "list_dir",
                    if b == 0 {
                        ToolCallStatus::Ok
                    } else {
                        ToolCallStatus::Error
                    },
                    4,
                    "no such dir",
                ),
                tool(ToolEvent::ToolBatchFinished {
                    iter: 1,
                    batch: b,
                    elapsed_ms: 5,
                }),
            ],
            t0,
        );
    }
    feed(
        &mut a,
        &[batch(
            2,
            2,
            BatchMode::Parallel,
            &[
                ("q", "read_file", json!({"path": "queued.md"})),
                ("r", "fetch_prices", json!({"symbol": "MSFT"})),
                ("o", "search_docs", json!({"query": "drawdown"})),
                ("d", "read_file", json!({"path": "done.md"})),
                ("f", "read_file", json!({"path": "missing.md"})),
                ("t", "fetch_prices", json!({"symbol": "TSLA"})),
                ("w", "write_file", json!({"path": "report.md"})),
                ("c", "backtest", json!({"strategy": "rsi"})),
            ],
        )],
        t0,
    );
    for (id, name, ro, timeout) in [
        ("r", "fetch_prices", true, 120.0),
        ("o", "search_docs", true, 30.0),
        ("d", "read_file", true, 30.0),
        ("f", "read_file", true, 30.0),
        ("t", "fetch_prices", true, 30.0),
        ("w", "write_file", false, 30.0),
        ("c", "backtest", true, 600.0),
    ] {
        feed(&mut a, &[started(2, id, name, ro, Some(timeout))], t0);
    }
    let t45 = t0 + Duration::from_secs(45);
    feed(
        &mut a,
        &[
            finished(2, "d", "read_file", ToolCallStatus::Ok, 12, "ok"),
            finished(
                2,
                "f",
                "read_file",
                ToolCallStatus::Error,
                3,
                "no such file: missing.md",
            ),
            finished(
                2,
                "t",
                "fetch_prices",
                ToolCallStatus::Timeout,
                30_000,
                "deadline of 30s passed; the download was killed",
            ),
            finished(
                2,
                "c",
                "backtest",
                ToolCallStatus::Cancelled,
                44_000,
                "cancelled",
            ),
            tool(ToolEvent::ToolTimeoutWarning {
                call_id: "w".into(),
                tool: "write_file".into(),
                elapsed_s: 31.0,
                timeout_s: 30.0,
            }),
            tool(ToolEvent::ToolHeartbeat {
                call_id: "r".into(),
                tool: "fetch_prices".into(),
                elapsed_s: 45.0,
                since_progress_s: 3.0,
            }),
        ],
        t45,
    );
    feed(
        &mut a,
        &[tool(ToolEvent::ToolProgress {
            call_id: "r".into(),
            tool: "fetch_prices".into(),
            stage: "download".into(),
            current: Some(3.0),
            total: Some(10.0),
            message: "MSFT 2003-2006".into(),
            elapsed_s: 42.0,
        })],
        t0 + Duration::from_secs(42),
    );
    a
}

#[test]
fn tool_panel_in_every_state() {
    let t0 = Instant::now();
    let mut a = every_state(t0);
    let now = t0 + Duration::from_secs(47);
    snap_both("tool_states_screen", &mut a, now);
    for (w, h) in SIZES {
        let area = Rect::new(0, 0, w, h);
        let mut buf = Buffer::empty(area);
        a.tools.render(area, &mut buf, &Theme::default(), now);
        insta::assert_snapshot!(format!("tool_panel_{w}x{h}"), buffer_text(&buf));
    }
}

fn buffer_text(buf: &Buffer) -> String {
    let w = buf.area.width as usize;
    buf.content()
        .chunks(w)
        .map(|row| {
            row.iter()
                .map(|c| c.symbol())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn gauge_states() {
    let t0 = Instant::now();
    let mut states: Vec<(&str, App)> = Vec::new();
    states.push(("empty", app()));
    let mut below = app();
    feed(&mut below, &[watermark(1, 9_800)], t0);
    states.push(("below_l1", below));
    let mut running = app();
    feed(&mut running, &[watermark(1, 41_500)], t0);
    feed(
        &mut running,
        &compaction(1, "auto_compact", 41_500, 0, 0)[..1],
        t0,
    );
    states.push(("l3_running", running));
    let mut history = app();
    for (i, (layer, b, after)) in [
        ("microcompact", 21_000, 15_500),
        ("collapse", 29_000, 21_000),
        ("auto_compact", 41_000, 9_000),
        ("microcompact", 22_000, 18_000),
    ]
    .iter()
    .enumerate()
    {
        feed(&mut history, &[watermark(i as u64 + 1, *b)], t0);
        feed(
            &mut history,
            &compaction(i as u64 + 1, layer, *b, *after, 5),
            t0,
        );
    }
    states.push(("history", history));
    for (name, a) in &mut states {
        for (w, h) in SIZES {
            let area = Rect::new(0, 0, w.min(60), h.min(10));
            let mut buf = Buffer::empty(area);
            a.gauge.render(
                area,
                &mut buf,
                &Theme::default(),
                t0 + Duration::from_secs(3),
            );
            let line = a.gauge.compact_line(w as usize, &Theme::default());
            let text = format!(
                "{}\n---\n{}",
                buffer_text(&buf),
                vibedesk::tui::wrap::line_text(&line)
            );
            insta::assert_snapshot!(format!("gauge_{name}_{w}x{h}"), text);
        }
    }
}

fn sessions() -> Vec<SessionRow> {
    vec![
        SessionRow {
            meta: SessionMeta {
                id: "5bc29f7ddcd5".into(),
                created_at: "2026-03-02T10:00:00.000Z".into(),
                updated_at: "2026-03-02T10:05:00.000Z".into(),
                title: "Backtest an SMA crossover on AAPL and summarise the drawdowns by year"
                    .into(),
                runs: 3,
                last_status: Some("success".into()),
                last_run_id: None,
            },
            messages: 148,
        },
        SessionRow {
            meta: SessionMeta {
                id: "0a1b2c3d4e5f".into(),
                created_at: "2026-02-27T18:30:00.000Z".into(),
                title: "Summarise my research notes".into(),
                last_status: Some("cancelled".into()),
                ..SessionMeta::default()
            },
            messages: 9,
        },
        SessionRow {
            meta: SessionMeta {
                id: "ffee00112233".into(),
                created_at: "2026-02-20T08:00:00.000Z".into(),
                title: "Fetch MSFT prices".into(),
                last_status: Some("interrupted".into()),
                ..SessionMeta::default()
            },
            messages: 2,
        },
    ]
}

fn stored(m: Message, ts: &str) -> StoredMessage {
    StoredMessage {
        message: m,
        ts: ts.into(),
        run_id: Some("20260302_100000_abcdef".into()),
        status: None,
    }
}

fn detail() -> SessionDetail {
    let cleared = Message::tool_result("c1", "read_file", "[cleared]");
    let collapsed = Message::assistant("[collapsed: 4 turns about loading prices]");
    SessionDetail {
        id: "5bc29f7ddcd5".into(),
        dir: "/data/sessions/5bc29f7ddcd5".into(),
        messages: vec![
            stored(
                Message::user("Backtest an SMA crossover on AAPL"),
                "2026-03-02T10:00:01.000Z",
            ),
            stored(
                Message::assistant("Loading prices first."),
                "2026-03-02T10:00:02.000Z",
            ),
            stored(
                Message::tool_result("c1", "read_file", "{\"rows\":3521}"),
                "2026-03-02T10:00:03.000Z",
            ),
            stored(
                Message::assistant("Sharpe 0.81, max drawdown -52 % in 2000."),
                "2026-03-02T10:01:00.000Z",
            ),
        ],
        trace: vec![
            json!({"type": "start", "iter": 1, "prompt": "Backtest an SMA crossover on AAPL", "run_id": "r1", "ts": 1.0}),
            json!({"type": "tool_call", "iter": 1, "tool": "read_file", "call_id": "c1", "args": {"path": "aapl.csv"}, "ts": 2.0}),
            json!({"type": "compaction", "iter": 3, "layer": "microcompact", "tokens_before": 29500, "tokens_after": 18200, "ts": 3.0}),
            json!({"type": "end", "iter": 4, "status": "success", "ts": 4.0}),
        ],
        archive: vec![
            ArchiveEntry {
                ts: "2026-03-02T10:00:40.000001Z".into(),
                run_id: "r1".into(),
                iter: 3,
                layer: "microcompact".into(),
                tool_call_id: Some("c1".into()),
                fingerprint: fingerprint(cleared.role, &cleared.content),
                message: Message::tool_result(
                    "c1",
                    "read_file",
                    "date,open,high,low,close\n2000-01-03,3.74,4.01,3.63,3.99\n2000-01-04,3.87,3.95,3.61,3.65",
                ),
            },
            ArchiveEntry {
                ts: "2026-03-02T10:00:41.000001Z".into(),
                run_id: "r1".into(),
                iter: 3,
                layer: "collapse".into(),
                tool_call_id: None,
                fingerprint: fingerprint(collapsed.role, &collapsed.content),
                message: Message::assistant(
                    "The full discussion of how prices were loaded and adjusted for splits.",
                ),
            },
        ],
        transcripts: vec![TranscriptFile {
            name: "transcript_20260302T100040.123456_0.jsonl".into(),
            path:
                "/data/sessions/5bc29f7ddcd5/transcripts/transcript_20260302T100040.123456_0.jsonl"
                    .into(),
            messages: 3,
        }],
        skipped: 0,
    }
}

#[test]
fn transcript_browser_views() {
    let mut a = app_with(AppOptions::default());
    a.session_id = Some("5bc29f7ddcd5".into());
    let now = Instant::now();
    update(&mut a, ctrl('t'));
    snap_both("browser_loading", &mut a, now);
    update(&mut a, Msg::Sessions(sessions()));
    update(&mut a, key(KeyCode::Down));
    snap_both("browser_sessions", &mut a, now);
    update(&mut a, key(KeyCode::Up));
    update(&mut a, key(KeyCode::Enter));
    update(&mut a, Msg::Detail(Ok(detail())));
    snap_both("browser_messages", &mut a, now);
    update(&mut a, key(KeyCode::Tab));
    snap_both("browser_trace", &mut a, now);
    update(&mut a, key(KeyCode::Tab));
    update(&mut a, key(KeyCode::Down));
    snap_both("browser_archive", &mut a, now);
    update(&mut a, key(KeyCode::Enter));
    snap_both("browser_archived_original", &mut a, now);
    update(&mut a, key(KeyCode::Esc));
    update(&mut a, key(KeyCode::Up));
    update(&mut a, key(KeyCode::Enter));
    let transcript = vec![
        Message::user("Backtest an SMA crossover on AAPL"),
        Message::tool_result("c1", "read_file", "[cleared]"),
        Message::assistant("[collapsed: 4 turns about loading prices]"),
    ];
    update(
        &mut a,
        Msg::Transcript {
            name: "transcript_20260302T100040.123456_0.jsonl".into(),
            result: Ok(transcript),
        },
    );
    update(&mut a, key(KeyCode::Down));
    snap_both("browser_transcript", &mut a, now);
    update(&mut a, key(KeyCode::Enter));
    update(&mut a, key(KeyCode::Char('/')));
    type_text(&mut a, "2000-01-04");
    snap_both("browser_pager_search", &mut a, now);
}

#[test]
fn help_page() {
    let mut a = app();
    update(&mut a, key(KeyCode::Char('?')));
    snap_both("help", &mut a, Instant::now());
}

#[test]
fn no_model_configured() {
    let mut a = app_with(AppOptions {
        has_model: false,
        model_label: "no model".into(),
        no_model_help: format!("vibedesk: {}", vibedesk::cli::NO_MODEL_HELP),
        ..AppOptions::default()
    });
    type_text(&mut a, "hello?");
    update(&mut a, key(KeyCode::Enter));
    snap_both("no_model", &mut a, Instant::now());
}

#[test]
fn resize_reflows_without_leftovers() {
    let t0 = Instant::now();
    let now = t0 + Duration::from_secs(80);
    let mut a = finished_run(t0);
    let mut term = Terminal::new(TestBackend::new(160, 48)).unwrap();
    term.draw(|f| view::draw(f, &mut a, now)).unwrap();
    for (w, h) in [(80, 24), (120, 40), (81, 30), (160, 48), (80, 24)] {
        term.backend_mut().resize(w, h);
        term.autoresize().unwrap();
        term.draw(|f| view::draw(f, &mut a, now)).unwrap();
        let after_resize = term.backend().to_string();
        let mut fresh = finished_run(t0);
        assert_eq!(after_resize, screen(&mut fresh, w, h, now), "{w}x{h}");
    }
}

/// A user's folder as the workspace is named in the status bar; the
/// session's own folder (the default) adds nothing there.
#[test]
fn the_status_bar_names_a_chosen_workspace() {
    let mut a = app_with(AppOptions {
        workspace: Some(std::path::PathBuf::from("/home/u/research")),
        workspace_label: "~/research".into(),
        ..AppOptions::default()
    });
    let shown = screen(&mut a, 120, 24, Instant::now());
    let top = shown.lines().next().unwrap();
    assert!(top.contains("· in ~/research"), "{top}");
    let mut plain = app();
    let shown = screen(&mut plain, 120, 24, Instant::now());
    assert!(!shown.lines().next().unwrap().contains(" in "), "{shown}");
}
