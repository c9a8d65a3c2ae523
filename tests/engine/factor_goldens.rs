//! Factor IC, regressions and overfitting statistics against their
//! references (docs §17.5): the goldens in tests/golden/stats/factor.json
//! were written by `make_goldens_factor.py` there with scipy, statsmodels
//! and numpy at pinned versions, on seeded inputs (in the JSON) and on the
//! offline market (the binary's own pack and Fama–French table); these
//! tests read the JSON and need no Python.
//!
//! Tolerances (issue 28): Spearman IC 1e-12; OLS coefficients and HAC
//! standard errors 1e-10; PSR/DSR 1e-12 against the papers' formulas.

use std::path::PathBuf;

use chrono::NaiveDate;
use serde_json::Value;
use vibedesk::research::data::embedded;
use vibedesk::research::factor::regression::{ols_hac, rolling_slopes};
use vibedesk::research::factor::{HorizonIc, IcOptions, Panel, factor_ic, indicator_panel};
use vibedesk::research::indicators::IndicatorSpec;
use vibedesk::research::overfitting::{
    SharpeMoments, expected_max_sharpe, min_track_record, pbo_cscv, psr,
};

fn golden() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/stats/factor.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(f).collect()
}

/// |a − b| ≤ tol·max(1, |b|) (NaN matches NaN).
fn close(a: f64, b: f64, tol: f64, what: &str) {
    if a.is_nan() && b.is_nan() {
        return;
    }
    assert!(
        (a - b).abs() <= tol * b.abs().max(1.0),
        "{what}: {a} against {b} (diff {:e})",
        (a - b).abs()
    );
}

/// Relative: |a − b| ≤ tol·|b|.
fn rel(a: f64, b: f64, tol: f64, what: &str) {
    assert!(
        (a - b).abs() <= tol * b.abs(),
        "{what}: {a} against {b} (rel {:e})",
        (a - b).abs() / b.abs()
    );
}

