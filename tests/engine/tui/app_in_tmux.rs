//! The real `vibedesk` binary in a pseudo-terminal (tmux): type a prompt on
//! the demo, watch the answer stream, the tool panel and the gauge change,
//! open the transcript browser, quit, and find the terminal restored.
//! Polls the screen until an expected text shows (with a deadline); nothing
//! waits a fixed time.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::outside::Outside;

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");
/// Generous: a cold debug binary on a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(30);

struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("run tmux")
    }

    fn start(home: &Path, width: u16, height: u16) -> Tmux {
        let t = Tmux {
            socket: format!("vibedesk-test-{}-{}", std::process::id(), rand_suffix()),
        };
        let out = t.cmd(&[
            "new-session",
            "-d",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            "-e",
            &format!("VIBEDESK_HOME={}", home.display()),
            "-e",
            &format!("HOME={}", home.display()),
            "sh",
        ]);
        assert!(
            out.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        t
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        assert!(self.cmd(&args).status.success());
    }

    fn type_literal(&self, text: &str) {
        assert!(
            self.cmd(&["send-keys", "-t", "0", "-l", text])
                .status
                .success()
        );
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "0"]).stdout).into_owned()
    }

    fn query(&self, format: &str) -> String {
        String::from_utf8_lossy(
            &self
                .cmd(&["display-message", "-p", "-t", "0", format])
                .stdout,
        )
        .trim()
        .to_string()
    }

    /// Polls the screen until `pred` holds; panics with the screen if not.
    async fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{s}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

fn rand_suffix() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
}

/// One real terminal at a time: two binaries drawing at once on a loaded
/// machine slow each other until keys sent one after another reach the app
/// in one read, and crossterm reads two Escapes in one read as one.
static ONE_TERMINAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The one real terminal, or `None` (said on stderr) where tmux is
/// missing; where CI requires tmux its absence fails the test instead.
async fn terminal() -> Option<tokio::sync::MutexGuard<'static, ()>> {
    if !Outside::Tmux.available() {
        return None;
    }
    Some(ONE_TERMINAL.lock().await)
}

/// The token count the gauge shows (`1.2k / 8k tokens`: the demo's
/// threshold), if any.
fn gauge_tokens(screen: &str) -> Option<String> {
    screen
        .lines()
        .find_map(|l| {
            l.split(" / 8k tokens")
                .next()
                .filter(|_| l.contains(" / 8k tokens"))
        })
        .and_then(|head| head.split_whitespace().last().map(String::from))
}

