//! The transcript browser: a full-screen stack of views over what is on
//! disk. Sessions (newest first) → one session's messages, trace records and
//! archive (pre-compaction transcripts and archived originals) → any item in
//! full. `[cleared]` and collapsed messages open with their archived
//! original. A successful backtest result (a trace record or a tool message)
//! opens as the chat's result cell, charts included, above its raw text.
//! `/` searches the current view; `r` resumes a session in the chat.
//! Next to the sessions (Tab, or `m` from anywhere in the browser) is the
//! memory view ([`super::memory_view`]): the memory entries, and one entry's
//! current text beside its archived originals; and (`t`) the Teams view:
//! the research teams' runs ([`super::team_runs`]) and each one's workers.
//! Rows are built only for the visible window, so a 10,000-message session
//! scrolls as fast as a short one.

use std::path::PathBuf;

use chrono::FixedOffset;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::backtest::{self, BacktestCell, BacktestInfo, EquitySeries, LoadRequest};
use super::cells::{CellKind, render_lines, status_word_mark};
use super::format::{one_line, timestamp, truncate, width as text_width};
use super::keymap::Action;
use super::memories::{MemoryDetail, MemoryListing};
use super::memory_view::{self, EntryFrame, EntryView, Pane};
use super::team_runs::{TeamRunRow, TeamWorkerRow};
use super::theme::Theme;
use super::transcripts::{ArchiveEntry, SessionDetail, SessionRow, find_original, looks_compacted};
use super::wrap::{line_text, wrap_hard};
use crate::model::{Message, Role};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    Messages,
    Trace,
    Archive,
}

impl Tab {
    const ALL: [Tab; 3] = [Tab::Messages, Tab::Trace, Tab::Archive];

