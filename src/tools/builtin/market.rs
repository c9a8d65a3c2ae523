//! Market data tools: `get_market_data` and `technical_indicator`.
//!
//! Both are read-only and not repeatable (the default): the same call twice
//! in a run is answered from the first result (docs §2.2). Data comes from
//! [`crate::research::data::MarketData`] (embedded set, the session
//! workspace's CSV and Parquet files, Yahoo / Stooq with a cache, docs §7.3); every
//! answer carries the series' provenance so the model can cite it.
//!
//! Both answer for the range asked (docs §2.12): `get_market_data`'s
//! `total` counts the range's rows and `last_n` serves its true last rows;
//! `technical_indicator` computes on warm-up history before `start`
//! (§7.4.1) and shows only the range, so a value on a date does not depend
//! on `start`.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::NaiveDate;
use serde_json::{Value, json};

use super::args::{nonempty, opt_usize};
use super::market_rank::{self, symbol_list};
use super::{Family, ToolEnv, register_family};
use crate::model::contract::{
    DrawdownDates, Extremes, IndicatorAnswer, IndicatorArgs, IndicatorOutput, MarketDataArgs,
    MarketDataOutput, PeriodFigures, PriceRow, PriceSummary, WarmupInfo,
};
use crate::model::names;
use crate::research::data::{
    self, Bars, DataConfig, DataError, DataRequest, MarketData, PriceSeries, Provenance,
    SourceChoice,
};
use crate::research::indicators::{IndicatorColumn, IndicatorError, IndicatorSpec};
use crate::research::warmup::{self, WarmupRecord};
use crate::tools::Caps;
use crate::tools::registry::DuplicateTool;
use crate::tools::{Registry, ToolContext, ToolError, TypedTool};

/// Characters of row JSON one `get_market_data` page holds (as `read_file`).
const PAGE_CHARS: usize = 9_000;
/// Rows of indicator history `technical_indicator` returns by default / at most.
const DEFAULT_TAIL: usize = 10;
const MAX_TAIL: usize = 60;

/// Registers both tools, sharing one data service whose online answers are
/// cached under `<cache_dir>/market/`.
pub fn register_market_tools(
    registry: &mut Registry,
    cache_dir: PathBuf,
) -> Result<(), DuplicateTool> {
    register_market_tools_with(
        registry,
        DataConfig {
            cache_dir: Some(cache_dir),
            ..DataConfig::default()
        },
    )
}

/// As [`register_market_tools`] with a full data configuration (tests use
/// an offline one or loopback base URLs). The session workspace is added to
/// the local folders on every call.
pub fn register_market_tools_with(
    registry: &mut Registry,
    config: DataConfig,
) -> Result<(), DuplicateTool> {
    register_family(registry, Family::Market, &ToolEnv::new(config))
}

/// Rows of a market-data page a small model is shown (docs §2.7): its
/// summary covers the whole range, `next_offset` pages on.
const LEAN_ROWS: usize = 10;
/// Rows of an indicator's history a small model is shown.
const LEAN_TAIL: usize = 5;

/// A market-data page for a small model: the first [`LEAN_ROWS`] rows (the
/// paging fields say so) and the provenance's source only.
fn lean_page(output: &Value) -> Option<Value> {
    let mut o = output.as_object()?.clone();
    brief_provenance(&mut o);
    let offset = o.get("offset").and_then(Value::as_u64)?;
    let total = o.get("total").and_then(Value::as_u64)?;
    if let Some(Value::Array(rows)) = o.get_mut("rows")
        && rows.len() > LEAN_ROWS
    {
        rows.truncate(LEAN_ROWS);
        let next = offset + LEAN_ROWS as u64;
        o.insert("returned".into(), json!(LEAN_ROWS));
        o.insert("next_offset".into(), json!(next));
        o.insert("complete".into(), json!(next >= total));
    }
    Some(Value::Object(o))
}

/// `provenance` as its source alone: the rest (location, fetch time, the
/// adjustments' wording, dropped rows) is for the reader of the trace.
fn brief_provenance(o: &mut serde_json::Map<String, Value>) {
    if let Some(p) = o.get_mut("provenance") {
        let source = p.get("source").cloned().unwrap_or(Value::Null);
        *p = json!({ "source": source });
    }
}

/// One ticker per call (docs §2.12): `"AAPL,MSFT,IBM"` is refused with
/// what to do instead, rather than read as one odd symbol or a file name.
fn one_ticker<'a>(symbol: &'a str, tool: &str) -> Result<&'a str, ToolError> {
    // The indicator ranks several at once (docs §2.12.2); say how.
    let instead = if tool == names::TECHNICAL_INDICATOR {
        format!("call {tool} with them in `symbols` for a table ranked by value, or once for each")
    } else {
        format!("call {tool} once for each of them")
    };
    let lower = symbol.to_ascii_lowercase();
    if [".csv", ".parquet", ".pq"]
        .iter()
        .any(|e| lower.ends_with(e))
    {
        return Ok(symbol);
    }
    let parts: Vec<&str> = symbol
        .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.len() > 1 {
        return Err(ToolError::failed(
            "one_ticker_per_call",
            format!(
                "one ticker per call: `symbol` holds {} tickers ({}); {instead}",
                parts.len(),
                parts.join(", ")
            ),
        ));
    }
    Ok(symbol)
}

