//! Metrics with the exact definitions of docs §7.5 (`calc_metrics`).
//!
//! Notation: E the equity series (n bars), C the initial cash, B bars per
//! year, r_t = E_t / E_{t−1} − 1 with r_0 = 0 (pandas `pct_change` with the
//! first NaN as 0), b_t the benchmark's bar returns, f_t the risk-free rate
//! of bar t (f_0 = 0; see `research::data::rates::per_bar`: the 3-month
//! Treasury yield y of the bar's date as (1 + y)^(1/B) − 1 for US equities
//! the curve covers, else 0) and x_t = r_t − f_t the excess returns. `std` is the sample
//! standard deviation (ddof = 1; 0 when n ≤ 1), as pandas. "k dp" means
//! rounded to k decimals (half away from zero; Python's `round` rounds
//! binary ties to even, which differs only on exact ties).
//!
//! | metric | definition |
//! |---|---|
//! | final_value | E_last |
//! | total_return | E_last / C − 1 |
//! | annual_return | (1 + total)^(B / max(n, 1)) − 1; −1 if 1 + total ≤ 0; +∞ when it overflows |
//! | sharpe | mean(x) / (std(x) + 1e-10) · √B; 0 if any x is non-finite or the result is (the original uses r: f = 0) |
//! | max_drawdown | min_t (E_t − P_t) / P_t, P = cummax(E) floored at C (a 0 divisor counts as 1) |
//! | calmar | annual / \|max_drawdown\| (0 if \|max_drawdown\| ≤ 1e-10), 4 dp |
//! | sortino | mean(x) / (std of the negative x (1e-10 with ≤ 1 of them) + 1e-10) · √B, 4 dp |
//! | win_rate | trades with pnl > 0 / trades (0 without trades) |
//! | profit_loss_ratio | mean winning pnl / \|mean losing pnl\| (0 without losses), 4 dp |
//! | profit_factor | gross profit / \|gross loss\| (0 without losses), 4 dp |
//! | max_consecutive_loss | longest run of trades with pnl < 0 |
//! | avg_holding_bars | mean holding bars of trades held > 0 bars, 1 dp (the original's `avg_holding_days`) |
//! | avg_holding_days | mean *calendar* days of the same trades, 1 dp (§12.17: the original's value of this name is bars) |
//! | trade_count | round trips |
//! | benchmark_return | Π(1 + b) − 1, 6 dp |
//! | excess_return | total − benchmark, 6 dp |
//! | information_ratio | mean(r − b) / (std(r − b) + 1e-10) · √B, 4 dp |
//! | tracking_error | std(r − b) · √B, 6 dp |
//! | benchmark_beta | cov(r, b) / var(b) (ddof 1; 0 if var ≤ 0), 4 dp |
//! | avg_turnover, total_turnover | per bar Σ fill notional / (2·\|E\|); mean and sum over bars, 6 dp |
//!
//! B: 252 for equities, 365 for crypto; with several markets
//! B = ⌊n / years⌋, years = calendar days / 365.25 (1 when ≤ 0).
//! Empty equity: every metric 0 and final_value = C.

use chrono::NaiveDate;
use serde_json::{Map, Value, json};

/// What the metrics need from one round trip.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TradeStat {
    pub pnl: f64,
    pub holding_bars: usize,
    pub holding_days: i64,
}

/// The scalar metrics of §7.5.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    pub final_value: f64,
    pub total_return: f64,
    pub annual_return: f64,
    pub max_drawdown: f64,
    pub sharpe: f64,
    pub calmar: f64,
    pub sortino: f64,
    pub win_rate: f64,
    pub profit_loss_ratio: f64,
    pub profit_factor: f64,
    pub max_consecutive_loss: usize,
    pub avg_holding_bars: f64,
    pub avg_holding_days: f64,
    pub trade_count: usize,
    pub benchmark_return: f64,
    pub excess_return: f64,
    pub information_ratio: f64,
    pub tracking_error: f64,
    pub benchmark_beta: f64,
    pub avg_turnover: f64,
    pub total_turnover: f64,
    /// The B used.
    pub bars_per_year: f64,
    pub bars: usize,
}

/// Rounds to `dp` decimals, half away from zero.
pub(crate) fn round_dp(x: f64, dp: i32) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let s = 10f64.powi(dp);
    let y = (x * s).round() / s;
    if y == 0.0 { 0.0 } else { y }
}

pub(crate) fn mean(x: &[f64]) -> f64 {
    if x.is_empty() {
        0.0
    } else {
        x.iter().sum::<f64>() / x.len() as f64
    }
}

