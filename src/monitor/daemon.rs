//! `vibedesk daemon` (docs §21.2): one process per machine (an exclusive
//! lock file) that sleeps until the next fire over all monitors, runs what
//! is due, records each result with its deliveries in one transaction, and
//! delivers the outbox beside it. A slot missed while no daemon ran is run
//! once on start, not once per slot, and its fire says so. SIGTERM stops
//! new fires, gives a running one its grace and marks it if it outlives
//! it; SIGHUP (sent by `monitor add/pause/resume/remove`) re-reads the
//! monitors at once.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use nix::fcntl::{Flock, FlockArg};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::channels::{Channel, hex};
use super::clock::Clock;
use super::def::{Monitor, Notify as NotifyWhen};
use super::runner::{RunOutput, Runner, team_verdict_tail};
use super::store::{FireResult, NewDelivery, Store, StoreError, Trigger};
use super::verdict::{self, Verdict};

/// A slot run this long after its time still counts as on time.
const ON_TIME_MS: i64 = 60_000;
/// Slots counted when a monitor was missed for long (every minute for two
/// months); beyond, the note says "at least".
const MAX_SCAN: u64 = 100_000;
/// The lock file's name in the state dir.
pub const LOCK_FILE: &str = "monitor-daemon.lock";

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("another daemon runs already (pid {0}); one per machine")]
    Locked(String),
    #[error("lock file {path}: {source}")]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The held lock: only its holder runs fires.
pub struct DaemonLock {
    _file: Flock<File>,
}

impl DaemonLock {
    /// Takes `<state>/monitor-daemon.lock` without waiting, and writes this
    /// process's identity into it for `monitor` commands to signal.
    pub fn acquire(state_dir: &Path) -> Result<DaemonLock, DaemonError> {
        let path = state_dir.join(LOCK_FILE);
        let io = |source| DaemonError::Lock {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(state_dir).map_err(io)?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(l) => l,
            Err((mut file, _)) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                return Err(DaemonError::Locked(
                    holder.trim().replace(' ', ", started "),
                ));
            }
        };
        let (pid, start) = crate::process::current_process_identity();
        lock.set_len(0).map_err(io)?;
        lock.rewind().map_err(io)?;
        writeln!(lock, "{pid} {}", start.unwrap_or(0)).map_err(io)?;
        Ok(DaemonLock { _file: lock })
    }
}

/// Tells a running daemon its monitors changed (SIGHUP), if one runs;
/// the pid is checked with its start time, so a recycled one is spared.
pub fn signal_change(state_dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(state_dir.join(LOCK_FILE)) else {
        return false;
    };
    let mut parts = text.split_whitespace();
    let pid: Option<u32> = parts.next().and_then(|p| p.parse().ok());
    let start: Option<u64> = parts
        .next()
        .and_then(|s| s.parse().ok())
        .filter(|s| *s != 0);
    let Some(pid) = pid.filter(|p| crate::process::process_is_alive(*p, start)) else {
        return false;
    };
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), nix::sys::signal::SIGHUP).is_ok()
}

/// A monitor's next fire: the latest slot at or before `now` after its
/// anchor, with how many slots that covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Due {
    pub slot: DateTime<Utc>,
    pub first: DateTime<Utc>,
    pub slots: u64,
}

impl Due {
    /// On time, or a catch-up of slots missed while no daemon ran.
    pub fn trigger(&self, now: DateTime<Utc>) -> (Trigger, Option<String>) {
        let late = (now - self.slot).num_milliseconds();
        if self.slots == 1 && late <= ON_TIME_MS {
            return (Trigger::Schedule, None);
        }
        let count = if self.slots >= MAX_SCAN {
            format!("at least {}", self.slots)
        } else {
            self.slots.to_string()
        };
        let span = if self.slots == 1 {
            format!("the slot of {}", self.slot.to_rfc3339())
        } else {
            format!(
                "{count} slots from {} to {}",
                self.first.to_rfc3339(),
                self.slot.to_rfc3339()
            )
        };
        (
            Trigger::CatchUp,
            Some(format!(
                "missed {span} while no daemon ran; ran once for the latest"
            )),
        )
    }
}

/// Which slot `m` is due for at `now`, slots counted after `anchor`.
pub fn due(m: &Monitor, anchor: DateTime<Utc>, now: DateTime<Utc>) -> Option<Due> {
    let first = m.next_after(anchor).filter(|s| *s <= now)?;
    let mut slot = first;
    let mut slots = 1_u64;
    while slots < MAX_SCAN {
        match m.next_after(slot) {
            Some(next) if next <= now => {
                slot = next;
                slots = slots.saturating_add(1);
            }
            _ => break,
        }
    }
    Some(Due { slot, first, slots })
}

