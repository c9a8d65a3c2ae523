//! What the browser's memory view reads from disk: every memory entry with
//! its level, last access, importance and retention, and one entry's
//! current text with each of its archived originals. Read-only: the memory
//! folder is read through `memory::listing` and `memory::entry`, never by
//! opening a `MemoryStore` (which writes). All of it is blocking file IO:
//! the runtime calls these on a blocking thread, never on the UI task.
//! A file that cannot be read or parsed becomes a row with a short notice.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::memory::entry::{Entry, parse_entry, problems_notice};
use crate::memory::frontmatter;
use crate::memory::listing::{self, ArchivedCopy};
use crate::memory::memory_dir;
use crate::store::Paths;

/// One entry as the memory view lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryRow {
    /// File name in `entries/`, e.g. `project_btc.md`.
    pub file: String,
    pub title: String,
    pub memory_type: String,
    /// `raw`, `daily`, `digest`; `?` when the file could not be read.
    pub level: String,
    /// `None` when the file could not be read.
    pub last_accessed: Option<DateTime<Utc>>,
    /// Importance at load time (decayed when decay is on), and the stored
    /// quality score it decays from.
    pub importance: Option<f64>,
    pub quality: Option<f64>,
    /// The retention estimate of the last compression.
    pub retention: Option<f64>,
    /// Archived copies of this entry.
    pub archives: usize,
    pub description: String,
    pub keywords: Vec<String>,
    pub body: String,
    /// What is wrong with the file (unreadable, no frontmatter, …).
    pub problem: Option<String>,
    /// The model wrote it (docs §8.3): `K` keeps or un-keeps it.
    pub by_model: bool,
    /// The model wrote it and the user has not kept it.
    pub unconfirmed: bool,
}

