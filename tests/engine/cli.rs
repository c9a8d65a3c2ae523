//! The `vibedesk` binary as a user runs it: real child processes, a temp
//! `VIBEDESK_HOME` (and `HOME`), the loopback server for the provider.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use vibedesk::store::{MessageLog, read_trace};

use crate::support::harness::{files_under, read_json, vibedesk};
use crate::support::server::{TestServer, json_reply, text_reply, tool_call_reply};

fn write_script(dir: &Path, name: &str, script: Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, script.to_string()).unwrap();
    p
}

fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// `vibedesk run --json -p PROMPT` on the offline planner, which must succeed.
async fn offline_json_run(home: &Path, prompt: &str) -> std::process::Output {
    let out = vibedesk(home)
        .args(["run", "--json", "-p", prompt])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `hello` offline in a new session and returns the session id.
async fn hello_session(home: &Path) -> String {
    let out = offline_json_run(home, "hello").await;
    events(&out.stdout)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn run_dir_of(evs: &[Value]) -> PathBuf {
    PathBuf::from(
        evs.iter().find(|e| e["type"] == "run_started").unwrap()["run_dir"]
            .as_str()
            .unwrap(),
    )
}

#[tokio::test]
async fn run_json_against_a_loopback_server_end_to_end() {
    let home = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        tool_call_reply(&[("c1", "write_file", r#"{"path":"out.md","content":"hello"}"#)]),
        tool_call_reply(&[
            ("c2", "read_file", r#"{"path":"out.md"}"#),
            ("c3", "list_dir", "{}"),
        ]),
        text_reply("Wrote out.md."),
    ])
    .await;
    let out = vibedesk(home.path())
        .args([
            "run",
            "--json",
            "--approval",
            "auto-edit",
            "-p",
            "write out.md",
            "--base-url",
            &server.base_url(),
            "--model",
            "m1",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evs = events(&out.stdout);
    let types: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"run_started"));
    assert_eq!(types.last(), Some(&"run_finished"));
    assert!(evs.iter().all(|e| e["ts"].as_f64().is_some()));
    let modes: Vec<&str> = evs
        .iter()
        .filter(|e| e["type"] == "tool_batch_started")
        .map(|e| e["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, vec!["serial", "parallel"]);
    assert_eq!(evs.last().unwrap()["status"], "success");
    let run_dir = run_dir_of(&evs);
    assert!(
        run_dir.starts_with(home.path()),
        "every path under VIBEDESK_HOME"
    );
    assert_eq!(read_json(&run_dir.join("state.json"))["status"], "success");
    let sid = evs[0]["session_id"].as_str().unwrap();
    let sdir = home.path().join("data/sessions").join(sid);
    assert_eq!(
        std::fs::read_to_string(sdir.join("workspace/out.md")).unwrap(),
        "hello"
    );
    let trace = read_trace(&sdir, None).unwrap();
    assert!(trace.records.len() > 8);
    assert_eq!(server.request_count(), 3);
    // The key never reaches disk: there was none, and no file mentions one.
    assert!(
        !std::fs::read_to_string(sdir.join("trace.jsonl"))
            .unwrap()
            .contains("Bearer")
    );
}

#[tokio::test]
async fn text_mode_streams_the_answer_to_stdout_only() {
    let home = tempfile::tempdir().unwrap();
    let script = write_script(
        home.path(),
        "s.json",
        json!([{"text": "Checking.", "tool_calls": [{"name": "list_dir", "arguments": {}}]}, {"text": "The workspace is empty."}]),
    );
    let out = vibedesk(home.path())
        .args([
            "run",
            "-p",
            "what is here?",
            "--script",
            script.to_str().unwrap(),
        ])
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout, "Checking.\n\nThe workspace is empty.\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("list_dir"));
}

#[tokio::test]
async fn with_no_model_the_offline_planner_answers_honestly() {
    let home = tempfile::tempdir().unwrap();
    let out = vibedesk(home.path())
        .args(["run", "-p", "What is the meaning of life?"])
        .output()
        .await
        .unwrap();
    // An answer that says it cannot: `unsupported`, exit 4 (docs §1.4).
    assert_eq!(
        out.status.code(),
        Some(i32::from(vibedesk::cli::exit::UNSUPPORTED))
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no model is configured") && err.contains("offline planner"),
        "{err}"
    );
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(
        answer.contains("offline planner") && answer.contains("vibedesk doctor"),
        "{answer}"
    );
    assert!(
        answer.contains("backtest a 20/50 SMA crossover"),
        "it says what works offline: {answer}"
    );
}

#[tokio::test]
async fn the_offline_planner_runs_real_tools_on_the_embedded_data() {
    let home = tempfile::tempdir().unwrap();
    let out = vibedesk(home.path())
        .args(["run", "--json", "-p", "RSI of IBM in 2010"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evs = events(&out.stdout);
    assert_eq!(evs[0]["provider"], "offline");
    let call = evs
        .iter()
        .find(|e| e["type"] == "tool_call_started")
        .expect("a tool ran");
    assert_eq!(call["tool"], "technical_indicator");
    assert_eq!(
        evs.iter()
            .find(|e| e["type"] == "tool_call_finished")
            .unwrap()["status"],
        "ok"
    );
    let answer = evs.iter().find(|e| e["type"] == "answer").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        answer.contains("RSI of IBM") && answer.contains("2010-12-31"),
        "{answer}"
    );
    assert!(
        answer.contains("embedded"),
        "names its data source: {answer}"
    );

    let out = vibedesk(home.path())
        .args(["run", "-p", "show MSFT's last 5 days in 2010"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("| 2010-12-31 |") && table.contains("MSFT: 5 daily bars"),
        "{table}"
    );
}

/// Issue 5's "done when": no key, a plain backtest request, real metrics from
/// the embedded data, artifacts and a chart on disk.
#[tokio::test]
async fn the_offline_planner_backtests_on_the_embedded_data() {
    let home = tempfile::tempdir().unwrap();
    let out = offline_json_run(
        home.path(),
        "backtest a 20/50 SMA crossover on AAPL from 2005 to 2012",
    )
    .await;
    let evs = events(&out.stdout);
    let finished = evs
        .iter()
        .find(|e| e["type"] == "tool_call_finished")
        .expect("the backtest ran");
    assert_eq!(
        (finished["tool"].as_str(), finished["status"].as_str()),
        (Some("backtest"), Some("ok")),
        "{finished}"
    );
    let answer = evs.iter().find(|e| e["type"] == "answer").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    for metric in ["total return", "Sharpe", "max drawdown", "trades"] {
        assert!(answer.contains(metric), "{metric} missing: {answer}");
    }
    assert!(
        !answer.contains("| total return | n/a |"),
        "real numbers: {answer}"
    );
    let run_dir = run_dir_of(&evs);
    let metrics =
        std::fs::read_to_string(run_dir.join("artifacts/metrics.csv")).expect("metrics.csv");
    assert!(metrics.contains("sharpe"));
    assert!(
        run_dir.join("artifacts/equity.csv").exists()
            && run_dir.join("artifacts/trades.csv").exists()
    );
    let svg = std::fs::read_to_string(run_dir.join("artifacts/equity_chart.svg")).expect("a chart");
    assert!(svg.starts_with("<svg") || svg.contains("<svg"));
    let card: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run_card.json")).unwrap())
            .unwrap();
    assert!(card.to_string().contains("config_hash"));
}

/// `tool_call_finished` carries the tool's typed output next to the
/// preview: the backtest's run directory and its metrics as data, the same
/// result the preview's text begins.
#[tokio::test]
async fn tool_call_finished_carries_the_structured_output() {
    let home = tempfile::tempdir().unwrap();
    let out = offline_json_run(
        home.path(),
        "backtest a 10/30 SMA crossover on MSFT in 2010",
    )
    .await;
    let evs = events(&out.stdout);
    let finished = evs
        .iter()
        .find(|e| e["type"] == "tool_call_finished")
        .expect("the backtest ran");
    assert_eq!(finished["status"], "ok", "{finished}");
    let output = &finished["output"];
    assert_eq!(output["status"], "ok", "{finished}");
    let run_dir = PathBuf::from(output["run_dir"].as_str().expect("a run_dir"));
    assert!(run_dir.is_absolute() && run_dir.join("config.json").is_file());
    assert!(
        run_dir.starts_with(run_dir_of(&evs)),
        "{}",
        run_dir.display()
    );
    assert!(output["metrics"]["sharpe"].is_number(), "{output}");
    assert!(output["metrics"]["trade_count"].is_number(), "{output}");
    // The preview is the head of the same result, as text.
    let preview = finished["preview"].as_str().unwrap();
    let text = output.to_string();
    assert!(
        !preview.is_empty() && text.starts_with(preview),
        "{preview}\n{text}"
    );
    // A call that failed before answering has no output.
    let out = vibedesk(home.path())
        .args(["run", "--json", "-p", "show the prices of ZZZZ"])
        .output()
        .await
        .unwrap();
    let evs = events(&out.stdout);
    let failed = evs
        .iter()
        .find(|e| e["type"] == "tool_call_finished")
        .expect("the data tool ran");
    assert_eq!(failed["status"], "error", "{failed}");
    assert!(failed.get("output").is_none(), "{failed}");
}

/// Memory across sessions with no model: saved in one run, recalled by the
/// tool in another, and recalled into the next turn's context.
#[tokio::test]
async fn the_offline_planner_remembers_across_sessions() {
    let home = tempfile::tempdir().unwrap();
    let out = vibedesk(home.path())
        // A memory write needs the user's approval (docs §2.14.2).
        .args([
            "run",
            "--yes",
            "-p",
            "Remember that I prefer 10 bp fees on US equities",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Saved"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Entries sit in category folders (the default preset has the
    // hierarchy on): count the markdown files at any depth.
    fn md_files(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| {
                let p = e.path();
                if p.is_dir() {
                    md_files(&p)
                } else {
                    usize::from(p.extension().is_some_and(|x| x == "md"))
                }
            })
            .sum()
    }
    let entries = md_files(&home.path().join("data/memory/entries"));
    assert_eq!(entries, 1, "one memory file on disk");

    let out = vibedesk(home.path())
        .args(["run", "--json", "-p", "what do you remember about fees?"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let evs = events(&out.stdout);
    let answer = evs.iter().find(|e| e["type"] == "answer").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(answer.contains("10 bp fees"), "{answer}");
    // The new session's first message carried the recalled memory too.
    let sid = evs[0]["session_id"].as_str().unwrap();
    let trace = std::fs::read_to_string(
        home.path()
            .join("data/sessions")
            .join(sid)
            .join("trace.jsonl"),
    )
    .unwrap();
    assert!(trace.contains("fees"));
}

/// What `run` shows of a tool call (issue 16 item 4): the call's own words
/// as written, in text mode (stderr) and `--json` alike, with secrets (a
/// token inside them, `api_key`, `password`) masked; the trace on disk keeps
/// the spec's redaction, which hides `content` too.
#[tokio::test]
async fn run_shows_a_calls_own_words_and_masks_its_secrets() {
    let home = tempfile::tempdir().unwrap();
    let token = format!("sk-{}", "Q".repeat(24));
    let script = write_script(
        home.path(),
        "note.json",
        json!([
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {
                "path": "prefs.md",
                "content": format!("I prefer 10 bp fees; key {token}"),
                "api_key": "k-live-1",
                "password": "hunter2",
            }}]},
            {"text": "Noted."}
        ]),
    );
    let secrets = [token.as_str(), "k-live-1", "hunter2"];
    let run = |json_mode: bool| {
        let mut c = vibedesk(home.path());
        c.arg("run");
        if json_mode {
            c.arg("--json");
        }
        // The write is the point here, not its approval (docs §2.12).
        c.args([
            "--yes",
            "-p",
            "note my fees",
            "--script",
            script.to_str().unwrap(),
        ]);
        c
    };

    let out = run(false).output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let shown = stderr
        .lines()
        .find(|l| l.contains("→ write_file"))
        .unwrap_or_else(|| panic!("{stderr}"));
    for part in [
        r#""content":"I prefer 10 bp fees; key [redacted]""#,
        r#""api_key":"[redacted]""#,
        r#""password":"[redacted]""#,
    ] {
        assert!(shown.contains(part), "{part} not in {shown}");
    }
    for secret in secrets {
        assert!(!stderr.contains(secret), "{secret} on stderr: {stderr}");
    }

    let out = run(true).output().await.unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    for secret in secrets {
        assert!(!stdout.contains(secret), "{secret} in --json: {stdout}");
    }
    let evs = events(&out.stdout);
    let started = evs
        .iter()
        .find(|e| e["type"] == "tool_call_started")
        .unwrap();
    assert_eq!(
        started["args"]["content"],
        "I prefer 10 bp fees; key [redacted]"
    );
    assert_eq!(started["args"]["password"], "[redacted]");

    let sid = evs[0]["session_id"].as_str().unwrap();
    let trace = read_trace(&home.path().join("data/sessions").join(sid), None).unwrap();
    let call = trace
        .records
        .iter()
        .find(|r| r["type"] == "tool_call")
        .unwrap();
    assert_eq!(call["args"]["content"], "[redacted]");
    assert_eq!(call["args"]["api_key"], "[redacted]");
    assert_eq!(call["args"]["path"], "prefs.md");
}

/// A run a crash left `running` (planted: a pid that cannot exist, a start
/// time that cannot match) is marked interrupted by `sessions` and `trace`
/// as by `run`, and each says so in one line on stderr; `sessions` also
/// names a session it had to skip.
#[tokio::test]
async fn sessions_and_trace_reconcile_a_run_left_running() {
    let home = tempfile::tempdir().unwrap();
    let sid = hello_session(home.path()).await;
    let plant = |run_id: &str| {
        let dir = home.path().join("data/runs").join(run_id);
        std::fs::create_dir_all(&dir).unwrap();
        // Above any pid_max, so never alive; the start time never matches.
        let state =
            json!({"status": "running", "session_id": sid, "pid": 4_194_400u32, "pid_start": 1});
        std::fs::write(dir.join("state.json"), state.to_string()).unwrap();
        dir
    };
    let bad = home.path().join("data/sessions/damaged");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("session.json"), "{not json").unwrap();

    let stale = plant("20260101_000000_aaaaaa");
    let out = vibedesk(home.path())
        .arg("sessions")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("1 run(s) left running by an earlier crash were marked interrupted (first: run 20260101_000000_aaaaaa"),
        "{stderr}"
    );
    assert!(
        stderr.contains("skipped 1 session(s) whose session.json cannot be read")
            && stderr.contains("damaged/session.json"),
        "{stderr}"
    );
    assert_eq!(
        read_json(&stale.join("state.json"))["status"],
        "interrupted"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let row = stdout.lines().find(|l| l.starts_with(&sid)).unwrap();
    assert!(row.contains("interrupted"), "{stdout}");
    // Once reconciled, nothing more to say about it.
    let out = vibedesk(home.path())
        .arg("sessions")
        .output()
        .await
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("marked interrupted"));

    let stale = plant("20260101_000001_bbbbbb");
    let out = vibedesk(home.path())
        .args(["trace", &sid])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("1 run(s) left running by an earlier crash were marked interrupted (first: run 20260101_000001_bbbbbb"),
        "{stderr}"
    );
    assert_eq!(
        read_json(&stale.join("state.json"))["status"],
        "interrupted"
    );
    let ends: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["type"] == "end" && r["status"] == "interrupted")
        .collect();
    assert_eq!(
        ends.len(),
        2,
        "both planted runs ended in the trace it printed"
    );
    assert_eq!(ends[1]["run_id"], "20260101_000001_bbbbbb");
}

/// Unreadable lines of a session's message log (issue 16 item 6) are said
/// once on stderr when `run --session` resumes it, and in `--json` as a
/// notice right after `run_started`; `trace` names the file it skipped in.
#[tokio::test]
async fn skipped_log_lines_are_reported_when_a_session_is_resumed() {
    let home = tempfile::tempdir().unwrap();
    let sid = hello_session(home.path()).await;
    let sdir = home.path().join("data/sessions").join(&sid);
    for file in ["messages.jsonl", "trace.jsonl"] {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(sdir.join(file))
            .unwrap();
        std::io::Write::write_all(&mut f, b"{torn line\n").unwrap();
    }

    let out = vibedesk(home.path())
        .args(["run", "--session", &sid, "-p", "hello again"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let notices: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("unreadable line(s) of the session's message log"))
        .collect();
    assert_eq!(notices.len(), 1, "{stderr}");
    assert!(
        notices[0].contains("1 unreadable line(s)") && notices[0].contains("messages.jsonl"),
        "{stderr}"
    );

    let out = vibedesk(home.path())
        .args(["run", "--json", "--session", &sid, "-p", "hello again"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let evs = events(&out.stdout);
    assert_eq!(evs[0]["type"], "run_started", "run_started stays first");
    assert_eq!(evs[1]["type"], "notice");
    assert_eq!(evs[1]["level"], "warning");
    assert!(
        evs[1]["message"]
            .as_str()
            .unwrap()
            .contains("messages.jsonl")
    );

    let out = vibedesk(home.path())
        .args(["trace", &sid])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("skipped 1 unreadable line(s) of") && stderr.contains("trace.jsonl"),
        "{stderr}"
    );
}

/// Memory frontmatter with unreadable values (issue 16 item 6): `memory
/// list`, `show` and `search` say so in one line on stderr (count, the
/// first example naming its field, the folder), stdout stays clean.
#[tokio::test]
async fn memory_commands_report_unreadable_frontmatter() {
    let home = tempfile::tempdir().unwrap();
    let entries = home.path().join("data/memory/entries");
    std::fs::create_dir_all(&entries).unwrap();
    std::fs::write(
        entries.join("project_bogus.md"),
        "---\nname: Bogus fees\ntype: : : bogus\n---\nUse ten basis points of fees.\n",
    )
    .unwrap();
    let expect = "1 memory file(s) have problems, e.g. ";
    for args in [
        vec!["memory", "list", "--json"],
        vec!["memory", "show", "Bogus fees"],
        vec!["memory", "search", "fees"],
    ] {
        let out = vibedesk(home.path()).args(&args).output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {stderr}");
        let line = stderr
            .lines()
            .find(|l| l.contains(expect))
            .unwrap_or_else(|| panic!("{args:?}: {stderr}"));
        assert!(
            line.contains("type ': : bogus' is not one of user, feedback, project, reference")
                && line.contains("data/memory/entries"),
            "{args:?}: {line}"
        );
        assert!(!String::from_utf8_lossy(&out.stdout).contains(expect));
        if args[1] == "list" {
            let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(rows[0]["title"], "Bogus fees", "the entry still loads");
        }
    }
}

#[tokio::test]
async fn a_failed_run_exits_non_zero_with_a_one_line_reason() {
    let home = tempfile::tempdir().unwrap();
    let script = write_script(
        home.path(),
        "s.json",
        json!([{"error": {"kind": "http", "status": 403, "message": "model access denied"}}]),
    );
    let out = vibedesk(home.path())
        .args(["run", "-p", "hi", "--script", script.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("vibedesk: run failed:"))
        .expect("reason line");
    assert!(line.contains("model access denied"), "{line}");
}

#[tokio::test]
async fn doctor_masks_the_key_and_checks_the_server() {
    let home = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![json_reply(
        200,
        &json!({"object": "list", "data": [{"id": "m1"}, {"id": "m2"}]}),
    )])
    .await;
    let secret = "sk-doctor-secret-998877665544";
    let out = vibedesk(home.path())
        .env("VIBEDESK_BASE_URL", server.base_url())
        .env("VIBEDESK_MODEL", "m1")
        .env("VIBEDESK_API_KEY", secret)
        .arg("doctor")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !stdout.contains(secret) && !stdout.contains("998877"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "set ({} chars, from VIBEDESK_API_KEY)",
            secret.len()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("check         ok: the server answered with 2 model(s)"),
        "{stdout}"
    );
    assert_eq!(server.requests()[0].path, "/v1/models");
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some(&*format!("Bearer {secret}"))
    );
}

/// A timeout out of its range (docs §1.1: 0 for off, else up to a week)
/// stops `doctor` and `run` with exit 2, naming the key, its line and the
/// range. Before, 1e20 panicked (exit 101) and −5, NaN or inf were taken
/// as "off".
#[tokio::test]
async fn an_agent_timeout_out_of_range_stops_doctor_and_run_naming_key_and_line() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("config");
    std::fs::create_dir_all(&dir).unwrap();
    for (key, value, shown) in [
        ("tool_timeout_seconds", "1e20", "1e20"),
        ("llm_timeout_seconds", "-5", "-5.0"),
        ("stall_timeout_seconds", "nan", "NaN"),
        ("tool_timeout_seconds", "inf", "inf"),
    ] {
        let text = format!("# a comment\n\n[agent]\nmax_iterations = 5\n{key} = {value}\n");
        std::fs::write(dir.join("config.toml"), text).unwrap();
        for args in [&["doctor"][..], &["run", "--json", "-p", "hello"][..]] {
            let out = vibedesk(home.path()).args(args).output().await.unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?} {value}: {stderr}");
            let expected = format!(
                "line 5: `[agent] {key}` = {shown} is out of range: \
                 must be 0 (off) or from 0.001 to 604800 seconds"
            );
            assert!(stderr.contains(&expected), "{args:?}: {stderr}");
            assert!(stderr.contains("config.toml"), "{stderr}");
        }
    }
    // 0 still means off, and the environment is checked the same way.
    std::fs::write(
        dir.join("config.toml"),
        "[agent]\ntool_timeout_seconds = 0\n",
    )
    .unwrap();
    let out = vibedesk(home.path()).arg("doctor").output().await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = vibedesk(home.path())
        .env("VIBEDESK_TOOL_TIMEOUT_SECONDS", "1e300")
        .arg("doctor")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("VIBEDESK_TOOL_TIMEOUT_SECONDS") && stderr.contains("604800"),
        "{stderr}"
    );
}

/// `doctor` exits 0 whenever the configuration is valid, with no model
/// (the offline planner, a supported mode) as with one; 2 for an invalid
/// configuration; 1 when the configured model cannot be used. Before, it
/// exited 2 with no model configured.
#[tokio::test]
async fn doctor_exits_0_for_any_valid_configuration_offline_included() {
    let config = |home: &Path, text: &str| {
        let dir = home.join("config");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), text).unwrap();
    };
    let doctor = |home: &Path, offline: bool| {
        let mut c = vibedesk(home);
        c.arg("doctor");
        if offline {
            c.arg("--offline");
        }
        c.output()
    };
    // No config at all, then a valid one without a model.
    let home = tempfile::tempdir().unwrap();
    for offline in [false, true] {
        let out = doctor(home.path(), offline).await.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}");
        assert!(
            stdout.contains("provider      (none: the offline planner answers"),
            "{stdout}"
        );
    }
    config(home.path(), "[agent]\nmax_iterations = 12\n");
    let out = doctor(home.path(), false).await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Invalid: config.toml does not parse, or an MCP entry is wrong.
    let bad = tempfile::tempdir().unwrap();
    config(bad.path(), "model = [\n");
    let out = doctor(bad.path(), false).await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    config(
        bad.path(),
        "[mcp_servers.x]\ncommand = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\n",
    );
    let out = doctor(bad.path(), false).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("mcp servers   FAIL") && stdout.contains("not both"),
        "{stdout}"
    );

    // A configured model that cannot be used: no key.
    let keyless = tempfile::tempdir().unwrap();
    config(keyless.path(), "provider = \"openai\"\n");
    let out = doctor(keyless.path(), false).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("check         FAIL") && stdout.contains("OPENAI_API_KEY"),
        "{stdout}"
    );
}

