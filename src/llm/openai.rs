//! The OpenAI-compatible Chat Completions provider (docs §2.11): one streamed
//! POST to `<base>/chat/completions`, Server-Sent Events decoded into
//! [`StreamChunk`]s. Deadlines, cancellation, tool-call assembly and
//! finish-reason normalisation are *not* done here: [`super::stream_response`]
//! does them once for every provider.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt, stream};
use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER,
};
use serde_json::{Map, Value, json};

use super::sse::{SseDecoder, SseEvent};
use super::window::{self, WindowDiscovery};
use super::{ChatRequest, ChunkStream, LlmError, Provider, StreamChunk};
use crate::model::{Message, Role, ToolSpec, Usage};

#[derive(Clone, Debug)]
pub struct OpenAiConfig {
    pub provider_name: String,
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub connect_timeout: std::time::Duration,
    pub send_reasoning_content: bool,
    pub temperature: Option<f32>,
    /// Sent as `max_tokens` when the request names none.
    pub max_tokens: Option<u32>,
    pub extra_headers: Vec<(String, String)>,
    /// How to ask the server for its context window (docs §3.9).
    pub discovery: WindowDiscovery,
}

/// Error bodies are read only this far: the message is at the start, and a
/// misconfigured proxy may answer with megabytes of HTML.
const ERROR_BODY_LIMIT: usize = 64 * 1024;
/// A non-streamed completion (or model list) larger than this is refused
/// rather than buffered without bound.
const JSON_BODY_LIMIT: usize = 32 * 1024 * 1024;
/// A `Retry-After` longer than this is not honoured as-is; the agent loop
/// would otherwise sit silent for hours (docs §2.11 retry policy).
const RETRY_AFTER_CAP: Duration = Duration::from_secs(600);
/// `list_models` runs outside the assembler, so it needs its own deadline.
const LIST_MODELS_TIMEOUT: Duration = Duration::from_secs(30);
/// A server that does not answer its window this fast is not waited for.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5);
const CLOSED_EARLY: &str = "the connection closed before the reply finished";

pub struct OpenAiProvider {
    config: OpenAiConfig,
    client: reqwest::Client,
    /// `base_url` trimmed, without a trailing slash.
    base: String,
    /// Authorization and the configured extra headers, validated once.
    headers: HeaderMap,
    scrub: Scrubber,
}

impl OpenAiProvider {
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        let base = config.base_url.trim().trim_end_matches('/').to_string();
        let url = reqwest::Url::parse(&base).map_err(|e| {
            LlmError::Config(format!(
                "the model base URL {base:?} is not a valid URL: {e}"
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(LlmError::Config(format!(
                "the model base URL {base:?} must start with http:// or https://"
            )));
        }

        let mut secrets = Vec::new();
        let mut headers = HeaderMap::new();
        if let Some(key) = config
            .api_key
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty())
        {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                LlmError::Config(
                    "the API key contains characters that cannot be sent in an HTTP header".into(),
                )
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
            secrets.push(key.to_string());
        }
        for (name, value) in &config.extra_headers {
            let header = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
                LlmError::Config(format!("the extra header name {name:?} is not valid"))
            })?;
            // The value may be a credential, so it is never quoted back.
            let mut value = HeaderValue::from_str(value.trim()).map_err(|_| {
                LlmError::Config(format!(
                    "the value of the extra header {name:?} is not valid"
                ))
            })?;
            if looks_secret(header.as_str()) {
                value.set_sensitive(true);
                if let Ok(v) = value.to_str() {
                    secrets.push(v.to_string());
                }
            }
            // A configured header replaces a default of the same name (e.g.
            // a relay that wants its own Authorization scheme).
            headers.insert(header, value);
        }

        let mut builder = reqwest::Client::builder();
        // No overall timeout: the assembler owns the idle and call deadlines.
        if !config.connect_timeout.is_zero() {
            builder = builder.connect_timeout(config.connect_timeout);
        }
        // A proxy cannot reach this machine's loopback, and a local server
        // (Ollama, LM Studio) must keep working with HTTP_PROXY set.
        if is_loopback(&url) {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| {
            LlmError::Config(format!(
                "cannot set up the HTTP client: {}",
                error_chain(&e)
            ))
        })?;

