//! `OpenAiProvider` through `stream_response`, against the hand-written
//! HTTP/1.1 [`TestServer`]: real sockets, real SSE bytes (spec §2.11).

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use vibedesk::llm::assemble::LiveDelta;
use vibedesk::llm::openai::{OpenAiConfig, OpenAiProvider};
use vibedesk::llm::{CallOptions, ChatRequest, LlmError, Response, stream_response};
use vibedesk::model::{Message, ToolCall, ToolSpec, Usage};

use crate::support::server::{
    Part, REPLY_MODEL, REPLY_USAGE, Reply, TestServer, json_reply, raw, rechunk, retry_after_reply,
    sse_chunk, sse_data, sse_done, sse_usage, status_reply, text_reply, tool_call_reply,
};

const KEY: &str = "sk-test-4f9a2b7c1d8e";

fn config(base_url: String, api_key: Option<&str>) -> OpenAiConfig {
    OpenAiConfig {
        provider_name: "openai".into(),
        base_url,
        model: "gpt-test".into(),
        api_key: api_key.map(String::from),
        connect_timeout: Duration::from_secs(5),
        send_reasoning_content: false,
        temperature: None,
        max_tokens: None,
        extra_headers: vec![],
        discovery: vibedesk::llm::window::WindowDiscovery::None,
    }
}

fn provider(server: &TestServer) -> OpenAiProvider {
    OpenAiProvider::new(config(server.base_url(), Some(KEY))).expect("provider")
}

/// Generous deadlines: they only stop a broken test from hanging.
fn options() -> CallOptions {
    CallOptions {
        idle_timeout: Some(Duration::from_secs(5)),
        call_timeout: Some(Duration::from_secs(20)),
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::system("You are terse."), Message::user("Hi")].into(),
        ..ChatRequest::default()
    }
}

struct Outcome {
    result: Result<Response, LlmError>,
    text_deltas: Vec<String>,
    reasoning_deltas: Vec<String>,
}

async fn call_with(p: &OpenAiProvider, request: ChatRequest, options: CallOptions) -> Outcome {
    let mut text_deltas = Vec::new();
    let mut reasoning_deltas = Vec::new();
    let mut sink = |d: LiveDelta<'_>| match d {
        LiveDelta::Text(t) => text_deltas.push(t.to_string()),
        LiveDelta::Reasoning(r) => reasoning_deltas.push(r.to_string()),
        LiveDelta::Held(_) => {}
    };
    let result = stream_response(p, request, options, &CancellationToken::new(), &mut sink).await;
    Outcome {
        result,
        text_deltas,
        reasoning_deltas,
    }
}

async fn call(server: &TestServer) -> Outcome {
    call_with(&provider(server), request(), options()).await
}

async fn ok(server: &TestServer) -> Response {
    match call(server).await.result {
        Ok(r) => r,
        Err(e) => panic!("expected a reply, got {e:?}"),
    }
}

async fn err(server: &TestServer) -> LlmError {
    match call(server).await.result {
        Ok(r) => panic!("expected an error, got {r:?}"),
        Err(e) => e,
    }
}

// ---- Streaming ------------------------------------------------------------

#[tokio::test]
async fn text_streams_with_live_deltas() {
    let text = "Hello there, this answer arrives in several streamed pieces.";
    let server = TestServer::start(vec![text_reply(text)]).await;
    let out = call(&server).await;
    let r = out.result.expect("reply");
    assert_eq!(r.content, text);
    assert!(out.text_deltas.len() > 1, "{:?}", out.text_deltas);
    assert_eq!(out.text_deltas.concat(), text);
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert!(r.tool_calls.is_empty());
    assert!(!r.content_filtered && !r.cancelled);
}

#[tokio::test]
async fn usage_and_model_are_read() {
    let server = TestServer::start(vec![text_reply("short")]).await;
    let r = ok(&server).await;
    let (input, output, total) = REPLY_USAGE;
    assert_eq!(
        r.usage,
        Some(Usage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: total
        })
    );
    assert_eq!(r.model.as_deref(), Some(REPLY_MODEL));
}

