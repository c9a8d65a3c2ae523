//! The `offline` provider: no language model, a small deterministic planner.
//! With no model configured, plain requests — backtest a built-in strategy
//! on a symbol, show prices, compute an indicator, remember, recall, compact
//! — are mapped onto the real tools, and the answer is written from their
//! results. Anything else gets a short, honest reply naming how to connect a
//! model. It speaks the same chunk stream as a model, so the loop, the
//! scheduler, the trace and the UI treat it like any other provider.

use std::sync::LazyLock;

use chrono::NaiveDate;
use futures_util::future::BoxFuture;
use futures_util::stream;
use regex::Regex;
use serde_json::{Value, json};

use super::{ChatRequest, ChunkStream, LlmError, Provider, StreamChunk};
use crate::model::{HANDOFF_PREFIX, Message, Role};

pub const OFFLINE: &str = "offline";

/// Symbols of the embedded dataset: served locally, never fetched.
const EMBEDDED: [&str; 5] = ["AAPL", "MSFT", "IBM", "GOOG", "FB"];

pub const CONNECT_HELP: &str = "To ask anything else, connect a model: run `vibedesk doctor` for the setup, or for example `export DEEPSEEK_API_KEY=...` and start with `--provider deepseek` (or `--provider ollama --model qwen3:8b` for a local server).";

#[derive(Default)]
pub struct OfflineProvider;

impl OfflineProvider {
    pub fn new() -> Self {
        OfflineProvider
    }
}

/// One planned tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedCall {
    pub name: String,
    pub args: Value,
}

/// What the planner decided for the current turn.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    Call(PlannedCall),
    Answer(String),
}

impl Provider for OfflineProvider {
    fn name(&self) -> &str {
        OFFLINE
    }

    fn model(&self) -> &str {
        "offline-planner"
    }

    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChunkStream, LlmError>> {
        let offered: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
        let plan = plan_request(&request.messages, &offered, request.user_request.as_deref());
        let chunks: Vec<Result<StreamChunk, LlmError>> = match plan {
            Plan::Call(call) => vec![
                Ok(StreamChunk::ToolCallDelta {
                    index: 0,
                    id: Some(format!("offline_{}", request.messages.len())),
                    name: Some(call.name),
                    arguments: call.args.to_string(),
                }),
                Ok(StreamChunk::Finish("tool_calls".into())),
            ],
            Plan::Answer(text) => {
                let mut v: Vec<Result<StreamChunk, LlmError>> = split_lines(&text)
                    .into_iter()
                    .map(|l| Ok(StreamChunk::Text(l)))
                    .collect();
                v.push(Ok(StreamChunk::Finish("stop".into())));
                v
            }
        };
        Box::pin(async move { Ok(Box::pin(stream::iter(chunks)) as ChunkStream) })
    }
}

fn split_lines(text: &str) -> Vec<String> {
    text.split_inclusive('\n').map(String::from).collect()
}

/// The turn's own request and where it is: the last user message that is
/// not engine steering, a background report or a compaction summary, without
/// recalled memories. `given` (the request as the user wrote it) wins for
/// the text; when compaction summarised the user's message away, the
/// request is placed at the summary, so later tool results still count.
fn user_request(messages: &[Message], given: Option<&str>) -> Option<(usize, String)> {
    let is_user = |m: &Message| m.role == Role::User;
    let handoff = messages
        .iter()
        .rposition(|m| is_user(m) && m.content.starts_with(HANDOFF_PREFIX));
    let own = messages.iter().enumerate().rev().find_map(|(i, m)| {
        let t = m.content.trim_start();
        (is_user(m)
            && !t.starts_with("<system>")
            && !t.starts_with("<background-results>")
            && !m.content.starts_with(HANDOFF_PREFIX))
        .then_some(i)
    });
    match (own, given) {
        (Some(i), Some(text)) if handoff.is_none_or(|h| i > h) => {
            Some((i, text.trim().to_string()))
        }
        (_, Some(text)) => Some((handoff.unwrap_or(0), text.trim().to_string())),
        (Some(i), None) => Some((i, strip_recall(&messages[i].content))),
        (None, None) => None,
    }
}

fn strip_recall(text: &str) -> String {
    match text.find("</recalled-memories>") {
        Some(end) => text[end + "</recalled-memories>".len()..]
            .trim()
            .to_string(),
        None => text.trim().to_string(),
    }
}

/// Decides the next step from the conversation: a tool call for the request,
/// or, once its results are in, the answer written from them.
pub fn plan(messages: &[Message], offered: &[String]) -> Plan {
    plan_request(messages, offered, None)
}

