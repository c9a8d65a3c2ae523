//! Built-in strategies with parameters (issue 5a). Each turns one symbol's
//! bars into a target-weight series in [-1, 1] on that symbol's own
//! calendar, computed from information up to and including each bar's close;
//! the engine clips, shifts by one bar and executes at the next open
//! (docs §7.4), so no strategy here may look ahead.
//!
//! Indicators come from [`crate::research::indicators`] (checked against
//! pandas); warm-up rows (NaN) mean "no position".

use serde_json::{Map, Value, json};

use super::config_reader::{ConfigIssue, Reader, suggest};
use super::pairs::PairsParams;
use crate::research::data::Bars;
use crate::research::indicators;

/// A built-in strategy with its parameters resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum Builtin {
    /// Always long `size`.
    BuyAndHold { size: f64 },
    /// Long while SMA(fast) > SMA(slow); short (if allowed) while below.
    SmaCrossover {
        fast: usize,
        slow: usize,
        allow_short: bool,
        size: f64,
    },
    /// As the SMA crossover with pandas-style EMAs.
    EmaCrossover {
        fast: usize,
        slow: usize,
        allow_short: bool,
        size: f64,
    },
    /// Long when RSI < lower until RSI > exit; short (if allowed) when
    /// RSI > upper until RSI < lower.
    RsiMeanReversion {
        period: usize,
        lower: f64,
        upper: f64,
        exit: f64,
        allow_short: bool,
        size: f64,
    },
    /// Long while the `lookback`-bar return exceeds `threshold`; short (if
    /// allowed) while it is below −threshold.
    Momentum {
        lookback: usize,
        threshold: f64,
        allow_short: bool,
        size: f64,
    },
    /// Donchian breakout: long when the close exceeds the highest high of
    /// the previous `window` bars, out when it falls below the lowest low of
    /// the previous `exit_window` bars (mirrored for shorts).
    Breakout {
        window: usize,
        exit_window: usize,
        allow_short: bool,
        size: f64,
    },
    /// Long below the lower Bollinger band until the close regains the
    /// middle; short (if allowed) above the upper band until the middle.
    BollingerReversion {
        window: usize,
        k: f64,
        allow_short: bool,
        size: f64,
    },
    /// A spread between the two codes traded on its z-score (docs §7.7,
    /// `pairs.rs`): its signals need both legs, so [`Builtin::signals`]
    /// of one series is flat and `rust_signals` calls
    /// [`super::pairs::leg_signals`].
    Pairs(PairsParams),
}

const MAX_WINDOW: u64 = 10_000;

impl Builtin {
    pub(crate) const NAMES: [&'static str; 8] = [
        "buy_and_hold",
        "sma_crossover",
        "ema_crossover",
        "rsi_mean_reversion",
        "momentum",
        "breakout",
        "bollinger_reversion",
        "pairs",
    ];

