//! Loop overhead per iteration, excluding tool work and model latency: the
//! scripted provider answers at once, the tools return at once, the history
//! holds 200 messages and 10 tools are registered. The per-iteration figure
//! is the slope between a 1-iteration and an N-iteration run, so run set-up
//! (run dir, req.json, state.json) is excluded. Measured on tmpfs (CPU cost)
//! and on the working disk (with the fsyncs the trace and message log do).
//!
//! Also: start-up time of `vibedesk run --help`.
//!
//! `cargo bench --bench loop_overhead`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::agent::{EventSink, Loop, LoopConfig, LoopDeps, RunRequest};
use vibedesk::llm::scripted::{Script, ScriptedProvider};
use vibedesk::model::Message;
use vibedesk::store::Paths;
use vibedesk::tools::builtin::register_defaults;
use vibedesk::tools::{BackgroundQueue, Registry, Tool, ToolContext, ToolResult};

struct Noop(&'static str);

impl Tool for Noop {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        "returns at once"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"symbol": {"type": "string"}}, "required": []})
    }
    fn repeatable(&self) -> bool {
        true
    }
    fn call<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async { Ok(r#"{"status":"ok","rows":3}"#.to_string()) })
    }
}

fn registry() -> Arc<Registry> {
    let mut r = Registry::new();
    let _ = register_defaults(&mut r);
    // Ten in all, whatever the default set holds.
    let names = [
        "quote", "bars", "sma", "rsi", "news", "profile", "peers", "calendar",
    ];
    for name in names.iter().take(10usize.saturating_sub(r.len())) {
        let _ = r.register(Arc::new(Noop(name)));
    }
    assert_eq!(r.len(), 10);
    Arc::new(r)
}

fn history() -> Vec<Message> {
    (0..200)
        .map(|i| {
            let text = format!("message {i}: ")
                + &"the quick brown fox studies AAPL's drawdown. ".repeat(10);
            if i % 2 == 0 {
                Message::user(text)
            } else {
                Message::assistant(text)
            }
        })
        .collect()
}

fn script(tool_turns: usize) -> Script {
    let mut turns: Vec<Value> = (0..tool_turns)
        .map(|i| {
            json!({"text": "Checking.", "tool_calls": [{"id": format!("c{i}"), "name": "quote", "arguments": {"symbol": "AAPL"}}],
                   "usage": {"input_tokens": 1000, "output_tokens": 20, "total_tokens": 1020}})
        })
        .collect();
    turns.push(json!({"text": "Done."}));
    Script::from_json(&json!({"turns": turns}).to_string()).expect("script")
}

/// Seconds for one run of `tool_turns + 1` iterations.
async fn one_run(root: &Path, tool_turns: usize) -> f64 {
    let paths = Paths::under(root);
    let config = LoopConfig {
        max_iterations: tool_turns as u32 + 1,
        stall_timeout: None,
        ..LoopConfig::default()
    };
    let deps = LoopDeps::new(
        Arc::new(ScriptedProvider::new(script(tool_turns))),
        registry(),
        config,
        paths.runs_dir(),
    );
    let mut lp = Loop::new(deps);
    let sid = format!("bench{tool_turns}");
    let req = RunRequest {
        prompt: "benchmark".into(),
        history: history(),
        session_id: sid.clone(),
        session_dir: paths.session_dir(&sid),
        workspace: paths.session_dir(&sid).join("workspace"),
        background: BackgroundQueue::default(),
        compaction: Default::default(),
        notices: Vec::new(),
        plan: Default::default(),
    };
    let started = Instant::now();
    let outcome = lp
        .run(req, EventSink::none(), CancellationToken::new())
        .await;
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(
        outcome.iterations as usize,
        tool_turns + 1,
        "{}",
        outcome.reason
    );
    secs
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

async fn per_iteration(base: &Path, label: &str) {
    const N: usize = 100;
    const REPEATS: usize = 7;
    let mut slopes = Vec::new();
    for rep in 0..REPEATS {
        let short = one_run(&base.join(format!("s{rep}")), 0).await;
        let long = one_run(&base.join(format!("l{rep}")), N).await;
        slopes.push((long - short) / N as f64);
    }
    let ms = median(slopes) * 1000.0;
    println!(
        "loop overhead per iteration ({label}): {ms:.3} ms  (target 1 ms: {:.2}x of target)",
        ms / 1.0
    );
}

fn startup() {
    let bin = env!("CARGO_BIN_EXE_vibedesk");
    let time = |args: &[&str], prog: &str| {
        let mut v = Vec::new();
        for _ in 0..30 {
            let t = Instant::now();
            let out = std::process::Command::new(prog)
                .args(args)
                .output()
                .expect("spawn");
            assert!(out.status.success());
            v.push(t.elapsed().as_secs_f64());
        }
        median(v) * 1000.0
    };
    let help = time(&["run", "--help"], bin);
    let baseline = time(&[], "true");
    println!(
        "startup `vibedesk run --help`: {help:.2} ms  (target 20 ms: {:.2}x of target; spawning /bin/true: {baseline:.2} ms)",
        help / 20.0
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        let dir = tempfile::tempdir_in(shm).expect("tmpfs dir");
        rt.block_on(per_iteration(dir.path(), "tmpfs, CPU only"));
    }
    let dir = tempfile::tempdir_in(std::env::current_dir().unwrap_or_else(|_| ".".into()))
        .expect("disk dir");
    rt.block_on(per_iteration(
        dir.path(),
        "disk, with fsync per trace record",
    ));
    startup();
}
