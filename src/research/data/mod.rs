//! Market data for research and backtests (docs §7.3).
//!
//! Sources: the embedded offline market ([`embedded`], always available: 106
//! US stocks and 25 ETFs, 2000–2017), the user's own CSV files ([`local`],
//! parsed into a [`table`]), and two online loaders ([`online`]: Yahoo chart
//! JSON and Stooq CSV) with an on-disk cache ([`cache`]). [`MarketData`] picks
//! among them by symbol shape and availability ([`market`]). Every series is
//! split- and dividend-adjusted where the source gives an adjusted close (the
//! embedded set comes adjusted), passed through the OHLC sanity filter
//! ([`clean`]), and carries its [`Provenance`]. Beside the prices, the
//! embedded US Treasury curve ([`rates`], the risk-free rate) and monthly
//! Fama–French factors ([`factors`]).
//!
//! Series are plain columns ([`Bars`]); the backtest aligns them on a union
//! calendar and forward-fills (docs §7.4), so loaders never fill gaps.

pub mod bars_cache;
pub mod cache;
pub mod clean;
pub mod embedded;
pub mod factors;
pub mod local;
pub mod market;
pub mod online;
pub mod parquet_file;
pub mod rates;
mod service;
pub mod table;

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

pub use clean::DropReport;
pub use market::{Market, detect_market};
pub use service::{
    DataConfig, DataRequest, MarketData, PlanStep, Unavailable, Universe, history_days,
};

/// Daily OHLCV bars as parallel columns, sorted by date once cleaned.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Bars {
    pub dates: Vec<NaiveDate>,
    pub open: Vec<f64>,
    pub high: Vec<f64>,
    pub low: Vec<f64>,
    pub close: Vec<f64>,
    /// Shares traded (scaled inversely to the price adjustment); NaN when the
    /// source has no volume.
    pub volume: Vec<f64>,
}

impl Bars {
    pub fn with_capacity(n: usize) -> Self {
        Bars {
            dates: Vec::with_capacity(n),
            open: Vec::with_capacity(n),
            high: Vec::with_capacity(n),
            low: Vec::with_capacity(n),
            close: Vec::with_capacity(n),
            volume: Vec::with_capacity(n),
        }
    }

    pub fn len(&self) -> usize {
        self.dates.len()
    }

    pub fn is_empty(&self) -> bool {
        self.dates.is_empty()
    }

    pub fn push(
        &mut self,
        date: NaiveDate,
        open: f64,
        high: f64,
        low: f64,
        close: f64,
        volume: f64,
    ) {
        self.dates.push(date);
        self.open.push(open);
        self.high.push(high);
        self.low.push(low);
        self.close.push(close);
        self.volume.push(volume);
    }

    pub fn first_date(&self) -> Option<NaiveDate> {
        self.dates.first().copied()
    }

    pub fn last_date(&self) -> Option<NaiveDate> {
        self.dates.last().copied()
    }

    /// Cuts every column to the shortest one, so rows are whole. Loaders
    /// always build parallel columns; this guards hand-built `Bars` (the
    /// fields are public) before code that walks rows.
    pub(crate) fn make_consistent(&mut self) -> usize {
        let n = [
            self.dates.len(),
            self.open.len(),
            self.high.len(),
            self.low.len(),
            self.close.len(),
            self.volume.len(),
        ]
        .into_iter()
        .min()
        .unwrap_or(0);
        self.dates.truncate(n);
        self.open.truncate(n);
        self.high.truncate(n);
        self.low.truncate(n);
        self.close.truncate(n);
        self.volume.truncate(n);
        n
    }

    /// Keeps only the rows whose flag is true (columns stay parallel).
    pub(crate) fn retain_rows(&mut self, keep: &[bool]) {
        fn filter<T: Copy>(v: &mut Vec<T>, keep: &[bool]) {
            let mut i = 0;
            v.retain(|_| {
                let k = keep.get(i).copied().unwrap_or(true);
                i += 1;
                k
            });
        }
        filter(&mut self.dates, keep);
        filter(&mut self.open, keep);
        filter(&mut self.high, keep);
        filter(&mut self.low, keep);
        filter(&mut self.close, keep);
        filter(&mut self.volume, keep);
    }

    /// Keeps the rows dated within `[start, end]` (either bound optional).
    pub fn retain_range(&mut self, start: Option<NaiveDate>, end: Option<NaiveDate>) {
        let keep: Vec<bool> = self
            .dates
            .iter()
            .map(|d| start.is_none_or(|s| *d >= s) && end.is_none_or(|e| *d <= e))
            .collect();
        if keep.iter().any(|k| !k) {
            self.retain_rows(&keep);
        }
    }

