//! The `backtest` and `read_artifact` tools (docs §6.4, issue 6).
//!
//! `backtest` validates the run dir's `config.json` (or writes the one
//! given inline, atomically, after validating it), then runs `<vibedesk>
//! engine <run_dir>` through [`crate::sandbox::Runner`] with a 300 s
//! deadline (§6.2) and reads the artifacts back. It is a write tool
//! (`readonly() == false`: it runs alone and the loop never kills it) and
//! repeatable (a rerun after an edit must run again).
//!
//! Result (`status` "ok"):
//! `{"status","run_dir","summary","metrics":{every scalar metric},
//!   "warnings","validation"?, "artifacts":{name: absolute path},
//!   "chart":{"svg","png"},"exit_code","elapsed_ms","stdout","stderr"}`
//! with stdout/stderr tails of 2,000 characters. Failures:
//! `{"status":"error","error_code","error":"<what is wrong and how to fix
//! it>","run_dir",...}`; config problems also list `issues`
//! `[{key, code, message}]` and are reported before any process starts.
//!
//! Deliberate differences from the original: the key metrics are in the
//! result itself (the original's never reach the reply, §12.12), a
//! timeout is a structured error with the partial logs (§12.14), and the
//! Python interpreter is probed before the engine starts.
//!
//! Online data is fetched here, before the sandbox starts, not in it: the
//! sandboxed engine may not write the shared market cache (Landlock) and,
//! run as another user, may not even read it, so every run would fetch
//! again. What the online sources served is stored in the shared cache
//! (closed ranges only) and handed to the engine as a market cache inside
//! the run dir, where it finds it as cache hits.

use schemars::JsonSchema;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::args;
use super::backtest_args::config_of;
use super::{Builtin, Family, ToolEnv, register_family};
use crate::fsio::{ConfineError, confine};
use crate::model::contract::{
    BacktestArgs, BacktestAssumptions, BacktestMetrics, BacktestOutput, ChartFiles, ConfigIssue,
    ReadArtifactArgs, WarmupInfo,
};
use crate::model::names;
use crate::research::backtest::{self, BacktestError, RunOptions, StrategySpec};
use crate::research::data::DataConfig;
use crate::research::data::cache::{Cache, is_cacheable};
use crate::research::data::{DataRequest, PriceSeries};
use crate::sandbox::{BACKTEST_ARTIFACTS, RunResult, RunSpec, Runner, RunnerConfig};
use crate::store::atomic_write;
use crate::tools::Caps;
use crate::tools::registry::DuplicateTool;
use crate::tools::{Registry, ToolContext, ToolError, TypedTool, progress};

/// Spec §6.2: the backtest subprocess deadline.
pub const ENGINE_TIMEOUT: Duration = Duration::from_secs(300);
/// Spec §6.4: stdout/stderr tails in the result.
const TAIL_CHARS: usize = 2_000;
/// Characters of file content one `read_artifact` page returns.
const PAGE_CHARS: usize = 9_000;

/// How the tools run the engine.
#[derive(Clone, Debug)]
pub struct BacktestToolConfig {
    /// Run as `<engine_program> engine <run_dir> ...`; by default this very
    /// executable (tests point it at the built `vibedesk` binary).
    pub engine_program: PathBuf,
    pub runner: RunnerConfig,
    /// The shared market-data cache: read and filled by the fetch before
    /// the engine starts; the engine is given the run dir's copy of what
    /// the online sources served, or this one when there is none.
    pub cache_dir: Option<PathBuf>,
    /// No online data at all: no fetch before the engine starts, and the
    /// engine runs with `--offline`.
    pub offline: bool,
    /// The interpreter for `code/signal_engine.py`; `None` probes `python3`.
    pub python: Option<PathBuf>,
    pub timeout: Duration,
    /// Base URLs of the online sources; `None` for the public ones.
    pub yahoo_base_url: Option<String>,
    pub stooq_base_url: Option<String>,
    /// `config.json` keys a run's config takes when it leaves them out:
    /// `[backtest]` of `config.toml` (docs §7.4). Filled in before the
    /// check, and written into the run dir's `config.json`, so the run
    /// reproduces without the settings file.
    pub defaults: Map<String, Value>,
}

impl BacktestToolConfig {
    /// This executable, the environment's runner limits, the given cache.
    pub fn new(cache_dir: Option<PathBuf>) -> Self {
        BacktestToolConfig {
            engine_program: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("vibedesk")),
            runner: RunnerConfig::from_env(),
            cache_dir,
            offline: false,
            python: None,
            timeout: ENGINE_TIMEOUT,
            yahoo_base_url: None,
            stooq_base_url: None,
            defaults: Map::new(),
        }
    }
}

