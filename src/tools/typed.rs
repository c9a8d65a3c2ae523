//! Typed tools: a [`TypedTool`] names its argument and output types, and the
//! blanket [`Tool`] impl derives the rest: the JSON schema the model is
//! offered comes from `Args` ([`parameters_schema`]), arguments are checked
//! against it with the scheduler's wording and parsed into `Args`, and the
//! output is serialised once into the text the model sees and the
//! structured output `tool_call_finished` carries.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::registry::{InvalidArguments, check_arguments};
use super::{Caps, Tool, ToolContext, ToolError, ToolReply, ToolResult};
use crate::model::contract::{output_schema, parameters_schema};

/// A tool with typed arguments and output. A built-in one is listed in
/// the manifest (`tools::builtin::MANIFEST`) by its type, which declares
/// its name and capabilities as constants.
pub trait TypedTool: Send + Sync {
    /// The name the model calls it by.
    const NAME: &'static str;
    /// What it may do (read-only, writes files, served over MCP, the
    /// offline planner's); see [`Caps`].
    const CAPS: Caps = Caps::READ_ONLY;
    /// The arguments; their schema is what the model is offered.
    type Args: DeserializeOwned + JsonSchema + Send + 'static;
    /// The result, serialised (as JSON) for the model and the events.
    /// Its schema is the MCP `outputSchema` (docs §13.4).
    type Output: Serialize + JsonSchema + Send + 'static;

