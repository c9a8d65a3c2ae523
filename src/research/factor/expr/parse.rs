//! A hand-written parser for factor expressions (docs §17.7.1): tokens, then
//! precedence climbing. Errors are typed and point at a column; nesting is
//! bounded so hostile input (`((((…`) cannot overflow the stack.

use std::fmt;

use super::ast::{BinOp, Expr, Input, PairFn, TsFn, UnaryFn};
use super::lex::{Tok, tokens};

/// How deep parentheses, calls and unary minus may nest.
pub const MAX_DEPTH: usize = 200;

/// The longest window (and `adv{d}`) accepted, in rows: ~400 years.
const MAX_WINDOW: usize = 100_000;

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

/// A parse error: where (1-based line and column, in characters) and what.
/// Display: `line L, column C: message`, then the source line and a caret
/// under the column.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub kind: ParseErrorKind,
    /// The source line the error is on.
    pub source_line: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Tabs stay tabs so the caret lines up however they render.
        let pad: String = self
            .source_line
            .chars()
            .take(self.column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(
            f,
            "line {}, column {}: {}\n  {}\n  {pad}^",
            self.line, self.column, self.kind, self.source_line
        )
    }
}

impl std::error::Error for ParseError {}

/// What a function name means.
#[derive(Clone, Copy, Debug, PartialEq)]
enum FnKind {
    Unary(UnaryFn),
    SignedPower,
    /// Elementwise, or the time-series one with an integer-literal window.
    MinMax(BinOp, TsFn),
    Rank,
    Scale,
    IndNeutralize,
    Ts(TsFn),
    Pair(PairFn),
}

/// Every function name (lower case): the issue's `ts_` names and the
/// paper's.
const FUNCTIONS: &[(&str, FnKind)] = &[
    ("abs", FnKind::Unary(UnaryFn::Abs)),
    ("log", FnKind::Unary(UnaryFn::Log)),
    ("sign", FnKind::Unary(UnaryFn::Sign)),
    ("signedpower", FnKind::SignedPower),
    ("min", FnKind::MinMax(BinOp::Min, TsFn::Min)),
    ("max", FnKind::MinMax(BinOp::Max, TsFn::Max)),
    ("rank", FnKind::Rank),
    ("scale", FnKind::Scale),
    ("indneutralize", FnKind::IndNeutralize),
    ("delay", FnKind::Ts(TsFn::Delay)),
    ("delta", FnKind::Ts(TsFn::Delta)),
    ("ts_sum", FnKind::Ts(TsFn::Sum)),
    ("sum", FnKind::Ts(TsFn::Sum)),
    ("ts_product", FnKind::Ts(TsFn::Product)),
    ("product", FnKind::Ts(TsFn::Product)),
    ("ts_min", FnKind::Ts(TsFn::Min)),
    ("ts_max", FnKind::Ts(TsFn::Max)),
    ("ts_argmin", FnKind::Ts(TsFn::ArgMin)),
    ("ts_argmax", FnKind::Ts(TsFn::ArgMax)),
    ("ts_rank", FnKind::Ts(TsFn::Rank)),
    ("ts_stddev", FnKind::Ts(TsFn::StdDev)),
    ("stddev", FnKind::Ts(TsFn::StdDev)),
    ("decay_linear", FnKind::Ts(TsFn::DecayLinear)),
    ("ts_mean", FnKind::Ts(TsFn::Mean)),
    ("ts_corr", FnKind::Pair(PairFn::Corr)),
    ("correlation", FnKind::Pair(PairFn::Corr)),
    ("ts_cov", FnKind::Pair(PairFn::Cov)),
    ("covariance", FnKind::Pair(PairFn::Cov)),
];

const INPUTS: &[(&str, Input)] = &[
    ("open", Input::Open),
    ("high", Input::High),
    ("low", Input::Low),
    ("close", Input::Close),
    ("volume", Input::Volume),
    ("returns", Input::Returns),
    ("vwap", Input::Vwap),
];

