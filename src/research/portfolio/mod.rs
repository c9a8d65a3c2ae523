//! Portfolio construction (docs §15.3): seven long-only methods on daily
//! returns, weights summing to 1 within `[min_weight, max_weight]`.
//!
//! | method | weights |
//! |---|---|
//! | `equal_weight` | 1/n |
//! | `inverse_volatility` | ∝ 1/σ_i |
//! | `min_variance` | argmin wᵀΣw (a QP, [`qp`]) |
//! | `max_sharpe` | argmax (wᵀμ − r_f)/√(wᵀΣw), as PyPortfolioOpt: the QP min yᵀΣy with (μ − r_f)ᵀy = 1, bounds scaled by k = Σy, w = y/k |
//! | `max_diversification` | argmax wᵀσ/√(wᵀΣw): `max_sharpe` with σ for μ − r_f |
//! | `risk_parity` | equal risk contributions ([`risk_parity`]) |
//! | `hrp` | López de Prado's hierarchical risk parity ([`hrp`]) |
//!
//! μ is the mean daily return × 252 and Σ the sample covariance (ddof 1)
//! × 252, or Ledoit–Wolf × 252 ([`covariance`]). Where a method's own
//! weights (inverse volatility, HRP) fall outside the bounds, the ones
//! outside are set to the bound and the rest rescaled in proportion until
//! all fit; equal risk contributions outside the bounds are an error,
//! since capping them would no longer equalise anything.

pub mod covariance;
pub mod hrp;
pub mod qp;
pub mod risk_parity;

use serde::{Deserialize, Serialize};

use covariance::{Matrix, TRADING_DAYS, annual_ledoit_wolf, annual_sample_cov, means};
use qp::{Constraints, QpError};

/// The optimisers, by their names in tools and configs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    EqualWeight,
    InverseVolatility,
    MinVariance,
    MaxSharpe,
    RiskParity,
    MaxDiversification,
    Hrp,
}

impl Method {
    pub const ALL: [Method; 7] = [
        Method::EqualWeight,
        Method::InverseVolatility,
        Method::MinVariance,
        Method::MaxSharpe,
        Method::RiskParity,
        Method::MaxDiversification,
        Method::Hrp,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Method::EqualWeight => "equal_weight",
            Method::InverseVolatility => "inverse_volatility",
            Method::MinVariance => "min_variance",
            Method::MaxSharpe => "max_sharpe",
            Method::RiskParity => "risk_parity",
            Method::MaxDiversification => "max_diversification",
            Method::Hrp => "hrp",
        }
    }

    /// The method named `s` (as [`Method::as_str`]).
    pub fn parse(s: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == s.trim())
    }

    /// Every name, for error messages and schemas.
    pub(crate) fn names() -> String {
        Method::ALL.map(Method::as_str).join(", ")
    }
}

/// Which covariance estimate the optimisers use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CovarianceKind {
    #[default]
    Sample,
    LedoitWolf,
}

impl CovarianceKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CovarianceKind::Sample => "sample",
            CovarianceKind::LedoitWolf => "ledoit_wolf",
        }
    }
}

/// What to optimise beside the returns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OptimizeOptions {
    pub method: Method,
    /// Annual.
    pub risk_free_rate: f64,
    pub min_weight: f64,
    pub max_weight: f64,
    pub covariance: CovarianceKind,
}

impl OptimizeOptions {
    pub fn new(method: Method) -> Self {
        OptimizeOptions {
            method,
            risk_free_rate: 0.0,
            min_weight: 0.0,
            max_weight: 1.0,
            covariance: CovarianceKind::Sample,
        }
    }
}

/// An optimised portfolio (annual figures).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Portfolio {
    pub weights: Vec<f64>,
    pub expected_return: f64,
    pub volatility: f64,
    pub sharpe: f64,
    /// w_i·(Σw)_i / wᵀΣw: each asset's share of the variance.
    pub risk_contributions: Vec<f64>,
    /// The Ledoit–Wolf shrinkage intensity, when that estimate was used.
    pub shrinkage: Option<f64>,
}

