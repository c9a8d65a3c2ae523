//! Is a backtest's Sharpe ratio real (docs §17.3)? The probabilistic and
//! deflated Sharpe ratios, the minimum track record length, and the
//! probability of backtest overfitting.
//!
//! - **PSR** (Bailey & López de Prado 2012, "The Sharpe Ratio Efficient
//!   Frontier", eq. for PSR): on the per-period (not annualised) Sharpe
//!   ŜR = mean / std (ddof 1) of n returns with skewness γ₃ and kurtosis γ₄
//!   (population moments, γ₄ = 3 for a normal),
//!   PSR(SR*) = Φ((ŜR − SR*)·√(n − 1) / √(1 − γ₃·ŜR + (γ₄ − 1)/4·ŜR²)).
//! - **Minimum track record length** (same paper): the n at which PSR(SR*)
//!   reaches a confidence c, 1 + (1 − γ₃·ŜR + (γ₄ − 1)/4·ŜR²)·(Φ⁻¹(c) /
//!   (ŜR − SR*))², in periods.
//! - **DSR** (Bailey & López de Prado 2014, "The Deflated Sharpe Ratio"):
//!   PSR against the Sharpe one expects from the best of N trials by luck,
//!   SR₀ = SR* + √V·((1 − γ)·Φ⁻¹(1 − 1/N) + γ·Φ⁻¹(1 − 1/(N·e))), V the
//!   variance of the trials' Sharpe ratios and γ Euler–Mascheroni's
//!   constant (the paper has SR* = 0).
//! - **PBO** by combinatorially symmetric cross-validation (Bailey,
//!   Borwein, López de Prado & Zhu 2017, "The Probability of Backtest
//!   Overfitting"): T rows of N strategies' returns cut into S equal blocks;
//!   for each of the C(S, S/2) ways to pick half the blocks as in-sample,
//!   the in-sample best strategy's out-of-sample relative rank ω = rank /
//!   (N + 1) gives the logit λ = ln(ω / (1 − ω)); PBO is the share of
//!   λ ≤ 0 (the in-sample winner at or below the out-of-sample median).

use crate::research::stats::{excess_kurtosis, mean, norm_cdf, norm_ppf, skewness, std_dev};

/// Euler–Mascheroni's constant.
pub(crate) const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// Why a statistic cannot be computed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum OverfitError {
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Interrupted(#[from] crate::research::Interrupted),
}

/// The moments PSR reads, of one return series.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SharpeMoments {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (ddof 1).
    pub std: f64,
    /// Per-period Sharpe ratio mean / std.
    pub sharpe: f64,
    /// Population skewness (scipy's `skew`).
    pub skewness: f64,
    /// Population kurtosis, not excess (scipy's `kurtosis(fisher=False)`).
    pub kurtosis: f64,
}

impl SharpeMoments {
    pub fn of(returns: &[f64]) -> Result<Self, OverfitError> {
        if returns.len() < 3 {
            return Err(OverfitError::Input(format!(
                "a Sharpe ratio's moments need at least 3 returns, got {}",
                returns.len()
            )));
        }
        if returns.iter().any(|v| !v.is_finite()) {
            return Err(OverfitError::Input(
                "the returns have a missing or non-finite value".into(),
            ));
        }
        let (m, s) = (mean(returns), std_dev(returns, 1));
        // A constant series' deviation is rounding noise (1e-18 beside a
        // mean of 1e-3), not 0: its "Sharpe" of 10¹⁵ would survive any
        // deflation. Below 10⁻¹² absolute, or 10⁻⁹ of the mean, there is
        // no variance to speak of.
        if !(s > 1e-12 && s > 1e-9 * m.abs()) {
            return Err(OverfitError::Input(format!(
                "the returns are constant (standard deviation {s:e} beside a mean of {m:e}): no Sharpe ratio"
            )));
        }
        Ok(SharpeMoments {
            n: returns.len(),
            mean: m,
            std: s,
            sharpe: m / s,
            skewness: skewness(returns),
            kurtosis: excess_kurtosis(returns) + 3.0,
        })
    }

