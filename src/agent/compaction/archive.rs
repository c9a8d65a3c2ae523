//! The session's transcript archive: originals of every message a lossy
//! layer changes, and the full message list before every auto-compact. The
//! original keeps neither for L1/L2 and overwrites transcripts written in
//! the same second (docs §12.3, §12.15); here names carry microseconds and a
//! sequence number, and originals are appended (fsynced) before the change
//! is kept.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::message::ChatMessage;
use super::microcompact::Touched;
use crate::store::atomic::{append_synced, open_append_repairing};
use crate::store::{StoreError, atomic_write};

pub const ARCHIVE_FILE: &str = "archive.jsonl";
pub const TRANSCRIPTS_DIR: &str = "transcripts";

/// First 16 hex chars of SHA-256 over role, NUL, compacted content: how a UI
/// finds the original of a collapsed message (tool results also carry their
/// `tool_call_id`).
pub fn fingerprint(role: &str, content: &str) -> String {
    let mut h = Sha256::new();
    h.update(role.as_bytes());
    h.update([0u8]);
    h.update(content.as_bytes());
    h.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[derive(Debug)]
pub struct TranscriptArchive {
    dir: PathBuf,
    run_id: String,
    seq: AtomicU32,
}

impl TranscriptArchive {
    /// `session_dir/transcripts/`, created on first write.
    pub fn new(session_dir: &Path, run_id: &str) -> Self {
        TranscriptArchive {
            dir: session_dir.join(TRANSCRIPTS_DIR),
            run_id: run_id.to_string(),
            seq: AtomicU32::new(0),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn archive_path(&self) -> PathBuf {
        self.dir.join(ARCHIVE_FILE)
    }

    /// Appends the originals of `touched` (now compacted in `messages`).
    pub fn archive_originals<M: ChatMessage + Serialize>(
        &self,
        iter: u64,
        layer: &str,
        touched: &[Touched],
        messages: &[M],
    ) -> Result<PathBuf, StoreError> {
        let path = self.archive_path();
        if touched.is_empty() {
            return Ok(path);
        }
        let mut lines = String::new();
        let ts = chrono::Utc::now()
            .format("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        for t in touched {
            let Some(compacted) = messages.get(t.index) else {
                continue;
            };
            let role = compacted.role().to_string();
            let now = compacted.text().unwrap_or("").to_string();
            let mut original = compacted.clone();
            original.set_text(t.original_text.clone());
            let mut rec = json!({
                "ts": ts, "run_id": self.run_id, "iter": iter, "layer": layer,
                "fingerprint": fingerprint(&role, &now),
                "message": original,
            });
            if let Some(id) = compacted.tool_call_id() {
                rec["tool_call_id"] = json!(id);
            }
            lines.push_str(&rec.to_string());
            lines.push('\n');
        }
        let (mut file, _) = open_append_repairing(&path)?;
        append_synced(&mut file, &path, lines.as_bytes())?;
        Ok(path)
    }

    /// Writes the whole list, one message per line, under a name no other
    /// transcript can have.
    pub fn write_transcript<M: Serialize>(&self, messages: &[M]) -> Result<PathBuf, StoreError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| StoreError::io("create", &self.dir, e))?;
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.6f");
        let seq = self.seq.fetch_add(1, Ordering::SeqCst);
        let mut path = self.dir.join(format!("transcript_{stamp}_{seq}.jsonl"));
        // Two loops of one session in the same microsecond: add the pid.
        if path.exists() {
            path = self.dir.join(format!(
                "transcript_{stamp}_{seq}_{}.jsonl",
                std::process::id()
            ));
        }
        let mut body = String::new();
        for m in messages {
            let line = serde_json::to_string(m).map_err(|source| StoreError::Json {
                what: "transcript message",
                source,
            })?;
            body.push_str(&line);
            body.push('\n');
        }
        atomic_write(&path, body.as_bytes())?;
        Ok(path)
    }
}

/// One record of `archive.jsonl`.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct ArchivedMessage {
    pub ts: String,
    pub run_id: String,
    pub iter: u64,
    pub layer: String,
    pub fingerprint: String,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    pub message: crate::model::Message,
}

/// Reads the archive, skipping unreadable lines.
pub fn read_archive(session_dir: &Path) -> Vec<ArchivedMessage> {
    let path = session_dir.join(TRANSCRIPTS_DIR).join(ARCHIVE_FILE);
    std::fs::read_to_string(path)
        .map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Message;

    #[test]
    fn originals_are_found_by_call_id_or_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let a = TranscriptArchive::new(dir.path(), "run1");
        let original = Message::tool_result("c9", "read_file", "x".repeat(300));
        let compacted = vec![Message::tool_result("c9", "read_file", "[cleared]")];
        let touched = vec![Touched {
            index: 0,
            original_text: "x".repeat(300),
        }];
        let p = a
            .archive_originals(3, "microcompact", &touched, &compacted)
            .unwrap();
        assert!(p.ends_with("transcripts/archive.jsonl"));
        let back = read_archive(dir.path());
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].message, original);
        assert_eq!(back[0].tool_call_id.as_deref(), Some("c9"));
        assert_eq!(back[0].fingerprint, fingerprint("tool", "[cleared]"));
        assert_eq!(back[0].iter, 3);
    }

    #[test]
    fn transcripts_never_collide() {
        let dir = tempfile::tempdir().unwrap();
        let a = TranscriptArchive::new(dir.path(), "r");
        let msgs = vec![Message::user("u")];
        let paths: Vec<PathBuf> = (0..20)
            .map(|_| a.write_transcript(&msgs).unwrap())
            .collect();
        let mut unique = paths.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 20);
        let text = std::fs::read_to_string(&paths[0]).unwrap();
        assert_eq!(text, "{\"role\":\"user\",\"content\":\"u\"}\n");
    }
}
