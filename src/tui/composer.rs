//! The message input: a multi-line `ratatui-textarea` plus sent-message
//! history (Up on the first line, Down on the last) and paste.

use ratatui::style::Style;
use ratatui_textarea::{CursorMove, TextArea, WrapMode};

use super::theme::Theme;

/// Sent messages remembered for Up/Down.
const HISTORY_MAX: usize = 500;

pub struct Composer {
    pub textarea: TextArea<'static>,
    history: Vec<String>,
    /// Position while browsing history; `None` when editing a fresh draft.
    pos: Option<usize>,
    /// The draft set aside while browsing history.
    draft: String,
}

impl std::fmt::Debug for Composer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Composer")
            .field("text", &self.text())
            .field("history", &self.history.len())
            .finish()
    }
}

impl Composer {
    pub(crate) fn new(theme: &Theme) -> Self {
        let mut c = Composer {
            textarea: TextArea::default(),
            history: Vec::new(),
            pos: None,
            draft: String::new(),
        };
        c.apply_theme(theme);
        c
    }

    pub(crate) fn apply_theme(&mut self, theme: &Theme) {
        let t = &mut self.textarea;
        t.set_wrap_mode(WrapMode::WordOrGlyph);
        t.set_style(theme.text);
        t.set_cursor_line_style(Style::default());
        t.set_cursor_style(theme.selection);
        t.set_placeholder_text("Ask anything · Enter sends · Alt-Enter new line · ? help");
        t.set_placeholder_style(theme.muted);
    }

    pub fn text(&self) -> String {
        self.textarea.lines().join("\n")
    }

    pub fn is_empty(&self) -> bool {
        self.textarea.is_empty()
    }

    pub fn line_count(&self) -> usize {
        self.textarea.lines().len()
    }

    pub(crate) fn set_text(&mut self, text: &str) {
        let lines: Vec<String> = text.split('\n').map(String::from).collect();
        let theme_style = self.textarea.style();
        let cursor_style = self.textarea.cursor_style();
        let placeholder = self.textarea.placeholder_text().to_string();
        let placeholder_style = self.textarea.placeholder_style();
        self.textarea = TextArea::new(lines);
        self.textarea.set_wrap_mode(WrapMode::WordOrGlyph);
        self.textarea.set_style(theme_style);
        self.textarea.set_cursor_line_style(Style::default());
        self.textarea.set_cursor_style(cursor_style);
        self.textarea.set_placeholder_text(placeholder);
        if let Some(s) = placeholder_style {
            self.textarea.set_placeholder_style(s);
        }
        self.textarea.move_cursor(CursorMove::Bottom);
        self.textarea.move_cursor(CursorMove::End);
    }

    pub(crate) fn clear(&mut self) {
        self.set_text("");
        self.pos = None;
    }

    pub(crate) fn on_first_line(&self) -> bool {
        self.textarea.cursor().0 == 0
    }

    pub(crate) fn on_last_line(&self) -> bool {
        self.textarea.cursor().0 + 1 >= self.textarea.lines().len()
    }

    pub(crate) fn insert_newline(&mut self) {
        self.textarea.insert_newline();
    }

    /// Pasted text goes in as typed text, newlines included (bracketed paste
    /// keeps it from being read as Enter).
    pub(crate) fn paste(&mut self, text: &str) {
        let normal = text.replace("\r\n", "\n").replace('\r', "\n");
        self.textarea.insert_str(normal);
    }

    /// Remembers a sent message (no consecutive duplicates).
    pub(crate) fn remember(&mut self, text: &str) {
        if text.trim().is_empty() || self.history.last().is_some_and(|l| l == text) {
            return;
        }
        self.history.push(text.to_string());
        if self.history.len() > HISTORY_MAX {
            self.history.remove(0);
        }
        self.pos = None;
    }

    /// Seeds history from a resumed session's prompts, oldest first.
    pub(crate) fn seed_history(&mut self, prompts: impl IntoIterator<Item = String>) {
        self.history.clear();
        for p in prompts {
            self.remember(&p);
        }
    }

    pub(crate) fn history_prev(&mut self) -> bool {
        if self.history.is_empty() {
            return false;
        }
        let next = match self.pos {
            None => {
                self.draft = self.text();
                self.history.len() - 1
            }
            Some(0) => return false,
            Some(p) => p - 1,
        };
        self.pos = Some(next);
        let t = self.history[next].clone();
        self.set_text(&t);
        true
    }

    pub(crate) fn history_next(&mut self) -> bool {
        let Some(p) = self.pos else {
            return false;
        };
        if p + 1 < self.history.len() {
            self.pos = Some(p + 1);
            let t = self.history[p + 1].clone();
            self.set_text(&t);
        } else {
            self.pos = None;
            let d = std::mem::take(&mut self.draft);
            self.set_text(&d);
        }
        true
    }
}
