//! A provider that replays a JSON script of assistant turns: one turn per
//! model call. Tests and demos use it; the format is documented in README.md
//! ("The scripted provider").

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::stream;
use serde::Deserialize;
use serde_json::Value;

use super::{ChatRequest, ChunkStream, LlmError, Provider, StreamChunk};
use crate::model::Usage;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    #[serde(default = "default_model")]
    pub model: String,
    pub turns: Vec<Turn>,
    /// What a call past the last turn gets: `error` (default) or `repeat_last`.
    #[serde(default)]
    pub on_exhausted: Exhausted,
}

fn default_model() -> String {
    "scripted".to_string()
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exhausted {
    #[default]
    Error,
    RepeatLast,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Wait before the first chunk.
    #[serde(default)]
    pub delay_ms: u64,
    /// Wait between chunks.
    #[serde(default)]
    pub chunk_delay_ms: u64,
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ScriptToolCall>,
    /// Defaults to `tool_calls` when there are tool calls, else `stop`.
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Fail the call: before any chunk, or after `after_chunks` chunks.
    #[serde(default)]
    pub error: Option<ScriptError>,
    /// After the chunks, never finish (to exercise timeouts).
    #[serde(default)]
    pub hang: bool,
    /// Explicit chunk list; replaces `reasoning`, `text` and `tool_calls`.
    #[serde(default)]
    pub chunks: Option<Vec<ScriptChunk>>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptToolCall {
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    /// An object (serialised for the call) or a raw string (sent as-is, so
    /// invalid JSON can be scripted).
    #[serde(default)]
    pub arguments: Value,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ScriptChunk {
    Text(String),
    Reasoning(String),
    ToolCall {
        index: usize,
        #[serde(default)]
        id: Option<String>,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        arguments: String,
    },
    Finish(String),
    Usage(Usage),
    DelayMs(u64),
    Error(ScriptError),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptError {
    /// `http`, `stream`, `connect`, `protocol` or `config`.
    pub kind: String,
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub retry_after_ms: Option<u64>,
    #[serde(default)]
    pub after_chunks: Option<usize>,
}

impl ScriptError {
    fn to_error(&self) -> LlmError {
        let message = self
            .message
            .clone()
            .unwrap_or_else(|| "scripted failure".to_string());
        match self.kind.as_str() {
            "http" => LlmError::Http {
                status: self.status.unwrap_or(500),
                message,
                retry_after: self.retry_after_ms.map(Duration::from_millis),
            },
            "connect" => LlmError::Connect {
                url: "scripted://".to_string(),
                message,
            },
            "protocol" => LlmError::Protocol(message),
            "config" => LlmError::Config(message),
            _ => LlmError::Stream(message),
        }
    }
}

impl Script {
    pub fn from_json(text: &str) -> Result<Self, LlmError> {
        // A bare array of turns is accepted as well as the full object.
        let value: Value = serde_json::from_str(text)
            .map_err(|e| LlmError::Config(format!("script is not valid JSON: {e}")))?;
        let value = if value.is_array() {
            serde_json::json!({ "turns": value })
        } else {
            value
        };
        serde_json::from_value(value)
            .map_err(|e| LlmError::Config(format!("script does not match the format: {e}")))
    }

    pub fn from_file(path: &Path) -> Result<Self, LlmError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| LlmError::Config(format!("cannot read script {}: {e}", path.display())))?;
        Self::from_json(&text).map_err(|e| LlmError::Config(format!("{}: {e}", path.display())))
    }
}

enum Step {
    Chunk(StreamChunk),
    Delay(Duration),
    Fail(LlmError),
    Hang,
}

/// Replays a [`Script`]; remembers every request for tests to inspect.
pub struct ScriptedProvider {
    script: Script,
    next: Mutex<usize>,
    requests: Arc<Mutex<Vec<ChatRequest>>>,
}

impl ScriptedProvider {
    pub fn new(script: Script) -> Self {
        ScriptedProvider {
            script,
            next: Mutex::new(0),
            requests: Arc::default(),
        }
    }

    /// The requests received so far, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    pub fn calls(&self) -> usize {
        self.requests.lock().map(|r| r.len()).unwrap_or(0)
    }

    fn take_turn(&self) -> Option<Turn> {
        let mut next = self.next.lock().ok()?;
        let turn = match self.script.turns.get(*next) {
            Some(t) => Some(t.clone()),
            None if self.script.on_exhausted == Exhausted::RepeatLast => {
                self.script.turns.last().cloned()
            }
            None => None,
        };
        *next += 1;
        turn
    }
}

fn steps_for(turn: &Turn) -> Vec<Step> {
    let mut chunks: Vec<Step> = Vec::new();
    if let Some(explicit) = &turn.chunks {
        for c in explicit {
            chunks.push(match c {
                ScriptChunk::Text(t) => Step::Chunk(StreamChunk::Text(t.clone())),
                ScriptChunk::Reasoning(t) => Step::Chunk(StreamChunk::Reasoning(t.clone())),
                ScriptChunk::ToolCall {
                    index,
                    id,
                    name,
                    arguments,
                } => Step::Chunk(StreamChunk::ToolCallDelta {
                    index: *index,
                    id: id.clone(),
                    name: name.clone(),
                    arguments: arguments.clone(),
                }),
                ScriptChunk::Finish(f) => Step::Chunk(StreamChunk::Finish(f.clone())),
                ScriptChunk::Usage(u) => Step::Chunk(StreamChunk::Usage(*u)),
                ScriptChunk::DelayMs(ms) => Step::Delay(Duration::from_millis(*ms)),
                ScriptChunk::Error(e) => Step::Fail(e.to_error()),
            });
        }
    } else {
        if let Some(r) = &turn.reasoning {
            chunks.extend(split_words(r).map(|w| Step::Chunk(StreamChunk::Reasoning(w))));
        }
        if let Some(t) = &turn.text {
            chunks.extend(split_words(t).map(|w| Step::Chunk(StreamChunk::Text(w))));
        }
        for (index, call) in turn.tool_calls.iter().enumerate() {
            let args = match &call.arguments {
                Value::String(raw) => raw.clone(),
                Value::Null => "{}".to_string(),
                other => other.to_string(),
            };
            // Like real servers: id and name first, arguments in two fragments.
            let cut = args
                .char_indices()
                .nth(args.chars().count() / 2)
                .map_or(0, |(i, _)| i);
            chunks.push(Step::Chunk(StreamChunk::ToolCallDelta {
                index,
                id: Some(call.id.clone().unwrap_or_else(|| format!("call_{index}"))),
                name: Some(call.name.clone()),
                arguments: String::new(),
            }));
            for part in [&args[..cut], &args[cut..]] {
                chunks.push(Step::Chunk(StreamChunk::ToolCallDelta {
                    index,
                    id: None,
                    name: None,
                    arguments: part.to_string(),
                }));
            }
        }
        let finish = turn.finish_reason.clone().unwrap_or_else(|| {
            if turn.tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            }
            .to_string()
        });
        chunks.push(Step::Chunk(StreamChunk::Finish(finish)));
        if let Some(u) = turn.usage {
            chunks.push(Step::Chunk(StreamChunk::Usage(u)));
        }
    }
    if let Some(e) = &turn.error
        && let Some(n) = e.after_chunks
    {
        chunks.truncate(n);
        chunks.push(Step::Fail(e.to_error()));
    }
    let mut steps = Vec::with_capacity(chunks.len() * 2 + 2);
    if turn.delay_ms > 0 {
        steps.push(Step::Delay(Duration::from_millis(turn.delay_ms)));
    }
    for (i, c) in chunks.into_iter().enumerate() {
        if i > 0 && turn.chunk_delay_ms > 0 {
            steps.push(Step::Delay(Duration::from_millis(turn.chunk_delay_ms)));
        }
        steps.push(c);
    }
    if turn.hang {
        steps.push(Step::Hang);
    }
    steps
}

