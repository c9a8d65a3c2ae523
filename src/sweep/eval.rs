//! One cell, exactly as the same config run alone (docs §18.3): the
//! backtest engine's alignment ([`engine::align_targets_from`]), optimizer,
//! simulation ([`engine::simulate_equity_into`]) and §7.5 metric formulas,
//! on the same bars and the same warm signals (docs §7.4.1).
//!
//! What is shared and why it changes nothing:
//! - prices are loaded once, with all their history (the embedded and
//!   local sources serve a backtest all of it too), up to the last window's
//!   end; a signal on a date depends on bars up to that date only, so a
//!   longer series gives the same value there;
//! - the panel, the cost rules and the risk-free rate of a unit over a
//!   window depend on the codes, the dates and the costs, not on the
//!   strategy's parameters: built once per (unit, window) when only
//!   `strategy.*` is swept;
//! - the moving averages of the crossovers are computed once per (symbol,
//!   kind, length) and combined by the strategy's own
//!   [`strategies::crossover`] over the window's bars alone.

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;

use super::SweepError;
use super::plan::Plan;
use super::rows::{PowerSums, Row};
use crate::research::backtest::engine::{self, Panel, SimParams, Simulation, SymbolRules};
use crate::research::backtest::strategies::{self, Builtin};
use crate::research::backtest::{
    self as bt, BacktestConfig, RunOptions, StrategySpec, benchmark, metrics, rebalance,
};
use crate::research::data::PriceSeries;
use crate::research::indicators;
use crate::research::warmup;

/// The plan with its prices loaded and its parameter sets checked: what
/// every worker reads.
pub struct Prepared {
    pub plan: Arc<Plan>,
    /// Loaded series by code, with their history, to the last window's end.
    loaded: HashMap<String, PriceSeries>,
    /// Each parameter set's config (codes and dates are set per cell).
    configs: Vec<BacktestConfig>,
    /// Parameter sets that share (unit, window) contexts have one class:
    /// the values of their axes outside `strategy`.
    class: Vec<usize>,
}

impl Prepared {
    /// Checks the plan's parameter sets and loads its prices once (docs
    /// §7.3: the sources and fallbacks a backtest uses; `data_dir` is
    /// searched for local files as a run dir is).
    pub async fn load(
        plan: Arc<Plan>,
        data_dir: &Path,
        opts: &RunOptions,
    ) -> Result<Prepared, SweepError> {
        let mut configs = Vec::with_capacity(plan.combos.len());
        for c in 0..plan.combos.len() {
            configs.push(plan.config(c, 0, 0)?);
        }
        let class = classes(&plan);
        let Some(first) = configs.first() else {
            return Err(SweepError::Plan("the plan has no parameter set".into()));
        };
        let mut codes: Vec<String> = Vec::new();
        for u in &plan.units {
            for c in &u.codes {
                if !codes.contains(c) {
                    codes.push(c.clone());
                }
            }
        }
        let (Some(start), Some(end)) = (
            plan.windows.iter().map(|w| w.start).min(),
            plan.windows.iter().map(|w| w.end).max(),
        ) else {
            return Err(SweepError::Plan("the plan has no window".into()));
        };
        let mut load_cfg = first.clone();
        load_cfg.codes = codes;
        load_cfg.start_date = start;
        load_cfg.end_date = end;
        // The most history any parameter set needs; the offline sources
        // serve all of it whatever the count.
        load_cfg.warmup = Some(
            configs
                .iter()
                .map(BacktestConfig::warmup_bars)
                .max()
                .unwrap_or(0),
        );
        load_cfg.benchmark = Some("equal_weight".into());
        let (series, _, _) = bt::fetch_data(&load_cfg, data_dir, opts)
            .await
            .map_err(|e| SweepError::Data(format!("loading the sweep's prices: {e}")))?;
        let loaded = series.into_iter().map(|s| (s.symbol.clone(), s)).collect();
        Ok(Prepared {
            plan,
            loaded,
            configs,
            class,
        })
    }