#[tokio::test]
async fn the_demo_workstation_end_to_end_in_a_real_terminal() {
    let Some(_one) = terminal().await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let t = Tmux::start(home.path(), 120, 36);
    t.wait("the shell prompt", |s| !s.trim().is_empty()).await;
    assert_eq!(t.query("#{alternate_on}"), "0");
    t.type_literal(&format!(
        "{BIN} --demo; echo EXIT=$?; echo STTY: $(stty -a | tr ' ;' '\\n\\n' | grep -xE -- '-?(icanon|echo)')"
    ));
    t.keys(&["Enter"]);

    let before = t
        .wait("the workstation", |s| {
            s.contains("Demo mode") && s.contains("no tool calls yet")
        })
        .await;
    assert_eq!(
        t.query("#{alternate_on}"),
        "1",
        "full screen in the alternate screen"
    );
    assert!(
        before.contains("— / 8k tokens"),
        "no estimate before the first turn:\n{before}"
    );

    t.type_literal("make me a research checklist");
    t.keys(&["Enter"]);
    // The answer streams: its heading shows before the run has ended.
    let mid = t
        .wait("the answer streaming", |s| {
            s.contains("Done") || s.contains("✓ success")
        })
        .await;
    assert!(
        !mid.contains("✓ success") && mid.contains("● running"),
        "the answer's first lines show while the run is still going:\n{mid}"
    );
    let done = t
        // The status line turns idle a frame after the run's end cell: wait
        // for both, or a loaded machine catches the frame between them.
        .wait("the run to finish", |s| {
            // Its command stopped at the timeout is a failed call: the demo
            // ends partial, as any run would (docs §1.4).
            s.contains("◐ partial · 6 iterations") && s.contains("○ idle")
        })
        .await;
    assert!(
        done.contains("it plays this one session"),
        "the answer arrived:\n{done}"
    );
    assert!(done.contains("○ idle"), "{done}");
    // The tool panel changed: the parallel batch, the serial writes.
    assert!(done.contains("#0 parallel · get_market_data"), "{done}");
    assert!(done.contains("#1 serial · write_file · 1 ok"), "{done}");
    // The gauge changed from no estimate to the engine's numbers, and the
    // session's compactions reached L3.
    let tokens = gauge_tokens(&done).expect("the gauge shows tokens");
    assert_ne!(tokens, "—", "{done}");
    assert!(done.contains("L1 4k · L2 5.6k · L3 8k"), "{done}");
    assert!(done.contains("last L3"), "{done}");

    // The transcript browser lists the new session.
    t.keys(&["C-t"]);
    let list = t
        .wait("the session list", |s| {
            s.contains("session(s) on disk") && s.contains("make me a research checklist")
        })
        .await;
    assert!(list.contains("partial"), "{list}");
    t.keys(&["Enter"]);
    t.wait("the session's messages", |s| {
        s.contains("Messages (") && s.contains("First the data, all at once")
    })
    .await;
    t.keys(&["Tab"]);
    t.wait("the trace tab", |s| s.contains("tool_call")).await;
    t.keys(&["Escape"]);
    // Two Escapes in one read reach the app as one (crossterm): the second
    // goes only once the first has taken the browser back to its list.
    t.wait("the session list again", |s| {
        s.contains("session(s) on disk") && !s.contains("tool_call")
    })
    .await;
    t.keys(&["Escape"]);
    t.wait("the chat again", |s| s.contains("◐ partial · 6 iterations"))
        .await;

    // Ctrl-C twice on an idle prompt quits; the terminal comes back.
    t.keys(&["C-c"]);
    t.wait("the quit hint", |s| {
        s.contains("press Ctrl-C again to quit")
    })
    .await;
    t.keys(&["C-c"]);
    // (The typed command line also contains these words; outputs start a line.)
    let printed = |s: &str, head: &str| s.lines().find(|l| l.starts_with(head)).map(String::from);
    let after = t
        .wait("the exit status", |s| printed(s, "EXIT=").is_some())
        .await;
    assert_eq!(
        printed(&after, "EXIT=").as_deref(),
        Some("EXIT=0"),
        "{after}"
    );
    let stty = t
        .wait("stty output", |s| printed(s, "STTY:").is_some())
        .await;
    assert_eq!(
        printed(&stty, "STTY:").as_deref(),
        Some("STTY: icanon echo"),
        "canonical mode and echo are back:\n{stty}"
    );
    assert_eq!(
        t.query("#{alternate_on}"),
        "0",
        "the alternate screen was left"
    );
    assert_eq!(
        t.query("#{mouse_any_flag}"),
        "0",
        "mouse capture was switched off"
    );
    // Nothing was printed over the shell: the log went to its file.
    let log = home.path().join("state/logs/vibedesk.log");
    assert!(log.exists(), "logs go to a file in the state dir");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&log).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

