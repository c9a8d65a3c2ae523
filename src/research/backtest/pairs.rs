//! The `pairs` built-in (docs §7.7): a spread between two codes, traded on
//! its z-score. Unlike the other built-ins, its signal for one leg needs the
//! other leg's prices, so [`leg_signals`] takes both series and
//! `rust_signals` calls it instead of the per-series path.
//!
//! On the legs' common dates, for each bar t with `window` bars up to and
//! including t (x = ln close of the second leg, y = ln close of the first):
//!
//! - hedge ratio β_t and intercept α_t: OLS of y on x over the window
//!   (two-pass: centred sums), so β_t uses closes up to t and no later;
//! - spread s_t = y_t − α_t − β_t·x_t;
//! - z_t: s_t against the residuals y_u − α_t − β_t·x_u of the last
//!   `z_window` bars u ≤ t (their mean and sample std, ddof 1);
//! - position: flat → long the spread (long the first leg, short β of the
//!   second) when z_t ≤ −entry, short the spread when z_t ≥ entry, only
//!   while β_t > 0 (a negative ratio is no hedge); out when |z_t| ≤ exit on
//!   the way back (a long at z_t ≥ −exit, a short at z_t ≤ exit); with a
//!   `stop`, out when |z_t| ≥ stop, and no new entry until |z| < entry.
//!   Weights are fixed at entry: first leg ±size/(1+β), second ∓size·β/(1+β)
//!   (with log prices β is the ratio of dollar exposures), so under `hold`
//!   nothing is resized mid-trade.
//!
//! With `hedge: "cointegration"` (docs §7.7, §16.3) the ratio is not
//! rolled: on the formation window — the `window` bars before the
//! backtest's start (from the warm-up history), or the first `window` bars
//! when there are too few before it — the Engle–Granger test of y on x runs
//! as `stat_test` runs it, and its hedge ratio and intercept are held fixed
//! from the window's last bar on; the spread is y_t − α − β·x_t and z_t its
//! value against the last `z_window` spreads. Only bars up to the
//! formation's end set the ratio, so nothing is looked ahead; the run
//! reports the test's statistic and p-value with the formation's dates.
//!
//! The engine then shifts the weights one bar and fills at the next open
//! (§7.4): a z-score seen at the close of t trades at the open of t+1.
//! Reported: the latest β and z, and the spread's OU half-life −ln 2 / b
//! from the OLS Δs_t = a + b·s_{t−1} over the run's spread series (the
//! usual first-order form of −ln 2 / ln(1 + b); none when b ≥ 0, which is
//! no mean reversion).

use chrono::NaiveDate;
use serde_json::{Map, Value, json};

use super::config_reader::{ConfigIssue, Reader};
use crate::research::data::{Bars, Market, detect_market};
use crate::research::timeseries::{Autolag, CointResult, Trend, engle_granger};

/// How the hedge ratio is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hedge {
    /// OLS over the last `window` bars, re-estimated every bar.
    Rolling,
    /// Engle–Granger on the formation window, then fixed.
    Cointegration,
}

impl Hedge {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Hedge::Rolling => "rolling",
            Hedge::Cointegration => "cointegration",
        }
    }
}

/// The parameters of the `pairs` built-in, defaults filled in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairsParams {
    /// Formation window of the hedge ratio, in bars.
    pub window: usize,
    /// Window of the z-score's mean and deviation (≤ `window`).
    pub z_window: usize,
    pub entry: f64,
    pub exit: f64,
    pub stop: Option<f64>,
    /// Gross weight of the two legs together, in (0, 1].
    pub size: f64,
    pub hedge: Hedge,
    /// The backtest's start: a cointegration hedge's formation window is
    /// the `window` bars before it (set from the config, not a parameter).
    pub start: Option<NaiveDate>,
}

impl Default for PairsParams {
    fn default() -> Self {
        PairsParams {
            window: 60,
            z_window: 60,
            entry: 2.0,
            exit: 0.5,
            stop: None,
            size: 1.0,
            hedge: Hedge::Rolling,
            start: None,
        }
    }
}

