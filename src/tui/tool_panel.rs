//! The tool-batch panel: every batch with its mode and each call's state,
//! a live elapsed clock, the time since the call last showed a sign of life
//! (heartbeat or progress), the latest progress text and a mark when a call
//! is overdue or silent. The model is a pure fold of `ToolEvent`s stamped
//! with the time they arrived; clocks are computed from `now` when drawn, so
//! tests drive them with paused tokio time.

use std::collections::VecDeque;
use std::time::Duration;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;
use tokio::time::Instant;

use super::cells::{ToolCellState, args_summary, run_mark, status_mark};
use super::format::{clock, duration_ms, one_line, truncate, width as text_width};
use super::theme::Theme;
use crate::agent::events::{BatchMode, RunStatus, ToolCallStatus, ToolEvent};

/// Batches kept for display; older ones are only in the trace.
const MAX_BATCHES: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallState {
    Queued,
    Running,
    /// A write tool past its deadline: still running, never killed.
    TimeoutWarning,
    Finished(ToolCallStatus),
}

impl CallState {
    pub fn label(self) -> &'static str {
        match self {
            CallState::Queued => "queued",
            CallState::Running => "running",
            CallState::TimeoutWarning => "timeout-warning",
            CallState::Finished(s) => match s {
                ToolCallStatus::Ok => "done",
                ToolCallStatus::Error => "failed",
                ToolCallStatus::Timeout => "timed out",
                ToolCallStatus::Cancelled => "cancelled",
                ToolCallStatus::Skipped => "skipped",
                ToolCallStatus::Denied => "denied",
            },
        }
    }

    pub(crate) fn is_live(self) -> bool {
        matches!(self, CallState::Running | CallState::TimeoutWarning)
    }
}

#[derive(Clone, Debug)]
pub struct Call {
    pub call_id: String,
    pub tool: String,
    pub args: Value,
    pub state: CallState,
    pub readonly: Option<bool>,
    pub timeout_s: Option<f64>,
    pub started_at: Option<Instant>,
    pub elapsed_ms: Option<u64>,
    pub last_heartbeat: Option<Instant>,
    pub progress: Option<(String, Instant)>,
    pub preview: String,
    pub error_code: Option<String>,
}

impl Call {
    /// Time the call has run: its final duration once finished, else live.
    pub fn elapsed(&self, now: Instant) -> Duration {
        match (self.elapsed_ms, self.started_at) {
            (Some(ms), _) => Duration::from_millis(ms),
            (None, Some(s)) => now.saturating_duration_since(s),
            (None, None) => Duration::ZERO,
        }
    }

    /// Time since the last heartbeat or progress message (or the start).
    pub fn since_sign_of_life(&self, now: Instant) -> Option<Duration> {
        let last = [
            self.started_at,
            self.last_heartbeat,
            self.progress.as_ref().map(|(_, t)| *t),
        ]
        .into_iter()
        .flatten()
        .max()?;
        Some(now.saturating_duration_since(last))
    }

    /// Running past its own deadline.
    pub fn overdue(&self, now: Instant) -> bool {
        self.state == CallState::TimeoutWarning
            || (self.state.is_live()
                && self
                    .timeout_s
                    .is_some_and(|t| self.elapsed(now).as_secs_f64() > t))
    }

    /// No heartbeat for more than two intervals: the scheduler itself may be stuck.
    pub fn silent(&self, now: Instant, heartbeat: Duration) -> bool {
        self.state.is_live()
            && self
                .since_sign_of_life(now)
                .is_some_and(|d| d > heartbeat * 2 + Duration::from_secs(1))
    }
}

#[derive(Clone, Debug)]
pub struct Batch {
    pub iter: u64,
    pub batch: u32,
    pub mode: BatchMode,
    pub calls: Vec<Call>,
    pub started_at: Instant,
    pub elapsed_ms: Option<u64>,
}

impl Batch {
    pub(crate) fn finished(&self) -> bool {
        self.elapsed_ms.is_some()
    }

    pub(crate) fn elapsed(&self, now: Instant) -> Duration {
        match self.elapsed_ms {
            Some(ms) => Duration::from_millis(ms),
            None => now.saturating_duration_since(self.started_at),
        }
    }

    fn count(&self, pred: impl Fn(CallState) -> bool) -> usize {
        self.calls.iter().filter(|c| pred(c.state)).count()
    }
}

