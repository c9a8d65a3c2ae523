//! The offline planner on the quant desk (docs §15.7): plain requests for
//! an option's price, an option position, portfolio weights or a book's
//! risk become calls of `option_price`, `implied_volatility`,
//! `option_strategy`, `portfolio_optimize` and `risk_report`, and their
//! answers state every input, given or assumed ("strike 110; expiry 0.25
//! years (3 months); volatility 17.93 %, AAPL realised over 252 daily
//! returns …"). A team member's sentences ("Price a 3-month at-the-money
//! call on IBM as of 2012-12-31.", "Compute the 99 % value at risk and
//! expected shortfall of IBM.") become the same calls, and their key
//! figures are labelled rows for the team's reader (docs §14.7).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{PAIR, PlannedCall, date_range, embedded, names, symbols, typed};
use crate::model::names as tool;
use crate::model::quant::{
    ImpliedVolatilityArgs, ImpliedVolatilityOutput, LegArgs, OptionInputsUsed, OptionPriceArgs,
    OptionPriceOutput, OptionStrategyArgs, OptionStrategyOutput, PortfolioOptimizeArgs,
    PortfolioOptimizeOutput, RiskReportArgs, RiskReportOutput,
};

/// Words in capitals a quant request uses that are not tickers.
const NOT_TICKERS: [&str; 12] = [
    "ES", "VAR", "CVAR", "HRP", "ERC", "ATM", "OTM", "ITM", "BSM", "CRR", "IV", "MVO",
];

/// Expiry when a request names none: three months, said in the answer.
const DEFAULT_EXPIRY_YEARS: f64 = 0.25;

static EXPIRY: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(\d{1,3}(?:\.\d+)?)\s*-?\s*(day|week|month|year|yr|mo)s?\b").ok()
});
static STRIKE_BEFORE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\$?(\d+(?:\.\d+)?)\s*(?:-?strike\s+)?(?:call|put)s?\b").ok());
static STRIKE_AFTER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:strike(?:\s+price)?|struck)\s*(?:of|at|=|:)?\s*\$?(\d+(?:\.\d+)?)").ok()
});
static AS_OF: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\bas\s+of\s+(\d{4}-\d{2}-\d{2})\b").ok());
static CONFIDENCE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(\d{2}(?:\.\d+)?)\s*(?:%|percent|th\b)|\b(0\.9\d*)\b").ok()
});
static HORIZON: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\b(\d{1,3})\s*-?\s*days?\b").ok());
/// "spot 100", "volatility 25 %", "rate of 5%", "priced at 4.5".
fn number_after(text: &str, keys: &[&str]) -> Option<(f64, bool)> {
    let lower = text.to_lowercase();
    for k in keys {
        let pattern = format!(
            r"\b{}\s*(?:of|at|=|:|is)?\s*\$?(-?\d+(?:\.\d+)?)\s*(%|percent)?",
            regex::escape(k)
        );
        let Ok(re) = Regex::new(&pattern) else {
            continue;
        };
        if let Some(c) = re.captures(&lower) {
            let v: f64 = c.get(1)?.as_str().parse().ok()?;
            return Some((v, c.get(2).is_some()));
        }
    }
    None
}

/// A rate or volatility: "25 %" or "0.25" as 0.25.
fn fraction(text: &str, keys: &[&str]) -> Option<f64> {
    number_after(text, keys).map(|(v, pct)| if pct || v > 1.5 { v / 100.0 } else { v })
}

/// The tickers a quant request names.
pub(super) fn tickers(text: &str) -> Vec<String> {
    symbols(text)
        .into_iter()
        .filter(|s| embedded(s) || !NOT_TICKERS.contains(&s.as_str()))
        .collect()
}

/// Years to expiry the request names ("3-month", "1 year", "6 weeks"),
/// with the words; `None` when it names none.
fn expiry(text: &str) -> Option<(f64, String)> {
    let c = EXPIRY.as_ref()?.captures(text)?;
    let n: f64 = c.get(1)?.as_str().parse().ok()?;
    let unit = c.get(2)?.as_str().to_lowercase();
    let (years, word) = match unit.as_str() {
        "day" => (n / 365.0, "days"),
        "week" => (n * 7.0 / 365.0, "weeks"),
        "month" | "mo" => (n / 12.0, "months"),
        _ => (n, "years"),
    };
    Some((years, format!("{n} {word}")))
}

fn as_of(text: &str) -> Option<String> {
    Some(AS_OF.as_ref()?.captures(text)?.get(1)?.as_str().to_string())
}

/// "at-the-money", "ATM".
fn at_the_money(lower: &str) -> bool {
    lower.contains("at-the-money") || lower.contains("at the money") || names(lower, "atm")
}

/// The strike written with the option ("a 110 call", "strike 110").
fn strike(text: &str) -> Option<f64> {
    let after = STRIKE_AFTER
        .as_ref()
        .and_then(|re| re.captures(text))
        .and_then(|c| c.get(1)?.as_str().parse().ok());
    after.or_else(|| {
        let re = STRIKE_BEFORE.as_ref()?;
        re.captures_iter(text).find_map(|c| {
            let m = c.get(1)?;
            // "3-month call": the number is an expiry, not a strike.
            let rest = text[m.end()..].trim_start().to_lowercase();
            let unit = ["day", "week", "month", "year", "-"]
                .iter()
                .any(|u| rest.starts_with(u));
            if unit {
                return None;
            }
            m.as_str().parse().ok()
        })
    })
}

fn kind(lower: &str) -> Option<&'static str> {
    if names(lower, "call") || names(lower, "calls") {
        Some("call")
    } else if names(lower, "put") || names(lower, "puts") {
        Some("put")
    } else {
        None
    }
}

/// A confidence level named as "99 %", "97.5%", "99th" or "0.99"
/// (80 % and up: a lower one is some other percentage).
fn confidence(text: &str) -> Option<f64> {
    let c = CONFIDENCE.as_ref()?.captures(text)?;
    if let Some(p) = c.get(1) {
        let v: f64 = p.as_str().parse().ok()?;
        return (80.0..100.0).contains(&v).then_some(v / 100.0);
    }
    c.get(2)?.as_str().parse().ok()
}

fn horizon(text: &str) -> Option<i64> {
    HORIZON
        .as_ref()?
        .captures(text)?
        .get(1)?
        .as_str()
        .parse()
        .ok()
}

