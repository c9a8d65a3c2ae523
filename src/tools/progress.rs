//! Progress reporting from inside a tool without changing its signature
//! (docs §2.9): the scheduler installs a task-local handle around each call,
//! and [`emit`] finds it. Outside a tool call it is a silent no-op. Unlike the
//! original, `elapsed_s` is filled in (docs §12.18).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use super::events::{ToolEvent, ToolEventSink};

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
            }),
        }
    }

    pub fn elapsed_s(&self) -> f64 {
        self.inner.started.elapsed().as_secs_f64()
    }

    /// Seconds since the tool last reported progress (or started).
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
        (self.inner.sink)(ToolEvent::ToolProgress {
            call_id: self.inner.call_id.clone(),
            tool: self.inner.tool.clone(),
            stage: stage.to_string(),
            current,
            total,
            message: message.to_string(),
            elapsed_s: round2(self.elapsed_s()),
        });
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
}
