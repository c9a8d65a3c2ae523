//! Tools that join after the session started: the MCP servers' (docs
//! §13.2), which start in the background so that nothing waits for them
//! that does not need them.
//!
//! The session's [`Registry`] stays immutable; a [`LateTools`] handle beside
//! it fills in as servers become ready, and each run takes the tools it
//! offers from both when it starts ([`LateTools::extend`]). A source still
//! starting is [`Pending`] until its guard drops, so a run that can use the
//! tools may wait for them ([`LateTools::settled`]) and one that cannot
//! (the offline planner) never does.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio::time::Instant;

use super::{Registry, Tool};

/// The shared list and what is still starting.
struct Shared {
    tools: Mutex<Vec<Arc<dyn Tool>>>,
    /// Sources still starting: (id, label, the latest they can take).
    pending: Mutex<Vec<(u64, String, Instant)>>,
    /// How many are pending, to wait on.
    count: watch::Sender<usize>,
    next_id: Mutex<u64>,
}

/// A handle on the late tools, cheap to clone; every clone sees the same
/// list. `Default` is an empty one with nothing pending.
#[derive(Clone)]
pub struct LateTools {
    shared: Arc<Shared>,
    /// Only these names, when set (a team member's own tools, docs §14).
    only: Option<Arc<BTreeSet<String>>>,
}

impl Default for LateTools {
    fn default() -> Self {
        LateTools {
            shared: Arc::new(Shared {
                tools: Mutex::new(Vec::new()),
                pending: Mutex::new(Vec::new()),
                count: watch::Sender::new(0),
                next_id: Mutex::new(0),
            }),
            only: None,
        }
    }
}

impl std::fmt::Debug for LateTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LateTools")
            .field("tools", &self.snapshot().len())
            .field("pending", &self.pending_labels())
            .finish()
    }
}

/// A source still starting; dropping it (ready, failed or abandoned) ends
/// the wait for it, so an aborted start can never hold a run up.
pub struct Pending {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let left = match self.shared.pending.lock() {
            Ok(mut p) => {
                p.retain(|(id, _, _)| *id != self.id);
                p.len()
            }
            Err(_) => 0,
        };
        self.shared.count.send_replace(left);
    }
}

impl LateTools {
    /// Marks a source as starting, named `label` in what a waiting run
    /// says, done at the latest by `deadline`.
    pub fn pending(&self, label: &str, deadline: Instant) -> Pending {
        let id = {
            let mut n = self
                .shared
                .next_id
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            *n += 1;
            *n
        };
        let count = match self.shared.pending.lock() {
            Ok(mut p) => {
                p.push((id, label.to_string(), deadline));
                p.len()
            }
            Err(_) => 0,
        };
        self.shared.count.send_replace(count);
        Pending {
            shared: self.shared.clone(),
            id,
        }
    }

    /// Adds tools (a server that became ready). Add them before dropping
    /// the source's [`Pending`], so a run that waited sees them.
    pub fn add(&self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) {
        if let Ok(mut t) = self.shared.tools.lock() {
            t.extend(tools);
        }
    }

    /// Replaces the whole list (the MCP servers' tools, shared anew under
    /// their cap each time one becomes ready, docs §13.3). Set it before
    /// dropping the source's [`Pending`], so a run that waited sees it.
    pub fn set(&self, tools: Vec<Arc<dyn Tool>>) {
        if let Ok(mut t) = self.shared.tools.lock() {
            *t = tools;
        }
    }

    /// The tools added so far (those of `only`, when restricted).
    pub fn snapshot(&self) -> Vec<Arc<dyn Tool>> {
        let Ok(tools) = self.shared.tools.lock() else {
            return Vec::new();
        };
        tools
            .iter()
            .filter(|t| self.only.as_ref().is_none_or(|o| o.contains(t.name())))
            .cloned()
            .collect()
    }

    /// The labels of the sources still starting, and the latest any of
    /// them can take from now.
    pub fn pending_labels(&self) -> (Vec<String>, std::time::Duration) {
        let Ok(p) = self.shared.pending.lock() else {
            return (Vec::new(), std::time::Duration::ZERO);
        };
        let now = Instant::now();
        let longest = p
            .iter()
            .map(|(_, _, d)| d.saturating_duration_since(now))
            .max()
            .unwrap_or_default();
        (p.iter().map(|(_, l, _)| l.clone()).collect(), longest)
    }

    /// Whether any source is still starting.
    pub fn is_pending(&self) -> bool {
        *self.shared.count.borrow() > 0
    }

    /// Resolves once no source is starting (at once when none is). Each
    /// source bounds its own start, so this ends by the latest deadline.
    pub async fn settled(&self) {
        let mut rx = self.shared.count.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// The same list, restricted to `names`.
    pub fn restricted<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> LateTools {
        LateTools {
            shared: self.shared.clone(),
            only: Some(Arc::new(names.into_iter().map(String::from).collect())),
        }
    }

    /// `base` with the late tools added: what a run offers. A late tool
    /// whose name is taken keeps the registry's (and is logged).
    pub fn extend(&self, base: &Arc<Registry>) -> Arc<Registry> {
        let late = self.snapshot();
        if late.is_empty() {
            return base.clone();
        }
        let mut registry = Registry::clone(base);
        for tool in late {
            if let Err(e) = registry.register(tool) {
                tracing::warn!("late tool not offered: {e}");
            }
        }
        Arc::new(registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::builtin::default_registry;

    #[tokio::test]
    async fn tools_join_and_the_wait_ends_when_the_last_source_does() {
        let late = LateTools::default();
        late.settled().await;
        let base = Arc::new(default_registry());
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        let a = late.pending("a", deadline);
        let b = late.pending("b", deadline);
        assert!(late.is_pending());
        assert_eq!(late.pending_labels().0, vec!["a", "b"]);
        let extra = default_registry();
        let tool = extra.iter().next().unwrap().clone();
        // A name already in the registry keeps the registry's.
        late.add([tool.clone()]);
        assert_eq!(late.extend(&base).len(), base.len());
        drop(a);
        assert!(late.is_pending());
        let waiter = {
            let late = late.clone();
            tokio::spawn(async move { late.settled().await })
        };
        drop(b);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(!late.is_pending());
        let only = late.restricted(["none_such"]);
        assert!(only.snapshot().is_empty());
        assert_eq!(late.restricted([tool.name()]).snapshot().len(), 1);
    }
}
