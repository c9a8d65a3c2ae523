//! `vibedesk mcp serve` against real clients (docs §13.4): the official
//! Python MCP SDK's client over stdio and over loopback HTTP (the fixture
//! `mcp/drive_server.py`), raw JSON-RPC lines over stdio for malformed
//! input, and the refusal of a non-loopback address.
//!
//! The Python tests skip with a note when the `mcp` package is missing,
//! except where VIBEDESK_REQUIRE_MCP is set (.ci/run installs it and sets
//! it), where they fail instead.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use vibedesk::tools::builtin::served_entries;
use vibedesk::tools::{Gate, Served};

use crate::support::outside::Outside;

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");
const DRIVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/engine/mcp/drive_server.py"
);
const TOKEN_VAR: &str = "VIBEDESK_TEST_MCP_TOKEN";
/// The flags that offer every served tool (docs §13.4.1).
const ALLOW_ALL: [&str; 2] = ["--allow-memory-write", "--allow-sessions"];

/// The served tools with memory writes and session search allowed
/// (`ALLOW_ALL`), and whether each is read-only: the manifest's, in
/// `mcp serve`'s order.
fn served() -> Vec<(&'static str, bool)> {
    let all: Vec<(&str, bool)> = served_entries()
        .iter()
        .filter_map(|e| e.caps.served_name().map(|n| (n, e.caps.readonly)))
        .collect();
    assert!(all.len() >= 10, "the manifest serves only {all:?}");
    all
}

/// The tools a server started without `--allow-*` flags lists.
pub(crate) fn served_by_default() -> Vec<&'static str> {
    served_entries()
        .iter()
        .filter(|e| {
            matches!(
                e.caps.served,
                Served::As {
                    gate: Gate::Always,
                    ..
                }
            )
        })
        .filter_map(|e| e.caps.served_name())
        .collect()
}

pub(crate) fn python_mcp_available() -> bool {
    Outside::McpClient.available()
}

/// `vibedesk mcp serve ARGS` with a clean environment in a temp home.
fn serve(home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("VIBEDESK_HOME", home)
        .current_dir(home)
        .args(["mcp", "serve"])
        .args(args)
        .kill_on_drop(true);
    c
}

