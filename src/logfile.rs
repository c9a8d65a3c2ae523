//! Size-capped log files with one rotation: `vibedesk.log` (docs §5.5) and
//! each MCP server's stderr log (docs §13.2). A file is cut at its cap and
//! the previous one kept as `<name>.1`, so a log never holds more than twice
//! its cap on disk, however much is written to it.
//!
//! Several vibedesk processes may append to one file (the workstation and a
//! `vibedesk run`): the size is read from the open file before each write,
//! so the others' lines count too, and a file another process has already
//! rotated is reopened rather than rotated again.

use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// An append-only log of at most `cap` bytes, plus its rotated predecessor.
pub struct LogFile {
    pub path: PathBuf,
    cap: u64,
    file: Option<std::fs::File>,
    /// Whether a write or rotation failure was logged already.
    warned: bool,
}

impl LogFile {
    /// `<dir>/<name>`, appended to, mode 0600; rotated first when it is
    /// already at its cap.
    pub fn open(dir: &Path, name: &str, cap: u64) -> std::io::Result<LogFile> {
        std::fs::create_dir_all(dir)?;
        let mut log = LogFile {
            path: dir.join(name),
            cap: cap.max(1),
            file: None,
            warned: false,
        };
        log.reopen()?;
        if log.size() >= log.cap {
            log.rotate()?;
        }
        Ok(log)
    }

    /// The rotated file, `<name>.1`.
    pub fn previous(&self) -> PathBuf {
        let mut old = self.path.clone().into_os_string();
        old.push(".1");
        PathBuf::from(old)
    }

    fn reopen(&mut self) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&self.path)?;
        self.file = Some(file);
        Ok(())
    }

    /// The open file's size, other writers' lines included.
    fn size(&self) -> u64 {
        self.file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len())
    }

    /// Whether the path still names the open file (another process may
    /// have rotated it away).
    fn still_current(&self) -> bool {
        let open = self.file.as_ref().and_then(|f| f.metadata().ok());
        let named = std::fs::metadata(&self.path).ok();
        match (open, named) {
            (Some(a), Some(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
            _ => false,
        }
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.file = None;
        std::fs::rename(&self.path, self.previous())?;
        self.reopen()
    }

    /// Appends `bytes`, rotating first when they would pass the cap; a
    /// chunk larger than the cap keeps only its end. A failure is logged
    /// once and the bytes are lost: a log must never stop its writer.
    pub fn write(&mut self, mut bytes: &[u8]) {
        let cap = usize::try_from(self.cap).unwrap_or(usize::MAX);
        if bytes.len() > cap {
            bytes = &bytes[bytes.len() - cap..];
        }
        if let Err(e) = self.make_room(bytes.len() as u64) {
            self.warn(&format!("cannot rotate {}: {e}", self.path.display()));
            self.file = None;
        }
        let Some(file) = self.file.as_mut() else {
            // Try again on the next write (the directory may come back).
            let _ = self.reopen();
            return;
        };
        if let Err(e) = file.write_all(bytes) {
            let message = format!("cannot write {}: {e}", self.path.display());
            self.file = None;
            self.warn(&message);
        }
    }

    /// Rotates (or follows another process's rotation) so that `len` more
    /// bytes fit under the cap.
    fn make_room(&mut self, len: u64) -> std::io::Result<()> {
        if self.file.is_none() {
            self.reopen()?;
        }
        if self.size() + len <= self.cap {
            return Ok(());
        }
        if !self.still_current() {
            self.reopen()?;
            if self.size() + len <= self.cap {
                return Ok(());
            }
        }
        self.rotate()
    }

    /// Once per file. Through `tracing` even for `vibedesk.log` itself:
    /// its writer thread only queues the line (or drops it when the queue
    /// is full), and the screen of the workstation must stay clean.
    fn warn(&mut self, message: &str) {
        if !self.warned {
            self.warned = true;
            tracing::warn!("{message}");
        }
    }
}

/// As an `io::Write`, for `tracing_appender::non_blocking`: each formatted
/// event arrives as one write, so a rotation never splits a line.
impl std::io::Write for LogFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LogFile::write(self, buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rotates_once_and_stays_under_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogFile::open(dir.path(), "chatty.log", 100).unwrap();
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
        let mut again = LogFile::open(dir.path(), "chatty.log", main.len() as u64).unwrap();
        again.write(b"new\n");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("chatty.log")).unwrap(),
            "new\n"
        );
    }

    /// Two writers on one file (two vibedesk processes): each counts the
    /// other's lines, and a rotation by one is followed, not repeated, by
    /// the other, so neither file passes the cap.
    #[test]
    fn two_writers_share_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = LogFile::open(dir.path(), "shared.log", 200).unwrap();
        let mut b = LogFile::open(dir.path(), "shared.log", 200).unwrap();
        for i in 0..100 {
            let w = if i % 2 == 0 { &mut a } else { &mut b };
            w.write(format!("writer line {i:03}\n").as_bytes());
        }
        for name in ["shared.log", "shared.log.1"] {
            let len = std::fs::metadata(dir.path().join(name)).unwrap().len();
            assert!(len > 0 && len <= 200, "{name}: {len} bytes");
        }
        let main = std::fs::read_to_string(dir.path().join("shared.log")).unwrap();
        assert!(main.ends_with("writer line 099\n"), "{main}");
    }
}
