//! The built-in tools' contract: the arguments each tool takes and the
//! results the planner reads, as types. A tool's JSON schema (what the model
//! is offered) is generated from its `*Args` type, so the schema and the
//! parsing cannot drift; the offline planner builds the same types and reads
//! [`BacktestOutput`] instead of looking metrics up by string key.
//!
//! It lives in `model` (the conversation protocol) because both `tools`, which
//! implements it, and `llm`, whose offline planner speaks it, may use `model`
//! and not each other.
//!
//! Argument fields carry the wire types the model sends (strings, integers,
//! objects); range checks, aliases (`source: "yfinance"`) and the wording of
//! their errors stay with each tool, which is why enum-valued fields are
//! strings whose schema lists the values of a typed enum.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

/// Generates the JSON schema the model is offered for `T`: an object with
/// `properties` and `required`, every subschema inlined, and none of the
/// keywords some providers refuse (`$schema`, `$defs`, `title`, `format`,
/// null types for optional fields: absent means default).
pub fn parameters_schema<T: JsonSchema>() -> Value {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.meta_schema = None;
    settings.inline_subschemas = true;
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut v = schema.to_value();
    if let Value::Object(root) = &mut v {
        root.remove("title");
        root.remove("description");
        root.entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
    }
    tidy(&mut v);
    v
}

/// The JSON schema of a tool's output `T` as it is serialised (the MCP
/// `outputSchema`, docs §13.4), or `None` when it is not an object. Every
/// subschema is inlined, and a number may also be `null`: serde_json
/// writes a NaN or an infinity as `null`.
pub fn output_schema<T: JsonSchema>() -> Option<Value> {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12().for_serialize();
    settings.meta_schema = None;
    settings.inline_subschemas = true;
    let mut v = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if v.get("type") != Some(&Value::from("object")) {
        return None;
    }
    nullable_numbers(&mut v);
    Some(v)
}

/// Adds `null` to every number and integer type in `v`.
fn nullable_numbers(v: &mut Value) {
    match v {
        Value::Object(map) => {
            let numeric = |t: &Value| t == "number" || t == "integer";
            match map.get_mut("type") {
                Some(t @ Value::String(_)) if numeric(t) => {
                    *t = Value::Array(vec![t.clone(), Value::from("null")]);
                }
                Some(Value::Array(types))
                    if types.iter().any(numeric) && !types.contains(&Value::from("null")) =>
                {
                    types.push(Value::from("null"));
                }
                _ => {}
            }
            map.values_mut().for_each(nullable_numbers);
        }
        Value::Array(a) => a.iter_mut().for_each(nullable_numbers),
        _ => {}
    }
}

/// Drops `format`, `title`, `additionalProperties: true` (the default),
/// and `null` from `type` lists and `enum`s.
fn tidy(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("format");
            if map.get("additionalProperties") == Some(&Value::Bool(true)) {
                map.remove("additionalProperties");
            }
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    map.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(values)) = map.get_mut("enum") {
                values.retain(|x| !x.is_null());
            }
            if let Some(Value::Object(props)) = map.get_mut("properties") {
                for p in props.values_mut() {
                    if let Value::Object(pm) = p {
                        pm.remove("title");
                    }
                    tidy(p);
                }
            }
            if let Some(items) = map.get_mut("items") {
                tidy(items);
            }
            // A map's value schema (`{name: number}`) too.
            if let Some(values @ Value::Object(_)) = map.get_mut("additionalProperties") {
                tidy(values);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// The schema of a block given as an object or, loosely, by name.
fn object_or_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["object", "string"]})
}

/// The schema of a value given as an integer or a numeric string.
fn integer_or_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["integer", "string"]})
}

// Where market data comes from (aliases such as `yfinance` are accepted
// too; only these are offered). Plain comments on these enums: a doc
// comment would become the description of every field that uses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DataSource {
    Auto,
    Embedded,
    Local,
    Yahoo,
    Stooq,
}

impl DataSource {
    pub fn as_str(self) -> &'static str {
        match self {
            DataSource::Auto => "auto",
            DataSource::Embedded => "embedded",
            DataSource::Local => "local",
            DataSource::Yahoo => "yahoo",
            DataSource::Stooq => "stooq",
        }
    }
}

