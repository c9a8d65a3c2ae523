//! Backtest throughput (issue 5): SMA(20/50) crossover, commission 0.1 %,
//! on synthetic random-walk bars — one symbol × 2,520 bars, one symbol ×
//! 252,000 bars, and 100 symbols × 2,520 bars.
//!
//! Reported per case (best of several runs, bars = bars × symbols):
//! - `core`: [`engine::simulate`] alone on a prepared panel and targets —
//!   the execution model's inner loop — with fresh output buffers, and
//!   with them reused ([`engine::simulate_into`]) as a parameter sweep runs;
//! - `in-process`: signals + alignment + simulation + every §7.5 metric
//!   ([`backtest::evaluate`]), no I/O;
//! - for 100 × 2,520 the CSV parser alone (one thread), and the whole run
//!   through the sandbox, as the `backtest` tool does it: 100 CSV files in
//!   the run dir's `data/`, `config.json`, `vibedesk engine` as a sandboxed
//!   child (release build), artifacts, chart (SVG + PNG) and run card; and
//!   the same engine work in-process ([`backtest::run_in_dir`]) to show the
//!   sandbox's share. Both with 17-digit prices and with prices in cents.
//!
//! - the embedded offline market: the first load of one symbol (its block
//!   inflated and decoded, the index parsed) and of all 131, and the
//!   decode alone (best of several runs).
//!
//! `cargo bench --bench backtest`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{Datelike, NaiveDate, Weekday};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use vibedesk::research::backtest::config::BacktestConfig;
use vibedesk::research::backtest::validation::Rng;
use vibedesk::research::backtest::{self as bt, RunOptions, SimParams, engine};
use vibedesk::research::data::{Bars, PriceSeries, Provenance, Source, detect_market};
use vibedesk::sandbox::RunnerConfig;
use vibedesk::tools::builtin::backtest::{BacktestToolConfig, run_backtest};

/// Weekdays from 2000-01-03.
fn weekdays(n: usize) -> Vec<NaiveDate> {
    let mut d = NaiveDate::from_ymd_opt(2000, 1, 3).unwrap();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        if !matches!(d.weekday(), Weekday::Sat | Weekday::Sun) {
            out.push(d);
        }
        d = d.succ_opt().unwrap();
    }
    out
}

/// How the CSV numbers of the end-to-end case look.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    /// Every price a full 17-digit double: the parser's and the
    /// formatter's worst case (~103 bytes a row).
    FullPrecision,
    /// Prices to the cent and whole-share volumes, as real daily files are
    /// (the embedded set, Yahoo and Stooq CSVs; ~45 bytes a row).
    Market,
}

/// A geometric random walk with a little drift; OHLC consistent.
fn synthetic(n: usize, seed: u64) -> Bars {
    synthetic_shaped(n, seed, Shape::FullPrecision)
}

fn synthetic_shaped(n: usize, seed: u64, shape: Shape) -> Bars {
    // Nearest double to a whole number of cents: its shortest form is the
    // cent value itself, as a price file would spell it.
    let cents = |x: f64| match shape {
        Shape::FullPrecision => x,
        Shape::Market => (x * 100.0).round() / 100.0,
    };
    let mut rng = Rng::new(seed);
    let mut u = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let dates = weekdays(n);
    let mut b = Bars::with_capacity(n);
    let mut p = 100.0;
    for d in dates {
        let o = cents(p * (1.0 + (u() - 0.5) * 0.01));
        let c = cents(o * (1.0 + (u() - 0.5) * 0.04 + 0.0003));
        let h = cents(o.max(c) * (1.0 + u() * 0.01)).max(o.max(c));
        let l = cents(o.min(c) * (1.0 - u() * 0.01)).min(o.min(c));
        let v = 1e6 * (1.0 + u());
        let v = if shape == Shape::Market { v.round() } else { v };
        b.push(d, o, h, l, c, v);
        p = c;
    }
    b
}

fn series(code: &str, bars: Bars) -> PriceSeries {
    PriceSeries {
        symbol: code.to_string(),
        provenance: Provenance {
            symbol: code.to_string(),
            market: detect_market(code),
            source: Source::Local,
            requested_source: "local".into(),
            location: "synthetic".into(),
            fetched_at: chrono::Utc::now(),
            from_cache: false,
            rows: bars.len(),
            first_date: bars.first_date(),
            last_date: bars.last_date(),
            adjustments: vec![],
            dropped: Default::default(),
            notes: vec![],
            attempts: vec![],
        },
        bars,
        source_rows: None,
    }
}