/// Parameters given under another name than the indicator's own
/// (`window` for RSI's `period`): read, and said (docs §2.2.1).
fn alias_warnings(indicator: &str, params: &Value) -> Vec<String> {
    let own = match indicator {
        "rsi" | "atr" => "period",
        "ema" => "span",
        "sma" | "bollinger" | "volatility" | "correlation" => "window",
        _ => return Vec::new(),
    };
    let Some(given) = params.as_object() else {
        return Vec::new();
    };
    if given.contains_key(own) {
        return Vec::new();
    }
    ["window", "period", "n", "length", "span"]
        .iter()
        .find_map(|k| {
            given
                .get(*k)
                .map(|v| format!("{indicator} takes `{own}`; `{k}` {v} was read as `{own}` {v}"))
        })
        .into_iter()
        .collect()
}

/// An optional date argument; blank is absent.
pub(super) fn opt_date(
    value: Option<&str>,
    key: &'static str,
) -> Result<Option<NaiveDate>, ToolError> {
    match value {
        None => Ok(None),
        Some(s) if s.trim().is_empty() => Ok(None),
        Some(s) => data::parse_date(key, s)
            .map(Some)
            .map_err(|e| ToolError::InvalidArguments(e.to_string())),
    }
}

/// The `source` argument, aliases included (`yfinance`, `csv`, …).
fn source_arg(value: Option<&str>) -> Result<SourceChoice, ToolError> {
    match value {
        None => Ok(SourceChoice::Auto),
        Some(s) => s
            .parse::<SourceChoice>()
            .map_err(|e| ToolError::InvalidArguments(e.to_string())),
    }
}

fn data_error(e: DataError) -> ToolError {
    ToolError::failed(e.code(), e.to_string())
}

fn indicator_error(e: IndicatorError) -> ToolError {
    ToolError::InvalidArguments(e.to_string())
}

/// The workspace's `data/` folder and the workspace itself, for `local`.
fn session_data(data: &MarketData, ctx: &ToolContext) -> MarketData {
    data.with_local_dirs(vec![ctx.workspace.clone(), ctx.workspace.join("data")])
}

pub(super) async fn fetch(
    data: &MarketData,
    ctx: &ToolContext,
    req: DataRequest,
) -> Result<PriceSeries, ToolError> {
    let md = session_data(data, ctx);
    tokio::select! {
        r = md.fetch(&req) => r.map_err(data_error),
        () = ctx.cancel.cancelled() => Err(ToolError::failed("cancelled", "the call was cancelled")),
    }
}

/// Rounds to `digits` decimals, and NaN / ±∞ to null, to keep pages short.
fn num(x: f64, digits: i32) -> Option<f64> {
    if !x.is_finite() {
        return None;
    }
    let scale = 10f64.powi(digits);
    Some((x * scale).round() / scale)
}

/// Rounds to 8 significant digits (indicators span 1e-4 to 1e3).
fn sig(x: f64) -> Value {
    if !x.is_finite() {
        return Value::Null;
    }
    if x == 0.0 {
        return json!(0.0);
    }
    let mag = x.abs().log10().floor() as i32;
    let scale = 10f64.powi(7 - mag);
    json!((x * scale).round() / scale)
}

fn row(b: &Bars, i: usize) -> PriceRow {
    let at = |col: &[f64]| col.get(i).copied().unwrap_or(f64::NAN);
    PriceRow(
        b.dates.get(i).map(ToString::to_string),
        num(at(&b.open), 6),
        num(at(&b.high), 6),
        num(at(&b.low), 6),
        num(at(&b.close), 6),
        num(at(&b.volume), 0),
    )
}

fn summary(b: &Bars) -> Option<PriceSummary> {
    if b.is_empty() {
        return None;
    }
    let n = b.len() - 1;
    let (min, max) = b
        .close
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), c| {
            (lo.min(*c), hi.max(*c))
        });
    Some(PriceSummary {
        first_date: b.dates[0].to_string(),
        last_date: b.dates[n].to_string(),
        first_close: num(b.close[0], 6),
        last_close: num(b.close[n], 6),
        min_close: num(min, 6),
        max_close: num(max, 6),
        total_return_pct: num((b.close[n] / b.close[0] - 1.0) * 100.0, 4),
    })
}

pub struct GetMarketData {
    data: Arc<MarketData>,
}

impl TypedTool for GetMarketData {
    type Args = MarketDataArgs;
    type Output = MarketDataOutput<Provenance>;