// The indicators `technical_indicator` computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IndicatorName {
    Sma,
    Ema,
    Rsi,
    Macd,
    Bollinger,
    Atr,
    Volatility,
    Returns,
    LogReturns,
    Drawdown,
    Correlation,
    Momentum,
}

impl IndicatorName {
    pub fn as_str(self) -> &'static str {
        match self {
            IndicatorName::Sma => "sma",
            IndicatorName::Ema => "ema",
            IndicatorName::Rsi => "rsi",
            IndicatorName::Macd => "macd",
            IndicatorName::Bollinger => "bollinger",
            IndicatorName::Atr => "atr",
            IndicatorName::Volatility => "volatility",
            IndicatorName::Returns => "returns",
            IndicatorName::LogReturns => "log_returns",
            IndicatorName::Drawdown => "drawdown",
            IndicatorName::Correlation => "correlation",
            IndicatorName::Momentum => "momentum",
        }
    }
}

// What `remember` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MemoryAction {
    Save,
    Recall,
    Forget,
    Reinforce,
}

impl MemoryAction {
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryAction::Save => "save",
            MemoryAction::Recall => "recall",
            MemoryAction::Forget => "forget",
            MemoryAction::Reinforce => "reinforce",
        }
    }
}

// The kinds of memory `remember` saves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    User,
    Feedback,
    Project,
    Reference,
}

impl MemoryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::User => "user",
            MemoryKind::Feedback => "feedback",
            MemoryKind::Project => "project",
            MemoryKind::Reference => "reference",
        }
    }
}

// What happened to a memory that `remember` reinforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReinforceOutcome {
    TaskSuccess,
    TaskFailure,
    UserConfirm,
    UserReject,
}

// Who judged a reinforced memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Judge {
    User,
    System,
}

/// `read_file`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// File path, relative to the workspace
    pub path: String,
    /// First line to return, 1-based (default 1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// Most lines to return (default 2000)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
}

/// `list_dir`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ListDirArgs {
    /// Folder, relative to the workspace (default: the workspace)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Also list sub-folders, up to 4 levels (default false)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursive: Option<bool>,
}

/// `write_file`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// File path, relative to the workspace
    pub path: String,
    /// The full text to write
    pub content: String,
    /// Append instead of replacing (default false)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<bool>,
}

/// `edit_file`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EditFileArgs {
    /// File path, relative to the workspace
    pub path: String,
    /// Exact text to replace
    pub old_string: String,
    /// Replacement text
    pub new_string: String,
    /// Replace every occurrence (default false)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_all: Option<bool>,
}

/// `bash`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BashArgs {
    /// The shell command (bash syntax when bash is installed, else POSIX sh)
    pub command: String,
    /// Deadline in seconds, 1-600 (default 120)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 600))]
    pub timeout_seconds: Option<i64>,
}

/// `get_market_data`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MarketDataArgs {
    /// Ticker, e.g. AAPL, MSFT.US, 0700.HK, BTC-USD; or a CSV or Parquet file name in the workspace with source 'local'
    pub symbol: String,
    /// First date, YYYY-MM-DD (default: start of history)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Last date, YYYY-MM-DD (default: today)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// Data source (default auto)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<DataSource>")]
    pub source: Option<String>,
    /// Most rows in this page (default: as many as fit)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
    /// First row to return, 0-based (use next_offset to page on)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// Only the last N rows of the range, ending on the last trading day on or before end ("the last 20 trading days to 2012-12-31": last_n 20, end 2012-12-31, no start)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_n: Option<i64>,
}

/// `technical_indicator`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IndicatorArgs {
    /// Ticker, e.g. AAPL (for several, `symbols`)
    #[serde(default)]
    pub symbol: String,
    /// Several tickers, e.g. ["AAPL", "MSFT", "IBM"] or "AAPL,MSFT,IBM" (at most 50): the same indicator for each, answered as a table ranked by the value on the end date, highest first
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "tickers_schema")]
    pub symbols: Option<Value>,
    #[schemars(with = "IndicatorName")]
    pub indicator: String,
    /// e.g. {"window": 20}; rsi/atr {"period": 14}; macd {"fast": 12, "slow": 26, "signal": 9}; bollinger {"window": 20, "k": 2}; volatility {"window": 20}; correlation {"with": "MSFT", "window": 20}; momentum {"window": 252, "skip": 21} (12-1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Map<String, Value>>,
    /// First date, YYYY-MM-DD
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Last date, YYYY-MM-DD
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<DataSource>")]
    pub source: Option<String>,
    /// Rows of history to return (default 10, at most 60)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<i64>,
}