/// Longest formation window.
const MAX_WINDOW: u64 = 2_000;

impl PairsParams {
    pub(crate) const KEYS: [&'static str; 7] = [
        "window", "z_window", "entry", "exit", "stop", "size", "hedge",
    ];

    /// Reads the parameters off `r` (whose unknown keys the caller refuses).
    pub(crate) fn read(r: &mut Reader<'_>) -> PairsParams {
        let d = PairsParams::default();
        let window = r
            .integer("window", 3, MAX_WINDOW)
            .map_or(d.window, |n| n as usize);
        let z_window = r
            .integer("z_window", 2, MAX_WINDOW)
            .map_or(window, |n| n as usize);
        if z_window > window {
            r.issue(
                "z_window",
                "invalid_value",
                format!("z_window ({z_window}) must not exceed window ({window}): the z-score reads residuals of the formation window"),
            );
        }
        let entry = r.number("entry", 0.0, true, 10.0).unwrap_or(d.entry);
        let exit = r.number("exit", 0.0, false, 10.0).unwrap_or(d.exit);
        if exit >= entry {
            r.issue(
                "exit",
                "invalid_value",
                format!("exit ({exit}) must be below entry ({entry}); e.g. entry 2, exit 0.5"),
            );
        }
        let stop = r.number("stop", 0.0, true, 100.0);
        if let Some(s) = stop
            && s <= entry
        {
            r.issue(
                "stop",
                "invalid_value",
                format!("stop ({s}) must be above entry ({entry}); e.g. 4"),
            );
        }
        let size = r.number("size", 0.0, true, 1.0).unwrap_or(d.size);
        let hedge = match r.string("hedge").map(str::to_ascii_lowercase).as_deref() {
            None | Some("rolling") => Hedge::Rolling,
            Some("cointegration" | "engle_granger" | "fixed") => Hedge::Cointegration,
            Some(other) => {
                r.issue(
                    "hedge",
                    "invalid_value",
                    format!("hedge '{other}' is not one of rolling, cointegration"),
                );
                Hedge::Rolling
            }
        };
        PairsParams {
            window,
            z_window,
            entry,
            exit,
            stop,
            size,
            hedge,
            start: None,
        }
    }

    pub fn to_json(&self) -> Value {
        json!({"window": self.window, "z_window": self.z_window, "entry": self.entry,
               "exit": self.exit, "stop": self.stop, "size": self.size,
               "hedge": self.hedge.as_str()})
    }
}

/// The names `pairs` is known by (after lower-casing, `-` and spaces as `_`).
pub(crate) const ALIASES: [&str; 6] = [
    "pairs",
    "pair",
    "pairs_trading",
    "pair_trading",
    "stat_arb",
    "spread",
];

/// Whether a config's `strategy` names the pairs built-in (checked even
/// when its parameters are wrong, so every problem is reported at once).
pub(crate) fn is_named(strategy: Option<&Value>) -> bool {
    let name = match strategy {
        Some(Value::String(s)) => s.as_str(),
        Some(Value::Object(o)) => o.get("name").and_then(Value::as_str).unwrap_or(""),
        _ => "",
    };
    let key = name.trim().to_ascii_lowercase().replace(['-', ' '], "_");
    ALIASES.contains(&key.as_str())
}

/// Problems of a pairs config that the parameters alone cannot show: two
/// codes, both of which may be sold short.
pub(crate) fn check_config(codes: &[String], allow_short: Option<bool>) -> Vec<ConfigIssue> {
    let mut out = Vec::new();
    if codes.len() != 2 {
        out.push(ConfigIssue::new(
            "codes",
            "invalid_value",
            format!(
                "the pairs strategy trades exactly two codes (the legs), got {}; e.g. [\"KO\", \"PEP\"]",
                codes.len()
            ),
        ));
    }
    if allow_short == Some(false) {
        out.push(ConfigIssue::new(
            "allow_short",
            "invalid_value",
            "the pairs strategy shorts one leg; remove allow_short: false",
        ));
    }
    let no_short = [
        Market::AShare,
        Market::IndiaEquity,
        Market::KrEquity,
        Market::VietnamEquity,
    ];
    for c in codes {
        if no_short.contains(&detect_market(c)) {
            out.push(ConfigIssue::new(
                "codes",
                "invalid_value",
                format!("{c}: its market cannot be sold short, so it cannot be a leg of a pair"),
            ));
        }
    }
    out
}

