//! The model's context window (docs §3.9): how a local server says what it
//! is (llama.cpp's `/props`, Ollama's `/api/show`, an OpenAI-style model
//! list with `max_model_len`), and what a context-size error says about it.
//! Only the reading is here; the provider makes the requests.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// Where to ask a server for its context window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WindowDiscovery {
    /// Do not ask (hosted services; a configured `context_window`).
    #[default]
    None,
    /// llama.cpp's `llama-server`: `GET /props`, `n_ctx` of a slot.
    LlamaCpp,
    /// Ollama: `POST /api/show`, `num_ctx` of the model's parameters.
    Ollama,
    /// `GET <base>/models`, `max_model_len` (vLLM) or a context length.
    Models,
    /// A server on this machine of unknown kind: llama.cpp's way (others
    /// answer 404, and the window is learned from a context-size error).
    Auto,
}

/// Ollama's default `num_ctx` for the OpenAI-compatible endpoint when the
/// model's parameters set none.
pub const OLLAMA_DEFAULT_CTX: u64 = 4096;

/// What a context-size error says: the request's size and the window,
/// when it names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextOverflow {
    pub requested: Option<u64>,
    pub window: Option<u64>,
}

static OVERFLOW: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)exceeds? the (?:available )?context (?:size|length|window)|maximum context length|context[_ ]length[_ ]exceeded|context window (?:is )?(?:too small|exceeded)|prompt is too long|too many tokens",
    )
    .ok()
});
static LLAMA_NUMBERS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)")
        .ok()
});
static WINDOW_NUMBER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:maximum context length is|context size \(|context (?:size|length|window) (?:is |of )?)\s*(\d+)").ok()
});
static REQUESTED_NUMBER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:resulted in|you requested|request \(|prompt (?:has|is) |n_prompt_tokens\W+)\s*(\d+)").ok()
});

/// Reads a server's error message as a context-size error, if it is one.
pub fn parse_overflow(message: &str) -> Option<ContextOverflow> {
    if !OVERFLOW.as_ref()?.is_match(message) {
        return None;
    }
    let number = |re: &LazyLock<Option<Regex>>, group: usize| {
        re.as_ref()?
            .captures(message)?
            .get(group)?
            .as_str()
            .parse::<u64>()
            .ok()
    };
    if let (Some(requested), Some(window)) = (number(&LLAMA_NUMBERS, 1), number(&LLAMA_NUMBERS, 2))
    {
        return Some(ContextOverflow {
            requested: Some(requested),
            window: Some(window),
        });
    }
    Some(ContextOverflow {
        requested: number(&REQUESTED_NUMBER, 1),
        window: number(&WINDOW_NUMBER, 1).filter(|w| *w > 0),
    })
}

/// llama.cpp's `/props`: the slot's `n_ctx` (a request must fit one slot).
pub fn from_llamacpp_props(v: &Value) -> Option<u64> {
    let settings = v.get("default_generation_settings");
    [
        settings.and_then(|s| s.get("n_ctx")),
        settings
            .and_then(|s| s.get("params"))
            .and_then(|p| p.get("n_ctx")),
        v.get("n_ctx"),
    ]
    .into_iter()
    .flatten()
    .find_map(Value::as_u64)
    .filter(|n| *n > 0)
}

/// Ollama's `/api/show`: `num_ctx` from the model's parameters; else the
/// model's trained length capped at Ollama's default window, which is what
/// its OpenAI-compatible endpoint uses.
pub fn from_ollama_show(v: &Value) -> Option<u64> {
    let num_ctx = v.get("parameters").and_then(Value::as_str).and_then(|p| {
        p.lines().find_map(|l| {
            let mut parts = l.split_whitespace();
            (parts.next() == Some("num_ctx"))
                .then(|| parts.next()?.parse::<u64>().ok())
                .flatten()
        })
    });
    if let Some(n) = num_ctx.filter(|n| *n > 0) {
        return Some(n);
    }
    let trained = v
        .get("model_info")
        .and_then(Value::as_object)
        .and_then(|info| {
            info.iter()
                .find(|(k, _)| k.ends_with(".context_length"))
                .and_then(|(_, n)| n.as_u64())
        });
    Some(trained.map_or(OLLAMA_DEFAULT_CTX, |t| t.min(OLLAMA_DEFAULT_CTX)))
}

/// An OpenAI-style model list: the entry named `model` (else the first),
/// its `max_model_len` (vLLM) or a context length field.
pub fn from_model_list(v: &Value, model: &str) -> Option<u64> {
    let list = v.get("data").and_then(Value::as_array)?;
    let entry = list
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
        .or_else(|| list.first())?;
    [
        "max_model_len",
        "context_length",
        "max_context_length",
        "context_window",
    ]
    .iter()
    .find_map(|k| entry.get(*k).and_then(Value::as_u64))
    .filter(|n| *n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn context_errors_are_read_with_their_numbers() {
        assert_eq!(
            parse_overflow(
                "request (13404 tokens) exceeds the available context size (8192 tokens), try increasing it"
            ),
            Some(ContextOverflow {
                requested: Some(13404),
                window: Some(8192)
            })
        );
        assert_eq!(
            parse_overflow(
                "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion)."
            ),
            Some(ContextOverflow {
                requested: Some(5000),
                window: Some(4096)
            })
        );
        assert_eq!(
            parse_overflow("the request exceeds the available context size, try increasing it"),
            Some(ContextOverflow::default())
        );
        assert_eq!(parse_overflow("Incorrect API key provided"), None);
    }

    #[test]
    fn servers_say_their_window() {
        let props =
            json!({"default_generation_settings": {"n_ctx": 8192, "params": {}}, "total_slots": 1});
        assert_eq!(from_llamacpp_props(&props), Some(8192));
        assert_eq!(from_llamacpp_props(&json!({"build_info": "b1"})), None);
        let show = json!({"parameters": "stop \"<|im_end|>\"\nnum_ctx 16384", "model_info": {"qwen2.context_length": 32768}});
        assert_eq!(from_ollama_show(&show), Some(16384));
        let show = json!({"model_info": {"qwen2.context_length": 32768}});
        assert_eq!(from_ollama_show(&show), Some(OLLAMA_DEFAULT_CTX));
        let models = json!({"data": [{"id": "a", "max_model_len": 2048}, {"id": "b", "max_model_len": 32768}]});
        assert_eq!(from_model_list(&models, "b"), Some(32768));
        assert_eq!(from_model_list(&models, "zzz"), Some(2048));
        assert_eq!(from_model_list(&json!({"data": [{"id": "x"}]}), "x"), None);
    }

    #[test]
    fn regexes_compile() {
        for re in [
            &*OVERFLOW,
            &*LLAMA_NUMBERS,
            &*WINDOW_NUMBER,
            &*REQUESTED_NUMBER,
        ] {
            assert!(re.is_some());
        }
    }
}
