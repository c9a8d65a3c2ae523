//! Which protections hold, for `vibedesk doctor` and for each run's result.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::config::RunnerConfig;
use super::confine::kernel_abi;
use super::pidns::pid_namespace_available;
use super::user::{check_reachable, decide};

/// The protections of a sandboxed child. [`Protections::probe`] says what a
/// run would get on this machine; a [`super::RunResult`] says what one got.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Protections {
    /// Allow-listed environment, secrets refused (§6.1). Always on.
    pub env_allow_list: bool,
    /// Throwaway HOME and TMPDIR, removed afterwards (§6.2). Always on.
    pub throwaway_home: bool,
    /// Own session and process group, no controlling terminal. Always on.
    pub own_session: bool,
    /// The child dies with the engine (`PR_SET_PDEATHSIG`, Linux).
    pub pdeathsig: bool,
    /// The job runs in a PID namespace of its own: nothing it starts
    /// outlives it, however it detached (needs `CAP_SYS_ADMIN`).
    pub pid_namespace: bool,
    /// Resource limits applied before exec.
    pub rlimits: bool,
    /// Whether `RLIMIT_NPROC` binds (it never does for root).
    pub nproc_enforced: bool,
    /// The kernel's Landlock ABI; 0 when there is none.
    pub landlock_abi: u8,
    /// Writes confined to the writable roots by Landlock.
    pub landlock: bool,
    /// The unprivileged user the child runs as, if any.
    pub user: Option<String>,
    /// Why a protection is off, when one is.
    pub notes: Vec<String>,
}

impl Protections {
    /// What a run would get under `config`; `reach` is a directory the
    /// child would need to reach (the runs dir), checked for the drop.
    pub fn probe(config: &RunnerConfig, reach: Option<&Path>) -> Protections {
        let abi = kernel_abi();
        let decision = decide(&config.user);
        let mut notes: Vec<String> = decision.note.into_iter().collect();
        let mut user = decision.target;
        if let (Some(t), Some(dir)) = (&user, reach)
            && let Err(blocked) = check_reachable(t, &[PathBuf::from(dir)])
        {
            notes.push(format!(
                "{} cannot reach {}: runs there stay root, RLIMIT_NPROC not enforced (VIBEDESK_HOME set to a directory {} can traverse keeps the drop)",
                t.name,
                blocked.display(),
                t.name
            ));
            user = None;
        }
        let root = nix::unistd::geteuid().is_root();
        let landlock = config.landlock && abi > 0;
        let pid_namespace = config.pid_namespace && pid_namespace_available();
        if !config.pid_namespace {
            notes.push("PID namespace disabled: only the job's process group is killed".into());
        } else if !pid_namespace {
            notes.push(
                "no PID namespace (needs CAP_SYS_ADMIN): a job's processes that leave its process group can outlive it until the next start"
                    .into(),
            );
        }
        if !config.landlock {
            notes.push("Landlock disabled".into());
        } else if abi == 0 {
            notes.push("the kernel offers no Landlock: writes are not confined".into());
        }
        Protections {
            env_allow_list: true,
            throwaway_home: true,
            own_session: true,
            pdeathsig: cfg!(target_os = "linux"),
            pid_namespace,
            rlimits: true,
            nproc_enforced: user.is_some() || !root,
            landlock_abi: abi,
            landlock,
            user: user.map(|t| t.name),
            notes,
        }
    }

    /// `landlock=on (ABI 7) rlimits=on user=nobody pdeathsig=on ...`.
    pub fn flags(&self) -> String {
        let on = |b: bool| if b { "on" } else { "off" };
        let landlock = if self.landlock {
            format!("on (ABI {})", self.landlock_abi)
        } else {
            "off".into()
        };
        let rlimits = match (self.rlimits, self.nproc_enforced) {
            (true, true) => "on",
            (true, false) => "on (nproc not enforced)",
            (false, _) => "off",
        };
        let user = match &self.user {
            Some(u) => u.clone(),
            None if nix::unistd::geteuid().is_root() => "root".into(),
            None => "self".into(),
        };
        format!(
            "landlock={landlock} rlimits={rlimits} user={user} pdeathsig={} pidns={} session=own env=allow-list",
            on(self.pdeathsig),
            on(self.pid_namespace)
        )
    }

    /// [`Protections::flags`] followed by the notes, `; `-separated.
    pub fn summary(&self) -> String {
        let mut s = self.flags();
        for n in &self.notes {
            s.push_str("; ");
            s.push_str(n);
        }
        s
    }
}