/// Where slots of `m` count from: its last scheduled fire, or its
/// creation (or last resume).
pub fn anchor(store: &Store, m: &Monitor) -> Result<DateTime<Utc>, StoreError> {
    let last = store
        .last_slot_ms(&m.name)?
        .and_then(DateTime::<Utc>::from_timestamp_millis);
    Ok(last.map_or(m.since, |l| l.max(m.since)))
}

/// The scheduler's state; [`Daemon::run`] is its loop.
pub struct Daemon<'a> {
    pub store: Store,
    pub clock: &'a dyn Clock,
    pub runner: &'a dyn Runner,
    pub stop: CancellationToken,
    /// Notified when the monitors changed (SIGHUP).
    pub changed: Arc<Notify>,
    /// Notified when a fire queued deliveries.
    pub queued: Arc<Notify>,
    /// Where each fire is announced (the daemon's stderr).
    pub say: &'a (dyn Fn(&str) + Send + Sync),
    /// Stop once the next fire would be after this (tests; `--once`).
    pub until: Option<DateTime<Utc>>,
}

impl Daemon<'_> {
    /// Runs due fires and sleeps until the next, until stopped.
    pub async fn run(&mut self) -> Result<(), DaemonError> {
        let now = self.clock.now().timestamp_millis();
        let stale = self
            .store
            .interrupt_unfinished(now, "the daemon stopped during the run")?;
        if stale > 0 {
            (self.say)(&format!(
                "marked {stale} fire(s) left running by a stopped daemon as interrupted"
            ));
        }
        let mut told_bad = std::collections::BTreeSet::new();
        loop {
            if self.stop.is_cancelled() {
                return Ok(());
            }
            // Registered before reading, so a change while we read wakes us.
            let signal = self.changed.clone();
            let changed = signal.notified();
            let monitors = self.monitors(&mut told_bad)?;
            let now = self.clock.now();
            let mut next: Option<DateTime<Utc>> = None;
            let mut ran = false;
            for m in &monitors {
                if self.stop.is_cancelled() {
                    return Ok(());
                }
                let anchor = anchor(&self.store, m)?;
                match due(m, anchor, now) {
                    Some(d) => {
                        let (trigger, note) = d.trigger(self.clock.now());
                        self.fire(m, d.slot, trigger, note).await?;
                        ran = true;
                    }
                    None => {
                        if let Some(t) = m.next_after(anchor) {
                            next = Some(next.map_or(t, |n| n.min(t)));
                        }
                    }
                }
            }
            if ran {
                continue;
            }
            if self.until.is_some_and(|u| next.is_none_or(|n| n > u)) {
                return Ok(());
            }
            match next {
                Some(t) => tokio::select! {
                    () = self.clock.sleep_until(t) => {}
                    () = changed => {}
                    () = self.stop.cancelled() => {}
                },
                None => tokio::select! {
                    () = changed => {}
                    () = self.stop.cancelled() => {}
                },
            }
        }
    }

    /// The monitors that run: unpaused and readable (an unreadable one is
    /// reported once).
    fn monitors(
        &self,
        told: &mut std::collections::BTreeSet<String>,
    ) -> Result<Vec<Monitor>, DaemonError> {
        let mut out = Vec::new();
        for row in self.store.monitors()? {
            match Monitor::from_row(&row) {
                Ok(m) if !m.paused => out.push(m),
                Ok(_) => {}
                Err(e) => {
                    if told.insert(row.name.clone()) {
                        (self.say)(&format!("skipping monitor '{}': {e}", row.name));
                    }
                }
            }
        }
        Ok(out)
    }

    async fn fire(
        &mut self,
        m: &Monitor,
        slot: DateTime<Utc>,
        trigger: Trigger,
        note: Option<String>,
    ) -> Result<(), DaemonError> {
        let started = self.clock.now();
        let Some(id) = self.store.start_fire(
            &m.name,
            slot.timestamp_millis(),
            trigger,
            note.as_deref(),
            started.timestamp_millis(),
        )?
        else {
            return Ok(());
        };
        let local = slot.with_timezone(&m.tz).format("%Y-%m-%d %H:%M %Z");
        (self.say)(&format!(
            "{}: fire {id} for {local} ({}{})",
            m.name,
            trigger.as_str(),
            note.as_deref()
                .map(|n| format!(": {n}"))
                .unwrap_or_default()
        ));
        let out = self.runner.run(m, id, &self.stop).await;
        let finished = self.clock.now();
        let recorded = record(&mut self.store, m, id, slot, trigger, &out, finished)?;
        (self.say)(&format!(
            "{}: fire {id} {} · {} delivery(ies) queued",
            m.name, out.status, recorded.queued
        ));
        if recorded.queued > 0 {
            self.queued.notify_one();
        }
        Ok(())
    }
}

