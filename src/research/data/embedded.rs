//! The embedded offline market (docs §7.3): daily OHLCV of 131 US
//! instruments, 2000-01-03 to 2017-11-10 — 106 stocks and 25 ETFs,
//! 540,808 rows — from the "Huge Stock Market Dataset" (Boris Marjanovic,
//! Kaggle, CC0 1.0; prices originally from Stooq; see NOTICE and
//! `assets/data/README.md`).
//!
//! Prices are split- and dividend-adjusted backwards by the source (the
//! last bar is the nominal price), so nothing is scaled on load. The set is
//! packed per ticker ([`pack`]): a symbol's first load inflates its block
//! alone, and the bars are kept for the rest of the process.
//!
//! The universe has two biases a user must hear about ([`BIAS_NOTE`]):
//! every name was alive in November 2017, and the stocks were picked by
//! their 2012–2017 trading volume.

#[cfg(test)]
mod generate;
pub mod pack;

use std::sync::{Arc, OnceLock};

use chrono::{NaiveDate, Utc};

use super::clean::{self, DropReport};
use super::market::{Market, us_base};
use super::{Bars, DataError, PriceSeries, Provenance, Source};

/// The packed blocks, compiled in.
const PACK: &[u8] = include_bytes!("../../../assets/data/us_daily_2000_2017.bin");
/// Their index: one line per ticker (see [`pack`]).
const INDEX: &str = include_str!("../../../assets/data/us_daily_index.csv");

/// Where the data lives in the source tree, for provenance.
pub const LOCATION: &str = "embedded:assets/data/us_daily_2000_2017.bin";
/// Attribution, also in NOTICE.
pub(crate) const ATTRIBUTION: &str =
    "Huge Stock Market Dataset (Boris Marjanovic, Kaggle, CC0 1.0)";
/// What was done to the prices, for every series' provenance.
pub(crate) const ADJUSTMENT_NOTE: &str = "split- and dividend-adjusted backwards by the source (Stooq); the last bar is the nominal price; volume as the source gives it";
/// The universe's biases, said wherever the set is described.
pub(crate) const BIAS_NOTE: &str = "survivorship bias: every name was still listed in November 2017; look-ahead in the selection: the stocks were picked by their 2012-2017 trading volume";

/// What an instrument is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Stock,
    Etf,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Stock => "stock",
            Kind::Etf => "etf",
        }
    }
}

/// One instrument of the set, as its index line describes it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Instrument {
    pub ticker: String,
    pub kind: Kind,
    pub first: NaiveDate,
    pub last: NaiveDate,
    pub rows: usize,
    /// The block's place in the pack.
    #[serde(skip)]
    pub block: std::ops::Range<usize>,
    /// The digest of the rows the generator read ([`pack::digest`]).
    #[serde(skip)]
    pub sha256: String,
}

/// Why the embedded dataset does not load (a broken build). Kept once per
/// process and handed to every caller, hence shared sources.
#[derive(Clone, Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error("index line {line}: {detail}")]
    Index { line: usize, detail: String },
    #[error("block of {ticker}: {detail}")]
    Block {
        ticker: String,
        detail: pack::BlockError,
    },
    #[error("{file}: {detail}")]
    Table {
        file: &'static str,
        detail: Arc<str>,
    },
}

fn parse_index(text: &str) -> Result<Vec<Instrument>, EmbeddedError> {
    let mut out: Vec<Instrument> = Vec::new();
    let mut header = false;
    for (i, line) in text.lines().enumerate() {
        let err = |detail: String| EmbeddedError::Index {
            line: i + 1,
            detail,
        };
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if !header {
            if line != "ticker,kind,first,last,rows,offset,bytes,sha256" {
                return Err(err(format!("unexpected header {line}")));
            }
            header = true;
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        let [ticker, kind, first, last, rows, offset, bytes, sha256] = f[..] else {
            return Err(err(format!("{} fields", f.len())));
        };
        let date = |s: &str| {
            NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|e| err(format!("'{s}': {e}")))
        };
        let int = |s: &str| s.parse::<usize>().map_err(|e| err(format!("'{s}': {e}")));
        let (offset, bytes) = (int(offset)?, int(bytes)?);
        let block = offset..offset.saturating_add(bytes);
        if block.end > PACK.len() {
            return Err(err(format!("block {block:?} past the pack's end")));
        }
        if out.last().is_some_and(|p| p.ticker.as_str() >= ticker) {
            return Err(err(format!("{ticker} is out of order")));
        }
        out.push(Instrument {
            ticker: ticker.to_string(),
            kind: match kind {
                "stock" => Kind::Stock,
                "etf" => Kind::Etf,
                other => return Err(err(format!("kind '{other}'"))),
            },
            first: date(first)?,
            last: date(last)?,
            rows: int(rows)?,
            block,
            sha256: sha256.to_string(),
        });
    }
    Ok(out)
}

