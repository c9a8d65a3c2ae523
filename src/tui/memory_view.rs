//! The browser's memory view (over [`super::memories`]): the list of memory
//! entries with their level, last access, importance and retention, and one
//! entry's current (compressed) text beside its archived originals. From
//! [`SPLIT_MIN`] columns the two texts stand side by side; below, they are
//! stacked and the focused one gets most of the rows (`v` switches).

use chrono::{DateTime, FixedOffset, Utc};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::format::{one_line, truncate, width as text_width};
use super::memories::{MemoryDetail, MemoryRow};
use super::theme::Theme;
use super::wrap::wrap_spans;

/// From this width the entry view is side by side.
pub(crate) const SPLIT_MIN: u16 = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pane {
    /// The entry's text as it is now (compressed when its level is not raw).
    Current,
    /// The selected archived original.
    Original,
}

impl Pane {
    pub(crate) fn index(self) -> usize {
        match self {
            Pane::Current => 0,
            Pane::Original => 1,
        }
    }

    pub(crate) fn other(self) -> Pane {
        match self {
            Pane::Current => Pane::Original,
            Pane::Original => Pane::Current,
        }
    }
}

/// What the entry view remembers between frames.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryView {
    pub file: String,
    /// Index into the entry's archives (newest first).
    pub archive: usize,
    pub pane: Pane,
    /// Scroll of each pane, in wrapped lines.
    pub scroll: [usize; 2],
}

impl EntryView {
    pub(crate) fn new(file: String) -> Self {
        EntryView {
            file,
            archive: 0,
            pane: Pane::Current,
            scroll: [0, 0],
        }
    }
}

fn when(t: Option<DateTime<Utc>>, offset: FixedOffset) -> String {
    t.map_or_else(
        || "—".into(),
        |t| {
            t.with_timezone(&offset)
                .format("%Y-%m-%d %H:%M")
                .to_string()
        },
    )
}

fn score(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{v:.2}"))
}

const TYPE_W: usize = 9;
const LEVEL_W: usize = 6;
const WHEN_W: usize = 16;

/// The list's column names.
pub(crate) fn header(width: usize, theme: &Theme) -> Line<'static> {
    let text = format!(
        "  {:<TYPE_W$} {:<LEVEL_W$} {:<WHEN_W$}  {:>4}  {:>4}  {:>3}  title",
        "type", "level", "last access", "imp", "ret", "⊕"
    );
    Line::from(Span::styled(
        truncate(&text, width),
        theme.muted.add_modifier(Modifier::BOLD),
    ))
}

fn level_style(level: &str, theme: &Theme) -> Style {
    match level {
        "raw" => theme.text,
        "daily" => theme.accent,
        "digest" => theme.warn,
        _ => theme.error,
    }
}

/// One entry of the list, fitted to `width`.
pub(crate) fn row(
    r: &MemoryRow,
    width: usize,
    theme: &Theme,
    offset: FixedOffset,
) -> Line<'static> {
    let (mark, mark_style) = if r.problem.is_some() {
        ("⚠ ", theme.warn)
    } else if r.unconfirmed {
        // The model's, not yet kept by the user (`K` keeps it).
        ("? ", theme.accent)
    } else {
        ("  ", theme.muted)
    };
    let arc = if r.archives > 0 {
        format!("⊕{}", r.archives)
    } else {
        String::new()
    };
    let cols = format!(
        " {:<WHEN_W$}  {:>4}  {:>4}  {:>3}  ",
        when(r.last_accessed, offset),
        score(r.importance),
        score(r.retention),
        arc
    );
    let used = 2 + TYPE_W + 1 + LEVEL_W + text_width(&cols);
    let room = width.saturating_sub(used);
    let title = one_line(&r.title, room);
    let mut spans = vec![
        Span::styled(mark, mark_style),
        Span::styled(
            format!("{:<TYPE_W$} ", truncate(&r.memory_type, TYPE_W)),
            theme.muted,
        ),
        Span::styled(
            format!("{:<LEVEL_W$}", truncate(&r.level, LEVEL_W)),
            level_style(&r.level, theme),
        ),
        Span::styled(cols, theme.muted),
        Span::styled(title.clone(), theme.text),
    ];
    // The description too when there is room and it says more than the title.
    let rest = room.saturating_sub(text_width(&title) + 3);
    if rest > 8 && !r.description.is_empty() && r.description != r.title {
        spans.push(Span::styled(
            format!(" · {}", one_line(&r.description, rest)),
            theme.muted,
        ));
    }
    Line::from(spans)
}

