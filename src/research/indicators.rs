//! Technical indicators over plain `f64` columns.
//!
//! Every function is a single O(n) pass that allocates its output once (and
//! nothing per element), and returns a vector as long as its input with
//! `NaN` where pandas has `NaN` (warm-up rows, missing inputs). The values
//! match pandas within a few ulps: the rolling statistics reproduce pandas'
//! compensated (Kahan / Welford) window updates, and the exponential ones
//! reproduce its `ewm(adjust=False)` recursion. `tests/fixtures/indicators/`
//! holds the pandas reference and the script that produced it.
//!
//! Conventions (all pandas defaults unless said):
//! - **SMA** `rolling(n).mean()`: NaN for the first n-1 rows.
//! - **EMA** `ewm(span=n, adjust=False).mean()`: α = 1/(1 + (n-1)/2), seeded
//!   with the first value (y₀ = x₀, yₜ = (1-α)yₜ₋₁ + αxₜ), so there is no NaN
//!   warm-up; early values lean on the seed. TA-Lib instead seeds with an
//!   SMA of the first n values and leaves n-1 NaNs; the two converge.
//! - **RSI** (Wilder): gains and losses of `diff()` smoothed with
//!   `ewm(alpha=1/n, adjust=False, min_periods=n)` (Wilder's recursion
//!   seeded with the first change, not with an SMA), RSI = 100 − 100/(1+RS);
//!   NaN for the first n rows; 100 when there were no losses.
//! - **MACD** (12/26/9): EMA(fast) − EMA(slow), its EMA(signal), and the
//!   difference (histogram); EMAs as above, so no NaN.
//! - **Bollinger** (20, 2σ): SMA ± k·`rolling(n).std()` with ddof = 1
//!   (pandas' sample std, not NumPy's population std).
//! - **ATR** (Wilder): true range max(H−L, |H−Cₜ₋₁|, |L−Cₜ₋₁|), H−L on the
//!   first row, smoothed like RSI; NaN for the first n-1 rows.
//! - **Volatility**: `pct_change().rolling(n).std(ddof=1) · √periods_per_year`
//!   (252 for daily equities); NaN for the first n rows.
//! - **Returns** `pct_change()`, **log returns** `ln(cₜ/cₜ₋₁)`: NaN first.
//! - **Drawdown** `x / cummax(x) − 1` (≤ 0, from the running peak).
//! - **Correlation** `a.rolling(n).corr(b)` (Pearson; NaN until n pairs).
//! - **Momentum** (window, skip; 12-1 = 252, 21): `cₜ₋skip / cₜ₋window − 1`,
//!   the return from `window` bars ago to `skip` bars ago (pandas
//!   `close.shift(skip) / close.shift(window) − 1`); NaN for the first
//!   `window` rows. Skipping the last month keeps the short-term reversal
//!   out of the factor (docs §17.1).
//!
//! Like pandas' window functions, ±∞ inputs count as missing.

use serde_json::Value;

/// A parameter out of range, or input columns of different lengths.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum IndicatorError {
    #[error("{indicator}: '{param}' {problem} (got {value})")]
    BadParam {
        indicator: &'static str,
        param: &'static str,
        problem: String,
        value: String,
    },
    #[error("{indicator}: input columns differ in length ({detail})")]
    LengthMismatch {
        indicator: &'static str,
        detail: String,
    },
    #[error(
        "unknown indicator '{0}'; valid indicators: sma, ema, rsi, macd, bollinger, atr, volatility, returns, log_returns, drawdown, correlation, momentum"
    )]
    UnknownIndicator(String),
    #[error("{indicator}: parameter '{param}' {problem}")]
    BadArgument {
        indicator: &'static str,
        param: String,
        problem: String,
    },
}

fn at_least(
    indicator: &'static str,
    param: &'static str,
    value: usize,
    min: usize,
) -> Result<(), IndicatorError> {
    if value < min {
        return Err(IndicatorError::BadParam {
            indicator,
            param,
            problem: format!("must be at least {min}"),
            value: value.to_string(),
        });
    }
    Ok(())
}

/// Pandas' window functions treat ±∞ as missing (`_prep_values`).
#[inline]
fn prep(v: f64) -> f64 {
    if v.is_infinite() { f64::NAN } else { v }
}

// ---------------------------------------------------------------------------
// Streaming window states. Each mirrors the matching pandas aggregation
// (`pandas/_libs/window/aggregations.pyx`), so sums drift the same way.

/// Rolling mean with Kahan-compensated add and remove (pandas `roll_mean`).
#[derive(Default)]
struct RollingMean {
    nobs: usize,
    sum: f64,
    neg_ct: usize,
    comp_add: f64,
    comp_remove: f64,
    /// Length of the run of equal values at the end of the window: when it
    /// covers the window the mean is exactly that value.
    same_run: usize,
    prev: f64,
}

impl RollingMean {
    #[inline]
    fn add(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        self.nobs += 1;
        let y = v - self.comp_add;
        let t = self.sum + y;
        self.comp_add = t - self.sum - y;
        self.sum = t;
        if v.is_sign_negative() {
            self.neg_ct += 1;
        }
        if v == self.prev {
            self.same_run += 1;
        } else {
            self.same_run = 1;
            self.prev = v;
        }
    }

    #[inline]
    fn remove(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        self.nobs -= 1;
        let y = -v - self.comp_remove;
        let t = self.sum + y;
        self.comp_remove = t - self.sum - y;
        self.sum = t;
        if v.is_sign_negative() {
            self.neg_ct -= 1;
        }
    }

    #[inline]
    fn value(&self, min_periods: usize) -> f64 {
        if self.nobs < min_periods || self.nobs == 0 {
            return f64::NAN;
        }
        let mean = self.sum / self.nobs as f64;
        if self.same_run >= self.nobs {
            self.prev
        } else if (self.neg_ct == 0 && mean < 0.0) || (self.neg_ct == self.nobs && mean > 0.0) {
            // Rounding must not flip the sign of an all-positive window.
            0.0
        } else {
            mean
        }
    }
}

