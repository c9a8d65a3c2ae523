//! The packed form of the embedded market (docs §7.3): per ticker, one
//! raw-deflate block of columns, found through a plain-text index, so that
//! loading one symbol inflates only that symbol's block.
//!
//! Index (`assets/data/us_daily_index.csv`): `#` comment lines, then the
//! header `ticker,kind,first,last,rows,offset,bytes,sha256` and one line per
//! ticker, sorted by ticker. `offset` and `bytes` locate the block in the
//! pack; `sha256` is the digest of the ticker's rows ([`digest`]) as the
//! generator read them from the source CSV, so a test can hold the decoded
//! rows to the source without the source.
//!
//! Block, before deflate: `rows`, then six columns one after the other,
//! every number a LEB128 varint (signed ones zigzag-coded). Prices are
//! integers in units of 1e-4 (the source has at most four decimals, so
//! this is exact):
//! - date: days since 0001-01-01 (CE), then the gap to the previous date;
//! - close: the first close, then the change from the previous close;
//! - open: minus the previous close (the first: minus its own close);
//! - high: minus max(open, close); low: min(open, close) minus low;
//! - volume: the change from the previous volume (shares, whole numbers).
//!
//! Coding relations between columns keeps the numbers small (a gap, an
//! intraday range) and cut the deflated size by about a tenth against
//! coding each column on its own.

use std::io::Read;

use chrono::{Datelike, NaiveDate};
use sha2::{Digest, Sha256};

/// Prices are stored as integers of this many units per dollar.
pub(crate) const PRICE_UNITS: f64 = 10_000.0;

/// The columns of one ticker in stored units.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawColumns {
    pub dates: Vec<NaiveDate>,
    pub open: Vec<i64>,
    pub high: Vec<i64>,
    pub low: Vec<i64>,
    pub close: Vec<i64>,
    pub volume: Vec<i64>,
}

impl RawColumns {
    pub fn len(&self) -> usize {
        self.dates.len()
    }

    pub fn is_empty(&self) -> bool {
        self.dates.is_empty()
    }
}

