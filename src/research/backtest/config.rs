//! The `config.json` contract (docs §7.1), validated up front with errors
//! that name the key, say what is wrong and how to fix it.
//!
//! Every problem is collected (not just the first), so one round trip fixes
//! them all. Decisions, each a deliberate difference from the original:
//! - `source` defaults to `auto` (the original's default, `tushare`, is a
//!   source vibedesk does not have); unknown sources are refused with the
//!   list ([`SourceChoice`]);
//! - only `interval: "1D"` and `engine: "daily"` run; the other values of
//!   the spec parse and are refused with a clear message, never ignored;
//! - keys of the original that would change the result but are not
//!   implemented here (`fundamental_fields`, `event_feeds`, `constraints`,
//!   `extra_fields`, `leverage` ≠ 1) are refused rather than silently
//!   ignored; `optimizer` runs vibedesk's own optimisers (docs §7.4.2);
//! - an unknown key that looks like a typo of a supported one (edit distance
//!   ≤ 2) is an error with a suggestion; any other unknown key is kept as a
//!   warning on the run card (the original allows extra keys).

use std::fmt;

use chrono::NaiveDate;
use serde_json::{Map, Value};

pub use super::config_reader::{ConfigIssue, Reader, kind, suggest};
use super::rules::RuleSet;
use super::strategies::Builtin;
use crate::research::data::{self, Interval, Market, SourceChoice, detect_market};

/// All the problems found in one config.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub issues: Vec<ConfigIssue>,
}

impl ConfigError {
    pub(crate) fn one(issue: ConfigIssue) -> Self {
        ConfigError {
            issues: vec![issue],
        }
    }

    /// The code of the first problem (tool results carry one code).
    pub(crate) fn code(&self) -> &'static str {
        self.issues.first().map_or("invalid_config", |i| i.code)
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.issues.as_slice() {
            [] => write!(f, "config.json is invalid"),
            [one] => write!(f, "config.json: {one}"),
            many => {
                write!(f, "config.json has {} problems:", many.len())?;
                for (i, issue) in many.iter().enumerate() {
                    write!(f, " {}) {issue}", i + 1)?;
                }
                Ok(())
            }
        }
    }
}

/// How held positions follow their targets (docs §7.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Adjustment {
    /// Act only on direction flips and zero targets; resizes are logged
    /// and dropped.
    #[default]
    Hold,
    /// Resize toward the target whenever the drift leaves the tolerance
    /// band.
    Rebalance,
}

impl Adjustment {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Adjustment::Hold => "hold",
            Adjustment::Rebalance => "rebalance",
        }
    }
}

/// Cost keys as given (docs §7.1 "market fee keys", §7.4); `None` takes the
/// market's default ([`super::engine::SymbolRules::for_market`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CostOverrides {
    pub commission_rate: Option<f64>,
    pub min_commission: Option<f64>,
    pub stamp_tax: Option<f64>,
    pub transfer_fee: Option<f64>,
    pub slippage: Option<f64>,
    pub maker_rate: Option<f64>,
    pub taker_rate: Option<f64>,
    pub funding_rate: Option<f64>,
    pub allow_short: Option<bool>,
    pub lot_size: Option<f64>,
}

/// History before `start_date` given to `code/signal_engine.py` when the
/// config sets no `warmup_bars`: a year of daily bars.
pub(crate) const PYTHON_WARMUP_BARS: usize = 252;

/// Where the signals come from.
#[derive(Clone, Debug, PartialEq)]
pub enum StrategySpec {
    Builtin(Builtin),
    Rules(Box<RuleSet>),
    /// `code/signal_engine.py` (docs §7.2), run with Python and pandas.
    Python,
}

