//! Drawing the team view: the run's tasks as topological layers, one row
//! each (state, elapsed time, heartbeat age, current tool or reason), and a
//! worker's detail drawn with the main chat's own panes. Only the rows that
//! fit are formatted, so a frame costs the same for 4 workers or 30.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use tokio::time::Instant;

use super::cells::run_mark;
use super::chat::Chat;
use super::format::{clock, tokens, truncate, width as text_width};
use super::keymap::{Action, Keymap};
use super::panes::{Panes, WIDE, panes, section_rule};
use super::swarm::{SWARM_USAGE, TeamBoard, TeamPhase, TeamTask};
use super::theme::Theme;
use crate::agent::events::TaskState;

/// The team's state in a few words, for the status bar.
pub(crate) fn status(b: &TeamBoard, now: Instant) -> String {
    let clock_of = |b: &TeamBoard| b.elapsed(now).map(clock).unwrap_or_default();
    match &b.phase {
        TeamPhase::Starting => format!("◆ team {} starting…", b.preset),
        TeamPhase::Running => {
            let (done, all) = b.progress();
            format!("◆ team {done}/{all} · {}", clock_of(b))
        }
        TeamPhase::Cancelling => "◆ team cancelling…".to_string(),
        TeamPhase::Finished { status, .. } => {
            format!("◆ team {} · {}", status.as_str(), clock_of(b))
        }
        TeamPhase::Failed { .. } => "◆ team failed".to_string(),
    }
}

/// Draws the team view into `area` (the screen below the status bar).
pub(crate) fn render(
    area: Rect,
    buf: &mut Buffer,
    board: Option<&mut TeamBoard>,
    theme: &Theme,
    keymap: &Keymap,
    sidebar: bool,
    now: Instant,
) {
    if area.height < 3 {
        return;
    }
    let Some(board) = board else {
        let text = format!("No team run yet: {SWARM_USAGE} starts one.");
        buf.set_string(
            area.x,
            area.y,
            truncate(&text, area.width as usize),
            theme.muted,
        );
        return;
    };
    match board.detail {
        Some(i) if i < board.tasks.len() => detail(area, buf, board, theme, keymap, sidebar, now),
        _ => layers(area, buf, board, theme, keymap, now),
    }
}

fn state_mark(state: TaskState, theme: &Theme) -> (&'static str, Style) {
    match state {
        TaskState::Pending => ("○", theme.muted),
        TaskState::Running => ("◐", theme.accent),
        TaskState::Retrying => ("↻", theme.warn),
        TaskState::Success => ("✓", theme.ok),
        TaskState::Partial => ("◐", theme.warn),
        TaskState::Failed => ("✗", theme.error),
        TaskState::TimedOut => ("⏱", theme.error),
        TaskState::Cancelled => ("⊘", theme.warn),
        TaskState::Interrupted => ("!", theme.warn),
    }
}

fn phase_line(b: &TeamBoard, theme: &Theme, now: Instant) -> (String, Style) {
    let el = b.elapsed(now).map(clock).unwrap_or_default();
    let (done, all) = b.progress();
    match &b.phase {
        TeamPhase::Starting => ("starting…".into(), theme.muted),
        TeamPhase::Running => (
            format!("● running {el} · {done}/{all} done"),
            theme.accent.add_modifier(Modifier::BOLD),
        ),
        TeamPhase::Cancelling => (format!("⊘ cancelling… · {done}/{all} done"), theme.warn),
        TeamPhase::Finished { status, .. } => {
            let (mark, style) = run_mark(*status, theme);
            (
                format!("{mark} {} in {el} · {done}/{all} done", status.as_str()),
                style,
            )
        }
        TeamPhase::Failed { .. } => ("✗ failed".into(), theme.error),
    }
}

/// The second line: what the run is, or why it failed.
fn run_line(b: &TeamBoard, theme: &Theme) -> (String, Style) {
    match &b.phase {
        TeamPhase::Failed { error } => (error.clone(), theme.error),
        TeamPhase::Finished {
            reason: Some(r), ..
        } if !r.is_empty() => (r.clone(), theme.muted),
        _ => match (&b.run_id, &b.run_dir) {
            (Some(id), Some(dir)) => (format!("run {id} · {dir}"), theme.muted),
            (Some(id), None) => (format!("run {id}"), theme.muted),
            _ => {
                let vars: Vec<String> = b.vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let text = if vars.is_empty() {
                    format!("team {}", b.preset)
                } else {
                    format!("team {} · {}", b.preset, vars.join(" "))
                };
                (text, theme.muted)
            }
        },
    }
}

