//! Issue 35 items 3, 4 and 7a at the doors, through the real binary: a
//! grid too large is refused from its shape before it costs memory (docs
//! §18.2), spec files and Ray logs are read with a cap (§18.1, §19.2), one
//! sweep writes an `out` at a time and a sweep over MCP resumes past its
//! deadline (§18.3, §18.7), and `mcp serve --http` closes connections that
//! never finish their headers and caps them per client (§13.4.2). All
//! traffic is on loopback, bounded in count and time.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio_util::sync::CancellationToken;
use vibedesk::research::data::embedded;
use vibedesk::sweep::ray::job::{self, JobEvent};
use vibedesk::sweep::ray::{JobStatus, JobsClient, RayError, ShardJob};

use crate::support::harness::vibedesk;

/// The peak resident memory of a live process, from `/proc/PID/status`.
fn vm_hwm_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .unwrap_or_else(|| panic!("no VmHWM in {status}"));
    let kb: f64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb / 1024.0
}

/// The spec: 10⁴ × 10⁴ parameter sets, `fast < slow`.
fn huge_spec() -> Value {
    json!({"base": {"codes": ["AAPL"], "source": "embedded", "start_date": "2005-01-01", "end_date": "2013-12-31",
                    "strategy": {"name": "sma_crossover", "params": {"fast": 20, "slow": 50}}},
           "axes": {"strategy.params.fast": {"from": 1, "to": 10000, "step": 1},
                    "strategy.params.slow": {"from": 1, "to": 10000, "step": 1}},
           "constraint": "fast < slow"})
}

/// A pipe whose buffer is already full: a process given its write end as
/// stderr blocks on its first message, alive, so its `/proc` can be read.
fn full_pipe() -> (std::fs::File, std::os::fd::OwnedFd) {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let (read, write) = nix::unistd::pipe().unwrap();
    fcntl(&write, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).unwrap();
    let mut w = std::fs::File::from(write);
    let chunk = [b'#'; 4096];
    while w.write(&chunk).is_ok() {}
    // Blocking again for the child: the flag is the open file's, shared.
    fcntl(&w, FcntlArg::F_SETFL(OFlag::empty())).unwrap();
    (std::fs::File::from(read), w.into())
}

/// The main thread of `pid` waits to write to a pipe.
fn blocked_in_pipe_write(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/wchan")).is_ok_and(|w| w.contains("pipe_write"))
}

#[tokio::test]
async fn a_huge_grid_is_refused_by_sweep_plan_in_under_100_mb() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let spec = tmp.path().join("huge.json");
    std::fs::write(&spec, huge_spec().to_string()).unwrap();
    let (mut read, write) = full_pipe();
    let mut child = vibedesk(&home)
        .args(["sweep", "plan", spec.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::from(write))
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    // It blocks on its one message, the refusal: measured there.
    let until = Instant::now() + Duration::from_secs(30);
    while !blocked_in_pipe_write(pid) && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let peak = vm_hwm_mb(pid);
    let drain = std::thread::spawn(move || {
        let mut all = Vec::new();
        read.read_to_end(&mut all).unwrap();
        String::from_utf8_lossy(&all)
            .trim_start_matches('#')
            .to_string()
    });
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    let err = drain.join().unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("100000000 parameter sets before the constraint")
            && err.contains("more than 10000000"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one message: {err}");
    eprintln!("sweep plan of the 10⁴ × 10⁴ grid: peak RSS {peak:.1} MB");
    assert!(peak < 100.0, "peak RSS {peak:.1} MB");
}

#[tokio::test]
async fn a_spec_that_never_ends_is_refused_at_its_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    for args in [
        vec!["sweep", "plan", "/dev/zero"],
        vec!["sweep", "run", "/dev/zero", "--out", "x.csv"],
    ] {
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            vibedesk(&home).current_dir(tmp.path()).args(&args).output(),
        )
        .await
        .expect("refused in time")
        .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("cannot read /dev/zero") && err.contains("16 MiB limit"),
            "{err}"
        );
    }
}

/// `mcp serve` over stdio with the raw protocol.
struct Stdio2 {
    child: Child,
    stdin: ChildStdin,
    lines: tokio::io::Lines<BufReader<ChildStdout>>,
    early: Vec<Value>,
}

impl Stdio2 {
    async fn start(home: &Path, envs: &[(&str, &str)]) -> Stdio2 {
        Stdio2::start_with(home, &[], envs).await
    }

