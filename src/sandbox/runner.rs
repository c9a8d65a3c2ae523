//! The runner: one sandboxed child, from spawn to artifacts (docs §6).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::SandboxError;
use super::artifacts::{ArtifactSpec, collect};
pub use super::config::RunnerConfig;
use super::confine::{build_ruleset, enforce_in_child, kernel_abi};
use super::env::{EnvPlan, build_env, parent_env};
use super::jobs::{JobFile, JobRecord};
use super::limits::RlimitPlan;
use super::output::{CappedOutput, Captured, capture};
use super::pidns::{pid_namespace_available, spawn_in_new_namespace};
use super::protections::Protections;
use super::scratch::Scratch;
use super::user::{DropTarget, check_reachable, count_processes_of, decide, hand_over};

/// One child to run.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// The child's cwd, writable; `logs/` goes here.
    pub run_dir: PathBuf,
    /// More writable roots (the workspace).
    pub writable: Vec<PathBuf>,
    /// Extra variables, set last (forbidden names are still refused).
    pub env: Vec<(String, String)>,
    /// Parent variables to pass beyond the allow-list (see [`super::env`]).
    pub pass_through: Vec<String>,
    /// The parent environment to filter; `None` reads the process's own.
    /// Tests pass a map instead of mutating the process environment.
    pub parent_env: Option<BTreeMap<String, String>>,
    /// Logs go to `logs/<log_name>_stdout.txt` and `..._stderr.txt`.
    pub log_name: String,
    /// Overrides [`RunnerConfig::timeout`].
    pub timeout: Option<Duration>,
    /// Artifacts to look for afterwards (§6.3); empty for none.
    pub artifacts: &'static [ArtifactSpec],
    /// Programs the child starts beyond `program` (the interpreter of a
    /// Python strategy): like `program`, the sandbox user must be able to
    /// reach them, or the child runs without the privilege drop.
    pub executables: Vec<PathBuf>,
    /// Where progress lines go (`running`, `killing`, `artifacts`): the
    /// calling tool's progress stream. The sandbox knows no tool code.
    pub progress: Option<Progress>,
}

/// `(stage, count, message)`.
pub type ProgressFn = dyn Fn(&str, Option<f64>, &str) + Send + Sync;

/// A progress sink.
#[derive(Clone)]
pub struct Progress(pub std::sync::Arc<ProgressFn>);

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress(..)")
    }
}

impl RunSpec {
    pub fn new(program: impl Into<OsString>, run_dir: impl Into<PathBuf>) -> Self {
        RunSpec {
            program: program.into(),
            args: Vec::new(),
            run_dir: run_dir.into(),
            writable: Vec::new(),
            env: Vec::new(),
            pass_through: Vec::new(),
            parent_env: None,
            log_name: "runner".into(),
            timeout: None,
            artifacts: &[],
            executables: Vec::new(),
            progress: None,
        }
    }

    pub fn progress(mut self, sink: Progress) -> Self {
        self.progress = Some(sink);
        self
    }

