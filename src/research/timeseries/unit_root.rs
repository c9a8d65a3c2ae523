//! Unit-root and stationarity tests (docs §16.2): the augmented
//! Dickey–Fuller test as statsmodels' `adfuller` runs it, and the KPSS test
//! as its `kpss` does.
//!
//! ADF regresses Δy_t on y_{t−1}, p lagged differences Δy_{t−1..t−p} and
//! the deterministic terms; the statistic is the t ratio of y_{t−1}. With
//! an autolag, every p from 0 to the maximum is scored on the same sample
//! (the last n−1−max rows) by AIC or BIC (statsmodels' OLS log-likelihood;
//! ties go to the shorter lag), and the chosen p is re-estimated on all
//! the rows it allows. The maximum defaults to ⌈12·(n/100)^{1/4}⌉, capped at
//! n/2 − terms − 1 (Schwert 1989). KPSS (Kwiatkowski et al. 1992) sums the
//! squared partial sums of the residuals from the constant (or constant and
//! trend) over n², divided by the Newey–West long-run variance with Bartlett
//! weights; its lag is chosen by Hobijn, Franses and Ooms (1998) by default,
//! and its p-value interpolated in the paper's table (clamped to 0.01–0.10).

use super::mackinnon;
use super::ols::{cholesky, forward, gram, least_squares, partial_out, trend_coefficient};
use super::{Autolag, Trend, TsError, check_series, is_constant};

/// Fewest observations a test takes.
pub(crate) const MIN_OBS: usize = 10;

/// An ADF test's result.
#[derive(Clone, Debug, PartialEq)]
pub struct AdfResult {
    pub statistic: f64,
    pub p_value: f64,
    /// 1 %, 5 %, 10 %.
    pub critical_values: [f64; 3],
    pub used_lag: usize,
    /// Rows of the final regression.
    pub n_obs: usize,
    pub max_lag: usize,
    /// The best information criterion (autolag only).
    pub ic_best: Option<f64>,
    pub trend: Trend,
    pub autolag: Autolag,
}

/// statsmodels' default maximum lag for `n` observations, or `None` when
/// the sample is too short for the deterministic terms.
pub(crate) fn default_max_lag(n: usize, trend: Trend) -> Option<usize> {
    let schwert = (12.0 * (n as f64 / 100.0).powf(0.25)).ceil() as usize;
    (n / 2)
        .checked_sub(trend.terms() + 1)
        .map(|cap| cap.min(schwert))
}

/// The regression's columns for `lags` lagged differences on the last
/// `nobs` rows: (Δy, level, lag 1, …, lag p), the deterministic terms
/// partialled out.
fn columns(
    x: &[f64],
    d: &[f64],
    lags: usize,
    nobs: usize,
    trend: Trend,
) -> (Vec<f64>, Vec<Vec<f64>>) {
    let start = d.len() - nobs;
    let mut y = d[start..].to_vec();
    partial_out(&mut y, trend);
    let mut cols = Vec::with_capacity(lags + 1);
    let mut level = x[start..start + nobs].to_vec();
    partial_out(&mut level, trend);
    cols.push(level);
    for j in 1..=lags {
        let mut c = d[start - j..start - j + nobs].to_vec();
        partial_out(&mut c, trend);
        cols.push(c);
    }
    (y, cols)
}

/// The augmented Dickey–Fuller test of `x` (docs §16.2.1).
pub fn adf(
    x: &[f64],
    trend: Trend,
    autolag: Autolag,
    max_lag: Option<usize>,
) -> Result<AdfResult, TsError> {
    const TEST: &str = "adf";
    check_series(x, MIN_OBS, TEST)?;
    if is_constant(x) {
        return Err(TsError::Constant { test: TEST });
    }
    let n = x.len();
    let cap = (n / 2)
        .checked_sub(trend.terms() + 1)
        .ok_or(TsError::TooFew {
            test: TEST,
            need: 2 * (trend.terms() + 1),
            got: n,
        })?;
    let max = match max_lag {
        None => default_max_lag(n, trend).unwrap_or(0),
        Some(m) if m > cap => {
            return Err(TsError::Input(format!(
                "adf: max_lags {m} is too many for {n} observations with regression '{}': at most {cap} (n/2 − terms − 1)",
                trend.as_str()
            )));
        }
        Some(m) => m,
    };
    let d: Vec<f64> = x.windows(2).map(|w| w[1] - w[0]).collect();
    let (used, ic_best) = match autolag {
        Autolag::None => (max, None),
        _ => {
            let (lag, ic) = select_lag(x, &d, max, trend, autolag)?;
            (lag, Some(ic))
        }
    };
    let (statistic, nobs) = adf_statistic(x, &d, used, trend)?;
    let critical_values =
        mackinnon::critical_values(trend, 1, nobs).ok_or(TsError::Input(format!(
            "adf: no critical values for regression '{}'",
            trend.as_str()
        )))?;
    Ok(AdfResult {
        statistic,
        p_value: mackinnon::p_value(statistic, trend, 1),
        critical_values,
        used_lag: used,
        n_obs: nobs,
        max_lag: max,
        ic_best,
        trend,
        autolag,
    })
}

