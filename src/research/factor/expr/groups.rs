//! Industry groups for `indneutralize`, from a user's `symbol,group` file.

use std::collections::HashMap;
use std::path::Path;

/// Symbol → group, read from `symbol,group` lines (docs §17.7.3).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Groups {
    by_symbol: HashMap<String, usize>,
    names: Vec<String>,
}

/// What is wrong with one line of a groups file.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LineProblem {
    #[error("expected `symbol,group`, found no comma")]
    NoComma,
}

/// Why a groups file cannot be read.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GroupsError {
    #[error("cannot read the groups file {path}: {message}")]
    Io { path: String, message: String },
    #[error("groups file, line {line}: {problem}")]
    Line { line: usize, problem: LineProblem },
    #[error("the groups file has no `symbol,group` lines")]
    Empty,
}

impl Groups {
    pub fn parse(_text: &str) -> Result<Groups, GroupsError> {
        Err(GroupsError::Empty)
    }

    pub fn load(path: &Path) -> Result<Groups, GroupsError> {
        let text = std::fs::read_to_string(path).map_err(|e| GroupsError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Groups::parse(&text)
    }

    /// The group id of a symbol (case-insensitive), if the file names it.
    pub fn group_of(&self, symbol: &str) -> Option<usize> {
        self.by_symbol.get(&symbol.trim().to_uppercase()).copied()
    }

    pub fn group_name(&self, id: usize) -> Option<&str> {
        self.names.get(id).map(String::as_str)
    }

    /// How many distinct groups.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}
