//! Grounded answers (docs §1.6): the figures of a final answer are looked up
//! in the run's tool results, so a number the model invented is flagged as
//! unverified rather than passed on as a finding.
//!
//! A figure is a number as the answer writes it (`13.31`, `-35.2%`,
//! `1,024.5`). It is verified when some number in a tool result, a call's
//! arguments, or the user's own words (the prompt, the recalled memories,
//! earlier turns) shows as it at the precision it is written with (rounded
//! or truncated to the last digit shown; a zero shows only a zero figure),
//! a sign dropped (a drawdown of 35 % is `-0.35`), a percent either way
//! (`52.1%` for `0.521`), or when it is a sum, difference or ratio of two
//! values the answer's other figures show. Dates, years (1900–2100),
//! ordinals and small counts (0–10) are not figures.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// The figures of an answer and those no source holds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FigureCheck {
    /// Figures checked (after dates, years and small counts are set aside).
    pub figures: usize,
    /// Unverified figures as written, each once, in answer order.
    pub unverified: Vec<String>,
}

impl FigureCheck {
    /// The answer has figures and not one of them is in a source.
    pub fn all_unverified(&self) -> bool {
        self.figures > 0 && self.unverified.len() == self.figures
    }
}

static DATE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b|\b\d{1,2}[-/.]\d{1,2}[-/.]\d{4}\b|\b\d{1,2}:\d{2}(?::\d{2})?\b").ok()
});
static ANSWER_NUMBER: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?").ok());
static SOURCE_NUMBER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?").ok()
});

/// One figure of the answer.
struct Figure {
    text: String,
    value: f64,
    decimals: i32,
}

/// At most this many source values enter the arithmetic search: its pairs
/// stay in the tens of thousands, so the check stays cheap.
const MAX_OPERANDS: usize = 200;