/// The portfolio method a request names.
fn method(lower: &str) -> Option<&'static str> {
    let pairs: [(&[&str], &str); 7] = [
        (
            &[
                "minimum variance",
                "minimum-variance",
                "min variance",
                "min-variance",
                "min_variance",
                "lowest variance",
                "least variance",
                "minimum volatility",
                "min vol",
            ],
            "min_variance",
        ),
        (
            &[
                "max sharpe",
                "maximum sharpe",
                "max-sharpe",
                "max_sharpe",
                "highest sharpe",
                "tangency",
            ],
            "max_sharpe",
        ),
        (
            &["risk parity", "risk-parity", "risk_parity", "equal risk"],
            "risk_parity",
        ),
        (
            &[
                "max diversification",
                "maximum diversification",
                "most diversified",
                "max_diversification",
            ],
            "max_diversification",
        ),
        (&["hierarchical risk parity", "hrp"], "hrp"),
        (
            &[
                "inverse volatility",
                "inverse-volatility",
                "inverse vol",
                "inverse_volatility",
            ],
            "inverse_volatility",
        ),
        (
            &[
                "equal weight",
                "equal-weight",
                "equal_weight",
                "equally weighted",
            ],
            "equal_weight",
        ),
    ];
    // Hierarchical risk parity names risk parity too: it goes first.
    if lower.contains("hierarchical") || names(lower, "hrp") {
        return Some("hrp");
    }
    pairs
        .iter()
        .find(|(words, _)| words.iter().any(|w| lower.contains(w)))
        .map(|(_, m)| *m)
}

/// The optimizer a backtest request names ("with a risk parity
/// optimizer", "min-variance optimised"), for its config.
pub(super) fn optimizer_named(lower: &str) -> Option<&'static str> {
    (lower.contains("optimiz") || lower.contains("optimis"))
        .then(|| method(lower))
        .flatten()
}

fn is_risk(lower: &str, text: &str) -> bool {
    [
        "value at risk",
        "value-at-risk",
        "expected shortfall",
        "cvar",
        "risk report",
        "tail risk",
    ]
    .iter()
    .any(|w| lower.contains(w))
        || text
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| w == "ES" || w == "VaR" || w == "VAR")
        // "The risk of a 40/60 SPY/TLT portfolio", "how risky is this book".
        || ((lower.contains("risk of") || lower.contains("risky"))
            && ["portfolio", "book", "position", "allocation"]
                .iter()
                .any(|w| lower.contains(w)))
}

fn is_portfolio(lower: &str) -> bool {
    lower.contains("optimi")
        || lower.contains("portfolio weights")
        || lower.contains("allocat")
        // "weights by risk parity", "a max Sharpe portfolio of …".
        || ((lower.contains("weights") || lower.contains("portfolio")) && method(lower).is_some())
}

/// A plain request's quant call, or `None` (then the other intents run).
/// A backtest names the rule's own risk, not a desk tool's.
fn backtest_named(lower: &str) -> bool {
    names(lower, "backtest") || lower.contains("back-test")
}

/// `risk_report`: VaR, ES, drawdown-at-risk of a named book.
pub(super) fn risk_read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    let syms = tickers(text);
    if backtest_named(&lower) || !is_risk(&lower, text) || syms.is_empty() {
        return None;
    }
    let (start, end) = date_range(text);
    Some(risk_call(text, &syms, start, end))
}

/// `portfolio_optimize`: weights for two or more named assets.
pub(super) fn portfolio_read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    let syms = tickers(text);
    if backtest_named(&lower) || !is_portfolio(&lower) || syms.len() < 2 {
        return None;
    }
    let (start, end) = date_range(text);
    Some(portfolio_call(&lower, &syms, start, end))
}

/// `implied_volatility`: the volatility a quoted premium implies.
pub(super) fn implied_read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    if backtest_named(&lower) || !lower.contains("implied vol") {
        return None;
    }
    implied_call(text, &lower, tickers(text).first())
}

/// `option_strategy`: a named structure (straddle, spread, collar …).
pub(super) fn strategy_read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    if backtest_named(&lower) || lower.contains("implied vol") {
        return None;
    }
    strategy_call(text, &lower, tickers(text).first())
}

/// `option_price`: one call or put priced, with its Greeks.
pub(super) fn option_read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    if backtest_named(&lower) || lower.contains("implied vol") {
        return None;
    }
    let pricing = [
        "price", "value", "worth", "greeks", "delta", "premium", "cost",
    ]
    .iter()
    .any(|w| names(&lower, w));
    if !pricing || kind(&lower).is_none() {
        return None;
    }
    option_call(text, &lower, tickers(text).first())
}

/// "50/30/20 QQQ/GLD/IEF": shares in the order the tickers are named.
static SHARES: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^\d./])(\d{1,3}(?:\.\d+)?(?:\s*/\s*\d{1,3}(?:\.\d+)?)+)(?:[^\d./]|$)").ok()
});
/// "50% QQQ", "-20 % of XLE", "60 percent SPY".
static SHARE_THEN_TICKER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(-?\d{1,3}(?:\.\d+)?)\s*(?:%|percent\b)\s*(?:in\s+|of\s+)?([A-Za-z][A-Za-z.\-]{0,9})",
    )
    .ok()
});
/// "QQQ 50%", "SPY: 60 %".
static TICKER_THEN_SHARE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b([A-Za-z][A-Za-z.\-]{0,9})\s*[:=]?\s*(-?\d{1,3}(?:\.\d+)?)\s*(?:%|percent\b)",
    )
    .ok()
});

