//! Sweep throughput (issue 29, docs §18.6): the 174-parameter-set SMA grid
//! (fast 5–50 step 5, slow 20–200 step 10, fast < slow) on 100 symbols ×
//! 2,520 bars of the offline data, each symbol run alone (17,400 cells),
//! commission 0.1 %, fractional shares, no slippage; and vectorbt running
//! the same grid two ways (`benches/baseline/sweep.py`: its vectorised
//! idiom, `vbt.MA.run` for every window then `Portfolio.from_signals`, and
//! a per-window pandas loop; its pinned packages in
//! `benches/baseline/sweep-requirements.txt`, with the interpreter in
//! `VIBEDESK_BENCH_PYTHON`, default `python3`).
//!
//! Reported: the engine alone on every core and on one (prices loaded),
//! the whole `sweep run` in-process (load, cells, journal, results file),
//! cells/s, bar-combinations/s, each vectorbt way's first and warm times
//! and both ratios, with every final value checked against the per-window
//! way's (the vectorised idiom's agreement counted: its averages round
//! differently and flip exact ties); and the
//! peak memory (RSS) of a real `vibedesk sweep run` of 10,000 parameter
//! sets × 100 symbols (1,000,000 cells; `VIBEDESK_BENCH_SKIP_MEMORY` skips
//! it).
//!
//! `cargo bench --bench sweep`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::research::backtest::RunOptions;
use vibedesk::research::data::embedded;
use vibedesk::sweep::eval::Prepared;
use vibedesk::sweep::journal::Journal;
use vibedesk::sweep::local::{self, LocalOptions, run_cells};
use vibedesk::sweep::output;
use vibedesk::sweep::{Plan, Results, Row, Spec};

const BARS: usize = 2_520;
const SYMBOLS: usize = 100;
/// Bars a symbol needs before the window: the longest average, 200, warm.
const HISTORY: usize = 250;

/// The window (AAPL's last 2,520 bars) and 100 symbols with at least
/// [`HISTORY`] bars before it and 2,520 bars in it, or 2,519: the offline
/// set's ETFs lack one day (2011-02-17) that its stocks have. Each symbol
/// is run alone on its own calendar.
fn universe() -> (String, String, Vec<String>) {
    let aapl = embedded::bars("AAPL").unwrap();
    let n = aapl.dates.len();
    let (start, end) = (aapl.dates[n - BARS], aapl.dates[n - 1]);
    let mut picked = Vec::new();
    for s in embedded::symbols() {
        let b = embedded::bars(s).unwrap();
        let at = b.dates.partition_point(|d| *d < start);
        let to = b.dates.partition_point(|d| *d <= end);
        if at >= HISTORY && (BARS - 1..=BARS).contains(&(to - at)) {
            picked.push(s.to_string());
        }
        if picked.len() == SYMBOLS {
            break;
        }
    }
    assert_eq!(picked.len(), SYMBOLS, "100 symbols with the full window");
    (start.to_string(), end.to_string(), picked)
}

/// Each symbol's bars in the window.
fn window_bars(symbols: &[String], start: &str, end: &str) -> Vec<usize> {
    let (a, b) = (day(start), day(end));
    symbols
        .iter()
        .map(|s| {
            let d = embedded::bars(s).unwrap().dates;
            d.partition_point(|x| *x <= b) - d.partition_point(|x| *x < a)
        })
        .collect()
}

fn day(s: &str) -> chrono::NaiveDate {
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

fn spec(start: &str, end: &str, symbols: &[String], fast: Value, slow: Value) -> Spec {
    Spec::from_value(json!({
        "base": {"source": "embedded", "start_date": start, "end_date": end,
                 "commission_rate": 0.001, "slippage": 0.0, "lot_size": 0,
                 "strategy": {"name": "sma_crossover"}},
        "axes": {"strategy.params.fast": fast, "strategy.params.slow": slow},
        "constraint": "fast < slow",
        "universe": symbols,
    }))
    .unwrap()
}

fn best<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut secs = f64::INFINITY;
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        let r = std::hint::black_box(f());
        secs = secs.min(t.elapsed().as_secs_f64());
        out = Some(r);
    }
    (secs, out.unwrap())
}

fn engine(prep: &Prepared, threads: usize) -> Vec<Row> {
    let todo: Vec<usize> = (0..prep.plan.cell_count()).collect();
    let mut rows = Vec::with_capacity(todo.len());
    run_cells(prep, &todo, threads, &CancellationToken::new(), &mut |r| {
        rows.extend(r);
        Ok(())
    })
    .unwrap();
    rows.sort_by_key(|r| r.cell);
    rows
}

fn write_f64(dir: &Path, name: &str, values: impl Iterator<Item = f64>) {
    let bytes: Vec<u8> = values.flat_map(f64::to_le_bytes).collect();
    std::fs::write(dir.join(format!("{name}.f64")), bytes).unwrap();
}

