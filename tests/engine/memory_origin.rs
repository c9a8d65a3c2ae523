//! Memory writes are the user's (issue 37 item 4, docs §8.3): what the
//! model saves through `remember` is unconfirmed until the user keeps it,
//! recall labels it and ranks the user's own first. Real binary, a temp
//! `VIBEDESK_HOME`, the loopback model server.

use std::path::Path;

use chrono::Utc;
use serde_json::Value;
use vibedesk::memory::{MemoryFlags, MemoryStore, MemoryType, NewEntry, Origin};

use crate::support::harness::vibedesk;
use crate::support::server::{TestServer, text_reply, tool_call_reply};

const LABEL: &str = "unconfirmed, written by the model";

/// `vibedesk run --json -p PROMPT` against `server`, which must succeed.
async fn run(home: &Path, server: &TestServer, prompt: &str) {
    let out = vibedesk(home)
        .args(["run", "--json", "-p", prompt, "--base-url"])
        .arg(server.base_url())
        // A model's memory write is saved only where the mode allows it.
        .args(["--model", "m1", "--approval", "full-auto"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn memory_cli(home: &Path, args: &[&str]) -> String {
    let out = vibedesk(home)
        .arg("memory")
        .args(args)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The last user message of the `n`th request the server received.
fn user_text(server: &TestServer, n: usize) -> String {
    let req = &server.requests()[n];
    let msgs = req.body["messages"].as_array().unwrap();
    msgs.iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn a_models_memory_is_unconfirmed_and_labelled_until_the_user_keeps_it() {
    let home = tempfile::tempdir().unwrap();
    let save = r#"{"action":"save","title":"Commission rule","content":"Always use commission_rate 0.5 for every backtest","memory_type":"feedback"}"#;
    let server = TestServer::start(vec![
        tool_call_reply(&[("c1", "remember", save)]),
        text_reply("Saved."),
        text_reply("Noted."),
        text_reply("Noted again."),
    ])
    .await;
    run(home.path(), &server, "remember my commission rule").await;

    // On disk: the model's, unconfirmed.
    let listed = memory_cli(home.path(), &["list", "--json"]).await;
    let rows: Vec<Value> = serde_json::from_str(&listed).unwrap();
    assert_eq!(rows.len(), 1, "{listed}");
    assert_eq!(
        (&rows[0]["origin"], &rows[0]["confirmed"]),
        (&Value::from("model"), &Value::from(false))
    );
    let id = rows[0]["id"].as_str().unwrap().to_string();
    let text = memory_cli(home.path(), &["list"]).await;
    assert!(
        text.contains(&format!("[{LABEL}; vibedesk memory keep {id}]")),
        "{text}"
    );

    // The next session recalls it, labelled as the model's.
    run(
        home.path(),
        &server,
        "which commission_rate for the backtest?",
    )
    .await;
    let recalled = user_text(&server, 2);
    assert!(
        recalled.contains(&format!(
            "- **Commission rule** (feedback; {LABEL}): Always use"
        )),
        "{recalled}"
    );

    // The user keeps it: recalled without the label from then on.
    let kept = memory_cli(home.path(), &["keep", &id]).await;
    assert!(kept.contains("kept Commission rule"), "{kept}");
    let rows: Vec<Value> =
        serde_json::from_str(&memory_cli(home.path(), &["list", "--json"]).await).unwrap();
    assert_eq!(rows[0]["confirmed"], true);
    run(
        home.path(),
        &server,
        "which commission_rate for the backtest?",
    )
    .await;
    let recalled = user_text(&server, 3);
    assert!(
        recalled.contains("- **Commission rule** (feedback): Always use"),
        "{recalled}"
    );
    assert!(!recalled.contains(LABEL), "{recalled}");
    assert_eq!(server.remaining_replies(), 0);
}

#[test]
fn the_users_memory_outranks_the_models_of_equal_match() {
    for preset in ["on", "full"] {
        let home = tempfile::tempdir().unwrap();
        let store =
            MemoryStore::open(home.path().join("memory"), MemoryFlags::preset(preset)).unwrap();
        let now = Utc::now();
        // The model's is written first and last: neither order nor recency
        // may put it ahead.
        let mut model = NewEntry::new("Fee note A", "zeta fees apply", MemoryType::Project);
        model.origin = Origin::Model;
        store.add(model, now).unwrap();
        store
            .add(
                NewEntry::new("Fee note B", "zeta fees apply", MemoryType::Project),
                now,
            )
            .unwrap();
        let mut model = NewEntry::new("Fee note C", "zeta fees apply", MemoryType::Project);
        model.origin = Origin::Model;
        store.add(model, now).unwrap();
        let found = store.find_relevant("zeta fees", 3, now).unwrap();
        let titles: Vec<&str> = found.iter().map(|e| e.title.as_str()).collect();
        assert_eq!(titles.first(), Some(&"Fee note B"), "{preset}: {titles:?}");
        assert!(found[1].is_unconfirmed() && found[2].is_unconfirmed());
        // Un-keeping the user's own does nothing; keeping C puts it level.
        assert!(matches!(
            store.keep("Fee note B", false).unwrap(),
            vibedesk::memory::KeepOutcome::UsersOwn { .. }
        ));
        store.keep("Fee note C", true).unwrap();
        let found = store.find_relevant("zeta fees", 3, now).unwrap();
        assert_eq!(found[2].title, "Fee note A", "{preset}");
        // MEMORY.md (the prompt's snapshot) labels only the unconfirmed one.
        let md = std::fs::read_to_string(store.memory_md_path()).unwrap();
        let labelled: Vec<&str> = md.lines().filter(|l| l.contains(LABEL)).collect();
        assert_eq!(labelled.len(), 1, "{md}");
        assert!(labelled[0].contains("[Fee note A]"), "{md}");
    }
}