#[derive(Clone, Debug)]
pub struct ToolPanel {
    /// Newest last.
    pub batches: VecDeque<Batch>,
    /// The scheduler's heartbeat interval (for the "silent" mark).
    pub heartbeat: Duration,
    /// How the last run ended when its tool calls made it `partial` or
    /// `failed` (docs §1.4), with the reason: shown above its batches until
    /// the next batch starts.
    pub run_end: Option<(RunStatus, String)>,
}

impl Default for ToolPanel {
    fn default() -> Self {
        ToolPanel {
            batches: VecDeque::new(),
            heartbeat: Duration::from_secs(3),
            run_end: None,
        }
    }
}

impl ToolPanel {
    pub fn new(heartbeat: Duration) -> Self {
        ToolPanel {
            heartbeat,
            ..ToolPanel::default()
        }
    }

    fn call_mut(&mut self, call_id: &str) -> Option<&mut Call> {
        self.batches
            .iter_mut()
            .rev()
            .flat_map(|b| b.calls.iter_mut())
            .find(|c| c.call_id == call_id)
    }

    /// Whether any call is running (the clocks need a redraw each second).
    pub fn is_live(&self) -> bool {
        self.batches
            .back()
            .is_some_and(|b| !b.finished() || b.calls.iter().any(|c| c.state.is_live()))
    }

