//! The backtest engine (docs §7): `config.json` in a run directory →
//! market data → signals → execution → metrics, validation, artifacts, a
//! chart and the run card.
//!
//! - [`config`]: the §7.1 contract, validated up front (read through
//!   [`config_reader`], which `rules` and `strategies` share);
//! - [`strategies`] (built-ins), [`rules`] (typed expressions over
//!   indicators), [`python`] (the original's `code/signal_engine.py`
//!   contract with the §7.2 static checks): the three signal sources;
//! - [`engine`]: the §7.4 execution model, pure and single-pass, with the
//!   optional portfolio [`optimizer`] between the signals and the fills;
//! - [`metrics`] (§7.5, exact), [`benchmark`] (the benchmark and the
//!   risk-free rate used), [`validation`] (Monte Carlo, bootstrap,
//!   walk-forward);
//! - [`artifacts`], [`chart`], [`run_card`]: the §7.6 outputs.
//!
//! [`run_in_dir`] is what `vibedesk engine RUN_DIR` runs inside the sandbox;
//! the `backtest` tool and `vibedesk backtest` start that child.

pub mod artifacts;
pub mod benchmark;
pub mod chart;
pub mod config;
pub mod config_reader;
pub mod engine;
pub mod metrics;
pub mod optimizer;
pub mod pairs;
pub mod python;
pub mod rebalance;
pub mod rules;
pub mod run_card;
pub mod strategies;
pub mod validation;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

pub use config::{Adjustment, BacktestConfig, ConfigError, ConfigIssue, StrategySpec};
pub use engine::{Panel, SimParams, Simulation, SymbolRules};
pub use metrics::Metrics;

use crate::research::data::{
    DataConfig, DataError, Market, MarketData, PriceSeries, Source, SourceChoice, embedded,
};
use crate::research::indicators::Warmup;
use crate::research::warmup::{self, WarmupRecord};

/// Why a backtest could not run. Each names the input and what to do.
#[derive(Debug, thiserror::Error)]
pub enum BacktestError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Data(#[from] DataError),
    #[error("{0}")]
    Python(#[from] python::PythonError),
    #[error("cannot {0}")]
    Io(#[source] crate::fsio::IoError),
    #[error("{0}")]
    NoData(String),
    #[error("chart: {0}")]
    Chart(#[from] chart::ChartError),
}

impl BacktestError {
    /// A short machine-readable code for tool results.
    pub(crate) fn code(&self) -> &str {
        match self {
            BacktestError::Config(e) => e.code(),
            BacktestError::Data(e) => e.code(),
            BacktestError::Python(e) => e.code,
            BacktestError::Io(_) => "io_error",
            BacktestError::NoData(_) => "no_data",
            BacktestError::Chart(_) => "chart_failed",
        }
    }

    pub(crate) fn io<'a>(
        action: &'static str,
        path: &'a Path,
    ) -> impl FnOnce(std::io::Error) -> BacktestError + 'a {
        move |source| BacktestError::Io(crate::fsio::IoError::new(action, path, source))
    }
}

/// Where the engine may get data from.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Online answers cache (read-only in the sandbox: writes may fail,
    /// which only costs a refetch).
    pub cache_dir: Option<PathBuf>,
    /// Extra folders for the `local` source (the run dir's `data/` and the
    /// run dir itself are always searched first).
    pub local_dirs: Vec<PathBuf>,
    /// Forbid the online loaders.
    pub offline: bool,
    /// The Python interpreter for `code/signal_engine.py`; `None` probes
    /// `python3` on PATH.
    pub python: Option<PathBuf>,
    /// Base URLs of the online sources (a mirror, or a recorded server in
    /// tests); `None` for the public ones.
    pub yahoo_base_url: Option<String>,
    pub stooq_base_url: Option<String>,
    /// Keep parsed local files for the engine that runs next (the
    /// `backtest` tool's prefetch); without it they are kept only from the
    /// run dir's second run on (see [`market_data`]). Either way only the
    /// parses that were slow are kept (see `local::load_file`).
    pub keep_parsed_bars: bool,
}

/// Run-dir folder of the market cache the sandboxed engine reads: the
/// `backtest` tool fetches online data before it starts the engine and
/// leaves what the online sources served here (see
/// `tools::builtin::backtest`).
pub(crate) const RUN_MARKET_CACHE_DIR: &str = ".cache";

pub(crate) const CONFIG_FILE: &str = "config.json";
pub const SIGNAL_ENGINE_FILE: &str = "code/signal_engine.py";

/// Reads and validates `<run_dir>/config.json`.
pub fn load_config(run_dir: &Path) -> Result<(BacktestConfig, Vec<u8>), BacktestError> {
    let path = run_dir.join(CONFIG_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ConfigError::one(ConfigIssue::new(
                "(file)",
                "config_missing",
                format!(
                    "{} does not exist; write it (or pass `config` to the backtest tool), e.g. {{\"codes\": [\"AAPL\"], \"start_date\": \"2010-01-01\", \"end_date\": \"2012-12-31\", \"strategy\": {{\"name\": \"sma_crossover\", \"params\": {{\"fast\": 20, \"slow\": 50}}}}}}",
                    path.display()
                ),
            ))
            .into());
        }
        Err(e) => return Err(BacktestError::io("read", &path)(e)),
    };
    let text = String::from_utf8_lossy(&bytes);
    let has_code = run_dir.join(SIGNAL_ENGINE_FILE).is_file();
    let cfg = BacktestConfig::from_json_text(&text, has_code)?;
    Ok((cfg, bytes))
}

