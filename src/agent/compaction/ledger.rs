//! The verification ledger (docs §3.7): results of verified calculations in
//! the compacted head, listed in the handoff so the model does not re-run
//! them after a compaction.

use serde_json::Value;

use super::message::ChatMessage;

const MAX_LINES: usize = 60;

pub fn verification_ledger<M: ChatMessage>(head: &[M]) -> String {
    let mut lines: Vec<String> = Vec::new();
    for m in head.iter().filter(|m| m.role() == "tool") {
        let Some(Value::Object(o)) = m.text().and_then(|t| serde_json::from_str::<Value>(t).ok())
        else {
            continue;
        };
        if o.get("status").and_then(Value::as_str) != Some("ok") {
            continue;
        }
        let s = |k: &str| o.get(k).map(plain).unwrap_or_default();
        let line = match o.get("command").and_then(Value::as_str) {
            Some("calc") if o.contains_key("result_exact") => {
                format!("calc {} = {}", s("expression"), s("result_exact"))
            }
            Some("verify_market_cap") if o.contains_key("verdict") => {
                format!(
                    "market_cap verdict={} dev={}%",
                    s("verdict"),
                    s("deviation_pct")
                )
            }
            Some("verify_valuation") => match o.get("metrics").and_then(Value::as_object) {
                Some(metrics) if !metrics.is_empty() => {
                    let kv: Vec<String> = metrics
                        .iter()
                        .take(8)
                        .map(|(k, v)| format!("{k}={}", plain(v)))
                        .collect();
                    format!("valuation {}", kv.join(", "))
                }
                _ => continue,
            },
            Some("cross_validate") if o.contains_key("all_consistent") => {
                format!(
                    "cross_validate field={} consistent={}",
                    s("field"),
                    s("all_consistent")
                )
            }
            Some("benford") if o.contains_key("reliable") => {
                format!(
                    "benford reliable={} conformity={}",
                    s("reliable"),
                    s("conformity")
                )
            }
            _ => continue,
        };
        if !lines.contains(&line) {
            lines.push(line);
        }
        if lines.len() >= MAX_LINES {
            break;
        }
    }
    lines.join("\n")
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => if *b { "True" } else { "False" }.to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Message;

    #[test]
    fn lists_verified_results_once() {
        let calc = r#"{"status":"ok","command":"calc","expression":"2*21","result_exact":"42"}"#;
        let head = vec![
            Message::tool_result("a", "financial_rigor", calc),
            Message::tool_result("b", "financial_rigor", calc),
            Message::tool_result(
                "c",
                "financial_rigor",
                r#"{"status":"ok","command":"benford","reliable":true,"conformity":"close"}"#,
            ),
            Message::tool_result(
                "d",
                "financial_rigor",
                r#"{"status":"error","command":"calc","result_exact":"1"}"#,
            ),
            Message::tool_result("e", "read_file", "not json"),
        ];
        assert_eq!(
            verification_ledger(&head),
            "calc 2*21 = 42\nbenford reliable=True conformity=close"
        );
    }
}