/// Everything the strategy computed, on the legs' common dates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PairPath {
    pub dates: Vec<NaiveDate>,
    pub beta: Vec<f64>,
    pub alpha: Vec<f64>,
    pub spread: Vec<f64>,
    pub z: Vec<f64>,
    /// +1 long the spread, −1 short, 0 flat, after the bar's close.
    pub position: Vec<f64>,
    /// Target weights of the first and the second leg.
    pub weight_a: Vec<f64>,
    pub weight_b: Vec<f64>,
}

/// The two legs' closes on their common dates.
fn common(a: &Bars, b: &Bars) -> (Vec<NaiveDate>, Vec<f64>, Vec<f64>) {
    let (mut i, mut j) = (0, 0);
    let (mut dates, mut ya, mut yb) = (Vec::new(), Vec::new(), Vec::new());
    while i < a.len() && j < b.len() {
        match a.dates[i].cmp(&b.dates[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                dates.push(a.dates[i]);
                ya.push(a.close[i]);
                yb.push(b.close[j]);
                i += 1;
                j += 1;
            }
        }
    }
    (dates, ya, yb)
}

/// OLS of `y` on `x` (two-pass): (intercept, slope); NaN when `x` is flat.
fn ols(x: &[f64], y: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mx = x.iter().sum::<f64>() / n;
    let my = y.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (&xi, &yi) in x.iter().zip(y) {
        sxy += (xi - mx) * (yi - my);
        sxx += (xi - mx) * (xi - mx);
    }
    if sxx <= 0.0 {
        return (f64::NAN, f64::NAN);
    }
    let slope = sxy / sxx;
    (my - slope * mx, slope)
}

/// Mean and sample standard deviation (ddof 1).
fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let ss: f64 = v.iter().map(|x| (x - m) * (x - m)).sum();
    (m, (ss / (n - 1.0)).sqrt())
}

/// The formation window [from, to) of a `cointegration` hedge on `dates`:
/// the `window` bars before the first date on or after the start, or the
/// first `window` bars when there are too few before it (or no start).
pub(crate) fn formation(p: &PairsParams, dates: &[NaiveDate]) -> (usize, usize) {
    let first = p.start.map_or(0, |s| {
        dates.iter().position(|d| *d >= s).unwrap_or(dates.len())
    });
    if first >= p.window {
        (first - p.window, first)
    } else {
        (0, p.window.min(dates.len()))
    }
}

/// The Engle–Granger test on the formation window, whose ratio a
/// `cointegration` hedge holds.
pub(crate) fn formation_test(
    p: &PairsParams,
    dates: &[NaiveDate],
    x: &[f64],
    y: &[f64],
) -> Option<CointResult> {
    let (from, to) = formation(p, dates);
    engle_granger(
        &y[from..to],
        &x[from..to],
        Trend::Constant,
        Autolag::Aic,
        None,
    )
    .ok()
}

/// β, α, spread and z with the formation window's fixed ratio, from the
/// window's last bar on.
fn fixed_hedge_and_z(p: &PairsParams, dates: &[NaiveDate], x: &[f64], y: &[f64]) -> [Vec<f64>; 4] {
    let n = x.len();
    let mut out = [
        vec![f64::NAN; n],
        vec![f64::NAN; n],
        vec![f64::NAN; n],
        vec![f64::NAN; n],
    ];
    if n < p.window {
        return out;
    }
    let Some(test) = formation_test(p, dates, x, y) else {
        return out;
    };
    let (alpha, beta) = (test.intercept, test.hedge_ratio);
    let spread: Vec<f64> = x.iter().zip(y).map(|(x, y)| y - alpha - beta * x).collect();
    let (_, to) = formation(p, dates);
    for t in to - 1..n {
        out[0][t] = beta;
        out[1][t] = alpha;
        out[2][t] = spread[t];
        if t + 1 >= p.z_window {
            let (m, sd) = mean_std(&spread[t + 1 - p.z_window..=t]);
            if sd > 0.0 && sd.is_finite() {
                out[3][t] = (spread[t] - m) / sd;
            }
        }
    }
    out
}

