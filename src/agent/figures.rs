//! Grounded answers (docs §1.6): the figures of a final answer are looked up
//! in the run's tool results, so a number the model invented is flagged as
//! unverified rather than passed on as a finding.
//!
//! A figure is a number as the answer writes it (`13.31`, `-35.2%`,
//! `1,024.5`). It is verified when some number in a tool result, a call's
//! arguments, or the user's own words (the prompt, the recalled memories,
//! earlier turns) shows as it at the precision it is written with (rounded
//! or truncated to the last digit shown; a zero shows only a zero figure),
//! a sign dropped (a drawdown of 35 % is `-0.35`), a percent in the
//! direction a percent mark supports (`52.1%` for `0.521`, `0.45` for a
//! source's `45.3%`), or when it is a sum, difference or ratio of two values
//! the answer's other figures show (not of two near-equal values). A derived
//! match needs a figure of two significant digits or more, and a scaled one
//! of one digit an equal value, so that a `0.0001` is never "found" as a
//! hundredth of some `0.0098` or as the difference of two near-equal prices.
//! Dates, years (1900–2100), ordinals, section references (`§14.7`) and
//! small counts (0–10) are not figures.

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
    /// The unverified figures that are key: measured quantities (written
    /// with decimals, a percent or a sign), not counts like `37 trades`.
    pub key_unverified: Vec<String>,
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
    /// Where it starts in the answer (its digits; a sign is before).
    at: usize,
    text: String,
    value: f64,
    decimals: i32,
    /// Written with `%` or a percent word (`percent`, `pct`, `points`, `pp`).
    percent: bool,
    /// Digits from the first non-zero one, as written (`0.0001`: 1).
    significant: usize,
    /// A measured quantity rather than a count: decimals, a percent or a
    /// sign (docs §1.6).
    key: bool,
}

impl Figure {
    /// Derived matches need two significant digits, and scaled ones of a
    /// single digit an equal value: one digit's rounding leaves a near-zero
    /// figure within reach of too many values.
    fn precise(&self) -> bool {
        self.significant >= 2
    }
}

/// Numbers of the sources, sorted and absolute: all of them, and those a
/// percent mark or a percent key (`return_pct`) labels as percents.
#[derive(Default)]
struct Known {
    all: Vec<f64>,
    percents: Vec<f64>,
}

impl Known {
    fn of(sources: &[&str]) -> Known {
        let mut all = Vec::new();
        let mut percents = Vec::new();
        for (value, percent) in sources.iter().flat_map(|s| source_numbers(s)) {
            all.push(value);
            if percent {
                percents.push(value);
            }
        }
        Known {
            all: sorted(all),
            percents: sorted(percents),
        }
    }
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
    let known = Known::of(sources);
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
    let derived = Known {
        all: if open.is_empty() {
            Vec::new()
        } else {
            sorted(arithmetic(&operands))
        },
        percents: Vec::new(),
    };
    let mut unverified: Vec<String> = Vec::new();
    let mut key_unverified: Vec<String> = Vec::new();
    for f in open {
        let derived_match = f.precise() && shown_by(f, &derived).is_some();
        if derived_match || unverified.contains(&f.text) {
            continue;
        }
        unverified.push(f.text.clone());
        if f.key {
            key_unverified.push(f.text.clone());
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
        key_unverified,
    }
}

/// A key figure of an answer (a measured quantity: decimals, a percent or
/// a sign) and where it stands, for checking whom the answer gives it to.
pub struct KeyFigure {
    figure: Figure,
}

impl KeyFigure {
    /// Its byte offset in the answer.
    pub fn at(&self) -> usize {
        self.figure.at
    }

    /// As written (`-35.2%`).
    pub fn text(&self) -> &str {
        &self.figure.text
    }

