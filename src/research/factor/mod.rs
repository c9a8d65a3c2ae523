//! Factor research (docs §17): the information coefficient of a
//! cross-sectional factor ([`factor_ic`]) and time-series regressions with
//! Newey–West standard errors ([`regression`]).
//!
//! A factor lives on a [`Panel`]: dates × symbols of factor values and
//! closes, on the union of the symbols' trading dates. The factor on a date
//! uses data up to that date only (an indicator computed on each symbol's
//! own history, warm from before the range, docs §7.4.1); the forward
//! return over h days starts at that date's close, `close[t+h] / close[t]
//! − 1`, so nothing the factor sees comes from the return it is scored
//! against (docs §17.1.2; a test shifts the returns and sees the IC go).

pub mod alpha101;
pub mod expr;
pub mod rank;
pub mod record;
pub mod regression;
pub mod screen;
pub mod screen_cv;

use chrono::NaiveDate;

use super::data::Bars;
use super::indicators::IndicatorSpec;
use rank::{RankScratch, spearman_sorted_a};

/// Why a factor study cannot run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FactorError {
    #[error("{0}")]
    Input(String),
    #[error("too few dates to score: {0}; widen start..end, add symbols, or shorten the horizon")]
    TooFew(String),
    #[error(transparent)]
    Interrupted(#[from] crate::research::Interrupted),
}

/// Factor values and closes of several symbols on common dates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Panel {
    /// Every date any symbol traded, ascending.
    pub dates: Vec<NaiveDate>,
    pub symbols: Vec<String>,
    /// Row-major: symbol `j` on date `i` at `i * symbols.len() + j`; NaN
    /// where there is no value (warm-up, no bar).
    pub factor: Vec<f64>,
    pub close: Vec<f64>,
}

/// One symbol's columns before alignment (already cut to the range).
pub(crate) struct SymbolColumns<'a> {
    pub symbol: &'a str,
    pub dates: &'a [NaiveDate],
    pub close: &'a [f64],
    pub factor: &'a [f64],
}