/// Sample standard deviation (ddof = 1), 0 when n ≤ 1.
pub(crate) fn std(x: &[f64]) -> f64 {
    let n = x.len();
    if n <= 1 {
        return 0.0;
    }
    let m = mean(x);
    (x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1) as f64).sqrt()
}

/// r_t = E_t / E_{t−1} − 1, r_0 = 0.
pub(crate) fn returns(equity: &[f64]) -> Vec<f64> {
    let mut r = Vec::with_capacity(equity.len());
    if !equity.is_empty() {
        r.push(0.0);
    }
    for w in equity.windows(2) {
        r.push(w[1] / w[0] - 1.0);
    }
    r
}

/// mean(r) / (std(r) + 1e-10) · √B; 0 if any r or the result is non-finite.
pub(crate) fn sharpe(r: &[f64], bars_per_year: f64) -> f64 {
    if r.iter().any(|x| !x.is_finite()) {
        return 0.0;
    }
    let s = mean(r) / (std(r) + 1e-10) * bars_per_year.sqrt();
    if s.is_finite() { s } else { 0.0 }
}

/// min_t (E_t − P_t) / P_t with P the running peak floored at `floor`.
pub(crate) fn max_drawdown(equity: &[f64], floor: f64) -> f64 {
    let mut peak = floor;
    let mut worst = 0.0f64;
    for &e in equity {
        if e > peak {
            peak = e;
        }
        let div = if peak == 0.0 { 1.0 } else { peak };
        let dd = (e - peak) / div;
        if dd < worst {
            worst = dd;
        }
    }
    worst
}

/// The deepest drawdown of a path, with where it started and ended:
/// indices into the path. `depth` is negative, as `max_drawdown`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DrawdownSpan {
    /// The running peak's bar (0 when the peak is the floor, before the
    /// first bar rose above it).
    pub peak: usize,
    pub trough: usize,
    /// The first bar after the trough back at or above the peak; `None`
    /// when the path ends below it.
    pub recovery: Option<usize>,
    pub depth: f64,
}

/// [`max_drawdown`] with its bars: the same figure (bit for bit) and the
/// peak, trough and recovery it runs between. `None` for an empty path or
/// one that never fell below its peak.
pub fn deepest_drawdown(values: &[f64], floor: f64) -> Option<DrawdownSpan> {
    deepest_drawdown_since(values, floor, 0)
}

/// The deepest drawdown of the bars from `from` on against the running
/// peak of the whole path (floored at `floor`), the bars before `from`
/// included: a peak before a window counts, as an indicator's warm-up
/// (docs §7.4.1) counts it. Positive prices take a floor of 0.
pub fn deepest_drawdown_since(values: &[f64], floor: f64, from: usize) -> Option<DrawdownSpan> {
    let (mut peak, mut peak_at) = (floor, 0usize);
    let mut worst: Option<(f64, usize, usize, f64)> = None;
    for (i, &e) in values.iter().enumerate() {
        if e > peak {
            peak = e;
            peak_at = i;
        }
        let div = if peak == 0.0 { 1.0 } else { peak };
        let dd = (e - peak) / div;
        if i >= from && dd < worst.map_or(0.0, |w| w.0) {
            worst = Some((dd, peak_at, i, peak));
        }
    }
    let (depth, peak, trough, level) = worst?;
    let recovery = values
        .iter()
        .enumerate()
        .skip(trough + 1)
        .find(|(_, e)| **e >= level)
        .map(|(i, _)| i);
    Some(DrawdownSpan {
        peak,
        trough,
        recovery,
        depth,
    })
}

/// The drawdown series of `equity` against the same floored peak.
pub fn drawdown_series(equity: &[f64], floor: f64) -> Vec<f64> {
    let mut peak = floor;
    equity
        .iter()
        .map(|&e| {
            if e > peak {
                peak = e;
            }
            (e - peak) / if peak == 0.0 { 1.0 } else { peak }
        })
        .collect()
}

/// B for the metrics (see the module docs).
pub(crate) fn resolve_bars_per_year(explicit: Option<f64>, n: usize, dates: &[NaiveDate]) -> f64 {
    if let Some(b) = explicit {
        return b;
    }
    let days = match (dates.first(), dates.last()) {
        (Some(a), Some(b)) => (*b - *a).num_days() as f64,
        _ => 0.0,
    };
    let years = days / 365.25;
    let years = if years <= 0.0 { 1.0 } else { years };
    (n as f64 / years).trunc()
}