/// Every field of one horizon against the golden.
fn check_horizon(got: &HorizonIc, want: &Value) {
    let h = got.horizon;
    assert_eq!(h as u64, want["horizon"].as_u64().unwrap());
    let rows: Vec<usize> = want["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(got.rows, rows, "scored rows at {h}d");
    let names: Vec<usize> = want["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(got.names, names);
    for (i, (a, b)) in got.ic.iter().zip(floats(&want["ic"])).enumerate() {
        close(*a, b, 1e-12, &format!("IC {h}d row {}", rows[i]));
    }
    for key in ["ic_mean", "ic_std", "hit_rate"] {
        let v = match key {
            "ic_mean" => got.ic_mean,
            "ic_std" => got.ic_std,
            _ => got.hit_rate,
        };
        close(v, f(&want[key]), 1e-12, key);
    }
    // Ratios of small numbers: relative.
    rel(got.ic_ir, f(&want["ic_ir"]), 1e-10, "ic_ir");
    rel(got.t_stat, f(&want["t_stat"]), 1e-10, "t_stat");
    rel(got.t_stat_nw, f(&want["t_stat_nw"]), 1e-10, "t_stat_nw");
    assert_eq!(got.skipped as u64, want["skipped"].as_u64().unwrap());
    for (a, b) in got
        .quantile_returns
        .iter()
        .zip(floats(&want["quantile_returns"]))
    {
        close(*a, b, 1e-12, "quantile return");
    }
    close(got.spread, f(&want["spread"]), 1e-12, "spread");
    close(
        got.top_turnover,
        f(&want["top_turnover"]),
        1e-12,
        "turnover",
    );
}

/// A seeded panel with ties, gaps, a constant date and a thin one.
#[test]
fn seeded_ic_matches_scipy_spearmanr() {
    let g = golden();
    let c = &g["ic_seeded"];
    let grid = |key: &str| -> Vec<f64> {
        c["inputs"][key]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(floats)
            .collect()
    };
    let (factor, close_) = (grid("factor"), grid("close"));
    let t = c["inputs"]["factor"].as_array().unwrap().len();
    let n = factor.len() / t;
    let d0 = NaiveDate::from_ymd_opt(2010, 1, 1).unwrap();
    let panel = Panel {
        dates: (0..t).map(|i| d0 + chrono::Days::new(i as u64)).collect(),
        symbols: (0..n).map(|j| format!("S{j}")).collect(),
        factor,
        close: close_,
    };
    let o = IcOptions {
        horizons: vec![1, 5, 21],
        quantiles: 5,
        min_names: 5,
    };
    let got = factor_ic(&panel, &o).unwrap();
    for (h, want) in got.iter().zip(c["expected"].as_array().unwrap()) {
        check_horizon(h, want);
    }
    assert!(got[0].skipped >= 2, "the constant and the thin date");
}

/// 12-1 momentum on the offline universe's 106 stocks, 2010–2012, warm
/// from the history before 2010 (docs §17.1).
#[test]
fn momentum_ic_on_the_offline_market_matches() {
    let g = golden();
    let c = &g["ic_market"];
    let tickers: Vec<String> = c["universe"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(tickers.len(), 106);
    let bars: Vec<_> = tickers.iter().map(|t| embedded::bars(t).unwrap()).collect();
    let series: Vec<(&str, &_)> = tickers.iter().map(|t| t.as_str()).zip(&bars).collect();
    let spec = IndicatorSpec::parse("momentum", &c["factor"]["params"]).unwrap();
    let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
    let panel = indicator_panel(
        &spec,
        &series,
        Some(d(c["start"].as_str().unwrap())),
        Some(d(c["end"].as_str().unwrap())),
    )
    .unwrap();
    let dates: Vec<String> = panel.dates.iter().map(|d| d.to_string()).collect();
    let want_dates: Vec<String> = c["dates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(dates, want_dates);
    let got = factor_ic(&panel, &IcOptions::default()).unwrap();
    for (h, want) in got.iter().zip(c["expected"].as_array().unwrap()) {
        check_horizon(h, want);
    }
}

/// One statsmodels fit against ours: coefficients, HAC standard errors
/// 1e-10 (relative), t and p, r², n, residual std.
fn check_ols(got: &vibedesk::research::factor::regression::Ols, want: &Value, what: &str) {
    assert_eq!(got.n as u64, want["n"].as_u64().unwrap(), "{what}");
    let names: Vec<&str> = want["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for (i, c) in got.coefficients.iter().enumerate() {
        assert_eq!(c.name, names[i]);
        let at = |k: &str| f(&want[k][i]);
        rel(
            c.estimate,
            at("estimate"),
            1e-10,
            &format!("{what} {} β", c.name),
        );
        rel(
            c.std_error,
            at("std_error"),
            1e-10,
            &format!("{what} {} se", c.name),
        );
        rel(c.t, at("t"), 1e-10, &format!("{what} {} t", c.name));
        close(
            c.p_value,
            at("p_value"),
            1e-10,
            &format!("{what} {} p", c.name),
        );
    }
    close(got.r2, f(&want["r2"]), 1e-12, "r2");
    close(got.adj_r2, f(&want["adj_r2"]), 1e-12, "adj_r2");
    rel(
        got.residual_std,
        f(&want["residual_std"]),
        1e-12,
        "residual_std",
    );
}

#[test]
fn seeded_regressions_match_statsmodels_hac() {
    let g = golden();
    let c = &g["regression_seeded"];
    let y = floats(&c["y"]);
    let cols: Vec<(String, Vec<f64>)> = c["x"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), floats(v)))
        .collect();
    let x: Vec<(&str, &[f64])> = cols
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_slice()))
        .collect();
    for (lags, want) in c["lags"]
        .as_array()
        .unwrap()
        .iter()
        .zip(c["expected"].as_array().unwrap())
    {
        let lags = lags.as_u64().unwrap() as usize;
        let got = ols_hac(&y, &x, lags).unwrap();
        check_ols(&got, want, &format!("seeded, {lags} lags"));
    }
    let window = c["rolling"]["window"].as_u64().unwrap() as usize;
    let roll = rolling_slopes(&y, &x, window, 1).unwrap();
    let last = c["rolling"]["last"].as_array().unwrap();
    for (got, want) in roll[roll.len() - last.len()..].iter().zip(last) {
        for (a, b) in got.1.iter().zip(floats(want)) {
            rel(*a, b, 1e-10, "rolling slope");
        }
    }
}