/// Splits text into word-sized pieces that concatenate back to the input.
fn split_words(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest
            .char_indices()
            .skip(1)
            .find(|(_, c)| c.is_whitespace())
            .map_or(rest.len(), |(i, _)| i);
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece.to_string())
    })
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn model(&self) -> &str {
        &self.script.model
    }

    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChunkStream, LlmError>> {
        if let Ok(mut r) = self.requests.lock() {
            r.push(request);
        }
        let turn = self.take_turn();
        Box::pin(async move {
            let Some(turn) = turn else {
                return Err(LlmError::Config(format!(
                    "the script has no turn left (it has {})",
                    self.script.turns.len()
                )));
            };
            if let Some(e) = &turn.error
                && e.after_chunks.is_none()
            {
                if turn.delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(turn.delay_ms)).await;
                }
                return Err(e.to_error());
            }
            let steps = steps_for(&turn);
            let s = stream::unfold(steps.into_iter(), |mut steps| async move {
                loop {
                    match steps.next()? {
                        Step::Chunk(c) => return Some((Ok(c), steps)),
                        Step::Delay(d) => tokio::time::sleep(d).await,
                        Step::Fail(e) => return Some((Err(e), steps)),
                        Step::Hang => std::future::pending::<()>().await,
                    }
                }
            });
            Ok(Box::pin(s) as ChunkStream)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{CallOptions, stream_response};
    use tokio_util::sync::CancellationToken;

    async fn call(p: &ScriptedProvider) -> Result<crate::llm::Response, LlmError> {
        let mut sink = |_d: crate::llm::assemble::LiveDelta<'_>| {};
        stream_response(
            p,
            ChatRequest::default(),
            CallOptions::default(),
            &CancellationToken::new(),
            &mut sink,
        )
        .await
    }

    #[test]
    fn split_words_round_trips() {
        let t = "  a bc\n d ";
        assert_eq!(split_words(t).collect::<String>(), t);
        assert!(split_words("").next().is_none());
    }

    #[tokio::test]
    async fn replays_turns_in_order() {
        let script = Script::from_json(
            r#"[{"text":"hello world","usage":{"input_tokens":3,"output_tokens":2,"total_tokens":5}},
                {"tool_calls":[{"name":"read_file","arguments":{"path":"a.txt"}}]},
                {"error":{"kind":"http","status":429,"retry_after_ms":1500}}]"#,
        )
        .unwrap();
        let p = ScriptedProvider::new(script);
        let r = call(&p).await.unwrap();
        assert_eq!(r.content, "hello world");
        assert_eq!(r.usage.unwrap().total_tokens, 5);
        let r = call(&p).await.unwrap();
        assert_eq!(r.tool_calls[0].function.arguments, r#"{"path":"a.txt"}"#);
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        let e = call(&p).await.unwrap_err();
        assert_eq!(e.retry_after(), Some(Duration::from_millis(1500)));
        assert!(matches!(call(&p).await.unwrap_err(), LlmError::Config(_)));
        assert_eq!(p.calls(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn hang_hits_idle_timeout() {
        let p = ScriptedProvider::new(
            Script::from_json(r#"[{"text":"partial","hang":true}]"#).unwrap(),
        );
        let mut sink = |_d: crate::llm::assemble::LiveDelta<'_>| {};
        let opts = CallOptions {
            idle_timeout: Some(Duration::from_secs(5)),
            call_timeout: Some(Duration::from_secs(60)),
        };
        let e = stream_response(
            &p,
            ChatRequest::default(),
            opts,
            &CancellationToken::new(),
            &mut sink,
        )
        .await
        .unwrap_err();
        assert!(matches!(e, LlmError::IdleTimeout(_)), "{e:?}");
    }

    #[test]
    fn unknown_fields_are_refused_with_a_clear_error() {
        let e = Script::from_json(r#"[{"txt":"typo"}]"#).unwrap_err();
        assert!(e.to_string().contains("txt"), "{e}");
    }
}