impl Panel {
    /// Aligns symbols on the union of their dates (NaN where a symbol has
    /// no bar): a missing bar never borrows a neighbour's price.
    pub(crate) fn align(series: &[SymbolColumns<'_>]) -> Result<Panel, FactorError> {
        for s in series {
            if s.close.len() != s.dates.len() || s.factor.len() != s.dates.len() {
                return Err(FactorError::Input(format!(
                    "{}: {} dates, {} closes and {} factor values; they must be as many",
                    s.symbol,
                    s.dates.len(),
                    s.close.len(),
                    s.factor.len()
                )));
            }
        }
        let mut dates: Vec<NaiveDate> = series
            .iter()
            .flat_map(|s| s.dates.iter().copied())
            .collect();
        dates.sort_unstable();
        dates.dedup();
        let (t, n) = (dates.len(), series.len());
        let mut factor = vec![f64::NAN; t * n];
        let mut close = vec![f64::NAN; t * n];
        for (j, s) in series.iter().enumerate() {
            let mut i = 0;
            for (k, d) in s.dates.iter().enumerate() {
                while i < t && dates[i] < *d {
                    i += 1;
                }
                if i < t && dates[i] == *d {
                    factor[i * n + j] = s.factor[k];
                    close[i * n + j] = s.close[k];
                }
            }
        }
        Ok(Panel {
            dates,
            symbols: series.iter().map(|s| s.symbol.to_string()).collect(),
            factor,
            close,
        })
    }

    fn width(&self) -> usize {
        self.symbols.len()
    }

    fn rows(&self) -> usize {
        self.dates.len()
    }
}

/// The panel of an indicator factor: the indicator's first column computed
/// on each symbol's bars as loaded (warm-up history included, docs
/// §7.4.1), then cut to `[start, end]` and aligned.
pub fn indicator_panel(
    spec: &IndicatorSpec,
    series: &[(&str, &Bars)],
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
) -> Result<Panel, FactorError> {
    if let Some(other) = spec.needs_other() {
        return Err(FactorError::Input(format!(
            "a factor reads one symbol's prices at a time; {} needs another ({other})",
            spec.name()
        )));
    }
    let mut values = Vec::with_capacity(series.len());
    for (sym, b) in series {
        let cols = spec
            .compute(&b.high, &b.low, &b.close, None)
            .map_err(|e| FactorError::Input(format!("{sym}: {e}")))?;
        let v = cols
            .into_iter()
            .next()
            .map(|c| c.values)
            .unwrap_or_default();
        let lo = start.map_or(0, |s| b.dates.partition_point(|d| *d < s));
        let hi = end.map_or(b.len(), |e| b.dates.partition_point(|d| *d <= e));
        values.push((lo, hi.max(lo), v));
    }
    let cols: Vec<SymbolColumns<'_>> = series
        .iter()
        .zip(&values)
        .map(|((sym, b), (lo, hi, v))| SymbolColumns {
            symbol: sym,
            dates: &b.dates[*lo..*hi],
            close: &b.close[*lo..*hi],
            factor: v.get(*lo..*hi).unwrap_or(&[]),
        })
        .collect();
    Panel::align(&cols)
}

/// What [`factor_ic`] scores.
#[derive(Clone, Debug, PartialEq)]
pub struct IcOptions {
    /// Forward horizons in trading days (rows of the panel).
    pub horizons: Vec<usize>,
    /// Buckets of the cross-section by factor value (5: quintiles).
    pub quantiles: usize,
    /// Fewest names with both a factor value and a forward return for a
    /// date to be scored (at least `quantiles` and 3).
    pub min_names: usize,
}

impl Default for IcOptions {
    fn default() -> Self {
        IcOptions {
            horizons: vec![1, 5, 21],
            quantiles: 5,
            min_names: 5,
        }
    }
}

/// The IC study of one horizon.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HorizonIc {
    pub horizon: usize,
    /// The panel rows scored, their IC and the names in each.
    pub rows: Vec<usize>,
    pub ic: Vec<f64>,
    pub names: Vec<usize>,
    pub ic_mean: f64,
    /// Sample standard deviation (ddof 1).
    pub ic_std: f64,
    /// ic_mean / ic_std (per date, not annualised).
    pub ic_ir: f64,
    /// ic_mean / (ic_std / √n): the overlapping h-day returns make it
    /// too large for h > 1; `t_stat_nw` accounts for that.
    pub t_stat: f64,
    /// ic_mean over its Newey–West standard error with h − 1 lags.
    pub t_stat_nw: f64,
    /// Share of scored dates with IC > 0.
    pub hit_rate: f64,
    /// Dates with a factor value and a forward return that were not scored
    /// (too few names, or a constant side).
    pub skipped: usize,
    /// Mean h-day forward return by quantile, lowest factor first: the
    /// equal-weight mean within a bucket on a date, averaged over dates.
    pub quantile_returns: Vec<f64>,
    /// Mean over dates of (top bucket − bottom bucket).
    pub spread: f64,
    /// Mean share of the top bucket's names that were not in it h rows
    /// earlier (the turnover of rebalancing every h days).
    pub top_turnover: f64,
}

/// Scores `panel`'s factor against forward returns over each horizon.
pub fn factor_ic(panel: &Panel, o: &IcOptions) -> Result<Vec<HorizonIc>, FactorError> {
    check_options(panel, o)?;
    let sorted = sort_rows(panel, o.quantiles);
    o.horizons
        .iter()
        .map(|&h| score_horizon(panel, &sorted, o, h))
        .collect()
}

fn check_options(panel: &Panel, o: &IcOptions) -> Result<(), FactorError> {
    let (t, n) = (panel.rows(), panel.width());
    if panel.factor.len() != t * n || panel.close.len() != t * n {
        return Err(FactorError::Input(
            "the panel's columns do not match its dates and symbols".into(),
        ));
    }
    if n < 3 {
        return Err(FactorError::Input(format!(
            "a cross-sectional IC needs at least 3 symbols, got {n}"
        )));
    }
    if !(2..=20).contains(&o.quantiles) {
        return Err(FactorError::Input(format!(
            "quantiles must be 2 to 20, got {}",
            o.quantiles
        )));
    }
    if o.horizons.is_empty() || o.horizons.iter().any(|&h| h == 0 || h >= t) {
        return Err(FactorError::Input(format!(
            "forward_days must be 1 or more and shorter than the {t} dates, got {:?}",
            o.horizons
        )));
    }
    Ok(())
}

