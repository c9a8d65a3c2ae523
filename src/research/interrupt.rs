//! A cheap stop signal for long computations (docs §2.4): a shared flag the
//! caller sets when a call's deadline or cancel fires, which lattices,
//! fits, optimizers and resampling loops read at a bounded interval and
//! answer [`Interrupted`]. A plain atomic: the research room knows no
//! runtime; the tools room sets it from a call's cancel token.

//!
//! A computation called deep inside a tool (a GARCH fit, a PBO, an
//! optimizer) reads the interrupt of the thread it runs on
//! ([`Interrupt::within`], [`checkpoint`]), so no signature between the tool
//! and the loop has to carry it.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

thread_local! {
    static CURRENT: RefCell<Option<Interrupt>> = const { RefCell::new(None) };
}

/// `Err` once the interrupt of this thread's computation
/// ([`Interrupt::within`]) has fired; `Ok` outside one. As cheap as a
/// thread-local read and an atomic load: call it once an iteration.
pub fn checkpoint() -> Result<(), Interrupted> {
    CURRENT.with(|c| c.borrow().as_ref().map_or(Ok(()), Interrupt::check))
}

/// The stop signal; clones share one flag.
#[derive(Clone, Debug, Default)]
pub struct Interrupt(Arc<AtomicBool>);

/// A computation stopped by its [`Interrupt`] before it finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the computation was interrupted (its deadline passed or the call was cancelled)")]
pub struct Interrupted;

impl Interrupt {
    /// A signal nobody has fired yet.
    pub fn new() -> Self {
        Interrupt::default()
    }

    /// Asks every computation watching this signal to stop.
    pub fn interrupt(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_interrupted(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `Err` once fired: `interrupt.check()?` in a loop.
    pub fn check(&self) -> Result<(), Interrupted> {
        if self.is_interrupted() {
            Err(Interrupted)
        } else {
            Ok(())
        }
    }

    /// Runs `f` with this as the thread's interrupt ([`checkpoint`]); the
    /// previous one is back afterwards, even if `f` panics.
    pub fn within<T>(&self, f: impl FnOnce() -> T) -> T {
        struct Restore(Option<Interrupt>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let previous = self.0.take();
                CURRENT.with(|c| *c.borrow_mut() = previous);
            }
        }
        let previous = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        let _restore = Restore(previous);
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag() {
        let a = Interrupt::new();
        let b = a.clone();
        assert_eq!(b.check(), Ok(()));
        a.interrupt();
        assert_eq!(b.check(), Err(Interrupted));
    }

    #[test]
    fn a_checkpoint_reads_the_thread_s_interrupt() {
        let a = Interrupt::new();
        assert_eq!(checkpoint(), Ok(()), "none outside");
        a.within(|| {
            assert_eq!(checkpoint(), Ok(()));
            a.interrupt();
            assert_eq!(checkpoint(), Err(Interrupted));
        });
        assert_eq!(checkpoint(), Ok(()), "restored");
    }
}
