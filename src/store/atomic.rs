//! STUB: to be completed (atomic tmp+fsync+rename+dir fsync).
use std::path::Path;

use serde::Serialize;

use super::StoreError;

pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    std::fs::write(path, bytes).map_err(|e| StoreError::io("write", path, e))
}

pub fn atomic_write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    let mut text = serde_json::to_string_pretty(value).map_err(|source| StoreError::Json { what: "state", source })?;
    text.push('\n');
    atomic_write(path, text.as_bytes())
}

pub fn fsync_dir(_dir: &Path) -> Result<(), StoreError> {
    Ok(())
}
