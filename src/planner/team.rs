//! The offline planner as a research-team member (docs §14.3): a worker's
//! one user message names the ticker and, one sentence each, the angles to
//! study ("Compute the 14-day RSI of AAPL.", "Backtest a 20/50 SMA
//! crossover on AAPL."). Each sentence that starts with a data verb
//! (compute, get, backtest, recall …) becomes real tool calls, all in one
//! batch; the answer leads with a table of key figures, each with its date
//! and tool, so the members downstream can quote it. When the message holds
//! `## Upstream results`, the answer quotes each upstream section's key
//! figures under its `input_from` key, so a decider's report cites every
//! member.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};

use super::board::{Board, OWN};
use super::verdict::verdict;
use super::{
    BacktestArgs, BacktestOutput, IndicatorArgs, IndicatorOutput, LAST_N, MarketDataArgs,
    MarketDataOutput, MemoryAction, MemoryOutput, Plan, PlannedCall, RecallArgs, RememberArgs,
    answer, backtest_answer, backtest_config, date_range, fixed, indicator_answer, is_error, names,
    num, pct, prices_answer, source_for, symbol, symbols, typed,
};
use crate::model::names as tool;
use crate::model::team_rules;

/// Most tool calls one member makes in its batch.
const MAX_CALLS: usize = 8;
/// Most symbols one sentence fans out to.
const MAX_SYMBOLS: usize = 4;
/// Most figures quoted from one upstream section.
const MAX_QUOTED: usize = 20;
/// Rows of a price table in a member's detail.
const PRICE_ROWS: usize = 5;
/// Rows of an indicator's history the member asks for.
const INDICATOR_TAIL: i64 = 3;
/// The parameters an indicator's label shows (not the annualisation
/// factor or the degrees of freedom).
const WINDOW_PARAMS: [&str; 5] = ["window", "period", "fast", "slow", "signal"];
/// Window of a correlation when the prompt names none.
const CORRELATION_WINDOW: u32 = 60;

/// Words that make a sentence a request for data when it starts with one
/// (an instruction); a sentence that merely mentions "drawdown" or "the
/// backtests" (as a decider's does) calls nothing.
const VERBS: [&str; 11] = [
    "price",
    "stress",
    "compute",
    "calculate",
    "measure",
    "get",
    "fetch",
    "pull",
    "backtest",
    "recall",
    "search",
];

/// Indicator words and the `technical_indicator` name each means.
const INDICATORS: [(&str, &str); 10] = [
    ("macd", "macd"),
    ("rsi", "rsi"),
    ("bollinger", "bollinger"),
    ("atr", "atr"),
    ("volatility", "volatility"),
    ("drawdown", "drawdown"),
    ("correlation", "correlation"),
    ("ema", "ema"),
    ("sma", "sma"),
    ("moving average", "sma"),
];

/// The heading the swarm puts before the upstream tasks' answers.
static UPSTREAM_AT: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?m)^## Upstream results[ \t]*$").ok());
/// `### <key> (<task id>, <role>)`, one upstream section's heading.
static SECTION: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?m)^### (\S+) \(([^,()]+), (.*)\)[ \t]*$").ok());
/// A window written just before an indicator's name: "the 50-day ", "20 ".
static WINDOW_BEFORE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(\d{1,3})\s*-?\s*(?:(?:day|bar|period|week)s?\s*)?(?:simple\s+|exponential\s+)?$")
        .ok()
});
static IS_DATE: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^\d{4}-\d{2}-\d{2}").ok());

/// A tool result of this turn, with the arguments it was called with.
pub(super) struct Outcome<'a> {
    pub tool: &'a str,
    pub args: Value,
    pub result: Value,
}

/// The member's own request and the upstream block, if the message has one.
fn split_upstream(message: &str) -> (&str, Option<&str>) {
    match UPSTREAM_AT.as_ref().and_then(|re| re.find(message)) {
        Some(m) => (&message[..m.start()], Some(&message[m.end()..])),
        None => (message, None),
    }
}

/// Whether the message is a team member's: it carries upstream results, or
/// asks for data in more than one way. A plain one-thing request ("RSI of
/// IBM") stays with the single-call planner.
pub(super) fn is_member(message: &str) -> bool {
    let (own, upstream) = split_upstream(message);
    upstream.is_some() || member_calls(own, None).len() >= 2
}

