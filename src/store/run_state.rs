//! STUB: to be completed.
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::StoreError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Running,
    Success,
    Failed,
    Cancelled,
    Interrupted,
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
        RunStateStore { runs_root: runs_root.into() }
    }

    pub fn runs_root(&self) -> &Path {
        &self.runs_root
    }

    pub fn create_run(&self, now: DateTime<Utc>) -> Result<RunDir, StoreError> {
        let id = format!("{}_{:06x}", now.format("%Y%m%d_%H%M%S"), rand::random::<u32>() & 0xff_ffff);
        let path = self.runs_root.join(&id);
        for d in ["code", "logs", "artifacts"] {
            std::fs::create_dir_all(path.join(d)).map_err(|e| StoreError::io("create", &path, e))?;
        }
        Ok(RunDir { id, path })
    }

    pub fn write_request(&self, run: &RunDir, prompt: &str, session_id: &str) -> Result<(), StoreError> {
        super::atomic_write_json(
            &run.path.join("req.json"),
            &serde_json::json!({"prompt": prompt, "context": {"session_id": session_id}}),
        )
    }

    pub fn write_state(&self, run: &RunDir, state: &RunState) -> Result<(), StoreError> {
        super::atomic_write_json(&run.state_path(), state)
    }

    pub fn read_state(run_dir: &Path) -> Result<Option<RunState>, StoreError> {
        let p = run_dir.join("state.json");
        match std::fs::read_to_string(&p) {
            Ok(s) => Ok(serde_json::from_str(&s).ok()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::io("read", p, e)),
        }
    }

    pub fn reconcile_interrupted(&self) -> Result<Vec<Reconciled>, StoreError> {
        Ok(Vec::new())
    }
}

/// This process's pid and its start time (in clock ticks since boot, from
/// `/proc/self/stat`), which together identify it even after pid reuse.
pub fn current_process_identity() -> (u32, Option<u64>) {
    (std::process::id(), None)
}
