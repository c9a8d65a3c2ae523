//! The bundled 101 Formulaic Alphas against a pandas implementation written
//! from the paper (tests/golden/alpha101/make_goldens.py, numpy and pandas at
//! pinned versions; this test reads its JSON and needs no Python).
//!
//! The panel is the golden's 30 stocks of the offline market from the
//! data's first date (AAPL and BA miss a few bars, V and TSLA list later),
//! evaluated in one `evaluate` call; the golden keeps the first 60 rows (the
//! warm-up NaN pattern) and every 45th row from 2005.
//!
//! Tolerance (issue 41): 1e-9, absolute below 1 and relative above
//! (|a − b| ≤ 1e-9 · max(1, |b|)); NaN exactly where the golden has NaN and
//! infinities (IEEE division by a zero range, alpha 53) equal.
//!
//! The one exception, per cell, never per alpha: the golden lists as
//! `unstable` the cells where the reference, evaluated again under seven
//! other float orderings (sums newest-first, pairwise or carried row to row
//! as online algorithms do, and each formula in a second form equal in
//! exact arithmetic), moves by more than 1e-10
//! or changes its NaN pattern. Those cells hold a rank, a window rank or
//! argmin, or a comparison of quantities equal on paper that differ only
//! by rounding: correlations of ranks over a few days take a handful of
//! exact values that coincide across symbols (15, 50, 75, 78, 94, 98).
//! Rounding, not the formula, orders such ties, so no reference can pin
//! them. They are skipped and counted; every other cell must match.
//!
//! Alpha 45 is the one whose values are compared nowhere, only its NaN
//! pattern in its stable cells: it ranks `correlation(sum(close, 5), sum(close, 20),
//! 2)`, and a correlation over 2 days is exactly +1 or −1 whenever defined,
//! so every rank it takes is an average over a tie that only rounding
//! splits (the reference's own orderings disagree on three in four of its
//! cells, and the evaluator's compensated window sums split the rest
//! differently again).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::Value;
use vibedesk::research::data::embedded;
use vibedesk::research::factor::alpha101::alpha101;
use vibedesk::research::factor::expr::{Expr, OhlcvPanel, evaluate, parse};

const TOL: f64 = 1e-9;

fn golden() -> Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/alpha101/alpha101.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// A golden cell: null is NaN, "inf" / "-inf" the infinities.
fn cell(v: &Value) -> f64 {
    match v {
        Value::Null => f64::NAN,
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        v => v.as_f64().unwrap(),
    }
}

