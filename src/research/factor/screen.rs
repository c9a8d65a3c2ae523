//! The factor screen (docs §17.8): many factors over one universe, each
//! read as alphalens reads one (IC and rank IC per date, quantile mean
//! forward returns, rank autocorrelation), then compared: the correlation
//! of their rank IC series, a ranking by |rank ICIR|, Holm and
//! Benjamini–Hochberg adjusted p-values across the number screened, and
//! the deflated Sharpe of the best long-short.
//!
//! Conventions follow alphalens-reloaded where it has one (quantiles are
//! pandas' `qcut` of each date's factor values, rank autocorrelation is
//! `factor_rank_autocorrelation`), and §17.1 where it does not (forward
//! return close[t+h] / close[t] − 1 with no filling, the Newey–West t with
//! h − 1 lags). The goldens hold both to the reference (§17.5, §17.8).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use super::rank::{RankScratch, pearson, rank_sorted, spearman_sorted_a};
use super::screen_cv::{RankIcSeries, ScreenSplit, ScreenValidation, SplitError, validate};
use super::{FactorError, Panel, newey_west_mean_variance};
use crate::research::overfitting::{SharpeMoments, expected_max_sharpe, psr};
use crate::research::{Interrupt, Interrupted, checkpoint};

/// Why a screen (or one factor of it) cannot run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ScreenError {
    #[error("{0}")]
    Input(String),
    #[error("too few dates to score: {0}; widen the window, add symbols, or shorten the horizon")]
    TooFew(String),
    #[error(transparent)]
    Interrupted(#[from] Interrupted),
    #[error(transparent)]
    Split(#[from] SplitError),
}

impl From<FactorError> for ScreenError {
    fn from(e: FactorError) -> Self {
        match e {
            FactorError::Input(s) => ScreenError::Input(s),
            FactorError::TooFew(s) => ScreenError::TooFew(s),
            FactorError::Interrupted(i) => ScreenError::Interrupted(i),
        }
    }
}

/// The prices every factor of a screen is scored against: row-major date ×
/// symbol closes as in [`Panel`], NaN where a symbol has no bar.
#[derive(Clone, Copy, Debug)]
pub struct Universe<'a> {
    pub dates: &'a [NaiveDate],
    pub symbols: &'a [String],
    pub close: &'a [f64],
}

impl<'a> Universe<'a> {
    /// The closes of a factor panel.
    pub fn of(panel: &'a Panel) -> Self {
        Universe {
            dates: &panel.dates,
            symbols: &panel.symbols,
            close: &panel.close,
        }
    }
}

/// What a screen computes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScreenOptions {
    /// Forward horizons in trading days (rows of the panel).
    pub horizons: Vec<usize>,
    /// Equal-count buckets per date (pandas `qcut`); 5 is quintiles.
    pub quantiles: usize,
    /// Fewest names for a date to be scored (the IC) or bucketed; the
    /// floor is max(min_names, quantiles, 3).
    pub min_names: usize,
    /// The horizon the ranking, the correlation matrix and the p-values
    /// read (one of `horizons`).
    pub rank_horizon: usize,
    /// Worker threads; 0 is one per core.
    pub threads: usize,
    /// A purged k-fold or CPCV of the rank IC (docs §17.10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<ScreenSplit>,
}

impl Default for ScreenOptions {
    fn default() -> Self {
        ScreenOptions {
            horizons: vec![1, 5, 10, 21],
            quantiles: 5,
            min_names: 5,
            rank_horizon: 1,
            threads: 0,
            split: None,
        }
    }
}

impl ScreenOptions {
    fn need(&self) -> usize {
        self.min_names.max(self.quantiles).max(3)
    }
}

/// Mean, spread and significance of a per-date IC series.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IcStats {
    #[serde(deserialize_with = "nan_null::f64")]
    pub mean: f64,
    /// Sample standard deviation (ddof 1).
    #[serde(deserialize_with = "nan_null::f64")]
    pub std: f64,
    /// mean / std, per date (not annualised).
    #[serde(deserialize_with = "nan_null::f64")]
    pub ir: f64,
    /// The mean over its Newey–West standard error with h − 1 lags.
    #[serde(deserialize_with = "nan_null::f64")]
    pub t_nw: f64,
    /// Two-sided normal p-value of `t_nw`.
    #[serde(deserialize_with = "nan_null::f64")]
    pub p_value: f64,
}

/// One factor at one horizon.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HorizonStats {
    pub horizon: usize,
    /// The scored dates, with each one's IC, rank IC and names.
    pub dates: Vec<NaiveDate>,
    #[serde(deserialize_with = "nan_null::vec")]
    pub ic: Vec<f64>,
    #[serde(deserialize_with = "nan_null::vec")]
    pub rank_ic: Vec<f64>,
    pub names: Vec<usize>,
    /// Pearson's correlation of factor and forward return per date.
    pub ic_stats: IcStats,
    /// Spearman's rank correlation per date.
    pub rank_ic_stats: IcStats,
    /// Mean h-day forward return by quantile, lowest factor first: the
    /// equal-weight mean within a bucket on a date, averaged over the
    /// dates the bucket has a return.
    #[serde(deserialize_with = "nan_null::vec")]
    pub quantile_returns: Vec<f64>,
    /// Top quantile minus bottom quantile per date, averaged over the
    /// dates that have both.
    #[serde(deserialize_with = "nan_null::f64")]
    pub spread: f64,
    pub spread_dates: usize,
    /// Rows of `dates` (for joining factors' series), not serialised.
    #[serde(skip)]
    rows: Vec<usize>,
}

