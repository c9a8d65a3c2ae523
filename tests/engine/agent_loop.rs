//! The agent loop on the scripted provider: every terminal path, wrap-up,
//! forced text-only, cancel checkpoints, the content-filter breaker, dedupe
//! by arguments, and the scheduler's concurrency and timeout rules.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::agent::events::{AgentEvent, BatchMode, RunStatus, ToolCallStatus, ToolEvent};
use vibedesk::agent::{Loop, LoopDeps};
use vibedesk::model::Role;
use vibedesk::store::{MessageLog, read_trace};

use crate::support::harness::*;

fn trace_types(home: &Home) -> Vec<String> {
    read_trace(&home.session_dir(), None)
        .unwrap()
        .records
        .iter()
        .map(|r| r["type"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn finished_statuses(events: &[AgentEvent]) -> Vec<(String, ToolCallStatus)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Tool(ToolEvent::ToolCallFinished { tool, status, .. }) => {
                Some((tool.clone(), *status))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn success_path_writes_state_trace_usage_and_messages() {
    let home = Home::new();
    let provider = scripted(json!([
        {"text": "Listing.", "tool_calls": [{"id": "c1", "name": "list_dir", "arguments": {}}],
         "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}},
        {"text": "All done.", "usage": {"input_tokens": 20, "output_tokens": 7, "total_tokens": 27}}
    ]));
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        test_config(),
        "list it",
        CancellationToken::new(),
    )
    .await;
    let o = &ran.outcome;
    assert_eq!(o.status, RunStatus::Success, "{}", o.reason);
    assert_eq!(o.content, "All done.");
    assert_eq!(o.iterations, 2);
    assert_eq!(o.usage.total_tokens, 42);
    assert_eq!(provider.calls(), 2);

    let state = read_json(&o.run_dir.join("state.json"));
    assert_eq!(state["status"], "success");
    assert_eq!(state["session_id"], home.session_id);
    let req = read_json(&o.run_dir.join("req.json"));
    assert_eq!(req["prompt"], "list it");
    let usage = read_json(&o.run_dir.join("llm_usage.json"));
    assert_eq!(usage["totals"]["total_tokens"], 42);
    assert_eq!(usage["totals"]["calls"], 2);
    assert!(usage["updated_at"].as_str().unwrap().ends_with('Z'));
    assert!(
        o.run_dir.join("code").is_dir()
            && o.run_dir.join("logs").is_dir()
            && o.run_dir.join("artifacts").is_dir()
    );
    let name = o.run_dir.file_name().unwrap().to_str().unwrap();
    assert_eq!(name.len(), "20260101_000000_abcdef".len(), "{name}");

    let types = trace_types(&home);
    for t in [
        "start",
        "message",
        "tool_call",
        "tool_result",
        "thinking",
        "answer",
        "end",
    ] {
        assert!(types.contains(&t.to_string()), "trace lacks {t}: {types:?}");
    }
    let msgs = MessageLog::read(&home.session_dir()).unwrap();
    assert!(msgs.skipped_lines.is_empty());
    let roles: Vec<Role> = msgs.messages.iter().map(|m| m.message.role).collect();
    assert_eq!(
        roles,
        vec![Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );

    let kinds = ran.kinds();
    assert_eq!(kinds.first().map(String::as_str), Some("run_started"));
    assert_eq!(kinds.last().map(String::as_str), Some("run_finished"));
    for k in [
        "iteration_started",
        "watermark",
        "text_delta",
        "tool_batch_started",
        "tool_call_started",
        "tool_call_finished",
        "answer",
        "llm_usage",
    ] {
        assert!(kinds.contains(&k.to_string()), "missing event {k}");
    }
}

#[tokio::test]
async fn watermark_agrees_with_the_estimators_on_what_was_sent() {
    for estimator in ["bpe", "chars4"] {
        let home = Home::new();
        let provider = scripted(json!([
            call_turn(&[("c1", "list_dir", json!({}))]),
            text_turn("ok")
        ]));
        let mut cfg = test_config();
        cfg.compaction.estimator = estimator.into();
        let ran = run_with(
            &home,
            provider.clone(),
            registry_with(vec![]),
            cfg,
            "hi",
            CancellationToken::new(),
        )
        .await;
        let marks: Vec<(u64, u64, String)> = ran
            .events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Watermark {
                    tokens,
                    threshold,
                    estimator,
                    ..
                } => Some((*tokens, *threshold, estimator.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(marks.len(), 2);
        assert_eq!(marks[0].1, 40_000);
        let expected_name = if estimator == "bpe" {
            "o200k_base"
        } else {
            "chars4"
        };
        assert_eq!(marks[0].2, expected_name);
        // Nothing was compacted, so the watermark counts exactly what the
        // model was sent: the messages and the tool schemas (docs §3.1).
        let est = vibedesk::llm::tokens::Estimator::from_name(estimator, "scripted").unwrap();
        for (i, req) in provider.requests().iter().enumerate() {
            let schemas: Vec<Value> = req.tools.iter().map(|t| t.to_openai()).collect();
            let schema_tokens = est.count_text(&Value::Array(schemas).to_string());
            assert!(schema_tokens > 100, "{schema_tokens}");
            assert_eq!(
                marks[i].0,
                est.count(&req.messages) + schema_tokens,
                "{estimator} iteration {i}"
            );
        }
        assert!(
            marks[0].0 > 100,
            "the system prompt alone is hundreds of tokens"
        );
        assert!(marks[1].0 > marks[0].0, "the history grew: {marks:?}");
    }
}

#[tokio::test]
async fn cancel_before_the_first_call_makes_no_model_call_and_the_next_run_works() {
    let home = Home::new();
    let provider = scripted(json!([text_turn("second run answer")]));
    let deps = LoopDeps::new(
        provider.clone(),
        registry_with(vec![]),
        test_config(),
        home.paths.runs_dir(),
    );
    let mut lp = Loop::new(deps);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let ran = run_loop(&mut lp, &home, "x", cancel).await;
    assert_eq!(ran.outcome.status, RunStatus::Cancelled);
    assert_eq!(ran.outcome.reason, "cancelled by user");
    assert_eq!(provider.calls(), 0);
    assert_eq!(
        read_json(&ran.outcome.run_dir.join("state.json"))["status"],
        "cancelled"
    );
    let ran = run_loop(&mut lp, &home, "again", CancellationToken::new()).await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    assert_eq!(ran.outcome.content, "second run answer");
}

#[tokio::test]
async fn cancel_inside_the_stream_discards_the_reply_and_runs_no_tools() {
    let home = Home::new();
    let echo = TestTool::new("probe", true, Behaviour::Echo);
    let calls = echo.counter();
    let provider = scripted(json!([{
        "chunks": [{"text": "Working"}, {"delay_ms": 2000}, {"tool_call": {"index": 0, "id": "c1", "name": "probe", "arguments": "{}"}}, {"finish": "tool_calls"}]
    }]));
    let deps = LoopDeps::new(
        provider,
        registry_with(vec![Arc::new(echo)]),
        test_config(),
        home.paths.runs_dir(),
    );
    let mut lp = Loop::new(deps);
    // Cancel the moment the first text arrives, i.e. inside the stream.
    let cancel = CancellationToken::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let c2 = cancel.clone();
    let watcher = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(e) = rx.recv().await {
            if matches!(e, AgentEvent::TextDelta { .. }) {
                c2.cancel();
            }
            seen.push(e.kind());
        }
        seen
    });
    let outcome = lp
        .run(
            home.request("go"),
            vibedesk::agent::EventSink::new(tx),
            cancel,
        )
        .await;
    let kinds = watcher.await.unwrap();
    let ran = Ran {
        outcome,
        events: Vec::new(),
    };
    assert_eq!(ran.outcome.status, RunStatus::Cancelled);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "no tool may run after a cancel"
    );
    assert!(kinds.contains(&"text_delta".to_string()));
    assert!(!kinds.contains(&"tool_batch_started".to_string()));
    assert!(trace_types(&home).contains(&"cancelled".to_string()));
}

#[tokio::test]
async fn cancel_between_batches_stops_the_next_batch_and_keeps_pairs_balanced() {
    let home = Home::new();
    let cancel = CancellationToken::new();
    let trigger = TestTool::new("trigger", false, Behaviour::Cancel(cancel.clone()));
    let later = TestTool::new("later", true, Behaviour::Echo);
    let later_calls = later.counter();
    let provider = scripted(json!([call_turn(&[
        ("c1", "trigger", json!({})),
        ("c2", "later", json!({}))
    ])]));
    let ran = run_with(
        &home,
        provider,
        registry_with(vec![Arc::new(trigger), Arc::new(later)]),
        test_config(),
        "go",
        cancel,
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Cancelled);
    assert_eq!(later_calls.load(Ordering::SeqCst), 0);
    let statuses = finished_statuses(&ran.events);
    assert_eq!(
        statuses,
        vec![
            ("trigger".into(), ToolCallStatus::Ok),
            ("later".into(), ToolCallStatus::Cancelled)
        ]
    );
    // Both calls have a result message, so the history stays valid.
    let msgs = MessageLog::read(&home.session_dir()).unwrap().messages;
    let tool_ids: Vec<String> = msgs
        .iter()
        .filter(|m| m.message.role == Role::Tool)
        .filter_map(|m| m.message.tool_call_id.clone())
        .collect();
    assert_eq!(tool_ids, vec!["c1", "c2"]);
}

#[tokio::test]
async fn wrap_up_nudge_and_forced_text_only_last_turn() {
    let home = Home::new();
    let turns: Vec<Value> = (0..4)
        .map(|i| call_turn(&[(&format!("c{i}"), "list_dir", json!({"path": "."}))]))
        .chain([text_turn("Final summary.")])
        .collect();
    let provider = scripted(Value::Array(turns));
    let mut cfg = test_config();
    cfg.max_iterations = 5;
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        cfg,
        "research",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    assert_eq!(ran.outcome.iterations, 5);
    let reqs = provider.requests();
    assert_eq!(reqs.len(), 5);
    for r in &reqs[..4] {
        assert!(
            !r.tools.is_empty(),
            "tools offered before the last iteration"
        );
    }
    assert!(
        reqs[4].tools.is_empty(),
        "tools withheld on the last iteration"
    );
    // Wrap-up at int(5*0.8) = 4: the 4th request ends with the nudge.
    let nudge = reqs[3].messages.last().unwrap();
    assert_eq!(nudge.role, Role::User);
    assert!(
        nudge.content.starts_with("<system>") && nudge.content.contains("1 of 5 iterations remain"),
        "{}",
        nudge.content
    );
    for r in &reqs {
        assert!(
            r.messages.iter().skip(1).all(|m| m.role != Role::System),
            "no system message after index 0"
        );
    }
    assert_eq!(ran.count("wrap_up"), 1);
    assert_eq!(ran.count("forced_text_only"), 1);
    assert!(trace_types(&home).contains(&"forced_text_only".to_string()));
}

#[tokio::test]
async fn reaching_max_iterations_fails_with_the_upstream_reason() {
    let home = Home::new();
    let provider = scripted(
        json!({"turns": [call_turn(&[("c", "list_dir", json!({}))])], "on_exhausted": "repeat_last"}),
    );
    let mut cfg = test_config();
    cfg.max_iterations = 3;
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        cfg,
        "loop",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Failed);
    assert!(
        ran.outcome
            .reason
            .starts_with("reached max iterations (3) without final answer"),
        "{}",
        ran.outcome.reason
    );
    // Tools requested on the tools-withheld iteration are never run.
    let runs = finished_statuses(&ran.events).len();
    assert_eq!(runs, 2, "only the first two iterations ran tools");
    assert_eq!(
        read_json(&ran.outcome.run_dir.join("state.json"))["status"],
        "failed"
    );
}

#[tokio::test]
async fn empty_replies_nudge_once_then_fail() {
    // LF-2: one empty reply then an answer succeeds with exactly one nudge.
    let home = Home::new();
    let provider = scripted(json!([{"text": ""}, text_turn("Finally.")]));
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    assert_eq!(provider.calls(), 2);
    let second = &provider.requests()[1];
    let nudges = second
        .messages
        .iter()
        .filter(|m| m.content.contains("Your last reply was empty"))
        .count();
    assert_eq!(nudges, 1);
    assert_eq!(second.messages.last().unwrap().role, Role::User);

    // LF-1: two empty replies in a row fail and name the iteration.
    let home = Home::new();
    let provider = scripted(json!([{"text": ""}, {"text": "  "}, text_turn("never")]));
    let mut cfg = test_config();
    cfg.max_iterations = 3;
    let ran = run_with(
        &home,
        provider,
        registry_with(vec![]),
        cfg,
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Failed);
    assert!(
        ran.outcome.reason.starts_with("empty_model_response"),
        "{}",
        ran.outcome.reason
    );
    assert!(
        ran.outcome.reason.contains("iteration 2"),
        "{}",
        ran.outcome.reason
    );
}

#[tokio::test]
async fn content_filter_skips_then_the_circuit_breaker_trips() {
    // LF-8: one filtered reply then an answer.
    let home = Home::new();
    let provider = scripted(json!([{"finish_reason": "content_filter"}, text_turn("Answer.")]));
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    assert_eq!(provider.calls(), 2);
    let steer = provider.requests()[1].messages.last().unwrap().clone();
    assert_eq!(steer.role, Role::User);
    assert!(steer.content.starts_with("<system>") && steer.content.ends_with("</system>"));
    assert_eq!(
        trace_types(&home)
            .iter()
            .filter(|t| *t == "content_filter_skipped")
            .count(),
        1
    );
    assert!(
        ran.outcome.content_filter_warning.is_some(),
        "1 of 2 iterations is over 5%"
    );

    // Ten consecutive filters: failed early.
    let home = Home::new();
    let provider = scripted(
        json!({"turns": [{"finish_reason": "content_filtercontent_filter"}], "on_exhausted": "repeat_last"}),
    );
    let mut cfg = test_config();
    cfg.max_iterations = 50;
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        cfg,
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Failed);
    assert_eq!(provider.calls(), 10);
    assert!(
        ran.outcome.reason.contains("10 consecutive"),
        "{}",
        ran.outcome.reason
    );
    assert!(trace_types(&home).contains(&"content_filter_circuit_breaker".to_string()));
}

#[tokio::test]
async fn one_stream_retry_then_failure_or_success() {
    // LF-6: a retryable failure then success → success with 2 calls and a stream_reset.
    let home = Home::new();
    let provider = scripted(json!([
        {"error": {"kind": "stream", "message": "connection reset", "after_chunks": 1}, "text": "partial words here"},
        text_turn("Recovered.")
    ]));
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    assert_eq!(provider.calls(), 2);
    assert_eq!(ran.count("stream_reset"), 1);

    // Always failing: exactly one retry, then failed with provider_stream_error.
    let home = Home::new();
    let provider = scripted(
        json!({"turns": [{"error": {"kind": "http", "status": 503, "message": "overloaded"}}], "on_exhausted": "repeat_last"}),
    );
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Failed);
    assert_eq!(provider.calls(), 2);
    assert_eq!(
        ran.outcome.error_code.as_deref(),
        Some("provider_stream_error")
    );
    assert!(
        ran.outcome.reason.contains("overloaded"),
        "{}",
        ran.outcome.reason
    );

    // Non-retryable (401): one call only, the provider's message reaches the user.
    let home = Home::new();
    let provider = scripted(
        json!([{"error": {"kind": "http", "status": 401, "message": "Incorrect API key provided"}}]),
    );
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Failed);
    assert_eq!(provider.calls(), 1);
    assert!(ran.outcome.reason.contains("Incorrect API key provided"));
    assert_eq!(ran.count("stream_reset"), 0);
}