    /// 1 − γ₃·SR + (γ₄ − 1)/4·SR²: the Sharpe estimator's variance × (n − 1).
    pub fn dispersion(&self) -> f64 {
        let sr = self.sharpe;
        1.0 - self.skewness * sr + (self.kurtosis - 1.0) / 4.0 * sr * sr
    }
}

/// PSR(SR*) with per-period Sharpe ratios.
pub fn psr(m: &SharpeMoments, benchmark: f64) -> f64 {
    norm_cdf((m.sharpe - benchmark) * ((m.n - 1) as f64).sqrt() / m.dispersion().sqrt())
}

/// The expected maximum Sharpe of `trials` draws with Sharpe variance
/// `variance` around `benchmark` (the 2014 paper's SR₀); `benchmark` for
/// a single trial.
pub fn expected_max_sharpe(variance: f64, trials: usize, benchmark: f64) -> f64 {
    if trials < 2 {
        return benchmark;
    }
    let n = trials as f64;
    let z1 = norm_ppf(1.0 - 1.0 / n);
    let z2 = norm_ppf(1.0 - 1.0 / (n * std::f64::consts::E));
    benchmark + variance.sqrt() * ((1.0 - EULER_GAMMA) * z1 + EULER_GAMMA * z2)
}

/// The minimum track record length in periods for PSR(SR*) to reach
/// `confidence`; `None` when the Sharpe is not above SR*.
pub fn min_track_record(m: &SharpeMoments, benchmark: f64, confidence: f64) -> Option<f64> {
    if m.sharpe <= benchmark {
        return None;
    }
    let z = norm_ppf(confidence);
    Some(1.0 + m.dispersion() * (z / (m.sharpe - benchmark)).powi(2))
}

/// The result of CSCV.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pbo {
    pub pbo: f64,
    pub partitions: usize,
    pub combinations: usize,
    /// Rows used (a multiple of the partitions) and dropped from the
    /// start so the blocks are equal.
    pub rows: usize,
    pub rows_dropped: usize,
    /// Each combination's logit λ.
    pub logits: Vec<f64>,
    /// Share of combinations whose in-sample winner lost money (Sharpe < 0)
    /// out of sample.
    pub prob_oos_loss: f64,
    /// Slope of the winner's out-of-sample Sharpe on its in-sample Sharpe
    /// over the combinations (negative: the better in sample, the worse
    /// out of sample).
    pub degradation_slope: f64,
}

/// Per-block running sums of one strategy, shifted by its overall mean so
/// that sum-of-squares differences keep their digits.
struct Blocks {
    /// [block · n + strategy]
    sum: Vec<f64>,
    sumsq: Vec<f64>,
    shift: Vec<f64>,
}

fn block_sums(columns: &[Vec<f64>], s: usize, m: usize, from: usize) -> Blocks {
    let n = columns.len();
    let mut b = Blocks {
        sum: vec![0.0; s * n],
        sumsq: vec![0.0; s * n],
        shift: columns.iter().map(|c| mean(&c[from..])).collect(),
    };
    for (j, c) in columns.iter().enumerate() {
        for blk in 0..s {
            let (mut a, mut q) = (0.0, 0.0);
            for v in &c[from + blk * m..from + (blk + 1) * m] {
                let d = v - b.shift[j];
                a += d;
                q += d * d;
            }
            b.sum[blk * n + j] = a;
            b.sumsq[blk * n + j] = q;
        }
    }
    b
}

/// PBO of `columns` (one equal-length return series per strategy) by CSCV
/// over `partitions` blocks (even, 2 to 24).
pub fn pbo_cscv(columns: &[Vec<f64>], partitions: usize) -> Result<Pbo, OverfitError> {
    let n = columns.len();
    let s = partitions;
    if n < 2 {
        return Err(OverfitError::Input(format!(
            "PBO compares strategies: give at least 2, got {n}"
        )));
    }
    if s < 2 || s % 2 == 1 || s > 24 {
        return Err(OverfitError::Input(format!(
            "partitions must be even, from 2 to 24, got {s}"
        )));
    }
    let t = columns[0].len();
    if let Some((i, c)) = columns.iter().enumerate().find(|(_, c)| c.len() != t) {
        return Err(OverfitError::Input(format!(
            "strategy {} has {} returns and the first {t}; PBO needs them on the same dates",
            i + 1,
            c.len()
        )));
    }
    if columns.iter().flatten().any(|v| !v.is_finite()) {
        return Err(OverfitError::Input(
            "the returns have a missing or non-finite value".into(),
        ));
    }
    let m = t / s;
    if m < 2 {
        return Err(OverfitError::Input(format!(
            "{t} returns make blocks of {m} over {s} partitions; give at least {} or fewer partitions",
            2 * s
        )));
    }
    let from = t - m * s;
    let blocks = block_sums(columns, s, m, from);
    Ok(cscv(&blocks, n, s, m, from)?)
}

