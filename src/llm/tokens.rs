//! Token estimates. `chars4` is the original's estimate (spec §3.1): the
//! character count of the message list as Python's `json.dumps(...,
//! ensure_ascii=False)` writes it (with `", "` and `": "` separators), floor
//! divided by 4. It is computed without building the string.

use std::io;

use serde::Serialize;
use serde_json::ser::Formatter;

use crate::model::Message;

/// Names the estimator in watermark events.
pub const CHARS4: &str = "chars4";

/// `len(json.dumps(messages, ensure_ascii=False)) // 4`.
pub fn estimate_chars4(messages: &[Message]) -> u64 {
    python_json_chars(messages) as u64 / 4
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

    #[test]
    fn cjk_counts_characters_not_bytes() {
        let m = vec![Message::user("价格")];
        // [{"role": "user", "content": "价格"}] is 35 characters
        assert_eq!(python_json_chars(&m), 35);
    }
}