/// One line with `left` and `right` ends.
fn ends(left: Vec<Span<'static>>, right: Span<'static>, width: usize) -> Line<'static> {
    let lw: usize = left.iter().map(|s| text_width(&s.content)).sum();
    let rw = text_width(&right.content);
    let mut spans = left;
    if lw + rw < width {
        spans.push(Span::raw(" ".repeat(width - lw - rw)));
        spans.push(right);
    }
    Line::from(spans)
}

fn hint_line(pairs: &[(String, &str)], theme: &Theme, width: usize) -> Line<'static> {
    let mut spans = Vec::new();
    let mut used = 0;
    for (key, what) in pairs {
        let w = text_width(key) + text_width(what) + 3;
        if used + w > width {
            break;
        }
        spans.push(Span::styled(key.clone(), theme.key));
        spans.push(Span::styled(format!(" {what}  "), theme.muted));
        used += w;
    }
    Line::from(spans)
}

/// A row of the layer list.
#[derive(Clone, Copy)]
enum Row {
    Layer(usize),
    /// A task: its index and its position in display order.
    Task(usize, usize),
}

/// Column widths of the task rows.
struct Columns {
    id: usize,
    role: usize,
}

/// The title, run line, key hints and report line; returns the row the
/// task list must end above.
fn header(
    area: Rect,
    buf: &mut Buffer,
    b: &TeamBoard,
    theme: &Theme,
    keymap: &Keymap,
    now: Instant,
) -> u16 {
    let w = area.width as usize;
    let title = vec![
        Span::styled(
            format!("Team · {}", b.title),
            theme.accent.add_modifier(Modifier::BOLD),
        ),
        Span::styled(
            if b.title != b.preset {
                format!(" ({})", b.preset)
            } else {
                String::new()
            },
            theme.muted,
        ),
    ];
    let (phase, phase_style) = phase_line(b, theme, now);
    buf.set_line(
        area.x,
        area.y,
        &ends(title, Span::styled(phase, phase_style), w),
        area.width,
    );
    let (run, run_style) = run_line(b, theme);
    buf.set_string(area.x, area.y + 1, truncate(&run, w), run_style);

    let k = |a: Action| keymap.hint(a);
    let mut pairs = vec![
        ("↑↓".to_string(), "select"),
        (k(Action::Open), "open worker"),
        (k(Action::Back), "back to chat"),
    ];
    if b.cancellable() {
        pairs.push((k(Action::Interrupt), "cancel team"));
    }
    let hint_y = area.y + area.height - 1;
    buf.set_line(area.x, hint_y, &hint_line(&pairs, theme, w), area.width);
    let mut list_bottom = hint_y;
    if let TeamPhase::Finished { report, .. } = &b.phase
        && !report.is_empty()
        && list_bottom > area.y + 3
    {
        list_bottom -= 1;
        buf.set_string(
            area.x,
            list_bottom,
            truncate(&format!("report: {report}"), w),
            theme.accent,
        );
    }

    list_bottom
}

impl Columns {
    fn of(b: &TeamBoard, area: Rect) -> Self {
        Columns {
            id: b
                .tasks
                .iter()
                .map(|t| text_width(&t.id))
                .max()
                .unwrap_or(4)
                .clamp(4, 24),
            role: if area.width >= WIDE {
                b.tasks
                    .iter()
                    .map(|t| text_width(&t.role))
                    .max()
                    .unwrap_or(0)
                    .min(22)
            } else {
                0
            },
        }
    }
}

