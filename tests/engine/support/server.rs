//! A scripted model server for provider tests: HTTP/1.1 written by hand on a
//! `TcpListener` bound to 127.0.0.1:0, so tests control every byte (chunk
//! boundaries, abrupt closes, stalls) without a web framework.
//!
//! Replies are served in order, one per request, across all connections.
//! The endpoints a local server is asked its context window on (`GET
//! /props`, `POST /api/show`, docs §3.9) get a 404 that is neither
//! recorded nor served from the script, so that a provider pointed at a
//! loopback URL probes them without using up a test's replies; a server
//! started with [`TestServer::start_with_discovery`] serves them from the
//! script like any other request.
//! Everything is bounded (requests, head and body sizes, read and write
//! waits) so a broken test fails instead of hanging, and dropping the
//! [`TestServer`] aborts every task it started.

// Shared by several test files; not every helper is used by each of them.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// Requests one server answers at most; later ones get a 500 and a close.
pub const MAX_REQUESTS: usize = 1_000;
/// Longest wait for the next bytes of a request (an idle keep-alive
/// connection is closed after this too).
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for a client to accept the bytes of one reply part.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 16 * 1024 * 1024;

/// The model name the canned replies report.
pub const REPLY_MODEL: &str = "test-model-0613";
/// The usage the canned replies report: prompt, completion, total.
pub const REPLY_USAGE: (u64, u64, u64) = (12, 7, 19);

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// `200 OK`, `text/event-stream`, chunked: one HTTP chunk per
    /// [`Part::Bytes`], then the terminating zero chunk unless the parts
    /// end the connection early ([`Part::Drop`], [`Part::Stall`]).
    Stream(Vec<Part>),
    /// A complete response with `Content-Length`. `Content-Type` is guessed
    /// from the body (JSON, HTML or text) unless `headers` name one.
    Status {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Bytes written verbatim with no HTTP framing of our own (status line
    /// included), then the connection is closed: for malformed answers.
    Raw(Vec<Part>),
}

#[derive(Clone, Debug)]
pub enum Part {
    Bytes(Vec<u8>),
    Delay(Duration),
    /// Close the socket abruptly (RST) mid-body.
    Drop,
    /// Stop sending but keep the socket open until the server is dropped.
    Stall,
}

/// A request as the server read it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Names lower-cased, in the order sent.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON, `Null` if it is not JSON.
    pub body: Value,
    pub raw_body: String,
}

impl RecordedRequest {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    requests: Vec<RecordedRequest>,
    /// Connections accepted, for keep-alive assertions.
    connections: usize,
    /// Window-discovery requests are served from the script too.
    discovery: bool,
}

pub struct TestServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// The accept loop; it owns the connection tasks in a `JoinSet`, so
    /// aborting it aborts them too.
    task: JoinHandle<()>,
}

impl TestServer {
    pub async fn start(replies: Vec<Reply>) -> TestServer {
        Self::start_inner(replies, false).await
    }

    /// As [`TestServer::start`], with `GET /props` and `POST /api/show`
    /// served from the script (and recorded) like any other request.
    pub async fn start_with_discovery(replies: Vec<Reply>) -> TestServer {
        Self::start_inner(replies, true).await
    }

    async fn start_inner(replies: Vec<Reply>, discovery: bool) -> TestServer {
        let listener = match TcpListener::bind("127.0.0.1:0").await {
            Ok(l) => l,
            Err(e) => panic!("test server cannot bind 127.0.0.1:0: {e}"),
        };
        let addr = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => panic!("test server has no local address: {e}"),
        };
        let state = Arc::new(Mutex::new(State {
            replies: replies.into(),
            discovery,
            ..State::default()
        }));
        let task = tokio::spawn(accept_loop(listener, state.clone()));
        TestServer { addr, state, task }
    }

    /// `http://127.0.0.1:<port>/v1`, as a provider's base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state).requests.clone()
    }

    pub fn request_count(&self) -> usize {
        lock(&self.state).requests.len()
    }

    /// TCP connections accepted so far.
    pub fn connection_count(&self) -> usize {
        lock(&self.state).connections
    }

    /// Replies not yet served.
    pub fn remaining_replies(&self) -> usize {
        lock(&self.state).replies.len()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A poisoned lock only means another test task panicked; the data is fine.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

async fn accept_loop(listener: TcpListener, state: Arc<Mutex<State>>) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        while connections.try_join_next().is_some() {}
        let accepted = {
            let mut s = lock(&state);
            s.connections += 1;
            s.connections
        };
        if accepted > MAX_REQUESTS {
            drop(socket); // every connection carries at least one request
            continue;
        }
        connections.spawn(serve_connection(socket, state.clone()));
    }
}