/// β, α, spread and z on the common dates (module docs).
fn hedge_and_z(p: &PairsParams, dates: &[NaiveDate], x: &[f64], y: &[f64]) -> [Vec<f64>; 4] {
    if p.hedge == Hedge::Cointegration {
        return fixed_hedge_and_z(p, dates, x, y);
    }
    let n = x.len();
    let mut out = [
        vec![f64::NAN; n],
        vec![f64::NAN; n],
        vec![f64::NAN; n],
        vec![f64::NAN; n],
    ];
    let mut res = vec![0.0; p.z_window];
    for t in p.window.saturating_sub(1)..n {
        let from = t + 1 - p.window;
        let (alpha, beta) = ols(&x[from..=t], &y[from..=t]);
        if !beta.is_finite() {
            continue;
        }
        for (k, r) in res.iter_mut().enumerate() {
            let u = t + 1 - p.z_window + k;
            *r = y[u] - alpha - beta * x[u];
        }
        let s = y[t] - alpha - beta * x[t];
        let (m, sd) = mean_std(&res);
        out[0][t] = beta;
        out[1][t] = alpha;
        out[2][t] = s;
        if sd > 0.0 && sd.is_finite() {
            out[3][t] = (s - m) / sd;
        }
    }
    out
}

/// The strategy on two legs' bars (first leg `a`, second `b`).
pub fn path(p: &PairsParams, a: &Bars, b: &Bars) -> PairPath {
    let (dates, ca, cb) = common(a, b);
    let y: Vec<f64> = ca.iter().map(|c| c.ln()).collect();
    let x: Vec<f64> = cb.iter().map(|c| c.ln()).collect();
    let [beta, alpha, spread, z] = hedge_and_z(p, &dates, &x, &y);
    let n = dates.len();
    let (mut position, mut weight_a, mut weight_b) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut pos, mut wa, mut wb, mut cooling) = (0.0f64, 0.0, 0.0, false);
    for t in 0..n {
        let zt = z[t];
        if zt.is_finite() {
            let back = (pos > 0.0 && zt >= -p.exit) || (pos < 0.0 && zt <= p.exit);
            let stopped = pos != 0.0 && p.stop.is_some_and(|s| zt.abs() >= s);
            if back || stopped {
                pos = 0.0;
                cooling = stopped && !back;
            }
            if cooling && zt.abs() < p.entry {
                cooling = false;
            }
            if pos == 0.0 && !cooling && beta[t] > 0.0 && zt.abs() >= p.entry {
                pos = if zt <= -p.entry { 1.0 } else { -1.0 };
                let g = p.size / (1.0 + beta[t]);
                wa = pos * g;
                wb = -pos * g * beta[t];
            }
        }
        if pos == 0.0 {
            (wa, wb) = (0.0, 0.0);
        }
        position.push(pos);
        weight_a.push(wa);
        weight_b.push(wb);
    }
    PairPath {
        dates,
        beta,
        alpha,
        spread,
        z,
        position,
        weight_a,
        weight_b,
    }
}

/// A leg's weights on its own calendar: the pair's weight of the last
/// common date on or before each bar (0 before the first).
fn on_calendar(bars: &Bars, dates: &[NaiveDate], w: &[f64]) -> Vec<f64> {
    let mut j = 0;
    let mut last = 0.0;
    bars.dates
        .iter()
        .map(|d| {
            while j < dates.len() && dates[j] <= *d {
                last = w[j];
                j += 1;
            }
            last
        })
        .collect()
}

/// Both legs' target weights, each on its own calendar (for
/// `rust_signals`); anything but two series gets flat signals.
pub(crate) fn leg_signals(p: &PairsParams, legs: &[&Bars]) -> Vec<Vec<f64>> {
    let [a, b] = legs else {
        return legs.iter().map(|s| vec![0.0; s.len()]).collect();
    };
    let path = path(p, a, b);
    vec![
        on_calendar(a, &path.dates, &path.weight_a),
        on_calendar(b, &path.dates, &path.weight_b),
    ]
}