fn layers(
    area: Rect,
    buf: &mut Buffer,
    b: &mut TeamBoard,
    theme: &Theme,
    keymap: &Keymap,
    now: Instant,
) {
    let w = area.width as usize;
    let list_bottom = header(area, buf, b, theme, keymap, now);
    let top = area.y + 2;
    if b.tasks.is_empty() || list_bottom <= top + 1 {
        if b.tasks.is_empty() && list_bottom > top + 1 {
            buf.set_string(area.x + 2, top + 1, "no tasks yet", theme.muted);
        }
        return;
    }
    let cols = Columns::of(b, area);
    let mut rows = Vec::with_capacity(b.tasks.len() + b.layers.len());
    let mut pos = 0;
    for (li, layer) in b.layers.iter().enumerate() {
        rows.push(Row::Layer(li));
        for &ti in layer {
            rows.push(Row::Task(ti, pos));
            pos += 1;
        }
    }
    let height = (list_bottom - top) as usize;
    let cursor_row = rows
        .iter()
        .position(|r| matches!(r, Row::Task(_, p) if *p == b.cursor))
        .unwrap_or(0);
    let offset = (cursor_row + 1).saturating_sub(height);
    for (i, row) in rows.iter().skip(offset).take(height).enumerate() {
        let y = top + i as u16;
        match *row {
            Row::Layer(li) => {
                let layer = &b.layers[li];
                let live = layer.iter().any(|t| b.tasks[*t].state.is_live());
                let title = format!(
                    "layer {} · {} task{}",
                    li + 1,
                    layer.len(),
                    if layer.len() == 1 { "" } else { "s" }
                );
                section_rule(
                    Rect::new(area.x, y, area.width, 1),
                    buf,
                    &title,
                    theme,
                    live,
                );
            }
            Row::Task(ti, p) => {
                let selected = p == b.cursor;
                let line = task_row(&b.tasks[ti], selected, &cols, w, theme, now);
                if selected {
                    buf.set_style(Rect::new(area.x, y, area.width, 1), theme.selection);
                }
                buf.set_line(area.x, y, &line, area.width);
            }
        }
    }
    // Room left below the list shows the selected worker's latest output.
    let used = rows.len().saturating_sub(offset).min(height) as u16;
    let preview_y = top + used + 1;
    if list_bottom >= preview_y + PREVIEW_MIN_ROWS
        && let Some(t) = b.selected().and_then(|i| b.tasks.get_mut(i))
    {
        let title = format!(
            "{} · latest output ({} opens it)",
            t.id,
            keymap.hint(Action::Open)
        );
        section_rule(
            Rect::new(area.x, preview_y, area.width, 1),
            buf,
            &title,
            theme,
            false,
        );
        let chat_area = Rect::new(
            area.x,
            preview_y + 1,
            area.width,
            list_bottom - preview_y - 1,
        );
        preview(chat_area, buf, &mut t.worker.chat, theme);
    }
}

/// Rows the selected worker's preview needs to be worth showing.
const PREVIEW_MIN_ROWS: u16 = 6;

/// The bottom of a worker's chat, following its output.
fn preview(area: Rect, buf: &mut Buffer, chat: &mut Chat, theme: &Theme) {
    chat.view = (area.width.saturating_sub(1), area.height);
    if chat.cells.is_empty() {
        buf.set_string(area.x + 2, area.y, "no output yet", theme.muted);
        return;
    }
    let follow = chat.follow;
    chat.follow_bottom();
    for (i, (_, line)) in chat.visible(theme).iter().enumerate() {
        buf.set_line(
            area.x,
            area.y + i as u16,
            line,
            area.width.saturating_sub(1),
        );
    }
    chat.follow = follow;
}

/// What a task is doing now, or how it ended.
fn activity(t: &TeamTask) -> String {
    let mut parts: Vec<String> = Vec::new();
    match t.state {
        TaskState::Pending => {
            if t.depends_on.is_empty() {
                parts.push("queued".into());
            } else {
                parts.push(format!("needs {}", t.depends_on.join(", ")));
            }
        }
        TaskState::Running | TaskState::Retrying => {
            if t.state == TaskState::Retrying {
                parts.push(format!(
                    "retry after: {}",
                    t.reason.as_deref().unwrap_or("a failed attempt")
                ));
            } else if let Some((tool, others)) = t.current_tool() {
                parts.push(if others > 0 {
                    format!("⚙ {tool} +{others}")
                } else {
                    format!("⚙ {tool}")
                });
            } else if t.worker.chat.is_streaming() {
                parts.push("writing".into());
            } else {
                parts.push("thinking".into());
            }
            if let Some((s, m)) = t.step {
                parts.push(format!("step {s}/{m}"));
            }
            if t.attempt > 1 {
                parts.push(format!("attempt {}", t.attempt));
            }
            if t.tokens > 0 {
                parts.push(format!("{} tok", tokens(t.tokens)));
            }
        }
        _ => {
            if let Some(r) = t.reason.as_deref().filter(|r| !r.is_empty()) {
                parts.push(r.to_string());
            }
            if t.tokens > 0 {
                parts.push(format!("{} tok", tokens(t.tokens)));
            }
            if t.attempt > 1 {
                parts.push(format!("{} attempts", t.attempt));
            }
        }
    }
    parts.join(" · ")
}

