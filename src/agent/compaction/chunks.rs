//! Splitting the compacted head into summary chunks (docs §3.6). Whole
//! messages are packed as JSON arrays of at most `limit` characters; a
//! message too large for one chunk is cut into labelled raw fragments whose
//! bodies concatenate back to its exact JSON.

use super::message::ChatMessage;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    #[error("the chunk limit must be at least 2 characters, got {0}")]
    LimitTooSmall(usize),
    #[error(
        "a message of {0} characters cannot be split: the fragment label alone exceeds the chunk limit"
    )]
    NoRoomForFragments(usize),
}

/// One line, ending in a newline, that names the fragment and warns that it
/// is not JSON by itself. The wording is the original's format marker, so
/// chunk boundaries and text match it exactly.
pub fn fragment_label(i: usize, n: usize) -> String {
    format!(
        "[fragment {i}/{n} of one oversized message — raw JSON slice, not valid JSON on its own]\n"
    )
}

pub fn summary_chunks<M: ChatMessage>(
    messages: &[M],
    limit: usize,
) -> Result<Vec<String>, ChunkError> {
    if limit < 2 {
        return Err(ChunkError::LimitTooSmall(limit));
    }
    if messages.is_empty() {
        return Ok(vec!["[]".to_string()]);
    }
    let mut chunks = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut current_len = 2; // the brackets
    let flush = |current: &mut Vec<String>, current_len: &mut usize, chunks: &mut Vec<String>| {
        if !current.is_empty() {
            chunks.push(format!("[{}]", current.join(", ")));
            current.clear();
            *current_len = 2;
        }
    };
    for m in messages {
        let part = m.python_json();
        let part_len = part.chars().count();
        if part_len + 2 > limit {
            flush(&mut current, &mut current_len, &mut chunks);
            chunks.extend(fragments(&part, part_len, limit)?);
            continue;
        }
        let added = part_len + if current.is_empty() { 0 } else { 2 };
        if current_len + added > limit {
            flush(&mut current, &mut current_len, &mut chunks);
            current_len += part_len;
        } else {
            current_len += added;
        }
        current.push(part);
    }
    flush(&mut current, &mut current_len, &mut chunks);
    Ok(chunks)
}

/// N is found by iteration: the label's length depends on N's digits.
fn fragments(raw: &str, raw_len: usize, limit: usize) -> Result<Vec<String>, ChunkError> {
    let mut n = 1usize;
    let capacity = loop {
        let label_len = fragment_label(n, n).chars().count();
        if label_len >= limit {
            return Err(ChunkError::NoRoomForFragments(raw_len));
        }
        let capacity = limit - label_len;
        let needed = raw_len.div_ceil(capacity).max(1);
        if needed <= n {
            break capacity;
        }
        n = needed;
    };
    let chars: Vec<char> = raw.chars().collect();
    Ok(chars
        .chunks(capacity)
        .enumerate()
        .map(|(i, body)| fragment_label(i + 1, n) + &body.iter().collect::<String>())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Message;

    // CL-7 (docs §10.3), exact figures.
    #[test]
    fn exact_packing_figures() {
        let msgs: Vec<Message> = (0..3).map(|_| Message::user("a".repeat(50))).collect();
        let chunks = summary_chunks(&msgs, 130).unwrap();
        assert_eq!(
            chunks.iter().map(|c| c.chars().count()).collect::<Vec<_>>(),
            vec![83, 83, 83]
        );

        let one = vec![Message::user("b".repeat(300))];
        let chunks = summary_chunks(&one, 150).unwrap();
        let lens: Vec<usize> = chunks.iter().map(|c| c.chars().count()).collect();
        assert_eq!(lens, vec![150, 150, 150, 150, 150, 85]);
        assert!(chunks[0].starts_with("[fragment 1/6 ") && chunks[5].starts_with("[fragment 6/6 "));
        assert!(chunks[0].contains("raw JSON slice, not valid JSON on its own"));
        let body: String = chunks
            .iter()
            .map(|c| c.split_once('\n').unwrap().1)
            .collect();
        assert_eq!(body, one[0].python_json());
    }

    #[test]
    fn one_chunk_equals_the_json_dump_and_packing_keeps_every_message() {
        let msgs = vec![Message::user("héllo 👋"), Message::assistant("ok")];
        let chunks = summary_chunks(&msgs, 80_000).unwrap();
        assert_eq!(chunks, vec![crate::llm::tokens::python_json_string(&msgs)]);

        let five: Vec<Message> = (0..5)
            .map(|i| Message::user(format!("{i}:{}", "m".repeat(95))))
            .collect();
        let chunks = summary_chunks(&five, 220).unwrap();
        assert!(chunks.len() >= 3);
        let mut back: Vec<Message> = Vec::new();
        for c in &chunks {
            assert!(c.chars().count() <= 220);
            back.extend(serde_json::from_str::<Vec<Message>>(c).unwrap());
        }
        assert_eq!(back, five);
        assert_eq!(summary_chunks::<Message>(&[], 10).unwrap(), vec!["[]"]);
        assert!(summary_chunks(&five, 1).is_err());
    }
}
