//! Column kernels of the evaluator (docs §17.7.2): time-series functions on
//! one symbol's column (rows ascending), cross-sectional ones across the
//! symbols of each date. A time-series value at row `i` reads rows
//! `i + 1 − d ..= i` only, and is NaN unless all `d` of them have a value.

use super::ast::{PairFn, TsFn};

/// Buffers reused across dates and nodes, so no kernel allocates per cell.
#[derive(Default)]
pub(super) struct Scratch {
    row: Vec<(f64, usize)>,
    sums: Vec<f64>,
    counts: Vec<usize>,
}

pub(super) fn ts(f: TsFn, x: &[f64], d: usize, out: &mut [f64]) {
    match f {
        TsFn::Delay => shift(x, d, out, |_, old| old),
        TsFn::Delta => shift(x, d, out, |now, old| now - old),
        TsFn::Sum => rolling_sum(x, d, out, false),
        TsFn::Mean => rolling_sum(x, d, out, true),
        TsFn::Product => rolling(x, d, out, |w| w.iter().product()),
        TsFn::Min => rolling(x, d, out, |w| {
            w.iter().fold(f64::INFINITY, |m, v| m.min(*v))
        }),
        TsFn::Max => rolling(x, d, out, |w| {
            w.iter().fold(f64::NEG_INFINITY, |m, v| m.max(*v))
        }),
        TsFn::ArgMin => rolling(x, d, out, |w| arg_extreme(w, |v, best| v < best)),
        TsFn::ArgMax => rolling(x, d, out, |w| arg_extreme(w, |v, best| v > best)),
        TsFn::Rank => rolling(x, d, out, window_rank),
        TsFn::StdDev => rolling(x, d, out, |w| sample_var(w).sqrt()),
        TsFn::DecayLinear => rolling(x, d, out, decay_linear),
    }
}

pub(super) fn pair(f: PairFn, x: &[f64], y: &[f64], d: usize, out: &mut [f64]) {
    match f {
        PairFn::Corr => rolling2(x, y, d, out, corr),
        PairFn::Cov => rolling2(x, y, d, out, cov),
    }
}

/// `f(x[i], x[i − d])`, NaN for the first `d` rows.
fn shift(x: &[f64], d: usize, out: &mut [f64], f: impl Fn(f64, f64) -> f64) {
    for (i, o) in out.iter_mut().enumerate() {
        let old = i.checked_sub(d).and_then(|k| x.get(k));
        *o = match (x.get(i), old) {
            (Some(now), Some(old)) => f(*now, *old),
            _ => f64::NAN,
        };
    }
}

/// `f(window)` where the `d` rows up to `i` all have values, else NaN.
fn rolling(x: &[f64], d: usize, out: &mut [f64], mut f: impl FnMut(&[f64]) -> f64) {
    let mut run = 0usize;
    for (i, o) in out.iter_mut().enumerate() {
        run = if x.get(i).is_some_and(|v| !v.is_nan()) {
            run + 1
        } else {
            0
        };
        *o = if run >= d {
            x.get(i + 1 - d..=i).map_or(f64::NAN, &mut f)
        } else {
            f64::NAN
        };
    }
}

/// [`rolling`] over two columns: both must have values in the window.
fn rolling2(x: &[f64], y: &[f64], d: usize, out: &mut [f64], f: impl Fn(&[f64], &[f64]) -> f64) {
    let mut run = 0usize;
    for (i, o) in out.iter_mut().enumerate() {
        let both = x.get(i).is_some_and(|v| !v.is_nan()) && y.get(i).is_some_and(|v| !v.is_nan());
        run = if both { run + 1 } else { 0 };
        *o = match (
            x.get(i + 1 - d.min(i + 1)..=i),
            y.get(i + 1 - d.min(i + 1)..=i),
        ) {
            (Some(wx), Some(wy)) if run >= d => f(wx, wy),
            _ => f64::NAN,
        };
    }
}

