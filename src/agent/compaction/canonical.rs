//! Recognises a JSON object line that is already, byte for byte, what
//! [`crate::llm::tokens::python_json_string`] writes for the value it parses
//! to: `", "` and `": "` separators and no other whitespace, strings escaped
//! exactly as serde_json escapes them, plain integers, no repeated key. Such
//! a line can be written back as it was read. Anything else (floats, `\u`
//! escapes of printable characters, deep nesting, ...) is declined, and the
//! caller parses that line the ordinary way.
//!
//! While it checks, it notes where the fields the compaction layers read
//! are (role, content, tool_call_id, tool call ids and names), and counts
//! the line's characters, so nothing is read twice.

/// Deeper values are left to serde_json, whose own limit is 128.
const MAX_DEPTH: usize = 32;
/// Objects with more keys are left to serde_json (the repeated-key check
/// compares every pair).
const MAX_KEYS: usize = 32;
/// Integers this short always fit an `i64`, so serde_json reads them as
/// integers and writes the same digits back.
const MAX_INT_DIGITS: usize = 18;

/// A string literal in the line: `start..end` covers the quotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StrSpan {
    pub start: usize,
    pub end: usize,
    /// Whether it has any escape (its text is not the bytes between quotes).
    pub escaped: bool,
    /// Characters of the unescaped text.
    pub chars: usize,
    /// Characters of the literal as written (quotes and escapes included).
    pub literal_chars: usize,
}

/// The `content` value of a canonical line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentSpan {
    Absent,
    /// Not a string: `start..end` is the value (a set text replaces it).
    Other {
        start: usize,
        end: usize,
    },
    Str(StrSpan),
}

/// What the layers need of a canonical line. Spans are byte offsets into the
/// line; the strings other than the content have no escapes (a line where
/// they do is declined), so they are the bytes between the quotes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanonicalLine {
    /// Characters of the whole line.
    pub chars: usize,
    pub role: Option<(usize, usize)>,
    pub content: ContentSpan,
    pub tool_call_id: Option<(usize, usize)>,
    /// `(id, function name)` of each tool call; `None` where absent or not a
    /// string, as the map reader sees them.
    pub tool_calls: CallSpans,
}

/// The line's fields when `line` is canonical, else `None`.
pub fn scan_line(line: &str) -> Option<CanonicalLine> {
    let b = line.as_bytes();
    let mut s = Scanner {
        b,
        i: 0,
        keys: Vec::new(),
    };
    let mut out = CanonicalLine {
        chars: 0,
        role: None,
        content: ContentSpan::Absent,
        tool_call_id: None,
        tool_calls: Vec::new(),
    };
    // Characters of the content literal are counted with its escapes; the
    // rest of the line is counted in one pass at the end.
    let mut content_literal_chars = 0;
    s.object(0, &mut |s, key, value, kind| {
        match key {
            b"role" => out.role = plain_str(value, kind)?,
            b"tool_call_id" => out.tool_call_id = plain_str(value, kind)?,
            b"content" => {
                out.content = match kind {
                    Kind::Str(span) => {
                        content_literal_chars = char_count(&s.b[span.start..span.end]);
                        ContentSpan::Str(StrSpan {
                            chars: content_literal_chars - 2 - span.escape_savings,
                            literal_chars: content_literal_chars,
                            start: span.start,
                            end: span.end,
                            escaped: span.escape_savings > 0,
                        })
                    }
                    _ => ContentSpan::Other {
                        start: value.0,
                        end: value.1,
                    },
                }
            }
            b"tool_calls" if kind == Kind::Array => {
                out.tool_calls = tool_calls(s.b, value)?;
            }
            _ => {}
        }
        Some(())
    })?;
    if s.i != b.len() {
        return None;
    }
    out.chars = match out.content {
        ContentSpan::Str(c) => {
            char_count(&b[..c.start]) + content_literal_chars + char_count(&b[c.end..])
        }
        _ => char_count(b),
    };
    Some(out)
}

/// A string value as the span between its quotes; a value that is not a
/// string reads as absent (like the map reader's `as_str`). `None` declines
/// the line: the layers' strings other than the content are read in place
/// only without escapes.
fn plain_str(value: (usize, usize), kind: Kind) -> Option<Option<(usize, usize)>> {
    match kind {
        Kind::Str(s) if s.escape_savings == 0 => Some(Some((value.0 + 1, value.1 - 1))),
        Kind::Str(_) => None,
        _ => Some(None),
    }
}