/// A dated series (the long-short returns, the rank autocorrelation).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub dates: Vec<NaiveDate>,
    #[serde(deserialize_with = "nan_null::vec")]
    pub values: Vec<f64>,
}

/// Per date, each quantile's mean forward return (lowest factor first;
/// NaN where the bucket has no return that date): the quantile equity
/// curves' input.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QuantileSeries {
    pub dates: Vec<NaiveDate>,
    /// `returns[q][i]`: quantile q on `dates[i]`.
    #[serde(deserialize_with = "nan_null::matrix")]
    pub returns: Vec<Vec<f64>>,
}

/// Everything the screen says about one factor.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FactorStats {
    /// Share of the panel's symbol-dates with a factor value.
    #[serde(deserialize_with = "nan_null::f64")]
    pub coverage: f64,
    pub horizons: Vec<HorizonStats>,
    /// Mean rank IC at each horizon, in the order of `horizons`.
    #[serde(deserialize_with = "nan_null::vec")]
    pub ic_decay: Vec<f64>,
    /// Per date: Pearson's correlation of the factor's ranks with the
    /// previous date's, over the names with both (alphalens'
    /// `factor_rank_autocorrelation`, lag 1).
    pub rank_autocorrelation: Series,
    #[serde(deserialize_with = "nan_null::f64")]
    pub rank_autocorrelation_mean: f64,
    /// 1 − the mean rank autocorrelation.
    #[serde(deserialize_with = "nan_null::f64")]
    pub turnover: f64,
    /// Top minus bottom quantile's 1-day forward return per date, as the
    /// factor orders names (not yet oriented by its IC's sign).
    pub long_short: Series,
    /// The 1-day quantile returns per date (averaging each quantile's
    /// series gives horizon 1's `quantile_returns`). Absent from records
    /// written before it existed.
    #[serde(default)]
    pub quantile_daily: QuantileSeries,
}

/// One factor's line in a screen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScreenedFactor {
    pub name: String,
    /// `None` when the factor could not be scored (`error` says why).
    pub stats: Option<FactorStats>,
    pub error: Option<String>,
    /// |rank ICIR| at the rank horizon (NaN without stats).
    #[serde(deserialize_with = "nan_null::f64")]
    pub score: f64,
    /// Two-sided p-value of the rank IC's Newey–West t at the rank
    /// horizon (1 for a factor that could not be scored: it was tried).
    #[serde(deserialize_with = "nan_null::f64")]
    pub p_value: f64,
    #[serde(deserialize_with = "nan_null::f64")]
    pub p_holm: f64,
    #[serde(deserialize_with = "nan_null::f64")]
    pub p_bh: f64,
    /// The long-short's per-date Sharpe after orienting it by the sign of
    /// the mean rank IC at the rank horizon (NaN when it has none).
    #[serde(deserialize_with = "nan_null::f64")]
    pub long_short_sharpe: f64,
}

/// The deflated Sharpe of the best long-short (docs §17.3's DSR).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeflatedBest {
    pub best: String,
    /// Per date; ×√252 for the annual figure.
    pub sharpe: f64,
    pub observations: usize,
    /// The number of factors screened.
    pub trials: usize,
    /// Variance of the trials' per-date Sharpes (ddof 1), or the best's
    /// own estimator variance when fewer than two have one.
    pub sharpe_variance: f64,
    pub variance_source: String,
    pub expected_max_sharpe: f64,
    /// PSR against zero.
    pub psr: f64,
    /// PSR against `expected_max_sharpe`.
    pub dsr: f64,
}

/// The screen of many factors.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Screen {
    pub options: ScreenOptions,
    pub factors: Vec<ScreenedFactor>,
    /// Indices into `factors`, best |rank ICIR| first; unscored last.
    pub ranking: Vec<usize>,
    /// Pearson's correlation of the factors' per-date rank IC series at
    /// the rank horizon over their common dates (NaN under 3).
    #[serde(deserialize_with = "nan_null::matrix")]
    pub correlation: Vec<Vec<f64>>,
    pub deflated: Option<DeflatedBest>,
    /// The `split`'s reading (docs §17.10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<ScreenValidation>,
}

/// NaN is written as null (serde_json's way); these read it back.
mod nan_null {
    use serde::{Deserialize, Deserializer};

    pub fn f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }

    pub fn vec<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        let v = Vec::<Option<f64>>::deserialize(d)?;
        Ok(v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
    }

    pub fn matrix<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<f64>>, D::Error> {
        let v = Vec::<Vec<Option<f64>>>::deserialize(d)?;
        Ok(v.into_iter()
            .map(|r| r.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
            .collect())
    }
}

// ------------------------------------------------------------ preparation

/// What every factor of a screen shares: the forward returns of each
/// horizon studied (the options' and 1, for the long-short).
struct Prepared<'a> {
    u: Universe<'a>,
    t: usize,
    n: usize,
    /// The horizons studied: the options' in order, then 1 if missing.
    horizons: Vec<usize>,
    /// How many of `horizons` were asked for (the rest is the extra 1).
    asked: usize,
    /// `fwd[k]`: row-major forward returns over `horizons[k]`.
    fwd: Vec<Vec<f64>>,
    q: usize,
    need: usize,
}

