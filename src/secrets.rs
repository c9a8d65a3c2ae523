//! Provider keys and other credentials kept out of reach of the processes
//! vibedesk starts (docs §6.1, §13.1).
//!
//! A child's own environment never holds them (the sandbox and MCP servers
//! get an allow-list), but a same-user process could read the parent's
//! `/proc/<pid>/environ` (issue 24 item 5). So at start, before any thread
//! or child exists, [`take_from_environment`] moves every variable whose
//! name marks a credential out of the process environment into memory,
//! where [`var`] still finds it for the configuration; and [`protect`]
//! makes the process non-dumpable, so `/proc/<pid>/{environ,mem}` belong to
//! root and same-user processes cannot read or trace it.
//!
//! `/proc/<pid>/environ` shows the block of `NAME=value` strings the kernel
//! wrote at exec, not the C library's current list, so unsetting a variable
//! is not enough: its string in that block is overwritten with zeros too.

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char};
use std::sync::OnceLock;

unsafe extern "C" {
    /// The C library's environment list (POSIX `environ`).
    static environ: *const *const c_char;
}

/// The variables taken out of the environment at start.
static TAKEN: OnceLock<BTreeMap<String, String>> = OnceLock::new();

/// Name endings (upper-cased) that mark a credential: provider keys
/// (`OPENAI_API_KEY`, `VIBEDESK_API_KEY`), cloud secrets
/// (`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AZURE_CLIENT_SECRET`),
/// tokens (`GITHUB_TOKEN`, `HF_TOKEN`) and passwords.
const CREDENTIAL_SUFFIXES: &[&str] = &[
    "_KEY",
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_PASSWD",
    "_PASSPHRASE",
    "_PWD_MD5",
];

/// Whether `name` names a credential (compared upper-cased).
pub fn is_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    CREDENTIAL_SUFFIXES.iter().any(|s| upper.ends_with(s))
}

/// Moves every credential variable except those in `keep` out of the
/// process environment and into memory; returns the names taken. Only the
/// first call takes anything.
///
/// # Safety
///
/// Changing the environment races with any other thread that reads it
/// (`getenv` in libc included): call this before any thread is started,
/// as `cli::main` does before it builds the async runtime.
pub unsafe fn take_from_environment(keep: &[String]) -> Vec<String> {
    if TAKEN.get().is_some() {
        return Vec::new();
    }
    let taken: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| is_credential(k) && !keep.contains(k))
        .collect();
    // SAFETY: single-threaded (the caller's promise), so the list cannot
    // change while it is walked.
    let originals = unsafe { strings_in_exec_block(&taken) };
    for name in taken.keys() {
        // SAFETY: the caller promises no other thread exists (see above).
        unsafe { std::env::remove_var(name) };
    }
    for (ptr, len) in originals {
        // SAFETY: `ptr..ptr+len` lies inside the environment block the
        // kernel mapped at exec (checked against /proc/self/stat), which
        // stays mapped and writable for the life of the process; after
        // `remove_var` nothing points at these bytes any more.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
    }
    let names = taken.keys().cloned().collect();
    let _ = TAKEN.set(taken);
    names
}

/// The `NAME=value` strings of `taken` that lie in the block the kernel
/// wrote at exec: their address and length. Empty when the block's bounds
/// cannot be read.
///
/// # Safety
///
/// No other thread may change the environment meanwhile.
unsafe fn strings_in_exec_block(taken: &BTreeMap<String, String>) -> Vec<(*mut u8, usize)> {
    let Some((start, end)) = exec_env_block() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    // SAFETY: `environ` is the C library's NULL-terminated list of
    // NUL-terminated strings; nothing changes it while we read (see above).
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let bytes = CStr::from_ptr(*entry).to_bytes();
            let name = bytes.split(|b| *b == b'=').next().unwrap_or_default();
            let addr = *entry as usize;
            let inside = addr >= start && addr.saturating_add(bytes.len()) <= end;
            if inside && std::str::from_utf8(name).is_ok_and(|n| taken.contains_key(n)) {
                out.push((*entry as *mut u8, bytes.len()));
            }
            entry = entry.add(1);
        }
    }
    out
}

/// `env_start` and `env_end` of `/proc/self/stat` (fields 50 and 51).
fn exec_env_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields from the third on follow the command name's closing paren.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<usize>().ok();
    let (start, end) = (field(50)?, field(51)?);
    (start > 0 && start < end).then_some((start, end))
}

/// A variable's value: the environment's, else the one taken at start.
pub fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .or_else(|| TAKEN.get().and_then(|t| t.get(name).cloned()))
}

/// Makes this process non-dumpable (`PR_SET_DUMPABLE` 0): no core dumps,
/// and its `/proc/<pid>` files that could expose memory or the environment
/// are owned by root, so same-user processes cannot read or ptrace it.
/// A failure is returned for the caller to log, never fatal.
pub fn protect() -> Result<(), nix::Error> {
    nix::sys::prctl::set_dumpable(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exec_environment_block_is_found() {
        let (start, end) = exec_env_block().unwrap();
        // PATH is set for every test run, and its string lies in the block.
        let path = std::env::var_os("PATH").unwrap();
        assert!(!path.is_empty());
        assert!(end - start > path.len(), "{start:#x}..{end:#x}");
    }

    #[test]
    fn credentials_are_known_by_their_names() {
        for name in [
            "OPENAI_API_KEY",
            "VIBEDESK_API_KEY",
            "deepseek_api_key",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AZURE_CLIENT_SECRET",
            "DB_PASSWORD",
            "FUTU_TRADE_PWD_MD5",
        ] {
            assert!(is_credential(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "PWD",
            "VIBEDESK_HOME",
            "TOKENIZERS_PARALLELISM",
            "AWS_REGION",
            "KEYBOARD",
        ] {
            assert!(!is_credential(name), "{name}");
        }
    }
}
