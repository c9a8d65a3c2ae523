//! What the MCP tools share with the client (docs §13.2–§13.3): one
//! server's connection, its progress routes and whether it is gone, and
//! the summary of a tool that listings print.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleClient};
use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What a tool needs of its server: the connection, the progress routes
/// and, once it died, why.
pub struct ServerLink {
    pub name: String,
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) progress: ProgressRoutes,
    exited: Mutex<Option<String>>,
    /// Fired by a call that found the server gone: over HTTP nothing else
    /// notices a dead server, since the transport waits to reconnect.
    lost: CancellationToken,
    /// Counts over-large answers from a stdio server whose request could
    /// not be told (see [`super::stdio`]): they fail every call in flight.
    oversized: Option<watch::Receiver<u64>>,
}

impl ServerLink {
    pub(crate) fn new(name: &str, peer: Peer<RoleClient>, progress: ProgressRoutes) -> Self {
        ServerLink {
            name: name.to_string(),
            peer,
            progress,
            exited: Mutex::new(None),
            lost: CancellationToken::new(),
            oversized: None,
        }
    }

    /// With the count of a stdio server's unmatched over-large answers.
    pub(crate) fn with_oversized(mut self, count: watch::Receiver<u64>) -> Self {
        self.oversized = Some(count);
        self
    }

    /// A call's view of the over-large answers whose request could not be
    /// told, from now on; `None` for an HTTP server.
    pub(crate) fn oversized_watch(&self) -> Option<watch::Receiver<u64>> {
        let mut rx = self.oversized.clone()?;
        rx.borrow_and_update();
        Some(rx)
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

/// Where a server's progress notifications go: to the call that owns the
/// token, as a slot holding only the latest (docs §13.3). rmcp's own
/// dispatcher queues each notification in a task of its own that waits for
/// room in a 16-deep channel, so a server reporting in a loop piled up
/// tasks and delivered them in no particular order; here a notification
/// costs a lock and a replace, and an older one (a lower `progress`, which
/// must increase) never replaces a newer one.
#[derive(Clone, Default)]
pub(crate) struct ProgressRoutes {
    routes: Arc<Mutex<HashMap<ProgressToken, watch::Sender<Option<ProgressNotificationParam>>>>>,
}

impl ProgressRoutes {
    /// Keeps `note` for its call, unless the call already has a later one.
    pub(crate) fn route(&self, note: ProgressNotificationParam) {
        let Ok(routes) = self.routes.lock() else {
            return;
        };
        if let Some(slot) = routes.get(&note.progress_token) {
            slot.send_if_modified(|held| {
                let newer = held.as_ref().is_none_or(|h| note.progress >= h.progress);
                if newer {
                    *held = Some(note);
                }
                newer
            });
        }
    }

    /// The slot of the call with `token`, until the returned route drops.
    pub(crate) fn subscribe(&self, token: ProgressToken) -> ProgressRoute {
        let (tx, rx) = watch::channel(None);
        if let Ok(mut routes) = self.routes.lock() {
            routes.insert(token.clone(), tx);
        }
        ProgressRoute {
            routes: self.clone(),
            token,
            rx,
        }
    }
}

/// One call's progress: the latest notification, as it changes.
pub(crate) struct ProgressRoute {
    routes: ProgressRoutes,
    token: ProgressToken,
    pub(crate) rx: watch::Receiver<Option<ProgressNotificationParam>>,
}

impl ProgressRoute {
    /// The latest notification not yet taken, if any.
    pub(crate) fn take_new(&mut self) -> Option<ProgressNotificationParam> {
        if self.rx.has_changed().unwrap_or(false) {
            self.rx.borrow_and_update().clone()
        } else {
            None
        }
    }
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        if let Ok(mut routes) = self.routes.routes.lock() {
            routes.remove(&self.token);
        }
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

/// Resolves when `watch` (from [`ServerLink::oversized_watch`]) counts
/// another over-large answer; never without one.
pub(crate) async fn oversized_arrived(watch: &mut Option<watch::Receiver<u64>>) {
    let arrived = match watch {
        Some(rx) => rx.changed().await.is_ok(),
        None => false,
    };
    if !arrived {
        std::future::pending::<()>().await;
    }
}
