//! The workspace as a user picks it (issue 37 item 1, docs §2.3.1): `run`
//! started in a research folder with `--workspace .` or `-C DIR`, or with
//! `[agent] workspace = "cwd"`, lists, reads and writes the user's files
//! there and nowhere else; escapes are refused; `doctor` names the folder;
//! `$HOME` needs `--yes` headless. Real binary, temp homes, the loopback
//! provider speaking the OpenAI stream.

use std::path::{Path, PathBuf};

use crate::support::harness::vibedesk;
use crate::support::server::{RecordedRequest, TestServer, text_reply, tool_call_reply};

/// A research folder with the user's files, an outside folder holding a
/// secret, and a link in the research folder pointing out.
struct Folders {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    research: PathBuf,
    outside: PathBuf,
}

fn folders() -> Folders {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let (home, research, outside) = (
        root.join("home"),
        root.join("research"),
        root.join("outside"),
    );
    for d in [&home, &research.join("data"), &outside] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(
        research.join("notes.md"),
        "Momentum notes: alpha decays fast.\n",
    )
    .unwrap();
    std::fs::write(
        research.join("data/MYCO.csv"),
        "Date,Open,High,Low,Close,Volume\n2024-01-02,10,11,9,10.5,100\n2024-01-03,10.5,12,10,11,200\n",
    )
    .unwrap();
    std::fs::write(outside.join("secret.txt"), "outside-secret-value\n").unwrap();
    std::os::unix::fs::symlink(&outside, research.join("escape")).unwrap();
    Folders {
        _tmp: tmp,
        home,
        research,
        outside,
    }
}

/// `run`'s command line against the loopback server, with the workspace
/// flags given. Every write test builds its arguments here, so a flag all
/// writes need (an approval mode) is added in one place.
fn run_args(server: &TestServer, workspace: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "--json",
        "-p",
        "Summarise the files in my workspace",
        "--base-url",
        &server.base_url(),
        "--model",
        "m1",
        // The model's writes and bash run unasked: this is about where.
        "--approval",
        "full-auto",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(workspace.iter().map(|s| s.to_string()));
    args
}