    fn title(self) -> &'static str {
        match self {
            Tab::Messages => "Messages",
            Tab::Trace => "Trace",
            Tab::Archive => "Archive",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum View {
    Sessions,
    /// The memory entries (the other root, next to the sessions).
    Memory,
    /// One memory entry beside its archived originals.
    MemoryEntry(EntryView),
    /// The research teams' runs (the third root).
    Teams,
    /// One team run's workers.
    TeamRun {
        id: String,
    },
    Session {
        tab: Tab,
    },
    /// The messages of one pre-compaction transcript.
    Transcript {
        name: String,
        messages: Option<Vec<Message>>,
    },
    /// One item in full.
    Pager {
        title: String,
        lines: Vec<String>,
    },
    /// A backtest result drawn as the chat's cell, then the item's text.
    Result {
        title: String,
        cell: Box<BacktestCell>,
        raw: Vec<String>,
    },
}

#[derive(Clone, Debug, PartialEq)]
struct Level {
    view: View,
    selected: usize,
    scroll: usize,
}

/// What the browser asks the runtime to do.
#[derive(Clone, Debug, PartialEq)]
pub enum BrowserEffect {
    LoadSessions,
    LoadDetail(String),
    LoadTranscript(PathBuf),
    LoadBacktest(LoadRequest),
    LoadMemory,
    LoadMemoryEntry(String),
    /// Keep (`true`) or un-keep the model's memory in this file (docs §8.3).
    KeepMemory {
        file: String,
        keep: bool,
    },
    /// List the team runs on disk.
    LoadTeams,
    /// Open the tear sheet of this run directory over the browser.
    TearSheet(PathBuf),
    Resume(String),
    Close,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Search {
    /// The query line is open for typing.
    pub editing: bool,
    pub query: String,
}

#[derive(Clone, Debug)]
pub struct Browser {
    stack: Vec<Level>,
    pub sessions: Option<Vec<SessionRow>>,
    pub detail: Option<SessionDetail>,
    pub memory: Option<MemoryListing>,
    /// The entry the open memory entry view shows (matched by file).
    pub memory_entry: Option<MemoryDetail>,
    /// The team runs on disk, newest first.
    pub teams: Option<Vec<TeamRunRow>>,
    pub search: Search,
    pub error: Option<String>,
    pub message: Option<String>,
    /// The session open in the chat (marked in the list).
    pub current: Option<String>,
    pub offset: FixedOffset,
    /// Rows visible in the last frame (page size).
    pub page: usize,
    /// Width and line count of the last frame of a result view, which
    /// scrolls by rendered line.
    width: usize,
    result_len: usize,
}

impl Browser {
    pub fn new(offset: FixedOffset, current: Option<String>) -> Self {
        Browser {
            stack: vec![Level {
                view: View::Sessions,
                selected: 0,
                scroll: 0,
            }],
            sessions: None,
            detail: None,
            memory: None,
            memory_entry: None,
            teams: None,
            search: Search::default(),
            error: None,
            message: None,
            current,
            offset,
            page: 20,
            width: 80,
            result_len: 0,
        }
    }

    pub fn view(&self) -> &View {
        self.stack
            .last()
            .map(|l| &l.view)
            .unwrap_or(&View::Sessions)
    }

    pub fn selected(&self) -> usize {
        self.stack.last().map_or(0, |l| l.selected)
    }

    fn level_mut(&mut self) -> Option<&mut Level> {
        self.stack.last_mut()
    }

    pub(crate) fn set_sessions(&mut self, rows: Vec<SessionRow>) {
        self.sessions = Some(rows);
    }

    pub(crate) fn set_detail(&mut self, d: SessionDetail) {
        self.detail = Some(d);
    }

    /// The memory list arrived (or could not be read).
    pub(crate) fn set_memory(
        &mut self,
        r: Result<MemoryListing, super::memories::MemoryViewError>,
    ) {
        match r {
            Ok(m) => {
                // Said on the bottom line (the rows keep their own marks).
                if matches!(self.view(), View::Memory)
                    && let Some(notice) = &m.notice
                {
                    self.message = Some(notice.clone());
                }
                self.memory = Some(m);
            }
            Err(e) => {
                // Elsewhere it is dropped: entering the view reads again.
                if matches!(self.view(), View::Memory) {
                    self.error = Some(format!("cannot list the memory entries: {e}"));
                }
            }
        }
    }

    /// The team runs were listed.
    pub(crate) fn set_teams(&mut self, rows: Vec<TeamRunRow>) {
        self.teams = Some(rows);
    }

    /// The team run the open `TeamRun` view shows.
    fn team_run(&self) -> Option<&TeamRunRow> {
        let View::TeamRun { id } = self.view() else {
            return None;
        };
        self.teams.as_ref()?.iter().find(|r| &r.id == id)
    }

    /// One entry arrived for the entry view of `file`; a late answer for an
    /// entry no longer open is dropped.
    pub(crate) fn set_memory_entry(
        &mut self,
        file: &str,
        r: Result<MemoryDetail, super::memories::MemoryViewError>,
    ) {
        let open = matches!(self.view(), View::MemoryEntry(v) if v.file == file);
        match r {
            Ok(d) if open => self.memory_entry = Some(d),
            Err(e) if open => self.error = Some(e.to_string()),
            _ => {}
        }
    }

    /// Replaces the whole stack with a root view (sessions or memory).
    fn set_root(&mut self, view: View) -> Vec<BrowserEffect> {
        self.search = Search::default();
        self.message = None;
        self.error = None;
        let load = match view {
            // Always re-read: entries change under maintenance and tools.
            View::Memory => Some(BrowserEffect::LoadMemory),
            // And runs change while a team works.
            View::Teams => Some(BrowserEffect::LoadTeams),
            _ if self.sessions.is_none() => Some(BrowserEffect::LoadSessions),
            _ => None,
        };
        self.stack = vec![Level {
            view,
            selected: 0,
            scroll: 0,
        }];
        load.into_iter().collect()
    }

    /// Where Up/Down act: the selected row, a pager's scroll, or the
    /// focused pane's scroll of a memory entry.
    fn cursor(&self) -> usize {
        match self.stack.last() {
            Some(Level {
                view: View::MemoryEntry(v),
                ..
            }) => v.scroll[v.pane.index()],
            Some(l) if self.scrolls() => l.scroll,
            Some(l) => l.selected,
            None => 0,
        }
    }

    fn set_cursor(&mut self, i: usize) {
        let pager = self.scrolls();
        let Some(l) = self.level_mut() else {
            return;
        };
        match &mut l.view {
            View::MemoryEntry(v) => v.scroll[v.pane.index()] = i,
            _ if pager => l.scroll = i,
            _ => l.selected = i,
        }
    }

    /// The focused pane's lines of the open memory entry at the last
    /// frame's width.
    fn entry_lines(&self, theme: &Theme) -> Vec<Line<'static>> {
        match (self.view(), &self.memory_entry) {
            (View::MemoryEntry(v), Some(d)) if d.row.file == v.file => memory_view::pane_body(
                d,
                v.pane,
                v.archive,
                memory_view::pane_width(self.width, v.pane),
                theme,
            ),
            _ => Vec::new(),
        }
    }

    /// Hands a backtest load's answer to the result view that asked for it.
    pub(crate) fn backtest_loaded(
        &mut self,
        id: u64,
        series: Result<EquitySeries, backtest::EquityError>,
        info: Option<BacktestInfo>,
    ) {
        for l in self.stack.iter_mut().rev() {
            if let View::Result { cell, .. } = &mut l.view
                && cell.id == id
            {
                cell.apply(series, info);
                return;
            }
        }
    }

    /// Views that scroll by line rather than select a row.
    fn scrolls(&self) -> bool {
        matches!(self.view(), View::Pager { .. } | View::Result { .. })
    }

    pub(crate) fn set_transcript(&mut self, name: &str, messages: Vec<Message>) {
        for l in self.stack.iter_mut().rev() {
            if let View::Transcript {
                name: n,
                messages: m,
            } = &mut l.view
                && n == name
            {
                *m = Some(messages);
                return;
            }
        }
    }

    /// Number of rows of the current view.
    pub(crate) fn len(&self) -> usize {
        match self.view() {
            View::Sessions => self.sessions.as_ref().map_or(0, Vec::len),
            View::Session { tab } => self.detail.as_ref().map_or(0, |d| match tab {
                Tab::Messages => d.messages.len(),
                Tab::Trace => d.trace.len(),
                Tab::Archive => d.transcripts.len() + d.archive.len(),
            }),
            View::Transcript { messages, .. } => messages.as_ref().map_or(0, Vec::len),
            View::Pager { lines, .. } => lines.len(),
            View::Result { .. } => self.result_len,
            View::Memory => self.memory.as_ref().map_or(0, |m| m.rows.len()),
            View::MemoryEntry(_) => self.entry_lines(&Theme::default()).len(),
            View::Teams => self.teams.as_ref().map_or(0, Vec::len),
            View::TeamRun { .. } => self.team_run().map_or(0, |r| r.workers.len()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Plain text of row `i` (search and tests).
    pub(crate) fn row_text(&self, i: usize, width: usize, theme: &Theme) -> String {
        line_text(&self.row(i, width, theme))
    }

    /// Handles a named action; returns what the runtime must do.
    pub(crate) fn handle(&mut self, action: Action) -> Vec<BrowserEffect> {
        let len = self.len();
        let page = self.page.max(1);
        match action {
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom => {
                let cur = self.cursor();
                let last = len.saturating_sub(1);
                let next = match action {
                    Action::Up => cur.saturating_sub(1),
                    Action::Down => (cur + 1).min(last),
                    Action::PageUp => cur.saturating_sub(page),
                    Action::PageDown => (cur + page).min(last),
                    Action::Top => 0,
                    _ => last,
                };
                self.set_cursor(next);
                vec![]
            }
            Action::Back => {
                self.error = None;
                if self.stack.len() <= 1 {
                    return vec![BrowserEffect::Close];
                }
                self.stack.pop();
                vec![]
            }
            Action::Open => self.open(),
            Action::Memory => self.set_root(View::Memory),
            Action::KeepMemory => self.keep_memory(),
            Action::TeamRuns => self.set_root(View::Teams),
            Action::BrowserTearSheet => self.tear_sheet(),
            Action::TogglePane => {
                if let Some(l) = self.level_mut()
                    && let View::MemoryEntry(v) = &mut l.view
                {
                    v.pane = v.pane.other();
                }
                vec![]
            }
            Action::NextTab | Action::PrevTab => {
                let next = action == Action::NextTab;
                // Tab switches sessions and memory; from the teams (`t`)
                // it goes back to the sessions.
                match self.view() {
                    View::Sessions => return self.set_root(View::Memory),
                    View::Memory | View::Teams => return self.set_root(View::Sessions),
                    _ => {}
                }
                let n = self.memory_entry.as_ref().map_or(0, |d| d.archives.len());
                if let Some(l) = self.level_mut()
                    && let View::MemoryEntry(v) = &mut l.view
                {
                    // Choosing an original is looking at it: it takes the focus.
                    if n > 0 {
                        v.archive = if next {
                            (v.archive + 1) % n
                        } else {
                            (v.archive + n - 1) % n
                        };
                    }
                    v.pane = Pane::Original;
                    v.scroll[Pane::Original.index()] = 0;
                    return vec![];
                }
                if let Some(l) = self.level_mut()
                    && let View::Session { tab } = &mut l.view
                {
                    let i = Tab::ALL.iter().position(|t| t == tab).unwrap_or(0);
                    let n = Tab::ALL.len();
                    let j = if next { (i + 1) % n } else { (i + n - 1) % n };
                    *tab = Tab::ALL[j];
                    l.selected = 0;
                    l.scroll = 0;
                }
                vec![]
            }
            Action::Search => {
                self.search.editing = true;
                self.search.query.clear();
                vec![]
            }
            Action::NextMatch => {
                self.find(true, false);
                vec![]
            }
            Action::PrevMatch => {
                self.find(false, false);
                vec![]
            }
            Action::Resume => {
                let id = match self.view() {
                    View::Sessions => self
                        .sessions
                        .as_ref()
                        .and_then(|s| s.get(self.selected()))
                        .map(|r| r.meta.id.clone()),
                    View::Memory | View::MemoryEntry(_) | View::Teams | View::TeamRun { .. } => {
                        None
                    }
                    _ => self.detail.as_ref().map(|d| d.id.clone()),
                };
                match id {
                    Some(id) => vec![BrowserEffect::Resume(id)],
                    None => vec![],
                }
            }
            _ => vec![],
        }
    }

    /// The tear sheet of the backtest on screen: the open result, or the
    /// selected message or trace record when it is one.
    fn tear_sheet(&mut self) -> Vec<BrowserEffect> {
        let sel = self.selected();
        let cell = match self.view() {
            View::Result { cell, .. } => Some(cell.as_ref().clone()),
            View::Session { tab } => self.detail.as_ref().and_then(|d| match tab {
                Tab::Messages => d.messages.get(sel).and_then(|m| {
                    message_backtest(&m.message, d.messages.iter().map(|s| &s.message))
                }),
                Tab::Trace => trace_backtest(&d.trace, sel),
                Tab::Archive => None,
            }),
            _ => None,
        };
        match cell {
            Some(c) => vec![BrowserEffect::TearSheet(c.run_dir)],
            None => {
                self.message =
                    Some("s opens a tear sheet on a backtest result (open one with Enter)".into());
                vec![]
            }
        }
    }

    /// Closes the search line and clears the query.
    pub(crate) fn search_cancel(&mut self) {
        self.search = Search::default();
    }

    /// Deletes the query's last character.
    pub(crate) fn search_delete(&mut self) {
        self.search.query.pop();
    }

    /// Types `c` into the query and jumps to the first match from the
    /// cursor (incremental).
    pub(crate) fn search_type(&mut self, c: char) {
        self.search.query.push(c);
        self.find(true, true);
    }

    /// A paste into the open search line: its first line joins the query
    /// (without the jump typing makes; Enter finds it).
    pub(crate) fn search_paste(&mut self, text: &str) {
        if self.search.editing {
            self.search
                .query
                .push_str(text.lines().next().unwrap_or(""));
        }
    }

    /// Closes the search line and goes to the first match from the cursor.
    pub(crate) fn search_confirm(&mut self) {
        self.search.editing = false;
        if !self.find(true, true) && !self.search.query.is_empty() {
            self.message = Some(format!("no match for '{}'", self.search.query));
        }
    }

    /// Moves to the next (or previous) row containing the query; with
    /// `include_current` the current row counts. Returns whether one was found.
    fn find(&mut self, forward: bool, include_current: bool) -> bool {
        let q = self.search.query.clone();
        if q.is_empty() {
            return false;
        }
        let len = self.len();
        if len == 0 {
            return false;
        }
        let cur = self.cursor();
        let theme = Theme::default();
        // The entry view's lines are wrapped once, not once per row tested.
        let entry: Vec<String> = self.entry_lines(&theme).iter().map(line_text).collect();
        let hit = |i: usize| match self.view() {
            View::MemoryEntry(_) => entry.get(i).is_some_and(|l| contains_ci(l, &q)),
            _ => contains_ci(&self.search_text(i, &theme), &q),
        };
        let order: Vec<usize> = if forward {
            let start = if include_current { cur } else { cur + 1 };
            (start..len).chain(0..start.min(len)).collect()
        } else {
            (0..cur).rev().chain((cur..len).rev()).collect()
        };
        let found = order.into_iter().find(|i| hit(*i));
        match found {
            Some(i) => {
                self.set_cursor(i);
                self.message = None;
                true
            }
            None => {
                self.message = Some(format!("no match for '{q}'"));
                false
            }
        }
    }

    /// Text searched for row `i`: the whole item, not only its visible cut.
    fn search_text(&self, i: usize, theme: &Theme) -> String {
        match self.view() {
            View::Session { tab: Tab::Messages } => self
                .detail
                .as_ref()
                .and_then(|d| d.messages.get(i))
                .map(|m| m.message.content.clone())
                .unwrap_or_default(),
            View::Session { tab: Tab::Trace } => self
                .detail
                .as_ref()
                .and_then(|d| d.trace.get(i))
                .map(Value::to_string)
                .unwrap_or_default(),
            View::Transcript { messages, .. } => messages
                .as_ref()
                .and_then(|m| m.get(i))
                .map(|m| m.content.clone())
                .unwrap_or_default(),
            View::Pager { lines, .. } => lines.get(i).cloned().unwrap_or_default(),
            View::Result { .. } => self.row_text(i, self.width, theme),
            View::Memory => self
                .memory
                .as_ref()
                .and_then(|m| m.rows.get(i))
                .map(memory_view::search_text)
                .unwrap_or_default(),
            _ => self.row_text(i, 400, theme),
        }
    }

    /// `K` in the memory list or an entry: keeps the model's memory, or
    /// takes the keep back (docs §8.3); the user's own need no keep.
    fn keep_memory(&mut self) -> Vec<BrowserEffect> {
        let row = match self.view() {
            View::Memory => self
                .memory
                .as_ref()
                .and_then(|m| m.rows.get(self.selected())),
            View::MemoryEntry(v) => self
                .memory_entry
                .as_ref()
                .map(|d| &d.row)
                .filter(|r| r.file == v.file),
            _ => None,
        };
        let Some(row) = row else {
            return vec![];
        };
        if !row.by_model {
            self.message = Some(format!("{} is your own memory: nothing to keep", row.title));
            return vec![];
        }
        vec![BrowserEffect::KeepMemory {
            file: row.file.clone(),
            keep: row.unconfirmed,
        }]
    }

    fn open(&mut self) -> Vec<BrowserEffect> {
        let sel = self.selected();
        let view = self.view().clone();
        match view {
            View::Sessions => {
                let Some(row) = self.sessions.as_ref().and_then(|s| s.get(sel)) else {
                    return vec![];
                };
                let id = row.meta.id.clone();
                if self.detail.as_ref().is_none_or(|d| d.id != id) {
                    self.detail = None;
                }
                self.push(View::Session { tab: Tab::Messages });
                vec![BrowserEffect::LoadDetail(id)]
            }
            View::Session { tab } => {
                let Some(d) = &self.detail else {
                    return vec![];
                };
                match tab {
                    Tab::Messages => {
                        if let Some(m) = d.messages.get(sel) {
                            let title = format!("message {} of {}", sel + 1, d.messages.len());
                            let mut head = vec![format!(
                                "{} · {}{}{}",
                                m.message.role.as_str(),
                                m.ts,
                                m.run_id
                                    .as_ref()
                                    .map(|r| format!(" · run {r}"))
                                    .unwrap_or_default(),
                                m.status
                                    .as_ref()
                                    .map(|s| format!(" · {s}"))
                                    .unwrap_or_default()
                            )];
                            head.push(String::new());
                            let lines = message_lines(&m.message, &d.archive, head);
                            let cell =
                                message_backtest(&m.message, d.messages.iter().map(|s| &s.message));
                            return self.open_item(title, lines, cell);
                        }
                        vec![]
                    }
                    Tab::Trace => {
                        if let Some(r) = d.trace.get(sel) {
                            let text = serde_json::to_string_pretty(r).unwrap_or_default();
                            let title = format!("trace record {} of {}", sel + 1, d.trace.len());
                            let lines = text.lines().map(String::from).collect();
                            let cell = trace_backtest(&d.trace, sel);
                            return self.open_item(title, lines, cell);
                        }
                        vec![]
                    }
                    Tab::Archive => {
                        if let Some(t) = d.transcripts.get(sel) {
                            let (name, path) = (t.name.clone(), t.path.clone());
                            self.push(View::Transcript {
                                name,
                                messages: None,
                            });
                            return vec![BrowserEffect::LoadTranscript(path)];
                        }
                        if let Some(e) = d.archive.get(sel - d.transcripts.len().min(sel)) {
                            let head = vec![
                                format!(
                                    "original archived by {} · iter {} · run {} · {}",
                                    e.layer, e.iter, e.run_id, e.ts
                                ),
                                String::new(),
                            ];
                            let lines = message_lines(&e.message, &[], head);
                            self.push(View::Pager {
                                title: "archived original".into(),
                                lines,
                            });
                        }
                        vec![]
                    }
                }
            }
            View::Transcript { name, messages } => {
                let archive = self
                    .detail
                    .as_ref()
                    .map(|d| d.archive.clone())
                    .unwrap_or_default();
                if let Some(all) = &messages
                    && let Some(m) = all.get(sel)
                {
                    let lines = message_lines(m, &archive, vec![]);
                    let cell = message_backtest(m, all.iter());
                    return self.open_item(format!("{name} · message {}", sel + 1), lines, cell);
                }
                vec![]
            }
            View::Memory => {
                let Some(r) = self.memory.as_ref().and_then(|m| m.rows.get(sel)) else {
                    return vec![];
                };
                let file = r.file.clone();
                if self
                    .memory_entry
                    .as_ref()
                    .is_none_or(|d| d.row.file != file)
                {
                    self.memory_entry = None;
                }
                self.push(View::MemoryEntry(EntryView::new(file.clone())));
                vec![BrowserEffect::LoadMemoryEntry(file)]
            }
            View::Teams => {
                if let Some(r) = self.teams.as_ref().and_then(|t| t.get(sel)) {
                    let id = r.id.clone();
                    self.push(View::TeamRun { id });
                }
                vec![]
            }
            View::Pager { .. }
            | View::Result { .. }
            | View::MemoryEntry(_)
            | View::TeamRun { .. } => vec![],
        }
    }

    /// Opens an item in full: as a backtest result (asking for its series)
    /// when it is one, else in the pager.
    fn open_item(
        &mut self,
        title: String,
        lines: Vec<String>,
        cell: Option<BacktestCell>,
    ) -> Vec<BrowserEffect> {
        match cell {
            Some(cell) => {
                let load = BrowserEffect::LoadBacktest(cell.request());
                self.result_len = 0;
                self.push(View::Result {
                    title,
                    cell: Box::new(cell),
                    raw: lines,
                });
                vec![load]
            }
            None => {
                self.push(View::Pager { title, lines });
                vec![]
            }
        }
    }

    fn push(&mut self, view: View) {
        self.search = Search::default();
        self.message = None;
        self.stack.push(Level {
            view,
            selected: 0,
            scroll: 0,
        });
    }

    /// Row `i` of the current view, fitted to `width`.
    pub(crate) fn row(&self, i: usize, width: usize, theme: &Theme) -> Line<'static> {
        match self.view() {
            View::Sessions => {
                let Some(r) = self.sessions.as_ref().and_then(|s| s.get(i)) else {
                    return Line::default();
                };
                let current = self.current.as_deref() == Some(r.meta.id.as_str());
                let status = r.meta.last_status.clone().unwrap_or_else(|| "new".into());
                let status_style = match status.as_str() {
                    "success" => theme.ok,
                    "failed" | "interrupted" => theme.error,
                    "cancelled" | "partial" | "unsupported" => theme.warn,
                    _ => theme.muted,
                };
                let head = format!(
                    "{}{:<12}  {}  ",
                    if current { "● " } else { "  " },
                    r.meta.id,
                    timestamp(&r.meta.created_at, self.offset)
                );
                let count = format!("  {:>5} msgs  ", r.messages);
                let used = text_width(&head) + 11 + text_width(&count);
                let title = if r.meta.title.is_empty() {
                    "(no prompt yet)".to_string()
                } else {
                    one_line(&r.meta.title, width.saturating_sub(used))
                };
                Line::from(vec![
                    Span::styled(head, if current { theme.accent } else { theme.muted }),
                    Span::styled(format!("{status:<11}"), status_style),
                    Span::styled(count, theme.muted),
                    Span::styled(title, theme.text),
                ])
            }
            View::Session { tab } => {
                let Some(d) = &self.detail else {
                    return Line::default();
                };
                match tab {
                    Tab::Messages => d
                        .messages
                        .get(i)
                        .map(|m| {
                            let mark = if find_original(&d.archive, &m.message).is_some() {
                                "⊕"
                            } else {
                                " "
                            };
                            message_row(&m.message, &m.ts, mark, width, theme, self.offset)
                        })
                        .unwrap_or_default(),
                    Tab::Trace => d
                        .trace
                        .get(i)
                        .map(|r| trace_row(r, width, theme))
                        .unwrap_or_default(),
                    Tab::Archive => {
                        if let Some(t) = d.transcripts.get(i) {
                            let text = format!("▤ {} · {} messages", t.name, t.messages);
                            return Line::from(Span::styled(truncate(&text, width), theme.accent));
                        }
                        d.archive
                            .get(i - d.transcripts.len().min(i))
                            .map(|e| archive_row(e, width, theme))
                            .unwrap_or_default()
                    }
                }
            }
            View::Transcript { messages, .. } => {
                let archive: &[ArchiveEntry] = self.detail.as_ref().map_or(&[], |d| &d.archive);
                messages
                    .as_ref()
                    .and_then(|m| m.get(i))
                    .map(|m| {
                        let mark = if find_original(archive, m).is_some() {
                            "⊕"
                        } else {
                            " "
                        };
                        message_row(m, "", mark, width, theme, self.offset)
                    })
                    .unwrap_or_default()
            }
            View::Pager { lines, .. } => lines
                .get(i)
                .map(|l| Line::from(Span::styled(l.clone(), theme.text)))
                .unwrap_or_default(),
            View::Result { cell, raw, .. } => result_lines(cell, raw, width, theme)
                .into_iter()
                .nth(i)
                .unwrap_or_default(),
            View::Memory => self
                .memory
                .as_ref()
                .and_then(|m| m.rows.get(i))
                .map(|r| memory_view::row(r, width, theme, self.offset))
                .unwrap_or_default(),
            View::MemoryEntry(_) => self
                .entry_lines(theme)
                .into_iter()
                .nth(i)
                .unwrap_or_default(),
            View::Teams => self
                .teams
                .as_ref()
                .and_then(|t| t.get(i))
                .map(|r| team_row(r, width, theme, self.offset))
                .unwrap_or_default(),
            View::TeamRun { .. } => self
                .team_run()
                .and_then(|r| r.workers.get(i))
                .map(|w| worker_row(w, width, theme))
                .unwrap_or_default(),
        }
    }

    fn title(&self) -> String {
        match self.view() {
            View::Sessions => format!(
                "Transcripts · {} session(s) on disk",
                self.sessions.as_ref().map_or(0, Vec::len)
            ),
            View::Session { .. } => match &self.detail {
                Some(d) => {
                    let title = self
                        .sessions
                        .as_ref()
                        .and_then(|s| s.iter().find(|r| r.meta.id == d.id))
                        .map(|r| one_line(&r.meta.title, 40))
                        .unwrap_or_default();
                    format!("Session {} · {title}", d.id)
                }
                None => "Session · loading…".into(),
            },
            View::Transcript { name, .. } => format!("Transcript {name}"),
            View::Pager { title, .. } | View::Result { title, .. } => title.clone(),
            View::Memory => match &self.memory {
                Some(m) if !m.decay => format!(
                    "Memory · {} entries · decay off: importance is the quality score",
                    m.rows.len()
                ),
                Some(m) => format!("Memory · {} entries", m.rows.len()),
                None => "Memory".into(),
            },
            View::MemoryEntry(v) => match &self.memory_entry {
                Some(d) if d.row.file == v.file => {
                    format!("Memory · {} · {}", one_line(&d.row.title, 60), d.row.level)
                }
                _ => format!("Memory · {}", v.file),
            },
            View::Teams => format!(
                "Teams · {} run(s) on disk",
                self.teams.as_ref().map_or(0, Vec::len)
            ),
            View::TeamRun { id } => match self.team_run() {
                Some(r) => format!("Team run {id} · {} · {}", r.preset, r.status),
                None => format!("Team run {id}"),
            },
        }
    }

    fn hints(&self) -> &'static str {
        match self.view() {
            View::Sessions => {
                "↑↓ move · Enter open · r resume · / search · Tab memory · t teams · Esc back"
            }
            View::Memory => {
                "↑↓ move · Enter open · / search · ⊕ originals · Tab sessions · t teams · Esc"
            }
            View::Teams => {
                "↑↓ move · Enter its workers · / search · Tab sessions · Esc back to chat"
            }
            View::TeamRun { .. } => "↑↓ move · / search · Esc back",
            View::MemoryEntry(_) if self.width >= memory_view::SPLIT_MIN as usize => {
                "Tab next original · v other pane · ↑↓ PgUp PgDn scroll · / search · Esc back"
            }
            View::MemoryEntry(_) => {
                "v current/original · Tab next original · ↑↓ scroll · / search · Esc back"
            }
            View::Session { .. } => {
                "Tab messages/trace/archive · Enter open · r resume · / search · ⊕ archived original · Esc back"
            }
            View::Transcript { .. } => {
                "Enter open (⊕ opens the archived original) · / search · Esc back"
            }
            View::Pager { .. } | View::Result { .. } => {
                "↑↓ PgUp PgDn scroll · / search · n/N next/prev · Esc back"
            }
        }
    }

    /// Draws the browser over `area`.
    pub(crate) fn render(&mut self, area: Rect, buf: &mut Buffer, theme: &Theme) {
        if area.height < 4 || area.width < 10 {
            return;
        }
        let width = area.width as usize;
        buf.set_style(area, theme.text);
        let top = self.render_header(area, buf, theme);
        let bottom = area.y + area.height - 1;
        let body_h = bottom.saturating_sub(top) as usize;
        self.page = body_h.max(1);
        self.width = width;
        self.render_body(
            Rect::new(area.x, top, area.width, body_h as u16),
            buf,
            theme,
        );
        self.bottom_line(area, bottom, buf, theme);
    }

    /// The title line, then the tabs of a session or of the two roots;
    /// returns the first row below them.
    fn render_header(&self, area: Rect, buf: &mut Buffer, theme: &Theme) -> u16 {
        let width = area.width as usize;
        let title = truncate(&self.title(), width);
        buf.set_line(
            area.x,
            area.y,
            &Line::from(Span::styled(
                format!("{title:<width$}"),
                theme.status.add_modifier(Modifier::BOLD),
            )),
            area.width,
        );
        let mut top = area.y + 1;
        if let View::Session { tab } = self.view() {
            buf.set_line(area.x, top, &self.session_tabs(*tab, theme), area.width);
            top += 1;
        }
        // The three roots, side by side as tabs.
        if matches!(self.view(), View::Sessions | View::Memory | View::Teams) {
            let memory = matches!(self.view(), View::Memory);
            buf.set_line(area.x, top, &self.root_tabs(theme), area.width);
            top += 1;
            if memory && self.memory.as_ref().is_some_and(|m| !m.rows.is_empty()) {
                buf.set_line(area.x, top, &memory_view::header(width, theme), area.width);
                top += 1;
            }
        }
        top
    }

    /// A session's tabs with their counts, and its skipped lines if any.
    fn session_tabs(&self, tab: Tab, theme: &Theme) -> Line<'static> {
        let mut spans = Vec::new();
        for t in Tab::ALL {
            let count = self.detail.as_ref().map(|d| match t {
                Tab::Messages => d.messages.len(),
                Tab::Trace => d.trace.len(),
                Tab::Archive => d.transcripts.len() + d.archive.len(),
            });
            let label = format!(
                " {} {} ",
                t.title(),
                count.map_or(String::new(), |c| format!("({c})"))
            );
            spans.push(Span::styled(label, theme.tab(t == tab)));
            spans.push(Span::raw(" "));
        }
        if let Some(d) = &self.detail
            && d.skipped > 0
        {
            spans.push(Span::styled(
                format!("{} unreadable line(s) skipped", d.skipped),
                theme.warn,
            ));
        }
        Line::from(spans)
    }

    /// Sessions, Memory and Teams as tabs, the open one highlighted.
    fn root_tabs(&self, theme: &Theme) -> Line<'static> {
        let view = self.view();
        let count = |n: Option<usize>| n.map_or(String::new(), |c| format!("({c}) "));
        let tab = |on: bool| {
            if on {
                theme
                    .accent
                    .add_modifier(Modifier::BOLD | Modifier::REVERSED)
            } else {
                theme.muted
            }
        };
        Line::from(vec![
            Span::styled(
                format!(" Sessions {}", count(self.sessions.as_ref().map(Vec::len))),
                tab(matches!(view, View::Sessions)),
            ),
            Span::raw(" "),
            Span::styled(
                format!(
                    " Memory {}",
                    count(self.memory.as_ref().map(|m| m.rows.len()))
                ),
                tab(matches!(view, View::Memory)),
            ),
            Span::raw(" "),
            Span::styled(
                format!(" Teams {}", count(self.teams.as_ref().map(Vec::len))),
                tab(matches!(view, View::Teams)),
            ),
        ])
    }

    /// Everything between the header and the bottom line.
    fn render_body(&mut self, body: Rect, buf: &mut Buffer, theme: &Theme) {
        let width = body.width as usize;
        if let View::Result { cell, raw, .. } = self.view() {
            let lines = result_lines(cell, raw, width, theme);
            self.result_len = lines.len();
            self.render_result(lines, body, buf, theme);
            return;
        }
        if self.error.is_none()
            && let Some(detail) = &self.memory_entry
            && let Some(Level {
                view: View::MemoryEntry(v),
                ..
            }) = self.stack.last_mut()
            && v.file == detail.row.file
        {
            let frame = EntryFrame {
                detail,
                offset: self.offset,
                query: &self.search.query,
                highlight,
            };
            frame.render(v, body, buf, theme);
            return;
        }
        let len = self.len();
        let loading = match self.view() {
            View::Sessions => self.sessions.is_none(),
            View::Session { .. } => self.detail.is_none(),
            View::Transcript { messages, .. } => messages.is_none(),
            View::Memory => self.memory.is_none(),
            View::Teams => self.teams.is_none(),
            View::TeamRun { .. } => false,
            // Drawn above once its entry is here.
            View::MemoryEntry(_) => true,
            View::Pager { .. } | View::Result { .. } => false,
        };
        let first_line = |buf: &mut Buffer, text: &str, style: Style| {
            buf.set_line(
                body.x,
                body.y,
                &Line::from(Span::styled(truncate(text, width), style)),
                body.width,
            );
        };
        if let Some(err) = &self.error {
            first_line(buf, err, theme.error);
        } else if loading {
            first_line(buf, "loading…", theme.muted);
        } else if len == 0 {
            let empty = match (self.view(), &self.memory) {
                (View::Memory, Some(m)) => format!(
                    "no memories yet in {} (the agent saves them with `remember`; `vibedesk memory add` adds one)",
                    m.dir.display()
                ),
                (View::Teams, _) => {
                    "no team runs yet (/swarm NAME key=value … or `vibedesk swarm run NAME` starts one)"
                        .into()
                }
                (View::TeamRun { .. }, _) => match self.team_run().and_then(|r| r.error.clone()) {
                    Some(e) => format!("its record cannot be read: {e}"),
                    None => "no workers recorded".into(),
                },
                _ => "nothing here yet".into(),
            };
            first_line(buf, &empty, theme.muted);
        } else if matches!(self.view(), View::Pager { .. }) {
            self.render_pager(body, buf, theme);
        } else {
            self.render_rows(body, len, buf, theme);
        }
    }

    /// The rows of a list view in the window that keeps the selection in view.
    fn render_rows(&mut self, body: Rect, len: usize, buf: &mut Buffer, theme: &Theme) {
        let width = body.width as usize;
        let body_h = body.height as usize;
        let sel = self.selected().min(len - 1);
        if let Some(l) = self.level_mut() {
            l.selected = sel;
            // Keep the selection inside the window.
            if sel < l.scroll {
                l.scroll = sel;
            } else if sel >= l.scroll + body_h {
                l.scroll = sel + 1 - body_h;
            }
        }
        let scroll = self.stack.last().map_or(0, |l| l.scroll);
        let q = self.search.query.clone();
        for (row_y, i) in (scroll..len.min(scroll + body_h)).enumerate() {
            let mut line = self.row(i, width, theme);
            if !q.is_empty() {
                line = highlight(line, &q, theme.search_match);
            }
            if i == sel {
                line = line.patch_style(theme.selection);
                let w = line.width();
                if w < width {
                    line.push_span(Span::styled(" ".repeat(width - w), theme.selection));
                }
            }
            buf.set_line(body.x, body.y + row_y as u16, &line, body.width);
        }
    }

    /// The bottom line: search prompt, message, or hints.
    fn bottom_line(&self, area: Rect, bottom: u16, buf: &mut Buffer, theme: &Theme) {
        let width = area.width as usize;
        let bottom_line = if self.search.editing {
            Line::from(vec![
                Span::styled("/", theme.key),
                Span::styled(self.search.query.clone(), theme.text),
                Span::styled("▏", theme.accent),
            ])
        } else if let Some(m) = &self.message {
            Line::from(Span::styled(truncate(m, width), theme.warn))
        } else {
            Line::from(Span::styled(truncate(self.hints(), width), theme.muted))
        };
        buf.set_line(area.x, bottom, &bottom_line, area.width);
    }

    fn render_result(
        &mut self,
        lines: Vec<Line<'static>>,
        area: Rect,
        buf: &mut Buffer,
        theme: &Theme,
    ) {
        let q = self.search.query.clone();
        // The last page stays full.
        let last = lines.len().saturating_sub(area.height as usize);
        let scroll = match self.level_mut() {
            Some(l) => {
                l.scroll = l.scroll.min(last);
                l.scroll
            }
            None => 0,
        };
        for (y, l) in lines
            .into_iter()
            .skip(scroll)
            .take(area.height as usize)
            .enumerate()
        {
            let l = if q.is_empty() {
                l
            } else {
                highlight(l, &q, theme.search_match)
            };
            buf.set_line(area.x, area.y + y as u16, &l, area.width);
        }
    }

    fn render_pager(&mut self, area: Rect, buf: &mut Buffer, theme: &Theme) {
        let View::Pager { lines, .. } = self.view() else {
            return;
        };
        let width = area.width as usize;
        let q = self.search.query.clone();
        let scroll = self.stack.last().map_or(0, |l| l.scroll);
        let mut y = 0usize;
        for raw in lines.iter().skip(scroll) {
            for l in wrap_hard(raw, theme.text, width, &[]) {
                if y >= area.height as usize {
                    return;
                }
                let l = if q.is_empty() {
                    l
                } else {
                    highlight(l, &q, theme.search_match)
                };
                buf.set_line(area.x, area.y + y as u16, &l, area.width);
                y += 1;
            }
        }
    }
}

/// A result view's lines at `width`: the cell, expanded (the user opened
/// it), then the item's raw text.
fn result_lines(
    cell: &BacktestCell,
    raw: &[String],
    width: usize,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let kind = CellKind::Backtest(cell.clone());
    let mut out = render_lines(&kind, width.min(u16::MAX as usize) as u16, theme, true);
    out.push(Line::default());
    let rule = "── as recorded ";
    let rest = width.saturating_sub(text_width(rule));
    out.push(Line::from(Span::styled(
        format!("{rule}{}", "─".repeat(rest)),
        theme.border,
    )));
    for l in raw {
        out.extend(wrap_hard(l, theme.text, width, &[]));
    }
    out
}

/// A `tool_result` trace record of a successful backtest as a cell. The
/// record carries the redacted result (or, when it was offloaded, a preview
/// whose head still names the run directory); the matching `tool_call`
/// record has the arguments.
fn trace_backtest(trace: &[Value], i: usize) -> Option<BacktestCell> {
    let r = trace.get(i)?;
    let field = |k: &str| r.get(k).and_then(Value::as_str);
    if field("type") != Some("tool_result") || field("tool") != Some(backtest::TOOL) {
        return None;
    }
    // `status` reads ok for skipped calls too; `outcome` is the call's own.
    if field("outcome").or(field("status")) != Some("ok") {
        return None;
    }
    let call_id = field("call_id").unwrap_or("");
    let result = match r.get("result") {
        Some(Value::String(s)) => s.clone(),
        Some(v @ Value::Object(_)) => v.to_string(),
        _ => field("result_preview").or(field("preview"))?.to_string(),
    };
    let args = trace
        .iter()
        .find(|t| {
            t.get("type").and_then(Value::as_str) == Some("tool_call")
                && t.get("call_id").and_then(Value::as_str) == Some(call_id)
        })
        .and_then(|t| t.get("args"))
        .cloned()
        .unwrap_or(Value::Null);
    backtest::cell_for_result(call_id, &result, &args, None)
}

/// A backtest's tool message as a cell, unless the result is a failure;
/// the arguments come from the assistant message that made the call.
fn message_backtest<'a>(
    m: &Message,
    all: impl Iterator<Item = &'a Message>,
) -> Option<BacktestCell> {
    if m.role != Role::Tool || m.name.as_deref() != Some(backtest::TOOL) {
        return None;
    }
    if let Ok(v) = serde_json::from_str::<Value>(&m.content)
        && v.get("status").and_then(Value::as_str) != Some("ok")
    {
        return None;
    }
    let id = m.tool_call_id.as_deref().unwrap_or("");
    let args = all
        .flat_map(|a| a.tool_calls.iter())
        .find(|c| c.id == id)
        .and_then(|c| serde_json::from_str::<Value>(&c.function.arguments).ok())
        .unwrap_or(Value::Null);
    backtest::cell_for_result(id, &m.content, &args, None)
}

