//! What the MCP tools share with the client (docs §13.2–§13.3): one
//! server's connection, its progress routes and whether it is gone, and
//! the summary of a tool that listings print.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
            seen: false,
        }
    }
}

/// One call's progress: the latest notification, as it changes.
pub(crate) struct ProgressRoute {
    routes: ProgressRoutes,
    token: ProgressToken,
    pub(crate) rx: watch::Receiver<Option<ProgressNotificationParam>>,
    /// Whether any notification came for the call.
    seen: bool,
}

/// After a call's result, how long progress may keep arriving before the
/// call counts as quiet, and the most that is waited in all.
const SETTLE_QUIET: Duration = Duration::from_millis(25);
const SETTLE_MOST: Duration = Duration::from_millis(250);

impl ProgressRoute {
    /// Relays the latest notification as the call's `tool_progress` (stage
    /// `mcp`), coalesced with the rest by the call's handle (docs §2.9).
    pub(crate) fn relay_latest(&mut self) {
        let latest = self.rx.borrow_and_update().clone();
        if let Some(p) = latest {
            self.seen = true;
            crate::tools::progress::emit(
                "mcp",
                Some(p.progress),
                p.total,
                p.message.as_deref().unwrap_or(""),
            );
        }
    }

    /// After the result: the SDK hands each notification to a task of its
    /// own, so the last ones, sent just before the result, may still be on
    /// their way. A call that reported progress waits until none has come
    /// for [`SETTLE_QUIET`] (at most [`SETTLE_MOST`]) and relays the
    /// latest; one that never did only lets those tasks run.
    pub(crate) async fn settle(&mut self) {
        if !self.seen && !self.rx.has_changed().unwrap_or(false) {
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
        }
        if self.rx.has_changed().unwrap_or(false) {
            self.relay_latest();
        }
        if !self.seen {
            return;
        }
        let until = tokio::time::Instant::now() + SETTLE_MOST;
        while tokio::time::Instant::now() < until {
            match tokio::time::timeout(SETTLE_QUIET, self.rx.changed()).await {
                Ok(Ok(())) => self.relay_latest(),
                Ok(Err(_)) | Err(_) => return,
            }
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