    /// A progress line for [`RunSpec::progress`], if any.
    fn report(&self, stage: &str, count: Option<f64>, message: &str) {
        if let Some(p) = &self.progress {
            (p.0)(stage, count, message);
        }
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn writable(mut self, dir: impl Into<PathBuf>) -> Self {
        self.writable.push(dir.into());
        self
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn parent_env(mut self, env: BTreeMap<String, String>) -> Self {
        self.parent_env = Some(env);
        self
    }

    pub fn log_name(mut self, name: impl Into<String>) -> Self {
        self.log_name = name.into();
        self
    }

    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }

    pub fn artifacts(mut self, specs: &'static [ArtifactSpec]) -> Self {
        self.artifacts = specs;
        self
    }

    pub fn executable(mut self, path: impl Into<PathBuf>) -> Self {
        self.executables.push(path.into());
        self
    }

    fn program_name(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }

    /// `program` when it is a path (a bare name is looked up on the
    /// child's PATH, which is not known here) and [`Self::executables`].
    fn programs(&self) -> Vec<PathBuf> {
        let program = Path::new(&self.program);
        let named = program.components().count() > 1;
        named
            .then(|| program.to_path_buf())
            .into_iter()
            .chain(self.executables.iter().cloned())
            .collect()
    }
}

/// What happened (docs §6.3, extended). Timeouts and cancellation are
/// results, not errors: the partial output is here and in `logs/` (§12.14).
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    /// Exited with 0, in time, not cancelled.
    pub success: bool,
    /// `None` when a signal ended it.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Head and tail within the cap; see `*_dropped`.
    pub stdout: String,
    pub stderr: String,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub stdout_dropped: u64,
    pub stderr_dropped: u64,
    /// Artifact name → absolute path, for the files that exist (§6.3).
    pub artifacts: BTreeMap<String, PathBuf>,
    pub missing_required: Vec<String>,
    /// The deadline passed and the whole group was killed.
    pub timed_out: bool,
    /// The cancel token fired and the whole group was killed.
    pub cancelled: bool,
    /// A pipe was still open when the drain window closed.
    pub output_cut_off: bool,
    pub elapsed_ms: u64,
    pub pid: u32,
    pub stdout_log: PathBuf,
    pub stderr_log: PathBuf,
    /// What actually held for this child.
    pub protections: Protections,
}

/// Runs sandboxed children. Cheap to clone; holds only configuration.
#[derive(Clone, Debug, Default)]
pub struct Runner {
    config: RunnerConfig,
}

/// The blocking preparation's outcome.
struct Prepared {
    run_dir: PathBuf,
    roots: Vec<PathBuf>,
    target: Option<DropTarget>,
    notes: Vec<String>,
    scratch: Scratch,
    stdout_log: PathBuf,
    stderr_log: PathBuf,
    logs: (std::fs::File, std::fs::File),
    extra_processes: u64,
}

enum End {
    Exited,
    TimedOut,
    Cancelled,
}

/// Kills the child's whole process group if the run is abandoned.
struct GroupGuard(Option<Pid>);

impl GroupGuard {
    fn signal(&self, sig: Signal) {
        if let Some(pg) = self.0 {
            // ESRCH (nobody left) is the normal case after a clean exit.
            let _ = killpg(pg, sig);
        }
    }

    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.signal(Signal::SIGKILL);
    }
}

fn io_err<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> SandboxError + 'a {
    move |source| SandboxError::Io(crate::fsio::IoError::new(action, path, source))
}

/// A log name safe as a file name.
fn safe_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    if s.is_empty() { "runner".into() } else { s }
}

impl Runner {
    pub fn new(config: RunnerConfig) -> Self {
        Runner { config }
    }

    pub fn config(&self) -> &RunnerConfig {
        &self.config
    }

    /// What a child would get on this machine (for `doctor`).
    pub fn probe(&self, reach: Option<&Path>) -> Protections {
        Protections::probe(&self.config, reach)
    }

