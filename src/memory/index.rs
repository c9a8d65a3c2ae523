//! The SQLite full-text index (docs §8.8) of memory entries and of every
//! session's messages: `<data>/memory/index.sqlite`.
//!
//! The files are the truth; the index is a cache of them. The store updates
//! it on every write, GC and compression, reconciles it with the files when
//! it opens (so edits made outside vibedesk are picked up and rows of vanished
//! files dropped), and rebuilds it from the files when it is missing or
//! corrupt. Session logs are append-only, so they are indexed incrementally
//! by byte offset whenever a search (or the caller) syncs them.
//!
//! Documents are stored as our own tokens ([`super::tokenize::index_text`]),
//! so SQLite's tokenizer never re-splits what the retrieval tokenizer kept
//! whole (tickers such as `BRK.B`, CJK bigrams).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use super::entry::{Entry, cut_chars};
use super::tokenize::index_text;
use crate::text::redact::redact_text;

/// Schema version in `PRAGMA user_version`; another value means rebuild.
/// 3: text is redacted before it is stored or indexed (§8.8), so an index
/// built from raw text by an earlier version is dropped and rebuilt.
const SCHEMA_VERSION: i64 = 3;
/// Longest body indexed per entry or message (docs §8.8: 50,000).
const MAX_INDEXED_CHARS: usize = 50_000;
/// Characters of each message kept for snippets.
const MAX_STORED_MESSAGE_CHARS: usize = 4_000;
/// Session log name (docs §5.2), as `store::messages` writes it.
const MESSAGES_FILE: &str = "messages.jsonl";

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS memories(
    id INTEGER PRIMARY KEY,
    file TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    type TEXT NOT NULL,
    level TEXT NOT NULL,
    quality REAL NOT NULL,
    access_count INTEGER NOT NULL,
    last_accessed INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS memories_title ON memories(title);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    title, description, keywords, body, tokenize = "unicode61 tokenchars '_'"
);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_vocab USING fts5vocab('memories_fts', 'row');
CREATE TABLE IF NOT EXISTS sessions(
    id TEXT PRIMARY KEY,
    bytes INTEGER NOT NULL,
    lines INTEGER NOT NULL,
    title TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS messages(
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    line INTEGER NOT NULL,
    role TEXT NOT NULL,
    ts TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_session ON messages(session_id);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    terms, tokenize = "unicode61 tokenchars '_'"
);
"#;

/// A memory found by the index.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryHit {
    pub file: String,
    /// FTS5 `bm25()` with column weights: lower is better, usually negative.
    pub rank: f64,
    pub quality: f64,
    pub access_count: u64,
    /// Unix seconds.
    pub last_accessed: i64,
    pub mtime_ns: i64,
}

/// A session message found by the index.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageHit {
    pub session_id: String,
    pub session_title: String,
    /// 1-based line in `messages.jsonl`.
    pub line: u64,
    pub role: String,
    pub ts: String,
    pub text: String,
    pub rank: f64,
}

/// What a session sync did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionSync {
    pub sessions: usize,
    pub new_messages: usize,
    pub dropped_sessions: usize,
}

/// The open index.
pub struct Index {
    conn: Connection,
    path: PathBuf,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("path", &self.path).finish()
    }
}

/// Nanoseconds since the epoch of a file time, for change detection.
pub fn mtime_ns(t: chrono::DateTime<chrono::Utc>) -> i64 {
    t.timestamp_nanos_opt().unwrap_or(i64::MAX)
}

