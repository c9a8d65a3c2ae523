//! A JSONL message list read in place, for `vibedesk compact` on large
//! transcripts. A line already written the way the Python-style writer
//! writes it ([`canonical`](super::canonical)) stays borrowed from the
//! file's bytes: the layers read its fields in place, and it is written back
//! as its own bytes, with only a replaced content spliced in. Any other line
//! is parsed into a map as before. Either way the output is what writing
//! the parsed maps would give, byte for byte. Lines are read on all cores.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::fs::File;
use std::io::Write;
use std::path::Path;

use serde_json::{Map, Value};

use super::canonical::{CanonicalLine, ContentSpan, char_count, scan_line};
use super::message::ChatMessage;
use crate::llm::tokens::{json_str_len, python_json_chars, python_json_string};

/// Below this size one thread reads the whole file.
const PARALLEL_BYTES: usize = 1 << 20;

/// One message of the list.
#[derive(Clone, Debug)]
pub enum LineMessage<'a> {
    InPlace(InPlace<'a>),
    Parsed(Map<String, Value>),
}

/// A canonical line and what the layers changed in it.
#[derive(Clone, Debug)]
pub struct InPlace<'a> {
    line: &'a str,
    scan: CanonicalLine,
    /// The content's text, unescaped when first asked for.
    unescaped: OnceCell<String>,
    /// A content set by a layer, written in place of the line's.
    replaced: Option<String>,
}

impl<'a> InPlace<'a> {
    fn span(&self, s: (usize, usize)) -> &'a str {
        let line = self.line;
        line.get(s.0..s.1).unwrap_or("")
    }
}

/// A content that a layer replaced, handed back without copying it: still
/// in the line (escaped or not) or already owned. Unescaped only if read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replaced<'a> {
    Text(Cow<'a, str>),
    /// A JSON string literal, quotes included.
    Literal(&'a str),
}

impl Replaced<'_> {
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Replaced::Text(t) => Cow::Borrowed(t),
            Replaced::Literal(l) => Cow::Owned(unescape(l)),
        }
    }
}

/// The text of a string literal (the scanner checked it, so it parses).
fn unescape(literal: &str) -> String {
    serde_json::from_str(literal).unwrap_or_default()
}

impl<'a> LineMessage<'a> {
    /// The message as a map, as the ordinary reader would have it.
    pub fn to_map(&self) -> Map<String, Value> {
        match self {
            LineMessage::Parsed(m) => m.clone(),
            LineMessage::InPlace(p) => {
                let mut m = match serde_json::from_str::<Value>(p.line) {
                    Ok(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                if let Some(t) = &p.replaced {
                    m.set_text(t.clone());
                }
                m
            }
        }
    }

    /// Writes `json.dumps(message, ensure_ascii=False)` to `out`: a line
    /// read in place as its own bytes, with a replaced content spliced in.
    pub fn write_python_json(&self, out: &mut impl Write) -> std::io::Result<()> {
        let p = match self {
            LineMessage::Parsed(m) => return out.write_all(python_json_string(m).as_bytes()),
            LineMessage::InPlace(p) => p,
        };
        let line = p.line.as_bytes();
        let Some(text) = &p.replaced else {
            return out.write_all(line);
        };
        let (before, after) = match p.scan.content {
            ContentSpan::Str(c) => (&line[..c.start], &line[c.end..]),
            ContentSpan::Other { start, end } => (&line[..start], &line[end..]),
            // Appended last, as a map insert would place a new key.
            ContentSpan::Absent => {
                let head = &line[..line.len() - 1];
                out.write_all(head)?;
                out.write_all(if head == b"{" {
                    b"\"content\": "
                } else {
                    b", \"content\": "
                })?;
                (&[][..], &b"}"[..])
            }
        };
        out.write_all(before)?;
        // A string alone is written the same with either formatter.
        serde_json::to_writer(&mut *out, text).map_err(std::io::Error::other)?;
        out.write_all(after)
    }
}

/// Either of two iterators over the same items.
enum Refs<A, B> {
    InPlace(A),
    Parsed(B),
}

impl<T, A: Iterator<Item = T>, B: Iterator<Item = T>> Iterator for Refs<A, B> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match self {
            Refs::InPlace(a) => a.next(),
            Refs::Parsed(b) => b.next(),
        }
    }
}

impl<'a> ChatMessage for LineMessage<'a> {
    type Replaced = Replaced<'a>;