/// The full text of a message for the pager, with its archived original
/// appended when it was cleared or collapsed.
fn message_lines(m: &Message, archive: &[ArchiveEntry], mut out: Vec<String>) -> Vec<String> {
    if let Some(id) = &m.tool_call_id {
        out.push(format!(
            "tool result of {} ({id})",
            m.name.clone().unwrap_or_default()
        ));
        out.push(String::new());
    }
    if let Some(r) = m.reasoning_content.as_ref().filter(|r| !r.is_empty()) {
        out.push("reasoning:".into());
        out.extend(r.lines().map(|l| format!("  {l}")));
        out.push(String::new());
    }
    out.extend(m.content.lines().map(String::from));
    for tc in &m.tool_calls {
        out.push(String::new());
        out.push(format!(
            "→ {} ({}) {}",
            tc.function.name, tc.id, tc.function.arguments
        ));
    }
    if let Some(e) = find_original(archive, m) {
        out.push(String::new());
        out.push(format!(
            "── original, archived by {} at iter {} (run {}) ──",
            e.layer, e.iter, e.run_id
        ));
        out.extend(e.message.content.lines().map(String::from));
    } else if looks_compacted(m) {
        out.push(String::new());
        out.push("── no archived original found for this compacted message ──".into());
    }
    out
}

