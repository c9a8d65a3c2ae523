//! Compaction live in the loop: a scripted run that crosses all three gates,
//! the archive that keeps every original, the `compact` tool, `/compact`, and
//! a compacted history the provider test server accepts.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::agent::compaction::archive::read_archive;
use vibedesk::agent::compaction::microcompact::CLEARED;
use vibedesk::agent::events::{AgentEvent, RunStatus};
use vibedesk::agent::{Loop, LoopConfig, LoopDeps};
use vibedesk::llm::scripted::ScriptedProvider;
use vibedesk::llm::{ChatRequest, ChunkStream, LlmError, Provider, StreamChunk};
use vibedesk::model::Role;
use vibedesk::store::{MessageLog, read_trace};

use crate::support::harness::*;

/// The scripted model for agent turns; summary requests (one user message
/// asking to summarise, no tools) get a canned structured summary.
struct Summarising {
    inner: Arc<ScriptedProvider>,
    summaries: std::sync::Mutex<Vec<String>>,
}

impl Provider for Summarising {
    fn name(&self) -> &str {
        "scripted"
    }
    fn model(&self) -> &str {
        "scripted"
    }
    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChunkStream, LlmError>> {
        let is_summary = request.tools.is_empty()
            && request.messages.len() == 1
            && request.messages[0].content.contains("to summarize")
            || request.messages.len() == 1
                && request.messages[0].content.contains("Previous summary:");
        if is_summary {
            let n = {
                let mut s = self.summaries.lock().unwrap();
                s.push(request.messages[0].content.clone());
                s.len()
            };
            let text = format!(
                "## Goal\nStudy the files.\n## Progress\n### Done\nRead files (summary {n})."
            );
            let chunks = vec![
                Ok(StreamChunk::Text(text)),
                Ok(StreamChunk::Finish("stop".into())),
            ];
            return Box::pin(async move {
                Ok(Box::pin(futures_util::stream::iter(chunks)) as ChunkStream)
            });
        }
        self.inner.stream(request)
    }
}

/// Turns that each think out loud (long text L2 can collapse) and read a
/// file (a long result L1 can clear).
fn read_turns(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let mut turn = call_turn(&[(
                &format!("r{i}"),
                "read_file",
                json!({"path": format!("f{i}.txt")}),
            )]);
            turn["text"] = json!(
                format!("Reading file {i}. ")
                    + &"Considering the price history and its quirks. ".repeat(60)
            );
            turn
        })
        .collect()
}

