//! A stdio server's three streams and its exit, watched so that a failed
//! start has a stable, human reason (docs §13.2): "exited with status 1:
//! <last line of stderr>", "wrote non-MCP output to stdout: …", rather than
//! whatever the transport happened to be doing when the child went away.
//!
//! - stdout is pumped into a pipe that the MCP transport reads; lines that
//!   are not JSON are kept out of it and the first is remembered;
//! - stderr goes to the server's own log file (`<logs>/mcp/<name>.log`,
//!   capped, one rotation, at most [`STDERR_LINES_PER_SECOND`] lines a
//!   second, the rest counted), never to `vibedesk.log` or the screen, and
//!   its tail is kept for the reason;
//! - the child's exit status is published as soon as it exits.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::process::{Child, ChildStderr, ChildStdout};
use tokio::sync::watch;

use crate::logfile::LogFile;
use crate::sandbox::jobs::JobFile;

/// Each server's stderr log is cut at this size; the previous file is kept
/// as `<name>.log.1`, so a server never holds more than twice this on disk.
pub const STDERR_LOG_CAP: u64 = 1024 * 1024;
/// Lines of a server's stderr written to its log per second; the rest of
/// that second's are counted, not written (docs §13.2).
pub const STDERR_LINES_PER_SECOND: u32 = 100;
/// A longer stderr line is cut at this many bytes in the log.
pub const STDERR_LINE_BYTES: usize = 4096;
/// How much of the last dropped line the count quotes.
const QUOTE_BYTES: usize = 200;
/// How much of the end of stderr is kept in memory for the reason.
const TAIL_BYTES: usize = 4096;
/// How much of the first non-MCP line is quoted.
const JUNK_BYTES: usize = 80;

/// What is known about a running (or ended) stdio server.
#[derive(Clone)]
pub struct StdioWatch {
    exit: watch::Receiver<Option<ExitStatus>>,
    stdout_done: watch::Receiver<bool>,
    stderr_done: watch::Receiver<bool>,
    junk: Arc<Mutex<Option<String>>>,
    /// How many over-large answers came whose request id was not found.
    pub unmatched: watch::Receiver<u64>,
    tail: Arc<Mutex<Vec<u8>>>,
    /// The stderr log, when one could be opened.
    pub log: Option<PathBuf>,
}

impl StdioWatch {
    /// Waits up to `wait` for the child to exit; its status when it did.
    pub async fn exit_within(&self, wait: Duration) -> Option<ExitStatus> {
        let mut rx = self.exit.clone();
        let found = tokio::time::timeout(wait, async {
            rx.wait_for(Option::is_some).await.ok().and_then(|s| *s)
        })
        .await;
        match found {
            Ok(Some(status)) => Some(status),
            _ => *self.exit.borrow(),
        }
    }

    /// Resolves when the child has exited.
    pub async fn exited(&self) -> Option<ExitStatus> {
        let mut rx = self.exit.clone();
        let status = rx.wait_for(Option::is_some).await.ok().and_then(|s| *s);
        if status.is_none() {
            // The watcher is gone without a status: never resolve.
            std::future::pending::<()>().await;
        }
        status
    }

    /// Gives the pumps a moment to read what the child wrote before it
    /// ended (a wrapper's grandchild may keep a pipe open: bounded).
    pub async fn drained(&self, wait: Duration) {
        let mut out = self.stdout_done.clone();
        let mut err = self.stderr_done.clone();
        let both = async {
            let _ = out.wait_for(|d| *d).await;
            let _ = err.wait_for(|d| *d).await;
        };
        let _ = tokio::time::timeout(wait, both).await;
    }

    /// The first line on stdout that was not an MCP message, quoted.
    pub fn junk(&self) -> Option<String> {
        self.junk.lock().ok().and_then(|j| j.clone())
    }

