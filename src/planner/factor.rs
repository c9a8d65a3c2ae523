//! The offline planner on "is the edge real" (docs §17.4): plain requests
//! for a factor's IC, a stock's beta and alpha, or whether a Sharpe
//! survives the variants tried become calls of `factor_ic`, `regression`
//! and `overfitting`, and their answers state every input, given or
//! assumed ("12-1 momentum (window 252, skip 21: none was named, so the
//! usual 12-1)"). A team member's sentences ("Compute the 12-1 momentum
//! information coefficient of AAPL, MSFT, IBM.", "Compute the deflated
//! Sharpe ratio of the best in-sample rule from 2005-01-01 to 2010-12-31
//! for the rules the desk tried.") become the same calls, the second from
//! the upstream members' backtest figures, and their key figures are
//! labelled rows for the team's reader (docs §14.7).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};

use super::board::Board;
use super::{PlannedCall, date_range, embedded, names, symbols, typed};
use crate::model::contract::BacktestOutput;
use crate::model::factor::{
    FactorIcArgs, FactorIcOutput, OverfittingArgs, OverfittingOutput, RegressionArgs,
    RegressionOutput, SeriesRef,
};
use crate::model::names as tool;
use crate::model::{Message, Role};

/// Words in capitals these requests use that are not tickers.
const NOT_TICKERS: [&str; 16] = [
    "IC", "IR", "PBO", "PSR", "DSR", "OLS", "HAC", "CAPM", "FF", "SMB", "HML", "MKT", "RF", "MOM",
    "NW", "CSCV",
];

/// Years of daily returns assumed behind a reported Sharpe with no length.
const DEFAULT_YEARS: f64 = 5.0;

static TRIALS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(\d{1,6})\s+(?:trials|tries|configurations|configs|variants|variations|strategies|backtests|parameter sets|combinations)\b").ok()
});
static SHARPE_NUMBER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\bsharpe(?:\s+ratio)?\s*(?:of|=|:|is)?\s*(-?\d+(?:\.\d+)?)|(-?\d+(?:\.\d+)?)\s+sharpe\b").ok()
});
static LENGTH: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:over|across|for|on)\s+(\d+(?:\.\d+)?)\s*(years?|yrs?|months?|days?|trading days)\b").ok()
});
static MOMENTUM_SPEC: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(\d{1,2})\s*[-–/]\s*(\d{1,2})\b\s*(?:month\s+)?momentum").ok()
});
static MONTHS_MOMENTUM: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\b(\d{1,2})\s*-?\s*month\s+momentum").ok());
static N_DAY: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\b(\d{1,3})\s*-?\s*(?:day|d)\b").ok());
static FORWARD: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\b(\d{1,3})\s*-?\s*day\s+forward").ok());
static ROLLING: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\brolling\s+(\d{1,3})\s*-?\s*(month|day|week)").ok());

/// The tickers such a request names.
fn tickers(text: &str) -> Vec<String> {
    symbols(text)
        .into_iter()
        .filter(|s| embedded(s) || !NOT_TICKERS.contains(&s.as_str()))
        .collect()
}

fn is_ic(lower: &str) -> bool {
    lower.contains("information coefficient")
        || names(lower, "ic")
        || lower.contains("rank ic")
        // "is momentum predictive", "does reversal predict returns".
        || (lower.contains("predict") && factor_of(lower).is_some())
}

fn is_regression(lower: &str) -> bool {
    !is_ic(lower)
        && (names(lower, "beta")
            || names(lower, "alpha")
            || lower.contains("regress")
            || lower.contains("factor exposure")
            || lower.contains("factor loading")
            || lower.contains("fama")
            || lower.contains("carhart"))
}

fn is_overfitting(lower: &str) -> bool {
    lower.contains("deflated sharpe")
        || names(lower, "cscv")
        || lower.contains("combinatorially symmetric")
        || lower.contains("probabilistic sharpe")
        || lower.contains("overfit")
        || names(lower, "pbo")
        || (lower.contains("sharpe")
            && (lower.contains("survive") || lower.contains("trial") || lower.contains("luck")))
}

/// A backtest named outright is the backtest's request, except "the
/// probability of backtest overfitting" itself.
fn backtest_named(lower: &str) -> bool {
    (names(lower, "backtest") || lower.contains("back-test"))
        && !lower.contains("backtest overfitting")
        && !lower.contains("back-test overfitting")
}

/// The call of whichever of this module's tools reads the request.
fn intent(text: &str) -> Option<PlannedCall> {
    ic_read(text)
        .or_else(|| overfitting_read(text))
        .or_else(|| regression_read(text))
}

/// `factor_ic`: a factor's information coefficient.
pub(super) fn ic_read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    if backtest_named(&lower) || !is_ic(&lower) {
        return None;
    }
    let (start, end) = date_range(text);
    let f = factor_of(&lower)?;
    Some(ic_call(text, &lower, f, &tickers(text), start, end))
}

