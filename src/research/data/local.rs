//! The `local` loader: the user's own CSV files (docs §7.3, `local`).
//!
//! Header detection is flexible: the date column may be called `date`,
//! `Date`, `timestamp`, `datetime` or `time` (ISO dates, `YYYYMMDD`,
//! date-times, or Unix seconds / milliseconds); `open, high, low, close` are
//! required in any case and spacing; `volume` and `adj close` are optional.
//! A `ticker`/`symbol` column, when present, selects the requested symbol's
//! rows, so a multi-ticker file (like the embedded one) works too. `,` `;`
//! and tab delimiters, a UTF-8 BOM, `#` comment lines and gzip are handled.
//!
//! Parquet files (by extension or their `PAR1` magic) go to
//! [`super::parquet_file`], which finds the same columns.

use std::cell::Cell;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use chrono::{NaiveDate, Utc};

use super::market::{detect_market, us_base};
use super::table::{Columns, check_tickers, matches_symbol};
pub use super::table::{ParsedCsv, parse_bar_date};
use super::{Bars, DataError, PriceSeries, Provenance, Source, SourceRows};

/// Largest file the loader reads (a daily history is a few MB at most).
const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// `,` unless the header line has more `;` or tabs.
fn sniff_delimiter(text: &str) -> u8 {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .unwrap_or("");
    let count = |c: char| line.matches(c).count();
    let (comma, semi, tab) = (count(','), count(';'), count('\t'));
    if semi > comma && semi >= tab {
        b';'
    } else if tab > comma && tab > semi {
        b'\t'
    } else {
        b','
    }
}

/// `None` for an empty or null-like cell (a missing value), else the number.
fn parse_number(raw: &str) -> Result<Option<f64>, ()> {
    let s = raw.trim().trim_matches('"').trim();
    if s.is_empty()
        || ["null", "nan", "na", "n/a", "none", "-"]
            .iter()
            .any(|n| s.eq_ignore_ascii_case(n))
    {
        return Ok(None);
    }
    s.parse::<f64>().map(Some).map_err(|_| ())
}

/// Powers of ten a double holds exactly.
const EXACT_POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A plain decimal of at most 16 characters (`-12.345`, `7`, `.5`; no
/// exponent) whose digits fit a double exactly, else `None` (the caller
/// falls back to `str::parse`). The digits m and 10^k are then exact
/// doubles, and IEEE division rounds m / 10^k correctly, so the result is
/// bit for bit what `str::parse` gives (Clinger's fast path), at a fraction
/// of its cost: price cells ("101.25") are nearly all of a price file's
/// text. Longer cells (full-precision doubles) go straight to `str::parse`
/// rather than being scanned twice.
pub(super) fn plain_decimal(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    if b.len() > 16 {
        return None;
    }
    let (negative, digits) = match b.first()? {
        b'-' => (true, &b[1..]),
        _ => (false, b),
    };
    let (mut mantissa, mut count, mut fraction) = (0u64, 0usize, None::<usize>);
    for (i, &c) in digits.iter().enumerate() {
        match c {
            // At most 16 digits: no overflow.
            b'0'..=b'9' => {
                count += 1;
                mantissa = mantissa * 10 + u64::from(c - b'0');
            }
            b'.' if fraction.is_none() => fraction = Some(digits.len() - i - 1),
            _ => return None,
        }
    }
    let scale = *EXACT_POW10.get(fraction.unwrap_or(0))?;
    if count == 0 || mantissa > 1 << 53 {
        return None;
    }
    let x = mantissa as f64 / scale;
    Some(if negative { -x } else { x })
}

/// `-?` then digits with at most one `.` among them, at least one digit:
/// the text of a plain decimal of any length.
fn plain_shaped(s: &str) -> bool {
    let (mut digits, mut dots) = (0usize, 0usize);
    for c in s.strip_prefix('-').unwrap_or(s).bytes() {
        match c {
            b'0'..=b'9' => digits += 1,
            b'.' => dots += 1,
            _ => return false,
        }
    }
    digits > 0 && dots <= 1
}

/// `str::trim`, skipped for the usual cell that starts and ends with a
/// visible ASCII character (no Unicode whitespace can be at either end).
fn trim_cell(cell: &str) -> &str {
    match (cell.as_bytes().first(), cell.as_bytes().last()) {
        (Some(a), Some(z)) if a.is_ascii_graphic() && z.is_ascii_graphic() => cell,
        _ => cell.trim(),
    }
}

/// `YYYY-MM-DD` exactly (the common case, without a format parser).
pub(super) fn iso_date(s: &str) -> Option<NaiveDate> {
    iso_date_bytes(s.as_bytes())
}

fn iso_date_bytes(b: &[u8]) -> Option<NaiveDate> {
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let mut v = [0u32; 8];
    for (slot, &c) in v
        .iter_mut()
        .zip(b[..4].iter().chain(&b[5..7]).chain(&b[8..10]))
    {
        if !c.is_ascii_digit() {
            return None;
        }
        *slot = u32::from(c - b'0');
    }
    let year = v[0] * 1000 + v[1] * 100 + v[2] * 10 + v[3];
    NaiveDate::from_ymd_opt(year as i32, v[4] * 10 + v[5], v[6] * 10 + v[7])
}

/// One `YYYY-MM-DD,o,h,l,c,v` line at the start of `b`, read in one pass,
/// with the length it takes (its line end included): the date as
/// [`iso_date`] reads it and five cells that [`plain_decimal`] accepts,
/// computed as it computes them. `None` for anything else (a space, a
/// carriage return, an exponent, a missing or extra cell, a long number),
/// which the general reading then takes.
#[inline]
fn standard_line(b: &[u8]) -> Option<(NaiveDate, [f64; 5], usize)> {
    let date = iso_date_bytes(b.get(..10)?)?;
    if b.get(10) != Some(&b',') {
        return None;
    }
    let mut i = 11;
    let mut values = [0.0; 5];
    for (k, value) in values.iter_mut().enumerate() {
        let start = i;
        let negative = b.get(i) == Some(&b'-');
        i += usize::from(negative);
        let (mut mantissa, mut count, mut dot) = (0u64, 0usize, None::<usize>);
        while let Some(&c) = b.get(i) {
            match c {
                b'0'..=b'9' => {
                    // Past plain_decimal's 16 characters: a full-precision
                    // double, which the general reading splits and parses
                    // faster than this loop would.
                    if count == 16 {
                        return None;
                    }
                    count += 1;
                    mantissa = mantissa * 10 + u64::from(c - b'0');
                }
                b'.' if dot.is_none() => dot = Some(i),
                _ => break,
            }
            i += 1;
        }
        if i - start > 16 || count == 0 || mantissa > 1 << 53 {
            return None;
        }
        let x = mantissa as f64 / *EXACT_POW10.get(dot.map_or(0, |d| i - d - 1))?;
        *value = if negative { -x } else { x };
        match (k, b.get(i)) {
            (0..4, Some(b',')) => i += 1,
            (4, None) => return Some((date, values, i)),
            (4, Some(b'\n')) => return Some((date, values, i + 1)),
            _ => return None,
        }
    }
    None
}

/// When `text` has no quote characters and no bare carriage returns (so a
/// record is exactly one line), the 0-based line index of the header and
/// the byte offset just past it; `None` sends the file to the csv reader.
/// The header is the first line that is neither blank nor a `#` comment,
/// as the csv reader sees it.
fn plain_body(text: &str) -> Option<(u64, usize)> {
    if memchr::memchr(b'"', text.as_bytes()).is_some() {
        return None;
    }
    if memchr::memchr(b'\r', text.as_bytes()).is_some()
        && memchr::memchr_iter(b'\r', text.as_bytes()).count()
            != memchr::memmem::find_iter(text.as_bytes(), b"\r\n").count()
    {
        return None;
    }
    let mut offset = 0;
    for (n, raw) in text.split_inclusive('\n').enumerate() {
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        if !line.is_empty() && !line.starts_with('#') {
            return Some((n as u64, offset));
        }
    }
    None
}

/// Where the rows of a plain file are, while they can be copied as
/// written (see [`ParsedCsv::row_starts`]), and whether all were quick.
struct RowTrack {
    starts: Vec<usize>,
    next_row_at: Option<usize>,
    quick: bool,
}

impl RowTrack {
    /// A row [`standard_line`] read at `at`, `used` bytes long with its
    /// line end: exact by construction, if it follows the previous row.
    fn one_pass(&mut self, exact: &Cell<bool>, at: usize, used: usize) {
        if exact.get() {
            if self.next_row_at.is_none_or(|r| r == at) {
                self.starts.push(at);
            } else {
                exact.set(false);
            }
        }
        self.next_row_at = Some(at + used);
    }

    /// A row read the general way from `raw_line` (at `at`; the next line
    /// starts at `next`): still exact when it follows the previous row and
    /// has six cells, nothing trimmed, no carriage return (the cells
    /// themselves are judged as they are parsed).
    fn general(
        &mut self,
        exact: &Cell<bool>,
        at: usize,
        next: usize,
        raw_line: &str,
        cells: &[&str],
    ) {
        self.quick = false;
        if !exact.get() {
            return;
        }
        let follows = self.next_row_at.is_none_or(|r| r == at);
        let untouched = cells.len() == 6
            && !raw_line.ends_with('\r')
            && cells.iter().map(|c| c.len()).sum::<usize>() + 5 == raw_line.len();
        if follows && untouched {
            self.starts.push(at);
            self.next_row_at = Some(next);
        } else {
            exact.set(false);
        }
    }
}

/// `line`'s cells (the text between delimiters, trimmed, without a final
/// carriage return) into `cells`.
fn split_line<'a>(line: &'a str, delim: u8, cells: &mut Vec<&'a str>) {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut start = 0;
    for pos in memchr::memchr_iter(delim, line.as_bytes()).chain(std::iter::once(line.len())) {
        cells.push(trim_cell(line.get(start..pos).unwrap_or("")));
        start = pos + 1;
    }
}