/// No bucket.
const NONE: u8 = u8::MAX;

/// Each date's names with a factor value in ascending order of it (ties in
/// symbol order), and each (date, symbol)'s bucket: the i-th of m goes to
/// bucket ⌊i·q/m⌋; dates with fewer than q values get none.
struct Sorted {
    buckets: Vec<u8>,
    /// Row r's names are `order[start[r]..start[r + 1]]`.
    order: Vec<u32>,
    start: Vec<usize>,
}

fn sort_rows(panel: &Panel, q: usize) -> Sorted {
    let n = panel.width();
    let mut buckets = vec![NONE; panel.factor.len()];
    let mut order: Vec<u32> = Vec::with_capacity(panel.factor.len());
    let mut start = Vec::with_capacity(panel.rows() + 1);
    let mut pairs: Vec<(f64, u32)> = Vec::with_capacity(n);
    for (row, f) in panel.factor.chunks_exact(n).enumerate() {
        start.push(order.len());
        pairs.clear();
        pairs.extend(
            (0..n)
                .filter(|&j| f[j].is_finite())
                .map(|j| (f[j], j as u32)),
        );
        // Stable: equal values (−0 and +0 too) keep the symbols' order.
        pairs.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
        order.extend(pairs.iter().map(|p| p.1));
        let m = pairs.len();
        if m < q {
            continue;
        }
        for (i, p) in pairs.iter().enumerate() {
            buckets[row * n + p.1 as usize] = (i * q / m) as u8;
        }
    }
    start.push(order.len());
    Sorted {
        buckets,
        order,
        start,
    }
}

/// Per-date sums of one horizon, reused across dates.
struct Scratch {
    fwd: Vec<f64>,
    fa: Vec<f64>,
    fb: Vec<f64>,
    rank: RankScratch,
    bsum: Vec<f64>,
    bcnt: Vec<usize>,
}

/// Running sums of the quantile returns and the spread over dates.
struct QuantileSums {
    sum: Vec<f64>,
    count: Vec<usize>,
    spread_sum: f64,
    spread_n: usize,
}

impl QuantileSums {
    fn add(&mut self, bsum: &[f64], bcnt: &[usize]) {
        let q = bsum.len();
        for k in 0..q {
            if bcnt[k] > 0 {
                self.sum[k] += bsum[k] / bcnt[k] as f64;
                self.count[k] += 1;
            }
        }
        if bcnt[0] > 0 && bcnt[q - 1] > 0 {
            self.spread_sum += bsum[q - 1] / bcnt[q - 1] as f64 - bsum[0] / bcnt[0] as f64;
            self.spread_n += 1;
        }
    }
}

/// One date's IC (NaN when it cannot be scored), filling `s.bsum`/`s.bcnt`.
fn score_row(
    panel: &Panel,
    sorted: &Sorted,
    row: usize,
    h: usize,
    need: usize,
    s: &mut Scratch,
) -> f64 {
    let n = panel.width();
    let f = &panel.factor[row * n..(row + 1) * n];
    let b = &sorted.buckets[row * n..(row + 1) * n];
    s.fa.clear();
    s.fb.clear();
    s.bsum.iter_mut().for_each(|x| *x = 0.0);
    s.bcnt.iter_mut().for_each(|x| *x = 0);
    for (j, bj) in b.iter().enumerate() {
        let r = forward(panel, row, j, h);
        s.fwd[j] = r;
        if r.is_finite() && *bj != NONE {
            s.bsum[*bj as usize] += r;
            s.bcnt[*bj as usize] += 1;
        }
    }
    // The names in factor order, so the factor's ranks need no sort.
    for &j in &sorted.order[sorted.start[row]..sorted.start[row + 1]] {
        let r = s.fwd[j as usize];
        if r.is_finite() {
            s.fa.push(f[j as usize]);
            s.fb.push(r);
        }
    }
    if s.fa.len() >= need {
        spearman_sorted_a(&s.fa, &s.fb, &mut s.rank)
    } else {
        f64::NAN
    }
}

