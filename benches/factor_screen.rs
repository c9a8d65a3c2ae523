//! The factor screen's speed against pandas + alphalens (docs §17.6), the
//! same work side by side in one run:
//!
//! - the offline universe's 106 stocks, every bar (2000–2017, so the
//!   alphas are warm by 2005);
//! - all 82 bundled alphas (`alpha101()`), parsed and evaluated on one
//!   `OhlcvPanel` (shared sub-expressions, docs §17.7.4);
//! - `screen` over 2005–2017 with horizons 1, 5, 10, 21, 63, quintiles,
//!   rank horizon 1, one worker per core.
//!
//! The reference (`benches/baseline/factor_screen.py`, pinned in
//! `benches/baseline/factor-screen-requirements.txt`) evaluates the pandas
//! alphas of `tests/golden/alpha101/make_goldens.py` (written from the
//! paper, imported from there), then per alpha alphalens-reloaded's
//! `get_clean_factor_and_forward_returns` (the 5 horizons, quantiles=5),
//! `factor_information_coefficient`, `mean_return_by_quantile` and
//! `factor_rank_autocorrelation`, on one core. alphalens takes minutes an
//! alpha here (its per-date `spearmanr` in `factor_information_coefficient`
//! most of it), so it times a fixed subset, every 41st alpha of the library
//! (alpha001 and alpha042, 2 of 82), and the comparison is in alphas per
//! second. It runs
//! with the interpreter in `VIBEDESK_BENCH_PYTHON` (default `python3`);
//! without it only our times print. The two sides' rank IC at horizon 1 of
//! the subset is compared date by date on the dates both scored (alphalens
//! keeps fewer, §17.8.1: it drops a date whose quintiles cannot be cut and
//! a name-date missing any horizon's return, and forward-fills prices), so
//! they did the same work.
//!
//! `cargo bench --bench factor_screen`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use chrono::NaiveDate;
use serde_json::{Value, json};
use vibedesk::research::data::{Bars, embedded};
use vibedesk::research::factor::alpha101::alpha101;
use vibedesk::research::factor::expr::{self, OhlcvPanel};
use vibedesk::research::factor::screen::{ScreenOptions, Universe, screen};

