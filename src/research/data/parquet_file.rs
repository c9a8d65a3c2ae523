//! Parquet files for the `local` loader, through the `parquet` crate's
//! record API (no Arrow: a daily history is a few thousand rows).
//!
//! Columns are found by name exactly as in CSV files ([`super::local`]):
//! date (a `DATE`, a millisecond, microsecond or nanosecond timestamp — as
//! pandas writes a `DatetimeIndex` — an ISO string, or integer Unix seconds
//! / milliseconds / `YYYYMMDD`), open, high, low, close, optional volume
//! and adjusted close, optional ticker. Numbers may be any integer or
//! floating type; nulls become missing values, which the sanity filter
//! drops. Snappy, zstd, gzip and LZ4 pages are read.

use std::fs::File;
use std::path::Path;

use chrono::{DateTime, NaiveDate, Utc};
use parquet::basic::{LogicalType, TimeUnit};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;

use super::table::{Columns, ParsedCsv, check_tickers, matches_symbol, parse_bar_date};
use super::{Bars, DataError};

fn error(origin: &str, detail: String) -> DataError {
    DataError::Parquet {
        path: origin.to_string(),
        detail,
    }
}

/// The crate's error, said in the user's terms where it names a codec this
/// build leaves out (brotli, LZO).
fn read_error(context: String, e: &parquet::errors::ParquetError) -> String {
    let text = e.to_string();
    match text.split("Disabled feature at compile time: ").nth(1) {
        Some(codec) => format!(
            "its pages are compressed with {}, which vibedesk does not read; save it again with snappy, zstd, gzip or lz4 (pandas: df.to_parquet(path, compression=\"zstd\"))",
            codec.trim()
        ),
        None => format!("{context}: {text}"),
    }
}

/// How the date column's integers count time.
#[derive(Clone, Copy)]
enum IntDates {
    /// Plain integers: Unix seconds or milliseconds, or `YYYYMMDD`.
    Plain,
    /// A nanosecond timestamp (the record API hands these over as `Long`).
    Nanos,
}

fn field_date(f: &Field, ints: IntDates) -> Option<NaiveDate> {
    let from_millis = |ms: i64| DateTime::<Utc>::from_timestamp_millis(ms).map(|t| t.date_naive());
    match f {
        Field::Date(days) => NaiveDate::from_ymd_opt(1970, 1, 1)?
            .checked_add_signed(chrono::Duration::days(i64::from(*days))),
        Field::TimestampMillis(ms) => from_millis(*ms),
        Field::TimestampMicros(us) => {
            DateTime::<Utc>::from_timestamp_micros(*us).map(|t| t.date_naive())
        }
        Field::Long(v) => match ints {
            IntDates::Nanos => Some(DateTime::<Utc>::from_timestamp_nanos(*v).date_naive()),
            IntDates::Plain => parse_bar_date(&v.to_string()),
        },
        Field::Int(v) => parse_bar_date(&v.to_string()),
        Field::Str(s) => parse_bar_date(s),
        _ => None,
    }
}