/// Fetches what `config` needs from outside the sandbox (the shared cache
/// first) and stores what the online sources served in the run dir's
/// market cache; returns that cache's folder when it holds anything.
/// Failures are left to the engine, which reports them in full, and so is
/// a range that cannot be cached.
async fn prefetch_online(
    cfg: &BacktestToolConfig,
    config: &backtest::config::BacktestConfig,
    run_dir: &Path,
    local_dirs: &[PathBuf],
) -> Option<PathBuf> {
    // The cache's rule: a range ending today can still change, so it is
    // never cached. The engine fetches it itself (fetching it here too
    // would ask the sources twice), and nothing is left in the run dir
    // that a rerun tomorrow would read back as final.
    if !is_cacheable(Some(config.end_date), chrono::Utc::now().date_naive()) {
        return None;
    }
    let opts = RunOptions {
        cache_dir: cfg.cache_dir.clone(),
        local_dirs: local_dirs.to_vec(),
        offline: false,
        python: None,
        yahoo_base_url: cfg.yahoo_base_url.clone(),
        stooq_base_url: cfg.stooq_base_url.clone(),
        // The engine loads the same local files right after (the slow
        // parses are kept for it; quick ones it repeats).
        keep_parsed_bars: true,
    };
    let (mut series, _, bench) = match backtest::fetch_data(config, run_dir, &opts).await {
        Ok(v) => v,
        Err(e) => {
            tracing::debug!("data prefetch failed, the engine will try again: {e}");
            return None;
        }
    };
    let dir = run_dir.join(backtest::RUN_MARKET_CACHE_DIR);
    let cache = Cache::new(&dir);
    // Under the key the engine asks for: the codes with their warm-up
    // history (docs §7.4.1), the benchmark on the range.
    let range = |history: usize| {
        DataRequest::new("")
            .range(Some(config.start_date), Some(config.end_date))
            .history(history)
    };
    series.retain(|s| s.provenance.source.is_online());
    let mut entries: Vec<(PriceSeries, DataRequest)> = series
        .into_iter()
        .map(|s| (s, range(config.warmup_bars())))
        .collect();
    entries.extend(
        bench
            .filter(|b| b.provenance.source.is_online())
            .map(|b| (b, range(0))),
    );
    let mut stored = false;
    for (s, req) in &entries {
        let start = req.load_start(s.provenance.source);
        match cache.put(s, start, config.end_date).await {
            Ok(_) => stored = true,
            Err(e) => tracing::debug!("cannot hand {} to the engine: {e}", s.symbol),
        }
    }
    stored.then_some(dir)
}

/// Registers `backtest` and `read_artifact`.
pub fn register_backtest_tools(
    registry: &mut Registry,
    config: BacktestToolConfig,
) -> Result<(), DuplicateTool> {
    let mut env = ToolEnv::new(DataConfig {
        cache_dir: config.cache_dir.clone(),
        ..DataConfig::default()
    });
    env.backtest = Arc::new(config);
    register_family(registry, Family::Backtest, &env)
}

/// The last `n` characters.
fn tail(s: &str, n: usize) -> String {
    let total = s.chars().count();
    if total <= n {
        s.to_string()
    } else {
        s.chars().skip(total - n).collect()
    }
}

fn error_output(code: &str, message: impl Into<String>, run_dir: &Path) -> BacktestOutput {
    BacktestOutput::error(code, message, &run_dir.display().to_string())
}

fn config_error_output(e: &BacktestError, run_dir: &Path) -> BacktestOutput {
    let mut out = error_output(e.code(), e.to_string(), run_dir);
    if let BacktestError::Config(c) = e {
        out.issues = Some(
            c.issues
                .iter()
                .map(|i| ConfigIssue {
                    key: i.key.clone(),
                    code: i.code.to_string(),
                    message: i.message.clone(),
                })
                .collect(),
        );
    }
    out
}

/// The scalar metrics from `metrics.json`, else `metrics.csv` (cells that
/// parse as numbers become numbers, the rest stay text: §12.12).
pub fn read_metrics(run_dir: &Path) -> Option<Map<String, Value>> {
    let art = run_dir.join("artifacts");
    if let Ok(text) = std::fs::read_to_string(art.join("metrics.json"))
        && let Ok(Value::Object(m)) = serde_json::from_str::<Value>(&text)
    {
        return Some(m);
    }
    let text = std::fs::read_to_string(art.join("metrics.csv")).ok()?;
    let mut rdr = csv::Reader::from_reader(text.as_bytes());
    let head = rdr.headers().ok()?.clone();
    let row = rdr.records().next()?.ok()?;
    Some(
        head.iter()
            .zip(row.iter())
            .map(|(k, v)| {
                let val = match v.parse::<f64>() {
                    Ok(x) if x.is_finite() => json!(x),
                    _ if v.is_empty() => Value::Null,
                    _ => json!(v),
                };
                (k.to_string(), val)
            })
            .collect(),
    )
}

fn pct(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |x| format!("{:.2}%", x * 100.0))
}

fn num2(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |x| format!("{x:.2}"))
}

/// One sentence with the key numbers, each named, for the chat (§12.12);
/// `benchmark` is the one the run used.
pub fn summary_line(
    codes: &[String],
    strategy: &str,
    m: &BacktestMetrics,
    benchmark: Option<&str>,
) -> String {
    format!(
        "{} · {}: total return {}, annualized return {}, {} {}, max drawdown {}, {} round-trip trades, win rate {}; benchmark{} return {} (excess {}); final portfolio value {}",
        codes.join(", "),
        strategy,
        pct(m.total_return),
        pct(m.annual_return),
        m.sharpe_label(),
        num2(m.sharpe),
        pct(m.max_drawdown),
        m.trade_count
            .as_ref()
            .map_or("n/a".to_string(), ToString::to_string),
        pct(m.win_rate),
        benchmark.map(|b| format!(" {b}")).unwrap_or_default(),
        pct(m.benchmark_return),
        pct(m.excess_return),
        num2(m.final_value),
    )
}

