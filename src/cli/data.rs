//! `vibedesk data SYMBOL [--from D] [--to D]`: daily bars as CSV on stdout
//! (or JSON with `--json`), with the provenance on stderr. The same data
//! service as the tools and the engine (docs §7.3): embedded set, local
//! CSV folders, Yahoo and Stooq with the on-disk cache. `vibedesk data
//! --list` shows the embedded offline market: its instruments, the
//! Treasury curve and the Fama–French factors, with the set's biases.

use std::path::PathBuf;

use serde_json::json;

use super::{CliError, exit};
use crate::research::backtest::artifacts::push_ohlcv_rows;
use crate::research::data::{self, DataConfig, DataRequest, MarketData, SourceChoice};
use crate::store::Paths;

#[derive(clap::Args, Debug)]
pub struct DataArgs {
    /// Ticker, e.g. AAPL, MSFT.US, 0700.HK, BTC-USD (or a CSV name with --source local).
    #[arg(required_unless_present = "list")]
    pub symbol: Option<String>,
    /// List the embedded offline market (ticker, kind, first and last date,
    /// rows; the rates and factors sets) instead of printing bars.
    #[arg(long, conflicts_with_all = ["from", "to", "source", "data_dirs", "offline"])]
    pub list: bool,
    /// First date, YYYY-MM-DD (default: start of history).
    #[arg(long = "from")]
    pub from: Option<String>,
    /// Last date, YYYY-MM-DD (default: today).
    #[arg(long = "to")]
    pub to: Option<String>,
    /// auto, embedded, local, yahoo (yfinance) or stooq.
    #[arg(long, default_value = "auto")]
    pub source: String,
    /// Folders for the local source (repeatable; default: ./data and .).
    #[arg(long = "data-dir")]
    pub data_dirs: Vec<PathBuf>,
    /// Print JSON (provenance and rows) instead of CSV.
    #[arg(long)]
    pub json: bool,
    /// Never use the online sources.
    #[arg(long)]
    pub offline: bool,
}

pub async fn data(args: DataArgs) -> Result<(), CliError> {
    let usage = |m: String| CliError::usage(m).of("data");
    let symbol = match (&args.symbol, args.list) {
        (_, true) => return list(args.json),
        (Some(s), false) => s.clone(),
        (None, false) => return Err(usage("give a SYMBOL, or --list".into())),
    };
    let parse = |field: &'static str, v: &Option<String>| {
        v.as_deref()
            .map(|s| data::parse_date(field, s))
            .transpose()
            .map_err(|e| usage(e.to_string()))
    };
    let (start, end) = (parse("--from", &args.from)?, parse("--to", &args.to)?);
    let source: SourceChoice = args.source.parse().map_err(|e| usage(format!("{e}")))?;
    let local_dirs = if args.data_dirs.is_empty() {
        vec![PathBuf::from("data"), PathBuf::from(".")]
    } else {
        args.data_dirs.clone()
    };
    let md = MarketData::new(DataConfig {
        cache_dir: Paths::from_env().map(|p| p.cache_dir),
        local_dirs,
        online: !args.offline,
        ..DataConfig::default()
    });
    let series = md
        .fetch(&DataRequest::new(symbol).range(start, end).source(source))
        .await
        .map_err(|e| {
            let code = if e.is_fatal() {
                exit::USAGE
            } else {
                exit::FAILED
            };
            CliError::new(code, e).of("data")
        })?;
    let b = &series.bars;
    let p = &series.provenance;
    eprintln!(
        "{}: {} rows {} to {} from {} ({}){}",
        series.symbol,
        b.len(),
        p.first_date
            .map(|d| d.to_string())
            .unwrap_or_else(|| "-".into()),
        p.last_date
            .map(|d| d.to_string())
            .unwrap_or_else(|| "-".into()),
        p.source,
        p.location,
        if p.from_cache { ", cached" } else { "" }
    );
    for n in &p.notes {
        eprintln!("note: {n}");
    }
    if args.json {
        let rows: Vec<serde_json::Value> = (0..b.len())
            .map(|i| {
                json!([
                    b.dates[i].to_string(),
                    b.open[i],
                    b.high[i],
                    b.low[i],
                    b.close[i],
                    if b.volume[i].is_finite() {
                        json!(b.volume[i])
                    } else {
                        serde_json::Value::Null
                    }
                ])
            })
            .collect();
        println!(
            "{}",
            json!({"symbol": series.symbol, "columns": ["date", "open", "high", "low", "close", "volume"], "rows": rows, "provenance": p})
        );
    } else {
        let mut buf = Vec::with_capacity(b.len() * 64 + 40);
        buf.extend_from_slice(b"date,open,high,low,close,volume\n");
        push_ohlcv_rows(&mut buf, b);
        use std::io::Write;
        if std::io::stdout().write_all(&buf).is_err() {
            // The reader went away (a closed pipe): nothing more to say.
            return Err(CliError::quiet(exit::FAILED));
        }
    }
    Ok(())
}