    /// The config of a cell over a window (as `plan.config` would build it).
    pub fn cell_config(&self, combo: usize, unit: usize, window: usize) -> Option<BacktestConfig> {
        let mut cfg = self.configs.get(combo)?.clone();
        cfg.codes = self.plan.units.get(unit)?.codes.clone();
        let w = self.plan.windows.get(window)?;
        cfg.start_date = w.start;
        cfg.end_date = w.end;
        Some(cfg)
    }

    fn unit_series(&self, unit: usize) -> Vec<&PriceSeries> {
        self.plan
            .units
            .get(unit)
            .map(|u| u.codes.iter().filter_map(|c| self.loaded.get(c)).collect())
            .unwrap_or_default()
    }
}

/// The class of each parameter set: equal values on the axes outside
/// `strategy` (costs, cash, ...) share contexts.
fn classes(plan: &Plan) -> Vec<usize> {
    let outside: Vec<usize> = plan
        .axes
        .iter()
        .enumerate()
        .filter(|(_, a)| !a.path.starts_with("strategy."))
        .map(|(i, _)| i)
        .collect();
    let mut seen: HashMap<String, usize> = HashMap::new();
    plan.combos
        .iter()
        .map(|combo| {
            let key: Vec<&Value> = outside.iter().filter_map(|i| combo.get(*i)).collect();
            let key = serde_json::to_string(&key).unwrap_or_default();
            let n = seen.len();
            *seen.entry(key).or_insert(n)
        })
        .collect()
}

/// A unit over a window: what every parameter set of a class shares.
struct Context {
    offsets: Vec<usize>,
    lens: Vec<usize>,
    /// The range's series (signals of a config without warm-up start here).
    range: Vec<PriceSeries>,
    /// The loaded series cut at the window's end (the optimizer's and the
    /// pairs' trailing windows).
    history: Vec<PriceSeries>,
    panel: Panel,
    rules: Vec<SymbolRules>,
    limit: usize,
    bars_per_year: f64,
    risk_free: Vec<f64>,
    /// A series with no bar in the window: the standalone run refuses it;
    /// the sweep writes a row of NaN.
    empty: bool,
}

fn context(cfg: &BacktestConfig, loaded: &[&PriceSeries]) -> Context {
    let owned: Vec<PriceSeries> = loaded.iter().map(|s| (*s).clone()).collect();
    let range = bt::in_range(cfg, &owned);
    let lens: Vec<usize> = range.series.iter().map(|s| s.bars.len()).collect();
    let empty = lens.contains(&0) || lens.len() != cfg.codes.len();
    let panel = bt::panel_for(cfg, &range.series);
    let (markets, rules, _) = engine::rules_for(&cfg.codes, &cfg.costs);
    let limit = bt::ffill_limit(&markets);
    let bars_per_year =
        metrics::resolve_bars_per_year(bt::bars_per_year(&markets), panel.n(), &panel.dates);
    let risk_free = benchmark::risk_free(&markets, &panel.dates, bars_per_year).per_bar;
    let needs_history = cfg.optimizer.is_some();
    let history = if needs_history {
        owned
            .into_iter()
            .map(|mut s| {
                warmup::cut(&mut s, None, Some(cfg.end_date));
                s
            })
            .collect()
    } else {
        Vec::new()
    };
    Context {
        offsets: range.offsets,
        lens,
        range: range.series,
        history,
        panel,
        rules,
        limit,
        bars_per_year,
        risk_free,
        empty,
    }
}

/// A worker's caches and buffers; one per thread, reset when its unit
/// changes.
#[derive(Default)]
pub struct Scratch {
    unit: Option<usize>,
    contexts: HashMap<(usize, usize), Rc<Context>>,
    /// Moving averages by (code index, EMA?, length).
    averages: HashMap<(usize, bool, usize), Rc<Vec<f64>>>,
    sim: Simulation,
    excess: Vec<f64>,
    /// A one-symbol crossover's targets, reused from cell to cell.
    targets: Vec<f64>,
}

impl Scratch {
    fn enter(&mut self, unit: usize) {
        if self.unit != Some(unit) {
            self.unit = Some(unit);
            self.contexts.clear();
            self.averages.clear();
        }
    }