/// `overfitting`: a deflated or probabilistic Sharpe, the probability of
/// backtest overfitting (PBO by CSCV) across named books.
pub(super) fn overfitting_read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    if backtest_named(&lower) || !is_overfitting(&lower) || is_ic(&lower) {
        return None;
    }
    let (start, end) = date_range(text);
    overfitting_call(text, &tickers(text), start, end)
}

/// `regression`: a beta, an alpha, factor loadings.
pub(super) fn regression_read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    if backtest_named(&lower) || !is_regression(&lower) || is_overfitting(&lower) {
        return None;
    }
    let (start, end) = date_range(text);
    regression_call(text, &lower, &tickers(text), start, end)
}

// ---------------------------------------------------------------------------
// factor_ic

/// A factor the request names: its indicator spec and how it was read.
struct FactorRead {
    spec: Map<String, Value>,
    said: String,
}

fn spec(indicator: &str, params: Value) -> Map<String, Value> {
    Map::from_iter([
        ("indicator".to_string(), json!(indicator)),
        ("params".to_string(), params),
    ])
}

fn factor_of(lower: &str) -> Option<FactorRead> {
    let n_day = N_DAY
        .as_ref()
        .and_then(|re| re.captures(lower))
        .and_then(|c| c.get(1)?.as_str().parse::<u32>().ok());
    if lower.contains("reversal") {
        let w = n_day.unwrap_or(21);
        return Some(FactorRead {
            spec: spec("momentum", json!({"window": w, "skip": 0})),
            said: format!(
                "short-term reversal as the {w}-day return (momentum window {w}, skip 0{}): a reversal shows as a negative IC",
                if n_day.is_none() {
                    "; one month: none was named"
                } else {
                    ""
                }
            ),
        });
    }
    if lower.contains("momentum") {
        let pair = MOMENTUM_SPEC
            .as_ref()
            .and_then(|re| re.captures(lower))
            .and_then(|c| {
                let a: u32 = c.get(1)?.as_str().parse().ok()?;
                let b: u32 = c.get(2)?.as_str().parse().ok()?;
                (a > b).then_some((a, b))
            });
        let months = MONTHS_MOMENTUM
            .as_ref()
            .and_then(|re| re.captures(lower))
            .and_then(|c| c.get(1)?.as_str().parse::<u32>().ok());
        let ((w, s), why) = match (pair, months, n_day) {
            (Some((a, b)), _, _) => ((a * 21, b * 21), format!("{a}-{b}")),
            (None, Some(m), _) => ((m * 21, 21), format!("{m}-month, skipping the last")),
            // "20-day momentum": that many days back, none skipped.
            (None, None, Some(d)) if d > 0 => ((d, 0), format!("{d}-day")),
            _ => ((252, 21), "12-1: none was named, so the usual".to_string()),
        };
        return Some(FactorRead {
            spec: spec("momentum", json!({"window": w, "skip": s})),
            said: format!(
                "{why} momentum: the return from {w} to {s} trading days back (21 a month)"
            ),
        });
    }
    if lower.contains("volatility") || names(lower, "vol") {
        let w = n_day.unwrap_or(60);
        return Some(FactorRead {
            spec: spec("volatility", json!({"window": w})),
            said: format!(
                "the {w}-day realised volatility{}: a low-volatility effect shows as a negative IC",
                if n_day.is_none() {
                    " (60 days: none was named)"
                } else {
                    ""
                }
            ),
        });
    }
    if names(lower, "rsi") {
        let w = n_day.unwrap_or(14);
        return Some(FactorRead {
            spec: spec("rsi", json!({"period": w})),
            said: format!("RSI({w})"),
        });
    }
    None
}

/// Quantiles a universe of `n` names supports (quintiles from ten names).
fn quantiles_for(lower: &str, n: Option<usize>) -> Option<i64> {
    for (w, q) in [
        ("tercile", 3),
        ("quartile", 4),
        ("quintile", 5),
        ("decile", 10),
    ] {
        if lower.contains(w) {
            return Some(q);
        }
    }
    match n {
        Some(n) if n < 10 => Some(((n / 2).max(2)) as i64),
        _ => None,
    }
}

fn ic_call(
    text: &str,
    lower: &str,
    f: FactorRead,
    syms: &[String],
    start: Option<String>,
    end: Option<String>,
) -> PlannedCall {
    let universe = (syms.len() >= 3).then(|| syms.to_vec());
    let forward = FORWARD
        .as_ref()
        .and_then(|re| re.captures(text))
        .and_then(|c| c.get(1)?.as_str().parse::<i64>().ok())
        .map(|h| vec![h]);
    PlannedCall::typed(
        tool::FACTOR_IC,
        FactorIcArgs {
            quantiles: quantiles_for(lower, universe.as_ref().map(Vec::len)),
            factor: f.spec,
            universe,
            start,
            end,
            forward_days: forward,
            full_series: None,
        },
    )
}