/// Three-letter tickers (US-equity shaped): AAA, AAB, ...
fn code(i: usize) -> String {
    let l = |x: usize| (b'A' + (x % 26) as u8) as char;
    format!("{}{}{}", l(i / 676), l(i / 26), l(i))
}

fn config(codes: &[String], start: NaiveDate, end: NaiveDate, source: &str) -> serde_json::Value {
    json!({"codes": codes, "start_date": start.to_string(), "end_date": end.to_string(), "source": source,
           "initial_cash": 1_000_000, "commission_rate": 0.001,
           "strategy": {"name": "sma_crossover", "params": {"fast": 20, "slow": 50}}})
}

fn best<F: FnMut()>(runs: usize, mut f: F) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed());
    }
    best
}

fn rate(bars: usize, d: Duration) -> String {
    let r = bars as f64 / d.as_secs_f64();
    if r >= 1e6 {
        format!("{:8.1} M bars/s", r / 1e6)
    } else {
        format!("{:8.0} bars/s", r)
    }
}

fn case(name: &str, symbols: usize, n: usize, runs: usize) {
    let all: Vec<PriceSeries> = (0..symbols)
        .map(|i| series(&code(i), synthetic(n, 42 + i as u64)))
        .collect();
    let codes: Vec<String> = all.iter().map(|s| s.symbol.clone()).collect();
    let first = all[0].bars.dates[0];
    let last = *all[0].bars.dates.last().unwrap();
    let cfg = BacktestConfig::from_value(&config(&codes, first, last, "local"), false).unwrap();
    let signals = bt::rust_signals(&cfg.strategy, &all);
    let (_, rules, _) = engine::rules_for(&codes, &cfg.costs);
    let bars: Vec<&Bars> = all.iter().map(|s| &s.bars).collect();
    let panel = engine::Panel::new(&codes, &bars, 5);
    let targets = engine::align_targets(&panel, &signals, &rules, 5);
    let params = SimParams {
        initial_cash: cfg.initial_cash,
        adjustment: cfg.position_adjustment,
        tolerance: 0.0,
        rules: &rules,
    };
    let mut trades = 0;
    let core = best(runs, || {
        let sim = engine::simulate(&panel, &targets, &params);
        trades = sim.trades.len();
        std::hint::black_box(sim);
    });
    // As a parameter sweep runs it: the output buffers reused.
    let mut reused = engine::Simulation::default();
    let sweep = best(runs, || {
        engine::simulate_into(&panel, &targets, &params, &mut reused);
        std::hint::black_box(&reused);
    });
    assert_eq!(reused.trades.len(), trades);
    let full = best(runs.min(20), || {
        let s = bt::rust_signals(&cfg.strategy, &all);
        std::hint::black_box(bt::evaluate(&cfg, &all, &s, None));
    });
    let total = symbols * n;
    println!(
        "{name:<22} core {:>9.3} ms {}   core, buffers reused {:>9.3} ms {}   in-process {:>9.3} ms {}   ({trades} trades)",
        core.as_secs_f64() * 1e3,
        rate(total, core),
        sweep.as_secs_f64() * 1e3,
        rate(total, sweep),
        full.as_secs_f64() * 1e3,
        rate(total, full)
    );
}

fn write_csv(path: &Path, b: &Bars, shape: Shape) {
    let mut buf = Vec::with_capacity(b.len() * 64);
    buf.extend_from_slice(b"date,open,high,low,close,volume\n");
    match shape {
        Shape::FullPrecision => bt::artifacts::push_ohlcv_rows(&mut buf, b),
        // Whole-share volumes without a decimal point, as files have them.
        Shape::Market => {
            use std::io::Write;
            for i in 0..b.len() {
                bt::artifacts::push_date(&mut buf, b.dates[i]);
                for col in [&b.open, &b.high, &b.low, &b.close] {
                    buf.push(b',');
                    bt::artifacts::push_f64(&mut buf, col[i]);
                }
                writeln!(buf, ",{}", b.volume[i] as u64).unwrap();
            }
        }
    }
    std::fs::write(path, buf).unwrap();
}

/// A copy of the template run dir (data and config only): what a first
/// run sees, with no parsed-bars cache and no previous artifacts.
fn fresh_copy(template: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("data")).unwrap();
    std::fs::copy(template.join("config.json"), to.join("config.json")).unwrap();
    for e in std::fs::read_dir(template.join("data")).unwrap().flatten() {
        std::fs::copy(e.path(), to.join("data").join(e.file_name())).unwrap();
    }
}

