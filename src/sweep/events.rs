//! What a running sweep reports (docs §18.3): progress as cells finish and
//! the end, printed as `{"event": "sweep_progress", ...}` JSON lines by
//! `vibedesk sweep run --json` and `sweep shard --json`, drawn as a bar on
//! a terminal, and passed to the `sweep` tool's progress.

use serde_json::{Value, json};

/// The best cell so far by the ranking metric.
#[derive(Clone, Debug, PartialEq)]
pub struct Best {
    pub cell: usize,
    /// `fast=5 slow=30 AAPL`.
    pub label: String,
    pub metric: String,
    pub value: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum SweepEvent {
    /// Before the first cell: how many there are and how many were already
    /// done (resume).
    Started {
        total: usize,
        skipped: usize,
        threads: usize,
    },
    /// Cells done (skipped ones included), cells a second, seconds to go.
    Progress {
        done: usize,
        total: usize,
        rate: f64,
        eta_s: f64,
        best: Option<Best>,
    },
    /// Every cell is done (or the run stopped: `cancelled`).
    Finished {
        done: usize,
        total: usize,
        computed: usize,
        skipped: usize,
        elapsed_s: f64,
        cancelled: bool,
    },
}

fn num(x: f64) -> Value {
    if x.is_finite() {
        json!((x * 1e6).round() / 1e6)
    } else {
        Value::Null
    }
}

impl SweepEvent {
    /// The `--json` line's object.
    pub fn to_json(&self) -> Value {
        match self {
            SweepEvent::Started {
                total,
                skipped,
                threads,
            } => json!({
                "event": "sweep_started", "total": total, "skipped": skipped, "threads": threads}),
            SweepEvent::Progress {
                done,
                total,
                rate,
                eta_s,
                best,
            } => json!({
                "event": "sweep_progress", "done": done, "total": total,
                "rate": num(*rate), "eta_s": num(*eta_s),
                "best": best.as_ref().map(|b| json!({"cell": b.cell, "label": b.label, "metric": b.metric, "value": num(b.value)})),
            }),
            SweepEvent::Finished {
                done,
                total,
                computed,
                skipped,
                elapsed_s,
                cancelled,
            } => json!({
                "event": "sweep_finished", "done": done, "total": total, "computed": computed,
                "skipped": skipped, "elapsed_s": num(*elapsed_s), "cancelled": cancelled}),
        }
    }

    /// One line for a terminal or a tool's progress: `1,234/17,400 cells ·
    /// 5,120/s · ETA 3s · best sharpe 1.23 (fast=5 slow=30 AAPL)`.
    pub fn line(&self) -> String {
        match self {
            SweepEvent::Started {
                total,
                skipped,
                threads,
            } => {
                format!("sweep: {total} cells on {threads} threads ({skipped} already done)")
            }
            SweepEvent::Progress {
                done,
                total,
                rate,
                eta_s,
                best,
            } => {
                let best = best
                    .as_ref()
                    .map(|b| format!(" · best {} {:.4} ({})", b.metric, b.value, b.label))
                    .unwrap_or_default();
                format!(
                    "{done}/{total} cells · {rate:.0}/s · ETA {:.0}s{best}",
                    eta_s.max(0.0)
                )
            }
            SweepEvent::Finished {
                done,
                total,
                computed,
                skipped,
                elapsed_s,
                cancelled,
            } => {
                let how = if *cancelled { "stopped" } else { "done" };
                format!(
                    "sweep {how}: {done}/{total} cells ({computed} run, {skipped} resumed) in {elapsed_s:.2}s"
                )
            }
        }
    }
}

/// A progress bar of `width` cells for a terminal: `[████░░░░] 40%`.
pub fn bar(done: usize, total: usize, width: usize) -> String {
    let frac = if total == 0 {
        1.0
    } else {
        done as f64 / total as f64
    };
    let full = ((frac * width as f64).round() as usize).min(width);
    format!(
        "[{}{}] {:>3.0}%",
        "█".repeat(full),
        "░".repeat(width - full),
        frac * 100.0
    )
}