#[tokio::test]
async fn reasoning_from_reasoning_content_and_reasoning() {
    for field in ["reasoning_content", "reasoning"] {
        let server = TestServer::start(vec![Reply::Stream(vec![
            sse_chunk(
                json!({"role": "assistant", "content": null, field: "First, "}),
                None,
            ),
            sse_chunk(json!({"content": null, field: "think."}), None),
            sse_chunk(json!({"content": "Answer."}), None),
            sse_chunk(json!({}), Some("stop")),
            sse_done(),
        ])])
        .await;
        let out = call(&server).await;
        let r = out.result.expect("reply");
        assert_eq!(r.reasoning, "First, think.", "field {field}");
        assert_eq!(out.reasoning_deltas, ["First, ", "think."], "field {field}");
        assert_eq!(r.content, "Answer.", "field {field}");
    }
}

#[tokio::test]
async fn interleaved_tool_call_fragments_assemble() {
    let call_delta = |v: Value| sse_chunk(json!({"tool_calls": [v]}), None);
    let server = TestServer::start(vec![Reply::Stream(vec![
        sse_chunk(json!({"role": "assistant", "content": null}), None),
        call_delta(json!({"index": 0, "id": "call_a", "type": "function",
            "function": {"name": "read_file", "arguments": ""}})),
        call_delta(json!({"index": 1, "id": "call_b", "type": "function",
            "function": {"name": "list_dir", "arguments": "{\"pa"}})),
        call_delta(json!({"index": 0, "function": {"arguments": "{\"path\":"}})),
        call_delta(json!({"index": 1, "function": {"arguments": "th\":\"src\"}"}})),
        call_delta(json!({"index": 0, "function": {"arguments": "\"a.txt\"}"}})),
        sse_chunk(json!({}), Some("tool_calls")),
        sse_usage(),
        sse_done(),
    ])])
    .await;
    let r = ok(&server).await;
    assert_eq!(
        r.tool_calls,
        vec![
            ToolCall::new("call_a", "read_file", r#"{"path":"a.txt"}"#),
            ToolCall::new("call_b", "list_dir", r#"{"path":"src"}"#),
        ]
    );
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(r.content, "");
}

#[tokio::test]
async fn tool_call_reply_builder_round_trips() {
    let args_a = r#"{"path":"notes/plan.md","max_lines":200}"#;
    let args_b = r#"{"query":"momentum strategy"}"#;
    let server = TestServer::start(vec![tool_call_reply(&[
        ("call_1", "read_file", args_a),
        ("call_2", "search", args_b),
    ])])
    .await;
    let r = ok(&server).await;
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(
        r.tool_calls[0],
        ToolCall::new("call_1", "read_file", args_a)
    );
    assert_eq!(r.tool_calls[1], ToolCall::new("call_2", "search", args_b));
    assert!(r.usage.is_some());
}

#[tokio::test]
async fn content_filter_is_flagged() {
    let server = TestServer::start(vec![Reply::Stream(vec![
        sse_chunk(json!({"content": "I can"}), None),
        sse_chunk(json!({}), Some("content_filter")),
        sse_done(),
    ])])
    .await;
    let r = ok(&server).await;
    assert!(r.content_filtered);
    assert_eq!(r.finish_reason.as_deref(), Some("content_filter"));
}

#[tokio::test]
async fn doubled_finish_reason_is_normalised() {
    let server = TestServer::start(vec![Reply::Stream(vec![
        sse_chunk(json!({"content": "ok"}), None),
        sse_chunk(json!({}), Some("stopstop")),
        sse_done(),
    ])])
    .await;
    let r = ok(&server).await;
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert!(!r.content_filtered);
}

#[tokio::test]
async fn bytes_split_anywhere_with_crlf_and_comments_decode() {
    let text = "héllo wörld ✓ 🦀 — split everywhere";
    // CRLF line endings and a keep-alive comment, cut into 1- and 3-byte
    // HTTP chunks so lines, CRLF pairs and UTF-8 characters all straddle.
    let crlf = |reply: Reply| match reply {
        Reply::Stream(parts) => {
            let mut out = vec![raw(": OPENROUTER PROCESSING\r\n\r\n")];
            for p in parts {
                if let Part::Bytes(b) = p {
                    let s = String::from_utf8(b).expect("utf8");
                    out.push(raw(&s.replace('\n', "\r\n")));
                }
            }
            Reply::Stream(out)
        }
        other => other,
    };
    for size in [1, 3] {
        let server = TestServer::start(vec![rechunk(crlf(text_reply(text)), size)]).await;
        let r = ok(&server).await;
        assert_eq!(r.content, text, "chunk size {size}");
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
        assert!(r.usage.is_some());
    }
}

#[tokio::test]
async fn plain_json_answer_is_accepted() {
    let completion = json!({
        "id": "chatcmpl-plain",
        "object": "chat.completion",
        "model": "gpt-test-2025",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Not streamed.",
                "reasoning_content": "Server ignored stream.",
                "tool_calls": [{"id": "call_x", "type": "function",
                    "function": {"name": "read_file", "arguments": "{\"path\":\"x\"}"}}],
            },
            "finish_reason": "tool_calls",
        }],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
    });
    let server = TestServer::start(vec![json_reply(200, &completion)]).await;
    let out = call(&server).await;
    let r = out.result.expect("reply");
    assert_eq!(r.content, "Not streamed.");
    assert_eq!(out.text_deltas.concat(), "Not streamed.");
    assert_eq!(r.reasoning, "Server ignored stream.");
    assert_eq!(
        r.tool_calls,
        vec![ToolCall::new("call_x", "read_file", r#"{"path":"x"}"#)]
    );
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(r.usage.map(|u| u.total_tokens), Some(25));
    assert_eq!(r.model.as_deref(), Some("gpt-test-2025"));
}

#[tokio::test]
async fn event_stream_labelled_as_json_is_still_decoded() {
    let mut body = String::new();
    for part in [
        sse_chunk(json!({"content": "mislabelled "}), None),
        sse_chunk(json!({"content": "stream"}), Some("stop")),
        sse_done(),
    ] {
        if let Part::Bytes(b) = part {
            body.push_str(&String::from_utf8(b).expect("utf8"));
        }
    }
    let server = TestServer::start(vec![Reply::Status {
        status: 200,
        headers: vec![("Content-Type".into(), "application/json".into())],
        body,
    }])
    .await;
    let r = ok(&server).await;
    assert_eq!(r.content, "mislabelled stream");
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
}

// ---- Stream failures ------------------------------------------------------

#[tokio::test]
async fn drop_mid_stream_is_a_retryable_stream_error() {
    let server = TestServer::start(vec![Reply::Stream(vec![
        sse_chunk(json!({"content": "partial "}), None),
        sse_chunk(json!({"content": "answer"}), None),
        Part::Drop,
    ])])
    .await;
    let e = err(&server).await;
    assert!(matches!(e, LlmError::Stream(_)), "{e:?}");
    assert!(e.retryable());
    assert!(
        e.to_string().contains("closed before the reply finished"),
        "{e}"
    );
}

#[tokio::test]
async fn eof_before_finish_is_an_error_but_after_finish_is_accepted() {
    // Clean end of body, no finish reason, no [DONE]: the reply was cut off.
    let server = TestServer::start(vec![
        Reply::Stream(vec![sse_chunk(json!({"content": "half"}), None)]),
        // Finish reason seen, then the body ends without [DONE].
        Reply::Stream(vec![
            sse_chunk(json!({"content": "whole"}), None),
            sse_chunk(json!({}), Some("stop")),
        ]),
        // Finish reason seen, then the socket is reset before [DONE]. The
        // pause lets the client read the finish chunk before the reset.
        Reply::Stream(vec![
            sse_chunk(json!({"content": "whole"}), None),
            sse_chunk(json!({}), Some("stop")),
            Part::Delay(Duration::from_millis(50)),
            Part::Drop,
        ]),
    ])
    .await;
    let e = err(&server).await;
    assert!(matches!(e, LlmError::Stream(_)) && e.retryable(), "{e:?}");
    for _ in 0..2 {
        let r = ok(&server).await;
        assert_eq!(r.content, "whole");
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    }
}

#[tokio::test]
async fn stall_hits_the_idle_timeout() {
    let server = TestServer::start(vec![Reply::Stream(vec![
        sse_chunk(json!({"content": "thinking about it"}), None),
        Part::Stall,
    ])])
    .await;
    let opts = CallOptions {
        idle_timeout: Some(Duration::from_millis(300)),
        call_timeout: Some(Duration::from_secs(20)),
    };
    let started = Instant::now();
    let out = call_with(&provider(&server), request(), opts).await;
    let e = out.result.expect_err("stall must time out");
    assert!(
        matches!(e, LlmError::IdleTimeout(d) if d == Duration::from_millis(300)),
        "{e:?}"
    );
    assert!(e.retryable());
    assert!(started.elapsed() < Duration::from_secs(5));
    // What arrived before the stall was shown live.
    assert_eq!(out.text_deltas.concat(), "thinking about it");
}

#[tokio::test]
async fn error_chunk_in_stream_is_a_stream_error() {
    let server = TestServer::start(vec![Reply::Stream(vec![
        sse_chunk(json!({"content": "par"}), None),
        sse_data(&json!({"error": {"message": "upstream provider overloaded", "code": 502}})),
        sse_done(),
    ])])
    .await;
    let e = err(&server).await;
    assert!(
        matches!(&e, LlmError::Stream(m) if m == "upstream provider overloaded"),
        "{e:?}"
    );

    // The `event: error` form some relays use, with a plain-text payload.
    let server = TestServer::start(vec![Reply::Stream(vec![
        raw("event: error\ndata: quota exhausted\n\n"),
        sse_done(),
    ])])
    .await;
    let e = err(&server).await;
    assert!(
        matches!(&e, LlmError::Stream(m) if m == "quota exhausted"),
        "{e:?}"
    );
}

#[tokio::test]
async fn invalid_json_event_is_a_protocol_error_with_a_preview() {
    let server = TestServer::start(vec![Reply::Stream(vec![
        sse_chunk(json!({"content": "ok"}), None),
        raw("data: {\"choices\": [oops\n\n"),
        sse_done(),
    ])])
    .await;
    let e = err(&server).await;
    assert!(matches!(e, LlmError::Protocol(_)), "{e:?}");
    assert!(e.to_string().contains("[oops"), "{e}");
}

// ---- HTTP and connection errors -------------------------------------------

#[tokio::test]
async fn rate_limit_carries_retry_after() {
    let server = TestServer::start(vec![retry_after_reply(429, 2)]).await;
    let e = err(&server).await;
    match &e {
        LlmError::Http {
            status: 429,
            retry_after,
            message,
        } => {
            assert_eq!(*retry_after, Some(Duration::from_secs(2)));
            assert!(message.contains("Rate limit reached"), "{message}");
        }
        other => panic!("expected HTTP 429, got {other:?}"),
    }
    assert!(e.retryable());
    assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
}

#[tokio::test]
async fn server_error_is_retryable() {
    let server = TestServer::start(vec![status_reply(500, "upstream exploded")]).await;
    let e = err(&server).await;
    assert!(
        matches!(&e, LlmError::Http { status: 500, message, retry_after: None } if message == "upstream exploded"),
        "{e:?}"
    );
    assert!(e.retryable());
}

#[tokio::test]
async fn unauthorized_is_final_and_shows_the_provider_message_without_the_key() {
    // Servers sometimes echo the key they rejected.
    let body = json!({"error": {
        "message": format!("Incorrect API key provided: {KEY}. You can find your API key at the dashboard."),
        "type": "invalid_request_error",
        "code": "invalid_api_key",
    }});
    let server = TestServer::start(vec![json_reply(401, &body)]).await;
    let e = err(&server).await;
    assert!(matches!(e, LlmError::Http { status: 401, .. }), "{e:?}");
    assert!(!e.retryable());
    let text = e.to_string();
    assert!(text.contains("Incorrect API key provided"), "{text}");
    assert!(text.contains("You can find your API key"), "{text}");
    assert!(!text.contains(KEY), "{text}");
}

#[tokio::test]
async fn html_404_points_at_the_base_url() {
    let page = "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\
                <body><h1>Not Found</h1></body></html>";
    let server = TestServer::start(vec![status_reply(404, page)]).await;
    let e = err(&server).await;
    assert!(matches!(e, LlmError::Http { status: 404, .. }), "{e:?}");
    assert!(!e.retryable());
    let text = e.to_string();
    assert!(text.contains(&server.base_url()), "{text}");
    assert!(text.contains("HTML"), "{text}");
    assert!(text.contains("/v1"), "{text}");
    assert!(!text.contains("<body>"), "{text}");
}

#[tokio::test]
async fn connection_refused_is_a_retryable_connect_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    }; // dropped: nothing listens there now
    let base = format!("http://127.0.0.1:{port}/v1");
    let p = OpenAiProvider::new(config(base.clone(), Some(KEY))).expect("provider");
    let e = call_with(&p, request(), options())
        .await
        .result
        .expect_err("nothing listens");
    match &e {
        LlmError::Connect { url, .. } => assert_eq!(url, &format!("{base}/chat/completions")),
        other => panic!("expected Connect, got {other:?}"),
    }
    assert!(e.retryable());
    assert!(!e.to_string().contains(KEY));
}