fn compaction_layers(events: &[AgentEvent]) -> Vec<(String, u64, u64, usize)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::CompactionFinished {
                layer,
                tokens_before,
                tokens_after,
                messages_touched,
                ..
            } => Some((
                layer.clone(),
                *tokens_before,
                *tokens_after,
                *messages_touched,
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_long_run_crosses_all_three_gates_and_loses_nothing() {
    let home = Home::new();
    std::fs::create_dir_all(home.workspace()).unwrap();
    for i in 0..14 {
        let body: String = (0..60)
            .map(|l| format!("file {i} line {l}: close 30.57 volume 1234567\n"))
            .collect();
        std::fs::write(home.workspace().join(format!("f{i}.txt")), body).unwrap();
    }
    let mut turns = read_turns(14);
    turns.push(text_turn("All files read."));
    let inner = scripted(Value::Array(turns));
    let provider = Arc::new(Summarising {
        inner: inner.clone(),
        summaries: Default::default(),
    });
    let cfg = LoopConfig {
        token_threshold: 7_000,
        max_iterations: 20,
        compaction: vibedesk::agent::compaction::CompactionSettings {
            estimator: "chars4".into(),
            auto: vibedesk::agent::compaction::auto::AutoParams {
                tail_token_budget: 1_500,
                chunk_chars: 80_000,
            },
            ..Default::default()
        },
        ..test_config()
    };
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        cfg,
        "read every file",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );

    let layers = compaction_layers(&ran.events);
    let first = |name: &str| {
        layers
            .iter()
            .position(|l| l.0 == name)
            .unwrap_or_else(|| panic!("{name} never fired: {layers:?}"))
    };
    let (l1, l2, l3) = (
        first("microcompact"),
        first("collapse"),
        first("auto_compact"),
    );
    assert!(l1 < l3 && l2 < l3, "L1 and L2 fire before L3: {layers:?}");
    for (name, before, after, touched) in &layers {
        assert!(after <= before, "{name} never grows the context");
        if name != "auto_compact" {
            assert!(*touched > 0);
        }
    }
    // Every start has a finish, in order, and the watermark came first.
    let kinds = ran.kinds();
    let starts = kinds.iter().filter(|k| *k == "compaction_started").count();
    assert_eq!(starts, layers.len());
    assert!(
        kinds.iter().position(|k| k == "watermark")
            < kinds.iter().position(|k| k == "compaction_started")
    );

    // The summary request had the structured sections; later ones update it (L5).
    let summaries = provider.summaries.lock().unwrap().clone();
    assert!(!summaries.is_empty());
    for section in [
        "## Goal",
        "## Constraints & Preferences",
        "### Done",
        "### In Progress",
        "## Key Decisions",
        "## Resolved Questions",
        "## Pending User Asks",
        "## Relevant Files",
        "## Remaining Work",
        "## Critical Context",
        "## Tools & Patterns",
    ] {
        assert!(
            summaries[0].contains(section),
            "summary prompt lacks {section}"
        );
    }
    if summaries.len() > 1 {
        assert!(
            summaries[1].contains("Previous summary:\n## Goal"),
            "L5 updates the previous summary"
        );
    }

    // After L3 the model saw [system, user(handoff), tail…] and never a list
    // ending with an assistant turn.
    let reqs = inner.requests();
    let after = reqs
        .iter()
        .find(|r| r.messages.len() > 1 && r.messages[1].content.contains("handoff summary"))
        .expect("a request after L3");
    assert_eq!(after.messages[0].role, Role::System);
    assert_eq!(after.messages[1].role, Role::User);
    assert!(
        after.messages[1]
            .content
            .contains("Continue from the summary above")
    );
    for r in &reqs {
        assert_ne!(r.messages.last().unwrap().role, Role::Assistant);
        let calls: Vec<String> = r
            .messages
            .iter()
            .flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone()))
            .collect();
        let results: Vec<String> = r
            .messages
            .iter()
            .filter_map(|m| m.tool_call_id.clone())
            .collect();
        assert_eq!(
            calls.len(),
            results.len(),
            "every call has exactly one result"
        );
        for id in &results {
            assert!(calls.contains(id), "every result has its call");
        }
    }

    // Nothing is lost: every original tool result is in the archive, a full
    // transcript, or still in the list; and messages.jsonl has them all.
    let archived = read_archive(&home.session_dir());
    assert!(archived.iter().any(|a| a.layer == "microcompact"));
    assert!(archived.iter().any(|a| a.layer == "collapse"));
    let transcripts: Vec<_> = std::fs::read_dir(home.session_dir().join("transcripts"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("transcript_"))
        .collect();
    assert!(!transcripts.is_empty());
    let transcript_text: String = transcripts
        .iter()
        .map(|t| std::fs::read_to_string(t.path()).unwrap())
        .collect();
    let stored = MessageLog::read(&home.session_dir()).unwrap().messages;
    for m in stored.iter().filter(|m| m.message.role == Role::Tool) {
        let id = m.message.tool_call_id.clone().unwrap();
        let in_archive = archived.iter().any(|a| {
            a.tool_call_id.as_deref() == Some(&id) && a.message.content == m.message.content
        });
        let in_transcript =
            transcript_text.contains(&serde_json::to_string(&m.message.content).unwrap());
        let in_last_request = reqs
            .last()
            .unwrap()
            .messages
            .iter()
            .any(|x| x.content == m.message.content);
        assert!(
            in_archive || in_transcript || in_last_request,
            "result {id} is unrecoverable"
        );
    }
    // Cleared messages in requests can be resolved from the archive by call id.
    for r in &reqs {
        for m in r.messages.iter().filter(|m| m.content == CLEARED) {
            let id = m.tool_call_id.as_deref().unwrap();
            assert!(
                archived
                    .iter()
                    .any(|a| a.tool_call_id.as_deref() == Some(id)),
                "{id} cleared but not archived"
            );
        }
    }
    // L1 and L2 are in the trace too (the original records neither).
    let trace = read_trace(&home.session_dir(), None).unwrap();
    for t in ["microcompact", "collapse", "compact"] {
        assert!(
            trace.records.iter().any(|r| r["type"] == t),
            "trace lacks {t}"
        );
    }
}

