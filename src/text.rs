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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preview_counts_characters_not_bytes() {
        assert_eq!(preview("价格价格", 3), "价格价");
        assert_eq!(preview("abc", 0), "");
        assert_eq!(preview("abc", 3), "abc");
    }
}