// ---------------------------------------------------------------------------
// regression

/// The Fama–French factors a request names, with how they were read.
fn factors_named(lower: &str) -> Vec<&'static str> {
    if lower.contains("four-factor") || lower.contains("four factor") || lower.contains("carhart") {
        return vec!["ff:MktRF", "ff:SMB", "ff:HML", "ff:Mom"];
    }
    if lower.contains("three-factor")
        || lower.contains("three factor")
        || lower.contains("fama-french")
        || lower.contains("fama–french")
        || lower.contains("fama french")
    {
        return vec!["ff:MktRF", "ff:SMB", "ff:HML"];
    }
    let mut out = Vec::new();
    if lower.contains("market") {
        out.push("ff:MktRF");
    }
    if lower.contains("size") || names(lower, "smb") {
        out.push("ff:SMB");
    }
    if lower.contains("value factor") || names(lower, "hml") {
        out.push("ff:HML");
    }
    if lower.contains("momentum factor") || names(lower, "umd") {
        out.push("ff:Mom");
    }
    out
}

fn regression_call(
    text: &str,
    lower: &str,
    syms: &[String],
    start: Option<String>,
    end: Option<String>,
) -> Option<PlannedCall> {
    let y = syms.first()?.clone();
    let mut x: Vec<String> = factors_named(lower).into_iter().map(String::from).collect();
    x.extend(syms[1..].iter().cloned());
    if x.is_empty() {
        // "beta of AAPL": to the market.
        x.push("ff:MktRF".into());
    }
    let monthly = x.iter().any(|s| s.starts_with("ff:")) || names(lower, "monthly");
    let rolling = ROLLING
        .as_ref()
        .and_then(|re| re.captures(text))
        .and_then(|c| c.get(1)?.as_str().parse::<i64>().ok());
    Some(PlannedCall::typed(
        tool::REGRESSION,
        RegressionArgs {
            y: SeriesRef(json!(y)),
            x: x.into_iter().map(|s| SeriesRef(json!(s))).collect(),
            start,
            end,
            frequency: Some(if monthly { "monthly" } else { "daily" }.into()),
            hac_lags: None,
            rolling_window: rolling,
        },
    ))
}

// ---------------------------------------------------------------------------
// overfitting

fn trials(text: &str) -> Option<i64> {
    TRIALS
        .as_ref()?
        .captures(text)?
        .get(1)?
        .as_str()
        .parse()
        .ok()
}

fn sharpe_number(text: &str) -> Option<f64> {
    let c = SHARPE_NUMBER.as_ref()?.captures(text)?;
    c.get(1).or(c.get(2))?.as_str().parse().ok()
}

/// Daily returns in a length the request names ("over 3 years").
fn length(text: &str) -> Option<i64> {
    let c = LENGTH.as_ref()?.captures(text)?;
    let n: f64 = c.get(1)?.as_str().parse().ok()?;
    let unit = c.get(2)?.as_str().to_lowercase();
    let days = if unit.starts_with('y') {
        n * 252.0
    } else if unit.starts_with('m') {
        n * 21.0
    } else {
        n
    };
    Some(days.round() as i64)
}

fn overfitting_call(
    text: &str,
    syms: &[String],
    start: Option<String>,
    end: Option<String>,
) -> Option<PlannedCall> {
    let mut args = OverfittingArgs {
        trials: trials(text),
        benchmark_sharpe: None,
        ..OverfittingArgs::default()
    };
    if let Some(s) = sharpe_number(text) {
        args.sharpe = Some(s);
        args.observations = Some(length(text).unwrap_or((DEFAULT_YEARS * 252.0) as i64));
    } else if !syms.is_empty() {
        args.symbols = Some(syms.to_vec());
        args.start = start;
        args.end = end;
    } else {
        return None;
    }
    Some(PlannedCall::typed(tool::OVERFITTING, args))
}

/// "Does this Sharpe survive 50 trials" after a backtest in the same
/// conversation: that backtest's Sharpe over its bars, from its tool
/// result in this run or its answer replayed from an earlier one (docs
/// §4.1 replays answers, not tool results).
pub(super) fn from_context(request: &str, before: &[Message]) -> Option<PlannedCall> {
    let lower = request.to_lowercase();
    if !is_overfitting(&lower) || sharpe_number(request).is_some() || !tickers(request).is_empty() {
        return None;
    }
    let (name, sharpe, bars) = before.iter().rev().find_map(|m| match m.role {
        Role::Tool if m.name.as_deref() == Some(tool::BACKTEST) => from_result(&m.content),
        Role::Assistant if m.content.starts_with("## Backtest result") => from_answer(&m.content),
        _ => None,
    })?;
    Some(PlannedCall::typed(
        tool::OVERFITTING,
        OverfittingArgs {
            sharpe: Some(sharpe),
            observations: Some(bars.saturating_sub(1) as i64),
            trials: trials(request),
            name: Some(name),
            ..OverfittingArgs::default()
        },
    ))
}

