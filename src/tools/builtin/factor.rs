//! Is the edge real (docs §17): `factor_ic`, `regression` and
//! `overfitting`, thin typed layers over [`crate::research::factor`] and
//! [`crate::research::overfitting`].
//!
//! All are read-only computations. Prices come from the market-data layer
//! (a factor's indicator warm from history before `start`, docs §7.4.1),
//! the monthly Fama–French factors from the embedded table, strategies'
//! returns inline, from backtest runs' `artifacts/equity.csv` or from
//! symbols; every answer states its conventions.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{Datelike, NaiveDate};
use serde_json::{Map, Value, json};

use super::args::{check_returns, check_values, nonempty, opt_usize};
use super::market::{fetch, opt_date};
use super::quant::returns_from;
use super::{Family, ToolEnv, register_family};
use crate::model::factor::*;
use crate::model::names;
use crate::research::data::{self, DataConfig, DataRequest, MarketData, PriceSeries};
use crate::research::factor::regression::{
    Ols, RegressionError, default_hac_lags, month_end_returns, ols_hac, rolling_slopes,
};
use crate::research::factor::{
    FactorError, HorizonIc, IcOptions, Panel, SymbolColumns, factor_ic, indicator_panel,
};
use crate::research::indicators::IndicatorSpec;
use crate::research::overfitting::{
    OverfitError, SharpeMoments, expected_max_sharpe, min_track_record, pbo_cscv, psr,
};
use crate::research::warmup::WarmupRecord;
use crate::tools::registry::DuplicateTool;
use crate::tools::{Caps, guard};
use crate::tools::{Registry, ToolContext, ToolError, TypedTool};

/// Most symbols one call takes.
const MAX_SYMBOLS: usize = 200;
/// Trading days a year: the annualisation throughout (docs §17).
const PERIODS_PER_YEAR: f64 = 252.0;
/// Longest rolling-beta list shown before it is thinned.
const MAX_POINTS: usize = 260;
/// Scored dates whose IC is listed without `full_series` (the answer
/// stays within the model's 10,000-character result, docs §2.7).
const LAST_DATES: usize = 5;

/// A request for `symbol` over `range`. Without an end, a symbol of the
/// embedded set is read there alone: "all the data" is its history to
/// 2017-11-10, not that plus a round of online sources for the years
/// since (docs §17.1.1).
pub(super) fn request(symbol: &str, range: (Option<NaiveDate>, Option<NaiveDate>)) -> DataRequest {
    let r = DataRequest::new(symbol).range(range.0, range.1);
    if range.1.is_none() && data::embedded::has(symbol) {
        r.source(data::SourceChoice::Explicit(data::Source::Embedded))
    } else {
        r
    }
}

/// Registers the three tools, sharing one data service.
pub fn register_factor_tools(
    registry: &mut Registry,
    config: DataConfig,
) -> Result<(), DuplicateTool> {
    register_family(registry, Family::Factor, &ToolEnv::new(config))
}

fn factor_error(e: FactorError) -> ToolError {
    match e {
        FactorError::Input(m) => ToolError::InvalidArguments(m),
        FactorError::TooFew(_) => ToolError::failed("too_few_observations", e.to_string()),
        FactorError::Interrupted(i) => ToolError::failed("cancelled", i.to_string()),
    }
}

fn regression_error(e: RegressionError) -> ToolError {
    match e {
        RegressionError::Input(m) => ToolError::InvalidArguments(m),
        RegressionError::TooFew { .. } => ToolError::failed("too_few_observations", e.to_string()),
        RegressionError::Singular { .. } => ToolError::failed("singular_regressors", e.to_string()),
        RegressionError::Interrupted(i) => ToolError::failed("cancelled", i.to_string()),
    }
}

fn overfit_error(e: OverfitError) -> ToolError {
    match e {
        OverfitError::Interrupted(i) => ToolError::failed("cancelled", i.to_string()),
        e => ToolError::InvalidArguments(e.to_string()),
    }
}

fn no_data(symbol: &str, start: Option<NaiveDate>, end: Option<NaiveDate>) -> ToolError {
    let at = |d: Option<NaiveDate>| d.map_or_else(|| "-".to_string(), |d| d.to_string());
    ToolError::failed(
        "no_data",
        format!(
            "{symbol} has no bars from {} to {}; pick dates within its history",
            at(start),
            at(end)
        ),
    )
}

