//! A team run on disk (docs §14.4): `<data>/swarm/<run id>/` holds
//! `run.json` (atomic: status, preset, variables, each task's state,
//! attempts, run dirs, seconds and tokens, the owner's pid and start time),
//! `events.jsonl` (every event, appended, fsynced at each task's end),
//! `report.md`, the shared `workspace/`, each task's trace and message log
//! under `tasks/<task id>/` and the workers' run dirs under `runs/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::agent::events::{AgentEvent, SwarmTaskInfo, TaskState};
use crate::fsio::Durability;
use crate::store::jsonl::{FsyncFailure, JsonlLog};
use crate::store::run_state::{RunStateStore, Status, current_process_identity, process_is_alive};
use crate::store::{Paths, StoreError, atomic_write_json};

pub const RUN_FILE: &str = "run.json";
pub const EVENTS_FILE: &str = "events.jsonl";
pub const REPORT_FILE: &str = "report.md";

/// `<data>/swarm`: one directory per team run.
pub fn swarm_dir(paths: &Paths) -> PathBuf {
    paths.data_dir.join("swarm")
}

/// `swarm-<YYYYmmdd-HHMMSS>-<8 hex>` (UTC, so names sort by time).
pub fn new_run_id(now: chrono::DateTime<chrono::Utc>) -> String {
    format!(
        "swarm-{}-{:08x}",
        now.format("%Y%m%d-%H%M%S"),
        rand::random::<u32>()
    )
}

/// A run id as [`new_run_id`] makes them: never a path.
pub fn valid_run_id(id: &str) -> bool {
    id.starts_with("swarm-")
        && id.len() <= 64
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: String,
    pub agent: String,
    pub role: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default)]
    pub attempts: u32,
    /// One run dir per attempt, oldest first.
    #[serde(default)]
    pub run_dirs: Vec<String>,
    #[serde(default)]
    pub seconds: f64,
    #[serde(default)]
    pub tokens: u64,
    /// `tasks/<task id>`: the worker's trace and message log.
    #[serde(default)]
    pub session_dir: String,
}

impl TaskRecord {
    /// The task as `swarm_started` announces it.
    pub fn info(&self) -> SwarmTaskInfo {
        SwarmTaskInfo {
            id: self.id.clone(),
            agent: self.agent.clone(),
            role: self.role.clone(),
            depends_on: self.depends_on.clone(),
        }
    }
}

/// `run.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    pub preset: String,
    #[serde(default)]
    pub title: String,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(default)]
    pub seconds: f64,
    #[serde(default)]
    pub max_workers: usize,
    #[serde(default)]
    pub layers: Vec<Vec<String>>,
    pub tasks: Vec<TaskRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_start: Option<u64>,
}

impl RunRecord {
    pub fn task_mut(&mut self, id: &str) -> Option<&mut TaskRecord> {
        self.tasks.iter_mut().find(|t| t.id == id)
    }

    pub fn tokens(&self) -> u64 {
        self.tasks.iter().map(|t| t.tokens).sum()
    }

    /// This process as the owner (for crash detection).
    pub fn owned_by_this_process(mut self) -> Self {
        let (pid, start) = current_process_identity();
        self.pid = Some(pid);
        self.pid_start = start;
        self
    }
}

/// One team run's directory.
#[derive(Clone, Debug)]
pub struct RunFiles {
    pub dir: PathBuf,
}

impl RunFiles {
    pub fn create(paths: &Paths, id: &str) -> Result<Self, StoreError> {
        let dir = swarm_dir(paths).join(id);
        for d in [
            dir.clone(),
            dir.join("workspace"),
            dir.join("tasks"),
            dir.join("runs"),
        ] {
            std::fs::create_dir_all(&d).map_err(|e| StoreError::io("create", &d, e))?;
        }
        Ok(RunFiles { dir })
    }

    pub fn run_file(&self) -> PathBuf {
        self.dir.join(RUN_FILE)
    }
    pub fn events_file(&self) -> PathBuf {
        self.dir.join(EVENTS_FILE)
    }
    pub fn report_file(&self) -> PathBuf {
        self.dir.join(REPORT_FILE)
    }
    /// The team's shared workspace: what one member writes, the next reads.
    pub fn workspace(&self) -> PathBuf {
        self.dir.join("workspace")
    }
    pub fn task_dir(&self, task: &str) -> PathBuf {
        self.dir.join("tasks").join(task)
    }
    pub fn runs_root(&self) -> PathBuf {
        self.dir.join("runs")
    }

    /// Atomic and synced: the run's start, each task's end, the run's end.
    pub fn write(&self, record: &RunRecord) -> Result<(), StoreError> {
        atomic_write_json(&self.run_file(), record)
    }

    /// Atomic, not synced: the steps between (a task starts, an attempt
    /// gets its run dir). A process crash keeps them (the page cache
    /// survives it); a power loss may lose them, and then the last synced
    /// state, still `running`, is what reconciliation marks interrupted.
    pub fn write_in_flight(&self, record: &RunRecord) -> Result<(), StoreError> {
        let mut text = serde_json::to_string_pretty(record).map_err(|source| StoreError::Json {
            what: "run.json",
            source,
        })?;
        text.push('\n');
        crate::fsio::write_atomic(&self.run_file(), text.as_bytes(), Durability::ProcessCrash)?;
        Ok(())
    }
}