impl Index {
    /// Opens (creating if needed) and validates the index. Returns the index
    /// and whether it was created empty (so the caller fills it). A file
    /// that is not a database, or a schema that does not answer, is an error
    /// the caller handles by deleting and recreating (see [`Index::recreate`]).
    pub fn open(path: &Path) -> rusqlite::Result<(Index, bool)> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let mut fresh = false;
        if version != SCHEMA_VERSION {
            conn.execute_batch(
                "DROP TABLE IF EXISTS memories_vocab; DROP TABLE IF EXISTS memories;
                 DROP TABLE IF EXISTS memories_fts;
                 DROP TABLE IF EXISTS sessions; DROP TABLE IF EXISTS messages;
                 DROP TABLE IF EXISTS messages_fts;",
            )?;
            conn.execute_batch(SCHEMA)?;
            conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))?;
            fresh = true;
        }
        // Touch every table so a damaged file fails here, not mid-write.
        conn.query_row("SELECT count(*) FROM memories", [], |r| r.get::<_, i64>(0))?;
        conn.query_row("SELECT count(*) FROM memories_fts", [], |r| {
            r.get::<_, i64>(0)
        })?;
        conn.query_row("SELECT count(*) FROM messages_fts", [], |r| {
            r.get::<_, i64>(0)
        })?;
        conn.query_row("SELECT count(*) FROM sessions", [], |r| r.get::<_, i64>(0))?;
        Ok((
            Index {
                conn,
                path: path.to_path_buf(),
            },
            fresh,
        ))
    }

    /// Deletes the database files (and its WAL) and opens a fresh one.
    pub fn recreate(path: &Path) -> rusqlite::Result<(Index, bool)> {
        remove_db_files(path);
        Index::open(path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Adds or replaces the row of one entry.
    pub fn upsert_entry(&mut self, e: &Entry) -> rusqlite::Result<()> {
        self.upsert_entries(std::slice::from_ref(e))
    }

    /// Adds or replaces the rows of several entries in one transaction.
    pub fn upsert_entries(&mut self, entries: &[Entry]) -> rusqlite::Result<()> {
        let tx = self.conn.transaction()?;
        for e in entries {
            upsert_in(&tx, e)?;
        }
        tx.commit()
    }

    /// Drops the row of one entry file (no-op when absent).
    pub fn remove_entry(&mut self, file: &str) -> rusqlite::Result<()> {
        let tx = self.conn.transaction()?;
        let id: Option<i64> = tx
            .query_row("SELECT id FROM memories WHERE file = ?1", [file], |r| {
                r.get(0)
            })
            .optional()?;
        if let Some(id) = id {
            tx.execute("DELETE FROM memories_fts WHERE rowid = ?1", [id])?;
            tx.execute("DELETE FROM memories WHERE id = ?1", [id])?;
        }
        tx.commit()
    }

    /// Drops every memory row.
    pub fn clear_entries(&mut self) -> rusqlite::Result<()> {
        self.conn
            .execute_batch("DELETE FROM memories_fts; DELETE FROM memories;")
    }

    /// `file → (mtime_ns, size)` of every indexed entry.
    pub fn entry_stamps(&self) -> rusqlite::Result<HashMap<String, (i64, i64)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT file, mtime_ns, size FROM memories")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, (r.get(1)?, r.get(2)?))))?;
        rows.collect()
    }

    /// Files whose entry has exactly this title.
    pub fn files_with_title(&self, title: &str) -> rusqlite::Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT file FROM memories WHERE title = ?1 ORDER BY file")?;
        let rows = stmt.query_map([title], |r| r.get(0))?;
        rows.collect()
    }

    pub fn entry_count(&self) -> rusqlite::Result<usize> {
        self.conn
            .query_row("SELECT count(*) FROM memories", [], |r| r.get::<_, i64>(0))
            .map(|n| n as usize)
    }

    /// In how many entries each term occurs (0 for unknown terms).
    pub fn term_doc_counts(&self, terms: &[String]) -> rusqlite::Result<Vec<u64>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT doc FROM memories_vocab WHERE term = ?1")?;
        terms
            .iter()
            .map(|t| {
                stmt.query_row([t], |r| r.get::<_, i64>(0))
                    .optional()
                    .map(|n| n.unwrap_or(0).max(0) as u64)
            })
            .collect()
    }

    /// Entries matching any of `terms` (already [`super::tokenize::index_term`]s),
    /// best first: BM25 with title, description and keywords weighted 2 and
    /// the body 1 (the scan's metadata weighting, docs §8.4), ties newest first.
    pub fn search_entries(
        &self,
        match_expr: &str,
        limit: usize,
    ) -> rusqlite::Result<Vec<MemoryHit>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT m.file, bm25(memories_fts, 2.0, 2.0, 2.0, 1.0) AS r, m.quality, m.access_count,
                    m.last_accessed, m.mtime_ns
             FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid
             WHERE memories_fts MATCH ?1
             ORDER BY r, m.mtime_ns DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![match_expr, limit as i64], |r| {
            Ok(MemoryHit {
                file: r.get(0)?,
                rank: r.get(1)?,
                quality: r.get(2)?,
                access_count: r.get::<_, i64>(3)?.max(0) as u64,
                last_accessed: r.get(4)?,
                mtime_ns: r.get(5)?,
            })
        })?;
        rows.collect()
    }

    /// Brings the message index up to date with `<sessions_dir>/*/messages.jsonl`:
    /// appended lines are indexed from the last offset, a log that shrank is
    /// re-indexed, and sessions whose directory is gone are dropped.
    pub fn sync_sessions(&mut self, sessions_dir: &Path) -> rusqlite::Result<SessionSync> {
        let mut sync = SessionSync::default();
        let known: HashMap<String, (i64, i64)> = {
            let mut stmt = self.conn.prepare("SELECT id, bytes, lines FROM sessions")?;
            let rows =
                stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, (r.get(1)?, r.get(2)?))))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let mut present = std::collections::HashSet::new();
        if let Ok(dir) = std::fs::read_dir(sessions_dir) {
            let mut ids: Vec<(String, PathBuf)> = dir
                .flatten()
                .filter(|d| d.path().is_dir())
                .map(|d| (d.file_name().to_string_lossy().into_owned(), d.path()))
                .collect();
            ids.sort();
            for (id, dir) in ids {
                let log = dir.join(MESSAGES_FILE);
                let Ok(meta) = std::fs::metadata(&log) else {
                    continue;
                };
                present.insert(id.clone());
                sync.sessions += 1;
                let size = meta.len() as i64;
                let (mut bytes, mut lines) = known.get(&id).copied().unwrap_or((0, 0));
                if size < bytes {
                    // Rewritten or truncated: index it again from the start.
                    self.drop_session(&id)?;
                    (bytes, lines) = (0, 0);
                }
                if size == bytes && known.contains_key(&id) {
                    continue;
                }
                let title = session_title(&dir);
                let (added, new_bytes, new_lines) = self.index_log(&id, &log, bytes, lines)?;
                sync.new_messages += added;
                self.conn.execute(
                    "INSERT INTO sessions(id, bytes, lines, title) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT(id) DO UPDATE SET bytes = ?2, lines = ?3, title = ?4",
                    params![id, new_bytes, new_lines, title],
                )?;
            }
        }
        for id in known.keys() {
            if !present.contains(id) {
                self.drop_session(id)?;
                sync.dropped_sessions += 1;
            }
        }
        Ok(sync)
    }

    fn drop_session(&mut self, id: &str) -> rusqlite::Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "DELETE FROM messages_fts WHERE rowid IN (SELECT id FROM messages WHERE session_id = ?1)",
            [id],
        )?;
        tx.execute("DELETE FROM messages WHERE session_id = ?1", [id])?;
        tx.execute("DELETE FROM sessions WHERE id = ?1", [id])?;
        tx.commit()
    }

    /// Indexes the complete lines of `log` from byte `start`; returns
    /// (messages added, new offset, new line count).
    fn index_log(
        &mut self,
        session_id: &str,
        log: &Path,
        start: i64,
        lines_before: i64,
    ) -> rusqlite::Result<(usize, i64, i64)> {
        let mut buf = Vec::new();
        let read = std::fs::File::open(log).and_then(|mut f| {
            f.seek(SeekFrom::Start(start.max(0) as u64))?;
            f.read_to_end(&mut buf)
        });
        if read.is_err() {
            return Ok((0, start, lines_before));
        }
        // Only whole lines: a line still being written is picked up next time.
        let Some(last_nl) = buf.iter().rposition(|b| *b == b'\n') else {
            return Ok((0, start, lines_before));
        };
        let complete = &buf[..=last_nl];
        let tx = self.conn.transaction()?;
        let mut added = 0usize;
        let mut line_no = lines_before;
        for raw in crate::text::lines(&complete[..last_nl]) {
            line_no += 1;
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(raw) else {
                continue;
            };
            let Some(content) = v.get("content").and_then(|c| c.as_str()) else {
                continue;
            };
            if content.trim().is_empty() {
                continue;
            }
            let role = v.get("role").and_then(|r| r.as_str()).unwrap_or("");
            let ts = v.get("ts").and_then(|r| r.as_str()).unwrap_or("");
            // Secrets never enter the index (§8.8): a search for one must
            // find nothing, or its hit count would confirm a guess even
            // though every result shown is redacted.
            let content = redact_text(cut_chars(content, MAX_INDEXED_CHARS));
            tx.execute(
                "INSERT INTO messages(session_id, line, role, ts, text) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    session_id,
                    line_no,
                    role,
                    ts,
                    cut_chars(&content, MAX_STORED_MESSAGE_CHARS)
                ],
            )?;
            let id = tx.last_insert_rowid();
            tx.execute(
                "INSERT INTO messages_fts(rowid, terms) VALUES (?1, ?2)",
                params![id, index_text(&content)],
            )?;
            added += 1;
        }
        tx.commit()?;
        Ok((added, start + complete.len() as i64, line_no))
    }

    /// Messages matching `match_expr`, best first, optionally excluding one session.
    pub fn search_messages(
        &self,
        match_expr: &str,
        limit: usize,
        exclude_session: Option<&str>,
    ) -> rusqlite::Result<Vec<MessageHit>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT m.session_id, COALESCE(s.title, ''), m.line, m.role, m.ts, m.text, bm25(messages_fts) AS r
             FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
             LEFT JOIN sessions s ON s.id = m.session_id
             WHERE messages_fts MATCH ?1 AND m.session_id != ?2
             ORDER BY r, m.id DESC LIMIT ?3",
        )?;
        let rows = stmt.query_map(
            params![match_expr, exclude_session.unwrap_or(""), limit as i64],
            |r| {
                Ok(MessageHit {
                    session_id: r.get(0)?,
                    session_title: r.get(1)?,
                    line: r.get::<_, i64>(2)?.max(0) as u64,
                    role: r.get(3)?,
                    ts: r.get(4)?,
                    text: r.get(5)?,
                    rank: r.get(6)?,
                })
            },
        )?;
        rows.collect()
    }
}

