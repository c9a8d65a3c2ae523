//! Progress reporting from inside a tool without changing its signature
//! (docs §2.9): the scheduler installs a task-local handle around each call,
//! and [`emit`] finds it. Outside a tool call it is a silent no-op. Unlike the
//! original, `elapsed_s` is filled in (docs §12.18).
//!
//! Progress is coalesced per call: a burst of [`PROGRESS_BURST`] events
//! passes at once, then at most [`PROGRESS_PER_SECOND`] a second, and
//! between two the latest replaces the ones before it. A tool (or an MCP
//! server) reporting in a loop so costs a few events a second, not tens of
//! thousands, and the last report is still delivered: [`ProgressHandle::finish`]
//! sends it before the call's `tool_call_finished`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::events::{ToolEvent, ToolEventSink};

/// Progress events a call may send at once before the rate applies.
pub const PROGRESS_BURST: f64 = 8.0;
/// Progress events a call sends per second once its burst is spent.
pub const PROGRESS_PER_SECOND: f64 = 4.0;

/// Float rounding at a timer's wake-up must not cost a token.
const TOKEN_SLACK: f64 = 1e-6;

tokio::task_local! {
    static CURRENT: ProgressHandle;
}

#[derive(Clone)]
pub struct ProgressHandle {
    inner: Arc<Inner>,
}

struct Inner {
    sink: ToolEventSink,
    call_id: String,
    tool: String,
    started: Instant,
    last_progress: Mutex<Instant>,
    silenced: AtomicBool,
    gate: Mutex<Gate>,
}

/// The token bucket and the event waiting for a token.
struct Gate {
    tokens: f64,
    refilled: Instant,
    pending: Option<ToolEvent>,
    /// A flush is scheduled for the pending event.
    armed: bool,
}

impl Gate {
    fn refill(&mut self, now: Instant) {
        let gained = now.duration_since(self.refilled).as_secs_f64() * PROGRESS_PER_SECOND;
        self.tokens = (self.tokens + gained).min(PROGRESS_BURST);
        self.refilled = now;
    }

    /// When the next token is there.
    fn next_token_at(&self) -> Instant {
        let missing = (1.0 - self.tokens).max(0.0);
        self.refilled + Duration::from_secs_f64(missing / PROGRESS_PER_SECOND)
    }
}

impl ProgressHandle {
    pub fn new(sink: ToolEventSink, call_id: &str, tool: &str) -> Self {
        let now = Instant::now();
        ProgressHandle {
            inner: Arc::new(Inner {
                sink,
                call_id: call_id.to_string(),
                tool: tool.to_string(),
                started: now,
                last_progress: Mutex::new(now),
                silenced: AtomicBool::new(false),
                gate: Mutex::new(Gate {
                    tokens: PROGRESS_BURST,
                    refilled: now,
                    pending: None,
                    armed: false,
                }),
            }),
        }
    }

    pub fn elapsed_s(&self) -> f64 {
        self.inner.started.elapsed().as_secs_f64()
    }

    /// Seconds since the tool last reported progress (or started), counting
    /// reports that were coalesced away.
    pub fn since_progress_s(&self) -> f64 {
        self.inner
            .last_progress
            .lock()
            .map(|t| t.elapsed().as_secs_f64())
            .unwrap_or_else(|_| self.elapsed_s())
    }

    /// After a timeout the call is abandoned; late progress must not appear.
    pub fn silence(&self) {
        self.inner.silenced.store(true, Ordering::SeqCst);
        if let Ok(mut g) = self.inner.gate.lock() {
            g.pending = None;
        }
    }

    pub fn is_silenced(&self) -> bool {
        self.inner.silenced.load(Ordering::SeqCst)
    }

    pub fn emit(&self, stage: &str, current: Option<f64>, total: Option<f64>, message: &str) {
        if self.is_silenced() {
            return;
        }
        if let Ok(mut t) = self.inner.last_progress.lock() {
            *t = Instant::now();
        }
        let event = ToolEvent::ToolProgress {
            call_id: self.inner.call_id.clone(),
            tool: self.inner.tool.clone(),
            stage: stage.to_string(),
            current,
            total,
            message: message.to_string(),
            elapsed_s: round2(self.elapsed_s()),
        };
        let Ok(mut gate) = self.inner.gate.lock() else {
            return;
        };
        let now = Instant::now();
        gate.refill(now);
        if gate.pending.is_none() && gate.tokens >= 1.0 - TOKEN_SLACK {
            gate.tokens -= 1.0;
            // Sent under the lock, so a flush cannot overtake it.
            (self.inner.sink)(event);
            return;
        }
        gate.pending = Some(event);
        if !gate.armed {
            gate.armed = self.schedule_flush(gate.next_token_at());
        }
    }

    /// Sends the pending event at `at` from a timer task, which holds the
    /// handle weakly (a finished call's handle is not kept alive). Without
    /// a runtime nothing is scheduled: [`ProgressHandle::finish`] sends it.
    fn schedule_flush(&self, at: Instant) -> bool {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        rt.spawn(async move {
            tokio::time::sleep_until(at).await;
            if let Some(inner) = weak.upgrade() {
                ProgressHandle { inner }.flush(false);
            }
        });
        true
    }