/// Runs the Python driver (with the caller's Python environment; the
/// server it spawns gets the temp home) and returns what it printed.
async fn drive(home: &Path, args: &[&str]) -> Value {
    let run = Command::new("python3")
        .arg(DRIVER)
        .args(args)
        .env("VIBEDESK_HOME", home)
        .current_dir(home)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("the Python MCP client did not finish in 180 s")
        .unwrap();
    assert!(
        out.status.success(),
        "driver failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// What every transport must show: the tools with truthful read-only
/// hints, a backtest's metrics in structured content with progress on the
/// way, `isError` results for bad arguments, memory round-tripped.
fn check_session(seen: &Value, home: &Path) {
    let tools = seen["tools"].as_object().unwrap();
    let names: Vec<&str> = tools.keys().map(String::as_str).collect();
    let served = served();
    let expected: Vec<&str> = served.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, expected);
    for (name, readonly) in &served {
        assert_eq!(tools[*name]["read_only"], json!(readonly), "{name}");
        // Only the writing tools say they may overwrite something.
        let destructive = if *readonly { Value::Null } else { json!(true) };
        assert_eq!(tools[*name]["destructive"], destructive, "{name}");
    }
    // The generated schemas, as the agent is offered them.
    // `symbol` or `symbols` (docs §2.12.2): neither alone is required.
    assert_eq!(tools["indicators"]["required"], json!(["indicator"]));
    // Each typed tool's output type is published as its `outputSchema`,
    // which the Python client checks every structured result against
    // (`session_search` and `load_skill` answer free-form JSON: none).
    for (name, _) in &served {
        if ["session_search", "load_skill"].contains(name) {
            assert_eq!(tools[*name]["output_properties"], json!([]), "{name}");
            continue;
        }
        let props = tools[*name]["output_properties"].as_array().unwrap();
        assert!(
            props.contains(&json!("status")),
            "{name}: no output schema with a status: {props:?}"
        );
    }

    let backtest = &seen["backtest"];
    assert_eq!(backtest["is_error"], false, "{backtest:#}");
    let out = &backtest["structured"];
    assert_eq!(out["status"], "ok", "{out:#}");
    let metrics = &out["metrics"];
    assert_eq!(metrics["trade_count"], 23, "{metrics:#}");
    assert!(metrics["sharpe"].as_f64().unwrap() > 1.0, "{metrics:#}");
    assert!(
        metrics["total_return"].as_f64().unwrap() > 0.0,
        "{metrics:#}"
    );
    // The text is the same result the model would read.
    let text: Value = serde_json::from_str(backtest["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["metrics"]["trade_count"], 23);
    // The run dir is a fresh one under <data>/mcp and holds the artifacts.
    let run_dir = Path::new(out["run_dir"].as_str().unwrap());
    assert!(
        run_dir.starts_with(home.join("data").join("mcp")),
        "{}",
        run_dir.display()
    );
    assert!(run_dir.join("artifacts/metrics.json").is_file());
    assert!(run_dir.join("config.json").is_file());

    // Progress arrived during the run, numbered upwards, naming stages.
    let progress = seen["progress"].as_array().unwrap();
    assert!(progress.len() >= 3, "{progress:#?}");
    let values: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    let messages: Vec<&str> = progress
        .iter()
        .map(|p| p["message"].as_str().unwrap())
        .collect();
    assert!(
        messages.iter().any(|m| m.starts_with("simulate")),
        "{messages:?}"
    );

    let bad = &seen["bad_args"];
    assert_eq!(bad["is_error"], true, "{bad:#}");
    assert!(
        bad["text"]
            .as_str()
            .unwrap()
            .contains("missing required argument(s): symbol"),
        "{bad:#}"
    );

    let indicator = &seen["indicators"];
    assert_eq!(indicator["is_error"], false, "{indicator:#}");
    assert_eq!(indicator["structured"]["tail"].as_array().unwrap().len(), 3);

    let memory = &seen["memory"];
    assert_eq!(memory["saved_is_error"], false, "{memory:#}");
    assert!(
        memory["recall_text"]
            .as_str()
            .unwrap()
            .contains("Commission 0.1% per side"),
        "{memory:#}"
    );
    // A built-in that is not served is not reachable.
    assert!(
        seen["unknown_tool"]
            .as_str()
            .unwrap()
            .contains("unknown tool 'bash'"),
        "{seen:#}"
    );
}

#[tokio::test]
async fn a_python_mcp_client_runs_a_backtest_over_stdio() {
    if !python_mcp_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let seen = drive(home.path(), &["stdio", BIN, ALLOW_ALL[0], ALLOW_ALL[1]]).await;
    check_session(&seen, home.path());
}

/// Reads the server's stderr until it names the address it listens on.
async fn served_url(child: &mut Child) -> String {
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let find = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(at) = line.find("http://") {
                return line[at..].trim().to_string();
            }
        }
        panic!("the server exited without listening");
    };
    tokio::time::timeout(Duration::from_secs(60), find)
        .await
        .expect("the server did not start listening in 60 s")
}

#[tokio::test]
async fn a_python_mcp_client_runs_a_backtest_over_loopback_http_with_a_token() {
    if !python_mcp_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let mut child = serve(
        home.path(),
        &[
            "--http",
            "127.0.0.1:0",
            "--bearer-token-env",
            TOKEN_VAR,
            ALLOW_ALL[0],
            ALLOW_ALL[1],
        ],
    )
    .env(TOKEN_VAR, "s3cret-token")
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let url = served_url(&mut child).await;
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );

    // Without the token, or with a wrong one, nothing is served.
    let client = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"}}});
    for auth in [None, Some("Bearer wrong-token")] {
        let mut req = client
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .json(&init);
        if let Some(auth) = auth {
            req = req.header("authorization", auth);
        }
        let status = req.send().await.unwrap().status();
        assert_eq!(status, reqwest::StatusCode::UNAUTHORIZED, "{auth:?}");
    }

    let seen = drive(home.path(), &["http", &url, "s3cret-token"]).await;
    check_session(&seen, home.path());
    child.kill().await.unwrap();
}

async fn send(stdin: &mut ChildStdin, line: &str) {
    stdin.write_all(line.as_bytes()).await.unwrap();
    stdin.write_all(b"\n").await.unwrap();
    stdin.flush().await.unwrap();
}