    /// The last non-empty line of stderr, cut to 200 characters.
    pub fn last_stderr_line(&self) -> Option<String> {
        let tail = self.tail.lock().ok()?;
        let text = String::from_utf8_lossy(&tail);
        let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
        Some(crate::tools::finalize::preview(line, 200))
    }
}

/// "status 1", "signal 9 (SIGKILL)".
pub fn describe_status(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => match nix::sys::signal::Signal::try_from(sig) {
            Ok(s) => format!("was killed by signal {sig} ({})", s.as_str()),
            Err(_) => format!("was killed by signal {sig}"),
        },
        (None, None) => "exited".to_string(),
    }
}

/// Takes the child's pipes and the child itself: starts the stdout pump,
/// the stderr logger and the exit watcher. Returns the reading end for the
/// transport and the watch. The child is reaped by the watcher.
pub fn watch_child(
    mut child: Child,
    record: Option<JobFile>,
    server: &str,
    log_dir: Option<&Path>,
    header: &str,
) -> (DuplexStream, StdioWatch) {
    let (exit_tx, exit) = watch::channel(None);
    let (out_tx, stdout_done) = watch::channel(false);
    let (err_tx, stderr_done) = watch::channel(false);
    let junk: Arc<Mutex<Option<String>>> = Arc::default();
    let (unmatched_tx, unmatched) = watch::channel(0u64);
    let tail: Arc<Mutex<Vec<u8>>> = Arc::default();
    let (transport_end, pump_end) = tokio::io::duplex(64 * 1024);
    match child.stdout.take() {
        Some(stdout) => {
            let junk = junk.clone();
            let name = server.to_string();
            tokio::spawn(async move {
                pump_stdout(stdout, pump_end, &junk, &unmatched_tx, &name).await;
                let _ = out_tx.send(true);
            });
        }
        None => {
            let _ = out_tx.send(true);
        }
    }
    let log = log_dir.and_then(|dir| {
        match LogFile::open(dir, &format!("{server}.log"), STDERR_LOG_CAP) {
            Ok(f) => {
                let mut f = StderrLog::new(f);
                f.write_raw(header.as_bytes());
                Some(f)
            }
            Err(e) => {
                tracing::warn!(
                    server,
                    "cannot open the MCP server's stderr log in {}: {e}",
                    dir.display()
                );
                None
            }
        }
    });
    let log_path = log.as_ref().map(|l| l.log.path.clone());
    match child.stderr.take() {
        Some(stderr) => {
            let tail = tail.clone();
            tokio::spawn(async move {
                keep_stderr(stderr, log, &tail).await;
                let _ = err_tx.send(true);
            });
        }
        None => {
            let _ = err_tx.send(true);
        }
    }
    tokio::spawn(async move {
        // Reaps the child; the group is killed by its owner, so this ends.
        // Its job record goes once it is reaped (docs §6.2).
        let status = child.wait().await;
        drop(record);
        if let Ok(status) = status {
            let _ = exit_tx.send(Some(status));
        }
    });
    let watch = StdioWatch {
        exit,
        stdout_done,
        stderr_done,
        junk,
        unmatched,
        tail,
        log: log_path,
    };
    (transport_end, watch)
}

/// Where the current line of stdout stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Line {
    /// Only whitespace so far (held back until the line is judged).
    Start,
    Json,
    Junk,
    /// A JSON line past [`MAX_MESSAGE_BYTES`]: the rest is not forwarded;
    /// `answered` once its error reply was.
    Oversized {
        answered: bool,
    },
}

/// The most one message from a server may be, as rmcp's stdio transport
/// allows (its `DEFAULT_MAX_LINE_LENGTH`, the same as its HTTP client's
/// bound on one event).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// How much of an over-large line's start and end is kept to find its id.
const ENVELOPE_BYTES: usize = 256;
/// The `data.vibedesk_error` of the error reply that stands in for an
/// over-large answer (docs §13.3).
pub const RESULT_TOO_LARGE: &str = "mcp_result_too_large";

