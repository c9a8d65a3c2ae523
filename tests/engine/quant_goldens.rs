//! The quant desk against its reference libraries (docs §15.6): the goldens
//! in tests/golden/quant were written by `make_goldens.py` there with
//! QuantLib, PyPortfolioOpt, numpy and scipy at pinned versions; these tests
//! read the JSON and need no Python.

use std::path::PathBuf;

use serde_json::Value;
use vibedesk::research::options::{
    Greeks, OptionInputs, OptionKind, black_scholes, crr_american, implied_volatility,
};

fn golden(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/quant")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"))
}

fn inputs(case: &Value) -> OptionInputs {
    OptionInputs {
        kind: match case["kind"].as_str().unwrap() {
            "call" => OptionKind::Call,
            _ => OptionKind::Put,
        },
        spot: f(case, "spot"),
        strike: f(case, "strike"),
        expiry_years: f(case, "expiry_years"),
        volatility: f(case, "volatility"),
        rate: f(case, "rate"),
        dividend_yield: f(case, "dividend_yield"),
    }
}

fn field(g: &Greeks, key: &str) -> f64 {
    match key {
        "price" => g.price,
        "delta" => g.delta,
        "gamma" => g.gamma,
        "vega" => g.vega,
        "theta" => g.theta,
        "rho" => g.rho,
        _ => unreachable!(),
    }
}

fn rel(a: f64, b: f64) -> f64 {
    if a == b { 0.0 } else { (a - b).abs() / b.abs() }
}

/// Values below this many spots are zero for any price; there both
/// computations carry the closed form's cancellation, checked to 1e-8.
const TINY: f64 = 1e-30;

