//! MacKinnon's response-surface approximations for unit-root and
//! cointegration tests (docs §16.2): approximate asymptotic p-values from
//! MacKinnon (1994, "Approximate asymptotic distribution functions for
//! unit-root and cointegration tests", JBES 12(2), tables 3 and 4) and
//! finite-sample critical values from MacKinnon (2010, "Critical values for
//! cointegration tests", Queen's Economics Department WP 1227, table 2; the
//! no-constant case from MacKinnon 1996), as statsmodels' `mackinnonp` and
//! `mackinnoncrit` evaluate them.
//!
//! N is the number of I(1) series: 1 for ADF, 2 for a two-series
//! Engle–Granger test. The coefficients are the papers' (with their
//! published scalings applied at run time, as the tables print them), and
//! the polynomials are evaluated by Horner's rule from the highest power,
//! as numpy's `polyval` does, so critical values come out bit for bit.

use super::Trend;
use crate::research::stats::norm_cdf;

/// Largest N the tables here carry.
pub(crate) const MAX_N: usize = 2;

/// τ* (below: the small-p polynomial), τ_min (below: p = 0) and τ_max
/// (above: p = 1), per trend, for N = 1, 2 (MacKinnon 1994, table 3).
fn bounds(trend: Trend, n: usize) -> (f64, f64, f64) {
    let (star, min, max): ([f64; 2], [f64; 2], [f64; 2]) = match trend {
        Trend::None => ([-1.04, -1.53], [-19.04, -19.62], [f64::INFINITY, 1.51]),
        Trend::Constant => ([-1.61, -2.62], [-18.83, -18.86], [2.74, 0.92]),
        Trend::ConstantTrend => ([-2.89, -3.19], [-16.18, -21.15], [0.7, 0.63]),
    };
    (star[n - 1], min[n - 1], max[n - 1])
}

/// Small-p coefficients γ0, γ1, γ2 (γ2 printed × 100).
fn small_p(trend: Trend, n: usize) -> [f64; 3] {
    let t: [[f64; 3]; 2] = match trend {
        Trend::None => [[0.6344, 1.2378, 3.2496], [1.9129, 1.3857, 3.5322]],
        Trend::Constant => [[2.1659, 1.4412, 3.8269], [2.92, 1.5012, 3.9796]],
        Trend::ConstantTrend => [[3.2512, 1.6047, 4.9588], [3.6646, 1.5419, 3.6448]],
    };
    let c = t[n - 1];
    [c[0], c[1], c[2] * 1e-2]
}

/// Large-p coefficients γ0..γ3 (γ1, γ2 printed × 10, γ3 × 100).
fn large_p(trend: Trend, n: usize) -> [f64; 4] {
    let t: [[f64; 4]; 2] = match trend {
        Trend::None => [
            [0.4797, 9.3557, -0.6999, 3.3066],
            [1.5578, 8.558, -2.083, -3.3549],
        ],
        Trend::Constant => [
            [1.7339, 9.3202, -1.2745, -1.0368],
            [2.1945, 6.4695, -2.9198, -4.2377],
        ],
        Trend::ConstantTrend => [
            [2.5261, 6.1654, -3.7956, -6.0285],
            [2.85, 5.272, -3.6622, -5.1695],
        ],
    };
    let c = t[n - 1];
    [c[0], c[1] * 1e-1, c[2] * 1e-1, c[3] * 1e-2]
}

/// MacKinnon's approximate p-value of the statistic `tau` for N series.
/// N outside 1..=[`MAX_N`] gives NaN.
pub(crate) fn p_value(tau: f64, trend: Trend, n: usize) -> f64 {
    if !(1..=MAX_N).contains(&n) || tau.is_nan() {
        return f64::NAN;
    }
    let (star, min, max) = bounds(trend, n);
    if tau > max {
        return 1.0;
    }
    if tau < min {
        return 0.0;
    }
    let z = if tau <= star {
        let c = small_p(trend, n);
        (c[2] * tau + c[1]) * tau + c[0]
    } else {
        let c = large_p(trend, n);
        ((c[3] * tau + c[2]) * tau + c[1]) * tau + c[0]
    };
    norm_cdf(z)
}

/// The 1 %, 5 % and 10 % critical values for a sample of `nobs` (MacKinnon
/// 2010: β∞ + β1/T + β2/T² + β3/T³). `None` where the paper gives none (no
/// constant with N > 1).
pub(crate) fn critical_values(trend: Trend, n: usize, nobs: usize) -> Option<[f64; 3]> {
    let t = table_2010(trend, n)?;
    let x = 1.0 / nobs as f64;
    let mut out = [0.0; 3];
    for (o, b) in out.iter_mut().zip(t) {
        // numpy's polyval: y = 0; y = y·x + p for p from the highest power.
        *o = (((0.0 * x + b[3]) * x + b[2]) * x + b[1]) * x + b[0];
    }
    Some(out)
}

/// β∞, β1, β2, β3 for 1 %, 5 %, 10 % (MacKinnon 2010, table 2; MacKinnon
/// 1996 without a constant).
fn table_2010(trend: Trend, n: usize) -> Option<[[f64; 4]; 3]> {
    Some(match (trend, n) {
        (Trend::None, 1) => [
            [-2.56574, -2.2358, -3.627, 0.0],
            [-1.94100, -0.2686, -3.365, 31.223],
            [-1.61682, 0.2656, -2.714, 25.364],
        ],
        (Trend::Constant, 1) => [
            [-3.43035, -6.5393, -16.786, -79.433],
            [-2.86154, -2.8903, -4.234, -40.040],
            [-2.56677, -1.5384, -2.809, 0.0],
        ],
        (Trend::Constant, 2) => [
            [-3.89644, -10.9519, -33.527, 0.0],
            [-3.33613, -6.1101, -6.823, 0.0],
            [-3.04445, -4.2412, -2.720, 0.0],
        ],
        (Trend::ConstantTrend, 1) => [
            [-3.95877, -9.0531, -28.428, -134.155],
            [-3.41049, -4.3904, -9.036, -45.374],
            [-3.12705, -2.5856, -3.925, -22.380],
        ],
        (Trend::ConstantTrend, 2) => [
            [-4.32762, -15.4387, -35.679, 0.0],
            [-3.78057, -9.5106, -12.074, 0.0],
            [-3.49631, -7.0815, -7.538, 21.892],
        ],
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asymptotic_and_tail_values() {
        // Beyond τ_max the p-value is 1, below τ_min 0.
        assert_eq!(p_value(3.0, Trend::Constant, 1), 1.0);
        assert_eq!(p_value(-30.0, Trend::Constant, 1), 0.0);
        assert!(p_value(f64::NAN, Trend::None, 1).is_nan());
        // The 5 % critical value with a constant is about −2.86 (DF's table).
        let c = critical_values(Trend::Constant, 1, 1_000_000).unwrap();
        assert!((c[1] + 2.86154).abs() < 1e-4, "{c:?}");
        // At its own 5 % critical value a statistic has p ≈ 0.05.
        let c = critical_values(Trend::Constant, 1, 500).unwrap();
        let p = p_value(c[1], Trend::Constant, 1);
        assert!((p - 0.05).abs() < 0.005, "{p}");
        assert!(critical_values(Trend::None, 2, 100).is_none());
    }
}