    pub(crate) fn name(&self) -> &'static str {
        match self {
            Builtin::BuyAndHold { .. } => "buy_and_hold",
            Builtin::SmaCrossover { .. } => "sma_crossover",
            Builtin::EmaCrossover { .. } => "ema_crossover",
            Builtin::RsiMeanReversion { .. } => "rsi_mean_reversion",
            Builtin::Momentum { .. } => "momentum",
            Builtin::Breakout { .. } => "breakout",
            Builtin::BollingerReversion { .. } => "bollinger_reversion",
            Builtin::Pairs(_) => "pairs",
        }
    }

    /// The resolved parameters (defaults filled in), for the run card.
    pub(crate) fn params_json(&self) -> Value {
        match *self {
            Builtin::BuyAndHold { size } => json!({"size": size}),
            Builtin::SmaCrossover {
                fast,
                slow,
                allow_short,
                size,
            }
            | Builtin::EmaCrossover {
                fast,
                slow,
                allow_short,
                size,
            } => json!({"fast": fast, "slow": slow, "allow_short": allow_short, "size": size}),
            Builtin::RsiMeanReversion {
                period,
                lower,
                upper,
                exit,
                allow_short,
                size,
            } => json!({"period": period, "lower": lower, "upper": upper, "exit": exit,
                        "allow_short": allow_short, "size": size}),
            Builtin::Momentum {
                lookback,
                threshold,
                allow_short,
                size,
            } => json!({"lookback": lookback, "threshold": threshold,
                        "allow_short": allow_short, "size": size}),
            Builtin::Breakout {
                window,
                exit_window,
                allow_short,
                size,
            } => json!({"window": window, "exit_window": exit_window,
                        "allow_short": allow_short, "size": size}),
            Builtin::BollingerReversion {
                window,
                k,
                allow_short,
                size,
            } => json!({"window": window, "k": k, "allow_short": allow_short, "size": size}),
            Builtin::Pairs(p) => p.to_json(),
        }
    }

    pub(crate) fn describe(&self) -> String {
        format!("{} {}", self.name(), self.params_json())
    }

    /// The canonical definition, hashed into the run card's strategy hash.
    pub(crate) fn canonical(&self) -> Value {
        json!({"name": self.name(), "params": self.params_json()})
    }

    /// Resolves `name` and `params`; every problem is reported, with the
    /// valid names or parameters.
    pub fn parse(
        name: &str,
        params: &Map<String, Value>,
        prefix: &str,
    ) -> Result<Builtin, Vec<ConfigIssue>> {
        let key = name.trim().to_ascii_lowercase().replace(['-', ' '], "_");
        let canonical = match key.as_str() {
            "buy_and_hold" | "buy_hold" | "buyandhold" => "buy_and_hold",
            "sma_crossover" | "sma_cross" | "ma_crossover" => "sma_crossover",
            "ema_crossover" | "ema_cross" => "ema_crossover",
            "rsi_mean_reversion" | "rsi_reversion" | "rsi" => "rsi_mean_reversion",
            "momentum" => "momentum",
            "breakout" | "donchian_breakout" | "donchian" => "breakout",
            "bollinger_reversion" | "bollinger_mean_reversion" | "bollinger" => {
                "bollinger_reversion"
            }
            k if super::pairs::ALIASES.contains(&k) => "pairs",
            _ => {
                let hint = suggest(&key, &Self::NAMES)
                    .map(|s| format!("did you mean '{s}'? "))
                    .unwrap_or_default();
                return Err(vec![ConfigIssue::new(
                    format!("{prefix}.name"),
                    "unknown_strategy",
                    format!(
                        "unknown built-in strategy '{name}'; {hint}built-ins: {} (or use rules, or code/signal_engine.py)",
                        Self::NAMES.join(", ")
                    ),
                )]);
            }
        };
        let mut r = Reader::new(params, &format!("{prefix}.params"));
        let size = |r: &mut Reader<'_>| r.number("size", 0.0, true, 1.0).unwrap_or(1.0);
        let win = |r: &mut Reader<'_>, k: &str, d: usize| {
            r.integer(k, 1, MAX_WINDOW).map_or(d, |n| n as usize)
        };
        let short = |r: &mut Reader<'_>| r.boolean("allow_short").unwrap_or(false);
        let b = match canonical {
            "buy_and_hold" => {
                r.only(&["size"]);
                Builtin::BuyAndHold { size: size(&mut r) }
            }
            "sma_crossover" | "ema_crossover" => {
                r.only(&["fast", "slow", "allow_short", "size"]);
                let (fd, sd) = if canonical == "sma_crossover" {
                    (20, 50)
                } else {
                    (12, 26)
                };
                let fast = win(&mut r, "fast", fd);
                let slow = win(&mut r, "slow", sd);
                if fast >= slow {
                    r.issue(
                        "fast",
                        "invalid_value",
                        format!(
                            "fast ({fast}) must be shorter than slow ({slow}); e.g. fast 20, slow 50"
                        ),
                    );
                }
                let allow_short = short(&mut r);
                let size = size(&mut r);
                if canonical == "sma_crossover" {
                    Builtin::SmaCrossover {
                        fast,
                        slow,
                        allow_short,
                        size,
                    }
                } else {
                    Builtin::EmaCrossover {
                        fast,
                        slow,
                        allow_short,
                        size,
                    }
                }
            }
            "rsi_mean_reversion" => {
                r.only(&["period", "lower", "upper", "exit", "allow_short", "size"]);
                let period = win(&mut r, "period", 14);
                let lower = r.number("lower", 0.0, false, 100.0).unwrap_or(30.0);
                let upper = r.number("upper", 0.0, false, 100.0).unwrap_or(70.0);
                let exit = r.number("exit", 0.0, false, 100.0).unwrap_or(upper);
                if lower >= upper {
                    r.issue(
                        "lower",
                        "invalid_value",
                        format!("lower ({lower}) must be below upper ({upper}); e.g. 30 and 70"),
                    );
                }
                if exit <= lower {
                    r.issue(
                        "exit",
                        "invalid_value",
                        format!("exit ({exit}) must be above lower ({lower})"),
                    );
                }
                Builtin::RsiMeanReversion {
                    period,
                    lower,
                    upper,
                    exit,
                    allow_short: short(&mut r),
                    size: size(&mut r),
                }
            }
            "momentum" => {
                r.only(&["lookback", "threshold", "allow_short", "size"]);
                Builtin::Momentum {
                    lookback: win(&mut r, "lookback", 20),
                    threshold: r.number("threshold", 0.0, false, 10.0).unwrap_or(0.0),
                    allow_short: short(&mut r),
                    size: size(&mut r),
                }
            }
            "pairs" => {
                r.only(&PairsParams::KEYS);
                Builtin::Pairs(PairsParams::read(&mut r))
            }
            "breakout" => {
                r.only(&["window", "exit_window", "allow_short", "size"]);
                Builtin::Breakout {
                    window: win(&mut r, "window", 20),
                    exit_window: win(&mut r, "exit_window", 10),
                    allow_short: short(&mut r),
                    size: size(&mut r),
                }
            }
            _ => {
                r.only(&["window", "k", "allow_short", "size"]);
                let window = r
                    .integer("window", 2, MAX_WINDOW)
                    .map_or(20, |n| n as usize);
                Builtin::BollingerReversion {
                    window,
                    k: r.number("k", 0.0, true, 10.0).unwrap_or(2.0),
                    allow_short: short(&mut r),
                    size: size(&mut r),
                }
            }
        };
        if r.issues.is_empty() {
            Ok(b)
        } else {
            Err(r.issues)
        }
    }

    /// Bars of history before a bar that its signal there needs (docs
    /// §7.4.1), from the same counts as the indicators'
    /// ([`indicators::IndicatorSpec::warmup`]). The state machines (RSI,
    /// breakout, Bollinger) also carry a position from earlier bars: with
    /// local data they start from its first bar, so that state is the same
    /// whatever the start.
    pub(crate) fn warmup(&self) -> usize {
        match *self {
            Builtin::BuyAndHold { .. } => 0,
            Builtin::SmaCrossover { fast, slow, .. } => fast.max(slow).saturating_sub(1),
            Builtin::EmaCrossover { fast, slow, .. } => indicators::ema_warmup(fast.max(slow)),
            Builtin::RsiMeanReversion { period, .. } => indicators::wilder_warmup(period),
            Builtin::Momentum { lookback, .. } => lookback,
            // Today's close against the channels of the previous bars.
            Builtin::Breakout {
                window,
                exit_window,
                ..
            } => window.max(exit_window),
            Builtin::BollingerReversion { window, .. } => window.saturating_sub(1),
            // The hedge ratio's window, then the z-score's window of spreads
            // on those ratios.
            Builtin::Pairs(ref p) => (p.window + p.z_window).saturating_sub(2),
        }
    }

    /// Whether the strategy ever asks for a short position.
    pub fn allows_short(&self) -> bool {
        match *self {
            Builtin::BuyAndHold { .. } => false,
            Builtin::SmaCrossover { allow_short, .. }
            | Builtin::EmaCrossover { allow_short, .. }
            | Builtin::RsiMeanReversion { allow_short, .. }
            | Builtin::Momentum { allow_short, .. }
            | Builtin::Breakout { allow_short, .. }
            | Builtin::BollingerReversion { allow_short, .. } => allow_short,
            Builtin::Pairs(_) => true,
        }
    }

    /// Target weights on the symbol's own bars (same length as `bars`).
    /// Parameters were validated by [`Builtin::parse`]; an indicator error
    /// (impossible then) yields flat signals rather than a panic.
    pub(crate) fn signals(&self, bars: &Bars) -> Vec<f64> {
        let n = bars.len();
        let c = &bars.close;
        match *self {
            Builtin::BuyAndHold { size } => vec![size; n],
            Builtin::SmaCrossover {
                fast,
                slow,
                allow_short,
                size,
            } => match (indicators::sma(c, fast), indicators::sma(c, slow)) {
                (Ok(f), Ok(s)) => crossover(&f, &s, allow_short, size),
                _ => vec![0.0; n],
            },
            Builtin::EmaCrossover {
                fast,
                slow,
                allow_short,
                size,
            } => match (indicators::ema(c, fast), indicators::ema(c, slow)) {
                (Ok(f), Ok(s)) => crossover(&f, &s, allow_short, size),
                _ => vec![0.0; n],
            },
            Builtin::RsiMeanReversion {
                period,
                lower,
                upper,
                exit,
                allow_short,
                size,
            } => {
                let Ok(rsi) = indicators::rsi(c, period) else {
                    return vec![0.0; n];
                };
                let mut pos = 0.0;
                rsi.iter()
                    .map(|&x| {
                        if x.is_nan() {
                            return pos;
                        }
                        if (pos > 0.0 && x > exit) || (pos < 0.0 && x < lower) {
                            pos = 0.0;
                        }
                        if pos == 0.0 {
                            if x < lower {
                                pos = size;
                            } else if allow_short && x > upper {
                                pos = -size;
                            }
                        }
                        pos
                    })
                    .collect()
            }
            Builtin::Momentum {
                lookback,
                threshold,
                allow_short,
                size,
            } => (0..n)
                .map(|i| {
                    if i < lookback {
                        return 0.0;
                    }
                    let r = c[i] / c[i - lookback] - 1.0;
                    if r > threshold {
                        size
                    } else if allow_short && r < -threshold {
                        -size
                    } else {
                        0.0
                    }
                })
                .collect(),
            Builtin::Breakout {
                window,
                exit_window,
                allow_short,
                size,
            } => {
                // Channels of the *previous* bars: today's close against
                // yesterday's channel (no look-ahead).
                let hi = rolling_extreme(&bars.high, window, true);
                let lo = rolling_extreme(&bars.low, window, false);
                let exit_lo = rolling_extreme(&bars.low, exit_window, false);
                let exit_hi = rolling_extreme(&bars.high, exit_window, true);
                let mut pos = 0.0;
                (0..n)
                    .map(|i| {
                        if i == 0 {
                            return 0.0;
                        }
                        let x = c[i];
                        if (pos > 0.0 && x < exit_lo[i - 1]) || (pos < 0.0 && x > exit_hi[i - 1]) {
                            pos = 0.0;
                        }
                        if x > hi[i - 1] {
                            pos = size;
                        } else if allow_short && x < lo[i - 1] {
                            pos = -size;
                        }
                        pos
                    })
                    .collect()
            }
            Builtin::BollingerReversion {
                window,
                k,
                allow_short,
                size,
            } => {
                let Ok(bb) = indicators::bollinger(c, window, k) else {
                    return vec![0.0; n];
                };
                let mut pos = 0.0;
                (0..n)
                    .map(|i| {
                        let (x, lo, mid, up) = (c[i], bb.lower[i], bb.middle[i], bb.upper[i]);
                        if lo.is_nan() {
                            return pos;
                        }
                        if (pos > 0.0 && x >= mid) || (pos < 0.0 && x <= mid) {
                            pos = 0.0;
                        }
                        if pos == 0.0 {
                            if x < lo {
                                pos = size;
                            } else if allow_short && x > up {
                                pos = -size;
                            }
                        }
                        pos
                    })
                    .collect()
            }
            Builtin::Pairs(_) => vec![0.0; n],
        }
    }
}

