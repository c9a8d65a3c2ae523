//! A parsed OHLCV table ([`ParsedCsv`]) and what finds and checks its
//! columns: shared by the CSV parser ([`super::local`], which the online
//! loaders use too), the Parquet reader ([`super::parquet_file`]) and the
//! cache of parsed files ([`super::bars_cache`]), none of which it uses.

use chrono::{DateTime, NaiveDate, Utc};

use super::clean::{self, ADJ_CLOSE_NOTE};
use super::market::us_base;
use super::{Bars, DataError, Source};

/// A parsed OHLCV table, before adjustment and cleaning (file order).
#[derive(Clone, Debug, Default)]
pub struct ParsedCsv {
    pub bars: Bars,
    pub adj_close: Option<Vec<f64>>,
    pub has_volume: bool,
    /// Where each row's line starts in the parsed bytes, then where the
    /// last one ends: kept only for a comma-separated
    /// `date,open,high,low,close,volume` file whose every row was read
    /// exactly as written, one line after another (see [`SourceRows`]).
    ///
    /// [`SourceRows`]: super::SourceRows
    pub row_starts: Option<Vec<usize>>,
    /// Every row was read in one pass with the fast number path: such a
    /// parse is cheap to repeat and is not kept (see
    /// [`load_file`](super::local::load_file)).
    pub quick: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Col {
    Date,
    Open,
    High,
    Low,
    Close,
    Volume,
    AdjClose,
    Ticker,
}

fn classify(header: &str) -> Option<Col> {
    let key: String = header
        .trim()
        .trim_matches('"')
        .chars()
        .filter(|c| !matches!(c, ' ' | '_' | '-' | '.'))
        .flat_map(char::to_lowercase)
        .collect();
    Some(match key.as_str() {
        "date" | "timestamp" | "datetime" | "time" | "tradedate" | "day" => Col::Date,
        "open" | "openprice" => Col::Open,
        "high" | "highprice" => Col::High,
        "low" | "lowprice" => Col::Low,
        "close" | "closeprice" | "last" => Col::Close,
        "volume" | "vol" => Col::Volume,
        "adjclose" | "adjustedclose" | "adjclose*" => Col::AdjClose,
        "ticker" | "symbol" | "code" => Col::Ticker,
        _ => return None,
    })
}

/// A date from an ISO date, a date-time (the date part is kept: bars are
/// daily), `YYYYMMDD`, `YYYY/MM/DD`, or Unix seconds / milliseconds.
pub fn parse_bar_date(raw: &str) -> Option<NaiveDate> {
    let s = raw.trim().trim_matches('"');
    if s.len() >= 10 {
        let head = &s[..s.char_indices().nth(10).map_or(s.len(), |(i, _)| i)];
        for f in ["%Y-%m-%d", "%Y/%m/%d"] {
            if let Ok(d) = NaiveDate::parse_from_str(head, f) {
                // Anything after the date must look like a time.
                let rest = &s[head.len()..];
                if rest.is_empty() || rest.starts_with([' ', 'T', 't']) {
                    return Some(d);
                }
            }
        }
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return match s.len() {
            8 => NaiveDate::parse_from_str(s, "%Y%m%d").ok(),
            9 | 10 => s
                .parse::<i64>()
                .ok()
                .and_then(|t| DateTime::<Utc>::from_timestamp(t, 0))
                .map(|t| t.date_naive()),
            12 | 13 => s
                .parse::<i64>()
                .ok()
                .and_then(DateTime::<Utc>::from_timestamp_millis)
                .map(|t| t.date_naive()),
            _ => None,
        };
    }
    None
}

pub(super) fn matches_symbol(cell: &str, symbol: &str) -> bool {
    let cell = cell.trim();
    cell.eq_ignore_ascii_case(symbol.trim()) || us_base(cell) == us_base(symbol)
}

/// Where the OHLCV columns are, found by name (the first match wins); shared
/// by the CSV and Parquet readers.
pub(super) struct Columns {
    pub date: usize,
    pub open: usize,
    pub high: usize,
    pub low: usize,
    pub close: usize,
    pub volume: Option<usize>,
    pub adj_close: Option<usize>,
    pub ticker: Option<usize>,
}

impl Columns {
    pub(crate) fn find<'a>(
        names: impl Iterator<Item = &'a str> + Clone,
        origin: &str,
    ) -> Result<Columns, DataError> {
        let mut idx: [Option<usize>; 8] = [None; 8];
        for (i, h) in names.clone().enumerate() {
            if let Some(c) = classify(h) {
                let slot = &mut idx[c as usize];
                if slot.is_none() {
                    *slot = Some(i);
                }
            }
        }
        let need = |c: Col, name: &'static str| {
            idx[c as usize].ok_or_else(|| DataError::CsvHeader {
                path: origin.to_string(),
                missing: name,
                found: names.clone().collect::<Vec<_>>().join(", "),
            })
        };
        Ok(Columns {
            date: need(Col::Date, "date (date, Date, timestamp)")?,
            open: need(Col::Open, "open")?,
            high: need(Col::High, "high")?,
            low: need(Col::Low, "low")?,
            close: need(Col::Close, "close")?,
            volume: idx[Col::Volume as usize],
            adj_close: idx[Col::AdjClose as usize],
            ticker: idx[Col::Ticker as usize],
        })
    }
}