/// (a, b) of the OLS Δs_t = a + b·s_{t−1} over consecutive finite spreads.
pub fn ar1(spread: &[f64]) -> Option<(f64, f64)> {
    let (mut lag, mut diff) = (Vec::new(), Vec::new());
    for w in spread.windows(2) {
        if w[0].is_finite() && w[1].is_finite() {
            lag.push(w[0]);
            diff.push(w[1] - w[0]);
        }
    }
    if lag.len() < 3 {
        return None;
    }
    let (a, b) = ols(&lag, &diff);
    (a.is_finite() && b.is_finite()).then_some((a, b))
}

/// A path from index `from` on.
fn in_range(p: PairPath, from: usize) -> PairPath {
    let cut = |v: Vec<f64>| v.get(from..).map_or_else(Vec::new, <[f64]>::to_vec);
    PairPath {
        dates: p
            .dates
            .get(from..)
            .map_or_else(Vec::new, <[NaiveDate]>::to_vec),
        beta: cut(p.beta),
        alpha: cut(p.alpha),
        spread: cut(p.spread),
        z: cut(p.z),
        position: cut(p.position),
        weight_a: cut(p.weight_a),
        weight_b: cut(p.weight_b),
    }
}

/// The formation window's dates and Engle–Granger test (docs §16.3).
fn formation_stats(m: &mut Map<String, Value>, p: &PairsParams, a: &Bars, b: &Bars) {
    let (dates, ca, cb) = common(a, b);
    let y: Vec<f64> = ca.iter().map(|c| c.ln()).collect();
    let x: Vec<f64> = cb.iter().map(|c| c.ln()).collect();
    let test = (dates.len() >= p.window)
        .then(|| formation_test(p, &dates, &x, &y))
        .flatten();
    let num = |x: Option<f64>| {
        x.filter(|x| x.is_finite())
            .map_or(Value::Null, |x| json!(super::metrics::round_dp(x, 6)))
    };
    m.insert(
        "pair_coint_statistic".into(),
        num(test.as_ref().map(|t| t.statistic)),
    );
    m.insert(
        "pair_coint_p_value".into(),
        num(test.as_ref().map(|t| t.p_value)),
    );
    let (from, to) = formation(p, &dates);
    let at = |i: usize| dates.get(i).map_or(Value::Null, |d| json!(d.to_string()));
    m.insert("pair_formation_start".into(), at(from));
    m.insert("pair_formation_end".into(), at(to.saturating_sub(1)));
}

/// −ln 2 / b in bars, when the spread reverts (b < 0).
pub fn half_life(b: f64) -> Option<f64> {
    (b < 0.0).then(|| -std::f64::consts::LN_2 / b)
}