    fn role(&self) -> &str {
        match self {
            LineMessage::InPlace(p) => p.scan.role.map_or("", |s| p.span(s)),
            LineMessage::Parsed(m) => m.role(),
        }
    }

    fn text(&self) -> Option<&str> {
        let p = match self {
            LineMessage::InPlace(p) => p,
            LineMessage::Parsed(m) => return m.text(),
        };
        if let Some(t) = &p.replaced {
            return Some(t);
        }
        let ContentSpan::Str(c) = p.scan.content else {
            return None;
        };
        Some(if c.escaped {
            p.unescaped
                .get_or_init(|| unescape(p.span((c.start, c.end))))
        } else {
            p.span((c.start + 1, c.end - 1))
        })
    }

    fn known_text_chars(&self) -> Option<usize> {
        match self {
            LineMessage::InPlace(p) if p.replaced.is_none() => match p.scan.content {
                ContentSpan::Str(c) => Some(c.chars),
                _ => None,
            },
            _ => None,
        }
    }

    fn set_text(&mut self, text: String) {
        match self {
            LineMessage::InPlace(p) => p.replaced = Some(text),
            LineMessage::Parsed(m) => m.set_text(text),
        }
    }

    fn replace_text(&mut self, text: String) -> Option<Replaced<'a>> {
        let p = match self {
            LineMessage::InPlace(p) => p,
            LineMessage::Parsed(m) => {
                return m.replace_text(text).map(|t| Replaced::Text(Cow::Owned(t)));
            }
        };
        if let Some(old) = &mut p.replaced {
            return Some(Replaced::Text(Cow::Owned(std::mem::replace(old, text))));
        }
        let ContentSpan::Str(c) = p.scan.content else {
            return None;
        };
        let old = match p.unescaped.take() {
            Some(t) => Replaced::Text(Cow::Owned(t)),
            None if c.escaped => Replaced::Literal(p.span((c.start, c.end))),
            None => Replaced::Text(Cow::Borrowed(p.span((c.start + 1, c.end - 1)))),
        };
        p.replaced = Some(text);
        Some(old)
    }

    fn tool_call_refs(&self) -> impl Iterator<Item = (&str, &str)> {
        match self {
            LineMessage::InPlace(p) => {
                Refs::InPlace(p.scan.tool_calls.iter().map(|(id, name)| {
                    (id.map_or("", |s| p.span(s)), name.map_or("", |s| p.span(s)))
                }))
            }
            LineMessage::Parsed(m) => Refs::Parsed(m.tool_call_refs()),
        }
    }

    fn tool_call_id(&self) -> Option<&str> {
        match self {
            LineMessage::InPlace(p) => p
                .scan
                .tool_call_id
                .map(|s| p.span(s))
                .filter(|s| !s.is_empty()),
            LineMessage::Parsed(m) => m.tool_call_id(),
        }
    }

    fn tool_result(id: &str, name: &str, content: &str) -> Self {
        LineMessage::Parsed(Map::tool_result(id, name, content))
    }

    fn user(content: String) -> Self {
        LineMessage::Parsed(Map::user(content))
    }

    fn python_json(&self) -> String {
        let mut out = Vec::new();
        // Writing to a Vec cannot fail.
        let _ = self.write_python_json(&mut out);
        // Both halves are UTF-8: the line's bytes and serde_json's output.
        String::from_utf8(out).unwrap_or_default()
    }

    fn python_len(&self) -> usize {
        let p = match self {
            LineMessage::InPlace(p) => p,
            LineMessage::Parsed(m) => return python_json_chars(m),
        };
        let Some(text) = &p.replaced else {
            return p.scan.chars;
        };
        let new = json_str_len(text);
        match p.scan.content {
            ContentSpan::Str(c) => p.scan.chars - c.literal_chars + new,
            ContentSpan::Other { start, end } => {
                p.scan.chars - char_count(&p.line.as_bytes()[start..end]) + new
            }
            ContentSpan::Absent if p.line == "{}" => p.scan.chars + "\"content\": ".len() + new,
            ContentSpan::Absent => p.scan.chars + ", \"content\": ".len() + new,
        }
    }
}

/// A file mapped read-only, for `vibedesk compact`'s input. Reading a large
/// transcript into fresh memory is most of that command's time: the kernel
/// zeroes every new page and then copies the file into it. A mapping shares
/// the page cache's pages instead: no zeroing, no copy.
///
/// The trade every tool that maps its input makes: the bytes must not change
/// while mapped. A file truncated under a running `vibedesk compact` ends it
/// with SIGBUS, and one rewritten in place may be read torn (then the line
/// checks decline it, or the output reflects the torn text). Session logs,
/// which the engine appends to while it runs, are never mapped.
pub struct MappedFile {
    ptr: std::ptr::NonNull<std::ffi::c_void>,
    len: usize,
}