/// Whether a split line holds a row: not blank, not a `#` comment, not
/// only empty cells.
fn is_row(raw_line: &str, cells: &[&str]) -> bool {
    let text = raw_line.strip_suffix('\r').unwrap_or(raw_line);
    !(text.is_empty() || text.starts_with('#') || cells.iter().all(|c| c.is_empty()))
}

/// Parses CSV bytes from `origin` (a path or URL, used in errors). With a
/// ticker column, keeps the rows of `symbol` (required when the file holds
/// several tickers).
pub fn parse_csv(bytes: &[u8], origin: &str, symbol: Option<&str>) -> Result<ParsedCsv, DataError> {
    parse_csv_with(bytes, origin, symbol, true)
}

/// [`parse_csv`]; `split_plain` off forces the csv reader (tests compare
/// the two drivers).
fn parse_csv_with(
    bytes: &[u8],
    origin: &str,
    symbol: Option<&str>,
    split_plain: bool,
) -> Result<ParsedCsv, DataError> {
    // Strict UTF-8 first (a fast check); the lossy decoder only for files
    // that need it.
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => std::borrow::Cow::Borrowed(t),
        Err(_) => String::from_utf8_lossy(bytes),
    };
    // Row offsets are kept in terms of `bytes`: only for text taken as is.
    let verbatim_ok = matches!(text, std::borrow::Cow::Borrowed(_));
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    // (The BOM's length; lossy text can be longer than `bytes`.)
    let text_offset = bytes.len().saturating_sub(text.len());
    let delim = sniff_delimiter(text);
    let plain = plain_body(text).filter(|_| split_plain);
    let (headers, rdr) = read_header(text, plain, delim, origin)?;
    check_header(&headers, origin)?;
    let cols = Columns::find(headers.iter().map(String::as_str), origin)?;
    let mut out = sized_output(text, &cols);
    let standard = is_standard(delim, &headers, &cols);
    let mut reader = RowReader {
        cols: &cols,
        headers: &headers,
        origin,
        symbol,
        exact: Cell::new(verbatim_ok && standard),
        tickers_seen: Vec::new(),
    };
    match (plain, rdr) {
        // No quoting and plain line ends: read the lines directly (the csv
        // reader's per-record allocation and UTF-8 checks cost most of a
        // 100-file backtest's load time).
        (Some(body_start), _) => {
            let lines = PlainLines::new(text, body_start, delim, headers.len());
            // Row offsets in `bytes`.
            let base = text_offset + body_start.1;
            read_plain(lines, base, standard, &mut reader, &mut out)?;
        }
        (None, Some(rdr)) => read_records(rdr, origin, &mut reader, &mut out)?,
        (None, None) => {}
    }
    if cols.ticker.is_some() {
        check_tickers(&reader.tickers_seen, out.bars.is_empty(), symbol, origin)?;
    }
    Ok(out)
}

/// The header's cells, and the csv reader past them when the file needs one.
type Header<'t> = (Vec<String>, Option<csv::Reader<&'t [u8]>>);