fn annual_return(total: f64, b: f64, n: usize) -> f64 {
    if 1.0 + total <= 0.0 {
        return -1.0;
    }
    let a = (1.0 + total).powf(b / n.max(1) as f64) - 1.0;
    if a.is_finite() { a } else { f64::INFINITY }
}

/// The Sharpe of excess returns `x` over a book whose own returns are `r`:
/// 0 when the book never moved (all cash, every r = 0). Such a book took no
/// risk; its excess return is the T-bill's own slight drift, whose ratio to
/// its tiny variation is no Sharpe at all (it gave −30 for a strategy that
/// never traded). The original, measuring r itself, gives 0 here too.
pub(crate) fn book_sharpe(r: &[f64], x: &[f64], bars_per_year: f64) -> f64 {
    if flat(r) {
        0.0
    } else {
        sharpe(x, bars_per_year)
    }
}

/// Whether a book's returns are all exactly 0: its equity never changed.
pub(crate) fn flat(r: &[f64]) -> bool {
    r.iter().all(|v| *v == 0.0)
}

/// r − f per bar (`risk_free` shorter than `r` is padded with 0).
pub(crate) fn excess(r: &[f64], risk_free: &[f64]) -> Vec<f64> {
    r.iter()
        .enumerate()
        .map(|(i, x)| x - risk_free.get(i).copied().unwrap_or(0.0))
        .collect()
}

/// The per-bar inputs of [`compute`] besides the equity: the benchmark's
/// returns, the risk-free rate and the turnover, each as long as the
/// equity (shorter is padded with 0).
#[derive(Clone, Copy, Debug, Default)]
pub struct PerBar<'a> {
    pub benchmark: &'a [f64],
    pub risk_free: &'a [f64],
    pub turnover: &'a [f64],
}

/// Every metric of the table.
pub fn compute(
    equity: &[f64],
    dates: &[NaiveDate],
    initial_cash: f64,
    bars_per_year: Option<f64>,
    trades: &[TradeStat],
    per_bar: PerBar<'_>,
) -> Metrics {
    let PerBar {
        benchmark,
        risk_free,
        turnover,
    } = per_bar;
    let n = equity.len();
    let b_year = resolve_bars_per_year(bars_per_year, n, dates);
    if n == 0 {
        return Metrics {
            final_value: initial_cash,
            bars_per_year: b_year,
            ..Metrics::default()
        };
    }
    let c = initial_cash;
    let final_value = equity[n - 1];
    let total = final_value / c - 1.0;
    let annual = annual_return(total, b_year, n);
    let r = returns(equity);
    let x = excess(&r, risk_free);
    let sr = book_sharpe(&r, &x, b_year);
    let mdd = max_drawdown(equity, c);
    let calmar = if mdd.abs() > 1e-10 {
        round_dp(annual / mdd.abs(), 4)
    } else {
        0.0
    };
    let neg: Vec<f64> = x.iter().copied().filter(|v| *v < 0.0).collect();
    let neg_std = if neg.len() <= 1 { 1e-10 } else { std(&neg) };
    let sortino = mean(&x) / (neg_std + 1e-10) * b_year.sqrt();
    // A book that never moved has no Sortino either (see [`book_sharpe`]).
    let sortino = if sortino.is_finite() && !flat(&r) {
        round_dp(sortino, 4)
    } else {
        0.0
    };

    let wins: Vec<f64> = trades.iter().map(|t| t.pnl).filter(|p| *p > 0.0).collect();
    let losses: Vec<f64> = trades.iter().map(|t| t.pnl).filter(|p| *p < 0.0).collect();
    let win_rate = if trades.is_empty() {
        0.0
    } else {
        wins.len() as f64 / trades.len() as f64
    };
    let profit_loss_ratio = if losses.is_empty() {
        0.0
    } else {
        round_dp(mean(&wins) / mean(&losses).abs(), 4)
    };
    let gross_loss: f64 = losses.iter().sum();
    let profit_factor = if losses.is_empty() {
        0.0
    } else {
        round_dp(wins.iter().sum::<f64>() / gross_loss.abs(), 4)
    };
    let mut run = 0usize;
    let mut max_consecutive_loss = 0usize;
    for t in trades {
        if t.pnl < 0.0 {
            run += 1;
            max_consecutive_loss = max_consecutive_loss.max(run);
        } else {
            run = 0;
        }
    }
    let held: Vec<&TradeStat> = trades.iter().filter(|t| t.holding_bars > 0).collect();
    let (avg_holding_bars, avg_holding_days) = if held.is_empty() {
        (0.0, 0.0)
    } else {
        let m = held.len() as f64;
        (
            round_dp(
                held.iter().map(|t| t.holding_bars as f64).sum::<f64>() / m,
                1,
            ),
            round_dp(
                held.iter().map(|t| t.holding_days as f64).sum::<f64>() / m,
                1,
            ),
        )
    };

    let bench: Vec<f64> = (0..n)
        .map(|i| benchmark.get(i).copied().unwrap_or(0.0))
        .collect();
    let bench_total = bench.iter().fold(1.0, |acc, b| acc * (1.0 + b)) - 1.0;
    let active: Vec<f64> = r.iter().zip(&bench).map(|(a, b)| a - b).collect();
    let sd_active = std(&active);
    let ir = mean(&active) / (sd_active + 1e-10) * b_year.sqrt();
    let (mr, mb) = (mean(&r), mean(&bench));
    let (cov, var) = if n > 1 {
        let cov = r
            .iter()
            .zip(&bench)
            .map(|(a, b)| (a - mr) * (b - mb))
            .sum::<f64>()
            / (n - 1) as f64;
        let var = bench.iter().map(|b| (b - mb) * (b - mb)).sum::<f64>() / (n - 1) as f64;
        (cov, var)
    } else {
        (0.0, 0.0)
    };
    let beta = if var > 0.0 {
        round_dp(cov / var, 4)
    } else {
        0.0
    };
    let total_turnover: f64 = (0..n)
        .map(|i| turnover.get(i).copied().unwrap_or(0.0))
        .sum();

    let finite_or_zero = |x: f64| if x.is_finite() { x } else { 0.0 };
    Metrics {
        final_value,
        total_return: total,
        annual_return: annual,
        max_drawdown: mdd,
        sharpe: sr,
        calmar,
        sortino,
        win_rate,
        profit_loss_ratio,
        profit_factor,
        max_consecutive_loss,
        avg_holding_bars,
        avg_holding_days,
        trade_count: trades.len(),
        benchmark_return: round_dp(bench_total, 6),
        excess_return: round_dp(total - bench_total, 6),
        information_ratio: round_dp(finite_or_zero(ir), 4),
        tracking_error: round_dp(sd_active * b_year.sqrt(), 6),
        benchmark_beta: beta,
        avg_turnover: round_dp(total_turnover / n as f64, 6),
        total_turnover: round_dp(total_turnover, 6),
        bars_per_year: b_year,
        bars: n,
    }
}