// ---- What is sent -----------------------------------------------------------

#[tokio::test]
async fn request_body_shape() {
    let server = TestServer::start(vec![text_reply("one"), text_reply("two")]).await;
    let mut cfg = config(server.base_url(), Some(KEY));
    cfg.temperature = Some(0.2);
    let p = OpenAiProvider::new(cfg).expect("provider");

    call_with(&p, request(), options())
        .await
        .result
        .expect("first");
    let tool = ToolSpec {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    };
    let with_tools = ChatRequest {
        messages: vec![
            Message::user("Read a.txt"),
            Message::assistant_tool_calls(
                "",
                vec![ToolCall::new("call_1", "read_file", r#"{"path":"a.txt"}"#)],
                Some("hidden reasoning".into()),
            ),
            Message::tool_result("call_1", "read_file", "file body"),
        ]
        .into(),
        tools: vec![tool.clone()].into(),
        temperature: Some(0.7),
        max_tokens: Some(256),
        // Only the offline planner reads it; it is never sent.
        user_request: Some("Read a.txt".into()),
        text_tool_calls: false,
    };
    call_with(&p, with_tools, options())
        .await
        .result
        .expect("second");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/v1/chat/completions");
    assert!(
        first
            .header("content-type")
            .is_some_and(|v| v.contains("application/json"))
    );
    let b = &first.body;
    assert_eq!(b["model"], "gpt-test");
    assert_eq!(b["stream"], true);
    assert_eq!(b["stream_options"]["include_usage"], true);
    assert!(b.get("tools").is_none(), "{b}");
    assert!(b.get("max_tokens").is_none(), "{b}");
    assert_eq!(b["temperature"], json!(0.2));
    assert_eq!(
        b["messages"],
        json!([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}])
    );

    let b = &requests[1].body;
    assert!(b.get("user_request").is_none(), "{b}");
    assert_eq!(b["tools"], json!([tool.to_openai()]));
    assert_eq!(b["temperature"], json!(0.7));
    assert_eq!(b["max_tokens"], 256);
    let assistant = &b["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert!(assistant["content"].is_null(), "{assistant}");
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
    assert_eq!(assistant["tool_calls"][0]["type"], "function");
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "read_file");
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        r#"{"path":"a.txt"}"#
    );
    // send_reasoning_content is off.
    assert!(assistant.get("reasoning_content").is_none(), "{assistant}");
    let tool_msg = &b["messages"][2];
    assert_eq!(
        *tool_msg,
        json!({"role": "tool", "content": "file body", "tool_call_id": "call_1", "name": "read_file"})
    );
}