/// Why no portfolio came out, with what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PortfolioError {
    #[error("{0}")]
    Input(String),
    #[error(
        "infeasible bounds: {n} assets with min_weight {min} and max_weight {max} cannot sum to 1 (need n·min_weight ≤ 1 ≤ n·max_weight, 0 ≤ min_weight ≤ max_weight ≤ 1)"
    )]
    Bounds { n: usize, min: f64, max: f64 },
    #[error(
        "the covariance matrix is singular ({assets} assets, {days} days): use more days than assets, drop a duplicate series, or set covariance to ledoit_wolf"
    )]
    Singular { assets: usize, days: usize },
    #[error(
        "max_sharpe needs a portfolio within the bounds whose expected return beats the risk-free rate {rf}; the best asset returns {best:.6} a year: lower risk_free_rate or choose min_variance"
    )]
    NoExcessReturn { rf: f64, best: f64 },
    #[error(
        "equal risk contributions need weights from {low:.4} to {high:.4}, outside [{min}, {max}]: widen min_weight / max_weight or choose min_variance"
    )]
    RiskParityBounds {
        low: f64,
        high: f64,
        min: f64,
        max: f64,
    },
    #[error("the optimiser failed: {0}")]
    Solver(String),
    #[error(transparent)]
    Interrupted(#[from] crate::research::Interrupted),
}

/// Checks the returns: at least one asset, equal lengths, two days or
/// more, every value finite.
pub(crate) fn check_returns(columns: &[Vec<f64>], names: &[String]) -> Result<(), PortfolioError> {
    let Some(first) = columns.first() else {
        return Err(PortfolioError::Input("no assets were given".into()));
    };
    if first.len() < 2 {
        return Err(PortfolioError::Input(format!(
            "{} has {} return(s); at least 2 days are needed",
            names.first().map_or("the first asset", |s| s.as_str()),
            first.len()
        )));
    }
    for (c, name) in columns.iter().zip(names) {
        if c.len() != first.len() {
            return Err(PortfolioError::Input(format!(
                "the return series differ in length ({} has {}, {} has {}): give equal lengths",
                names[0],
                first.len(),
                name,
                c.len()
            )));
        }
        if let Some(i) = c.iter().position(|v| !v.is_finite()) {
            return Err(PortfolioError::Input(format!(
                "{name}'s return #{i} is not a finite number"
            )));
        }
    }
    Ok(())
}

fn check_bounds(n: usize, o: &OptimizeOptions) -> Result<(), PortfolioError> {
    let (min, max) = (o.min_weight, o.max_weight);
    let nf = n as f64;
    let ok = min.is_finite()
        && max.is_finite()
        && (0.0..=1.0).contains(&min)
        && (0.0..=1.0).contains(&max)
        && min <= max
        && nf * min <= 1.0 + 1e-12
        && nf * max >= 1.0 - 1e-12;
    if ok {
        Ok(())
    } else {
        Err(PortfolioError::Bounds { n, min, max })
    }
}

/// The annual covariance the options ask for, and LW's shrinkage.
pub fn covariance_of(columns: &[Vec<f64>], kind: CovarianceKind) -> (Matrix, Option<f64>) {
    match kind {
        CovarianceKind::Sample => (annual_sample_cov(columns), None),
        CovarianceKind::LedoitWolf => {
            let (m, s) = annual_ledoit_wolf(columns);
            (m, Some(s))
        }
    }
}