#[tokio::test]
async fn dedupe_is_keyed_on_arguments_not_just_the_name() {
    let home = Home::new();
    let fetch = TestTool::new("fetch", true, Behaviour::Echo);
    let calls = fetch.counter();
    let provider = scripted(json!([
        call_turn(&[("a", "fetch", json!({"q": "AAPL"}))]),
        // Same arguments again (keys in another order would be the same too).
        call_turn(&[
            ("b", "fetch", json!({"q": "AAPL"})),
            ("c", "fetch", json!({"q": "MSFT"}))
        ]),
        text_turn("done")
    ]));
    let ran = run_with(
        &home,
        provider,
        registry_with(vec![Arc::new(fetch)]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "AAPL once, MSFT once");
    let statuses = finished_statuses(&ran.events);
    assert_eq!(
        statuses,
        vec![
            ("fetch".into(), ToolCallStatus::Ok),
            ("fetch".into(), ToolCallStatus::Skipped),
            ("fetch".into(), ToolCallStatus::Ok)
        ]
    );
    assert!(trace_types(&home).contains(&"tool_skipped".to_string()));
}

#[tokio::test]
async fn failed_and_repeatable_calls_run_again_with_the_same_arguments() {
    let home = Home::new();
    let flaky = TestTool::new("flaky", true, Behaviour::Fail);
    let flaky_calls = flaky.counter();
    let again = TestTool::new("again", true, Behaviour::Echo).repeatable();
    let again_calls = again.counter();
    let provider = scripted(json!([
        call_turn(&[
            ("a", "flaky", json!({"q": "x"})),
            ("b", "again", json!({"q": "x"}))
        ]),
        call_turn(&[
            ("c", "flaky", json!({"q": "x"})),
            ("d", "again", json!({"q": "x"}))
        ]),
        text_turn("done")
    ]));
    let ran = run_with(
        &home,
        provider,
        registry_with(vec![Arc::new(flaky), Arc::new(again)]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    // Two of the four calls failed: the answer stands, `partial` (docs §1.4).
    assert_eq!(ran.outcome.status, RunStatus::Partial);
    assert_eq!(
        ran.outcome.reason,
        "2 of 4 tool calls failed: flaky ×2 (deliberate failure)"
    );
    assert_eq!(ran.outcome.content, "done");
    assert_eq!(
        flaky_calls.load(Ordering::SeqCst),
        2,
        "a failure is never deduped"
    );
    assert_eq!(
        again_calls.load(Ordering::SeqCst),
        2,
        "repeatable tools always run"
    );
    let statuses: Vec<ToolCallStatus> = finished_statuses(&ran.events)
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    assert_eq!(
        statuses,
        vec![
            ToolCallStatus::Error,
            ToolCallStatus::Ok,
            ToolCallStatus::Error,
            ToolCallStatus::Ok
        ]
    );
}

#[tokio::test]
async fn parallel_read_only_calls_really_run_concurrently() {
    // Both calls must reach the barrier; run one after the other they never would.
    let home = Home::new();
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let a = TestTool::new("left", true, Behaviour::Barrier(barrier.clone()));
    let b = TestTool::new("right", true, Behaviour::Barrier(barrier));
    let provider = scripted(json!([
        call_turn(&[("a", "left", json!({})), ("b", "right", json!({}))]),
        text_turn("ok")
    ]));
    let ran = tokio::time::timeout(
        Duration::from_secs(20),
        run_with(
            &home,
            provider,
            registry_with(vec![Arc::new(a), Arc::new(b)]),
            test_config(),
            "q",
            CancellationToken::new(),
        ),
    )
    .await
    .expect("the batch deadlocked: calls did not run concurrently");
    assert_eq!(ran.outcome.status, RunStatus::Success);
    let modes: Vec<BatchMode> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Tool(ToolEvent::ToolBatchStarted { mode, .. }) => Some(*mode),
            _ => None,
        })
        .collect();
    assert_eq!(modes, vec![BatchMode::Parallel]);
}

#[tokio::test]
async fn batches_follow_readonly_runs_and_results_keep_call_order() {
    // TS-6: [read A, read B, write C, read D] → parallel {A,B}, serial C, single D.
    let home = Home::new();
    let provider = scripted(json!([
        call_turn(&[
            ("a", "list_dir", json!({})),
            ("b", "list_dir", json!({"recursive": true})),
            ("c", "write_file", json!({"path": "x.txt", "content": "x"})),
            ("d", "read_file", json!({"path": "x.txt"}))
        ]),
        text_turn("ok")
    ]));
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    let batches: Vec<(BatchMode, Vec<String>)> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Tool(ToolEvent::ToolBatchStarted { mode, calls, .. }) => {
                Some((*mode, calls.iter().map(|c| c.call_id.clone()).collect()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        batches,
        vec![
            (BatchMode::Parallel, vec!["a".to_string(), "b".to_string()]),
            (BatchMode::Serial, vec!["c".to_string()]),
            (BatchMode::Serial, vec!["d".to_string()]),
        ]
    );
    let second = &provider.requests()[1];
    let ids: Vec<&str> = second
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    assert_eq!(ids, vec!["a", "b", "c", "d"]);
    let read_back = second
        .messages
        .iter()
        .rfind(|m| m.tool_call_id.as_deref() == Some("d"))
        .unwrap();
    assert!(
        read_back.content.contains("\"content\":\"x\""),
        "D ran after C wrote: {}",
        read_back.content
    );
}

#[tokio::test]
async fn read_only_timeout_cancels_the_call_and_kills_its_child() {
    let home = Home::new();
    let pid = Arc::new(Mutex::new(None));
    let slow = TestTool::new("slow_fetch", true, Behaviour::Child(pid.clone()))
        .timeout(Duration::from_millis(1500));
    let provider = scripted(json!([
        call_turn(&[("a", "slow_fetch", json!({}))]),
        text_turn("gave up")
    ]));
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![Arc::new(slow)]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    // Its only tool call timed out: `failed`, the answer kept (docs §1.4).
    assert_eq!(ran.outcome.status, RunStatus::Failed);
    assert!(
        ran.outcome
            .reason
            .starts_with("1 of 1 tool call failed: slow_fetch ('slow_fetch' did not finish within"),
        "{}",
        ran.outcome.reason
    );
    assert_eq!(ran.outcome.content, "gave up");
    assert_eq!(
        finished_statuses(&ran.events),
        vec![("slow_fetch".into(), ToolCallStatus::Timeout)]
    );
    let result = provider.requests()[1]
        .messages
        .iter()
        .rfind(|m| m.role == Role::Tool)
        .unwrap()
        .content
        .clone();
    let v: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(v["error_code"], "tool_timeout");
    assert_eq!(v["tool"], "slow_fetch");
    assert!(ran.events.iter().any(|e| matches!(e, AgentEvent::Tool(ToolEvent::ToolProgress { stage, .. }) if stage == "timeout")));
    // The child process is gone (killed on drop of the cancelled call).
    let pid = pid.lock().unwrap().expect("the tool spawned a child");
    let mut gone = false;
    for _ in 0..100 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Gone, or a zombie awaiting its reaper.
        if stat.is_empty() || stat.split_whitespace().nth(2) == Some("Z") {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "child {pid} still running after the timeout");
}

#[tokio::test]
async fn write_tools_are_never_killed_only_warned() {
    let home = Home::new();
    let slow_write = TestTool::new(
        "slow_write",
        false,
        Behaviour::Sleep(Duration::from_millis(400)),
    )
    .timeout(Duration::from_millis(50));
    let calls = slow_write.counter();
    let provider = scripted(json!([
        call_turn(&[("a", "slow_write", json!({}))]),
        text_turn("ok")
    ]));
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![Arc::new(slow_write)]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        finished_statuses(&ran.events),
        vec![("slow_write".into(), ToolCallStatus::Ok)]
    );
    assert_eq!(ran.count("tool_timeout_warning"), 1);
    let result = provider.requests()[1]
        .messages
        .iter()
        .rfind(|m| m.role == Role::Tool)
        .unwrap()
        .content
        .clone();
    assert!(result.contains("\"status\":\"ok\""), "{result}");
    let elapsed = ran.events.iter().find_map(|e| match e {
        AgentEvent::Tool(ToolEvent::ToolCallFinished { elapsed_ms, .. }) => Some(*elapsed_ms),
        _ => None,
    });
    assert!(elapsed.unwrap() >= 390);
}

#[tokio::test(start_paused = true)]
async fn heartbeats_report_elapsed_and_time_since_progress() {
    let home = Home::new();
    let slow = TestTool::new("slow", true, Behaviour::Sleep(Duration::from_secs(10)));
    let provider = scripted(json!([
        call_turn(&[("a", "slow", json!({}))]),
        text_turn("ok")
    ]));
    let ran = run_with(
        &home,
        provider,
        registry_with(vec![Arc::new(slow)]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    let beats: Vec<(f64, f64)> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Tool(ToolEvent::ToolHeartbeat {
                elapsed_s,
                since_progress_s,
                ..
            }) => Some((*elapsed_s, *since_progress_s)),
            _ => None,
        })
        .collect();
    assert_eq!(beats.len(), 3, "ticks at 3, 6 and 9 s: {beats:?}");
    assert!(
        (beats[0].0 - 3.0).abs() < 0.1 && (beats[2].0 - 9.0).abs() < 0.1,
        "{beats:?}"
    );
    assert!(
        (beats[2].1 - 9.0).abs() < 0.1,
        "no progress was reported: {beats:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn stall_watchdog_fails_a_stuck_run() {
    let home = Home::new();
    // A model that never answers and a read-only tool would both be stuck;
    // here the model hangs after a little text and no timeout is set.
    let provider = scripted(json!([{"text": "thinking", "hang": true}]));
    let mut cfg = test_config();
    cfg.llm_timeout = None;
    cfg.idle_timeout = None;
    cfg.stall_timeout = Some(Duration::from_secs(60));
    let ran = run_with(
        &home,
        provider,
        registry_with(vec![]),
        cfg,
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Failed);
    assert!(
        ran.outcome.reason.contains("stall"),
        "{}",
        ran.outcome.reason
    );
    assert_eq!(ran.count("stall_warning"), 1);
    assert_eq!(ran.count("stalled"), 1);
    let end = read_trace(&home.session_dir(), None)
        .unwrap()
        .records
        .into_iter()
        .rfind(|r| r["type"] == "end")
        .unwrap();
    assert_eq!(end["stalled"], true);
}

#[tokio::test]
async fn final_answer_check_asks_for_the_missing_file_then_accepts() {
    let home = Home::new();
    let provider = scripted(json!([
        text_turn("Here is your plan."),
        call_turn(&[(
            "w",
            "write_file",
            json!({"path": "plan.md", "content": "# Plan"})
        )]),
        text_turn("Wrote plan.md in the workspace.")
    ]));
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        test_config(),
        "Please write plan.md with a plan",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    assert!(!ran.outcome.degraded);
    assert_eq!(ran.outcome.content, "Wrote plan.md in the workspace.");
    assert_eq!(ran.count("answer_rejected"), 1);
    let second = &provider.requests()[1];
    assert!(second.messages.last().unwrap().content.contains("plan.md"));
    assert!(home.workspace().join("plan.md").exists());
}

#[tokio::test]
async fn answer_check_revisions_are_bounded_and_end_degraded() {
    let home = Home::new();
    let provider = scripted(
        json!({"turns": [text_turn("I refuse to write files.")], "on_exhausted": "repeat_last"}),
    );
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        test_config(),
        "create report.md now",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    assert!(ran.outcome.degraded);
    assert!(
        ran.outcome
            .reason
            .contains("without writing the task target file(s): report.md"),
        "{}",
        ran.outcome.reason
    );
    assert_eq!(
        provider.calls(),
        4,
        "revision cap of 4 with plenty of iterations left"
    );
}

#[tokio::test]
async fn tool_markup_in_an_answer_is_never_the_final_answer() {
    let home = Home::new();
    let provider = scripted(json!([
        text_turn("Let me call it: <invoke name=\"list_dir\"></invoke>"),
        text_turn("Clean answer.")
    ]));
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.content, "Clean answer.");
    assert!(trace_types(&home).contains(&"tool_call_syntax_in_answer".to_string()));

    // On the forced-text turn the markup is withheld and the run is degraded.
    let home = Home::new();
    let provider = scripted(json!([text_turn(
        "<||DSML||invoke name=\"x\"> and more text"
    )]));
    let mut cfg = test_config();
    cfg.max_iterations = 1;
    let ran = run_with(
        &home,
        provider,
        registry_with(vec![]),
        cfg,
        "q",
        CancellationToken::new(),
    )
    .await;
    assert!(!ran.outcome.content.contains("DSML"));
    assert!(ran.outcome.degraded);
}

#[tokio::test]
async fn pure_dsml_text_executes_as_tool_calls() {
    let home = Home::new();
    let dsml = "<｜｜DSML｜｜tool_calls><｜｜DSML｜｜invoke name=\"write_file\"><｜｜DSML｜｜parameter name=\"path\" string=\"true\">d.txt</｜｜DSML｜｜parameter><｜｜DSML｜｜parameter name=\"content\" string=\"true\">hello</｜｜DSML｜｜parameter></｜｜DSML｜｜invoke></｜｜DSML｜｜tool_calls>";
    let provider = scripted(json!([text_turn(dsml), text_turn("written")]));
    let ran = run_with(
        &home,
        provider,
        registry_with(vec![]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("d.txt")).unwrap(),
        "hello"
    );
    assert!(
        !ran.events
            .iter()
            .any(|e| matches!(e, AgentEvent::TextDelta { delta, .. } if delta.contains("DSML")))
    );
}

#[tokio::test]
async fn trace_redacts_secrets_but_the_model_sees_them_once() {
    let home = Home::new();
    let leaky = TestTool::new("leaky", true, Behaviour::Echo);
    let provider = scripted(json!([
        call_turn(&[(
            "a",
            "leaky",
            json!({"q": "x", "api_key": "sk-live-secret-value-123456"})
        )]),
        text_turn("ok")
    ]));
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![Arc::new(leaky)]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    let trace = std::fs::read_to_string(home.session_dir().join("trace.jsonl")).unwrap();
    assert!(
        !trace.contains("sk-live-secret-value-123456"),
        "secret leaked into the trace"
    );
    assert!(trace.contains("[redacted]"));
    let model_saw = &provider.requests()[1];
    let hits: usize = model_saw
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.matches("sk-live-secret-value-123456").count())
        .sum();
    assert_eq!(hits, 1);
}

#[tokio::test]
async fn iteration_numbers_continue_across_runs_of_a_session() {
    let home = Home::new();
    let provider = scripted(json!([
        call_turn(&[("a", "list_dir", json!({}))]),
        text_turn("one"),
        text_turn("two")
    ]));
    let deps = LoopDeps::new(
        provider.clone(),
        registry_with(vec![]),
        test_config(),
        home.paths.runs_dir(),
    );
    let mut first = Loop::new(deps.clone());
    run_loop(&mut first, &home, "first", CancellationToken::new()).await;
    // A fresh loop (a new process) resumes from the trace's max iter.
    let mut second = Loop::new(deps);
    let ran = run_loop(&mut second, &home, "second", CancellationToken::new()).await;
    let iters: Vec<u64> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::IterationStarted { iter, .. } => Some(*iter),
            _ => None,
        })
        .collect();
    assert_eq!(iters, vec![3]);
}