/// (name, annualised Sharpe, bars) of a backtest's tool result.
fn from_result(content: &str) -> Option<(String, f64, u64)> {
    let v: Value = serde_json::from_str(content).ok()?;
    let o: BacktestOutput = typed(&v)?;
    let m = o.metrics?;
    let bars = m.other.get("bars")?.as_u64()?;
    Some(("the last backtest".into(), m.sharpe?, bars))
}

/// The same from the answer written for it: its summary's strategy, its
/// table's Sharpe (as shown, two decimals) and bars.
fn from_answer(text: &str) -> Option<(String, f64, u64)> {
    let cell = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.split('|').nth(2))
            .map(str::trim)
    };
    let sharpe: f64 = cell("| Sharpe")?.parse().ok()?;
    let bars: u64 = cell("| bars |")?.parse().ok()?;
    let summary = text.lines().nth(2).unwrap_or("");
    let name = summary
        .split([':', '{'])
        .next()
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.len() < 80)
        .map_or_else(
            || "the last backtest".to_string(),
            |s| format!("the last backtest ({s})"),
        );
    Some((name, sharpe, bars))
}

// ---------------------------------------------------------------------------
// A team member's sentences.

/// The calls of one data sentence of a team member's request, or `None`
/// when it asks for none of these tools. `all_syms` are every ticker the
/// sentence names (a universe is not cut to the usual four), `upstream`
/// the upstream members' figures.
pub(super) fn sentence_calls(
    sentence: &str,
    all_syms: &[String],
    range: &(Option<String>, Option<String>),
    upstream: &Board,
) -> Option<Vec<PlannedCall>> {
    let lower = sentence.to_lowercase();
    let syms: Vec<String> = all_syms
        .iter()
        .filter(|s| embedded(s) || !NOT_TICKERS.contains(&s.as_str()))
        .cloned()
        .collect();
    let (start, end) = range.clone();
    if is_ic(&lower) {
        let f = factor_of(&lower)?;
        return Some(vec![ic_call(sentence, &lower, f, &syms, start, end)]);
    }
    if is_overfitting(&lower) {
        let period = match range {
            (Some(a), Some(b)) => format!("{a} to {b}"),
            _ => String::new(),
        };
        return deflate_upstream(upstream, &period).map(|c| vec![c]);
    }
    if is_regression(&lower) && !syms.is_empty() {
        return regression_call(sentence, &lower, &syms, start, end).map(|c| vec![c]);
    }
    None
}

/// The deflated Sharpe of the best of the upstream backtests over
/// `period` (every Sharpe reported for it is a trial), from its Sharpe,
/// its bars and the trials' Sharpe ratios.
fn deflate_upstream(b: &Board, period: &str) -> Option<PlannedCall> {
    let sharpes: Vec<_> = b
        .figs
        .iter()
        .filter(|f| f.label.contains("Sharpe") && (period.is_empty() || f.as_of == period))
        .collect();
    let best = sharpes.iter().max_by(|a, c| a.value.total_cmp(&c.value))?;
    let name = super::board::subject(&best.label, "Sharpe");
    let bars = b
        .figs
        .iter()
        .find(|f| f.label == format!("{name} bars") && f.as_of == best.as_of)?;
    let trial_sharpes: Vec<f64> = sharpes.iter().map(|f| f.value).collect();
    Some(PlannedCall::typed(
        tool::OVERFITTING,
        OverfittingArgs {
            sharpe: Some(best.value),
            observations: Some((bars.value as i64 - 1).max(0)),
            trials: Some(trial_sharpes.len() as i64),
            trial_sharpes: (trial_sharpes.len() >= 2).then_some(trial_sharpes),
            name: Some(name.to_string()),
            ..OverfittingArgs::default()
        },
    ))
}

// ---------------------------------------------------------------------------
// Key figures and answers.

fn num4(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.4}")
    } else {
        "n/a".into()
    }
}

fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:.2} %", x * 100.0)
    } else {
        "n/a".into()
    }
}

/// "momentum(252/21)", "volatility(60)".
fn factor_label(o: &FactorIcOutput) -> String {
    let nums: Vec<String> = o
        .params
        .as_object()
        .map(|p| {
            ["window", "period", "skip"]
                .iter()
                .filter_map(|k| p.get(*k).filter(|v| v.is_number()).map(Value::to_string))
                .collect()
        })
        .unwrap_or_default();
    if nums.is_empty() {
        o.factor.clone()
    } else {
        format!("{}({})", o.factor, nums.join("/"))
    }
}

