//! The factor screen against alphalens-reloaded (docs §17.8): the goldens in
//! tests/golden/screen/screen.json were written by `make_goldens.py` there
//! (alphalens-reloaded 0.5.1, pandas 3.1.1, scipy, statsmodels at pinned
//! versions) on a seeded panel (in the JSON) and on the offline market;
//! these tests read the JSON and need no Python.
//!
//! Tolerance 1e-10, absolute for numbers under 1 in size (ICs, returns,
//! p-values, correlations) and relative above it (t statistics, ICIR
//! scores, Sharpe variances): |ours − theirs| ≤ 1e-10·max(1, |theirs|).
//! Dates scored, name counts, quantile labels and the ranking are equal.

use std::path::PathBuf;
use std::sync::LazyLock;

use chrono::NaiveDate;
use serde_json::Value;
use vibedesk::research::Interrupt;
use vibedesk::research::data::embedded;
use vibedesk::research::factor::indicator_panel;
use vibedesk::research::factor::screen::{
    HorizonStats, IcStats, Screen, ScreenError, ScreenOptions, Series, Universe, qcut_labels,
    screen,
};
use vibedesk::research::indicators::IndicatorSpec;

const TOL: f64 = 1e-10;

static GOLDEN: LazyLock<Value> = LazyLock::new(|| {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/screen/screen.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
});

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(f).collect()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

/// |a − b| ≤ 1e-10·max(1, |b|); NaN (null) matches NaN.
fn close(a: f64, b: f64, what: &str) {
    if a.is_nan() && b.is_nan() {
        return;
    }
    assert!(
        (a - b).abs() <= TOL * b.abs().max(1.0),
        "{what}: {a} against {b} (diff {:e})",
        (a - b).abs()
    );
}

fn all_close(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        close(*x, *y, &format!("{what}[{i}]"));
    }
}

fn check_ic_stats(got: &IcStats, want: &Value, what: &str) {
    close(got.mean, f(&want["mean"]), &format!("{what} mean"));
    close(got.std, f(&want["std"]), &format!("{what} std"));
    close(got.ir, f(&want["ir"]), &format!("{what} ir"));
    close(got.t_nw, f(&want["t_nw"]), &format!("{what} t_nw"));
    close(got.p_value, f(&want["p_value"]), &format!("{what} p"));
}

fn check_dates(got: &[NaiveDate], rows: &Value, dates: &[NaiveDate], what: &str) {
    let want: Vec<NaiveDate> = usizes(rows).iter().map(|r| dates[*r]).collect();
    assert_eq!(got, want, "{what}: dates");
}

fn check_series(got: &Series, want: &Value, dates: &[NaiveDate], what: &str) {
    check_dates(&got.dates, &want["rows"], dates, what);
    all_close(&got.values, &floats(&want["values"]), what);
}

fn check_horizon(got: &HorizonStats, want: &Value, dates: &[NaiveDate], what: &str) {
    let h = got.horizon;
    assert_eq!(h as u64, want["horizon"].as_u64().unwrap());
    let what = format!("{what} {h}d");
    check_dates(&got.dates, &want["rows"], dates, &what);
    assert_eq!(got.names, usizes(&want["names"]), "{what} names");
    all_close(&got.ic, &floats(&want["ic"]), &format!("{what} IC"));
    all_close(
        &got.rank_ic,
        &floats(&want["rank_ic"]),
        &format!("{what} rank IC"),
    );
    check_ic_stats(&got.ic_stats, &want["ic_stats"], &format!("{what} IC"));
    check_ic_stats(
        &got.rank_ic_stats,
        &want["rank_ic_stats"],
        &format!("{what} rank IC"),
    );
    all_close(
        &got.quantile_returns,
        &floats(&want["quantile_returns"]),
        &format!("{what} quantile returns"),
    );
    close(got.spread, f(&want["spread"]), &format!("{what} spread"));
    assert_eq!(
        got.spread_dates as u64,
        want["spread_dates"].as_u64().unwrap()
    );
}