/// `(id, function.name)` spans of each tool call.
pub type CallSpans = Vec<(Option<(usize, usize)>, Option<(usize, usize)>)>;

/// The calls of the (already checked) array at `value`, read again with a
/// second small scan: calls are few and short.
fn tool_calls(b: &[u8], value: (usize, usize)) -> Option<CallSpans> {
    let mut s = Scanner {
        b,
        i: value.0,
        keys: Vec::new(),
    };
    let mut calls = Vec::new();
    s.array(1, &mut |s, item, kind| {
        let mut call = (None, None);
        if kind == Kind::Object {
            let mut c = Scanner {
                b: s.b,
                i: item.0,
                keys: Vec::new(),
            };
            c.object(2, &mut |c, key, v, kind| {
                match (key, kind) {
                    (b"id", _) => call.0 = plain_str(v, kind)?,
                    (b"function", Kind::Object) => {
                        let mut f = Scanner {
                            b: c.b,
                            i: v.0,
                            keys: Vec::new(),
                        };
                        f.object(3, &mut |_, key, v, kind| {
                            if key == b"name" {
                                call.1 = plain_str(v, kind)?;
                            }
                            Some(())
                        })?;
                    }
                    _ => {}
                }
                Some(())
            })?;
        }
        calls.push(call);
        Some(())
    })?;
    Some(calls)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LiteralSpan {
    start: usize,
    end: usize,
    /// Characters the escapes add over the text: 1 per short escape, 5 per
    /// `\u00XX`.
    escape_savings: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Str(LiteralSpan),
    Object,
    Array,
    Scalar,
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    /// Key spans of the objects being read, innermost last.
    keys: Vec<(usize, usize)>,
}

type FieldVisit<'v, 'a> = dyn FnMut(&Scanner<'a>, &[u8], (usize, usize), Kind) -> Option<()> + 'v;
type ItemVisit<'v, 'a> = dyn FnMut(&Scanner<'a>, (usize, usize), Kind) -> Option<()> + 'v;

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, lit: &[u8]) -> Option<()> {
        let end = self.i + lit.len();
        (self.b.get(self.i..end)? == lit).then(|| self.i = end)
    }

    /// Any value; returns its span and kind.
    fn value(&mut self, depth: usize) -> Option<((usize, usize), Kind)> {
        let start = self.i;
        let kind = match self.peek()? {
            b'"' => Kind::Str(self.string()?),
            b'{' => {
                self.object(depth + 1, &mut |_, _, _, _| Some(()))?;
                Kind::Object
            }
            b'[' => {
                self.array(depth + 1, &mut |_, _, _| Some(()))?;
                Kind::Array
            }
            b't' => {
                self.eat(b"true")?;
                Kind::Scalar
            }
            b'f' => {
                self.eat(b"false")?;
                Kind::Scalar
            }
            b'n' => {
                self.eat(b"null")?;
                Kind::Scalar
            }
            _ => {
                self.integer()?;
                Kind::Scalar
            }
        };
        Some(((start, self.i), kind))
    }

    /// `-?(0|[1-9][0-9]*)`, short, and not `-0` (read as a float, written
    /// `-0.0`); a fraction or exponent declines the line.
    fn integer(&mut self) -> Option<()> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.i += 1;
        }
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        let digits = &self.b[start..self.i];
        let ok = !digits.is_empty()
            && digits.len() <= MAX_INT_DIGITS
            && (digits[0] != b'0' || (digits.len() == 1 && !negative))
            && !matches!(self.peek(), Some(b'.' | b'e' | b'E'));
        ok.then_some(())
    }

    /// A string literal escaped exactly as serde_json writes one.
    fn string(&mut self) -> Option<LiteralSpan> {
        let start = self.i;
        self.eat(b"\"")?;
        let mut savings = 0;
        loop {
            // A block of 16 bytes at a time: every special byte in it is
            // handled from one mask, without reloading after each escape
            // (tool results quote JSON: an escape every few bytes).
            let Some(mut mask) = special_mask(self.b, self.i) else {
                // The last bytes of the line, one by one.
                self.i = next_special(self.b, self.i);
                if self.special(&mut savings)? {
                    break;
                }
                continue;
            };
            let base = self.i;
            loop {
                if mask == 0 {
                    self.i = base + 16;
                    break;
                }
                self.i = base + mask.trailing_zeros() as usize;
                if self.special(&mut savings)? {
                    return Some(LiteralSpan {
                        start,
                        end: self.i,
                        escape_savings: savings,
                    });
                }
                let used = self.i - base;
                if used >= 16 {
                    break;
                }
                mask &= u32::MAX << used;
            }
        }
        Some(LiteralSpan {
            start,
            end: self.i,
            escape_savings: savings,
        })
    }

    /// Reads the special byte at `i`: the closing quote (`true`, string
    /// done) or a canonical escape (`false`); anything else declines.
    fn special(&mut self, savings: &mut usize) -> Option<bool> {
        match self.peek()? {
            b'"' => {
                self.i += 1;
                Some(true)
            }
            b'\\' => {
                match self.b.get(self.i + 1)? {
                    b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => {
                        self.i += 2;
                        *savings += 1;
                    }
                    b'u' => {
                        // Only controls without a short form, in lowercase hex.
                        let hex = self.b.get(self.i + 2..self.i + 6)?;
                        let code = match hex {
                            [b'0', b'0', hi @ (b'0' | b'1'), lo] => {
                                let lo = match lo {
                                    b'0'..=b'9' => lo - b'0',
                                    b'a'..=b'f' => lo - b'a' + 10,
                                    _ => return None,
                                };
                                (hi - b'0') * 16 + lo
                            }
                            _ => return None,
                        };
                        if matches!(code, 8 | 9 | 10 | 12 | 13) {
                            return None;
                        }
                        self.i += 6;
                        *savings += 5;
                    }
                    _ => return None,
                }
                Some(false)
            }
            // A raw control character: serde_json would escape it.
            _ => None,
        }
    }

    /// `{"k": v, ...}`; `visit` sees each key (between its quotes), the
    /// value's span and kind.
    fn object(&mut self, depth: usize, visit: &mut FieldVisit<'_, 'a>) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(b"{")?;
        if self.eat(b"}").is_some() {
            return Some(());
        }
        let base = self.keys.len();
        let result = (|| {
            loop {
                let key = self.string()?;
                let b = self.b;
                let key_bytes = &b[key.start + 1..key.end - 1];
                if self.keys.len() - base >= MAX_KEYS
                    || self.keys[base..]
                        .iter()
                        .any(|&(s, e)| &b[s..e] == key_bytes)
                {
                    return None;
                }
                self.keys.push((key.start + 1, key.end - 1));
                self.eat(b": ")?;
                let (span, kind) = self.value(depth)?;
                // A key with escapes is never one the layers read.
                if key.escape_savings == 0 {
                    visit(self, key_bytes, span, kind)?;
                }
                if self.eat(b"}").is_some() {
                    return Some(());
                }
                self.eat(b", ")?;
            }
        })();
        self.keys.truncate(base);
        result
    }

    fn array(&mut self, depth: usize, visit: &mut ItemVisit<'_, 'a>) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(b"[")?;
        if self.eat(b"]").is_some() {
            return Some(());
        }
        loop {
            let (span, kind) = self.value(depth)?;
            visit(self, span, kind)?;
            if self.eat(b"]").is_some() {
                return Some(());
            }
            self.eat(b", ")?;
        }
    }
}

