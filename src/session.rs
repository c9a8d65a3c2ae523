//! One conversation: its directory, history, workspace and the loop that
//! runs its turns. A session is locked while open, so two processes never
//! append to the same logs (spec §5.4: one in-flight run per session).

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::agent::compaction::CompactionRequest;
use crate::agent::input::{MessageTooLarge, check_message_size};
use crate::agent::run_loop::{MESSAGE_TOO_LARGE, PARTIAL_FILE};
use crate::agent::{EventSink, Loop, LoopDeps, RunOutcome, RunRequest, context};
use crate::model::Message;
use crate::store::messages::now_rfc3339;
use crate::store::run_state::Reconciled;
use crate::store::{
    MessageLog, Paths, RunStateStore, StoredMessage, TraceWriter, atomic_write_json,
};
use crate::tools::BackgroundQueue;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("'{0}' is not a valid session id (use letters, digits, '-' or '_', at most 64)")]
    BadId(String),
    #[error("session {0} does not exist (list them with `vibedesk sessions`)")]
    NotFound(String),
    #[error(
        "session {0} is open in another vibedesk process; close it there or start a new session"
    )]
    Busy(String),
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// `session.json`: what the transcript browser lists.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub id: String,
    pub created_at: String,
    #[serde(default)]
    pub updated_at: String,
    /// The first prompt, cut to 120 characters.
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub runs: u32,
    #[serde(default)]
    pub last_status: Option<String>,
    #[serde(default)]
    pub last_run_id: Option<String>,
}

pub struct Session {
    meta: SessionMeta,
    dir: PathBuf,
    workspace: PathBuf,
    background: BackgroundQueue,
    compaction: CompactionRequest,
    runner: Loop,
    history_chars: usize,
    _lock: File,
}

pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn new_id() -> String {
    format!("{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff)
}

impl Session {
    /// Opens an existing session (`Some(id)`) or creates a new one.
    pub fn open(paths: &Paths, id: Option<&str>, deps: LoopDeps) -> Result<Self, SessionError> {
        let (id, existing) = match id {
            Some(id) if !valid_id(id) => return Err(SessionError::BadId(id.to_string())),
            Some(id) => (id.to_string(), true),
            None => (new_id(), false),
        };
        let dir = paths.session_dir(&id);
        if existing && !dir.is_dir() {
            return Err(SessionError::NotFound(id));
        }
        std::fs::create_dir_all(&dir).map_err(|source| SessionError::Io {
            action: "create",
            path: dir.clone(),
            source,
        })?;
        let lock_path = dir.join(".lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| SessionError::Io {
                action: "open",
                path: lock_path.clone(),
                source,
            })?;
        lock.try_lock()
            .map_err(|_| SessionError::Busy(id.clone()))?;
        let workspace = dir.join("workspace");
        std::fs::create_dir_all(&workspace).map_err(|source| SessionError::Io {
            action: "create",
            path: workspace.clone(),
            source,
        })?;
        let meta = match read_meta(&dir) {
            Some(m) => m,
            None => {
                let now = now_rfc3339();
                let m = SessionMeta {
                    id: id.clone(),
                    created_at: now.clone(),
                    updated_at: now,
                    ..SessionMeta::default()
                };
                atomic_write_json(&dir.join("session.json"), &m)?;
                m
            }
        };
        let history_chars = deps.config.history_chars;
        Ok(Session {
            meta,
            dir,
            workspace,
            background: BackgroundQueue::default(),
            compaction: CompactionRequest::default(),
            runner: Loop::new(deps),
            history_chars,
            _lock: lock,
        })
    }

    pub fn id(&self) -> &str {
        &self.meta.id
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    pub fn meta(&self) -> &SessionMeta {
        &self.meta
    }

    /// This session's background-task queue.
    pub fn background(&self) -> &BackgroundQueue {
        &self.background
    }

    /// Asks for a compaction (`/compact [focus]`): the running turn does it
    /// at its next iteration, or the next turn at its first.
    pub fn request_compaction(&self, focus: &str) {
        self.compaction.request(focus);
    }

    /// Shares a UI's compaction handle with this session, so `/compact`
    /// reaches a turn that is already running.
    pub fn set_compaction_request(&mut self, request: CompactionRequest) {
        self.compaction = request;
    }

    /// A handle a UI can keep to request compactions while a turn runs.
    pub fn compaction_handle(&self) -> CompactionRequest {
        self.compaction.clone()
    }

    /// Stored messages; the count of unreadable lines is reported alongside.
    pub fn messages(&self) -> Result<(Vec<StoredMessage>, usize), SessionError> {
        let read = MessageLog::read(&self.dir)?;
        Ok((read.messages, read.skipped_lines.len()))
    }

    /// `Err` when `text` is over the size limit on one message; the error
    /// names this session's workspace as the place for the text.
    pub fn check_message(&self, text: &str) -> Result<(), MessageTooLarge> {
        check_message_size(
            text.len(),
            self.runner.deps().config.max_message_bytes,
            &|| self.workspace.display().to_string(),
        )
    }

    /// Runs one turn and records its outcome in `session.json`. An oversized
    /// message is refused before anything is read or written (the outcome
    /// is `failed` with the reason and no run).
    pub async fn send(
        &mut self,
        prompt: &str,
        events: EventSink,
        cancel: CancellationToken,
    ) -> RunOutcome {
        if let Err(e) = self.check_message(prompt) {
            return self
                .runner
                .refuse(e.to_string(), MESSAGE_TOO_LARGE, &events);
        }
        let stored = MessageLog::read(&self.dir)
            .map(|r| r.messages)
            .unwrap_or_default();
        let history = context::history_from_stored(&stored, self.history_chars);
        let req = RunRequest {
            prompt: prompt.to_string(),
            history,
            session_id: self.meta.id.clone(),
            session_dir: self.dir.clone(),
            workspace: self.workspace.clone(),
            background: self.background.clone(),
            compaction: self.compaction.clone(),
        };
        let outcome = self.runner.run(req, events, cancel).await;
        if self.meta.title.is_empty() {
            self.meta.title = prompt.chars().take(120).collect();
        }
        self.meta.runs += 1;
        self.meta.updated_at = now_rfc3339();
        self.meta.last_status = Some(outcome.status.as_str().to_string());
        self.meta.last_run_id = Some(outcome.run_id.clone());
        if let Err(e) = atomic_write_json(&self.dir.join("session.json"), &self.meta) {
            tracing::warn!("cannot update session.json: {e}");
        }
        outcome
    }
}

fn read_meta(dir: &Path) -> Option<SessionMeta> {
    let text = std::fs::read_to_string(dir.join("session.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// Sessions on disk, newest first.
pub fn list_sessions(paths: &Paths) -> Vec<SessionMeta> {
    let Ok(rd) = std::fs::read_dir(paths.sessions_dir()) else {
        return Vec::new();
    };
    let mut out: Vec<SessionMeta> = rd
        .filter_map(Result::ok)
        .filter_map(|e| read_meta(&e.path()))
        .collect();
    out.sort_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| b.created_at.cmp(&a.created_at))
    });
    out
}

/// Finds runs a crash left `running`, marks them `interrupted`, and records
/// that in their session: an `end` trace record and an assistant message
/// holding whatever text had streamed before the crash (spec §5.4).
pub fn reconcile_interrupted(paths: &Paths) -> Vec<Reconciled> {
    let store = RunStateStore::new(paths.runs_dir());
    let reconciled = match store.reconcile_interrupted() {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("cannot reconcile interrupted runs: {e}");
            return Vec::new();
        }
    };
    for r in &reconciled {
        let partial = std::fs::read_to_string(r.run_dir.join(PARTIAL_FILE))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v.get("text").and_then(|t| t.as_str()).map(String::from))
            .unwrap_or_default();
        let Some(sid) = r.session_id.as_deref().filter(|s| valid_id(s)) else {
            continue;
        };
        let sdir = paths.session_dir(sid);
        if !sdir.is_dir() {
            continue;
        }
        let text = if partial.trim().is_empty() {
            format!("[interrupted: {}; no reply had been streamed]", r.reason)
        } else {
            format!("{partial}\n\n[interrupted: {}]", r.reason)
        };
        match MessageLog::open(&sdir) {
            Ok(mut log) => {
                let stored = StoredMessage {
                    message: Message::assistant(text),
                    ts: now_rfc3339(),
                    run_id: Some(r.run_id.clone()),
                    status: Some("interrupted".into()),
                };
                if let Err(e) = log.append(&stored) {
                    tracing::warn!("cannot record the interruption in session {sid}: {e}");
                }
            }
            Err(e) => tracing::warn!("cannot open session {sid}: {e}"),
        }
        let iter = TraceWriter::max_iter(&sdir);
        if let Ok(mut t) = TraceWriter::open(&sdir, Default::default()) {
            let _ = t.write(serde_json::json!({
                "type": "end", "iter": iter, "status": "interrupted", "reason": r.reason, "run_id": r.run_id,
                "iterations": 0,
            }));
        }
        if let Some(mut meta) = read_meta(&sdir) {
            meta.last_status = Some("interrupted".into());
            meta.updated_at = now_rfc3339();
            let _ = atomic_write_json(&sdir.join("session.json"), &meta);
        }
        let _ = std::fs::remove_file(r.run_dir.join(PARTIAL_FILE));
    }
    reconciled
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UI spawns turns on the runtime: the turn's future must be `Send`.
    #[allow(dead_code)]
    fn a_turn_is_send(s: &mut Session) {
        fn is_send<T: Send>(_: T) {}
        is_send(s.send("x", EventSink::none(), CancellationToken::new()));
    }

    #[test]
    fn ids_are_validated() {
        assert!(valid_id("0123456789ab"));
        assert!(valid_id("my-session_1"));
        assert!(!valid_id("../etc"));
        assert!(!valid_id(""));
        assert!(!valid_id(&"a".repeat(65)));
        assert_eq!(new_id().len(), 12);
    }
}
