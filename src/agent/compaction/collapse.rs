//! Layer 2, context collapse (docs §3.3): long messages outside the system
//! prompt and the last `preserve_recent` keep a head and a tail around a
//! marker. A collapsed message is ~1,430 characters, so it is never
//! collapsed twice. Originals are archived by the caller first.

use super::message::ChatMessage;
use super::microcompact::{CLEARED, Touched};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollapseParams {
    pub preserve_recent: usize,
    pub min_chars: usize,
    pub head_chars: usize,
    pub tail_chars: usize,
}

impl Default for CollapseParams {
    fn default() -> Self {
        CollapseParams {
            preserve_recent: 6,
            min_chars: 2_400,
            head_chars: 900,
            tail_chars: 500,
        }
    }
}

/// `head + "\n\n...[n chars collapsed]...\n\n" + tail` in characters, or
/// `None` when the text is not longer than `min_chars` characters.
fn collapsed_form(text: &str, p: CollapseParams) -> Option<String> {
    let bytes = text.as_bytes();
    // One vectorised pass over the whole text: Python's `len` is free, ours
    // is not, so everything else only walks the head and the tail.
    let chars = char_starts(bytes);
    if chars <= p.min_chars {
        return None;
    }
    let (head_end, tail_start) = if chars == bytes.len() {
        (p.head_chars.min(chars), chars - p.tail_chars.min(chars))
    } else {
        (
            byte_of_char(bytes, p.head_chars),
            byte_of_char_from_end(bytes, p.tail_chars),
        )
    };
    let hidden = chars.saturating_sub(p.head_chars + p.tail_chars);
    let mut out = String::with_capacity(head_end + (text.len() - tail_start) + 48);
    out.push_str(text.get(..head_end)?);
    out.push_str("\n\n...[");
    out.push_str(itoa::Buffer::new().format(hidden));
    out.push_str(" chars collapsed]...\n\n");
    out.push_str(text.get(tail_start..)?);
    Some(out)
}

/// Blocks this long are skipped whole by the head and tail walks.
const BLOCK: usize = 64;

fn is_char_start(b: u8) -> bool {
    (b as i8) >= -0x40
}

/// UTF-8 characters in `bytes` (bytes that are not continuation bytes),
/// counted with byte-wide counters over 192-byte chunks (whole vector steps;
/// a u8 cannot overflow) so the compiler vectorises it.
fn char_starts(bytes: &[u8]) -> usize {
    bytes
        .chunks(192)
        .map(|c| usize::from(c.iter().fold(0u8, |n, &b| n + u8::from(is_char_start(b)))))
        .sum()
}

/// Byte offset of character `n` (the text's length when it has no more).
fn byte_of_char(bytes: &[u8], n: usize) -> usize {
    let (mut at, mut need) = (0, n);
    // Skip whole blocks that end before character `n` starts.
    while let Some(block) = bytes.get(at..at + BLOCK) {
        let c = char_starts(block);
        if c > need {
            break;
        }
        need -= c;
        at += BLOCK;
    }
    for (i, &b) in bytes.iter().enumerate().skip(at) {
        if is_char_start(b) {
            if need == 0 {
                return i;
            }
            need -= 1;
        }
    }
    bytes.len()
}

/// Byte offset where the last `n` characters begin (0 when there are fewer).
fn byte_of_char_from_end(bytes: &[u8], n: usize) -> usize {
    if n == 0 {
        return bytes.len();
    }
    let (mut end, mut need) = (bytes.len(), n);
    while end >= BLOCK {
        let c = char_starts(&bytes[end - BLOCK..end]);
        if c >= need {
            break;
        }
        need -= c;
        end -= BLOCK;
    }
    for i in (0..end).rev() {
        if bytes.get(i).copied().is_some_and(is_char_start) {
            need -= 1;
            if need == 0 {
                return i;
            }
        }
    }
    0
}