/// The header's cells and, for a file that is not plain, the csv reader
/// past them. A plain header is split here: building a csv reader costs
/// more than reading a short file's rows, so only files that need one get
/// it.
fn read_header<'t>(
    text: &'t str,
    plain: Option<(u64, usize)>,
    delim: u8,
    origin: &str,
) -> Result<Header<'t>, DataError> {
    if let Some((_, past_header)) = plain {
        let head = text.get(..past_header).unwrap_or("");
        let head = head.strip_suffix('\n').unwrap_or(head);
        let head = head.strip_suffix('\r').unwrap_or(head);
        let line = head.rsplit('\n').next().unwrap_or("");
        let headers = line
            .split(char::from(delim))
            .map(|c| c.trim().to_string())
            .collect();
        return Ok((headers, None));
    }
    let mut r = csv::ReaderBuilder::new()
        .delimiter(delim)
        .comment(Some(b'#'))
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = r
        .headers()
        .map_err(|e| DataError::CsvFormat {
            path: origin.to_string(),
            line: Some(1),
            detail: format!("cannot read the header line: {e}"),
        })?
        .iter()
        .map(str::to_string)
        .collect();
    Ok((headers, Some(r)))
}

/// Refuses an empty file and one whose first line is data.
fn check_header(headers: &[String], origin: &str) -> Result<(), DataError> {
    if headers.iter().all(|h| h.is_empty()) {
        return Err(DataError::CsvFormat {
            path: origin.to_string(),
            line: None,
            detail: "the file is empty; expected a header line (date, open, high, low, close[, volume][, adj close]) and one row per day".into(),
        });
    }
    if headers.first().and_then(|h| parse_bar_date(h)).is_some() {
        return Err(DataError::CsvFormat {
            path: origin.to_string(),
            line: Some(1),
            detail: "the first line looks like data, not a header; add a header line such as date,open,high,low,close,volume".into(),
        });
    }
    Ok(())
}

/// An empty parse, sized once from the line count: six columns grown by
/// doubling cost more copying than parsing.
fn sized_output(text: &str, cols: &Columns) -> ParsedCsv {
    let lines = memchr::memchr_iter(b'\n', text.as_bytes()).count() + 1;
    ParsedCsv {
        bars: Bars::with_capacity(lines),
        adj_close: cols.adj_close.map(|_| Vec::with_capacity(lines)),
        has_volume: cols.volume.is_some(),
        row_starts: None,
        quick: false,
    }
}

/// The layout the OHLCV artifact has: its rows can be copied, and a line
/// of plain cells is read in one pass.
fn is_standard(delim: u8, headers: &[String], cols: &Columns) -> bool {
    delim == b','
        && headers.len() == 6
        && (
            cols.date,
            cols.open,
            cols.high,
            cols.low,
            cols.close,
            cols.volume,
        ) == (0, 1, 2, 3, 4, Some(5))
}

/// One row's trimmed cells into bars, for either driver: only the rows of
/// the requested symbol, and the tickers seen on the way.
struct RowReader<'a> {
    cols: &'a Columns,
    headers: &'a [String],
    origin: &'a str,
    symbol: Option<&'a str>,
    /// Cleared by the first cell not read exactly as written.
    exact: Cell<bool>,
    tickers_seen: Vec<String>,
}

impl RowReader<'_> {
    /// Reads one row (file line `line`, counted from 1) into `out`.
    #[inline]
    fn row(&mut self, out: &mut ParsedCsv, line: u64, cells: &[&str]) -> Result<(), DataError> {
        let cell = |i: usize| cells.get(i).copied().unwrap_or("");
        if let Some(ti) = self.cols.ticker {
            let t = cell(ti);
            if !self.tickers_seen.iter().any(|s| s == t) {
                self.tickers_seen.push(t.to_string());
            }
            match self.symbol {
                Some(sym) if !matches_symbol(t, sym) => return Ok(()),
                _ => {}
            }
        }
        let date = self.date(cell(self.cols.date), line)?;
        out.push_row(self.cols, date, |i| self.number(cell(i), i, line))?;
        Ok(())
    }

    /// The date cell: `YYYY-MM-DD` first, then the other spellings.
    #[inline]
    fn date(&self, raw: &str, line: u64) -> Result<NaiveDate, DataError> {
        iso_date(raw)
            .or_else(|| {
                self.exact.set(false);
                parse_bar_date(raw)
            })
            .ok_or_else(|| DataError::CsvValue {
                path: self.origin.to_string(),
                line,
                column: self.column_name(self.cols.date),
                detail: format!(
                    "'{raw}' is not a date (expected YYYY-MM-DD, YYYYMMDD, an ISO date-time or Unix seconds)"
                ),
            })
    }

    /// The number in column `column`; NaN for a null-like cell.
    #[inline]
    fn number(&self, raw: &str, column: usize, line: u64) -> Result<f64, DataError> {
        // The plain number first: the null-like spellings and the
        // error only when it fails (same result, a fraction of the work).
        if let Some(x) = plain_decimal(raw) {
            return Ok(x);
        }
        if let Ok(x) = raw.parse::<f64>() {
            // A long plain decimal still reads back the same anywhere
            // (parsing is correctly rounded); other spellings are not
            // copied.
            if !plain_shaped(raw) {
                self.exact.set(false);
            }
            return Ok(x);
        }
        self.exact.set(false);
        parse_number(raw)
            .map(|v| v.unwrap_or(f64::NAN))
            .map_err(|()| DataError::CsvValue {
                path: self.origin.to_string(),
                line,
                column: self.column_name(column),
                detail: format!("'{raw}' is not a number"),
            })
    }

    fn column_name(&self, i: usize) -> String {
        self.headers.get(i).cloned().unwrap_or_default()
    }
}

/// A plain file's body (see [`plain_body`]) as it is read line by line:
/// where the next line starts, how many lines are read, the cells of the
/// line at hand.
struct PlainLines<'a> {
    body: &'a str,
    delim: u8,
    /// The header's 0-based line index: line numbers count from it.
    header_line: u64,
    line_start: usize,
    n: u64,
    cells: Vec<&'a str>,
}

impl<'a> PlainLines<'a> {
    fn new(
        text: &'a str,
        (header_line, past_header): (u64, usize),
        delim: u8,
        width: usize,
    ) -> Self {
        PlainLines {
            body: text.get(past_header..).unwrap_or(""),
            delim,
            header_line,
            line_start: 0,
            n: 0,
            cells: Vec::with_capacity(width),
        }
    }