    const NAME: &'static str = names::GET_MARKET_DATA;
    const CAPS: Caps = Caps::READ_ONLY.served_as("market_data").planner();
    fn description(&self) -> &str {
        "Prices and returns: one ticker's daily bars over a date range (split- and dividend-adjusted), paged, with provenance; its summary gives the first and last close and the total return over the range. last_n gives the last N rows of the range (\"the last 20 trading days to D\": last_n 20, end D). Data: the embedded offline market (106 US stocks and 25 ETFs such as SPY, QQQ, TLT, GLD, 2000-01-03 to 2017-11-10), CSV or Parquet files in the workspace, Yahoo, Stooq."
    }
    fn lean_properties(&self) -> Option<&[&str]> {
        Some(&["symbol", "start", "end", "last_n", "offset"])
    }
    fn lean_result(&self, output: &Value) -> Option<Value> {
        lean_page(output)
    }
    async fn run(
        &self,
        args: MarketDataArgs,
        ctx: &ToolContext,
    ) -> Result<Self::Output, ToolError> {
        let symbol = one_ticker(nonempty(&args.symbol, "symbol")?, "get_market_data")?;
        let (start, end) = (
            opt_date(args.start.as_deref(), "start")?,
            opt_date(args.end.as_deref(), "end")?,
        );
        let mut argument_warnings = Vec::new();
        // `last_n: 0` is a small model's way of leaving it out.
        let last_n = match opt_usize(args.last_n, "last_n")? {
            Some(0) => {
                argument_warnings
                    .push("`last_n` 0 was read as no `last_n`: the whole range".to_string());
                None
            }
            n => n,
        };
        let source = source_arg(args.source.as_deref())?;
        let req = range_request(symbol, start, end, last_n).source(source);
        let mut series = fetch(&self.data, ctx, req).await?;
        // The range's rows only: an anchored request loads history
        // before its end, of which the last N rows are the range.
        let from = match (start, last_n) {
            (None, Some(n)) => {
                warmup::cut(&mut series, None, end);
                let b = &series.bars;
                if b.len() < n {
                    series.provenance.notes.push(format!(
                        "asked for the last {n} rows; the data holds {} up to {}",
                        b.len(),
                        end.map_or_else(|| "today".into(), |d| d.to_string())
                    ));
                }
                b.dates.get(b.len().saturating_sub(n)).copied()
            }
            _ => start,
        };
        warmup::cut(&mut series, from, end);
        let b = &series.bars;
        let total = b.len();
        let limit = opt_usize(args.limit, "limit")?.unwrap_or(usize::MAX).max(1);
        let offset = match opt_usize(args.offset, "offset")? {
            Some(o) => o,
            None => last_n.map_or(0, |n| total.saturating_sub(n)),
        };
        if offset > total {
            return Err(ToolError::InvalidArguments(format!(
                "offset {offset} is past the end ({total} rows)"
            )));
        }
        let rows = page(b, offset, limit);
        let returned = rows.len();
        let next = offset + returned;
        // The range's own figures on its closes alone: the return runs
        // from its first close, the drawdown's peak from it (docs §2.12.1).
        let period = period_figures(&b.close, &b.dates, 0..b.len(), false);
        let on_date = (start.is_some() && start == end && total > 0).then(|| {
            let PriceRow(date, open, high, low, close, volume) = row(b, 0);
            serde_json::Map::from_iter([
                ("date".to_string(), json!(date)),
                ("open".to_string(), json!(open)),
                ("high".to_string(), json!(high)),
                ("low".to_string(), json!(low)),
                ("close".to_string(), json!(close)),
                ("volume".to_string(), json!(volume)),
            ])
        });
        Ok(MarketDataOutput {
            on_date,
            period,
            status: "ok".into(),
            symbol: series.symbol.clone(),
            columns: ["date", "open", "high", "low", "close", "volume"]
                .map(String::from)
                .to_vec(),
            rows,
            total,
            offset,
            returned,
            next_offset: (next < total).then_some(next),
            complete: next >= total,
            summary: summary(b),
            provenance: series.provenance,
            argument_warnings,
        })
    }
}

/// The request for a range; "the last N rows to `end`" without a start is
/// anchored at the end (today without one) with N bars of history before it.
fn range_request(
    symbol: &str,
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
    last_n: Option<usize>,
) -> DataRequest {
    match (start, last_n) {
        (None, Some(n)) => {
            let anchor = end.unwrap_or_else(|| chrono::Utc::now().date_naive());
            DataRequest::new(symbol).range(Some(anchor), end).history(n)
        }
        _ => DataRequest::new(symbol).range(start, end),
    }
}

/// Rows `offset..` as whole records within the page budget (at least one).
fn page(b: &Bars, offset: usize, limit: usize) -> Vec<PriceRow> {
    let mut rows = Vec::new();
    let mut chars = 0;
    for i in offset..b.len() {
        if rows.len() >= limit {
            break;
        }
        let r = row(b, i);
        let len = serde_json::to_string(&r).map_or(0, |t| t.len()) + 1;
        if !rows.is_empty() && chars + len > PAGE_CHARS {
            break;
        }
        chars += len;
        rows.push(r);
    }
    rows
}

pub struct TechnicalIndicator {
    data: Arc<MarketData>,
}

impl TypedTool for TechnicalIndicator {
    type Args = IndicatorArgs;
    type Output = IndicatorAnswer<Provenance>;

