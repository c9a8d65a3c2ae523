//! Token counts. `chars4` is the original's estimate (docs §3.1): the
//! character count of the message list as Python's `json.dumps(...,
//! ensure_ascii=False)` writes it (with `", "` and `": "` separators), floor
//! divided by 4, computed without building the string. The default is a real
//! BPE count (`o200k_base` or `cl100k_base`, chosen by model name, ranks
//! compiled in so it works offline), framed per message the way OpenAI's
//! cookbook counts chat messages.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::sync::{LazyLock, Mutex};

use regex::Regex;
use serde::Serialize;
use serde_json::ser::Formatter;
use tiktoken_rs::CoreBPE;

use crate::model::Message;

/// Names the estimator in watermark events.
pub const CHARS4: &str = "chars4";

/// `len(json.dumps(messages, ensure_ascii=False)) // 4`.
pub fn estimate_chars4(messages: &[Message]) -> u64 {
    let mut items = 0;
    for (i, m) in messages.iter().enumerate() {
        // Each content is its own allocation: ask for the one after next
        // while this one is counted, so its first miss is already paid.
        if let Some(ahead) = messages.get(i + 2) {
            prefetch(ahead.content.as_bytes());
        }
        items += message_python_len(m);
    }
    (2 + items + 2 * messages.len().saturating_sub(1)) as u64 / 4
}

/// Hints the CPU to start loading the first cache lines of `bytes`. Used
/// where a pass hops from one heap string to the next, which otherwise waits
/// on memory at the start of every string.
#[inline(always)]
pub fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p = bytes.as_ptr().cast::<i8>();
        // SAFETY: SSE is part of the x86_64 baseline, and a prefetch never
        // faults or reads into the program, whatever the address. Two lines
        // cover a short string and start the hardware prefetcher on a long one.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p);
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Characters of a JSON string literal as serde_json (and Python) write it:
/// quotes, `\"` and `\\`, short escapes for `\b \f \n \r \t`, `\u00XX`
/// for other controls, everything else as is. Written as two counting
/// passes the compiler vectorises, instead of serialising.
pub(crate) fn json_str_len(s: &str) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above (std caches the check).
        return unsafe { json_str_len_avx2(s) };
    }
    json_str_len_portable(s)
}

/// The same loop compiled for 32-byte vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn json_str_len_avx2(s: &str) -> usize {
    json_str_len_portable(s)
}

#[inline(always)]
fn json_str_len_portable(s: &str) -> usize {
    // One branch-free pass with byte-wide counters over 192-byte chunks (a
    // whole number of vector steps, and a u8 cannot overflow), so the
    // compiler vectorises it (about 8x faster than usize counters):
    // characters, `"`/`\\`, and control bytes. Controls with a short escape
    // (`\b \t \n \f \r`) take two characters, the rest six; they are told
    // apart only in chunks that have controls at all.
    let (mut chars, mut quotes, mut controls, mut short) = (0usize, 0usize, 0usize, 0usize);
    for chunk in s.as_bytes().chunks(192) {
        let (mut c, mut q, mut ctl) = (0u8, 0u8, 0u8);
        for &x in chunk {
            c += u8::from((x as i8) >= -0x40);
            q += u8::from(x == b'"') | u8::from(x == b'\\');
            ctl += u8::from(x < 0x20);
        }
        chars += usize::from(c);
        quotes += usize::from(q);
        controls += usize::from(ctl);
        if ctl > 0 {
            short += chunk
                .iter()
                .filter(|&&x| matches!(x, 8 | 9 | 10 | 12 | 13))
                .count();
        }
    }
    2 + chars + quotes + short + 5 * (controls - short)
}