#[tokio::test]
async fn background_notifications_reach_only_their_own_session() {
    let home = Home::new();
    let provider = scripted(json!([text_turn("noted")]));
    let deps = LoopDeps::new(
        provider.clone(),
        registry_with(vec![]),
        test_config(),
        home.paths.runs_dir(),
    );
    let mut lp = Loop::new(deps);
    let req = home.request("q");
    let other = vibedesk::tools::BackgroundQueue::default();
    other.push(vibedesk::tools::BackgroundNotice {
        task_id: "deadbeef".into(),
        status: "completed".into(),
        result: "other session".into(),
    });
    req.background.push(vibedesk::tools::BackgroundNotice {
        task_id: "1a2b3c4d".into(),
        status: "completed".into(),
        result: "exit 0".into(),
    });
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let o = lp
        .run(
            req,
            vibedesk::agent::EventSink::new(tx),
            CancellationToken::new(),
        )
        .await;
    assert_eq!(o.status, RunStatus::Success);
    let sent = &provider.requests()[0].messages;
    let bg = sent
        .iter()
        .find(|m| m.content.contains("<background-results>"))
        .expect("notification delivered");
    assert_eq!(bg.role, Role::User);
    assert!(bg.content.contains("[bg:1a2b3c4d] completed: exit 0"));
    assert!(!sent.iter().any(|m| m.content.contains("deadbeef")));
    assert_eq!(
        other.drain().len(),
        1,
        "the other session's queue is untouched"
    );
}