/// A list of tickers, or one string of them separated by commas: a small
/// model writes either.
fn tickers_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["array", "string"],
        "items": {"type": "string"}
    })
}

/// `remember`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RememberArgs {
    /// Default save
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<MemoryAction>")]
    pub action: Option<String>,
    /// Memory title (save, forget, reinforce); saving the same title again replaces it
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The memory text (save)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// user = preferences, feedback = how to work, project = findings, reference = pointers (default project)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<MemoryKind>")]
    pub memory_type: Option<String>,
    /// One line used for retrieval (default: the title)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Up to 5 keywords (save)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<String>>")]
    pub keywords: Option<Vec<Value>>,
    /// What to look for (recall)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// What happened (reinforce)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<ReinforceOutcome>")]
    pub event: Option<String>,
    /// Who judged it (reinforce, default system)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Judge>")]
    pub source: Option<String>,
}

/// `recall`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecallArgs {
    /// Keywords to look for
    pub query: String,
    /// Most memories to return (default 5, at most 20)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_results: Option<i64>,
}

/// `session_search`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionSearchArgs {
    /// Keywords or a phrase
    pub query: String,
    /// Most sessions to return (default 3, at most 10)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_results: Option<i64>,
}

/// `load_skill`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoadSkillArgs {
    /// Skill name, e.g. 'backtest-design'
    pub name: String,
    /// A section label from a previous outline, copied verbatim (a repeated title as its "Parent > Child" path)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    /// Character offset to read from (default 0); pass next_offset to continue. With section, relative to the section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "integer_or_string")]
    pub offset: Option<Value>,
}

/// `backtest`: typed, flat arguments for the common case, or the whole
/// `config.json` in `config` (docs §7.1); flat arguments win over the
/// same keys of `config`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BacktestArgs {
    /// sma_crossover, ema_crossover, buy_and_hold, rsi_mean_reversion, momentum, breakout, bollinger_reversion, pairs, or rules (with entry and exit)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// The strategy's parameters by name: sma_crossover and ema_crossover fast, slow (days); rsi_mean_reversion period, lower, upper; momentum lookback; breakout window; bollinger_reversion window, k
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Map<String, Value>>,
    /// The tickers, a list of strings (pairs: two)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<String>>")]
    pub symbols: Option<Value>,
    /// First date, YYYY-MM-DD
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Last date, YYYY-MM-DD
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// The user's commission per trade as a fraction of its value; null (the default) for the market's usual costs
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commission_rate: Option<f64>,
    /// The user's slippage per trade as a fraction of the price; null (the default) for the market's usual costs
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slippage: Option<f64>,
    /// Starting cash; leave out for the default
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_cash: Option<f64>,
    /// Benchmark ticker (default SPY for US stocks)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub benchmark: Option<String>,
    /// Annual risk-free rate (decimal) for Sharpe and Sortino; leave out for the 3-month T-bill over the same dates
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_free: Option<f64>,
    /// rules: when to be long, e.g. "sma(close, 20) > sma(close, 50)" (sma ema rsi std highest lowest lag roc bb_upper bb_lower macd macd_signal macd_hist atr crosses_above crosses_below on open high low close volume)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// rules: when to exit, e.g. "crosses_below(sma(close, 20), sma(close, 50))"
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    /// Robustness checks, e.g. {"monte_carlo": true, "walk_forward": true}, or their names
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "object_or_string")]
    pub validation: Option<Value>,
    /// Run directory (default: the current run dir; relative paths resolve there; must stay inside the run dir or the workspace)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_dir: Option<String>,
    /// The whole config.json instead (keys codes, start_date, end_date, strategy {name, params} or {rules: {entry, exit}}, commission_rate, slippage, min_commission, stamp_tax, lot_size, allow_short, initial_cash, benchmark, risk_free, source, position_adjustment, validation {monte_carlo, bootstrap, walk_forward}); validated before it is written
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Map<String, Value>>,
}

