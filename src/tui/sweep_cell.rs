//! A `sweep` call as a chat cell (docs §18): while it runs, a progress bar
//! in the gauge's style with the tool's progress line (cells done, rate,
//! time left, best so far); when it has finished, its summary, the best
//! cells ranked out-of-sample, the deflated Sharpe and the braille heatmap
//! from the typed [`SweepOutput`].

use ratatui::text::{Line, Span};
use serde::Deserialize;
use serde_json::Value;

use super::backtest::PAD;
use super::format::one_line;
use super::theme::Theme;
use super::wrap::wrap_spans;
use crate::model::sweep::SweepOutput;

/// The tool whose calls get this cell.
pub const TOOL: &str = "sweep";
/// Ranked cells shown when expanded.
const TOP: usize = 5;

#[derive(Clone, Debug, PartialEq)]
pub struct SweepCell {
    pub call_id: String,
    pub done: f64,
    pub total: f64,
    /// The latest progress line.
    pub message: String,
    pub output: Option<SweepOutput>,
    /// Why the call ended without results (cancelled, timed out, failed).
    pub failed: Option<String>,
}

impl SweepCell {
    pub fn new(call_id: &str) -> Self {
        SweepCell {
            call_id: call_id.to_string(),
            done: 0.0,
            total: 0.0,
            message: String::new(),
            output: None,
            failed: None,
        }
    }

    /// Text for search.
    pub fn plain_text(&self) -> String {
        match &self.output {
            Some(o) => format!("{TOOL} {}", o.summary),
            None => format!("{TOOL} {}", self.message),
        }
    }

    /// Whether there is more to show when expanded.
    pub fn finished(&self) -> bool {
        self.output.is_some() || self.failed.is_some()
    }
}

/// The finished call's typed output, when it ran (not a plan only).
pub fn output_of(output: &Value) -> Option<SweepOutput> {
    let out = SweepOutput::deserialize(output).ok()?;
    (out.status == "ok" && out.results.is_some()).then_some(out)
}

/// A cell from a stored result (a resumed session).
pub fn cell_for_result(call_id: &str, text: &str) -> Option<SweepCell> {
    let out = output_of(&serde_json::from_str(text).ok()?)?;
    let mut cell = SweepCell::new(call_id);
    cell.done = out.cells as f64;
    cell.total = out.cells as f64;
    cell.output = Some(out);
    Some(cell)
}

