//! `technical_indicator` over several symbols (docs §2.12.2): the same
//! indicator for each, answered as one table ranked by the value on the
//! end date, so that "which was most volatile" needs no arithmetic.

use serde_json::Value;

use crate::model::contract::{IndicatorOutput, RankedIndicatorOutput, RankedRow, SymbolError};
use crate::research::data::Provenance;
use crate::tools::ToolError;

/// Most symbols one call ranks.
pub(super) const MAX_SYMBOLS: usize = 50;

/// The tickers a call names: `symbol` (one ticker, else refused as
/// before) first, then `symbols` (a list, or one string separated by
/// commas, semicolons or spaces), each once in the order given.
pub(super) fn symbol_list(
    symbol: &str,
    symbols: Option<&Value>,
    one_ticker: impl Fn(&str) -> Result<(), ToolError>,
) -> Result<Vec<String>, ToolError> {
    let mut out: Vec<String> = Vec::new();
    // A set, not a scan of `out`: a list may repeat one ticker thousands
    // of times.
    let mut seen = std::collections::HashSet::new();
    let mut add = |s: &str| {
        let s = s.trim();
        if !s.is_empty() && seen.insert(s.to_ascii_uppercase()) {
            out.push(s.to_string());
        }
    };
    if !symbol.trim().is_empty() {
        one_ticker(symbol)?;
        add(symbol);
    }
    let texts: Vec<&str> = match symbols {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str().ok_or_else(|| {
                    ToolError::InvalidArguments(format!(
                        "`symbols` holds tickers as strings, e.g. [\"AAPL\", \"MSFT\"]; got {v}"
                    ))
                })
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(ToolError::InvalidArguments(format!(
                "`symbols` is a list of tickers, e.g. [\"AAPL\", \"MSFT\"]; got {other}"
            )));
        }
    };
    // Bounded before it is read: a list of thousands, or a string of
    // megabytes, is refused as it stands.
    let chars: usize = texts.iter().map(|t| t.len()).sum();
    if texts.len() > MAX_SYMBOLS || chars > MAX_SYMBOLS * MAX_TICKER_CHARS {
        return Err(too_many(format!(
            "{} entries of {chars} characters",
            texts.len()
        )));
    }
    for t in texts {
        t.split([',', ';'])
            .flat_map(str::split_whitespace)
            .for_each(&mut add);
    }
    if out.len() > MAX_SYMBOLS {
        return Err(too_many(format!("{} symbols", out.len())));
    }
    Ok(out)
}

/// Characters a ticker (or a workspace file name) is allowed on average.
const MAX_TICKER_CHARS: usize = 64;

fn too_many(given: String) -> ToolError {
    ToolError::failed(
        "too_many_symbols",
        format!(
            "`symbols` holds {given}; one call ranks at most {MAX_SYMBOLS} symbols: split them over several calls"
        ),
    )
}

/// The ranked table of the symbols' answers, highest value first (ties
/// and symbols without a value last, by name); the failures listed.
pub(super) fn ranked(
    indicator: &str,
    params: Value,
    answers: Vec<(String, Result<IndicatorOutput<Provenance>, ToolError>)>,
) -> Result<RankedIndicatorOutput, ToolError> {
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    let mut series = String::new();
    for (symbol, answer) in answers {
        match answer {
            Ok(out) => {
                let key = out.columns.get(1).cloned().unwrap_or_default();
                if series.is_empty() {
                    series.clone_from(&key);
                }
                let mut r = row(&out, &key);
                if over_the_range(indicator, &out) {
                    r.value = Some(r.total_return);
                }
                rows.push(r);
            }
            Err(e) => errors.push(SymbolError {
                symbol,
                code: e.code().to_string(),
                message: e.to_string(),
            }),
        }
    }
    if rows.is_empty() {
        let why: Vec<String> = errors
            .iter()
            .map(|e| format!("{}: {}", e.symbol, e.message))
            .collect();
        return Err(ToolError::failed(
            "no_symbol_answered",
            format!("none of the symbols has an answer: {}", why.join("; ")),
        ));
    }
    rows.sort_by(|a, b| {
        let key = |r: &RankedRow| r.value.unwrap_or(f64::NEG_INFINITY);
        key(b)
            .total_cmp(&key(a))
            .then_with(|| a.symbol.cmp(&b.symbol))
    });
    for (i, r) in rows.iter_mut().enumerate() {
        r.rank = i + 1;
    }
    Ok(RankedIndicatorOutput {
        highest: rows.first().map(|r| r.symbol.clone()).unwrap_or_default(),
        ranked_by: ranked_by(indicator, &series),
        ranked: rows,
        errors,
        status: "ok".into(),
        indicator: indicator.to_string(),
        params,
        series,
    })
}

/// Whether the table ranks `returns` by each range's total return: the
/// last day's return of several symbols over a year is rarely what was
/// asked (measured: "which of XLK, XLF and XLE had the highest total
/// return in 2009" ranked by 31 December's move, and the 1.5B model gave
/// that). A one-day range keeps that day's return.
fn over_the_range(indicator: &str, out: &IndicatorOutput<Provenance>) -> bool {
    indicator == "returns" && out.period.as_ref().is_some_and(|p| p.bars > 1)
}

/// The ordering rule in words; a drawdown is negative, so "highest" is
/// said to mean the shallowest.
fn ranked_by(indicator: &str, series: &str) -> String {
    let base =
        format!("{series} on each symbol's last date in the range (`date`), highest value first");
    if indicator == "returns" {
        format!(
            "{base}; over a range of more than one day `value` is the range's total return (first close to last), not the last day's return"
        )
    } else if indicator == "drawdown" {
        format!(
            "{base}: drawdowns are negative, so the shallowest first and the deepest last; `max_drawdown` is each range's deepest"
        )
    } else {
        base
    }
}

fn row(out: &IndicatorOutput<Provenance>, key: &str) -> RankedRow {
    let period = out.period.as_ref();
    RankedRow {
        rank: 0,
        symbol: out.symbol.clone(),
        date: out
            .latest
            .get("date")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        value: out.latest.get(key).and_then(Value::as_f64),
        total_return: period.map_or(0.0, |p| p.total_return),
        annualized_volatility: period.and_then(|p| p.annualized_volatility),
        max_drawdown: period
            .and_then(|p| p.max_drawdown_window.as_ref())
            .map_or(0.0, |d| d.depth),
        source: out.provenance.source.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn any(_: &str) -> Result<(), ToolError> {
        Ok(())
    }

    #[test]
    fn symbols_are_read_from_a_list_or_a_string_once_each() {
        let l = symbol_list("", Some(&json!(["AAPL", "msft", "IBM,AAPL"])), any).unwrap();
        assert_eq!(l, ["AAPL", "msft", "IBM"]);
        let s = symbol_list("SPY", Some(&json!("AAPL, MSFT;IBM spy")), any).unwrap();
        assert_eq!(s, ["SPY", "AAPL", "MSFT", "IBM"]);
        assert_eq!(symbol_list("AAPL", None, any).unwrap(), ["AAPL"]);
        let e = symbol_list("", Some(&json!([1, 2])), any).unwrap_err();
        assert_eq!(e.code(), "invalid_arguments");
        let many: Vec<String> = (0..=MAX_SYMBOLS).map(|i| format!("S{i}")).collect();
        let e = symbol_list("", Some(&json!(many)), any).unwrap_err();
        assert_eq!(e.code(), "too_many_symbols");
        assert!(e.to_string().contains("at most 50"), "{e}");
    }
}
