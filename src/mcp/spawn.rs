//! Starting a stdio server so that nothing it starts outlives vibedesk
//! (docs §13.2), the way sandboxed jobs are started (docs §6.2), with the
//! sandbox's own parts:
//!
//! - a PID namespace of its own where vibedesk may make one
//!   ([`crate::sandbox::pidns`]): the server is its init, so when the server
//!   is killed (at the session's end, or by the parent-death signal when
//!   vibedesk dies, SIGKILL included) the kernel kills everything in it,
//!   grandchildren that called `setsid` or double-forked too;
//! - its own process group and the parent-death signal, which is all there
//!   is without a namespace: then a descendant that left the group can
//!   survive a crash (`vibedesk doctor` says `pidns=off`);
//! - a job record ([`crate::sandbox::jobs`]) while it runs, so that the
//!   next start kills a server a crash left running.
//!
//! Unlike a sandboxed job it keeps the user's working directory and HOME,
//! and gets no resource limits or Landlock: an MCP server is a program the
//! user installed and named (docs §13.1).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use crate::sandbox::jobs::{JobFile, JobRecord};
use crate::sandbox::pidns::{pid_namespace_available, spawn_in_new_namespace};

/// A started server: the child, whether it got a PID namespace, and its
/// job record (removed when dropped, which the exit watcher does once the
/// child is reaped).
pub(crate) struct Spawned {
    pub child: tokio::process::Child,
    pub pid_namespace: bool,
    pub record: Option<JobFile>,
}

/// Spawns `command args…` with `env` only, stdin and stdout as the MCP
/// pipes and stderr piped for its log; in a new PID namespace when one can
/// be made (and without one, with a note in `vibedesk.log`, when that fails).
pub(crate) async fn spawn_server(
    server: &str,
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    jobs_dir: Option<&Path>,
) -> std::io::Result<Spawned> {
    let mut pid_namespace = pid_namespace_available();
    let child = loop {
        let cmd = build(command, args, env, pid_namespace);
        let spawned = if pid_namespace {
            spawn_in_new_namespace(cmd).await
        } else {
            let mut cmd = cmd;
            cmd.spawn()
        };
        match spawned {
            Ok(child) => break child,
            // No namespace rather than no server, as for sandboxed jobs; a
            // missing program fails the same either way.
            Err(e) if pid_namespace && e.kind() != std::io::ErrorKind::NotFound => {
                tracing::warn!(server, error = %e, "no PID namespace for the MCP server; only its process group is killed at the end");
                pid_namespace = false;
            }
            Err(e) => return Err(e),
        }
    };
    let record = match (jobs_dir, child.id()) {
        (Some(dir), Some(pid)) => {
            let cwd = std::env::current_dir().unwrap_or_default();
            let program = format!("MCP server {server} ({command})");
            Some(JobFile::write(
                dir,
                &JobRecord::for_group(pid, program, cwd),
            ))
        }
        _ => None,
    };
    Ok(Spawned {
        child,
        pid_namespace,
        record,
    })
}

fn build(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    pid_namespace: bool,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so the whole tree can be killed at the end
        // and a Ctrl-C at the terminal reaches only vibedesk.
        .process_group(0)
        .kill_on_drop(true);
    #[cfg(target_os = "linux")]
    {
        let parent = nix::unistd::getpid();
        // SAFETY: the hook runs in the forked child before exec and makes
        // two system calls (prctl, getppid) on values copied in: it does
        // not allocate, lock or touch shared state (async-signal-safe).
        unsafe {
            cmd.pre_exec(move || crate::sandbox::pidns::die_with_parent(parent, pid_namespace));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = pid_namespace;
    cmd
}
