//! Ordinary least squares with an intercept and Newey–West (HAC) standard
//! errors (docs §17.2), as statsmodels'
//! `OLS(y, add_constant(X)).fit(cov_type="HAC", cov_kwds={"maxlags": L})`:
//!
//! - β from a Householder QR of X (no normal equations, so a near-collinear
//!   design keeps its digits); (XᵀX)⁻¹ = R⁻¹R⁻ᵀ;
//! - the HAC meat S = Σ_t g_t g_tᵀ + Σ_{l=1..L} (1 − l/(L+1)) Σ_t (g_t
//!   g_{t−l}ᵀ + g_{t−l} g_tᵀ), g_t = x_t·u_t (Bartlett weights, Newey & West
//!   1987), and cov = (XᵀX)⁻¹ S (XᵀX)⁻¹ without a small-sample factor
//!   (statsmodels' `use_correction=False`, its default through `fit`);
//! - z statistics and two-sided normal p-values (statsmodels' `use_t=False`
//!   for robust covariances);
//! - r² = 1 − SSR/TSS (centred), adjusted r² = 1 − (n − 1)/(n − k)·(1 − r²),
//!   residual standard deviation √(SSR/(n − k)).
//!
//! L = 0 is White's heteroscedasticity-robust HC0.

use chrono::{Datelike, NaiveDate};

use crate::research::stats::norm_cdf;

/// Why a regression cannot run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RegressionError {
    #[error("{0}")]
    Input(String),
    #[error(
        "too few observations: {n} for {k} coefficients (intercept included); at least {need} are needed: widen start..end or drop regressors"
    )]
    TooFew { n: usize, k: usize, need: usize },
    #[error(
        "singular regressors: '{name}' is constant or a linear combination of the intercept and the regressors before it; drop it"
    )]
    Singular { name: String },
    #[error(transparent)]
    Interrupted(#[from] crate::research::Interrupted),
}

/// One coefficient.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Coefficient {
    pub name: String,
    pub estimate: f64,
    pub std_error: f64,
    pub t: f64,
    pub p_value: f64,
}

/// A fitted regression.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ols {
    /// `const` first, then the regressors in the order given.
    pub coefficients: Vec<Coefficient>,
    pub r2: f64,
    pub adj_r2: f64,
    pub n: usize,
    pub residual_std: f64,
    pub hac_lags: usize,
    pub residuals: Vec<f64>,
}

/// The Newey–West (1994) rule of thumb ⌊4·(n/100)^(2/9)⌋, the lag count
/// statsmodels' `cov_hac` uses when none is given.
pub(crate) fn default_hac_lags(n: usize) -> usize {
    (4.0 * (n as f64 / 100.0).powf(2.0 / 9.0)).floor() as usize
}

/// A Householder QR of a column-major n×k matrix: R (k×k, upper) and the
/// reflectors, enough to apply Qᵀ to a vector.
struct Qr {
    n: usize,
    k: usize,
    /// Column-major; below the diagonal the reflectors' vectors.
    a: Vec<f64>,
    /// Each reflector's β (H = I − β v vᵀ, v₀ = 1).
    beta: Vec<f64>,
    /// R's diagonal.
    diag: Vec<f64>,
}

impl Qr {
    fn new(mut a: Vec<f64>, n: usize, k: usize) -> Qr {
        let mut beta = vec![0.0; k];
        let mut diag = vec![0.0; k];
        for j in 0..k {
            let col = j * n;
            let norm = a[col + j..col + n]
                .iter()
                .map(|v| v * v)
                .sum::<f64>()
                .sqrt();
            if norm == 0.0 {
                continue;
            }
            let alpha = if a[col + j] > 0.0 { -norm } else { norm };
            let v0 = a[col + j] - alpha;
            // v = (x − αe₁)/v0, so v₀ = 1; β = −v0/α.
            for i in j + 1..n {
                a[col + i] /= v0;
            }
            beta[j] = -v0 / alpha;
            diag[j] = alpha;
            a[col + j] = alpha;
            for c in j + 1..k {
                let cc = c * n;
                let mut dot = a[cc + j];
                for i in j + 1..n {
                    dot += a[col + i] * a[cc + i];
                }
                let f = beta[j] * dot;
                a[cc + j] -= f;
                for i in j + 1..n {
                    a[cc + i] -= f * a[col + i];
                }
            }
        }
        Qr {
            n,
            k,
            a,
            beta,
            diag,
        }
    }

    /// Qᵀy.
    fn qt(&self, y: &mut [f64]) {
        let n = self.n;
        for j in 0..self.k {
            if self.beta[j] == 0.0 {
                continue;
            }
            let v = &self.a[j * n + j + 1..(j + 1) * n];
            let dot = y[j] + v.iter().zip(&y[j + 1..n]).map(|(a, b)| a * b).sum::<f64>();
            let f = self.beta[j] * dot;
            y[j] -= f;
            for (yi, vi) in y[j + 1..n].iter_mut().zip(v) {
                *yi -= f * vi;
            }
        }
    }

