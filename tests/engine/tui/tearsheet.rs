//! The tear-sheet view (docs §20.2): opened with `s` from a backtest cell
//! and from the browser, computed off the UI thread (an effect, then a
//! message), six tabs drawn at 80×24 and 160×48 (snapshots and buffer
//! assertions), tab switching, scrolling, the report key and closing.

use std::path::PathBuf;

use chrono::{Datelike, NaiveDate};
use crossterm::event::KeyCode;
use serde_json::json;
use tokio::time::Instant;
use vibedesk::agent::events::ToolCallStatus;
use vibedesk::research::tearsheet::{
    AnnualRow, Distribution, DrawdownPeriod, Metric, MonthlyTable, Period, PositionStats, Rolling,
    Series, TearSheet, Unit,
};
use vibedesk::session::SessionMeta;
use vibedesk::tui::App;
use vibedesk::tui::app::{Effect, Msg, update};
use vibedesk::tui::overlay::Overlay;
use vibedesk::tui::tearsheet::{SheetData, SheetTab, TearSheetView, TradesTable, load};
use vibedesk::tui::transcripts::{SessionDetail, SessionRow};

use super::*;

const RUN: &str = "/data/runs/20260302_100000_abcdef";

/// Weekdays from 2019-01-02 on, `n` of them.
fn weekdays(n: usize) -> Vec<NaiveDate> {
    let mut d = NaiveDate::from_ymd_opt(2019, 1, 2).unwrap();
    let mut out = Vec::new();
    while out.len() < n {
        if d.weekday().number_from_monday() <= 5 {
            out.push(d);
        }
        d = d.succ_opt().unwrap();
    }
    out
}

fn metric(key: &str, name: &str, unit: Unit, v: f64, b: Option<f64>) -> Metric {
    Metric {
        key: key.into(),
        name: name.into(),
        unit,
        value: Some(v),
        benchmark: b,
        note: None,
    }
}