/// config.toml is read and validated once; a section only some commands use
/// (`[mcp_servers]`, `[tui]`, `[engines.ray]`) keeps its error for those
/// commands, the doctor reports every one, and the rest still work.
#[tokio::test]
async fn a_bad_config_section_stops_only_the_commands_that_use_it() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("config");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        "[mcp_servers.t]\ncomand = \"x\"\n[tui.keys]\nno_such_action = \"f2\"\n\
         [engines.ray]\nadress = \"http://127.0.0.1:1\"\n",
    )
    .unwrap();
    let spec = home.path().join("spec.json");
    let v = json!({
        "base": {"codes": ["AAPL"], "start_date": "2005-01-01", "end_date": "2006-12-31",
                 "strategy": {"name": "sma_crossover", "params": {"fast": 10, "slow": 50}}},
        "axes": {"strategy.params.fast": [5, 10]}
    });
    std::fs::write(&spec, v.to_string()).unwrap();
    let run = |args: Vec<String>| {
        let home = home.path().to_path_buf();
        async move {
            let out = vibedesk(&home).args(&args).output().await.unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            (out.status.code(), text)
        }
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (spec_s, out) = (
        spec.to_str().unwrap(),
        home.path().join("r.csv").display().to_string(),
    );

    // Commands that use none of them run.
    let (code, text) = run(args(&["sessions"])).await;
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = run(args(&["sweep", "run", spec_s, "--out", &out])).await;
    assert_eq!(code, Some(0), "{text}");
    assert!(std::path::Path::new(&out).exists());

    // Those that do stop with a usage error naming the section's problem.
    for (a, needles) in [
        (args(&["mcp", "list"]), ["[mcp_servers.t]", "comand"]),
        (
            args(&[
                "sweep",
                "run",
                spec_s,
                "--out",
                &out,
                "--engine",
                "ray",
                "--address",
                "http://127.0.0.1:1",
            ]),
            ["[engines.ray]", "adress"],
        ),
    ] {
        let (code, text) = run(a.clone()).await;
        assert_eq!(code, Some(2), "{a:?}: {text}");
        assert!(needles.iter().all(|n| text.contains(n)), "{a:?}: {text}");
        assert!(text.contains("config.toml"), "{a:?}: {text}");
    }

    // The doctor reports all three.
    let (code, text) = run(args(&["doctor", "--offline"])).await;
    assert_eq!(code, Some(2), "{text}");
    for needle in [
        "mcp servers   FAIL",
        "comand",
        "workstation   FAIL",
        "no_such_action",
        "ray engine    FAIL",
        "adress",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
}

/// As root, the doctor says whether the sandbox user can reach the data dir
/// and, when it cannot, how to keep the privilege drop.
#[tokio::test]
async fn doctor_says_how_to_keep_the_privilege_drop() {
    use std::os::unix::fs::PermissionsExt;
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: the privilege drop needs root");
        return;
    }
    let sandbox_line = |stdout: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with("sandbox"))
            .unwrap_or_default()
            .to_string()
    };
    // A 0700 home, as /root is: the sandbox user cannot enter.
    let private = tempfile::tempdir().unwrap();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = vibedesk(private.path())
        .arg("doctor")
        .output()
        .await
        .unwrap();
    let line = sandbox_line(&String::from_utf8_lossy(&out.stdout));
    assert!(
        line.contains("user=root")
            && line.contains("cannot reach")
            && line.contains("VIBEDESK_HOME"),
        "{line}"
    );
    let open = tempfile::tempdir().unwrap();
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = vibedesk(open.path()).arg("doctor").output().await.unwrap();
    let line = sandbox_line(&String::from_utf8_lossy(&out.stdout));
    assert!(
        !line.contains("user=root") && !line.contains("cannot reach"),
        "{line}"
    );
    assert!(line.contains("rlimits=on "), "{line}");
    // As root every job gets a PID namespace; the variable turns it off.
    assert!(line.contains(" pidns=on "), "{line}");
    let out = vibedesk(open.path())
        .env("VIBEDESK_SANDBOX_PIDNS", "0")
        .arg("doctor")
        .output()
        .await
        .unwrap();
    let line = sandbox_line(&String::from_utf8_lossy(&out.stdout));
    assert!(
        line.contains(" pidns=off ") && line.contains("PID namespace disabled"),
        "{line}"
    );
}