/// [`plan`] for the request as the user wrote it, when it is known.
pub fn plan_request(messages: &[Message], offered: &[String], request: Option<&str>) -> Plan {
    let Some((at, request)) = user_request(messages, request) else {
        return Plan::Answer(format!(
            "I did not find a request to work on. {CONNECT_HELP}"
        ));
    };
    let results: Vec<(&str, Value)> = messages[at + 1..]
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| {
            let v = serde_json::from_str(&m.content)
                .unwrap_or_else(|_| Value::String(m.content.clone()));
            (m.name.as_deref().unwrap_or(""), v)
        })
        .collect();
    if let Some((tool, result)) = results.last() {
        return Plan::Answer(answer(&request, tool, result));
    }
    match intent(&request) {
        Some(call) if offered.contains(&call.name) => Plan::Call(call),
        Some(call) => Plan::Answer(format!(
            "That needs the `{}` tool, which is not available in this session. {CONNECT_HELP}",
            call.name
        )),
        None => Plan::Answer(unsupported(&request)),
    }
}

fn unsupported(request: &str) -> String {
    let preview: String = request.chars().take(80).collect();
    format!(
        "I am the offline planner: no language model is connected, so I can't answer \"{preview}\" myself.\n\nOffline I can run these on the real tools and the built-in data (AAPL, MSFT, IBM, GOOG, FB, 2000-2013):\n\n- **backtest**: \"backtest a 20/50 SMA crossover on AAPL from 2005 to 2012\" (also EMA crossover, RSI mean reversion, momentum, breakout, Bollinger reversion, buy and hold)\n- **prices**: \"show MSFT's last 30 days in 2010\"\n- **indicators**: \"RSI of IBM\", \"20-day SMA of GOOG in 2011\", \"MACD of AAPL\"\n- **memory**: \"remember that I prefer 10 bp fees\", \"what do you remember about fees\"\n- **context**: \"compact\"\n\n{CONNECT_HELP}\n"
    )
}

static YEAR: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"\b(19[89]\d|20\d\d)\b").ok());
static DATE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\b(\d{4}-\d{2}-\d{2})\b").ok());
static PAIR: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\b(\d{1,3})\s*/\s*(\d{1,3})\b").ok());
static WINDOW: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\b(\d{1,3})\s*-?\s*(?:day|bar|period|d)\b").ok());
/// Ticker-shaped words ("AAPL", "BRK.B", "ibm").
static WORD: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\b([A-Za-z]{1,5}(?:[.-][A-Za-z]{1,3})?)\b").ok());
/// "0.2% commission", "10 bp fees", "5 bps of slippage".
static COST_AFTER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>%|percent|bps?\b|basis points?)\s*(?:of\s+|in\s+)?(?P<kind>commissions?|fees?|slippage)").ok()
});
/// "commission of 0.2%", "fees: 10bp", "slippage 0.05 %".
static COST_BEFORE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)(?P<kind>commissions?|fees?|slippage)\s*(?:of|at|=|:|is)?\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>%|percent|bps?\b|basis points?)").ok()
});
static LAST_N: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\blast\s+(\d{1,4})\s+(?:trading\s+)?(?:days|sessions|bars|rows)").ok()
});

/// Words in capitals that are not tickers (abbreviations, and the short
/// words of a request typed in capitals).
const NOT_TICKERS: &[&str] = &[
    "A", "AI", "ALL", "AND", "ANY", "API", "ATH", "ATR", "BB", "BP", "BPS", "BUT", "BUY", "CAGR",
    "CEO", "CNY", "CPI", "CSV", "DATA", "DAYS", "DD", "EMA", "EOD", "EPS", "ETF", "EU", "EUR",
    "FED", "FOMC", "FOR", "FROM", "GBP", "GDP", "HK", "HOLD", "I", "IN", "IPO", "IS", "IT", "JPY",
    "LAST", "LLM", "LONG", "MA", "MACD", "MY", "NAV", "NOT", "NYSE", "OF", "OHLC", "OK", "ON",
    "OR", "OVER", "P", "PE", "PNL", "PRICE", "QOQ", "ROI", "RSI", "S", "SEC", "SELL", "SHORT",
    "SHOW", "SMA", "THAT", "THE", "THIS", "TO", "TREND", "UK", "US", "USA", "USD", "VS", "WHAT",
    "WITH", "YEAR", "YOY", "YTD",
];

/// Every ticker the request names, in the order named: words in capitals
/// that are not common abbreviations, and the embedded tickers in any case
/// ("aapl, msft").
fn symbols(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let Some(re) = WORD.as_ref() else {
        return out;
    };
    for m in re.find_iter(text) {
        let w = m.as_str();
        let upper = w.to_ascii_uppercase();
        let capitals = w == upper && w.bytes().any(|b| b.is_ascii_alphabetic());
        let named = EMBEDDED.contains(&upper.as_str())
            || (capitals && !NOT_TICKERS.contains(&upper.as_str()));
        if named && !out.contains(&upper) {
            out.push(upper);
        }
    }
    out
}

/// The one symbol of a price or indicator request: the first embedded
/// ticker named, else the first ticker.
fn symbol(text: &str) -> Option<String> {
    let all = symbols(text);
    all.iter()
        .find(|s| EMBEDDED.contains(&s.as_str()))
        .or(all.first())
        .cloned()
}

