//! The memory room's crash-safe whole-file write, through the crate's one
//! implementation ([`crate::fsio`]): a temp file in the same directory,
//! fsync, rename over the target, fsync of the directory. The store, the
//! hierarchy index, links and maintenance all write through it.

use std::path::Path;

use super::MemoryError;
use crate::fsio::{self, Durability};

/// Writes `bytes` to `path` atomically (see [`fsio::write_atomic`]).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), MemoryError> {
    if path.parent().is_none_or(|d| d.as_os_str().is_empty()) {
        return Err(MemoryError::Invalid(format!(
            "{} has no parent directory",
            path.display()
        )));
    }
    fsio::write_atomic(path, bytes, Durability::Synced)
        .map_err(|e| MemoryError::io("write", path, e.source))
}

/// Best effort: a directory fsync makes a rename durable; some filesystems
/// refuse it, which must not fail the write.
pub(crate) fn fsync_dir(dir: &Path) {
    let _ = fsio::fsync_dir(dir);
}
