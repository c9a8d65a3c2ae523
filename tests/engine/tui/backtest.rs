//! The result cell of a finished `backtest` call: the event sequence asks
//! for the equity series as an effect, the series arrives as a message and
//! fills the cell, which draws the curves with ratatui's `Chart` (snapshots
//! at 80×24 and 160×48). Missing and malformed files give a notice, and the
//! transcript browser opens a recorded result as the same cell.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crossterm::event::KeyCode;
use serde_json::{Value, json};
use tokio::time::Instant;
use vibedesk::agent::events::{AgentEvent, BatchMode, RunStatus, ToolCallStatus};
use vibedesk::model::{Message, ToolCall};
use vibedesk::session::SessionMeta;
use vibedesk::store::StoredMessage;
use vibedesk::tools::events::ToolEvent;
use vibedesk::tui::App;
use vibedesk::tui::app::{Effect, Msg, update};
use vibedesk::tui::backtest::{
    self, BacktestCell, BacktestInfo, EquitySeries, LoadRequest, SeriesState,
};
use vibedesk::tui::cells::CellKind;
use vibedesk::tui::transcripts::{SessionDetail, SessionRow};

use super::*;

const RUN: &str = "/data/runs/20260302_100000_abcdef";
const SUMMARY: &str = "AAPL · sma_crossover(20, 50): total return 45.20%, annual 6.10%, Sharpe 0.81, max drawdown -23.40%, 12 trades, win rate 58.33%; benchmark 30.00% (excess 15.20%); final value 145200.00";

/// What the tool returns (key order as the tool writes it).
pub(super) fn result_json(run_dir: &str) -> Value {
    json!({
        "status": "ok", "run_dir": run_dir, "exit_code": 0, "elapsed_ms": 812,
        "stdout": "", "stderr": "", "summary": SUMMARY,
        "metrics": {"total_return": 0.452, "annual_return": 0.061, "sharpe": 0.81,
                    "max_drawdown": -0.234, "trade_count": 12, "win_rate": 0.5833,
                    "final_value": 145200.0},
        "warnings": [],
        "chart": {"svg": format!("{run_dir}/artifacts/equity_chart.svg"),
                  "png": format!("{run_dir}/artifacts/equity_chart.png")}
    })
}

/// The event's preview: the first 200 characters of the result.
pub(super) fn preview(run_dir: &str) -> String {
    result_json(run_dir).to_string().chars().take(200).collect()
}

fn info() -> BacktestInfo {
    BacktestInfo::from_result(&result_json(RUN)).unwrap()
}

/// A small fixed run: 40 bars with a dip, and a benchmark.
fn equity_csv() -> String {
    let d0 = chrono::NaiveDate::from_ymd_opt(2020, 1, 1).unwrap();
    let mut out = String::from("timestamp,ret,equity,drawdown,benchmark_equity,active_ret\n");
    let mut peak = f64::MIN;
    for i in 0..40 {
        let x = i as f64;
        let eq = 100_000.0 * (1.0 + 0.012 * x) * (1.0 + 0.06 * (x / 3.0).sin());
        peak = peak.max(eq);
        let bench = 100_000.0 * (1.0 + 0.006 * x);
        let date = d0 + chrono::Duration::days(i);
        out.push_str(&format!(
            "{date},0,{eq:.2},{:.6},{bench:.2},0\n",
            eq / peak - 1.0
        ));
    }
    out
}

fn series() -> EquitySeries {
    backtest::parse_equity_csv(&equity_csv()).unwrap()
}

fn backtest_cells(app: &App) -> Vec<BacktestCell> {
    app.chat
        .cells
        .iter()
        .filter_map(|c| match c.kind() {
            CellKind::Backtest(b) => Some(b.clone()),
            _ => None,
        })
        .collect()
}