/// The model's script: list and read the user's files, write a report,
/// then try to leave the folder four ways.
async fn scripted_server(outside: &Path) -> TestServer {
    let absolute = format!(r#"{{"path":"{}"}}"#, outside.join("secret.txt").display());
    TestServer::start(vec![
        tool_call_reply(&[
            ("c1", "list_dir", "{}"),
            ("c2", "read_file", r#"{"path":"notes.md"}"#),
        ]),
        tool_call_reply(&[(
            "c3",
            "write_file",
            r#"{"path":"summary.md","content":"alpha decays fast"}"#,
        )]),
        tool_call_reply(&[
            ("c4", "write_file", r#"{"path":"../x.md","content":"up"}"#),
            (
                "c5",
                "write_file",
                r#"{"path":"escape/planted.md","content":"out"}"#,
            ),
            ("c6", "read_file", r#"{"path":"escape/secret.txt"}"#),
            ("c7", "read_file", &absolute),
        ]),
        text_reply("Your folder holds notes.md and data/; I wrote summary.md."),
    ])
    .await
}

/// Runs the scripted session in `cwd` with `workspace` flags; the requests
/// the model received.
async fn scripted_run(f: &Folders, cwd: &Path, workspace: &[&str]) -> Vec<RecordedRequest> {
    let server = scripted_server(&f.outside).await;
    let out = vibedesk(&f.home)
        .current_dir(cwd)
        .args(run_args(&server, workspace))
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Partial: the refused calls count as failed ones.
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{stderr}");
    requests
}

/// What a user checks: the files the model saw, its one write, the four
/// refusals, and nothing written anywhere else.
fn saw_the_folder_wrote_inside_only(f: &Folders, requests: &[RecordedRequest]) {
    // The model was told where it works.
    let research = f.research.display().to_string();
    assert!(
        requests[0].raw_body.contains(&research),
        "the workspace summary names the folder"
    );
    // The listing and the read it got back are the user's files.
    let second = &requests[1].raw_body;
    assert!(
        second.contains("notes.md") && second.contains("data"),
        "{second}"
    );
    assert!(second.contains("alpha decays fast"), "{second}");
    // The write landed in the research folder, not the session's folder.
    assert_eq!(
        std::fs::read_to_string(f.research.join("summary.md")).unwrap(),
        "alpha decays fast"
    );
    let stray: Vec<_> = walk(&f.home)
        .into_iter()
        .filter(|p| p.ends_with("summary.md"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
    // Each escape was refused and left nothing behind.
    let fourth = &requests[3].raw_body;
    assert_eq!(
        fourth.matches("outside the workspace").count(),
        4,
        "{fourth}"
    );
    assert!(!fourth.contains("outside-secret-value"), "{fourth}");
    assert!(!f.research.parent().unwrap().join("x.md").exists());
    assert!(!f.outside.join("planted.md").exists());
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test]
async fn workspace_dot_in_a_research_folder_is_that_folder() {
    let f = folders();
    let requests = scripted_run(&f, &f.research, &["--workspace", "."]).await;
    saw_the_folder_wrote_inside_only(&f, &requests);
}

#[tokio::test]
async fn dash_c_names_the_folder_from_anywhere() {
    let f = folders();
    let research = f.research.display().to_string();
    let requests = scripted_run(&f, &f.outside, &["-C", &research]).await;
    saw_the_folder_wrote_inside_only(&f, &requests);
    assert!(!f.outside.join("summary.md").exists());
}

fn write_config(home: &Path, text: &str) {
    std::fs::create_dir_all(home.join("config")).unwrap();
    std::fs::write(home.join("config/config.toml"), text).unwrap();
}

#[tokio::test]
async fn config_cwd_is_the_folder_run_starts_in_and_doctor_shows_it() {
    let f = folders();
    write_config(&f.home, "[agent]\nworkspace = \"cwd\"\n");
    let doctor = vibedesk(&f.home)
        .current_dir(&f.research)
        .args(["doctor", "--offline"])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(doctor.status.success(), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("workspace"))
        .unwrap_or_else(|| panic!("no workspace line: {text}"));
    assert!(line.ends_with(&f.research.display().to_string()), "{line}");

    let server = TestServer::start(vec![
        tool_call_reply(&[
            ("c1", "read_file", r#"{"path":"notes.md"}"#),
            (
                "c2",
                "get_market_data",
                r#"{"symbol":"MYCO","source":"local"}"#,
            ),
        ]),
        tool_call_reply(&[(
            "c3",
            "bash",
            r#"{"command":"echo from-bash > \"$VIBEDESK_WORKSPACE/bash.txt\""}"#,
        )]),
        text_reply("It says alpha decays fast."),
    ])
    .await;
    let out = vibedesk(&f.home)
        .current_dir(&f.research)
        .args(run_args(&server, &[]))
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second = &server.requests()[1].raw_body;
    assert!(second.contains("alpha decays fast"), "{second}");
    // `source: "local"` read the user's data folder (the session's own
    // folder has no MYCO).
    assert!(
        second.contains(r#"\"symbol\":\"MYCO\",\"total\":2"#),
        "{second}"
    );
    // `bash` may write in the user's folder (its sandbox's write root).
    assert_eq!(
        std::fs::read_to_string(f.research.join("bash.txt")).unwrap(),
        "from-bash\n"
    );
}

#[tokio::test]
async fn a_missing_folder_is_refused_naming_it_and_the_config_line() {
    let f = folders();
    let missing = f.research.join("no-such-folder");
    write_config(
        &f.home,
        &format!(
            "[agent]\nmax_iterations = 5\nworkspace = \"{}\"\n",
            missing.display()
        ),
    );
    let server = TestServer::start(vec![text_reply("never")]).await;
    for (extra, names) in [
        (&[][..], "`[agent] workspace`"),
        (&["--workspace", "nope"][..], "--workspace"),
    ] {
        let out = vibedesk(&f.home)
            .current_dir(&f.research)
            .args(run_args(&server, extra))
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("does not exist") && stderr.contains(names),
            "{stderr}"
        );
        if extra.is_empty() {
            assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
            assert!(stderr.contains("line 3"), "{stderr}");
        }
    }
    let doctor = vibedesk(&f.home)
        .args(["doctor", "--offline"])
        .output()
        .await
        .unwrap();
    assert_eq!(doctor.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&doctor.stdout).contains("workspace     FAIL"));
    assert_eq!(server.request_count(), 0, "nothing ran");
}

#[tokio::test]
async fn home_as_the_workspace_headless_needs_yes() {
    let f = folders();
    let home = f.home.display().to_string();
    let server = TestServer::start(vec![text_reply("Fine.")]).await;
    let out = vibedesk(&f.home)
        .args(run_args(&server, &["-C", &home]))
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("home folder") && stderr.contains("--yes"),
        "{stderr}"
    );
    assert_eq!(
        server.request_count(),
        0,
        "refused before the model is asked"
    );
    let out = vibedesk(&f.home)
        .args(run_args(&server, &["-C", &home, "--yes"]))
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(server.request_count(), 1);
}
