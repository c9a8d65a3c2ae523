//! `factor_screen` (docs §17.11): many factor expressions — the bundled
//! 101 Formulaic Alphas or the caller's own — evaluated on each symbol's
//! history warm from before the window, screened over the universe
//! ([`crate::research::factor::screen`]), and kept as a screen record
//! (docs §17.9) the workstation's factor view opens. The answer is small:
//! counts, the top factors, the deflated Sharpe of the best long-short,
//! the record's path and the assumptions.
//!
//! `vibedesk factor screen` runs the same [`FactorScreen::execute`], its
//! progress on stderr.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDate;

use super::args::opt_usize;
use super::factor::{offline_stocks, request, source_lines, tickers};
use super::market::{fetch, opt_date};
use crate::model::factor::*;
use crate::model::names;
use crate::research::data::{self, MarketData, PriceSeries};
use crate::research::factor::alpha101;
use crate::research::factor::expr::{self, Expr, ExprError, Groups, OhlcvPanel};
use crate::research::factor::record::{
    RECORD_VERSION, ScreenRecord, ScreenUniverse, ScreenedExpr, screen_dir_name, screens_dir,
};
use crate::research::factor::screen::{Screen, ScreenError, ScreenOptions, Universe, screen};
use crate::research::factor::screen_cv::ScreenSplit;
use crate::tools::{Caps, ToolContext, ToolError, TypedTool, guard, progress};

/// Most expressions one call screens.
const MAX_EXPRESSIONS: usize = 500;
/// Most rows listed in the answer (the record holds every factor).
const MAX_TOP: usize = 50;
/// Bars loaded before `start` beyond the deepest expression's lookback.
const WARM_MARGIN: usize = 21;
/// Expressions evaluated together: they share sub-expressions, and a
/// failure is looked for within one chunk only.
const CHUNK: usize = 8;
/// The one bundled library's name.
pub const LIBRARY: &str = "alpha101";

/// A progress sink: stage, done, total, message.
pub type Report<'a> = &'a (dyn Fn(&str, usize, usize, &str) + Sync);

pub struct FactorScreen {
    data: Arc<MarketData>,
    data_dir: Option<PathBuf>,
}

impl super::Builtin for FactorScreen {
    fn build(env: &super::ToolEnv) -> Option<Self> {
        Some(FactorScreen::new(env.data.clone(), env.data_dir.clone()))
    }
}

/// One expression to screen.
struct Candidate {
    name: String,
    paper_number: Option<u16>,
    source: String,
    expr: Expr,
}

/// A call, read and checked.
struct Job {
    library: Option<String>,
    candidates: Vec<Candidate>,
    symbols: Vec<String>,
    notes: Vec<String>,
    range: (Option<NaiveDate>, Option<NaiveDate>),
    options: ScreenOptions,
    top: usize,
    groups: Option<Groups>,
}

fn invalid(m: impl Into<String>) -> ToolError {
    ToolError::InvalidArguments(m.into())
}

fn candidates(args: &FactorScreenArgs) -> Result<(Option<String>, Vec<Candidate>), ToolError> {
    match (&args.library, &args.expressions) {
        (Some(lib), None) => {
            if !lib.trim().eq_ignore_ascii_case(LIBRARY) {
                return Err(invalid(format!(
                    "library '{lib}' is not known; the bundled one is \"{LIBRARY}\" (or give 'expressions')"
                )));
            }
            let alphas = alpha101::alpha101()
                .map_err(|e| ToolError::failed("internal_error", e.to_string()))?;
            let mut out = Vec::with_capacity(alphas.len());
            for a in alphas {
                let expr = expr::parse(&a.expr).map_err(|e| {
                    ToolError::failed("internal_error", format!("bundled {}: {e}", a.name))
                })?;
                out.push(Candidate {
                    name: a.name,
                    paper_number: Some(a.number),
                    source: a.expr,
                    expr,
                });
            }
            Ok((Some(LIBRARY.to_string()), out))
        }
        (None, Some(list)) => {
            if list.is_empty() || list.len() > MAX_EXPRESSIONS {
                return Err(invalid(format!(
                    "'expressions' needs 1 to {MAX_EXPRESSIONS} {{\"name\", \"expr\"}} entries, got {}",
                    list.len()
                )));
            }
            let mut out: Vec<Candidate> = Vec::with_capacity(list.len());
            for (i, e) in list.iter().enumerate() {
                let name = e.name.trim();
                let name = if name.is_empty() {
                    format!("expr{}", i + 1)
                } else {
                    name.to_string()
                };
                if out.iter().any(|c| c.name == name) {
                    return Err(invalid(format!("expression name '{name}' is given twice")));
                }
                let parsed = expr::parse(&e.expr)
                    .map_err(|err| invalid(format!("expression '{name}': {err}")))?;
                out.push(Candidate {
                    name,
                    paper_number: None,
                    source: e.expr.clone(),
                    expr: parsed,
                });
            }
            Ok((None, out))
        }
        _ => Err(invalid(
            "give exactly one of 'library' (\"alpha101\") and 'expressions' ([{\"name\", \"expr\"}])",
        )),
    }
}

