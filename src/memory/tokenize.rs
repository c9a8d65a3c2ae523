//! The memory room's tokenisers.
//!
//! Two exist on purpose (docs §12.8):
//! - [`compression_tokens`]: the compression pipeline's, byte-for-byte the
//!   original's `[a-zA-Z0-9]{3,}|<non-Latin char>` on lower-cased text, so
//!   compressed output equals the original's (docs §8.6).
//! - [`recall_tokens`]: retrieval's. The original used `[a-zA-Z0-9]{2,}`, which
//!   split tickers such as `BRK.B` or `600519.SH` and snake_case names apart
//!   (docs §11.1 item 9). Ours keeps 2-character words and also emits each
//!   `.`/`_`-joined run whole, alongside its parts, so both `brk.b` and `brk`
//!   are found.
//!
//! Both treat each character of the non-Latin ranges of docs §8.3 (CJK, Thai,
//! Arabic letters, Hebrew letters, Cyrillic) as a token of its own.

/// The non-Latin ranges tokenised one character at a time (docs §8.3).
pub fn is_non_latin(c: char) -> bool {
    matches!(c,
        '\u{4E00}'..='\u{9FFF}'
        | '\u{3400}'..='\u{4DBF}'
        | '\u{0E00}'..='\u{0E7F}'
        | '\u{0620}'..='\u{064A}'
        | '\u{05D0}'..='\u{05EA}'
        | '\u{0400}'..='\u{04FF}')
}

/// CJK ideographs, the characters the index also pairs into bigrams.
pub fn is_cjk(c: char) -> bool {
    matches!(c, '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}')
}

/// Python's `str.isspace`: Unicode White_Space plus the information
/// separators U+001C..U+001F, which Python counts as whitespace and Rust does not.
pub fn py_isspace(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\u{1C}'..='\u{1F}')
}

/// Python's `str.strip()` with no arguments.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_isspace)
}

/// What [`scan_compression_tokens`] finds, as byte ranges of its text.
pub enum Scanned {
    /// A maximal ASCII alphanumeric run of 3 or more bytes.
    Word(usize, usize),
    /// A multi-byte char (the caller keeps the non-Latin ones).
    Char(char, usize, usize),
}

/// The compression token scan (docs §8.6) in one byte pass, shared by the
/// plain tokenizer and the fused one in `compression`.
pub fn scan_compression_tokens(text: &str, mut found: impl FnMut(Scanned)) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_alphanumeric() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
                i += 1;
            }
            if i - start >= 3 {
                found(Scanned::Word(start, i));
            }
            continue;
        }
        if b < 0x80 {
            i += 1;
            continue;
        }
        // A multi-byte char: decode it.
        let Some(c) = text.get(i..).and_then(|t| t.chars().next()) else {
            break;
        };
        let len = c.len_utf8();
        found(Scanned::Char(c, i, i + len));
        i += len;
    }
}

/// Appends the compression tokens of already lower-cased text to `out`:
/// maximal ASCII alphanumeric runs of 3 or more, and single non-Latin chars.
pub fn compression_tokens_into<'a>(lower: &'a str, out: &mut Vec<&'a str>) {
    scan_compression_tokens(lower, |t| match t {
        Scanned::Word(a, b) => out.push(&lower[a..b]),
        Scanned::Char(c, a, b) if is_non_latin(c) => out.push(&lower[a..b]),
        Scanned::Char(..) => {}
    });
}

/// The compression tokenizer (docs §8.6): a list, duplicates kept.
pub fn compression_tokens(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut out = Vec::new();
    compression_tokens_into(&lower, &mut out);
    out.into_iter().map(str::to_string).collect()
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'.' || b == b'_'
}

/// The retrieval tokenizer: lower-cased tokens in text order, duplicates kept.
///
/// - runs of ASCII letters/digits joined by `.` or `_` are trimmed of outer
///   `.`/`_`; every part of 2+ characters is a token, and a run that still
///   contains `.` or `_` is a token as well (`brk.b` → `brk.b`, `brk`);
///   this keeps tickers and short words findable (docs §11.1 item 9);
/// - each non-Latin char (docs §8.3 ranges) is a token.
pub fn recall_tokens(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let bytes = lower.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if is_word_byte(b) {
            let start = i;
            while i < bytes.len() && is_word_byte(bytes[i]) {
                i += 1;
            }
            let run = lower[start..i].trim_matches(|c| c == '.' || c == '_');
            if run.contains(['.', '_']) {
                out.push(run.to_string());
            }
            for part in run.split(['.', '_']) {
                if part.len() >= 2 {
                    out.push(part.to_string());
                }
            }
            continue;
        }
        if b < 0x80 {
            i += 1;
            continue;
        }
        let Some(c) = lower[i..].chars().next() else {
            break;
        };
        let len = c.len_utf8();
        if is_non_latin(c) {
            out.push(lower[i..i + len].to_string());
        }
        i += len;
    }
    out
}