/// A window sum kept by adding today's value and removing the one leaving,
/// each with its own Kahan compensation (as pandas' rolling sum and mean):
/// O(1) a row and within a few ulps of the exact sum, however long the
/// column. A window of one repeated value is that value times the count
/// exactly, so a flat stretch sums without rounding residue.
#[derive(Default)]
struct WindowSum {
    sum: f64,
    add_carry: f64,
    remove_carry: f64,
    count: usize,
    negatives: usize,
    repeats: usize,
    last: f64,
}

impl WindowSum {
    fn add(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        self.count += 1;
        self.negatives += usize::from(v < 0.0);
        let y = v - self.add_carry;
        let t = self.sum + y;
        self.add_carry = (t - self.sum) - y;
        self.sum = t;
        self.repeats = if v == self.last { self.repeats + 1 } else { 1 };
        self.last = v;
    }

    /// Today's value replaces an equal one leaving: only the run of
    /// repeats moves.
    fn repeat(&mut self, v: f64) {
        self.repeats = if v == self.last { self.repeats + 1 } else { 1 };
        self.last = v;
    }

    fn remove(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        self.count = self.count.saturating_sub(1);
        self.negatives = self.negatives.saturating_sub(usize::from(v < 0.0));
        let y = -v - self.remove_carry;
        let t = self.sum + y;
        self.remove_carry = (t - self.sum) - y;
        self.sum = t;
        if self.count == 0 {
            // An empty window (a gap longer than it) starts afresh, leaving
            // no rounding residue behind.
            self.sum = 0.0;
            self.add_carry = 0.0;
            self.remove_carry = 0.0;
        }
    }

    fn total(&self) -> f64 {
        if self.repeats >= self.count {
            self.last * self.count as f64
        } else {
            self.sum
        }
    }

    /// The mean, never of the wrong sign (rounding cannot make a mean of
    /// non-negative values negative).
    fn mean(&self) -> f64 {
        if self.repeats >= self.count {
            return self.last;
        }
        let m = self.sum / self.count as f64;
        if (self.negatives == 0 && m < 0.0) || (self.negatives == self.count && m > 0.0) {
            0.0
        } else {
            m
        }
    }
}

fn rolling_sum(x: &[f64], d: usize, out: &mut [f64], mean: bool) {
    let mut w = WindowSum {
        last: f64::NAN,
        ..WindowSum::default()
    };
    for (i, o) in out.iter_mut().enumerate() {
        let new = x.get(i).copied().unwrap_or(f64::NAN);
        match i.checked_sub(d).and_then(|k| x.get(k)) {
            // The value entering equals the one leaving: the window's sum is
            // unchanged in exact arithmetic, so it stays bit for bit (a
            // remove-then-add would leave rounding residue, and a 2-day
            // correlation of two such sums would read as defined).
            Some(old) if *old == new => w.repeat(new),
            Some(old) => {
                w.remove(*old);
                w.add(new);
            }
            None => w.add(new),
        }
        *o = match (w.count >= d, mean) {
            (false, _) => f64::NAN,
            (true, false) => w.total(),
            (true, true) => w.mean(),
        };
    }
}

/// 1-based position of the first extreme (oldest = 1).
fn arg_extreme(w: &[f64], better: impl Fn(f64, f64) -> bool) -> f64 {
    let mut best = (0usize, f64::NAN);
    for (k, v) in w.iter().enumerate() {
        if k == 0 || better(*v, best.1) {
            best = (k, *v);
        }
    }
    (best.0 + 1) as f64
}

/// Average-tie rank of the last value among the window, over its length.
fn window_rank(w: &[f64]) -> f64 {
    let Some(today) = w.last() else {
        return f64::NAN;
    };
    let (mut below, mut equal) = (0usize, 0usize);
    for v in w {
        below += usize::from(v < today);
        equal += usize::from(v == today);
    }
    (below as f64 + (equal as f64 + 1.0) / 2.0) / w.len() as f64
}