impl MemoryRow {
    /// The stem its archive copies are named by: `project_x` for both
    /// `project_x.md` and the category file `project/x.md`.
    pub(crate) fn stem(&self) -> String {
        crate::memory::hierarchy::flat_stem(&self.file)
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryListing {
    pub dir: PathBuf,
    /// Most recently accessed first.
    pub rows: Vec<MemoryRow>,
    /// Whether importance is shown decayed.
    pub decay: bool,
    /// One line about the rows with a problem (count, first example, the
    /// folder to fix them in); `None` when every file read cleanly.
    pub notice: Option<String>,
}

/// An archived copy that could not be read.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("cannot read {file}: {reason}")]
pub struct UnreadableCopy {
    pub file: String,
    /// The I/O error, as text: the detail is kept comparable and cloneable.
    pub reason: String,
}

/// An archived original, read.
#[derive(Clone, Debug, PartialEq)]
pub struct ArchivedText {
    pub copy: ArchivedCopy,
    /// The level written in the copy itself.
    pub level: String,
    /// The copy's body (frontmatter stripped), or why it could not be read.
    pub body: Result<String, UnreadableCopy>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MemoryDetail {
    pub row: MemoryRow,
    /// Newest first.
    pub archives: Vec<ArchivedText>,
    /// Why the archive folder could not be listed.
    pub archive_error: Option<String>,
    /// Whether `row.importance` is decayed.
    pub decay: bool,
}

/// The memory folder of `paths`.
pub(crate) fn dir(paths: &Paths) -> PathBuf {
    memory_dir(&paths.data_dir)
}

/// What is odd about an entry file that still parsed (the store reads it
/// leniently, so these are notices, not errors): the frontmatter values
/// the entry could not read (`entry_problems`), and what the file lacks.
fn problem(text: &str, lossy: bool, entry_problems: &[String]) -> Option<String> {
    let mut out = Vec::new();
    if lossy {
        out.push("not valid UTF-8".to_string());
    }
    match frontmatter::split(text) {
        None => out.push("no frontmatter: every field is a default".into()),
        Some(_) => {
            out.extend(entry_problems.iter().cloned());
            let (meta, _) = frontmatter::parse(text);
            if meta.text("last_accessed").is_none() {
                out.push("no last_accessed (the file's time is used)".into());
            }
        }
    }
    (!out.is_empty()).then(|| out.join("; "))
}

fn row_of(e: Entry, problem: Option<String>, now: DateTime<Utc>, decay: bool) -> MemoryRow {
    MemoryRow {
        importance: Some(e.importance(now, decay)),
        quality: Some(e.quality),
        last_accessed: Some(e.last_accessed),
        level: e.level.as_str().to_string(),
        retention: e.retention,
        archives: 0,
        problem,
        by_model: e.origin == crate::memory::Origin::Model,
        unconfirmed: e.is_unconfirmed(),
        title: e.title,
        memory_type: e.memory_type,
        description: e.description,
        keywords: e.keywords,
        body: e.body,
        file: e.file,
    }
}

fn unreadable(file: &str, why: String) -> MemoryRow {
    MemoryRow {
        title: file.strip_suffix(".md").unwrap_or(file).to_string(),
        file: file.to_string(),
        memory_type: "?".into(),
        level: "?".into(),
        last_accessed: None,
        importance: None,
        quality: None,
        retention: None,
        archives: 0,
        description: String::new(),
        keywords: Vec::new(),
        body: String::new(),
        problem: Some(why),
        by_model: false,
        unconfirmed: false,
    }
}

/// Reads one entry file into a row; never fails (an unreadable file is a
/// row that says why).
fn read_row(path: &Path, file: &str, now: DateTime<Utc>, decay: bool) -> MemoryRow {
    let read = std::fs::read(path).and_then(|b| std::fs::metadata(path).map(|m| (b, m)));
    match read {
        Ok((bytes, meta)) => {
            let (text, lossy) = match String::from_utf8(bytes) {
                Ok(t) => (t, false),
                Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), true),
            };
            let modified = meta.modified().map(DateTime::<Utc>::from).unwrap_or(now);
            let mut entry = parse_entry(path, &text, modified, meta.len());
            // Relative to `entries/` (`project/x.md` in a category folder).
            entry.file = file.to_string();
            let problem = problem(&text, lossy, &entry.problems);
            row_of(entry, problem, now, decay)
        }
        Err(e) => unreadable(file, format!("cannot read: {e}")),
    }
}

/// Why the memory browser cannot show the list or an entry. Cloned into
/// the message that carries it, so a store error travels as its text.
#[derive(Clone, Debug, thiserror::Error)]
pub enum MemoryViewError {
    #[error("{0}")]
    Listing(String),
    #[error("'{0}' is not a memory entry file")]
    NotAnEntry(String),
    #[error("memory {0} no longer exists (forgotten or archived by GC?)")]
    Gone(String),
}

/// Every entry, most recently accessed first (unreadable ones last), each
/// with its archive count. A missing memory folder lists nothing.
pub fn list(
    memory_dir: &Path,
    now: DateTime<Utc>,
    decay: bool,
) -> Result<MemoryListing, MemoryViewError> {
    let entries = memory_dir.join("entries");
    let files =
        listing::entry_files(&entries).map_err(|e| MemoryViewError::Listing(e.to_string()))?;
    // One listing of the archive for all entries; a failure only loses counts.
    let archives = listing::list_archives(&memory_dir.join("archive")).unwrap_or_default();
    let mut rows: Vec<MemoryRow> = files
        .iter()
        .map(|f| {
            let mut row = read_row(&entries.join(f), f, now, decay);
            let stem = row.stem();
            row.archives = archives.iter().filter(|c| c.stem == stem).count();
            row
        })
        .collect();
    rows.sort_by(|a, b| {
        b.last_accessed
            .cmp(&a.last_accessed)
            .then_with(|| a.file.cmp(&b.file))
    });
    let problems: Vec<(&str, &str)> = rows
        .iter()
        .filter_map(|r| Some((r.file.as_str(), r.problem.as_deref()?)))
        .collect();
    let notice = problems_notice(&problems, &entries);
    Ok(MemoryListing {
        dir: memory_dir.to_path_buf(),
        rows,
        decay,
        notice,
    })
}

/// A file name of `entries/` or of one of its category folders (what the
/// list hands out), never any other path.
fn valid_file(file: &str) -> bool {
    let name = match file.split_once('/') {
        Some((dir, name)) if crate::memory::hierarchy::categories().any(|c| c == dir) => name,
        Some(_) => return false,
        None => file,
    };
    !name.is_empty()
        && name.ends_with(".md")
        && !name.starts_with('.')
        && !name.contains(['/', '\\'])
}

/// One entry with every archived original, newest first.
pub fn detail(
    memory_dir: &Path,
    file: &str,
    now: DateTime<Utc>,
    decay: bool,
) -> Result<MemoryDetail, MemoryViewError> {
    if !valid_file(file) {
        return Err(MemoryViewError::NotAnEntry(file.to_string()));
    }
    let path = memory_dir.join("entries").join(file);
    if !path.is_file() {
        return Err(MemoryViewError::Gone(file.to_string()));
    }
    let mut row = read_row(&path, file, now, decay);
    let (copies, archive_error) =
        match listing::list_archives_for(&memory_dir.join("archive"), &row.stem()) {
            Ok(c) => (c, None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
    row.archives = copies.len();
    let archives = copies
        .into_iter()
        .map(|copy| {
            let (level, body) = match std::fs::read(&copy.path) {
                Ok(bytes) => {
                    let text = String::from_utf8_lossy(&bytes);
                    let e = parse_entry(&copy.path, &text, copy.archived_at, bytes.len() as u64);
                    (e.level.as_str().to_string(), Ok(e.body))
                }
                Err(e) => (
                    copy.tag.clone(),
                    Err(UnreadableCopy {
                        file: copy.file.clone(),
                        reason: e.to_string(),
                    }),
                ),
            };
            ArchivedText { copy, level, body }
        })
        .collect();
    Ok(MemoryDetail {
        row,
        archives,
        archive_error,
        decay,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_files_are_bare_names() {
        assert!(valid_file("project_x.md"));
        assert!(valid_file("project/x.md"));
        for bad in [
            "../x.md",
            "a/b.md",
            ".hidden.md",
            "x.txt",
            "",
            "project/../x.md",
            "project/.x.md",
            "user/a/b.md",
        ] {
            assert!(!valid_file(bad), "{bad}");
        }
    }

    /// `problem` with the entry's own findings, as `read_row` passes them.
    fn problem_of(text: &str, lossy: bool) -> Option<String> {
        let found = crate::memory::entry::frontmatter_problems(&frontmatter::parse(text).0);
        problem(text, lossy, &found)
    }

    #[test]
    fn problems_are_named() {
        assert!(
            problem_of("just text", false)
                .unwrap()
                .contains("no frontmatter")
        );
        let ok =
            "---\nname: a\nlast_accessed: 2026-01-01T00:00:00Z\ncompression_level: raw\n---\nbody";
        assert_eq!(problem_of(ok, false), None);
        let odd = "---\nname: a\ncompression_level: weekly\n---\nbody";
        let p = problem_of(odd, true).unwrap();
        assert!(
            p.contains("UTF-8") && p.contains("weekly") && p.contains("last_accessed"),
            "{p}"
        );
    }
}