    fn average(&mut self, code: usize, close: &[f64], ema: bool, len: usize) -> Rc<Vec<f64>> {
        self.averages
            .entry((code, ema, len))
            .or_insert_with(|| {
                let r = if ema {
                    indicators::ema(close, len)
                } else {
                    indicators::sma(close, len)
                };
                Rc::new(r.unwrap_or_else(|_| vec![f64::NAN; close.len()]))
            })
            .clone()
    }
}

/// A crossover's (EMA?, fast, slow, allow_short, size).
type Cross = (bool, usize, usize, bool, f64);

fn crossover_of(strategy: &StrategySpec) -> Option<Cross> {
    match strategy {
        StrategySpec::Builtin(Builtin::SmaCrossover {
            fast,
            slow,
            allow_short,
            size,
        }) => Some((false, *fast, *slow, *allow_short, *size)),
        StrategySpec::Builtin(Builtin::EmaCrossover {
            fast,
            slow,
            allow_short,
            size,
        }) => Some((true, *fast, *slow, *allow_short, *size)),
        _ => None,
    }
}

/// Signals on the loaded series (with history), as `rust_signals` makes
/// them (the crossovers are cut from shared averages instead:
/// [`window_crossovers`]).
fn full_signals(strategy: &StrategySpec, series: &[&PriceSeries]) -> Vec<Vec<f64>> {
    let owned: Vec<PriceSeries> = series.iter().map(|s| (*s).clone()).collect();
    bt::rust_signals(strategy, &owned)
}

/// A cell over one window: its row, and the simulation (in `scratch`).
pub struct CellRun<'s> {
    pub row: Row,
    pub sim: &'s Simulation,
}

/// Every window of a cell, in window order.
pub fn evaluate_cell(prep: &Prepared, cell: usize, scratch: &mut Scratch) -> Vec<Row> {
    if prep.plan.cv.is_some() {
        return cv_rows(prep, cell, scratch);
    }
    let windows = prep.plan.windows.len();
    let mut rows = Vec::with_capacity(windows);
    let mut signals = None;
    for w in 0..windows {
        rows.push(run_window(prep, cell, w, scratch, &mut signals).row);
    }
    rows
}

/// One cell over one window, keeping its simulation for a caller that
/// compares trades (tests) or reads returns (the report's deflated Sharpe).
pub fn run_one<'s>(
    prep: &Prepared,
    cell: usize,
    window: usize,
    scratch: &'s mut Scratch,
) -> CellRun<'s> {
    let mut signals = None;
    run_window(prep, cell, window, scratch, &mut signals)
}

/// A purged k-fold or CPCV plan's rows (docs §18.9): the whole range
/// (window 0) run once, each piece after it a slice of that run, so no
/// piece re-enters its positions or loses its first return.
fn cv_rows(prep: &Prepared, cell: usize, scratch: &mut Scratch) -> Vec<Row> {
    let mut signals = None;
    let full = run_window(prep, cell, 0, scratch, &mut signals).row;
    let windows = &prep.plan.windows;
    let mut rows = Vec::with_capacity(windows.len());
    rows.push(full);
    let c = prep.plan.cell(cell);
    let class = prep.class.get(c.combo).copied().unwrap_or(0);
    let ctx = scratch.contexts.get(&(0, class)).cloned();
    let cash = prep
        .configs
        .get(c.combo)
        .map_or(0.0, |cfg| cfg.initial_cash);
    for (w, win) in windows.iter().enumerate().skip(1) {
        rows.push(match &ctx {
            Some(ctx) if !full.final_value.is_nan() => slice_row(
                (cell, w),
                (win.start, win.end),
                &ctx.panel.dates,
                (&scratch.sim, &scratch.excess),
                (cash, ctx.bars_per_year, full.moments.n == 0),
            ),
            _ => nan_row(cell, w),
        });
    }
    rows
}

