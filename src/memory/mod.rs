//! Persistent memory (docs §8): entries as markdown files with frontmatter
//! under `<data>/memory/entries/`, recall, raw → daily → digest compression
//! with an archive of every original, importance decay and GC, a scheduled
//! maintenance pass, the SQLite full-text index (memories and session
//! messages), and the skills loader (docs §4.6, §9).
//!
//! This room uses no other room of the crate (ARCHITECTURE): it writes its
//! files with its own atomic-write helper and reads session logs as plain
//! JSON lines.
//!
//! ```text
//! <data>/memory/MEMORY.md            index lines, the system-prompt snapshot
//! <data>/memory/entries/*.md         one entry per file (docs §8.3)
//! <data>/memory/entries/<type>/*.md  the same with the `hierarchy` flag on
//! <data>/memory/entries/**/<stem>.relations.json  BM25 links of each entry (`links`)
//! <data>/memory/archive/             originals before each lossy step, GC'd entries
//! <data>/memory/index.sqlite         FTS5 index (rebuilt from the files if lost)
//! <data>/memory/gc.log               GC and compression decisions
//! <data>/memory/.maintenance.json    when maintenance last ran, and what it did
//! <data>/skills/<name>/SKILL.md      user skills (override the built-ins)
//! ```

mod atomic;
pub mod compression;
pub mod entry;
pub mod flags;
pub mod frontmatter;
pub mod hierarchy;
pub mod index;
pub mod links;
pub mod listing;
pub mod maintenance;
pub mod skills;
pub mod store;
pub mod tokenize;

use std::path::PathBuf;

pub use compression::{CompressOptions, Level, Scoring};
pub use entry::{Entry, MemoryType, NewEntry, Origin};
pub use flags::MemoryFlags;
pub use maintenance::{MaintenanceReport, run_due};
pub use skills::{Skill, SkillSet};
pub use store::{
    AddOutcome, CompressionRecord, GcAction, GcReport, ImportReport, KeepOutcome, MemoryStore,
    Reinforce, ReinforceEvent, SessionMatch, SessionResult,
};

/// Why a memory operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(transparent)]
    Io(#[from] crate::fsio::IoError),
    #[error("{0}")]
    Invalid(String),
    /// The original could not be archived, so the lossy step was not taken
    /// (docs §8.6): the entry is unchanged.
    #[error(
        "cannot archive {entry} before compressing it ({reason}); compression aborted, the entry is unchanged"
    )]
    ArchiveFailed {
        entry: String,
        reason: store::ArchiveError,
    },
    #[error("the memory folder {0} is locked by another process; try again shortly")]
    Locked(PathBuf),
    /// An MCP client may not replace or remove the user's own memory
    /// (docs §13.4).
    #[error(
        "the memory '{0}' is the user's own: an MCP client cannot replace, forget or reinforce it (save under another title)"
    )]
    Protected(String),
    #[error("memory index {path}: {source}")]
    Index {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

impl MemoryError {
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        MemoryError::Io(crate::fsio::IoError::new(action, path, source))
    }
}

/// `<data>/memory`.
pub fn memory_dir(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("memory")
}

/// `<data>/skills`: user skills.
pub fn user_skills_dir(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("skills")
}