#[tokio::test]
async fn invalid_and_unknown_calls_get_structured_errors_without_running() {
    let home = Home::new();
    let provider = scripted(json!([
        {"tool_calls": [
            {"id": "a", "name": "no_such_tool", "arguments": {}},
            {"id": "b", "name": "read_file", "arguments": "{not json"},
            {"id": "c", "name": "read_file", "arguments": {"offset": 1}}
        ]},
        text_turn("ok")
    ]));
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    // Calls refused as malformed count as failed calls (docs §1.4).
    assert_eq!(ran.outcome.status, RunStatus::Failed);
    assert!(
        ran.outcome
            .reason
            .starts_with("3 of 3 tool calls failed: no_such_tool (Tool 'no_such_tool' not found"),
        "{}",
        ran.outcome.reason
    );
    let tool_msgs: Vec<Value> = provider.requests()[1]
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| serde_json::from_str(&m.content).unwrap())
        .collect();
    assert_eq!(tool_msgs[0]["error_code"], "unknown_tool");
    // Close names at most, never the whole list (docs §2.2).
    let error = tool_msgs[0]["error"].as_str().unwrap();
    assert!(
        error.contains("no offered tool has a similar name") && !error.contains("read_file"),
        "{error}"
    );
    assert_eq!(tool_msgs[1]["error_code"], "invalid_arguments");
    assert_eq!(tool_msgs[2]["error_code"], "invalid_arguments");
    assert!(tool_msgs[2]["error"].as_str().unwrap().contains("path"));
}

