//! The bundled library: the 101 Formulaic Alphas (Kakushadze 2016,
//! appendix A) that daily OHLCV supports, written in the factor language
//! ([`super::expr`]) and shipped in `assets/alpha101.txt`. The asset's
//! header names the 19 left out and why (industry classes, market cap).
//!
//! Format: one alpha per line, `#NNN expression` with NNN the paper's
//! number; a line whose `#` is not followed by a digit is a comment, and
//! blank lines are skipped.

/// The asset, compiled in so the library works offline and from any
/// directory.
const SOURCE: &str = include_str!("../../../assets/alpha101.txt");

/// The paper numbers 1..=101.
const LAST: u16 = 101;

/// One bundled alpha.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alpha {
    /// The paper's number (Alpha#1 → 1).
    pub number: u16,
    /// `alpha001` … `alpha101`: a name that sorts in paper order.
    pub name: String,
    /// The formula in the factor language.
    pub expr: String,
}

/// Why a library text cannot be read (a broken asset, or a user's file in
/// the same format).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AlphaLibraryError {
    #[error(
        "line {line}: `{text}` is not an alpha number; write `#NNN expression` with NNN in 1..=101"
    )]
    Number { line: usize, text: String },
    #[error("line {line}: alpha #{number} has no expression after its number")]
    NoExpression { line: usize, number: u16 },
    #[error("line {line}: alpha #{number} is listed twice (first on line {first})")]
    Duplicate {
        line: usize,
        number: u16,
        first: usize,
    },
    #[error("the library lists no alphas")]
    Empty,
}

/// The bundled alphas in paper order.
pub fn alpha101() -> Result<Vec<Alpha>, AlphaLibraryError> {
    parse_library(SOURCE)
}

/// Reads a library text in the asset's format, keeping its order.
pub fn parse_library(text: &str) -> Result<Vec<Alpha>, AlphaLibraryError> {
    let mut out: Vec<Alpha> = Vec::new();
    let mut lines_of: Vec<usize> = Vec::new();
    for (k, raw) in text.lines().enumerate() {
        let line = k + 1;
        let Some(body) = raw.trim().strip_prefix('#') else {
            if raw.trim().is_empty() {
                continue;
            }
            // An expression without its number would lose the paper's
            // numbering the screen reports by.
            return Err(AlphaLibraryError::Number {
                line,
                text: raw.trim().to_string(),
            });
        };
        if !body.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let digits = body
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(body.len());
        let (num, rest) = body.split_at_checked(digits).unwrap_or((body, ""));
        let number = num
            .parse::<u16>()
            .ok()
            .filter(|n| (1..=LAST).contains(n))
            .ok_or_else(|| AlphaLibraryError::Number {
                line,
                text: format!("#{num}"),
            })?;
        let expr = rest.trim();
        if expr.is_empty() {
            return Err(AlphaLibraryError::NoExpression { line, number });
        }
        if let Some(i) = out.iter().position(|a| a.number == number) {
            return Err(AlphaLibraryError::Duplicate {
                line,
                number,
                first: lines_of.get(i).copied().unwrap_or(0),
            });
        }
        out.push(Alpha {
            number,
            name: format!("alpha{number:03}"),
            expr: expr.to_string(),
        });
        lines_of.push(line);
    }
    if out.is_empty() {
        return Err(AlphaLibraryError::Empty);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::research::factor::expr::parse;

    /// IndNeutralize (18) and market cap (56), as the asset's header says.
    const EXCLUDED: [u16; 19] = [
        48, 56, 58, 59, 63, 67, 69, 70, 76, 79, 80, 82, 87, 89, 90, 91, 93, 97, 100,
    ];

    #[test]
    fn the_library_holds_every_alpha_but_the_excluded_in_paper_order() {
        let lib = alpha101().unwrap();
        let numbers: Vec<u16> = lib.iter().map(|a| a.number).collect();
        let want: Vec<u16> = (1..=LAST).filter(|n| !EXCLUDED.contains(n)).collect();
        assert_eq!(numbers, want);
        assert_eq!(lib.len(), 82);
        assert_eq!(lib[0].name, "alpha001");
        assert_eq!(lib[81].name, "alpha101");
        assert_eq!(lib[81].expr, "((close - open) / ((high - low) + 0.001))");
        // The header lists exactly the excluded numbers.
        for n in EXCLUDED {
            assert!(SOURCE.contains(&format!(" {n}")), "#{n} not explained");
        }
        assert!(
            lib.iter()
                .all(|a| !a.expr.to_lowercase().contains("indneutralize"))
        );
        assert!(lib.iter().all(|a| !a.expr.contains("cap")));
    }

    #[test]
    fn every_bundled_alpha_parses() {
        for a in alpha101().unwrap() {
            if let Err(e) = parse(&a.expr) {
                panic!("{}: {e}", a.name);
            }
        }
    }

    #[test]
    fn a_broken_library_is_told_by_line() {
        assert_eq!(
            parse_library("# c\n#007 close\n\n#007 open\n"),
            Err(AlphaLibraryError::Duplicate {
                line: 4,
                number: 7,
                first: 2
            })
        );
        assert_eq!(
            parse_library("#102 close"),
            Err(AlphaLibraryError::Number {
                line: 1,
                text: "#102".into()
            })
        );
        assert_eq!(
            parse_library("#99999999 close"),
            Err(AlphaLibraryError::Number {
                line: 1,
                text: "#99999999".into()
            })
        );
        assert_eq!(
            parse_library("#3   "),
            Err(AlphaLibraryError::NoExpression { line: 1, number: 3 })
        );
        assert!(matches!(
            parse_library("close - open"),
            Err(AlphaLibraryError::Number { line: 1, .. })
        ));
        assert_eq!(parse_library("# only\n"), Err(AlphaLibraryError::Empty));
        let one = parse_library("#12 rank(close)  \r\n").unwrap();
        assert_eq!(
            one,
            vec![Alpha {
                number: 12,
                name: "alpha012".into(),
                expr: "rank(close)".into()
            }]
        );
    }
}
