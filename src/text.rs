//! Text helpers shared by rooms that must not depend on one another
//! (ARCHITECTURE: `llm` uses no tool code, yet the offline planner and tool
//! finalisation cut text the same way; `config.toml`'s checks and the
//! backtest's `config.json` checks suggest keys the same way). This module
//! uses nothing of the crate; anything may use it.

pub mod redact;

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The closest of `candidates` within edit distance 2 (case-insensitive).
pub fn suggest<'a>(given: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let g = given.to_ascii_lowercase();
    candidates
        .iter()
        .map(|c| (edit_distance(&g, c), *c))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Up to `n` of `candidates` closest to `given`, best first: those whose
/// last `__` part is `given` (a bare MCP tool name for `mcp__server__tool`),
/// then those containing it or contained in it, then those within an edit
/// distance of a third of its length (at least 2); ties keep the
/// candidates' order. Case-insensitive.
pub fn closest<'a>(given: &str, candidates: &[&'a str], n: usize) -> Vec<&'a str> {
    let g = given.to_ascii_lowercase();
    if g.is_empty() {
        return Vec::new();
    }
    let limit = (g.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, &'a str)> = candidates
        .iter()
        .filter_map(|&c| {
            let lc = c.to_ascii_lowercase();
            let tail = lc.rsplit("__").next().unwrap_or(&lc);
            let score = if tail == g {
                0
            } else if lc.contains(&g) || (tail.len() >= 3 && g.contains(tail)) {
                1
            } else {
                let d = edit_distance(&g, &lc).min(edit_distance(&g, tail));
                if d > limit {
                    return None;
                }
                2 + d
            };
            Some((score, c))
        })
        .collect();
    scored.sort_by_key(|(score, _)| *score);
    scored.into_iter().take(n).map(|(_, c)| c).collect()
}

/// The first `chars` characters of `text`, cut on a character boundary, for
/// previews.
pub fn preview(text: &str, chars: usize) -> String {
    prefix_chars(text, chars).to_string()
}

/// `&text[..n characters]`, borrowed.
pub fn prefix_chars(text: &str, n: usize) -> &str {
    match text.char_indices().nth(n) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

/// One line of at most `max` characters: whitespace runs collapsed to one
/// space, and `…` where it was cut.
pub fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
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

/// `bytes` cut into one part per core (at most 8), each ending at a line
/// end, for parsing a large log in parallel; one part below `min_parallel`
/// bytes. Joined in order, the parts are `bytes`.
pub fn line_parts(bytes: &[u8], min_parallel: usize) -> Vec<&[u8]> {
    let threads = if bytes.len() < min_parallel {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
    };
    let mut parts = Vec::with_capacity(threads);
    let mut start = 0;
    for k in 1..threads {
        let at = (bytes.len() * k / threads).max(start);
        let end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i + 1);
        parts.push(&bytes[start..end]);
        start = end;
    }
    parts.push(&bytes[start..]);
    parts
}

/// Replaces each `{name}` whose name passes `is_name` and has a value, in one
/// pass: text substituted for one placeholder is never substituted again.
/// Unknown names and other braces (JSON in a prompt, say) stay as written.
pub fn fill_braces(
    template: &str,
    is_name: impl Fn(&str) -> bool,
    value_of: impl Fn(&str) -> Option<String>,
) -> String {
    let mut out = String::with_capacity(template.len() + 1024);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if is_name(&after[..close]) => {
                match value_of(&after[..close]) {
                    Some(v) => out.push_str(&v),
                    None => out.push_str(&rest[open..open + close + 2]),
                }
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
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
    fn closest_names_come_first_and_few() {
        let names = [
            "read_file",
            "mcp__time__get_current_time",
            "mcp__time__convert_time",
            "write_file",
            "bash",
        ];
        assert_eq!(
            closest("get_current_time", &names, 3),
            vec!["mcp__time__get_current_time"]
        );
        assert_eq!(closest("reed_file", &names, 3), vec!["read_file"]);
        assert_eq!(
            closest("time", &names, 5),
            vec!["mcp__time__get_current_time", "mcp__time__convert_time"]
        );
        assert!(closest("zzzzzz", &names, 3).is_empty());
        let many: Vec<String> = (0..5000)
            .map(|i| format!("mcp__big__tool_{i:04}"))
            .collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(closest("tool_0042", &refs, 5)[0], "mcp__big__tool_0042");
        assert_eq!(closest("tool_0042", &refs, 5).len(), 5);
    }

    #[test]
    fn lines_split_as_split_does() {
        for text in ["", "a", "a\n", "a\nb", "\n\n", "a\n\nb\n", "\u{e9}\nx\r\n"] {
            let ours: Vec<&[u8]> = lines(text.as_bytes()).collect();
            let std: Vec<&[u8]> = text.as_bytes().split(|b| *b == b'\n').collect();
            assert_eq!(ours, std, "{text:?}");
        }
    }

    #[test]
    fn line_parts_cut_at_line_ends_and_join_back() {
        let text: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        let parts = line_parts(text.as_bytes(), 1);
        assert!(!parts.is_empty());
        assert_eq!(parts.concat(), text.as_bytes());
        for p in &parts[..parts.len() - 1] {
            assert_eq!(p.last(), Some(&b'\n'));
        }
        assert_eq!(line_parts(text.as_bytes(), usize::MAX).len(), 1);
    }
}