    const NAME: &'static str = names::TECHNICAL_INDICATOR;
    const CAPS: Caps = Caps::READ_ONLY.served_as("indicators").planner();
    fn description(&self) -> &str {
        "An indicator on a date: a ticker's sma, ema, rsi, macd, bollinger, atr, volatility, returns, log_returns, drawdown, correlation or momentum. The answer leads with `period`, the range's own figures (total_return, annualized_volatility, max_drawdown_window with peak and trough dates), then the latest value, each series' lowest and highest value with its date, a short history and provenance. Values are computed on history before start (warm-up), so a value on a date does not depend on start; a one-day range (start = end), or a start without an end, leads with that day's value in `on_date`. Several tickers: `symbols` [\"AAPL\", \"MSFT\", \"IBM\"] returns `ranked`, a table highest value first (e.g. which was most volatile on a date)."
    }
    fn lean_properties(&self) -> Option<&[&str]> {
        Some(&["symbol", "symbols", "indicator", "params", "start", "end"])
    }
    fn lean_description(&self) -> Option<&str> {
        Some(
            "A ticker's sma, ema, rsi, macd, bollinger, atr, volatility, returns, log_returns, drawdown, correlation or momentum over start..end. The answer leads with `period`: the range's total_return, annualized_volatility and max_drawdown_window (peak and trough dates); a one-day range (start = end) or a start alone leads with `on_date`. `symbols` [\"AAPL\", \"MSFT\"] returns `ranked`, highest first.",
        )
    }
    fn lean_result(&self, output: &Value) -> Option<Value> {
        let mut o = output.as_object()?.clone();
        brief_provenance(&mut o);
        o.remove("other_provenance");
        if let Some(Value::Array(tail)) = o.get_mut("tail") {
            let cut = tail.len().saturating_sub(LEAN_TAIL);
            tail.drain(..cut);
        }
        Some(Value::Object(o))
    }
    async fn run(&self, args: IndicatorArgs, ctx: &ToolContext) -> Result<Self::Output, ToolError> {
        let list = symbol_list(&args.symbol, args.symbols.as_ref(), |s| {
            one_ticker(s, names::TECHNICAL_INDICATOR).map(drop)
        })?;
        match list.as_slice() {
            [] => Err(ToolError::InvalidArguments(
                "'symbol' must be a non-empty string (or name several in 'symbols')".into(),
            )),
            [one] => Ok(IndicatorAnswer::One(Box::new(
                self.one(one, &args, ctx).await?,
            ))),
            several => {
                // The arguments are checked once: a bad indicator is the
                // call's error, not each symbol's.
                let name = nonempty(&args.indicator, "indicator")?;
                let params = args.params.clone().map_or(Value::Null, Value::Object);
                let spec = IndicatorSpec::parse(name, &params).map_err(indicator_error)?;
                let answers = futures_util::future::join_all(
                    several
                        .iter()
                        .map(|s| async { (s.clone(), self.one(s, &args, ctx).await) }),
                )
                .await;
                market_rank::ranked(spec.name(), spec.params_json(), answers)
                    .map(|t| IndicatorAnswer::Ranked(Box::new(t)))
            }
        }
    }
}

impl TechnicalIndicator {
    /// One symbol's answer.
    async fn one(
        &self,
        symbol: &str,
        args: &IndicatorArgs,
        ctx: &ToolContext,
    ) -> Result<IndicatorOutput<Provenance>, ToolError> {
        let name = nonempty(&args.indicator, "indicator")?;
        let params = args.params.clone().map_or(Value::Null, Value::Object);
        let spec = IndicatorSpec::parse(name, &params).map_err(indicator_error)?;
        let argument_warnings = alias_warnings(spec.name(), &params);
        let (start, end) = (
            opt_date(args.start.as_deref(), "start")?,
            opt_date(args.end.as_deref(), "end")?,
        );
        let source = source_arg(args.source.as_deref())?;
        let tail = opt_usize(args.tail, "tail")?
            .unwrap_or(DEFAULT_TAIL)
            .clamp(1, MAX_TAIL);
        // Warm-up (docs §7.4.1): the values are computed on history
        // before the start, which then cuts only what is shown.
        let need = spec.warmup();
        let request = |sym: &str| {
            DataRequest::new(sym)
                .range(start, end)
                .source(source)
                .history(need.bars())
        };
        let mut series = fetch(&self.data, ctx, request(symbol)).await?;
        let mut other = match spec.needs_other() {
            Some(with) => Some(fetch(&self.data, ctx, request(with)).await?),
            None => None,
        };
        let b = &series.bars;
        let aligned = other.as_ref().map(|o| b.aligned_close(&o.bars));
        let cols = spec
            .compute(&b.high, &b.low, &b.close, aligned.as_deref())
            .map_err(indicator_error)?;
        let mut loaded = vec![(series.symbol.as_str(), b)];
        loaded.extend(other.as_ref().map(|o| (o.symbol.as_str(), &o.bars)));
        let record = WarmupRecord::of(need, start, &loaded);
        let from = warmup::bars_before(b, start);
        if from >= b.len() {
            return Err(ToolError::failed(
                "no_data",
                format!(
                    "{} has no bars from {} to {} (its data ends {}); pick dates within its history",
                    series.symbol,
                    start.map_or_else(|| "-".into(), |d| d.to_string()),
                    end.map_or_else(|| "today".into(), |d| d.to_string()),
                    b.last_date().map_or_else(|| "-".into(), |d| d.to_string()),
                ),
            ));
        }
        // The range's own figures are its closes alone, as
        // get_market_data's are: one "return over 2008" for the desk,
        // whichever tool a model asks. Only the drawdown indicator reads
        // the warm-up, to name a peak before the range (docs §2.12.1).
        let upto = end.map_or(b.len(), |e| b.dates.partition_point(|d| *d <= e));
        let period = period_figures(
            &b.close,
            &b.dates,
            from..upto,
            matches!(spec, IndicatorSpec::Drawdown),
        );
        warmup::cut(&mut series, start, end);
        if let Some(o) = other.as_mut() {
            warmup::cut(o, start, end);
        }
        let cols: Vec<IndicatorColumn> = cols
            .into_iter()
            .map(|c| IndicatorColumn {
                values: c
                    .values
                    .get(from..)
                    .map(<[f64]>::to_vec)
                    .unwrap_or_default(),
                name: c.name,
            })
            .collect();
        let b = &series.bars;
        let mut columns = vec!["date".to_string()];
        columns.extend(cols.iter().map(|c| c.name.clone()));
        let (tail_rows, latest) = tail_and_latest(b, &cols, tail);
        no_value_is_no_answer(&series.symbol, spec.name(), &latest, &record)?;
        let warmup_nan_rows = cols
            .first()
            .map_or(0, |c| c.values.iter().take_while(|v| v.is_nan()).count());
        // A start without an end names a day as a one-day range does:
        // measured, asked for MSFT's RSI "on 2009-03-09", the 1.5B model
        // called with that start alone and answered the range's latest
        // value, eight years on (docs §2.12).
        let on_date = match (start, end) {
            (Some(s), Some(e)) if s == e => Some(latest.clone()),
            (Some(_), None) => values_at(b, &cols, 0),
            _ => None,
        };
        Ok(IndicatorOutput {
            on_date,
            period,
            status: "ok".into(),
            symbol: series.symbol.clone(),
            indicator: spec.name().to_string(),
            params: spec.params_json(),
            latest,
            extremes: extremes(b, &cols),
            columns,
            tail: tail_rows,
            rows: b.len(),
            warmup_nan_rows,
            warmup: Some(warmup_info(record)),
            provenance: series.provenance,
            other_provenance: other.map(|o| o.provenance),
            argument_warnings,
        })
    }
}