    fn r(&self, i: usize, j: usize) -> f64 {
        if i == j {
            self.diag[j]
        } else {
            self.a[j * self.n + i]
        }
    }

    /// Solves R b = c (back substitution).
    fn solve_r(&self, c: &[f64]) -> Vec<f64> {
        let k = self.k;
        let mut b = vec![0.0; k];
        for i in (0..k).rev() {
            let s: f64 = (i + 1..k).map(|j| self.r(i, j) * b[j]).sum();
            b[i] = (c[i] - s) / self.diag[i];
        }
        b
    }

    /// R⁻¹ (upper triangular), row-major k×k.
    fn r_inverse(&self) -> Vec<f64> {
        let k = self.k;
        let mut inv = vec![0.0; k * k];
        for col in 0..k {
            let mut e = vec![0.0; k];
            e[col] = 1.0;
            let x = self.solve_r(&e);
            for i in 0..k {
                inv[i * k + col] = x[i];
            }
        }
        inv
    }
}

/// Fits y on an intercept and `x` (named columns, each as long as y) with
/// Newey–West standard errors over `hac_lags` lags.
pub fn ols_hac(y: &[f64], x: &[(&str, &[f64])], hac_lags: usize) -> Result<Ols, RegressionError> {
    let (n, k) = (y.len(), x.len() + 1);
    check_inputs(y, x)?;
    if n < k + 2 {
        return Err(RegressionError::TooFew { n, k, need: k + 2 });
    }
    let mut a = Vec::with_capacity(n * k);
    a.extend(std::iter::repeat_n(1.0, n));
    for (_, c) in x {
        a.extend_from_slice(c);
    }
    let qr = Qr::new(a.clone(), n, k);
    let scale = (0..k).map(|j| qr.diag[j].abs()).fold(0.0, f64::max);
    for j in 0..k {
        if qr.diag[j].abs() <= 1e-10 * scale.max(f64::MIN_POSITIVE) {
            let name = if j == 0 { "const" } else { x[j - 1].0 };
            return Err(RegressionError::Singular {
                name: name.to_string(),
            });
        }
    }
    let mut qty = y.to_vec();
    qr.qt(&mut qty);
    let beta = qr.solve_r(&qty[..k]);
    let resid: Vec<f64> = (0..n)
        .map(|i| y[i] - (0..k).map(|j| a[j * n + i] * beta[j]).sum::<f64>())
        .collect();
    let rinv = qr.r_inverse();
    // (XᵀX)⁻¹ = R⁻¹ R⁻ᵀ.
    let mut bread = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..k {
            bread[i * k + j] = (0..k).map(|m| rinv[i * k + m] * rinv[j * k + m]).sum();
        }
    }
    let meat = hac_meat(&a, &resid, n, k, hac_lags)?;
    let cov = sandwich(&bread, &meat, k);
    Ok(finish(y, x, &beta, &cov, resid, hac_lags))
}

fn check_inputs(y: &[f64], x: &[(&str, &[f64])]) -> Result<(), RegressionError> {
    for (name, c) in x {
        if c.len() != y.len() {
            return Err(RegressionError::Input(format!(
                "'{name}' has {} values and y has {}; they must be aligned one for one",
                c.len(),
                y.len()
            )));
        }
        if c.iter().any(|v| !v.is_finite()) {
            return Err(RegressionError::Input(format!(
                "'{name}' has a missing or non-finite value"
            )));
        }
    }
    if y.iter().any(|v| !v.is_finite()) {
        return Err(RegressionError::Input(
            "y has a missing or non-finite value".into(),
        ));
    }
    Ok(())
}

/// S = Σ_l w_l Σ_t (g_t g_{t−l}ᵀ + its transpose), row-major k×k.
/// O(n·lags·k²): the thread's interrupt is read at every lag (docs §2.4).
fn hac_meat(
    a: &[f64],
    u: &[f64],
    n: usize,
    k: usize,
    lags: usize,
) -> Result<Vec<f64>, crate::research::Interrupted> {
    // g[t·k + j] = x_tj · u_t
    let mut g = vec![0.0; n * k];
    for t in 0..n {
        for j in 0..k {
            g[t * k + j] = a[j * n + t] * u[t];
        }
    }
    let mut s = vec![0.0; k * k];
    for l in 0..=lags.min(n.saturating_sub(1)) {
        crate::research::checkpoint()?;
        let w = 1.0 - l as f64 / (lags as f64 + 1.0);
        let mut c = vec![0.0; k * k];
        for t in l..n {
            let (gt, gl) = (&g[t * k..(t + 1) * k], &g[(t - l) * k..(t - l + 1) * k]);
            for i in 0..k {
                for j in 0..k {
                    c[i * k + j] += gt[i] * gl[j];
                }
            }
        }
        for i in 0..k {
            for j in 0..k {
                s[i * k + j] += if l == 0 {
                    c[i * k + j]
                } else {
                    w * (c[i * k + j] + c[j * k + i])
                };
            }
        }
    }
    Ok(s)
}

