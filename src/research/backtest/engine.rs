//! The execution model (docs §7.4) for daily equities and crypto: a pure,
//! single-pass simulation over plain row-major columns that allocates
//! nothing per bar (its outputs are sized once up front; fills and round
//! trips are pushed only on bars that trade).
//!
//! Pipeline: [`Panel::new`] aligns the symbols on the union calendar;
//! [`align_targets`] turns each symbol's own-calendar signals into target
//! weights (NaN → 0, clipped to [-1, 1] (or [0, 1] without shorts), shifted
//! one bar on the symbol's own calendar, forward-filled on the union
//! calendar up to the limit, each row scaled so Σ|w| ≤ 1); [`simulate`]
//! runs the book.
//!
//! Per bar, in order:
//! 1. funding (crypto perpetuals, only when a `funding_rate` is set);
//! 2. if any symbol needs an order, the book is valued at the open, and
//!    orders are made: `hold` acts only on direction flips and zero targets
//!    (a changed target on a held position is logged as a dropped
//!    adjustment); `rebalance` also resizes when |w_held − w_target| >
//!    tolerance × |w_target| (a relative band);
//! 3. closes first, then opens, all at the open ± slippage (buys pay up,
//!    sells receive less), with fees; when the opens cost more than the
//!    cash, one common scale factor is found by 50-step bisection;
//! 4. the equity snapshot at the close (a symbol without a bar that day is
//!    marked at its last close).
//!
//! At the end every position is closed at the last close with slippage and
//! fees (reason `end_of_backtest`), and the last equity point is the cash
//! after that close (so `final_value` is what the account holds).
//!
//! Accounting: every position posts its notional as margin (leverage 1);
//! value = margin + qty × (price − entry), which is qty × price for a long
//! and the usual mark for a short. The equity at a close is then
//! `base + Σ qty·price` with `base = cash + Σ (margin − qty·entry)`, so a
//! bar without trades costs one multiply-add per symbol.

use chrono::NaiveDate;
use serde::Serialize;

use super::config::{Adjustment, CostOverrides};
use crate::research::data::{Bars, Market, detect_market};

/// Costs and market rules for one symbol (docs §7.4 default cost keys).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SymbolRules {
    /// Commission as a fraction of the fill's notional.
    pub fee_rate: f64,
    /// Least commission per fill (A-shares: 5).
    pub min_fee: f64,
    /// Sell-side tax (stamp duty) as a fraction of notional.
    pub sell_tax: f64,
    /// Both-side transfer fee as a fraction of notional.
    pub transfer_fee: f64,
    /// Fraction of the reference price paid (buys) or given up (sells).
    pub slippage: f64,
    /// Quantities are whole multiples of this; 0 = fractional.
    pub lot: f64,
    pub allow_short: bool,
    /// Daily price-limit band (A-shares), 0 = none: no buy at or above
    /// +limit, no sell at or below −limit, judged on the open against the
    /// previous close.
    pub price_limit: f64,
    /// Funding charged per bar as a fraction of the position's notional
    /// (longs pay a positive rate, shorts receive it).
    pub funding_per_bar: f64,
}

impl SymbolRules {
    /// The market's defaults with the config's overrides; notes say what
    /// was forced (e.g. no shorts on A-shares).
    ///
    /// Defaults (docs §7.4): US/CA equities slippage 0.0005, no
    /// commission, whole shares, shorts allowed; HK slippage 0.001 and
    /// stamp 0.001 (charged on sells here); A-shares commission 0.00025
    /// (min 5), stamp 0.0005 on sells, transfer 0.00001, slippage 0.001,
    /// 100-share lots, no shorts, price limits by board (T+1 holds by
    /// construction: daily fills are a bar apart); India/Korea/Vietnam
    /// slippage 0.001, no shorts; crypto taker 0.0005 (fills at the open are
    /// market orders, so the maker rate never applies), slippage 0.0005,
    /// fractional quantities, shorts allowed. Funding defaults to 0, not the
    /// original's 0.0001: the loaders serve spot prices, which pay none.
    pub(crate) fn for_market(
        market: Market,
        code: &str,
        o: &CostOverrides,
    ) -> (SymbolRules, Vec<String>) {
        let mut notes = Vec::new();
        let mut r = SymbolRules {
            fee_rate: 0.0,
            min_fee: 0.0,
            sell_tax: 0.0,
            transfer_fee: 0.0,
            slippage: 0.001,
            lot: 1.0,
            allow_short: false,
            price_limit: 0.0,
            funding_per_bar: 0.0,
        };
        match market {
            Market::UsEquity | Market::CaEquity => {
                r.slippage = 0.0005;
                r.allow_short = true;
            }
            Market::HkEquity => {
                r.sell_tax = 0.001;
                r.allow_short = true;
            }
            Market::AShare => {
                r.fee_rate = 0.00025;
                r.min_fee = 5.0;
                r.sell_tax = 0.0005;
                r.transfer_fee = 0.00001;
                r.lot = 100.0;
                let c = code.to_ascii_uppercase();
                r.price_limit = if c.ends_with(".BJ") {
                    0.30
                } else if ["300", "301", "688", "689"]
                    .iter()
                    .any(|p| c.starts_with(p))
                {
                    0.20
                } else {
                    0.10
                };
            }
            Market::Crypto => {
                r.fee_rate = o.taker_rate.unwrap_or(0.0005);
                r.slippage = 0.0005;
                r.lot = 0.0;
                r.allow_short = true;
            }
            Market::IndiaEquity | Market::KrEquity | Market::VietnamEquity => {}
            Market::Futures | Market::Forex => {}
        }
        if let Some(x) = o.commission_rate {
            r.fee_rate = x;
        }
        if let Some(x) = o.min_commission {
            r.min_fee = x;
        }
        if let Some(x) = o.stamp_tax {
            r.sell_tax = x;
        }
        if let Some(x) = o.transfer_fee {
            r.transfer_fee = x;
        }
        if let Some(x) = o.slippage {
            r.slippage = x;
        }
        if let Some(x) = o.lot_size {
            r.lot = x;
        }
        if let Some(x) = o.funding_rate {
            if market == Market::Crypto {
                // Perpetual funding is paid every 8 hours: 3 times a day.
                r.funding_per_bar = 3.0 * x;
            } else if x != 0.0 {
                notes.push(format!(
                    "{code}: funding_rate applies to crypto only; ignored"
                ));
            }
        }
        match o.allow_short {
            Some(true) if market == Market::AShare => {
                notes.push(format!(
                    "{code}: A-shares cannot be sold short; short signals are treated as flat"
                ));
            }
            Some(b) => r.allow_short = b,
            None => {}
        }
        (r, notes)
    }