/// The headline numbers of the validation suite.
fn validation_brief(v: &Value) -> Value {
    let mut out = Map::new();
    if let Some(mc) = v.get("monte_carlo") {
        out.insert("monte_carlo".into(), if mc.get("skipped").is_some() { mc.clone() } else {
            json!({"p_value_sharpe": mc["p_value_sharpe"], "p_value_max_drawdown": mc["p_value_max_drawdown"], "n_simulations": mc["n_simulations"]})
        });
    }
    if let Some(b) = v.get("bootstrap") {
        out.insert("bootstrap".into(), if b.get("skipped").is_some() { b.clone() } else {
            json!({"sharpe_ci": [b["sharpe"]["ci_low"], b["sharpe"]["ci_high"]], "confidence": b["confidence"], "prob_sharpe_positive": b["prob_sharpe_positive"]})
        });
    }
    if let Some(w) = v.get("walk_forward") {
        out.insert("walk_forward".into(), if w.get("skipped").is_some() { w.clone() } else {
            json!({"n_windows": w["n_windows"], "consistency_rate": w["consistency_rate"],
                   "window_returns": w["windows"].as_array().map(|a| a.iter().map(|x| x["return"].clone()).collect::<Vec<_>>())})
        });
    }
    Value::Object(out)
}

/// Runs the backtest in `run_dir` through the sandbox: validation first,
/// then `<engine> engine <run_dir>`, then the artifacts. Never errors: the
/// result says what happened. Shared by the tool and `vibedesk backtest`.
pub async fn run_backtest(
    cfg: &BacktestToolConfig,
    run_dir: &Path,
    local_dirs: &[PathBuf],
    cancel: &CancellationToken,
) -> Value {
    let out = backtest_output(cfg, run_dir, local_dirs, cancel).await;
    serde_json::to_value(out).unwrap_or(Value::Null)
}

/// [`run_backtest`], typed.
pub async fn backtest_output(
    cfg: &BacktestToolConfig,
    run_dir: &Path,
    local_dirs: &[PathBuf],
    cancel: &CancellationToken,
) -> BacktestOutput {
    match run_steps(cfg, run_dir, local_dirs, cancel).await {
        Ok(out) | Err(out) => out,
    }
}

/// The steps of a run; `Err` is a failure that ends it early.
async fn run_steps(
    cfg: &BacktestToolConfig,
    run_dir: &Path,
    local_dirs: &[PathBuf],
    cancel: &CancellationToken,
) -> Result<BacktestOutput, BacktestOutput> {
    let from_settings = apply_defaults(&cfg.defaults, run_dir).await?;
    let (config, python) = check_config(cfg, run_dir).await?;
    let run_cache = if !cfg.offline && backtest::may_use_online(&config) {
        prefetch_for_engine(cfg, &config, run_dir, local_dirs, cancel).await?
    } else {
        None
    };
    progress::emit(
        "simulate",
        None,
        None,
        &format!("running the engine on {} symbol(s)", config.codes.len()),
    );
    let spec = engine_spec(
        cfg,
        run_dir,
        local_dirs,
        run_cache.as_ref(),
        python.as_ref(),
    );
    let runner = Runner::new(cfg.runner.clone());
    let result = runner.run(spec, cancel).await.map_err(|e| {
        error_output(
            "sandbox_error",
            format!("{e}; the engine could not be started"),
            run_dir,
        )
    })?;
    progress::emit("finalize", None, None, "reading the artifacts");
    let base = BacktestOutput {
        status: "error".into(),
        run_dir: run_dir.display().to_string(),
        exit_code: Some(result.exit_code),
        elapsed_ms: Some(result.elapsed_ms),
        stdout: Some(tail(&result.stdout, TAIL_CHARS)),
        stderr: Some(tail(&result.stderr, TAIL_CHARS)),
        ..Default::default()
    };
    if let Some((code, message)) = run_failure(cfg, &result) {
        return Err(BacktestOutput {
            error_code: Some(code),
            error: Some(message),
            ..base
        });
    }
    let mut out = finished_run(&config, run_dir, &result, base).await;
    if let Some(a) = out.assumptions.as_mut() {
        a.from_settings = from_settings;
    }
    Ok(out)
}

