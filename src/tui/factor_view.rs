//! The factor view (docs §17.12): a screen's results (a
//! [`ScreenRecord`], docs §17.9) full screen. The factors in ranking order
//! on the left; for the selected one its rank IC series with the mean and a
//! rolling mean, the quantile equity curves and the IC decay; a second tab
//! with the correlation heatmap of the top factors' rank IC series.
//!
//! It opens with `/factors [path]` (the newest record under the data dir
//! when no path is given) or `f` on a chat result that names a
//! `screen_file`. The record is read on a blocking thread ([`load`]) and
//! arrives as `Msg::FactorsLoaded`, so the view only renders parsed values.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::keymap::Action;
use crate::research::factor::record::{RecordError, ScreenRecord, screens_dir};

/// The view's tabs, in key order (1–2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FactorTab {
    /// The list and the selected factor's charts.
    Factors,
    /// The correlation heatmap.
    Correlation,
}

/// A record as the view shows it.
#[derive(Clone, Debug)]
pub struct FactorData {
    pub path: PathBuf,
    pub record: ScreenRecord,
    /// How long reading took (shown in the header).
    pub elapsed_ms: u64,
}

/// Why there is no factor view. Shared sources: the error travels in a
/// message that is cloned.
#[derive(Clone, Debug, thiserror::Error)]
pub enum FactorLoadError {
    #[error(
        "no screen record under {0}: run `vibedesk factor screen`, or ask for a factor screen, first"
    )]
    NoRecord(PathBuf),
    #[error("{0}")]
    Record(Arc<RecordError>),
}

/// Reads the record at `path` (a file or its directory), or the newest one
/// under `data_dir`'s `factor/` when `path` is `None`.
pub fn load(data_dir: &Path, path: Option<&Path>) -> Result<FactorData, FactorLoadError> {
    let t0 = Instant::now();
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => {
            let dir = screens_dir(data_dir);
            ScreenRecord::newest(&dir).ok_or(FactorLoadError::NoRecord(dir))?
        }
    };
    let record = ScreenRecord::read(&path).map_err(|e| FactorLoadError::Record(Arc::new(e)))?;
    Ok(FactorData {
        path,
        record,
        elapsed_ms: u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

/// The absolute `screen_file` a tool result names (the `factor_screen`
/// tool's answer), if any.
pub fn result_screen_file(text: &str) -> Option<PathBuf> {
    super::backtest::result_abs_path(text, "screen_file")
}

/// Where the view is.
#[derive(Clone, Debug)]
pub enum FactorState {
    Loading,
    Loaded(Box<FactorData>),
    /// Why there is no view, short enough for one line.
    Failed(String),
}

/// The overlay's state.
#[derive(Clone, Debug)]
pub struct FactorView {
    /// Routes the load's answer to this view.
    pub id: u64,
    /// What was asked for: a file, or `None` for the newest record.
    pub asked: Option<PathBuf>,
    pub state: FactorState,
    pub tab: FactorTab,
    /// The selected row: a position in the screen's ranking.
    pub selected: usize,
    /// The first row of the list shown.
    pub(crate) list_top: usize,
    /// Rows of the list in the last frame: a page.
    pub(crate) page: usize,
}

impl FactorView {
    /// A view waiting for the record at `asked` (the newest when `None`).
    pub fn new(asked: Option<PathBuf>) -> Self {
        FactorView {
            id: super::backtest::next_id(),
            asked,
            state: FactorState::Loading,
            tab: FactorTab::Factors,
            selected: 0,
            list_top: 0,
            page: 10,
        }
    }

    /// A view of a record already read (tests).
    pub fn with_data(data: FactorData) -> Self {
        let mut v = FactorView::new(Some(data.path.clone()));
        v.state = FactorState::Loaded(Box::new(data));
        v
    }

    /// The record, once read.
    pub fn data(&self) -> Option<&FactorData> {
        match &self.state {
            FactorState::Loaded(d) => Some(d),
            FactorState::Loading | FactorState::Failed(_) => None,
        }
    }

    /// Takes the load's answer.
    pub fn loaded(&mut self, result: Result<FactorData, FactorLoadError>) {
        self.state = match result {
            Ok(d) => FactorState::Loaded(Box::new(d)),
            Err(e) => FactorState::Failed(e.to_string()),
        };
        self.selected = 0;
        self.list_top = 0;
    }

    fn rows(&self) -> usize {
        self.data().map_or(0, |d| ranked(&d.record).len())
    }

    fn select(&mut self, to: usize) {
        self.selected = to.min(self.rows().saturating_sub(1));
    }

    /// Handles a named action (closing is the overlay's business).
    pub fn handle(&mut self, action: Action) {
        let (cur, page) = (self.selected, self.page.max(1));
        match action {
            Action::NextTab | Action::PrevTab => {
                self.tab = match self.tab {
                    FactorTab::Factors => FactorTab::Correlation,
                    FactorTab::Correlation => FactorTab::Factors,
                }
            }
            Action::FactorList => self.tab = FactorTab::Factors,
            Action::FactorHeatmap => self.tab = FactorTab::Correlation,
            Action::Up => self.select(cur.saturating_sub(1)),
            Action::Down => self.select(cur.saturating_add(1)),
            Action::PageUp => self.select(cur.saturating_sub(page)),
            Action::PageDown => self.select(cur.saturating_add(page)),
            Action::Top => self.select(0),
            Action::Bottom => self.select(usize::MAX),
            _ => {}
        }
    }
}

/// The factors in ranking order (indices into `screen.factors`), then any
/// the ranking leaves out, so every factor has a row.
pub(crate) fn ranked(record: &ScreenRecord) -> Vec<usize> {
    let n = record.screen.factors.len();
    let mut out: Vec<usize> = record
        .screen
        .ranking
        .iter()
        .copied()
        .filter(|i| *i < n)
        .collect();
    let seen = out.clone();
    out.extend((0..n).filter(|i| !seen.contains(i)));
    out
}