/// `read_artifact`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadArtifactArgs {
    /// Artifact name (see the description) or a relative path such as artifacts/trades.csv
    pub name: String,
    /// Run directory (default: the current run dir)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_dir: Option<String>,
    /// First line, 0-based (default 0)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// Most lines (default: as many as fit)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
}

/// `compact`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompactArgs {
    /// Topic to preserve in detail (optional)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus_topic: Option<String>,
}

/// A backtest's headline metrics, typed, with every other metric the engine
/// wrote kept in `other`. A headline metric that is not a number (null for
/// NaN, text from `metrics.csv`) stays in `other` as written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BacktestMetrics {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_f64"
    )]
    pub final_value: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_f64"
    )]
    pub total_return: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_f64"
    )]
    pub annual_return: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_f64"
    )]
    pub max_drawdown: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_f64"
    )]
    pub sharpe: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_f64"
    )]
    pub win_rate: Option<f64>,
    /// A count as the engine wrote it (`3`, or `3.0` from `metrics.csv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trade_count: Option<Number>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_f64"
    )]
    pub benchmark_return: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_f64"
    )]
    pub excess_return: Option<f64>,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl BacktestMetrics {
    /// "Sharpe (annualized, rf 3-month T-bill)": what the Sharpe ratio is
    /// measured over (docs §7.5), from the result's `risk_free`. The rate
    /// varies by day, so the label names it rather than a mean that would
    /// differ between two periods ranked side by side.
    pub fn sharpe_label(&self) -> String {
        let rf = match self.other.get("risk_free").and_then(Value::as_str) {
            Some("treasury_3m") => "rf 3-month T-bill",
            _ => "rf 0 %",
        };
        format!("Sharpe (annualized, {rf})")
    }

    /// Splits the engine's scalar metrics into the typed headline and the rest.
    pub fn from_map(mut all: Map<String, Value>) -> Self {
        let mut f = |key: &str| match all.get(key).and_then(Value::as_f64) {
            Some(x) => {
                all.remove(key);
                Some(x)
            }
            None => None,
        };
        let mut m = BacktestMetrics {
            final_value: f("final_value"),
            total_return: f("total_return"),
            annual_return: f("annual_return"),
            max_drawdown: f("max_drawdown"),
            sharpe: f("sharpe"),
            win_rate: f("win_rate"),
            trade_count: None,
            benchmark_return: f("benchmark_return"),
            excess_return: f("excess_return"),
            other: Map::new(),
        };
        if let Some(Value::Number(n)) = all.get("trade_count") {
            m.trade_count = Some(n.clone());
            all.remove("trade_count");
        }
        m.other = all;
        m
    }
}

/// A number, or a numeric string; anything else reads as absent.
fn lenient_f64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    })
}

/// A `config` problem the backtest found before starting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigIssue {
    pub key: String,
    pub code: String,
    pub message: String,
}

/// The equity chart's files, when they were drawn.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChartFiles {
    pub svg: Option<String>,
    pub png: Option<String>,
}

/// `backtest`'s result: `status` "ok" with the metrics and files, or
/// "error" with `error_code` and `error` (and what is known of the run).
/// The headline comes first and the engine's logs last: a result cut to a
/// small model's window keeps what answers the question (docs §3.9).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct BacktestOutput {
    pub status: String,
    pub run_dir: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<BacktestMetrics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Config problems, each naming its key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issues: Option<Vec<ConfigIssue>>,
    /// `false` when an inline `config` was refused and not written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_written: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<Value>,
    /// Artifact name → absolute path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<ChartFiles>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_artifacts: Option<Vec<String>>,
    /// What the run assumed (costs, lots, cash, prices, benchmark), from
    /// its run card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assumptions: Option<BacktestAssumptions>,
    /// The history before `start_date` the signals were computed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<WarmupInfo>,
    /// Harmless slips in the arguments that were put right (a string for
    /// the `validation` block, a comma-separated `codes`, docs §2.2.1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argument_warnings: Vec<String>,
    /// Present (maybe null: killed by a signal) once the engine ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<Option<i32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
}

