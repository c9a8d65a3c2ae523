//! The Ray engine (docs §19) on a real two-node Ray cluster started on this
//! machine (`support::ray_cluster`): one cluster for the whole file, since
//! a start costs about ten seconds of two busy cores, driven step by step
//! by one test. Without Ray the test says so and passes, unless
//! `VIBEDESK_REQUIRE_RAY` is set (CI installs Ray), where it fails.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use tokio_util::sync::CancellationToken;
use vibedesk::sweep::ray::job::{self, JobEvent};
use vibedesk::sweep::ray::{JobStatus, JobsClient, ShardJob};

use crate::support::harness::vibedesk;
use crate::support::ray_cluster::{FORBIDDEN, RayCluster, get_json, ray_or_skip};

/// A stand-in shard binary for the generic job: records each attempt,
/// fails shard 1's first attempt, and writes `shard-<i>` atomically.
const SCRIPT: &str = r#"#!/bin/sh
spec="$2"; out="$4"; i="${spec%/*}"
echo "$$" >> "$out/attempts-$i"
if [ "$i" = 1 ] && [ "$(wc -l < "$out/attempts-$i")" -lt 2 ]; then
  echo "shard 1 fails its first attempt" >&2; exit 3
fi
printf 'shard %s\n' "$spec" > "$out/.tmp-$i" && mv "$out/.tmp-$i" "$out/shard-$i"
"#;

async fn run_job(client: &JobsClient, job: &ShardJob) -> (job::JobOutcome, Vec<JobEvent>) {
    let mut events = Vec::new();
    let outcome = job::run(
        client,
        job,
        &mut |e| events.push(e),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    (outcome, events)
}

/// Step 1: the driver runs every shard once, Ray retries a failing one,
/// and the package is the job's own.
async fn generic_shards_run_once_each_with_retries(cluster: &RayCluster, scratch: &Path) {
    let bin = scratch.join("fake-vibedesk");
    std::fs::write(&bin, SCRIPT).unwrap();
    let out = scratch.join("generic");
    std::fs::create_dir_all(&out).unwrap();
    let client = JobsClient::new(&cluster.dashboard, None).unwrap();
    assert_eq!(client.ray_version().await.unwrap(), "2.60.0");
    let argv = ["shard", "{shard}", "--out"]
        .iter()
        .map(|s| s.to_string())
        .chain([out.display().to_string()])
        .collect();
    let mut spec = ShardJob::new("test", "0123456789abcdef", bin, argv, 3);
    spec.stored = true;
    let (outcome, events) = run_job(&client, &spec).await;
    assert_eq!(outcome.status, JobStatus::Succeeded, "{events:#?}");
    let mut done = outcome.done.clone();
    done.sort_unstable();
    assert_eq!(done, vec![0, 1, 2], "{events:#?}");
    for i in 0..3 {
        assert_eq!(
            std::fs::read_to_string(out.join(format!("shard-{i}"))).unwrap(),
            format!("shard {i}/3\n")
        );
    }
    let attempts = |i: usize| {
        std::fs::read_to_string(out.join(format!("attempts-{i}")))
            .unwrap()
            .lines()
            .count()
    };
    assert_eq!((attempts(0), attempts(1), attempts(2)), (1, 2, 1));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, JobEvent::Packaged { .. }))
            .count(),
        1
    );
}

/// Step 2: every port the cluster listens on is outside 10002–19999.
fn ports_stay_outside_the_forbidden_range(cluster: &RayCluster) {
    let ports = cluster.listening_ports();
    // GCS, dashboard, two node managers at least.
    assert!(ports.len() >= 4, "{ports:?}");
    assert!(ports.contains(&cluster.base) && ports.contains(&(cluster.base + 1)));
    let inside: Vec<_> = ports.iter().filter(|p| FORBIDDEN.contains(p)).collect();
    assert!(inside.is_empty(), "Ray listens on {inside:?} of {ports:?}");
}