/// What recording a fire did.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub verdict: Verdict,
    pub changed: Option<Vec<String>>,
    pub queued: usize,
}

/// Records a fire's result: the verdict read from its answer (an offline
/// team's decision fills it), and, when its notify rule says so, one
/// delivery per channel, all in one transaction.
pub fn record(
    store: &mut Store,
    m: &Monitor,
    fire_id: i64,
    slot: DateTime<Utc>,
    trigger: Trigger,
    out: &RunOutput,
    finished: DateTime<Utc>,
) -> Result<Recorded, StoreError> {
    let mut answer = out.answer.clone().unwrap_or_default();
    if let Some(tail) = team_verdict_tail(&answer, &m.job) {
        answer.push_str(&tail);
    }
    let verdict = verdict::parse(&answer, &m.contract);
    let previous: Option<Verdict> = store
        .previous_verdict(&m.name, fire_id)?
        .and_then(|v| serde_json::from_str(&v).ok());
    let changed = previous.as_ref().map(|p| verdict::changed(p, &verdict));
    let interrupted = out.status == "interrupted";
    let send = !interrupted
        && match m.notify {
            NotifyWhen::Always => true,
            NotifyWhen::Change => changed.as_ref().is_none_or(|c| !c.is_empty()),
        };
    let verdict_json = serde_json::to_value(&verdict).unwrap_or_default();
    let deliveries: Vec<NewDelivery> = if send {
        m.deliver
            .iter()
            .map(|c| {
                let key = idempotency_key(&m.name, fire_id, c);
                let payload = payload(m, fire_id, slot, trigger, out, &verdict, &changed, &key);
                NewDelivery {
                    channel: c.to_string(),
                    idempotency_key: key,
                    payload,
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let result = FireResult {
        status: out.status.clone(),
        run_dir: out.run_dir.clone(),
        // An interrupted run has no answer to judge.
        verdict: (!interrupted).then(|| verdict_json.to_string()),
        answer: out.answer.clone(),
        finished_ms: finished.timestamp_millis(),
    };
    store.finish_fire(fire_id, &result, &deliveries)?;
    Ok(Recorded {
        verdict,
        changed,
        queued: deliveries.len(),
    })
}

/// One key per (monitor fire, channel): the same on every retry.
pub fn idempotency_key(monitor: &str, fire_id: i64, channel: &Channel) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(channel.to_string().as_bytes());
    let short = hex(digest.get(..6).unwrap_or_default());
    format!("vd-{monitor}-{fire_id}-{short}")
}

#[allow(clippy::too_many_arguments)]
fn payload(
    m: &Monitor,
    fire_id: i64,
    slot: DateTime<Utc>,
    trigger: Trigger,
    out: &RunOutput,
    verdict: &Verdict,
    changed: &Option<Vec<String>>,
    key: &str,
) -> String {
    let shown = verdict.to_string();
    let local = slot
        .with_timezone(&m.tz)
        .format("%Y-%m-%d %H:%M %Z")
        .to_string();
    let changed_line = match changed {
        None => "first verdict".to_string(),
        Some(c) if c.is_empty() => "no change".to_string(),
        Some(c) => format!("changed: {}", c.join(", ")),
    };
    let subject = format!("vibedesk monitor {}: {} ({local})", m.name, out.status);
    let answer = out.answer.as_deref().unwrap_or_default();
    let text = format!(
        "Monitor {} fired for {local} ({}): {}.\n{changed_line}\nVerdict: {shown}\nRun dir: {}\n\n{}\n",
        m.name,
        trigger.as_str(),
        out.status,
        out.run_dir.as_deref().unwrap_or("-"),
        crate::text::preview(answer, 8000),
    );
    serde_json::json!({
        "monitor": m.name,
        "fire_id": fire_id,
        "scheduled_for": slot.to_rfc3339(),
        "trigger": trigger.as_str(),
        "status": out.status,
        "reason": out.reason,
        "run_dir": out.run_dir,
        "verdict": verdict,
        "changed": changed,
        "idempotency_key": key,
        "subject": subject,
        "text": text,
        "answer": crate::text::preview(answer, 64 * 1024),
    })
    .to_string()
}

#[cfg(test)]
mod tests;
