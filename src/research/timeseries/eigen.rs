//! The eigen-decomposition of a small symmetric matrix (docs §16.3.1), for
//! Johansen's reduced-rank problem (n ≤ 12 series).
//!
//! Cyclic Jacobi rotations: each sweep zeroes every off-diagonal entry in
//! turn (Rutishauser's stable form of the rotation), until the off-diagonal
//! mass is below ε² of the diagonal's. Jacobi is slow for large matrices
//! but at n ≤ 12 a handful of sweeps cost microseconds, and it is accurate
//! to a few ulps of the largest eigenvalue with orthonormal vectors.

/// Sweeps before giving up (convergence is quadratic: 6–10 suffice).
const MAX_SWEEPS: usize = 60;

/// The eigenvalues of the symmetric k×k `a` (row-major; the upper triangle
/// is read) and their unit eigenvectors as columns of a row-major k×k
/// matrix, in no particular order. `None` if a value is not finite or the
/// rotations do not converge.
pub(crate) fn symmetric_eigen(a: &[f64], k: usize) -> Option<(Vec<f64>, Vec<f64>)> {
    if a.len() != k * k || a.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut m = a.to_vec();
    for i in 0..k {
        for j in 0..i {
            m[i * k + j] = m[j * k + i];
        }
    }
    let mut v = vec![0.0; k * k];
    for i in 0..k {
        v[i * k + i] = 1.0;
    }
    for _ in 0..MAX_SWEEPS {
        let off: f64 = (0..k)
            .flat_map(|i| (i + 1..k).map(move |j| (i, j)))
            .map(|(i, j)| m[i * k + j] * m[i * k + j])
            .sum();
        let diag: f64 = (0..k).map(|i| m[i * k + i] * m[i * k + i]).sum();
        if off <= f64::EPSILON * f64::EPSILON * diag || off == 0.0 {
            return Some(((0..k).map(|i| m[i * k + i]).collect(), v));
        }
        for p in 0..k {
            for q in p + 1..k {
                rotate(&mut m, &mut v, k, p, q);
            }
        }
    }
    None
}

/// One Jacobi rotation in the (p, q) plane that zeroes m[p][q].
fn rotate(m: &mut [f64], v: &mut [f64], k: usize, p: usize, q: usize) {
    let apq = m[p * k + q];
    if apq == 0.0 {
        return;
    }
    let (app, aqq) = (m[p * k + p], m[q * k + q]);
    let theta = (aqq - app) / (2.0 * apq);
    // t = tan φ, the smaller root of t² + 2θt − 1 = 0.
    let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
    let t = if theta == 0.0 { 1.0 } else { t };
    let c = 1.0 / (t * t + 1.0).sqrt();
    let s = t * c;
    for r in 0..k {
        let (mrp, mrq) = (m[r * k + p], m[r * k + q]);
        m[r * k + p] = c * mrp - s * mrq;
        m[r * k + q] = s * mrp + c * mrq;
    }
    for r in 0..k {
        let (mpr, mqr) = (m[p * k + r], m[q * k + r]);
        m[p * k + r] = c * mpr - s * mqr;
        m[q * k + r] = s * mpr + c * mqr;
    }
    m[p * k + q] = 0.0;
    m[q * k + p] = 0.0;
    for r in 0..k {
        let (vrp, vrq) = (v[r * k + p], v[r * k + q]);
        v[r * k + p] = c * vrp - s * vrq;
        v[r * k + q] = s * vrp + c * vrq;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decomposes_a_symmetric_matrix() {
        let k = 4;
        let a = [
            4.0, 1.0, -2.0, 2.0, //
            1.0, 2.0, 0.0, 1.0, //
            -2.0, 0.0, 3.0, -2.0, //
            2.0, 1.0, -2.0, -1.0,
        ];
        let (w, v) = symmetric_eigen(&a, k).unwrap();
        // A v = λ v for every pair, and the vectors are orthonormal.
        for c in 0..k {
            for r in 0..k {
                let av: f64 = (0..k).map(|j| a[r * k + j] * v[j * k + c]).sum();
                assert!((av - w[c] * v[r * k + c]).abs() < 1e-12, "{c} {r}");
            }
            for d in 0..k {
                let dot: f64 = (0..k).map(|r| v[r * k + c] * v[r * k + d]).sum();
                let want = if c == d { 1.0 } else { 0.0 };
                assert!((dot - want).abs() < 1e-13);
            }
        }
        // The trace is kept.
        assert!((w.iter().sum::<f64>() - 8.0).abs() < 1e-12);
        assert!(symmetric_eigen(&[f64::NAN], 1).is_none());
    }
}