/// A number, `Some(NaN)` for a null, `None` for a value of another kind.
fn field_number(f: &Field) -> Option<f64> {
    Some(match f {
        Field::Null => f64::NAN,
        Field::Double(x) => *x,
        Field::Float(x) => f64::from(*x),
        Field::Float16(x) => f64::from(*x),
        Field::Long(x) => *x as f64,
        Field::Int(x) => f64::from(*x),
        Field::Short(x) => f64::from(*x),
        Field::Byte(x) => f64::from(*x),
        Field::ULong(x) => *x as f64,
        Field::UInt(x) => f64::from(*x),
        Field::UShort(x) => f64::from(*x),
        Field::UByte(x) => f64::from(*x),
        Field::Decimal(d) => decimal(d)?,
        Field::Str(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    })
}

/// A Parquet DECIMAL (big-endian two's complement unscaled value).
fn decimal(d: &parquet::data_type::Decimal) -> Option<f64> {
    let bytes = d.data();
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    let mut v: i128 = if bytes[0] & 0x80 != 0 { -1 } else { 0 };
    for b in bytes {
        v = (v << 8) | i128::from(*b);
    }
    Some(v as f64 / 10f64.powi(d.scale()))
}

fn field_text(f: &Field) -> String {
    match f {
        Field::Str(s) => s.clone(),
        Field::Null => String::new(),
        other => other.to_string(),
    }
}

/// Reads the OHLCV rows of `path` (for `symbol` when a ticker column holds
/// several), in file order.
pub fn parse(path: &Path, origin: &str, symbol: Option<&str>) -> Result<ParsedCsv, DataError> {
    let file = File::open(path).map_err(DataError::read(path))?;
    let reader = SerializedFileReader::new(file)
        .map_err(|e| error(origin, format!("not a readable Parquet file: {e}")))?;
    let schema = reader.metadata().file_metadata().schema_descr_ptr();
    let fields = schema.root_schema().get_fields();
    let cols = Columns::find(fields.iter().map(|f| f.name()), origin)?;
    let ints = match fields
        .get(cols.date)
        .and_then(|f| f.get_basic_info().logical_type_ref())
    {
        Some(LogicalType::Timestamp(t)) if matches!(t.unit, TimeUnit::NANOS) => IntDates::Nanos,
        _ => IntDates::Plain,
    };
    let name_of = |i: usize| {
        fields
            .get(i)
            .map_or(String::new(), |f| f.name().to_string())
    };

    let rows = usize::try_from(reader.metadata().file_metadata().num_rows()).unwrap_or(0);
    let mut out = ParsedCsv {
        bars: Bars::with_capacity(rows),
        adj_close: cols.adj_close.map(|_| Vec::with_capacity(rows)),
        has_volume: cols.volume.is_some(),
        row_starts: None,
        quick: false,
    };
    let mut tickers_seen: Vec<String> = Vec::new();
    let iter = reader
        .get_row_iter(None)
        .map_err(|e| error(origin, read_error("cannot read its rows".into(), &e)))?;
    let mut cells: Vec<Field> = Vec::with_capacity(fields.len());
    for (n, row) in iter.enumerate() {
        let row = row.map_err(|e| error(origin, read_error(format!("row {}", n + 1), &e)))?;
        cells.clear();
        cells.extend(row.into_columns().into_iter().map(|(_, f)| f));
        // Rows are numbered from 1 after a notional header line, as a CSV
        // export of the same table would number them.
        let line = n as u64 + 2;
        let cell = |i: usize| cells.get(i).unwrap_or(&Field::Null);
        if let Some(ti) = cols.ticker {
            let t = field_text(cell(ti));
            if !tickers_seen.contains(&t) {
                tickers_seen.push(t.clone());
            }
            if let Some(sym) = symbol
                && !matches_symbol(&t, sym)
            {
                continue;
            }
        }
        let date = field_date(cell(cols.date), ints).ok_or_else(|| DataError::CsvValue {
            path: origin.to_string(),
            line,
            column: name_of(cols.date),
            detail: format!("'{}' is not a date", cell(cols.date)),
        })?;
        let num = |i: usize| -> Result<f64, DataError> {
            field_number(cell(i)).ok_or_else(|| DataError::CsvValue {
                path: origin.to_string(),
                line,
                column: name_of(i),
                detail: format!("'{}' is not a number", cell(i)),
            })
        };
        out.push_row(&cols, date, num)?;
    }
    if cols.ticker.is_some() {
        check_tickers(&tickers_seen, out.bars.is_empty(), symbol, origin)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn dates_from_every_kind_of_column() {
        let day = d("2024-01-02");
        let secs = 1_704_205_800i64; // 2024-01-02 14:30 UTC
        for (f, ints) in [
            (Field::Date(19_724), IntDates::Plain),
            (Field::TimestampMillis(secs * 1_000), IntDates::Plain),
            (Field::TimestampMicros(secs * 1_000_000), IntDates::Plain),
            (Field::Long(secs * 1_000_000_000), IntDates::Nanos),
            (Field::Long(secs), IntDates::Plain),
            (Field::Long(secs * 1_000), IntDates::Plain),
            (Field::Int(20_240_102), IntDates::Plain),
            (Field::Str("2024-01-02".into()), IntDates::Plain),
        ] {
            assert_eq!(field_date(&f, ints), Some(day), "{f:?}");
        }
        assert_eq!(field_date(&Field::Double(1.0), IntDates::Plain), None);
        assert_eq!(field_date(&Field::Null, IntDates::Plain), None);
    }

    #[test]
    fn numbers_of_every_width_and_nulls() {
        assert_eq!(field_number(&Field::Float(1.5)), Some(1.5));
        assert_eq!(field_number(&Field::Long(7)), Some(7.0));
        assert_eq!(field_number(&Field::UInt(7)), Some(7.0));
        assert_eq!(field_number(&Field::Str(" 2.25 ".into())), Some(2.25));
        assert!(field_number(&Field::Null).is_some_and(f64::is_nan));
        assert_eq!(field_number(&Field::Bool(true)), None);
        // DECIMAL(9, 2) 12345 → 123.45; a negative one in two's complement.
        let pos = parquet::data_type::Decimal::from_bytes(vec![0x30, 0x39].into(), 9, 2);
        assert_eq!(field_number(&Field::Decimal(pos)), Some(123.45));
        let neg = parquet::data_type::Decimal::from_bytes(vec![0xcf, 0xc7].into(), 9, 2);
        assert_eq!(field_number(&Field::Decimal(neg)), Some(-123.45));
    }
}