    /// When the next visible clock changes: the next whole second of any
    /// running call's elapsed time or silence. `None` when nothing runs.
    pub fn next_tick(&self, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        for b in self.batches.iter().filter(|b| !b.finished()) {
            let mut starts = vec![b.started_at];
            for c in b.calls.iter().filter(|c| c.state.is_live()) {
                starts.extend(c.started_at);
                starts.extend(c.last_heartbeat);
                starts.extend(c.progress.as_ref().map(|(_, t)| *t));
            }
            for s in starts {
                let secs = now.saturating_duration_since(s).as_secs() + 1;
                let t = s + Duration::from_secs(secs);
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        next
    }

    pub fn apply(&mut self, ev: &ToolEvent, at: Instant) {
        match ev {
            ToolEvent::ToolBatchStarted {
                iter,
                batch,
                mode,
                calls,
            } => {
                self.run_end = None;
                self.batches.push_back(Batch {
                    iter: *iter,
                    batch: *batch,
                    mode: *mode,
                    started_at: at,
                    elapsed_ms: None,
                    calls: calls
                        .iter()
                        .map(|c| Call {
                            call_id: c.call_id.clone(),
                            tool: c.tool.clone(),
                            args: c.args.clone(),
                            state: CallState::Queued,
                            readonly: None,
                            timeout_s: None,
                            started_at: None,
                            elapsed_ms: None,
                            last_heartbeat: None,
                            progress: None,
                            preview: String::new(),
                            error_code: None,
                        })
                        .collect(),
                });
                while self.batches.len() > MAX_BATCHES {
                    self.batches.pop_front();
                }
            }
            ToolEvent::ToolCallStarted {
                call_id,
                tool,
                args,
                readonly,
                timeout_s,
                ..
            } => {
                if self.call_mut(call_id).is_none() {
                    // A call announced without a batch: give it one of its own.
                    self.apply(
                        &ToolEvent::ToolBatchStarted {
                            iter: 0,
                            batch: self.batches.back().map_or(0, |b| b.batch + 1),
                            mode: BatchMode::Serial,
                            calls: vec![crate::agent::events::BatchCall {
                                call_id: call_id.clone(),
                                tool: tool.clone(),
                                args: args.clone(),
                            }],
                        },
                        at,
                    );
                }
                if let Some(c) = self.call_mut(call_id) {
                    c.state = CallState::Running;
                    c.started_at = Some(at);
                    c.readonly = Some(*readonly);
                    c.timeout_s = *timeout_s;
                }
            }
            // Shown by the approval overlay and the tool's own cell.
            ToolEvent::Approval { .. } => {}
            ToolEvent::ToolHeartbeat { call_id, .. } => {
                if let Some(c) = self.call_mut(call_id) {
                    c.last_heartbeat = Some(at);
                }
            }
            ToolEvent::ToolProgress {
                call_id,
                stage,
                current,
                total,
                message,
                ..
            } => {
                if let Some(c) = self.call_mut(call_id) {
                    let mut text = String::new();
                    if !stage.is_empty() {
                        text.push_str(stage);
                    }
                    if let (Some(cur), Some(tot)) = (current, total) {
                        text.push_str(&format!(" {cur:.0}/{tot:.0}"));
                    }
                    if !message.is_empty() {
                        if !text.is_empty() {
                            text.push_str(": ");
                        }
                        text.push_str(message);
                    }
                    c.progress = Some((text.trim().to_string(), at));
                }
            }
            ToolEvent::ToolTimeoutWarning {
                call_id, timeout_s, ..
            } => {
                if let Some(c) = self.call_mut(call_id) {
                    c.state = CallState::TimeoutWarning;
                    c.timeout_s = Some(*timeout_s);
                }
            }
            ToolEvent::ToolCallFinished {
                call_id,
                status,
                elapsed_ms,
                preview,
                error_code,
                ..
            } => {
                if let Some(c) = self.call_mut(call_id) {
                    c.state = CallState::Finished(*status);
                    c.elapsed_ms = Some(*elapsed_ms);
                    c.preview = preview.clone();
                    c.error_code = error_code.clone();
                }
            }
            ToolEvent::ToolBatchFinished {
                batch, elapsed_ms, ..
            } => {
                if let Some(b) = self.batches.iter_mut().rev().find(|b| b.batch == *batch) {
                    b.elapsed_ms = Some(*elapsed_ms);
                }
            }
        }
    }

    /// The run ended: calls that never finished were cancelled with it; a
    /// `partial` or `failed` end that followed tool calls is kept to show.
    pub fn finish_run(&mut self, status: RunStatus, reason: Option<&str>, at: Instant) {
        self.run_end = (matches!(status, RunStatus::Partial | RunStatus::Failed)
            && !self.batches.is_empty())
        .then(|| (status, reason.unwrap_or_default().to_string()));
        for b in self.batches.iter_mut() {
            for c in b.calls.iter_mut() {
                if matches!(
                    c.state,
                    CallState::Queued | CallState::Running | CallState::TimeoutWarning
                ) {
                    c.elapsed_ms = Some(c.elapsed(at).as_millis() as u64);
                    c.state = CallState::Finished(if status == RunStatus::Failed {
                        ToolCallStatus::Error
                    } else {
                        ToolCallStatus::Cancelled
                    });
                }
            }
            if b.elapsed_ms.is_none() {
                b.elapsed_ms = Some(b.elapsed(at).as_millis() as u64);
            }
        }
    }

    pub(crate) fn clear(&mut self) {
        self.batches.clear();
        self.run_end = None;
    }

    /// Lines for an area `width` wide and at most `height` tall: the current
    /// batch expanded, earlier ones folded to one line each, newest first.
    /// When the current batch does not fit, live and failed calls come
    /// first and the rest are counted on a last line.
    pub fn lines(
        &self,
        width: usize,
        height: usize,
        theme: &Theme,
        now: Instant,
    ) -> Vec<Line<'static>> {
        let Some(current) = self.batches.back() else {
            return vec![Line::from(Span::styled("no tool calls yet", theme.muted))];
        };
        let height = height.max(1);
        match &self.run_end {
            Some((status, reason)) if height > 1 => {
                let mut out = vec![run_end_line(*status, reason, width, theme)];
                out.extend(self.batch_lines(current, width, height - 1, theme, now));
                out
            }
            _ => self.batch_lines(current, width, height, theme, now),
        }
    }

    /// [`Self::lines`] below the run's end line: the current batch and the
    /// earlier ones.
    fn batch_lines(
        &self,
        current: &Batch,
        width: usize,
        height: usize,
        theme: &Theme,
        now: Instant,
    ) -> Vec<Line<'static>> {
        let mut out = vec![batch_header(current, width, theme, now)];
        let blocks: Vec<(usize, Vec<Line<'static>>)> = current
            .calls
            .iter()
            .map(|c| {
                let mut lines = Vec::new();
                call_lines(c, width, theme, now, self.heartbeat, &mut lines);
                (priority(c, now, self.heartbeat), lines)
            })
            .collect();
        let total: usize = blocks.iter().map(|(_, l)| l.len()).sum();
        if total < height {
            for (_, lines) in blocks {
                out.extend(lines);
            }
            let older = self.batches.len() - 1;
            for (i, b) in self.batches.iter().rev().skip(1).enumerate() {
                if out.len() + 1 == height && i + 1 < older {
                    out.push(Line::from(Span::styled(
                        format!("… {} earlier batch(es)", older - i),
                        theme.muted,
                    )));
                    break;
                }
                if out.len() >= height {
                    break;
                }
                out.push(batch_summary(b, width, theme, now));
            }
            return out;
        }
        // Not everything fits: the calls that need attention first.
        let mut order: Vec<usize> = (0..blocks.len()).collect();
        order.sort_by_key(|i| blocks[*i].0);
        let room = height.saturating_sub(2);
        // Lines shown per call, by priority; a call short of room for its
        // detail line keeps its main line.
        let mut shown = vec![0usize; blocks.len()];
        let mut used = 0;
        for i in order {
            if used >= room {
                break;
            }
            let n = blocks[i].1.len().min(room - used);
            shown[i] = n;
            used += n;
        }
        let mut hidden: Vec<&'static str> = Vec::new();
        for (i, (_, lines)) in blocks.into_iter().enumerate() {
            if shown[i] > 0 {
                out.extend(lines.into_iter().take(shown[i]));
            } else {
                hidden.push(current.calls[i].state.label());
            }
        }
        if !hidden.is_empty() && out.len() < height {
            let done = hidden.iter().filter(|l| **l == "done").count();
            let queued = hidden.iter().filter(|l| **l == "queued").count();
            let other = hidden.len() - done - queued;
            let mut parts = Vec::new();
            for (n, what) in [(done, "done"), (queued, "queued"), (other, "other")] {
                if n > 0 {
                    parts.push(format!("{n} {what}"));
                }
            }
            out.push(Line::from(Span::styled(
                truncate(
                    &format!("… {} more: {}", hidden.len(), parts.join(", ")),
                    width,
                ),
                theme.muted,
            )));
        }
        out
    }

    pub fn render(&self, area: Rect, buf: &mut Buffer, theme: &Theme, now: Instant) {
        let lines = self.lines(area.width as usize, area.height as usize, theme, now);
        for (i, line) in lines.iter().take(area.height as usize).enumerate() {
            buf.set_line(area.x, area.y + i as u16, line, area.width);
        }
    }
}

/// Lower sorts first: overdue or silent, live, failed, queued, done.
fn priority(c: &Call, now: Instant, heartbeat: Duration) -> usize {
    if c.overdue(now) || c.silent(now, heartbeat) {
        0
    } else if c.state.is_live() {
        1
    } else if matches!(
        c.state,
        CallState::Finished(
            ToolCallStatus::Error | ToolCallStatus::Timeout | ToolCallStatus::Denied
        )
    ) {
        2
    } else if c.state == CallState::Queued {
        3
    } else {
        4
    }
}

/// "◐ run partial: 1 of 2 tool calls failed: …" in the status's style.
fn run_end_line(status: RunStatus, reason: &str, width: usize, theme: &Theme) -> Line<'static> {
    let (mark, style) = run_mark(status, theme);
    let text = if reason.is_empty() {
        format!("{mark} run {}", status.as_str())
    } else {
        format!("{mark} run {}: {reason}", status.as_str())
    };
    Line::from(Span::styled(truncate(&text, width), style))
}

