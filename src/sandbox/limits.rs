//! Resource limits applied in the child before `exec` (docs §6.2).
//!
//! The original sets only `RLIMIT_AS` and `RLIMIT_NOFILE`; we add processes,
//! CPU time, file size and core dumps, and lower the *hard* limit as well as
//! the soft one, so the child cannot raise them back (§6.2 improvement).
//! Limits are only ever lowered: an existing lower hard limit wins.

use std::collections::BTreeMap;

use nix::sys::resource::{Resource, getrlimit, rlim_t, setrlimit};
use serde::Serialize;

/// `VIBEDESK_SANDBOX_RLIMIT_AS_MB` overrides the address-space limit (RS-7).
pub const AS_ENV: &str = "VIBEDESK_SANDBOX_RLIMIT_AS_MB";

/// What a sandboxed child may use. `0` leaves that resource alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// `RLIMIT_AS`, MiB (docs §6.2: 4 096). Stops memory bombs: allocation fails.
    pub address_space_mb: u64,
    /// `RLIMIT_NOFILE` (docs §6.2: 512).
    pub open_files: u64,
    /// `RLIMIT_NPROC`: processes of the child's real user, all of them. The
    /// kernel ignores it for root, so it only holds after a privilege drop
    /// (see [`super::user`]); without one it is raised by the number of
    /// processes the user already has, or it would stop the child at once.
    pub processes: u64,
    /// `RLIMIT_CPU`, seconds; the hard limit is 5 s above (SIGXCPU, then SIGKILL).
    pub cpu_seconds: u64,
    /// `RLIMIT_FSIZE`, MiB: the largest file the child may write.
    pub file_size_mb: u64,
    /// Whether the child may dump core (`RLIMIT_CORE`); a dumped bomb fills disks.
    pub core_dumps: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            address_space_mb: 4096,
            open_files: 512,
            processes: 256,
            cpu_seconds: 900,
            file_size_mb: 1024,
            core_dumps: false,
        }
    }
}

impl Limits {
    /// Applies [`AS_ENV`] from `env`: a positive integer replaces the default;
    /// anything else keeps it, with a warning naming the variable (RS-7).
    pub fn with_env_overrides(mut self, env: &BTreeMap<String, String>) -> Self {
        if let Some(raw) = env.get(AS_ENV) {
            match raw.trim().parse::<i64>() {
                Ok(mb) if mb > 0 => self.address_space_mb = mb as u64,
                _ => tracing::warn!(
                    variable = AS_ENV,
                    value = %raw,
                    "not a positive number of MiB; keeping {} MiB",
                    self.address_space_mb
                ),
            }
        }
        self
    }

    /// The settings for the child, computed in the parent. `extra_processes`
    /// is added to the process limit (see [`Limits::processes`]).
    pub(crate) fn plan(&self, extra_processes: u64) -> RlimitPlan {
        const MIB: u64 = 1024 * 1024;
        let mut items = [None; 6];
        let mut put = |i: usize, r: Resource, soft: u64, hard: u64| {
            items[i] = Some(RlimitItem {
                resource: r,
                soft: soft as rlim_t,
                hard: hard as rlim_t,
            });
        };
        if self.address_space_mb > 0 {
            let b = self.address_space_mb.saturating_mul(MIB);
            put(0, Resource::RLIMIT_AS, b, b);
        }
        if self.open_files > 0 {
            put(1, Resource::RLIMIT_NOFILE, self.open_files, self.open_files);
        }
        if self.processes > 0 {
            let n = self.processes.saturating_add(extra_processes);
            put(2, Resource::RLIMIT_NPROC, n, n);
        }
        if self.cpu_seconds > 0 {
            put(
                3,
                Resource::RLIMIT_CPU,
                self.cpu_seconds,
                self.cpu_seconds.saturating_add(5),
            );
        }
        if self.file_size_mb > 0 {
            let b = self.file_size_mb.saturating_mul(MIB);
            put(4, Resource::RLIMIT_FSIZE, b, b);
        }
        if !self.core_dumps {
            put(5, Resource::RLIMIT_CORE, 0, 0);
        }
        RlimitPlan { items }
    }

    /// `as=4096MiB nofile=512 ...`, for logs and `doctor`.
    pub fn summary(&self) -> String {
        let v = |n: u64, unit: &str| {
            if n == 0 {
                "unlimited".to_string()
            } else {
                format!("{n}{unit}")
            }
        };
        format!(
            "as={} nofile={} nproc={} cpu={} fsize={} core={}",
            v(self.address_space_mb, "MiB"),
            v(self.open_files, ""),
            v(self.processes, ""),
            v(self.cpu_seconds, "s"),
            v(self.file_size_mb, "MiB"),
            if self.core_dumps { "on" } else { "off" }
        )
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct RlimitItem {
    resource: Resource,
    soft: rlim_t,
    hard: rlim_t,
}

/// Fixed-size, `Copy`: the child applies it without allocating.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RlimitPlan {
    items: [Option<RlimitItem>; 6],
}

impl RlimitPlan {
    /// Runs in the forked child, before `exec`: only `getrlimit`/`setrlimit`
    /// system calls, no allocation (async-signal-safe). Best effort, as in
    /// the original: a limit that cannot be set is left as it was.
    pub(crate) fn apply_in_child(&self) {
        for item in self.items.iter().flatten() {
            let (_, cur_hard) = match getrlimit(item.resource) {
                Ok(v) => v,
                Err(_) => continue,
            };
            // Never raise: an existing lower hard limit wins (§6.2).
            let hard = item.hard.min(cur_hard);
            let soft = item.soft.min(hard);
            let _ = setrlimit(item.resource, soft, hard);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_spec() {
        let l = Limits::default();
        assert_eq!(l.address_space_mb, 4096);
        assert_eq!(l.open_files, 512);
        assert!(!l.core_dumps);
    }

    #[test]
    fn address_space_override_rs7() {
        let env = |v: &str| BTreeMap::from([(AS_ENV.to_string(), v.to_string())]);
        assert_eq!(
            Limits::default()
                .with_env_overrides(&env("256"))
                .address_space_mb,
            256
        );
        for bad in ["abc", "0", "-5", ""] {
            assert_eq!(
                Limits::default()
                    .with_env_overrides(&env(bad))
                    .address_space_mb,
                4096,
                "{bad}"
            );
        }
    }

    #[test]
    fn plan_skips_unlimited_and_adds_the_process_allowance() {
        let l = Limits {
            address_space_mb: 0,
            processes: 10,
            ..Limits::default()
        };
        let p = l.plan(5);
        assert!(p.items[0].is_none());
        let nproc = p.items[2].unwrap();
        assert_eq!((nproc.soft, nproc.hard), (15, 15));
        let cpu = p.items[3].unwrap();
        assert_eq!(cpu.hard, cpu.soft + 5);
        assert!(l.summary().starts_with("as=unlimited nofile=512 nproc=10"));
    }
}
