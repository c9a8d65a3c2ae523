//! One conversation: its directory, history, workspace and the loop that
//! runs its turns. A session is locked while open, so two processes never
//! append to the same logs (docs §5.4: one in-flight run per session).

use crate::agent::plan::TurnPlan;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::agent::compaction::CompactionRequest;
use crate::agent::input::{MessageTooLarge, check_message_size};
use crate::agent::run_loop::{MESSAGE_TOO_LARGE, PARTIAL_FILE};
use crate::agent::{EventSink, Loop, LoopDeps, RunOutcome, RunRequest, context};
use crate::model::Message;
use crate::store::messages::now_rfc3339;
use crate::store::run_state::{Reconciled, Status};
use crate::store::trace_record::EndRecord;
use crate::store::{
    MessageLog, Paths, RunStateStore, StoredMessage, TraceRecord, TraceWriter, atomic_write_json,
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
    #[error(transparent)]
    Io(#[from] crate::fsio::IoError),
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
    /// Plan mode of the turns sent from now on (docs §4.8).
    plan: TurnPlan,
    runner: Loop,
    history_chars: usize,
    /// The unreadable lines of the message log were already reported to the
    /// user (by the caller of [`Session::messages`] or a turn's notice), so
    /// they are not reported again on every turn.
    skipped_reported: AtomicBool,
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
        std::fs::create_dir_all(&dir).map_err(|source| {
            SessionError::Io(crate::fsio::IoError::new("create", &dir, source))
        })?;
        let lock_path = dir.join(".lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| {
                SessionError::Io(crate::fsio::IoError::new("open", &lock_path, source))
            })?;
        lock.try_lock()
            .map_err(|_| SessionError::Busy(id.clone()))?;
        let workspace = dir.join("workspace");
        std::fs::create_dir_all(&workspace).map_err(|source| {
            SessionError::Io(crate::fsio::IoError::new("create", &workspace, source))
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
            plan: TurnPlan::Off,
            runner: Loop::new(deps),
            history_chars,
            skipped_reported: AtomicBool::new(false),
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

    /// Works in `dir` (the user's folder, `--workspace`) instead of the
    /// session's own `workspace/`; `None` keeps the session's.
    pub fn with_workspace(mut self, dir: Option<PathBuf>) -> Self {
        if let Some(d) = dir {
            self.workspace = d;
        }
        self
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

    /// Plan mode for the turns sent from now on: plan only with read-only
    /// tools, carry out an approved plan, or off (docs §4.8).
    pub fn set_plan(&mut self, plan: TurnPlan) {
        self.plan = plan;
    }

    /// Stored messages; the count of unreadable lines is reported alongside
    /// (the caller tells the user, so later turns do not repeat it).
    pub fn messages(&self) -> Result<(Vec<StoredMessage>, usize), SessionError> {
        let read = MessageLog::read(&self.dir)?;
        if !read.skipped_lines.is_empty() {
            self.skipped_reported.store(true, Ordering::Relaxed);
        }
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
        let (stored, skipped) = MessageLog::read(&self.dir)
            .map(|r| (r.messages, r.skipped_lines))
            .unwrap_or_default();
        // Said once per open session: the lines stay unreadable every turn.
        let notices = if skipped.is_empty() || self.skipped_reported.swap(true, Ordering::Relaxed) {
            Vec::new()
        } else {
            vec![skipped_lines_notice(&self.dir, &skipped)]
        };
        let history = context::history_from_stored(&stored, self.history_chars);
        let req = RunRequest {
            prompt: prompt.to_string(),
            history,
            session_id: self.meta.id.clone(),
            session_dir: self.dir.clone(),
            workspace: self.workspace.clone(),
            background: self.background.clone(),
            compaction: self.compaction.clone(),
            notices,
            plan: self.plan.clone(),
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

/// One line telling the user that `skipped` (1-based line numbers) of the
/// message log in `session_dir` could not be read and were left out.
pub fn skipped_lines_notice(session_dir: &Path, skipped: &[usize]) -> String {
    let shown: Vec<String> = skipped.iter().take(5).map(usize::to_string).collect();
    let more = if skipped.len() > shown.len() {
        ", …"
    } else {
        ""
    };
    format!(
        "{} unreadable line(s) of the session's message log were skipped (line {}{more} of {})",
        skipped.len(),
        shown.join(", "),
        session_dir
            .join(crate::store::messages::MESSAGES_FILE)
            .display()
    )
}

/// Sessions on disk, newest first.
pub fn list_sessions(paths: &Paths) -> Vec<SessionMeta> {
    list_sessions_reporting(paths).0
}

/// [`list_sessions`], plus the session directories left out because their
/// `session.json` exists but cannot be read.
pub fn list_sessions_reporting(paths: &Paths) -> (Vec<SessionMeta>, Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(paths.sessions_dir()) else {
        return (Vec::new(), Vec::new());
    };
    let mut out = Vec::new();
    let mut unreadable = Vec::new();
    for dir in rd.filter_map(Result::ok).map(|e| e.path()) {
        match read_meta(&dir) {
            Some(m) => out.push(m),
            // A directory without one is being created, not damaged.
            None if dir.join("session.json").is_file() => unreadable.push(dir),
            None => {}
        }
    }
    out.sort_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| b.created_at.cmp(&a.created_at))
    });
    unreadable.sort();
    (out, unreadable)
}

/// One line about session directories [`list_sessions_reporting`] left
/// out, or `None` when there were none.
pub fn unreadable_sessions_notice(unreadable: &[PathBuf]) -> Option<String> {
    let first = unreadable.first()?;
    Some(format!(
        "skipped {} session(s) whose session.json cannot be read (first: {})",
        unreadable.len(),
        first.join("session.json").display()
    ))
}

/// Reconciles runs a crash left `running` ([`reconcile_interrupted`]) and
/// says so in one line, or `None` when there were none. Every command that
/// shows runs or sessions (`run`, `sessions`, `trace`, the workstation)
/// calls this first, so none of them shows a dead run as still running.
///
/// First, sandbox jobs that outlived a crashed vibedesk are killed (see
/// [`crate::sandbox::jobs`]): a crash must leave no work running.
pub fn reconcile_stale_runs(paths: &Paths) -> Option<String> {
    let killed = crate::sandbox::jobs::reap_orphans(&paths.jobs_dir());
    for job in &killed {
        tracing::warn!(pgid = job.pgid, program = %job.program, run_dir = %job.run_dir.display(), "killed a sandbox job left running by an earlier crash");
    }
    let runs = stale_runs_notice(&reconcile_interrupted(paths));
    let jobs = killed.first().map(|first| {
        format!(
            "killed {} sandbox job(s) left running by an earlier crash (first: {} in {})",
            killed.len(),
            first.program,
            first.run_dir.display()
        )
    });
    match (runs, jobs) {
        (Some(r), Some(j)) => Some(format!("{r}; {j}")),
        (r, j) => r.or(j),
    }
}

fn stale_runs_notice(reconciled: &[Reconciled]) -> Option<String> {
    let first = reconciled.first()?;
    let session = first
        .session_id
        .as_deref()
        .map(|s| format!(", session {s}"))
        .unwrap_or_default();
    Some(format!(
        "{} run(s) left running by an earlier crash were marked interrupted (first: run {}{session})",
        reconciled.len(),
        first.run_id
    ))
}

/// Finds runs a crash left `running`, marks them `interrupted`, and records
/// that in their session: an `end` trace record and an assistant message
/// holding whatever text had streamed before the crash (docs §5.4).
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
            let end = TraceRecord::End(EndRecord {
                iter,
                status: Status::Interrupted,
                iterations: 0,
                reason: r.reason.clone(),
                degraded: false,
                stalled: false,
                run_id: Some(r.run_id.clone()),
            });
            let _ = t.write(end.into());
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
