//! The daemon's time (docs §21.2): the system clock in use, a manual clock
//! in tests, so a week of fires runs in milliseconds and the daemon's
//! wake-ups can be counted rather than timed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};

pub type Sleep<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
    /// Resolves at `deadline` (at once when it has passed). The daemon
    /// races it against its stop and change signals.
    fn sleep_until(&self, deadline: DateTime<Utc>) -> Sleep<'_>;
    /// How many sleeps have ended by reaching their deadline.
    fn wakeups(&self) -> u64;
}

/// Wall time; sleeps are tokio timers.
#[derive(Debug, Default)]
pub struct SystemClock {
    wakeups: AtomicU64,
}

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn sleep_until(&self, deadline: DateTime<Utc>) -> Sleep<'_> {
        let wait = (deadline - Utc::now()).to_std().unwrap_or_default();
        Box::pin(async move {
            tokio::time::sleep(wait).await;
            self.wakeups.fetch_add(1, Ordering::Relaxed);
        })
    }

    fn wakeups(&self) -> u64 {
        self.wakeups.load(Ordering::Relaxed)
    }
}

/// A clock that moves only when told, or when a sleep jumps it to its
/// deadline (a sleep never waits).
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
    wakeups: AtomicU64,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        ManualClock {
            now: Mutex::new(start),
            wakeups: AtomicU64::new(0),
        }
    }

    /// Moves the clock to `t` (never backwards).
    pub fn set(&self, t: DateTime<Utc>) {
        let mut now = self.now.lock().unwrap_or_else(|p| p.into_inner());
        if t > *now {
            *now = t;
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sleep_until(&self, deadline: DateTime<Utc>) -> Sleep<'_> {
        self.set(deadline);
        self.wakeups.fetch_add(1, Ordering::Relaxed);
        Box::pin(std::future::ready(()))
    }

    fn wakeups(&self) -> u64 {
        self.wakeups.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_manual_sleep_jumps_and_counts() {
        let t0 = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let c = ManualClock::new(t0);
        c.sleep_until(t0 + chrono::Duration::hours(5)).await;
        assert_eq!(c.now(), t0 + chrono::Duration::hours(5));
        c.set(t0);
        assert_eq!(c.now(), t0 + chrono::Duration::hours(5), "never backwards");
        assert_eq!(c.wakeups(), 1);
    }

    #[tokio::test]
    async fn a_system_sleep_past_its_deadline_ends_at_once() {
        let c = SystemClock::default();
        let before = std::time::Instant::now();
        c.sleep_until(Utc::now() - chrono::Duration::seconds(5))
            .await;
        assert!(before.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(c.wakeups(), 1);
    }
}
