//! Path confinement, the one copy every room uses to keep a path given by
//! a model, a client or a file inside the folders it may reach: the file
//! tools and the backtest's `run_dir` (the session workspace and the run
//! directory), local market data (its configured folder), trace sidecars
//! (the trace directory).
//!
//! `..` is applied lexically first, then the longest existing ancestor is
//! canonicalised, so a symlink anywhere on the existing part cannot lead
//! out, and a path still to be created resolves too.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Why a path could not be confined.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// It climbs above `/` or resolves outside every root.
    #[error("the path leads outside the folders it may reach")]
    Outside,
    /// Resolving its existing part failed (permissions, a loop of links).
    #[error("cannot resolve the path: {0}")]
    Io(#[from] std::io::Error),
}

/// `path` (absolute, or relative to the process's directory) resolved
/// through symlinks, if it lies inside one of `roots`.
pub fn confine(path: &Path, roots: &[&Path]) -> Result<PathBuf, ConfineError> {
    let lexical = normalise(path).ok_or(ConfineError::Outside)?;
    let real = canonical_prefix(&lexical)?;
    for root in roots {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        if real.starts_with(&root) {
            return Ok(real);
        }
    }
    Err(ConfineError::Outside)
}

/// Removes `.` and applies `..` lexically; `None` if it climbs above `/`.
fn normalise(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

/// Canonicalises the longest existing ancestor and re-appends the rest.
fn canonical_prefix(p: &Path) -> std::io::Result<PathBuf> {
    let mut existing = p.to_path_buf();
    let mut rest: Vec<OsString> = Vec::new();
    loop {
        match existing.canonicalize() {
            Ok(mut real) => {
                for part in rest.iter().rev() {
                    real.push(part);
                }
                return Ok(real);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let Some(name) = existing.file_name().map(|n| n.to_os_string()) else {
                    return Err(e);
                };
                rest.push(name);
                if !existing.pop() {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_outside_links_and_paths_to_be() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("ws");
        let other = d.path().join("other");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::os::unix::fs::symlink(&other, root.join("link")).unwrap();
        let real_root = root.canonicalize().unwrap();

        let ok = confine(&root.join("sub/../new/file.txt"), &[&root]).unwrap();
        assert_eq!(ok, real_root.join("new/file.txt"));
        assert!(matches!(
            confine(&root.join("../other/x"), &[&root]),
            Err(ConfineError::Outside)
        ));
        assert!(matches!(
            confine(&root.join("link/x"), &[&root]),
            Err(ConfineError::Outside)
        ));
        assert!(matches!(
            confine(Path::new("/../../etc"), &[&root]),
            Err(ConfineError::Outside)
        ));
        // The second root admits what the first does not.
        assert!(confine(&other.join("y"), &[&root, &other]).is_ok());
    }
}