/// What to do with the connection after a reply.
enum After {
    KeepAlive,
    Close,
    Stall,
}

async fn serve_connection(mut socket: TcpStream, state: Arc<Mutex<State>>) {
    let _ = socket.set_nodelay(true);
    let mut buf = Vec::new();
    loop {
        let Some((request, wants_close)) = read_request(&mut socket, &mut buf).await else {
            return;
        };
        let skip = !lock(&state).discovery && is_discovery(&request);
        if skip {
            let missing = json!({"error": "not found"}).to_string();
            let written = write_status(&mut socket, 404, &[], &missing, wants_close).await;
            if written.is_none() || wants_close {
                return;
            }
            continue;
        }
        let reply = {
            let mut s = lock(&state);
            if s.requests.len() >= MAX_REQUESTS {
                None
            } else {
                let n = s.requests.len() + 1;
                s.requests.push(request);
                Some(s.replies.pop_front().unwrap_or_else(|| ran_out(n)))
            }
        };
        let Some(reply) = reply else {
            let limit =
                json!({"error": {"message": "the test server's request limit was reached"}});
            let _ = write_status(&mut socket, 500, &[], &limit.to_string(), true).await;
            return;
        };
        match write_reply(&mut socket, reply, wants_close).await {
            After::KeepAlive => {}
            After::Close => return,
            After::Stall => std::future::pending::<()>().await,
        }
    }
}

/// A request asking a local server for its context window.
fn is_discovery(r: &RecordedRequest) -> bool {
    (r.method == "GET" && r.path == "/props") || (r.method == "POST" && r.path == "/api/show")
}

fn ran_out(n: usize) -> Reply {
    let body = json!({"error": {
        "message": format!("the test script ran out of replies (request #{n})"),
        "type": "test_server",
    }});
    Reply::Status {
        status: 500,
        headers: vec![],
        body: body.to_string(),
    }
}

async fn read_some(socket: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 8192];
    match tokio::time::timeout(READ_TIMEOUT, socket.read(&mut chunk)).await {
        Ok(Ok(n)) if n > 0 => {
            buf.extend_from_slice(&chunk[..n]);
            Some(())
        }
        _ => None, // EOF, error or timeout: give up on the connection
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Reads one request (head and body) from `buf` plus the socket; leftover
/// bytes (a pipelined next request) stay in `buf`. Returns the request and
/// whether the client asked to close afterwards.
async fn read_request(
    socket: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Option<(RecordedRequest, bool)> {
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        read_some(socket, buf).await?;
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    buf.drain(..head_end + 4);

    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let version = request_line.next().unwrap_or("HTTP/1.1").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            let (n, v) = l.split_once(':')?;
            Some((n.trim().to_ascii_lowercase(), v.trim().to_string()))
        })
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.to_ascii_lowercase())
    };

    if header("expect").is_some_and(|v| v == "100-continue") {
        socket
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .ok()?;
    }
    let chunked = header("transfer-encoding").is_some_and(|v| v.contains("chunked"));
    let body = if chunked {
        read_chunked_body(socket, buf).await?
    } else {
        let len: usize = match header("content-length") {
            Some(v) => v.trim().parse().ok()?,
            None => 0,
        };
        if len > MAX_BODY {
            return None;
        }
        while buf.len() < len {
            read_some(socket, buf).await?;
        }
        buf.drain(..len).collect()
    };

    let connection = header("connection").unwrap_or_default();
    let wants_close = connection.contains("close")
        || (version == "HTTP/1.0" && !connection.contains("keep-alive"));
    let raw_body = String::from_utf8_lossy(&body).into_owned();
    let request = RecordedRequest {
        method,
        path,
        body: serde_json::from_str(&raw_body).unwrap_or(Value::Null),
        raw_body,
        headers,
    };
    Some((request, wants_close))
}