/// SHA-256 (hex) of the rows as `YYYY-MM-DD,open,high,low,close,volume\n`
/// lines with prices in stored units: the same for the source CSV the
/// generator read and the block the loader decodes.
pub fn digest(c: &RawColumns) -> String {
    let mut h = Sha256::new();
    let mut line = String::with_capacity(64);
    for i in 0..c.len() {
        line.clear();
        line.push_str(&format!(
            "{},{},{},{},{},{}\n",
            c.dates[i], c.open[i], c.high[i], c.low[i], c.close[i], c.volume[i]
        ));
        h.update(line.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Why a block does not decode (a broken pack).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    #[error("outside the pack")]
    OutsidePack,
    #[error("inflate: {0}")]
    Inflate(String),
    #[error("the block ends inside a number at byte {0}")]
    Truncated(usize),
    #[error("a number longer than 64 bits at byte {0}")]
    LongNumber(usize),
    #[error("{0}")]
    RowCountTooLarge(#[from] std::num::TryFromIntError),
    #[error("the block holds {held} rows, the index says {indexed}")]
    RowCount { held: usize, indexed: usize },
    #[error("{extra} bytes left over after {rows} rows")]
    LeftOver { extra: usize, rows: usize },
    #[error("row {row}: day {day} is not a date")]
    NotADate { row: usize, day: i64 },
}

/// Reads LEB128 varints from a block.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn unsigned(&mut self) -> Result<u64, BlockError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self
                .bytes
                .get(self.at)
                .ok_or(BlockError::Truncated(self.at))?;
            self.at += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(BlockError::LongNumber(self.at))
    }

    fn signed(&mut self) -> Result<i64, BlockError> {
        let z = self.unsigned()?;
        Ok((z >> 1) as i64 ^ -((z & 1) as i64))
    }

    /// `n` signed numbers.
    fn column(&mut self, n: usize) -> Result<Vec<i64>, BlockError> {
        (0..n).map(|_| self.signed()).collect()
    }
}

/// Inflates and decodes one block; `rows` is what the index says it holds.
pub(crate) fn decode_block(deflated: &[u8], rows: usize) -> Result<RawColumns, BlockError> {
    let mut bytes = Vec::with_capacity(rows * 14);
    flate2::read::DeflateDecoder::new(deflated)
        .read_to_end(&mut bytes)
        .map_err(|e| BlockError::Inflate(e.to_string()))?;
    let mut cur = Cursor {
        bytes: &bytes,
        at: 0,
    };
    let n = usize::try_from(cur.unsigned()?)?;
    if n != rows {
        return Err(BlockError::RowCount {
            held: n,
            indexed: rows,
        });
    }
    let days = cur.column(n)?;
    let close_delta = cur.column(n)?;
    let open_gap = cur.column(n)?;
    let high_over = cur.column(n)?;
    let low_under = cur.column(n)?;
    let volume_delta = cur.column(n)?;
    if cur.at != bytes.len() {
        return Err(BlockError::LeftOver {
            extra: bytes.len() - cur.at,
            rows: n,
        });
    }
    let mut c = RawColumns::default();
    let (mut day, mut close, mut volume) = (0i64, 0i64, 0i64);
    for i in 0..n {
        day += days[i];
        let date = i32::try_from(day)
            .ok()
            .and_then(NaiveDate::from_num_days_from_ce_opt)
            .ok_or(BlockError::NotADate { row: i, day })?;
        let prev_close = if i == 0 { close_delta[0] } else { close };
        close += close_delta[i];
        let open = prev_close + open_gap[i];
        volume += volume_delta[i];
        c.dates.push(date);
        c.open.push(open);
        c.high.push(open.max(close) + high_over[i]);
        c.low.push(open.min(close) - low_under[i]);
        c.close.push(close);
        c.volume.push(volume);
    }
    Ok(c)
}

/// The days since 0001-01-01 of a date, as the block stores them.
pub fn day_number(d: NaiveDate) -> i64 {
    i64::from(d.num_days_from_ce())
}

/// Encoding, for the generator and the round-trip tests only: the binary
/// never writes a pack.
#[cfg(test)]
pub mod write {
    use std::io::Write;

    use super::{RawColumns, day_number};

    fn unsigned(out: &mut Vec<u8>, mut x: u64) {
        while x >= 0x80 {
            out.push((x as u8 & 0x7f) | 0x80);
            x >>= 7;
        }
        out.push(x as u8);
    }

    fn signed(out: &mut Vec<u8>, x: i64) {
        unsigned(out, ((x << 1) ^ (x >> 63)) as u64);
    }

    /// The block of `c`, deflated (the inverse of `decode_block`).
    pub(crate) fn encode_block(c: &RawColumns) -> Vec<u8> {
        let n = c.len();
        let mut raw = Vec::with_capacity(n * 14);
        unsigned(&mut raw, n as u64);
        let mut prev = 0;
        for d in &c.dates {
            signed(&mut raw, day_number(*d) - prev);
            prev = day_number(*d);
        }
        let prev_close = |i: usize| if i == 0 { c.close[0] } else { c.close[i - 1] };
        let mut prev = 0;
        for &x in &c.close {
            signed(&mut raw, x - prev);
            prev = x;
        }
        for i in 0..n {
            signed(&mut raw, c.open[i] - prev_close(i));
        }
        for i in 0..n {
            signed(&mut raw, c.high[i] - c.open[i].max(c.close[i]));
        }
        for i in 0..n {
            signed(&mut raw, c.open[i].min(c.close[i]) - c.low[i]);
        }
        let mut prev = 0;
        for &v in &c.volume {
            signed(&mut raw, v - prev);
            prev = v;
        }
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        // Writing to a Vec cannot fail.
        let _ = z.write_all(&raw);
        z.finish().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn blocks_round_trip_including_odd_bars() {
        // A gap down, a bar with open outside [low, high] (the format does
        // not assume clean data), extreme volumes and a long date gap.
        let c = RawColumns {
            dates: vec![d("1999-12-31"), d("2000-01-03"), d("2017-11-10")],
            open: vec![35_833, 20_000, 1_756_100],
            high: vec![36_011, 21_000, 1_756_100],
            low: vec![32_554, 19_000, 1_700_000],
            close: vec![35_833, 19_500, 1_750_000],
            volume: vec![0, 2_423_740_000, 1],
        };
        let block = write::encode_block(&c);
        assert_eq!(decode_block(&block, 3).unwrap(), c);
        let e = decode_block(&block, 4).unwrap_err().to_string();
        assert!(e.contains("holds 3 rows, the index says 4"), "{e}");
        assert!(decode_block(&block[..block.len() / 2], 3).is_err());
        let empty = RawColumns::default();
        assert_eq!(
            decode_block(&write::encode_block(&empty), 0).unwrap(),
            empty
        );
    }

    #[test]
    fn the_digest_reads_the_canonical_lines() {
        let c = RawColumns {
            dates: vec![d("2017-11-08")],
            open: vec![1],
            high: vec![2],
            low: vec![1],
            close: vec![2],
            volume: vec![7],
        };
        let mut h = Sha256::new();
        h.update(b"2017-11-08,1,2,1,2,7\n");
        let want: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(digest(&c), want);
    }
}