    /// Standard lines in one pass ([`standard_line`]); a line it cannot
    /// take is split and read the general way. `Ok(true)` once the body is
    /// read; `Ok(false)` when given up after a run of lines it cannot take
    /// (a file of full-precision doubles, say), the rest left to
    /// [`Self::split_rest`], as before the one-pass reading existed.
    #[inline]
    fn one_pass(
        &mut self,
        reader: &mut RowReader<'_>,
        rows: &mut RowTrack,
        out: &mut ParsedCsv,
    ) -> Result<bool, DataError> {
        let body = self.body;
        let bytes = body.as_bytes();
        let mut misses = 0u32;
        loop {
            let rest = bytes.get(self.line_start..).unwrap_or_default();
            // The usual line in one pass; it holds exactly the cells the
            // general reading accepts without a fallback, so both give the
            // same bar.
            let Some((date, [o, h, l, c, v], used)) = standard_line(rest) else {
                misses += 1;
                if misses >= 8 {
                    return Ok(false);
                }
                let end = memchr::memchr(b'\n', rest).map_or(bytes.len(), |e| self.line_start + e);
                let raw_line = body.get(self.line_start..end).unwrap_or("");
                split_line(raw_line, self.delim, &mut self.cells);
                self.finish_line(end, raw_line, reader, rows, out)?;
                if end >= bytes.len() {
                    return Ok(true);
                }
                self.line_start = end + 1;
                continue;
            };
            self.n += 1;
            misses = 0;
            out.bars.push(date, o, h, l, c, v);
            rows.one_pass(&reader.exact, self.line_start, used);
            self.line_start += used;
            if self.line_start >= bytes.len() {
                return Ok(true);
            }
        }
    }

    /// The rest of the body in one SIMD pass that finds every delimiter
    /// and line end; a cell is the text between two of them (ASCII, so
    /// every slice falls on a character boundary).
    fn split_rest(
        &mut self,
        reader: &mut RowReader<'_>,
        rows: &mut RowTrack,
        out: &mut ParsedCsv,
    ) -> Result<(), DataError> {
        let body = self.body;
        let bytes = body.as_bytes();
        let rest = bytes.get(self.line_start..).unwrap_or_default();
        let mut cell_start = self.line_start;
        let offset = self.line_start;
        let ends = memchr::memchr2_iter(self.delim, b'\n', rest)
            .map(move |p| offset + p)
            .chain(std::iter::once(bytes.len()));
        for pos in ends {
            let line_end = pos == bytes.len() || bytes[pos] == b'\n';
            self.cells.push(body.get(cell_start..pos).unwrap_or(""));
            cell_start = pos + 1;
            if !line_end {
                continue;
            }
            let raw_line = body.get(self.line_start..pos).unwrap_or("");
            // The last cell without its carriage return; every cell
            // trimmed.
            if let Some(last) = self.cells.last_mut() {
                *last = last.strip_suffix('\r').unwrap_or(last);
            }
            for c in self.cells.iter_mut() {
                *c = trim_cell(c);
            }
            self.finish_line(pos, raw_line, reader, rows, out)?;
            self.line_start = pos + 1;
        }
        Ok(())
    }

    /// The line at hand, ending at `end`, its cells split: read when it
    /// holds a row (and tracked), then its cells cleared.
    #[inline]
    fn finish_line(
        &mut self,
        end: usize,
        raw_line: &str,
        reader: &mut RowReader<'_>,
        rows: &mut RowTrack,
        out: &mut ParsedCsv,
    ) -> Result<(), DataError> {
        let line = self.header_line + self.n + 2;
        self.n += 1;
        if is_row(raw_line, &self.cells) {
            reader.row(out, line, &self.cells)?;
            let next = (end + 1).min(self.body.len());
            rows.general(&reader.exact, self.line_start, next, raw_line, &self.cells);
        }
        self.cells.clear();
        Ok(())
    }
}

/// The rows of a plain file, with where they are (from `base`) while they
/// can be copied as written.
fn read_plain(
    mut lines: PlainLines<'_>,
    base: usize,
    standard: bool,
    reader: &mut RowReader<'_>,
    out: &mut ParsedCsv,
) -> Result<(), DataError> {
    let mut rows = RowTrack {
        starts: Vec::new(),
        next_row_at: None,
        quick: standard,
    };
    let read_all = standard && lines.one_pass(reader, &mut rows, out)?;
    if !read_all {
        lines.split_rest(reader, &mut rows, out)?;
    }
    if let (true, Some(end)) = (reader.exact.get(), rows.next_row_at) {
        let mut starts = rows.starts;
        starts.push(end);
        out.row_starts = Some(starts.into_iter().map(|o| base + o).collect());
    }
    out.quick = rows.quick;
    Ok(())
}

/// The rows of a file the csv reader reads (quotes, bare carriage returns).
fn read_records(
    mut rdr: csv::Reader<&[u8]>,
    origin: &str,
    reader: &mut RowReader<'_>,
    out: &mut ParsedCsv,
) -> Result<(), DataError> {
    for rec in rdr.records() {
        let rec = rec.map_err(|e| DataError::CsvFormat {
            path: origin.to_string(),
            line: e.position().map(|p| p.line()),
            detail: e.to_string(),
        })?;
        let line = rec.position().map_or(0, |p| p.line());
        if rec.iter().all(str::is_empty) {
            continue;
        }
        reader.row(out, line, &rec.iter().collect::<Vec<_>>())?;
    }
    Ok(())
}

fn is_parquet(path: &Path) -> bool {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if ext.as_deref() == Some("parquet") || ext.as_deref() == Some("pq") {
        return true;
    }
    // Parquet files start with the magic bytes "PAR1".
    let mut head = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && &head == b"PAR1"
}