/// The markets' bars per year (§7.1 step 5): 252 for equities, 365 for
/// crypto, `None` (calendar annualisation) when the codes span markets.
pub(crate) fn bars_per_year(markets: &[Market]) -> Option<f64> {
    let first = *markets.first()?;
    if markets.iter().any(|m| *m != first) {
        return None;
    }
    Some(if first == Market::Crypto {
        365.0
    } else {
        252.0
    })
}

/// Spec §7.4: forward-fill limit 5, 10 when several markets mix.
pub(crate) fn ffill_limit(markets: &[Market]) -> usize {
    match markets.first() {
        Some(f) if markets.iter().any(|m| m != f) => 10,
        _ => 5,
    }
}

/// The data for a config: every code (the universe never shrinks), with
/// the warm-up history before `start_date` its signals need (docs §7.4.1;
/// [`in_range`] cuts it), and the benchmark's series if it needs one
/// ([`benchmark::fetch`]).
pub async fn fetch_data(
    cfg: &BacktestConfig,
    run_dir: &Path,
    opts: &RunOptions,
) -> Result<(Vec<PriceSeries>, Vec<Source>, Option<PriceSeries>), BacktestError> {
    let md = market_data(cfg, run_dir, opts);
    let universe = md
        .fetch_all_with_history(
            &cfg.codes,
            Some(cfg.start_date),
            Some(cfg.end_date),
            cfg.source,
            cfg.warmup_bars(),
        )
        .await?;
    for s in &universe.series {
        if warmup::bars_before(&s.bars, Some(cfg.start_date)) >= s.bars.len() {
            return Err(BacktestError::NoData(format!(
                "no bars for {} between {} and {} (source {}); widen the dates or pick another source",
                s.symbol, cfg.start_date, cfg.end_date, s.provenance.source
            )));
        }
    }
    let bench = benchmark::fetch(cfg, &md).await?;
    Ok((universe.series, universe.effective_sources, bench))
}

/// Parsed local data files kept for reruns in the same run dir.
pub const PARSED_CACHE_DIR: &str = ".cache/bars";

/// Whether a config may need the online sources: not when it names the
/// embedded set or local files, nor in `auto` when the embedded set (first
/// in the chain) holds every code over the whole range, unless it names a
/// benchmark ticker (fetched in `auto`). The default SPY is fetched online
/// only when the codes are: offline, the embedded SPY serves.
pub(crate) fn may_use_online(cfg: &BacktestConfig) -> bool {
    if matches!(benchmark::wanted(cfg), benchmark::Wanted::Ticker(_)) {
        return true;
    }
    match cfg.source {
        SourceChoice::Explicit(Source::Embedded | Source::Local) => false,
        SourceChoice::Auto => !cfg
            .codes
            .iter()
            .all(|c| embedded::spans(c, cfg.start_date, cfg.end_date)),
        SourceChoice::Explicit(_) => true,
    }
}

fn market_data(cfg: &BacktestConfig, run_dir: &Path, opts: &RunOptions) -> MarketData {
    let mut local_dirs = vec![run_dir.join("data"), run_dir.to_path_buf()];
    local_dirs.extend(opts.local_dirs.iter().cloned());
    let mut data = DataConfig {
        cache_dir: opts.cache_dir.clone(),
        local_dirs,
        // Reruns in this run dir (a parameter sweep) skip parsing. Parses
        // are kept once a backtest has run here (its OHLCV fingerprints are
        // the sign; an empty artifacts/ is not, the agent makes one with
        // every run dir): most run dirs run once, and an entry written for
        // nothing costs a first run as many bytes as its data files
        // (~11 MB, 5-8 ms for 100 x 2,520). A sweep pays one more parse, on
        // its second run; files that parse quickly are never kept (see
        // `local::load_file`).
        parsed_cache: Some(run_dir.join(PARSED_CACHE_DIR)),
        keep_parsed: opts.keep_parsed_bars
            || run_dir
                .join("artifacts")
                .join(artifacts::OHLCV_FINGERPRINTS)
                .is_file(),
        // Building the HTTP clients costs milliseconds: skipped when the
        // config cannot use them.
        online: !opts.offline && may_use_online(cfg),
        ..DataConfig::default()
    };
    if let Some(url) = &opts.yahoo_base_url {
        data.yahoo_base_url.clone_from(url);
    }
    if let Some(url) = &opts.stooq_base_url {
        data.stooq_base_url.clone_from(url);
    }
    MarketData::new(data)
}