/// The §7.5 columns of the bars from `start` to `end` of a longer run
/// whose excess returns are `x`: measured from the equity before the
/// slice's first bar; a slice without a bar is a flat row, not NaN. Its
/// excess returns count unless the whole run never moved (no trial,
/// §18.4): a piece spent in cash is part of the configuration's record.
fn slice_row(
    (cell, window): (usize, usize),
    (start, end): (chrono::NaiveDate, chrono::NaiveDate),
    dates: &[chrono::NaiveDate],
    (sim, x): (&Simulation, &[f64]),
    (cash, b_year, whole_flat): (f64, f64, bool),
) -> Row {
    let eq = &sim.equity;
    let a = dates.partition_point(|d| *d < start).min(eq.len());
    let b = dates.partition_point(|d| *d <= end).min(eq.len()).max(a);
    let before = a
        .checked_sub(1)
        .and_then(|i| eq.get(i))
        .copied()
        .unwrap_or(cash);
    let part = eq.get(a..b).unwrap_or(&[]);
    let last = part.last().copied().unwrap_or(before);
    // The run's first return is the 0 before any bar moved: not a period.
    let xs = x.get(a.max(1)..b).unwrap_or(&[]);
    let flat = part.iter().all(|&e| e == before);
    Row {
        cell,
        window,
        final_value: last,
        total_return: last / before - 1.0,
        sharpe: if flat {
            0.0
        } else {
            metrics::sharpe(xs, b_year)
        },
        max_drawdown: metrics::max_drawdown(part, before),
        trade_count: sim
            .trades
            .iter()
            .filter(|t| (a..b).contains(&t.exit_bar))
            .count() as u64,
        moments: if whole_flat {
            PowerSums::default()
        } else {
            PowerSums::of(xs)
        },
    }
}

fn nan_row(cell: usize, window: usize) -> Row {
    Row {
        cell,
        window,
        final_value: f64::NAN,
        total_return: f64::NAN,
        sharpe: f64::NAN,
        max_drawdown: f64::NAN,
        trade_count: 0,
        moments: PowerSums::default(),
    }
}

fn run_window<'s>(
    prep: &Prepared,
    cell: usize,
    window: usize,
    scratch: &'s mut Scratch,
    full: &mut Option<Vec<Vec<f64>>>,
) -> CellRun<'s> {
    let c = prep.plan.cell(cell);
    scratch.enter(c.unit);
    let class = prep.class.get(c.combo).copied().unwrap_or(0);
    let key = (window, class);
    if let std::collections::hash_map::Entry::Vacant(slot) = scratch.contexts.entry(key)
        && let Some(whole) = prep.cell_config(c.combo, c.unit, window)
    {
        slot.insert(Rc::new(context(&whole, &prep.unit_series(c.unit))));
    }
    let (Some(cfg), Some(ctx)) = (
        prep.configs.get(c.combo),
        scratch.contexts.get(&key).cloned(),
    ) else {
        scratch.sim = Simulation::default();
        return CellRun {
            row: nan_row(cell, window),
            sim: &scratch.sim,
        };
    };
    if ctx.empty {
        scratch.sim = Simulation::default();
        return CellRun {
            row: nan_row(cell, window),
            sim: &scratch.sim,
        };
    }
    let mut targets = std::mem::take(&mut scratch.targets);
    let one_crossover = crossover_of(&cfg.strategy)
        .filter(|_| ctx.panel.k() == 1 && cfg.optimizer.is_none() && cfg.warmup_bars() > 0);
    match (one_crossover, prep.unit_series(c.unit).first()) {
        (Some(cross), Some(series)) => {
            let constant = cfg.strategy.constant_signal().unwrap_or(0.0);
            crossover_targets(cross, constant, series, &ctx, scratch, &mut targets);
        }
        _ => {
            let (signals, entry) = window_signals(prep, cfg, c.unit, &ctx, scratch, full);
            targets =
                engine::align_targets_from(&ctx.panel, &signals, &entry, &ctx.rules, ctx.limit);
            if let Some(spec) = &cfg.optimizer {
                rebalance::apply(spec, &ctx.panel, &mut targets, &ctx.history, ctx.limit);
            }
        }
    }
    let params = SimParams {
        initial_cash: cfg.initial_cash,
        adjustment: cfg.position_adjustment,
        tolerance: cfg.rebalance_tolerance,
        rules: &ctx.rules,
    };
    // The rows read the equity and trades alone (docs §18.6).
    engine::simulate_equity_into(&ctx.panel, &targets, &params, &mut scratch.sim);
    scratch.targets = targets;
    let row = measure(
        (cell, window),
        &scratch.sim,
        cfg.initial_cash,
        ctx.bars_per_year,
        &ctx.risk_free,
        &mut scratch.excess,
    );
    CellRun {
        row,
        sim: &scratch.sim,
    }
}