/// Commission and slippage rates named in the request ("0.2% commission",
/// "fees of 10 bp", "5bps slippage"), as fractions.
fn cost_rates(text: &str) -> (Option<f64>, Option<f64>) {
    let (mut commission, mut slippage) = (None, None);
    let rate = |value: &str, unit: &str| -> Option<f64> {
        let v: f64 = value.parse().ok()?;
        Some(if unit.starts_with('%') || unit.starts_with("per") {
            v / 100.0
        } else {
            v / 10_000.0
        })
    };
    for re in [COST_AFTER.as_ref(), COST_BEFORE.as_ref()]
        .into_iter()
        .flatten()
    {
        for c in re.captures_iter(text) {
            let (Some(value), Some(unit), Some(kind)) =
                (c.name("value"), c.name("unit"), c.name("kind"))
            else {
                continue;
            };
            let r = rate(value.as_str(), &unit.as_str().to_ascii_lowercase());
            if kind.as_str().to_ascii_lowercase().starts_with("slip") {
                slippage = slippage.or(r);
            } else {
                commission = commission.or(r);
            }
        }
    }
    (commission, slippage)
}

/// A date range from explicit dates, or years ("from 2005 to 2012", "in 2010").
fn date_range(text: &str) -> (Option<String>, Option<String>) {
    if let Some(re) = DATE.as_ref() {
        let dates: Vec<String> = re
            .captures_iter(text)
            .filter_map(|c| c.get(1))
            .map(|m| m.as_str().to_string())
            .collect();
        if dates.len() >= 2 {
            return (Some(dates[0].clone()), Some(dates[1].clone()));
        }
    }
    let years: Vec<i32> = YEAR
        .as_ref()
        .map(|re| {
            re.captures_iter(text)
                .filter_map(|c| c.get(1)?.as_str().parse().ok())
                .collect()
        })
        .unwrap_or_default();
    match years.as_slice() {
        [] => (None, None),
        [y] => (Some(format!("{y}-01-01")), Some(format!("{y}-12-31"))),
        [a, b, ..] => (
            Some(format!("{}-01-01", a.min(b))),
            Some(format!("{}-12-31", a.max(b))),
        ),
    }
}

fn source_for(sym: &str) -> &'static str {
    if EMBEDDED.contains(&sym) {
        "embedded"
    } else {
        "auto"
    }
}

/// The spellings of buy-and-hold.
const BUY_AND_HOLD: [&str; 3] = ["buy and hold", "buy-and-hold", "buy & hold"];

/// Words that make a request a backtest without saying so ("momentum
/// strategy on AAPL", "SMA crossover on IBM"), besides buy-and-hold.
const STRATEGY_WORDS: [&str; 6] = [
    "strategy",
    "crossover",
    "cross-over",
    "reversion",
    "breakout",
    "trading rule",
];

fn has(text: &str, words: &[&str]) -> bool {
    let l = text.to_lowercase();
    words.iter().any(|w| l.contains(w))
}

/// Maps a plain request onto one tool call.
pub fn intent(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    let trimmed = lower.trim().trim_start_matches('/');
    if trimmed == "compact"
        || trimmed.starts_with("compact ")
        || lower.contains("compact the context")
    {
        let focus = trimmed
            .strip_prefix("compact")
            .unwrap_or("")
            .trim()
            .to_string();
        return Some(PlannedCall {
            name: "compact".into(),
            args: if focus.is_empty() {
                json!({})
            } else {
                json!({"focus_topic": focus})
            },
        });
    }
    if let Some(rest) = remember_text(text) {
        let title: String = rest
            .split_whitespace()
            .take(8)
            .collect::<Vec<_>>()
            .join(" ");
        return Some(PlannedCall {
            name: "remember".into(),
            args: json!({"action": "save", "title": title, "content": rest, "memory_type": "user"}),
        });
    }
    if let Some(query) = recall_query(&lower) {
        return Some(PlannedCall {
            name: "remember".into(),
            args: json!({"action": "recall", "query": query}),
        });
    }
    let sym = symbol(text)?;
    let (start, end) = date_range(text);
    if has(text, &["backtest", "back-test", "back test", "simulate"])
        || has(text, &STRATEGY_WORDS)
        || has(text, &BUY_AND_HOLD)
    {
        return Some(PlannedCall {
            name: "backtest".into(),
            args: json!({"config": backtest_config(text, &symbols(text), start, end)}),
        });
    }
    if let Some(indicator) = indicator_name(&lower) {
        let mut args =
            json!({"symbol": sym, "indicator": indicator, "source": source_for(&sym), "tail": 10});
        if let Some(w) = WINDOW
            .as_ref()
            .and_then(|re| re.captures(text))
            .and_then(|c| c.get(1)?.as_str().parse::<u32>().ok())
        {
            let key = if matches!(indicator, "rsi" | "atr") {
                "period"
            } else {
                "window"
            };
            args["params"] = json!({ key: w });
        }
        if let Some(s) = start {
            args["start"] = json!(s);
        }
        if let Some(e) = end {
            args["end"] = json!(e);
        }
        return Some(PlannedCall {
            name: "technical_indicator".into(),
            args,
        });
    }
    if has(
        text,
        &[
            "show", "price", "prices", "data", "ohlc", "quote", "bars", "close", "last",
        ],
    ) {
        let mut args = json!({"symbol": sym, "source": source_for(&sym)});
        let last_n = LAST_N
            .as_ref()
            .and_then(|re| re.captures(text))
            .and_then(|c| c.get(1)?.as_str().parse::<i64>().ok());
        match (start, end, last_n) {
            (_, Some(e), Some(n)) => {
                // Enough calendar days for n trading days, then the answer keeps the last n.
                let end_date = NaiveDate::parse_from_str(&e, "%Y-%m-%d").ok();
                if let Some(d) = end_date {
                    let from = d - chrono::Duration::days(n * 3 / 2 + 10);
                    args["start"] = json!(from.format("%Y-%m-%d").to_string());
                }
                args["end"] = json!(e);
            }
            (s, e, _) => {
                if let Some(s) = s {
                    args["start"] = json!(s);
                }
                if let Some(e) = e {
                    args["end"] = json!(e);
                }
            }
        }
        return Some(PlannedCall {
            name: "get_market_data".into(),
            args,
        });
    }
    None
}