/// Optimises `columns` (one daily return series per asset, equal lengths).
pub fn optimize(
    columns: &[Vec<f64>],
    names: &[String],
    o: &OptimizeOptions,
) -> Result<Portfolio, PortfolioError> {
    check_returns(columns, names)?;
    let n = columns.len();
    check_bounds(n, o)?;
    if !o.risk_free_rate.is_finite() {
        return Err(PortfolioError::Input(
            "'risk_free_rate' must be a finite number (annual, 0.02 for 2 %)".into(),
        ));
    }
    let days = columns[0].len();
    let mu: Vec<f64> = means(columns).iter().map(|m| m * TRADING_DAYS).collect();
    let lean = matches!(o.method, Method::EqualWeight | Method::InverseVolatility);
    if lean && o.covariance == CovarianceKind::Sample {
        // These need the variances and Σw only, not Σ itself.
        return lean_weights(columns, &mu, o).ok_or(PortfolioError::Singular { assets: n, days });
    }
    let (cov, shrinkage) = covariance_of(columns, o.covariance);
    let singular = || PortfolioError::Singular { assets: n, days };
    let weights = weights_for(&cov, &mu, o).map_err(|e| match e {
        WeightsError::Qp(QpError::NotPositiveDefinite { .. }) => singular(),
        WeightsError::Qp(QpError::Infeasible) if o.method == Method::MaxSharpe => {
            PortfolioError::NoExcessReturn {
                rf: o.risk_free_rate,
                best: mu.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            }
        }
        WeightsError::Qp(QpError::Interrupted(i)) => PortfolioError::Interrupted(i),
        WeightsError::Qp(q) => PortfolioError::Solver(q.to_string()),
        WeightsError::Portfolio(p) => p,
    })?;
    Ok(describe(weights, &cov, &mu, o.risk_free_rate, shrinkage))
}

enum WeightsError {
    Qp(QpError),
    Portfolio(PortfolioError),
}

impl From<QpError> for WeightsError {
    fn from(e: QpError) -> Self {
        WeightsError::Qp(e)
    }
}

fn weights_for(cov: &Matrix, mu: &[f64], o: &OptimizeOptions) -> Result<Vec<f64>, WeightsError> {
    let n = cov.n;
    let (lo, hi) = (o.min_weight, o.max_weight);
    Ok(match o.method {
        Method::EqualWeight => vec![1.0 / n as f64; n],
        Method::InverseVolatility => {
            if (0..n).any(|i| cov.at(i, i) <= 0.0) {
                return Err(WeightsError::Qp(QpError::NotPositiveDefinite { index: 0 }));
            }
            let inv: Vec<f64> = cov.vols().iter().map(|v| 1.0 / v).collect();
            let total: f64 = inv.iter().sum();
            capped(inv.iter().map(|v| v / total).collect(), lo, hi)
        }
        Method::MinVariance => min_variance(cov, lo, hi)?,
        Method::MaxSharpe => {
            let excess: Vec<f64> = mu.iter().map(|m| m - o.risk_free_rate).collect();
            tangency(cov, &excess, lo, hi)?
        }
        Method::MaxDiversification => tangency(cov, &cov.vols(), lo, hi)?,
        Method::RiskParity => {
            let w = risk_parity::erc_weights(cov)?;
            let low = w.iter().copied().fold(f64::INFINITY, f64::min);
            let high = w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if low < lo - 1e-12 || high > hi + 1e-12 {
                return Err(WeightsError::Portfolio(PortfolioError::RiskParityBounds {
                    low,
                    high,
                    min: lo,
                    max: hi,
                }));
            }
            w
        }
        Method::Hrp => {
            qp::cholesky(n, &cov.data)?;
            capped(hrp::hrp_weights(cov), lo, hi)
        }
    })
}

/// min wᵀΣw subject to Σw = 1 and lo ≤ w ≤ hi.
fn min_variance(cov: &Matrix, lo: f64, hi: f64) -> Result<Vec<f64>, QpError> {
    let n = cov.n;
    let g: Vec<f64> = cov.data.iter().map(|v| 2.0 * v).collect();
    let mut eq = Constraints::default();
    eq.push(vec![1.0; n], -1.0);
    let mut ineq = Constraints::default();
    for i in 0..n {
        ineq.push(unit(n, i, 1.0), -lo);
        if hi < 1.0 {
            ineq.push(unit(n, i, -1.0), hi);
        }
    }
    let w = qp::solve(n, &g, &vec![0.0; n], &eq, &ineq)?;
    Ok(tidy(w))
}