    /// Sends the pending event, if any; `force` spends a token it may not
    /// have (the call's end). Schedules the next flush when the event must
    /// still wait.
    fn flush(&self, force: bool) {
        let Ok(mut gate) = self.inner.gate.lock() else {
            return;
        };
        gate.armed = false;
        if gate.pending.is_none() || self.is_silenced() {
            gate.pending = None;
            return;
        }
        let now = Instant::now();
        gate.refill(now);
        if !force && gate.tokens < 1.0 - TOKEN_SLACK {
            gate.armed = self.schedule_flush(gate.next_token_at());
            return;
        }
        gate.tokens -= 1.0;
        if let Some(event) = gate.pending.take() {
            (self.inner.sink)(event);
        }
    }

    /// The call is over: its latest progress, if still waiting, is sent
    /// now, and nothing after it.
    pub fn finish(&self) {
        self.flush(true);
        self.inner.silenced.store(true, Ordering::SeqCst);
    }

    /// Runs `fut` with this handle installed for [`emit`].
    pub async fn scope<F: Future>(self, fut: F) -> F::Output {
        CURRENT.scope(self, fut).await
    }
}

/// Reports progress of the tool call running on this task; no-op elsewhere.
pub fn emit(stage: &str, current: Option<f64>, total: Option<f64>, message: &str) {
    let _ = CURRENT.try_with(|h| h.emit(stage, current, total, message));
}

/// A sandbox progress sink that emits into the current call's stream: the
/// runner is awaited inside the call, where the handle is in scope.
pub fn sandbox_sink() -> crate::sandbox::Progress {
    crate::sandbox::Progress(std::sync::Arc::new(|stage, count, message| {
        emit(stage, count, None, message)
    }))
}

pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn emit_routes_to_the_scoped_handle_only() {
        let seen: Arc<Mutex<Vec<ToolEvent>>> = Arc::default();
        let s = seen.clone();
        let sink: ToolEventSink = Arc::new(move |e| s.lock().unwrap().push(e));
        emit("outside", None, None, "ignored");
        let h = ProgressHandle::new(sink, "c1", "t");
        h.clone()
            .scope(async {
                emit("simulate", Some(1.0), Some(4.0), "bar 1 of 4");
            })
            .await;
        h.silence();
        h.emit("late", None, None, "dropped");
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        match &seen[0] {
            ToolEvent::ToolProgress {
                call_id,
                stage,
                total,
                ..
            } => {
                assert_eq!(call_id, "c1");
                assert_eq!(stage, "simulate");
                assert_eq!(*total, Some(4.0));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    fn recorder() -> (ToolEventSink, Arc<Mutex<Vec<ToolEvent>>>) {
        let seen: Arc<Mutex<Vec<ToolEvent>>> = Arc::default();
        let s = seen.clone();
        (Arc::new(move |e| s.lock().unwrap().push(e)), seen)
    }

    fn messages(seen: &Mutex<Vec<ToolEvent>>) -> Vec<String> {
        seen.lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                ToolEvent::ToolProgress { message, .. } => Some(message.clone()),
                _ => None,
            })
            .collect()
    }

    /// A tool reporting in a loop: the burst passes, then a few a second,
    /// each the latest at its time, and the last one comes with `finish`.
    #[tokio::test(start_paused = true)]
    async fn a_flood_is_coalesced_and_the_last_report_survives() {
        let (sink, seen) = recorder();
        let h = ProgressHandle::new(sink, "c1", "t");
        // 10 000 reports over 10 s, one a millisecond.
        for i in 0..10_000u32 {
            h.emit("loop", Some(f64::from(i)), None, &format!("report {i}"));
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        h.finish();
        let got = messages(&seen);
        let most = (PROGRESS_BURST + 10.0 * PROGRESS_PER_SECOND) as usize + 2;
        assert!(got.len() <= most, "{} events: {got:?}", got.len());
        assert!(got.len() >= 40, "{} events", got.len());
        assert_eq!(got.first().map(String::as_str), Some("report 0"));
        assert_eq!(got.last().map(String::as_str), Some("report 9999"));
        // In order, none twice.
        let numbers: Vec<u32> = got
            .iter()
            .map(|m| m.trim_start_matches("report ").parse().unwrap())
            .collect();
        assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
        // Nothing after the end, and no timer sends a stale one later.
        h.emit("late", None, None, "after the end");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(messages(&seen).len(), got.len());
    }

    /// A few reports (a backtest's stages) pass as they come.
    #[tokio::test(start_paused = true)]
    async fn a_few_reports_pass_unchanged() {
        let (sink, seen) = recorder();
        let h = ProgressHandle::new(sink, "c1", "t");
        for stage in [
            "validate",
            "fetch",
            "simulate",
            "running",
            "artifacts",
            "finalize",
        ] {
            h.emit(stage, None, None, stage);
        }
        assert_eq!(messages(&seen).len(), 6);
        // A waiting report goes out on its own once a token is back.
        for i in 0..5 {
            h.emit("more", None, None, &format!("more {i}"));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(messages(&seen).last().map(String::as_str), Some("more 4"));
    }
}