/// B S Bᵀ (B symmetric).
fn sandwich(b: &[f64], s: &[f64], k: usize) -> Vec<f64> {
    let mut bs = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..k {
            bs[i * k + j] = (0..k).map(|m| b[i * k + m] * s[m * k + j]).sum();
        }
    }
    let mut out = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..k {
            out[i * k + j] = (0..k).map(|m| bs[i * k + m] * b[j * k + m]).sum();
        }
    }
    out
}

fn finish(
    y: &[f64],
    x: &[(&str, &[f64])],
    beta: &[f64],
    cov: &[f64],
    resid: Vec<f64>,
    hac_lags: usize,
) -> Ols {
    let (n, k) = (y.len(), beta.len());
    let ssr: f64 = resid.iter().map(|u| u * u).sum();
    let my = crate::research::stats::mean(y);
    let tss: f64 = y.iter().map(|v| (v - my) * (v - my)).sum();
    let r2 = 1.0 - ssr / tss;
    let df = (n - k) as f64;
    let coefficients = (0..k)
        .map(|j| {
            let se = cov[j * k + j].sqrt();
            let t = beta[j] / se;
            Coefficient {
                name: if j == 0 { "const" } else { x[j - 1].0 }.to_string(),
                estimate: beta[j],
                std_error: se,
                t,
                p_value: 2.0 * norm_cdf(-t.abs()),
            }
        })
        .collect();
    Ols {
        coefficients,
        r2,
        adj_r2: 1.0 - (n as f64 - 1.0) / df * (1.0 - r2),
        n,
        residual_std: (ssr / df).sqrt(),
        hac_lags,
        residuals: resid,
    }
}

/// Slopes of y on an intercept and `x` over each trailing window of
/// `window` observations: `(last index of the window, slopes)`, every
/// `step` observations, ending at the last.
pub fn rolling_slopes(
    y: &[f64],
    x: &[(&str, &[f64])],
    window: usize,
    step: usize,
) -> Result<Vec<(usize, Vec<f64>)>, RegressionError> {
    let n = y.len();
    check_inputs(y, x)?;
    if window < x.len() + 3 || window > n {
        return Err(RegressionError::Input(format!(
            "rolling_window must be from {} to the {n} observations, got {window}",
            x.len() + 3
        )));
    }
    let step = step.max(1);
    let mut out = Vec::new();
    let mut end = n - 1;
    loop {
        crate::research::checkpoint()?;
        let from = end + 1 - window;
        let cols: Vec<(&str, &[f64])> = x.iter().map(|(nm, c)| (*nm, &c[from..=end])).collect();
        let fit = ols_hac(&y[from..=end], &cols, 0)?;
        out.push((
            end,
            fit.coefficients[1..].iter().map(|c| c.estimate).collect(),
        ));
        if end < window - 1 + step {
            break;
        }
        end -= step;
    }
    out.reverse();
    Ok(out)
}