fn horizons_arg(v: Option<&[i64]>) -> Result<Vec<usize>, ToolError> {
    let Some(v) = v else {
        return Ok(vec![1, 5, 10, 21]);
    };
    if v.is_empty() || v.len() > 10 {
        return Err(invalid(
            "horizons needs 1 to 10 forward horizons in trading days, e.g. [1, 5, 10, 21]",
        ));
    }
    v.iter()
        .map(|&h| {
            usize::try_from(h)
                .ok()
                .filter(|h| (1..=252).contains(h))
                .ok_or_else(|| invalid(format!("horizons must be 1 to 252 trading days, got {h}")))
        })
        .collect()
}

fn groups_arg(path: Option<&str>, ctx: &ToolContext) -> Result<Option<Groups>, ToolError> {
    let Some(p) = path.map(str::trim).filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let path = Path::new(p);
    let full = if path.is_absolute() {
        path.to_path_buf()
    } else {
        ctx.workspace.join(path)
    };
    Groups::load(&full)
        .map(Some)
        .map_err(|e| invalid(format!("groups: {e}")))
}

fn job(args: &FactorScreenArgs, ctx: &ToolContext) -> Result<Job, ToolError> {
    let (library, candidates) = candidates(args)?;
    let range = (
        opt_date(args.start.as_deref(), "start")?,
        opt_date(args.end.as_deref(), "end")?,
    );
    if let (Some(s), Some(e)) = range
        && s > e
    {
        return Err(invalid(format!("start {s} is after end {e}")));
    }
    let horizons = horizons_arg(args.horizons.as_deref())?;
    let quantiles = opt_usize(args.quantiles, "quantiles")?.unwrap_or(5);
    if !(2..=20).contains(&quantiles) {
        return Err(invalid(format!(
            "quantiles must be 2 to 20, got {quantiles}"
        )));
    }
    // One day when it is screened, else the first horizon given.
    let rank_horizon = match opt_usize(args.rank_horizon, "rank_horizon")? {
        Some(h) => h,
        None if horizons.contains(&1) => 1,
        None => horizons.first().copied().unwrap_or(1),
    };
    if !horizons.contains(&rank_horizon) {
        return Err(invalid(format!(
            "rank_horizon {rank_horizon} is not one of the horizons {horizons:?}"
        )));
    }
    let top = opt_usize(args.top, "top")?.unwrap_or(10).clamp(1, MAX_TOP);
    let mut notes = Vec::new();
    let symbols = match &args.symbols {
        Some(list) => tickers(list, "symbols")?,
        None => {
            let (s, left_out) = offline_stocks(range);
            notes.push(format!(
                "universe: the offline market's stocks (ETFs left out), {} with data in the window",
                s.len()
            ));
            notes.extend(left_out);
            s
        }
    };
    if symbols.len() < 3 {
        return Err(invalid(format!(
            "a cross-sectional screen needs at least 3 symbols, got {}",
            symbols.len()
        )));
    }
    let split = args
        .split
        .as_ref()
        .map(|m| {
            serde_json::from_value::<ScreenSplit>(serde_json::Value::Object(m.clone())).map_err(|e| {
                invalid(format!(
                    "split: {e}; give {{\"purged_kfold\": {{\"folds\": K, \"embargo_days\": d}}}} or {{\"cpcv\": {{\"groups\": N, \"test_groups\": k, \"embargo_days\": d}}}}"
                ))
            })
        })
        .transpose()?;
    Ok(Job {
        library,
        candidates,
        symbols,
        notes,
        range,
        options: ScreenOptions {
            horizons,
            quantiles,
            rank_horizon,
            split,
            ..ScreenOptions::default()
        },
        top,
        groups: groups_arg(args.groups.as_deref(), ctx)?,
    })
}

