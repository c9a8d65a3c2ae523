//! The MCP client against servers that misbehave (docs §13.2–§13.3; issue
//! 24's trials): one that floods progress, one that answers with more than
//! a message may hold, one that leaves a `setsid` grandchild behind, one
//! whose tool schemas are not JSON Schema, one with thousands of tools.
//! The well-behaved ones are written with the official Python SDK
//! (tests/engine/mcp/stdio_server.py); what the SDKs refuse to send comes
//! from a raw JSON-RPC server (tests/engine/mcp/hostile_server.py).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_client::{home_with_server, peers_available, schedule, status_log, stdio};
use crate::support::harness::vibedesk;
use crate::support::server::{TestServer, text_reply, tool_call_reply};
use vibedesk::mcp::{McpClients, ServerState, StartOptions};

const STDIO_SERVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/engine/mcp/stdio_server.py"
);
const HOSTILE_SERVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/engine/mcp/hostile_server.py"
);

/// The JSON events of a `vibedesk run --json`.
fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `vibedesk run --json -p PROMPT` against the loopback model.
async fn run_json(home: &Path, server: &TestServer, prompt: &str) -> std::process::Output {
    vibedesk(home)
        .args(["run", "--json", "-p", prompt, "--base-url"])
        .arg(server.base_url())
        .args(["--model", "m1"])
        .output()
        .await
        .unwrap()
}

