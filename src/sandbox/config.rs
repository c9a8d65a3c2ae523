//! How the runner treats every child: deadlines, limits, output caps, the
//! privilege drop, Landlock, the PID namespace and job records. Read by the
//! runner and by [`super::Protections::probe`].

use std::path::PathBuf;
use std::time::Duration;

use super::env::parent_env;
use super::limits::Limits;
use super::user::UserPolicy;

/// `0` runs jobs without a PID namespace of their own.
pub const PID_NAMESPACE_ENV: &str = "VIBEDESK_SANDBOX_PIDNS";

/// How the runner treats every child.
#[derive(Clone, Debug)]
pub struct RunnerConfig {
    /// Deadline when the spec names none (docs §2.6: 300 s for the runner).
    pub timeout: Duration,
    pub limits: Limits,
    /// Bytes kept per stream, in memory and on disk (head + tail).
    pub output_cap: usize,
    /// After the child ends or is killed, how long its pipes may take to
    /// close (docs §2.6: at most 5 s). A process that escaped the group and
    /// holds them open is not waited for beyond this.
    pub drain_timeout: Duration,
    /// Between SIGTERM and SIGKILL at the deadline; zero kills at once (the
    /// `bash` rule of §2.6). Python output is unbuffered, so little is lost.
    pub kill_grace: Duration,
    pub user: UserPolicy,
    /// Confine writes with Landlock where the kernel has it.
    pub landlock: bool,
    /// Where the per-run HOME and TMPDIR go; `None` is the system temp dir.
    pub scratch_root: Option<PathBuf>,
    /// Run each job in a PID namespace of its own where the engine may make
    /// one, so that nothing it starts outlives it ([`super::pidns`]).
    pub pid_namespace: bool,
    /// Where running jobs are recorded for the next start to end after a
    /// crash ([`super::jobs`]); `None` records nothing.
    pub jobs_dir: Option<PathBuf>,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            timeout: Duration::from_secs(300),
            limits: Limits::default(),
            output_cap: 4 * 1024 * 1024,
            drain_timeout: Duration::from_secs(5),
            kill_grace: Duration::ZERO,
            user: UserPolicy::Auto,
            landlock: true,
            scratch_root: None,
            pid_namespace: true,
            jobs_dir: None,
        }
    }
}

impl RunnerConfig {
    /// The defaults with the environment's overrides (RS-7).
    pub fn from_env() -> Self {
        let env = parent_env();
        let mut c = RunnerConfig::default();
        c.limits = c.limits.with_env_overrides(&env);
        // An escape hatch for a program that cannot live with
        // namespace-local pids; `doctor` then says `pidns=off`.
        if env.get(PID_NAMESPACE_ENV).is_some_and(|v| v.trim() == "0") {
            c.pid_namespace = false;
        }
        c
    }

    /// Records running jobs under `dir` (see [`RunnerConfig::jobs_dir`]).
    pub fn with_jobs_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.jobs_dir = dir;
        self
    }
}