/// AAPL's monthly excess return on the Fama–French factors and its daily
/// return on SPY's, computed the way the tool computes them.
#[test]
fn market_regressions_match_statsmodels_hac() {
    use vibedesk::research::factor::regression::month_end_returns;
    let g = golden();
    let c = &g["regression_market"]["monthly"];
    let ff = vibedesk::research::data::factors::monthly().unwrap();
    let aapl = embedded::bars("AAPL").unwrap();
    let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
    let months = month_end_returns(
        &aapl.dates,
        &aapl.close,
        Some(d("2010-01-01")),
        Some(d("2017-03-31")),
    );
    let want_months: Vec<&str> = c["months"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let got_months: Vec<String> = months
        .iter()
        .map(|(m, _)| m.format("%Y-%m").to_string())
        .collect();
    assert_eq!(got_months, want_months);
    let rows: Vec<_> = months.iter().map(|(m, _)| ff.month(*m).unwrap()).collect();
    let y: Vec<f64> = months
        .iter()
        .zip(&rows)
        .map(|((_, r), f)| r - f.rf)
        .collect();
    let col = |k: fn(&vibedesk::research::data::factors::FactorMonth) -> f64| -> Vec<f64> {
        rows.iter().map(|m| k(m)).collect()
    };
    let (mkt, smb, hml, mom) = (
        col(|m| m.mkt_rf),
        col(|m| m.smb),
        col(|m| m.hml),
        col(|m| m.mom),
    );
    let x = [
        ("ff:MktRF", mkt.as_slice()),
        ("ff:SMB", smb.as_slice()),
        ("ff:HML", hml.as_slice()),
        ("ff:Mom", mom.as_slice()),
    ];
    check_ols(
        &ols_hac(&y, &x, 3).unwrap(),
        &c["four_factor"],
        "four factor",
    );
    check_ols(&ols_hac(&y, &x[..1], 3).unwrap(), &c["market"], "market");
    let c = &g["regression_market"]["daily"];
    let spy = embedded::bars("SPY").unwrap();
    let named = [("AAPL".to_string(), &aapl), ("SPY".to_string(), &spy)];
    let mut cut = Vec::new();
    for (n, b) in named {
        let mut b = (*b).clone();
        b.retain_range(Some(d("2010-01-01")), Some(d("2017-12-31")));
        cut.push((n, b));
    }
    let refs: Vec<(String, &_)> = cut.iter().map(|(n, b)| (n.clone(), b)).collect();
    let r = vibedesk::research::returns::aligned_returns(&refs).unwrap();
    assert_eq!(r.dates[1].to_string(), c["first_date"].as_str().unwrap());
    let got = ols_hac(&r.columns[0], &[("SPY", &r.columns[1])], 5).unwrap();
    check_ols(&got, &c["expected"], "daily AAPL on SPY");
}

#[test]
fn psr_dsr_and_min_track_record_match_the_formulas() {
    let g = golden();
    let c = &g["overfitting"];
    let series: Vec<(String, Vec<f64>)> = c["returns"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), floats(v)))
        .collect();
    let ms: Vec<SharpeMoments> = series
        .iter()
        .map(|(_, r)| SharpeMoments::of(r).unwrap())
        .collect();
    let bench = f(&c["benchmark_sharpe_annual"]) / 252f64.sqrt();
    for (i, m) in ms.iter().enumerate() {
        let w = &c["moments"][i];
        close(m.sharpe, f(&w["sharpe"]), 1e-12, "sharpe");
        close(m.skewness, f(&w["skewness"]), 1e-12, "skewness");
        close(m.kurtosis, f(&w["kurtosis"]), 1e-12, "kurtosis");
        close(psr(m, 0.0), f(&c["psr0"][i]), 1e-12, "psr");
        close(
            psr(m, bench),
            f(&c["psr_bench"][i]),
            1e-12,
            "psr vs benchmark",
        );
    }
    let sharpes: Vec<f64> = ms.iter().map(|m| m.sharpe).collect();
    let var = vibedesk::research::stats::variance(&sharpes, 1);
    close(var, f(&c["trial_sharpe_variance"]), 1e-12, "trial variance");
    let best = sharpes
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .unwrap()
        .0;
    assert_eq!(series[best].0, c["best"].as_str().unwrap());
    let m = &ms[best];
    for (trials, b, sr0, dsr) in [
        (5, 0.0, "sr0_5", "dsr_5"),
        (50, 0.0, "sr0_50", "dsr_50"),
        (50, bench, "sr0_50_bench", "dsr_50_bench"),
    ] {
        let s0 = expected_max_sharpe(var, trials, b);
        close(s0, f(&c[sr0]), 1e-12, sr0);
        close(psr(m, s0), f(&c[dsr]), 1e-12, dsr);
    }
    rel(
        min_track_record(m, 0.0, 0.95).unwrap(),
        f(&c["mintrl_95"]),
        1e-12,
        "MinTRL",
    );
    rel(
        min_track_record(m, bench, 0.99).unwrap(),
        f(&c["mintrl_99_bench"]),
        1e-12,
        "MinTRL vs benchmark",
    );
}