/// max (aᵀw)/√(wᵀΣw) over the bounded simplex, by the homogeneous QP
/// min yᵀΣy, aᵀy = 1, lo·Σy ≤ y_i ≤ hi·Σy; w = y/Σy (PyPortfolioOpt's
/// `max_sharpe` transformation).
fn tangency(cov: &Matrix, a: &[f64], lo: f64, hi: f64) -> Result<Vec<f64>, QpError> {
    let n = cov.n;
    if a.iter().all(|v| *v <= 0.0) {
        return Err(QpError::Infeasible);
    }
    let g: Vec<f64> = cov.data.iter().map(|v| 2.0 * v).collect();
    let mut eq = Constraints::default();
    eq.push(a.to_vec(), -1.0);
    let mut ineq = Constraints::default();
    for i in 0..n {
        // y_i − lo·Σy ≥ 0 and hi·Σy − y_i ≥ 0.
        let mut low: Vec<f64> = vec![-lo; n];
        low[i] += 1.0;
        ineq.push(low, 0.0);
        if hi < 1.0 {
            let mut high: Vec<f64> = vec![hi; n];
            high[i] -= 1.0;
            ineq.push(high, 0.0);
        }
    }
    let y = qp::solve(n, &g, &vec![0.0; n], &eq, &ineq)?;
    let k: f64 = y.iter().sum();
    if k.is_nan() || k <= 0.0 {
        return Err(QpError::Infeasible);
    }
    Ok(tidy(y.iter().map(|v| v / k).collect()))
}

fn unit(n: usize, i: usize, v: f64) -> Vec<f64> {
    let mut e = vec![0.0; n];
    e[i] = v;
    e
}

/// Rounding noise below zero becomes zero; the sum is exactly 1 again.
fn tidy(mut w: Vec<f64>) -> Vec<f64> {
    w.iter_mut().for_each(|v| {
        if *v < 0.0 && *v > -1e-12 {
            *v = 0.0;
        }
    });
    let total: f64 = w.iter().sum();
    w.iter_mut().for_each(|v| *v /= total);
    w
}

