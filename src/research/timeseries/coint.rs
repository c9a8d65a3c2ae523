//! Engle–Granger cointegration and the Ornstein–Uhlenbeck half-life
//! (docs §16.3).
//!
//! The two-step test is statsmodels' `coint`: regress the first series on
//! the second (with the deterministic terms), then run an ADF test without
//! deterministic terms on the residuals; the p-value and critical values
//! are MacKinnon's for N = 2 (critical values at n − 1 observations, as
//! statsmodels and Stata's `egranger` use). The first stage's slope is the
//! hedge ratio: the spread y0 − intercept − hedge_ratio·y1 is what a pairs
//! trade holds. The half-life is −ln 2 / b from the OLS Δs_t = a + b·s_{t−1}
//! (the usual first-order form of −ln 2 / ln(1 + b)); none when b ≥ 0, which
//! is no mean reversion.

use super::ols::{partial_out, trend_coefficient};
use super::unit_root::{MIN_OBS, adf};
use super::{Autolag, Trend, TsError, check_series, is_constant, mackinnon};

/// The OU half-life of a series, in its own bars.
#[derive(Clone, Debug, PartialEq)]
pub struct HalfLife {
    /// −ln 2 / b; `None` when b ≥ 0 (no mean reversion).
    pub half_life: Option<f64>,
    pub a: f64,
    pub b: f64,
    pub n_obs: usize,
}

/// The half-life of `y` from the OLS Δy_t = a + b·y_{t−1}.
pub fn half_life(y: &[f64]) -> Result<HalfLife, TsError> {
    const TEST: &str = "half_life";
    check_series(y, 3, TEST)?;
    if is_constant(y) {
        return Err(TsError::Constant { test: TEST });
    }
    let n = y.len() - 1;
    let lag = &y[..n];
    let dy: Vec<f64> = y.windows(2).map(|w| w[1] - w[0]).collect();
    let nf = n as f64;
    let mx = lag.iter().sum::<f64>() / nf;
    let my = dy.iter().sum::<f64>() / nf;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (x, d) in lag.iter().zip(&dy) {
        sxy += (x - mx) * (d - my);
        sxx += (x - mx) * (x - mx);
    }
    if sxx <= 0.0 {
        return Err(TsError::Constant { test: TEST });
    }
    let b = sxy / sxx;
    Ok(HalfLife {
        half_life: (b < 0.0).then(|| -std::f64::consts::LN_2 / b),
        a: my - b * mx,
        b,
        n_obs: n,
    })
}

/// An Engle–Granger test's result.
#[derive(Clone, Debug, PartialEq)]
pub struct CointResult {
    /// The ADF t ratio of the residuals.
    pub statistic: f64,
    pub p_value: f64,
    /// 1 %, 5 %, 10 %; `None` without deterministic terms (MacKinnon gives
    /// none).
    pub critical_values: Option<[f64; 3]>,
    pub hedge_ratio: f64,
    pub intercept: f64,
    /// The trend's slope per bar (`ct` only).
    pub trend_slope: Option<f64>,
    pub r_squared: f64,
    pub used_lag: usize,
    /// Rows of the residuals' ADF regression.
    pub n_obs: usize,
    pub half_life: HalfLife,
    pub trend: Trend,
    /// y0 − intercept − hedge_ratio·y1 (− slope·t): the spread.
    pub residuals: Vec<f64>,
}