/// A latest row without a single value is not an answer (docs §2.12): a
/// one-day window is computed on warm-up history, so this means too little
/// history before the date, and the error says so instead of `ok` with null.
fn no_value_is_no_answer(
    symbol: &str,
    indicator: &str,
    latest: &serde_json::Map<String, Value>,
    record: &WarmupRecord,
) -> Result<(), ToolError> {
    let has_value = latest.iter().any(|(k, v)| k != "date" && !v.is_null());
    if has_value {
        return Ok(());
    }
    let date = latest
        .get("date")
        .and_then(Value::as_str)
        .unwrap_or("the last day");
    let note = record
        .note
        .clone()
        .unwrap_or_else(|| "there is too little history before it".to_string());
    Err(ToolError::failed(
        "no_value",
        format!(
            "{indicator} of {symbol} has no value on {date}: {note}; pick a later date or a shorter window"
        ),
    ))
}

/// The last `tail` rows (`[date, value…]`) and the latest values by name.
fn tail_and_latest(
    b: &Bars,
    cols: &[IndicatorColumn],
    tail: usize,
) -> (Vec<Value>, serde_json::Map<String, Value>) {
    let n = b
        .len()
        .min(cols.iter().map(|c| c.values.len()).min().unwrap_or(0));
    let rows = (n.saturating_sub(tail)..n)
        .map(|i| {
            let mut r = vec![Value::from(b.dates[i].to_string())];
            r.extend(cols.iter().map(|c| sig(c.values[i])));
            Value::Array(r)
        })
        .collect();
    let latest = n
        .checked_sub(1)
        .and_then(|last| values_at(b, cols, last))
        .unwrap_or_default();
    (rows, latest)
}

/// Row `i`'s date and values, when it has them all.
fn values_at(
    b: &Bars,
    cols: &[IndicatorColumn],
    i: usize,
) -> Option<serde_json::Map<String, Value>> {
    let mut out = serde_json::Map::new();
    out.insert("date".into(), Value::from(b.dates.get(i)?.to_string()));
    for c in cols {
        out.insert(c.name.clone(), sig(*c.values.get(i)?));
    }
    Some(out)
}

/// The research record as the tools' contract spells it.
pub fn warmup_info(r: WarmupRecord) -> WarmupInfo {
    WarmupInfo {
        bars_needed: r.bars_needed,
        bars_used: r.bars_used,
        note: r.note,
    }
}

/// Each series' lowest and highest value over the range, with its date:
/// "the deepest drawdown of 2008" is a question about the whole range, not
/// the latest row.
fn extremes(b: &Bars, cols: &[IndicatorColumn]) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    for c in cols {
        let mut lo: Option<(usize, f64)> = None;
        let mut hi: Option<(usize, f64)> = None;
        for (i, &x) in c.values.iter().enumerate() {
            if !x.is_finite() {
                continue;
            }
            if lo.is_none_or(|(_, m)| x < m) {
                lo = Some((i, x));
            }
            if hi.is_none_or(|(_, m)| x > m) {
                hi = Some((i, x));
            }
        }
        if let (Some((li, l)), Some((hi_i, h))) = (lo, hi) {
            let e = Extremes {
                min: sig(l).as_f64(),
                min_date: b.dates.get(li).map(ToString::to_string),
                max: sig(h).as_f64(),
                max_date: b.dates.get(hi_i).map(ToString::to_string),
            };
            out.insert(
                c.name.clone(),
                serde_json::to_value(e).unwrap_or(Value::Null),
            );
        }
    }
    out
}