    /// The row index of `date`, if present (dates must be sorted).
    pub fn index_of(&self, date: NaiveDate) -> Option<usize> {
        self.dates.binary_search(&date).ok()
    }

    /// `other`'s close on each of this series' dates (NaN where it has no
    /// bar): the alignment for pairwise statistics on common dates.
    pub fn aligned_close(&self, other: &Bars) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.len());
        let mut j = 0;
        for d in &self.dates {
            while j < other.dates.len() && other.dates[j] < *d {
                j += 1;
            }
            match other.dates.get(j) {
                Some(od) if od == d => out.push(other.close.get(j).copied().unwrap_or(f64::NAN)),
                _ => out.push(f64::NAN),
            }
        }
        out
    }
}

/// The loaders vibedesk has.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Embedded,
    Local,
    Yahoo,
    Stooq,
}

impl Source {
    pub const ALL: [Source; 4] = [
        Source::Embedded,
        Source::Local,
        Source::Yahoo,
        Source::Stooq,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Source::Embedded => "embedded",
            Source::Local => "local",
            Source::Yahoo => "yahoo",
            Source::Stooq => "stooq",
        }
    }

    pub(crate) fn is_online(self) -> bool {
        matches!(self, Source::Yahoo | Source::Stooq)
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a config or tool call asked for: `auto` or one source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceChoice {
    #[default]
    Auto,
    #[serde(untagged)]
    Explicit(Source),
}

/// The names [`SourceChoice::from_str`] accepts, for error messages.
pub(crate) const VALID_SOURCES: &str = "auto, embedded, local, yahoo (alias yfinance), stooq";

/// Sources of the original engine (docs §7.3) that vibedesk does not have;
/// named in the refusal so a ported config fails with a useful message.
const FOREIGN_SOURCES: [&str; 21] = [
    "tushare",
    "okx",
    "binance",
    "akshare",
    "baostock",
    "tencent",
    "mootdx",
    "ccxt",
    "futu",
    "eastmoney",
    "sina",
    "finnhub",
    "alphavantage",
    "tiingo",
    "fmp",
    "qveris",
    "india_broker",
    "pykrx",
    "longbridge",
    "mt5",
    "tickerall",
];

impl SourceChoice {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SourceChoice::Auto => "auto",
            SourceChoice::Explicit(s) => s.as_str(),
        }
    }
}

impl fmt::Display for SourceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SourceChoice {
    type Err = DataError;

    /// Explicit unknown sources are refused with the valid list (§7.3).
    fn from_str(s: &str) -> Result<Self, DataError> {
        let key = s.trim().to_ascii_lowercase();
        Ok(match key.as_str() {
            "" | "auto" => SourceChoice::Auto,
            "embedded" | "builtin" | "sample" => SourceChoice::Explicit(Source::Embedded),
            "local" | "csv" => SourceChoice::Explicit(Source::Local),
            // §7.1 aliases yahoo and yfinance; both read Yahoo's chart API.
            "yahoo" | "yfinance" => SourceChoice::Explicit(Source::Yahoo),
            "stooq" => SourceChoice::Explicit(Source::Stooq),
            _ => {
                let hint = if FOREIGN_SOURCES.contains(&key.as_str()) {
                    " (a source of the original Vibe-Trading engine that vibedesk does not implement)"
                        .to_string()
                } else {
                    String::new()
                };
                return Err(DataError::UnknownSource {
                    given: s.to_string(),
                    hint,
                });
            }
        })
    }
}

/// Bar interval (docs §7.1 `interval`). Every loader here is daily; the
/// others parse so a config can be validated, and are refused at fetch time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Interval {
    #[serde(rename = "1m")]
    M1,
    #[serde(rename = "5m")]
    M5,
    #[serde(rename = "15m")]
    M15,
    #[serde(rename = "30m")]
    M30,
    #[serde(rename = "1H")]
    H1,
    #[serde(rename = "4H")]
    H4,
    #[default]
    #[serde(rename = "1D")]
    D1,
}

impl Interval {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Interval::M1 => "1m",
            Interval::M5 => "5m",
            Interval::M15 => "15m",
            Interval::M30 => "30m",
            Interval::H1 => "1H",
            Interval::H4 => "4H",
            Interval::D1 => "1D",
        }
    }
}

impl FromStr for Interval {
    type Err = DataError;