fn status_style(status: &str, theme: &Theme) -> Style {
    match status {
        "running" => theme.accent,
        other => status_word_mark(other, theme).map_or(theme.muted, |(_, style)| style),
    }
}

/// A recorded status with its glyph (✓ success, ◐ partial, ✗ failed, …),
/// padded to a column.
fn status_cell(status: &str, theme: &Theme) -> String {
    let mark = status_word_mark(status, theme).map_or(" ", |(mark, _)| mark);
    format!("{mark} {status:<12}")
}

/// A team run: id, start, status, team and worker count.
fn team_row(r: &TeamRunRow, width: usize, theme: &Theme, offset: FixedOffset) -> Line<'static> {
    // Narrow screens leave the start out: the id names the time already.
    let started = match (width >= 100, r.started.is_empty()) {
        (false, _) => String::new(),
        (true, true) => format!("{:<18}", "?"),
        (true, false) => format!("{:<18}", timestamp(&r.started, offset)),
    };
    let head = format!("  {:<30}  {started}", r.id);
    let tail = format!(
        "  {} worker{}",
        r.workers.len(),
        if r.workers.len() == 1 { "" } else { "s" }
    );
    let status = status_cell(&r.status, theme);
    let used = text_width(&head) + text_width(&status) + text_width(&tail);
    let preset = truncate(&r.preset, width.saturating_sub(used));
    let line = Line::from(vec![
        Span::styled(head, theme.text),
        Span::styled(status, status_style(&r.status, theme)),
        Span::styled(preset, theme.accent),
        Span::styled(tail, theme.muted),
    ]);
    fit(line, width)
}

