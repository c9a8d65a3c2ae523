//! The tear-sheet view (docs §20.2): a full-screen overlay over one result's
//! [`TearSheet`], in six tabs — overview, monthly, drawdowns, rolling,
//! distribution, trades and positions. It opens from a chat cell that
//! carries a run directory (`s` on the selected cell) or from the run
//! browser (`s` on a backtest result); the computation runs on a blocking
//! thread ([`load`]) and arrives as `Msg::TearSheetLoaded`, so the view only
//! ever renders parsed values.
//!
//! Every tab is a list of lines laid out for the width at hand, so one
//! scroll rule serves them all and a narrow terminal gets fewer columns and
//! shorter labels rather than a cut table. `r` asks the app to write the
//! HTML report ([`SheetEffect::WriteReport`]).

pub(crate) mod charts;
pub mod load;
mod monthly;
mod panels;
mod render;

use std::path::PathBuf;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::keymap::Action;
use super::theme::Theme;
use crate::research::tearsheet::TearSheet;

pub use load::{SheetData, SheetLoadError, TradesTable};

/// The view's tabs, in key order (1–6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SheetTab {
    Overview,
    Monthly,
    Drawdowns,
    Rolling,
    Distribution,
    Trades,
}

impl SheetTab {
    pub const ALL: [SheetTab; 6] = [
        SheetTab::Overview,
        SheetTab::Monthly,
        SheetTab::Drawdowns,
        SheetTab::Rolling,
        SheetTab::Distribution,
        SheetTab::Trades,
    ];

    /// The tab strip's label, and a shorter one for narrow screens.
    pub(crate) fn titles(self) -> (&'static str, &'static str) {
        match self {
            SheetTab::Overview => ("Overview", "Over"),
            SheetTab::Monthly => ("Monthly", "Month"),
            SheetTab::Drawdowns => ("Drawdowns", "DD"),
            SheetTab::Rolling => ("Rolling", "Roll"),
            SheetTab::Distribution => ("Distribution", "Dist"),
            SheetTab::Trades => ("Trades & positions", "Trades"),
        }
    }

    fn index(self) -> usize {
        SheetTab::ALL.iter().position(|t| *t == self).unwrap_or(0)
    }

    fn step(self, forward: bool) -> SheetTab {
        let n = SheetTab::ALL.len();
        let i = self.index();
        let j = if forward {
            (i + 1) % n
        } else {
            (i + n - 1) % n
        };
        SheetTab::ALL.get(j).copied().unwrap_or(SheetTab::Overview)
    }
}

/// Where the sheet is.
#[derive(Clone, Debug)]
pub enum SheetState {
    Loading,
    Loaded(Box<SheetData>),
    /// Why there is no tear sheet, short enough for one line.
    Failed(String),
}

/// What the view asks the app to do.
#[derive(Clone, Debug, PartialEq)]
pub enum SheetEffect {
    /// Write the run's self-contained HTML report (docs §20.3); the answer
    /// comes back as `Msg::ReportWritten` with this view's id.
    WriteReport { id: u64, run_dir: PathBuf },
}

/// Why the HTML report was not written. Shared sources: the error
/// travels in a message that is cloned.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{0}")]
    Write(std::sync::Arc<crate::report::ReportError>),
}

/// The overlay's state.
#[derive(Clone, Debug)]
pub struct TearSheetView {
    /// Routes the load's (and the report's) answer to this view.
    pub id: u64,
    pub run_dir: PathBuf,
    pub state: SheetState,
    pub tab: SheetTab,
    /// The first body line shown, one per tab.
    scroll: [usize; 6],
    /// A one-line message at the bottom (the report's path, an error).
    pub message: Option<String>,
    /// Body rows of the last frame: a page.
    page: usize,
    /// Body lines of the last frame's tab: the scroll's end.
    lines: usize,
}