struct DenyList(&'static str);

impl vibedesk::tools::Authorizer for DenyList {
    fn authorize(&self, tool: &str, _args: &Value) -> Result<(), vibedesk::tools::Denial> {
        if tool == self.0 {
            Err(vibedesk::tools::Denial {
                code: "identity_required".into(),
                message: format!("{tool} needs a resolved symbol first"),
            })
        } else {
            Ok(())
        }
    }
}

#[tokio::test]
async fn a_denied_call_gets_a_structured_error_and_splits_the_batch() {
    let home = Home::new();
    let guarded = TestTool::new("guarded", true, Behaviour::Echo);
    let guarded_calls = guarded.counter();
    let provider = scripted(json!([
        call_turn(&[
            ("a", "list_dir", json!({})),
            ("b", "guarded", json!({})),
            ("c", "list_dir", json!({"recursive": true}))
        ]),
        text_turn("ok")
    ]));
    let mut deps = LoopDeps::new(
        provider.clone(),
        registry_with(vec![Arc::new(guarded)]),
        test_config(),
        home.paths.runs_dir(),
    );
    deps.authorizer = Some(Arc::new(DenyList("guarded")));
    let mut lp = Loop::new(deps);
    let ran = run_loop(&mut lp, &home, "q", CancellationToken::new()).await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    assert_eq!(guarded_calls.load(Ordering::SeqCst), 0);
    assert_eq!(
        finished_statuses(&ran.events),
        vec![
            ("list_dir".into(), ToolCallStatus::Ok),
            ("guarded".into(), ToolCallStatus::Denied),
            ("list_dir".into(), ToolCallStatus::Ok)
        ]
    );
    let batches = ran
        .events
        .iter()
        .filter(|e| {
            matches!(
                e,
                AgentEvent::Tool(ToolEvent::ToolBatchStarted {
                    mode: BatchMode::Serial,
                    ..
                })
            )
        })
        .count();
    assert_eq!(
        batches, 2,
        "the denied call splits the read-only run into two batches"
    );
    let denied: Value = serde_json::from_str(
        &provider.requests()[1]
            .messages
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some("b"))
            .unwrap()
            .content,
    )
    .unwrap();
    assert_eq!(denied["status"], "error");
    assert_eq!(denied["error_code"], "identity_required");
    let trace = read_trace(&home.session_dir(), None).unwrap();
    assert!(
        trace
            .records
            .iter()
            .any(|r| r["type"] == "tool_result" && r["call_id"] == "b" && r["blocked"] == true)
    );
}