/// Signals of the Rust strategies, one vector per series (own calendar).
/// A large universe is split over the cores: each series' signals depend on
/// that series alone.
pub fn rust_signals(strategy: &StrategySpec, series: &[PriceSeries]) -> Vec<Vec<f64>> {
    // A pair's legs are computed together (docs §7.7).
    if let StrategySpec::Builtin(strategies::Builtin::Pairs(p)) = strategy {
        let legs: Vec<&crate::research::data::Bars> = series.iter().map(|s| &s.bars).collect();
        return pairs::leg_signals(p, &legs);
    }
    let one = |s: &PriceSeries| match strategy {
        StrategySpec::Builtin(b) => b.signals(&s.bars),
        StrategySpec::Rules(r) => r.signals(&s.bars),
        StrategySpec::Python => vec![0.0; s.bars.len()],
    };
    let bars: usize = series.iter().map(|s| s.bars.len()).sum();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(series.len());
    // Below this a thread costs more than it saves.
    const PARALLEL_BARS: usize = 50_000;
    if threads < 2 || bars < PARALLEL_BARS {
        return series.iter().map(one).collect();
    }
    let chunk = series.len().div_ceil(threads);
    std::thread::scope(|scope| {
        // A thread the process limit refuses is done on this one instead.
        let parts: Vec<_> = series
            .chunks(chunk)
            .map(|c| {
                let h = std::thread::Builder::new()
                    .spawn_scoped(scope, move || c.iter().map(one).collect::<Vec<_>>())
                    .ok();
                (c, h)
            })
            .collect();
        // A helper that panicked has its chunk redone here rather than
        // re-panicking this thread (docs §2.4).
        parts
            .into_iter()
            .flat_map(|(c, h)| match h.map(|h| h.join()) {
                Some(Ok(signals)) => signals,
                _ => c.iter().map(one).collect(),
            })
            .collect()
    })
}

/// Series loaded with warm-up history, cut to the backtest's range (docs
/// §7.4.1).
#[derive(Clone, Debug)]
pub struct InRange {
    /// The series on `[start_date, end_date]`, provenance restated.
    pub series: Vec<PriceSeries>,
    /// Bars each loaded series held before `start_date`: where its range's
    /// signals begin.
    pub offsets: Vec<usize>,
    pub warmup: WarmupRecord,
}

/// Cuts `loaded` (from [`fetch_data`]) to the config's range and records
/// the warm-up the signals had.
pub fn in_range(cfg: &BacktestConfig, loaded: &[PriceSeries]) -> InRange {
    let start = Some(cfg.start_date);
    let named: Vec<(&str, &crate::research::data::Bars)> = loaded
        .iter()
        .map(|s| (s.symbol.as_str(), &s.bars))
        .collect();
    let warmup = WarmupRecord::of(Warmup::Bars(cfg.warmup_bars()), start, &named);
    let offsets = loaded
        .iter()
        .map(|s| warmup::bars_before(&s.bars, start))
        .collect();
    let series = loaded
        .iter()
        .map(|s| {
            let mut s = s.clone();
            warmup::cut(&mut s, start, Some(cfg.end_date));
            s
        })
        .collect();
    InRange {
        series,
        offsets,
        warmup,
    }
}

/// Signals computed on the loaded series, cut to the range at `offsets`,
/// and each series' signal on its last bar before the range (the first
/// bar's order; where it has none, the strategy's constant signal, else 0).
pub fn signals_in_range(
    strategy: &StrategySpec,
    signals: Vec<Vec<f64>>,
    offsets: &[usize],
) -> (Vec<Vec<f64>>, Vec<f64>) {
    let constant = strategy.constant_signal().unwrap_or(0.0);
    signals
        .into_iter()
        .zip(offsets)
        .map(|(mut sig, &at)| {
            let entry = at
                .checked_sub(1)
                .and_then(|i| sig.get(i).copied())
                .unwrap_or(constant);
            sig.drain(..at.min(sig.len()));
            (sig, entry)
        })
        .unzip()
}

/// The warm-up of a run: each series' entry signal and the record.
#[derive(Clone, Copy, Debug)]
pub struct Warm<'a> {
    pub entry: &'a [f64],
    pub record: &'a WarmupRecord,
    /// The series with their history before the range: the optimizer's
    /// trailing windows (docs §7.4.2).
    pub history: &'a [PriceSeries],
}

/// Everything one backtest produced, in memory.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub config: BacktestConfig,
    pub panel: Panel,
    pub rules: Vec<SymbolRules>,
    pub markets: Vec<Market>,
    pub targets: Vec<f64>,
    pub sim: Simulation,
    pub bench_returns: Vec<f64>,
    /// The benchmark used: a ticker or "equal_weight" ([`benchmark`]).
    pub benchmark_label: String,
    /// Why the benchmark is not the one asked for, or where it is
    /// incomplete.
    pub benchmark_note: Option<String>,
    /// The risk-free rate of Sharpe and Sortino.
    pub risk_free: crate::research::data::rates::RiskFree,
    pub bars_per_year: f64,
    pub metrics: Metrics,
    /// Metrics plus the engine extras (scalars only: `metrics.csv`).
    pub scalars: Map<String, Value>,
    /// by_symbol, by_exit_reason, dropped adjustments, validation.
    pub nested: Map<String, Value>,
    pub validation: Option<Value>,
    pub warnings: Vec<String>,
    /// The history before `start_date` the signals had (docs §7.4.1);
    /// `None` when the series were given already cut.
    pub warmup: Option<WarmupRecord>,
}

/// Align, simulate, measure: the pure part of a backtest.
pub fn evaluate(
    cfg: &BacktestConfig,
    series: &[PriceSeries],
    signals: &[Vec<f64>],
    bench: Option<&PriceSeries>,
) -> Outcome {
    evaluate_on(panel_for(cfg, series), cfg, series, signals, bench)
}

/// The series on one calendar, as [`evaluate`] builds it (it needs the
/// data alone, so a run builds it while the signals are computed).
pub fn panel_for(cfg: &BacktestConfig, series: &[PriceSeries]) -> Panel {
    let codes: Vec<String> = series.iter().map(|s| s.symbol.clone()).collect();
    let (markets, ..) = engine::rules_for(&codes, &cfg.costs);
    let bars: Vec<&crate::research::data::Bars> = series.iter().map(|s| &s.bars).collect();
    Panel::new(&codes, &bars, ffill_limit(&markets))
}

