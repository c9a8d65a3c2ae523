//! A cheap stop signal for long computations (docs §2.4): a shared flag the
//! caller sets when a call's deadline or cancel fires, which lattices,
//! fits, optimizers and resampling loops read at a bounded interval and
//! answer [`Interrupted`]. A plain atomic: the research room knows no
//! runtime; the tools room sets it from a call's cancel token.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
}
