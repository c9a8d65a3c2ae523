//! A stdio server's three streams and its exit, watched so that a failed
//! start has a stable, human reason (docs §13.2): "exited with status 1:
//! <last line of stderr>", "wrote non-MCP output to stdout: …", rather than
//! whatever the transport happened to be doing when the child went away.
//!
//! - stdout is pumped into a pipe that the MCP transport reads; lines that
//!   are not JSON are kept out of it and the first is remembered;
//! - stderr goes to the server's own log file (`<logs>/mcp/<name>.log`,
//!   capped, one rotation), never to `vibedesk.log` or the screen, and its
//!   tail is kept for the reason;
//! - the child's exit status is published as soon as it exits.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::process::{Child, ChildStderr, ChildStdout};
use tokio::sync::watch;

/// Each server's stderr log is cut at this size; the previous file is kept
/// as `<name>.log.1`, so a server never holds more than twice this on disk.
pub const STDERR_LOG_CAP: u64 = 1024 * 1024;
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
    server: &str,
    log_dir: Option<&Path>,
    header: &str,
) -> (DuplexStream, StdioWatch) {
    let (exit_tx, exit) = watch::channel(None);
    let (out_tx, stdout_done) = watch::channel(false);
    let (err_tx, stderr_done) = watch::channel(false);
    let junk: Arc<Mutex<Option<String>>> = Arc::default();
    let tail: Arc<Mutex<Vec<u8>>> = Arc::default();
    let (transport_end, pump_end) = tokio::io::duplex(64 * 1024);
    match child.stdout.take() {
        Some(stdout) => {
            let junk = junk.clone();
            let name = server.to_string();
            tokio::spawn(async move {
                pump_stdout(stdout, pump_end, &junk, &name).await;
                let _ = out_tx.send(true);
            });
        }
        None => {
            let _ = out_tx.send(true);
        }
    }
    let log = log_dir.and_then(|dir| match LogFile::open(dir, server, STDERR_LOG_CAP) {
        Ok(mut f) => {
            f.write(header.as_bytes());
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
    });
    let log_path = log.as_ref().map(|l| l.path.clone());
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
        if let Ok(status) = child.wait().await {
            let _ = exit_tx.send(Some(status));
        }
    });
    let watch = StdioWatch {
        exit,
        stdout_done,
        stderr_done,
        junk,
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
}