/// Our CSCV against a direct one (itertools.combinations, numpy Sharpe
/// ratios): the same logit for every split.
#[test]
fn pbo_matches_a_direct_cscv() {
    let g = golden();
    let c = &g["overfitting"]["pbo_small"];
    let rows: Vec<Vec<f64>> = c["returns"]
        .as_array()
        .unwrap()
        .iter()
        .map(floats)
        .collect();
    let n = rows[0].len();
    let cols: Vec<Vec<f64>> = (0..n)
        .map(|j| rows.iter().map(|r| r[j]).collect())
        .collect();
    let p = pbo_cscv(&cols, c["partitions"].as_u64().unwrap() as usize).unwrap();
    assert_eq!(p.pbo, f(&c["pbo"]));
    assert_eq!(p.rows_dropped as u64, c["rows_dropped"].as_u64().unwrap());
    // The same splits in the same order (itertools.combinations').
    let want = floats(&c["logits"]);
    assert_eq!(p.logits.len(), want.len());
    for (a, b) in p.logits.iter().zip(&want) {
        close(*a, *b, 1e-12, "logit");
    }
}

/// PBO on pure noise averages one half over seeds (a single matrix swings
/// widely: the estimate is itself noisy); with a planted edge it is under
/// 0.05. Seeded (SplitMix64), so the same everywhere.
#[test]
fn pbo_is_near_a_half_on_noise_and_low_with_an_edge() {
    use vibedesk::research::seeded::SplitMix64;
    let noise = |seed: u64, edge: f64| -> Vec<Vec<f64>> {
        let mut rng = SplitMix64::new(seed);
        (0..20)
            .map(|j| {
                let mu = if j == 3 { edge } else { 0.0 };
                (0..480).map(|_| mu + 0.01 * rng.normal()).collect()
            })
            .collect()
    };
    let pbos: Vec<f64> = (0..24)
        .map(|seed| pbo_cscv(&noise(seed, 0.0), 16).unwrap().pbo)
        .collect();
    let mean = pbos.iter().sum::<f64>() / pbos.len() as f64;
    assert!((mean - 0.5).abs() < 0.08, "mean PBO {mean} over {pbos:?}");
    for seed in 0..4 {
        let p = pbo_cscv(&noise(seed, 0.003), 16).unwrap();
        assert!(p.pbo < 0.05, "seed {seed}: {}", p.pbo);
    }
}