/// The bytes of a CSV file, gunzipped when they are gzip, and whether they
/// are the file's own (not gunzipped).
fn read_text_file(path: &Path) -> Result<(Vec<u8>, bool), DataError> {
    let io = |source| DataError::read(path)(source);
    let raw = std::fs::read(path).map_err(io)?;
    if !raw.starts_with(&[0x1f, 0x8b]) {
        return Ok((raw, true));
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(raw.as_slice())
        .take(MAX_FILE_BYTES)
        .read_to_end(&mut out)
        .map_err(io)?;
    Ok((out, false))
}

/// Reads one CSV (plain or gzip) or Parquet file for `symbol` within
/// `[start, end]`. A valid entry of `parsed_cache` replaces the parse; a
/// parse is kept there only with `keep_parsed`.
pub fn load_file(
    path: &Path,
    symbol: &str,
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
    parsed_cache: Option<&Path>,
    keep_parsed: bool,
) -> Result<PriceSeries, DataError> {
    let io = |source| DataError::read(path)(source);
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(DataError::CsvFormat {
            path: path.display().to_string(),
            line: None,
            detail: format!(
                "the file is {} bytes; the limit is {MAX_FILE_BYTES}: cut it to the symbols and dates you need",
                meta.len()
            ),
        });
    }
    let origin = path.display().to_string();
    let cached = parsed_cache.and_then(|dir| super::bars_cache::get(dir, path, &meta));
    // With the file's own text, where the kept rows are in it and whether
    // the last one ends its line.
    let (parsed, exact) = match cached {
        Some(p) => (p, None),
        None => {
            let (p, exact) = if is_parquet(path) {
                (
                    super::parquet_file::parse(path, &origin, Some(symbol))?,
                    None,
                )
            } else {
                let (text, own) = read_text_file(path)?;
                let p = parse_csv(&text, &origin, Some(symbol))?;
                let exact = p
                    .exact_rows(start, end)
                    .filter(|_| own)
                    .map(|(range, rows)| {
                        let newline_end = text.get(range.end.wrapping_sub(1)) == Some(&b'\n');
                        (range, rows, newline_end)
                    });
                (p, exact)
            };
            // A quick parse is not kept: writing its entry cost a sweep's
            // second run ~10 ms (100 x 2,520) and reading it saves each
            // later run ~6 ms; without it every run stays as fast as the
            // first. Slow parses (full-precision doubles, odd layouts) are.
            if let Some(dir) = parsed_cache.filter(|_| keep_parsed && !p.quick) {
                super::bars_cache::put(dir, path, &meta, &p);
            }
            (p, exact)
        }
    };
    let (bars, adjustments, dropped, notes) = parsed.finish(start, end);
    // The rows as written, when the filter took none of them out.
    let source_rows = exact
        .filter(|(_, rows, _)| dropped.total() == 0 && *rows == bars.len())
        .map(|(range, rows, newline_end)| {
            std::sync::Arc::new(SourceRows::new(path, &meta, range, rows, newline_end))
        });
    let provenance = Provenance {
        symbol: symbol.trim().to_string(),
        market: detect_market(symbol),
        source: Source::Local,
        requested_source: Source::Local.as_str().to_string(),
        location: origin,
        fetched_at: Utc::now(),
        from_cache: false,
        rows: bars.len(),
        first_date: bars.first_date(),
        last_date: bars.last_date(),
        adjustments,
        dropped,
        notes,
        attempts: Vec::new(),
    };
    Ok(PriceSeries {
        symbol: symbol.trim().to_string(),
        bars,
        provenance,
        source_rows,
    })
}

/// A relative file name given as the symbol must stay inside the folders.
fn safe_relative(name: &str) -> Option<PathBuf> {
    let p = Path::new(name);
    if p.is_absolute() {
        return None;
    }
    p.components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        .then(|| p.to_path_buf())
}

