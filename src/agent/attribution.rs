//! Whose figure it is (docs §1.6.1): a figure a tool computed for one
//! symbol, given in the answer to another symbol, is not grounded.
//!
//! Measured with the 1.5B model, twice: asked for the most volatile of
//! AAPL, MSFT and IBM and then a backtest of it, it ranked right (MSFT),
//! backtested AAPL (the `symbol` it had guessed in its first call), and
//! answered with AAPL's Sharpe and drawdown under MSFT's name. Every
//! figure was a tool's, so the figure check passed it as `success`.
//!
//! The check is conservative: a figure is checked only when every result
//! that shows it came from a call about one symbol or shows it in a part
//! about one symbol (a ranked table's row, a weight keyed by its symbol),
//! and the answer names someone for it: in a sentence with
//! "respectively", the symbol in the figure's place; else the symbols its
//! sentence names. It is misattributed when none of those is the symbol
//! the figure came from.

use serde_json::Value;

use super::figures::{KeyFigure, key_figures};

/// The arguments that name a call's symbols.
const SYMBOL_KEYS: [&str; 6] = ["symbol", "symbols", "code", "codes", "ticker", "tickers"];

/// The symbols a call's arguments name, upper-cased, each once.
pub fn call_symbols(args: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let Some(obj) = args.as_object() else {
        return out;
    };
    let mut add = |v: &Value| {
        if let Some(s) = v.as_str().map(|s| s.trim().to_ascii_uppercase())
            && is_symbol(&s)
            && !out.contains(&s)
        {
            out.push(s);
        }
    };
    for key in SYMBOL_KEYS {
        match obj.get(key) {
            Some(Value::Array(items)) => items.iter().for_each(&mut add),
            Some(v) => add(v),
            None => {}
        }
    }
    out
}

/// A ticker as the desk writes them: `AAPL`, `BRK.B`, `600519.SH`.
fn is_symbol(s: &str) -> bool {
    (1..=12).contains(&s.len())
        && s.chars().any(|c| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || matches!(c, '.' | '-'))
}

/// A tool result and the symbols its call named.
pub struct Sourced<'a> {
    pub symbols: &'a [String],
    pub text: &'a str,
}

/// A figure the answer gives to a symbol other than the one it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Misattributed {
    /// As the answer writes it.
    pub figure: String,
    /// Whom the answer gives it to.
    pub named: Vec<String>,
    /// The symbol the tool computed it for.
    pub from: String,
}

impl Misattributed {
    pub fn describe(&self) -> String {
        format!(
            "{} is {}'s (by the tool result it comes from), but the answer gives it to {}",
            self.figure,
            self.from,
            self.named.join(" and ")
        )
    }
}

/// The answer's key figures that came from one symbol's results and are
/// given to another symbol. `results` are the run's tool results with
/// their calls' symbols; `others` are the other sources (the user's words,
/// the calls' arguments): a figure they show is not checked.
pub fn misattributed(answer: &str, results: &[Sourced<'_>], others: &[&str]) -> Vec<Misattributed> {
    let parts: Vec<Vec<(String, String)>> = results
        .iter()
        .map(|r| match r.symbols {
            [_] => Vec::new(),
            several => parts_by_symbol(r.text, several),
        })
        .collect();
    let known: Vec<&str> = {
        let mut k: Vec<&str> = results
            .iter()
            .flat_map(|r| r.symbols.iter().map(String::as_str))
            .chain(parts.iter().flatten().map(|(s, _)| s.as_str()))
            .collect();
        k.sort_unstable();
        k.dedup();
        k
    };
    if known.len() < 2 {
        return Vec::new();
    }
    let mentions = mentions(answer, &known);
    let figures = key_figures(answer);
    let places: Vec<usize> = figures.iter().map(|f| f.at()).collect();
    let mut out: Vec<Misattributed> = Vec::new();
    for f in &figures {
        if others.iter().any(|o| f.shown_in(o)) {
            continue;
        }
        let Some(from) = came_from(f, results, &parts) else {
            continue;
        };
        let named = named_for(answer, f.at(), &places, &mentions);
        if named.is_empty() || named.iter().any(|n| from.contains(n)) {
            continue;
        }
        if out.iter().any(|m| m.figure == f.text()) {
            continue;
        }
        out.push(Misattributed {
            figure: f.text().to_string(),
            named: named.iter().map(|n| n.to_string()).collect(),
            from: from.join(" or "),
        });
    }
    out
}

/// The symbols a figure came from: each result showing it is about one
/// symbol, or shows it in a part about one symbol (a ranked table's row, a
/// weight keyed by its symbol). `None` when no result shows it, or one
/// shows it only where no symbol is named.
fn came_from<'a>(
    f: &KeyFigure,
    results: &'a [Sourced<'_>],
    parts: &'a [Vec<(String, String)>],
) -> Option<Vec<&'a str>> {
    let mut from: Vec<&str> = Vec::new();
    for (r, parts) in results.iter().zip(parts) {
        if !f.shown_in(r.text) {
            continue;
        }
        let symbols: Vec<&str> = match r.symbols {
            [one] => vec![one.as_str()],
            _ => parts
                .iter()
                .filter(|(_, text)| f.shown_in(text))
                .map(|(s, _)| s.as_str())
                .collect(),
        };
        if symbols.is_empty() {
            return None;
        }
        for s in symbols {
            if !from.contains(&s) {
                from.push(s);
            }
        }
    }
    (!from.is_empty()).then_some(from)
}

