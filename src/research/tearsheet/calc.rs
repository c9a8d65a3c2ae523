//! The column statistics the tear sheet rests on, with pandas' conventions
//! where quantstats relies on them (sample standard deviation, the
//! bias-corrected skew and kurtosis, numpy's linear quantile). Every
//! function takes finite values only (the caller drops gaps) and answers
//! NaN where the statistic is not defined; `opt` turns that into `None`.

use crate::research::stats::{norm_cdf, norm_pdf, norm_ppf};

/// `Some(x)` when `x` is finite.
pub(crate) fn opt(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

pub(crate) fn sum(x: &[f64]) -> f64 {
    x.iter().sum()
}

pub(crate) fn mean(x: &[f64]) -> f64 {
    if x.is_empty() {
        return f64::NAN;
    }
    sum(x) / x.len() as f64
}

/// The mean of the values `keep` selects (NaN when none is).
pub(crate) fn mean_where(x: &[f64], keep: impl Fn(f64) -> bool) -> f64 {
    let (s, n) = x
        .iter()
        .filter(|v| keep(**v))
        .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { f64::NAN } else { s / n as f64 }
}

/// The sample standard deviation (ddof 1), as pandas' `std`.
pub(crate) fn std(x: &[f64]) -> f64 {
    let n = x.len();
    if n < 2 {
        return f64::NAN;
    }
    let m = mean(x);
    let ss: f64 = x.iter().map(|v| (v - m) * (v - m)).sum();
    (ss / (n - 1) as f64).sqrt()
}

/// pandas' `skew`: the adjusted Fisher–Pearson coefficient G1.
pub(crate) fn skew(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    if x.len() < 3 {
        return f64::NAN;
    }
    let m = mean(x);
    let (m2, m3) = x.iter().fold((0.0, 0.0), |(a, b), v| {
        let d = v - m;
        (a + d * d, b + d * d * d)
    });
    if m2 == 0.0 {
        return 0.0;
    }
    let (m2, m3) = (m2 / n, m3 / n);
    (n * (n - 1.0)).sqrt() / (n - 2.0) * m3 / m2.powf(1.5)
}

/// pandas' `kurt`: the bias-corrected excess kurtosis G2.
pub(crate) fn kurtosis(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    if x.len() < 4 {
        return f64::NAN;
    }
    let m = mean(x);
    let (m2, m4) = x.iter().fold((0.0, 0.0), |(a, b), v| {
        let d2 = (v - m) * (v - m);
        (a + d2, b + d2 * d2)
    });
    if m2 == 0.0 {
        return 0.0;
    }
    let adj = 3.0 * (n - 1.0) * (n - 1.0) / ((n - 2.0) * (n - 3.0));
    let num = n * (n + 1.0) * (n - 1.0) * m4;
    let den = (n - 2.0) * (n - 3.0) * m2 * m2;
    num / den - adj
}

/// Π(1 + r) − 1.
pub(crate) fn comp(x: &[f64]) -> f64 {
    x.iter().fold(1.0, |a, r| a * (1.0 + r)) - 1.0
}

/// quantstats' CAGR: the compounded total over `n / periods` years; NaN
/// when the wealth ends below zero.
pub(crate) fn cagr(x: &[f64], periods: f64) -> f64 {
    if x.is_empty() {
        return f64::NAN;
    }
    let wealth = 1.0 + comp(x);
    if wealth < 0.0 {
        return f64::NAN;
    }
    let years = x.len() as f64 / periods;
    wealth.abs().powf(1.0 / years) - 1.0
}

/// The standard normal distribution, re-exported for the metrics.
pub(crate) fn ncdf(x: f64) -> f64 {
    norm_cdf(x)
}

/// The normal expected shortfall at tail probability `alpha`:
/// μ − σ φ(Φ⁻¹(α)) / α (μ itself when σ is 0).
pub(crate) fn gaussian_es(mu: f64, sd: f64, alpha: f64) -> f64 {
    if sd == 0.0 || sd.is_nan() {
        return mu;
    }
    mu - sd * norm_pdf(norm_ppf(alpha)) / alpha
}

/// The normal quantile μ + σ Φ⁻¹(p).
pub(crate) fn gaussian_var(mu: f64, sd: f64, p: f64) -> f64 {
    mu + sd * norm_ppf(p)
}

/// Pearson's correlation and the covariance / variance pair of two
/// equally long columns (ddof 1).
pub(crate) fn cov_var(x: &[f64], y: &[f64]) -> (f64, f64, f64) {
    let n = x.len().min(y.len());
    if n < 2 {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let (x, y) = (&x[..n], &y[..n]);
    let (mx, my) = (mean(x), mean(y));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    let d = (n - 1) as f64;
    (sxy / d, sxx / d, syy / d)
}

/// Lag-1 autocorrelation penalty of quantstats' "smart" ratios:
/// √(1 + 2 Σₓ (n−x)/n · |ρ₁|ˣ), x = 1 … n−1.
pub(crate) fn autocorr_penalty(x: &[f64]) -> f64 {
    let n = x.len();
    if n < 2 {
        return 1.0;
    }
    let (c, vx, vy) = cov_var(&x[..n - 1], &x[1..]);
    let coef = (c / (vx * vy).sqrt()).abs();
    if coef.is_nan() {
        return 1.0;
    }
    let nf = n as f64;
    let mut acc = 0.0;
    let mut pow = 1.0;
    for k in 1..n {
        pow *= coef;
        if pow == 0.0 {
            break;
        }
        acc += (nf - k as f64) / nf * pow;
    }
    (1.0 + 2.0 * acc).sqrt()
}
