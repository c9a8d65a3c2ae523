//! Tokens of a factor expression, each with the byte offset it starts at
//! (the parser turns offsets into a line and a column for its caret).

use super::parse::ParseErrorKind;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    /// A numeric literal; `int` when it is bare digits (no `.` or exponent),
    /// which makes `min(x, 5)` a window rather than an elementwise minimum.
    Num {
        value: f64,
        int: bool,
    },
    /// A name; may contain dots after its first character
    /// (`IndClass.industry`).
    Ident(String),
    LParen,
    RParen,
    Comma,
    Plus,
    Minus,
    Star,
    Slash,
    Caret,
    Lt,
    Le,
    Gt,
    Ge,
    EqEq,
    Ne,
    AndAnd,
    OrOr,
    Question,
    Colon,
    End,
}

impl Tok {
    /// How an error message names the token.
    pub(super) fn describe(&self) -> String {
        match self {
            Tok::Num { value, .. } => format!("the number `{value}`"),
            Tok::Ident(s) => format!("`{s}`"),
            Tok::End => "the end of the expression".into(),
            other => format!("`{}`", other.text()),
        }
    }

    fn text(&self) -> &'static str {
        match self {
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::Comma => ",",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Caret => "^",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::EqEq => "==",
            Tok::Ne => "!=",
            Tok::AndAnd => "&&",
            Tok::OrOr => "||",
            Tok::Question => "?",
            Tok::Colon => ":",
            Tok::Num { .. } | Tok::Ident(_) | Tok::End => "",
        }
    }
}

/// Splits `src` into tokens ending with [`Tok::End`]; an error carries the
/// byte offset it is at.
pub(super) fn tokens(src: &str) -> Result<Vec<(usize, Tok)>, (usize, ParseErrorKind)> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let next = bytes.get(i + 1).copied();
        let (tok, len) = match (b, next) {
            (b'0'..=b'9', _) | (b'.', Some(b'0'..=b'9')) => number(src, i)?,
            (b'a'..=b'z' | b'A'..=b'Z' | b'_', _) => {
                let len = bytes
                    .get(i..)
                    .unwrap_or(&[])
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_' || **c == b'.')
                    .count();
                let name = src.get(i..i + len).unwrap_or("").to_string();
                (Tok::Ident(name), len)
            }
            (b'<', Some(b'=')) => (Tok::Le, 2),
            (b'>', Some(b'=')) => (Tok::Ge, 2),
            (b'=', Some(b'=')) => (Tok::EqEq, 2),
            (b'!', Some(b'=')) => (Tok::Ne, 2),
            (b'&', Some(b'&')) => (Tok::AndAnd, 2),
            (b'|', Some(b'|')) => (Tok::OrOr, 2),
            (b'<', _) => (Tok::Lt, 1),
            (b'>', _) => (Tok::Gt, 1),
            (b'(', _) => (Tok::LParen, 1),
            (b')', _) => (Tok::RParen, 1),
            (b',', _) => (Tok::Comma, 1),
            (b'+', _) => (Tok::Plus, 1),
            (b'-', _) => (Tok::Minus, 1),
            (b'*', _) => (Tok::Star, 1),
            (b'/', _) => (Tok::Slash, 1),
            (b'^', _) => (Tok::Caret, 1),
            (b'?', _) => (Tok::Question, 1),
            (b':', _) => (Tok::Colon, 1),
            _ => {
                let c = src.get(i..).and_then(|s| s.chars().next()).unwrap_or('?');
                return Err((start, ParseErrorKind::UnexpectedChar(c)));
            }
        };
        out.push((start, tok));
        i += len;
    }
    // The end is reported just after the last visible character.
    out.push((src.trim_end().len(), Tok::End));
    Ok(out)
}

/// `digits [. digits] [e [+-] digits]` or `. digits [...]` at `start`.
fn number(src: &str, start: usize) -> Result<(Tok, usize), (usize, ParseErrorKind)> {
    let bytes = src.as_bytes();
    let digits = |from: usize| {
        bytes
            .get(from..)
            .unwrap_or(&[])
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    };
    let mut end = start + digits(start);
    let mut int = true;
    if bytes.get(end) == Some(&b'.') {
        int = false;
        end += 1;
        end += digits(end);
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(end + 1), Some(b'+' | b'-')));
        let exp = digits(end + 1 + sign);
        if exp > 0 {
            int = false;
            end += 1 + sign + exp;
        }
    }
    let text = src.get(start..end).unwrap_or("");
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() => Ok((Tok::Num { value, int }, end - start)),
        _ => Err((start, ParseErrorKind::BadNumber(text.to_string()))),
    }
}