impl FnKind {
    fn signature(self) -> &'static str {
        match self {
            FnKind::Unary(_) | FnKind::Rank => "1 argument (x)",
            FnKind::SignedPower => "2 arguments (x, a)",
            FnKind::MinMax(..) => "2 arguments (x, y) or (x, d)",
            FnKind::Scale => "1 or 2 arguments (x, a)",
            FnKind::IndNeutralize => "2 arguments (x, group level)",
            FnKind::Ts(_) => "2 arguments (x, d)",
            FnKind::Pair(_) => "3 arguments (x, y, d)",
        }
    }
}

/// One argument of a call, with the byte offset it starts at.
struct Arg {
    offset: usize,
    value: ArgValue,
}

enum ArgValue {
    /// `int`: the argument is one bare integer literal.
    Expr { expr: Expr, int: bool },
    /// A bare name in `indneutralize`'s group-level position.
    Level(String),
}

struct Parser<'s> {
    src: &'s str,
    toks: Vec<(usize, Tok)>,
    pos: usize,
    depth: usize,
}

/// Parses one expression (docs §17.7.1).
pub fn parse(src: &str) -> Result<Expr, ParseError> {
    let toks = tokens(src).map_err(|(offset, kind)| error_at(src, offset, kind))?;
    let mut p = Parser {
        src,
        toks,
        pos: 0,
        depth: 0,
    };
    if p.peek() == &Tok::End {
        return Err(p.error(0, ParseErrorKind::Empty));
    }
    let expr = p.expr(0)?;
    let (offset, tok) = p.peek_at();
    match tok {
        Tok::End => Ok(expr),
        Tok::RParen => Err(p.error(offset, ParseErrorKind::UnmatchedParen)),
        other => Err(p.error(
            offset,
            ParseErrorKind::Expected {
                expected: "an operator or the end of the expression",
                found: other.describe(),
            },
        )),
    }
}

/// The line, column and source line of a byte offset.
fn error_at(src: &str, offset: usize, kind: ParseErrorKind) -> ParseError {
    let offset = (0..=offset.min(src.len()))
        .rev()
        .find(|o| src.is_char_boundary(*o))
        .unwrap_or(0);
    let before = src.get(..offset).unwrap_or("");
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let source_line = src
        .get(line_start..)
        .and_then(|rest| rest.lines().next())
        .unwrap_or("")
        .to_string();
    ParseError {
        line: before.matches('\n').count() + 1,
        column: before.get(line_start..).map_or(0, |s| s.chars().count()) + 1,
        kind,
        source_line,
    }
}

/// Binding powers of an infix operator: (left, right); right = left + 1
/// associates left, right = left associates right (`^`).
fn infix(tok: &Tok) -> Option<(BinOp, u8, u8)> {
    Some(match tok {
        Tok::OrOr => (BinOp::Or, 2, 3),
        Tok::AndAnd => (BinOp::And, 4, 5),
        Tok::EqEq => (BinOp::Eq, 6, 7),
        Tok::Ne => (BinOp::Ne, 6, 7),
        Tok::Lt => (BinOp::Lt, 8, 9),
        Tok::Le => (BinOp::Le, 8, 9),
        Tok::Gt => (BinOp::Gt, 8, 9),
        Tok::Ge => (BinOp::Ge, 8, 9),
        Tok::Plus => (BinOp::Add, 10, 11),
        Tok::Minus => (BinOp::Sub, 10, 11),
        Tok::Star => (BinOp::Mul, 12, 13),
        Tok::Slash => (BinOp::Div, 12, 13),
        Tok::Caret => (BinOp::Pow, 15, 15),
        _ => return None,
    })
}

/// Unary minus binds tighter than `*` and looser than `^` (`-a^b` is
/// `-(a^b)`, as in Python).
const NEG_BP: u8 = 14;

/// The conditional's binding power: the loosest.
const COND_BP: u8 = 1;

