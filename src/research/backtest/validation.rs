//! The validation suite (docs §7.5 `config.validation`): Monte Carlo trade
//! permutation, bootstrap of returns, walk-forward windows.
//!
//! Randomness is a SplitMix64 stream from the configured seed (default 42):
//! the same config gives the same numbers on every machine and every
//! version of vibedesk (the original depends on NumPy's generator, so its
//! numbers are not reproduced bit for bit; the procedures are).
//! Percentiles interpolate linearly between order statistics (NumPy's
//! default). Non-finite numbers are written as null.

use chrono::NaiveDate;
use serde_json::{Value, json};

use super::config::{BootstrapConfig, MonteCarloConfig, ValidationConfig, WalkForwardConfig};
use super::metrics::{self, num};

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, well mixed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift with rejection: unbiased).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        let n = n as u64;
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as usize;
            }
        }
    }
}

/// NumPy-style percentile (linear) of sorted data; `q` in [0, 100].
pub(crate) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = (q / 100.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi.min(sorted.len() - 1)] - sorted[lo]) * frac
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

fn bands(sorted: &[f64]) -> Value {
    json!({"p5": num(percentile(sorted, 5.0)), "p25": num(percentile(sorted, 25.0)),
           "p50": num(percentile(sorted, 50.0)), "p75": num(percentile(sorted, 75.0)),
           "p95": num(percentile(sorted, 95.0))})
}

/// An equity path from C and trade P&Ls in order: C, C + p1, ...
fn trade_path(c: f64, pnls: &[f64], out: &mut Vec<f64>) {
    out.clear();
    out.push(c);
    let mut e = c;
    for p in pnls {
        e += p;
        out.push(e);
    }
}

/// Monte Carlo: shuffles the order of the trade P&Ls. The statistics are
/// per trade (the path's Sharpe uses √1: only comparisons matter), so the
/// p-values ask how often a random order does at least as well as the
/// actual one: p_sharpe = share with Sharpe ≥ actual, p_max_drawdown =
/// share with max drawdown ≥ actual (drawdowns are ≤ 0: ≥ is milder).
pub(crate) fn monte_carlo(cfg: &MonteCarloConfig, pnls: &[f64], initial_cash: f64) -> Value {
    if pnls.len() < 3 {
        return json!({"skipped": format!("needs at least 3 trades, got {}", pnls.len()),
                      "n_simulations": cfg.n_simulations, "seed": cfg.seed});
    }
    let mut path = Vec::with_capacity(pnls.len() + 1);
    trade_path(initial_cash, pnls, &mut path);
    let actual_sharpe = metrics::sharpe(&metrics::returns(&path), 1.0);
    let actual_dd = metrics::max_drawdown(&path, initial_cash);
    let mut rng = Rng::new(cfg.seed);
    let mut order = pnls.to_vec();
    let m = pnls.len();
    let (mut sharpes, mut dds) = (
        Vec::with_capacity(cfg.n_simulations),
        Vec::with_capacity(cfg.n_simulations),
    );
    // Fan chart: equity after each trade, per simulation, at ≤ 50 points.
    let stride = m.div_ceil(50).max(1);
    let points: Vec<usize> = (0..=m)
        .step_by(stride)
        .chain(std::iter::once(m))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut fan: Vec<Vec<f64>> = vec![Vec::with_capacity(cfg.n_simulations); points.len()];
    for _ in 0..cfg.n_simulations {
        for i in (1..m).rev() {
            let j = rng.below(i + 1);
            order.swap(i, j);
        }
        trade_path(initial_cash, &order, &mut path);
        sharpes.push(metrics::sharpe(&metrics::returns(&path), 1.0));
        dds.push(metrics::max_drawdown(&path, initial_cash));
        for (slot, &p) in fan.iter_mut().zip(&points) {
            slot.push(path[p]);
        }
    }
    let n = cfg.n_simulations as f64;
    let p_sharpe = sharpes.iter().filter(|s| **s >= actual_sharpe).count() as f64 / n;
    let p_dd = dds.iter().filter(|d| **d >= actual_dd).count() as f64 / n;
    let fan_sorted: Vec<Vec<f64>> = fan.into_iter().map(sorted).collect();
    let band =
        |q: f64| -> Vec<Value> { fan_sorted.iter().map(|v| num(percentile(v, q))).collect() };
    json!({
        "n_simulations": cfg.n_simulations, "seed": cfg.seed, "n_trades": m,
        "actual": {"sharpe_per_trade": num(actual_sharpe), "max_drawdown": num(actual_dd)},
        "p_value_sharpe": p_sharpe, "p_value_max_drawdown": p_dd,
        "simulated": {"sharpe_per_trade": bands(&sorted(sharpes)), "max_drawdown": bands(&sorted(dds))},
        "fan_chart": {"trade_index": points, "p5": band(5.0), "p25": band(25.0), "p50": band(50.0),
                      "p75": band(75.0), "p95": band(95.0)},
    })
}

