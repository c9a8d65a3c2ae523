//! A monitor's verdict, parsed strictly from the answer's `## Verdict`
//! section (docs §21.3). Nothing is guessed: an answer that does not keep
//! the contract is a violation that names its line, never a verdict.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// What a monitor's job promises to answer with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contract {
    /// The state vocabulary (`BUY`, `HOLD`, `SELL`…), matched without
    /// regard to case; empty accepts any one-word state.
    pub states: Vec<String>,
    /// The symbols tracked; empty accepts any symbol.
    pub symbols: Vec<String>,
}

/// One call: a symbol, its state and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictRow {
    pub symbol: String,
    pub state: String,
    pub reason: String,
}

/// Why a verdict section breaks the contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Violation {
    #[error("not a row `- SYMBOL: STATE - reason`")]
    MalformedRow,
    #[error("the row gives no reason after its state")]
    NoReason,
    #[error("`{state}` is not a state of the contract ({allowed})")]
    UnknownState { state: String, allowed: String },
    #[error("`{symbol}` is not a tracked symbol ({tracked})")]
    UntrackedSymbol { symbol: String, tracked: String },
    #[error("`{symbol}` is called twice")]
    DuplicateSymbol { symbol: String },
    #[error("\"no calls\" beside rows that make calls")]
    NoCallsWithRows,
}

/// The outcome of parsing an answer against a contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "detail", rename_all = "snake_case")]
pub enum Verdict {
    /// The answer has no `## Verdict` section.
    NoVerdict,
    /// The section breaks the contract at `line` (1-based, in the answer).
    ContractViolation { line: usize, why: Violation },
    /// The section says explicitly that nothing is called: it is empty or
    /// reads "no calls".
    NoCalls,
    /// The calls, in the answer's order.
    Calls(Vec<VerdictRow>),
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::NoVerdict => f.write_str("no verdict"),
            Verdict::ContractViolation { line, why } => {
                write!(f, "contract violation at line {line}: {why}")
            }
            Verdict::NoCalls => f.write_str("no calls"),
            Verdict::Calls(rows) => {
                let calls: Vec<String> = rows
                    .iter()
                    .map(|r| format!("{} {}", r.symbol, r.state))
                    .collect();
                f.write_str(&calls.join(", "))
            }
        }
    }
}

/// Parses the last `## Verdict` section of `answer` against `contract`.
pub fn parse(answer: &str, contract: &Contract) -> Verdict {
    let Some((first_line, body)) = verdict_section(answer) else {
        return Verdict::NoVerdict;
    };
    let mut rows: Vec<VerdictRow> = Vec::new();
    let mut no_calls_line = None;
    for (i, line) in body.iter().enumerate() {
        let number = first_line + i;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if is_no_calls(text) {
            no_calls_line = Some(number);
            continue;
        }
        let row = match parse_row(text, contract) {
            Ok(row) => row,
            Err(why) => return Verdict::ContractViolation { line: number, why },
        };
        if rows.iter().any(|r| r.symbol == row.symbol) {
            let why = Violation::DuplicateSymbol { symbol: row.symbol };
            return Verdict::ContractViolation { line: number, why };
        }
        rows.push(row);
    }
    match no_calls_line {
        Some(line) if !rows.is_empty() => Verdict::ContractViolation {
            line,
            why: Violation::NoCallsWithRows,
        },
        _ if rows.is_empty() => Verdict::NoCalls,
        _ => Verdict::Calls(rows),
    }
}

/// The symbols whose state changed from `prev` to `next`: a new call, a
/// different state, or a call withdrawn. A `prev` that is no verdict or a
/// violation knows no states, so every call of `next` counts (the first
/// verdict: all); a `next` that is either changes nothing.
pub fn changed(prev: &Verdict, next: &Verdict) -> Vec<String> {
    let Some(after) = states(next) else {
        return Vec::new();
    };
    let Some(before) = states(prev) else {
        return after.into_keys().collect();
    };
    let mut symbols: Vec<String> = after
        .iter()
        .filter(|(symbol, state)| before.get(*symbol) != Some(*state))
        .map(|(symbol, _)| symbol.clone())
        .chain(
            before
                .keys()
                .filter(|symbol| !after.contains_key(*symbol))
                .cloned(),
        )
        .collect();
    symbols.sort();
    symbols
}