fn score_horizon(
    panel: &Panel,
    sorted: &Sorted,
    o: &IcOptions,
    h: usize,
) -> Result<HorizonIc, FactorError> {
    let (t, n, q) = (panel.rows(), panel.width(), o.quantiles);
    let need = o.min_names.max(q).max(3);
    let mut s = Scratch {
        fwd: vec![f64::NAN; n],
        fa: Vec::with_capacity(n),
        fb: Vec::with_capacity(n),
        rank: RankScratch::default(),
        bsum: vec![0.0; q],
        bcnt: vec![0; q],
    };
    let mut out = HorizonIc {
        horizon: h,
        ..HorizonIc::default()
    };
    let mut sums = QuantileSums {
        sum: vec![0.0; q],
        count: vec![0; q],
        spread_sum: 0.0,
        spread_n: 0,
    };
    for row in 0..t - h {
        // A date ranks every name: the interrupt is read once a date (§2.4).
        crate::research::checkpoint()?;
        // A date without any factor value (an inline factor's off days) is
        // not a date of the study.
        if sorted.start[row] == sorted.start[row + 1] {
            continue;
        }
        let ic = score_row(panel, sorted, row, h, need, &mut s);
        if !ic.is_finite() {
            out.skipped += 1;
            continue;
        }
        out.rows.push(row);
        out.ic.push(ic);
        out.names.push(s.fa.len());
        sums.add(&s.bsum, &s.bcnt);
    }
    if out.ic.len() < 2 {
        return Err(FactorError::TooFew(format!(
            "{} date(s) had at least {need} names with a factor value and a {h}-day forward return",
            out.ic.len()
        )));
    }
    summarise(&mut out);
    out.quantile_returns = sums
        .sum
        .iter()
        .zip(&sums.count)
        .map(|(s, c)| if *c > 0 { s / *c as f64 } else { f64::NAN })
        .collect();
    out.spread = if sums.spread_n > 0 {
        sums.spread_sum / sums.spread_n as f64
    } else {
        f64::NAN
    };
    out.top_turnover = top_turnover(&sorted.buckets, n, t, h, (q - 1) as u8);
    Ok(out)
}

/// `close[row+h] / close[row] − 1` of symbol `j` (NaN when either is
/// missing).
#[inline]
fn forward(panel: &Panel, row: usize, j: usize, h: usize) -> f64 {
    let n = panel.width();
    let (a, b) = (panel.close[row * n + j], panel.close[(row + h) * n + j]);
    if a > 0.0 && b.is_finite() {
        b / a - 1.0
    } else {
        f64::NAN
    }
}

/// Mean, standard deviation, IR, the two t statistics and the hit rate.
fn summarise(o: &mut HorizonIc) {
    let ic = &o.ic;
    let n = ic.len() as f64;
    o.ic_mean = crate::research::stats::mean(ic);
    o.ic_std = crate::research::stats::std_dev(ic, 1);
    o.ic_ir = o.ic_mean / o.ic_std;
    o.t_stat = o.ic_mean / (o.ic_std / n.sqrt());
    o.hit_rate = ic.iter().filter(|v| **v > 0.0).count() as f64 / n;
    let lags = o.horizon.saturating_sub(1);
    let var = newey_west_mean_variance(ic, o.ic_mean, lags);
    o.t_stat_nw = o.ic_mean / var.sqrt();
}

/// The Newey–West variance of a series' mean with Bartlett weights
/// 1 − l/(L+1): S / n², S = Σe² + 2 Σ_l w_l Σ_t e_t e_{t−l} (an OLS on a
/// constant, as statsmodels' HAC without the small-sample correction).
pub(crate) fn newey_west_mean_variance(x: &[f64], mean: f64, lags: usize) -> f64 {
    let n = x.len();
    let e: Vec<f64> = x.iter().map(|v| v - mean).collect();
    let mut s: f64 = e.iter().map(|v| v * v).sum();
    for l in 1..=lags.min(n.saturating_sub(1)) {
        let w = 1.0 - l as f64 / (lags as f64 + 1.0);
        let c: f64 = e[l..].iter().zip(&e[..n - l]).map(|(a, b)| a * b).sum();
        s += 2.0 * w * c;
    }
    s / (n as f64 * n as f64)
}