/// Rolling variance by Welford's method with Kahan-compensated means
/// (pandas `roll_var`).
#[derive(Default)]
struct RollingVar {
    nobs: usize,
    mean: f64,
    ssqdm: f64,
    comp_add: f64,
    comp_remove: f64,
    same_run: usize,
    prev: f64,
}

impl RollingVar {
    #[inline]
    fn add(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        if v == self.prev {
            self.same_run += 1;
        } else {
            self.same_run = 1;
            self.prev = v;
        }
        self.nobs += 1;
        let prev_mean = self.mean - self.comp_add;
        let y = v - self.comp_add;
        let t = y - self.mean;
        self.comp_add = t + self.mean - y;
        self.mean += t / self.nobs as f64;
        self.ssqdm += (v - prev_mean) * (v - self.mean);
    }

    #[inline]
    fn remove(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        self.nobs -= 1;
        if self.nobs == 0 {
            self.mean = 0.0;
            self.ssqdm = 0.0;
            return;
        }
        let prev_mean = self.mean - self.comp_remove;
        let y = v - self.comp_remove;
        let t = y - self.mean;
        self.comp_remove = t + self.mean - y;
        self.mean -= t / self.nobs as f64;
        self.ssqdm -= (v - prev_mean) * (v - self.mean);
    }

    #[inline]
    fn variance(&self, min_periods: usize, ddof: usize) -> f64 {
        if self.nobs < min_periods.max(1) || self.nobs <= ddof {
            return f64::NAN;
        }
        if self.nobs == 1 || self.same_run >= self.nobs {
            return 0.0;
        }
        (self.ssqdm / (self.nobs - ddof) as f64).max(0.0)
    }
}

/// Rolling co-moments of pairs for Pearson correlation (Welford, updated on
/// add and remove; pairs with a missing side are skipped, as pandas aligns
/// `x + 0*y` first).
#[derive(Default)]
struct RollingCorr {
    nobs: usize,
    mean_x: f64,
    mean_y: f64,
    m2x: f64,
    m2y: f64,
    cxy: f64,
}

impl RollingCorr {
    #[inline]
    fn add(&mut self, x: f64, y: f64) {
        if x.is_nan() || y.is_nan() {
            return;
        }
        self.nobs += 1;
        let n = self.nobs as f64;
        let dx = x - self.mean_x;
        let dy = y - self.mean_y;
        self.mean_x += dx / n;
        self.mean_y += dy / n;
        self.m2x += dx * (x - self.mean_x);
        self.m2y += dy * (y - self.mean_y);
        self.cxy += dx * (y - self.mean_y);
    }

    #[inline]
    fn remove(&mut self, x: f64, y: f64) {
        if x.is_nan() || y.is_nan() {
            return;
        }
        self.nobs -= 1;
        if self.nobs == 0 {
            *self = RollingCorr::default();
            return;
        }
        let n = self.nobs as f64;
        let dx = x - self.mean_x;
        let dy = y - self.mean_y;
        self.mean_x -= dx / n;
        self.mean_y -= dy / n;
        self.m2x -= dx * (x - self.mean_x);
        self.m2y -= dy * (y - self.mean_y);
        self.cxy -= dx * (y - self.mean_y);
    }

    #[inline]
    fn value(&self, min_periods: usize) -> f64 {
        if self.nobs < min_periods.max(2) || self.m2x <= 0.0 || self.m2y <= 0.0 {
            return f64::NAN;
        }
        self.cxy / (self.m2x * self.m2y).sqrt()
    }
}

/// Pandas' `ewm(com=..., adjust=False, ignore_na=False).mean()` recursion,
/// one value at a time.
struct Ewm {
    old_wt_factor: f64,
    new_wt: f64,
    min_periods: usize,
    weighted: f64,
    old_wt: f64,
    nobs: usize,
    started: bool,
}

impl Ewm {
    /// `alpha` in (0, 1]. Pandas converts every form (span, alpha) to a
    /// centre of mass and back; doing the same keeps the last bit equal.
    fn new(com: f64, min_periods: usize) -> Self {
        let alpha = 1.0 / (1.0 + com);
        Ewm {
            old_wt_factor: 1.0 - alpha,
            new_wt: alpha,
            min_periods: min_periods.max(1),
            weighted: f64::NAN,
            old_wt: 1.0,
            nobs: 0,
            started: false,
        }
    }

    #[inline]
    fn push(&mut self, cur: f64) -> f64 {
        let cur = prep(cur);
        let is_obs = !cur.is_nan();
        if !self.started {
            self.started = true;
            self.weighted = cur;
            self.nobs = usize::from(is_obs);
        } else {
            self.nobs += usize::from(is_obs);
            if !self.weighted.is_nan() {
                // ignore_na=False: a gap still decays the old weight.
                self.old_wt *= self.old_wt_factor;
                if is_obs {
                    if self.weighted != cur {
                        self.weighted = (self.old_wt * self.weighted + self.new_wt * cur)
                            / (self.old_wt + self.new_wt);
                    }
                    self.old_wt = 1.0;
                }
            } else if is_obs {
                self.weighted = cur;
            }
        }
        if self.nobs >= self.min_periods {
            self.weighted
        } else {
            f64::NAN
        }
    }
}

fn com_from_span(span: usize) -> f64 {
    (span as f64 - 1.0) / 2.0
}

fn com_from_alpha(alpha: f64) -> f64 {
    (1.0 - alpha) / alpha
}

