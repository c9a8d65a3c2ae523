//! The chat pane's model: cells, which of them are streaming, the scroll
//! position and the selection. Scrolling is anchored to a cell and a line
//! inside it, and heights are computed only for cells near the viewport, so
//! a frame costs the same for ten messages or ten thousand.

use std::collections::HashMap;
use std::path::PathBuf;

use ratatui::text::Line;

use super::backtest::{self, BacktestCell, BacktestInfo, EquitySeries, LoadRequest};
use super::cells::{Cell, CellKind, NoticeKind, Toggles, ToolCell, ToolCellState};
use super::payoff;
use super::sweep_cell::{self, SweepCell};
use super::theme::Theme;
use crate::agent::events::{
    AgentEvent, McpServerState, NoticeLevel, RunStatus, ToolCallStatus, ToolEvent,
};
use crate::model::Role;
use crate::store::StoredMessage;
use crate::tools::redact::{Sink, redact_tool_result, redact_value};

/// Size used for scroll arithmetic before the first frame is drawn.
const DEFAULT_VIEW: (u16, u16) = (80, 20);

#[derive(Clone, Debug)]
pub struct Chat {
    pub cells: Vec<Cell>,
    /// Stick to the bottom as output arrives.
    pub follow: bool,
    /// Top line of the viewport when not following: (cell, line in cell).
    anchor: (usize, usize),
    pub selected: Option<usize>,
    pub toggles: Toggles,
    /// The chat area of the last frame (width, height).
    pub view: (u16, u16),
    tools: HashMap<String, usize>,
    /// Sweep cells by call.
    sweeps: HashMap<String, usize>,
    streaming: Option<usize>,
    reasoning: Option<usize>,
    /// The running turn's directory (relative `run_dir` arguments resolve there).
    run_dir: Option<PathBuf>,
    /// Backtest series to read, taken by the app as effects.
    loads: Vec<LoadRequest>,
}

impl Default for Chat {
    fn default() -> Self {
        Chat {
            cells: Vec::new(),
            follow: true,
            anchor: (0, 0),
            selected: None,
            toggles: Toggles::default(),
            view: DEFAULT_VIEW,
            tools: HashMap::new(),
            sweeps: HashMap::new(),
            streaming: None,
            reasoning: None,
            run_dir: None,
            loads: Vec::new(),
        }
    }
}

impl Chat {
    pub(crate) fn clear(&mut self) {
        let toggles = self.toggles;
        let view = self.view;
        *self = Chat {
            toggles,
            view,
            ..Chat::default()
        };
    }

    /// Appends a cell. Consecutive tool and reasoning cells sit together
    /// without blank lines between them.
    pub fn push(&mut self, kind: CellKind) -> usize {
        let compact = |k: &CellKind| matches!(k, CellKind::Tool(_) | CellKind::Reasoning { .. });
        let mut cell = Cell::new(kind);
        if let Some(prev) = self.cells.last()
            && compact(prev.kind())
            && compact(cell.kind())
        {
            cell.spaced = false;
        }
        if self.cells.is_empty() {
            cell.spaced = false;
        }
        self.cells.push(cell);
        self.cells.len() - 1
    }

    pub(crate) fn notice(&mut self, kind: NoticeKind, text: impl Into<String>) -> usize {
        self.push(CellKind::Notice {
            kind,
            text: text.into(),
        })
    }

    fn finish_streaming(&mut self) {
        if let Some(i) = self.streaming.take()
            && let Some(c) = self.cells.get_mut(i)
            && let CellKind::Assistant { finished, .. } = c.kind_mut()
        {
            *finished = true;
        }
        self.reasoning = None;
    }

    /// Loads asked for since the last call (the app turns them into effects).
    pub(crate) fn take_loads(&mut self) -> Vec<LoadRequest> {
        std::mem::take(&mut self.loads)
    }

    fn push_backtest(&mut self, cell: BacktestCell) {
        self.loads.push(cell.request());
        self.push(CellKind::Backtest(cell));
    }

    fn backtest_index(&self, id: u64) -> Option<usize> {
        self.cells
            .iter()
            .rposition(|c| matches!(c.kind(), CellKind::Backtest(b) if b.id == id))
    }

    /// Whether a backtest cell has this load id.
    pub(crate) fn has_backtest(&self, id: u64) -> bool {
        self.backtest_index(id).is_some()
    }

