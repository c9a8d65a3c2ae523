//! Scheduled memory maintenance: GC and compression, at most once a day.
//!
//! The original defined GC and compression but never called them (spec
//! §8.7, §12.5). Here the workstation and `vibedesk run` call [`run_due`] at
//! start-up (and the workstation again while it runs); it does the work when
//! the last run recorded in `<memory>/.maintenance.json` is more than 24 h
//! old. `vibedesk memory gc` runs it on demand. Its warnings — compression
//! on with GC off, unreadable flag values — are meant to be shown to the
//! user, not only logged.
//!
//! The pass can take a while on a large folder (it reads every entry and
//! compresses the due ones), so async callers run it in `spawn_blocking`.

use std::fs::File;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use super::atomic::write_atomic;
use super::entry::{format_ts, parse_ts};
use super::flags::MemoryFlags;
use super::store::{GcReport, MemoryStore};

/// Least time between two scheduled runs.
pub const INTERVAL_HOURS: i64 = 24;
/// The record file, in the memory folder.
pub const RECORD_FILE: &str = ".maintenance.json";

/// What `.maintenance.json` holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MaintenanceRecord {
    /// When the last run finished (UTC, with zone).
    pub last_run: String,
    #[serde(default)]
    pub archived: usize,
    #[serde(default)]
    pub compressed: usize,
    #[serde(default)]
    pub errors: Vec<String>,
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// What one call did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MaintenanceReport {
    /// True when GC (and compression) actually ran.
    pub ran: bool,
    /// Why it did not run, when it did not.
    pub skipped: Option<String>,
    /// The previous run, if recorded.
    pub previous_run: Option<DateTime<Utc>>,
    pub gc: Option<GcReport>,
    /// For the user: flag problems, compression-without-GC, failures.
    pub warnings: Vec<String>,
    pub error: Option<String>,
}

impl MaintenanceReport {
    /// One line for a status bar or stderr, `None` when there is nothing to say.
    pub fn summary(&self) -> Option<String> {
        let gc = self.gc.as_ref()?;
        if !self.ran
            || (gc.actions.is_empty() && gc.compressions.is_empty() && gc.errors.is_empty())
        {
            return None;
        }
        Some(format!(
            "memory maintenance: {} archived, {} compressed{}",
            gc.actions
                .iter()
                .filter(|a| a.archived_to.is_some())
                .count(),
            gc.compressions.len(),
            if gc.errors.is_empty() {
                String::new()
            } else {
                format!(", {} failed (see gc.log)", gc.errors.len())
            }
        ))
    }
}

/// What the user should be told about the memory configuration (shown by
/// the workstation and `vibedesk run`).
pub fn warnings(flags: &MemoryFlags) -> Vec<String> {
    flags.warnings()
}

fn record_path(store: &MemoryStore) -> PathBuf {
    store.root().join(RECORD_FILE)
}

/// The last recorded run.
pub fn read_record(store: &MemoryStore) -> Option<MaintenanceRecord> {
    let bytes = std::fs::read(record_path(store)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Runs GC and compression if the last run is more than 24 h before `now`
/// (or never happened, or is recorded in the future — a clock that went
/// back must not stall maintenance forever).
pub fn run_due(store: &MemoryStore, now: DateTime<Utc>, flags: &MemoryFlags) -> MaintenanceReport {
    let previous = read_record(store).and_then(|r| parse_ts(&r.last_run));
    if let Some(prev) = previous {
        let age = now - prev;
        if age >= chrono::Duration::zero() && age < chrono::Duration::hours(INTERVAL_HOURS) {
            return MaintenanceReport {
                ran: false,
                skipped: Some(format!(
                    "last run {} (less than {INTERVAL_HOURS} h ago)",
                    format_ts(prev)
                )),
                previous_run: Some(prev),
                warnings: warnings(flags),
                ..MaintenanceReport::default()
            };
        }
    }
    let mut report = run_now(store, now, flags);
    report.previous_run = previous;
    report
}

/// Runs GC and compression now (on demand), recording the run.
pub fn run_now(store: &MemoryStore, now: DateTime<Utc>, flags: &MemoryFlags) -> MaintenanceReport {
    let mut report = MaintenanceReport {
        warnings: warnings(flags),
        ..MaintenanceReport::default()
    };
    // One maintenance pass at a time across processes; a second caller skips.
    let lock_path = store.root().join(".maintenance.lock");
    let _lock = match std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map(|f| Flock::lock(f, FlockArg::LockExclusiveNonblock))
    {
        Ok(Ok(lock)) => Some(lock),
        Ok(Err((_, nix::errno::Errno::EWOULDBLOCK))) => {
            report.skipped = Some("another process is running memory maintenance".into());
            return report;
        }
        // No flock support (or no lock file): run anyway.
        _ => None::<Flock<File>>,
    };
    if !flags.gc {
        // Not recorded as a run: turning GC on later must not wait a day.
        report.skipped = Some(
            "memory garbage collection is off (VIBEDESK_MEMORY_GC / VIBEDESK_MEMORY); nothing to do".into(),
        );
        report.gc = Some(GcReport {
            enabled: false,
            warnings: report.warnings.clone(),
            ..GcReport::default()
        });
        return report;
    }
    match store.run_gc_with(flags, false, now) {
        Ok(gc) => {
            report.ran = gc.enabled;
            for e in &gc.errors {
                report.warnings.push(format!("memory maintenance: {e}"));
            }
            report.gc = Some(gc);
        }
        Err(e) => {
            report.error = Some(e.to_string());
            report
                .warnings
                .push(format!("memory maintenance failed: {e}"));
        }
    }
    let record = MaintenanceRecord {
        last_run: format_ts(now),
        archived: report
            .gc
            .as_ref()
            .map(|g| g.actions.iter().filter(|a| a.archived_to.is_some()).count())
            .unwrap_or(0),
        compressed: report
            .gc
            .as_ref()
            .map(|g| g.compressions.len())
            .unwrap_or(0),
        errors: report
            .gc
            .as_ref()
            .map(|g| g.errors.clone())
            .unwrap_or_default()
            .into_iter()
            .chain(report.error.clone())
            .collect(),
        warnings: report.warnings.clone(),
    };
    match serde_json::to_vec_pretty(&record) {
        Ok(mut bytes) => {
            bytes.push(b'\n');
            if let Err(e) = write_atomic(&record_path(store), &bytes) {
                tracing::warn!("cannot record memory maintenance: {e}");
            }
        }
        Err(e) => tracing::warn!("cannot encode the maintenance record: {e}"),
    }
    report
}
