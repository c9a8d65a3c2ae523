//! The MCP client against real servers (docs §13.1–§13.3): the reference
//! `mcp-server-time` over stdio, and a server written with the official
//! Python SDK (tests/engine/mcp/fixture_server.py) on loopback streamable
//! HTTP. Without them these tests skip with a note, except where
//! VIBEDESK_REQUIRE_MCP is set (CI), where they fail.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use crate::support::outside::Outside;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;
use vibedesk::agent::events::{ToolCallStatus, ToolEvent};
use vibedesk::mcp::{McpClients, ServerState, ServerStatus, StartOptions, StatusSink};
use vibedesk::mcp::{McpServerConfig, McpTransport};
use vibedesk::model::ToolCall;
use vibedesk::tools::{
    BackgroundQueue, CallOutcome, Registry, Scheduler, SchedulerConfig, ToolContext,
};

use crate::support::harness::vibedesk;
use crate::support::server::{TestServer, text_reply, tool_call_reply};

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/engine/mcp/fixture_server.py"
);

/// Whether the Python peers are installed; a failed assertion where CI
/// requires them.
pub(crate) fn peers_available() -> bool {
    Outside::McpPeers.available()
}

pub(crate) fn stdio(
    name: &str,
    command: &str,
    args: &[&str],
    startup: Duration,
) -> McpServerConfig {
    McpServerConfig {
        name: name.into(),
        transport: McpTransport::Stdio {
            command: command.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: BTreeMap::from([("TZ".to_string(), "UTC".to_string())]),
        },
        startup_timeout: startup,
        tool_timeout: Duration::from_secs(30),
        enabled_tools: None,
        disabled_tools: Vec::new(),
    }
}

pub(crate) fn http(name: &str, port: u16, tool_timeout: Duration) -> McpServerConfig {
    McpServerConfig {
        name: name.into(),
        transport: McpTransport::Http {
            url: format!("http://127.0.0.1:{port}/mcp"),
            bearer_token_env: None,
        },
        startup_timeout: Duration::from_secs(20),
        tool_timeout,
        enabled_tools: None,
        disabled_tools: Vec::new(),
    }
}

/// Collects every status change.
pub(crate) fn status_log() -> (StatusSink, Arc<Mutex<Vec<ServerStatus>>>) {
    let seen: Arc<Mutex<Vec<ServerStatus>>> = Arc::default();
    let s = seen.clone();
    (
        Arc::new(move |st: &ServerStatus| s.lock().unwrap().push(st.clone())),
        seen,
    )
}

/// The fixture server on a free loopback port, accepting connections.
pub(crate) struct Fixture {
    child: Child,
    pub(crate) port: u16,
    markers: tempfile::TempDir,
}

impl Fixture {
    pub(crate) async fn start() -> Fixture {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let markers = tempfile::tempdir().unwrap();
        let child = Command::new("python3")
            .arg(FIXTURE)
            .arg(port.to_string())
            .arg(markers.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        // Readiness: the port accepts connections (Python needs ~1 s).
        let ready = async {
            while tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), ready)
            .await
            .expect("the fixture server did not listen within 30 s");
        Fixture {
            child,
            port,
            markers,
        }
    }

