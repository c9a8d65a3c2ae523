//! Drawing: a pure function of the app state and the time (render caches
//! aside). Wide terminals get the chat with a side panel (gauge over tool
//! batches); narrow ones stack a tool strip and a one-line gauge under the
//! chat. Works from 80×24 up; every frame is laid out from scratch, so a
//! resize reflows without leftovers.

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Widget};
use tokio::time::Instant;

use super::app::{App, Focus};
use super::cells::NoticeKind;
use super::format::{clock, one_line, thousands, truncate, width as text_width};
use super::keymap::Action;
use super::overlay::Overlay;
use super::panes::{Panes, panes};
use super::swarm_view;

pub use super::panes::WIDE;
/// Rows the input may grow to (plus its border).
const INPUT_MAX_ROWS: usize = 8;

pub fn draw(frame: &mut Frame<'_>, app: &mut App, now: Instant) {
    let area = frame.area();
    render(area, frame.buffer_mut(), app, now);
}

/// Renders the whole screen into `buf` (tests and benches call this directly).
pub(crate) fn render(area: Rect, buf: &mut Buffer, app: &mut App, now: Instant) {
    app.dirty = false;
    if area.width < 20 || area.height < 6 {
        buf.set_string(area.x, area.y, "vibedesk: window too small", app.theme.warn);
        return;
    }
    Clear.render(area, buf);
    buf.set_style(area, app.theme.text);
    // The top overlay covers what is below it: the browser the whole
    // screen, the help page and the team view all but the status bar.
    if let Some(Overlay::Browser(b)) = app.overlays.top_mut() {
        b.render(area, buf, &app.theme);
        return;
    }
    status_bar(Rect::new(area.x, area.y, area.width, 1), buf, app, now);
    let body = Rect::new(area.x, area.y + 1, area.width, area.height - 1);
    if let Some(Overlay::Help(h)) = app.overlays.top_mut() {
        h.render(body, buf, &app.keymap, &app.theme);
        return;
    }
    if let Some(Overlay::Approval(v)) = app.overlays.top_mut() {
        v.render(body, buf, &app.theme);
        return;
    }
    if let Some(Overlay::Monitors(v)) = app.overlays.top_mut() {
        v.render(body, buf, &app.theme);
        return;
    }
    if let Some(Overlay::TearSheet(v)) = app.overlays.top_mut() {
        v.render(body, buf, &app.theme);
        return;
    }
    if let Some(Overlay::Factors(v)) = app.overlays.top_mut() {
        super::factor_charts::frame(v, body, buf, &app.theme);
        return;
    }

    if matches!(app.overlays.top(), Some(Overlay::Swarm)) {
        swarm_view::render(
            body,
            buf,
            app.swarm.as_mut(),
            &app.theme,
            &app.keymap,
            app.sidebar,
            now,
        );
        return;
    }

    let footer_y = body.y + body.height - 1;
    let input_h = input_height(app, body.width);
    let queued_h = app.queued.len().min(3) as u16;
    let bottom = footer_y - input_h - queued_h;
    panes(
        Rect::new(body.x, body.y, body.width, bottom - body.y),
        buf,
        Panes {
            chat: &mut app.chat,
            tools: &app.tools,
            gauge: &app.gauge,
            theme: &app.theme,
            keymap: &app.keymap,
            sidebar: app.sidebar,
            selecting: app.focus == Focus::Chat,
        },
        now,
    );
    // Queued messages sit right above the input.
    for (i, q) in app.queued.iter().take(3).enumerate() {
        let text = format!("↳ queued {}: {}", i + 1, one_line(q, body.width as usize));
        buf.set_line(
            body.x,
            footer_y - input_h - queued_h + i as u16,
            &Line::from(Span::styled(
                truncate(&text, body.width as usize),
                app.theme.muted,
            )),
            body.width,
        );
    }
    draw_input(
        Rect::new(body.x, footer_y - input_h, body.width, input_h),
        buf,
        app,
    );
    footer(Rect::new(body.x, footer_y, body.width, 1), buf, app);
}

fn input_height(app: &App, width: u16) -> u16 {
    let inner = width.saturating_sub(2).max(1) as usize;
    let rows: usize = app
        .composer
        .textarea
        .lines()
        .iter()
        .map(|l| text_width(l).div_ceil(inner).max(1))
        .sum();
    rows.clamp(1, INPUT_MAX_ROWS) as u16 + 2
}

