//! A screen's results on disk (docs §17.9): what the `factor_screen` tool
//! and `vibedesk factor screen` write, and what the workstation's factor
//! view opens. One JSON file, `screen.json`, in its own directory under
//! the data dir's `factor/`, written atomically (temp, fsync, rename), so a
//! crash leaves the previous file or the whole new one.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use super::screen::Screen;
use crate::fsio::{self, Durability, IoError};

/// The record's file name inside its directory.
pub const SCREEN_FILE: &str = "screen.json";

/// The format written; a reader refuses a newer one rather than misread it.
pub const RECORD_VERSION: u32 = 1;

/// Larger files are refused on reading: a screen of a few hundred factors
/// over decades is tens of megabytes.
const READ_CAP: u64 = 512 * 1024 * 1024;

/// One screened expression as it was given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScreenedExpr {
    pub name: String,
    /// The paper's number for a bundled alpha.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paper_number: Option<u16>,
    pub source: String,
}

/// The symbols and dates a screen ran over, and where the prices came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScreenUniverse {
    pub symbols: Vec<String>,
    pub start: NaiveDate,
    pub end: NaiveDate,
    /// `offline` (the embedded market) or the data source's name.
    pub source: String,
}

/// A screen with what it was run on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScreenRecord {
    pub version: u32,
    /// RFC 3339, UTC.
    pub created: String,
    /// `alpha101` for the bundled library; `None` for a user's file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    pub universe: ScreenUniverse,
    /// In the order of `screen.factors`.
    pub expressions: Vec<ScreenedExpr>,
    pub screen: Screen,
}

/// Why a record cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a screen record: {source}")]
    Format {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "{path} is a version {found} screen record; this vibedesk reads up to {RECORD_VERSION}"
    )]
    Version { path: PathBuf, found: u32 },
    #[error("cannot encode the screen: {0}")]
    Encode(serde_json::Error),
}

/// The directory screens are kept in, under the data dir.
pub fn screens_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("factor")
}

/// A fresh directory name for a screen made at `now`: sortable by time,
/// with a random tail so two screens in one second do not collide.
pub fn screen_dir_name(now: chrono::DateTime<chrono::Utc>) -> String {
    format!(
        "screen-{}-{:04x}",
        now.format("%Y%m%d-%H%M%S"),
        rand::random::<u16>()
    )
}

impl ScreenRecord {
    /// Writes the record as `dir/screen.json` (creating `dir`), returning
    /// the file's path.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, RecordError> {
        std::fs::create_dir_all(dir).map_err(|e| IoError::new("create", dir, e))?;
        let bytes = serde_json::to_vec(self).map_err(RecordError::Encode)?;
        let path = dir.join(SCREEN_FILE);
        fsio::write_atomic(&path, &bytes, Durability::Synced)?;
        Ok(path)
    }

    /// Reads a record from its file, or from a directory holding one.
    pub fn read(path: &Path) -> Result<ScreenRecord, RecordError> {
        let file = if path.is_dir() {
            path.join(SCREEN_FILE)
        } else {
            path.to_path_buf()
        };
        let bytes = fsio::read_capped(&file, READ_CAP).map_err(|source| RecordError::Read {
            path: file.clone(),
            source,
        })?;
        let record: ScreenRecord =
            serde_json::from_slice(&bytes).map_err(|source| RecordError::Format {
                path: file.clone(),
                source,
            })?;
        if record.version > RECORD_VERSION {
            return Err(RecordError::Version {
                path: file,
                found: record.version,
            });
        }
        Ok(record)
    }

    /// The newest record under `screens_dir` (by directory name, which
    /// sorts by time), if any.
    pub fn newest(screens_dir: &Path) -> Option<PathBuf> {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(screens_dir)
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join(SCREEN_FILE).is_file())
            .collect();
        dirs.sort();
        dirs.pop().map(|d| d.join(SCREEN_FILE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::research::factor::screen::ScreenOptions;

    fn record() -> ScreenRecord {
        ScreenRecord {
            version: RECORD_VERSION,
            created: "2026-12-07T16:00:00Z".into(),
            library: Some("alpha101".into()),
            universe: ScreenUniverse {
                symbols: vec!["AAPL".into(), "IBM".into()],
                start: NaiveDate::from_ymd_opt(2005, 1, 3).unwrap_or_default(),
                end: NaiveDate::from_ymd_opt(2017, 12, 29).unwrap_or_default(),
                source: "offline".into(),
            },
            expressions: vec![ScreenedExpr {
                name: "alpha101".into(),
                paper_number: Some(101),
                source: "((close - open) / ((high - low) + .001))".into(),
            }],
            screen: Screen {
                options: ScreenOptions::default(),
                ..Screen::default()
            },
        }
    }

    #[test]
    fn a_record_reads_back_from_its_file_or_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = screens_dir(tmp.path()).join(screen_dir_name(chrono::Utc::now()));
        let r = record();
        let path = r.write(&dir).unwrap();
        assert_eq!(ScreenRecord::read(&path).unwrap(), r);
        assert_eq!(ScreenRecord::read(&dir).unwrap(), r);
        assert_eq!(ScreenRecord::newest(&screens_dir(tmp.path())), Some(path));
    }

    #[test]
    fn a_newer_version_or_a_foreign_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let mut r = record();
        r.version = RECORD_VERSION + 1;
        let path = r.write(tmp.path()).unwrap();
        assert!(matches!(
            ScreenRecord::read(&path),
            Err(RecordError::Version { found, .. }) if found == RECORD_VERSION + 1
        ));
        std::fs::write(&path, b"{\"rows\": []}").unwrap();
        assert!(matches!(
            ScreenRecord::read(&path),
            Err(RecordError::Format { .. })
        ));
        assert!(matches!(
            ScreenRecord::read(&tmp.path().join("none.json")),
            Err(RecordError::Read { .. })
        ));
    }
}
