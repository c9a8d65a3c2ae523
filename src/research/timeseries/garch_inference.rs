//! Standard errors of GARCH(1,1) parameters (docs §16.5.1), as arch's
//! `arch_model(...).fit()` reports them.
//!
//! arch differentiates its likelihood numerically, and so does this, with
//! its steps, so the numbers agree at given parameters:
//! - the Hessian H of the negative log-likelihood by four-point central
//!   differences, [f(x+eᵢ+eⱼ) − f(x+eᵢ−eⱼ) − f(x−eᵢ+eⱼ) + f(x−eᵢ−eⱼ)] / 4hᵢhⱼ,
//!   with hᵢ = ε^¼·max(|xᵢ|, 0.1) (statsmodels' `approx_hess3`), over n;
//! - each observation's score by forward differences with hᵢ = ε^½·max(|xᵢ|,
//!   0.1) (`approx_fprime`), and their sample covariance S (ddof 1, about
//!   their mean, as numpy's `cov`);
//! - robust (Bollerslev–Wooldridge, arch's default `cov_type="robust"`):
//!   H⁻¹ S H⁻¹ / n; classic: H⁻¹ / n. The likelihood keeps the fit's
//!   backcast and variance bounds (from the sample-mean residuals).
//!
//! t = θ / se and the two-sided p-value 2·(1 − Φ(|t|)), as arch.

use super::garch::{GarchParams, Problem, backcast, variance_bounds};
use super::{TsError, check_series};
use crate::research::stats::norm_cdf;

/// The standard errors and tests of (μ, ω, α, β).
#[derive(Clone, Debug, PartialEq)]
pub struct GarchInference {
    /// Robust (sandwich) standard errors; NaN where the covariance's
    /// diagonal is not positive.
    pub std_err: [f64; 4],
    pub t_stat: [f64; 4],
    pub p_value: [f64; 4],
    /// The classic (inverse-Hessian) standard errors.
    pub classic_std_err: [f64; 4],
}

/// The standard errors of a GARCH(1,1) on percent returns `y` at `p` (for
/// instance the fit's own parameters).
pub fn garch_inference(y: &[f64], p: &GarchParams) -> Result<GarchInference, TsError> {
    check_series(y, 2, "garch")?;
    let n = y.len() as f64;
    let m = y.iter().sum::<f64>() / n;
    let e: Vec<f64> = y.iter().map(|v| v - m).collect();
    let bounds = variance_bounds(&e);
    let prob = Problem {
        y,
        backcast: backcast(&e),
        bounds: &bounds,
    };
    let x = p.to_array();
    let mut hess = hessian(&prob, &x);
    hess.iter_mut().flatten().for_each(|v| *v /= n);
    let inv = invert(&hess).ok_or_else(|| {
        TsError::NoFit(
            "garch: the log-likelihood's Hessian is singular at these parameters, so they have no standard errors".into(),
        )
    })?;
    let s = score_covariance(&prob, &x);
    let robust = mul(&mul(&inv, &s), &inv);
    let se = |c: &[[f64; 4]; 4], i: usize| {
        let v = c[i][i] / n;
        if v > 0.0 { v.sqrt() } else { f64::NAN }
    };
    let std_err: [f64; 4] = std::array::from_fn(|i| se(&robust, i));
    let t_stat: [f64; 4] = std::array::from_fn(|i| x[i] / std_err[i]);
    Ok(GarchInference {
        std_err,
        t_stat,
        p_value: t_stat.map(|t| 2.0 * norm_cdf(-t.abs())),
        classic_std_err: std::array::from_fn(|i| se(&inv, i)),
    })
}

/// The negative log-likelihood, summed as arch sums its terms.
fn neg_loglik(prob: &Problem<'_>, x: &[f64; 4]) -> f64 {
    -pairwise_sum(&prob.contributions(&GarchParams::from_array(*x)))
}

/// Σ a by numpy's pairwise summation (eight accumulators for blocks of up
/// to 128, halves split at a multiple of eight above), so the differences
/// of the likelihood round as arch's do: a Hessian step divides rounding
/// by h² ≈ 10⁻¹⁰.
pub(super) fn pairwise_sum(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        a.iter().fold(0.0, |s, v| s + v)
    } else if n <= 128 {
        let mut r = [0.0; 8];
        r.copy_from_slice(&a[..8]);
        let whole = n - n % 8;
        for block in a[8..whole].chunks_exact(8) {
            r.iter_mut().zip(block).for_each(|(acc, v)| *acc += v);
        }
        let mut s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for v in &a[whole..] {
            s += v;
        }
        s
    } else {
        let half = n / 2;
        let half = half - half % 8;
        pairwise_sum(&a[..half]) + pairwise_sum(&a[half..])
    }
}