/// [`evaluate`] on the `panel` [`panel_for`] built from `series`.
pub fn evaluate_on(
    panel: Panel,
    cfg: &BacktestConfig,
    series: &[PriceSeries],
    signals: &[Vec<f64>],
    bench: Option<&PriceSeries>,
) -> Outcome {
    evaluate_warm(panel, cfg, series, signals, None, bench)
}

/// [`evaluate_on`] for series cut by [`in_range`], whose first bars trade
/// on the warm-up's last signals.
pub fn evaluate_warm(
    panel: Panel,
    cfg: &BacktestConfig,
    series: &[PriceSeries],
    signals: &[Vec<f64>],
    warm: Option<Warm<'_>>,
    bench: Option<&PriceSeries>,
) -> Outcome {
    let codes: Vec<String> = series.iter().map(|s| s.symbol.clone()).collect();
    let (markets, rules, mut warnings) = engine::rules_for(&codes, &cfg.costs);
    warnings.extend(cfg.warnings.iter().cloned());
    // Data from another source than config.json names reaches the reply.
    warnings.extend(series.iter().filter_map(|s| s.provenance.fallback()));
    // So does too little warm-up history.
    if let Some(note) = warm.and_then(|w| w.record.note.as_ref()) {
        warnings.push(format!("too little warm-up history: {note}"));
    }
    let limit = ffill_limit(&markets);
    let entry = warm.map_or(&[][..], |w| w.entry);
    let mut targets = engine::align_targets_from(&panel, signals, entry, &rules, limit);
    let optimized = cfg.optimizer.as_ref().map(|spec| {
        let history = warm.map_or(series, |w| w.history);
        rebalance::apply(spec, &panel, &mut targets, history, limit)
    });
    if let Some(o) = &optimized {
        warnings.extend(o.warnings());
    }
    let sim = engine::simulate(
        &panel,
        &targets,
        &SimParams {
            initial_cash: cfg.initial_cash,
            adjustment: cfg.position_adjustment,
            tolerance: cfg.rebalance_tolerance,
            rules: &rules,
        },
    );
    let bench = benchmark::resolve(cfg, &panel, bench);
    let b_year = metrics::resolve_bars_per_year(bars_per_year(&markets), panel.n(), &panel.dates);
    let risk_free = match cfg.risk_free {
        Some(annual) => {
            crate::research::data::rates::RiskFree::given(panel.dates.len(), annual, b_year)
        }
        None => benchmark::risk_free(&markets, &panel.dates, b_year),
    };
    // Kept to the end as before the split: dropping them earlier made the
    // bench's 100 x 2,520 in-process case measurably slower.
    let trade_stats = trade_stats(&panel, &sim);
    let m = metrics::compute(
        &sim.equity,
        &panel.dates,
        cfg.initial_cash,
        Some(b_year),
        &trade_stats,
        metrics::PerBar {
            benchmark: &bench.returns,
            risk_free: &risk_free.per_bar,
            turnover: &sim.turnover,
        },
    );
    let closed = closed_trades(&sim);
    let validation = validation::run(
        &cfg.validation,
        &sim.equity,
        &panel.dates,
        cfg.initial_cash,
        b_year,
        &closed,
        &risk_free.per_bar,
    );
    let mut scalars = engine_scalars(cfg, &panel, &sim, &m, &bench.label);
    put_benchmark_and_rate(&mut scalars, &bench, &risk_free);
    put_drawdown_dates(&mut scalars, &sim.equity, &panel.dates, cfg.initial_cash);
    if let (Some(spec), Some(o)) = (&cfg.optimizer, &optimized) {
        put_optimizer(&mut scalars, cfg, spec, o);
    }
    if let StrategySpec::Builtin(strategies::Builtin::Pairs(p)) = &cfg.strategy {
        let legs: Vec<&crate::research::data::Bars> = series.iter().map(|s| &s.bars).collect();
        let history: Vec<&crate::research::data::Bars> = warm
            .map_or(series, |w| w.history)
            .iter()
            .map(|s| &s.bars)
            .collect();
        scalars.extend(pairs::stats(p, &legs, &history, &codes));
    }
    let mut nested = nested_results(&panel, &sim, &codes, validation.as_ref());
    if let Some(o) = &optimized {
        nested.insert(
            "optimizer".into(),
            serde_json::to_value(o).unwrap_or(Value::Null),
        );
    }
    let warmup = warm.map(|w| w.record.clone());
    if let Some(w) = &warmup {
        nested.insert(
            "warmup".into(),
            serde_json::to_value(w).unwrap_or(Value::Null),
        );
    }
    Outcome {
        config: cfg.clone(),
        panel,
        rules,
        markets,
        targets,
        sim,
        bench_returns: bench.returns,
        benchmark_label: bench.label,
        benchmark_note: bench.note,
        risk_free,
        bars_per_year: b_year,
        metrics: m,
        scalars,
        nested,
        validation,
        warnings,
        warmup,
    }
}