async fn read_chunked_body(socket: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = find(buf, b"\r\n") {
                break i;
            }
            if buf.len() > MAX_HEAD {
                return None;
            }
            read_some(socket, buf).await?;
        };
        let size_line = String::from_utf8_lossy(&buf[..line_end]).into_owned();
        buf.drain(..line_end + 2);
        let size_hex = size_line.split(';').next()?.trim();
        let size = usize::from_str_radix(size_hex, 16).ok()?;
        if size == 0 {
            // Trailers, if any, end with an empty line.
            loop {
                if let Some(i) = find(buf, b"\r\n") {
                    let empty = i == 0;
                    buf.drain(..i + 2);
                    if empty {
                        return Some(body);
                    }
                    continue;
                }
                if buf.len() > MAX_HEAD {
                    return None;
                }
                read_some(socket, buf).await?;
            }
        }
        if body.len() + size > MAX_BODY {
            return None;
        }
        while buf.len() < size + 2 {
            read_some(socket, buf).await?;
        }
        body.extend(buf.drain(..size));
        buf.drain(..2); // the CRLF after the chunk data
    }
}

async fn write(socket: &mut TcpStream, bytes: &[u8]) -> Option<()> {
    match tokio::time::timeout(WRITE_TIMEOUT, socket.write_all(bytes)).await {
        Ok(Ok(())) => Some(()),
        _ => None,
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

fn guess_content_type(body: &str) -> &'static str {
    let t = body.trim_start();
    if serde_json::from_str::<Value>(body).is_ok() {
        "application/json"
    } else if t.starts_with('<') {
        "text/html; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    }
}

async fn write_status(
    socket: &mut TcpStream,
    status: u16,
    headers: &[(String, String)],
    body: &str,
    close: bool,
) -> Option<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
    {
        head.push_str(&format!("Content-Type: {}\r\n", guess_content_type(body)));
    }
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    head.push_str(body);
    write(socket, head.as_bytes()).await
}

async fn write_reply(socket: &mut TcpStream, reply: Reply, close: bool) -> After {
    let done = if close {
        After::Close
    } else {
        After::KeepAlive
    };
    match reply {
        Reply::Status {
            status,
            headers,
            body,
        } => match write_status(socket, status, &headers, &body, close).await {
            Some(()) => done,
            None => After::Close,
        },
        Reply::Stream(parts) => {
            let mut head = String::from(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                 Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n",
            );
            if close {
                head.push_str("Connection: close\r\n");
            }
            head.push_str("\r\n");
            if write(socket, head.as_bytes()).await.is_none() {
                return After::Close;
            }
            for part in parts {
                match part {
                    // An empty chunk would end the body early; skip it.
                    Part::Bytes(b) if b.is_empty() => {}
                    Part::Bytes(b) => {
                        let mut chunk = format!("{:x}\r\n", b.len()).into_bytes();
                        chunk.extend_from_slice(&b);
                        chunk.extend_from_slice(b"\r\n");
                        if write(socket, &chunk).await.is_none() {
                            return After::Close;
                        }
                    }
                    Part::Delay(d) => tokio::time::sleep(d).await,
                    Part::Drop => {
                        let _ = socket.set_zero_linger();
                        return After::Close;
                    }
                    Part::Stall => return After::Stall,
                }
            }
            match write(socket, b"0\r\n\r\n").await {
                Some(()) => done,
                None => After::Close,
            }
        }
        Reply::Raw(parts) => {
            for part in parts {
                match part {
                    Part::Bytes(b) => {
                        if write(socket, &b).await.is_none() {
                            return After::Close;
                        }
                    }
                    Part::Delay(d) => tokio::time::sleep(d).await,
                    Part::Drop => {
                        let _ = socket.set_zero_linger();
                        return After::Close;
                    }
                    Part::Stall => return After::Stall,
                }
            }
            let _ = socket.shutdown().await;
            After::Close
        }
    }
}

// ---- Builders -------------------------------------------------------------

/// `data: <json>\n\n`
pub fn sse_data(json: &Value) -> Part {
    Part::Bytes(format!("data: {json}\n\n").into_bytes())
}

/// `data: [DONE]\n\n`
pub fn sse_done() -> Part {
    Part::Bytes(b"data: [DONE]\n\n".to_vec())
}

/// Raw text as one HTTP chunk (for comments, odd line endings, bad JSON).
pub fn raw(text: &str) -> Part {
    Part::Bytes(text.as_bytes().to_vec())
}

/// One `chat.completion.chunk` object, as OpenAI sends it.
pub fn chunk_json(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": REPLY_MODEL,
        "system_fingerprint": "fp_test",
        "choices": [{
            "index": 0,
            "delta": delta,
            "logprobs": null,
            "finish_reason": finish_reason,
        }],
    })
}

