//! Rule strategies: a small typed expression language over indicators
//! (issue 5b), written in `config.json` as
//!
//! ```json
//! {"rules": {"entry": "sma(close, 20) > sma(close, 50)",
//!            "exit":  "crosses_below(sma(close, 20), sma(close, 50))",
//!            "short_entry": "...", "short_exit": "...", "size": 1.0}}
//! ```
//!
//! Grammar (lowest precedence first): `or` / `||`, `and` / `&&`, `not` / `!`,
//! one comparison (`< <= > >= == !=`), `+ -`, `* /`, unary `-`, then
//! numbers, `true`/`false`, the columns `open high low close volume`,
//! function calls and parentheses.
//!
//! Two types: *number* series and *condition* (true/false) series. Window
//! arguments must be whole-number literals. Every parse and type error
//! names the field, the column (1-based, in characters) and what to write
//! instead, with a caret under the spot.
//!
//! Semantics per bar (a position state machine, evaluated at the close; the
//! engine executes one bar later): flat → long `size` on `entry`, else
//! short on `short_entry`; long → flat on `exit` (without `exit`: as soon as
//! `entry` is false), or straight to short on `short_entry`; short
//! likewise. A comparison with a missing value (indicator warm-up) is false.

use serde_json::{Map, Value, json};

use super::config_reader::{ConfigIssue, Reader, kind, suggest};
use crate::research::data::Bars;
use crate::research::indicators;

/// A price column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    Open,
    High,
    Low,
    Close,
    Volume,
}

const COLUMNS: [&str; 5] = ["open", "high", "low", "close", "volume"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// A typed number-series expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Num {
    Const(f64),
    Col(Column),
    Neg(Box<Num>),
    Arith(Arith, Box<Num>, Box<Num>),
    /// A one-series function with integer/float literal parameters.
    Func(Func, Box<Num>, Vec<f64>),
    Atr(usize),
    Min(Box<Num>, Box<Num>),
    Max(Box<Num>, Box<Num>),
}

/// A typed condition-series expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Cond {
    Const(bool),
    Cmp(Cmp, Num, Num),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Not(Box<Cond>),
    /// `a` crosses above (`true`) or below `b` on this bar.
    Cross(bool, Num, Num),
}

/// One-series functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    Sma,
    Ema,
    Rsi,
    Std,
    Highest,
    Lowest,
    Lag,
    Roc,
    BbUpper,
    BbLower,
    Macd,
    MacdSignal,
    MacdHist,
    Abs,
}

/// Parameter kinds after the series argument.
#[derive(Clone, Copy, PartialEq, Eq)]
enum P {
    /// A whole number ≥ 1 (a window).
    Int,
    /// A positive number.
    Pos,
}

struct FuncSig {
    name: &'static str,
    usage: &'static str,
    kind: FuncKind,
}

enum FuncKind {
    /// series, then literal parameters.
    Series(Func, &'static [P]),
    /// atr(window): uses high, low, close.
    Atr,
    /// Two series → number.
    MinMax(bool),
    /// Two series → condition.
    Cross(bool),
}

const FUNCS: &[FuncSig] = &[
    FuncSig {
        name: "sma",
        usage: "sma(series, window)",
        kind: FuncKind::Series(Func::Sma, &[P::Int]),
    },
    FuncSig {
        name: "ema",
        usage: "ema(series, span)",
        kind: FuncKind::Series(Func::Ema, &[P::Int]),
    },
    FuncSig {
        name: "rsi",
        usage: "rsi(series, period)",
        kind: FuncKind::Series(Func::Rsi, &[P::Int]),
    },
    FuncSig {
        name: "std",
        usage: "std(series, window)",
        kind: FuncKind::Series(Func::Std, &[P::Int]),
    },
    FuncSig {
        name: "highest",
        usage: "highest(series, window)",
        kind: FuncKind::Series(Func::Highest, &[P::Int]),
    },
    FuncSig {
        name: "lowest",
        usage: "lowest(series, window)",
        kind: FuncKind::Series(Func::Lowest, &[P::Int]),
    },
    FuncSig {
        name: "lag",
        usage: "lag(series, bars)",
        kind: FuncKind::Series(Func::Lag, &[P::Int]),
    },
    FuncSig {
        name: "roc",
        usage: "roc(series, bars)",
        kind: FuncKind::Series(Func::Roc, &[P::Int]),
    },
    FuncSig {
        name: "bb_upper",
        usage: "bb_upper(series, window, k)",
        kind: FuncKind::Series(Func::BbUpper, &[P::Int, P::Pos]),
    },
    FuncSig {
        name: "bb_lower",
        usage: "bb_lower(series, window, k)",
        kind: FuncKind::Series(Func::BbLower, &[P::Int, P::Pos]),
    },
    FuncSig {
        name: "macd",
        usage: "macd(series, fast, slow, signal)",
        kind: FuncKind::Series(Func::Macd, &[P::Int, P::Int, P::Int]),
    },
    FuncSig {
        name: "macd_signal",
        usage: "macd_signal(series, fast, slow, signal)",
        kind: FuncKind::Series(Func::MacdSignal, &[P::Int, P::Int, P::Int]),
    },
    FuncSig {
        name: "macd_hist",
        usage: "macd_hist(series, fast, slow, signal)",
        kind: FuncKind::Series(Func::MacdHist, &[P::Int, P::Int, P::Int]),
    },
    FuncSig {
        name: "abs",
        usage: "abs(series)",
        kind: FuncKind::Series(Func::Abs, &[]),
    },
    FuncSig {
        name: "atr",
        usage: "atr(period)",
        kind: FuncKind::Atr,
    },
    FuncSig {
        name: "min",
        usage: "min(a, b)",
        kind: FuncKind::MinMax(false),
    },
    FuncSig {
        name: "max",
        usage: "max(a, b)",
        kind: FuncKind::MinMax(true),
    },
    FuncSig {
        name: "crosses_above",
        usage: "crosses_above(a, b)",
        kind: FuncKind::Cross(true),
    },
    FuncSig {
        name: "crosses_below",
        usage: "crosses_below(a, b)",
        kind: FuncKind::Cross(false),
    },
];

const MAX_WINDOW: f64 = 10_000.0;

/// Aliases accepted for function names.
fn canonical_func(name: &str) -> &str {
    match name {
        "shift" | "prev" => "lag",
        "change" | "pct_change" => "roc",
        "stdev" | "stddev" => "std",
        "max_of" => "max",
        "min_of" => "min",
        "cross_above" | "crossover" => "crosses_above",
        "cross_below" | "crossunder" => "crosses_below",
        other => other,
    }
}

// ---------------------------------------------------------------------------
// Lexer

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(f64),
    Ident(String),
    LParen,
    RParen,
    Comma,
    Arith(Arith),
    Cmp(Cmp),
    And,
    Or,
    Not,
    True,
    False,
    End,
}

