//! The token-watermark gauge: the engine's current estimate against the
//! compaction threshold, marks at the L1 (50 %), L2 (70 %) and L3 (100 %)
//! gates, the layer running now, and the session's compaction history.
//! It shows the engine's own numbers and nothing else: the `watermark`
//! estimate, replaced by `tokens_after` when a layer finishes, so after a
//! compaction it agrees with reality rather than with a stale estimate.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use tokio::time::Instant;

use super::cells::layer_label;
use super::format::{clock, tokens, truncate};
use super::theme::Theme;
use crate::agent::events::AgentEvent;

/// Compactions listed under the gauge.
pub(crate) const HISTORY_SHOWN: usize = 3;

#[derive(Clone, Debug, PartialEq)]
pub struct Compaction {
    pub iter: u64,
    pub layer: String,
    pub trigger: String,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub messages_touched: usize,
    pub ineffective: bool,
    pub degraded: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Active {
    pub layer: String,
    pub trigger: String,
    pub tokens_before: u64,
    pub started_at: Instant,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Gauge {
    /// The engine's latest estimate; `None` before the first iteration.
    pub tokens: Option<u64>,
    pub threshold: u64,
    pub gates: [u64; 3],
    pub estimator: String,
    pub messages: usize,
    pub active: Option<Active>,
    /// Every compaction of this session, oldest first.
    pub history: Vec<Compaction>,
}

impl Gauge {
    /// An empty gauge with the configured gates (before any watermark).
    pub(crate) fn new(threshold: u64, gates: [u64; 3]) -> Self {
        Gauge {
            tokens: None,
            threshold,
            gates,
            estimator: String::new(),
            messages: 0,
            active: None,
            history: Vec::new(),
        }
    }

    pub(crate) fn reset(&mut self) {
        *self = Gauge::new(self.threshold, self.gates);
    }

    pub(crate) fn apply(&mut self, ev: &AgentEvent, at: Instant) {
        match ev {
            AgentEvent::Watermark {
                tokens,
                threshold,
                gates,
                estimator,
                messages,
                ..
            } => {
                self.tokens = Some(*tokens);
                self.threshold = *threshold;
                self.gates = *gates;
                self.estimator = estimator.clone();
                self.messages = *messages;
            }
            AgentEvent::CompactionStarted {
                layer,
                trigger,
                tokens_before,
                ..
            } => {
                self.active = Some(Active {
                    layer: layer.clone(),
                    trigger: trigger.clone(),
                    tokens_before: *tokens_before,
                    started_at: at,
                });
            }
            AgentEvent::CompactionFinished {
                iter,
                layer,
                trigger,
                tokens_before,
                tokens_after,
                messages_touched,
                ineffective,
                degraded,
                ..
            } => {
                self.active = None;
                self.tokens = Some(*tokens_after);
                self.history.push(Compaction {
                    iter: *iter,
                    layer: layer.clone(),
                    trigger: trigger.clone(),
                    tokens_before: *tokens_before,
                    tokens_after: *tokens_after,
                    messages_touched: *messages_touched,
                    ineffective: *ineffective,
                    degraded: *degraded,
                });
            }
            // A run that ends mid-compaction leaves no layer running.
            AgentEvent::RunFinished { .. } => self.active = None,
            _ => {}
        }
    }

    /// Fraction of the threshold used.
    pub(crate) fn ratio(&self) -> f64 {
        match self.tokens {
            Some(t) if self.threshold > 0 => t as f64 / self.threshold as f64,
            _ => 0.0,
        }
    }

    /// The highest gate the estimate has reached: 0 (none) to 3.
    pub fn level(&self) -> usize {
        let t = self.tokens.unwrap_or(0);
        self.gates.iter().filter(|g| **g > 0 && t >= **g).count()
    }

    fn fill_style(&self, theme: &Theme) -> Style {
        match self.level() {
            0 => theme.gauge_ok,
            1 | 2 => theme.gauge_warn,
            _ => theme.gauge_over,
        }
    }

    /// The bar alone, `width` cells: filled to the estimate, a mark at each gate.
    pub(crate) fn bar(&self, width: usize, theme: &Theme) -> Vec<Span<'static>> {
        let width = width.max(3);
        let fill = ((self.ratio().min(1.0)) * width as f64).round() as usize;
        let mark_at = |g: u64| -> usize {
            if self.threshold == 0 {
                return usize::MAX;
            }
            let pos = (g as f64 / self.threshold as f64 * width as f64).round() as usize;
            pos.clamp(1, width) - 1
        };
        let marks = [
            mark_at(self.gates[0]),
            mark_at(self.gates[1]),
            mark_at(self.gates[2]),
        ];
        let fill_style = self.fill_style(theme);
        let mut spans = Vec::with_capacity(width);
        for i in 0..width {
            let filled = i < fill;
            let (ch, style) = if marks.contains(&i) {
                (
                    "│",
                    if filled {
                        fill_style.add_modifier(Modifier::BOLD)
                    } else {
                        theme.gauge_mark
                    },
                )
            } else if filled {
                ("█", fill_style)
            } else {
                ("░", theme.gauge_empty)
            };
            spans.push(Span::styled(ch, style));
        }
        spans
    }

    fn headline(&self) -> String {
        match self.tokens {
            Some(t) => format!(
                "{} / {} tokens · {:.0}%",
                tokens(t),
                tokens(self.threshold),
                self.ratio() * 100.0
            ),
            None => format!("— / {} tokens", tokens(self.threshold)),
        }
    }

    fn compaction_text(c: &Compaction) -> String {
        let pct = if c.tokens_before > 0 {
            (c.tokens_after as f64 / c.tokens_before as f64 - 1.0) * 100.0
        } else {
            0.0
        };
        let mut s = format!(
            "{} {} → {} ({pct:+.0}%)",
            layer_label(&c.layer),
            tokens(c.tokens_before),
            tokens(c.tokens_after)
        );
        if c.ineffective {
            s.push_str(" ineffective");
        }
        if c.degraded {
            s.push_str(" degraded");
        }
        s
    }

    /// The full gauge for the side panel.
    pub(crate) fn lines(&self, width: usize, theme: &Theme, now: Instant) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        let style = if self.level() >= 3 {
            theme.error
        } else {
            theme.text
        };
        out.push(Line::from(Span::styled(
            truncate(&self.headline(), width),
            style,
        )));
        out.push(Line::from(self.bar(width, theme)));
        let labels = format!(
            "L1 {} · L2 {} · L3 {}",
            tokens(self.gates[0]),
            tokens(self.gates[1]),
            tokens(self.gates[2])
        );
        out.push(Line::from(Span::styled(
            truncate(&labels, width),
            theme.muted,
        )));
        if let Some(a) = &self.active {
            let t = format!(
                "⟳ {} {} running {} · from {}",
                layer_label(&a.layer),
                a.layer,
                clock(now.saturating_duration_since(a.started_at)),
                tokens(a.tokens_before)
            );
            out.push(Line::from(Span::styled(
                truncate(&t, width),
                theme.accent.add_modifier(Modifier::BOLD),
            )));
        }
        match self.history.last() {
            None => out.push(Line::from(Span::styled("no compactions yet", theme.muted))),
            Some(last) => {
                let head = format!(
                    "{} compaction{} · last {}",
                    self.history.len(),
                    if self.history.len() == 1 { "" } else { "s" },
                    Self::compaction_text(last)
                );
                out.push(Line::from(Span::styled(
                    truncate(&head, width),
                    theme.accent,
                )));
                for c in self.history.iter().rev().take(HISTORY_SHOWN) {
                    let t = format!(
                        "  #{} {} · {} msgs",
                        c.iter,
                        Self::compaction_text(c),
                        c.messages_touched
                    );
                    out.push(Line::from(Span::styled(truncate(&t, width), theme.muted)));
                }
            }
        }
        out
    }

