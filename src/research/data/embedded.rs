//! The embedded real dataset: daily prices of AAPL, MSFT, IBM (2000-03-01 to
//! 2013-03-01), GOOG (2004-08-19 on) and FB (2012-05-18 on), 12,154 rows,
//! from Quandl WIKI Prices (public domain) via bokeh-sampledata (see NOTICE
//! and `/assets/data`).
//!
//! The file's Open/High/Low/Close/Volume are unadjusted and contain split
//! gaps (AAPL 2000-06-21 and 2005-02-28, MSFT 2003-02-18); `Adj Close` is
//! split- and dividend-adjusted. On load every row is scaled by
//! `Adj Close / Close` ([`clean::apply_adj_close`]), which removes the gaps
//! and keeps real moves (AAPL's -52 % on 2000-09-29 stays).

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::{Arc, OnceLock};

use chrono::{NaiveDate, Utc};

use super::clean::{self, ADJ_CLOSE_NOTE, DropReport};
use super::local;
use super::market::{Market, us_base};
use super::{Bars, DataError, PriceSeries, Provenance, Source};

/// The gzip-compressed CSV, compiled in.
const GZ: &[u8] = include_bytes!("../../../assets/data/stocks_daily.csv.gz");

/// Where the data lives in the source tree, for provenance.
pub const LOCATION: &str = "embedded:assets/data/stocks_daily.csv.gz";
/// Attribution, also in NOTICE.
pub const ATTRIBUTION: &str = "Quandl WIKI Prices (public domain), via bokeh-sampledata";

/// The tickers in the set and their documented row counts.
pub const TICKERS: [(&str, usize); 5] = [
    ("AAPL", 3270),
    ("FB", 196),
    ("GOOG", 2148),
    ("IBM", 3270),
    ("MSFT", 3270),
];

/// A calendar date as (year, month, day).
type Ymd = (i32, u32, u32);

/// Each ticker's first and last date, so that whether the set covers a
/// range is known without decompressing it (a test holds them to the data).
const SPANS: [(&str, Ymd, Ymd); 5] = [
    ("AAPL", (2000, 3, 1), (2013, 3, 1)),
    ("FB", (2012, 5, 18), (2013, 3, 1)),
    ("GOOG", (2004, 8, 19), (2013, 3, 1)),
    ("IBM", (2000, 3, 1), (2013, 3, 1)),
    ("MSFT", (2000, 3, 1), (2013, 3, 1)),
];

/// Whether the set holds `symbol` over the whole of `[start, end]` (no
/// slack for closed days: a caller may rely on a `true`).
pub fn spans(symbol: &str, start: NaiveDate, end: NaiveDate) -> bool {
    let base = us_base(symbol);
    let date = |(y, m, d): Ymd| NaiveDate::from_ymd_opt(y, m, d);
    SPANS.iter().any(|&(t, first, last)| {
        t == base && date(first).is_some_and(|f| f <= start) && date(last).is_some_and(|l| end <= l)
    })
}

struct Loaded {
    by_ticker: BTreeMap<String, (Bars, DropReport)>,
}

/// Why the embedded dataset does not load (a broken build). Kept once per
/// process and handed to every caller, hence shared sources.
#[derive(Clone, Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error("gunzip: {0}")]
    Gunzip(Arc<std::io::Error>),
    #[error("header: {0}")]
    Header(Arc<csv::Error>),
    #[error("unexpected header {0}")]
    UnexpectedHeader(String),
    #[error("line {line}: {source}")]
    Record {
        line: usize,
        source: Arc<csv::Error>,
    },
    #[error("line {line}, {column}: {source}")]
    Number {
        line: usize,
        column: &'static str,
        source: std::num::ParseFloatError,
    },
    #[error("line {line}, Date: {source}")]
    Date {
        line: usize,
        source: chrono::ParseError,
    },
}

static DATA: OnceLock<Result<Loaded, EmbeddedError>> = OnceLock::new();