    /// Whether `source` shows it directly (not by arithmetic), as
    /// [`check_figures`] reads it.
    pub fn shown_in(&self, source: &str) -> bool {
        shown_by(&self.figure, &Known::of(&[source])).is_some()
    }
}

/// The key figures of `answer`, in order.
pub fn key_figures(answer: &str) -> Vec<KeyFigure> {
    figures_of(answer)
        .into_iter()
        .filter(|f| f.key)
        .map(|figure| KeyFigure { figure })
        .collect()
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

/// A difference smaller than this share of its larger operand is dropped:
/// near-equal operands (two closes a cent apart) cancel to a tiny value
/// that would ground any near-zero figure by coincidence.
const CANCELLATION: f64 = 1e-3;

/// Sums, differences and ratios of every pair of `values`.
fn arithmetic(values: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(values.len() * values.len() * 2);
    for (i, a) in values.iter().enumerate() {
        for b in values.iter().skip(i + 1) {
            out.push(a + b);
            let difference = (a - b).abs();
            if difference >= CANCELLATION * a.abs().max(b.abs()) {
                out.push(difference);
            }
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
    // Blanked to the same length, so a figure's place is its place in the
    // answer.
    let text = date.replace_all(answer, |c: &regex::Captures<'_>| " ".repeat(c[0].len()));
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    for m in number.find_iter(&text) {
        let before = text[..m.start()].chars().next_back();
        let after: String = text[m.end()..].chars().take(3).collect();
        // Part of a word (Q3, H1, x2), a section (§14.7) or an ordinal
        // (2nd): not a figure.
        if before.is_some_and(|c| c.is_alphabetic() || matches!(c, '_' | '.' | '§'))
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
        let rest = text[m.end()..].trim_start();
        let percent = rest.starts_with('%');
        let percent_word = !percent && starts_with_percent_word(rest);
        let small_count = decimals == 0 && value <= 10.0 && !percent;
        let year =
            decimals == 0 && !percent && raw.len() == 4 && (1900.0..=2100.0).contains(&value);
        if small_count || year {
            continue;
        }
        let at = |back: usize| m.start().checked_sub(back).and_then(|i| bytes.get(i));
        let negative = at(1) == Some(&b'-');
        // A sign, not a hyphen: nothing alphanumeric right before it.
        let sign =
            matches!(at(1), Some(b'-' | b'+')) && !at(2).is_some_and(u8::is_ascii_alphanumeric);
        let shown = format!(
            "{}{raw}{}",
            if negative { "-" } else { "" },
            if percent { "%" } else { "" }
        );
        out.push(Figure {
            at: m.start(),
            text: shown,
            value,
            decimals,
            percent: percent || percent_word,
            significant: significant_digits(raw),
            key: decimals > 0 || percent || percent_word || sign,
        });
    }
    out
}

/// Words after a number that make it a percent (`12 percent`, `15.1
/// points`, `3 pp`, `4 pct`, `5 per cent`).
fn starts_with_percent_word(rest: &str) -> bool {
    let word: String = rest
        .chars()
        .take_while(|c| c.is_alphabetic())
        .collect::<String>()
        .to_lowercase();
    match word.as_str() {
        "percent" | "percentage" | "pct" | "pp" | "point" | "points" => true,
        "per" => rest
            .get(3..)
            .is_some_and(|r| r.trim_start().to_lowercase().starts_with("cent")),
        _ => false,
    }
}

/// Significant digits as written: from the first non-zero digit on.
fn significant_digits(raw: &str) -> usize {
    raw.chars()
        .filter(char::is_ascii_digit)
        .skip_while(|c| *c == '0')
        .count()
}

/// Every number in a source text, as absolute values, each with whether
/// the source labels it a percent: a `%` or percent word after it, or
/// `pct`/`percent` in its JSON key or line label before it.
fn source_numbers(text: &str) -> Vec<(f64, bool)> {
    let Some(re) = SOURCE_NUMBER.as_ref() else {
        return Vec::new();
    };
    re.find_iter(text)
        .filter_map(|m| {
            let value = m.as_str().replace(',', "").parse::<f64>().ok()?;
            let rest = text.get(m.end()..).unwrap_or_default().trim_start();
            let after = rest.starts_with('%') || starts_with_percent_word(rest);
            Some((value, after || percent_label(text, m.start())))
        })
        .filter(|(x, _)| x.is_finite())
        .collect()
}

/// Whether the label before the number at `at` (back to the last `,`, `{`,
/// `[` or line start, at most 60 characters) names a percent.
fn percent_label(text: &str, at: usize) -> bool {
    let before = text.get(..at).unwrap_or_default();
    let mut label: Vec<char> = before
        .chars()
        .rev()
        .take(60)
        .take_while(|c| !matches!(c, ',' | '{' | '[' | '\n'))
        .collect();
    label.reverse();
    let label = label.into_iter().collect::<String>().to_lowercase();
    label.contains("pct") || label.contains("percent") || label.contains('%')
}

/// A known number (sorted, absolute) that shows as `f` at its precision:
/// at the same scale, or a hundredth of it as a percent where a percent
/// mark supports that direction: the figure's (`52.1%` for `0.521`) or the
/// source's (`0.45` for `"return_pct": 45.3`). A figure of one significant
/// digit shows a scaled value only when equal to it (`0.05%` for `0.0005`,
/// never `1%` for `0.0098`).
fn shown_by(f: &Figure, known: &Known) -> Option<f64> {
    let unit = 10f64.powi(-f.decimals);
    let scales: [(f64, &[f64], bool); 3] = [
        (1.0, &known.all, true),
        (100.0, &known.all, f.percent),
        (0.01, &known.percents, !f.percent),
    ];
    let exact = |y: f64| (y - f.value).abs() <= 1e-9 * f.value.abs().max(unit);
    scales
        .iter()
        .filter(|(_, _, allowed)| *allowed)
        .find_map(|(scale, values, _)| {
            let shows = |y: f64| match *scale == 1.0 || f.precise() {
                true => shows_as(y, f.value, unit),
                false => exact(y),
            };
            // Rounding reaches half a unit below, truncation a unit above.
            let lo = (f.value - unit) / scale;
            let hi = (f.value + unit) / scale;
            let from = values.partition_point(|y| *y < lo);
            values
                .get(from..)
                .unwrap_or_default()
                .iter()
                .take_while(|y| **y <= hi)
                .find(|y| shows(**y * scale))
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
            "In 2008, over 3 windows (the 2nd was worst), from 2001-01-02 to 12/31/2012 at 16:00, Q3 was best (docs §14.7).",
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

    /// Issue 40: "The Engle-Granger p-value … is 0.0001" passed as grounded
    /// because a daily return of 0.0098 is 0.0001 read as a percent (the
    /// ×0.01 scale applied without any percent mark).
    #[test]
    fn an_invented_p_value_is_not_a_hundredth_of_a_return() {
        let data = r#"{"symbol":"AAPL","rows":[{"date":"2024-01-02","close":185.64,"return":0.0123},{"date":"2024-01-03","close":184.25,"return":-0.0075},{"date":"2024-01-04","close":181.91,"return":0.0098}],"summary":{"total_return":0.0112}}"#;
        let answer =
            "The Engle-Granger p-value for AAPL and MSFT is 0.0001, so they are cointegrated.";
        let c = check_figures(answer, &[data, "Are AAPL and MSFT cointegrated?"]);
        assert_eq!(c.unverified, vec!["0.0001"]);
        assert_eq!(c.key_unverified, vec!["0.0001"]);
        // Written as a percent, a hundredth of a return is that return.
        let c = check_figures("The best day returned 1.23%.", &[data]);
        assert!(c.unverified.is_empty(), "{:?}", c.unverified);
        // Without a percent mark it is not.
        let c = check_figures("The best day returned 1.23.", &[data]);
        assert_eq!(c.unverified, vec!["1.23"]);
    }

    #[test]
    fn a_percent_source_grounds_its_fraction_only_when_labelled() {
        let c = check_figures("A return of 0.45.", &[r#"{"total_return_pct":45.26}"#]);
        assert!(c.unverified.is_empty(), "{:?}", c.unverified);
        let c = check_figures("A return of 0.45.", &[r#"{"total_return":"45.26%"}"#]);
        assert!(c.unverified.is_empty(), "{:?}", c.unverified);
        let c = check_figures("A return of 0.45.", &[r#"{"ratio":45.26}"#]);
        assert_eq!(c.unverified, vec!["0.45"]);
        // One significant digit shows a scaled value only when equal to it.
        let c = check_figures("A drift of 0.5.", &[r#"{"drift_pct":49.7}"#]);
        assert_eq!(c.unverified, vec!["0.5"]);
        let c = check_figures("A drift of 0.5.", &[r#"{"drift_pct":50.0}"#]);
        assert!(c.unverified.is_empty(), "{:?}", c.unverified);
        let c = check_figures(
            "Commission 0.05% a side; the best day 1%.",
            &[r#"{"commission":0.0005,"best_day":0.0098}"#],
        );
        assert_eq!(c.unverified, vec!["1%"]);
    }

    #[test]
    fn near_equal_operands_ground_no_near_zero_figure() {
        let tool = r#"{"AAPL":{"close":123.45},"MSFT":{"close":123.44},"IBM":{"close":1234.56},"SPY":{"close":1234.55}}"#;
        // One significant digit: no derived match at all.
        let c = check_figures("AAPL closed at 123.45, MSFT at 123.44: p = 0.01.", &[tool]);
        assert_eq!(c.unverified, vec!["0.01"]);
        // Two digits, but a difference that cancels all but the last digit
        // of its operands.
        let c = check_figures("IBM 1,234.56 and SPY 1,234.55: p = 0.010.", &[tool]);
        assert_eq!(c.unverified, vec!["0.010"]);
        // A difference that keeps its digits is the answer's arithmetic.
        let c = check_figures("IBM 1,234.56 against AAPL 123.45: 1,111.11 apart.", &[tool]);
        assert!(c.unverified.is_empty(), "{:?}", c.unverified);
    }

    #[test]
    fn key_figures_are_measured_quantities_not_counts() {
        let tool = r#"{"sharpe":0.8734,"trades":37}"#;
        let c = check_figures(
            "Sharpe 0.87 over 41 trades; alpha -14, drawdown 12%, return 3.5 percent, beta 1.27.",
            &[tool],
        );
        assert_eq!(c.unverified, vec!["41", "-14", "12%", "3.5", "1.27"]);
        assert_eq!(c.key_unverified, vec!["-14", "12%", "3.5", "1.27"]);
        let c = check_figures("Sharpe 0.87 over 41 trades.", &[tool]);
        assert_eq!(c.unverified, vec!["41"]);
        assert!(c.key_unverified.is_empty(), "a count is not key");
    }

    #[test]
    fn regexes_compile() {
        assert!(DATE.is_some() && ANSWER_NUMBER.is_some() && SOURCE_NUMBER.is_some());
    }
}