/// `--session ID` reaches the app as a message (the run phase is moved
/// only by `update`): the chat opens on the stored session. Then the
/// browser's search line takes typing through its own keymap context.
#[tokio::test]
async fn the_workstation_resumes_a_session_and_searches_in_a_real_terminal() {
    let Some(_one) = terminal().await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    // A stored session, made by the real binary.
    let out = Command::new(BIN)
        .args([
            "run",
            "--demo",
            "--json",
            "-p",
            "make me a research checklist",
        ])
        .env("VIBEDESK_HOME", home.path())
        .env("HOME", home.path())
        .output()
        .unwrap();
    // The demo's timed-out command makes the run partial: exit 3.
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first: serde_json::Value = serde_json::from_slice(
        out.stdout
            .split(|b| *b == b'\n')
            .next()
            .expect("an event line"),
    )
    .unwrap();
    let sid = first["session_id"]
        .as_str()
        .expect("a session id")
        .to_string();

    let t = Tmux::start(home.path(), 120, 36);
    t.wait("the shell prompt", |s| !s.trim().is_empty()).await;
    t.type_literal(&format!("{BIN} --demo --session {sid}; echo EXIT=$?"));
    t.keys(&["Enter"]);
    let resumed = t
        .wait("the resumed session", |s| {
            s.contains(&format!("resumed session {sid}"))
        })
        .await;
    assert!(
        resumed.contains("it plays this one session") && resumed.contains(&format!(" {sid} ")),
        "the stored answer is in the chat, the session in the status bar:\n{resumed}"
    );
    assert!(resumed.contains("○ idle"), "{resumed}");

    t.keys(&["C-t"]);
    t.wait("the session list", |s| s.contains("session(s) on disk"))
        .await;
    t.keys(&["/"]);
    // `q` is Back in the list; in the search line it is typed.
    t.type_literal("research q");
    t.wait("the query on the bottom line", |s| {
        s.lines().any(|l| l.starts_with("/research q"))
    })
    .await;
    t.keys(&["Escape"]);
    t.wait("the search line closed", |s| {
        !s.contains("/research q") && s.contains("session(s) on disk")
    })
    .await;
    t.keys(&["C-q"]);
    let after = t
        .wait("the exit status", |s| {
            s.lines().any(|l| l.starts_with("EXIT="))
        })
        .await;
    assert!(after.lines().any(|l| l == "EXIT=0"), "{after}");
}

/// `/swarm` through the real event loop and the real engine: with no model
/// configured the team runs on the offline planner, the view shows it
/// finish and the report is on disk; Ctrl-G toggles the view.
#[tokio::test]
async fn swarm_runs_a_real_team_offline_in_a_real_terminal() {
    let Some(_one) = terminal().await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let t = Tmux::start(home.path(), 100, 30);
    t.wait("the shell prompt", |s| !s.trim().is_empty()).await;
    t.type_literal(&format!("{BIN}; echo EXIT=$?"));
    t.keys(&["Enter"]);
    t.wait("the workstation", |s| s.contains("Message")).await;
    t.type_literal("/swarm investment_committee target=AAPL");
    t.keys(&["Enter"]);
    // The offline planner answers every member from the real tools: the
    // team finishes on its own, each task in the view.
    let view = t
        .wait("the team view with the run finished", |s| {
            s.contains("(investment_committee)") && s.contains("◆ team success")
        })
        .await;
    for task in ["task-bull", "task-bear", "task-risk", "task-decision"] {
        assert!(view.contains(task), "{task} in the view:\n{view}");
    }
    let runs: Vec<_> = std::fs::read_dir(home.path().join("data/swarm"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "one team run on disk: {runs:?}");
    let report = std::fs::read_to_string(runs[0].join("report.md")).unwrap();
    assert!(
        report.contains("bull_report") && report.contains("bear_report"),
        "{report}"
    );
    t.keys(&["Escape"]);
    t.wait("the chat screen", |s| s.contains("Message")).await;
    t.keys(&["C-g"]);
    t.wait("the team view again", |s| {
        s.contains("(investment_committee)")
    })
    .await;
    t.keys(&["C-q"]);
    let after = t
        .wait("the exit status", |s| {
            s.lines().any(|l| l.starts_with("EXIT="))
        })
        .await;
    assert!(after.lines().any(|l| l == "EXIT=0"), "{after}");
}

/// MCP servers start in the background: with a server that never answers
/// (and a 20 s start-up timeout), the workstation's first frame comes at
/// once and says the server is starting; quitting does not wait for it
/// either. Before, the screen stayed blank for the whole timeout.
#[tokio::test]
async fn the_workstation_opens_without_waiting_for_a_silent_mcp_server() {
    let Some(_one) = terminal().await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        "[mcp_servers.mute]\ncommand = \"sleep\"\nargs = [\"600\"]\nstartup_timeout_s = 20\n",
    )
    .unwrap();
    let t = Tmux::start(home.path(), 120, 36);
    t.wait("the shell prompt", |s| !s.trim().is_empty()).await;
    t.type_literal(&format!("{BIN}; echo EXIT=$?"));
    let started = std::time::Instant::now();
    t.keys(&["Enter"]);
    let first = t
        .wait("the workstation", |s| {
            s.contains("Message") && s.contains("MCP server mute starting")
        })
        .await;
    let opened = started.elapsed();
    assert!(
        opened < Duration::from_secs(12),
        "the first frame took {opened:?}: it waited for the server\n{first}"
    );
    t.keys(&["C-q"]);
    let after = t
        .wait("the exit status", |s| {
            s.lines().any(|l| l.starts_with("EXIT="))
        })
        .await;
    assert!(after.lines().any(|l| l == "EXIT=0"), "{after}");
    assert!(
        started.elapsed() < Duration::from_secs(18),
        "quitting waited for the server: {:?}",
        started.elapsed()
    );
}