    fn from_str(s: &str) -> Result<Self, DataError> {
        // Minutes stay lower-case ("1M" would read as a month elsewhere).
        Ok(match s.trim() {
            "1m" => Interval::M1,
            "5m" => Interval::M5,
            "15m" => Interval::M15,
            "30m" => Interval::M30,
            "1H" | "1h" => Interval::H1,
            "4H" | "4h" => Interval::H4,
            "1D" | "1d" | "D" | "d" | "daily" => Interval::D1,
            other => {
                return Err(DataError::UnsupportedInterval {
                    given: other.to_string(),
                    detail: "valid intervals: 1m, 5m, 15m, 30m, 1H, 4H, 1D".into(),
                });
            }
        })
    }
}

/// One loader that was tried and did not serve, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Attempt {
    pub source: Source,
    pub outcome: String,
}

/// Where a series came from and what was done to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Provenance {
    /// The symbol as requested.
    pub symbol: String,
    pub market: Market,
    /// The loader that served the rows.
    pub source: Source,
    /// What was asked for (`auto` or a source name).
    pub requested_source: String,
    /// URL, file path, or the embedded asset's name.
    pub location: String,
    /// When the source was read (for a cache hit: when it was first fetched).
    pub fetched_at: DateTime<Utc>,
    pub from_cache: bool,
    /// Rows returned, after the range cut and the sanity filter.
    pub rows: usize,
    pub first_date: Option<NaiveDate>,
    pub last_date: Option<NaiveDate>,
    /// Adjustments applied, in words (e.g. the split/dividend factor).
    pub adjustments: Vec<String>,
    /// Rows the sanity filter dropped, by reason.
    pub dropped: DropReport,
    /// Anything a reader should know: partial coverage, fallbacks.
    pub notes: Vec<String>,
    /// Loaders tried before this one.
    pub attempts: Vec<Attempt>,
}

/// An empty record (no symbol, nothing served): what a tool output's
/// schema, which reads defaults, is generated from (docs §13.4).
impl Default for Provenance {
    fn default() -> Self {
        Provenance {
            symbol: String::new(),
            market: market::Market::UsEquity,
            source: Source::Embedded,
            requested_source: String::new(),
            location: String::new(),
            fetched_at: DateTime::<Utc>::default(),
            from_cache: false,
            rows: 0,
            first_date: None,
            last_date: None,
            adjustments: Vec::new(),
            dropped: DropReport::default(),
            notes: Vec::new(),
            attempts: Vec::new(),
        }
    }
}

/// Longest reason quoted in a fallback note (an HTTP error names its URL).
const FALLBACK_REASON_CHARS: usize = 240;

/// `text` cut to `max` characters, with `…` when something was cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

impl Provenance {
    /// When a source was asked for by name and another served the rows:
    /// which one did, and why the named one did not. `auto` falling down
    /// its chain is the normal case and gives `None`.
    pub fn fallback(&self) -> Option<String> {
        let asked = self.requested_source.as_str();
        if asked == "auto" || asked == self.source.as_str() {
            return None;
        }
        let why = self
            .attempts
            .iter()
            .find(|a| a.source.as_str() == asked)
            .map(|a| shorten(&a.outcome, FALLBACK_REASON_CHARS))
            .unwrap_or_else(|| "not tried".into());
        Some(format!(
            "{asked} did not serve {} ({why}); the rows come from {}",
            self.symbol, self.source
        ))
    }
}

/// A symbol's bars and their provenance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PriceSeries {
    pub symbol: String,
    pub bars: Bars,
    pub provenance: Provenance,
    /// The source text of the bars, when the loader read them exactly as
    /// written (not serialized: it only saves formatting them again).
    #[serde(skip)]
    pub source_rows: Option<std::sync::Arc<SourceRows>>,
}

/// The lines of a CSV file that hold a series' bars, one bar per line in
/// order, as `date,open,high,low,close,volume` with an ISO date and plain
/// decimals that parsed to the bars' values exactly (nothing trimmed,
/// defaulted, adjusted or dropped). Any correct parser reads them back to
/// the same bars, so the OHLCV artifact copies them from the file (in the
/// kernel) rather than formatting every number again, which was most of a
/// first 100-symbol run's artifact work. Only where and what they are is
/// kept, not the text: the file must still be the one that was read (the
/// identity the parsed-bars cache trusts), else the bars are formatted.
#[derive(Clone, PartialEq)]
pub struct SourceRows {
    path: std::path::PathBuf,
    stamp: [i64; 7],
    range: std::ops::Range<u64>,
    rows: usize,
    /// Whether the last line has its line end.
    newline_end: bool,
}

