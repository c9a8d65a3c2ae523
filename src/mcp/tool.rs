//! An MCP server's tool as a registry tool (docs §13.3): `mcp__<server>__<tool>`
//! with the server's JSON schema, read-only iff the server says
//! `readOnlyHint: true`, its per-tool deadline, progress notifications as
//! `tool_progress`, and its result as text the scheduler finalises,
//! truncates and redacts like a built-in's.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CancelledNotification, CancelledNotificationParam, ClientNotification,
    ClientRequest, Request, RequestId, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use serde_json::{Map, Value, json};

use super::client_link::{ServerLink, ToolSummary, oversized_arrived};
use crate::tools::registry::InvalidArguments;
use crate::tools::{Tool, ToolContext, ToolError, ToolReply, ToolResult};

/// Model APIs accept function names of at most 64 characters.
const MAX_NAME: usize = 64;

/// `mcp__<server>__<tool>`, with any character a model API would refuse
/// replaced by `_`; a name over 64 characters is cut and tagged with a
/// hash of the whole name, so two long names sharing their first 55
/// characters stay apart (as codex's `qualify_tools` does).
pub fn registry_name(server: &str, tool: &str) -> String {
    let clean = sanitised(server, tool);
    if clean.len() <= MAX_NAME {
        clean
    } else {
        tagged(&clean, server, tool)
    }
}

/// The name a tool takes when its [`registry_name`] is already offered by
/// another (two raw names that sanitise alike, `a.b` and `a_b`): the
/// sanitised name cut to leave room for `_` and 8 hex digits of a hash of
/// the raw server and tool names.
pub fn qualified_name(server: &str, tool: &str) -> String {
    tagged(&sanitised(server, tool), server, tool)
}

fn sanitised(server: &str, tool: &str) -> String {
    format!("mcp__{server}__{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn tagged(clean: &str, server: &str, tool: &str) -> String {
    let tag = format!("_{:08x}", name_hash(server, tool));
    // `clean` is ASCII, so byte and character counts agree.
    let mut out: String = clean.chars().take(MAX_NAME - tag.len()).collect();
    out.push_str(&tag);
    out
}

/// 32 bits of FNV-1a over `server NUL tool`: stable across runs and
/// builds, so a tool keeps its name from one session to the next.
fn name_hash(server: &str, tool: &str) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in server.bytes().chain([0]).chain(tool.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h ^ (h >> 32)) as u32
}

#[derive(Clone)]
pub struct McpTool {
    link: Arc<ServerLink>,
    name: String,
    remote_name: String,
    description: String,
    schema: Value,
    readonly: bool,
    timeout: Duration,
}