/// `events.jsonl`: one JSON event per line with a `ts`, written as they
/// come; `sync` makes them durable (at each task's end and the run's). A log
/// that cannot be written is warned about, never a reason to fail the team.
pub struct EventLog {
    log: Option<JsonlLog>,
}

impl EventLog {
    pub fn open(path: PathBuf) -> Self {
        let log = JsonlLog::open(path, FsyncFailure::WarnOnceThenFlushOnly)
            .map_err(|e| tracing::warn!("cannot open the team's event log: {e}"))
            .ok();
        EventLog { log }
    }

    pub fn append(&mut self, event: &AgentEvent) {
        if let Some(log) = &mut self.log
            && let Err(e) = log.append_unsynced("event", &event.stamped())
        {
            tracing::warn!("{e}");
        }
    }

    pub fn sync(&mut self) {
        if let Some(log) = &mut self.log
            && let Err(e) = log.sync()
        {
            tracing::warn!("{e}");
        }
    }
}

/// A team run as the transcript browser and `swarm list` show it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSummary {
    pub id: String,
    pub preset: String,
    pub title: String,
    pub status: Status,
    pub started_at: String,
    pub seconds: f64,
    pub tasks: usize,
    pub tasks_succeeded: usize,
    pub dir: PathBuf,
}

/// Reads `run.json` of `dir`.
pub fn read_record(dir: &Path) -> Result<RunRecord, StoreError> {
    let path = dir.join(RUN_FILE);
    let text = std::fs::read(&path).map_err(|e| StoreError::io("read", &path, e))?;
    serde_json::from_slice(&text).map_err(|e| {
        StoreError::Invalid(format!("{} is not a team run record: {e}", path.display()))
    })
}

/// The run `id`, with its directory.
pub fn load_run(paths: &Paths, id: &str) -> Result<(RunRecord, PathBuf), StoreError> {
    if !valid_run_id(id) {
        return Err(StoreError::Invalid(format!(
            "'{id}' is not a team run id (they look like swarm-20260101-120000-0a1b2c3d; `vibedesk swarm list` shows them)"
        )));
    }
    let dir = swarm_dir(paths).join(id);
    read_record(&dir).map(|r| (r, dir))
}

/// Team runs on disk, newest first; unreadable ones are skipped.
pub fn list_runs(paths: &Paths) -> Vec<RunSummary> {
    let Ok(rd) = std::fs::read_dir(swarm_dir(paths)) else {
        return Vec::new();
    };
    let mut out: Vec<RunSummary> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter_map(|dir| {
            let r = read_record(&dir).ok()?;
            Some(RunSummary {
                tasks: r.tasks.len(),
                tasks_succeeded: r
                    .tasks
                    .iter()
                    .filter(|t| t.state == TaskState::Success)
                    .count(),
                id: r.id,
                preset: r.preset,
                title: r.title,
                status: r.status,
                started_at: r.started_at,
                seconds: r.seconds,
                dir,
            })
        })
        .collect();
    out.sort_by(|a, b| b.id.cmp(&a.id));
    out
}

/// A team run a crash left `running`.
#[derive(Clone, Debug, PartialEq)]
pub struct ReconciledRun {
    pub id: String,
    pub dir: PathBuf,
    pub reason: String,
}

/// Marks every team run still `running` whose owner is gone as
/// `interrupted`, with each unfinished task `interrupted` too, and its
/// workers' run states (docs §14.4, as §5.4 for single runs).
pub fn reconcile_interrupted(paths: &Paths) -> Vec<ReconciledRun> {
    let Ok(rd) = std::fs::read_dir(swarm_dir(paths)) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = rd.filter_map(Result::ok).map(|e| e.path()).collect();
    dirs.sort();
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(mut record) = read_record(&dir) else {
            continue;
        };
        if record.status != Status::Running {
            continue;
        }
        if let Some(pid) = record.pid
            && process_is_alive(pid, record.pid_start)
        {
            continue;
        }
        let reason = match record.pid {
            Some(pid) => format!(
                "the process (pid {pid}) ended without finishing the team run: crash, kill or power loss"
            ),
            None => "the process ended without finishing the team run".to_string(),
        };
        if let Err(e) = RunStateStore::new(dir.join("runs")).reconcile_interrupted() {
            tracing::warn!("cannot reconcile the workers of {}: {e}", dir.display());
        }
        for task in &mut record.tasks {
            if !task.state.is_finished() {
                task.state = TaskState::Interrupted;
                task.reason = Some(reason.clone());
            }
        }
        record.status = Status::Interrupted;
        record.reason = Some(reason.clone());
        record.finished_at = Some(crate::store::messages::now_rfc3339());
        if let Err(e) = atomic_write_json(&dir.join(RUN_FILE), &record) {
            tracing::warn!("cannot mark {} interrupted: {e}", dir.display());
            continue;
        }
        out.push(ReconciledRun {
            id: record.id,
            dir,
            reason,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_have_the_documented_shape() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-04T17:05:09Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let id = new_run_id(now);
        assert!(id.starts_with("swarm-20261204-170509-"), "{id}");
        assert_eq!(id.len(), "swarm-20261204-170509-".len() + 8);
        assert!(valid_run_id(&id));
        assert!(!valid_run_id("swarm-../../etc"));
        assert!(!valid_run_id("runs"));
    }
}