    #[inline]
    fn fee(&self, notional: f64, sell: bool) -> f64 {
        if notional <= 0.0 {
            return 0.0;
        }
        let mut f = (notional * self.fee_rate).max(self.min_fee);
        f += notional * self.transfer_fee;
        if sell {
            f += notional * self.sell_tax;
        }
        f
    }

    #[inline]
    fn round_lot(&self, q: f64) -> f64 {
        if self.lot > 0.0 {
            (q / self.lot).trunc() * self.lot
        } else {
            q
        }
    }
}

/// The symbols aligned on the union calendar, row-major (`t * k + s`).
#[derive(Clone, Debug, Default)]
pub struct Panel {
    pub dates: Vec<NaiveDate>,
    pub codes: Vec<String>,
    /// The open; NaN where the symbol has no bar that day (no trading).
    pub open: Vec<f64>,
    /// The valuation price: the last close, carried without limit; 0
    /// before the symbol's first bar (it cannot be held then).
    pub mark: Vec<f64>,
    /// The close forward-filled up to the limit (docs §7.4), NaN beyond:
    /// the benchmark's input.
    pub close: Vec<f64>,
}

impl Panel {
    pub(crate) fn k(&self) -> usize {
        self.codes.len()
    }

    pub(crate) fn n(&self) -> usize {
        self.dates.len()
    }

    /// Aligns `series` (sorted, cleaned bars) on their union calendar.
    pub fn new(codes: &[String], series: &[&Bars], ffill_limit: usize) -> Panel {
        let k = series.len();
        let same = series.windows(2).all(|w| w[0].dates == w[1].dates);
        let dates: Vec<NaiveDate> = if same {
            series.first().map(|b| b.dates.clone()).unwrap_or_default()
        } else {
            let mut all: Vec<NaiveDate> = series
                .iter()
                .flat_map(|b| b.dates.iter().copied())
                .collect();
            all.sort_unstable();
            all.dedup();
            all
        };
        let n = dates.len();
        // Row by row, each symbol with its own cursor: the matrices are
        // written in order instead of one strided column at a time, which
        // thrashed the cache on a 100-symbol universe.
        let mut open = Vec::with_capacity(n * k);
        let mut mark = Vec::with_capacity(n * k);
        let mut close = Vec::with_capacity(n * k);
        // (next own bar, last close, bars since it)
        let mut cursor: Vec<(usize, f64, usize)> = vec![(0, f64::NAN, usize::MAX); k];
        for d in &dates {
            for (b, (j, last, since)) in series.iter().zip(cursor.iter_mut()) {
                let mut o = f64::NAN;
                if *j < b.len() && b.dates[*j] == *d {
                    o = b.open[*j];
                    *last = b.close[*j];
                    *since = 0;
                    *j += 1;
                } else if *since != usize::MAX {
                    *since += 1;
                }
                open.push(o);
                if last.is_nan() {
                    mark.push(0.0);
                    close.push(f64::NAN);
                } else {
                    mark.push(*last);
                    close.push(if *since <= ffill_limit {
                        *last
                    } else {
                        f64::NAN
                    });
                }
            }
        }
        Panel {
            dates,
            codes: codes.to_vec(),
            open,
            mark,
            close,
        }
    }

    /// Equal-weight mean of the symbols' close-to-close returns (docs §7.5
    /// default benchmark): symbols without both closes are left out of a
    /// bar's mean; a bar with none is 0; the first bar is 0.
    pub(crate) fn benchmark_returns(&self) -> Vec<f64> {
        let (n, k) = (self.n(), self.k());
        let mut out = vec![0.0; n];
        for (t, slot) in out.iter_mut().enumerate().skip(1) {
            let (mut sum, mut cnt) = (0.0, 0usize);
            for s in 0..k {
                let (a, b) = (self.close[(t - 1) * k + s], self.close[t * k + s]);
                if a.is_finite() && b.is_finite() && a != 0.0 {
                    sum += b / a - 1.0;
                    cnt += 1;
                }
            }
            if cnt > 0 {
                *slot = sum / cnt as f64;
            }
        }
        out
    }
}

/// Target weights (row-major) from each symbol's own-calendar signals
/// (docs §7.4 `_align`), see the module docs. `signals[s]` is as long as
/// symbol `s`'s bars (shorter is padded with 0). Without warm-up: each
/// symbol's first bar is flat.
pub fn align_targets(
    panel: &Panel,
    signals: &[Vec<f64>],
    rules: &[SymbolRules],
    ffill_limit: usize,
) -> Vec<f64> {
    align_targets_from(panel, signals, &[], rules, ffill_limit)
}

/// [`align_targets`] with `entry[s]`, symbol `s`'s signal on its last bar
/// before the panel (warm-up, docs §7.4.1), as the target of its first bar
/// (missing: 0).
pub(crate) fn align_targets_from(
    panel: &Panel,
    signals: &[Vec<f64>],
    entry: &[f64],
    rules: &[SymbolRules],
    ffill_limit: usize,
) -> Vec<f64> {
    let (n, k) = (panel.n(), panel.k());
    if k == 1 {
        let sig = signals.first().map_or(&[][..], Vec::as_slice);
        let short = rules.first().is_some_and(|r| r.allow_short);
        let first = entry.first().copied().unwrap_or(0.0);
        return align_one(
            &panel.open,
            sig,
            (if short { -1.0 } else { 0.0 }, first),
            ffill_limit,
            n,
        );
    }
    // Per symbol: its signals, its lower bound, and a cursor (next own bar,
    // last target, bars since it), walked row by row as in `Panel::new`.
    let sym: Vec<(&[f64], f64, f64)> = (0..k)
        .map(|s| {
            let sig = signals.get(s).map_or(&[][..], Vec::as_slice);
            let short = rules.get(s).is_some_and(|r| r.allow_short);
            let first = entry.get(s).copied().unwrap_or(0.0);
            (sig, if short { -1.0 } else { 0.0 }, first)
        })
        .collect();
    let mut cursor: Vec<(usize, f64, usize)> = vec![(0, 0.0, usize::MAX); k];
    let mut w = Vec::with_capacity(n * k);
    for t in 0..n {
        let row_start = w.len();
        for (s, ((sig, lo, first), (j, last, since))) in
            sym.iter().zip(cursor.iter_mut()).enumerate()
        {
            let clean = |x: f64| if x.is_nan() { 0.0 } else { x.clamp(*lo, 1.0) };
            let mut x = 0.0;
            if panel.open.get(t * k + s).is_some_and(|o| o.is_finite()) {
                // Shifted one bar: today's target is yesterday's signal
                // (the first bar's: the warm-up's last).
                *last = if *j >= 1 {
                    clean(sig.get(*j - 1).copied().unwrap_or(0.0))
                } else {
                    clean(*first)
                };
                x = *last;
                *since = 0;
                *j += 1;
            } else if *since != usize::MAX {
                *since += 1;
                x = if *since <= ffill_limit { *last } else { 0.0 };
            }
            w.push(x);
        }
        let row = &mut w[row_start..];
        let gross: f64 = row.iter().map(|x| x.abs()).sum();
        if gross > 1.0 {
            for x in row.iter_mut() {
                *x /= gross;
            }
        }
    }
    w
}

