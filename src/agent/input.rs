//! The size limit on one user message ([`LoopConfig::max_message_bytes`],
//! 1 MiB by default). Every way a message enters (`vibedesk run -p`, stdin,
//! the workstation's composer and paste, a resumed session) is checked
//! against it before anything is written, and a refusal says how to hand
//! the text in as a file instead. The original takes messages of any size;
//! a 50 MB prompt there costs gigabytes of memory and several copies on disk.
//!
//! [`LoopConfig::max_message_bytes`]: super::LoopConfig::max_message_bytes

use std::io::Read;

/// A user message over the limit. Its text names the size, the limit and
/// the remedy.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct MessageTooLarge {
    /// The message's size in bytes; `None` when reading stopped past the
    /// limit without learning the whole size (a pipe).
    pub bytes: Option<u64>,
    pub limit: usize,
    /// Where the text should go instead, as the user should read it: the
    /// session workspace.
    pub workspace: String,
}

impl MessageTooLarge {
    fn describe(&self) -> String {
        let limit = format!("{} ({} bytes)", human_bytes(self.limit as u64), self.limit);
        let size = match self.bytes {
            Some(b) => format!(
                "the message is {} ({b} bytes); one message may hold at most {limit}",
                human_bytes(b)
            ),
            None => format!("the message is larger than {limit}, the most one message may hold"),
        };
        format!(
            "{size} (`[agent] max_message_bytes` in config.toml). Hand a text this large in as a file: \
             save it in the workspace {} and ask the agent to read it, \
             e.g. \"read notes.txt in the workspace and summarise it\" (read_file pages through it).",
            self.workspace
        )
    }
}

/// `Err` when a message of `bytes` bytes is over `limit`.
pub fn check_message_size(
    bytes: usize,
    limit: usize,
    workspace: &dyn Fn() -> String,
) -> Result<(), MessageTooLarge> {
    if bytes <= limit {
        return Ok(());
    }
    Err(MessageTooLarge {
        bytes: Some(bytes as u64),
        limit,
        workspace: workspace(),
    })
}

/// Why [`read_message`] returned no message.
#[derive(Debug, thiserror::Error)]
pub enum ReadMessageError {
    #[error(transparent)]
    TooLarge(#[from] MessageTooLarge),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the text is not valid UTF-8")]
    NotUtf8,
}

/// Reads a whole message from `reader`, but never more than `limit + 1`
/// bytes: an oversized input is refused after reading just past the limit,
/// whatever its size. `known_size` (a regular file's length) makes the
/// refusal name the real size.
pub fn read_message(
    reader: impl Read,
    limit: usize,
    known_size: Option<u64>,
    workspace: &dyn Fn() -> String,
) -> Result<String, ReadMessageError> {
    if let Some(size) = known_size
        && size > limit as u64
    {
        return Err(MessageTooLarge {
            bytes: Some(size),
            limit,
            workspace: workspace(),
        }
        .into());
    }
    let mut bytes = Vec::new();
    reader.take(limit as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > limit {
        return Err(MessageTooLarge {
            bytes: None,
            limit,
            workspace: workspace(),
        }
        .into());
    }
    String::from_utf8(bytes).map_err(|_| ReadMessageError::NotUtf8)
}

/// `1.5 MiB`, `64.0 KiB`, `900 bytes`.
pub fn human_bytes(b: u64) -> String {
    const KIB: f64 = 1024.0;
    let f = b as f64;
    if f >= KIB * KIB {
        format!("{:.1} MiB", f / (KIB * KIB))
    } else if f >= KIB {
        format!("{:.1} KiB", f / KIB)
    } else {
        format!("{b} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> String {
        "/data/sessions/s1/workspace".into()
    }

    #[test]
    fn a_message_at_the_limit_passes_and_one_byte_more_is_refused() {
        assert!(check_message_size(1024, 1024, &ws).is_ok());
        let e = check_message_size(1025, 1024, &ws).unwrap_err();
        assert_eq!(e.bytes, Some(1025));
        let text = e.to_string();
        assert!(text.contains("1025 bytes"), "{text}");
        assert!(text.contains("1.0 KiB (1024 bytes)"), "{text}");
        assert!(text.contains("/data/sessions/s1/workspace"), "{text}");
        assert!(text.contains("read_file"), "{text}");
    }

    #[test]
    fn reading_stops_just_past_the_limit() {
        let ok = read_message(&b"12345678"[..], 8, None, &ws).unwrap();
        assert_eq!(ok, "12345678");
        // An endless reader: only limit + 1 bytes are ever taken.
        let endless = std::io::repeat(b'x');
        let e = read_message(endless, 8, None, &ws).unwrap_err();
        let ReadMessageError::TooLarge(e) = e else {
            panic!("{e:?}")
        };
        assert_eq!(e.bytes, None);
        assert!(
            e.to_string().contains("larger than 8 bytes (8 bytes)"),
            "{e}"
        );
        // A known size is refused without reading at all.
        let e = read_message(std::io::repeat(b'x'), 8, Some(50 << 20), &ws).unwrap_err();
        assert!(e.to_string().contains("50.0 MiB (52428800 bytes)"), "{e}");
        assert!(matches!(
            read_message(&[0xffu8, 0xfe][..], 8, None, &ws),
            Err(ReadMessageError::NotUtf8)
        ));
    }
}