/// A two-and-a-half-year sheet built by hand: a deterministic wavy curve
/// with a drawdown not yet recovered, its monthly table, rolling windows
/// that fill after six and twelve months, and three positions.
pub fn hand_sheet() -> SheetData {
    let n = 650;
    let dates = weekdays(n);
    let rets: Vec<f64> = (0..n)
        .map(|i| {
            let x = i as f64;
            0.0006 + 0.009 * (x / 7.0).sin() + 0.004 * (x / 53.0).cos() - 0.002 * (x / 300.0)
        })
        .collect();
    let bench_rets: Vec<f64> = (0..n)
        .map(|i| 0.0004 + 0.006 * ((i as f64) / 11.0).sin())
        .collect();
    let grow = |r: &[f64]| {
        let mut e = 1.0;
        r.iter()
            .map(|x| {
                e *= 1.0 + x;
                e
            })
            .collect::<Vec<f64>>()
    };
    let equity = grow(&rets);
    let bench = grow(&bench_rets);
    let mut peak = f64::MIN;
    let underwater: Vec<f64> = equity
        .iter()
        .map(|e| {
            peak = peak.max(*e);
            e / peak - 1.0
        })
        .collect();
    let mut years = Vec::new();
    let mut cells: Vec<[Option<f64>; 12]> = Vec::new();
    let mut year_ret = Vec::new();
    for (d, r) in dates.iter().zip(&rets) {
        if years.last() != Some(&d.year()) {
            years.push(d.year());
            cells.push([None; 12]);
            year_ret.push(Some(0.0));
        }
        let m = d.month0() as usize;
        let row = cells.last_mut().unwrap();
        row[m] = Some((1.0 + row[m].unwrap_or(0.0)) * (1.0 + r) - 1.0);
        let y = year_ret.last_mut().unwrap();
        *y = Some((1.0 + y.unwrap()) * (1.0 + r) - 1.0);
    }
    let annual = years
        .iter()
        .zip(&year_ret)
        .map(|(y, r)| AnnualRow {
            year: *y,
            strategy: r.unwrap(),
            benchmark: Some(0.05),
        })
        .collect();
    let roll = |stat: &str, window: usize, scale: f64| Rolling {
        statistic: stat.into(),
        window,
        values: (0..n)
            .map(|i| (i >= window).then(|| scale * (1.0 + ((i as f64) / 40.0).sin())))
            .collect(),
    };
    let rolling = vec![
        roll("sharpe", 126, 1.1),
        roll("sharpe", 252, 0.8),
        roll("sortino", 126, 1.6),
        roll("sortino", 252, 1.2),
        roll("volatility", 126, 0.12),
        roll("volatility", 252, 0.1),
        roll("beta", 126, 0.6),
        roll("beta", 252, 0.5),
    ];
    let dist = |period: Period, count: usize| Distribution {
        period,
        count,
        quantiles: vec![
            (0.01, -0.031),
            (0.05, -0.018),
            (0.25, -0.006),
            (0.5, 0.001),
            (0.75, 0.007),
            (0.95, 0.019),
            (0.99, 0.029),
        ],
        edges: (0..=20).map(|i| -0.04 + 0.004 * i as f64).collect(),
        counts: (0..20).map(|i: usize| 20 - i.abs_diff(10) * 2).collect(),
    };
    let w = |k: f64| {
        (0..n)
            .map(|i| k * (1.0 + ((i as f64) / 90.0).sin()) / 2.0)
            .collect()
    };
    let positions = PositionStats {
        gross: (0..n)
            .map(|i| 0.8 + 0.2 * ((i as f64) / 60.0).sin())
            .collect(),
        net: (0..n)
            .map(|i| 0.4 + 0.3 * ((i as f64) / 60.0).cos())
            .collect(),
        long: vec![0.6; n],
        short: vec![-0.2; n],
        turnover: (0..n)
            .map(|i| if i % 21 == 0 { 0.25 } else { 0.0 })
            .collect(),
        annual_turnover: 3.0,
        codes: vec!["AAPL".into(), "MSFT".into(), "SPY".into()],
        weights: vec![w(0.5), w(0.3), w(-0.2)],
    };
    let mut sharpe = metric("sharpe", "Sharpe", Unit::Ratio, 0.81, Some(0.64));
    sharpe.note = Some("the risk-free rate is the 3-month T-bill, not zero".into());
    let sheet = TearSheet {
        title: "SMA 20/50 on AAPL".into(),
        start: dates[0],
        end: dates[n - 1],
        assumptions: vec![
            "252 periods a year".into(),
            "risk-free: 3-month T-bill, US Treasury".into(),
            "benchmark: SPY".into(),
        ],
        metrics: vec![
            metric(
                "cumulative_return",
                "Cumulative Return",
                Unit::Percent,
                0.452,
                Some(0.3),
            ),
            metric("cagr", "CAGR", Unit::Percent, 0.061, Some(0.042)),
            sharpe,
            metric("sortino", "Sortino", Unit::Ratio, 1.12, Some(0.9)),
            metric(
                "max_drawdown",
                "Max Drawdown",
                Unit::Percent,
                -0.234,
                Some(-0.19),
            ),
            metric(
                "volatility",
                "Volatility (ann.)",
                Unit::Percent,
                0.18,
                Some(0.15),
            ),
            metric("calmar", "Calmar", Unit::Ratio, 0.26, Some(0.22)),
            metric("skew", "Skew", Unit::Ratio, -0.31, Some(-0.5)),
            metric("kurtosis", "Kurtosis", Unit::Ratio, 3.9, Some(4.4)),
            metric(
                "longest_dd_days",
                "Longest DD Days",
                Unit::Count,
                212.0,
                Some(180.0),
            ),
        ],
        monthly: MonthlyTable {
            years,
            cells,
            year: year_ret,
        },
        annual,
        drawdowns: vec![
            DrawdownPeriod {
                start: dates[400],
                trough: dates[470],
                end: dates[n - 1],
                recovery: None,
                depth: -0.234,
                days: 355,
            },
            DrawdownPeriod {
                start: dates[100],
                trough: dates[130],
                end: dates[189],
                recovery: Some(dates[190]),
                depth: -0.121,
                days: 126,
            },
        ],
        series: Series {
            dates: dates.clone(),
            equity,
            benchmark_equity: Some(bench),
            underwater,
            rolling,
        },
        distribution: vec![
            dist(Period::Day, n),
            dist(Period::Week, n / 5),
            dist(Period::Month, 30),
            dist(Period::Quarter, 10),
            dist(Period::Year, 3),
        ],
        positions: Some(positions),
    };
    let trades = TradesTable {
        header: "timestamp,code,side,price,qty,reason,pnl,holding_days,holding_bars,return_pct"
            .split(',')
            .map(String::from)
            .collect(),
        rows: vec![
            "2019-02-01,AAPL,buy,41.74,120,signal,0,0,0,0",
            "2019-05-03,AAPL,sell,52.94,120,signal,1344.00,91,63,0.2683",
        ]
        .into_iter()
        .map(|r| r.split(',').map(String::from).collect())
        .collect(),
        omitted: 0,
    };
    SheetData {
        sheet,
        trades: Some(trades),
        elapsed_ms: 3,
    }
}

/// An app after a backtest turn, with the view opened by `s` on the chat
/// and `data` arriving as the load's answer.
fn open(data: SheetData) -> App {
    open_at(RUN, data)
}

