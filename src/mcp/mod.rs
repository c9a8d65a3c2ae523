//! The Model Context Protocol both ways (docs §13), through the official
//! Rust SDK `rmcp`: the client, whose configured servers' tools join the
//! agent's registry like built-ins, and the server (`vibedesk mcp serve`),
//! which offers vibedesk's research and memory tools to other agents.

mod client;
mod client_cli;
mod client_link;
mod config;
mod offer;
mod schema;
mod server;
mod server_http;
mod spawn;
mod stdio;
mod tool;

// The façade: the room's submodules are private; what other rooms,
// the tests and the benches use is re-exported here.
pub use client::{McpClients, ServerState, ServerStatus, StartOptions, StatusSink};
pub use client_cli::{probe, render_list, render_tools};
pub use config::{
    DEFAULT_MAX_TOOLS, McpConfigError, McpServerConfig, McpSettings, McpTransport, from_table,
};
pub use server::{HEAVY, ServeOptions, ServePolicy, VibedeskServer, default_heavy_calls};
pub use server_http::{
    Auth, ConnectionLimits, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CLIENT_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE, HttpOptions, Listen,
    SessionLimits, TOKEN_FILE, serve_http, stored_token,
};
pub use stdio::STDERR_LINES_PER_SECOND;