/// `len(json.dumps(message, ensure_ascii=False))` for a [`Message`], in the
/// field order serde writes (role, content, tool_calls, tool_call_id, name,
/// reasoning_content), without building the string.
pub fn message_python_len(m: &Message) -> usize {
    // One `"key": value` field; fields are joined with ", ".
    fn field(key: &str, value_len: usize) -> usize {
        key.len() + 2 + 2 + value_len
    }
    let mut fields = 2;
    let mut len =
        field("role", json_str_len(m.role.as_str())) + field("content", json_str_len(&m.content));
    if !m.tool_calls.is_empty() {
        let calls: usize = m
            .tool_calls
            .iter()
            .map(|c| {
                let function = 2
                    + field("name", json_str_len(&c.function.name))
                    + 2
                    + field("arguments", json_str_len(&c.function.arguments));
                2 + field("id", json_str_len(&c.id))
                    + 2
                    + field("type", json_str_len(&c.kind))
                    + 2
                    + field("function", function)
            })
            .sum();
        fields += 1;
        len += field("tool_calls", 2 + calls + 2 * (m.tool_calls.len() - 1));
    }
    for (key, v) in [
        ("tool_call_id", &m.tool_call_id),
        ("name", &m.name),
        ("reasoning_content", &m.reasoning_content),
    ] {
        if let Some(v) = v {
            fields += 1;
            len += field(key, json_str_len(v));
        }
    }
    2 + len + 2 * (fields - 1)
}

/// Characters (not bytes) of the Python-style JSON dump of `value`.
pub fn python_json_chars<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut counter = CharCounter(0);
    let mut ser = serde_json::Serializer::with_formatter(&mut counter, PythonFormatter);
    match value.serialize(&mut ser) {
        Ok(()) => counter.0,
        // Serialising our own types cannot fail; count nothing rather than panic.
        Err(_) => 0,
    }
}

/// `json.dumps(value, ensure_ascii=False)`: Python's separators, non-ASCII kept.
pub fn python_json_string<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
    if value.serialize(&mut ser).is_err() {
        return String::new();
    }
    // serde_json only ever writes valid UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

struct CharCounter(usize);

impl io::Write for CharCounter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Count UTF-8 scalar values: every byte that is not a continuation byte.
        self.0 += buf.iter().filter(|b| (**b & 0xC0) != 0x80).count();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Python's default separators: `", "` between items, `": "` after keys.
struct PythonFormatter;

impl Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }
}

/// Which BPE vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    O200k,
    Cl100k,
}

impl Encoding {
    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200k => "o200k_base",
            Encoding::Cl100k => "cl100k_base",
        }
    }

    /// GPT-4o, 4.1, 5 and the o-series use o200k; GPT-4 and 3.5 use cl100k.
    /// Other vendors' tokenizers are not public offline; o200k is the
    /// closer modern vocabulary for them, and the name says which was used.
    pub fn for_model(model: &str) -> Encoding {
        let m = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        let cl100k =
            (m.starts_with("gpt-4") && !m.starts_with("gpt-4o") && !m.starts_with("gpt-4.1"))
                || m.starts_with("gpt-3.5")
                || m.starts_with("text-embedding-");
        if cl100k {
            Encoding::Cl100k
        } else {
            Encoding::O200k
        }
    }
}

/// Splits text into BPE pieces exactly as tiktoken does. The reference
/// patterns use a look-ahead (`\s+(?!\S)`) that the linear-time `regex` crate
/// lacks; matching plain `\s+` and giving back the last whitespace character
/// when non-space follows is equivalent (see `pieces_match_tiktoken`).
struct Splitter {
    re: Regex,
    /// o200k only: pieces made of ASCII are found by hand, several times
    /// faster than the Unicode-aware regex (`ascii_piece_o200k`).
    ascii_fast_path: bool,
}

/// o200k without its look-ahead alternative.
const O200K_SPLIT: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"|\s*[\r\n]+",
    r"|\s+",
);

/// cl100k (tiktoken's current form, possessive quantifiers dropped: none of
/// them can change a match here) without its look-ahead alternative.
const CL100K_SPLIT: &str = concat!(
    r"'(?i:[sdmt]|ll|ve|re)",
    r"|[^\r\n\p{L}\p{N}]?\p{L}+",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"|\s+$",
    r"|\s*[\r\n]",
    r"|\s+",
);

impl Splitter {
    fn new(pattern: &str, ascii_fast_path: bool) -> Option<Self> {
        Regex::new(pattern).ok().map(|re| Splitter {
            re,
            ascii_fast_path,
        })
    }