#[tokio::test]
async fn reasoning_content_is_sent_back_only_when_enabled() {
    let server = TestServer::start(vec![text_reply("ok")]).await;
    let mut cfg = config(server.base_url(), None);
    cfg.send_reasoning_content = true;
    let p = OpenAiProvider::new(cfg).expect("provider");
    let req = ChatRequest {
        messages: vec![
            Message::user("q"),
            Message::assistant_tool_calls(
                "visible",
                vec![ToolCall::new("c", "f", "{}")],
                Some("chain".into()),
            ),
            Message::tool_result("c", "f", "r"),
        ]
        .into(),
        ..ChatRequest::default()
    };
    call_with(&p, req, options()).await.result.expect("reply");
    let assistant = &server.requests()[0].body["messages"][1];
    assert_eq!(assistant["reasoning_content"], "chain");
    assert_eq!(assistant["content"], "visible");
}

#[tokio::test]
async fn authorization_header_only_with_a_key() {
    let server = TestServer::start(vec![text_reply("a"), text_reply("b")]).await;
    let mut with_key = config(server.base_url(), Some(KEY));
    with_key.extra_headers = vec![("X-Title".into(), "vibedesk-tests".into())];
    let p = OpenAiProvider::new(with_key).expect("provider");
    call_with(&p, request(), options())
        .await
        .result
        .expect("with key");
    let p = OpenAiProvider::new(config(server.base_url(), None)).expect("provider");
    call_with(&p, request(), options())
        .await
        .result
        .expect("without key");

    let requests = server.requests();
    let expected = format!("Bearer {KEY}");
    assert_eq!(requests[0].header("authorization"), Some(expected.as_str()));
    assert_eq!(requests[0].header("x-title"), Some("vibedesk-tests"));
    assert_eq!(requests[1].header("authorization"), None);
    assert_eq!(requests[1].header("x-title"), None);
}

