//! History cells: each chat entry is a value that renders itself at any
//! width (codex's `HistoryCell`). The live chat and the transcript browser
//! draw from the same cells. A cell caches its lines per width, so a frame
//! only lays out cells that changed or scrolled into view.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::backtest::{self, BacktestCell};
use super::format::{duration_ms, one_line, thousands, tokens};
use super::markdown;
use super::payoff::{self, PayoffCell};
use super::sweep_cell::{self, SweepCell};
use super::theme::Theme;
use super::wrap::{wrap_hard, wrap_spans};
use crate::agent::events::{RunStatus, ToolCallStatus};
use crate::model::Usage;

/// Global display switches that change how cells render.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Toggles {
    pub show_reasoning: bool,
    pub show_details: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoticeKind {
    Info,
    Warning,
    Error,
}

/// A tool call as the chat shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCell {
    pub call_id: String,
    pub tool: String,
    pub args: Value,
    pub state: ToolCellState,
    pub elapsed_ms: Option<u64>,
    /// The redacted preview from the event, or the stored result on resume.
    pub result: String,
    pub error_code: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolCellState {
    Queued,
    Running,
    Finished(ToolCallStatus),
}

#[derive(Clone, Debug, PartialEq)]
pub enum CellKind {
    User {
        text: String,
    },
    /// Markdown, streamed: only committed lines show until `finished`.
    Assistant {
        iter: u64,
        text: String,
        finished: bool,
        note: Option<String>,
    },
    Reasoning {
        iter: u64,
        chars: usize,
        text: String,
    },
    Tool(ToolCell),
    /// A successful backtest: summary, metrics, equity and drawdown curves.
    Backtest(BacktestCell),
    /// A successful `option_strategy`: the payoff at expiry (docs §15.2.3).
    Payoff(PayoffCell),
    /// A `sweep` call: its progress bar, then its ranking and heatmap
    /// (docs §18).
    Sweep(SweepCell),
    Notice {
        kind: NoticeKind,
        text: String,
    },
    RunEnd {
        status: RunStatus,
        reason: Option<String>,
        iterations: u32,
        usage: Usage,
        degraded: bool,
    },
    Compaction {
        layer: String,
        trigger: String,
        tokens_before: u64,
        tokens_after: u64,
        messages_touched: usize,
        archived: bool,
        ineffective: bool,
        degraded: bool,
    },
}

#[derive(Clone, Debug)]
struct Cache {
    width: u16,
    toggles: Toggles,
    expanded: Option<bool>,
    lines: Vec<Line<'static>>,
}

/// One chat entry plus its render cache.
#[derive(Clone, Debug)]
pub struct Cell {
    kind: CellKind,
    /// A blank line above this cell.
    pub spaced: bool,
    /// Per-cell override of the global toggle (set by selecting and toggling).
    pub expanded: Option<bool>,
    cache: Option<Cache>,
}

impl Cell {
    pub(crate) fn new(kind: CellKind) -> Self {
        Cell {
            kind,
            spaced: true,
            expanded: None,
            cache: None,
        }
    }

    pub fn kind(&self) -> &CellKind {
        &self.kind
    }

    /// Mutable access; the render cache is dropped.
    pub(crate) fn kind_mut(&mut self) -> &mut CellKind {
        self.cache = None;
        &mut self.kind
    }

    /// Appends streamed text to an assistant cell. The render cache survives
    /// when the committed part (up to the last newline) did not change, so a
    /// delta inside a line costs no re-render.
    pub(crate) fn append_text(&mut self, delta: &str) {
        if let CellKind::Assistant { text, finished, .. } = &mut self.kind {
            let before = markdown::committed(text, *finished).len();
            text.push_str(delta);
            if markdown::committed(text, *finished).len() != before {
                self.cache = None;
            }
        }
    }

