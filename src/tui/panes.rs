//! The panels one conversation is drawn in: the chat with its side panel
//! (gauge over tool batches) on wide screens, or a tool strip and a
//! one-line gauge under it on narrow ones. The chat screen draws the
//! session's; the team view draws a worker's with the same code.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use tokio::time::Instant;

use super::chat::Chat;
use super::format::width as text_width;
use super::gauge::Gauge;
use super::keymap::{Action, Keymap};
use super::theme::Theme;
use super::tool_panel::ToolPanel;

/// Below this width the side panel folds under the chat.
pub const WIDE: u16 = 110;

/// The panels one conversation is shown in: the main session's, or a
/// team worker's (the same widgets, fed by that worker's events).
pub(crate) struct Panes<'a> {
    pub chat: &'a mut Chat,
    pub tools: &'a ToolPanel,
    pub gauge: &'a Gauge,
    pub theme: &'a Theme,
    pub keymap: &'a Keymap,
    /// The tool panel and gauge are shown (Ctrl-B).
    pub sidebar: bool,
    /// Chat cells are being selected: the selected one is marked.
    pub selecting: bool,
}

/// The chat with its side panel (gauge over tool batches) when `area` is
/// wide, or with a tool strip and a one-line gauge under it when narrow.
pub(crate) fn panes(area: Rect, buf: &mut Buffer, p: Panes<'_>, now: Instant) {
    let wide = area.width >= WIDE && p.sidebar;
    if wide {
        let side_w = (area.width as f32 * 0.34).clamp(40.0, 60.0) as u16;
        let chat_w = area.width - side_w;
        let side = Rect::new(area.x + chat_w, area.y, side_w, area.height);
        draw_side(side, buf, p.gauge, p.tools, p.theme, now);
        draw_chat(Rect::new(area.x, area.y, chat_w, area.height), buf, p);
        return;
    }
    // Narrow: gauge line and (when there are batches) a tool strip.
    let mut bottom = area.y + area.height;
    if p.sidebar && area.height > 0 {
        bottom -= 1;
        let line = p.gauge.compact_line(area.width as usize, p.theme);
        buf.set_line(area.x, bottom, &line, area.width);
        if !p.tools.batches.is_empty() {
            let avail = bottom.saturating_sub(area.y);
            let want = (p.tools.batches.back().map_or(0, |b| b.calls.len()) + 3) as u16;
            let h = want.min(avail / 3).max(3.min(avail));
            bottom -= h;
            let s = Rect::new(area.x, bottom, area.width, h);
            section_rule(
                Rect::new(s.x, s.y, s.width, 1),
                buf,
                "Tools",
                p.theme,
                false,
            );
            p.tools.render(
                Rect::new(
                    s.x + 1,
                    s.y + 1,
                    s.width.saturating_sub(2),
                    s.height.saturating_sub(1),
                ),
                buf,
                p.theme,
                now,
            );
        }
    }
    draw_chat(
        Rect::new(area.x, area.y, area.width, bottom - area.y),
        buf,
        p,
    );
}

fn draw_chat(area: Rect, buf: &mut Buffer, p: Panes<'_>) {
    if area.height == 0 || area.width < 4 {
        return;
    }
    // One column of margin on the right keeps text off the side panel.
    p.chat.view = (area.width.saturating_sub(1), area.height);
    let selected = p.chat.selected;
    let lines = p.chat.visible(p.theme);
    for (i, (cell, line)) in lines.iter().enumerate() {
        let y = area.y + i as u16;
        buf.set_line(area.x, y, line, area.width.saturating_sub(1));
        if selected == Some(*cell) && p.selecting {
            buf.set_string(area.x, y, "▌", p.theme.accent);
        }
    }
    if !p.chat.follow {
        let hint = format!(
            " ↓ more below · {} follows ",
            p.keymap.hint(Action::FollowBottom)
        );
        let w = text_width(&hint) as u16;
        if w < area.width {
            buf.set_string(
                area.x + area.width - w - 1,
                area.y + area.height - 1,
                hint,
                p.theme.accent.add_modifier(Modifier::REVERSED),
            );
        }
    }
}

/// A `─ Title ────` rule, bold in the accent colour when `live`.
pub(crate) fn section_rule(area: Rect, buf: &mut Buffer, title: &str, t: &Theme, live: bool) {
    let head = format!("─ {title} ");
    let rest = (area.width as usize).saturating_sub(text_width(&head));
    let style = if live {
        t.accent.add_modifier(Modifier::BOLD)
    } else {
        t.border
    };
    let line = Line::from(vec![
        Span::styled(head, style),
        Span::styled("─".repeat(rest), t.border),
    ]);
    buf.set_line(area.x, area.y, &line, area.width);
}

fn draw_side(
    area: Rect,
    buf: &mut Buffer,
    gauge: &Gauge,
    tools: &ToolPanel,
    t: &Theme,
    now: Instant,
) {
    for y in area.y..area.y + area.height {
        buf.set_string(area.x, y, "│", t.border);
    }
    let inner = Rect::new(
        area.x + 2,
        area.y,
        area.width.saturating_sub(3),
        area.height,
    );
    let gauge_lines = gauge.lines(inner.width as usize, t, now);
    let gauge_h = (gauge_lines.len() as u16).min(inner.height.saturating_sub(1));
    section_rule(
        Rect::new(inner.x, inner.y, inner.width, 1),
        buf,
        "Context",
        t,
        gauge.active.is_some(),
    );
    for (i, l) in gauge_lines.iter().take(gauge_h as usize).enumerate() {
        buf.set_line(inner.x, inner.y + 1 + i as u16, l, inner.width);
    }
    let tools_y = inner.y + 1 + gauge_h + 1;
    if tools_y + 1 < inner.y + inner.height {
        section_rule(
            Rect::new(inner.x, tools_y, inner.width, 1),
            buf,
            "Tools",
            t,
            tools.is_live(),
        );
        let h = inner.y + inner.height - tools_y - 1;
        tools.render(Rect::new(inner.x, tools_y + 1, inner.width, h), buf, t, now);
    }
}
