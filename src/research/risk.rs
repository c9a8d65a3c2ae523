//! A risk report of one return series or a weighted book (docs §15.4).
//!
//! The book's daily return is r_t = Σ w_i·r_it (fixed weights, rebalanced
//! daily). Losses are positive fractions. With confidence c, α = 1 − c and
//! horizon h days:
//!
//! - historical VaR = −quantile(s, α), numpy's linear interpolation, over
//!   s = r (h = 1) or the overlapping h-day sums of r; ES = −mean(s ≤ that
//!   quantile);
//! - parametric (normal) VaR = −(h·μ + z_α·σ·√h), ES = −h·μ + σ·√h·φ(z_α)/α,
//!   μ the mean and σ the standard deviation (ddof 1) of daily returns:
//!   the h-day sum of independent normal days;
//! - Cornish–Fisher VaR replaces z_α by z_α + (z²−1)S/6 + (z³−3z)K/24 −
//!   (2z³−5z)S²/36 with S the skewness and K the excess kurtosis
//!   (population moments) of daily returns, S/√h and K/h over h days;
//! - volatility σ·√252; drawdowns on the compounded wealth Π(1 + r_t);
//! - component VaR: each asset's Euler share w_i·∂VaR/∂w_i / VaR of the
//!   parametric VaR, summing to 1;
//! - HHI = Σ w_i² / (Σ|w_i|)², effective number of assets 1/HHI.

use serde::Serialize;

use crate::research::portfolio::covariance::{TRADING_DAYS, sample_cov_times};
use crate::research::stats::{
    excess_kurtosis, mean, norm_pdf, norm_ppf, quantile_sorted, skewness, std_dev,
};

/// How many drawdowns the report lists.
pub(crate) const DRAWDOWNS: usize = 5;

/// A drawdown on the wealth path: indices into it (0 is the start, before
/// the first return; i is after return i).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Drawdown {
    pub peak: usize,
    pub trough: usize,
    /// None when the wealth has not regained the peak by the end.
    pub recovery: Option<usize>,
    /// 1 − trough / peak, a positive fraction.
    pub depth: f64,
}

/// What [`risk_report`] computes (daily figures over the horizon).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RiskReport {
    pub var_historical: f64,
    pub es_historical: f64,
    pub var_parametric: f64,
    pub es_parametric: f64,
    pub var_cornish_fisher: f64,
    /// Annualised (× √252).
    pub volatility: f64,
    pub max_drawdown: f64,
    pub drawdowns: Vec<Drawdown>,
    /// Each asset's share of the parametric VaR (one series: 1).
    pub component_var: Vec<f64>,
    pub hhi: f64,
    pub effective_n: f64,
    /// Daily mean and standard deviation (ddof 1), skewness and excess
    /// kurtosis (population), and the number of daily returns.
    pub mean_daily: f64,
    pub std_daily: f64,
    pub skewness: f64,
    pub excess_kurtosis: f64,
    pub observations: usize,
    /// The book's daily returns.
    #[serde(skip)]
    pub returns: Vec<f64>,
}

/// Inputs the report cannot take.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RiskError {
    #[error("{0}")]
    Input(String),
}

fn input(msg: impl Into<String>) -> RiskError {
    RiskError::Input(msg.into())
}