/// The bars before `start` each symbol is loaded with.
fn warm_bars(c: &[Candidate]) -> (usize, usize) {
    let deepest = c.iter().map(|c| c.expr.lookback()).max().unwrap_or(0);
    (deepest, deepest.saturating_add(WARM_MARGIN))
}

/// Where this call's records go.
fn record_dir(data_dir: Option<&Path>, ctx: &ToolContext) -> PathBuf {
    screens_dir(data_dir.unwrap_or(&ctx.run_dir)).join(screen_dir_name(chrono::Utc::now()))
}

/// What the blocking part hands back.
struct Computed {
    screen: Screen,
    symbols: usize,
    dates: usize,
    window: (NaiveDate, NaiveDate),
    failures: Vec<(usize, String)>,
    file: PathBuf,
}

/// Messages from the blocking part to the async one.
type Tx = tokio::sync::mpsc::UnboundedSender<(String, usize, usize, String)>;

impl FactorScreen {
    pub fn new(data: Arc<MarketData>, data_dir: Option<PathBuf>) -> Self {
        FactorScreen { data, data_dir }
    }

    /// The call: read, load, evaluate, screen, write the record, answer;
    /// `report` hears the progress.
    pub async fn execute(
        &self,
        args: FactorScreenArgs,
        ctx: &ToolContext,
        report: Report<'_>,
    ) -> Result<FactorScreenOutput, ToolError> {
        let job = job(&args, ctx)?;
        let (deepest, warm) = warm_bars(&job.candidates);
        let total = job.symbols.len();
        let mut series: Vec<PriceSeries> = Vec::with_capacity(total);
        let mut empty = Vec::new();
        for (i, s) in job.symbols.iter().enumerate() {
            report("loading", i, total, s);
            let mut req = request(s, job.range);
            if job.range.0.is_some() {
                req = req.history(warm);
            }
            let got = fetch(&self.data, ctx, req).await?;
            if got.bars.is_empty() {
                empty.push(s.clone());
            } else {
                series.push(got);
            }
        }
        let mut notes = job.notes.clone();
        if !empty.is_empty() {
            notes.push(format!(
                "no bars in the window, left out: {}",
                empty.join(", ")
            ));
        }
        let sources = source_lines(&series);
        let offline = series
            .iter()
            .all(|s| s.provenance.source == data::Source::Embedded);
        let dir = record_dir(self.data_dir.as_deref(), ctx);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let job = Arc::new(job);
        let work = {
            let job = job.clone();
            move || compute(&job, &series, offline, &dir, &tx)
        };
        let fut = guard::compute_interruptible(Self::NAME, &ctx.cancel, work);
        tokio::pin!(fut);
        let computed = loop {
            tokio::select! {
                r = &mut fut => break r?,
                Some((stage, done, of, m)) = rx.recv() => report(&stage, done, of, &m),
            }
        }?;
        while let Ok((stage, done, of, m)) = rx.try_recv() {
            report(&stage, done, of, &m);
        }
        let warmup = warm_line(job.range.0, deepest, warm);
        Ok(output(&job, computed, warmup, notes, sources))
    }
}

fn send(tx: &Tx, stage: &str, done: usize, total: usize, m: String) {
    let _ = tx.send((stage.to_string(), done, total, m));
}

fn screen_error(e: ScreenError) -> ToolError {
    match e {
        ScreenError::Input(m) => invalid(m),
        ScreenError::TooFew(_) => ToolError::failed("too_few_observations", e.to_string()),
        ScreenError::Interrupted(i) => ToolError::failed("cancelled", i.to_string()),
        ScreenError::Split(_) => invalid(e.to_string()),
    }
}

