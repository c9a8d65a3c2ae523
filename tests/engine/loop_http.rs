//! The real loop against the loopback OpenAI-compatible server: what the
//! client sends (tools withheld on the last iteration, steering messages,
//! retry counts) and how it survives the server's faults.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::agent::LoopConfig;
use vibedesk::agent::events::{AgentEvent, RunStatus};
use vibedesk::llm::openai::{OpenAiConfig, OpenAiProvider};
use vibedesk::store::read_trace;

use crate::support::harness::*;
use crate::support::server::{
    Part, Reply, TestServer, retry_after_reply, sse_chunk, sse_done, status_reply, text_reply,
    tool_call_reply,
};

fn provider(server: &TestServer) -> Arc<OpenAiProvider> {
    Arc::new(
        OpenAiProvider::new(OpenAiConfig {
            provider_name: "custom".into(),
            base_url: server.base_url(),
            model: "loop-test".into(),
            api_key: Some("sk-loop-test-key-0001".into()),
            connect_timeout: Duration::from_secs(5),
            send_reasoning_content: false,
            temperature: None,
            max_tokens: None,
            extra_headers: vec![],
            discovery: vibedesk::llm::window::WindowDiscovery::None,
        })
        .expect("provider"),
    )
}

fn config(max_iterations: u32) -> LoopConfig {
    LoopConfig {
        max_iterations,
        llm_timeout: Some(Duration::from_secs(20)),
        idle_timeout: Some(Duration::from_secs(5)),
        ..test_config()
    }
}

fn messages(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().expect("messages array")
}

#[tokio::test]
async fn a_full_turn_with_tools_then_a_forced_text_answer() {
    let home = Home::new();
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join("notes.md"), "alpha\nbeta\n").unwrap();
    let server = TestServer::start(vec![
        tool_call_reply(&[
            ("call_a", "list_dir", "{}"),
            ("call_b", "read_file", r#"{"path":"notes.md"}"#),
        ]),
        text_reply("The notes say alpha and beta."),
    ])
    .await;
    let ran = run_with(
        &home,
        provider(&server),
        registry_with(vec![]),
        config(2),
        "What do my notes say?",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    assert_eq!(ran.outcome.content, "The notes say alpha and beta.");
    assert_eq!(ran.outcome.usage.total_tokens, 38, "two usage chunks of 19");

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(reqs[0].body["stream"], true);
    let offered = registry_with(vec![]).len();
    assert!(
        reqs[0].body["tools"]
            .as_array()
            .is_some_and(|t| t.len() == offered),
        "every registered tool is offered"
    );
    assert!(
        reqs[1].body.get("tools").is_none(),
        "tools withheld on the last iteration"
    );
    let second = messages(&reqs[1].body);
    assert_eq!(second[0]["role"], "system");
    assert!(second.iter().skip(1).all(|m| m["role"] != "system"));
    let assistant = second.iter().find(|m| m["role"] == "assistant").unwrap();
    assert!(assistant["content"].is_null());
    assert_eq!(
        assistant["tool_calls"][1]["function"]["arguments"],
        r#"{"path":"notes.md"}"#
    );
    let results: Vec<&Value> = second.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["tool_call_id"], "call_a");
    assert_eq!(results[1]["tool_call_id"], "call_b");
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .contains("alpha\\nbeta")
    );

    let state = read_json(&ran.outcome.run_dir.join("state.json"));
    assert_eq!(state["status"], "success");
    let trace = read_trace(&home.session_dir(), None).unwrap();
    assert_eq!(trace.skipped_lines, 0);
    assert!(
        trace
            .records
            .iter()
            .any(|r| r["type"] == "forced_text_only")
    );
}