/// Fills the keys `config.json` leaves out (absent or null) from
/// `defaults` and writes the file back when it changed; the keys filled.
/// A missing or unreadable file is left to the config check, which says
/// what is wrong.
async fn apply_defaults(
    defaults: &Map<String, Value>,
    run_dir: &Path,
) -> Result<Vec<String>, BacktestOutput> {
    if defaults.is_empty() {
        return Ok(Vec::new());
    }
    let path = run_dir.join(backtest::CONFIG_FILE);
    let Ok(text) = tokio::fs::read_to_string(&path).await else {
        return Ok(Vec::new());
    };
    let Ok(Value::Object(mut cfg)) = serde_json::from_str::<Value>(&text) else {
        return Ok(Vec::new());
    };
    let mut filled = Vec::new();
    for (k, v) in defaults {
        if cfg.get(k).is_none_or(Value::is_null) {
            cfg.insert(k.clone(), v.clone());
            filled.push(k.clone());
        }
    }
    if filled.is_empty() {
        return Ok(filled);
    }
    let text = serde_json::to_string_pretty(&Value::Object(cfg)).unwrap_or_default() + "\n";
    tokio::task::spawn_blocking(move || atomic_write(&path, text.as_bytes()))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
        .map_err(|e| {
            error_output(
                "io_error",
                format!("cannot write the [backtest] defaults into config.json: {e}"),
                run_dir,
            )
        })?;
    Ok(filled)
}

/// The run card's `assumptions` (what the engine used), when it has them.
fn run_card_assumptions(run_dir: &Path) -> Option<BacktestAssumptions> {
    let text = std::fs::read_to_string(run_dir.join("run_card.json")).ok()?;
    let card: Value = serde_json::from_str(&text).ok()?;
    serde_json::from_value(card.get("assumptions")?.clone()).ok()
}

/// Loads and checks `config.json`, and for a Python strategy finds an
/// interpreter with pandas.
async fn check_config(
    cfg: &BacktestToolConfig,
    run_dir: &Path,
) -> Result<(backtest::config::BacktestConfig, Option<PathBuf>), BacktestOutput> {
    progress::emit("validate", None, None, "checking config.json");
    let dir = run_dir.to_path_buf();
    let config = match tokio::task::spawn_blocking(move || backtest::load_config(&dir)).await {
        Ok(Ok((c, _))) => c,
        Ok(Err(e)) => return Err(config_error_output(&e, run_dir)),
        Err(e) => {
            return Err(error_output(
                "internal_error",
                format!("config check failed: {e}"),
                run_dir,
            ));
        }
    };
    let mut python = cfg.python.clone();
    if config.strategy == StrategySpec::Python {
        progress::emit(
            "validate",
            None,
            None,
            "probing Python with pandas for code/signal_engine.py",
        );
        let given = python.clone();
        match tokio::task::spawn_blocking(move || backtest::python::probe(given.as_deref())).await {
            Ok(Ok(exe)) => python = Some(exe),
            Ok(Err(e)) => return Err(error_output(e.code, e.message, run_dir)),
            Err(e) => {
                return Err(error_output(
                    "internal_error",
                    format!("python probe failed: {e}"),
                    run_dir,
                ));
            }
        }
    }
    Ok((config, python))
}

/// Fetches online data before the sandbox starts (see the module doc);
/// the folder of the run's market cache when anything was stored.
async fn prefetch_for_engine(
    cfg: &BacktestToolConfig,
    config: &backtest::config::BacktestConfig,
    run_dir: &Path,
    local_dirs: &[PathBuf],
    cancel: &CancellationToken,
) -> Result<Option<PathBuf>, BacktestOutput> {
    progress::emit("fetch", None, None, "fetching market data");
    // The fetch's future is not `Send` for every lifetime its borrows
    // could have (a buffered stream of borrowing closures), which this
    // tool's boxed future must be: it runs on a blocking thread of its
    // own instead, with owned inputs.
    let (cfg, config, dir, local, stop) = (
        cfg.clone(),
        config.clone(),
        run_dir.to_path_buf(),
        local_dirs.to_vec(),
        cancel.clone(),
    );
    let handle = tokio::runtime::Handle::current();
    let fetched = tokio::task::spawn_blocking(move || {
        handle.block_on(async {
            tokio::select! {
                r = prefetch_online(&cfg, &config, &dir, &local) => r,
                _ = stop.cancelled() => None,
            }
        })
    })
    .await
    .unwrap_or(None);
    if cancel.is_cancelled() {
        return Err(error_output(
            "cancelled",
            "the run was cancelled while fetching market data; the engine was not started",
            run_dir,
        ));
    }
    Ok(fetched)
}

/// `<engine> engine <run_dir> [flags]` under the sandbox's limits.
fn engine_spec(
    cfg: &BacktestToolConfig,
    run_dir: &Path,
    local_dirs: &[PathBuf],
    run_cache: Option<&PathBuf>,
    python: Option<&PathBuf>,
) -> RunSpec {
    let mut args: Vec<std::ffi::OsString> = vec!["engine".into(), run_dir.as_os_str().to_owned()];
    if let Some(c) = run_cache.or(cfg.cache_dir.as_ref()) {
        args.push("--cache-dir".into());
        args.push(c.as_os_str().to_owned());
    }
    for (flag, url) in [
        ("--yahoo-base-url", &cfg.yahoo_base_url),
        ("--stooq-base-url", &cfg.stooq_base_url),
    ] {
        if let Some(u) = url {
            args.push(flag.into());
            args.push(u.into());
        }
    }
    for d in local_dirs {
        args.push("--data-dir".into());
        args.push(d.as_os_str().to_owned());
    }
    if let Some(p) = python {
        args.push("--python".into());
        args.push(p.as_os_str().to_owned());
    }
    if cfg.offline {
        args.push("--offline".into());
    }
    let mut spec = RunSpec::new(&cfg.engine_program, run_dir)
        .args(args)
        .log_name("backtest")
        .timeout(cfg.timeout)
        .artifacts(BACKTEST_ARTIFACTS)
        .progress(progress::sandbox_sink());
    if let Some(p) = python {
        spec = spec.executable(p);
    }
    spec
}

