//! Notifications from background work, drained at the top of each iteration
//! (docs §1.3 step 3). One queue per session: the original's queue is a
//! process-wide singleton, so one session's task could be reported into
//! another session's conversation (docs §12.22).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackgroundNotice {
    pub task_id: String,
    pub status: String,
    pub result: String,
}

#[derive(Clone, Debug, Default)]
pub struct BackgroundQueue {
    inner: Arc<Mutex<VecDeque<BackgroundNotice>>>,
}

impl BackgroundQueue {
    pub fn push(&self, notice: BackgroundNotice) {
        if let Ok(mut q) = self.inner.lock() {
            q.push_back(notice);
        }
    }

    pub fn drain(&self) -> Vec<BackgroundNotice> {
        self.inner
            .lock()
            .map(|mut q| q.drain(..).collect())
            .unwrap_or_default()
    }

    /// The user message that reports finished tasks: one `[bg:<id>] <status>:
    /// <result>` line each (result cut to 500 chars), then an inline
    /// instruction to use them.
    pub fn render(notices: &[BackgroundNotice]) -> String {
        let mut out = String::from("<background-results>\n");
        for n in notices {
            let result: String = n.result.chars().take(500).collect();
            out.push_str(&format!("[bg:{}] {}: {}\n", n.task_id, n.status, result));
        }
        out.push_str("</background-results>\n\n<system>The background tasks above have finished. Use their results to continue.</system>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_are_independent_per_session() {
        let a = BackgroundQueue::default();
        let b = BackgroundQueue::default();
        a.push(BackgroundNotice {
            task_id: "1a2b3c4d".into(),
            status: "completed".into(),
            result: "x".repeat(900),
        });
        assert!(b.drain().is_empty());
        let got = a.drain();
        assert_eq!(got.len(), 1);
        assert!(a.drain().is_empty());
        let text = BackgroundQueue::render(&got);
        assert!(text.starts_with("<background-results>\n[bg:1a2b3c4d] completed: "));
        assert!(!text.contains(&"x".repeat(501)));
    }
}