fn sandbox_case(runs: usize, shape: Shape) {
    let label = match shape {
        Shape::FullPrecision => "17-digit prices",
        Shape::Market => "prices in cents",
    };
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("template");
    std::fs::create_dir_all(template.join("data")).unwrap();
    let codes: Vec<String> = (0..100).map(code).collect();
    let mut first = None;
    let mut last = None;
    for (i, c) in codes.iter().enumerate() {
        let b = synthetic_shaped(2_520, 42 + i as u64, shape);
        first = b.first_date();
        last = b.last_date();
        write_csv(&template.join("data").join(format!("{c}.csv")), &b, shape);
    }
    let cfg = config(&codes, first.unwrap(), last.unwrap(), "local");
    std::fs::write(
        template.join("config.json"),
        serde_json::to_vec_pretty(&cfg).unwrap(),
    )
    .unwrap();
    let run_dir = dir.path().join("run");
    fresh_copy(&template, &run_dir);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let opts = RunOptions {
        offline: true,
        ..RunOptions::default()
    };
    // The CSV parser alone, one thread, on the 100 files held in memory.
    let texts: Vec<Vec<u8>> = codes
        .iter()
        .map(|c| std::fs::read(template.join("data").join(format!("{c}.csv"))).unwrap())
        .collect();
    let parse = best(runs, || {
        for t in &texts {
            let parsed = vibedesk::research::data::local::parse_csv(t, "f.csv", None);
            std::hint::black_box(parsed.unwrap());
        }
    });
    let text_bytes: usize = texts.iter().map(Vec::len).sum();
    println!(
        "100 x 2,520, {label}: CSV parse alone (one thread) {:.1} ms, {:.0} MB/s",
        parse.as_secs_f64() * 1e3,
        text_bytes as f64 / parse.as_secs_f64() / 1e6
    );
    // Where a first run's time goes (best of `runs` each; no cache used).
    let (cfg_parsed, config_bytes) = bt::load_config(&run_dir).unwrap();
    let mut data = None;
    let fetch = best(runs, || {
        data = Some(
            rt.block_on(bt::fetch_data(
                &cfg_parsed,
                &run_dir,
                &RunOptions {
                    offline: true,
                    ..RunOptions::default()
                },
            ))
            .unwrap(),
        );
        let _ = std::fs::remove_dir_all(run_dir.join(".cache"));
    });
    let (all, sources, _) = data.unwrap();
    let mut outcome = None;
    let eval = best(runs, || {
        let s = bt::rust_signals(&cfg_parsed.strategy, &all);
        outcome = Some(bt::evaluate(&cfg_parsed, &all, &s, None));
    });
    let outcome = outcome.unwrap();
    let write = best(runs, || {
        // Into a fresh directory, as `run_in_dir` writes.
        let _ = std::fs::remove_dir_all(run_dir.join("artifacts"));
        let w = bt::artifacts::write_all(&run_dir.join("artifacts"), &outcome, &all, || {
            bt::artifacts::write_ohlcv(&run_dir.join("artifacts"), &all, None).map(Some)
        })
        .unwrap();
        let card = bt::run_card::build(&run_dir, &outcome, &all, &sources, &config_bytes, b"x", &w);
        bt::run_card::write(&run_dir, &card).unwrap();
    });
    let chart = best(runs, || {
        let eq = &outcome.sim.equity;
        let dd = bt::metrics::drawdown_series(eq, 1e6);
        let be = bt::artifacts::benchmark_equity(&outcome);
        let d = bt::chart::ChartData {
            title: "t".into(),
            dates: &outcome.panel.dates,
            equity: eq,
            benchmark: Some(&be),
            benchmark_label: &outcome.benchmark_label,
            drawdown: &dd,
        };
        std::hint::black_box(bt::chart::svg(&d).unwrap());
        std::hint::black_box(bt::chart::png(&d).unwrap());
    });
    let csv_bytes: u64 = std::fs::read_dir(template.join("data"))
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum();
    println!(
        "100 x 2,520, {label}, {:.1} MB of CSV: first-run phases: load 100 CSVs {:.1} ms, signals+simulation+metrics {:.1} ms, artifacts+chart+run card {:.1} ms (chart alone {:.1} ms)",
        csv_bytes as f64 / 1e6,
        fetch.as_secs_f64() * 1e3,
        eval.as_secs_f64() * 1e3,
        write.as_secs_f64() * 1e3,
        chart.as_secs_f64() * 1e3
    );
    let tool = BacktestToolConfig {
        engine_program: env!("CARGO_BIN_EXE_vibedesk").into(),
        runner: RunnerConfig::default(),
        cache_dir: None,
        offline: true,
        python: None,
        timeout: Duration::from_secs(300),
        yahoo_base_url: None,
        stooq_base_url: None,
        defaults: Default::default(),
    };
    let cancel = CancellationToken::new();
    // A first run: a fresh copy of the run dir each time (made off the clock).
    let mut copies = 0;
    // Returns the best first run and the best second run in the same copy
    // (a sweep's second run parses again and keeps the parses for later
    // runs; from the third on they are read).
    let mut cold = |sandboxed: bool| {
        let (mut first, mut second) = (Duration::MAX, Duration::MAX);
        for _ in 0..runs.min(5) {
            copies += 1;
            let run = dir.path().join(format!("copy{copies}"));
            fresh_copy(&template, &run);
            for slot in [&mut first, &mut second] {
                let t = Instant::now();
                if sandboxed {
                    let r = rt.block_on(run_backtest(&tool, &run, &[], &cancel));
                    assert_eq!(r["status"], "ok", "{r:#}");
                } else {
                    rt.block_on(bt::run_in_dir(&run, &opts)).unwrap();
                }
                *slot = (*slot).min(t.elapsed());
            }
            let _ = std::fs::remove_dir_all(&run);
        }
        (first, second)
    };
    let cold_sandboxed = cold(true);
    let cold_in_process = cold(false);
    // A rerun in the same run dir (a parameter sweep): the parsed bars and
    // the unchanged OHLCV files of the previous run are reused.
    let mut last_result = serde_json::Value::Null;
    let warm_sandboxed = best(runs, || {
        last_result = rt.block_on(run_backtest(&tool, &run_dir, &[], &cancel));
    });
    assert_eq!(last_result["status"], "ok", "{last_result:#}");
    let warm_in_process = best(runs, || {
        rt.block_on(bt::run_in_dir(&run_dir, &opts)).unwrap();
    });
    println!(
        "100 x 2,520, {label}, end to end, first run: sandboxed `vibedesk engine` {:.1} ms, in-process run_in_dir {:.1} ms",
        cold_sandboxed.0.as_secs_f64() * 1e3,
        cold_in_process.0.as_secs_f64() * 1e3
    );
    println!(
        "100 x 2,520, {label}, end to end, second run: sandboxed `vibedesk engine` {:.1} ms, in-process run_in_dir {:.1} ms",
        cold_sandboxed.1.as_secs_f64() * 1e3,
        cold_in_process.1.as_secs_f64() * 1e3
    );
    println!(
        "100 x 2,520, {label}, end to end, later runs: sandboxed `vibedesk engine` {:.1} ms, in-process run_in_dir {:.1} ms  [CSV load or cache, SMA signals, simulation, metrics, 100 OHLCV + 6 tables, SVG + PNG chart, run card]",
        warm_sandboxed.as_secs_f64() * 1e3,
        warm_in_process.as_secs_f64() * 1e3
    );
}