fn all_equal(w: &[f64]) -> bool {
    w.first().is_some_and(|f| w.iter().all(|v| v == f))
}

/// A flat window's mean is its common value exactly: summing then dividing
/// can miss it by an ulp, which would leave a covariance of ±1e-33, not 0.
fn mean(w: &[f64]) -> f64 {
    match w.first() {
        Some(f) if all_equal(w) => *f,
        _ => w.iter().sum::<f64>() / w.len() as f64,
    }
}

/// Sample variance (ddof 1) by two passes, the second corrected by the
/// residual sum; exactly 0 for a flat window.
fn sample_var(w: &[f64]) -> f64 {
    let n = w.len();
    if n < 2 {
        return f64::NAN;
    }
    if all_equal(w) {
        return 0.0;
    }
    let m = mean(w);
    let (mut ss, mut s) = (0.0, 0.0);
    for v in w {
        let e = v - m;
        ss += e * e;
        s += e;
    }
    ((ss - s * s / n as f64) / (n - 1) as f64).max(0.0)
}

/// Weights `d` (today) down to 1 (oldest), normalised to sum 1.
fn decay_linear(w: &[f64]) -> f64 {
    let n = w.len() as f64;
    let mut acc = 0.0;
    for (k, v) in w.iter().enumerate() {
        acc += (k + 1) as f64 * v;
    }
    acc / (n * (n + 1.0) / 2.0)
}

/// Σ(x − x̄)(y − ȳ), Σ(x − x̄)², Σ(y − ȳ)².
fn moments(x: &[f64], y: &[f64]) -> (f64, f64, f64) {
    let (mx, my) = (mean(x), mean(y));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (ex, ey) = (a - mx, b - my);
        sxy += ex * ey;
        sxx += ex * ex;
        syy += ey * ey;
    }
    (sxy, sxx, syy)
}

fn cov(x: &[f64], y: &[f64]) -> f64 {
    if x.len() < 2 {
        return f64::NAN;
    }
    moments(x, y).0 / (x.len() - 1) as f64
}

/// Pearson; NaN when either side is flat.
fn corr(x: &[f64], y: &[f64]) -> f64 {
    if x.len() < 2 || all_equal(x) || all_equal(y) {
        return f64::NAN;
    }
    let (sxy, sxx, syy) = moments(x, y);
    if sxx <= 0.0 || syy <= 0.0 {
        return f64::NAN;
    }
    sxy / (sxx.sqrt() * syy.sqrt())
}

/// The row's values (with their symbol) that are not NaN.
fn gather(x: &[f64], rows: usize, i: usize, row: &mut Vec<(f64, usize)>) {
    row.clear();
    let width = x.len() / rows.max(1);
    for j in 0..width {
        if let Some(v) = x.get(j * rows + i)
            && !v.is_nan()
        {
            row.push((*v, j));
        }
    }
}

fn put(out: &mut [f64], rows: usize, i: usize, j: usize, v: f64) {
    if let Some(slot) = out.get_mut(j * rows + i) {
        *slot = v;
    }
}

/// Per date: average-tie rank over the symbols with a value, divided by
/// their count (pandas `rank(pct=True)`); `out` comes NaN-filled.
pub(super) fn cs_rank(x: &[f64], rows: usize, out: &mut [f64], s: &mut Scratch) {
    for i in 0..rows {
        gather(x, rows, i, &mut s.row);
        s.row
            .sort_unstable_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
        let count = s.row.len() as f64;
        let mut k = 0;
        while let Some(&(v, _)) = s.row.get(k) {
            let end = k + s
                .row
                .get(k..)
                .map_or(0, |r| r.iter().take_while(|e| e.0 == v).count());
            // Positions k+1 ..= end share their average.
            let rank = (k + 1 + end) as f64 / 2.0 / count;
            for &(_, j) in s.row.get(k..end).unwrap_or(&[]) {
                put(out, rows, i, j, rank);
            }
            k = end.max(k + 1);
        }
    }
}