/// A team run's worker: task id, state and run directory.
fn worker_row(w: &TeamWorkerRow, width: usize, theme: &Theme) -> Line<'static> {
    let id = format!("  {:<24}  ", w.id);
    let state = status_cell(&w.state, theme);
    let used = text_width(&id) + text_width(&state);
    let dir = truncate(
        w.run_dir.as_deref().unwrap_or("(no run dir recorded)"),
        width.saturating_sub(used),
    );
    Line::from(vec![
        Span::styled(id, theme.text),
        Span::styled(state, status_style(&w.state, theme)),
        Span::styled(dir, theme.muted),
    ])
}

/// `line` cut to `width` columns.
fn fit(line: Line<'static>, width: usize) -> Line<'static> {
    if line.width() <= width {
        return line;
    }
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    Line::from(truncate(&text, width))
}

fn role_style(role: Role, theme: &Theme) -> Style {
    match role {
        Role::User => theme.user,
        Role::Assistant => theme.assistant,
        Role::Tool => theme.accent,
        Role::System => theme.muted,
    }
}

fn message_row(
    m: &Message,
    ts: &str,
    mark: &str,
    width: usize,
    theme: &Theme,
    offset: FixedOffset,
) -> Line<'static> {
    let when = if ts.is_empty() {
        String::new()
    } else {
        format!("{}  ", timestamp(ts, offset))
    };
    let role = format!("{:<10}", m.role.as_str());
    let mut body = if !m.content.is_empty() {
        m.content.clone()
    } else if !m.tool_calls.is_empty() {
        let names: Vec<&str> = m
            .tool_calls
            .iter()
            .map(|t| t.function.name.as_str())
            .collect();
        format!("→ {}", names.join(", "))
    } else {
        String::new()
    };
    if m.role == Role::Tool
        && let Some(n) = &m.name
    {
        body = format!("{n}: {body}");
    }
    let used = 2 + text_width(&when) + 10;
    Line::from(vec![
        Span::styled(format!("{mark} "), theme.accent),
        Span::styled(when, theme.muted),
        Span::styled(role, role_style(m.role, theme)),
        Span::styled(one_line(&body, width.saturating_sub(used)), theme.text),
    ])
}

