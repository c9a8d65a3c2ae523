#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod agent_loop;
mod architecture;
mod backtest;
mod cli;
mod compaction;
mod docs;
mod loop_http;
mod malformed;
mod mcp_client;
mod mcp_hardening;
mod mcp_serve_guard;
mod mcp_server;
mod memory;
mod offline_market;
mod pairs;
mod planner;
mod provider;
mod research_data;
mod sandbox;
mod secrets_limits;
mod status;
mod support;
mod swarm;
mod teams;
mod tui;
mod warmup;