/// The report for `columns` (each asset's daily returns, equal lengths)
/// held with `weights` (one per column).
pub fn risk_report(
    columns: &[Vec<f64>],
    weights: &[f64],
    confidence: f64,
    horizon_days: usize,
) -> Result<RiskReport, RiskError> {
    check(columns, weights, confidence, horizon_days)?;
    let n = columns[0].len();
    let r: Vec<f64> = (0..n)
        .map(|t| columns.iter().zip(weights).map(|(c, w)| w * c[t]).sum())
        .collect();
    let alpha = 1.0 - confidence;
    let h = horizon_days as f64;
    let (var_historical, es_historical) = historical(&r, alpha, horizon_days);
    let (mu, sd) = (mean(&r), std_dev(&r, 1));
    let z = norm_ppf(alpha);
    let var_parametric = -(h * mu + z * sd * h.sqrt());
    let es_parametric = -h * mu + sd * h.sqrt() * norm_pdf(z) / alpha;
    let (skew, kurt) = (skewness(&r), excess_kurtosis(&r));
    let (s, k) = (skew / h.sqrt(), kurt / h);
    let z_cf = z + (z * z - 1.0) * s / 6.0 + (z * z * z - 3.0 * z) * k / 24.0
        - (2.0 * z * z * z - 5.0 * z) * s * s / 36.0;
    let var_cornish_fisher = -(h * mu + z_cf * sd * h.sqrt());
    let drawdowns = drawdowns(&r);
    let max_drawdown = drawdowns.first().map_or(0.0, |d| d.depth);
    let component_var = components(columns, weights, z, h, var_parametric);
    let abs: f64 = weights.iter().map(|w| w.abs()).sum();
    let hhi = weights.iter().map(|w| w * w).sum::<f64>() / (abs * abs);
    Ok(RiskReport {
        var_historical,
        es_historical,
        var_parametric,
        es_parametric,
        var_cornish_fisher,
        volatility: sd * TRADING_DAYS.sqrt(),
        max_drawdown,
        drawdowns: drawdowns.into_iter().take(DRAWDOWNS).collect(),
        component_var,
        hhi,
        effective_n: 1.0 / hhi,
        mean_daily: mu,
        std_daily: sd,
        skewness: skew,
        excess_kurtosis: kurt,
        observations: n,
        returns: r,
    })
}

fn check(
    columns: &[Vec<f64>],
    weights: &[f64],
    confidence: f64,
    horizon: usize,
) -> Result<(), RiskError> {
    let Some(first) = columns.first() else {
        return Err(input("no return series were given"));
    };
    if weights.len() != columns.len() {
        return Err(input(format!(
            "{} weights for {} series: give one weight per series",
            weights.len(),
            columns.len()
        )));
    }
    if weights.iter().any(|w| !w.is_finite()) || weights.iter().all(|w| *w == 0.0) {
        return Err(input("weights must be finite numbers, not all 0"));
    }
    if columns.iter().any(|c| c.len() != first.len()) {
        return Err(input(
            "the return series differ in length: give equal lengths",
        ));
    }
    if columns.iter().flatten().any(|v| !v.is_finite()) {
        return Err(input("every return must be a finite number"));
    }
    if !(confidence > 0.5 && confidence < 1.0) {
        return Err(input(format!(
            "'confidence' must be between 0.5 and 1 (0.99 for 99 %), got {confidence}"
        )));
    }
    if horizon == 0 || first.len() < horizon + 2 {
        return Err(input(format!(
            "'horizon_days' must be at least 1 and leave two {horizon}-day windows in {} daily returns",
            first.len()
        )));
    }
    Ok(())
}

/// (VaR, ES) from the sorted daily returns or overlapping h-day sums.
fn historical(r: &[f64], alpha: f64, h: usize) -> (f64, f64) {
    let mut s: Vec<f64> = if h == 1 {
        r.to_vec()
    } else {
        r.windows(h).map(|w| w.iter().sum()).collect()
    };
    s.sort_by(f64::total_cmp);
    let q = quantile_sorted(&s, alpha);
    let tail: Vec<f64> = s.iter().copied().take_while(|v| *v <= q).collect();
    (-q, -mean(&tail))
}

/// Drawdown episodes on the wealth path, deepest first.
pub(crate) fn drawdowns(r: &[f64]) -> Vec<Drawdown> {
    let mut wealth = Vec::with_capacity(r.len() + 1);
    wealth.push(1.0);
    for x in r {
        let last = wealth.last().copied().unwrap_or(1.0);
        wealth.push(last * (1.0 + x));
    }
    let mut out = Vec::new();
    let (mut peak, mut trough) = (0usize, 0usize);
    let mut open = false;
    for (i, w) in wealth.iter().enumerate().skip(1) {
        if *w >= wealth[peak] {
            if open {
                out.push(episode(&wealth, peak, trough, Some(i)));
                open = false;
            }
            peak = i;
            trough = i;
        } else {
            open = true;
            if *w < wealth[trough] {
                trough = i;
            }
        }
    }
    if open {
        out.push(episode(&wealth, peak, trough, None));
    }
    // Deepest first; an equal depth keeps the earlier episode first.
    out.sort_by(|a, b| b.depth.total_cmp(&a.depth));
    out
}

