//! Optional privilege drop (docs §6.2, extended).
//!
//! The original drops to `vibe-sandbox` when that user exists. Here: a
//! dedicated `vibedesk-sandbox` user when it exists, else, when the engine
//! runs as root, `nobody`. The point of the fallback is `RLIMIT_NPROC`: the
//! kernel never applies it to root, so a fork bomb run as root is bounded by
//! nothing. `nobody` is shared with other daemons, so a dedicated user is
//! better; create one with `useradd --system --no-create-home vibedesk-sandbox`.
//!
//! A drop needs two things per run, checked before spawning:
//! - the user must be able to *reach* its writable roots (every ancestor
//!   searchable). A run dir under `/root` (mode 0700) is unreachable; the
//!   drop is then skipped for that run, with a warning and a note in the
//!   result's [`super::Protections`] (docs §6.2: "re-run without the drop").
//!   Put the data dir somewhere traversable (`VIBEDESK_HOME`) to keep it;
//! - the user must be able to *write* them: the runner hands the writable
//!   roots over (`chown`, recursively) to that user. The engine, as root,
//!   keeps full access. The walk never follows symlinks, works from open
//!   directory descriptors so a concurrent rename cannot redirect it, and
//!   skips files with more than one hard link (a link to a file elsewhere
//!   must not be handed over).
//!
//! Without root there is no drop (no CAP_SETUID): the child runs as the
//! engine's user, and its process limit is raised by the processes that user
//! already has (see [`super::Limits::processes`]).

use std::path::{Path, PathBuf};

use serde::Serialize;

/// The dedicated user, preferred when it exists.
pub const DEDICATED_USER: &str = "vibedesk-sandbox";
/// The fallback for a root parent.
pub const FALLBACK_USER: &str = "nobody";
/// Entries the hand-over walk visits at most per run.
const HAND_OVER_BUDGET: usize = 100_000;
/// Nesting the hand-over walk descends at most.
const HAND_OVER_DEPTH: usize = 64;

/// Whom the child runs as.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub enum UserPolicy {
    /// `vibedesk-sandbox` if it exists, else `nobody` when root, else no drop.
    #[default]
    Auto,
    /// Never drop.
    Off,
    /// This user (only possible as root).
    Named(String),
}

/// An unprivileged user to run as.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DropTarget {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// The static part of the decision: who, or why nobody.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserDecision {
    pub target: Option<DropTarget>,
    /// Why there is no target (or `None` when there is one).
    pub note: Option<String>,
}

fn lookup(name: &str) -> Option<DropTarget> {
    match nix::unistd::User::from_name(name) {
        Ok(Some(u)) if !u.uid.is_root() => Some(DropTarget {
            name: u.name,
            uid: u.uid.as_raw(),
            gid: u.gid.as_raw(),
        }),
        _ => None,
    }
}

/// Resolves `policy` on this machine.
pub fn decide(policy: &UserPolicy) -> UserDecision {
    let none = |note: String| UserDecision {
        target: None,
        note: Some(note),
    };
    if !cfg!(target_os = "linux") {
        return none("privilege drop is implemented on Linux only".into());
    }
    let root = nix::unistd::geteuid().is_root();
    match policy {
        UserPolicy::Off => none("privilege drop disabled".into()),
        _ if !root => none("not root: the child runs as the engine's user".into()),
        UserPolicy::Named(name) => match lookup(name) {
            Some(t) => UserDecision {
                target: Some(t),
                note: None,
            },
            None => none(format!(
                "user '{name}' does not exist: runs as root, RLIMIT_NPROC not enforced"
            )),
        },
        UserPolicy::Auto => match lookup(DEDICATED_USER).or_else(|| lookup(FALLBACK_USER)) {
            Some(t) => UserDecision {
                target: Some(t),
                note: None,
            },
            None => none(format!(
                "no unprivileged user ({DEDICATED_USER}, {FALLBACK_USER}): runs as root, RLIMIT_NPROC not enforced"
            )),
        },
    }
}

/// Whether `target` can search (traverse) every existing ancestor of each
/// path, and the path itself; `Err` names the first directory it cannot.
pub fn check_reachable(target: &DropTarget, paths: &[PathBuf]) -> Result<(), PathBuf> {
    use std::os::unix::fs::MetadataExt;
    for p in paths {
        let mut chain: Vec<&Path> = p.ancestors().collect();
        chain.reverse();
        for dir in chain {
            let Ok(meta) = std::fs::metadata(dir) else {
                // Not created yet: the runner creates it, owned by the target.
                break;
            };
            let mode = meta.mode();
            let ok = if meta.uid() == target.uid {
                mode & 0o100 != 0
            } else if meta.gid() == target.gid {
                mode & 0o010 != 0
            } else {
                mode & 0o001 != 0
            };
            if !ok {
                return Err(dir.to_path_buf());
            }
        }
    }
    Ok(())
}