/// `/swarm` refused by the engine, through the real launcher: the reason
/// uses the app's syntax (`/swarm NAME k=v`, never the command line's
/// `--var`), and the keyboard stays in the input, so the next message
/// arrives whole (before, the team view took its `h` as Back).
#[tokio::test]
async fn a_refused_swarm_speaks_the_apps_syntax_and_keeps_the_keyboard() {
    let Some(_one) = terminal().await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let t = Tmux::start(home.path(), 150, 30);
    t.wait("the shell prompt", |s| !s.trim().is_empty()).await;
    t.type_literal(&format!("{BIN}; echo EXIT=$?"));
    t.keys(&["Enter"]);
    t.wait("the workstation", |s| s.contains("Message")).await;
    t.type_literal("/swarm investment_committee");
    t.keys(&["Enter"]);
    let refused = t
        // The reason may wrap before `target=VALUE`.
        .wait("the refusal", |s| {
            s.contains("type /swarm investment_committee") && s.contains("target=VALUE")
        })
        .await;
    assert!(!refused.contains("--var"), "{refused}");
    t.type_literal("/swarm no_such_team");
    t.keys(&["Enter"]);
    let unknown = t
        .wait("the unknown team", |s| {
            s.contains("no team named 'no_such_team'")
        })
        .await;
    assert!(
        unknown.contains("investment_committee") && !unknown.contains("vibedesk swarm list"),
        "{unknown}"
    );
    t.type_literal("hello desk");
    t.wait("the whole message in the input", |s| {
        s.contains("hello desk")
    })
    .await;
    t.keys(&["C-q"]);
    let after = t
        .wait("the exit status", |s| {
            s.lines().any(|l| l.starts_with("EXIT="))
        })
        .await;
    assert!(after.lines().any(|l| l == "EXIT=0"), "{after}");
}

/// The file a session's workspace holds under `name`, wherever the
/// session is.
fn workspace_file(home: &Path, name: &str) -> Option<std::path::PathBuf> {
    let sessions = home.join("data/sessions");
    std::fs::read_dir(sessions)
        .ok()?
        .flatten()
        .map(|e| e.path().join("workspace").join(name))
        .find(|p| p.exists())
}