fn pad(text: &str, width: usize) -> String {
    let cut = truncate(text, width);
    let w = text_width(&cut);
    format!("{cut}{}", " ".repeat(width.saturating_sub(w)))
}

fn task_row(
    t: &TeamTask,
    selected: bool,
    cols: &Columns,
    width: usize,
    theme: &Theme,
    now: Instant,
) -> Line<'static> {
    let (mark, mark_style) = state_mark(t.state, theme);
    let text_style = if selected {
        theme.text.add_modifier(Modifier::BOLD)
    } else {
        theme.text
    };
    let mut spans = vec![
        Span::styled(if selected { "▌" } else { " " }, theme.accent),
        Span::styled(format!("{mark} "), mark_style),
        Span::styled(pad(&t.id, cols.id), text_style),
        Span::raw(" "),
    ];
    if cols.role > 0 {
        spans.push(Span::styled(pad(&t.role, cols.role), theme.muted));
        spans.push(Span::raw(" "));
    }
    spans.push(Span::styled(pad(t.state.label(), 10), mark_style));
    let elapsed = t.elapsed(now).map(clock).unwrap_or_else(|| "—".into());
    spans.push(Span::styled(format!("{elapsed:>8} "), theme.text));
    let heart = t
        .heartbeat_age(now)
        .map(|d| format!("♥{}", clock(d)))
        .unwrap_or_default();
    spans.push(Span::styled(format!("{heart:<6} "), theme.muted));
    let used: usize = spans.iter().map(|s| text_width(&s.content)).sum();
    let rest = width.saturating_sub(used);
    let act_style = match t.state {
        TaskState::Failed | TaskState::TimedOut => theme.error,
        TaskState::Partial => theme.warn,
        TaskState::Running => theme.text,
        _ => theme.muted,
    };
    spans.push(Span::styled(truncate(&activity(t), rest), act_style));
    Line::from(spans)
}

/// The open worker's panes (the board's `detail`, checked by the caller).
fn detail(
    area: Rect,
    buf: &mut Buffer,
    b: &mut TeamBoard,
    theme: &Theme,
    keymap: &Keymap,
    sidebar: bool,
    now: Instant,
) {
    let w = area.width as usize;
    let cancellable = b.cancellable();
    let team = b.title.clone();
    let Some(t) = b.detail.and_then(|i| b.tasks.get_mut(i)) else {
        return;
    };
    let (mark, _) = state_mark(t.state, theme);
    let mut head = format!("{mark} {}", t.id);
    if !t.role.is_empty() {
        head.push_str(&format!(" · {}", t.role));
    }
    head.push_str(&format!(" · {}", t.state.label()));
    if let Some(el) = t.elapsed(now) {
        head.push_str(&format!(" {}", clock(el)));
    }
    if let Some(hb) = t.heartbeat_age(now) {
        head.push_str(&format!(" ♥{}", clock(hb)));
    }
    if t.attempt > 1 {
        head.push_str(&format!(" · attempt {}", t.attempt));
    }
    head.push_str(&format!(" · team {team}"));
    section_rule(
        Rect::new(area.x, area.y, area.width, 1),
        buf,
        &truncate(&head, w.saturating_sub(4)),
        theme,
        t.state.is_live(),
    );
    let k = |a: Action| keymap.hint(a);
    let mut pairs = vec![
        (k(Action::Back), "team"),
        ("↑↓ PgUp PgDn".to_string(), "scroll"),
        (k(Action::NextTab), "next worker"),
        (k(Action::Bottom), "follow"),
    ];
    if cancellable {
        pairs.push((k(Action::Interrupt), "cancel team"));
    }
    let hint_y = area.y + area.height - 1;
    buf.set_line(area.x, hint_y, &hint_line(&pairs, theme, w), area.width);
    let body = Rect::new(
        area.x,
        area.y + 1,
        area.width,
        area.height.saturating_sub(2),
    );
    let worker = &mut t.worker;
    panes(
        body,
        buf,
        Panes {
            chat: &mut worker.chat,
            tools: &worker.tools,
            gauge: &worker.gauge,
            theme,
            keymap,
            sidebar,
            selecting: false,
        },
        now,
    );
}
