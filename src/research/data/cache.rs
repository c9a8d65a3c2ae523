//! The on-disk cache of online answers (docs §7.3; layout under the cache
//! dir): `<cache>/market/<source>/<SYMBOL>_<start>_<end>.csv` holds the
//! cleaned, adjusted bars and a `.json` beside it the provenance.
//!
//! Only closed ranges are cached: a range ending today or later can still
//! change (today's bar is live, late corrections arrive), so it is always
//! fetched. A cache entry that does not read back is ignored and refetched.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use sha2::{Digest, Sha256};

use super::{Bars, PriceSeries, Provenance, Source};

#[derive(Clone, Debug)]
pub struct Cache {
    root: PathBuf,
}

/// Whether a range may be cached: it must end before `today`.
pub(crate) fn is_cacheable(end: Option<NaiveDate>, today: NaiveDate) -> bool {
    end.is_some_and(|e| e < today)
}

/// A file-name-safe spelling of a symbol; a short hash is added when
/// characters had to be replaced, so `EUR/USD` and `EUR_USD` stay apart.
fn file_stem(symbol: &str) -> String {
    let up = symbol.trim().to_ascii_uppercase();
    let safe: String = up
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe == up && !safe.starts_with('.') {
        return safe;
    }
    let digest = Sha256::digest(up.as_bytes());
    let mut hex = String::new();
    for b in &digest[..4] {
        let _ = write!(hex, "{b:02x}");
    }
    format!("{}_{hex}", safe.trim_start_matches('.'))
}

impl Cache {
    /// A cache under `<cache_dir>/market`.
    pub(crate) fn new(cache_dir: &Path) -> Self {
        Cache {
            root: cache_dir.join("market"),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The data file for a request (the provenance sits beside it as `.json`).
    pub(crate) fn path_for(
        &self,
        source: Source,
        symbol: &str,
        start: Option<NaiveDate>,
        end: NaiveDate,
    ) -> PathBuf {
        let start = start.map_or_else(|| "begin".to_string(), |d| d.to_string());
        self.root
            .join(source.as_str())
            .join(format!("{}_{start}_{end}.csv", file_stem(symbol)))
    }

    /// The cached series, if present and readable; the symbol is reported
    /// in the requested spelling and the provenance says it came from cache.
    pub(crate) async fn get(
        &self,
        source: Source,
        symbol: &str,
        start: Option<NaiveDate>,
        end: NaiveDate,
    ) -> Option<PriceSeries> {
        let path = self.path_for(source, symbol, start, end);
        let csv = tokio::fs::read_to_string(&path).await.ok()?;
        let meta = tokio::fs::read(path.with_extension("json")).await.ok()?;
        let parsed = (|| {
            let mut provenance: Provenance = serde_json::from_slice(&meta).ok()?;
            let bars = read_bars(&csv)?;
            if provenance.rows != bars.len() || provenance.source != source {
                return None;
            }
            provenance.from_cache = true;
            provenance.symbol = symbol.trim().to_string();
            Some(PriceSeries {
                symbol: symbol.trim().to_string(),
                bars,
                provenance,
                source_rows: None,
            })
        })();
        if parsed.is_none() {
            tracing::warn!(path = %path.display(), "market cache entry unreadable; refetching");
        }
        parsed
    }

    /// Stores a series for its request range. Written to a temporary file
    /// and renamed, so a reader never sees half an entry.
    pub(crate) async fn put(
        &self,
        series: &PriceSeries,
        start: Option<NaiveDate>,
        end: NaiveDate,
    ) -> std::io::Result<PathBuf> {
        let path = self.path_for(series.provenance.source, &series.symbol, start, end);
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir).await?;
        }
        let meta = serde_json::to_vec_pretty(&series.provenance).map_err(std::io::Error::other)?;
        // Data first, provenance last: an entry counts only when both exist.
        write_atomic(&path, write_bars(&series.bars).as_bytes()).await?;
        write_atomic(&path.with_extension("json"), &meta).await?;
        Ok(path)
    }
}

async fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    tokio::fs::write(&tmp, bytes).await?;
    match tokio::fs::rename(&tmp, path).await {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = tokio::fs::remove_file(&tmp).await;
            Err(e)
        }
    }
}

const HEADER: &str = "date,open,high,low,close,volume";

/// Floats are written in Rust's shortest round-trip form, so a cache hit
/// returns bit-identical values.
fn write_bars(b: &Bars) -> String {
    let mut s = String::with_capacity(64 * (b.len() + 1));
    s.push_str(HEADER);
    s.push('\n');
    for i in 0..b.len() {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{}",
            b.dates[i], b.open[i], b.high[i], b.low[i], b.close[i], b.volume[i]
        );
    }
    s
}

fn read_bars(text: &str) -> Option<Bars> {
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    let mut b = Bars::default();
    for line in lines.filter(|l| !l.is_empty()) {
        let mut f = line.split(',');
        let date = NaiveDate::parse_from_str(f.next()?, "%Y-%m-%d").ok()?;
        let mut num = || f.next()?.parse::<f64>().ok();
        let (o, h, l, c, v) = (num()?, num()?, num()?, num()?, num()?);
        b.push(date, o, h, l, c, v);
    }
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_are_safe_and_distinct() {
        assert_eq!(file_stem("aapl"), "AAPL");
        assert_eq!(file_stem("0700.HK"), "0700.HK");
        let a = file_stem("EUR/USD");
        let b = file_stem("EUR_USD");
        assert!(a.starts_with("EUR_USD_") && a != b, "{a} {b}");
        assert!(!file_stem("../x").contains('/'));
    }

    #[test]
    fn bars_round_trip_exactly() {
        let mut b = Bars::default();
        let d = NaiveDate::from_ymd_opt(2024, 1, 2).unwrap();
        b.push(d, 0.1 + 0.2, 1.0 / 3.0, 1e-300, 185.64, f64::NAN);
        let back = read_bars(&write_bars(&b)).unwrap();
        assert_eq!(back.open, b.open);
        assert_eq!(back.high, b.high);
        assert!(back.volume[0].is_nan());
        assert!(is_cacheable(Some(d), d.succ_opt().unwrap()));
        assert!(!is_cacheable(Some(d), d));
        assert!(!is_cacheable(None, d));
    }
}
