//! Process identity on Linux: a pid with its start time names one process
//! even after the pid is reused. Run states and sandbox job records use it to
//! tell a live owner from a dead one, and never to act on a recycled pid.

/// This process's pid and its start time (in clock ticks since boot, from
/// `/proc/self/stat`), which together identify it even after pid reuse.
/// The start time is `None` where `/proc` is unavailable (not Linux).
pub fn current_process_identity() -> (u32, Option<u64>) {
    let start = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| parse_stat(&s))
        .map(|st| st.start_time);
    (std::process::id(), start)
}

/// Whether `pid` is a live process and, when `start` is given, the same
/// process that recorded it (pid reuse changes the start time). Without
/// `/proc` liveness cannot be shown, so the answer is false; a zombie has
/// already ended, so it is not alive either.
pub fn process_is_alive(pid: u32, start: Option<u64>) -> bool {
    if pid == 0 {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    match parse_stat(&text) {
        Some(st) => {
            !matches!(st.state, 'Z' | 'X' | 'x') && start.is_none_or(|s| s == st.start_time)
        }
        // The process exists but its stat is unreadable to us: we cannot prove
        // it is someone else, so do not declare the run dead.
        None => true,
    }
}

/// The fields of `/proc/<pid>/stat` that the engine reads.
pub struct ProcStat {
    pub state: char,
    /// Clock ticks since boot: with the pid, an identity that survives pid reuse.
    pub start_time: u64,
    /// The process group.
    pub pgrp: u32,
}

/// Parses `/proc/<pid>/stat`. The comm field (2) is in parentheses and may
/// itself contain spaces and `)`, so fields are counted after the LAST `)`:
/// there field 3 (state) is index 0, field 5 (pgrp) index 2 and field 22
/// (starttime) index 19.
pub fn parse_stat(stat: &str) -> Option<ProcStat> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    // Field 5 (pgrp) is index 2.
    let pgrp = fields.nth(1)?.parse().ok()?;
    let start_time = fields.nth(16)?.parse().ok()?;
    Some(ProcStat {
        state,
        start_time,
        pgrp,
    })
}

/// `/proc/<pid>/stat` of a live process, `None` when it is gone or unreadable.
pub fn stat_of(pid: u32) -> Option<ProcStat> {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| parse_stat(&s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_stat_handles_parens_and_spaces_in_comm() {
        let tail = "S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21";
        let stat = format!("1234 (weird ) name) (x) {tail}");
        let st = parse_stat(&stat).unwrap();
        assert_eq!(st.state, 'S');
        assert_eq!(st.start_time, 424242);
        assert_eq!(st.pgrp, 2);
        assert!(parse_stat("1234 (truncated").is_none());
        assert!(parse_stat("1234 (x) S 1 2").is_none());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn current_identity_is_alive_and_a_wrong_start_is_not() {
        let (pid, start) = current_process_identity();
        assert_eq!(pid, std::process::id());
        let start = start.expect("Linux has /proc/self/stat");
        assert!(process_is_alive(pid, Some(start)));
        assert!(process_is_alive(pid, None));
        assert!(!process_is_alive(pid, Some(start.wrapping_add(1))));
        assert!(!process_is_alive(0, None));
    }
}