/// [`align_targets_from`] for a single symbol, value for value: a sweep
/// runs each symbol alone, thousands of times, and the general walk's
/// per-row bookkeeping was a fifth of a cell's time.
fn align_one(
    open: &[f64],
    sig: &[f64],
    (lo, first): (f64, f64),
    ffill_limit: usize,
    n: usize,
) -> Vec<f64> {
    let mut w = Vec::with_capacity(n);
    align_one_into(
        open,
        |i| sig.get(i).copied().unwrap_or(0.0),
        (lo, first),
        ffill_limit,
        n,
        &mut w,
    );
    w
}

/// [`align_one`] into `w` (cleared first), the `i`-th signal from
/// `sig(i)` (0 past the signals' end): a sweep makes a crossover's signal
/// bar by bar here, into a buffer reused from cell to cell, rather than a
/// signal vector and then a target vector per cell (together a tenth of
/// its time).
pub(crate) fn align_one_into(
    open: &[f64],
    sig: impl Fn(usize) -> f64,
    (lo, first): (f64, f64),
    ffill_limit: usize,
    n: usize,
    w: &mut Vec<f64>,
) {
    let clean = |x: f64| if x.is_nan() { 0.0 } else { x.clamp(lo, 1.0) };
    let (mut j, mut last, mut since) = (0usize, 0.0f64, usize::MAX);
    w.clear();
    w.reserve(n);
    for t in 0..n {
        let mut x = 0.0;
        if open.get(t).is_some_and(|o| o.is_finite()) {
            last = match j.checked_sub(1) {
                Some(i) => clean(sig(i)),
                None => clean(first),
            };
            x = last;
            since = 0;
            j += 1;
        } else if since != usize::MAX {
            since += 1;
            x = if since <= ffill_limit { last } else { 0.0 };
        }
        // One symbol's gross exposure is its own.
        let gross = x.abs();
        if gross > 1.0 {
            x /= gross;
        }
        w.push(x);
    }
}

/// Why a fill happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// A target that opened, or a zero target that closed.
    Signal,
    /// A direction flip (close, then open the other way).
    Reverse,
    /// A resize under `rebalance`.
    Rebalance,
    /// The end-of-backtest close.
    EndOfBacktest,
    /// Crypto funding (not a fill; shows on the round trip's costs).
    Funding,
}

impl Reason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::Signal => "signal",
            Reason::Reverse => "reverse",
            Reason::Rebalance => "rebalance",
            Reason::EndOfBacktest => "end_of_backtest",
            Reason::Funding => "funding",
        }
    }
}

/// One execution (docs §7.6 `fills.jsonl`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fill {
    pub symbol: usize,
    pub bar: usize,
    /// open_long, open_short, increase_long, increase_short,
    /// decrease_long, decrease_short, close_long, close_short.
    pub action: &'static str,
    /// Positive for buys, negative for sells.
    pub signed_quantity: f64,
    pub notional: f64,
    pub execution_price: f64,
    pub fee: f64,
    /// Margin posted (+) or released (−).
    pub margin: f64,
    pub reason: Reason,
    /// Bars since the round trip opened.
    pub holding_bars: usize,
}

/// A round trip: from flat to flat (or to a flip).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RoundTrip {
    pub symbol: usize,
    /// +1 long, −1 short.
    pub side: i8,
    pub entry_bar: usize,
    pub exit_bar: usize,
    /// Total quantity opened (one fill under `hold`).
    pub qty: f64,
    /// Average opening and closing fill prices.
    pub entry_price: f64,
    pub exit_price: f64,
    /// Realised price P&L minus every fee and funding of the trip.
    pub pnl: f64,
    pub fees: f64,
    /// pnl / notional opened.
    pub return_pct: f64,
    pub exit_reason: Reason,
}

impl RoundTrip {
    pub(crate) fn holding_bars(&self) -> usize {
        self.exit_bar - self.entry_bar
    }
}

/// A target the engine did not follow (docs §7.5 `dropped_target_adjustments`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Dropped {
    pub bar: usize,
    pub symbol: usize,
    /// `hold_mode` (a resize while holding) or `price_limit`.
    pub why: &'static str,
    pub target_weight: f64,
    pub held_quantity: f64,
}

/// How the book is run.
#[derive(Clone, Copy, Debug)]
pub struct SimParams<'a> {
    pub initial_cash: f64,
    pub adjustment: Adjustment,
    pub tolerance: f64,
    pub rules: &'a [SymbolRules],
}

/// Everything the simulation produced.
#[derive(Clone, Debug, Default)]
pub struct Simulation {
    /// Equity at each close (the last one after the final close-out).
    pub equity: Vec<f64>,
    /// Executed weights at each close, row-major (qty × mark / equity).
    pub weights: Vec<f64>,
    /// Σ fill notional / (2·|equity|) per bar (docs §7.5 turnover).
    pub turnover: Vec<f64>,
    pub fills: Vec<Fill>,
    pub trades: Vec<RoundTrip>,
    /// The first [`MAX_DROPPED_LOGGED`] dropped adjustments.
    pub dropped: Vec<Dropped>,
    pub dropped_count: usize,
    /// Bars on which the opens were scaled down for lack of cash.
    pub scaled_count: usize,
    /// Bars on which anything was filled.
    pub trade_bars: usize,
}

pub(crate) const MAX_DROPPED_LOGGED: usize = 20;

#[derive(Clone, Copy, Default)]
struct Pos {
    qty: f64,
    entry: f64,
    margin: f64,
    open_bar: usize,
    opened_qty: f64,
    opened_notional: f64,
    closed_qty: f64,
    closed_notional: f64,
    fees: f64,
    realized: f64,
}

#[inline]
fn sgn(x: f64) -> i8 {
    if x > 0.0 {
        1
    } else if x < 0.0 {
        -1
    } else {
        0
    }
}