/// The window's signals and each series' entry signal (the last one
/// before the window), as `signals_in_range` cuts them.
fn window_signals(
    prep: &Prepared,
    cfg: &BacktestConfig,
    unit: usize,
    ctx: &Context,
    scratch: &mut Scratch,
    full: &mut Option<Vec<Vec<f64>>>,
) -> (Vec<Vec<f64>>, Vec<f64>) {
    let constant = cfg.strategy.constant_signal().unwrap_or(0.0);
    if cfg.warmup_bars() == 0 {
        // Loaded from the window's start alone (docs §7.4.1): cold.
        let sig = bt::rust_signals(&cfg.strategy, &ctx.range);
        return (sig, vec![constant; ctx.range.len()]);
    }
    if let Some(cross) = crossover_of(&cfg.strategy) {
        return window_crossovers(cross, constant, &prep.unit_series(unit), ctx, scratch);
    }
    let full = full.get_or_insert_with(|| full_signals(&cfg.strategy, &prep.unit_series(unit)));
    full.iter()
        .zip(ctx.offsets.iter().zip(&ctx.lens))
        .map(|(sig, (&at, &len))| {
            let entry = at
                .checked_sub(1)
                .and_then(|i| sig.get(i).copied())
                .unwrap_or(constant);
            let end = (at + len).min(sig.len());
            (sig.get(at.min(end)..end).unwrap_or(&[]).to_vec(), entry)
        })
        .unzip()
}

/// [`window_signals`] of a crossover: the signals of the window's bars
/// and the one before alone, from the shared averages (the same values
/// as cutting the whole history's, without making them).
fn window_crossovers(
    (ema, fast, slow, allow_short, size): Cross,
    constant: f64,
    series: &[&PriceSeries],
    ctx: &Context,
    scratch: &mut Scratch,
) -> (Vec<Vec<f64>>, Vec<f64>) {
    series
        .iter()
        .enumerate()
        .zip(ctx.offsets.iter().zip(&ctx.lens))
        .map(|((i, s), (&at, &len))| {
            let f = scratch.average(i, &s.bars.close, ema, fast);
            let l = scratch.average(i, &s.bars.close, ema, slow);
            let end = (at + len).min(f.len().min(l.len()));
            let from = at.min(end);
            let entry = at
                .checked_sub(1)
                .and_then(|b| Some((*f.get(b)?, *l.get(b)?)))
                .and_then(|(a, b)| strategies::crossover(&[a], &[b], allow_short, size).pop())
                .unwrap_or(constant);
            let (f, l) = (
                f.get(from..end).unwrap_or(&[]),
                l.get(from..end).unwrap_or(&[]),
            );
            (strategies::crossover(f, l, allow_short, size), entry)
        })
        .unzip()
}

