//! `vibedesk monitor …` through the real binary (docs §21.2): add, list,
//! show, pause, resume, history, remove; bad input refused with a reason;
//! `monitor run` runs the job as an ordinary run and delivers its verdict.

use std::path::Path;
use std::process::{Command, Output};

fn vd(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vibedesk"))
        .args(args)
        .env("VIBEDESK_HOME", home)
        .env_remove("VIBEDESK_CONFIG")
        .env_remove("VIBEDESK_PROVIDER")
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn monitors_are_added_listed_paused_resumed_and_removed() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let out = h.join("verdict.json");
    let deliver = format!("file:{}", out.display());
    let o = vd(
        h,
        &[
            "monitor",
            "add",
            "close-screen",
            "--cron",
            "30 16 * * 1-5",
            "--tz",
            "America/New_York",
            "--prompt",
            "AAPL daily bars for the last month",
            "--deliver",
            &deliver,
            "--notify",
            "always",
        ],
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("added monitor close-screen"), "{stdout}");
    assert!(stderr.contains("no daemon runs"), "{stderr}");

    // The same name again, and each kind of bad input, with its reason.
    let again = vd(
        h,
        &[
            "monitor",
            "add",
            "close-screen",
            "--cron",
            "0 9 * * *",
            "--prompt",
            "x",
        ],
    );
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again).1.contains("exists already"));
    for (args, says) in [
        (vec!["--cron", "61 * * * *", "--prompt", "x"], "--cron"),
        (
            vec!["--cron", "0 9 * * *", "--tz", "Mars/Base", "--prompt", "x"],
            "IANA",
        ),
        (vec!["--cron", "0 9 * * *"], "one job"),
        (
            vec![
                "--cron",
                "0 9 * * *",
                "--prompt",
                "x",
                "--deliver",
                "slack:#desk",
            ],
            "webhook:URL",
        ),
        (
            vec!["--cron", "0 9 * * *", "--prompt", "x", "--notify", "often"],
            "change or always",
        ),
        (
            vec!["--cron", "0 9 * * *", "--team", "no_such_team"],
            "--team no_such_team",
        ),
    ] {
        let mut all = vec!["monitor", "add", "other"];
        all.extend(args.iter().copied());
        let o = vd(h, &all);
        let (_, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let bad_name = vd(
        h,
        &[
            "monitor",
            "add",
            "a b",
            "--cron",
            "0 9 * * *",
            "--prompt",
            "x",
        ],
    );
    assert!(text(&bad_name).1.contains("monitor name 'a b'"));

    let (list, _) = text(&vd(h, &["monitor", "list"]));
    assert!(
        list.contains("close-screen") && list.contains("30 16 * * 1-5 America/New_York"),
        "{list}"
    );

    let o = vd(h, &["monitor", "pause", "close-screen"]);
    assert!(o.status.success());
    let (show, _) = text(&vd(h, &["monitor", "show", "close-screen"]));
    assert!(
        show.contains("(paused)") && show.contains("next fire paused"),
        "{show}"
    );
    assert!(
        vd(h, &["monitor", "resume", "close-screen"])
            .status
            .success()
    );
    let (show, _) = text(&vd(h, &["monitor", "show", "close-screen"]));
    assert!(!show.contains("(paused)"), "{show}");
    assert!(show.contains(&format!("deliver    {deliver}")), "{show}");

    // Run now: an ordinary run with its own run dir, the verdict delivered.
    let o = vd(h, &["monitor", "run", "close-screen"]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("fire #1 success") && stdout.contains("delivered 1"),
        "{stdout}"
    );
    let body: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(body["monitor"], "close-screen");
    assert_eq!(body["trigger"], "manual");
    assert!(
        body["idempotency_key"]
            .as_str()
            .unwrap()
            .starts_with("vd-close-screen-1-")
    );
    let run_dir = body["run_dir"].as_str().unwrap();
    assert!(Path::new(run_dir).join("state.json").is_file(), "{run_dir}");

    let (hist, _) = text(&vd(h, &["monitor", "history", "close-screen"]));
    assert!(
        hist.contains("#1") && hist.contains("manual") && hist.contains("success"),
        "{hist}"
    );
    let (show, _) = text(&vd(h, &["monitor", "show", "close-screen"]));
    assert!(
        show.contains("sent 1 · pending 0 · claimed 0 · dead 0"),
        "{show}"
    );

    assert!(
        vd(h, &["monitor", "remove", "close-screen"])
            .status
            .success()
    );
    let gone = vd(h, &["monitor", "show", "close-screen"]);
    assert_eq!(gone.status.code(), Some(2));
    assert!(text(&gone).1.contains("no monitor named 'close-screen'"));
    let (list, _) = text(&vd(h, &["monitor", "list"]));
    assert!(list.contains("no monitors"), "{list}");
}

#[test]
fn a_failing_channel_retries_and_goes_dead_visibly() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::create_dir_all(h.join("config")).unwrap();
    std::fs::write(
        h.join("config").join("config.toml"),
        "[monitor]\nmax_tries = 1\n",
    )
    .unwrap();
    // A file under a path that is a file cannot be written.
    std::fs::write(h.join("blocker"), "x").unwrap();
    let deliver = format!("file:{}", h.join("blocker").join("v.json").display());
    let o = vd(
        h,
        &[
            "monitor",
            "add",
            "m",
            "--cron",
            "0 9 * * *",
            "--prompt",
            "AAPL daily bars for the last month",
            "--deliver",
            &deliver,
        ],
    );
    assert!(o.status.success(), "{:?}", text(&o));
    let o = vd(h, &["monitor", "run", "m"]);
    let (stdout, stderr) = text(&o);
    assert!(stdout.contains("dead 1"), "{stdout}{stderr}");
    let (show, _) = text(&vd(h, &["monitor", "show", "m"]));
    assert!(
        show.contains("dead 1") && show.contains("dead    fire #1"),
        "{show}"
    );
}
