//! Text-cutting helpers shared by rooms that must not depend on one another
//! (ARCHITECTURE: `llm` uses no tool code, yet the offline planner and tool
//! finalisation cut text the same way). This module uses nothing of the
//! crate; anything may use it.

/// The first `chars` characters of `text`, cut on a character boundary, for
/// previews.
pub fn preview(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((i, _)) => text[..i].to_string(),
        None => text.to_string(),
    }
}

/// The pieces of `bytes` between `\n`s, exactly as `bytes.split(|b| *b ==
/// b'\n')` gives them (a trailing newline yields a last empty piece), but
/// found with memchr: on logs of tens of megabytes the byte-by-byte split
/// was a quarter of the reading time.
pub fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    memchr::memchr_iter(b'\n', bytes)
        .chain(std::iter::once(bytes.len()))
        .map(move |end| {
            let line = &bytes[start..end];
            start = end + 1;
            line
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preview_counts_characters_not_bytes() {
        assert_eq!(preview("价格价格", 3), "价格价");
        assert_eq!(preview("abc", 0), "");
        assert_eq!(preview("abc", 3), "abc");
    }

    #[test]
    fn lines_split_as_split_does() {
        for text in ["", "a", "a\n", "a\nb", "\n\n", "a\n\nb\n", "\u{e9}\nx\r\n"] {
            let ours: Vec<&[u8]> = lines(text.as_bytes()).collect();
            let std: Vec<&[u8]> = text.as_bytes().split(|b| *b == b'\n').collect();
            assert_eq!(ours, std, "{text:?}");
        }
    }
}