/// Tickers, trimmed and upper-cased, each once, 1 to [`MAX_SYMBOLS`].
pub(super) fn tickers(list: &[String], key: &str) -> Result<Vec<String>, ToolError> {
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for s in list {
        let s = nonempty(s, key)?.to_ascii_uppercase();
        if out.contains(&s) {
            return Err(ToolError::InvalidArguments(format!(
                "{s} is listed twice in '{key}'"
            )));
        }
        out.push(s);
    }
    if out.is_empty() || out.len() > MAX_SYMBOLS {
        return Err(ToolError::InvalidArguments(format!(
            "'{key}' needs 1 to {MAX_SYMBOLS} tickers, got {}",
            out.len()
        )));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// factor_ic

pub struct FactorIc {
    data: Arc<MarketData>,
}

/// The factor argument, read.
enum FactorSpec {
    Indicator(IndicatorSpec),
    /// (date, symbol, value), sorted by date.
    Inline(Vec<(NaiveDate, String, f64)>),
}

fn factor_spec(f: &Map<String, Value>) -> Result<FactorSpec, ToolError> {
    if let Some(name) = f.get("indicator") {
        let name = name.as_str().ok_or_else(|| {
            ToolError::InvalidArguments(
                "factor.indicator must be a name such as \"momentum\"".into(),
            )
        })?;
        let params = f.get("params").cloned().unwrap_or(Value::Null);
        return IndicatorSpec::parse(name, &params)
            .map(FactorSpec::Indicator)
            .map_err(|e| ToolError::InvalidArguments(format!("factor: {e}")));
    }
    let mut rows = Vec::new();
    for (date, by_symbol) in f {
        let d = data::parse_date("factor", date).map_err(|_| {
            ToolError::InvalidArguments(format!(
                "factor: '{date}' is neither \"indicator\" nor a date YYYY-MM-DD; give {{\"indicator\": \"momentum\", \"params\": {{…}}}} or {{\"YYYY-MM-DD\": {{\"AAPL\": 0.1, …}}}}"
            ))
        })?;
        let Some(m) = by_symbol.as_object() else {
            return Err(ToolError::InvalidArguments(format!(
                "factor.{date} must map symbols to numbers"
            )));
        };
        for (sym, v) in m {
            let Some(x) = v.as_f64() else {
                if v.is_null() {
                    continue;
                }
                return Err(ToolError::InvalidArguments(format!(
                    "factor.{date}.{sym} must be a number, got {v}"
                )));
            };
            rows.push((d, sym.trim().to_ascii_uppercase(), x));
        }
    }
    if rows.is_empty() {
        return Err(ToolError::InvalidArguments(
            "factor has no values: give an indicator spec or {date: {symbol: value}}".into(),
        ));
    }
    rows.sort_by_key(|r| r.0);
    Ok(FactorSpec::Inline(rows))
}

/// The offline market's stocks with data in the range: the default
/// cross-section, and a note naming those left out.
pub(super) fn offline_stocks(
    range: (Option<NaiveDate>, Option<NaiveDate>),
) -> (Vec<String>, Option<String>) {
    let (mut keep, mut out) = (Vec::new(), Vec::new());
    for x in crate::model::universe::all().iter().filter(|x| !x.etf) {
        if range.0.is_some_and(|s| x.last < s) || range.1.is_some_and(|e| x.first > e) {
            out.push(format!("{} ({} to {})", x.ticker, x.first, x.last));
        } else {
            keep.push(x.ticker.to_string());
        }
    }
    let note =
        (!out.is_empty()).then(|| format!("no data in the range, left out: {}", out.join(", ")));
    (keep, note)
}

fn horizons_arg(v: Option<&[i64]>) -> Result<Vec<usize>, ToolError> {
    let Some(v) = v else {
        return Ok(vec![1, 5, 21]);
    };
    if v.is_empty() || v.len() > 10 {
        return Err(ToolError::InvalidArguments(
            "forward_days needs 1 to 10 horizons in trading days, e.g. [1, 5, 21]".into(),
        ));
    }
    v.iter()
        .map(|&h| {
            usize::try_from(h).ok().filter(|h| *h >= 1).ok_or_else(|| {
                ToolError::InvalidArguments(format!("forward_days must be 1 or more, got {h}"))
            })
        })
        .collect()
}

/// The panel, the universe it covers, notes and the warm-up line.
struct Built {
    panel: Panel,
    notes: Vec<String>,
    sources: Vec<String>,
    warmup: Option<String>,
}

async fn load_all(
    data: &MarketData,
    ctx: &ToolContext,
    symbols: &[String],
    req: impl Fn(&str) -> DataRequest,
) -> Result<(Vec<PriceSeries>, Vec<String>), ToolError> {
    let mut out = Vec::with_capacity(symbols.len());
    let mut empty = Vec::new();
    for s in symbols {
        let series = fetch(data, ctx, req(s)).await?;
        if series.bars.is_empty() {
            empty.push(s.clone());
        } else {
            out.push(series);
        }
    }
    Ok((out, empty))
}

pub(super) fn source_lines(series: &[PriceSeries]) -> Vec<String> {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for s in series {
        *by.entry(s.provenance.source.as_str()).or_default() += 1;
    }
    by.iter()
        .map(|(k, n)| format!("{n} symbols: {k}"))
        .collect()
}

async fn indicator_built(
    data: &MarketData,
    ctx: &ToolContext,
    spec: &IndicatorSpec,
    universe: &[String],
    range: (Option<NaiveDate>, Option<NaiveDate>),
) -> Result<Built, ToolError> {
    let need = spec.warmup();
    let (series, empty) = load_all(data, ctx, universe, |s| {
        request(s, range).history(need.bars())
    })
    .await?;
    let named: Vec<(&str, &data::Bars)> = series
        .iter()
        .map(|s| (s.symbol.as_str(), &s.bars))
        .collect();
    let warmup = warmup_line(need, range.0, &named);
    let panel = indicator_panel(spec, &named, range.0, range.1).map_err(factor_error)?;
    let mut notes = Vec::new();
    if !empty.is_empty() {
        notes.push(format!(
            "no bars in the range, left out: {}",
            empty.join(", ")
        ));
    }
    Ok(Built {
        panel,
        notes,
        sources: source_lines(&series),
        warmup: Some(warmup),
    })
}

/// The warm-up in one line (docs §7.4.1): one note per short symbol
/// would run to pages over a hundred stocks, so those are counted and the
/// first few named.
fn warmup_line(
    need: crate::research::indicators::Warmup,
    start: Option<NaiveDate>,
    named: &[(&str, &data::Bars)],
) -> String {
    let record = WarmupRecord::of(need, start, named);
    let needed = need.bars();
    let short: Vec<&str> = named
        .iter()
        .filter(|(_, b)| crate::research::warmup::bars_before(b, start) < needed)
        .map(|(s, _)| *s)
        .collect();
    if start.is_none() {
        return format!(
            "warm-up: {needed} bars; with no start, each symbol's factor begins once it has {needed} bars of its own"
        );
    }
    if short.len() <= 3 {
        return record.describe();
    }
    let shown: Vec<&str> = short.iter().take(5).copied().collect();
    format!(
        "warm-up: {needed} bars needed; {} of {} symbols had fewer before {} ({}{}): each one's factor is missing until it has {needed} bars of its own",
        short.len(),
        named.len(),
        start.map_or_else(String::new, |d| d.to_string()),
        shown.join(", "),
        if short.len() > shown.len() {
            ", …"
        } else {
            ""
        }
    )
}

/// An inline factor: each value sits on the symbol's last bar on or before
/// its date (within five days), so a month-end value dated on a weekend
/// is the Friday's.
async fn inline_built(
    data: &MarketData,
    ctx: &ToolContext,
    rows: &[(NaiveDate, String, f64)],
    universe: &[String],
    range: (Option<NaiveDate>, Option<NaiveDate>),
) -> Result<Built, ToolError> {
    let first = rows.first().map(|r| r.0);
    let start = range.0.or(first);
    let (series, empty) = load_all(data, ctx, universe, |s| request(s, (start, range.1))).await?;
    let mut columns = Vec::with_capacity(series.len());
    let mut unplaced = 0usize;
    for s in &series {
        let b = &s.bars;
        let mut f = vec![f64::NAN; b.len()];
        for (d, _, v) in rows.iter().filter(|r| r.1 == s.symbol.to_ascii_uppercase()) {
            let i = b.dates.partition_point(|x| x <= d);
            match i.checked_sub(1) {
                Some(k) if (*d - b.dates[k]).num_days() <= 5 => f[k] = *v,
                _ => unplaced += 1,
            }
        }
        columns.push(f);
    }
    let cols: Vec<SymbolColumns<'_>> = series
        .iter()
        .zip(&columns)
        .map(|(s, f)| SymbolColumns {
            symbol: &s.symbol,
            dates: &s.bars.dates,
            close: &s.bars.close,
            factor: f,
        })
        .collect();
    let panel = Panel::align(&cols).map_err(factor_error)?;
    let mut notes = vec![
        "an inline value is placed on the symbol's last bar on or before its date (within 5 days); forward returns start at that close".to_string(),
    ];
    if unplaced > 0 {
        notes.push(format!("{unplaced} inline value(s) had no bar within 5 days before their date and were left out"));
    }
    if !empty.is_empty() {
        notes.push(format!(
            "no bars in the range, left out: {}",
            empty.join(", ")
        ));
    }
    Ok(Built {
        panel,
        notes,
        sources: source_lines(&series),
        warmup: None,
    })
}

impl TypedTool for FactorIc {
    type Args = FactorIcArgs;
    type Output = FactorIcOutput;

    const NAME: &'static str = names::FACTOR_IC;
    const CAPS: Caps = Caps::READ_ONLY.served_as(names::FACTOR_IC).planner();
    fn description(&self) -> &str {
        "Is a cross-sectional factor predictive? Per-date Spearman rank IC of the factor against forward returns over forward_days (default [1, 5, 21] trading days), with IC mean, std, IR, t-stat (and Newey–West t), hit rate, mean forward return by quantile (default 5), top-minus-bottom spread and top-quantile turnover. The factor is an indicator spec (12-1 momentum: {\"indicator\": \"momentum\", \"params\": {\"window\": 252, \"skip\": 21}}) computed on each symbol's own history up to each date, or inline {date: {symbol: value}}; universe defaults to the offline market's 106 stocks."
    }
    async fn run(&self, args: FactorIcArgs, ctx: &ToolContext) -> Result<Self::Output, ToolError> {
        let spec = factor_spec(&args.factor)?;
        let range = (
            opt_date(args.start.as_deref(), "start")?,
            opt_date(args.end.as_deref(), "end")?,
        );
        let horizons = horizons_arg(args.forward_days.as_deref())?;
        let q = opt_usize(args.quantiles, "quantiles")?.unwrap_or(5);
        let (universe, default_universe) = match (&args.universe, &spec) {
            (Some(u), _) => (tickers(u, "universe")?, None),
            (None, FactorSpec::Indicator(_)) => {
                let (u, note) = offline_stocks(range);
                (u, Some(note))
            }
            (None, FactorSpec::Inline(rows)) => {
                let mut s: Vec<String> = rows.iter().map(|r| r.1.clone()).collect();
                s.sort();
                s.dedup();
                (tickers(&s, "factor")?, None)
            }
        };
        let mut built = match &spec {
            FactorSpec::Indicator(ind) => {
                indicator_built(&self.data, ctx, ind, &universe, range).await?
            }
            FactorSpec::Inline(rows) => {
                inline_built(&self.data, ctx, rows, &universe, range).await?
            }
        };
        if let Some(left_out) = default_universe {
            built.notes.push(format!(
                "universe: the offline market's stocks (ETFs left out), {} with data in the range; {}",
                universe.len(),
                data::embedded::BIAS_NOTE
            ));
            built.notes.extend(left_out);
        }
        let o = IcOptions {
            horizons,
            quantiles: q,
            min_names: 3,
        };
        // The ranks of every date off the async threads (§2.4).
        let (study, built) = guard::compute_interruptible(Self::NAME, &ctx.cancel, move || {
            factor_ic(&built.panel, &o).map(|s| (s, built))
        })
        .await?
        .map_err(factor_error)?;
        let (name, params) = match &spec {
            FactorSpec::Indicator(i) => (i.name().to_string(), i.params_json()),
            FactorSpec::Inline(r) => ("inline".to_string(), json!({"values": r.len()})),
        };
        Ok(ic_output(
            name,
            params,
            built,
            &study,
            q,
            args.full_series.unwrap_or(false),
        ))
    }
}

fn ic_output(
    factor: String,
    params: Value,
    built: Built,
    study: &[HorizonIc],
    q: usize,
    full: bool,
) -> FactorIcOutput {
    let p = &built.panel;
    let horizons = study.iter().map(|h| horizon_output(p, h, full)).collect();
    FactorIcOutput {
        status: "ok".into(),
        factor,
        params,
        universe: p.symbols.clone(),
        dates: p.dates.len(),
        quantiles: q,
        horizons,
        warmup: built.warmup,
        data: StudyData {
            origin: "market data".into(),
            start: p.dates.first().map(ToString::to_string),
            end: p.dates.last().map(ToString::to_string),
            sources: built.sources,
            notes: built.notes,
        },
        conventions: IC_CONVENTIONS.into(),
    }
}

const IC_CONVENTIONS: &str = "IC = Spearman rank correlation (ties averaged, as scipy's spearmanr) across the names with a factor value and a forward return on a date, scored when at least max(3, quantiles) names have both; forward return over h trading days = adjusted close[t+h] / close[t] − 1, starting at the factor's date and ending within start..end; the factor on t uses data up to t only (an indicator is computed on each symbol's history from before start); ic_std with ddof 1, ic_ir = ic_mean / ic_std per date (not annualised), t_stat = ic_mean / (ic_std / √n), t_stat_nw with Newey–West errors over h − 1 lags (overlapping h-day returns), hit_rate = share of dates with IC > 0; quantiles: each date's names with a factor value sorted by it (ties in ticker order), the i-th of m in Q⌊i·q/m⌋+1, equal-weight mean forward return per quantile per date averaged over dates; spread = Qtop − Q1 per date, averaged; top_turnover = share of Qtop's names not in Qtop h dates earlier";

fn horizon_output(p: &Panel, h: &HorizonIc, full: bool) -> HorizonIcOutput {
    let from = if full {
        0
    } else {
        h.ic.len().saturating_sub(LAST_DATES)
    };
    HorizonIcOutput {
        forward_days: h.horizon,
        ic_mean: h.ic_mean,
        ic_std: h.ic_std,
        ic_ir: h.ic_ir,
        t_stat: h.t_stat,
        t_stat_nw: h.t_stat_nw,
        hit_rate: h.hit_rate,
        dates_scored: h.ic.len(),
        dates_skipped: h.skipped,
        mean_names: h.names.iter().sum::<usize>() as f64 / h.names.len().max(1) as f64,
        quantile_returns: h.quantile_returns.clone(),
        spread: h.spread,
        top_turnover: h.top_turnover,
        ic_by_year: yearly_ic(p, h),
        ic_series: h.rows[from..]
            .iter()
            .zip(&h.ic[from..])
            .map(|(r, ic)| (p.dates[*r].to_string(), *ic))
            .collect(),
    }
}

/// Each calendar year's mean IC and the dates it rests on.
fn yearly_ic(p: &Panel, h: &HorizonIc) -> Vec<(i32, f64, usize)> {
    let mut out: Vec<(i32, f64, usize)> = Vec::new();
    for (r, ic) in h.rows.iter().zip(&h.ic) {
        let y = p.dates[*r].year();
        match out.last_mut() {
            Some(last) if last.0 == y => {
                last.1 += ic;
                last.2 += 1;
            }
            _ => out.push((y, *ic, 1)),
        }
    }
    // Six decimals: a year's mean is read, not recomputed.
    out.into_iter()
        .map(|(y, s, n)| (y, (s / n as f64 * 1e6).round() / 1e6, n))
        .collect()
}

// ---------------------------------------------------------------------------
// regression

pub struct Regression {
    data: Arc<MarketData>,
}

/// One named side of the regression as given.
enum Side {
    Ticker(String),
    Factor(&'static str),
    Inline(String, Vec<f64>),
}

const FACTORS: [&str; 4] = ["MktRF", "SMB", "HML", "Mom"];

fn sides(v: &SeriesRef, key: &str) -> Result<Vec<Side>, ToolError> {
    match &v.0 {
        Value::String(s) => {
            let s = nonempty(s, key)?;
            if let Some(f) = s.strip_prefix("ff:").or_else(|| s.strip_prefix("FF:")) {
                let f = FACTORS
                    .iter()
                    .find(|k| k.eq_ignore_ascii_case(f.trim()))
                    .ok_or_else(|| {
                        ToolError::InvalidArguments(format!(
                            "'{s}' is not a factor; the Fama–French factors are ff:MktRF, ff:SMB, ff:HML, ff:Mom"
                        ))
                    })?;
                return Ok(vec![Side::Factor(f)]);
            }
            Ok(vec![Side::Ticker(s.to_ascii_uppercase())])
        }
        Value::Object(m) if !m.is_empty() => m
            .iter()
            .map(|(name, vals)| {
                let v: Vec<f64> = serde_json::from_value(vals.clone()).map_err(|_| {
                    ToolError::InvalidArguments(format!("{key}.{name} must be an array of numbers"))
                })?;
                Ok(Side::Inline(name.clone(), v))
            })
            .collect(),
        _ => Err(ToolError::InvalidArguments(format!(
            "'{key}' must be a ticker, \"ff:MktRF\" (or SMB, HML, Mom), or {{\"name\": [values]}}"
        ))),
    }
}

/// The aligned columns a fit reads.
struct Design {
    y_name: String,
    y: Vec<f64>,
    x: Vec<(String, Vec<f64>)>,
    /// Each observation's date, when from market data.
    dates: Option<Vec<NaiveDate>>,
    monthly: bool,
    excess: bool,
    data: StudyData,
}

fn frequency_arg(s: Option<&str>, has_factor: bool) -> Result<bool, ToolError> {
    match s.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") => Ok(has_factor),
        Some("monthly") | Some("month") | Some("m") => Ok(true),
        Some("daily") | Some("day") | Some("d") if has_factor => Err(ToolError::InvalidArguments(
            "the Fama–French factors here are monthly: use frequency monthly (or drop the ff: regressors)".into(),
        )),
        Some("daily") | Some("day") | Some("d") => Ok(false),
        Some(other) => Err(ToolError::InvalidArguments(format!(
            "frequency '{other}' is not one of daily, monthly"
        ))),
    }
}

fn inline_design(y: Vec<Side>, x: Vec<Side>, monthly: bool) -> Result<Design, ToolError> {
    let take = |s: Side| {
        match s {
        Side::Inline(n, v) => Ok((n, v)),
        _ => Err(ToolError::InvalidArguments(
            "inline series have no dates: give every series inline, or y and x as tickers / ff: factors".into(),
        )),
    }
    };
    let mut ys = y.into_iter().map(take).collect::<Result<Vec<_>, _>>()?;
    if ys.len() != 1 {
        return Err(ToolError::InvalidArguments(
            "'y' must be one series, {\"name\": [values]}".into(),
        ));
    }
    let (y_name, y) = ys.remove(0);
    let x = x.into_iter().map(take).collect::<Result<Vec<_>, _>>()?;
    Ok(Design {
        data: StudyData {
            origin: "inline".into(),
            ..StudyData::default()
        },
        y_name,
        y,
        x,
        dates: None,
        monthly,
        excess: false,
    })
}

async fn market_design(
    data: &MarketData,
    ctx: &ToolContext,
    y: Side,
    x: Vec<Side>,
    monthly: bool,
    range: (Option<NaiveDate>, Option<NaiveDate>),
) -> Result<Design, ToolError> {
    let mut names = Vec::new();
    for s in std::iter::once(&y).chain(&x) {
        match s {
            Side::Ticker(t) => names.push(t.clone()),
            Side::Factor(_) => {}
            Side::Inline(..) => {
                return Err(ToolError::InvalidArguments(
                    "inline series have no dates: give every series inline, or y and x as tickers / ff: factors".into(),
                ));
            }
        }
    }
    let has_factor = x.iter().any(|s| matches!(s, Side::Factor(_)));
    if names.is_empty() {
        return Err(ToolError::InvalidArguments(
            "'y' must be a ticker (or inline data): a factor is a regressor".into(),
        ));
    }
    let cols = if monthly {
        monthly_columns(data, ctx, &names, has_factor, range).await?
    } else {
        daily_columns(data, ctx, &names, range).await?
    };
    assemble(y, x, cols, monthly, has_factor)
}

/// Returns by ticker on common dates (daily: the dates every ticker
/// traded; monthly: the months every ticker and the factors have).
struct Columns {
    dates: Vec<NaiveDate>,
    by_ticker: BTreeMap<String, Vec<f64>>,
    factors: Option<Vec<&'static data::factors::FactorMonth>>,
    data: StudyData,
}

async fn daily_columns(
    data: &MarketData,
    ctx: &ToolContext,
    names: &[String],
    range: (Option<NaiveDate>, Option<NaiveDate>),
) -> Result<Columns, ToolError> {
    let start = range.0.map(|d| d.to_string());
    let end = range.1.map(|d| d.to_string());
    let mut uniq = names.to_vec();
    uniq.dedup();
    let r = returns_from(
        data,
        ctx,
        Some(&uniq),
        None,
        start.as_deref(),
        end.as_deref(),
    )
    .await?;
    let dates = r.dates.unwrap_or_default().into_iter().skip(1).collect();
    Ok(Columns {
        dates,
        by_ticker: r.names.into_iter().zip(r.columns).collect(),
        factors: None,
        data: StudyData {
            origin: "market data".into(),
            start: r.data.start,
            end: r.data.end,
            sources: r.data.sources,
            notes: r.data.notes,
        },
    })
}

async fn monthly_columns(
    data: &MarketData,
    ctx: &ToolContext,
    names: &[String],
    has_factor: bool,
    range: (Option<NaiveDate>, Option<NaiveDate>),
) -> Result<Columns, ToolError> {
    let mut per: BTreeMap<String, BTreeMap<NaiveDate, f64>> = BTreeMap::new();
    let mut sources = Vec::new();
    for t in names {
        if per.contains_key(t) {
            continue;
        }
        // 30 bars before the start reach the month-end before it.
        let s = fetch(data, ctx, request(t, range).history(30)).await?;
        let m = month_end_returns(&s.bars.dates, &s.bars.close, range.0, range.1);
        if m.is_empty() {
            return Err(no_data(t, range.0, range.1));
        }
        sources.push(format!("{t}: {}", s.provenance.source.as_str()));
        per.insert(t.clone(), m.into_iter().collect());
    }
    let ff = if has_factor {
        Some(data::factors::monthly().map_err(|e| ToolError::failed(e.code(), e.to_string()))?)
    } else {
        None
    };
    let mut months: Vec<NaiveDate> = per
        .values()
        .next()
        .map(|m| m.keys().copied().collect())
        .unwrap_or_default();
    months.retain(|m| {
        per.values().all(|p| p.contains_key(m)) && ff.is_none_or(|f| f.month(*m).is_some())
    });
    let mut notes = vec!["monthly returns from month-end adjusted closes (the last close of each month over the month before's)".to_string()];
    if let Some(f) = ff {
        sources.push(data::factors::ATTRIBUTION.to_string());
        if let (Some(last), Some(end)) = (f.months.last(), range.1)
            && end.with_day(1).is_some_and(|m| m > last.month)
        {
            notes.push(format!(
                "the Fama–French factors end {}: later months are not used",
                last.month.format("%Y-%m")
            ));
        }
    }
    let factors = ff.map(|f| months.iter().filter_map(|m| f.month(*m)).collect());
    Ok(Columns {
        by_ticker: per
            .into_iter()
            .map(|(t, m)| (t, months.iter().map(|d| m[d]).collect()))
            .collect(),
        data: StudyData {
            origin: if has_factor {
                "market data and Fama–French"
            } else {
                "market data"
            }
            .into(),
            start: months.first().map(|d| d.format("%Y-%m").to_string()),
            end: months.last().map(|d| d.format("%Y-%m").to_string()),
            sources,
            notes,
        },
        dates: months,
        factors,
    })
}

fn factor_value(m: &data::factors::FactorMonth, f: &str) -> f64 {
    match f {
        "MktRF" => m.mkt_rf,
        "SMB" => m.smb,
        "HML" => m.hml,
        _ => m.mom,
    }
}

fn assemble(
    y: Side,
    x: Vec<Side>,
    c: Columns,
    monthly: bool,
    has_factor: bool,
) -> Result<Design, ToolError> {
    let rf: Option<Vec<f64>> = c.factors.as_ref().map(|f| f.iter().map(|m| m.rf).collect());
    let series = |s: &Side| -> (String, Vec<f64>) {
        match s {
            Side::Ticker(t) => {
                let mut v = c.by_ticker.get(t).cloned().unwrap_or_default();
                if let Some(rf) = &rf {
                    v.iter_mut().zip(rf).for_each(|(a, r)| *a -= r);
                }
                (t.clone(), v)
            }
            Side::Factor(f) => (
                format!("ff:{f}"),
                c.factors
                    .as_ref()
                    .map(|m| m.iter().map(|m| factor_value(m, f)).collect())
                    .unwrap_or_default(),
            ),
            Side::Inline(n, v) => (n.clone(), v.clone()),
        }
    };
    let (y_name, yv) = series(&y);
    let xs = x.iter().map(series).collect();
    Ok(Design {
        y_name,
        y: yv,
        x: xs,
        dates: Some(c.dates),
        monthly,
        excess: has_factor,
        data: c.data,
    })
}

impl TypedTool for Regression {
    type Args = RegressionArgs;
    type Output = RegressionOutput;

    const NAME: &'static str = names::REGRESSION;
    const CAPS: Caps = Caps::READ_ONLY.served_as(names::REGRESSION).planner();
    fn description(&self) -> &str {
        "OLS of y on x with an intercept and Newey–West (HAC) standard errors, as statsmodels' OLS fit(cov_type=\"HAC\"): a ticker's beta and alpha to other tickers or to the monthly Fama–French factors (\"ff:MktRF\", \"ff:SMB\", \"ff:HML\", \"ff:Mom\"; then returns are monthly and in excess of the one-month T-bill), or inline series. Returns coefficients with std errors, t and p-values, r², adjusted r², n, residual std, the annualised alpha, and an optional rolling beta (rolling_window)."
    }
    async fn run(
        &self,
        args: RegressionArgs,
        ctx: &ToolContext,
    ) -> Result<Self::Output, ToolError> {
        if args.x.is_empty() || args.x.len() > 10 {
            return Err(ToolError::InvalidArguments(format!(
                "'x' needs 1 to 10 regressors, got {}",
                args.x.len()
            )));
        }
        let y = sides(&args.y, "y")?;
        let mut x = Vec::new();
        for (i, s) in args.x.iter().enumerate() {
            x.extend(sides(s, &format!("x[{i}]"))?);
        }
        let has_factor = x.iter().any(|s| matches!(s, Side::Factor(_)));
        let monthly = frequency_arg(args.frequency.as_deref(), has_factor)?;
        let range = (
            opt_date(args.start.as_deref(), "start")?,
            opt_date(args.end.as_deref(), "end")?,
        );
        let mut y = y;
        let design = match (y.len(), y.pop()) {
            (1, Some(t @ Side::Ticker(_))) => {
                market_design(&self.data, ctx, t, x, monthly, range).await?
            }
            (1, Some(Side::Factor(_))) => {
                return Err(ToolError::InvalidArguments(
                    "'y' must be a ticker or inline data: a factor is a regressor".into(),
                ));
            }
            (_, last) => {
                y.extend(last);
                inline_design(y, x, monthly)?
            }
        };
        // HAC and rolling fits are O(n²) at worst: off the async threads,
        // watching the deadline (§2.4).
        let (lags, window) = (args.hac_lags, args.rolling_window);
        guard::compute_interruptible(Self::NAME, &ctx.cancel, move || fit(design, lags, window))
            .await?
    }
}

fn fit(d: Design, lags: Option<i64>, window: Option<i64>) -> Result<RegressionOutput, ToolError> {
    let n = d.y.len();
    let lags = opt_usize(lags, "hac_lags")?.unwrap_or_else(|| default_hac_lags(n));
    // Newey–West over n − 1 lags or more weighs autocovariances of one
    // pair of residuals or none, and its "standard errors" mean nothing
    // (a t of 955 on noise): at most n − 2 (docs §17.2).
    if lags >= n.saturating_sub(1) {
        return Err(ToolError::InvalidArguments(format!(
            "hac_lags must be less than n − 1 = {} for {n} observations, got {lags}",
            n.saturating_sub(1)
        )));
    }
    let x: Vec<(&str, &[f64])> =
        d.x.iter()
            .map(|(k, v)| (k.as_str(), v.as_slice()))
            .collect();
    check_values("y", [(d.y_name.as_str(), d.y.as_slice())])?;
    check_values("x", x.iter().copied())?;
    let ols = ols_hac(&d.y, &x, lags).map_err(regression_error)?;
    let rolling = match opt_usize(window, "rolling_window")? {
        None => None,
        Some(w) => Some(rolling(&d, &x, w)?),
    };
    let per_year = if d.monthly { 12.0 } else { PERIODS_PER_YEAR };
    Ok(regression_output(&d, ols, per_year, rolling))
}

fn rolling(d: &Design, x: &[(&str, &[f64])], w: usize) -> Result<RollingBetaOutput, ToolError> {
    let n = d.y.len();
    let step = (n.saturating_sub(w) + 1).div_ceil(MAX_POINTS).max(1);
    let r = rolling_slopes(&d.y, x, w, step).map_err(regression_error)?;
    let mut betas: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (_, b) in &r {
        for ((name, _), v) in x.iter().zip(b) {
            betas.entry((*name).to_string()).or_default().push(*v);
        }
    }
    let ends = r
        .iter()
        .map(|(i, _)| match &d.dates {
            Some(ds) => ds.get(*i).map_or(Value::Null, |t| {
                if d.monthly {
                    t.format("%Y-%m").to_string().into()
                } else {
                    t.to_string().into()
                }
            }),
            None => (*i).into(),
        })
        .collect();
    Ok(RollingBetaOutput {
        window: w,
        step,
        ends,
        betas,
    })
}

fn regression_output(
    d: &Design,
    ols: Ols,
    per_year: f64,
    rolling: Option<RollingBetaOutput>,
) -> RegressionOutput {
    let mut coefficients = Map::new();
    for c in &ols.coefficients {
        coefficients.insert(
            c.name.clone(),
            json!({"estimate": c.estimate, "std_error": c.std_error, "t": c.t, "p_value": c.p_value}),
        );
    }
    let alpha = ols.coefficients.first().map_or(f64::NAN, |c| c.estimate);
    let freq = if d.monthly { "monthly" } else { "daily" };
    RegressionOutput {
        status: "ok".into(),
        y: d.y_name.clone(),
        frequency: freq.into(),
        coefficients,
        r2: ols.r2,
        adj_r2: ols.adj_r2,
        n: ols.n,
        residual_std: ols.residual_std,
        hac_lags: ols.hac_lags,
        alpha_annualized: alpha * per_year,
        excess_returns: d.excess,
        risk_free: d.excess.then(|| {
            "Fama–French RF (the one-month T-bill), subtracted from y and every ticker regressor each month".to_string()
        }),
        rolling,
        data: d.data.clone(),
        conventions: format!(
            "OLS with an intercept ('const', the alpha per {} period); simple returns ({}); Newey–West HAC standard errors with Bartlett weights over hac_lags lags and no small-sample factor, as statsmodels' OLS(...).fit(cov_type=\"HAC\", cov_kwds={{\"maxlags\": L}}); z statistics with two-sided normal p-values; r² centred, adj_r2 = 1 − (n − 1)/(n − k)(1 − r²), residual_std = √(SSR/(n − k)); alpha_annualized = const × {per_year}; {}",
            freq,
            if d.monthly { "month-end to month-end" } else { "close to close on the dates every ticker traded" },
            if d.excess {
                "y and ticker regressors in excess of the one-month T-bill (Fama–French RF), the factors as published"
            } else {
                "raw returns (no risk-free rate subtracted: no factor was used)"
            }
        ),
    }
}

// ---------------------------------------------------------------------------
// overfitting

pub struct Overfitting {
    data: Arc<MarketData>,
}

/// Strategies' daily returns, named, with where they came from; or one
/// reported Sharpe's moments (no returns).
struct Strategies {
    names: Vec<String>,
    columns: Vec<Vec<f64>>,
    moments: Option<SharpeMoments>,
    data: StudyData,
    /// The close dates behind the returns (one more than each column),
    /// when known: the T-bill is read on them.
    dates: Option<Vec<NaiveDate>>,
}

/// A reported Sharpe ratio's moments: per period, with the skewness and
/// kurtosis given or a normal's.
/// The most trials a deflated Sharpe counts (docs §17.3).
const MAX_TRIALS: usize = 1_000_000_000;
/// The largest annualised Sharpe taken as given (reported, a trial's, a
/// benchmark): far past any real strategy's, well inside `f64`.
const MAX_SHARPE: f64 = 100.0;

/// Whether `x` is a finite Sharpe within ±[`MAX_SHARPE`] (NaN is not).
fn sharpe_in_range(x: f64) -> bool {
    (-MAX_SHARPE..=MAX_SHARPE).contains(&x)
}

fn reported(a: &OverfittingArgs, sharpe: f64) -> Result<Strategies, ToolError> {
    let n = opt_usize(a.observations, "observations")?.ok_or_else(|| {
        ToolError::InvalidArguments(
            "'sharpe' needs 'observations': the number of daily returns behind it (252 a year)"
                .into(),
        )
    })?;
    if !(3..=MAX_TRIALS).contains(&n) || !sharpe_in_range(sharpe) {
        return Err(ToolError::InvalidArguments(format!(
            "a reported Sharpe needs a 'sharpe' from -{MAX_SHARPE} to {MAX_SHARPE} (annualised) and 3 to {MAX_TRIALS} observations, got {sharpe} over {n}"
        )));
    }
    let (skew, kurt) = (a.skewness.unwrap_or(0.0), a.kurtosis.unwrap_or(3.0));
    if !(skew.abs() <= 1e3 && (1.0..=1e6).contains(&kurt)) {
        return Err(ToolError::InvalidArguments(format!(
            "'skewness' must be from -1000 to 1000 and 'kurtosis' from 1 to 1e6 (3 for a normal, not excess), got {skew} and {kurt}"
        )));
    }
    let per = sharpe / PERIODS_PER_YEAR.sqrt();
    let m = SharpeMoments {
        n,
        mean: f64::NAN,
        std: f64::NAN,
        sharpe: per,
        skewness: skew,
        kurtosis: kurt,
    };
    let d = m.dispersion();
    if d.is_nan() || d <= 0.0 {
        return Err(ToolError::InvalidArguments(format!(
            "skewness {skew} and kurtosis {kurt} leave 1 − γ₃·SR + (γ₄ − 1)/4·SR² ≤ 0: check them (kurtosis is 3 for a normal, not excess)"
        )));
    }
    let mut notes = vec![format!(
        "a reported Sharpe of {sharpe} (annualised, ÷ √252 = {per:.6} a day) over {n} daily returns"
    )];
    if a.skewness.is_none() || a.kurtosis.is_none() {
        notes.push(format!(
            "skewness {skew} and kurtosis {kurt}{}: the returns' own moments were not given",
            if a.skewness.is_none() && a.kurtosis.is_none() {
                " (a normal's)"
            } else {
                ""
            }
        ));
    }
    Ok(Strategies {
        names: vec![a.name.clone().unwrap_or_else(|| "the strategy".into())],
        columns: Vec::new(),
        moments: Some(m),
        dates: None,
        data: StudyData {
            origin: "a reported Sharpe ratio".into(),
            notes,
            ..StudyData::default()
        },
    })
}

/// A run's daily returns from `artifacts/equity.csv` (`timestamp`, `ret`;
/// the first bar has no return and is dropped).
fn run_returns(dir: &std::path::Path, raw: &str) -> Result<Vec<(NaiveDate, f64)>, ToolError> {
    let path = dir.join("artifacts").join("equity.csv");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        ToolError::failed(
            "no_data",
            format!(
                "{raw}: cannot read artifacts/equity.csv ({e}); give a backtest's run directory"
            ),
        )
    })?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let (Some(ti), Some(ri)) = (
        header.iter().position(|h| *h == "timestamp"),
        header.iter().position(|h| *h == "ret"),
    ) else {
        return Err(ToolError::failed(
            "no_data",
            format!("{raw}: artifacts/equity.csv has no timestamp and ret columns"),
        ));
    };
    let mut out = Vec::new();
    for line in lines.skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let d = f
            .get(ti)
            .and_then(|s| NaiveDate::parse_from_str(s.get(..10).unwrap_or(s), "%Y-%m-%d").ok());
        let r = f.get(ri).and_then(|s| s.parse::<f64>().ok());
        if let (Some(d), Some(r)) = (d, r) {
            out.push((d, r));
        }
    }
    Ok(out)
}

