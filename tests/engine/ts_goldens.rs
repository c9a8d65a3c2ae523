//! The time-series tools against statsmodels and arch (docs §16.6): the
//! goldens in tests/golden/stats/ts.json were written by
//! `make_goldens_ts.py` there with statsmodels 0.15.0, arch 8.0.0, scipy and
//! numpy at pinned versions, on seeded series and on the offline market's
//! closes in ts_market.csv; these tests read them and need no Python.
//!
//! Tolerances (issue 28): ADF, KPSS and Engle–Granger statistics 1e-8,
//! p-values 1e-6, critical values exact; GARCH log-likelihood at arch's
//! parameters 1e-8, our fit's at least arch's − 1e-6, parameters within
//! 1e-3; Johansen eigenvalues and statistics 1e-8 relative, critical values
//! exact, ranks equal, eigenvectors (first component 1) 1e-6; GARCH
//! standard errors at arch's parameters 1e-5 relative. The same for GARCH
//! with Student-t errors and GJR-GARCH (the `garch_ext` goldens).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::LazyLock;

use chrono::NaiveDate;
use serde_json::Value;
use vibedesk::research::data::embedded;
use vibedesk::research::timeseries::{
    Autolag, ErrorDist, GarchParams, GarchSpec, KpssLags, Trend, adf, engle_granger, ewma,
    family_inference, family_loglik, family_variance, fit_family, fit_garch, garch_inference,
    garch_loglik, half_life, hurst, jarque_bera, johansen, kpss, ljung_box,
};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/stats")
}

static GOLDEN: LazyLock<Value> = LazyLock::new(|| {
    serde_json::from_str(&std::fs::read_to_string(dir().join("ts.json")).unwrap()).unwrap()
});

/// (date, close) per symbol from ts_market.csv.
static MARKET: LazyLock<BTreeMap<String, Vec<(String, f64)>>> = LazyLock::new(|| {
    let text = std::fs::read_to_string(dir().join("ts_market.csv")).unwrap();
    let mut out: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        out.entry(f[0].to_string())
            .or_default()
            .push((f[1].to_string(), f[2].parse().unwrap()));
    }
    out
});

fn closes(sym: &str) -> Vec<f64> {
    MARKET[sym].iter().map(|(_, c)| *c).collect()
}

fn logs(sym: &str) -> Vec<f64> {
    closes(sym).iter().map(|c| c.ln()).collect()
}

fn returns(sym: &str) -> Vec<f64> {
    closes(sym).windows(2).map(|w| w[1] / w[0] - 1.0).collect()
}

