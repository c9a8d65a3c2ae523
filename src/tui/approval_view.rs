//! The approval overlay (docs §2.14.4): what a call will do, and the
//! user's answer. `y` yes once, `a` yes for this session (same tool and
//! target), `n` no (then an optional reason and Enter), Esc no.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};

use super::theme::Theme;
use crate::model::approval::ApprovalMode;
use crate::tools::approval::Answer;

/// A call waiting for the user, as the overlay shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalView {
    pub tool: String,
    pub target: String,
    pub mode: ApprovalMode,
    pub preview: Vec<String>,
    /// The reason line, once `n` opened it.
    pub reason: Option<String>,
    pub scroll: usize,
}

/// What a key did to the overlay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalKey {
    /// The user answered: the overlay closes.
    Answered(Answer),
    /// Taken (typing, scrolling, the reason line opening).
    Taken,
    /// Not the overlay's (Ctrl-C, say): passes down.
    Passed,
}

impl ApprovalView {
    pub fn new(tool: String, target: String, mode: ApprovalMode, preview: Vec<String>) -> Self {
        ApprovalView {
            tool,
            target,
            mode,
            preview,
            reason: None,
            scroll: 0,
        }
    }

    pub fn key(&mut self, key: &KeyEvent) -> ApprovalKey {
        if key.modifiers.contains(KeyModifiers::CONTROL) {
            return ApprovalKey::Passed;
        }
        if let Some(reason) = &mut self.reason {
            return match key.code {
                KeyCode::Enter => ApprovalKey::Answered(Answer::No(Some(std::mem::take(reason)))),
                KeyCode::Esc => ApprovalKey::Answered(Answer::No(None)),
                KeyCode::Backspace => {
                    reason.pop();
                    ApprovalKey::Taken
                }
                KeyCode::Char(c) => {
                    reason.push(c);
                    ApprovalKey::Taken
                }
                _ => ApprovalKey::Taken,
            };
        }
        match key.code {
            KeyCode::Char('y') => ApprovalKey::Answered(Answer::Yes),
            KeyCode::Char('a') => ApprovalKey::Answered(Answer::YesForSession),
            KeyCode::Char('n') => {
                self.reason = Some(String::new());
                ApprovalKey::Taken
            }
            KeyCode::Esc => ApprovalKey::Answered(Answer::No(None)),
            KeyCode::Up => {
                self.scroll = self.scroll.saturating_sub(1);
                ApprovalKey::Taken
            }
            KeyCode::Down => {
                self.scroll = (self.scroll + 1).min(self.preview.len().saturating_sub(1));
                ApprovalKey::Taken
            }
            _ => ApprovalKey::Taken,
        }
    }

    /// The overlay over `area` (the screen below the status bar).
    pub fn render(&mut self, area: Rect, buf: &mut Buffer, theme: &Theme) {
        if area.height < 4 {
            return;
        }
        buf.set_style(area, theme.text);
        let width = area.width as usize;
        let title = format!(
            "Approve {} {}? (mode {})",
            self.tool,
            crate::text::preview(&self.target, 60),
            self.mode
        );
        buf.set_line(
            area.x,
            area.y,
            &Line::from(Span::styled(
                format!("{title:<width$}"),
                theme.status.add_modifier(Modifier::BOLD),
            )),
            area.width,
        );
        let body_h = area.height.saturating_sub(2) as usize;
        self.scroll = self.scroll.min(self.preview.len().saturating_sub(body_h));
        for (i, l) in self
            .preview
            .iter()
            .skip(self.scroll)
            .take(body_h)
            .enumerate()
        {
            let style = if l.starts_with('+') && !l.starts_with("+++") {
                theme.ok
            } else if l.starts_with('-') && !l.starts_with("---") {
                theme.error
            } else {
                theme.text
            };
            let y = area.y.saturating_add(1).saturating_add(i as u16);
            buf.set_line(
                area.x,
                y,
                &Line::from(Span::styled(l.as_str(), style)),
                area.width,
            );
        }
        let hint = match &self.reason {
            Some(r) => format!("reason (optional): {r}▏ · Enter send no · Esc no"),
            None => "y yes · a yes for this session · n no (with a reason) · Esc no".to_string(),
        };
        buf.set_line(
            area.x,
            area.y + area.height - 1,
            &Line::from(Span::styled(hint, theme.muted)),
            area.width,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(v: &mut ApprovalView, code: KeyCode) -> ApprovalKey {
        v.key(&KeyEvent::new(code, KeyModifiers::NONE))
    }

    #[test]
    fn keys_answer_yes_session_and_no_with_a_reason() {
        let view = ApprovalView::new(
            "write_file".into(),
            "a.md".into(),
            ApprovalMode::Ask,
            vec![],
        );
        let mut v = view.clone();
        assert_eq!(
            press(&mut v, KeyCode::Char('y')),
            ApprovalKey::Answered(Answer::Yes)
        );
        let mut v = view.clone();
        assert_eq!(
            press(&mut v, KeyCode::Char('a')),
            ApprovalKey::Answered(Answer::YesForSession)
        );
        let mut v = view.clone();
        assert_eq!(press(&mut v, KeyCode::Char('n')), ApprovalKey::Taken);
        for c in "not now".chars() {
            press(&mut v, KeyCode::Char(c));
        }
        assert_eq!(
            press(&mut v, KeyCode::Enter),
            ApprovalKey::Answered(Answer::No(Some("not now".into())))
        );
        let mut v = view;
        assert_eq!(
            press(&mut v, KeyCode::Esc),
            ApprovalKey::Answered(Answer::No(None))
        );
    }
}