fn expr_error(e: ExprError) -> ToolError {
    match e {
        ExprError::Interrupted(i) => ToolError::failed("cancelled", i.to_string()),
        e => invalid(e.to_string()),
    }
}

/// The blocking part: the panel, every expression's values cut to the
/// window, the screen and its record.
fn compute(
    job: &Job,
    series: &[PriceSeries],
    offline: bool,
    dir: &Path,
    tx: &Tx,
) -> Result<Computed, ToolError> {
    let named: Vec<(&str, &data::Bars)> = series
        .iter()
        .map(|s| (s.symbol.as_str(), &s.bars))
        .collect();
    let panel = OhlcvPanel::from_bars(&named).map_err(expr_error)?;
    let n = panel.width();
    let from = job
        .range
        .0
        .map_or(0, |s| panel.dates.partition_point(|d| *d < s));
    let to = job
        .range
        .1
        .map_or(panel.rows(), |e| panel.dates.partition_point(|d| *d <= e));
    let (Some(first), Some(last)) = (
        panel.dates.get(from).copied(),
        to.checked_sub(1).and_then(|i| panel.dates.get(i)).copied(),
    ) else {
        return Err(ToolError::failed(
            "no_data",
            "no bars in the window: pick dates within the symbols' history",
        ));
    };
    if to <= from {
        return Err(ToolError::failed("no_data", "no bars in the window"));
    }
    let (values, failures) = evaluate_all(job, &panel, (from, to), tx)?;
    let close = panel
        .close
        .get(from * n..to * n)
        .ok_or_else(|| ToolError::failed("internal_error", "the window is outside the panel"))?;
    let dates = panel.dates.get(from..to).unwrap_or_default();
    let u = Universe {
        dates,
        symbols: &panel.symbols,
        close,
    };
    let factors: Vec<(&str, &[f64])> = job
        .candidates
        .iter()
        .zip(&values)
        .map(|(c, v)| (c.name.as_str(), v.as_slice()))
        .collect();
    send(
        tx,
        "screening",
        0,
        factors.len(),
        format!("{} factors over {} dates", factors.len(), dates.len()),
    );
    let mut screened = screen(u, &factors, &job.options).map_err(screen_error)?;
    for (i, why) in &failures {
        if let Some(f) = screened.factors.get_mut(*i) {
            f.error = Some(why.clone());
        }
    }
    send(tx, "writing", factors.len(), factors.len(), String::new());
    let record = ScreenRecord {
        version: RECORD_VERSION,
        created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        library: job.library.clone(),
        universe: ScreenUniverse {
            symbols: panel.symbols.clone(),
            start: first,
            end: last,
            source: if offline {
                "offline".into()
            } else {
                "market data".into()
            },
        },
        expressions: job
            .candidates
            .iter()
            .map(|c| ScreenedExpr {
                name: c.name.clone(),
                paper_number: c.paper_number,
                source: c.source.clone(),
            })
            .collect(),
        screen: screened,
    };
    let file = record
        .write(dir)
        .map_err(|e| ToolError::failed("io_error", e.to_string()))?;
    Ok(Computed {
        symbols: n,
        dates: dates.len(),
        window: (first, last),
        failures,
        screen: record.screen,
        file,
    })
}

/// Every expression's values on the window's rows, in chunks that share
/// sub-expressions; an expression that cannot be evaluated gets NaN (it
/// still counts as tried) and its reason.
type Evaluated = (Vec<Vec<f64>>, Vec<(usize, String)>);