impl Parser<'_> {
    fn error(&self, offset: usize, kind: ParseErrorKind) -> ParseError {
        error_at(self.src, offset, kind)
    }

    fn peek_at(&self) -> (usize, &Tok) {
        match self.toks.get(self.pos) {
            Some((o, t)) => (*o, t),
            None => (self.src.len(), &Tok::End),
        }
    }

    fn peek(&self) -> &Tok {
        self.peek_at().1
    }

    fn peek_second(&self) -> &Tok {
        self.toks.get(self.pos + 1).map_or(&Tok::End, |(_, t)| t)
    }

    fn bump(&mut self) -> (usize, Tok) {
        let (o, t) = self.peek_at();
        let out = (o, t.clone());
        if self.pos < self.toks.len() {
            self.pos += 1;
        }
        out
    }

    fn expected(&self, expected: &'static str) -> ParseError {
        let (offset, tok) = self.peek_at();
        self.error(
            offset,
            ParseErrorKind::Expected {
                expected,
                found: tok.describe(),
            },
        )
    }

    /// Precedence climbing: operators binding at least `min_bp`.
    fn expr(&mut self, min_bp: u8) -> Result<Expr, ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let offset = self.peek_at().0;
            return Err(self.error(offset, ParseErrorKind::TooDeep));
        }
        let mut lhs = self.prefix()?;
        loop {
            if self.peek() == &Tok::Question {
                if min_bp > COND_BP {
                    break;
                }
                self.bump();
                let then = self.expr(0)?;
                if self.peek() != &Tok::Colon {
                    return Err(self.expected("`:` of the `c ? a : b` conditional"));
                }
                self.bump();
                let otherwise = self.expr(COND_BP)?;
                lhs = Expr::Cond(Box::new(lhs), Box::new(then), Box::new(otherwise));
                continue;
            }
            let Some((op, lbp, rbp)) = infix(self.peek()) else {
                break;
            };
            if lbp < min_bp {
                break;
            }
            self.bump();
            let rhs = self.expr(rbp)?;
            lhs = Expr::Binary(op, Box::new(lhs), Box::new(rhs));
        }
        self.depth -= 1;
        Ok(lhs)
    }

    fn prefix(&mut self) -> Result<Expr, ParseError> {
        let (offset, tok) = self.bump();
        match tok {
            Tok::Num { value, .. } => Ok(Expr::Num(value)),
            Tok::Minus => Ok(Expr::Neg(Box::new(self.expr(NEG_BP)?))),
            Tok::LParen => {
                let inner = self.expr(0)?;
                match self.peek() {
                    Tok::RParen => {
                        self.bump();
                        Ok(inner)
                    }
                    Tok::End => Err(self.error(offset, ParseErrorKind::UnclosedParen)),
                    _ => Err(self.expected("`)` or an operator")),
                }
            }
            Tok::Ident(name) if self.peek() == &Tok::LParen => self.call(&name, offset),
            Tok::Ident(name) => self.input(&name, offset),
            other => Err(self.error(
                offset,
                ParseErrorKind::Expected {
                    expected: "a number, an input or a function",
                    found: other.describe(),
                },
            )),
        }
    }

    fn input(&self, name: &str, offset: usize) -> Result<Expr, ParseError> {
        let lower = name.to_ascii_lowercase();
        if let Some((_, i)) = INPUTS.iter().find(|(n, _)| *n == lower) {
            return Ok(Expr::Input(*i));
        }
        if let Some(days) = lower.strip_prefix("adv")
            && !days.is_empty()
            && days.bytes().all(|b| b.is_ascii_digit())
        {
            let found = days.parse::<f64>().unwrap_or(f64::INFINITY);
            let d = window_days(name, found).map_err(|k| self.error(offset, k))?;
            return Ok(Expr::Input(Input::Adv(d)));
        }
        if FUNCTIONS.iter().any(|(n, _)| *n == lower) {
            return Err(self.error(offset, ParseErrorKind::MissingCall(name.to_string())));
        }
        let suggestion = suggest(&lower, INPUTS.iter().map(|(n, _)| *n));
        let kind = ParseErrorKind::UnknownInput {
            name: name.to_string(),
            suggestion,
        };
        Err(self.error(offset, kind))
    }

    fn call(&mut self, name: &str, offset: usize) -> Result<Expr, ParseError> {
        let lower = name.to_ascii_lowercase();
        let Some((_, kind)) = FUNCTIONS.iter().find(|(n, _)| *n == lower) else {
            let is_input = INPUTS.iter().any(|(n, _)| *n == lower) || lower.starts_with("adv");
            let kind = if is_input {
                ParseErrorKind::NotAFunction(name.to_string())
            } else {
                ParseErrorKind::UnknownFunction {
                    name: name.to_string(),
                    suggestion: suggest(&lower, FUNCTIONS.iter().map(|(n, _)| *n)),
                }
            };
            return Err(self.error(offset, kind));
        };
        let args = self.args(*kind == FnKind::IndNeutralize)?;
        build_call(name, *kind, args).map_err(|(o, k)| self.error(o.unwrap_or(offset), k))
    }

    /// `( arg, … )` after a function name; `level` lets a bare name stand as
    /// the second argument.
    fn args(&mut self, level: bool) -> Result<Vec<Arg>, ParseError> {
        let (open, _) = self.bump();
        let mut args = Vec::new();
        if self.peek() == &Tok::RParen {
            self.bump();
            return Ok(args);
        }
        loop {
            let (offset, first) = self.peek_at();
            let bare_name = match first {
                Tok::Ident(n) if level && args.len() == 1 => Some(n.clone()),
                _ => None,
            };
            let closes = matches!(self.peek_second(), Tok::Comma | Tok::RParen);
            let value = match bare_name {
                Some(n) if closes => {
                    self.bump();
                    ArgValue::Level(n.to_ascii_lowercase())
                }
                _ => {
                    let int = matches!(first, Tok::Num { int: true, .. }) && closes;
                    ArgValue::Expr {
                        expr: self.expr(0)?,
                        int,
                    }
                }
            };
            args.push(Arg { offset, value });
            match self.peek() {
                Tok::Comma => {
                    self.bump();
                }
                Tok::RParen => {
                    self.bump();
                    return Ok(args);
                }
                Tok::End => return Err(self.error(open, ParseErrorKind::UnclosedParen)),
                _ => return Err(self.expected("`,`, `)` or an operator")),
            }
        }
    }
}