fn describe_tok(t: &Tok) -> String {
    match t {
        Tok::Num(x) => format!("the number {x}"),
        Tok::Ident(s) => format!("'{s}'"),
        Tok::LParen => "'('".into(),
        Tok::RParen => "')'".into(),
        Tok::Comma => "','".into(),
        Tok::Arith(_) => "an arithmetic operator".into(),
        Tok::Cmp(_) => "a comparison".into(),
        Tok::And => "'and'".into(),
        Tok::Or => "'or'".into(),
        Tok::Not => "'not'".into(),
        Tok::True | Tok::False => "a boolean".into(),
        Tok::End => "the end of the expression".into(),
    }
}

/// An error at a character column (1-based).
#[derive(Clone, Debug, PartialEq)]
struct At {
    col: usize,
    code: &'static str,
    msg: String,
}

fn err<T>(col: usize, code: &'static str, msg: impl Into<String>) -> Result<T, At> {
    Err(At {
        col,
        code,
        msg: msg.into(),
    })
}

fn lex(src: &str) -> Result<Vec<(Tok, usize)>, At> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let next = chars.get(i + 1).copied();
        let two = |t: Tok| (t, 2);
        let (tok, len) = match c {
            '(' => (Tok::LParen, 1),
            ')' => (Tok::RParen, 1),
            ',' => (Tok::Comma, 1),
            '+' => (Tok::Arith(Arith::Add), 1),
            '-' => (Tok::Arith(Arith::Sub), 1),
            '*' => (Tok::Arith(Arith::Mul), 1),
            '/' => (Tok::Arith(Arith::Div), 1),
            '<' if next == Some('=') => two(Tok::Cmp(Cmp::Le)),
            '<' => (Tok::Cmp(Cmp::Lt), 1),
            '>' if next == Some('=') => two(Tok::Cmp(Cmp::Ge)),
            '>' => (Tok::Cmp(Cmp::Gt), 1),
            '=' if next == Some('=') => two(Tok::Cmp(Cmp::Eq)),
            '=' => {
                return err(
                    col,
                    "rule_parse_error",
                    "'=' alone is not an operator; write '==' to compare",
                );
            }
            '!' if next == Some('=') => two(Tok::Cmp(Cmp::Ne)),
            '!' => (Tok::Not, 1),
            '&' if next == Some('&') => two(Tok::And),
            '|' if next == Some('|') => two(Tok::Or),
            '&' | '|' => {
                return err(
                    col,
                    "rule_parse_error",
                    format!(
                        "'{c}' alone is not an operator; write '{c}{c}' or '{}'",
                        if c == '&' { "and" } else { "or" }
                    ),
                );
            }
            d if d.is_ascii_digit() || (d == '.' && next.is_some_and(|n| n.is_ascii_digit())) => {
                let mut j = i;
                while j < chars.len() && (chars[j].is_ascii_digit() || chars[j] == '.') {
                    j += 1;
                }
                if j < chars.len() && (chars[j] == 'e' || chars[j] == 'E') {
                    let mut k = j + 1;
                    if k < chars.len() && (chars[k] == '+' || chars[k] == '-') {
                        k += 1;
                    }
                    if k < chars.len() && chars[k].is_ascii_digit() {
                        while k < chars.len() && chars[k].is_ascii_digit() {
                            k += 1;
                        }
                        j = k;
                    }
                }
                let text: String = chars[i..j].iter().collect();
                match text.parse::<f64>() {
                    Ok(x) if x.is_finite() => (Tok::Num(x), j - i),
                    _ => return err(col, "rule_parse_error", format!("'{text}' is not a number")),
                }
            }
            a if a.is_ascii_alphabetic() || a == '_' => {
                let mut j = i;
                while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
                    j += 1;
                }
                let word: String = chars[i..j].iter().collect();
                let tok = match word.to_ascii_lowercase().as_str() {
                    "and" => Tok::And,
                    "or" => Tok::Or,
                    "not" => Tok::Not,
                    "true" => Tok::True,
                    "false" => Tok::False,
                    _ => Tok::Ident(word.to_ascii_lowercase()),
                };
                (tok, j - i)
            }
            other => {
                return err(
                    col,
                    "rule_parse_error",
                    format!("unexpected character '{other}'"),
                );
            }
        };
        out.push((tok, col));
        i += len;
    }
    out.push((Tok::End, chars.len() + 1));
    Ok(out)
}

