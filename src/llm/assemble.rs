//! Consumes a provider's chunk stream into one [`Response`]: idle and
//! whole-call deadlines, cancellation (checkpoint B, docs §1.11), tool-call
//! assembly by index, finish-reason normalisation, and DSML markup that some
//! relays return as plain text instead of native tool calls (docs §2.11).

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::Duration;

use futures_util::StreamExt;
use regex::Regex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{ChatRequest, LlmError, Provider, StreamChunk};
use crate::model::{ToolCall, Usage};

/// Deadlines for one call. `None` disables a deadline (the original's `≤0`).
#[derive(Clone, Copy, Debug)]
pub struct CallOptions {
    /// Longest silence between two chunks (and before the first one).
    pub idle_timeout: Option<Duration>,
    /// Longest whole call, first byte to last.
    pub call_timeout: Option<Duration>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            idle_timeout: Some(Duration::from_secs(300)),
            call_timeout: Some(Duration::from_secs(300)),
        }
    }
}

/// What the model said in one call, assembled.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Response {
    pub content: String,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    /// Normalised finish reason (`stopstop` → `stop`, `tool_use` → `tool_calls`).
    pub finish_reason: Option<String>,
    /// The provider blocked the reply (content moderation).
    pub content_filtered: bool,
    pub usage: Option<Usage>,
    /// Model name reported by the provider, if any.
    pub model: Option<String>,
    /// The call was cancelled mid-stream; everything above is partial.
    pub cancelled: bool,
    /// The text was a DSML tool-call block and became `tool_calls`.
    pub dsml_parsed: bool,
    /// The end of `content` held back from the live stream and not
    /// released (it read as a call or markup); the loop shows it when the
    /// reply turns out to be an answer after all (docs §2.11.1).
    pub held_back: String,
}