fn remember_text(text: &str) -> Option<String> {
    let t = text.trim();
    let lower = t.to_lowercase();
    for prefix in ["remember that ", "remember: ", "remember "] {
        if lower.starts_with(prefix) && !lower.starts_with("remember what") {
            let rest = t[prefix.len()..].trim().trim_end_matches('.').to_string();
            return (!rest.is_empty()).then_some(rest);
        }
    }
    None
}

fn recall_query(lower: &str) -> Option<String> {
    for prefix in [
        "what do you remember about ",
        "what do you know about ",
        "recall ",
    ] {
        if let Some(rest) = lower.trim().strip_prefix(prefix) {
            let q = rest.trim().trim_end_matches('?').trim().to_string();
            return (!q.is_empty()).then_some(q);
        }
    }
    (lower.trim().trim_end_matches('?') == "what do you remember")
        .then(|| "preferences".to_string())
}

/// Whether `lower` names `key`: a phrase anywhere, a short word only as a
/// whole word ("rsi" is not in "reversion", nor "ema" in "remains"), a
/// long one also with an ending ("drawdowns").
fn names(lower: &str, key: &str) -> bool {
    if key.contains(' ') {
        return lower.contains(key);
    }
    lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w == key || (key.len() >= 5 && w.starts_with(key)))
}

fn indicator_name(lower: &str) -> Option<&'static str> {
    [
        ("macd", "macd"),
        ("rsi", "rsi"),
        ("bollinger", "bollinger"),
        ("atr", "atr"),
        ("volatility", "volatility"),
        ("drawdown", "drawdown"),
        ("ema", "ema"),
        ("sma", "sma"),
        ("moving average", "sma"),
    ]
    .iter()
    .find(|(k, _)| names(lower, k))
    .map(|(_, v)| *v)
}

/// The `config.json` for a plain backtest request on `codes` (every ticker
/// named: none is dropped silently).
fn backtest_config(
    text: &str,
    codes: &[String],
    start: Option<String>,
    end: Option<String>,
) -> Value {
    let lower = text.to_lowercase();
    let pair = PAIR
        .as_ref()
        .and_then(|re| re.captures(text))
        .and_then(|c| {
            Some((
                c.get(1)?.as_str().parse::<u32>().ok()?,
                c.get(2)?.as_str().parse::<u32>().ok()?,
            ))
        });
    let strategy = if BUY_AND_HOLD.iter().any(|w| lower.contains(w)) {
        json!({"name": "buy_and_hold"})
    } else if names(&lower, "rsi") {
        json!({"name": "rsi_mean_reversion", "params": {"period": 14, "lower": 30, "upper": 70}})
    } else if names(&lower, "bollinger") {
        json!({"name": "bollinger_reversion", "params": {"window": 20, "k": 2.0}})
    } else if names(&lower, "breakout") {
        json!({"name": "breakout", "params": {"window": pair.map_or(20, |p| p.0)}})
    } else if names(&lower, "momentum") {
        json!({"name": "momentum", "params": {"lookback": pair.map_or(126, |p| p.0)}})
    } else {
        let (fast, slow) = pair.map(|(a, b)| (a.min(b), a.max(b))).unwrap_or((20, 50));
        let name = if names(&lower, "ema") {
            "ema_crossover"
        } else {
            "sma_crossover"
        };
        json!({"name": name, "params": {"fast": fast, "slow": slow}})
    };
    let all_embedded = codes.iter().all(|c| EMBEDDED.contains(&c.as_str()));
    let mut cfg = json!({
        "source": if all_embedded { "embedded" } else { "auto" },
        "codes": codes,
        "start_date": start.unwrap_or_else(|| "2005-01-01".into()),
        "end_date": end.unwrap_or_else(|| "2012-12-31".into()),
        "initial_cash": 1_000_000,
        "strategy": strategy,
    });
    // Rates out of range are left to the config check, which says why.
    let (commission, slippage) = cost_rates(text);
    if let Some(c) = commission {
        cfg["commission_rate"] = json!(c);
    }
    if let Some(s) = slippage {
        cfg["slippage"] = json!(s);
    }
    cfg
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn pct(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |x| format!("{:.2} %", x * 100.0))
}