/// Monthly simple returns from month-end closes (the last close in each
/// month over the last close in the month before), keyed by the month's
/// first day, for the months from `start`'s through `end`'s. A month
/// without the month before it in the data is skipped; so is a last month
/// whose final bar is more than five days before the month ends (the data
/// stops inside it: a partial month is not a month's return).
pub fn month_end_returns(
    dates: &[NaiveDate],
    close: &[f64],
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
) -> Vec<(NaiveDate, f64)> {
    let mut ends: Vec<(NaiveDate, NaiveDate, f64)> = Vec::new();
    for (d, c) in dates.iter().zip(close) {
        let Some(first) = d.with_day(1) else { continue };
        match ends.last_mut() {
            Some(last) if last.0 == first => {
                last.1 = *d;
                last.2 = *c;
            }
            _ => ends.push((first, *d, *c)),
        }
    }
    let from = start.and_then(|s| s.with_day(1));
    let to = end.and_then(|e| e.with_day(1));
    let mut out = Vec::new();
    for w in ends.windows(2) {
        let ((prev, _, c0), (month, last_bar, c1)) = (w[0], w[1]);
        if prev.checked_add_months(chrono::Months::new(1)) != Some(month)
            || from.is_some_and(|f| month < f)
            || to.is_some_and(|t| month > t)
        {
            continue;
        }
        out.push((month, last_bar, c1 / c0 - 1.0));
    }
    if let Some((month, last_bar, _)) = out.last().copied() {
        let month_end = month
            .checked_add_months(chrono::Months::new(1))
            .and_then(|m| m.pred_opt());
        if month_end.is_some_and(|e| (e - last_bar).num_days() > 5) {
            out.pop();
        }
    }
    out.into_iter().map(|(m, _, r)| (m, r)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HAC and rolling fits stop with `Interrupted` once their interrupt
    /// has fired (docs §2.4); without one they answer as before.
    #[test]
    fn an_interrupted_fit_answers_interrupted() {
        let x: Vec<f64> = (0..200).map(|i| ((i * 7) % 11) as f64).collect();
        let y: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, v)| 2.0 * v + (i % 3) as f64)
            .collect();
        let fired = crate::research::Interrupt::new();
        fired.interrupt();
        let e = fired.within(|| ols_hac(&y, &[("x", &x)], 150)).unwrap_err();
        assert_eq!(
            e,
            RegressionError::Interrupted(crate::research::Interrupted)
        );
        let e = fired
            .within(|| rolling_slopes(&y, &[("x", &x)], 20, 1))
            .unwrap_err();
        assert_eq!(
            e,
            RegressionError::Interrupted(crate::research::Interrupted)
        );
        assert!(ols_hac(&y, &[("x", &x)], 150).is_ok());
    }

    #[test]
    fn an_exact_line_is_recovered() {
        let x: Vec<f64> = (0..20).map(|i| i as f64 * 0.1).collect();
        let z: Vec<f64> = (0..20).map(|i| ((i * 7) % 5) as f64).collect();
        let y: Vec<f64> = x
            .iter()
            .zip(&z)
            .map(|(a, b)| 1.5 + 2.0 * a - 0.5 * b)
            .collect();
        let f = ols_hac(&y, &[("x", &x), ("z", &z)], 3).unwrap();
        let est: Vec<f64> = f.coefficients.iter().map(|c| c.estimate).collect();
        for (e, w) in est.iter().zip([1.5, 2.0, -0.5]) {
            assert!((e - w).abs() < 1e-12, "{est:?}");
        }
        assert!((f.r2 - 1.0).abs() < 1e-12);
        assert_eq!(f.coefficients[0].name, "const");
    }

    #[test]
    fn singular_and_short_designs_are_named() {
        let x: Vec<f64> = (0..10).map(f64::from).collect();
        let y: Vec<f64> = x.iter().map(|v| v * v).collect();
        let twice: Vec<f64> = x.iter().map(|v| 2.0 * v).collect();
        let e = ols_hac(&y, &[("x", &x), ("2x", &twice)], 1).unwrap_err();
        assert_eq!(e, RegressionError::Singular { name: "2x".into() });
        let e = ols_hac(&y, &[("c", &[3.0; 10])], 1).unwrap_err();
        assert!(e.to_string().contains("'c' is constant"), "{e}");
        let e = ols_hac(&y[..3], &[("x", &x[..3])], 1).unwrap_err();
        assert!(matches!(
            e,
            RegressionError::TooFew {
                n: 3,
                k: 2,
                need: 4
            }
        ));
        let e = ols_hac(&y, &[("x", &x[..9])], 1).unwrap_err();
        assert!(e.to_string().contains("aligned one for one"), "{e}");
    }

    #[test]
    fn rolling_slopes_end_at_the_last_observation() {
        let x: Vec<f64> = (0..30).map(|i| ((i * 13) % 7) as f64).collect();
        let y: Vec<f64> = x.iter().map(|v| 0.5 + 3.0 * v).collect();
        let r = rolling_slopes(&y, &[("x", &x)], 10, 4).unwrap();
        assert_eq!(r.last().unwrap().0, 29);
        assert_eq!(r[0].0, 9);
        assert!(r.iter().all(|(_, b)| (b[0] - 3.0).abs() < 1e-12));
        assert_eq!(default_hac_lags(100), 4);
        assert_eq!(default_hac_lags(2520), 8);
    }

    #[test]
    fn month_end_returns_use_the_last_close_of_each_month() {
        let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        let dates = [
            d("2010-01-28"),
            d("2010-01-29"),
            d("2010-02-26"),
            d("2010-03-31"),
            d("2010-04-06"),
        ];
        let close = [9.0, 10.0, 11.0, 12.1, 13.0];
        let r = month_end_returns(&dates, &close, None, None);
        // April stops on the 6th: partial, dropped.
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].0, d("2010-02-01"));
        assert!((r[0].1 - 0.1).abs() < 1e-15 && (r[1].1 - 0.1).abs() < 1e-12);
        let r = month_end_returns(&dates, &close, Some(d("2010-03-15")), None);
        assert_eq!(r.len(), 1);
    }
}