/// The offline universe, its rates and factors, as a table (or JSON).
fn list(as_json: bool) -> Result<(), CliError> {
    use crate::research::data::{embedded, factors, rates};
    let broken = |e: data::DataError| CliError::new(exit::FAILED, e).of("data");
    let mut all: Vec<&embedded::Instrument> =
        embedded::universe().map_err(broken)?.iter().collect();
    all.sort_by(|a, b| (a.kind, &a.ticker).cmp(&(b.kind, &b.ticker)));
    let curve = rates::curve().map_err(broken)?;
    let ff = factors::monthly().map_err(broken)?;
    let rows: usize = all.iter().map(|x| x.rows).sum();
    let stocks = all
        .iter()
        .filter(|x| x.kind == embedded::Kind::Stock)
        .count();
    let span = |first: Option<String>, last: Option<String>| {
        format!(
            "{} to {}",
            first.unwrap_or_default(),
            last.unwrap_or_default()
        )
    };
    let market_span = span(
        all.iter().map(|x| x.first).min().map(|d| d.to_string()),
        all.iter().map(|x| x.last).max().map(|d| d.to_string()),
    );
    let curve_span = span(
        curve.first().map(|d| d.date.to_string()),
        curve.last().map(|d| d.date.to_string()),
    );
    let ff_span = span(
        ff.months
            .first()
            .map(|m| m.month.format("%Y-%m").to_string()),
        ff.months
            .last()
            .map(|m| m.month.format("%Y-%m").to_string()),
    );
    let rates_line = format!(
        "{} days, {curve_span}, tenors 1month to 30year; the 3-month yield is the backtests' risk-free rate ({})",
        curve.len(),
        rates::ATTRIBUTION
    );
    let factors_line = format!(
        "{} months, {ff_span}: MktRF, SMB, HML, Mom, RF and {} portfolios ({})",
        ff.months.len(),
        ff.portfolios.len(),
        factors::ATTRIBUTION
    );
    if as_json {
        println!(
            "{}",
            json!({"instruments": all, "rows": rows, "span": market_span,
                   "adjustment": embedded::ADJUSTMENT_NOTE, "bias": embedded::BIAS_NOTE,
                   "source": embedded::ATTRIBUTION,
                   "rates": {"name": "us_treasury_curve", "days": curve.len(), "span": curve_span, "about": rates_line},
                   "factors": {"name": "fama_french_monthly", "months": ff.months.len(), "span": ff_span,
                               "portfolios": ff.portfolios, "about": factors_line}})
        );
        return Ok(());
    }
    let mut out = format!(
        "The embedded offline market: {} instruments ({stocks} stocks, {} ETFs), {rows} daily bars, {market_span}.\n\
         Prices: {}.\nSource: {}.\nBias: {}.\n\n{:<7} {:<5} {:<10} {:<10} {:>5}\n",
        all.len(),
        all.len() - stocks,
        embedded::ADJUSTMENT_NOTE,
        embedded::ATTRIBUTION,
        embedded::BIAS_NOTE,
        "ticker",
        "kind",
        "first",
        "last",
        "rows"
    );
    for x in &all {
        out.push_str(&format!(
            "{:<7} {:<5} {} {} {:>5}\n",
            x.ticker,
            x.kind.as_str(),
            x.first,
            x.last,
            x.rows
        ));
    }
    out.push_str(&format!(
        "\nRates: {rates_line}.\nFactors: {factors_line}.\n"
    ));
    use std::io::Write;
    if std::io::stdout().write_all(out.as_bytes()).is_err() {
        return Err(CliError::quiet(exit::FAILED));
    }
    Ok(())
}