/// The benchmark and the risk-free rate used, as result fields (docs §7.5):
/// `benchmark` (a ticker or "equal_weight"), `risk_free` (`treasury_3m`,
/// `given` by the config's `risk_free`, or `zero`) and its mean annual rate, and a note for each when there is
/// something to say.
fn put_benchmark_and_rate(
    scalars: &mut Map<String, Value>,
    bench: &benchmark::Resolved,
    rf: &crate::research::data::rates::RiskFree,
) {
    scalars.insert("benchmark".into(), json!(bench.label));
    if let Some(n) = &bench.note {
        scalars.insert("benchmark_note".into(), json!(n));
    }
    scalars.insert("risk_free".into(), json!(rf.label));
    scalars.insert(
        "risk_free_rate".into(),
        metrics::num(metrics::round_dp(rf.mean_annual, 6)),
    );
    if let Some(n) = &rf.note {
        scalars.insert("risk_free_note".into(), json!(n));
    }
}

/// Where `max_drawdown` ran (docs §7.5): `max_drawdown_peak`,
/// `max_drawdown_trough` and `max_drawdown_recovery` (null: not recovered
/// by the last bar), dates on the run's calendar. The equity starts at
/// the run's start, so the drawdown lies within the run's own dates; a
/// peak at the initial cash is the first bar's date.
fn put_drawdown_dates(
    scalars: &mut Map<String, Value>,
    equity: &[f64],
    dates: &[chrono::NaiveDate],
    initial_cash: f64,
) {
    let Some(d) = metrics::deepest_drawdown(equity, initial_cash) else {
        return;
    };
    let day = |i: Option<usize>| {
        i.and_then(|i| dates.get(i))
            .map_or(Value::Null, |d| json!(d.to_string()))
    };
    scalars.insert("max_drawdown_peak".into(), day(Some(d.peak)));
    scalars.insert("max_drawdown_trough".into(), day(Some(d.trough)));
    scalars.insert("max_drawdown_recovery".into(), day(d.recovery));
}

/// Which optimizer ran (docs §7.4.2), as result fields: `optimizer`,
/// `optimizer_rebalances`, `optimizer_fallbacks`, and `strategy` naming
/// both, which the tool's summary line and the run card show.
fn put_optimizer(
    scalars: &mut Map<String, Value>,
    cfg: &BacktestConfig,
    spec: &optimizer::OptimizerSpec,
    o: &optimizer::OptimizerRecord,
) {
    scalars.insert("optimizer".into(), json!(spec.method.as_str()));
    scalars.insert("optimizer_lookback".into(), json!(spec.lookback));
    scalars.insert("optimizer_rebalances".into(), json!(o.rebalances.len()));
    scalars.insert("optimizer_fallbacks".into(), json!(o.fallbacks()));
    scalars.insert(
        "strategy".into(),
        json!(format!(
            "{}, weights by the {} optimizer",
            cfg.strategy.describe(),
            spec.method.as_str()
        )),
    );
}

/// The round trips as the metrics see them (holding time in bars and days).
fn trade_stats(panel: &Panel, sim: &Simulation) -> Vec<metrics::TradeStat> {
    sim.trades
        .iter()
        .map(|t| metrics::TradeStat {
            pnl: t.pnl,
            holding_bars: t.holding_bars(),
            holding_days: match (panel.dates.get(t.exit_bar), panel.dates.get(t.entry_bar)) {
                (Some(a), Some(b)) => (*a - *b).num_days(),
                _ => 0,
            },
        })
        .collect()
}

/// The round trips as the validations see them.
fn closed_trades(sim: &Simulation) -> Vec<validation::ClosedTrade> {
    sim.trades
        .iter()
        .map(|t| validation::ClosedTrade {
            exit_bar: t.exit_bar,
            pnl: t.pnl,
        })
        .collect()
}

/// The metrics plus the engine's extras (rebalancing, dropped and scaled
/// orders, the risk x-ray, benchmark and strategy): `metrics.csv`'s row.
fn engine_scalars(
    cfg: &BacktestConfig,
    panel: &Panel,
    sim: &Simulation,
    m: &Metrics,
    benchmark_label: &str,
) -> Map<String, Value> {
    let mut scalars = m.to_map();
    let traded: Vec<f64> = sim.turnover.iter().copied().filter(|x| *x > 0.0).collect();
    let put = |m: &mut Map<String, Value>, k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put(&mut scalars, "rebalance_count", json!(sim.trade_bars));
    put(
        &mut scalars,
        "rebalance_turnover_mean",
        metrics::num(metrics::round_dp(metrics::mean(&traded), 6)),
    );
    put(
        &mut scalars,
        "rebalance_turnover_max",
        metrics::num(metrics::round_dp(
            traded.iter().cloned().fold(0.0, f64::max),
            6,
        )),
    );
    put(
        &mut scalars,
        "position_adjustment",
        json!(cfg.position_adjustment.as_str()),
    );
    put(
        &mut scalars,
        "rebalance_tolerance",
        metrics::num(cfg.rebalance_tolerance),
    );
    put(
        &mut scalars,
        "dropped_target_adjustment_count",
        json!(sim.dropped_count),
    );
    put(
        &mut scalars,
        "cash_scaled_order_count",
        json!(sim.scaled_count),
    );
    let xray = risk_xray(panel, sim, m.bars_per_year, m.max_drawdown);
    for (k, v) in &xray {
        scalars.insert(k.clone(), v.clone());
    }
    put(&mut scalars, "benchmark_ticker", json!(benchmark_label));
    put(&mut scalars, "strategy", json!(cfg.strategy.describe()));
    scalars
}

