//! The offline planner: no language model, a small deterministic planner.
//! With no model configured, plain requests — backtest a built-in strategy
//! on a symbol, show prices, compute an indicator, remember, recall, compact
//! — are mapped onto the real tools, and the answer is written from their
//! results. Anything else gets a short, honest reply naming how to connect a
//! model. The `offline` provider (`llm::offline`) streams its plans
//! as a model would. Calls
//! are built from the tools' argument types and answers read from their
//! output types ([`crate::model::contract`]), so a renamed field is a
//! compile error here rather than an "n/a" in the answer. A research
//! team's member gets a batch of calls and an answer that cites upstream
//! members (the `team` module). Dates are read by their meaning (`dates`),
//! a remembered cost preference applies where a backtest names none
//! (`preferences`), and every backtest answer states its assumptions
//! (docs §2.13).

mod board;
mod dates;
mod factor;
pub mod intents;
mod missing;
mod preferences;
mod quant;
mod rule;
mod screen;
mod stats;
mod sweep;
mod team;
mod tearsheet;
mod verdict;
mod verdict_quant;
mod verdict_teams;

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::model::contract::{
    BacktestArgs, BacktestAssumptions, BacktestMetrics, BacktestOutput, DataSource, DrawdownDates,
    Extremes, IndicatorArgs, IndicatorOutput, MarketDataArgs, MarketDataOutput, MemoryAction,
    MemoryKind, MemoryOutput, PeriodFigures, PriceRow, ProvenanceBrief, RecallArgs, RememberArgs,
    WarmupInfo, adjustment_label,
};
use crate::model::names as tool;
use crate::model::{HANDOFF_PREFIX, Message, Role};
use preferences::RememberedCosts;

/// Whether the embedded offline market holds a ticker (served locally,
/// never fetched): its one list is `model::universe`.
fn embedded(ticker: &str) -> bool {
    crate::model::universe::has(ticker)
}

pub const CONNECT_HELP: &str = "To ask anything else, connect a model: run `vibedesk doctor` for the setup, or for example `export DEEPSEEK_API_KEY=...` and start with `--provider deepseek` (or `--provider ollama --model qwen3:8b` for a local server).";

/// One planned tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedCall {
    pub name: String,
    pub args: Value,
}

impl PlannedCall {
    /// A call of `name` with typed arguments.
    fn typed(name: &str, args: impl Serialize) -> Self {
        PlannedCall {
            name: name.to_string(),
            args: serde_json::to_value(args).unwrap_or_else(|_| json!({})),
        }
    }
}

/// What the planner decided for the current turn.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    Call(PlannedCall),
    /// Several calls in one batch (a team member's angles).
    Calls(Vec<PlannedCall>),
    Answer(String),
    /// No tool offered can serve the request: the text says what is
    /// missing and the nearest request that runs; the run ends
    /// `unsupported` (docs §1.4).
    Unsupported(String),
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
    let remembered = RememberedCosts::from_messages(messages, at);
    if team::is_member(&request) {
        return member_plan(&request, &messages[at + 1..], offered, &remembered);
    }
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
        let text = answer(&request, tool, result);
        let ran = matches!(*tool, tool::BACKTEST | tool::SWEEP) && is_error(result).is_none();
        return Plan::Answer(match remembered.note(&request) {
            Some(note) if ran => after_assumptions(&text, &note),
            _ => text,
        });
    }
    // A topic no tool serves, named outright: before any reading that
    // would answer only a part of it (docs §1.4).
    let named = missing::topic(&request);
    if let Some(topic) = named.filter(|t| t.preempts) {
        return Plan::Unsupported(topic.answer(&embedded_symbols(&request), offered, CONNECT_HELP));
    }
    // "Does this Sharpe survive …": the conversation's last backtest.
    let call = factor::from_context(&request, &messages[..at]).or_else(|| intent(&request));
    if call.is_none()
        && let Some(reply) = factor::needs_a_sharpe(&request)
    {
        return Plan::Answer(reply);
    }
    match call {
        Some(call) if offered.contains(&call.name) => remembered.apply(Plan::Call(call)),
        Some(call) => Plan::Unsupported(format!(
            "That needs the `{}` tool, which is not available in this session. {CONNECT_HELP}",
            call.name
        )),
        None if missing::asks_for_help(&request) => Plan::Answer(help()),
        None => Plan::Unsupported(match named {
            Some(topic) => topic.answer(&embedded_symbols(&request), offered, CONNECT_HELP),
            None => unsupported(&request),
        }),
    }
}

/// The embedded tickers `text` names, in order.
fn embedded_symbols(text: &str) -> Vec<String> {
    symbols(text).into_iter().filter(|s| embedded(s)).collect()
}

/// A team member's step, with the remembered costs in its backtests and
/// said in its answer.
fn member_plan(
    request: &str,
    since: &[Message],
    offered: &[String],
    remembered: &RememberedCosts,
) -> Plan {
    let outcomes = team::outcomes(since);
    let ran_backtest = outcomes.iter().any(|o| o.tool == tool::BACKTEST);
    match remembered.apply(team::plan(request, &outcomes, offered)) {
        Plan::Answer(text) => Plan::Answer(match remembered.member_note() {
            Some(note) if ran_backtest => format!("{}\n\n{note}\n", text.trim_end()),
            _ => text,
        }),
        calls => calls,
    }
}

/// `text` with `note` after its assumptions line (else at its end).
fn after_assumptions(text: &str, note: &str) -> String {
    let at = text
        .find("\nAssumptions: ")
        .and_then(|i| text[i + 1..].find('\n').map(|j| i + 1 + j));
    match at {
        Some(end) => format!("{}\n{note}{}", &text[..end], &text[end..]),
        None => format!("{}\n\n{note}\n", text.trim_end()),
    }
}

/// A line of the help the planner gives: a heading, its example requests
/// (each one the planner serves; the grounding test runs them all) and a
/// note after them.
pub struct HelpLine {
    pub heading: &'static str,
    pub examples: &'static [&'static str],
    pub note: &'static str,
}

/// The planner's help, one line per kind of work.
pub const HELP: &[HelpLine] = &[
    HelpLine {
        heading: "backtest",
        examples: &[
            "backtest a 20/50 SMA crossover on AAPL from 2005 to 2012",
            "Sharpe of SPY from 2005 to 2015",
        ],
        note: "also EMA crossover, RSI mean reversion, momentum, breakout, Bollinger reversion, buy and hold",
    },
    HelpLine {
        heading: "sweeps",
        examples: &[
            "sweep the SMA crossover fast 5 to 30 and slow 50 to 200 on AAPL, MSFT from 2005 to 2015",
            "walk-forward sweep of momentum on IBM",
        ],
        note: "",
    },
    HelpLine {
        heading: "prices",
        examples: &["show MSFT's last 30 days in 2010"],
        note: "",
    },
    HelpLine {
        heading: "indicators",
        examples: &[
            "RSI of IBM",
            "20-day SMA of GOOGL in 2011",
            "MACD of AAPL",
            "correlation of AAPL and MSFT in 2010",
        ],
        note: "",
    },
    HelpLine {
        heading: "options, portfolios, risk",
        examples: &[
            "price a 3-month 110 call on AAPL",
            "optimize AAPL, MSFT, JPM, XOM and KO for minimum variance over 2015–2016",
            "99 % ES of an equal-weight SPY/TLT book in 2008",
            "a 3-month at-the-money straddle on IBM",
        ],
        note: "",
    },
    HelpLine {
        heading: "is the edge real",
        examples: &[
            "IC of 12-1 momentum on the offline universe",
            "beta of AAPL to the market factor 2010–2017",
            "does a Sharpe of 1.4 over 3 years survive 50 trials",
            "Johansen test on KO, PEP and PG",
        ],
        note: "",
    },
    HelpLine {
        heading: "memory",
        examples: &[
            "remember that I prefer 10 bp fees",
            "what do you remember about fees",
        ],
        note: "",
    },
    HelpLine {
        heading: "context",
        examples: &["compact"],
        note: "",
    },
];