/// Every factor and the comparison against the golden case.
fn check_screen(got: &Screen, case: &Value, dates: &[NaiveDate]) {
    let names: Vec<&str> = case["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(got.factors.len(), names.len());
    for (row, (name, want)) in got
        .factors
        .iter()
        .zip(names.iter().zip(case["factors"].as_array().unwrap()))
    {
        assert_eq!(row.name, *name);
        if want.is_null() {
            assert!(row.stats.is_none() && row.error.is_some(), "{name} scored");
            continue;
        }
        let s = row
            .stats
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: {:?}", row.error));
        close(
            s.coverage,
            f(&want["coverage"]),
            &format!("{name} coverage"),
        );
        let hs = want["horizons"].as_array().unwrap();
        assert_eq!(s.horizons.len(), hs.len());
        for (g, w) in s.horizons.iter().zip(hs) {
            check_horizon(g, w, dates, name);
        }
        all_close(
            &s.ic_decay,
            &floats(&want["ic_decay"]),
            &format!("{name} decay"),
        );
        check_series(
            &s.rank_autocorrelation,
            &want["rank_autocorrelation"],
            dates,
            &format!("{name} rank autocorrelation"),
        );
        close(
            s.rank_autocorrelation_mean,
            f(&want["rank_autocorrelation_mean"]),
            &format!("{name} rank autocorrelation mean"),
        );
        close(
            s.turnover,
            f(&want["turnover"]),
            &format!("{name} turnover"),
        );
        check_series(
            &s.long_short,
            &want["long_short"],
            dates,
            &format!("{name} long-short"),
        );
    }
    check_compare(got, &case["compare"]);
}

fn check_compare(got: &Screen, want: &Value) {
    let col = |key: &str| -> Vec<f64> {
        got.factors
            .iter()
            .map(|r| match key {
                "p_value" => r.p_value,
                "p_holm" => r.p_holm,
                "p_bh" => r.p_bh,
                "score" => r.score,
                _ => r.long_short_sharpe,
            })
            .collect()
    };
    for key in ["p_value", "p_holm", "p_bh", "score", "long_short_sharpe"] {
        all_close(&col(key), &floats(&want[key]), key);
    }
    assert_eq!(got.ranking, usizes(&want["ranking"]), "ranking");
    let corr = want["correlation"].as_array().unwrap();
    for (i, (g, w)) in got.correlation.iter().zip(corr).enumerate() {
        all_close(g, &floats(w), &format!("correlation row {i}"));
    }
    let d = got.deflated.as_ref().unwrap();
    let w = &want["deflated"];
    assert_eq!(d.best, w["best"].as_str().unwrap());
    assert_eq!(d.observations as u64, w["observations"].as_u64().unwrap());
    assert_eq!(d.trials as u64, w["trials"].as_u64().unwrap());
    for (key, v) in [
        ("sharpe", d.sharpe),
        ("sharpe_variance", d.sharpe_variance),
        ("expected_max_sharpe", d.expected_max_sharpe),
        ("psr", d.psr),
        ("dsr", d.dsr),
    ] {
        close(v, f(&w[key]), &format!("deflated {key}"));
    }
}

fn options(case: &Value, threads: usize) -> ScreenOptions {
    let o = &case["options"];
    ScreenOptions {
        horizons: usizes(&o["horizons"]),
        quantiles: o["quantiles"].as_u64().unwrap() as usize,
        min_names: o["min_names"].as_u64().unwrap() as usize,
        rank_horizon: o["rank_horizon"].as_u64().unwrap() as usize,
        threads,
        split: None,
    }
}

/// The seeded case's closes and factors (row-major) and its dates.
struct Seeded {
    dates: Vec<NaiveDate>,
    symbols: Vec<String>,
    close: Vec<f64>,
    factors: Vec<(String, Vec<f64>)>,
}

fn seeded() -> Seeded {
    let c = &GOLDEN["seeded"];
    // Integers over a power of ten, divided as numpy divides them.
    let grid = |v: &Value| -> Vec<f64> {
        let scale = v["scale"].as_f64().unwrap();
        v["ints"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r.as_array().unwrap())
            .map(|x| x.as_i64().map_or(f64::NAN, |k| k as f64 / scale))
            .collect()
    };
    let close = grid(&c["inputs"]["close"]);
    let t = c["inputs"]["close"]["ints"].as_array().unwrap().len();
    let n = close.len() / t;
    let d0 = NaiveDate::from_ymd_opt(2010, 1, 1).unwrap();
    let factors = c["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let name = v.as_str().unwrap();
            (name.to_string(), grid(&c["inputs"][name]))
        })
        .collect();
    Seeded {
        dates: (0..t).map(|i| d0 + chrono::Days::new(i as u64)).collect(),
        symbols: (0..n).map(|j| format!("S{j}")).collect(),
        close,
        factors,
    }
}

fn run_seeded(s: &Seeded, threads: usize) -> Result<Screen, ScreenError> {
    let u = Universe {
        dates: &s.dates,
        symbols: &s.symbols,
        close: &s.close,
    };
    let factors: Vec<(&str, &[f64])> = s
        .factors
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_slice()))
        .collect();
    screen(u, &factors, &options(&GOLDEN["seeded"], threads))
}