// ---------------------------------------------------------------------------
// Parser and type checker in one pass: each production returns a typed node.

#[derive(Clone, Debug, PartialEq)]
enum Typed {
    Num(Num),
    Cond(Cond),
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        self.toks.get(self.pos).map_or(&Tok::End, |t| &t.0)
    }

    fn col(&self) -> usize {
        self.toks.get(self.pos).map_or(1, |t| t.1)
    }

    fn bump(&mut self) -> (Tok, usize) {
        let t = self.toks.get(self.pos).cloned().unwrap_or((Tok::End, 1));
        self.pos += 1;
        t
    }

    fn num(&self, t: Typed, col: usize, what: &str) -> Result<Num, At> {
        match t {
            Typed::Num(n) => Ok(n),
            Typed::Cond(_) => err(
                col,
                "rule_type_error",
                format!(
                    "{what} needs a number, but the expression at column {col} is a condition (true/false)"
                ),
            ),
        }
    }

    fn cond(&self, t: Typed, col: usize, what: &str) -> Result<Cond, At> {
        match t {
            Typed::Cond(c) => Ok(c),
            Typed::Num(_) => err(
                col,
                "rule_type_error",
                format!(
                    "{what} needs a condition (true/false), but the expression at column {col} is a number; compare it, e.g. `sma(close, 20) > close`"
                ),
            ),
        }
    }

    fn or(&mut self) -> Result<Typed, At> {
        let col = self.col();
        let mut left = self.and()?;
        while *self.peek() == Tok::Or {
            let (_, op_col) = self.bump();
            let rcol = self.col();
            let right = self.and()?;
            let l = self.cond(left, col, &format!("'or' (column {op_col})"))?;
            let r = self.cond(right, rcol, &format!("'or' (column {op_col})"))?;
            left = Typed::Cond(Cond::Or(Box::new(l), Box::new(r)));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Typed, At> {
        let col = self.col();
        let mut left = self.not()?;
        while *self.peek() == Tok::And {
            let (_, op_col) = self.bump();
            let rcol = self.col();
            let right = self.not()?;
            let l = self.cond(left, col, &format!("'and' (column {op_col})"))?;
            let r = self.cond(right, rcol, &format!("'and' (column {op_col})"))?;
            left = Typed::Cond(Cond::And(Box::new(l), Box::new(r)));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Typed, At> {
        if *self.peek() == Tok::Not {
            let (_, op_col) = self.bump();
            let col = self.col();
            let inner = self.not()?;
            let c = self.cond(inner, col, &format!("'not' (column {op_col})"))?;
            return Ok(Typed::Cond(Cond::Not(Box::new(c))));
        }
        self.cmp()
    }

    fn cmp(&mut self) -> Result<Typed, At> {
        let col = self.col();
        let left = self.add()?;
        let Tok::Cmp(op) = *self.peek() else {
            return Ok(left);
        };
        let (_, op_col) = self.bump();
        let rcol = self.col();
        let right = self.add()?;
        let what = format!("the comparison at column {op_col}");
        let l = self.num(left, col, &what)?;
        let r = self.num(right, rcol, &what)?;
        if let Tok::Cmp(_) = self.peek() {
            return err(
                self.col(),
                "rule_parse_error",
                "comparisons do not chain; join them with 'and', e.g. `a < b and b < c`",
            );
        }
        Ok(Typed::Cond(Cond::Cmp(op, l, r)))
    }

    fn add(&mut self) -> Result<Typed, At> {
        let col = self.col();
        let mut left = self.mul()?;
        while let Tok::Arith(op @ (Arith::Add | Arith::Sub)) = *self.peek() {
            let (_, op_col) = self.bump();
            let rcol = self.col();
            let right = self.mul()?;
            let what = format!(
                "'{}' (column {op_col})",
                if op == Arith::Add { '+' } else { '-' }
            );
            let l = self.num(left, col, &what)?;
            let r = self.num(right, rcol, &what)?;
            left = Typed::Num(Num::Arith(op, Box::new(l), Box::new(r)));
        }
        Ok(left)
    }

    fn mul(&mut self) -> Result<Typed, At> {
        let col = self.col();
        let mut left = self.unary()?;
        while let Tok::Arith(op @ (Arith::Mul | Arith::Div)) = *self.peek() {
            let (_, op_col) = self.bump();
            let rcol = self.col();
            let right = self.unary()?;
            let what = format!(
                "'{}' (column {op_col})",
                if op == Arith::Mul { '*' } else { '/' }
            );
            let l = self.num(left, col, &what)?;
            let r = self.num(right, rcol, &what)?;
            left = Typed::Num(Num::Arith(op, Box::new(l), Box::new(r)));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Typed, At> {
        if *self.peek() == Tok::Arith(Arith::Sub) {
            let (_, op_col) = self.bump();
            let col = self.col();
            let inner = self.unary()?;
            let n = self.num(inner, col, &format!("'-' (column {op_col})"))?;
            return Ok(Typed::Num(match n {
                Num::Const(x) => Num::Const(-x),
                other => Num::Neg(Box::new(other)),
            }));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Typed, At> {
        let (tok, col) = self.bump();
        match tok {
            Tok::Num(x) => Ok(Typed::Num(Num::Const(x))),
            Tok::True => Ok(Typed::Cond(Cond::Const(true))),
            Tok::False => Ok(Typed::Cond(Cond::Const(false))),
            Tok::LParen => {
                let inner = self.or()?;
                if *self.peek() != Tok::RParen {
                    return err(
                        self.col(),
                        "rule_parse_error",
                        format!(
                            "expected ')' to close the '(' at column {col}, found {}",
                            describe_tok(self.peek())
                        ),
                    );
                }
                self.bump();
                Ok(inner)
            }
            Tok::Ident(name) => {
                if *self.peek() == Tok::LParen {
                    return self.call(&name, col);
                }
                match name.as_str() {
                    "open" => Ok(Typed::Num(Num::Col(Column::Open))),
                    "high" => Ok(Typed::Num(Num::Col(Column::High))),
                    "low" => Ok(Typed::Num(Num::Col(Column::Low))),
                    "close" => Ok(Typed::Num(Num::Col(Column::Close))),
                    "volume" => Ok(Typed::Num(Num::Col(Column::Volume))),
                    _ if FUNCS.iter().any(|f| f.name == canonical_func(&name)) => err(
                        col,
                        "rule_type_error",
                        format!(
                            "'{name}' is a function; call it, e.g. `{}`",
                            FUNCS
                                .iter()
                                .find(|f| f.name == canonical_func(&name))
                                .map_or("", |f| f.usage)
                        ),
                    ),
                    _ => {
                        let mut all: Vec<&str> = COLUMNS.to_vec();
                        all.extend(FUNCS.iter().map(|f| f.name));
                        let hint = suggest(&name, &all)
                            .map(|s| format!("did you mean '{s}'? "))
                            .unwrap_or_default();
                        err(
                            col,
                            "rule_type_error",
                            format!(
                                "unknown name '{name}'; {hint}columns: {}",
                                COLUMNS.join(", ")
                            ),
                        )
                    }
                }
            }
            other => err(
                col,
                "rule_parse_error",
                format!(
                    "expected a number, a column, a function call or '(' but found {}",
                    describe_tok(&other)
                ),
            ),
        }
    }

    /// Arguments with their columns; each is a full expression.
    fn args(&mut self) -> Result<Vec<(Typed, usize, Option<f64>)>, At> {
        let open_col = self.bump().1; // '('
        let mut out = Vec::new();
        if *self.peek() == Tok::RParen {
            self.bump();
            return Ok(out);
        }
        loop {
            let col = self.col();
            let start = self.pos;
            let e = self.or()?;
            // A bare literal (possibly negated) is a parameter candidate.
            let literal = match (&e, self.pos - start) {
                (Typed::Num(Num::Const(x)), 1 | 2) => Some(*x),
                _ => None,
            };
            out.push((e, col, literal));
            match self.peek() {
                Tok::Comma => {
                    self.bump();
                }
                Tok::RParen => {
                    self.bump();
                    return Ok(out);
                }
                other => {
                    return err(
                        self.col(),
                        "rule_parse_error",
                        format!(
                            "expected ',' or ')' to close the call opened at column {open_col}, found {}",
                            describe_tok(other)
                        ),
                    );
                }
            }
        }
    }

    fn call(&mut self, name: &str, col: usize) -> Result<Typed, At> {
        let canon = canonical_func(name);
        let Some(sig) = FUNCS.iter().find(|f| f.name == canon) else {
            let names: Vec<&str> = FUNCS.iter().map(|f| f.name).collect();
            let hint = suggest(name, &names)
                .map(|s| format!("did you mean '{s}'? "))
                .unwrap_or_default();
            return err(
                col,
                "rule_type_error",
                format!(
                    "unknown function '{name}'; {hint}functions: {}",
                    names.join(", ")
                ),
            );
        };
        let args = self.args()?;
        let want = match sig.kind {
            FuncKind::Series(_, ps) => 1 + ps.len(),
            FuncKind::Atr => 1,
            FuncKind::MinMax(_) | FuncKind::Cross(_) => 2,
        };
        if args.len() != want {
            return err(
                col,
                "rule_type_error",
                format!(
                    "{name} takes {want} argument{}: {}; got {}",
                    if want == 1 { "" } else { "s" },
                    sig.usage,
                    args.len()
                ),
            );
        }
        let param = |i: usize, p: P, args: &[(Typed, usize, Option<f64>)]| -> Result<f64, At> {
            let (_, acol, lit) = &args[i];
            match (p, lit) {
                (P::Int, Some(x)) if x.fract() == 0.0 && *x >= 1.0 && *x <= MAX_WINDOW => Ok(*x),
                (P::Pos, Some(x)) if *x > 0.0 => Ok(*x),
                (P::Int, _) => err(
                    *acol,
                    "rule_type_error",
                    format!(
                        "{name}: argument {} must be a whole number from 1 to {MAX_WINDOW} written as a literal (e.g. 20); usage: {}",
                        i + 1,
                        sig.usage
                    ),
                ),
                (P::Pos, _) => err(
                    *acol,
                    "rule_type_error",
                    format!(
                        "{name}: argument {} must be a positive number written as a literal (e.g. 2); usage: {}",
                        i + 1,
                        sig.usage
                    ),
                ),
            }
        };
        let mut it = args.clone().into_iter();
        match sig.kind {
            FuncKind::Series(f, ps) => {
                let (first, fcol, _) = it.next().ok_or(At {
                    col,
                    code: "rule_type_error",
                    msg: "missing argument".into(),
                })?;
                let series = self.num(first, fcol, &format!("{name}'s first argument"))?;
                let mut params = Vec::with_capacity(ps.len());
                for (i, p) in ps.iter().enumerate() {
                    params.push(param(i + 1, *p, &args)?);
                }
                if matches!(f, Func::Macd | Func::MacdSignal | Func::MacdHist)
                    && params[0] >= params[1]
                {
                    return err(
                        args[1].1,
                        "rule_type_error",
                        format!(
                            "{name}: fast ({}) must be shorter than slow ({})",
                            params[0], params[1]
                        ),
                    );
                }
                Ok(Typed::Num(Num::Func(f, Box::new(series), params)))
            }
            FuncKind::Atr => Ok(Typed::Num(Num::Atr(param(0, P::Int, &args)? as usize))),
            FuncKind::MinMax(is_max) | FuncKind::Cross(is_max) => {
                let (a, acol, _) = it.next().ok_or(At {
                    col,
                    code: "rule_type_error",
                    msg: "missing argument".into(),
                })?;
                let (b, bcol, _) = it.next().ok_or(At {
                    col,
                    code: "rule_type_error",
                    msg: "missing argument".into(),
                })?;
                let a = self.num(a, acol, &format!("{name}'s first argument"))?;
                let b = self.num(b, bcol, &format!("{name}'s second argument"))?;
                Ok(match sig.kind {
                    FuncKind::Cross(_) => Typed::Cond(Cond::Cross(is_max, a, b)),
                    _ if is_max => Typed::Num(Num::Max(Box::new(a), Box::new(b))),
                    _ => Typed::Num(Num::Min(Box::new(a), Box::new(b))),
                })
            }
        }
    }
}

/// Parses and type-checks one condition. The error is a [`ConfigIssue`]
/// for `field` with a caret diagram.
pub(crate) fn parse_condition(src: &str, field: &str) -> Result<Cond, ConfigIssue> {
    let run = || -> Result<Cond, At> {
        let toks = lex(src)?;
        if toks.len() == 1 {
            return err(
                1,
                "rule_parse_error",
                "the expression is empty; write a condition such as `close > sma(close, 50)`",
            );
        }
        let mut p = Parser { toks, pos: 0 };
        let col = p.col();
        let t = p.or()?;
        if *p.peek() != Tok::End {
            return err(
                p.col(),
                "rule_parse_error",
                format!(
                    "unexpected {} after a complete expression (a missing operator or an extra ')')",
                    describe_tok(p.peek())
                ),
            );
        }
        p.cond(
            t,
            col,
            &format!("'{}'", field.rsplit('.').next().unwrap_or(field)),
        )
    };
    run().map_err(|At { col, code, msg }| {
        let caret = format!("{}^", " ".repeat(col.saturating_sub(1)));
        ConfigIssue::new(
            field,
            code,
            format!("column {col}: {msg}\n    {src}\n    {caret}"),
        )
    })
}

// ---------------------------------------------------------------------------
// Evaluation: whole columns at a time (one allocation per node).

fn column(bars: &Bars, c: Column) -> &[f64] {
    match c {
        Column::Open => &bars.open,
        Column::High => &bars.high,
        Column::Low => &bars.low,
        Column::Close => &bars.close,
        Column::Volume => &bars.volume,
    }
}

impl Num {
    /// Bars of history before a bar that this value there needs (docs
    /// §7.4.1): a function of a function needs both warm-ups.
    pub(crate) fn warmup(&self) -> usize {
        match self {
            Num::Const(_) | Num::Col(_) => 0,
            Num::Neg(a) => a.warmup(),
            Num::Arith(_, a, b) | Num::Min(a, b) | Num::Max(a, b) => a.warmup().max(b.warmup()),
            Num::Atr(p) => indicators::wilder_warmup(*p),
            Num::Func(f, a, params) => {
                let p = |i: usize| params.get(i).copied().unwrap_or(1.0).max(1.0) as usize;
                let own = match f {
                    Func::Sma
                    | Func::Std
                    | Func::Highest
                    | Func::Lowest
                    | Func::BbUpper
                    | Func::BbLower => p(0).saturating_sub(1),
                    Func::Ema => indicators::ema_warmup(p(0)),
                    Func::Rsi => indicators::wilder_warmup(p(0)),
                    Func::Lag | Func::Roc => p(0),
                    Func::Macd => indicators::macd_warmup(p(0), p(1), p(2), true),
                    Func::MacdSignal | Func::MacdHist => {
                        indicators::macd_warmup(p(0), p(1), p(2), false)
                    }
                    Func::Abs => 0,
                };
                a.warmup().saturating_add(own)
            }
        }
    }

    pub(crate) fn eval(&self, bars: &Bars) -> Vec<f64> {
        let n = bars.len();
        let nan = || vec![f64::NAN; n];
        match self {
            Num::Const(x) => vec![*x; n],
            Num::Col(c) => column(bars, *c).to_vec(),
            Num::Neg(a) => a.eval(bars).into_iter().map(|x| -x).collect(),
            Num::Arith(op, a, b) => {
                let (a, b) = (a.eval(bars), b.eval(bars));
                a.iter()
                    .zip(&b)
                    .map(|(&x, &y)| match op {
                        Arith::Add => x + y,
                        Arith::Sub => x - y,
                        Arith::Mul => x * y,
                        Arith::Div => x / y,
                    })
                    .collect()
            }
            Num::Min(a, b) | Num::Max(a, b) => {
                let is_max = matches!(self, Num::Max(..));
                let (a, b) = (a.eval(bars), b.eval(bars));
                a.iter()
                    .zip(&b)
                    .map(|(&x, &y)| {
                        if x.is_nan() || y.is_nan() {
                            f64::NAN
                        } else if is_max {
                            x.max(y)
                        } else {
                            x.min(y)
                        }
                    })
                    .collect()
            }
            Num::Atr(p) => {
                indicators::atr(&bars.high, &bars.low, &bars.close, *p).unwrap_or_else(|_| nan())
            }
            Num::Func(f, a, params) => {
                let x = a.eval(bars);
                let w = params.first().copied().unwrap_or(1.0) as usize;
                let r = match f {
                    Func::Sma => indicators::sma(&x, w).ok(),
                    Func::Ema => indicators::ema(&x, w).ok(),
                    Func::Rsi => indicators::rsi(&x, w).ok(),
                    Func::Std => indicators::rolling_std(&x, w, 1).ok(),
                    Func::Highest => Some(super::strategies::rolling_extreme(&x, w, true)),
                    Func::Lowest => Some(super::strategies::rolling_extreme(&x, w, false)),
                    Func::Lag => Some(
                        (0..n)
                            .map(|i| if i >= w { x[i - w] } else { f64::NAN })
                            .collect(),
                    ),
                    Func::Roc => Some(
                        (0..n)
                            .map(|i| {
                                if i >= w {
                                    x[i] / x[i - w] - 1.0
                                } else {
                                    f64::NAN
                                }
                            })
                            .collect(),
                    ),
                    Func::BbUpper | Func::BbLower => {
                        let k = params.get(1).copied().unwrap_or(2.0);
                        indicators::bollinger(&x, w, k).ok().map(|b| {
                            if *f == Func::BbUpper {
                                b.upper
                            } else {
                                b.lower
                            }
                        })
                    }
                    Func::Macd | Func::MacdSignal | Func::MacdHist => {
                        let p = |i: usize| params.get(i).copied().unwrap_or(1.0) as usize;
                        indicators::macd(&x, p(0), p(1), p(2))
                            .ok()
                            .map(|m| match f {
                                Func::Macd => m.line,
                                Func::MacdSignal => m.signal,
                                _ => m.histogram,
                            })
                    }
                    Func::Abs => Some(x.iter().map(|v| v.abs()).collect()),
                };
                r.unwrap_or_else(nan)
            }
        }
    }
}

impl Cond {
    /// As [`Num::warmup`]; a cross also reads the bar before.
    pub(crate) fn warmup(&self) -> usize {
        match self {
            Cond::Const(_) => 0,
            Cond::Cmp(_, a, b) => a.warmup().max(b.warmup()),
            Cond::And(a, b) | Cond::Or(a, b) => a.warmup().max(b.warmup()),
            Cond::Not(a) => a.warmup(),
            Cond::Cross(_, a, b) => a.warmup().max(b.warmup()).saturating_add(1),
        }
    }

    pub(crate) fn eval(&self, bars: &Bars) -> Vec<bool> {
        let n = bars.len();
        match self {
            Cond::Const(b) => vec![*b; n],
            // NaN compares false, as in pandas.
            Cond::Cmp(op, a, b) => {
                let (a, b) = (a.eval(bars), b.eval(bars));
                a.iter()
                    .zip(&b)
                    .map(|(&x, &y)| match op {
                        Cmp::Lt => x < y,
                        Cmp::Le => x <= y,
                        Cmp::Gt => x > y,
                        Cmp::Ge => x >= y,
                        Cmp::Eq => x == y,
                        Cmp::Ne => !x.is_nan() && !y.is_nan() && x != y,
                    })
                    .collect()
            }
            Cond::And(a, b) => a
                .eval(bars)
                .iter()
                .zip(b.eval(bars))
                .map(|(x, y)| *x && y)
                .collect(),
            Cond::Or(a, b) => a
                .eval(bars)
                .iter()
                .zip(b.eval(bars))
                .map(|(x, y)| *x || y)
                .collect(),
            Cond::Not(a) => a.eval(bars).into_iter().map(|x| !x).collect(),
            Cond::Cross(above, a, b) => {
                let (a, b) = (a.eval(bars), b.eval(bars));
                (0..n)
                    .map(|i| {
                        i > 0
                            && if *above {
                                a[i] > b[i] && a[i - 1] <= b[i - 1]
                            } else {
                                a[i] < b[i] && a[i - 1] >= b[i - 1]
                            }
                    })
                    .collect()
            }
        }
    }
}

/// A parsed rule strategy.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleSet {
    pub entry: Option<Cond>,
    pub exit: Option<Cond>,
    pub short_entry: Option<Cond>,
    pub short_exit: Option<Cond>,
    pub size: f64,
    /// The source texts, for the run card and the strategy hash.
    pub sources: Map<String, Value>,
}

const RULE_KEYS: [&str; 5] = ["entry", "exit", "short_entry", "short_exit", "size"];

impl RuleSet {
    /// Parses `{"entry": ..., "exit": ..., ...}` (or a bare string: the
    /// entry condition). Every field's problems are reported.
    pub fn parse(v: &Value, prefix: &str) -> Result<RuleSet, Vec<ConfigIssue>> {
        let owned;
        let obj = match v {
            Value::String(s) => {
                owned = Map::from_iter([("entry".to_string(), Value::String(s.clone()))]);
                &owned
            }
            Value::Object(m) => m,
            other => {
                return Err(vec![ConfigIssue::new(
                    prefix,
                    "invalid_strategy",
                    format!(
                        "must be an object such as {{\"entry\": \"sma(close, 20) > sma(close, 50)\", \"exit\": \"sma(close, 20) < sma(close, 50)\"}}, got {}",
                        kind(other)
                    ),
                )]);
            }
        };
        let mut r = Reader::new(obj, prefix);
        r.only(&RULE_KEYS);
        let size = r.number("size", 0.0, true, 1.0).unwrap_or(1.0);
        let mut issues = r.issues;
        let mut sources = Map::new();
        let mut field = |key: &str, issues: &mut Vec<ConfigIssue>| -> Option<Cond> {
            match obj.get(key) {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => {
                    sources.insert(key.to_string(), Value::String(s.clone()));
                    match parse_condition(s, &format!("{prefix}.{key}")) {
                        Ok(c) => Some(c),
                        Err(e) => {
                            issues.push(e);
                            None
                        }
                    }
                }
                Some(other) => {
                    issues.push(ConfigIssue::new(
                        format!("{prefix}.{key}"),
                        "invalid_strategy",
                        format!("must be an expression string, got {}", kind(other)),
                    ));
                    None
                }
            }
        };
        let entry = field("entry", &mut issues);
        let exit = field("exit", &mut issues);
        let short_entry = field("short_entry", &mut issues);
        let short_exit = field("short_exit", &mut issues);
        if !obj.contains_key("entry") && !obj.contains_key("short_entry") {
            issues.push(ConfigIssue::new(format!("{prefix}.entry"), "invalid_strategy", "rules need an \"entry\" (or \"short_entry\") condition, e.g. \"sma(close, 20) > sma(close, 50)\""));
        }
        if !issues.is_empty() {
            return Err(issues);
        }
        sources.insert("size".into(), json!(size));
        Ok(RuleSet {
            entry,
            exit,
            short_entry,
            short_exit,
            size,
            sources,
        })
    }

    pub(crate) fn describe(&self) -> String {
        format!("rules {}", Value::Object(self.sources.clone()))
    }

    pub(crate) fn canonical(&self) -> Value {
        json!({"rules": self.sources})
    }

    pub fn allows_short(&self) -> bool {
        self.short_entry.is_some()
    }

    /// The largest warm-up of the four conditions (docs §7.4.1).
    pub(crate) fn warmup(&self) -> usize {
        [&self.entry, &self.exit, &self.short_entry, &self.short_exit]
            .into_iter()
            .flatten()
            .map(Cond::warmup)
            .max()
            .unwrap_or(0)
    }

    /// Target weights on the symbol's own bars (see the module docs).
    pub fn signals(&self, bars: &Bars) -> Vec<f64> {
        let n = bars.len();
        let ev = |c: &Option<Cond>| c.as_ref().map(|c| c.eval(bars));
        let (entry, exit, sentry, sexit) = (
            ev(&self.entry),
            ev(&self.exit),
            ev(&self.short_entry),
            ev(&self.short_exit),
        );
        let at = |v: &Option<Vec<bool>>, i: usize| {
            v.as_ref()
                .is_some_and(|v| v.get(i).copied().unwrap_or(false))
        };
        let mut pos = 0.0;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let (le, se) = (at(&entry, i), at(&sentry, i));
            if pos > 0.0 {
                let leave = if exit.is_some() { at(&exit, i) } else { !le };
                if se {
                    pos = -self.size;
                } else if leave {
                    pos = 0.0;
                }
            } else if pos < 0.0 {
                let leave = if sexit.is_some() { at(&sexit, i) } else { !se };
                if le {
                    pos = self.size;
                } else if leave {
                    pos = 0.0;
                }
            }
            if pos == 0.0 {
                if le {
                    pos = self.size;
                } else if se {
                    pos = -self.size;
                }
            }
            out.push(pos);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue(src: &str) -> ConfigIssue {
        parse_condition(src, "strategy.rules.entry").unwrap_err()
    }

    #[test]
    fn well_formed_rules_parse_to_typed_trees() {
        let c = parse_condition(
            "sma(close, 20) > sma(close, 50) and not (rsi(close, 14) > 70)",
            "e",
        )
        .unwrap();
        assert!(matches!(c, Cond::And(..)));
        let c = parse_condition(
            "crosses_above(ema(close,12), ema(close, 26)) || close < bb_lower(close, 20, 2)",
            "e",
        )
        .unwrap();
        assert!(matches!(c, Cond::Or(..)));
        assert!(parse_condition("roc(close, 20) > -0.05", "e").is_ok());
        assert!(
            parse_condition(
                "macd_hist(close, 12, 26, 9) > 0 && atr(14) / close < 0.05",
                "e"
            )
            .is_ok()
        );
    }

    #[test]
    fn errors_point_at_the_column() {
        let e = issue("sma(close, 20 > 5");
        assert!(
            e.message.starts_with("column 18: expected ',' or ')'"),
            "{}",
            e.message
        );
        assert!(
            e.message
                .contains("\n    sma(close, 20 > 5\n                     ^"),
            "{}",
            e.message
        );
        let e = issue("sma(close, close) > 1");
        assert!(
            e.message
                .starts_with("column 12: sma: argument 2 must be a whole number"),
            "{}",
            e.message
        );
        let e = issue("clsoe > 1");
        assert!(e.message.contains("did you mean 'close'"), "{}", e.message);
        let e = issue("sma(close, 20)");
        assert!(e.message.contains("needs a condition"), "{}", e.message);
        let e = issue("close > 1 and sma(close, 3)");
        assert!(e.message.starts_with("column 15: 'and'"), "{}", e.message);
        let e = issue("close = 1");
        assert!(e.message.contains("write '=='"), "{}", e.message);
        let e = issue("smaa(close, 3) > 1");
        assert!(e.message.contains("did you mean 'sma'"), "{}", e.message);
        let e = issue("1 < close < 2");
        assert!(e.message.contains("do not chain"), "{}", e.message);
        let e = issue("(close > 1");
        assert!(
            e.message
                .contains("expected ')' to close the '(' at column 1"),
            "{}",
            e.message
        );
        assert_eq!(e.code, "rule_parse_error");
    }

    #[test]
    fn state_machine_enters_and_exits() {
        let mut b = Bars::default();
        let d = chrono::NaiveDate::from_ymd_opt(2020, 1, 1).unwrap();
        for (i, c) in [1.0, 2.0, 3.0, 2.0, 1.0, 2.0].iter().enumerate() {
            b.push(d + chrono::Duration::days(i as i64), *c, *c, *c, *c, 1.0);
        }
        let rs = RuleSet::parse(
            &json!({"entry": "close >= 2", "exit": "close < 2", "size": 0.5}),
            "r",
        )
        .unwrap();
        assert_eq!(rs.signals(&b), vec![0.0, 0.5, 0.5, 0.5, 0.0, 0.5]);
        let level = RuleSet::parse(&json!("close > 2"), "r").unwrap();
        assert_eq!(level.signals(&b), vec![0.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
    }
}