/// Black–Scholes–Merton price and Greeks, 1e-10 relative, on the grid of
/// 1,008 options (strikes 50–200 on a spot of 100, 2 days to 10 years,
/// volatility 8–90 %, rates −1 to 15 %, yields 0–10 %). The reference is
/// QuantLib's `AnalyticEuropeanEngine`, except where QuantLib itself is
/// more than 1e-11 away from the 50-digit closed form: its N(x) is
/// (1 + erf(x/√2))/2 and a put uses 1 − N(d1), which lose digits far in a
/// tail, and there the 50-digit value is the reference.
#[test]
fn european_prices_and_greeks_match_quantlib() {
    let g = golden("options.json");
    let cases = g["european"].as_array().unwrap();
    assert!(cases.len() >= 500, "a grid of at least 500 points");
    let (mut against_quantlib, mut against_exact) = (0, 0);
    let mut failures = Vec::new();
    for c in cases {
        let ours = black_scholes(&inputs(c)).unwrap();
        let floor = TINY * f(c, "spot");
        for key in ["price", "delta", "gamma", "vega", "theta", "rho"] {
            let (ql, exact) = (f(&c["quantlib"], key), f(&c["exact"], key));
            let o = field(&ours, key);
            let reference = if rel(ql, exact) <= 1e-11 {
                against_quantlib += 1;
                ql
            } else {
                against_exact += 1;
                exact
            };
            let tol = if exact.abs() < floor { 1e-8 } else { 1e-10 };
            if rel(o, reference) > tol {
                failures.push(format!("{key}: ours {o:e}, reference {reference:e} (QuantLib {ql:e}, exact {exact:e}) for {c}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} off:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Most values are QuantLib's own; the rest are its tails.
    assert!(
        against_quantlib >= 9 * (against_quantlib + against_exact) / 10,
        "{against_quantlib} vs {against_exact}"
    );
}

/// American options on QuantLib's CRR tree with 500 steps: price, delta,
/// gamma and theta to 1e-8 relative.
#[test]
fn american_prices_match_quantlibs_crr_tree() {
    let g = golden("options.json");
    let cases = g["american"].as_array().unwrap();
    assert!(cases.len() >= 100);
    for c in cases {
        let steps = c["steps"].as_u64().unwrap() as usize;
        let ours = crr_american(&inputs(c), steps).unwrap();
        for key in ["price", "delta", "gamma", "theta"] {
            let ql = f(&c["quantlib"], key);
            let o = field(&ours, key);
            let scale = if key == "theta" {
                ql.abs().max(1e-6)
            } else {
                ql.abs()
            };
            assert!(
                (o - ql).abs() <= 1e-8 * scale,
                "{key}: ours {o:e}, QuantLib {ql:e} for {c}"
            );
        }
        // Worth its exercise value, and the European option's up to the
        // tree's discretisation (0.5 % of the larger of it and 1).
        let eu = black_scholes(&inputs(c)).unwrap().price;
        let intrinsic = inputs(c).kind.payoff(f(c, "spot"), f(c, "strike"));
        assert!(
            ours.price >= intrinsic && ours.price >= eu - 5e-3 * eu.max(1.0),
            "{c}"
        );
    }
}

/// Implied volatility round-trips to 1e-10 over the golden grid, wherever
/// the price still moves with the volatility (vega · 1e-10 above the
/// price's own rounding), with the bounds error outside.
#[test]
fn implied_volatility_round_trips_on_the_grid() {
    let g = golden("options.json");
    let mut checked = 0;
    for c in g["european"].as_array().unwrap() {
        let o = inputs(c);
        let ours = black_scholes(&o).unwrap();
        if ours.vega * 1e-10 < 1e-13 * ours.price || ours.price < 1e-8 {
            continue;
        }
        let iv = implied_volatility(
            o.kind,
            o.spot,
            o.strike,
            o.expiry_years,
            ours.price,
            o.rate,
            o.dividend_yield,
        )
        .unwrap();
        assert!(
            (iv.volatility - o.volatility).abs() <= 1e-10 * o.volatility,
            "{iv:?} for {c}"
        );
        checked += 1;
    }
    assert!(checked >= 500, "{checked} round trips");
}

// ---------------------------------------------------------------------------
// Portfolio construction against PyPortfolioOpt.

use vibedesk::research::portfolio::{
    CovarianceKind, Method, OptimizeOptions, covariance_of, optimize,
};

fn dataset(g: &Value, name: &str) -> (Vec<String>, Vec<Vec<f64>>) {
    let d = &g["data"][name];
    let names = d["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let cols = d["returns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            c.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect()
        })
        .collect();
    (names, cols)
}

fn covariance_kind(s: &str) -> CovarianceKind {
    match s {
        "ledoit_wolf" => CovarianceKind::LedoitWolf,
        _ => CovarianceKind::Sample,
    }
}

/// The sample and Ledoit–Wolf covariances (× 252) equal pandas' and
/// scikit-learn's to 1e-12 relative.
#[test]
fn covariances_match_pandas_and_scikit_learn() {
    let g = golden("portfolio.json");
    for name in ["five", "eight", "twelve"] {
        let (_, cols) = dataset(&g, name);
        for kind in ["sample", "ledoit_wolf"] {
            let (ours, _) = covariance_of(&cols, covariance_kind(kind));
            let theirs = g["covariances"][name][kind].as_array().unwrap();
            for (i, row) in theirs.iter().enumerate() {
                for (j, v) in row.as_array().unwrap().iter().enumerate() {
                    let v = v.as_f64().unwrap();
                    assert!(
                        (ours.at(i, j) - v).abs() <= 1e-12 * v.abs().max(1e-3),
                        "{name} {kind} [{i},{j}]: {} vs {v}",
                        ours.at(i, j)
                    );
                }
            }
        }
    }
}

/// min_variance, max_sharpe and max_diversification within 1e-6 of
/// PyPortfolioOpt's `EfficientFrontier` (with and without bounds, sample
/// and Ledoit–Wolf covariance, two risk-free rates), HRP within 1e-10 of
/// its `HRPOpt` with single linkage.
#[test]
fn optimizers_match_pyportfolioopt() {
    let g = golden("portfolio.json");
    let cases = g["cases"].as_array().unwrap();
    assert!(cases.len() >= 30);
    let mut seen = std::collections::BTreeSet::new();
    for c in cases {
        let (names, cols) = dataset(&g, c["data"].as_str().unwrap());
        let method = Method::parse(c["method"].as_str().unwrap()).unwrap();
        seen.insert(method.as_str());
        let o = OptimizeOptions {
            method,
            risk_free_rate: f(c, "risk_free_rate"),
            min_weight: f(c, "min_weight"),
            max_weight: f(c, "max_weight"),
            covariance: covariance_kind(c["covariance"].as_str().unwrap()),
        };
        let p = optimize(&cols, &names, &o).unwrap_or_else(|e| panic!("{e} for {c}"));
        let tol = if method == Method::Hrp { 1e-10 } else { 1e-6 };
        let theirs: Vec<f64> = c["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let worst = p
            .weights
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(
            worst <= tol,
            "{} off by {worst:e}: ours {:?}, theirs {theirs:?}",
            c,
            p.weights
        );
    }
    assert_eq!(seen.len(), 4, "{seen:?}");
}

/// Risk parity gives every asset the same share of the variance, to 1e-9,
/// on every golden data set and with Ledoit–Wolf too.
#[test]
fn risk_parity_contributions_are_equal() {
    let g = golden("portfolio.json");
    for name in ["five", "eight", "twelve"] {
        let (names, cols) = dataset(&g, name);
        for cov in [CovarianceKind::Sample, CovarianceKind::LedoitWolf] {
            let mut o = OptimizeOptions::new(Method::RiskParity);
            o.covariance = cov;
            let p = optimize(&cols, &names, &o).unwrap();
            let share = 1.0 / names.len() as f64;
            for rc in &p.risk_contributions {
                assert!(
                    (rc - share).abs() <= 1e-9,
                    "{name} {cov:?}: {:?}",
                    p.risk_contributions
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Risk against numpy and scipy.

use vibedesk::research::risk::risk_report;

/// VaR and ES (historical, normal, Cornish–Fisher) to 1e-12 relative;
/// volatility, drawdowns, component VaR and concentration beside them, for
/// one series, a long book and a long–short book, at three confidences
/// and one- and ten-day horizons.
#[test]
fn risk_reports_match_numpy_and_scipy() {
    let g = golden("risk.json");
    let cases = g["cases"].as_array().unwrap();
    for c in cases {
        let (_, cols) = dataset(&g, c["data"].as_str().unwrap());
        let w: Vec<f64> = c["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let h = c["horizon_days"].as_u64().unwrap() as usize;
        let rep = risk_report(&cols, &w, f(c, "confidence"), h).unwrap();
        let e = &c["expected"];
        let close = |ours: f64, key: &str, tol: f64| {
            let theirs = f(e, key);
            assert!(
                (ours - theirs).abs() <= tol * theirs.abs(),
                "{key}: ours {ours:e}, numpy {theirs:e} in {}",
                c["data"]
            );
        };
        close(rep.var_historical, "var_historical", 1e-12);
        close(rep.es_historical, "es_historical", 1e-12);
        close(rep.var_parametric, "var_parametric", 1e-12);
        close(rep.es_parametric, "es_parametric", 1e-12);
        close(rep.var_cornish_fisher, "var_cornish_fisher", 1e-12);
        close(rep.volatility, "volatility", 1e-12);
        close(rep.max_drawdown, "max_drawdown", 1e-12);
        close(rep.skewness, "skewness", 1e-10);
        close(rep.excess_kurtosis, "excess_kurtosis", 1e-10);
        close(rep.hhi, "hhi", 1e-14);
        let comp: Vec<f64> = e["component_var"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        for (a, b) in rep.component_var.iter().zip(&comp) {
            assert!((a - b).abs() <= 1e-10, "component {a} vs {b}");
        }
        let dd = e["drawdowns"].as_array().unwrap();
        assert_eq!(rep.drawdowns.len(), dd.len());
        for (ours, theirs) in rep.drawdowns.iter().zip(dd) {
            assert_eq!(ours.peak as u64, theirs["peak"].as_u64().unwrap());
            assert_eq!(ours.trough as u64, theirs["trough"].as_u64().unwrap());
            assert_eq!(ours.recovery.map(|r| r as u64), theirs["recovery"].as_u64());
            assert!((ours.depth - f(theirs, "depth")).abs() <= 1e-12);
        }
    }
}
