//! What the transcript browser reads from disk: sessions with their message
//! counts, one session's messages and trace, and its compaction archive
//! (`transcripts/archive.jsonl`, originals of messages a layer cleared or
//! collapsed) and full pre-compaction transcripts (`transcript_*.jsonl`).
//! All of it is blocking file IO: the runtime calls these on a blocking
//! thread, never on the UI task. Unreadable lines are skipped and counted.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::model::{Message, Role};
use crate::session::{SessionMeta, list_sessions, list_sessions_reporting};
use crate::store::{MessageLog, Paths, StoredMessage, read_trace};

pub(crate) const TRANSCRIPTS_DIR: &str = "transcripts";
pub(crate) const ARCHIVE_FILE: &str = "archive.jsonl";

/// A session as the browser lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionRow {
    pub meta: SessionMeta,
    pub messages: usize,
}

/// One record of `archive.jsonl`: the original of a compacted message.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ArchiveEntry {
    #[serde(default)]
    pub ts: String,
    #[serde(default)]
    pub run_id: String,
    #[serde(default)]
    pub iter: u64,
    #[serde(default)]
    pub layer: String,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(default)]
    pub fingerprint: String,
    pub message: Message,
}

/// A full transcript written before an L3 compaction.
#[derive(Clone, Debug, PartialEq)]
pub struct TranscriptFile {
    pub name: String,
    pub path: PathBuf,
    pub messages: usize,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionDetail {
    pub id: String,
    pub dir: PathBuf,
    pub messages: Vec<StoredMessage>,
    pub trace: Vec<Value>,
    pub archive: Vec<ArchiveEntry>,
    pub transcripts: Vec<TranscriptFile>,
    /// Lines that could not be read, across all files.
    pub skipped: usize,
}

/// The key under which a collapsed message's original is archived: the
/// archive's own [`archive::fingerprint`], so the format is defined once.
///
/// [`archive::fingerprint`]: crate::agent::compaction::archive::fingerprint
pub fn fingerprint(role: Role, content: &str) -> String {
    crate::agent::compaction::archive::fingerprint(role.as_str(), content)
}

/// Sessions newest first, each with its message count (lines of its log).
pub fn sessions(paths: &Paths) -> Vec<SessionRow> {
    rows_of(paths, list_sessions(paths))
}

/// [`sessions`], and one line about sessions left out because their
/// `session.json` cannot be read.
pub(crate) fn sessions_reporting(paths: &Paths) -> (Vec<SessionRow>, Option<String>) {
    let (metas, unreadable) = list_sessions_reporting(paths);
    (
        rows_of(paths, metas),
        crate::session::unreadable_sessions_notice(&unreadable),
    )
}

fn rows_of(paths: &Paths, metas: Vec<SessionMeta>) -> Vec<SessionRow> {
    metas
        .into_iter()
        .map(|meta| {
            let log = paths.session_dir(&meta.id).join("messages.jsonl");
            let messages = std::fs::read(&log)
                .map(|b| {
                    b.split(|c| *c == b'\n')
                        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
                        .count()
                })
                .unwrap_or(0);
            SessionRow { meta, messages }
        })
        .collect()
}

/// A transcript file that cannot be read. Cloned into the message that
/// carries it, hence the shared source.
#[derive(Clone, Debug, thiserror::Error)]
#[error("cannot read {}: {source}", path.display())]
pub struct TranscriptError {
    pub path: PathBuf,
    pub source: std::sync::Arc<std::io::Error>,
}

/// Why a session's detail cannot be shown. Cloned into the message that
/// carries it, so a store error travels as its text.
#[derive(Clone, Debug, thiserror::Error)]
pub enum DetailError {
    #[error("'{0}' is not a valid session id")]
    BadId(String),
    #[error("session {0} does not exist")]
    Missing(String),
    #[error("{0}")]
    Log(String),
}

/// Everything the browser shows about one session.
pub fn detail(paths: &Paths, id: &str) -> Result<SessionDetail, DetailError> {
    if !crate::session::valid_id(id) {
        return Err(DetailError::BadId(id.to_string()));
    }
    let dir = paths.session_dir(id);
    if !dir.is_dir() {
        return Err(DetailError::Missing(id.to_string()));
    }
    let mut out = SessionDetail {
        id: id.to_string(),
        dir: dir.clone(),
        ..SessionDetail::default()
    };
    match MessageLog::read(&dir) {
        Ok(r) => {
            out.messages = r.messages;
            out.skipped += r.skipped_lines.len();
        }
        Err(e) => return Err(DetailError::Log(e.to_string())),
    }
    if let Ok(t) = read_trace(&dir, None) {
        out.trace = t.records;
        out.skipped += t.skipped_lines;
    }
    let (archive, skipped) = read_archive(&dir);
    out.archive = archive;
    out.skipped += skipped;
    out.transcripts = list_transcripts(&dir);
    Ok(out)
}

/// `<session>/transcripts/archive.jsonl`, oldest first; a missing file is empty.
pub(crate) fn read_archive(session_dir: &Path) -> (Vec<ArchiveEntry>, usize) {
    let path = session_dir.join(TRANSCRIPTS_DIR).join(ARCHIVE_FILE);
    let Ok(bytes) = std::fs::read(&path) else {
        return (Vec::new(), 0);
    };
    let mut out = Vec::new();
    let mut skipped = 0;
    for line in crate::text::lines(&bytes) {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<ArchiveEntry>(line) {
            Ok(e) => out.push(e),
            Err(_) => skipped += 1,
        }
    }
    (out, skipped)
}

/// Pre-compaction transcripts, oldest first (their names sort by time).
pub(crate) fn list_transcripts(session_dir: &Path) -> Vec<TranscriptFile> {
    let dir = session_dir.join(TRANSCRIPTS_DIR);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<TranscriptFile> = rd
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            (name.starts_with("transcript_") && name.ends_with(".jsonl")).then(|| {
                let path = e.path();
                let messages = std::fs::read(&path)
                    .map(|b| {
                        b.split(|c| *c == b'\n')
                            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
                            .count()
                    })
                    .unwrap_or(0);
                TranscriptFile {
                    name,
                    path,
                    messages,
                }
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The messages of one transcript file and the count of unreadable lines.
pub fn read_transcript(path: &Path) -> Result<(Vec<Message>, usize), TranscriptError> {
    let bytes = std::fs::read(path).map_err(|e| TranscriptError {
        path: path.to_path_buf(),
        source: std::sync::Arc::new(e),
    })?;
    let mut out = Vec::new();
    let mut skipped = 0;
    for line in crate::text::lines(&bytes) {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Message>(line) {
            Ok(m) => out.push(m),
            Err(_) => skipped += 1,
        }
    }
    Ok((out, skipped))
}

/// Whether a message is a compacted stand-in: cleared by L1 (`[cleared]`)
/// or collapsed by L2 (head, `...[N chars collapsed]...`, tail).
pub fn looks_compacted(m: &Message) -> bool {
    m.content.trim_start().starts_with("[cleared") || m.content.contains(" chars collapsed]...")
}

/// The archived original of `m`: by `tool_call_id` for a cleared tool
/// result, else by the fingerprint of its compacted content. The newest
/// matching entry wins (a message compacted twice keeps its first original
/// in the older entry, which the trail still lists).
pub fn find_original<'a>(archive: &'a [ArchiveEntry], m: &Message) -> Option<&'a ArchiveEntry> {
    if m.role == Role::Tool
        && let Some(id) = &m.tool_call_id
        && looks_compacted(m)
        && let Some(e) = archive
            .iter()
            .rev()
            .find(|e| e.tool_call_id.as_deref() == Some(id.as_str()))
    {
        return Some(e);
    }
    let fp = fingerprint(m.role, &m.content);
    archive.iter().rev().find(|e| e.fingerprint == fp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_sha256_of_role_nul_content() {
        // `printf 'tool\0[cleared]' | sha256sum | cut -c1-16`
        assert_eq!(fingerprint(Role::Tool, "[cleared]"), "aa97da744eb01e0b");
        assert_ne!(fingerprint(Role::Tool, "x"), fingerprint(Role::User, "x"));
    }
}
