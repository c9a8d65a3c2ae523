//! A job in a PID namespace of its own, so that nothing it starts can
//! outlive it: not a grandchild that called `setsid`, not a double fork.
//!
//! The original kills the job's process group at its deadline and leaks
//! whatever left the group; a group kill cannot reach a process in another
//! session. A PID namespace can: when its first process (its "init") dies,
//! the kernel kills every process in it and waits for them before that
//! init's death is reported. So the runner's child is split in three, all
//! inside the one `fork` that `std::process::Command` makes:
//!
//! ```text
//! vibedesk ─ C (supervisor, host namespace, root) ─ G (init of the new namespace) ─ H (the job: exec)
//! ```
//!
//! - **C** is the process the runner knows (its pid, its process group). It
//!   dies with vibedesk (`PR_SET_PDEATHSIG`), closes every descriptor (it
//!   must hold no pipe of the job's), waits for G and exits as H did: the
//!   same code, or the same signal.
//! - **G** is pid 1 of the namespace: it dies with C, reaps orphans, and
//!   exits when H does, which ends everything else in the namespace.
//! - **H** continues the runner's set-up (limits, privilege drop, Landlock)
//!   and execs the program. It is a session leader of its own, as a job was
//!   before.
//!
//! The runner kills C and G (their group) at a deadline, on cancel or when
//! abandoned; G's death then ends the whole namespace. If vibedesk itself is
//! killed, C gets SIGKILL from the kernel, and G from C's death.
//!
//! Processes of the job see namespace-local pids (`$$`, `$!`), while `/proc`
//! stays the host's. A new PID namespace needs `CAP_SYS_ADMIN`: elsewhere the
//! job runs as before, in its own process group only, and
//! [`super::Protections`] says `pidns=off`.
//!
//! Everything here runs between `fork` and `exec` of a multi-threaded
//! process: plain system calls only, no allocation, no locks.

use std::io;

use nix::libc;

/// Whether this process may create PID namespaces: `CAP_SYS_ADMIN` in its
/// effective set and a namespace budget above zero. A cheap look at
/// `/proc`, checked in the parent so that a run knows beforehand what it
/// gets; a refusal in the child is still handled (see the runner).
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

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// In the runner's forked child (C), after `setsid` and the parent-death
/// signal: returns `Ok(())` in H, the job's process, which goes on to exec.
/// C and G never return from here. An error is returned only before any
/// second process exists (or in G when it cannot fork H), so `std` reports
/// it to the parent as a failed spawn.
///
/// # Safety
/// Call only in a child between `fork` and `exec`.
pub(crate) unsafe fn enter_pid_namespace() -> io::Result<()> {
    // SAFETY (whole body): plain system calls on local data in a
    // single-threaded child.
    unsafe {
        if libc::unshare(libc::CLONE_NEWPID) != 0 {
            return Err(last_error());
        }
        let mut fds = [0 as libc::c_int; 2];
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(last_error());
        }
        let (status_r, status_w) = (fds[0], fds[1]);
        match libc::fork() {
            -1 => Err(last_error()),
            0 => {
                libc::close(status_r);
                namespace_init(status_w)
            }
            g => supervise(g, status_r),
        }
    }
}

/// G: pid 1 of the new namespace. Returns only in H (or with an error from
/// G itself, which `std` reports through the spawn pipe G still holds).
unsafe fn namespace_init(status_w: libc::c_int) -> io::Result<()> {
    // SAFETY: see `enter_pid_namespace`.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        // C may have died before the line above: then the status pipe has
        // no reader left, and poll says so (POLLERR on a write end).
        let mut pfd = libc::pollfd {
            fd: status_w,
            events: 0,
            revents: 0,
        };
        if libc::poll(&mut pfd, 1, 0) > 0 && pfd.revents & libc::POLLERR != 0 {
            libc::_exit(1);
        }
        let h = libc::fork();
        if h == -1 {
            return Err(last_error());
        }
        if h == 0 {
            libc::close(status_w);
            // Its own session, as a job was before; the namespace, not the
            // group, is what ends it.
            if libc::setsid() == -1 {
                return Err(last_error());
            }
            return Ok(());
        }
        // Hold nothing of the job's: its pipes must close when it ends.
        close_all_except(status_w);
        loop {
            let mut st: libc::c_int = 0;
            let pid = libc::waitpid(-1, &mut st, 0);
            if pid == h {
                let bytes = st.to_ne_bytes();
                libc::write(status_w, bytes.as_ptr().cast(), bytes.len());
                // Our exit ends every other process of the namespace.
                libc::_exit(0);
            }
            if pid == -1 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(1);
            }
        }
    }
}

/// C: waits for G and ends as H did. Never returns.
unsafe fn supervise(g: libc::pid_t, status_r: libc::c_int) -> io::Result<()> {
    // SAFETY: see `enter_pid_namespace`.
    unsafe {
        close_all_except(status_r);
        // A grace SIGTERM for the job is not for the supervisor; SIGKILL
        // (the runner's, or the parent-death signal) still ends it.
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
        let mut g_status: libc::c_int = 0;
        loop {
            if libc::waitpid(g, &mut g_status, 0) == g {
                break;
            }
            if *libc::__errno_location() != libc::EINTR {
                libc::_exit(125);
            }
        }
        let mut buf = [0u8; 4];
        let n = libc::read(status_r, buf.as_mut_ptr().cast(), buf.len());
        // Without H's status (G was killed), G's own death is the answer.
        let st = if n == 4 {
            libc::c_int::from_ne_bytes(buf)
        } else {
            g_status
        };
        mirror(st)
    }
}

/// Ends this process with H's wait status: its exit code, or its signal.
unsafe fn mirror(st: libc::c_int) -> ! {
    // SAFETY: see `enter_pid_namespace`.
    unsafe {
        if libc::WIFEXITED(st) {
            libc::_exit(libc::WEXITSTATUS(st));
        }
        if libc::WIFSIGNALED(st) {
            let sig = libc::WTERMSIG(st);
            // A core-dumping signal must not make the supervisor (root, in
            // the run dir) write a core of its own.
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
        libc::_exit(125)
    }
}

/// Closes every descriptor but `keep` (stdio included).
unsafe fn close_all_except(keep: libc::c_int) {
    // SAFETY: see `enter_pid_namespace`.
    unsafe {
        let keep = keep as libc::c_uint;
        let ok = (keep == 0 || libc::syscall(libc::SYS_close_range, 0u32, keep - 1, 0u32) == 0)
            && libc::syscall(libc::SYS_close_range, keep + 1, u32::MAX, 0u32) == 0;
        if !ok {
            // Kernels before 5.9: one by one, up to the descriptor limit.
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            let top = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
                lim.rlim_cur.min(1 << 16) as libc::c_int
            } else {
                1024
            };
            for fd in 0..top {
                if fd != keep as libc::c_int {
                    libc::close(fd);
                }
            }
        }
    }
}