    /// Waits (bounded) for the server to record a cancelled call.
    async fn saw_cancellation(&self, tool: &str) -> bool {
        let marker = self.markers.path().join(format!("cancelled-{tool}"));
        let wait = async {
            while !marker.exists() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .is_ok()
    }
}

pub(crate) fn context(dir: &Path) -> ToolContext {
    ToolContext {
        call_id: "c".into(),
        session_id: "s".into(),
        run_dir: dir.to_path_buf(),
        workspace: dir.to_path_buf(),
        cancel: CancellationToken::new(),
        background: BackgroundQueue::default(),
    }
}

/// Runs one call through the real scheduler; returns its outcome and the
/// tool events it produced.
pub(crate) async fn schedule(
    clients: &McpClients,
    tool: &str,
    args: Value,
    dir: &Path,
) -> (CallOutcome, Vec<ToolEvent>) {
    let mut registry = Registry::new();
    clients.register(&mut registry);
    let events: Arc<Mutex<Vec<ToolEvent>>> = Arc::default();
    let e = events.clone();
    let config = SchedulerConfig {
        heartbeat_interval: Duration::from_millis(500),
        ..SchedulerConfig::default()
    };
    let mut scheduler = Scheduler::new(
        Arc::new(registry),
        config,
        Arc::new(move |ev| e.lock().unwrap().push(ev)),
    );
    let call = ToolCall::new("call-1", tool, args.to_string());
    let mut outcomes = scheduler.run(1, &[call], &context(dir)).await;
    let seen = events.lock().unwrap().clone();
    (outcomes.remove(0), seen)
}

#[tokio::test]
async fn time_server_over_stdio_lists_its_tools_and_tells_the_time() {
    if !peers_available() {
        return;
    }
    let (sink, seen) = status_log();
    let mut config = stdio(
        "time",
        "mcp-server-time",
        &["--local-timezone", "UTC"],
        Duration::from_secs(20),
    );
    config.disabled_tools = vec!["convert_time".into()];
    let clients = McpClients::start(&[config], &StartOptions::default(), &sink).await;
    let status = &clients.statuses()[0];
    assert_eq!(status.state, ServerState::Ready, "{status:?}");
    let names: Vec<&str> = status.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["mcp__time__get_current_time"],
        "convert_time is disabled"
    );
    assert!(status.tools[0].readonly, "the server marks it readOnlyHint");
    assert_eq!(
        seen.lock().unwrap().last().unwrap().state,
        ServerState::Ready
    );