fn status_bar(area: Rect, buf: &mut Buffer, app: &App, now: Instant) {
    let t = &app.theme;
    let session = app
        .session_id
        .clone()
        .unwrap_or_else(|| "new session".to_string());
    let model = if app.options.has_model {
        app.options.model_label.clone()
    } else {
        "no model configured".to_string()
    };
    let folder = if app.options.workspace.is_some() {
        format!(" · in {}", app.options.workspace_label)
    } else {
        String::new()
    };
    let left = format!(" vibedesk · {session} · {model}{folder} ");
    let state = if app.cancelling() {
        "⊘ cancelling…".to_string()
    } else if app.busy() {
        let el = app
            .phase()
            .started_at()
            .map(|s| clock(now.saturating_duration_since(s)))
            .unwrap_or_default();
        let step = app
            .step
            .map(|(s, m)| format!(" · step {s}/{m}"))
            .unwrap_or_default();
        format!("● running {el}{step}")
    } else {
        "○ idle".to_string()
    };
    let tokens = if app.usage.total_tokens > 0 {
        format!(" · {} tok", thousands(app.usage.total_tokens))
    } else {
        String::new()
    };
    let team = app
        .swarm
        .as_ref()
        .map(|b| format!("{} · ", swarm_view::status(b, now)))
        .unwrap_or_default();
    let right = format!("{team}{state}{tokens} ");
    let w = area.width as usize;
    let right_w = text_width(&right);
    let left = truncate(&left, w.saturating_sub(right_w + 1));
    let pad = w.saturating_sub(text_width(&left) + right_w);
    let state_style = if app.busy() {
        t.status.add_modifier(Modifier::BOLD)
    } else {
        t.status
    };
    let line = Line::from(vec![
        Span::styled(left, t.status.add_modifier(Modifier::BOLD)),
        Span::styled(" ".repeat(pad), t.status),
        Span::styled(right, state_style),
    ]);
    buf.set_line(area.x, area.y, &line, area.width);
}

fn draw_input(area: Rect, buf: &mut Buffer, app: &mut App) {
    let t = &app.theme;
    let focused = app.focus == Focus::Input;
    let mut title = " Message ".to_string();
    if app.busy() {
        title = " Message · Enter queues it, Esc cancels the run ".to_string();
    }
    if app.composer.line_count() > 1 {
        title.push_str(&format!("· {} lines ", app.composer.line_count()));
    }
    let block = Block::bordered()
        .border_style(if focused { t.border_focus } else { t.border })
        .title(Span::styled(
            title,
            if focused { t.accent } else { t.muted },
        ));
    let inner = block.inner(area);
    block.render(area, buf);
    (&app.composer.textarea).render(inner, buf);
}

fn footer(area: Rect, buf: &mut Buffer, app: &App) {
    let t = &app.theme;
    let line = if let Some((kind, text)) = &app.status {
        let style = match kind {
            NoticeKind::Info => t.accent,
            NoticeKind::Warning => t.warn,
            NoticeKind::Error => t.error,
        };
        Line::from(Span::styled(truncate(text, area.width as usize), style))
    } else {
        let k = |a: Action| app.keymap.hint(a);
        let pairs: Vec<(String, &str)> = if app.busy() {
            vec![
                (k(Action::CancelRun), "cancel"),
                (k(Action::Submit), "queue"),
                (k(Action::ScrollUp), "scroll"),
                (k(Action::FocusChat), "cells"),
                (k(Action::Transcripts), "transcripts"),
            ]
        } else if app.focus == Focus::Chat {
            vec![
                ("↑↓".to_string(), "select"),
                (k(Action::ToggleCell), "expand"),
                (k(Action::ToggleReasoning), "reasoning"),
                (k(Action::FocusInput), "input"),
            ]
        } else {
            vec![
                (k(Action::Submit), "send"),
                ("Alt-Enter".to_string(), "newline"),
                (k(Action::Transcripts), "transcripts"),
                (k(Action::FocusChat), "cells"),
                ("?".to_string(), "help"),
                (k(Action::Interrupt), "quit"),
            ]
        };
        let mut pairs = pairs;
        if app.swarm.is_some() {
            // The team's view is one key away while it exists.
            pairs.insert(1, (k(Action::SwarmView), "team"));
        }
        let mut spans = Vec::new();
        let mut used = 0;
        for (key, what) in pairs {
            let w = text_width(&key) + text_width(what) + 3;
            if used + w > area.width as usize {
                break;
            }
            spans.push(Span::styled(key, t.key));
            spans.push(Span::styled(format!(" {what}  "), t.muted));
            used += w;
        }
        Line::from(spans)
    };
    buf.set_line(area.x, area.y, &line, area.width);
}
