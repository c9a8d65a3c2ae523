//! Read-only listings of the memory folder, for viewers (the workstation's
//! memory view) that must not open a [`super::MemoryStore`]: opening one
//! creates folders, may rewrite `MEMORY.md` and reconciles the index.
//!
//! Archive names are the ones [`super::MemoryStore`] writes:
//! `<stem>.<tag>.<UTC %Y%m%dT%H%M%SZ>[-n].md`, where `tag` is the level the
//! entry had before a compression (`raw`, `daily`, `digest`) or `gc`.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDateTime, Utc};

use super::MemoryError;

/// Entry files of `entries_dir` and its category folders, relative to it
/// (`project_x.md`, `project/x.md`), sorted by file name: the files the
/// store reads (`*.md`, not hidden, not `MEMORY.md`). A missing folder is
/// empty.
pub fn entry_files(entries_dir: &Path) -> Result<Vec<String>, MemoryError> {
    super::hierarchy::scan_all(entries_dir)
}

/// One archived copy of an entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ArchivedCopy {
    /// The entry's file stem, e.g. `project_btc`.
    pub stem: String,
    /// `raw`, `daily` or `digest` (the level before a compression), or `gc`.
    pub tag: String,
    pub archived_at: DateTime<Utc>,
    /// 1 for the first copy made in that second, then 2, 3, …
    pub seq: u32,
    pub file: String,
    pub path: PathBuf,
}

/// Reads an archive name from the right, so stems may contain dots; `None`
/// for any other file.
fn parse_name(file: &str) -> Option<(String, String, DateTime<Utc>, u32)> {
    let rest = file.strip_suffix(".md")?;
    let (rest, when) = rest.rsplit_once('.')?;
    let (stem, tag) = rest.rsplit_once('.')?;
    if stem.is_empty() || !matches!(tag, "raw" | "daily" | "digest" | "gc") {
        return None;
    }
    let (ts, seq) = match when.split_once('-') {
        Some((ts, n)) => (ts, n.parse::<u32>().ok().filter(|n| *n >= 2)?),
        None => (when, 1),
    };
    let at = NaiveDateTime::parse_from_str(ts, "%Y%m%dT%H%M%SZ").ok()?;
    Some((stem.to_string(), tag.to_string(), at.and_utc(), seq))
}

/// Order of copies made in the same second: a lossy step archives the level
/// it leaves, so a later level is a later copy.
fn tag_rank(tag: &str) -> u8 {
    match tag {
        "raw" => 0,
        "daily" => 1,
        "digest" => 2,
        _ => 3,
    }
}

/// Every archived copy in `archive_dir`, newest first. A missing folder is
/// empty; files that are not archive copies are ignored.
pub fn list_archives(archive_dir: &Path) -> Result<Vec<ArchivedCopy>, MemoryError> {
    let rd = match std::fs::read_dir(archive_dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(MemoryError::io("list", archive_dir, e)),
    };
    let mut out: Vec<ArchivedCopy> = rd
        .flatten()
        .filter(|d| d.file_type().map(|t| t.is_file()).unwrap_or(false))
        .filter_map(|d| {
            let file = d.file_name().to_str()?.to_string();
            let (stem, tag, archived_at, seq) = parse_name(&file)?;
            Some(ArchivedCopy {
                stem,
                tag,
                archived_at,
                seq,
                path: d.path(),
                file,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        (b.archived_at, tag_rank(&b.tag), b.seq, &b.file).cmp(&(
            a.archived_at,
            tag_rank(&a.tag),
            a.seq,
            &a.file,
        ))
    });
    Ok(out)
}

/// The archived copies of the entry `stem` (its file name without `.md`),
/// newest first.
pub fn list_archives_for(archive_dir: &Path, stem: &str) -> Result<Vec<ArchivedCopy>, MemoryError> {
    let mut all = list_archives(archive_dir)?;
    all.retain(|c| c.stem == stem);
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{Level, MemoryFlags, MemoryStore, MemoryType, NewEntry};

    #[test]
    fn names_parse_from_the_right() {
        let (stem, tag, at, seq) = parse_name("project_v1.2.raw.20260301T100000Z-3.md").unwrap();
        assert_eq!(
            (stem.as_str(), tag.as_str(), seq),
            ("project_v1.2", "raw", 3)
        );
        assert_eq!(at.to_rfc3339(), "2026-03-01T10:00:00+00:00");
        assert_eq!(parse_name("x.gc.20260301T100000Z.md").unwrap().3, 1);
        for bad in [
            "x.md",
            "x.raw.md",
            "x.weekly.20260301T100000Z.md",
            "x.raw.2026-03-01.md",
            "x.raw.20260301T100000Z-1.md",
            ".raw.20260301T100000Z.md",
            "x.raw.20260301T100000Z.txt",
        ] {
            assert!(parse_name(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn archives_of_a_compressed_entry_newest_first_and_only_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let store = MemoryStore::open(tmp.path().join("memory"), MemoryFlags::off()).unwrap();
        let t = |s: &str| crate::memory::entry::parse_ts(s).unwrap();
        let body = "Fees matter. Use ten basis points. Slippage is separate. Check twice.";
        for title in ["fees", "fees two"] {
            store
                .add(
                    NewEntry::new(title, body, MemoryType::Feedback),
                    t("2026-01-01T00:00:00Z"),
                )
                .unwrap();
        }
        store
            .compress_entry("fees", Level::Daily, t("2026-02-01T00:00:00Z"))
            .unwrap();
        store
            .compress_entry("fees", Level::Digest, t("2026-03-01T00:00:00Z"))
            .unwrap();
        store
            .compress_entry("fees two", Level::Daily, t("2026-02-01T00:00:00Z"))
            .unwrap();
        std::fs::write(store.archive_dir().join("notes.txt"), "x").unwrap();

        let mine = list_archives_for(store.archive_dir(), "feedback_fees").unwrap();
        let tags: Vec<&str> = mine.iter().map(|c| c.tag.as_str()).collect();
        assert_eq!(tags, ["daily", "raw"], "newest first, not `fees two`'s");
        assert_eq!(mine[1].file, "feedback_fees.raw.20260201T000000Z.md");
        assert!(mine[1].path.is_file());
        assert_eq!(list_archives(store.archive_dir()).unwrap().len(), 3);

        let files = entry_files(store.entries_dir()).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0], "feedback_fees.md");
        assert!(
            list_archives_for(&tmp.path().join("none"), "x")
                .unwrap()
                .is_empty()
        );
        assert!(entry_files(&tmp.path().join("none")).unwrap().is_empty());
    }
}