/// Bit `k` set where byte `at + k` is one a string cannot hold as is (`"`,
/// `\\` or a control), for the 16 bytes at `at`; `None` when fewer remain
/// (or without SSE2).
#[inline]
fn special_mask(b: &[u8], at: usize) -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8,
        };
        if at + 16 > b.len() {
            return None;
        }
        // SAFETY: SSE2 is part of the x86_64 baseline, and the load reads
        // the 16 bytes at `at..at + 16`, inside `b` (checked just above).
        unsafe {
            let v = _mm_loadu_si128(b.as_ptr().add(at).cast());
            // x <= 0x1f exactly when min(x, 0x1f) == x (unsigned).
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
            let special = _mm_or_si128(
                _mm_or_si128(
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8)),
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)),
                ),
                control,
            );
            Some(_mm_movemask_epi8(special) as u32)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (b, at);
        None
    }
}

/// The first byte at or after `from` that a string cannot hold as is, or
/// the end.
fn next_special(b: &[u8], from: usize) -> usize {
    let mut at = from;
    while let Some(mask) = special_mask(b, at) {
        if mask != 0 {
            return at + mask.trailing_zeros() as usize;
        }
        at += 16;
    }
    b.iter()
        .skip(at)
        .position(|&x| x == b'"' || x == b'\\' || x < 0x20)
        .map_or(b.len(), |p| at + p)
}