type BuildError = (Option<usize>, ParseErrorKind);

/// The expression a call denotes, once its arguments are parsed. An error
/// carries the argument's offset, or `None` for the function's name.
fn build_call(name: &str, kind: FnKind, args: Vec<Arg>) -> Result<Expr, BuildError> {
    let found = args.len();
    let count_error = || {
        (
            None,
            ParseErrorKind::ArgCount {
                name: name.to_string(),
                expected: kind.signature(),
                found,
            },
        )
    };
    if found > 3 {
        return Err(count_error());
    }
    let mut it = args.into_iter();
    let (a, b, c) = (it.next(), it.next(), it.next());
    let e = |arg: Arg| expr_arg(name, arg).map(Box::new);
    let w = |arg: Arg| window(name, arg);
    Ok(match (kind, a, b, c) {
        (FnKind::Unary(u), Some(x), None, None) => Expr::Unary(u, e(x)?),
        (FnKind::Rank, Some(x), None, None) => Expr::Rank(e(x)?),
        (FnKind::SignedPower, Some(x), Some(p), None) => Expr::SignedPower(e(x)?, e(p)?),
        (
            FnKind::MinMax(_, t),
            Some(x),
            Some(
                d @ Arg {
                    value: ArgValue::Expr { int: true, .. },
                    ..
                },
            ),
            None,
        ) => Expr::Ts(t, e(x)?, w(d)?),
        (FnKind::MinMax(op, _), Some(x), Some(y), None) => Expr::Binary(op, e(x)?, e(y)?),
        (FnKind::Scale, Some(x), None, None) => Expr::Scale(e(x)?, 1.0),
        (FnKind::Scale, Some(x), Some(s), None) => {
            let offset = s.offset;
            let v = constant(&*e(s)?)
                .ok_or((Some(offset), ParseErrorKind::NotConstant(name.to_string())))?;
            Expr::Scale(e(x)?, v)
        }
        (
            FnKind::IndNeutralize,
            Some(x),
            Some(Arg {
                value: ArgValue::Level(g),
                ..
            }),
            None,
        ) => Expr::IndNeutralize(e(x)?, g),
        (FnKind::IndNeutralize, Some(_), Some(g), None) => {
            return Err((
                Some(g.offset),
                ParseErrorKind::NotGroupLevel(name.to_string()),
            ));
        }
        (FnKind::Ts(t), Some(x), Some(d), None) => Expr::Ts(t, e(x)?, w(d)?),
        (FnKind::Pair(p), Some(x), Some(y), Some(d)) => Expr::Pair(p, e(x)?, e(y)?, w(d)?),
        _ => return Err(count_error()),
    })
}