pub fn collapse<M: ChatMessage>(
    messages: &mut [M],
    p: CollapseParams,
) -> Vec<Touched<M::Replaced>> {
    if messages.len() <= p.preserve_recent + 1 {
        return Vec::new();
    }
    let end = messages.len() - p.preserve_recent;
    let mut touched = Vec::new();
    for (i, m) in messages.iter_mut().enumerate().take(end).skip(1) {
        // Short texts read in place are passed over without unescaping them.
        if m.known_text_chars().is_some_and(|n| n <= p.min_chars) {
            continue;
        }
        let Some(text) = m.text() else { continue };
        if text == CLEARED || text.len() <= p.min_chars {
            continue;
        }
        let Some(collapsed) = collapsed_form(text, p) else {
            continue;
        };
        if let Some(old) = m.replace_text(collapsed) {
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

    // CL-3 (docs §10.3).
    #[test]
    fn collapses_long_messages_outside_the_recent_window() {
        let mut msgs = vec![Message::system("s".repeat(5000))];
        for i in 0..11 {
            msgs.push(Message::user(format!("m{i}-") + &"q".repeat(2_900)));
        }
        let touched = collapse(&mut msgs, CollapseParams::default());
        assert_eq!(
            touched.len(),
            5,
            "12 messages: skip the system one and the last 6"
        );
        assert!(msgs[1].content.contains("collapsed"));
        assert!(msgs[1].content.starts_with("m0-"));
        assert!(!msgs.last().unwrap().content.contains("collapsed"));
        assert_eq!(msgs[0].content.len(), 5000, "system prompt untouched");
    }

    #[test]
    fn exact_shape_of_a_collapsed_message() {
        let mut msgs: Vec<Message> = (0..8).map(|_| Message::user("short")).collect();
        msgs[1] = Message::user("a".repeat(900) + &"b".repeat(1600) + &"c".repeat(500));
        collapse(&mut msgs, CollapseParams::default());
        assert_eq!(msgs[1].content.chars().count(), 1432);
        assert!(
            msgs[1]
                .content
                .contains("\n\n...[1600 chars collapsed]...\n\n")
        );
        assert!(
            msgs[1].content.starts_with(&"a".repeat(900))
                && msgs[1].content.ends_with(&"c".repeat(500))
        );
    }

    /// Non-ASCII text keeps exactly `head` and `tail` characters, the tail
    /// found from the end as the spec's forward count would place it.
    #[test]
    fn multibyte_heads_and_tails_are_cut_on_characters() {
        let text = "é".repeat(900) + &"中".repeat(1_600) + &"🙂".repeat(500);
        for (head, tail) in [(900, 500), (0, 0), (10, 3_000), (3_000, 10), (1, 1)] {
            let p = CollapseParams {
                head_chars: head,
                tail_chars: tail,
                ..CollapseParams::default()
            };
            let out = collapsed_form(&text, p).unwrap();
            let chars: Vec<char> = text.chars().collect();
            let n = chars.len();
            let h: String = chars[..head.min(n)].iter().collect();
            let t: String = chars[n.saturating_sub(tail)..].iter().collect();
            let hidden = n.saturating_sub(head + tail);
            assert_eq!(
                out,
                format!("{h}\n\n...[{hidden} chars collapsed]...\n\n{t}"),
                "head {head} tail {tail}"
            );
        }
    }

    proptest::proptest! {
        /// The block-skipping walks agree with `char_indices` on any text.
        #[test]
        fn char_walks_agree_with_char_indices(s in "(é|中|🙂|a|\n){0,300}", n in 0usize..400) {
            let b = s.as_bytes();
            let starts: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
            proptest::prop_assert_eq!(char_starts(b), starts.len());
            proptest::prop_assert_eq!(byte_of_char(b, n), starts.get(n).copied().unwrap_or(b.len()));
            let from_end = match n {
                0 => b.len(),
                n if n > starts.len() => 0,
                n => starts[starts.len() - n],
            };
            proptest::prop_assert_eq!(byte_of_char_from_end(b, n), from_end);
        }
    }

    #[test]
    fn small_lists_cleared_and_short_messages_are_left_alone() {
        let mut seven: Vec<Message> = (0..7).map(|_| Message::user("z".repeat(3000))).collect();
        assert!(collapse(&mut seven, CollapseParams::default()).is_empty());
        let mut msgs: Vec<Message> = (0..9).map(|_| Message::user("short")).collect();
        msgs[1] = Message::tool_result("a", "t", CLEARED);
        msgs[2] = Message::user("é".repeat(2400));
        assert!(
            collapse(&mut msgs, CollapseParams::default()).is_empty(),
            "2400 chars is not over 2400"
        );
    }
}