    async fn start_with(home: &Path, args: &[&str], envs: &[(&str, &str)]) -> Stdio2 {
        let mut c = vibedesk(home);
        c.current_dir(home)
            .args(["mcp", "serve"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in envs {
            c.env(k, v);
        }
        let mut child = c.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut s = Stdio2 {
            child,
            stdin,
            lines,
            early: Vec::new(),
        };
        s.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        )
        .await;
        assert_eq!(s.next().await["id"], 0);
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        s
    }

    async fn send(&mut self, v: Value) {
        let line = format!("{v}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(120), self.lines.next_line())
            .await
            .expect("no answer in 120 s")
            .unwrap()
            .expect("the server closed stdout");
        serde_json::from_str(&line).unwrap()
    }

    /// The answer to request `id`: answers to others that come first are
    /// kept for their turn, notifications skipped.
    async fn answer(&mut self, id: u64) -> Value {
        if let Some(at) = self.early.iter().position(|m| m["id"] == id) {
            return self.early.remove(at);
        }
        loop {
            let m = self.next().await;
            if m["id"] == id {
                return m;
            }
            if m.get("id").is_some() {
                self.early.push(m);
            }
        }
    }

    fn call(id: u64, name: &str, arguments: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}})
    }
}

#[tokio::test]
async fn three_huge_grids_at_once_over_mcp_are_refused_and_the_server_lives() {
    let home = tempfile::tempdir().unwrap();
    let mut s = Stdio2::start(home.path(), &[]).await;
    for id in 1..=3 {
        s.send(Stdio2::call(
            id,
            "sweep",
            json!({"spec": huge_spec(), "plan_only": true}),
        ))
        .await;
    }
    for id in 1..=3 {
        let a = s.answer(id).await;
        assert_eq!(a["result"]["isError"], true, "{a}");
        let text = a["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("more than 10000000 parameter sets"), "{text}");
    }
    // Still serving, the heavy places free again: the next sweep is planned.
    s.send(Stdio2::call(
        4,
        "sweep",
        json!({"spec": grid(2, 20), "plan_only": true}),
    ))
    .await;
    let a = s.answer(4).await;
    assert_eq!(a["result"]["isError"], false, "{a}");
    assert_eq!(a["result"]["structuredContent"]["cells"], 2 * 75, "{a}");
    let peak = vm_hwm_mb(s.child.id().unwrap());
    eprintln!("mcp serve after three 10⁴ × 10⁴ grids: peak RSS {peak:.1} MB");
    assert!(peak < 100.0, "peak RSS {peak:.1} MB");
    drop(s.stdin);
    let _ = tokio::time::timeout(Duration::from_secs(30), s.child.wait()).await;
}

/// With one place for heavy calls, a second heavy call waits for the
/// first: a plan that alone answers at once comes after the long sweep (or
/// answers `busy` when its own deadline passes while it waits).
#[tokio::test]
async fn heavy_calls_over_mcp_queue_for_their_places() {
    let home = tempfile::tempdir().unwrap();
    let mut s = Stdio2::start_with(
        home.path(),
        &["--max-heavy-calls", "1"],
        // Long enough for a first cell beside the whole suite: at 2 s a
        // loaded machine ran none and the sweep answered before any progress.
        &[("VIBEDESK_TOOL_TIMEOUT_SECONDS", "8")],
    )
    .await;
    let mut sweep = Stdio2::call(1, "sweep", json!({"spec": grid(40, 50), "out": "long.csv"}));
    sweep["params"]["_meta"] = json!({"progressToken": "long"});
    s.send(sweep).await;
    // The sweep holds the one place once it reports progress; a fixed
    // sleep raced a loaded machine, where the plan could arrive first.
    loop {
        let m = s.next().await;
        if m["method"] == "notifications/progress" && m["params"]["progressToken"] == "long" {
            break;
        }
        assert!(m.get("id").is_none(), "an answer before any progress: {m}");
    }
    s.send(Stdio2::call(
        2,
        "sweep",
        json!({"spec": grid(2, 20), "plan_only": true}),
    ))
    .await;
    // The plan runs only once the sweep has given its place back, so the
    // sweep reports no progress after the plan's answer. (Which answer is
    // written first is not the point: the sweep frees its place before
    // its own, possibly long, answer is sent.) With two places the plan
    // answers at once and 33 progress reports follow it.
    let mut answers: Vec<(u64, Value)> = Vec::new();
    let mut progress_after_plan = 0;
    while answers.len() < 2 {
        let m = s.next().await;
        if let Some(id) = m["id"].as_u64() {
            answers.push((id, m));
        } else if m["method"] == "notifications/progress"
            && m["params"]["progressToken"] == "long"
            && answers.iter().any(|(id, _)| *id == 2)
        {
            progress_after_plan += 1;
        }
    }
    assert_eq!(
        progress_after_plan, 0,
        "the plan ran beside the sweep: {answers:?}"
    );
    let plan = &answers.iter().find(|(id, _)| *id == 2).unwrap().1["result"];
    let text = plan["content"][0]["text"].as_str().unwrap();
    assert!(
        plan["isError"] == false || text.contains("--max-heavy-calls"),
        "{text}"
    );
    drop(s.stdin);
    let _ = tokio::time::timeout(Duration::from_secs(30), s.child.wait()).await;
}

/// A spec of `symbols` × 174 parameter sets, two windows.
fn grid(symbols: usize, fast_to: u32) -> Value {
    let universe: Vec<&str> = embedded::symbols().into_iter().take(symbols).collect();
    json!({
        "base": {"source": "embedded", "start_date": "2004-01-01", "end_date": "2012-12-31",
                 "strategy": {"name": "sma_crossover"}},
        "axes": {"strategy.params.fast": {"from": 5, "to": fast_to, "step": 5},
                 "strategy.params.slow": {"from": 20, "to": 200, "step": 10}},
        "constraint": "fast < slow",
        "universe": universe,
        "split": {"in_sample": ["2004-01-01", "2009-12-31"], "out_of_sample": ["2010-01-01", "2012-12-31"]},
    })
}

/// Complete cells and rows of a journal; each cell's rows counted.
fn journal(path: &Path) -> (usize, usize, usize) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut by_cell = std::collections::BTreeMap::<usize, usize>::new();
    for line in text.split_inclusive('\n').skip(2) {
        if let Some(body) = line.strip_suffix('\n') {
            let cell: usize = body.split(',').next().unwrap().parse().unwrap();
            *by_cell.entry(cell).or_default() += 1;
        }
    }
    let rows = by_cell.values().sum();
    let most = by_cell.values().copied().max().unwrap_or(0);
    (by_cell.len(), rows, most)
}