fn evaluate_all(
    job: &Job,
    panel: &OhlcvPanel,
    (from, to): (usize, usize),
    tx: &Tx,
) -> Result<Evaluated, ToolError> {
    let n = panel.width();
    let cut = |mut v: Vec<f64>| {
        v.truncate(to * n);
        v.drain(..(from * n).min(v.len()));
        v
    };
    let nan = || vec![f64::NAN; (to - from) * n];
    let total = job.candidates.len();
    let mut values = Vec::with_capacity(total);
    let mut failures = Vec::new();
    for (k, chunk) in job.candidates.chunks(CHUNK).enumerate() {
        let base = k * CHUNK;
        send(
            tx,
            "evaluating",
            base,
            total,
            format!("expressions {} to {}", base + 1, base + chunk.len()),
        );
        // Neutralising expressions without groups fail alone, not the chunk.
        let runnable: Vec<&Candidate> = chunk
            .iter()
            .filter(|c| job.groups.is_some() || !c.expr.needs_groups())
            .collect();
        let exprs: Vec<Expr> = runnable.iter().map(|c| c.expr.clone()).collect();
        let together = expr::evaluate(&exprs, panel, job.groups.as_ref());
        let mut got = match together {
            Ok(v) => v.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(ExprError::Interrupted(i)) => return Err(expr_error(ExprError::Interrupted(i))),
            // One of them failed: each alone says which.
            Err(_) => exprs
                .iter()
                .map(|e| {
                    expr::evaluate(std::slice::from_ref(e), panel, job.groups.as_ref())
                        .map(|mut v| v.pop().unwrap_or_default())
                })
                .collect(),
        }
        .into_iter();
        for (j, c) in chunk.iter().enumerate() {
            if job.groups.is_none() && c.expr.needs_groups() {
                failures.push((base + j, ExprError::NeedsGroups.to_string()));
                values.push(nan());
                continue;
            }
            match got.next() {
                Some(Ok(v)) if v.len() == panel.rows() * n => values.push(cut(v)),
                Some(Err(ExprError::Interrupted(i))) => {
                    return Err(expr_error(ExprError::Interrupted(i)));
                }
                Some(Err(e)) => {
                    failures.push((base + j, e.to_string()));
                    values.push(nan());
                }
                _ => {
                    failures.push((base + j, "no values".to_string()));
                    values.push(nan());
                }
            }
        }
    }
    Ok((values, failures))
}

fn warm_line(start: Option<NaiveDate>, deepest: usize, warm: usize) -> String {
    match start {
        Some(s) => format!(
            "warm-up: {warm} trading days loaded before {s} (the deepest expression reads {deepest} back, plus {WARM_MARGIN}); every expression is evaluated on that history and then cut to the window, so no value depends on where the window starts; a symbol with less history before {s} has values once its own bars suffice"
        ),
        None => format!(
            "warm-up: no start given, so the window begins at the first bar and each expression has values once it has {deepest} bars of history"
        ),
    }
}

/// Four significant digits; NaN and ±∞ as null.
fn sig(x: f64) -> Option<f64> {
    if !x.is_finite() {
        return None;
    }
    format!("{x:.3e}").parse().ok()
}

const ASSUMPTIONS: [&str; 6] = [
    "vwap = typical price (high + low + close) / 3: daily bars carry no intraday volume profile (docs §17.7.2)",
    "adv{d} = the mean dollar volume (close × volume) over the last d days",
    "horizons are in trading days (rows of the panel); forward return = close[t+h] / close[t] − 1, within the window",
    "ICs, spreads and the long-short are gross of costs and of the turnover they imply",
    "p-values are two-sided from the Newey–West t with h − 1 lags; Holm and Benjamini–Hochberg adjust across every expression tried",
    "the universe is today's offline list, so survivorship bias applies: every name was still listed in November 2017, picked by its 2012–2017 volume",
];

fn row(rank: usize, name: &str, number: Option<u16>, s: &Screen, i: usize) -> Option<ScreenRow> {
    let f = s.factors.get(i)?;
    let st = f.stats.as_ref()?;
    let h = st
        .horizons
        .iter()
        .find(|h| h.horizon == s.options.rank_horizon)?;
    Some(ScreenRow {
        rank,
        name: name.to_string(),
        paper_number: number,
        rank_ic_mean: sig(h.rank_ic_stats.mean),
        rank_icir: sig(h.rank_ic_stats.ir),
        t_nw: sig(h.rank_ic_stats.t_nw),
        p_value: sig(f.p_value),
        p_holm: sig(f.p_holm),
        p_bh: sig(f.p_bh),
        spread: sig(h.spread),
        turnover: sig(st.turnover),
        coverage: sig(st.coverage),
        ic_decay: st.ic_decay.iter().map(|x| sig(*x)).collect(),
        out_of_sample_rank_ic: s
            .validation
            .as_ref()
            .and_then(|v| v.factors.get(i))
            .and_then(|f| sig(f.out_of_sample_mean)),
    })
}