/// pandas' qcut on small vectors: ties on the edges, coinciding edges
/// (None), every q from 2 to 20 (the fractions numpy's linspace nudges).
#[test]
fn qcut_labels_match_pandas() {
    for (i, c) in GOLDEN["qcut"].as_array().unwrap().iter().enumerate() {
        let q = c["q"].as_u64().unwrap() as usize;
        let want = (!c["labels"].is_null()).then(|| usizes(&c["labels"]));
        let x: Vec<f64> = c["x_bits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| f64::from_bits(b.as_u64().unwrap()))
            .collect();
        assert_eq!(qcut_labels(&x, q), want, "case {i}, q {q}");
    }
}

/// A seeded panel with missing bars, a late listing, a date without any
/// factor, a constant date, edge-coinciding ties, a sparse factor and an
/// empty one.
#[test]
fn seeded_screen_matches_alphalens() {
    let s = seeded();
    let got = run_seeded(&s, 0).unwrap();
    check_screen(&got, &GOLDEN["seeded"], &s.dates);
    let empty = got.factors.iter().find(|r| r.name == "empty").unwrap();
    assert_eq!(empty.p_value, 1.0, "an unscored factor counts as tried");
    let ties = got.factors.iter().find(|r| r.name == "ties").unwrap();
    let h1 = &ties.stats.as_ref().unwrap().horizons[0];
    assert!(
        h1.spread_dates < h1.dates.len() / 2,
        "qcut drops the dates whose edges coincide"
    );
}

/// 12-1 momentum, 21- and 5-day returns on the offline universe's 106
/// stocks, 2010–2012 (the momentum indicator, warm from before 2010).
#[test]
fn market_screen_matches_alphalens() {
    let c = &GOLDEN["market"];
    let tickers: Vec<String> = c["universe"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let bars: Vec<_> = tickers.iter().map(|t| embedded::bars(t).unwrap()).collect();
    let series: Vec<(&str, &_)> = tickers.iter().map(|t| t.as_str()).zip(&bars).collect();
    let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
    let (start, end) = (
        d(c["start"].as_str().unwrap()),
        d(c["end"].as_str().unwrap()),
    );
    let names: Vec<&str> = c["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let panels: Vec<_> = names
        .iter()
        .map(|n| {
            let spec = IndicatorSpec::parse("momentum", &c["params"][*n]).unwrap();
            indicator_panel(&spec, &series, Some(start), Some(end)).unwrap()
        })
        .collect();
    let want_dates: Vec<NaiveDate> = c["dates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| d(v.as_str().unwrap()))
        .collect();
    assert_eq!(panels[0].dates, want_dates);
    let bits = |p: &vibedesk::research::factor::Panel| -> Vec<u64> {
        p.close.iter().map(|v| v.to_bits()).collect()
    };
    assert!(panels.iter().all(|p| bits(p) == bits(&panels[0])));
    let factors: Vec<(&str, &[f64])> = names
        .iter()
        .zip(&panels)
        .map(|(n, p)| (*n, p.factor.as_slice()))
        .collect();
    let got = screen(Universe::of(&panels[0]), &factors, &options(c, 0)).unwrap();
    check_screen(&got, c, &want_dates);
}

/// Workers take factors in any order; the answer is the same as on one
/// thread, number for number.
#[test]
fn the_screen_is_the_same_on_one_thread_and_many() {
    let s = seeded();
    let one = serde_json::to_string(&run_seeded(&s, 1).unwrap()).unwrap();
    let many = serde_json::to_string(&run_seeded(&s, 3).unwrap()).unwrap();
    assert_eq!(one.len(), many.len());
    // The options differ in `threads` only.
    assert_eq!(
        one.replace("\"threads\":1", "\"threads\":3"),
        many,
        "parallel screen differs"
    );
}

/// A result is written (NaN as null) and read back unchanged: the
/// workstation's view reads a saved screen.
#[test]
fn a_screen_round_trips_through_json() {
    let s = seeded();
    let got = run_seeded(&s, 2).unwrap();
    let text = serde_json::to_string(&got).unwrap();
    assert!(text.contains("null"), "the empty factor's NaNs");
    let back: Screen = serde_json::from_str(&text).unwrap();
    // serde_json's default float parsing may miss the last ulp.
    same_json(
        &serde_json::to_value(&back).unwrap(),
        &serde_json::to_value(&got).unwrap(),
        "$",
    );
}

fn same_json(a: &Value, b: &Value, at: &str) {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!((x - y).abs() <= 1e-15 * y.abs(), "{at}: {x} against {y}");
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}");
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                same_json(p, q, &format!("{at}[{i}]"));
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(
                x.keys().collect::<Vec<_>>(),
                y.keys().collect::<Vec<_>>(),
                "{at}"
            );
            for (k, p) in x {
                same_json(p, &y[k], &format!("{at}.{k}"));
            }
        }
        _ => assert_eq!(a, b, "{at}"),
    }
}

/// A fired interrupt stops the screen, on one thread and through the
/// workers.
#[test]
fn an_interrupt_stops_the_screen() {
    let s = seeded();
    let stop = Interrupt::new();
    stop.interrupt();
    for threads in [1, 3] {
        let r = stop.within(|| run_seeded(&s, threads));
        assert!(
            matches!(r, Err(ScreenError::Interrupted(_))),
            "{threads}: {r:?}"
        );
    }
}