/// The results that are not scalars: dropped adjustments, by symbol, by
/// exit reason and the validation.
fn nested_results(
    panel: &Panel,
    sim: &Simulation,
    codes: &[String],
    validation: Option<&Value>,
) -> Map<String, Value> {
    let mut nested = Map::new();
    nested.insert(
        "dropped_target_adjustments".into(),
        Value::Array(
            sim.dropped
                .iter()
                .map(|d| {
                    json!({"date": panel.dates.get(d.bar).map(ToString::to_string), "code": codes.get(d.symbol),
                           "why": d.why, "target_weight": metrics::num(d.target_weight), "held_quantity": metrics::num(d.held_quantity)})
                })
                .collect(),
        ),
    );
    nested.insert("by_symbol".into(), by_symbol(panel, sim));
    nested.insert("by_exit_reason".into(), by_exit_reason(sim));
    if let Some(v) = validation {
        nested.insert("validation".into(), v.clone());
    }
    nested
}

/// Concentration and exposure (docs §7.5 `risk_xray_*`): HHI = mean over
/// invested bars of Σ (|w_s| / Σ|w|)², effective N = 1 / HHI, annualised
/// volatility = std(r)·√B, the max drawdown, and the mean gross exposure
/// Σ|w| over all bars.
fn risk_xray(panel: &Panel, sim: &Simulation, b_year: f64, mdd: f64) -> Map<String, Value> {
    let k = panel.k().max(1);
    let (mut hhi_sum, mut invested_bars, mut gross_sum) = (0.0, 0usize, 0.0);
    for row in sim.weights.chunks_exact(k) {
        let gross: f64 = row.iter().map(|w| w.abs()).sum();
        gross_sum += gross;
        if gross > 0.0 {
            invested_bars += 1;
            hhi_sum += row.iter().map(|w| (w.abs() / gross).powi(2)).sum::<f64>();
        }
    }
    let n = sim.equity.len().max(1) as f64;
    let hhi = if invested_bars > 0 {
        hhi_sum / invested_bars as f64
    } else {
        0.0
    };
    let vol = metrics::std(&metrics::returns(&sim.equity)) * b_year.sqrt();
    let mut m = Map::new();
    m.insert(
        "risk_xray_hhi".into(),
        metrics::num(metrics::round_dp(hhi, 6)),
    );
    m.insert(
        "risk_xray_effective_n".into(),
        metrics::num(if hhi > 0.0 {
            metrics::round_dp(1.0 / hhi, 4)
        } else {
            0.0
        }),
    );
    m.insert(
        "risk_xray_annualized_vol".into(),
        metrics::num(metrics::round_dp(vol, 6)),
    );
    m.insert(
        "risk_xray_max_drawdown".into(),
        metrics::num(metrics::round_dp(mdd, 6)),
    );
    m.insert(
        "risk_xray_avg_invested".into(),
        metrics::num(metrics::round_dp(gross_sum / n, 6)),
    );
    m
}

fn by_symbol(panel: &Panel, sim: &Simulation) -> Value {
    let k = panel.k();
    let mut out = Map::new();
    for (s, code) in panel.codes.iter().enumerate() {
        let trades: Vec<&engine::RoundTrip> = sim.trades.iter().filter(|t| t.symbol == s).collect();
        let wins = trades.iter().filter(|t| t.pnl > 0.0).count();
        let pnl: f64 = trades.iter().map(|t| t.pnl).sum();
        let fees: f64 = trades.iter().map(|t| t.fees).sum();
        let exposure = if k > 0 && !sim.equity.is_empty() {
            sim.weights
                .iter()
                .skip(s)
                .step_by(k)
                .map(|w| w.abs())
                .sum::<f64>()
                / sim.equity.len() as f64
        } else {
            0.0
        };
        out.insert(
            code.clone(),
            json!({"trades": trades.len(), "win_rate": if trades.is_empty() { 0.0 } else { wins as f64 / trades.len() as f64 },
                   "pnl": metrics::num(pnl), "fees": metrics::num(fees), "avg_exposure": metrics::num(metrics::round_dp(exposure, 6))}),
        );
    }
    Value::Object(out)
}

fn by_exit_reason(sim: &Simulation) -> Value {
    let mut groups: BTreeMap<&str, (usize, usize, f64)> = BTreeMap::new();
    for t in &sim.trades {
        let g = groups.entry(t.exit_reason.as_str()).or_default();
        g.0 += 1;
        g.1 += usize::from(t.pnl > 0.0);
        g.2 += t.pnl;
    }
    Value::Object(
        groups
            .into_iter()
            .map(|(k, (n, w, p))| {
                (
                    k.to_string(),
                    json!({"trades": n, "win_rate": w as f64 / n as f64, "pnl": metrics::num(p)}),
                )
            })
            .collect(),
    )
}

/// What `vibedesk engine` prints and the tool reads.
#[derive(Clone, Debug)]
pub struct RunSummary {
    pub scalars: Map<String, Value>,
    pub warnings: Vec<String>,
    pub artifacts: Vec<(String, PathBuf)>,
}

/// The run dir's `artifacts/` replaced as a set. A run writes into
/// `.artifacts.new`, and only a complete set is swapped in (two renames):
/// `artifacts/` holds one run's complete set at all times, the previous
/// one until the new one is complete, and a run that fails or dies leaves
/// it as it was. Writing into a fresh directory also spares ext4 its
/// flush-on-replace (`auto_da_alloc`) for every file, which tripled the
/// time to write a 100-symbol run's artifacts over an old set.
struct FreshArtifacts {
    /// Where this run writes.
    dir: PathBuf,
    /// The run dir's `artifacts/`.
    current: PathBuf,
    /// Where the previous set waits during the swap.
    aside: PathBuf,
    committed: bool,
}