impl SourceRows {
    /// `rows` lines at `range` of the file at `path` as `meta` describes it
    /// (taken before it was read); the loader vouches for them.
    pub(crate) fn new(
        path: &std::path::Path,
        meta: &std::fs::Metadata,
        range: std::ops::Range<usize>,
        rows: usize,
        newline_end: bool,
    ) -> Self {
        SourceRows {
            path: path.to_path_buf(),
            stamp: file_stamp(meta),
            range: range.start as u64..range.end as u64,
            rows,
            newline_end,
        }
    }

    /// Whether the lines stand for `bars`: as many (a series cut or changed
    /// after loading falls back to formatting).
    pub(crate) fn serves(&self, bars: &Bars) -> bool {
        bars.len() == self.rows && self.rows > 0 && !self.range.is_empty()
    }

    /// Copies the lines to the end of `out` (with a final line end), when
    /// the file is still the one that was read; `Ok(false)` when it is not.
    pub(crate) fn copy_to(&self, out: &mut std::fs::File) -> std::io::Result<bool> {
        use std::io::{Read, Seek, SeekFrom, Write};
        let mut src = std::fs::File::open(&self.path)?;
        if file_stamp(&src.metadata()?) != self.stamp {
            return Ok(false);
        }
        src.seek(SeekFrom::Start(self.range.start))?;
        let want = self.range.end - self.range.start;
        // File to file: `io::copy` hands this to copy_file_range.
        if std::io::copy(&mut src.take(want), out)? != want {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if !self.newline_end {
            out.write_all(b"\n")?;
        }
        Ok(true)
    }

    /// The bytes [`Self::copy_to`] writes.
    pub fn len(&self) -> u64 {
        self.range.end - self.range.start + u64::from(!self.newline_end)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What identifies a file's content without reading it: device, inode,
/// size, modification and change times.
pub(crate) fn file_stamp(meta: &std::fs::Metadata) -> [i64; 7] {
    use std::os::unix::fs::MetadataExt;
    [
        meta.dev() as i64,
        meta.ino() as i64,
        meta.size() as i64,
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    ]
}

impl fmt::Debug for SourceRows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SourceRows({} rows, bytes {:?} of {})",
            self.rows,
            self.range,
            self.path.display()
        )
    }
}

/// Everything that can go wrong getting data, each naming the input and
/// what to do.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("unknown data source '{given}'{hint}; valid sources: {VALID_SOURCES}")]
    UnknownSource { given: String, hint: String },
    #[error("unsupported interval '{given}': {detail}")]
    UnsupportedInterval { given: String, detail: String },
    #[error("invalid date '{value}' for {field}: expected YYYY-MM-DD")]
    InvalidDate { field: &'static str, value: String },
    #[error("invalid date range for {symbol}: start {start} is after end {end}")]
    InvalidRange {
        symbol: String,
        start: NaiveDate,
        end: NaiveDate,
    },
    #[error(
        "{bars} bars of history before {start} for {symbol} reach past the calendar's first date; ask for fewer rows (last_n) or a shorter warm-up"
    )]
    HistoryTooLong {
        symbol: String,
        bars: usize,
        start: NaiveDate,
    },
    #[error("invalid symbol '{0}': give a ticker such as AAPL, 0700.HK or BTC-USD")]
    InvalidSymbol(String),
    #[error(
        "the embedded dataset cannot be read ({0}); the build is broken: rebuild from a clean checkout"
    )]
    Embedded(embedded::EmbeddedError),
    #[error("cannot {0}")]
    Io(#[source] crate::fsio::IoError),
    #[error("{path} (Parquet): {detail}")]
    Parquet { path: String, detail: String },
    #[error(
        "{path}: no {missing} column (found: {found}); name the columns date, open, high, low, close, and optionally volume and adj close"
    )]
    CsvHeader {
        path: String,
        missing: &'static str,
        found: String,
    },
    #[error("{path}, line {line}, column '{column}': {detail}")]
    CsvValue {
        path: String,
        line: u64,
        column: String,
        detail: String,
    },
    #[error("{path}{}: {detail}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
    CsvFormat {
        path: String,
        line: Option<u64>,
        detail: String,
    },
    #[error("{loader} has no data for {symbol}: {detail}")]
    NotFound {
        loader: Source,
        symbol: String,
        detail: String,
    },
    #[error("source '{loader}' is not available: {reason}")]
    Unavailable { loader: Source, reason: String },
    #[error("{loader} answered HTTP {status} for {url}: {snippet}")]
    Http {
        loader: Source,
        url: String,
        status: u16,
        snippet: String,
    },
    #[error("{loader} request to {url} failed: {detail}; check the network or pick another source")]
    Transport {
        loader: Source,
        url: String,
        detail: String,
    },
    #[error("{loader} answer from {url} does not parse: {detail}")]
    Decode {
        loader: Source,
        url: String,
        detail: String,
    },
    #[error("no source could serve {symbol} ({market}, {range}); tried: {tried}")]
    NoData {
        symbol: String,
        market: Market,
        range: String,
        tried: String,
    },
    #[error(
        "no data for {missing} of {total} symbols (the universe is not shrunk silently): {detail}"
    )]
    Incomplete {
        missing: usize,
        total: usize,
        detail: String,
    },
}