fn check(u: &Universe<'_>, o: &ScreenOptions) -> Result<(usize, usize), ScreenError> {
    let (t, n) = (u.dates.len(), u.symbols.len());
    let cells = t.checked_mul(n);
    if cells != Some(u.close.len()) {
        return Err(ScreenError::Input(format!(
            "{} closes for {t} dates × {n} symbols; the panel must be full (NaN where there is no bar)",
            u.close.len()
        )));
    }
    if n < 3 {
        return Err(ScreenError::Input(format!(
            "a cross-sectional screen needs at least 3 symbols, got {n}"
        )));
    }
    if !(2..=20).contains(&o.quantiles) {
        return Err(ScreenError::Input(format!(
            "quantiles must be 2 to 20, got {}",
            o.quantiles
        )));
    }
    let mut hs = o.horizons.clone();
    hs.sort_unstable();
    hs.dedup();
    if hs.len() != o.horizons.len() || hs.is_empty() || hs.iter().any(|&h| h == 0 || h >= t) {
        return Err(ScreenError::Input(format!(
            "horizons must be distinct, 1 or more and shorter than the {t} dates, got {:?}",
            o.horizons
        )));
    }
    if !o.horizons.contains(&o.rank_horizon) {
        return Err(ScreenError::Input(format!(
            "rank_horizon {} is not one of the horizons {:?}",
            o.rank_horizon, o.horizons
        )));
    }
    Ok((t, n))
}

fn prepare<'a>(u: Universe<'a>, o: &ScreenOptions) -> Result<Prepared<'a>, ScreenError> {
    let (t, n) = check(&u, o)?;
    let mut horizons = o.horizons.clone();
    if !horizons.contains(&1) {
        horizons.push(1);
    }
    let fwd = horizons
        .iter()
        .map(|&h| forward_returns(u.close, t, n, h))
        .collect();
    Ok(Prepared {
        u,
        t,
        n,
        asked: o.horizons.len(),
        horizons,
        fwd,
        q: o.quantiles,
        need: o.need(),
    })
}

/// `close[t+h] / close[t] − 1`, NaN when either close is missing (no
/// filling: a missing bar never borrows a neighbour's price) or the last h
/// rows.
fn forward_returns(close: &[f64], t: usize, n: usize, h: usize) -> Vec<f64> {
    let mut out = vec![f64::NAN; t * n];
    for row in 0..t.saturating_sub(h) {
        let now = &close[row * n..(row + 1) * n];
        let later = &close[(row + h) * n..(row + h + 1) * n];
        let o = &mut out[row * n..(row + 1) * n];
        for ((o, a), b) in o.iter_mut().zip(now).zip(later) {
            if *a > 0.0 && b.is_finite() {
                *o = b / a - 1.0;
            }
        }
    }
    out
}

// ------------------------------------------------------- one factor's dates

/// No bucket.
const NONE: u8 = u8::MAX;

/// One factor's per-date order, ranks and buckets.
struct Sorted {
    /// Row r's names with a value, ascending by it (ties in symbol
    /// order), are `order[start[r]..start[r + 1]]`.
    order: Vec<u32>,
    start: Vec<usize>,
    /// Average-tie rank (1-based) of each (date, symbol); NaN for none.
    ranks: Vec<f64>,
    /// 0-based quantile of each (date, symbol); NONE when the date is not
    /// bucketed.
    buckets: Vec<u8>,
}