fn same_len(indicator: &'static str, cols: &[(&str, usize)]) -> Result<usize, IndicatorError> {
    let n = cols.first().map(|c| c.1).unwrap_or(0);
    if cols.iter().any(|c| c.1 != n) {
        let detail = cols
            .iter()
            .map(|(name, len)| format!("{name}={len}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(IndicatorError::LengthMismatch { indicator, detail });
    }
    Ok(n)
}

// ---------------------------------------------------------------------------
// Public indicators.

/// Simple moving average over `window` values (pandas `rolling(window).mean()`).
pub fn sma(x: &[f64], window: usize) -> Result<Vec<f64>, IndicatorError> {
    at_least("sma", "window", window, 1)?;
    let mut out = Vec::with_capacity(x.len());
    let mut st = RollingMean::default();
    for i in 0..x.len() {
        if i >= window {
            st.remove(prep(x[i - window]));
        }
        st.add(prep(x[i]));
        out.push(st.value(window));
    }
    Ok(out)
}

/// Rolling standard deviation (pandas `rolling(window).std(ddof)`).
pub(crate) fn rolling_std(
    x: &[f64],
    window: usize,
    ddof: usize,
) -> Result<Vec<f64>, IndicatorError> {
    at_least("rolling_std", "window", window, ddof + 1)?;
    let mut out = Vec::with_capacity(x.len());
    let mut st = RollingVar::default();
    for i in 0..x.len() {
        if i >= window {
            st.remove(prep(x[i - window]));
        }
        st.add(prep(x[i]));
        out.push(st.variance(window, ddof).sqrt());
    }
    Ok(out)
}

/// Exponentially weighted mean, pandas `ewm(alpha=alpha, adjust=False,
/// min_periods=min_periods).mean()`; `alpha` in (0, 1].
pub fn ewm_mean(x: &[f64], alpha: f64, min_periods: usize) -> Result<Vec<f64>, IndicatorError> {
    if !(alpha > 0.0 && alpha <= 1.0) {
        return Err(IndicatorError::BadParam {
            indicator: "ewm",
            param: "alpha",
            problem: "must be in (0, 1]".into(),
            value: alpha.to_string(),
        });
    }
    Ok(ewm_run(x, com_from_alpha(alpha), min_periods))
}

fn ewm_run(x: &[f64], com: f64, min_periods: usize) -> Vec<f64> {
    let mut st = Ewm::new(com, min_periods);
    x.iter().map(|&v| st.push(v)).collect()
}

/// Exponential moving average, pandas `ewm(span=span, adjust=False).mean()`:
/// seeded with the first value, no NaN warm-up (see the module notes).
pub fn ema(x: &[f64], span: usize) -> Result<Vec<f64>, IndicatorError> {
    at_least("ema", "span", span, 1)?;
    Ok(ewm_run(x, com_from_span(span), 0))
}

/// Wilder's smoothing (α = 1/period), NaN until `period` observations.
pub fn wilder(x: &[f64], period: usize) -> Result<Vec<f64>, IndicatorError> {
    at_least("wilder", "period", period, 1)?;
    Ok(ewm_run(x, com_from_alpha(1.0 / period as f64), period))
}

/// Relative strength index with Wilder's smoothing (see the module notes).
pub fn rsi(close: &[f64], period: usize) -> Result<Vec<f64>, IndicatorError> {
    at_least("rsi", "period", period, 1)?;
    let com = com_from_alpha(1.0 / period as f64);
    let mut gains = Ewm::new(com, period);
    let mut losses = Ewm::new(com, period);
    let mut out = Vec::with_capacity(close.len());
    for i in 0..close.len() {
        // diff(): NaN on the first row and wherever either side is missing.
        let delta = if i == 0 {
            f64::NAN
        } else {
            prep(close[i]) - prep(close[i - 1])
        };
        // clip() keeps NaN.
        let gain = if delta.is_nan() {
            delta
        } else {
            delta.max(0.0)
        };
        let loss = if delta.is_nan() {
            delta
        } else {
            -(delta.min(0.0))
        };
        let g = gains.push(gain);
        let l = losses.push(loss);
        out.push(100.0 - 100.0 / (1.0 + g / l));
    }
    Ok(out)
}

/// The three MACD columns.
#[derive(Clone, Debug, PartialEq)]
pub struct Macd {
    pub line: Vec<f64>,
    pub signal: Vec<f64>,
    pub histogram: Vec<f64>,
}

/// MACD (usually 12/26/9): EMA(fast) − EMA(slow), its EMA(signal) and the
/// histogram line − signal.
pub fn macd(
    close: &[f64],
    fast: usize,
    slow: usize,
    signal: usize,
) -> Result<Macd, IndicatorError> {
    at_least("macd", "fast", fast, 1)?;
    at_least("macd", "signal", signal, 1)?;
    if slow <= fast {
        return Err(IndicatorError::BadParam {
            indicator: "macd",
            param: "slow",
            problem: "must be longer than 'fast'".into(),
            value: slow.to_string(),
        });
    }
    let mut ef = Ewm::new(com_from_span(fast), 0);
    let mut es = Ewm::new(com_from_span(slow), 0);
    let mut eg = Ewm::new(com_from_span(signal), 0);
    let n = close.len();
    let (mut line, mut sig, mut hist) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for &c in close {
        let l = ef.push(c) - es.push(c);
        let s = eg.push(l);
        line.push(l);
        sig.push(s);
        hist.push(l - s);
    }
    Ok(Macd {
        line,
        signal: sig,
        histogram: hist,
    })
}

/// The three Bollinger columns.
#[derive(Clone, Debug, PartialEq)]
pub struct Bollinger {
    pub middle: Vec<f64>,
    pub upper: Vec<f64>,
    pub lower: Vec<f64>,
}

/// Bollinger bands: SMA(window) ± k · sample std (ddof = 1).
pub fn bollinger(close: &[f64], window: usize, k: f64) -> Result<Bollinger, IndicatorError> {
    at_least("bollinger", "window", window, 2)?;
    if !(k.is_finite() && k >= 0.0) {
        return Err(IndicatorError::BadParam {
            indicator: "bollinger",
            param: "k",
            problem: "must be a finite number ≥ 0".into(),
            value: k.to_string(),
        });
    }
    let n = close.len();
    let (mut middle, mut upper, mut lower) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut mean = RollingMean::default();
    let mut var = RollingVar::default();
    for i in 0..n {
        if i >= window {
            let old = prep(close[i - window]);
            mean.remove(old);
            var.remove(old);
        }
        let v = prep(close[i]);
        mean.add(v);
        var.add(v);
        let m = mean.value(window);
        let sd = var.variance(window, 1).sqrt();
        middle.push(m);
        upper.push(m + k * sd);
        lower.push(m - k * sd);
    }
    Ok(Bollinger {
        middle,
        upper,
        lower,
    })
}

#[inline]
fn true_range_at(high: &[f64], low: &[f64], close: &[f64], i: usize) -> f64 {
    let hl = prep(high[i]) - prep(low[i]);
    if i == 0 {
        return hl;
    }
    let prev = prep(close[i - 1]);
    // pandas' max(axis=1) skips NaN: the largest of the defined ranges.
    [
        hl,
        (prep(high[i]) - prev).abs(),
        (prep(low[i]) - prev).abs(),
    ]
    .into_iter()
    .filter(|v| !v.is_nan())
    .fold(
        f64::NAN,
        |acc, v| if acc.is_nan() || v > acc { v } else { acc },
    )
}

/// True range per bar; the first bar has no previous close, so H − L.
pub fn true_range(high: &[f64], low: &[f64], close: &[f64]) -> Result<Vec<f64>, IndicatorError> {
    let n = same_len(
        "true_range",
        &[
            ("high", high.len()),
            ("low", low.len()),
            ("close", close.len()),
        ],
    )?;
    Ok((0..n).map(|i| true_range_at(high, low, close, i)).collect())
}

/// Average true range with Wilder's smoothing (see the module notes).
pub fn atr(
    high: &[f64],
    low: &[f64],
    close: &[f64],
    period: usize,
) -> Result<Vec<f64>, IndicatorError> {
    at_least("atr", "period", period, 1)?;
    let n = same_len(
        "atr",
        &[
            ("high", high.len()),
            ("low", low.len()),
            ("close", close.len()),
        ],
    )?;
    let mut st = Ewm::new(com_from_alpha(1.0 / period as f64), period);
    Ok((0..n)
        .map(|i| st.push(true_range_at(high, low, close, i)))
        .collect())
}

#[inline]
fn simple_return_at(x: &[f64], i: usize) -> f64 {
    if i == 0 {
        f64::NAN
    } else {
        x[i] / x[i - 1] - 1.0
    }
}

/// Simple returns `xₜ/xₜ₋₁ − 1` (pandas `pct_change()`), NaN first.
pub fn simple_returns(x: &[f64]) -> Vec<f64> {
    (0..x.len()).map(|i| simple_return_at(x, i)).collect()
}

/// Log returns `ln(xₜ/xₜ₋₁)`, NaN first.
pub fn log_returns(x: &[f64]) -> Vec<f64> {
    (0..x.len())
        .map(|i| {
            if i == 0 {
                f64::NAN
            } else {
                (x[i] / x[i - 1]).ln()
            }
        })
        .collect()
}

/// Annualised rolling volatility: sample std (ddof = 1) of the last
/// `window` simple returns × √`periods_per_year` (252 for daily equities).
pub fn rolling_volatility(
    close: &[f64],
    window: usize,
    periods_per_year: f64,
) -> Result<Vec<f64>, IndicatorError> {
    at_least("volatility", "window", window, 2)?;
    if !(periods_per_year.is_finite() && periods_per_year > 0.0) {
        return Err(IndicatorError::BadParam {
            indicator: "volatility",
            param: "periods_per_year",
            problem: "must be a positive number".into(),
            value: periods_per_year.to_string(),
        });
    }
    let scale = periods_per_year.sqrt();
    let mut st = RollingVar::default();
    let mut out = Vec::with_capacity(close.len());
    for i in 0..close.len() {
        if i >= window {
            st.remove(prep(simple_return_at(close, i - window)));
        }
        st.add(prep(simple_return_at(close, i)));
        out.push(st.variance(window, 1).sqrt() * scale);
    }
    Ok(out)
}

/// Drawdown from the running peak, `x / cummax(x) − 1` (0 at a new high,
/// negative below it; NaN where x is missing, as pandas' `cummax` skips it).
pub fn drawdown(x: &[f64]) -> Vec<f64> {
    let mut peak = f64::NAN;
    x.iter()
        .map(|&v| {
            if v.is_nan() {
                return f64::NAN;
            }
            if peak.is_nan() || v > peak {
                peak = v;
            }
            v / peak - 1.0
        })
        .collect()
}

/// Rolling Pearson correlation of two aligned columns (pandas
/// `a.rolling(window).corr(b)`); a pair with a missing side is skipped.
pub fn rolling_correlation(
    a: &[f64],
    b: &[f64],
    window: usize,
) -> Result<Vec<f64>, IndicatorError> {
    at_least("correlation", "window", window, 2)?;
    let n = same_len("correlation", &[("a", a.len()), ("b", b.len())])?;
    let mut st = RollingCorr::default();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if i >= window {
            st.remove(prep(a[i - window]), prep(b[i - window]));
        }
        st.add(prep(a[i]), prep(b[i]));
        out.push(st.value(window));
    }
    Ok(out)
}

/// Momentum: `close[t − skip] / close[t − window] − 1` (NaN for the first
/// `window` rows or where a close is missing), data up to t only.
pub(crate) fn momentum(
    close: &[f64],
    window: usize,
    skip: usize,
) -> Result<Vec<f64>, IndicatorError> {
    at_least("momentum", "window", window, 1)?;
    if skip >= window {
        return Err(IndicatorError::BadParam {
            indicator: "momentum",
            param: "skip",
            problem: format!("must be less than the window ({window})"),
            value: skip.to_string(),
        });
    }
    Ok((0..close.len())
        .map(|t| {
            if t < window {
                return f64::NAN;
            }
            let (a, b) = (close[t - window], close[t - skip]);
            if a.is_finite() && b.is_finite() && a != 0.0 {
                b / a - 1.0
            } else {
                f64::NAN
            }
        })
        .collect())
}

// ---------------------------------------------------------------------------
// Warm-up: how much history before a date an indicator needs (docs §7.4.1).

/// The weight below which a recursive indicator's seed no longer counts:
/// past it, the value on a date does not depend on where the series began.
pub(crate) const CONVERGENCE: f64 = 1e-9;

/// Bars of history an indicator's value on a date needs, so that it is the
/// same whatever the series' first date (docs §7.4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Warmup {
    /// This many bars before the date (windows: `window − 1`; recursive
    /// smoothers: until the seed's weight is below [`CONVERGENCE`]).
    Bars(usize),
    /// All the history there is (a running peak).
    All,
}

