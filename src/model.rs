//! The conversation protocol shared by every room: messages, tool calls, tool
//! specs and token usage, serialised in the OpenAI chat shape so that
//! `messages.jsonl`, transcripts and provider requests all read the same.
//! [`contract`] holds the built-in tools' argument and output types;
//! [`universe`] lists the embedded offline market's tickers.

pub mod approval;
pub mod contract;
pub mod factor;
pub mod names;
pub mod quant;
pub mod stats;
pub mod sweep;
pub mod team_rules;
pub mod tearsheet;
pub mod universe;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// How a compaction handoff summary begins: a user-role message written by
/// the engine in place of the earlier conversation, not by the user.
pub const HANDOFF_PREFIX: &str =
    "[The earlier conversation was compressed into this handoff summary;";

/// One chat message. `content` is always a string here: the wire's `null`
/// (assistant turns that only call tools) and multi-part arrays (text parts
/// joined) both read as text, so the rest of the engine never branches on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    #[serde(default, deserialize_with = "content_from_wire")]
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

impl Message {
    /// A message with only a role and text.
    pub fn plain_with_role(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            reasoning_content: None,
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Self::plain_with_role(Role::System, content)
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::plain_with_role(Role::User, content)
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain_with_role(Role::Assistant, content)
    }

    /// An assistant turn that requests tools (docs §4.5).
    pub fn assistant_tool_calls(
        content: impl Into<String>,
        tool_calls: Vec<ToolCall>,
        reasoning_content: Option<String>,
    ) -> Self {
        Message {
            tool_calls,
            reasoning_content,
            ..Self::plain_with_role(Role::Assistant, content)
        }
    }

    /// The result of one tool call: `{role:"tool", tool_call_id, name, content}`.
    pub fn tool_result(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        Message {
            tool_call_id: Some(tool_call_id.into()),
            name: Some(name.into()),
            ..Self::plain_with_role(Role::Tool, content)
        }
    }

    /// A steering instruction from the engine. Always a *user* message with an
    /// inline `<system>` tag: providers such as Anthropic reject system messages
    /// after index 0, and the original mixes both forms (docs §12.1).
    pub fn steering(text: &str) -> Self {
        Self::user(format!("<system>{}</system>", text.trim()))
    }
}

fn content_from_wire<'de, D: Deserializer<'de>>(de: D) -> Result<String, D::Error> {
    let value = Option::<Value>::deserialize(de)?;
    Ok(match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s,
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                Value::Object(o) => o.get("text").and_then(Value::as_str),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(""),
        Some(other) => other.to_string(),
    })
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    pub function: FunctionCall,
}

fn function_kind() -> String {
    "function".to_string()
}

impl ToolCall {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            kind: function_kind(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
        }
    }

    pub fn name(&self) -> &str {
        &self.function.name
    }
}

/// `arguments` stays the JSON *string* the model produced: it may be invalid
/// JSON, and the scheduler reports that back to the model rather than guessing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

/// A tool as offered to the model. Serialises to the OpenAI function schema.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

impl ToolSpec {
    /// `{type:"function", function:{name, description, parameters}}` (docs §2.1).
    pub fn to_openai(&self) -> Value {
        let parameters = if self.parameters.is_object() {
            self.parameters.clone()
        } else {
            serde_json::json!({"type": "object", "properties": {}, "required": []})
        };
        serde_json::json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            }
        })
    }
}

/// Token usage of one model call, normalised (docs §1.3 step 9).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
}

impl Usage {
    /// Builds a usage record from raw provider numbers: negatives and garbage
    /// become 0, a missing total is derived, and an all-zero record is `None`.
    pub fn normalised(input: Option<i64>, output: Option<i64>, total: Option<i64>) -> Option<Self> {
        let clamp = |v: Option<i64>| v.filter(|v| *v > 0).map(|v| v as u64).unwrap_or(0);
        let input_tokens = clamp(input);
        let output_tokens = clamp(output);
        let total_tokens = match clamp(total) {
            0 => input_tokens + output_tokens,
            t => t,
        };
        (input_tokens + output_tokens + total_tokens > 0).then_some(Usage {
            input_tokens,
            output_tokens,
            total_tokens,
        })
    }

    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_array_content_read_as_text() {
        let m: Message = serde_json::from_str(
            r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}"#,
        )
        .unwrap();
        assert_eq!(m.content, "");
        assert_eq!(m.tool_calls[0].name(), "f");
        let m: Message = serde_json::from_str(
            r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#,
        )
        .unwrap();
        assert_eq!(m.content, "ab");
    }

    #[test]
    fn round_trip_keeps_tool_fields() {
        let m = Message::tool_result("c1", "read_file", "{\"ok\":true}");
        let s = serde_json::to_string(&m).unwrap();
        assert!(s.contains("\"tool_call_id\":\"c1\""));
        assert_eq!(serde_json::from_str::<Message>(&s).unwrap(), m);
        let plain = serde_json::to_string(&Message::user("hi")).unwrap();
        assert_eq!(plain, r#"{"role":"user","content":"hi"}"#);
    }

    #[test]
    fn steering_is_a_user_message_with_system_tag() {
        let m = Message::steering(" skip it ");
        assert_eq!(m.role, Role::User);
        assert_eq!(m.content, "<system>skip it</system>");
    }

    #[test]
    fn usage_normalisation() {
        assert_eq!(
            Usage::normalised(Some(10), Some(5), None)
                .unwrap()
                .total_tokens,
            15
        );
        assert_eq!(
            Usage::normalised(Some(-3), Some(5), Some(9))
                .unwrap()
                .input_tokens,
            0
        );
        assert!(Usage::normalised(Some(0), None, Some(-1)).is_none());
    }
}