static UNIVERSE: OnceLock<Result<Vec<Instrument>, EmbeddedError>> = OnceLock::new();

/// Every instrument of the set, sorted by ticker.
pub fn universe() -> Result<&'static [Instrument], DataError> {
    UNIVERSE
        .get_or_init(|| parse_index(INDEX))
        .as_ref()
        .map(Vec::as_slice)
        .map_err(|e| DataError::Embedded(e.clone()))
}

/// The instrument of a symbol (`AAPL`, `aapl`, `AAPL.US`) and its place.
fn find(symbol: &str) -> Option<(usize, &'static Instrument)> {
    let all = universe().ok()?;
    let base = us_base(symbol);
    let i = all
        .binary_search_by(|x| x.ticker.as_str().cmp(base.as_str()))
        .ok()?;
    Some((i, &all[i]))
}

/// The instrument of a symbol, if the set holds it.
pub(crate) fn instrument(symbol: &str) -> Option<&'static Instrument> {
    find(symbol).map(|(_, x)| x)
}

/// Whether the set holds `symbol` over the whole of `[start, end]` (no
/// slack for closed days: a caller may rely on a `true`).
pub(crate) fn spans(symbol: &str, start: NaiveDate, end: NaiveDate) -> bool {
    instrument(symbol).is_some_and(|x| x.first <= start && end <= x.last)
}

type Decoded = Result<(Bars, DropReport), EmbeddedError>;

/// Each ticker's decoded bars, filled on first use.
static BLOCKS: OnceLock<Vec<OnceLock<Decoded>>> = OnceLock::new();

fn decode(x: &Instrument) -> Decoded {
    let fail = |detail: pack::BlockError| EmbeddedError::Block {
        ticker: x.ticker.clone(),
        detail,
    };
    let block = PACK
        .get(x.block.clone())
        .ok_or_else(|| fail(pack::BlockError::OutsidePack))?;
    let raw = pack::decode_block(block, x.rows).map_err(fail)?;
    let price =
        |v: &[i64]| -> Vec<f64> { v.iter().map(|&u| u as f64 / pack::PRICE_UNITS).collect() };
    let mut bars = Bars {
        open: price(&raw.open),
        high: price(&raw.high),
        low: price(&raw.low),
        close: price(&raw.close),
        volume: raw.volume.iter().map(|&v| v as f64).collect(),
        dates: raw.dates,
    };
    // The generator checked every bar; the filter stays so that a broken
    // pack cannot put an impossible bar into a backtest.
    let dropped = clean::sanitize(&mut bars);
    Ok((bars, dropped))
}

/// A symbol's decoded bars (decoded once per process).
fn decoded(symbol: &str) -> Result<&'static (Bars, DropReport), DataError> {
    let all = universe()?;
    let (i, x) = find(symbol).ok_or_else(|| not_held(symbol))?;
    let blocks = BLOCKS.get_or_init(|| all.iter().map(|_| OnceLock::new()).collect());
    let slot = blocks.get(i).ok_or_else(|| not_held(symbol))?;
    slot.get_or_init(|| decode(x))
        .as_ref()
        .map_err(|e| DataError::Embedded(e.clone()))
}

/// The raw stored columns of a symbol (for the digest check).
pub fn raw_columns(symbol: &str) -> Result<pack::RawColumns, DataError> {
    let (_, x) = find(symbol).ok_or_else(|| not_held(symbol))?;
    let block = PACK.get(x.block.clone()).unwrap_or_default();
    pack::decode_block(block, x.rows).map_err(|detail| {
        DataError::Embedded(EmbeddedError::Block {
            ticker: x.ticker.clone(),
            detail,
        })
    })
}

