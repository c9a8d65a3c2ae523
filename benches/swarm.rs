//! Scheduling overhead of a research team per task (docs §14.3): a generated
//! 100-task DAG (10 layers of 10, each task reading two tasks of the layer
//! before), 4 workers, the scripted provider answering at once. The same
//! 100 agent loops are also run directly, 4 at a time, with no scheduler;
//! the overhead per task is the difference divided by 100 (what the
//! scheduler adds: validation, upstream context, run.json and events.jsonl
//! writes, event forwarding, report.md). Measured on tmpfs (CPU cost) and
//! on the working disk (with the fsyncs of run.json and events.jsonl).
//!
//! Validation alone (docs §14.2) is timed too, on a 10,000-task chain
//! whose every task takes `input_from` the first (so each source is many
//! steps up): parse, then `inspect`, best of 5.
//!
//! `cargo bench --bench swarm` (`-- validate` for the validation only)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use vibedesk::agent::events::RunStatus;
use vibedesk::agent::{EventSink, Loop, LoopConfig, LoopDeps, RunRequest};
use vibedesk::llm::scripted::{Script, ScriptedProvider};
use vibedesk::store::Paths;
use vibedesk::swarm::SwarmOptions;
use vibedesk::swarm::preset::parse;
use vibedesk::tools::{BackgroundQueue, Registry};

const LAYERS: usize = 10;
const WIDTH: usize = 10;
const WORKERS: usize = 4;
const ROUNDS: usize = 5;

/// 10 layers of 10; task (l, i) depends on (l-1, i) and (l-1, (i*7+3) % 10).
fn dag_yaml() -> String {
    let mut y = String::from(
        "name: bench\nagents:\n  - {id: worker, role: Analyst, system_prompt: 'Study {target}.'}\ntasks:\n",
    );
    for l in 0..LAYERS {
        for i in 0..WIDTH {
            y.push_str(&format!(
                "  - id: t{l}-{i}\n    agent_id: worker\n    prompt_template: 'Part {l}.{i} of {{target}}. {{upstream_context}}'\n"
            ));
            if l > 0 {
                let (a, b) = (i, (i * 7 + 3) % WIDTH);
                y.push_str(&format!(
                    "    depends_on: [t{p}-{a}, t{p}-{b}]\n    input_from: {{left: t{p}-{a}, right: t{p}-{b}}}\n",
                    p = l - 1
                ));
            }
        }
    }
    y.push_str("variables:\n  - {name: target, required: true}\n");
    y
}

fn deps(root: &Path) -> LoopDeps {
    let script = Script::from_json(
        r#"{"on_exhausted": "repeat_last", "turns": [{"text": "AAPL closed at 3.44, up 13.7% over 30 bars; RSI 33.3.", "usage": {"input_tokens": 900, "output_tokens": 20, "total_tokens": 920}}]}"#,
    )
    .unwrap();
    let config = LoopConfig {
        stall_timeout: None,
        ..LoopConfig::default()
    };
    LoopDeps::new(
        Arc::new(ScriptedProvider::new(script)),
        Arc::new(Registry::new()),
        config,
        Paths::under(root).runs_dir(),
    )
}

async fn swarm_once(root: &Path) -> Duration {
    let preset = parse(&dag_yaml(), "bench").unwrap();
    let options = SwarmOptions {
        vars: [("target".to_string(), "AAPL".to_string())].into(),
        max_workers: WORKERS,
        ..SwarmOptions::default()
    };
    let start = Instant::now();
    let outcome = vibedesk::swarm::run(
        &preset,
        options,
        deps(root),
        &Paths::under(root),
        EventSink::none(),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let elapsed = start.elapsed();
    assert_eq!(outcome.status, RunStatus::Success, "{:?}", outcome.reason);
    elapsed
}

/// The same 100 loops, 4 at a time, without the scheduler.
async fn loops_once(root: &Path) -> Duration {
    let deps = deps(root);
    let start = Instant::now();
    let mut running = JoinSet::new();
    for n in 0..LAYERS * WIDTH {
        if running.len() == WORKERS {
            running.join_next().await.unwrap().unwrap();
        }
        let deps = deps.clone();
        let dir = root.join("plain").join(n.to_string());
        running.spawn(async move {
            std::fs::create_dir_all(dir.join("workspace")).unwrap();
            let req = RunRequest {
                prompt: format!("Part {n} of AAPL."),
                history: Vec::new(),
                session_id: format!("plain{n}"),
                session_dir: dir.clone(),
                workspace: dir.join("workspace"),
                background: BackgroundQueue::default(),
                compaction: Default::default(),
                notices: Vec::new(),
                plan: Default::default(),
            };
            let outcome = Loop::new(deps)
                .run(req, EventSink::none(), CancellationToken::new())
                .await;
            assert_eq!(outcome.status, RunStatus::Success);
        });
    }
    while let Some(r) = running.join_next().await {
        r.unwrap();
    }
    start.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn measure(base: &Path, label: &str) {
    let mut swarm = Vec::new();
    let mut plain = Vec::new();
    for _ in 0..ROUNDS {
        let dir = tempfile::tempdir_in(base).unwrap();
        swarm.push(swarm_once(dir.path()).await);
        let dir = tempfile::tempdir_in(base).unwrap();
        plain.push(loops_once(dir.path()).await);
    }
    let (s, p) = (median(swarm), median(plain));
    let tasks = (LAYERS * WIDTH) as f64;
    let overhead_ms = (s.as_secs_f64() - p.as_secs_f64()) * 1000.0 / tasks;
    println!(
        "{label}: 100-task DAG, {WORKERS} workers: team run {:.1} ms ({:.2} ms/task); the same loops without the scheduler {:.1} ms; scheduling overhead {overhead_ms:.3} ms/task (target < 2 ms)",
        s.as_secs_f64() * 1000.0,
        s.as_secs_f64() * 1000.0 / tasks,
        p.as_secs_f64() * 1000.0,
    );
}

/// A chain of `n` tasks, each depending on the one before and taking
/// `input_from` the first.
fn chain_yaml(n: usize) -> String {
    let mut y = String::from("name: chain\nagents: [{id: a}]\ntasks:\n  - {id: t0, agent_id: a}\n");
    for i in 1..n {
        y.push_str(&format!(
            "  - {{id: t{i}, agent_id: a, depends_on: [t{}], input_from: {{first: t0}}}}\n",
            i - 1
        ));
    }
    y
}

fn measure_validation() {
    const TASKS: usize = 10_000;
    let yaml = chain_yaml(TASKS);
    let catalog = vibedesk::swarm::Catalog::default();
    let mut parse_best = Duration::MAX;
    let mut check_best = Duration::MAX;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let preset = parse(&yaml, "chain").unwrap();
        parse_best = parse_best.min(t.elapsed());
        let t = Instant::now();
        let inspection = vibedesk::swarm::inspect(&preset, &catalog);
        check_best = check_best.min(t.elapsed());
        assert!(inspection.is_ok() && inspection.layers.len() == TASKS);
    }
    println!(
        "validation of a {TASKS}-task chain: parse {:.1} ms, checks {:.1} ms (best of {ROUNDS})",
        parse_best.as_secs_f64() * 1e3,
        check_best.as_secs_f64() * 1e3
    );
}

fn main() {
    measure_validation();
    if std::env::args().any(|a| a == "validate") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        rt.block_on(measure(shm, "tmpfs, CPU only"));
    }
    let disk = std::env::temp_dir();
    rt.block_on(measure(&disk, "working disk"));
}