impl DataError {
    /// A failed read of `path`; every data read is a read, so the message
    /// stays "cannot read <path>: <why>".
    pub(crate) fn read(path: &Path) -> impl FnOnce(std::io::Error) -> DataError + '_ {
        move |source| DataError::Io(crate::fsio::IoError::new("read", path, source))
    }

    /// Errors about the user's own input: falling back to another source
    /// would hide them, so the chain stops (a malformed local file, a
    /// Parquet file that cannot be read, a bad range).
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            DataError::Parquet { .. }
                | DataError::CsvHeader { .. }
                | DataError::CsvValue { .. }
                | DataError::CsvFormat { .. }
                | DataError::InvalidRange { .. }
                | DataError::HistoryTooLong { .. }
                | DataError::InvalidSymbol(_)
                | DataError::UnsupportedInterval { .. }
                | DataError::Embedded(_)
        )
    }

    /// A short machine-readable code for tool results.
    pub fn code(&self) -> &'static str {
        match self {
            DataError::UnknownSource { .. } => "unknown_source",
            DataError::UnsupportedInterval { .. } => "unsupported_interval",
            DataError::InvalidDate { .. } | DataError::InvalidRange { .. } => "invalid_range",
            DataError::HistoryTooLong { .. } => "invalid_arguments",
            DataError::InvalidSymbol(_) => "invalid_symbol",
            DataError::Embedded(_) => "embedded_data_broken",
            DataError::Io(_) => "io_error",
            DataError::Parquet { .. } => "parquet_error",
            DataError::CsvHeader { .. }
            | DataError::CsvValue { .. }
            | DataError::CsvFormat { .. } => "bad_csv",
            DataError::NotFound { .. } => "not_found",
            DataError::Unavailable { .. } => "source_unavailable",
            DataError::Http { .. } | DataError::Transport { .. } | DataError::Decode { .. } => {
                "fetch_failed"
            }
            DataError::NoData { .. } | DataError::Incomplete { .. } => "no_data",
        }
    }
}

/// Parses `YYYY-MM-DD` (also `YYYY/MM/DD` and `YYYYMMDD`) for a named field.
pub(crate) fn parse_date(field: &'static str, value: &str) -> Result<NaiveDate, DataError> {
    let v = value.trim();
    ["%Y-%m-%d", "%Y/%m/%d", "%Y%m%d"]
        .iter()
        .find_map(|f| NaiveDate::parse_from_str(v, f).ok())
        .ok_or_else(|| DataError::InvalidDate {
            field,
            value: value.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_and_intervals_round_trip_through_serde() {
        let c: SourceChoice = serde_json::from_str("\"stooq\"").unwrap();
        assert_eq!(c, SourceChoice::Explicit(Source::Stooq));
        assert_eq!(
            serde_json::to_string(&SourceChoice::Auto).unwrap(),
            "\"auto\""
        );
        assert_eq!(
            serde_json::to_string(&SourceChoice::Explicit(Source::Yahoo)).unwrap(),
            "\"yahoo\""
        );
        assert_eq!("1d".parse::<Interval>().unwrap(), Interval::D1);
        assert_eq!(serde_json::to_string(&Interval::H4).unwrap(), "\"4H\"");
        assert!("2W".parse::<Interval>().is_err());
        assert_eq!(
            parse_date("start", "20240102").unwrap(),
            NaiveDate::from_ymd_opt(2024, 1, 2).unwrap()
        );
        let e = parse_date("end", "next week").unwrap_err().to_string();
        assert!(e.contains("'next week' for end"), "{e}");
    }

    #[test]
    fn ragged_hand_built_bars_are_cut_not_indexed_past() {
        let mut b = Bars::default();
        b.push(
            NaiveDate::from_ymd_opt(2024, 1, 2).unwrap(),
            1.0,
            2.0,
            0.5,
            1.5,
            1.0,
        );
        b.close.push(9.0);
        assert_eq!(clean::sanitize(&mut b).total(), 0);
        assert_eq!(b.close.len(), 1);
    }
}