/// Stdout as the transport gets it: lines whose first non-blank byte does
/// not open JSON (`{` or `[`) are kept out (the first is remembered); a
/// JSON line over [`MAX_MESSAGE_BYTES`] is cut off and answered at once
/// with a JSON-RPC error for its request id, which the transport would
/// otherwise drop in silence, leaving the call to wait out its deadline.
/// No line is buffered whole, so a peer that never sends a newline costs
/// no memory.
#[derive(Default)]
struct StdoutFilter {
    state: Option<Line>,
    held: Vec<u8>,
    first_junk: Option<Vec<u8>>,
    /// The first junk line ended (or is long enough to quote).
    junk_complete: bool,
    /// It was noted.
    junk_done: bool,
    /// The current JSON line's length, and its first and last bytes.
    len: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    /// Over-large lines whose id could not be found.
    unmatched: u64,
}

impl StdoutFilter {
    /// Takes a chunk; returns what the transport gets.
    fn feed(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut forward: Vec<u8> = Vec::with_capacity(chunk.len());
        for &b in chunk {
            let mut state = self.state.unwrap_or(Line::Start);
            if state == Line::Start && b != b'\n' {
                if b.is_ascii_whitespace() {
                    self.held.push(b);
                    continue;
                }
                state = if b == b'{' || b == b'[' {
                    forward.append(&mut self.held);
                    self.len = 0;
                    self.head.clear();
                    Line::Json
                } else {
                    self.held.clear();
                    if self.first_junk.is_none() {
                        self.first_junk = Some(Vec::new());
                    }
                    Line::Junk
                };
            }
            state = self.take(state, b, &mut forward);
            if b == b'\n' {
                if state == Line::Start {
                    forward.append(&mut self.held);
                    forward.push(b);
                }
                state = Line::Start;
            }
            self.state = Some(state);
        }
        forward
    }

    /// One byte of a judged line (and its end).
    fn take(&mut self, state: Line, b: u8, forward: &mut Vec<u8>) -> Line {
        match state {
            Line::Json => {
                forward.push(b);
                self.len += 1;
                if self.head.len() < ENVELOPE_BYTES {
                    self.head.push(b);
                }
                if self.len <= MAX_MESSAGE_BYTES {
                    return state;
                }
                // End the cut line for the transport, which drops it; with
                // the id at its start, answer the call now.
                forward.push(b'\n');
                self.tail.clear();
                match envelope_id(&self.head, false) {
                    Some(id) => {
                        forward.extend_from_slice(&too_large_reply(&id));
                        Line::Oversized { answered: true }
                    }
                    None => Line::Oversized { answered: false },
                }
            }
            Line::Oversized { answered } => {
                if b != b'\n' {
                    if !answered {
                        if self.tail.len() == ENVELOPE_BYTES {
                            self.tail.pop_front();
                        }
                        self.tail.push_back(b);
                    }
                } else if !answered {
                    let tail: Vec<u8> = self.tail.iter().copied().collect();
                    match envelope_id(&tail, true) {
                        Some(id) => forward.extend_from_slice(&too_large_reply(&id)),
                        None => self.unmatched += 1,
                    }
                }
                state
            }
            Line::Junk if !self.junk_complete => {
                if let Some(j) = self.first_junk.as_mut() {
                    if b == b'\n' || j.len() >= JUNK_BYTES {
                        self.junk_complete = true;
                    } else {
                        j.push(b);
                    }
                }
                state
            }
            _ => state,
        }
    }

    /// The first junk line, once, when it is complete or long enough to
    /// quote (or stdout ended).
    fn junk_ready(&mut self, at_end: bool) -> Option<Vec<u8>> {
        let long = self
            .first_junk
            .as_ref()
            .is_some_and(|j| j.len() >= JUNK_BYTES);
        if self.junk_done || self.first_junk.is_none() || !(self.junk_complete || long || at_end) {
            return None;
        }
        self.junk_done = true;
        self.first_junk.clone()
    }
}