/// The file names tried for a symbol, in order.
pub(crate) fn candidate_names(symbol: &str) -> Vec<String> {
    let s = symbol.trim();
    let lower = s.to_ascii_lowercase();
    if [".csv", ".csv.gz", ".parquet", ".pq", ".txt"]
        .iter()
        .any(|e| lower.ends_with(e))
    {
        return vec![s.to_string()];
    }
    let mut stems = vec![
        s.to_string(),
        s.to_ascii_uppercase(),
        lower.clone(),
        us_base(s),
        us_base(s).to_ascii_lowercase(),
    ];
    stems.dedup();
    let mut names = Vec::new();
    for stem in &stems {
        for ext in ["csv", "CSV", "csv.gz", "parquet"] {
            let n = format!("{stem}.{ext}");
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    names
}

/// Finds the file for `symbol` in `dirs` (first folder, first name wins).
pub(crate) fn find_file(symbol: &str, dirs: &[PathBuf]) -> Result<PathBuf, DataError> {
    if dirs.is_empty() {
        return Err(DataError::Unavailable {
            loader: Source::Local,
            reason: "no local data folder is configured".into(),
        });
    }
    let names = candidate_names(symbol);
    for dir in dirs {
        for name in &names {
            let Some(rel) = safe_relative(name) else {
                return Err(DataError::InvalidSymbol(symbol.to_string()));
            };
            let p = dir.join(&rel);
            if p.is_file() {
                // A symlink must not lead out of the folder it was found in.
                // A name of one component that is not a link is inside by
                // construction: only links and nested names are resolved
                // (two canonicalizations a file were ~9 syscalls each).
                let plain = rel.components().count() == 1
                    && std::fs::symlink_metadata(&p).is_ok_and(|m| !m.file_type().is_symlink());
                let inside = plain || crate::fsio::confine(&p, &[dir]).is_ok();
                if !inside {
                    return Err(DataError::CsvFormat {
                        path: p.display().to_string(),
                        line: None,
                        detail: format!(
                            "the file is a link that leads outside {}; copy the file into the folder instead",
                            dir.display()
                        ),
                    });
                }
                return Ok(p);
            }
        }
    }
    let shown: Vec<&str> = names.iter().map(String::as_str).take(6).collect();
    Err(DataError::NotFound {
        loader: Source::Local,
        symbol: symbol.to_string(),
        detail: format!(
            "no file named {} in {}",
            shown.join(" / "),
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// Finds and loads `symbol` from the local folders.
pub fn load(
    symbol: &str,
    dirs: &[PathBuf],
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
    parsed_cache: Option<&Path>,
    keep_parsed: bool,
) -> Result<PriceSeries, DataError> {
    let path = find_file(symbol, dirs)?;
    load_file(&path, symbol, start, end, parsed_cache, keep_parsed)
}

/// [`load`] for several symbols, one thread per core, each taking the next
/// symbol when it is free: a universe of small files is loaded without a
/// hand-off per file (which left a core idle between files). Results come
/// back in `symbols` order.
pub(crate) fn load_many(
    symbols: &[String],
    dirs: &[PathBuf],
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
    parsed_cache: Option<&Path>,
    keep_parsed: bool,
) -> Vec<Result<PriceSeries, DataError>> {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let next_index = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next_index.fetch_add(1, Relaxed);
            let Some(sym) = symbols.get(i) else { break };
            done.push((i, load(sym, dirs, start, end, parsed_cache, keep_parsed)));
        }
        done
    };
    let helpers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(symbols.len())
        .saturating_sub(1);
    let mut all = std::thread::scope(|scope| {
        // A helper the process limit refuses leaves its share to the rest.
        let handles: Vec<_> = (0..helpers)
            .filter_map(|_| std::thread::Builder::new().spawn_scoped(scope, work).ok())
            .collect();
        let mut all = work();
        // A helper that panicked loses its symbols: each is an error of its
        // own below, not a second panic here (docs §2.4).
        all.extend(handles.into_iter().filter_map(|h| h.join().ok()).flatten());
        all
    });
    all.sort_unstable_by_key(|(i, _)| *i);
    let mut loaded = all.into_iter().peekable();
    (0..symbols.len())
        .map(|i| match loaded.next_if(|(at, _)| *at == i) {
            Some((_, r)) => r,
            None => Err(DataError::Unavailable {
                loader: Source::Local,
                reason: format!(
                    "the loader thread reading {} failed (a bug in vibedesk); try again",
                    symbols[i]
                ),
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    /// A plain file is found without resolving it; a link is followed only
    /// when it stays inside the folder it was found in.
    #[test]
    fn links_out_of_the_data_folder_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let (data, outside) = (tmp.path().join("data"), tmp.path().join("secret"));
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(data.join("AAA.csv"), "date,close\n").unwrap();
        std::fs::write(outside.join("x.csv"), "date,close\n").unwrap();
        std::os::unix::fs::symlink(data.join("AAA.csv"), data.join("BBB.csv")).unwrap();
        std::os::unix::fs::symlink(outside.join("x.csv"), data.join("CCC.csv")).unwrap();
        let dirs = [data.clone()];
        assert_eq!(find_file("AAA", &dirs).unwrap(), data.join("AAA.csv"));
        assert_eq!(find_file("BBB", &dirs).unwrap(), data.join("BBB.csv"));
        let err = find_file("CCC", &dirs).unwrap_err().to_string();
        assert!(err.contains("leads outside"), "{err}");
    }

    #[test]
    fn dates_in_many_spellings() {
        for s in [
            "2024-01-02",
            "2024/01/02",
            "20240102",
            "2024-01-02 00:00:00",
            "2024-01-02T14:30:00Z",
            "1704205800",
            "1704205800000",
        ] {
            assert_eq!(parse_bar_date(s), Some(d("2024-01-02")), "{s}");
        }
        for s in ["01/02/2024", "2024-13-01", "yesterday", "2024-01-02x"] {
            assert_eq!(parse_bar_date(s), None, "{s}");
        }
    }

    #[test]
    fn semicolon_files_and_missing_cells() {
        let csv =
            "# exported\nDate;Open;High;Low;Close\n2024-01-02;1;2;0.5;1.5\n2024-01-03;;2;0.5;1.5\n";
        let p = parse_csv(csv.as_bytes(), "x.csv", Some("X")).unwrap();
        assert_eq!(p.bars.len(), 2);
        assert!(p.bars.open[1].is_nan());
        assert!(!p.has_volume);
        let (bars, _, dropped, notes) = p.finish(None, None);
        assert_eq!(bars.len(), 1);
        assert_eq!(dropped.missing_value, 1);
        assert!(notes.iter().any(|n| n.contains("no volume")));
    }

    /// The direct line splitter and the csv reader agree on bars, NaNs,
    /// skipped lines and the line numbers in errors.
    #[test]
    fn the_plain_splitter_matches_the_csv_reader() {
        let cases = [
            "date,open,high,low,close,volume\n2024-01-02,1,2,0.5,1.5,100\n2024-01-03,1.1,2.2,0.6,1.6,\n",
            "\n# a comment\n\nDate;Open;High;Low;Close\n2024-01-02;1;2;0.5;1.5\n\n# mid\n2024-01-03; NaN ;2;0.5;1.5\n;;;;\n",
            "date,open,high,low,close\r\n20240102,1,2,0.5,1.5\r\n2024-01-03T10:00:00Z,1,2,0.5,n/a\r\n",
            "ticker,date,open,high,low,close,adj close\nX,2024-01-02,1,2,0.5,1.5,0.75\nY,2024-01-02,9,9,9,9,9\nX,2024-01-03,1,2,0.5\n",
            "date\topen\thigh\tlow\tclose\n2024-01-02\t1\t2\t0.5\t1.5\n  \t \n",
            "date,open,high,low,close\n2024-01-02,1,2,0.5,1.5\n2024-01-03,abc,2,0.5,1.5\n",
            "date,open,high,low,close\n# note\n2024-02-30,1,2,0.5,1.5\n",
            "date,open,high,low,close\n2024-01-02,1e2,+2,.5,-\n2024-01-03,inf,2,0.5,1.5",
        ];
        let show = |r: Result<ParsedCsv, DataError>| match r {
            Ok(p) => format!("{:?} {:?} {}", p.bars, p.adj_close, p.has_volume),
            Err(e) => format!("error: {e}"),
        };
        for (i, csv) in cases.iter().enumerate() {
            assert!(plain_body(csv).is_some(), "{csv:?} takes the plain path");
            if i == 6 {
                // The csv reader leaves comment lines out of its line
                // numbers; the splitter names the file's real line (below).
                continue;
            }
            let plain = show(parse_csv_with(csv.as_bytes(), "f.csv", Some("X"), true));
            let reader = show(parse_csv_with(csv.as_bytes(), "f.csv", Some("X"), false));
            assert_eq!(plain, reader, "{csv:?}");
        }
        assert!(show(parse_csv(cases[5].as_bytes(), "f.csv", None)).contains("line 3"));
        assert!(show(parse_csv(cases[6].as_bytes(), "f.csv", None)).contains("line 3"));
        // Quotes or bare CRs go to the csv reader.
        assert!(plain_body("date,open\n\"2024-01-02\",1\n").is_none());
        assert!(plain_body("date,open\r2024-01-02,1\r").is_none());
        assert_eq!(iso_date("2024-01-02"), Some(d("2024-01-02")));
        for s in ["2024-1-02", "2024-01-0x", "2024-13-01", "2024/01/02"] {
            assert_eq!(iso_date(s), None, "{s}");
        }
    }

    /// Where the fast path answers, it answers what `str::parse` does.
    fn check_plain_decimal(s: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        if let Some(x) = plain_decimal(s) {
            let y: f64 = s.parse().map_err(|e| {
                proptest::test_runner::TestCaseError::fail(format!("{s:?}: fast {x}, std {e}"))
            })?;
            proptest::prop_assert_eq!(x.to_bits(), y.to_bits(), "{:?}", s);
        }
        Ok(())
    }

    #[test]
    fn plain_decimals_match_str_parse() {
        for s in [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "101.25",
            "7",
            ".5",
            "5.",
            "-.5",
            "0.1",
            "0.3",
            "9007199254740992",
            "9007199254740993",
            "1234567890.123456789",
            "00000000000000000001.5",
            "0.0000000000000000000001",
            "123.4567890123456789012",
            "",
        ] {
            check_plain_decimal(s).unwrap();
        }
        // Taken: the common price spellings.
        assert_eq!(plain_decimal("101.25"), Some(101.25));
        assert_eq!(
            plain_decimal("-0").map(f64::to_bits),
            Some((-0.0f64).to_bits())
        );
        assert_eq!(plain_decimal(".5"), Some(0.5));
        // Left to str::parse: exponents, signs it spells, specials, too many
        // digits, a mantissa past 2^53, a lone point or sign.
        for s in [
            "1e5",
            "+1",
            "inf",
            "NaN",
            "1.2.3",
            "12345678901234567",
            "9007199254740993",
            ".",
            "-",
            "",
            " 1",
            "1_000",
            "0x10",
        ] {
            assert_eq!(plain_decimal(s), None, "{s:?}");
        }
    }

    /// Every value of the bars, by bit pattern, with the dates.
    fn bar_bits(b: &Bars) -> Vec<(NaiveDate, [u64; 5])> {
        (0..b.len())
            .map(|i| {
                let v = [b.open[i], b.high[i], b.low[i], b.close[i], b.volume[i]];
                (b.dates[i], v.map(f64::to_bits))
            })
            .collect()
    }

    /// A price file in the artifact's layout, most cells plain and some
    /// spelled otherwise: the one-pass reading, the general one and the csv
    /// reader agree on every file, and where the rows are kept as text,
    /// that text reads back to the same bars.
    fn check_standard_file(text: &str) -> Result<bool, proptest::test_runner::TestCaseError> {
        let one_pass = parse_csv_with(text.as_bytes(), "f.csv", None, true);
        let reader = parse_csv_with(text.as_bytes(), "f.csv", None, false);
        let (one_pass, reader) = match (one_pass, reader) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(_), Err(_)) => return Ok(false),
            (a, b) => {
                proptest::prop_assert!(false, "{text:?}: {a:?} vs {b:?}");
                unreachable!()
            }
        };
        proptest::prop_assert_eq!(
            bar_bits(&one_pass.bars),
            bar_bits(&reader.bars),
            "{:?}",
            text
        );
        proptest::prop_assert!(reader.row_starts.is_none(), "the csv reader keeps no rows");
        let Some(starts) = &one_pass.row_starts else {
            return Ok(false);
        };
        proptest::prop_assert_eq!(starts.len(), one_pass.bars.len() + 1);
        let rows = text
            .get(starts[0]..starts[starts.len() - 1])
            .unwrap_or_default();
        let copied = format!("date,open,high,low,close,volume\n{rows}");
        let again = parse_csv_with(copied.as_bytes(), "copy.csv", None, false)
            .map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        proptest::prop_assert_eq!(
            bar_bits(&again.bars),
            bar_bits(&one_pass.bars),
            "{:?}",
            text
        );
        // Line by line, too: each kept start begins its row's line.
        for (i, w) in starts.windows(2).enumerate() {
            let line = text.get(w[0]..w[1]).unwrap_or_default();
            proptest::prop_assert!(
                line.starts_with(&one_pass.bars.dates[i].to_string()),
                "{:?}",
                line
            );
        }
        Ok(true)
    }

    /// Cell spellings: mostly plain (copied as written), some that only the
    /// general reading takes (no copy), some that fail the file.
    fn standard_cell() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            8 => "-?[0-9]{1,6}(\\.[0-9]{0,4})?",
            1 => "\\.[0-9]{1,3}|[0-9]{1,3}\\.",
            1 => proptest::sample::select(vec![
                "1e2", "+2", " 5", "5 ", "", "NaN", "12345678901234567", "9007199254740993",
                "-", "0x1", "1.2.3", "\u{a0}7",
            ])
            .prop_map(String::from),
        ]
    }

    fn standard_file() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let line = (
            0u8..40,
            proptest::collection::vec(standard_cell(), 5),
            proptest::sample::select(vec!["\n", "\n", "\n", "\n", "\r\n"]),
        );
        (proptest::collection::vec(line, 0..30), any::<bool>()).prop_map(|(lines, last_eol)| {
            let mut s = String::from("date,open,high,low,close,volume\n");
            let mut day = NaiveDate::from_ymd_opt(2001, 1, 2).unwrap_or_default();
            let n = lines.len();
            for (i, (odd, cells, eol)) in lines.into_iter().enumerate() {
                day += chrono::Duration::days(1);
                match odd {
                    0 => s.push_str("# a note"),
                    1 => {}
                    2 => s.push_str(&format!("{day},1,2,0.5,1.5,9,extra")),
                    3 => s.push_str(&format!("{day},1,2,0.5")),
                    4 => s.push_str(&format!("{}", day.format("%Y%m%d"))),
                    _ => s.push_str(&format!("{day},{}", cells.join(","))),
                }
                if i + 1 < n || last_eol {
                    s.push_str(if odd < 5 { "\n" } else { eol });
                }
            }
            s
        })
    }

    /// Plain files of plain cells, short or long: the rows are always kept
    /// as text.
    fn plain_file() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        // Prices in cents and full-precision doubles alike.
        let cell = "-?[0-9]{1,6}(\\.[0-9]{0,4})?|[0-9]{1,3}\\.[0-9]{13,18}";
        let row = proptest::collection::vec(cell, 5);
        (proptest::collection::vec(row, 1..30), any::<bool>()).prop_map(|(rows, last_eol)| {
            let mut s =
                String::from("\u{feff}# made by a tool\n\nDate,Open,High,Low,Close,Volume\n");
            let mut day = NaiveDate::from_ymd_opt(1999, 12, 30).unwrap_or_default();
            for (i, cells) in rows.iter().enumerate() {
                day += chrono::Duration::days(1);
                s.push_str(&format!("{day},{}", cells.join(",")));
                if i + 1 < rows.len() || last_eol {
                    s.push('\n');
                }
            }
            s
        })
    }

    #[test]
    fn standard_files_read_alike_and_their_kept_rows_read_back() {
        use proptest::test_runner::{Config, TestRng, TestRunner};
        let config = Config {
            cases: 600,
            failure_persistence: None,
            ..Config::default()
        };
        let rng = TestRng::deterministic_rng(config.rng_algorithm);
        let kept = std::cell::Cell::new(0);
        TestRunner::new_with_rng(config.clone(), rng)
            .run(&standard_file(), |text| {
                kept.set(kept.get() + u32::from(check_standard_file(&text)?));
                Ok(())
            })
            .unwrap();
        // Some mixed files still qualify (every line plain).
        assert!(kept.get() >= 10, "{} of 600 kept their rows", kept.get());
        let rng = TestRng::deterministic_rng(config.rng_algorithm);
        TestRunner::new_with_rng(
            Config {
                cases: 200,
                ..config
            },
            rng,
        )
        .run(&plain_file(), |text| {
            proptest::prop_assert!(check_standard_file(&text)?, "{:?}", text);
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn kept_rows_are_cut_to_the_range_and_dropped_by_any_change() {
        let text = "date,open,high,low,close,volume\n2024-01-02,1.10,2,0.5,1.5,100\n2024-01-03,1,2,0.5,1.5,200\n2024-01-04,1,2,0.5,1.5,300";
        let p = parse_csv(text.as_bytes(), "f.csv", None).unwrap();
        let (range, rows) = p.exact_rows(Some(d("2024-01-03")), None).unwrap();
        assert_eq!(
            (&text[range], rows),
            ("2024-01-03,1,2,0.5,1.5,200\n2024-01-04,1,2,0.5,1.5,300", 2)
        );
        let (range, rows) = p.exact_rows(None, Some(d("2024-01-02"))).unwrap();
        assert_eq!((&text[range], rows), ("2024-01-02,1.10,2,0.5,1.5,100\n", 1));
        assert_eq!(
            p.exact_rows(Some(d("2025-01-01")), None).map(|(_, n)| n),
            Some(0)
        );
        // Out of date order, an adjusted close, another delimiter, a
        // column order of its own: no rows kept.
        for other in [
            "date,open,high,low,close,volume\n2024-01-03,1,2,0.5,1.5,1\n2024-01-02,1,2,0.5,1.5,1\n",
            "date,open,high,low,close,adj close,volume\n2024-01-02,1,2,0.5,1.5,1.4,1\n",
            "date;open;high;low;close;volume\n2024-01-02;1;2;0.5;1.5;1\n",
            "date,close,high,low,open,volume\n2024-01-02,1,2,0.5,1.5,1\n",
            "date,open,high,low,close\n2024-01-02,1,2,0.5,1.5\n",
        ] {
            let p = parse_csv(other.as_bytes(), "f.csv", None).unwrap();
            assert!(p.exact_rows(None, None).is_none(), "{other:?}");
        }
    }

    /// A parse is kept for later runs only when it was not quick: one
    /// needing `str::parse` (full-precision doubles) or the general reading.
    #[test]
    fn only_slow_parses_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let head = "date,open,high,low,close,volume\n";
        for (name, row, quick) in [
            ("CENTS", "2024-01-02,1.10,2,0.5,1.5,100", true),
            ("LONG", "2024-01-02,1.1000000000000001,2,0.5,1.5,100", false),
            ("SPACED", "2024-01-02, 1.1,2,0.5,1.5,100", false),
        ] {
            let text = format!("{head}{row}\n");
            assert_eq!(
                parse_csv(text.as_bytes(), "f", None).unwrap().quick,
                quick,
                "{name}"
            );
            let path = dir.path().join(format!("{name}.csv"));
            std::fs::write(&path, text).unwrap();
            let s = load_file(&path, name, None, None, Some(&cache), true).unwrap();
            assert_eq!(s.bars.len(), 1);
            assert!(s.source_rows.is_some() != (name == "SPACED"), "{name}");
        }
        let kept = std::fs::read_dir(&cache).unwrap().count();
        assert_eq!(kept, 2, "the two slow parses");
    }

    /// Through the loader: a dropped row or a cut range decides whether the
    /// series carries its source rows.
    #[test]
    fn loaded_series_carry_their_rows_only_when_nothing_was_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.csv");
        std::fs::write(
            &good,
            "date,open,high,low,close,volume\n2024-01-02,1.10,2,0.5,1.5,100\n2024-01-03,1,2,0.5,1.5,200\n",
        )
        .unwrap();
        let copy = |rows: &SourceRows| {
            let out = dir.path().join("copy");
            let mut f = std::fs::File::create(&out).unwrap();
            let same = rows.copy_to(&mut f).unwrap();
            (same, std::fs::read_to_string(&out).unwrap())
        };
        let s = load_file(&good, "GOOD", Some(d("2024-01-03")), None, None, false).unwrap();
        let rows = s.source_rows.as_deref().unwrap();
        assert!(rows.serves(&s.bars));
        let line = "2024-01-03,1,2,0.5,1.5,200\n";
        assert_eq!(copy(rows), (true, line.to_string()));
        assert_eq!(rows.len(), line.len() as u64);
        let mut cut = s.bars.clone();
        cut.retain_range(None, Some(d("2024-01-01")));
        assert!(!rows.serves(&cut), "bars cut after loading are formatted");
        // No line end after the last row: the copy adds one.
        let bare = dir.path().join("bare.csv");
        std::fs::write(
            &bare,
            "date,open,high,low,close,volume\n2024-01-02,1.10,2,0.5,1.5,100",
        )
        .unwrap();
        let s = load_file(&bare, "BARE", None, None, None, false).unwrap();
        let rows = s.source_rows.as_deref().unwrap();
        assert_eq!(
            copy(rows),
            (true, "2024-01-02,1.10,2,0.5,1.5,100\n".to_string())
        );
        // A file changed since it was read is not copied.
        std::thread::sleep(std::time::Duration::from_millis(5));
        std::fs::write(
            &bare,
            "date,open,high,low,close,volume\n2024-01-02,9.10,9,0.5,1.5,100",
        )
        .unwrap();
        assert_eq!(copy(rows), (false, String::new()));
        let bad = dir.path().join("bad.csv");
        std::fs::write(
            &bad,
            "date,open,high,low,close,volume\n2024-01-02,1,2,0.5,1.5,100\n2024-01-03,3,2,0.5,1.5,200\n",
        )
        .unwrap();
        let s = load_file(&bad, "BAD", None, None, None, false).unwrap();
        assert_eq!(s.bars.len(), 1);
        assert!(s.source_rows.is_none(), "a dropped row: formatted");
    }

    proptest::proptest! {
        #[test]
        fn plain_decimals_match_str_parse_on_any_digits(
            s in "-?[0-9]{0,20}(\\.[0-9]{0,24})?"
        ) {
            check_plain_decimal(&s)?;
        }

        #[test]
        fn plain_decimals_match_str_parse_on_printed_doubles(
            x in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO,
            digits in 0usize..20,
        ) {
            check_plain_decimal(&format!("{x}"))?;
            check_plain_decimal(&format!("{x:.digits$}"))?;
            check_plain_decimal(&format!("{:.2}", x % 1e6))?;
        }

        #[test]
        fn trim_cell_is_str_trim(s in "[ \t\u{a0}\u{2003}\u{3000}a-z0-9.,é-]{0,12}") {
            proptest::prop_assert_eq!(trim_cell(&s), s.trim());
        }
    }

    #[test]
    fn candidate_names_cover_case_and_suffix() {
        let n = candidate_names("aapl.us");
        assert!(n.contains(&"aapl.us.csv".to_string()));
        assert!(n.contains(&"AAPL.csv".to_string()));
        assert!(n.contains(&"aapl.csv".to_string()));
        assert_eq!(candidate_names("prices/x.csv"), vec!["prices/x.csv"]);
        assert!(safe_relative("../x.csv").is_none());
        assert!(safe_relative("/etc/x.csv").is_none());
    }
}