/// Copies stdout to the transport's pipe a line at a time as it streams,
/// keeping out lines whose first non-blank byte does not open JSON (`{` or
/// `[`); the first such line is remembered. No line is buffered whole, so
/// a peer that never sends a newline costs no memory.
async fn pump_stdout(
    mut stdout: ChildStdout,
    mut to_transport: DuplexStream,
    junk: &Mutex<Option<String>>,
    server: &str,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut state = Line::Start;
    let mut held: Vec<u8> = Vec::new();
    let mut first_junk: Option<Vec<u8>> = None;
    let mut junk_done = false;
    loop {
        let n = match stdout.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut forward: Vec<u8> = Vec::with_capacity(n);
        for &b in &buf[..n] {
            if state == Line::Start && b != b'\n' {
                if b.is_ascii_whitespace() {
                    held.push(b);
                    continue;
                }
                state = if b == b'{' || b == b'[' {
                    forward.append(&mut held);
                    Line::Json
                } else {
                    held.clear();
                    if first_junk.is_none() {
                        first_junk = Some(Vec::new());
                    }
                    Line::Junk
                };
            }
            match state {
                Line::Json => forward.push(b),
                Line::Junk if !junk_done => {
                    if let Some(j) = first_junk.as_mut()
                        && b != b'\n'
                        && j.len() < JUNK_BYTES
                    {
                        j.push(b);
                    }
                }
                _ => {}
            }
            if b == b'\n' {
                if state == Line::Junk && !junk_done {
                    junk_done = true;
                    note_junk(junk, first_junk.as_deref(), server);
                }
                if state == Line::Start {
                    forward.append(&mut held);
                    forward.push(b);
                }
                state = Line::Start;
            }
        }
        if !junk_done && first_junk.as_ref().is_some_and(|j| j.len() >= JUNK_BYTES) {
            junk_done = true;
            note_junk(junk, first_junk.as_deref(), server);
        }
        if !forward.is_empty() && to_transport.write_all(&forward).await.is_err() {
            // The transport is gone; keep reading so the child never blocks.
            continue;
        }
    }
    if !junk_done && first_junk.is_some() {
        note_junk(junk, first_junk.as_deref(), server);
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

/// Writes stderr to the log as it comes and keeps its last bytes.
async fn keep_stderr(mut stderr: ChildStderr, mut log: Option<LogFile>, tail: &Mutex<Vec<u8>>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        if let Some(log) = log.as_mut() {
            log.write(chunk);
        }
        if let Ok(mut t) = tail.lock() {
            t.extend_from_slice(chunk);
            let excess = t.len().saturating_sub(TAIL_BYTES);
            t.drain(..excess);
        }
    }
}

/// A size-capped log file with one rotation (`<name>.log` → `<name>.log.1`).
pub struct LogFile {
    pub path: PathBuf,
    cap: u64,
    file: Option<std::fs::File>,
    size: u64,
}

impl LogFile {
    /// `<dir>/<server>.log`, appended to, 0600; rotated first when it is
    /// already at its cap.
    pub fn open(dir: &Path, server: &str, cap: u64) -> std::io::Result<LogFile> {
        std::fs::create_dir_all(dir)?;
        let mut log = LogFile {
            path: dir.join(format!("{server}.log")),
            cap: cap.max(1),
            file: None,
            size: 0,
        };
        log.reopen()?;
        if log.size >= log.cap {
            log.rotate()?;
        }
        Ok(log)
    }

    fn reopen(&mut self) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&self.path)?;
        self.size = file.metadata()?.len();
        self.file = Some(file);
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.file = None;
        let mut old = self.path.clone().into_os_string();
        old.push(".1");
        std::fs::rename(&self.path, PathBuf::from(old))?;
        self.reopen()
    }

    /// Appends `bytes`, rotating when they would pass the cap; a chunk
    /// larger than the cap keeps only its end. Errors are logged, once.
    pub fn write(&mut self, mut bytes: &[u8]) {
        let cap = usize::try_from(self.cap).unwrap_or(usize::MAX);
        if bytes.len() > cap {
            bytes = &bytes[bytes.len() - cap..];
        }
        if self.size + bytes.len() as u64 > self.cap
            && let Err(e) = self.rotate()
        {
            tracing::warn!("cannot rotate {}: {e}", self.path.display());
            self.file = None;
        }
        let Some(file) = self.file.as_mut() else {
            return;
        };
        if let Err(e) = file.write_all(bytes) {
            tracing::warn!("cannot write {}: {e}", self.path.display());
            self.file = None;
            return;
        }
        self.size += bytes.len() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rotates_once_and_stays_under_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogFile::open(dir.path(), "chatty", 100).unwrap();
        for i in 0..50 {
            log.write(format!("line {i:03} of noise\n").as_bytes());
        }
        let main = std::fs::read_to_string(dir.path().join("chatty.log")).unwrap();
        let old = std::fs::read_to_string(dir.path().join("chatty.log.1")).unwrap();
        assert!(main.len() <= 100 && old.len() <= 100, "{main:?} {old:?}");
        assert!(main.ends_with("line 049 of noise\n"), "{main}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        // Reopened at its cap: it starts over rather than growing.
        drop(log);
        let mut again = LogFile::open(dir.path(), "chatty", main.len() as u64).unwrap();
        again.write(b"new\n");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("chatty.log")).unwrap(),
            "new\n"
        );
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
        let (mut rx, watch) = watch_child(child, "t", None, "");
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