fn states(verdict: &Verdict) -> Option<BTreeMap<String, String>> {
    match verdict {
        Verdict::Calls(rows) => Some(
            rows.iter()
                .map(|r| (r.symbol.clone(), r.state.clone()))
                .collect(),
        ),
        Verdict::NoCalls => Some(BTreeMap::new()),
        Verdict::NoVerdict | Verdict::ContractViolation { .. } => None,
    }
}

/// The last `## Verdict` section outside code fences: the 1-based number of
/// its first body line and the body, which ends at the next heading of
/// level one or two.
fn verdict_section(answer: &str) -> Option<(usize, Vec<&str>)> {
    let lines: Vec<&str> = answer.lines().collect();
    let mut in_fence = false;
    let mut start = None;
    let mut end = lines.len();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        match heading_level(trimmed) {
            Some(2) if is_verdict_heading(trimmed) => {
                start = Some(i + 1);
                end = lines.len();
            }
            Some(1 | 2) if start.is_some() && end == lines.len() => end = i,
            _ => {}
        }
    }
    let start = start?;
    let body = lines.get(start..end).unwrap_or_default().to_vec();
    Some((start + 1, body))
}

fn heading_level(line: &str) -> Option<usize> {
    let hashes = line.bytes().take_while(|b| *b == b'#').count();
    let rest = line.get(hashes..)?;
    ((1..=6).contains(&hashes) && (rest.is_empty() || rest.starts_with(' '))).then_some(hashes)
}

fn is_verdict_heading(line: &str) -> bool {
    let title = line
        .trim_start_matches('#')
        .trim()
        .trim_end_matches('#')
        .trim();
    title.eq_ignore_ascii_case("verdict")
}

fn is_no_calls(text: &str) -> bool {
    let text = text.strip_prefix("- ").unwrap_or(text).trim();
    let text = text.trim_end_matches('.').trim();
    text.eq_ignore_ascii_case("no calls")
}

/// `- SYMBOL: STATE - reason` (the dash before the reason may be an en or
/// em dash, as models write them).
fn parse_row(text: &str, contract: &Contract) -> Result<VerdictRow, Violation> {
    let rest = text.strip_prefix("- ").ok_or(Violation::MalformedRow)?;
    let (symbol, rest) = rest.split_once(':').ok_or(Violation::MalformedRow)?;
    let symbol = symbol.trim();
    if !is_symbol(symbol) {
        return Err(Violation::MalformedRow);
    }
    let rest = rest.trim_start();
    let state_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let (state, rest) = rest.split_at(state_end);
    if state.is_empty()
        || !state
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
    {
        return Err(Violation::MalformedRow);
    }
    let rest = rest.trim_start();
    let reason = ["- ", "– ", "— "]
        .iter()
        .find_map(|dash| rest.strip_prefix(dash))
        .or_else(|| (rest.is_empty() || rest == "-" || rest == "–" || rest == "—").then_some(""))
        .ok_or(Violation::MalformedRow)?
        .trim();
    if reason.is_empty() {
        return Err(Violation::NoReason);
    }
    let state = canonical(state, &contract.states).ok_or_else(|| Violation::UnknownState {
        state: state.to_string(),
        allowed: contract.states.join(", "),
    })?;
    let symbol =
        canonical(symbol, &contract.symbols).ok_or_else(|| Violation::UntrackedSymbol {
            symbol: symbol.to_string(),
            tracked: contract.symbols.join(", "),
        })?;
    Ok(VerdictRow {
        symbol,
        state,
        reason: reason.to_string(),
    })
}

/// Tickers as markets write them: `AAPL`, `BRK.B`, `^GSPC`, `EURUSD=X`,
/// `600519.SS`, `BTC-USD`.
fn is_symbol(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 32
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '^' | '=' | '_' | '/'))
}

/// The vocabulary's own spelling of `word` (an empty vocabulary takes the
/// word as written).
fn canonical(word: &str, vocabulary: &[String]) -> Option<String> {
    if vocabulary.is_empty() {
        return Some(word.to_string());
    }
    vocabulary
        .iter()
        .find(|v| v.eq_ignore_ascii_case(word))
        .cloned()
}