/// Weights outside `[lo, hi]` set to the bound, the others rescaled in
/// proportion to fill the rest, until every weight fits.
pub(crate) fn capped(mut w: Vec<f64>, lo: f64, hi: f64) -> Vec<f64> {
    let n = w.len();
    let mut fixed = vec![false; n];
    for _ in 0..=n {
        let free_total: f64 = (0..n).filter(|i| !fixed[*i]).map(|i| w[i]).sum();
        let fixed_total: f64 = (0..n).filter(|i| fixed[*i]).map(|i| w[i]).sum();
        if free_total > 0.0 {
            let scale = (1.0 - fixed_total) / free_total;
            (0..n).filter(|i| !fixed[*i]).for_each(|i| w[i] *= scale);
        }
        let mut changed = false;
        for i in 0..n {
            if !fixed[i] && (w[i] > hi + 1e-15 || w[i] < lo - 1e-15) {
                w[i] = w[i].clamp(lo, hi);
                fixed[i] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    w
}

/// Equal or inverse-volatility weights and their figures from the
/// variances and Σw (the same numbers as through Σ, in O(assets × days)).
fn lean_weights(columns: &[Vec<f64>], mu: &[f64], o: &OptimizeOptions) -> Option<Portfolio> {
    let n = columns.len();
    let weights = match o.method {
        Method::InverseVolatility => {
            let vars = covariance::sample_variances(columns);
            if vars.iter().any(|v| v.is_nan() || *v <= 0.0) {
                return None;
            }
            let inv: Vec<f64> = vars
                .iter()
                .map(|v| 1.0 / (v * TRADING_DAYS).sqrt())
                .collect();
            let total: f64 = inv.iter().sum();
            capped(
                inv.iter().map(|v| v / total).collect(),
                o.min_weight,
                o.max_weight,
            )
        }
        _ => vec![1.0 / n as f64; n],
    };
    let sw: Vec<f64> = covariance::sample_cov_times(columns, &weights)
        .iter()
        .map(|v| v * TRADING_DAYS)
        .collect();
    Some(describe_sw(weights, sw, mu, o.risk_free_rate, None))
}

/// The figures of a weight vector.
pub(crate) fn describe(
    weights: Vec<f64>,
    cov: &Matrix,
    mu: &[f64],
    rf: f64,
    shrinkage: Option<f64>,
) -> Portfolio {
    let sw = cov.times(&weights);
    describe_sw(weights, sw, mu, rf, shrinkage)
}

/// The figures of a weight vector from Σw.
fn describe_sw(
    weights: Vec<f64>,
    sw: Vec<f64>,
    mu: &[f64],
    rf: f64,
    shrinkage: Option<f64>,
) -> Portfolio {
    let variance: f64 = sw.iter().zip(&weights).map(|(a, b)| a * b).sum();
    let volatility = variance.sqrt();
    let expected_return: f64 = mu.iter().zip(&weights).map(|(a, b)| a * b).sum();
    let risk_contributions = weights
        .iter()
        .zip(&sw)
        .map(|(w, s)| w * s / variance)
        .collect();
    Portfolio {
        sharpe: (expected_return - rf) / volatility,
        weights,
        expected_return,
        volatility,
        risk_contributions,
        shrinkage,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three assets, 300 days, from a fixed recurrence (no RNG needed).
    fn returns() -> (Vec<Vec<f64>>, Vec<String>) {
        let mut state = 12345u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) - 0.5
        };
        let cols: Vec<Vec<f64>> = (0..300)
            .map(|_| {
                let m = next() * 0.01;
                [
                    m + next() * 0.01 + 0.0004,
                    m * 0.5 + next() * 0.02 + 0.0002,
                    next() * 0.005 + 0.0001,
                ]
            })
            .fold(vec![Vec::new(), Vec::new(), Vec::new()], |mut acc, r| {
                for k in 0..3 {
                    acc[k].push(r[k]);
                }
                acc
            });
        (cols, vec!["A".into(), "B".into(), "C".into()])
    }

    #[test]
    fn every_method_gives_bounded_weights_summing_to_one() {
        let (cols, names) = returns();
        for m in Method::ALL {
            let mut o = OptimizeOptions::new(m);
            o.max_weight = 0.7;
            let p = optimize(&cols, &names, &o).unwrap_or_else(|e| panic!("{m:?}: {e}"));
            assert!(
                (p.weights.iter().sum::<f64>() - 1.0).abs() < 1e-12,
                "{m:?} {p:?}"
            );
            assert!(
                p.weights.iter().all(|w| *w >= -1e-12 && *w <= 0.7 + 1e-12),
                "{m:?} {p:?}"
            );
            assert!((p.risk_contributions.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn min_variance_beats_every_other_method() {
        let (cols, names) = returns();
        let best = optimize(&cols, &names, &OptimizeOptions::new(Method::MinVariance)).unwrap();
        for m in Method::ALL {
            let p = optimize(&cols, &names, &OptimizeOptions::new(m)).unwrap();
            assert!(p.volatility >= best.volatility - 1e-14, "{m:?}");
        }
        let sharpe = optimize(&cols, &names, &OptimizeOptions::new(Method::MaxSharpe)).unwrap();
        for m in Method::ALL {
            let p = optimize(&cols, &names, &OptimizeOptions::new(m)).unwrap();
            assert!(p.sharpe <= sharpe.sharpe + 1e-12, "{m:?}");
        }
    }

    #[test]
    fn infeasible_bounds_are_a_clear_error() {
        let (cols, names) = returns();
        let mut o = OptimizeOptions::new(Method::MinVariance);
        o.max_weight = 0.3;
        let e = optimize(&cols, &names, &o).unwrap_err().to_string();
        assert!(
            e.starts_with("infeasible bounds: 3 assets with min_weight 0 and max_weight 0.3"),
            "{e}"
        );
    }

    #[test]
    fn capping_redistributes_in_proportion() {
        let w = capped(vec![0.7, 0.2, 0.1], 0.0, 0.5);
        assert_eq!(w[0], 0.5);
        assert!((w[1] - 2.0 / 3.0 * 0.5).abs() < 1e-15 && (w[2] - 1.0 / 3.0 * 0.5).abs() < 1e-15);
    }
}