impl Warmup {
    /// The count to load, `usize::MAX` for all of it.
    pub(crate) fn bars(self) -> usize {
        match self {
            Warmup::Bars(n) => n,
            Warmup::All => usize::MAX,
        }
    }

    /// The larger need of two.
    pub fn max(self, other: Warmup) -> Warmup {
        match (self, other) {
            (Warmup::Bars(a), Warmup::Bars(b)) => Warmup::Bars(a.max(b)),
            _ => Warmup::All,
        }
    }

    /// `n` bars more (an indicator of an indicator, a one-bar lag).
    pub fn plus(self, n: usize) -> Warmup {
        match self {
            Warmup::Bars(a) => Warmup::Bars(a.saturating_add(n)),
            Warmup::All => Warmup::All,
        }
    }
}

/// Bars after which the seed of an exponential recursion with smoothing
/// `alpha` weighs less than [`CONVERGENCE`]: the least N with
/// (1 − α)^N < 1e-9 (0 for α = 1, which keeps no memory).
pub(crate) fn convergence_bars(alpha: f64) -> usize {
    if !(alpha > 0.0 && alpha < 1.0) {
        return 0;
    }
    let n = (CONVERGENCE.ln() / (1.0 - alpha).ln()).floor() + 1.0;
    if n.is_finite() && n > 0.0 {
        n as usize
    } else {
        0
    }
}