fn episode(wealth: &[f64], peak: usize, trough: usize, recovery: Option<usize>) -> Drawdown {
    Drawdown {
        peak,
        trough,
        recovery,
        depth: 1.0 - wealth[trough] / wealth[peak],
    }
}

/// Euler shares of the parametric VaR: w_i·(−h·μ_i − z·√h·(Σw)_i/σ_p) / VaR.
fn components(columns: &[Vec<f64>], weights: &[f64], z: f64, h: f64, var: f64) -> Vec<f64> {
    if columns.len() == 1 {
        return vec![1.0];
    }
    // Σw alone, without forming Σ.
    let sw = sample_cov_times(columns, weights);
    let sigma = sw
        .iter()
        .zip(weights)
        .map(|(a, b)| a * b)
        .sum::<f64>()
        .sqrt();
    columns
        .iter()
        .zip(weights)
        .zip(&sw)
        .map(|((c, w), s)| w * (-h * mean(c) - z * h.sqrt() * s / sigma) / var)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawdowns_are_episodes_from_peak_to_recovery() {
        // Wealth 1, 1.1, 0.99, 1.1 (recovered), 1.21, 0.968, 1.0648.
        let r = [0.1, -0.1, 1.1 / 0.99 - 1.0, 0.1, -0.2, 0.1];
        let d = drawdowns(&r);
        assert_eq!(d.len(), 2);
        assert_eq!((d[0].peak, d[0].trough, d[0].recovery), (4, 5, None));
        assert!((d[0].depth - 0.2).abs() < 1e-12);
        assert_eq!((d[1].peak, d[1].trough, d[1].recovery), (1, 2, Some(3)));
        assert!((d[1].depth - 0.1).abs() < 1e-12);
    }

    #[test]
    fn one_series_is_its_own_book() {
        let r: Vec<f64> = (0..250)
            .map(|i| ((i * 37 % 101) as f64 - 50.0) / 2000.0)
            .collect();
        let rep = risk_report(std::slice::from_ref(&r), &[1.0], 0.95, 1).unwrap();
        assert_eq!(rep.component_var, vec![1.0]);
        assert_eq!((rep.hhi, rep.effective_n), (1.0, 1.0));
        assert!(rep.es_historical >= rep.var_historical);
        assert!(rep.es_parametric >= rep.var_parametric);
        // Twice the weight, twice the loss.
        let two = risk_report(&[r], &[2.0], 0.95, 1).unwrap();
        assert!((two.var_historical - 2.0 * rep.var_historical).abs() < 1e-15);
    }

    #[test]
    fn component_shares_sum_to_one_and_weights_set_concentration() {
        let a: Vec<f64> = (0..300)
            .map(|i| ((i * 37 % 101) as f64 - 50.0) / 2000.0)
            .collect();
        let b: Vec<f64> = (0..300)
            .map(|i| ((i * 53 % 97) as f64 - 48.0) / 4000.0)
            .collect();
        let rep = risk_report(&[a, b], &[0.75, 0.25], 0.99, 10).unwrap();
        assert!((rep.component_var.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((rep.hhi - 0.625).abs() < 1e-15);
        assert!((rep.effective_n - 1.6).abs() < 1e-12);
    }

    #[test]
    fn bad_inputs_say_what_to_give() {
        let r = vec![0.01; 10];
        let e = risk_report(std::slice::from_ref(&r), &[1.0], 95.0, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("0.99 for 99 %"), "{e}");
        let e = risk_report(&[r], &[1.0, 2.0], 0.95, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("one weight per series"), "{e}");
    }
}
