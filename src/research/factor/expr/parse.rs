//! The parser.

use std::fmt;

use super::Expr;

/// How deep parentheses, calls and unary minus may nest.
pub const MAX_DEPTH: usize = 200;

/// What went wrong at the error's column.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ParseErrorKind {
    #[error("empty expression; expected a number, an input or a function")]
    Empty,
}

/// A parse error: where (1-based line and column) and what.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub kind: ParseErrorKind,
    /// The source line the error is on, for the caret display.
    pub source_line: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}\n  {}\n  {}^",
            self.line,
            self.column,
            self.kind,
            self.source_line,
            " ".repeat(self.column.saturating_sub(1))
        )
    }
}

impl std::error::Error for ParseError {}

/// Parses one expression (docs §17.7.1).
pub fn parse(src: &str) -> Result<Expr, ParseError> {
    Err(ParseError {
        line: 1,
        column: 1,
        kind: ParseErrorKind::Empty,
        source_line: src.lines().next().unwrap_or("").to_string(),
    })
}