/// The `"id"` of a JSON-RPC envelope: in its first bytes when it comes
/// before `"result"`/`"error"` (as the SDKs write it), or, `at_end`, in its
/// last bytes when it closes the envelope.
fn envelope_id(bytes: &[u8], at_end: bool) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let key = if at_end {
        text.rfind("\"id\"")?
    } else {
        let key = text.find("\"id\"")?;
        let body = ["\"result\"", "\"error\""]
            .iter()
            .filter_map(|k| text.find(k))
            .min();
        if body.is_some_and(|b| b < key) {
            return None;
        }
        key
    };
    let rest = text[key + 4..].trim_start().strip_prefix(':')?.trim_start();
    let value: String = if let Some(s) = rest.strip_prefix('"') {
        let end = s.find('"')?;
        format!("\"{}\"", &s[..end])
    } else {
        rest.chars()
            .take_while(|c| c.is_ascii_digit() || *c == '-')
            .collect()
    };
    if value.is_empty() || value.len() > 80 {
        return None;
    }
    if at_end {
        let after = rest[value.len()..].trim();
        if !after.starts_with('}') {
            return None;
        }
    }
    Some(value)
}

/// The JSON-RPC error that answers request `id` (as JSON) in place of an
/// over-large result.
fn too_large_reply(id: &str) -> Vec<u8> {
    let mb = MAX_MESSAGE_BYTES / (1024 * 1024);
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32603,\"message\":\"the answer is larger than {mb} MiB, the most one MCP message may be\",\"data\":{{\"vibedesk_error\":\"{RESULT_TOO_LARGE}\"}}}}}}\n"
    )
    .into_bytes()
}

/// Copies stdout through the [`StdoutFilter`] to the transport's pipe as it
/// streams; an over-large answer whose id was not found is counted on
/// `unmatched`, which fails the server's calls in flight.
async fn pump_stdout(
    mut stdout: ChildStdout,
    mut to_transport: DuplexStream,
    junk: &Mutex<Option<String>>,
    unmatched: &watch::Sender<u64>,
    server: &str,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut filter = StdoutFilter::default();
    loop {
        let n = match stdout.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let forward = filter.feed(&buf[..n]);
        if let Some(j) = filter.junk_ready(false) {
            note_junk(junk, Some(&j), server);
        }
        if filter.unmatched > *unmatched.borrow() {
            unmatched.send_replace(filter.unmatched);
        }
        if !forward.is_empty() && to_transport.write_all(&forward).await.is_err() {
            // The transport is gone; keep reading so the child never blocks.
            continue;
        }
    }
    if let Some(j) = filter.junk_ready(true) {
        note_junk(junk, Some(&j), server);
    }
    let _ = to_transport.shutdown().await;
}

fn note_junk(slot: &Mutex<Option<String>>, bytes: Option<&[u8]>, server: &str) {
    let Some(bytes) = bytes else { return };
    let text = String::from_utf8_lossy(bytes);
    let quoted = format!("{:?}", text.trim_end());
    tracing::warn!(
        server,
        "MCP server wrote non-MCP output to stdout: {quoted}"
    );
    if let Ok(mut s) = slot.lock()
        && s.is_none()
    {
        *s = Some(quoted);
    }
}

