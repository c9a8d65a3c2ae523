//! The panic boundary every tool call runs behind (docs §2.4): a panic in a
//! tool, on its task or on a blocking thread it started, becomes an
//! `internal_error` result naming the tool instead of ending the run or
//! the server.
//!
//! While a guarded poll or a guarded blocking closure runs, a thread-local
//! depth is raised, so a panic hook can tell a caught panic from one that
//! ends the process ([`inside`]): the workstation's hook leaves the
//! terminal alone for a caught one.

use std::any::Any;
use std::cell::Cell;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::ToolError;

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Whether the current thread is running guarded code (a tool's poll or a
/// blocking closure started by [`blocking`]): a panic here is caught.
pub fn inside() -> bool {
    DEPTH.with(|d| d.get() > 0)
}

/// Runs `f` with the depth raised, catching a panic.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    struct Lower;
    impl Drop for Lower {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        }
    }
    DEPTH.with(|d| d.set(d.get().saturating_add(1)));
    let _lower = Lower;
    // The tool's state is dropped right after a panic, never observed again.
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| Panicked::from_payload(p.as_ref()))
}

/// A panic that was caught, with its message when it had one.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct Panicked {
    pub message: String,
}

impl Panicked {
    fn from_payload(payload: &(dyn Any + Send)) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string());
        Panicked { message }
    }

    /// The call's error: `internal_error`, naming the tool and the panic.
    pub fn into_tool_error(self, tool: &str) -> ToolError {
        ToolError::failed(
            "internal_error",
            format!(
                "internal error: the tool '{tool}' failed unexpectedly ({}); this is a bug in vibedesk, not in the request — try other arguments or another tool",
                self.message
            ),
        )
    }
}

/// A future whose polls are guarded: a panic while polling ends it with
/// [`Panicked`] (and it is never polled again).
pub struct Guarded<F> {
    inner: Option<F>,
}

impl<F> Guarded<F> {
    pub fn new(inner: F) -> Self {
        Guarded { inner: Some(inner) }
    }
}

impl<F: Future + Unpin> Future for Guarded<F> {
    type Output = Result<F::Output, Panicked>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(Err(Panicked {
                message: "polled after a panic".into(),
            }));
        };
        match guarded(|| Pin::new(inner).poll(cx)) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(p) => {
                self.inner = None;
                Poll::Ready(Err(p))
            }
        }
    }
}

/// Runs CPU-bound work on the blocking pool so the caller's deadline can
/// fire while it computes (docs §2.4); a panic in it is [`Panicked`], not
/// a re-panic. Work that runs long must also watch an
/// [`crate::research::Interrupt`] from [`interrupt_for`]: dropping the
/// awaiting future does not stop a blocking thread.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Panicked> {
    match tokio::task::spawn_blocking(move || guarded(f)).await {
        Ok(r) => r,
        Err(e) => Err(Panicked {
            message: format!("the worker thread failed: {e}"),
        }),
    }
}

/// [`blocking`] for a tool: a panic is the tool's `internal_error`.
pub async fn compute<T: Send + 'static>(
    tool: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ToolError> {
    blocking(f).await.map_err(|p| p.into_tool_error(tool))
}

tokio::task_local! {
    /// The deadline of the read-only call running on this task.
    static DEADLINE: Option<tokio::time::Instant>;
}

/// Runs `fut` (a call) with `deadline` readable by [`remaining`].
pub async fn with_deadline<F: Future>(deadline: Option<tokio::time::Instant>, fut: F) -> F::Output {
    DEADLINE.scope(deadline, fut).await
}

/// The time left before this call's deadline; `None` without one (a write
/// tool, whose deadline only warns, or outside a call).
pub fn remaining() -> Option<std::time::Duration> {
    DEADLINE
        .try_with(|d| d.map(|d| d.saturating_duration_since(tokio::time::Instant::now())))
        .ok()
        .flatten()
}

/// Refuses work estimated at `estimate` when it clearly cannot finish
/// before the call's deadline (more than twice the time left: the estimate
/// is a machine's average), saying the estimate (docs §2.4).
pub fn refuse_past_deadline(
    tool: &str,
    what: &str,
    estimate: std::time::Duration,
    fix: &str,
) -> Result<(), ToolError> {
    match remaining() {
        Some(left) if estimate > left.saturating_mul(2) => Err(ToolError::failed(
            "would_time_out",
            format!(
                "'{tool}' would not finish before its timeout: {what} takes about {:.0} s here, and {:.1} s are left; {fix}",
                estimate.as_secs_f64(),
                left.as_secs_f64()
            ),
        )),
        _ => Ok(()),
    }
}

/// [`compute`] for research work that watches its thread's interrupt
/// ([`crate::research::checkpoint`]): the interrupt fires with `cancel`
/// (docs §2.4), so the work stops soon after a deadline.
pub async fn compute_interruptible<T: Send + 'static>(
    tool: &str,
    cancel: &tokio_util::sync::CancellationToken,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ToolError> {
    let (interrupt, _stop) = interrupt_for(cancel);
    compute(tool, move || interrupt.within(f)).await
}

/// An interrupt for research code that fires when `cancel` does (a read-only
/// call's deadline, the run's cancel; docs §2.4). The watcher task ends
/// with the token or when the returned guard is dropped.
pub fn interrupt_for(
    cancel: &tokio_util::sync::CancellationToken,
) -> (crate::research::Interrupt, tokio_util::sync::DropGuard) {
    let interrupt = crate::research::Interrupt::new();
    let done = tokio_util::sync::CancellationToken::new();
    let (fire, cancel, stop) = (interrupt.clone(), cancel.clone(), done.clone());
    tokio::spawn(async move {
        tokio::select! {
            // Cancel first: a timed-out call's token fires just before its
            // future (and with it the guard) is dropped.
            biased;
            _ = cancel.cancelled() => fire.interrupt(),
            _ = stop.cancelled() => {}
        }
    });
    (interrupt, done.drop_guard())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_future_is_an_error_with_its_message() {
        let fut: Pin<Box<dyn Future<Output = u32> + Send>> = Box::pin(async {
            if inside() {
                panic!("boom {}", 7);
            }
            1
        });
        let r = Guarded::new(fut).await;
        assert_eq!(r.unwrap_err().message, "boom 7");
        assert!(!inside(), "the depth is lowered after a panic");
    }

    #[tokio::test]
    async fn a_panicking_blocking_closure_is_an_error() {
        let r: Result<u32, _> = blocking(|| {
            assert!(inside());
            panic!("deep")
        })
        .await;
        assert_eq!(r.unwrap_err().message, "deep");
        let e = compute("t", || -> u32 { panic!("x") }).await.unwrap_err();
        assert_eq!(e.code(), "internal_error");
        assert!(e.to_string().contains("'t'"), "{e}");
        assert_eq!(blocking(|| 3).await.unwrap(), 3);
    }

    /// Blocking work sees its call's cancel token through the thread's
    /// interrupt and stops, the awaiting future answering at once.
    #[tokio::test]
    async fn blocking_work_observes_the_call_s_cancel() {
        let cancel = tokio_util::sync::CancellationToken::new();
        let c2 = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            c2.cancel();
        });
        let started = std::time::Instant::now();
        let r = compute_interruptible("t", &cancel, || {
            loop {
                if let Err(e) = crate::research::checkpoint() {
                    return e;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
        .await
        .unwrap();
        assert_eq!(r, crate::research::Interrupted);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