impl FreshArtifacts {
    fn prepare(run_dir: &Path) -> Result<FreshArtifacts, BacktestError> {
        let fresh = FreshArtifacts {
            dir: run_dir.join(".artifacts.new"),
            current: run_dir.join("artifacts"),
            aside: run_dir.join(".artifacts.previous"),
            committed: false,
        };
        // A swap that died between its renames: with no `artifacts/` the
        // set aside is the only complete one and goes back; with both, the
        // swap had finished and the one aside is stale.
        if fresh.aside.is_dir() {
            if fresh.current.exists() {
                std::fs::remove_dir_all(&fresh.aside)
                    .map_err(BacktestError::io("remove", &fresh.aside))?;
            } else {
                std::fs::rename(&fresh.aside, &fresh.current)
                    .map_err(BacktestError::io("restore", &fresh.current))?;
            }
        }
        // A run that died while writing: its partial set is dropped.
        match std::fs::remove_dir_all(&fresh.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(BacktestError::io("remove", &fresh.dir)(e)),
        }
        std::fs::create_dir_all(&fresh.dir).map_err(BacktestError::io("create", &fresh.dir))?;
        Ok(fresh)
    }

    /// The previous set, when there is one to link unchanged files from.
    fn previous(&self) -> Option<PathBuf> {
        self.current.is_dir().then(|| self.current.clone())
    }

    /// Swaps the new set in; on failure `artifacts/` is left as it was.
    fn commit(mut self) -> Result<(), BacktestError> {
        let had = self.current.exists();
        if had {
            std::fs::rename(&self.current, &self.aside)
                .map_err(BacktestError::io("move aside", &self.current))?;
        }
        if let Err(e) = std::fs::rename(&self.dir, &self.current) {
            if had {
                let _ = std::fs::rename(&self.aside, &self.current);
            }
            return Err(BacktestError::io("move into place", &self.current)(e));
        }
        self.committed = true;
        if had {
            // Best effort: a leftover is removed by the next run.
            let _ = std::fs::remove_dir_all(&self.aside);
        }
        Ok(())
    }

    /// Where a file written into the new set lives once it is swapped in.
    fn final_path(&self, p: &Path) -> PathBuf {
        p.strip_prefix(&self.dir)
            .map_or_else(|_| p.to_path_buf(), |rel| self.current.join(rel))
    }
}