/// Why a finished engine run failed (`error_code`, `error`), if it did.
fn run_failure(cfg: &BacktestToolConfig, result: &RunResult) -> Option<(String, String)> {
    if result.timed_out {
        return Some((
            "timeout".into(),
            format!(
                "the backtest did not finish within {}s; its whole process group was killed (partial logs in logs/backtest_*.txt). Narrow the dates or the codes, or simplify the strategy.",
                cfg.timeout.as_secs()
            ),
        ));
    }
    if result.cancelled {
        return Some((
            "cancelled".into(),
            "the run was cancelled; the engine's process group was killed".into(),
        ));
    }
    if result.success {
        return None;
    }
    // The engine prints {"error", "error_code"} as its last stdout line.
    let last: Option<Value> = result
        .stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l.trim()).ok());
    Some(match last {
        Some(e) if e.get("error").is_some() => (
            e["error_code"]
                .as_str()
                .unwrap_or("engine_error")
                .to_string(),
            e["error"]
                .as_str()
                .unwrap_or("the engine failed")
                .to_string(),
        ),
        _ => (
            "engine_error".to_string(),
            format!(
                "the engine exited with {:?}{}; see stderr",
                result.exit_code,
                result
                    .signal
                    .map(|s| format!(" (signal {s})"))
                    .unwrap_or_default()
            ),
        ),
    })
}

/// A successful run's result: metrics, warnings, validation, artifacts.
async fn finished_run(
    config: &backtest::config::BacktestConfig,
    run_dir: &Path,
    result: &RunResult,
    base: BacktestOutput,
) -> BacktestOutput {
    let dir = run_dir.to_path_buf();
    let (metrics, assumptions) =
        tokio::task::spawn_blocking(move || (read_metrics(&dir), run_card_assumptions(&dir)))
            .await
            .unwrap_or_default();
    let metrics = metrics.unwrap_or_default();
    let mut scalars = Map::new();
    let mut warnings = Value::Array(Vec::new());
    let mut validation = None;
    let mut warmup = None;
    for (k, v) in metrics {
        match (k.as_str(), v) {
            ("warnings", w) => warnings = w,
            ("validation", v) => validation = Some(validation_brief(&v)),
            ("warmup", w) => warmup = serde_json::from_value::<WarmupInfo>(w).ok(),
            (_, Value::Object(_) | Value::Array(_)) => {}
            (_, v) => {
                scalars.insert(k, v);
            }
        }
    }
    let strategy = scalars
        .get("strategy")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| config.strategy.describe());
    let metrics = BacktestMetrics::from_map(scalars);
    let art = run_dir.join("artifacts");
    let (svg, png) = (art.join("equity_chart.svg"), art.join("equity_chart.png"));
    let shown = |p: &Path| p.is_file().then(|| p.display().to_string());
    BacktestOutput {
        status: "ok".into(),
        summary: Some(summary_line(
            &config.codes,
            &strategy,
            &metrics,
            assumptions.as_ref().map(|a| a.benchmark.as_str()),
        )),
        metrics: Some(metrics),
        warnings: Some(warnings),
        validation,
        artifacts: Some(artifact_paths(result, &art, config.codes.len())),
        chart: Some(ChartFiles {
            svg: shown(&svg),
            png: shown(&png),
        }),
        missing_artifacts: (!result.missing_required.is_empty())
            .then(|| result.missing_required.clone()),
        assumptions,
        warmup,
        ..base
    }
}

/// Artifact name → path: what the runner collected, and the optional files.
fn artifact_paths(result: &RunResult, art: &Path, codes: usize) -> Map<String, Value> {
    let mut artifacts: Map<String, Value> = result
        .artifacts
        .iter()
        .map(|(k, p)| (k.clone(), json!(p.display().to_string())))
        .collect();
    for (name, file) in [
        ("fills", "fills.jsonl"),
        ("metrics_json", "metrics.json"),
        ("validation", "validation.json"),
        ("rebalance_notes", "rebalance_notes.json"),
        ("risk_xray", "risk_xray.json"),
    ] {
        let p = art.join(file);
        if p.is_file() {
            artifacts.insert(name.into(), json!(p.display().to_string()));
        }
    }
    artifacts.insert(
        "ohlcv".into(),
        json!(format!(
            "{}/ohlcv_<code>.csv ({codes} files)",
            art.display()
        )),
    );
    artifacts
}

