//! Markdown to styled, wrapped lines (headings, lists, task lists, code
//! blocks, tables, quotes, rules, emphasis, links) with pulldown-cmark.
//! A streamed reply is rendered from its committed prefix only: everything
//! up to the last newline (see [`committed`]), so a half-received line never
//! shows and then jumps.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::format::{truncate, width as text_width};
use super::theme::Theme;
use super::wrap::{wrap_hard, wrap_spans};

/// The part of a streamed text that may be shown: up to and including the
/// last newline. A finished stream shows everything.
pub(crate) fn committed(text: &str, finished: bool) -> &str {
    if finished {
        return text;
    }
    match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    }
}

/// Renders `src` wrapped to `width` columns.
pub fn render(src: &str, width: usize, theme: &Theme) -> Vec<Line<'static>> {
    let mut r = Renderer::new(width.max(8), theme);
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for ev in Parser::new_ext(src, opts) {
        r.event(ev);
    }
    r.flush_inline();
    while r.out.last().is_some_and(|l| l.width() == 0) {
        r.out.pop();
    }
    r.out
}

struct ListLevel {
    next: Option<u64>,
    marker_w: usize,
}

#[derive(Default)]
struct TableBuf {
    aligns: Vec<Alignment>,
    rows: Vec<Vec<String>>,
    header_rows: usize,
    row: Vec<String>,
    cell: String,
}

struct Renderer<'t> {
    theme: &'t Theme,
    width: usize,
    out: Vec<Line<'static>>,
    inline: Vec<Span<'static>>,
    styles: Vec<Style>,
    lists: Vec<ListLevel>,
    marker: Option<Span<'static>>,
    quote_depth: usize,
    code: Option<String>,
    table: Option<TableBuf>,
    links: Vec<String>,
    link_text_start: usize,
    need_blank: bool,
}