    /// Hands a load's answer to its cell; false when no cell has that id
    /// (the chat was cleared since).
    pub(crate) fn backtest_loaded(
        &mut self,
        id: u64,
        series: Result<EquitySeries, backtest::EquityError>,
        info: Option<BacktestInfo>,
    ) -> bool {
        let found = self.backtest_index(id);
        match found.map(|i| self.cells[i].kind_mut()) {
            Some(CellKind::Backtest(b)) => {
                b.apply(series, info);
                true
            }
            _ => false,
        }
    }

    /// Whether a reply is streaming right now.
    pub(crate) fn is_streaming(&self) -> bool {
        self.streaming.is_some()
    }

    /// Folds an engine event into the cells.
    pub fn apply(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::RunStarted { run_dir, .. } => {
                self.streaming = None;
                self.reasoning = None;
                self.run_dir = Some(PathBuf::from(run_dir)).filter(|p| !p.as_os_str().is_empty());
            }
            AgentEvent::IterationStarted { .. } | AgentEvent::ThinkingDone { .. } => {
                self.finish_streaming()
            }
            AgentEvent::ReasoningDelta { iter, chars, tail } => {
                self.reasoning_delta(*iter, *chars, tail)
            }
            AgentEvent::TextDelta { iter, delta } => self.text_delta(*iter, delta),
            AgentEvent::StreamReset {
                error, retry_in_ms, ..
            } => self.stream_reset(error, *retry_in_ms),
            AgentEvent::Answer { iter, content, .. } => self.answer(*iter, content),
            AgentEvent::AnswerRejected { iter, issues, .. } => self.answer_rejected(*iter, issues),
            AgentEvent::Tool(t) => self.apply_tool(t),
            AgentEvent::CompactionFinished {
                layer,
                trigger,
                tokens_before,
                tokens_after,
                messages_touched,
                archive_path,
                ineffective,
                degraded,
                ..
            } => {
                self.push(CellKind::Compaction {
                    layer: layer.clone(),
                    trigger: trigger.clone(),
                    tokens_before: *tokens_before,
                    tokens_after: *tokens_after,
                    messages_touched: *messages_touched,
                    archived: archive_path.is_some(),
                    ineffective: *ineffective,
                    degraded: *degraded,
                });
            }
            AgentEvent::RunFinished {
                status,
                reason,
                iterations,
                usage,
                degraded,
                ..
            } => self.run_finished(CellKind::RunEnd {
                status: *status,
                reason: reason.clone(),
                iterations: *iterations,
                usage: *usage,
                degraded: *degraded,
            }),
            AgentEvent::ContentFiltered { .. }
            | AgentEvent::EmptyResponse { .. }
            | AgentEvent::WrapUp { .. }
            | AgentEvent::ForcedTextOnly { .. }
            | AgentEvent::BackgroundResults { .. }
            | AgentEvent::StallWarning { .. }
            | AgentEvent::Stalled { .. }
            | AgentEvent::Notice { .. }
            | AgentEvent::UnverifiedNumbers { .. }
            | AgentEvent::McpServerStatus { .. } => {
                if let Some((kind, text)) = event_notice(event) {
                    self.notice(kind, text);
                }
            }
            AgentEvent::Watermark { .. }
            | AgentEvent::CompactionStarted { .. }
            | AgentEvent::LlmUsage { .. } => {}
            // Team events belong to their own view (docs §14).
            AgentEvent::SwarmStarted { .. }
            | AgentEvent::SwarmTaskStarted { .. }
            | AgentEvent::SwarmTaskRetry { .. }
            | AgentEvent::SwarmTaskFinished { .. }
            | AgentEvent::SwarmFinished { .. }
            | AgentEvent::SwarmWorker { .. } => {}
        }
    }

    fn reasoning_delta(&mut self, iter: u64, chars: usize, tail: &str) {
        let existing = self.reasoning.filter(|i| {
            matches!(self.cells.get(*i).map(Cell::kind), Some(CellKind::Reasoning { iter: it, .. }) if *it == iter)
        });
        match existing {
            Some(i) => {
                if let CellKind::Reasoning {
                    chars: c, text: t, ..
                } = self.cells[i].kind_mut()
                {
                    *c = chars;
                    *t = tail.to_string();
                }
            }
            None => {
                self.reasoning = Some(self.push(CellKind::Reasoning {
                    iter,
                    chars,
                    text: tail.to_string(),
                }));
            }
        }
    }

    fn text_delta(&mut self, iter: u64, delta: &str) {
        let existing = self.streaming.filter(|i| {
            matches!(self.cells.get(*i).map(Cell::kind), Some(CellKind::Assistant { iter: it, .. }) if *it == iter)
        });
        match existing {
            Some(i) => self.cells[i].append_text(delta),
            None => {
                self.streaming = Some(self.push(CellKind::Assistant {
                    iter,
                    text: delta.to_string(),
                    finished: false,
                    note: None,
                }));
            }
        }
    }

    fn stream_reset(&mut self, error: &str, retry_in_ms: u64) {
        // The failed attempt's text is void (the retry starts over).
        if let Some(i) = self.streaming.take()
            && i + 1 == self.cells.len()
        {
            self.cells.pop();
        }
        self.notice(
            NoticeKind::Warning,
            format!(
                "model stream failed ({error}); retrying in {:.1}s",
                retry_in_ms as f64 / 1000.0
            ),
        );
    }

    fn answer(&mut self, iter: u64, content: &str) {
        self.finish_streaming();
        let idx = self.cells.iter().rposition(
            |c| matches!(c.kind(), CellKind::Assistant { iter: it, note: None, .. } if *it == iter),
        );
        match idx {
            Some(i) => {
                if let CellKind::Assistant { text, finished, .. } = self.cells[i].kind_mut() {
                    if text != content {
                        *text = content.to_string();
                    }
                    *finished = true;
                }
            }
            None => {
                self.push(CellKind::Assistant {
                    iter,
                    text: content.to_string(),
                    finished: true,
                    note: None,
                });
            }
        }
    }

    fn answer_rejected(&mut self, iter: u64, issues: &[String]) {
        self.finish_streaming();
        let note = format!("↺ draft sent back for revision: {}", issues.join("; "));
        let idx = self
            .cells
            .iter()
            .rposition(|c| matches!(c.kind(), CellKind::Assistant { iter: it, .. } if *it == iter));
        match idx {
            Some(i) => {
                if let CellKind::Assistant { note: n, .. } = self.cells[i].kind_mut() {
                    *n = Some(note);
                }
            }
            None => {
                self.notice(NoticeKind::Warning, note);
            }
        }
    }

    /// The run ended: tool calls still open end with it (unless it
    /// answered), then the run's end cell.
    fn run_finished(&mut self, end: CellKind) {
        self.finish_streaming();
        if !matches!(
            end,
            CellKind::RunEnd {
                status: RunStatus::Success | RunStatus::Partial | RunStatus::Unsupported,
                ..
            }
        ) {
            for &i in self.tools.values() {
                if let Some(c) = self.cells.get_mut(i)
                    && matches!(c.kind(), CellKind::Tool(t) if !matches!(t.state, ToolCellState::Finished(_)))
                    && let CellKind::Tool(t) = c.kind_mut()
                {
                    t.state = ToolCellState::Finished(ToolCallStatus::Cancelled);
                }
            }
        }
        self.tools.clear();
        self.sweeps.clear();
        self.push(end);
    }

    /// The sweep cell of a call, made on its first progress.
    fn sweep_cell(&mut self, call_id: &str) -> Option<&mut SweepCell> {
        let existing = self
            .sweeps
            .get(call_id)
            .copied()
            .filter(|&i| matches!(self.cells.get(i).map(Cell::kind), Some(CellKind::Sweep(_))));
        let i = match existing {
            Some(i) => i,
            None => {
                let i = self.push(CellKind::Sweep(SweepCell::new(call_id)));
                self.sweeps.insert(call_id.to_string(), i);
                i
            }
        };
        match self.cells.get_mut(i)?.kind_mut() {
            CellKind::Sweep(c) => Some(c),
            _ => None,
        }
    }

    fn tool_cell(&mut self, call_id: &str) -> Option<&mut ToolCell> {
        let i = *self.tools.get(call_id)?;
        match self.cells.get_mut(i)?.kind_mut() {
            CellKind::Tool(t) => Some(t),
            _ => None,
        }
    }

    fn apply_tool(&mut self, ev: &ToolEvent) {
        match ev {
            ToolEvent::ToolBatchStarted { calls, .. } => {
                self.finish_streaming();
                for c in calls {
                    let i = self.push(CellKind::Tool(ToolCell {
                        call_id: c.call_id.clone(),
                        tool: c.tool.clone(),
                        args: c.args.clone(),
                        state: ToolCellState::Queued,
                        elapsed_ms: None,
                        result: String::new(),
                        error_code: None,
                    }));
                    self.tools.insert(c.call_id.clone(), i);
                }
            }
            ToolEvent::ToolCallStarted {
                call_id,
                tool,
                args,
                ..
            } => {
                if let Some(t) = self.tool_cell(call_id) {
                    t.state = ToolCellState::Running;
                } else {
                    let i = self.push(CellKind::Tool(ToolCell {
                        call_id: call_id.clone(),
                        tool: tool.clone(),
                        args: args.clone(),
                        state: ToolCellState::Running,
                        elapsed_ms: None,
                        result: String::new(),
                        error_code: None,
                    }));
                    self.tools.insert(call_id.clone(), i);
                }
            }
            ToolEvent::ToolCallFinished {
                call_id,
                tool,
                status,
                elapsed_ms,
                preview,
                error_code,
                output,
                ..
            } => {
                let mut args = serde_json::Value::Null;
                if let Some(t) = self.tool_cell(call_id) {
                    t.state = ToolCellState::Finished(*status);
                    t.elapsed_ms = Some(*elapsed_ms);
                    t.result = preview.clone();
                    t.error_code = error_code.clone();
                    args = t.args.clone();
                }
                // The structured output names the run dir; an event with
                // only a preview leaves the rest to the load.
                let run = self.run_dir.as_deref();
                if tool == backtest::TOOL
                    && *status == ToolCallStatus::Ok
                    && let Some(cell) = match output {
                        Some(out) => backtest::cell_for_output(call_id, out, &args, run),
                        None => backtest::cell_for_result(call_id, preview, &args, run),
                    }
                {
                    self.push_backtest(cell);
                }
                // A position's payoff is drawn from the output itself.
                if tool == payoff::TOOL
                    && *status == ToolCallStatus::Ok
                    && let Some(cell) = match output {
                        Some(out) => payoff::cell_for_output(call_id, out),
                        None => payoff::cell_for_result(call_id, preview),
                    }
                {
                    self.push(CellKind::Payoff(cell));
                }
                // A sweep's bar gives way to its ranking and heatmap, or
                // to why it stopped.
                if tool == sweep_cell::TOOL {
                    let done = output.as_ref().and_then(sweep_cell::output_of);
                    let ran = done.is_some() || self.sweeps.contains_key(call_id.as_str());
                    if ran && let Some(c) = self.sweep_cell(call_id) {
                        match done {
                            Some(o) => {
                                c.done = o.cells as f64;
                                c.total = o.cells as f64;
                                c.output = Some(o);
                            }
                            None => c.failed = Some(preview.clone()),
                        }
                    }
                }
            }
            // Shown by the approval overlay and the tool's own cell.
            ToolEvent::Approval { .. } => {}
            ToolEvent::ToolProgress {
                call_id,
                tool,
                current,
                total,
                message,
                ..
            } if tool == sweep_cell::TOOL => {
                if let Some(c) = self.sweep_cell(call_id) {
                    c.done = current.unwrap_or(c.done);
                    c.total = total.unwrap_or(c.total);
                    c.message.clone_from(message);
                }
            }
            ToolEvent::ToolHeartbeat { .. }
            | ToolEvent::ToolProgress { .. }
            | ToolEvent::ToolTimeoutWarning { .. }
            | ToolEvent::ToolBatchFinished { .. } => {}
        }
    }

    /// Rebuilds the chat from a stored session (resume).
    pub(crate) fn load_history(&mut self, messages: &[StoredMessage]) {
        self.clear();
        for m in messages {
            let msg = &m.message;
            match msg.role {
                Role::User => {
                    if msg.content.trim_start().starts_with("<system>") {
                        continue;
                    }
                    self.push(CellKind::User {
                        text: msg.content.clone(),
                    });
                }
                Role::Assistant => {
                    if let Some(r) = msg.reasoning_content.as_ref().filter(|r| !r.is_empty()) {
                        self.push(CellKind::Reasoning {
                            iter: 0,
                            chars: r.chars().count(),
                            text: r.clone(),
                        });
                    }
                    if !msg.content.trim().is_empty() {
                        let note = (m.status.as_deref() == Some("interrupted"))
                            .then(|| "⚠ this reply was interrupted".to_string());
                        self.push(CellKind::Assistant {
                            iter: 0,
                            text: msg.content.clone(),
                            finished: true,
                            note,
                        });
                    }
                    for tc in &msg.tool_calls {
                        // The log holds what the model sent; the cell shows
                        // it as a live call's event does: secrets masked.
                        let args = serde_json::from_str(&tc.function.arguments)
                            .unwrap_or(serde_json::Value::String(tc.function.arguments.clone()));
                        let args = redact_value(&args, Sink::Display);
                        let i = self.push(CellKind::Tool(ToolCell {
                            call_id: tc.id.clone(),
                            tool: tc.function.name.clone(),
                            args,
                            state: ToolCellState::Queued,
                            elapsed_ms: None,
                            result: String::new(),
                            error_code: None,
                        }));
                        self.tools.insert(tc.id.clone(), i);
                    }
                }
                Role::Tool => {
                    let failed = looks_failed(&msg.content);
                    let mut args = None;
                    if let Some(id) = &msg.tool_call_id
                        && let Some(t) = self.tool_cell(id)
                    {
                        t.result = redact_tool_result(&msg.content);
                        t.state = ToolCellState::Finished(if failed {
                            ToolCallStatus::Error
                        } else {
                            ToolCallStatus::Ok
                        });
                        args = Some(t.args.clone());
                    }
                    // The stored result names its run directory; a result
                    // that lost it (cleared by compaction) gets no cell.
                    if msg.name.as_deref() == Some(backtest::TOOL)
                        && !failed
                        && let Some(cell) = backtest::cell_for_result(
                            msg.tool_call_id.as_deref().unwrap_or(""),
                            &msg.content,
                            args.as_ref().unwrap_or(&serde_json::Value::Null),
                            None,
                        )
                    {
                        self.push_backtest(cell);
                    }
                    if msg.name.as_deref() == Some(payoff::TOOL)
                        && !failed
                        && let Some(cell) = payoff::cell_for_result(
                            msg.tool_call_id.as_deref().unwrap_or(""),
                            &msg.content,
                        )
                    {
                        self.push(CellKind::Payoff(cell));
                    }
                    if msg.name.as_deref() == Some(sweep_cell::TOOL)
                        && !failed
                        && let Some(cell) = sweep_cell::cell_for_result(
                            msg.tool_call_id.as_deref().unwrap_or(""),
                            &msg.content,
                        )
                    {
                        self.push(CellKind::Sweep(cell));
                    }
                }
                Role::System => {}
            }
        }
        // Calls without a stored result never finished.
        for &i in self.tools.values() {
            if let Some(c) = self.cells.get_mut(i)
                && matches!(c.kind(), CellKind::Tool(t) if t.state == ToolCellState::Queued)
                && let CellKind::Tool(t) = c.kind_mut()
            {
                t.state = ToolCellState::Finished(ToolCallStatus::Cancelled);
            }
        }
        self.tools.clear();
        self.sweeps.clear();
        self.follow = true;
    }

    fn width(&self) -> u16 {
        self.view.0.max(10)
    }

    fn height(&self) -> usize {
        self.view.1.max(1) as usize
    }

    fn cell_height(&mut self, i: usize, theme: &Theme) -> usize {
        let (w, t) = (self.width(), self.toggles);
        self.cells.get_mut(i).map_or(0, |c| c.height(w, theme, t))
    }

    /// The top line when following: the last `height` lines of content.
    fn bottom_anchor(&mut self, theme: &Theme) -> (usize, usize) {
        let h = self.height();
        let mut total = 0;
        for i in (0..self.cells.len()).rev() {
            total += self.cell_height(i, theme);
            if total >= h {
                return (i, total - h);
            }
        }
        (0, 0)
    }

    /// The viewport's top line, resolving follow mode.
    pub(crate) fn top(&mut self, theme: &Theme) -> (usize, usize) {
        if self.follow {
            self.bottom_anchor(theme)
        } else {
            let (c, l) = self.anchor;
            let c = c.min(self.cells.len().saturating_sub(1));
            let h = self.cell_height(c, theme);
            (c, l.min(h.saturating_sub(1)))
        }
    }

    pub(crate) fn scroll_up(&mut self, lines: usize, theme: &Theme) {
        let (mut c, mut l) = self.top(theme);
        self.follow = false;
        for _ in 0..lines {
            if l > 0 {
                l -= 1;
                continue;
            }
            // Step to the last line of the previous non-empty cell.
            let mut prev = c;
            let mut found = false;
            while prev > 0 {
                prev -= 1;
                let h = self.cell_height(prev, theme);
                if h > 0 {
                    c = prev;
                    l = h - 1;
                    found = true;
                    break;
                }
            }
            if !found {
                break;
            }
        }
        self.anchor = (c, l);
    }

    pub(crate) fn scroll_down(&mut self, lines: usize, theme: &Theme) {
        if self.follow {
            return;
        }
        let (mut c, mut l) = self.top(theme);
        for _ in 0..lines {
            let h = self.cell_height(c, theme);
            if l + 1 < h {
                l += 1;
            } else if c + 1 < self.cells.len() {
                c += 1;
                l = 0;
            } else {
                break;
            }
        }
        self.anchor = (c, l);
        // Within one screen of the end: follow again.
        if self.lines_from(c, l, theme, self.height() + 1) <= self.height() {
            self.follow = true;
        }
    }

    /// Counts lines from (c, l) to the end, stopping once past `cap`.
    fn lines_from(&mut self, c: usize, l: usize, theme: &Theme, cap: usize) -> usize {
        let mut total = 0;
        for i in c..self.cells.len() {
            let h = self.cell_height(i, theme);
            total += if i == c { h.saturating_sub(l) } else { h };
            if total > cap {
                break;
            }
        }
        total
    }

    pub(crate) fn scroll_top(&mut self) {
        self.follow = false;
        self.anchor = (0, 0);
    }

    pub(crate) fn follow_bottom(&mut self) {
        self.follow = true;
    }

    pub(crate) fn page(&self) -> usize {
        self.height().saturating_sub(2).max(1)
    }

    /// The lines of the viewport, each with the index of its cell.
    pub(crate) fn visible(&mut self, theme: &Theme) -> Vec<(usize, Line<'static>)> {
        let h = self.height();
        let (mut c, mut l) = self.top(theme);
        let (w, t) = (self.width(), self.toggles);
        let mut out = Vec::with_capacity(h);
        while out.len() < h && c < self.cells.len() {
            let lines = self.cells[c].lines(w, theme, t);
            for line in lines.iter().skip(l) {
                if out.len() >= h {
                    break;
                }
                out.push((c, line.clone()));
            }
            c += 1;
            l = 0;
        }
        out
    }

    /// Moves the selection to the previous (or next) expandable cell and
    /// scrolls it into view.
    pub(crate) fn select(&mut self, forward: bool, theme: &Theme) {
        let n = self.cells.len();
        if n == 0 {
            return;
        }
        let start = self.selected.unwrap_or(if forward { 0 } else { n });
        let found = if forward {
            (start + usize::from(self.selected.is_some())..n).find(|i| self.cells[*i].expandable())
        } else {
            (0..start).rev().find(|i| self.cells[*i].expandable())
        };
        if let Some(i) = found {
            self.selected = Some(i);
            self.ensure_visible(i, theme);
        } else if self.selected.is_none() {
            self.selected = (0..n).rev().find(|i| self.cells[*i].expandable());
        }
    }

    /// Keeps cell `i` on screen, moving the viewport as little as possible.
    pub(crate) fn ensure_visible(&mut self, i: usize, theme: &Theme) {
        let (c, l) = self.top(theme);
        if i < c || (i == c && l > 0) {
            self.follow = false;
            self.anchor = (i, 0);
            return;
        }
        let h = self.height();
        let mut below = 0;
        for j in c..=i.min(self.cells.len().saturating_sub(1)) {
            let ch = self.cell_height(j, theme);
            below += if j == c { ch.saturating_sub(l) } else { ch };
        }
        if below > h {
            // Bottom-align the cell's last line.
            self.follow = false;
            self.anchor = (c, l);
            self.scroll_down(below - h, theme);
        }
    }

    /// Flips the selected cell between expanded and folded.
    pub(crate) fn toggle_selected(&mut self) {
        let (toggles, width) = (self.toggles, self.width());
        if let Some(i) = self.selected
            && let Some(c) = self.cells.get_mut(i)
            && c.expandable()
        {
            let now = c
                .expanded
                .unwrap_or_else(|| c.default_expanded(toggles, width));
            c.expanded = Some(!now);
        }
    }

    /// Global toggles reset per-cell choices so the switch applies to all.
    pub(crate) fn set_toggles(&mut self, toggles: Toggles) {
        self.toggles = toggles;
        for c in &mut self.cells {
            c.expanded = None;
        }
    }
}