/// A number for JSON: non-finite becomes null (docs §7.6 stdout).
pub(crate) fn num(x: f64) -> Value {
    if x.is_finite() { json!(x) } else { Value::Null }
}

impl Metrics {
    /// The metrics in the table's order.
    pub fn to_map(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        put("final_value", num(self.final_value));
        put("total_return", num(self.total_return));
        put("annual_return", num(self.annual_return));
        put("max_drawdown", num(self.max_drawdown));
        put("sharpe", num(self.sharpe));
        put("calmar", num(self.calmar));
        put("sortino", num(self.sortino));
        put("win_rate", num(self.win_rate));
        put("profit_loss_ratio", num(self.profit_loss_ratio));
        put("profit_factor", num(self.profit_factor));
        put("max_consecutive_loss", json!(self.max_consecutive_loss));
        put("avg_holding_bars", num(self.avg_holding_bars));
        put("avg_holding_days", num(self.avg_holding_days));
        put("trade_count", json!(self.trade_count));
        put("benchmark_return", num(self.benchmark_return));
        put("excess_return", num(self.excess_return));
        put("information_ratio", num(self.information_ratio));
        put("tracking_error", num(self.tracking_error));
        put("benchmark_beta", num(self.benchmark_beta));
        put("avg_turnover", num(self.avg_turnover));
        put("total_turnover", num(self.total_turnover));
        put("bars_per_year", num(self.bars_per_year));
        put("bars", json!(self.bars));
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawdown_peak_is_floored_at_the_initial_cash() {
        // Never above C: the drawdown is measured from C, not from E_0.
        assert!((max_drawdown(&[90.0, 80.0, 95.0], 100.0) - (-0.2)).abs() < 1e-12);
        assert_eq!(
            drawdown_series(&[100.0, 110.0, 99.0], 100.0)[2],
            (99.0 - 110.0) / 110.0
        );
    }

    #[test]
    fn the_deepest_drawdown_names_its_bars_and_matches_the_figure() {
        let e = [100.0, 120.0, 90.0, 110.0, 80.0, 121.0, 100.0];
        let d = deepest_drawdown(&e, 100.0).unwrap();
        assert_eq!((d.peak, d.trough, d.recovery), (1, 4, Some(5)));
        assert_eq!(d.depth, max_drawdown(&e, 100.0));
        // A peak at the floor (the cash before the first bar) is bar 0.
        let d = deepest_drawdown(&[95.0, 90.0], 100.0).unwrap();
        assert_eq!((d.peak, d.trough, d.recovery), (0, 1, None));
        assert!(deepest_drawdown(&[1.0, 2.0, 3.0], 0.0).is_none());
        // From bar 3 on: the trough at 4 runs from the peak at 1, before.
        let d = deepest_drawdown_since(&e, 0.0, 3).unwrap();
        assert_eq!((d.peak, d.trough), (1, 4));
        let within = deepest_drawdown(&e[3..], 0.0).unwrap();
        assert_eq!((within.peak, within.trough), (0, 1));
        assert!((within.depth - (80.0 / 110.0 - 1.0)).abs() < 1e-15);
    }

    #[test]
    fn empty_equity_is_all_zero() {
        let m = compute(&[], &[], 1000.0, Some(252.0), &[], PerBar::default());
        assert_eq!(m.final_value, 1000.0);
        assert_eq!(m.sharpe, 0.0);
        assert_eq!(m.trade_count, 0);
    }

    #[test]
    fn sharpe_and_sortino_measure_returns_over_the_risk_free_rate() {
        let eq = [100.0, 101.0, 100.5, 102.0, 101.0];
        let d0 = NaiveDate::from_ymd_opt(2010, 1, 4).unwrap();
        let dates: Vec<NaiveDate> = (0..5).map(|i| d0 + chrono::Duration::days(i)).collect();
        let rf = [0.0, 0.001, 0.001, 0.001, 0.001];
        let with = |rf: &[f64]| {
            compute(
                &eq,
                &dates,
                100.0,
                Some(252.0),
                &[],
                PerBar {
                    risk_free: rf,
                    ..PerBar::default()
                },
            )
        };
        let (zero, some) = (with(&[]), with(&rf));
        let x = excess(&returns(&eq), &rf);
        assert_eq!(x[0], 0.0);
        assert_eq!(some.sharpe, sharpe(&x, 252.0));
        assert_eq!(zero.sharpe, sharpe(&returns(&eq), 252.0));
        assert!(some.sharpe < zero.sharpe, "a positive rate lowers Sharpe");
        assert!(some.sortino < zero.sortino);
        // Nothing else depends on the rate.
        assert_eq!(
            (some.total_return, some.max_drawdown),
            (zero.total_return, zero.max_drawdown)
        );
    }

    #[test]
    fn a_book_that_never_moved_has_no_sharpe_whatever_the_rate() {
        let d0 = NaiveDate::from_ymd_opt(2012, 4, 20).unwrap();
        let dates: Vec<NaiveDate> = (0..6).map(|i| d0 + chrono::Duration::days(i)).collect();
        // The T-bill drifts slightly: the excess returns of all cash are
        // −f, whose mean over its tiny spread is a huge negative ratio.
        let rf = [0.0, 2.0e-6, 2.1e-6, 2.0e-6, 2.2e-6, 2.1e-6];
        let x = excess(&[0.0; 6], &rf);
        assert!(sharpe(&x, 252.0) < -10.0, "{}", sharpe(&x, 252.0));
        let flat = compute(
            &[100.0; 6],
            &dates,
            100.0,
            Some(252.0),
            &[],
            PerBar {
                risk_free: &rf,
                ..PerBar::default()
            },
        );
        assert_eq!((flat.sharpe, flat.sortino), (0.0, 0.0));
        // One move is enough to measure the excess again.
        let eq = [100.0, 100.0, 100.5, 100.5, 100.2, 100.2];
        let moved = compute(
            &eq,
            &dates,
            100.0,
            Some(252.0),
            &[],
            PerBar {
                risk_free: &rf,
                ..PerBar::default()
            },
        );
        assert_eq!(moved.sharpe, sharpe(&excess(&returns(&eq), &rf), 252.0));
        assert_ne!(moved.sharpe, 0.0);
    }

    #[test]
    fn calendar_annualisation_when_markets_mix() {
        let d0 = NaiveDate::from_ymd_opt(2020, 1, 1).unwrap();
        let dates: Vec<NaiveDate> = (0..731).map(|i| d0 + chrono::Duration::days(i)).collect();
        // 731 bars over 730 days = 1.9986 years → ⌊731 / 1.9986⌋ = 365.
        assert_eq!(resolve_bars_per_year(None, 731, &dates), 365.0);
        assert_eq!(resolve_bars_per_year(None, 1, &dates[..1]), 1.0);
    }
}