fn runs_strategies(ctx: &ToolContext, runs: &[String]) -> Result<Strategies, ToolError> {
    if runs.is_empty() || runs.len() > MAX_SYMBOLS {
        return Err(ToolError::InvalidArguments(format!(
            "'runs' needs 1 to {MAX_SYMBOLS} run directories, got {}",
            runs.len()
        )));
    }
    let mut per = Vec::new();
    for raw in runs {
        let dir = super::backtest::resolve_run_dir(ctx, Some(raw))?;
        let name = dir
            .file_name()
            .map_or_else(|| raw.clone(), |n| n.to_string_lossy().into_owned());
        per.push((name, run_returns(&dir, raw)?));
    }
    // The dates every run has, so PBO compares the same days.
    let mut dates: Vec<NaiveDate> = per[0].1.iter().map(|r| r.0).collect();
    dates.retain(|d| {
        per.iter()
            .all(|(_, r)| r.binary_search_by_key(d, |x| x.0).is_ok())
    });
    let columns = per
        .iter()
        .map(|(_, r)| {
            dates
                .iter()
                .filter_map(|d| r.binary_search_by_key(d, |x| x.0).ok().map(|i| r[i].1))
                .collect()
        })
        .collect();
    Ok(Strategies {
        names: per.into_iter().map(|(n, _)| n).collect(),
        columns,
        moments: None,
        // The run's first close has no return: its date only anchors the
        // first return's (the rate is read on each return's end date).
        dates: dates
            .first()
            .map(|d| std::iter::once(*d).chain(dates.iter().copied()).collect()),
        data: StudyData {
            origin: "backtest runs".into(),
            start: dates.first().map(ToString::to_string),
            end: dates.last().map(ToString::to_string),
            sources: runs
                .iter()
                .map(|r| format!("{r}/artifacts/equity.csv"))
                .collect(),
            notes: vec![
                "the dates every run has; the first bar of each run (no return) left out".into(),
            ],
        },
    })
}

