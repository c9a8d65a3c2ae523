//! Why a factor expression does not parse (docs §17.7.1): the kinds of
//! error the lexer and the parser report, and the bounds they enforce.

/// How deep parentheses, calls and unary minus may nest.
pub const MAX_DEPTH: usize = 200;

/// The longest window (and `adv{d}`) accepted, in rows: ~400 years.
pub(super) const MAX_WINDOW: usize = 100_000;

/// What went wrong at the error's column.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ParseErrorKind {
    #[error("empty expression; expected a number, an input or a function")]
    Empty,
    #[error("unexpected character `{0}`")]
    UnexpectedChar(char),
    #[error("`{0}` is not a finite number")]
    BadNumber(String),
    #[error("expected {expected}, found {found}")]
    Expected {
        expected: &'static str,
        found: String,
    },
    #[error("unbalanced parenthesis: this `(` is never closed")]
    UnclosedParen,
    #[error("unbalanced parenthesis: no `(` opens this `)`")]
    UnmatchedParen,
    #[error("unknown function `{name}`{}", hint(suggestion))]
    UnknownFunction {
        name: String,
        suggestion: Option<String>,
    },
    #[error("unknown input `{name}`{}", input_hint(suggestion))]
    UnknownInput {
        name: String,
        suggestion: Option<String>,
    },
    #[error("`{0}` is an input, not a function")]
    NotAFunction(String),
    #[error("`{0}` is a function; expected `(` after it")]
    MissingCall(String),
    #[error("`{name}` takes {expected}; found {found}")]
    ArgCount {
        name: String,
        expected: &'static str,
        found: usize,
    },
    #[error("the window of `{0}` must be a number of days")]
    WindowNotNumber(String),
    #[error("the window of `{name}` must be at least 1 day; found {found}")]
    WindowTooShort { name: String, found: f64 },
    #[error("the window of `{name}` must be at most {MAX_WINDOW} days; found {found}")]
    WindowTooLong { name: String, found: f64 },
    #[error("the second argument of `{0}` must be a number")]
    NotConstant(String),
    #[error("the second argument of `{0}` names a group level, e.g. IndClass.industry")]
    NotGroupLevel(String),
    #[error("the expression nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
}

fn hint(suggestion: &Option<String>) -> String {
    suggestion
        .as_ref()
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default()
}

fn input_hint(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!("; did you mean `{s}`?"),
        None => "; the inputs are open, high, low, close, volume, returns, vwap and adv{d}".into(),
    }
}
