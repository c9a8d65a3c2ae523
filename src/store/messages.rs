//! STUB: to be completed.
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::model::Message;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    #[serde(flatten)]
    pub message: Message,
    pub ts: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

#[derive(Debug)]
pub struct MessageLog {
    path: PathBuf,
    file: std::fs::File,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct MessagesRead {
    pub messages: Vec<StoredMessage>,
    /// 1-based line numbers that could not be read.
    pub skipped_lines: Vec<usize>,
}

impl MessageLog {
    pub fn open(session_dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(session_dir).map_err(|e| StoreError::io("create", session_dir, e))?;
        let path = session_dir.join("messages.jsonl");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| StoreError::io("open", &path, e))?;
        Ok(MessageLog { path, file })
    }

    pub fn append(&mut self, message: &StoredMessage) -> Result<(), StoreError> {
        let line = serde_json::to_string(message).map_err(|source| StoreError::Json { what: "message", source })? + "\n";
        self.file
            .write_all(line.as_bytes())
            .map_err(|e| StoreError::io("append to", &self.path, e))
    }

    pub fn read(session_dir: &Path) -> Result<MessagesRead, StoreError> {
        let p = session_dir.join("messages.jsonl");
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(MessagesRead::default()),
            Err(e) => return Err(StoreError::io("read", p, e)),
        };
        let mut out = MessagesRead::default();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str(line) {
                Ok(m) => out.messages.push(m),
                Err(_) => out.skipped_lines.push(n + 1),
            }
        }
        Ok(out)
    }
}