/// Everything `/` searches in a row: not only what fits on screen.
pub(crate) fn search_text(r: &MemoryRow) -> String {
    format!(
        "{} {} {} {} {} {}\n{}",
        r.title,
        r.memory_type,
        r.level,
        r.description,
        r.keywords.join(" "),
        r.problem.as_deref().unwrap_or(""),
        r.body
    )
}

/// `Some((left, right))` pane widths side by side (one column between them
/// for the rule), `None` when the panes stack.
pub(crate) fn split(width: usize) -> Option<(usize, usize)> {
    (width >= SPLIT_MIN as usize).then(|| {
        let left = (width - 1) / 2;
        (left, width - 1 - left)
    })
}

/// Width of `pane`'s text at a browser width.
pub(crate) fn pane_width(width: usize, pane: Pane) -> usize {
    match split(width) {
        Some((l, r)) => match pane {
            Pane::Current => l,
            Pane::Original => r,
        },
        None => width,
    }
    .max(1)
}

fn text_lines(text: &str, width: usize, style: Style) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    for para in text.lines() {
        if para.trim().is_empty() {
            out.push(Line::default());
        } else {
            out.extend(wrap_spans(&[Span::styled(para, style)], width, &[], &[]));
        }
    }
    out
}

/// The scrolling text of `pane`, wrapped to `width`.
pub(crate) fn pane_body(
    d: &MemoryDetail,
    pane: Pane,
    archive: usize,
    width: usize,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let notice = |s: &str, style: Style| text_lines(s, width, style);
    match pane {
        Pane::Current if d.row.body.trim().is_empty() => notice("(empty body)", theme.muted),
        Pane::Current => text_lines(&d.row.body, width, theme.text),
        Pane::Original => match d.archives.get(archive) {
            Some(a) => match &a.body {
                Ok(b) if b.trim().is_empty() => notice("(empty body)", theme.muted),
                Ok(b) => text_lines(b, width, theme.text),
                Err(e) => notice(&e.to_string(), theme.error),
            },
            None => match &d.archive_error {
                Some(e) => notice(&format!("cannot list the archive: {e}"), theme.error),
                None if d.row.level == "raw" => notice(
                    "No archived original: this entry has never been compressed, so its current text is the original.",
                    theme.muted,
                ),
                None => notice(
                    "No archived original in memory/archive/ for this entry (it may have been written already compressed, or its archive removed).",
                    theme.muted,
                ),
            },
        },
    }
}

/// The fixed first line of a pane.
fn pane_title(d: &MemoryDetail, pane: Pane, archive: usize, offset: FixedOffset) -> String {
    match pane {
        Pane::Current => {
            let mut s = format!("Current text · {}", d.row.level);
            if let Some(r) = d.row.retention {
                s.push_str(&format!(" · retention {r:.2}"));
            }
            s
        }
        Pane::Original => match d.archives.get(archive) {
            Some(a) => format!(
                "Archived original {}/{} · {} · archived {}",
                archive + 1,
                d.archives.len(),
                a.level,
                when(Some(a.copy.archived_at), offset)
            ),
            None => "Archived original · none".into(),
        },
    }
}