fn mode_word(m: BatchMode) -> &'static str {
    match m {
        BatchMode::Parallel => "parallel",
        BatchMode::Serial => "serial",
    }
}

fn batch_header(b: &Batch, width: usize, theme: &Theme, now: Instant) -> Line<'static> {
    let n = b.calls.len();
    let state = if b.finished() {
        format!(
            "finished in {}",
            duration_ms(b.elapsed(now).as_millis() as u64)
        )
    } else {
        format!("running {}", clock(b.elapsed(now)))
    };
    let text = format!(
        "batch {} · {} · {n} call{} · {state}",
        b.batch,
        mode_word(b.mode),
        if n == 1 { "" } else { "s" },
    );
    let style = if b.finished() {
        theme.muted
    } else {
        theme.accent.add_modifier(Modifier::BOLD)
    };
    Line::from(Span::styled(truncate(&text, width), style))
}

fn batch_summary(b: &Batch, width: usize, theme: &Theme, now: Instant) -> Line<'static> {
    let ok = b.count(|s| s == CallState::Finished(ToolCallStatus::Ok));
    let bad = b.count(|s| {
        matches!(
            s,
            CallState::Finished(
                ToolCallStatus::Error | ToolCallStatus::Timeout | ToolCallStatus::Denied
            )
        )
    });
    let cancelled = b.count(|s| s == CallState::Finished(ToolCallStatus::Cancelled));
    let (mark, style) = if bad > 0 {
        ("✗", theme.error)
    } else if cancelled > 0 {
        ("⊘", theme.warn)
    } else {
        ("✓", theme.ok)
    };
    let tools: Vec<&str> = b.calls.iter().map(|c| c.tool.as_str()).collect();
    let mut counts = format!("{ok} ok");
    if bad > 0 {
        counts.push_str(&format!(", {bad} failed"));
    }
    if cancelled > 0 {
        counts.push_str(&format!(", {cancelled} cancelled"));
    }
    let text = format!(
        " #{} {} · {} · {counts} · {}",
        b.batch,
        mode_word(b.mode),
        tools.join(", "),
        duration_ms(b.elapsed(now).as_millis() as u64)
    );
    Line::from(vec![
        Span::styled(mark, style),
        Span::styled(truncate(&text, width.saturating_sub(1)), theme.muted),
    ])
}