/// Loading from the embedded offline market (docs §7.3).
fn embedded_case() {
    use vibedesk::research::data::embedded;
    let t = Instant::now();
    let aapl = embedded::load("AAPL", None, None).unwrap();
    let first = t.elapsed();
    let t = Instant::now();
    let all = embedded::universe().unwrap();
    let mut rows = 0;
    for x in all {
        rows += embedded::load(&x.ticker, None, None).unwrap().bars.len();
    }
    let rest = t.elapsed();
    let best = |f: &dyn Fn() -> usize| {
        (0..10)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed()
            })
            .min()
            .unwrap_or_default()
    };
    let one = best(&|| embedded::raw_columns("AAPL").unwrap().len());
    let every = best(&|| {
        all.iter()
            .map(|x| embedded::raw_columns(&x.ticker).unwrap().len())
            .sum()
    });
    let t = Instant::now();
    let days = vibedesk::research::data::rates::curve().unwrap().len();
    let curve = t.elapsed();
    println!(
        "embedded market: first load of AAPL ({} bars) {:.2} ms; then of the other {} ({rows} bars in all) {:.1} ms; decode alone: AAPL {:.2} ms, all {:.1} ms; the Treasury curve ({days} days) {:.2} ms",
        aapl.bars.len(),
        first.as_secs_f64() * 1e3,
        all.len() - 1,
        rest.as_secs_f64() * 1e3,
        one.as_secs_f64() * 1e3,
        every.as_secs_f64() * 1e3,
        curve.as_secs_f64() * 1e3
    );
}

fn main() {
    embedded_case();
    println!("SMA(20/50) crossover, commission 0.1 %, slippage 0.05 %, whole shares, hold mode");
    case("1 x 2,520", 1, 2_520, 200);
    case("1 x 252,000", 1, 252_000, 20);
    case("100 x 2,520", 100, 2_520, 20);
    sandbox_case(10, Shape::FullPrecision);
    sandbox_case(10, Shape::Market);
}