/// EMA(span), α = 2/(span + 1).
pub(crate) fn ema_warmup(span: usize) -> usize {
    convergence_bars(2.0 / (span as f64 + 1.0))
}

/// Wilder's smoothing of a one-bar difference (RSI, ATR): α = 1/period,
/// plus the bar the first difference needs.
pub(crate) fn wilder_warmup(period: usize) -> usize {
    convergence_bars(1.0 / period.max(1) as f64).max(period) + 1
}

/// MACD: the slow EMA converges, then the signal EMA of the line must
/// forget the line's early error too (the sum bounds it).
pub(crate) fn macd_warmup(fast: usize, slow: usize, signal: usize, line_only: bool) -> usize {
    let line = ema_warmup(fast).max(ema_warmup(slow));
    if line_only {
        line
    } else {
        line + ema_warmup(signal)
    }
}

// ---------------------------------------------------------------------------
// Named indicators, for tools and the offline planner.

/// An indicator with its parameters resolved (defaults filled in).
#[derive(Clone, Debug, PartialEq)]
pub enum IndicatorSpec {
    Sma {
        window: usize,
    },
    Ema {
        span: usize,
    },
    Rsi {
        period: usize,
    },
    Macd {
        fast: usize,
        slow: usize,
        signal: usize,
    },
    Bollinger {
        window: usize,
        k: f64,
    },
    Atr {
        period: usize,
    },
    Volatility {
        window: usize,
        periods_per_year: f64,
    },
    Returns,
    LogReturns,
    Drawdown,
    /// Rolling correlation of daily returns with another symbol's.
    Correlation {
        window: usize,
        with: String,
    },
    /// The return from `window` bars ago to `skip` bars ago (12-1
    /// momentum: 252, 21).
    Momentum {
        window: usize,
        skip: usize,
    },
}

/// One named output column.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct IndicatorColumn {
    pub name: String,
    pub values: Vec<f64>,
}

/// The longest window (or lag, or skip) a parameter may ask for: about
/// 400 years of daily bars.
const MAX_WINDOW: u64 = 100_000;

fn param_usize(
    indicator: &'static str,
    params: &Value,
    keys: &[&str],
    default: usize,
) -> Result<usize, IndicatorError> {
    for key in keys {
        match params.get(*key) {
            None | Some(Value::Null) => continue,
            Some(v) => {
                let n = v
                    .as_u64()
                    .or_else(|| {
                        v.as_f64()
                            .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                            .map(|f| f as u64)
                    })
                    .or_else(|| v.as_str().and_then(|s| s.trim().parse::<u64>().ok()));
                return match n {
                    // A window past MAX_WINDOW is longer than any series
                    // (and `window + 1` would overflow: docs §2.12).
                    Some(n) if n > MAX_WINDOW => Err(IndicatorError::BadArgument {
                        indicator,
                        param: (*key).to_string(),
                        problem: format!("is too large ({n}; at most {MAX_WINDOW} bars)"),
                    }),
                    Some(n) => usize::try_from(n).map_err(|_| IndicatorError::BadArgument {
                        indicator,
                        param: (*key).to_string(),
                        problem: format!("is too large ({n})"),
                    }),
                    None => Err(IndicatorError::BadArgument {
                        indicator,
                        param: (*key).to_string(),
                        problem: format!("must be a whole number, got {v}"),
                    }),
                };
            }
        }
    }
    Ok(default)
}

fn param_f64(
    indicator: &'static str,
    params: &Value,
    keys: &[&str],
    default: f64,
) -> Result<f64, IndicatorError> {
    for key in keys {
        match params.get(*key) {
            None | Some(Value::Null) => continue,
            Some(v) => {
                // Finite and within ±10⁶ (a band's k, a threshold), so the
                // output's figures stay numbers.
                return v
                    .as_f64()
                    .or_else(|| v.as_str().and_then(|s| s.trim().parse::<f64>().ok()))
                    .filter(|x| x.is_finite() && x.abs() <= 1e6)
                    .ok_or_else(|| IndicatorError::BadArgument {
                        indicator,
                        param: (*key).to_string(),
                        problem: format!("must be a number from -1e6 to 1e6, got {v}"),
                    });
            }
        }
    }
    Ok(default)
}

