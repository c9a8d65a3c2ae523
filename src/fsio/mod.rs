//! Crash-safe whole-file writes, shared by every room that keeps files
//! (store, memory, the sandbox's job records): a temp file in the same
//! directory, write, fsync, rename over the target, fsync of the directory,
//! so a reader sees the old or the new content, never a mix. Rooms wrap
//! [`IoError`] in their own error types. Also the one path confinement
//! ([`confine`]).

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

mod confine;
pub use confine::{ConfineError, confine};

/// How many random temp names [`write_atomic`] tries before giving up; a
/// clash needs the same pid and the same 64 random bits, so one retry is
/// already rare.
const TEMP_NAME_ATTEMPTS: usize = 8;
/// Action of the error raised when the temp file cannot be created.
const CREATE_TEMP: &str = "create temp file";

/// A failed file operation: what was done, to which path, and why.
#[derive(Debug, thiserror::Error)]
#[error("{action} {path}: {source}")]
pub struct IoError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl IoError {
    pub fn new(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        IoError {
            action,
            path: path.into(),
            source,
        }
    }
}

/// Whether a write must survive power loss or only a crash of the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// fsync of the file and of its directory: state, memories, logs.
    Synced,
    /// The page cache only: records whose subject dies with the machine
    /// anyway (the sandbox's job records).
    ProcessCrash,
}

/// Writes `bytes` to `path` atomically through `.<file name>.<pid>.<random
/// hex>.tmp` in the same directory. On failure the temp file is removed.
pub fn write_atomic(path: &Path, bytes: &[u8], durability: Durability) -> Result<(), IoError> {
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for _ in 0..TEMP_NAME_ATTEMPTS {
        let tmp = dir.join(format!(
            ".{name}.{}.{:016x}.tmp",
            std::process::id(),
            rand::random::<u64>()
        ));
        match write_via_temp(path, &tmp, bytes, None, false, durability) {
            // Another writer owns this exact temp name: pick a fresh one. Only
            // the temp's creation is retried; a failed rename is reported.
            Err(e) if e.action == CREATE_TEMP && e.source.kind() == ErrorKind::AlreadyExists => {
                continue;
            }
            other => return other,
        }
    }
    Err(IoError::new(
        "create a temp file for",
        path,
        std::io::Error::new(ErrorKind::AlreadyExists, "every random temp name was taken"),
    ))
}

/// [`write_atomic`] through a caller-chosen temp path in the same directory,
/// with optional Unix permission bits for the new file, always synced.
pub fn write_atomic_via(
    path: &Path,
    tmp: &Path,
    bytes: &[u8],
    mode: Option<u32>,
) -> Result<(), IoError> {
    write_via_temp(path, tmp, bytes, mode, true, Durability::Synced)
}

fn write_via_temp(
    path: &Path,
    tmp: &Path,
    bytes: &[u8],
    mode: Option<u32>,
    reuse_temp: bool,
    durability: Durability,
) -> Result<(), IoError> {
    let mut opts = OpenOptions::new();
    opts.write(true);
    if reuse_temp {
        opts.create(true).truncate(true);
    } else {
        opts.create_new(true);
    }
    #[cfg(unix)]
    if let Some(m) = mode {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(m);
    }
    let mut file = opts
        .open(tmp)
        .map_err(|e| IoError::new(CREATE_TEMP, tmp, e))?;
    // `mode` only applies at creation; a truncated stale temp keeps its old
    // bits, so set them explicitly (sidecars must be 0600, docs §5.3).
    #[cfg(unix)]
    if let (Some(m), true) = (mode, reuse_temp) {
        use std::os::unix::fs::PermissionsExt;
        if let Err(e) = file.set_permissions(std::fs::Permissions::from_mode(m)) {
            drop(file);
            let _ = std::fs::remove_file(tmp);
            return Err(IoError::new("set permissions of", tmp, e));
        }
    }
    #[cfg(not(unix))]
    let _ = mode;
    let synced = durability == Durability::Synced;
    let written = file
        .write_all(bytes)
        .map_err(|e| IoError::new("write", tmp, e))
        .and_then(|()| {
            if synced {
                file.sync_all().map_err(|e| IoError::new("fsync", tmp, e))
            } else {
                Ok(())
            }
        });
    drop(file);
    let renamed = written.and_then(|()| {
        std::fs::rename(tmp, path).map_err(|e| IoError::new("rename temp file onto", path, e))
    });
    if let Err(e) = renamed {
        // Best effort: the original error is what matters to the caller.
        let _ = std::fs::remove_file(tmp);
        return Err(e);
    }
    if synced {
        fsync_dir(&parent_dir(path))
    } else {
        Ok(())
    }
}

/// Makes a directory's entries (a rename, a newly created file) durable.
/// Filesystems that cannot fsync a directory report EINVAL/ENOTSUP; the entry
/// change itself already happened, so that is not treated as an error.
pub fn fsync_dir(dir: &Path) -> Result<(), IoError> {
    #[cfg(unix)]
    {
        let d = File::open(dir).map_err(|e| IoError::new("open directory", dir, e))?;
        match d.sync_all() {
            Ok(()) => Ok(()),
            Err(e) if matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::Unsupported) => {
                Ok(())
            }
            Err(e) => Err(IoError::new("fsync directory", dir, e)),
        }
    }
    #[cfg(not(unix))]
    {
        // Windows has no directory fsync; NTFS journals renames itself.
        let _ = (dir, File::open);
        Ok(())
    }
}

/// Reads a whole file, refusing one longer than `cap` bytes (an error of
/// kind `FileTooLarge` saying the cap) without reading more than `cap + 1`:
/// a file a user names (`--spec /dev/zero`, a FIFO) cannot fill memory.
pub fn read_capped(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = File::open(path)?;
    let mut buf = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > cap {
        return Err(std::io::Error::new(
            ErrorKind::FileTooLarge,
            format!("is larger than the {} MiB limit", cap.div_ceil(1 << 20)),
        ));
    }
    Ok(buf)
}

/// The directory holding `path`; `.` for a bare file name.
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capped_read_stops_past_the_cap() {
        let e = read_capped(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::FileTooLarge);
        assert!(e.to_string().contains("1 MiB"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("small");
        std::fs::write(&p, b"12345").unwrap();
        assert_eq!(read_capped(&p, 5).unwrap(), b"12345");
        assert!(read_capped(&p, 4).is_err());
    }

    #[test]
    fn a_process_crash_write_replaces_content_without_a_temp_left() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("job.json");
        write_atomic(&p, b"one", Durability::ProcessCrash).unwrap();
        write_atomic(&p, b"two", Durability::ProcessCrash).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        let missing = d.path().join("no/such/dir/x.json");
        let e = write_atomic(&missing, b"x", Durability::Synced).unwrap_err();
        assert_eq!(e.action, CREATE_TEMP);
    }
}