/// A sweep spec over the embedded offline market.
fn spec(dir: &Path, name: &str, universe: &[&str], fast_to: u32) -> PathBuf {
    let v = serde_json::json!({
        "base": {"codes": ["AAPL"], "start_date": "2005-01-01", "end_date": "2013-12-31",
                 "strategy": {"name": "sma_crossover", "params": {"fast": 10, "slow": 50}}},
        "axes": {"strategy.params.fast": {"from": 2, "to": fast_to, "step": 1},
                 "strategy.params.slow": {"from": 50, "to": 200, "step": 10}},
        "constraint": "fast < slow",
        "universe": universe,
        "split": {"in_sample": ["2005-01-01", "2010-12-31"], "out_of_sample": ["2011-01-01", "2013-12-31"]},
        "rank_by": "sharpe"
    });
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    path
}

/// What one `vibedesk ... --json` run printed and how it ended.
struct Ran {
    code: Option<i32>,
    events: Vec<Value>,
    stderr: String,
}

impl Ran {
    fn of(&self, kind: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["event"] == kind).collect()
    }
    fn packages(&self) -> Vec<String> {
        self.of("ray_packaged")
            .iter()
            .map(|e| e["package"].as_str().unwrap().to_string())
            .collect()
    }
}

fn ran(out: std::process::Output) -> Ran {
    Ran {
        code: out.status.code(),
        events: String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

async fn sweep(home: &Path, args: &[&str]) -> Ran {
    let out = vibedesk(home)
        .arg("sweep")
        .arg("run")
        .args(args)
        .args(["--offline", "--json"])
        .output()
        .await
        .unwrap();
    ran(out)
}

/// Step 3: the same sweep through Ray and here gives the same bytes, in
/// Parquet and CSV; a run whose shards are all done submits no job; a lost
/// shard file is rerun alone.
async fn a_sweep_through_ray_equals_the_local_run(
    cluster: &RayCluster,
    home: &Path,
    packages: &mut Vec<String>,
) {
    let spec = spec(home, "small.json", &["AAPL", "MSFT"], 12);
    let shards = home.join("small-shards");
    let (spec_s, address) = (spec.to_str().unwrap(), cluster.dashboard.as_str());
    for ext in ["parquet", "csv"] {
        let local = home.join(format!("local.{ext}"));
        let r = sweep(home, &[spec_s, "--out", local.to_str().unwrap()]).await;
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        let remote = home.join(format!("ray.{ext}"));
        let args = [
            spec_s,
            "--out",
            remote.to_str().unwrap(),
            "--engine",
            "ray",
            "--address",
            address,
            "--shards",
            "4",
            "--shard-dir",
            shards.to_str().unwrap(),
        ];
        let r = sweep(home, &args).await;
        assert_eq!(r.code, Some(0), "{}\n{:#?}", r.stderr, r.events);
        packages.extend(r.packages());
        assert_eq!(
            std::fs::read(&remote).unwrap(),
            std::fs::read(&local).unwrap(),
            "{ext}"
        );
        if ext == "parquet" {
            assert_eq!(r.of("ray_shard_done").len(), 4, "{:#?}", r.events);
            assert_eq!(r.of("ray_status").last().unwrap()["status"], "SUCCEEDED");
        } else {
            // The shards are those of the Parquet run: no job at all.
            assert!(r.of("ray_submitted").is_empty(), "{:#?}", r.events);
            let started = r.of("sweep_started");
            assert_eq!(started[0]["skipped"], started[0]["total"]);
            // A lost shard: only it runs again, and the bytes still agree.
            std::fs::remove_file(shards.join("shard-2-of-4.csv")).unwrap();
            std::fs::remove_file(&remote).unwrap();
            let redo = sweep(home, &args).await;
            assert_eq!(redo.code, Some(0), "{}", redo.stderr);
            let done: Vec<_> = redo
                .of("ray_shard_done")
                .iter()
                .map(|e| e["shard"].clone())
                .collect();
            assert_eq!(done, [serde_json::json!(2)]);
            packages.extend(redo.packages());
            assert_eq!(
                std::fs::read(&remote).unwrap(),
                std::fs::read(&local).unwrap()
            );
        }
    }
}

/// Step 4: `swarm batch --engine ray` runs one team per target with the
/// offline planner (no key anywhere) and reports every target once.
async fn a_team_batch_runs_on_ray(cluster: &RayCluster, home: &Path, packages: &mut Vec<String>) {
    let targets = home.join("targets.txt");
    std::fs::write(&targets, "AAPL\n# a comment\nMSFT\n\nIBM\n").unwrap();
    let out = home.join("batch.jsonl");
    let r = ran(vibedesk(home)
        .args(["swarm", "batch", "equity_research", "--targets"])
        .arg(&targets)
        .args([
            "--engine",
            "ray",
            "--address",
            &cluster.dashboard,
            "--max-calls",
            "2",
            "--json",
            "--out",
        ])
        .arg(&out)
        .output()
        .await
        .unwrap());
    assert_eq!(r.code, Some(0), "{}\n{:#?}", r.stderr, r.events);
    packages.extend(r.packages());
    let rows: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let targets: Vec<&str> = rows.iter().map(|r| r["target"].as_str().unwrap()).collect();
    assert_eq!(targets, ["AAPL", "MSFT", "IBM"]);
    for row in &rows {
        assert_eq!(row["status"], "success", "{row}");
        let report = row["report"].as_str().unwrap();
        assert!(
            report.contains(&format!("target={}", row["target"].as_str().unwrap())),
            "{report}"
        );
    }
}

/// Step 5: Ctrl-C stops the job on the cluster (exit 130, the job
/// STOPPED); the next run resumes and ends with the local run's bytes.
async fn ctrl_c_stops_the_job_and_a_rerun_resumes(
    cluster: &RayCluster,
    home: &Path,
    local: &Path,
    spec: &Path,
    packages: &mut Vec<String>,
) {
    use tokio::io::AsyncBufReadExt;
    let out = home.join("stopped.csv");
    let args = [
        spec.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--engine",
        "ray",
        "--address",
        &cluster.dashboard,
        "--shards",
        "4",
        "--offline",
        "--json",
    ];
    let mut child = vibedesk(home)
        .args(["sweep", "run"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut id = None;
    let mut stopped_job = None;
    while let Ok(Some(line)) = lines.next_line().await {
        let e: Value = serde_json::from_str(&line).unwrap_or_default();
        if e["event"] == "ray_submitted" {
            id = e["submission_id"].as_str().map(String::from);
        }
        if e["event"] == "ray_packaged" {
            packages.push(e["package"].as_str().unwrap().to_string());
        }
        if e["event"] == "ray_status" && e["status"] == "RUNNING" && stopped_job.is_none() {
            let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
            stopped_job = id.clone();
        }
    }
    let status = child.wait().await.unwrap();
    let id = stopped_job.expect("the job never ran");
    assert_eq!(status.code(), Some(130));
    let job = get_json(&format!("{}/api/jobs/{id}", cluster.dashboard)).unwrap();
    assert_eq!(job["status"], "STOPPED", "{job}");
    assert!(!out.exists(), "a stopped sweep must not write its output");
    let r = sweep(home, &args[..args.len() - 2]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    packages.extend(r.packages());
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(local).unwrap());
}

/// Step 6: the worker node dies while it runs a shard; Ray runs the shard
/// again on the head, and the output is whole: every shard exactly once,
/// the local run's bytes.
async fn a_lost_worker_node_still_gives_every_shard_once(
    cluster: &mut RayCluster,
    home: &Path,
    local: &Path,
    spec: &Path,
    packages: &mut Vec<String>,
) {
    let out = home.join("survived.csv");
    let child = vibedesk(home)
        .args(["sweep", "run"])
        .arg(spec)
        .arg("--out")
        .arg(&out)
        .args([
            "--engine",
            "ray",
            "--address",
            &cluster.dashboard,
            "--shards",
            "2",
        ])
        .args(["--max-retries", "5", "--offline", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (head_id, worker_id) = cluster.node_ids();
    let worker = [cluster.worker_session().unwrap()];
    let started = std::time::Instant::now();
    let lost = loop {
        if let Some(cmd) = cluster.command_lines(&worker, "sweep shard").first() {
            break cmd
                .split("--shard ")
                .nth(1)
                .unwrap()
                .split('/')
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no shard ever ran on the worker node"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    cluster.kill_worker();
    let r = ran(child.wait_with_output().await.unwrap());
    assert_eq!(r.code, Some(0), "{}\n{:#?}", r.stderr, r.events);
    packages.extend(r.packages());
    let done: Vec<(u64, String)> = r
        .of("ray_shard_done")
        .iter()
        .map(|e| {
            (
                e["shard"].as_u64().unwrap(),
                e["node_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // Each shard finished once; the lost one again on the head.
    assert_eq!(done.len(), 2, "{done:?}");
    assert_eq!(
        done.iter().map(|d| d.0).collect::<BTreeSet<_>>(),
        BTreeSet::from([0, 1])
    );
    let again = done.iter().find(|d| d.0 == lost).unwrap();
    assert_eq!(
        again.1, head_id,
        "shard {lost} lost with {worker_id}: {done:?}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(local).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_two_node_ray_cluster_runs_sweeps_and_teams() {
    let Some(ray) = ray_or_skip("a_real_two_node_ray_cluster_runs_sweeps_and_teams") else {
        return;
    };
    let mut cluster = tokio::task::spawn_blocking(move || RayCluster::start(ray))
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    // Bounded: a job that hangs fails the test (and the drop still ends
    // the cluster) instead of holding CI.
    let steps = every_step(&mut cluster, home.path());
    if tokio::time::timeout(Duration::from_secs(900), steps)
        .await
        .is_err()
    {
        panic!(
            "the Ray steps took over 15 minutes: {}",
            cluster.log("head")
        );
    }
    // Nothing of the cluster outlives it.
    let sessions = cluster.sessions();
    drop(cluster);
    assert!(crate::support::ray_cluster::pids_in_sessions(&sessions).is_empty());
}

async fn every_step(cluster: &mut RayCluster, home: &Path) {
    let mut packages = Vec::new();
    generic_shards_run_once_each_with_retries(cluster, home).await;
    ports_stay_outside_the_forbidden_range(cluster);
    a_sweep_through_ray_equals_the_local_run(cluster, home, &mut packages).await;
    a_team_batch_runs_on_ray(cluster, home, &mut packages).await;
    // A sweep whose shards take seconds: 5,120 cells.
    let big = spec(
        home,
        "big.json",
        &["AAPL", "MSFT", "IBM", "KO", "PEP", "XOM", "JNJ", "GE"],
        41,
    );
    let local = home.join("big-local.csv");
    let r = sweep(
        home,
        &[big.to_str().unwrap(), "--out", local.to_str().unwrap()],
    )
    .await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    ctrl_c_stops_the_job_and_a_rerun_resumes(cluster, home, &local, &big, &mut packages).await;
    a_lost_worker_node_still_gives_every_shard_once(cluster, home, &local, &big, &mut packages)
        .await;
    // Every job had a package of its own.
    let distinct: BTreeSet<_> = packages.iter().collect();
    assert_eq!(packages.len(), 6, "{packages:?}");
    assert_eq!(distinct.len(), packages.len(), "{packages:?}");
}

/// The Jobs REST client on a loopback server (no Ray needed): the requests
/// Ray's API expects, the token, and a stop when cancelled.
#[tokio::test]
async fn the_jobs_client_speaks_rays_rest_api_and_stops_on_cancel() {
    use crate::support::server::{TestServer, json_reply, status_reply};
    let logs = "(run_shard pid=7, ip=10.0.0.2) @@vibedesk {\"event\": \"shard_started\", \"node\": \"n1\", \"node_id\": \"abc\", \"of\": 2, \"shard\": 1}\nplain line\n";
    let server = TestServer::start(vec![
        status_reply(200, ""),
        json_reply(
            200,
            &serde_json::json!({"submission_id": "sub-1", "job_id": null}),
        ),
        json_reply(200, &serde_json::json!({"stopped": true})),
        json_reply(
            200,
            &serde_json::json!({"status": "STOPPED", "message": "stopped by the user"}),
        ),
        json_reply(200, &serde_json::json!({"logs": logs})),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("vibedesk");
    std::fs::write(&bin, b"#!/bin/sh\n").unwrap();
    let client = JobsClient::new(&server.addr().to_string(), Some("tok".into())).unwrap();
    let job = ShardJob::new(
        "test",
        "feedface",
        bin,
        vec!["x".into(), "{shard}".into()],
        2,
    );
    let cancel = CancellationToken::new();
    cancel.cancel();
    let mut events = Vec::new();
    let outcome = job::run(&client, &job, &mut |e| events.push(e), &cancel)
        .await
        .unwrap();
    assert_eq!(outcome.status, JobStatus::Stopped);
    assert_eq!(outcome.submission_id, "sub-1");
    assert!(events.contains(&JobEvent::StopRequested), "{events:#?}");
    assert!(events.contains(&JobEvent::ShardStarted {
        shard: 1,
        node: "n1".into(),
        node_id: "abc".into()
    }));
    assert!(events.contains(&JobEvent::Log {
        line: "plain line".into()
    }));
    let requests = server.requests();
    let calls: Vec<(String, String)> = requests
        .iter()
        .map(|r| (r.method.clone(), r.path.clone()))
        .collect();
    let package = format!("/api/packages/gcs/{}", outcome.package);
    assert_eq!(
        calls,
        [
            ("PUT".to_string(), package),
            ("POST".into(), "/api/jobs/".into()),
            ("POST".into(), "/api/jobs/sub-1/stop".into()),
            ("GET".into(), "/api/jobs/sub-1".into()),
            ("GET".into(), "/api/jobs/sub-1/logs".into()),
        ]
    );
    for r in &requests {
        assert_eq!(r.header("authorization"), Some("Bearer tok"), "{}", r.path);
    }
    let submit = &requests[1].body;
    assert_eq!(submit["entrypoint"], "python driver.py");
    assert_eq!(
        submit["runtime_env"]["working_dir"],
        format!("gcs://{}", outcome.package)
    );
    assert!(
        submit["submission_id"]
            .as_str()
            .unwrap()
            .starts_with("vibedesk-test-feedface-")
    );
}

/// Ray's refusal is quoted, with what was being done.
#[tokio::test]
async fn a_refused_upload_says_what_ray_answered() {
    use crate::support::server::{TestServer, status_reply};
    let server = TestServer::start(vec![status_reply(
        413,
        "Maximum request body size 104857600 exceeded.",
    )])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("vibedesk");
    std::fs::write(&bin, b"bin").unwrap();
    let client = JobsClient::new(&format!("http://{}", server.addr()), None).unwrap();
    let job = ShardJob::new("test", "k", bin, vec![], 1);
    let e = job::run(&client, &job, &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("upload the package") && e.contains("413") && e.contains("104857600"),
        "{e}"
    );
}

/// Without an address the Ray engine stops before anything starts and says
/// where to give one.
#[tokio::test]
async fn the_ray_engine_without_an_address_says_where_to_give_one() {
    let home = tempfile::tempdir().unwrap();
    let spec = spec(home.path(), "s.json", &["AAPL"], 4);
    let out = vibedesk(home.path())
        .args(["sweep", "run"])
        .arg(&spec)
        .args(["--out", "x.csv", "--engine", "ray"])
        .current_dir(home.path())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--address") && stderr.contains("[engines.ray]"),
        "{stderr}"
    );
}

/// `swarm batch` here: one team per target with the offline planner (no
/// key), one result line per target in file order, and a rerun that runs
/// no team again.
#[tokio::test]
async fn a_team_batch_runs_here_with_the_offline_planner_and_resumes() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let targets = home.join("targets.txt");
    std::fs::write(&targets, "MSFT\nAAPL # the second\nIBM\n").unwrap();
    let out = home.join("batch.jsonl");
    let batch = || {
        let mut c = vibedesk(home);
        c.args(["swarm", "batch", "equity_research", "--targets"])
            .arg(&targets)
            .args(["--max-calls", "2", "--json", "--out"])
            .arg(&out);
        c
    };
    let r = ran(batch().output().await.unwrap());
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let finished = r.of("batch_finished");
    assert_eq!(
        (
            finished[0]["teams"].clone(),
            finished[0]["succeeded"].clone()
        ),
        (3.into(), 3.into())
    );
    let rows: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let targets_seen: Vec<&str> = rows.iter().map(|r| r["target"].as_str().unwrap()).collect();
    assert_eq!(targets_seen, ["MSFT", "AAPL", "IBM"]);
    let runs = |home: &Path| {
        std::fs::read_dir(home.join("data").join("swarm"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let before = runs(home);
    assert!(before >= 3, "{before} team runs on disk");
    let first = std::fs::read(&out).unwrap();
    let again = ran(batch().output().await.unwrap());
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(runs(home), before, "a resumed batch ran a team again");
    assert_eq!(std::fs::read(&out).unwrap(), first);
}