/// Bootstrap: resamples the bars (1..n, ≥ 5) with replacement and
/// recomputes the annualised Sharpe of their excess returns x = r − f (as
/// the headline Sharpe, docs §7.5) and the mean of their returns r; a
/// percentile confidence interval and the share of resamples with
/// Sharpe > 0.
pub(crate) fn bootstrap(
    cfg: &BootstrapConfig,
    returns: &[f64],
    risk_free: &[f64],
    bars_per_year: f64,
) -> Value {
    let r = returns.get(1..).unwrap_or(&[]);
    let excess = metrics::excess(returns, risk_free);
    let x = excess.get(1..).unwrap_or(&[]);
    if r.len() < 5 {
        return json!({"skipped": format!("needs at least 5 returns, got {}", r.len()),
                      "n_bootstrap": cfg.n_bootstrap, "confidence": cfg.confidence, "seed": cfg.seed});
    }
    let mut rng = Rng::new(cfg.seed);
    let mut sample = vec![0.0; r.len()];
    let mut sample_x = vec![0.0; r.len()];
    let mut sharpes = Vec::with_capacity(cfg.n_bootstrap);
    let mut means = Vec::with_capacity(cfg.n_bootstrap);
    for _ in 0..cfg.n_bootstrap {
        for (v, e) in sample.iter_mut().zip(sample_x.iter_mut()) {
            let i = rng.below(r.len());
            (*v, *e) = (r[i], x[i]);
        }
        sharpes.push(metrics::book_sharpe(&sample, &sample_x, bars_per_year));
        means.push(metrics::mean(&sample));
    }
    let positive = sharpes.iter().filter(|s| **s > 0.0).count() as f64 / cfg.n_bootstrap as f64;
    let (lo_q, hi_q) = (
        (1.0 - cfg.confidence) / 2.0 * 100.0,
        (1.0 + cfg.confidence) / 2.0 * 100.0,
    );
    let s = sorted(sharpes);
    let m = sorted(means);
    json!({
        "n_bootstrap": cfg.n_bootstrap, "confidence": cfg.confidence, "seed": cfg.seed, "n_returns": r.len(),
        "sharpe": {"actual": num(metrics::book_sharpe(r, x, bars_per_year)), "mean": num(metrics::mean(&s)),
                   "ci_low": num(percentile(&s, lo_q)), "ci_high": num(percentile(&s, hi_q))},
        "mean_return": {"actual": num(metrics::mean(r)), "ci_low": num(percentile(&m, lo_q)), "ci_high": num(percentile(&m, hi_q))},
        "prob_sharpe_positive": positive,
    })
}

/// A closed trade for walk-forward: when it ended and its P&L.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClosedTrade {
    pub exit_bar: usize,
    pub pnl: f64,
}