        Ok(OpenAiProvider {
            config,
            client,
            base,
            headers,
            scrub: Scrubber { secrets },
        })
    }

    /// The model ids the server offers (`GET <base>/models`, `data[].id`),
    /// for the `doctor` command.
    pub async fn list_models(&self) -> Result<Vec<String>, LlmError> {
        let url = format!("{}/models", self.base);
        let request = self.client.get(&url).timeout(LIST_MODELS_TIMEOUT);
        let mut response = self.send(request, &url).await?;
        if body_kind(&response) == BodyKind::Html {
            return Err(self.html_error(None));
        }
        let body = read_all(&mut response, JSON_BODY_LIMIT)
            .await
            .map_err(|e| self.scrub.error(e))?;
        let value: Value = serde_json::from_slice(&body).map_err(|_| {
            self.scrub.error(LlmError::Protocol(format!(
                "the model list is not valid JSON: {}",
                preview(&String::from_utf8_lossy(&body), 120)
            )))
        })?;
        model_ids(&value).ok_or_else(|| {
            self.scrub.error(LlmError::Protocol(format!(
                "the model list has no `data` array: {}",
                preview(&value.to_string(), 120)
            )))
        })
    }

    fn request_body(&self, request: &ChatRequest) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.config.model));
        let messages = request
            .messages
            .iter()
            .map(|m| wire_message(m, self.config.send_reasoning_content))
            .collect();
        body.insert("messages".into(), Value::Array(messages));
        body.insert("stream".into(), json!(true));
        // Without this OpenAI sends no usage at all when streaming.
        body.insert("stream_options".into(), json!({"include_usage": true}));
        if !request.tools.is_empty() {
            let tools = request.tools.iter().map(ToolSpec::to_openai).collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(t) = request.temperature.or(self.config.temperature) {
            body.insert("temperature".into(), json!(f32_for_json(t)));
        }
        if let Some(m) = request.max_tokens.or(self.config.max_tokens) {
            body.insert("max_tokens".into(), json!(m));
        }
        Value::Object(body)
    }

    /// The server root: the base URL without its `/v1`, where llama.cpp
    /// and Ollama serve their own endpoints.
    fn root(&self) -> &str {
        self.base.strip_suffix("/v1").unwrap_or(&self.base)
    }

    /// One discovery request's JSON, or `None` on any failure.
    async fn discovery_json(&self, request: reqwest::RequestBuilder, url: &str) -> Option<Value> {
        let mut response = self
            .send(request.timeout(DISCOVERY_TIMEOUT), url)
            .await
            .ok()?;
        let body = read_all(&mut response, ERROR_BODY_LIMIT * 16).await.ok()?;
        serde_json::from_slice(&body).ok()
    }

    /// Asks the server for its context window the configured way.
    async fn discover_window(&self) -> Option<u64> {
        let props = || async {
            let url = format!("{}/props", self.root());
            let v = self.discovery_json(self.client.get(&url), &url).await?;
            window::from_llamacpp_props(&v)
        };
        let models = || async {
            let url = format!("{}/models", self.base);
            let v = self.discovery_json(self.client.get(&url), &url).await?;
            window::from_model_list(&v, &self.config.model)
        };
        match self.config.discovery {
            WindowDiscovery::None => None,
            WindowDiscovery::LlamaCpp => props().await,
            WindowDiscovery::Models => models().await,
            WindowDiscovery::Auto => props().await,
            WindowDiscovery::Ollama => {
                let url = format!("{}/api/show", self.root());
                let post = self
                    .client
                    .post(&url)
                    .json(&json!({"model": self.config.model}));
                let v = self.discovery_json(post, &url).await?;
                window::from_ollama_show(&v)
            }
        }
    }

    /// Sends with the configured headers; non-2xx answers become errors.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        url: &str,
    ) -> Result<reqwest::Response, LlmError> {
        let response = request
            .headers(self.headers.clone())
            .send()
            .await
            .map_err(|e| self.transport_error(e, url))?;
        if response.status().is_success() {
            Ok(response)
        } else {
            Err(self.http_error(response).await)
        }
    }

    fn transport_error(&self, e: reqwest::Error, url: &str) -> LlmError {
        let e = e.without_url();
        let detail = error_chain(&e);
        let err = if e.is_builder() {
            LlmError::Config(format!("cannot build the request: {detail}"))
        } else if e.is_connect() || e.is_timeout() {
            LlmError::Connect {
                url: url.to_string(),
                message: detail,
            }
        } else {
            // The connection was made but dropped before the headers came.
            LlmError::Stream(format!(
                "the request failed before the server answered: {detail}"
            ))
        };
        self.scrub.error(err)
    }

    async fn http_error(&self, mut response: reqwest::Response) -> LlmError {
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let html = body_kind(&response) == BodyKind::Html;
        let body = read_limited(&mut response, ERROR_BODY_LIMIT).await;
        let text = String::from_utf8_lossy(&body);
        let json = serde_json::from_str::<Value>(&text).ok();
        let message = if let Some(m) = json.as_ref().and_then(provider_message) {
            with_context_numbers(m, json.as_ref())
        } else if html || looks_like_html(&text) {
            self.html_hint(html_title(&text))
        } else if !text.trim().is_empty() {
            preview(&text, 300)
        } else {
            status
                .canonical_reason()
                .unwrap_or("no details given")
                .to_string()
        };
        self.scrub.error(LlmError::Http {
            status: status.as_u16(),
            message,
            retry_after,
        })
    }

    /// Spec §2.11: an HTML body means the base URL points at a web page
    /// (often the server's root instead of its API), so say so.
    fn html_hint(&self, title: Option<String>) -> String {
        let title = title.map(|t| format!(" ({t:?})")).unwrap_or_default();
        format!(
            "the server returned an HTML page{title} instead of an API response; \
             check the base URL {} (it usually ends in /v1)",
            self.base
        )
    }

    fn html_error(&self, title: Option<String>) -> LlmError {
        self.scrub.error(LlmError::Config(self.html_hint(title)))
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.config.provider_name
    }

    fn model(&self) -> &str {
        &self.config.model
    }

    fn context_window(&self) -> BoxFuture<'_, Option<u64>> {
        Box::pin(self.discover_window())
    }

    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChunkStream, LlmError>> {
        Box::pin(async move {
            let url = format!("{}/chat/completions", self.base);
            let body = self.request_body(&request);
            let post = self
                .client
                .post(&url)
                .header(ACCEPT, "text/event-stream, application/json")
                .json(&body);
            let response = self.send(post, &url).await?;
            match body_kind(&response) {
                BodyKind::Html => Err(self.html_error(None)),
                BodyKind::Json => Ok(json_stream(response, self.scrub.clone())),
                BodyKind::EventStream => Ok(sse_stream(response, self.scrub.clone())),
            }
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BodyKind {
    EventStream,
    Json,
    Html,
}

/// A server that ignores `stream: true` answers `application/json`; anything
/// that is neither JSON nor HTML is read as SSE (some relays label their
/// stream `text/plain` or not at all).
fn body_kind(response: &reqwest::Response) -> BodyKind {
    let ct = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if ct.contains("event-stream") {
        BodyKind::EventStream
    } else if ct.contains("json") {
        BodyKind::Json
    } else if ct.contains("html") {
        BodyKind::Html
    } else {
        BodyKind::EventStream
    }
}

/// The OpenAI wire shape of one message. `content` is `null` for an assistant
/// turn that only calls tools: several servers reject `""` there.
fn wire_message(m: &Message, send_reasoning_content: bool) -> Value {
    let mut o = Map::new();
    o.insert("role".into(), json!(m.role.as_str()));
    let content = if m.content.is_empty() && !m.tool_calls.is_empty() {
        Value::Null
    } else {
        json!(m.content)
    };
    o.insert("content".into(), content);
    if !m.tool_calls.is_empty() {
        let calls = m
            .tool_calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": c.kind,
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                })
            })
            .collect();
        o.insert("tool_calls".into(), Value::Array(calls));
    }
    if m.role == Role::Tool {
        if let Some(id) = &m.tool_call_id {
            o.insert("tool_call_id".into(), json!(id));
        }
        if let Some(name) = &m.name {
            o.insert("name".into(), json!(name));
        }
    }
    // DeepSeek-style reasoning models want their reasoning echoed back;
    // others reject the unknown field, hence the switch.
    if send_reasoning_content && let Some(r) = &m.reasoning_content {
        o.insert("reasoning_content".into(), json!(r));
    }
    Value::Object(o)
}

