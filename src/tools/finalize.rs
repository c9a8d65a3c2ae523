//! Turning a raw tool result into what the model, the trace and the UI see
//! (docs §2.5, §2.7).

use serde_json::Value;

/// The first `chars` characters, for previews; lives in [`crate::text`] so
/// that the `llm` room can cut text without using tool code.
pub use crate::text::preview;

/// Spec §2.5 step 3: a JSON object whose `status` (trimmed, case-folded) is
/// one of error/failed/failure/cancelled/canceled, or with `ok: false` or
/// `success: false`, is a failure. Anything else, plain text included, is a
/// success.
pub fn is_success(raw: &str) -> bool {
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(raw) else {
        return true;
    };
    if let Some(status) = obj.get("status").and_then(Value::as_str) {
        let s = status.trim().to_lowercase();
        if matches!(
            s.as_str(),
            "error" | "failed" | "failure" | "cancelled" | "canceled"
        ) {
            return false;
        }
    }
    !(obj.get("ok") == Some(&Value::Bool(false)) || obj.get("success") == Some(&Value::Bool(false)))
}

/// The `error_code` of a structured failure, if it has one.
pub fn error_code(raw: &str) -> Option<String> {
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(raw) else {
        return None;
    };
    obj.get("error_code")
        .and_then(Value::as_str)
        .map(String::from)
}

fn truncation_notice(shown: usize, total: usize) -> String {
    format!(
        "\n\n[TRUNCATED: {shown} of {total} characters delivered. The rest was cut to protect the context window. Narrow the request (fewer rows, a shorter span) or use a paging parameter such as offset to read the rest.]"
    )
}

/// Spec §2.7: results longer than `limit` characters keep a head and end with
/// a notice naming how much was delivered; the total never exceeds `limit`.
pub fn truncate_for_model(raw: &str, limit: usize) -> String {
    let total = raw.chars().count();
    if total <= limit {
        return raw.to_string();
    }
    let notice_len = truncation_notice(limit, total).chars().count();
    if notice_len >= limit {
        return truncation_notice(limit, total)
            .chars()
            .take(limit)
            .collect();
    }
    let body_len = limit - notice_len;
    let body: String = raw.chars().take(body_len).collect();
    body + &truncation_notice(body_len, total)
}

/// Arguments for events: every string value cut to 200 characters (docs §1.9).
pub fn preview_args(args: &Value) -> Value {
    match args {
        Value::String(s) => Value::String(preview(s, 200)),
        Value::Array(a) => Value::Array(a.iter().map(preview_args).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), preview_args(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_detection() {
        assert!(is_success("plain text"));
        assert!(is_success(""));
        assert!(is_success("[1,2]"));
        assert!(is_success(r#"{"status":"skipped"}"#));
        assert!(is_success(r#"{"status":"ok"}"#));
        assert!(!is_success(r#"{"status":" Failed "}"#));
        assert!(!is_success(r#"{"status":"canceled"}"#));
        assert!(!is_success(r#"{"ok":false}"#));
        assert!(!is_success(r#"{"success":false,"data":1}"#));
        assert_eq!(
            error_code(r#"{"status":"error","error_code":"tool_timeout"}"#).as_deref(),
            Some("tool_timeout")
        );
    }

    // TP-1 (docs §10.7): exact truncation figures.
    #[test]
    fn truncation_matches_the_original() {
        let out = truncate_for_model(&"x".repeat(20_000), 10_000);
        assert!(out.chars().count() <= 10_000);
        assert!(out.contains("9794 of 20000"), "{}", &out[out.len() - 200..]);
        assert_eq!(out.chars().count(), 9_999);
        let exact = "y".repeat(10_000);
        assert_eq!(truncate_for_model(&exact, 10_000), exact);
        let tiny = truncate_for_model(&"z".repeat(500), 50);
        assert_eq!(tiny.chars().count(), 50);
        assert!(tiny.starts_with("\n\n[TRUNCATED"));
    }

    #[test]
    fn previews_cut_on_char_boundaries() {
        assert_eq!(preview("价格价格", 2), "价格");
        assert_eq!(preview("ab", 5), "ab");
        let v = preview_args(&serde_json::json!({"a": "x".repeat(300), "b": [1, "y"]}));
        assert_eq!(v["a"].as_str().unwrap().len(), 200);
        assert_eq!(v["b"][1], "y");
    }
}