/// One entry's rows, inside the caller's transaction.
fn upsert_in(tx: &rusqlite::Transaction<'_>, e: &Entry) -> rusqlite::Result<()> {
    let existing: Option<i64> = tx
        .query_row("SELECT id FROM memories WHERE file = ?1", [&e.file], |r| {
            r.get(0)
        })
        .optional()?;
    let (access, last, created) = (
        e.access_count as i64,
        e.last_accessed.timestamp(),
        e.created_at.timestamp(),
    );
    let (mtime, size) = (mtime_ns(e.modified), e.size as i64);
    let id = match existing {
        Some(id) => {
            tx.execute(
                "UPDATE memories SET file=?1, title=?2, type=?3, level=?4, quality=?5, access_count=?6,
                 last_accessed=?7, created_at=?8, mtime_ns=?9, size=?10 WHERE id = ?11",
                params![
                    e.file,
                    e.title,
                    e.memory_type,
                    e.level.as_str(),
                    e.quality,
                    access,
                    last,
                    created,
                    mtime,
                    size,
                    id
                ],
            )?;
            tx.execute("DELETE FROM memories_fts WHERE rowid = ?1", [id])?;
            id
        }
        None => {
            tx.execute(
                "INSERT INTO memories(file, title, type, level, quality, access_count, last_accessed,
                 created_at, mtime_ns, size) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    e.file,
                    e.title,
                    e.memory_type,
                    e.level.as_str(),
                    e.quality,
                    access,
                    last,
                    created,
                    mtime,
                    size
                ],
            )?;
            tx.last_insert_rowid()
        }
    };
    tx.execute(
        "INSERT INTO memories_fts(rowid, title, description, keywords, body) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            id,
            index_text(&redact_text(&e.title)),
            index_text(&redact_text(&e.description)),
            index_text(&redact_text(&e.keywords.join(" "))),
            index_text(&redact_text(cut_chars(&e.body, MAX_INDEXED_CHARS))),
        ],
    )?;
    Ok(())
}

/// The title in `<session>/session.json`, if readable.
fn session_title(dir: &Path) -> String {
    std::fs::read(dir.join("session.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("title").and_then(|t| t.as_str()).map(str::to_string))
        .unwrap_or_default()
}

/// Removes a database and its WAL/SHM side files, ignoring absent ones.
pub fn remove_db_files(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}