/// `0.2f32` serialises as `0.20000000298023224`; go through its shortest
/// decimal form so the server sees what the user configured.
fn f32_for_json(t: f32) -> f64 {
    t.to_string().parse::<f64>().unwrap_or(f64::from(t))
}

/// Turns decoded JSON chunks into [`StreamChunk`]s, remembering what the
/// end-of-stream checks need.
#[derive(Default)]
struct ChunkDecoder {
    model_sent: bool,
    saw_finish: bool,
}

impl ChunkDecoder {
    /// `whole` = a non-streamed completion (`choices[0].message`) rather
    /// than a stream chunk (`choices[0].delta`).
    fn decode(
        &mut self,
        v: &Value,
        whole: bool,
        out: &mut VecDeque<Result<StreamChunk, LlmError>>,
    ) {
        if !self.model_sent
            && let Some(model) = non_empty_str(v.get("model"))
        {
            out.push_back(Ok(StreamChunk::Model(model.to_string())));
            self.model_sent = true;
        }
        let choice = v.get("choices").and_then(|c| c.get(0));
        if let Some(choice) = choice {
            let part = choice.get(if whole { "message" } else { "delta" });
            if let Some(part) = part.filter(|p| p.is_object()) {
                let reasoning = non_empty_str(part.get("reasoning_content"))
                    .or_else(|| non_empty_str(part.get("reasoning")));
                if let Some(r) = reasoning {
                    out.push_back(Ok(StreamChunk::Reasoning(r.to_string())));
                }
                if let Some(t) = content_text(part.get("content")) {
                    out.push_back(Ok(StreamChunk::Text(t)));
                }
                let calls = part.get("tool_calls").and_then(Value::as_array);
                for (position, call) in calls.into_iter().flatten().enumerate() {
                    out.push_back(Ok(tool_call_delta(call, position)));
                }
            }
            if let Some(reason) = non_empty_str(choice.get("finish_reason")) {
                out.push_back(Ok(StreamChunk::Finish(reason.to_string())));
                self.saw_finish = true;
            }
        }
        // Moonshot and a few relays put usage inside the choice.
        let usage = v.get("usage").filter(|u| u.is_object()).or_else(|| {
            choice
                .and_then(|c| c.get("usage"))
                .filter(|u| u.is_object())
        });
        if let Some(u) = usage.and_then(usage_of) {
            out.push_back(Ok(StreamChunk::Usage(u)));
        }
    }
}

