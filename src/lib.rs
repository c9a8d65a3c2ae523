//! vibedesk: a terminal research workstation with an embedded LLM research
//! agent. The engine (this library) knows nothing of the terminal; UIs consume
//! [`agent::events::AgentEvent`] and drive [`session::Session`].
//!
//! Comments cite `docs §N.M`: the numbered sections of the behaviour
//! contract in `docs/` (the index is `docs/README.md`).

pub mod agent;
pub mod cli;
pub mod config;
pub mod fsio;
pub mod llm;
pub mod logfile;
pub mod mcp;
pub mod memory;
pub mod model;
pub mod planner;
pub mod process;
pub mod report;
pub mod research;
pub mod sandbox;
pub mod secrets;
pub mod session;
pub mod store;
pub mod swarm;
pub mod sweep;
pub mod text;
pub mod tools;
pub mod tui;
