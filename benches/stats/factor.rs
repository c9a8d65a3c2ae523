//! Factor IC and PBO against their Python references (docs §17.6), side
//! by side on the same inputs:
//!
//! - 12-1 momentum IC on the offline universe (its 106 stocks), 2005–2017,
//!   forward 1, 5 and 21 days, quintiles: from the closes to the report
//!   (momentum per stock on its own history, the panel, per-date Spearman
//!   IC, quantile returns, spread, turnover, Newey–West t). The reference:
//!   numpy for the panel, scipy's `spearmanr` per date (the definition the
//!   goldens use), statsmodels' HAC for the t statistic;
//! - PBO with 16 partitions on 100 strategies × 2,520 daily returns
//!   (12,870 splits): the reference is the direct CSCV of the paper
//!   (`itertools.combinations`, numpy Sharpe ratios of each half), as the
//!   goldens and pypbo compute it; a second row times a vectorised numpy
//!   formulation (block sums × a 0/1 matrix of the splits) for candour.
//!
//! The inputs are made here (the embedded closes; seeded returns) and
//! written for the baseline (`benches/baseline/stats_factor.py`), which
//! runs with the interpreter in `VIBEDESK_BENCH_PYTHON` (default
//! `python3`) and needs the packages of `tests/golden/stats/requirements.txt`;
//! without them only our times print. Each row reports ours, the
//! reference's, their ratio, and checks both computed the same thing.
//!
//! The second half of `cargo bench --bench stats` (`benches/stats.rs`
//! runs it after the time-series rows).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use chrono::NaiveDate;
use serde_json::{Value, json};
use vibedesk::research::data::{Bars, embedded};
use vibedesk::research::factor::{IcOptions, factor_ic, indicator_panel};
use vibedesk::research::indicators::IndicatorSpec;
use vibedesk::research::overfitting::pbo_cscv;
use vibedesk::research::seeded::SplitMix64;

const STRATEGIES: usize = 100;
const DAYS: usize = 2_520;
const PARTITIONS: usize = 16;

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

fn write_f64(dir: &Path, name: &str, values: impl Iterator<Item = f64>) {
    let bytes: Vec<u8> = values.flat_map(f64::to_le_bytes).collect();
    std::fs::write(dir.join(format!("{name}.f64")), bytes).unwrap();
}

fn write_i64(dir: &Path, name: &str, values: impl Iterator<Item = i64>) {
    let bytes: Vec<u8> = values.flat_map(i64::to_le_bytes).collect();
    std::fs::write(dir.join(format!("{name}.i64")), bytes).unwrap();
}

/// Noise strategies, a few with a small edge: 100 × 2,520, column per
/// strategy.
fn strategies() -> Vec<Vec<f64>> {
    let mut rng = SplitMix64::new(2017);
    (0..STRATEGIES)
        .map(|j| {
            let mu = if j % 10 == 0 { 0.0004 } else { 0.0 };
            (0..DAYS).map(|_| mu + 0.01 * rng.normal()).collect()
        })
        .collect()
}

fn baseline(dir: &Path) -> Option<Value> {
    if std::env::var_os("VIBEDESK_BENCH_NO_PYTHON").is_some() {
        return None;
    }
    let python = std::env::var("VIBEDESK_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/baseline/stats_factor.py"
    );
    let out = Command::new(&python).arg(script).arg(dir).output().ok()?;
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

pub fn main() {
    let day = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
    let (start, end) = (day("2005-01-01"), day("2017-12-31"));
    let stocks: Vec<&str> = vibedesk::model::universe::all()
        .iter()
        .filter(|x| !x.etf)
        .map(|x| x.ticker)
        .collect();
    let bars: Vec<Bars> = stocks.iter().map(|t| embedded::bars(t).unwrap()).collect();
    let series: Vec<(&str, &Bars)> = stocks.iter().copied().zip(&bars).collect();
    let spec = IndicatorSpec::parse("momentum", &json!({"window": 252, "skip": 21})).unwrap();
    let o = IcOptions::default();
    let (t_ic, ic) = best(5, || {
        let panel = indicator_panel(&spec, &series, Some(start), Some(end)).unwrap();
        factor_ic(&panel, &o).unwrap()
    });
    let cols = strategies();
    let (t_pbo, pbo) = best(5, || pbo_cscv(&cols, PARTITIONS).unwrap());

    // The reference, on the same inputs.
    let dir = tempfile::tempdir().unwrap();
    let lens: Vec<i64> = bars.iter().map(|b| b.len() as i64).collect();
    write_i64(dir.path(), "lens", lens.iter().copied());
    write_i64(
        dir.path(),
        "days",
        bars.iter().flat_map(|b| {
            b.dates
                .iter()
                .map(|d| i64::from(chrono::Datelike::num_days_from_ce(d)))
        }),
    );
    write_f64(
        dir.path(),
        "close",
        bars.iter().flat_map(|b| b.close.iter().copied()),
    );
    write_f64(
        dir.path(),
        "strategies",
        (0..DAYS).flat_map(|t| cols.iter().map(move |c| c[t])),
    );
    let meta = json!({
        "start": i64::from(chrono::Datelike::num_days_from_ce(&start)),
        "end": i64::from(chrono::Datelike::num_days_from_ce(&end)),
        "strategies": [DAYS, STRATEGIES],
        "partitions": PARTITIONS,
    });
    std::fs::write(dir.path().join("meta.json"), meta.to_string()).unwrap();
    let py = baseline(dir.path());

    println!("factor IC and PBO: ours against the Python references (best of several runs)\n");
    println!("| case | ours | reference | ratio |\n|---|---|---|---|");
    let rows = [
        (
            "12-1 momentum IC, 106 stocks, 2005–2017, 1/5/21 days",
            t_ic,
            "ic",
        ),
        (
            "PBO, 16 partitions, 100 strategies × 2,520 days (direct CSCV)",
            t_pbo,
            "pbo",
        ),
        (
            "PBO, the same, against vectorised numpy block sums",
            t_pbo,
            "pbo_vectorised",
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
            "| {name} | {:.2} ms | {} | {} |",
            ours * 1e3,
            theirs.map_or("—".into(), |t| format!("{:.1} ms", t * 1e3)),
            ratio.map_or("—".into(), |r| format!("{r:.0}×")),
        );
    }
    println!(
        "\nours: IC mean {} (1/5/21 days); PBO {:.4} over {} splits",
        ic.iter()
            .map(|h| format!("{:.6}", h.ic_mean))
            .collect::<Vec<_>>()
            .join(" / "),
        pbo.pbo,
        pbo.combinations
    );
    if let Some(p) = &py {
        let theirs: Vec<f64> = serde_json::from_value(p["ic_means"].clone()).unwrap_or_default();
        let diff = ic
            .iter()
            .zip(&theirs)
            .map(|(h, t)| (h.ic_mean - t).abs())
            .fold(0.0, f64::max);
        println!("reference: IC mean {theirs:?}; largest difference {diff:.1e}");
        println!(
            "reference: PBO {} (direct), {} (vectorised)",
            p["pbo_value"], p["pbo_vectorised_value"]
        );
        println!("\nslowest ratio: {worst:.0}× (target: 10× or more on every row)");
    }
}