impl StrategySpec {
    /// A short name for titles.
    pub(crate) fn short_name(&self) -> &'static str {
        match self {
            StrategySpec::Builtin(b) => b.name(),
            StrategySpec::Rules(_) => "rules",
            StrategySpec::Python => "signal_engine.py",
        }
    }

    /// Bars of history a backtest loads before `start_date` for this
    /// strategy (docs §7.4.1): its signal's warm-up plus the one bar of the
    /// shift, so that the order on the first bar comes from a warm signal.
    /// A Python strategy's need cannot be read from its code:
    /// [`PYTHON_WARMUP_BARS`] unless `warmup_bars` says otherwise.
    pub(crate) fn warmup_bars(&self) -> usize {
        if self.constant_signal().is_some() {
            return 0;
        }
        match self {
            StrategySpec::Builtin(b) => b.warmup().saturating_add(1),
            StrategySpec::Rules(r) => r.warmup().saturating_add(1),
            StrategySpec::Python => PYTHON_WARMUP_BARS,
        }
    }

    /// The signal of a strategy that reads no data (buy and hold): known
    /// before the first bar, so that bar trades on it without history.
    pub(crate) fn constant_signal(&self) -> Option<f64> {
        match self {
            StrategySpec::Builtin(Builtin::BuyAndHold { size }) => Some(*size),
            _ => None,
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            StrategySpec::Builtin(b) => b.describe(),
            StrategySpec::Rules(r) => r.describe(),
            StrategySpec::Python => "code/signal_engine.py (Python SignalEngine)".into(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MonteCarloConfig {
    pub n_simulations: usize,
    pub seed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BootstrapConfig {
    pub n_bootstrap: usize,
    pub confidence: f64,
    pub seed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WalkForwardConfig {
    pub n_windows: usize,
}

/// `config.validation` (docs §7.5); each part optional.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ValidationConfig {
    pub monte_carlo: Option<MonteCarloConfig>,
    pub bootstrap: Option<BootstrapConfig>,
    pub walk_forward: Option<WalkForwardConfig>,
}

impl ValidationConfig {
    pub(crate) fn is_empty(&self) -> bool {
        self.monte_carlo.is_none() && self.bootstrap.is_none() && self.walk_forward.is_none()
    }
}

/// A validated `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct BacktestConfig {
    pub codes: Vec<String>,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    pub source: SourceChoice,
    pub interval: Interval,
    pub position_adjustment: Adjustment,
    pub rebalance_tolerance: f64,
    pub initial_cash: f64,
    pub costs: CostOverrides,
    /// A benchmark ticker, or `equal_weight`; `None` (`auto`) is the
    /// default: SPY for US equities, else the equal weight of the codes
    /// (see `backtest::benchmark`).
    pub benchmark: Option<String>,
    /// `risk_free`: an annual rate (decimal) that Sharpe and Sortino use
    /// instead of the 3-month T-bill (docs §15.1.1); `None`: the T-bill.
    pub risk_free: Option<f64>,
    pub strategy: StrategySpec,
    pub validation: ValidationConfig,
    /// `warmup_bars`: history bars to load before `start_date` for the
    /// signals, instead of the strategy's own count (0: none, the signals
    /// start cold on `start_date`).
    pub warmup: Option<usize>,
    /// `optimizer` + `optimizer_params` (docs §7.4.2).
    pub optimizer: Option<super::optimizer::OptimizerSpec>,
    /// Unknown keys that were kept (not typos): shown on the run card.
    pub warnings: Vec<String>,
}

/// The supported keys (for typo suggestions and the docs).
pub(crate) const SUPPORTED_KEYS: &[&str] = &[
    "codes",
    "start_date",
    "end_date",
    "source",
    "interval",
    "engine",
    "position_adjustment",
    "rebalance_tolerance",
    "initial_cash",
    "commission_rate",
    "min_commission",
    "stamp_tax",
    "transfer_fee",
    "slippage",
    "maker_rate",
    "taker_rate",
    "funding_rate",
    "allow_short",
    "lot_size",
    "leverage",
    "benchmark",
    "risk_free",
    "strategy",
    "validation",
    "warmup_bars",
    "optimizer",
    "optimizer_params",
    "allow_nonpositive_prices",
    "name",
    "description",
    "notes",
];

/// Keys of the original that change results and are not implemented.
const UNSUPPORTED_KEYS: &[(&str, &str)] = &[
    ("constraints", "portfolio constraints are not implemented"),
    (
        "fundamental_fields",
        "fundamental (point-in-time statement) data is not available",
    ),
    ("event_feeds", "event feeds are not available"),
    (
        "extra_fields",
        "extra daily fields (A-share daily_basic) are not available",
    ),
];

const DEFAULT_INITIAL_CASH: f64 = 1_000_000.0;
/// The most `warmup_bars` may ask for (40 years of daily bars).
const MAX_WARMUP_BARS: u64 = 10_080;

fn parse_day(r: &mut Reader<'_>, key: &'static str) -> Option<NaiveDate> {
    let Some(v) = r.obj.get(key).filter(|v| !v.is_null()) else {
        r.issue(
            key,
            "missing_key",
            "is required: a date YYYY-MM-DD (e.g. \"2010-01-01\")",
        );
        return None;
    };
    let Some(s) = v.as_str() else {
        r.issue(
            key,
            "invalid_date",
            format!("must be a date string YYYY-MM-DD, got {}", kind(v)),
        );
        return None;
    };
    match data::parse_date(key, s) {
        Ok(d) => Some(d),
        Err(_) => {
            r.issue(
                key,
                "invalid_date",
                format!("'{s}' is not a date; write YYYY-MM-DD (e.g. \"2010-01-01\")"),
            );
            None
        }
    }
}

/// The most symbols one backtest takes (docs §7.1).
pub const MAX_CODES: usize = 1_000;

fn parse_codes(r: &mut Reader<'_>) -> Vec<String> {
    let Some(v) = r.obj.get("codes").filter(|v| !v.is_null()) else {
        r.issue(
            "codes",
            "missing_key",
            "is required: a non-empty list of symbols, e.g. [\"AAPL\", \"MSFT\"]",
        );
        return Vec::new();
    };
    let Some(list) = v.as_array() else {
        r.issue(
            "codes",
            "invalid_value",
            format!(
                "must be a list of symbols such as [\"AAPL\"], got {}",
                kind(v)
            ),
        );
        return Vec::new();
    };
    if list.is_empty() {
        r.issue(
            "codes",
            "invalid_value",
            "must not be empty: name at least one symbol, e.g. [\"AAPL\"]",
        );
    }
    // Checked before the list is read: 20,000 codes took longer than any
    // deadline to refuse one by one (docs §7.1).
    if list.len() > MAX_CODES {
        r.issue(
            "codes",
            "invalid_value",
            format!(
                "lists {} symbols; a backtest takes at most {MAX_CODES}",
                list.len()
            ),
        );
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, item) in list.iter().enumerate() {
        match item.as_str().map(str::trim) {
            Some(s) if !s.is_empty() => {
                if !seen.insert(s.to_ascii_uppercase()) {
                    r.issue(
                        &format!("codes[{i}]"),
                        "invalid_value",
                        format!("'{s}' is listed twice; list each symbol once"),
                    );
                } else {
                    out.push(s.to_string());
                }
            }
            _ => r.issue(
                &format!("codes[{i}]"),
                "invalid_value",
                format!("must be a non-blank symbol string, got {item}"),
            ),
        }
    }
    for code in &out {
        let m = detect_market(code);
        if matches!(m, Market::Futures | Market::Forex) {
            r.issue(
                "codes",
                "unsupported_market",
                format!(
                    "'{code}' looks like a {m} symbol; the daily engine covers equities and crypto only (futures and forex engines are not implemented)"
                ),
            );
        }
    }
    out
}

fn parse_validation(v: &Value, issues: &mut Vec<ConfigIssue>) -> ValidationConfig {
    let mut out = ValidationConfig::default();
    let Some(obj) = v.as_object() else {
        issues.push(ConfigIssue::new(
            "validation",
            "invalid_value",
            format!(
                "must be an object such as {{\"monte_carlo\": {{\"n_simulations\": 1000}}, \"bootstrap\": {{}}, \"walk_forward\": {{\"n_windows\": 5}}}}, got {}",
                kind(v)
            ),
        ));
        return out;
    };
    let mut r = Reader::new(obj, "validation");
    r.only(&["monte_carlo", "bootstrap", "walk_forward"]);
    issues.append(&mut r.issues);
    // `true` or `{}` asks for the defaults; `false`/null skips.
    let part = |key: &str, issues: &mut Vec<ConfigIssue>| -> Option<Map<String, Value>> {
        match obj.get(key) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some(Map::new()),
            Some(Value::Object(m)) => Some(m.clone()),
            Some(other) => {
                issues.push(ConfigIssue::new(
                    format!("validation.{key}"),
                    "invalid_value",
                    format!("must be an object of options or true, got {}", kind(other)),
                ));
                None
            }
        }
    };
    if let Some(m) = part("monte_carlo", issues) {
        let mut r = Reader::new(&m, "validation.monte_carlo");
        r.only(&["n_simulations", "seed"]);
        let n = r.integer("n_simulations", 1, 100_000).unwrap_or(1000) as usize;
        let seed = r.integer("seed", 0, u64::MAX).unwrap_or(42);
        issues.append(&mut r.issues);
        out.monte_carlo = Some(MonteCarloConfig {
            n_simulations: n,
            seed,
        });
    }
    if let Some(m) = part("bootstrap", issues) {
        let mut r = Reader::new(&m, "validation.bootstrap");
        r.only(&["n_bootstrap", "confidence", "seed"]);
        let n = r.integer("n_bootstrap", 1, 100_000).unwrap_or(1000) as usize;
        let confidence = match r.number("confidence", 0.0, true, 1.0) {
            Some(c) if c < 1.0 => c,
            Some(_) => {
                r.issue("confidence", "invalid_value", "must be below 1 (e.g. 0.95)");
                0.95
            }
            None => 0.95,
        };
        let seed = r.integer("seed", 0, u64::MAX).unwrap_or(42);
        issues.append(&mut r.issues);
        out.bootstrap = Some(BootstrapConfig {
            n_bootstrap: n,
            confidence,
            seed,
        });
    }
    if let Some(m) = part("walk_forward", issues) {
        let mut r = Reader::new(&m, "validation.walk_forward");
        r.only(&["n_windows"]);
        let n = r.integer("n_windows", 2, 100).unwrap_or(5) as usize;
        issues.append(&mut r.issues);
        out.walk_forward = Some(WalkForwardConfig { n_windows: n });
    }
    out
}

fn parse_strategy(
    v: Option<&Value>,
    has_python_code: bool,
    issues: &mut Vec<ConfigIssue>,
    warnings: &mut Vec<String>,
) -> Option<StrategySpec> {
    let v = match v {
        None | Some(Value::Null) => {
            if has_python_code {
                return Some(StrategySpec::Python);
            }
            issues.push(ConfigIssue::new(
                "strategy",
                "no_strategy",
                format!(
                    "no strategy: give one in config.json, either a built-in such as {{\"name\": \"sma_crossover\", \"params\": {{\"fast\": 20, \"slow\": 50}}}} (built-ins: {}) or rules such as {{\"rules\": {{\"entry\": \"sma(close, 20) > sma(close, 50)\", \"exit\": \"sma(close, 20) < sma(close, 50)\"}}}}, or write code/signal_engine.py defining class SignalEngine",
                    Builtin::NAMES.join(", ")
                ),
            ));
            return None;
        }
        Some(v) => v,
    };
    if has_python_code {
        warnings.push(
            "config.json names a strategy, so code/signal_engine.py was not used".to_string(),
        );
    }
    // "strategy": "buy_and_hold" is shorthand for {"name": "buy_and_hold"}.
    if let Some(name) = v.as_str() {
        return match Builtin::parse(name, &Map::new(), "strategy") {
            Ok(b) => Some(StrategySpec::Builtin(b)),
            Err(mut e) => {
                issues.append(&mut e);
                None
            }
        };
    }
    let Some(obj) = v.as_object() else {
        issues.push(ConfigIssue::new(
            "strategy",
            "invalid_strategy",
            format!(
                "must be an object ({{\"name\": ..., \"params\": {{...}}}} or {{\"rules\": {{...}}}}), got {}",
                kind(v)
            ),
        ));
        return None;
    };
    if let Some(rules) = obj.get("rules") {
        let mut r = Reader::new(obj, "strategy");
        r.only(&["rules", "type", "description"]);
        issues.append(&mut r.issues);
        return match RuleSet::parse(rules, "strategy.rules") {
            Ok(rs) => Some(StrategySpec::Rules(Box::new(rs))),
            Err(mut e) => {
                issues.append(&mut e);
                None
            }
        };
    }
    let mut r = Reader::new(obj, "strategy");
    r.only(&["name", "params", "type", "description"]);
    let name = r.string("name");
    issues.append(&mut r.issues);
    let Some(name) = name else {
        if !obj.contains_key("name") {
            issues.push(ConfigIssue::new(
                "strategy.name",
                "invalid_strategy",
                format!(
                    "a strategy object needs \"name\" (one of {}) or \"rules\"",
                    Builtin::NAMES.join(", ")
                ),
            ));
        }
        return None;
    };
    let empty = Map::new();
    let params = match obj.get("params") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(other) => {
            issues.push(ConfigIssue::new(
                "strategy.params",
                "invalid_strategy",
                format!("must be an object of parameters, got {}", kind(other)),
            ));
            return None;
        }
    };
    match Builtin::parse(name, params, "strategy") {
        Ok(b) => Some(StrategySpec::Builtin(b)),
        Err(mut e) => {
            issues.append(&mut e);
            None
        }
    }
}

/// Refuses the original's keys this engine does not implement and unknown
/// keys that look like typos; other unknown keys become warnings.
fn check_keys(obj: &Map<String, Value>, r: &mut Reader<'_>, warnings: &mut Vec<String>) {
    for (key, why) in UNSUPPORTED_KEYS {
        if obj.get(*key).is_some_and(|v| !v.is_null()) {
            r.issue(
                key,
                "unsupported_key",
                format!("{why}; remove the key to run"),
            );
        }
    }
    for key in obj.keys() {
        if SUPPORTED_KEYS.contains(&key.as_str()) || UNSUPPORTED_KEYS.iter().any(|(k, _)| k == key)
        {
            continue;
        }
        match suggest(key, SUPPORTED_KEYS) {
            Some(s) => r.issue(
                key,
                "unknown_key",
                format!("unknown key; did you mean '{s}'?"),
            ),
            None => warnings.push(format!("unknown key '{key}' was ignored")),
        }
    }
}

/// `start_date` and `end_date`, in order.
fn parse_dates(r: &mut Reader<'_>) -> (Option<NaiveDate>, Option<NaiveDate>) {
    let start = parse_day(r, "start_date");
    let end = parse_day(r, "end_date");
    if let (Some(s), Some(e)) = (start, end)
        && s > e
    {
        r.issue(
            "start_date",
            "invalid_range",
            format!("start_date {s} is after end_date {e}; swap them"),
        );
    }
    (start, end)
}

/// `source`: `auto` when absent (see the module doc).
fn parse_source(obj: &Map<String, Value>, r: &mut Reader<'_>) -> SourceChoice {
    match obj.get("source").filter(|v| !v.is_null()) {
        None => SourceChoice::Auto,
        Some(Value::String(s)) => match s.parse::<SourceChoice>() {
            Ok(c) => c,
            Err(e) => {
                r.issue("source", "unknown_source", e.to_string());
                SourceChoice::Auto
            }
        },
        Some(other) => {
            r.issue(
                "source",
                "unknown_source",
                format!(
                    "must be a string, one of {}; got {}",
                    data::VALID_SOURCES,
                    kind(other)
                ),
            );
            SourceChoice::Auto
        }
    }
}

/// `interval`: the spec's values parse, only `1D` runs.
fn parse_interval(r: &mut Reader<'_>) -> Interval {
    match r.string("interval") {
        None => Interval::D1,
        Some(s) => match s.parse::<Interval>() {
            Ok(Interval::D1) => Interval::D1,
            Ok(other) => {
                r.issue(
                    "interval",
                    "unsupported_interval",
                    format!(
                        "'{}' is not supported: the loaders and the engine are daily only; use \"1D\"",
                        other.as_str()
                    ),
                );
                Interval::D1
            }
            Err(_) => {
                r.issue(
                    "interval",
                    "unsupported_interval",
                    format!(
                        "'{s}' is not an interval (the spec's are 1m, 5m, 15m, 30m, 1H, 4H, 1D); only \"1D\" runs here"
                    ),
                );
                Interval::D1
            }
        },
    }
}

/// `engine`: only `daily` runs.
fn check_engine(r: &mut Reader<'_>) {
    match r.string("engine") {
        None | Some("daily") => {}
        Some("options") => r.issue(
            "engine",
            "unsupported_engine",
            "the options engine is not implemented; use \"daily\" (or remove the key)",
        ),
        Some(other) => r.issue(
            "engine",
            "unsupported_engine",
            format!("unknown engine '{other}'; the only engine is \"daily\""),
        ),
    }
}

/// `position_adjustment`: `hold` (the default) or `rebalance`.
fn parse_adjustment(r: &mut Reader<'_>) -> Adjustment {
    match r.string("position_adjustment") {
        None => Adjustment::Hold,
        Some(s) => match s.to_ascii_lowercase().as_str() {
            "hold" => Adjustment::Hold,
            "rebalance" => Adjustment::Rebalance,
            _ => {
                r.issue(
                    "position_adjustment",
                    "invalid_value",
                    format!("'{s}' is not a mode; use \"hold\" or \"rebalance\""),
                );
                Adjustment::Hold
            }
        },
    }
}

/// The cost keys that override the market's defaults.
fn parse_costs(r: &mut Reader<'_>) -> CostOverrides {
    let rate = |r: &mut Reader<'_>, k: &str| r.number(k, 0.0, false, 0.5);
    CostOverrides {
        commission_rate: rate(r, "commission_rate"),
        min_commission: r.number("min_commission", 0.0, false, 1e9),
        stamp_tax: rate(r, "stamp_tax"),
        transfer_fee: rate(r, "transfer_fee"),
        slippage: rate(r, "slippage"),
        maker_rate: rate(r, "maker_rate"),
        taker_rate: rate(r, "taker_rate"),
        funding_rate: r.number("funding_rate", -0.1, false, 0.1),
        allow_short: r.boolean("allow_short"),
        lot_size: r.number("lot_size", 0.0, false, 1e9),
    }
}

/// `leverage` other than 1 and `allow_nonpositive_prices: true` would
/// change the result and are not implemented: refused, never ignored.
fn refuse_leverage_and_nonpositive_prices(r: &mut Reader<'_>) {
    if let Some(l) = r.number("leverage", 0.0, true, 1000.0)
        && (l - 1.0).abs() > 1e-12
    {
        r.issue(
            "leverage",
            "unsupported_key",
            format!(
                "leverage {l} is not supported: positions are fully funded (leverage 1); remove the key or set it to 1"
            ),
        );
    }
    if r.boolean("allow_nonpositive_prices") == Some(true) {
        r.issue(
            "allow_nonpositive_prices",
            "unsupported_key",
            "non-positive prices are always dropped by the sanity filter; remove the key",
        );
    }
}

/// `benchmark`: a ticker, `equal_weight`, or `None` for `auto` (SPY for US
/// equities, else the equal weight of the codes).
fn parse_benchmark(obj: &Map<String, Value>, r: &mut Reader<'_>) -> Option<String> {
    match obj.get("benchmark") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() || s.eq_ignore_ascii_case("auto") => None,
        Some(Value::String(s)) => Some(s.trim().to_string()),
        Some(other) => {
            r.issue(
                "benchmark",
                "invalid_value",
                format!(
                    "must be a ticker string, \"equal_weight\" or \"auto\" (SPY for US equities, else the equal weight of the codes), got {}",
                    kind(other)
                ),
            );
            None
        }
    }
}