/// Live output as it arrives, for streaming to the user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveDelta<'a> {
    Text(&'a str),
    Reasoning(&'a str),
    /// Text held back while it may still be a tool call (not shown yet,
    /// maybe never): a watcher of the whole reply (the runaway guard,
    /// docs §2.11.2) reads it here; it comes again as `Text` if shown.
    Held(&'a str),
}

/// Runs one streaming call to completion (or cancellation, or failure).
pub async fn stream_response(
    provider: &dyn Provider,
    request: ChatRequest,
    options: CallOptions,
    cancel: &CancellationToken,
    on_delta: &mut (dyn FnMut(LiveDelta<'_>) + Send),
) -> Result<Response, LlmError> {
    let started = Instant::now();
    let call_deadline = options.call_timeout.map(|t| started + t);
    let mut assembler = Assembler::holding_text_calls(request.text_tool_calls);

    // The wait for response headers counts against both deadlines too.
    let opened = {
        let wait = next_deadline(Instant::now(), options, call_deadline);
        tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            r = with_deadline(wait, provider.stream(request)) => Some(r),
        }
    };
    let mut stream = match opened {
        None => return Ok(assembler.finish(true, on_delta)),
        Some(Err(expired)) => return Err(expired.into_error(options)),
        Some(Ok(Err(e))) => return Err(e),
        Some(Ok(Ok(s))) => s,
    };

    loop {
        let wait = next_deadline(Instant::now(), options, call_deadline);
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Ok(assembler.finish(true, on_delta)),
            n = with_deadline(wait, stream.next()) => n,
        };
        match next {
            Err(expired) => return Err(expired.into_error(options)),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(e),
            Ok(Some(Ok(chunk))) => assembler.push(chunk, on_delta),
        }
    }
    Ok(assembler.finish(false, on_delta))
}

#[derive(Clone, Copy)]
enum Expired {
    Idle,
    Call,
}

impl Expired {
    fn into_error(self, options: CallOptions) -> LlmError {
        match self {
            Expired::Idle => LlmError::IdleTimeout(options.idle_timeout.unwrap_or_default()),
            Expired::Call => LlmError::CallTimeout(options.call_timeout.unwrap_or_default()),
        }
    }
}

/// The earlier of "idle deadline from now" and the whole-call deadline.
fn next_deadline(
    now: Instant,
    options: CallOptions,
    call_deadline: Option<Instant>,
) -> Option<(Instant, Expired)> {
    let idle = options.idle_timeout.map(|t| (now + t, Expired::Idle));
    let call = call_deadline.map(|d| (d, Expired::Call));
    match (idle, call) {
        (Some(i), Some(c)) => Some(if c.0 <= i.0 { c } else { i }),
        (i, c) => i.or(c),
    }
}

async fn with_deadline<F: Future>(
    deadline: Option<(Instant, Expired)>,
    fut: F,
) -> Result<F::Output, Expired> {
    match deadline {
        None => Ok(fut.await),
        Some((at, kind)) => tokio::time::timeout_at(at, fut).await.map_err(|_| kind),
    }
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Accumulates chunks. Text that could be the start of a DSML tool-call block
/// is held back from the live stream until it can no longer be one.
#[derive(Default)]
pub struct Assembler {
    content: String,
    reasoning: String,
    calls: BTreeMap<usize, PartialCall>,
    finish: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
    /// Bytes of `content` already shown live.
    emitted: usize,
    /// Whether the DSML hold-back decision is settled (`true` = streaming live).
    live: bool,
    /// Text that opens like a text-form tool call is held back too
    /// (docs §2.11.1).
    text_calls: bool,
}

impl Assembler {
    /// An assembler that also holds back text opening like a text-form
    /// tool call when `text_calls` is set.
    pub fn holding_text_calls(text_calls: bool) -> Self {
        Assembler {
            text_calls,
            ..Assembler::default()
        }
    }

    /// Whether the text so far must still be held back: `None` undecided,
    /// `Some(true)` held until the reply ends, `Some(false)` plain.
    fn hold(&self) -> Option<bool> {
        let dsml = match dsml_prefix_state(&self.content) {
            PrefixState::Dsml => Some(true),
            PrefixState::Undecided => None,
            PrefixState::Plain => Some(false),
        };
        let call = if self.text_calls {
            super::text_calls::may_open_call(&self.content)
        } else {
            Some(false)
        };
        match (dsml, call) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (None, _) | (_, None) => None,
            _ => Some(false),
        }
    }

    pub fn push(&mut self, chunk: StreamChunk, on_delta: &mut (dyn FnMut(LiveDelta<'_>) + Send)) {
        match chunk {
            StreamChunk::Text(t) if !t.is_empty() => {
                self.content.push_str(&t);
                if !self.live {
                    match self.hold() {
                        None | Some(true) => {
                            on_delta(LiveDelta::Held(&t));
                            return;
                        }
                        Some(false) => self.live = true,
                    }
                }
                if self.emitted < self.content.len() {
                    on_delta(LiveDelta::Text(&self.content[self.emitted..]));
                    self.emitted = self.content.len();
                }
            }
            StreamChunk::Text(_) => {}
            StreamChunk::Reasoning(r) if !r.is_empty() => {
                self.reasoning.push_str(&r);
                on_delta(LiveDelta::Reasoning(&r));
            }
            StreamChunk::Reasoning(_) => {}
            StreamChunk::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } => {
                let call = self.calls.entry(index).or_default();
                if let Some(id) = id.filter(|s| !s.is_empty()) {
                    call.id = id;
                }
                if let Some(name) = name.filter(|s| !s.is_empty()) {
                    // OpenAI sends the name once; some relays resend it with every
                    // fragment, a few split it before the arguments start.
                    if call.name.is_empty() {
                        call.name = name;
                    } else if call.name != name && call.arguments.is_empty() {
                        call.name.push_str(&name);
                    }
                }
                call.arguments.push_str(&arguments);
            }
            StreamChunk::Finish(reason) => self.finish = Some(reason),
            StreamChunk::Usage(u) => self.usage = Some(u),
            StreamChunk::Model(m) => self.model = Some(m),
        }
    }

    pub fn finish(
        mut self,
        cancelled: bool,
        on_delta: &mut (dyn FnMut(LiveDelta<'_>) + Send),
    ) -> Response {
        let mut tool_calls: Vec<ToolCall> = std::mem::take(&mut self.calls)
            .into_iter()
            .enumerate()
            .map(|(n, (_, c))| {
                let id = if c.id.is_empty() {
                    format!("call_{n}")
                } else {
                    c.id
                };
                ToolCall::new(id, c.name, c.arguments)
            })
            .collect();
        let mut dsml_parsed = false;
        if tool_calls.is_empty()
            && !cancelled
            && let Some(parsed) = parse_pure_dsml(&self.content)
        {
            tool_calls = parsed;
            self.content.clear();
            dsml_parsed = true;
        }
        // Text held back as a possible DSML opener or text-form call is
        // released only if it turned out to be neither; markup stays for the
        // loop's leak check, a call for the loop to run.
        let text_call = self.text_calls
            && !cancelled
            && tool_calls.is_empty()
            && super::text_calls::parse(&self.content).is_some();
        let mut held_back = String::new();
        if let Some(unshown) = self.content.get(self.emitted..).filter(|s| !s.is_empty()) {
            if !dsml_parsed && !text_call && !contains_tool_markup(&self.content) {
                on_delta(LiveDelta::Text(unshown));
            } else {
                held_back = unshown.to_string();
            }
        }
        let finish_reason = self.finish.as_deref().map(normalise_finish_reason);
        let content_filtered = finish_reason.as_deref().is_some_and(is_content_filter);
        Response {
            content: self.content,
            reasoning: self.reasoning,
            tool_calls,
            finish_reason,
            content_filtered,
            usage: self.usage,
            model: self.model,
            cancelled,
            dsml_parsed,
            held_back,
        }
    }
}

/// Relays that concatenate the same reason (`stopstop`) are de-duplicated and
/// Anthropic's `tool_use` reads as `tool_calls` (docs §2.11).
pub fn normalise_finish_reason(raw: &str) -> String {
    let raw = raw.trim();
    let mut reason = raw.to_string();
    for unit_len in 1..=raw.len() / 2 {
        if raw.len().is_multiple_of(unit_len) && raw.is_char_boundary(unit_len) {
            let unit = &raw[..unit_len];
            if unit.repeat(raw.len() / unit_len) == raw {
                reason = unit.to_string();
                break;
            }
        }
    }
    if reason == "tool_use" {
        reason = "tool_calls".to_string();
    }
    reason
}

/// `content_filter`, or Gemini's upper-case safety reasons.
pub fn is_content_filter(reason: &str) -> bool {
    matches!(
        reason,
        "content_filter"
            | "SAFETY"
            | "RECITATION"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT"
            | "IMAGE_RECITATION"
    )
}

const DSML_OPENER: &str = "<||dsml||tool_calls";

enum PrefixState {
    Undecided,
    Dsml,
    Plain,
}

/// Looks at the first 80 characters with whitespace removed, lower-cased and
/// every bar variant folded to `|`.
fn dsml_prefix_state(text: &str) -> PrefixState {
    let folded: String = text
        .chars()
        .filter(|c| !c.is_whitespace())
        .take(80)
        .map(fold_bar)
        .flat_map(char::to_lowercase)
        .collect();
    if folded.starts_with(DSML_OPENER) {
        PrefixState::Dsml
    } else if DSML_OPENER.starts_with(&folded) {
        PrefixState::Undecided
    } else {
        PrefixState::Plain
    }
}

fn fold_bar(c: char) -> char {
    match c {
        '\u{2502}' | '\u{FF5C}' => '|',
        c => c,
    }
}

static BAR: &str = r"[|\x{2502}\x{FF5C}]{1,2}";

static DSML_BLOCK: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?is)<{BAR}dsml{BAR}tool_calls\s*>(.*?)(?:</{BAR}dsml{BAR}tool_calls\s*>|\z)"
    ))
    .ok()
});