/// One symbol's crossover straight to its targets: [`window_crossovers`]
/// and then [`engine::align_targets_from`], the signal made bar by bar as
/// the alignment reads it, into `out` (the same values, without two
/// vectors a cell).
fn crossover_targets(
    (ema, fast, slow, allow_short, size): Cross,
    constant: f64,
    series: &PriceSeries,
    ctx: &Context,
    scratch: &mut Scratch,
    out: &mut Vec<f64>,
) {
    let (at, len) = (
        ctx.offsets.first().copied().unwrap_or(0),
        ctx.lens.first().copied().unwrap_or(0),
    );
    let f = scratch.average(0, &series.bars.close, ema, fast);
    let l = scratch.average(0, &series.bars.close, ema, slow);
    let end = (at + len).min(f.len().min(l.len()));
    let from = at.min(end);
    let entry = at
        .checked_sub(1)
        .and_then(|b| {
            Some(strategies::crossover_at(
                *f.get(b)?,
                *l.get(b)?,
                allow_short,
                size,
            ))
        })
        .unwrap_or(constant);
    let (f, l) = (
        f.get(from..end).unwrap_or(&[]),
        l.get(from..end).unwrap_or(&[]),
    );
    let lo = if ctx.rules.first().is_some_and(|r| r.allow_short) {
        -1.0
    } else {
        0.0
    };
    engine::align_one_into(
        &ctx.panel.open,
        |i| match (f.get(i), l.get(i)) {
            (Some(&a), Some(&b)) => strategies::crossover_at(a, b, allow_short, size),
            _ => 0.0,
        },
        (lo, entry),
        ctx.limit,
        ctx.panel.n(),
        out,
    );
}

/// The §7.5 columns, as [`metrics::compute`]'s own functions make them
/// (the sums in one pass: [`one_pass`]); the excess returns go in `x`, a
/// buffer reused from cell to cell.
fn measure(
    (cell, window): (usize, usize),
    sim: &Simulation,
    cash: f64,
    b_year: f64,
    rf: &[f64],
    x: &mut Vec<f64>,
) -> Row {
    let eq = &sim.equity;
    let Some(&last) = eq.last() else {
        return Row {
            cell,
            window,
            final_value: cash,
            total_return: 0.0,
            sharpe: 0.0,
            max_drawdown: 0.0,
            trade_count: 0,
            moments: PowerSums::default(),
        };
    };
    let pass = one_pass(eq, cash, rf, x);
    // A book that never moved in the window has no Sharpe there
    // (`metrics::book_sharpe`), so it is no trial for the deflated Sharpe.
    let flat = pass.flat;
    let sharpe = if flat || !pass.finite {
        0.0
    } else {
        // `metrics::sharpe`: mean / (sample std + 1e-10) × √(bars a year).
        let n = x.len();
        let mean = pass.sum / n as f64;
        let std = if n <= 1 {
            0.0
        } else {
            let sq: f64 = x.iter().map(|v| (v - mean) * (v - mean)).sum();
            (sq / (n - 1) as f64).sqrt()
        };
        let s = mean / (std + 1e-10) * b_year.sqrt();
        if s.is_finite() { s } else { 0.0 }
    };
    Row {
        cell,
        window,
        final_value: last,
        total_return: last / cash - 1.0,
        sharpe,
        max_drawdown: pass.drawdown,
        trade_count: sim.trades.len() as u64,
        // The first return is the 0 before any bar moved: not a period.
        moments: if flat {
            PowerSums::default()
        } else {
            pass.moments
        },
    }
}

/// Whether `x / div` (rounded) cannot be below `worst` (≤ 0), for `div` >
/// 0, decided without dividing: the division waited on was a tenth of the
/// sweep bench's time, and a new low is rare. Rounding is monotone and
/// `worst` is a double, so `fl(x / div) < worst` needs `x / div < worst`,
/// that is `x < worst·div`. `b = fl(worst·div)` is within 2⁻⁵³ of it
/// relatively, so every `x ≥ b + |b|·2⁻⁵⁰` (rounded: still above
/// `worst·div`, as `b` is negative) is above it; at `worst = 0` any `x ≥ 0`
/// is. Where the product is not a normal double (or is NaN), nothing is
/// skipped, so the result is [`metrics::max_drawdown`]'s to the bit.
#[inline]
fn cannot_deepen(x: f64, div: f64, worst: f64) -> bool {
    if x >= 0.0 {
        return true;
    }
    let b = worst * div;
    b.abs() >= f64::MIN_POSITIVE && b.is_finite() && x >= b + b.abs() * (4.0 * f64::EPSILON)
}

/// What [`measure`] reads of an equity curve, in one pass.
struct Pass {
    /// Every equity equal to the one before.
    flat: bool,
    /// Every excess return finite.
    finite: bool,
    /// Σ excess returns, summed as `metrics::mean` sums them.
    sum: f64,
    /// `PowerSums::of` the excess returns after the first.
    moments: PowerSums,
    /// `metrics::max_drawdown(eq, cash)`.
    drawdown: f64,
}