/// Bigrams of adjacent CJK characters, which the full-text index stores next
/// to the unigrams so a multi-character query ranks phrase matches first
/// (docs §8.8).
pub fn cjk_bigrams(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut prev: Option<char> = None;
    for c in text.chars() {
        if is_cjk(c) {
            if let Some(p) = prev {
                out.push(format!("{p}{c}"));
            }
            prev = Some(c);
        } else {
            prev = None;
        }
    }
    out
}

/// The retrieval tokens as a set.
pub fn recall_token_set(text: &str) -> std::collections::HashSet<String> {
    recall_tokens(text).into_iter().collect()
}

/// A token as stored in the full-text index: plain `[a-z0-9]` tokens as they
/// are, anything else as `_` + hex of its UTF-8 bytes. SQLite's tokenizer
/// then sees exactly our tokens (its own Unicode rules never re-split or
/// merge them), so the index finds what the scan finds.
pub fn index_term(token: &str) -> String {
    if token
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return token.to_string();
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(1 + token.len() * 2);
    out.push('_');
    for b in token.bytes() {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

/// The index text of a document: its retrieval tokens plus CJK bigrams, each
/// encoded with [`index_term`], space-separated (duplicates kept for BM25's
/// term frequency).
pub fn index_text(text: &str) -> String {
    let mut terms: Vec<String> = recall_tokens(text).iter().map(|t| index_term(t)).collect();
    terms.extend(
        cjk_bigrams(&text.to_lowercase())
            .iter()
            .map(|t| index_term(t)),
    );
    terms.join(" ")
}

/// Most distinct query terms sent to the index; a pasted page of text must
/// not become a thousand-way OR.
pub const MAX_QUERY_TERMS: usize = 128;

/// The distinct index terms of a query, first-seen order, capped.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    let tokens = recall_tokens(query)
        .into_iter()
        .chain(cjk_bigrams(&query.to_lowercase()));
    for t in tokens {
        if out.len() >= MAX_QUERY_TERMS {
            break;
        }
        let term = index_term(&t);
        if seen.insert(term.clone()) {
            out.push(term);
        }
    }
    out
}

/// An FTS5 MATCH expression: the quoted terms joined by ` OR `; `None` when
/// the query has no tokens.
pub fn match_expression(terms: &[String]) -> Option<String> {
    if terms.is_empty() {
        return None;
    }
    Some(
        terms
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(" OR "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn set(v: &[&str]) -> HashSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    // PM-1, case by case.
    #[test]
    fn pm01_recall_tokenizer() {
        assert!(
            recall_token_set("hello world testing")
                .is_superset(&set(&["hello", "world", "testing"]))
        );
        assert!(recall_token_set("I a").is_empty());
        assert_eq!(
            recall_token_set("GE US ok no"),
            set(&["ge", "us", "ok", "no"])
        );
        // The original splits at `_`; we also keep the whole name (§11.1 item 9).
        let t = recall_token_set("mcp_wiring_test");
        assert!(t.is_superset(&set(&["mcp", "wiring", "test"])));
        assert!(t.contains("mcp_wiring_test"));
        for (text, n) in [
            ("上证指数", 4),
            ("สวัสดี", 6),
            ("مرحبا", 5),
            ("שלום", 4),
            ("привет", 6),
        ] {
            let toks = recall_tokens(text);
            assert_eq!(toks.len(), n, "{text}: {toks:?}");
            assert!(toks.iter().all(|t| t.chars().count() == 1));
        }
        assert!(recall_token_set("").is_empty());
    }

    #[test]
    fn tickers_and_short_tokens_are_found() {
        let t = recall_token_set("Bought BRK.B and 600519.SH; see e.g. x_y.");
        for want in [
            "brk.b",
            "brk",
            "600519.sh",
            "600519",
            "sh",
            "bought",
            "x_y",
            "e.g",
        ] {
            assert!(t.contains(want), "{want} missing from {t:?}");
        }
        // Sentence-final dots do not stick to words.
        assert!(recall_token_set("ends here.").contains("here"));
        assert!(!recall_token_set("ends here.").contains("here."));
    }

    #[test]
    fn compression_tokenizer_matches_the_original_pattern() {
        assert_eq!(
            compression_tokens("The GE ab abc 3.5 x1y2 上证 Привет"),
            vec![
                "the", "abc", "x1y2", "上", "证", "п", "р", "и", "в", "е", "т"
            ]
        );
        assert!(compression_tokens("a bc").is_empty());
    }

    #[test]
    fn index_terms_are_plain_ascii_words() {
        assert_eq!(index_term("abc"), "abc");
        assert_eq!(index_term("brk.b"), "_62726b2e62");
        assert_eq!(index_term("上"), "_e4b88a");
        let text = index_text("上证指数 GE");
        assert!(text.split(' ').all(|w| {
            w.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        }));
        assert_eq!(cjk_bigrams("上证指数"), vec!["上证", "证指", "指数"]);
        assert_eq!(match_expression(&query_terms("GE ge")).unwrap(), "\"ge\"");
        assert!(match_expression(&query_terms("I a")).is_none());
    }
}