    fn for_each_piece(&self, text: &str, mut f: impl FnMut(&str)) {
        let bytes = text.as_bytes();
        let mut pos = 0;
        while pos < text.len() {
            if self.ascii_fast_path
                && let Some(end) = ascii_piece_o200k(bytes, pos)
            {
                // `end` is on an ASCII boundary, so the slice is valid UTF-8.
                f(&text[pos..end]);
                pos = end;
                continue;
            }
            let Some(m) = self.re.find_at(text, pos) else {
                break;
            };
            let (start, mut end) = (m.start(), m.end());
            if start > pos {
                // Cannot happen: every character matches some alternative.
                f(&text[pos..start]);
            }
            let piece = &text[start..end];
            let all_space = piece.chars().all(char::is_whitespace);
            let newline = piece.contains(['\r', '\n']);
            if all_space && !newline && end < text.len() {
                let next_is_space = text[end..].chars().next().is_some_and(char::is_whitespace);
                let mut chars = piece.char_indices();
                let last = chars.next_back().map(|(i, _)| i).unwrap_or(0);
                if !next_is_space && last > 0 {
                    end = start + last;
                }
            }
            if end == start {
                end = start + piece.len();
            }
            f(&text[start..end]);
            pos = end;
        }
    }
}

/// ASCII character classes as the o200k pattern sees them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ascii {
    Upper,
    Lower,
    Digit,
    /// `\r` or `\n`.
    Newline,
    /// Other `\s`: space, tab, vertical tab, form feed.
    Space,
    /// Everything else: punctuation, symbols, other controls.
    Other,
}

/// `None` for a non-ASCII byte: the caller must use the regex.
fn ascii_class(b: u8) -> Option<Ascii> {
    Some(match b {
        b'A'..=b'Z' => Ascii::Upper,
        b'a'..=b'z' => Ascii::Lower,
        b'0'..=b'9' => Ascii::Digit,
        b'\r' | b'\n' => Ascii::Newline,
        b' ' | b'\t' | 0x0b | 0x0c => Ascii::Space,
        0x80..=0xff => return None,
        _ => Ascii::Other,
    })
}

