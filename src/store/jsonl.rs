//! One append-only JSONL log (docs §5.2, §5.3): the session message log and
//! the trace both append one JSON value per line through [`JsonlLog`]. A
//! line torn by a crash is terminated on open; a write that failed part-way
//! makes the next record start with `\n`, so every record keeps a line of its
//! own. The two logs differ only in what a failed fsync means
//! ([`FsyncFailure`]).
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::StoreError;
use super::atomic::open_append_repairing;

/// What a failed fsync after a record does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncFailure {
    /// The append fails: the caller was promised durability (messages, docs
    /// §5.2).
    Fails,
    /// Warn once and keep appending without fsync, rather than failing the
    /// run over its diary (the trace, docs §5.3; a team's events, §14.4).
    WarnOnceThenFlushOnly,
}

/// An open append-only JSONL file.
#[derive(Debug)]
pub struct JsonlLog {
    path: PathBuf,
    file: File,
    on_fsync_failure: FsyncFailure,
    /// Cleared after a tolerated fsync failure.
    fsync_enabled: bool,
    /// Set when an append failed part-way: the file may end in a partial line.
    needs_separator: bool,
}

impl JsonlLog {
    /// Opens (creating it and its parent directories if needed) `path` for
    /// append, terminating a line torn by an earlier crash.
    pub fn open(path: PathBuf, on_fsync_failure: FsyncFailure) -> Result<Self, StoreError> {
        let (file, _created) = open_append_repairing(&path)?;
        Ok(JsonlLog {
            path,
            file,
            on_fsync_failure,
            fsync_enabled: true,
            needs_separator: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `value` as one line and fsyncs it; `what` names the value in a
    /// JSON encoding error.
    pub fn append<T: Serialize + ?Sized>(
        &mut self,
        what: &'static str,
        value: &T,
    ) -> Result<(), StoreError> {
        self.append_unsynced(what, value)?;
        self.sync()
    }

    /// Appends `value` as one line without the fsync: for logs that make
    /// many records durable at once with [`JsonlLog::sync`] (a team run's
    /// `events.jsonl`, docs §14.4).
    pub fn append_unsynced<T: Serialize + ?Sized>(
        &mut self,
        what: &'static str,
        value: &T,
    ) -> Result<(), StoreError> {
        let json =
            serde_json::to_string(value).map_err(|source| StoreError::Json { what, source })?;
        let mut line = String::with_capacity(json.len() + 2);
        if self.needs_separator {
            line.push('\n');
        }
        line.push_str(&json);
        line.push('\n');
        if let Err(e) = self.file.write_all(line.as_bytes()) {
            // We cannot tell how much reached the file; at worst the extra
            // `\n` makes a blank line, which readers ignore.
            self.needs_separator = true;
            return Err(StoreError::io("append to", &self.path, e));
        }
        Ok(())
    }

    /// fsync what was appended. `File` is unbuffered, so on a tolerated
    /// failure the bytes are already in the kernel (docs §10.7 TR-1).
    pub fn sync(&mut self) -> Result<(), StoreError> {
        if !self.fsync_enabled {
            self.needs_separator = false;
            return Ok(());
        }
        match (self.file.sync_data(), self.on_fsync_failure) {
            (Ok(()), _) => {
                self.needs_separator = false;
                Ok(())
            }
            (Err(e), FsyncFailure::Fails) => {
                self.needs_separator = true;
                Err(StoreError::io("fsync", &self.path, e))
            }
            (Err(e), FsyncFailure::WarnOnceThenFlushOnly) => {
                self.needs_separator = false;
                self.fsync_enabled = false;
                tracing::warn!(
                    path = %self.path.display(),
                    error = %e,
                    "fsync of the trace failed; continuing without fsync"
                );
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_one_line_per_value_after_a_torn_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub").join("log.jsonl");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"{\"a\":1}\n{\"b\":").unwrap();
        let mut log = JsonlLog::open(p.clone(), FsyncFailure::Fails).unwrap();
        log.append("value", &serde_json::json!({"c": 3})).unwrap();
        log.append("value", &serde_json::json!({"d": 4})).unwrap();
        assert_eq!(log.path(), p);
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"a\":1}\n{\"b\":\n{\"c\":3}\n{\"d\":4}\n"
        );
    }
}
