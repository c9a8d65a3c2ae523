//! Diagnostics of a series (docs §16.4): the Hurst exponent by the
//! variance of lagged differences, the Ljung–Box test of autocorrelation
//! (statsmodels' `acorr_ljungbox`) and the Jarque–Bera test of normality
//! (statsmodels' `jarque_bera`), with the χ² survival function they need.
//!
//! - Hurst: H is the slope of ln std(y_{t+τ} − y_t) (population std) on ln τ
//!   for τ = 2…100, by least squares: about 0.5 for a random walk, below for
//!   a mean-reverting series, above for a trending one.
//! - Ljung–Box: Q(m) = n(n+2) Σ_{k≤m} ρ_k² / (n−k), ρ_k the sample
//!   autocorrelation (autocovariances over n), against χ²(m).
//! - Jarque–Bera: JB = n/6 (S² + (K−3)²/4) with the population skewness S
//!   and kurtosis K, against χ²(2).
//! - χ² survival: the regularised upper incomplete gamma Q(k/2, x/2), by its
//!   power series below a + 1 and its continued fraction (modified Lentz)
//!   above.

use super::{TsError, check_series, is_constant};
use crate::research::stats::{excess_kurtosis, mean, skewness};

/// The τ range of [`hurst`].
pub const HURST_MIN_LAG: usize = 2;
pub const HURST_MAX_LAG: usize = 100;

/// The Hurst exponent of `y` (a level series such as log prices).
pub fn hurst(y: &[f64]) -> Result<f64, TsError> {
    const TEST: &str = "hurst";
    // Each lag up to 100 keeps at least 100 differences.
    check_series(y, 2 * HURST_MAX_LAG, TEST)?;
    if is_constant(y) {
        return Err(TsError::Constant { test: TEST });
    }
    let mut lx = Vec::with_capacity(HURST_MAX_LAG);
    let mut ly = Vec::with_capacity(HURST_MAX_LAG);
    let mut diffs = Vec::with_capacity(y.len());
    for tau in HURST_MIN_LAG..=HURST_MAX_LAG {
        diffs.clear();
        diffs.extend(y[tau..].iter().zip(y).map(|(a, b)| a - b));
        let m = mean(&diffs);
        let var = diffs.iter().map(|d| (d - m) * (d - m)).sum::<f64>() / diffs.len() as f64;
        if var.is_nan() || var <= 0.0 {
            return Err(TsError::Input(format!(
                "hurst: the {tau}-bar differences do not vary; the series needs variation at every lag"
            )));
        }
        lx.push((tau as f64).ln());
        ly.push(var.sqrt().ln());
    }
    let (mx, my) = (mean(&lx), mean(&ly));
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (a, b) in lx.iter().zip(&ly) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
    }
    Ok(sxy / sxx)
}

/// The Ljung–Box statistics and p-values at lags 1..=m.
#[derive(Clone, Debug, PartialEq)]
pub struct LjungBox {
    pub statistics: Vec<f64>,
    pub p_values: Vec<f64>,
    pub autocorrelations: Vec<f64>,
    pub n_obs: usize,
}

/// The Ljung–Box test of `x` up to `lags`.
pub fn ljung_box(x: &[f64], lags: usize) -> Result<LjungBox, TsError> {
    const TEST: &str = "ljung_box";
    if lags == 0 {
        return Err(TsError::Input("ljung_box: lags must be at least 1".into()));
    }
    check_series(x, lags + 2, TEST)?;
    if is_constant(x) {
        return Err(TsError::Constant { test: TEST });
    }
    let n = x.len();
    let m = mean(x);
    let xo: Vec<f64> = x.iter().map(|v| v - m).collect();
    let c0 = super::ols::dot(&xo, &xo);
    let nf = n as f64;
    let (mut q, mut statistics, mut p_values, mut acf) = (0.0, vec![], vec![], vec![]);
    for k in 1..=lags {
        let rho = super::ols::dot(&xo[k..], &xo[..n - k]) / c0;
        q += rho * rho / (nf - k as f64);
        let stat = nf * (nf + 2.0) * q;
        statistics.push(stat);
        p_values.push(chi2_sf(stat, k as f64));
        acf.push(rho);
    }
    Ok(LjungBox {
        statistics,
        p_values,
        autocorrelations: acf,
        n_obs: n,
    })
}

/// A Jarque–Bera test's result (kurtosis not in excess: 3 for a normal).
#[derive(Clone, Debug, PartialEq)]
pub struct JarqueBera {
    pub statistic: f64,
    pub p_value: f64,
    pub skewness: f64,
    pub kurtosis: f64,
    pub n_obs: usize,
}

/// The Jarque–Bera test of `x`.
pub fn jarque_bera(x: &[f64]) -> Result<JarqueBera, TsError> {
    const TEST: &str = "jarque_bera";
    check_series(x, 3, TEST)?;
    if is_constant(x) {
        return Err(TsError::Constant { test: TEST });
    }
    let s = skewness(x);
    let k = excess_kurtosis(x);
    let n = x.len() as f64;
    let jb = n / 6.0 * (s * s + 0.25 * k * k);
    Ok(JarqueBera {
        statistic: jb,
        p_value: chi2_sf(jb, 2.0),
        skewness: s,
        kurtosis: 3.0 + k,
        n_obs: x.len(),
    })
}

/// P(χ²(df) > x).
pub fn chi2_sf(x: f64, df: f64) -> f64 {
    if x.is_nan() || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if x <= 0.0 {
        return 1.0;
    }
    gamma_q(df / 2.0, x / 2.0)
}

/// The regularised upper incomplete gamma Q(a, x) for a > 0, x > 0.
fn gamma_q(a: f64, x: f64) -> f64 {
    // ln of x^a e^{−x} / Γ(a), the factor both forms share.
    let front = a * x.ln() - x - libm::lgamma(a);
    if x < a + 1.0 {
        // P(a, x) = front / a · Σ x^n / ((a+1)…(a+n)).
        let (mut term, mut sum) = (1.0 / a, 1.0 / a);
        let mut ap = a;
        for _ in 0..10_000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-17 {
                break;
            }
        }
        1.0 - sum * front.exp()
    } else {
        // Q(a, x) = front · 1/(x+1−a− 1(1−a)/(x+3−a− 2(2−a)/(x+5−a− …))).
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..10_000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        front.exp() * h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chi2_survival_matches_closed_forms() {
        // df = 2: e^{−x/2}.
        for x in [0.1, 1.0, 5.0, 40.0, 300.0] {
            let v = chi2_sf(x, 2.0);
            assert!(((v - (-x / 2.0f64).exp()) / v).abs() < 1e-13, "{x}: {v}");
        }
        // df = 1: erfc(√(x/2)).
        for x in [0.01, 0.5, 3.84, 20.0] {
            let e = libm::erfc((x / 2.0f64).sqrt());
            assert!(((chi2_sf(x, 1.0) - e) / e).abs() < 1e-13, "{x}");
        }
        // χ²(10) at its 95 % quantile 18.307038053275146.
        assert!((chi2_sf(18.307_038_053_275_146, 10.0) - 0.05).abs() < 1e-12);
        assert_eq!(chi2_sf(0.0, 3.0), 1.0);
    }

    #[test]
    fn hurst_needs_two_hundred_points() {
        let e = hurst(&[1.0, 2.0, 3.0]).unwrap_err().to_string();
        assert!(e.contains("at least 200"), "{e}");
    }
}