fn fixed(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |x| format!("{x:.2}"))
}

fn provenance_line(v: &Value) -> String {
    let p = &v["provenance"];
    if p.is_null() {
        return String::new();
    }
    let source = p["source"].as_str().unwrap_or("?");
    let rows = p["rows"]
        .as_u64()
        .map(|r| format!(", {r} rows"))
        .unwrap_or_default();
    let adj = p["adjustments"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("; ")
        })
        .filter(|s| !s.is_empty())
        .map(|s| format!(", {s}"))
        .unwrap_or_default();
    format!("\n\nData: {source}{rows}{adj}.")
}

fn is_error(v: &Value) -> Option<String> {
    let failed = matches!(
        v["status"].as_str(),
        Some("error" | "failed" | "timed_out" | "cancelled")
    ) || v["ok"] == Value::Bool(false)
        || v["success"] == Value::Bool(false);
    failed.then(|| {
        v["error"]
            .as_str()
            .or_else(|| v["message"].as_str())
            .map(String::from)
            .unwrap_or_else(|| v.to_string())
    })
}

/// Writes the answer from the tool's result.
pub fn answer(request: &str, tool: &str, v: &Value) -> String {
    if let Some(err) = is_error(v) {
        return format!(
            "The `{tool}` tool reported an error, so I have no figures to give:\n\n> {err}\n"
        );
    }
    match tool {
        "backtest" => backtest_answer(v),
        "get_market_data" => prices_answer(request, v),
        "technical_indicator" => indicator_answer(v),
        "remember" => remember_answer(v),
        "compact" => {
            "Done: the conversation will be compacted into a summary now (watch the gauge).\n"
                .into()
        }
        _ => format!(
            "`{tool}` returned:\n\n```\n{}\n```\n",
            crate::text::preview(&v.to_string(), 2000)
        ),
    }
}

fn backtest_answer(v: &Value) -> String {
    let m = &v["metrics"];
    let get = |k: &str| m.get(k).and_then(num);
    let mut out = String::from("## Backtest result\n\n");
    if let Some(summary) = v["summary"].as_str() {
        out.push_str(summary);
        out.push_str("\n\n");
    }
    out.push_str("| metric | value |\n|---|---|\n");
    let rows: [(&str, String); 8] = [
        ("total return", pct(get("total_return"))),
        ("annual return", pct(get("annual_return"))),
        ("Sharpe", fixed(get("sharpe"))),
        ("max drawdown", pct(get("max_drawdown"))),
        ("win rate", pct(get("win_rate"))),
        (
            "trades",
            get("trade_count").map_or("n/a".into(), |t| format!("{t:.0}")),
        ),
        (
            "final value",
            get("final_value").map_or("n/a".into(), |t| format!("{t:.2}")),
        ),
        ("benchmark return", pct(get("benchmark_return"))),
    ];
    for (k, val) in rows {
        if val != "n/a" || k != "benchmark return" {
            out.push_str(&format!("| {k} | {val} |\n"));
        }
    }
    if let Some(dir) = v["run_dir"].as_str() {
        out.push_str(&format!(
            "\nArtifacts (equity curve, trades, metrics, run card) are in `{dir}`."
        ));
    }
    if let Some(svg) = v["chart"]["svg"].as_str().or_else(|| v["chart"].as_str()) {
        out.push_str(&format!(" Chart: `{svg}`."));
    }
    out.push_str("\n\nFigures come from the backtest tool's run on the data named in the run card; they are analysis, not advice.\n");
    out
}

fn prices_answer(request: &str, v: &Value) -> String {
    let sym = v["symbol"].as_str().unwrap_or("?");
    let rows = v["rows"].as_array().cloned().unwrap_or_default();
    let last_n = LAST_N
        .as_ref()
        .and_then(|re| re.captures(request))
        .and_then(|c| c.get(1)?.as_str().parse::<usize>().ok());
    let shown: Vec<&Value> = match last_n {
        Some(n) => rows.iter().skip(rows.len().saturating_sub(n)).collect(),
        None => rows.iter().skip(rows.len().saturating_sub(30)).collect(),
    };
    if shown.is_empty() {
        return format!("No price rows came back for {sym}.{}", provenance_line(v));
    }
    let mut out = format!(
        "## {sym}: {} daily bars{}\n\n| date | open | high | low | close | volume |\n|---|---|---|---|---|---|\n",
        shown.len(),
        if shown.len() < rows.len() {
            format!(" (the last {} of {})", shown.len(), rows.len())
        } else {
            String::new()
        }
    );
    for r in &shown {
        let cell = |i: usize| r.get(i).cloned().unwrap_or(Value::Null);
        let f = |i: usize| num(&cell(i)).map_or("".into(), |x| format!("{x:.2}"));
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            cell(0).as_str().unwrap_or(""),
            f(1),
            f(2),
            f(3),
            f(4),
            num(&cell(5)).map_or("".into(), |x| format!("{x:.0}"))
        ));
    }
    if let (Some(first), Some(last)) = (shown.first(), shown.last())
        && let (Some(a), Some(b)) = (first.get(4).and_then(num), last.get(4).and_then(num))
        && a > 0.0
    {
        out.push_str(&format!(
            "\nClose moved from {a:.2} to {b:.2} ({:+.2} %) over these bars (split-adjusted).",
            (b / a - 1.0) * 100.0
        ));
    }
    out.push_str(&provenance_line(v));
    out.push('\n');
    out
}