/// `run_dir` argument → a path inside the run dir or the workspace
/// (relative paths resolve in the run dir).
pub fn resolve_run_dir(ctx: &ToolContext, raw: Option<&str>) -> Result<PathBuf, ToolError> {
    let raw = raw.map(str::trim).filter(|s| !s.is_empty());
    let joined = match raw {
        None => ctx.run_dir.clone(),
        Some(r) if Path::new(r).is_absolute() => PathBuf::from(r),
        Some(r) => ctx.run_dir.join(r),
    };
    let shown = raw.unwrap_or(".");
    let outside = || {
        ToolError::failed(
            "run_dir_outside",
            format!(
                "run_dir '{shown}' is outside the current run directory ({}) and the workspace ({}); use a relative path or omit run_dir",
                ctx.run_dir.display(),
                ctx.workspace.display()
            ),
        )
    };
    match confine(&joined, &[&ctx.run_dir, &ctx.workspace]) {
        Ok(real) => Ok(real),
        Err(ConfineError::Outside) => Err(outside()),
        Err(ConfineError::Io(e)) => Err(ToolError::io("resolve", shown, e)),
    }
}

pub struct Backtest {
    config: Arc<BacktestToolConfig>,
}

impl Backtest {
    pub fn new(config: BacktestToolConfig) -> Self {
        Backtest {
            config: Arc::new(config),
        }
    }
}

impl TypedTool for Backtest {
    type Args = BacktestArgs;
    type Output = BacktestOutput;

    const NAME: &'static str = names::BACKTEST;
    // Its outputs are the run's artifacts (§6.3): a text-form call may run it.
    const CAPS: Caps = Caps::WRITES
        .run_dir_only()
        .served_as(names::BACKTEST)
        .planner();

    fn description(&self) -> &str {
        "Trading strategies only, not a stock's own return (get_market_data's summary gives that): backtest one on daily bars in a sandbox. Give strategy, params, symbols, start and end. Returns total and annual return, Sharpe, max drawdown, win rate, trade count, the benchmark's return and the artifacts' paths; signals execute at the next bar's open. Also takes a whole `config`, or runs code/signal_engine.py from the run dir when no strategy is given (see the backtest-design skill)."
    }

    fn lean_properties(&self) -> Option<&[&str]> {
        Some(&[
            "strategy",
            "params",
            "symbols",
            "start",
            "end",
            "commission_rate",
            "slippage",
        ])
    }

    /// The summary, the headline metrics and what went wrong or was put
    /// right; no artifact paths, engine logs or secondary metrics.
    fn lean_result(&self, output: &Value) -> Option<Value> {
        const KEEP: [&str; 9] = [
            "status",
            "summary",
            "metrics",
            "error_code",
            "error",
            "issues",
            "warnings",
            "validation",
            "argument_warnings",
        ];
        const METRICS: [&str; 8] = [
            "total_return",
            "annual_return",
            "sharpe",
            "max_drawdown",
            "win_rate",
            "trade_count",
            "benchmark_return",
            "excess_return",
        ];
        let mut o = output.as_object()?.clone();
        o.retain(|k, v| KEEP.contains(&k.as_str()) && !v.is_null());
        if let Some(Value::Object(m)) = o.get_mut("metrics") {
            m.retain(|k, v| METRICS.contains(&k.as_str()) && !v.is_null());
            // Four decimals (a hundredth of a percent): fifteen digits cost
            // a small model tokens and tempt it to copy them all.
            for v in m.values_mut() {
                if let Some(x) = v.as_f64().filter(|x| x.fract() != 0.0) {
                    *v = json!((x * 1e4).round() / 1e4);
                }
            }
        }
        if o.get("warnings")
            .is_some_and(|w| w.as_array().is_some_and(Vec::is_empty))
        {
            o.remove("warnings");
        }
        Some(Value::Object(o))
    }

    fn repeatable(&self) -> bool {
        true
    }

    /// Only a warning for write tools; the runner enforces the deadline.
    fn timeout(&self) -> Option<Duration> {
        Some(self.config.timeout + self.config.runner.drain_timeout * 2 + Duration::from_secs(30))
    }

    async fn run(
        &self,
        args: BacktestArgs,
        ctx: &ToolContext,
    ) -> Result<BacktestOutput, ToolError> {
        let run_dir = resolve_run_dir(ctx, args.run_dir.as_deref())?;
        let (config, argument_warnings) = config_of(&args);
        let with_warnings = |mut out: BacktestOutput| {
            out.argument_warnings = argument_warnings.clone();
            out
        };
        match config {
            None => {
                if !run_dir.is_dir() {
                    return Ok(error_output(
                        "run_dir_missing",
                        format!(
                            "{} does not exist; give `config` to create it with a config.json, or name an existing run directory",
                            run_dir.display()
                        ),
                        &run_dir,
                    ));
                }
            }
            Some(cfg) => {
                if let Some(refused) = write_config(&run_dir, Value::Object(cfg)).await? {
                    return Ok(with_warnings(refused));
                }
            }
        }
        let local = vec![ctx.workspace.join("data"), ctx.workspace.clone()];
        let out = backtest_output(&self.config, &run_dir, &local, &ctx.cancel).await;
        Ok(with_warnings(out))
    }
}