fn universe_label(u: &[String]) -> String {
    if u.len() <= 6 {
        u.join("+")
    } else {
        format!("{} stocks", u.len())
    }
}

fn period(d: &crate::model::factor::StudyData) -> String {
    match (&d.start, &d.end) {
        (Some(a), Some(b)) => format!("{a} to {b}"),
        _ => String::new(),
    }
}

/// The key-figure rows (label, value, as of) of one of these tools'
/// results; `None` for another tool.
pub(super) fn key_rows(tool: &str, result: &Value) -> Option<Vec<(String, String, String)>> {
    Some(match tool {
        tool::FACTOR_IC => {
            let o: FactorIcOutput = typed(result)?;
            let head = format!("{} {}", universe_label(&o.universe), factor_label(&o));
            let at = period(&o.data);
            let mut rows = Vec::new();
            for h in &o.horizons {
                let d = h.forward_days;
                rows.push((
                    format!("{head} {d}-day IC mean"),
                    num4(h.ic_mean),
                    at.clone(),
                ));
                rows.push((
                    format!("{head} {d}-day IC t (Newey–West)"),
                    format!("{:.2}", h.t_stat_nw),
                    at.clone(),
                ));
                rows.push((
                    format!("{head} {d}-day IC hit rate"),
                    pct(h.hit_rate),
                    at.clone(),
                ));
                rows.push((
                    format!("{head} {d}-day top-minus-bottom spread"),
                    pct(h.spread),
                    at.clone(),
                ));
            }
            rows
        }
        tool::REGRESSION => {
            let o: RegressionOutput = typed(result)?;
            let at = period(&o.data);
            let mut rows = Vec::new();
            for (name, c) in &o.coefficients {
                let est = c["estimate"].as_f64().unwrap_or(f64::NAN);
                let t = c["t"].as_f64().unwrap_or(f64::NAN);
                let what = if name == "const" {
                    format!(
                        "{} alpha per {} period",
                        o.y,
                        o.frequency.trim_end_matches("ly")
                    )
                } else {
                    format!("{} beta to {name}", o.y)
                };
                rows.push((what.clone(), num4(est), at.clone()));
                rows.push((
                    format!("{what} t (Newey–West)"),
                    format!("{t:.2}"),
                    at.clone(),
                ));
            }
            rows.push((
                format!("{} alpha (annualized)", o.y),
                pct(o.alpha_annualized),
                at.clone(),
            ));
            rows.push((format!("{} regression r²", o.y), num4(o.r2), at));
            rows
        }
        tool::OVERFITTING => {
            let o: OverfittingOutput = typed(result)?;
            let mut rows = vec![
                (
                    format!("{} Sharpe (annualized)", o.best),
                    format!("{:.2}", o.sharpe_annualized),
                    String::new(),
                ),
                (
                    format!("{} deflated Sharpe ratio ({} trials)", o.best, o.trials),
                    num4(o.dsr),
                    String::new(),
                ),
                (
                    format!(
                        "{} probabilistic Sharpe ratio (vs {})",
                        o.best, o.benchmark_sharpe
                    ),
                    num4(o.psr),
                    String::new(),
                ),
                (
                    format!(
                        "{}: Sharpe the best of {} trials reaches by luck (annualized)",
                        o.best, o.trials
                    ),
                    format!("{:.2}", o.expected_max_sharpe_annualized),
                    String::new(),
                ),
            ];
            if let Some(y) = o.min_track_record_years {
                rows.push((
                    format!(
                        "{} minimum track record (years at {:.0} %)",
                        o.best,
                        o.confidence * 100.0
                    ),
                    format!("{y:.2}"),
                    String::new(),
                ));
            }
            if let Some(p) = &o.pbo {
                rows.push((
                    format!(
                        "{}: probability of backtest overfitting ({} partitions)",
                        o.best, p.partitions
                    ),
                    pct(p.pbo),
                    String::new(),
                ));
            }
            rows
        }
        _ => return None,
    })
}

const NOT_ADVICE: &str =
    "Figures are statistics of the data named, from the tool; they are analysis, not advice.";

/// One of these tools' answers, every input stated; `None` for another.
pub(super) fn answer(request: &str, tool: &str, v: &Value) -> Option<String> {
    match tool {
        tool::FACTOR_IC => typed::<FactorIcOutput>(v).map(|o| ic_answer(request, &o)),
        tool::REGRESSION => typed::<RegressionOutput>(v).map(|o| regression_answer(request, &o)),
        tool::OVERFITTING => typed::<OverfittingOutput>(v).map(|o| overfitting_answer(request, &o)),
        _ => None,
    }
}