impl BacktestConfig {
    /// Validates a parsed `config.json`. `has_python_code` says whether
    /// `code/signal_engine.py` exists (it is the strategy when the config
    /// names none).
    pub fn from_value(v: &Value, has_python_code: bool) -> Result<Self, ConfigError> {
        let Some(obj) = v.as_object() else {
            return Err(ConfigError::one(ConfigIssue::new(
                "(top level)",
                "invalid_config",
                format!(
                    "config.json must hold a JSON object such as {{\"codes\": [\"AAPL\"], \"start_date\": \"2010-01-01\", \"end_date\": \"2012-12-31\", \"strategy\": {{\"name\": \"buy_and_hold\"}}}}, got {}",
                    kind(v)
                ),
            )));
        };
        let mut r = Reader::new(obj, "");
        let mut warnings = Vec::new();
        check_keys(obj, &mut r, &mut warnings);
        let codes = parse_codes(&mut r);
        let (start, end) = parse_dates(&mut r);
        let source = parse_source(obj, &mut r);
        let interval = parse_interval(&mut r);
        check_engine(&mut r);
        let mut position_adjustment = parse_adjustment(&mut r);
        let rebalance_tolerance = r
            .number("rebalance_tolerance", 0.0, false, f64::INFINITY)
            .unwrap_or(0.0);
        let initial_cash = r
            .number("initial_cash", 0.0, true, 1e15)
            .unwrap_or(DEFAULT_INITIAL_CASH);
        let costs = parse_costs(&mut r);
        refuse_leverage_and_nonpositive_prices(&mut r);
        let benchmark = parse_benchmark(obj, &mut r);
        let risk_free = r.number("risk_free", -0.05, false, 0.5);
        let warmup = r
            .integer("warmup_bars", 0, MAX_WARMUP_BARS)
            .and_then(|n| usize::try_from(n).ok());
        for k in ["name", "description", "notes"] {
            if let Some(v) = obj.get(k).filter(|v| !v.is_null() && !v.is_string()) {
                r.issue(k, "invalid_value", format!("must be text, got {}", kind(v)));
            }
        }
        let mut issues = std::mem::take(&mut r.issues);
        let optimizer = super::optimizer::parse(obj, &mut issues);
        // Optimiser weights are resizes, which `hold` would drop: with an
        // optimizer the default is `rebalance` (docs §7.4.2).
        if optimizer.is_some() && obj.get("position_adjustment").is_none_or(Value::is_null) {
            position_adjustment = Adjustment::Rebalance;
        }
        let validation = match obj.get("validation") {
            None | Some(Value::Null) => ValidationConfig::default(),
            Some(v) => parse_validation(v, &mut issues),
        };
        let strategy = parse_strategy(
            obj.get("strategy"),
            has_python_code,
            &mut issues,
            &mut warnings,
        );
        if super::pairs::is_named(obj.get("strategy")) {
            issues.extend(super::pairs::check_config(&codes, costs.allow_short));
        }

        // A cointegration hedge's formation window ends before the start
        // (docs §7.7).
        let mut strategy = strategy;
        if let (Some(super::StrategySpec::Builtin(super::strategies::Builtin::Pairs(p))), Some(s)) =
            (strategy.as_mut(), start)
        {
            p.start = Some(s);
        }
        match (issues.is_empty(), start, end, strategy) {
            (true, Some(start_date), Some(end_date), Some(strategy)) => Ok(BacktestConfig {
                codes,
                start_date,
                end_date,
                source,
                interval,
                position_adjustment,
                rebalance_tolerance,
                initial_cash,
                costs,
                benchmark,
                risk_free,
                strategy,
                validation,
                warmup,
                optimizer,
                warnings,
            }),
            _ => Err(ConfigError { issues }),
        }
    }

