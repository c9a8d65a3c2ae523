//! The stall watchdog (docs §1.7): if neither a model reply nor a tool result
//! arrives for the stall timeout, warn once; if it is still stalled at the
//! next check, fail the run and cancel it. Heartbeats are not progress.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::events::{AgentEvent, EventSink};

/// The run's last forward progress, shared with the watchdog.
#[derive(Clone, Debug)]
pub struct Activity {
    inner: Arc<Mutex<ActivityState>>,
}

#[derive(Debug)]
struct ActivityState {
    last: Instant,
    stall_reason: Option<String>,
}

impl Activity {
    pub fn new() -> Self {
        Activity {
            inner: Arc::new(Mutex::new(ActivityState {
                last: Instant::now(),
                stall_reason: None,
            })),
        }
    }

    pub fn mark(&self) {
        if let Ok(mut s) = self.inner.lock() {
            s.last = Instant::now();
        }
    }

    fn idle(&self) -> Duration {
        self.inner
            .lock()
            .map(|s| s.last.elapsed())
            .unwrap_or_default()
    }

    pub fn stall_reason(&self) -> Option<String> {
        self.inner.lock().ok().and_then(|s| s.stall_reason.clone())
    }

    fn set_stalled(&self, reason: String) {
        if let Ok(mut s) = self.inner.lock() {
            s.stall_reason = Some(reason);
        }
    }
}

impl Default for Activity {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs until `done` fires. Each run has its own `done` token, so an old
/// run's watchdog can never fail a later run.
pub async fn watch(
    timeout: Duration,
    activity: Activity,
    events: EventSink,
    cancel_run: CancellationToken,
    done: CancellationToken,
) {
    let period = Duration::from_secs_f64((timeout.as_secs_f64() / 4.0).clamp(5.0, 30.0))
        .min(timeout.max(Duration::from_millis(100)));
    let mut warned = false;
    loop {
        tokio::select! {
            _ = done.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        let idle = activity.idle();
        if idle <= timeout {
            warned = false;
            continue;
        }
        if !warned {
            warned = true;
            events.emit(AgentEvent::StallWarning {
                idle_s: (idle.as_secs_f64() * 10.0).round() / 10.0,
                timeout_s: timeout.as_secs_f64(),
            });
            continue;
        }
        let reason = format!(
            "run stalled: no model reply or tool result for {}s (stall watchdog, limit {}s)",
            idle.as_secs(),
            timeout.as_secs()
        );
        activity.set_stalled(reason.clone());
        events.emit(AgentEvent::Stalled { reason });
        cancel_run.cancel();
        return;
    }
}