    /// One line for narrow layouts: `ctx ███░│░│ 1.2k/40k 3% · ⟳2 L1 31k→18k`.
    pub fn compact_line(&self, width: usize, theme: &Theme) -> Line<'static> {
        let t = self.tokens.map_or("—".to_string(), tokens);
        let mut tail = format!(
            " {t}/{} {:.0}%",
            tokens(self.threshold),
            self.ratio() * 100.0
        );
        if let Some(a) = &self.active {
            tail.push_str(&format!(" · ⟳ {} running", layer_label(&a.layer)));
        } else if let Some(last) = self.history.last() {
            tail.push_str(&format!(
                " · {}× last {}",
                self.history.len(),
                Self::compaction_text(last)
            ));
        }
        let bar_w = (width / 4).clamp(6, 24).min(width.saturating_sub(6));
        let tail = truncate(&tail, width.saturating_sub(bar_w + 4));
        let mut spans = vec![Span::styled("ctx ", theme.muted)];
        spans.extend(self.bar(bar_w, theme));
        spans.push(Span::styled(tail, theme.text));
        Line::from(spans)
    }

    pub fn render(&self, area: Rect, buf: &mut Buffer, theme: &Theme, now: Instant) {
        for (i, line) in self
            .lines(area.width as usize, theme, now)
            .iter()
            .take(area.height as usize)
            .enumerate()
        {
            buf.set_line(area.x, area.y + i as u16, line, area.width);
        }
    }
}
