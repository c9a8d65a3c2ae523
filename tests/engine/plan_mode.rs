//! Plan mode (issue 37 item 3, docs §4.8): `vibedesk run --plan` offers the
//! model only read-only tools and prints its numbered plan; `--plan-file`
//! carries an approved plan out with every tool and the plan pinned in the
//! system prompt. Checked on the requests the loopback model server
//! receives, with the real binary and a temp `VIBEDESK_HOME`.

use std::path::Path;

use serde_json::Value;

use crate::support::harness::vibedesk;
use crate::support::server::{RecordedRequest, TestServer, text_reply};

const PLAN: &str = "1. Read prices.csv with read_file.\n2. Backtest a 20/50 SMA cross.\n3. Write report.md with the result.";

async fn run(home: &Path, server: &TestServer, args: &[&str]) -> std::process::Output {
    let out = vibedesk(home)
        .arg("run")
        .args(args)
        .arg("--base-url")
        .arg(server.base_url())
        .args(["--model", "m1"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn tool_names(req: &RecordedRequest) -> Vec<String> {
    req.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn system_text(req: &RecordedRequest) -> String {
    req.body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

const WRITERS: [&str; 4] = ["write_file", "edit_file", "bash", "remember"];

#[tokio::test]
async fn a_plan_is_drafted_with_read_tools_only_and_run_with_all_of_them_pinned() {
    let home = tempfile::tempdir().unwrap();
    let server =
        TestServer::start(vec![text_reply(PLAN), text_reply("Done: all three steps.")]).await;

    // Planning: read-only tools only, the plan printed, success.
    let out = run(
        home.path(),
        &server,
        &["--plan", "-p", "Plan a SMA study of prices.csv"],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(PLAN), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--plan-file FILE"), "{stderr}");
    let planning = &server.requests()[0];
    let offered = tool_names(planning);
    assert!(offered.iter().any(|t| t == "read_file"), "{offered:?}");
    for writer in WRITERS {
        assert!(
            !offered.iter().any(|t| t == writer),
            "{writer} offered: {offered:?}"
        );
    }
    assert!(system_text(planning).contains("## Plan mode\n"));
    // Nothing a planning turn may not do was offered under another name.
    assert!(
        !offered.iter().any(|t| t.starts_with("mcp__")),
        "{offered:?}"
    );

    // Approval: the plan file, the same session; every tool, the plan pinned.
    let sessions = home.path().join("data/sessions");
    let sid = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .to_string_lossy()
        .into_owned();
    let plan_file = home.path().join("plan.md");
    std::fs::write(&plan_file, PLAN).unwrap();
    let plan_arg = plan_file.to_str().unwrap();
    run(
        home.path(),
        &server,
        &["--session", &sid, "--plan-file", plan_arg, "-p", "Go ahead"],
    )
    .await;
    let executing = &server.requests()[1];
    let offered = tool_names(executing);
    for writer in WRITERS {
        assert!(
            offered.iter().any(|t| t == writer),
            "{writer} missing: {offered:?}"
        );
    }
    let system = system_text(executing);
    assert!(
        system.contains("## Approved plan (pinned)\n") && system.contains(PLAN),
        "{system}"
    );
    assert!(!system.contains("## Plan mode"), "{system}");
    // The planning turn's answer is in the replayed history too.
    let messages: Vec<&Value> = executing.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "assistant" && m["content"] == PLAN)
    );
}

#[tokio::test]
async fn a_plan_file_that_is_missing_or_empty_is_refused_before_the_model_is_asked() {
    let home = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![text_reply("never")]).await;
    let empty = home.path().join("empty.md");
    std::fs::write(&empty, "  \n").unwrap();
    for file in [empty.clone(), home.path().join("missing.md")] {
        let out = vibedesk(home.path())
            .args(["run", "-p", "go", "--plan-file"])
            .arg(&file)
            .arg("--base-url")
            .arg(server.base_url())
            .args(["--model", "m1"])
            .output()
            .await
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("plan"));
    }
    let both = vibedesk(home.path())
        .args(["run", "-p", "go", "--plan", "--plan-file"])
        .arg(&empty)
        .output()
        .await
        .unwrap();
    assert_eq!(both.status.code(), Some(2));
    assert_eq!(server.request_count(), 0);
}
