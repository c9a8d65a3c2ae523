//! How many tasks a team may run at once (docs §14.3): at least one, and
//! no more than the open-file limit can serve. Each worker holds files of
//! its own (the trace, the model's connection, a sandboxed job's pipes), so
//! past the limit tasks fail with "Too many open files" instead of waiting.

/// Open files a running task may need at once.
pub const FILES_PER_WORKER: u64 = 16;
/// Open files kept for vibedesk itself (logs, the run's records, stdio).
pub const FILES_RESERVED: u64 = 64;

/// Why a `--max-workers` (or `[swarm] max_workers`) value was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum WorkersError {
    #[error("max_workers must be at least 1 (got 0): it is how many tasks run at once")]
    Zero,
    #[error(
        "max_workers {asked} is more than the open-file limit allows: RLIMIT_NOFILE is {limit}, enough for {max} worker(s) ({per} files each, {reserved} kept for vibedesk). Use --max-workers {max} or less, or raise the limit (`ulimit -n`)",
        per = FILES_PER_WORKER,
        reserved = FILES_RESERVED
    )]
    TooMany {
        asked: usize,
        limit: u64,
        max: usize,
    },
}

/// The most workers an open-file limit of `limit` serves (at least 1).
pub fn max_for_limit(limit: u64) -> usize {
    let spare = limit.saturating_sub(FILES_RESERVED) / FILES_PER_WORKER;
    usize::try_from(spare.max(1)).unwrap_or(usize::MAX)
}

/// Checks `asked` against the open-file limit `limit` (the soft
/// `RLIMIT_NOFILE`; `None` when it cannot be read or is unlimited).
pub fn check(asked: usize, limit: Option<u64>) -> Result<usize, WorkersError> {
    if asked == 0 {
        return Err(WorkersError::Zero);
    }
    match limit {
        Some(limit) if asked > max_for_limit(limit) => Err(WorkersError::TooMany {
            asked,
            limit,
            max: max_for_limit(limit),
        }),
        _ => Ok(asked),
    }
}

/// This process's soft open-file limit, when it has one.
pub fn open_file_limit() -> Option<u64> {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
    let (soft, _hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    (soft != RLIM_INFINITY).then_some(soft)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_more_than_the_limit_serves_are_refused() {
        assert_eq!(check(0, Some(1024)), Err(WorkersError::Zero));
        assert_eq!(check(0, None), Err(WorkersError::Zero));
        assert_eq!(max_for_limit(1024), 60);
        assert_eq!(check(60, Some(1024)), Ok(60));
        let e = check(10_000, Some(1024)).unwrap_err();
        assert_eq!(
            e,
            WorkersError::TooMany {
                asked: 10_000,
                limit: 1024,
                max: 60
            }
        );
        let text = e.to_string();
        assert!(text.contains("RLIMIT_NOFILE is 1024"), "{text}");
        assert!(text.contains("--max-workers 60"), "{text}");
        // A tiny limit still allows one; no limit allows any.
        assert_eq!(check(1, Some(16)), Ok(1));
        assert_eq!(check(1_000_000, None), Ok(1_000_000));
    }
}