/// The help's list of what runs offline, one bullet per [`HELP`] line.
pub fn help_list() -> String {
    let mut out = String::new();
    for line in HELP {
        let examples: Vec<String> = line.examples.iter().map(|e| format!("\"{e}\"")).collect();
        out.push_str(&format!("- **{}**: {}", line.heading, examples.join(", ")));
        if !line.note.is_empty() {
            out.push_str(&format!(" ({})", line.note));
        }
        out.push('\n');
    }
    out
}

/// What runs offline, for a request no topic of [`missing`] names.
const OFFLINE_CAN: &str = "Offline I can run these on the real tools and the built-in data (131 US stocks and ETFs such as AAPL, MSFT, IBM and SPY, 2000-2017; `vibedesk data --list` names them):";

/// The answer to a request the planner cannot serve and knows nothing
/// nearer to: what is missing (a model) and the help.
fn unsupported(request: &str) -> String {
    let preview: String = request.chars().take(80).collect();
    format!(
        "I am the offline planner: no language model is connected, so I can't answer \"{preview}\" myself.\n\n{OFFLINE_CAN}\n\n{}\n{CONNECT_HELP}\n",
        help_list()
    )
}

/// The answer to "help", "what can you do", "hello": the help.
fn help() -> String {
    format!(
        "I am the offline planner: no language model is connected, and I map plain requests onto the real tools.\n\n{OFFLINE_CAN}\n\n{}\n{CONNECT_HELP}\n",
        help_list()
    )
}

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
/// The rolling window of a correlation request that names none (about a
/// quarter of trading days).
const CORRELATION_WINDOW: u32 = 60;
/// Rows a price answer shows when the request names no count.
const SHOWN_PRICE_ROWS: usize = 30;
static LAST_N: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\blast\s+(\d{1,4})\s+(?:trading\s+|daily\s+)?(?:days|sessions|bars|rows|closes|prices|quotes)",
    )
    .ok()
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
/// that are not common abbreviations, and the embedded tickers that are not
/// everyday words in any case ("aapl, msft", not "low").
fn symbols(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let Some(re) = WORD.as_ref() else {
        return out;
    };
    for m in re.find_iter(text) {
        let w = m.as_str();
        let upper = w.to_ascii_uppercase();
        let capitals = w == upper && w.bytes().any(|b| b.is_ascii_alphabetic());
        let named = crate::model::universe::named_in_any_case(&upper)
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
    all.iter().find(|s| embedded(s)).or(all.first()).cloned()
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

/// The period a request names, read by meaning ([`dates`]): never a
/// start after an end.
fn date_range(text: &str) -> (Option<String>, Option<String>) {
    dates::read(text).strings()
}

fn source_for(sym: &str) -> DataSource {
    if embedded(sym) {
        DataSource::Embedded
    } else {
        DataSource::Auto
    }
}

/// The spellings of buy-and-hold.
const BUY_AND_HOLD: [&str; 3] = ["buy and hold", "buy-and-hold", "buy & hold"];

/// Words that make a request a backtest without saying so ("momentum
/// strategy on AAPL", "SMA crossover on IBM"), besides buy-and-hold.
const STRATEGY_WORDS: [&str; 7] = [
    "strategy",
    "spread trade",
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
/// The call a plain request asks for: the first tool whose intent reads
/// it, in the order of [`intents::INTENTS`]; `None` when none does.
pub fn intent(text: &str) -> Option<PlannedCall> {
    let text = mended(text);
    intents::INTENTS.iter().find_map(|i| (i.read)(&text))
}

/// Common misspellings of the words that route a request, and the word
/// meant; matched as whole words in any case (tickers are never on it).
const TYPOS: &[(&str, &str)] = &[
    ("bactest", "backtest"),
    ("backtst", "backtest"),
    ("bakctest", "backtest"),
    ("corelation", "correlation"),
    ("correllation", "correlation"),
    ("corelated", "correlated"),
    ("johanson", "Johansen"),
    ("johannsen", "Johansen"),
    ("volatilty", "volatility"),
    ("volitility", "volatility"),
    ("shapre", "Sharpe"),
    ("optimse", "optimise"),
    ("portfollio", "portfolio"),
    ("porfolio", "portfolio"),
    ("strangel", "strangle"),
    ("stradle", "straddle"),
    ("cointergration", "cointegration"),
    ("garhc", "GARCH"),
];

/// `text` with the misspelt words of [`TYPOS`] mended.
fn mended(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let lower = word.to_lowercase();
        match TYPOS.iter().find(|(typo, _)| *typo == lower) {
            Some((_, meant)) => out.push_str(meant),
            None => out.push_str(word),
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// `compact`, with the focus the request names.
fn compact_read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    let trimmed = lower.trim().trim_start_matches('/');
    if trimmed != "compact"
        && !trimmed.starts_with("compact ")
        && !lower.contains("compact the context")
    {
        return None;
    }
    // "compact the context" names no focus; "compact fees" or "compact
    // the context on fees" do.
    let rest = lower.split_once("compact").map_or("", |(_, r)| r).trim();
    let rest = ["the context", "context"]
        .iter()
        .find_map(|w| rest.strip_prefix(w))
        .unwrap_or(rest)
        .trim();
    let focus = ["focusing on ", "on ", "about "]
        .iter()
        .find_map(|w| rest.strip_prefix(w))
        .unwrap_or(rest)
        .trim()
        .to_string();
    Some(PlannedCall {
        name: tool::COMPACT.into(),
        args: if focus.is_empty() {
            json!({})
        } else {
            json!({"focus_topic": focus})
        },
    })
}

/// `remember`: "remember that …" saves; "what do you remember about …"
/// searches.
fn remember_read(text: &str) -> Option<PlannedCall> {
    if let Some(rest) = remember_text(text) {
        let title: String = rest
            .split_whitespace()
            .take(8)
            .collect::<Vec<_>>()
            .join(" ");
        return Some(PlannedCall::typed(
            tool::REMEMBER,
            RememberArgs {
                action: Some(MemoryAction::Save.as_str().into()),
                title: Some(title),
                content: Some(rest),
                memory_type: Some(MemoryKind::User.as_str().into()),
                ..Default::default()
            },
        ));
    }
    let query = recall_query(&text.to_lowercase())?;
    Some(PlannedCall::typed(
        tool::REMEMBER,
        RememberArgs {
            action: Some(MemoryAction::Recall.as_str().into()),
            query: Some(query),
            ..Default::default()
        },
    ))
}

/// `recall`: "search my memories for …", "recall …".
fn recall_read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    let t = lower.trim();
    let query = ["search my memories for ", "search memories for ", "recall "]
        .iter()
        .find_map(|p| t.strip_prefix(p))?
        .trim()
        .trim_end_matches('?')
        .trim();
    (!query.is_empty()).then(|| {
        PlannedCall::typed(
            tool::RECALL,
            RecallArgs {
                query: query.to_string(),
                ..Default::default()
            },
        )
    })
}

/// `backtest`: a rule named or a backtest asked for on a symbol; "the
/// Sharpe of SPY from 2005 to 2015" holds it, measured as every backtest
/// is (over the T-bill, the assumptions said).
fn backtest_read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    symbol(text)?;
    let (start, end) = date_range(text);
    let asked = has(text, &["backtest", "back-test", "back test", "simulate"])
        || has(text, &STRATEGY_WORDS)
        || has(text, &BUY_AND_HOLD);
    let sharpe_of = names(&lower, "sharpe") || names(&lower, "sortino");
    if !asked && !sharpe_of {
        return None;
    }
    let mut config = backtest_config(text, &symbols(text), start, end);
    if !asked {
        config.insert("strategy".into(), json!({"name": "buy_and_hold"}));
    }
    Some(PlannedCall::typed(
        tool::BACKTEST,
        BacktestArgs {
            config: Some(config),
            ..BacktestArgs::default()
        },
    ))
}

/// `technical_indicator`: "correlation of AAPL and MSFT in 2010" (the
/// rolling correlation of daily returns), or an indicator on a symbol.
fn indicator_read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    let sym = symbol(text)?;
    let (start, end) = date_range(text);
    let window = WINDOW
        .as_ref()
        .and_then(|re| re.captures(text))
        .and_then(|c| c.get(1)?.as_str().parse::<u32>().ok());
    let codes = symbols(text);
    if (names(&lower, "correlation") || names(&lower, "correlated")) && codes.len() >= 2 {
        return Some(PlannedCall::typed(
            tool::TECHNICAL_INDICATOR,
            IndicatorArgs {
                source: Some(source_for(&codes[0]).as_str().into()),
                symbol: codes[0].clone(),
                symbols: None,
                indicator: "correlation".into(),
                params: Some(Map::from_iter([
                    ("with".to_string(), json!(codes[1])),
                    (
                        "window".to_string(),
                        json!(window.unwrap_or(CORRELATION_WINDOW)),
                    ),
                ])),
                start,
                end,
                tail: Some(10),
            },
        ));
    }
    // "SPY's return during 2008": the period's own figures (docs §2.12.1).
    if let Some(call) = period_return(&lower, &sym, &start, &end) {
        return Some(call);
    }
    let indicator = indicator_name(&lower)?;
    let params = window.map(|w| {
        let key = if matches!(indicator, "rsi" | "atr") {
            "period"
        } else {
            "window"
        };
        Map::from_iter([(key.to_string(), json!(w))])
    });
    Some(PlannedCall::typed(
        tool::TECHNICAL_INDICATOR,
        IndicatorArgs {
            source: Some(source_for(&sym).as_str().into()),
            symbol: sym,
            symbols: None,
            indicator: indicator.into(),
            params,
            start,
            end,
            tail: Some(10),
        },
    ))
}

/// `get_market_data`: prices of a symbol. The tool counts the last N rows
/// back from the end (the answer shows the last 30 of a range): never a
/// guess in calendar days.
fn market_data_read(text: &str) -> Option<PlannedCall> {
    let sym = symbol(text)?;
    let words = [
        "show", "price", "prices", "data", "ohlc", "quote", "bars", "close", "last",
    ];
    if !has(text, &words) {
        return None;
    }
    let (start, end) = date_range(text);
    let last_n = LAST_N
        .as_ref()
        .and_then(|re| re.captures(text))
        .and_then(|c| c.get(1)?.as_str().parse::<i64>().ok());
    Some(PlannedCall::typed(
        tool::GET_MARKET_DATA,
        MarketDataArgs {
            source: Some(source_for(&sym).as_str().into()),
            symbol: sym,
            start: if last_n.is_some() { None } else { start },
            end,
            last_n: Some(last_n.unwrap_or(SHOWN_PRICE_ROWS as i64)),
            ..Default::default()
        },
    ))
}

/// A return over a named period ("SPY's return during 2008"): the
/// returns indicator over it, whose answer leads with the period's own
/// return, volatility and drawdown. Another indicator named wins.
fn period_return(
    lower: &str,
    sym: &str,
    start: &Option<String>,
    end: &Option<String>,
) -> Option<PlannedCall> {
    if start.is_none() || !names(lower, "return") || indicator_name(lower).is_some() {
        return None;
    }
    Some(PlannedCall::typed(
        tool::TECHNICAL_INDICATOR,
        IndicatorArgs {
            source: Some(source_for(sym).as_str().into()),
            symbol: sym.to_string(),
            symbols: None,
            indicator: "returns".into(),
            params: None,
            start: start.clone(),
            end: end.clone(),
            tail: Some(10),
        },
    ))
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
    for prefix in ["what do you remember about ", "what do you know about "] {
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

/// The number right after a parameter's name ("fast 10", "slow=100",
/// "lookback of 60"), when one is there and not a range ("fast 5 to 30").
fn named_number(lower: &str, key: &str) -> Option<u32> {
    let re = Regex::new(&format!(
        r"\b{key}\s*(?:=|:|of)?\s*(\d{{1,4}})\b(\s*(?:to|-|–)\s*\d)?"
    ))
    .ok()?;
    let c = re.captures(lower)?;
    if c.get(2).is_some() {
        return None;
    }
    c.get(1)?.as_str().parse().ok()
}

/// "A 60-day breakout": the window a request names in days.
fn day_count(text: &str) -> Option<u32> {
    WINDOW
        .as_ref()?
        .captures(text)?
        .get(1)?
        .as_str()
        .parse()
        .ok()
        .filter(|n| *n > 0)
}

/// The `config.json` for a plain backtest request on `codes` (every ticker
/// named: none is dropped silently).
fn backtest_config(
    text: &str,
    codes: &[String],
    start: Option<String>,
    end: Option<String>,
) -> Map<String, Value> {
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
    } else if names(&lower, "pairs") || lower.contains("spread trade") {
        // docs §7.7: the legs are the first two codes named; a cointegration
        // hedge holds the formation window's Engle–Granger ratio (§16.3).
        let params = stats::pairs_params(&lower)
            .unwrap_or_else(|| json!({"window": 60, "entry": 2.0, "exit": 0.5}));
        json!({"name": "pairs", "params": params})
    } else if names(&lower, "rsi") {
        json!({"name": "rsi_mean_reversion", "params": {"period": 14, "lower": 30, "upper": 70}})
    } else if names(&lower, "bollinger") {
        json!({"name": "bollinger_reversion", "params": {"window": 20, "k": 2.0}})
    } else if names(&lower, "breakout") {
        let window = pair.map(|p| p.0).or_else(|| day_count(text)).unwrap_or(20);
        json!({"name": "breakout", "params": {"window": window}})
    } else if names(&lower, "momentum") {
        let lookback = pair
            .map(|p| p.0)
            .or_else(|| named_number(&lower, "lookback"))
            .or_else(|| day_count(text))
            .unwrap_or(126);
        json!({"name": "momentum", "params": {"lookback": lookback}})
    } else {
        let (fast, slow) = pair.map(|(a, b)| (a.min(b), a.max(b))).unwrap_or((20, 50));
        // "fast 10 slow 100" names each one.
        let (fast, slow) = (
            named_number(&lower, "fast").unwrap_or(fast),
            named_number(&lower, "slow").unwrap_or(slow),
        );
        let name = if names(&lower, "ema") {
            "ema_crossover"
        } else {
            "sma_crossover"
        };
        json!({"name": name, "params": {"fast": fast, "slow": slow}})
    };
    let all_embedded = codes.iter().all(|c| embedded(c));
    let (start, end) = backtest_period(start, end);
    // No initial cash or cost unless the request names one: the tool fills
    // them from `[backtest]` in config.toml, else the market's (docs §7.4).
    let mut cfg = json!({
        "source": if all_embedded { "embedded" } else { "auto" },
        "codes": codes,
        "start_date": start,
        "end_date": end,
        "strategy": strategy,
    });
    // A portfolio optimizer named with the backtest (docs §7.4.2).
    if let Some(m) = quant::optimizer_named(&lower) {
        cfg["optimizer"] = json!(m);
    }
    // Rates out of range are left to the config check, which says why.
    let (commission, slippage) = cost_rates(text);
    if let Some(c) = commission {
        cfg["commission_rate"] = json!(c);
    }
    if let Some(s) = slippage {
        cfg["slippage"] = json!(s);
    }
    match cfg {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The period of a backtest: the one named, else 2005 to 2012. A start
/// alone runs to today (the latest bar there is), an end alone from the
/// earliest history; either way the start is not after the end.
fn backtest_period(start: Option<String>, end: Option<String>) -> (String, String) {
    const EARLIEST: &str = "1990-01-01";
    match (start, end) {
        (Some(s), Some(e)) => (s, e),
        (None, None) => ("2005-01-01".into(), "2012-12-31".into()),
        (Some(s), None) => {
            let today = chrono::Utc::now()
                .date_naive()
                .format("%Y-%m-%d")
                .to_string();
            (s.clone(), today.max(s))
        }
        (None, Some(e)) => (EARLIEST.to_string().min(e.clone()), e),
    }
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

fn provenance_line(p: &ProvenanceBrief) -> String {
    if p.source.is_empty() {
        return String::new();
    }
    let rows = p.rows.map(|r| format!(", {r} rows")).unwrap_or_default();
    let adj = Some(p.adjustments.join("; "))
        .filter(|s| !s.is_empty())
        .map(|s| format!(", {s}"))
        .unwrap_or_default();
    format!("\n\nData: {}{rows}{adj}.", p.source)
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
    let row = intents::of(tool);
    let written = row.and_then(|i| (i.answer)(request, v));
    let text = written.unwrap_or_else(|| {
        format!(
            "`{tool}` returned:\n\n```\n{}\n```\n",
            crate::text::preview(&v.to_string(), 2000)
        )
    });
    // How the request's dates were read, when not as written (docs §2.13).
    let dated = row.is_some_and(|i| i.dated);
    match dated.then(|| dates::read(request).note()).flatten() {
        Some(note) => format!("{note}\n\n{text}"),
        None => text,
    }
}

/// A result as the tool's output type; `None` when it is not one (then
/// the answer shows it as it came).
fn typed<T: DeserializeOwned>(v: &Value) -> Option<T> {
    T::deserialize(v).ok()
}

fn backtest_answer(v: &BacktestOutput) -> String {
    let empty = Default::default();
    let m = v.metrics.as_ref().unwrap_or(&empty);
    let mut out = String::from("## Backtest result\n\n");
    if let Some(summary) = &v.summary {
        out.push_str(summary);
        out.push_str("\n\n");
    }
    out.push_str("| metric | value |\n|---|---|\n");
    let benchmark = v
        .assumptions
        .as_ref()
        .map(|a| format!("benchmark ({}) return", benchmark_name(&a.benchmark)))
        .unwrap_or_else(|| "benchmark return".into());
    let sharpe = m.sharpe_label();
    let rows: [(&str, String); 8] = [
        ("total return", pct(m.total_return)),
        ("annualized return", pct(m.annual_return)),
        (sharpe.as_str(), fixed(m.sharpe)),
        ("max drawdown (peak to trough)", drawdown_cell(m)),
        ("win rate (round trips with a profit)", pct(m.win_rate)),
        (
            "round-trip trades",
            m.trade_count
                .as_ref()
                .and_then(|n| n.as_f64())
                .map_or("n/a".into(), |t| format!("{t:.0}")),
        ),
        (
            "final portfolio value",
            m.final_value.map_or("n/a".into(), |t| format!("{t:.2}")),
        ),
        (&benchmark, pct(m.benchmark_return)),
    ];
    for (k, val) in rows {
        if val != "n/a" || !k.starts_with("benchmark") {
            out.push_str(&format!("| {k} | {val} |\n"));
        }
    }
    // The bars behind the Sharpe: "does this Sharpe survive …" reads them
    // (docs §17.4).
    if let Some(n) = m.other.get("bars").and_then(Value::as_u64) {
        out.push_str(&format!("| bars | {n} |\n"));
    }
    if let Some(a) = &v.assumptions {
        let mut clauses = assumption_clauses(a);
        // Why the benchmark or the risk-free rate is not the default one
        // (docs §7.5), next to the assumption it qualifies.
        let note = |k: &str| m.other.get(k).and_then(Value::as_str).map(str::to_string);
        if let (Some(n), Some(last)) = (note("benchmark_note"), clauses.last_mut()) {
            last.push_str(&format!(" ({n})"));
        }
        if let Some(rf) = note("risk_free") {
            let over = if rf == "treasury_3m" {
                "Sharpe and Sortino over the 3-month Treasury yield"
            } else {
                "Sharpe and Sortino over a zero risk-free rate"
            };
            clauses.push(match note("risk_free_note") {
                Some(n) => format!("{over} ({n})"),
                None => over.to_string(),
            });
        }
        if let Some(w) = &v.warmup {
            clauses.push(warmup_clause(w));
        }
        out.push('\n');
        out.push_str(&assumptions_sentence(a, &clauses));
        out.push('\n');
    }
    if !v.run_dir.is_empty() {
        out.push_str(&format!(
            "\nArtifacts (equity curve, trades, metrics, run card) are in `{}`.",
            v.run_dir
        ));
    }
    if let Some(svg) = v.chart.as_ref().and_then(|c| c.svg.as_ref()) {
        out.push_str(&format!(" Chart: `{svg}`."));
    }
    out.push_str("\n\nFigures come from the backtest tool's run on the data named in the run card; they are analysis, not advice.\n");
    out
}

/// The backtest's max drawdown with its dates when the result names them
/// (docs §7.5): "-23.40 % (peak 2008-01-02, trough 2008-11-20, not
/// recovered by the end)".
fn drawdown_cell(m: &BacktestMetrics) -> String {
    let day = |k: &str| m.other.get(k).and_then(Value::as_str);
    match (day("max_drawdown_peak"), day("max_drawdown_trough")) {
        (Some(peak), Some(trough)) if m.max_drawdown.is_some() => {
            let recovery = day("max_drawdown_recovery").map_or_else(
                || "not recovered by the end".to_string(),
                |r| format!("recovered {r}"),
            );
            format!(
                "{} (peak {peak}, trough {trough}, {recovery})",
                pct(m.max_drawdown)
            )
        }
        _ => pct(m.max_drawdown),
    }
}

/// The warm-up a backtest's signals had (docs §7.4.1), as one clause of
/// its assumptions; a shortfall is said plainly.
fn warmup_clause(w: &WarmupInfo) -> String {
    if w.bars_needed == Some(0) {
        return "no warm-up needed (the signal reads no history)".to_string();
    }
    let needed = w
        .bars_needed
        .map_or_else(|| "all the history".to_string(), |n| format!("{n} bars"));
    let mut s = format!(
        "warm-up: signals computed on {} bars before the start ({needed} needed)",
        w.bars_used
    );
    if let Some(n) = &w.note {
        s.push_str(&format!(", too few: {n}"));
    }
    s
}

/// A rate as a percentage with its basis points: "0.05 % (5 bp)".
fn rate_bp(x: f64) -> String {
    format!("{:.2} % ({} bp)", x * 100.0, fmt_bp(x * 10_000.0))
}

fn fmt_bp(bp: f64) -> String {
    if (bp - bp.round()).abs() < 1e-9 {
        format!("{bp:.0}")
    } else {
        format!("{bp:.2}")
    }
}

/// The benchmark as the run card names it, in words.
fn benchmark_name(b: &str) -> String {
    match b {
        "" => "none named".into(),
        "equal_weight" => "equal-weight buy and hold of the codes".into(),
        t => t.to_string(),
    }
}

/// What a backtest ran on, clause by clause (docs §7.4): costs, lots,
/// shorting, cash, prices, annualisation, benchmark.
fn assumption_clauses(a: &BacktestAssumptions) -> Vec<String> {
    let mut commission = if a.commission_rate == 0.0 && a.min_commission == 0.0 {
        "no commission".to_string()
    } else {
        format!(
            "commission {} of notional per fill",
            rate_bp(a.commission_rate)
        )
    };
    if a.min_commission > 0.0 {
        commission.push_str(&format!(", at least {:.2} per fill", a.min_commission));
    }
    let mut clauses = vec![
        commission,
        format!(
            "slippage {} of the price, against each fill",
            rate_bp(a.slippage)
        ),
    ];
    for (name, x) in [("sell tax", a.sell_tax), ("transfer fee", a.transfer_fee)] {
        if x > 0.0 {
            clauses.push(format!("{name} {}", rate_bp(x)));
        }
    }
    clauses.push(if a.lot_size == 1.0 {
        "whole shares".to_string()
    } else if a.lot_size > 0.0 {
        format!("lots of {} units", a.lot_size)
    } else {
        "fractional quantities".to_string()
    });
    clauses.push(
        if a.allow_short {
            "the market's rules allow short selling (the strategy decides whether it shorts)"
        } else {
            "no short selling"
        }
        .into(),
    );
    clauses.push(format!("initial cash {:.2}", a.initial_cash));
    clauses.push(format!(
        "prices {}",
        adjustment_label(std::slice::from_ref(&a.price_adjustment))
    ));
    clauses.push(format!(
        "returns, Sharpe and volatility annualized over {} bars a year",
        a.bars_per_year
    ));
    if let Some(o) = &a.optimizer {
        clauses.push(format!("weights by the {o}"));
    }
    // Last: a benchmark note is added to this clause.
    clauses.push(format!("benchmark {}", benchmark_name(&a.benchmark)));
    clauses
}

/// The assumptions as one sentence, with where the settings came from.
fn assumptions_sentence(a: &BacktestAssumptions, clauses: &[String]) -> String {
    let mut out = format!("Assumptions: {}.", clauses.join("; "));
    if a.rules_differ {
        out.push_str(" Costs and lots are the first code's; they differ by symbol (the run card lists each).");
    }
    if !a.from_settings.is_empty() {
        out.push_str(&format!(
            " From `[backtest]` in config.toml: {}.",
            a.from_settings.join(", ")
        ));
    }
    out
}

fn prices_answer(request: &str, v: &MarketDataOutput) -> String {
    let sym = if v.symbol.is_empty() { "?" } else { &v.symbol };
    let rows = &v.rows;
    let last_n = LAST_N
        .as_ref()
        .and_then(|re| re.captures(request))
        .and_then(|c| c.get(1)?.as_str().parse::<usize>().ok());
    let shown: &[PriceRow] = &rows[rows
        .len()
        .saturating_sub(last_n.unwrap_or(SHOWN_PRICE_ROWS))..];
    if shown.is_empty() {
        return format!(
            "No price rows came back for {sym}.{}",
            provenance_line(&v.provenance)
        );
    }
    // Which rows of the range these are: the last ones only when the page
    // ends where the range does.
    let total = v.total.max(v.offset + rows.len());
    let upto = v.offset + rows.len();
    let which = if shown.len() == total {
        String::new()
    } else if upto == total {
        format!(" (the last {} of {total})", shown.len())
    } else {
        format!(" (rows {} to {upto} of {total})", upto - shown.len() + 1)
    };
    let mut out = format!(
        "## {sym}: {} daily bars{which}\n\n| date | open | high | low | close | volume |\n|---|---|---|---|---|---|\n",
        shown.len(),
    );
    let f = |x: Option<f64>| x.map_or("".into(), |x| format!("{x:.2}"));
    for r in shown {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.0.as_deref().unwrap_or(""),
            f(r.1),
            f(r.2),
            f(r.3),
            f(r.4),
            r.5.map_or("".into(), |x| format!("{x:.0}"))
        ));
    }
    if let (Some(first), Some(last)) = (shown.first(), shown.last())
        && let (Some(a), Some(b)) = (first.4, last.4)
        && a > 0.0
    {
        out.push_str(&format!(
            "\nClose moved from {a:.2} to {b:.2} ({:+.2} %) over these bars (prices {}).",
            (b / a - 1.0) * 100.0,
            adjustment_label(&v.provenance.adjustments)
        ));
    }
    out.push_str(&provenance_line(&v.provenance));
    out.push('\n');
    out
}

fn indicator_answer(v: &IndicatorOutput) -> String {
    let sym = if v.symbol.is_empty() { "?" } else { &v.symbol };
    let name = if v.indicator.is_empty() {
        "indicator"
    } else {
        &v.indicator
    };
    let mut out = format!(
        "## {} of {sym}\n\nParameters: `{}`\n\n",
        name.to_uppercase(),
        v.params
    );
    // Every indicator's answer carries its range's figures; the answer
    // leads with them where the question is about the period itself.
    if let Some(p) = &v.period
        && matches!(name, "drawdown" | "volatility" | "returns" | "log_returns")
    {
        out.push_str(&period_section(name, sym, p));
    }
    if !v.latest.is_empty() {
        let date = v.latest.get("date").and_then(Value::as_str).unwrap_or("");
        out.push_str(&format!(
            "Latest ({date}):\n\n| series | value |\n|---|---|\n"
        ));
        for (k, val) in &v.latest {
            if k != "date" {
                out.push_str(&format!(
                    "| {} | {} |\n",
                    series_label(name, k, &v.params),
                    num(val).map_or(val.to_string(), |x| value_text(name, x))
                ));
            }
        }
    }
    if !v.extremes.is_empty() {
        out.push_str(&extremes_table(name, v));
    }
    if !v.tail.is_empty() {
        out.push_str(&tail_table(&v.columns, &v.tail));
    }
    out.push_str(&provenance_line(&v.provenance));
    out.push('\n');
    out
}

/// A drawdown in words with its dates: "−47.95 % from the peak of
/// 2008-01-02 to the trough of 2008-11-20, not recovered by 2008-12-31".
fn drawdown_words(d: &DrawdownDates, end: &str) -> String {
    let recovery = match &d.recovery {
        Some(r) => format!("recovered on {r}"),
        None => format!("not recovered by {end}"),
    };
    format!(
        "{:.2} % from the peak of {} to the trough of {}, {recovery}",
        d.depth * 100.0,
        d.peak,
        d.trough
    )
}

/// What the range itself did (docs §2.12.1), the asked figure first: a
/// question about a period is answered within it, and a deeper drawdown
/// from a peak before it is said as such.
fn period_section(indicator: &str, sym: &str, p: &PeriodFigures) -> String {
    let span = format!("{} to {}", p.first_date, p.last_date);
    let ret = format!(
        "{:.2} % (close of {} to close of {})",
        p.total_return * 100.0,
        p.return_from,
        p.last_date
    );
    let vol = p.annualized_volatility.map_or("n/a".to_string(), |x| {
        format!(
            "{:.2} % (sample standard deviation of the {} daily returns × √252)",
            x * 100.0,
            p.daily_returns
        )
    });
    let dd = p.max_drawdown_window.as_ref().map_or_else(
        || "none (no close below an earlier one in the range)".to_string(),
        |d| drawdown_words(d, &p.last_date),
    );
    let headline = match indicator {
        "drawdown" => format!("Max drawdown of {sym} within {span}: {dd}."),
        "volatility" => format!("Volatility of {sym} over {span}, annualized: {vol}."),
        _ => format!("Return of {sym} over {span}: {ret}."),
    };
    let mut out = format!("**{headline}**\n\n");
    if let Some(d) = &p.drawdown_from_earlier_peak {
        out.push_str(&format!(
            "Measured from the running peak over all the history before the range too, the deepest drawdown was {}: that peak lies before {}, so it is not a drawdown within the range. The series below is that running-peak drawdown.\n\n",
            drawdown_words(d, &p.last_date),
            p.first_date
        ));
    }
    out.push_str(&format!(
        "Within {span}, on {sym}'s daily closes (as the Data line names them):\n\n| figure | value |\n|---|---|\n| return | {ret} |\n| annualized volatility | {vol} |\n| max drawdown (peak to trough within the range) | {dd} |\n\n"
    ));
    out
}

/// Each series' lowest and highest value over the range (and, for a
/// drawdown, the deepest one in words).
fn extremes_table(name: &str, v: &IndicatorOutput) -> String {
    let p = &v.provenance;
    let span = match (&p.first_date, &p.last_date) {
        (Some(a), Some(b)) => format!(" ({a} to {b})"),
        _ => String::new(),
    };
    let extremes: Vec<(&String, Extremes)> = v
        .extremes
        .iter()
        .map(|(k, e)| (k, typed(e).unwrap_or_default()))
        .collect();
    let mut out = String::new();
    if name == "drawdown"
        && let Some((_, deepest)) = extremes.iter().find(|(k, _)| *k == "drawdown")
        && let Some(x) = deepest.min
    {
        // Its peak, when the range's own figures name one before the range.
        let peak = v
            .period
            .as_ref()
            .and_then(|p| p.drawdown_from_earlier_peak.as_ref())
            .map(|d| format!(", from the running peak of {} (before the range)", d.peak))
            .unwrap_or_default();
        out.push_str(&format!(
            "\nDeepest drawdown{span}: {:.2} % on {}{peak}.\n",
            x * 100.0,
            deepest.min_date.as_deref().unwrap_or("?")
        ));
    }
    out.push_str(&format!(
        "\nRange{span}:\n\n| series | lowest | on | highest | on |\n|---|---|---|---|---|\n"
    ));
    let cell = |x: Option<f64>| x.map_or("n/a".to_string(), |x| format!("{x:.4}"));
    for (k, e) in &extremes {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            series_label(name, k, &v.params),
            cell(e.min),
            e.min_date.as_deref().unwrap_or(""),
            cell(e.max),
            e.max_date.as_deref().unwrap_or("")
        ));
    }
    out
}

/// What a series of an indicator is, in words: volatility says it is
/// annualized and by which factor, a drawdown that it runs from the peak.
fn series_label(indicator: &str, series: &str, params: &Value) -> String {
    let p = |k: &str| params.get(k).and_then(num);
    match (indicator, series) {
        ("volatility", "volatility") => match (p("window"), p("periods_per_year")) {
            (Some(w), Some(n)) => format!("annualized volatility ({w}-day, ×√{n})"),
            _ => "annualized volatility".into(),
        },
        ("drawdown", "drawdown") => "drawdown from the running peak".into(),
        ("returns", "returns") => "daily return".into(),
        ("log_returns", "log_returns") => "daily log return".into(),
        _ => series.to_string(),
    }
}

/// A value as text; the fraction-valued series also as a percentage.
fn value_text(indicator: &str, x: f64) -> String {
    match indicator {
        "volatility" | "drawdown" | "returns" | "log_returns" => {
            format!("{x:.4} ({:.2} %)", x * 100.0)
        }
        _ => format!("{x:.4}"),
    }
}

/// The last rows of the indicator's history.
fn tail_table(columns: &[String], tail: &[Value]) -> String {
    let mut out = format!(
        "\nLast {} rows:\n\n| {} |\n|{}\n",
        tail.len(),
        columns.join(" | "),
        "---|".repeat(columns.len())
    );
    let shown =
        |c: &Value| num(c).map_or(c.as_str().unwrap_or("").to_string(), |x| format!("{x:.4}"));
    for r in tail {
        let cells: Vec<String> = match r {
            Value::Array(a) => a.iter().map(shown).collect(),
            Value::Object(o) => columns
                .iter()
                .map(|n| o.get(n).map_or(String::new(), shown))
                .collect(),
            _ => vec![],
        };
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

fn remember_answer(v: &MemoryOutput) -> String {
    if let Some(memories) = &v.memories {
        if memories.is_empty() {
            return "I have no memories that match.\n".into();
        }
        let mut out = format!("I remember {}:\n\n", memories.len());
        for m in memories {
            let content: String = m.content.chars().take(300).collect();
            out.push_str(&format!(
                "- **{}** ({}): {}\n",
                m.title, m.memory_type, content
            ));
        }
        return out;
    }
    match v.status.as_str() {
        "skipped" => "I already remember that.\n".into(),
        _ => format!("{}\n", v.message.as_deref().unwrap_or("Saved.")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolCall;
    use crate::model::contract::{BacktestMetrics, ChartFiles};

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
        assert_eq!(c.args["last_n"], 30, "the tool counts the rows");
        assert!(c.args.get("start").is_none());

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

    /// The help lists only what the planner does: every example it quotes
    /// plans a tool call.
    #[test]
    fn every_example_the_help_gives_is_planned() {
        let help = unsupported("x");
        let examples: Vec<&str> = help
            .lines()
            .filter(|l| l.starts_with("- **"))
            .flat_map(|l| l.split('"').skip(1).step_by(2))
            .collect();
        assert!(examples.len() >= 20, "{examples:?}");
        for e in examples {
            assert!(
                intent(e).is_some(),
                "the help offers {e:?}, which plans nothing"
            );
        }
    }

    #[test]
    fn a_symbols_sharpe_and_two_symbols_correlation_are_planned() {
        let c = intent("what was the Sharpe ratio of SPY from 2005 to 2015").unwrap();
        assert_eq!(c.name, "backtest");
        let cfg = &c.args["config"];
        assert_eq!(cfg["strategy"], json!({"name": "buy_and_hold"}));
        assert_eq!(cfg["codes"], json!(["SPY"]));
        assert_eq!(
            (cfg["start_date"].as_str(), cfg["end_date"].as_str()),
            (Some("2005-01-01"), Some("2015-12-31"))
        );
        // A named rule keeps its own strategy.
        let c = intent("Sharpe of an SMA crossover on SPY").unwrap();
        assert_eq!(c.args["config"]["strategy"]["name"], "sma_crossover");

        let c = intent("correlation of AAPL and MSFT in 2010").unwrap();
        assert_eq!(c.name, "technical_indicator");
        assert_eq!(c.args["symbol"], "AAPL");
        assert_eq!(c.args["indicator"], "correlation");
        assert_eq!(c.args["params"], json!({"with": "MSFT", "window": 60}));
        assert_eq!(c.args["start"], "2010-01-01");
        let c = intent("20-day correlation between KO and PEP").unwrap();
        assert_eq!(c.args["params"], json!({"with": "PEP", "window": 20}));
        // One symbol is no correlation.
        assert_ne!(
            intent("correlation of AAPL").map(|c| c.args["indicator"].clone()),
            Some(json!("correlation"))
        );
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

        let c = intent("EMA crossover on NVDA and AAPL vs the S&P, commission of 0.3 percent, OK?")
            .unwrap();
        let cfg = &c.args["config"];
        assert_eq!(cfg["codes"], json!(["NVDA", "AAPL"]), "nor OK, VS or S&P");
        assert_eq!(cfg["strategy"]["name"], "ema_crossover");
        assert_eq!(cfg["source"], "auto", "NVDA is not embedded");
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
            t.contains(
                "| drawdown from the running peak | -0.6244 | 2008-11-24 | 0.0000 | 2008-01-02 |"
            ),
            "{t}"
        );
    }

    /// The planner's calls parse as the tools' argument types (what the
    /// tools themselves parse them into).
    #[test]
    fn planned_calls_are_the_tools_argument_types() {
        let c = intent("20-day SMA of GOOG in 2011").unwrap();
        let args: IndicatorArgs = serde_json::from_value(c.args).unwrap();
        assert_eq!(args.source.as_deref(), Some("embedded"));
        assert_eq!(args.tail, Some(10));
        let c = intent("show MSFT's last 30 days in 2010").unwrap();
        let args: MarketDataArgs = serde_json::from_value(c.args).unwrap();
        assert_eq!(args.end.as_deref(), Some("2010-12-31"));
        let c = intent("backtest a 20/50 SMA crossover on AAPL from 2005 to 2012").unwrap();
        let args: BacktestArgs = serde_json::from_value(c.args).unwrap();
        assert_eq!(args.run_dir, None);
        assert_eq!(args.config.unwrap()["codes"], json!(["AAPL"]));
        let r = intent("remember that fees are 10 bp").unwrap();
        let args: RememberArgs = serde_json::from_value(r.args).unwrap();
        assert_eq!(args.memory_type.as_deref(), Some("user"));
    }

    /// A backtest's answer reads the typed metrics the tool wrote.
    #[test]
    fn a_backtest_answer_reads_the_typed_output() {
        let metrics = BacktestMetrics::from_map(
            json!({"sortino": 1.1, "total_return": 0.452, "sharpe": 0.81, "trade_count": 12,
                   "max_drawdown": -0.234, "win_rate": 0.5, "final_value": 145200.0,
                   "risk_free": "treasury_3m"})
            .as_object()
            .unwrap()
            .clone(),
        );
        assert_eq!(metrics.sharpe, Some(0.81));
        assert_eq!(metrics.other["sortino"], json!(1.1));
        let out = BacktestOutput {
            status: "ok".into(),
            run_dir: "/r/bt".into(),
            summary: Some("AAPL · sma".into()),
            metrics: Some(metrics),
            chart: Some(ChartFiles {
                svg: Some("/r/bt/chart.svg".into()),
                png: None,
            }),
            ..Default::default()
        };
        let t = answer("x", "backtest", &serde_json::to_value(&out).unwrap());
        for row in [
            "| total return | 45.20 % |",
            "| Sharpe (annualized, rf 3-month T-bill) | 0.81 |",
            "| max drawdown (peak to trough) | -23.40 % |",
            "| round-trip trades | 12 |",
            "| final portfolio value | 145200.00 |",
            "| annualized return | n/a |",
        ] {
            assert!(t.contains(row), "{row} in {t}");
        }
        assert!(!t.contains("benchmark"), "{t}");
        assert!(!t.contains("Assumptions"), "none given, none said: {t}");
        assert!(
            t.contains("`/r/bt`") && t.contains("`/r/bt/chart.svg`"),
            "{t}"
        );
    }

    /// Why the benchmark or the risk-free rate is not the default, and
    /// the warm-up, are said beside the assumption they qualify.
    #[test]
    fn a_backtest_answer_says_why_its_benchmark_and_rate_fell_back() {
        let metrics = BacktestMetrics::from_map(
            json!({"sharpe": 0.27, "risk_free": "treasury_3m",
                   "risk_free_note": "the curve ends 2017-03-29; its last yield is carried on",
                   "benchmark_note": "SPY's data begins 2005-02-25, after the start: equal weight used"})
            .as_object()
            .unwrap()
            .clone(),
        );
        let out = BacktestOutput {
            status: "ok".into(),
            metrics: Some(metrics),
            assumptions: Some(BacktestAssumptions {
                benchmark: "equal_weight".into(),
                bars_per_year: 252.0,
                ..Default::default()
            }),
            warmup: Some(WarmupInfo {
                bars_needed: Some(0),
                bars_used: 0,
                note: None,
            }),
            ..Default::default()
        };
        let t = answer("x", "backtest", &serde_json::to_value(&out).unwrap());
        for part in [
            "(SPY's data begins 2005-02-25, after the start: equal weight used);",
            "Sharpe and Sortino over the 3-month Treasury yield (the curve ends 2017-03-29; its last yield is carried on);",
            "no warm-up needed (the signal reads no history).",
        ] {
            assert!(t.contains(part), "{part} in {t}");
        }
    }

    /// Every backtest answer says what the run assumed: costs, lots,
    /// shorting, cash, prices, annualisation and the benchmark as used.
    #[test]
    fn a_backtest_answer_states_its_assumptions() {
        let mut out = BacktestOutput {
            status: "ok".into(),
            metrics: Some(BacktestMetrics {
                benchmark_return: Some(0.3),
                ..Default::default()
            }),
            assumptions: Some(BacktestAssumptions {
                commission_rate: 0.0,
                slippage: 0.0005,
                lot_size: 1.0,
                allow_short: true,
                initial_cash: 1_000_000.0,
                price_adjustment: "open/high/low/close multiplied by adj_close/close (split- and dividend-adjusted)".into(),
                bars_per_year: 252.0,
                benchmark: "SPY".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let t = answer("x", "backtest", &serde_json::to_value(&out).unwrap());
        assert!(
            t.contains("Assumptions: no commission; slippage 0.05 % (5 bp) of the price, against each fill; whole shares; the market's rules allow short selling (the strategy decides whether it shorts); initial cash 1000000.00; prices split- and dividend-adjusted; returns, Sharpe and volatility annualized over 252 bars a year; benchmark SPY."),
            "{t}"
        );
        assert!(t.contains("| benchmark (SPY) return | 30.00 % |"), "{t}");
        if let Some(a) = out.assumptions.as_mut() {
            a.commission_rate = 0.001;
            a.min_commission = 1.0;
            a.lot_size = 100.0;
            a.allow_short = false;
            a.benchmark = "equal_weight".into();
            a.from_settings = vec!["commission_rate".into(), "min_commission".into()];
        }
        let t = answer("x", "backtest", &serde_json::to_value(&out).unwrap());
        for part in [
            "commission 0.10 % (10 bp) of notional per fill, at least 1.00 per fill;",
            "lots of 100 units; no short selling;",
            "benchmark equal-weight buy and hold of the codes.",
            "From `[backtest]` in config.toml: commission_rate, min_commission.",
        ] {
            assert!(t.contains(part), "{part} in {t}");
        }
    }

    /// Volatility says it is annualized and by which factor; a drawdown
    /// that it runs from the peak; fractions show as percentages too.
    #[test]
    fn indicator_answers_label_what_their_numbers_are() {
        let v = json!({"status": "ok", "symbol": "IBM", "indicator": "volatility",
            "params": {"window": 20, "periods_per_year": 252.0, "ddof": 1},
            "latest": {"date": "2010-12-31", "volatility": 0.1534},
            "columns": ["date", "volatility"], "tail": [["2010-12-31", 0.1534]],
            "provenance": {"source": "embedded", "rows": 252}});
        let t = answer("volatility of IBM in 2010", "technical_indicator", &v);
        assert!(
            t.contains("| annualized volatility (20-day, ×√252) | 0.1534 (15.34 %) |"),
            "{t}"
        );
    }

    /// A memory in the system prompt's snapshot sets the commission of a
    /// team member's backtests that name none, and its answer says so.
    #[test]
    fn a_remembered_cost_reaches_a_members_backtests_that_name_none() {
        let system = Message::system(
            "You are vibedesk.\n## Persistent Memory (cross-session)\n- [I use 10 bp commission](entries/a.md) — I use 10 bp commission\n",
        );
        let member = "Compute the 14-day RSI of AAPL. Backtest a 20/50 SMA crossover on AAPL from 2008 to 2012. Backtest buy and hold of AAPL from 2008 to 2012 with 0.2% commission.";
        let mut msgs = vec![system, Message::user(member)];
        let Plan::Calls(calls) = plan(&msgs, &offered()) else {
            panic!("a member's batch");
        };
        let rates: Vec<Option<f64>> = calls
            .iter()
            .filter(|c| c.name == "backtest")
            .map(|c| c.args["config"]["commission_rate"].as_f64())
            .collect();
        assert_eq!(rates, vec![Some(0.001), Some(0.002)], "{calls:?}");
        msgs.push(Message::assistant_tool_calls(
            "",
            vec![ToolCall::new("b1", "backtest", calls[1].args.to_string())],
            None,
        ));
        let out = BacktestOutput {
            status: "ok".into(),
            metrics: Some(BacktestMetrics {
                sharpe: Some(1.0),
                ..Default::default()
            }),
            ..Default::default()
        };
        msgs.push(Message::tool_result(
            "b1",
            "backtest",
            serde_json::to_string(&out).unwrap(),
        ));
        let Plan::Answer(t) = plan(&msgs, &offered()) else {
            panic!("the member answers");
        };
        assert!(
            t.contains("Costs: where a backtest here names none, it used commission 0.10 % (10 bp) from your memory 'I use 10 bp commission'."),
            "{t}"
        );
    }

    proptest::proptest! {
        /// Whatever dates a backtest request holds, in whatever order, the
        /// planned config runs forward.
        #[test]
        fn a_planned_backtest_never_starts_after_it_ends(
            words in proptest::collection::vec(
                proptest::sample::select(vec![
                    "from", "to", "since", "until", "between", "and", "in", "before", "after",
                    "Latest (2013-03-01)", "as of 2011", "2013-03-01", "2000-03-01", "2005",
                    "2012", "March 2009", "Q3 2010", "-", "range", "2030",
                ]),
                0..8,
            ),
        ) {
            let text = format!("Backtest buy and hold of IBM {}", words.join(" "));
            let call = intent(&text).unwrap();
            let cfg = &call.args["config"];
            let (s, e) = (cfg["start_date"].as_str().unwrap(), cfg["end_date"].as_str().unwrap());
            proptest::prop_assert!(s <= e, "{text}: {s} > {e}");
        }
    }

    #[test]
    fn unknown_requests_get_an_honest_reply() {
        let msgs = vec![
            Message::system("s"),
            Message::user("What is the meaning of life?"),
        ];
        match plan(&msgs, &offered()) {
            Plan::Unsupported(t) => {
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
            Plan::Unsupported(t) => assert!(t.contains("technical_indicator")),
            other => panic!("{other:?}"),
        }
    }

    fn every_tool() -> Vec<String> {
        [
            tool::GET_MARKET_DATA,
            tool::TECHNICAL_INDICATOR,
            tool::OPTION_PRICE,
            tool::IMPLIED_VOLATILITY,
            tool::OPTION_STRATEGY,
            tool::PORTFOLIO_OPTIMIZE,
            tool::RISK_REPORT,
            tool::TEARSHEET,
            tool::STAT_TEST,
            tool::VOLATILITY_MODEL,
            tool::FACTOR_IC,
            tool::REGRESSION,
            tool::OVERFITTING,
            tool::FACTOR_SCREEN,
            tool::BACKTEST,
            tool::SWEEP,
            tool::REMEMBER,
            tool::RECALL,
            tool::COMPACT,
        ]
        .map(String::from)
        .to_vec()
    }

    /// The requests no offline tool serves end `unsupported`, naming what
    /// is missing and the nearest request with the user's own tickers.
    #[test]
    fn unservable_requests_are_unsupported_and_say_what_is_missing() {
        let cases = [
            (
                "Black-Litterman portfolio of AAPL, MSFT, XOM",
                "Black-Litterman views",
                Some("\"optimize AAPL, MSFT and XOM for maximum Sharpe\""),
            ),
            (
                "Kalman filter hedge ratio of KO and PEP",
                "a Kalman filter",
                Some("\"Engle-Granger cointegration test of KO and PEP\""),
            ),
            (
                "What is Tesla's latest earnings surprise?",
                "earnings and fundamentals",
                None,
            ),
            (
                "intraday RSI of AAPL on 5-minute bars",
                "intraday and tick data",
                Some("\"show AAPL's last 30 days in 2017\""),
            ),
            ("What is the meaning of life?", "can't answer", None),
        ];
        for (request, missing, nearest) in cases {
            let msgs = vec![Message::user(request)];
            let Plan::Unsupported(text) = plan(&msgs, &every_tool()) else {
                panic!("{request}: not unsupported");
            };
            assert!(text.contains(missing), "{request}: {text}");
            if let Some(n) = nearest {
                assert!(text.contains(n), "{request}: {text}");
            }
            assert!(text.contains("vibedesk doctor"), "{request}: {text}");
        }
        // The earnings answer says nothing offline comes near.
        let msgs = vec![Message::user("EPS of AAPL in 2015")];
        let Plan::Unsupported(text) = plan(&msgs, &every_tool()) else {
            panic!("EPS");
        };
        assert!(text.contains("nothing offline comes near"), "{text}");
    }

    /// Each topic's nearest request runs: it plans a call of the tool the
    /// answer names, with the defaults and with tickers the user named.
    #[test]
    fn every_nearest_request_plans_its_tool() {
        let named: Vec<String> = ["KO", "PEP", "XOM"].map(String::from).to_vec();
        let mut seen = 0;
        for topic in missing::MISSING {
            for tickers in [&[][..], &named[..1], &named[..]] {
                let Some((request, tool)) = topic.nearest_request(tickers) else {
                    continue;
                };
                seen += 1;
                let call = intent(&request).unwrap_or_else(|| panic!("{request} plans nothing"));
                assert_eq!(call.name, tool, "{request}");
                assert!(missing::topic(&request).is_none(), "{request}");
            }
        }
        assert!(seen >= 20, "{seen}");
    }

    /// A served request is never taken for a missing topic: no example of
    /// the help names one.
    #[test]
    fn no_served_example_names_a_missing_topic() {
        for line in HELP {
            for e in line.examples {
                assert!(missing::topic(e).is_none(), "{e}");
            }
        }
    }

    /// Help and greetings get the help, as an answer (`success`); a topic
    /// the online sources may serve is read only when nothing else plans.
    #[test]
    fn help_is_an_answer_and_unread_topics_come_last() {
        for request in ["help", "hello", "What can you do?", "hi"] {
            match plan(&[Message::user(request)], &every_tool()) {
                Plan::Answer(t) => {
                    assert!(t.contains("backtest a 20/50 SMA crossover"), "{t}");
                    assert!(!t.contains("can't answer"), "{t}");
                }
                other => panic!("{request}: {other:?}"),
            }
        }
        match plan(&[Message::user("bitcoin volatility")], &every_tool()) {
            Plan::Unsupported(t) => assert!(t.contains("crypto prices"), "{t}"),
            other => panic!("{other:?}"),
        }
    }
}
