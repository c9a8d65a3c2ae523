//! `vibedesk data SYMBOL [--from D] [--to D]`: daily bars as CSV on stdout
//! (or JSON with `--json`), with the provenance on stderr. The same data
//! service as the tools and the engine (docs §7.3): embedded set, local
//! CSV folders, Yahoo and Stooq with the on-disk cache.

use std::path::PathBuf;

use serde_json::json;

use super::{CliError, exit};
use crate::research::backtest::artifacts::push_ohlcv_rows;
use crate::research::data::{self, DataConfig, DataRequest, MarketData, SourceChoice};
use crate::store::Paths;

#[derive(clap::Args, Debug)]
pub struct DataArgs {
    /// Ticker, e.g. AAPL, MSFT.US, 0700.HK, BTC-USD (or a CSV name with --source local).
    pub symbol: String,
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
        .fetch(
            &DataRequest::new(args.symbol.clone())
                .range(start, end)
                .source(source),
        )
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
