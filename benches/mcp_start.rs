//! Session start with three MCP servers (issue 19, docs §13.2): two fast
//! ones and one that sleeps 2 s before serving. Servers start in parallel,
//! each within its own timeout, so the three together should take about as
//! long as the slowest alone, not the sum.
//!
//! Two sets, each server timed alone and the three together (median of 3
//! runs, each from spawn to ready with its tools listed):
//! - `light`: a stdio server of the standard library only
//!   (tests/engine/mcp/tiny_stdio_server.py), delays 0, 0 and 2 s, so the
//!   client's own start-up is what is measured;
//! - `sdk`: the reference `mcp-server-time` and a Python SDK server
//!   (tests/engine/mcp/stdio_server.py) with delays 0 and 2 s. Their
//!   imports cost about a second of CPU each, so on a busy machine three at
//!   once compete for the cores and the figure says more about the machine.
//!
//! Needs python3 with `mcp` 2.x and `mcp-server-time` on PATH.
//!
//! `cargo bench --bench mcp_start`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vibedesk::mcp::{McpClients, ServerState, StartOptions, StatusSink};
use vibedesk::mcp::{McpServerConfig, McpTransport};

const SDK_SERVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/engine/mcp/stdio_server.py"
);
const TINY_SERVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/engine/mcp/tiny_stdio_server.py"
);
const RUNS: usize = 3;

fn server(name: &str, command: &str, args: &[&str]) -> McpServerConfig {
    McpServerConfig {
        name: name.into(),
        transport: McpTransport::Stdio {
            command: command.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: BTreeMap::new(),
        },
        startup_timeout: Duration::from_secs(60),
        tool_timeout: Duration::from_secs(60),
        enabled_tools: None,
        disabled_tools: Vec::new(),
    }
}

/// Median wall time from start to every server ready.
async fn median_start(configs: &[McpServerConfig]) -> Duration {
    let quiet: StatusSink = Arc::new(|_| {});
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        let clients = McpClients::start(configs, &StartOptions::default(), &quiet).await;
        let took = t.elapsed();
        for s in clients.statuses() {
            assert_eq!(s.state, ServerState::Ready, "{s:?}");
        }
        clients.shutdown().await;
        times.push(took);
    }
    times.sort();
    times[RUNS / 2]
}

/// Times each server alone, then the three together.
async fn compare(set: &str, servers: &[McpServerConfig]) {
    let mut sum = Duration::ZERO;
    let mut slowest = Duration::ZERO;
    for s in servers {
        let t = median_start(std::slice::from_ref(s)).await;
        println!(
            "{set:<6} {:<24} {:>8.3} s",
            format!("{} alone", s.name),
            t.as_secs_f64()
        );
        sum += t;
        slowest = slowest.max(t);
    }
    let together = median_start(servers).await;
    println!(
        "{set:<6} {:<24} {:>8.3} s",
        "sum of the three alone",
        sum.as_secs_f64()
    );
    println!(
        "{set:<6} {:<24} {:>8.3} s  ({:.2}x the slowest alone, {:.2}x the sum)",
        "all three together",
        together.as_secs_f64(),
        together.as_secs_f64() / slowest.as_secs_f64(),
        together.as_secs_f64() / sum.as_secs_f64()
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        compare(
            "light",
            &[
                server("fast-1", "python3", &[TINY_SERVER, "0"]),
                server("fast-2", "python3", &[TINY_SERVER, "0"]),
                server("slow", "python3", &[TINY_SERVER, "2"]),
            ],
        )
        .await;
        compare(
            "sdk",
            &[
                server("time", "mcp-server-time", &[]),
                server("fast", "python3", &[SDK_SERVER, "0"]),
                server("slow", "python3", &[SDK_SERVER, "2"]),
            ],
        )
        .await;
    });
}
