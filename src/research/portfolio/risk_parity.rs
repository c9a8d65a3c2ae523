//! Equal risk contributions (docs §15.3): the long-only weights whose
//! every asset contributes the same share w_i·(Σw)_i / wᵀΣw of the
//! variance. They are y/Σy for the minimiser y of the strictly convex
//!
//! ```text
//! f(y) = ½·yᵀΣy − (1/n)·Σ ln y_i     (Spinu 2013; Maillard, Roncalli, Teïletche 2010)
//! ```
//!
//! whose optimum has y_i·(Σy)_i = 1/n for every i. Newton's method with a
//! backtracking line search that keeps y positive converges quadratically;
//! it stops when the Newton decrement no longer shrinks.

use super::covariance::Matrix;
use super::qp::{QpError, backward, cholesky, forward};

/// The Newton iterations' cap (it needs about ten).
const MAX_ITERATIONS: usize = 200;

/// The equal-risk-contribution weights, summing to 1.
pub(crate) fn erc_weights(cov: &Matrix) -> Result<Vec<f64>, QpError> {
    let n = cov.n;
    let b = 1.0 / n as f64;
    // Start at inverse volatility, scaled so that yᵀΣy = 1 (f's scale).
    let mut y: Vec<f64> = cov.vols().iter().map(|v| 1.0 / v).collect();
    let scale = cov.quad(&y).sqrt();
    y.iter_mut().for_each(|v| *v /= scale);
    let f = |y: &[f64]| 0.5 * cov.quad(y) - b * y.iter().map(|v| v.ln()).sum::<f64>();
    for _ in 0..MAX_ITERATIONS {
        // An iteration factors an n × n matrix (docs §2.4).
        crate::research::checkpoint()?;
        let sy = cov.times(&y);
        let grad: Vec<f64> = sy.iter().zip(&y).map(|(s, v)| s - b / v).collect();
        let mut h = cov.data.clone();
        for i in 0..n {
            h[i * n + i] += b / (y[i] * y[i]);
        }
        let l = cholesky(n, &h)?;
        let step: Vec<f64> = backward(n, &l, &forward(n, &l, &grad))
            .iter()
            .map(|v| -v)
            .collect();
        // The Newton decrement λ² ≈ 2·(f(y) − min f).
        let decrement: f64 = -grad.iter().zip(&step).map(|(g, s)| g * s).sum::<f64>();
        if decrement.is_nan() || decrement <= 0.0 {
            break;
        }
        let take =
            |alpha: f64| -> Vec<f64> { y.iter().zip(&step).map(|(v, s)| v + alpha * s).collect() };
        y = if decrement < 1e-12 {
            // The quadratic region: f's changes are below its rounding
            // here, so the full step is taken without a line search.
            let next = take(1.0);
            if next.iter().any(|v| *v <= 0.0) {
                break;
            }
            next
        } else {
            let f0 = f(&y);
            let mut alpha = 1.0;
            loop {
                let next = take(alpha);
                if next.iter().all(|v| *v > 0.0) && f(&next) <= f0 - 0.25 * alpha * decrement {
                    break next;
                }
                alpha *= 0.5;
                if alpha < 1e-12 {
                    return Ok(normalised(&y));
                }
            }
        };
        if decrement < 1e-26 {
            break;
        }
    }
    Ok(normalised(&y))
}

fn normalised(y: &[f64]) -> Vec<f64> {
    let total: f64 = y.iter().sum();
    y.iter().map(|v| v / total).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_contributes_the_same_risk() {
        let vols = [0.1, 0.2, 0.35];
        let rho = [[1.0, 0.3, 0.1], [0.3, 1.0, 0.6], [0.1, 0.6, 1.0]];
        let mut m = Matrix::zeros(3);
        for i in 0..3 {
            for j in 0..3 {
                m.data[i * 3 + j] = rho[i][j] * vols[i] * vols[j];
            }
        }
        let w = erc_weights(&m).unwrap();
        let sw = m.times(&w);
        let var = m.quad(&w);
        for i in 0..3 {
            assert!((w[i] * sw[i] / var - 1.0 / 3.0).abs() < 1e-12, "{w:?}");
        }
        assert!(w[0] > w[1] && w[1] > w[2]);
    }
}