    /// Whether the cell has something more to show when expanded.
    pub(crate) fn expandable(&self) -> bool {
        matches!(
            self.kind,
            CellKind::Tool(_)
                | CellKind::Reasoning { .. }
                | CellKind::Compaction { .. }
                | CellKind::Backtest(_)
                | CellKind::Payoff(_)
                | CellKind::Sweep(_)
        )
    }

    /// Expanded or not when the user has not chosen for this cell. A
    /// backtest's charts show whenever the chat is wide enough for them.
    pub(crate) fn default_expanded(&self, t: Toggles, width: u16) -> bool {
        match self.kind {
            CellKind::Reasoning { .. } => t.show_reasoning,
            CellKind::Backtest(_) | CellKind::Payoff(_) | CellKind::Sweep(_) => {
                t.show_details || width as usize >= backtest::CHART_MIN_WIDTH
            }
            _ => t.show_details,
        }
    }

    fn is_expanded(&self, t: Toggles, width: u16) -> bool {
        self.expanded
            .unwrap_or_else(|| self.default_expanded(t, width))
    }

    /// The cell's lines at `width`, from the cache when nothing changed.
    pub fn lines(&mut self, width: u16, theme: &Theme, toggles: Toggles) -> &[Line<'static>] {
        let fresh = matches!(&self.cache, Some(c) if c.width == width && c.toggles == toggles && c.expanded == self.expanded);
        if !fresh {
            let expanded = self.is_expanded(toggles, width);
            let mut lines = Vec::new();
            if self.spaced {
                lines.push(Line::default());
            }
            render_kind(&self.kind, width as usize, theme, expanded, &mut lines);
            self.cache = Some(Cache {
                width,
                toggles,
                expanded: self.expanded,
                lines,
            });
        }
        match &self.cache {
            Some(c) => &c.lines,
            None => &[],
        }
    }

    /// Rendered height at `width`.
    pub(crate) fn height(&mut self, width: u16, theme: &Theme, toggles: Toggles) -> usize {
        self.lines(width, theme, toggles).len()
    }

    /// The cell's plain text (for search in the browser).
    pub fn plain_text(&self) -> String {
        match &self.kind {
            CellKind::User { text } => text.clone(),
            CellKind::Assistant { text, .. } => text.clone(),
            CellKind::Reasoning { text, .. } => text.clone(),
            CellKind::Tool(t) => format!("{} {} {}", t.tool, t.args, t.result),
            CellKind::Backtest(b) => b.plain_text(),
            CellKind::Payoff(p) => p.plain_text(),
            CellKind::Sweep(c) => c.plain_text(),
            CellKind::Notice { text, .. } => text.clone(),
            CellKind::RunEnd { status, reason, .. } => {
                format!("{} {}", status.as_str(), reason.clone().unwrap_or_default())
            }
            CellKind::Compaction { layer, .. } => layer.clone(),
        }
    }
}

/// The compaction layer's short name: `microcompact` → `L1`.
pub fn layer_label(layer: &str) -> &str {
    match layer {
        "microcompact" => "L1",
        "collapse" => "L2",
        "auto_compact" => "L3",
        other => other,
    }
}

/// The argument that names what a call works on (a path, a symbol, a query).
pub(crate) fn args_summary(args: &Value, width: usize) -> String {
    const SALIENT: &[&str] = &[
        "path", "file", "symbol", "query", "command", "name", "url", "pattern", "strategy",
    ];
    let text = match args {
        Value::Object(o) if o.is_empty() => String::new(),
        Value::Object(o) => SALIENT
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_str).map(String::from))
            .or_else(|| o.values().find_map(|v| v.as_str().map(String::from)))
            .unwrap_or_else(|| {
                // No text argument: `key=value` pairs read better than JSON.
                o.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            }),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    one_line(&text, width)
}