/// The lag with the smallest AIC or BIC, all lags scored on the same
/// n−1−max rows from one Cholesky factor, and that criterion.
fn select_lag(
    x: &[f64],
    d: &[f64],
    max: usize,
    trend: Trend,
    how: Autolag,
) -> Result<(usize, f64), TsError> {
    let nobs = d.len() - max;
    let (y, cols) = columns(x, d, max, nobs, trend);
    let k = cols.len();
    let g = gram(&cols);
    let l = cholesky(&g, k).ok_or(TsError::Singular { test: "adf" })?;
    let xy: Vec<f64> = cols.iter().map(|c| super::ols::dot(c, &y)).collect();
    let z = forward(&l, k, &xy);
    let yy = super::ols::dot(&y, &y);
    let nf = nobs as f64;
    let half = nf / 2.0;
    let mut ssr = yy;
    let mut best = (f64::INFINITY, 0usize);
    for (lag, zi) in z.iter().enumerate() {
        ssr -= zi * zi;
        let s = ssr.max(f64::MIN_POSITIVE);
        // statsmodels' OLS log-likelihood, then AIC / BIC on all k params.
        let llf = -s.ln() * half - (1.0 + (std::f64::consts::PI / half).ln()) * half;
        let params = (lag + 1 + trend.terms()) as f64;
        let ic = match how {
            Autolag::Bic => -2.0 * llf + nf.ln() * params,
            _ => -2.0 * llf + 2.0 * params,
        };
        if ic < best.0 {
            best = (ic, lag);
        }
    }
    Ok((best.1, best.0))
}

/// The t ratio of the lagged level with `lags` lagged differences on
/// every row they allow, and the number of rows.
fn adf_statistic(x: &[f64], d: &[f64], lags: usize, trend: Trend) -> Result<(f64, usize), TsError> {
    let nobs = d.len() - lags;
    let (y, mut cols) = columns(x, d, lags, nobs, trend);
    // The level last: its t ratio is then z_k / s.
    cols.rotate_left(1);
    let k = cols.len();
    let df = nobs as isize - k as isize - trend.terms() as isize;
    if df < 1 {
        return Err(TsError::TooFew {
            test: "adf",
            need: k + trend.terms() + lags + 2,
            got: x.len(),
        });
    }
    let fit = least_squares(&y, &cols).ok_or(TsError::Singular { test: "adf" })?;
    let s = (fit.ssr / df as f64).sqrt();
    Ok((fit.z[k - 1] / s, nobs))
}

/// How KPSS picks its lag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KpssLags {
    /// Hobijn, Franses and Ooms (1998), statsmodels' `nlags="auto"`.
    Auto,
    Fixed(usize),
}

/// A KPSS test's result.
#[derive(Clone, Debug, PartialEq)]
pub struct KpssResult {
    pub statistic: f64,
    /// Interpolated in the table, so within 0.01..=0.10.
    pub p_value: f64,
    /// 10 %, 5 %, 2.5 %, 1 % (Kwiatkowski et al. 1992, table 1).
    pub critical_values: [f64; 4],
    pub lags: usize,
    pub n_obs: usize,
    pub trend: Trend,
}