/// The figures a pairs run reports beside its metrics (`metrics.json`,
/// `metrics.csv`, the tool's result): the latest hedge ratio, intercept,
/// spread and z-score, the position after the last close, the spread's
/// AR(1) slope b and its half-life in bars (null when b ≥ 0), over the
/// run's range (`legs`); a cointegration hedge is computed, as the signals
/// are, on `history` (the legs with their warm-up) and adds its formation
/// test.
pub fn stats(
    p: &PairsParams,
    legs: &[&Bars],
    history: &[&Bars],
    codes: &[String],
) -> Map<String, Value> {
    let mut m = Map::new();
    let [a, b] = legs else {
        return m;
    };
    let path = match (p.hedge, history) {
        (Hedge::Cointegration, [ha, hb]) => {
            let full = path(p, ha, hb);
            let from = a.dates.first().map_or(0, |d| {
                full.dates
                    .iter()
                    .position(|x| x >= d)
                    .unwrap_or(full.dates.len())
            });
            formation_stats(&mut m, p, ha, hb);
            in_range(full, from)
        }
        _ => path(p, a, b),
    };
    let last = |v: &[f64]| v.iter().rev().copied().find(|x| x.is_finite());
    let num = |x: Option<f64>| {
        x.filter(|x| x.is_finite())
            .map_or(Value::Null, |x| json!(super::metrics::round_dp(x, 6)))
    };
    let fit = ar1(&path.spread);
    m.insert("pair_legs".into(), json!(codes.join("/")));
    m.insert("pair_hedge_ratio".into(), num(last(&path.beta)));
    m.insert("pair_hedge_intercept".into(), num(last(&path.alpha)));
    m.insert("pair_spread".into(), num(last(&path.spread)));
    m.insert("pair_zscore".into(), num(last(&path.z)));
    m.insert(
        "pair_zscore_date".into(),
        path.z
            .iter()
            .rposition(|x| x.is_finite())
            .map_or(Value::Null, |i| json!(path.dates[i].to_string())),
    );
    m.insert(
        "pair_position".into(),
        json!(path.position.last().copied().unwrap_or(0.0)),
    );
    m.insert("pair_hedge".into(), json!(p.hedge.as_str()));
    m.insert("pair_spread_ar1_b".into(), num(fit.map(|f| f.1)));
    m.insert(
        "pair_half_life_bars".into(),
        num(fit.and_then(|f| half_life(f.1))),
    );
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bars(dates: &[NaiveDate], close: &[f64]) -> Bars {
        let mut b = Bars::default();
        for (d, c) in dates.iter().zip(close) {
            b.push(*d, *c, *c, *c, *c, 1.0);
        }
        b
    }

    fn day(i: usize) -> NaiveDate {
        NaiveDate::from_ymd_opt(2010, 1, 1).unwrap() + chrono::Duration::days(i as i64)
    }

    /// y = 0.3 + 1.5·x exactly plus a known residual: OLS recovers the
    /// ratio, and a spike of the residual opens a short of the spread.
    #[test]
    fn an_exact_relation_gives_its_ratio_and_a_spike_trades() {
        let n = 40;
        let dates: Vec<NaiveDate> = (0..n).map(day).collect();
        let x: Vec<f64> = (0..n)
            .map(|i| 3.0 + 0.01 * i as f64 + 0.002 * ((i * 7) % 5) as f64)
            .collect();
        // A small zig-zag residual, and a spike at bar 30.
        let e: Vec<f64> = (0..n)
            .map(|i| {
                if i == 30 {
                    0.05
                } else if i % 2 == 0 {
                    0.001
                } else {
                    -0.001
                }
            })
            .collect();
        let y: Vec<f64> = x.iter().zip(&e).map(|(x, e)| 0.3 + 1.5 * x + e).collect();
        let a = bars(&dates, &y.iter().map(|v| v.exp()).collect::<Vec<_>>());
        let b = bars(&dates, &x.iter().map(|v| v.exp()).collect::<Vec<_>>());
        let p = PairsParams {
            window: 10,
            z_window: 10,
            ..PairsParams::default()
        };
        let path = path(&p, &a, &b);
        assert!(path.beta[8].is_nan() && path.beta[9].is_finite());
        assert!((path.beta[20] - 1.5).abs() < 0.05, "{}", path.beta[20]);
        // Before the spike nothing is stretched; at the spike, short the spread.
        assert!(path.position[..30].iter().all(|p| *p == 0.0));
        assert!(path.z[30] >= 2.0, "{}", path.z[30]);
        assert_eq!(path.position[30], -1.0);
        let (wa, wb) = (path.weight_a[30], path.weight_b[30]);
        assert!(wa < 0.0 && wb > 0.0);
        assert!((wa.abs() + wb.abs() - 1.0).abs() < 1e-12);
        assert!((wb / -wa - path.beta[30]).abs() < 1e-12, "dollar ratio β");
        // The signals on each leg's calendar are the path's weights.
        let s = leg_signals(&p, &[&a, &b]);
        assert_eq!(s[0], path.weight_a);
        assert_eq!(s[1], path.weight_b);
    }

    /// The cointegration hedge holds the formation window's Engle–Granger
    /// ratio (the `window` bars before the start): bars after it do not
    /// move the ratio.
    #[test]
    fn a_cointegration_hedge_is_fixed_on_the_formation_window() {
        let n = 200;
        let dates: Vec<NaiveDate> = (0..n).map(day).collect();
        let mut xv = 3.0;
        let mut s = 0.0;
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for i in 0..n {
            xv += 0.01 * (((i * 7919) % 13) as f64 - 6.0) / 6.0;
            s = 0.5 * s + 0.004 * (((i * 104_729) % 11) as f64 - 5.0) / 5.0;
            x.push(xv);
            y.push(0.2 + 1.3 * xv + s);
        }
        let exp = |v: &[f64]| v.iter().map(|v| v.exp()).collect::<Vec<_>>();
        let p = PairsParams {
            window: 100,
            z_window: 30,
            hedge: Hedge::Cointegration,
            start: Some(day(130)),
            ..PairsParams::default()
        };
        assert_eq!(formation(&p, &dates), (30, 130));
        let (a, b) = (bars(&dates, &exp(&y)), bars(&dates, &exp(&x)));
        let path = path(&p, &a, &b);
        let test = formation_test(&p, &dates, &x, &y).unwrap();
        assert!(path.beta[128].is_nan());
        assert_eq!(path.beta[129], test.hedge_ratio);
        assert_eq!(path.beta[199], test.hedge_ratio);
        assert!(
            (test.hedge_ratio - 1.3).abs() < 0.05,
            "{}",
            test.hedge_ratio
        );
        // A shock after the formation changes spreads, not the ratio.
        let mut y2 = y.clone();
        y2[150] += 0.2;
        let shocked = super::path(&p, &bars(&dates, &exp(&y2)), &b);
        assert_eq!(shocked.beta[199], test.hedge_ratio);
        assert!(shocked.z[150] > 2.0, "{}", shocked.z[150]);
        // The run's figures: the range from the start, the formation from
        // the history.
        let range_dates = &dates[130..];
        let (ra, rb) = (
            bars(range_dates, &exp(&y[130..])),
            bars(range_dates, &exp(&x[130..])),
        );
        let m = stats(&p, &[&ra, &rb], &[&a, &b], &["A".into(), "B".into()]);
        assert_eq!(m["pair_hedge"], "cointegration");
        assert_eq!(m["pair_formation_start"], json!(day(30).to_string()));
        assert_eq!(m["pair_formation_end"], json!(day(129).to_string()));
        assert_eq!(
            m["pair_hedge_ratio"],
            json!(super::super::metrics::round_dp(test.hedge_ratio, 6))
        );
        let pv = m["pair_coint_p_value"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&pv), "{m:?}");
        // Without history before the start, the first window forms it.
        let cold = PairsParams {
            start: Some(day(0)),
            ..p
        };
        assert_eq!(formation(&cold, &dates), (0, 100));
    }

    #[test]
    fn half_life_of_an_ar1_spread() {
        // s_t = 0.9·s_{t−1} exactly: b = −0.1, half-life ln 2 / 0.1.
        let s: Vec<f64> = (0..50).map(|i| 0.9f64.powi(i)).collect();
        let (a, b) = ar1(&s).unwrap();
        assert!(a.abs() < 1e-12 && (b + 0.1).abs() < 1e-12, "{a} {b}");
        let hl = half_life(b).unwrap();
        assert!((hl - std::f64::consts::LN_2 / 0.1).abs() < 1e-9);
        assert_eq!(half_life(0.01), None, "no reversion, no half-life");
    }

    #[test]
    fn a_pair_needs_two_shortable_codes() {
        let one = check_config(&["KO".into()], None);
        assert!(one[0].message.contains("exactly two codes"), "{one:?}");
        let long_only = check_config(&["KO".into(), "PEP".into()], Some(false));
        assert_eq!(long_only[0].key, "allow_short");
        let ashare = check_config(&["600519.SH".into(), "000858.SZ".into()], None);
        assert_eq!(ashare.len(), 2, "{ashare:?}");
        assert!(check_config(&["KO".into(), "PEP".into()], None).is_empty());
    }
}
