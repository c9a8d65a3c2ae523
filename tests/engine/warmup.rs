//! Warm-up history and the whole range (issue 23, items 1 and 3; docs
//! §7.4.1 and §2.12): an indicator's value and a strategy's signal on a date
//! do not depend on the requested start, a backtest trades from its first
//! bar on warm signals and says how much history it had, and "the last N
//! rows" of a range are its true last rows, through the real tools, the
//! engine and `vibedesk run`.
//!
//! Expected values are derived from the embedded data at test time (never
//! copied from the output under test), so the tests hold whatever prices
//! the embedded set carries.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::harness::vibedesk;
use crate::support::outside::Outside;
use chrono::NaiveDate;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::research::backtest as bt;
use vibedesk::research::data::{DataConfig, embedded};
use vibedesk::research::indicators;
use vibedesk::sandbox::{RunnerConfig, UserPolicy};
use vibedesk::tools::builtin::backtest::{BacktestToolConfig, register_backtest_tools};
use vibedesk::tools::builtin::market::register_market_tools_with;
use vibedesk::tools::{BackgroundQueue, Registry, ToolContext};

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");

fn d(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

struct Fx {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
}

fn fixture() -> Fx {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (run, ws) = (dir.path().join("run"), dir.path().join("ws"));
    std::fs::create_dir_all(&run).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let ctx = ToolContext {
        call_id: "c1".into(),
        session_id: "s".into(),
        run_dir: run,
        workspace: ws,
        cancel: CancellationToken::new(),
        background: BackgroundQueue::default(),
    };
    Fx { _dir: dir, ctx }
}

/// The market tools and the backtest tool (offline, the real sandbox).
fn registry() -> Registry {
    let mut r = Registry::new();
    register_market_tools_with(&mut r, DataConfig::offline()).unwrap();
    let cfg = BacktestToolConfig {
        engine_program: PathBuf::from(BIN),
        runner: RunnerConfig {
            timeout: Duration::from_secs(60),
            drain_timeout: Duration::from_secs(2),
            user: UserPolicy::Auto,
            ..RunnerConfig::default()
        },
        cache_dir: None,
        offline: true,
        python: None,
        defaults: Default::default(),
        timeout: Duration::from_secs(60),
        yahoo_base_url: None,
        stooq_base_url: None,
    };
    register_backtest_tools(&mut r, cfg).unwrap();
    r
}

async fn call(r: &Registry, tool: &str, args: Value, ctx: &ToolContext) -> Value {
    let out = r.get(tool).unwrap().call(args, ctx).await.unwrap();
    serde_json::from_str(&out).unwrap()
}

/// AAPL's embedded closes and dates from its first bar to `end`.
fn aapl_to(end: &str) -> vibedesk::research::data::Bars {
    embedded::load("AAPL", None, Some(d(end))).unwrap().bars
}

fn close_to(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1.0)
}

// ---------------------------------------------------------------------------
// Indicators