/// Writes stderr to the log as it comes, within the rate limit, and keeps
/// its last bytes (all of them: the tail is memory, not disk).
async fn keep_stderr(mut stderr: ChildStderr, mut log: Option<StderrLog>, tail: &Mutex<Vec<u8>>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        // While lines are being dropped, wake at the window's end to say
        // how many, even if the server has gone quiet.
        let wait = log
            .as_ref()
            .and_then(|l| l.note_due(std::time::Instant::now()));
        let read = match wait {
            Some(wait) => tokio::time::timeout(wait, stderr.read(&mut buf)).await,
            None => Ok(stderr.read(&mut buf).await),
        };
        let n = match read {
            Err(_) => {
                if let Some(log) = log.as_mut() {
                    log.tick(std::time::Instant::now());
                }
                continue;
            }
            Ok(Ok(0) | Err(_)) => break,
            Ok(Ok(n)) => n,
        };
        let chunk = &buf[..n];
        if let Some(log) = log.as_mut() {
            log.feed(chunk, std::time::Instant::now());
        }
        if let Ok(mut t) = tail.lock() {
            t.extend_from_slice(chunk);
            let excess = t.len().saturating_sub(TAIL_BYTES);
            t.drain(..excess);
        }
    }
    if let Some(log) = log.as_mut() {
        log.finish();
    }
}

/// Where the current line of stderr stands in the log.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ErrLine {
    /// Nothing of it seen yet.
    Start,
    /// Being written; this many bytes so far.
    Keep(usize),
    /// Written up to [`STDERR_LINE_BYTES`]; the rest is skipped.
    Cut,
    /// Over the rate limit: counted, not written.
    Drop,
}

/// A server's stderr log with its rate limit (docs §13.2): in each second,
/// the first [`STDERR_LINES_PER_SECOND`] lines are written (each cut at
/// [`STDERR_LINE_BYTES`]); the rest are counted, and one line says how many
/// were dropped and quotes the last of them.
pub struct StderrLog {
    log: LogFile,
    window_start: Option<std::time::Instant>,
    written: u32,
    dropped: u64,
    last_dropped: Vec<u8>,
    line: ErrLine,
}

impl StderrLog {
    pub fn new(log: LogFile) -> Self {
        StderrLog {
            log,
            window_start: None,
            written: 0,
            dropped: 0,
            last_dropped: Vec::new(),
            line: ErrLine::Start,
        }
    }

    /// Writes `bytes` as they are (a header), outside the limit.
    pub fn write_raw(&mut self, bytes: &[u8]) {
        self.log.write(bytes);
    }

    /// How long until the note of dropped lines is due, when one is.
    fn note_due(&self, now: std::time::Instant) -> Option<Duration> {
        let start = self.window_start?;
        (self.dropped > 0).then(|| (start + Duration::from_secs(1)).saturating_duration_since(now))
    }

    /// Ends the window when it is over: the note of dropped lines, unless
    /// a written line is half done (it then waits for the line's end).
    fn tick(&mut self, now: std::time::Instant) {
        let over = self
            .window_start
            .is_some_and(|s| now.duration_since(s) >= Duration::from_secs(1));
        if over && matches!(self.line, ErrLine::Start | ErrLine::Drop) {
            let mut out = Vec::new();
            self.note_dropped(&mut out);
            self.window_start = None;
            self.written = 0;
            self.log.write(&out);
        }
    }