    /// Bars of history to load before `start_date` (docs §7.4.1):
    /// `warmup_bars` when set, else the strategy's own count, and with an
    /// optimizer at least its lookback and the bar before (§7.4.2).
    pub fn warmup_bars(&self) -> usize {
        self.warmup.unwrap_or_else(|| {
            let own = self.strategy.warmup_bars();
            self.optimizer
                .as_ref()
                .map_or(own, |o| own.max(o.lookback + 1))
        })
    }

    /// Parses `config.json` text (JSON errors name the line and column).
    pub fn from_json_text(text: &str, has_python_code: bool) -> Result<Self, ConfigError> {
        let v: Value = serde_json::from_str(text).map_err(|e| {
            ConfigError::one(ConfigIssue::new(
                "(file)",
                "invalid_json",
                format!(
                    "not valid JSON at line {}, column {}: {e}; fix the syntax (double quotes, no trailing commas)",
                    e.line(),
                    e.column()
                ),
            ))
        })?;
        Self::from_value(&v, has_python_code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({"codes": ["AAPL"], "start_date": "2010-01-01", "end_date": "2011-01-01",
               "strategy": {"name": "sma_crossover", "params": {"fast": 10, "slow": 30}}})
    }

    #[test]
    fn a_minimal_config_gets_the_defaults() {
        let c = BacktestConfig::from_value(&base(), false).unwrap();
        assert_eq!(c.source, SourceChoice::Auto);
        assert_eq!(c.initial_cash, 1_000_000.0);
        assert_eq!(c.position_adjustment, Adjustment::Hold);
        assert!(c.validation.is_empty());
    }

    /// The warm-up a config loads before its start (docs §7.4.1): the
    /// signal's own need plus the bar of the shift, or `warmup_bars`.
    #[test]
    fn warm_up_bars_come_from_the_strategy_or_the_config() {
        let with = |strategy: Value, extra: Value| {
            let mut v = base();
            v["strategy"] = strategy;
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            BacktestConfig::from_value(&v, true).unwrap().warmup_bars()
        };
        let ema10 = crate::research::indicators::ema_warmup(10);
        assert_eq!(with(base()["strategy"].clone(), json!({})), 30);
        assert_eq!(with(json!("buy_and_hold"), json!({})), 0, "reads no data");
        assert_eq!(
            with(
                json!({"name": "ema_crossover", "params": {"fast": 5, "slow": 10}}),
                json!({})
            ),
            ema10 + 1
        );
        // A cross reads the bar before; a function of a function adds up.
        let rules = json!({"rules": {"entry": "crosses_above(sma(close, 20), ema(close, 10))",
                                     "exit": "sma(lag(close, 5), 40) < close"}});
        assert_eq!(with(rules.clone(), json!({})), ema10.max(19) + 1 + 1);
        assert_eq!(with(rules, json!({"warmup_bars": 7})), 7);
        assert_eq!(with(Value::Null, json!({})), PYTHON_WARMUP_BARS);
        let mut v = base();
        v["warmup_bars"] = json!(-1);
        assert!(BacktestConfig::from_value(&v, false).is_err());
    }

    #[test]
    fn a_risk_free_rate_is_read_within_its_range() {
        let mut v = base();
        v["risk_free"] = json!(0.02);
        assert_eq!(
            BacktestConfig::from_value(&v, false).unwrap().risk_free,
            Some(0.02)
        );
        assert_eq!(
            BacktestConfig::from_value(&base(), false)
                .unwrap()
                .risk_free,
            None
        );
        for bad in [json!(0.9), json!(-0.2), json!("2%")] {
            v["risk_free"] = bad.clone();
            let e = BacktestConfig::from_value(&v, false).unwrap_err();
            assert!(e.to_string().contains("risk_free"), "{bad}: {e}");
        }
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let mut v = base();
        v["source"] = json!("tushare");
        v["interval"] = json!("5m");
        v["intial_cash"] = json!(5);
        let e = BacktestConfig::from_value(&v, false).unwrap_err();
        assert_eq!(e.issues.len(), 3, "{e}");
        let text = e.to_string();
        assert!(text.contains("did you mean 'initial_cash'"), "{text}");
        assert!(text.contains("valid sources"), "{text}");
        assert!(text.contains("use \"1D\""), "{text}");
    }

    #[test]
    fn suggestions_need_a_close_match() {
        assert_eq!(
            suggest("comission_rate", SUPPORTED_KEYS),
            Some("commission_rate")
        );
        assert_eq!(suggest("completely_else", SUPPORTED_KEYS), None);
    }
}