/// After a file with a ticker column: no rows for `symbol` names the
/// tickers it has; without a symbol, a file of several tickers is refused.
pub(super) fn check_tickers(
    seen: &[String],
    no_rows: bool,
    symbol: Option<&str>,
    origin: &str,
) -> Result<(), DataError> {
    let listed = || seen.iter().take(20).cloned().collect::<Vec<_>>().join(", ");
    match symbol {
        Some(sym) if no_rows && !seen.is_empty() => Err(DataError::NotFound {
            loader: Source::Local,
            symbol: sym.to_string(),
            detail: format!("{origin} has rows for {} only", listed()),
        }),
        None if seen.len() > 1 || (no_rows && !seen.is_empty()) => Err(DataError::CsvFormat {
            path: origin.to_string(),
            line: None,
            detail: format!("the file holds several tickers ({}); name one", listed()),
        }),
        _ => Ok(()),
    }
}

impl ParsedCsv {
    /// One row: OHLC, the volume when the file has one (else NaN), the
    /// adjusted close when it has one.
    pub(super) fn push_row(
        &mut self,
        c: &Columns,
        date: NaiveDate,
        num: impl Fn(usize) -> Result<f64, DataError>,
    ) -> Result<(), DataError> {
        let volume = match c.volume {
            Some(i) => num(i)?,
            None => f64::NAN,
        };
        let (o, h, l, cl) = (num(c.open)?, num(c.high)?, num(c.low)?, num(c.close)?);
        self.bars.push(date, o, h, l, cl, volume);
        if let (Some(i), Some(adj)) = (c.adj_close, self.adj_close.as_mut()) {
            adj.push(num(i)?);
        }
        Ok(())
    }

    /// The byte range of the rows [`finish`](Self::finish) keeps within
    /// `[start, end]` and the number of rows in it, when every row can be
    /// copied as written: rows read exactly, in date order, and no adjusted
    /// close (the caller still checks that the sanity filter dropped none).
    pub(super) fn exact_rows(
        &self,
        start: Option<NaiveDate>,
        end: Option<NaiveDate>,
    ) -> Option<(std::ops::Range<usize>, usize)> {
        let starts = self.row_starts.as_ref()?;
        let dates = &self.bars.dates;
        if self.adj_close.is_some() || starts.len() != dates.len() + 1 || !dates.is_sorted() {
            return None;
        }
        let first = dates.partition_point(|d| start.is_some_and(|s| *d < s));
        let past = dates.partition_point(|d| end.is_none_or(|e| *d <= e));
        let range = *starts.get(first)?..*starts.get(past.max(first))?;
        Some((range, past.saturating_sub(first)))
    }

    /// Applies the adjusted close (if any), cuts to `[start, end]`, runs the
    /// sanity filter; returns the bars with their adjustments, drop report and
    /// notes.
    pub fn finish(
        mut self,
        start: Option<NaiveDate>,
        end: Option<NaiveDate>,
    ) -> (Bars, Vec<String>, clean::DropReport, Vec<String>) {
        let mut adjustments = Vec::new();
        let mut notes = Vec::new();
        if let Some(adj) = &self.adj_close {
            clean::apply_adj_close(&mut self.bars, adj);
            adjustments.push(ADJ_CLOSE_NOTE.to_string());
        }
        if !self.has_volume {
            notes.push("the source has no volume column: volume is NaN".to_string());
        }
        self.bars.retain_range(start, end);
        let dropped = clean::sanitize(&mut self.bars);
        if let Some(s) = dropped.summary() {
            notes.push(s);
        }
        (self.bars, adjustments, dropped, notes)
    }
}
