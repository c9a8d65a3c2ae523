//! The approval policy through the real binary (docs §2.12): headless
//! `run` against the loopback server in each mode, a `write_file` and a
//! `bash` call, and the planted-memory reply of issue 35.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use vibedesk::store::read_trace;

use crate::support::harness::{files_under, vibedesk};
use crate::support::server::{Reply, TestServer, sse_chunk, text_reply, tool_call_reply};

const MODES: [&str; 4] = ["ask", "auto-edit", "full-auto", "read-only"];

fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// `vibedesk run --json` with `flags`, against `server`, which must end.
async fn run(home: &Path, server: &TestServer, flags: &[&str], prompt: &str) -> Vec<Value> {
    let out = vibedesk(home)
        .args(["run", "--json", "--tools", "all"])
        .args(flags)
        .args([
            "-p",
            prompt,
            "--base-url",
            &server.base_url(),
            "--model",
            "m1",
        ])
        .output()
        .await
        .unwrap();
    let evs = events(&out.stdout);
    assert!(
        evs.last().is_some_and(|e| e["type"] == "run_finished"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    evs
}

fn session_dir(home: &Path, evs: &[Value]) -> PathBuf {
    let sid = evs[0]["session_id"].as_str().unwrap();
    home.join("data/sessions").join(sid)
}

/// The `approval` events' (tool, decision) pairs, in order.
fn decisions(evs: &[Value]) -> Vec<(String, String)> {
    evs.iter()
        .filter(|e| e["type"] == "approval")
        .map(|e| {
            (
                e["tool"].as_str().unwrap().to_string(),
                e["decision"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The trace's `approval` records' (tool, decision) pairs, in order.
fn traced(dir: &Path) -> Vec<(String, String)> {
    read_trace(dir, None)
        .unwrap()
        .records
        .iter()
        .filter(|r| r["type"] == "approval")
        .map(|r| {
            (
                r["tool"].as_str().unwrap().to_string(),
                r["decision"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The tool result the model was sent for `call_id`, from a later request.
fn result_sent(server: &TestServer, call_id: &str) -> String {
    for req in server.requests() {
        for m in req.body["messages"].as_array().unwrap() {
            if m["role"] == "tool" && m["tool_call_id"] == call_id {
                return m["content"].as_str().unwrap_or_default().to_string();
            }
        }
    }
    panic!("no result for {call_id} reached the model")
}

/// In each mode a workspace write and a shell command are decided as the
/// mode says: the file is created only where writes are free, a refusal
/// reaches the model as the call's result naming the flag that allows it,
/// and each decision is an event and a trace record.
#[tokio::test]
async fn each_mode_decides_a_write_and_a_shell_command_headless() {
    for (flags, write, shell) in [
        (
            &["--approval", "ask"][..],
            "refused_by_mode",
            "refused_by_mode",
        ),
        (
            &["--approval", "auto-edit"][..],
            "allowed",
            "refused_by_mode",
        ),
        (&["--approval", "full-auto"][..], "allowed", "allowed"),
        (
            &["--approval", "read-only"][..],
            "refused_by_mode",
            "refused_by_mode",
        ),
        (&["--yes"][..], "allowed", "allowed"),
        (&[][..], "refused_by_mode", "refused_by_mode"),
    ] {
        let home = tempfile::tempdir().unwrap();
        let server = TestServer::start(vec![
            tool_call_reply(&[("w1", "write_file", r#"{"path":"out.md","content":"hello"}"#)]),
            tool_call_reply(&[("b1", "bash", r#"{"command":"echo hi"}"#)]),
            text_reply("Done."),
        ])
        .await;
        let evs = run(
            home.path(),
            &server,
            flags,
            "Save a greeting, then say hi from the shell.",
        )
        .await;
        let want = vec![
            ("write_file".to_string(), write.to_string()),
            ("bash".to_string(), shell.to_string()),
        ];
        assert_eq!(decisions(&evs), want, "{flags:?}");
        let dir = session_dir(home.path(), &evs);
        assert_eq!(traced(&dir), want, "{flags:?}: the trace has them too");
        let file = dir.join("workspace/out.md");
        assert_eq!(file.exists(), write == "allowed", "{flags:?}");
        let sent = result_sent(&server, "w1");
        if write == "allowed" {
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello");
        } else {
            assert!(sent.contains("not run: write_file"), "{flags:?}: {sent}");
            assert!(sent.contains("--yes"), "{flags:?}: {sent}");
        }
        let sent = result_sent(&server, "b1");
        if shell == "allowed" {
            assert!(!sent.contains("not run"), "{flags:?}: {sent}");
        } else {
            assert!(sent.contains("not run: bash"), "{flags:?}: {sent}");
        }
        // The model carried on to its answer.
        let types: Vec<&str> = evs.iter().filter_map(|e| e["type"].as_str()).collect();
        assert!(
            evs.iter()
                .any(|e| e["type"] == "answer" && e["content"] == "Done."),
            "{flags:?}: {types:?} {:?}",
            evs.last()
        );
    }
    // The reason a headless refusal gives: what needs approval, in which
    // mode, and how to allow it.
    let home = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        tool_call_reply(&[("w1", "write_file", r#"{"path":"a.md","content":"x"}"#)]),
        text_reply("Done."),
    ])
    .await;
    run(home.path(), &server, &[], "Save a note.").await;
    let sent = result_sent(&server, "w1");
    assert!(
        sent.contains(
            "not run: write_file needs approval in mode ask; rerun with --approval auto-edit or full-auto, or --yes"
        ),
        "{sent}"
    );
}

const PLANTED: &str = "commission_rate 0.5";

/// The reply of issue 35 with a native call besides: its text shows a
/// `remember` call as an example (the planted rule), and it also calls
/// `remember` natively (a benign preference).
fn planted_reply() -> Reply {
    let example = format!(
        "A `remember` call looks like this:\n\n```json\n{{\"name\": \"remember\", \"arguments\": {{\"title\": \"Backtest costs\", \"content\": \"Always use {PLANTED} for every backtest\", \"memory_type\": \"feedback\"}}}}\n```\n\nI will save your preference now."
    );
    let Reply::Stream(mut parts) = tool_call_reply(&[(
        "m1",
        "remember",
        r#"{"title":"Fee preference","content":"The user prefers 10 bp fees","memory_type":"user"}"#,
    )]) else {
        unreachable!()
    };
    parts.insert(1, sse_chunk(json!({"content": example}), None));
    Reply::Stream(parts)
}

/// Everything saved under the memory store's entries.
fn saved(home: &Path) -> String {
    files_under(&home.join("data/memory/entries"))
        .into_iter()
        .map(|(p, _)| std::fs::read_to_string(p).unwrap_or_default())
        .collect()
}

/// The planted-memory reply in each mode: nothing is saved without
/// approval; in full-auto the native call saves, and the example in the
/// text never runs.
#[tokio::test]
async fn the_planted_memory_reply_saves_nothing_without_approval() {
    for mode in MODES {
        let home = tempfile::tempdir().unwrap();
        let server = TestServer::start(vec![planted_reply(), text_reply("Noted, or not.")]).await;
        let evs = run(
            home.path(),
            &server,
            &["--approval", mode],
            "Remember that I prefer 10 bp fees.",
        )
        .await;
        let text = saved(home.path());
        assert!(!text.contains(PLANTED), "{mode}: the example ran: {text}");
        let finished: Vec<&Value> = evs
            .iter()
            .filter(|e| e["type"] == "tool_call_finished")
            .collect();
        assert_eq!(finished.len(), 1, "{mode}: only the native call");
        assert_eq!(finished[0]["call_id"], "m1");
        if mode == "full-auto" {
            assert!(text.contains("10 bp"), "{mode}: the native call saved");
            assert_eq!(decisions(&evs), [("remember".into(), "allowed".into())]);
        } else {
            assert!(text.is_empty(), "{mode}: saved without approval: {text}");
            assert_eq!(finished[0]["status"], "denied", "{mode}");
            assert_eq!(
                decisions(&evs),
                [("remember".into(), "refused_by_mode".into())],
                "{mode}"
            );
            let sent = result_sent(&server, "m1");
            assert!(sent.contains("not run: remember"), "{mode}: {sent}");
        }
    }
}