/// RSI, EMA, MACD and SMA of AAPL on 2008-01-25 asked from three starts:
/// the same value (to 1e-9) from each, equal to the value computed here on
/// all of AAPL's history, with a warm-up record that had enough bars.
#[tokio::test]
async fn an_indicator_value_on_a_date_does_not_depend_on_the_start() {
    let fx = fixture();
    let r = registry();
    let bars = aapl_to("2008-01-25");
    let c = &bars.close;
    let last = c.len() - 1;
    let macd = indicators::macd(c, 12, 26, 9).unwrap();
    let cases: [(&str, Value, &str, f64); 4] = [
        (
            "rsi",
            json!({"period": 14}),
            "rsi",
            indicators::rsi(c, 14).unwrap()[last],
        ),
        (
            "ema",
            json!({"span": 20}),
            "ema",
            indicators::ema(c, 20).unwrap()[last],
        ),
        ("macd", json!({}), "histogram", macd.histogram[last]),
        (
            "sma",
            json!({"window": 50}),
            "sma",
            indicators::sma(c, 50).unwrap()[last],
        ),
    ];
    for (name, params, column, expected) in cases {
        let mut seen = Vec::new();
        for start in ["2008-01-02", "2007-06-01", "2006-01-03"] {
            let out = call(
                &r,
                "technical_indicator",
                json!({"symbol": "AAPL", "indicator": name, "params": params,
                       "start": start, "end": "2008-01-25", "source": "embedded", "tail": 5}),
                &fx.ctx,
            )
            .await;
            assert_eq!(out["status"], "ok", "{out:#}");
            assert_eq!(out["latest"]["date"], "2008-01-25");
            let v = out["latest"][column]
                .as_f64()
                .unwrap_or_else(|| panic!("{name} from {start}: no value: {out:#}"));
            // The tool rounds to 8 significant digits.
            assert!(
                close_to(v, expected, 1e-7),
                "{name} from {start}: {v} vs {expected} on all the history"
            );
            let w = &out["warmup"];
            let needed = w["bars_needed"].as_u64().unwrap();
            assert!(needed > 0, "{w}");
            assert!(w["bars_used"].as_u64().unwrap() >= needed, "{name}: {w}");
            assert!(w.get("note").is_none(), "{w}");
            assert_eq!(out["warmup_nan_rows"], 0, "warm from the first row");
            // The range shown starts on the start: the history is not shown.
            let first = out["provenance"]["first_date"].as_str().unwrap();
            assert!(first >= start, "{first} before {start}");
            seen.push((start, v, out["tail"].clone()));
        }
        for (start, v, tail) in &seen[1..] {
            assert!(
                (v - seen[0].1).abs() <= 1e-9,
                "{name}: {v} from {start} vs {} from {}",
                seen[0].1,
                seen[0].0
            );
            assert_eq!(tail, &seen[0].2, "{name}: the same rows from {start}");
        }
    }
}

/// A start near the first date of the data: the value is computed on the
/// bars there are, and the record says how many, of how many, and from
/// which date values are warm.
#[tokio::test]
async fn too_little_history_for_an_indicator_is_said_plainly() {
    let fx = fixture();
    let r = registry();
    let bars = aapl_to("2001-12-31");
    let start = bars.dates[3];
    let out = call(
        &r,
        "technical_indicator",
        json!({"symbol": "AAPL", "indicator": "rsi", "start": start.to_string(),
               "end": "2001-12-31", "source": "embedded"}),
        &fx.ctx,
    )
    .await;
    assert_eq!(out["status"], "ok", "{out:#}");
    let w = &out["warmup"];
    let needed = w["bars_needed"].as_u64().unwrap() as usize;
    assert_eq!(w["bars_used"], 3, "{w}");
    let note = w["note"].as_str().unwrap();
    assert!(note.contains(&format!("3 of {needed}")), "{note}");
    assert!(note.contains(&bars.dates[0].to_string()), "{note}");
    assert!(
        note.contains(&format!("from {} on are warm", bars.dates[needed])),
        "{note}"
    );
}

// ---------------------------------------------------------------------------
// Backtests

fn sma_config(start: &str, end: &str) -> Value {
    json!({"codes": ["AAPL"], "start_date": start, "end_date": end, "source": "embedded",
           "strategy": {"name": "sma_crossover", "params": {"fast": 20, "slow": 50}}})
}