/// What a backtest assumed (docs §7.4), as its run card states it: the
/// first code's costs and lots (`rules_differ` when another code's
/// differ), the cash, the price adjustment, the annualisation and the
/// benchmark actually used. Rates are fractions (0.0005 = 5 bp).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct BacktestAssumptions {
    /// Commission per fill, a fraction of its notional.
    pub commission_rate: f64,
    /// Least commission per fill, in cash.
    pub min_commission: f64,
    /// Fraction of the open a fill pays (buys) or gives up (sells).
    pub slippage: f64,
    /// Sell-side tax (stamp duty), a fraction of notional.
    pub sell_tax: f64,
    /// Transfer fee on both sides, a fraction of notional.
    pub transfer_fee: f64,
    /// Quantities are whole multiples of this; 0 means fractional.
    pub lot_size: f64,
    pub allow_short: bool,
    /// Another code's costs or lots differ from the ones above.
    pub rules_differ: bool,
    pub initial_cash: f64,
    /// The adjustments the data layer applied, as it names them.
    pub price_adjustment: String,
    /// Bars per year used to annualise returns, Sharpe and volatility.
    pub bars_per_year: f64,
    /// The benchmark as used: a ticker, or `equal_weight` of the codes.
    pub benchmark: String,
    /// The portfolio optimizer that set the weights, in words (docs
    /// §7.4.2); absent when the signals' weights were used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optimizer: Option<String>,
    /// The `config.json` keys the tool filled from `[backtest]` in
    /// `config.toml` because the call gave none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub from_settings: Vec<String>,
}

/// A short label for the price adjustments the data layer names: "split-
/// and dividend-adjusted", "split-adjusted only", or as served.
pub fn adjustment_label(adjustments: &[String]) -> String {
    let all = adjustments.join("; ").to_lowercase();
    if all.is_empty() || all.starts_with("none: prices as") {
        "as the source served them (no adjustment applied)".into()
    } else if all.contains("not dividend") {
        "split-adjusted only (not dividend-adjusted)".into()
    } else if all.contains("dividend") {
        "split- and dividend-adjusted".into()
    } else if all.contains("split") {
        "split-adjusted".into()
    } else {
        adjustments.join("; ")
    }
}

/// How much history before the requested start indicators or signals were
/// computed on (docs §7.4.1), so that a value on a date does not depend on
/// the start.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct WarmupInfo {
    /// Bars before the start the values need; absent: all the history
    /// there is (a running peak).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bars_needed: Option<usize>,
    /// Bars before the start they were computed on (the fewest of any series).
    pub bars_used: usize,
    /// Set when there were too few: which series, and from which date its
    /// values are warm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl BacktestOutput {
    /// A failure before or around the engine run.
    pub fn error(code: &str, message: impl Into<String>, run_dir: &str) -> Self {
        BacktestOutput {
            status: "error".into(),
            run_dir: run_dir.to_string(),
            error_code: Some(code.to_string()),
            error: Some(message.into()),
            ..Default::default()
        }
    }

    pub fn is_ok(&self) -> bool {
        self.status == "ok"
    }
}

/// What the planner reads of a series' provenance (the tools write the
/// whole record, which has more).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ProvenanceBrief {
    pub symbol: String,
    pub source: String,
    pub rows: Option<u64>,
    pub first_date: Option<String>,
    pub last_date: Option<String>,
    pub adjustments: Vec<String>,
}

/// One daily bar: date, open, high, low, close, volume (null where not a
/// finite number).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PriceRow(
    pub Option<String>,
    pub Option<f64>,
    pub Option<f64>,
    pub Option<f64>,
    pub Option<f64>,
    pub Option<f64>,
);

/// The range a `get_market_data` answer covers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct PriceSummary {
    pub first_date: String,
    pub last_date: String,
    pub first_close: Option<f64>,
    pub last_close: Option<f64>,
    pub min_close: Option<f64>,
    pub max_close: Option<f64>,
    pub total_return_pct: Option<f64>,
}