impl IndicatorSpec {
    /// Parses a name (case-insensitive, a few aliases) and a JSON object of
    /// parameters; missing parameters take the usual defaults (SMA/EMA 20,
    /// RSI 14, MACD 12/26/9, Bollinger 20/2, ATR 14, volatility 20/252,
    /// correlation 20, momentum 252/21).
    pub fn parse(name: &str, params: &Value) -> Result<Self, IndicatorError> {
        let p = if params.is_object() {
            params
        } else {
            &Value::Null
        };
        let key = name.trim().to_ascii_lowercase().replace(['-', ' '], "_");
        let win = ["window", "period", "n", "length", "span"];
        Ok(match key.as_str() {
            "sma" | "ma" | "moving_average" => IndicatorSpec::Sma {
                window: param_usize("sma", p, &win, 20)?,
            },
            "ema" => IndicatorSpec::Ema {
                span: param_usize("ema", p, &["span", "window", "period", "n", "length"], 20)?,
            },
            "rsi" => IndicatorSpec::Rsi {
                period: param_usize("rsi", p, &win, 14)?,
            },
            "macd" => IndicatorSpec::Macd {
                fast: param_usize("macd", p, &["fast"], 12)?,
                slow: param_usize("macd", p, &["slow"], 26)?,
                signal: param_usize("macd", p, &["signal"], 9)?,
            },
            "bollinger" | "bbands" | "bollinger_bands" | "bb" => IndicatorSpec::Bollinger {
                window: param_usize("bollinger", p, &win, 20)?,
                k: param_f64("bollinger", p, &["k", "std", "num_std", "stds"], 2.0)?,
            },
            "atr" => IndicatorSpec::Atr {
                period: param_usize("atr", p, &win, 14)?,
            },
            "volatility" | "vol" | "rolling_volatility" => IndicatorSpec::Volatility {
                window: param_usize("volatility", p, &win, 20)?,
                periods_per_year: param_f64(
                    "volatility",
                    p,
                    &["periods_per_year", "annualization", "annualisation"],
                    252.0,
                )?,
            },
            "returns" | "return" | "simple_returns" | "pct_change" => IndicatorSpec::Returns,
            "log_returns" | "log_return" | "logret" => IndicatorSpec::LogReturns,
            "drawdown" | "dd" => IndicatorSpec::Drawdown,
            "correlation" | "corr" | "rolling_correlation" => {
                let with = ["with", "other", "symbol", "benchmark"]
                    .iter()
                    .find_map(|k| p.get(*k).and_then(Value::as_str))
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| IndicatorError::BadArgument {
                        indicator: "correlation",
                        param: "with".into(),
                        problem: "is required: the other symbol, e.g. {\"with\": \"MSFT\"}".into(),
                    })?;
                IndicatorSpec::Correlation {
                    window: param_usize("correlation", p, &win, 20)?,
                    with: with.to_string(),
                }
            }
            "momentum" | "mom" | "12_1_momentum" | "12_1" => IndicatorSpec::Momentum {
                window: param_usize("momentum", p, &["window", "lookback", "period", "n"], 252)?,
                skip: param_usize("momentum", p, &["skip", "gap", "lag"], 21)?,
            },
            _ => return Err(IndicatorError::UnknownIndicator(name.to_string())),
        })
    }

    /// The canonical name.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            IndicatorSpec::Sma { .. } => "sma",
            IndicatorSpec::Ema { .. } => "ema",
            IndicatorSpec::Rsi { .. } => "rsi",
            IndicatorSpec::Macd { .. } => "macd",
            IndicatorSpec::Bollinger { .. } => "bollinger",
            IndicatorSpec::Atr { .. } => "atr",
            IndicatorSpec::Volatility { .. } => "volatility",
            IndicatorSpec::Returns => "returns",
            IndicatorSpec::LogReturns => "log_returns",
            IndicatorSpec::Drawdown => "drawdown",
            IndicatorSpec::Correlation { .. } => "correlation",
            IndicatorSpec::Momentum { .. } => "momentum",
        }
    }

    /// The resolved parameters as JSON, for reports.
    pub(crate) fn params_json(&self) -> Value {
        use serde_json::json;
        match self {
            IndicatorSpec::Sma { window } => json!({"window": window}),
            IndicatorSpec::Ema { span } => json!({"span": span, "adjust": false}),
            IndicatorSpec::Rsi { period } => json!({"period": period, "smoothing": "wilder"}),
            IndicatorSpec::Macd { fast, slow, signal } => {
                json!({"fast": fast, "slow": slow, "signal": signal})
            }
            IndicatorSpec::Bollinger { window, k } => json!({"window": window, "k": k, "ddof": 1}),
            IndicatorSpec::Atr { period } => json!({"period": period, "smoothing": "wilder"}),
            IndicatorSpec::Volatility {
                window,
                periods_per_year,
            } => json!({"window": window, "periods_per_year": periods_per_year, "ddof": 1}),
            IndicatorSpec::Returns | IndicatorSpec::LogReturns | IndicatorSpec::Drawdown => {
                json!({})
            }
            IndicatorSpec::Correlation { window, with } => {
                json!({"window": window, "with": with, "of": "simple returns"})
            }
            IndicatorSpec::Momentum { window, skip } => {
                json!({"window": window, "skip": skip, "of": "close[t-skip] / close[t-window] - 1"})
            }
        }
    }

    /// Bars of history before a date that its value there needs (docs
    /// §7.4.1): `window − 1` for windows, one more where returns or true
    /// ranges come first, the [`CONVERGENCE`] count for recursive
    /// smoothers, all of it for the drawdown's running peak.
    pub(crate) fn warmup(&self) -> Warmup {
        match *self {
            IndicatorSpec::Sma { window } | IndicatorSpec::Bollinger { window, .. } => {
                Warmup::Bars(window.saturating_sub(1))
            }
            IndicatorSpec::Ema { span } => Warmup::Bars(ema_warmup(span)),
            IndicatorSpec::Rsi { period } | IndicatorSpec::Atr { period } => {
                Warmup::Bars(wilder_warmup(period))
            }
            IndicatorSpec::Macd { fast, slow, signal } => {
                Warmup::Bars(macd_warmup(fast, slow, signal, false))
            }
            IndicatorSpec::Volatility { window, .. }
            | IndicatorSpec::Correlation { window, .. }
            | IndicatorSpec::Momentum { window, .. } => Warmup::Bars(window),
            IndicatorSpec::Returns | IndicatorSpec::LogReturns => Warmup::Bars(1),
            IndicatorSpec::Drawdown => Warmup::All,
        }
    }

    /// The other symbol this indicator needs, if any.
    pub(crate) fn needs_other(&self) -> Option<&str> {
        match self {
            IndicatorSpec::Correlation { with, .. } => Some(with),
            _ => None,
        }
    }

    /// Computes the indicator over OHLC columns. `other_close` is the other
    /// symbol's close, already aligned to `close` (NaN where it has no bar);
    /// only correlation uses it.
    pub(crate) fn compute(
        &self,
        high: &[f64],
        low: &[f64],
        close: &[f64],
        other_close: Option<&[f64]>,
    ) -> Result<Vec<IndicatorColumn>, IndicatorError> {
        let col = |name: &str, values: Vec<f64>| IndicatorColumn {
            name: name.to_string(),
            values,
        };
        Ok(match self {
            IndicatorSpec::Sma { window } => vec![col("sma", sma(close, *window)?)],
            IndicatorSpec::Ema { span } => vec![col("ema", ema(close, *span)?)],
            IndicatorSpec::Rsi { period } => vec![col("rsi", rsi(close, *period)?)],
            IndicatorSpec::Macd { fast, slow, signal } => {
                let m = macd(close, *fast, *slow, *signal)?;
                vec![
                    col("macd", m.line),
                    col("signal", m.signal),
                    col("histogram", m.histogram),
                ]
            }
            IndicatorSpec::Bollinger { window, k } => {
                let b = bollinger(close, *window, *k)?;
                vec![
                    col("middle", b.middle),
                    col("upper", b.upper),
                    col("lower", b.lower),
                ]
            }
            IndicatorSpec::Atr { period } => vec![col("atr", atr(high, low, close, *period)?)],
            IndicatorSpec::Volatility {
                window,
                periods_per_year,
            } => vec![col(
                "volatility",
                rolling_volatility(close, *window, *periods_per_year)?,
            )],
            IndicatorSpec::Returns => vec![col("return", simple_returns(close))],
            IndicatorSpec::LogReturns => vec![col("log_return", log_returns(close))],
            IndicatorSpec::Drawdown => vec![col("drawdown", drawdown(close))],
            IndicatorSpec::Correlation { window, with } => {
                let other = other_close.ok_or_else(|| IndicatorError::BadArgument {
                    indicator: "correlation",
                    param: "with".into(),
                    problem: format!("needs the prices of {with}"),
                })?;
                let a = simple_returns(close);
                let b = simple_returns(other);
                vec![col("correlation", rolling_correlation(&a, &b, *window)?)]
            }
            IndicatorSpec::Momentum { window, skip } => {
                vec![col("momentum", momentum(close, *window, *skip)?)]
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()).max(1.0)
            })
    }

    const N: f64 = f64::NAN;

    #[test]
    fn sma_warms_up_and_skips_missing_like_pandas() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert!(close(&sma(&x, 3).unwrap(), &[N, N, 2.0, 3.0, 4.0]));
        // A NaN inside the window leaves fewer than `window` observations.
        let y = [1.0, N, 3.0, 4.0, 5.0, 6.0];
        assert!(close(&sma(&y, 2).unwrap(), &[N, N, N, 3.5, 4.5, 5.5]));
        assert!(sma(&x, 0).is_err());
        assert!(sma(&[], 3).unwrap().is_empty());
        // Constant windows come out exactly.
        assert_eq!(sma(&[0.1; 10], 3).unwrap()[9], 0.1);
    }

    #[test]
    fn ema_is_seeded_with_the_first_value() {
        let x = [10.0, 11.0, 12.0];
        let e = ema(&x, 3).unwrap(); // alpha = 0.5
        assert!(close(&e, &[10.0, 10.5, 11.25]));
        let w = wilder(&[1.0, 2.0, 3.0], 2).unwrap(); // alpha 0.5, min 2
        assert!(close(&w, &[N, 1.5, 2.25]));
        // ignore_na=False: a gap decays the old weight.
        let g = ewm_mean(&[1.0, N, 3.0], 0.5, 0).unwrap();
        // old_wt = 0.25 after the gap: (0.25*1 + 0.5*3)/(0.75)
        assert!(close(&g, &[1.0, 1.0, (0.25 + 1.5) / 0.75]));
        assert!(ewm_mean(&[1.0], 0.0, 0).is_err());
    }

    #[test]
    fn rsi_is_100_without_losses_and_nan_for_the_warm_up() {
        let up: Vec<f64> = (0..20).map(f64::from).collect();
        let r = rsi(&up, 14).unwrap();
        assert!(r[..14].iter().all(|v| v.is_nan()));
        assert!(r[14..].iter().all(|v| *v == 100.0));
    }

    #[test]
    fn macd_bollinger_atr_shapes_and_errors() {
        let x: Vec<f64> = (0..40).map(|i| 100.0 + (i as f64).sin()).collect();
        let m = macd(&x, 12, 26, 9).unwrap();
        assert_eq!(m.line.len(), 40);
        assert!(m.line[0] == 0.0 && m.histogram.iter().all(|v| v.is_finite()));
        assert!(macd(&x, 26, 12, 9).is_err());
        let b = bollinger(&x, 20, 2.0).unwrap();
        assert!(b.middle[18].is_nan() && b.upper[19] > b.middle[19] && b.lower[19] < b.middle[19]);
        assert!(bollinger(&x, 1, 2.0).is_err());
        let a = atr(&x, &x, &x[..39], 14).unwrap_err();
        assert!(matches!(a, IndicatorError::LengthMismatch { .. }), "{a}");
        let tr = true_range(&[10.0, 12.0], &[9.0, 11.5], &[9.5, 12.0]).unwrap();
        assert!(close(&tr, &[1.0, 2.5]));
    }

    #[test]
    fn returns_drawdown_and_correlation() {
        let x = [100.0, 110.0, 99.0, 120.0];
        assert!(close(
            &simple_returns(&x),
            &[N, 0.1, -0.1, 120.0 / 99.0 - 1.0]
        ));
        assert!(close(
            &log_returns(&x),
            &[N, 1.1f64.ln(), 0.9f64.ln(), (120.0f64 / 99.0).ln()]
        ));
        assert!(close(&drawdown(&x), &[0.0, 0.0, -0.1, 0.0]));
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [2.0, 4.0, 6.0, 8.0, 10.0];
        let c = rolling_correlation(&a, &b, 3).unwrap();
        assert!(c[..2].iter().all(|v| v.is_nan()));
        assert!(c[2..].iter().all(|v| (v - 1.0).abs() < 1e-12));
        let neg: Vec<f64> = b.iter().map(|v| -v).collect();
        assert!((rolling_correlation(&a, &neg, 5).unwrap()[4] + 1.0).abs() < 1e-12);
        // Constant side: undefined.
        assert!(rolling_correlation(&a, &[1.0; 5], 3).unwrap()[4].is_nan());
    }

    #[test]
    fn convergence_bars_is_the_least_n_under_the_bound() {
        for alpha in [1.0 / 14.0, 2.0 / 21.0, 2.0 / 27.0, 0.5] {
            let n = convergence_bars(alpha);
            assert!((1.0 - alpha).powi(n as i32) < CONVERGENCE, "{alpha}");
            assert!((1.0 - alpha).powi(n as i32 - 1) >= CONVERGENCE, "{alpha}");
        }
        assert_eq!(convergence_bars(1.0), 0);
        assert_eq!(ema_warmup(1), 0);
        // The counts docs §2.12 and §7.4.1 quote.
        assert_eq!(ema_warmup(20), 208);
        assert_eq!(wilder_warmup(14), 281);
        assert_eq!(macd_warmup(12, 26, 9, false), 363);
    }

    /// Started `k` bars later (another seed), a recursive indicator agrees
    /// with the one started at the first bar once its warm-up has passed:
    /// the counts are enough, on a price path with large moves.
    #[test]
    fn after_the_warm_up_the_start_no_longer_matters() {
        let x: Vec<f64> = (0..1500)
            .map(|i| {
                let t = i as f64;
                100.0 + 30.0 * (t / 37.0).sin() + 5.0 * (t / 3.1).cos() + t * 0.05
            })
            .collect();
        let k = 200;
        let later = &x[k..];
        let gap = |a: &[f64], b: &[f64], at: usize| (a[k + at] - b[at]).abs();
        let spec = |name: &str| IndicatorSpec::parse(name, &json!({})).unwrap();
        let need = |name: &str| spec(name).warmup().bars();
        let (e, el) = (ema(&x, 20).unwrap(), ema(later, 20).unwrap());
        assert!(gap(&e, &el, need("ema")) < 1e-9 * 100.0);
        let (r, rl) = (rsi(&x, 14).unwrap(), rsi(later, 14).unwrap());
        assert!(
            gap(&r, &rl, need("rsi")) < 1e-7,
            "{}",
            gap(&r, &rl, need("rsi"))
        );
        let (m, ml) = (
            macd(&x, 12, 26, 9).unwrap(),
            macd(later, 12, 26, 9).unwrap(),
        );
        let at = need("macd");
        assert!(
            gap(&m.signal, &ml.signal, at) < 1e-7,
            "{}",
            gap(&m.signal, &ml.signal, at)
        );
        // Before it, the seed still shows.
        assert!(gap(&r, &rl, 20) > 1e-6);
        assert_eq!(spec("sma").warmup(), Warmup::Bars(19));
        assert_eq!(spec("returns").warmup(), Warmup::Bars(1));
        assert_eq!(spec("drawdown").warmup(), Warmup::All);
        assert_eq!(Warmup::Bars(3).max(Warmup::All).plus(2), Warmup::All);
    }

    #[test]
    fn specs_parse_with_defaults_and_aliases() {
        assert_eq!(
            IndicatorSpec::parse("MACD", &json!({})).unwrap(),
            IndicatorSpec::Macd {
                fast: 12,
                slow: 26,
                signal: 9
            }
        );
        assert_eq!(
            IndicatorSpec::parse("bbands", &json!({"period": "30", "k": 2.5})).unwrap(),
            IndicatorSpec::Bollinger { window: 30, k: 2.5 }
        );
        assert!(matches!(
            IndicatorSpec::parse("stochastic", &json!({})),
            Err(IndicatorError::UnknownIndicator(_))
        ));
        let e = IndicatorSpec::parse("corr", &json!({})).unwrap_err();
        assert!(e.to_string().contains("with"), "{e}");
        let e = IndicatorSpec::parse("sma", &json!({"window": "ten"})).unwrap_err();
        assert!(e.to_string().contains("window"), "{e}");
        assert_eq!(
            IndicatorSpec::parse("momentum", &json!({})).unwrap(),
            IndicatorSpec::Momentum {
                window: 252,
                skip: 21
            }
        );
    }

    #[test]
    fn momentum_is_the_return_from_window_to_skip_bars_ago() {
        let x: Vec<f64> = (1..=8).map(f64::from).collect();
        let m = momentum(&x, 4, 1).unwrap();
        assert!(m[..4].iter().all(|v| v.is_nan()));
        // At t = 4: close[3] / close[0] − 1 = 4 / 1 − 1.
        assert_eq!(m[4], 3.0);
        assert_eq!(m[7], 7.0 / 4.0 - 1.0);
        assert!(momentum(&x, 4, 4).is_err());
        let spec = IndicatorSpec::parse("mom", &json!({"window": 4, "skip": 1})).unwrap();
        assert_eq!(spec.warmup(), Warmup::Bars(4));
        assert_eq!(spec.compute(&x, &x, &x, None).unwrap()[0].values[4], 3.0);
    }
}
