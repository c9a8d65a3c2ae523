//! No secrets through `/proc` (issue 24 item 5, docs §6.1) and the worker
//! limit of team runs (item 6, docs §14.3), through the real binary: a
//! stdio MCP server that reads its parent's `/proc/<pid>/environ`, a
//! same-user process that tries the same on a non-dumpable vibedesk, and
//! `swarm run --max-workers` under a lowered open-file limit.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");

/// Credentials in vibedesk's environment, as a user's shell would have them.
const KEYS: &[(&str, &str)] = &[
    ("OPENAI_API_KEY", "sk-proc-openai-0123456789abcdef"),
    ("VIBEDESK_API_KEY", "sk-proc-vibedesk-0123456789"),
    ("GITHUB_TOKEN", "ghp_procgithubtoken0123456789abcdef0123"),
    ("AWS_SECRET_ACCESS_KEY", "proc-aws-secret-0123456789"),
];

fn vibedesk(home: &Path) -> Command {
    let mut c = crate::support::harness::vibedesk(home);
    c.current_dir(home);
    c
}

#[tokio::test]
async fn a_server_vibedesk_starts_finds_no_key_in_its_parents_environ() {
    let home = tempfile::tempdir().unwrap();
    let seen = home.path().join("parent-environ.txt");
    let refused = home.path().join("read-error.txt");
    let ppid = home.path().join("parent-pid.txt");
    std::fs::create_dir_all(home.path().join("config")).unwrap();
    // A stdio "server" that only reads its parent's environment and exits.
    // Its parent's pid as the host sees it: in the server's PID namespace
    // (docs §13.2) `$PPID` is 0, but /proc is the host's.
    let script = format!(
        "read -r _ _ _ pp _ < /proc/self/stat; echo $pp > '{}'; tr '\\0' '\\n' 2> '{}' > '{}' < /proc/$pp/environ",
        ppid.display(),
        refused.display(),
        seen.display()
    );
    let config = format!(
        "[mcp_servers.peek]\ncommand = \"sh\"\nargs = [\"-c\", {}]\nstartup_timeout_s = 5\n",
        toml_string(&script)
    );
    std::fs::write(home.path().join("config/config.toml"), config).unwrap();
    let mut cmd = vibedesk(home.path());
    for (k, v) in KEYS {
        cmd.env(k, v);
    }
    let child = cmd
        .args(["mcp", "list"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("`mcp list` did not finish in 60 s")
        .unwrap();
    // The server exits at once, so it is not ready: exit 1.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // It did read vibedesk's own environment…
    assert_eq!(
        std::fs::read_to_string(&ppid).unwrap().trim(),
        pid.to_string()
    );
    let environ = std::fs::read_to_string(&seen).unwrap();
    if is_root() {
        // Root may read any process's environ: the keys must be gone from it.
        assert!(environ.contains("VIBEDESK_HOME="), "{environ}");
    } else {
        // A same-user process may not read a non-dumpable one at all.
        let error = std::fs::read_to_string(&refused).unwrap();
        assert!(environ.is_empty(), "{environ}");
        assert!(error.contains("Permission denied"), "{error}");
    }
    // …and found no credential in it, by name or value.
    for (k, v) in KEYS {
        assert!(!environ.contains(k), "{k} is readable:\n{environ}");
        assert!(!environ.contains(v), "the value of {k} is readable");
    }
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Whether this test runs as root, which may switch to another user.
fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Reads `/proc/<pid>/environ` as user `uid`; whether it could.
async fn can_read_environ_as(uid: u32, pid: u32) -> bool {
    Command::new("sh")
        .args(["-c", &format!("cat /proc/{pid}/environ > /dev/null")])
        .uid(uid)
        .gid(uid)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .unwrap()
        .success()
}

#[tokio::test]
async fn a_same_user_process_cannot_read_vibedesks_memory_or_environment() {
    use std::os::unix::fs::PermissionsExt;
    if !is_root() {
        eprintln!("skipped: switching to an unprivileged user needs root");
        return;
    }
    const NOBODY: u32 = 65_534;
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o777)).unwrap();

    // The control: an ordinary process of that user is readable by it.
    let mut control = Command::new("sleep")
        .arg("30")
        .uid(NOBODY)
        .gid(NOBODY)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(can_read_environ_as(NOBODY, control.id().unwrap()).await);
    control.kill().await.unwrap();

    // vibedesk as that user, serving MCP on stdio.
    let mut served = vibedesk(home.path())
        .args(["mcp", "serve"])
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = served.id().unwrap();
    // Once it answers, it is past its start-up.
    let mut stdin = served.stdin.take().unwrap();
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    let mut lines = BufReader::new(served.stdout.take().unwrap()).lines();
    let answer = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("no answer in 30 s")
        .unwrap()
        .unwrap();
    assert!(answer.contains("\"vibedesk\""), "{answer}");
    assert!(
        !can_read_environ_as(NOBODY, pid).await,
        "a same-user process read vibedesk's environment"
    );
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(10), served.wait()).await;
}

/// A preset whose one task needs a variable: `swarm run` refuses it
/// (exit 2) after the worker check, before anything runs.
const PRESET: &str = "name: t\nagents: [{id: a}]\ntasks: [{id: x, agent_id: a, prompt_template: 'Study {target}.'}]\nvariables:\n  - {name: target, required: true}\n";

/// `swarm run preset.yaml ARGS` with the soft open-file limit at `nofile`.
async fn swarm_run(home: &Path, nofile: u32, args: &str) -> (Option<i32>, String) {
    let preset = home.join("preset.yaml");
    std::fs::write(&preset, PRESET).unwrap();
    let out = Command::new("sh")
        .args([
            "-c",
            &format!(
                "ulimit -n {nofile} && exec '{BIN}' swarm run '{}' {args}",
                preset.display()
            ),
        ])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("VIBEDESK_HOME", home)
        .current_dir(home)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn max_workers_is_at_least_one_and_bounded_by_the_open_file_limit() {
    let home = tempfile::tempdir().unwrap();
    let (code, stderr) = swarm_run(home.path(), 1024, "--max-workers 0").await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("must be at least 1"), "{stderr}");

    // 256 open files: (256 - 64) / 16 = 12 workers at most.
    let (code, stderr) = swarm_run(home.path(), 256, "--max-workers 1000").await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("RLIMIT_NOFILE is 256"), "{stderr}");
    assert!(stderr.contains("--max-workers 12 or less"), "{stderr}");
    // At the bound the check passes; the run stops on the missing variable.
    let (code, stderr) = swarm_run(home.path(), 256, "--max-workers 12").await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("missing required variable"), "{stderr}");
    assert!(!stderr.contains("RLIMIT_NOFILE"), "{stderr}");

    // The config's value is checked the same way.
    std::fs::create_dir_all(home.path().join("config")).unwrap();
    std::fs::write(
        home.path().join("config/config.toml"),
        "[swarm]\nmax_workers = 0\n",
    )
    .unwrap();
    let (code, stderr) = swarm_run(home.path(), 1024, "").await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("must be at least 1"), "{stderr}");
}
