//! The tear sheet's speed against quantstats (docs §20.1), side by side on
//! the same seeded returns:
//!
//! - a 100-symbol × 2,520-day book: its daily returns from the weights
//!   and the symbols' returns, then the whole tear sheet (every metric
//!   against a benchmark, the tables, the drawdown periods, the rolling
//!   series, the distributions and the position statistics); quantstats:
//!   the same book return (numpy), `reports.metrics(mode="full")` against
//!   the benchmark and `stats.drawdown_details`;
//! - a single 2,520-day series against a benchmark: the tear sheet;
//!   quantstats: `reports.metrics(mode="full")` and `drawdown_details`.
//!
//! The inputs are written for the baseline (`benches/baseline/tearsheet.py`),
//! run with the interpreter in `VIBEDESK_BENCH_PYTHON` (default `python3`)
//! with the packages of `tests/golden/tearsheet/requirements.txt`; without
//! them only our times print, with a note. Target: 50× or more.
//!
//! Then the time to write the book's HTML report (target: under 100 ms).
//!
//! `cargo bench --bench tearsheet`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use chrono::{Datelike, NaiveDate, Weekday};
use serde_json::{Value, json};
use vibedesk::research::backtest::validation::Rng;
use vibedesk::research::tearsheet::{Benchmark, PositionsInput, TearSheetInput, compute};

const SYMBOLS: usize = 100;
const DAYS: usize = 2_520;

/// Standard normals by Box–Muller on a split-mix stream.
struct Normal(Rng);

impl Normal {
    fn uniform(&mut self) -> f64 {
        ((self.0.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn next(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// Business days from 2010-01-04.
fn dates() -> Vec<NaiveDate> {
    let mut d = NaiveDate::from_ymd_opt(2010, 1, 4).unwrap();
    let mut out = Vec::with_capacity(DAYS);
    while out.len() < DAYS {
        if !matches!(d.weekday(), Weekday::Sat | Weekday::Sun) {
            out.push(d);
        }
        d = d.succ_opt().unwrap();
    }
    out
}

fn best<T>(repeat: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..repeat {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(v);
    }
    (best, out.unwrap())
}

fn write_f64(path: &Path, x: &[f64]) {
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, bytes).unwrap();
}

fn baseline(dir: &Path) -> Option<Value> {
    if std::env::var_os("VIBEDESK_BENCH_NO_PYTHON").is_some() {
        return None;
    }
    let python = std::env::var("VIBEDESK_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/baseline/tearsheet.py");
    let out = Command::new(&python).arg(script).arg(dir).output().ok()?;
    if !out.status.success() {
        eprintln!(
            "quantstats baseline skipped ({python}: {}); set VIBEDESK_BENCH_PYTHON to an interpreter with tests/golden/tearsheet/requirements.txt",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn main() {
    let dates = dates();
    let mut n = Normal(Rng::new(38));
    // Symbol returns, row-major (day × symbol), and a drifting long book.
    let rets: Vec<f64> = (0..DAYS * SYMBOLS)
        .map(|_| 0.0003 + 0.015 * n.next())
        .collect();
    let weights: Vec<f64> = (0..DAYS * SYMBOLS)
        .map(|i| (1 + (i % SYMBOLS) % 7) as f64 / 400.0)
        .collect();
    let bench: Vec<f64> = (0..DAYS).map(|_| 0.0002 + 0.01 * n.next()).collect();
    let single: Vec<f64> = bench.iter().map(|b| 0.8 * b + 0.008 * n.next()).collect();

    let dir = tempfile::tempdir().unwrap();
    write_f64(&dir.path().join("returns.f64"), &rets);
    write_f64(&dir.path().join("weights.f64"), &weights);
    write_f64(&dir.path().join("benchmark.f64"), &bench);
    write_f64(&dir.path().join("single.f64"), &single);
    let days: Vec<String> = dates.iter().map(ToString::to_string).collect();
    let meta = json!({"days": DAYS, "symbols": SYMBOLS, "dates": days});
    std::fs::write(dir.path().join("meta.json"), meta.to_string()).unwrap();

    let codes: Vec<String> = (0..SYMBOLS).map(|i| format!("S{i:03}")).collect();
    let (t_book, sheet) = best(10, || {
        let rows: Vec<Vec<f64>> = weights.chunks(SYMBOLS).map(<[f64]>::to_vec).collect();
        let book: Vec<f64> = rets
            .chunks(SYMBOLS)
            .zip(weights.chunks(SYMBOLS))
            .map(|(r, w)| r.iter().zip(w).map(|(a, b)| a * b).sum())
            .collect();
        compute(&TearSheetInput {
            title: "book".into(),
            dates: dates.clone(),
            returns: book,
            benchmark: Some(Benchmark {
                name: "bench".into(),
                returns: bench.clone(),
            }),
            positions: Some(PositionsInput {
                codes: codes.clone(),
                weights: rows,
            }),
            ..TearSheetInput::default()
        })
        .unwrap()
    });
    let book_sharpe = sheet
        .metrics
        .iter()
        .find(|m| m.key == "sharpe")
        .unwrap()
        .value;
    let (t_single, one) = best(10, || {
        compute(&TearSheetInput {
            title: "single".into(),
            dates: dates.clone(),
            returns: single.clone(),
            benchmark: Some(Benchmark {
                name: "bench".into(),
                returns: bench.clone(),
            }),
            ..TearSheetInput::default()
        })
        .unwrap()
    });
    let single_sharpe = one
        .metrics
        .iter()
        .find(|m| m.key == "sharpe")
        .unwrap()
        .value;

    let py = baseline(dir.path());
    println!("| case | ours | quantstats | ratio |\n|---|---|---|---|");
    let mut worst = f64::INFINITY;
    for (label, ours, key, sharpe) in [
        (
            "100 symbols × 2,520 days: book + tear sheet",
            t_book,
            "book",
            book_sharpe,
        ),
        (
            "one 2,520-day series: tear sheet",
            t_single,
            "single",
            single_sharpe,
        ),
    ] {
        let theirs = py.as_ref().and_then(|p| p[key]["seconds"].as_f64());
        if let Some(q) = py.as_ref().and_then(|p| p[key]["sharpe"].as_f64()) {
            let ours_sharpe = sharpe.unwrap();
            assert!(
                (q - ours_sharpe).abs() <= 1e-9 * q.abs().max(1.0),
                "{key}: Sharpe {ours_sharpe} vs quantstats {q}"
            );
        }
        let ratio = theirs.map(|t| t / ours);
        if let Some(r) = ratio {
            worst = worst.min(r);
        }
        println!(
            "| {label} | {:.2} ms | {} | {} |",
            ours * 1e3,
            theirs.map_or("—".into(), |t| format!("{:.1} ms", t * 1e3)),
            ratio.map_or("—".into(), |r| format!("{r:.0}×"))
        );
    }
    if worst.is_finite() {
        println!("\nslowest ratio: {worst:.0}× (target: 50× or more)");
    } else {
        println!("\n(no quantstats baseline: only our times)");
    }

    // The HTML report of the book's sheet (docs §20.3), fsync included.
    let html = dir.path().join("report.html");
    let facts = vibedesk::report::RunFacts::default();
    let (t_html, ()) = best(5, || {
        vibedesk::report::html::write(&html, &sheet, &facts).unwrap();
    });
    let size = std::fs::metadata(&html).unwrap().len();
    println!(
        "HTML report of the book: {:.1} ms, {} KiB (target: under 100 ms)",
        t_html * 1e3,
        size / 1024
    );
}
