//! The session message log `<session>/messages.jsonl` (docs §5.2): one JSON
//! message per line, appended and fsynced per message. Reading is forgiving:
//! a line torn by a crash or other garbage is skipped and reported, never fatal.
use std::path::Path;

use chrono::{SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::StoreError;
use super::jsonl::{FsyncFailure, JsonlLog};
use crate::model::Message;

/// File name of the log inside a session directory.
pub const MESSAGES_FILE: &str = "messages.jsonl";

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

impl StoredMessage {
    /// Wraps `message` stamped with the current time.
    pub fn now(message: Message) -> Self {
        StoredMessage {
            message,
            ts: now_rfc3339(),
            run_id: None,
            status: None,
        }
    }
}

#[derive(Debug)]
pub struct MessageLog {
    log: JsonlLog,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct MessagesRead {
    pub messages: Vec<StoredMessage>,
    /// 1-based line numbers that could not be read.
    pub skipped_lines: Vec<usize>,
}

impl MessageLog {
    /// Opens (creating if needed) `<session_dir>/messages.jsonl`, terminating a
    /// line torn by an earlier crash so new messages are not glued onto it.
    pub fn open(session_dir: &Path) -> Result<Self, StoreError> {
        let log = JsonlLog::open(session_dir.join(MESSAGES_FILE), FsyncFailure::Fails)?;
        Ok(MessageLog { log })
    }

    pub fn path(&self) -> &Path {
        self.log.path()
    }

    /// Appends one message as a single line and fsyncs it; once this returns
    /// Ok the message survives a crash or power loss.
    pub fn append(&mut self, message: &StoredMessage) -> Result<(), StoreError> {
        self.log.append("message", message)
    }

    /// Every readable message of the session plus the 1-based numbers of the
    /// lines that were skipped (torn or invalid). A missing log is empty.
    pub fn read(session_dir: &Path) -> Result<MessagesRead, StoreError> {
        let p = session_dir.join(MESSAGES_FILE);
        let bytes = match std::fs::read(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(MessagesRead::default());
            }
            Err(e) => return Err(StoreError::io("read", p, e)),
        };
        let out = parse_lines(&bytes);
        if !out.skipped_lines.is_empty() {
            tracing::warn!(
                path = %p.display(),
                skipped = out.skipped_lines.len(),
                lines = ?out.skipped_lines,
                "skipped unreadable lines in the session message log"
            );
        }
        Ok(out)
    }
}

/// Below this size one thread parses the whole log.
const PARALLEL_BYTES: usize = 1 << 20;

/// Every readable line of a log, parsed on all cores for a long session:
/// the parts are cut after a line end and joined back in order.
fn parse_lines(bytes: &[u8]) -> MessagesRead {
    let parts = crate::text::line_parts(bytes, PARALLEL_BYTES);
    let read: Vec<(MessagesRead, usize)> = std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .iter()
            .map(|part| scope.spawn(move || parse_part(part)))
            .collect();
        // A thread only parses; if one died, parse its part here instead.
        handles
            .into_iter()
            .zip(&parts)
            .map(|(h, part)| h.join().unwrap_or_else(|_| parse_part(part)))
            .collect()
    });
    let mut out = MessagesRead::default();
    let mut lines_before = 0;
    for (part, lines) in read {
        out.messages.extend(part.messages);
        out.skipped_lines
            .extend(part.skipped_lines.iter().map(|n| n + lines_before));
        lines_before += lines;
    }
    out
}

/// One part's messages and skipped line numbers (from 1 in the part), and
/// how many line ends it holds.
fn parse_part(part: &[u8]) -> (MessagesRead, usize) {
    let mut out = MessagesRead::default();
    let mut lines = 0;
    // Split bytes, not a String: one line of invalid UTF-8 must only cost
    // that line, not the whole session.
    for (n, raw) in crate::text::lines(part).enumerate() {
        lines = n;
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<StoredMessage>(raw) {
            Ok(m) => out.messages.push(m),
            Err(_) => out.skipped_lines.push(n + 1),
        }
    }
    (out, lines)
}

