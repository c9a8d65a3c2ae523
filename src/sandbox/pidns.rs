//! A job in a PID namespace of its own, so that nothing it starts can
//! outlive it: not a grandchild that called `setsid`, not a double fork.
//!
//! The original kills the job's process group at its deadline and leaks
//! whatever left the group; a group kill cannot reach a process in another
//! session. A PID namespace can: when its first process (its "init") dies,
//! the kernel kills every process in it and waits for them before that
//! init's death is reported. So the job's first process is made pid 1 of a
//! fresh namespace; killing it (at the deadline, on cancel, or through the
//! parent-death signal when vibedesk dies) ends the whole job.
//!
//! `unshare(CLONE_NEWPID)` does not move the caller: it puts the caller's
//! *next child* into a new namespace, and it is per thread. Jobs are
//! therefore spawned from one long-lived spawner thread that makes a new
//! namespace, spawns, and steps back into its own namespace for children
//! (`setns`). Long-lived, because the parent-death signal fires when the
//! thread that forked exits, not the process. One thread, not a fork of a
//! supervisor inside the child: forking a large engine's address space
//! twice more cost about 8 ms per run (measured on a backtest).
//!
//! The job sees itself as pid 1 and namespace-local pids (`$$`, `$!`) while
//! `/proc` stays the host's. As pid 1 it ignores signals it has no handler
//! for when they come from inside the namespace, and orphans are reparented
//! to it until it ends. A new PID namespace needs `CAP_SYS_ADMIN`:
//! elsewhere the job runs as before, in its own process group only, and
//! [`super::Protections`] says `pidns=off`.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;
use std::sync::mpsc;

use nix::sched::CloneFlags;
use nix::unistd::Pid;

/// Whether this process may create PID namespaces: `CAP_SYS_ADMIN` in its
/// effective set and a namespace budget above zero. A cheap look at
/// `/proc`, checked in the parent so that a run knows beforehand what it
/// gets; a refusal at spawn time is still handled (see the runner).
pub fn pid_namespace_available() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    let cap_eff = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0);
    let budget = std::fs::read_to_string("/proc/sys/user/max_pid_namespaces")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    cap_eff & (1 << CAP_SYS_ADMIN) != 0 && budget > 0
}

type Spawned = io::Result<tokio::process::Child>;

struct Request {
    cmd: tokio::process::Command,
    runtime: tokio::runtime::Handle,
    reply: tokio::sync::oneshot::Sender<Spawned>,
}

static SPAWNER: Mutex<Option<mpsc::Sender<Request>>> = Mutex::new(None);

/// Spawns `cmd` as pid 1 of a new PID namespace. Must be called within a
/// tokio runtime (the child is registered with it).
pub(crate) async fn spawn_in_new_namespace(cmd: tokio::process::Command) -> Spawned {
    let (reply, answer) = tokio::sync::oneshot::channel();
    let req = Request {
        cmd,
        runtime: tokio::runtime::Handle::current(),
        reply,
    };
    spawner()?
        .send(req)
        .map_err(|_| io::Error::other("the namespace spawner thread is gone"))?;
    answer
        .await
        .map_err(|_| io::Error::other("the namespace spawner thread dropped the request"))?
}

/// The spawner thread's queue, started on first use.
fn spawner() -> io::Result<mpsc::Sender<Request>> {
    let mut guard = SPAWNER
        .lock()
        .map_err(|_| io::Error::other("the namespace spawner lock is poisoned"))?;
    if let Some(tx) = guard.as_ref() {
        return Ok(tx.clone());
    }
    // This thread's own namespace, to step back into after each spawn.
    let home: OwnedFd = std::fs::File::open("/proc/thread-self/ns/pid")?.into();
    let (tx, rx) = mpsc::channel::<Request>();
    std::thread::Builder::new()
        .name("vibedesk-pidns".into())
        .spawn(move || serve(rx, home))?;
    *guard = Some(tx.clone());
    Ok(tx)
}

/// Lives as long as the process: the jobs' parent-death signal is tied to
/// this thread.
fn serve(rx: mpsc::Receiver<Request>, home: OwnedFd) {
    for mut req in rx {
        let _ctx = req.runtime.enter();
        let spawned = nix::sched::unshare(CloneFlags::CLONE_NEWPID)
            .map_err(io::Error::from)
            .and_then(|()| {
                let child = req.cmd.spawn();
                // Later children of this thread go back to our namespace.
                nix::sched::setns(home.as_fd(), CloneFlags::CLONE_NEWPID)
                    .map_err(io::Error::from)
                    .and(child)
            });
        let _ = req.reply.send(spawned);
    }
}

/// In a forked child before exec: SIGKILL when the thread that forked it
/// exits (tokio's workers and the namespace spawner live as long as the
/// process, so in practice: when vibedesk dies), and no run at all when
/// the parent died between the fork and this call. As a namespace's init
/// the child sees its parent as pid 0 and cannot tell; the job record lets
/// the next start end it then (see [`super::jobs`]). Async-signal-safe:
/// two system calls. Used for sandboxed jobs and MCP servers alike.
#[cfg(target_os = "linux")]
pub(crate) fn die_with_parent(parent: Pid, pid_ns: bool) -> io::Result<()> {
    let errno = |e: nix::errno::Errno| io::Error::from_raw_os_error(e as i32);
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(errno)?;
    if !pid_ns && nix::unistd::getppid() != parent {
        return Err(io::Error::from_raw_os_error(nix::libc::ESRCH));
    }
    Ok(())
}
