//! An incremental Server-Sent-Events decoder (the WHATWG "event stream"
//! format) for streamed model replies (docs §2.11). Bytes arrive in arbitrary
//! pieces from the network, so lines, `\r\n` pairs and UTF-8 characters may
//! all be split across [`SseDecoder::push`] calls.

/// One dispatched event. `event` is the `event:` field if one was given;
/// `data` is every `data:` line of the event joined with `\n`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the current, not yet terminated line. Kept as bytes so a
    /// UTF-8 character split across pushes is decoded only once it is whole;
    /// `\r` and `\n` never occur inside a multi-byte character, so splitting
    /// lines on them is safe.
    line: Vec<u8>,
    /// The last byte seen was a `\r` that ended a line: a `\n` right after it
    /// (possibly in the next push) belongs to the same line ending.
    after_cr: bool,
    /// The stream start has been passed (a leading BOM is dropped once).
    started: bool,
    event: Option<String>,
    data: String,
    /// At least one `data` field was seen since the last dispatch; an event
    /// with no data field is not dispatched, per the standard.
    has_data: bool,
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds more bytes and returns the events completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let mut bytes = bytes;
        if !self.started && !bytes.is_empty() {
            // The standard strips one UTF-8 BOM at the very start. Only a BOM
            // that arrives whole in the first push is recognised; servers
            // that send one at all send it in the first packet.
            self.started = true;
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        }
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' => self.end_line(&mut out),
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut out);
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(b);
                }
            }
        }
        out
    }

    /// Ends the stream. An event not yet terminated by a blank line is
    /// dropped, as the standard requires, so this returns no events today;
    /// it exists so callers need not know that, and it resets the decoder.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        *self = Self::default();
        Vec::new()
    }

    /// Whether bytes of an unfinished event are buffered (useful to say why
    /// a stream that ended early lost data).
    pub fn has_pending(&self) -> bool {
        !self.line.is_empty() || self.has_data || self.event.is_some()
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.first() == Some(&b':') {
            return; // comment, used by servers as keep-alive
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        let value = String::from_utf8_lossy(value);
        match name {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            b"event" => self.event = Some(value.into_owned()),
            // `id` and `retry` matter only to reconnecting browsers; unknown
            // fields are ignored by the standard.
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take().filter(|e| !e.is_empty());
        if std::mem::take(&mut self.has_data) {
            out.push(SseEvent {
                event,
                data: std::mem::take(&mut self.data),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(data: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: data.to_string(),
        }
    }

    /// Feeds `input` split at every possible position into two pushes and
    /// checks the result is the same as one push.
    fn all_splits(input: &[u8]) -> Vec<SseEvent> {
        let mut whole = SseDecoder::new();
        let expected = whole.push(input);
        for cut in 0..=input.len() {
            let mut d = SseDecoder::new();
            let mut got = d.push(&input[..cut]);
            got.extend(d.push(&input[cut..]));
            got.extend(d.finish());
            assert_eq!(got, expected, "split at {cut}");
        }
        expected
    }

    #[test]
    fn lf_line_endings() {
        let got = all_splits(b"data: a\n\ndata: b\n\n");
        assert_eq!(got, vec![ev("a"), ev("b")]);
    }

    #[test]
    fn crlf_line_endings_including_a_split_pair() {
        let got = all_splits(b"data: a\r\n\r\ndata: b\r\n\r\n");
        assert_eq!(got, vec![ev("a"), ev("b")]);
        // `\r` at the end of one push, `\n` at the start of the next: one line
        // ending, not an empty line that would dispatch early.
        let mut d = SseDecoder::new();
        assert!(d.push(b"data: x\r").is_empty());
        assert!(d.push(b"\ndata: y\r").is_empty());
        assert_eq!(d.push(b"\n\r\n"), vec![ev("x\ny")]);
    }

    #[test]
    fn lone_cr_line_endings() {
        let got = all_splits(b"data: a\r\rdata: b\rdata: c\r\r");
        assert_eq!(got, vec![ev("a"), ev("b\nc")]);
    }

    #[test]
    fn utf8_split_across_pushes() {
        let text = "data: héllo ✓ 🦀\n\n".as_bytes();
        let got = all_splits(text);
        assert_eq!(got, vec![ev("héllo ✓ 🦀")]);
        // One byte at a time.
        let mut d = SseDecoder::new();
        let mut got = Vec::new();
        for b in text {
            got.extend(d.push(std::slice::from_ref(b)));
        }
        assert_eq!(got, vec![ev("héllo ✓ 🦀")]);
    }

    #[test]
    fn multiple_data_lines_join_with_newline() {
        let got = all_splits(b"data: one\ndata: two\ndata:\ndata: three\n\n");
        assert_eq!(got, vec![ev("one\ntwo\n\nthree")]);
    }

    #[test]
    fn only_one_space_after_the_colon_is_removed() {
        let got = all_splits(b"data:no space\n\ndata:  two spaces\n\ndata\n\n");
        assert_eq!(got, vec![ev("no space"), ev(" two spaces"), ev("")]);
    }

    #[test]
    fn comments_are_ignored() {
        let got = all_splits(b": keep-alive\n\n:another\ndata: x\n: mid\n\n");
        assert_eq!(got, vec![ev("x")]);
    }

    #[test]
    fn dispatch_on_blank_line_only() {
        let mut d = SseDecoder::new();
        assert!(d.push(b"data: a\n").is_empty());
        assert!(d.has_pending());
        assert_eq!(d.push(b"\n"), vec![ev("a")]);
        assert!(!d.has_pending());
        // Blank lines without data dispatch nothing.
        assert!(d.push(b"\n\n\r\n").is_empty());
    }

    #[test]
    fn event_field_is_kept_and_reset() {
        let got = all_splits(b"event: error\ndata: {}\n\ndata: next\n\nevent: lonely\n\n");
        assert_eq!(
            got,
            vec![
                SseEvent {
                    event: Some("error".into()),
                    data: "{}".into()
                },
                ev("next"),
            ]
        );
    }

    #[test]
    fn unterminated_event_is_dropped_at_finish() {
        let mut d = SseDecoder::new();
        assert_eq!(d.push(b"data: done\n\ndata: partial\n"), vec![ev("done")]);
        assert!(d.finish().is_empty());
        let mut d = SseDecoder::new();
        assert!(d.push(b"data: no newline at all").is_empty());
        assert!(d.finish().is_empty());
        // The decoder is usable again after finish.
        assert_eq!(d.push(b"data: again\n\n"), vec![ev("again")]);
    }

    #[test]
    fn leading_bom_is_stripped() {
        let mut d = SseDecoder::new();
        assert_eq!(d.push(b"\xEF\xBB\xBFdata: a\n\n"), vec![ev("a")]);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        let mut d = SseDecoder::new();
        assert_eq!(d.push(b"data: a\xFFb\n\n"), vec![ev("a\u{FFFD}b")]);
    }
}