    let dir = tempfile::tempdir().unwrap();
    let (outcome, _) = schedule(
        &clients,
        "mcp__time__get_current_time",
        json!({"timezone": "UTC"}),
        dir.path(),
    )
    .await;
    assert_eq!(outcome.status, ToolCallStatus::Ok, "{}", outcome.raw);
    let answer: Value = serde_json::from_str(&outcome.raw).unwrap();
    assert_eq!(answer["timezone"], "UTC", "{answer}");
    let when = chrono::DateTime::parse_from_rfc3339(answer["datetime"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("not an ISO time ({e}): {answer}"));
    let skew = (chrono::Utc::now() - when.with_timezone(&chrono::Utc)).num_seconds();
    assert!(skew.abs() < 300, "{when} is not now");
    clients.shutdown().await;
}

#[tokio::test]
async fn a_server_that_never_answers_fails_in_its_timeout_and_the_others_start() {
    if !peers_available() {
        return;
    }
    let (sink, seen) = status_log();
    let mute = stdio(
        "mute",
        "python3",
        &["-c", "import time; time.sleep(120)"],
        Duration::from_millis(1500),
    );
    let missing = stdio(
        "missing",
        "/nonexistent/mcp-server",
        &[],
        Duration::from_secs(5),
    );
    let time = stdio("time", "mcp-server-time", &[], Duration::from_secs(20));
    let started = std::time::Instant::now();
    let clients = McpClients::start(&[mute, missing, time], &StartOptions::default(), &sink).await;
    let statuses = clients.statuses();
    assert_eq!(statuses[0].state, ServerState::Failed);
    assert!(
        statuses[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("did not answer `initialize` within 1.5 s"),
        "{statuses:?}"
    );
    assert_eq!(statuses[1].state, ServerState::Failed);
    assert!(
        statuses[1]
            .reason
            .as_deref()
            .unwrap()
            .contains("/nonexistent/mcp-server"),
        "{statuses:?}"
    );
    assert_eq!(statuses[2].state, ServerState::Ready, "{statuses:?}");
    // In parallel: the mute server's 1.5 s did not add to the others'.
    assert!(started.elapsed() < Duration::from_secs(20));
    let seen = seen.lock().unwrap().clone();
    let failed: Vec<&str> = seen
        .iter()
        .filter(|s| s.state == ServerState::Failed)
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(failed.len(), 2, "{seen:?}");
    assert_eq!(clients.tools().len(), 2, "only the time server's tools");
    clients.shutdown().await;
}

#[tokio::test]
async fn http_tools_time_out_report_progress_and_errors() {
    if !peers_available() {
        return;
    }
    let fixture = Fixture::start().await;
    let (sink, _) = status_log();
    let clients = McpClients::start(
        &[http("fx", fixture.port, Duration::from_secs(1))],
        &StartOptions::default(),
        &sink,
    )
    .await;
    let status = &clients.statuses()[0];
    assert_eq!(status.state, ServerState::Ready, "{status:?}");
    let readonly: Vec<(&str, bool)> = status
        .tools
        .iter()
        .map(|t| (t.remote_name.as_str(), t.readonly))
        .collect();
    assert!(readonly.contains(&("slow_read", true)), "{readonly:?}");
    assert!(readonly.contains(&("slow_write", false)), "{readonly:?}");
    let dir = tempfile::tempdir().unwrap();

    // A read-only call: the scheduler stops it at the tool's deadline.
    let (out, _) = schedule(&clients, "mcp__fx__slow_read", json!({}), dir.path()).await;
    assert_eq!(out.status, ToolCallStatus::Timeout, "{}", out.raw);
    assert_eq!(out.error_code.as_deref(), Some("tool_timeout"));
    assert!(
        fixture.saw_cancellation("slow_read").await,
        "no cancellation reached the server"
    );

    // A write call: the tool stops itself at the same deadline.
    let (out, _) = schedule(&clients, "mcp__fx__slow_write", json!({}), dir.path()).await;
    assert_eq!(
        out.error_code.as_deref(),
        Some("tool_timeout"),
        "{}",
        out.raw
    );
    assert_eq!(
        serde_json::from_str::<Value>(&out.raw).unwrap()["timeout_seconds"],
        1.0
    );
    assert!(
        fixture.saw_cancellation("slow_write").await,
        "no cancellation reached the server"
    );

    // Progress notifications become tool_progress events.
    let (out, events) = schedule(&clients, "mcp__fx__progress", json!({}), dir.path()).await;
    assert_eq!(out.status, ToolCallStatus::Ok, "{}", out.raw);
    assert_eq!(out.raw, "all 3 steps done");
    let progress: Vec<(Option<f64>, Option<f64>, String)> = events
        .iter()
        .filter_map(|e| match e {
            ToolEvent::ToolProgress {
                stage,
                current,
                total,
                message,
                ..
            } if stage == "mcp" => Some((*current, *total, message.clone())),
            _ => None,
        })
        .collect();
    assert!(!progress.is_empty(), "no tool_progress in {events:?}");
    assert!(
        progress.contains(&(Some(3.0), Some(3.0), "step 3 of 3".into())),
        "{progress:?}"
    );

    // isError: a tool error with the server's message.
    let (out, _) = schedule(
        &clients,
        "mcp__fx__fails",
        json!({"reason": "no data"}),
        dir.path(),
    )
    .await;
    assert_eq!(out.status, ToolCallStatus::Error);
    assert_eq!(
        out.error_code.as_deref(),
        Some("mcp_tool_error"),
        "{}",
        out.raw
    );
    assert!(out.raw.contains("refused: no data"), "{}", out.raw);

    // The server still serves after all that.
    let (out, _) = schedule(
        &clients,
        "mcp__fx__echo",
        json!({"text": "still here"}),
        dir.path(),
    )
    .await;
    assert_eq!(out.raw, "still here");
    clients.shutdown().await;
}

#[tokio::test]
async fn a_server_crashing_mid_call_ends_the_call_and_reports_exited() {
    if !peers_available() {
        return;
    }
    let mut fixture = Fixture::start().await;
    let (sink, seen) = status_log();
    let clients = McpClients::start(
        &[http("fx", fixture.port, Duration::from_secs(20))],
        &StartOptions::default(),
        &sink,
    )
    .await;
    assert_eq!(clients.statuses()[0].state, ServerState::Ready);
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let (out, _) = schedule(&clients, "mcp__fx__crash", json!({}), dir.path()).await;
    assert_eq!(out.status, ToolCallStatus::Error, "{}", out.raw);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the call waited for its deadline instead of ending with the server"
    );
    assert_eq!(
        out.error_code.as_deref(),
        Some("mcp_server_exited"),
        "{}",
        out.raw
    );
    assert!(out.raw.contains("'fx'"), "{}", out.raw);
    let exit = fixture.child.wait().await.unwrap();
    assert_eq!(exit.code(), Some(3));
    // The status follows: `exited`, with the reason.
    let exited = async {
        loop {
            if let Some(s) = seen
                .lock()
                .unwrap()
                .iter()
                .find(|s| s.state == ServerState::Exited)
            {
                return s.clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let exited = tokio::time::timeout(Duration::from_secs(15), exited)
        .await
        .expect("no `exited` status after the crash");
    assert_eq!(exited.name, "fx");
    assert!(exited.reason.is_some());
    assert_eq!(clients.statuses()[0].state, ServerState::Exited);
    clients.shutdown().await;
}

/// The config file of a temp VIBEDESK_HOME with the time server in it.
fn home_with_time_server(home: &Path) -> PathBuf {
    let dir = home.join("config");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.toml");
    std::fs::write(
        &file,
        "[mcp_servers.time]\ncommand = \"mcp-server-time\"\nargs = [\"--local-timezone\", \"UTC\"]\nenv = { TZ = \"UTC\" }\nstartup_timeout_s = 20\n",
    )
    .unwrap();
    file
}

#[tokio::test]
async fn the_agent_calls_the_time_server_and_reads_the_answer() {
    if !peers_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    home_with_time_server(home.path());
    let server = TestServer::start(vec![
        tool_call_reply(&[("c1", "mcp__time__get_current_time", r#"{"timezone":"UTC"}"#)]),
        text_reply("It is now."),
    ])
    .await;
    let out = Command::new(BIN)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("VIBEDESK_HOME", home.path())
        .args(["run", "--json", "-p", "what time is it?", "--base-url"])
        .arg(server.base_url())
        .args(["--model", "m1"])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The server starts in the background; the run, whose model can call
    // its tools, waits for it before its first request.
    let position = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred);
    let starting = position(&|e| e["type"] == "mcp_server_status" && e["state"] == "starting")
        .expect("no `starting` status");
    let ready = position(&|e| e["type"] == "mcp_server_status" && e["state"] == "ready")
        .expect("no `ready` status");
    let run_started = position(&|e| e["type"] == "run_started").unwrap();
    assert!(starting < ready && ready < run_started, "{events:?}");
    let status = &events[ready];
    assert_eq!(status["server"], "time");
    assert!(status["tools"].as_u64().unwrap() >= 1, "{status}");
    let finished = events
        .iter()
        .find(|e| e["type"] == "tool_call_finished")
        .unwrap();
    assert_eq!(finished["tool"], "mcp__time__get_current_time");
    assert_eq!(finished["status"], "ok", "{finished}");
    // The tool's answer is in the next request to the model.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"mcp__time__get_current_time"), "{tools:?}");
    let tool_message = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("no tool message");
    let content = tool_message["content"].as_str().unwrap();
    let answer: Value = serde_json::from_str(content).unwrap_or_else(|e| panic!("{e}: {content}"));
    assert_eq!(answer["timezone"], "UTC");
    let year = chrono::Utc::now().format("%Y").to_string();
    assert!(
        answer["datetime"].as_str().unwrap().starts_with(&year),
        "{answer}"
    );
}

#[tokio::test]
async fn mcp_list_tools_and_doctor_report_each_server() {
    if !peers_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let file = home_with_time_server(home.path());
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("[mcp_servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n");
    std::fs::write(&file, text).unwrap();

    let out = vibedesk(home.path())
        .args(["mcp", "list"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "one server failed: {stdout}");
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no line for {name}: {stdout}"))
            .to_string()
    };
    assert!(
        line("time").contains("ready") && line("time").contains("2 tool(s)"),
        "{stdout}"
    );
    assert!(
        line("broken").contains("failed") && line("broken").contains("0 tool(s)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("cannot start `/nonexistent/mcp-server`"),
        "{stdout}"
    );

    let out = vibedesk(home.path())
        .args(["mcp", "tools", "time"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("mcp__time__get_current_time  [read-only]"),
        "{stdout}"
    );
    assert!(stdout.contains("mcp__time__convert_time"), "{stdout}");
    assert!(!stdout.contains("broken"), "{stdout}");

    let out = vibedesk(home.path())
        .args(["doctor", "--offline"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("mcp servers   2 configured"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_start().starts_with("time") && l.contains("ready")),
        "{stdout}"
    );
}

#[tokio::test]
async fn a_bad_mcp_entry_stops_the_run_with_its_name_and_problem() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("config");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        "[mcp_servers.both]\ncommand = \"x\"\nurl = \"http://127.0.0.1:1/mcp\"\n",
    )
    .unwrap();
    for args in [&["run", "-p", "hello"][..], &["mcp", "list"][..]] {
        let out = vibedesk(home.path()).args(args).output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("[mcp_servers.both]") && stderr.contains("not both"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn the_workstation_chat_shows_server_states_as_notices() {
    use vibedesk::agent::events::{AgentEvent, McpServerState};
    use vibedesk::tui::cells::{CellKind, NoticeKind};
    let mut chat = vibedesk::tui::chat::Chat::default();
    let status = |state, tools, reason: Option<&str>| AgentEvent::McpServerStatus {
        server: "time".into(),
        state,
        tools,
        reason: reason.map(String::from),
        notes: Vec::new(),
    };
    chat.apply(&status(McpServerState::Starting, 0, None));
    chat.apply(&status(McpServerState::Ready, 2, None));
    chat.apply(&status(McpServerState::Exited, 2, Some("it crashed")));
    let notices: Vec<(NoticeKind, String)> = chat
        .cells
        .iter()
        .filter_map(|c| match c.kind() {
            CellKind::Notice { kind, text } => Some((*kind, text.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        notices,
        vec![
            (
                NoticeKind::Info,
                "MCP server time starting; its tools join when it is ready".to_string()
            ),
            (
                NoticeKind::Info,
                "MCP server time ready: 2 tool(s)".to_string()
            ),
            (
                NoticeKind::Warning,
                "MCP server time exited: it crashed; its tools are unavailable".to_string()
            ),
        ]
    );
}

#[tokio::test]
async fn dropping_the_clients_kills_each_servers_process_group() {
    if !peers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    // The server leaves a grandchild behind in its group, as wrappers
    // (npx, uvx, shell scripts) do. Its pid as the host sees it (`$!` is
    // the server's PID namespace's own), read from the host's /proc.
    let script = format!(
        "(read -r p _ < /proc/self/stat; echo $p > '{}'; exec sleep 300) & exec mcp-server-time",
        pidfile.display()
    );
    let (sink, _) = status_log();
    let clients = McpClients::start(
        &[stdio(
            "time",
            "sh",
            &["-c", &script],
            Duration::from_secs(20),
        )],
        &StartOptions::default(),
        &sink,
    )
    .await;
    assert_eq!(clients.statuses()[0].state, ServerState::Ready);
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(vibedesk::process::process_is_alive(pid, None));
    drop(clients);
    let gone = async {
        while vibedesk::process::process_is_alive(pid, None) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), gone)
        .await
        .expect("the server's grandchild outlived the session");
}

#[tokio::test]
async fn a_stdio_server_dying_mid_call_ends_the_call_and_reports_exited() {
    if !peers_available() {
        return;
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/engine/mcp/stdio_server.py"
    );
    let (sink, seen) = status_log();
    let clients = McpClients::start(
        &[stdio(
            "py",
            "python3",
            &[script, "0"],
            Duration::from_secs(20),
        )],
        &StartOptions::default(),
        &sink,
    )
    .await;
    assert_eq!(clients.statuses()[0].state, ServerState::Ready);
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = schedule(&clients, "mcp__py__crash", json!({}), dir.path()).await;
    assert_eq!(
        out.error_code.as_deref(),
        Some("mcp_server_exited"),
        "{}",
        out.raw
    );
    let exited = async {
        loop {
            let found = seen
                .lock()
                .unwrap()
                .iter()
                .find(|s| s.state == ServerState::Exited)
                .cloned();
            if let Some(s) = found {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let exited = tokio::time::timeout(Duration::from_secs(15), exited)
        .await
        .expect("no `exited` status after the crash");
    assert_eq!(exited.name, "py");
    // Later calls fail at once, without reaching for the dead server.
    let (out, _) = schedule(&clients, "mcp__py__echo", json!({"text": "x"}), dir.path()).await;
    assert_eq!(
        out.error_code.as_deref(),
        Some("mcp_server_exited"),
        "{}",
        out.raw
    );
    assert!(out.raw.contains("no longer running"), "{}", out.raw);
    clients.shutdown().await;
}

/// A config file in a temp VIBEDESK_HOME with one stdio server.
pub(crate) fn home_with_server(
    home: &Path,
    name: &str,
    command: &str,
    args: &[&str],
    startup_s: u32,
) {
    let dir = home.join("config");
    std::fs::create_dir_all(&dir).unwrap();
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "[mcp_servers.{name}]\ncommand = {command:?}\nargs = [{}]\nstartup_timeout_s = {startup_s}\n",
            args.join(", ")
        ),
    )
    .unwrap();
}

/// A server that never answers costs an offline run nothing: the offline
/// planner cannot call MCP tools, so the run neither starts nor waits for
/// it (before, every offline run waited out the start-up timeout).
#[tokio::test]
async fn an_offline_run_does_not_wait_for_a_server_that_never_answers() {
    let home = tempfile::tempdir().unwrap();
    home_with_server(home.path(), "mute", "sleep", &["600"], 20);
    for json in [false, true] {
        let started = std::time::Instant::now();
        let mut cmd = vibedesk(home.path());
        cmd.arg("run");
        if json {
            cmd.arg("--json");
        }
        let out = cmd.args(["-p", "RSI of IBM"]).output().await.unwrap();
        let elapsed = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stderr}");
        assert!(
            elapsed < Duration::from_secs(12),
            "the offline run took {elapsed:?}, waiting on the 20 s start-up timeout"
        );
        assert!(stdout.contains("RSI"), "{stdout}");
        if json {
            assert!(!stdout.contains("mcp_server_status"), "{stdout}");
        } else {
            assert!(
                stderr.contains(
                    "MCP servers not started: the offline planner calls built-in tools only"
                ),
                "{stderr}"
            );
        }
    }
}

/// A run whose model can call tools waits for a server still starting,
/// but only up to its start-up timeout; then it goes on without its tools
/// and the status says why.
#[tokio::test]
async fn a_model_run_waits_for_a_silent_server_only_up_to_its_timeout() {
    let home = tempfile::tempdir().unwrap();
    home_with_server(home.path(), "mute", "sleep", &["600"], 2);
    let server = TestServer::start(vec![text_reply("Done without it.")]).await;
    let started = std::time::Instant::now();
    let out = vibedesk(home.path())
        .args(["run", "--json", "-p", "hello", "--base-url"])
        .arg(server.base_url())
        .args(["--model", "m1"])
        .output()
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        elapsed >= Duration::from_secs(2),
        "it did not wait: {elapsed:?}"
    );
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let failed = events
        .iter()
        .position(|e| e["type"] == "mcp_server_status" && e["state"] == "failed")
        .expect("no `failed` status");
    let run_started = events
        .iter()
        .position(|e| e["type"] == "run_started")
        .unwrap();
    assert!(failed < run_started, "{events:?}");
    let reason = events[failed]["reason"].as_str().unwrap();
    let log = home.path().join("state/logs/mcp/mute.log");
    assert_eq!(
        reason,
        format!(
            "did not answer `initialize` within 2 s; its stderr is in {}",
            log.display()
        )
    );
    assert!(log.exists());
    let waiting = events
        .iter()
        .find(|e| e["type"] == "notice")
        .expect("no notice that the run waits");
    assert!(
        waiting["message"]
            .as_str()
            .unwrap()
            .contains("for MCP server mute to start"),
        "{waiting}"
    );
}

/// The reason a start failed is what the server did, in words, and the
/// same every time: its exit with the last line of its traceback, its
/// silence, or what it wrote to stdout that is not MCP; each names the
/// server's own stderr log.
#[tokio::test]
async fn failure_reasons_are_stable_and_say_what_the_server_did() {
    let logs = tempfile::tempdir().unwrap();
    let options = StartOptions {
        log_dir: Some(logs.path().to_path_buf()),
        ..StartOptions::default()
    };
    let traceback = stdio(
        "traceback",
        "python3",
        &[
            "-c",
            "import sys\nsys.stderr.write('loading config\\n')\nraise ValueError('no API key for the weather service')",
        ],
        Duration::from_secs(20),
    );
    let mute = stdio(
        "mute",
        "python3",
        &["-c", "import time; time.sleep(120)"],
        Duration::from_millis(1500),
    );
    let junk = stdio(
        "junk",
        "python3",
        &[
            "-c",
            "import time\nprint('Weather server listening on port 8000', flush=True)\ntime.sleep(120)",
        ],
        Duration::from_secs(3),
    );
    // Nothing listens on this port once the listener is dropped.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = http("refused", closed, Duration::from_secs(5));
    let log = |name: &str| {
        logs.path()
            .join(format!("{name}.log"))
            .display()
            .to_string()
    };
    let expected = [
        format!(
            "exited with status 1: ValueError: no API key for the weather service; its stderr is in {}",
            log("traceback")
        ),
        format!(
            "did not answer `initialize` within 1.5 s; its stderr is in {}",
            log("mute")
        ),
        format!(
            "wrote non-MCP output to stdout: \"Weather server listening on port 8000\" (stdout must carry MCP messages only; a server logs to stderr); its stderr is in {}",
            log("junk")
        ),
        format!(
            "the MCP handshake with http://127.0.0.1:{closed}/mcp failed: Connection refused (os error 111)"
        ),
    ];
    // Twice: the words do not depend on timing.
    for _ in 0..2 {
        let (sink, _) = status_log();
        let clients = McpClients::start(
            &[
                traceback.clone(),
                mute.clone(),
                junk.clone(),
                refused.clone(),
            ],
            &options,
            &sink,
        )
        .await;
        let reasons: Vec<String> = clients
            .statuses()
            .iter()
            .map(|s| {
                assert_eq!(s.state, ServerState::Failed, "{s:?}");
                s.reason.clone().unwrap()
            })
            .collect();
        assert_eq!(reasons, expected);
        clients.shutdown().await;
    }
    let kept = std::fs::read_to_string(log("traceback")).unwrap();
    assert!(kept.contains("Traceback (most recent call last)"), "{kept}");
    assert!(kept.contains("loading config"), "{kept}");
}

/// A server that floods stderr writes its own log, never vibedesk's, at
/// most 100 lines a second: the rest are counted in a line that quotes the
/// last of them, so 120,000 lines cost a few kilobytes (before: the whole
/// 4.5 MB, cut and rotated at the 1 MiB cap); the failure names the file.
#[tokio::test]
async fn a_chatty_server_gets_a_rate_limited_log_of_its_own() {
    let home = tempfile::tempdir().unwrap();
    home_with_server(
        home.path(),
        "chatty",
        "python3",
        &[
            "-c",
            "import sys, time\nfor i in range(120000): sys.stderr.write('noise line %06d from a chatty server\\n' % i)\nsys.stderr.flush()\ntime.sleep(120)",
        ],
        4,
    );
    let out = vibedesk(home.path())
        .args(["mcp", "list"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let logs = home.path().join("state/logs");
    let own = logs.join("mcp/chatty.log");
    assert!(
        stdout.contains(&format!(
            "did not answer `initialize` within 4 s; its stderr is in {}",
            own.display()
        )),
        "{stdout}"
    );
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let text = std::fs::read_to_string(&own).unwrap();
    let per_second = vibedesk::mcp::STDERR_LINES_PER_SECOND as usize;
    let written = text.lines().filter(|l| l.starts_with("noise line")).count();
    let notes: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("line(s) dropped"))
        .collect();
    // The flood takes well under the 4 s start-up; each second that saw
    // lines dropped ends with one note.
    assert!(!notes.is_empty() && notes.len() <= 5, "{notes:?}");
    assert!(
        written >= per_second && written <= per_second * notes.len(),
        "{written} lines written"
    );
    assert!(
        text.contains("noise line 000000 from a chatty server"),
        "the first lines are kept"
    );
    assert!(
        notes
            .last()
            .unwrap()
            .ends_with("the last: noise line 119999 from a chatty server"),
        "the newest line is quoted: {notes:?}"
    );
    let dropped: usize = notes
        .iter()
        .map(|n| {
            n.trim_start_matches("… ")
                .split(' ')
                .next()
                .unwrap()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert_eq!(written + dropped, 120_000, "every line written or counted");
    assert!(size(&own) < 64 * 1024, "{}", size(&own));
    assert!(
        !logs.join("mcp/chatty.log.1").exists(),
        "no rotation needed"
    );
    let main = size(&logs.join("vibedesk.log"));
    assert!(main < 64 * 1024, "vibedesk.log grew to {main} bytes");
}

/// Two servers whose names sanitise alike (`py.a`, `py_a`) offer a tool of
/// the same name: the second takes the qualified name, says so in its
/// status notes, and both tools answer (issue 26: before, the second was
/// dropped with a log line).
#[tokio::test]
async fn tools_whose_names_sanitise_alike_stay_apart_and_are_reported() {
    if !peers_available() {
        return;
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/engine/mcp/stdio_server.py"
    );
    let (sink, _) = status_log();
    let servers = [
        stdio("py.a", "python3", &[script, "0"], Duration::from_secs(20)),
        stdio("py_a", "python3", &[script, "0"], Duration::from_secs(20)),
    ];
    let clients = McpClients::start(&servers, &StartOptions::default(), &sink).await;
    let st = clients.statuses();
    assert!(st.iter().all(|s| s.state == ServerState::Ready), "{st:?}");
    let first: Vec<&str> = st[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert!(first.contains(&"mcp__py_a__echo"), "{first:?}");
    let renamed = st[1]
        .tools
        .iter()
        .find(|t| t.remote_name == "echo")
        .expect("the second server's echo is offered");
    assert_ne!(renamed.name, "mcp__py_a__echo");
    assert!(
        renamed.name.starts_with("mcp__py_a__echo_"),
        "{}",
        renamed.name
    );
    assert!(
        st[1]
            .notes
            .iter()
            .any(|n| n.contains(&renamed.name) && n.contains("another MCP tool's")),
        "{:?}",
        st[1].notes
    );
    let dir = tempfile::tempdir().unwrap();
    for name in ["mcp__py_a__echo", renamed.name.as_str()] {
        let (out, _) = schedule(&clients, name, json!({"text": "hi"}), dir.path()).await;
        assert!(out.error_code.is_none(), "{name}: {}", out.raw);
        assert!(out.raw.contains("hi"), "{name}: {}", out.raw);
    }
    clients.shutdown().await;
}