fn sort_factor(p: &Prepared<'_>, factor: &[f64]) -> Sorted {
    let (n, q) = (p.n, p.q);
    let fractions = qcut_fractions(q);
    let mut s = Sorted {
        order: Vec::with_capacity(factor.len()),
        start: Vec::with_capacity(p.t + 1),
        ranks: vec![f64::NAN; factor.len()],
        buckets: vec![NONE; factor.len()],
    };
    let (mut pairs, mut xs, mut rk, mut edges) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (row, f) in factor.chunks_exact(n).enumerate() {
        s.start.push(s.order.len());
        pairs.clear();
        pairs.extend(
            (0..n)
                .filter(|&j| f[j].is_finite())
                .map(|j| (f[j], j as u32)),
        );
        pairs.sort_by(|a: &(f64, u32), b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        s.order.extend(pairs.iter().map(|p| p.1));
        xs.clear();
        xs.extend(pairs.iter().map(|p| p.0));
        rank_sorted(&xs, &mut rk);
        let base = row * n;
        for (p, r) in pairs.iter().zip(&rk) {
            s.ranks[base + p.1 as usize] = *r;
        }
        if xs.len() < p.need || !qcut_edges(&xs, &fractions, &mut edges) {
            continue;
        }
        for p in &pairs {
            // At most 19: quantiles are checked to be 2 to 20.
            s.buckets[base + p.1 as usize] = qcut_bucket(&edges, p.0) as u8;
        }
    }
    s.start.push(s.order.len());
    s
}

/// The quantile fractions pandas' `qcut(x, q)` asks for: numpy's
/// `linspace(0, 1, q + 1)` (k · (1/q), the last exactly 1), each nudged
/// up one ulp where q · it is not k.
fn qcut_fractions(q: usize) -> Vec<f64> {
    let step = 1.0 / q as f64;
    (0..=q)
        .map(|k| {
            let mut y = if k == q { 1.0 } else { k as f64 * step };
            if q as f64 * y != k as f64 {
                y = y.next_up();
            }
            y
        })
        .collect()
}

/// The edges of `qcut` over ascending `xs`: numpy's linear quantile
/// (virtual index (m − 1)·p, its `_lerp` that interpolates from the
/// nearer end); false when two edges coincide, where pandas raises "Bin
/// edges must be unique" and alphalens drops the date.
fn qcut_edges(xs: &[f64], fractions: &[f64], edges: &mut Vec<f64>) -> bool {
    let Some(&last) = xs.last() else {
        return false;
    };
    let top = (xs.len() - 1) as f64;
    edges.clear();
    for &p in fractions {
        let v = top * p;
        let e = if v >= top {
            last
        } else {
            let lo = v.floor();
            let i = lo as usize;
            let (a, b) = (xs[i], xs.get(i + 1).copied().unwrap_or(last));
            let (d, g) = (b - a, v - lo);
            if g >= 0.5 {
                b - d * (1.0 - g)
            } else {
                a + d * g
            }
        };
        edges.push(e);
    }
    edges.windows(2).all(|w| w[0] != w[1])
}

/// pandas' `qcut(values, q, labels=False)` of finite values: each one's
/// 0-based bucket in the order given, or `None` where two edges coincide
/// (pandas raises, alphalens drops the date).
pub fn qcut_labels(values: &[f64], q: usize) -> Option<Vec<usize>> {
    if q == 0 || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut xs = values.to_vec();
    xs.sort_by(f64::total_cmp);
    let mut edges = Vec::new();
    if !qcut_edges(&xs, &qcut_fractions(q), &mut edges) {
        return None;
    }
    Some(values.iter().map(|v| qcut_bucket(&edges, *v)).collect())
}

/// `cut(x, edges, right=True, include_lowest=True)`: the first bucket
/// holds the lowest edge, bucket k (0-based) the values in (e_k, e_{k+1}].
fn qcut_bucket(edges: &[f64], x: f64) -> usize {
    edges.partition_point(|e| *e < x).saturating_sub(1)
}

// --------------------------------------------------------- one factor's study

/// Running sums of one horizon's quantile returns.
struct QuantileSums {
    bsum: Vec<f64>,
    bcnt: Vec<usize>,
    sum: Vec<f64>,
    days: Vec<usize>,
    spread: Series,
    /// Kept per date only when asked (the 1-day horizon).
    daily: Option<QuantileSeries>,
}

impl QuantileSums {
    fn new(q: usize, daily: bool) -> Self {
        QuantileSums {
            bsum: vec![0.0; q],
            bcnt: vec![0; q],
            sum: vec![0.0; q],
            days: vec![0; q],
            spread: Series::default(),
            daily: daily.then(|| QuantileSeries {
                dates: Vec::new(),
                returns: vec![Vec::new(); q],
            }),
        }
    }

    /// Adds one date's bucket means (names with a bucket and a return).
    fn add_date(&mut self, buckets: &[u8], fwd: &[f64], date: NaiveDate) {
        self.bsum.iter_mut().for_each(|x| *x = 0.0);
        self.bcnt.iter_mut().for_each(|x| *x = 0);
        for (b, r) in buckets.iter().zip(fwd) {
            if *b != NONE && r.is_finite() {
                self.bsum[*b as usize] += r;
                self.bcnt[*b as usize] += 1;
            }
        }
        let days = self.sum.iter_mut().zip(&mut self.days);
        for ((s, d), (b, c)) in days.zip(self.bsum.iter().zip(&self.bcnt)) {
            if *c > 0 {
                *s += b / *c as f64;
                *d += 1;
            }
        }
        if let Some(daily) = &mut self.daily {
            daily.dates.push(date);
            for ((out, b), c) in daily.returns.iter_mut().zip(&self.bsum).zip(&self.bcnt) {
                out.push(if *c > 0 { b / *c as f64 } else { f64::NAN });
            }
        }
        let q = self.bsum.len();
        if self.bcnt[0] > 0 && self.bcnt[q - 1] > 0 {
            let top = self.bsum[q - 1] / self.bcnt[q - 1] as f64;
            self.spread.dates.push(date);
            self.spread
                .values
                .push(top - self.bsum[0] / self.bcnt[0] as f64);
        }
    }
}

/// One horizon of one factor: the per-date ICs and the quantile returns.
fn study_horizon(
    p: &Prepared<'_>,
    s: &Sorted,
    factor: &[f64],
    k: usize,
) -> Result<(HorizonStats, Series, Option<QuantileSeries>), ScreenError> {
    let (n, h) = (p.n, p.horizons[k]);
    let fwd = &p.fwd[k];
    let mut out = HorizonStats {
        horizon: h,
        ..HorizonStats::default()
    };
    let mut sums = QuantileSums::new(p.q, h == 1);
    let (mut fa, mut fb, mut scratch) = (Vec::new(), Vec::new(), RankScratch::default());
    for row in 0..p.t - h {
        // A date ranks its names: the interrupt is read once a date (§2.4).
        checkpoint()?;
        let (f, r) = (
            &factor[row * n..(row + 1) * n],
            &fwd[row * n..(row + 1) * n],
        );
        let date = p.u.dates[row];
        if s.buckets[row * n..(row + 1) * n].iter().any(|b| *b != NONE) {
            sums.add_date(&s.buckets[row * n..(row + 1) * n], r, date);
        }
        fa.clear();
        fb.clear();
        for &j in &s.order[s.start[row]..s.start[row + 1]] {
            if r[j as usize].is_finite() {
                fa.push(f[j as usize]);
                fb.push(r[j as usize]);
            }
        }
        if fa.len() < p.need {
            continue;
        }
        let (ic, ric) = (pearson(&fa, &fb), spearman_sorted_a(&fa, &fb, &mut scratch));
        if ic.is_finite() && ric.is_finite() {
            out.rows.push(row);
            out.dates.push(date);
            out.ic.push(ic);
            out.rank_ic.push(ric);
            out.names.push(fa.len());
        }
    }
    if out.ic.len() < 2 {
        return Err(ScreenError::TooFew(format!(
            "{} date(s) had at least {} names with a factor value and a {h}-day forward return",
            out.ic.len(),
            p.need
        )));
    }
    out.ic_stats = ic_stats(&out.ic, h);
    out.rank_ic_stats = ic_stats(&out.rank_ic, h);
    out.quantile_returns = sums
        .sum
        .iter()
        .zip(&sums.days)
        .map(|(s, d)| if *d > 0 { s / *d as f64 } else { f64::NAN })
        .collect();
    out.spread_dates = sums.spread.values.len();
    out.spread = if out.spread_dates > 0 {
        crate::research::stats::mean(&sums.spread.values)
    } else {
        f64::NAN
    };
    Ok((out, sums.spread, sums.daily))
}

/// Mean, std (ddof 1), IR, the Newey–West t over h − 1 lags and its
/// two-sided normal p-value (statsmodels' HAC on a constant, `use_t`
/// off).
fn ic_stats(ic: &[f64], h: usize) -> IcStats {
    let mean = crate::research::stats::mean(ic);
    let std = crate::research::stats::std_dev(ic, 1);
    let var = newey_west_mean_variance(ic, mean, h.saturating_sub(1));
    let t_nw = mean / var.sqrt();
    IcStats {
        mean,
        std,
        ir: mean / std,
        t_nw,
        p_value: libm::erfc(t_nw.abs() * std::f64::consts::FRAC_1_SQRT_2),
    }
}

/// Per date, Pearson's correlation of the ranks with the previous date's
/// (the previous date with any value), over the names ranked on both.
fn rank_autocorrelation(p: &Prepared<'_>, s: &Sorted) -> Result<Series, ScreenError> {
    let n = p.n;
    let mut out = Series::default();
    let mut prev: Option<usize> = None;
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for row in 0..p.t {
        if s.start[row] == s.start[row + 1] {
            continue;
        }
        checkpoint()?;
        if let Some(pr) = prev {
            a.clear();
            b.clear();
            let (now, before) = (
                &s.ranks[row * n..(row + 1) * n],
                &s.ranks[pr * n..(pr + 1) * n],
            );
            for (x, y) in now.iter().zip(before) {
                if x.is_finite() && y.is_finite() {
                    a.push(*x);
                    b.push(*y);
                }
            }
            let c = pearson(&a, &b);
            if c.is_finite() {
                out.dates.push(p.u.dates[row]);
                out.values.push(c);
            }
        }
        prev = Some(row);
    }
    Ok(out)
}

/// Every statistic of one factor.
fn study_factor(p: &Prepared<'_>, factor: &[f64]) -> Result<FactorStats, ScreenError> {
    if factor.len() != p.t * p.n {
        return Err(ScreenError::Input(format!(
            "{} factor values for {} dates × {} symbols",
            factor.len(),
            p.t,
            p.n
        )));
    }
    let s = sort_factor(p, factor);
    let mut out = FactorStats {
        coverage: s.order.len() as f64 / factor.len() as f64,
        ..FactorStats::default()
    };
    for k in 0..p.horizons.len() {
        let (hs, spread, daily) = study_horizon(p, &s, factor, k)?;
        if p.horizons[k] == 1 {
            out.long_short = spread;
            out.quantile_daily = daily.unwrap_or_default();
        }
        // The extra 1-day study (for the long-short) is not a horizon asked.
        if k < p.asked {
            out.horizons.push(hs);
        }
    }
    out.ic_decay = out.horizons.iter().map(|h| h.rank_ic_stats.mean).collect();
    out.rank_autocorrelation = rank_autocorrelation(p, &s)?;
    let ac = &out.rank_autocorrelation.values;
    out.rank_autocorrelation_mean = if ac.is_empty() {
        f64::NAN
    } else {
        crate::research::stats::mean(ac)
    };
    out.turnover = 1.0 - out.rank_autocorrelation_mean;
    Ok(out)
}

// ------------------------------------------------------------- the screen

/// Screens one factor panel (its closes are the universe).
pub fn screen_factor(panel: &Panel, o: &ScreenOptions) -> Result<FactorStats, ScreenError> {
    let p = prepare(Universe::of(panel), o)?;
    study_factor(&p, &panel.factor)
}

/// Screens `factors` (a name and row-major values on `u`'s dates ×
/// symbols each), over the cores, then compares them. A factor that
/// cannot be scored is listed with its error and still counts as tried.
pub fn screen(
    u: Universe<'_>,
    factors: &[(&str, &[f64])],
    o: &ScreenOptions,
) -> Result<Screen, ScreenError> {
    if factors.is_empty() {
        return Err(ScreenError::Input(
            "give at least one factor to screen".into(),
        ));
    }
    if let Some(split) = &o.split {
        split.check()?;
    }
    let p = prepare(u, o)?;
    let outcomes = study_all(&p, factors, o.threads)?;
    let mut s = compare(o, factors, outcomes);
    if let Some(split) = &o.split {
        let series: Vec<RankIcSeries<'_>> = s
            .factors
            .iter()
            .map(|f| RankIcSeries {
                name: &f.name,
                scored: f
                    .stats
                    .as_ref()
                    .and_then(|st| st.horizons.iter().find(|x| x.horizon == o.rank_horizon))
                    .map(|h| (h.dates.as_slice(), h.rank_ic.as_slice())),
            })
            .collect();
        let v = validate(u.dates, &series, o.rank_horizon, split)?;
        s.validation = Some(v);
    }
    Ok(s)
}

type Outcome = Result<FactorStats, ScreenError>;

/// Each factor's study, on `threads` workers (0: one per core) taking the
/// next factor as they finish. The interrupt is thread-local (§2.4): the
/// workers watch a signal of their own, which this thread fires when its
/// caller's does.
fn study_all(
    p: &Prepared<'_>,
    factors: &[(&str, &[f64])],
    threads: usize,
) -> Result<Vec<Outcome>, ScreenError> {
    checkpoint()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if threads == 0 { cores } else { threads }.min(factors.len());
    let mut out: Vec<Option<Outcome>> = vec![None; factors.len()];
    if threads > 1 {
        let local = Interrupt::new();
        let next = AtomicUsize::new(0);
        let (tx, rx) = mpsc::channel::<(usize, Outcome)>();
        std::thread::scope(|scope| {
            let mut handles = Vec::with_capacity(threads);
            for _ in 0..threads {
                let tx = tx.clone();
                let (next, local) = (&next, &local);
                let work = move || {
                    local.within(|| {
                        while !local.is_interrupted() {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some((_, f)) = factors.get(i) else { break };
                            if tx.send((i, study_factor(p, f))).is_err() {
                                break;
                            }
                        }
                    })
                };
                // A thread the process limit refuses is not started; the
                // others (or this thread, below) take its factors.
                handles.extend(std::thread::Builder::new().spawn_scoped(scope, work).ok());
            }
            drop(tx);
            relay(&rx, &local, &mut out);
            // Joined here, a worker that panicked does not re-panic this
            // thread: its factor is redone below (docs §2.4).
            for h in handles {
                let _ = h.join();
            }
        });
    }
    let mut done = Vec::with_capacity(factors.len());
    for (slot, (_, f)) in out.into_iter().zip(factors) {
        let r = match slot {
            Some(r) => r,
            None => {
                checkpoint()?;
                study_factor(p, f)
            }
        };
        if let Err(ScreenError::Interrupted(i)) = r {
            return Err(ScreenError::Interrupted(i));
        }
        done.push(r);
    }
    // Workers that finished before the caller's interrupt was relayed.
    checkpoint()?;
    Ok(done)
}

/// Collects the workers' outcomes until they are all gone, passing the
/// caller's interrupt on to them.
fn relay(rx: &mpsc::Receiver<(usize, Outcome)>, local: &Interrupt, out: &mut [Option<Outcome>]) {
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok((i, r)) => {
                if let Some(slot) = out.get_mut(i) {
                    *slot = Some(r);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if checkpoint().is_err() {
            local.interrupt();
        }
    }
}

/// The rank-horizon statistics of a factor, if it was scored.
fn at_horizon(s: &FactorStats, h: usize) -> Option<&HorizonStats> {
    s.horizons.iter().find(|x| x.horizon == h)
}

/// The comparison across factors: scores, adjusted p-values, ranking,
/// correlation and the deflated Sharpe of the best long-short.
fn compare(o: &ScreenOptions, factors: &[(&str, &[f64])], outcomes: Vec<Outcome>) -> Screen {
    let h = o.rank_horizon;
    let mut moments = Vec::with_capacity(factors.len());
    let mut rows: Vec<ScreenedFactor> = Vec::with_capacity(factors.len());
    for ((name, _), r) in factors.iter().zip(outcomes) {
        let mut row = ScreenedFactor {
            name: name.to_string(),
            score: f64::NAN,
            p_value: 1.0,
            long_short_sharpe: f64::NAN,
            ..ScreenedFactor::default()
        };
        let mut m = None;
        match r {
            Ok(stats) => {
                if let Some(hs) = at_horizon(&stats, h) {
                    row.score = hs.rank_ic_stats.ir.abs();
                    if hs.rank_ic_stats.p_value.is_finite() {
                        row.p_value = hs.rank_ic_stats.p_value;
                    }
                    m = oriented_moments(&stats.long_short, hs.rank_ic_stats.mean);
                }
                row.long_short_sharpe = m.map_or(f64::NAN, |m| m.sharpe);
                row.stats = Some(stats);
            }
            Err(e) => row.error = Some(e.to_string()),
        }
        moments.push(m);
        rows.push(row);
    }
    let p: Vec<f64> = rows.iter().map(|r| r.p_value).collect();
    for ((r, a), b) in rows.iter_mut().zip(holm(&p)).zip(benjamini_hochberg(&p)) {
        r.p_holm = a;
        r.p_bh = b;
    }
    let mut ranking: Vec<usize> = (0..rows.len()).collect();
    ranking.sort_by(|&a, &b| {
        let (x, y) = (rows[a].score, rows[b].score);
        // NaN last; higher first; ties keep the order given.
        y.is_nan()
            .cmp(&x.is_nan())
            .reverse()
            .then(y.total_cmp(&x))
            .then(a.cmp(&b))
    });
    let correlation = correlation(&rows, h);
    let deflated = deflate(&rows, &moments);
    Screen {
        options: o.clone(),
        factors: rows,
        ranking,
        correlation,
        deflated,
        validation: None,
    }
}

/// The long-short's moments, long the top quantile when the factor's mean
/// rank IC is positive and the bottom when negative.
fn oriented_moments(ls: &Series, rank_ic_mean: f64) -> Option<SharpeMoments> {
    let sign = if rank_ic_mean < 0.0 { -1.0 } else { 1.0 };
    let r: Vec<f64> = ls.values.iter().map(|v| sign * v).collect();
    SharpeMoments::of(&r).ok()
}

/// Holm's step-down adjusted p-values, as statsmodels' `multipletests(p,
/// method="holm")`: sorted ascending, p₍ᵢ₎·(m − i + 1), running maximum,
/// capped at 1.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let order = ascending(p);
    let mut out = vec![f64::NAN; m];
    let mut run = f64::NEG_INFINITY;
    for (i, &k) in order.iter().enumerate() {
        run = run.max(p[k] * (m - i) as f64);
        out[k] = run.min(1.0);
    }
    out
}

/// Benjamini–Hochberg adjusted p-values, as statsmodels'
/// `multipletests(p, method="fdr_bh")`: p₍ᵢ₎ / (i/m), running minimum from
/// the largest, capped at 1.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let order = ascending(p);
    let mut out = vec![f64::NAN; m];
    let mut run = f64::INFINITY;
    for (i, &k) in order.iter().enumerate().rev() {
        run = run.min(p[k] / ((i + 1) as f64 / m as f64));
        out[k] = run.min(1.0);
    }
    out
}