#[tokio::test]
async fn rate_limit_is_retried_once_after_retry_after() {
    let home = Home::new();
    let server = TestServer::start(vec![
        retry_after_reply(429, 1),
        text_reply("Hello after the wait."),
    ])
    .await;
    let started = std::time::Instant::now();
    let ran = run_with(
        &home,
        provider(&server),
        registry_with(vec![]),
        config(5),
        "hi",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    assert_eq!(server.request_count(), 2);
    let reset = ran.events.iter().find_map(|e| match e {
        AgentEvent::StreamReset {
            retry_in_ms, error, ..
        } => Some((*retry_in_ms, error.clone())),
        _ => None,
    });
    let (wait, error) = reset.expect("a stream_reset event");
    assert_eq!(wait, 1000, "Retry-After: 1 honoured");
    assert!(error.contains("429"), "{error}");
    assert!(started.elapsed() >= Duration::from_millis(950));
}

#[tokio::test]
async fn a_dropped_stream_is_retried_and_its_text_voided() {
    let home = Home::new();
    let dropped = Reply::Stream(vec![
        sse_chunk(json!({"role": "assistant", "content": "Half an ans"}), None),
        Part::Drop,
    ]);
    let server = TestServer::start(vec![dropped, text_reply("A whole answer.")]).await;
    let ran = run_with(
        &home,
        provider(&server),
        registry_with(vec![]),
        config(5),
        "hi",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    assert_eq!(ran.outcome.content, "A whole answer.");
    assert_eq!(server.request_count(), 2);
    let kinds = ran.kinds();
    let reset = kinds
        .iter()
        .position(|k| k == "stream_reset")
        .expect("stream_reset");
    let first_text = kinds.iter().position(|k| k == "text_delta").unwrap();
    assert!(
        first_text < reset,
        "the partial text streamed before the reset"
    );
}

#[tokio::test]
async fn server_errors_get_exactly_one_retry() {
    let home = Home::new();
    let server = TestServer::start(vec![
        status_reply(500, r#"{"error":{"message":"upstream exploded"}}"#),
        status_reply(502, r#"{"error":{"message":"bad gateway"}}"#),
        text_reply("never reached"),
    ])
    .await;
    let ran = run_with(
        &home,
        provider(&server),
        registry_with(vec![]),
        config(5),
        "hi",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Failed);
    assert_eq!(server.request_count(), 2);
    assert_eq!(
        ran.outcome.error_code.as_deref(),
        Some("provider_stream_error")
    );
    assert!(
        ran.outcome.reason.contains("bad gateway"),
        "{}",
        ran.outcome.reason
    );
    assert_eq!(
        read_json(&ran.outcome.run_dir.join("state.json"))["status"],
        "failed"
    );
}

#[tokio::test]
async fn unauthorized_is_not_retried_and_the_message_reaches_the_user() {
    let home = Home::new();
    let server = TestServer::start(vec![status_reply(
        401,
        r#"{"error":{"message":"Incorrect API key provided: sk-loo***0001.","type":"invalid_request_error","code":"invalid_api_key"}}"#,
    )])
    .await;
    let ran = run_with(
        &home,
        provider(&server),
        registry_with(vec![]),
        config(5),
        "hi",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Failed);
    assert_eq!(server.request_count(), 1);
    assert!(
        ran.outcome.reason.contains("Incorrect API key provided"),
        "{}",
        ran.outcome.reason
    );
    assert!(!ran.outcome.reason.contains("sk-loop-test-key-0001"));
}

#[tokio::test]
async fn a_stalled_stream_hits_the_idle_timeout_then_recovers() {
    let home = Home::new();
    let stalled = Reply::Stream(vec![
        sse_chunk(json!({"role": "assistant", "content": "Let me"}), None),
        Part::Stall,
    ]);
    let server = TestServer::start(vec![stalled, text_reply("Recovered.")]).await;
    let cfg = LoopConfig {
        idle_timeout: Some(Duration::from_millis(400)),
        ..config(5)
    };
    let ran = run_with(
        &home,
        provider(&server),
        registry_with(vec![]),
        cfg,
        "hi",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    assert_eq!(server.request_count(), 2);
    let err = ran.events.iter().find_map(|e| match e {
        AgentEvent::StreamReset { error, .. } => Some(error.clone()),
        _ => None,
    });
    assert!(err.unwrap().contains("idle timeout"));
}

#[tokio::test]
async fn content_filter_steering_is_a_user_message_on_the_wire() {
    let home = Home::new();
    let filtered = Reply::Stream(vec![
        sse_chunk(
            json!({"role": "assistant", "content": ""}),
            Some("content_filter"),
        ),
        sse_done(),
    ]);
    let server = TestServer::start(vec![
        filtered,
        text_reply("Skipped that, here is the rest."),
    ])
    .await;
    let ran = run_with(
        &home,
        provider(&server),
        registry_with(vec![]),
        config(5),
        "hi",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    let second = server.requests()[1].body.clone();
    let last = messages(&second).last().unwrap().clone();
    assert_eq!(last["role"], "user");
    let content = last["content"].as_str().unwrap();
    assert!(
        content.starts_with("<system>") && content.ends_with("</system>"),
        "{content}"
    );
    assert!(
        messages(&second)
            .iter()
            .skip(1)
            .all(|m| m["role"] != "system")
    );
}