/// The parts of a result about one symbol each: every JSON object with a
/// `symbol` (a ranked table's rows), and every value keyed by one of the
/// call's `symbols` (a portfolio's weights), as text.
fn parts_by_symbol(text: &str, symbols: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        collect_parts(&v, symbols, &mut out);
    }
    out
}

fn collect_parts(v: &Value, symbols: &[String], out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(o) => {
            if let Some(sym) = o
                .get("symbol")
                .and_then(Value::as_str)
                .map(str::to_ascii_uppercase)
                .filter(|s| is_symbol(s))
            {
                out.push((sym, v.to_string()));
                return;
            }
            for (key, value) in o {
                let upper = key.to_ascii_uppercase();
                if symbols.contains(&upper) {
                    out.push((upper, value.to_string()));
                } else {
                    collect_parts(value, symbols, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_parts(i, symbols, out)),
        _ => {}
    }
}

/// Where each known symbol is named in the answer, as a whole word
/// (`MSFT's` names MSFT), in order.
fn mentions<'a>(answer: &str, known: &[&'a str]) -> Vec<(usize, &'a str)> {
    let mut out = Vec::new();
    for sym in known {
        let mut from = 0;
        while let Some(i) = answer.get(from..).and_then(|rest| rest.find(sym)) {
            let at = from + i;
            let end = at + sym.len();
            let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
            let before = answer[..at].chars().next_back().is_some_and(word);
            let after = answer[end..].chars().next().is_some_and(word);
            if !before && !after {
                out.push((at, *sym));
            }
            from = end;
        }
    }
    out.sort_unstable();
    out
}

/// Whom the answer gives the figure at `at` to: in a sentence with
/// "respectively", the symbol named in the same place among the
/// sentence's symbols as the figure among its figures (when the counts
/// agree); else the symbols named in its sentence. Not the last one named
/// before it: a report's notes ("weights from 0.00 % to 100.00 %" after
/// "KO: embedded") are about no symbol.
fn named_for<'a>(
    answer: &str,
    at: usize,
    figures: &[usize],
    mentions: &[(usize, &'a str)],
) -> Vec<&'a str> {
    let (start, end) = sentence(answer, at);
    let mut inside: Vec<&str> = Vec::new();
    for (i, s) in mentions {
        if (start..end).contains(i) && !inside.contains(s) {
            inside.push(s);
        }
    }
    let respectively = answer
        .get(start..end)
        .is_some_and(|t| t.to_ascii_lowercase().contains("respectively"));
    if respectively {
        let here: Vec<usize> = figures
            .iter()
            .copied()
            .filter(|i| (start..end).contains(i))
            .collect();
        if here.len() == inside.len()
            && let Some(k) = here.iter().position(|i| *i == at)
            && let Some(s) = inside.get(k)
        {
            return vec![*s];
        }
    }
    inside
}