/// `get_market_data`'s page; `P` is the provenance record (the tool writes
/// the whole one, the planner reads a [`ProvenanceBrief`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(bound = "P: JsonSchema + Default")]
#[serde(default)]
pub struct MarketDataOutput<P = ProvenanceBrief> {
    /// With `start` = `end`: that day's bar, first (docs §2.12.1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_date: Option<Map<String, Value>>,
    /// The whole range's own figures, on every page and before anything
    /// else, so that a small model reads the asked figure first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period: Option<PeriodFigures>,
    pub status: String,
    pub symbol: String,
    /// Rows in the range `[start, end]` (with `last_n` and no `start`: the
    /// last N rows to `end`); `rows` are `offset..offset + returned` of
    /// them, and `last_n` alone starts at `total − N`.
    pub total: usize,
    pub offset: usize,
    pub returned: usize,
    pub next_offset: Option<usize>,
    pub complete: bool,
    /// Null when there are no rows.
    pub summary: Option<PriceSummary>,
    pub provenance: P,
    /// Harmless slips in the arguments that were read another way
    /// (`last_n` 0 for no `last_n`, docs §2.2.1).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub argument_warnings: Vec<String>,
    /// Last, so that a page cut to a small window keeps the summary
    /// (docs §3.9).
    pub columns: Vec<String>,
    pub rows: Vec<PriceRow>,
}

/// A series' lowest and highest value over the range, with their dates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Extremes {
    pub min: Option<f64>,
    pub min_date: Option<String>,
    pub max: Option<f64>,
    pub max_date: Option<String>,
}

/// `technical_indicator`'s answer; `P` as for [`MarketDataOutput`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(bound = "P: JsonSchema + Default")]
#[serde(default)]
pub struct IndicatorOutput<P = ProvenanceBrief> {
    /// With `start` = `end`: the values on that day, first (docs §2.12.1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_date: Option<Map<String, Value>>,
    /// The range's own return, volatility and drawdown (docs §2.12.1),
    /// first in the answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period: Option<PeriodFigures>,
    pub status: String,
    pub symbol: String,
    pub indicator: String,
    pub params: Value,
    /// `date` and each series' latest value.
    pub latest: Map<String, Value>,
    /// Series name → its extremes.
    pub extremes: Map<String, Value>,
    pub columns: Vec<String>,
    /// The last rows: `[date, value…]` in `columns` order.
    pub tail: Vec<Value>,
    pub rows: usize,
    pub warmup_nan_rows: usize,
    /// The history before `start` the values were computed on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup: Option<WarmupInfo>,
    pub provenance: P,
    /// The second series' provenance (`correlation`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_provenance: Option<P>,
    /// Harmless slips in the arguments that were read another way
    /// (`window` for RSI's `period`, docs §2.2.1).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub argument_warnings: Vec<String>,
}

/// `technical_indicator`'s answer: one symbol's, or the ranked table of
/// several (`symbols`, docs §2.12.2).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum IndicatorAnswer<P = ProvenanceBrief> {
    One(Box<IndicatorOutput<P>>),
    Ranked(Box<RankedIndicatorOutput>),
}

impl<P: JsonSchema + Default> JsonSchema for IndicatorAnswer<P> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "IndicatorAnswer".into()
    }
    // An object either way (an MCP `outputSchema` must be one), with
    // the keys both forms share at its top.
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let one = generator.subschema_for::<IndicatorOutput<P>>();
        let ranked = generator.subschema_for::<RankedIndicatorOutput>();
        schemars::json_schema!({
            "type": "object",
            "properties": {
                "status": {"type": "string"},
                "indicator": {"type": "string"},
                "params": true
            },
            "required": ["status", "indicator", "params"],
            "anyOf": [one, ranked]
        })
    }
}

/// The same indicator over several symbols, ranked (docs §2.12.2).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct RankedIndicatorOutput {
    /// The symbol ranked first, named before the table: measured, asked
    /// for "the most volatile, then backtest that one", the 1.5B model
    /// read the table right and then backtested the symbol it had guessed
    /// in its own call.
    pub highest: String,
    /// What orders `ranked`, in words.
    pub ranked_by: String,
    pub ranked: Vec<RankedRow>,
    /// The symbols that have no answer, each with its error; the others
    /// are ranked all the same.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<SymbolError>,
    pub status: String,
    pub indicator: String,
    pub params: Value,
    /// The series whose value ranks them (the indicator's first).
    pub series: String,
}