    /// Runs `spec` to completion, its deadline, or `cancel`. Errors only when
    /// the child cannot be set up or started.
    pub async fn run(
        &self,
        spec: RunSpec,
        cancel: &CancellationToken,
    ) -> Result<RunResult, SandboxError> {
        let started = Instant::now();
        let timeout = spec.timeout.unwrap_or(self.config.timeout);
        let mut prep = {
            let config = self.config.clone();
            let spec = spec.clone();
            tokio::task::spawn_blocking(move || prepare(&config, &spec))
                .await
                .map_err(|e| SandboxError::Setup(format!("preparation task failed: {e}")))??
        };
        let (mut child, pid_ns, landlock) = self.start(&spec, &mut prep).await?;
        let pid = child.id().unwrap_or(0);
        // The child called setsid(): its pid is its process group. With a
        // namespace it is also the namespace's init, whose death ends
        // everything in the namespace.
        let mut group = GroupGuard((pid > 0).then(|| Pid::from_raw(pid as i32)));
        let _job = match (&self.config.jobs_dir, pid > 0) {
            (Some(dir), true) => Some(JobFile::write(
                dir,
                &JobRecord::for_group(pid, spec.program_name(), prep.run_dir.clone()),
            )),
            _ => None,
        };
        spec.report(
            "running",
            None,
            &format!("sandboxed pid {pid}: {}", spec.program_name()),
        );

        let stop = CancellationToken::new();
        let cap = self.config.output_cap;
        let (out_log, err_log) = prep.logs;
        let out_task = child.stdout.take().map(|r| {
            let log = tokio::fs::File::from_std(out_log);
            tokio::spawn(capture(r, Some(log), cap, stop.clone()))
        });
        let err_task = child.stderr.take().map(|r| {
            let log = tokio::fs::File::from_std(err_log);
            tokio::spawn(capture(r, Some(log), cap, stop.clone()))
        });

        let (status, end) = self
            .wait_for_end(&mut child, &mut group, &spec, timeout, cancel)
            .await?;
        group.disarm();
        let timed_out = matches!(end, End::TimedOut);
        let cancelled = matches!(end, End::Cancelled);
        let succeeded = status.success() && !timed_out && !cancelled;
        let (out, err) = self.drain(out_task, err_task, stop, succeeded).await;

        let artifact_specs = spec.artifacts;
        let dir = prep.run_dir.clone();
        let mut scratch = prep.scratch;
        let collected = tokio::task::spawn_blocking(move || {
            scratch.remove();
            collect(&dir, artifact_specs)
        })
        .await
        .unwrap_or_default();
        if !collected.artifacts.is_empty() {
            spec.report(
                "artifacts",
                Some(collected.artifacts.len() as f64),
                "collected run artifacts",
            );
        }

        use std::os::unix::process::ExitStatusExt;
        let exit_code = status.code();
        let root = nix::unistd::geteuid().is_root();
        let protections = Protections {
            env_allow_list: true,
            throwaway_home: true,
            own_session: true,
            pdeathsig: cfg!(target_os = "linux"),
            pid_namespace: pid_ns,
            rlimits: true,
            nproc_enforced: prep.target.is_some() || !root,
            landlock_abi: kernel_abi(),
            landlock,
            user: prep.target.map(|t| t.name),
            notes: prep.notes,
        };
        Ok(RunResult {
            success: exit_code == Some(0) && !timed_out && !cancelled,
            exit_code,
            signal: status.signal(),
            stdout: out.out.text(),
            stderr: err.out.text(),
            stdout_bytes: out.out.total(),
            stderr_bytes: err.out.total(),
            stdout_dropped: out.out.dropped(),
            stderr_dropped: err.out.dropped(),
            artifacts: collected.artifacts,
            missing_required: collected.missing_required,
            timed_out,
            cancelled,
            output_cut_off: out.cut_off || err.cut_off,
            elapsed_ms: started.elapsed().as_millis() as u64,
            pid,
            stdout_log: prep.stdout_log,
            stderr_log: prep.stderr_log,
            protections,
        })
    }

