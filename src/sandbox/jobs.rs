//! Job records: which process groups this vibedesk has running, so that the
//! next start can end any that outlived a crash.
//!
//! With a PID namespace per job (see [`super::pidns`]) nothing should
//! survive vibedesk; the records are the second line of defence, and the
//! only one where namespaces are not available. Each record names the
//! job's process group by its leader's pid *and* start time, and its owner
//! the same way: a group is killed only while its leader is the very
//! process recorded, and only when the owner is gone, so a recycled pid is
//! never acted on.
//!
//! A record is one small JSON file, `<jobs dir>/<pgid>-<start>.json`,
//! written atomically right after the spawn and removed once the job is
//! reaped. It is not fsynced: a crash of the process keeps the page cache,
//! and a power loss leaves no process to kill.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::fsio::{self, Durability};
use crate::process::{current_process_identity, process_is_alive, stat_of};

/// One running job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The job's process group, which is its leader's pid.
    pub pgid: u32,
    /// The leader's start time (clock ticks since boot).
    pub start: Option<u64>,
    /// The vibedesk process that started it.
    pub owner_pid: u32,
    pub owner_start: Option<u64>,
    pub program: String,
    pub run_dir: PathBuf,
}

impl JobRecord {
    /// A record for the group led by `pgid`, owned by this process.
    pub fn for_group(pgid: u32, program: String, run_dir: PathBuf) -> Self {
        let (owner_pid, owner_start) = current_process_identity();
        JobRecord {
            pgid,
            start: stat_of(pgid).map(|s| s.start_time),
            owner_pid,
            owner_start,
            program,
            run_dir,
        }
    }
}

/// A written record; dropping it removes the file.
#[derive(Debug)]
pub struct JobFile(Option<PathBuf>);

impl JobFile {
    /// Writes `rec` into `dir`. Failure is logged, never fatal: the job
    /// runs, only without its crash-time safety net.
    pub fn write(dir: &Path, rec: &JobRecord) -> JobFile {
        let path = dir.join(format!("{}-{}.json", rec.pgid, rec.start.unwrap_or(0)));
        let result = std::fs::create_dir_all(dir)
            .and_then(|()| serde_json::to_vec(rec).map_err(std::io::Error::other))
            .and_then(|bytes| {
                fsio::write_atomic(&path, &bytes, Durability::ProcessCrash).map_err(|e| e.source)
            });
        match result {
            Ok(()) => JobFile(Some(path)),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot record a sandbox job");
                JobFile(None)
            }
        }
    }
}

impl Drop for JobFile {
    fn drop(&mut self) {
        if let Some(p) = self.0.take()
            && let Err(e) = std::fs::remove_file(&p)
            && e.kind() != ErrorKind::NotFound
        {
            tracing::warn!(path = %p.display(), error = %e, "cannot remove a sandbox job record");
        }
    }
}

/// A job that outlived its owner and was killed on this start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reaped {
    pub pgid: u32,
    pub program: String,
    pub run_dir: PathBuf,
}

/// Ends every recorded job whose owner is gone: SIGKILL to its group while
/// its leader is the recorded process. Records of live owners are left
/// alone; records of dead owners are removed whether or not anything was
/// left to kill. Unreadable records are removed with a warning.
pub fn reap_orphans(dir: &Path) -> Vec<Reaped> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let rec: JobRecord = match std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "removing an unreadable sandbox job record");
                let _ = std::fs::remove_file(&path);
                continue;
            }
        };
        if process_is_alive(rec.owner_pid, rec.owner_start) {
            continue;
        }
        // Only the recorded leader proves the group is still the job's: a
        // group with another leader (or none we can identify) is left alone.
        let leader_is_ours = rec.start.is_some()
            && process_is_alive(rec.pgid, rec.start)
            && stat_of(rec.pgid).is_some_and(|s| s.pgrp == rec.pgid);
        if leader_is_ours && killpg(Pid::from_raw(rec.pgid as i32), Signal::SIGKILL).is_ok() {
            tracing::warn!(pgid = rec.pgid, program = %rec.program, "killed a sandbox job that outlived its vibedesk");
            out.push(Reaped {
                pgid: rec.pgid,
                program: rec.program.clone(),
                run_dir: rec.run_dir.clone(),
            });
        }
        let _ = std::fs::remove_file(&path);
    }
    out
}
