//! The memory store: entries, recall, dedup and reinforcement (docs §8.3–§8.5),
//! compression with archive (§8.6), GC (§8.7), import, and the index.
//!
//! Writes are atomic (temp file, fsync, rename, fsync of the directory) and
//! serialised by an in-process mutex plus an exclusive `flock` on
//! `<memory>/.lock` (5 s timeout, 0.1 s poll; docs §8.2), so the workstation
//! and a `vibedesk memory` command can share the folder. Every write, GC move
//! and compression updates the index in the same call.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use nix::fcntl::{Flock, FlockArg};

use super::MemoryError;
use super::atomic::{fsync_dir, write_atomic};
use super::compression::{self, CompressOptions, Level, Scoring};
use super::entry::{
    self, Entry, MemoryType, NewEntry, Origin, Stamp, UNCONFIRMED_LABEL, clean_keywords,
    compute_importance, content_hash, days_between, format_ts, one_line, render, sanitize_body,
    slug_with_hash, truncate_body,
};
use super::flags::MemoryFlags;
use crate::fsio::IoError;
// Entries are read through the hierarchy module so `Entry::file` is the
// path relative to `entries/` in both layouts.
use super::frontmatter;
use super::hierarchy::{self, read_entry};
use super::index::{Index, MessageHit, remove_db_files};
use super::tokenize::{match_expression, query_terms, recall_token_set, recall_tokens};

/// Lines of `MEMORY.md` in the system-prompt snapshot (docs §4.4).
pub const SNAPSHOT_LINES: usize = 200;
/// Dedup window (docs §8.5): an identical add within this is skipped.
pub const DEDUP_WINDOW_SECS: i64 = 30;
/// Per-memory cap on the sum of reinforcement deltas in one store instance.
pub const MAX_SESSION_DELTA: f64 = 0.5;
/// GC thresholds (docs §8.7).
pub const ARCHIVE_THRESHOLD: f64 = 0.15;
pub const DELETE_THRESHOLD: f64 = 0.05;
pub const MIN_AGE_DAYS: f64 = 7.0;
/// Deletion stays off (docs §8.7): GC only ever archives.
pub const ENABLE_DELETE: bool = false;
/// Lock wait (docs §8.2).
const LOCK_TIMEOUT: Duration = Duration::from_secs(5);
const LOCK_POLL: Duration = Duration::from_millis(100);

/// How a `MEMORY.md` line of a memory an MCP client wrote begins.
const EXTERNAL_LINE: &str = "- (external";

/// The cleaned text of an entry being written.
#[derive(Clone, Copy)]
struct NewText<'a> {
    title: &'a str,
    description: &'a str,
    memory_type: MemoryType,
    keywords: &'a [String],
    body: &'a str,
    source: Option<&'a str>,
    origin: Origin,
}

/// The weight of a memory the model wrote and the user has not kept in
/// recall's score (docs §8.4): the user's own outrank it at equal match.
pub const UNCONFIRMED_WEIGHT: f64 = 0.75;

fn origin_weight(e: &Entry) -> f64 {
    if e.is_unconfirmed() {
        UNCONFIRMED_WEIGHT
    } else {
        1.0
    }
}

/// Best first; a stable sort, so equal scores keep their order, except
/// that the user's memories come before unconfirmed ones.
fn sort_by_score(scored: &mut [(Entry, f64)]) {
    scored.sort_by(|a, b| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.0.is_unconfirmed().cmp(&b.0.is_unconfirmed()))
    });
}

/// What [`MemoryStore::keep`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum KeepOutcome {
    /// The entry's `confirmed` is now this.
    Set {
        title: String,
        confirmed: bool,
    },
    /// The user wrote it: it is theirs already.
    UsersOwn {
        title: String,
    },
    NotFound,
}

/// How an entry's `MEMORY.md` line is marked.
#[derive(Clone, Copy)]
enum LineMark<'a> {
    Own,
    External(&'a str),
    Unconfirmed,
}

impl<'a> LineMark<'a> {
    fn of(e: &'a Entry) -> Self {
        match &e.source {
            Some(s) => LineMark::External(s),
            None if e.is_unconfirmed() => LineMark::Unconfirmed,
            None => LineMark::Own,
        }
    }
}

/// What [`MemoryStore::add`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum AddOutcome {
    Saved {
        path: PathBuf,
        file: String,
        /// An entry with this title existed and was replaced.
        replaced: bool,
    },
    /// The same entry was added less than 30 s ago (quality flag on).
    Duplicate,
}

/// Reinforcement events and their quality deltas (docs §8.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReinforceEvent {
    TaskSuccess,
    TaskFailure,
    UserConfirm,
    UserReject,
    PassiveDecay,
}

impl ReinforceEvent {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim() {
            "task_success" => ReinforceEvent::TaskSuccess,
            "task_failure" => ReinforceEvent::TaskFailure,
            "user_confirm" => ReinforceEvent::UserConfirm,
            "user_reject" => ReinforceEvent::UserReject,
            "passive_decay" => ReinforceEvent::PassiveDecay,
            _ => return None,
        })
    }

    pub fn delta(self) -> f64 {
        match self {
            ReinforceEvent::TaskSuccess => 0.1,
            ReinforceEvent::TaskFailure => -0.15,
            ReinforceEvent::UserConfirm => 0.2,
            ReinforceEvent::UserReject => -0.3,
            ReinforceEvent::PassiveDecay => -0.05,
        }
    }
}

/// What [`MemoryStore::reinforce`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Reinforce {
    Applied {
        old: f64,
        new: f64,
    },
    /// The quality flag is off.
    Disabled,
    NotFound,
    /// This memory's reinforcement in this instance would pass ±0.5.
    CapReached,
}

impl Reinforce {
    pub fn applied(&self) -> bool {
        matches!(self, Reinforce::Applied { .. })
    }
}

/// One GC decision (docs §8.7).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GcAction {
    pub title: String,
    pub file: String,
    /// `archive` (or `delete`, which stays disabled).
    pub action: String,
    /// Rounded to 4 decimals.
    pub importance: f64,
    pub reason: String,
    /// Where the entry went (execute mode).
    pub archived_to: Option<PathBuf>,
    pub error: Option<String>,
}

/// One compression step.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CompressionRecord {
    pub title: String,
    pub file: String,
    pub from: String,
    pub to: String,
    /// The archived original; `None` in a dry run.
    pub archive: Option<PathBuf>,
    /// Jaccard token overlap of the compressed body with the original.
    pub retention: f64,
    pub chars_before: usize,
    pub chars_after: usize,
}

/// What a GC run did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct GcReport {
    /// False when the GC flag is off (nothing was done).
    pub enabled: bool,
    pub dry_run: bool,
    pub actions: Vec<GcAction>,
    pub compressions: Vec<CompressionRecord>,
    /// Failures that did not stop the run (one entry each).
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ImportReport {
    /// (source, file name in `entries/`, title)
    pub imported: Vec<(PathBuf, String, String)>,
    /// (source, reason)
    pub skipped: Vec<(PathBuf, String)>,
}

/// Matches of one past session.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SessionResult {
    pub session_id: String,
    pub title: String,
    pub matches: Vec<SessionMatch>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SessionMatch {
    pub role: String,
    pub ts: String,
    pub line: u64,
    pub snippet: String,
}

#[derive(Default)]
struct IndexSlot {
    index: Option<Index>,
    /// Set when the index cannot be used at all; recall then scans.
    disabled: Option<String>,
    /// The spec's "rebuild once per process when a search finds nothing".
    auto_rebuilt: bool,
}

/// Held while writing: the in-process mutex and, when it could be taken,
/// the cross-process flock.
struct WriteGuard<'a> {
    _inner: MutexGuard<'a, ()>,
    _flock: Option<Flock<File>>,
}

/// Why an archive copy could not be made (the entry is then left alone).
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("no free archive name")]
    NoFreeName,
}

