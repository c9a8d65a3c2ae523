//! Who a tool call is made for, when it is not the user's own agent (docs
//! §13.4): `vibedesk mcp serve` runs each call inside [`scope`] with
//! `mcp:<client name>`, and the memory tools read [`current`] to record the
//! source of what a client writes and to keep the user's own memories out
//! of its reach. Outside a scope (the agent, the CLI) there is no origin.

use std::future::Future;

tokio::task_local! {
    static ORIGIN: String;
}

/// Runs `call` with `origin` as the caller (e.g. `mcp:claude-code`).
pub async fn scope<F: Future>(origin: String, call: F) -> F::Output {
    ORIGIN.scope(origin, call).await
}

/// The caller of the tool call being run, when it is not the user's agent.
pub fn current() -> Option<String> {
    ORIGIN.try_with(Clone::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_origin_is_seen_only_inside_its_scope() {
        assert_eq!(current(), None);
        let inside = scope("mcp:probe".into(), async { current() }).await;
        assert_eq!(inside.as_deref(), Some("mcp:probe"));
        assert_eq!(current(), None);
    }
}