fn tool_call_delta(call: &Value, position: usize) -> StreamChunk {
    let index = call
        .get("index")
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok())
        .unwrap_or(position);
    let function = call.get("function");
    let arguments = match function.and_then(|f| f.get("arguments")) {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        // Some relays send the arguments already parsed.
        Some(other) => other.to_string(),
    };
    StreamChunk::ToolCallDelta {
        index,
        id: non_empty_str(call.get("id")).map(String::from),
        name: non_empty_str(function.and_then(|f| f.get("name"))).map(String::from),
        arguments,
    }
}

fn non_empty_str(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A string, or (non-streamed replies of some servers) an array of parts.
fn content_text(v: Option<&Value>) -> Option<String> {
    let text = match v? {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                other => other.get("text").and_then(Value::as_str),
            })
            .collect(),
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}

fn usage_of(u: &Value) -> Option<Usage> {
    let num = |keys: &[&str]| {
        keys.iter().find_map(|k| {
            let v = u.get(*k)?;
            v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))
        })
    };
    Usage::normalised(
        num(&["prompt_tokens", "input_tokens"]),
        num(&["completion_tokens", "output_tokens"]),
        num(&["total_tokens"]),
    )
}

/// The provider's own words from an error body: `error.message`, `message`,
/// `error` as a string, or `detail` (FastAPI-style servers).
fn provider_message(v: &Value) -> Option<String> {
    // Google answers with a one-element array around the error object.
    let v = match v {
        Value::Array(items) => items.first()?,
        v => v,
    };
    let error = v.get("error");
    let candidates = [
        error.and_then(|e| e.get("message")),
        v.get("message"),
        error.filter(|e| e.is_string()),
        v.get("detail"),
    ];
    candidates.into_iter().flatten().find_map(|c| match c {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Null | Value::String(_) => None,
        other => Some(preview(&other.to_string(), 300)),
    })
}