/// `████░░░░ 42%`, `width` cells wide.
pub fn bar(done: f64, total: f64, width: usize) -> (String, String, String) {
    let frac = if total > 0.0 {
        (done / total).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let full = ((frac * width as f64).round() as usize).min(width);
    (
        "█".repeat(full),
        "░".repeat(width - full),
        format!(" {:>3.0}%", frac * 100.0),
    )
}

pub fn render(
    cell: &SweepCell,
    width: usize,
    theme: &Theme,
    expanded: bool,
    out: &mut Vec<Line<'static>>,
) {
    let first = vec![Span::raw("  "), Span::styled("◆ ", theme.accent)];
    let Some(o) = &cell.output else {
        let bar_w = (width / 4).clamp(6, 24);
        let (full, empty, pct) = bar(cell.done, cell.total, bar_w);
        let mut spans = first;
        spans.push(Span::styled("sweep ", theme.text));
        spans.push(Span::styled(full, theme.gauge_ok));
        spans.push(Span::styled(empty, theme.gauge_empty));
        spans.push(Span::styled(pct, theme.muted));
        let used = 4 + 6 + bar_w + 5;
        let text = match &cell.failed {
            Some(why) => Span::styled(
                format!(" {}", one_line(why, width.saturating_sub(used + 1))),
                theme.error,
            ),
            None => Span::styled(
                format!(
                    " {}",
                    one_line(&cell.message, width.saturating_sub(used + 1))
                ),
                theme.muted,
            ),
        };
        spans.push(text);
        out.push(Line::from(spans));
        return;
    };
    let head = [Span::styled(o.summary.clone(), theme.text)];
    if !expanded {
        let mut spans = first;
        spans.push(Span::styled(
            one_line(&o.summary, width.saturating_sub(4)),
            theme.text,
        ));
        out.push(Line::from(spans));
        return;
    }
    out.extend(wrap_spans(&head, width, &first, &[Span::raw(PAD)]));
    let muted = |s: String| Line::from(vec![Span::raw(PAD), Span::styled(s, theme.muted)]);
    let basis = if o.ranked_out_of_sample {
        "out-of-sample"
    } else {
        "in-sample (no split)"
    };
    out.push(muted(format!("ranked by {} {basis}", o.rank_by)));
    for (k, r) in o.top.iter().take(TOP).enumerate() {
        let score = r.score.map_or("—".into(), |s| format!("{s:.4}"));
        let is = r
            .in_sample
            .map(|v| format!("  (in-sample {v:.4})"))
            .unwrap_or_default();
        let line = format!("{:>2}. {score}  {} {}{is}", k + 1, r.params, r.symbol);
        out.push(Line::from(vec![
            Span::raw(PAD),
            Span::styled(one_line(&line, width.saturating_sub(PAD.len())), theme.text),
        ]));
    }
    if let Some(d) = &o.deflated_sharpe {
        let dsr = d.dsr.map_or("—".into(), |v| format!("{v:.3}"));
        out.push(muted(format!(
            "deflated Sharpe of the best: {dsr} ({})",
            // Cells that never traded in the ranked window are no trial.
            if d.trials < o.cells {
                format!("{} of {} cells with a Sharpe", d.trials, o.cells)
            } else {
                format!("{} cells tried", d.trials)
            }
        )));
    }
    for line in o.heatmap.lines() {
        out.push(Line::from(vec![
            Span::raw(PAD),
            Span::styled(
                one_line(line, width.saturating_sub(PAD.len())),
                theme.accent,
            ),
        ]));
    }
    if let Some(path) = &o.results {
        out.push(muted(format!("results: {path}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line<'_>]) -> String {
        lines
            .iter()
            .map(|l| {
                l.spans
                    .iter()
                    .map(|s| s.content.as_ref())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn a_running_sweep_shows_its_bar_and_a_finished_one_its_heatmap() {
        let theme = Theme::default();
        let mut cell = SweepCell::new("c1");
        cell.done = 50.0;
        cell.total = 200.0;
        cell.message = "50/200 cells · 400/s · ETA 0s".into();
        let mut out = Vec::new();
        render(&cell, 80, &theme, true, &mut out);
        let t = text(&out);
        assert!(
            t.contains("25%") && t.contains("400/s") && t.contains('█'),
            "{t}"
        );

        let v = serde_json::json!({"status": "ok", "summary": "200 cells in 0.5s", "cells": 200,
            "results": "sweep/results.parquet", "rank_by": "sharpe", "ranked_out_of_sample": true,
            "top": [{"params": "fast=5 slow=30", "symbol": "AAPL", "score": 1.25, "in_sample": 0.9}],
            "deflated_sharpe": {"dsr": 0.81, "trials": 200},
            "heatmap": "sharpe (out-of-sample)\n  30 \u{28ff}\u{2840}\n"});
        let cell = cell_for_result("c1", &v.to_string()).unwrap();
        let mut out = Vec::new();
        render(&cell, 80, &theme, true, &mut out);
        let t = text(&out);
        assert!(
            t.contains("fast=5 slow=30 AAPL") && t.contains("0.810") && t.contains('\u{28ff}'),
            "{t}"
        );
        let mut out = Vec::new();
        render(&cell, 80, &theme, false, &mut out);
        assert_eq!(out.len(), 1);
        assert!(
            cell_for_result("c", r#"{"status": "ok", "cells": 3}"#).is_none(),
            "a plan only"
        );
    }
}