fn seeded(name: &str) -> Vec<f64> {
    GOLDEN["inputs"]["seeded"][name]
        .as_array()
        .unwrap_or_else(|| panic!("no seeded series {name}"))
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

/// A level series by its golden name.
fn level(name: &str) -> Vec<f64> {
    match name {
        "ko_log" => logs("KO"),
        "pep_log" => logs("PEP"),
        "spy_log" => logs("SPY"),
        other => seeded(other),
    }
}

/// A return series by its golden name.
fn rets(name: &str) -> Vec<f64> {
    match name {
        "spy_returns" => returns("SPY"),
        "ko_returns" => returns("KO"),
        other => seeded(other),
    }
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// A critical value written as text by the script (serde_json's default
/// float parser may be one ulp off; Rust's `parse` rounds correctly, and
/// critical values are compared exactly).
fn exact(v: &Value) -> f64 {
    v.as_str()
        .unwrap_or_else(|| panic!("critical value {v} as text"))
        .parse()
        .unwrap()
}

fn trend(s: &str) -> Trend {
    Trend::parse(s).unwrap()
}

fn d(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

/// The committed closes are the binary's embedded ones, so a tool reading
/// the market-data layer computes on the goldens' inputs.
#[test]
fn the_golden_market_inputs_are_the_embedded_closes() {
    for (sym, rows) in MARKET.iter() {
        let (first, last) = (&rows[0].0, &rows[rows.len() - 1].0);
        let s = embedded::load(sym, Some(d(first)), Some(d(last))).unwrap();
        assert_eq!(s.bars.close.len(), rows.len(), "{sym}");
        for (i, (date, c)) in rows.iter().enumerate() {
            assert_eq!(s.bars.dates[i].to_string(), *date, "{sym}");
            assert_eq!(s.bars.close[i], *c, "{sym} {date}");
        }
    }
}

#[test]
fn adf_matches_statsmodels_adfuller() {
    let cases = GOLDEN["adf"].as_array().unwrap();
    assert!(cases.len() >= 50);
    let mut worst = (0.0f64, 0.0f64);
    for c in cases {
        let x = level(c["series"].as_str().unwrap());
        let auto = Autolag::parse(c["autolag"].as_str().unwrap()).unwrap();
        let max = c["maxlag"].as_u64().map(|m| m as usize);
        let r = adf(&x, trend(c["regression"].as_str().unwrap()), auto, max).unwrap();
        let label = format!("{c}");
        assert_eq!(
            r.used_lag as u64,
            c["used_lag"].as_u64().unwrap(),
            "{label}"
        );
        assert_eq!(r.n_obs as u64, c["n_obs"].as_u64().unwrap(), "{label}");
        let ds = (r.statistic - f(c, "statistic")).abs();
        let dp = (r.p_value - f(c, "p_value")).abs();
        assert!(
            ds < 1e-8,
            "statistic off by {ds}: {} in {label}",
            r.statistic
        );
        assert!(dp < 1e-6, "p-value off by {dp}: {} in {label}", r.p_value);
        worst = (worst.0.max(ds), worst.1.max(dp));
        let crit = &c["critical_values"];
        assert_eq!(
            r.critical_values,
            [exact(&crit["1%"]), exact(&crit["5%"]), exact(&crit["10%"])],
            "{label}"
        );
        if let Some(ic) = c["icbest"].as_f64() {
            let got = r.ic_best.unwrap();
            assert!(
                (got - ic).abs() < 1e-8 * ic.abs().max(1.0),
                "icbest {got} in {label}"
            );
        }
    }
    eprintln!(
        "adf: worst statistic {:.1e}, p-value {:.1e}",
        worst.0, worst.1
    );
}

#[test]
fn kpss_matches_statsmodels() {
    let cases = GOLDEN["kpss"].as_array().unwrap();
    assert!(cases.len() >= 20);
    let mut worst = (0.0f64, 0.0f64);
    for c in cases {
        let x = level(c["series"].as_str().unwrap());
        let lags = match c["nlags"].as_u64() {
            Some(l) => KpssLags::Fixed(l as usize),
            None => KpssLags::Auto,
        };
        let r = kpss(&x, trend(c["regression"].as_str().unwrap()), lags).unwrap();
        let label = format!("{c}");
        worst = (
            worst.0.max((r.statistic - f(c, "statistic")).abs()),
            worst.1.max((r.p_value - f(c, "p_value")).abs()),
        );
        assert_eq!(r.lags as u64, c["lags"].as_u64().unwrap(), "{label}");
        assert!(
            (r.statistic - f(c, "statistic")).abs() < 1e-8,
            "{} in {label}",
            r.statistic
        );
        assert!(
            (r.p_value - f(c, "p_value")).abs() < 1e-6,
            "{} in {label}",
            r.p_value
        );
        let crit = &c["critical_values"];
        assert_eq!(
            r.critical_values,
            [
                f(crit, "10%"),
                f(crit, "5%"),
                f(crit, "2.5%"),
                f(crit, "1%")
            ]
        );
    }
    eprintln!(
        "kpss: worst statistic {:.1e}, p-value {:.1e}",
        worst.0, worst.1
    );
}

#[test]
fn engle_granger_matches_statsmodels_coint() {
    let cases = GOLDEN["engle_granger"].as_array().unwrap();
    assert!(cases.len() >= 20);
    let mut worst = (0.0f64, 0.0f64, 0.0f64);
    for c in cases {
        let (y0, y1) = match c["pair"].as_str().unwrap() {
            "seeded_coint" => (seeded("coint_y"), seeded("coint_x")),
            "seeded_walks" => (seeded("walk_a"), seeded("walk_b")),
            "ko_pep" => (logs("KO"), logs("PEP")),
            "pep_ko" => (logs("PEP"), logs("KO")),
            other => panic!("{other}"),
        };
        let auto = Autolag::parse(c["autolag"].as_str().unwrap()).unwrap();
        let r = engle_granger(&y0, &y1, trend(c["trend"].as_str().unwrap()), auto, None).unwrap();
        let label = format!("{c}");
        worst = (
            worst.0.max((r.statistic - f(c, "statistic")).abs()),
            worst.1.max((r.p_value - f(c, "p_value")).abs()),
            worst.2.max((r.hedge_ratio - f(c, "hedge_ratio")).abs()),
        );
        assert_eq!(
            r.used_lag as u64,
            c["used_lag"].as_u64().unwrap(),
            "{label}"
        );
        assert_eq!(r.n_obs as u64, c["n_obs"].as_u64().unwrap(), "{label}");
        assert!(
            (r.statistic - f(c, "statistic")).abs() < 1e-8,
            "{} in {label}",
            r.statistic
        );
        assert!(
            (r.p_value - f(c, "p_value")).abs() < 1e-6,
            "{} in {label}",
            r.p_value
        );
        let want: Vec<Option<f64>> = c["critical_values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (!v.is_null()).then(|| exact(v)))
            .collect();
        match r.critical_values {
            Some(cv) => assert_eq!(cv.map(Some).to_vec(), want, "{label}"),
            None => assert!(want.iter().all(Option::is_none), "{label}"),
        }
        assert!(
            (r.hedge_ratio - f(c, "hedge_ratio")).abs() < 1e-10,
            "{label}"
        );
        assert!((r.intercept - f(c, "intercept")).abs() < 1e-9, "{label}");
        let hl = &c["residual_half_life"];
        assert!((r.half_life.b - f(hl, "b")).abs() < 1e-10, "{label}");
        match hl["half_life"].as_f64() {
            Some(h) => assert!(
                (r.half_life.half_life.unwrap() - h).abs() < 1e-8 * h,
                "{label}"
            ),
            None => assert_eq!(r.half_life.half_life, None),
        }
    }
    eprintln!(
        "engle_granger: worst statistic {:.1e}, p-value {:.1e}, hedge ratio {:.1e}",
        worst.0, worst.1, worst.2
    );
}

#[test]
fn half_life_and_hurst_match_numpy() {
    for (name, c) in GOLDEN["half_life"].as_object().unwrap() {
        let r = half_life(&level(name)).unwrap();
        assert!((r.b - f(c, "b")).abs() < 1e-12, "{name}: {r:?}");
        assert!((r.a - f(c, "a")).abs() < 1e-12, "{name}: {r:?}");
        let h = f(c, "half_life");
        assert!((r.half_life.unwrap() - h).abs() < 1e-9 * h, "{name}");
        assert_eq!(r.n_obs as u64, c["n_obs"].as_u64().unwrap());
    }
    for (name, h) in GOLDEN["hurst"].as_object().unwrap() {
        let x = if name == "normal" {
            seeded(name)
        } else {
            level(name)
        };
        let got = hurst(&x).unwrap();
        assert!(
            (got - h.as_f64().unwrap()).abs() < 1e-12,
            "{name}: {got} vs {h}"
        );
    }
}

#[test]
fn ljung_box_and_jarque_bera_match_statsmodels() {
    for c in GOLDEN["ljung_box"].as_array().unwrap() {
        let name = c["series"].as_str().unwrap();
        let r = ljung_box(&rets(name), 10).unwrap();
        for (k, (s, p)) in c["statistic"]
            .as_array()
            .unwrap()
            .iter()
            .zip(c["p_value"].as_array().unwrap())
            .enumerate()
        {
            let (s, p) = (s.as_f64().unwrap(), p.as_f64().unwrap());
            assert!(
                (r.statistics[k] - s).abs() < 1e-10 * s.max(1.0),
                "{name} lag {}",
                k + 1
            );
            assert!(
                (r.p_values[k] - p).abs() < 1e-12,
                "{name} lag {}: {} vs {p}",
                k + 1,
                r.p_values[k]
            );
        }
    }
    for c in GOLDEN["jarque_bera"].as_array().unwrap() {
        let name = c["series"].as_str().unwrap();
        let r = jarque_bera(&rets(name)).unwrap();
        let s = f(c, "statistic");
        assert!(
            (r.statistic - s).abs() < 1e-10 * s.max(1.0),
            "{name}: {}",
            r.statistic
        );
        assert!((r.p_value - f(c, "p_value")).abs() < 1e-12, "{name}");
        assert!((r.skewness - f(c, "skewness")).abs() < 1e-12, "{name}");
        assert!((r.kurtosis - f(c, "kurtosis")).abs() < 1e-11, "{name}");
    }
}

#[test]
fn garch_matches_arch() {
    let cases = GOLDEN["garch"].as_array().unwrap();
    for c in cases {
        let name = c["series"].as_str().unwrap();
        let y: Vec<f64> = rets(name).iter().map(|r| 100.0 * r).collect();
        let arch = GarchParams {
            mu: f(c, "mu"),
            omega: f(c, "omega"),
            alpha: f(c, "alpha"),
            beta: f(c, "beta"),
        };
        // The likelihood at arch's own parameters.
        let at_arch = garch_loglik(&y, &arch);
        let want = f(c, "loglik");
        assert!((at_arch - want).abs() < 1e-8, "{name}: {at_arch} vs {want}");
        let fit = fit_garch(&y).unwrap();
        assert!((fit.backcast - f(c, "backcast")).abs() < 1e-12, "{name}");
        assert!(
            fit.loglik >= want - 1e-6,
            "{name}: ours {} below arch's {want}",
            fit.loglik
        );
        let p = fit.params;
        for (got, key) in [
            (p.mu, "mu"),
            (p.omega, "omega"),
            (p.alpha, "alpha"),
            (p.beta, "beta"),
        ] {
            assert!(
                (got - f(c, key)).abs() < 1e-3,
                "{name} {key}: {got} vs {}",
                f(c, key)
            );
        }
        eprintln!(
            "garch {name}: loglik ours {:.10} arch {want:.10} (+{:.2e}); |Δ| params {:.1e} {:.1e} {:.1e} {:.1e}; {} iterations",
            fit.loglik,
            fit.loglik - want,
            (p.mu - arch.mu).abs(),
            (p.omega - arch.omega).abs(),
            (p.alpha - arch.alpha).abs(),
            (p.beta - arch.beta).abs(),
            fit.iterations
        );
    }
}

#[test]
fn garch_forecast_and_volatility_match_arch_at_its_parameters() {
    use vibedesk::research::timeseries::garch::conditional_variance;
    for c in GOLDEN["garch"].as_array().unwrap() {
        let name = c["series"].as_str().unwrap();
        let y: Vec<f64> = rets(name).iter().map(|r| 100.0 * r).collect();
        let p = GarchParams {
            mu: f(c, "mu"),
            omega: f(c, "omega"),
            alpha: f(c, "alpha"),
            beta: f(c, "beta"),
        };
        let (h, fc) = conditional_variance(&y, &p, 10);
        let head = c["conditional_vol_head"].as_array().unwrap();
        let tail = c["conditional_vol_tail"].as_array().unwrap();
        for (i, v) in head.iter().enumerate() {
            assert!(
                (h[i].sqrt() - v.as_f64().unwrap()).abs() < 1e-12,
                "{name} head {i}"
            );
        }
        for (i, v) in tail.iter().enumerate() {
            let got = h[h.len() - 5 + i].sqrt();
            assert!((got - v.as_f64().unwrap()).abs() < 1e-10, "{name} tail {i}");
        }
        for (i, v) in c["forecast_variance"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            let v = v.as_f64().unwrap();
            assert!(
                (fc[i] - v).abs() < 1e-10 * v,
                "{name} forecast {i}: {} vs {v}",
                fc[i]
            );
        }
    }
}

#[test]
fn ewma_matches_arch() {
    for c in GOLDEN["ewma"].as_array().unwrap() {
        let name = c["series"].as_str().unwrap();
        let y: Vec<f64> = rets(name).iter().map(|r| 100.0 * r).collect();
        let r = ewma(&y, f(c, "lambda")).unwrap();
        for (i, v) in c["conditional_vol_head"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            assert!(
                (r.variance[i].sqrt() - v.as_f64().unwrap()).abs() < 1e-12,
                "{name} {i}"
            );
        }
        let n = r.variance.len();
        for (i, v) in c["conditional_vol_tail"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            assert!((r.variance[n - 5 + i].sqrt() - v.as_f64().unwrap()).abs() < 1e-12);
        }
        for v in c["forecast_variance"].as_array().unwrap() {
            assert!((r.next_variance - v.as_f64().unwrap()).abs() < 1e-12);
        }
        assert!(
            (r.loglik - f(c, "loglik")).abs() < 1e-8,
            "{name}: {}",
            r.loglik
        );
    }
}

/// Log closes of `symbols` on the dates all of them have (as the script's
/// `aligned_logs` and the tool's common dates).
fn aligned_logs(symbols: &[&str]) -> Vec<Vec<f64>> {
    let common: Vec<&String> = MARKET[symbols[0]]
        .iter()
        .map(|(d, _)| d)
        .filter(|d| {
            symbols[1..]
                .iter()
                .all(|s| MARKET[*s].iter().any(|(e, _)| e == *d))
        })
        .collect();
    symbols
        .iter()
        .map(|s| {
            MARKET[*s]
                .iter()
                .filter(|(d, _)| common.contains(&d))
                .map(|(_, c)| c.ln())
                .collect()
        })
        .collect()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("{v} is not a list"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn johansen_matches_statsmodels_coint_johansen() {
    let cases = GOLDEN["johansen"].as_array().unwrap();
    assert_eq!(cases.len(), 24);
    let seeded_system: Vec<Vec<f64>> = GOLDEN["johansen_inputs"]["seeded_system"]
        .as_array()
        .unwrap()
        .iter()
        .map(floats)
        .collect();
    let (mut worst_stat, mut worst_vec) = (0.0f64, 0.0f64);
    for c in cases {
        let system = match c["system"].as_str().unwrap() {
            "ko_pep" => aligned_logs(&["KO", "PEP"]),
            "ko_pep_pg" => aligned_logs(&["KO", "PEP", "PG"]),
            "ko_pep_pg_spy" => aligned_logs(&["KO", "PEP", "PG", "SPY"]),
            "seeded_system" => seeded_system.clone(),
            other => panic!("{other}"),
        };
        let t = match c["det_order"].as_i64().unwrap() {
            -1 => Trend::None,
            0 => Trend::Constant,
            _ => Trend::ConstantTrend,
        };
        let k = c["k_ar_diff"].as_u64().unwrap() as usize;
        let r = johansen(&system, t, k).unwrap();
        let label = format!("{} det {} k {k}", c["system"], c["det_order"]);
        assert_eq!(r.n_obs as u64, c["n_obs"].as_u64().unwrap(), "{label}");
        assert_eq!(
            r.rank_trace as u64,
            c["rank_trace"].as_u64().unwrap(),
            "{label}"
        );
        assert_eq!(
            r.rank_max_eigen as u64,
            c["rank_max_eigen"].as_u64().unwrap(),
            "{label}"
        );
        for (ours, key) in [
            (&r.eigenvalues, "eigenvalues"),
            (&r.trace, "trace"),
            (&r.max_eigen, "max_eigen"),
        ] {
            for (a, b) in ours.iter().zip(floats(&c[key])) {
                let rel = (a - b).abs() / b.abs();
                worst_stat = worst_stat.max(rel);
                assert!(rel < 1e-8, "{key} {a} vs {b} ({rel:.1e}) in {label}");
            }
        }
        for (ours, key) in [
            (&r.trace_critical_values, "trace_critical_values"),
            (&r.max_eigen_critical_values, "max_eigen_critical_values"),
        ] {
            let want: Vec<[f64; 3]> = c[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|row| {
                    let v: Vec<f64> = row.as_array().unwrap().iter().map(exact).collect();
                    [v[0], v[1], v[2]]
                })
                .collect();
            assert_eq!(*ours, want, "{key} in {label}");
        }
        // Each eigenvector up to scale and sign: compared with its first
        // component scaled to 1.
        let n = system.len();
        let ours = r.cointegrating_vectors(n);
        for (i, want) in c["eigenvectors"].as_array().unwrap().iter().enumerate() {
            let want = floats(want);
            for (a, b) in ours[i].iter().zip(&want) {
                let b = b / want[0];
                let d = (a - b).abs() / b.abs().max(1.0);
                worst_vec = worst_vec.max(d);
                assert!(d < 1e-6, "vector {i}: {a} vs {b} in {label}");
            }
        }
    }
    eprintln!(
        "johansen: worst relative eigenvalue/statistic {worst_stat:.1e}, normalised vector {worst_vec:.1e}"
    );
}

/// Standard errors at arch's own parameters, so a difference in the fits
/// cannot show up as one in the errors. arch's errors are numerical
/// derivatives: summing its own log-likelihood terms another way (exactly,
/// by fsum) moves them by up to 1e-6, so 1e-5 is as tight as they are
/// defined; a p-value far in the tail moves by t² times that.
#[test]
fn garch_standard_errors_match_arch_at_its_parameters() {
    let cases = GOLDEN["garch_inference"].as_array().unwrap();
    assert_eq!(cases.len(), 3);
    let (mut worst_se, mut worst_classic, mut worst_p) = (0.0f64, 0.0f64, 0.0f64);
    for c in cases {
        let name = c["series"].as_str().unwrap();
        let y: Vec<f64> = rets(name).iter().map(|r| 100.0 * r).collect();
        let p = floats(&c["params"]);
        let at = GarchParams {
            mu: p[0],
            omega: p[1],
            alpha: p[2],
            beta: p[3],
        };
        let r = garch_inference(&y, &at).unwrap();
        for (i, key) in ["mu", "omega", "alpha", "beta"].iter().enumerate() {
            let se = floats(&c["std_err"])[i];
            let rel = (r.std_err[i] - se).abs() / se;
            worst_se = worst_se.max(rel);
            assert!(
                rel < 1e-5,
                "{name} {key}: se {} vs {se} ({rel:.1e})",
                r.std_err[i]
            );
            let t = floats(&c["tvalues"])[i];
            assert!(
                (r.t_stat[i] - t).abs() < 1e-5 * t.abs(),
                "{name} {key}: t {}",
                r.t_stat[i]
            );
            let pv = floats(&c["pvalues"])[i];
            let dp = (r.p_value[i] - pv).abs();
            worst_p = worst_p.max(dp / pv.max(1e-300));
            assert!(dp <= 1e-3 * pv, "{name} {key}: p {} vs {pv}", r.p_value[i]);
            let classic = floats(&c["classic_std_err"])[i];
            let rel = (r.classic_std_err[i] - classic).abs() / classic;
            worst_classic = worst_classic.max(rel);
            assert!(
                rel < 1e-5,
                "{name} {key}: classic se {} vs {classic}",
                r.classic_std_err[i]
            );
        }
    }
    eprintln!(
        "garch standard errors: worst relative robust {worst_se:.1e}, classic {worst_classic:.1e}, p-value {worst_p:.1e}"
    );
}

/// SPY 2005-02-25..2015-12-31 from ts_market_spy.csv (the garch_ext goldens).
static SPY_0515: LazyLock<Vec<(String, f64)>> = LazyLock::new(|| {
    let text = std::fs::read_to_string(dir().join("ts_market_spy.csv")).unwrap();
    text.lines()
        .skip(1)
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            (f[1].to_string(), f[2].parse().unwrap())
        })
        .collect()
});

#[test]
fn the_garch_ext_spy_closes_are_the_embedded_ones() {
    let rows = &*SPY_0515;
    let s = embedded::load("SPY", Some(d(&rows[0].0)), Some(d(&rows[rows.len() - 1].0))).unwrap();
    assert_eq!(s.bars.close.len(), rows.len());
    for (i, (date, c)) in rows.iter().enumerate() {
        assert_eq!(s.bars.dates[i].to_string(), *date);
        assert_eq!(s.bars.close[i], *c, "SPY {date}");
    }
}

/// A garch_ext case's returns in percent.
fn ext_returns(name: &str) -> Vec<f64> {
    let r: Vec<f64> = match name {
        "spy_2005_2015" => SPY_0515.windows(2).map(|w| w[1].1 / w[0].1 - 1.0).collect(),
        "spy_returns" => returns("SPY"),
        "ko_returns" => returns("KO"),
        other => floats(&GOLDEN["garch_ext_inputs"][other]),
    };
    r.iter().map(|v| 100.0 * v).collect()
}

fn ext_spec(c: &Value) -> GarchSpec {
    GarchSpec {
        gjr: c["model"] == "gjr_garch",
        dist: if c["dist"] == "t" {
            ErrorDist::StudentT
        } else {
            ErrorDist::Normal
        },
    }
}

/// Student-t GARCH and GJR-GARCH (normal and t) against arch on SPY
/// 2005–2015, SPY's last 2,520 returns (its t-GARCH optimum on α + β = 1),
/// KO 2010–2015 and a seeded GJR path with t(6) shocks: the
/// likelihood at arch's parameters (1e-8 relative), our fit's (at least
/// arch's − 1e-6), the parameters (1e-3), the volatility path and forecast.
#[test]
fn garch_t_and_gjr_match_arch() {
    let cases = GOLDEN["garch_ext"].as_array().unwrap();
    assert_eq!(cases.len(), 12);
    let mut worst = (0.0f64, 0.0f64, f64::INFINITY);
    for c in cases {
        let spec = ext_spec(c);
        let label = format!("{} {} {}", c["series"], c["model"], c["dist"]);
        let names: Vec<&str> = c["names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().trim_end_matches("[1]"))
            .collect();
        assert_eq!(names, spec.names(), "{label}");
        let y = ext_returns(c["series"].as_str().unwrap());
        let arch = floats(&c["params"]);
        let want = f(c, "loglik");
        let at_arch = family_loglik(&y, spec, &arch);
        let rel = (at_arch - want).abs() / want.abs();
        worst.0 = worst.0.max(rel);
        assert!(rel < 1e-8, "{label}: {at_arch} vs {want}");
        let fit = fit_family(&y, spec).unwrap();
        worst.2 = worst.2.min(fit.loglik - want);
        assert!(
            fit.loglik >= want - 1e-6,
            "{label}: ours {} below arch's {want}",
            fit.loglik
        );
        for (i, (got, a)) in fit.params.iter().zip(&arch).enumerate() {
            worst.1 = worst.1.max((got - a).abs());
            assert!((got - a).abs() < 1e-3, "{label} {}: {got} vs {a}", names[i]);
        }
        let (h, fc) = family_variance(&y, spec, &arch, 10);
        for (i, v) in floats(&c["conditional_vol_head"]).iter().enumerate() {
            assert!((h[i].sqrt() - v).abs() < 1e-12, "{label} head {i}");
        }
        for (i, v) in floats(&c["conditional_vol_tail"]).iter().enumerate() {
            let got = h[h.len() - 5 + i].sqrt();
            assert!((got - v).abs() < 1e-10, "{label} tail {i}");
        }
        for (i, v) in floats(&c["forecast_variance"]).iter().enumerate() {
            assert!(
                (fc[i] - v).abs() < 1e-10 * v,
                "{label} forecast {i}: {} vs {v}",
                fc[i]
            );
        }
    }
    eprintln!(
        "garch t/gjr: worst relative loglik at arch's parameters {:.1e}, worst |Δ param| {:.1e}, least (ours − arch's) loglik {:+.2e}",
        worst.0, worst.1, worst.2
    );
}

/// Standard errors of t-GARCH and GJR-GARCH at arch's parameters: robust
/// and classic within 1e-5 relative, as for the normal GARCH.
#[test]
fn garch_t_and_gjr_standard_errors_match_arch() {
    let (mut worst_se, mut worst_classic) = (0.0f64, 0.0f64);
    for c in GOLDEN["garch_ext"].as_array().unwrap() {
        let spec = ext_spec(c);
        let label = format!("{} {} {}", c["series"], c["model"], c["dist"]);
        let y = ext_returns(c["series"].as_str().unwrap());
        let r = family_inference(&y, spec, &floats(&c["params"])).unwrap();
        let names = spec.names();
        for (i, name) in names.iter().enumerate() {
            let se = floats(&c["std_err"])[i];
            let rel = (r.std_err[i] - se).abs() / se;
            worst_se = worst_se.max(rel);
            assert!(
                rel < 1e-5,
                "{label} {name}: se {} vs {se} ({rel:.1e})",
                r.std_err[i]
            );
            let t = floats(&c["tvalues"])[i];
            assert!(
                (r.t_stat[i] - t).abs() <= 1e-5 * t.abs(),
                "{label} {name}: t"
            );
            let classic = floats(&c["classic_std_err"])[i];
            let rel = (r.classic_std_err[i] - classic).abs() / classic;
            worst_classic = worst_classic.max(rel);
            assert!(
                rel < 1e-5,
                "{label} {name}: classic {} vs {classic}",
                r.classic_std_err[i]
            );
        }
    }
    eprintln!(
        "garch t/gjr standard errors: worst relative robust {worst_se:.1e}, classic {worst_classic:.1e}"
    );
}