#[tokio::test]
async fn a_sweep_over_mcp_past_its_deadline_resumes_until_every_cell_ran_once() {
    let home = tempfile::tempdir().unwrap();
    // About ten seconds of cells in a debug build, two-second deadlines.
    let spec = grid(40, 50);
    let mut s = Stdio2::start(home.path(), &[("VIBEDESK_TOOL_TIMEOUT_SECONDS", "2")]).await;
    let mut timeouts = 0;
    let mut done = None;
    for id in 1..=60 {
        s.send(Stdio2::call(
            id,
            "sweep",
            json!({"spec": spec, "out": "resume.csv"}),
        ))
        .await;
        let a = s.answer(id).await;
        let text = a["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        if a["result"]["isError"] == true {
            assert!(
                text.contains("timeout") && text.contains("call sweep again"),
                "{text}"
            );
            timeouts += 1;
            continue;
        }
        done = Some(a["result"]["structuredContent"].clone());
        break;
    }
    let done = done.expect("the sweep never finished in 60 calls");
    assert!(timeouts >= 1, "the first call finished within its deadline");
    let total = done["cells"].as_u64().unwrap() as usize;
    assert_eq!(total, 40 * 174);
    assert_eq!(
        done["skipped"].as_u64().unwrap() as usize + done["computed"].as_u64().unwrap() as usize,
        total,
        "{done}"
    );
    assert!(done["skipped"].as_u64().unwrap() > 0, "{done}");
    // The journal under the server's sweep folder holds every cell once.
    let dir = home.path().join("data/mcp/sweeps");
    let (cells, rows, most) = journal(&dir.join("resume.csv.sweep/journal.csv"));
    assert_eq!((cells, rows, most), (total, 2 * total, 2));
    assert!(dir.join("resume.csv").is_file());
    drop(s.stdin);
    let _ = tokio::time::timeout(Duration::from_secs(30), s.child.wait()).await;
}