fn open_at(run: &str, data: SheetData) -> App {
    let mut a = app();
    super::backtest::run_backtest(
        &mut a,
        json!({"config": {"codes": ["AAPL"]}}),
        ToolCallStatus::Ok,
        &super::backtest::preview(run),
    );
    super::backtest::finish(&mut a);
    // Tab selects the last cell (the run's end): `s` finds the backtest
    // above it.
    update(&mut a, key(KeyCode::Tab));
    let fx = update(&mut a, key(KeyCode::Char('s')));
    let [Effect::LoadTearSheet { id, run_dir }] = fx.as_slice() else {
        panic!("{fx:?}")
    };
    assert_eq!(run_dir, &PathBuf::from(run));
    let id = *id;
    let s = screen(&mut a, 80, 24, Instant::now());
    assert!(s.contains("computing the tear sheet of"), "{s}");
    update(
        &mut a,
        Msg::TearSheetLoaded {
            id,
            result: Ok(Box::new(data)),
        },
    );
    a
}

fn view(a: &App) -> &TearSheetView {
    match a.overlays.top() {
        Some(Overlay::TearSheet(v)) => v,
        other => panic!("the tear sheet is not on top: {other:?}"),
    }
}

/// The tear sheet of a real backtest on the offline market: AAPL and
/// MSFT above their 50-day average, 2009–2012, run by the binary.
fn real_sheet() -> SheetData {
    real_run().2
}

