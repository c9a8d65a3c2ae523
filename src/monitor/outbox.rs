//! Delivering the outbox (docs §21.4). A worker claims due rows under a
//! lease (its owner, an expiry), sends them one at a time, and marks each
//! sent; a failure goes back with exponential backoff and turns `dead`
//! after the configured tries. A worker killed mid-send leaves its rows
//! claimed until the lease expires, when any worker takes them again: so a
//! delivery is never lost, and sent twice at most once per crash (the one
//! in flight), which its idempotency key lets the receiver drop.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::channels::{Channel, Outgoing, SendError, Senders};
use super::clock::Clock;
use super::settings::MonitorSettings;
use super::store::{OutboxRow, Store, StoreError};

/// Rows claimed per transaction: small, so a lease covers its sends.
const CLAIM_BATCH: u32 = 8;

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassSummary {
    pub sent: usize,
    pub retried: usize,
    pub dead: usize,
}

/// This process as a lease owner: pid and start time, unique per process.
pub fn owner_id() -> String {
    let (pid, start) = crate::process::current_process_identity();
    format!("{pid}:{}", start.unwrap_or(0))
}

pub struct Worker {
    store: Store,
    senders: Senders,
    settings: MonitorSettings,
    owner: String,
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Worker {
    pub fn new(store: Store, settings: MonitorSettings) -> Result<Worker, SendError> {
        Ok(Worker {
            store,
            senders: Senders::new(settings.clone())?,
            settings,
            owner: owner_id(),
        })
    }

    /// Claims and sends what is due, until nothing is or `stop` fires;
    /// rows claimed and not yet sent when it stops are given back.
    pub async fn pass(
        &mut self,
        clock: &dyn Clock,
        stop: &CancellationToken,
    ) -> Result<PassSummary, StoreError> {
        let mut summary = PassSummary::default();
        loop {
            let now = clock.now().timestamp_millis();
            let expiry = now.saturating_add(ms(self.settings.lease));
            let rows = self
                .store
                .claim_due(&self.owner, now, expiry, CLAIM_BATCH)?;
            if rows.is_empty() {
                return Ok(summary);
            }
            for row in rows {
                if stop.is_cancelled() {
                    self.store.release(&self.owner)?;
                    return Ok(summary);
                }
                self.deliver(clock, &row, &mut summary).await?;
            }
        }
    }

    async fn deliver(
        &mut self,
        clock: &dyn Clock,
        row: &OutboxRow,
        summary: &mut PassSummary,
    ) -> Result<(), StoreError> {
        let result = match row.channel.parse::<Channel>() {
            Ok(channel) => {
                let parts = Parts::of(&row.payload);
                let out = Outgoing {
                    key: &row.idempotency_key,
                    body: &row.payload,
                    subject: &parts.subject,
                    text: &parts.text,
                };
                self.senders.send(&channel, &out).await
            }
            Err(e) => Err(SendError::Channel(e)),
        };
        let now = clock.now().timestamp_millis();
        match result {
            Ok(()) => {
                self.store.mark_sent(row.id, &self.owner, now)?;
                summary.sent = summary.sent.saturating_add(1);
            }
            Err(e) => {
                let tries = u32::try_from(row.tries).unwrap_or(u32::MAX);
                let dead = tries >= self.settings.max_tries;
                let next = now.saturating_add(ms(self.settings.backoff(tries)));
                tracing::warn!(
                    delivery = row.id,
                    channel = %row.channel,
                    tries,
                    dead,
                    "monitor delivery failed: {e}"
                );
                self.store
                    .mark_failed(row.id, &self.owner, &e.to_string(), next, dead)?;
                if dead {
                    summary.dead = summary.dead.saturating_add(1);
                } else {
                    summary.retried = summary.retried.saturating_add(1);
                }
            }
        }
        Ok(())
    }

    /// Delivers until `stop`: a pass, then a sleep until the outbox's next
    /// due time (a retry or a lease's expiry) or until `wake` says a fire
    /// queued more. Never a polling tick.
    pub async fn run(
        mut self,
        clock: &dyn Clock,
        wake: &Notify,
        stop: &CancellationToken,
    ) -> Result<(), StoreError> {
        loop {
            if stop.is_cancelled() {
                return self.store.release(&self.owner).map(|_| ());
            }
            let notified = wake.notified();
            self.pass(clock, stop).await?;
            let next = self
                .store
                .next_outbox_ms()?
                .and_then(DateTime::<Utc>::from_timestamp_millis);
            match next {
                Some(t) => tokio::select! {
                    () = clock.sleep_until(t) => {}
                    () = notified => {}
                    () = stop.cancelled() => {}
                },
                None => tokio::select! {
                    () = notified => {}
                    () = stop.cancelled() => {}
                },
            }
        }
    }
}

/// The subject and text an email carries, from the delivery's JSON.
struct Parts {
    subject: String,
    text: String,
}

impl Parts {
    fn of(payload: &str) -> Parts {
        let v: serde_json::Value = serde_json::from_str(payload).unwrap_or_default();
        let field = |k: &str| {
            v.get(k)
                .and_then(|x| x.as_str())
                .unwrap_or_default()
                .to_string()
        };
        Parts {
            subject: field("subject"),
            text: field("text"),
        }
    }
}