impl Drop for FreshArtifacts {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The whole backtest in `run_dir` (the sandbox child's work): config →
/// data → signals → simulation → artifacts, chart and run card.
pub async fn run_in_dir(run_dir: &Path, opts: &RunOptions) -> Result<RunSummary, BacktestError> {
    let (cfg, config_bytes) = load_config(run_dir)?;
    // `loaded` holds the warm-up history the signals are computed on;
    // everything else sees the range (docs §7.4.1).
    let (loaded, effective_sources, bench) = fetch_data(&cfg, run_dir, opts).await?;
    let range = in_range(&cfg, &loaded);
    let fresh = FreshArtifacts::prepare(run_dir)?;
    let art_dir = fresh.dir.clone();
    let previous = fresh.previous();
    let python = matches!(cfg.strategy, StrategySpec::Python);
    // The Python strategy's signals now; the Rust ones below, beside the
    // panel.
    let (python_signals, strategy_bytes) = match &cfg.strategy {
        StrategySpec::Python => {
            let code_path = run_dir.join(SIGNAL_ENGINE_FILE);
            let code = std::fs::read(&code_path).map_err(BacktestError::io("read", &code_path))?;
            let files = artifacts::write_ohlcv(&art_dir, &loaded, previous.as_deref())?;
            let python = opts.python.clone();
            let dir = run_dir.to_path_buf();
            let codes: Vec<String> = loaded.iter().map(|s| s.symbol.clone()).collect();
            let lens: Vec<usize> = loaded.iter().map(|s| s.bars.len()).collect();
            let sig = tokio::task::spawn_blocking(move || {
                let exe = match python {
                    Some(p) => p,
                    None => python::probe(None)?,
                };
                python::signals(&dir, &exe, &codes, &files, &lens)
            })
            .await
            .map_err(|e| {
                BacktestError::NoData(format!("the Python strategy task failed: {e}"))
            })??;
            (Some(sig), code)
        }
        StrategySpec::Builtin(b) => (None, b.canonical().to_string().into_bytes()),
        StrategySpec::Rules(r) => (None, r.canonical().to_string().into_bytes()),
    };
    let dir = run_dir.to_path_buf();
    let summary = tokio::task::spawn_blocking(move || -> Result<RunSummary, BacktestError> {
        std::thread::scope(|scope| {
            // The OHLCV files depend on the data alone: they are written
            // while the simulation runs.
            let ohlcv = (!python).then(|| {
                scope.spawn(|| artifacts::write_ohlcv(&art_dir, &loaded, previous.as_deref()))
            });
            let series = &range.series;
            // The panel needs the data alone: it is built while the
            // signals are computed (here, if no thread can be had).
            let panel = std::thread::Builder::new()
                .spawn_scoped(scope, || panel_for(&cfg, series))
                .ok();
            let signals = match python_signals {
                Some(s) => s,
                None => rust_signals(&cfg.strategy, &loaded),
            };
            let (signals, entry) = signals_in_range(&cfg.strategy, signals, &range.offsets);
            let panel = match panel.map(|h| h.join()) {
                Some(Ok(p)) => p,
                _ => panel_for(&cfg, series),
            };
            let warm = Warm {
                entry: &entry,
                record: &range.warmup,
                history: &loaded,
            };
            let outcome = evaluate_warm(panel, &cfg, series, &signals, Some(warm), bench.as_ref());
            let written = artifacts::write_all(&art_dir, &outcome, series, move || match ohlcv {
                Some(h) => h
                    .join()
                    .unwrap_or_else(|_| {
                        Err(BacktestError::NoData(
                            "the OHLCV writer thread panicked".into(),
                        ))
                    })
                    .map(Some),
                None => Ok(None),
            })?;
            // The run card describes the set now in `artifacts/`.
            let mut written: Vec<(String, PathBuf)> = written
                .into_iter()
                .map(|(name, p)| (name, fresh.final_path(&p)))
                .collect();
            fresh.commit()?;
            let card = run_card::build(
                &dir,
                &outcome,
                series,
                &effective_sources,
                &config_bytes,
                &strategy_bytes,
                &written,
            );
            written.extend(run_card::write(&dir, &card)?);
            Ok(RunSummary {
                scalars: outcome.scalars.clone(),
                warnings: outcome.warnings.clone(),
                artifacts: written,
            })
        })
    })
    .await
    .map_err(|e| BacktestError::NoData(format!("the artifact writer failed: {e}")))??;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    #[test]
    fn online_sources_are_needed_only_where_the_embedded_set_cannot_serve() {
        let needs = |extra: Value| {
            let mut v = json!({"codes": ["AAPL", "MSFT"], "start_date": "2005-01-03",
                               "end_date": "2012-12-31", "strategy": {"name": "buy_and_hold"}});
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            may_use_online(&BacktestConfig::from_value(&v, false).unwrap())
        };
        assert!(!needs(json!({})), "auto inside the embedded span");
        assert!(!needs(json!({"source": "embedded"})));
        assert!(!needs(json!({"source": "local"})));
        assert!(needs(json!({"end_date": "2018-01-01"})), "past the span");
        assert!(needs(json!({"codes": ["AAPL", "NVDA"]})), "a code it lacks");
        assert!(needs(json!({"source": "yahoo"})));
        assert!(needs(json!({"benchmark": "SPY"})), "a named benchmark");
        assert!(!needs(json!({"benchmark": "equal_weight"})));
        // The default SPY comes from where the codes come from.
        assert!(!needs(
            json!({"codes": ["AAPL"], "start_date": "2000-01-03"})
        ));
    }

    #[test]
    fn artifacts_are_replaced_as_a_set_and_restored_on_failure() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path();
        let art = run.join("artifacts");
        std::fs::create_dir_all(&art).unwrap();
        std::fs::write(art.join("equity.csv"), "old").unwrap();
        let old = |art: &Path| std::fs::read_to_string(art.join("equity.csv")).unwrap();

        // A failed run (dropped without commit) leaves the old set as it
        // was, and it stays readable while the new one is written.
        let fresh = FreshArtifacts::prepare(run).unwrap();
        assert!(
            names(&fresh.dir).is_empty(),
            "writes go to an empty directory"
        );
        assert_eq!(fresh.previous().as_deref(), Some(art.as_path()));
        std::fs::write(fresh.dir.join("partial.csv"), "new").unwrap();
        assert_eq!(names(&art), ["equity.csv"]);
        drop(fresh);
        assert_eq!(names(&art), ["equity.csv"]);
        assert_eq!(old(&art), "old");
        assert_eq!(names(run), ["artifacts"]);

        // A successful one swaps in exactly the new set.
        let fresh = FreshArtifacts::prepare(run).unwrap();
        let written = fresh.dir.join("trades.csv");
        std::fs::write(&written, "new").unwrap();
        assert_eq!(fresh.final_path(&written), art.join("trades.csv"));
        fresh.commit().unwrap();
        assert_eq!(names(&art), ["trades.csv"]);
        assert_eq!(names(run), ["artifacts"]);

        // A run that died while writing: its partial set is dropped and the
        // complete one kept.
        std::fs::create_dir_all(run.join(".artifacts.new")).unwrap();
        std::fs::write(run.join(".artifacts.new/partial.csv"), "x").unwrap();
        drop(FreshArtifacts::prepare(run).unwrap());
        assert_eq!(names(&art), ["trades.csv"]);
        assert_eq!(names(run), ["artifacts"]);

        // A swap that died between its renames: the set aside comes back
        // when it is the only one, and is dropped when the swap finished.
        std::fs::rename(&art, run.join(".artifacts.previous")).unwrap();
        drop(FreshArtifacts::prepare(run).unwrap());
        assert_eq!(names(&art), ["trades.csv"]);
        std::fs::create_dir_all(run.join(".artifacts.previous")).unwrap();
        drop(FreshArtifacts::prepare(run).unwrap());
        assert_eq!(names(run), ["artifacts"]);

        // The first run of a dir has no previous set, and a failed one
        // leaves nothing.
        let other = tmp.path().join("first");
        std::fs::create_dir_all(&other).unwrap();
        let fresh = FreshArtifacts::prepare(&other).unwrap();
        assert!(fresh.previous().is_none());
        drop(fresh);
        assert!(names(&other).is_empty());
    }
}