    /// Spawns the child with every protection that holds, giving up the
    /// privilege drop and then the namespace (each with a note) rather than
    /// the run. Returns the child, whether it got a PID namespace, and
    /// whether Landlock confines it.
    async fn start(
        &self,
        spec: &RunSpec,
        prep: &mut Prepared,
    ) -> Result<(tokio::process::Child, bool, bool), SandboxError> {
        let parent = match &spec.parent_env {
            Some(m) => m.clone(),
            None => parent_env(),
        };
        let mut writable = prep.roots.clone();
        writable.push(prep.scratch.home().to_path_buf());
        writable.push(prep.scratch.tmp().to_path_buf());
        let landlock = self.config.landlock && kernel_abi() > 0;
        let mut pid_ns = self.config.pid_namespace && pid_namespace_available();
        loop {
            let target = prep.target.as_ref();
            let env = build_env(
                &parent,
                &EnvPlan {
                    home: prep.scratch.home(),
                    tmp: prep.scratch.tmp(),
                    cwd: &prep.run_dir,
                    user: target.map(|t| t.name.as_str()),
                    pass_through: &spec.pass_through,
                    extra: &spec.env,
                },
            );
            let extra = if target.is_none() {
                prep.extra_processes
            } else {
                0
            };
            let attempt = match build_command(
                spec,
                &prep.run_dir,
                &env,
                target,
                self.config.limits.plan(extra),
                landlock.then_some(&writable[..]),
                pid_ns,
            ) {
                Ok(cmd) if pid_ns => spawn_in_new_namespace(cmd).await,
                Ok(mut cmd) => cmd.spawn(),
                Err(e) => Err(e),
            };
            match attempt {
                Ok(c) => return Ok((c, pid_ns, landlock)),
                // Spec §6.2 / RS-5: a failed drop is retried without it.
                Err(e) if target.is_some() && e.kind() == std::io::ErrorKind::PermissionDenied => {
                    let name = prep.target.take().map(|t| t.name).unwrap_or_default();
                    tracing::warn!(user = %name, error = %e, "sandbox privilege drop failed; running without it");
                    prep.notes.push(format!(
                        "dropping to {name} failed ({e}): ran without the drop"
                    ));
                }
                // Likewise the namespace: no namespace rather than no run.
                Err(e) if pid_ns => {
                    tracing::warn!(error = %e, "sandbox PID namespace failed; running without it");
                    prep.notes.push(format!(
                        "no PID namespace ({e}): only the job's process group is killed"
                    ));
                    pid_ns = false;
                }
                Err(source) => {
                    return Err(SandboxError::Spawn {
                        program: spec.program_name(),
                        source,
                    });
                }
            }
        }
    }

