//! The sandbox runner and the `bash` tool against real subprocesses: secrets,
//! the throwaway HOME, rlimits (memory and fork bombs), the group kill at the
//! deadline and on cancel, the output cap, Landlock, artifacts, and the
//! shell-safety rules.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::sandbox::confine::kernel_abi;
use vibedesk::sandbox::env::is_allowed;
use vibedesk::sandbox::{BACKTEST_ARTIFACTS, RunResult, RunSpec, Runner, RunnerConfig};
use vibedesk::tools::builtin::default_registry;
use vibedesk::tools::builtin::shell::Bash;
use vibedesk::tools::{BackgroundQueue, Tool, ToolContext};

const PYTHON: &str = "/usr/bin/python3";

struct Fx {
    _dir: tempfile::TempDir,
    run: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
}

/// A run dir, a workspace and a directory outside both. The root is made
/// traversable so that an unprivileged sandbox user can reach it.
fn fixture() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = dir.path().join("run");
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    for d in [&run, &ws, &outside] {
        std::fs::create_dir_all(d).unwrap();
    }
    // Writable for anyone: only Landlock may refuse a write here.
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o777)).unwrap();
    Fx {
        _dir: dir,
        run,
        ws,
        outside,
    }
}

fn config() -> RunnerConfig {
    RunnerConfig {
        timeout: Duration::from_secs(20),
        drain_timeout: Duration::from_secs(2),
        ..RunnerConfig::default()
    }
}