/// +size while fast > slow, −size (or 0) while below; 0 in the warm-up.
/// Public so that a sweep (docs §18) builds the same signals from moving
/// averages it shares across parameter sets.
pub fn crossover(fast: &[f64], slow: &[f64], allow_short: bool, size: f64) -> Vec<f64> {
    fast.iter()
        .zip(slow)
        .map(|(&f, &s)| crossover_at(f, s, allow_short, size))
        .collect()
}

/// One bar of [`crossover`].
#[inline]
pub fn crossover_at(fast: f64, slow: f64, allow_short: bool, size: f64) -> f64 {
    if fast > slow {
        size
    } else if fast < slow {
        if allow_short { -size } else { 0.0 }
    } else {
        0.0
    }
}

/// Highest (or lowest) of the last `window` values including the current
/// one; NaN until `window` values exist. A monotonic deque: O(n).
pub(crate) fn rolling_extreme(x: &[f64], window: usize, highest: bool) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    let mut dq: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
    let better = |a: f64, b: f64| if highest { a >= b } else { a <= b };
    for (i, &v) in x.iter().enumerate() {
        while let Some(&j) = dq.back() {
            if better(v, x[j]) || x[j].is_nan() {
                dq.pop_back();
            } else {
                break;
            }
        }
        dq.push_back(i);
        while let Some(&j) = dq.front() {
            if j + window <= i {
                dq.pop_front();
            } else {
                break;
            }
        }
        if i + 1 < window {
            out.push(f64::NAN);
        } else {
            out.push(dq.front().map_or(f64::NAN, |&j| x[j]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_params_and_errors() {
        let b = Builtin::parse("SMA-Crossover", &Map::new(), "strategy").unwrap();
        assert_eq!(
            b,
            Builtin::SmaCrossover {
                fast: 20,
                slow: 50,
                allow_short: false,
                size: 1.0
            }
        );
        let e = Builtin::parse("sma_crosover", &Map::new(), "strategy").unwrap_err();
        assert!(
            e[0].message.contains("did you mean 'sma_crossover'"),
            "{e:?}"
        );
        let p: Map<String, Value> =
            serde_json::from_value(json!({"fast": 50, "slow": 20, "wndow": 3})).unwrap();
        let e = Builtin::parse("sma_crossover", &p, "strategy").unwrap_err();
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e.iter().any(|i| i.key == "strategy.params.wndow"));
        assert!(e.iter().any(|i| i.message.contains("must be shorter")));
    }

    #[test]
    fn rolling_extremes_match_a_naive_scan() {
        let x = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0];
        let hi = rolling_extreme(&x, 3, true);
        let lo = rolling_extreme(&x, 3, false);
        for i in 2..x.len() {
            let w = &x[i - 2..=i];
            assert_eq!(hi[i], w.iter().cloned().fold(f64::MIN, f64::max));
            assert_eq!(lo[i], w.iter().cloned().fold(f64::MAX, f64::min));
        }
        assert!(hi[1].is_nan());
    }
}
