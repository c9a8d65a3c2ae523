//! Reports (docs §20.3) through the real binary: a real offline backtest,
//! `vibedesk report` as HTML and Markdown, and `vibedesk export` of a real
//! offline session. The HTML is opened in headless Chromium (skipped with a
//! note where it is not installed, failing where CI requires it): the page
//! asks no host for anything (Chromium's network log, checked against a
//! probe page that does, so the check is known to see page requests), logs
//! nothing to the console, its DOM's metrics table holds the values the
//! tear sheet computes, and its screenshot is not blank.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::outside::Outside;
use vibedesk::report::markdown::relative_links;

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");

fn cmd(home: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.env("VIBEDESK_HOME", home).env_remove("VIBEDESK_CONFIG");
    c
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A two-symbol rules backtest over several years, offline.
fn backtest(home: &Path) -> PathBuf {
    let run = home.join("run1");
    let cfg = home.join("cfg.json");
    let config = json!({"codes": ["AAPL", "MSFT"], "start_date": "2012-01-01", "end_date": "2016-12-31",
        "source": "embedded", "strategy": {"rules": {"entry": "close > sma(close, 100)"}}});
    std::fs::write(&cfg, config.to_string()).unwrap();
    ok(cmd(home)
        .arg("backtest")
        .arg(&run)
        .arg("--config")
        .arg(&cfg)
        .arg("--offline")
        .output()
        .unwrap());
    run
}

/// The external URLs an HTML text names, apart from the SVG namespace
/// (an identifier, never fetched).
fn external_urls(html: &str) -> Vec<String> {
    let cleaned = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    ["http://", "https://", "//cdn", "ftp://"]
        .iter()
        .flat_map(|scheme| cleaned.match_indices(scheme).map(|(i, _)| i))
        .map(|i| cleaned[i..].chars().take(60).collect())
        .collect()
}

#[test]
fn the_report_and_the_export_through_the_binary_and_a_browser() {
    let home = tempfile::tempdir().unwrap();
    let run = backtest(home.path());

    // The default: report.html in the run dir, its path on stdout.
    let out = cmd(home.path()).arg("report").arg(&run).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let printed = ok(out);
    let html_path = run.join("report.html");
    assert_eq!(printed.trim(), html_path.display().to_string());
    eprintln!("{}", stderr.trim());
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(external_urls(&html).is_empty(), "{:?}", external_urls(&html));
    for needle in ["<script", "<link", "src=", "url(", "@import"] {
        assert!(!html.contains(needle), "the report holds {needle}");
    }
    // The values the tear sheet computes for this run.
    let (sheet, facts) = vibedesk::report::of_run(&run).unwrap();
    assert!(sheet.metrics.len() > 30 && !facts.provenance.is_empty());
    assert!(html.contains("AAPL: ") && html.contains("commission rate"));

    // Markdown: every relative link resolves to a file beside it.
    let md_path = home.path().join("out").join("tear sheet.md");
    ok(cmd(home.path())
        .arg("report")
        .arg(&run)
        .arg("--md")
        .arg(&md_path)
        .output()
        .unwrap());
    let md = std::fs::read_to_string(&md_path).unwrap();
    let links = relative_links(&md);
    assert!(links.len() >= 8, "{links:?}");
    for link in &links {
        let target = md_path.parent().unwrap().join(link);
        assert!(target.is_file(), "{link} does not resolve");
    }
    // A name that is no run is a usage error.
    let by_name = cmd(home.path())
        .args(["report", "no_such_run"])
        .output()
        .unwrap();
    assert_eq!(by_name.status.code(), Some(2));

    export_a_session(home.path());

    if !Outside::Browser.available() {
        return;
    }
    in_the_browser(home.path(), &html_path, &sheet);
}

/// A real offline session: a backtest request through `vibedesk run`,
/// exported both ways.
fn export_a_session(home: &Path) {
    let out = ok(cmd(home)
        .args(["run", "--json", "-p"])
        .arg("backtest a 20/50 SMA crossover on AAPL from 2015 to 2018")
        .output()
        .unwrap());
    let started: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let id = started["session_id"].as_str().unwrap().to_string();
    // The agent's run is found by its id alone.
    let run_id = started["run_id"].as_str().unwrap();
    let printed = ok(cmd(home).args(["report", run_id]).output().unwrap());
    assert!(printed.trim().ends_with(&format!("{run_id}/report.html")), "{printed}");
    let md_path = PathBuf::from(ok(cmd(home).args(["export", &id]).output().unwrap()).trim());
    assert!(md_path.starts_with(home.join("data/sessions").join(&id)), "{md_path:?}");
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert!(md.contains("## You\n\nbacktest a 20/50 SMA crossover"), "{md}");
    assert!(md.contains("- ▸ **backtest** {"), "the call folded to one line: {md}");
    assert!(md.contains("| sharpe |"), "the result's metrics as a table");
    let links = relative_links(&md);
    assert!(links.iter().any(|l| l.ends_with("equity_chart.svg")), "{links:?}");
    for link in &links {
        assert!(md_path.parent().unwrap().join(link).is_file(), "{link}");
    }
    let html_path =
        PathBuf::from(ok(cmd(home).args(["export", &id, "--html"]).output().unwrap()).trim());
    let html = std::fs::read_to_string(html_path).unwrap();
    assert!(html.contains("data:image/svg+xml;base64,") && !html.contains("<script"));
    assert!(html.contains("class=\"call\""));
}

/// Chromium's fixed flags: headless as root, nothing of its own online.
fn chromium(profile: &Path) -> Command {
    let mut c = Command::new("chromium");
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// Requests a page made (Chromium's own background requests, to its
/// vendor's services, have no page origin): their URLs.
fn page_requests(net_log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(net_log).unwrap();
    let log: Value = serde_json::from_str(&text).unwrap();
    let start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"].clone();
    log["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == start)
        .map(|e| &e["params"])
        .filter(|p| {
            p["initiator"] != "not an origin"
                || p["network_isolation_key"]
                    .as_str()
                    .is_some_and(|k| k.contains("file://"))
        })
        .filter_map(|p| p["url"].as_str().map(String::from))
        .filter(|u| u.starts_with("http:") || u.starts_with("https:") || u.starts_with("ws"))
        .collect()
}

/// Opens `page` with a network log; returns (DOM, stderr, page requests).
fn open(dir: &Path, name: &str, page: &Path) -> (String, String, Vec<String>) {
    let net = dir.join(format!("{name}.netlog.json"));
    let out = chromium(&dir.join(format!("{name}-profile")))
        .arg(format!("--log-net-log={}", net.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    (
        String::from_utf8(out.stdout).unwrap(),
        stderr,
        page_requests(&net),
    )
}

fn in_the_browser(home: &Path, html: &Path, sheet: &vibedesk::research::tearsheet::TearSheet) {
    let dir = home.join("browser");
    std::fs::create_dir_all(&dir).unwrap();
    // The probe: a page that does request a (loopback) host and log an
    // error, so the checks below are known to see both.
    let probe = dir.join("probe.html");
    std::fs::write(&probe, "<!DOCTYPE html><html><body><img src=\"http://127.0.0.1:9/x.png\"><script>console.error(\"probe-error\")</script></body></html>").unwrap();
    let (_, probe_err, probe_requests) = open(&dir, "probe", &probe);
    assert_eq!(probe_requests, ["http://127.0.0.1:9/x.png"], "the probe's request is seen");
    assert!(probe_err.contains("CONSOLE") && probe_err.contains("probe-error"), "{probe_err}");

    let (dom, stderr, requests) = open(&dir, "report", html);
    assert!(requests.is_empty(), "the report requested {requests:?}");
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    // The DOM's metrics table holds the computed values.
    let mut checked = 0;
    for m in &sheet.metrics {
        let Some(v) = m.value.filter(|v| v.is_finite()) else {
            continue;
        };
        let row = dom
            .split(&format!("<tr id=\"metric-{}\"", m.key))
            .nth(1)
            .unwrap_or_else(|| panic!("no row for {} in the DOM", m.key));
        let cell = row.split("class=\"strategy").nth(1).unwrap();
        let raw = cell.split("data-value=\"").nth(1).unwrap().split('"').next().unwrap();
        let shown: f64 = raw.parse().unwrap();
        assert!(
            (shown - v).abs() <= 1e-12 * v.abs().max(1.0),
            "{}: DOM {shown}, computed {v}",
            m.key
        );
        checked += 1;
    }
    assert!(checked > 30, "only {checked} metrics checked");

    // A screenshot that is not blank: many colours, and ink on the page.
    let shot = dir.join("report.png");
    let out = chromium(&dir.join("shot-profile"))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1000,1400")
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let decoder = png::Decoder::new(std::fs::File::open(&shot).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
    let first = pixels[0];
    let differing = pixels.iter().filter(|p| p[..3] != first[..3]).count();
    let mut colours: Vec<[u8; 3]> = pixels.iter().map(|p| [p[0], p[1], p[2]]).collect();
    colours.sort_unstable();
    colours.dedup();
    assert!(
        differing * 100 > pixels.len() && colours.len() > 20,
        "a blank screenshot: {differing} of {} pixels differ, {} colours",
        pixels.len(),
        colours.len()
    );
}