thread_local! {
    /// When this test's backtest batch started; the run's end is stamped at
    /// that same instant, so the batch's "finished in" (timed to the run's
    /// end) cannot depend on how busy the machine is.
    static BATCH_START: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// A prompt, then one serial batch with a backtest that finishes with
/// `status`. Returns the effects of the engine events.
pub(super) fn run_backtest(
    app: &mut App,
    args: Value,
    status: ToolCallStatus,
    preview: &str,
) -> Vec<Effect> {
    let t = Instant::now();
    BATCH_START.set(Some(t));
    type_text(app, "backtest a 20/50 SMA crossover on AAPL");
    update(app, key(KeyCode::Enter));
    let mut fx = feed(
        app,
        &[
            run_started(),
            batch(1, 0, BatchMode::Serial, &[("c1", "backtest", args)]),
            started(1, "c1", "backtest", false, Some(360.0)),
        ],
        t,
    );
    fx.extend(feed(
        app,
        &[finished(1, "c1", "backtest", status, 812, preview)],
        t + Duration::from_millis(812),
    ));
    fx
}

pub(super) fn finish(app: &mut App) {
    let t = BATCH_START.get().unwrap_or_else(Instant::now);
    feed(
        app,
        &[
            text(2, "The crossover returned 45 % with a 23 % drawdown.\n"),
            AgentEvent::Answer {
                iter: 2,
                content: "The crossover returned 45 % with a 23 % drawdown.\n".into(),
                degraded: false,
            },
            run_finished(RunStatus::Success, "final answer delivered"),
        ],
        t,
    );
    update(app, Msg::TurnDone { error: None });
}

#[test]
fn a_finished_backtest_asks_for_its_series_and_the_answer_fills_the_cell() {
    let mut a = app();
    let fx = run_backtest(
        &mut a,
        json!({"config": {"codes": ["AAPL"]}}),
        ToolCallStatus::Ok,
        &preview(RUN),
    );
    // The preview is cut long before the summary: the load reads it too.
    let cells = backtest_cells(&a);
    assert_eq!(cells.len(), 1);
    let cell = &cells[0];
    assert_eq!(cell.series, SeriesState::Loading);
    assert_eq!(cell.info, None);
    assert_eq!(cell.call_id, "c1");
    assert_eq!(
        fx,
        vec![Effect::LoadBacktest(LoadRequest {
            id: cell.id,
            run_dir: PathBuf::from(RUN),
            info: true,
        })]
    );
    // The cell sits right under its tool cell.
    let n = a.chat.cells.len();
    assert!(matches!(a.chat.cells[n - 2].kind(), CellKind::Tool(t) if t.tool == "backtest"));

    // An answer for another id (a cleared chat) changes nothing.
    let stale = update(
        &mut a,
        Msg::BacktestLoaded {
            id: cell.id + 10_000,
            series: Ok(series()),
            info: Some(info()),
        },
    );
    assert!(stale.is_empty());
    assert_eq!(backtest_cells(&a)[0].series, SeriesState::Loading);

    let fx = update(
        &mut a,
        Msg::BacktestLoaded {
            id: cell.id,
            series: Ok(series()),
            info: Some(info()),
        },
    );
    assert!(fx.is_empty());
    let cell = &backtest_cells(&a)[0];
    let SeriesState::Loaded(s) = &cell.series else {
        panic!("{:?}", cell.series)
    };
    assert_eq!(s.equity.len(), 40);
    assert!(s.benchmark.is_some());
    let i = cell.info.as_ref().unwrap();
    assert_eq!(i.summary.as_deref(), Some(SUMMARY));
    assert_eq!(i.metrics.trades, Some(12));
    assert_eq!(i.metrics.max_drawdown, Some(-0.234));
}

/// The live event carries the tool's structured output: the cell takes the
/// run directory and the numbers from it, not from the preview (here cut
/// before the run directory) nor the run's own directory.
#[test]
fn the_run_dir_comes_from_the_structured_output_of_the_event() {
    let mut a = app();
    let t = Instant::now();
    type_text(&mut a, "backtest a 20/50 SMA crossover on AAPL");
    update(&mut a, key(KeyCode::Enter));
    feed(
        &mut a,
        &[
            run_started(),
            batch(1, 0, BatchMode::Serial, &[("c1", "backtest", json!({}))]),
            started(1, "c1", "backtest", false, Some(360.0)),
        ],
        t,
    );
    let fx = feed(
        &mut a,
        &[tool(ToolEvent::ToolCallFinished {
            iter: 1,
            call_id: "c1".into(),
            tool: "backtest".into(),
            status: ToolCallStatus::Ok,
            elapsed_ms: 812,
            preview: r#"{"status":"ok","#.into(),
            error_code: None,
            output: Some(result_json(RUN)),
        })],
        t + Duration::from_millis(812),
    );
    let cells = backtest_cells(&a);
    assert_eq!(cells.len(), 1);
    assert_eq!(cells[0].run_dir, PathBuf::from(RUN));
    assert_eq!(
        cells[0].info,
        Some(info()),
        "the numbers came with the event"
    );
    assert_eq!(
        fx,
        vec![Effect::LoadBacktest(LoadRequest {
            id: cells[0].id,
            run_dir: PathBuf::from(RUN),
            info: false,
        })]
    );
}

#[test]
fn only_successful_backtests_get_a_cell_and_run_dir_arguments_resolve_in_the_run() {
    // A failed backtest: its tool cell explains; no curve to read.
    let mut a = app();
    let fx = run_backtest(
        &mut a,
        json!({}),
        ToolCallStatus::Error,
        r#"{"status":"error","error_code":"config_invalid"}"#,
    );
    assert!(fx.is_empty());
    assert!(backtest_cells(&a).is_empty());

    // Another tool's success: nothing either.
    let mut b = app();
    let t = Instant::now();
    let fx = feed(
        &mut b,
        &[
            run_started(),
            batch(1, 0, BatchMode::Serial, &[("c9", "read_file", json!({}))]),
            finished(1, "c9", "read_file", ToolCallStatus::Ok, 3, "{}"),
        ],
        t,
    );
    assert!(fx.is_empty());

    // A preview without a run_dir: the argument, relative to the run's dir.
    let mut c = app();
    let fx = run_backtest(
        &mut c,
        json!({"run_dir": "sma"}),
        ToolCallStatus::Ok,
        r#"{"status":"ok"}"#,
    );
    let [Effect::LoadBacktest(req)] = fx.as_slice() else {
        panic!("{fx:?}")
    };
    assert_eq!(req.run_dir, Path::new("/tmp/runs/x/sma"));
    // A result without a summary: the load reads it from the run's files.
    assert!(req.info);
}

#[test]
fn resuming_a_session_draws_its_backtest_results_from_the_stored_result() {
    let mut a = app();
    let stored = |m: Message| StoredMessage {
        message: m,
        ts: "2026-03-02T10:00:01.000Z".into(),
        run_id: Some("20260302_100000_abcdef".into()),
        status: None,
    };
    let history = vec![
        stored(Message::user("backtest a 20/50 SMA crossover on AAPL")),
        stored(Message::assistant_tool_calls(
            "",
            vec![ToolCall::new("c1", "backtest", r#"{"config":{}}"#)],
            None,
        )),
        stored(Message::tool_result(
            "c1",
            "backtest",
            result_json(RUN).to_string(),
        )),
        stored(Message::assistant("Done.")),
    ];
    let fx = update(
        &mut a,
        Msg::SessionOpened {
            id: Some("5bc29f7ddcd5".into()),
            history,
            skipped: 0,
        },
    );
    let cells = backtest_cells(&a);
    assert_eq!(cells.len(), 1);
    assert_eq!(cells[0].info, Some(info()));
    assert_eq!(
        fx,
        vec![Effect::LoadBacktest(LoadRequest {
            id: cells[0].id,
            run_dir: PathBuf::from(RUN),
            info: false,
        })]
    );
}

/// A finished run whose backtest result has arrived.
fn with_result(series: Result<EquitySeries, backtest::EquityError>) -> App {
    let mut a = app();
    let fx = run_backtest(
        &mut a,
        json!({"config": {"codes": ["AAPL"]}}),
        ToolCallStatus::Ok,
        &preview(RUN),
    );
    let [Effect::LoadBacktest(req)] = fx.as_slice() else {
        panic!("{fx:?}")
    };
    update(
        &mut a,
        Msg::BacktestLoaded {
            id: req.id,
            series,
            info: Some(info()),
        },
    );
    finish(&mut a);
    a
}

#[test]
fn the_result_cell_at_80x24_and_160x48() {
    let now = Instant::now();
    let mut a = with_result(Ok(series()));
    // Wide: the charts; narrow: one sparkline line.
    for (w, h) in [(80, 24), (160, 48)] {
        insta::assert_snapshot!(format!("result_cell_{w}x{h}"), screen(&mut a, w, h, now));
    }
    let wide = screen(&mut a, 160, 48, now);
    assert!(wide.contains("━ benchmark") && wide.contains("2020-02-09"));
    assert!(wide.contains("svg /data/runs/20260302_100000_abcdef/artifacts/equity_chart.svg"));
    let narrow = screen(&mut a, 80, 24, now);
    assert!(
        narrow.contains("equity ▁") || narrow.contains("equity ▂"),
        "{narrow}"
    );

    // The expand key draws the charts on a narrow terminal too.
    screen(&mut a, 80, 24, now);
    update(&mut a, key(KeyCode::Tab));
    // The selection starts on the last expandable cell: the result.
    let sel = a.chat.selected.unwrap();
    assert!(matches!(a.chat.cells[sel].kind(), CellKind::Backtest(_)));
    update(&mut a, key(KeyCode::Enter));
    insta::assert_snapshot!("result_cell_expanded_80x24", screen(&mut a, 80, 24, now));
}

#[test]
fn a_missing_or_malformed_equity_file_shows_a_short_notice() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path();
    // Missing: no artifacts at all.
    let (series, info) = backtest::load(run, true);
    let missing = series.unwrap_err().to_string();
    assert!(missing.contains("not found"), "{missing}");
    let info = info.unwrap();
    assert_eq!(info.summary, None);
    assert_eq!(info.svg, None);

    // Malformed: a bad number, then wrong field counts, then not text.
    let art = run.join("artifacts");
    std::fs::create_dir_all(&art).unwrap();
    let file = art.join("equity.csv");
    for (body, want) in [
        (
            "timestamp,equity\n2020-01-01,100\n2020-01-02,12abc\n".as_bytes(),
            "line 3: equity '12abc' is not a number",
        ),
        (
            "timestamp,equity,drawdown\n2020-01-01,100\n".as_bytes(),
            "line 2 has 2 fields",
        ),
        (b"\xff\xfe\x00garbage".as_slice(), "cannot read"),
        (b"<html>nope</html>\n".as_slice(), "no equity column"),
    ] {
        std::fs::write(&file, body).unwrap();
        let err = backtest::load(run, false).0.unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
    }

    // The notice shows in the cell, wide and narrow, and nothing panics.
    std::fs::write(
        &file,
        "timestamp,equity\n2020-01-01,100\n2020-01-02,12abc\n",
    )
    .unwrap();
    let (series, _) = backtest::load(run, false);
    let mut a = with_result(series);
    let cell = &backtest_cells(&a)[0];
    assert!(matches!(&cell.series, SeriesState::Failed(e) if e.contains("malformed")));
    for (w, h) in [(80, 24), (160, 48), (40, 12)] {
        let s = screen(&mut a, w, h, Instant::now());
        if w >= 80 {
            assert!(
                s.contains("⚠ no equity curve: artifacts/equity.csv is"),
                "{s}"
            );
        }
    }

    // A well-formed run on disk: the series, metrics and chart paths.
    std::fs::write(&file, equity_csv()).unwrap();
    std::fs::write(
        art.join("metrics.json"),
        r#"{"total_return":0.452,"sharpe":0.81,"trade_count":12,"max_drawdown":-0.234}"#,
    )
    .unwrap();
    std::fs::write(art.join("equity_chart.svg"), "<svg/>").unwrap();
    let (series, info) = backtest::load(run, true);
    assert_eq!(series.unwrap(), self::series());
    let info = info.unwrap();
    assert_eq!(info.metrics.trades, Some(12));
    assert_eq!(info.metrics.sharpe, Some(0.81));
    assert_eq!(
        info.svg.as_deref(),
        Some(art.join("equity_chart.svg").to_str().unwrap())
    );
    assert_eq!(info.png, None);
}

#[test]
fn the_transcript_browser_opens_a_recorded_backtest_as_the_result_cell() {
    let mut a = app();
    let now = Instant::now();
    update(&mut a, ctrl('t'));
    update(
        &mut a,
        Msg::Sessions(vec![SessionRow {
            meta: SessionMeta {
                id: "5bc29f7ddcd5".into(),
                created_at: "2026-03-02T10:00:00.000Z".into(),
                title: "backtest a 20/50 SMA crossover on AAPL".into(),
                last_status: Some("success".into()),
                ..SessionMeta::default()
            },
            messages: 4,
        }]),
    );
    update(&mut a, key(KeyCode::Enter));
    let result = result_json(RUN).to_string();
    update(
        &mut a,
        Msg::Detail(Ok(SessionDetail {
            id: "5bc29f7ddcd5".into(),
            dir: "/data/sessions/5bc29f7ddcd5".into(),
            trace: vec![
                json!({"type": "start", "iter": 1, "prompt": "backtest", "run_id": "r1", "ts": 1.0}),
                json!({"type": "tool_call", "iter": 1, "tool": "backtest", "call_id": "c1", "args": {"config": {}}, "batch": 0, "ts": 2.0}),
                json!({"type": "tool_result", "iter": 1, "tool": "backtest", "call_id": "c1", "status": "ok", "outcome": "ok", "elapsed_ms": 812, "result": result, "preview": "", "ts": 3.0}),
                json!({"type": "end", "iter": 2, "status": "success", "ts": 4.0}),
            ],
            ..SessionDetail::default()
        })),
    );
    update(&mut a, key(KeyCode::Tab));
    // A plain record still opens in the pager.
    update(&mut a, key(KeyCode::Down));
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    update(&mut a, key(KeyCode::Esc));
    update(&mut a, key(KeyCode::Down));
    let fx = update(&mut a, key(KeyCode::Enter));
    let [Effect::LoadBacktest(req)] = fx.as_slice() else {
        panic!("{fx:?}")
    };
    // The recorded result has the summary: only the curve is read.
    assert_eq!((req.run_dir.as_path(), req.info), (Path::new(RUN), false));
    let loading = screen(&mut a, 80, 24, now);
    assert!(loading.contains("loading the equity curve"), "{loading}");
    update(
        &mut a,
        Msg::BacktestLoaded {
            id: req.id,
            series: Ok(series()),
            info: None,
        },
    );
    for (w, h) in [(80, 24), (160, 48)] {
        insta::assert_snapshot!(format!("browser_result_{w}x{h}"), screen(&mut a, w, h, now));
    }
    // It scrolls down to the record as written.
    for _ in 0..3 {
        update(&mut a, key(KeyCode::PageDown));
    }
    assert!(screen(&mut a, 80, 24, now).contains("\"ts\": 3.0"));
    update(&mut a, key(KeyCode::Esc));
    assert!(a.browser().is_some());
}
