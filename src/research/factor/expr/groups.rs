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
    #[error("expected `symbol,group`, found {0} fields")]
    TooManyFields(usize),
    #[error("the symbol is empty")]
    EmptySymbol,
    #[error("{0} has an empty group")]
    EmptyGroup(String),
    #[error("{symbol} is in group `{group}` here but `{first_group}` on line {first_line}")]
    Conflict {
        symbol: String,
        group: String,
        first_group: String,
        first_line: usize,
    },
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
    /// Reads `symbol,group` lines: a first line whose first field is
    /// `symbol` or `ticker` (any case) is a header; blank lines and `#`
    /// comments are skipped; fields may be double-quoted; symbols match
    /// case-insensitively. A symbol listed twice must name the same group.
    pub fn parse(text: &str) -> Result<Groups, GroupsError> {
        let mut groups = Groups::default();
        let mut first_seen: HashMap<String, usize> = HashMap::new();
        let mut ids: HashMap<String, usize> = HashMap::new();
        for (k, raw) in text.lines().enumerate() {
            let line = k + 1;
            let content = raw.trim().trim_start_matches('\u{feff}');
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = content.split(',').map(unquote).collect();
            let at = |problem| GroupsError::Line { line, problem };
            let (symbol, group) = match fields.as_slice() {
                [_] => return Err(at(LineProblem::NoComma)),
                [s, g] => (s.to_uppercase(), (*g).to_string()),
                more => return Err(at(LineProblem::TooManyFields(more.len()))),
            };
            if groups.names.is_empty()
                && first_seen.is_empty()
                && matches!(symbol.as_str(), "SYMBOL" | "TICKER")
            {
                continue;
            }
            if symbol.is_empty() {
                return Err(at(LineProblem::EmptySymbol));
            }
            if group.is_empty() {
                return Err(at(LineProblem::EmptyGroup(symbol)));
            }
            let next = ids.len();
            let id = *ids.entry(group.clone()).or_insert(next);
            if id == next {
                groups.names.push(group.clone());
            }
            match groups.by_symbol.get(&symbol) {
                Some(prev) if *prev != id => {
                    let first_group = groups.group_name(*prev).unwrap_or("").to_string();
                    let first_line = first_seen.get(&symbol).copied().unwrap_or(0);
                    return Err(at(LineProblem::Conflict {
                        symbol,
                        group,
                        first_group,
                        first_line,
                    }));
                }
                Some(_) => {}
                None => {
                    first_seen.insert(symbol.clone(), line);
                    groups.by_symbol.insert(symbol, id);
                }
            }
        }
        if groups.by_symbol.is_empty() {
            return Err(GroupsError::Empty);
        }
        Ok(groups)
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

fn unquote(field: &str) -> &str {
    let f = field.trim();
    f.strip_prefix('"')
        .and_then(|f| f.strip_suffix('"'))
        .map_or(f, str::trim)
}