fn trace_row(r: &Value, width: usize, theme: &Theme) -> Line<'static> {
    let kind = r
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    let iter = r
        .get("iter")
        .and_then(Value::as_u64)
        .map_or(String::new(), |i| format!("#{i}"));
    let mut rest = serde_json::Map::new();
    if let Some(o) = r.as_object() {
        for (k, v) in o {
            if !matches!(k.as_str(), "type" | "iter" | "ts") {
                rest.insert(k.clone(), v.clone());
            }
        }
    }
    let head = format!("{iter:>5} {kind:<22}");
    let body = one_line(
        &Value::Object(rest).to_string(),
        width.saturating_sub(head.len() + 1),
    );
    Line::from(vec![
        Span::styled(head, theme.accent),
        Span::raw(" "),
        Span::styled(body, theme.muted),
    ])
}

fn archive_row(e: &ArchiveEntry, width: usize, theme: &Theme) -> Line<'static> {
    let head = format!(
        "⊕ {:<12} #{:<4} {:<9} ",
        e.layer,
        e.iter,
        e.message.role.as_str()
    );
    let id = e
        .tool_call_id
        .as_ref()
        .map(|i| format!("{i} "))
        .unwrap_or_default();
    let body = one_line(
        &format!("{id}{}", e.message.content),
        width.saturating_sub(text_width(&head)),
    );
    Line::from(vec![
        Span::styled(head, theme.accent),
        Span::styled(body, theme.text),
    ])
}

