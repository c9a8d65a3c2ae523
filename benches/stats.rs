//! The time-series tools' speed against statsmodels and arch (docs §16.8),
//! side by side on the same inputs from the offline market:
//!
//! - ADF with autolag (AIC, constant) on SPY's last 2,520 log closes
//!   (statsmodels' `adfuller`);
//! - Engle–Granger (statsmodels' `coint`, constant, AIC) on all 8,515 pairs
//!   of the 131 instruments, on the log closes of the dates all of them
//!   traded (2014-03-27 to 2017-11-10); the reference times a fixed sample
//!   of every 17th pair (501 pairs) and scales to 8,515, and the bench
//!   checks its statistics against ours on that sample;
//! - a GARCH(1,1) fit (constant mean, normal errors) on SPY's last 2,520
//!   daily returns in percent (arch's `arch_model(...).fit()`), and the same
//!   with Student-t errors (`dist="t"`);
//! - Johansen's test (constant, one lagged difference) on the last 2,520
//!   common log closes of SPY, XLP and XLU (statsmodels' `coint_johansen`).
//!
//! Both sides run on one core (the reference with `OPENBLAS_NUM_THREADS`
//! and `OMP_NUM_THREADS` at 1). The inputs are written for the baseline
//! (`benches/baseline/stats.py`), which runs with the interpreter in
//! `VIBEDESK_BENCH_PYTHON` (default `python3`) and needs the packages of
//! `tests/golden/stats/requirements.txt`; without them only our times
//! print. Each row reports ours, the reference's, and their ratio.
//!
//! `cargo bench --bench stats`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use chrono::NaiveDate;
use serde_json::{Value, json};
use vibedesk::research::data::embedded;
use vibedesk::research::timeseries::{
    Autolag, ErrorDist, GarchSpec, Trend, adf, engle_granger, fit_family, fit_garch, johansen,
};

/// The factor rows: 12-1 momentum IC and PBO (docs §17.6).
#[path = "stats/factor.rs"]
mod factor;

/// Days of the ADF and GARCH inputs.
const DAYS: usize = 2_520;
/// Every this-many-th pair is timed in Python.
const SAMPLE_EVERY: usize = 17;

fn write(dir: &Path, name: &str, shape: &[usize], values: impl Iterator<Item = f64>) -> Value {
    let bytes: Vec<u8> = values.flat_map(f64::to_le_bytes).collect();
    std::fs::write(dir.join(format!("{name}.f64")), bytes).unwrap();
    json!(shape)
}

/// Seconds of the fastest of `n` runs of `f`.
fn best<T>(n: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut out = None;
    let mut secs = f64::INFINITY;
    for _ in 0..n {
        let t = Instant::now();
        let r = std::hint::black_box(f());
        secs = secs.min(t.elapsed().as_secs_f64());
        out = Some(r);
    }
    (secs, out.unwrap())
}