    /// Waits for the child, its deadline or `cancel`; at the last two the
    /// whole job is killed (after the grace, if any) and reaped.
    async fn wait_for_end(
        &self,
        child: &mut tokio::process::Child,
        group: &mut GroupGuard,
        spec: &RunSpec,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<(ExitStatus, End), SandboxError> {
        let reaped = |r: std::io::Result<ExitStatus>| {
            r.map_err(|source| SandboxError::Spawn {
                program: spec.program_name(),
                source,
            })
        };
        let end = tokio::select! {
            biased;
            st = child.wait() => return {
                // Whatever the leader left behind in its group goes with it:
                // nothing outlives a run (background work has its own tool).
                group.signal(Signal::SIGKILL);
                Ok((reaped(st)?, End::Exited))
            },
            _ = tokio::time::sleep(timeout) => End::TimedOut,
            _ = cancel.cancelled() => End::Cancelled,
        };
        let why = if matches!(end, End::TimedOut) {
            format!(
                "deadline of {:.1}s passed: killing the process group",
                timeout.as_secs_f64()
            )
        } else {
            "cancelled: killing the process group".to_string()
        };
        spec.report("killing", None, &why);
        if !self.config.kill_grace.is_zero() {
            // With a namespace, its init (the job's first process) ignores
            // SIGTERM unless it handles it; the rest of its group gets it,
            // and SIGKILL follows the grace anyway.
            group.signal(Signal::SIGTERM);
            let _ = tokio::time::timeout(self.config.kill_grace, child.wait()).await;
        }
        group.signal(Signal::SIGKILL);
        Ok((reaped(child.wait().await)?, end))
    }

    /// Collects both streams, waiting at most the drain window for pipes a
    /// stray process may still hold, and forces the logs of a run that did
    /// not succeed to disk.
    async fn drain(
        &self,
        out_task: Option<tokio::task::JoinHandle<Captured>>,
        err_task: Option<tokio::task::JoinHandle<Captured>>,
        stop: CancellationToken,
        succeeded: bool,
    ) -> (Captured, Captured) {
        let mut drain = Box::pin(async move {
            let out = match out_task {
                Some(t) => t.await.ok(),
                None => None,
            };
            let err = match err_task {
                Some(t) => t.await.ok(),
                None => None,
            };
            (out, err)
        });
        let (out, err) = match tokio::time::timeout(self.config.drain_timeout, &mut drain).await {
            Ok(v) => v,
            Err(_) => {
                stop.cancel();
                drain.await
            }
        };
        let empty = || Captured {
            out: CappedOutput::new(0),
            cut_off: false,
            log_error: None,
            log: None,
        };
        let (mut out, mut err) = (out.unwrap_or_else(empty), err.unwrap_or_else(empty));
        // The logs of a run that failed, timed out or was cancelled are the
        // only record of what went wrong: forced to disk. A successful run's
        // output is in its result and artifacts, and its logs are complete
        // in the page cache (no process crash loses them); syncing them too
        // cost two fsyncs, more than a whole backtest on a busy disk.
        for (stream, c) in [("stdout", &mut out), ("stderr", &mut err)] {
            if let (false, Some(f)) = (succeeded, c.log.as_mut())
                && let Err(e) = f.sync_data().await
            {
                c.log_error = Some(e.to_string());
            }
            if let Some(e) = &c.log_error {
                tracing::warn!(stream, error = %e, "cannot write the sandbox log");
            }
        }
        (out, err)
    }
}

/// Directories, ownership, scratch and log files (blocking).
fn prepare(config: &RunnerConfig, spec: &RunSpec) -> Result<Prepared, SandboxError> {
    let mut roots = Vec::new();
    for dir in std::iter::once(&spec.run_dir).chain(&spec.writable) {
        std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
        let real = dir.canonicalize().map_err(io_err("resolve", dir))?;
        if !roots.contains(&real) {
            roots.push(real);
        }
    }
    let run_dir = roots
        .first()
        .cloned()
        .ok_or_else(|| SandboxError::Setup("no run directory".into()))?;
    let logs_dir = run_dir.join("logs");
    std::fs::create_dir_all(&logs_dir).map_err(io_err("create", &logs_dir))?;
    let scratch_root = config
        .scratch_root
        .clone()
        .unwrap_or_else(std::env::temp_dir);

    let decision = decide(&config.user);
    let mut notes: Vec<String> = decision.note.into_iter().collect();
    let mut target = decision.target;
    if let Some(t) = &target {
        // Spec §6.2: no drop rather than no run. The user must reach the
        // writable roots and the scratch, and run every program of the job:
        // one under a directory only root may enter (pyenv or cargo under
        // /root) would turn the run into "permission denied".
        let mut need = roots.clone();
        need.push(scratch_root.clone());
        let programs: Vec<PathBuf> = spec
            .programs()
            .iter()
            .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
            .collect();
        let refused = match check_reachable(t, &need) {
            Err(dir) => Some((dir, "reach", "")),
            Ok(()) => check_reachable(t, &programs).err().map(|dir| {
                (
                    dir,
                    "run a program under",
                    " (install it where every user can run it to keep the drop)",
                )
            }),
        };
        if let Some((blocked, what, hint)) = refused {
            tracing::warn!(user = %t.name, path = %blocked.display(), "sandbox user cannot {what} this path; running without the privilege drop");
            notes.push(format!(
                "{} cannot {what} {}: ran without the privilege drop, RLIMIT_NPROC not enforced{hint}",
                t.name,
                blocked.display()
            ));
            target = None;
        }
    }
    if let Some(t) = &target {
        for root in &roots {
            if let Err(e) = hand_over(root, t.uid, t.gid) {
                tracing::warn!(user = %t.name, dir = %root.display(), error = %e, "cannot hand a writable root to the sandbox user");
                notes.push(format!(
                    "cannot hand {} to {} ({e}): ran without the privilege drop",
                    root.display(),
                    t.name
                ));
                target = None;
                break;
            }
        }
    }
    let owner = target.as_ref().map(|t| (t.uid, t.gid));
    let scratch = Scratch::create(&scratch_root, owner).map_err(io_err("create", &scratch_root))?;
    let name = safe_name(&spec.log_name);
    let stdout_log = logs_dir.join(format!("{name}_stdout.txt"));
    let stderr_log = logs_dir.join(format!("{name}_stderr.txt"));
    let open = |p: &Path| std::fs::File::create(p).map_err(io_err("create", p));
    let logs = (open(&stdout_log)?, open(&stderr_log)?);
    let extra_processes = if target.is_none() && !nix::unistd::geteuid().is_root() {
        count_processes_of(nix::unistd::getuid().as_raw())
    } else {
        0
    };
    Ok(Prepared {
        run_dir,
        roots,
        target,
        notes,
        scratch,
        stdout_log,
        stderr_log,
        logs,
        extra_processes,
    })
}

/// Builds the command; the caller spawns it, in a new PID namespace when
/// `pid_ns`. `confine` lists the writable roots when Landlock is to be
/// enforced.
fn build_command(
    spec: &RunSpec,
    cwd: &Path,
    env: &BTreeMap<String, String>,
    target: Option<&DropTarget>,
    limits: RlimitPlan,
    confine: Option<&[PathBuf]>,
    pid_ns: bool,
) -> std::io::Result<tokio::process::Command> {
    let mut cmd = tokio::process::Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(cwd)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Dropped in the hook rather than with `cmd.uid()`, so that the order
    // of set-up and the parent-death signal after it are ours to see.
    let drop_to = target.map(|t| (t.uid, t.gid));
    let mut ruleset = match confine {
        Some(dirs) => Some(build_ruleset(dirs).map_err(std::io::Error::other)?),
        None => None,
    };
    let parent = nix::unistd::getpid();
    // SAFETY: the hook runs in the forked child before exec. Everything it
    // does is a plain system call on data prepared in the parent (setsid,
    // getrlimit/setrlimit, setgroups/setgid/setuid, prctl, getppid,
    // landlock_restrict_self); it does not allocate, lock or touch shared
    // state: async-signal-safe.
    unsafe {
        cmd.pre_exec(move || child_setup(&limits, parent, drop_to, pid_ns, &mut ruleset));
    }
    Ok(cmd)
}

/// In the child, after fork and std's cwd change, before exec.
fn child_setup(
    limits: &RlimitPlan,
    parent: Pid,
    drop_to: Option<(u32, u32)>,
    pid_ns: bool,
    ruleset: &mut Option<landlock::RulesetCreated>,
) -> std::io::Result<()> {
    let errno = |e: nix::errno::Errno| std::io::Error::from_raw_os_error(e as i32);
    // Own session: own process group (killed as one) and no controlling
    // terminal (it cannot write to or inject into the user's TUI).
    nix::unistd::setsid().map_err(errno)?;
    #[cfg(target_os = "linux")]
    super::pidns::die_with_parent(parent, pid_ns)?;
    #[cfg(not(target_os = "linux"))]
    let _ = (parent, pid_ns);
    limits.apply_in_child();
    if let Some((uid, gid)) = drop_to {
        // As std does for a root parent: no supplementary groups.
        nix::unistd::setgroups(&[]).map_err(errno)?;
        nix::unistd::setgid(nix::unistd::Gid::from_raw(gid)).map_err(errno)?;
        nix::unistd::setuid(nix::unistd::Uid::from_raw(uid)).map_err(errno)?;
        // A credential change clears the parent-death signal: set again.
        #[cfg(target_os = "linux")]
        super::pidns::die_with_parent(parent, pid_ns)?;
    }
    if let Some(rs) = ruleset.take() {
        enforce_in_child(rs)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_names_are_file_safe() {
        assert_eq!(safe_name("bash_call/../x"), "bash_call____x");
        assert_eq!(safe_name(""), "runner");
    }
}