struct Book<'a> {
    k: usize,
    cash: f64,
    pos: Vec<Pos>,
    /// Mirror of `pos[s].qty`, dense for the per-bar dot product.
    qty: Vec<f64>,
    /// Mirror of `pos[s].margin - pos[s].qty * pos[s].entry`, dense so
    /// that [`Book::base`] is one short sum, not a walk over `pos`.
    off: Vec<f64>,
    rules: &'a [SymbolRules],
    /// No weights or turnover ([`simulate_equity_into`]).
    lean: bool,
    out: Simulation,
}

impl Book<'_> {
    /// `base` of the module docs.
    fn base(&self) -> f64 {
        self.cash + self.off.iter().sum::<f64>()
    }

    /// Refreshes the dense mirrors of `pos[s]`.
    #[inline]
    fn sync(&mut self, s: usize) {
        let p = &self.pos[s];
        self.qty[s] = p.qty;
        self.off[s] = p.margin - p.qty * p.entry;
    }

    fn log_dropped(&mut self, d: Dropped) {
        self.out.dropped_count += 1;
        if self.out.dropped.len() < MAX_DROPPED_LOGGED {
            self.out.dropped.push(d);
        }
    }

    /// Closes `amount` (> 0) of symbol `s` at reference price `px`.
    fn close(&mut self, t: usize, s: usize, amount: f64, px: f64, reason: Reason) {
        let r = self.rules[s];
        let p = &mut self.pos[s];
        let long = p.qty > 0.0;
        let held = p.qty.abs();
        let amount = amount.min(held);
        if amount <= 0.0 {
            return;
        }
        let pf = if long {
            px * (1.0 - r.slippage)
        } else {
            px * (1.0 + r.slippage)
        };
        let notional = amount * pf;
        let fee = r.fee(notional, long);
        let pnl = if long {
            amount * (pf - p.entry)
        } else {
            amount * (p.entry - pf)
        };
        let full = amount >= held;
        let released = if full {
            p.margin
        } else {
            p.margin * amount / held
        };
        self.cash += released + pnl - fee;
        p.margin -= released;
        p.qty = if full {
            0.0
        } else {
            p.qty - if long { amount } else { -amount }
        };
        p.closed_qty += amount;
        p.closed_notional += notional;
        p.fees += fee;
        p.realized += pnl;
        let action = match (full, long) {
            (true, true) => "close_long",
            (true, false) => "close_short",
            (false, true) => "decrease_long",
            (false, false) => "decrease_short",
        };
        self.out.fills.push(Fill {
            symbol: s,
            bar: t,
            action,
            signed_quantity: if long { -amount } else { amount },
            notional,
            execution_price: pf,
            fee,
            margin: -released,
            reason,
            holding_bars: t - p.open_bar,
        });
        if full {
            let trip = RoundTrip {
                symbol: s,
                side: if long { 1 } else { -1 },
                entry_bar: p.open_bar,
                exit_bar: t,
                qty: p.opened_qty,
                entry_price: p.opened_notional / p.opened_qty,
                exit_price: p.closed_notional / p.closed_qty,
                pnl: p.realized - p.fees,
                fees: p.fees,
                return_pct: (p.realized - p.fees) / p.opened_notional,
                exit_reason: reason,
            };
            self.out.trades.push(trip);
            *p = Pos::default();
        }
        self.sync(s);
    }

    /// Cost in cash of opening signed `q` of `s` at reference `px`.
    #[inline]
    fn open_cost(&self, s: usize, q: f64, px: f64) -> f64 {
        if q == 0.0 {
            return 0.0;
        }
        let r = &self.rules[s];
        let pf = if q > 0.0 {
            px * (1.0 + r.slippage)
        } else {
            px * (1.0 - r.slippage)
        };
        let notional = q.abs() * pf;
        notional + r.fee(notional, q < 0.0)
    }

    /// Opens signed `q` of `s` at reference price `px`.
    fn open(&mut self, t: usize, s: usize, q: f64, px: f64, reason: Reason) {
        if q == 0.0 {
            return;
        }
        let r = self.rules[s];
        let buy = q > 0.0;
        let pf = if buy {
            px * (1.0 + r.slippage)
        } else {
            px * (1.0 - r.slippage)
        };
        let amount = q.abs();
        let notional = amount * pf;
        let fee = r.fee(notional, !buy);
        self.cash -= notional + fee;
        let p = &mut self.pos[s];
        let fresh = p.qty == 0.0;
        if fresh {
            *p = Pos {
                open_bar: t,
                ..Pos::default()
            };
        }
        let held = p.qty.abs();
        p.entry = (held * p.entry + amount * pf) / (held + amount);
        p.qty += q;
        p.margin += notional;
        p.opened_qty += amount;
        p.opened_notional += notional;
        p.fees += fee;
        let action = match (fresh, buy) {
            (true, true) => "open_long",
            (true, false) => "open_short",
            (false, true) => "increase_long",
            (false, false) => "increase_short",
        };
        self.out.fills.push(Fill {
            symbol: s,
            bar: t,
            action,
            signed_quantity: q,
            notional,
            execution_price: pf,
            fee,
            margin: notional,
            reason,
            holding_bars: t - p.open_bar,
        });
        self.sync(s);
    }
}

/// Scratch for one trading bar, allocated once.
struct Orders {
    /// (symbol, amount > 0, reason)
    closes: Vec<(usize, f64, Reason)>,
    /// (symbol, signed qty, reason)
    opens: Vec<(usize, f64, Reason)>,
    /// Symbols that may need an order today, ascending: only these are
    /// visited by [`trade_bar`] (with many symbols nearly every bar trades
    /// one of them, so a walk over all of them per trade bar dominated).
    todo: Vec<usize>,
}

/// Runs the book over the panel with row-major `targets` (from
/// [`align_targets`]).
pub fn simulate(panel: &Panel, targets: &[f64], p: &SimParams<'_>) -> Simulation {
    let mut out = Simulation::default();
    simulate_into(panel, targets, p, &mut out);
    out
}

/// [`simulate`] into `out`, reusing its buffers: a parameter sweep runs
/// thousands of simulations of one shape, and fresh output buffers cost a
/// page fault per 4 KiB on first touch — more than the simulation itself
/// for a single symbol.
pub fn simulate_into(panel: &Panel, targets: &[f64], p: &SimParams<'_>, out: &mut Simulation) {
    simulate_book(panel, targets, p, out, false);
}

/// [`simulate_into`] without the per-bar weights and turnover (left
/// empty): the equity, fills and trades are the same to the bit. A sweep
/// reads no more, and the two series were a tenth of a cell's time.
pub(crate) fn simulate_equity_into(
    panel: &Panel,
    targets: &[f64],
    p: &SimParams<'_>,
    out: &mut Simulation,
) {
    simulate_book(panel, targets, p, out, true);
}