/// The run of [`real_sheet`]: its home (removed when dropped), its
/// directory and its sheet.
fn real_run() -> (tempfile::TempDir, PathBuf, SheetData) {
    let home = tempfile::tempdir().unwrap();
    let run = home.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let cfg = home.path().join("cfg.json");
    let config = json!({"codes": ["AAPL", "MSFT"], "start_date": "2009-01-01",
        "end_date": "2012-12-31", "source": "embedded",
        "strategy": {"rules": {"entry": "close > sma(close, 50)"}}});
    std::fs::write(&cfg, config.to_string()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vibedesk"))
        .env("VIBEDESK_HOME", home.path())
        .env_remove("VIBEDESK_CONFIG")
        .arg("backtest")
        .arg(&run)
        .arg("--config")
        .arg(&cfg)
        .arg("--offline")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut data = load::load(&run).unwrap();
    assert!(
        data.elapsed_ms < 2_000,
        "reading and computing took {} ms",
        data.elapsed_ms
    );
    // The one number that varies from run to run.
    data.elapsed_ms = 0;
    (home, run, data)
}

#[test]
fn every_tab_of_a_real_backtest_at_both_sizes() {
    let now = Instant::now();
    let mut a = open(real_sheet());
    for (i, tab) in SheetTab::ALL.iter().enumerate() {
        update(&mut a, key(KeyCode::Char(char::from(b'1' + i as u8))));
        assert_eq!(view(&a).tab, *tab);
        for (w, h) in [(80, 24), (160, 48)] {
            let s = screen(&mut a, w, h, now);
            insta::assert_snapshot!(format!("tearsheet_{:?}_{w}x{h}", tab).to_lowercase(), s);
        }
    }
}

#[test]
fn tabs_cycle_scroll_and_close() {
    let now = Instant::now();
    let mut a = open(hand_sheet());
    screen(&mut a, 80, 24, now);
    update(&mut a, key(KeyCode::Tab));
    assert_eq!(view(&a).tab, SheetTab::Monthly);
    update(&mut a, key(KeyCode::BackTab));
    update(&mut a, key(KeyCode::BackTab));
    assert_eq!(view(&a).tab, SheetTab::Trades);
    // Scrolling is per tab and stops at the end.
    update(&mut a, key(KeyCode::Char('1')));
    screen(&mut a, 80, 24, now);
    update(&mut a, key(KeyCode::Char('j')));
    update(&mut a, key(KeyCode::Down));
    assert_eq!(view(&a).scroll(), 2);
    update(&mut a, key(KeyCode::Char('k')));
    assert_eq!(view(&a).scroll(), 1);
    update(&mut a, key(KeyCode::Char('G')));
    let end = view(&a).scroll();
    assert!(end > 1, "the overview is longer than a screen at 80×24");
    update(&mut a, key(KeyCode::Char('j')));
    assert_eq!(view(&a).scroll(), end, "no scrolling past the end");
    update(&mut a, key(KeyCode::Char('2')));
    assert_eq!(view(&a).scroll(), 0);
    update(&mut a, key(KeyCode::Char('1')));
    assert_eq!(view(&a).scroll(), end);
    update(&mut a, key(KeyCode::Char('g')));
    assert_eq!(view(&a).scroll(), 0);
    // Esc closes; so does q.
    update(&mut a, key(KeyCode::Esc));
    assert!(a.overlays.is_empty());
    let mut b = open(hand_sheet());
    update(&mut b, key(KeyCode::Char('q')));
    assert!(b.overlays.is_empty());
}

#[test]
fn the_report_key_writes_the_html_report_and_shows_its_path() {
    let now = Instant::now();
    let (_home, run, data) = real_run();
    let mut a = open_at(run.to_str().unwrap(), data);
    let id = view(&a).id;
    let fx = update(&mut a, key(KeyCode::Char('r')));
    assert_eq!(
        fx,
        [Effect::WriteReport {
            id,
            run_dir: run.clone()
        }]
    );
    assert!(screen(&mut a, 80, 24, now).contains("writing the HTML report"));
    // What the runtime does with the effect, on its blocking thread.
    let result = vibedesk::tui::tearsheet::write_report(&run);
    let path = result.as_ref().unwrap().clone();
    assert_eq!(path, run.join("report.html"));
    let html = std::fs::read_to_string(&path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") || html.starts_with("<!doctype html>"));
    update(&mut a, Msg::ReportWritten { id, result });
    let s = screen(&mut a, 160, 48, now);
    assert!(
        s.contains(&format!("report written: {}", path.display())),
        "{s}"
    );
    // A run that cannot be read says why, on the same line.
    let result = vibedesk::tui::tearsheet::write_report(std::path::Path::new("/nonexistent/run"));
    assert!(result.is_err());
    update(&mut a, Msg::ReportWritten { id, result });
    let s = screen(&mut a, 80, 24, now);
    assert!(s.contains("no report:"), "{s}");
}

#[test]
fn the_browser_opens_a_recorded_backtest_s_tear_sheet_and_esc_returns_to_it() {
    let mut a = app();
    update(&mut a, ctrl('t'));
    update(
        &mut a,
        Msg::Sessions(vec![SessionRow {
            meta: SessionMeta {
                id: "5bc29f7ddcd5".into(),
                created_at: "2026-03-02T10:00:00.000Z".into(),
                title: "backtest".into(),
                ..SessionMeta::default()
            },
            messages: 2,
        }]),
    );
    update(&mut a, key(KeyCode::Enter));
    let result = super::backtest::result_json(RUN).to_string();
    update(
        &mut a,
        Msg::Detail(Ok(SessionDetail {
            id: "5bc29f7ddcd5".into(),
            dir: "/data/sessions/5bc29f7ddcd5".into(),
            trace: vec![
                json!({"type": "start", "iter": 1, "prompt": "backtest", "run_id": "r1", "ts": 1.0}),
                json!({"type": "tool_result", "iter": 1, "tool": "backtest", "call_id": "c1", "status": "ok", "outcome": "ok", "elapsed_ms": 812, "result": result, "preview": "", "ts": 3.0}),
            ],
            ..SessionDetail::default()
        })),
    );
    update(&mut a, key(KeyCode::Tab));
    // Not a backtest: the browser says where `s` works.
    assert!(update(&mut a, key(KeyCode::Char('s'))).is_empty());
    assert!(
        a.browser()
            .unwrap()
            .message
            .as_deref()
            .unwrap()
            .contains("backtest result")
    );
    // On the backtest's record (from the list, without opening it).
    update(&mut a, key(KeyCode::Down));
    let fx = update(&mut a, key(KeyCode::Char('s')));
    let [Effect::LoadTearSheet { id, run_dir }] = fx.as_slice() else {
        panic!("{fx:?}")
    };
    assert_eq!(run_dir, &PathBuf::from(RUN));
    assert_eq!(a.overlays.len(), 2, "over the browser");
    update(
        &mut a,
        Msg::TearSheetLoaded {
            id: *id,
            result: Ok(Box::new(hand_sheet())),
        },
    );
    let s = screen(&mut a, 80, 24, Instant::now());
    assert!(
        s.contains("1 Over") && s.contains("Cumulative Return"),
        "{s}"
    );
    update(&mut a, key(KeyCode::Esc));
    assert!(matches!(a.overlays.top(), Some(Overlay::Browser(_))));
}

#[test]
fn a_failed_load_says_why_and_s_without_a_result_says_how() {
    let mut a = app();
    update(&mut a, key(KeyCode::Tab));
    let fx = update(&mut a, key(KeyCode::Char('s')));
    assert!(fx.is_empty(), "{fx:?}");
    assert!(a.overlays.is_empty());
    let s = screen(&mut a, 80, 24, Instant::now());
    assert!(s.contains("select a backtest cell"), "{s}");
    let mut b = open(hand_sheet());
    let id = view(&b).id;
    let err = load::load(std::path::Path::new("/nonexistent/run")).unwrap_err();
    update(
        &mut b,
        Msg::TearSheetLoaded {
            id,
            result: Err(err),
        },
    );
    let s = screen(&mut b, 80, 24, Instant::now());
    assert!(
        s.contains("no tear sheet:") && s.contains("equity.csv"),
        "{s}"
    );
    // The report key waits for a sheet.
    assert!(update(&mut b, key(KeyCode::Char('r'))).is_empty());
}