impl McpTool {
    pub fn new(link: Arc<ServerLink>, tool: &rmcp::model::Tool, timeout: Duration) -> Self {
        let mut schema = Value::Object(tool.input_schema.as_ref().clone());
        // Model APIs want an object schema with `properties`, which a tool
        // without arguments may leave out.
        if let Some(obj) = schema.as_object_mut() {
            obj.entry("type").or_insert_with(|| json!("object"));
            obj.entry("properties").or_insert_with(|| json!({}));
        }
        let description = tool
            .description
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(String::from)
            .unwrap_or_else(|| format!("{} (MCP server {})", tool.name, link.name));
        McpTool {
            name: registry_name(&link.name, &tool.name),
            remote_name: tool.name.to_string(),
            description,
            schema,
            readonly: tool
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false),
            timeout,
            link,
        }
    }

    /// This tool under its [`qualified_name`], for when its plain name is
    /// taken.
    pub fn qualified(&self) -> McpTool {
        McpTool {
            name: qualified_name(&self.link.name, &self.remote_name),
            ..self.clone()
        }
    }

    pub fn summary(&self) -> ToolSummary {
        ToolSummary {
            name: self.name.clone(),
            remote_name: self.remote_name.clone(),
            description: self.description.clone(),
            readonly: self.readonly,
        }
    }

    fn server_gone(&self, why: &str) -> ToolError {
        let reason = self
            .link
            .exit_reason()
            .unwrap_or_else(|| "the connection closed".into());
        ToolError::failed(
            "mcp_server_exited",
            format!(
                "the MCP server '{}' {why} ({reason}); its tools are unavailable for the rest of this session",
                self.link.name
            ),
        )
    }

    /// Sends the call and waits for its answer, relaying progress. Dropped
    /// early (deadline, cancel), it tells the server to stop.
    async fn request(&self, args: Value, ctx: &ToolContext) -> Result<ToolReply, ToolError> {
        if self.link.exit_reason().is_some() {
            return Err(self.server_gone("is no longer running"));
        }
        let arguments = match args {
            Value::Object(m) => m,
            Value::Null => Map::new(),
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "arguments must be a JSON object, got {other}"
                )));
            }
        };
        let params = CallToolRequestParams::new(self.remote_name.clone()).with_arguments(arguments);
        let request = ClientRequest::CallToolRequest(Request::new(params));
        let handle = self
            .link
            .peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| self.call_error(e))?;
        let mut guard = CancelOnDrop {
            peer: self.link.peer.clone(),
            id: Some(handle.id.clone()),
        };
        // Notifications sent before this subscription are not relayed: the
        // token is known only once the request is on its way.
        let mut progress = self.link.progress.subscribe(handle.progress_token.clone());
        let response = handle.await_response();
        tokio::pin!(response);
        // A read-only call is stopped by the scheduler at the deadline (the
        // future is dropped, so the guard cancels); a write call is not
        // (docs §2.4), so the deadline is enforced here for those.
        let own_deadline = (!self.readonly).then(|| tokio::time::Instant::now() + self.timeout);
        let far = tokio::time::Instant::now() + Duration::from_secs(86_400 * 365);
        let mut oversized = self.link.oversized_watch();
        let result = loop {
            tokio::select! {
                biased;
                r = &mut response => break r,
                Ok(()) = progress.rx.changed() => progress.relay_latest(),
                _ = ctx.cancel.cancelled() => {
                    return Err(ToolError::failed("cancelled", "the call was cancelled; the MCP server was told to stop"));
                }
                _ = oversized_arrived(&mut oversized) => {
                    return Err(self.too_large());
                }
                _ = tokio::time::sleep_until(own_deadline.unwrap_or(far)), if own_deadline.is_some() => {
                    return Ok(ToolReply { text: timeout_json(&self.name, self.timeout), output: None });
                }
            }
        };
        guard.id = None;
        progress.settle().await;
        self.reply_of(result)
    }

    /// The server's answer to the call as the reply the model reads.
    fn reply_of(&self, result: Result<ServerResult, ServiceError>) -> Result<ToolReply, ToolError> {
        match result.map_err(|e| self.call_error(e))? {
            ServerResult::CallToolResult(r) => {
                // Over HTTP an answer may arrive larger than one message
                // may be (see `HTTP_READ_BYTES`): refused the same way.
                let bytes = serde_json::to_vec(&r).unwrap_or_default();
                if bytes.len() > super::stdio::MAX_MESSAGE_BYTES {
                    return Err(self.too_large());
                }
                let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                result_reply(&value)
            }
            other => Err(ToolError::failed(
                "mcp_protocol_error",
                format!(
                    "the MCP server '{}' answered the call with something other than a tool result: {other:?}",
                    self.link.name
                ),
            )),
        }
    }

    /// The answer was over the limit on one message (docs §13.3).
    fn too_large(&self) -> ToolError {
        ToolError::failed(
            super::stdio::RESULT_TOO_LARGE,
            format!(
                "the MCP server '{}' answered with more than {} MiB, the most one MCP message may be, so the answer was dropped; ask for less (a narrower query, fewer rows or a smaller page)",
                self.link.name,
                super::stdio::MAX_MESSAGE_BYTES / (1024 * 1024)
            ),
        )
    }

    fn call_error(&self, e: ServiceError) -> ToolError {
        match e {
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                self.link
                    .connection_lost(&format!("the connection failed during a call: {e}"));
                self.server_gone("went away during the call")
            }
            ServiceError::McpError(data)
                if data
                    .data
                    .as_ref()
                    .and_then(|d| d.get("vibedesk_error"))
                    .is_some_and(|e| e == super::stdio::RESULT_TOO_LARGE) =>
            {
                self.too_large()
            }
            ServiceError::McpError(data) => ToolError::failed(
                "mcp_error",
                format!(
                    "the MCP server '{}' refused the call: {}",
                    self.link.name, data.message
                ),
            ),
            other => ToolError::failed(
                "mcp_error",
                format!(
                    "the call to MCP server '{}' failed: {other}",
                    self.link.name
                ),
            ),
        }
    }
}

/// The scheduler's own timeout result (docs §2.4), for write calls that
/// this tool stops itself.
fn timeout_json(tool: &str, limit: Duration) -> String {
    let secs = limit.as_secs_f64();
    json!({
        "status": "error", "error_code": "tool_timeout", "tool": tool,
        "timeout_seconds": secs,
        "message": format!("'{tool}' did not finish within {secs}s and was stopped (the MCP server was told to cancel); narrow the request or try again"),
    })
    .to_string()
}

/// Sends `notifications/cancelled` for a request still in flight when the
/// call's future is dropped (deadline, cancel). rmcp's own `call_tool` does
/// the same, but hides the progress token this tool needs.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        rt.spawn(async move {
            let note = CancelledNotification::new(CancelledNotificationParam::new(
                Some(id),
                Some("the caller stopped waiting (timeout or cancel)".into()),
            ));
            let _ = peer
                .send_notification(ClientNotification::CancelledNotification(note))
                .await;
        });
    }
}

