//! The compaction hook (spec §3). At the top of every iteration the loop
//! estimates tokens, emits a `watermark` event, and hands the message list to
//! a [`Compactor`].

use futures_util::future::BoxFuture;

use super::events::EventSink;
use crate::model::Message;

/// What a compactor knows about the moment it is called.
pub struct CompactionContext<'a> {
    pub iter: u64,
    /// The estimate the watermark event just reported.
    pub tokens: u64,
    /// Gates of L1, L2 and L3 in tokens.
    pub gates: [u64; 3],
    pub events: &'a EventSink,
}

pub trait Compactor: Send + Sync {
    /// May rewrite `messages` in place; must leave a list a provider accepts
    /// (system first, tool results paired with their calls).
    fn compact<'a>(
        &'a self,
        messages: &'a mut Vec<Message>,
        ctx: &'a CompactionContext<'a>,
    ) -> BoxFuture<'a, ()>;
}

/// Leaves the message list unchanged. This is the engine's default until the
/// five compaction layers land (microcompact, collapse, auto-compact, the
/// `compact` tool and iterative summaries); the watermark is still reported
/// every iteration so a UI can show how full the context is.
pub struct PassThrough;

impl Compactor for PassThrough {
    fn compact<'a>(
        &'a self,
        _messages: &'a mut Vec<Message>,
        _ctx: &'a CompactionContext<'a>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}