impl<'t> Renderer<'t> {
    fn new(width: usize, theme: &'t Theme) -> Self {
        Renderer {
            theme,
            width,
            out: Vec::new(),
            inline: Vec::new(),
            styles: vec![theme.text],
            lists: Vec::new(),
            marker: None,
            quote_depth: 0,
            code: None,
            table: None,
            links: Vec::new(),
            link_text_start: 0,
            need_blank: false,
        }
    }

    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, patch: Style) {
        let s = self.style().patch(patch);
        self.styles.push(s);
    }

    fn pop_style(&mut self) {
        if self.styles.len() > 1 {
            self.styles.pop();
        }
    }

    /// A blank line between blocks, except inside list items (tight lists).
    fn block_start(&mut self) {
        self.flush_inline();
        if self.need_blank && !self.out.is_empty() && self.lists.is_empty() {
            self.out.push(Line::default());
        }
        self.need_blank = false;
    }

    /// (first-line prefix, continuation prefix) for the current nesting.
    fn prefixes(&mut self) -> (Vec<Span<'static>>, Vec<Span<'static>>) {
        let mut base = Vec::new();
        for _ in 0..self.quote_depth {
            base.push(Span::styled("▎ ", self.theme.quote));
        }
        let outer: usize = self
            .lists
            .iter()
            .rev()
            .skip(1)
            .map(|l| l.marker_w)
            .sum::<usize>();
        if outer > 0 {
            base.push(Span::raw(" ".repeat(outer)));
        }
        let inner = self.lists.last().map_or(0, |l| l.marker_w);
        let mut first = base.clone();
        let mut rest = base;
        match self.marker.take() {
            Some(m) => first.push(m),
            None if inner > 0 => first.push(Span::raw(" ".repeat(inner))),
            None => {}
        }
        if inner > 0 {
            rest.push(Span::raw(" ".repeat(inner)));
        }
        (first, rest)
    }

    fn flush_inline(&mut self) {
        if self.inline.is_empty() && self.marker.is_none() {
            return;
        }
        let spans = std::mem::take(&mut self.inline);
        let (first, rest) = self.prefixes();
        self.out
            .extend(wrap_spans(&spans, self.width, &first, &rest));
    }

    fn text(&mut self, t: &str) {
        if let Some(code) = &mut self.code {
            code.push_str(t);
        } else if let Some(table) = &mut self.table {
            table.cell.push_str(t);
        } else {
            self.inline.push(Span::styled(t.to_string(), self.style()));
        }
    }

    fn event(&mut self, ev: Event<'_>) {
        match ev {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t),
            Event::Code(t) => {
                if let Some(table) = &mut self.table {
                    table.cell.push_str(&t);
                } else {
                    self.inline.push(Span::styled(
                        t.to_string(),
                        self.style().patch(self.theme.code),
                    ));
                }
            }
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => {
                if self.table.is_none() {
                    self.flush_inline();
                }
            }
            Event::Rule => {
                self.block_start();
                let w = self.width.min(60);
                self.out
                    .push(Line::from(Span::styled("─".repeat(w), self.theme.muted)));
                self.need_blank = true;
            }
            Event::TaskListMarker(done) => {
                let (mark, style) = if done {
                    ("☑ ", self.theme.ok)
                } else {
                    ("☐ ", self.theme.muted)
                };
                self.inline.push(Span::styled(mark, style));
            }
            Event::Html(t) | Event::InlineHtml(t) => {
                let t = t.trim_end_matches('\n').to_string();
                self.inline.push(Span::styled(t, self.theme.muted));
            }
            Event::InlineMath(t) | Event::DisplayMath(t) => self.text(&t),
            Event::FootnoteReference(t) => self.text(&format!("[^{t}]")),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {
                if self.lists.is_empty() {
                    self.block_start();
                } else {
                    self.flush_inline();
                }
            }
            Tag::Heading { level, .. } => {
                self.block_start();
                let mut s = self.theme.heading;
                if level == HeadingLevel::H1 {
                    s = s.add_modifier(Modifier::UNDERLINED);
                }
                self.push_style(s);
            }
            Tag::BlockQuote(_) => {
                self.block_start();
                self.quote_depth += 1;
                self.push_style(self.theme.quote);
            }
            Tag::CodeBlock(kind) => {
                self.block_start();
                if let CodeBlockKind::Fenced(lang) = &kind
                    && !lang.is_empty()
                {
                    let (first, _) = self.prefixes();
                    let mut spans = first;
                    spans.push(Span::styled(format!("  {lang}"), self.theme.muted));
                    self.out.push(Line::from(spans));
                }
                self.code = Some(String::new());
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.block_start();
                } else {
                    self.flush_inline();
                }
                let marker_w = match start {
                    Some(n) => format!("{n}. ").len().max(3),
                    None => 2,
                };
                self.lists.push(ListLevel {
                    next: start,
                    marker_w,
                });
            }
            Tag::Item => {
                self.flush_inline();
                let depth = self.lists.len();
                if let Some(level) = self.lists.last_mut() {
                    let text = match &mut level.next {
                        Some(n) => {
                            let t = format!("{n}. ");
                            *n += 1;
                            format!("{t:<w$}", w = level.marker_w)
                        }
                        None => match depth {
                            1 => "• ".to_string(),
                            2 => "◦ ".to_string(),
                            _ => "▪ ".to_string(),
                        },
                    };
                    self.marker = Some(Span::styled(text, self.theme.accent));
                }
            }
            Tag::Emphasis => self.push_style(Style::new().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(Style::new().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(Style::new().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } => {
                self.links.push(dest_url.to_string());
                self.link_text_start = self.inline.len();
                self.push_style(self.theme.link);
            }
            Tag::Image { dest_url, .. } => {
                self.links.push(dest_url.to_string());
                self.link_text_start = self.inline.len();
                self.push_style(self.theme.link);
                self.text("[image] ");
            }
            Tag::Table(aligns) => {
                self.block_start();
                self.table = Some(TableBuf {
                    aligns,
                    ..TableBuf::default()
                });
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(t) = &mut self.table {
                    t.row.clear();
                }
            }
            Tag::TableCell => {
                if let Some(t) = &mut self.table {
                    t.cell.clear();
                }
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush_inline();
                self.need_blank = true;
            }
            TagEnd::Heading(_) => {
                self.flush_inline();
                self.pop_style();
                self.need_blank = true;
            }
            TagEnd::BlockQuote(_) => {
                self.flush_inline();
                self.quote_depth = self.quote_depth.saturating_sub(1);
                self.pop_style();
                self.need_blank = true;
            }
            TagEnd::CodeBlock => {
                let code = self.code.take().unwrap_or_default();
                let (_, rest) = self.prefixes();
                let mut prefix = rest;
                prefix.push(Span::styled("  ", self.theme.code));
                let body = code.strip_suffix('\n').unwrap_or(&code);
                for line in body.split('\n') {
                    self.out
                        .extend(wrap_hard(line, self.theme.code, self.width, &prefix));
                }
                self.need_blank = true;
            }
            TagEnd::List(_) => {
                self.flush_inline();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.need_blank = true;
                }
            }
            TagEnd::Item => self.flush_inline(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            TagEnd::Link | TagEnd::Image => {
                self.pop_style();
                let url = self.links.pop().unwrap_or_default();
                let shown: String = self.inline[self.link_text_start.min(self.inline.len())..]
                    .iter()
                    .map(|s| s.content.as_ref())
                    .collect();
                if !url.is_empty() && shown.trim() != url && !url.starts_with('#') {
                    self.inline
                        .push(Span::styled(format!(" ({url})"), self.theme.muted));
                }
            }
            TagEnd::TableCell => {
                if let Some(t) = &mut self.table {
                    let cell = std::mem::take(&mut t.cell);
                    t.row.push(cell.trim().to_string());
                }
            }
            TagEnd::TableHead => {
                if let Some(t) = &mut self.table {
                    let row = std::mem::take(&mut t.row);
                    t.rows.push(row);
                    t.header_rows = t.rows.len();
                }
            }
            TagEnd::TableRow => {
                if let Some(t) = &mut self.table {
                    let row = std::mem::take(&mut t.row);
                    t.rows.push(row);
                }
            }
            TagEnd::Table => {
                if let Some(t) = self.table.take() {
                    self.render_table(t);
                }
                self.need_blank = true;
            }
            _ => {}
        }
    }

    /// Columns sized to their content; when too wide, the widest column
    /// shrinks first and cells end in `…`.
    fn render_table(&mut self, t: TableBuf) {
        let (_, prefix) = self.prefixes();
        let prefix_w: usize = prefix.iter().map(|s| s.width()).sum();
        let cols = t.rows.iter().map(Vec::len).max().unwrap_or(0);
        if cols == 0 {
            return;
        }
        let mut widths = vec![1usize; cols];
        for row in &t.rows {
            for (i, c) in row.iter().enumerate() {
                widths[i] = widths[i].max(text_width(c));
            }
        }
        let sep = 3; // " │ "
        let room = self.width.saturating_sub(prefix_w);
        loop {
            let total: usize = widths.iter().sum::<usize>() + sep * (cols - 1);
            if total <= room {
                break;
            }
            let Some((i, w)) = widths.iter().copied().enumerate().max_by_key(|(_, w)| *w) else {
                break;
            };
            if w <= 3 {
                break;
            }
            widths[i] = w - 1;
        }
        let border = self.theme.muted;
        for (r, row) in t.rows.iter().enumerate() {
            let mut spans = prefix.clone();
            for (i, w) in widths.iter().enumerate() {
                if i > 0 {
                    spans.push(Span::styled(" │ ", border));
                }
                let cell = truncate(row.get(i).map(String::as_str).unwrap_or(""), *w);
                let pad = w.saturating_sub(text_width(&cell));
                let (left, right) = match t.aligns.get(i) {
                    Some(Alignment::Right) => (pad, 0),
                    Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                    _ => (0, pad),
                };
                let style = if r < t.header_rows {
                    self.theme.text.add_modifier(Modifier::BOLD)
                } else {
                    self.theme.text
                };
                let last = i + 1 == widths.len();
                let body = format!(
                    "{}{}{}",
                    " ".repeat(left),
                    cell,
                    if last {
                        String::new()
                    } else {
                        " ".repeat(right)
                    }
                );
                spans.push(Span::styled(body, style));
            }
            self.out.push(Line::from(spans));
            if r + 1 == t.header_rows {
                let mut spans = prefix.clone();
                let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
                spans.push(Span::styled(rule.join("─┼─"), border));
                self.out.push(Line::from(spans));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::wrap::line_text;

    fn plain(src: &str, width: usize) -> Vec<String> {
        render(src, width, &Theme::default())
            .iter()
            .map(line_text)
            .collect()
    }

    #[test]
    fn blocks_lists_and_code() {
        let out = plain(
            "# Title\n\nSome *text* here.\n\n- one\n- two\n  - nested\n\n1. first\n2. second\n\n```rust\nfn main() {}\n```\n",
            40,
        );
        assert_eq!(
            out,
            [
                "Title",
                "",
                "Some text here.",
                "",
                "• one",
                "• two",
                "  ◦ nested",
                "",
                "1. first",
                "2. second",
                "",
                "  rust",
                "  fn main() {}",
            ]
        );
    }

    #[test]
    fn tables_align_and_shrink() {
        let src = "| a | b |\n|---|--:|\n| long cell text | 1 |\n";
        let out = plain(src, 40);
        assert_eq!(out[0], "a              │ b");
        assert_eq!(out[1], "───────────────┼──");
        assert_eq!(out[2], "long cell text │ 1");
        let narrow = plain(src, 12);
        assert!(narrow.iter().all(|l| text_width(l) <= 12), "{narrow:?}");
        assert!(narrow[2].contains('…'));
    }

    #[test]
    fn committed_prefix_stops_at_the_last_newline() {
        assert_eq!(committed("abc", false), "");
        assert_eq!(committed("a\nb", false), "a\n");
        assert_eq!(committed("a\nb", true), "a\nb");
    }
}