/// A `CallToolResult` (as JSON: the wire shape) as the text the model
/// sees: text blocks joined, media as a note of their size, structured
/// content when nothing else was said; `isError` is a tool error.
pub fn result_reply(result: &Value) -> Result<ToolReply, ToolError> {
    let mut parts: Vec<String> = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        parts.push(block_text(block));
    }
    let structured = result
        .get("structuredContent")
        .filter(|v| !v.is_null())
        .cloned();
    let mut text = parts.join("\n");
    if text.is_empty()
        && let Some(s) = &structured
    {
        text = s.to_string();
    }
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let message = if text.is_empty() {
            "the tool reported an error without a message".to_string()
        } else {
            text
        };
        return Err(ToolError::failed("mcp_tool_error", message));
    }
    Ok(ToolReply {
        text,
        output: structured,
    })
}

fn block_text(block: &Value) -> String {
    let str_of = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or("");
    match str_of("type") {
        "text" => str_of("text").to_string(),
        kind @ ("image" | "audio") => format!(
            "[{kind}: {}, {} bytes]",
            str_of("mimeType"),
            base64_len(str_of("data"))
        ),
        "resource" => {
            let r = block.get("resource").cloned().unwrap_or(Value::Null);
            let uri = r.get("uri").and_then(Value::as_str).unwrap_or("");
            match (
                r.get("text").and_then(Value::as_str),
                r.get("blob").and_then(Value::as_str),
            ) {
                (Some(t), _) => t.to_string(),
                (None, Some(b)) => format!("[resource: {uri}, {} bytes]", base64_len(b)),
                (None, None) => format!("[resource: {uri}]"),
            }
        }
        "resource_link" => format!("[resource link: {}]", str_of("uri")),
        other => format!("[{other} content]"),
    }
}

/// Decoded size of base64 text, without decoding it.
fn base64_len(data: &str) -> usize {
    let trimmed = data.trim_end();
    let pad = trimmed.chars().rev().take_while(|c| *c == '=').count();
    (trimmed.len() / 4 * 3
        + match trimmed.len() % 4 {
            2 => 1,
            3 => 2,
            _ => 0,
        })
    .saturating_sub(pad)
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.schema.clone()
    }

    fn readonly(&self) -> bool {
        self.readonly
    }

    /// Against the whole schema, nested objects and `enum`s included: a
    /// call the server would refuse never reaches it (docs §13.3).
    fn check_arguments(&self, args: &Value) -> Result<(), InvalidArguments> {
        super::schema::check_arguments(&self.schema, args)
            .map_err(|e| InvalidArguments::Own(Box::new(e)))
    }

    /// The same arguments may answer differently later (time, live data).
    fn repeatable(&self) -> bool {
        true
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move { self.request(args, ctx).await.map(|r| r.text) })
    }

    fn call_with_output<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolReply, ToolError>> {
        Box::pin(self.request(args, ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_sanitised_and_capped() {
        assert_eq!(
            registry_name("time", "get_current_time"),
            "mcp__time__get_current_time"
        );
        assert_eq!(registry_name("fs", "read.file"), "mcp__fs__read_file");
        let long = registry_name("s", &"x".repeat(100));
        assert_eq!(long.len(), 64);
        // Two long names alike in their first 64 characters stay apart.
        let other = registry_name("s", &format!("{}y", "x".repeat(100)));
        assert_eq!(other.len(), 64);
        assert_ne!(long, other);
        assert!(long.starts_with(&"mcp__s__xxxx".to_string()));
        // Names that sanitise alike get apart once qualified.
        assert_eq!(registry_name("a.b", "t"), registry_name("a_b", "t"));
        assert_ne!(qualified_name("a.b", "t"), qualified_name("a_b", "t"));
        assert!(qualified_name("a.b", "t").starts_with("mcp__a_b__t_"));
        assert_eq!(qualified_name("a.b", "t"), qualified_name("a.b", "t"));
    }

    #[test]
    fn results_become_text_notes_or_errors() {
        let r = result_reply(&json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "aGVsbG8="},
            {"type": "resource_link", "uri": "file:///x"}
        ]}))
        .unwrap();
        assert_eq!(
            r.text,
            "hello\n[image: image/png, 5 bytes]\n[resource link: file:///x]"
        );
        let s = result_reply(&json!({"content": [], "structuredContent": {"a": 1}})).unwrap();
        assert_eq!(s.text, r#"{"a":1}"#);
        assert_eq!(s.output, Some(json!({"a": 1})));
        let e = result_reply(
            &json!({"content": [{"type": "text", "text": "bad input"}], "isError": true}),
        )
        .unwrap_err();
        assert_eq!(e.code(), "mcp_tool_error");
        assert_eq!(e.to_string(), "bad input");
        assert_eq!(base64_len("aGk="), 2);
        assert_eq!(base64_len("aGVsbG8gd29ybGQ="), 11);
    }
}