/// The memory folder of one data directory.
pub struct MemoryStore {
    root: PathBuf,
    entries_dir: PathBuf,
    archive_dir: PathBuf,
    flags: MemoryFlags,
    snapshot: String,
    max_entry_chars: usize,
    index: Mutex<IndexSlot>,
    dedup: Mutex<HashMap<String, DateTime<Utc>>>,
    session_deltas: Mutex<HashMap<String, f64>>,
    writer: Mutex<()>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("root", &self.root)
            .field("flags", &self.flags)
            .finish()
    }
}

fn lock_ignoring_poison<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn modified_of(meta: &std::fs::Metadata) -> DateTime<Utc> {
    meta.modified()
        .map(DateTime::<Utc>::from)
        .unwrap_or_else(|_| Utc::now())
}

/// Python's `repr(round(x, 4))`, as the original's gc.log shows importance.
fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

fn py_float(x: f64) -> String {
    if x.fract() == 0.0 && x.is_finite() {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

impl MemoryStore {
    /// Opens (creating) the memory folder `root` (usually
    /// [`super::memory_dir`] of the data dir), freezes the snapshot of
    /// `MEMORY.md`, and opens the index, reconciling it with the files or
    /// rebuilding it when it is missing or corrupt. An index that cannot be
    /// opened at all is logged and recall falls back to scanning the files.
    pub fn open(root: impl Into<PathBuf>, flags: MemoryFlags) -> Result<Self, MemoryError> {
        let root = root.into();
        let entries_dir = root.join("entries");
        std::fs::create_dir_all(&entries_dir)
            .map_err(|e| MemoryError::io("create", &entries_dir, e))?;
        if flags.hierarchy {
            hierarchy::ensure_dirs(&entries_dir)?;
        }
        let mut store = MemoryStore {
            archive_dir: root.join("archive"),
            entries_dir,
            root,
            flags,
            snapshot: String::new(),
            max_entry_chars: entry::MAX_ENTRY_CHARS,
            index: Mutex::new(IndexSlot::default()),
            dedup: Mutex::new(HashMap::new()),
            session_deltas: Mutex::new(HashMap::new()),
            writer: Mutex::new(()),
        };
        if !store.memory_md_path().exists() && store.has_entry_files() {
            let entries = store.list()?;
            let _guard = store.lock(false)?;
            store.rebuild_memory_md(&entries)?;
        }
        store.snapshot = store.read_snapshot();
        {
            let mut slot = lock_ignoring_poison(&store.index);
            store.ensure_index(&mut slot);
        }
        Ok(store)
    }

    /// Overrides the body limit (default 8,000 characters).
    pub fn with_max_entry_chars(mut self, limit: usize) -> Self {
        self.max_entry_chars = limit.max(1);
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn entries_dir(&self) -> &Path {
        &self.entries_dir
    }

    pub fn archive_dir(&self) -> &Path {
        &self.archive_dir
    }

    pub fn flags(&self) -> &MemoryFlags {
        &self.flags
    }

    pub fn index_path(&self) -> PathBuf {
        self.root.join("index.sqlite")
    }

    pub fn memory_md_path(&self) -> PathBuf {
        self.root.join("MEMORY.md")
    }

    pub fn gc_log_path(&self) -> PathBuf {
        self.root.join("gc.log")
    }

    fn compress_options(&self, flags: &MemoryFlags) -> CompressOptions {
        CompressOptions {
            scoring: if flags.corrected_idf {
                Scoring::Corrected
            } else {
                Scoring::Original
            },
        }
    }

    // ----- locking ---------------------------------------------------------

    /// Takes the write lock. `required = false` proceeds without the flock
    /// after the timeout ("best effort", as the original's add/remove);
    /// `true` fails with [`MemoryError::Locked`] (lifecycle writes).
    fn lock(&self, required: bool) -> Result<WriteGuard<'_>, MemoryError> {
        let inner = lock_ignoring_poison(&self.writer);
        let lock_path = self.root.join(".lock");
        let deadline = Instant::now() + LOCK_TIMEOUT;
        let mut flock = None;
        loop {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_path)
                .map_err(|e| MemoryError::io("open", &lock_path, e))?;
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(l) => {
                    flock = Some(l);
                    break;
                }
                Err((_, errno)) if errno == nix::errno::Errno::EWOULDBLOCK => {
                    if Instant::now() >= deadline {
                        break;
                    }
                    std::thread::sleep(LOCK_POLL);
                }
                // A filesystem without flock: the in-process mutex still holds.
                Err(_) => break,
            }
        }
        if flock.is_none() && required && lock_path.exists() {
            // Distinguish "held elsewhere" from "unsupported": only the
            // former is a reason to refuse.
            if let Ok(f) = File::open(&lock_path)
                && let Err((_, nix::errno::Errno::EWOULDBLOCK)) =
                    Flock::lock(f, FlockArg::LockExclusiveNonblock)
            {
                return Err(MemoryError::Locked(self.root.clone()));
            }
        }
        if flock.is_none() {
            tracing::warn!(dir = %self.root.display(), "memory lock not acquired; writing best effort");
        }
        Ok(WriteGuard {
            _inner: inner,
            _flock: flock,
        })
    }

    // ----- reading ---------------------------------------------------------

    fn has_entry_files(&self) -> bool {
        self.entry_files().map(|f| !f.is_empty()).unwrap_or(false)
    }

    /// Entry file names in `entries/`, sorted.
    fn entry_files(&self) -> Result<Vec<String>, MemoryError> {
        if self.flags.hierarchy {
            hierarchy::recover_orphans(&self.entries_dir);
        }
        super::listing::entry_files(&self.entries_dir)
    }

    /// Every entry, sorted by file name. Unreadable files are skipped.
    pub fn list(&self) -> Result<Vec<Entry>, MemoryError> {
        Ok(self
            .entry_files()?
            .iter()
            .filter_map(|f| read_entry(&self.entries_dir.join(f)).ok())
            .collect())
    }

    /// Number of entry files.
    pub fn count(&self) -> Result<usize, MemoryError> {
        Ok(self.entry_files()?.len())
    }

    /// An entry by exact title, else by file name or stem (`project_x` or
    /// just `x`), like the original's `find`.
    pub fn get(&self, name: &str) -> Result<Option<Entry>, MemoryError> {
        let needle = name.trim();
        if needle.is_empty() {
            return Ok(None);
        }
        for file in self.files_titled(needle)? {
            if let Ok(e) = read_entry(&self.entries_dir.join(&file))
                && e.title == needle
            {
                return Ok(Some(e));
            }
        }
        let files = self.entry_files()?;
        // `project/x.md` answers to `project_x` too, as in the flat layout.
        let stem_of = |f: &str| hierarchy::flat_stem(f);
        if let Some(f) = files.iter().find(|f| **f == needle || stem_of(f) == needle)
            && let Ok(e) = read_entry(&self.entries_dir.join(f))
        {
            return Ok(Some(e));
        }
        // Files written by hand since the index was reconciled: scan.
        if let Some(e) = self.list()?.into_iter().find(|e| e.title == needle) {
            self.index_file(&e.file);
            return Ok(Some(e));
        }
        let suffix = format!("_{needle}");
        match files.iter().find(|f| stem_of(f).ends_with(&suffix)) {
            Some(f) => Ok(read_entry(&self.entries_dir.join(f)).ok()),
            None => Ok(None),
        }
    }

    /// Files whose entry has this exact title: from the index, else a scan.
    fn files_titled(&self, title: &str) -> Result<Vec<String>, MemoryError> {
        if let Some(files) = self.with_index(|ix| ix.files_with_title(title)) {
            return Ok(files
                .into_iter()
                .filter(|f| self.entries_dir.join(f).exists())
                .collect());
        }
        Ok(self
            .list()?
            .into_iter()
            .filter(|e| e.title == title)
            .map(|e| e.file)
            .collect())
    }

    // ----- snapshot and MEMORY.md -------------------------------------------

    /// The snapshot frozen when this store was opened (docs §4.4): later
    /// adds and removes do not change it.
    pub fn snapshot(&self) -> &str {
        &self.snapshot
    }

    /// The snapshot as `MEMORY.md` reads now: its newest 200 lines. The
    /// original cut the file itself to its first 200 lines, so new memories
    /// past 200 silently never reached the prompt (docs §11.1 item 9); here
    /// the file keeps every line and the snapshot says how many are left out.
    pub fn read_snapshot(&self) -> String {
        let Ok(text) = std::fs::read_to_string(self.memory_md_path()) else {
            return String::new();
        };
        let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        // Memories MCP clients wrote never reach the prompt on their own
        // (docs §4.4, §13.4): their titles and descriptions are outside text.
        let lines: Vec<&str> = all
            .iter()
            .copied()
            .filter(|l| !l.starts_with(EXTERNAL_LINE))
            .collect();
        let external = all.len() - lines.len();
        let mut notes = String::new();
        if external > 0 {
            notes.push_str(&format!("({external} memories written by MCP clients are not listed here; the recall tool shows them, marked with their source)\n"));
        }
        if lines.len() <= SNAPSHOT_LINES {
            return format!("{notes}{}", lines.join("\n"));
        }
        let hidden = lines.len() - SNAPSHOT_LINES;
        let mut out = format!(
            "{notes}({hidden} older memories are not listed here; the recall tool finds them)\n"
        );
        out.push_str(&lines[hidden..].join("\n"));
        out
    }

    /// An entry's `MEMORY.md` line; one an MCP client wrote starts with
    /// `- (external, <source>)`, which a title (always in brackets) cannot;
    /// one the model wrote and the user has not kept says so (docs §8.3).
    fn index_line(title: &str, file: &str, description: &str, mark: LineMark<'_>) -> String {
        match mark {
            LineMark::External(s) => {
                format!("{EXTERNAL_LINE}, {s}) [{title}](entries/{file}) — {description}")
            }
            LineMark::Unconfirmed => {
                format!("- ({UNCONFIRMED_LABEL}) [{title}](entries/{file}) — {description}")
            }
            LineMark::Own => format!("- [{title}](entries/{file}) — {description}"),
        }
    }

    /// Replaces the line of `file` (and drops lines of `also_remove`) or
    /// appends one. Caller holds the write lock.
    fn upsert_memory_md(
        &self,
        title: &str,
        file: &str,
        description: &str,
        mark: LineMark<'_>,
        also_remove: &[String],
    ) -> Result<(), MemoryError> {
        let path = self.memory_md_path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let new_line = Self::index_line(title, file, description, mark);
        let target = format!("](entries/{file})");
        let stale: Vec<String> = also_remove
            .iter()
            .map(|f| format!("](entries/{f})"))
            .collect();
        let mut lines: Vec<String> = Vec::new();
        let mut replaced = false;
        for line in text.lines() {
            if line.contains(&target) {
                if !replaced {
                    lines.push(new_line.clone());
                    replaced = true;
                }
            } else if !stale.iter().any(|s| line.contains(s)) && !line.trim().is_empty() {
                lines.push(line.to_string());
            }
        }
        if !replaced {
            lines.push(new_line);
        }
        write_atomic(&path, (lines.join("\n") + "\n").as_bytes())
    }

    fn remove_from_memory_md(&self, files: &[String]) -> Result<(), MemoryError> {
        let path = self.memory_md_path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(());
        };
        let targets: Vec<String> = files.iter().map(|f| format!("](entries/{f})")).collect();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim().is_empty() && !targets.iter().any(|t| l.contains(t)))
            .collect();
        let mut out = lines.join("\n");
        if !out.is_empty() {
            out.push('\n');
        }
        write_atomic(&path, out.as_bytes())
    }

    /// Rewrites `MEMORY.md` from entries, oldest first (newest last, so the
    /// snapshot's tail holds the newest).
    fn rebuild_memory_md(&self, entries: &[Entry]) -> Result<(), MemoryError> {
        let mut sorted: Vec<&Entry> = entries.iter().collect();
        sorted.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.file.cmp(&b.file)));
        let mut out = String::new();
        for e in sorted {
            out.push_str(&Self::index_line(
                &one_line(&e.title),
                &e.file,
                &one_line(&e.description),
                LineMark::of(e),
            ));
            out.push('\n');
        }
        write_atomic(&self.memory_md_path(), out.as_bytes())
    }

    // ----- index plumbing --------------------------------------------------

    fn ensure_index(&self, slot: &mut IndexSlot) {
        let path = self.index_path();
        if slot.index.is_some() && !path.exists() {
            // Deleted under us: start over from the files.
            tracing::warn!(path = %path.display(), "memory index file vanished; rebuilding");
            slot.index = None;
        }
        if slot.index.is_some() || slot.disabled.is_some() {
            return;
        }
        if !path.exists() {
            // A WAL left from a deleted database must not be replayed into a new one.
            remove_db_files(&path);
        }
        let opened = match Index::open(&path) {
            Ok(ix) => Ok(ix),
            Err(e) => {
                tracing::warn!(path = %path.display(), "memory index unusable ({e}); rebuilding from the files");
                Index::recreate(&path)
            }
        };
        match opened {
            Ok((mut ix, _fresh)) => {
                if let Err(e) = self.reconcile(&mut ix) {
                    tracing::warn!("memory index reconcile failed: {e}");
                }
                slot.index = Some(ix);
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), "memory index disabled: {e}");
                slot.disabled = Some(e.to_string());
            }
        }
    }

    /// Runs `f` on the index; `None` when the index is unavailable or `f`
    /// failed (logged). A corrupt database is deleted so the next use
    /// rebuilds it; other failures reopen it, which reconciles missed updates.
    fn with_index<T>(&self, f: impl FnOnce(&mut Index) -> rusqlite::Result<T>) -> Option<T> {
        let mut slot = lock_ignoring_poison(&self.index);
        self.ensure_index(&mut slot);
        let ix = slot.index.as_mut()?;
        match f(ix) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!("memory index operation failed: {e}");
                let corrupt = matches!(
                    &e,
                    rusqlite::Error::SqliteFailure(err, _)
                        if matches!(err.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
                );
                slot.index = None;
                if corrupt {
                    remove_db_files(&self.index_path());
                }
                None
            }
        }
    }

    /// Makes the index match the files: changed or new files (by mtime and
    /// size) are re-read, rows of vanished files dropped.
    fn reconcile(&self, ix: &mut Index) -> Result<usize, MemoryError> {
        let index_err = |source| MemoryError::Index {
            path: self.index_path(),
            source,
        };
        let stamps = ix.entry_stamps().map_err(index_err)?;
        let files = self.entry_files()?;
        let mut changed = 0usize;
        let present: HashSet<&str> = files.iter().map(String::as_str).collect();
        let mut batch: Vec<Entry> = Vec::new();
        for file in &files {
            let path = self.entries_dir.join(file);
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            let stamp = (
                super::index::mtime_ns(modified_of(&meta)),
                meta.len() as i64,
            );
            if stamps.get(file) == Some(&stamp) {
                continue;
            }
            if let Ok(e) = read_entry(&path) {
                batch.push(e);
                changed += 1;
            }
            // One transaction per few hundred entries: a rebuild of
            // thousands must not pay a commit per entry.
            if batch.len() >= 500 {
                ix.upsert_entries(&batch).map_err(index_err)?;
                batch.clear();
            }
        }
        ix.upsert_entries(&batch).map_err(index_err)?;
        for file in stamps.keys() {
            if !present.contains(file.as_str()) {
                ix.remove_entry(file).map_err(index_err)?;
                changed += 1;
            }
        }
        Ok(changed)
    }

    /// Rebuilds the memory part of the index from the files; returns the
    /// number of entries indexed.
    pub fn rebuild_index(&self) -> Result<usize, MemoryError> {
        let mut slot = lock_ignoring_poison(&self.index);
        slot.disabled = None;
        self.ensure_index(&mut slot);
        let Some(ix) = slot.index.as_mut() else {
            return Err(MemoryError::Invalid(format!(
                "the memory index {} cannot be opened",
                self.index_path().display()
            )));
        };
        let index_err = |source| MemoryError::Index {
            path: self.index_path(),
            source,
        };
        ix.clear_entries().map_err(index_err)?;
        self.reconcile(ix)?;
        ix.entry_count().map_err(index_err)
    }

    /// Number of indexed entries, if the index is available.
    pub fn indexed_count(&self) -> Option<usize> {
        self.with_index(|ix| ix.entry_count())
    }

    /// Re-reads one entry file into the index (or drops its row when gone).
    fn index_file(&self, file: &str) {
        let path = self.entries_dir.join(file);
        match read_entry(&path) {
            Ok(e) => {
                self.with_index(|ix| ix.upsert_entry(&e));
            }
            Err(_) => {
                self.with_index(|ix| ix.remove_entry(file));
            }
        }
    }

    // ----- writing ---------------------------------------------------------

    /// Saves an entry (docs §8.3): cleaned, truncated, atomically written,
    /// `MEMORY.md` and the index updated. The same title always maps to the
    /// same entry: saving it again replaces the body and keeps its id,
    /// creation time and statistics (also when the type changed).
    pub fn add(&self, new: NewEntry, now: DateTime<Utc>) -> Result<AddOutcome, MemoryError> {
        let title = new.title.trim();
        if title.is_empty() {
            return Err(MemoryError::Invalid(
                "memory title must not be empty or whitespace-only".into(),
            ));
        }
        let title = one_line(title);
        let description = if new.description.trim().is_empty() {
            title.clone()
        } else {
            one_line(new.description.trim())
        };
        let body = truncate_body(&sanitize_body(&new.content), self.max_entry_chars);
        if self.flags.quality {
            let key = content_hash(&title, &description, &body);
            let mut seen = lock_ignoring_poison(&self.dedup);
            seen.retain(|_, t| (now - *t).num_seconds() < DEDUP_WINDOW_SECS && *t <= now);
            if let Some(t) = seen.get(&key)
                && (now - *t) < chrono::Duration::seconds(DEDUP_WINDOW_SECS)
            {
                return Ok(AddOutcome::Duplicate);
            }
            seen.insert(key, now);
        }
        let keywords = clean_keywords(&new.keywords);
        let source = new.source.as_deref().and_then(entry::clean_source);
        let text = NewText {
            title: &title,
            description: &description,
            memory_type: new.memory_type,
            keywords: &keywords,
            body: &body,
            source: source.as_deref(),
            origin: new.origin,
        };
        let result = self.write_new(&text, now);
        if result.is_err() && self.flags.quality {
            // A failed save must not make its retry look like a duplicate.
            let key = content_hash(&title, &description, &body);
            lock_ignoring_poison(&self.dedup).remove(&key);
        }
        result
    }

    fn write_new(&self, new: &NewText<'_>, now: DateTime<Utc>) -> Result<AddOutcome, MemoryError> {
        let NewText {
            title,
            description,
            memory_type,
            keywords,
            body,
            source,
            origin,
        } = *new;
        let title = title.to_string();
        let _guard = self.lock(false)?;
        if self.flags.hierarchy {
            // An orphan `<slug>` written since the last scan must become the
            // `<slug>.md` this save replaces, not linger beside it.
            hierarchy::recover_orphans(&self.entries_dir);
        }
        let same_title = self.files_titled(&title)?;
        let file = self.free_file_name(memory_type, &title)?;
        let path = self.entries_dir.join(&file);
        // Keep identity and statistics of the entry being replaced.
        let previous = std::iter::once(file.clone())
            .chain(same_title.iter().cloned())
            .filter_map(|f| read_entry(&self.entries_dir.join(f)).ok())
            .find(|e| e.title == title);
        // An MCP client never replaces the user's own memory (docs §13.4).
        if source.is_some() && previous.as_ref().is_some_and(|p| !p.is_external()) {
            return Err(MemoryError::Protected(title));
        }
        let stamp = Stamp {
            id: previous
                .as_ref()
                .map(|p| p.id.clone())
                .unwrap_or_else(|| entry::short_id(&format!("{title}{}", now.to_rfc3339()))),
            created_at: previous.as_ref().map(|p| p.created_at).unwrap_or(now),
            updated_at: now,
            last_accessed: now,
            quality: previous.as_ref().map(|p| p.quality).unwrap_or(0.5),
            access_count: previous.as_ref().map(|p| p.access_count).unwrap_or(0),
            importance: previous.as_ref().map(|p| p.quality).unwrap_or(0.5),
            related: previous
                .as_ref()
                .map(|p| p.related.clone())
                .unwrap_or_default(),
            source: source.map(str::to_string),
            origin,
            confirmed: origin == Origin::User,
        };
        let text = render(&title, description, memory_type, keywords, &stamp, body);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| MemoryError::io("create", dir, e))?;
        }
        write_atomic(&path, text.as_bytes())?;
        let stale: Vec<String> = same_title.into_iter().filter(|f| *f != file).collect();
        for old in &stale {
            let old_path = self.entries_dir.join(old);
            if let Err(e) = std::fs::remove_file(&old_path)
                && e.kind() != ErrorKind::NotFound
            {
                tracing::warn!(path = %old_path.display(), "cannot remove the replaced entry: {e}");
            }
            self.with_index(|ix| ix.remove_entry(old));
        }
        let mark = match (source, origin) {
            (Some(s), _) => LineMark::External(s),
            (None, Origin::Model) => LineMark::Unconfirmed,
            (None, Origin::User) => LineMark::Own,
        };
        self.upsert_memory_md(&title, &file, description, mark, &stale)?;
        self.index_file(&file);
        hierarchy::refresh_index(&self.entries_dir, self.flags.hierarchy);
        self.relink_after_write(&file, &title, description, body, &stale, now);
        Ok(AddOutcome::Saved {
            path,
            file,
            replaced: previous.is_some(),
        })
    }

    /// A file name for `title` that no entry of another title occupies:
    /// the slug, else (on a hash collision) longer hashes.
    fn free_file_name(&self, memory_type: MemoryType, title: &str) -> Result<String, MemoryError> {
        let base = entry::slug(title);
        let candidates = [
            base.clone(),
            slug_with_hash(title, 12),
            format!("{base}_{}", &sha_hex(title)[..16]),
        ];
        for slug in candidates {
            let file = hierarchy::entry_file(self.flags.hierarchy, memory_type, &slug);
            let path = self.entries_dir.join(&file);
            match read_entry(&path) {
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(file),
                Ok(existing) if existing.title == title => return Ok(file),
                Ok(_) => continue,
                Err(e) => return Err(MemoryError::io("read", path, e)),
            }
        }
        Err(MemoryError::Invalid(format!(
            "no free file name for the memory titled {title:?}"
        )))
    }

    /// Deletes the entry with this title (docs §8.9 forget); `false` when
    /// there is none.
    pub fn remove(&self, title: &str) -> Result<bool, MemoryError> {
        self.remove_as(title, None)
    }

    /// [`MemoryStore::remove`] on behalf of `source`: an MCP client
    /// (`Some`) may remove only memories MCP clients wrote; when the title
    /// is the user's, nothing is removed and the answer is
    /// [`MemoryError::Protected`] (docs §13.4).
    pub fn remove_as(&self, title: &str, source: Option<&str>) -> Result<bool, MemoryError> {
        let title = title.trim();
        if title.is_empty() {
            return Ok(false);
        }
        let _guard = self.lock(false)?;
        let mut files = self.files_titled(title)?;
        if files.is_empty() {
            // Written by hand since the index was reconciled?
            files = self
                .list()?
                .into_iter()
                .filter(|e| e.title == title)
                .map(|e| e.file)
                .collect();
        }
        if files.is_empty() {
            return Ok(false);
        }
        if source.is_some()
            && files
                .iter()
                .any(|f| read_entry(&self.entries_dir.join(f)).is_ok_and(|e| !e.is_external()))
        {
            return Err(MemoryError::Protected(title.to_string()));
        }
        for file in &files {
            let path = self.entries_dir.join(file);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(MemoryError::io("remove", path, e)),
            }
            self.with_index(|ix| ix.remove_entry(file));
            // The unlink lives in the file's own folder (a category folder
            // with the hierarchy on).
            fsync_dir(path.parent().unwrap_or(&self.entries_dir));
        }
        self.forget_links(&files);
        self.remove_from_memory_md(&files)?;
        hierarchy::refresh_index(&self.entries_dir, self.flags.hierarchy);
        Ok(true)
    }

    /// Rewrites frontmatter fields of one entry file atomically and re-indexes it.
    fn update_fields(&self, file: &str, fields: &[(&str, &str)]) -> Result<(), MemoryError> {
        let path = self.entries_dir.join(file);
        let text = std::fs::read_to_string(&path).map_err(|e| MemoryError::io("read", &path, e))?;
        let Some(updated) = frontmatter::set_fields(&text, fields) else {
            return Err(MemoryError::Invalid(format!(
                "{} has no frontmatter to update",
                path.display()
            )));
        };
        write_atomic(&path, updated.as_bytes())?;
        self.index_file(file);
        Ok(())
    }

    /// The user keeps (`keep` true) or un-keeps a memory the model wrote
    /// (docs §8.3), found by title, file name, stem or id. Only the
    /// `confirmed` field and the entry's `MEMORY.md` line change: nothing
    /// is lost, so nothing is archived.
    pub fn keep(&self, name: &str, keep: bool) -> Result<KeepOutcome, MemoryError> {
        let found = match self.get(name)? {
            Some(e) => Some(e),
            None => {
                let id = name.trim();
                self.list()?.into_iter().find(|e| e.id == id)
            }
        };
        let Some(e) = found else {
            return Ok(KeepOutcome::NotFound);
        };
        if e.origin == Origin::User {
            return Ok(KeepOutcome::UsersOwn { title: e.title });
        }
        let _guard = self.lock(false)?;
        self.update_fields(
            &e.file,
            &[
                ("origin", Origin::Model.as_str()),
                ("confirmed", if keep { "true" } else { "false" }),
            ],
        )?;
        let kept = read_entry(&self.entries_dir.join(&e.file))
            .map_err(|err| MemoryError::io("read", &e.path, err))?;
        self.upsert_memory_md(
            &one_line(&kept.title),
            &kept.file,
            &one_line(&kept.description),
            LineMark::of(&kept),
            &[],
        )?;
        Ok(KeepOutcome::Set {
            title: kept.title,
            confirmed: kept.confirmed,
        })
    }

    /// Counts an explicit recall of `entry` (quality flag): `access_count + 1`,
    /// `last_accessed = now` (docs §8.5). Auto-recall never calls this.
    pub fn track_access(&self, entry: &Entry, now: DateTime<Utc>) -> Result<(), MemoryError> {
        if !self.flags.quality {
            return Ok(());
        }
        let _guard = self.lock(true)?;
        let current = read_entry(&self.entries_dir.join(&entry.file))
            .map_err(|e| MemoryError::io("read", &entry.path, e))?;
        self.update_fields(
            &entry.file,
            &[
                ("access_count", &(current.access_count + 1).to_string()),
                ("last_accessed", &format_ts(now)),
            ],
        )
    }

    /// Adjusts an entry's quality score (docs §8.5). `source` `user` counts
    /// fully, anything else (`system`) at 0.7×.
    pub fn reinforce(
        &self,
        title: &str,
        event: ReinforceEvent,
        source: &str,
        now: DateTime<Utc>,
    ) -> Result<Reinforce, MemoryError> {
        if !self.flags.quality {
            return Ok(Reinforce::Disabled);
        }
        let mut delta = event.delta();
        if source.trim() != "user" {
            delta *= 0.7;
        }
        let mut sums = lock_ignoring_poison(&self.session_deltas);
        let current = sums.get(title).copied().unwrap_or(0.0);
        // A small tolerance so five +0.1 steps (0.5 in floats: 0.5000000000000001) still pass.
        if (current + delta).abs() > MAX_SESSION_DELTA + 1e-9 {
            return Ok(Reinforce::CapReached);
        }
        let Some(e) = self.get(title)? else {
            return Ok(Reinforce::NotFound);
        };
        let _guard = self.lock(true)?;
        let new = (e.quality + delta).clamp(0.0, 1.0);
        let new = (new * 100.0).round() / 100.0;
        self.update_fields(
            &e.file,
            &[
                ("quality_score", &format!("{new:.2}")),
                ("updated_at", &format_ts(now)),
            ],
        )?;
        sums.insert(title.to_string(), current + delta);
        Ok(Reinforce::Applied {
            old: e.quality,
            new,
        })
    }

    // ----- recall ----------------------------------------------------------

    /// The entries most relevant to `query` (docs §8.4), at most `max`.
    /// With the `fts_index` flag the index ranks them (BM25, metadata
    /// weighted; with decay re-sorted by `score × (0.5 + 0.5 × importance)`);
    /// otherwise, or when the index is unavailable, the original's scan
    /// scoring is used. With the `links` flag, linked entries fill the
    /// remaining places (see `links.rs`). Does not count as an access.
    pub fn find_relevant(
        &self,
        query: &str,
        max: usize,
        now: DateTime<Utc>,
    ) -> Result<Vec<Entry>, MemoryError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let indexed = if self.flags.fts_index {
            self.index_relevant(query, max, now)
        } else {
            None
        };
        let mut found = match indexed {
            Some(found) => found,
            None => self.scan_relevant(query, max, now)?,
        };
        self.expand_with_links(&mut found, max);
        Ok(found)
    }

    /// [`MemoryStore::find_relevant`] without the memories MCP clients
    /// wrote: what automatic recall may put in a prompt (docs §4.2). More
    /// candidates are ranked first, so outside notes rarely crowd the
    /// user's own out.
    pub fn find_relevant_own(
        &self,
        query: &str,
        max: usize,
        now: DateTime<Utc>,
    ) -> Result<Vec<Entry>, MemoryError> {
        let wide = max.saturating_mul(4).max(max.saturating_add(10));
        let mut found = self.find_relevant(query, wide, now)?;
        found.retain(|e| !e.is_external());
        found.truncate(max);
        Ok(found)
    }

    fn index_relevant(&self, query: &str, max: usize, now: DateTime<Utc>) -> Option<Vec<Entry>> {
        let terms = query_terms(query);
        if terms.is_empty() {
            return Some(Vec::new());
        }
        let (total, counts) =
            self.with_index(|ix| Ok((ix.entry_count()?, ix.term_doc_counts(&terms)?)))?;
        if total == 0 && self.has_entry_files() {
            // The index lost its rows while the files are there: rebuild
            // from disk once (docs §8.4). A query that merely matches
            // nothing never triggers it (reconciling at open keeps the
            // index in step), so it costs no latency.
            let first_time = {
                let mut slot = lock_ignoring_poison(&self.index);
                !std::mem::replace(&mut slot.auto_rebuilt, true)
            };
            if first_time && self.rebuild_index().is_ok() {
                return self.index_relevant(query, max, now);
            }
        }
        let Some(expr) = match_expression(&select_terms(terms, &counts, total)) else {
            return Some(Vec::new());
        };
        let decay = self.flags.decay;
        // Decay re-ranks, so look at more candidates than will be returned.
        let limit = if decay { (max * 10).max(50) } else { max + 10 };
        let hits = self.with_index(|ix| ix.search_entries(&expr, limit))?;
        let mut scored: Vec<(Entry, f64)> = Vec::with_capacity(hits.len());
        for h in hits {
            let mut score = -h.rank;
            if decay {
                let last = DateTime::from_timestamp(h.last_accessed, 0).unwrap_or(now);
                let imp =
                    compute_importance(h.quality, h.access_count, days_between(last, now), true);
                score *= 0.5 + 0.5 * imp;
            }
            match read_entry(&self.entries_dir.join(&h.file)) {
                Ok(e) => {
                    let score = score * origin_weight(&e);
                    scored.push((e, score));
                }
                // A stale row: the file went away outside the store.
                Err(_) => {
                    self.with_index(|ix| ix.remove_entry(&h.file));
                }
            }
        }
        sort_by_score(&mut scored);
        let out: Vec<Entry> = scored.into_iter().take(max).map(|(e, _)| e).collect();
        Some(out)
    }

    /// The original's scan (docs §8.4): score = 2·|Q∩(title+description)| +
    /// 2·|Q∩keywords| + |Q∩body| over token sets, × (0.5 + 0.5 × importance)
    /// with decay; best first, newer files first on ties. Reads every entry.
    pub fn scan_relevant(
        &self,
        query: &str,
        max: usize,
        now: DateTime<Utc>,
    ) -> Result<Vec<Entry>, MemoryError> {
        let q = recall_token_set(query);
        if q.is_empty() || max == 0 {
            return Ok(Vec::new());
        }
        // Scored on redacted text, as the index is (§8.8): a guessed secret
        // matches nothing.
        let overlap = |text: &str| {
            recall_tokens(&crate::text::redact::redact_text(text))
                .into_iter()
                .filter(|t| q.contains(t))
                .collect::<HashSet<_>>()
                .len() as f64
        };
        let mut scored: Vec<(Entry, f64)> = Vec::new();
        for e in self.list()? {
            let mut score = 2.0 * overlap(&format!("{} {}", e.title, e.description))
                + 2.0 * overlap(&e.keywords.join(" "))
                + overlap(e.body_cut());
            if score <= 0.0 {
                continue;
            }
            if self.flags.decay {
                score *= 0.5 + 0.5 * e.importance(now, true);
            }
            score *= origin_weight(&e);
            scored.push((e, score));
        }
        // Newer files first on ties.
        scored.sort_by_key(|e| std::cmp::Reverse(e.0.modified));
        sort_by_score(&mut scored);
        Ok(scored.into_iter().take(max).map(|(e, _)| e).collect())
    }

    // ----- compression -----------------------------------------------------

    /// Copies `bytes` into the archive under `<stem>.<tag>.<UTC time>[-n].md`,
    /// a name that never replaces an earlier archive (the original used
    /// `archive/<filename>` for every level and for GC, so a daily→digest
    /// step overwrote the raw original, docs §12.6). The copy is fsynced
    /// before this returns.
    fn archive_bytes(
        &self,
        stem: &str,
        tag: &str,
        bytes: &[u8],
        now: DateTime<Utc>,
    ) -> Result<PathBuf, ArchiveError> {
        std::fs::create_dir_all(&self.archive_dir)
            .map_err(|e| IoError::new("create", &self.archive_dir, e))?;
        let tmp = self.archive_dir.join(format!(
            ".{stem}.{}.{:016x}.tmp",
            std::process::id(),
            rand::random::<u64>()
        ));
        let written = (|| -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(IoError::new("write", tmp, e).into());
        }
        let result = self.link_unique(&tmp, stem, tag, now);
        let _ = std::fs::remove_file(&tmp);
        fsync_dir(&self.archive_dir);
        result
    }

    /// Hard-links `src` into the archive under the first free unique name
    /// (`link` fails rather than replace an existing file).
    fn link_unique(
        &self,
        src: &Path,
        stem: &str,
        tag: &str,
        now: DateTime<Utc>,
    ) -> Result<PathBuf, ArchiveError> {
        let ts = now.format("%Y%m%dT%H%M%SZ");
        for n in 1..10_000 {
            let name = if n == 1 {
                format!("{stem}.{tag}.{ts}.md")
            } else {
                format!("{stem}.{tag}.{ts}-{n}.md")
            };
            let target = self.archive_dir.join(name);
            match std::fs::hard_link(src, &target) {
                Ok(()) => return Ok(target),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(IoError::new("link", target, e).into()),
            }
        }
        Err(ArchiveError::NoFreeName)
    }

    /// Compresses one entry to `target` (docs §8.6): archive the current file
    /// first (abort, entry unchanged, if that fails), compress the body,
    /// rewrite it with `compression_level`, `updated_at` and the retention
    /// estimate, re-index. Caller holds the write lock.
    fn compress_locked(
        &self,
        file: &str,
        target: Level,
        flags: &MemoryFlags,
        now: DateTime<Utc>,
    ) -> Result<CompressionRecord, MemoryError> {
        let path = self.entries_dir.join(file);
        let bytes = std::fs::read(&path).map_err(|e| MemoryError::io("read", &path, e))?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let meta = std::fs::metadata(&path).map_err(|e| MemoryError::io("stat", &path, e))?;
        let entry = entry::parse_entry(&path, &text, modified_of(&meta), meta.len());
        let stem = hierarchy::flat_stem(file);
        let archive = self
            .archive_bytes(&stem, entry.level.as_str(), &bytes, now)
            .map_err(|reason| MemoryError::ArchiveFailed {
                entry: file.to_string(),
                reason,
            })?;
        // The whole body, not the original's 8,000-character read cut: the
        // archive keeps everything, and a longer (imported) body deserves a
        // summary of all of it.
        let compressed = compression::compress(
            &entry.body,
            target,
            &entry.keywords,
            self.compress_options(flags),
        );
        let retention = compression::estimate_retention(&entry.body, &compressed);
        let now_s = format_ts(now);
        let retention_s = format!("{retention:.4}");
        let Some(updated) = frontmatter::replace_body(
            &text,
            &[
                ("compression_level", target.as_str()),
                ("updated_at", &now_s),
                ("compression_retention", &retention_s),
            ],
            &compressed,
        ) else {
            return Err(MemoryError::Invalid(format!(
                "{} has no frontmatter",
                path.display()
            )));
        };
        write_atomic(&path, updated.as_bytes())?;
        self.index_file(file);
        tracing::info!(
            file,
            from = entry.level.as_str(),
            to = target.as_str(),
            retention,
            archive = %archive.display(),
            "memory compressed"
        );
        Ok(CompressionRecord {
            title: entry.title,
            file: file.to_string(),
            from: entry.level.as_str().to_string(),
            to: target.as_str().to_string(),
            archive: Some(archive),
            retention,
            chars_before: entry.body.chars().count(),
            chars_after: compressed.chars().count(),
        })
    }

    /// Compresses one entry to `target` now, whatever its age.
    pub fn compress_entry(
        &self,
        name: &str,
        target: Level,
        now: DateTime<Utc>,
    ) -> Result<CompressionRecord, MemoryError> {
        let Some(e) = self.get(name)? else {
            return Err(MemoryError::Invalid(format!("no memory named {name:?}")));
        };
        if target <= e.level {
            return Err(MemoryError::Invalid(format!(
                "{:?} is already at level {}; levels only go raw → daily → digest",
                e.title, e.level
            )));
        }
        let _guard = self.lock(true)?;
        let flags = self.flags.clone();
        self.compress_locked(&e.file, target, &flags, now)
    }

    /// The compression pass of docs §8.7 over `entries`: each entry that
    /// [`compression::should_compress`] says is due moves one level. Dry runs
    /// compute the result (and its retention) but write nothing.
    fn compress_due_entries(
        &self,
        entries: &[Entry],
        skip: &HashSet<String>,
        flags: &MemoryFlags,
        dry_run: bool,
        now: DateTime<Utc>,
        report: &mut GcReport,
    ) {
        for e in entries {
            if skip.contains(&e.file) {
                continue;
            }
            let Some(target) = compression::should_compress(e.level, e.last_accessed, now) else {
                continue;
            };
            if dry_run {
                let compressed = compression::compress(
                    &e.body,
                    target,
                    &e.keywords,
                    self.compress_options(flags),
                );
                report.compressions.push(CompressionRecord {
                    title: e.title.clone(),
                    file: e.file.clone(),
                    from: e.level.as_str().into(),
                    to: target.as_str().into(),
                    archive: None,
                    retention: compression::estimate_retention(&e.body, &compressed),
                    chars_before: e.body.chars().count(),
                    chars_after: compressed.chars().count(),
                });
                continue;
            }
            let result = self
                .lock(true)
                .and_then(|_guard| self.compress_locked(&e.file, target, flags, now));
            match result {
                Ok(rec) => report.compressions.push(rec),
                Err(err) => {
                    tracing::warn!(file = %e.file, "compression skipped: {err}");
                    report.errors.push(format!("{}: {err}", e.file));
                }
            }
        }
    }

    /// Runs the compression pass alone (`vibedesk memory compress`), with
    /// the store's flags but regardless of the GC flag.
    pub fn compress_due(&self, dry_run: bool, now: DateTime<Utc>) -> Result<GcReport, MemoryError> {
        let entries = self.list()?;
        let mut report = GcReport {
            enabled: true,
            dry_run,
            ..GcReport::default()
        };
        let flags = self.flags.clone();
        self.compress_due_entries(&entries, &HashSet::new(), &flags, dry_run, now, &mut report);
        self.append_gc_log(&report, now);
        Ok(report)
    }

    // ----- GC ----------------------------------------------------------------

    /// GC with the store's flags (docs §8.7).
    pub fn run_gc(&self, dry_run: bool, now: DateTime<Utc>) -> Result<GcReport, MemoryError> {
        let flags = self.flags.clone();
        self.run_gc_with(&flags, dry_run, now)
    }

    /// GC (docs §8.7): entries at least 7 days old whose importance is below
    /// 0.15 are archived (deletion stays off); every decision goes to
    /// `gc.log`; then, when not a dry run and compression is on, the
    /// compression pass. With GC off nothing happens and the report carries
    /// the flags' warnings (compression without GC never runs).
    pub fn run_gc_with(
        &self,
        flags: &MemoryFlags,
        dry_run: bool,
        now: DateTime<Utc>,
    ) -> Result<GcReport, MemoryError> {
        let mut report = GcReport {
            enabled: flags.gc,
            dry_run,
            warnings: flags.warnings(),
            ..GcReport::default()
        };
        for w in &report.warnings {
            tracing::warn!("{w}");
        }
        if !flags.gc {
            return Ok(report);
        }
        let entries = self.list()?;
        let mut archived = HashSet::new();
        for e in &entries {
            if days_between(e.created_at, now) < MIN_AGE_DAYS {
                continue;
            }
            let imp = e.importance(now, flags.decay);
            let (action, reason) = if imp < DELETE_THRESHOLD && ENABLE_DELETE {
                ("delete", format!("importance {imp:.3} < delete threshold"))
            } else if imp < ARCHIVE_THRESHOLD {
                (
                    "archive",
                    format!("importance {imp:.3} < archive threshold"),
                )
            } else {
                continue;
            };
            let mut record = GcAction {
                title: e.title.clone(),
                file: e.file.clone(),
                action: action.to_string(),
                importance: round4(imp),
                reason,
                archived_to: None,
                error: None,
            };
            if !dry_run {
                // Deletion is disabled: every action archives.
                match self
                    .lock(true)
                    .and_then(|_g| self.archive_entry_locked(e, now))
                {
                    Ok(to) => {
                        record.archived_to = Some(to);
                        archived.insert(e.file.clone());
                    }
                    Err(err) => {
                        record.error = Some(err.to_string());
                        report.errors.push(format!("{}: {err}", e.file));
                    }
                }
            }
            report.actions.push(record);
        }
        if !archived.is_empty() {
            let files: Vec<String> = archived.iter().cloned().collect();
            let _guard = self.lock(false)?;
            self.remove_from_memory_md(&files)?;
            hierarchy::refresh_index(&self.entries_dir, self.flags.hierarchy);
        }
        if !dry_run && flags.compression {
            self.compress_due_entries(&entries, &archived, flags, false, now, &mut report);
        }
        self.append_gc_log(&report, now);
        Ok(report)
    }

    /// Moves an entry into the archive (a hard link under a fresh name, then
    /// unlink), dropping its index row.
    fn archive_entry_locked(&self, e: &Entry, now: DateTime<Utc>) -> Result<PathBuf, MemoryError> {
        std::fs::create_dir_all(&self.archive_dir)
            .map_err(|err| MemoryError::io("create", &self.archive_dir, err))?;
        let stem = hierarchy::flat_stem(&e.file);
        let target = match self.link_unique(&e.path, &stem, "gc", now) {
            Ok(t) => t,
            // Links can fail across filesystems: copy instead.
            Err(_) => {
                let bytes =
                    std::fs::read(&e.path).map_err(|err| MemoryError::io("read", &e.path, err))?;
                self.archive_bytes(&stem, "gc", &bytes, now)
                    .map_err(|reason| MemoryError::ArchiveFailed {
                        entry: e.file.clone(),
                        reason,
                    })?
            }
        };
        fsync_dir(&self.archive_dir);
        std::fs::remove_file(&e.path).map_err(|err| MemoryError::io("remove", &e.path, err))?;
        fsync_dir(e.path.parent().unwrap_or(&self.entries_dir));
        self.with_index(|ix| ix.remove_entry(&e.file));
        self.forget_links(std::slice::from_ref(&e.file));
        Ok(target)
    }

    /// Appends the run to `gc.log` in the original's format, plus one line
    /// per compression with its retention estimate.
    fn append_gc_log(&self, report: &GcReport, now: DateTime<Utc>) {
        let mode = if report.dry_run { "dry_run" } else { "execute" };
        let mut lines = vec![format!(
            "[{}] mode={mode} actions={}",
            format_ts(now),
            report.actions.len()
        )];
        for a in &report.actions {
            lines.push(format!(
                "  {}: {} (importance={}, {})",
                a.action,
                a.title,
                py_float(a.importance),
                a.reason
            ));
        }
        for c in &report.compressions {
            lines.push(format!(
                "  compress{}: {} ({} -> {}, retention={:.4}{})",
                if c.archive.is_some() {
                    ""
                } else {
                    " (planned)"
                },
                c.title,
                c.from,
                c.to,
                c.retention,
                c.archive
                    .as_ref()
                    .map(|p| format!(", archive={}", p.display()))
                    .unwrap_or_default()
            ));
        }
        for e in &report.errors {
            lines.push(format!("  error: {e}"));
        }
        lines.push(String::new());
        let path = self.gc_log_path();
        let result = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| {
                f.write_all(lines.join("\n").as_bytes())
                    .and_then(|_| f.sync_data())
            });
        if let Err(e) = result {
            tracing::warn!(path = %path.display(), "cannot append to gc.log: {e}");
        }
    }

    // ----- import ------------------------------------------------------------

    /// Copies the entries of an existing Vibe-Trading memory folder (flat
    /// `<type>_<slug>.md` files and `<type>/<slug>.md` category folders) into
    /// this store, byte for byte, under this store's file names. Its naive
    /// timestamps read as UTC. Existing entries are never overwritten.
    pub fn import_dir(&self, dir: &Path, dry_run: bool) -> Result<ImportReport, MemoryError> {
        let mut sources: Vec<PathBuf> = Vec::new();
        let mut collect = |d: &Path| -> Result<(), MemoryError> {
            let rd = match std::fs::read_dir(d) {
                Ok(rd) => rd,
                Err(e) if e.kind() == ErrorKind::NotFound && d != dir => return Ok(()),
                Err(e) => return Err(MemoryError::io("list", d, e)),
            };
            let mut files: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.is_file()
                        && p.extension().is_some_and(|x| x == "md")
                        && p.file_name().is_some_and(|n| n != "MEMORY.md")
                })
                .collect();
            files.sort();
            sources.extend(files);
            Ok(())
        };
        collect(dir)?;
        for t in MemoryType::ALL {
            collect(&dir.join(t.as_str()))?;
        }
        let mut report = ImportReport::default();
        let _guard = if dry_run {
            None
        } else {
            Some(self.lock(false)?)
        };
        let mut planned: HashSet<String> = HashSet::new();
        for src in sources {
            let Ok(bytes) = std::fs::read(&src) else {
                report.skipped.push((src, "unreadable".into()));
                continue;
            };
            let Ok(text) = String::from_utf8(bytes.clone()) else {
                report.skipped.push((src, "not UTF-8 text".into()));
                continue;
            };
            if frontmatter::split(&text).is_none() {
                report
                    .skipped
                    .push((src, "no frontmatter: not a memory entry".into()));
                continue;
            }
            let e = entry::parse_entry(&src, &text, Utc::now(), bytes.len() as u64);
            let from_dir = src
                .parent()
                .and_then(|p| p.file_name())
                .and_then(|n| MemoryType::parse(&n.to_string_lossy()));
            let memory_type = MemoryType::parse(&e.memory_type)
                .or(from_dir)
                .unwrap_or(MemoryType::Project);
            let file = self.free_file_name(memory_type, &e.title)?;
            let target = self.entries_dir.join(&file);
            if target.exists() || planned.contains(&file) {
                let same = std::fs::read(&target).map(|b| b == bytes).unwrap_or(false);
                let reason = if same {
                    "already imported".to_string()
                } else {
                    format!("an entry titled {:?} already exists ({file})", e.title)
                };
                report.skipped.push((src, reason));
                continue;
            }
            if !self.files_titled(&e.title)?.is_empty() {
                report
                    .skipped
                    .push((src, format!("an entry titled {:?} already exists", e.title)));
                continue;
            }
            if !dry_run {
                write_atomic(&target, &bytes)?;
                self.upsert_memory_md(
                    &one_line(&e.title),
                    &file,
                    &one_line(&e.description),
                    LineMark::of(&e),
                    &[],
                )?;
                self.index_file(&file);
            }
            planned.insert(file.clone());
            report.imported.push((src, file, e.title));
        }
        if !dry_run && !report.imported.is_empty() {
            hierarchy::refresh_index(&self.entries_dir, self.flags.hierarchy);
        }
        Ok(report)
    }

    // ----- session search ----------------------------------------------------

    /// Past session messages matching `query` (spec's `session_search`),
    /// grouped by session, best session first, at most 3 matches each. The
    /// message index is brought up to date with `sessions_dir` first.
    pub fn search_sessions(
        &self,
        sessions_dir: &Path,
        query: &str,
        max_sessions: usize,
        exclude_session: Option<&str>,
    ) -> Result<Vec<SessionResult>, MemoryError> {
        let terms = query_terms(query);
        let Some(expr) = match_expression(&terms) else {
            return Ok(Vec::new());
        };
        let index_err = |source| MemoryError::Index {
            path: self.index_path(),
            source,
        };
        let mut slot = lock_ignoring_poison(&self.index);
        self.ensure_index(&mut slot);
        let Some(ix) = slot.index.as_mut() else {
            return Err(MemoryError::Invalid(format!(
                "the search index {} is unavailable: {}",
                self.index_path().display(),
                slot.disabled.clone().unwrap_or_default()
            )));
        };
        ix.sync_sessions(sessions_dir).map_err(index_err)?;
        let hits: Vec<MessageHit> = ix
            .search_messages(&expr, max_sessions.max(1) * 25, exclude_session)
            .map_err(index_err)?;
        drop(slot);
        let raw_tokens: Vec<String> = recall_tokens(query);
        let mut out: Vec<SessionResult> = Vec::new();
        for h in hits {
            let pos = match out.iter().position(|r| r.session_id == h.session_id) {
                Some(p) => p,
                None => {
                    if out.len() >= max_sessions {
                        continue;
                    }
                    out.push(SessionResult {
                        session_id: h.session_id.clone(),
                        title: h.session_title.clone(),
                        matches: Vec::new(),
                    });
                    out.len() - 1
                }
            };
            if out[pos].matches.len() < 3 {
                out[pos].matches.push(SessionMatch {
                    role: h.role,
                    ts: h.ts,
                    line: h.line,
                    snippet: snippet(&h.text, &raw_tokens),
                });
            }
        }
        Ok(out)
    }

    /// Indexes new messages of every session now (callers may do this after
    /// a run so the first search is fast).
    pub fn sync_sessions(
        &self,
        sessions_dir: &Path,
    ) -> Result<super::index::SessionSync, MemoryError> {
        let mut slot = lock_ignoring_poison(&self.index);
        self.ensure_index(&mut slot);
        let Some(ix) = slot.index.as_mut() else {
            return Err(MemoryError::Invalid(
                "the search index is unavailable".into(),
            ));
        };
        ix.sync_sessions(sessions_dir)
            .map_err(|source| MemoryError::Index {
                path: self.index_path(),
                source,
            })
    }
}