/// Walk-forward: `n_windows` equal consecutive windows (the last takes the
/// remainder), each ≥ 2 bars. Per window: return from the equity before
/// the window (C for the first) to its last bar, annualised Sharpe of its
/// bar excess returns r − f (as the headline Sharpe), max drawdown from that
/// starting equity, trades closed in it and their win rate. Consistency =
/// share of windows with return > 0.
pub(crate) fn walk_forward(
    cfg: &WalkForwardConfig,
    equity: &[f64],
    dates: &[NaiveDate],
    initial_cash: f64,
    bars_per_year: f64,
    trades: &[ClosedTrade],
    risk_free: &[f64],
) -> Value {
    let n = equity.len();
    let size = n / cfg.n_windows.max(1);
    if size < 2 {
        return json!({"skipped": format!("{} windows need at least {} bars, got {n}", cfg.n_windows, 2 * cfg.n_windows),
                      "n_windows": cfg.n_windows});
    }
    let raw = metrics::returns(equity);
    let r = metrics::excess(&raw, risk_free);
    let mut windows = Vec::new();
    let mut positive = 0usize;
    for w in 0..cfg.n_windows {
        let a = w * size;
        let b = if w + 1 == cfg.n_windows { n } else { a + size };
        let start_equity = if a == 0 { initial_cash } else { equity[a - 1] };
        let slice = &equity[a..b];
        let ret = slice[slice.len() - 1] / start_equity - 1.0;
        let in_window: Vec<f64> = trades
            .iter()
            .filter(|t| t.exit_bar >= a && t.exit_bar < b)
            .map(|t| t.pnl)
            .collect();
        let wins = in_window.iter().filter(|p| **p > 0.0).count();
        if ret > 0.0 {
            positive += 1;
        }
        windows.push(json!({
            "window": w + 1,
            "start": dates.get(a).map(ToString::to_string), "end": dates.get(b - 1).map(ToString::to_string),
            "bars": b - a,
            "return": num(ret),
            "sharpe": num(metrics::book_sharpe(&raw[a..b], &r[a..b], bars_per_year)),
            "max_drawdown": num(metrics::max_drawdown(slice, start_equity)),
            "trades": in_window.len(),
            "win_rate": if in_window.is_empty() { 0.0 } else { wins as f64 / in_window.len() as f64 },
        }));
    }
    json!({"n_windows": cfg.n_windows, "windows": windows,
           "consistency_rate": positive as f64 / cfg.n_windows as f64})
}

/// Runs the configured parts; `None` when nothing is configured.
/// `risk_free` is the per-bar rate of the headline Sharpe (docs §7.5).
pub(crate) fn run(
    cfg: &ValidationConfig,
    equity: &[f64],
    dates: &[NaiveDate],
    initial_cash: f64,
    bars_per_year: f64,
    trades: &[ClosedTrade],
    risk_free: &[f64],
) -> Option<Value> {
    if cfg.is_empty() {
        return None;
    }
    let mut out = serde_json::Map::new();
    if let Some(mc) = &cfg.monte_carlo {
        let pnls: Vec<f64> = trades.iter().map(|t| t.pnl).collect();
        out.insert("monte_carlo".into(), monte_carlo(mc, &pnls, initial_cash));
    }
    if let Some(b) = &cfg.bootstrap {
        out.insert(
            "bootstrap".into(),
            bootstrap(b, &metrics::returns(equity), risk_free, bars_per_year),
        );
    }
    if let Some(w) = &cfg.walk_forward {
        out.insert(
            "walk_forward".into(),
            walk_forward(
                w,
                equity,
                dates,
                initial_cash,
                bars_per_year,
                trades,
                risk_free,
            ),
        );
    }
    Some(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_reproducible_and_unbiased_enough() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        assert_eq!(a.next_u64(), b.next_u64());
        let mut counts = [0usize; 6];
        for _ in 0..60_000 {
            counts[a.below(6)] += 1;
        }
        assert!(
            counts.iter().all(|c| (9_000..11_000).contains(c)),
            "{counts:?}"
        );
    }

    #[test]
    fn percentiles_interpolate_like_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 50.0), 2.5);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert!((percentile(&v, 25.0) - 1.75).abs() < 1e-12);
    }

    #[test]
    fn walk_forward_windows_cover_every_bar() {
        let eq: Vec<f64> = (0..11).map(|i| 100.0 + i as f64).collect();
        let d0 = NaiveDate::from_ymd_opt(2020, 1, 1).unwrap();
        let dates: Vec<NaiveDate> = (0..11).map(|i| d0 + chrono::Duration::days(i)).collect();
        let v = walk_forward(
            &WalkForwardConfig { n_windows: 2 },
            &eq,
            &dates,
            100.0,
            252.0,
            &[ClosedTrade {
                exit_bar: 7,
                pnl: 3.0,
            }],
            &[],
        );
        assert_eq!(v["windows"][0]["bars"], 5);
        assert_eq!(v["windows"][1]["bars"], 6);
        assert_eq!(v["windows"][1]["trades"], 1);
        assert_eq!(v["consistency_rate"], 1.0);
        assert!(
            (v["windows"][1]["return"].as_f64().unwrap() - (110.0 / 104.0 - 1.0)).abs() < 1e-12
        );
    }
}