/// The archive selector: one tab per archived copy, newest first. When
/// they do not all fit, older tabs give way so the selected one shows.
fn archive_tabs(
    d: &MemoryDetail,
    archive: usize,
    width: usize,
    theme: &Theme,
    offset: FixedOffset,
) -> Line<'static> {
    if d.archives.is_empty() {
        return Line::from(Span::styled("Originals: none", theme.muted));
    }
    let labels: Vec<String> = d
        .archives
        .iter()
        .map(|a| {
            format!(
                " {} {} ",
                a.copy.tag,
                when(Some(a.copy.archived_at), offset)
            )
        })
        .collect();
    let head = "Originals, newest first: ";
    let fits = |from: usize| {
        let lead = if from > 0 { 2 } else { 0 };
        let tabs: usize = labels[from..=archive]
            .iter()
            .map(|l| text_width(l) + 1)
            .sum();
        text_width(head) + lead + tabs <= width
    };
    let mut from = 0;
    while from < archive && !fits(from) {
        from += 1;
    }
    let mut spans = vec![Span::styled(head, theme.muted)];
    if from > 0 {
        spans.push(Span::styled("… ", theme.muted));
    }
    for (i, label) in labels.into_iter().enumerate().skip(from) {
        spans.push(Span::styled(label, theme.tab(i == archive)));
        spans.push(Span::raw(" "));
    }
    Line::from(spans)
}

/// The entry's statistics; the file name last, as it is the first to go
/// on a narrow screen (retention and archives are on the lines around it).
fn info_line(d: &MemoryDetail, width: usize, theme: &Theme, offset: FixedOffset) -> Line<'static> {
    let r = &d.row;
    let imp = match (r.importance, r.quality) {
        (Some(i), Some(q)) if d.decay => format!("importance {i:.2} (quality {q:.2})"),
        (Some(i), _) => format!("importance {i:.2} (no decay)"),
        _ => "importance —".into(),
    };
    let text = format!(
        "{} · last access {} · {imp} · retention {} · {}",
        r.memory_type,
        when(r.last_accessed, offset),
        score(r.retention),
        r.file
    );
    Line::from(Span::styled(truncate(&text, width), theme.muted))
}

/// Everything the entry view draws, besides the browser's title and bottom
/// lines.
pub(crate) struct EntryFrame<'a> {
    pub detail: &'a MemoryDetail,
    pub offset: FixedOffset,
    pub query: &'a str,
    pub highlight: fn(Line<'static>, &str, Style) -> Line<'static>,
}