/// Most query terms sent to the index after pruning.
const MAX_MATCH_TERMS: usize = 32;
/// Fewest terms kept, whatever their frequency.
const MIN_MATCH_TERMS: usize = 3;

/// The query terms worth matching, rarest first.
///
/// Ranking cost grows with the number of entries each term occurs in, so
/// terms are taken rarest first while their summed document counts stay
/// within half the index (at least the 3 rarest, at most 32). What is left
/// out is the most common terms of the query — the stop words of a pasted
/// prompt, whose BM25 IDF is near or below zero (FTS5 floors it at 10⁻⁶)
/// and which barely move the ranking — while the work per query stays
/// bounded however long the prompt. Terms no entry contains are dropped.
fn select_terms(terms: Vec<String>, counts: &[u64], total: usize) -> Vec<String> {
    let mut present: Vec<(String, u64)> = terms
        .into_iter()
        .zip(counts.iter().copied())
        .filter(|(_, df)| *df > 0)
        .collect();
    present.sort_by_key(|(_, df)| *df);
    let budget = (total as u64 / 2).max(1_000);
    let mut used = 0u64;
    let mut keep = 0usize;
    for (_, df) in &present {
        if keep >= MAX_MATCH_TERMS || (keep >= MIN_MATCH_TERMS && used + df > budget) {
            break;
        }
        used += df;
        keep += 1;
    }
    present.into_iter().take(keep).map(|(t, _)| t).collect()
}

fn sha_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// ~240 characters of `text` around the first query token, on one line.
pub fn snippet(text: &str, tokens: &[String]) -> String {
    let chars: Vec<char> = text.chars().collect();
    let lower: Vec<char> = chars
        .iter()
        .map(|c| c.to_lowercase().next().unwrap_or(*c))
        .collect();
    let mut first: Option<usize> = None;
    for t in tokens {
        let needle: Vec<char> = t.chars().collect();
        if needle.is_empty() || needle.len() > lower.len() {
            continue;
        }
        if let Some(p) = lower
            .windows(needle.len())
            .position(|w| w == needle.as_slice())
        {
            first = Some(first.map_or(p, |f| f.min(p)));
        }
    }
    let at = first.unwrap_or(0);
    let start = at.saturating_sub(80);
    let end = (at + 160).min(chars.len());
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(
        chars[start..end]
            .iter()
            .map(|c| if c.is_control() { ' ' } else { *c }),
    );
    if end < chars.len() {
        out.push('…');
    }
    out
}
