//! The generator of the embedded market's assets (test builds only: the
//! binary never writes them). It reads the source files of the offline
//! market and writes, under `assets/data/`:
//! - `us_daily_2000_2017.bin` and `us_daily_index.csv` (the pack, see
//!   [`super::pack`]) from `us_daily_2000_2017.csv.gz`;
//! - `us_treasury_curve_1990_2017.csv.gz` and `ff_monthly_1949_2017.csv.gz`
//!   copied byte for byte.
//!
//! Run it with the folder that holds the three source files:
//! `VIBEDESK_MARKET_SOURCE=/path/to/data cargo test --lib -- --ignored
//! generate_embedded_market` (`assets/data/README.md` says where the files
//! come from). It refuses a source row that is not exact to 1e-4, not
//! positive, outside [low, high], or out of date order.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use chrono::NaiveDate;
use sha2::Digest;

use super::pack::{RawColumns, digest, write::encode_block};

/// The files the generator copies unchanged.
const COPIED: [&str; 2] = [
    "us_treasury_curve_1990_2017.csv.gz",
    "ff_monthly_1949_2017.csv.gz",
];

const SOURCE: &str = "us_daily_2000_2017.csv.gz";

/// The source files' SHA-256, as `assets/data/README.md` records them: a
/// different file is refused rather than packed silently.
const SHA256: [(&str, &str); 3] = [
    (
        SOURCE,
        "4cd1d5a54a6fc666aea9f528927d11ec7c2cf0356605cc02337f33416dc1a240",
    ),
    (
        COPIED[0],
        "92ab5a0b71b4efb966ed3d30cf89cb40dbcc61bba5cb8aac96265919a3c81f62",
    ),
    (
        COPIED[1],
        "94e0e179f4efcb632e536ea197d8a636c0cee9cda122d1081be09fc4290b647a",
    ),
];

/// A decimal with at most four places, in 1e-4 units, read from its text
/// (never through a float, so the stored number is the written one).
pub(crate) fn units(text: &str) -> Result<i64, String> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if frac.len() > 4 || whole.is_empty() || whole.starts_with('-') {
        return Err(format!(
            "'{text}' is not a positive decimal with at most 4 places"
        ));
    }
    let w: i64 = whole.parse().map_err(|e| format!("'{text}': {e}"))?;
    let f: i64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<4}")
            .parse()
            .map_err(|e| format!("'{text}': {e}"))?
    };
    Ok(w * 10_000 + f)
}

/// One ticker's rows as read, and its kind.
#[derive(Default)]
struct Ticker {
    kind: String,
    cols: RawColumns,
}

fn read_source(path: &Path) -> Result<BTreeMap<String, Ticker>, String> {
    let gz = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_string(&mut text)
        .map_err(|e| format!("gunzip: {e}"))?;
    let mut lines = text.lines();
    let header = lines.next().unwrap_or("");
    if header != "Ticker,Date,Open,High,Low,Close,Volume,Kind" {
        return Err(format!("unexpected header {header}"));
    }
    let mut out: BTreeMap<String, Ticker> = BTreeMap::new();
    for (i, line) in lines.enumerate() {
        let at = |e: String| format!("line {}: {e}", i + 2);
        let f: Vec<&str> = line.split(',').collect();
        let [ticker, date, o, h, l, c, v, kind] = f[..] else {
            return Err(at(format!("{} fields", f.len())));
        };
        let t = out.entry(ticker.to_string()).or_default();
        if t.kind.is_empty() {
            t.kind = kind.to_string();
        }
        if t.kind != kind || !matches!(kind, "stock" | "etf") {
            return Err(at(format!("kind '{kind}' for {ticker}")));
        }
        let date = NaiveDate::parse_from_str(date, "%Y-%m-%d").map_err(|e| at(e.to_string()))?;
        let (o, h, l, c) = (units(o), units(h), units(l), units(c));
        let (o, h, l, c) = (
            o.map_err(at)?,
            h.map_err(at)?,
            l.map_err(at)?,
            c.map_err(at)?,
        );
        let v: i64 = v.parse().map_err(|e| at(format!("volume '{v}': {e}")))?;
        if o <= 0 || l <= 0 || h < l || !(l..=h).contains(&o) || !(l..=h).contains(&c) || v < 0 {
            return Err(at(format!("{ticker} {date}: not a sane bar")));
        }
        if t.cols.dates.last().is_some_and(|last| *last >= date) {
            return Err(at(format!(
                "{ticker} {date}: dates out of order or repeated"
            )));
        }
        let cols = &mut t.cols;
        cols.dates.push(date);
        cols.open.push(o);
        cols.high.push(h);
        cols.low.push(l);
        cols.close.push(c);
        cols.volume.push(v);
    }
    Ok(out)
}

/// The pack and its index text.
fn pack(tickers: &BTreeMap<String, Ticker>) -> (Vec<u8>, String) {
    let mut bin = Vec::new();
    let mut index = String::from(
        "# The embedded offline market's index (written by the generator in\n\
         # src/research/data/embedded/generate.rs; see assets/data/README.md).\n\
         # One line per ticker; offset and bytes locate its block in\n\
         # us_daily_2000_2017.bin; sha256 digests its rows (pack::digest).\n\
         ticker,kind,first,last,rows,offset,bytes,sha256\n",
    );
    for (name, t) in tickers {
        let block = encode_block(&t.cols);
        let (first, last) = (t.cols.dates[0], t.cols.dates[t.cols.len() - 1]);
        index.push_str(&format!(
            "{name},{},{first},{last},{},{},{},{}\n",
            t.kind,
            t.cols.len(),
            bin.len(),
            block.len(),
            digest(&t.cols)
        ));
        bin.extend_from_slice(&block);
    }
    (bin, index)
}

#[test]
fn decimals_are_read_exactly() {
    assert_eq!(units("3.281"), Ok(32_810));
    assert_eq!(units("175.61"), Ok(1_756_100));
    assert_eq!(units("12"), Ok(120_000));
    assert_eq!(units("0.0001"), Ok(1));
    assert!(units("1.23456").is_err());
    assert!(units("-1.5").is_err());
    assert!(units("").is_err());
}

#[test]
#[ignore = "writes assets/data from VIBEDESK_MARKET_SOURCE (see the module docs)"]
fn generate_embedded_market() {
    let Ok(src) = std::env::var("VIBEDESK_MARKET_SOURCE") else {
        panic!("set VIBEDESK_MARKET_SOURCE to the folder holding {SOURCE}");
    };
    let src = Path::new(&src);
    for (file, want) in SHA256 {
        let bytes = std::fs::read(src.join(file)).unwrap();
        let got: String = sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(got, want, "{file} is not the recorded source");
    }
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/data");
    let tickers = read_source(&src.join(SOURCE)).unwrap();
    let (bin, index) = pack(&tickers);
    std::fs::write(out.join("us_daily_2000_2017.bin"), &bin).unwrap();
    std::fs::write(out.join("us_daily_index.csv"), &index).unwrap();
    // Written, not copied: a copy would keep the source's read-only mode.
    for f in COPIED {
        std::fs::write(out.join(f), std::fs::read(src.join(f)).unwrap()).unwrap();
    }
    let rows: usize = tickers.values().map(|t| t.cols.len()).sum();
    println!(
        "{} tickers, {rows} rows, pack {} bytes",
        tickers.len(),
        bin.len()
    );
}