/// Hands `root` and everything below it to `uid:gid` (see the module docs).
/// Returns how many entries changed owner.
#[cfg(target_os = "linux")]
pub fn hand_over(root: &Path, uid: u32, gid: u32) -> std::io::Result<usize> {
    use nix::fcntl::{OFlag, open, openat};
    use nix::sys::stat::{Mode, SFlag, fstat};
    use nix::unistd::{Gid, Uid, fchown, fchownat};
    use std::os::fd::{AsRawFd, OwnedFd};

    let to_io = |e: nix::errno::Errno| std::io::Error::from_raw_os_error(e as i32);
    let (owner, group) = (Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)));
    let dir_flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let top = open(root, dir_flags, Mode::empty()).map_err(to_io)?;
    let mut changed = 0usize;
    let mut visited = 0usize;
    let mut stack: Vec<(OwnedFd, usize)> = vec![(top, 0)];
    while let Some((dir, depth)) = stack.pop() {
        let st = fstat(&dir).map_err(to_io)?;
        if st.st_uid != uid || st.st_gid != gid {
            fchown(&dir, owner, group).map_err(to_io)?;
            changed += 1;
        }
        // The open descriptor pins this directory: listing it through
        // /proc/self/fd cannot be redirected by a rename of any ancestor.
        let listing = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))?;
        for entry in listing {
            let entry = entry?;
            visited += 1;
            if visited > HAND_OVER_BUDGET {
                tracing::warn!(root = %root.display(), "hand-over stopped after {HAND_OVER_BUDGET} entries");
                return Ok(changed);
            }
            let name = entry.file_name();
            let Ok(fd) = openat(
                &dir,
                name.as_os_str(),
                OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) else {
                continue; // vanished meanwhile
            };
            let Ok(st) = fstat(&fd) else { continue };
            let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
            if kind == SFlag::S_IFLNK {
                continue;
            }
            if kind == SFlag::S_IFDIR {
                if depth + 1 >= HAND_OVER_DEPTH {
                    continue;
                }
                if let Ok(sub) = openat(&dir, name.as_os_str(), dir_flags, Mode::empty()) {
                    // Same inode as the one just checked, or it was swapped.
                    if let Ok(s2) = fstat(&sub)
                        && s2.st_ino == st.st_ino
                        && s2.st_dev == st.st_dev
                    {
                        stack.push((sub, depth + 1));
                    }
                }
                continue;
            }
            if st.st_nlink != 1 || (st.st_uid == uid && st.st_gid == gid) {
                continue;
            }
            // On the O_PATH descriptor itself: exactly the inode checked above.
            if fchownat(&fd, "", owner, group, nix::fcntl::AtFlags::AT_EMPTY_PATH).is_ok() {
                changed += 1;
            }
        }
    }
    Ok(changed)
}

#[cfg(not(target_os = "linux"))]
pub fn hand_over(_root: &Path, _uid: u32, _gid: u32) -> std::io::Result<usize> {
    Ok(0)
}

/// Processes whose `/proc/<pid>` belongs to `uid`: what `RLIMIT_NPROC`
/// already counts against that user (approximately: the owner of the entry
/// is the effective uid, the limit counts the real one).
pub fn count_processes_of(uid: u32) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| e.metadata().map(|m| m.uid() == uid).unwrap_or(false))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn off_means_no_drop() {
        let d = decide(&UserPolicy::Off);
        assert!(d.target.is_none());
        assert!(d.note.unwrap().contains("disabled"));
    }

    #[test]
    fn a_missing_named_user_is_reported() {
        let d = decide(&UserPolicy::Named("no-such-user-vibedesk-x".into()));
        assert!(d.target.is_none());
        assert!(d.note.is_some());
    }

    #[test]
    fn reachability_follows_the_mode_bits() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("a/b");
        std::fs::create_dir_all(&inner).unwrap();
        let t = DropTarget {
            name: "x".into(),
            uid: 64_000,
            gid: 64_000,
        };
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(
            check_reachable(&t, std::slice::from_ref(&inner)),
            Err(dir.path().to_path_buf())
        );
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(check_reachable(&t, &[inner.join("not/yet")]), Ok(()));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn hand_over_skips_symlinks_and_hard_links() {
        use std::os::unix::fs::MetadataExt;
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: chown needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "x").unwrap();
        let root = dir.path().join("run");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/f"), "x").unwrap();
        std::os::unix::fs::symlink(&victim, root.join("link")).unwrap();
        std::fs::hard_link(&victim, root.join("hard")).unwrap();
        let n = hand_over(&root, 64_001, 64_001).unwrap();
        assert_eq!(n, 3, "run, sub and sub/f");
        assert_eq!(std::fs::metadata(root.join("sub/f")).unwrap().uid(), 64_001);
        assert_eq!(std::fs::metadata(&victim).unwrap().uid(), 0);
    }
}