#[tokio::test]
async fn the_compact_tool_runs_l3_after_the_other_tools_with_its_focus() {
    let home = Home::new();
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join("a.txt"), "alpha ".repeat(400)).unwrap();
    let inner = scripted(json!([
        call_turn(&[("r1", "read_file", json!({"path": "a.txt"}))]),
        call_turn(&[
            ("r2", "read_file", json!({"path": "a.txt", "offset": 1})),
            ("c", "compact", json!({"focus_topic": "alpha counts"})),
            ("r3", "list_dir", json!({}))
        ]),
        text_turn("Done after compaction.")
    ]));
    let provider = Arc::new(Summarising {
        inner: inner.clone(),
        summaries: Default::default(),
    });
    let mut cfg = test_config();
    cfg.compaction.auto.tail_token_budget = 50;
    let ran = run_with(
        &home,
        provider.clone(),
        registry_with(vec![]),
        cfg,
        "q",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        ran.outcome.status,
        RunStatus::Success,
        "{}",
        ran.outcome.reason
    );
    let triggers: Vec<(String, String)> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::CompactionStarted { layer, trigger, .. } => {
                Some((layer.clone(), trigger.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        triggers,
        vec![("auto_compact".to_string(), "tool".to_string())]
    );
    let summaries = provider.summaries.lock().unwrap();
    assert!(summaries[0].contains("Focus topic: alpha counts"));
    // The compaction happened after all three calls of that turn finished.
    let kinds = ran.kinds();
    let last_finished = kinds
        .iter()
        .rposition(|k| k == "tool_call_finished")
        .unwrap();
    let compaction = kinds
        .iter()
        .position(|k| k == "compaction_started")
        .unwrap();
    assert!(compaction > last_finished);
    let trace = read_trace(&home.session_dir(), None).unwrap();
    assert!(
        trace
            .records
            .iter()
            .any(|r| r["type"] == "compact_requested" && r["focus_topic"] == "alpha counts")
    );
    let last = inner.requests().last().unwrap().clone();
    assert!(last.messages[1].content.contains("handoff summary"));
}

#[tokio::test]
async fn a_manual_request_compacts_at_the_next_iteration() {
    let home = Home::new();
    let inner = scripted(json!([
        call_turn(&[("r1", "list_dir", json!({}))]),
        call_turn(&[("r2", "list_dir", json!({"recursive": true}))]),
        text_turn("ok")
    ]));
    let provider = Arc::new(Summarising {
        inner: inner.clone(),
        summaries: Default::default(),
    });
    let deps = LoopDeps::new(
        provider,
        registry_with(vec![]),
        test_config(),
        home.paths.runs_dir(),
    );
    let mut lp = Loop::new(deps);
    let req = home.request("q");
    req.compaction.request("the listing");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let outcome = lp
        .run(
            req,
            vibedesk::agent::EventSink::new(tx),
            CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome.status, RunStatus::Success);
    let mut users = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if let AgentEvent::CompactionStarted { trigger, .. } = e {
            users.push(trigger);
        }
    }
    assert_eq!(users, vec!["user"], "one manual compaction, consumed once");
}