fn agrees(got: f64, want: f64) -> bool {
    if want.is_nan() {
        return got.is_nan();
    }
    if want.is_infinite() {
        return got == want;
    }
    got.is_finite() && (got - want).abs() <= TOL * want.abs().max(1.0)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The golden's universe as the binary's offline market gives it.
fn panel(g: &Value) -> OhlcvPanel {
    let universe = strings(&g["universe"]);
    let bars: Vec<_> = universe
        .iter()
        .map(|t| embedded::bars(t).unwrap())
        .collect();
    let series: Vec<(&str, &_)> = universe.iter().map(|t| t.as_str()).zip(&bars).collect();
    let p = OhlcvPanel::from_bars(&series).unwrap();
    assert_eq!(p.dates.len() as u64, g["panel_rows"].as_u64().unwrap());
    assert_eq!(p.dates[0].to_string(), g["panel_first"].as_str().unwrap());
    assert_eq!(
        p.dates.last().unwrap().to_string(),
        g["panel_last"].as_str().unwrap()
    );
    p
}

/// Alphas whose values are all ties split by rounding (module doc): their
/// NaN pattern is compared, their values are not.
const NAN_PATTERN_ONLY: [u16; 1] = [45];

/// Mismatches of one alpha outside its unstable cells: (count, the first
/// as text). With `pattern_only`, only NaN against value.
fn compare(
    got: &[f64],
    want: &[Value],
    unstable: &BTreeSet<usize>,
    pattern_only: bool,
    rows: &[usize],
    dates: &[String],
    syms: &[String],
) -> (usize, String) {
    let n = syms.len();
    let (mut bad, mut first) = (0, String::new());
    for (k, w) in want.iter().enumerate() {
        if unstable.contains(&k) {
            continue;
        }
        let (r, j) = (k / n, k % n);
        let g = got[rows[r] * n + j];
        let w = cell(w);
        let ok = if pattern_only {
            g.is_nan() == w.is_nan()
        } else {
            agrees(g, w)
        };
        if !ok {
            if bad == 0 {
                first = format!("{} {}: {g} against {w}", dates[r], syms[j]);
            }
            bad += 1;
        }
    }
    (bad, first)
}

#[test]
fn the_bundled_alphas_match_the_pandas_goldens() {
    let g = golden();
    let p = panel(&g);
    let rows: Vec<usize> = g["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    let dates = strings(&g["dates"]);
    for (r, d) in rows.iter().zip(&dates) {
        assert_eq!(&p.dates[*r].to_string(), d);
    }
    let lib = alpha101().unwrap();
    let want = g["alphas"].as_object().unwrap();
    let bundled: Vec<String> = lib.iter().map(|a| format!("{:03}", a.number)).collect();
    let golden_keys: Vec<String> = want.keys().cloned().collect();
    assert_eq!(
        bundled, golden_keys,
        "the golden covers every bundled alpha"
    );
    let exprs: Vec<Expr> = lib
        .iter()
        .map(|a| parse(&a.expr).unwrap_or_else(|e| panic!("{}: {e}", a.name)))
        .collect();
    let out = evaluate(&exprs, &p, None).unwrap();
    assert_eq!(out.len(), lib.len());
    let cells = p.dates.len() * p.symbols.len();
    let mut failed = BTreeMap::new();
    let mut report = Vec::new();
    for ((a, key), got) in lib.iter().zip(&bundled).zip(&out) {
        assert_eq!(got.len(), cells, "{}", a.name);
        let w = want[key].as_array().unwrap();
        assert_eq!(w.len(), rows.len() * p.symbols.len());
        let unstable: BTreeSet<usize> = g["unstable"][key.as_str()]
            .as_array()
            .map(|v| v.iter().map(|k| k.as_u64().unwrap() as usize).collect())
            .unwrap_or_default();
        let pattern_only = NAN_PATTERN_ONLY.contains(&a.number);
        // Alpha 45 aside, the most is 262 of 3,960 sampled cells (alpha 98);
        // the bound keeps a broken flagging from hiding a whole alpha.
        assert!(pattern_only || unstable.len() * 2 < w.len(), "{}", a.name);
        let (bad, first) = compare(got, w, &unstable, pattern_only, &rows, &dates, &p.symbols);
        let valued = w.iter().filter(|v| !v.is_null()).count();
        if bad == 0 {
            report.push(format!(
                "{}: pass ({valued} values{})",
                a.name,
                if pattern_only {
                    ", NaN pattern only".to_string()
                } else {
                    format!(", {} unstable cells skipped", unstable.len())
                }
            ));
        } else {
            report.push(format!(
                "{}: FAIL {bad} of {} cells, first {first}",
                a.name,
                w.len()
            ));
            failed.insert(a.name.clone(), bad);
        }
    }
    eprintln!("{}", report.join("\n"));
    eprintln!("{} of {} alphas match", lib.len() - failed.len(), lib.len());
    assert!(failed.is_empty(), "alphas off their goldens: {failed:?}");
}

/// A window of one repeated value has mean that value, so its covariance
/// with anything is exactly 0, as its variance is. Alphas 13 and 16 rank
/// `covariance(rank(close), rank(volume), 5)`: a stock's price rank often
/// stays put for five days, and those stocks must tie at 0 (average rank).
/// A mean taken as sum / 5 is off by an ulp for many repeated values, which
/// leaves a covariance of ±1e-18 and lets rounding order the tie.
#[test]
fn a_flat_window_has_covariance_exactly_zero() {
    let expr = parse("covariance(close, volume, 5)").unwrap();
    let dates: Vec<_> = (1..=5)
        .map(|d| chrono::NaiveDate::from_ymd_opt(2020, 1, d).unwrap())
        .collect();
    let flats: Vec<f64> = (1..=28)
        .map(|k| f64::from(k) / 28.0)
        .chain([1.0 / 3.0, 0.7, 101.37])
        .collect();
    for v in flats {
        let p = OhlcvPanel {
            dates: dates.clone(),
            symbols: vec!["A".into()],
            open: vec![v; 5],
            high: vec![v; 5],
            low: vec![v; 5],
            close: vec![v; 5],
            // Deviations that do not sum to exactly 0, so an ulp of error
            // in the flat side's mean would show.
            volume: vec![0.1, 0.7, 0.3, 0.9, 0.55],
        };
        let out = evaluate(std::slice::from_ref(&expr), &p, None).unwrap();
        assert_eq!(out[0][4], 0.0, "covariance of a flat window of {v}");
    }
}