/// The tickers the set holds, sorted.
pub fn symbols() -> Vec<&'static str> {
    universe()
        .map(|u| u.iter().map(|x| x.ticker.as_str()).collect())
        .unwrap_or_default()
}

/// Whether the set has this symbol (`AAPL`, `aapl`, `AAPL.US`).
pub(crate) fn has(symbol: &str) -> bool {
    find(symbol).is_some()
}

/// The first and last date held for a symbol.
pub fn coverage(symbol: &str) -> Result<Option<(NaiveDate, NaiveDate)>, DataError> {
    universe()?;
    Ok(instrument(symbol).map(|x| (x.first, x.last)))
}

/// The whole history of a symbol.
pub fn bars(symbol: &str) -> Result<Bars, DataError> {
    decoded(symbol).map(|(b, _)| b.clone())
}

fn not_held(symbol: &str) -> DataError {
    let all = symbols();
    DataError::NotFound {
        loader: Source::Embedded,
        symbol: symbol.to_string(),
        detail: format!(
            "the embedded set holds {} US stocks and ETFs (run `vibedesk data --list`), not this one",
            all.len()
        ),
    }
}

/// A symbol's bars within `[start, end]`, with provenance. An empty range
/// is returned as an empty series (callers decide).
pub fn load(
    symbol: &str,
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
) -> Result<PriceSeries, DataError> {
    let (all, dropped) = decoded(symbol)?;
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
        adjustments: vec![ADJUSTMENT_NOTE.to_string()],
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

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn every_block_decodes_to_its_index_line_and_digest() {
        let all = universe().unwrap();
        assert_eq!(all.len(), 131);
        let mut total = 0;
        for x in all {
            let raw = raw_columns(&x.ticker).unwrap();
            assert_eq!(pack::digest(&raw), x.sha256, "{}", x.ticker);
            let b = bars(&x.ticker).unwrap();
            assert_eq!(b.len(), x.rows, "{}", x.ticker);
            assert_eq!(
                (b.first_date(), b.last_date()),
                (Some(x.first), Some(x.last))
            );
            total += b.len();
        }
        assert_eq!(total, 540_808);
        // The blocks tile the pack: nothing in it is unaccounted for.
        let bytes: usize = all.iter().map(|x| x.block.len()).sum();
        assert_eq!(bytes, PACK.len());
    }

    #[test]
    fn spans_match_the_data() {
        for x in universe().unwrap() {
            let (first, last) = coverage(&x.ticker).unwrap().unwrap();
            assert!(spans(&x.ticker, first, last), "{}", x.ticker);
            assert!(!spans(&x.ticker, first.pred_opt().unwrap(), last));
            assert!(!spans(&x.ticker, first, last.succ_opt().unwrap()));
        }
        assert!(spans("aapl.us", d("2005-01-01"), d("2012-12-31")));
        assert!(
            !spans("SPY", d("2005-01-01"), d("2006-01-01")),
            "from 2005-02-25"
        );
        assert!(!spans("NVDA", d("2005-01-01"), d("2006-01-01")));
        assert!(has("brk-b") && !has("NVDA"));
        let e = load("NVDA", None, None).unwrap_err().to_string();
        assert!(
            e.contains("131 US stocks and ETFs") && e.contains("data --list"),
            "{e}"
        );
    }

    #[test]
    fn a_broken_index_is_named_by_line() {
        let e = parse_index("ticker,kind\n").unwrap_err().to_string();
        assert!(
            e.contains("line 1") && e.contains("unexpected header"),
            "{e}"
        );
        let head = "ticker,kind,first,last,rows,offset,bytes,sha256\n";
        let e = parse_index(&format!(
            "{head}B,stock,2000-01-03,2000-01-04,2,0,1,x\nA,stock,2000-01-03,2000-01-04,2,1,1,x\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 3") && e.contains("out of order"), "{e}");
        let e = parse_index(&format!("{head}A,bond,2000-01-03,2000-01-04,2,0,1,x\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("kind 'bond'"), "{e}");
    }
}