    fn description(&self) -> &str;
    /// See [`Tool::repeatable`].
    fn repeatable(&self) -> bool {
        false
    }
    /// See [`Tool::timeout`].
    fn timeout(&self) -> Option<Duration> {
        None
    }
    /// See [`Tool::lean_properties`].
    fn lean_properties(&self) -> Option<&[&str]> {
        None
    }
    /// See [`Tool::lean_description`].
    fn lean_description(&self) -> Option<&str> {
        None
    }
    /// See [`Tool::lean_result`].
    fn lean_result(&self, output: &Value) -> Option<Value> {
        let _ = output;
        None
    }
    /// One call (an `async fn` in each tool: the erased [`Tool`] impl
    /// boxes its future once).
    fn run(
        &self,
        args: Self::Args,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<Self::Output, ToolError>> + Send;
}

/// The schema of `A`, generated once per type for the life of the
/// process (docs §2.1): every request and call reads this one.
pub fn schema_of<A: JsonSchema + 'static>() -> &'static Value {
    static SCHEMAS: OnceLock<Mutex<HashMap<TypeId, &'static Value>>> = OnceLock::new();
    let map = SCHEMAS.get_or_init(Mutex::default);
    let mut map = map
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    map.entry(TypeId::of::<A>())
        // Leaked once per argument type: a few dozen small schemas.
        .or_insert_with(|| Box::leak(Box::new(parameters_schema::<A>())))
}

/// The output schema of `O` ([`output_schema`]), generated once per type.
pub fn output_schema_of<O: JsonSchema + 'static>() -> Option<&'static Value> {
    static SCHEMAS: OnceLock<Mutex<HashMap<TypeId, Option<&'static Value>>>> = OnceLock::new();
    let map = SCHEMAS.get_or_init(Mutex::default);
    let mut map = map
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    *map.entry(TypeId::of::<O>())
        .or_insert_with(|| output_schema::<O>().map(|v| &*Box::leak(Box::new(v))))
}

/// Checks `args` against the schema of `A` (an object, required keys,
/// declared types: the scheduler's messages), then parses it.
pub fn parse_args<A: DeserializeOwned + JsonSchema + 'static>(args: Value) -> Result<A, ToolError> {
    check_arguments(schema_of::<A>(), &args)
        .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

/// Runs a typed tool: arguments parsed, output serialised once.
async fn reply<T: TypedTool + ?Sized>(
    tool: &T,
    args: Value,
    ctx: &ToolContext,
) -> Result<ToolReply, ToolError> {
    let args = parse_args::<T::Args>(args)?;
    let output = tool.run(args, ctx).await?;
    let value = serde_json::to_value(&output).map_err(|e| {
        ToolError::failed(
            "internal_error",
            format!("the result does not serialise: {e}"),
        )
    })?;
    Ok(ToolReply {
        text: value.to_string(),
        output: Some(value),
    })
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        T::NAME
    }
    fn description(&self) -> &str {
        TypedTool::description(self)
    }
    fn parameters(&self) -> Value {
        schema_of::<T::Args>().clone()
    }
    fn output_schema(&self) -> Option<Value> {
        output_schema_of::<T::Output>().cloned()
    }
    fn check_arguments(&self, args: &Value) -> Result<(), InvalidArguments> {
        Ok(check_arguments(schema_of::<T::Args>(), args)?)
    }
    fn readonly(&self) -> bool {
        T::CAPS.readonly
    }
    fn caps(&self) -> Caps {
        T::CAPS
    }
    fn repeatable(&self) -> bool {
        TypedTool::repeatable(self)
    }
    fn timeout(&self) -> Option<Duration> {
        TypedTool::timeout(self)
    }
    fn lean_properties(&self) -> Option<&[&str]> {
        TypedTool::lean_properties(self)
    }
    fn lean_description(&self) -> Option<&str> {
        TypedTool::lean_description(self)
    }
    fn lean_result(&self, output: &Value) -> Option<Value> {
        TypedTool::lean_result(self, output)
    }
    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move { reply(self, args, ctx).await.map(|r| r.text) })
    }
    fn call_with_output<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolReply, ToolError>> {
        Box::pin(reply(self, args, ctx))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::memory::{MemoryFlags, MemoryStore};
    use crate::model::contract::*;
    use crate::research::data::DataConfig;
    use crate::tools::Registry;
    use crate::tools::builtin::{fs, memory, shell};

    /// Every built-in tool's schema, beside the one it had when it was
    /// written by hand (the bash limits are new: the type says them).
    fn schemas() -> Vec<(Value, Value)> {
        vec![
            (
                parameters_schema::<ReadFileArgs>(),
                json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace"},
            "offset": {"type": "integer", "description": "First line to return, 1-based (default 1)"},
            "limit": {"type": "integer", "description": "Most lines to return (default 2000)"}
            }, "required": ["path"]}),
            ),
            (
                parameters_schema::<ListDirArgs>(),
                json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "Folder, relative to the workspace (default: the workspace)"},
            "recursive": {"type": "boolean", "description": "Also list sub-folders, up to 4 levels (default false)"}
            }, "required": []}),
            ),
            (
                parameters_schema::<WriteFileArgs>(),
                json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace"},
            "content": {"type": "string", "description": "The full text to write"},
            "append": {"type": "boolean", "description": "Append instead of replacing (default false)"}
            }, "required": ["path", "content"]}),
            ),
            (
                parameters_schema::<EditFileArgs>(),
                json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace"},
            "old_string": {"type": "string", "description": "Exact text to replace"},
            "new_string": {"type": "string", "description": "Replacement text"},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"}
            }, "required": ["path", "old_string", "new_string"]}),
            ),
            (
                parameters_schema::<BashArgs>(),
                json!({"type": "object", "properties": {
            "command": {"type": "string", "description": "The shell command (bash syntax when bash is installed, else POSIX sh)"},
            "timeout_seconds": {"type": "integer", "description": "Deadline in seconds, 1-600 (default 120)", "minimum": 1, "maximum": 600}
            }, "required": ["command"]}),
            ),
            (
                parameters_schema::<MarketDataArgs>(),
                json!({"type": "object", "properties": {
            "symbol": {"type": "string", "description": "Ticker, e.g. AAPL, MSFT.US, 0700.HK, BTC-USD; or a CSV or Parquet file name in the workspace with source 'local'"},
            "start": {"type": "string", "description": "First date, YYYY-MM-DD (default: start of history)"},
            "end": {"type": "string", "description": "Last date, YYYY-MM-DD (default: today)"},
            "source": {"type": "string", "enum": ["auto", "embedded", "local", "yahoo", "stooq"], "description": "Data source (default auto)"},
            "limit": {"type": "integer", "description": "Most rows in this page (default: as many as fit)"},
            "offset": {"type": "integer", "description": "First row to return, 0-based (use next_offset to page on)"},
            "last_n": {"type": "integer", "description": "Only the last N rows of the range, ending on the last trading day on or before end (\"the last 20 trading days to 2012-12-31\": last_n 20, end 2012-12-31, no start)"}
            }, "required": ["symbol"]}),
            ),
            (
                parameters_schema::<IndicatorArgs>(),
                json!({"type": "object", "properties": {
            "symbol": {"type": "string", "description": "Ticker, e.g. AAPL (for several, `symbols`)", "default": ""},
            "symbols": {"type": ["array", "string"], "items": {"type": "string"}, "description": "Several tickers, e.g. [\"AAPL\", \"MSFT\", \"IBM\"] or \"AAPL,MSFT,IBM\" (at most 50): the same indicator for each, answered as a table ranked by the value on the end date, highest first"},
            "indicator": {"type": "string", "enum": ["sma", "ema", "rsi", "macd", "bollinger", "atr", "volatility", "returns", "log_returns", "drawdown", "correlation", "momentum"]},
            "params": {"type": "object", "description": "e.g. {\"window\": 20}; rsi/atr {\"period\": 14}; macd {\"fast\": 12, \"slow\": 26, \"signal\": 9}; bollinger {\"window\": 20, \"k\": 2}; volatility {\"window\": 20}; correlation {\"with\": \"MSFT\", \"window\": 20}; momentum {\"window\": 252, \"skip\": 21} (12-1)"},
            "start": {"type": "string", "description": "First date, YYYY-MM-DD"},
            "end": {"type": "string", "description": "Last date, YYYY-MM-DD"},
            "source": {"type": "string", "enum": ["auto", "embedded", "local", "yahoo", "stooq"]},
            "tail": {"type": "integer", "description": "Rows of history to return (default 10, at most 60)"}
            }, "required": ["indicator"]}),
            ),
            (
                parameters_schema::<RememberArgs>(),
                json!({"type": "object", "properties": {
            "action": {"type": "string", "enum": ["save", "recall", "forget", "reinforce"], "description": "Default save"},
            "title": {"type": "string", "description": "Memory title (save, forget, reinforce); saving the same title again replaces it"},
            "content": {"type": "string", "description": "The memory text (save)"},
            "memory_type": {"type": "string", "enum": ["user", "feedback", "project", "reference"], "description": "user = preferences, feedback = how to work, project = findings, reference = pointers (default project)"},
            "description": {"type": "string", "description": "One line used for retrieval (default: the title)"},
            "keywords": {"type": "array", "items": {"type": "string"}, "description": "Up to 5 keywords (save)"},
            "query": {"type": "string", "description": "What to look for (recall)"},
            "event": {"type": "string", "enum": ["task_success", "task_failure", "user_confirm", "user_reject"], "description": "What happened (reinforce)"},
            "source": {"type": "string", "enum": ["user", "system"], "description": "Who judged it (reinforce, default system)"}
            }, "required": []}),
            ),
            (
                parameters_schema::<RecallArgs>(),
                json!({"type": "object", "properties": {
            "query": {"type": "string", "description": "Keywords to look for"},
            "max_results": {"type": "integer", "description": "Most memories to return (default 5, at most 20)"}
            }, "required": ["query"]}),
            ),
            (
                parameters_schema::<SessionSearchArgs>(),
                json!({"type": "object", "properties": {
            "query": {"type": "string", "description": "Keywords or a phrase"},
            "max_results": {"type": "integer", "description": "Most sessions to return (default 3, at most 10)"}
            }, "required": ["query"]}),
            ),
            (
                parameters_schema::<LoadSkillArgs>(),
                json!({"type": "object", "properties": {
            "name": {"type": "string", "description": "Skill name, e.g. 'backtest-design'"},
            "section": {"type": "string", "description": "A section label from a previous outline, copied verbatim (a repeated title as its \"Parent > Child\" path)"},
            "offset": {"type": ["integer", "string"], "description": "Character offset to read from (default 0); pass next_offset to continue. With section, relative to the section."}
            }, "required": ["name"]}),
            ),
            (
                parameters_schema::<BacktestArgs>(),
                json!({"type": "object", "properties": {
            "strategy": {"type": "string", "description": "sma_crossover, ema_crossover, buy_and_hold, rsi_mean_reversion, momentum, breakout, bollinger_reversion, pairs, or rules (with entry and exit)"},
            "params": {"type": "object", "description": "The strategy's parameters by name: sma_crossover and ema_crossover fast, slow (days); rsi_mean_reversion period, lower, upper; momentum lookback; breakout window; bollinger_reversion window, k"},
            "symbols": {"type": "array", "items": {"type": "string"}, "description": "The tickers, a list of strings (pairs: two)"},
            "start": {"type": "string", "description": "First date, YYYY-MM-DD"},
            "end": {"type": "string", "description": "Last date, YYYY-MM-DD"},
            "commission_rate": {"type": "number", "description": "The user's commission per trade as a fraction of its value; null (the default) for the market's usual costs"},
            "slippage": {"type": "number", "description": "The user's slippage per trade as a fraction of the price; null (the default) for the market's usual costs"},
            "initial_cash": {"type": "number", "description": "Starting cash; leave out for the default"},
            "benchmark": {"type": "string", "description": "Benchmark ticker (default SPY for US stocks)"},
            "risk_free": {"type": "number", "description": "Annual risk-free rate (decimal) for Sharpe and Sortino; leave out for the 3-month T-bill over the same dates"},
            "entry": {"type": "string", "description": "rules: when to be long, e.g. \"sma(close, 20) > sma(close, 50)\" (sma ema rsi std highest lowest lag roc bb_upper bb_lower macd macd_signal macd_hist atr crosses_above crosses_below on open high low close volume)"},
            "exit": {"type": "string", "description": "rules: when to exit, e.g. \"crosses_below(sma(close, 20), sma(close, 50))\""},
            "validation": {"type": ["object", "string"], "description": "Robustness checks, e.g. {\"monte_carlo\": true, \"walk_forward\": true}, or their names"},
            "run_dir": {"type": "string", "description": "Run directory (default: the current run dir; relative paths resolve there; must stay inside the run dir or the workspace)"},
            "config": {"type": "object", "description": "The whole config.json instead (keys codes, start_date, end_date, strategy {name, params} or {rules: {entry, exit}}, commission_rate, slippage, min_commission, stamp_tax, lot_size, allow_short, initial_cash, benchmark, risk_free, source, position_adjustment, validation {monte_carlo, bootstrap, walk_forward}); validated before it is written"}
            }, "required": []}),
            ),
            (
                parameters_schema::<ReadArtifactArgs>(),
                json!({"type": "object", "properties": {
            "name": {"type": "string", "description": "Artifact name (see the description) or a relative path such as artifacts/trades.csv"},
            "run_dir": {"type": "string", "description": "Run directory (default: the current run dir)"},
            "offset": {"type": "integer", "description": "First line, 0-based (default 0)"},
            "limit": {"type": "integer", "description": "Most lines (default: as many as fit)"}
            }, "required": ["name"]}),
            ),
        ]
    }

    #[test]
    fn generated_schemas_match_the_hand_written_ones() {
        for (generated, by_hand) in schemas() {
            assert_eq!(generated, by_hand, "{generated:#}");
        }
        // The tool offers exactly its argument type's schema.
        assert_eq!(
            Tool::parameters(&fs::ReadFile),
            parameters_schema::<ReadFileArgs>()
        );
    }

    #[test]
    fn schemas_are_plain_objects_providers_accept() {
        for (schema, _) in schemas() {
            crate::tools::builtin::testkit::assert_plain_object(&schema);
        }
        let remember = parameters_schema::<RememberArgs>();
        assert_eq!(
            remember["properties"]["memory_type"]["enum"],
            json!(["user", "feedback", "project", "reference"])
        );
        assert_eq!(remember["required"], json!([]));
        let indicator = parameters_schema::<IndicatorArgs>();
        assert_eq!(indicator["required"], json!(["indicator"]));
        assert_eq!(
            indicator["properties"]["tail"]["description"],
            "Rows of history to return (default 10, at most 60)"
        );
    }

    fn ctx(root: &Path) -> ToolContext {
        crate::tools::test_context(root.to_path_buf(), root.join("ws"))
    }

    async fn error_of(tool: &dyn Tool, args: Value, c: &ToolContext) -> String {
        tool.call(args, c).await.unwrap_err().to_string()
    }

    /// Each kind of argument error keeps the words it had before the
    /// arguments were typed.
    #[tokio::test]
    async fn argument_errors_keep_their_messages() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let mut r = Registry::new();
        crate::tools::builtin::market::register_market_tools_with(&mut r, DataConfig::offline())
            .unwrap();
        let store =
            Arc::new(MemoryStore::open(dir.path().join("mem"), MemoryFlags::default()).unwrap());
        memory::register_memory_tools(
            &mut r,
            store,
            Arc::new(crate::memory::SkillSet::load(None)),
            dir.path().join("sessions"),
        )
        .unwrap();
        let market = r.get("get_market_data").unwrap().as_ref();
        let remember = r.get("remember").unwrap().as_ref();
        let recall = r.get("recall").unwrap().as_ref();
        let bash = shell::Bash::default();

        // A required field missing, and a field of the wrong type: the
        // scheduler's schema check, which the typed parse runs too.
        assert_eq!(
            error_of(market, json!({"source": "embedded"}), &c).await,
            "invalid arguments: missing required argument(s): symbol"
        );
        assert_eq!(
            error_of(market, json!({"symbol": "AAPL", "limit": "5"}), &c).await,
            "invalid arguments: argument 'limit' must be of type \"integer\", got string"
        );
        assert_eq!(
            error_of(&fs::ReadFile, json!([1]), &c).await,
            "invalid arguments: arguments must be a JSON object, got array"
        );
        // A value outside an enum.
        assert_eq!(
            error_of(
                remember,
                json!({"title": "t", "content": "x", "memory_type": "bogus"}),
                &c
            )
            .await,
            "invalid arguments: memory_type 'bogus' is not one of user, feedback, project, reference"
        );
        assert_eq!(
            error_of(remember, json!({"action": "shout"}), &c).await,
            "invalid arguments: action 'shout' is not one of save, recall, forget, reinforce"
        );
        assert_eq!(
            error_of(
                remember,
                json!({"action": "reinforce", "title": "t", "event": "nap"}),
                &c
            )
            .await,
            "invalid arguments: event 'nap' is not one of task_success, task_failure, user_confirm, user_reject"
        );
        let e = error_of(market, json!({"symbol": "AAPL", "source": "tushare"}), &c).await;
        assert!(e.contains("valid sources"), "{e}");
        // Aliases the enum does not list are still accepted.
        let ok = market
            .call(
                json!({"symbol": "AAPL", "source": "builtin", "limit": 1}),
                &c,
            )
            .await
            .unwrap();
        assert!(ok.contains("\"source\":\"embedded\""), "{ok}");
        // Out of range.
        assert_eq!(
            error_of(
                &bash,
                json!({"command": "true", "timeout_seconds": 601}),
                &c
            )
            .await,
            "invalid arguments: 'timeout_seconds' must be an integer from 1 to 600"
        );
        assert_eq!(
            error_of(market, json!({"symbol": "AAPL", "offset": -1}), &c).await,
            "invalid arguments: 'offset' must be a non-negative integer"
        );
        assert_eq!(
            error_of(recall, json!({"query": "fees", "max_results": -2}), &c).await,
            "invalid arguments: 'max_results' must be a positive integer, got -2"
        );
        // Required for one action only.
        assert_eq!(
            error_of(remember, json!({"action": "recall"}), &c).await,
            "invalid arguments: 'query' is required for action 'recall'"
        );
    }

    /// The MCP `outputSchema`: the output as serialised, numbers that may
    /// be null (a NaN is written as null), none for free-form JSON.
    #[test]
    fn output_schemas_describe_the_serialised_output() {
        let schema = Tool::output_schema(&fs::WriteFile).unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(
            schema["properties"]["bytes"]["type"],
            json!(["integer", "null"])
        );
        assert_eq!(schema["properties"]["path"]["type"], "string");
        assert!(output_schema::<Value>().is_none());
    }

    #[tokio::test]
    async fn typed_tools_answer_with_text_and_the_same_data() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let args = json!({"path": "a.txt", "content": "hello"});
        let reply = fs::WriteFile.call_with_output(args, &c).await.unwrap();
        let output = reply.output.unwrap();
        assert_eq!(output["bytes"], 5);
        assert_eq!(reply.text, output.to_string());
        assert_eq!(
            reply.text,
            r#"{"status":"ok","path":"a.txt","bytes":5,"appended":false}"#
        );
    }
}