/// The KPSS test of `x` around a level (`Constant`) or a trend
/// (`ConstantTrend`) (docs §16.2.2).
pub fn kpss(x: &[f64], trend: Trend, lags: KpssLags) -> Result<KpssResult, TsError> {
    const TEST: &str = "kpss";
    check_series(x, MIN_OBS, TEST)?;
    if is_constant(x) {
        return Err(TsError::Constant { test: TEST });
    }
    let n = x.len();
    let mut e = x.to_vec();
    let crit = match trend {
        Trend::Constant => {
            let m = e.iter().sum::<f64>() / n as f64;
            e.iter_mut().for_each(|v| *v -= m);
            [0.347, 0.463, 0.574, 0.739]
        }
        Trend::ConstantTrend => {
            partial_out(&mut e, Trend::Constant);
            let g = trend_coefficient(&e);
            let c = (n as f64 - 1.0) / 2.0;
            e.iter_mut()
                .enumerate()
                .for_each(|(i, v)| *v -= g * (i as f64 - c));
            [0.119, 0.146, 0.176, 0.216]
        }
        Trend::None => {
            return Err(TsError::Input(
                "kpss: regression must be 'c' (level stationarity) or 'ct' (trend stationarity)"
                    .into(),
            ));
        }
    };
    let lags = match lags {
        KpssLags::Auto => hobijn_lags(&e).min(n - 1),
        KpssLags::Fixed(l) if l >= n => {
            return Err(TsError::Input(format!(
                "kpss: max_lags {l} must be below the number of observations ({n})"
            )));
        }
        KpssLags::Fixed(l) => l,
    };
    let mut cum = 0.0;
    let mut eta = 0.0;
    for v in &e {
        cum += v;
        eta += cum * cum;
    }
    let nf = n as f64;
    let eta = eta / (nf * nf);
    let mut s_hat = super::ols::dot(&e, &e);
    for i in 1..=lags {
        let p = super::ols::dot(&e[i..], &e[..n - i]);
        s_hat += 2.0 * p * (1.0 - (i as f64 / (lags as f64 + 1.0)));
    }
    let statistic = eta / (s_hat / nf);
    Ok(KpssResult {
        statistic,
        p_value: interp(statistic, &crit, &[0.10, 0.05, 0.025, 0.01]),
        critical_values: crit,
        lags,
        n_obs: n,
        trend,
    })
}

/// Hobijn, Franses and Ooms' (1998) lag: ⌊1.1447·(ŝ²)^{1/3}·n^{1/3}⌋ with
/// ŝ = s1/s0 from the first ⌊n^{2/9}⌋ autocovariances.
fn hobijn_lags(e: &[f64]) -> usize {
    let n = e.len();
    let nf = n as f64;
    let covlags = nf.powf(2.0 / 9.0) as usize;
    let mut s0 = super::ols::dot(e, e) / nf;
    let mut s1 = 0.0;
    for i in 1..=covlags.min(n - 1) {
        let p = super::ols::dot(&e[i..], &e[..n - i]) / (nf / 2.0);
        s0 += p;
        s1 += i as f64 * p;
    }
    let s_hat = s1 / s0;
    let pwr = 1.0 / 3.0;
    let gamma = 1.1447 * (s_hat * s_hat).powf(pwr);
    let lags = gamma * nf.powf(pwr);
    if lags.is_finite() && lags > 0.0 {
        lags as usize
    } else {
        0
    }
}

/// numpy's `interp` on increasing `xp`: clamped at both ends.
fn interp(x: f64, xp: &[f64], fp: &[f64]) -> f64 {
    if x <= xp[0] {
        return fp[0];
    }
    let last = xp.len() - 1;
    if x >= xp[last] {
        return fp[last];
    }
    let j = xp.iter().rposition(|v| *v <= x).unwrap_or(0);
    let slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
    slope * (x - xp[j]) + fp[j]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(n: usize) -> Vec<f64> {
        let mut v = 0.0;
        (0..n)
            .map(|i| {
                v += (((i * 7919) % 101) as f64 - 50.0) / 50.0;
                v
            })
            .collect()
    }

    #[test]
    fn too_many_lags_and_constant_series_say_what_to_do() {
        let x = walk(40);
        let e = adf(&x, Trend::Constant, Autolag::Aic, Some(30))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 18"), "{e}");
        let e = adf(&[1.0; 20], Trend::Constant, Autolag::Aic, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("constant"), "{e}");
        let e = kpss(&x, Trend::None, KpssLags::Auto)
            .unwrap_err()
            .to_string();
        assert!(e.contains("'c'"), "{e}");
    }

    #[test]
    fn the_default_maximum_lag_is_schwerts() {
        assert_eq!(default_max_lag(2520, Trend::Constant), Some(27));
        assert_eq!(default_max_lag(100, Trend::Constant), Some(12));
        assert_eq!(default_max_lag(20, Trend::ConstantTrend), Some(7));
        assert_eq!(default_max_lag(3, Trend::ConstantTrend), None);
    }

    #[test]
    fn interpolation_clamps_at_the_table_ends() {
        let crit = [0.347, 0.463, 0.574, 0.739];
        let p = [0.10, 0.05, 0.025, 0.01];
        assert_eq!(interp(0.1, &crit, &p), 0.10);
        assert_eq!(interp(2.0, &crit, &p), 0.01);
        assert!((interp(0.405, &crit, &p) - 0.075).abs() < 1e-12);
    }
}