#[tokio::test]
async fn reasoning_bursts_are_throttled_first_one_at_once() {
    let home = Home::new();
    let chunks: Vec<Value> = (0..60)
        .map(|i| json!({"reasoning": format!("step {i}. ")}))
        .chain([json!({"text": "Answer."}), json!({"finish": "stop"})])
        .collect();
    let provider = scripted(json!([{"chunks": chunks}]));
    let ran = run_with(
        &home,
        provider,
        registry_with(vec![]),
        test_config(),
        "q",
        CancellationToken::new(),
    )
    .await;
    let deltas: Vec<(usize, String)> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ReasoningDelta { chars, tail, .. } => Some((*chars, tail.clone())),
            _ => None,
        })
        .collect();
    assert!(
        !deltas.is_empty() && deltas.len() <= 3,
        "throttled: {}",
        deltas.len()
    );
    assert_eq!(
        deltas[0].0,
        "step 0. ".len(),
        "the first chunk is reported at once"
    );
    let total: usize = (0..60).map(|i| format!("step {i}. ").len()).sum();
    assert_eq!(deltas.last().unwrap().0, total, "the final count is exact");
    assert!(deltas.last().unwrap().1.ends_with("step 59. "));
    assert!(deltas.last().unwrap().1.chars().count() <= 600);
}