/// The next JSON-RPC message the server writes; stdout holds nothing else.
async fn next_message(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("no answer in 30 s")
        .unwrap()
        .expect("the server closed stdout");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout is not protocol ({e}): {line}"))
}

#[tokio::test]
async fn malformed_lines_on_stdio_get_an_error_and_serving_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let mut child = serve(home.path(), &ALLOW_ALL)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    send(&mut stdin, &init.to_string()).await;
    let answer = next_message(&mut lines).await;
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "vibedesk",
        "{answer}"
    );
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;

    // JSON that is no JSON-RPC message: an Invalid Request error (its id
    // cannot be known, so it is null), then the next request is answered.
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":"not an object"}"#,
    )
    .await;
    let error = next_message(&mut lines).await;
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert_eq!(error["id"], Value::Null, "{error}");

    // A line that is not JSON at all is dropped, as the other official
    // SDKs do (an answer could start an error storm with a broken peer).
    send(&mut stdin, "this is {not json").await;
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
    )
    .await;
    let listed = next_message(&mut lines).await;
    assert_eq!(listed["id"], 3, "{listed}");
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, served().iter().map(|(n, _)| *n).collect::<Vec<_>>());

    // Bad arguments are a tool error result, not a protocol error.
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "market_data", "arguments": {"symbol": 7}}});
    send(&mut stdin, &call.to_string()).await;
    let result = next_message(&mut lines).await;
    assert_eq!(result["id"], 4, "{result}");
    assert_eq!(result["result"]["isError"], true, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("argument 'symbol' must be of type"), "{text}");

    // Closing stdin ends the server cleanly.
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
}

/// A served call runs by the agent's call path (issue 26): a backtest past
/// its deadline (`tool_timeout_seconds`, here 2 s, under the engine's own
/// 300 s) is stopped and answers a timeout error over MCP, instead of
/// running as long as its strategy takes.
#[tokio::test]
async fn a_served_backtest_past_its_deadline_returns_a_timeout_error() {
    // The slow strategy is Python code: without pandas the backtest
    // refuses it before it starts, and there is no deadline to pass.
    if !Outside::Pandas.available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let slow = home.path().join("slow");
    std::fs::create_dir_all(slow.join("code")).unwrap();
    std::fs::write(
        slow.join("code/signal_engine.py"),
        "import time\n\nclass SignalEngine:\n    def generate(self, data_map):\n        time.sleep(120)\n        return {}\n",
    )
    .unwrap();
    let mut child = serve(home.path(), &[])
        .env("VIBEDESK_TOOL_TIMEOUT_SECONDS", "2")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    send(&mut stdin, &init.to_string()).await;
    assert_eq!(next_message(&mut lines).await["id"], 1);
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "backtest", "arguments": {
            "run_dir": slow.to_str().unwrap(),
            "config": {"codes": ["AAPL"], "start_date": "2010-01-04",
                       "end_date": "2010-06-30", "source": "embedded"}}}});
    let started = std::time::Instant::now();
    send(&mut stdin, &call.to_string()).await;
    let result = loop {
        // Progress notifications may come first.
        let m = tokio::time::timeout(Duration::from_secs(90), next_message(&mut lines))
            .await
            .expect("no answer in 90 s: the deadline did not stop the call");
        if m["id"] == 2 {
            break m;
        }
    };
    assert_eq!(result["result"]["isError"], true, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("timeout"), "{text}");
    assert!(text.contains("did not finish within 2s"), "{text}");
    // Stopped at its deadline, not after the strategy's two minutes.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
}

#[tokio::test]
async fn a_non_loopback_address_is_refused_with_exit_code_2() {
    let home = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["--http", "0.0.0.0:0"], "not a loopback address"),
        (
            &["--http", "0.0.0.0:0", "--allow-remote"],
            "--allow-remote needs --bearer-token-env",
        ),
        (
            &[
                "--http",
                "0.0.0.0:0",
                "--allow-remote",
                "--bearer-token-env",
                TOKEN_VAR,
            ],
            "the variable is not set",
        ),
    ];
    for (args, says) in cases {
        let out = serve(home.path(), args)
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Refused before anything was set up: no run dir was made.
    assert!(!home.path().join("data").join("mcp").exists());
}
