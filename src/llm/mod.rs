//! Model providers. A provider turns a [`ChatRequest`] into a stream of
//! [`StreamChunk`]s; everything protocol-independent (idle and whole-call
//! timeouts, cancellation, tool-call assembly, finish-reason normalisation,
//! DSML markup handling) lives once in [`assemble`] so that every provider,
//! the scripted one included, goes through the same code.

pub mod assemble;
pub mod offline;
pub mod openai;
pub mod scripted;
pub mod sse;
pub mod text_calls;
pub mod tokens;
pub mod window;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::Stream;
use futures_util::future::BoxFuture;

use crate::model::{Message, ToolSpec, Usage};

pub use assemble::{CallOptions, Response, stream_response};

/// One model call. `tools` empty means "no tools offered" (the forced
/// text-only last iteration withholds them, docs §1.3 step 7).
#[derive(Clone, Debug, Default)]
pub struct ChatRequest {
    /// The conversation, shared with the loop that keeps it: a request
    /// holds a reference, not a copy (the loop writes to it only after the
    /// call, when it is the only holder).
    pub messages: Arc<Vec<Message>>,
    /// The registry's specs, built once (docs §2.1).
    pub tools: Arc<[ToolSpec]>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// The turn's request as the user wrote it. Never sent: providers send
    /// `messages`. The offline planner plans from it, because compaction may
    /// have replaced the user's message in `messages` by a summary.
    pub user_request: Option<String>,
    /// The reply may write tool calls as text (docs §2.11.1): text that
    /// opens like one is held back from the live stream until the reply
    /// ends, and shown only if it turns out not to be a call.
    pub text_tool_calls: bool,
}

/// A piece of a streamed reply, as a provider decodes it.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamChunk {
    Text(String),
    Reasoning(String),
    /// Tool calls arrive in fragments keyed by `index`; `id` and `name` come
    /// only in the first fragment of a call, `arguments` in pieces.
    ToolCallDelta {
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
    /// The finish reason exactly as the provider sent it.
    Finish(String),
    Usage(Usage),
    /// The model name the provider reports (may differ from the configured one).
    Model(String),
}

/// The finish reason of a reply that answers "I cannot serve this": the
/// offline provider ends its [`crate::planner::Plan::Unsupported`] text
/// with it, and the agent loop ends the run `unsupported` with that text as
/// its answer (docs §1.4). Model providers never send it.
pub const FINISH_UNSUPPORTED: &str = "unsupported";

pub type ChunkStream = Pin<Box<dyn Stream<Item = Result<StreamChunk, LlmError>> + Send>>;

/// A chat model that streams. Implementations do no timeout or retry work of
/// their own: [`stream_response`] applies the idle and whole-call deadlines
/// and the agent loop owns the retry policy (docs §1.3 step 7).
pub trait Provider: Send + Sync {
    /// Provider name for events, errors and `llm_usage.json` (`openai`, `scripted`, …).
    fn name(&self) -> &str;
    /// The configured model name.
    fn model(&self) -> &str;
    /// Starts one streaming call. The future resolves once the provider has
    /// accepted the request (HTTP headers received); chunks follow on the stream.
    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChunkStream, LlmError>>;
    /// Whether the provider may call any tool the request offers, as a
    /// model does. A planner that knows only the built-ins (the offline
    /// one) says no, so a run never waits for tools still starting that it
    /// could not call (MCP servers, docs §13.2).
    fn calls_offered_tools(&self) -> bool {
        true
    }
    /// The model's context window as the server reports it (docs §3.9),
    /// when the provider knows how to ask; `None` otherwise.
    fn context_window(&self) -> BoxFuture<'_, Option<u64>> {
        Box::pin(async { None })
    }
}

/// Why a model call failed. [`LlmError::retryable`] decides whether the loop
/// spends its single stream retry on it (docs §2.11: transport failures,
/// timeouts, 408, 429 and 5xx are worth another try; other 4xx are not).
#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    #[error("cannot reach the model server at {url}: {message}")]
    Connect { url: String, message: String },
    #[error("the model server answered HTTP {status}: {message}")]
    Http {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("no data from the model for {}s (idle timeout)", .0.as_secs_f64())]
    IdleTimeout(Duration),
    #[error("the model call took longer than {}s (call timeout)", .0.as_secs_f64())]
    CallTimeout(Duration),
    #[error("the reply stream broke off: {0}")]
    Stream(String),
    #[error("the model server sent something unreadable: {0}")]
    Protocol(String),
    #[error("{0}")]
    Config(String),
}

impl LlmError {
    pub fn retryable(&self) -> bool {
        match self {
            LlmError::Connect { .. }
            | LlmError::IdleTimeout(_)
            | LlmError::CallTimeout(_)
            | LlmError::Stream(_)
            | LlmError::Protocol(_) => true,
            LlmError::Http { status, .. } => matches!(status, 408 | 429) || *status >= 500,
            LlmError::Config(_) => false,
        }
    }

    /// How long the server asked us to wait (`Retry-After`), if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// A context-size error (docs §3.9): the request did not fit the
    /// model's window. Such a reply is not worth a plain retry; the loop
    /// compacts and retries once.
    pub fn context_overflow(&self) -> Option<window::ContextOverflow> {
        match self {
            LlmError::Http {
                status, message, ..
            } if (400..500).contains(status) => window::parse_overflow(message),
            LlmError::Stream(message) => window::parse_overflow(message),
            _ => None,
        }
    }

    /// A short machine-readable kind for events and traces.
    pub fn kind(&self) -> &'static str {
        match self {
            LlmError::Connect { .. } => "connect",
            LlmError::Http { .. } => "http",
            LlmError::IdleTimeout(_) => "idle_timeout",
            LlmError::CallTimeout(_) => "call_timeout",
            LlmError::Stream(_) => "stream",
            LlmError::Protocol(_) => "protocol",
            LlmError::Config(_) => "config",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_classification() {
        let http = |status| LlmError::Http {
            status,
            message: String::new(),
            retry_after: None,
        };
        for s in [408, 429, 500, 502, 503] {
            assert!(http(s).retryable(), "{s}");
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(!http(s).retryable(), "{s}");
        }
        assert!(LlmError::IdleTimeout(Duration::from_secs(1)).retryable());
        assert!(!LlmError::Config("x".into()).retryable());
    }
}