static DSML_INVOKE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r#"(?is)<{BAR}dsml{BAR}invoke\s+name\s*=\s*"([^"]*)"\s*>(.*?)(?:</{BAR}dsml{BAR}invoke\s*>|\z)"#
    )).ok()
});

static DSML_PARAM: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r#"(?is)<{BAR}dsml{BAR}parameter\s+name\s*=\s*"([^"]*)"([^>]*)>(.*?)</{BAR}dsml{BAR}parameter\s*>"#
    )).ok()
});

/// Markup leak check for final answers (docs §1.5 step 4): regex A catches
/// `<invoke`, `</parameter`, `<tool_calls`, `<tool_call`, `<dsml` words; regex B catches
/// two bars followed by `dsml|tool_calls|invoke`.
static MARKUP_A: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)<\s?/?(?:invoke|parameter|tool_calls?|dsml)\b").ok());
static MARKUP_B: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)<[|\x{2502}\x{FF5C}]{2}(?:dsml|tool_calls|invoke)").ok());

pub fn contains_tool_markup(text: &str) -> bool {
    // The patterns are literals; `regexes_compile` proves they are Some.
    [&*MARKUP_A, &*MARKUP_B]
        .iter()
        .any(|re| re.as_ref().is_some_and(|r| r.is_match(text)))
}

