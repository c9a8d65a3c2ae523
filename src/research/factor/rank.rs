//! Ranks with ties averaged and Spearman's rank correlation (docs §17.1),
//! as scipy computes them: `rankdata(method="average")` (1-based ranks, a
//! tie shares the mean of the ranks it spans) and `spearmanr`, Pearson's
//! correlation of the two rank vectors (`np.corrcoef`: centred cross
//! product over the square roots of the centred sums of squares).
//!
//! The buffers are the caller's, so a per-date loop over a few thousand
//! cross-sections allocates nothing.

/// Reusable buffers for [`spearman_into`].
#[derive(Clone, Debug, Default)]
pub struct RankScratch {
    pairs: Vec<(f64, u32)>,
    ra: Vec<f64>,
    rb: Vec<f64>,
}

/// Average ranks (1-based) of finite `x` into `out`: (value, place) pairs
/// sorted together (no indirection), then each run of equal values given
/// the mean of the ranks it spans.
pub(crate) fn rank_average(x: &[f64], pairs: &mut Vec<(f64, u32)>, out: &mut Vec<f64>) {
    let n = x.len();
    pairs.clear();
    pairs.extend(x.iter().enumerate().map(|(i, v)| (*v, i as u32)));
    pairs.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    out.clear();
    out.resize(n, 0.0);
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        // −0 and +0 sort apart but are equal: one run.
        while j < n && pairs[j].0 == pairs[i].0 {
            j += 1;
        }
        // Ranks i+1 ..= j share their mean.
        let r = (i + 1 + j) as f64 / 2.0;
        for p in &pairs[i..j] {
            out[p.1 as usize] = r;
        }
        i = j;
    }
}

/// Average ranks of values already in ascending order (ties adjacent).
pub(crate) fn rank_sorted(x: &[f64], out: &mut Vec<f64>) {
    let n = x.len();
    out.clear();
    out.resize(n, 0.0);
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && x[j] == x[i] {
            j += 1;
        }
        let r = (i + 1 + j) as f64 / 2.0;
        out[i..j].iter_mut().for_each(|v| *v = r);
        i = j;
    }
}

/// Spearman's correlation of `a`, already ascending, with `b`.
pub(crate) fn spearman_sorted_a(a: &[f64], b: &[f64], s: &mut RankScratch) -> f64 {
    rank_sorted(a, &mut s.ra);
    rank_average(b, &mut s.pairs, &mut s.rb);
    pearson(&s.ra, &s.rb)
}

/// Pearson's correlation as `np.corrcoef` forms it; NaN when either side
/// is constant or fewer than two pairs are given.
pub(crate) fn pearson(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    if n < 2 {
        return f64::NAN;
    }
    let ma = a[..n].iter().sum::<f64>() / n as f64;
    let mb = b[..n].iter().sum::<f64>() / n as f64;
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a[..n].iter().zip(&b[..n]) {
        let (dx, dy) = (x - ma, y - mb);
        sab += dx * dy;
        saa += dx * dx;
        sbb += dy * dy;
    }
    if saa <= 0.0 || sbb <= 0.0 {
        return f64::NAN;
    }
    // np.corrcoef divides the covariance (÷ n−1) by each standard
    // deviation in turn, then clips to [−1, 1].
    let d = (n - 1) as f64;
    let r = (sab / d) / (saa / d).sqrt() / (sbb / d).sqrt();
    r.clamp(-1.0, 1.0)
}

/// Spearman's rank correlation of paired finite values.
pub fn spearman_into(a: &[f64], b: &[f64], s: &mut RankScratch) -> f64 {
    rank_average(a, &mut s.pairs, &mut s.ra);
    rank_average(b, &mut s.pairs, &mut s.rb);
    pearson(&s.ra, &s.rb)
}

/// Spearman's rank correlation (allocating; for tests and one-offs).
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    spearman_into(a, b, &mut RankScratch::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_share_their_mean_rank() {
        let (mut o, mut r) = (Vec::new(), Vec::new());
        rank_average(&[3.0, 1.0, 3.0, 2.0, 3.0], &mut o, &mut r);
        assert_eq!(r, vec![4.0, 1.0, 4.0, 2.0, 4.0]);
        rank_average(&[0.0, -0.0, 1.0], &mut o, &mut r);
        assert_eq!(r, vec![1.5, 1.5, 3.0]);
        rank_average(&[], &mut o, &mut r);
        assert!(r.is_empty());
        rank_sorted(&[1.0, 2.0, 2.0, 5.0], &mut r);
        assert_eq!(r, vec![1.0, 2.5, 2.5, 4.0]);
    }

    #[test]
    fn spearman_of_monotone_and_constant_series() {
        let a = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(spearman(&a, &[10.0, 20.0, 25.0, 100.0]), 1.0);
        assert_eq!(spearman(&a, &[4.0, 3.0, 2.0, 1.0]), -1.0);
        assert!(spearman(&a, &[1.0; 4]).is_nan());
        assert!(spearman(&a[..1], &a[..1]).is_nan());
        // Ranks (1,2,3,4) against (2,1,4,3): 1 − 6·Σd²/(n(n²−1)) = 0.6.
        assert!((spearman(&a, &[2.0, 1.0, 4.0, 3.0]) - 0.6).abs() < 1e-15);
    }
}