fn simulate_book(
    panel: &Panel,
    targets: &[f64],
    p: &SimParams<'_>,
    out: &mut Simulation,
    lean: bool,
) {
    let (n, k) = (panel.n(), panel.k());
    let mut sim = std::mem::take(out);
    sim.equity.clear();
    sim.equity.reserve(n);
    // Filled row by row as the bars go: no zeroing pass over fresh pages.
    sim.weights.clear();
    sim.turnover.clear();
    if !lean {
        sim.weights.reserve(n * k);
        sim.turnover.reserve(n);
    }
    sim.fills.clear();
    sim.trades.clear();
    sim.dropped.clear();
    sim.dropped_count = 0;
    sim.scaled_count = 0;
    sim.trade_bars = 0;
    let mut book = Book {
        k,
        cash: p.initial_cash,
        pos: vec![Pos::default(); k],
        qty: vec![0.0; k],
        off: vec![0.0; k],
        rules: p.rules,
        lean,
        out: sim,
    };
    if k > 0 && n > 0 && targets.len() >= n * k && p.rules.len() >= k {
        run_book(&mut book, panel, targets, p);
    }
    *out = book.out;
}

fn run_book(book: &mut Book<'_>, panel: &Panel, targets: &[f64], p: &SimParams<'_>) {
    if panel.k() == 1 {
        run_book_k::<true>(book, panel, targets, p);
    } else {
        run_book_k::<false>(book, panel, targets, p);
    }
}

/// The bar loop; `ONE`: the panel has one symbol, so every per-symbol loop
/// runs once and compiles to straight code. A sweep simulates one symbol
/// thousands of times, and the loops' bookkeeping around a single
/// iteration was a tenth of a cell's time. The operations and their order
/// are the same either way.
#[inline(always)]
fn run_book_k<const ONE: bool>(
    book: &mut Book<'_>,
    panel: &Panel,
    targets: &[f64],
    p: &SimParams<'_>,
) {
    let (n, k) = (panel.n(), if ONE { 1 } else { panel.k() });
    let mut orders = Orders {
        closes: Vec::with_capacity(k),
        opens: Vec::with_capacity(k),
        todo: Vec::with_capacity(k),
    };
    let mut prev_target = vec![0.0; k];
    let funding = p.rules.iter().any(|r| r.funding_per_bar != 0.0);
    let rebalance = p.adjustment == Adjustment::Rebalance;
    let mut base = p.initial_cash;

    for t in 0..n {
        let row = t * k;
        let tg = &targets[row..row + k];
        let op = &panel.open[row..row + k];
        let mk = &panel.mark[row..row + k];
        let fills_before = book.out.fills.len();

        if funding && t > 0 {
            let prev = &panel.mark[row - k..row];
            for (s, (r, m)) in p.rules.iter().zip(prev).enumerate() {
                let (f, q) = (r.funding_per_bar, book.qty[s]);
                if f != 0.0 && q != 0.0 {
                    let charge = q * m * f;
                    book.cash -= charge;
                    book.pos[s].fees += charge;
                    base -= charge;
                }
            }
        }

        // Does anything need an order today? (the hot path: usually not)
        orders.todo.clear();
        for s in 0..k {
            let (w, q) = (tg[s], book.qty[s]);
            if sgn(w) != sgn(q) || (q != 0.0 && rebalance) {
                if op[s].is_finite() {
                    orders.todo.push(s);
                }
            } else if q != 0.0 && w != prev_target[s] {
                book.log_dropped(Dropped {
                    bar: t,
                    symbol: s,
                    why: "hold_mode",
                    target_weight: w,
                    held_quantity: q,
                });
            }
            prev_target[s] = w;
        }
        if !orders.todo.is_empty() {
            trade_bar(book, &mut orders, panel, t, tg, p);
            base = book.base();
        }

        let mut e = base;
        for (q, m) in book.qty.iter().zip(mk) {
            e += q * m;
        }
        if t + 1 == n {
            // Spec §7.4: force-close everything at the last close.
            for (s, &m) in mk.iter().enumerate() {
                let q = book.qty[s];
                if q != 0.0 {
                    book.close(t, s, q.abs(), m, Reason::EndOfBacktest);
                }
            }
            base = book.base();
            e = base;
        }
        book.out.equity.push(e);
        if book.lean {
            if book.out.fills.len() > fills_before {
                book.out.trade_bars += 1;
            }
            continue;
        }
        let inv = if e != 0.0 { 1.0 / e } else { 0.0 };
        book.out
            .weights
            .extend(book.qty.iter().zip(mk).map(|(q, m)| q * m * inv));
        let turnover = if book.out.fills.len() > fills_before {
            book.out.trade_bars += 1;
            let traded: f64 = book.out.fills[fills_before..]
                .iter()
                .map(|f| f.notional)
                .sum();
            if e != 0.0 {
                traded / (2.0 * e.abs())
            } else {
                0.0
            }
        } else {
            0.0
        };
        book.out.turnover.push(turnover);
    }
}

/// The slow path: value at the open, make orders, close, then open.
fn trade_bar(
    book: &mut Book<'_>,
    orders: &mut Orders,
    panel: &Panel,
    t: usize,
    tg: &[f64],
    p: &SimParams<'_>,
) {
    let k = book.k;
    let row = t * k;
    let op = &panel.open[row..row + k];
    let mk = &panel.mark[row..row + k];
    let e_open = equity_at_open(book, op, mk);
    make_orders(book, orders, op, tg, e_open, p);
    // Price limits (A-shares): judged on the open against the last close.
    if t > 0 && book.rules.iter().any(|r| r.price_limit > 0.0) {
        let prev = &panel.mark[row - k..row];
        drop_limit_blocked(book, orders, t, tg, op, prev);
    }
    for &(s, amount, reason) in &orders.closes {
        book.close(t, s, amount, op[s], reason);
    }
    if orders.opens.is_empty() {
        return;
    }
    let (scale, direct) = open_scale(book, &orders.opens, op);
    for i in 0..orders.opens.len() {
        let (s, q, reason) = orders.opens[i];
        let q = direct.unwrap_or_else(|| book.rules[s].round_lot(q * scale));
        book.open(t, s, q, op[s], reason);
    }
}

/// The book's value at today's open (the last mark where a symbol has no
/// open).
#[inline]
fn equity_at_open(book: &Book<'_>, op: &[f64], mk: &[f64]) -> f64 {
    let mut e_open = book.base();
    for s in 0..book.k {
        let px = if op[s].is_finite() { op[s] } else { mk[s] };
        e_open += book.qty[s] * px;
    }
    e_open
}

