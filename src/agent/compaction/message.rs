//! What the compaction layers need to know about a message. The live loop
//! compacts [`Message`]s; the `vibedesk compact` inspector compacts raw JSON
//! objects exactly as read (key order and unknown fields kept), so that its
//! output can be compared with the original's byte for byte.

use serde_json::{Map, Value};

use crate::llm::tokens::{python_json_chars, python_json_string};
use crate::model::Message;

pub trait ChatMessage: Clone {
    /// A text taken out by [`ChatMessage::replace_text`]: owned where the
    /// message owned it, left where it was where the message was read in
    /// place (the `compact` command does not keep originals).
    type Replaced;

    fn role(&self) -> &str;
    /// The content when it is a string; layers 1 and 2 touch nothing else.
    fn text(&self) -> Option<&str>;
    /// Characters of a string content when known without reading the text
    /// (a message read in place counts them once while it is read); `None`
    /// means ask [`ChatMessage::text`].
    fn known_text_chars(&self) -> Option<usize> {
        None
    }
    fn set_text(&mut self, text: String);
    /// Puts `text` in place of a string content and returns the old one
    /// (moved, not copied: layers keep originals for the archive).
    fn replace_text(&mut self, text: String) -> Option<Self::Replaced>;
    /// `(id, function name)` of each tool call, borrowed.
    fn tool_call_refs(&self) -> impl Iterator<Item = (&str, &str)>;
    /// `tool_call_id` of a tool result (empty counts as absent).
    fn tool_call_id(&self) -> Option<&str>;
    /// `{role:"tool", tool_call_id, name, content}`.
    fn tool_result(id: &str, name: &str, content: &str) -> Self;
    fn user(content: String) -> Self;
    /// `json.dumps(self, ensure_ascii=False)`.
    fn python_json(&self) -> String;
    /// Characters of [`ChatMessage::python_json`], without building it.
    fn python_len(&self) -> usize;
}

impl ChatMessage for Message {
    type Replaced = String;

    fn role(&self) -> &str {
        self.role.as_str()
    }

    fn text(&self) -> Option<&str> {
        Some(&self.content)
    }

    fn set_text(&mut self, text: String) {
        self.content = text;
    }

    fn replace_text(&mut self, text: String) -> Option<String> {
        Some(std::mem::replace(&mut self.content, text))
    }

    fn tool_call_refs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.function.name.as_str()))
    }

    fn tool_call_id(&self) -> Option<&str> {
        self.tool_call_id.as_deref().filter(|s| !s.is_empty())
    }

    fn tool_result(id: &str, name: &str, content: &str) -> Self {
        Message::tool_result(id, name, content)
    }

    fn user(content: String) -> Self {
        Message::user(content)
    }

    fn python_json(&self) -> String {
        python_json_string(self)
    }

    fn python_len(&self) -> usize {
        crate::llm::tokens::message_python_len(self)
    }
}

impl ChatMessage for Map<String, Value> {
    type Replaced = String;

    fn role(&self) -> &str {
        self.get("role").and_then(Value::as_str).unwrap_or("")
    }

    fn text(&self) -> Option<&str> {
        self.get("content").and_then(Value::as_str)
    }

    fn set_text(&mut self, text: String) {
        self.insert("content".into(), Value::String(text));
    }

    fn replace_text(&mut self, text: String) -> Option<String> {
        match self.get_mut("content") {
            Some(Value::String(s)) => Some(std::mem::replace(s, text)),
            _ => None,
        }
    }

    fn tool_call_refs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                let id = c.get("id").and_then(Value::as_str).unwrap_or("");
                let name = c
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                (id, name)
            })
    }

    fn tool_call_id(&self) -> Option<&str> {
        self.get("tool_call_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    fn tool_result(id: &str, name: &str, content: &str) -> Self {
        let mut m = Map::new();
        m.insert("role".into(), "tool".into());
        m.insert("tool_call_id".into(), id.into());
        m.insert("name".into(), name.into());
        m.insert("content".into(), content.into());
        m
    }

    fn user(content: String) -> Self {
        let mut m = Map::new();
        m.insert("role".into(), "user".into());
        m.insert("content".into(), content.into());
        m
    }

    fn python_json(&self) -> String {
        python_json_string(self)
    }

    fn python_len(&self) -> usize {
        python_json_chars(self)
    }
}