/// Reads JSON event lines from a running child until `pred` matches one.
async fn wait_for_event(child: &mut Child, lines: &mut Vec<Value>, pred: impl Fn(&Value) -> bool) {
    let stdout = child.stdout.as_mut().expect("piped stdout");
    let mut reader = BufReader::new(stdout);
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).await.unwrap() == 0 {
                return false;
            }
            let v: Value = serde_json::from_str(line.trim()).unwrap();
            let hit = pred(&v);
            lines.push(v);
            if hit {
                return true;
            }
        }
    })
    .await
    .expect("the event never came");
    assert!(found, "stdout closed before the event came: {lines:?}");
}

#[tokio::test]
async fn ctrl_c_cancels_the_run_cleanly() {
    let home = tempfile::tempdir().unwrap();
    let script = write_script(
        home.path(),
        "s.json",
        json!([{"text": "Thinking about it", "hang": true}]),
    );
    let mut child = vibedesk(home.path())
        .args([
            "run",
            "--json",
            "-p",
            "hi",
            "--script",
            script.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    wait_for_event(&mut child, &mut seen, |e| e["type"] == "text_delta").await;
    let pid = child.id().unwrap().to_string();
    let kill = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(130));
    let rest = events(&out.stdout);
    let finished = rest
        .iter()
        .find(|e| e["type"] == "run_finished")
        .expect("run_finished after cancel");
    assert_eq!(finished["status"], "cancelled");
    assert_eq!(finished["reason"], "cancelled by user");
    let state = read_json(&run_dir_of(&seen).join("state.json"));
    assert_eq!(state["status"], "cancelled");
}

#[tokio::test]
async fn a_killed_run_is_reconciled_as_interrupted_and_nothing_is_lost() {
    let home = tempfile::tempdir().unwrap();
    let slow = write_script(
        home.path(),
        "slow.json",
        json!([
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "draft.md", "content": "first draft"}}]},
            {"chunks": [{"text": "Partial findings: AAPL "}, {"text": "rose."}, {"delay_ms": 600000}, {"text": " never"}]}
        ]),
    );
    let mut child = vibedesk(home.path())
        .args([
            "run",
            "--json",
            "-p",
            "research AAPL",
            "--script",
            slow.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    wait_for_event(&mut child, &mut seen, |e| {
        e["type"] == "text_delta" && e["delta"] == "rose."
    })
    .await;
    let run_dir = run_dir_of(&seen);
    let sid = seen[0]["session_id"].as_str().unwrap().to_string();
    // Wait until the streamed text is checkpointed, then kill -9.
    let partial = run_dir.join("partial_response.json");
    for _ in 0..200 {
        if std::fs::read_to_string(&partial).is_ok_and(|t| t.contains("rose.")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    assert_eq!(
        read_json(&run_dir.join("state.json"))["status"],
        "running",
        "the crash left it running"
    );

    let quick = write_script(
        home.path(),
        "quick.json",
        json!([{"text": "Picking up again."}]),
    );
    let out = vibedesk(home.path())
        .args([
            "run",
            "--session",
            &sid,
            "-p",
            "continue",
            "--script",
            quick.to_str().unwrap(),
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted"));

    let state = read_json(&run_dir.join("state.json"));
    assert_eq!(state["status"], "interrupted");
    assert!(
        state["reason"]
            .as_str()
            .unwrap()
            .contains("ended without finishing")
    );
    let sdir = home.path().join("data/sessions").join(&sid);
    let trace = read_trace(&sdir, None).unwrap();
    assert_eq!(trace.skipped_lines, 0, "the trace is readable");
    assert!(
        trace
            .records
            .iter()
            .any(|r| r["type"] == "end" && r["status"] == "interrupted")
    );
    let msgs = MessageLog::read(&sdir).unwrap();
    assert!(msgs.skipped_lines.is_empty());
    let texts: Vec<(String, String)> = msgs
        .messages
        .iter()
        .map(|m| {
            (
                m.message.role.as_str().to_string(),
                m.message.content.clone(),
            )
        })
        .collect();
    assert_eq!(texts[0], ("user".into(), "research AAPL".into()));
    assert_eq!(texts[1].0, "assistant");
    assert_eq!(msgs.messages[1].message.tool_calls[0].id, "w1");
    assert_eq!(texts[2].0, "tool");
    let interrupted = &msgs.messages[3];
    assert_eq!(interrupted.status.as_deref(), Some("interrupted"));
    assert!(
        interrupted
            .message
            .content
            .starts_with("Partial findings: AAPL rose."),
        "{}",
        interrupted.message.content
    );
    assert_eq!(texts[4], ("user".into(), "continue".into()));
    assert_eq!(texts[5], ("assistant".into(), "Picking up again.".into()));
    assert!(!partial.exists(), "the checkpoint is cleaned up");
}

/// Live processes whose command line is exactly `sleep <marker>`.
fn sleepers(marker: &str) -> Vec<u32> {
    let want = format!("sleep\0{marker}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want.as_bytes())
                && vibedesk::process::process_is_alive(*pid, None)
        })
        .collect()
}

/// Nothing a sandboxed job starts outlives vibedesk: SIGKILL of `vibedesk
/// run` while `bash` runs a foreground sleep, a background one and one
/// detached into a session of its own leaves none of them within a second.
#[tokio::test]
async fn sigkill_of_vibedesk_leaves_no_sandboxed_process_behind() {
    let home = tempfile::tempdir().unwrap();
    let marker = format!("47.{}", std::process::id());
    let command = format!("(setsid sleep {marker} &); sleep {marker} & sleep {marker}; echo late");
    let script = write_script(
        home.path(),
        "sleepy.json",
        json!([
            {"tool_calls": [{"id": "b1", "name": "bash", "arguments": {"command": command}}]},
            {"text": "never reached"}
        ]),
    );
    let mut child = vibedesk(home.path())
        .args([
            "run",
            "--json",
            "--yes",
            "-p",
            "wait",
            "--script",
            script.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut started = Vec::new();
    for _ in 0..1000 {
        started = sleepers(&marker);
        if started.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(started.len(), 3, "the job's three sleeps never all ran");
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let mut left = started.clone();
    for _ in 0..50 {
        left = sleepers(&marker);
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        left.is_empty(),
        "survivors of the SIGKILL: {left:?} (of {started:?})"
    );
}

/// A restart kills a job group that a crashed vibedesk recorded and left
/// running (as where no PID namespace can be made), and says so.
#[tokio::test]
async fn a_restart_kills_a_recorded_survivor() {
    use vibedesk::sandbox::jobs::{JobFile, JobRecord};
    let home = tempfile::tempdir().unwrap();
    let marker = format!("48.{}", std::process::id());
    let mut survivor = std::process::Command::new("setsid")
        .args(["sleep", &marker])
        .spawn()
        .unwrap();
    let pid = survivor.id();
    for _ in 0..200 {
        if vibedesk::process::stat_of(pid).is_some_and(|s| s.pgrp == pid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let mut rec = JobRecord::for_group(pid, "bash".into(), home.path().into());
    rec.owner_pid = gone.id();
    std::mem::forget(JobFile::write(&home.path().join("state/jobs"), &rec));

    let quick = write_script(home.path(), "quick.json", json!([{"text": "ok"}]));
    let out = vibedesk(home.path())
        .args(["run", "-p", "hello", "--script", quick.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("killed 1 sandbox job(s) left running by an earlier crash"),
        "{stderr}"
    );
    let status = tokio::task::spawn_blocking(move || survivor.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert_eq!(
        std::fs::read_dir(home.path().join("state/jobs"))
            .unwrap()
            .count(),
        0,
        "the record is removed"
    );
}

#[tokio::test]
async fn an_oversized_prompt_on_stdin_is_refused_before_anything_is_written() {
    let home = tempfile::tempdir().unwrap();
    let limit = 1024 * 1024;
    // A file on stdin: refused by its size, without being read.
    let big = home.path().join("big.txt");
    std::fs::write(&big, "a".repeat(8 * limit)).unwrap();
    let out = vibedesk(home.path())
        .args(["run", "-p", "-"])
        .stdin(std::fs::File::open(&big).unwrap())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "bad input");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the message is 8.0 MiB (8388608 bytes)")
            && err.contains("at most 1.0 MiB (1048576 bytes)")
            && err.contains("max_message_bytes"),
        "{err}"
    );
    let sessions = home.path().join("data").join("sessions");
    assert!(
        err.contains(&format!("{}/<session id>/workspace/", sessions.display()))
            && err.contains("read_file"),
        "the remedy names the workspace and the tool: {err}"
    );
    assert!(out.stdout.is_empty());

    // A pipe: reading stops just past the limit; the writer sees the pipe close.
    let mut child = vibedesk(home.path())
        .args(["run", "-p", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let chunk = vec![b'b'; 64 * 1024];
        let mut written = 0usize;
        while written < 50 * limit {
            if stdin.write_all(&chunk).await.is_err() {
                break;
            }
            written += chunk.len();
        }
        written
    });
    let out = child.wait_with_output().await.unwrap();
    let written = writer.await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("larger than 1.0 MiB (1048576 bytes)") && err.contains("workspace"),
        "{err}"
    );
    assert!(
        written < 50 * limit,
        "the refusal did not wait for all 50 MiB ({written} bytes written)"
    );

    // Refused before any session or run exists.
    assert!(files_under(&sessions).is_empty());
    assert!(files_under(&home.path().join("data").join("runs")).is_empty());
}

/// `vibedesk run --json -p - < file`, which must exit `code`; the events.
async fn run_prompt_file(home: &Path, prompt: &str, env: &[(&str, &str)], code: u8) -> Vec<Value> {
    let file = home.join("prompt.txt");
    std::fs::write(&file, prompt).unwrap();
    let out = vibedesk(home)
        .args(["run", "--json", "-p", "-"])
        .envs(env.iter().copied())
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .await
        .unwrap();
    std::fs::remove_file(&file).unwrap();
    assert_eq!(
        out.status.code(),
        Some(i32::from(code)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    events(&out.stdout)
}

#[tokio::test]
async fn a_prompt_at_the_limit_is_accepted_and_the_planner_answers_it() {
    let home = tempfile::tempdir().unwrap();
    let limit = 1024 * 1024;
    let head = "What is the meaning of life?\n";
    let prompt = format!("{head}{}", "z".repeat(limit - head.len()));
    assert_eq!(prompt.len(), limit);
    // The planner cannot answer it: the run ends `unsupported` (docs §1.4).
    let evs = run_prompt_file(home.path(), &prompt, &[], vibedesk::cli::exit::UNSUPPORTED).await;
    // The prompt is far over the compaction threshold: the context is
    // summarised before the first call, and the planner still answers the
    // user's own request, not the summary.
    assert!(
        evs.iter().any(|e| e["type"] == "compaction_finished"),
        "the context was compacted: {:?}",
        evs.iter().map(|e| e["type"].clone()).collect::<Vec<_>>()
    );
    let answer: String = evs
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert!(
        answer.contains("can't answer \"What is the meaning of life?"),
        "the planner answers the user's own request: {answer}"
    );
}

#[tokio::test]
async fn a_large_prompt_is_stored_once_and_read_back_whole() {
    let home = tempfile::tempdir().unwrap();
    let size = 512 * 1024;
    let prompt = format!(
        "show MSFT's last 30 days in 2010\n{}",
        "note ".repeat(size / 5)
    );
    // No compaction here: its transcript is a snapshot of its own.
    let evs = run_prompt_file(
        home.path(),
        &prompt,
        &[("VIBEDESK_TOKEN_THRESHOLD", "100000000")],
        vibedesk::cli::exit::OK,
    )
    .await;

    // Everything the run wrote: about one copy of the prompt.
    let data = home.path().join("data");
    let written: Vec<(PathBuf, u64)> = files_under(&data.join("sessions"))
        .into_iter()
        .chain(files_under(&data.join("runs")))
        .collect();
    let total: u64 = written.iter().map(|(_, n)| n).sum();
    assert!(
        total < prompt.len() as u64 * 11 / 10,
        "{total} bytes on disk for a {}-byte prompt: {written:#?}",
        prompt.len()
    );

    // The readers still see the whole prompt.
    let sid = evs.iter().find(|e| e["type"] == "run_started").unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let sdir = data.join("sessions").join(&sid);
    let msgs = MessageLog::read(&sdir).unwrap().messages;
    assert_eq!(msgs[0].message.content, prompt);
    let t = read_trace(&sdir, Some(&["prompt", "content"])).unwrap();
    let start = t.records.iter().find(|r| r["type"] == "start").unwrap();
    assert_eq!(start["prompt"].as_str(), Some(prompt.as_str()));
    assert_eq!(start["prompt_ref"]["in"], "messages.jsonl");
    let user = t
        .records
        .iter()
        .find(|r| r["type"] == "message" && r["role"] == "user")
        .unwrap();
    assert_eq!(user["content"].as_str(), Some(prompt.as_str()));
    let req = read_json(&run_dir_of(&evs).join("req.json"));
    assert_eq!(req["prompt_ref"]["bytes"], prompt.len());
    assert_eq!(req["prompt_ref"]["in"], "messages.jsonl");
    assert_eq!(req["context"]["session_id"], sid.as_str());
    assert!(
        prompt.starts_with(req["prompt"].as_str().unwrap())
            && req["prompt"].as_str().unwrap().len() == 4096,
        "req.json keeps a prefix"
    );
    // `vibedesk trace --resolve` shows the whole prompt too.
    let out = vibedesk(home.path())
        .args(["trace", &sid, "--resolve"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let records = events(&out.stdout);
    let start = records.iter().find(|r| r["type"] == "start").unwrap();
    assert_eq!(start["prompt"].as_str().map(str::len), Some(prompt.len()));
}

#[tokio::test]
async fn a_prompt_argument_over_the_configured_limit_is_refused_naming_the_session_workspace() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("config")).unwrap();
    std::fs::write(
        home.path().join("config").join("config.toml"),
        "[agent]\nmax_message_bytes = 2048\n",
    )
    .unwrap();
    // A session to continue.
    let out = vibedesk(home.path())
        .args(["run", "--json", "-p", "hello"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let evs = events(&out.stdout);
    let sid = evs.iter().find(|e| e["type"] == "run_started").unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let sdir = home.path().join("data").join("sessions").join(&sid);
    let before = files_under(&home.path().join("data"));

    let at_limit = "a".repeat(2048);
    let over = "a".repeat(2049);
    let out = vibedesk(home.path())
        .args(["run", "--session", &sid, "-p", &over])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("(2049 bytes)")
            && err.contains("at most 2.0 KiB (2048 bytes)")
            && err.contains(&sdir.join("workspace").display().to_string()),
        "{err}"
    );
    assert_eq!(
        files_under(&home.path().join("data")),
        before,
        "nothing written"
    );

    let out = vibedesk(home.path())
        .args(["run", "--session", &sid, "-p", &at_limit])
        .output()
        .await
        .unwrap();
    // Accepted and answered; the planner cannot serve "aaa…" (docs §1.4).
    assert_eq!(
        out.status.code(),
        Some(i32::from(vibedesk::cli::exit::UNSUPPORTED)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--demo` shows what the README says it shows, as events: a parallel
/// batch of read-only calls, serial writes, a slow call with heartbeats,
/// progress by stage, a command stopped at its timeout, and the context
/// passing L1, L2 and L3 with each compaction firing. A later message of
/// the session gets a note that the demo has ended instead of a replay.
#[tokio::test]
async fn the_demo_shows_batches_heartbeats_a_timeout_and_every_compaction_gate() {
    let home = tempfile::tempdir().unwrap();
    let events = |out: &std::process::Output, code: i32| -> Vec<Value> {
        assert_eq!(
            out.status.code(),
            Some(code),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let out = vibedesk(home.path())
        .args(["run", "--demo", "--json"])
        .output()
        .await
        .unwrap();
    // Its command stopped at the timeout is a failed call: partial, exit 3.
    let all = events(&out, 3);
    let of = |kind: &str| -> Vec<&Value> { all.iter().filter(|e| e["type"] == kind).collect() };

    let batches = of("tool_batch_started");
    let parallel = batches
        .iter()
        .find(|b| b["mode"] == "parallel")
        .expect("a parallel batch");
    let ids: Vec<&str> = parallel["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["call_id"].as_str().unwrap())
        .collect();
    assert!(ids.len() >= 3, "{parallel}");
    for started in of("tool_call_started") {
        if ids.contains(&started["call_id"].as_str().unwrap()) {
            assert_eq!(started["readonly"], true, "{started}");
        }
    }
    assert!(
        batches
            .iter()
            .any(|b| b["mode"] == "serial" && b["calls"][0]["tool"] == "write_file"),
        "a serial write: {batches:?}"
    );
    assert!(!of("tool_heartbeat").is_empty(), "no heartbeats");
    let stages: Vec<&str> = of("tool_progress")
        .iter()
        .filter(|p| p["tool"] == "backtest")
        .map(|p| p["stage"].as_str().unwrap())
        .collect();
    assert!(
        stages.contains(&"validate") && stages.len() >= 3,
        "{stages:?}"
    );
    let finished = of("tool_call_finished");
    let timed_out = finished
        .iter()
        .find(|f| f["error_code"] == "command_timeout")
        .expect("a call stopped at its timeout");
    assert_eq!(timed_out["status"], "error", "{timed_out}");
    assert!(
        finished.iter().filter(|f| f["status"] == "ok").count() >= 6,
        "{finished:?}"
    );

    // The gauge passes every gate, and each layer runs.
    let gates = of("watermark")[0]["gates"].clone();
    let peak = of("watermark")
        .iter()
        .map(|w| w["tokens"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(peak > gates[2].as_u64().unwrap(), "peak {peak} vs {gates}");
    let compactions = of("compaction_finished");
    for layer in ["microcompact", "collapse", "auto_compact"] {
        assert!(
            compactions.iter().any(|c| c["layer"] == layer),
            "no {layer}: {compactions:?}"
        );
    }
    for layer in ["microcompact", "auto_compact"] {
        assert!(
            compactions.iter().any(|c| c["layer"] == layer
                && c["ineffective"] == false
                && c["tokens_after"].as_u64() < c["tokens_before"].as_u64()),
            "{layer} freed nothing: {compactions:?}"
        );
    }
    let end = of("run_finished")[0];
    assert_eq!(end["status"], "partial", "{end}");
    assert!(
        end["reason"]
            .as_str()
            .unwrap()
            .contains("1 of 10 tool calls failed: bash"),
        "{end}"
    );
    let answer = of("answer")[0]["content"].as_str().unwrap().to_string();
    assert!(answer.contains("## Done"), "{answer}");
    let notes = home
        .path()
        .join("data/sessions")
        .join(all[0]["session_id"].as_str().unwrap())
        .join("workspace/crash-notes.md");
    assert!(notes.exists(), "the serial write wrote {}", notes.display());

    // The same session's next message: the demo says it has ended.
    let sid = all
        .iter()
        .find_map(|e| e["session_id"].as_str())
        .unwrap()
        .to_string();
    let again = vibedesk(home.path())
        .args([
            "run",
            "--demo",
            "--json",
            "--session",
            &sid,
            "-p",
            "and now?",
        ])
        .output()
        .await
        .unwrap();
    let again = events(&again, 0);
    let reply = again
        .iter()
        .find(|e| e["type"] == "answer")
        .expect("an answer");
    assert!(
        reply["content"]
            .as_str()
            .unwrap()
            .starts_with("The scripted demo has ended"),
        "{reply}"
    );
    assert!(!again.iter().any(|e| e["type"] == "tool_batch_started"));
}