/// Checks `answer`'s figures against the numbers in `sources`.
pub fn check_figures(answer: &str, sources: &[&str]) -> FigureCheck {
    let figures = figures_of(answer);
    if figures.is_empty() {
        return FigureCheck::default();
    }
    let known = sorted(sources.iter().flat_map(|s| source_numbers(s)).collect());
    // Figures a source shows directly; the values they cite are the
    // operands of the answer's own arithmetic.
    let mut operands: Vec<f64> = Vec::new();
    let mut open: Vec<&Figure> = Vec::new();
    for f in &figures {
        match shown_by(f, &known) {
            Some(y) => {
                if operands.len() < MAX_OPERANDS && !operands.contains(&y) {
                    operands.push(y);
                }
            }
            None => open.push(f),
        }
    }
    let derived = if open.is_empty() {
        Vec::new()
    } else {
        sorted(arithmetic(&operands))
    };
    let mut unverified: Vec<String> = Vec::new();
    for f in open {
        if shown_by(f, &derived).is_none() && !unverified.contains(&f.text) {
            unverified.push(f.text.clone());
        }
    }
    let distinct = {
        let mut t: Vec<&str> = figures.iter().map(|f| f.text.as_str()).collect();
        t.sort_unstable();
        t.dedup();
        t.len()
    };
    FigureCheck {
        figures: distinct,
        unverified,
    }
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

/// Sums, differences and ratios of every pair of `values`.
fn arithmetic(values: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(values.len() * values.len() * 2);
    for (i, a) in values.iter().enumerate() {
        for b in values.iter().skip(i + 1) {
            out.push(a + b);
            out.push((a - b).abs());
            if *b != 0.0 {
                out.push(a / b);
            }
            if *a != 0.0 {
                out.push(b / a);
            }
        }
    }
    out
}

/// Whether the answer is a tool's raw error result rather than an answer:
/// a JSON object (maybe fenced) with `"status": "error"` or an `error` key.
pub fn is_raw_error(answer: &str) -> bool {
    let t = answer.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .map(|r| r.trim_end().trim_end_matches("```"))
        .unwrap_or(t)
        .trim();
    match serde_json::from_str::<Value>(t) {
        Ok(Value::Object(o)) => {
            o.get("status").and_then(Value::as_str) == Some("error")
                || o.get("error").is_some_and(|e| !e.is_null())
        }
        _ => false,
    }
}

fn figures_of(answer: &str) -> Vec<Figure> {
    let (Some(date), Some(number)) = (DATE.as_ref(), ANSWER_NUMBER.as_ref()) else {
        return Vec::new();
    };
    let text = date.replace_all(answer, " ");
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    for m in number.find_iter(&text) {
        let before = text[..m.start()].chars().next_back();
        let after: String = text[m.end()..].chars().take(3).collect();
        // Part of a word (Q3, H1, x2) or an ordinal (2nd): not a figure.
        if before.is_some_and(|c| c.is_alphabetic() || c == '_' || c == '.')
            || ["st", "nd", "rd", "th"]
                .iter()
                .any(|o| after.to_ascii_lowercase().starts_with(o))
        {
            continue;
        }
        let raw = m.as_str();
        let Ok(value) = raw.replace(',', "").parse::<f64>() else {
            continue;
        };
        let decimals = raw.split_once('.').map_or(0, |(_, d)| d.len() as i32);
        let percent = text[m.end()..].trim_start().starts_with('%');
        let small_count = decimals == 0 && value <= 10.0 && !percent;
        let year =
            decimals == 0 && !percent && raw.len() == 4 && (1900.0..=2100.0).contains(&value);
        if small_count || year {
            continue;
        }
        let negative = m.start() > 0 && matches!(bytes[m.start() - 1], b'-');
        let shown = format!(
            "{}{raw}{}",
            if negative { "-" } else { "" },
            if percent { "%" } else { "" }
        );
        out.push(Figure {
            text: shown,
            value,
            decimals,
        });
    }
    out
}

/// Every number in a source text, as absolute values.
fn source_numbers(text: &str) -> Vec<f64> {
    let Some(re) = SOURCE_NUMBER.as_ref() else {
        return Vec::new();
    };
    re.find_iter(text)
        .filter_map(|m| m.as_str().replace(',', "").parse::<f64>().ok())
        .filter(|x| x.is_finite())
        .collect()
}

/// A known number (sorted, absolute) that shows as `f` at its precision,
/// at the same scale or a percent apart.
fn shown_by(f: &Figure, known: &[f64]) -> Option<f64> {
    let unit = 10f64.powi(-f.decimals);
    [1.0, 100.0, 0.01].iter().find_map(|scale| {
        // Rounding reaches half a unit below, truncation a unit above.
        let lo = (f.value - unit) / scale;
        let hi = (f.value + unit) / scale;
        let from = known.partition_point(|y| *y < lo);
        known
            .get(from..)
            .unwrap_or_default()
            .iter()
            .take_while(|y| **y <= hi)
            .find(|y| shows_as(**y * scale, f.value, unit))
            .copied()
    })
}

/// Whether `y` written to the digits of `x` (one `unit` is its last digit),
/// rounded or truncated, reads `x`. The tolerance is the digits shown, so it
/// is relative to them. A source's zero shows only a zero figure, never a
/// small one near it; a zero figure (`0.0000`) shows what rounds to it.
fn shows_as(y: f64, x: f64, unit: f64) -> bool {
    if y == 0.0 {
        return x == 0.0;
    }
    // Float noise only: 1e-9 of the larger of the figure and its unit.
    let eps = 1e-9 * x.abs().max(unit);
    let rounded = (y - x).abs() <= 0.5 * unit + eps;
    let truncated = y >= x - eps && y < x + unit - eps;
    rounded || truncated
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invented_number_is_unverified() {
        let tool =
            r#"{"status":"ok","symbol":"AAPL","latest":{"date":"2008-01-25","rsi_14":null}}"#;
        let c = check_figures(
            "AAPL's RSI(14) on 2008-01-25 was 13.31.",
            &[tool, "What was AAPL's RSI(14) on 2008-01-25?"],
        );
        assert_eq!(c.unverified, vec!["13.31"]);
        assert_eq!(c.figures, 2, "14 and 13.31; the date is not a figure");
        assert!(!c.all_unverified(), "14 is the user's own number");
    }

    #[test]
    fn rounding_percent_and_sign_are_allowed() {
        let tool = r#"{"metrics":{"sharpe":0.8734,"max_drawdown":-0.35218,"total_return":0.52149},"final_value":1521490.12}"#;
        let c = check_figures(
            "Sharpe 0.87 (0.873), drawdown 35.2%, return 52%, -35.22%, final value 1,521,490.12.",
            &[tool],
        );
        assert!(c.unverified.is_empty(), "{:?}", c.unverified);
        let c = check_figures("Sharpe 0.91 and drawdown 12.5%.", &[tool]);
        assert_eq!(c.unverified, vec!["0.91", "12.5%"]);
        assert!(c.all_unverified());
    }

    #[test]
    fn dates_years_counts_and_ordinals_are_not_figures() {
        let c = check_figures(
            "In 2008, over 3 windows (the 2nd was worst), from 2001-01-02 to 12/31/2012 at 16:00, Q3 was best.",
            &[],
        );
        assert_eq!(c, FigureCheck::default());
    }

    #[test]
    fn raw_error_answers_are_recognised() {
        assert!(is_raw_error(
            r#"{"status": "error", "error": "no data for ZZZ"}"#
        ));
        assert!(is_raw_error("```json\n{\"error\": \"bad symbol\"}\n```"));
        assert!(!is_raw_error("The tool failed: no data for ZZZ."));
        assert!(!is_raw_error(r#"{"status": "ok"}"#));
    }

    #[test]
    fn the_calls_arguments_ground_their_numbers() {
        let result = r#"{"best":{"sharpe":0.6619,"lookback":252}}"#;
        let args = r#"{"spec":{"axes":{"lookback":[21,63,126,252]},"split":{"walk_forward":{"train_months":36,"test_months":12}},"step":25,"thresholds":{"overbought":70}}}"#;
        let answer =
            "Best 0.6619 at lookback 252; trains on 36 months, tests on 12, step 25, RSI above 70.";
        assert_eq!(
            check_figures(answer, &[result]).unverified,
            vec!["36", "12", "25", "70"]
        );
        assert!(check_figures(answer, &[result, args]).unverified.is_empty());
    }

    #[test]
    fn the_requests_numbers_are_grounded() {
        let c = check_figures(
            "Over 50 trials a Sharpe of 1.4 deflates to 0.62.",
            &[
                "does a Sharpe of 1.4 over 3 years survive 50 trials",
                r#"{"dsr":0.6183}"#,
            ],
        );
        assert!(c.unverified.is_empty(), "{:?}", c.unverified);
    }

    #[test]
    fn the_answers_arithmetic_on_tool_figures_is_grounded() {
        let tool = r#"{"strategy":{"total_return":0.4526},"benchmark":{"total_return":0.3014},"trades":37}"#;
        let c = check_figures(
            "The rule made 45.3% against 30.1%: ahead by 15.1 points, 1.50x the benchmark, 75.4% combined, over 37 trades.",
            &[tool],
        );
        assert!(c.unverified.is_empty(), "{:?}", c.unverified);
        let c = check_figures("45.3% against 30.1%, ahead by 17.4 points.", &[tool]);
        assert_eq!(c.unverified, vec!["17.4"], "not a sum, difference or ratio");
    }

    #[test]
    fn a_small_figure_is_not_shown_by_zero() {
        let tool = r#"{"drift":0,"skew":0.0,"mean":0.0}"#;
        let c = check_figures("Drift 0.04 and skew 0.01%.", &[tool]);
        assert_eq!(c.unverified, vec!["0.04", "0.01%"]);
        assert!(check_figures("Skew 0.00.", &[tool]).unverified.is_empty());
        // A p-value printed as 0.0000 is a tiny one rounded.
        let c = check_figures("p-value 0.0000, not 0.0001.", &[r#"{"p":3.2e-7}"#]);
        assert_eq!(c.unverified, vec!["0.0001"]);
        // A value on the far side of the last digit is neither rounding
        // nor truncation.
        let c = check_figures("Sharpe 0.88 or 0.86.", &[r#"{"sharpe":0.8734}"#]);
        assert_eq!(c.unverified, vec!["0.88", "0.86"]);
    }

    #[test]
    fn an_invented_figure_is_still_flagged_among_grounded_ones() {
        let tool = r#"{"sharpe":0.8734,"cagr":0.121,"max_drawdown":-0.2231}"#;
        let c = check_figures(
            "Sharpe 0.87, CAGR 12.1%, drawdown 22.3%, alpha 3.47%.",
            &[tool, r#"{"window":20}"#, "backtest SPY"],
        );
        assert_eq!(c.unverified, vec!["3.47%"]);
        assert!(!c.all_unverified());
    }

    #[test]
    fn regexes_compile() {
        assert!(DATE.is_some() && ANSWER_NUMBER.is_some() && SOURCE_NUMBER.is_some());
    }
}
