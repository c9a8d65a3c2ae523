//! Factor expressions (docs §17.7): the formulaic-alpha language of
//! Kakushadze's "101 Formulaic Alphas" — a hand-written parser with typed,
//! caret-pointing errors ([`parse`]) and a vectorised evaluator over a
//! date × symbol panel of daily bars ([`evaluate`]) that computes each
//! distinct sub-expression once and never reads a row after the one it
//! fills (docs §17.7.4).

mod ast;
mod eval;
mod groups;
mod kernels;
mod lex;
mod parse;

use std::collections::HashSet;

use chrono::NaiveDate;

use crate::research::data::Bars;

pub use ast::{BinOp, Expr, Input, PairFn, TsFn, UnaryFn};
pub use eval::evaluate;
pub use groups::{Groups, GroupsError, LineProblem};
pub use parse::{MAX_DEPTH, ParseError, ParseErrorKind, parse};

/// Daily bars of several symbols on the union of their dates: row-major,
/// symbol `j` on date `i` at `i * symbols.len() + j`, NaN where the symbol
/// has no bar (a missing bar never borrows a neighbour's price).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OhlcvPanel {
    pub dates: Vec<NaiveDate>,
    pub symbols: Vec<String>,
    pub open: Vec<f64>,
    pub high: Vec<f64>,
    pub low: Vec<f64>,
    pub close: Vec<f64>,
    pub volume: Vec<f64>,
}

/// Why expressions cannot be evaluated.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ExprError {
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error(
        "{symbol}: {dates} dates but {columns} values in a price column; the columns must be as long as the dates"
    )]
    RaggedBars {
        symbol: String,
        dates: usize,
        columns: usize,
    },
    #[error("{symbol}: the dates must be strictly ascending (row {row})")]
    UnsortedDates { symbol: String, row: usize },
    #[error("{0} appears twice in the panel; give each symbol once")]
    DuplicateSymbol(String),
    #[error("the panel's {field} has {got} values; {dates} dates × {symbols} symbols need {want}")]
    PanelShape {
        field: &'static str,
        got: usize,
        want: usize,
        dates: usize,
        symbols: usize,
    },
    #[error("{dates} dates × {symbols} symbols is too large a panel")]
    TooLarge { dates: usize, symbols: usize },
    #[error(
        "indneutralize needs industry groups: pass a groups file of `symbol,group` lines (docs §17.7.3)"
    )]
    NeedsGroups,
    #[error("{0} has no group in the groups file; add a `{0},<group>` line")]
    NoGroup(String),
    #[error("the expression nests deeper than {0} levels")]
    TooDeep(usize),
    #[error("internal error in the expression evaluator: {0}")]
    Internal(&'static str),
    #[error(transparent)]
    Interrupted(#[from] crate::research::Interrupted),
}

impl OhlcvPanel {
    /// Aligns each symbol's bars on the union of their dates.
    pub fn from_bars(series: &[(&str, &Bars)]) -> Result<Self, ExprError> {
        let mut seen = HashSet::new();
        for (sym, b) in series {
            if !seen.insert(*sym) {
                return Err(ExprError::DuplicateSymbol((*sym).to_string()));
            }
            let n = b.dates.len();
            for col in [&b.open, &b.high, &b.low, &b.close, &b.volume] {
                if col.len() != n {
                    return Err(ExprError::RaggedBars {
                        symbol: (*sym).to_string(),
                        dates: n,
                        columns: col.len(),
                    });
                }
            }
            if let Some(row) = b.dates.windows(2).position(|w| w.first() >= w.last()) {
                return Err(ExprError::UnsortedDates {
                    symbol: (*sym).to_string(),
                    row: row + 1,
                });
            }
        }
        let mut dates: Vec<NaiveDate> = series
            .iter()
            .flat_map(|(_, b)| b.dates.iter().copied())
            .collect();
        dates.sort_unstable();
        dates.dedup();
        let (t, n) = (dates.len(), series.len());
        let cells = cells(t, n)?;
        let mut panel = OhlcvPanel {
            symbols: series.iter().map(|(s, _)| (*s).to_string()).collect(),
            open: vec![f64::NAN; cells],
            high: vec![f64::NAN; cells],
            low: vec![f64::NAN; cells],
            close: vec![f64::NAN; cells],
            volume: vec![f64::NAN; cells],
            dates,
        };
        for (j, (_, b)) in series.iter().enumerate() {
            let mut i = 0;
            for (k, d) in b.dates.iter().enumerate() {
                i += panel
                    .dates
                    .get(i..)
                    .map_or(0, |r| r.partition_point(|x| x < d));
                let cell = i * n + j;
                let cols = [
                    (&mut panel.open, &b.open),
                    (&mut panel.high, &b.high),
                    (&mut panel.low, &b.low),
                    (&mut panel.close, &b.close),
                    (&mut panel.volume, &b.volume),
                ];
                for (dst, src) in cols {
                    if let (Some(slot), Some(v)) = (dst.get_mut(cell), src.get(k)) {
                        *slot = *v;
                    }
                }
            }
        }
        Ok(panel)
    }

    pub fn rows(&self) -> usize {
        self.dates.len()
    }

    pub fn width(&self) -> usize {
        self.symbols.len()
    }

    /// Checks the columns against dates × symbols (the fields are public).
    pub(crate) fn check_shape(&self) -> Result<usize, ExprError> {
        let want = cells(self.rows(), self.width())?;
        let fields = [
            ("open", &self.open),
            ("high", &self.high),
            ("low", &self.low),
            ("close", &self.close),
            ("volume", &self.volume),
        ];
        for (field, col) in fields {
            if col.len() != want {
                return Err(ExprError::PanelShape {
                    field,
                    got: col.len(),
                    want,
                    dates: self.rows(),
                    symbols: self.width(),
                });
            }
        }
        Ok(want)
    }
}

fn cells(dates: usize, symbols: usize) -> Result<usize, ExprError> {
    dates
        .checked_mul(symbols)
        .ok_or(ExprError::TooLarge { dates, symbols })
}