/// Fills `orders.closes` and `orders.opens` for the symbols in
/// `orders.todo`: direction changes, and resizes when rebalancing.
#[inline]
fn make_orders(
    book: &Book<'_>,
    orders: &mut Orders,
    op: &[f64],
    tg: &[f64],
    e_open: f64,
    p: &SimParams<'_>,
) {
    orders.closes.clear();
    orders.opens.clear();
    let rebalance = p.adjustment == Adjustment::Rebalance;
    for &s in &orders.todo {
        let o = op[s];
        if !o.is_finite() || o <= 0.0 {
            continue;
        }
        let r = &book.rules[s];
        let (w, q) = (tg[s], book.qty[s]);
        let desired = if e_open > 0.0 {
            r.round_lot(w * e_open / o)
        } else {
            0.0
        };
        let (ws, qs) = (sgn(w), sgn(q));
        if ws != qs {
            if qs != 0 {
                let reason = if ws == 0 {
                    Reason::Signal
                } else {
                    Reason::Reverse
                };
                orders.closes.push((s, q.abs(), reason));
            }
            if ws != 0 && desired != 0.0 {
                let reason = if qs == 0 {
                    Reason::Signal
                } else {
                    Reason::Reverse
                };
                orders.opens.push((s, desired, reason));
            }
        } else if rebalance && qs != 0 && e_open > 0.0 {
            let held_w = q * o / e_open;
            if (held_w - w).abs() > p.tolerance * w.abs() {
                let delta = desired - q;
                if delta != 0.0 && desired.abs() < q.abs() {
                    orders.closes.push((s, delta.abs(), Reason::Rebalance));
                } else if delta != 0.0 && sgn(delta) == qs {
                    orders.opens.push((s, delta, Reason::Rebalance));
                }
            }
        }
    }
}

/// Drops (and logs) the orders a price limit blocks: a buy at or above
/// the up limit, a sell at or below the down limit, from the last close
/// `prev`. A blocked close takes that symbol's opens with it.
fn drop_limit_blocked(
    book: &mut Book<'_>,
    orders: &mut Orders,
    t: usize,
    tg: &[f64],
    op: &[f64],
    prev: &[f64],
) {
    let blocked = |s: usize, buy: bool, rules: &[SymbolRules]| {
        let lim = rules[s].price_limit;
        let (o, pc) = (op[s], prev[s]);
        lim > 0.0
            && pc > 0.0
            && if buy {
                o >= pc * (1.0 + lim) * (1.0 - 1e-9)
            } else {
                o <= pc * (1.0 - lim) * (1.0 + 1e-9)
            }
    };
    let mut i = 0;
    while i < orders.closes.len() {
        let (s, _, _) = orders.closes[i];
        // Closing a long sells; closing a short buys.
        if blocked(s, book.qty[s] < 0.0, book.rules) {
            orders.closes.swap_remove(i);
            orders.opens.retain(|o| o.0 != s);
            book.log_dropped(Dropped {
                bar: t,
                symbol: s,
                why: "price_limit",
                target_weight: tg[s],
                held_quantity: book.qty[s],
            });
        } else {
            i += 1;
        }
    }
    let mut i = 0;
    while i < orders.opens.len() {
        let (s, q, _) = orders.opens[i];
        if blocked(s, q > 0.0, book.rules) {
            orders.opens.swap_remove(i);
            book.log_dropped(Dropped {
                bar: t,
                symbol: s,
                why: "price_limit",
                target_weight: tg[s],
                held_quantity: book.qty[s],
            });
        } else {
            i += 1;
        }
    }
}

/// How much of today's opens the cash buys. Opens are priced together;
/// when short of cash, one common scale of every quantity (found by
/// bisection), or for one open in whole lots the quantity itself
/// (`Some`, see [`single_open_quantity`]). Counts a scaled bar.
#[inline]
fn open_scale(
    book: &mut Book<'_>,
    opens: &[(usize, f64, Reason)],
    op: &[f64],
) -> (f64, Option<f64>) {
    let need = |book: &Book<'_>, scale: f64| -> f64 {
        opens
            .iter()
            .map(|&(s, q, _)| book.open_cost(s, book.rules[s].round_lot(q * scale), op[s]))
            .sum()
    };
    let full = need(book, 1.0);
    if full > book.cash {
        book.out.scaled_count += 1;
        // Not even one lot of any open fits: nothing to search for (a
        // starved target retries every bar, so this path must be cheap).
        let one_lot = opens
            .iter()
            .map(|&(s, q, _)| {
                let lot = book.rules[s].lot;
                if lot > 0.0 {
                    book.open_cost(s, lot.copysign(q), op[s])
                } else {
                    0.0
                }
            })
            .fold(f64::INFINITY, f64::min);
        if book.cash <= 0.0 || one_lot > book.cash {
            return (0.0, None);
        }
        if let Some(q) = single_open_quantity(book, opens, op) {
            return (1.0, Some(q));
        }
        let scale = |s: f64| need(book, s);
        let cash = book.cash;
        return (
            boundary_scale(cash, full, scale).unwrap_or_else(|| bisect_scale(cash, scale)),
            None,
        );
    }
    (1.0, None)
}