/// How a period's volatility is annualised, said in every answer.
const VOLATILITY_BASIS: &str =
    "sample standard deviation (ddof 1) of the daily simple returns × √252";

/// The figures of the bars `window` of `close` (docs §2.12.1): the return
/// from the window's first close to its last, the annualised volatility
/// of the daily returns between them, the deepest drawdown within the
/// window, and with `earlier` the deepest against the running peak of all
/// the closes before it too, when that peak lies before the window.
fn period_figures(
    close: &[f64],
    dates: &[NaiveDate],
    window: std::ops::Range<usize>,
    earlier: bool,
) -> Option<PeriodFigures> {
    use crate::research::backtest::metrics;
    if window.is_empty() {
        return None;
    }
    let inside = close.get(window.clone())?;
    let (first, last) = (window.start, window.end.checked_sub(1)?);
    // The window's own closes: with the close before it, the return of
    // "2008" would hold 2 January's move from 2007 too, and differ from
    // get_market_data's summary of the same range.
    let base = first;
    let with_base = inside;
    let day = |i: usize| dates.get(i).map(ToString::to_string).unwrap_or_default();
    let returns: Vec<f64> = with_base.windows(2).map(|w| w[1] / w[0] - 1.0).collect();
    let sd = metrics::std(&returns);
    let spans = |d: metrics::DrawdownSpan, offset: usize| DrawdownDates {
        depth: d.depth,
        peak: day(d.peak + offset),
        trough: day(d.trough + offset),
        recovery: d.recovery.map(|r| day(r + offset)),
    };
    let from_earlier = earlier
        .then(|| metrics::deepest_drawdown_since(close.get(..window.end)?, 0.0, first))
        .flatten()
        .filter(|d| d.peak < first)
        .map(|d| spans(d, 0));
    let deepest = metrics::deepest_drawdown(inside, 0.0);
    Some(PeriodFigures {
        first_date: day(first),
        first_close: *close.get(first)?,
        last_date: day(last),
        last_close: *close.get(last)?,
        bars: inside.len(),
        return_from: day(base),
        total_return: close.get(last)? / close.get(base)? - 1.0,
        max_drawdown: deepest.as_ref().map(|d| d.depth),
        daily_returns: returns.len(),
        annualized_volatility: (returns.len() >= 2).then(|| sd * 252f64.sqrt()),
        volatility_basis: VOLATILITY_BASIS.to_string(),
        max_drawdown_window: deepest.map(|d| spans(d, first)),
        drawdown_from_earlier_peak: from_earlier,
    })
}