/// The end of the o200k piece starting at `p`, when it can be decided from
/// ASCII alone; `None` when any byte the decision depends on is not ASCII.
/// Mirrors the pattern's alternatives in order (leftmost-first):
/// letters with an optional prefix and contraction, 1–3 digits, a symbol
/// run with an optional leading space, whitespace up to the last newline,
/// whitespace giving back its last character before non-space.
fn ascii_piece_o200k(s: &[u8], p: usize) -> Option<usize> {
    let class = |i: usize| -> Option<Option<Ascii>> {
        // Some(None) = end of text; None = non-ASCII.
        match s.get(i) {
            None => Some(None),
            Some(b) => ascii_class(*b).map(Some),
        }
    };
    let c = class(p)??;
    let is_letter = |k: Option<Ascii>| matches!(k, Some(Ascii::Upper | Ascii::Lower));

    // Alternatives 1 and 2: [prefix]? upper* lower+ | [prefix]? upper+ lower*, then a contraction.
    let q = match c {
        Ascii::Upper | Ascii::Lower => Some(p),
        Ascii::Space | Ascii::Other if is_letter(class(p + 1)?) => Some(p + 1),
        _ => None,
    };
    if let Some(q) = q {
        let mut i = q;
        while class(i)? == Some(Ascii::Upper) {
            i += 1;
        }
        let uppers = i - q;
        while class(i)? == Some(Ascii::Lower) {
            i += 1;
        }
        let lowers = i - q - uppers;
        if lowers > 0 || uppers > 0 {
            return contraction_end(s, i);
        }
    }
    match c {
        Ascii::Digit => {
            let mut i = p;
            while i < p + 3 && class(i)? == Some(Ascii::Digit) {
                i += 1;
            }
            Some(i)
        }
        Ascii::Other | Ascii::Space | Ascii::Newline => {
            // Alternative 4: ` ?[^\s\p{L}\p{N}]+[\r\n/]*`.
            let start = if s[p] == b' ' && class(p + 1)? == Some(Ascii::Other) {
                p + 1
            } else {
                p
            };
            if class(start)? == Some(Ascii::Other) {
                let mut i = start;
                while class(i)? == Some(Ascii::Other) {
                    i += 1;
                }
                while matches!(s.get(i), Some(b'\r' | b'\n' | b'/')) {
                    i += 1;
                }
                return Some(i);
            }
            // Alternatives 5–7: a whitespace run.
            let mut i = p;
            let mut last_newline = None;
            while let Some(k @ (Ascii::Space | Ascii::Newline)) = class(i)? {
                if k == Ascii::Newline {
                    last_newline = Some(i);
                }
                i += 1;
            }
            if let Some(n) = last_newline {
                return Some(n + 1);
            }
            // No newline: `\s+(?!\S)` keeps all but the last character when
            // non-space follows; a single character is taken by `\s+`.
            let run = i - p;
            match class(i)? {
                None => Some(i),
                Some(_) if run >= 2 => Some(i - 1),
                Some(_) => Some(i),
            }
        }
        // Letters were handled above.
        Ascii::Upper | Ascii::Lower => None,
    }
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` after a letter run ending at `i`.
fn contraction_end(s: &[u8], i: usize) -> Option<usize> {
    if s.get(i) != Some(&b'\'') {
        return Some(i);
    }
    // `(?i)` folds `s` to `ſ` (U+017F) too: leave non-ASCII to the regex.
    if s.get(i + 1).is_some_and(|b| *b >= 0x80) {
        return None;
    }
    let lower = |k: usize| s.get(k).map(|b| b.to_ascii_lowercase());
    for suffix in [&b"s"[..], b"t", b"re", b"ve", b"m", b"ll", b"d"] {
        if suffix
            .iter()
            .enumerate()
            .all(|(j, ch)| lower(i + 1 + j) == Some(*ch))
        {
            return Some(i + 1 + suffix.len());
        }
    }
    Some(i)
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A hash set with the fast hasher below, for short trusted keys.
pub type FastSet<K> = std::collections::HashSet<K, BuildHasherDefault<FxHasher>>;

/// A word-at-a-time multiplicative hash (the rustc "Fx" construction):
/// pieces are short and trusted, so SipHash's DoS resistance buys nothing.
#[derive(Default)]
pub struct FxHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(SEED);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(SEED);
        }
        self.0 = h;
    }
}

/// Counts BPE tokens with a cache of piece → token count: most words recur,
/// so after warm-up a count is a split plus hash lookups.
pub struct BpeCounter {
    encoding: Encoding,
    bpe: &'static CoreBPE,
    splitter: Splitter,
    cache: Mutex<FastMap<Box<str>, u32>>,
}

const PIECE_CACHE_LIMIT: usize = 500_000;

static O200K: LazyLock<Option<BpeCounter>> = LazyLock::new(|| BpeCounter::build(Encoding::O200k));
static CL100K: LazyLock<Option<BpeCounter>> = LazyLock::new(|| BpeCounter::build(Encoding::Cl100k));

impl BpeCounter {
    fn build(encoding: Encoding) -> Option<Self> {
        let (bpe, pattern) = match encoding {
            Encoding::O200k => (tiktoken_rs::o200k_base_singleton(), O200K_SPLIT),
            Encoding::Cl100k => (tiktoken_rs::cl100k_base_singleton(), CL100K_SPLIT),
        };
        Some(BpeCounter {
            encoding,
            bpe,
            splitter: Splitter::new(pattern, encoding == Encoding::O200k)?,
            cache: Mutex::new(FastMap::default()),
        })
    }

    /// The shared counter for an encoding (built once; the ranks load in ~100 ms).
    pub fn shared(encoding: Encoding) -> Option<&'static BpeCounter> {
        match encoding {
            Encoding::O200k => O200K.as_ref(),
            Encoding::Cl100k => CL100K.as_ref(),
        }
    }

    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Tokens of plain text (no special tokens).
    pub fn count_text(&self, text: &str) -> u64 {
        let mut total = 0u64;
        let Ok(mut cache) = self.cache.lock() else {
            return self.bpe.encode_ordinary(text).len() as u64;
        };
        if cache.len() > PIECE_CACHE_LIMIT {
            cache.clear();
        }
        self.splitter.for_each_piece(text, |piece| {
            let n = match cache.get(piece) {
                Some(n) => *n,
                None => {
                    let n = self.bpe.encode_ordinary(piece).len() as u32;
                    cache.insert(piece.into(), n);
                    n
                }
            };
            total += u64::from(n);
        });
        total
    }

    /// Chat framing per the OpenAI cookbook: 3 per message, the role, the
    /// content, the name (+1), each tool call's name and arguments (+1), and
    /// 3 to prime the reply.
    pub fn count_messages(&self, messages: &[Message]) -> u64 {
        messages.iter().map(|m| self.count_message(m)).sum::<u64>() + 3
    }

    pub fn count_message(&self, m: &Message) -> u64 {
        let mut n = 3 + self.count_text(m.role.as_str()) + self.count_text(&m.content);
        if let Some(name) = &m.name {
            n += 1 + self.count_text(name);
        }
        for c in &m.tool_calls {
            n += 1 + self.count_text(&c.function.name) + self.count_text(&c.function.arguments);
        }
        n
    }
}

/// How the watermark and the compaction gates count.
#[derive(Clone, Copy)]
pub enum Estimator {
    /// The original's `len(json) // 4`.
    Chars4,
    Bpe(&'static BpeCounter),
}

impl std::fmt::Debug for Estimator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Estimator {
    /// `chars4`, `bpe` (by model) or an encoding name.
    pub fn from_name(name: &str, model: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "chars4" => Some(Estimator::Chars4),
            "bpe" | "auto" | "" => Some(Self::for_model(model)),
            "o200k_base" | "o200k" => BpeCounter::shared(Encoding::O200k).map(Estimator::Bpe),
            "cl100k_base" | "cl100k" => BpeCounter::shared(Encoding::Cl100k).map(Estimator::Bpe),
            _ => None,
        }
    }

    /// The BPE for this model, falling back to `chars4` if the vocabulary
    /// cannot be loaded (it is compiled in, so only a broken build fails).
    pub fn for_model(model: &str) -> Self {
        BpeCounter::shared(Encoding::for_model(model))
            .map(Estimator::Bpe)
            .unwrap_or(Estimator::Chars4)
    }

    pub fn name(&self) -> &'static str {
        match self {
            Estimator::Chars4 => CHARS4,
            Estimator::Bpe(b) => b.encoding().name(),
        }
    }

    pub fn count(&self, messages: &[Message]) -> u64 {
        match self {
            Estimator::Chars4 => estimate_chars4(messages),
            Estimator::Bpe(b) => b.count_messages(messages),
        }
    }

    pub fn count_text(&self, text: &str) -> u64 {
        match self {
            Estimator::Chars4 => text.chars().count() as u64 / 4,
            Estimator::Bpe(b) => b.count_text(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_python_dump_length() {
        // python3 -c 'import json;print(len(json.dumps([{"role":"user","content":"héllo \"x\"\n"}],ensure_ascii=False)))' → 46
        let m = vec![Message::user("héllo \"x\"\n")];
        assert_eq!(python_json_chars(&m), 46);
        assert_eq!(estimate_chars4(&m), 11);
        let empty: Vec<Message> = vec![];
        assert_eq!(python_json_chars(&empty), 2);
        assert_eq!(estimate_chars4(&empty), 0);
    }

    proptest::proptest! {
        #[test]
        fn fast_message_length_equals_serialised_length(
            content in "[ a-z\"\\\\\n\t\u{1}\u{8}\u{7f}é价👋]{0,40}",
            args in "[{}\": a-z\\\\\u{2}]{0,20}",
            with_call in proptest::bool::ANY,
            reasoning in proptest::option::of("[a-z\n]{0,10}"),
        ) {
            let mut m = if with_call {
                Message::assistant_tool_calls(content.clone(), vec![crate::model::ToolCall::new("c\"1", "f", args.clone())], reasoning.clone())
            } else {
                Message::tool_result("id\n", "name", content.clone())
            };
            if !with_call {
                m.reasoning_content = reasoning;
            }
            proptest::prop_assert_eq!(message_python_len(&m), python_json_chars(&m));
            let list = vec![m.clone(), Message::user(content)];
            proptest::prop_assert_eq!(estimate_chars4(&list), python_json_chars(&list) as u64 / 4);
        }
    }

    #[test]
    fn python_string_form() {
        let v = serde_json::json!({"role": "tool", "tool_call_id": "a", "content": "é"});
        assert_eq!(
            python_json_string(&v),
            r#"{"role": "tool", "tool_call_id": "a", "content": "é"}"#
        );
        assert_eq!(python_json_string(&Vec::<u8>::new()), "[]");
    }

    #[test]
    fn cjk_counts_characters_not_bytes() {
        let m = vec![Message::user("价格")];
        // [{"role": "user", "content": "价格"}] is 35 characters
        assert_eq!(python_json_chars(&m), 35);
    }

    fn samples() -> Vec<String> {
        vec![
            "Hello world! It's 2026; AAPL's drawdown was -52.3% on 2000-09-29.".into(),
            "  leading and trailing  \n\n  mixed\r\nline   endings   ".into(),
            "價格在二零零零年九月下跌了百分之五十二，這是一次真正的崩盤。".into(),
            r#"{"status": "ok", "rows": [{"date": "2010-01-04", "close": 30.57}], "next_offset": null}"#.into(),
            "fn main() {\n    println!(\"{}\", x /* c */);\n}\t\t\n".into(),
            "CamelCaseWords and UPPER lower MiXeD I'LL we'RE don't 12345678 1,234.56".into(),
            "emoji 👋🏽 and accents: naïve café façade — déjà vu; ١٢٣ арабские цифры".into(),
            " \n \t x  y   z\u{a0}\u{a0}w ".into(),
            "it's IT'S we'll THEY'RE you'VE I'M he'd it'ſ x' 'x ''".into(),
            "a//b\n//c\r\n/\n,\n\n  \n\t\u{1}\u{7f}ABCdef HTTPServer 1234567 ١٢٣٤".into(),
        ]
    }

    /// Our splitter plus piece cache must equal tiktoken's own count.
    #[test]
    fn pieces_match_tiktoken() {
        for enc in [Encoding::O200k, Encoding::Cl100k] {
            let counter = BpeCounter::shared(enc).unwrap();
            for s in samples() {
                assert_eq!(
                    counter.count_text(&s),
                    counter.bpe.encode_ordinary(&s).len() as u64,
                    "{enc:?} on {s:?}"
                );
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn random_text_counts_match_tiktoken(s in "[ a-zA-Z0-9\n\r\t\u{b}\u{c}\u{1}'.,;:!?(){}\\[\\]\"/\\-é价格👋\u{a0}ſÉ١—]{0,80}") {
            for enc in [Encoding::O200k, Encoding::Cl100k] {
                let counter = BpeCounter::shared(enc).unwrap();
                proptest::prop_assert_eq!(counter.count_text(&s), counter.bpe.encode_ordinary(&s).len() as u64);
            }
        }
    }

    #[test]
    fn model_picks_the_vocabulary() {
        assert_eq!(Encoding::for_model("gpt-4o-mini"), Encoding::O200k);
        assert_eq!(Encoding::for_model("gpt-4.1"), Encoding::O200k);
        assert_eq!(Encoding::for_model("openai/gpt-4-turbo"), Encoding::Cl100k);
        assert_eq!(Encoding::for_model("gpt-3.5-turbo"), Encoding::Cl100k);
        assert_eq!(Encoding::for_model("deepseek-chat"), Encoding::O200k);
        assert_eq!(
            Estimator::from_name("chars4", "x").unwrap().name(),
            "chars4"
        );
        assert_eq!(
            Estimator::from_name("bpe", "gpt-4").unwrap().name(),
            "cl100k_base"
        );
        assert!(Estimator::from_name("nonsense", "x").is_none());
    }

    #[test]
    fn message_framing() {
        let counter = BpeCounter::shared(Encoding::O200k).unwrap();
        let msgs = vec![Message::user("hello")];
        // 3 framing + 1 role + 1 content + 3 reply priming
        assert_eq!(counter.count_messages(&msgs), 8);
    }
}