#[tokio::test]
async fn a_compacted_history_is_accepted_by_the_provider_server() {
    use crate::support::server::{TestServer, text_reply, tool_call_reply};
    use vibedesk::llm::openai::{OpenAiConfig, OpenAiProvider};
    let home = Home::new();
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(
        home.workspace().join("big.txt"),
        "data row 1,2,3\n".repeat(400),
    )
    .unwrap();
    // Turn 1 reads, turn 2 asks for compact, the server also answers the
    // summary call, then the final answer.
    let server = TestServer::start(vec![
        tool_call_reply(&[("a", "read_file", r#"{"path":"big.txt"}"#)]),
        tool_call_reply(&[
            ("b", "read_file", r#"{"path":"big.txt","offset":2}"#),
            ("c", "compact", "{}"),
        ]),
        text_reply("## Goal\nread big.txt\n## Progress\n### Done\nread it"),
        text_reply("Finished."),
    ])
    .await;
    let provider = Arc::new(
        OpenAiProvider::new(OpenAiConfig {
            provider_name: "custom".into(),
            base_url: server.base_url(),
            model: "m".into(),
            api_key: None,
            connect_timeout: std::time::Duration::from_secs(5),
            send_reasoning_content: false,
            temperature: None,
            max_tokens: None,
            extra_headers: vec![],
            discovery: vibedesk::llm::window::WindowDiscovery::None,
        })
        .unwrap(),
    );
    let mut cfg = test_config();
    cfg.compaction.auto.tail_token_budget = 10;
    let ran = run_with(
        &home,
        provider,
        registry_with(vec![]),
        cfg,
        "q",
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
    assert_eq!(reqs.len(), 4);
    let last = &reqs[3].body["messages"];
    let msgs = last.as_array().unwrap();
    assert_eq!(msgs[0]["role"], "system");
    assert_eq!(msgs[1]["role"], "user");
    assert!(
        msgs[1]["content"]
            .as_str()
            .unwrap()
            .contains("read big.txt")
    );
    // Well-formed for strict providers: results follow their calls.
    let mut open: Vec<String> = Vec::new();
    for m in msgs {
        if let Some(calls) = m["tool_calls"].as_array() {
            open.extend(calls.iter().map(|c| c["id"].as_str().unwrap().to_string()));
        }
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap();
            assert!(
                open.iter().any(|o| o == id),
                "result {id} without a preceding call"
            );
        }
    }
    assert_ne!(msgs.last().unwrap()["role"], "assistant");
}

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/compaction");

async fn inspector(
    home: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> std::process::Output {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_vibedesk"));
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("VIBEDESK_HOME", home)
        .arg("compact")
        .args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().await.unwrap()
}

/// Byte equality, reporting where two large files first differ.
fn same_text(got: &std::path::Path, want: &str) {
    let (a, b) = (std::fs::read(got).unwrap(), std::fs::read(want).unwrap());
    if let Some(i) = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .or((a.len() != b.len()).then(|| a.len().min(b.len())))
    {
        let show = |v: &[u8]| {
            String::from_utf8_lossy(&v[i.saturating_sub(60)..(i + 60).min(v.len())]).into_owned()
        };
        panic!(
            "{} differs from {want} at byte {i}:\n got: {:?}\nwant: {:?}",
            got.display(),
            show(&a),
            show(&b)
        );
    }
}

/// The fixtures were written by tests/fixtures/compaction/reference.py, a
/// plain-Python rendering of spec §3.2/§3.3/§3.5/§3.6, with `json.dumps`.
#[tokio::test]
async fn the_inspector_reproduces_the_reference_byte_for_byte() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("out.jsonl");
    let input = format!("{FIXTURES}/input.jsonl");
    let o = inspector(
        home.path(),
        &[
            "--in",
            &input,
            "--layer",
            "micro,collapse,pairs",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    same_text(
        &out,
        &format!("{FIXTURES}/expected_micro_collapse_pairs.jsonl"),
    );
    let report = String::from_utf8_lossy(&o.stderr);
    assert!(
        report.contains("micro: 6 cleared") && report.contains("pairs: 1 removed, 1 stubbed"),
        "{report}"
    );

    let chunks = home.path().join("chunks.json");
    let o = inspector(
        home.path(),
        &[
            "--in",
            &input,
            "--layer",
            "chunks",
            "--chunk-chars",
            "4000",
            "--out",
            chunks.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    same_text(&chunks, &format!("{FIXTURES}/expected_chunks.json"));
}

#[tokio::test]
async fn the_inspector_summarises_with_the_configured_provider_and_rejects_bad_input() {
    let home = tempfile::tempdir().unwrap();
    let script = home.path().join("s.json");
    std::fs::write(
        &script,
        json!([{"text": "## Goal\nCompare AAPL and MSFT."}]).to_string(),
    )
    .unwrap();
    let out = home.path().join("auto.jsonl");
    let input = format!("{FIXTURES}/input.jsonl");
    let o = inspector(
        home.path(),
        &[
            "--in",
            &input,
            "--layer",
            "auto",
            "--out",
            out.to_str().unwrap(),
        ],
        &[
            ("VIBEDESK_PROVIDER", "scripted"),
            ("VIBEDESK_SCRIPT", script.to_str().unwrap()),
        ],
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["role"], "system");
    assert_eq!(lines[1]["role"], "user");
    let handoff = lines[1]["content"].as_str().unwrap();
    assert!(
        handoff.contains("Compare AAPL and MSFT.")
            && handoff.contains("Continue from the summary above")
    );
    assert!(
        std::fs::read_dir(home.path())
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy() == "transcripts")
    );

    let bad = home.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"role\": \"user\", \"content\": \"ok\"}\n[1, 2]\n").unwrap();
    let o = inspector(home.path(), &["--in", bad.to_str().unwrap()], &[]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("line 2: not a JSON object"));
    let o = inspector(
        home.path(),
        &["--in", &input, "--layer", "chunks,micro"],
        &[],
    )
    .await;
    assert_eq!(o.status.code(), Some(2));
}