/// Newer llama.cpp says "the request exceeds the available context size"
/// and puts the numbers beside the message (`n_prompt_tokens`, `n_ctx`);
/// they are added to it in llama.cpp's older wording (docs §3.9).
fn with_context_numbers(message: String, json: Option<&Value>) -> String {
    let error = json.and_then(|v| v.get("error"));
    let number = |k: &str| error.and_then(|e| e.get(k)).and_then(Value::as_u64);
    match (number("n_prompt_tokens"), number("n_ctx")) {
        (Some(p), Some(n)) if !message.contains(&n.to_string()) => format!(
            "{message} (request ({p} tokens) exceeds the available context size ({n} tokens))"
        ),
        _ => message,
    }
}

fn looks_like_html(text: &str) -> bool {
    let start: String = text.trim_start().chars().take(64).collect();
    let start = start.to_ascii_lowercase();
    start.starts_with("<!doctype html") || start.starts_with("<html") || start.starts_with("<head")
}

fn html_title(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase(); // same byte offsets as `text`
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let title = preview(text.get(start..end)?, 80);
    (!title.is_empty()).then_some(title)
}

/// `Retry-After` as delay-seconds (integer or decimal) or an HTTP date,
/// capped at [`RETRY_AFTER_CAP`].
fn parse_retry_after(raw: &str) -> Option<Duration> {
    let raw = raw.trim();
    let delay = if let Ok(secs) = raw.parse::<u64>() {
        Duration::from_secs(secs)
    } else if let Ok(secs) = raw.parse::<f64>() {
        if !secs.is_finite() || secs < 0.0 {
            return None;
        }
        Duration::from_secs_f64(secs.min(RETRY_AFTER_CAP.as_secs_f64()))
    } else {
        let at = chrono::DateTime::parse_from_rfc2822(raw).ok()?;
        let wait = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
        // A date in the past means "now".
        wait.to_std().unwrap_or(Duration::ZERO)
    };
    Some(delay.min(RETRY_AFTER_CAP))
}

fn model_ids(v: &Value) -> Option<Vec<String>> {
    let list = v
        .get("data")
        .or_else(|| v.get("models"))
        .or(Some(v))
        .and_then(Value::as_array)?;
    Some(
        list.iter()
            .filter_map(|m| match m {
                Value::String(s) => Some(s.clone()),
                m => non_empty_str(m.get("id"))
                    .or_else(|| non_empty_str(m.get("name")))
                    .map(String::from),
            })
            .collect(),
    )
}

/// Reads at most `limit` bytes of a body, keeping whatever arrived before an
/// error (an error body is informative even when cut short).
async fn read_limited(response: &mut reqwest::Response, limit: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < limit {
        match response.chunk().await {
            Ok(Some(bytes)) => {
                let room = limit - body.len();
                body.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    body
}

/// Reads a whole body, failing if it breaks off or exceeds `limit`.
async fn read_all(response: &mut reqwest::Response, limit: usize) -> Result<Vec<u8>, LlmError> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(bytes)) => {
                if body.len() + bytes.len() > limit {
                    return Err(LlmError::Protocol(format!(
                        "the reply is larger than {} MiB",
                        limit / (1024 * 1024)
                    )));
                }
                body.extend_from_slice(&bytes);
            }
            Ok(None) => return Ok(body),
            Err(e) => {
                return Err(LlmError::Stream(format!(
                    "{CLOSED_EARLY} ({})",
                    error_chain(&e.without_url())
                )));
            }
        }
    }
}