/// Mean share of the top bucket's names new since h rows before.
fn top_turnover(buckets: &[u8], n: usize, t: usize, h: usize, top: u8) -> f64 {
    let (mut sum, mut count) = (0.0, 0usize);
    for row in h..t {
        let now = &buckets[row * n..(row + 1) * n];
        let before = &buckets[(row - h) * n..(row - h + 1) * n];
        let size = now.iter().filter(|b| **b == top).count();
        if size == 0 || !before.contains(&top) {
            continue;
        }
        let new = now
            .iter()
            .zip(before)
            .filter(|(a, b)| **a == top && **b != top)
            .count();
        sum += new as f64 / size as f64;
        count += 1;
    }
    if count == 0 {
        f64::NAN
    } else {
        sum / count as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::research::seeded::SplitMix64;

    fn dates(t: usize) -> Vec<NaiveDate> {
        let d0 = NaiveDate::from_ymd_opt(2010, 1, 1).unwrap();
        (0..t).map(|i| d0 + chrono::Days::new(i as u64)).collect()
    }

    /// Random-walk closes for `n` symbols over `t` dates.
    fn walk(t: usize, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        let mut close = vec![0.0; t * n];
        for j in 0..n {
            let mut p = 100.0;
            for i in 0..t {
                p *= 1.0 + 0.04 * (rng.uniform() - 0.5);
                close[i * n + j] = p;
            }
        }
        close
    }

    fn panel(t: usize, n: usize, close: Vec<f64>, factor: Vec<f64>) -> Panel {
        Panel {
            dates: dates(t),
            symbols: (0..n).map(|j| format!("S{j}")).collect(),
            factor,
            close,
        }
    }

    /// The factor that knows the future scores IC = 1; the same numbers
    /// moved h rows later, so that each date sees only the return that
    /// ended on it (data up to t), score about nothing: the forward return
    /// is aligned to start at the factor's date, never before (docs
    /// §17.1.2).
    #[test]
    fn shifting_the_forward_return_into_the_past_collapses_the_ic() {
        let (t, n, h) = (600, 40, 5);
        let close = walk(t, n, 7);
        let mut oracle = vec![f64::NAN; t * n];
        let mut past = vec![f64::NAN; t * n];
        for i in 0..t {
            for j in 0..n {
                if i + h < t {
                    oracle[i * n + j] = close[(i + h) * n + j] / close[i * n + j] - 1.0;
                }
                if i >= h {
                    past[i * n + j] = close[i * n + j] / close[(i - h) * n + j] - 1.0;
                }
            }
        }
        let o = IcOptions {
            horizons: vec![h],
            ..IcOptions::default()
        };
        let leak = factor_ic(&panel(t, n, close.clone(), oracle), &o).unwrap();
        assert!(leak[0].ic.iter().all(|v| (*v - 1.0).abs() < 1e-12));
        assert_eq!(leak[0].hit_rate, 1.0);
        let honest = factor_ic(&panel(t, n, close, past), &o).unwrap();
        let m = honest[0].ic_mean;
        assert!(m.abs() < 0.05, "IC {m} of a past return on a random walk");
        assert!(honest[0].t_stat_nw.abs() < 3.0, "{}", honest[0].t_stat_nw);
    }

    #[test]
    fn buckets_turnover_and_spread_on_a_planted_factor() {
        // Factor = symbol index (constant ranking), returns grow with it.
        let (t, n) = (50, 10);
        let mut close = vec![0.0; t * n];
        for i in 0..t {
            for j in 0..n {
                close[i * n + j] = 100.0 * (1.0 + 0.001 * j as f64).powi(i as i32);
            }
        }
        let factor: Vec<f64> = (0..t * n).map(|k| (k % n) as f64).collect();
        let o = IcOptions {
            horizons: vec![1],
            quantiles: 5,
            min_names: 5,
        };
        let r = &factor_ic(&panel(t, n, close, factor), &o).unwrap()[0];
        assert_eq!(r.ic.len(), t - 1);
        assert!((r.ic_mean - 1.0).abs() < 1e-12);
        assert_eq!(r.top_turnover, 0.0);
        // Bucket k holds symbols 2k, 2k+1: mean daily return 0.001·(2k+0.5).
        for (k, v) in r.quantile_returns.iter().enumerate() {
            assert!(
                (v - 0.001 * (2.0 * k as f64 + 0.5)).abs() < 1e-12,
                "{k}: {v}"
            );
        }
        assert!((r.spread - 0.008).abs() < 1e-12);
    }

    #[test]
    fn errors_say_what_to_change() {
        let p = panel(10, 2, vec![1.0; 20], vec![1.0; 20]);
        let e = factor_ic(&p, &IcOptions::default()).unwrap_err();
        assert!(e.to_string().contains("at least 3 symbols"), "{e}");
        let p = panel(10, 5, vec![1.0; 50], vec![1.0; 50]);
        let e = factor_ic(&p, &IcOptions::default()).unwrap_err();
        assert!(e.to_string().contains("shorter than the 10 dates"), "{e}");
        let o = IcOptions {
            horizons: vec![1],
            ..IcOptions::default()
        };
        // Constant factor: every date's IC is undefined.
        let e = factor_ic(&p, &o).unwrap_err();
        assert!(matches!(e, FactorError::TooFew(_)), "{e}");
    }

    /// Prices after a date change nothing on or before it: the factor
    /// reads data up to t only (docs §17.1.2).
    #[test]
    fn an_indicator_factor_never_reads_the_future() {
        let (t, n) = (400, 4);
        let close = walk(t, n, 3);
        let bars_of = |close: &[f64]| -> Vec<Bars> {
            (0..n)
                .map(|j| {
                    let mut b = Bars::default();
                    for (i, d) in dates(t).iter().enumerate() {
                        let c = close[i * n + j];
                        b.push(*d, c, c, c, c, 0.0);
                    }
                    b
                })
                .collect()
        };
        let spec = IndicatorSpec::Momentum {
            window: 60,
            skip: 5,
        };
        let names = ["A", "B", "C", "D"];
        let cut = 250;
        let mut later = close.clone();
        for v in &mut later[cut * n..] {
            *v *= 3.0;
        }
        let (a, b) = (bars_of(&close), bars_of(&later));
        let pa: Vec<(&str, &Bars)> = names.iter().copied().zip(&a).collect();
        let pb: Vec<(&str, &Bars)> = names.iter().copied().zip(&b).collect();
        let start = Some(dates(t)[100]);
        let (x, y) = (
            indicator_panel(&spec, &pa, start, None).unwrap(),
            indicator_panel(&spec, &pb, start, None).unwrap(),
        );
        // Rows are dates from the 100th: the cut is row 150.
        let row = (cut - 100) * n;
        assert_eq!(x.factor[..row], y.factor[..row]);
        assert!(
            x.factor[..row].iter().all(|v| v.is_finite()),
            "warm from before start"
        );
        assert_ne!(x.factor[row + 5 * n..], y.factor[row + 5 * n..]);
    }

    #[test]
    fn alignment_leaves_gaps_empty() {
        let d = dates(4);
        let p = Panel::align(&[
            SymbolColumns {
                symbol: "A",
                dates: &d,
                close: &[1.0, 2.0, 3.0, 4.0],
                factor: &[0.1, 0.2, 0.3, 0.4],
            },
            SymbolColumns {
                symbol: "B",
                dates: &[d[0], d[2]],
                close: &[5.0, 6.0],
                factor: &[0.5, 0.6],
            },
        ])
        .unwrap();
        assert_eq!(p.dates.len(), 4);
        assert_eq!(p.close[1], 5.0);
        assert!(p.close[3].is_nan() && p.factor[3].is_nan());
        assert_eq!(p.close[5], 6.0);
    }
}
