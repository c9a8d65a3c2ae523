//! Run directories and their `state.json` (docs §5.1). Unlike the original,
//! `state.json` is written while running too (with the owner's pid and start
//! time), so a run left `running` by a crash can be found and marked
//! `interrupted` on the next start (docs §5.4 restart semantics).
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::StoreError;
use super::atomic::{atomic_write_json, fsync_dir};
use super::trace::{LARGE_TEXT_BYTES, byte_prefix, message_log_ref};
pub use crate::process::{current_process_identity, process_is_alive};

/// Random suffixes tried before giving up on a run directory name; 24 random
/// bits within one second make even one retry very unlikely.
const CREATE_ATTEMPTS: usize = 16;
/// How much of a large prompt `req.json` keeps.
const REQUEST_PREFIX_BYTES: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Running,
    Success,
    /// Answered, but some tool calls (a team: some tasks) failed (docs §5.1).
    Partial,
    Failed,
    Cancelled,
    Interrupted,
    /// Answered, but no tool offered could serve the request: the answer
    /// says what is missing (docs §1.4, §5.1).
    Unsupported,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Success => "success",
            Status::Partial => "partial",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
            Status::Interrupted => "interrupted",
            Status::Unsupported => "unsupported",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_start: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunDir {
    pub id: String,
    pub path: PathBuf,
}

impl RunDir {
    pub fn code_dir(&self) -> PathBuf {
        self.path.join("code")
    }
    pub fn logs_dir(&self) -> PathBuf {
        self.path.join("logs")
    }
    pub fn artifacts_dir(&self) -> PathBuf {
        self.path.join("artifacts")
    }
    pub fn state_path(&self) -> PathBuf {
        self.path.join("state.json")
    }
    pub fn request_path(&self) -> PathBuf {
        self.path.join("req.json")
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reconciled {
    pub run_id: String,
    pub run_dir: PathBuf,
    pub session_id: Option<String>,
    pub reason: String,
}

#[derive(Clone, Debug)]
pub struct RunStateStore {
    runs_root: PathBuf,
}

impl RunStateStore {
    pub fn new(runs_root: impl Into<PathBuf>) -> Self {
        RunStateStore {
            runs_root: runs_root.into(),
        }
    }

    pub fn runs_root(&self) -> &Path {
        &self.runs_root
    }

    /// Creates `<runs root>/<YYYYmmdd_HHMMSS>_<6 hex>/` with `code/`, `logs/`
    /// and `artifacts/`. The time is UTC (not local as in docs §5.1): names then
    /// sort chronologically and never repeat or jump when DST changes.
    /// `create_dir` (not `create_dir_all`) makes a name clash visible, and a
    /// clash is retried with a fresh random suffix.
    pub fn create_run(&self, now: DateTime<Utc>) -> Result<RunDir, StoreError> {
        std::fs::create_dir_all(&self.runs_root)
            .map_err(|e| StoreError::io("create runs directory", &self.runs_root, e))?;
        let stamp = now.format("%Y%m%d_%H%M%S").to_string();
        for _ in 0..CREATE_ATTEMPTS {
            let id = format!("{stamp}_{:06x}", rand::random::<u32>() & 0x00ff_ffff);
            let path = self.runs_root.join(&id);
            match std::fs::create_dir(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(StoreError::io("create run directory", &path, e)),
            }
            let run = RunDir { id, path };
            for sub in [run.code_dir(), run.logs_dir(), run.artifacts_dir()] {
                std::fs::create_dir(&sub).map_err(|e| StoreError::io("create", &sub, e))?;
            }
            // Make the new entries durable so a crash cannot lose the run dir
            // that a later state.json (and reconciliation) refers to.
            fsync_dir(&run.path)?;
            fsync_dir(&self.runs_root)?;
            return Ok(run);
        }
        Err(StoreError::io(
            "create run directory in",
            &self.runs_root,
            std::io::Error::new(
                ErrorKind::AlreadyExists,
                format!("{CREATE_ATTEMPTS} random names for {stamp} were all taken"),
            ),
        ))
    }

    /// `req.json` = `{"prompt": …, "context": {"session_id": …}}` (docs §5.1).
    /// A prompt over [`LARGE_TEXT_BYTES`] is kept whole only in the session's
    /// message log: here `prompt` is its first 4 KiB and `prompt_ref` says
    /// where the rest is (unlike the original, which copies it whole).
    pub fn write_request(
        &self,
        run: &RunDir,
        prompt: &str,
        session_id: &str,
    ) -> Result<(), StoreError> {
        let request = if prompt.len() > LARGE_TEXT_BYTES {
            serde_json::json!({
                "prompt": byte_prefix(prompt, REQUEST_PREFIX_BYTES),
                "prompt_ref": message_log_ref(prompt),
                "context": {"session_id": session_id},
            })
        } else {
            serde_json::json!({"prompt": prompt, "context": {"session_id": session_id}})
        };
        atomic_write_json(&run.request_path(), &request)
    }

    /// Atomic and fsynced (docs §10.7 ST-1): a crash leaves the old or the
    /// new state, never a truncated file.
    pub fn write_state(&self, run: &RunDir, state: &RunState) -> Result<(), StoreError> {
        atomic_write_json(&run.state_path(), state)
    }

    /// `Ok(None)` when the run has no `state.json`; an unreadable or
    /// unparsable file is an error naming it (a corrupt state is not "absent").
    pub fn read_state(run_dir: &Path) -> Result<Option<RunState>, StoreError> {
        let p = run_dir.join("state.json");
        let text = match std::fs::read(&p) {
            Ok(s) => s,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io("read", p, e)),
        };
        serde_json::from_slice(&text).map(Some).map_err(|e| {
            StoreError::Invalid(format!("{} is not a valid run state: {e}", p.display()))
        })
    }

    /// Marks every run still `running` whose owning process is gone as
    /// `interrupted` (docs §5.4: unfinished work is finalized on startup).
    /// One corrupt or unwritable run is logged and skipped, never fatal.
    pub fn reconcile_interrupted(&self) -> Result<Vec<Reconciled>, StoreError> {
        let entries = match std::fs::read_dir(&self.runs_root) {
            Ok(it) => it,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io("list runs directory", &self.runs_root, e)),
        };
        let mut dirs: Vec<PathBuf> = Vec::new();
        for entry in entries {
            match entry {
                Ok(e) if e.path().is_dir() => dirs.push(e.path()),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(dir = %self.runs_root.display(), error = %e, "cannot list a run entry")
                }
            }
        }
        // Names start with a UTC timestamp, so this is chronological.
        dirs.sort();