/// Tests `y0` regressed on `y1` for cointegration (docs §16.3).
pub fn engle_granger(
    y0: &[f64],
    y1: &[f64],
    trend: Trend,
    autolag: Autolag,
    max_lag: Option<usize>,
) -> Result<CointResult, TsError> {
    const TEST: &str = "engle_granger";
    if y0.len() != y1.len() {
        return Err(TsError::Input(format!(
            "engle_granger: the two series differ in length ({} and {}): give them on the same dates",
            y0.len(),
            y1.len()
        )));
    }
    check_series(y0, MIN_OBS, TEST)?;
    check_series(y1, MIN_OBS, TEST)?;
    if is_constant(y0) || is_constant(y1) {
        return Err(TsError::Constant { test: TEST });
    }
    let stage = first_stage(y0, y1, trend)?;
    // statsmodels refuses near-perfect fits: 1 − 100·√ε.
    if stage.r_squared >= 1.0 - 100.0 * f64::EPSILON.sqrt() {
        return Err(TsError::Input(
            "engle_granger: the two series are (almost) perfectly collinear, so the test is not reliable; check that they are different instruments".into(),
        ));
    }
    let a = adf(&stage.resid, Trend::None, autolag, max_lag)?;
    let critical_values = mackinnon::critical_values(trend, 2, y0.len() - 1);
    Ok(CointResult {
        statistic: a.statistic,
        p_value: mackinnon::p_value(a.statistic, trend, 2),
        critical_values,
        hedge_ratio: stage.slope,
        intercept: stage.intercept,
        trend_slope: stage.trend_slope,
        r_squared: stage.r_squared,
        used_lag: a.used_lag,
        n_obs: a.n_obs,
        half_life: half_life(&stage.resid)?,
        trend,
        residuals: stage.resid,
    })
}

struct Stage {
    slope: f64,
    intercept: f64,
    trend_slope: Option<f64>,
    r_squared: f64,
    resid: Vec<f64>,
}

/// OLS of y0 on y1 and the deterministic terms, by partialling them out.
fn first_stage(y0: &[f64], y1: &[f64], trend: Trend) -> Result<Stage, TsError> {
    let (mut a, mut b) = (y0.to_vec(), y1.to_vec());
    partial_out(&mut a, trend);
    partial_out(&mut b, trend);
    let sbb = super::ols::dot(&b, &b);
    if sbb.is_nan() || sbb <= 0.0 {
        return Err(TsError::Singular {
            test: "engle_granger",
        });
    }
    let slope = super::ols::dot(&b, &a) / sbb;
    let resid: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x - slope * y).collect();
    let n = y0.len() as f64;
    let spread: Vec<f64> = y0.iter().zip(y1).map(|(x, y)| x - slope * y).collect();
    let mean = spread.iter().sum::<f64>() / n;
    let (intercept, trend_slope) = match trend {
        Trend::None => (0.0, None),
        Trend::Constant => (mean, None),
        Trend::ConstantTrend => {
            let mut c = spread.clone();
            partial_out(&mut c, Trend::Constant);
            let g = trend_coefficient(&c);
            // The trend regressor is 1..n, whose mean is (n+1)/2.
            (mean - g * (n + 1.0) / 2.0, Some(g))
        }
    };
    let ssr = super::ols::dot(&resid, &resid);
    let tss = if trend == Trend::None {
        super::ols::dot(y0, y0)
    } else {
        let m = y0.iter().sum::<f64>() / n;
        y0.iter().map(|v| (v - m) * (v - m)).sum()
    };
    Ok(Stage {
        slope,
        intercept,
        trend_slope,
        r_squared: 1.0 - ssr / tss,
        resid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_life_of_an_ar1_without_noise() {
        // y_t = 0.5·y_{t−1}: Δy = −0.5·y_{t−1}, half-life ln 2 / 0.5.
        let y: Vec<f64> = (0..30).map(|i| 0.5f64.powi(i)).collect();
        let h = half_life(&y).unwrap();
        assert!((h.b + 0.5).abs() < 1e-12, "{h:?}");
        assert!((h.half_life.unwrap() - 2.0 * std::f64::consts::LN_2).abs() < 1e-10);
        // A trending series does not revert.
        let up: Vec<f64> = (0..30).map(|i| (i * i) as f64).collect();
        assert_eq!(half_life(&up).unwrap().half_life, None);
    }

    #[test]
    fn mismatched_lengths_are_refused() {
        let e = engle_granger(&[1.0; 20], &[2.0; 19], Trend::Constant, Autolag::Aic, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("same dates"), "{e}");
    }
}
