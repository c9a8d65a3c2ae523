//! An honest status (issue 23 item 2, docs §1.4 and §14.4): runs and teams
//! whose tool calls failed end `failed` (exit 1) or `partial` (exit 3), in
//! the events, `state.json`, the trace, `run.json` and `swarm show`, through
//! the real binary: the scripted provider, and the offline planner on a
//! symbol that has no data.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};
use tokio::process::Command;
use vibedesk::store::read_trace;

use crate::support::harness::read_json;

/// A clean environment, and no request leaves the machine: the online data
/// sources go through a proxy on a closed loopback port, so a symbol with
/// no embedded data fails at once.
pub(crate) fn vibedesk(home: &Path) -> Command {
    let mut c = crate::support::harness::vibedesk(home);
    c.env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("HTTP_PROXY", "http://127.0.0.1:9");
    c
}

pub(crate) async fn run(home: &Path, args: &[&str]) -> Output {
    vibedesk(home).args(args).output().await.unwrap()
}

pub(crate) fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

pub(crate) fn last_of<'a>(evs: &'a [Value], kind: &str) -> &'a Value {
    evs.iter()
        .rfind(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {evs:#?}"))
}

fn script(home: &Path, turns: Value) -> String {
    let p = home.join("script.json");
    std::fs::write(&p, turns.to_string()).unwrap();
    p.display().to_string()
}

/// The statuses the run left on disk: its `state.json`, the trace's `end`
/// record and `session.json`'s `last_status`.
fn recorded(home: &Path, evs: &[Value]) -> (Value, Value, Value) {
    let started = last_of(evs, "run_started");
    let run_dir = PathBuf::from(started["run_dir"].as_str().unwrap());
    let session = home
        .join("data/sessions")
        .join(started["session_id"].as_str().unwrap());
    let end = read_trace(&session, None)
        .unwrap()
        .records
        .into_iter()
        .rfind(|r| r["type"] == "end")
        .expect("an end record");
    let meta = read_json(&session.join("session.json"));
    (
        read_json(&run_dir.join("state.json")),
        end,
        meta["last_status"].clone(),
    )
}

/// A scripted model that calls `calls`, then answers.
fn calls_then_answer(calls: Value, answer: &str) -> Value {
    json!([{"text": "Looking.", "tool_calls": calls}, {"text": answer}])
}

#[tokio::test]
async fn a_run_whose_every_tool_call_failed_is_failed_exit_1_with_its_answer() {
    let home = tempfile::tempdir().unwrap();
    let s = script(
        home.path(),
        calls_then_answer(
            json!([{"name": "read_file", "arguments": {"path": "missing.md"}}]),
            "There is no missing.md here.",
        ),
    );
    let out = run(
        home.path(),
        &["run", "-p", "read missing.md", "--script", &s],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("There is no missing.md here."),
        "the answer is kept"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("vibedesk: run failed: "))
        .unwrap_or_else(|| panic!("a reason line: {err}"));
    assert!(
        line.contains("1 of 1 tool call failed: read_file (read missing.md"),
        "{line}"
    );

    let out = run(
        home.path(),
        &["run", "--json", "-p", "read missing.md", "--script", &s],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    let evs = events(&out.stdout);
    let finished = last_of(&evs, "run_finished");
    assert_eq!(finished["status"], "failed");
    let reason = finished["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("1 of 1 tool call failed: read_file ("),
        "{reason}"
    );
    assert_eq!(
        last_of(&evs, "answer")["content"],
        "There is no missing.md here."
    );
    let (state, end, last) = recorded(home.path(), &evs);
    assert_eq!(state["status"], "failed");
    assert_eq!(state["reason"], reason);
    assert_eq!(end["status"], "failed");
    assert_eq!(end["reason"], reason);
    assert_eq!(last, "failed");
}

#[tokio::test]
async fn a_run_where_one_of_two_tool_calls_failed_is_partial_exit_3() {
    let home = tempfile::tempdir().unwrap();
    let s = script(
        home.path(),
        calls_then_answer(
            json!([
                {"name": "list_dir", "arguments": {}},
                {"name": "read_file", "arguments": {"path": "missing.md"}}
            ]),
            "The workspace is empty.",
        ),
    );
    let out = run(
        home.path(),
        &["run", "--json", "-p", "what is here?", "--script", &s],
    )
    .await;
    assert_eq!(out.status.code(), Some(3), "partial has its own exit code");
    let evs = events(&out.stdout);
    let finished = last_of(&evs, "run_finished");
    assert_eq!(finished["status"], "partial");
    let reason = finished["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("1 of 2 tool calls failed: read_file (read missing.md"),
        "{reason}"
    );
    let (state, end, last) = recorded(home.path(), &evs);
    assert_eq!(state["status"], "partial");
    assert_eq!(state["reason"], reason);
    assert_eq!(end["status"], "partial");
    assert_eq!(last, "partial");

    let out = run(home.path(), &["run", "-p", "what is here?", "--script", &s]).await;
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("The workspace is empty."));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines()
            .any(|l| l.starts_with("vibedesk: run partial: 1 of 2 tool calls failed: read_file")),
        "{err}"
    );
}

#[tokio::test]
async fn offline_runs_on_a_symbol_without_data_are_failed_or_partial() {
    let home = tempfile::tempdir().unwrap();
    let out = run(home.path(), &["run", "--json", "-p", "RSI of ZZZZ"]).await;
    assert_eq!(out.status.code(), Some(1));
    let evs = events(&out.stdout);
    let finished = last_of(&evs, "run_finished");
    assert_eq!(finished["status"], "failed");
    let reason = finished["reason"].as_str().unwrap();
    assert!(
        reason.contains("tool call failed: ") && reason.contains("ZZZZ"),
        "{reason}"
    );
    assert!(
        !last_of(&evs, "answer")["content"]
            .as_str()
            .unwrap()
            .is_empty(),
        "the planner's answer is kept"
    );

    // One symbol with data, one without.
    let out = run(
        home.path(),
        &[
            "run",
            "--json",
            "-p",
            "Get the daily prices of AAPL and ZZZZ",
        ],
    )
    .await;
    let evs = events(&out.stdout);
    let outcomes: Vec<(&str, &str)> = evs
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .map(|e| (e["tool"].as_str().unwrap(), e["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        outcomes,
        [("get_market_data", "ok"), ("get_market_data", "error")]
    );
    assert_eq!(out.status.code(), Some(3));
    let finished = last_of(&evs, "run_finished");
    assert_eq!(finished["status"], "partial");
    let reason = finished["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("1 of 2 tool calls failed: get_market_data (")
            && reason.contains("ZZZZ"),
        "{reason}"
    );
}

fn write_preset(home: &Path, name: &str, yaml: &str) {
    let dir = home.join("config/swarm");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.yaml")), yaml).unwrap();
}

/// Two analysts and a decision on `{target}`, answered by the offline
/// planner.
const DESK: &str = "name: desk
title: Small desk
agents:
  - {id: prices, role: Price analyst, tools: [get_market_data], max_iterations: 5, max_retries: 0}
  - {id: rsi, role: Momentum analyst, tools: [technical_indicator], max_iterations: 5, max_retries: 0}
  - {id: judge, role: Portfolio manager, tools: [read_file], max_iterations: 4, max_retries: 0}
tasks:
  - {id: task-prices, agent_id: prices, prompt_template: 'Show the latest daily prices of {target}.'}
  - {id: task-rsi, agent_id: rsi, prompt_template: 'Compute the RSI of {target}.'}
  - id: task-decide
    agent_id: judge
    prompt_template: \"Decide on {target}.\\n{upstream_context}\"
    depends_on: [task-prices, task-rsi]
    input_from: {prices: task-prices, momentum: task-rsi}
variables:
  - {name: target, required: true}
";

#[tokio::test]
async fn an_offline_team_on_an_unknown_target_is_failed_exit_1_and_says_why() {
    let home = tempfile::tempdir().unwrap();
    write_preset(home.path(), "desk", DESK);
    let out = run(
        home.path(),
        &["swarm", "run", "desk", "--var", "target=ZZZZ", "--json"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evs = events(&out.stdout);
    let finished = last_of(&evs, "swarm_finished");
    assert_eq!(finished["status"], "failed");
    let reason = finished["reason"].as_str().unwrap();
    assert!(
        reason.contains("3 of 3 task(s) failed") && reason.contains("task-decide"),
        "{reason}"
    );
    for task in ["task-prices", "task-rsi"] {
        let done = evs
            .iter()
            .find(|e| e["type"] == "swarm_task_finished" && e["task"] == task)
            .unwrap();
        assert_eq!(done["status"], "failed", "{done}");
        assert!(done["reason"].as_str().unwrap().contains("ZZZZ"), "{done}");
        let worker_end = evs
            .iter()
            .find(|e| {
                e["type"] == "swarm_worker"
                    && e["task"] == task
                    && e["event"]["type"] == "run_finished"
            })
            .unwrap();
        assert_eq!(worker_end["event"]["status"], "failed");
    }
    let run_id = evs[0]["run_id"].as_str().unwrap();
    let dir = home.path().join("data/swarm").join(run_id);
    let record = read_json(&dir.join("run.json"));
    assert_eq!(record["status"], "failed");
    // events.jsonl carries the same end.
    let logged = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let last: Value = serde_json::from_str(logged.lines().last().unwrap()).unwrap();
    assert_eq!(
        (last["type"].clone(), last["status"].clone()),
        (json!("swarm_finished"), json!("failed"))
    );

    // The report says at its top which members failed and why.
    let report = std::fs::read_to_string(finished["report"].as_str().unwrap()).unwrap();
    let top = report
        .find("## Members that did not succeed (3 of 3)")
        .unwrap();
    assert!(top < report.find("## Conclusion").unwrap(), "{report}");
    let prices = report
        .lines()
        .find(|l| l.starts_with("- **task-prices**"))
        .unwrap();
    assert!(
        prices.contains("✗ failed") && prices.contains("get_market_data"),
        "{prices}"
    );

    let show = run(home.path(), &["swarm", "show", run_id]).await;
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success());
    assert!(text.contains("✗ status failed"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("✗ task-rsi") && l.contains("failed")),
        "{text}"
    );
}

/// One member that lists the workspace and reads a file that is not there.
const SOLO: &str = "name: solo
agents:
  - {id: clerk, role: Clerk, tools: [list_dir, read_file], max_retries: 0}
tasks:
  - {id: task-look, agent_id: clerk, prompt_template: 'What is in the workspace?'}
";

#[tokio::test]
async fn a_team_whose_member_was_partial_is_partial_exit_3() {
    let home = tempfile::tempdir().unwrap();
    write_preset(home.path(), "solo", SOLO);
    let s = script(
        home.path(),
        calls_then_answer(
            json!([
                {"name": "list_dir", "arguments": {}},
                {"name": "read_file", "arguments": {"path": "missing.md"}}
            ]),
            "The workspace is empty.",
        ),
    );
    let out = run(
        home.path(),
        &["swarm", "run", "solo", "--script", &s, "--json"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evs = events(&out.stdout);
    let task = last_of(&evs, "swarm_task_finished");
    assert_eq!(task["status"], "partial");
    let finished = last_of(&evs, "swarm_finished");
    assert_eq!(finished["status"], "partial");
    let run_id = evs[0]["run_id"].as_str().unwrap();
    let record = read_json(&home.path().join("data/swarm").join(run_id).join("run.json"));
    assert_eq!(record["status"], "partial");
    assert_eq!(record["tasks"][0]["state"], "partial");
    let report = std::fs::read_to_string(finished["report"].as_str().unwrap()).unwrap();
    assert!(report.contains("status partial"), "{report}");
    assert!(
        report.contains("- **task-look** (Clerk) ◐ partial: 1 of 2 tool calls failed: read_file"),
        "{report}"
    );
    assert!(
        report.contains("The workspace is empty."),
        "the answer is kept: {report}"
    );

    let show = run(home.path(), &["swarm", "show", run_id]).await;
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains("◐ status partial"), "{text}");
    assert!(text.contains("◐ task-look"), "{text}");
    // Text mode: the report on stdout, the reason line on stderr, exit 3.
    let out = run(home.path(), &["swarm", "run", "solo", "--script", &s]).await;
    assert_eq!(out.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .any(|l| l.starts_with("vibedesk: team run partial: ")),
    );
    let list = run(home.path(), &["swarm", "list"]).await;
    assert!(
        String::from_utf8_lossy(&list.stdout)
            .lines()
            .any(|l| l.contains(run_id) && l.contains("partial")),
    );
}

#[test]
fn a_run_record_written_before_partial_existed_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let old = json!({
        "id": "swarm-20260101-000000-0a1b2c3d", "preset": "desk", "title": "Small desk",
        "status": "failed", "reason": "1 of 3 task(s) did not succeed: task-rsi",
        "vars": {"target": "AAPL"}, "started_at": "2026-01-01T00:00:00Z",
        "tasks": [
            {"id": "task-rsi", "agent": "rsi", "role": "Momentum analyst", "state": "failed",
             "reason": "attempt 1 of 1 failed", "attempts": 1},
            {"id": "task-prices", "agent": "prices", "role": "Price analyst", "state": "success"}
        ]
    });
    std::fs::write(dir.path().join("run.json"), old.to_string()).unwrap();
    let record = vibedesk::swarm::record::read_record(dir.path()).unwrap();
    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(record.tasks[1].state.as_str(), "success");
    assert!(!record.tasks[0].state.delivered());
}
