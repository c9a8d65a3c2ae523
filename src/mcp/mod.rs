//! The Model Context Protocol both ways (docs §13), through the official
//! Rust SDK `rmcp`: the client, whose configured servers' tools join the
//! agent's registry like built-ins, and the server (`vibedesk mcp serve`),
//! which offers vibedesk's research and memory tools to other agents.

pub mod client;
pub mod client_cli;
pub mod client_link;
pub mod config;
pub mod offer;
pub mod schema;
pub mod server;
pub mod server_http;
pub mod spawn;
pub mod stdio;
pub mod tool;

pub use client::{McpClients, ServerState, ServerStatus, StartOptions, StatusSink};
pub use config::{McpConfigError, McpServerConfig};
