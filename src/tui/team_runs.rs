//! The research teams' runs on disk, for the transcript browser's Teams
//! view: every `<data>/swarm/<run id>/run.json` (docs §14.4), newest first,
//! with its workers.
//!
//! The record is the engine's, so it is read defensively, as JSON with only
//! the fields shown: the run id (`run_id` or `id`, else the directory's
//! name), `preset`, `status`, the start (`started_at` or `started`), and
//! `tasks`, a list of objects (or an object keyed by task id) with `id`,
//! the state (`state` or `status`) and `run_dir` (or the last of
//! `run_dirs`, the engine's one per attempt). Anything missing shows as
//! `?`; other fields are ignored; an unreadable file is listed with why.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One worker of a team run.
#[derive(Clone, Debug, PartialEq)]
pub struct TeamWorkerRow {
    pub id: String,
    pub state: String,
    pub run_dir: Option<String>,
}

/// One team run.
#[derive(Clone, Debug, PartialEq)]
pub struct TeamRunRow {
    pub id: String,
    pub preset: String,
    pub status: String,
    /// As recorded (RFC 3339 when the engine writes it so).
    pub started: String,
    pub workers: Vec<TeamWorkerRow>,
    /// The run's directory.
    pub dir: PathBuf,
    /// Why `run.json` could not be read, if it could not.
    pub error: Option<String>,
}

/// Where team runs live under the data directory.
pub fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join("swarm")
}

/// Every team run under `data_dir`, newest first; no directory yet is an
/// empty list.
pub fn list(data_dir: &Path) -> Vec<TeamRunRow> {
    let Ok(entries) = std::fs::read_dir(dir(data_dir)) else {
        return Vec::new();
    };
    let mut rows: Vec<TeamRunRow> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .map(|p| read(&p))
        .collect();
    rows.sort_by(|a, b| (&b.started, &b.id).cmp(&(&a.started, &a.id)));
    rows
}

fn text(v: &Value, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| match v.get(k)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    })
}

fn worker(v: &Value, key: Option<&str>) -> TeamWorkerRow {
    TeamWorkerRow {
        id: text(v, &["id", "task"])
            .or_else(|| key.map(String::from))
            .unwrap_or_else(|| "?".into()),
        state: text(v, &["state", "status"]).unwrap_or_else(|| "?".into()),
        // The engine keeps one run dir per attempt (`run_dirs`, oldest
        // first): the last is the one that counted.
        run_dir: text(v, &["run_dir"]).or_else(|| {
            v.get("run_dirs")?
                .as_array()?
                .last()?
                .as_str()
                .map(String::from)
        }),
    }
}

/// One run's directory: its `run.json`, or a row saying why not.
fn read(dir: &Path) -> TeamRunRow {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut row = TeamRunRow {
        id: name,
        preset: "?".into(),
        status: "?".into(),
        started: String::new(),
        workers: Vec::new(),
        dir: dir.to_path_buf(),
        error: None,
    };
    let file = dir.join("run.json");
    let value: Value = match std::fs::read(&file)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => {
            row.status = "unreadable".into();
            row.error = Some(format!("{}: {e}", file.display()));
            return row;
        }
    };
    if let Some(id) = text(&value, &["run_id", "id"]) {
        row.id = id;
    }
    row.preset = text(&value, &["preset", "name"]).unwrap_or(row.preset);
    row.status = text(&value, &["status"]).unwrap_or(row.status);
    row.started = text(&value, &["started_at", "started"]).unwrap_or_default();
    row.workers = match value.get("tasks") {
        Some(Value::Array(tasks)) => tasks.iter().map(|t| worker(t, None)).collect(),
        Some(Value::Object(tasks)) => tasks.iter().map(|(k, t)| worker(t, Some(k))).collect(),
        _ => Vec::new(),
    };
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_runs_defensively_newest_first() {
        let data = tempfile::tempdir().unwrap();
        let root = dir(data.path());
        let write = |id: &str, body: &str| {
            std::fs::create_dir_all(root.join(id)).unwrap();
            std::fs::write(root.join(id).join("run.json"), body).unwrap();
        };
        write(
            "swarm-20261204-100000-aaaaaaaa",
            r#"{"run_id":"swarm-20261204-100000-aaaaaaaa","preset":"investment_committee","status":"success",
               "started_at":"2026-12-04T10:00:00Z","extra":1,
               "tasks":[{"id":"task-bull","state":"success","run_dirs":["/d/bull-1","/d/bull"]},{"id":"task-pm","status":"failed"}]}"#,
        );
        write(
            "swarm-20261204-110000-bbbbbbbb",
            r#"{"id":"swarm-20261204-110000-bbbbbbbb","preset":"risk_committee","status":"interrupted",
               "started":"2026-12-04T11:00:00Z","tasks":{"task-risk":{"state":"interrupted"}}}"#,
        );
        write("swarm-broken", "{not json");
        let rows = list(data.path());
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].id, "swarm-20261204-110000-bbbbbbbb");
        assert_eq!(rows[0].workers[0].id, "task-risk");
        assert_eq!(rows[0].workers[0].state, "interrupted");
        let first = &rows[1];
        assert_eq!(
            (first.preset.as_str(), first.status.as_str()),
            ("investment_committee", "success")
        );
        assert_eq!(first.workers.len(), 2);
        assert_eq!(first.workers[0].run_dir.as_deref(), Some("/d/bull"));
        assert_eq!(first.workers[1].state, "failed");
        // Unreadable: listed, with why, under its directory's name.
        assert_eq!(rows[2].id, "swarm-broken");
        assert_eq!(rows[2].status, "unreadable");
        assert!(rows[2].error.as_deref().unwrap().contains("run.json"));
        // No swarm directory yet: nothing, not an error.
        assert!(list(&data.path().join("nowhere")).is_empty());
    }
}