/// CSCV over every choice of half the blocks, in `itertools.combinations`
/// order (lexicographic), keeping the in-sample sums of each prefix of the
/// choice so that moving to the next choice re-adds only the blocks after
/// the one that changed. Strategies are compared by the signed square of
/// their Sharpe, m·|m|/σ², which orders them as the Sharpe does without a
/// square root; the winner's own Sharpe is then computed in full.
///
/// Up to C(24, 12) = 2.7 million choices: the thread's interrupt is read
/// every 64 (docs §2.4).
fn cscv(
    b: &Blocks,
    n: usize,
    s: usize,
    m: usize,
    from: usize,
) -> Result<Pbo, crate::research::Interrupted> {
    let k = s / 2;
    let (tot_sum, tot_sq) = totals(b, n, s);
    let count = (k * m) as f64;
    let var_of = |sum: f64, sq: f64| (sq - sum * sum / count) / (count - 1.0);
    let mut c: Vec<usize> = (0..k).collect();
    // pre[i]: the sums over blocks c[0..=i], sums then squares (2n wide).
    let mut pre = vec![0.0; k * 2 * n];
    let add = |pre: &mut [f64], i: usize, blk: usize| {
        let (lo, hi) = pre.split_at_mut(i * 2 * n);
        let row = &mut hi[..2 * n];
        let (a, q) = (
            &b.sum[blk * n..(blk + 1) * n],
            &b.sumsq[blk * n..(blk + 1) * n],
        );
        let prev = if i == 0 {
            None
        } else {
            Some(&lo[(i - 1) * 2 * n..])
        };
        for j in 0..n {
            let (ps, pq) = prev.map_or((0.0, 0.0), |p| (p[j], p[n + j]));
            row[j] = ps + a[j];
            row[n + j] = pq + q[j];
        }
    };
    for (i, blk) in c.iter().enumerate() {
        add(&mut pre, i, *blk);
    }
    let mut logits = Vec::new();
    let (mut losses, mut pairs) = (0usize, Vec::new());
    // Each strategy's signed square as a fraction m·|m| / (n−1)σ² (the
    // common n − 1 dropped): compared by cross-multiplying, no division.
    let (mut num, mut den) = (vec![0.0; n], vec![0.0; n]);
    let inv = 1.0 / count;
    loop {
        if logits.len() % 64 == 0 {
            crate::research::checkpoint()?;
        }
        let last = &pre[(k - 1) * 2 * n..k * 2 * n];
        let (is_sum, is_sq) = last.split_at(n);
        let (mut best, mut bn, mut bd) = (0usize, f64::NEG_INFINITY, 1.0);
        for j in 0..n {
            let (sm, sq) = (is_sum[j], is_sq[j]);
            let mean = b.shift[j] + sm * inv;
            let (a, d) = (mean * mean.abs(), sq - sm * sm * inv);
            if a * bd > bn * d {
                (best, bn, bd) = (j, a, d);
            }
            let (os, oq) = (tot_sum[j] - sm, tot_sq[j] - sq);
            let mean = b.shift[j] + os * inv;
            num[j] = mean * mean.abs();
            den[j] = oq - os * os * inv;
        }
        let (wn, wd) = (num[best], den[best]);
        let (mut below, mut ties) = (0usize, 0usize);
        for j in 0..n {
            let (l, r) = (num[j] * wd, wn * den[j]);
            below += usize::from(l < r);
            ties += usize::from(l == r);
        }
        let omega = (1.0 + below as f64 + ties.saturating_sub(1) as f64 / 2.0) / (n as f64 + 1.0);
        logits.push((omega / (1.0 - omega)).ln());
        let sharpe =
            |sum: f64, sq: f64, j: usize| (b.shift[j] + sum / count) / var_of(sum, sq).sqrt();
        let j = best;
        let oos = sharpe(tot_sum[j] - is_sum[j], tot_sq[j] - is_sq[j], j);
        losses += usize::from(oos < 0.0);
        pairs.push((sharpe(is_sum[j], is_sq[j], j), oos));
        // The next choice: the rightmost index that can move, then the
        // ones after it packed behind; their prefix sums again.
        let Some(i) = (0..k).rev().find(|&i| c[i] < s - k + i) else {
            break;
        };
        c[i] += 1;
        for t in i + 1..k {
            c[t] = c[t - 1] + 1;
        }
        for (t, blk) in c.iter().enumerate().skip(i) {
            add(&mut pre, t, *blk);
        }
    }
    let combos = logits.len();
    Ok(Pbo {
        pbo: logits.iter().filter(|l| **l <= 0.0).count() as f64 / combos as f64,
        partitions: s,
        combinations: combos,
        rows: m * s,
        rows_dropped: from,
        logits,
        prob_oos_loss: losses as f64 / combos as f64,
        degradation_slope: slope(&pairs),
    })
}