/// The mark, word and style of a call's state.
pub(crate) fn status_mark(
    state: ToolCellState,
    theme: &Theme,
) -> (&'static str, &'static str, Style) {
    match state {
        ToolCellState::Queued => ("○", "queued", theme.muted),
        ToolCellState::Running => ("◐", "running", theme.accent),
        ToolCellState::Finished(s) => match s {
            ToolCallStatus::Ok => ("✓", "done", theme.ok),
            ToolCallStatus::Error => ("✗", "failed", theme.error),
            ToolCallStatus::Timeout => ("⏱", "timed out", theme.error),
            ToolCallStatus::Cancelled => ("⊘", "cancelled", theme.warn),
            ToolCallStatus::Skipped => ("↷", "skipped", theme.muted),
            ToolCallStatus::Denied => ("⛔", "denied", theme.error),
        },
    }
}

/// The mark and style of how a run or a team ended: ✓ success, ◐ partial
/// (warn: an answer with some failed tool calls), ✗ failed, ⊘ cancelled,
/// ∅ unsupported (warn: an answer that says what no tool here can do).
pub(crate) fn run_mark(status: RunStatus, theme: &Theme) -> (&'static str, Style) {
    match status {
        RunStatus::Success => ("✓", theme.ok),
        RunStatus::Partial => ("◐", theme.warn),
        RunStatus::Cancelled => ("⊘", theme.warn),
        RunStatus::Unsupported => ("∅", theme.warn),
        RunStatus::Failed | RunStatus::Interrupted => ("✗", theme.error),
    }
}

/// [`run_mark`] for a status recorded as text (`run.json`, `session.json`,
/// a task's state); `None` for a word that is not a finished status.
pub(crate) fn status_word_mark(word: &str, theme: &Theme) -> Option<(&'static str, Style)> {
    Some(match word {
        "success" => ("✓", theme.ok),
        "partial" => ("◐", theme.warn),
        "failed" | "unreadable" => ("✗", theme.error),
        "timed_out" | "timed out" => ("⏱", theme.error),
        "cancelled" => ("⊘", theme.warn),
        "unsupported" => ("∅", theme.warn),
        "interrupted" => ("!", theme.warn),
        _ => return None,
    })
}

/// A cell's lines without a cache (the transcript browser draws cells
/// this way).
pub(crate) fn render_lines(
    kind: &CellKind,
    width: u16,
    theme: &Theme,
    expanded: bool,
) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    render_kind(kind, width as usize, theme, expanded, &mut out);
    out
}

fn render_kind(
    kind: &CellKind,
    width: usize,
    theme: &Theme,
    expanded: bool,
    out: &mut Vec<Line<'static>>,
) {
    let body_w = width.max(10);
    let indent = || vec![Span::raw("  ")];
    match kind {
        CellKind::User { text } => {
            let first = vec![Span::styled("› ", theme.user)];
            let style = theme.text.add_modifier(Modifier::BOLD);
            for (i, line) in text.lines().enumerate() {
                let spans = [Span::styled(line.to_string(), style)];
                let f = if i == 0 { first.clone() } else { indent() };
                out.extend(wrap_spans(&spans, body_w, &f, &indent()));
            }
            if text.is_empty() {
                out.push(Line::from(first));
            }
        }
        CellKind::Assistant {
            text,
            finished,
            note,
            ..
        } => {
            let shown = markdown::committed(text, *finished);
            let md = markdown::render(shown, body_w.saturating_sub(2), theme);
            for l in md {
                let mut spans = indent();
                spans.extend(l.spans);
                out.push(Line::from(spans));
            }
            if !finished && shown.is_empty() {
                out.push(Line::from(vec![
                    Span::raw("  "),
                    Span::styled("…", theme.muted),
                ]));
            }
            if let Some(n) = note {
                let spans = [Span::styled(n.clone(), theme.warn)];
                out.extend(wrap_spans(&spans, body_w, &indent(), &indent()));
            }
        }
        CellKind::Reasoning { chars, text, .. } => {
            let arrow = if expanded { "▾" } else { "▸" };
            out.push(Line::from(vec![
                Span::raw("  "),
                Span::styled(
                    format!("{arrow} thinking · {} chars", tokens(*chars as u64)),
                    theme.reasoning,
                ),
            ]));
            if expanded {
                let bar = vec![Span::raw("  "), Span::styled("│ ", theme.muted)];
                for line in text.lines() {
                    let spans = [Span::styled(line.to_string(), theme.reasoning)];
                    out.extend(wrap_spans(&spans, body_w, &bar, &bar));
                }
            }
        }
        CellKind::Tool(t) => render_tool(t, body_w, theme, expanded, out),
        CellKind::Backtest(b) => backtest::render(b, body_w, theme, expanded, out),
        CellKind::Payoff(p) => payoff::render(p, body_w, theme, expanded, out),
        CellKind::Sweep(c) => sweep_cell::render(c, body_w, theme, expanded, out),
        CellKind::Notice { kind, text } => render_notice(*kind, text, body_w, theme, out),
        CellKind::RunEnd {
            status,
            reason,
            iterations,
            usage,
            degraded,
        } => {
            let (mark, style) = run_mark(*status, theme);
            let text = run_end_text(
                mark,
                *status,
                reason.as_deref(),
                *iterations,
                usage,
                *degraded,
            );
            let spans = [Span::styled(text, style)];
            out.extend(wrap_spans(
                &spans,
                body_w,
                &[Span::styled("── ", theme.muted)],
                &[Span::raw("   ")],
            ));
        }
        CellKind::Compaction { .. } => render_compaction(kind, body_w, theme, expanded, out),
    }
}