fn call_lines(
    c: &Call,
    width: usize,
    theme: &Theme,
    now: Instant,
    heartbeat: Duration,
    out: &mut Vec<Line<'static>>,
) {
    let (mark, _, style) = match c.state {
        CallState::Queued => status_mark(ToolCellState::Queued, theme),
        CallState::Running => status_mark(ToolCellState::Running, theme),
        CallState::TimeoutWarning => ("◐", "", theme.warn),
        CallState::Finished(s) => status_mark(ToolCellState::Finished(s), theme),
    };
    let overdue = c.overdue(now);
    let silent = c.silent(now, heartbeat);
    // Right side: state word, clock, heartbeat age, marks.
    let mut right: Vec<Span<'static>> = Vec::new();
    match c.state {
        CallState::Queued => right.push(Span::styled("queued", theme.muted)),
        CallState::Running | CallState::TimeoutWarning => {
            right.push(Span::styled(
                clock(c.elapsed(now)),
                theme.text.add_modifier(Modifier::BOLD),
            ));
            if let Some(age) = c.since_sign_of_life(now) {
                let s = if silent { theme.error } else { theme.muted };
                right.push(Span::styled(format!(" ♥{}", clock(age)), s));
            }
        }
        CallState::Finished(_) => {
            right.push(Span::styled(
                format!(
                    "{} {}",
                    c.state.label(),
                    duration_ms(c.elapsed(now).as_millis() as u64)
                ),
                style_for_finished(c.state, theme),
            ));
        }
    }
    if c.state == CallState::TimeoutWarning {
        right.push(Span::styled(
            " ⚠ past deadline",
            theme.warn.add_modifier(Modifier::BOLD),
        ));
    } else if overdue {
        right.push(Span::styled(
            " ⚠ overdue",
            theme.error.add_modifier(Modifier::BOLD),
        ));
    }
    if silent {
        right.push(Span::styled(" ⚠ silent", theme.error));
    }
    let right_w: usize = right.iter().map(|s| s.width()).sum();
    let name_w = text_width(&c.tool);
    let room = width.saturating_sub(2 + name_w + 1 + right_w + 1);
    let summary = args_summary(&c.args, room);
    let left_w = 2
        + name_w
        + if summary.is_empty() {
            0
        } else {
            1 + text_width(&summary)
        };
    let mut spans = vec![
        Span::styled(format!("{mark} "), style),
        Span::styled(c.tool.clone(), theme.text.add_modifier(Modifier::BOLD)),
    ];
    if !summary.is_empty() {
        spans.push(Span::styled(format!(" {summary}"), theme.muted));
    }
    let pad = width.saturating_sub(left_w + right_w);
    if pad > 0 {
        spans.push(Span::raw(" ".repeat(pad)));
    } else {
        spans.push(Span::raw(" "));
    }
    spans.extend(right);
    out.push(Line::from(spans));
    if c.state.is_live()
        && let Some((text, at)) = &c.progress
    {
        let age = clock(now.saturating_duration_since(*at));
        let t = format!("{text} ({age} ago)");
        out.push(Line::from(vec![
            Span::styled("  └ ", theme.muted),
            Span::styled(one_line(&t, width.saturating_sub(4)), theme.text),
        ]));
    } else if matches!(
        c.state,
        CallState::Finished(
            ToolCallStatus::Error | ToolCallStatus::Timeout | ToolCallStatus::Denied
        )
    ) && !c.preview.is_empty()
    {
        out.push(Line::from(vec![
            Span::styled("  └ ", theme.muted),
            Span::styled(one_line(&c.preview, width.saturating_sub(4)), theme.error),
        ]));
    }
}

fn style_for_finished(s: CallState, theme: &Theme) -> Style {
    match s {
        CallState::Finished(ToolCallStatus::Ok) => theme.ok,
        CallState::Finished(ToolCallStatus::Cancelled) => theme.warn,
        CallState::Finished(ToolCallStatus::Skipped) => theme.muted,
        _ => theme.error,
    }
}
