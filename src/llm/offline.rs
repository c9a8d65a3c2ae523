//! The `offline` provider: the offline planner ([`crate::planner`]) behind
//! the [`Provider`] trait. It speaks the same chunk stream as a model, so the
//! loop, the scheduler, the trace and the UI treat it like any other
//! provider; what it plans is the planner's.

use futures_util::future::BoxFuture;
use futures_util::stream;

use super::{ChatRequest, ChunkStream, FINISH_UNSUPPORTED, LlmError, Provider, StreamChunk};
use crate::planner::{Plan, plan_request};

pub const OFFLINE: &str = "offline";

/// The offline planner as a provider.
#[derive(Default)]
pub struct OfflineProvider {
    /// The tools it may call (the manifest's planner tools, docs §2.1);
    /// `None`: any it is offered.
    usable: Option<Vec<String>>,
}

impl OfflineProvider {
    pub fn new() -> Self {
        OfflineProvider::default()
    }

    /// A planner that calls only `tools` (of those a request offers).
    pub fn with_tools(tools: Vec<String>) -> Self {
        OfflineProvider {
            usable: Some(tools),
        }
    }
}

impl Provider for OfflineProvider {
    fn name(&self) -> &str {
        OFFLINE
    }

    fn model(&self) -> &str {
        "offline-planner"
    }

    /// The planner calls built-ins only, never an MCP server's tools.
    fn calls_offered_tools(&self) -> bool {
        false
    }

    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChunkStream, LlmError>> {
        let offered: Vec<String> = request
            .tools
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| self.usable.as_ref().is_none_or(|u| u.contains(n)))
            .collect();
        let plan = plan_request(&request.messages, &offered, request.user_request.as_deref());
        let chunks: Vec<Result<StreamChunk, LlmError>> = match plan {
            Plan::Call(call) => vec![
                Ok(StreamChunk::ToolCallDelta {
                    index: 0,
                    id: Some(format!("offline_{}", request.messages.len())),
                    name: Some(call.name),
                    arguments: call.args.to_string(),
                }),
                Ok(StreamChunk::Finish("tool_calls".into())),
            ],
            Plan::Calls(calls) => {
                let turn = request.messages.len();
                let mut v: Vec<Result<StreamChunk, LlmError>> = calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, call)| {
                        Ok(StreamChunk::ToolCallDelta {
                            index: i,
                            id: Some(format!("offline_{turn}_{i}")),
                            name: Some(call.name),
                            arguments: call.args.to_string(),
                        })
                    })
                    .collect();
                v.push(Ok(StreamChunk::Finish("tool_calls".into())));
                v
            }
            Plan::Answer(text) => text_then(&text, "stop"),
            // The text is the answer; the finish reason makes the run's
            // status `unsupported` (docs §1.4).
            Plan::Unsupported(text) => text_then(&text, FINISH_UNSUPPORTED),
        };
        Box::pin(async move { Ok(Box::pin(stream::iter(chunks)) as ChunkStream) })
    }
}

/// `text` streamed a line a chunk, then `finish`.
fn text_then(text: &str, finish: &str) -> Vec<Result<StreamChunk, LlmError>> {
    let mut v: Vec<Result<StreamChunk, LlmError>> = text
        .split_inclusive('\n')
        .map(|l| Ok(StreamChunk::Text(l.to_string())))
        .collect();
    v.push(Ok(StreamChunk::Finish(finish.into())));
    v
}
