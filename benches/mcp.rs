//! The cost MCP adds to one tool call (docs §13.4): `indicators` (SMA(20)
//! on the embedded AAPL history, a cheap read-only tool) called through
//! `vibedesk mcp serve` over stdio by an `rmcp` client, against the same
//! built-in (`technical_indicator`) called in-process with `Tool::call`.
//! The added overhead per call is the difference of the medians (target:
//! under 1 ms).
//!
//! `cargo bench --bench mcp`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::research::data::DataConfig;
use vibedesk::tools::builtin::market::register_market_tools_with;
use vibedesk::tools::{BackgroundQueue, Registry, ToolContext};

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");
const WARMUP: usize = 30;
const CALLS: usize = 500;

fn args() -> Value {
    json!({"symbol": "AAPL", "indicator": "sma", "params": {"window": 20},
           "tail": 10, "source": "embedded"})
}

struct Stats {
    median: Duration,
    mean: Duration,
    p90: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let total: Duration = samples.iter().sum();
    Stats {
        median: samples[samples.len() / 2],
        mean: total / samples.len() as u32,
        p90: samples[samples.len() * 9 / 10],
    }
}

fn print(label: &str, s: &Stats) {
    println!(
        "{label:<34} median {:>8.1} µs  mean {:>8.1} µs  p90 {:>8.1} µs",
        s.median.as_secs_f64() * 1e6,
        s.mean.as_secs_f64() * 1e6,
        s.p90.as_secs_f64() * 1e6
    );
}

async fn in_process(dir: &std::path::Path) -> Stats {
    let mut registry = Registry::new();
    register_market_tools_with(&mut registry, DataConfig::offline()).unwrap();
    let tool = registry.get("technical_indicator").unwrap().clone();
    let ctx = ToolContext {
        call_id: "bench".into(),
        session_id: "bench".into(),
        run_dir: dir.to_path_buf(),
        workspace: dir.to_path_buf(),
        cancel: CancellationToken::new(),
        background: BackgroundQueue::default(),
    };
    let mut samples = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let started = Instant::now();
        let reply = tool.call_with_output(args(), &ctx).await.unwrap();
        let elapsed = started.elapsed();
        assert!(reply.text.contains("\"status\":\"ok\""), "{}", reply.text);
        if i >= WARMUP {
            samples.push(elapsed);
        }
    }
    stats(samples)
}

async fn over_stdio(home: &std::path::Path) -> Stats {
    let mut command = tokio::process::Command::new(BIN);
    command
        .env("VIBEDESK_HOME", home)
        .env("HOME", home)
        .current_dir(home)
        .args(["mcp", "serve"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true);
    // The server's pipes as the transport, as `mcp::client` does for stdio
    // servers (no rmcp child-process feature needed).
    let mut child = command.spawn().unwrap();
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = ().serve((stdout, stdin)).await.unwrap();
    let Value::Object(arguments) = args() else {
        unreachable!()
    };
    let mut samples = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let params = CallToolRequestParams::new("indicators").with_arguments(arguments.clone());
        let started = Instant::now();
        let result = client.call_tool(params).await.unwrap();
        let elapsed = started.elapsed();
        assert_eq!(result.is_error, Some(false), "{result:?}");
        assert!(result.structured_content.is_some());
        if i >= WARMUP {
            samples.push(elapsed);
        }
    }
    let _ = client.cancel().await;
    stats(samples)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    runtime.block_on(async {
        println!("one `indicators` call (SMA(20), embedded AAPL, 3,270 rows), {CALLS} calls each");
        let local = in_process(dir.path()).await;
        print("built-in, in-process", &local);
        let remote = over_stdio(dir.path()).await;
        print("MCP over stdio (rmcp client)", &remote);
        let added = remote.median.as_secs_f64() - local.median.as_secs_f64();
        println!(
            "added per call (median difference): {:.1} µs (target < 1000 µs)",
            added * 1e6
        );
    });
}