/// Approval in the workstation (docs §2.14.4): a `write_file` call shows
/// the diff overlay; `n` leaves the file untouched and the model's next
/// request carries the denial; `a` lets a second write to the same file
/// through without asking.
#[tokio::test]
async fn a_write_asks_with_its_diff_and_the_answer_holds_for_the_session() {
    use crate::support::server::{TestServer, text_reply, tool_call_reply};
    let Some(_one) = terminal().await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let write = |id: &'static str, text: &str| {
        let args = serde_json::json!({"path": "notes.md", "content": text}).to_string();
        tool_call_reply(&[(id, "write_file", &args)])
    };
    let server = TestServer::start(vec![
        write("w1", "alpha line\n"),
        text_reply("Left it unwritten."),
        write("w2", "beta line\n"),
        write("w3", "gamma line\n"),
        text_reply("Notes kept."),
    ])
    .await;
    let t = Tmux::start(home.path(), 120, 36);
    t.wait("the shell prompt", |s| !s.trim().is_empty()).await;
    t.type_literal(&format!(
        "{BIN} --base-url {} --model m1 --tools all",
        server.base_url()
    ));
    t.keys(&["Enter"]);
    t.wait("the workstation", |s| s.contains("no tool calls yet"))
        .await;
    t.type_literal("Keep my notes.");
    t.keys(&["Enter"]);
    let asked = t
        .wait("the approval overlay", |s| {
            s.contains("Approve write_file notes.md")
        })
        .await;
    assert!(asked.contains("+alpha line"), "the diff:\n{asked}");
    assert!(asked.contains("--- /dev/null"), "a new file:\n{asked}");
    t.type_literal("n");
    t.wait("the reason line", |s| s.contains("reason (optional)"))
        .await;
    t.type_literal("not yet");
    t.keys(&["Enter"]);
    t.wait("the first answer", |s| s.contains("Left it unwritten."))
        .await;
    assert!(
        workspace_file(home.path(), "notes.md").is_none(),
        "untouched"
    );
    let reqs = server.requests();
    let denial = reqs[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .unwrap();
    assert!(denial.contains("declined"), "{denial}");
    assert!(
        denial.contains("not yet"),
        "the reason reaches the model: {denial}"
    );

    t.type_literal("Write them now.");
    t.keys(&["Enter"]);
    t.wait("the second question", |s| {
        s.contains("Approve write_file notes.md") && s.contains("+beta line")
    })
    .await;
    t.type_literal("a");
    t.wait("the second answer", |s| s.contains("Notes kept."))
        .await;
    let file = workspace_file(home.path(), "notes.md").expect("written");
    assert_eq!(
        std::fs::read_to_string(file).unwrap(),
        "gamma line\n",
        "the third call ran without asking"
    );
    assert_eq!(server.request_count(), 5);
    t.keys(&["C-c"]);
    t.keys(&["C-c"]);
}

/// `/factors` in the real binary opens the newest screen record under the
/// data dir (docs §17.12), and q closes it.
#[tokio::test]
async fn factors_opens_the_newest_screen_in_a_real_terminal() {
    let Some(_one) = terminal().await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let (_, record) = super::factors::write_record(&home.path().join("data"));
    let best = record.screen.factors[record.screen.ranking[0]].name.clone();
    let t = Tmux::start(home.path(), 140, 40);
    t.wait("the shell prompt", |s| !s.trim().is_empty()).await;
    t.type_literal(&format!("{BIN}; echo EXIT=$?"));
    t.keys(&["Enter"]);
    t.wait("the workstation", |s| s.contains("Message")).await;
    t.type_literal("/factors");
    t.keys(&["Enter"]);
    let s = t
        .wait("the factor view", |s| {
            s.contains("Factor screen · alpha101") && s.contains("Quantile equity")
        })
        .await;
    assert!(s.contains(&best) && s.contains("IC decay"), "{s}");
    t.keys(&["q"]);
    t.wait("the chat again", |s| !s.contains("Quantile equity"))
        .await;
    t.keys(&["C-q"]);
    let after = t
        .wait("the exit status", |s| {
            s.lines().any(|l| l.starts_with("EXIT="))
        })
        .await;
    assert!(after.lines().any(|l| l == "EXIT=0"), "{after}");
}
