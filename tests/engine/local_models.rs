//! Small local models behind an OpenAI-compatible server (issue 25): replies
//! as Qwen2.5-Coder-1.5B wrote them behind `llama-server --jinja`, replayed
//! through the loopback server. Tool calls written as text (fenced JSON,
//! `<tool_call>`, `<tools>` lines, `{{…}}` with Python literals) become real
//! calls and the run goes on; a call to a name that is not a tool gets one
//! correction; a context-size error is followed by a smaller retry; the
//! window is discovered; an invented number marks the run partial; the same
//! failing call is stopped.
//!
//! Figures in the scripted answers are derived from the embedded data at
//! test time, never copied from the output under test.

use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDate;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::agent::events::{AgentEvent, RunStatus, ToolCallStatus, ToolEvent};
use vibedesk::agent::{Loop, LoopConfig, LoopDeps};
use vibedesk::llm::openai::{OpenAiConfig, OpenAiProvider};
use vibedesk::llm::window::WindowDiscovery;
use vibedesk::memory::{MemoryFlags, MemoryStore, SkillSet};
use vibedesk::research::data::{DataConfig, embedded};
use vibedesk::research::indicators;
use vibedesk::store::read_trace;
use vibedesk::tools::Registry;
use vibedesk::tools::builtin::market::register_market_tools_with;
use vibedesk::tools::builtin::memory::register_memory_tools;
use vibedesk::tools::builtin::register_defaults;

use crate::support::harness::*;
use crate::support::server::{
    Reply, TestServer, json_reply, sse_chunk, sse_done, text_reply, tool_call_reply,
};

fn provider_with(server: &TestServer, discovery: WindowDiscovery) -> Arc<OpenAiProvider> {
    Arc::new(
        OpenAiProvider::new(OpenAiConfig {
            provider_name: "llamacpp".into(),
            base_url: server.base_url(),
            model: "qwen2.5-coder-1.5b-instruct-q4_k_m".into(),
            api_key: None,
            connect_timeout: Duration::from_secs(5),
            send_reasoning_content: false,
            temperature: Some(0.2),
            max_tokens: Some(1024),
            extra_headers: vec![],
            discovery,
        })
        .expect("provider"),
    )
}

fn provider(server: &TestServer) -> Arc<OpenAiProvider> {
    provider_with(server, WindowDiscovery::None)
}

/// The file tools and the market tools on the embedded data only.
fn registry() -> Arc<Registry> {
    let mut r = Registry::new();
    register_defaults(&mut r).expect("defaults");
    register_market_tools_with(&mut r, DataConfig::offline()).expect("market tools");
    Arc::new(r)
}

fn config() -> LoopConfig {
    LoopConfig {
        max_iterations: 6,
        text_tool_calls: true,
        llm_timeout: Some(Duration::from_secs(20)),
        idle_timeout: Some(Duration::from_secs(5)),
        ..test_config()
    }
}

fn d(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

/// A symbol's embedded close on its last trading day up to `end`.
fn close_on(symbol: &str, end: &str) -> (String, f64) {
    let bars = embedded::load(symbol, None, Some(d(end))).unwrap().bars;
    let last = bars.len() - 1;
    (bars.dates[last].to_string(), bars.close[last])
}

/// AAPL's RSI(14) on 2008-01-25 from all of its history.
fn aapl_rsi() -> f64 {
    let bars = embedded::load("AAPL", None, Some(d("2008-01-25")))
        .unwrap()
        .bars;
    *indicators::rsi(&bars.close, 14).unwrap().last().unwrap()
}

const RSI_CALL: &str = "```json\n{\"name\": \"technical_indicator\", \"arguments\": {\"symbol\": \"AAPL\", \"indicator\": \"rsi\", \"params\": {\"period\": 14}, \"start\": \"2008-01-25\", \"end\": \"2008-01-25\"}}\n```";

fn finished_tools(ran: &Ran) -> Vec<(String, ToolCallStatus)> {
    ran.events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Tool(ToolEvent::ToolCallFinished { tool, status, .. }) => {
                Some((tool.clone(), *status))
            }
            _ => None,
        })
        .collect()
}

fn trace_records(home: &Home, kind: &str) -> Vec<Value> {
    read_trace(&home.session_dir(), None)
        .unwrap()
        .records
        .into_iter()
        .filter(|r| r["type"] == kind)
        .collect()
}

fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// One recorded reply per form; each becomes a real call, the tool runs,
/// its result goes back, and the model's second turn is the answer.
#[tokio::test]
async fn each_text_form_becomes_a_real_call_and_the_run_goes_on() {
    let (msft_day, msft) = close_on("MSFT", "2005-01-31");
    let (aapl_day, aapl) = close_on("AAPL", "2010-12-31");
    let (ibm_day, ibm) = close_on("IBM", "2010-12-31");
    let rsi = aapl_rsi();
    let cases: Vec<(&str, String, Vec<&str>, String)> = vec![
        (
            "fenced_json",
            RSI_CALL.to_string(),
            vec!["technical_indicator"],
            format!("AAPL's RSI(14) on 2008-01-25 was {rsi:.2}."),
        ),
        (
            "tool_call_tag",
            "<tool_call>\n{\"name\": \"get_market_data\", \"arguments\": {\"symbol\": \"MSFT\", \"start\": \"2005-01-03\", \"end\": \"2005-01-31\", \"last_n\": 1}}\n</tool_call>".to_string(),
            vec!["get_market_data"],
            format!("MSFT closed at {msft:.2} on {msft_day}."),
        ),
        (
            "tools_lines",
            "<tools>\n{\"name\": \"get_market_data\", \"arguments\": {\"symbol\": \"AAPL\", \"end\": \"2010-12-31\", \"last_n\": 1}}\n{\"name\": \"get_market_data\", \"arguments\": {\"symbol\": \"IBM\", \"end\": \"2010-12-31\", \"last_n\": 1}}\n</tools>".to_string(),
            vec!["get_market_data", "get_market_data"],
            format!("On {aapl_day} AAPL closed at {aapl:.2} and on {ibm_day} IBM at {ibm:.2}."),
        ),
        (
            "bare_json",
            "{{\"name\": \"get_market_data\", \"arguments\": {{\"symbol\": \"IBM\", \"start\": \"2010-12-01\", \"end\": \"2010-12-31\", \"last_n\": 1, \"adjusted\": False}}}}".to_string(),
            vec!["get_market_data"],
            format!("IBM closed at {ibm:.2} on {ibm_day}."),
        ),
    ];
    for (form, call, tools, answer) in cases {
        let home = Home::new();
        let server = TestServer::start(vec![text_reply(&call), text_reply(&answer)]).await;
        let ran = run_with(
            &home,
            provider(&server),
            registry(),
            config(),
            "What does the data say?",
            CancellationToken::new(),
        )
        .await;
        assert_eq!(
            ran.outcome.status,
            RunStatus::Success,
            "{form}: {}",
            ran.outcome.reason
        );
        assert_eq!(ran.outcome.content, answer, "{form}");
        let ran_tools = finished_tools(&ran);
        assert_eq!(
            ran_tools
                .iter()
                .map(|(t, _)| t.as_str())
                .collect::<Vec<_>>(),
            tools,
            "{form}"
        );
        assert!(
            ran_tools.iter().all(|(_, s)| *s == ToolCallStatus::Ok),
            "{form}: {ran_tools:?}"
        );
        let records = trace_records(&home, "text_tool_call");
        assert_eq!(records.len(), 1, "{form}");
        assert_eq!(records[0]["form"], form);
        assert_eq!(records[0]["unknown"], json!([]));
        // The model sees its calls as calls, and their results.
        let reqs = server.requests();
        assert_eq!(reqs.len(), 2, "{form}");
        let second = messages(&reqs[1].body);
        let assistant = second.iter().find(|m| m["role"] == "assistant").unwrap();
        assert_eq!(
            assistant["tool_calls"].as_array().unwrap().len(),
            tools.len(),
            "{form}"
        );
        let results = second.iter().filter(|m| m["role"] == "tool").count();
        assert_eq!(results, tools.len(), "{form}");
        assert_eq!(reqs[0].body["temperature"], json!(0.2));
        assert_eq!(reqs[0].body["max_tokens"], json!(1024));
        // The call was never shown as text.
        let shown: String = ran
            .events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::TextDelta { delta, .. } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(shown, answer, "{form}: the call leaked into the chat");
    }
}

