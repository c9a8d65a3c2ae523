//! Crash-safe file writes (docs §5.1, §5.3). Whole-file writes go through a
//! temp file in the same directory, fsync, rename and fsync of the directory,
//! so a reader sees either the old or the new content, never a mix. Append-only
//! logs are opened with [`open_append_repairing`] and written with
//! [`append_synced`], one fsynced record per call.
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::StoreError;
use crate::fsio::{self, Durability, parent_dir};

/// Writes `bytes` to `path` atomically: temp file `.<file name>.<pid>.<random
/// hex>.tmp` in the same directory, write all, fsync, rename over the target,
/// fsync the directory. On failure the temp file is removed.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    split_target(path)?;
    Ok(fsio::write_atomic(path, bytes, Durability::Synced)?)
}

/// Like [`atomic_write`] but with a caller-chosen temp path (same directory as
/// `path`) and optional Unix permission bits for the new file. The temp file is
/// truncated if it exists: a stale one can only be left by a crashed writer
/// with the same pid (docs §5.3 sidecars use `.<name>.<pid>.tmp`, mode 0600).
pub fn atomic_write_with_temp(
    path: &Path,
    tmp: &Path,
    bytes: &[u8],
    mode: Option<u32>,
) -> Result<(), StoreError> {
    if tmp.parent() != path.parent() {
        // rename(2) is only atomic within one filesystem; same dir guarantees it.
        return Err(StoreError::Invalid(format!(
            "temp file {} must be in the same directory as {}",
            tmp.display(),
            path.display()
        )));
    }
    Ok(fsio::write_atomic_via(path, tmp, bytes, mode)?)
}

/// Pretty JSON (2-space indent, non-ASCII kept) plus a trailing newline,
/// written with [`atomic_write`] (docs §5.1 `req.json`, `state.json`).
pub fn atomic_write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), StoreError> {
    let mut text = serde_json::to_string_pretty(value).map_err(|source| StoreError::Json {
        what: std::any::type_name::<T>(),
        source,
    })?;
    text.push('\n');
    atomic_write(path, text.as_bytes())
}

/// Makes a directory's entries (a rename, a newly created file) durable.
/// Filesystems that cannot fsync a directory report EINVAL/ENOTSUP; the entry
/// change itself already happened, so that is not treated as an error.
pub fn fsync_dir(dir: &Path) -> Result<(), StoreError> {
    Ok(fsio::fsync_dir(dir)?)
}

/// Appends one whole record and fsyncs it, so an acknowledged record survives
/// power loss (docs §5.3: each write is flushed and fsynced).
pub fn append_synced(file: &mut File, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    file.write_all(bytes)
        .map_err(|e| StoreError::io("append to", path, e))?;
    file.sync_data()
        .map_err(|e| StoreError::io("fsync", path, e))
}

/// Opens an append-only log, creating its parent directories and the file.
/// Returns the file and whether it was newly created (its directory is then
/// fsynced, docs §5.3). If an existing file does not end with `\n` (a record
/// torn by a crash) a `\n` is appended first, so the next record starts on a
/// line of its own instead of being glued to the torn one.
pub fn open_append_repairing(path: &Path) -> Result<(File, bool), StoreError> {
    let dir = parent_dir(path);
    std::fs::create_dir_all(&dir).map_err(|e| StoreError::io("create directory", &dir, e))?;

    // create_new tells us atomically whether we created it, with no stat race.
    let created_file = OpenOptions::new()
        .read(true)
        .append(true)
        .create_new(true)
        .open(path);
    let (mut file, created) = match created_file {
        Ok(f) => (f, true),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            let f = OpenOptions::new()
                .read(true)
                .append(true)
                .open(path)
                .map_err(|e| StoreError::io("open", path, e))?;
            (f, false)
        }
        Err(e) => return Err(StoreError::io("create", path, e)),
    };

    if created {
        fsync_dir(&dir)?;
    } else if !ends_with_newline(&mut file, path)? {
        append_synced(&mut file, path, b"\n")?;
    }
    Ok((file, created))
}

/// True for an empty file or one whose last byte is `\n`.
fn ends_with_newline(file: &mut File, path: &Path) -> Result<bool, StoreError> {
    let len = file
        .metadata()
        .map_err(|e| StoreError::io("stat", path, e))?
        .len();
    if len == 0 {
        return Ok(true);
    }
    // Reads honour the cursor even on an O_APPEND file; writes still go to the end.
    file.seek(SeekFrom::End(-1))
        .map_err(|e| StoreError::io("seek in", path, e))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)
        .map_err(|e| StoreError::io("read", path, e))?;
    Ok(last[0] == b'\n')
}