// SAFETY: the mapping is read-only and owned; sharing a read-only view
// between threads is what a `&[u8]` does.
unsafe impl Send for MappedFile {}
// SAFETY: as above.
unsafe impl Sync for MappedFile {}

impl MappedFile {
    /// `None` for an empty file (nothing to map) or where mapping fails: the
    /// caller reads the file instead.
    pub fn open(path: &Path) -> Option<MappedFile> {
        use nix::sys::mman::{MapFlags, ProtFlags, mmap};
        let file = File::open(path).ok()?;
        let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
        let size = std::num::NonZeroUsize::new(len)?;
        // SAFETY: a fresh private read-only mapping of a file we opened; the
        // kernel picks the address. MAP_POPULATE maps every page now, from
        // the page cache, so reading it takes no further faults.
        let ptr = unsafe {
            mmap(
                None,
                size,
                ProtFlags::PROT_READ,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_POPULATE,
                &file,
                0,
            )
        }
        .ok()?;
        Some(MappedFile { ptr, len })
    }
}

impl std::ops::Deref for MappedFile {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes for as long as `self`
        // lives (see the type's doc for the file changing underneath).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<u8>(), self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, unmapped once; no slice of it
        // outlives `self` (they borrow it).
        let _ = unsafe { nix::sys::mman::munmap(self.ptr, self.len) };
    }
}

/// Why a file could not be read in place: the ordinary reader says exactly
/// what and where.
#[derive(Debug, PartialEq, Eq)]
pub struct NotReadable;

/// Every non-blank line of `bytes` as a message, lines split over the cores.
/// Fails on a line that is not UTF-8 or not a JSON object.
pub fn read_lines(bytes: &[u8]) -> Result<Vec<LineMessage<'_>>, NotReadable> {
    let parts = crate::text::line_parts(bytes, PARALLEL_BYTES);
    let (first, rest) = parts.split_first().ok_or(NotReadable)?;
    std::thread::scope(|scope| {
        let handles: Vec<_> = rest
            .iter()
            .map(|part| scope.spawn(move || read_part(part)))
            .collect();
        let mut out = read_part(first)?;
        for h in handles {
            out.extend(h.join().map_err(|_| NotReadable)??);
        }
        Ok(out)
    })
}

