//! `tearsheet` (docs §20.1): "tear sheet of SPY 2005-2017", "tearsheet
//! for the last backtest", "tear sheet of run 20261206_230843_c91573";
//! the answer is the key metrics against the benchmark, the worst
//! drawdowns, the years and the file's path.

use std::fmt::Write as _;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{PlannedCall, date_range, typed};
use crate::model::names as tool;
use crate::model::tearsheet::{TearsheetArgs, TearsheetOutput};

static RUN_ID: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\b(\d{8}_\d{6}_[0-9a-f]{4,})\b").ok());

/// Words that ask for a tear sheet.
fn asks(lower: &str) -> bool {
    [
        "tear sheet",
        "tearsheet",
        "tear-sheet",
        "quantstats report",
        "performance report",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// The call: a run (its id, or the last backtest) or a held book.
pub(super) fn read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    if !asks(&lower) {
        return None;
    }
    let run_id = RUN_ID
        .as_ref()
        .and_then(|re| re.captures(text))
        .and_then(|c| c.get(1))
        .map(|m| m.as_str().to_string());
    let of_run = [
        "backtest",
        "back-test",
        "last run",
        "latest run",
        "this run",
        "the run",
    ]
    .iter()
    .any(|w| lower.contains(w));
    let syms = super::quant::tickers(text);
    let args = if run_id.is_some() || (of_run && syms.is_empty()) {
        TearsheetArgs {
            run: Some(run_id.unwrap_or_else(|| "last".into())),
            ..TearsheetArgs::default()
        }
    } else if syms.is_empty() {
        TearsheetArgs {
            run: Some("last".into()),
            ..TearsheetArgs::default()
        }
    } else {
        let (start, end) = date_range(text);
        let benchmark = benchmark(text, &syms);
        let held: Vec<String> = syms
            .iter()
            .filter(|s| Some(*s) != benchmark.as_ref())
            .cloned()
            .collect();
        let held = if held.is_empty() { syms.clone() } else { held };
        TearsheetArgs {
            weights: super::quant::stated_weights(text, &held),
            symbols: Some(held),
            start,
            end,
            benchmark,
            ..TearsheetArgs::default()
        }
    };
    Some(PlannedCall::typed(tool::TEARSHEET, args))
}

/// "against QQQ", "vs QQQ", "benchmark QQQ": the ticker after the word.
fn benchmark(text: &str, syms: &[String]) -> Option<String> {
    let lower = text.to_lowercase();
    for w in ["against ", "versus ", "vs ", "vs. ", "benchmark "] {
        if let Some(i) = lower.find(w) {
            let rest = text.get(i + w.len()..).unwrap_or("");
            let next = rest.split_whitespace().next().unwrap_or("");
            let t = next
                .trim_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_ascii_uppercase();
            if syms.contains(&t) {
                return Some(t);
            }
        }
    }
    None
}

fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "—".into(), |v| format!("{:.2} %", v * 100.0))
}

fn cell(unit: &str, x: Option<f64>) -> String {
    match unit {
        "percent" => pct(x),
        "count" => x.map_or_else(|| "—".into(), |v| format!("{v:.0}")),
        _ => x.map_or_else(|| "—".into(), |v| format!("{v:.2}")),
    }
}

/// The answer from `tearsheet`'s result.
pub(super) fn answer(_request: &str, v: &Value) -> Option<String> {
    let o: TearsheetOutput = typed(v)?;
    let mut out = format!("## Tear sheet: {}\n\n{} to {}", o.title, o.start, o.end);
    let bench = o.benchmark.clone();
    if let Some(b) = &bench {
        let _ = write!(out, ", against {b}");
    }
    out.push_str(".\n\n");
    let _ = writeln!(
        out,
        "| metric | strategy |{}\n|---|---|{}",
        if bench.is_some() { " benchmark |" } else { "" },
        if bench.is_some() { "---|" } else { "" }
    );
    for m in &o.metrics {
        let b = if bench.is_some() {
            format!(" {} |", cell(&m.unit, m.benchmark))
        } else {
            String::new()
        };
        let _ = writeln!(out, "| {} | {} |{b}", m.name, cell(&m.unit, m.value));
    }
    if !o.drawdowns.is_empty() {
        out.push_str("\nWorst drawdowns:\n\n| start | trough | recovered | depth | days |\n|---|---|---|---|---|\n");
        for d in &o.drawdowns {
            let rec = d.recovery.clone().unwrap_or_else(|| "not recovered".into());
            let _ = writeln!(
                out,
                "| {} | {} | {rec} | {} | {} |",
                d.start,
                d.trough,
                pct(Some(d.depth)),
                d.days
            );
        }
    }
    if let (Some(b), Some(w)) = (&o.best_month, &o.worst_month) {
        let _ = writeln!(
            out,
            "\nBest month {} ({}), worst {} ({}); {} of {} months up.",
            b.month,
            pct(Some(b.value)),
            w.month,
            pct(Some(w.value)),
            (o.positive_months * o.months as f64).round(),
            o.months
        );
    }
    for a in &o.assumptions {
        let _ = writeln!(out, "- {a}");
    }
    for n in &o.notes {
        let _ = writeln!(out, "- {n}");
    }
    let _ = writeln!(
        out,
        "\nAll {} metrics, the monthly and annual tables, rolling statistics and distributions: {}",
        o.metric_count, o.json_path
    );
    if let Some(r) = &o.report {
        let _ = writeln!(out, "Report: {r}");
    }
    Some(out)
}

/// A team's key rows (figure, value, as of): the headline metrics.
pub(super) fn key_rows(result: &Value) -> Option<Vec<(String, String, String)>> {
    let o: TearsheetOutput = typed(result)?;
    let period = format!("{} to {}", o.start, o.end);
    Some(
        o.metrics
            .iter()
            .filter(|m| {
                ["cagr", "sharpe", "sortino", "max_drawdown", "volatility"]
                    .contains(&m.key.as_str())
            })
            .map(|m| {
                (
                    format!("{} {}", o.title, m.name),
                    cell(&m.unit, m.value),
                    period.clone(),
                )
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> TearsheetArgs {
        let call = read(text).unwrap();
        assert_eq!(call.name, tool::TEARSHEET);
        serde_json::from_value(call.args).unwrap()
    }

    #[test]
    fn books_runs_and_benchmarks_are_read() {
        let a = args("tear sheet of SPY 2005-2017");
        assert_eq!(a.symbols, Some(vec!["SPY".to_string()]));
        assert_eq!(a.start.as_deref(), Some("2005-01-01"));
        assert!(a.run.is_none());
        let a = args("tearsheet for the last backtest");
        assert_eq!(a.run.as_deref(), Some("last"));
        let a = args("tear sheet of run 20261206_230843_c91573");
        assert_eq!(a.run.as_deref(), Some("20261206_230843_c91573"));
        let a = args("tear sheet of 60% SPY and 40% TLT against QQQ in 2010");
        assert_eq!(a.benchmark.as_deref(), Some("QQQ"));
        assert_eq!(a.symbols, Some(vec!["SPY".to_string(), "TLT".to_string()]));
        assert_eq!(a.weights.map(|w| w["SPY"]), Some(0.6));
        assert!(read("backtest SPY from 2005 to 2017").is_none());
    }
}