/// The weights a request states for its tickers, as fractions, in any of
/// the common forms: "50/30/20 QQQ/GLD/IEF", "50% QQQ, 30% GLD, 20% IEF",
/// "60% SPY and 40% TLT", "QQQ 50%", a short as "-20% XLE". `None` unless
/// every ticker has one and they sum to 100 % (an equal-weight book is then
/// the tool's default; a book that does not add up is not guessed at).
pub(super) fn stated_weights(text: &str, syms: &[String]) -> Option<BTreeMap<String, f64>> {
    if syms.len() < 2 {
        return None;
    }
    let adds_up = |w: &BTreeMap<String, f64>| {
        w.len() == syms.len() && (w.values().sum::<f64>() - 1.0).abs() < 1e-6
    };
    let mut by_name = BTreeMap::new();
    for (re, share_at, name_at) in [(&SHARE_THEN_TICKER, 1, 2), (&TICKER_THEN_SHARE, 2, 1)] {
        let Some(re) = re.as_ref() else { continue };
        for c in re.captures_iter(text) {
            let (Some(share), Some(name)) = (c.get(share_at), c.get(name_at)) else {
                continue;
            };
            let name = name.as_str().to_uppercase();
            // Only a ticker of the request: "99% VaR" names no holding.
            if let (Some(sym), Ok(share)) = (
                syms.iter().find(|s| **s == name),
                share.as_str().parse::<f64>(),
            ) {
                by_name.entry(sym.clone()).or_insert(share / 100.0);
            }
        }
    }
    if adds_up(&by_name) {
        return Some(by_name);
    }
    let shares: Vec<f64> = SHARES
        .as_ref()?
        .captures(text)?
        .get(1)?
        .as_str()
        .split('/')
        .map(|x| x.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .ok()?;
    if shares.len() != syms.len() {
        return None;
    }
    let in_order: BTreeMap<String, f64> = syms
        .iter()
        .cloned()
        .zip(shares.iter().map(|s| s / 100.0))
        .collect();
    adds_up(&in_order).then_some(in_order)
}

fn risk_call(
    text: &str,
    syms: &[String],
    start: Option<String>,
    end: Option<String>,
) -> PlannedCall {
    let weights = stated_weights(text, syms);
    PlannedCall::typed(
        tool::RISK_REPORT,
        RiskReportArgs {
            symbols: Some(syms.to_vec()),
            weights,
            returns: None,
            start,
            end,
            confidence: confidence(text),
            horizon_days: horizon(text),
        },
    )
}

fn portfolio_call(
    lower: &str,
    syms: &[String],
    start: Option<String>,
    end: Option<String>,
) -> PlannedCall {
    let text = lower;
    PlannedCall::typed(
        tool::PORTFOLIO_OPTIMIZE,
        PortfolioOptimizeArgs {
            symbols: Some(syms.to_vec()),
            returns: None,
            start,
            end,
            method: method(lower).unwrap_or("min_variance").into(),
            risk_free: fraction(text, &["risk-free rate", "risk free rate", "rf"]),
            risk_free_rate: None,
            min_weight: fraction(text, &["min weight", "minimum weight", "at least"]),
            max_weight: fraction(
                text,
                &[
                    "max weight",
                    "maximum weight",
                    "at most",
                    "cap of",
                    "capped at",
                ],
            ),
            covariance: (lower.contains("ledoit") || lower.contains("shrink"))
                .then(|| "ledoit_wolf".into()),
        },
    )
}

fn implied_call(text: &str, lower: &str, sym: Option<&String>) -> Option<PlannedCall> {
    let price = number_after(
        text,
        &[
            "priced at",
            "price of",
            "premium of",
            "trading at",
            "quoted at",
            "that costs",
            "costs",
            "cost of",
            "price",
            "premium",
        ],
    )?
    .0;
    Some(PlannedCall::typed(
        tool::IMPLIED_VOLATILITY,
        ImpliedVolatilityArgs {
            kind: kind(lower).unwrap_or("call").into(),
            spot: number_after(text, &["spot", "stock at", "underlying at", "underlying"])
                .map(|v| v.0),
            strike: strike(text),
            moneyness: at_the_money(lower).then_some(1.0),
            expiry_years: expiry(text).map_or(DEFAULT_EXPIRY_YEARS, |e| e.0),
            price,
            rate: fraction(text, &["rate", "interest rate"]),
            dividend_yield: fraction(text, &["dividend yield", "yield"]),
            symbol: sym.cloned(),
            as_of: as_of(text),
        },
    ))
}

fn option_call(text: &str, lower: &str, sym: Option<&String>) -> Option<PlannedCall> {
    let strike = strike(text);
    let moneyness = (strike.is_none() && at_the_money(lower)).then_some(1.0);
    if strike.is_none() && moneyness.is_none() {
        return None;
    }
    Some(PlannedCall::typed(
        tool::OPTION_PRICE,
        OptionPriceArgs {
            kind: kind(lower)?.into(),
            style: names(lower, "american").then(|| "american".into()),
            spot: number_after(text, &["spot", "stock at", "underlying at"]).map(|v| v.0),
            strike,
            moneyness,
            expiry_years: expiry(text).map_or(DEFAULT_EXPIRY_YEARS, |e| e.0),
            volatility: fraction(text, &["volatility", "vol"]),
            rate: fraction(text, &["interest rate", "rate"]),
            dividend_yield: fraction(text, &["dividend yield"]),
            steps: None,
            symbol: sym.cloned(),
            as_of: as_of(text),
        },
    ))
}

/// A leg of a named position: quantity, kind, moneyness.
type LegShape = (f64, &'static str, f64);
/// A named position and its legs.
type Position = (&'static str, &'static [LegShape]);

/// The named positions and their legs.
const POSITIONS: [Position; 7] = [
    ("straddle", &[(1.0, "call", 1.0), (1.0, "put", 1.0)]),
    ("strangle", &[(1.0, "put", 0.95), (1.0, "call", 1.05)]),
    (
        "bull call spread",
        &[(1.0, "call", 1.0), (-1.0, "call", 1.1)],
    ),
    ("bear put spread", &[(1.0, "put", 1.0), (-1.0, "put", 0.9)]),
    ("covered call", &[(1.0, "stock", 1.0), (-1.0, "call", 1.1)]),
    ("protective put", &[(1.0, "stock", 1.0), (1.0, "put", 0.9)]),
    (
        "collar",
        &[(1.0, "stock", 1.0), (1.0, "put", 0.9), (-1.0, "call", 1.1)],
    ),
];

/// The named position in `lower`, if any.
fn position(lower: &str) -> Option<Position> {
    POSITIONS.iter().find(|(n, _)| lower.contains(n)).copied()
}

fn strategy_call(text: &str, lower: &str, sym: Option<&String>) -> Option<PlannedCall> {
    let (name, legs) = position(lower)?;
    let short = names(lower, "short") || names(lower, "sell") || names(lower, "sold");
    // Strikes written as "95/105": the option legs' strikes in order.
    let written: Vec<f64> = PAIR
        .as_ref()
        .and_then(|re| re.captures(text))
        .map(|c| {
            [c.get(1), c.get(2)]
                .into_iter()
                .flatten()
                .filter_map(|m| m.as_str().parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let one = strike(text);
    let mut options = 0;
    let legs: Vec<LegArgs> = legs
        .iter()
        .map(|(q, k, m)| {
            let is_option = *k != "stock";
            let given = if is_option {
                let s =
                    written
                        .get(options)
                        .copied()
                        .or(if written.is_empty() { one } else { None });
                options += 1;
                s
            } else {
                None
            };
            LegArgs {
                kind: (*k).into(),
                strike: given,
                moneyness: (is_option && given.is_none()).then_some(*m),
                quantity: if short && name != "covered call" {
                    -q
                } else {
                    *q
                },
                premium: None,
            }
        })
        .collect();
    Some(PlannedCall::typed(
        tool::OPTION_STRATEGY,
        OptionStrategyArgs {
            legs,
            spot: number_after(text, &["spot", "stock at", "underlying at"]).map(|v| v.0),
            volatility: fraction(text, &["volatility", "vol"]),
            expiry_years: expiry(text).map_or(DEFAULT_EXPIRY_YEARS, |e| e.0),
            rate: fraction(text, &["interest rate", "rate"]),
            dividend_yield: fraction(text, &["dividend yield"]),
            spot_range: None,
            points: None,
            symbol: sym.cloned(),
            as_of: as_of(text),
        },
    ))
}

// ---------------------------------------------------------------------------
// A team member's sentences.

/// The quant calls of one data sentence of a team member's request, or
/// `None` when it asks for none (then the indicators and prices run).
pub(super) fn sentence_calls(
    sentence: &str,
    syms: &[String],
    range: &(Option<String>, Option<String>),
) -> Option<Vec<PlannedCall>> {
    let lower = sentence.to_lowercase();
    let syms: Vec<String> = syms
        .iter()
        .filter(|s| embedded(s) || !NOT_TICKERS.contains(&s.as_str()))
        .cloned()
        .collect();
    let (start, end) = range.clone();
    if is_risk(&lower, sentence) && !syms.is_empty() {
        return Some(vec![risk_call(sentence, &syms, start, end)]);
    }
    if (lower.contains("weights") || is_portfolio(&lower)) && syms.len() >= 2 {
        // Each method named is its own call ("minimum-variance and
        // equal-weight weights").
        let mut out = Vec::new();
        for m in methods(&lower) {
            let mut call = portfolio_call(&lower, &syms, start.clone(), end.clone());
            call.args["method"] = Value::from(m);
            out.push(call);
        }
        return (!out.is_empty()).then_some(out);
    }
    let sym = syms.first();
    if let Some(call) = strategy_call(sentence, &lower, sym) {
        return Some(vec![call]);
    }
    if lower.starts_with("price") && (names(&lower, "call") || names(&lower, "put")) {
        // "a call and a put": both.
        let mut out = Vec::new();
        for k in ["call", "put"] {
            if names(&lower, k)
                && let Some(mut c) = option_call(sentence, &lower, sym)
            {
                c.args["kind"] = Value::from(k);
                out.push(c);
            }
        }
        return (!out.is_empty()).then_some(out);
    }
    None
}

/// Every method a sentence names, in the order of [`method`]'s table.
fn methods(lower: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut rest = lower.to_string();
    while let Some(m) = method(&rest) {
        out.push(m);
        // Cut every spelling of that method before looking again.
        let spellings: &[&str] = match m {
            "min_variance" => &[
                "minimum variance",
                "minimum-variance",
                "min variance",
                "min-variance",
                "min_variance",
                "lowest variance",
                "least variance",
                "minimum volatility",
                "min vol",
            ],
            "max_sharpe" => &[
                "max sharpe",
                "maximum sharpe",
                "max-sharpe",
                "max_sharpe",
                "highest sharpe",
                "tangency",
            ],
            "risk_parity" => &["risk parity", "risk-parity", "risk_parity", "equal risk"],
            "max_diversification" => &[
                "max diversification",
                "maximum diversification",
                "most diversified",
                "max_diversification",
            ],
            "hrp" => &["hierarchical risk parity", "hierarchical", "hrp"],
            "inverse_volatility" => &[
                "inverse volatility",
                "inverse-volatility",
                "inverse vol",
                "inverse_volatility",
            ],
            _ => &[
                "equal weight",
                "equal-weight",
                "equal_weight",
                "equally weighted",
            ],
        };
        for s in spellings {
            rest = rest.replace(s, " ");
        }
        if out.len() > 7 {
            break;
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Key figures and answers.

/// "AAPL call(K 174.67, 0.25 y)": an option with its terms.
fn option_label(symbol: Option<&str>, kind: &str, i: &OptionInputsUsed) -> String {
    format!(
        "{} {kind}(K {:.2}, {} y)",
        symbol.unwrap_or("option"),
        i.strike.unwrap_or(f64::NAN),
        trim(i.expiry_years)
    )
}

/// A number without trailing zeros ("0.25", "1").
fn trim(x: f64) -> String {
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// "0.25 years", "1 year".
fn years(x: f64) -> String {
    let t = trim(x);
    if t == "1" {
        "1 year".into()
    } else {
        format!("{t} years")
    }
}

fn pct(x: f64) -> String {
    format!("{:.2} %", x * 100.0)
}

/// The key-figure rows (label, value, as of) of a quant tool's result;
/// `None` for another tool.
pub(super) fn key_rows(
    tool: &str,
    args: &Value,
    result: &Value,
) -> Option<Vec<(String, String, String)>> {
    Some(match tool {
        tool::OPTION_PRICE => {
            let v: OptionPriceOutput = typed(result)?;
            let label = option_label(v.symbol.as_deref(), &v.kind, &v.inputs);
            let at = v.inputs.as_of.clone().unwrap_or_default();
            vec![
                (
                    format!("{label} price ({})", model_name(&v.model)),
                    format!("{:.4}", v.price),
                    at.clone(),
                ),
                (
                    format!("{label} delta"),
                    format!("{:.4}", v.delta),
                    at.clone(),
                ),
                (
                    format!("{label} vega (per 1.00 volatility)"),
                    format!("{:.4}", v.vega),
                    at.clone(),
                ),
                (
                    format!("{label} theta (per year)"),
                    format!("{:.4}", v.theta),
                    at.clone(),
                ),
                (
                    format!("{label} volatility priced"),
                    pct(v.inputs.volatility),
                    at,
                ),
            ]
        }
        tool::IMPLIED_VOLATILITY => {
            let v: ImpliedVolatilityOutput = typed(result)?;
            let sym = args["symbol"].as_str().unwrap_or("option");
            vec![(
                format!("{sym} {} implied volatility", v.kind),
                pct(v.volatility),
                String::new(),
            )]
        }
        tool::OPTION_STRATEGY => strategy_rows(result)?,
        tool::PORTFOLIO_OPTIMIZE => portfolio_rows(result)?,
        tool::RISK_REPORT => risk_rows(result)?,
        _ => return None,
    })
}

fn model_name(model: &str) -> &'static str {
    if model == "crr_binomial" {
        "CRR tree"
    } else {
        "Black–Scholes–Merton"
    }
}

fn strategy_rows(result: &Value) -> Option<Vec<(String, String, String)>> {
    let v: OptionStrategyOutput = typed(result)?;
    let strikes: Vec<String> = v
        .legs
        .iter()
        .filter_map(|l| l.strike)
        .map(|k| format!("{k:.2}"))
        .collect();
    let label = format!(
        "{} {}(K {}, {} y)",
        v.symbol.as_deref().unwrap_or("option"),
        v.position,
        strikes.join("/"),
        trim(v.inputs.expiry_years)
    );
    let at = v.inputs.as_of.clone().unwrap_or_default();
    let money = |x: Option<f64>| x.map_or("unbounded".to_string(), |x| format!("{x:.2}"));
    let mut rows = vec![
        (
            format!("{label} net premium"),
            format!("{:.2}", v.net_premium),
            at.clone(),
        ),
        (format!("{label} max loss"), money(v.max_loss), at.clone()),
        (
            format!("{label} max profit"),
            money(v.max_profit),
            at.clone(),
        ),
    ];
    match v.breakevens.as_slice() {
        [one] => rows.push((
            format!("{label} breakeven"),
            format!("{one:.2}"),
            at.clone(),
        )),
        [lo, .., hi] => {
            rows.push((
                format!("{label} breakeven low"),
                format!("{lo:.2}"),
                at.clone(),
            ));
            rows.push((
                format!("{label} breakeven high"),
                format!("{hi:.2}"),
                at.clone(),
            ));
        }
        [] => {}
    }
    if v.inputs.spot > 0.0
        && let Some(hi) = v.breakevens.last()
    {
        let lo = v.breakevens.first().copied().unwrap_or(*hi);
        let moves = ((hi / v.inputs.spot - 1.0).abs()).max((lo / v.inputs.spot - 1.0).abs());
        let need = if v.breakevens.len() >= 2 {
            ((hi / v.inputs.spot - 1.0).abs()).min((lo / v.inputs.spot - 1.0).abs())
        } else {
            moves
        };
        rows.push((format!("{label} move to break even"), pct(need), at.clone()));
    }
    rows.push((
        format!("{label} delta"),
        format!("{:.4}", v.greeks.delta),
        at.clone(),
    ));
    rows.push((
        format!("{label} vega (per 1.00 volatility)"),
        format!("{:.4}", v.greeks.vega),
        at.clone(),
    ));
    rows.push((
        format!("{label} theta (per year)"),
        format!("{:.4}", v.greeks.theta),
        at.clone(),
    ));
    rows.push((
        format!("{label} volatility priced"),
        pct(v.inputs.volatility),
        at.clone(),
    ));
    if let Some(w) = v.stress.iter().min_by(|a, b| a.pnl.total_cmp(&b.pnl)) {
        rows.push((
            format!(
                "{label} worst stress P&L (spot {:+.0} %, volatility {:+.0} points)",
                w.spot_shift * 100.0,
                w.volatility_shift * 100.0
            ),
            format!("{:.2}", w.pnl),
            at,
        ));
    }
    Some(rows)
}

fn portfolio_rows(result: &Value) -> Option<Vec<(String, String, String)>> {
    let v: PortfolioOptimizeOutput = typed(result)?;
    let names: Vec<&str> = v.weights.keys().map(String::as_str).collect();
    let book = names.join("+");
    let at = match (&v.data.start, &v.data.end) {
        (Some(a), Some(b)) => format!("{a} to {b}"),
        _ => String::new(),
    };
    let mut rows: Vec<(String, String, String)> = Vec::new();
    for (n, w) in &v.weights {
        rows.push((format!("{n} {} weight", v.method), pct(*w), at.clone()));
    }
    if v.method == "equal_weight" || v.method == "risk_parity" {
        for (n, c) in &v.risk_contributions {
            rows.push((
                format!("{n} {} risk contribution", v.method),
                pct(*c),
                at.clone(),
            ));
        }
    }
    rows.push((
        format!("{book} {} volatility (annualized)", v.method),
        pct(v.volatility),
        at.clone(),
    ));
    rows.push((
        format!("{book} {} expected return (annualized)", v.method),
        pct(v.expected_return),
        at.clone(),
    ));
    rows.push((
        format!(
            "{book} {} Sharpe (rf {} %)",
            v.method,
            trim(v.risk_free_rate * 100.0)
        ),
        format!("{:.2}", v.sharpe),
        at,
    ));
    Some(rows)
}

fn risk_rows(result: &Value) -> Option<Vec<(String, String, String)>> {
    let v: RiskReportOutput = typed(result)?;
    let book = v.weights.keys().cloned().collect::<Vec<_>>().join("+");
    let at = v.data.end.clone().unwrap_or_default();
    let head = format!(
        "{book} {}-day {} %",
        v.horizon_days,
        trim(v.confidence * 100.0)
    );
    let mut rows = vec![
        (
            format!("{head} VaR (historical)"),
            pct(v.var_historical),
            at.clone(),
        ),
        (
            format!("{head} ES (historical)"),
            pct(v.es_historical),
            at.clone(),
        ),
        (
            format!("{head} VaR (normal)"),
            pct(v.var_parametric),
            at.clone(),
        ),
        (
            format!("{head} ES (normal)"),
            pct(v.es_parametric),
            at.clone(),
        ),
        (
            format!("{head} VaR (Cornish–Fisher)"),
            pct(v.var_cornish_fisher),
            at.clone(),
        ),
        (
            format!("{book} annualized volatility (risk_report)"),
            pct(v.volatility),
            at.clone(),
        ),
    ];
    if let Some(d) = v.drawdowns.first() {
        rows.push((
            format!("{book} max drawdown (risk_report)"),
            pct(-d.depth),
            d.trough
                .as_str()
                .map_or_else(|| d.trough.to_string(), str::to_string),
        ));
    }
    if v.weights.len() > 1 {
        for (n, c) in &v.component_var {
            rows.push((
                format!("{n} share of the {head} VaR (normal)"),
                pct(*c),
                at.clone(),
            ));
        }
    }
    Some(rows)
}

/// A quant tool's answer, every input stated; `None` for another tool.
/// `request` is the user's words (the planner's own assumptions, such as
/// a default expiry, are read from it).
pub(super) fn answer(request: &str, tool: &str, v: &Value) -> Option<String> {
    match tool {
        tool::OPTION_PRICE => typed::<OptionPriceOutput>(v).map(|o| option_answer(request, &o)),
        tool::IMPLIED_VOLATILITY => typed::<ImpliedVolatilityOutput>(v).map(|o| implied_answer(&o)),
        tool::OPTION_STRATEGY => {
            typed::<OptionStrategyOutput>(v).map(|o| strategy_answer(request, &o))
        }
        tool::PORTFOLIO_OPTIMIZE => {
            typed::<PortfolioOptimizeOutput>(v).map(|o| portfolio_answer(request, &o))
        }
        tool::RISK_REPORT => typed::<RiskReportOutput>(v).map(|o| risk_answer(&o)),
        _ => None,
    }
}

const NOT_ADVICE: &str =
    "Figures are model values from the tool on the data named; they are analysis, not advice.";

/// The inputs line: each value with where it came from (the tool names
/// each input it filled or defaulted; the others were given).
fn inputs_line(request: &str, i: &OptionInputsUsed, volatility_found: bool) -> String {
    let from = |key: &str| {
        i.sources
            .iter()
            .find(|s| s.starts_with(&format!("{key}:")))
            .map(|s| s[key.len() + 1..].trim().to_string())
    };
    let why = |key: &str| from(key).unwrap_or_else(|| "given".into());
    let mut parts = vec![format!("spot {:.2} ({})", i.spot, why("spot"))];
    if let Some(k) = i.strike {
        parts.push(format!("strike {k:.2} ({})", why("strike")));
    }
    let named = !request.is_empty() && expiry(request).is_none();
    parts.push(format!(
        "expiry {} ({})",
        years(i.expiry_years),
        if named {
            "three months: none was named"
        } else {
            "as asked"
        }
    ));
    if !volatility_found {
        parts.push(format!(
            "volatility {} ({})",
            pct(i.volatility),
            why("volatility")
        ));
    }
    parts.push(format!("rate {} continuous ({})", pct(i.rate), why("rate")));
    parts.push(format!(
        "dividend yield {} ({})",
        pct(i.dividend_yield),
        why("dividend_yield")
    ));
    format!("Inputs: {}.", parts.join("; "))
}

fn option_answer(request: &str, o: &OptionPriceOutput) -> String {
    let label = option_label(o.symbol.as_deref(), &o.kind, &o.inputs);
    let model = if o.model == "crr_binomial" {
        format!(
            "American, Cox–Ross–Rubinstein tree of {} steps",
            o.inputs.steps.unwrap_or(0)
        )
    } else {
        "European, Black–Scholes–Merton".to_string()
    };
    let mut out = format!("## {label} ({model})\n\n| figure | value |\n|---|---|\n");
    for (k, x) in [
        ("price", o.price),
        ("delta", o.delta),
        ("gamma", o.gamma),
        ("vega (per 1.00 of volatility)", o.vega),
        ("theta (per year)", o.theta),
        ("rho (per 1.00 of rate)", o.rho),
    ] {
        out.push_str(&format!("| {k} | {x:.4} |\n"));
    }
    out.push('\n');
    out.push_str(&inputs_line(request, &o.inputs, false));
    out.push_str(&format!(
        "\n\nUnits are QuantLib's: a move of one volatility point changes the price by about vega / 100 = {:.4}, and a calendar day of time decay is about theta / 365 = {:.4}.\n\n{NOT_ADVICE}\n",
        o.vega_per_point, o.theta_per_day
    ));
    out
}

fn implied_answer(o: &ImpliedVolatilityOutput) -> String {
    format!(
        "## Implied volatility of the {}: {}\n\nThe Black–Scholes–Merton volatility at which the model price equals the price given (checked: the model gives {:.6} at it), found in {} iterations.\n\n{}\n\n{NOT_ADVICE}\n",
        o.kind,
        pct(o.volatility),
        o.price_check,
        o.iterations,
        inputs_line("", &o.inputs, true),
    )
}

fn strategy_answer(request: &str, o: &OptionStrategyOutput) -> String {
    let name = &o.position;
    let mut out = format!(
        "## {} {name}, {} to expiry\n\n| leg | strike | quantity | premium |\n|---|---|---|---|\n",
        o.symbol.as_deref().unwrap_or("Option"),
        years(o.inputs.expiry_years)
    );
    for l in &o.legs {
        out.push_str(&format!(
            "| {} | {} | {} | {:.4}{} |\n",
            l.kind,
            l.strike.map_or("—".into(), |k| format!("{k:.2}")),
            l.quantity,
            l.premium,
            if l.premium_from_model { " (model)" } else { "" }
        ));
    }
    let money = |x: Option<f64>| x.map_or("unbounded".to_string(), |x| format!("{x:.2}"));
    let be: Vec<String> = o.breakevens.iter().map(|b| format!("{b:.2}")).collect();
    out.push_str(&format!(
        "\n| figure | value |\n|---|---|\n| net premium (paid if positive) | {:.4} |\n| max profit at expiry | {} |\n| max loss at expiry | {} |\n| breakevens at expiry | {} |\n| value today | {:.4} |\n| delta | {:.4} |\n| gamma | {:.4} |\n| vega (per 1.00 of volatility) | {:.4} |\n| theta (per year) | {:.4} |\n",
        o.net_premium,
        money(o.max_profit),
        money(o.max_loss),
        if be.is_empty() { "none".into() } else { be.join(", ") },
        o.greeks.value,
        o.greeks.delta,
        o.greeks.gamma,
        o.greeks.vega,
        o.greeks.theta,
    ));
    out.push_str("\nStress (the position's value change today):\n\n| spot move | volatility move | change |\n|---|---|---|\n");
    for s in &o.stress {
        out.push_str(&format!(
            "| spot {:+.0} % | volatility {:+.0} points | {:.2} |\n",
            s.spot_shift * 100.0,
            s.volatility_shift * 100.0,
            s.pnl
        ));
    }
    out.push('\n');
    out.push_str(&inputs_line(request, &o.inputs, false));
    out.push_str(&format!(
        " Option legs without a premium are priced by Black–Scholes–Merton; a stock leg costs the spot.\n\nThe chat draws the payoff at expiry.\n\n{NOT_ADVICE}\n"
    ));
    out
}

fn data_line(d: &crate::model::quant::ReturnsData) -> String {
    match (&d.start, &d.end) {
        (Some(a), Some(b)) => format!(
            "daily simple returns of adjusted closes on the {} days every holding traded, {a} to {b} ({})",
            d.days,
            d.sources.join(", ")
        ),
        _ => format!("the {} daily returns given", d.days),
    }
}

fn portfolio_answer(request: &str, o: &PortfolioOptimizeOutput) -> String {
    let names: Vec<&str> = o.weights.keys().map(String::as_str).collect();
    let mut out = format!(
        "## {} weights: {}\n\n| holding | weight | risk contribution |\n|---|---|---|\n",
        o.method,
        names.join(", ")
    );
    for (n, w) in &o.weights {
        let rc = o.risk_contributions.get(n).copied().unwrap_or(f64::NAN);
        out.push_str(&format!("| {n} | {} | {} |\n", pct(*w), pct(rc)));
    }
    out.push_str(&format!(
        "\n| figure | value |\n|---|---|\n| expected return (annualized) | {} |\n| volatility (annualized) | {} |\n| Sharpe (rf {} %) | {:.4} |\n",
        pct(o.expected_return),
        pct(o.volatility),
        trim(o.risk_free_rate * 100.0),
        o.sharpe
    ));
    if let Some(s) = o.shrinkage {
        out.push_str(&format!("| Ledoit–Wolf shrinkage intensity | {s:.4} |\n"));
    }
    let default_bounds = o.min_weight == 0.0 && o.max_weight == 1.0;
    out.push_str(&format!(
        "\nInputs: {}; expected returns are the mean daily return × 252 and the covariance the {} × 252; long-only, weights from {} to {} ({}), summing to one; risk-free rate {}.",
        data_line(&o.data),
        if o.covariance == "ledoit_wolf" { "Ledoit–Wolf shrunk covariance" } else { "sample covariance (ddof 1)" },
        pct(o.min_weight),
        pct(o.max_weight),
        if default_bounds { "the default bounds" } else { "as asked" },
        if o.risk_free.is_empty() {
            pct(o.risk_free_rate)
        } else {
            format!("{}: {}", pct(o.risk_free_rate), o.risk_free)
        },
    ));
    if !request.is_empty() && method(&request.to_lowercase()).is_none() {
        out.push_str(" Method: minimum variance, as none was named.");
    }
    for n in &o.data.notes {
        out.push_str(&format!(" Note: {n}."));
    }
    out.push_str(&format!("\n\n{NOT_ADVICE}\n"));
    out
}

fn risk_answer(o: &RiskReportOutput) -> String {
    let names: Vec<&str> = o.weights.keys().map(String::as_str).collect();
    let first = o.weights.values().next().copied().unwrap_or(0.0);
    let equal = o.weights.values().all(|w| (w - first).abs() < 1e-12);
    let book = if names.len() == 1 {
        names[0].to_string()
    } else if equal {
        format!("equal-weight {} book", names.join("/"))
    } else {
        format!("{} book", names.join("/"))
    };
    let mut out = format!(
        "## {book}: {}-day risk at {} % confidence\n\n| measure | loss |\n|---|---|\n| VaR, historical | {} |\n| expected shortfall, historical | {} |\n| VaR, normal | {} |\n| expected shortfall, normal | {} |\n| VaR, Cornish–Fisher | {} |\n",
        o.horizon_days,
        trim(o.confidence * 100.0),
        pct(o.var_historical),
        pct(o.es_historical),
        pct(o.var_parametric),
        pct(o.es_parametric),
        pct(o.var_cornish_fisher),
    );
    out.push_str(&format!(
        "\n| figure | value |\n|---|---|\n| annualized volatility | {} |\n| max drawdown | {} |\n| skewness of daily returns | {:.4} |\n| excess kurtosis of daily returns | {:.4} |\n| HHI of the weights | {:.4} |\n| effective number of holdings | {:.2} |\n",
        pct(o.volatility),
        pct(-o.max_drawdown),
        o.skewness,
        o.excess_kurtosis,
        o.hhi,
        o.effective_n,
    ));
    if names.len() > 1 {
        out.push_str("\n| holding | weight | share of the normal VaR |\n|---|---|---|\n");
        for (n, w) in &o.weights {
            out.push_str(&format!(
                "| {n} | {} | {} |\n",
                pct(*w),
                pct(o.component_var.get(n).copied().unwrap_or(f64::NAN))
            ));
        }
    }
    if !o.drawdowns.is_empty() {
        out.push_str("\n| drawdown | peak | trough | recovery | depth |\n|---|---|---|---|---|\n");
        let show = |v: &Value| match v {
            Value::String(s) => s.clone(),
            Value::Null => "not recovered".to_string(),
            other => format!("day {other}"),
        };
        for (i, d) in o.drawdowns.iter().enumerate() {
            out.push_str(&format!(
                "| deepest #{} | {} | {} | {} | {} |\n",
                i + 1,
                show(&d.peak),
                show(&d.trough),
                show(&d.recovery),
                pct(-d.depth)
            ));
        }
    }
    let weights = if equal && names.len() > 1 {
        "equal".to_string()
    } else {
        o.weights
            .iter()
            .map(|(n, w)| format!("{n} {}", pct(*w)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push_str(&format!(
        "\nInputs: {}; weights {weights}; confidence {} %; horizon {} day(s). Losses are positive fractions of the book, rebalanced to its weights daily. Conventions: {}.\n\n{NOT_ADVICE}\n",
        data_line(&o.data),
        trim(o.confidence * 100.0),
        o.horizon_days,
        o.conventions,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The call of whichever of this module's tools reads `text`.
    fn intent(text: &str) -> Option<PlannedCall> {
        risk_read(text)
            .or_else(|| portfolio_read(text))
            .or_else(|| implied_read(text))
            .or_else(|| strategy_read(text))
            .or_else(|| option_read(text))
    }

    fn call(text: &str) -> PlannedCall {
        intent(text).unwrap_or_else(|| panic!("no call for {text}"))
    }

    /// A book's weights are read in every common form (issue 36), or not
    /// at all: a book that does not add up to 100 % is not guessed at.
    #[test]
    fn a_books_weights_are_read_in_every_common_form() {
        let weights = |text: &str| {
            let c = call(text);
            assert_eq!(c.name, "risk_report", "{text}");
            c.args.get("weights").cloned()
        };
        let book = |pairs: &[(&str, f64)]| {
            Some(serde_json::json!(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), *v))
                    .collect::<BTreeMap<_, _>>()
            ))
        };
        assert_eq!(
            weights("99% VaR of a portfolio 50% QQQ, 30% GLD, 20% IEF in 2010"),
            book(&[("QQQ", 0.5), ("GLD", 0.3), ("IEF", 0.2)])
        );
        assert_eq!(
            weights("95% expected shortfall of 60% SPY and 40% TLT in 2008"),
            book(&[("SPY", 0.6), ("TLT", 0.4)])
        );
        assert_eq!(
            weights("VaR of a book that is 70% XLK and 30% XLU"),
            book(&[("XLK", 0.7), ("XLU", 0.3)])
        );
        assert_eq!(
            weights("99% VaR of 50/30/20 QQQ/GLD/IEF"),
            book(&[("QQQ", 0.5), ("GLD", 0.3), ("IEF", 0.2)])
        );
        assert_eq!(
            weights("VaR of a book of SPY 120% and TLT -20%"),
            book(&[("SPY", 1.2), ("TLT", -0.2)])
        );
        assert_eq!(
            weights("99 % ES of an equal-weight SPY/TLT book in 2008"),
            None
        );
        assert_eq!(weights("VaR of 50% SPY and 30% TLT"), None);
    }

    #[test]
    fn a_portfolio_named_by_its_method_is_optimised() {
        for (text, m) in [
            ("max sharpe portfolio of AAPL MSFT IBM XOM", "max_sharpe"),
            ("a risk parity portfolio of SPY, TLT and GLD", "risk_parity"),
            ("HRP portfolio for AAPL MSFT JPM", "hrp"),
        ] {
            let c = call(text);
            assert_eq!(c.name, "portfolio_optimize", "{text}");
            assert_eq!(c.args["method"], m, "{text}");
        }
        // A portfolio without a method stays with the other intents.
        assert!(intent("show my portfolio of AAPL and MSFT").is_none());
    }

    #[test]
    fn the_three_plain_requests_plan_their_tools_with_their_inputs() {
        let c = call("price a 3-month 110 call on AAPL");
        assert_eq!(c.name, "option_price");
        assert_eq!(c.args["kind"], "call");
        assert_eq!(c.args["strike"], 110.0);
        assert_eq!(c.args["expiry_years"], 0.25);
        assert_eq!(c.args["symbol"], "AAPL");
        assert!(c.args.get("spot").is_none() && c.args.get("volatility").is_none());

        let c = call("optimize AAPL, MSFT, JPM, XOM and KO for minimum variance over 2015–2016");
        assert_eq!(c.name, "portfolio_optimize");
        assert_eq!(c.args["method"], "min_variance");
        assert_eq!(
            c.args["symbols"],
            serde_json::json!(["AAPL", "MSFT", "JPM", "XOM", "KO"])
        );
        assert_eq!(
            (c.args["start"].as_str(), c.args["end"].as_str()),
            (Some("2015-01-01"), Some("2016-12-31"))
        );

        let c = call("99 % ES of an equal-weight SPY/TLT book in 2008");
        assert_eq!(c.name, "risk_report");
        assert_eq!(c.args["symbols"], serde_json::json!(["SPY", "TLT"]));
        assert_eq!(c.args["confidence"], 0.99);
        assert!(c.args.get("weights").is_none(), "equal weights");
        assert_eq!(c.args["start"], "2008-01-01");
    }

    #[test]
    fn other_phrasings() {
        let c = call("10-day 97.5% VaR of a 60/40 SPY/TLT portfolio from 2007 to 2009");
        assert_eq!(c.args["confidence"], 0.975);
        assert_eq!(c.args["horizon_days"], 10);
        assert_eq!(c.args["weights"]["SPY"], 0.6);
        let c = call("price a 6-month at-the-money put on MSFT as of 2012-12-31, american");
        assert_eq!(c.args["moneyness"], 1.0);
        assert_eq!(c.args["style"], "american");
        assert_eq!(c.args["as_of"], "2012-12-31");
        assert!((c.args["expiry_years"].as_f64().unwrap() - 0.5).abs() < 1e-15);
        let c = call("price a 1-year 100 call with spot 95, volatility 20% and rate 3%");
        assert_eq!(
            (
                c.args["spot"].as_f64(),
                c.args["volatility"].as_f64(),
                c.args["rate"].as_f64()
            ),
            (Some(95.0), Some(0.2), Some(0.03))
        );
        let c = call("analyse a 95/105 strangle on IBM");
        assert_eq!(c.name, "option_strategy");
        assert_eq!(c.args["legs"][0]["strike"], 95.0);
        assert_eq!(c.args["legs"][1]["strike"], 105.0);
        let c = call("risk parity weights for AAPL, MSFT and IBM in 2011 with max weight 50%");
        assert_eq!(c.args["method"], "risk_parity");
        assert_eq!(c.args["max_weight"], 0.5);
        assert!(intent("backtest a min variance optimizer on AAPL and MSFT").is_none());
        assert!(intent("RSI of IBM").is_none());
    }

    #[test]
    fn a_backtest_names_its_optimizer() {
        let c = super::super::intent(
            "backtest buy and hold of AAPL, MSFT and IBM from 2010 to 2012 with a risk parity optimizer",
        )
        .unwrap();
        assert_eq!(c.name, "backtest");
        assert_eq!(c.args["config"]["optimizer"], "risk_parity");
        let c = super::super::intent("backtest buy and hold of AAPL and MSFT in 2011").unwrap();
        assert!(c.args["config"].get("optimizer").is_none());
    }

    #[test]
    fn a_member_sentence_asks_for_each_method_and_both_options() {
        let range = (
            Some("2005-01-01".to_string()),
            Some("2012-12-31".to_string()),
        );
        let syms: Vec<String> = ["AAPL", "MSFT", "IBM"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let calls = sentence_calls(
            "Compute the minimum-variance and equal-weight weights of AAPL, MSFT, IBM over the period.",
            &syms,
            &range,
        )
        .unwrap();
        let m: Vec<&str> = calls
            .iter()
            .map(|c| c.args["method"].as_str().unwrap())
            .collect();
        assert_eq!(m, ["min_variance", "equal_weight"]);
        let calls = sentence_calls(
            "Price a 3-month at-the-money call and put on IBM as of 2012-12-31.",
            &syms[2..],
            &range,
        )
        .unwrap();
        let k: Vec<&str> = calls
            .iter()
            .map(|c| c.args["kind"].as_str().unwrap())
            .collect();
        assert_eq!(k, ["call", "put"]);
        assert_eq!(calls[0].args["moneyness"], 1.0);
    }
}