/// A reply that is *only* a DSML block (whitespace around it allowed) becomes
/// tool calls with ids `dsml_call_<n>`; text outside the block means it is
/// not treated as calls (docs §2.11).
pub fn parse_pure_dsml(text: &str) -> Option<Vec<ToolCall>> {
    let block = DSML_BLOCK.as_ref()?.captures(text)?;
    let whole = block.get(0)?;
    if !text[..whole.start()].trim().is_empty() || !text[whole.end()..].trim().is_empty() {
        return None;
    }
    let inner = block.get(1)?.as_str();
    let mut calls = Vec::new();
    let (invoke_re, param_re) = (DSML_INVOKE.as_ref()?, DSML_PARAM.as_ref()?);
    for (n, invoke) in invoke_re.captures_iter(inner).enumerate() {
        let name = invoke.get(1)?.as_str().trim().to_string();
        let body = invoke.get(2)?.as_str();
        let mut args = serde_json::Map::new();
        for p in param_re.captures_iter(body) {
            let key = p.get(1)?.as_str().to_string();
            let attrs = p.get(2).map_or("", |m| m.as_str()).to_ascii_lowercase();
            let raw = p.get(3).map_or("", |m| m.as_str()).trim();
            let value = if attrs.contains("string=\"false\"") {
                serde_json::from_str(raw).unwrap_or_else(|_| raw.into())
            } else {
                raw.into()
            };
            args.insert(key, value);
        }
        let arguments = serde_json::Value::Object(args).to_string();
        calls.push(ToolCall::new(format!("dsml_call_{n}"), name, arguments));
    }
    (!calls.is_empty()).then_some(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: Vec<StreamChunk>) -> (Response, String) {
        let mut a = Assembler::default();
        let mut live = String::new();
        let mut sink = |d: LiveDelta<'_>| {
            if let LiveDelta::Text(t) = d {
                live.push_str(t)
            }
        };
        for c in chunks {
            a.push(c, &mut sink);
        }
        let r = a.finish(false, &mut sink);
        (r, live)
    }

    #[test]
    fn tool_call_fragments_assemble_by_index() {
        let delta =
            |index, id: Option<&str>, name: Option<&str>, args: &str| StreamChunk::ToolCallDelta {
                index,
                id: id.map(String::from),
                name: name.map(String::from),
                arguments: args.to_string(),
            };
        let (r, _) = run(vec![
            delta(0, Some("a"), Some("read_file"), ""),
            delta(1, Some("b"), Some("list_dir"), "{\"pa"),
            delta(0, None, None, "{\"path\":"),
            delta(0, None, None, "\"x\"}"),
            delta(1, None, None, "th\":\".\"}"),
            StreamChunk::Finish("tool_callstool_calls".into()),
        ]);
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[0].id, "a");
        assert_eq!(r.tool_calls[0].function.arguments, "{\"path\":\"x\"}");
        assert_eq!(r.tool_calls[1].name(), "list_dir");
        assert_eq!(r.tool_calls[1].function.arguments, "{\"path\":\".\"}");
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn finish_reason_normalisation() {
        assert_eq!(normalise_finish_reason("stopstop"), "stop");
        assert_eq!(normalise_finish_reason("stop"), "stop");
        assert_eq!(
            normalise_finish_reason("content_filtercontent_filter"),
            "content_filter"
        );
        assert_eq!(normalise_finish_reason("tool_use"), "tool_calls");
        assert_eq!(normalise_finish_reason("length"), "length");
        assert!(is_content_filter("SAFETY"));
        assert!(!is_content_filter("stop"));
    }

    #[test]
    fn plain_text_streams_live_after_first_chunk() {
        let (r, live) = run(vec![
            StreamChunk::Text("Hel".into()),
            StreamChunk::Text("lo".into()),
        ]);
        assert_eq!(r.content, "Hello");
        assert_eq!(live, "Hello");
    }

    #[test]
    fn pure_dsml_becomes_tool_calls_and_is_never_shown() {
        let text = "<｜｜DSML｜｜tool_calls>\n<｜｜DSML｜｜invoke name=\"read_file\">\n<｜｜DSML｜｜parameter name=\"path\" string=\"true\">notes.md</｜｜DSML｜｜parameter>\n<｜｜DSML｜｜parameter name=\"limit\" string=\"false\">5</｜｜DSML｜｜parameter>\n</｜｜DSML｜｜invoke>\n</｜｜DSML｜｜tool_calls>";
        let chunks = text
            .chars()
            .collect::<Vec<_>>()
            .chunks(7)
            .map(|c| StreamChunk::Text(c.iter().collect()))
            .collect();
        let (r, live) = run(chunks);
        assert!(live.is_empty(), "markup leaked live: {live}");
        assert!(r.dsml_parsed);
        assert_eq!(r.content, "");
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].id, "dsml_call_0");
        let args: serde_json::Value =
            serde_json::from_str(&r.tool_calls[0].function.arguments).unwrap();
        assert_eq!(args, serde_json::json!({"path": "notes.md", "limit": 5}));
    }

    #[test]
    fn dsml_with_text_around_is_not_parsed_and_not_shown() {
        let text = "Sure: <||DSML||tool_calls><||DSML||invoke name=\"x\"></||DSML||invoke></||DSML||tool_calls>";
        assert!(parse_pure_dsml(text).is_none());
        assert!(contains_tool_markup(text));
        let (r, _) = run(vec![
            StreamChunk::Text(
                "<||DSML||tool_calls><||DSML||invoke name=\"x\"></||DSML||invoke>".into(),
            ),
            StreamChunk::Text("</||DSML||tool_calls> trailing words".into()),
        ]);
        assert!(r.tool_calls.is_empty());
        assert!(contains_tool_markup(&r.content));
    }

    #[test]
    fn regexes_compile() {
        for re in [
            &*DSML_BLOCK,
            &*DSML_INVOKE,
            &*DSML_PARAM,
            &*MARKUP_A,
            &*MARKUP_B,
        ] {
            assert!(re.is_some());
        }
    }

    #[test]
    fn markup_regexes() {
        assert!(contains_tool_markup("here <invoke name=x>"));
        assert!(contains_tool_markup("</parameter>"));
        assert!(contains_tool_markup("< tool_calls>"));
        assert!(contains_tool_markup("<│|invoke"));
        assert!(!contains_tool_markup("a < b and invoke later"));
        assert!(!contains_tool_markup("<invoker>"));
    }

    #[test]
    fn text_form_calls_are_held_back_and_other_text_released() {
        let feed = |text: &str| {
            let mut a = Assembler::holding_text_calls(true);
            let mut live = String::new();
            let mut sink = |d: LiveDelta<'_>| {
                if let LiveDelta::Text(t) = d {
                    live.push_str(t)
                }
            };
            for piece in text.as_bytes().chunks(5) {
                a.push(
                    StreamChunk::Text(String::from_utf8_lossy(piece).into_owned()),
                    &mut sink,
                );
            }
            let r = a.finish(false, &mut sink);
            (r, live)
        };
        let call =
            "```json\n{\"name\": \"get_market_data\", \"arguments\": {\"symbol\": \"IBM\"}}\n```";
        let (r, live) = feed(call);
        assert!(live.is_empty(), "a call leaked live: {live}");
        assert_eq!(r.content, call, "the loop reads the call from the content");
        let code = "```python\nprint(1)\n```";
        let (_, live) = feed(code);
        assert_eq!(
            live, code,
            "a code block that is no call is shown at the end"
        );
        let (_, live) = feed("Plain words stream at once.");
        assert_eq!(live, "Plain words stream at once.");
    }

    #[test]
    fn short_lt_text_is_released_at_end() {
        let (r, live) = run(vec![StreamChunk::Text("<".into())]);
        assert_eq!(r.content, "<");
        assert_eq!(live, "<");
    }
}