/// The largest scale in [0, 1) on the grid of fifty halvings whose `need`
/// the cash covers.
fn bisect_scale(cash: f64, need: impl Fn(f64) -> f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..50 {
        let mid = 0.5 * (lo + hi);
        if need(mid) <= cash {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// 2^50: fifty halvings of [0, 1] land on a multiple of 1 / 2^50.
const HALVINGS: f64 = 1_125_899_906_842_624.0;

/// [`bisect_scale`]'s result without bisecting. Its fifty halvings keep
/// `need(lo) <= cash < need(hi)` with `hi - lo` halving from 1, so they end
/// on `lo = K / 2^50` for the `K` where `need` crosses the cash (every
/// midpoint is exact in binary). `need` is monotone in the scale (rounded
/// quantities, prices and fees all rise with it), so `K` is the one
/// boundary, found here from the proportional guess in a step or two and
/// checked on both sides: the same bits in 2 to 4 cost evaluations rather
/// than 50 (the bisection was 6 % of a sweep's time). `None` (a guess more
/// than a few steps off, as a minimum fee can make it) leaves it to the
/// bisection.
fn boundary_scale(cash: f64, full: f64, need: impl Fn(f64) -> f64) -> Option<f64> {
    if !(full.is_finite() && full > cash && cash > 0.0) {
        return None;
    }
    let guess = ((cash / full) * HALVINGS)
        .floor()
        .clamp(0.0, HALVINGS - 1.0);
    let k = last_that_fits(guess, HALVINGS, 4, |k| need(k / HALVINGS) <= cash)?;
    Some(k / HALVINGS)
}

/// From `guess`, the largest whole `k` below `end` for which `fits` holds,
/// stepping one at a time (up while `k + 1` fits, then down while `k` does
/// not; `fits(0)` is taken to hold). `fits` must hold up to a point and
/// fail after it. `None` past `max_steps` steps.
fn last_that_fits(guess: f64, end: f64, max_steps: u32, fits: impl Fn(f64) -> bool) -> Option<f64> {
    let mut k = guess;
    let mut steps = 0;
    while k + 1.0 < end && fits(k + 1.0) {
        k += 1.0;
        steps += 1;
        if steps > max_steps {
            return None;
        }
    }
    while k > 0.0 && !fits(k) {
        k -= 1.0;
        steps += 1;
        if steps > max_steps {
            return None;
        }
    }
    Some(k)
}

/// The bisection's result without bisecting, for the common case of one
/// open in whole lots that does not fit the cash: the largest affordable
/// number of lots below the order's. The bisection lands on exactly that
/// quantity, computed the same way (`k × lot`): its quantities are
/// `trunc(q·scale / lot) × lot`, the cost rises with them, and 50 halvings
/// resolve steps far finer than one lot in `q`. Fifty dependent cost
/// evaluations per open were a third of a single-symbol run. `None` leaves
/// the case to the bisection.
fn single_open_quantity(
    book: &Book<'_>,
    opens: &[(usize, f64, Reason)],
    op: &[f64],
) -> Option<f64> {
    let &[(s, q, _)] = opens else {
        return None;
    };
    let lot = book.rules[s].lot;
    let px = op[s];
    let full = (book.rules[s].round_lot(q) / lot).abs().round();
    if !(lot > 0.0 && full.is_finite() && (1.0..1e15).contains(&full)) {
        return None;
    }
    let cost = |k: f64| book.open_cost(s, (k * lot).copysign(q), px);
    let cash = book.cash;
    let total = cost(full);
    if !(total > cash && total.is_finite()) {
        return None;
    }
    // Proportional first guess, then single steps (fees make it inexact).
    let guess = (full * cash / total).floor().clamp(0.0, full - 1.0);
    let k = last_that_fits(guess, full, 64, |k| cost(k) <= cash)?;
    Some((k * lot).copysign(q))
}

/// Market of each code, and the per-symbol rules.
pub fn rules_for(
    codes: &[String],
    overrides: &CostOverrides,
) -> (Vec<Market>, Vec<SymbolRules>, Vec<String>) {
    let mut markets = Vec::with_capacity(codes.len());
    let mut rules = Vec::with_capacity(codes.len());
    let mut notes = Vec::new();
    for c in codes {
        let m = detect_market(c);
        let (r, mut n) = SymbolRules::for_market(m, c, overrides);
        markets.push(m);
        rules.push(r);
        notes.append(&mut n);
    }
    (markets, rules, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortcut lands on the bisection's bits, for proportional fees,
    /// a minimum fee, slippage and whole lots, over many cash levels; where
    /// it declines, the bisection answers.
    #[test]
    fn the_boundary_scale_is_the_bisections_to_the_bit() {
        let mut rng = crate::research::seeded::SplitMix64::new(0x9e37_79b9_7f4a_7c15);
        let mut next = || rng.uniform();
        let mut found = 0;
        for case in 0..4_000 {
            let q = 1.0 + next() * 50_000.0;
            let px = 1.0 + next() * 500.0;
            let rate = [0.0, 0.0005, 0.001, 0.003][case % 4];
            let min_fee = if case % 3 == 0 { 5.0 } else { 0.0 };
            let lot = if case % 5 == 0 { 100.0 } else { 0.0 };
            let slip = if case % 7 == 0 { 0.0005 } else { 0.0 };
            let need = |scale: f64| {
                let qs = if lot > 0.0 {
                    (q * scale / lot).trunc() * lot
                } else {
                    q * scale
                };
                if qs == 0.0 {
                    return 0.0;
                }
                let notional = qs * px * (1.0 + slip);
                notional + (notional * rate).max(min_fee)
            };
            let full = need(1.0);
            let cash = full * (0.05 + 0.95 * next());
            if full <= cash {
                continue;
            }
            let want = bisect_scale(cash, need);
            if let Some(got) = boundary_scale(cash, full, need) {
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "case {case}: {got} vs {want}"
                );
                found += 1;
            }
        }
        assert!(found > 2_000, "the shortcut answered only {found} times");
    }

    fn d(i: i64) -> NaiveDate {
        NaiveDate::from_ymd_opt(2020, 1, 1).unwrap() + chrono::Duration::days(i)
    }

    fn bars(prices: &[(f64, f64)]) -> Bars {
        let mut b = Bars::default();
        for (i, (o, c)) in prices.iter().enumerate() {
            b.push(d(i as i64), *o, o.max(*c), o.min(*c), *c, 1.0);
        }
        b
    }

    /// The closed form equals the 50-step bisection on whole lots, with
    /// commissions, minimum fees, taxes and slippage, long and short.
    #[test]
    fn the_single_open_closed_form_equals_the_bisection() {
        let mut rng = super::super::validation::Rng::new(7);
        let mut u = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let mut checked = 0;
        for case in 0..5_000 {
            let r = SymbolRules {
                fee_rate: [0.0, 0.001, 0.00025][case % 3],
                min_fee: [0.0, 5.0][case % 2],
                sell_tax: [0.0, 0.0005][(case / 2) % 2],
                transfer_fee: [0.0, 0.00001][(case / 3) % 2],
                slippage: [0.0, 0.0005, 0.001][(case / 5) % 3],
                lot: [1.0, 100.0, 10.0, 0.5][(case / 7) % 4],
                ..free()
            };
            let rules = [r];
            let px = 1.0 + u() * 500.0;
            let cash = 1_000.0 + u() * 2_000_000.0;
            let side = if case % 4 == 0 { -1.0 } else { 1.0 };
            // An order worth up to ~3× the cash, rounded as `trade_bar` does.
            let q = r.round_lot(side * cash * (0.5 + u() * 2.5) / px);
            let book = Book {
                k: 1,
                cash,
                pos: vec![Pos::default()],
                qty: vec![0.0],
                off: vec![0.0],
                rules: &rules,
                lean: false,
                out: Simulation::default(),
            };
            let op = [px];
            let need = |scale: f64| book.open_cost(0, r.round_lot(q * scale), px);
            if q == 0.0 || need(1.0) <= cash || book.open_cost(0, r.lot.copysign(q), px) > cash {
                continue;
            }
            let lo = bisect_scale(cash, need);
            let bisected = r.round_lot(q * lo);
            let direct = single_open_quantity(&book, &[(0, q, Reason::Signal)], &op);
            assert_eq!(
                direct.map(f64::to_bits),
                Some(bisected.to_bits()),
                "{r:?} px {px} cash {cash} q {q}"
            );
            checked += 1;
        }
        assert!(checked > 2_000, "{checked} cases reached the scaled path");
    }

    fn free() -> SymbolRules {
        SymbolRules {
            fee_rate: 0.0,
            min_fee: 0.0,
            sell_tax: 0.0,
            transfer_fee: 0.0,
            slippage: 0.0,
            lot: 0.0,
            allow_short: true,
            price_limit: 0.0,
            funding_per_bar: 0.0,
        }
    }

    #[test]
    fn next_open_fills_and_the_final_close_out() {
        let b = bars(&[(10.0, 10.0), (11.0, 12.0), (12.0, 13.0), (13.0, 14.0)]);
        let panel = Panel::new(&["X".into()], &[&b], 5);
        let rules = [free()];
        // Signal long at bar 0's close → filled at bar 1's open (11).
        let targets = align_targets(&panel, &[vec![1.0, 1.0, 1.0, 1.0]], &rules, 5);
        assert_eq!(targets, vec![0.0, 1.0, 1.0, 1.0]);
        let sim = simulate(
            &panel,
            &targets,
            &SimParams {
                initial_cash: 110.0,
                adjustment: Adjustment::Hold,
                tolerance: 0.0,
                rules: &rules,
            },
        );
        assert_eq!(sim.fills[0].execution_price, 11.0);
        assert_eq!(sim.fills[0].signed_quantity, 10.0);
        assert_eq!(sim.equity, vec![110.0, 120.0, 130.0, 140.0]);
        assert_eq!(sim.trades.len(), 1);
        assert_eq!(sim.trades[0].exit_reason, Reason::EndOfBacktest);
        assert_eq!(sim.trades[0].pnl, 30.0);
        assert_eq!(sim.weights[3], 0.0);
    }

    #[test]
    fn shorts_flips_and_fees() {
        let b = bars(&[(10.0, 10.0), (10.0, 10.0), (8.0, 8.0), (8.0, 9.0)]);
        let panel = Panel::new(&["X".into()], &[&b], 5);
        let mut r = free();
        r.fee_rate = 0.01;
        let targets = align_targets(&panel, &[vec![-1.0, 1.0, 1.0, 1.0]], &[r], 5);
        let sim = simulate(
            &panel,
            &targets,
            &SimParams {
                initial_cash: 100.0,
                adjustment: Adjustment::Hold,
                tolerance: 0.0,
                rules: &[r],
            },
        );
        // Short at 10 (scaled for the fee), cover at 8, flip long.
        let short = &sim.trades[0];
        assert_eq!(short.side, -1);
        assert_eq!(short.exit_reason, Reason::Reverse);
        assert!(short.pnl > 0.0);
        assert_eq!(sim.fills[0].action, "open_short");
        assert_eq!(sim.fills[2].action, "open_long");
        let fees: f64 = sim.fills.iter().map(|f| f.fee).sum();
        let gross: f64 = sim.trades.iter().map(|t| t.pnl + t.fees).sum();
        assert!((sim.equity[3] - (100.0 + gross - fees)).abs() < 1e-9);
    }

    #[test]
    fn union_calendar_and_forward_fill_limit() {
        let a = bars(&[(1.0, 1.0), (1.0, 1.0), (1.0, 1.0), (1.0, 1.0)]);
        let mut b = Bars::default();
        b.push(d(0), 2.0, 2.0, 2.0, 2.0, 1.0);
        b.push(d(3), 3.0, 3.0, 3.0, 3.0, 1.0);
        let panel = Panel::new(&["A".into(), "B".into()], &[&a, &b], 1);
        assert_eq!(panel.n(), 4);
        assert!(panel.open[3].is_nan());
        assert_eq!(panel.mark[5], 2.0);
        assert_eq!(panel.close[3], 2.0, "filled one bar");
        assert!(panel.close[5].is_nan(), "beyond the limit");
        let w = align_targets(
            &panel,
            &[vec![1.0; 4], vec![1.0, 1.0]],
            &[free(), free()],
            1,
        );
        // Row 1: A 1 (yesterday's signal), B no bar, filled 0 (its first bar had no prior signal).
        assert_eq!(&w[2..4], &[1.0, 0.0]);
        // Row 3: both 1 → scaled to 0.5 each.
        assert_eq!(&w[6..8], &[0.5, 0.5]);
    }

    #[test]
    fn cash_constraint_scales_opens_by_bisection() {
        let b = bars(&[(10.0, 10.0), (10.0, 10.0), (10.0, 10.0)]);
        let panel = Panel::new(&["X".into()], &[&b], 5);
        let mut r = free();
        r.fee_rate = 0.001;
        r.lot = 1.0;
        let targets = align_targets(&panel, &[vec![1.0; 3]], &[r], 5);
        let sim = simulate(
            &panel,
            &targets,
            &SimParams {
                initial_cash: 1000.0,
                adjustment: Adjustment::Hold,
                tolerance: 0.0,
                rules: &[r],
            },
        );
        // 100 shares would cost 1001; 99 fit.
        assert_eq!(sim.fills[0].signed_quantity, 99.0);
        assert_eq!(sim.scaled_count, 1);
    }

    #[test]
    fn rebalance_resizes_and_hold_logs() {
        let b = bars(&[(10.0, 10.0), (10.0, 10.0), (10.0, 10.0), (10.0, 10.0)]);
        let panel = Panel::new(&["X".into()], &[&b], 5);
        let r = free();
        let targets = align_targets(&panel, &[vec![1.0, 0.5, 0.5, 0.5]], &[r], 5);
        let hold = simulate(
            &panel,
            &targets,
            &SimParams {
                initial_cash: 100.0,
                adjustment: Adjustment::Hold,
                tolerance: 0.0,
                rules: &[r],
            },
        );
        assert_eq!(hold.dropped_count, 1);
        assert_eq!(hold.fills.len(), 2);
        let reb = simulate(
            &panel,
            &targets,
            &SimParams {
                initial_cash: 100.0,
                adjustment: Adjustment::Rebalance,
                tolerance: 0.1,
                rules: &[r],
            },
        );
        assert_eq!(reb.fills[1].action, "decrease_long");
        assert_eq!(reb.fills[1].signed_quantity, -5.0);
        assert_eq!(reb.fills.len(), 3);
        assert_eq!(reb.trades.len(), 1);
    }
}