/// ASCII case-insensitive substring test.
pub(crate) fn contains_ci(hay: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return true;
    }
    let h = hay.as_bytes();
    let n = needle.as_bytes();
    h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

/// Restyles every occurrence of `q` (ASCII case-insensitive) in `line`.
fn highlight(line: Line<'static>, q: &str, style: Style) -> Line<'static> {
    if q.is_empty() {
        return line;
    }
    let text = line_text(&line);
    let tb = text.as_bytes();
    let qb = q.as_bytes();
    let mut ranges = Vec::new();
    let mut i = 0;
    while i + qb.len() <= tb.len() {
        if tb[i..i + qb.len()].eq_ignore_ascii_case(qb)
            && text.is_char_boundary(i)
            && text.is_char_boundary(i + qb.len())
        {
            ranges.push((i, i + qb.len()));
            i += qb.len();
        } else {
            i += 1;
        }
    }
    if ranges.is_empty() {
        return line;
    }
    let mut out: Vec<Span<'static>> = Vec::new();
    let mut pos = 0;
    for span in line.spans {
        let s = span.content.as_ref();
        let start = pos;
        let end = pos + s.len();
        let mut cut = start;
        for &(a, b) in &ranges {
            if b <= start || a >= end {
                continue;
            }
            let (a, b) = (a.max(start), b.min(end));
            if a > cut {
                out.push(Span::styled(
                    s[cut - start..a - start].to_string(),
                    span.style,
                ));
            }
            out.push(Span::styled(
                s[a - start..b - start].to_string(),
                span.style.patch(style),
            ));
            cut = b;
        }
        if cut < end {
            out.push(Span::styled(s[cut - start..].to_string(), span.style));
        }
        pos = end;
    }
    Line::from(out)
}