fn expr_arg(name: &str, arg: Arg) -> Result<Expr, BuildError> {
    match arg.value {
        ArgValue::Expr { expr, .. } => Ok(expr),
        // Only indneutralize's level position yields a bare name.
        ArgValue::Level(_) => Err((
            Some(arg.offset),
            ParseErrorKind::NotGroupLevel(name.to_string()),
        )),
    }
}

/// A literal, or a negated one.
fn constant(e: &Expr) -> Option<f64> {
    match e {
        Expr::Num(v) => Some(*v),
        Expr::Neg(x) => match &**x {
            Expr::Num(v) => Some(-v),
            _ => None,
        },
        _ => None,
    }
}

fn window(name: &str, arg: Arg) -> Result<usize, BuildError> {
    let offset = Some(arg.offset);
    let value = match &arg.value {
        ArgValue::Expr { expr, .. } => constant(expr),
        ArgValue::Level(_) => None,
    };
    let days = value.ok_or((offset, ParseErrorKind::WindowNotNumber(name.to_string())))?;
    window_days(name, days).map_err(|k| (offset, k))
}

/// Floors the paper's fractional windows; at least 1, at most `MAX_WINDOW`.
fn window_days(name: &str, days: f64) -> Result<usize, ParseErrorKind> {
    let floored = days.floor();
    if floored.is_nan() || floored < 1.0 {
        return Err(ParseErrorKind::WindowTooShort {
            name: name.to_string(),
            found: days,
        });
    }
    if floored > MAX_WINDOW as f64 {
        return Err(ParseErrorKind::WindowTooLong {
            name: name.to_string(),
            found: days,
        });
    }
    // In 1..=MAX_WINDOW, so the cast is exact.
    Ok(floored as usize)
}

/// The closest known name within an edit per three characters (one to
/// two; adjacent swaps count one), so `cap` suggests nothing, not `vwap`.
fn suggest<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> Option<String> {
    let most = (name.chars().count() / 3).clamp(1, 2);
    known
        .map(|k| (edit_distance(name, k), k))
        .filter(|(d, _)| *d <= most)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.to_string())
}

/// Optimal-string-alignment distance (Levenshtein plus adjacent swaps).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    let at = |i: usize, j: usize| i * width + j;
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            let v = if i == 0 || j == 0 {
                i.max(j)
            } else {
                let cost = usize::from(a.get(i - 1) != b.get(j - 1));
                let get = |i, j| d.get(at(i, j)).copied().unwrap_or(usize::MAX - 1);
                let mut best = (get(i - 1, j) + 1)
                    .min(get(i, j - 1) + 1)
                    .min(get(i - 1, j - 1) + cost);
                if i > 1 && j > 1 && a.get(i - 1) == b.get(j - 2) && a.get(i - 2) == b.get(j - 1) {
                    best = best.min(get(i - 2, j - 2) + 1);
                }
                best
            };
            if let Some(slot) = d.get_mut(at(i, j)) {
                *slot = v;
            }
        }
    }
    d.last().copied().unwrap_or(0)
}