/// Validates an inline `config` and writes it to `<run_dir>/config.json`
/// atomically; a refused one comes back as the result to give.
async fn write_config(run_dir: &Path, cfg: Value) -> Result<Option<BacktestOutput>, ToolError> {
    let has_code = run_dir.join(backtest::SIGNAL_ENGINE_FILE).is_file();
    if let Err(e) = backtest::BacktestConfig::from_value(&cfg, has_code) {
        let mut out = config_error_output(&BacktestError::Config(e), run_dir);
        out.config_written = Some(false);
        return Ok(Some(out));
    }
    let text = serde_json::to_string_pretty(&cfg).unwrap_or_default() + "\n";
    let path = run_dir.join(backtest::CONFIG_FILE);
    let dir = run_dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        atomic_write(&path, text.as_bytes()).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| ToolError::failed("internal_error", e.to_string()))?
    .map_err(|e| ToolError::failed("io_error", format!("cannot write config.json: {e}")))?;
    Ok(None)
}

/// Artifact names `read_artifact` knows, with their files.
const NAMED: &[(&str, &str)] = &[
    ("metrics", "artifacts/metrics.json"),
    ("metrics_csv", "artifacts/metrics.csv"),
    ("equity", "artifacts/equity.csv"),
    ("trades", "artifacts/trades.csv"),
    ("positions", "artifacts/positions.csv"),
    ("target_positions", "artifacts/target_positions.csv"),
    ("fills", "artifacts/fills.jsonl"),
    ("validation", "artifacts/validation.json"),
    ("rebalance_notes", "artifacts/rebalance_notes.md"),
    ("risk_xray", "artifacts/risk_xray.md"),
    ("run_card", "run_card.md"),
    ("run_card_json", "run_card.json"),
    ("config", "config.json"),
    ("chart_svg", "artifacts/equity_chart.svg"),
    ("engine_stdout", "logs/backtest_stdout.txt"),
    ("engine_stderr", "logs/backtest_stderr.txt"),
];