/// One symbol's row of a ranked table: the value on its last date, and
/// its range's own figures (docs §2.12.1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct RankedRow {
    pub rank: usize,
    pub symbol: String,
    pub date: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    pub total_return: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annualized_volatility: Option<f64>,
    /// The deepest drawdown within the range (0 when none).
    pub max_drawdown: f64,
    pub source: String,
}

/// A symbol a ranked call could not answer for.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SymbolError {
    pub symbol: String,
    pub code: String,
    pub message: String,
}

/// A drawdown with its dates: `depth` is negative (−0.4795 = −47.95 %),
/// `recovery` null when the closes had not regained the peak by the end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct DrawdownDates {
    pub depth: f64,
    pub peak: String,
    pub trough: String,
    pub recovery: Option<String>,
}

/// What a period itself did, on the closes within it (docs §2.12.1): "the
/// drawdown during 2008" is measured within 2008.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct PeriodFigures {
    /// The first and last bar of the range, with their closes.
    pub first_date: String,
    pub first_close: f64,
    pub last_date: String,
    pub last_close: f64,
    pub bars: usize,
    /// The close the return runs from: the range's first.
    pub return_from: String,
    /// last close / the `return_from` close − 1.
    pub total_return: f64,
    /// `max_drawdown_window`'s depth under the words a question uses
    /// ("the maximum drawdown during 2008"): measured, the 1.5B model
    /// passed over `depth` for the drawdown indicator's `latest` value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_drawdown: Option<f64>,
    /// The daily simple returns from `return_from` to the last bar.
    pub daily_returns: usize,
    /// Their sample standard deviation (ddof 1) × √252; absent with
    /// fewer than two.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annualized_volatility: Option<f64>,
    /// How `annualized_volatility` is computed, in words.
    pub volatility_basis: String,
    /// The deepest drawdown within the range: the running peak starts at
    /// its first close. Null when the closes never fell below a peak.
    pub max_drawdown_window: Option<DrawdownDates>,
    /// The deepest drawdown of the range against the running peak over
    /// all the history before it too, when that peak lies before the
    /// range (the drawdown indicator's own series measures it so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drawdown_from_earlier_peak: Option<DrawdownDates>,
}

/// A link from a recalled memory to a related one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct RelatedMemory {
    pub target: String,
    pub score: f64,
}

/// One memory as `recall` returns it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct RecalledMemory {
    pub title: String,
    #[serde(rename = "type")]
    pub memory_type: String,
    pub content: String,
    pub level: String,
    /// Its best links, only when it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub related: Option<Vec<RelatedMemory>>,
    /// Who wrote it when not the user (`mcp:<client>`): an outside note,
    /// to be weighed as such (docs §8.9, §13.4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `unconfirmed, written by the model` on a memory the model saved and
    /// the user has not kept (docs §8.3): weigh it below the user's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `remember`'s and `recall`'s answer: a `message` for save, forget and
/// reinforce (with the saved file's `path`), the `memories` for a recall.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct MemoryOutput {
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memories: Option<Vec<RecalledMemory>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A headline metric that is not a number stays where the engine put
    /// it, once, and reads back as absent.
    #[test]
    fn metrics_that_are_not_numbers_stay_as_written() {
        let all = json!({"sharpe": null, "total_return": "0.5", "trade_count": 3, "calmar": 1.5});
        let m = BacktestMetrics::from_map(all.as_object().unwrap().clone());
        assert_eq!((m.sharpe, m.total_return), (None, None));
        assert_eq!(m.trade_count, Some(Number::from(3)));
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(text.matches("sharpe").count(), 1, "{text}");
        assert!(text.contains(r#""trade_count":3"#), "{text}");
        let back: BacktestMetrics = serde_json::from_str(&text).unwrap();
        assert_eq!(
            back.total_return,
            Some(0.5),
            "numeric text reads as a number"
        );
        assert_eq!(back.other["calmar"], json!(1.5));
    }
}