/// vectorbt on the same grid: its seconds and final values (one per cell,
/// cells in the plan's order).
fn vectorbt(dir: &Path, plan: &Plan, start: &str, end: &str, symbols: &[String]) -> Option<Value> {
    if std::env::var_os("VIBEDESK_BENCH_NO_PYTHON").is_some() {
        return None;
    }
    let (a, b) = (day(start), day(end));
    // All the history before the window, as the engine loads it: a
    // rolling mean's rounding depends on where its running sum began.
    let (mut open, mut close, mut lens, mut hist) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for s in symbols {
        let bars = embedded::bars(s).unwrap();
        let at = bars.dates.partition_point(|d| *d < a);
        let to = bars.dates.partition_point(|d| *d <= b);
        open.extend_from_slice(&bars.open[..to]);
        close.extend_from_slice(&bars.close[..to]);
        lens.push(to - at);
        hist.push(at);
    }
    write_f64(dir, "open", open.into_iter());
    write_f64(dir, "close", close.into_iter());
    std::fs::write(
        dir.join("inputs.json"),
        json!({"bars": lens, "history": hist, "combos": plan.combos,
               "fees": 0.001, "init_cash": 1_000_000.0})
        .to_string(),
    )
    .unwrap();
    let python = std::env::var("VIBEDESK_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/baseline/sweep.py");
    let out = Command::new(&python).arg(script).arg(dir).output().ok()?;
    if !out.status.success() {
        eprintln!(
            "vectorbt baseline skipped ({python}: {}); set VIBEDESK_BENCH_PYTHON to an interpreter with benches/baseline/sweep-requirements.txt",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// Peak RSS of a real `vibedesk sweep run` of 10,000 parameter sets × 100
/// symbols, from the kernel's high-water mark of the children (this is the
/// first child: run before the vectorbt baseline).
fn memory_case(start: &str, end: &str, symbols: &[String]) -> Option<(usize, f64, u64)> {
    if std::env::var_os("VIBEDESK_BENCH_SKIP_MEMORY").is_some() {
        return None;
    }
    let exe = env!("CARGO_BIN_EXE_vibedesk");
    let dir = tempfile::tempdir().unwrap();
    let s = spec(
        start,
        end,
        symbols,
        json!({"from": 2, "to": 101, "step": 1}),
        json!({"from": 102, "to": 201, "step": 1}),
    );
    let cells = Plan::from_spec(&s).unwrap().cell_count();
    let path = dir.path().join("spec.json");
    std::fs::write(&path, s.source.to_string()).unwrap();
    let t = Instant::now();
    let st = Command::new(exe)
        .args(["sweep", "run"])
        .arg(&path)
        .arg("--out")
        .arg(dir.path().join("r.parquet"))
        .env("VIBEDESK_HOME", dir.path().join("home"))
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let secs = t.elapsed().as_secs_f64();
    let u = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    // ru_maxrss is in KiB on Linux.
    Some((cells, secs, u.max_rss() as u64 * 1024))
}

fn main() {
    let (start, end, symbols) = universe();
    let s = spec(
        &start,
        &end,
        &symbols,
        json!({"from": 5, "to": 50, "step": 5}),
        json!({"from": 20, "to": 200, "step": 10}),
    );
    let plan = Arc::new(Plan::from_spec(&s).unwrap());
    assert_eq!(plan.combos.len(), 174);
    let cells = plan.cell_count();
    let bars: usize = window_bars(&symbols, &start, &end).iter().sum();
    let bar_cells = (plan.combos.len() * bars) as f64;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let offline = RunOptions {
        offline: true,
        ..RunOptions::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let prep = rt
        .block_on(Prepared::load(plan.clone(), dir.path(), &offline))
        .unwrap();
    let load = t.elapsed().as_secs_f64();
    let threads = local::default_threads();
    let (t_all, rows) = best(5, || engine(&prep, threads));
    let (t_one, rows1) = best(3, || engine(&prep, 1));
    assert!(
        rows.iter()
            .zip(&rows1)
            .all(|(a, b)| a.final_value.to_bits() == b.final_value.to_bits())
    );
    // The whole run in-process: load, cells, journal, results file.
    let (t_run, _) = best(3, || {
        let out = dir.path().join(format!("r{}.parquet", rand_suffix()));
        let opts = LocalOptions {
            data_dir: dir.path().to_path_buf(),
            data: offline.clone(),
            threads: None,
        };
        rt.block_on(local::run(
            plan.clone(),
            &out,
            &opts,
            CancellationToken::new(),
            Arc::new(|_| {}),
        ))
        .unwrap()
    });

    println!(
        "sweep: {} parameter sets × {SYMBOLS} symbols ({bars} bars, {start} to {end}) = {cells} cells, each symbol alone\n",
        plan.combos.len()
    );
    println!(
        "{:<44} {:>10} {:>12} {:>16}",
        "case", "seconds", "cells/s", "bar-cells/s"
    );
    let line = |name: &str, secs: f64| {
        println!(
            "{name:<44} {secs:>10.4} {:>12.0} {:>16.3e}",
            cells as f64 / secs,
            bar_cells / secs
        )
    };
    println!("{:<44} {load:>10.4}", "load 100 symbols (embedded, once)");
    // The whole run's parts outside the cells, alone (one thread).
    let (t_journal, _) = best(3, || {
        let path = dir.path().join(format!("j{}.csv", rand_suffix()));
        let (mut journal, _) = Journal::open(&path, &plan).unwrap();
        for block in rows.chunks(512) {
            journal.append(block).unwrap();
        }
    });
    let (t_file, _) = best(3, || {
        let out = dir.path().join(format!("o{}.parquet", rand_suffix()));
        let results = Results::from_rows(rows.clone());
        output::write(&plan, &results, &out).unwrap();
    });
    println!(
        "{:<44} {t_journal:>10.4}",
        "  journal of every row (1 thread)"
    );
    println!(
        "{:<44} {t_file:>10.4}",
        "  results file, parquet (1 thread)"
    );
    line(&format!("engine, {threads} threads"), t_all);
    line("engine, 1 thread", t_one);
    line("sweep run in-process (load+cells+files)", t_run);

    // Before vectorbt: the kernel's peak for the children is the largest
    // child's, and vectorbt's 17,400 columns take gigabytes.
    if let Some((n, secs, rss)) = memory_case(&start, &end, &symbols) {
        println!(
            "\nmemory: `vibedesk sweep run` of {n} cells (10,000 parameter sets × {SYMBOLS} symbols, {bars} bars) in {secs:.1} s ({:.0} cells/s): peak RSS {:.0} MiB",
            n as f64 / secs,
            rss as f64 / (1024.0 * 1024.0)
        );
    }
    let vdir = tempfile::tempdir().unwrap();
    let mut disagree = 0usize;
    match vectorbt(vdir.path(), &plan, &start, &end, &symbols) {
        Some(v) => {
            let version = v["version"].as_str().unwrap_or("").to_string();
            let finals = |way: &str| -> Vec<f64> {
                v[way]["final_values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap_or(f64::NAN))
                    .collect()
            };
            // The per-window way is the engine's arithmetic: every value
            // must agree. The vectorised idiom rounds its averages
            // differently and flips exact ties: counted, not required.
            let (off, worst) = compare(&plan, &rows, &finals("per_window"), true);
            disagree = off;
            let (flipped, _) = compare(&plan, &rows, &finals("vectorised"), false);
            let seconds = |way: &str, at: &str| v[way][at].as_f64().unwrap();
            let vec_warm = seconds("vectorised", "warm_seconds");
            let loop_warm = seconds("per_window", "warm_seconds");
            line(
                &format!("vectorbt {version} vectorised, first (JIT)"),
                seconds("vectorised", "first_seconds"),
            );
            line(&format!("vectorbt {version} vectorised, warm"), vec_warm);
            line(
                "vectorbt per-window loop, first",
                seconds("per_window", "first_seconds"),
            );
            line("vectorbt per-window loop, warm", loop_warm);
            println!(
                "\nratio to vectorbt's vectorised idiom (MA.run + from_signals, warm): engine {:.1}×, whole run {:.1}×",
                vec_warm / t_all,
                vec_warm / t_run,
            );
            println!(
                "ratio to the per-window loop (warm): engine {:.1}×, whole run {:.1}×",
                loop_warm / t_all,
                loop_warm / t_run,
            );
            println!(
                "final values: {} of {cells} agree with the per-window way to 1e-9 (worst relative difference {worst:.1e}); {} of {cells} with the vectorised idiom (its MA.run rounds ties differently)",
                cells - off,
                cells - flipped
            );
        }
        None => println!("\nvectorbt: skipped"),
    }
    assert_eq!(disagree, 0, "final values differ from vectorbt's");
}

/// Cells whose final value differs from `finals` by more than 1e-9
/// (relative), and the worst relative difference; `show`: list the first.
fn compare(plan: &Plan, rows: &[Row], finals: &[f64], show: bool) -> (usize, f64) {
    assert_eq!(finals.len(), rows.len());
    let (mut off, mut worst) = (0usize, 0.0f64);
    for (r, f) in rows.iter().zip(finals) {
        let rel = (r.final_value - f).abs() / f.abs();
        worst = worst.max(rel);
        if rel > 1e-9 {
            if show && off < 5 {
                eprintln!(
                    "disagrees: {}: ours {} vectorbt {f}",
                    local::cell_label(plan, r.cell),
                    r.final_value
                );
            }
            off += 1;
        }
    }
    (off, worst)
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}