/// A run card that cannot be summarised.
#[derive(Debug, thiserror::Error)]
pub enum RunCardError {
    #[error("cannot read {}: {source}; run the backtest first", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} does not parse: {source}", path.display())]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// The run card's headline: what ran, the key metrics, the files.
pub fn run_card_summary(run_dir: &Path) -> Result<Value, RunCardError> {
    let path = run_dir.join("run_card.json");
    let text = std::fs::read_to_string(&path).map_err(|source| RunCardError::Read {
        path: path.clone(),
        source,
    })?;
    let card: Value =
        serde_json::from_str(&text).map_err(|source| RunCardError::Parse { path, source })?;
    let m = &card["metrics"];
    let keys = [
        "final_value",
        "total_return",
        "annual_return",
        "sharpe",
        "sortino",
        "calmar",
        "max_drawdown",
        "win_rate",
        "profit_factor",
        "trade_count",
        "avg_holding_bars",
        "avg_holding_days",
        "benchmark_return",
        "excess_return",
        "information_ratio",
    ];
    let metrics: Map<String, Value> = keys
        .iter()
        .filter_map(|k| m.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    let typed = BacktestMetrics::from_map(metrics.clone());
    let codes: Vec<String> = card["backtest"]["codes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let strategy = card["backtest"]["strategy"]
        .as_str()
        .unwrap_or("")
        .to_string();
    Ok(json!({
        "status": "ok",
        "summary": summary_line(&codes, &strategy, &typed, card["backtest"]["benchmark"].as_str()),
        "backtest": card["backtest"].as_object().map(|b| b.iter().filter(|(k, _)| *k != "symbol_rules").map(|(k, v)| (k.clone(), v.clone())).collect::<Map<String, Value>>()),
        "metrics": metrics,
        "assumptions": card["assumptions"],
        "reproducibility": card["reproducibility"],
        "warnings": card["warnings"],
        "artifacts": card["artifacts"],
    }))
}

/// `read_artifact`'s answer: a page of lines, or the run card's summary.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ArtifactOutput {
    Page(ArtifactPage),
    Summary(Value),
}

/// A page of an artifact's lines.
#[derive(Serialize, JsonSchema)]
pub struct ArtifactPage {
    status: &'static str,
    name: String,
    path: String,
    total_lines: usize,
    offset: usize,
    returned: usize,
    /// Null on the last page.
    next_offset: Option<usize>,
    content: String,
}

/// Reads a backtest artifact by name (or relative path), paged by lines.
pub struct ReadArtifact;

impl TypedTool for ReadArtifact {
    type Args = ReadArtifactArgs;
    type Output = ArtifactOutput;

    const NAME: &'static str = names::READ_ARTIFACT;

    fn description(&self) -> &str {
        "Read a backtest artifact of a run directory, paged by lines. name: summary (the run card: what ran, key metrics, files), metrics, equity, trades, positions, target_positions, fills, validation, rebalance_notes, risk_xray, run_card, run_card_json, config, engine_stdout, engine_stderr, ohlcv_<CODE>, or a relative path inside the run directory."
    }

    /// Artifacts change when a backtest reruns: never answer from an
    /// earlier call.
    fn repeatable(&self) -> bool {
        true
    }

    async fn run(
        &self,
        args: ReadArtifactArgs,
        ctx: &ToolContext,
    ) -> Result<ArtifactOutput, ToolError> {
        let name = args::nonempty(&args.name, "name")?;
        let run_dir = resolve_run_dir(ctx, args.run_dir.as_deref())?;
        let offset = args::opt_usize(args.offset, "offset")?.unwrap_or(0);
        let limit = args::opt_usize(args.limit, "limit")?
            .unwrap_or(usize::MAX)
            .max(1);
        if name == "summary" {
            let dir = run_dir.clone();
            return match tokio::task::spawn_blocking(move || run_card_summary(&dir)).await {
                Ok(Ok(v)) => Ok(ArtifactOutput::Summary(v)),
                Ok(Err(e)) => Err(ToolError::failed("artifact_missing", e.to_string())),
                Err(e) => Err(ToolError::failed("internal_error", e.to_string())),
            };
        }
        let rel = if let Some((_, f)) = NAMED.iter().find(|(n, _)| *n == name) {
            f.to_string()
        } else if let Some(code) = name.strip_prefix("ohlcv_") {
            format!(
                "artifacts/ohlcv_{}.csv",
                backtest::artifacts::file_safe(code)
            )
        } else {
            name.to_string()
        };
        if rel.ends_with(".png") {
            return Err(ToolError::failed(
                "binary_artifact",
                format!(
                    "{rel} is a PNG image; give its path ({}) to the user instead of reading it",
                    run_dir.join(&rel).display()
                ),
            ));
        }
        let path = run_dir.join(&rel);
        let real = match confine(&path, &[&run_dir]) {
            Ok(real) => real,
            Err(ConfineError::Outside) => {
                return Err(ToolError::failed(
                    "run_dir_outside",
                    format!(
                        "'{name}' leads outside the run directory {}",
                        run_dir.display()
                    ),
                ));
            }
            Err(ConfineError::Io(e)) => return Err(ToolError::io("resolve", &rel, e)),
        };
        let text = match tokio::fs::read(&real).await {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let known: Vec<&str> = NAMED.iter().map(|(n, _)| *n).collect();
                return Err(ToolError::failed(
                    "artifact_missing",
                    format!(
                        "{} does not exist (run the backtest first?); names: summary, {}, ohlcv_<CODE>",
                        real.display(),
                        known.join(", ")
                    ),
                ));
            }
            Err(e) => {
                return Err(ToolError::io("read", &real, e));
            }
        };
        let lines: Vec<&str> = text.lines().collect();
        let total = lines.len();
        if offset > total {
            return Err(ToolError::InvalidArguments(format!(
                "offset {offset} is past the end ({total} lines)"
            )));
        }
        let mut out = String::new();
        let mut returned = 0;
        for l in lines.iter().skip(offset) {
            if returned >= limit || (returned > 0 && out.len() + l.len() + 1 > PAGE_CHARS) {
                break;
            }
            out.push_str(l);
            out.push('\n');
            returned += 1;
        }
        let next = offset + returned;
        Ok(ArtifactOutput::Page(ArtifactPage {
            status: "ok",
            name: name.to_string(),
            path: real.display().to_string(),
            total_lines: total,
            offset,
            returned,
            next_offset: (next < total).then_some(next),
            content: out,
        }))
    }
}

impl Builtin for Backtest {
    fn build(env: &ToolEnv) -> Option<Self> {
        Some(Backtest {
            config: env.backtest.clone(),
        })
    }
}

impl Builtin for ReadArtifact {
    fn build(_: &ToolEnv) -> Option<Self> {
        Some(ReadArtifact)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(root: &Path) -> ToolContext {
        crate::tools::test_context(root.join("run"), root.join("ws"))
    }

    #[test]
    fn run_dirs_stay_inside_the_roots() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let run = c.run_dir.canonicalize().unwrap();
        assert_eq!(resolve_run_dir(&c, None).unwrap(), run);
        assert_eq!(resolve_run_dir(&c, Some("bt1")).unwrap(), run.join("bt1"));
        assert!(resolve_run_dir(&c, Some(c.workspace.join("x").to_str().unwrap())).is_ok());
        let e = resolve_run_dir(&c, Some("../../etc")).unwrap_err();
        assert_eq!(e.code(), "run_dir_outside");
        std::os::unix::fs::symlink("/tmp", c.run_dir.join("link")).unwrap();
        assert_eq!(
            resolve_run_dir(&c, Some("link/x")).unwrap_err().code(),
            "run_dir_outside"
        );
    }

    #[test]
    fn metrics_csv_cells_keep_their_types() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("artifacts")).unwrap();
        std::fs::write(
            dir.path().join("artifacts/metrics.csv"),
            "sharpe,position_adjustment,trade_count\n0.5,hold,3\n",
        )
        .unwrap();
        let m = read_metrics(dir.path()).unwrap();
        assert_eq!(m["sharpe"], json!(0.5));
        assert_eq!(m["position_adjustment"], json!("hold"));
        assert_eq!(m["trade_count"], json!(3.0));
    }
}