fn read_part(part: &[u8]) -> Result<Vec<LineMessage<'_>>, NotReadable> {
    let mut out = Vec::new();
    for raw in crate::text::lines(part) {
        let line = std::str::from_utf8(raw).map_err(|_| NotReadable)?;
        if let Some(scan) = scan_line(line) {
            out.push(LineMessage::InPlace(InPlace {
                line,
                scan,
                unescaped: OnceCell::new(),
                replaced: None,
            }));
            continue;
        }
        // As the ordinary reader: blank lines are skipped, the rest parsed
        // (a `\r` before the line end is JSON whitespace).
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(m)) => out.push(LineMessage::Parsed(m)),
            _ => return Err(NotReadable),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::agent::compaction::collapse::{CollapseParams, collapse};
    use crate::agent::compaction::microcompact::{Touched, microcompact};
    use crate::agent::compaction::pairs::fix_tool_pairs;

    /// What the fields read and what is written, for either kind of message.
    fn snapshot<M: ChatMessage>(msgs: &[M]) -> Vec<String> {
        msgs.iter()
            .map(|m| {
                let calls: Vec<_> = m.tool_call_refs().collect();
                format!(
                    "{} {:?} {:?} {calls:?} {} {}",
                    m.role(),
                    m.text(),
                    m.tool_call_id(),
                    m.python_len(),
                    m.python_json()
                )
            })
            .collect()
    }

    /// What a layer took out (index and text) and what it left.
    type Step = (Vec<(usize, String)>, Vec<String>);

    /// The layers with small limits, step by step.
    fn compact<M: ChatMessage>(
        msgs: &mut Vec<M>,
        original: impl Fn(&M::Replaced) -> String,
    ) -> Vec<Step> {
        let params = CollapseParams {
            preserve_recent: 1,
            min_chars: 12,
            head_chars: 4,
            tail_chars: 3,
        };
        let taken = |touched: Vec<Touched<M::Replaced>>| -> Vec<(usize, String)> {
            touched
                .iter()
                .map(|t| (t.index, original(&t.original_text)))
                .collect()
        };
        let micro = taken(microcompact(msgs, 1));
        let after_micro = snapshot(msgs);
        let collapsed = taken(collapse(msgs, params));
        let after_collapse = snapshot(msgs);
        let pairs = fix_tool_pairs(msgs);
        vec![
            (micro, after_micro),
            (collapsed, after_collapse),
            (
                vec![
                    (pairs.removed, String::new()),
                    (pairs.stubbed, String::new()),
                ],
                snapshot(msgs),
            ),
        ]
    }

    /// The ordinary reader's maps, or `None` where it fails.
    fn maps(text: &str) -> Option<Vec<Map<String, Value>>> {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| match serde_json::from_str::<Value>(l) {
                Ok(Value::Object(m)) => Some(m),
                _ => None,
            })
            .collect()
    }

    fn same_as_maps(text: &str) {
        let read = read_lines(text.as_bytes());
        let Some(mut maps) = maps(text) else {
            assert_eq!(read.err(), Some(NotReadable), "{text}");
            return;
        };
        let mut lines = read.unwrap();
        assert_eq!(lines.len(), maps.len());
        for (l, m) in lines.iter().zip(&maps) {
            assert_eq!(&l.to_map(), m);
            assert_eq!(l.python_json(), m.python_json(), "{text}");
            assert_eq!(l.python_len(), python_json_chars(m), "{text}");
        }
        assert_eq!(
            compact(&mut lines, |r| r.text().into_owned()),
            compact(&mut maps, String::clone),
            "{text}"
        );
        // A set text lands where a map insert puts it, whatever the content was.
        for (l, m) in lines.iter_mut().zip(&mut maps) {
            l.set_text("new \"text\" é\n".into());
            m.set_text("new \"text\" é\n".into());
            assert_eq!(l.python_json(), m.python_json(), "{text}");
            assert_eq!(l.python_len(), python_json_chars(m), "{text}");
        }
    }

    /// A JSON string literal as serde_json writes it, or with escapes it
    /// never writes (`\u` for non-ASCII, uppercase hex, `\/`).
    fn literal(s: &str, odd: bool) -> String {
        if !odd {
            return serde_json::to_string(s).unwrap();
        }
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '/' => out.push_str("\\/"),
                c if (c as u32) < 0x20 || !c.is_ascii() => {
                    let mut buf = [0u16; 2];
                    for unit in c.encode_utf16(&mut buf) {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
                c => out.push(c),
            }
        }
        out + "\""
    }

    fn text_strategy() -> impl Strategy<Value = String> {
        "(a|é|中|🙂|\"|\\\\|/|\n|\t|\u{1}|\u{1f}|\u{7f}| |xyz|0123456789|the quick brown fox jumps){0,80}"
    }

    /// One field as `(key, raw JSON value)`.
    fn field() -> impl Strategy<Value = (String, String)> {
        let id = prop::sample::select(vec!["c0", "c1", "c2", "c0", "c1", "c2", "", "c\\\"3"]);
        prop_oneof![
            3 => id.clone()
                .prop_map(|i| ("tool_call_id".into(), format!("\"{i}\""))),
            3 => prop::collection::vec((id, any::<bool>()), 0..3).prop_map(|calls| {
                let items: Vec<String> = calls
                    .iter()
                    .map(|(i, named)| {
                        let f = if *named {
                            "{\"name\": \"get\", \"arguments\": \"{\\\"a\\\": 1}\"}"
                        } else {
                            "{}"
                        };
                        format!("{{\"id\": \"{i}\", \"type\": \"function\", \"function\": {f}}}")
                    })
                    .collect();
                ("tool_calls".into(), format!("[{}]", items.join(", ")))
            }),
            4 => (
                prop::sample::select(vec!["x", "name", "y", "é"]),
                prop::sample::select(vec![
                    "1", "0", "-12", "true", "\"v\"", "[]", "{}", "[1, \"é\"]", "1.0", "1e5", "-0", "2.50", "12345678901234567890",
                    "123456789012345678", "true", "null", "{\"a\": 1, \"b\": [false]}",
                    "{\"a\": 1, \"a\": 2}", "[1.5, -0, 3]", "\"\\u00e9\"",
                ])
            )
                .prop_map(|(k, v)| (k.into(), v.into())),
        ]
    }

    /// A line from its fields (mostly a role and a string content, in any
    /// order among the others), with Python's separators or compact ones.
    fn line() -> impl Strategy<Value = String> {
        let role = prop_oneof![
            9 => prop::sample::select(vec!["user", "assistant", "tool", "tool", "system"])
                .prop_map(|r| ("role".to_string(), literal(r, false))),
            1 => Just(("role".to_string(), "7".to_string())),
        ];
        let content = prop_oneof![
            9 => (text_strategy(), prop::bool::weighted(0.1))
                .prop_map(|(t, odd)| ("content".to_string(), literal(&t, odd))),
            1 => prop::sample::select(vec!["null", "[1, {\"a\": \"b\"}]", "{}", "[]"])
                .prop_map(|v| ("content".to_string(), v.to_string())),
        ];
        (
            (
                role,
                content,
                prop::collection::vec(field(), 0..3),
                0..10usize,
            )
                .prop_map(|(r, c, mut rest, absent)| {
                    // Now and then no content at all, or a repeated key.
                    rest.push(r);
                    match absent {
                        0 => {}
                        1 => rest.extend([c.clone(), c]),
                        _ => rest.push(c),
                    }
                    rest
                })
                .prop_shuffle(),
            prop::bool::weighted(0.1),
            prop::sample::select(vec!["", "", "", "", "", "", "", "", " ", "\r"]),
        )
            .prop_map(|(fields, compact, end)| {
                let (sep, colon) = if compact { (",", ":") } else { (", ", ": ") };
                let body: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{}{colon}{v}", literal(k, false)))
                    .collect();
                format!("{{{}}}{end}", body.join(sep))
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Reading in place, the layers and writing give exactly what the
        /// ordinary reader's maps give: same fields seen, same counts, same
        /// bytes written, on canonical lines and on any others.
        #[test]
        fn in_place_matches_the_maps_byte_for_byte(
            lines in prop::collection::vec(
                prop_oneof![8 => line(), 1 => Just(String::new()), 1 => Just("[1]".to_string())],
                0..14,
            ),
        ) {
            same_as_maps(&(lines.join("\n") + "\n"));
        }
    }

    #[test]
    fn canonical_lines_are_read_in_place_and_others_parsed() {
        let text = concat!(
            "{\"role\": \"user\", \"content\": \"a\\nb\"}\n",
            "{\"role\":\"user\",\"content\":\"compact\"}\n",
            "\n",
            "{\"role\": \"tool\", \"content\": \"x\", \"n\": 1.0}\r\n",
            "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": []}",
        );
        let read = read_lines(text.as_bytes()).unwrap();
        let kinds: Vec<bool> = read
            .iter()
            .map(|m| matches!(m, LineMessage::InPlace(_)))
            .collect();
        assert_eq!(kinds, vec![true, false, false, true]);
        same_as_maps(text);
        assert_eq!(read_lines(b"{\"a\": 1}\n\xff\n").err(), Some(NotReadable));
    }

    /// A file is read whole, in parts on several threads when it is large.
    #[test]
    fn files_are_mapped_whole() {
        let d = tempfile::tempdir().unwrap();
        for len in [10, PARALLEL_BYTES + 4_099, 5 << 20] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let p = d.path().join(format!("{len}.bin"));
            std::fs::write(&p, &bytes).unwrap();
            let mapped = MappedFile::open(&p).unwrap();
            assert!(*mapped == bytes[..], "{len} bytes");
        }
        // Nothing to map: the caller reads (and reports) instead.
        std::fs::write(d.path().join("empty"), b"").unwrap();
        assert!(MappedFile::open(&d.path().join("empty")).is_none());
        assert!(MappedFile::open(&d.path().join("missing")).is_none());
    }

    /// A file large enough to be read on several threads keeps its order.
    #[test]
    fn large_files_keep_their_line_order() {
        let text: String = (0..40_000)
            .map(|i| {
                format!(
                    "{{\"role\": \"user\", \"content\": \"message {i} {}\"}}\n",
                    "z".repeat(i % 50)
                )
            })
            .collect();
        assert!(text.len() > PARALLEL_BYTES);
        let read = read_lines(text.as_bytes()).unwrap();
        assert_eq!(read.len(), 40_000);
        for (i, m) in read.iter().enumerate() {
            assert!(m.text().unwrap().starts_with(&format!("message {i} ")));
        }
        same_as_maps(&text);
    }
}
