//! Small statistics the quant tools share (docs §15.1): the normal
//! distribution (density, CDF, quantile), sample moments with the ddof
//! and population conventions the docs state, and numpy's default
//! (`linear`) quantile.
//!
//! The CDF is `erfc`-based, so a far tail keeps its relative accuracy
//! (`1 − N(x)` is never formed); the quantile is Wichura's AS 241 with one
//! Newton step on that CDF, accurate to a few ulps.

use std::f64::consts::FRAC_1_SQRT_2;

/// 1/√(2π).
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// The standard normal density.
pub(crate) fn norm_pdf(x: f64) -> f64 {
    INV_SQRT_2PI * (-0.5 * x * x).exp()
}

/// The standard normal CDF, accurate in both tails.
pub(crate) fn norm_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x * FRAC_1_SQRT_2)
}

/// The standard normal quantile: NaN outside (0, 1), ∓∞ at 0 and 1.
pub(crate) fn norm_ppf(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let mut x = as241(p);
    // Newton steps on the accurate CDF, from the lower tail's side so the
    // residual keeps its digits; AS 241 is already within a few ulps, so
    // the steps only polish.
    for _ in 0..2 {
        let (resid, sign) = if p < 0.5 {
            (norm_cdf(x) - p, 1.0)
        } else {
            (norm_cdf(-x) - (1.0 - p), -1.0)
        };
        let d = norm_pdf(x);
        if d <= 0.0 || resid == 0.0 {
            break;
        }
        x -= sign * resid / d;
    }
    x
}

/// Wichura (1988), Algorithm AS 241 (PPND16): about 16 digits.
fn as241(p: f64) -> f64 {
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        return q * poly(&A, r) / poly(&B, r);
    }
    let r = if q < 0.0 { p } else { 1.0 - p };
    let r = (-r.ln()).sqrt();
    let x = if r <= 5.0 {
        let r = r - 1.6;
        poly(&C, r) / poly(&D, r)
    } else {
        let r = r - 5.0;
        poly(&E, r) / poly(&F, r)
    };
    if q < 0.0 { -x } else { x }
}

/// c[0] + c[1] r + … (Horner).
fn poly(c: &[f64; 8], r: f64) -> f64 {
    c.iter().rev().fold(0.0, |acc, k| acc * r + k)
}

#[allow(clippy::excessive_precision)] // As published.
const A: [f64; 8] = [
    3.387_132_872_796_366_608,
    1.331_416_678_917_843_774_5e2,
    1.971_590_950_306_551_442_7e3,
    1.373_169_376_550_946_112_5e4,
    4.592_195_393_154_987_145_7e4,
    6.726_577_092_700_870_085_3e4,
    3.343_057_558_358_812_810_5e4,
    2.509_080_928_730_122_672_7e3,
];
#[allow(clippy::excessive_precision)] // As published.
const B: [f64; 8] = [
    1.0,
    4.231_333_070_160_091_125_2e1,
    6.871_870_074_920_579_083e2,
    5.394_196_021_424_751_107_7e3,
    2.121_379_430_158_659_586_7e4,
    3.930_789_580_009_271_061e4,
    2.872_908_573_572_194_267_4e4,
    5.226_495_278_852_854_561e3,
];
#[allow(clippy::excessive_precision)] // As published.
const C: [f64; 8] = [
    1.423_437_110_749_683_577_34,
    4.630_337_846_156_545_295_9,
    5.769_497_221_460_691_405_5,
    3.647_848_324_763_204_605_04,
    1.270_458_252_452_368_382_58,
    2.417_807_251_774_506_117_7e-1,
    2.272_384_498_926_918_458_33e-2,
    7.745_450_142_783_414_076_4e-4,
];
#[allow(clippy::excessive_precision)] // As published.
const D: [f64; 8] = [
    1.0,
    2.053_191_626_637_758_821_87,
    1.676_384_830_183_803_849_4,
    6.897_673_349_851_000_045_5e-1,
    1.481_039_764_274_800_745_9e-1,
    1.519_866_656_361_645_719_66e-2,
    5.475_938_084_995_344_946e-4,
    1.050_750_071_644_416_843_24e-9,
];
#[allow(clippy::excessive_precision)] // As published.
const E: [f64; 8] = [
    6.657_904_643_501_103_777_2,
    5.463_784_911_164_114_369_9,
    1.784_826_539_917_291_335_8,
    2.965_605_718_285_048_912_3e-1,
    2.653_218_952_657_612_309_3e-2,
    1.242_660_947_388_078_438_6e-3,
    2.711_555_568_743_487_578_15e-5,
    2.010_334_399_292_288_132_65e-7,
];
#[allow(clippy::excessive_precision)] // As published.
const F: [f64; 8] = [
    1.0,
    5.998_322_065_558_879_376_9e-1,
    1.369_298_809_227_358_053_1e-1,
    1.487_536_129_085_061_485_25e-2,
    7.868_691_311_456_132_591e-4,
    1.846_318_317_510_054_681_8e-5,
    1.421_511_758_316_445_888_7e-7,
    2.044_263_103_389_939_785_64e-15,
];