fn load_all() -> Result<Loaded, EmbeddedError> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(GZ)
        .read_to_string(&mut text)
        .map_err(|e| EmbeddedError::Gunzip(Arc::new(e)))?;
    let mut rdr = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let header = rdr
        .headers()
        .map_err(|e| EmbeddedError::Header(Arc::new(e)))?
        .clone();
    let want = [
        "Ticker",
        "Date",
        "Open",
        "High",
        "Low",
        "Close",
        "Volume",
        "Adj Close",
    ];
    if header.iter().collect::<Vec<_>>() != want {
        return Err(EmbeddedError::UnexpectedHeader(format!("{header:?}")));
    }
    let mut raw: BTreeMap<String, (Bars, Vec<f64>)> = BTreeMap::new();
    for (i, rec) in rdr.records().enumerate() {
        let line = i + 2;
        let rec = rec.map_err(|e| EmbeddedError::Record {
            line,
            source: Arc::new(e),
        })?;
        let field = |k: usize| rec.get(k).unwrap_or("");
        // The local loader's fast paths (same results as str::parse and
        // the %Y-%m-%d parser): this runs on every backtest's first load.
        let num = |k: usize| -> Result<f64, EmbeddedError> {
            match local::plain_decimal(field(k)) {
                Some(x) => Ok(x),
                None => field(k)
                    .parse::<f64>()
                    .map_err(|source| EmbeddedError::Number {
                        line,
                        column: want[k],
                        source,
                    }),
            }
        };
        let date = match local::iso_date(field(1)) {
            Some(d) => d,
            None => NaiveDate::parse_from_str(field(1), "%Y-%m-%d")
                .map_err(|source| EmbeddedError::Date { line, source })?,
        };
        let entry = raw.entry(field(0).to_string()).or_default();
        entry
            .0
            .push(date, num(2)?, num(3)?, num(4)?, num(5)?, num(6)?);
        entry.1.push(num(7)?);
    }
    let by_ticker = raw
        .into_iter()
        .map(|(t, (mut bars, adj))| {
            clean::apply_adj_close(&mut bars, &adj);
            let dropped = clean::sanitize(&mut bars);
            (t, (bars, dropped))
        })
        .collect();
    Ok(Loaded { by_ticker })
}

fn loaded() -> Result<&'static Loaded, DataError> {
    DATA.get_or_init(load_all)
        .as_ref()
        .map_err(|e| DataError::Embedded(e.clone()))
}

/// The tickers the set holds, sorted.
pub fn symbols() -> Vec<&'static str> {
    TICKERS.iter().map(|(t, _)| *t).collect()
}

/// Whether the set has this symbol (`AAPL`, `aapl`, `AAPL.US`).
pub fn has(symbol: &str) -> bool {
    let base = us_base(symbol);
    TICKERS.iter().any(|(t, _)| *t == base)
}

/// The first and last date held for a symbol.
pub fn coverage(symbol: &str) -> Result<Option<(NaiveDate, NaiveDate)>, DataError> {
    let data = loaded()?;
    Ok(data
        .by_ticker
        .get(&us_base(symbol))
        .and_then(|(b, _)| Some((b.first_date()?, b.last_date()?))))
}

/// The whole adjusted history of a symbol.
pub fn bars(symbol: &str) -> Result<Bars, DataError> {
    let data = loaded()?;
    data.by_ticker
        .get(&us_base(symbol))
        .map(|(b, _)| b.clone())
        .ok_or_else(|| not_held(symbol))
}

fn not_held(symbol: &str) -> DataError {
    DataError::NotFound {
        loader: Source::Embedded,
        symbol: symbol.to_string(),
        detail: format!("the embedded set holds {} only", symbols().join(", ")),
    }
}

/// A symbol's adjusted bars within `[start, end]`, with provenance.
/// An empty range is returned as an empty series (callers decide).
pub fn load(
    symbol: &str,
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
) -> Result<PriceSeries, DataError> {
    let data = loaded()?;
    let (all, dropped) = data
        .by_ticker
        .get(&us_base(symbol))
        .ok_or_else(|| not_held(symbol))?;
    let mut bars = all.clone();
    bars.retain_range(start, end);
    let mut notes = Vec::new();
    if let Some(s) = dropped.summary() {
        notes.push(format!("{s} (whole history)"));
    }
    let provenance = Provenance {
        symbol: symbol.trim().to_string(),
        market: Market::UsEquity,
        source: Source::Embedded,
        requested_source: Source::Embedded.as_str().to_string(),
        location: LOCATION.to_string(),
        fetched_at: Utc::now(),
        from_cache: false,
        rows: bars.len(),
        first_date: bars.first_date(),
        last_date: bars.last_date(),
        adjustments: vec![ADJ_CLOSE_NOTE.to_string()],
        dropped: *dropped,
        notes,
        attempts: Vec::new(),
    };
    Ok(PriceSeries {
        symbol: symbol.trim().to_string(),
        bars,
        provenance,
        source_rows: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_every_ticker_with_documented_counts() {
        for (t, n) in TICKERS {
            assert_eq!(bars(t).unwrap().len(), n, "{t}");
        }
        assert!(has("aapl.us"));
        assert!(!has("TSLA"));
        let e = load("TSLA", None, None).unwrap_err();
        assert!(e.to_string().contains("AAPL, FB, GOOG, IBM, MSFT"), "{e}");
    }

    #[test]
    fn spans_match_the_data() {
        let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        assert_eq!(
            SPANS.map(|(t, _, _)| t),
            TICKERS.map(|(t, _)| t),
            "one span per ticker"
        );
        for (t, _, _) in SPANS {
            let (first, last) = coverage(t).unwrap().unwrap();
            assert!(spans(t, first, last), "{t}");
            assert!(!spans(t, first.pred_opt().unwrap(), last), "{t}");
            assert!(!spans(t, first, last.succ_opt().unwrap()), "{t}");
        }
        assert!(spans("aapl.us", d("2005-01-01"), d("2012-12-31")));
        assert!(!spans("TSLA", d("2005-01-01"), d("2006-01-01")));
    }
}