impl TearSheetView {
    /// A view waiting for the sheet of `run_dir`.
    pub fn new(run_dir: PathBuf) -> Self {
        TearSheetView {
            id: super::backtest::next_id(),
            run_dir,
            state: SheetState::Loading,
            tab: SheetTab::Overview,
            scroll: [0; 6],
            message: None,
            page: 10,
            lines: usize::MAX,
        }
    }

    /// A view of a sheet already computed (tests, and results that carry one).
    pub fn with_data(run_dir: PathBuf, data: SheetData) -> Self {
        let mut v = TearSheetView::new(run_dir);
        v.state = SheetState::Loaded(Box::new(data));
        v
    }

    /// The sheet, once loaded.
    pub fn sheet(&self) -> Option<&TearSheet> {
        match &self.state {
            SheetState::Loaded(d) => Some(&d.sheet),
            SheetState::Loading | SheetState::Failed(_) => None,
        }
    }

    /// Takes the load's answer.
    pub fn loaded(&mut self, result: Result<SheetData, SheetLoadError>) {
        self.state = match result {
            Ok(d) => SheetState::Loaded(Box::new(d)),
            Err(e) => SheetState::Failed(e.to_string()),
        };
    }

    /// The current tab's first shown line.
    pub fn scroll(&self) -> usize {
        self.scroll.get(self.tab.index()).copied().unwrap_or(0)
    }

    fn set_scroll(&mut self, to: usize) {
        let last = self.lines.saturating_sub(self.page);
        if let Some(s) = self.scroll.get_mut(self.tab.index()) {
            *s = to.min(last);
        }
    }

    /// Handles a named action (closing is the overlay's business).
    pub fn handle(&mut self, action: Action) -> Vec<SheetEffect> {
        let cur = self.scroll();
        let page = self.page.max(1);
        match action {
            Action::NextTab => self.tab = self.tab.step(true),
            Action::PrevTab => self.tab = self.tab.step(false),
            Action::SheetOverview => self.tab = SheetTab::Overview,
            Action::SheetMonthly => self.tab = SheetTab::Monthly,
            Action::SheetDrawdowns => self.tab = SheetTab::Drawdowns,
            Action::SheetRolling => self.tab = SheetTab::Rolling,
            Action::SheetDistribution => self.tab = SheetTab::Distribution,
            Action::SheetTrades => self.tab = SheetTab::Trades,
            Action::Up => self.set_scroll(cur.saturating_sub(1)),
            Action::Down => self.set_scroll(cur.saturating_add(1)),
            Action::PageUp => self.set_scroll(cur.saturating_sub(page)),
            Action::PageDown => self.set_scroll(cur.saturating_add(page)),
            Action::Top => self.set_scroll(0),
            Action::Bottom => self.set_scroll(usize::MAX),
            Action::SheetReport => return self.report(),
            _ => {}
        }
        vec![]
    }

    fn report(&mut self) -> Vec<SheetEffect> {
        if self.sheet().is_none() {
            self.message = Some("the tear sheet is not ready: no report yet".into());
            return vec![];
        }
        self.message = Some("writing the HTML report…".into());
        vec![SheetEffect::WriteReport {
            id: self.id,
            run_dir: self.run_dir.clone(),
        }]
    }

    /// Draws the view into `area`.
    pub fn render(&mut self, area: Rect, buf: &mut Buffer, theme: &Theme) {
        render::frame(self, area, buf, theme);
    }

    /// Records the last frame's body size, so scrolling stops at the end.
    pub(crate) fn laid_out(&mut self, page: usize, lines: usize) {
        self.page = page;
        self.lines = lines;
        let s = self.scroll();
        self.set_scroll(s);
    }
}

/// Writes the self-contained HTML report of `run_dir` (`report.html` in
/// the run directory, docs §20.3) and returns its path.
pub fn write_report(run_dir: &std::path::Path) -> Result<PathBuf, ReportError> {
    crate::report::write_run_report(run_dir, None)
        .map_err(|e| ReportError::Write(std::sync::Arc::new(e)))
}