    /// Takes a chunk of stderr as read at `now`.
    pub fn feed(&mut self, chunk: &[u8], now: std::time::Instant) {
        let mut out: Vec<u8> = Vec::with_capacity(chunk.len().min(64 * 1024));
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            let (body, ends) = match piece.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (piece, false),
            };
            if self.line == ErrLine::Start {
                self.start_line(now, &mut out);
            }
            self.take(body, &mut out);
            if ends {
                if matches!(self.line, ErrLine::Keep(_) | ErrLine::Cut) {
                    out.push(b'\n');
                }
                self.line = ErrLine::Start;
            }
        }
        if !out.is_empty() {
            self.log.write(&out);
        }
    }

    /// A new line: a new window when the last is over, then written or
    /// dropped by the window's count.
    fn start_line(&mut self, now: std::time::Instant, out: &mut Vec<u8>) {
        let fresh = self
            .window_start
            .is_none_or(|s| now.duration_since(s) >= Duration::from_secs(1));
        if fresh {
            self.note_dropped(out);
            self.window_start = Some(now);
            self.written = 0;
        }
        if self.written < STDERR_LINES_PER_SECOND {
            self.written += 1;
            self.line = ErrLine::Keep(0);
        } else {
            self.dropped += 1;
            self.last_dropped.clear();
            self.line = ErrLine::Drop;
        }
    }

    /// Part of the current line.
    fn take(&mut self, body: &[u8], out: &mut Vec<u8>) {
        match self.line {
            ErrLine::Keep(n) => {
                let room = STDERR_LINE_BYTES.saturating_sub(n);
                if body.len() <= room {
                    out.extend_from_slice(body);
                    self.line = ErrLine::Keep(n + body.len());
                } else {
                    out.extend_from_slice(&body[..room]);
                    out.extend_from_slice(
                        format!(" … [line cut at {STDERR_LINE_BYTES} bytes]").as_bytes(),
                    );
                    self.line = ErrLine::Cut;
                }
            }
            ErrLine::Drop => {
                let room = QUOTE_BYTES.saturating_sub(self.last_dropped.len());
                self.last_dropped
                    .extend_from_slice(&body[..body.len().min(room)]);
            }
            ErrLine::Cut | ErrLine::Start => {}
        }
    }

    /// The line that counts the dropped lines, when there were any.
    fn note_dropped(&mut self, out: &mut Vec<u8>) {
        if self.dropped == 0 {
            return;
        }
        let last = String::from_utf8_lossy(&self.last_dropped);
        out.extend_from_slice(
            format!(
                "… {} line(s) dropped (over {STDERR_LINES_PER_SECOND} lines/s); the last: {}\n",
                self.dropped,
                last.trim_end()
            )
            .as_bytes(),
        );
        self.dropped = 0;
        self.last_dropped.clear();
    }

    /// At the end of stderr: the last line's end and the last note.
    pub fn finish(&mut self) {
        let mut out = Vec::new();
        if matches!(self.line, ErrLine::Keep(_) | ErrLine::Cut) {
            out.push(b'\n');
        }
        self.line = ErrLine::Start;
        self.note_dropped(&mut out);
        if !out.is_empty() {
            self.log.write(&out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flood of stderr: the first lines of each second are written,
    /// the rest counted in one line that quotes the last; a long line is
    /// cut; nothing is lost silently at the end.
    #[test]
    fn stderr_lines_past_the_rate_are_counted_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = StderrLog::new(LogFile::open(dir.path(), "s.log", STDERR_LOG_CAP).unwrap());
        let t0 = std::time::Instant::now();
        let flood: String = (0..10_000).map(|i| format!("noise {i:05}\n")).collect();
        // In pieces that split lines, all within the first second.
        for piece in flood.as_bytes().chunks(777) {
            log.feed(piece, t0);
        }
        log.feed(
            format!("{}\n", "x".repeat(10_000)).as_bytes(),
            t0 + Duration::from_millis(1500),
        );
        log.feed(b"quiet again\n", t0 + Duration::from_millis(1600));
        log.finish();
        let text = std::fs::read_to_string(dir.path().join("s.log")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let limit = STDERR_LINES_PER_SECOND as usize;
        assert_eq!(lines[0], "noise 00000");
        assert_eq!(lines[limit - 1], format!("noise {:05}", limit - 1));
        assert_eq!(
            lines[limit],
            format!(
                "… {} line(s) dropped (over {limit} lines/s); the last: noise 09999",
                10_000 - limit
            )
        );
        assert!(lines[limit + 1].starts_with(&"x".repeat(STDERR_LINE_BYTES)));
        assert!(lines[limit + 1].ends_with(&format!("[line cut at {STDERR_LINE_BYTES} bytes]")));
        assert_eq!(lines[limit + 2], "quiet again");
        assert_eq!(lines.len(), limit + 3);
    }

    #[test]
    fn the_count_of_dropped_lines_comes_when_the_second_is_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = StderrLog::new(LogFile::open(dir.path(), "s.log", STDERR_LOG_CAP).unwrap());
        let t0 = std::time::Instant::now();
        for i in 0..(STDERR_LINES_PER_SECOND + 5) {
            log.feed(format!("line {i}\n").as_bytes(), t0);
        }
        assert!(log.note_due(t0).is_some());
        log.tick(t0 + Duration::from_millis(500));
        let read = || std::fs::read_to_string(dir.path().join("s.log")).unwrap();
        assert!(!read().contains("dropped"));
        log.tick(t0 + Duration::from_secs(1));
        assert!(
            read().ends_with("… 5 line(s) dropped (over 100 lines/s); the last: line 104\n"),
            "{}",
            read()
        );
        assert!(log.note_due(t0).is_none());
    }

    /// An answer over the limit is cut off and answered at once with an
    /// error for its id (found at its start, or else at its end); other
    /// lines pass as they are.
    #[test]
    fn an_over_large_answer_becomes_an_error_for_its_id() {
        let body = "a".repeat(MAX_MESSAGE_BYTES + 10);
        let early =
            format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{{\"text\":\"{body}\"}}}}\n");
        let mut f = StdoutFilter::default();
        let mut out = f.feed(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
        for piece in early.as_bytes().chunks(1 << 20) {
            out.extend(f.feed(piece));
        }
        out.extend(f.feed(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n"));
        let lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
        assert_eq!(lines[0], b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
        assert_eq!(lines[1].len(), MAX_MESSAGE_BYTES + 1, "the cut line");
        let reply: serde_json::Value = serde_json::from_slice(lines[2]).unwrap();
        assert_eq!(reply["id"], 7);
        assert_eq!(reply["error"]["data"]["vibedesk_error"], RESULT_TOO_LARGE);
        assert_eq!(lines[3], b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}");
        assert!(out.len() < MAX_MESSAGE_BYTES + 1024);
        // The id last, as some writers put it.
        let late = format!(
            "{{\"result\":{{\"text\":\"{body}\"}},\"jsonrpc\":\"2.0\",\"id\":\"req-9\"}}\n"
        );
        let mut f = StdoutFilter::default();
        let out = f.feed(late.as_bytes());
        let last = out.split(|b| *b == b'\n').rev().nth(1).unwrap();
        let reply: serde_json::Value = serde_json::from_slice(last).unwrap();
        assert_eq!(reply["id"], "req-9");
        assert_eq!(f.unmatched, 0);
        // No id anywhere: counted, for the calls in flight to fail.
        let mut f = StdoutFilter::default();
        f.feed(format!("[\"{body}\"]\n").as_bytes());
        assert_eq!(f.unmatched, 1);
    }

    #[test]
    fn statuses_read_as_sentences() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            describe_status(&ExitStatus::from_raw(1 << 8)),
            "exited with status 1"
        );
        assert_eq!(
            describe_status(&ExitStatus::from_raw(9)),
            "was killed by signal 9 (SIGKILL)"
        );
    }

    #[tokio::test]
    async fn stdout_keeps_json_lines_and_remembers_the_first_other_one() {
        let child = tokio::process::Command::new("sh")
            .args([
                "-c",
                "printf '  {\"a\":1}\\nhello there\\n\\n[2]\\nmore junk\\n'; echo oops >&2; exit 3",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let (mut rx, watch) = watch_child(child, None, "t", None, "");
        let mut got = String::new();
        rx.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "  {\"a\":1}\n\n[2]\n");
        let status = watch.exited().await.unwrap();
        watch.drained(Duration::from_secs(5)).await;
        assert_eq!(describe_status(&status), "exited with status 3");
        assert_eq!(watch.junk().as_deref(), Some("\"hello there\""));
        assert_eq!(watch.last_stderr_line().as_deref(), Some("oops"));
    }
}