/// x + a·hᵢ·eᵢ + b·hⱼ·eⱼ, added in that order as numpy adds the rows.
fn shifted(x: &[f64; 4], i: usize, a: f64, j: usize, b: f64, h: &[f64; 4]) -> [f64; 4] {
    let mut first = *x;
    first[i] += a * h[i];
    let mut second = first;
    second[j] += b * h[j];
    second
}

/// statsmodels' `approx_hess3` of the negative log-likelihood.
fn hessian(prob: &Problem<'_>, x: &[f64; 4]) -> [[f64; 4]; 4] {
    let h: [f64; 4] = x.map(|v| f64::EPSILON.powf(0.25) * v.abs().max(0.1));
    let f = |y: [f64; 4]| neg_loglik(prob, &y);
    let mut out = [[0.0; 4]; 4];
    for i in 0..4 {
        for j in i..4 {
            let v = (f(shifted(x, i, 1.0, j, 1.0, &h))
                - f(shifted(x, i, 1.0, j, -1.0, &h))
                - (f(shifted(x, i, -1.0, j, 1.0, &h)) - f(shifted(x, i, -1.0, j, -1.0, &h))))
                / (4.0 * (h[i] * h[j]));
            out[i][j] = v;
            out[j][i] = v;
        }
    }
    out
}

/// The sample covariance (ddof 1) of the per-observation scores, by
/// forward differences (statsmodels' `approx_fprime`).
fn score_covariance(prob: &Problem<'_>, x: &[f64; 4]) -> [[f64; 4]; 4] {
    let base = prob.contributions(&GarchParams::from_array(*x));
    let nobs = base.len();
    let scores: Vec<Vec<f64>> = (0..4)
        .map(|k| {
            let step = f64::EPSILON.sqrt() * x[k].abs().max(0.1);
            let mut moved = *x;
            moved[k] += step;
            let up = prob.contributions(&GarchParams::from_array(moved));
            // Of the negative log-likelihood, as arch (the sign cancels in
            // the covariance).
            up.iter().zip(&base).map(|(u, b)| (b - u) / step).collect()
        })
        .collect();
    let means: Vec<f64> = scores
        .iter()
        .map(|s| s.iter().sum::<f64>() / nobs as f64)
        .collect();
    let mut out = [[0.0; 4]; 4];
    for i in 0..4 {
        for j in i..4 {
            let c: f64 = scores[i]
                .iter()
                .zip(&scores[j])
                .map(|(a, b)| (a - means[i]) * (b - means[j]))
                .sum::<f64>()
                / (nobs as f64 - 1.0);
            out[i][j] = c;
            out[j][i] = c;
        }
    }
    out
}

fn mul(a: &[[f64; 4]; 4], b: &[[f64; 4]; 4]) -> [[f64; 4]; 4] {
    std::array::from_fn(|i| std::array::from_fn(|j| (0..4).map(|k| a[i][k] * b[k][j]).sum()))
}

/// The inverse of `a` by Gauss–Jordan elimination with partial pivoting;
/// `None` when a pivot vanishes.
fn invert(a: &[[f64; 4]; 4]) -> Option<[[f64; 4]; 4]> {
    let mut m = *a;
    let mut inv: [[f64; 4]; 4] =
        std::array::from_fn(|i| std::array::from_fn(|j| if i == j { 1.0 } else { 0.0 }));
    let scale = a.iter().flatten().fold(0.0f64, |s, v| s.max(v.abs()));
    for col in 0..4 {
        let piv = (col..4).max_by(|&r, &s| m[r][col].abs().total_cmp(&m[s][col].abs()))?;
        let p = m[piv][col].abs();
        if p.is_nan() || p <= 1e-14 * scale {
            return None;
        }
        m.swap(col, piv);
        inv.swap(col, piv);
        let d = m[col][col];
        for k in 0..4 {
            m[col][k] /= d;
            inv[col][k] /= d;
        }
        for r in 0..4 {
            if r != col {
                let f = m[r][col];
                for k in 0..4 {
                    m[r][k] -= f * m[col][k];
                    inv[r][k] -= f * inv[col][k];
                }
            }
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inversion_undoes_a_matrix() {
        let a = [
            [4.0, 1.0, 0.5, 0.0],
            [1.0, 3.0, 0.2, 0.1],
            [0.5, 0.2, 2.0, 0.3],
            [0.0, 0.1, 0.3, 1.0],
        ];
        let i = mul(&a, &invert(&a).unwrap());
        for (r, row) in i.iter().enumerate() {
            for (c, v) in row.iter().enumerate() {
                let want = if r == c { 1.0 } else { 0.0 };
                assert!((v - want).abs() < 1e-14);
            }
        }
        assert!(invert(&[[1.0; 4]; 4]).is_none());
    }

    #[test]
    fn pairwise_sums_add_up() {
        let a: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        assert_eq!(pairwise_sum(&a), 499_500.0);
        assert_eq!(pairwise_sum(&a[..5]), 10.0);
        assert_eq!(pairwise_sum(&a[..100]), 4_950.0);
    }
}