/// The byte range of the sentence holding `at`: it ends at `.`, `!` or `?`
/// followed by a space or the end, at `;`, or at a line break (a decimal
/// point is no end).
fn sentence(answer: &str, at: usize) -> (usize, usize) {
    let bytes = answer.as_bytes();
    let ends_at = |i: usize| -> bool {
        match bytes.get(i) {
            Some(b'\n' | b';') => true,
            Some(b'.' | b'!' | b'?') => bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace()),
            _ => false,
        }
    };
    let start = (0..at.min(bytes.len()))
        .rev()
        .find(|i| ends_at(*i))
        .map_or(0, |i| i + 1);
    let end = (at..bytes.len())
        .find(|i| ends_at(*i))
        .unwrap_or(bytes.len());
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn syms(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_calls_symbols_come_from_its_symbol_arguments() {
        assert_eq!(
            call_symbols(&json!({"symbol": "aapl", "symbols": ["AAPL", "MSFT", "IBM"]})),
            syms(&["AAPL", "MSFT", "IBM"])
        );
        assert_eq!(
            call_symbols(&json!({"codes": ["SPY"], "window": 20})),
            syms(&["SPY"])
        );
        assert!(call_symbols(&json!({"path": "a.csv", "symbol": "not a ticker"})).is_empty());
        assert!(call_symbols(&json!("AAPL")).is_empty());
    }

    /// The measured case: MSFT ranked first, AAPL backtested, AAPL's
    /// figures given to MSFT.
    fn measured() -> (Vec<String>, Vec<String>, &'static str, &'static str) {
        (
            syms(&["AAPL", "MSFT", "IBM"]),
            syms(&["AAPL"]),
            r#"{"ranked":[{"symbol":"MSFT","volatility":0.4131},{"symbol":"IBM","volatility":0.3302},{"symbol":"AAPL","volatility":0.2915}]}"#,
            r#"{"symbol":"AAPL","metrics":{"sharpe":0.5123,"max_drawdown":-0.4471,"total_return":0.8312}}"#,
        )
    }

    fn ranked_then_backtest<'a>(
        three: &'a [String],
        aapl: &'a [String],
        ranked: &'a str,
        backtest: &'a str,
    ) -> [Sourced<'a>; 2] {
        [
            Sourced {
                symbols: three,
                text: ranked,
            },
            Sourced {
                symbols: aapl,
                text: backtest,
            },
        ]
    }

    #[test]
    fn a_backtests_figures_given_to_another_symbol_are_misattributed() {
        let (three, aapl, ranked, backtest) = measured();
        let results = ranked_then_backtest(&three, &aapl, ranked, backtest);
        let answer = "MSFT was the most volatile (41.31%). The SMA backtest on MSFT has a Sharpe of 0.51 and a maximum drawdown of -44.71%.";
        let m = misattributed(answer, &results, &["Which was most volatile?"]);
        let figures: Vec<&str> = m.iter().map(|m| m.figure.as_str()).collect();
        assert_eq!(figures, ["0.51", "-44.71%"], "{m:?}");
        assert_eq!(m[0].named, ["MSFT"]);
        assert_eq!(m[0].from, "AAPL");
        assert!(m[0].describe().contains("AAPL's"));
        // A sentence that names no symbol gives its figures to none.
        let answer = "MSFT was the most volatile. Backtesting it gives a Sharpe of 0.51.";
        assert_eq!(misattributed(answer, &results, &[]), []);
    }

    #[test]
    fn the_right_symbol_or_a_table_of_several_passes() {
        let (three, aapl, ranked, backtest) = measured();
        let results = ranked_then_backtest(&three, &aapl, ranked, backtest);
        for answer in [
            "MSFT was the most volatile (41.31%), ahead of IBM (33.02%) and AAPL (29.15%).",
            "The backtest on AAPL: Sharpe 0.51, maximum drawdown -44.71%.",
            "AAPL's backtest (not MSFT's) has a Sharpe of 0.51.",
            "The Sharpe is 0.51.",
        ] {
            assert_eq!(misattributed(answer, &results, &[]), [], "{answer}");
        }
        // The user's own number is theirs to give to anyone.
        let answer = "MSFT: Sharpe 0.51.";
        assert_eq!(
            misattributed(answer, &results, &["is a Sharpe of 0.51 good?"]),
            []
        );
    }

    /// Measured: a ranked table of two returns, MSFT's first, read in the
    /// question's order, "respectively".
    #[test]
    fn a_ranked_rows_figure_paired_with_another_symbol_is_misattributed() {
        let two = syms(&["AAPL", "MSFT"]);
        let table = r#"{"highest":"MSFT","ranked":[{"rank":1,"symbol":"MSFT","value":-0.4480446927374302},{"rank":2,"symbol":"AAPL","value":-0.5619013266001363}]}"#;
        let results = [Sourced {
            symbols: &two,
            text: table,
        }];
        let swapped = "The total returns of AAPL and MSFT over 2008 were -0.4480446927374302 and -0.5619013266001363, respectively.";
        let m = misattributed(swapped, &results, &[]);
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(
            (m[0].named.as_slice(), m[0].from.as_str()),
            (&["AAPL".to_string()][..], "MSFT")
        );
        let right =
            "The total returns of AAPL and MSFT over 2008 were -56.19% and -44.80%, respectively.";
        assert_eq!(misattributed(right, &results, &[]), []);
        assert_eq!(
            misattributed("AAPL fell 56.19% and MSFT 44.80%.", &results, &[]),
            []
        );
        // A portfolio's weights are keyed by symbol.
        let three = syms(&["AAPL", "MSFT", "IBM"]);
        let weights = r#"{"weights":{"AAPL":0.1268,"MSFT":0.2732,"IBM":0.5999}}"#;
        let results = [Sourced {
            symbols: &three,
            text: weights,
        }];
        let wrong =
            "The weights of AAPL, MSFT and IBM are 0.1268, 0.5999 and 0.2732, respectively.";
        let m = misattributed(wrong, &results, &[]);
        let figures: Vec<&str> = m.iter().map(|m| m.figure.as_str()).collect();
        assert_eq!(figures, ["0.5999", "0.2732"], "{m:?}");
    }

    #[test]
    fn one_symbol_in_the_whole_run_is_never_checked() {
        let aapl = syms(&["AAPL"]);
        let results = [Sourced {
            symbols: &aapl,
            text: r#"{"sharpe":0.5123}"#,
        }];
        assert_eq!(misattributed("Apple (AAPL) Sharpe 0.51", &results, &[]), []);
    }

    #[test]
    fn a_sentence_ends_at_a_stop_not_at_a_decimal_point() {
        let t = "AAPL is 0.51. MSFT is 0.33; IBM\nis 0.2";
        assert_eq!(sentence(t, t.find("0.51").unwrap_or(0)), (0, 12));
        let at = t.find("0.33").unwrap_or(0);
        assert_eq!(&t[sentence(t, at).0..sentence(t, at).1], " MSFT is 0.33");
    }
}
