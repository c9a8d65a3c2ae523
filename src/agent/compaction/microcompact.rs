//! Layer 1, microcompact (docs §3.2): every tool result except the last
//! `keep_recent` that is longer than 100 characters becomes `[cleared]`.
//! The caller archives the originals first, so nothing is lost (the original
//! drops them for good, docs §12.3).

use super::message::ChatMessage;

pub const CLEARED: &str = "[cleared]";
/// Results this short are kept: clearing them would save nothing.
pub const SHORT_RESULT_CHARS: usize = 100;

/// A message a layer changed, with its text before the change (moved out,
/// not copied; the archive rebuilds the whole original message from it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Touched<T = String> {
    pub index: usize,
    pub original_text: T,
}

pub fn microcompact<M: ChatMessage>(
    messages: &mut [M],
    keep_recent: usize,
) -> Vec<Touched<M::Replaced>> {
    let tools: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role() == "tool")
        .map(|(i, _)| i)
        .collect();
    if tools.len() <= keep_recent {
        return Vec::new();
    }
    let mut touched = Vec::new();
    for &i in &tools[..tools.len() - keep_recent] {
        let Some(m) = messages.get_mut(i) else {
            continue;
        };
        // A character is at most 4 bytes, so only a result of 101 to 400
        // bytes is read; `nth` stops after 101 characters.
        let long = match m.known_text_chars() {
            Some(chars) => chars > SHORT_RESULT_CHARS,
            None => m.text().is_some_and(|t| {
                t.len() > 4 * SHORT_RESULT_CHARS
                    || (t.len() > SHORT_RESULT_CHARS && t.chars().nth(SHORT_RESULT_CHARS).is_some())
            }),
        };
        if long && let Some(old) = m.replace_text(CLEARED.to_string()) {
            touched.push(Touched {
                index: i,
                original_text: old,
            });
        }
    }
    touched
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Message;

    // CL-2 (docs §10.3).
    #[test]
    fn clears_all_but_the_last_three_long_results() {
        let mut msgs = vec![Message::system("s"), Message::user("u".repeat(500))];
        for i in 0..8 {
            msgs.push(Message::tool_result(format!("c{i}"), "t", "x".repeat(150)));
        }
        msgs.push(Message::tool_result("short", "t", "tiny"));
        let touched = microcompact(&mut msgs, 3);
        assert_eq!(
            touched.len(),
            6,
            "8 long + 1 short: the 6 oldest long ones go"
        );
        let cleared = msgs.iter().filter(|m| m.content == CLEARED).count();
        assert_eq!(cleared, 6);
        assert_eq!(msgs[1].content.len(), 500, "user messages untouched");
        assert_eq!(msgs[9].content.len(), 150);
        assert_eq!(msgs[10].content, "tiny");
        assert_eq!(touched[0].original_text, "x".repeat(150));
    }

    #[test]
    fn short_and_few_results_are_kept() {
        let mut msgs = vec![Message::tool_result("a", "t", "y".repeat(100))];
        for i in 0..3 {
            msgs.push(Message::tool_result(format!("b{i}"), "t", "z".repeat(500)));
        }
        assert!(
            microcompact(&mut msgs, 3).is_empty(),
            "a 100-char result is short"
        );
        let mut few: Vec<Message> = (0..3)
            .map(|i| Message::tool_result(format!("{i}"), "t", "w".repeat(900)))
            .collect();
        assert!(microcompact(&mut few, 3).is_empty());
    }
}