async fn strategies(
    data: &MarketData,
    ctx: &ToolContext,
    a: &OverfittingArgs,
) -> Result<Strategies, ToolError> {
    let given = [
        a.returns.is_some(),
        a.runs.is_some(),
        a.symbols.is_some(),
        a.sharpe.is_some(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(ToolError::InvalidArguments(
            "give one of 'returns' ({\"name\": [daily returns]}), 'runs' (backtest run directories), 'symbols' (with start and end) or 'sharpe' (annualised, with 'observations')".into(),
        ));
    }
    if let Some(sharpe) = a.sharpe {
        return reported(a, sharpe);
    }
    if let Some(runs) = &a.runs {
        return runs_strategies(ctx, runs);
    }
    if let Some(r) = &a.returns {
        if r.0.is_empty() || r.0.len() > MAX_SYMBOLS {
            return Err(ToolError::InvalidArguments(format!(
                "'returns' needs 1 to {MAX_SYMBOLS} strategies, got {}",
                r.0.len()
            )));
        }
        check_returns(
            "returns",
            r.0.iter().map(|(n, c)| (n.as_str(), c.as_slice())),
        )?;
        return Ok(Strategies {
            names: r.0.iter().map(|(n, _)| n.clone()).collect(),
            columns: r.0.iter().map(|(_, c)| c.clone()).collect(),
            moments: None,
            dates: None,
            data: StudyData {
                origin: "inline".into(),
                ..StudyData::default()
            },
        });
    }
    let r = returns_from(
        data,
        ctx,
        a.symbols.as_deref(),
        None,
        a.start.as_deref(),
        a.end.as_deref(),
    )
    .await?;
    let mut notes = r.data.notes;
    notes.push("each symbol's buy-and-hold daily simple returns are one strategy".into());
    Ok(Strategies {
        names: r.names,
        columns: r.columns,
        moments: None,
        dates: r.dates,
        data: StudyData {
            origin: "market data".into(),
            start: r.data.start,
            end: r.data.end,
            sources: r.data.sources,
            notes,
        },
    })
}

/// The strategies' returns in excess of the common risk-free rate (docs
/// §15.1.1), the same Sharpe the backtest reports; PSR, DSR and PBO then
/// run on them unchanged. A reported Sharpe is taken as given. Returns
/// what the rate is, for the answer.
fn excess_returns(s: &mut Strategies, given: Option<f64>) -> Result<String, ToolError> {
    if s.moments.is_some() {
        return Ok("the reported Sharpe as given (over whatever rate its reporter used)".into());
    }
    let n = s.columns.iter().map(Vec::len).max().unwrap_or(0);
    let rf = super::quant::sharpe_rate(given, s.dates.as_deref(), n)?;
    for c in &mut s.columns {
        for (x, f) in c.iter_mut().zip(&rf.per_return) {
            *x -= f;
        }
    }
    Ok(rf.basis)
}

impl TypedTool for Overfitting {
    type Args = OverfittingArgs;
    type Output = OverfittingOutput;

    const NAME: &'static str = names::OVERFITTING;
    const CAPS: Caps = Caps::READ_ONLY.served_as(names::OVERFITTING).planner();
    fn description(&self) -> &str {
        "Does a backtest's Sharpe survive the number of configurations tried? For the best of the strategies given (daily returns inline, backtest runs' equity curves, or symbols): the probabilistic Sharpe ratio (Bailey & López de Prado 2012, per-period Sharpe with skewness and kurtosis), the deflated Sharpe ratio for 'trials' configurations (2014: the best of N by luck, from the trials' Sharpe variance), the minimum track record length, and with two or more strategies the probability of backtest overfitting by CSCV (16 partitions). benchmark_sharpe and the reported Sharpes are annualised (× √252)."
    }
    async fn run(
        &self,
        args: OverfittingArgs,
        ctx: &ToolContext,
    ) -> Result<Self::Output, ToolError> {
        let mut s = strategies(&self.data, ctx, &args).await?;
        let o = options(&args, s.names.len())?;
        let basis = excess_returns(&mut s, args.risk_free)?;
        // PBO's choices off the async threads, watching the deadline (§2.4).
        let trial_sharpes = args.trial_sharpes;
        let mut out = guard::compute_interruptible(Self::NAME, &ctx.cancel, move || {
            deflate(s, &o, trial_sharpes.as_deref())
        })
        .await??;
        out.risk_free = basis;
        Ok(out)
    }
}

/// The numeric options, checked.
struct DeflateOptions {
    trials: usize,
    benchmark: f64,
    confidence: f64,
    partitions: usize,
}

fn options(a: &OverfittingArgs, given: usize) -> Result<DeflateOptions, ToolError> {
    let trials = opt_usize(a.trials, "trials")?.unwrap_or(given);
    if trials < given {
        return Err(ToolError::InvalidArguments(format!(
            "trials ({trials}) must count every configuration tried, at least the {given} given"
        )));
    }
    // Past 10⁹ trials the expected best Sharpe's quantile Φ⁻¹(1 − 1/N)
    // rounds to Φ⁻¹(1) = ∞ (docs §17.3).
    if trials > MAX_TRIALS {
        return Err(ToolError::InvalidArguments(format!(
            "trials must be at most {MAX_TRIALS}, got {trials}"
        )));
    }
    let confidence = a.confidence.unwrap_or(0.95);
    if !(confidence > 0.5 && confidence < 1.0) {
        return Err(ToolError::InvalidArguments(format!(
            "confidence must be between 0.5 and 1 (0.95 for 95 %), got {confidence}"
        )));
    }
    let benchmark = a.benchmark_sharpe.unwrap_or(0.0);
    if !sharpe_in_range(benchmark) {
        return Err(ToolError::InvalidArguments(format!(
            "benchmark_sharpe must be an annualised Sharpe from -{MAX_SHARPE} to {MAX_SHARPE}, got {benchmark}"
        )));
    }
    Ok(DeflateOptions {
        trials,
        benchmark,
        confidence,
        partitions: opt_usize(a.partitions, "partitions")?.unwrap_or(16),
    })
}

fn deflate(
    s: Strategies,
    o: &DeflateOptions,
    trial_sharpes: Option<&[f64]>,
) -> Result<OverfittingOutput, ToolError> {
    let scale = PERIODS_PER_YEAR.sqrt();
    let bench = o.benchmark / scale;
    let mut moments: Vec<SharpeMoments> = s.moments.into_iter().collect();
    for (name, c) in s.names.iter().zip(&s.columns) {
        moments.push(
            SharpeMoments::of(c)
                .map_err(|e| ToolError::InvalidArguments(format!("{name}: {e}")))?,
        );
    }
    let best = (0..moments.len())
        .max_by(|a, b| moments[*a].sharpe.total_cmp(&moments[*b].sharpe))
        .unwrap_or(0);
    let m = moments[best];
    let (var, source) = trial_variance(&moments, best, trial_sharpes, o.trials)?;
    let sr0 = expected_max_sharpe(var, o.trials, bench);
    let dsr = psr(&m, sr0);
    let mtrl = min_track_record(&m, bench, o.confidence);
    let (pbo, pbo_note) = pbo_of(&s.columns, o.partitions)?;
    let survives = dsr >= o.confidence;
    let verdict = format!(
        "DSR {dsr:.3} for {} trial(s): the best Sharpe ({:.2} annualised, {}) {} at {:.0} % confidence; the best of {} by luck alone would reach {:.2}",
        o.trials,
        m.sharpe * scale,
        s.names[best],
        if survives {
            "survives"
        } else {
            "does not survive"
        },
        o.confidence * 100.0,
        o.trials,
        sr0 * scale
    );
    Ok(OverfittingOutput {
        status: "ok".into(),
        risk_free: String::new(),
        best: s.names[best].clone(),
        sharpe: m.sharpe,
        sharpe_annualized: m.sharpe * scale,
        psr: psr(&m, bench),
        dsr,
        trials: o.trials,
        expected_max_sharpe: sr0,
        expected_max_sharpe_annualized: sr0 * scale,
        trial_sharpe_variance: var,
        variance_source: source,
        min_track_record: mtrl,
        min_track_record_years: mtrl.map(|n| n / PERIODS_PER_YEAR),
        benchmark_sharpe: o.benchmark,
        confidence: o.confidence,
        survives,
        verdict,
        strategies: s
            .names
            .iter()
            .zip(&moments)
            .map(|(n, m)| StrategyStats {
                name: n.clone(),
                n: m.n,
                sharpe: m.sharpe,
                sharpe_annualized: m.sharpe * scale,
                skewness: m.skewness,
                kurtosis: m.kurtosis,
                psr: psr(m, bench),
            })
            .collect(),
        pbo,
        pbo_note,
        data: s.data,
        conventions: OVERFIT_CONVENTIONS.into(),
    })
}

const OVERFIT_CONVENTIONS: &str = "per-period (daily) Sharpe = mean / std (ddof 1) of the returns given, no risk-free rate subtracted from them (a reported 'sharpe' is taken as it was computed, ÷ √252), annualised × √252 only for display; skewness and kurtosis are population moments (kurtosis 3 for a normal); PSR(SR*) = Φ((SR − SR*)·√(n − 1) / √(1 − γ₃·SR + (γ₄ − 1)/4·SR²)) with SR* = benchmark_sharpe / √252 (Bailey & López de Prado 2012); DSR = PSR(SR₀), SR₀ = SR* + √V·((1 − γ)·Φ⁻¹(1 − 1/N) + γ·Φ⁻¹(1 − 1/(N·e))), N = trials, γ = 0.5772… (Bailey & López de Prado 2014); min_track_record = 1 + (1 − γ₃·SR + (γ₄ − 1)/4·SR²)·(Φ⁻¹(confidence) / (SR − SR*))² periods; PBO by CSCV (Bailey, Borwein, López de Prado & Zhu 2017): rows cut into 'partitions' equal blocks (the oldest rows that do not fit dropped), every half of the blocks in sample, the in-sample best strategy's out-of-sample rank ω = rank/(N+1), PBO = share of logit(ω) ≤ 0; the best strategy is the one with the highest Sharpe";

/// The trials' Sharpe variance (per period) and where it came from.
fn trial_variance(
    m: &[SharpeMoments],
    best: usize,
    trial_sharpes: Option<&[f64]>,
    trials: usize,
) -> Result<(f64, String), ToolError> {
    if let Some(t) = trial_sharpes {
        if t.len() < 2 || !t.iter().copied().all(sharpe_in_range) {
            return Err(ToolError::InvalidArguments(format!(
                "trial_sharpes needs at least 2 annualised Sharpe ratios, each from -{MAX_SHARPE} to {MAX_SHARPE}"
            )));
        }
        let v = crate::research::stats::variance(t, 1) / PERIODS_PER_YEAR;
        return Ok((
            v,
            format!(
                "the {} trial_sharpes given (annualised, ddof 1, ÷ 252)",
                t.len()
            ),
        ));
    }
    if m.len() >= 2 {
        let sr: Vec<f64> = m.iter().map(|x| x.sharpe).collect();
        let more = if trials > m.len() {
            format!("; the other {} trials are assumed alike", trials - m.len())
        } else {
            String::new()
        };
        return Ok((
            crate::research::stats::variance(&sr, 1),
            format!("the {} strategies given (ddof 1){more}", m.len()),
        ));
    }
    let b = &m[best];
    Ok((
        b.dispersion() / (b.n as f64 - 1.0),
        "one strategy: the Sharpe estimator's own variance (1 − γ₃·SR + (γ₄ − 1)/4·SR²)/(n − 1); give trial_sharpes for the trials' actual spread".into(),
    ))
}

/// PBO, or a note why there is none; `Err` only when it was interrupted.
fn pbo_of(
    columns: &[Vec<f64>],
    partitions: usize,
) -> Result<(Option<PboOutput>, Option<String>), ToolError> {
    if columns.len() < 2 {
        return Ok((
            None,
            Some("PBO needs two or more strategies' returns".into()),
        ));
    }
    Ok(match pbo_cscv(columns, partitions) {
        Ok(p) => {
            let mut l = p.logits.clone();
            l.sort_by(f64::total_cmp);
            let median = crate::research::stats::quantile_sorted(&l, 0.5);
            (
                Some(PboOutput {
                    pbo: p.pbo,
                    partitions: p.partitions,
                    combinations: p.combinations,
                    rows: p.rows,
                    rows_dropped: p.rows_dropped,
                    logit_median: median,
                    prob_oos_loss: p.prob_oos_loss,
                    degradation_slope: p.degradation_slope,
                }),
                None,
            )
        }
        Err(e @ OverfitError::Interrupted(_)) => return Err(overfit_error(e)),
        Err(e) => (None, Some(format!("no PBO: {}", overfit_error(e)))),
    })
}

// Each is made of the shared market data alone.
built_from_data!(FactorIc, Regression, Overfitting);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::builtin::testkit::{assert_plain_object, call, call_in};

    #[test]
    fn schemas_are_plain_objects_with_their_enums() {
        use crate::model::contract::parameters_schema;
        let schemas = [
            parameters_schema::<FactorIcArgs>(),
            parameters_schema::<RegressionArgs>(),
            parameters_schema::<OverfittingArgs>(),
        ];
        schemas.iter().for_each(assert_plain_object);
        assert_eq!(schemas[0]["required"], json!(["factor"]));
        assert_eq!(schemas[0]["properties"]["factor"]["type"], "object");
        assert_eq!(schemas[1]["required"], json!(["y", "x"]));
        assert_eq!(
            schemas[1]["properties"]["y"]["type"],
            json!(["string", "object"])
        );
        assert_eq!(
            schemas[1]["properties"]["frequency"]["enum"],
            json!(["daily", "monthly"])
        );
        assert_eq!(schemas[2]["required"], json!([]));
    }

    /// The failures issue 35 found: HAC over n − 1 lags or more (a t of
    /// 955 reported `ok`), and a constant series (Sharpe 1.5e15 that
    /// "survives"), are refused; so are impossible returns.
    #[tokio::test]
    async fn meaningless_inputs_are_refused_not_answered() {
        let noise: Vec<f64> = (0..40).map(|i| ((i * 7919) % 13) as f64 / 1000.0).collect();
        let y = json!({"y": noise});
        let x = json!([{"x": noise.iter().rev().copied().collect::<Vec<_>>()}]);
        let ok = call("regression", json!({"y": y, "x": x, "hac_lags": 38})).await;
        assert!(ok.is_ok(), "n − 2 lags is the most: {ok:?}");
        for lags in [39, 40, 1000] {
            let e = call("regression", json!({"y": y, "x": x, "hac_lags": lags}))
                .await
                .unwrap_err();
            assert!(
                e.contains(&format!(
                    "hac_lags must be less than n − 1 = 39 for 40 observations, got {lags}"
                )),
                "{e}"
            );
        }
        let flat = json!({"returns": {"flat": vec![0.001; 400]}});
        let e = call("overfitting", flat).await.unwrap_err();
        assert!(e.contains("flat") && e.contains("constant"), "{e}");
        let mut crash = vec![0.01; 50];
        crash[20] = -2.0;
        let e = call("overfitting", json!({"returns": {"s": crash}}))
            .await
            .unwrap_err();
        assert!(
            e.contains("s[20] = -2.0 is not a daily simple return"),
            "{e}"
        );
        let e = call(
            "overfitting",
            json!({"sharpe": 1.0, "observations": 500, "trials": 9223372036854775807i64}),
        )
        .await
        .unwrap_err();
        assert!(e.contains("trials must be at most 1000000000"), "{e}");
    }

    #[tokio::test]
    async fn momentum_ic_on_a_few_stocks_states_its_warm_up() {
        let v = call(
            "factor_ic",
            json!({"factor": {"indicator": "momentum", "params": {"window": 252, "skip": 21}},
                   "universe": ["AAPL", "MSFT", "IBM", "JPM", "XOM", "WMT", "KO", "PFE"],
                   "start": "2011-01-01", "end": "2012-12-31", "forward_days": [21], "quantiles": 4}),
        )
        .await
        .unwrap();
        assert_eq!(v["factor"], "momentum");
        assert_eq!(v["params"]["skip"], 21);
        let h = &v["horizons"][0];
        assert_eq!(h["forward_days"], 21);
        assert_eq!(h["quantile_returns"].as_array().unwrap().len(), 4);
        assert!(h["ic_mean"].as_f64().unwrap().abs() < 1.0);
        assert_eq!(h["ic_series"].as_array().unwrap().len(), 5);
        assert_eq!(h["ic_by_year"][0][0], 2011);
        assert_eq!(h["ic_by_year"].as_array().unwrap().len(), 2);
        let warm = v["warmup"].as_str().unwrap();
        assert!(warm.starts_with("warm-up: 252 bars needed"), "{warm}");
        assert_eq!(v["data"]["start"], "2011-01-03");
    }

    #[tokio::test]
    async fn an_inline_factor_sits_on_the_last_bar_before_its_date() {
        // Month-end values dated on a Sunday (2011-07-31) sit on Friday's bar.
        let mut factor = serde_json::Map::new();
        for (d, k) in [
            ("2011-06-30", 1.0),
            ("2011-07-31", -1.0),
            ("2011-08-31", 1.0),
        ] {
            factor.insert(
                d.into(),
                json!({"AAPL": 3.0 * k, "MSFT": 2.0 * k, "IBM": k, "KO": 0.0, "XOM": -k}),
            );
        }
        let v = call(
            "factor_ic",
            json!({"factor": factor, "forward_days": [5], "end": "2011-12-31"}),
        )
        .await
        .unwrap();
        assert_eq!(v["factor"], "inline");
        let h = &v["horizons"][0];
        assert_eq!(h["dates_scored"], 3, "{v}");
        assert_eq!(h["ic_series"][1][0], "2011-07-29");
        let e = call("factor_ic", json!({"factor": {"2011-06-30": 3}}))
            .await
            .unwrap_err();
        assert!(e.contains("must map symbols to numbers"), "{e}");
        let e = call("factor_ic", json!({"factor": {"mom": 1}}))
            .await
            .unwrap_err();
        assert!(e.contains("neither \"indicator\" nor a date"), "{e}");
    }

    #[tokio::test]
    async fn beta_to_the_market_factor_uses_excess_monthly_returns() {
        let v = call(
            "regression",
            json!({"y": "AAPL", "x": ["ff:MktRF"], "start": "2010-01-01", "end": "2017-12-31"}),
        )
        .await
        .unwrap();
        assert_eq!(v["frequency"], "monthly");
        assert_eq!(v["excess_returns"], true);
        assert!(
            v["risk_free"]
                .as_str()
                .unwrap()
                .contains("one-month T-bill")
        );
        assert_eq!(v["n"], 87, "2010-01 to 2017-03, the factors' last month");
        let beta = v["coefficients"]["ff:MktRF"]["estimate"].as_f64().unwrap();
        assert!(beta > 0.5 && beta < 1.5, "{v}");
        let keys: Vec<&String> = v["coefficients"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["const", "ff:MktRF"]);
        assert!(
            v["data"]["notes"]
                .to_string()
                .contains("factors end 2017-03"),
            "{v}"
        );
        let e = call(
            "regression",
            json!({"y": "AAPL", "x": ["ff:MktRF"], "frequency": "daily"}),
        )
        .await
        .unwrap_err();
        assert!(e.contains("use frequency monthly"), "{e}");
        let e = call("regression", json!({"y": "AAPL", "x": ["ff:Value"]}))
            .await
            .unwrap_err();
        assert!(e.contains("ff:MktRF, ff:SMB, ff:HML, ff:Mom"), "{e}");
    }

    #[tokio::test]
    async fn daily_and_inline_regressions_with_a_rolling_beta() {
        let v = call(
            "regression",
            json!({"y": "AAPL", "x": ["SPY"], "start": "2012-01-01", "end": "2013-12-31", "hac_lags": 5, "rolling_window": 126}),
        )
        .await
        .unwrap();
        assert_eq!(v["frequency"], "daily");
        assert_eq!(v["excess_returns"], false);
        assert_eq!(v["hac_lags"], 5);
        let r = &v["rolling"];
        assert_eq!(r["window"], 126);
        assert_eq!(r["ends"].as_array().unwrap().last().unwrap(), "2013-12-31");
        let y: Vec<f64> = (0..40).map(|i| ((i * 7) % 11) as f64 / 100.0).collect();
        let x: Vec<f64> = (0..40).map(|i| ((i * 3) % 5) as f64 / 100.0).collect();
        let yy: Vec<f64> = y.iter().zip(&x).map(|(a, b)| a + 2.0 * b).collect();
        let v = call(
            "regression",
            json!({"y": {"strategy": yy}, "x": [{"market": x}], "frequency": "monthly"}),
        )
        .await
        .unwrap();
        assert_eq!(v["data"]["origin"], "inline");
        assert!(v["coefficients"]["market"]["estimate"].as_f64().unwrap() > 1.0);
        let e = call("regression", json!({"y": {"s": [1.0, 2.0]}, "x": ["SPY"]}))
            .await
            .unwrap_err();
        assert!(e.contains("inline series have no dates"), "{e}");
    }

    fn noise(n: usize, seed: u64, mu: f64) -> Vec<f64> {
        let mut r = crate::research::seeded::SplitMix64::new(seed);
        (0..n).map(|_| mu + 0.01 * r.normal()).collect()
    }

    #[tokio::test]
    async fn overfitting_deflates_the_best_of_the_strategies() {
        let v = call(
            "overfitting",
            json!({"returns": {"a": noise(800, 1, 0.0), "b": noise(800, 2, 0.0), "c": noise(800, 3, 0.0)}, "trials": 50}),
        )
        .await
        .unwrap();
        assert_eq!(v["trials"], 50);
        assert!(v["dsr"].as_f64().unwrap() < v["psr"].as_f64().unwrap());
        assert!(
            v["variance_source"]
                .as_str()
                .unwrap()
                .contains("other 47 trials")
        );
        assert_eq!(v["pbo"]["partitions"], 16);
        assert_eq!(v["survives"], false);
        assert!(
            v["verdict"].as_str().unwrap().contains("does not survive"),
            "{v}"
        );
        let e = call(
            "overfitting",
            json!({"returns": {"a": noise(100, 1, 0.0), "b": noise(100, 2, 0.0)}, "trials": 1}),
        )
        .await
        .unwrap_err();
        assert!(e.contains("at least the 2 given"), "{e}");
        // One strategy: the estimator's own variance, no PBO.
        let v = call(
            "overfitting",
            json!({"returns": {"edge": noise(2520, 4, 0.002)}, "trials": 50, "benchmark_sharpe": 0.5}),
        )
        .await
        .unwrap();
        assert!(
            v["variance_source"]
                .as_str()
                .unwrap()
                .starts_with("one strategy")
        );
        assert!(v["pbo"].is_null() && v["pbo_note"].is_string());
        assert_eq!(v["survives"], true, "{v}");
        assert!(v["min_track_record_years"].as_f64().unwrap() < 10.0);
    }

    #[tokio::test]
    async fn overfitting_reads_backtest_runs() {
        let dir = tempfile::tempdir().unwrap();
        for (name, seed) in [("sma", 5u64), ("rsi", 6)] {
            let art = dir.path().join("run").join(name).join("artifacts");
            std::fs::create_dir_all(&art).unwrap();
            let mut csv =
                String::from("timestamp,ret,equity,drawdown,benchmark_equity,active_ret\n");
            let d0 = NaiveDate::from_ymd_opt(2012, 1, 2).unwrap();
            for (i, r) in noise(300, seed, 0.0005).iter().enumerate() {
                let r = if i == 0 { 0.0 } else { *r };
                csv.push_str(&format!(
                    "{},{r},1,0,1,0\n",
                    d0 + chrono::Days::new(i as u64)
                ));
            }
            std::fs::write(art.join("equity.csv"), csv).unwrap();
        }
        let v = call_in(
            dir.path(),
            "overfitting",
            json!({"runs": ["sma", "rsi"], "trials": 10}),
        )
        .await
        .unwrap();
        assert_eq!(v["data"]["origin"], "backtest runs");
        assert_eq!(v["strategies"][0]["n"], 299);
        assert!(v["pbo"]["pbo"].as_f64().is_some(), "{v}");
        let e = call_in(dir.path(), "overfitting", json!({"runs": ["nowhere"]}))
            .await
            .unwrap_err();
        assert!(e.contains("cannot read artifacts/equity.csv"), "{e}");
    }
}
