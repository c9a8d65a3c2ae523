//! The small least-squares problems behind the tests (docs §16.1).
//!
//! A regression with deterministic terms (a constant, a trend) is solved by
//! the Frisch–Waugh–Lovell theorem: those terms are partialled out of the
//! response and of every other column first, after which the remaining
//! coefficients, the residuals and the sum of squared residuals are those of
//! the full regression. On the partialled columns the Gram matrix is well
//! conditioned (the level of a price no longer sits beside a column of ones),
//! and its Cholesky factor L answers every nested model at once: with
//! z = L⁻¹Xᵀy, the first k columns leave SSR_k = yᵀy − Σ_{i<k} z_i², and the
//! t statistic of the last column of a model is z_k / s.

use super::Trend;

/// Removes `trend`'s deterministic terms from `v` in place: the mean, and
/// with a trend also the projection on the centred time index 1..n.
pub(crate) fn partial_out(v: &mut [f64], trend: Trend) {
    if trend == Trend::None || v.is_empty() {
        return;
    }
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    v.iter_mut().for_each(|x| *x -= m);
    if trend == Trend::ConstantTrend {
        let g = trend_coefficient(v);
        let c = (n - 1.0) / 2.0;
        for (i, x) in v.iter_mut().enumerate() {
            *x -= g * (i as f64 - c);
        }
    }
}

/// The slope of centred `v` on the centred time index: Σ τ̃_i v_i / Σ τ̃_i²,
/// with τ̃_i = i − (n−1)/2 and Σ τ̃² = n(n²−1)/12.
pub(crate) fn trend_coefficient(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    let c = (n - 1.0) / 2.0;
    let num: f64 = v.iter().enumerate().map(|(i, x)| (i as f64 - c) * x).sum();
    num / (n * (n * n - 1.0) / 12.0)
}

/// Σ a_i b_i over the shorter length, with four accumulators so the loop
/// vectorises.
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f64; 4];
    let chunks = n / 4;
    for i in 0..chunks {
        let j = 4 * i;
        acc[0] += a[j] * b[j];
        acc[1] += a[j + 1] * b[j + 1];
        acc[2] += a[j + 2] * b[j + 2];
        acc[3] += a[j + 3] * b[j + 3];
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for j in 4 * chunks..n {
        s += a[j] * b[j];
    }
    s
}

/// The Gram matrix XᵀX (k×k, row-major, both triangles) of `cols`.
pub(crate) fn gram(cols: &[Vec<f64>]) -> Vec<f64> {
    let k = cols.len();
    let mut g = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..=i {
            let v = dot(&cols[i], &cols[j]);
            g[i * k + j] = v;
            g[j * k + i] = v;
        }
    }
    g
}

/// The lower Cholesky factor of the k×k symmetric positive definite `g`,
/// or `None` when a pivot vanishes against its diagonal (collinear
/// columns).
pub(crate) fn cholesky(g: &[f64], k: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..=i {
            let mut s = g[i * k + j];
            for p in 0..j {
                s -= l[i * k + p] * l[j * k + p];
            }
            if i == j {
                if s.is_nan() || s <= 1e-13 * g[i * k + i] || !s.is_finite() {
                    return None;
                }
                l[i * k + i] = s.sqrt();
            } else {
                l[i * k + j] = s / l[j * k + j];
            }
        }
    }
    Some(l)
}

/// Solves L z = b for lower-triangular L (k×k).
pub(crate) fn forward(l: &[f64], k: usize, b: &[f64]) -> Vec<f64> {
    let mut z = vec![0.0; k];
    for i in 0..k {
        let mut s = b[i];
        for p in 0..i {
            s -= l[i * k + p] * z[p];
        }
        z[i] = s / l[i * k + i];
    }
    z
}

/// Solves Lᵀ x = z for lower-triangular L (k×k).
pub(crate) fn backward(l: &[f64], k: usize, z: &[f64]) -> Vec<f64> {
    let mut x = vec![0.0; k];
    for i in (0..k).rev() {
        let mut s = z[i];
        for p in i + 1..k {
            s -= l[p * k + i] * x[p];
        }
        x[i] = s / l[i * k + i];
    }
    x
}

/// A least-squares fit on already partialled columns.
#[derive(Clone, Debug)]
pub struct Fit {
    pub coef: Vec<f64>,
    /// z = L⁻¹Xᵀy (its last entry over s is the last column's t).
    pub z: Vec<f64>,
    pub ssr: f64,
}

/// Regresses `y` on `cols` (no intercept: partial it out first). The SSR
/// is summed from the residuals, not by cancellation. `None` when the
/// columns are collinear.
pub(crate) fn least_squares(y: &[f64], cols: &[Vec<f64>]) -> Option<Fit> {
    let k = cols.len();
    let g = gram(cols);
    let l = cholesky(&g, k)?;
    let xy: Vec<f64> = cols.iter().map(|c| dot(c, y)).collect();
    let z = forward(&l, k, &xy);
    let coef = backward(&l, k, &z);
    let mut ssr = 0.0;
    for (t, yt) in y.iter().enumerate() {
        let fit: f64 = cols.iter().zip(&coef).map(|(c, b)| c[t] * b).sum();
        let e = yt - fit;
        ssr += e * e;
    }
    Some(Fit { coef, z, ssr })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partialling_out_matches_a_regression_with_its_terms() {
        // y = 2 + 0.5 t + 3 x + e: partialled, y on x gives slope 3 exactly
        // when e = 0.
        let n = 50;
        let x: Vec<f64> = (0..n).map(|i| ((i * 37 % 11) as f64).sin()).collect();
        let y: Vec<f64> = (0..n)
            .map(|i| 2.0 + 0.5 * (i + 1) as f64 + 3.0 * x[i])
            .collect();
        let (mut xp, mut yp) = (x.clone(), y.clone());
        partial_out(&mut xp, Trend::ConstantTrend);
        partial_out(&mut yp, Trend::ConstantTrend);
        let f = least_squares(&yp, &[xp]).unwrap();
        assert!((f.coef[0] - 3.0).abs() < 1e-12, "{:?}", f.coef);
        assert!(f.ssr < 1e-20);
    }

    #[test]
    fn collinear_columns_are_refused() {
        let a = vec![1.0, 2.0, 3.0, 4.0];
        let b: Vec<f64> = a.iter().map(|v| 2.0 * v).collect();
        assert!(least_squares(&[1.0, 0.0, 1.0, 0.0], &[a, b]).is_none());
    }
}