fn output(
    job: &Job,
    c: Computed,
    warmup: String,
    notes: Vec<String>,
    sources: Vec<String>,
) -> FactorScreenOutput {
    let s = &c.screen;
    let scored = s.factors.iter().filter(|f| f.stats.is_some()).count();
    let failures: Vec<ScreenFailure> = s
        .factors
        .iter()
        .filter(|f| f.stats.is_none())
        .map(|f| ScreenFailure {
            name: f.name.clone(),
            error: f.error.clone().unwrap_or_else(|| "not scored".into()),
        })
        .collect();
    let top = s
        .ranking
        .iter()
        .filter_map(|&i| {
            let cand = job.candidates.get(i)?;
            Some((i, cand))
        })
        .take(job.top)
        .enumerate()
        .filter_map(|(k, (i, cand))| row(k + 1, &cand.name, cand.paper_number, s, i))
        .collect();
    let root = (252.0f64).sqrt();
    let deflated = s.deflated.as_ref().map(|d| ScreenDeflated {
        best: d.best.clone(),
        sharpe_annualized: sig(d.sharpe * root),
        observations: d.observations,
        trials: d.trials,
        expected_max_sharpe_annualized: sig(d.expected_max_sharpe * root),
        psr: sig(d.psr),
        dsr: sig(d.dsr),
    });
    let validation = s.validation.as_ref().map(|v| ScreenValidationSummary {
        kind: v.kind.clone(),
        splits: v.splits,
        paths: v.paths,
        observations: v.observations,
        embargo_days: v.embargo_days,
        horizon_days: v.horizon_days,
        pbo: sig(v.pbo),
    });
    let mut notes = notes;
    if job.options.split.is_some() && validation.is_none() {
        notes.push("the split was passed to the screen, which gave no validation for it".into());
    }
    if !c.failures.is_empty() {
        notes.push(format!(
            "{} expression(s) could not be evaluated and count as tried with p = 1",
            c.failures.len()
        ));
    }
    FactorScreenOutput {
        status: "ok".into(),
        library: job
            .library
            .clone()
            .unwrap_or_else(|| "expressions".to_string()),
        tried: s.factors.len(),
        scored,
        failed: failures.len(),
        failures,
        symbols: c.symbols,
        dates: c.dates,
        horizons: s.options.horizons.clone(),
        quantiles: s.options.quantiles,
        rank_horizon: s.options.rank_horizon,
        top,
        deflated,
        validation,
        screen_file: absolute(&c.file),
        warmup,
        assumptions: ASSUMPTIONS.iter().map(|a| a.to_string()).collect(),
        data: StudyData {
            origin: "market data".into(),
            start: Some(c.window.0.to_string()),
            end: Some(c.window.1.to_string()),
            sources,
            notes,
        },
    }
}