#[tokio::test]
async fn one_sweep_per_out_and_another_plan_on_it_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let spec = tmp.path().join("spec.json");
    std::fs::write(&spec, grid(40, 50).to_string()).unwrap();
    let out = tmp.path().join("r.csv");
    let mut first = vibedesk(&home)
        .args(["sweep", "run", spec.to_str().unwrap(), "--out"])
        .arg(&out)
        .args(["--json", "--threads", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(first.stdout.take().unwrap()).lines();
    // The first holds the lock once it has started.
    loop {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .expect("the first sweep ended before starting");
        if line.contains("sweep_started") {
            break;
        }
    }
    let second = vibedesk(&home)
        .args(["sweep", "run", spec.to_str().unwrap(), "--out"])
        .arg(&out)
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    let pid = first.id().unwrap();
    assert!(
        err.contains("another sweep is writing") && err.contains(&format!("pid {pid}")),
        "{err}"
    );
    first.kill().await.unwrap();
    let _ = first.wait().await;

    // Another spec on the same out: refused, naming both plans; the first
    // plan's journal is untouched.
    let journal_path = PathBuf::from(format!("{}.sweep/journal.csv", out.display()));
    let before = std::fs::read(&journal_path).unwrap();
    let other = tmp.path().join("other.json");
    std::fs::write(&other, grid(2, 20).to_string()).unwrap();
    let refused = vibedesk(&home)
        .args(["sweep", "run", other.to_str().unwrap(), "--out"])
        .arg(&out)
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(
        err.contains("belongs to another sweep") && err.contains("give this sweep another out"),
        "{err}"
    );
    assert_eq!(std::fs::read(&journal_path).unwrap(), before);
    assert!(!out.exists());
}

/// A loopback stand-in for a Ray dashboard whose job log never ends: the
/// logs answer streams until the client stops reading. Counts the bytes it
/// could send and the log requests.
struct EndlessDashboard {
    addr: std::net::SocketAddr,
    sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
    log_requests: std::sync::Arc<std::sync::atomic::AtomicU64>,
    _task: tokio::task::JoinHandle<()>,
}

impl EndlessDashboard {
    async fn start() -> EndlessDashboard {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let log_requests = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (s2, l2) = (sent.clone(), log_requests.clone());
        let task = tokio::spawn(async move {
            let status = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            // Bounded: at most 50 connections.
            for _ in 0..50 {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let (sent, logs, status) = (s2.clone(), l2.clone(), status.clone());
                tokio::spawn(async move {
                    use tokio::io::AsyncReadExt;
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let head = String::from_utf8_lossy(&head).to_string();
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    let mut body = vec![0u8; length.min(64 << 20)];
                    let _ = stream.read_exact(&mut body).await;
                    let first = head.lines().next().unwrap_or("").to_string();
                    let reply = |body: String| {
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        )
                    };
                    let answer = if first.contains("/logs") {
                        logs.fetch_add(1, Ordering::SeqCst);
                        let start = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{\"logs\": \"";
                        if stream.write_all(start.as_bytes()).await.is_err() {
                            return;
                        }
                        let line = "x".repeat(1 << 16);
                        // Endless but bounded for the test: 1 GiB at most.
                        for _ in 0..(1 << 14) {
                            if stream.write_all(line.as_bytes()).await.is_err() {
                                return;
                            }
                            sent.fetch_add(line.len() as u64, Ordering::SeqCst);
                        }
                        return;
                    } else if first.starts_with("POST /api/jobs/ ") {
                        reply(json!({"submission_id": "sub-1", "job_id": null}).to_string())
                    } else if first.starts_with("GET /api/jobs/sub-1 ") {
                        // Running twice, then done.
                        let n = status.fetch_add(1, Ordering::SeqCst);
                        let state = if n < 2 { "RUNNING" } else { "SUCCEEDED" };
                        reply(json!({"status": state, "message": ""}).to_string())
                    } else {
                        reply(String::new())
                    };
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        EndlessDashboard {
            addr,
            sent,
            log_requests,
            _task: task,
        }
    }

    fn sent_mb(&self) -> f64 {
        self.sent.load(std::sync::atomic::Ordering::SeqCst) as f64 / (1 << 20) as f64
    }
}

#[tokio::test]
async fn an_endless_ray_log_is_read_to_its_cap_and_no_further() {
    let dash = EndlessDashboard::start().await;
    let client = JobsClient::new(&dash.addr.to_string(), None).unwrap();
    let e = client.logs("sub-1").await.unwrap_err();
    assert!(matches!(e, RayError::TooLarge { mib: 32, .. }), "{e}");
    assert!(e.to_string().contains("32 MiB"), "{e}");
    // The client stopped reading: what the server could push is the cap
    // plus what the sockets buffer, not the gigabyte it had.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(dash.sent_mb() < 64.0, "{} MB sent", dash.sent_mb());

    // A whole job: the log is given up once, the job still followed to its end.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("vibedesk");
    std::fs::write(&bin, b"#!/bin/sh\n").unwrap();
    let job = ShardJob::new("test", "feedface", bin, vec!["{shard}".into()], 2);
    let mut events = Vec::new();
    let outcome = tokio::time::timeout(
        Duration::from_secs(120),
        job::run(
            &client,
            &job,
            &mut |e| events.push(e),
            &CancellationToken::new(),
        ),
    )
    .await
    .expect("the job was followed to its end")
    .unwrap();
    assert_eq!(outcome.status, JobStatus::Succeeded);
    let notes: Vec<&JobEvent> = events
        .iter()
        .filter(|e| matches!(e, JobEvent::Log { line } if line.contains("no longer followed")))
        .collect();
    assert_eq!(notes.len(), 1, "{events:#?}");
    // One request for the first check, one in the job: then never again.
    assert_eq!(
        dash.log_requests.load(std::sync::atomic::Ordering::SeqCst),
        2
    );
}

/// `mcp serve --http` on 127.0.0.1 with a short header timeout and a small
/// per-client cap; its address once it listens.
async fn serve_http(home: &Path, args: &[&str]) -> (Child, std::net::SocketAddr) {
    let mut child = vibedesk(home)
        .current_dir(home)
        .args(["mcp", "serve", "--http", "127.0.0.1:0", "--no-token"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let find = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(at) = line.find("http://") {
                let rest = &line[at + "http://".len()..];
                let addr = rest.split('/').next().unwrap().to_string();
                return addr.parse().unwrap();
            }
        }
        panic!("the server exited without listening");
    };
    let addr = tokio::time::timeout(Duration::from_secs(60), find)
        .await
        .expect("listening within 60 s");
    // Keep reading stderr so the server never blocks on it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr)
}

/// A connection from `from` (a loopback address) to `to`.
async fn connect_from(from: &str, to: std::net::SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(to).await.unwrap()
}

/// Everything the server sends until it closes (bounded wait).
async fn read_to_close(stream: &mut tokio::net::TcpStream, within: Duration) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut all = Vec::new();
    let read = tokio::time::timeout(within, stream.read_to_end(&mut all)).await;
    read.ok().map(|_| String::from_utf8_lossy(&all).to_string())
}

#[tokio::test]
async fn partial_headers_are_closed_at_the_timeout_and_connections_capped_per_client() {
    let home = tempfile::tempdir().unwrap();
    let (mut child, addr) = serve_http(
        home.path(),
        &["--header-timeout", "1", "--max-client-connections", "4"],
    )
    .await;
    // Four connections from 127.0.0.1 that never finish their headers.
    let started = Instant::now();
    let mut slow = Vec::new();
    for _ in 0..4 {
        let mut s = connect_from("127.0.0.1", addr).await;
        s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(s);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A fifth from the same address: 503 and closed at once.
    let mut fifth = connect_from("127.0.0.1", addr).await;
    let said = read_to_close(&mut fifth, Duration::from_secs(10))
        .await
        .expect("the fifth connection was not closed");
    assert!(
        said.starts_with("HTTP/1.1 503") && said.contains("--max-client-connections"),
        "{said}"
    );
    // Another client meanwhile is served.
    let mut other = connect_from("127.0.0.2", addr).await;
    other
        .write_all(b"GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut other, Duration::from_secs(10))
        .await
        .expect("the other client got no answer");
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(answer.contains("the MCP endpoint is /mcp"), "{answer}");
    // The slow ones are closed by the header timeout, well before 95 s.
    for s in &mut slow {
        read_to_close(s, Duration::from_secs(20))
            .await
            .expect("a connection with partial headers stayed open 20 s");
    }
    let closed_after = started.elapsed();
    assert!(
        closed_after >= Duration::from_millis(900),
        "{closed_after:?}"
    );
    // Their places are free again: the first client is served.
    let mut again = connect_from("127.0.0.1", addr).await;
    again
        .write_all(b"GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut again, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    child.kill().await.unwrap();
}
