//! What the MCP tools share with the client (docs §13.2–§13.3): one
//! server's connection, its progress routes and whether it is gone, and
//! the summary of a tool that listings print.

use std::sync::Mutex;

use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::{Peer, RoleClient};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

/// What a tool needs of its server: the connection, the progress routes
/// and, once it died, why.
pub struct ServerLink {
    pub name: String,
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) progress: ProgressDispatcher,
    exited: Mutex<Option<String>>,
    /// Fired by a call that found the server gone: over HTTP nothing else
    /// notices a dead server, since the transport waits to reconnect.
    lost: CancellationToken,
}

impl ServerLink {
    pub(crate) fn new(name: &str, peer: Peer<RoleClient>, progress: ProgressDispatcher) -> Self {
        ServerLink {
            name: name.to_string(),
            peer,
            progress,
            exited: Mutex::new(None),
            lost: CancellationToken::new(),
        }
    }

    /// Fires when a call found the connection gone.
    pub(crate) fn lost_token(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Why the server is gone, when it is.
    pub fn exit_reason(&self) -> Option<String> {
        self.exited.lock().ok().and_then(|g| g.clone())
    }

    pub(crate) fn mark_exited(&self, reason: &str) {
        if let Ok(mut g) = self.exited.lock()
            && g.is_none()
        {
            *g = Some(reason.to_string());
        }
    }

    /// A call lost the connection: the server counts as exited, and its
    /// connection is closed (the monitor reports it).
    pub(crate) fn connection_lost(&self, reason: &str) {
        self.mark_exited(reason);
        self.lost.cancel();
    }
}

/// One tool of a server, for listings.
#[derive(Clone, Debug, Serialize)]
pub struct ToolSummary {
    /// The registry name, `mcp__<server>__<tool>`.
    pub name: String,
    /// The server's own name for it.
    pub remote_name: String,
    pub description: String,
    pub readonly: bool,
}