/// A server that ignored `stream: true`: the whole completion becomes the
/// same chunks a stream would have produced.
fn json_stream(mut response: reqwest::Response, scrub: Scrubber) -> ChunkStream {
    let chunks = async move {
        let body = match read_all(&mut response, JSON_BODY_LIMIT).await {
            Ok(b) => b,
            Err(e) => return vec![Err(scrub.error(e))],
        };
        let value: Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            // Some relays label their event stream `application/json`.
            Err(_) if looks_like_sse(&body) => {
                let mut events = SseEvents::new(scrub);
                events.push(&body);
                events.end(None);
                return events.queue.into_iter().collect();
            }
            Err(_) => {
                let text = String::from_utf8_lossy(&body);
                return vec![Err(scrub.error(LlmError::Protocol(format!(
                    "the reply is not valid JSON: {}",
                    preview(&text, 120)
                ))))];
            }
        };
        if let Some(e) = stream_error(&value, false) {
            return vec![Err(scrub.error(e))];
        }
        if value.get("choices").is_none() {
            return vec![Err(scrub.error(LlmError::Protocol(format!(
                "the reply has neither choices nor an error: {}",
                preview(&value.to_string(), 120)
            ))))];
        }
        let mut out = VecDeque::new();
        ChunkDecoder::default().decode(&value, true, &mut out);
        out.into_iter().collect()
    };
    Box::pin(stream::once(chunks).flat_map(stream::iter))
}

fn looks_like_sse(body: &[u8]) -> bool {
    let start = body.trim_ascii_start();
    start.starts_with(b"data:") || start.starts_with(b"event:") || start.starts_with(b":")
}

/// An `{"error": …}` payload inside a 2xx body (relays report upstream
/// failures mid-stream this way), or an SSE `event: error`.
fn stream_error(v: &Value, error_event: bool) -> Option<LlmError> {
    let has_error = v.get("error").is_some_and(|e| !e.is_null());
    if !has_error && !error_event {
        return None;
    }
    let message = provider_message(v).unwrap_or_else(|| preview(&v.to_string(), 300));
    Some(LlmError::Stream(message))
}

/// SSE bytes in, chunk results out; independent of where the bytes come from.
struct SseEvents {
    sse: SseDecoder,
    decoder: ChunkDecoder,
    queue: VecDeque<Result<StreamChunk, LlmError>>,
    /// Nothing more is to be read: `[DONE]`, an error, or the end of the body.
    ended: bool,
    /// `[DONE]` arrived.
    done: bool,
    scrub: Scrubber,
}