fn render_notice(
    kind: NoticeKind,
    text: &str,
    body_w: usize,
    theme: &Theme,
    out: &mut Vec<Line<'static>>,
) {
    let (mark, style) = match kind {
        NoticeKind::Info => ("ℹ ", theme.muted),
        NoticeKind::Warning => ("⚠ ", theme.warn),
        NoticeKind::Error => ("✗ ", theme.error),
    };
    for (i, line) in text.lines().enumerate() {
        let first = if i == 0 {
            vec![Span::raw("  "), Span::styled(mark, style)]
        } else {
            vec![Span::raw("    ")]
        };
        let body_style = if kind == NoticeKind::Info {
            theme.muted
        } else {
            theme.text
        };
        let spans = [Span::styled(line.to_string(), body_style)];
        out.extend(wrap_spans(&spans, body_w, &first, &[Span::raw("    ")]));
    }
}

/// The run's end in one line: status, iterations, tokens, and the reason
/// where it says something (always unless a plain success).
fn run_end_text(
    mark: &str,
    status: RunStatus,
    reason: Option<&str>,
    iterations: u32,
    usage: &Usage,
    degraded: bool,
) -> String {
    let mut text = format!("{mark} {}", status.as_str());
    let plural = if iterations == 1 { "" } else { "s" };
    text.push_str(&format!(" · {iterations} iteration{plural}"));
    if usage.total_tokens > 0 {
        text.push_str(&format!(" · {} tokens", thousands(usage.total_tokens)));
    }
    if degraded {
        text.push_str(" · degraded");
    }
    let show_reason = match (status, reason) {
        (RunStatus::Success, Some(r)) => degraded && !r.is_empty(),
        (_, Some(r)) => !r.is_empty(),
        _ => false,
    };
    if show_reason && let Some(r) = reason {
        text.push_str(&format!(": {r}"));
    }
    text
}

