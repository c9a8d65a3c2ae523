//! The local run's journal (docs §18.3): rows are appended as cells finish,
//! so a run killed at any moment (SIGKILL included) keeps every cell it
//! reported done, and the next run skips exactly those.
//!
//! `<out>.sweep/journal.csv`: a first line naming the plan's hash, the
//! column line, then rows. A cell counts as done only when all its windows'
//! rows are there, each line whole (ending in a newline): what a kill cut
//! short is dropped and run again. Opening compacts the file to the done
//! cells, so it never holds a row twice.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::SweepError;
use super::plan::Plan;
use super::rows::{ROW_HEADER, Row};

pub struct Journal {
    path: PathBuf,
    file: std::fs::File,
}

fn first_line(plan: &Plan) -> String {
    format!("# vibedesk sweep journal plan {}", plan.hash())
}

/// The complete cells' rows of a journal's text for `plan` (cell order
/// not guaranteed); a journal of another plan holds none.
pub fn done_rows(text: &str, plan: &Plan) -> Vec<Row> {
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some(first_line(plan).as_str()) {
        return Vec::new();
    }
    if lines.next().map(str::trim_end) != Some(ROW_HEADER) {
        return Vec::new();
    }
    let windows = plan.windows.len();
    let cells = plan.cell_count();
    let mut by_cell: HashMap<usize, Vec<Row>> = HashMap::new();
    for line in lines {
        // A line a kill cut short has no newline.
        let Some(body) = line.strip_suffix('\n') else {
            break;
        };
        let Some(row) = Row::parse(body) else {
            continue;
        };
        if row.cell < cells && row.window < windows {
            let rows = by_cell.entry(row.cell).or_default();
            if !rows.iter().any(|r| r.window == row.window) {
                rows.push(row);
            }
        }
    }
    let mut out: Vec<Row> = by_cell
        .into_values()
        .filter(|rows| rows.len() == windows)
        .flatten()
        .collect();
    out.sort_by_key(|r| (r.cell, r.window));
    out
}

impl Journal {
    /// Opens the journal at `path` for `plan`: returns the done cells'
    /// rows and a journal holding exactly those, open for appending.
    pub fn open(path: &Path, plan: &Plan) -> Result<(Journal, Vec<Row>), SweepError> {
        let text = match std::fs::read(path) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(SweepError::io("read", path)(e)),
        };
        let done = done_rows(&text, plan);
        let mut fresh = String::with_capacity(done.len() * 64 + 128);
        fresh.push_str(&first_line(plan));
        fresh.push('\n');
        fresh.push_str(ROW_HEADER);
        fresh.push('\n');
        for r in &done {
            fresh.push_str(&r.to_line());
            fresh.push('\n');
        }
        crate::fsio::write_atomic(
            path,
            fresh.as_bytes(),
            crate::fsio::Durability::ProcessCrash,
        )?;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(SweepError::io("open", path))?;
        Ok((
            Journal {
                path: path.to_path_buf(),
                file,
            },
            done,
        ))
    }

    /// Appends finished cells' rows in one write: the kernel keeps them
    /// from the moment it returns, whatever happens to this process.
    pub fn append(&mut self, rows: &[Row]) -> Result<(), SweepError> {
        let mut buf = String::with_capacity(rows.len() * 160);
        for r in rows {
            r.push_line(&mut buf);
            buf.push('\n');
        }
        self.file
            .write_all(buf.as_bytes())
            .map_err(SweepError::io("append to", &self.path))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}