fn absolute(p: &Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

impl TypedTool for FactorScreen {
    type Args = FactorScreenArgs;
    type Output = FactorScreenOutput;

    const NAME: &'static str = names::FACTOR_SCREEN;
    // It writes only a new screen record directory of its own.
    const CAPS: Caps = Caps::WRITES
        .run_dir_only()
        .served_as(names::FACTOR_SCREEN)
        .planner();

    fn description(&self) -> &str {
        "Screen many cross-sectional factors at once: library \"alpha101\" (the 101 Formulaic Alphas daily OHLCV supports, 82, with paper numbers) or your own expressions [{\"name\", \"expr\"}] in the factor language (rank, ts_corr, decay_linear, delta, … over open high low close volume returns vwap adv20). Each is evaluated on every symbol's history warm from before start, then scored over start..end: rank IC mean, ICIR and Newey–West t at each horizon (default [1, 5, 10, 21] trading days), quantile spread, turnover, coverage, p-values adjusted across all tried (Holm, BH), and the deflated Sharpe of the best long-short. Universe defaults to the offline market's stocks. Answers the top factors by |rank ICIR| and writes the whole screen to screen_file (the workstation's factor view opens it)."
    }

    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_secs(900))
    }

    async fn run(
        &self,
        args: FactorScreenArgs,
        ctx: &ToolContext,
    ) -> Result<FactorScreenOutput, ToolError> {
        let emit = |stage: &str, done: usize, total: usize, m: &str| {
            progress::emit(stage, Some(done as f64), Some(total as f64), m);
        };
        self.execute(args, ctx, &emit).await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::tools::builtin::testkit::{call, call_in};

    /// Three expressions over eight stocks, with `rest` (window, horizons,
    /// split …) added.
    fn small_screen(rest: serde_json::Value) -> serde_json::Value {
        let mut args = json!({"expressions": [
            {"name": "reversal", "expr": "-delta(close, 5)"},
            {"name": "range", "expr": "(close - open) / ((high - low) + .001)"},
            {"name": "volume", "expr": "rank(volume)"}],
          "symbols": ["AAPL", "MSFT", "IBM", "JPM", "XOM", "WMT", "KO", "PFE"]});
        if let (Some(a), Some(r)) = (args.as_object_mut(), rest.as_object()) {
            a.extend(r.clone());
        }
        args
    }

    #[tokio::test]
    async fn a_small_screen_ranks_its_expressions_and_writes_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let v = call_in(
            dir.path(),
            "factor_screen",
            small_screen(
                json!({"start": "2012-01-01", "end": "2012-12-31", "horizons": [1, 5], "top": 2}),
            ),
        )
        .await
        .unwrap();
        assert_eq!(v["tried"], 3, "{v}");
        assert_eq!(v["scored"], 3);
        assert_eq!(v["top"].as_array().unwrap().len(), 2);
        assert_eq!(v["data"]["start"], "2012-01-03");
        let file = v["screen_file"].as_str().unwrap();
        let r = crate::research::factor::record::ScreenRecord::read(std::path::Path::new(file))
            .unwrap();
        assert_eq!(r.expressions.len(), 3);
        assert_eq!(r.universe.symbols.len(), 8);
        assert_eq!(r.universe.source, "offline");
        assert!(v["warmup"].as_str().unwrap().contains("26 trading days"));
        assert!(v.get("validation").is_none_or(|x| x.is_null()), "{v}");
    }

    #[tokio::test]
    async fn a_cpcv_split_answers_the_pbo_and_each_top_rows_out_of_sample_ic() {
        let dir = tempfile::tempdir().unwrap();
        let v = call_in(
            dir.path(),
            "factor_screen",
            small_screen(
                json!({"start": "2011-01-01", "end": "2012-12-31", "horizons": [1, 5],
              "split": {"cpcv": {"groups": 6, "test_groups": 2, "embargo_days": 5}}}),
            ),
        )
        .await
        .unwrap();
        let val = &v["validation"];
        // C(6, 2) = 15 splits, 5 paths.
        assert_eq!(
            (
                val["kind"].as_str(),
                val["splits"].as_u64(),
                val["paths"].as_u64()
            ),
            (Some("cpcv"), Some(15), Some(5)),
            "{v}"
        );
        let pbo = val["pbo"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&pbo), "{pbo}");
        for row in v["top"].as_array().unwrap() {
            assert!(row["out_of_sample_rank_ic"].as_f64().is_some(), "{row}");
        }
        // A split the dates cannot hold is refused with its reason.
        let e = call_in(
            dir.path(),
            "factor_screen",
            json!({"expressions": [{"name": "reversal", "expr": "-delta(close, 5)"}],
              "symbols": ["AAPL", "MSFT", "IBM", "JPM", "XOM"],
              "start": "2012-01-01", "end": "2012-12-31",
              "split": {"cpcv": {"groups": 4, "test_groups": 4}}}),
        )
        .await
        .unwrap_err();
        assert!(e.contains("split.cpcv"), "{e}");
    }

    #[tokio::test]
    async fn a_parse_error_shows_its_caret_and_one_source_is_required() {
        let e = call(
            "factor_screen",
            json!({"expressions": [{"name": "bad", "expr": "rank(close +)"}]}),
        )
        .await
        .unwrap_err();
        assert!(e.contains("expression 'bad'") && e.contains('^'), "{e}");
        let e = call("factor_screen", json!({})).await.unwrap_err();
        assert!(e.contains("exactly one of 'library'"), "{e}");
        let e = call("factor_screen", json!({"library": "alpha191"}))
            .await
            .unwrap_err();
        assert!(e.contains("alpha191"), "{e}");
    }
}