/// SMA20 > SMA50 on the last bar before 2005: a 20/50 crossover from
/// 2005-01-01 is long from its first bar (the order at the first open comes
/// from the warm signal of the bar before), and its run card, metrics and
/// the tool's answer say how much warm-up it had.
#[tokio::test]
async fn a_backtest_trades_on_its_first_bar_with_warm_signals() {
    let bars = aapl_to("2004-12-31");
    let c = &bars.close;
    let last = c.len() - 1;
    let (fast, slow) = (
        indicators::sma(c, 20).unwrap()[last],
        indicators::sma(c, 50).unwrap()[last],
    );
    assert!(
        fast > slow,
        "the premise: SMA20 {fast} > SMA50 {slow} on {}",
        bars.dates[last]
    );
    let first_bar = embedded::load("AAPL", Some(d("2005-01-01")), Some(d("2005-12-31")))
        .unwrap()
        .bars
        .dates[0];

    let fx = fixture();
    let r = registry();
    let out = call(
        &r,
        "backtest",
        json!({"run_dir": "warm", "config": sma_config("2005-01-01", "2006-12-31")}),
        &fx.ctx,
    )
    .await;
    assert_eq!(out["status"], "ok", "{out:#}");
    let run = fx.ctx.run_dir.join("warm");
    let fills = std::fs::read_to_string(run.join("artifacts/fills.jsonl")).unwrap();
    let first: Value = serde_json::from_str(fills.lines().next().unwrap()).unwrap();
    assert_eq!(first["timestamp"], first_bar.to_string(), "{first}");
    assert_eq!(first["action"], "open_long", "{first}");
    assert_eq!(first["bar_idx"], 0);

    let card: Value =
        serde_json::from_slice(&std::fs::read(run.join("run_card.json")).unwrap()).unwrap();
    let w = &card["backtest"]["warmup"];
    assert_eq!(
        w["bars_needed"], 50,
        "the slow SMA and the one-bar shift: {w}"
    );
    assert_eq!(
        w["bars_used"],
        bars.len(),
        "all the history before the start: {w}"
    );
    assert!(w.get("note").is_none(), "{w}");
    assert_eq!(out["warmup"], *w, "the tool's answer carries the record");
    // Everything else covers the range only.
    assert_eq!(card["backtest"]["first_bar"], first_bar.to_string());
    let equity = std::fs::read_to_string(run.join("artifacts/equity.csv")).unwrap();
    assert!(
        equity
            .lines()
            .nth(1)
            .unwrap()
            .starts_with(&first_bar.to_string()),
        "{}",
        equity.lines().nth(1).unwrap()
    );
    assert_eq!(
        card["data_sources"]["series"][0]["first_date"],
        first_bar.to_string()
    );
    let md = std::fs::read_to_string(run.join("run_card.md")).unwrap();
    assert!(md.contains("warm-up: 50 bars needed"), "{md}");

    // The same signals from an earlier start: the trades inside the later
    // range are the same trades (entry dates and sides).
    let early = call(
        &r,
        "backtest",
        json!({"run_dir": "early", "config": sma_config("2004-06-01", "2006-12-31")}),
        &fx.ctx,
    )
    .await;
    assert_eq!(early["status"], "ok", "{early:#}");
    let opens = |dir: &Path| -> Vec<String> {
        std::fs::read_to_string(dir.join("artifacts/fills.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|f| f["action"] == "open_long" && f["timestamp"].as_str() > Some("2005-01-03"))
            .map(|f| f["timestamp"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(opens(&run), opens(&fx.ctx.run_dir.join("early")));
    assert!(!opens(&run).is_empty());
}

/// A backtest that starts three bars after the data begins: it runs on the
/// history there is and says plainly that it was too little, in the
/// record's note and the warnings.
#[tokio::test]
async fn a_backtest_with_too_little_history_says_so() {
    let bars = aapl_to("2001-12-31");
    let start = bars.dates[3];
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(
        run.join("config.json"),
        sma_config(&start.to_string(), "2001-12-31").to_string(),
    )
    .unwrap();
    let opts = bt::RunOptions {
        offline: true,
        ..bt::RunOptions::default()
    };
    let summary = bt::run_in_dir(&run, &opts).await.unwrap();
    let card: Value =
        serde_json::from_slice(&std::fs::read(run.join("run_card.json")).unwrap()).unwrap();
    let w = &card["backtest"]["warmup"];
    assert_eq!(
        (w["bars_needed"].as_u64(), w["bars_used"].as_u64()),
        (Some(50), Some(3))
    );
    let note = w["note"].as_str().unwrap();
    assert!(
        note.starts_with("AAPL: 3 of 50 warm-up bars before"),
        "{note}"
    );
    assert!(
        note.contains(&format!("its data begins {}", bars.dates[0])),
        "{note}"
    );
    assert!(
        note.contains(&format!("from {} on are warm", bars.dates[50])),
        "{note}"
    );
    assert!(
        summary
            .warnings
            .iter()
            .any(|x| x.contains("too little warm-up history") && x.contains(note)),
        "{:?}",
        summary.warnings
    );
    // No order can come before the signals are warm.
    let fills = std::fs::read_to_string(run.join("artifacts/fills.jsonl")).unwrap();
    if let Some(l) = fills.lines().next() {
        let first: Value = serde_json::from_str(l).unwrap();
        assert!(first["timestamp"].as_str().unwrap() > bars.dates[49].to_string().as_str());
    }
}

// ---------------------------------------------------------------------------
// The whole range

/// The embedded AAPL dates in `[from, to]`.
fn aapl_days(from: &str, to: &str) -> Vec<String> {
    embedded::load("AAPL", Some(d(from)), Some(d(to)))
        .unwrap()
        .bars
        .dates
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// `get_market_data` with `last_n`: the range's true last rows, the range's
/// row count; anchored at an end on a Sunday, the N rows up to the Friday.
#[tokio::test]
async fn the_last_rows_of_a_range_end_on_its_last_trading_day() {
    let fx = fixture();
    let r = registry();
    let days = aapl_days("2008-09-01", "2009-03-31");
    let out = call(
        &r,
        "get_market_data",
        json!({"symbol": "AAPL", "start": "2008-09-01", "end": "2009-03-31", "last_n": 30}),
        &fx.ctx,
    )
    .await;
    let rows = out["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 30);
    assert_eq!(out["total"], days.len(), "the rows in the range");
    assert_eq!(rows.last().unwrap()[0], *days.last().unwrap());
    assert_eq!(rows[0][0], days[days.len() - 30]);
    assert_eq!(out["offset"], days.len() - 30);
    assert_eq!(out["complete"], true);
    assert_eq!(
        out["summary"]["first_date"], days[0],
        "the summary is the range's"
    );
    assert_eq!(out["summary"]["last_date"], *days.last().unwrap());
    assert_eq!(out["provenance"]["rows"], days.len());

    // Without last_n the range is paged from its first row; the last page
    // ends on the range's last day too.
    let mut offset = 0u64;
    let mut last_row = Value::Null;
    loop {
        let page = call(
            &r,
            "get_market_data",
            json!({"symbol": "AAPL", "start": "2008-09-01", "end": "2009-03-31", "offset": offset}),
            &fx.ctx,
        )
        .await;
        last_row = page["rows"]
            .as_array()
            .unwrap()
            .last()
            .cloned()
            .unwrap_or(last_row);
        match page["next_offset"].as_u64() {
            Some(n) => offset = n,
            None => break,
        }
    }
    assert_eq!(last_row[0], *days.last().unwrap());

    // "The last 20 trading days to 2009-03-29" (a Sunday): 20 rows, the
    // last on the Friday before.
    let sunday = "2009-03-29";
    let before = aapl_days("2008-01-01", sunday);
    let out = call(
        &r,
        "get_market_data",
        json!({"symbol": "AAPL", "end": sunday, "last_n": 20}),
        &fx.ctx,
    )
    .await;
    let rows = out["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 20, "{out:#}");
    assert_eq!(out["total"], 20);
    assert_eq!(rows.last().unwrap()[0], *before.last().unwrap());
    assert_eq!(rows[0][0], before[before.len() - 20]);
    assert_eq!(out["summary"]["first_date"], before[before.len() - 20]);
}

/// The table rows of an answer: `| date | … |` lines with a date.
fn table_dates(answer: &str) -> Vec<String> {
    answer
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" |").next())
        .filter(|c| NaiveDate::parse_from_str(c, "%Y-%m-%d").is_ok())
        .map(str::to_string)
        .collect()
}

/// `vibedesk run` offline: the table of a range ends on the range's last
/// trading day and says how many rows the range holds; "the last 20
/// trading days" is 20 rows.
#[tokio::test]
async fn vibedesk_run_shows_the_true_last_rows() {
    let home = tempfile::tempdir().unwrap();
    let run = |prompt: &'static str| {
        let mut c = vibedesk(home.path());
        c.args(["run", "-p", prompt]);
        async move {
            let out = c.output().await.unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    let days = aapl_days("2008-09-01", "2009-03-31");
    let answer = run("Get the daily prices of AAPL from 2008-09-01 to 2009-03-31.").await;
    let shown = table_dates(&answer);
    assert_eq!(shown.last(), days.last(), "{answer}");
    assert_eq!(shown, days[days.len() - shown.len()..].to_vec(), "{answer}");
    assert!(
        answer.contains(&format!("(the last {} of {})", shown.len(), days.len())),
        "{answer}"
    );

    let answer = run(
        "Get the daily prices of AAPL for the last 20 trading days from 2009-01-01 to 2009-03-31.",
    )
    .await;
    let shown = table_dates(&answer);
    assert_eq!(shown.len(), 20, "{answer}");
    assert_eq!(shown, days[days.len() - 20..].to_vec(), "{answer}");
}

/// A Python strategy is given the warm-up bars too (its DataFrames begin
/// before the start) and its signals are cut to the range: long from the
/// first bar, as the built-in crossover. Skipped without pandas, unless
/// VIBEDESK_REQUIRE_PANDAS is set (CI).
#[tokio::test]
async fn a_python_strategy_sees_the_warm_up_bars() {
    if !Outside::Pandas.available() {
        return;
    }
    const ENGINE: &str = r#"
class SignalEngine:
    def generate(self, data_map):
        out = {}
        for code, df in data_map.items():
            if df.index[0] >= df.index.max().replace(year=2005, month=1, day=1):
                raise ValueError("no warm-up bars before the start")
            fast = df["close"].rolling(20).mean()
            slow = df["close"].rolling(50).mean()
            out[code] = (fast > slow).astype(float)
        return out
"#;
    let fx = fixture();
    let r = registry();
    let dir = fx.ctx.run_dir.join("py");
    std::fs::create_dir_all(dir.join("code")).unwrap();
    std::fs::write(dir.join("code/signal_engine.py"), ENGINE).unwrap();
    let mut config = sma_config("2005-01-01", "2006-12-31");
    config.as_object_mut().unwrap().remove("strategy");
    config["warmup_bars"] = json!(60);
    let py = call(
        &r,
        "backtest",
        json!({"run_dir": "py", "config": config}),
        &fx.ctx,
    )
    .await;
    assert_eq!(py["status"], "ok", "{py:#}");
    assert_eq!(py["warmup"]["bars_needed"], 60, "{py:#}");
    let rs = call(
        &r,
        "backtest",
        json!({"run_dir": "rs", "config": sma_config("2005-01-01", "2006-12-31")}),
        &fx.ctx,
    )
    .await;
    let fills = |run: &str| {
        std::fs::read_to_string(fx.ctx.run_dir.join(run).join("artifacts/fills.jsonl")).unwrap()
    };
    assert_eq!(
        fills("py"),
        fills("rs"),
        "the same fills from the same warm signals"
    );
    assert_eq!(py["metrics"]["trade_count"], rs["metrics"]["trade_count"]);
}

/// A team member asked for "the last 20 trading days to D" after its
/// range (as in the shipped pairs and panel presets) gets 20 rows ending on
/// the last trading day on or before D (a Sunday here), not a calendar-day
/// guess.
#[tokio::test]
async fn a_team_member_gets_the_last_20_trading_days() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("config/swarm");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("tape.yaml"),
        "name: tape
title: Tape reader
agents:
  - {id: prices, role: Price analyst, tools: [get_market_data], max_iterations: 5}
tasks:
  - id: task-prices
    agent_id: prices
    prompt_template: |
      Read the tape of {target} from 2008-01-01 to 2009-03-29.
      Get the daily prices of {target} for the last 20 trading days to 2009-03-29.
variables:
  - {name: target, required: true}
",
    )
    .unwrap();
    let out = vibedesk(home.path())
        .args(["swarm", "run", "tape", "--var", "target=AAPL", "--json"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let finished: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "swarm_worker" && e["event"]["type"] == "tool_call_finished")
        .map(|e| e["event"]["output"].clone())
        .collect();
    assert_eq!(finished.len(), 1, "{finished:?}");
    let days = aapl_days("2008-01-01", "2009-03-29");
    let rows = finished[0]["rows"].as_array().unwrap();
    assert_eq!(finished[0]["total"], 20, "{:#}", finished[0]);
    assert_eq!(rows.last().unwrap()[0], *days.last().unwrap());
    assert_eq!(finished[0]["summary"]["first_date"], days[days.len() - 20]);
}

/// From an online source the backtest asks for the warm-up history too
/// (period1 before the start), the tool's prefetch hands it to the
/// sandboxed engine under the key the engine asks for (one request in all,
/// over two runs), and a source that has fewer bars says so.
#[tokio::test]
async fn online_data_is_fetched_with_its_warm_up_and_cached_under_that_range() {
    use crate::research_data::{Server, yahoo_routes};
    let server = Server::start(yahoo_routes()).await;
    let cache = tempfile::tempdir().unwrap();
    let fx = fixture();
    let mut r = Registry::new();
    register_backtest_tools(
        &mut r,
        BacktestToolConfig {
            engine_program: PathBuf::from(BIN),
            runner: RunnerConfig {
                timeout: Duration::from_secs(60),
                drain_timeout: Duration::from_secs(2),
                user: UserPolicy::Auto,
                ..RunnerConfig::default()
            },
            cache_dir: Some(cache.path().to_path_buf()),
            offline: false,
            python: None,
            defaults: Default::default(),
            timeout: Duration::from_secs(60),
            yahoo_base_url: Some(server.base.clone()),
            stooq_base_url: Some(server.base.clone()),
        },
    )
    .unwrap();
    let start = d("2024-01-16");
    let config = json!({"codes": ["AAPL"], "start_date": start.to_string(), "end_date": "2024-02-29",
                        "source": "yahoo", "strategy": {"name": "sma_crossover", "params": {"fast": 5, "slow": 10}}});
    for run in ["online1", "online2"] {
        let out = call(
            &r,
            "backtest",
            json!({"run_dir": run, "config": config}),
            &fx.ctx,
        )
        .await;
        assert_eq!(out["status"], "ok", "{out:#}");
        // AAPL's requests: the default benchmark SPY, which this server
        // does not serve, is asked for on its own (docs §7.5).
        let aapl = server
            .hits()
            .into_iter()
            .filter(|h| h.contains("AAPL"))
            .count();
        assert_eq!(aapl, 1, "{:?}", server.hits());
        let w = &out["warmup"];
        assert_eq!(w["bars_needed"], 10, "{out:#}");
        let used = w["bars_used"].as_u64().unwrap();
        assert!(
            used > 0 && used < 10,
            "the fixture begins on 2024-01-02: {w}"
        );
        assert!(
            w["note"]
                .as_str()
                .unwrap()
                .contains(&format!("{used} of 10")),
            "{w}"
        );
    }
    // period1 reaches back before the start by the warm-up's calendar span.
    let hit = &server.hits()[0];
    let period1: i64 = hit
        .split("period1=")
        .nth(1)
        .and_then(|s| s.split('&').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    let want = start - chrono::Duration::days(vibedesk::research::data::history_days(10));
    assert_eq!(
        period1,
        want.and_hms_opt(0, 0, 0).unwrap().and_utc().timestamp(),
        "{hit}"
    );
}