fn ascending(p: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]).then(a.cmp(&b)));
    order
}

/// Pearson's correlation of each pair's rank IC series at horizon `h`
/// over the dates both have (pandas' pairwise `DataFrame.corr` with
/// `min_periods=3`).
fn correlation(rows: &[ScreenedFactor], h: usize) -> Vec<Vec<f64>> {
    let series: Vec<Option<&HorizonStats>> = rows
        .iter()
        .map(|r| r.stats.as_ref().and_then(|s| at_horizon(s, h)))
        .collect();
    let k = rows.len();
    let mut out = vec![vec![f64::NAN; k]; k];
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for a in 0..k {
        for b in a..k {
            let (Some(sa), Some(sb)) = (series[a], series[b]) else {
                continue;
            };
            common(sa, sb, &mut x, &mut y);
            let c = if x.len() >= 3 {
                pearson(&x, &y)
            } else {
                f64::NAN
            };
            out[a][b] = c;
            out[b][a] = c;
        }
    }
    out
}

/// The rank ICs of two series on the dates both scored.
fn common(a: &HorizonStats, b: &HorizonStats, x: &mut Vec<f64>, y: &mut Vec<f64>) {
    x.clear();
    y.clear();
    let (mut i, mut j) = (0, 0);
    while i < a.rows.len() && j < b.rows.len() {
        match a.rows[i].cmp(&b.rows[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                x.push(a.rank_ic[i]);
                y.push(b.rank_ic[j]);
                i += 1;
                j += 1;
            }
        }
    }
}