/// A server reporting progress in a loop (the SDK's `report_progress`, as
/// fast as it goes: thousands a second) costs a few `tool_progress` events
/// a second, its last report still arrives, and `vibedesk.log` does not
/// grow by a line per notification. Before: 61,579 events and 21 MB of log
/// in 10 s.
#[tokio::test]
async fn a_progress_flood_costs_a_few_events_a_second_and_its_last_report_arrives() {
    if !peers_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    home_with_server(home.path(), "py", "python3", &[STDIO_SERVER, "0"], 30);
    let model = TestServer::start(vec![
        tool_call_reply(&[("f1", "mcp__py__flood", r#"{"seconds": 3}"#)]),
        text_reply("Flooded."),
    ])
    .await;
    let out = run_json(home.path(), &model, "flood").await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = events(&out.stdout);
    let progress: Vec<&Value> = all
        .iter()
        .filter(|e| e["type"] == "tool_progress" && e["call_id"] == "f1")
        .collect();
    let finished = all
        .iter()
        .find(|e| e["type"] == "tool_call_finished" && e["call_id"] == "f1")
        .expect("the call finished");
    assert_eq!(finished["status"], "ok", "{finished}");
    let seconds = finished["elapsed_ms"].as_f64().unwrap() / 1000.0;
    use vibedesk::tools::progress::{PROGRESS_BURST, PROGRESS_PER_SECOND};
    let most = (PROGRESS_BURST + PROGRESS_PER_SECOND * seconds.ceil()) as usize + 1;
    assert!(
        (2..=most).contains(&progress.len()),
        "{} tool_progress events in {seconds} s (at most {most})",
        progress.len()
    );
    // The last event is the server's last report: "final report N" of the
    // "flooded N" the tool answered.
    let requests = model.requests();
    let answer = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_string();
    let n: u64 = answer
        .trim()
        .strip_prefix("flooded ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{answer}"));
    assert!(n > 100, "the server reported only {n} times: no flood");
    let last = progress.last().unwrap();
    assert_eq!(last["message"], format!("final report {n}"), "{last}");
    assert_eq!(last["current"].as_f64(), Some(n as f64));
    let positions: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|(_, e)| e["call_id"] == "f1")
        .map(|(i, _)| i)
        .collect();
    let finished_at = all.iter().position(|e| std::ptr::eq(e, finished)).unwrap();
    assert_eq!(
        positions.last(),
        Some(&finished_at),
        "nothing of the call after its end"
    );
    let log = home.path().join("state/logs/vibedesk.log");
    let size = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    assert!(
        size < 256 * 1024,
        "vibedesk.log grew to {size} bytes for {n} notifications"
    );
}

/// `vibedesk.log` is cut at its cap: a log already at the cap is kept as
/// `vibedesk.log.1` and a new one begins. Before, it grew without end.
#[tokio::test]
async fn vibedesk_log_is_rotated_at_its_cap() {
    let home = tempfile::tempdir().unwrap();
    let logs = home.path().join("state/logs");
    std::fs::create_dir_all(&logs).unwrap();
    let cap = vibedesk::cli::VIBEDESK_LOG_CAP;
    let line = "2024-01-01T00:00:00Z  INFO an old line of the log\n";
    let old: String = line.repeat(usize::try_from(cap).unwrap() / line.len() + 1);
    std::fs::write(logs.join("vibedesk.log"), &old).unwrap();
    let out = vibedesk(home.path())
        .args(["run", "-p", "RSI of IBM"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kept = std::fs::metadata(logs.join("vibedesk.log.1"))
        .unwrap()
        .len();
    assert_eq!(kept, old.len() as u64, "the full log is kept once");
    let new = std::fs::metadata(logs.join("vibedesk.log")).unwrap().len();
    assert!(new < cap / 10, "a fresh log: {new} bytes");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(logs.join("vibedesk.log"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// A call whose arguments break the tool's schema (a value outside its
/// `enum`, a wrong type, a missing key) is refused before it reaches the
/// server, with an error naming the problem and what the tool takes; a
/// good call reaches it. Before, only top-level types were checked, so
/// `"mode": "medium"` went to the server.
#[tokio::test]
async fn arguments_are_checked_against_the_whole_schema_before_the_call() {
    if !peers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let calls = dir.path().join("calls.txt");
    let calls_arg = calls.to_str().unwrap();
    let (sink, _) = status_log();
    let clients = McpClients::start(
        &[stdio(
            "py",
            "python3",
            &[STDIO_SERVER, "0", "--calls", calls_arg],
            Duration::from_secs(30),
        )],
        &StartOptions::default(),
        &sink,
    )
    .await;
    assert_eq!(
        clients.statuses()[0].state,
        ServerState::Ready,
        "{:?}",
        clients.statuses()
    );
    let cases = [
        (
            json!({"mode": "medium"}),
            "mode: must be one of \"fast\", \"slow\", got \"medium\"",
        ),
        (
            json!({"mode": "fast", "depth": "3"}),
            "depth: must be an integer, got a string",
        ),
        (json!({"depth": 3}), "missing required mode"),
    ];
    for (args, problem) in cases {
        let (out, _) = schedule(&clients, "mcp__py__pick", args.clone(), dir.path()).await;
        assert_eq!(
            out.error_code.as_deref(),
            Some("invalid_arguments"),
            "{args}: {}",
            out.raw
        );
        assert!(!out.executed, "{args} ran");
        let error: Value = serde_json::from_str(&out.raw).unwrap();
        let error = error["error"].as_str().unwrap();
        assert!(error.contains(problem), "{args}: {error}");
        assert!(error.contains("The tool takes: mode (string"), "{error}");
    }
    assert!(!calls.exists(), "a refused call reached the server");
    let (out, _) = schedule(
        &clients,
        "mcp__py__pick",
        json!({"mode": "slow", "depth": 2}),
        dir.path(),
    )
    .await;
    assert_eq!(out.raw, "picked slow", "{}", out.raw);
    assert_eq!(std::fs::read_to_string(&calls).unwrap(), "slow 2\n");
    clients.shutdown().await;
}

/// An answer over 16 MiB, the most one MCP message may be, fails its call
/// at once with `mcp_result_too_large`, and the server serves on. Before,
/// the transport dropped it silently and the call waited out its deadline.
#[tokio::test]
async fn an_over_large_result_fails_at_once() {
    if !peers_available() {
        return;
    }
    let (sink, _) = status_log();
    let mut config = stdio(
        "py",
        "python3",
        &[STDIO_SERVER, "0"],
        Duration::from_secs(30),
    );
    config.tool_timeout = Duration::from_secs(40);
    let clients = McpClients::start(&[config], &StartOptions::default(), &sink).await;
    assert_eq!(clients.statuses()[0].state, ServerState::Ready);
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let (out, _) = schedule(&clients, "mcp__py__big", json!({}), dir.path()).await;
    let took = started.elapsed();
    assert_eq!(
        out.error_code.as_deref(),
        Some("mcp_result_too_large"),
        "{}",
        out.raw
    );
    assert!(
        out.raw.contains("more than 16 MiB") && out.raw.contains("ask for less"),
        "{}",
        out.raw
    );
    assert!(
        took < Duration::from_secs(10),
        "took {took:?} (deadline 40 s)"
    );
    let (out, _) = schedule(
        &clients,
        "mcp__py__echo",
        json!({"text": "still here"}),
        dir.path(),
    )
    .await;
    assert_eq!(out.raw, "still here");
    clients.shutdown().await;
}

/// The config of a home with the hostile server advertising `n` fillers.
fn home_with_hostile(home: &Path, n: u32, extra: &str) {
    home_with_server(
        home,
        "hostile",
        "python3",
        &[HOSTILE_SERVER, &n.to_string()],
        30,
    );
    if !extra.is_empty() {
        let file = home.join("config/config.toml");
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, format!("{extra}\n{text}")).unwrap();
    }
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Tools whose schemas are not JSON Schema are skipped, and `mcp list`,
/// `doctor`, the run's status event and the workstation's notice say which
/// and why; the model never sees them. Before, `{"type": 42, "properties":
/// "nope"}` went to the model as it was.
#[tokio::test]
async fn tools_with_invalid_schemas_are_skipped_with_a_notice() {
    let home = tempfile::tempdir().unwrap();
    home_with_hostile(home.path(), 0, "");
    let out = vibedesk(home.path())
        .args(["mcp", "list"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("hostile  ready     1 tool(s)"), "{stdout}");
    assert!(
        stdout.contains("note: skipped 2 tool(s) whose input schema is not valid JSON Schema"),
        "{stdout}"
    );
    assert!(stdout.contains("`bad_type` (its input schema is invalid at /type: a tool's arguments are an object, so the top-level `type` must be \"object\", got 42)"), "{stdout}");
    assert!(
        stdout.contains("`bad_nested` (its input schema is invalid at /properties/a/type"),
        "{stdout}"
    );
    let out = vibedesk(home.path())
        .args(["doctor", "--offline"])
        .output()
        .await
        .unwrap();
    let doctor = String::from_utf8_lossy(&out.stdout);
    assert!(doctor.contains("note: skipped 2 tool(s)"), "{doctor}");

    let model = TestServer::start(vec![text_reply("Nothing to call.")]).await;
    let out = run_json(home.path(), &model, "hello").await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names = tool_names(&model.requests()[0].body);
    assert!(
        names.contains(&"mcp__hostile__echo".to_string()),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains("bad_")), "{names:?}");
    let all = events(&out.stdout);
    let ready = all
        .iter()
        .find(|e| e["type"] == "mcp_server_status" && e["state"] == "ready")
        .expect("ready");
    assert_eq!(ready["tools"], 1);
    assert!(
        ready["notes"][0].as_str().unwrap().contains("`bad_type`"),
        "{ready}"
    );

    use vibedesk::agent::events::{AgentEvent, McpServerState};
    use vibedesk::tui::cells::{CellKind, NoticeKind};
    let mut chat = vibedesk::tui::chat::Chat::default();
    chat.apply(&serde_json::from_value::<AgentEvent>(ready.clone()).unwrap());
    let notice = chat.cells.iter().find_map(|c| match c.kind() {
        CellKind::Notice { kind, text } => Some((*kind, text.clone())),
        _ => None,
    });
    let (kind, text) = notice.expect("a notice");
    assert_eq!(kind, NoticeKind::Warning);
    assert!(
        text.starts_with("MCP server hostile ready: 1 tool(s); skipped 2 tool(s)"),
        "{text}"
    );
    let _ = McpServerState::Ready;
}

/// One server advertising 5,033 tools: a request offers at most the cap
/// (`[mcp] max_tools`, 100) of them, stays small, and the status names
/// what was left out and how to choose; an unknown tool's error suggests a
/// few close names instead of listing all. Before: every request was 3 MB
/// and the unknown-tool error listed all 5,033 names.
#[tokio::test]
async fn thousands_of_tools_are_cut_to_the_cap_and_errors_stay_short() {
    let home = tempfile::tempdir().unwrap();
    home_with_hostile(home.path(), 5033, "");
    let model = TestServer::start(vec![
        tool_call_reply(&[("u1", "t0042", r#"{"x": 1}"#)]),
        text_reply("Done."),
    ])
    .await;
    // Its one tool call failed (the unknown tool), so the run ends failed;
    // what matters here is what the model was sent.
    let out = run_json(home.path(), &model, "use the tools").await;
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "two model requests");
    let names = tool_names(&requests[0].body);
    let mcp: Vec<&String> = names.iter().filter(|n| n.starts_with("mcp__")).collect();
    assert_eq!(mcp.len(), vibedesk::mcp::DEFAULT_MAX_TOOLS, "{}", mcp.len());
    assert!(names.len() <= 128, "{} tools in one request", names.len());
    assert_eq!(mcp[0], "mcp__hostile__echo");
    let size = requests[0].body.to_string().len();
    assert!(size < 200_000, "the first request is {size} bytes");
    let all = events(&out.stdout);
    let ready = all
        .iter()
        .find(|e| e["type"] == "mcp_server_status" && e["state"] == "ready")
        .unwrap();
    let note = ready["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(note.contains("offers 100 of its 5034 tools"), "{note}");
    assert!(
        note.contains("left out: mcp__hostile__t0099, mcp__hostile__t0100"),
        "{note}"
    );
    assert!(
        note.contains("enabled_tools or disabled_tools in [mcp_servers.hostile]"),
        "{note}"
    );
    // The unknown tool: a few close names, never the whole list.
    let answer = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_string();
    assert!(answer.contains("\"unknown_tool\""), "{answer}");
    assert!(answer.contains("Closest: mcp__hostile__t0042"), "{answer}");
    assert!(answer.len() < 1000, "{} bytes: {answer}", answer.len());

    // A smaller cap, and the left-out tools listed by `mcp tools`.
    home_with_hostile(home.path(), 5033, "[mcp]\nmax_tools = 10");
    let out = vibedesk(home.path())
        .args(["mcp", "tools", "hostile"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let offered = stdout
        .lines()
        .take_while(|l| !l.contains("left out by the cap"))
        .filter(|l| l.contains("mcp__hostile__"))
        .count();
    assert_eq!(offered, 10, "{}", &stdout[..stdout.len().min(2000)]);
    assert!(
        stdout.contains("left out by the cap on MCP tools per request (5024):"),
        "{}",
        &stdout[..2000]
    );
    assert!(stdout.contains("mcp__hostile__t4999  [read-only]"));
}

/// A server whose `tools/list` names a next page forever is refused at
/// the page cap (issue 35), instead of being read until its start deadline.
#[tokio::test]
async fn a_tool_list_that_pages_forever_is_refused_at_its_cap() {
    let home = tempfile::tempdir().unwrap();
    home_with_server(
        home.path(),
        "hostile",
        "python3",
        &[HOSTILE_SERVER, "0", "endless"],
        30,
    );
    let out = vibedesk(home.path())
        .args(["mcp", "tools", "hostile"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains("more than 64 pages of them"),
        "{}",
        &stdout[..stdout.len().min(2000)]
    );
}

/// Live processes whose command line holds `marker`.
fn marked(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).split('\0').any(|a| a == marker))
                && vibedesk::process::process_is_alive(*pid, None)
        })
        .collect()
}

/// Waits up to `within` for no process marked `marker` to be left.
async fn survivors_after(marker: &str, within: Duration) -> Vec<u32> {
    let until = Instant::now() + within;
    loop {
        let left = marked(marker);
        if left.is_empty() || Instant::now() > until {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A home whose server leaves a plain child and a `setsid` grandchild
/// behind, all three marked.
fn home_with_planting_server(home: &Path, marker: &str) -> PathBuf {
    home_with_server(
        home,
        "py",
        "python3",
        &[STDIO_SERVER, "0", "--grandchild", marker],
        30,
    );
    home.join("state/jobs")
}

/// SIGKILL of `vibedesk run` while its MCP server works leaves nothing the
/// server started: not the server, not its child, not the grandchild that
/// left its session (the server's PID namespace ends with it). Before, all
/// three lived on.
#[tokio::test]
async fn sigkill_of_vibedesk_leaves_no_mcp_server_process() {
    if !peers_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let marker = format!("61.{}", std::process::id());
    let jobs = home_with_planting_server(home.path(), &marker);
    let model = TestServer::start(vec![
        tool_call_reply(&[("s1", "mcp__py__slow", "{}")]),
        text_reply("never reached"),
    ])
    .await;
    let mut child = vibedesk(home.path())
        .args(["run", "--json", "-p", "wait", "--base-url"])
        .arg(model.base_url())
        .args(["--model", "m1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The server, its child and its grandchild, and the call under way.
    let mut started = Vec::new();
    for _ in 0..1500 {
        started = marked(&marker);
        if started.len() == 3 && model.request_count() >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        started.len(),
        3,
        "the server and its two sleeps never all ran"
    );
    let records = std::fs::read_dir(&jobs).map(|d| d.count()).unwrap_or(0);
    assert_eq!(records, 1, "the running server has a job record");
    tokio::time::sleep(Duration::from_millis(300)).await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let left = survivors_after(&marker, Duration::from_secs(1)).await;
    assert!(
        left.is_empty(),
        "survivors of the SIGKILL: {left:?} (of {started:?})"
    );
}

/// A run that ends normally leaves nothing its MCP server started, the
/// `setsid` grandchild included, and no job record. Before, the grandchild
/// lived on after every run.
#[tokio::test]
async fn a_clean_exit_leaves_no_mcp_server_process() {
    if !peers_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let marker = format!("62.{}", std::process::id());
    let jobs = home_with_planting_server(home.path(), &marker);
    let model = TestServer::start(vec![text_reply("Nothing to do.")]).await;
    let out = run_json(home.path(), &model, "hello").await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = events(&out.stdout);
    assert!(
        all.iter()
            .any(|e| e["type"] == "mcp_server_status" && e["state"] == "ready"),
        "the server started: {all:?}"
    );
    let left = survivors_after(&marker, Duration::from_secs(1)).await;
    assert!(left.is_empty(), "left after a clean exit: {left:?}");
    let records = std::fs::read_dir(&jobs).map(|d| d.count()).unwrap_or(0);
    assert_eq!(records, 0, "the job record is gone");
}

/// Over streamable HTTP too, an answer over 16 MiB fails its call at once
/// with `mcp_result_too_large`, and the server serves on. Before, the SDK
/// closed the connection at its 16 MiB bound and the server counted as
/// gone for the rest of the session.
#[tokio::test]
async fn an_over_large_result_over_http_fails_at_once() {
    if !peers_available() {
        return;
    }
    let fixture = crate::mcp_client::Fixture::start().await;
    let (sink, _) = status_log();
    let config = crate::mcp_client::http("web", fixture.port, Duration::from_secs(40));
    let clients = McpClients::start(&[config], &StartOptions::default(), &sink).await;
    assert_eq!(
        clients.statuses()[0].state,
        ServerState::Ready,
        "{:?}",
        clients.statuses()
    );
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let (out, _) = schedule(&clients, "mcp__web__big", json!({}), dir.path()).await;
    let took = started.elapsed();
    assert_eq!(
        out.error_code.as_deref(),
        Some("mcp_result_too_large"),
        "{}",
        out.raw
    );
    assert!(
        took < Duration::from_secs(10),
        "took {took:?} (deadline 40 s)"
    );
    let (out, _) = schedule(
        &clients,
        "mcp__web__echo",
        json!({"text": "still here"}),
        dir.path(),
    )
    .await;
    assert_eq!(out.raw, "still here");
    assert_eq!(clients.statuses()[0].state, ServerState::Ready);
    clients.shutdown().await;
}