fn indicator_answer(v: &Value) -> String {
    let sym = v["symbol"].as_str().unwrap_or("?");
    let name = v["indicator"].as_str().unwrap_or("indicator");
    let mut out = format!(
        "## {} of {sym}\n\nParameters: `{}`\n\n",
        name.to_uppercase(),
        v["params"]
    );
    if let Some(latest) = v["latest"].as_object() {
        let date = latest.get("date").and_then(Value::as_str).unwrap_or("");
        out.push_str(&format!(
            "Latest ({date}):\n\n| series | value |\n|---|---|\n"
        ));
        for (k, val) in latest {
            if k != "date" {
                out.push_str(&format!(
                    "| {k} | {} |\n",
                    num(val).map_or(val.to_string(), |x| format!("{x:.4}"))
                ));
            }
        }
    }
    if let Some(extremes) = v["extremes"].as_object()
        && !extremes.is_empty()
    {
        let span = match (
            v["provenance"]["first_date"].as_str(),
            v["provenance"]["last_date"].as_str(),
        ) {
            (Some(a), Some(b)) => format!(" ({a} to {b})"),
            _ => String::new(),
        };
        if name == "drawdown"
            && let Some(deepest) = extremes.get("drawdown")
            && let Some(x) = num(&deepest["min"])
        {
            out.push_str(&format!(
                "\nDeepest drawdown{span}: {:.2} % on {}.\n",
                x * 100.0,
                deepest["min_date"].as_str().unwrap_or("?")
            ));
        }
        out.push_str(&format!(
            "\nRange{span}:\n\n| series | lowest | on | highest | on |\n|---|---|---|---|---|\n"
        ));
        for (k, e) in extremes {
            let cell = |key: &str| num(&e[key]).map_or("n/a".to_string(), |x| format!("{x:.4}"));
            out.push_str(&format!(
                "| {k} | {} | {} | {} | {} |\n",
                cell("min"),
                e["min_date"].as_str().unwrap_or(""),
                cell("max"),
                e["max_date"].as_str().unwrap_or("")
            ));
        }
    }
    if let (Some(cols), Some(tail)) = (v["columns"].as_array(), v["tail"].as_array())
        && !tail.is_empty()
    {
        let names: Vec<String> = cols
            .iter()
            .map(|c| c.as_str().unwrap_or("").to_string())
            .collect();
        out.push_str(&format!(
            "\nLast {} rows:\n\n| {} |\n|{}\n",
            tail.len(),
            names.join(" | "),
            "---|".repeat(names.len())
        ));
        for r in tail {
            let cells: Vec<String> = match r {
                Value::Array(a) => a
                    .iter()
                    .map(|c| {
                        num(c).map_or(c.as_str().unwrap_or("").to_string(), |x| format!("{x:.4}"))
                    })
                    .collect(),
                Value::Object(o) => names
                    .iter()
                    .map(|n| {
                        o.get(n).map_or(String::new(), |c| {
                            num(c)
                                .map_or(c.as_str().unwrap_or("").to_string(), |x| format!("{x:.4}"))
                        })
                    })
                    .collect(),
                _ => vec![],
            };
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
    }
    out.push_str(&provenance_line(v));
    out.push('\n');
    out
}

fn remember_answer(v: &Value) -> String {
    if let Some(memories) = v["memories"].as_array() {
        if memories.is_empty() {
            return "I have no memories that match.\n".into();
        }
        let mut out = format!("I remember {}:\n\n", memories.len());
        for m in memories {
            let content: String = m["content"]
                .as_str()
                .unwrap_or("")
                .chars()
                .take(300)
                .collect();
            out.push_str(&format!(
                "- **{}** ({}): {}\n",
                m["title"].as_str().unwrap_or(""),
                m["type"].as_str().unwrap_or(""),
                content
            ));
        }
        return out;
    }
    match v["status"].as_str() {
        Some("skipped") => "I already remember that.\n".into(),
        _ => format!("{}\n", v["message"].as_str().unwrap_or("Saved.")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolCall;

    fn offered() -> Vec<String> {
        [
            "backtest",
            "get_market_data",
            "technical_indicator",
            "remember",
            "compact",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    #[test]
    fn requests_map_onto_tools() {
        let c = intent("backtest a 20/50 SMA crossover on AAPL from 2005 to 2012").unwrap();
        assert_eq!(c.name, "backtest");
        let cfg = &c.args["config"];
        assert_eq!(cfg["codes"], json!(["AAPL"]));
        assert_eq!(cfg["start_date"], "2005-01-01");
        assert_eq!(cfg["end_date"], "2012-12-31");
        assert_eq!(
            cfg["strategy"],
            json!({"name": "sma_crossover", "params": {"fast": 20, "slow": 50}})
        );
        assert_eq!(cfg["source"], "embedded");

        let c = intent("show MSFT's last 30 days in 2010").unwrap();
        assert_eq!(c.name, "get_market_data");
        assert_eq!(c.args["symbol"], "MSFT");
        assert_eq!(c.args["end"], "2010-12-31");
        assert!(c.args["start"].as_str().unwrap().starts_with("2010-11"));

        let c = intent("RSI of IBM").unwrap();
        assert_eq!(
            (c.name.as_str(), c.args["indicator"].as_str()),
            ("technical_indicator", Some("rsi"))
        );
        assert_eq!(c.args["symbol"], "IBM");
        let c = intent("20-day SMA of GOOG in 2011").unwrap();
        assert_eq!(c.args["params"], json!({"window": 20}));
        assert_eq!(c.args["start"], "2011-01-01");

        assert_eq!(intent("compact").unwrap().name, "compact");
        assert_eq!(
            intent("/compact the AAPL part").unwrap().args["focus_topic"],
            "the aapl part"
        );
        let r = intent("Remember that I prefer 10 bp fees.").unwrap();
        assert_eq!(r.args["action"], "save");
        assert_eq!(r.args["content"], "I prefer 10 bp fees");
        let q = intent("what do you remember about fees?").unwrap();
        assert_eq!(q.args, json!({"action": "recall", "query": "fees"}));
        assert!(intent("write me a poem").is_none());
    }

    #[test]
    fn backtests_keep_every_ticker_and_the_costs_named() {
        let rate = |c: &Value, k: &str| c[k].as_f64().unwrap();
        // No "backtest" verb: the strategy word makes it one.
        let c =
            intent("momentum strategy on aapl, msft, ibm from 2003 to 2011 with 0.2% commission")
                .unwrap();
        assert_eq!(c.name, "backtest");
        let cfg = &c.args["config"];
        assert_eq!(cfg["codes"], json!(["AAPL", "MSFT", "IBM"]));
        assert_eq!(cfg["strategy"]["name"], "momentum");
        assert_eq!(cfg["source"], "embedded");
        assert!((rate(cfg, "commission_rate") - 0.002).abs() < 1e-12);
        assert!(cfg.get("slippage").is_none());

        let c = intent(
            "backtest bollinger reversion on GOOG and MSFT 2006-2010 with fees of 10 bp and 5bps slippage",
        )
        .unwrap();
        let cfg = &c.args["config"];
        assert_eq!(cfg["codes"], json!(["GOOG", "MSFT"]));
        // "reversion" holds the letters r-s-i: not the RSI strategy.
        assert_eq!(cfg["strategy"]["name"], "bollinger_reversion");
        assert_eq!(
            (cfg["start_date"].as_str(), cfg["end_date"].as_str()),
            (Some("2006-01-01"), Some("2010-12-31"))
        );
        assert!((rate(cfg, "commission_rate") - 0.001).abs() < 1e-12);
        assert!((rate(cfg, "slippage") - 0.0005).abs() < 1e-12);

        let c = intent("EMA crossover on TSLA and AAPL vs the S&P, commission of 0.3 percent, OK?")
            .unwrap();
        let cfg = &c.args["config"];
        assert_eq!(cfg["codes"], json!(["TSLA", "AAPL"]), "nor OK, VS or S&P");
        assert_eq!(cfg["strategy"]["name"], "ema_crossover");
        assert_eq!(cfg["source"], "auto", "TSLA is not embedded");
        assert!((rate(cfg, "commission_rate") - 0.003).abs() < 1e-12);

        let c = intent("RSI mean reversion on IBM").unwrap();
        assert_eq!(c.args["config"]["strategy"]["name"], "rsi_mean_reversion");
        // Indicators still take one symbol, and whole words only.
        let c = intent("Bollinger bands of MSFT and IBM").unwrap();
        assert_eq!(
            (
                c.name.as_str(),
                c.args["indicator"].as_str(),
                c.args["symbol"].as_str()
            ),
            ("technical_indicator", Some("bollinger"), Some("MSFT"))
        );
        let c = intent("drawdowns of GOOG in 2008").unwrap();
        assert_eq!(c.args["indicator"], "drawdown");
        assert!(intent("what remains of IBM's schema").is_none());
        let c = intent("BACKTEST MSFT FROM 2004 TO 2006 WITH A 10/30 SMA CROSSOVER").unwrap();
        assert_eq!(
            c.args["config"]["codes"],
            json!(["MSFT"]),
            "typed in capitals"
        );
    }

    #[test]
    fn an_indicator_answer_names_the_extremes_of_the_range() {
        let v = json!({"status": "ok", "symbol": "GOOG", "indicator": "drawdown", "params": {},
            "latest": {"date": "2008-12-31", "drawdown": -0.5511},
            "extremes": {"drawdown": {"min": -0.6244, "min_date": "2008-11-24", "max": 0.0, "max_date": "2008-01-02"}},
            "columns": ["date", "drawdown"], "tail": [["2008-12-31", -0.5511]],
            "provenance": {"source": "embedded", "rows": 253, "first_date": "2008-01-02", "last_date": "2008-12-31"}});
        let t = answer("max drawdown of GOOG in 2008", "technical_indicator", &v);
        assert!(
            t.contains("Deepest drawdown (2008-01-02 to 2008-12-31): -62.44 % on 2008-11-24."),
            "{t}"
        );
        assert!(
            t.contains("| drawdown | -0.6244 | 2008-11-24 | 0.0000 | 2008-01-02 |"),
            "{t}"
        );
    }

    #[test]
    fn unknown_requests_get_an_honest_reply() {
        let msgs = vec![
            Message::system("s"),
            Message::user("What is the meaning of life?"),
        ];
        match plan(&msgs, &offered()) {
            Plan::Answer(t) => {
                assert!(
                    t.contains("offline planner") && t.contains("vibedesk doctor"),
                    "{t}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn results_become_the_answer() {
        let mut msgs = vec![
            Message::system("s"),
            Message::user("<recalled-memories>\n- x\n</recalled-memories>\n\nRSI of IBM"),
        ];
        match plan(&msgs, &offered()) {
            Plan::Call(c) => assert_eq!(c.name, "technical_indicator"),
            other => panic!("{other:?}"),
        }
        msgs.push(Message::assistant_tool_calls(
            "",
            vec![ToolCall::new("o1", "technical_indicator", "{}")],
            None,
        ));
        let result = json!({"status": "ok", "symbol": "IBM", "indicator": "rsi", "params": {"period": 14},
            "latest": {"date": "2013-03-01", "rsi": 55.5}, "columns": ["date", "rsi"], "tail": [["2013-03-01", 55.5]],
            "provenance": {"source": "embedded", "rows": 3270}});
        msgs.push(Message::tool_result(
            "o1",
            "technical_indicator",
            result.to_string(),
        ));
        msgs.push(Message::steering("[SYSTEM] wrap up"));
        match plan(&msgs, &offered()) {
            Plan::Answer(t) => {
                assert!(
                    t.contains("RSI of IBM") && t.contains("55.5000") && t.contains("embedded"),
                    "{t}"
                );
            }
            other => panic!("{other:?}"),
        }
        let err = answer(
            "x",
            "backtest",
            &json!({"status": "error", "error": "no data for ZZZ"}),
        );
        assert!(err.contains("no data for ZZZ"));
    }

    #[test]
    fn the_request_is_the_users_own_never_a_compaction_summary() {
        let handoff = format!(
            "{HANDOFF_PREFIX} the full transcript is at /t.jsonl]\n\nThe user wants prices.\n\n<system>Continue.</system>"
        );
        // A summary after the user's request: the request is still the user's.
        let msgs = vec![
            Message::system("s"),
            Message::user("RSI of IBM"),
            Message::user(handoff.clone()),
        ];
        match plan(&msgs, &offered()) {
            Plan::Call(c) => assert_eq!(c.name, "technical_indicator"),
            other => panic!("{other:?}"),
        }
        // The user's message was summarised away: the request given with
        // the call is used, and results after the summary answer it.
        let mut compacted = vec![Message::system("s"), Message::user(handoff)];
        match plan_request(&compacted, &offered(), Some("RSI of IBM")) {
            Plan::Call(c) => assert_eq!(c.name, "technical_indicator"),
            other => panic!("{other:?}"),
        }
        match plan(&compacted, &offered()) {
            Plan::Answer(t) => assert!(t.contains("did not find a request"), "{t}"),
            other => panic!("the summary is not a request: {other:?}"),
        }
        compacted.push(Message::tool_result(
            "o1",
            "technical_indicator",
            json!({"status": "ok", "symbol": "IBM", "indicator": "rsi", "latest": {"date": "2013-03-01", "rsi": 55.5}})
                .to_string(),
        ));
        match plan_request(&compacted, &offered(), Some("RSI of IBM")) {
            Plan::Answer(t) => assert!(t.contains("55.5000"), "{t}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn missing_tools_are_named() {
        let msgs = vec![Message::user("RSI of IBM")];
        match plan(&msgs, &[]) {
            Plan::Answer(t) => assert!(t.contains("technical_indicator")),
            other => panic!("{other:?}"),
        }
    }
}