fn totals(b: &Blocks, n: usize, s: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut a, mut q) = (vec![0.0; n], vec![0.0; n]);
    for blk in 0..s {
        for j in 0..n {
            a[j] += b.sum[blk * n + j];
            q[j] += b.sumsq[blk * n + j];
        }
    }
    (a, q)
}

/// Least-squares slope of y on x.
fn slope(p: &[(f64, f64)]) -> f64 {
    let n = p.len() as f64;
    let mx = p.iter().map(|v| v.0).sum::<f64>() / n;
    let my = p.iter().map(|v| v.1).sum::<f64>() / n;
    let sxy: f64 = p.iter().map(|v| (v.0 - mx) * (v.1 - my)).sum();
    let sxx: f64 = p.iter().map(|v| (v.0 - mx) * (v.0 - mx)).sum();
    sxy / sxx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::research::seeded::SplitMix64;

    /// The 2014 paper's worked example (its section on a numerical
    /// example): N = 100 trials whose annualised Sharpe ratios have
    /// variance 1/2, the best with an annualised Sharpe of 2.5 over five
    /// years of daily returns (T = 1,250, 250 a year), skewness −3 and
    /// kurtosis 10. Per period: V = 0.5/250, ŜR = 2.5/√250. By the
    /// formulas (SR₀ eq., then PSR at SR₀) SR₀ ≈ 0.1132 and DSR ≈ 0.9004;
    /// the test holds our functions to the formulas evaluated step by step
    /// (1e-12) and to those rounded figures.
    #[test]
    fn the_deflated_sharpe_papers_example() {
        let m = SharpeMoments {
            n: 1250,
            mean: 0.0,
            std: 1.0,
            sharpe: 2.5 / 250f64.sqrt(),
            skewness: -3.0,
            kurtosis: 10.0,
        };
        let v: f64 = 0.5 / 250.0;
        let z1 = norm_ppf(1.0 - 1.0 / 100.0);
        let z2 = norm_ppf(1.0 - 1.0 / (100.0 * std::f64::consts::E));
        let sr0 = v.sqrt() * ((1.0 - EULER_GAMMA) * z1 + EULER_GAMMA * z2);
        assert!((expected_max_sharpe(v, 100, 0.0) - sr0).abs() < 1e-12);
        assert!((sr0 - 0.1132).abs() < 5e-5, "{sr0}");
        let sr = m.sharpe;
        let want =
            norm_cdf((sr - sr0) * 1249f64.sqrt() / (1.0 + 3.0 * sr + 9.0 / 4.0 * sr * sr).sqrt());
        let dsr = psr(&m, expected_max_sharpe(v, 100, 0.0));
        assert!((dsr - want).abs() < 1e-12);
        assert!((dsr - 0.9004).abs() < 5e-4, "{dsr}");
    }

    #[test]
    fn min_track_record_is_where_psr_reaches_the_confidence() {
        let m = SharpeMoments {
            n: 500,
            mean: 0.0,
            std: 1.0,
            sharpe: 0.08,
            skewness: -0.5,
            kurtosis: 5.0,
        };
        let mtrl = min_track_record(&m, 0.0, 0.95).unwrap();
        // PSR at n = MinTRL is exactly the confidence.
        let at = SharpeMoments { n: 0, ..m };
        let z = (at.sharpe) * (mtrl - 1.0).sqrt() / at.dispersion().sqrt();
        assert!((norm_cdf(z) - 0.95).abs() < 1e-12);
        assert!(min_track_record(&m, 0.1, 0.95).is_none());
        assert_eq!(expected_max_sharpe(0.01, 1, 0.02), 0.02);
    }

    fn noise(t: usize, n: usize, seed: u64, edge: Option<(usize, f64)>) -> Vec<Vec<f64>> {
        let mut rng = SplitMix64::new(seed);
        (0..n)
            .map(|j| {
                let mu = match edge {
                    Some((k, mu)) if k == j => mu,
                    _ => 0.0,
                };
                (0..t).map(|_| mu + 0.01 * rng.normal()).collect()
            })
            .collect()
    }

    /// An interrupt fired before or during CSCV's 2.7 million choices
    /// stops it promptly with `Interrupted` (docs §2.4).
    #[test]
    fn an_interrupted_pbo_stops_promptly() {
        let cols = noise(2400, 40, 3, None);
        let fired = crate::research::Interrupt::new();
        fired.interrupt();
        let e = fired.within(|| pbo_cscv(&cols, 24)).unwrap_err();
        assert_eq!(e, OverfitError::Interrupted(crate::research::Interrupted));
        let later = crate::research::Interrupt::new();
        let firing = later.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            firing.interrupt();
            std::time::Instant::now()
        });
        let r = later.within(|| pbo_cscv(&cols, 24));
        let fired_at = t.join().unwrap();
        assert!(matches!(r, Err(OverfitError::Interrupted(_))), "{r:?}");
        assert!(fired_at.elapsed() < std::time::Duration::from_millis(500));
    }

    /// A planted edge: the in-sample winner stays on top out of sample,
    /// PBO ≈ 0 (noise averages one half over seeds:
    /// tests/engine/factor_goldens.rs).
    #[test]
    fn pbo_is_near_zero_with_an_edge() {
        let cols = noise(1000, 50, 11, None);
        let p = pbo_cscv(&cols, 16).unwrap();
        assert_eq!(p.combinations, 12_870);
        assert_eq!((p.rows, p.rows_dropped), (992, 8));
        assert!(p.pbo > 0.0 && p.pbo < 1.0);
        let cols = noise(1000, 50, 11, Some((7, 0.002)));
        let p = pbo_cscv(&cols, 16).unwrap();
        assert!(p.pbo < 0.05, "{}", p.pbo);
    }

    #[test]
    fn pbo_input_errors() {
        let e = pbo_cscv(&[vec![0.0; 10]], 16).unwrap_err();
        assert!(e.to_string().contains("at least 2"), "{e}");
        let e = pbo_cscv(&[vec![0.0; 10], vec![0.0; 10]], 3).unwrap_err();
        assert!(e.to_string().contains("even"), "{e}");
        let e = pbo_cscv(&[vec![0.0; 10], vec![0.0; 10]], 16).unwrap_err();
        assert!(e.to_string().contains("at least 32"), "{e}");
        let e = SharpeMoments::of(&[0.01; 5]).unwrap_err();
        assert!(e.to_string().contains("constant"), "{e}");
        // 0.001 repeated has a deviation of rounding noise, not 0: its
        // Sharpe was 1.5e15 and survived any deflation.
        let e = SharpeMoments::of(&[0.001; 400]).unwrap_err();
        assert!(e.to_string().contains("constant"), "{e}");
        let mut near = vec![0.001; 400];
        near[7] = 0.0010001;
        assert!(SharpeMoments::of(&near).is_ok(), "a real, small deviation");
    }
}