/// Per date: `x / Σ|x| · a` over the symbols with a value.
pub(super) fn cs_scale(x: &[f64], rows: usize, a: f64, out: &mut [f64]) {
    let width = x.len() / rows.max(1);
    for i in 0..rows {
        let mut total = 0.0;
        for j in 0..width {
            if let Some(v) = x.get(j * rows + i)
                && !v.is_nan()
            {
                total += v.abs();
            }
        }
        for j in 0..width {
            let v = x.get(j * rows + i).copied().unwrap_or(f64::NAN);
            put(out, rows, i, j, v / total * a);
        }
    }
}

/// Per date: `x` minus the mean of its group's values on that date.
pub(super) fn cs_neutralize(
    x: &[f64],
    rows: usize,
    group_of: &[usize],
    groups: usize,
    out: &mut [f64],
    s: &mut Scratch,
) {
    for i in 0..rows {
        s.sums.clear();
        s.sums.resize(groups, 0.0);
        s.counts.clear();
        s.counts.resize(groups, 0);
        gather(x, rows, i, &mut s.row);
        for &(v, j) in &s.row {
            let g = group_of.get(j).copied().unwrap_or(usize::MAX);
            if let (Some(sum), Some(c)) = (s.sums.get_mut(g), s.counts.get_mut(g)) {
                *sum += v;
                *c += 1;
            }
        }
        for &(v, j) in &s.row {
            let g = group_of.get(j).copied().unwrap_or(usize::MAX);
            if let (Some(sum), Some(c)) = (s.sums.get(g), s.counts.get(g)) {
                put(out, rows, i, j, v - sum / *c as f64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(f: TsFn, x: &[f64], d: usize) -> Vec<f64> {
        let mut out = vec![0.0; x.len()];
        ts(f, x, d, &mut out);
        out
    }

    #[test]
    fn a_huge_value_leaving_the_window_leaves_no_residue_in_the_sum() {
        // Naively, 1e16 + 1 rounds the 1 away and removing 1e16 leaves 1;
        // the compensated sum recovers it.
        let x = [1e16, 1.0, 1.0, 1.0, 0.1, 0.2];
        let got = run(TsFn::Sum, &x, 2);
        assert!(got[0].is_nan());
        assert_eq!(&got[1..4], &[1e16, 2.0, 2.0]);
        assert_eq!(got[5], 0.1 + 0.2);
        assert_eq!(run(TsFn::Mean, &x, 2)[3], 1.0);
    }

    #[test]
    fn a_flat_window_sums_and_varies_exactly() {
        let x = [0.1; 7];
        assert_eq!(run(TsFn::Sum, &x, 3)[6], 0.1 * 3.0);
        assert_eq!(run(TsFn::Mean, &x, 3)[6], 0.1);
        assert_eq!(run(TsFn::StdDev, &x, 3)[6], 0.0);
        let mut out = [0.0; 7];
        pair(
            PairFn::Corr,
            &x,
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
            3,
            &mut out,
        );
        assert!(out[6].is_nan());
    }

    #[test]
    fn a_missing_value_blanks_exactly_the_windows_through_it() {
        let x = [1.0, 2.0, f64::NAN, 4.0, 5.0, 6.0];
        for f in [
            TsFn::Sum,
            TsFn::Product,
            TsFn::Max,
            TsFn::Rank,
            TsFn::DecayLinear,
        ] {
            let got = run(f, &x, 2);
            let blank: Vec<bool> = got.iter().map(|v| v.is_nan()).collect();
            assert_eq!(blank, [true, false, true, true, false, false], "{f:?}");
        }
        assert_eq!(run(TsFn::Sum, &x, 2)[4], 9.0);
    }
}