fn render_compaction(
    kind: &CellKind,
    body_w: usize,
    theme: &Theme,
    expanded: bool,
    out: &mut Vec<Line<'static>>,
) {
    let CellKind::Compaction {
        layer,
        trigger,
        tokens_before,
        tokens_after,
        messages_touched,
        archived,
        ineffective,
        degraded,
    } = kind
    else {
        return;
    };
    let mut text = format!(
        "⟳ compacted {} {layer}: {} → {} tokens · {messages_touched} message{}",
        layer_label(layer),
        tokens(*tokens_before),
        tokens(*tokens_after),
        if *messages_touched == 1 { "" } else { "s" }
    );
    if *ineffective {
        text.push_str(" · ineffective");
    }
    if *degraded {
        text.push_str(" · degraded");
    }
    let spans = [Span::styled(text, theme.accent)];
    out.extend(wrap_spans(
        &spans,
        body_w,
        &[Span::raw("  ")],
        &[Span::raw("    ")],
    ));
    if expanded {
        let detail = format!(
            "trigger: {trigger}{}",
            if *archived {
                " · originals archived (open them in the transcript browser)"
            } else {
                ""
            }
        );
        let spans = [Span::styled(detail, theme.muted)];
        out.extend(wrap_spans(
            &spans,
            body_w,
            &[Span::raw("    ")],
            &[Span::raw("    ")],
        ));
    }
}

fn render_tool(
    t: &ToolCell,
    width: usize,
    theme: &Theme,
    expanded: bool,
    out: &mut Vec<Line<'static>>,
) {
    let (mark, word, style) = status_mark(t.state, theme);
    let mut spans = vec![
        Span::raw("  "),
        Span::styled(format!("{mark} "), style),
        Span::styled(t.tool.clone(), theme.text.add_modifier(Modifier::BOLD)),
    ];
    let mut tail = String::new();
    match t.state {
        ToolCellState::Finished(ToolCallStatus::Ok) => {}
        _ => tail.push_str(&format!(" · {word}")),
    }
    if let Some(ms) = t.elapsed_ms {
        tail.push_str(&format!(" · {}", duration_ms(ms)));
    }
    if let Some(code) = &t.error_code {
        tail.push_str(&format!(" · {code}"));
    }
    let used = 4 + super::format::width(&t.tool) + super::format::width(&tail);
    let summary = args_summary(&t.args, width.saturating_sub(used + 1));
    if !summary.is_empty() {
        spans.push(Span::styled(format!(" {summary}"), theme.muted));
    }
    spans.push(Span::styled(tail, theme.muted));
    out.push(Line::from(spans));
    let failed = matches!(
        t.state,
        ToolCellState::Finished(
            ToolCallStatus::Error | ToolCallStatus::Timeout | ToolCallStatus::Denied
        )
    );
    if expanded {
        let pad = [Span::raw("      ")];
        let args = serde_json::to_string_pretty(&t.args).unwrap_or_default();
        out.push(Line::from(vec![
            Span::raw("    "),
            Span::styled("args", theme.muted),
        ]));
        for line in args.lines().take(40) {
            out.extend(wrap_hard(line, theme.code, width, &pad));
        }
        if !t.result.is_empty() {
            out.push(Line::from(vec![
                Span::raw("    "),
                Span::styled("result", theme.muted),
            ]));
            let result = pretty_json_or_text(&t.result);
            let total = result.lines().count();
            for line in result.lines().take(40) {
                out.extend(wrap_hard(line, theme.text, width, &pad));
            }
            if total > 40 {
                out.push(Line::from(vec![
                    Span::raw("      "),
                    Span::styled(format!("… {} more lines", total - 40), theme.muted),
                ]));
            }
        }
    } else if failed && !t.result.is_empty() {
        // A failure explains itself without expanding.
        let spans = [Span::styled(
            one_line(&t.result, width.saturating_sub(6)),
            theme.error,
        )];
        out.extend(wrap_spans(
            &spans,
            width,
            &[Span::raw("    └ ")],
            &[Span::raw("      ")],
        ));
    }
}

fn pretty_json_or_text(s: &str) -> String {
    match serde_json::from_str::<Value>(s) {
        Ok(v @ (Value::Object(_) | Value::Array(_))) => {
            serde_json::to_string_pretty(&v).unwrap_or_else(|_| s.to_string())
        }
        _ => s.to_string(),
    }
}