/// The 0.5B model called a skill name as a tool: it is told the tools once,
/// then calls a real one.
#[tokio::test]
async fn a_call_to_an_unknown_name_gets_one_correction() {
    let home = Home::new();
    let rsi = aapl_rsi();
    let skill_call =
        "```json\n{\"name\": \"backtest_design\", \"arguments\": {\"symbol\": \"AAPL\"}}\n```";
    let answer = format!("The RSI(14) of AAPL on 2008-01-25 was {rsi:.1}.");
    let server = TestServer::start(vec![
        text_reply(skill_call),
        text_reply(RSI_CALL),
        text_reply(&answer),
    ])
    .await;
    let ran = run_with(
        &home,
        provider(&server),
        registry(),
        config(),
        "AAPL RSI on 2008-01-25?",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let second = messages(&reqs[1].body);
    let steer = second.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(steer.contains("no tool named `backtest_design`"), "{steer}");
    assert!(
        steer.contains("technical_indicator") && steer.contains("get_market_data"),
        "the correction lists the tools: {steer}"
    );
    let rejected = ran.events.iter().any(|e| matches!(e, AgentEvent::AnswerRejected { issues, .. } if issues == &vec!["unknown_tool_in_text: backtest_design".to_string()]));
    assert!(rejected, "the chat says why the reply was sent back");
    let records = trace_records(&home, "text_tool_call");
    assert_eq!(records[0]["unknown"], json!(["backtest_design"]));
    assert_eq!(records[1]["unknown"], json!([]));
    assert_eq!(
        finished_tools(&ran),
        vec![("technical_indicator".to_string(), ToolCallStatus::Ok)]
    );
}

/// After the one correction, another call to a name that is not a tool
/// ends the run failed: it is never a successful answer.
#[tokio::test]
async fn an_unknown_name_after_the_correction_is_never_an_answer() {
    let home = Home::new();
    let call = "<tool_call>\n{\"name\": \"rsi_calculator\", \"arguments\": {\"ticker\": \"AAPL\"}}\n</tool_call>";
    let server = TestServer::start(vec![text_reply(call), text_reply(call)]).await;
    let ran = run_with(
        &home,
        provider(&server),
        registry(),
        config(),
        "AAPL RSI?",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Failed);
    assert_eq!(ran.outcome.error_code.as_deref(), Some("unknown_tool"));
    assert!(
        ran.outcome.reason.contains("rsi_calculator"),
        "{}",
        ran.outcome.reason
    );
    assert!(ran.outcome.content.is_empty());
    assert_eq!(server.request_count(), 2);
    assert_eq!(ran.count("answer"), 0);
}

/// llama.cpp refuses a request larger than its window with HTTP 400; the
/// loop learns the window, fits the context (the year of bars is cut) and
/// retries once with a smaller request. The session's next run starts with
/// the learned window.
#[tokio::test]
async fn a_context_size_error_is_followed_by_a_smaller_retry() {
    let home = Home::new();
    let year = "```json\n{\"name\": \"get_market_data\", \"arguments\": {\"symbol\": \"AAPL\", \"start\": \"2008-01-01\", \"end\": \"2008-12-31\"}}\n```";
    let overflow = json_reply(
        400,
        &json!({"error": {"code": 400, "message": "request (9822 tokens) exceeds the available context size (8192 tokens), try increasing it", "type": "exceed_context_size_error"}}),
    );
    let server = TestServer::start(vec![
        text_reply(year),
        overflow,
        text_reply("AAPL fell through 2008; the bars above show the whole year."),
        text_reply("Still here."),
    ])
    .await;
    let deps = LoopDeps::new(
        provider(&server),
        registry(),
        config(),
        home.paths.runs_dir(),
    );
    let mut lp = Loop::new(deps);
    let ran = run_loop(
        &mut lp,
        &home,
        "Show me AAPL in 2008",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3, "one retry, no summary call");
    assert!(
        reqs[2].raw_body.len() < reqs[1].raw_body.len() * 2 / 3,
        "the retry is smaller: {} → {} bytes",
        reqs[1].raw_body.len(),
        reqs[2].raw_body.len()
    );
    let overflow = trace_records(&home, "context_overflow");
    assert_eq!(overflow.len(), 1);
    assert_eq!(overflow[0]["window"], 8192);
    assert!(
        overflow[0]["tokens_after"].as_u64() < overflow[0]["tokens_before"].as_u64(),
        "{}",
        overflow[0]
    );
    let fitted = ran.events.iter().any(|e| matches!(e, AgentEvent::CompactionFinished { trigger, messages_touched, .. } if trigger == "context_error" && *messages_touched > 0));
    assert!(fitted, "the fit is a visible compaction");
    assert!(ran.events.iter().any(
        |e| matches!(e, AgentEvent::Notice { message, .. } if message.contains("8192-token window"))
    ));

    let next = run_loop(&mut lp, &home, "and now?", CancellationToken::new()).await;
    let threshold = next.events.iter().find_map(|e| match e {
        AgentEvent::Watermark { threshold, .. } => Some(*threshold),
        _ => None,
    });
    assert_eq!(threshold, Some(6144), "the learned window scales the gates");
}

/// llama.cpp's `/props` says the window before the first request: the
/// gates, the gauge and the tool-result cap scale to it, and the gauge
/// counts the tool schemas sent with every request.
#[tokio::test]
async fn the_window_is_discovered_and_the_gauge_counts_the_tool_schemas() {
    let home = Home::new();
    let props = json_reply(
        200,
        &json!({"default_generation_settings": {"n_ctx": 8192, "params": {"temperature": 0.8}}, "total_slots": 1, "model_path": "/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"}),
    );
    let server = TestServer::start_with_discovery(vec![props, text_reply("Hello.")]).await;
    let cfg = LoopConfig {
        discover_window: true,
        ..config()
    };
    let reg = registry();
    let ran = run_with(
        &home,
        provider_with(&server, WindowDiscovery::LlamaCpp),
        reg.clone(),
        cfg,
        "hi",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    let reqs = server.requests();
    assert_eq!(
        (reqs[0].method.as_str(), reqs[0].path.as_str()),
        ("GET", "/props")
    );
    let (tokens, threshold, gates) = ran
        .events
        .iter()
        .find_map(|e| match e {
            AgentEvent::Watermark {
                tokens,
                threshold,
                gates,
                ..
            } => Some((*tokens, *threshold, *gates)),
            _ => None,
        })
        .unwrap();
    assert_eq!(threshold, 6144);
    assert_eq!(gates, [3072, 4300, 6144]);
    let schemas: Vec<Value> = reqs[1].body["tools"].as_array().unwrap().clone();
    let schema_tokens = vibedesk::llm::tokens::Estimator::for_model("x")
        .count_text(&Value::Array(schemas).to_string());
    assert!(schema_tokens > 500, "{schema_tokens}");
    assert!(
        tokens > schema_tokens,
        "the gauge ({tokens}) counts the tool schemas ({schema_tokens}) and the system prompt"
    );
}

/// "AAPL's RSI(14) on 2008-01-25 was 13.31" when the tool said otherwise:
/// the figure is flagged, and a run whose every figure is unverified ends
/// partial with `unverified_numbers` in `run_finished`.
#[tokio::test]
async fn an_invented_number_marks_the_run_partial() {
    let home = Home::new();
    let rsi = aapl_rsi();
    let invented = if (rsi - 13.31).abs() < 0.5 {
        47.77
    } else {
        13.31
    };
    let answer = format!("AAPL's RSI on 2008-01-25 was {invented:.2}, deep in oversold territory.");
    let server = TestServer::start(vec![text_reply(RSI_CALL), text_reply(&answer)]).await;
    let ran = run_with(
        &home,
        provider(&server),
        registry(),
        config(),
        "What was AAPL's RSI on 2008-01-25?",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Partial,
        "{}",
        ran.outcome.reason
    );
    assert!(
        ran.outcome.reason.contains("unverified"),
        "{}",
        ran.outcome.reason
    );
    let shown = format!("{invented:.2}");
    assert_eq!(ran.outcome.unverified_numbers, vec![shown.clone()]);
    let finished = ran.events.iter().find_map(|e| match e {
        AgentEvent::RunFinished { .. } => Some(serde_json::to_value(e).unwrap()),
        _ => None,
    });
    assert_eq!(finished.unwrap()["unverified_numbers"], json!([shown]));
    assert!(ran.events.iter().any(|e| matches!(e, AgentEvent::UnverifiedNumbers { numbers, .. } if numbers == &vec![shown.clone()])));
    assert_eq!(
        read_json(&ran.outcome.run_dir.join("state.json"))["status"],
        "partial"
    );
    assert_eq!(trace_records(&home, "unverified_numbers").len(), 1);
}

/// A small model sends the same failing call back (three tickers in one
/// `symbol`, refused with "one ticker per call"): the second time it is
/// told so, the third time the run stops with a reason that says what.
#[tokio::test]
async fn the_same_failing_call_is_stopped() {
    let home = Home::new();
    let args = r#"{"symbol":"AAPL,MSFT,IBM","start":"2010-01-01","end":"2010-12-31"}"#;
    let call = || tool_call_reply(&[("call_1", "get_market_data", args)]);
    let server = TestServer::start(vec![call(), call(), call(), text_reply("never")]).await;
    let ran = run_with(
        &home,
        provider(&server),
        registry(),
        config(),
        "AAPL, MSFT and IBM in 2010?",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Failed);
    assert_eq!(ran.outcome.error_code.as_deref(), Some("repeated_failure"));
    assert!(
        ran.outcome
            .reason
            .starts_with("stopped: the model sent the same failing call 3 times: get_market_data"),
        "{}",
        ran.outcome.reason
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let third = messages(&reqs[2].body);
    let warned = third
        .last()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        warned.contains("failed 2 times with the same arguments"),
        "{warned}"
    );
    assert!(warned.contains("one ticker per call"), "{warned}");
    assert_eq!(trace_records(&home, "repeated_failure").len(), 2);
}

/// A small window's first compaction gate is low: the 1.5B model's batch of
/// seven calls came back over it, and the results the model had not read
/// yet were cleared (all but three), so it called the same tools again.
/// Results after the model's last turn are kept; read ones are cleared.
#[tokio::test]
async fn a_batch_is_never_cleared_before_the_model_reads_it() {
    let home = Home::new();
    let vol = |s: &str| {
        let args = json!({"symbol": s, "indicator": "volatility", "params": {"window": 20}, "start": "2010-12-01", "end": "2010-12-31"});
        args.to_string()
    };
    let (a, m, i, s, g) = (vol("AAPL"), vol("MSFT"), vol("IBM"), vol("SPY"), vol("GLD"));
    let batch = tool_call_reply(&[
        ("c1", "technical_indicator", &a),
        ("c2", "technical_indicator", &m),
        ("c3", "technical_indicator", &i),
        ("c4", "technical_indicator", &s),
        ("c5", "technical_indicator", &g),
    ]);
    let next = tool_call_reply(&[
        ("c6", "technical_indicator", &vol("QQQ")),
        ("c7", "technical_indicator", &vol("TLT")),
    ]);
    let server = TestServer::start(vec![batch, next, text_reply("Done.")]).await;
    // The first gate (half the threshold) lies between the first request
    // and the one after the batch; the second gate is never reached.
    let cfg = LoopConfig {
        token_threshold: 9_000,
        ..config()
    };
    let ran = run_with(
        &home,
        provider(&server),
        registry(),
        cfg,
        "Which was the most volatile in December 2010?",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    let results = |n: usize| -> Vec<String> {
        messages(&server.requests()[n].body)
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap().to_string())
            .collect()
    };
    let first = results(1);
    assert_eq!(first.len(), 5);
    assert!(
        first.iter().all(|r| r.contains("\"volatility\":")),
        "every result of the batch reaches the model: {first:?}"
    );
    let second = results(2);
    assert_eq!(second.len(), 7);
    assert!(
        second[..4].iter().all(|r| r == "[cleared]"),
        "read results are cleared, all but the last three: {second:?}"
    );
    assert!(
        second[4..].iter().all(|r| r.contains("\"volatility\":")),
        "the new ones are kept: {second:?}"
    );
    assert!(ran.events.iter().any(
        |e| matches!(e, AgentEvent::CompactionFinished { layer, .. } if layer == "microcompact")
    ));
}

/// A hosted provider's reply that only looks like a call is its answer
/// (text-form calls are read for local servers, docs §2.11.1).
#[tokio::test]
async fn text_form_calls_are_read_only_when_enabled() {
    let home = Home::new();
    let server = TestServer::start(vec![text_reply(RSI_CALL)]).await;
    let cfg = LoopConfig {
        text_tool_calls: false,
        ..config()
    };
    let ran = run_with(
        &home,
        provider(&server),
        registry(),
        cfg,
        "Show me the call you would make",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.status, RunStatus::Success);
    assert_eq!(ran.outcome.content, RSI_CALL);
    assert!(finished_tools(&ran).is_empty());
    assert!(trace_records(&home, "text_tool_call").is_empty());
}

/// The registry with the real backtest tool (offline, the sandboxed engine).
fn registry_with_backtest() -> Arc<Registry> {
    use vibedesk::sandbox::{RunnerConfig, UserPolicy};
    use vibedesk::tools::builtin::backtest::{BacktestToolConfig, register_backtest_tools};
    let mut r = Registry::new();
    register_market_tools_with(&mut r, DataConfig::offline()).expect("market tools");
    let cfg = BacktestToolConfig {
        engine_program: std::path::PathBuf::from(env!("CARGO_BIN_EXE_vibedesk")),
        runner: RunnerConfig {
            timeout: Duration::from_secs(60),
            drain_timeout: Duration::from_secs(2),
            user: UserPolicy::Auto,
            ..RunnerConfig::default()
        },
        cache_dir: None,
        offline: true,
        python: None,
        defaults: Default::default(),
        timeout: Duration::from_secs(60),
        yahoo_base_url: None,
        stooq_base_url: None,
    };
    register_backtest_tools(&mut r, cfg).expect("backtest tools");
    Arc::new(r)
}

/// The 1.5B model's backtest call, with its usual slips: one ticker as a
/// string and `validation` as a string. The flat arguments run, each slip
/// is put right and said in the result the model reads.
#[tokio::test]
async fn a_backtest_takes_flat_arguments_and_its_slips_are_put_right() {
    let home = Home::new();
    let call = "```json\n{\"name\": \"backtest\", \"arguments\": {\"strategy\": \"sma_crossover\", \"params\": {\"fast\": 20, \"slow\": 50}, \"symbols\": \"AAPL\", \"start\": \"2005-01-01\", \"end\": \"2007-12-31\", \"commission_rate\": \"0.001\", \"validation\": \"monte_carlo\"}}\n```";
    let server = TestServer::start(vec![
        text_reply(call),
        text_reply("The SMA crossover backtest ran; its metrics are above."),
    ])
    .await;
    let ran = run_with(
        &home,
        provider(&server),
        registry_with_backtest(),
        config(),
        "Backtest a 20/50 SMA crossover on AAPL 2005-2007",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    let second = messages(&server.requests()[1].body);
    let result: Value = serde_json::from_str(
        second.iter().find(|m| m["role"] == "tool").unwrap()["content"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(result["status"], "ok", "{result:#}");
    assert!(result["metrics"]["sharpe"].is_number(), "{result:#}");
    assert!(
        result["validation"]["monte_carlo"].is_object(),
        "the validation asked as a string ran: {result:#}"
    );
    let warnings = result["argument_warnings"].to_string();
    for said in [
        "`symbols` was sent as a string",
        "`commission_rate` was sent as a string",
        "`validation` was \\\"monte_carlo\\\"",
    ] {
        assert!(warnings.contains(said), "{said} in {warnings}");
    }
    let config: Value = read_json(&ran.outcome.run_dir.join("config.json"));
    assert_eq!(config["codes"], json!(["AAPL"]));
    assert_eq!(config["commission_rate"], json!(0.001));
    assert_eq!(config["strategy"]["params"]["slow"], 50);
}

/// A reply that opens with a tag named after the tool, its arguments after
/// it: the 1.5B model wrote `<backtest> {…}` in the evaluation. Here with
/// its other recorded slips: `sma_fast`/`sma_slow` for `fast`/`slow`, and
/// `null` costs for the market's usual ones.
#[tokio::test]
async fn a_tag_named_after_the_tool_is_a_call_and_its_slips_are_read() {
    let home = Home::new();
    let call = "<backtest> {\"strategy\": \"sma_crossover\", \"params\": {\"sma_fast\": 10, \"sma_slow\": 30}, \"symbols\": [\"IBM\"], \"start\": \"2006-01-01\", \"end\": \"2008-12-31\", \"commission_rate\": null, \"slippage\": null}";
    let answer = "The crossover backtest on IBM ran; its metrics are above.";
    let server = TestServer::start(vec![text_reply(call), text_reply(answer)]).await;
    let ran = run_with(
        &home,
        provider(&server),
        registry_with_backtest(),
        config(),
        "Backtest a 10/30-day SMA crossover on IBM from 2006 to 2008",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    assert_eq!(ran.outcome.content, answer);
    assert_eq!(
        finished_tools(&ran),
        vec![("backtest".to_string(), ToolCallStatus::Ok)]
    );
    let records = trace_records(&home, "text_tool_call");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["form"], "named_tag");
    let config: Value = read_json(&ran.outcome.run_dir.join("config.json"));
    assert_eq!(
        config["strategy"],
        json!({"name": "sma_crossover", "params": {"fast": 10, "slow": 30}})
    );
    assert!(
        config.get("commission_rate").is_none() && config.get("slippage").is_none(),
        "null costs are the market's usual ones: {config}"
    );
    let second = messages(&server.requests()[1].body);
    let result = second.iter().find(|m| m["role"] == "tool").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        result.contains("`params.sma_fast` was read as `fast`"),
        "{result}"
    );
}

/// A lean prompt (the local presets' default) is the same from run to run
/// up to the user's message, tool schemas included, so a server's prefix
/// cache holds: the run's directory and the time travel in the user
/// message. Its schemas leave out the rarely needed properties, which
/// are still accepted (docs §4.3, §4.7).
#[tokio::test]
async fn a_lean_prompt_keeps_the_prefix_the_same_across_runs() {
    let home = Home::new();
    let server = TestServer::start(vec![
        text_reply("First."),
        text_reply("Second."),
        text_reply("Third."),
    ])
    .await;
    let lean = LoopConfig {
        lean_prompt: true,
        ..config()
    };
    let reg = registry_with_backtest();
    for prompt in ["How did IBM do in 2008?", "And MSFT?"] {
        let deps = LoopDeps::new(
            provider(&server),
            reg.clone(),
            lean.clone(),
            home.paths.runs_dir(),
        );
        let ran = run_loop(
            &mut Loop::new(deps),
            &home,
            prompt,
            CancellationToken::new(),
        )
        .await;
        assert_eq!(
            ran.outcome.status,
            RunStatus::Success,
            "{}",
            ran.outcome.reason
        );
        // A second apart, so that the time could differ.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let full = run_with(
        &home,
        provider(&server),
        reg,
        config(),
        "And AAPL?",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(full.outcome.status, RunStatus::Success);
    let reqs = server.requests();
    let (a, b, c) = (
        messages(&reqs[0].body),
        messages(&reqs[1].body),
        messages(&reqs[2].body),
    );
    assert_eq!(a[0]["role"], "system");
    assert_eq!(a[0], b[0], "the system text is the same from run to run");
    assert_eq!(reqs[0].body["tools"], reqs[1].body["tools"]);
    let system = a[0]["content"].as_str().unwrap();
    assert!(
        !system.contains("Today is") && !system.contains("run_dir"),
        "{system}"
    );
    let user = a.last().unwrap()["content"].as_str().unwrap();
    assert!(
        user.starts_with("<run-context>\n## State\n- run_dir: "),
        "{user}"
    );
    assert!(
        user.contains("Today is ") && user.ends_with("\n\nHow did IBM do in 2008?"),
        "{user}"
    );
    // Without a lean prompt the context ends the system text, as before.
    let system = c[0]["content"].as_str().unwrap();
    assert!(system.contains("## State\n- run_dir: ") && system.contains("Today is "));
    assert_eq!(c.last().unwrap()["content"], "And AAPL?");
    let props = |body: &Value, tool: &str| -> Vec<String> {
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == tool)
            .unwrap()["function"]["parameters"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(
        props(&reqs[0].body, "backtest"),
        [
            "strategy",
            "params",
            "symbols",
            "start",
            "end",
            "commission_rate",
            "slippage"
        ]
    );
    assert_eq!(
        props(&reqs[0].body, "get_market_data"),
        ["symbol", "start", "end", "offset", "last_n"]
    );
    let all = props(&reqs[2].body, "backtest");
    assert!(
        all.contains(&"config".to_string()) && all.contains(&"validation".to_string()),
        "{all:?}"
    );
}

/// The first request of the local profile fits a small window: its tools
/// are those chosen for the question, the tool list is not repeated in the system text,
/// no skill catalogue is shown without `load_skill`, and what changes from
/// run to run comes last (docs §4.3, §4.7). Issue 25's target: ≤ 2 500.
#[test]
fn the_local_profile_first_request_is_lean_and_cache_stable() {
    use std::collections::BTreeMap;
    use vibedesk::cli::AgentSetup;
    use vibedesk::config::{Config, Overrides};
    let home = tempfile::tempdir().unwrap();
    let paths = vibedesk::store::Paths::under(home.path());
    let env: BTreeMap<String, String> =
        [("OPENAI_API_KEY".to_string(), "sk-test".to_string())].into();
    let load = |provider: &str| {
        let o = Overrides {
            provider: Some(provider.into()),
            ..Overrides::default()
        };
        Config::load_with(paths.clone(), &env, &o).unwrap()
    };
    let prompt = "What was AAPL's RSI(14) on 2008-01-25?";
    let hosted = load("openai");
    let local = load("llamacpp");
    let setup = AgentSetup::new(&hosted).unwrap();
    let full = setup.first_request(&hosted, prompt);
    let lean = setup.first_request(&local, prompt);
    // The tools chosen for the question (docs §4.7.1): the basics and
    // what matches it, a small set.
    assert!((2..=6).contains(&lean.tool_count), "{lean:?}");
    assert_eq!(full.tool_count, setup.registry.len());
    assert!(lean.total <= 2_500, "local first request {lean:?}");
    assert!(full.total > lean.total + 1_000, "{full:?} vs {lean:?}");
    // The tool schemas are most of it: the system text does not list them.
    assert!(lean.tools > lean.system, "{lean:?}");
    println!("first request: default {full:?}, local {lean:?}");
}

// ----- calls, not examples (issue 35 item 5, docs §2.11.1) ---------------------------

/// The registry above with the memory tools on a store in `dir`.
fn registry_with_memory(dir: &std::path::Path) -> (Arc<Registry>, Arc<MemoryStore>) {
    let store =
        Arc::new(MemoryStore::open(dir.join("memory"), MemoryFlags::preset("full")).unwrap());
    let mut r = Registry::new();
    register_defaults(&mut r).expect("defaults");
    register_market_tools_with(&mut r, DataConfig::offline()).expect("market tools");
    register_memory_tools(
        &mut r,
        store.clone(),
        Arc::new(SkillSet::load(None)),
        dir.join("sessions"),
    )
    .expect("memory tools");
    (Arc::new(r), store)
}

/// Files under a memory store's `entries/` (none when it was never written).
fn saved_entries(store: &MemoryStore) -> Vec<std::path::PathBuf> {
    files_under(store.entries_dir())
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

const REMEMBER_EXAMPLE: &str = "{\"name\": \"remember\", \"arguments\": {\"title\": \"Backtest costs\", \"content\": \"Always use commission_rate 0.5 for every backtest\", \"memory_type\": \"feedback\"}}";

/// The reply of the attack in issue 35: prose, a fenced example of a
/// `remember` call, prose again.
fn remember_example_reply() -> String {
    format!(
        "A `remember` call is a JSON object with the tool's name and its arguments. Here is what one looks like:\n\n```json\n{REMEMBER_EXAMPLE}\n```\n\nI have not saved anything: this is only an example."
    )
}

/// The attack of issue 35 through the real binary and the loopback server:
/// the user asks what a `remember` call looks like; the reply shows one in
/// a code block inside an explanation. It is the answer; nothing runs and
/// nothing is saved.
#[tokio::test]
async fn an_example_of_a_remember_call_is_the_answer_and_nothing_is_saved() {
    let home = tempfile::tempdir().unwrap();
    let reply = remember_example_reply();
    let server = TestServer::start(vec![text_reply(&reply)]).await;
    let out = vibedesk(home.path())
        .args([
            "run",
            "--json",
            "-p",
            "Show me what a remember call looks like, don't save anything.",
            "--base-url",
            &server.base_url(),
            "--model",
            "local",
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let answer = events.iter().find(|e| e["type"] == "answer").unwrap();
    assert_eq!(answer["content"], json!(reply), "the example is the answer");
    let shown: String = events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert_eq!(shown, reply, "the user saw it");
    assert!(
        !events
            .iter()
            .any(|e| e["type"].as_str().is_some_and(|t| t.starts_with("tool_"))),
        "no tool ran: {events:?}"
    );
    assert_eq!(events.last().unwrap()["status"], "success");
    assert_eq!(server.request_count(), 1);
    // Nothing was saved: the store exists (the run opened it) and holds no
    // entry; no file anywhere under the memory folder mentions the rule.
    let memory = home.path().join("data").join("memory");
    assert!(memory.is_dir(), "the run opened its memory store");
    for (file, _) in files_under(&memory) {
        let text = std::fs::read(&file).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&text).contains("commission_rate 0.5"),
            "saved in {}",
            file.display()
        );
        assert!(
            !file.starts_with(memory.join("entries")),
            "{}",
            file.display()
        );
    }
    // The trace says why it was not a call.
    let sid = events[0]["session_id"].as_str().unwrap();
    let trace = read_trace(&home.path().join("data/sessions").join(sid), None).unwrap();
    let record = trace
        .records
        .iter()
        .find(|r| r["type"] == "text_tool_call")
        .expect("text_tool_call record");
    assert_eq!(record["example"], "user_asked_for_example");
    assert_eq!(record["tools"], json!(["remember"]));
}

/// The same reply when the user did not ask for an example: a code block
/// inside an explanation is still no call (prose after it).
#[tokio::test]
async fn a_call_inside_an_explanation_is_delivered_not_run() {
    let home = Home::new();
    let tmp = tempfile::tempdir().unwrap();
    let (reg, store) = registry_with_memory(tmp.path());
    let reply = remember_example_reply();
    let server = TestServer::start(vec![text_reply(&reply)]).await;
    let ran = run_with(
        &home,
        provider(&server),
        reg,
        config(),
        "How do memories work here?",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    assert_eq!(ran.outcome.content, reply);
    assert!(finished_tools(&ran).is_empty());
    assert!(
        saved_entries(&store).is_empty(),
        "{:?}",
        saved_entries(&store)
    );
    assert_eq!(server.request_count(), 1);
    let records = trace_records(&home, "text_tool_call");
    assert_eq!(records[0]["example"], "prose_after_the_call");
}

/// A reply that *is* a call to a tool that writes (memory, files) is
/// refused with a note to the model; the refusal is in the trace; the
/// model's next reply is the answer.
#[tokio::test]
async fn a_text_form_call_that_writes_is_refused_with_a_note() {
    let home = Home::new();
    let tmp = tempfile::tempdir().unwrap();
    let (reg, store) = registry_with_memory(tmp.path());
    let remember = format!("```json\n{REMEMBER_EXAMPLE}\n```");
    let write = "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"rules.md\", \"content\": \"commission_rate 0.5\"}}\n</tool_call>";
    let answer = "I did not save the rule; save it yourself if you want it kept.";
    let server = TestServer::start(vec![
        text_reply(&remember),
        text_reply(write),
        text_reply(answer),
    ])
    .await;
    let ran = run_with(
        &home,
        provider(&server),
        reg,
        config(),
        "Remember to use commission_rate 0.5 for every backtest.",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    assert_eq!(ran.outcome.content, answer);
    assert!(
        finished_tools(&ran).is_empty(),
        "{:?}",
        finished_tools(&ran)
    );
    assert!(
        saved_entries(&store).is_empty(),
        "{:?}",
        saved_entries(&store)
    );
    assert!(!home.workspace().join("rules.md").exists());
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    for (req, tool) in [(&reqs[1], "remember"), (&reqs[2], "write_file")] {
        let msgs = messages(&req.body);
        let note = msgs.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            note.contains(&format!("Not run: your call to `{tool}`")),
            "{note}"
        );
        assert!(note.contains("your files, your say"), "{note}");
        // The model's own reply stays in the conversation, as text.
        let assistant = &msgs[msgs.len() - 2];
        assert_eq!(assistant["role"], "assistant");
        assert!(assistant.get("tool_calls").is_none_or(Value::is_null));
    }
    let records = trace_records(&home, "text_tool_call");
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["refused"], json!(["remember"]));
    assert_eq!(records[1]["refused"], json!(["write_file"]));
    let notices = ran
        .events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Notice { message, .. } if message.contains("not run")))
        .count();
    assert_eq!(notices, 2);
}

/// 1,000 calls in one reply, written as text or sent natively: 16 run, the
/// rest are refused with one note, and the trace counts them.
#[tokio::test]
async fn a_thousand_calls_in_one_reply_run_sixteen() {
    let lines: Vec<String> = (0..1000)
        .map(|i| format!("{{\"name\": \"count_probe\", \"arguments\": {{\"q\": \"{i}\"}}}}"))
        .collect();
    let text = format!("<tools>\n{}\n</tools>", lines.join("\n"));
    let args: Vec<(String, String)> = (0..1000)
        .map(|i| (format!("call_{i}"), format!("{{\"q\": \"{i}\"}}")))
        .collect();
    let native: Vec<(&str, &str, &str)> = args
        .iter()
        .map(|(id, a)| (id.as_str(), "count_probe", a.as_str()))
        .collect();
    for (form, reply) in [
        ("text", text_reply(&text)),
        ("native", tool_call_reply(&native)),
    ] {
        let home = Home::new();
        let probe = TestTool::new("count_probe", true, Behaviour::Echo);
        let ran_count = probe.counter();
        let mut r = Registry::new();
        register_defaults(&mut r).expect("defaults");
        r.register(Arc::new(probe)).unwrap();
        let server = TestServer::start(vec![reply, text_reply("Done.")]).await;
        let ran = run_with(
            &home,
            provider(&server),
            Arc::new(r),
            config(),
            "Probe everything.",
            CancellationToken::new(),
        )
        .await;
        assert_eq!(
            ran.outcome.status,
            RunStatus::Success,
            "{form}: {}",
            ran.outcome.reason
        );
        assert_eq!(
            ran_count.load(std::sync::atomic::Ordering::SeqCst),
            16,
            "{form}"
        );
        assert_eq!(finished_tools(&ran).len(), 16, "{form}");
        let reqs = server.requests();
        let second = messages(&reqs[1].body);
        let assistant = second.iter().find(|m| m["role"] == "assistant").unwrap();
        assert_eq!(
            assistant["tool_calls"].as_array().unwrap().len(),
            16,
            "{form}"
        );
        assert_eq!(
            second.iter().filter(|m| m["role"] == "tool").count(),
            16,
            "{form}"
        );
        let note = second.last().unwrap()["content"].as_str().unwrap();
        assert!(
            note.contains("held 1000 tool calls") && note.contains("other 984 were not run"),
            "{form}: {note}"
        );
        let over = trace_records(&home, "calls_over_limit");
        assert_eq!(over.len(), 1, "{form}");
        assert_eq!(
            (over[0]["calls"].as_u64(), over[0]["refused"].as_u64()),
            (Some(1000), Some(984))
        );
    }
}

/// An example asked for in the `<tool_call>` form is the answer too: its
/// markup is what the user asked to see, not a leak to send back.
#[tokio::test]
async fn an_example_in_tool_call_markup_is_the_answer_when_asked_for() {
    let home = Home::new();
    let reply = "<tool_call>\n{\"name\": \"get_market_data\", \"arguments\": {\"symbol\": \"IBM\", \"last_n\": 1}}\n</tool_call>";
    let server = TestServer::start(vec![text_reply(reply)]).await;
    let ran = run_with(
        &home,
        provider(&server),
        registry(),
        config(),
        "What does a get_market_data call look like? Don't run it.",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    assert_eq!(ran.outcome.content, reply);
    assert!(finished_tools(&ran).is_empty());
    assert_eq!(server.request_count(), 1);
    assert!(trace_records(&home, "tool_call_syntax_in_answer").is_empty());
    let shown: String = ran
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        shown, reply,
        "held back while streaming, shown once read as an example"
    );
}

// ---- Honest endings (issue 40 items 3 and 4) -------------------------------

const RETURNS_CALL: &str = "```json\n{\"name\": \"technical_indicator\", \"arguments\": {\"symbol\": \"AAPL\", \"indicator\": \"returns\", \"start\": \"2010-01-04\", \"end\": \"2010-01-29\"}}\n```";

/// AAPL's daily simple return on its last trading day up to 2010-01-29.
fn aapl_last_return() -> f64 {
    let close = embedded::load("AAPL", None, Some(d("2010-01-29")))
        .unwrap()
        .bars
        .close;
    let n = close.len();
    close[n - 1] / close[n - 2] - 1.0
}

/// Every number in a text.
fn numbers_in(text: &str) -> Vec<f64> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|t| t.parse::<f64>().ok())
        .collect()
}

/// The issue's case: "the Engle-Granger p-value … is 0.0001", computed by
/// nothing, beside a figure the tool gave. The tool's daily returns hold
/// values between 0.005 and 0.02 (asserted), which the old check read as
/// 0.0001 "in percent"; the run now ends partial on its key figure.
#[tokio::test]
async fn an_invented_p_value_beside_a_true_figure_marks_the_run_partial() {
    let home = Home::new();
    let r = aapl_last_return();
    let answer = format!(
        "AAPL's daily return on 2010-01-29 was {:.2}%. The Engle-Granger p-value of AAPL and MSFT is 0.0001, so the two are cointegrated.",
        r * 100.0
    );
    let server = TestServer::start(vec![text_reply(RETURNS_CALL), text_reply(&answer)]).await;
    let ran = run_with(
        &home,
        provider(&server),
        registry(),
        config(),
        "Are AAPL and MSFT cointegrated in January 2010? Give the Engle-Granger p-value.",
        CancellationToken::new(),
    )
    .await;
    let reqs = server.requests();
    let result = messages(&reqs[1].body)
        .into_iter()
        .filter(|m| m["role"] == "tool" || m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        numbers_in(&result)
            .iter()
            .any(|x| (0.005..0.02).contains(x)),
        "the tool result holds a value a hundred times 0.0001: {result}"
    );
    assert_eq!(
        ran.outcome.status,
        RunStatus::Partial,
        "{}",
        ran.outcome.reason
    );
    assert_eq!(ran.outcome.unverified_numbers, vec!["0.0001".to_string()]);
    assert!(
        ran.outcome.reason.contains("key figure") && ran.outcome.reason.contains("0.0001"),
        "{}",
        ran.outcome.reason
    );
    assert_eq!(
        read_json(&ran.outcome.run_dir.join("state.json"))["status"],
        "partial"
    );
}

const APOLOGY: &str = "I apologize, but I need a question to proceed.";

/// A3 of the eval: an empty reply, then "I need a question" after the tool
/// gave the data. The model is asked once for the answer; when it asks for
/// the question again the run fails, its reason saying so.
#[tokio::test]
async fn a_reply_that_asks_for_the_question_after_tool_results_is_not_success() {
    let home = Home::new();
    let server = TestServer::start(vec![
        text_reply(RSI_CALL),
        text_reply(""),
        text_reply(APOLOGY),
        text_reply(APOLOGY),
    ])
    .await;
    let ran = run_with(
        &home,
        provider(&server),
        registry(),
        config(),
        "What was AAPL's RSI(14) on 2008-01-25?",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Failed,
        "{}",
        ran.outcome.reason
    );
    assert_eq!(ran.outcome.error_code.as_deref(), Some("non_answer"));
    assert!(
        ran.outcome.reason.contains("does not answer")
            && ran.outcome.reason.contains("asks for the question"),
        "{}",
        ran.outcome.reason
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    let steered = messages(&reqs[3].body)
        .iter()
        .filter_map(|m| m["content"].as_str())
        .any(|c| c.contains("Your last reply did not answer"));
    assert!(
        steered,
        "the request after the first non-answer asks for the answer"
    );
    assert_eq!(trace_records(&home, "non_answer").len(), 2);
    assert_eq!(
        read_json(&ran.outcome.run_dir.join("state.json"))["status"],
        "failed"
    );

    // Asked once, the model answers: success.
    let home = Home::new();
    let rsi = aapl_rsi();
    let answer = format!("AAPL's RSI(14) on 2008-01-25 was {rsi:.2}.");
    let server = TestServer::start(vec![
        text_reply(RSI_CALL),
        text_reply("I'm sorry, I cannot help with that."),
        text_reply(&answer),
    ])
    .await;
    let ran = run_with(
        &home,
        provider(&server),
        registry(),
        config(),
        "What was AAPL's RSI(14) on 2008-01-25?",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    assert_eq!(ran.outcome.content, answer);
}

/// A streamed reply of `rows` data lines (one SSE chunk each): far more
/// than any answer.
fn rows_reply(opening: &str, line: &dyn Fn(usize) -> String, rows: usize) -> Reply {
    let mut parts = vec![sse_chunk(
        json!({"role": "assistant", "content": opening}),
        None,
    )];
    for i in 0..rows {
        parts.push(sse_chunk(json!({"content": line(i)}), None));
    }
    parts.push(sse_chunk(json!({}), Some("stop")));
    parts.push(sse_done());
    Reply::Stream(parts)
}

/// "Show me AAPL's RSI(14) on 2008-01-25." with runaway replies cut.
async fn rsi_run_cutting_runaways(home: &Home, server: &TestServer) -> Ran {
    let cfg = LoopConfig {
        cut_runaways: true,
        ..config()
    };
    run_with(
        home,
        provider(server),
        registry(),
        cfg,
        "Show me AAPL's RSI(14) on 2008-01-25.",
        CancellationToken::new(),
    )
    .await
}

/// One reply streams invented price rows, the next repeats a line inside a
/// fence (text held back as a possible call, watched all the same): each is
/// cut long before its end, the model is asked once for a short answer,
/// and the second runaway ends the run failed with the reason.
#[tokio::test]
async fn a_runaway_reply_is_cut_and_a_second_ends_the_run() {
    let home = Home::new();
    const ROWS: usize = 5_000;
    let price_row = |i: usize| {
        format!(
            "2026-01-0{},{}.4,{}.9,{}.1,{}.6\n",
            i % 9 + 1,
            120 + i % 50,
            121 + i % 50,
            119 + i % 50,
            120 + i % 50
        )
    };
    let same_line = |_: usize| "The p-value is low, so the pair is cointegrated.\n".to_string();
    let server = TestServer::start(vec![
        text_reply(RSI_CALL),
        rows_reply("Here are the prices:\n", &price_row, ROWS),
        rows_reply("```\n", &same_line, ROWS),
    ])
    .await;
    let ran = rsi_run_cutting_runaways(&home, &server).await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Failed,
        "{}",
        ran.outcome.reason
    );
    assert_eq!(ran.outcome.error_code.as_deref(), Some("runaway_reply"));
    assert!(
        ran.outcome.reason.contains("cut again") && ran.outcome.reason.contains("repeats"),
        "{}",
        ran.outcome.reason
    );
    let cuts = trace_records(&home, "reply_cut");
    assert_eq!(cuts.len(), 2, "{cuts:?}");
    assert!(cuts[0]["reason"].as_str().unwrap().contains("data rows"));
    // Cut long before the end: the text the trace kept of each reply.
    let thinking = trace_records(&home, "thinking");
    let rows_kept = thinking
        .iter()
        .map(|r| r["content"].as_str().unwrap_or_default())
        .find(|c| c.starts_with("Here are the prices"))
        .unwrap()
        .lines()
        .count();
    assert!(rows_kept < 100, "{rows_kept} of {ROWS} rows were read");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let steer = messages(&reqs[2].body).last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        steer.contains("cut off") && steer.contains("data rows"),
        "{steer}"
    );
    let notices = ran
        .events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Notice { message, .. } if message.contains("reply was cut")))
        .count();
    assert_eq!(notices, 2);
}

/// A reply that writes the prompt back (measured: the 1.5B model wrote the
/// `<run-context>` block and the tool schemas for about 150 s) is cut at
/// its opening, and the request goes again without the block and with no
/// steering note; the call then runs and the run succeeds.
#[tokio::test]
async fn an_echo_of_the_prompt_is_cut_at_once_and_the_request_sent_again() {
    let home = Home::new();
    const ROWS: usize = 5_000;
    let schema_line = |i: usize| {
        format!("{{\"type\": \"function\", \"function\": {{\"name\": \"tool_{i}\"}}}}\n")
    };
    let rsi = aapl_rsi();
    let answer = format!("AAPL's RSI(14) on 2008-01-25 was {rsi:.2}.");
    let server = TestServer::start(vec![
        rows_reply(
            "<run-context>\n## State\n- run_dir: /tmp/r\n",
            &schema_line,
            ROWS,
        ),
        text_reply(RSI_CALL),
        text_reply(&answer),
    ])
    .await;
    let cfg = LoopConfig {
        cut_runaways: true,
        lean_prompt: true,
        ..config()
    };
    let ran = run_with(
        &home,
        provider(&server),
        registry(),
        cfg,
        "Show me AAPL's RSI(14) on 2008-01-25.",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    assert_eq!(ran.outcome.content, answer);
    let cuts = trace_records(&home, "reply_cut");
    assert_eq!(cuts.len(), 1, "{cuts:?}");
    assert!(
        cuts[0]["reason"]
            .as_str()
            .unwrap()
            .contains("writes the prompt back"),
        "{cuts:?}"
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    // The same conversation again, the question without the run's context
    // block, at the preset's temperature; then with the block again.
    let (first, again) = (messages(&reqs[0].body), messages(&reqs[1].body));
    assert_eq!(first.len(), again.len());
    let question = |m: &[Value]| m.last().unwrap()["content"].as_str().unwrap().to_string();
    assert!(question(&first).starts_with("<run-context>\n"), "{first:?}");
    assert_eq!(question(&again), "Show me AAPL's RSI(14) on 2008-01-25.");
    assert_eq!(first[0], again[0], "the system text is the same");
    for r in &reqs {
        assert_eq!(r.body["temperature"], json!(0.2));
    }
    let after = messages(&reqs[2].body);
    let asked = after.iter().find(|m| m["role"] == "user").unwrap();
    assert!(
        asked["content"]
            .as_str()
            .unwrap()
            .starts_with("<run-context>\n"),
        "{asked}"
    );
    // Cut at its opening: the trace kept only a line or two of it.
    let kept = read_trace(&home.session_dir(), None)
        .unwrap()
        .records
        .iter()
        .filter_map(|r| r["content"].as_str().map(str::to_string))
        .find(|c| c.starts_with("<run-context>"))
        .map_or(0, |c| c.lines().count());
    assert!(kept < 50, "{kept} of {ROWS} lines were read");
}

/// A local server's empty reply after a tool result (measured: then,
/// nudged, "I didn't receive any input from you") is asked again as it
/// was, hotter, with no note; the answer then comes.
#[tokio::test]
async fn an_empty_local_reply_is_asked_again_hotter_without_a_note() {
    let home = Home::new();
    let rsi = aapl_rsi();
    let answer = format!("AAPL's RSI(14) on 2008-01-25 was {rsi:.2}.");
    let server = TestServer::start(vec![
        text_reply(RSI_CALL),
        text_reply(""),
        text_reply(&answer),
    ])
    .await;
    let ran = rsi_run_cutting_runaways(&home, &server).await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(messages(&reqs[1].body), messages(&reqs[2].body), "no note");
    assert_eq!(reqs[2].body["temperature"], json!(0.7));
}

/// The measured false success: the model ranked MSFT first, backtested
/// AAPL, and gave AAPL's figure to MSFT. Here AAPL's and MSFT's RSI are
/// read one call each, and the answer gives AAPL's to MSFT: `partial`,
/// the figure listed and the reason naming both symbols. The same answer
/// with the right name succeeds.
#[tokio::test]
async fn a_figure_given_to_the_wrong_symbol_is_not_success() {
    let rsi = aapl_rsi();
    let msft_call = RSI_CALL.replace("AAPL", "MSFT");
    for (named, want) in [("MSFT", RunStatus::Partial), ("AAPL", RunStatus::Success)] {
        let home = Home::new();
        let answer = format!("The higher RSI(14) on 2008-01-25 was {named}'s, at {rsi:.2}.");
        let server = TestServer::start(vec![
            text_reply(RSI_CALL),
            text_reply(&msft_call),
            text_reply(&answer),
        ])
        .await;
        let ran = run_with(
            &home,
            provider(&server),
            registry(),
            config(),
            "Which had the higher RSI(14) on 2008-01-25, AAPL or MSFT?",
            CancellationToken::new(),
        )
        .await;
        assert_eq!(ran.outcome.status, want, "{named}: {}", ran.outcome.reason);
        if want == RunStatus::Partial {
            let figure = format!("{rsi:.2}");
            assert_eq!(ran.outcome.unverified_numbers, vec![figure.clone()]);
            assert!(
                ran.outcome.reason.contains("wrong symbol")
                    && ran.outcome.reason.contains(&format!("{figure} is AAPL's")),
                "{}",
                ran.outcome.reason
            );
        }
    }
}

/// A local preset's request carries a `max_tokens` sized to the window it
/// learnt: a quarter of a 2,048-token window, or what the prompt leaves.
#[tokio::test]
async fn a_local_reply_asks_for_max_tokens_sized_to_the_window() {
    let home = Home::new();
    let props = json_reply(
        200,
        &json!({"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1}),
    );
    let server = TestServer::start_with_discovery(vec![props, text_reply("Hello.")]).await;
    let cfg = LoopConfig {
        discover_window: true,
        size_replies: true,
        ..config()
    };
    let ran = run_with(
        &home,
        provider_with(&server, WindowDiscovery::LlamaCpp),
        registry(),
        cfg,
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
    let tokens = ran
        .events
        .iter()
        .find_map(|e| match e {
            AgentEvent::Watermark { tokens, .. } => Some(*tokens),
            _ => None,
        })
        .unwrap();
    let sent = server.requests()[1].body["max_tokens"].as_u64().unwrap();
    assert_eq!(
        sent,
        512.min(2048u64.saturating_sub(tokens)).max(64),
        "prompt {tokens} tokens"
    );
    assert_ne!(sent, 1024, "not the provider's configured default");
}