/// The member's step: its batch of calls, or once their results are in (or
/// when it needs none), its answer.
pub(super) fn plan(message: &str, outcomes: &[Outcome<'_>], offered: &[String]) -> Plan {
    if outcomes.is_empty() {
        let (own, upstream) = split_upstream(message);
        let own = team_rules::without_line(own);
        let mut calls = member_calls_with(&own, Some(offered), upstream);
        match calls.len() {
            0 => {}
            1 => return Plan::Call(calls.remove(0)),
            _ => return Plan::Calls(calls),
        }
    }
    Plan::Answer(member_answer(message, outcomes))
}

/// The request cut into sentences: at line ends, and at `.`, `?`, `!` or
/// `;` followed by a space (so "0.1%" and "2.0" stay whole).
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut from = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next_blank = chars.peek().is_none_or(|(_, n)| n.is_whitespace());
        let cut = match c {
            '\n' => Some(i),
            '.' | '?' | '!' | ';' if next_blank => Some(i + c.len_utf8()),
            _ => None,
        };
        if let Some(end) = cut {
            let s = text[from..end].trim();
            if !s.is_empty() {
                out.push(s);
            }
            from = end;
        }
    }
    let rest = text[from..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// The calls the member's own request asks for, in the order asked,
/// without repeats; only tools in `offered` when it is given.
fn member_calls(own: &str, offered: Option<&[String]>) -> Vec<PlannedCall> {
    member_calls_with(own, offered, None)
}

/// [`member_calls`] with the upstream block, whose figures a deflated
/// Sharpe reads (docs §17.4).
fn member_calls_with(
    own: &str,
    offered: Option<&[String]>,
    upstream: Option<&str>,
) -> Vec<PlannedCall> {
    let primary = symbol(own);
    let whole = date_range(own);
    let board = upstream.map(upstream_board).unwrap_or_default();
    let mut out: Vec<PlannedCall> = Vec::new();
    for sentence in sentences(own) {
        let lower = sentence.to_lowercase();
        let first = lower
            .split(|c: char| !c.is_ascii_alphanumeric())
            .find(|w| !w.is_empty())
            .unwrap_or("");
        if !VERBS.contains(&first) {
            continue;
        }
        let mut syms = symbols(sentence);
        if syms.is_empty() {
            syms.extend(primary.clone());
        }
        let range = sentence_range(sentence, &whole);
        // A factor's universe is every ticker named (docs §17.4).
        let edge = super::factor::sentence_calls(sentence, &syms, &range, &board);
        syms.truncate(MAX_SYMBOLS);
        let calls =
            edge.unwrap_or_else(|| sentence_calls(sentence, &lower, &syms, &range, offered));
        for call in calls {
            let offered_ok = offered.is_none_or(|o| o.contains(&call.name));
            if offered_ok && !out.contains(&call) && out.len() < MAX_CALLS {
                out.push(call);
            }
        }
    }
    out
}

type Range = (Option<String>, Option<String>);

/// The period a sentence names, read by meaning, else the request's: a
/// sentence that names only an end ("the last 60 days to 2012-12-31")
/// keeps the request's start when that start is not after it.
fn sentence_range(sentence: &str, whole: &Range) -> Range {
    let own = super::dates::read(sentence);
    if own.is_empty() {
        return whole.clone();
    }
    let (start, end) = own.strings();
    match (start, end) {
        (None, Some(end)) => {
            let start = whole.0.clone().filter(|s| *s <= end);
            (start, Some(end))
        }
        (start, end) => (start, end),
    }
}

/// One data sentence's calls: a backtest sentence is a backtest (its
/// strategy words are not indicators); otherwise prices, memory and every
/// indicator it names, for each symbol it names.
fn sentence_calls(
    sentence: &str,
    lower: &str,
    syms: &[String],
    range: &Range,
    offered: Option<&[String]>,
) -> Vec<PlannedCall> {
    let (start, end) = range.clone();
    if names(lower, "backtest") || lower.contains("back-test") {
        if syms.is_empty() {
            return Vec::new();
        }
        return vec![PlannedCall::typed(
            tool::BACKTEST,
            BacktestArgs {
                config: Some(backtest_config(sentence, syms, start, end)),
                ..BacktestArgs::default()
            },
        )];
    }
    // Time-series tests and volatility forecasts (docs §16.7).
    if let Some(calls) = super::stats::sentence_calls(sentence, syms, range) {
        return calls;
    }
    // Options, portfolio weights and risk (docs §15.7).
    if let Some(calls) = super::quant::sentence_calls(sentence, syms, range) {
        return calls;
    }
    let mut out = Vec::new();
    if names(lower, "recall") || names(lower, "memory") {
        out.push(recall_call(sentence, syms, offered));
    }
    let prices = names(lower, "prices")
        || names(lower, "ohlc")
        || ["price history", "daily bars", "closing price"]
            .iter()
            .any(|p| lower.contains(p));
    if prices {
        for sym in syms {
            out.push(prices_call(sentence, sym, range));
        }
    }
    // In the order the sentence names them, each time it names one ("the
    // 50-day SMA and the 200-day SMA" are two).
    let mut named: Vec<(usize, &str)> = INDICATORS
        .iter()
        .flat_map(|&(key, indicator)| word_at(lower, key).map(move |at| (at, indicator)))
        .collect();
    named.sort_by_key(|n| n.0);
    for (at, indicator) in named {
        let window = window_before(&lower[..at]);
        if indicator == "correlation" {
            out.extend(correlation_calls(lower, syms, window, range));
            continue;
        }
        for sym in syms {
            let params = window.map(|w| {
                let k = if matches!(indicator, "rsi" | "atr") {
                    "period"
                } else {
                    "window"
                };
                Map::from_iter([(k.to_string(), json!(w))])
            });
            out.push(indicator_call(sym, indicator, params, range));
        }
    }
    out
}

fn indicator_call(
    sym: &str,
    indicator: &str,
    params: Option<Map<String, Value>>,
    (start, end): &Range,
) -> PlannedCall {
    PlannedCall::typed(
        tool::TECHNICAL_INDICATOR,
        IndicatorArgs {
            source: Some(source_for(sym).as_str().into()),
            symbol: sym.to_string(),
            symbols: None,
            indicator: indicator.into(),
            params,
            start: start.clone(),
            end: end.clone(),
            tail: Some(INDICATOR_TAIL),
        },
    )
}

/// A correlation needs two symbols: the first with each other one, or
/// every pair when the sentence says "each pair".
fn correlation_calls(
    lower: &str,
    syms: &[String],
    window: Option<u32>,
    range: &Range,
) -> Vec<PlannedCall> {
    let mut pairs: Vec<(&String, &String)> = Vec::new();
    for (i, a) in syms.iter().enumerate() {
        for b in &syms[i + 1..] {
            if i == 0 || lower.contains("each pair") {
                pairs.push((a, b));
            }
        }
    }
    pairs
        .into_iter()
        .map(|(a, b)| {
            let params = Map::from_iter([
                ("with".to_string(), json!(b)),
                (
                    "window".to_string(),
                    json!(window.unwrap_or(CORRELATION_WINDOW)),
                ),
            ]);
            indicator_call(a, "correlation", Some(params), range)
        })
        .collect()
}

/// Daily bars of `sym`: "the last N trading days to <date>" is the tool's
/// last N rows to that date; a range, its last rows (the ones shown) with
/// the summary of the whole range.
fn prices_call(sentence: &str, sym: &str, (start, end): &Range) -> PlannedCall {
    let last_n = LAST_N
        .as_ref()
        .and_then(|re| re.captures(sentence))
        .and_then(|c| c.get(1)?.as_str().parse::<i64>().ok());
    PlannedCall::typed(
        tool::GET_MARKET_DATA,
        MarketDataArgs {
            source: Some(source_for(sym).as_str().into()),
            symbol: sym.to_string(),
            start: if last_n.is_some() {
                None
            } else {
                start.clone()
            },
            end: end.clone(),
            last_n: Some(last_n.unwrap_or(PRICE_ROWS as i64)),
            ..Default::default()
        },
    )
}

/// A memory search for what the sentence asks "about" (up to "from …"),
/// else for the symbols; `recall` when offered, else `remember`'s recall.
fn recall_call(sentence: &str, syms: &[String], offered: Option<&[String]>) -> PlannedCall {
    let lower = sentence.to_lowercase();
    let about = lower.find(" about ").map(|at| {
        let rest = &sentence[at + " about ".len()..];
        let rest = rest
            .to_lowercase()
            .find(" from ")
            .map_or(rest, |cut| &rest[..cut]);
        rest.trim_end_matches(['.', '?', '!'])
            .trim()
            .trim_start_matches("the ")
            .to_string()
    });
    let query = about
        .filter(|q| !q.is_empty())
        .unwrap_or_else(|| syms.join(" "));
    let has_recall = offered.is_none_or(|o| o.iter().any(|t| t == tool::RECALL));
    if has_recall {
        PlannedCall::typed(
            tool::RECALL,
            RecallArgs {
                query,
                max_results: None,
            },
        )
    } else {
        PlannedCall::typed(
            tool::REMEMBER,
            RememberArgs {
                action: Some(MemoryAction::Recall.as_str().into()),
                query: Some(query),
                ..Default::default()
            },
        )
    }
}

/// Where `lower` names `key` as [`names`] reads it: a phrase anywhere, a
/// word whole (a long one also with an ending).
fn word_at<'a>(lower: &'a str, key: &'a str) -> impl Iterator<Item = usize> + 'a {
    lower.match_indices(key).map(|(i, _)| i).filter(move |&i| {
        let before_ok = lower[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_ascii_alphanumeric());
        let after = lower[i + key.len()..].chars().next();
        let after_ok =
            key.contains(' ') || key.len() >= 5 || after.is_none_or(|c| !c.is_ascii_alphanumeric());
        before_ok && after_ok
    })
}

/// The window written at the end of `before`, the text up to an
/// indicator's name ("compute the 50-day ").
fn window_before(before: &str) -> Option<u32> {
    WINDOW_BEFORE
        .as_ref()?
        .captures(before)?
        .get(1)?
        .as_str()
        .parse()
        .ok()
}

/// The member's answer: key figures (one table row each, with date and
/// tool), then each result in detail, then what the upstream members found.
fn member_answer(message: &str, outcomes: &[Outcome<'_>]) -> String {
    let (own, upstream) = split_upstream(message);
    let rule = team_rules::read(own);
    let given = team_rules::read_thresholds(own);
    let own = &team_rules::without_line(own);
    let mut subject = symbols(own);
    // The plan took the first MAX_SYMBOLS tickers named: say which it
    // left, rather than drop them silently.
    let left = subject.split_off(subject.len().min(MAX_SYMBOLS));
    let subject = subject.join(", ");
    let sections = upstream.map(upstream_sections).unwrap_or_default();
    let mut out = decision(outcomes, &sections, rule, &given);
    if !outcomes.is_empty() {
        out.push_str(&format!(
            "## Findings{}\n\n| figure | value | as of | tool |\n|---|---|---|---|\n",
            if subject.is_empty() {
                String::new()
            } else {
                format!(" on {subject}")
            }
        ));
        for o in outcomes {
            for row in key_rows(o) {
                out.push_str(&format!(
                    "| {} | {} | {} | {} |\n",
                    row.figure, row.value, row.as_of, o.tool
                ));
            }
        }
        if !left.is_empty() {
            out.push_str(&format!(
                "\nNot studied: {} — a member's plan takes the first {MAX_SYMBOLS} tickers named.\n",
                left.join(", ")
            ));
        }
        out.push_str("\n## Detail\n\n");
        for o in outcomes {
            out.push_str(&detail(o));
            out.push('\n');
        }
    }
    if !sections.is_empty() {
        out.push_str("## What each member found\n\n");
        for s in &sections {
            out.push_str(&format!("#### {} ({}, {})\n\n", s.key, s.task, s.role));
            let figures = key_figures(s.body);
            if figures.is_empty() {
                let first = s.body.lines().map(str::trim).find(|l| !l.is_empty());
                out.push_str(&format!(
                    "- no figures given; it begins: \"{}\"\n",
                    crate::text::one_line(first.unwrap_or(""), 200)
                ));
            }
            for f in figures {
                out.push_str(&format!("- {f}\n"));
            }
            out.push('\n');
        }
    }
    out.push_str(&reading(outcomes, &sections));
    out
}

/// The reader's decision by the rule its message names (docs §14.7): its
/// own results and each upstream member's key figures on one board.
fn decision(
    outcomes: &[Outcome<'_>],
    sections: &[Section<'_>],
    rule: Option<&str>,
    given: &[(String, f64)],
) -> String {
    let (Some(rule), false) = (rule, sections.is_empty()) else {
        return String::new();
    };
    let mut board = Board::default();
    for o in outcomes {
        for r in key_rows(o) {
            board.add(OWN, &r.figure, &r.value, &r.as_of);
        }
    }
    for s in sections {
        board.read(s.key, s.body);
    }
    board.rule = rule.to_string();
    board.given = given.to_vec();
    verdict(&board).map_or_else(String::new, |v| v.render())
}

/// One row of the key-figures table.
struct KeyRow {
    figure: String,
    value: String,
    as_of: String,
}

fn row(figure: impl Into<String>, value: impl Into<String>, as_of: impl Into<String>) -> KeyRow {
    KeyRow {
        figure: figure.into(),
        value: value.into(),
        as_of: as_of.into(),
    }
}

/// The key figures of one result.
fn key_rows(o: &Outcome<'_>) -> Vec<KeyRow> {
    if let Some(err) = is_error(&o.result) {
        return vec![row(
            format!("{} failed", o.tool),
            crate::text::one_line(&err, 160).replace('|', "/"),
            "",
        )];
    }
    match o.tool {
        tool::GET_MARKET_DATA => typed::<MarketDataOutput>(&o.result)
            .map(|v| price_rows(&v))
            .unwrap_or_default(),
        tool::TECHNICAL_INDICATOR => typed::<IndicatorOutput>(&o.result)
            .map(|v| indicator_rows(&v))
            .unwrap_or_default(),
        tool::BACKTEST => typed::<BacktestOutput>(&o.result)
            .map(|v| backtest_rows(&o.args, &v))
            .unwrap_or_default(),
        tool::OPTION_PRICE
        | tool::IMPLIED_VOLATILITY
        | tool::OPTION_STRATEGY
        | tool::PORTFOLIO_OPTIMIZE
        | tool::RISK_REPORT => super::quant::key_rows(o.tool, &o.args, &o.result)
            .unwrap_or_default()
            .into_iter()
            .map(|(f, v, d)| row(f, v, d))
            .collect(),
        tool::STAT_TEST | tool::VOLATILITY_MODEL => super::stats::key_rows(o.tool, &o.result)
            .unwrap_or_default()
            .into_iter()
            .map(|(f, v, d)| row(f, v, d))
            .collect(),
        tool::FACTOR_IC | tool::REGRESSION | tool::OVERFITTING => {
            super::factor::key_rows(o.tool, &o.result)
                .unwrap_or_default()
                .into_iter()
                .map(|(f, v, d)| row(f, v, d))
                .collect()
        }
        tool::TEARSHEET => super::tearsheet::key_rows(&o.result)
            .unwrap_or_default()
            .into_iter()
            .map(|(f, v, d)| row(f, v, d))
            .collect(),
        tool::RECALL | tool::REMEMBER => typed::<MemoryOutput>(&o.result)
            .map(|v| {
                vec![row(
                    format!("memories matching \"{}\"", query_of(&o.args)),
                    v.memories.as_ref().map_or(0, Vec::len).to_string(),
                    "",
                )]
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn query_of(args: &Value) -> String {
    args["query"].as_str().unwrap_or("").replace('|', "/")
}

fn price_rows(v: &MarketDataOutput) -> Vec<KeyRow> {
    let sym = &v.symbol;
    let Some(s) = &v.summary else {
        return vec![row(format!("{sym} price rows"), "0", "")];
    };
    let span = format!("{} to {}", s.first_date, s.last_date);
    let mut rows = vec![row(
        format!("{sym} close"),
        fixed(s.last_close),
        s.last_date.clone(),
    )];
    if let (Some(a), Some(b)) = (s.first_close, s.last_close)
        && a > 0.0
    {
        rows.push(row(
            format!("{sym} close change"),
            format!("{:+.2} %", (b / a - 1.0) * 100.0),
            span.clone(),
        ));
    }
    rows.push(row(
        format!("{sym} close range"),
        format!("{} to {}", fixed(s.min_close), fixed(s.max_close)),
        span,
    ));
    rows
}

/// "RSI(14)", "correlation(60, with MSFT)": the indicator with the
/// parameters a reader needs to tell two runs apart.
fn indicator_label(v: &IndicatorOutput) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(p) = v.params.as_object() {
        for (k, val) in p {
            match val {
                Value::Number(n) if WINDOW_PARAMS.contains(&k.as_str()) => {
                    parts.push(n.to_string())
                }
                Value::String(s) if k == "with" => parts.push(format!("with {s}")),
                _ => {}
            }
        }
    }
    // Abbreviations in capitals, words as they are; volatility is
    // annualized by the tool (√252), and the label says so.
    let name = if v.indicator == "volatility" {
        "annualized volatility".to_string()
    } else if v.indicator.len() <= 4 {
        v.indicator.to_uppercase()
    } else {
        v.indicator.clone()
    };
    if parts.is_empty() {
        name
    } else {
        format!("{name}({})", parts.join(", "))
    }
}

fn indicator_rows(v: &IndicatorOutput) -> Vec<KeyRow> {
    let label = format!("{} {}", v.symbol, indicator_label(v));
    let date = v
        .latest
        .get("date")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let series: Vec<(&String, &Value)> = v.latest.iter().filter(|(k, _)| *k != "date").collect();
    let shown = |k: &str, x: f64| {
        if k == "drawdown" || k == "volatility" {
            format!("{:.2} %", x * 100.0)
        } else {
            format!("{x:.4}")
        }
    };
    let mut rows = Vec::new();
    for (k, val) in &series {
        let figure = if series.len() == 1 {
            format!("{label} latest")
        } else {
            format!("{label} {k}")
        };
        let value = num(val).map_or_else(|| val.to_string(), |x| shown(k, x));
        rows.push(row(figure, value, date.clone()));
    }
    // One series: its low and high over the range say more than the last value alone.
    if let [(k, _)] = series.as_slice()
        && let Some(e) = v.extremes.get(k.as_str())
    {
        let e: super::Extremes = typed(e).unwrap_or_default();
        let (low, high) = if k.as_str() == "drawdown" {
            ("deepest", "shallowest")
        } else {
            ("lowest", "highest")
        };
        if let Some(x) = e.min {
            rows.push(row(
                format!("{label} {low}"),
                shown(k, x),
                e.min_date.unwrap_or_default(),
            ));
        }
        if let Some(x) = e.max
            && k.as_str() != "drawdown"
        {
            rows.push(row(
                format!("{label} {high}"),
                shown(k, x),
                e.max_date.unwrap_or_default(),
            ));
        }
    }
    rows
}

/// "AAPL sma_crossover(20/50)" and its period, from the call's config.
fn backtest_label(args: &Value) -> (String, String) {
    let cfg = &args["config"];
    let codes: Vec<&str> = cfg["codes"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let strategy = &cfg["strategy"];
    let params: Vec<String> = strategy["params"]
        .as_object()
        .map(|p| {
            p.values()
                .filter(|v| v.is_number())
                .map(Value::to_string)
                .collect()
        })
        .unwrap_or_default();
    let name = strategy["name"].as_str().unwrap_or("strategy");
    let mut label = format!("{} {name}", codes.join("+"));
    if !params.is_empty() {
        label.push_str(&format!("({})", params.join("/")));
    }
    let costs: Vec<String> = [("commission_rate", "commission"), ("slippage", "slippage")]
        .iter()
        .filter_map(|(k, word)| {
            cfg[*k]
                .as_f64()
                .map(|r| format!("{:.2} % {word}", r * 100.0))
        })
        .collect();
    if !costs.is_empty() {
        label.push_str(&format!(" at {}", costs.join(", ")));
    }
    let period = match (cfg["start_date"].as_str(), cfg["end_date"].as_str()) {
        (Some(a), Some(b)) => format!("{a} to {b}"),
        _ => String::new(),
    };
    (label, period)
}

fn backtest_rows(args: &Value, v: &BacktestOutput) -> Vec<KeyRow> {
    let (label, period) = backtest_label(args);
    let empty = Default::default();
    let m = v.metrics.as_ref().unwrap_or(&empty);
    let trades = m
        .trade_count
        .as_ref()
        .and_then(|n| n.as_f64())
        .map_or("n/a".into(), |t| format!("{t:.0}"));
    let mut rows: Vec<KeyRow> = [
        ("total return".to_string(), pct(m.total_return)),
        ("annual return".to_string(), pct(m.annual_return)),
        (m.sharpe_label(), fixed(m.sharpe)),
        ("max drawdown".to_string(), pct(m.max_drawdown)),
        ("round trips".to_string(), trades),
    ]
    .into_iter()
    .map(|(k, val)| row(format!("{label} {k}"), val, period.clone()))
    .collect();
    // The bars behind the Sharpe, for a deflated Sharpe downstream (§17.4).
    if let Some(n) = m.other.get("bars").and_then(Value::as_u64) {
        rows.push(row(format!("{label} bars"), n.to_string(), period.clone()));
    }
    rows.extend(pair_rows(&label, &period, m));
    rows
}

/// A pairs run's spread figures (docs §7.7): the latest hedge ratio and
/// z-score, and the spread's half-life.
fn pair_rows(label: &str, period: &str, m: &super::BacktestMetrics) -> Vec<KeyRow> {
    let get = |k: &str| m.other.get(k).and_then(num);
    let Some(beta) = get("pair_hedge_ratio") else {
        return Vec::new();
    };
    let legs = m
        .other
        .get("pair_legs")
        .and_then(Value::as_str)
        .unwrap_or("");
    let (a, b) = legs.split_once('/').unwrap_or(("first leg", "second leg"));
    let z_date = m
        .other
        .get("pair_zscore_date")
        .and_then(Value::as_str)
        .unwrap_or(period)
        .to_string();
    let text = |k: &str| m.other.get(k).and_then(Value::as_str).unwrap_or("");
    let fixed = text("pair_hedge") == "cointegration";
    let how = if fixed {
        format!(
            "Engle–Granger on the formation window {} to {}, held fixed",
            text("pair_formation_start"),
            text("pair_formation_end")
        )
    } else {
        "latest".to_string()
    };
    let mut rows = vec![row(
        format!("{label} hedge ratio (β of ln {a} on ln {b}, {how})"),
        format!("{beta:.4}"),
        z_date.clone(),
    )];
    if let (true, Some(p)) = (fixed, get("pair_coint_p_value")) {
        rows.push(row(
            format!("{label} formation Engle–Granger p-value"),
            format!("{p:.4}"),
            text("pair_formation_end").to_string(),
        ));
    }
    if let Some(z) = get("pair_zscore") {
        rows.push(row(
            format!("{label} spread z-score (latest)"),
            format!("{z:.2}"),
            z_date,
        ));
    }
    rows.push(row(
        format!("{label} spread half-life"),
        get("pair_half_life_bars").map_or("none: the spread did not revert".into(), |h| {
            format!("{h:.1} bars")
        }),
        period,
    ));
    rows
}

/// A result in full, as the single-call planner writes it, with shorter
/// price tables.
fn detail(o: &Outcome<'_>) -> String {
    if is_error(&o.result).is_some() {
        return answer("", o.tool, &o.result);
    }
    let written = match o.tool {
        tool::GET_MARKET_DATA => {
            typed(&o.result).map(|v| prices_answer(&format!("the last {PRICE_ROWS} rows"), &v))
        }
        tool::TECHNICAL_INDICATOR => typed(&o.result).map(|v| indicator_answer(&v)),
        tool::OPTION_PRICE
        | tool::IMPLIED_VOLATILITY
        | tool::OPTION_STRATEGY
        | tool::PORTFOLIO_OPTIMIZE
        | tool::RISK_REPORT => super::quant::answer("", o.tool, &o.result),
        tool::STAT_TEST | tool::VOLATILITY_MODEL => super::stats::answer("", o.tool, &o.result),
        tool::FACTOR_IC | tool::REGRESSION | tool::OVERFITTING => {
            super::factor::answer("", o.tool, &o.result)
        }
        tool::TEARSHEET => super::tearsheet::answer("", &o.result),
        tool::BACKTEST => typed::<BacktestOutput>(&o.result).map(|v| {
            let (label, period) = backtest_label(&o.args);
            backtest_answer(&v).replacen(
                "## Backtest result",
                &format!("## Backtest: {label}, {period}"),
                1,
            )
        }),
        _ => None,
    };
    written.unwrap_or_else(|| answer("", o.tool, &o.result))
}

/// One `### key (task, role)` section of the upstream block.
struct Section<'a> {
    key: &'a str,
    task: &'a str,
    role: &'a str,
    body: &'a str,
}

/// The upstream members' key figures on one board.
fn upstream_board(text: &str) -> Board {
    let mut b = Board::default();
    for s in upstream_sections(text) {
        b.read(s.key, s.body);
    }
    b
}

fn upstream_sections(text: &str) -> Vec<Section<'_>> {
    let Some(re) = SECTION.as_ref() else {
        return Vec::new();
    };
    let heads: Vec<regex::Captures<'_>> = re.captures_iter(text).collect();
    let mut out = Vec::new();
    for (i, c) in heads.iter().enumerate() {
        let (Some(all), Some(key), Some(task), Some(role)) =
            (c.get(0), c.get(1), c.get(2), c.get(3))
        else {
            continue;
        };
        let end = heads
            .get(i + 1)
            .and_then(|n| n.get(0))
            .map_or(text.len(), |m| m.start());
        out.push(Section {
            key: key.as_str(),
            task: task.as_str(),
            role: role.as_str(),
            body: &text[all.end()..end],
        });
    }
    out
}

/// The figures of an upstream answer, at most [`MAX_QUOTED`]: its table
/// rows that hold a number first, then its lines of text with a number.
fn key_figures(body: &str) -> Vec<String> {
    let (mut out, prose) = figures(body);
    for p in prose {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out.truncate(MAX_QUOTED);
    out
}

/// The rows of an offline member's key-figures table, as "label: value
/// (as of, tool)": when an answer has one, it holds every figure with the
/// label that says what it is (detail tables below it repeat them without
/// their subject: "final portfolio value" of which run?).
fn key_table(body: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut seen = false;
    for line in body.lines().map(str::trim) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells == ["figure", "value", "as of", "tool"] {
            seen = true;
            continue;
        }
        if !seen {
            continue;
        }
        if !line.starts_with('|') {
            break;
        }
        if let [name, value, as_of, tool] = cells.as_slice()
            && !name.chars().all(|c| "-: ".contains(c))
        {
            let rest: Vec<&str> = [*as_of, *tool]
                .into_iter()
                .filter(|c| !c.is_empty())
                .collect();
            out.push(format!("{name}: {value} ({})", rest.join(", ")));
        }
    }
    seen.then_some(out)
}

/// Every figure of an answer, in its order: table rows that hold a number
/// in a value column ("label: value (as of, tool)"; not a dated history row
/// nor a wide table, and not a detail row repeating a value already
/// quoted), and lines of text with a number (headings, parameters and
/// provenance lines skipped).
fn figures(body: &str) -> (Vec<String>, Vec<String>) {
    if let Some(rows) = key_table(body) {
        return (rows, Vec::new());
    }
    let lines: Vec<&str> = body.lines().map(str::trim).collect();
    let is_separator =
        |l: &str| l.starts_with('|') && l.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '));
    let has_digit = |s: &str| s.chars().any(|c| c.is_ascii_digit());
    let (mut table, mut prose): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for (i, line) in lines.iter().enumerate() {
        if !line.starts_with('|') {
            let skip = line.starts_with('#')
                || line.starts_with("Rule (docs")
                || line.ends_with(':')
                || line.starts_with("Parameters")
                || line.starts_with("Data:");
            let text = crate::text::one_line(line.trim_start_matches(['-', '*', ' ']), 240);
            if !skip && has_digit(line) && !prose.contains(&text) {
                prose.push(text);
            }
            continue;
        }
        let header = lines.get(i + 1).is_some_and(|n| is_separator(n));
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let (Some(name), Some(value)) = (cells.first(), cells.get(1)) else {
            continue;
        };
        let dated = IS_DATE.as_ref().is_some_and(|re| re.is_match(name));
        if is_separator(line) || header || dated || cells.len() > 4 {
            continue;
        }
        if !cells[1..].iter().any(|c| has_digit(c)) {
            continue;
        }
        let repeated = cells.len() < 4 && table.iter().any(|f| f.contains(&format!(": {value}")));
        let rest: Vec<&str> = cells[2..]
            .iter()
            .copied()
            .filter(|c| !c.is_empty())
            .collect();
        let figure = if rest.is_empty() {
            format!("{name}: {value}")
        } else {
            format!("{name}: {value} ({})", rest.join(", "))
        };
        if !repeated && !table.contains(&figure) {
            table.push(figure);
        }
    }
    (table, prose)
}

/// A short, mechanical reading of the figures: the usual RSI lines, MACD
/// against its signal, the close against its averages, the deepest
/// decline and the best Sharpe anyone reported, and where the quoted
/// figures come from. No model weighed them, and the text says so.
fn reading(outcomes: &[Outcome<'_>], sections: &[Section<'_>]) -> String {
    let mut lines = indicator_reading(outcomes);
    lines.extend(drawdown_reading(outcomes, sections));
    lines.extend(sharpe_reading(outcomes, sections));
    if !sections.is_empty() {
        let keys: Vec<String> = sections.iter().map(|s| format!("`{}`", s.key)).collect();
        lines.push(format!(
            "The figures quoted from {} are those members' own tool results; their run dirs hold the traces.",
            keys.join(", ")
        ));
    }
    let mut out = String::from("## Reading\n\n");
    for l in lines {
        out.push_str(&format!("- {l}\n"));
    }
    out.push_str("\nWritten by the offline planner: no language model weighed these figures, so this lists evidence and does not judge it. It is analysis, not advice.\n");
    out
}

/// RSI against its usual lines, MACD against its signal, and the last
/// close against each moving average of the same day.
fn indicator_reading(outcomes: &[Outcome<'_>]) -> Vec<String> {
    let closes: Vec<(String, String, f64)> = outcomes
        .iter()
        .filter(|o| o.tool == tool::GET_MARKET_DATA)
        .filter_map(|o| {
            let v: MarketDataOutput = typed(&o.result)?;
            let s = v.summary?;
            Some((v.symbol, s.last_date, s.last_close?))
        })
        .collect();
    let mut lines = Vec::new();
    for o in outcomes
        .iter()
        .filter(|o| o.tool == tool::TECHNICAL_INDICATOR)
    {
        let Some(v) = typed::<IndicatorOutput>(&o.result) else {
            continue;
        };
        let date = v.latest.get("date").and_then(Value::as_str).unwrap_or("?");
        let get = |k: &str| v.latest.get(k).and_then(num);
        match v.indicator.as_str() {
            "rsi" => {
                if let Some(x) = get("rsi") {
                    let zone = if x >= 70.0 {
                        "at or above 70, the usual overbought line"
                    } else if x <= 30.0 {
                        "at or below 30, the usual oversold line"
                    } else {
                        "between the usual 30 and 70 lines"
                    };
                    lines.push(format!("{} RSI {x:.1} on {date} is {zone}.", v.symbol));
                }
            }
            "macd" => {
                if let (Some(m), Some(s)) = (get("macd"), get("signal")) {
                    let side = if m >= s { "above" } else { "below" };
                    lines.push(format!(
                        "{} MACD {m:.4} on {date} is {side} its signal line ({s:.4}).",
                        v.symbol
                    ));
                }
            }
            "sma" | "ema" => {
                let average = get(&v.indicator);
                let close = closes
                    .iter()
                    .find(|(sym, day, _)| *sym == v.symbol && day == date);
                if let (Some(a), Some((_, _, c))) = (average, close) {
                    let side = if *c >= a { "above" } else { "below" };
                    lines.push(format!(
                        "{} close {c:.2} on {date} is {side} its {} ({a:.2}).",
                        v.symbol,
                        indicator_label(&v)
                    ));
                }
            }
            _ => {}
        }
    }
    lines
}

/// `<label with drawdown>: <number> %`, as a quoted decline reads.
static QUOTED_DRAWDOWN: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^(.*drawdown[^:]*): (-?\d+(?:\.\d+)?) %").ok());

/// The deepest decline among the member's own figures and those quoted.
fn drawdown_reading(outcomes: &[Outcome<'_>], sections: &[Section<'_>]) -> Option<String> {
    let re = QUOTED_DRAWDOWN.as_ref()?;
    let mut all: Vec<(String, f64)> = Vec::new();
    let mut add = |figure: &str, source: Option<&str>| {
        if let Some(c) = re.captures(figure)
            && let (Some(label), Some(x)) =
                (c.get(1), c.get(2).and_then(|x| x.as_str().parse().ok()))
        {
            let from = source.map(|k| format!(" (`{k}`)")).unwrap_or_default();
            all.push((format!("{}{from}", label.as_str()), x));
        }
    };
    for o in outcomes {
        for r in key_rows(o) {
            add(&format!("{}: {}", r.figure, r.value), None);
        }
    }
    for s in sections {
        for f in figures(s.body).0 {
            add(&f, Some(s.key));
        }
    }
    let (label, x) = all.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
    (*x < 0.0).then(|| format!("The deepest decline reported here: {label}, {x:.2} %."))
}

/// `<label> Sharpe (…): <number> (<period>, …`, as a quoted backtest
/// figure reads.
static QUOTED_SHARPE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (Sharpe(?: \([^)]*\))?): (-?\d+(?:\.\d+)?)(?: \(([^,()]*))?").ok()
});

/// One backtest's Sharpe: whose, over which period, as labelled.
struct Ranked {
    label: String,
    period: String,
    measure: String,
    sharpe: f64,
}

/// Every backtest's Sharpe, the member's own and those quoted from
/// upstream (named by their section key).
fn sharpes(outcomes: &[Outcome<'_>], sections: &[Section<'_>]) -> Vec<Ranked> {
    let mut all: Vec<Ranked> = outcomes
        .iter()
        .filter(|o| o.tool == tool::BACKTEST && is_error(&o.result).is_none())
        .filter_map(|o| {
            let v: BacktestOutput = typed(&o.result)?;
            let m = v.metrics?;
            let (label, period) = backtest_label(&o.args);
            Some(Ranked {
                label,
                period,
                measure: m.sharpe_label(),
                sharpe: m.sharpe?,
            })
        })
        .collect();
    for s in sections {
        for f in figures(s.body).0 {
            let Some(c) = QUOTED_SHARPE.as_ref().and_then(|re| re.captures(&f)) else {
                continue;
            };
            let (Some(label), Some(measure), Some(x)) = (
                c.get(1),
                c.get(2),
                c.get(3).and_then(|x| x.as_str().parse().ok()),
            ) else {
                continue;
            };
            let label = format!("{} (`{}`)", label.as_str(), s.key);
            let period = c.get(4).map_or("", |p| p.as_str()).trim().to_string();
            if !all.iter().any(|r| r.label == label && r.period == period) {
                all.push(Ranked {
                    label,
                    period,
                    measure: measure.as_str().to_string(),
                    sharpe: x,
                });
            }
        }
    }
    all
}

/// The backtests ranked by Sharpe, one list per period (a Sharpe of one
/// period is never ranked against another's: in-sample and out-of-sample
/// results stay apart), and per period which rules beat buy and hold.
fn sharpe_reading(outcomes: &[Outcome<'_>], sections: &[Section<'_>]) -> Vec<String> {
    let all = sharpes(outcomes, sections);
    if all.len() < 2 {
        return Vec::new();
    }
    let mut periods: Vec<&str> = Vec::new();
    for r in &all {
        if !periods.contains(&r.period.as_str()) {
            periods.push(&r.period);
        }
    }
    let mut lines = Vec::new();
    for p in &periods {
        let mut here: Vec<&Ranked> = all.iter().filter(|r| r.period == *p).collect();
        here.sort_by(|a, b| b.sharpe.total_cmp(&a.sharpe));
        let over = if p.is_empty() {
            String::new()
        } else {
            format!(" over {p}")
        };
        if here.len() >= 2 {
            let list: Vec<String> = here
                .iter()
                .enumerate()
                .map(|(i, r)| format!("{}. {} {:.2}", i + 1, r.label, r.sharpe))
                .collect();
            lines.push(format!(
                "Backtests{over} ranked by {}: {}.",
                here[0].measure,
                list.join("; ")
            ));
        }
        if let Some(hold) = here.iter().find(|r| r.label.contains("buy_and_hold")) {
            let beat: Vec<&str> = here
                .iter()
                .filter(|r| !r.label.contains("buy_and_hold") && r.sharpe > hold.sharpe)
                .map(|r| r.label.as_str())
                .collect();
            lines.push(if beat.is_empty() {
                format!(
                    "No rule beat {}{over} on {} ({:.2}).",
                    hold.label, hold.measure, hold.sharpe
                )
            } else {
                format!(
                    "Beat {}{over} on {} ({:.2}): {}.",
                    hold.label,
                    hold.measure,
                    hold.sharpe,
                    beat.join("; ")
                )
            });
        }
    }
    if periods.len() > 1 {
        lines.push(
            "Backtests of different periods are ranked apart: their Sharpes are not compared."
                .into(),
        );
    }
    lines
}

/// Pairs each tool result after the request with the arguments of the
/// call that produced it.
pub(super) fn outcomes<'a>(messages: &'a [crate::model::Message]) -> Vec<Outcome<'a>> {
    let mut args: HashMap<&str, Value> = HashMap::new();
    for m in messages {
        for c in &m.tool_calls {
            let v = serde_json::from_str(&c.function.arguments).unwrap_or(Value::Null);
            args.insert(c.id.as_str(), v);
        }
    }
    messages
        .iter()
        .filter(|m| m.role == crate::model::Role::Tool)
        .map(|m| Outcome {
            tool: m.name.as_deref().unwrap_or(""),
            args: m
                .tool_call_id
                .as_deref()
                .and_then(|id| args.get(id).cloned())
                .unwrap_or(Value::Null),
            result: serde_json::from_str(&m.content)
                .unwrap_or_else(|_| Value::String(m.content.clone())),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Message, ToolCall};

    fn all_tools() -> Vec<String> {
        [
            "get_market_data",
            "technical_indicator",
            "backtest",
            "recall",
            "remember",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// (tool, what it computes) of each planned call.
    fn kinds(calls: &[PlannedCall]) -> Vec<(String, String)> {
        calls
            .iter()
            .map(|c| {
                let what = c.args["indicator"]
                    .as_str()
                    .or(c.args["config"]["strategy"]["name"].as_str())
                    .or(c.args["symbol"].as_str())
                    .or(c.args["query"].as_str())
                    .unwrap_or("");
                (c.name.clone(), what.to_string())
            })
            .collect()
    }

    const BULL: &str = "Make the bull case for AAPL (US equities) over 2008-01-01 to 2012-12-31.\nGet the daily prices of AAPL for the last 60 trading days to 2012-12-31.\nCompute the 50-day SMA and the MACD of AAPL to measure the trend.\nBacktest a 20/50 SMA crossover on AAPL to see whether following the trend paid.\nReport each figure with its date or period, then the three strongest points for the stock.";

    #[test]
    fn sentences_end_at_lines_and_stops_not_inside_numbers() {
        assert_eq!(
            sentences(
                "Backtest X with 0.1% commission. Compute the RSI; get prices?\nNext 2.5 line"
            ),
            vec![
                "Backtest X with 0.1% commission.",
                "Compute the RSI;",
                "get prices?",
                "Next 2.5 line"
            ]
        );
    }

    #[test]
    fn a_member_prompt_is_one_batch_of_the_angles_it_names() {
        let calls = member_calls(BULL, Some(&all_tools()));
        assert_eq!(
            kinds(&calls),
            vec![
                ("get_market_data".into(), "AAPL".into()),
                ("technical_indicator".into(), "sma".into()),
                ("technical_indicator".into(), "macd".into()),
                ("backtest".into(), "sma_crossover".into()),
            ]
        );
        // The last 60 trading days to the one date the sentence names.
        assert_eq!(calls[0].args["end"], "2012-12-31");
        assert_eq!(calls[0].args["last_n"], 60);
        assert!(calls[0].args.get("start").is_none(), "counted by the tool");
        assert_eq!(calls[1].args["params"], json!({"window": 50}));
        assert_eq!(calls[1].args["start"], "2008-01-01", "the request's range");
        assert!(calls[2].args.get("params").is_none(), "MACD's own defaults");
        let cfg = &calls[3].args["config"];
        assert_eq!(cfg["strategy"]["params"], json!({"fast": 20, "slow": 50}));
        assert_eq!(
            (cfg["start_date"].as_str(), cfg["end_date"].as_str()),
            (Some("2008-01-01"), Some("2012-12-31"))
        );
        // Typed as the tools parse them.
        for c in &calls {
            match c.name.as_str() {
                "backtest" => drop(serde_json::from_value::<BacktestArgs>(c.args.clone()).unwrap()),
                "get_market_data" => {
                    drop(serde_json::from_value::<MarketDataArgs>(c.args.clone()).unwrap())
                }
                _ => drop(serde_json::from_value::<IndicatorArgs>(c.args.clone()).unwrap()),
            }
        }
        // Only tools the member has.
        let only = member_calls(BULL, Some(&["backtest".to_string()]));
        assert_eq!(
            kinds(&only),
            vec![("backtest".into(), "sma_crossover".into())]
        );
    }

    #[test]
    fn windows_symbols_and_memory_come_from_each_sentence() {
        let text = "Compute the 50-day SMA and the 200-day SMA of MSFT from 2010-01-01 to 2011-12-31. Compute the Bollinger bands of AAPL and of IBM. Compute the 60-day correlation of AAPL with MSFT. Compute the correlation of each pair of AAPL, MSFT, IBM. Recall what memory holds about AAPL from earlier research. Recall what memory holds about the owner's portfolio preferences.";
        let calls = member_calls(text, None);
        let windows: Vec<&Value> = calls[..2]
            .iter()
            .map(|c| &c.args["params"]["window"])
            .collect();
        assert_eq!(windows, vec![&json!(50), &json!(200)]);
        assert_eq!(calls[0].args["start"], "2010-01-01");
        let bands: Vec<&str> = calls[2..4]
            .iter()
            .map(|c| c.args["symbol"].as_str().unwrap())
            .collect();
        assert_eq!(bands, vec!["AAPL", "IBM"]);
        assert_eq!(
            calls[4].args["params"],
            json!({"with": "MSFT", "window": 60})
        );
        // Each pair, without the one already asked for, capped by MAX_CALLS.
        assert_eq!(
            (
                calls[5].args["symbol"].as_str(),
                calls[5].args["params"]["with"].as_str()
            ),
            (Some("AAPL"), Some("IBM"))
        );
        assert_eq!(calls.len(), MAX_CALLS);
        let memory = member_calls(&text[text.find("Recall").unwrap()..], None);
        assert_eq!(
            kinds(&memory),
            vec![
                ("recall".into(), "AAPL".into()),
                ("recall".into(), "owner's portfolio preferences".into())
            ]
        );
        // Without `recall`, `remember` recalls.
        let fallback = member_calls(
            "Recall what memory holds about IBM. Compute the RSI of IBM.",
            Some(&["remember".to_string(), "technical_indicator".to_string()]),
        );
        assert_eq!(
            fallback[0].args,
            json!({"action": "recall", "query": "IBM"})
        );
    }

    /// A decider's sentences mention the figures it weighs; only an
    /// instruction asks for data.
    #[test]
    fn mentions_call_nothing_and_plain_requests_stay_single() {
        let decider = "Weigh the backtests and the drawdown each member reported for AAPL. Report the backtest's Sharpe and the RSI with dates. Set the volatility readings below against those prices.";
        assert!(member_calls(decider, None).is_empty());
        for plain in [
            "RSI of IBM",
            "backtest a 20/50 SMA crossover on AAPL from 2005 to 2012",
            "backtest bollinger reversion on GOOG and MSFT 2006-2010 with fees of 10 bp and 5bps slippage",
            "Bollinger bands of MSFT and IBM",
            "show MSFT's last 30 days in 2010",
            "what do you remember about fees?",
            "Remember that I prefer 10 bp fees.",
            "compact",
        ] {
            assert!(!is_member(plain), "{plain}");
        }
        assert!(is_member(BULL));
        assert!(is_member(&format!(
            "{decider}\n\n## Upstream results\n\n### a (t, r)\nx 1\n"
        )));
    }

    fn upstream(sections: &[(&str, &str, &str, &str)]) -> String {
        let mut out = String::from("## Upstream results\n");
        for (key, task, role, body) in sections {
            out.push_str(&format!("\n### {key} ({task}, {role})\n{body}\n"));
        }
        out
    }

    #[test]
    fn a_decider_quotes_each_upstream_section_under_its_key() {
        let bull = "## Findings on AAPL\n\n| figure | value | as of | tool |\n|---|---|---|---|\n| AAPL close | 69.01 | 2012-12-31 | get_market_data |\n| AAPL sma_crossover(20/50) Sharpe (annualized, rf 0 %) | 1.15 | 2008-01-01 to 2012-12-31 | backtest |\n\n## Detail\n\n| metric | value |\n|---|---|\n| Sharpe | 1.15 |\n| win rate | 58.33 % |\n\n| date | close |\n|---|---|\n| 2012-12-31 | 69.01 |\n";
        // An answer a model wrote: prose, a nested heading, a cut.
        let bear = "The stock fell 59.88 % from its high to 2009-01-20.\n### Not a section\nRSI peaked at 88.06 on 2012-02-14.\nNo numbers here.\n[cut: 120 of 6120 characters omitted; the full answer is in /runs/x]";
        let message = format!(
            "Weigh both cases on AAPL below. Backtest buy and hold of AAPL from 2008-01-01 to 2012-12-31.\n{}\n\n{}",
            team_rules::line("risk_review"),
            upstream(&[
                ("bull_report", "task-bull", "Bull-side Researcher", bull),
                ("bear_report", "task-bear", "Bear-side Researcher", bear),
            ])
        );
        let own = member_calls(split_upstream(&message).0, None);
        assert_eq!(
            kinds(&own),
            vec![("backtest".into(), "buy_and_hold".into())]
        );
        // No model: the own backtest's result is in, then the answer.
        let hold = json!({"status": "ok", "run_dir": "/r/h", "metrics": {"sharpe": 0.73, "total_return": 1.7452, "max_drawdown": -0.6, "trade_count": 1}});
        let outcomes = vec![Outcome {
            tool: "backtest",
            args: own[0].args.clone(),
            result: hold,
        }];
        let Plan::Answer(text) = plan(&message, &outcomes, &all_tools()) else {
            panic!("an answer");
        };
        for want in [
            "## Risk limits: no decision",
            "| AAPL buy_and_hold Sharpe (annualized, rf 0 %) | 0.73 | 2008-01-01 to 2012-12-31 | backtest |",
            "#### bull_report (task-bull, Bull-side Researcher)",
            "- AAPL close: 69.01 (2012-12-31, get_market_data)",
            "- AAPL sma_crossover(20/50) Sharpe (annualized, rf 0 %): 1.15 (2008-01-01 to 2012-12-31, backtest)",
            "#### bear_report (task-bear, Bear-side Researcher)",
            "- The stock fell 59.88 % from its high to 2009-01-20.",
            "- RSI peaked at 88.06 on 2012-02-14.",
            "- [cut: 120 of 6120 characters omitted; the full answer is in /runs/x]",
            "Beat AAPL buy_and_hold over 2008-01-01 to 2012-12-31 on Sharpe (annualized, rf 0 %) (0.73): AAPL sma_crossover(20/50) (`bull_report`).",
            "The deepest decline reported here: AAPL buy_and_hold max drawdown, -60.00 %.",
            "not advice",
        ] {
            assert!(text.contains(want), "{want} in:\n{text}");
        }
        assert!(
            !text.contains("- Sharpe") && !text.contains("- win rate"),
            "detail rows without their subject are not quoted: {text}"
        );
        assert!(
            !text.contains("2012-12-31: 69.01"),
            "a dated history row: {text}"
        );
        assert!(!text.contains("#### Not a section"), "{text}");
        // Nothing of its own to compute: the answer comes at once.
        let only = format!(
            "Weigh both cases.\n\n{}",
            upstream(&[("bull_report", "task-bull", "Bull", bull)])
        );
        match plan(&only, &[], &all_tools()) {
            Plan::Answer(t) => assert!(
                t.contains("#### bull_report (task-bull, Bull)") && t.contains("69.01"),
                "{t}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_rule_line_not_the_keys_chooses_the_decision() {
        let bull = "| AAPL close | 69.01 | 2012-12-31 | get_market_data |\n";
        let sections = upstream(&[
            ("bull_report", "task-bull", "Bull", bull),
            ("bear_report", "task-bear", "Bear", "no figures"),
        ]);
        let answer = |line: &str| {
            let message = format!("Weigh both cases.\n{line}\n\n{sections}");
            // The rule line is no request: nothing to compute.
            match plan(&message, &[], &all_tools()) {
                Plan::Answer(t) => t,
                other => panic!("{other:?}"),
            }
        };
        // The keys are the risk officer's, the line names the pairs desk.
        let pairs = answer(&team_rules::line("pairs"));
        assert!(pairs.starts_with("## Decision: no decision\n"), "{pairs}");
        assert!(!pairs.contains("Risk limits"), "{pairs}");
        let risk = answer(&team_rules::line("risk_review"));
        assert!(risk.starts_with("## Risk limits: no decision\n"), "{risk}");
        // No line, or a name the planner lacks: no verdict at all.
        for none in [answer(""), answer("Decision rule: vibes")] {
            assert!(none.starts_with("## What each member found\n"), "{none}");
        }
    }

    #[test]
    fn results_become_a_table_of_key_figures() {
        let mut msgs = vec![Message::system("s"), Message::user(BULL)];
        let calls = member_calls(BULL, None);
        let tool_calls: Vec<ToolCall> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| ToolCall::new(format!("c{i}"), c.name.clone(), c.args.to_string()))
            .collect();
        msgs.push(Message::assistant_tool_calls("", tool_calls, None));
        let results = [
            json!({"status": "ok", "symbol": "AAPL", "columns": [], "rows": [["2012-12-28", 1.0, 1.0, 1.0, 66.08, 1.0], ["2012-12-31", 1.0, 1.0, 1.0, 69.01, 1.0]], "total": 2, "offset": 0, "returned": 2, "complete": true,
                   "summary": {"first_date": "2012-09-24", "last_date": "2012-12-31", "first_close": 89.16, "last_close": 69.01, "min_close": 66.08, "max_close": 89.16},
                   "provenance": {"symbol": "AAPL", "source": "embedded", "rows": 67, "adjustments": []}}),
            json!({"status": "ok", "symbol": "AAPL", "indicator": "sma", "params": {"window": 50}, "latest": {"date": "2012-12-31", "sma": 72.6577},
                   "extremes": {"sma": {"min": 11.5544, "min_date": "2009-01-28", "max": 85.4026, "max_date": "2012-10-22"}}, "columns": ["date", "sma"], "tail": [], "rows": 1259, "warmup_nan_rows": 49,
                   "provenance": {"symbol": "AAPL", "source": "embedded", "rows": 1259, "adjustments": []}}),
            json!({"status": "error", "error": "no data for AAPL"}),
            json!({"status": "ok", "run_dir": "/r/bt", "metrics": {"total_return": 2.4273, "annual_return": 0.2796, "sharpe": 1.15, "max_drawdown": -0.393, "trade_count": 12}}),
        ];
        for (i, (c, r)) in calls.iter().zip(results).enumerate() {
            msgs.push(Message::tool_result(
                format!("c{i}"),
                c.name.clone(),
                r.to_string(),
            ));
        }
        let Plan::Answer(text) = super::super::plan(&msgs, &all_tools()) else {
            panic!("an answer once the results are in");
        };
        for want in [
            "## Findings on AAPL",
            "| AAPL close | 69.01 | 2012-12-31 | get_market_data |",
            "| AAPL close change | -22.60 % | 2012-09-24 to 2012-12-31 | get_market_data |",
            "| AAPL SMA(50) latest | 72.6577 | 2012-12-31 | technical_indicator |",
            "| AAPL SMA(50) lowest | 11.5544 | 2009-01-28 | technical_indicator |",
            "| technical_indicator failed | no data for AAPL |  | technical_indicator |",
            "| AAPL sma_crossover(20/50) total return | 242.73 % | 2008-01-01 to 2012-12-31 | backtest |",
            "| AAPL sma_crossover(20/50) Sharpe (annualized, rf 0 %) | 1.15 | 2008-01-01 to 2012-12-31 | backtest |",
            "## Backtest: AAPL sma_crossover(20/50), 2008-01-01 to 2012-12-31",
            "AAPL close 69.01 on 2012-12-31 is below its SMA(50) (72.66).",
            "The deepest decline reported here: AAPL sma_crossover(20/50) max drawdown, -39.30 %.",
            "no language model weighed these figures",
        ] {
            assert!(text.contains(want), "{want} in:\n{text}");
        }
    }
}