// ---- list_models ------------------------------------------------------------

#[tokio::test]
async fn list_models_parses_ids() {
    let body = json!({"object": "list", "data": [
        {"id": "gpt-4o", "object": "model", "owned_by": "openai"},
        {"id": "o3-mini", "object": "model"},
    ]});
    let server = TestServer::start(vec![
        json_reply(200, &body),
        status_reply(401, "{\"error\":\"bad key\"}"),
    ])
    .await;
    let p = provider(&server);
    assert_eq!(
        p.list_models().await.expect("models"),
        ["gpt-4o", "o3-mini"]
    );
    let req = &server.requests()[0];
    assert_eq!(req.method, "GET");
    assert_eq!(req.path, "/v1/models");
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let e = p.list_models().await.expect_err("401");
    assert!(
        matches!(&e, LlmError::Http { status: 401, message, .. } if message == "bad key"),
        "{e:?}"
    );
}

// ---- The test server itself -------------------------------------------------

/// Reads one `Content-Length` response from a raw socket.
async fn read_response(socket: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> (u16, String) {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let status: u16 = head[9..12].parse().expect("status");
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .expect("content-length")
                .trim()
                .parse()
                .expect("length");
            if buf.len() >= end + 4 + len {
                let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).into_owned();
                buf.drain(..end + 4 + len);
                return (status, body);
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(5), socket.read(&mut chunk))
            .await
            .expect("read timeout")
            .expect("read");
        assert!(n > 0, "server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test]
async fn server_keeps_alive_reads_chunked_bodies_and_reports_running_out() {
    let server = TestServer::start(vec![
        status_reply(200, "{\"n\":1}"),
        status_reply(201, "second"),
    ])
    .await;
    let mut socket = tokio::net::TcpStream::connect(server.addr())
        .await
        .expect("connect");
    let mut buf = Vec::new();

    let body = r#"{"a":1}"#;
    let first = format!(
        "POST /v1/one HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(first.as_bytes()).await.expect("write");
    assert_eq!(
        read_response(&mut socket, &mut buf).await,
        (200, "{\"n\":1}".into())
    );

    let second = "POST /v1/two HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
                  4\r\n{\"b\"\r\n3;ext=1\r\n:2}\r\n0\r\n\r\n";
    socket.write_all(second.as_bytes()).await.expect("write");
    assert_eq!(
        read_response(&mut socket, &mut buf).await,
        (201, "second".into())
    );

    socket
        .write_all(b"GET /v1/three HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let (status, body) = read_response(&mut socket, &mut buf).await;
    assert_eq!(status, 500);
    assert!(body.contains("ran out"), "{body}");

    assert_eq!(server.connection_count(), 1);
    assert_eq!(server.request_count(), 3);
    let requests = server.requests();
    assert_eq!(requests[0].body, json!({"a": 1}));
    assert_eq!(requests[0].header("content-type"), Some("application/json"));
    assert_eq!(requests[1].path, "/v1/two");
    assert_eq!(requests[1].body, json!({"b": 2}));
    assert_eq!(requests[2].method, "GET");
    assert_eq!(requests[2].body, Value::Null);
    assert_eq!(requests[2].raw_body, "");
}

#[tokio::test]
async fn replies_are_served_in_order_across_calls() {
    let server = TestServer::start(vec![
        text_reply("first"),
        status_reply(503, "busy"),
        text_reply("third"),
    ])
    .await;
    let p = provider(&server);
    let r = call_with(&p, request(), options())
        .await
        .result
        .expect("first");
    assert_eq!(r.content, "first");
    let e = call_with(&p, request(), options())
        .await
        .result
        .expect_err("second");
    assert!(
        matches!(e, LlmError::Http { status: 503, .. }) && e.retryable(),
        "{e:?}"
    );
    let r = call_with(&p, request(), options())
        .await
        .result
        .expect("third");
    assert_eq!(r.content, "third");
    let e = call_with(&p, request(), options())
        .await
        .result
        .expect_err("script exhausted");
    assert!(e.to_string().contains("ran out of replies"), "{e}");
    assert_eq!(server.request_count(), 4);
    assert_eq!(server.remaining_replies(), 0);
}