impl SseEvents {
    fn new(scrub: Scrubber) -> Self {
        SseEvents {
            sse: SseDecoder::new(),
            decoder: ChunkDecoder::default(),
            queue: VecDeque::new(),
            ended: false,
            done: false,
            scrub,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        for ev in self.sse.push(bytes) {
            self.event(ev);
            if self.ended {
                break;
            }
        }
    }

    fn event(&mut self, ev: SseEvent) {
        let data = ev.data.trim();
        if data.is_empty() {
            return;
        }
        if data == "[DONE]" {
            self.ended = true;
            self.done = true;
            return;
        }
        let error_event = ev.event.as_deref() == Some("error");
        let failure = match serde_json::from_str::<Value>(data) {
            Ok(v) => match stream_error(&v, error_event) {
                Some(e) => e,
                None => {
                    self.decoder.decode(&v, false, &mut self.queue);
                    return;
                }
            },
            Err(_) if error_event => LlmError::Stream(preview(data, 300)),
            Err(_) => LlmError::Protocol(format!(
                "a stream event is not valid JSON: {}",
                preview(data, 120)
            )),
        };
        self.queue.push_back(Err(self.scrub.error(failure)));
        self.ended = true;
    }

    /// The body ended, cleanly (`detail` None) or with a transport error.
    /// Some servers omit `[DONE]`, so a reply whose finish reason arrived is
    /// complete; without one it was cut off and is worth a retry (§2.11).
    fn end(&mut self, detail: Option<String>) {
        if self.ended {
            return;
        }
        // Per the SSE standard an unterminated last event is dropped.
        let unterminated = self.sse.has_pending();
        for ev in self.sse.finish() {
            self.event(ev);
        }
        if self.ended {
            return;
        }
        self.ended = true;
        if self.decoder.saw_finish {
            tracing::debug!(
                ?detail,
                "model stream ended after its finish reason without [DONE]"
            );
            return;
        }
        let message = match (detail, unterminated) {
            (Some(d), _) => format!("{CLOSED_EARLY} ({d})"),
            (None, true) => format!("{CLOSED_EARLY} (in the middle of an event)"),
            (None, false) => CLOSED_EARLY.to_string(),
        };
        self.queue
            .push_back(Err(self.scrub.error(LlmError::Stream(message))));
    }
}

fn sse_stream(response: reqwest::Response, scrub: Scrubber) -> ChunkStream {
    let state = (response, SseEvents::new(scrub));
    let s = stream::unfold(state, |(mut response, mut st)| async move {
        loop {
            if let Some(item) = st.queue.pop_front() {
                if item.is_err() {
                    // An error ends the stream; nothing after it is trusted.
                    st.queue.clear();
                    st.ended = true;
                }
                return Some((item, (response, st)));
            }
            if st.ended {
                if std::mem::take(&mut st.done) {
                    // The body's end usually follows `[DONE]` at once; taking
                    // it if it is already here lets the connection go back to
                    // the pool. Never waits: a server may keep the socket open.
                    for _ in 0..4 {
                        match response.chunk().now_or_never() {
                            Some(Ok(Some(_))) => continue,
                            _ => break,
                        }
                    }
                }
                return None;
            }
            match response.chunk().await {
                Ok(Some(bytes)) => st.push(&bytes),
                Ok(None) => st.end(None),
                Err(e) => st.end(Some(error_chain(&e.without_url()))),
            }
        }
    });
    Box::pin(s)
}

/// Removes credentials from anything that could reach a user, a log or a
/// trace: servers sometimes echo the key back in their error text.
#[derive(Clone, Debug, Default)]
struct Scrubber {
    secrets: Vec<String>,
}

impl Scrubber {
    fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        // Very short values would blank out ordinary words; real keys are long.
        for s in self.secrets.iter().filter(|s| s.len() >= 4) {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "[redacted]");
            }
        }
        out
    }

    fn error(&self, e: LlmError) -> LlmError {
        match e {
            LlmError::Connect { url, message } => LlmError::Connect {
                url: self.text(&url),
                message: self.text(&message),
            },
            LlmError::Http {
                status,
                message,
                retry_after,
            } => LlmError::Http {
                status,
                message: self.text(&message),
                retry_after,
            },
            LlmError::Stream(m) => LlmError::Stream(self.text(&m)),
            LlmError::Protocol(m) => LlmError::Protocol(self.text(&m)),
            LlmError::Config(m) => LlmError::Config(self.text(&m)),
            e @ (LlmError::IdleTimeout(_) | LlmError::CallTimeout(_)) => e,
        }
    }
}

fn looks_secret(header: &str) -> bool {
    let h = header.to_ascii_lowercase();
    ["key", "token", "secret", "auth", "password"]
        .iter()
        .any(|w| h.contains(w))
}

fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// An error and its sources, without the repeats hyper's layers add.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// One line of at most `max` characters, whitespace runs collapsed.
fn preview(text: &str, max: usize) -> String {
    crate::text::one_line(text, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolCall;

    fn provider(key: Option<&str>) -> OpenAiProvider {
        OpenAiProvider::new(OpenAiConfig {
            provider_name: "openai".into(),
            base_url: "http://127.0.0.1:9/v1/".into(),
            model: "m".into(),
            api_key: key.map(String::from),
            connect_timeout: Duration::from_secs(1),
            send_reasoning_content: false,
            temperature: Some(0.2),
            max_tokens: None,
            extra_headers: vec![],
            discovery: WindowDiscovery::None,
        })
        .unwrap()
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after(" 1.5 "),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_retry_after("99999"), Some(RETRY_AFTER_CAP));
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("NaN"), None);
        assert_eq!(parse_retry_after("soon"), None);
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        let future = (chrono::Utc::now() + chrono::TimeDelta::seconds(120)).to_rfc2822();
        let d = parse_retry_after(&future).unwrap();
        assert!(
            d > Duration::from_secs(100) && d <= Duration::from_secs(120),
            "{d:?}"
        );
    }

    #[test]
    fn provider_message_sources() {
        let m = |s: &str| provider_message(&serde_json::from_str(s).unwrap());
        assert_eq!(
            m(r#"{"error":{"message":"bad key","type":"x"}}"#).as_deref(),
            Some("bad key")
        );
        assert_eq!(m(r#"{"message":"top"}"#).as_deref(), Some("top"));
        assert_eq!(m(r#"{"error":"plain"}"#).as_deref(), Some("plain"));
        assert_eq!(m(r#"{"detail":"Not Found"}"#).as_deref(), Some("Not Found"));
        assert_eq!(m(r#"[{"error":{"message":"g"}}]"#).as_deref(), Some("g"));
        assert_eq!(m(r#"{"error":{"code":1}}"#), None);
    }

    #[test]
    fn html_title_and_detection() {
        let page = "<!DOCTYPE html><html><head><TITLE> 404 Not Found </TITLE></head></html>";
        assert!(looks_like_html(page));
        assert_eq!(html_title(page).as_deref(), Some("404 Not Found"));
        assert!(!looks_like_html("{\"a\":1}"));
    }

    #[test]
    fn wire_messages() {
        let call = ToolCall::new("c1", "read_file", "{}");
        let m = Message::assistant_tool_calls("", vec![call], Some("thinking".into()));
        let w = wire_message(&m, false);
        assert!(w["content"].is_null());
        assert_eq!(w["tool_calls"][0]["function"]["name"], "read_file");
        assert!(w.get("reasoning_content").is_none());
        assert_eq!(wire_message(&m, true)["reasoning_content"], "thinking");
        let t = wire_message(&Message::tool_result("c1", "read_file", "ok"), false);
        assert_eq!(t["tool_call_id"], "c1");
        assert_eq!(t["name"], "read_file");
        let u = wire_message(&Message::user(""), false);
        assert_eq!(u["content"], "");
        assert!(u.get("tool_calls").is_none());
    }

    #[test]
    fn request_body_temperature_is_clean() {
        let p = provider(None);
        let body = p.request_body(&ChatRequest::default());
        assert_eq!(body["temperature"], json!(0.2));
        assert!(body.get("tools").is_none());
        assert!(body.get("max_tokens").is_none());
    }

    #[test]
    fn scrubber_hides_the_key() {
        let p = provider(Some("sk-secret-value"));
        let e = p.scrub.error(LlmError::Http {
            status: 401,
            message: "Incorrect API key provided: sk-secret-value".into(),
            retry_after: None,
        });
        assert!(!e.to_string().contains("sk-secret-value"), "{e}");
        assert!(e.to_string().contains("[redacted]"));
    }

    #[test]
    fn bad_base_url_is_a_config_error() {
        let cfg = |url: &str| OpenAiConfig {
            provider_name: "x".into(),
            base_url: url.into(),
            model: "m".into(),
            api_key: None,
            connect_timeout: Duration::from_secs(1),
            send_reasoning_content: false,
            temperature: None,
            max_tokens: None,
            extra_headers: vec![],
            discovery: WindowDiscovery::None,
        };
        assert!(matches!(
            OpenAiProvider::new(cfg("not a url")),
            Err(LlmError::Config(_))
        ));
        assert!(matches!(
            OpenAiProvider::new(cfg("ftp://h/v1")),
            Err(LlmError::Config(_))
        ));
    }

    #[test]
    fn decodes_a_stream_chunk() {
        let mut d = ChunkDecoder::default();
        let mut out = VecDeque::new();
        let v = json!({"model":"gpt","choices":[{"index":0,"delta":{"reasoning":"r","content":"t",
            "tool_calls":[{"index":1,"id":"c","function":{"name":"f","arguments":"{"}}]},
            "finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}});
        d.decode(&v, false, &mut out);
        d.decode(&v, false, &mut out);
        let chunks: Vec<_> = out.into_iter().map(Result::unwrap).collect();
        assert_eq!(chunks[0], StreamChunk::Model("gpt".into()));
        assert_eq!(chunks[1], StreamChunk::Reasoning("r".into()));
        assert_eq!(chunks[2], StreamChunk::Text("t".into()));
        assert_eq!(
            chunks[3],
            StreamChunk::ToolCallDelta {
                index: 1,
                id: Some("c".into()),
                name: Some("f".into()),
                arguments: "{".into()
            }
        );
        assert_eq!(chunks[4], StreamChunk::Finish("stop".into()));
        assert_eq!(
            chunks[5],
            StreamChunk::Usage(Usage {
                input_tokens: 3,
                output_tokens: 2,
                total_tokens: 5
            })
        );
        // The model is reported once.
        assert_eq!(chunks.len(), 11);
        assert!(d.saw_finish);
    }
}