// Each is made of the shared market data alone.
built_from_data!(GetMarketData, TechnicalIndicator);

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(root: &std::path::Path) -> ToolContext {
        crate::tools::test_context(root.to_path_buf(), root.join("ws"))
    }

    fn registry() -> Registry {
        let mut r = Registry::new();
        register_market_tools_with(&mut r, DataConfig::offline()).unwrap();
        r
    }

    async fn call(
        r: &Registry,
        tool: &str,
        args: Value,
        c: &ToolContext,
    ) -> Result<Value, ToolError> {
        let t = r.get(tool).unwrap();
        t.call(args, c)
            .await
            .map(|s| serde_json::from_str(&s).unwrap())
    }

    #[tokio::test]
    async fn pages_are_whole_records_within_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let r = registry();
        let t = r.get("get_market_data").unwrap();
        assert!(t.readonly() && !t.repeatable());
        let args = json!({"symbol": "AAPL", "start": "2001-01-01", "end": "2001-12-31"});
        let first = call(&r, "get_market_data", args.clone(), &c).await.unwrap();
        let total = first["total"].as_u64().unwrap();
        assert_eq!(total, 248, "AAPL trading days in 2001");
        let returned = first["returned"].as_u64().unwrap();
        assert!(returned > 0 && returned < total);
        assert!(first["rows"].to_string().len() <= PAGE_CHARS + 2);
        assert_eq!(first["next_offset"], returned);
        assert_eq!(first["complete"], false);
        assert_eq!(first["provenance"]["source"], "embedded");
        // Page on to the end; rows are contiguous.
        let mut offset = returned;
        let mut seen = returned;
        while offset < total {
            let mut a = args.clone();
            a["offset"] = json!(offset);
            let page = call(&r, "get_market_data", a, &c).await.unwrap();
            let n = page["returned"].as_u64().unwrap();
            seen += n;
            offset += n;
            assert_eq!(page["complete"], offset >= total);
        }
        assert_eq!(seen, total);
        let limited = call(
            &r,
            "get_market_data",
            json!({"symbol": "MSFT", "start": "2005-01-01", "end": "2005-02-01", "limit": 3}),
            &c,
        )
        .await
        .unwrap();
        assert_eq!(limited["returned"], 3);
        assert_eq!(limited["rows"][0][0], "2005-01-03");
    }

    #[tokio::test]
    async fn a_period_s_drawdown_is_measured_within_it_with_its_dates() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let r = registry();
        let out = call(
            &r,
            "technical_indicator",
            json!({"symbol": "SPY", "indicator": "drawdown", "start": "2008-01-01", "end": "2008-12-31"}),
            &c,
        )
        .await
        .unwrap();
        let p = &out["period"];
        // Independently: a plain loop over the embedded adjusted closes.
        let day = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok();
        let all = crate::research::data::embedded::load("SPY", None, day("2008-12-31")).unwrap();
        let (dates, close) = (&all.bars.dates, &all.bars.close);
        let from = dates.partition_point(|d| Some(*d) < day("2008-01-01"));
        let (mut peak, mut peak_i, mut worst) = (close[from], from, (0.0f64, from, from));
        for (i, &c) in close.iter().enumerate().skip(from) {
            if c > peak {
                (peak, peak_i) = (c, i);
            }
            if c / peak - 1.0 < worst.0 {
                worst = (c / peak - 1.0, peak_i, i);
            }
        }
        let w = &p["max_drawdown_window"];
        assert!(
            (w["depth"].as_f64().unwrap() - worst.0).abs() < 1e-12,
            "{p}"
        );
        assert_eq!(w["peak"], dates[worst.1].to_string());
        assert_eq!(w["trough"], dates[worst.2].to_string());
        assert!(w["recovery"].is_null(), "SPY ended 2008 below its peak");
        assert_eq!(
            (p["first_date"].as_str(), p["last_date"].as_str()),
            (Some("2008-01-02"), Some("2008-12-31"))
        );
        // The running peak over all the history: late 2007, before 2008.
        let e = &p["drawdown_from_earlier_peak"];
        assert!(e["peak"].as_str().unwrap() < "2008-01-01", "{e}");
        let top = close[..from].iter().cloned().fold(f64::MIN, f64::max);
        assert!((e["depth"].as_f64().unwrap() - (close[worst.2] / top - 1.0)).abs() < 1e-12);
        assert!(e["depth"].as_f64().unwrap() < w["depth"].as_f64().unwrap());
        // The return runs from the first close of 2008, as
        // get_market_data's summary does, not from the last of 2007.
        assert_eq!(p["return_from"], dates[from].to_string());
        let ret = close[close.len() - 1] / close[from] - 1.0;
        assert!((p["total_return"].as_f64().unwrap() - ret).abs() < 1e-12);
        assert!((ret - (close[close.len() - 1] / close[from - 1] - 1.0)).abs() > 1e-4);
        assert_eq!(p["daily_returns"], close.len() - from - 1);
        // The figures the issue quotes: -47.95 % within, -51.78 % from 2007.
        assert_eq!(format!("{:.2}", worst.0 * 100.0), "-47.95");
        // Every indicator carries them; only the drawdown, which reads all
        // the history, the figure from the earlier peak.
        let rsi = call(
            &r,
            "technical_indicator",
            json!({"symbol": "SPY", "indicator": "rsi", "start": "2008-01-01", "end": "2008-12-31"}),
            &c,
        )
        .await
        .unwrap();
        assert_eq!(rsi["period"]["max_drawdown_window"], *w);
        assert!(rsi["period"].get("drawdown_from_earlier_peak").is_none());
    }

    #[tokio::test]
    async fn indicators_report_latest_values_and_bad_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let r = registry();
        let out = call(
            &r,
            "technical_indicator",
            json!({"symbol": "IBM", "indicator": "macd", "end": "2010-12-31", "tail": 5}),
            &c,
        )
        .await
        .unwrap();
        assert_eq!(
            out["columns"],
            json!(["date", "macd", "signal", "histogram"])
        );
        assert_eq!(out["tail"].as_array().unwrap().len(), 5);
        assert_eq!(out["latest"]["date"], "2010-12-31");
        assert_eq!(out["params"]["slow"], 26);
        let corr = call(
            &r,
            "technical_indicator",
            json!({"symbol": "AAPL", "indicator": "correlation", "params": {"with": "MSFT", "window": 60}, "start": "2010-01-01", "end": "2012-12-31"}),
            &c,
        )
        .await
        .unwrap();
        let v = corr["latest"]["correlation"].as_f64().unwrap();
        assert!((-1.0..=1.0).contains(&v));

        // The extremes cover the whole range: AAPL's deepest 2008 drawdown
        // against a running peak computed here from the same closes, all
        // the history before 2008 included (warm-up, docs §7.4.1: the
        // peak of late 2007 counts).
        let dd = call(
            &r,
            "technical_indicator",
            json!({"symbol": "AAPL", "indicator": "drawdown", "start": "2008-01-01", "end": "2008-12-31", "tail": 3}),
            &c,
        )
        .await
        .unwrap();
        let day = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok();
        let all = crate::research::data::embedded::load("AAPL", None, day("2008-12-31")).unwrap();
        let from = all
            .bars
            .dates
            .partition_point(|d| Some(*d) < day("2008-01-01"));
        let (mut peak, mut deepest, mut highest) = (f64::MIN, (0.0f64, 0usize), f64::MIN);
        for (i, &close) in all.bars.close.iter().enumerate() {
            peak = peak.max(close);
            if i >= from {
                if close / peak - 1.0 < deepest.0 {
                    deepest = (close / peak - 1.0, i);
                }
                highest = highest.max(close / peak - 1.0);
            }
        }
        let e = &dd["extremes"]["drawdown"];
        assert!((e["min"].as_f64().unwrap() - deepest.0).abs() < 1e-7, "{e}");
        assert_eq!(e["min_date"], all.bars.dates[deepest.1].to_string());
        assert!(deepest.0 < -0.5, "2008 was deep: {}", deepest.0);
        assert!((e["max"].as_f64().unwrap() - highest).abs() < 1e-7, "{e}");
        assert_eq!(dd["warmup"]["bars_used"], from);
        assert!(dd["warmup"].get("bars_needed").is_none(), "all of it");
        let macd = &out["extremes"]["histogram"];
        let latest = out["latest"]["histogram"].as_f64().unwrap();
        assert!(macd["min"].as_f64().unwrap() <= latest && latest <= macd["max"].as_f64().unwrap());
        assert_eq!(corr["other_provenance"]["symbol"], "MSFT");
        let e = call(
            &r,
            "technical_indicator",
            json!({"symbol": "AAPL", "indicator": "kdj"}),
            &c,
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), "invalid_arguments");
        let e = call(
            &r,
            "get_market_data",
            json!({"symbol": "AAPL", "source": "tushare"}),
            &c,
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("valid sources"), "{e}");
    }

    #[tokio::test]
    async fn slips_in_the_arguments_are_refused_or_read_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let r = registry();
        for tool in ["get_market_data", "technical_indicator"] {
            let e = call(
                &r,
                tool,
                json!({"symbol": "AAPL,MSFT,IBM", "indicator": "rsi"}),
                &c,
            )
            .await
            .unwrap_err();
            assert_eq!(e.code(), "one_ticker_per_call");
            assert!(
                e.to_string().starts_with(
                    "one ticker per call: `symbol` holds 3 tickers (AAPL, MSFT, IBM); call "
                ),
                "{e}"
            );
        }
        // `window` for RSI's `period`: read, and said.
        let day = json!({"symbol": "AAPL", "indicator": "rsi", "start": "2008-01-25", "end": "2008-01-25"});
        let mut by_window = day.clone();
        by_window["params"] = json!({"window": 10});
        let mut by_period = day.clone();
        by_period["params"] = json!({"period": 10});
        let w = call(&r, "technical_indicator", by_window, &c)
            .await
            .unwrap();
        let p = call(&r, "technical_indicator", by_period, &c)
            .await
            .unwrap();
        assert_eq!(w["latest"]["rsi"], p["latest"]["rsi"]);
        assert!(
            w["latest"]["rsi"].is_number(),
            "a one-day window has its value: {w}"
        );
        assert_eq!(
            w["argument_warnings"],
            json!(["rsi takes `period`; `window` 10 was read as `period` 10"])
        );
        assert!(p.get("argument_warnings").is_none());
        // A day with too little history before it is an error, never ok with null.
        let first = crate::research::data::embedded::load("AAPL", None, None)
            .unwrap()
            .bars
            .dates[3]
            .to_string();
        let e = call(
            &r,
            "technical_indicator",
            json!({"symbol": "AAPL", "indicator": "rsi", "start": first, "end": first}),
            &c,
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), "no_value");
        assert!(
            e.to_string()
                .contains(&format!("rsi of AAPL has no value on {first}")),
            "{e}"
        );
    }

    #[tokio::test]
    async fn workspace_csv_files_are_the_local_source() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        std::fs::create_dir_all(c.workspace.join("data")).unwrap();
        std::fs::write(
            c.workspace.join("data/MYCO.csv"),
            "Date,Open,High,Low,Close,Volume\n2024-01-02,10,11,9,10.5,100\n2024-01-03,10.5,12,10,11,200\n",
        )
        .unwrap();
        let out = call(
            &registry(),
            "get_market_data",
            json!({"symbol": "MYCO", "source": "local"}),
            &c,
        )
        .await
        .unwrap();
        assert_eq!(out["total"], 2);
        assert_eq!(out["provenance"]["source"], "local");
        assert!(
            out["provenance"]["location"]
                .as_str()
                .unwrap()
                .ends_with("data/MYCO.csv")
        );
    }

    /// A huge `last_n` is refused with a clear invalid-argument error,
    /// never a panic (issue 35: chrono's day count overflowed).
    #[tokio::test]
    async fn a_huge_last_n_is_an_invalid_argument_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        for n in [
            json!(1_000_000_000_000_000u64),
            json!(10_000_000_000_000u64),
            json!(100_000_000u64),
        ] {
            let args = json!({"symbol": "SPY", "last_n": n, "end": "2010-01-04"});
            let e = call(&registry(), "get_market_data", args, &c)
                .await
                .unwrap_err();
            assert_eq!(e.code(), "invalid_arguments", "{n}: {e}");
            assert!(e.to_string().contains("ask for fewer rows"), "{e}");
        }
        // A count that reaches a date is served as before.
        let args = json!({"symbol": "SPY", "last_n": 5, "end": "2010-01-04"});
        let five = call(&registry(), "get_market_data", args, &c)
            .await
            .unwrap();
        assert_eq!(five["total"], 5, "{five}");
    }
}