fn ic_answer(request: &str, o: &FactorIcOutput) -> String {
    let mut out = format!(
        "## Information coefficient of {} on {}\n\n| forward days | IC mean | IC std | IC mean/std | t-stat | t-stat (Newey–West) | hit rate | top − bottom | top turnover | dates |\n|---|---|---|---|---|---|---|---|---|---|\n",
        factor_label(o),
        universe_label(&o.universe)
    );
    for h in &o.horizons {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.2} | {:.2} | {} | {} | {} | {} |\n",
            days(h.forward_days),
            num4(h.ic_mean),
            num4(h.ic_std),
            num4(h.ic_ir),
            h.t_stat,
            h.t_stat_nw,
            pct(h.hit_rate),
            pct(h.spread),
            pct(h.top_turnover),
            h.dates_scored
        ));
    }
    out.push_str(&format!(
        "\nMean forward return by quantile (Q1 = lowest factor, Q{} = highest):\n\n| forward days |",
        o.quantiles
    ));
    for q in 1..=o.quantiles {
        out.push_str(&format!(" Q{q} mean |"));
    }
    out.push_str(&format!("\n|---|{}\n", "---|".repeat(o.quantiles)));
    for h in &o.horizons {
        out.push_str(&format!("| {} |", days(h.forward_days)));
        for r in &h.quantile_returns {
            out.push_str(&format!(" {} |", pct(*r)));
        }
        out.push('\n');
    }
    if let Some(h) = o.horizons.iter().max_by_key(|h| h.forward_days) {
        out.push_str(&format!(
            "\nIC by year over {} days: {}.\n",
            h.forward_days,
            h.ic_by_year
                .iter()
                .map(|(y, ic, _)| format!("{y} {ic:+.3}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let said = factor_of(&request.to_lowercase()).map(|f| f.said);
    let params: Vec<String> = o
        .params
        .as_object()
        .map(|p| {
            p.iter()
                .filter(|(_, v)| v.is_number())
                .map(|(k, v)| format!("{k} {v}"))
                .collect()
        })
        .unwrap_or_default();
    let mut inputs = vec![format!(
        "factor {} (indicator {}, {})",
        said.as_deref().unwrap_or(&o.factor),
        o.factor,
        params.join(", ")
    )];
    inputs.push(format!(
        "universe {} ({})",
        universe_label(&o.universe),
        if request.is_empty() || tickers(request).len() >= 3 {
            "as named"
        } else {
            "the offline market's stocks with data in the range: none was named"
        }
    ));
    inputs.push(format!(
        "period {} ({} dates{})",
        period(&o.data),
        o.dates,
        if !request.is_empty() && date_range(request) == (None, None) {
            ": all the data, none was named"
        } else {
            ""
        }
    ));
    inputs.push(format!(
        "forward returns over {} trading days",
        o.horizons
            .iter()
            .map(|h| h.forward_days.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    inputs.push(format!("quantiles {}", o.quantiles));
    if let Some(w) = &o.warmup {
        inputs.push(w.clone());
    }
    out.push_str(&format!("\nInputs: {}.\n", inputs.join("; ")));
    for n in &o.data.notes {
        out.push_str(&format!("\n- {n}"));
    }
    out.push_str("\n\nRead the Newey–West t for horizons over a day: overlapping forward returns make consecutive ICs correlated.");
    out.push_str(&conventions(request, &o.conventions));
    out
}

/// "1 day", "21 days".
fn days(n: usize) -> String {
    if n == 1 {
        "1 day".into()
    } else {
        format!("{n} days")
    }
}

/// The conventions paragraph and the closing line. A team member's detail
/// (no request of its own) leaves the formulas out: the tool's answer and
/// docs §17 carry them, and the team's report reads figures, not algebra.
fn conventions(request: &str, text: &str) -> String {
    if request.is_empty() {
        format!("\n\n{NOT_ADVICE}\n")
    } else {
        format!("\n\nConventions: {text}\n\n{NOT_ADVICE}\n")
    }
}

fn regression_answer(request: &str, o: &RegressionOutput) -> String {
    let lower = request.to_lowercase();
    // The embedded Fama–French file carries the three factors and
    // momentum, not the five-factor model's RMW and CMA: say what ran.
    let five = [
        "five factor",
        "five-factor",
        "5 factor",
        "5-factor",
        "rmw",
        "cma",
    ]
    .iter()
    .any(|w| lower.contains(w));
    let mut out = if five {
        "The five-factor model's RMW (profitability) and CMA (investment) are not in the embedded Fama–French data (market, SMB, HML and momentum are), so this is the three-factor regression.\n\n".to_string()
    } else {
        String::new()
    };
    out += &format!(
        "## Regression of {} ({} returns)\n\n| coefficient | estimate | std error (Newey–West) | t | p-value |\n|---|---|---|---|---|\n",
        o.y, o.frequency
    );
    for (name, c) in &o.coefficients {
        let f = |k: &str| c[k].as_f64().unwrap_or(f64::NAN);
        let shown = if name == "const" {
            "alpha (const, per period)".to_string()
        } else {
            format!("beta to {name}")
        };
        out.push_str(&format!(
            "| {shown} | {} | {} | {:.2} | {:.4} |\n",
            num4(f("estimate")),
            num4(f("std_error")),
            f("t"),
            f("p_value")
        ));
    }
    out.push_str(&format!(
        "\nr² {}, adjusted r² {}, n {}, residual std {}, alpha annualized {}.\n",
        num4(o.r2),
        num4(o.adj_r2),
        o.n,
        num4(o.residual_std),
        pct(o.alpha_annualized)
    ));
    if let Some(r) = &o.rolling {
        for (name, betas) in &r.betas {
            let (lo, hi) = betas
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
                    (a.min(*x), b.max(*x))
                });
            out.push_str(&format!(
                "\nRolling beta to {name} over {} observations: from {} to {}, last {} ({} windows).\n",
                r.window,
                num4(lo),
                num4(hi),
                betas.last().map_or("n/a".into(), |b| num4(*b)),
                betas.len()
            ));
        }
    }
    let x: Vec<&String> = o.coefficients.keys().filter(|k| *k != "const").collect();
    let named = request.is_empty()
        || !factors_named(&request.to_lowercase()).is_empty()
        || tickers(request).len() > 1;
    let mut inputs = vec![
        format!("y {}", o.y),
        format!(
            "x {}{}",
            x.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
            if named {
                ""
            } else {
                " (the market factor: none was named)"
            }
        ),
        format!(
            "period {} ({} {} returns)",
            period(&o.data),
            o.n,
            o.frequency
        ),
        format!("Newey–West lags {}", o.hac_lags),
    ];
    inputs.push(match &o.risk_free {
        Some(rf) => format!("excess returns: {rf}"),
        None => "raw returns, no risk-free rate subtracted".into(),
    });
    out.push_str(&format!("\nInputs: {}.\n", inputs.join("; ")));
    for n in &o.data.notes {
        out.push_str(&format!("\n- {n}"));
    }
    out.push_str(&conventions(request, &o.conventions));
    out
}

fn overfitting_answer(request: &str, o: &OverfittingOutput) -> String {
    let mut out = format!(
        "## Does the Sharpe of {} survive {} trial(s)?\n\n{}\n\n| figure | value |\n|---|---|\n",
        o.best, o.trials, o.verdict
    );
    for (k, v) in [
        ("Sharpe (annualized)", format!("{:.2}", o.sharpe_annualized)),
        ("Sharpe per day", num4(o.sharpe)),
        ("probabilistic Sharpe ratio (PSR)", num4(o.psr)),
        ("deflated Sharpe ratio (DSR)", num4(o.dsr)),
        (
            "Sharpe the best of the trials reaches by luck (annualized)",
            format!("{:.2}", o.expected_max_sharpe_annualized),
        ),
        (
            "minimum track record",
            o.min_track_record_years.map_or(
                "none: the Sharpe does not beat the benchmark".into(),
                |y| {
                    format!(
                        "{y:.2} years ({:.0} daily returns)",
                        o.min_track_record.unwrap_or(f64::NAN)
                    )
                },
            ),
        ),
    ] {
        out.push_str(&format!("| {k} | {v} |\n"));
    }
    if let Some(p) = &o.pbo {
        out.push_str(&format!(
            "| probability of backtest overfitting | {} ({} partitions, {} splits; out-of-sample loss in {}) |\n",
            pct(p.pbo),
            p.partitions,
            p.combinations,
            pct(p.prob_oos_loss)
        ));
    }
    let trials_named = trials(request).is_some();
    let mut inputs = vec![
        format!(
            "trials {}{}",
            o.trials,
            if trials_named || request.is_empty() {
                ""
            } else {
                " (the strategies given: no count was named)"
            }
        ),
        format!("trials' Sharpe variance from {}", o.variance_source),
        format!("benchmark Sharpe {} (annualized)", o.benchmark_sharpe),
        format!("confidence {:.0} %", o.confidence * 100.0),
    ];
    if sharpe_number(request).is_some() && length(request).is_none() {
        inputs.push(format!(
            "{DEFAULT_YEARS} years of daily returns: no length was named"
        ));
    }
    out.push_str(&format!("\nInputs: {}.\n", inputs.join("; ")));
    for n in &o.data.notes {
        out.push_str(&format!("\n- {n}"));
    }
    out.push_str(&conventions(request, &o.conventions));
    out
}

/// The reply when "does this Sharpe survive" has nothing to read.
pub(super) fn needs_a_sharpe(request: &str) -> Option<String> {
    let lower = request.to_lowercase();
    (is_overfitting(&lower) && intent(request).is_none()).then(|| {
        "To deflate a Sharpe ratio I need one: name it with its length (\"does a Sharpe of 1.4 over 3 years survive 50 trials\"), a ticker and period (\"does SPY's Sharpe from 2010 to 2017 survive 50 trials\"), or run a backtest first and ask again (\"does this Sharpe survive 50 trials\" then reads that backtest's Sharpe and bars).\n".to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_requests_become_calls_with_their_inputs() {
        let c = intent("IC of 12-1 momentum on the offline universe").unwrap();
        assert_eq!(c.name, "factor_ic");
        // Asking whether a named factor predicts is asking for its IC.
        let p = intent("is momentum in the offline universe predictive").unwrap();
        assert_eq!((p.name.as_str(), &p.args), (c.name.as_str(), &c.args));
        assert_eq!(
            intent("does short-term reversal predict returns")
                .unwrap()
                .name,
            "factor_ic"
        );
        assert!(intent("can you predict the weather").is_none());
        assert_eq!(
            c.args["factor"],
            json!({"indicator": "momentum", "params": {"window": 252, "skip": 21}})
        );
        assert!(c.args.get("universe").is_none(), "{}", c.args);
        let c = intent("information coefficient of 60-day volatility on AAPL, MSFT, IBM, JPM from 2010 to 2012").unwrap();
        assert_eq!(c.args["factor"]["params"]["window"], 60);
        assert_eq!(c.args["universe"], json!(["AAPL", "MSFT", "IBM", "JPM"]));
        assert_eq!(c.args["quantiles"], 2);
        assert_eq!(c.args["start"], "2010-01-01");
        let c = intent("beta of AAPL to the market factor 2010–2017").unwrap();
        assert_eq!(c.name, "regression");
        assert_eq!(c.args["y"], "AAPL");
        assert_eq!(c.args["x"], json!(["ff:MktRF"]));
        assert_eq!(c.args["frequency"], "monthly");
        assert_eq!(
            (c.args["start"].as_str(), c.args["end"].as_str()),
            (Some("2010-01-01"), Some("2017-12-31"))
        );
        let c = intent("Carhart four-factor alpha of MSFT since 2005").unwrap();
        assert_eq!(c.args["x"].as_array().unwrap().len(), 4);
        let c = intent("beta of AAPL to SPY in 2012 with a rolling 60-day beta").unwrap();
        assert_eq!(c.args["x"], json!(["SPY"]));
        assert_eq!(c.args["frequency"], "daily");
        assert_eq!(c.args["rolling_window"], 60);
        let c = intent("does a Sharpe of 1.4 over 3 years survive 200 trials").unwrap();
        assert_eq!(c.name, "overfitting");
        assert_eq!(
            (
                c.args["sharpe"].as_f64(),
                c.args["observations"].as_i64(),
                c.args["trials"].as_i64()
            ),
            (Some(1.4), Some(756), Some(200))
        );
        let c = intent("does SPY's Sharpe from 2010 to 2017 survive 50 trials").unwrap();
        assert_eq!(c.args["symbols"], json!(["SPY"]));
        assert!(intent("does this Sharpe survive 50 trials").is_none());
        assert!(needs_a_sharpe("does this Sharpe survive 50 trials").is_some());
        assert!(intent("backtest a momentum strategy on AAPL").is_none());
    }

    #[test]
    fn the_desk_deflates_its_best_in_sample_sharpe() {
        let mut b = Board::default();
        let p = "2005-01-01 to 2010-12-31";
        for (from, label, v) in [
            ("trend", "AAPL sma_crossover(20/50)", "0.91"),
            ("trend", "AAPL ema_crossover(12/26)", "0.55"),
            ("reversion", "AAPL rsi_mean_reversion", "0.20"),
        ] {
            b.add(
                from,
                &format!("{label} Sharpe (annualized, rf 3-month T-bill)"),
                v,
                p,
            );
            b.add(from, &format!("{label} bars"), "1511", p);
        }
        b.add(
            "validation",
            "AAPL sma_crossover(20/50) Sharpe (annualized, rf 3-month T-bill)",
            "1.5",
            "2011-01-01 to 2013-02-28",
        );
        let c = deflate_upstream(&b, p).unwrap();
        assert_eq!(c.args["name"], "AAPL sma_crossover(20/50)");
        assert_eq!(c.args["sharpe"], 0.91);
        assert_eq!(c.args["observations"], 1510);
        assert_eq!(c.args["trials"], 3);
        assert_eq!(c.args["trial_sharpes"], json!([0.91, 0.55, 0.2]));
    }
}
