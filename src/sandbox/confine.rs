//! Landlock: the child may write only below its writable roots (an
//! improvement over the original, which confines nothing; brief of issue 5).
//!
//! What is handled: every write-like file-system right of ABI 4 (write,
//! truncate, create, remove, rename/link across directories). Reads and
//! execution stay allowed everywhere, so interpreters and libraries load as
//! usual. Device ioctls are not handled (the child has no controlling
//! terminal anyway: it runs in its own session). On ABI 6 and later two
//! scopes are added: the child cannot signal processes outside its sandbox
//! (a stray `kill -9 -1` cannot touch the engine) nor connect to abstract
//! UNIX sockets created outside it. Network access is left alone: data
//! downloads are legitimate.
//!
//! The ruleset is built in the parent (it opens directories, which
//! allocates) and only enforced in the child (`restrict_self`: two system
//! calls, no allocation), after the privilege drop. Enforcing it also sets
//! `no_new_privs`, so set-uid programs such as `sudo` cannot elevate.

use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};

/// Device files any program may write (`> /dev/null` must keep working).
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Shared scratch some libraries insist on (POSIX semaphores and shared
/// memory of Python's multiprocessing, joblib).
const SHARED_SCRATCH: &[&str] = &["/dev/shm"];

/// The Landlock ABI the running kernel offers; `0` when it has none.
pub fn kernel_abi() -> u8 {
    static ABI_VERSION: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
    *ABI_VERSION.get_or_init(probe_abi)
}

#[cfg(target_os = "linux")]
fn probe_abi() -> u8 {
    /// `LANDLOCK_CREATE_RULESET_VERSION` (linux/landlock.h).
    const VERSION_FLAG: u32 = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag,
    // landlock_create_ruleset reads no memory and returns the ABI version or
    // -1 (ENOSYS/EOPNOTSUPP); no file descriptor is created.
    let v = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            VERSION_FLAG,
        )
    };
    u8::try_from(v).unwrap_or(0)
}

#[cfg(not(target_os = "linux"))]
fn probe_abi() -> u8 {
    0
}

/// The rights this runner handles; see the module docs.
fn write_rights() -> landlock::BitFlags<AccessFs> {
    AccessFs::from_write(ABI::V4)
}

/// Builds the ruleset that limits writes to `writable` (plus the harmless
/// devices and `/dev/shm`). Paths that do not exist are skipped.
pub(crate) fn build_ruleset(writable: &[PathBuf]) -> Result<RulesetCreated, RulesetError> {
    let rights = write_rights();
    let scratch = SHARED_SCRATCH
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.is_dir());
    let dirs: Vec<PathBuf> = writable.iter().cloned().chain(scratch).collect();
    let devices: Vec<PathBuf> = WRITABLE_DEVICES
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    Ruleset::default()
        // Best effort: an older kernel gets the subset it understands; the
        // caller reports the ABI so the user knows what held.
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(rights)
        .and_then(|r| r.scope(Scope::from_all(ABI::V6)))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(&dirs, rights)))
        .and_then(|r| {
            r.add_rules(path_beneath_rules(
                &devices,
                AccessFs::WriteFile | AccessFs::Truncate,
            ))
        })
        .map_err(RulesetError)
}

/// The Landlock ruleset could not be built (the kernel refused a step).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the Landlock ruleset: {0}")]
pub(crate) struct RulesetError(#[source] landlock::RulesetError);

/// Runs in the forked child: enforces `ruleset` on it and everything it
/// starts. Two system calls (`prctl(PR_SET_NO_NEW_PRIVS)`,
/// `landlock_restrict_self`), no allocation.
pub(crate) fn enforce_in_child(ruleset: RulesetCreated) -> std::io::Result<()> {
    ruleset
        .restrict_self()
        .map(drop)
        .map_err(|_| std::io::Error::from_raw_os_error(nix::libc::EPERM))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_kernel_reports_an_abi_and_a_ruleset_builds() {
        let abi = kernel_abi();
        // Any answer is valid; the machine notes say 7 here.
        assert!(abi <= 64);
        if abi > 0 {
            let dir = tempfile::tempdir().unwrap();
            build_ruleset(&[dir.path().to_path_buf(), PathBuf::from("/nonexistent/x")]).unwrap();
        }
    }
}