/// A stored tool result that reports a failure.
fn looks_failed(content: &str) -> bool {
    let head = content.trim_start();
    if head.starts_with("Error") || head.starts_with("error:") {
        return true;
    }
    serde_json::from_str::<serde_json::Value>(content)
        .ok()
        .and_then(|v| {
            v.get("status")
                .and_then(|s| s.as_str())
                .map(|s| s == "error")
        })
        .unwrap_or(false)
}

/// The notice an engine event shows as it is, if it is one of those.
fn event_notice(event: &AgentEvent) -> Option<(NoticeKind, String)> {
    let notice = match event {
        AgentEvent::ContentFiltered {
            consecutive, limit, ..
        } => (
            NoticeKind::Warning,
            format!(
                "reply blocked by the provider's content filter ({consecutive}/{limit}); skipping that item"
            ),
        ),
        AgentEvent::EmptyResponse { consecutive, .. } => (
            NoticeKind::Info,
            format!("the model sent an empty reply ({consecutive}); nudging it"),
        ),
        AgentEvent::WrapUp { remaining, .. } => (
            NoticeKind::Info,
            format!("{remaining} iteration(s) left: the model was asked to wrap up"),
        ),
        AgentEvent::ForcedTextOnly { .. } => (
            NoticeKind::Info,
            "last iteration: tools withheld, text answer only".to_string(),
        ),
        AgentEvent::BackgroundResults { count, .. } => (
            NoticeKind::Info,
            format!("{count} finished background task(s) reported to the model"),
        ),
        AgentEvent::StallWarning { idle_s, timeout_s } => (
            NoticeKind::Warning,
            format!("no progress for {idle_s:.0}s (the run stops at {timeout_s:.0}s)"),
        ),
        AgentEvent::Stalled { reason } => (NoticeKind::Error, reason.clone()),
        // Figures no tool result holds (docs §1.6), under the answer.
        AgentEvent::UnverifiedNumbers {
            numbers, figures, ..
        } => (
            NoticeKind::Warning,
            format!(
                "unverified: {} of the answer's {figures} figure(s) appear in no tool result of this run: {}",
                numbers.len(),
                numbers.join(", ")
            ),
        ),
        AgentEvent::McpServerStatus {
            server,
            state,
            tools,
            reason,
            notes,
        } => {
            let reason = reason.as_deref().unwrap_or("no reason given");
            match state {
                // Servers start in the background (docs §13.2).
                McpServerState::Starting => (
                    NoticeKind::Info,
                    format!("MCP server {server} starting; its tools join when it is ready"),
                ),
                McpServerState::Ready if notes.is_empty() => (
                    NoticeKind::Info,
                    format!("MCP server {server} ready: {tools} tool(s)"),
                ),
                // Skipped or left-out tools (docs §13.3): a warning, in full.
                McpServerState::Ready => (
                    NoticeKind::Warning,
                    format!(
                        "MCP server {server} ready: {tools} tool(s); {}",
                        notes.join("; ")
                    ),
                ),
                McpServerState::Failed => (
                    NoticeKind::Warning,
                    format!("MCP server {server} failed to start: {reason}"),
                ),
                McpServerState::Exited => (
                    NoticeKind::Warning,
                    format!("MCP server {server} exited: {reason}; its tools are unavailable"),
                ),
            }
        }
        AgentEvent::Notice { level, message } => {
            let kind = match level {
                NoticeLevel::Info => NoticeKind::Info,
                NoticeLevel::Warning => NoticeKind::Warning,
            };
            (kind, message.clone())
        }
        _ => return None,
    };
    Some(notice)
}
