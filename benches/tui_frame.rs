//! Workstation frame cost on a 10,000-message session (issue 4's targets:
//! under 5 ms per frame at 160×48, under 16 ms from a key press to the frame
//! that shows it, no draw while idle), and the team view with 30 live
//! workers at 160×48 (issue 18's target: frame p99 under 5 ms).
//!
//! Frames are drawn through ratatui's real crossterm backend into a sink, so
//! the numbers include layout, rendering, the buffer diff and escape-code
//! generation; only the terminal's own write is left out.
//!
//! Run: `cargo bench --bench tui_frame`

#![allow(clippy::expect_used)]

use std::io::Sink;
use std::time::{Duration, Instant as StdInstant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};
use serde_json::json;
use tokio::time::Instant;
use vibedesk::agent::events::{AgentEvent, BatchCall, BatchMode, SwarmTaskInfo, ToolEvent};
use vibedesk::model::{FunctionCall, Message, ToolCall};
use vibedesk::store::StoredMessage;
use vibedesk::tui::app::{App, AppOptions, Msg, update};
use vibedesk::tui::frame::FrameScheduler;
use vibedesk::tui::keymap::Keymap;
use vibedesk::tui::theme::Theme;
use vibedesk::tui::view;

const MESSAGES: usize = 10_000;
const FRAMES: usize = 400;
/// Live workers in the team-view bench.
const WORKERS: usize = 30;

fn session(n: usize) -> Vec<StoredMessage> {
    let answer = "## Result\n\nThe **SMA 50/200** crossover on AAPL:\n\n| metric | value |\n|---|---|\n| Sharpe | 0.81 |\n| max drawdown | -52 % |\n\n- bought 2003-05\n- sold 2008-01\n\n```python\nprint(sharpe)\n```\n";
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    while out.len() < n {
        let msg = match i % 4 {
            0 => Message::user(format!(
                "question {i}: backtest the crossover for year {}",
                2000 + i % 14
            )),
            1 => Message::assistant_tool_calls(
                "Loading prices.",
                vec![ToolCall {
                    id: format!("c{i}"),
                    kind: "function".into(),
                    function: FunctionCall {
                        name: "read_file".into(),
                        arguments: format!("{{\"path\":\"prices_{i}.csv\"}}"),
                    },
                }],
                None,
            ),
            2 => Message::tool_result(
                format!("c{}", i - 1),
                "read_file",
                "{\"status\":\"ok\",\"rows\":3521}",
            ),
            _ => Message::assistant(answer),
        };
        out.push(StoredMessage::now(msg));
        i += 1;
    }
    out
}

fn terminal(w: u16, h: u16) -> Terminal<CrosstermBackend<Sink>> {
    Terminal::with_options(
        CrosstermBackend::new(std::io::sink()),
        TerminalOptions {
            viewport: Viewport::Fixed(Rect::new(0, 0, w, h)),
        },
    )
    .expect("a terminal over a sink")
}

fn loaded_app() -> App {
    let mut app = App::new(Theme::default(), Keymap::default(), AppOptions::default());
    update(
        &mut app,
        Msg::SessionOpened {
            id: Some("benchsession".into()),
            history: session(MESSAGES),
            skipped: 0,
        },
    );
    app
}

struct Stats {
    mean: Duration,
    p50: Duration,
    p99: Duration,
    max: Duration,
}

fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    let n = v.len().max(1);
    let total: Duration = v.iter().sum();
    Stats {
        mean: total / n as u32,
        p50: v[n / 2],
        p99: v[(n * 99 / 100).min(n - 1)],
        max: v[n - 1],
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn report(name: &str, s: &Stats) {
    println!(
        "{name:<48} mean {:>10}  p50 {:>10}  p99 {:>10}  max {:>10}",
        ms(s.mean),
        ms(s.p50),
        ms(s.p99),
        ms(s.max)
    );
}

fn key(c: char) -> Msg {
    Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

fn bench_size(w: u16, h: u16) -> (Stats, Stats) {
    println!("--- {w}x{h}, {MESSAGES} messages ---");
    let t = StdInstant::now();
    let mut app = loaded_app();
    println!(
        "{:<48} {}",
        "load the session into the chat (once)",
        ms(t.elapsed())
    );
    let mut term = terminal(w, h);
    let now = Instant::now();

    let t = StdInstant::now();
    term.draw(|f| view::draw(f, &mut app, now)).expect("draw");
    println!("{:<48} {}", "first frame (cold caches)", ms(t.elapsed()));

    // A frame with nothing new: layout, render and diff.
    let mut v = Vec::with_capacity(FRAMES);
    for _ in 0..FRAMES {
        let t = StdInstant::now();
        term.draw(|f| view::draw(f, &mut app, now)).expect("draw");
        v.push(t.elapsed());
    }
    let frame = stats(v);
    report("frame, unchanged screen", &frame);

    // A key press through update() to the frame that shows it.
    let mut v = Vec::with_capacity(FRAMES);
    for i in 0..FRAMES {
        let c = (b'a' + (i % 26) as u8) as char;
        let t = StdInstant::now();
        let _ = update(&mut app, key(c));
        term.draw(|f| view::draw(f, &mut app, now)).expect("draw");
        v.push(t.elapsed());
    }
    let input = stats(v);
    report("key press -> frame (update + draw)", &input);

    // A streamed delta per frame at the bottom of the chat.
    update(&mut app, Msg::TurnDone { error: None });
    let mut v = Vec::with_capacity(FRAMES);
    for i in 0..FRAMES {
        let delta = if i % 8 == 7 {
            "line done.\n".to_string()
        } else {
            format!("word{i} ")
        };
        let t = StdInstant::now();
        update(
            &mut app,
            Msg::Agent {
                event: AgentEvent::TextDelta { iter: 99, delta },
                at: now,
            },
        );
        term.draw(|f| view::draw(f, &mut app, now)).expect("draw");
        v.push(t.elapsed());
    }
    report("streamed delta -> frame", &stats(v));

    // Paging up through never-seen history (cells laid out on first view).
    let mut v = Vec::new();
    for _ in 0..FRAMES {
        let t = StdInstant::now();
        update(
            &mut app,
            Msg::Key(KeyEvent::new(KeyCode::PageUp, KeyModifiers::NONE)),
        );
        term.draw(|f| view::draw(f, &mut app, now)).expect("draw");
        v.push(t.elapsed());
    }
    report("PgUp into uncached history -> frame", &stats(v));
    let t = StdInstant::now();
    update(
        &mut app,
        Msg::Key(KeyEvent::new(KeyCode::Home, KeyModifiers::CONTROL)),
    );
    term.draw(|f| view::draw(f, &mut app, now)).expect("draw");
    println!(
        "{:<48} {}",
        "Ctrl-Home to the first message -> frame",
        ms(t.elapsed())
    );
    (frame, input)
}

fn worker(task: &str, event: AgentEvent) -> Msg {
    Msg::Agent {
        event: AgentEvent::SwarmWorker {
            task: task.to_string(),
            event: Box::new(event),
        },
        at: Instant::now(),
    }
}

/// A team of [`WORKERS`] tasks in layers of six, every one running: each
/// worker has streamed some text and has a tool call running.
fn team_app() -> (App, Vec<String>) {
    let mut app = App::new(Theme::default(), Keymap::default(), AppOptions::default());
    for c in "/swarm big_desk target=AAPL".chars() {
        update(&mut app, key(c));
    }
    update(
        &mut app,
        Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
    );
    let ids: Vec<String> = (0..WORKERS)
        .map(|i| format!("task-analyst-{i:02}"))
        .collect();
    let layers: Vec<Vec<String>> = ids.chunks(6).map(<[String]>::to_vec).collect();
    let tasks = ids
        .iter()
        .enumerate()
        .map(|(i, id)| SwarmTaskInfo {
            id: id.clone(),
            agent: format!("analyst_{i}"),
            role: format!("equity analyst {i}"),
            depends_on: Vec::new(),
        })
        .collect();
    let at = Instant::now();
    let mut team = vec![AgentEvent::SwarmStarted {
        run_id: "swarm-20261204-173000-1a2b3c4d".into(),
        preset: "big_desk".into(),
        title: "Thirty analysts".into(),
        run_dir: "/data/swarm/swarm-20261204-173000-1a2b3c4d".into(),
        layers,
        tasks,
    }];
    for id in &ids {
        team.push(AgentEvent::SwarmTaskStarted {
            task: id.clone(),
            agent: "analyst".into(),
            attempt: 1,
            run_dir: format!("/data/runs/{id}"),
        });
    }
    for msg in team.into_iter().map(|event| Msg::Agent { event, at }) {
        update(&mut app, msg);
    }
    for id in &ids {
        let events = [
            AgentEvent::IterationStarted {
                iter: 1,
                step: 1,
                max_iterations: 25,
            },
            AgentEvent::TextDelta {
                iter: 1,
                delta: "Loading prices and indicators for AAPL.\n".into(),
            },
            AgentEvent::Tool(ToolEvent::ToolBatchStarted {
                iter: 1,
                batch: 0,
                mode: BatchMode::Parallel,
                calls: vec![BatchCall {
                    call_id: format!("{id}-c1"),
                    tool: "get_market_data".into(),
                    args: json!({"symbol": "AAPL"}),
                }],
            }),
            AgentEvent::Tool(ToolEvent::ToolCallStarted {
                iter: 1,
                call_id: format!("{id}-c1"),
                tool: "get_market_data".into(),
                args: json!({"symbol": "AAPL"}),
                readonly: true,
                timeout_s: Some(60.0),
            }),
        ];
        for e in events {
            update(&mut app, worker(id, e));
        }
    }
    (app, ids)
}

/// One live worker event: a heartbeat or a streamed line, round robin.
fn live_event(ids: &[String], i: usize) -> Msg {
    let id = &ids[i % ids.len()];
    let event = if i.is_multiple_of(2) {
        AgentEvent::Tool(ToolEvent::ToolHeartbeat {
            call_id: format!("{id}-c1"),
            tool: "get_market_data".into(),
            elapsed_s: i as f64,
            since_progress_s: 1.0,
        })
    } else {
        AgentEvent::TextDelta {
            iter: 1,
            delta: format!("the {i}th observation.\n"),
        }
    };
    worker(id, event)
}

/// The team view at 160×48 with 30 live workers: a frame with nothing new,
/// one worker event folded per frame, and a worker's detail.
fn bench_team() -> Stats {
    println!("--- team view, 160x48, {WORKERS} live workers ---");
    let (mut app, ids) = team_app();
    let mut term = terminal(160, 48);
    let mut now = Instant::now();
    term.draw(|f| view::draw(f, &mut app, now)).expect("draw");

    let mut v = Vec::with_capacity(FRAMES);
    for _ in 0..FRAMES {
        let t = StdInstant::now();
        term.draw(|f| view::draw(f, &mut app, now)).expect("draw");
        v.push(t.elapsed());
    }
    report("team view frame, unchanged", &stats(v));

    // Every frame folds a worker event and the clocks move on.
    let mut v = Vec::with_capacity(FRAMES);
    for i in 0..FRAMES {
        now += Duration::from_millis(250);
        let t = StdInstant::now();
        update(&mut app, live_event(&ids, i));
        term.draw(|f| view::draw(f, &mut app, now)).expect("draw");
        v.push(t.elapsed());
    }
    let live = stats(v);
    report("worker event -> team view frame", &live);

    // A worker's detail (its chat, tool panel and gauge), events streaming
    // into that worker and the others.
    update(
        &mut app,
        Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
    );
    let mut v = Vec::with_capacity(FRAMES);
    for i in 0..FRAMES {
        now += Duration::from_millis(250);
        let t = StdInstant::now();
        update(&mut app, live_event(&ids, i));
        term.draw(|f| view::draw(f, &mut app, now)).expect("draw");
        v.push(t.elapsed());
    }
    report("worker event -> worker detail frame", &stats(v));
    live
}

fn main() {
    let (frame_small, input_small) = bench_size(80, 24);
    let (frame, input) = bench_size(160, 48);
    let team = bench_team();

    // Idle: after a frame, nothing asks for another one.
    let mut app = loaded_app();
    let mut term = terminal(160, 48);
    let mut frames = FrameScheduler::default();
    let now = Instant::now();
    frames.request(now);
    term.draw(|f| view::draw(f, &mut app, now)).expect("draw");
    frames.drew(now);
    if let Some(t) = app.next_deadline(now) {
        frames.request(t);
    }
    let idle_ok = frames.deadline().is_none();
    println!("--- idle ---");
    println!(
        "{:<48} {}",
        "frames requested by an idle app",
        if idle_ok {
            "none (no draw without a change)"
        } else {
            "SOME (bug)"
        }
    );

    println!("--- targets ---");
    let check = |what: &str, got: Duration, limit: Duration| {
        println!(
            "{what:<48} {} (target < {}) {}",
            ms(got),
            ms(limit),
            if got < limit { "ok" } else { "MISSED" }
        );
    };
    check("frame at 160x48, p99", frame.p99, Duration::from_millis(5));
    check(
        "team view, 30 live workers, 160x48, p99",
        team.p99,
        Duration::from_millis(5),
    );
    check(
        "key press to frame at 160x48, p99",
        input.p99,
        Duration::from_millis(16),
    );
    check(
        "frame at 80x24, p99",
        frame_small.p99,
        Duration::from_millis(5),
    );
    check(
        "key press to frame at 80x24, p99",
        input_small.p99,
        Duration::from_millis(16),
    );
}