/// `sse_data(chunk_json(delta, finish_reason))`
pub fn sse_chunk(delta: Value, finish_reason: Option<&str>) -> Part {
    sse_data(&chunk_json(delta, finish_reason))
}

/// The trailing usage chunk OpenAI sends with `include_usage`: empty
/// `choices`, [`REPLY_USAGE`].
pub fn sse_usage() -> Part {
    let (prompt, completion, total) = REPLY_USAGE;
    sse_data(&json!({
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": REPLY_MODEL,
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": total,
        },
    }))
}

/// Splits `text` into `n` pieces (by characters, some possibly empty) that
/// concatenate back to it.
pub fn split_pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let n = n.max(1);
    (0..n)
        .map(|i| {
            let from = chars.len() * i / n;
            let to = chars.len() * (i + 1) / n;
            chars[from..to].iter().collect()
        })
        .collect()
}

/// A realistic OpenAI text stream: a role chunk, the content in several
/// chunks, `finish_reason: stop`, a usage chunk, `[DONE]`.
pub fn text_reply(text: &str) -> Reply {
    let mut parts = vec![sse_chunk(json!({"role": "assistant", "content": ""}), None)];
    let pieces = (text.chars().count() / 6).clamp(1, 8);
    for piece in split_pieces(text, pieces)
        .into_iter()
        .filter(|p| !p.is_empty())
    {
        parts.push(sse_chunk(json!({"content": piece}), None));
    }
    parts.push(sse_chunk(json!({}), Some("stop")));
    parts.push(sse_usage());
    parts.push(sse_done());
    Reply::Stream(parts)
}

/// A realistic OpenAI tool-call stream: each call's id and name in its first
/// delta only, its arguments in at least three fragments, then
/// `finish_reason: tool_calls`, usage and `[DONE]`.
pub fn tool_call_reply(calls: &[(&str, &str, &str)]) -> Reply {
    let mut parts = vec![sse_chunk(
        json!({"role": "assistant", "content": null}),
        None,
    )];
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        parts.push(sse_chunk(
            json!({"tool_calls": [{
                "index": index,
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }]}),
            None,
        ));
        let fragments = (arguments.chars().count() / 8).clamp(3, 8);
        for fragment in split_pieces(arguments, fragments) {
            parts.push(sse_chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
                None,
            ));
        }
    }
    parts.push(sse_chunk(json!({}), Some("tool_calls")));
    parts.push(sse_usage());
    parts.push(sse_done());
    Reply::Stream(parts)
}

/// A complete response; `Content-Type` guessed from the body.
pub fn status_reply(status: u16, body: &str) -> Reply {
    Reply::Status {
        status,
        headers: vec![],
        body: body.to_string(),
    }
}

/// A JSON response with an explicit `application/json` type.
pub fn json_reply(status: u16, body: &Value) -> Reply {
    Reply::Status {
        status,
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: body.to_string(),
    }
}

/// An OpenAI-style rate-limit (or overload) answer with `Retry-After`.
pub fn retry_after_reply(status: u16, seconds: u64) -> Reply {
    let body = json!({"error": {
        "message": "Rate limit reached for requests. Please try again later.",
        "type": "requests",
        "param": null,
        "code": "rate_limit_exceeded",
    }});
    Reply::Status {
        status,
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("Retry-After".into(), seconds.to_string()),
        ],
        body: body.to_string(),
    }
}

/// The whole SSE byte stream of a [`Reply::Stream`], re-cut into pieces of
/// `size` bytes (for tests of decoding across arbitrary boundaries).
pub fn rechunk(reply: Reply, size: usize) -> Reply {
    let Reply::Stream(parts) = reply else {
        return reply;
    };
    let mut bytes = Vec::new();
    for part in parts {
        if let Part::Bytes(b) = part {
            bytes.extend(b);
        }
    }
    Reply::Stream(
        bytes
            .chunks(size.max(1))
            .map(|c| Part::Bytes(c.to_vec()))
            .collect(),
    )
}