/// The current UTC time as RFC 3339 with millisecond precision and a `Z`
/// suffix, e.g. `2026-09-13T12:59:30.421Z` (the `ts` of stored messages).
pub fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(text: &str) -> StoredMessage {
        StoredMessage {
            message: Message::user(text),
            ts: now_rfc3339(),
            run_id: Some("20260101_000000_abcdef".into()),
            status: None,
        }
    }

    #[test]
    fn append_then_read_round_trips_in_order() {
        let d = tempfile::tempdir().unwrap();
        let sdir = d.path().join("sess");
        let mut log = MessageLog::open(&sdir).unwrap();
        let a = msg("hello ✓ 日本");
        let mut b = StoredMessage::now(Message::assistant("hi"));
        b.status = Some("success".into());
        log.append(&a).unwrap();
        log.append(&b).unwrap();
        let r = MessageLog::read(&sdir).unwrap();
        assert_eq!(r.messages, vec![a, b]);
        assert!(r.skipped_lines.is_empty());
        assert_eq!(log.path(), sdir.join(MESSAGES_FILE));
    }

    #[test]
    fn read_of_missing_log_is_empty() {
        let d = tempfile::tempdir().unwrap();
        let r = MessageLog::read(&d.path().join("none")).unwrap();
        assert!(r.messages.is_empty() && r.skipped_lines.is_empty());
    }

    #[test]
    fn torn_line_is_repaired_on_open_and_skipped_on_read() {
        let d = tempfile::tempdir().unwrap();
        let sdir = d.path();
        let good = msg("before crash");
        {
            let mut log = MessageLog::open(sdir).unwrap();
            log.append(&good).unwrap();
        }
        // Simulate a crash half-way through writing the second record.
        let p = sdir.join(MESSAGES_FILE);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes.extend_from_slice(br#"{"role":"assistant","content":"par"#);
        std::fs::write(&p, &bytes).unwrap();

        let after = msg("after restart");
        let mut log = MessageLog::open(sdir).unwrap();
        log.append(&after).unwrap();

        let r = MessageLog::read(sdir).unwrap();
        assert_eq!(r.messages, vec![good, after]);
        assert_eq!(r.skipped_lines, vec![2]);
    }

    #[test]
    fn garbage_and_invalid_utf8_lines_are_skipped_not_fatal() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(MESSAGES_FILE);
        let m = msg("ok");
        let line = serde_json::to_string(&m).unwrap();
        let mut bytes = Vec::new();
        bytes.extend_from_slice(b"not json\n");
        bytes.extend_from_slice(line.as_bytes());
        bytes.extend_from_slice(b"\n\n");
        bytes.extend_from_slice(&[0xff, 0xfe, b'\n']);
        bytes.extend_from_slice(b"[1,2]\n");
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        std::fs::write(&p, bytes).unwrap();
        let r = MessageLog::read(d.path()).unwrap();
        assert_eq!(r.messages.len(), 2);
        assert_eq!(r.skipped_lines, vec![1, 4, 5]);
    }

    /// A log long enough to be parsed on several threads keeps its order
    /// and numbers skipped lines as a single pass would.
    #[test]
    fn long_logs_keep_order_and_line_numbers() {
        let d = tempfile::tempdir().unwrap();
        let mut bytes = Vec::new();
        let mut bad = Vec::new();
        let mut want = Vec::new();
        for i in 0..12_000 {
            match i % 997 {
                5 => {
                    bytes.extend_from_slice(b"{\"torn\n");
                    bad.push(i + 1);
                }
                6 => bytes.extend_from_slice(b"\n"),
                _ => {
                    let m = msg(&format!("message {i} {}", "x".repeat(i % 200)));
                    bytes.extend_from_slice(serde_json::to_string(&m).unwrap().as_bytes());
                    bytes.push(b'\n');
                    want.push(m);
                }
            }
        }
        assert!(bytes.len() > PARALLEL_BYTES);
        std::fs::write(d.path().join(MESSAGES_FILE), &bytes).unwrap();
        let r = MessageLog::read(d.path()).unwrap();
        assert_eq!(r.skipped_lines, bad);
        assert_eq!(r.messages, want);
        // The same as one thread reading it all.
        assert_eq!(parse_part(&bytes).0, r);
    }

    #[test]
    fn now_rfc3339_is_utc_with_millis() {
        let s = now_rfc3339();
        // e.g. 2026-09-13T12:59:30.421Z
        assert_eq!(s.len(), 24, "{s}");
        assert!(s.ends_with('Z'), "{s}");
        assert_eq!(&s[19..20], ".", "{s}");
        assert!(chrono::DateTime::parse_from_rfc3339(&s).is_ok(), "{s}");
    }

    #[test]
    fn stored_message_is_flat_on_the_wire() {
        let m = msg("x");
        let v: serde_json::Value = serde_json::to_value(&m).unwrap();
        assert_eq!(v["role"], "user");
        assert_eq!(v["content"], "x");
        assert_eq!(v["run_id"], "20260101_000000_abcdef");
        assert!(v.get("status").is_none());
    }
}