fn baseline(dir: &Path) -> Option<Value> {
    if std::env::var_os("VIBEDESK_BENCH_NO_PYTHON").is_some() {
        return None;
    }
    let python = std::env::var("VIBEDESK_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/baseline/stats.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(dir)
        .env("OPENBLAS_NUM_THREADS", "1")
        .env("OMP_NUM_THREADS", "1")
        .env("MKL_NUM_THREADS", "1")
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "python baseline skipped ({python}: {}); set VIBEDESK_BENCH_PYTHON to an interpreter with tests/golden/stats/requirements.txt",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// The last `DAYS` log closes of `symbols` on the dates all of them traded.
fn basket(symbols: &[&str]) -> Vec<Vec<f64>> {
    let bars: Vec<_> = symbols.iter().map(|s| embedded::bars(s).unwrap()).collect();
    let dates: Vec<NaiveDate> = bars[0]
        .dates
        .iter()
        .copied()
        .filter(|d| bars.iter().all(|b| b.index_of(*d).is_some()))
        .collect();
    let dates = &dates[dates.len() - DAYS..];
    bars.iter()
        .map(|b| {
            dates
                .iter()
                .map(|d| b.close[b.index_of(*d).unwrap()].ln())
                .collect()
        })
        .collect()
}

/// Log closes of every instrument on the dates all of them traded.
fn panel() -> (Vec<NaiveDate>, Vec<Vec<f64>>) {
    let bars: Vec<_> = embedded::symbols()
        .iter()
        .map(|s| embedded::bars(s).unwrap())
        .collect();
    let dates: Vec<NaiveDate> = bars[0]
        .dates
        .iter()
        .copied()
        .filter(|d| bars.iter().all(|b| b.index_of(*d).is_some()))
        .collect();
    let cols = bars
        .iter()
        .map(|b| {
            dates
                .iter()
                .map(|d| b.close[b.index_of(*d).unwrap()].ln())
                .collect()
        })
        .collect();
    (dates, cols)
}

fn main() {
    let spy = embedded::bars("SPY").unwrap();
    let closes = &spy.close[spy.close.len() - (DAYS + 1)..];
    let levels: Vec<f64> = closes[1..].iter().map(|c| c.ln()).collect();
    let pct: Vec<f64> = closes
        .windows(2)
        .map(|w| 100.0 * (w[1] / w[0] - 1.0))
        .collect();
    let (dates, cols) = panel();
    let n = cols.len();
    let pairs: Vec<(usize, usize)> = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .collect();

    // Ours.
    let (t_adf, a) = best(7, || {
        adf(&levels, Trend::Constant, Autolag::Aic, None).unwrap()
    });
    let (t_eg, stats) = best(2, || {
        pairs
            .iter()
            .map(|&(i, j)| {
                engle_granger(&cols[i], &cols[j], Trend::Constant, Autolag::Aic, None)
                    .map_or(f64::NAN, |r| r.statistic)
            })
            .collect::<Vec<f64>>()
    });
    let (t_garch, fit) = best(7, || fit_garch(&pct).unwrap());
    let t_errors = GarchSpec {
        gjr: false,
        dist: ErrorDist::StudentT,
    };
    let (t_garch_t, fit_t) = best(7, || fit_family(&pct, t_errors).unwrap());
    let three = basket(&["SPY", "XLP", "XLU"]);
    let (t_joh, joh) = best(7, || johansen(&three, Trend::Constant, 1).unwrap());

    // The reference, on the same inputs.
    let dir = tempfile::tempdir().unwrap();
    let shapes = json!({
        "levels": write(dir.path(), "levels", &[DAYS], levels.iter().copied()),
        "pct": write(dir.path(), "pct", &[DAYS], pct.iter().copied()),
        "panel": write(dir.path(), "panel", &[n, dates.len()], cols.iter().flatten().copied()),
        "sample_every": SAMPLE_EVERY,
        "basket": write(dir.path(), "basket", &[3, DAYS], three.iter().flatten().copied()),
    });
    std::fs::write(dir.path().join("shapes.json"), shapes.to_string()).unwrap();
    let py = baseline(dir.path());

    println!(
        "time-series tools: ours against statsmodels and arch, one core each (best of several runs)\n"
    );
    println!(
        "inputs: SPY's last {DAYS} log closes and daily returns to {}; {n} instruments' log closes on the {} dates all traded, {} to {}\n",
        spy.dates.last().unwrap(),
        dates.len(),
        dates[0],
        dates.last().unwrap()
    );
    println!("| case | ours | reference | ratio |\n|---|---|---|---|");
    let rows = [
        ("ADF, autolag AIC, 2,520 points", t_adf, "adf"),
        (
            "Engle–Granger on all 8,515 pairs of 131 instruments",
            t_eg,
            "coint_all_scaled",
        ),
        ("GARCH(1,1) fit on 2,520 returns", t_garch, "garch"),
        (
            "GARCH(1,1) with Student-t errors fit on 2,520 returns",
            t_garch_t,
            "garch_t",
        ),
        (
            "Johansen, 3 series × 2,520 days, constant, 1 lag",
            t_joh,
            "johansen",
        ),
    ];
    let mut worst = f64::INFINITY;
    for (name, ours, key) in rows {
        let theirs = py.as_ref().and_then(|p| p[key].as_f64());
        let ratio = theirs.map(|t| t / ours);
        if let Some(r) = ratio {
            worst = worst.min(r);
        }
        println!(
            "| {name} | {:.3} ms | {} | {} |",
            ours * 1e3,
            theirs.map_or("—".into(), |t| format!("{:.1} ms", t * 1e3)),
            ratio.map_or("—".into(), |r| format!("{r:.0}×")),
        );
    }
    println!(
        "\nours: {} pairs tested; ADF statistic {:.6} at lag {}; GARCH log-likelihood {:.6} in {} Newton steps",
        stats.len(),
        a.statistic,
        a.used_lag,
        fit.loglik,
        fit.iterations
    );
    if let Some(p) = &py {
        let sample = p["coint_sample_pairs"].as_u64().unwrap_or(0);
        println!(
            "reference Engle–Granger: {sample} pairs (every {SAMPLE_EVERY}th) timed in {:.1} s and scaled × {:.2} to all {}",
            p["coint_sample"].as_f64().unwrap_or(f64::NAN),
            pairs.len() as f64 / sample.max(1) as f64,
            pairs.len()
        );
        // The same computations: the results agree.
        let theirs: Vec<f64> =
            serde_json::from_value(p["coint_sample_statistics"].clone()).unwrap_or_default();
        let diff = stats
            .iter()
            .step_by(SAMPLE_EVERY)
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        println!("Engle–Granger: largest statistic difference on the sample {diff:.1e}");
        println!(
            "ADF: statistic {:.10} / {:.10} (ours / reference)",
            a.statistic,
            p["adf_statistic"].as_f64().unwrap_or(f64::NAN)
        );
        println!(
            "GARCH: log-likelihood {:.8} / {:.8} (ours / reference)",
            fit.loglik,
            p["garch_loglik"].as_f64().unwrap_or(f64::NAN)
        );
        println!(
            "GARCH with t errors: log-likelihood {:.8} / {:.8} (ours / reference), {} Newton steps",
            fit_t.loglik,
            p["garch_t_loglik"].as_f64().unwrap_or(f64::NAN),
            fit_t.iterations
        );
        let theirs: Vec<f64> =
            serde_json::from_value(p["johansen_trace"].clone()).unwrap_or_default();
        let diff = joh
            .trace
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs() / b.abs())
            .fold(0.0, f64::max);
        println!(
            "Johansen: trace {:?} (ours), largest relative difference {diff:.1e}",
            joh.trace
        );
        println!("\nslowest ratio: {worst:.0}× (target: 10× or more on every row)");
    }
    println!();
    factor::main();
}
