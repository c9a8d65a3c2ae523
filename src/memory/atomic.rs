//! The memory room's own crash-safe whole-file write (the room uses no other
//! room of the crate, so not `store::atomic`): a temp file in the same
//! directory, fsync, rename over the target, fsync of the directory. The
//! store, the hierarchy index, links and maintenance all write through it.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::MemoryError;

/// Writes `bytes` to `path` atomically: a temp file in the same directory,
/// fsync, rename over the target, fsync of the directory.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), MemoryError> {
    let dir = path.parent().ok_or_else(|| {
        MemoryError::Invalid(format!("{} has no parent directory", path.display()))
    })?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.{}.{:016x}.tmp",
        std::process::id(),
        rand::random::<u64>()
    ));
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        fsync_dir(dir);
        Ok(())
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(MemoryError::io("write", path, e));
    }
    Ok(())
}

/// Best effort: a directory fsync makes a rename durable; some filesystems
/// refuse it, which must not fail the write.
pub(crate) fn fsync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}
