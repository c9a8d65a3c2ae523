//! `vibedesk mcp serve` lets in only whom the user chose (docs §13.4,
//! issue 24 item 2): the bearer token made on first use, the `Origin`
//! check, the session cap and idle expiry, the tool policy and redaction,
//! and memories written by a client marked and kept out of a prompt. Real
//! servers, the official Python SDK client (`mcp/serve_policy.py`) and raw
//! HTTP.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, Command};

use crate::mcp_server::{python_mcp_available, served_by_default};
use crate::support::harness::files_under;
use crate::support::server::{TestServer, text_reply};

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");
const POLICY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/engine/mcp/serve_policy.py"
);

/// `vibedesk ARGS` with a clean environment in a temp home.
fn vibedesk(home: &Path) -> Command {
    let mut c = crate::support::harness::vibedesk(home);
    c.current_dir(home);
    c
}

/// A running `mcp serve --http`, its URL and the stderr lines read so far.
struct Served {
    child: Child,
    url: String,
    said: Vec<String>,
    _stderr: Lines<BufReader<ChildStderr>>,
}

/// Starts `mcp serve --http 127.0.0.1:0 ARGS` and reads stderr until the
/// address is named.
async fn serve_http(home: &Path, args: &[&str]) -> Served {
    let mut child = vibedesk(home)
        .args(["mcp", "serve", "--http", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = Vec::new();
    let find = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let url = line.find("http://").map(|at| line[at..].trim().to_string());
            said.push(line);
            if let Some(url) = url {
                return url;
            }
        }
        panic!("the server exited without listening: {said:#?}");
    };
    let url = tokio::time::timeout(Duration::from_secs(60), find)
        .await
        .expect("the server did not start listening in 60 s");
    Served {
        child,
        url,
        said,
        _stderr: lines,
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
}

/// POSTs `initialize` with the given headers; the status, the session id
/// header and the body.
async fn post_init(url: &str, headers: &[(&str, &str)]) -> (u16, Option<String>, String) {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&initialize());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let response = tokio::time::timeout(Duration::from_secs(30), req.send())
        .await
        .expect("no answer in 30 s")
        .unwrap();
    let status = response.status().as_u16();
    let session = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    // An SSE answer may stay open: read until the JSON-RPC answer is in.
    let mut response = response;
    let mut body = String::new();
    while !body.contains("\"jsonrpc\"") {
        match tokio::time::timeout(Duration::from_secs(10), response.chunk()).await {
            Ok(Ok(Some(chunk))) => body.push_str(&String::from_utf8_lossy(&chunk)),
            _ => break,
        }
    }
    (status, session, body)
}

/// The memory entry files (`.md`), in either layout (docs §8.2).
fn memory_files(home: &Path) -> Vec<std::path::PathBuf> {
    files_under(&home.join("data/memory/entries"))
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect()
}

fn token_path(home: &Path) -> std::path::PathBuf {
    home.join("config").join("mcp-serve.token")
}

/// Runs `serve_policy.py SCENARIO TRANSPORT…` and returns what it printed.
async fn policy(home: &Path, scenario: &str, transport: &[&str]) -> Value {
    let run = Command::new("python3")
        .arg(POLICY)
        .arg(scenario)
        .args(transport)
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

#[tokio::test]
async fn http_needs_the_token_made_once_and_kept_private() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let mut first = serve_http(home.path(), &[]).await;
    // Made on first use, 0600, and shown on stderr this once.
    let path = token_path(home.path());
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", path.display());
    let token = std::fs::read_to_string(&path).unwrap().trim().to_string();
    assert!(token.len() >= 32, "{token}");
    let shown = first.said.iter().filter(|l| l.contains(&token)).count();
    assert_eq!(shown, 1, "{:#?}", first.said);

    let url = first.url.clone();
    let (status, _, _) = post_init(&url, &[]).await;
    assert_eq!(status, 401, "no token");
    let (status, _, _) = post_init(&url, &[("authorization", "Bearer not-the-token")]).await;
    assert_eq!(status, 401, "a wrong token");
    let bearer = format!("Bearer {token}");
    let (status, session, body) = post_init(&url, &[("authorization", &bearer)]).await;
    assert_eq!(status, 200, "{body}");
    assert!(session.is_some());
    assert!(body.contains("\"vibedesk\""), "{body}");

    // The official SDK client with the token gets the read-only tools.
    if python_mcp_available() {
        let seen = policy(home.path(), "default", &["http", &url, &token]).await;
        assert_eq!(seen["tools"], json!(served_by_default()));
    }
    first.child.kill().await.unwrap();

    // A later start reads the same token and does not show it again.
    let mut again = serve_http(home.path(), &[]).await;
    assert!(
        again.said.iter().all(|l| !l.contains(&token)),
        "{:#?}",
        again.said
    );
    assert!(
        again
            .said
            .iter()
            .any(|l| l.contains(&path.display().to_string())),
        "{:#?}",
        again.said
    );
    let (status, _, _) = post_init(&again.url, &[("authorization", &bearer)]).await;
    assert_eq!(status, 200);
    let (status, _, _) = post_init(&again.url, &[]).await;
    assert_eq!(status, 401);
    again.child.kill().await.unwrap();
}