const HORIZONS: [usize; 5] = [1, 5, 10, 21, 63];
/// The reference times every this-many-th alpha.
const SAMPLE_EVERY: usize = 41;

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
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/baseline/factor_screen.py"
    );
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
            "python baseline skipped ({python}: {}); set VIBEDESK_BENCH_PYTHON to an interpreter with benches/baseline/factor-screen-requirements.txt",
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
    let panel = OhlcvPanel::from_bars(&series).unwrap();
    let library = alpha101().unwrap();
    let names: Vec<&str> = library.iter().map(|a| a.name.as_str()).collect();

    let (t_eval, values) = best(3, || {
        let exprs: Vec<expr::Expr> = library
            .iter()
            .map(|a| expr::parse(&a.expr).unwrap())
            .collect();
        expr::evaluate(&exprs, &panel, None).unwrap()
    });
    // The screen's window: rows of 2005–2017, a slice of the row-major panel.
    let n = panel.width();
    let a = panel.dates.partition_point(|d| *d < start);
    let b = panel.dates.partition_point(|d| *d <= end);
    let u = Universe {
        dates: &panel.dates[a..b],
        symbols: &panel.symbols,
        close: &panel.close[a * n..b * n],
    };
    let factors: Vec<(&str, &[f64])> = names
        .iter()
        .zip(&values)
        .map(|(name, v)| (*name, &v[a * n..b * n]))
        .collect();
    let o = ScreenOptions {
        horizons: HORIZONS.to_vec(),
        quantiles: 5,
        rank_horizon: 1,
        ..ScreenOptions::default()
    };
    let (t_screen, s) = best(3, || screen(u, &factors, &o).unwrap());
    let t_total = t_eval + t_screen;
    let alphas = library.len() as f64;

    // The reference: the same panel, from the same binary.
    let dir = tempfile::tempdir().unwrap();
    let sample: Vec<u16> = library
        .iter()
        .step_by(SAMPLE_EVERY)
        .map(|x| x.number)
        .collect();
    let meta = json!({
        "tickers": stocks,
        "start": start.to_string(),
        "end": end.to_string(),
        "horizons": HORIZONS,
        "quantiles": 5,
        "alphas": sample,
    });
    std::fs::write(dir.path().join("meta.json"), meta.to_string()).unwrap();
    let py = baseline(dir.path());

    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    println!(
        "factor screen: {} alphas × {} stocks × {} dates (2005–2017), horizons {:?}, quintiles; best of 3, {cores} worker(s)\n",
        library.len(),
        n,
        b - a,
        HORIZONS
    );
    println!("| side | evaluate | screen | total | alphas/s |\n|---|---|---|---|---|");
    println!(
        "| vibedesk, all {} alphas | {:.3} s | {:.3} s | {:.3} s | {:.1} |",
        library.len(),
        t_eval,
        t_screen,
        t_total,
        alphas / t_total
    );
    let Some(p) = py else {
        println!("\n(no Python reference: only our times)");
        return;
    };
    let k = p["alphas"].as_array().map_or(0, Vec::len) as f64;
    let (pe, ps) = (
        p["evaluate"].as_f64().unwrap_or(f64::NAN),
        p["screen"].as_f64().unwrap_or(f64::NAN),
    );
    println!(
        "| pandas + alphalens, every {SAMPLE_EVERY}st alpha ({k}) | {pe:.1} s | {ps:.1} s | {:.1} s | {:.3} |",
        pe + ps,
        k / (pe + ps)
    );
    let ratio = (alphas / t_total) / (k / (pe + ps));
    println!(
        "\nalphas/s ratio: {ratio:.0}× (evaluate {:.0}×, screen {:.0}×; goal 50×)",
        (alphas / t_eval) / (k / pe),
        (alphas / t_screen) / (k / ps)
    );
    // Same work, date by date: the rank IC at horizon 1 on the dates both
    // sides scored. alphalens keeps fewer dates (it drops a date whose
    // quintiles cannot be cut, and every name-date missing any horizon's
    // return, so the last 63 dates), and forward-fills a missing price, so
    // the means over each side's own dates differ; on a shared date with
    // the same names the two rank ICs are the same number.
    let mut checked = 0;
    if let Some(m) = p["rank_ic_1_daily"].as_object() {
        for (name, daily) in m {
            let Some(h) = s
                .factors
                .iter()
                .find(|f| f.name == *name)
                .and_then(|f| f.stats.as_ref())
                .and_then(|st| st.horizons.iter().find(|h| h.horizon == 1))
            else {
                continue;
            };
            let ours: std::collections::HashMap<String, f64> = h
                .dates
                .iter()
                .zip(&h.rank_ic)
                .filter(|(_, v)| v.is_finite())
                .map(|(d, v)| (d.to_string(), *v))
                .collect();
            let theirs: Vec<(&String, f64)> = daily
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(d, v)| Some((d, v.as_f64()?)))
                .collect();
            let mut diffs: Vec<f64> = Vec::new();
            let (mut sum_ours, mut sum_theirs) = (0.0, 0.0);
            for (d, v) in &theirs {
                if let Some(o) = ours.get(*d) {
                    diffs.push((o - v).abs());
                    sum_ours += o;
                    sum_theirs += v;
                }
            }
            let common = diffs.len();
            let same = diffs.iter().filter(|d| **d < 1e-9).count();
            diffs.sort_by(f64::total_cmp);
            let median = diffs.get(common / 2).copied().unwrap_or(f64::NAN);
            let mean_gap = (sum_ours - sum_theirs).abs() / common.max(1) as f64;
            println!(
                "{name}: rank IC at horizon 1 on {common} shared dates (ours alone {}, alphalens alone {}): {same} equal to 1e-9, median difference {median:.1e}, means {:.5} and {:.5} over the shared dates (over each side's own: {:.5} and {:.5})",
                ours.len() - common,
                theirs.len() - common,
                sum_ours / common.max(1) as f64,
                sum_theirs / common.max(1) as f64,
                h.rank_ic_stats.mean,
                p["rank_ic_1"][name].as_f64().unwrap_or(f64::NAN),
            );
            assert!(
                common > 0 && median < 1e-9 && mean_gap < 1e-3,
                "{name}: the two sides disagree on the shared dates"
            );
            checked += 1;
        }
    }
    assert!(checked > 0, "no alpha was compared");
}
