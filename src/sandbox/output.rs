//! Capped capture of a child's stdout/stderr.
//!
//! A flood of output must fill neither memory nor disk. Each stream keeps a
//! head and a tail (half the cap each) and counts what falls between; the
//! log file on disk gets the head as it arrives and, at the end, a marker
//! naming the dropped bytes followed by the tail. Memory and disk both stay
//! within the cap plus one marker line. The original keeps everything in
//! memory and writes nothing when the child times out (§12.14).

use std::collections::VecDeque;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// A stream's head and tail within a byte cap.
#[derive(Clone, Debug, Default)]
pub struct CappedOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

impl CappedOutput {
    pub fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        CappedOutput {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap: cap - head_cap,
            total: 0,
        }
    }

    /// Adds a chunk; returns the part that went into the head (what the log
    /// file gets now).
    pub fn push<'a>(&mut self, chunk: &'a [u8]) -> &'a [u8] {
        self.total += chunk.len() as u64;
        let room = self.head_cap.saturating_sub(self.head.len());
        let (to_head, rest) = chunk.split_at(room.min(chunk.len()));
        self.head.extend_from_slice(to_head);
        if self.tail_cap > 0 && !rest.is_empty() {
            let rest = if rest.len() > self.tail_cap {
                &rest[rest.len() - self.tail_cap..]
            } else {
                rest
            };
            let overflow = (self.tail.len() + rest.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..overflow);
            self.tail.extend(rest);
        }
        to_head
    }

    /// Bytes the child wrote in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes neither in the head nor the tail.
    pub fn dropped(&self) -> u64 {
        self.total - (self.head.len() + self.tail.len()) as u64
    }

    /// The line that stands for the dropped bytes.
    pub fn marker(&self) -> Option<String> {
        let d = self.dropped();
        (d > 0).then(|| format!("\n[... {d} bytes omitted by the sandbox output cap ...]\n"))
    }

    /// What goes after the head in the log file.
    pub fn closing_bytes(&self) -> Vec<u8> {
        let mut out = self.marker().map(String::into_bytes).unwrap_or_default();
        out.extend(self.tail.iter());
        out
    }

    /// Head, marker and tail as text (undecodable bytes replaced, §6.2).
    pub fn text(&self) -> String {
        let mut bytes = self.head.clone();
        bytes.extend(self.closing_bytes());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// The result of capturing one stream.
#[derive(Debug)]
pub(crate) struct Captured {
    pub out: CappedOutput,
    /// The stream was still open when the drain window closed (a process
    /// that escaped the group kept it).
    pub cut_off: bool,
    pub log_error: Option<String>,
    /// The log, complete and flushed but not yet synced: the runner syncs
    /// it once it knows how the run ended (see `Runner::run`).
    pub log: Option<tokio::fs::File>,
}

/// Reads `reader` to its end, or until `stop` fires, into a [`CappedOutput`]
/// and the log file.
pub(crate) async fn capture<R: AsyncRead + Unpin>(
    mut reader: R,
    mut log: Option<tokio::fs::File>,
    cap: usize,
    stop: CancellationToken,
) -> Captured {
    let mut out = CappedOutput::new(cap);
    let mut log_error = None;
    let mut buf = vec![0u8; 64 * 1024];
    let mut cut_off = false;
    loop {
        let n = tokio::select! {
            biased;
            r = reader.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            _ = stop.cancelled() => { cut_off = true; break; }
        };
        let to_head = out.push(&buf[..n]);
        if let (Some(f), false) = (log.as_mut(), to_head.is_empty())
            && let Err(e) = f.write_all(to_head).await
        {
            log_error = Some(e.to_string());
            log = None;
        }
    }
    if let Some(mut f) = log.take() {
        let closing = out.closing_bytes();
        let r = async {
            f.write_all(&closing).await?;
            f.flush().await
        }
        .await;
        match r {
            Ok(()) => log = Some(f),
            Err(e) => log_error = Some(e.to_string()),
        }
    }
    Captured {
        out,
        cut_off,
        log_error,
        log,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole() {
        let mut c = CappedOutput::new(100);
        c.push(b"hello ");
        c.push(b"world");
        assert_eq!(c.text(), "hello world");
        assert_eq!(c.dropped(), 0);
    }

    #[test]
    fn head_and_tail_survive_a_flood() {
        let mut c = CappedOutput::new(10);
        assert_eq!(c.push(b"abc"), b"abc");
        assert_eq!(c.push(b"defghij"), b"de");
        for _ in 0..1000 {
            assert!(c.push(b"0123456789").is_empty());
        }
        c.push(b"XYZ");
        assert_eq!(c.total(), 10_013);
        assert_eq!(c.dropped(), 10_003);
        let t = c.text();
        assert!(t.starts_with("abcde\n[... 10003 bytes omitted"));
        assert!(t.ends_with("...]\n89XYZ"), "{t}");
    }

    #[test]
    fn a_chunk_spanning_head_and_tail_loses_nothing_within_the_cap() {
        let mut c = CappedOutput::new(8);
        c.push(b"12345678");
        assert_eq!(c.text(), "12345678");
        c.push(b"9");
        assert_eq!(c.dropped(), 1);
        assert!(c.text().ends_with("6789"));
    }

    #[tokio::test]
    async fn capture_writes_head_marker_and_tail_to_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let file = tokio::fs::File::create(&path).await.unwrap();
        let data = vec![b'x'; 10_000];
        let got = capture(&data[..], Some(file), 1000, CancellationToken::new()).await;
        assert_eq!(got.out.dropped(), 9_000);
        let on_disk = std::fs::read_to_string(&path).unwrap();
        assert_eq!(on_disk, got.out.text());
        assert!(on_disk.len() < 1100);
    }
}