/// The deflated Sharpe of the best oriented long-short, the trials being
/// every factor screened (docs §17.3).
fn deflate(rows: &[ScreenedFactor], moments: &[Option<SharpeMoments>]) -> Option<DeflatedBest> {
    let (best, m) = moments
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.map(|m| (i, m)))
        .max_by(|a, b| a.1.sharpe.total_cmp(&b.1.sharpe).then(b.0.cmp(&a.0)))?;
    let sharpes: Vec<f64> = moments.iter().flatten().map(|m| m.sharpe).collect();
    let (variance, source) = if sharpes.len() >= 2 {
        (
            crate::research::stats::std_dev(&sharpes, 1).powi(2),
            "the screened factors' long-short Sharpe ratios (ddof 1)",
        )
    } else {
        (
            m.dispersion() / (m.n - 1) as f64,
            "the best long-short's own Sharpe estimator variance (one factor has a long-short)",
        )
    };
    let trials = rows.len();
    let sr0 = expected_max_sharpe(variance, trials, 0.0);
    Some(DeflatedBest {
        best: rows.get(best).map(|r| r.name.clone()).unwrap_or_default(),
        sharpe: m.sharpe,
        observations: m.n,
        trials,
        sharpe_variance: variance,
        variance_source: source.into(),
        expected_max_sharpe: sr0,
        psr: psr(&m, 0.0),
        dsr: psr(&m, sr0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holm_and_bh_by_hand() {
        let p = [0.01, 0.04, 0.03, 0.005];
        // Sorted 0.005, 0.01, 0.03, 0.04: ×4, ×3, ×2, ×1 → 0.02, 0.03, 0.06, 0.04, running max.
        let h = holm(&p);
        for (a, b) in h.iter().zip([0.03, 0.06, 0.06, 0.02]) {
            assert!((a - b).abs() < 1e-15, "{h:?}");
        }
        // ×4/1, ×4/2, ×4/3, ×4/4 → 0.02, 0.02, 0.04, 0.04, running min from the top.
        let b = benjamini_hochberg(&p);
        for (a, w) in b.iter().zip([0.02, 0.04, 0.04, 0.02]) {
            assert!((a - w).abs() < 1e-15, "{b:?}");
        }
        assert_eq!(holm(&[0.6, 0.9]), vec![1.0, 1.0], "capped at 1");
    }

    #[test]
    fn qcut_shares_ties_and_refuses_coinciding_edges() {
        assert_eq!(
            qcut_labels(&[4.0, 1.0, 3.0, 2.0], 2),
            Some(vec![1, 0, 1, 0])
        );
        // Edges 1, 1, 2: the lower half is all ones.
        assert_eq!(qcut_labels(&[1.0, 1.0, 1.0, 2.0], 2), None);
        assert_eq!(qcut_labels(&[1.0, f64::NAN], 2), None);
    }

    #[test]
    fn the_daily_quantile_series_averages_to_the_one_day_quantile_returns() {
        let (t, n) = (60usize, 12usize);
        let dates: Vec<NaiveDate> = (0..t)
            .map(|i| NaiveDate::from_ymd_opt(2011, 3, 1).unwrap() + chrono::Days::new(i as u64))
            .collect();
        let symbols: Vec<String> = (0..n).map(|j| format!("S{j}")).collect();
        // A wavy price per symbol, with holes, and a factor that knows a
        // little of tomorrow's move.
        let close: Vec<f64> = (0..t * n)
            .map(|k| {
                let (i, j) = ((k / n) as f64, (k % n) as f64);
                if (k * 7) % 23 == 0 {
                    f64::NAN
                } else {
                    50.0 + j + 3.0 * ((i + j * j) / 4.0).sin()
                }
            })
            .collect();
        let factor: Vec<f64> = (0..t * n)
            .map(|k| {
                let later = close.get(k + n).copied().unwrap_or(f64::NAN);
                (later / close[k] - 1.0) + 0.01 * ((k % 5) as f64)
            })
            .collect();
        let u = Universe {
            dates: &dates,
            symbols: &symbols,
            close: &close,
        };
        let o = ScreenOptions {
            horizons: vec![5, 1],
            quantiles: 4,
            threads: 1,
            ..ScreenOptions::default()
        };
        let s = screen(u, &[("f", &factor)], &o).unwrap();
        let stats = s.factors[0].stats.as_ref().unwrap();
        let one = stats.horizons.iter().find(|h| h.horizon == 1).unwrap();
        let daily = &stats.quantile_daily;
        assert_eq!(daily.returns.len(), 4);
        assert!(daily.dates.len() > 40, "{}", daily.dates.len());
        for (q, series) in daily.returns.iter().enumerate() {
            assert_eq!(series.len(), daily.dates.len());
            let kept: Vec<f64> = series.iter().copied().filter(|x| x.is_finite()).collect();
            let mean = kept.iter().sum::<f64>() / kept.len() as f64;
            let want = one.quantile_returns[q];
            assert!((mean - want).abs() < 1e-12, "q{q}: {mean} vs {want}");
        }
        // The top minus the bottom on each date is the long-short series.
        let spread: Vec<f64> = daily.returns[3]
            .iter()
            .zip(&daily.returns[0])
            .map(|(a, b)| a - b)
            .filter(|x| x.is_finite())
            .collect();
        assert_eq!(spread, stats.long_short.values);
        // It travels through JSON (NaN as null) and an older record
        // without it still reads.
        let back: FactorStats =
            serde_json::from_str(&serde_json::to_string(stats).unwrap()).unwrap();
        assert_eq!(back.quantile_daily.dates, daily.dates);
        let mut old = serde_json::to_value(stats).unwrap();
        old.as_object_mut().unwrap().remove("quantile_daily");
        let old: FactorStats = serde_json::from_value(old).unwrap();
        assert!(old.quantile_daily.dates.is_empty());
    }

    #[test]
    fn bad_inputs_say_what_to_change() {
        let dates: Vec<NaiveDate> = (0..30)
            .map(|i| NaiveDate::from_ymd_opt(2010, 1, 1).unwrap() + chrono::Days::new(i))
            .collect();
        let symbols: Vec<String> = (0..4).map(|j| format!("S{j}")).collect();
        let close = vec![1.0; 120];
        let u = Universe {
            dates: &dates,
            symbols: &symbols,
            close: &close,
        };
        let f = vec![0.5; 120];
        let run = |o: ScreenOptions| screen(u, &[("f", &f)], &o).unwrap_err().to_string();
        let o = ScreenOptions::default;
        assert!(
            run(ScreenOptions {
                quantiles: 1,
                ..o()
            })
            .contains("quantiles must be 2 to 20")
        );
        assert!(
            run(ScreenOptions {
                rank_horizon: 3,
                ..o()
            })
            .contains("not one of the horizons")
        );
        assert!(
            run(ScreenOptions {
                horizons: vec![1, 30],
                ..o()
            })
            .contains("shorter than the 30")
        );
        assert!(
            screen(u, &[], &o())
                .unwrap_err()
                .to_string()
                .contains("at least one factor")
        );
        let short = Universe {
            close: &close[..100],
            ..u
        };
        assert!(matches!(
            screen(short, &[("f", &f)], &o()),
            Err(ScreenError::Input(_))
        ));
        // A constant factor is listed with its error, counted as tried.
        let s = screen(u, &[("f", &f), ("g", &f)], &o()).unwrap();
        assert!(
            s.factors
                .iter()
                .all(|r| r.stats.is_none() && r.p_value == 1.0)
        );
        assert!(s.deflated.is_none());
    }
}