/// The excess returns of `eq` into `x` (`metrics::excess(&metrics::
/// returns(eq), rf)`) with, in the same pass, what the §7.5 formulas sum:
/// each sum and extreme made in the order its own function makes it, so
/// every value is the same to the bit, while the independent chains of
/// additions overlap instead of running one pass each (they were a third
/// of a cell's time). `eq` is not empty.
fn one_pass(eq: &[f64], cash: f64, rf: &[f64], x: &mut Vec<f64>) -> Pass {
    x.clear();
    let first = 0.0 - rf.first().copied().unwrap_or(0.0);
    x.push(first);
    // The start of `Iterator::sum` for f64, whatever it is.
    let mut sum: f64 = std::iter::empty::<f64>().sum();
    sum += first;
    let mut finite = first.is_finite();
    let mut flat = true;
    let mut s = [0.0f64; 4];
    let (mut peak, mut worst) = (cash, 0.0f64);
    let mut drawdown = |e: f64| {
        if e > peak {
            peak = e;
        }
        let div = if peak == 0.0 { 1.0 } else { peak };
        let x = e - peak;
        if div > 0.0 && cannot_deepen(x, div, worst) {
            return;
        }
        let dd = x / div;
        if dd < worst {
            worst = dd;
        }
    };
    let mut prev = None;
    for (i, &e) in eq.iter().enumerate() {
        drawdown(e);
        let Some(before) = prev.replace(e) else {
            continue;
        };
        let v = (e / before - 1.0) - rf.get(i).copied().unwrap_or(0.0);
        x.push(v);
        sum += v;
        finite &= v.is_finite();
        flat &= e == before;
        let v2 = v * v;
        s[0] += v;
        s[1] += v2;
        s[2] += v2 * v;
        s[3] += v2 * v2;
    }
    Pass {
        flat,
        finite,
        sum,
        moments: PowerSums {
            n: eq.len().saturating_sub(1) as u64,
            s,
        },
        drawdown: worst,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pass's drawdown, with divisions skipped, equals
    /// `metrics::max_drawdown` to the bit on paths that make many new lows,
    /// equal to within an ulp of the last, a zero or negative peak and NaN.
    #[test]
    fn the_one_pass_drawdown_is_max_drawdown_to_the_bit() {
        let mut rng = crate::research::seeded::SplitMix64::new(0x9e37_79b9_7f4a_7c15);
        let mut next = || rng.uniform();
        let mut paths: Vec<(Vec<f64>, f64)> = Vec::new();
        for k in 0..400 {
            let mut e = 1_000_000.0;
            let mut path = Vec::new();
            let step = [0.001, 0.02, 0.3][k % 3];
            for _ in 0..500 {
                e *= 1.0 + step * (next() - 0.5);
                path.push(e);
            }
            paths.push((path, 1_000_000.0));
        }
        // A low repeated, then one an ulp below: the skip must not eat it.
        let low = 900_000.0f64;
        paths.push((
            vec![
                1e6,
                low,
                950_000.0,
                low,
                f64::from_bits(low.to_bits() - 1),
                1e6,
            ],
            1e6,
        ));
        paths.push((vec![0.0, -5.0, 3.0, -2.0, 1e-300, 0.5e-300], 0.0));
        paths.push((vec![-3.0, -1.0, -4.0, -0.5], -2.0));
        paths.push((vec![1.0, f64::NAN, 0.5, 2.0, 1.0], 1.0));
        paths.push((vec![1.0, f64::INFINITY, 3.0], 1.0));
        paths.push((vec![1e-310, 5e-311, 1e-311], 2e-310));
        for (eq, cash) in &paths {
            let mut x = Vec::new();
            let pass = one_pass(eq, *cash, &[], &mut x);
            let want = metrics::max_drawdown(eq, *cash);
            assert_eq!(
                pass.drawdown.to_bits(),
                want.to_bits(),
                "{eq:?}: {} vs {want}",
                pass.drawdown
            );
        }
    }
}
