//! The throwaway HOME and private TMPDIR of one child (docs §6.2).
//!
//! One directory per run, `<temp>/vibedesk-sandbox-<unique>/` with `home/`
//! and `tmp/` inside, mode 0700 and owned by the child's user. Removed after
//! the child ends, whatever happened; if the run future is dropped halfway,
//! [`Drop`] removes it. Unlike the original, nothing of the real home is
//! re-exposed: the real `~/.vibedesk` or `~/.config` holds settings and
//! possibly keys, and the child has no business there.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The per-run scratch directories.
#[derive(Debug)]
pub struct Scratch {
    base: Option<PathBuf>,
    home: PathBuf,
    tmp: PathBuf,
}

impl Scratch {
    /// Creates the directories under `root`, owned by `owner` when given.
    pub fn create(root: &Path, owner: Option<(u32, u32)>) -> std::io::Result<Scratch> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let mut builder = std::fs::DirBuilder::new();
        builder.mode(0o700);
        let mut attempt = 0;
        let base = loop {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let name = format!(
                "vibedesk-sandbox-{}-{}-{nanos:08x}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            );
            let candidate = root.join(name);
            // `create_dir` fails on an existing name (or a planted symlink):
            // never reuse what someone else prepared.
            match builder.create(&candidate) {
                Ok(()) => break candidate,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 => {
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        };
        let scratch = Scratch {
            home: base.join("home"),
            tmp: base.join("tmp"),
            base: Some(base),
        };
        builder.create(&scratch.home)?;
        builder.create(&scratch.tmp)?;
        if let (Some((uid, gid)), Some(base)) = (owner, &scratch.base) {
            for p in [base, &scratch.home, &scratch.tmp] {
                std::os::unix::fs::lchown(p, Some(uid), Some(gid))?;
            }
        }
        Ok(scratch)
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// Removes everything now (blocking). Idempotent.
    pub fn remove(&mut self) {
        if let Some(base) = self.base.take() {
            remove_tree(&base);
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let Some(base) = self.base.take() else {
            return;
        };
        // Dropped on an async thread when a run is abandoned: do the
        // (possibly large) removal on the blocking pool when there is one.
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn_blocking(move || remove_tree(&base));
            }
            Err(_) => remove_tree(&base),
        }
    }
}

/// `remove_dir_all` never follows symlinks. A child that left a directory
/// without permissions is made removable once and retried.
fn remove_tree(base: &Path) {
    if std::fs::remove_dir_all(base).is_ok() || !base.exists() {
        return;
    }
    make_writable(base);
    if let Err(e) = std::fs::remove_dir_all(base) {
        tracing::warn!(path = %base.display(), error = %e, "cannot remove the sandbox scratch directory");
    }
}

fn make_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            make_writable(&e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_private_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let mut s = Scratch::create(root.path(), None).unwrap();
        let home = s.home().to_path_buf();
        assert!(home.is_dir() && s.tmp().is_dir());
        assert_eq!(
            std::fs::metadata(&home).unwrap().permissions().mode() & 0o777,
            0o700
        );
        std::fs::create_dir_all(home.join("locked/deeper")).unwrap();
        std::fs::set_permissions(home.join("locked"), std::fs::Permissions::from_mode(0o000))
            .unwrap();
        s.remove();
        assert!(!home.exists());
        assert!(!home.parent().unwrap().exists());
    }

    #[test]
    fn drop_removes_too() {
        let root = tempfile::tempdir().unwrap();
        let s = Scratch::create(root.path(), None).unwrap();
        let base = s.home().parent().unwrap().to_path_buf();
        drop(s);
        assert!(!base.exists());
    }
}