/// The arithmetic mean (NaN when empty).
pub(crate) fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// The variance with `ddof` degrees of freedom removed (two passes).
pub fn variance(x: &[f64], ddof: usize) -> f64 {
    let m = mean(x);
    let ss: f64 = x.iter().map(|v| (v - m) * (v - m)).sum();
    ss / (x.len() as f64 - ddof as f64)
}

/// The standard deviation with `ddof`.
pub(crate) fn std_dev(x: &[f64], ddof: usize) -> f64 {
    variance(x, ddof).sqrt()
}

/// The population skewness m3 / m2^1.5 (scipy's `skew`, `bias=True`).
pub(crate) fn skewness(x: &[f64]) -> f64 {
    let m = mean(x);
    let n = x.len() as f64;
    let (m2, m3) = x.iter().fold((0.0, 0.0), |(a, b), v| {
        let d = v - m;
        (a + d * d, b + d * d * d)
    });
    let (m2, m3) = (m2 / n, m3 / n);
    m3 / m2.powf(1.5)
}

/// The population excess kurtosis m4 / m2² − 3 (scipy's `kurtosis`,
/// `fisher=True, bias=True`).
pub(crate) fn excess_kurtosis(x: &[f64]) -> f64 {
    let m = mean(x);
    let n = x.len() as f64;
    let (m2, m4) = x.iter().fold((0.0, 0.0), |(a, b), v| {
        let d2 = (v - m) * (v - m);
        (a + d2, b + d2 * d2)
    });
    let (m2, m4) = (m2 / n, m4 / n);
    m4 / (m2 * m2) - 3.0
}

/// numpy's default quantile (`method="linear"`) of already sorted data:
/// the order statistics at ⌊(n−1)q⌋ and the next, interpolated as numpy's
/// `_lerp` does (from the nearer end). NaN when empty.
pub(crate) fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    let vi = (n as f64 - 1.0) * q;
    let lo = vi.floor().clamp(0.0, (n - 1) as f64);
    let g = vi - lo;
    let i = lo as usize;
    let a = sorted[i];
    let b = sorted[(i + 1).min(n - 1)];
    let diff = b - a;
    if g >= 0.5 {
        b - diff * (1.0 - g)
    } else {
        a + diff * g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_normal_quantile_inverts_the_cdf_in_both_tails() {
        for p in [1e-300, 1e-20, 1e-8, 0.001, 0.01, 0.05, 0.3, 0.5, 0.7, 0.99] {
            let x = norm_ppf(p);
            let back = norm_cdf(x);
            // Far out, erfc's argument (≈ 26 at 1e-300) carries 2·x²·ε.
            let tol = if p < 1e-100 { 1e-12 } else { 1e-14 };
            assert!(((back - p) / p).abs() < tol, "{p}: {x} → {back}");
        }
        assert_eq!(norm_ppf(0.5), 0.0);
        assert!((norm_ppf(0.975) - 1.959_963_984_540_054).abs() < 1e-15);
        assert!((norm_ppf(0.01) + 2.326_347_874_040_841).abs() < 1e-15);
        assert!(norm_ppf(1.5).is_nan());
    }

    #[test]
    fn the_cdf_keeps_its_digits_far_in_the_lower_tail() {
        // N(−10) = 7.619853024160527e-24 (to 16 digits).
        let v = norm_cdf(-10.0);
        assert!(((v - 7.619_853_024_160_527e-24) / v).abs() < 1e-13, "{v}");
        assert!((norm_cdf(0.0) - 0.5).abs() < 1e-16);
    }

    #[test]
    fn numpy_linear_quantile() {
        let x = [1.0, 2.0, 3.0, 4.0, 10.0];
        assert_eq!(quantile_sorted(&x, 0.5), 3.0);
        assert_eq!(quantile_sorted(&x, 0.0), 1.0);
        assert_eq!(quantile_sorted(&x, 1.0), 10.0);
        // (n−1)q = 3.5 → halfway between 4 and 10.
        assert_eq!(quantile_sorted(&x, 0.875), 7.0);
        assert!((quantile_sorted(&x, 0.1) - 1.4).abs() < 1e-15);
    }

    #[test]
    fn moments_match_their_definitions() {
        let x = [1.0, 2.0, 4.0, 8.0];
        assert_eq!(mean(&x), 3.75);
        assert!((variance(&x, 1) - 9.583_333_333_333_334).abs() < 1e-12);
        // Deviations −2.75, −1.75, 0.25, 4.25: m2 = 7.1875, m3 = 12.65625.
        assert!((skewness(&x) - 12.656_25 / 7.1875f64.powf(1.5)).abs() < 1e-14);
        assert!(excess_kurtosis(&[1.0, -1.0, 1.0, -1.0]) + 2.0 < 1e-15);
    }
}