fn split_target(path: &Path) -> Result<(PathBuf, String), StoreError> {
    let name = path
        .file_name()
        .ok_or_else(|| StoreError::Invalid(format!("{} does not name a file", path.display())))?;
    Ok((parent_dir(path), name.to_string_lossy().into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn atomic_write_replaces_content_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state.json");
        atomic_write(&p, b"first").unwrap();
        atomic_write(&p, b"second, longer").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"second, longer");
        assert_eq!(entries(d.path()), vec!["state.json".to_string()]);
    }

    #[test]
    fn atomic_write_failure_removes_temp_and_names_path() {
        let d = tempfile::tempdir().unwrap();
        // The target is a non-empty directory, so the rename must fail.
        let target = d.path().join("occupied");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("x"), b"x").unwrap();
        let err = atomic_write(&target, b"data").unwrap_err();
        match &err {
            StoreError::Io(e) => assert_eq!(&e.path, &target),
            other => panic!("unexpected error {other:?}"),
        }
        assert_eq!(entries(d.path()), vec!["occupied".to_string()]);
    }

    #[test]
    fn atomic_write_missing_dir_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("nope").join("f.json");
        assert!(matches!(atomic_write(&p, b"x"), Err(StoreError::Io(_))));
        assert!(!p.exists());
    }

    #[test]
    fn atomic_write_json_is_pretty_with_newline_and_keeps_unicode() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("req.json");
        atomic_write_json(&p, &serde_json::json!({"prompt": "日本 ✓", "n": [1]})).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.ends_with("}\n"), "{text:?}");
        assert!(text.contains("\n  \"n\": [\n    1\n  ]"), "{text:?}");
        assert!(
            text.contains("日本 ✓"),
            "non-ASCII must not be escaped: {text:?}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn atomic_write_with_temp_sets_mode_and_cleans_up() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("blob.txt");
        let tmp = d.path().join(".blob.txt.1.tmp");
        // A stale temp from a crashed writer must not block the write.
        std::fs::write(&tmp, b"stale garbage that is long").unwrap();
        atomic_write_with_temp(&p, &tmp, b"hello", Some(0o600)).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"hello");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(entries(d.path()), vec!["blob.txt".to_string()]);
        let other_dir = d.path().join("sub");
        std::fs::create_dir(&other_dir).unwrap();
        assert!(matches!(
            atomic_write_with_temp(&p, &other_dir.join("t.tmp"), b"x", None),
            Err(StoreError::Invalid(_))
        ));
    }

    #[test]
    fn fsync_dir_works_and_reports_missing_dir() {
        let d = tempfile::tempdir().unwrap();
        fsync_dir(d.path()).unwrap();
        assert!(fsync_dir(&d.path().join("missing")).is_err());
    }

    #[test]
    fn open_append_repairing_creates_parents_and_reports_created() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a").join("b").join("log.jsonl");
        let (mut f, created) = open_append_repairing(&p).unwrap();
        assert!(created);
        append_synced(&mut f, &p, b"{\"a\":1}\n").unwrap();
        drop(f);
        let (_f, created) = open_append_repairing(&p).unwrap();
        assert!(!created);
        // A well-formed file is left byte-for-byte alone.
        assert_eq!(std::fs::read(&p).unwrap(), b"{\"a\":1}\n");
    }

    #[test]
    fn open_append_repairing_terminates_a_torn_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("log.jsonl");
        std::fs::write(&p, b"{\"a\":1}\n{\"b\":").unwrap();
        let (mut f, created) = open_append_repairing(&p).unwrap();
        assert!(!created);
        append_synced(&mut f, &p, b"{\"c\":3}\n").unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, "{\"a\":1}\n{\"b\":\n{\"c\":3}\n");
    }

    #[test]
    fn open_append_repairing_leaves_empty_file_empty() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("log.jsonl");
        std::fs::write(&p, b"").unwrap();
        let (_f, created) = open_append_repairing(&p).unwrap();
        assert!(!created);
        assert_eq!(std::fs::read(&p).unwrap().len(), 0);
    }
}