        let mut out = Vec::new();
        for dir in dirs {
            let state = match Self::read_state(&dir) {
                Ok(Some(s)) => s,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(run = %dir.display(), error = %e, "skipping run with unreadable state");
                    continue;
                }
            };
            if state.status != Status::Running {
                continue;
            }
            if let Some(pid) = state.pid
                && process_is_alive(pid, state.pid_start)
            {
                continue;
            }
            let reason = match state.pid {
                Some(pid) => format!(
                    "the process (pid {pid}) ended without finishing the run: crash, kill or power loss"
                ),
                None => "the process ended without finishing the run: crash, kill or power loss"
                    .to_string(),
            };
            // Keep everything else (session, pid, start) for the post-mortem.
            let updated = RunState {
                status: Status::Interrupted,
                reason: Some(reason.clone()),
                finished_at: Some(super::messages::now_rfc3339()),
                ..state
            };
            if let Err(e) = atomic_write_json(&dir.join("state.json"), &updated) {
                tracing::warn!(run = %dir.display(), error = %e, "cannot mark run interrupted");
                continue;
            }
            out.push(Reconciled {
                run_id: dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                run_dir: dir,
                session_id: updated.session_id,
                reason,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn running(pid: Option<u32>, start: Option<u64>) -> RunState {
        RunState {
            status: Status::Running,
            reason: None,
            degraded: false,
            session_id: Some("abcdef012345".into()),
            pid,
            pid_start: start,
            started_at: Some("2026-01-01T00:00:00.000Z".into()),
            finished_at: None,
        }
    }

    fn is_run_id(id: &str) -> bool {
        let b = id.as_bytes();
        b.len() == 22
            && b[..8].iter().all(u8::is_ascii_digit)
            && b[8] == b'_'
            && b[9..15].iter().all(u8::is_ascii_digit)
            && b[15] == b'_'
            && b[16..]
                .iter()
                .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
    }

    #[test]
    fn run_dir_name_format_and_subdirs() {
        let d = tempfile::tempdir().unwrap();
        let store = RunStateStore::new(d.path().join("runs"));
        let now = Utc.with_ymd_and_hms(2026, 9, 13, 12, 59, 30).unwrap();
        let run = store.create_run(now).unwrap();
        assert!(is_run_id(&run.id), "{}", run.id);
        assert!(run.id.starts_with("20260913_125930_"), "{}", run.id);
        assert_eq!(run.path, d.path().join("runs").join(&run.id));
        for sub in [run.code_dir(), run.logs_dir(), run.artifacts_dir()] {
            assert!(sub.is_dir(), "{}", sub.display());
        }
        assert!(!is_run_id("20260913_125930_ABCDEF"));
    }

    #[test]
    fn many_runs_in_the_same_second_are_distinct() {
        let d = tempfile::tempdir().unwrap();
        let store = RunStateStore::new(d.path());
        let now = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        let mut ids: Vec<String> = (0..50).map(|_| store.create_run(now).unwrap().id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 50);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 50);
    }

    #[test]
    fn request_json_shape() {
        let d = tempfile::tempdir().unwrap();
        let store = RunStateStore::new(d.path());
        let run = store.create_run(Utc::now()).unwrap();
        store
            .write_request(&run, "backtest AAPL ✓", "sess01")
            .unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.request_path()).unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"prompt": "backtest AAPL ✓", "context": {"session_id": "sess01"}})
        );
    }

    #[test]
    fn state_round_trips_unicode_and_status_names() {
        let d = tempfile::tempdir().unwrap();
        let store = RunStateStore::new(d.path());
        let run = store.create_run(Utc::now()).unwrap();
        assert_eq!(RunStateStore::read_state(&run.path).unwrap(), None);
        let mut st = running(Some(1), Some(2));
        st.status = Status::Failed;
        st.reason = Some("数据源不可用 — naïve ✗ 🚀".into());
        st.degraded = true;
        store.write_state(&run, &st).unwrap();
        let text = std::fs::read_to_string(run.state_path()).unwrap();
        assert!(text.contains("数据源不可用 — naïve ✗ 🚀"), "{text}");
        assert!(text.contains("\"status\": \"failed\""), "{text}");
        assert_eq!(RunStateStore::read_state(&run.path).unwrap(), Some(st));
        for (s, name) in [
            (Status::Running, "running"),
            (Status::Success, "success"),
            (Status::Partial, "partial"),
            (Status::Failed, "failed"),
            (Status::Cancelled, "cancelled"),
            (Status::Interrupted, "interrupted"),
            (Status::Unsupported, "unsupported"),
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), serde_json::json!(name));
            assert_eq!(s.as_str(), name);
        }
        // Only state.json plus the three sub-dirs: no temp file left behind.
        let mut names: Vec<String> = std::fs::read_dir(&run.path)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["artifacts", "code", "logs", "state.json"]);
    }

    #[test]
    fn corrupt_state_is_an_error_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("state.json"), "{\"status\": \"runn").unwrap();
        match RunStateStore::read_state(d.path()) {
            Err(StoreError::Invalid(msg)) => assert!(msg.contains("state.json"), "{msg}"),
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reconcile_marks_dead_runs_interrupted_and_keeps_live_ones() {
        let d = tempfile::tempdir().unwrap();
        let store = RunStateStore::new(d.path().join("runs"));
        let now = Utc::now();

        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = child.id();
        child.wait().unwrap();

        let dead = store.create_run(now).unwrap();
        store
            .write_state(&dead, &running(Some(dead_pid), Some(1)))
            .unwrap();
        let (me, my_start) = current_process_identity();
        let live = store.create_run(now).unwrap();
        store
            .write_state(&live, &running(Some(me), my_start))
            .unwrap();
        let unknown = store.create_run(now).unwrap();
        store.write_state(&unknown, &running(None, None)).unwrap();
        let done = store.create_run(now).unwrap();
        let mut ok = running(Some(dead_pid), None);
        ok.status = Status::Success;
        store.write_state(&done, &ok).unwrap();
        let corrupt = store.create_run(now).unwrap();
        std::fs::write(corrupt.state_path(), "garbage").unwrap();
        let _no_state = store.create_run(now).unwrap();
        std::fs::write(d.path().join("runs").join("stray-file"), "x").unwrap();

        let rec = store.reconcile_interrupted().unwrap();
        let mut ids: Vec<&str> = rec.iter().map(|r| r.run_id.as_str()).collect();
        ids.sort();
        let mut want = vec![dead.id.as_str(), unknown.id.as_str()];
        want.sort();
        assert_eq!(ids, want);

        let dead_rec = rec.iter().find(|r| r.run_id == dead.id).unwrap();
        assert_eq!(dead_rec.run_dir, dead.path);
        assert_eq!(dead_rec.session_id.as_deref(), Some("abcdef012345"));
        assert_eq!(
            dead_rec.reason,
            format!(
                "the process (pid {dead_pid}) ended without finishing the run: crash, kill or power loss"
            )
        );
        let st = RunStateStore::read_state(&dead.path).unwrap().unwrap();
        assert_eq!(st.status, Status::Interrupted);
        assert_eq!(st.pid, Some(dead_pid));
        assert_eq!(st.session_id.as_deref(), Some("abcdef012345"));
        assert_eq!(st.started_at.as_deref(), Some("2026-01-01T00:00:00.000Z"));
        let fin = st.finished_at.unwrap();
        assert!(
            fin.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(&fin).is_ok(),
            "{fin}"
        );

        let un = rec.iter().find(|r| r.run_id == unknown.id).unwrap();
        assert_eq!(
            un.reason,
            "the process ended without finishing the run: crash, kill or power loss"
        );

        assert_eq!(
            RunStateStore::read_state(&live.path)
                .unwrap()
                .unwrap()
                .status,
            Status::Running
        );
        assert_eq!(
            RunStateStore::read_state(&done.path)
                .unwrap()
                .unwrap()
                .status,
            Status::Success
        );
        assert!(RunStateStore::read_state(&corrupt.path).is_err());

        // Idempotent: nothing is left to reconcile.
        assert!(store.reconcile_interrupted().unwrap().is_empty());
    }

    #[test]
    fn reconcile_without_runs_root_is_empty() {
        let d = tempfile::tempdir().unwrap();
        let store = RunStateStore::new(d.path().join("missing"));
        assert!(store.reconcile_interrupted().unwrap().is_empty());
        assert!(!d.path().join("missing").exists());
    }
}