/// UTF-8 characters (bytes that are not continuation bytes), with byte-wide
/// counters over 192-byte chunks so the compiler vectorises it.
pub fn char_count(bytes: &[u8]) -> usize {
    bytes
        .chunks(192)
        .map(|c| usize::from(c.iter().fold(0u8, |n, &b| n + u8::from((b as i8) >= -0x40))))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepted(line: &str) -> bool {
        scan_line(line).is_some()
    }

    #[test]
    fn canonical_lines_are_accepted_and_others_declined() {
        for ok in [
            r#"{}"#,
            r#"{"role": "user", "content": "hi"}"#,
            r#"{"a": [], "b": {}, "c": [1, -2, 0, true, false, null], "d": {"e": "\u001b\n"}}"#,
            r#"{"content": "tab\there \"q\" back\\slash é 中 🙂 \u0000 \u001f"}"#,
        ] {
            assert!(accepted(ok), "{ok}");
        }
        for no in [
            r#"{"role":"user"}"#,
            r#"{"role": "user",  "content": "x"}"#,
            r#" {"role": "user"}"#,
            r#"{"role": "user"} "#,
            "{\"role\": \"user\"}\r",
            r#"{"a": 1.0}"#,
            r#"{"a": 1e5}"#,
            r#"{"a": -0}"#,
            r#"{"a": 01}"#,
            r#"{"a": 12345678901234567890}"#,
            r#"{"a": "\u00e9"}"#,
            r#"{"a": "\u000a"}"#,
            r#"{"a": "\u001B"}"#,
            r#"{"a": "\/"}"#,
            "{\"a\": \"raw\ttab\"}",
            r#"{"a": 1, "a": 2}"#,
            r#"{"a": {"b": 1, "b": 1}}"#,
            r#"[1, 2]"#,
            r#"{"a": [1,2]}"#,
            r#"{"a": 1}{"#,
            r#"{"a": "unterminated}"#,
        ] {
            assert!(!accepted(no), "{no}");
        }
    }

    proptest::proptest! {
        /// The vector search finds what a byte-by-byte search finds.
        #[test]
        fn next_special_agrees_with_a_plain_search(
            s in "(a|é|中|\"|\\\\|\n|\u{1f}| |\u{7f}){0,80}",
            from in 0usize..100,
        ) {
            let b = s.as_bytes();
            let from = from.min(b.len());
            let plain = b[from..]
                .iter()
                .position(|&x| x == b'"' || x == b'\\' || x < 0x20)
                .map_or(b.len(), |p| from + p);
            proptest::prop_assert_eq!(next_special(b, from), plain);
        }
    }

    #[test]
    fn fields_and_character_counts_are_found() {
        let line = r#"{"role": "tool", "tool_call_id": "c1", "content": "a\"é\u0001", "x": 1}"#;
        let c = scan_line(line).unwrap();
        assert_eq!(c.chars, line.chars().count());
        assert_eq!(c.role.map(|(s, e)| &line[s..e]), Some("tool"));
        assert_eq!(c.tool_call_id.map(|(s, e)| &line[s..e]), Some("c1"));
        let ContentSpan::Str(s) = c.content else {
            panic!("{:?}", c.content)
        };
        assert!(s.escaped);
        assert_eq!(s.chars, "a\"é\u{1}".chars().count());
        assert_eq!(&line[s.start..s.end], r#""a\"é\u0001""#);

        let line = r#"{"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}, {"function": {}}, 3]}"#;
        let c = scan_line(line).unwrap();
        assert_eq!(c.content, ContentSpan::Other { start: 33, end: 37 });
        let calls: Vec<_> = c
            .tool_calls
            .iter()
            .map(|(i, n)| (i.map(|(s, e)| &line[s..e]), n.map(|(s, e)| &line[s..e])))
            .collect();
        assert_eq!(
            calls,
            vec![(Some("a"), Some("f")), (None, None), (None, None)]
        );
    }
}