#[tokio::test]
async fn large_texts_are_offloaded_from_the_trace_and_read_back() {
    let home = Home::new();
    let answer = "A long answer. ".repeat(10);
    let provider = scripted(json!([text_turn(&answer)]));
    let mut cfg = test_config();
    cfg.trace.text_inline_limit = 16;
    let ran = run_with(
        &home,
        provider,
        registry_with(vec![]),
        cfg,
        "a prompt longer than sixteen chars",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    let raw = read_trace(&home.session_dir(), None).unwrap();
    let rec = raw.records.iter().find(|r| r["type"] == "answer").unwrap();
    assert!(rec.get("content").is_none());
    assert_eq!(rec["content_size"], answer.chars().count());
    assert!(
        rec["content_path"]
            .as_str()
            .unwrap()
            .starts_with("trace-blobs/")
    );
    let resolved = read_trace(&home.session_dir(), Some(&["content", "prompt"])).unwrap();
    assert_eq!(
        resolved
            .records
            .iter()
            .find(|r| r["type"] == "answer")
            .unwrap()["content"],
        answer.as_str()
    );
    assert_eq!(
        resolved
            .records
            .iter()
            .find(|r| r["type"] == "start")
            .unwrap()["prompt"],
        "a prompt longer than sixteen chars"
    );
    assert!(
        !home
            .paths
            .runs_dir()
            .join(ran.outcome.run_id)
            .join("trace.jsonl")
            .exists(),
        "session runs trace in the session dir"
    );
}
