//! Raw → daily → digest compression (docs §8.6). Pure functions: the store
//! archives and writes, this only computes text.
//!
//! With the default [`Scoring::Original`] the output equals the original's
//! `compression.py` byte for byte, including its quirks: IDF is
//! `ln(N / (1 + df))`, so terms in most sentences score zero or less and a
//! single sentence inverts every weight (docs §12.7). [`Scoring::Corrected`]
//! uses a smoothed, always-positive IDF instead; it is opt-in so that the
//! default output stays the original's.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use chrono::{DateTime, Utc};

use super::tokenize::{Scanned, is_non_latin, py_isspace, py_strip, scan_compression_tokens};

/// Days since last access after which a raw entry becomes daily (strictly more).
pub const DAILY_THRESHOLD_DAYS: f64 = 7.0;
/// Days since last access after which a daily entry becomes a digest.
pub const DIGEST_THRESHOLD_DAYS: f64 = 30.0;
/// Middle sentences kept by the daily level, besides the first and last.
pub const DAILY_TOP_K_SENTENCES: usize = 5;
/// Terms listed by the digest level.
pub const DIGEST_TOP_KEYWORDS: usize = 15;

/// Compression levels; `digest` is terminal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    #[default]
    Raw,
    Daily,
    Digest,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Raw => "raw",
            Level::Daily => "daily",
            Level::Digest => "digest",
        }
    }

    /// Parses `raw`, `daily`, `digest` (case-insensitive, trimmed).
    pub fn parse(s: &str) -> Option<Level> {
        match s.trim().to_ascii_lowercase().as_str() {
            "raw" => Some(Level::Raw),
            "daily" => Some(Level::Daily),
            "digest" => Some(Level::Digest),
            _ => None,
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How sentences and terms are weighted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scoring {
    /// The original's `ln(N / (1 + df))` (default; reproduces its output).
    #[default]
    Original,
    /// A smoothed IDF, `ln((1 + N) / (1 + df)) + 1`, positive for every term,
    /// so frequent shared terms no longer rank below absent ones and a single
    /// sentence keeps its ordering (fixes the inversion of docs §12.7).
    Corrected,
}

/// Options of one compression.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompressOptions {
    pub scoring: Scoring,
}

/// The char at byte `i` of `text` and its length. `i` is a char boundary.
fn char_at(text: &str, i: usize) -> (char, usize) {
    let b = text.as_bytes()[i];
    if b < 0x80 {
        return (b as char, 1);
    }
    match text[i..].chars().next() {
        Some(c) => (c, c.len_utf8()),
        None => ('\u{FFFD}', 1),
    }
}

/// Where the next sentence starts after a split at byte `i`: alternative 1
/// of the split pattern (after a terminator) consumes the whole whitespace
/// run, alternative 2 (a newline not after a terminator) only the newlines.
fn gap_end(text: &str, i: usize, after_terminator: bool) -> usize {
    let bytes = text.as_bytes();
    let mut j = i;
    if after_terminator {
        while j < bytes.len() {
            let (sp, l) = space_at(text, j);
            if !sp {
                break;
            }
            j += l;
        }
    } else {
        while j < bytes.len() && bytes[j] == b'\n' {
            j += 1;
        }
    }
    j
}

/// Python's `isspace` for the char at byte `i`, and the char's length.
/// Only the lead bytes of Unicode spaces (U+0085, U+00A0, U+1680, U+2000…,
/// U+3000) need decoding.
fn space_at(text: &str, i: usize) -> (bool, usize) {
    let b = text.as_bytes()[i];
    match b {
        b'\t'..=b'\r' | 0x1C..=0x20 => (true, 1),
        0x00..=0x7F => (false, 1),
        0xC2 | 0xE1 | 0xE2 | 0xE3 => {
            let (c, len) = char_at(text, i);
            (py_isspace(c), len)
        }
        _ => (false, utf8_len(b)),
    }
}

fn utf8_len(lead: u8) -> usize {
    match lead {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// Whether the char ending at byte `i` is a sentence terminator
/// (`. ! ? 。 ！ ？`). UTF-8 is self-synchronising, so a complete 3-byte
/// encoding at the end of a char-boundary prefix is that char.
fn terminator_before(bytes: &[u8], i: usize) -> bool {
    if i == 0 {
        return false;
    }
    if matches!(bytes[i - 1], b'.' | b'!' | b'?') {
        return true;
    }
    i >= 3
        && matches!(
            &bytes[i - 3..i],
            [0xE3, 0x80, 0x82] | [0xEF, 0xBC, 0x81] | [0xEF, 0xBC, 0x9F]
        )
}

/// Splits text into sentences the way the original's
/// `re.split(r"(?<=[.!?。！？])\s+|\n+", text.strip())` does, then strips each
/// part and drops empty ones. A regex crate has no look-behind, hence the
/// hand-written scanner: a boundary is whitespace right after a terminator
/// (the whole whitespace run), or a run of newlines anywhere.
pub fn split_sentences(text: &str) -> Vec<&str> {
    let text = py_strip(text);
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut seg_start = 0usize;
    let mut i = 0usize;
    while i < bytes.len() {
        let (space, len) = space_at(text, i);
        if !space {
            i += len;
            continue;
        }
        let after_terminator = terminator_before(bytes, i);
        if !after_terminator && bytes[i] != b'\n' {
            i += len;
            continue;
        }
        let part = py_strip(&text[seg_start..i]);
        if !part.is_empty() {
            out.push(part);
        }
        let j = gap_end(text, i, after_terminator);
        seg_start = j;
        i = j;
    }
    let part = py_strip(&text[seg_start..]);
    if !part.is_empty() {
        out.push(part);
    }
    out
}

/// FxHash (as in rustc): a fast multiplicative hash for short keys. The
/// keys are words of the user's own memory, so hash flooding is no concern,
/// and SipHash would cost more than the rest of the compression.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type Fx = BuildHasherDefault<FxHasher>;

/// The compression tokens of a list of documents (sentences), as term ids
/// in one flat list. Ids are given in first-seen order, which is also the
/// order of the tokens of the whole text (separators are whitespace, which
/// no token contains), so the digest's term frequencies come out in the
/// original's `Counter` order.
#[derive(Default)]
struct Terms {
    ids: Vec<u32>,
    /// Document `i` is `ids[bounds[i]..bounds[i + 1]]`.
    bounds: Vec<usize>,
    /// Term text: `arena[spans[id].0..spans[id].1]` (one allocation for all).
    arena: String,
    spans: Vec<(u32, u32)>,
    /// Words of at most 16 bytes, packed into an integer (they hold no NUL,
    /// so packing is one-to-one): no string compare on lookup.
    short: HashMap<u128, u32, Fx>,
    long: HashMap<Box<str>, u32, Fx>,
    chars: HashMap<char, u32, Fx>,
    /// For long texts, CJK ideographs (U+3400..=U+9FFF) map through a dense
    /// table (id + 1; 0 = unseen) instead of the hash map.
    cjk: Vec<u32>,
}

const CJK_FIRST: u32 = 0x3400;
const CJK_LAST: u32 = 0x9FFF;
/// Texts at least this long (bytes) get the dense CJK table.
const CJK_TABLE_MIN_BYTES: usize = 16 * 1024;

/// Chars whose lower case is an ASCII letter (KELVIN SIGN → `k`; `İ` → `i`
/// followed by U+0307): they can join an ASCII word, so texts with them
/// take the char-by-char path.
fn lowers_to_ascii(text: &str) -> bool {
    text.contains(['\u{212A}', '\u{0130}'])
}

impl Terms {
    fn with_capacity(text_len: usize) -> Terms {
        let words = (text_len / 16).clamp(64, 1 << 16);
        Terms {
            ids: Vec::with_capacity(text_len / 4),
            short: HashMap::with_capacity_and_hasher(words, Fx::default()),
            spans: Vec::with_capacity(words),
            arena: String::with_capacity(words * 8),
            cjk: if text_len >= CJK_TABLE_MIN_BYTES {
                vec![0; (CJK_LAST - CJK_FIRST + 1) as usize]
            } else {
                Vec::new()
            },
            ..Terms::default()
        }
    }

    fn doc(&self, i: usize) -> &[u32] {
        &self.ids[self.bounds[i]..self.bounds[i + 1]]
    }

    fn docs(&self) -> usize {
        self.bounds.len().saturating_sub(1)
    }

    fn len(&self) -> usize {
        self.spans.len()
    }

    fn name(&self, id: usize) -> &str {
        let (a, b) = self.spans[id];
        &self.arena[a as usize..b as usize]
    }

    fn new_id(&mut self, name: &str) -> u32 {
        let id = self.spans.len() as u32;
        let start = self.arena.len() as u32;
        self.arena.push_str(name);
        self.spans.push((start, self.arena.len() as u32));
        id
    }

    /// Interns a lower-cased ASCII word of 3+ bytes.
    /// Interns an ASCII word of 3+ bytes, lower-casing it on the way. Words
    /// of up to 16 bytes are packed into an integer key in registers (a
    /// byte-array copy would stall on store forwarding).
    fn word(&mut self, w: &[u8]) {
        let id = if w.len() <= 16 {
            let mut key: u128 = 0;
            for (i, b) in w.iter().enumerate() {
                key |= u128::from(b.to_ascii_lowercase()) << (8 * i);
            }
            match self.short.get(&key) {
                Some(id) => *id,
                None => {
                    let bytes = key.to_le_bytes();
                    let id =
                        self.new_id(std::str::from_utf8(&bytes[..w.len()]).unwrap_or_default());
                    self.short.insert(key, id);
                    id
                }
            }
        } else {
            let lower = w.to_ascii_lowercase();
            let s = std::str::from_utf8(&lower).unwrap_or_default();
            match self.long.get(s) {
                Some(id) => *id,
                None => {
                    let id = self.new_id(s);
                    self.long.insert(s.into(), id);
                    id
                }
            }
        };
        self.ids.push(id);
    }

    fn push_char(&mut self, c: char) {
        let code = c as u32;
        if !self.cjk.is_empty() && (CJK_FIRST..=CJK_LAST).contains(&code) {
            let slot = (code - CJK_FIRST) as usize;
            let id = match self.cjk[slot] {
                0 => {
                    let id = self.new_id(c.encode_utf8(&mut [0u8; 4]));
                    self.cjk[slot] = id + 1;
                    id
                }
                stored => stored - 1,
            };
            self.ids.push(id);
            return;
        }
        let id = match self.chars.get(&c) {
            Some(id) => *id,
            None => {
                let id = self.new_id(c.encode_utf8(&mut [0u8; 4]));
                self.chars.insert(c, id);
                id
            }
        };
        self.ids.push(id);
    }

    /// Tokenises `docs` as `compression_tokens(doc)` would (lower-case, then
    /// `[a-z0-9]{3,}` runs and single non-Latin chars), without building
    /// lower-cased copies.
    fn of(docs: &[&str]) -> Terms {
        let total: usize = docs.iter().map(|d| d.len()).sum();
        let mut t = Terms::with_capacity(total);
        t.bounds.push(0);
        let mut buf: Vec<u8> = Vec::with_capacity(32);
        for doc in docs {
            if lowers_to_ascii(doc) {
                t.doc_slow(doc, &mut buf);
            } else {
                t.doc_fast(doc);
            }
            t.bounds.push(t.ids.len());
        }
        t
    }

    /// Sentences and their terms in one pass over `text` (the work of
    /// [`split_sentences`] followed by [`Terms::of`]): the text is scanned once,
    /// tokens go to the current sentence, a boundary closes it. Texts with
    /// chars that lower-case into ASCII take the two-pass path.
    fn analyse(text: &str) -> (Vec<&str>, Terms) {
        if lowers_to_ascii(text) {
            let sentences = split_sentences(text);
            let terms = Terms::of(&sentences);
            return (sentences, terms);
        }
        let text = py_strip(text);
        let bytes = text.as_bytes();
        let mut t = Terms::with_capacity(text.len());
        t.bounds.push(0);
        let mut sentences = Vec::new();
        let mut seg_start = 0usize;
        let mut i = 0usize;
        while i < bytes.len() {
            let b = bytes[i];
            if b.is_ascii_alphanumeric() {
                let start = i;
                while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                if i - start >= 3 {
                    t.word(&bytes[start..i]);
                }
                continue;
            }
            let (space, len) = space_at(text, i);
            if !space {
                if b >= 0x80 {
                    let (c, _) = char_at(text, i);
                    t.non_latin(c);
                }
                i += len;
                continue;
            }
            let after_terminator = terminator_before(bytes, i);
            if !after_terminator && b != b'\n' {
                i += len;
                continue;
            }
            let part = py_strip(&text[seg_start..i]);
            if !part.is_empty() {
                sentences.push(part);
                t.bounds.push(t.ids.len());
            }
            let j = gap_end(text, i, after_terminator);
            seg_start = j;
            i = j;
        }
        let part = py_strip(&text[seg_start..]);
        if !part.is_empty() {
            sentences.push(part);
            t.bounds.push(t.ids.len());
        }
        (sentences, t)
    }

    /// A non-ASCII char that cannot lower-case into ASCII: a token when it
    /// is in the non-Latin ranges (Cyrillic lower-cased, staying in range).
    fn non_latin(&mut self, c: char) {
        if is_non_latin(c) {
            let lower = if ('\u{0400}'..='\u{04FF}').contains(&c) {
                c.to_lowercase().next().unwrap_or(c)
            } else {
                c
            };
            self.push_char(lower);
        }
    }

    /// Byte scan: ASCII words are lower-cased as they are interned; the only
    /// cased non-Latin letters are Cyrillic, whose lower case stays in range.
    fn doc_fast(&mut self, doc: &str) {
        let bytes = doc.as_bytes();
        scan_compression_tokens(doc, |t| match t {
            Scanned::Word(a, b) => self.word(&bytes[a..b]),
            Scanned::Char(c, ..) => self.non_latin(c),
        });
    }

    /// Char by char through `char::to_lowercase`, for the rare texts with
    /// chars that lower-case into ASCII.
    fn doc_slow(&mut self, doc: &str, buf: &mut Vec<u8>) {
        buf.clear();
        let flush = |t: &mut Terms, buf: &mut Vec<u8>| {
            if buf.len() >= 3 {
                let owned = std::mem::take(buf);
                t.word(&owned);
                *buf = owned;
            }
            buf.clear();
        };
        for c in doc.chars() {
            for l in c.to_lowercase() {
                if l.is_ascii_alphanumeric() {
                    buf.push(l as u8);
                } else {
                    flush(self, buf);
                    if is_non_latin(l) {
                        self.push_char(l);
                    }
                }
            }
        }
        flush(self, buf);
    }

    /// IDF per term id over the documents.
    fn idf(&self, scoring: Scoring) -> Vec<f64> {
        let n = self.docs();
        let mut df = vec![0u32; self.len()];
        let mut last_doc = vec![usize::MAX; self.len()];
        for d in 0..n {
            for &t in self.doc(d) {
                if last_doc[t as usize] != d {
                    last_doc[t as usize] = d;
                    df[t as usize] += 1;
                }
            }
        }
        df.iter()
            .map(|&f| idf_value(n, f as usize, scoring))
            .collect()
    }
}

fn idf_value(n: usize, df: usize, scoring: Scoring) -> f64 {
    match scoring {
        Scoring::Original => (n as f64 / (1 + df) as f64).ln(),
        Scoring::Corrected => ((1 + n) as f64 / (1 + df) as f64).ln() + 1.0,
    }
}

/// IDF of every term over `documents` (docs §8.6 `compute_tfidf`); `{}` for
/// no documents.
pub fn compute_idf(documents: &[&str], scoring: Scoring) -> HashMap<String, f64> {
    if documents.is_empty() {
        return HashMap::new();
    }
    let terms = Terms::of(documents);
    let idf = terms.idf(scoring);
    (0..terms.len())
        .map(|id| (terms.name(id).to_string(), idf[id]))
        .collect()
}

/// Left-to-right float sum, as Python 3.11's `sum()` computes it (the
/// fixtures were generated with 3.11; 3.12 switched to compensated
/// summation, which can break exact ties differently).
fn py_sum(values: impl Iterator<Item = f64>) -> f64 {
    let mut total = 0.0f64;
    let mut first = true;
    for v in values {
        if first {
            // `0 + x` with an int start: exactly x.
            total = v;
            first = false;
        } else {
            total += v;
        }
    }
    total
}

fn mean_idf(terms: &[u32], idf: &[f64]) -> f64 {
    if terms.is_empty() {
        return 0.0;
    }
    py_sum(terms.iter().map(|t| idf[*t as usize])) / terms.len() as f64
}

/// The `k` best `(index, score)` pairs, highest score first, ties in index
/// order: what Python's stable `sort(key=score, reverse=True)` followed by
/// `[:k]` yields, without sorting everything.
fn top_k(items: &mut Vec<(usize, f64)>, k: usize) {
    let order = |a: &(usize, f64), b: &(usize, f64)| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.0.cmp(&b.0))
    };
    if items.len() > k && k > 0 {
        items.select_nth_unstable_by(k - 1, order);
        items.truncate(k);
    }
    items.sort_unstable_by(order);
}

/// The daily level: first and last sentence plus the 5 highest-scoring
/// middle sentences, in text order, joined by single spaces; texts of 7
/// sentences or fewer come back stripped; `Keywords: …` header when given.
pub fn compress_daily(content: &str, keywords: &[String], opts: CompressOptions) -> String {
    // Short texts are split first, so those of 7 sentences or fewer come
    // back without being tokenised; long ones are split and tokenised in
    // one pass.
    let (sentences, terms) = if content.len() < 4_096 {
        (split_sentences(content), None)
    } else {
        let (s, t) = Terms::analyse(content);
        (s, Some(t))
    };
    if sentences.is_empty() {
        return content.to_string();
    }
    let compressed = if sentences.len() <= DAILY_TOP_K_SENTENCES + 2 {
        py_strip(content).to_string()
    } else {
        let terms = terms.unwrap_or_else(|| Terms::of(&sentences));
        let idf = terms.idf(opts.scoring);
        let last = sentences.len() - 1;
        let mut middle: Vec<(usize, f64)> = (1..last)
            .map(|i| (i, mean_idf(terms.doc(i), &idf)))
            .collect();
        top_k(&mut middle, DAILY_TOP_K_SENTENCES);
        let mut kept: Vec<usize> = vec![0, last];
        kept.extend(middle.iter().map(|(i, _)| *i));
        kept.sort_unstable();
        kept.iter()
            .map(|i| sentences[*i])
            .collect::<Vec<_>>()
            .join(" ")
    };
    if keywords.is_empty() {
        compressed
    } else {
        format!("Keywords: {}\n\n{compressed}", keywords.join(", "))
    }
}

/// The digest level: the 15 terms with the highest `tf × idf` (idf over the
/// text's sentences), as a bullet list under `Key concepts:`, after an
/// optional `Context: …` line. A text without tokens comes back unchanged.
pub fn compress_digest(content: &str, keywords: &[String], opts: CompressOptions) -> String {
    // Tokens of the whole text = the sentences' tokens in order (see `Terms`).
    let (_, terms) = Terms::analyse(content);
    if terms.ids.is_empty() {
        return content.to_string();
    }
    let mut tf = vec![0u32; terms.len()];
    for &t in &terms.ids {
        tf[t as usize] += 1;
    }
    let idf = terms.idf(opts.scoring);
    let mut scored: Vec<(usize, f64)> = tf
        .iter()
        .enumerate()
        .map(|(id, freq)| (id, *freq as f64 * idf.get(id).copied().unwrap_or(1.0)))
        .collect();
    top_k(&mut scored, DIGEST_TOP_KEYWORDS);
    let mut out = String::with_capacity(32 + 24 * scored.len());
    if !keywords.is_empty() {
        out.push_str("Context: ");
        out.push_str(&keywords.join(", "));
        out.push('\n');
    }
    out.push_str("Key concepts:");
    for (id, _) in &scored {
        out.push_str("\n  - ");
        out.push_str(terms.name(*id));
    }
    out
}

/// Compresses `content` to `level` (`raw` returns it unchanged).
pub fn compress(content: &str, level: Level, keywords: &[String], opts: CompressOptions) -> String {
    match level {
        Level::Raw => content.to_string(),
        Level::Daily => compress_daily(content, keywords, opts),
        Level::Digest => compress_digest(content, keywords, opts),
    }
}

/// Jaccard overlap of the compression-token sets: 1.0 when both are empty,
/// 0.0 when only one is (docs §8.6).
pub fn estimate_retention(original: &str, compressed: &str) -> f64 {
    // A `Terms`' names are its distinct tokens, i.e. the token set.
    let a = Terms::of(&[original]);
    let b = Terms::of(&[compressed]);
    if a.len() == 0 && b.len() == 0 {
        return 1.0;
    }
    if a.len() == 0 || b.len() == 0 {
        return 0.0;
    }
    let set: std::collections::HashSet<&str, Fx> = (0..a.len()).map(|i| a.name(i)).collect();
    let inter = (0..b.len()).filter(|i| set.contains(b.name(*i))).count();
    let union = a.len() + b.len() - inter;
    inter as f64 / union as f64
}

/// The level an entry should move to, given days since its last access
/// (strictly more than 7 → daily, more than 30 → digest; digest is final).
pub fn should_compress(
    level: Level,
    last_accessed: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<Level> {
    let days = (now - last_accessed).num_milliseconds() as f64 / 86_400_000.0;
    match level {
        Level::Raw if days > DAILY_THRESHOLD_DAYS => Some(Level::Daily),
        Level::Daily if days > DIGEST_THRESHOLD_DAYS => Some(Level::Digest),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::tokenize::compression_tokens;
    use chrono::Duration;

    fn kw(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    const TWELVE: &str = "Bitcoin rallied strongly this week. Trading volume doubled on major exchanges. \
Analysts cited institutional demand for crypto assets. The market structure looks healthier than last year. \
Funding rates stayed neutral across perpetual swaps. Options traders bought upside calls. \
Ethereum lagged the broader crypto market. Stablecoin supply grew for the third month. \
Regulators signalled a clearer framework for custody. Miners sold a smaller share of rewards. \
Retail interest, measured by search trends, stayed muted. The trading desk expects volatility to rise.";

    #[test]
    fn mc01_to_mc04_thresholds() {
        let now = Utc::now();
        assert_eq!(
            should_compress(Level::Raw, now - Duration::days(8), now),
            Some(Level::Daily)
        );
        assert_eq!(
            should_compress(Level::Daily, now - Duration::days(31), now),
            Some(Level::Digest)
        );
        assert_eq!(
            should_compress(Level::Raw, now - Duration::days(1), now),
            None
        );
        assert_eq!(
            should_compress(Level::Digest, now - Duration::days(365), now),
            None
        );
        // Strictly greater: exactly 7 days is not enough.
        assert_eq!(
            should_compress(Level::Raw, now - Duration::days(7), now),
            None
        );
    }

    #[test]
    fn mc05_daily_is_shorter() {
        assert_eq!(split_sentences(TWELVE).len(), 12);
        let out = compress_daily(TWELVE, &[], CompressOptions::default());
        assert!(out.len() < TWELVE.len());
    }

    #[test]
    fn mc06_daily_keywords() {
        let out = compress_daily(
            TWELVE,
            &kw(&["bitcoin", "trading"]),
            CompressOptions::default(),
        );
        let low = out.to_lowercase();
        assert!(low.contains("bitcoin") && low.contains("trading"));
        assert!(out.starts_with("Keywords: bitcoin, trading\n\n"));
    }

    #[test]
    fn mc07_short_note_unchanged() {
        let out = compress_daily("Just a brief note.", &[], CompressOptions::default());
        assert!(out.contains("Just a brief note."));
    }

    #[test]
    fn mc08_digest_shape() {
        let out = compress_digest(TWELVE, &[], CompressOptions::default());
        assert!(out.contains("Key concepts:"));
        assert!(out.contains("  - "));
    }

    #[test]
    fn mc09_digest_context() {
        let out = compress_digest(
            TWELVE,
            &kw(&["crypto", "market"]),
            CompressOptions::default(),
        );
        assert!(out.contains("Context:"));
        assert!(out.contains("crypto"));
    }

    #[test]
    fn mc10_retention() {
        assert!((estimate_retention(TWELVE, TWELVE) - 1.0).abs() < 0.01);
        assert!(
            estimate_retention(
                "Bitcoin cryptocurrency blockchain technology analysis",
                "cooking recipe pasta garlic olive tomato"
            ) < 0.2
        );
        assert_eq!(estimate_retention("", ""), 1.0);
        assert_eq!(estimate_retention("abc def", ""), 0.0);
    }

    #[test]
    fn mc12_idf() {
        let idf = compute_idf(
            &[
                "Bitcoin trading strategy",
                "Ethereum trading protocol",
                "Cooking recipe guide",
            ],
            Scoring::Original,
        );
        assert!(idf.contains_key("trading") && idf.contains_key("cooking"));
        assert!(idf["cooking"] > idf["trading"]);
        assert!(compute_idf(&[], Scoring::Original).is_empty());
        let one = compute_idf(&["Bitcoin trading analysis"], Scoring::Original);
        assert!(!one.is_empty());
        for v in one.values() {
            assert_eq!(*v, 0.5f64.ln());
            assert!(*v <= 0.0);
        }
        // The corrected option never goes negative.
        let one = compute_idf(&["Bitcoin trading analysis"], Scoring::Corrected);
        assert!(one.values().all(|v| *v > 0.0));
    }

    #[test]
    fn mc13_sentence_split_exact() {
        assert_eq!(
            split_sentences("你好。世界。\n\nNext line 3.5 ok. e.g. yes"),
            vec!["你好。世界。", "Next line 3.5 ok.", "e.g.", "yes"]
        );
        assert!(split_sentences("  \n ").is_empty());
        assert_eq!(split_sentences("a\u{1c}b. c"), vec!["a\u{1c}b.", "c"]);
        assert_eq!(
            split_sentences("one!\u{3000}two？ three"),
            vec!["one!", "two？", "three"]
        );
    }

    #[test]
    fn mc14_daily_exact() {
        let text = "Alpha beta gamma. Delta epsilon zeta! Eta theta iota? Kappa lambda mu. Nu xi omicron. Pi rho sigma. Tau upsilon phi. Chi psi omega. Alpha beta again. Gamma delta again.";
        let want = "Alpha beta gamma. Eta theta iota? Kappa lambda mu. Nu xi omicron. Pi rho sigma. Tau upsilon phi. Gamma delta again.";
        assert_eq!(compress_daily(text, &[], CompressOptions::default()), want);
        assert_eq!(
            compress_daily(text, &kw(&["k1", "k2"]), CompressOptions::default()),
            format!("Keywords: k1, k2\n\n{want}")
        );
    }

    #[test]
    fn mc15_digest_exact() {
        assert_eq!(
            compress_digest(
                "apple banana apple. cherry apple. banana date.",
                &[],
                CompressOptions::default()
            ),
            "Key concepts:\n  - cherry\n  - date\n  - apple\n  - banana"
        );
        // Corrected scoring puts the frequent terms first.
        assert_eq!(
            compress_digest(
                "apple banana apple. cherry apple. banana date.",
                &[],
                CompressOptions {
                    scoring: Scoring::Corrected
                }
            ),
            "Key concepts:\n  - apple\n  - banana\n  - cherry\n  - date"
        );
    }

    /// Every case of tests/fixtures/memory (outputs of the original's
    /// compression.py, see its README) reproduced exactly.
    #[test]
    fn fixtures_match_the_original() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memory");
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(root.join("manifest.json")).unwrap())
                .unwrap();
        let cases = manifest["cases"].as_array().unwrap();
        assert!(cases.len() > 100);
        let opts = CompressOptions::default();
        for case in cases {
            let input =
                std::fs::read_to_string(root.join(case["input"].as_str().unwrap())).unwrap();
            let want =
                std::fs::read_to_string(root.join(case["expected"].as_str().unwrap())).unwrap();
            let keywords: Vec<String> = case["keywords"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_str().unwrap().to_string())
                .collect();
            let got = match case["level"].as_str().unwrap() {
                "daily" => compress_daily(&input, &keywords, opts),
                "digest" => compress_digest(&input, &keywords, opts),
                _ => compress_digest(&compress_daily(&input, &keywords, opts), &keywords, opts),
            };
            assert_eq!(got, want, "case {}", case["id"]);
            let retention = estimate_retention(&input, &got);
            assert!(
                (retention - case["retention"].as_f64().unwrap()).abs() < 1e-12,
                "retention of {}",
                case["id"]
            );
        }
    }

    #[test]
    fn fast_and_slow_tokenizer_paths_match_the_pattern() {
        for text in [
            "The \u{212A}ey İstanbul ABC déjà-vu x1Y2z",
            "ПРИВЕТ Мир Ӏ ӏ ЀЁ 上证 ภาษา שלום مرحبا",
            "MiXeD CaSe WORDS and digits 12345 and ab",
            "averyveryverylongwordbeyondsixteenbytes AVERYVERYVERYLONGWORDBEYONDSIXTEENBYTES",
        ] {
            let terms = Terms::of(&[text]);
            let got: Vec<String> = terms
                .ids
                .iter()
                .map(|i| terms.name(*i as usize).to_string())
                .collect();
            assert_eq!(got, compression_tokens(text), "{text}");
        }
    }

    #[test]
    fn one_pass_analysis_equals_split_then_tokenize() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memory/inputs");
        let mut texts: Vec<String> = std::fs::read_dir(root)
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .collect();
        texts.push("K\u{212A}elvin. İstanbul! Next\nline".into());
        for text in &texts {
            let (sentences, terms) = Terms::analyse(text);
            let split = split_sentences(text);
            let two_pass = Terms::of(&split);
            assert_eq!(sentences, split);
            assert_eq!(terms.bounds, two_pass.bounds);
            let a: Vec<&str> = terms.ids.iter().map(|i| terms.name(*i as usize)).collect();
            let b: Vec<&str> = two_pass
                .ids
                .iter()
                .map(|i| two_pass.name(*i as usize))
                .collect();
            assert_eq!(a, b);
        }
    }

    #[test]
    fn empty_and_tokenless_inputs_come_back_unchanged() {
        assert_eq!(
            compress_daily("   ", &kw(&["k"]), CompressOptions::default()),
            "   "
        );
        assert_eq!(
            compress_digest("a b. c", &kw(&["k"]), CompressOptions::default()),
            "a b. c"
        );
        assert_eq!(Level::parse(" Digest "), Some(Level::Digest));
        assert_eq!(Level::parse("weekly"), None);
    }
}
