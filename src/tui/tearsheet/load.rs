//! Reading a run directory into what the view shows: the tear sheet
//! (`research::tearsheet::from_run_dir` then `compute`) and the run's
//! `trades.csv` as rows of text. IO and computation: the runtime calls
//! [`load`] on a blocking thread, never the renderer.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use crate::research::tearsheet::{TearSheet, TearSheetError, compute, from_run_dir};

/// Where the engine writes the round trips, relative to the run directory.
pub(crate) const TRADES_FILE: &str = "artifacts/trades.csv";
/// Rows of `trades.csv` the view keeps: a table to read, not a database.
const MAX_TRADE_ROWS: usize = 5_000;
/// A bigger trades file is not read at all.
const MAX_TRADES_BYTES: u64 = 32 << 20;

/// What the view renders.
#[derive(Clone, Debug)]
pub struct SheetData {
    pub sheet: TearSheet,
    /// `trades.csv`, when the run wrote one.
    pub trades: Option<TradesTable>,
    /// How long reading and computing took (shown in the header: the
    /// computation is meant to be milliseconds).
    pub elapsed_ms: u64,
}

/// A CSV as text cells, as the engine wrote them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TradesTable {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Rows past [`MAX_TRADE_ROWS`], not kept.
    pub omitted: usize,
}

/// Why there is no tear sheet. Shared sources: the error travels in a
/// message that is cloned.
#[derive(Clone, Debug, thiserror::Error)]
pub enum SheetLoadError {
    #[error("{0}")]
    Sheet(Arc<TearSheetError>),
}

/// Reads and computes the tear sheet of `run_dir`. A missing or unreadable
/// `trades.csv` only leaves the trades table out.
pub fn load(run_dir: &Path) -> Result<SheetData, SheetLoadError> {
    let t0 = Instant::now();
    let input = from_run_dir(run_dir).map_err(|e| SheetLoadError::Sheet(Arc::new(e)))?;
    let sheet = compute(&input).map_err(|e| SheetLoadError::Sheet(Arc::new(e)))?;
    let trades = read_trades(&run_dir.join(TRADES_FILE));
    let elapsed_ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(SheetData {
        sheet,
        trades,
        elapsed_ms,
    })
}

fn read_trades(path: &Path) -> Option<TradesTable> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return None,
        Err(_) => return None,
    };
    if meta.len() > MAX_TRADES_BYTES {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    parse_trades(&text)
}

/// The rows of a CSV with a header line; `None` when it has no header.
pub fn parse_trades(text: &str) -> Option<TradesTable> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(text.as_bytes());
    let header: Vec<String> = reader.headers().ok()?.iter().map(String::from).collect();
    if header.is_empty() {
        return None;
    }
    let mut table = TradesTable {
        header,
        ..TradesTable::default()
    };
    for record in reader.records().flatten() {
        if table.rows.len() < MAX_TRADE_ROWS {
            table.rows.push(record.iter().map(String::from).collect());
        } else {
            table.omitted += 1;
        }
    }
    Some(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trades_rows_keep_their_text() {
        let t = parse_trades("timestamp,code,side\n2020-01-02,AAPL,buy\n2020-02-03,AAPL,sell\n")
            .unwrap();
        assert_eq!(t.header, ["timestamp", "code", "side"]);
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.rows[1][2], "sell");
        assert_eq!(t.omitted, 0);
        assert!(parse_trades("").is_none());
    }
}