/// A parent environment with real-looking secrets, passed as a map so the
/// test process's own environment is never mutated (tests run in threads).
fn parent_env() -> BTreeMap<String, String> {
    [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HOME", "/root"),
        ("LC_ALL", "C.UTF-8"),
        ("OPENAI_API_KEY", "sk-test-openai-123456"),
        ("DEEPSEEK_API_KEY", "sk-test-deepseek-123456"),
        ("OPENROUTER_API_KEY", "sk-or-test-123456"),
        ("AWS_SECRET_ACCESS_KEY", "aws-test-secret-123456"),
        ("AWS_ACCESS_KEY_ID", "AKIATEST123456"),
        ("VIBEDESK_API_KEY", "sk-test-vibedesk-123456"),
        ("ANTHROPIC_API_KEY", "sk-ant-test-123456"),
        ("BASH_ENV", "/root/.env"),
        ("NODE_OPTIONS", "--require dotenv/config"),
        ("DOTENV_CONFIG_PATH", "/root/.env"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

async fn run_sh(runner: &Runner, fx: &Fx, script: &str) -> RunResult {
    let spec = RunSpec::new("/bin/sh", &fx.run)
        .args(["-c", script])
        .writable(&fx.ws)
        .env("VIBEDESK_WORKSPACE", fx.ws.to_string_lossy())
        .parent_env(parent_env());
    runner.run(spec, &CancellationToken::new()).await.unwrap()
}

/// Gone, or a zombie nobody has reaped yet (pid 1 of a container may not).
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

async fn wait_dead(pid: u32) -> bool {
    for _ in 0..40 {
        if is_dead(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A shell line that starts `sleep 300` in the background and prints its
/// pid as the host sees it. `$!` would print the pid inside the job's PID
/// namespace; `/proc` is the host's, so `/proc/self/stat` gives the other.
const GRANDCHILD: &str =
    "sh -c 'read -r p _ < /proc/self/stat; echo grandchild $p; exec sleep 300' &";

fn grandchild_pid(stdout: &str) -> u32 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("grandchild "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no grandchild pid in {stdout:?}"))
}

#[tokio::test]
async fn child_env_has_no_secrets() {
    let fx = fixture();
    let r = run_sh(&Runner::new(config()), &fx, "env").await;
    assert!(r.success, "{r:?}");
    let env: BTreeMap<&str, &str> = r.stdout.lines().filter_map(|l| l.split_once('=')).collect();
    for k in [
        "OPENAI_API_KEY",
        "DEEPSEEK_API_KEY",
        "OPENROUTER_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "VIBEDESK_API_KEY",
        "ANTHROPIC_API_KEY",
        "BASH_ENV",
        "NODE_OPTIONS",
        "DOTENV_CONFIG_PATH",
    ] {
        assert!(!env.contains_key(k), "{k} reached the child");
    }
    assert!(
        !r.stdout.contains("-test-"),
        "a secret value leaked:\n{}",
        r.stdout
    );
    assert_eq!(env["VIBEDESK_SANDBOX"], "1");
    assert_eq!(env["PYTHONUNBUFFERED"], "1");
    assert_eq!(env["LC_ALL"], "C.UTF-8");
    assert_eq!(env["VIBEDESK_WORKSPACE"], fx.ws.to_string_lossy());
    assert_ne!(env["HOME"], "/root");
}

#[tokio::test]
async fn the_real_process_env_is_allow_listed_too() {
    let fx = fixture();
    let spec = RunSpec::new("/usr/bin/env", &fx.run);
    let r = Runner::new(config())
        .run(spec, &CancellationToken::new())
        .await
        .unwrap();
    assert!(r.success, "{r:?}");
    // Every name is either allow-listed or one the runner sets itself.
    const SET_BY_RUNNER: &[&str] = &[
        "HOME",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "TMPDIR",
        "TMP",
        "TEMP",
        "SHELL",
        "USER",
        "LOGNAME",
        "PYTHONUNBUFFERED",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONDONTWRITEBYTECODE",
        "PIPENV_DONT_LOAD_ENV",
        "UV_NO_ENV_FILE",
        "VIBEDESK_RUN_DIR",
        "VIBEDESK_SANDBOX",
    ];
    for line in r.stdout.lines() {
        let Some((k, _)) = line.split_once('=') else {
            continue;
        };
        assert!(
            is_allowed(k) || SET_BY_RUNNER.contains(&k),
            "{k} passed from the real environment"
        );
    }
}

#[tokio::test]
async fn home_is_throwaway_and_removed_afterwards() {
    let fx = fixture();
    let r = run_sh(
        &Runner::new(config()),
        &fx,
        r#"echo "$HOME"; echo data > "$HOME/f"; echo tmp > "$TMPDIR/t"; ls "$HOME""#,
    )
    .await;
    assert!(r.success, "{r:?}");
    let home = PathBuf::from(r.stdout.lines().next().unwrap());
    assert!(home.to_string_lossy().contains("vibedesk-sandbox-"));
    assert_ne!(Some(home.as_os_str()), std::env::var_os("HOME").as_deref());
    assert!(r.stdout.contains("\nf\n"));
    assert!(!home.exists(), "HOME survived the run");
    assert!(!home.parent().unwrap().exists(), "scratch survived the run");
}

#[tokio::test]
async fn memory_bomb_is_stopped_by_rlimit_as() {
    let fx = fixture();
    let mut cfg = config();
    cfg.limits.address_space_mb = 512;
    let runner = Runner::new(cfg);
    let started = Instant::now();
    let r = if Path::new(PYTHON).exists() {
        let spec = RunSpec::new(PYTHON, &fx.run)
            .args(["-c", "x = bytearray(2 * 1024**3); print('allocated')"])
            .parent_env(parent_env());
        let r = runner.run(spec, &CancellationToken::new()).await.unwrap();
        assert!(r.stderr.contains("MemoryError"), "{r:?}");
        r
    } else {
        eprintln!("{PYTHON} missing: using head | tail as the bomb");
        run_sh(
            &runner,
            &fx,
            "head -c 3000000000 /dev/zero | tail; echo allocated",
        )
        .await
    };
    assert!(!r.success);
    assert!(!r.stdout.contains("allocated") || !Path::new(PYTHON).exists());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn rlimits_are_visible_in_the_child() {
    let fx = fixture();
    let r = run_sh(&Runner::new(config()), &fx, "cat /proc/self/limits").await;
    assert!(r.success, "{r:?}");
    let limit = |name: &str| -> (String, String) {
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing"));
        let mut f = line[name.len()..].split_whitespace();
        (f.next().unwrap().into(), f.next().unwrap().into())
    };
    assert_eq!(limit("Max address space").0, (4096u64 << 20).to_string());
    assert_eq!(limit("Max open files"), ("512".into(), "512".into()));
    assert_eq!(limit("Max core file size"), ("0".into(), "0".into()));
    assert_eq!(limit("Max file size").0, (1024u64 << 20).to_string());
    assert_eq!(limit("Max cpu time"), ("900".into(), "905".into()));
    if r.protections.user.is_some() {
        assert_eq!(limit("Max processes"), ("256".into(), "256".into()));
    }
}

#[tokio::test]
async fn fork_bomb_is_stopped_by_rlimit_nproc() {
    let fx = fixture();
    let mut cfg = config();
    cfg.limits.processes = 40;
    let runner = Runner::new(cfg);
    let started = Instant::now();
    // Bounded: at most 200 sleeping children, and it stops by itself.
    let r = run_sh(
        &runner,
        &fx,
        "i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done; echo spawned $i",
    )
    .await;
    let Some(user) = &r.protections.user else {
        eprintln!(
            "skipped: the child ran without a privilege drop ({}), so RLIMIT_NPROC does not bind",
            r.protections.summary()
        );
        return;
    };
    assert!(r.protections.nproc_enforced);
    assert!(!r.stdout.contains("spawned 200"), "ran as {user}: {r:?}");
    assert!(r.stderr.to_lowercase().contains("fork"), "{r:?}");
    assert!(!r.success);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn deadline_kills_the_whole_group_and_keeps_partial_output() {
    let fx = fixture();
    let mut cfg = config();
    cfg.timeout = Duration::from_millis(700);
    let started = Instant::now();
    let r = run_sh(
        &Runner::new(cfg),
        &fx,
        &format!("{GRANDCHILD} echo partial-err >&2; sleep 300"),
    )
    .await;
    assert!(r.timed_out && !r.success && !r.cancelled, "{r:?}");
    assert_eq!(r.signal, Some(9));
    assert!(started.elapsed() < Duration::from_secs(5));
    let gc = grandchild_pid(&r.stdout);
    assert!(
        wait_dead(gc).await,
        "grandchild {gc} survived the group kill"
    );
    assert!(is_dead(r.pid));
    // The partial output is kept, in the result and in logs/ (§12.14).
    assert!(r.stderr.contains("partial-err"));
    assert_eq!(
        r.stdout_log,
        fx.run
            .canonicalize()
            .unwrap()
            .join("logs/runner_stdout.txt")
    );
    assert!(
        std::fs::read_to_string(&r.stdout_log)
            .unwrap()
            .contains(&format!("grandchild {gc}"))
    );
    assert!(
        std::fs::read_to_string(&r.stderr_log)
            .unwrap()
            .contains("partial-err")
    );
}

/// The issue's case: a descendant in a session of its own (out of the job's
/// process group) still ends at the deadline, and the run returns promptly
/// instead of waiting out the drain window on the pipe it holds.
#[tokio::test]
async fn deadline_ends_a_descendant_that_left_the_group() {
    let fx = fixture();
    let mut cfg = config();
    cfg.timeout = Duration::from_millis(700);
    cfg.drain_timeout = Duration::from_secs(5);
    let started = Instant::now();
    let r = run_sh(
        &Runner::new(cfg),
        &fx,
        "(setsid sh -c 'read -r p _ < /proc/self/stat; echo escapee $p; exec sleep 995' &); sleep 1000",
    )
    .await;
    let took = started.elapsed();
    assert!(
        r.protections.pid_namespace,
        "this machine runs as root, so jobs get a PID namespace: {}",
        r.protections.summary()
    );
    assert!(r.timed_out && !r.success, "{r:?}");
    assert!(!r.output_cut_off, "the pipes closed with the job: {r:?}");
    assert!(
        took < Duration::from_millis(700 + 1000),
        "returned {took:?} after the start, deadline 700 ms"
    );
    let escapee = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("escapee "))
        .and_then(|p| p.trim().parse::<u32>().ok())
        .unwrap_or_else(|| panic!("no escapee pid in {:?}", r.stdout));
    assert!(
        is_dead(escapee),
        "the setsid descendant {escapee} outlived the deadline"
    );
}

/// A job is recorded while it runs (for the next start to end it after a
/// crash) and the record is gone once it is reaped.
#[tokio::test]
async fn a_running_job_is_recorded_and_the_record_removed_after() {
    let fx = fixture();
    let jobs = fx.outside.join("jobs");
    let runner = Runner::new(config().with_jobs_dir(Some(jobs.clone())));
    // The record is written just after the spawn: wait for it (bounded).
    let script = format!(
        "for i in $(seq 100); do [ -n \"$(ls {0} 2>/dev/null)\" ] && break; sleep 0.05; done; ls {0}",
        jobs.display()
    );
    let r = run_sh(&runner, &fx, &script).await;
    assert!(r.success, "{r:?}");
    let listed = r.stdout.trim();
    assert!(
        listed.starts_with(&format!("{}-", r.pid)) && listed.ends_with(".json"),
        "{listed:?}"
    );
    assert_eq!(std::fs::read_dir(&jobs).unwrap().count(), 0);
}

/// A job group that outlived its owner is killed on the next start, but
/// only while its leader is the very process recorded: a record whose start
/// time does not match (a recycled pid) is dropped and nothing is killed.
#[tokio::test]
async fn orphaned_jobs_are_killed_only_when_the_leader_is_the_recorded_one() {
    use vibedesk::sandbox::jobs::{JobFile, JobRecord, reap_orphans};
    let dir = tempfile::tempdir().unwrap();
    let spawn_group = || {
        std::process::Command::new("setsid")
            .args(["sleep", "300"])
            .spawn()
            .unwrap()
    };
    let (mut ours, mut recycled) = (spawn_group(), spawn_group());
    // A dead owner: a process that has already exited.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let record = |pid: u32, start_shift: u64| {
        // Until `setsid` has made it the leader of its own group.
        for _ in 0..200 {
            if vibedesk::process::stat_of(pid).is_some_and(|s| s.pgrp == pid) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut rec = JobRecord::for_group(pid, "sleep".into(), dir.path().into());
        rec.start = rec.start.map(|s| s + start_shift);
        rec.owner_pid = gone.id();
        rec
    };
    let jobs = dir.path().join("jobs");
    // Leaked on purpose: a crashed owner never removed its records.
    std::mem::forget(JobFile::write(&jobs, &record(ours.id(), 0)));
    std::mem::forget(JobFile::write(&jobs, &record(recycled.id(), 1)));
    // A record of a live owner (this test) is left alone.
    let live = JobRecord::for_group(recycled.id(), "sleep".into(), dir.path().into());
    let live_file = JobFile::write(&jobs.join("live"), &live);
    assert_eq!(std::fs::read_dir(&jobs).unwrap().count(), 3);

    let reaped = reap_orphans(&jobs);
    assert_eq!(reaped.len(), 1, "{reaped:?}");
    assert_eq!(reaped[0].pgid, ours.id());
    let status = ours.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert!(
        recycled.try_wait().unwrap().is_none(),
        "a record with another start time must not kill"
    );
    // Both dead owners' records are gone; the live one stays.
    assert_eq!(
        std::fs::read_dir(&jobs)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().is_file())
            .count(),
        0
    );
    assert!(reap_orphans(&jobs.join("live")).is_empty());
    assert_eq!(std::fs::read_dir(jobs.join("live")).unwrap().count(), 1);
    drop(live_file);
    recycled.kill().unwrap();
    recycled.wait().unwrap();
}

#[tokio::test]
async fn cancel_kills_the_whole_group() {
    let fx = fixture();
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        c.cancel();
    });
    let spec = RunSpec::new("/bin/sh", &fx.run)
        .args(["-c", &format!("{GRANDCHILD} sleep 300")])
        .parent_env(parent_env());
    let r = Runner::new(config()).run(spec, &cancel).await.unwrap();
    assert!(r.cancelled && !r.timed_out && !r.success, "{r:?}");
    let gc = grandchild_pid(&r.stdout);
    assert!(wait_dead(gc).await, "grandchild {gc} survived the cancel");
}

#[tokio::test]
async fn output_flood_is_capped_in_memory_and_on_disk() {
    let fx = fixture();
    let cfg = config();
    let cap = cfg.output_cap;
    let r = run_sh(
        &Runner::new(cfg),
        &fx,
        r"head -c 100000000 /dev/zero | tr '\0' x",
    )
    .await;
    assert!(r.success, "{:?}", r.stderr);
    assert_eq!(r.stdout_bytes, 100_000_000);
    assert_eq!(r.stdout_dropped, 100_000_000 - cap as u64);
    assert!(
        r.stdout.len() <= cap + 100,
        "{} bytes in memory",
        r.stdout.len()
    );
    assert!(r.stdout.starts_with("xxxx") && r.stdout.ends_with("xxxx"));
    assert!(r.stdout.contains("bytes omitted by the sandbox output cap"));
    let on_disk = std::fs::metadata(&r.stdout_log).unwrap().len();
    assert!(on_disk <= cap as u64 + 100, "{on_disk} bytes on disk");
}

#[tokio::test]
async fn writes_outside_the_run_dir_are_refused_by_landlock() {
    let abi = kernel_abi();
    if abi == 0 {
        eprintln!("skipped: this kernel offers no Landlock");
        return;
    }
    let fx = fixture();
    let probe =
        std::env::temp_dir().join(format!("vibedesk-landlock-probe-{}", std::process::id()));
    let script = format!(
        r#"echo in > inside.txt; echo ws > "$VIBEDESK_WORKSPACE/w.txt"; echo t > "$TMPDIR/t.txt"; echo n > /dev/null && echo devnull-ok
echo out > '{out}/x.txt' || echo refused-outside
echo tmp > '{probe}' || echo refused-tmp"#,
        out = fx.outside.display(),
        probe = probe.display()
    );
    let r = run_sh(&Runner::new(config()), &fx, &script).await;
    assert!(r.protections.landlock, "{:?}", r.protections);
    assert_eq!(r.protections.landlock_abi, abi);
    assert!(fx.run.join("inside.txt").exists(), "{r:?}");
    assert!(fx.ws.join("w.txt").exists(), "{r:?}");
    assert!(r.stdout.contains("devnull-ok"), "{r:?}");
    assert!(r.stdout.contains("refused-outside"), "{r:?}");
    assert!(r.stdout.contains("refused-tmp"), "{r:?}");
    assert!(!fx.outside.join("x.txt").exists());
    assert!(!probe.exists());
    assert!(r.stderr.contains("Permission denied"), "{r:?}");
}

#[tokio::test]
async fn a_program_the_sandbox_user_cannot_reach_runs_without_the_drop() {
    let fx = fixture();
    // A script in a directory only its owner may enter, as a pyenv
    // interpreter under /root is.
    let private = fx.outside.join("private");
    std::fs::create_dir_all(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let script = private.join("hello.sh");
    std::fs::write(&script, "#!/bin/sh\necho ran as $(id -u)\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = nix::unistd::geteuid().is_root();
    let me = format!("ran as {}", nix::unistd::geteuid());
    let runner = Runner::new(config());
    // Reachable programs keep the drop (as root).
    let plain = run_sh(&runner, &fx, "id -u").await;
    assert!(plain.success, "{plain:?}");
    assert_eq!(plain.protections.user.is_some(), root, "{plain:?}");
    // The script as the program itself, and as a program the child starts.
    let specs = [
        RunSpec::new(&script, &fx.run),
        RunSpec::new("/bin/sh", &fx.run)
            .args(["-c".into(), script.display().to_string()])
            .executable(&script),
    ];
    for spec in specs {
        let r = runner
            .run(spec.parent_env(parent_env()), &CancellationToken::new())
            .await
            .unwrap();
        assert!(r.success, "{r:?}");
        assert!(r.stdout.contains(&me), "{r:?}");
        assert!(r.protections.user.is_none(), "{r:?}");
        if root {
            let note = r.protections.notes.join(" ");
            assert!(
                note.contains("cannot run a program under") && note.contains("private"),
                "{note}"
            );
            assert!(!r.protections.nproc_enforced);
        }
    }
}

#[tokio::test]
async fn own_session_parent_death_signal_and_null_stdin() {
    if !Path::new(PYTHON).exists() {
        eprintln!("skipped: {PYTHON} missing");
        return;
    }
    let fx = fixture();
    let script = "import ctypes, os\n\
        libc = ctypes.CDLL(None)\n\
        sig = ctypes.c_int()\n\
        libc.prctl(2, ctypes.byref(sig))\n\
        print(sig.value, os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid(), os.readlink('/proc/self/fd/0'))";
    let spec = RunSpec::new(PYTHON, &fx.run)
        .args(["-c", script])
        .parent_env(parent_env());
    let r = Runner::new(config())
        .run(spec, &CancellationToken::new())
        .await
        .unwrap();
    assert!(r.success, "{r:?}");
    // PR_GET_PDEATHSIG = 9 (SIGKILL); session and group leader; stdin null.
    assert_eq!(r.stdout.trim(), "9 True True /dev/null");
    assert!(r.protections.pdeathsig && r.protections.own_session);
}

#[tokio::test]
async fn artifacts_are_collected_per_the_spec_table() {
    let fx = fixture();
    let spec = RunSpec::new("/bin/sh", &fx.run)
        .args([
            "-c",
            "mkdir -p artifacts && echo timestamp,ret,equity,drawdown > artifacts/equity.csv && echo {} > run_card.json",
        ])
        .parent_env(parent_env())
        .artifacts(BACKTEST_ARTIFACTS);
    let r = Runner::new(config())
        .run(spec, &CancellationToken::new())
        .await
        .unwrap();
    assert!(r.success, "{r:?}");
    let run = fx.run.canonicalize().unwrap();
    assert_eq!(
        r.artifacts.keys().map(String::as_str).collect::<Vec<_>>(),
        vec!["equity", "run_card_json"]
    );
    assert_eq!(r.artifacts["equity"], run.join("artifacts/equity.csv"));
    assert_eq!(r.missing_required, vec!["metrics", "trades"]);
    assert!(run.join("logs/runner_stdout.txt").exists());
    assert!(run.join("logs/runner_stderr.txt").exists());
}

// ---------------------------------------------------------------- bash tool

fn ctx(fx: &Fx, call_id: &str) -> ToolContext {
    ToolContext {
        call_id: call_id.into(),
        session_id: "s".into(),
        run_dir: fx.run.clone(),
        workspace: fx.ws.clone(),
        cancel: CancellationToken::new(),
        background: BackgroundQueue::default(),
    }
}

async fn bash(fx: &Fx, args: Value) -> Result<Value, String> {
    Bash::new(config())
        .call(args, &ctx(fx, "c1"))
        .await
        .map(|s| serde_json::from_str(&s).unwrap())
        .map_err(|e| e.to_result_json("bash"))
}

#[tokio::test]
async fn bash_tool_refuses_broad_python_kills() {
    let fx = fixture();
    for cmd in [
        "pkill python",
        "sudo killall python3",
        "taskkill /im python.exe",
    ] {
        let err = bash(&fx, json!({"command": cmd})).await.unwrap_err();
        assert!(err.contains("blocked_command"), "{cmd}: {err}");
    }
    // Targeted: it runs (and finds nothing to kill).
    let ok = bash(
        &fx,
        json!({"command": "pkill -f my_script_that_is_not_running.py"}),
    )
    .await
    .unwrap();
    assert_ne!(ok["error_code"], "blocked_command");
    assert_eq!(ok["exit_code"], 1);
}

#[tokio::test]
async fn bash_tool_runs_in_the_run_dir_with_the_workspace_writable() {
    let fx = fixture();
    let v = bash(
        &fx,
        json!({"command": "pwd; echo hi > made.txt; echo w > \"$VIBEDESK_WORKSPACE/ws.txt\"; cat <<'EOF'\nheredoc-ok\nEOF"}),
    )
    .await
    .unwrap();
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["ok"], true);
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["timed_out"], false);
    assert_eq!(v["truncated"], false);
    let stdout = v["stdout"].as_str().unwrap();
    assert!(stdout.starts_with(&*fx.run.canonicalize().unwrap().to_string_lossy()));
    assert!(stdout.contains("heredoc-ok"));
    assert!(fx.run.join("made.txt").exists());
    assert!(fx.ws.join("ws.txt").exists());
    assert_eq!(v["logs"]["stdout"], "logs/bash_c1_stdout.txt");
}

#[tokio::test]
async fn bash_tool_reports_errors_timeouts_and_truncation() {
    let fx = fixture();
    let v = bash(&fx, json!({"command": "echo oops >&2; exit 3"}))
        .await
        .unwrap();
    assert_eq!(v["status"], "error");
    assert_eq!(v["ok"], false);
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["stderr"], "oops\n");

    let started = Instant::now();
    let v = bash(
        &fx,
        json!({"command": "echo before; sleep 30 & sleep 30", "timeout_seconds": 1}),
    )
    .await
    .unwrap();
    assert_eq!(v["status"], "timed_out", "{v}");
    assert_eq!(v["timed_out"], true);
    assert_eq!(v["ok"], false);
    assert_eq!(v["error_code"], "command_timeout");
    assert_eq!(v["stdout"], "before\n");
    assert!(started.elapsed() < Duration::from_secs(4));

    let v = bash(
        &fx,
        json!({"command": "head -c 60000 /dev/zero | tr '\\0' a"}),
    )
    .await
    .unwrap();
    assert_eq!(v["truncated"], true);
    assert!(v["stdout"].as_str().unwrap().chars().count() <= 50_000);
    assert_eq!(v["stdout_bytes"], 60_000);

    let err = bash(&fx, json!({"command": "true", "timeout_seconds": 0}))
        .await
        .unwrap_err();
    assert!(err.contains("invalid_arguments"), "{err}");
}

#[test]
fn bash_is_a_registered_repeatable_write_tool() {
    let reg = default_registry();
    let tool = reg.get("bash").expect("bash is registered");
    assert!(!tool.readonly());
    assert!(tool.repeatable());
    assert!(tool.timeout().unwrap() >= Duration::from_secs(600));
}