impl EntryFrame<'_> {
    /// Draws into `area` and clamps the view's scrolls so the last page stays
    /// full.
    pub(crate) fn render(&self, view: &mut EntryView, area: Rect, buf: &mut Buffer, theme: &Theme) {
        let d = self.detail;
        view.archive = view.archive.min(d.archives.len().saturating_sub(1));
        let width = area.width as usize;
        let mut y = area.y;
        let bottom = area.y + area.height;
        let mut put = |y: &mut u16, line: Line<'static>| {
            if *y < bottom {
                buf.set_line(area.x, *y, &line, area.width);
                *y += 1;
            }
        };
        put(
            &mut y,
            archive_tabs(d, view.archive, width, theme, self.offset),
        );
        put(&mut y, info_line(d, width, theme, self.offset));
        if d.row.by_model {
            let text = if d.row.unconfirmed {
                "? unconfirmed, written by the model: K keeps it"
            } else {
                "written by the model, kept by you: K takes the keep back"
            };
            put(
                &mut y,
                Line::from(Span::styled(truncate(text, width), theme.accent)),
            );
        }
        if let Some(p) = &d.row.problem {
            put(
                &mut y,
                Line::from(Span::styled(truncate(&format!("⚠ {p}"), width), theme.warn)),
            );
        }
        let h = bottom.saturating_sub(y);
        if h < 2 {
            return;
        }
        match split(width) {
            Some((lw, rw)) => {
                let left = Rect::new(area.x, y, lw as u16, h);
                let right = Rect::new(area.x + lw as u16 + 1, y, rw as u16, h);
                for row in 0..h {
                    buf.set_string(area.x + lw as u16, y + row, "│", theme.border);
                }
                self.pane(view, Pane::Current, left, buf, theme);
                self.pane(view, Pane::Original, right, buf, theme);
            }
            None => {
                // Stacked: the focused pane gets two thirds of the rows.
                let big = (h * 2 / 3).max(2).min(h);
                let small = h - big;
                let (top_h, bottom_h) = if view.pane == Pane::Current {
                    (big, small)
                } else {
                    (small, big)
                };
                if top_h >= 2 {
                    let top = Rect::new(area.x, y, area.width, top_h);
                    self.pane(view, Pane::Current, top, buf, theme);
                }
                if bottom_h >= 2 {
                    let low = Rect::new(area.x, y + top_h, area.width, bottom_h);
                    self.pane(view, Pane::Original, low, buf, theme);
                }
            }
        }
    }

    fn pane(&self, view: &mut EntryView, pane: Pane, area: Rect, buf: &mut Buffer, theme: &Theme) {
        let width = area.width as usize;
        let focused = view.pane == pane;
        let title_style = if focused {
            theme.border_focus.add_modifier(Modifier::BOLD)
        } else {
            theme.muted
        };
        let marker = if focused { "▸ " } else { "  " };
        let title = format!(
            "{marker}{}",
            pane_title(self.detail, pane, view.archive, self.offset)
        );
        buf.set_line(
            area.x,
            area.y,
            &Line::from(Span::styled(truncate(&title, width), title_style)),
            area.width,
        );
        let body_h = area.height.saturating_sub(1) as usize;
        let lines = pane_body(self.detail, pane, view.archive, width, theme);
        let i = pane.index();
        view.scroll[i] = view.scroll[i].min(lines.len().saturating_sub(body_h));
        for (row, l) in lines
            .into_iter()
            .skip(view.scroll[i])
            .take(body_h)
            .enumerate()
        {
            let l = if self.query.is_empty() {
                l
            } else {
                (self.highlight)(l, self.query, theme.search_match)
            };
            buf.set_line(area.x, area.y + 1 + row as u16, &l, area.width);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::listing::ArchivedCopy;
    use crate::tui::memories::{ArchivedText, MemoryRow};
    use crate::tui::wrap::line_text;
    use std::path::PathBuf;

    fn detail(archives: usize) -> MemoryDetail {
        let row = MemoryRow {
            file: "project_x.md".into(),
            title: "x".into(),
            memory_type: "project".into(),
            level: "digest".into(),
            last_accessed: None,
            importance: None,
            quality: None,
            retention: None,
            archives,
            description: String::new(),
            keywords: Vec::new(),
            body: String::new(),
            problem: None,
            by_model: false,
            unconfirmed: false,
        };
        let archives = (0..archives)
            .map(|i| {
                let at = DateTime::<Utc>::from_timestamp(1_770_000_000 - i as i64 * 86_400, 0)
                    .unwrap_or_default();
                ArchivedText {
                    copy: ArchivedCopy {
                        stem: "project_x".into(),
                        tag: "raw".into(),
                        archived_at: at,
                        seq: 1,
                        file: format!("project_x.raw.{i}.md"),
                        path: PathBuf::new(),
                    },
                    level: "raw".into(),
                    body: Err(crate::tui::memories::UnreadableCopy {
                        file: format!("copy {i}"),
                        reason: "denied".into(),
                    }),
                }
            })
            .collect();
        MemoryDetail {
            row,
            archives,
            archive_error: None,
            decay: true,
        }
    }

    #[test]
    fn the_selected_original_stays_on_a_narrow_tab_line() {
        let d = detail(6);
        let theme = Theme::default();
        let utc = chrono::Offset::fix(&Utc);
        let all = line_text(&archive_tabs(&d, 0, 200, &theme, utc));
        assert!(
            !all.contains('…') && all.matches(" raw ").count() == 6,
            "{all}"
        );
        let last = line_text(&archive_tabs(&d, 5, 80, &theme, utc));
        let want = when(Some(d.archives[5].copy.archived_at), utc);
        assert!(last.contains('…') && last.contains(&want), "{last}");
        assert!(text_width(&last) <= 80, "{last}");
        // An unreadable copy is a notice in its pane, not a panic.
        let body = pane_body(&d, Pane::Original, 5, 40, &theme);
        assert_eq!(line_text(&body[0]), "cannot read copy 5: denied");
    }

    #[test]
    fn panes_split_from_100_columns() {
        assert_eq!(split(99), None);
        assert_eq!(split(100), Some((49, 50)));
        assert_eq!(pane_width(80, Pane::Original), 80);
        assert_eq!(pane_width(160, Pane::Current), 79);
    }
}