#[tokio::test]
async fn no_token_opts_out_on_loopback_only() {
    let home = tempfile::tempdir().unwrap();
    let mut open = serve_http(home.path(), &["--no-token"]).await;
    let (status, _, body) = post_init(&open.url, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert!(!token_path(home.path()).exists(), "no token was made");
    open.child.kill().await.unwrap();

    let out = vibedesk(home.path())
        .args(["mcp", "serve", "--http", "0.0.0.0:0", "--no-token"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--no-token is for loopback"), "{stderr}");
}

#[tokio::test]
async fn a_browser_page_of_another_origin_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let mut served = serve_http(home.path(), &[]).await;
    let token = std::fs::read_to_string(token_path(home.path())).unwrap();
    let bearer = format!("Bearer {}", token.trim());
    let port = served
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .trim_end_matches("/mcp");
    for evil in ["http://evil.example", "http://127.0.0.1:1", "null"] {
        let (status, _, body) =
            post_init(&served.url, &[("authorization", &bearer), ("origin", evil)]).await;
        assert_eq!(status, 403, "{evil}: {body}");
    }
    // The server's own loopback origin, by any name, and no Origin at all.
    for own in [
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
    ] {
        let (status, _, body) =
            post_init(&served.url, &[("authorization", &bearer), ("origin", &own)]).await;
        assert_eq!(status, 200, "{own}: {body}");
    }
    served.child.kill().await.unwrap();
}

#[tokio::test]
async fn sessions_are_capped_and_expire_when_idle() {
    let home = tempfile::tempdir().unwrap();
    let mut served = serve_http(
        home.path(),
        &["--no-token", "--max-sessions", "2", "--session-idle", "2"],
    )
    .await;
    let url = served.url.clone();
    let (a, sa, _) = post_init(&url, &[]).await;
    let (b, sb, _) = post_init(&url, &[]).await;
    assert_eq!((a, b), (200, 200));
    let (sa, sb) = (sa.unwrap(), sb.unwrap());
    assert_ne!(sa, sb);
    // Past the cap a new client is refused, saying why and when.
    let (c, _, body) = post_init(&url, &[]).await;
    assert_eq!(c, 503, "{body}");
    assert!(body.contains("2 MCP sessions are open"), "{body}");
    assert!(body.contains("after 2 s"), "{body}");

    // Idle sessions close and free their places; their ids are gone.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (d, sd, body) = post_init(&url, &[]).await;
    assert_eq!(d, 200, "{body}");
    assert!(sd.is_some());
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let old = reqwest::Client::new()
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &sa)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(old.status().as_u16(), 404, "an expired session");
    served.child.kill().await.unwrap();
}

/// Runs `vibedesk run` offline with a prompt that carries a secret, so a
/// transcript holds it.
async fn plant_transcript(home: &Path) {
    let out = vibedesk(home)
        .args([
            "run",
            "-p",
            "Note for later: the broker password hunter2-XYZ. Now show the last close of IBM.",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.code().is_some(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sessions = home.join("data").join("sessions");
    let mut found = false;
    for dir in std::fs::read_dir(&sessions).unwrap() {
        let log = dir.unwrap().path().join("messages.jsonl");
        found |= std::fs::read_to_string(log).is_ok_and(|t| t.contains("hunter2-XYZ"));
    }
    assert!(found, "the transcript holds the secret");
}

#[tokio::test]
async fn by_default_memory_is_read_only_and_sessions_are_private() {
    if !python_mcp_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    plant_transcript(home.path()).await;
    let seen = policy(home.path(), "default", &["stdio", BIN]).await;
    let tools: Vec<&str> = seen["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(tools, served_by_default());
    let refused = seen["remember"]["protocol_error"].as_str().unwrap();
    assert!(refused.contains("--allow-memory-write"), "{refused}");
    let refused = seen["session_search"]["protocol_error"].as_str().unwrap();
    assert!(refused.contains("--allow-sessions"), "{refused}");
    assert!(!seen.to_string().contains("hunter2"), "{seen:#}");
    // Nothing was written to memory.
    assert_eq!(memory_files(home.path()), Vec::<std::path::PathBuf>::new());
}

#[tokio::test]
async fn with_allow_sessions_a_transcript_comes_back_redacted() {
    if !python_mcp_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    plant_transcript(home.path()).await;
    let seen = policy(home.path(), "sessions", &["stdio", BIN, "--allow-sessions"]).await;
    let search = &seen["search"];
    assert_eq!(search["is_error"], false, "{search:#}");
    let results = search["structured"]["results"].as_array().unwrap();
    assert!(!results.is_empty(), "{search:#}");
    let all = search.to_string();
    assert!(all.contains("password [redacted]"), "{search:#}");
    assert!(!all.contains("hunter2"), "{search:#}");
}

#[tokio::test]
async fn a_clients_memory_is_marked_and_never_recalled_as_the_users_words() {
    if !python_mcp_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    // The user's own memory, added with the CLI.
    let out = vibedesk(home.path())
        .args([
            "memory",
            "add",
            "--title",
            "Fee schedule",
            "--keywords",
            "AAPL,backtest,fees",
            "--content",
            "Commission 0.1% per side for every AAPL backtest.",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let seen = policy(
        home.path(),
        "plant",
        &["stdio", BIN, "--allow-memory-write"],
    )
    .await;
    assert_eq!(seen["saved"]["is_error"], false, "{seen:#}");
    // The user's memory cannot be forgotten, replaced or reinforced.
    for attempt in ["forget_user", "overwrite_user", "reinforce_user"] {
        assert_eq!(seen[attempt]["is_error"], true, "{attempt}: {seen:#}");
        let text = seen[attempt]["text"].as_str().unwrap();
        assert!(text.contains("memory_protected"), "{attempt}: {text}");
    }
    // Its own note it may forget.
    assert_eq!(seen["forget_own"]["is_error"], false, "{seen:#}");
    // Recall shows both, the outside one marked with its source.
    let memories = seen["recall"]["structured"]["memories"].as_array().unwrap();
    let source_of = |title: &str| {
        memories
            .iter()
            .find(|m| m["title"] == title)
            .unwrap_or_else(|| panic!("{title} not recalled: {memories:#?}"))["source"]
            .clone()
    };
    assert_eq!(source_of("Deploy routine"), "mcp:probe-client");
    assert_eq!(source_of("Fee schedule"), Value::Null);

    let files: Vec<String> = memory_files(home.path())
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let planted = files.iter().find(|t| t.contains("evil.example")).unwrap();
    assert!(
        planted.contains("\nsource: mcp:probe-client\n"),
        "{planted}"
    );
    let own = files
        .iter()
        .find(|t| t.contains("Commission 0.1%"))
        .unwrap();
    assert!(!own.contains("source:"), "{own}");

    // A real run whose message matches both: the model is sent the user's
    // memory and not the planted one, in the recall block or the prompt.
    let server = TestServer::start(vec![text_reply("Noted.")]).await;
    let out = vibedesk(home.path())
        .env("OPENAI_API_KEY", "sk-test-serve-guard-0123456789")
        .args([
            "run",
            "--provider",
            "openai",
            "--base-url",
            &server.base_url(),
            "--model",
            "m1",
            "-p",
            "Plan the deploy routine for an AAPL backtest with the fee schedule",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = server.requests();
    let sent = requests[0].raw_body.clone();
    assert!(sent.contains("<recalled-memories>"), "{sent}");
    assert!(sent.contains("Commission 0.1% per side"), "{sent}");
    assert!(!sent.contains("evil.example"), "{sent}");
    assert!(!sent.contains("Deploy routine"), "{sent}");
    // The key, taken out of the environment at start, still reached the
    // provider.
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-test-serve-guard-0123456789")
    );
}
