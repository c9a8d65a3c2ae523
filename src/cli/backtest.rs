//! `vibedesk backtest RUN_DIR [--config FILE]`: runs `<run_dir>/config.json`
//! through the sandbox exactly as the `backtest` tool does (the engine is
//! this executable's `engine` subcommand) and prints the metrics JSON on
//! stdout; the one-line summary and the chart's path go to stderr.
//!
//! Exit codes: 0 success, 1 the engine failed, 2 the config is invalid,
//! 130 cancelled (Ctrl-C kills the engine's process group).

use std::fmt::Display;
use std::path::PathBuf;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{CliError, exit};
use crate::research::backtest::{BacktestConfig, CONFIG_FILE, SIGNAL_ENGINE_FILE};
use crate::store::{Paths, atomic_write};
use crate::tools::builtin::backtest::{BacktestToolConfig, run_backtest};

#[derive(clap::Args, Debug)]
pub struct BacktestArgs {
    /// The run directory (created when --config is given).
    pub run_dir: PathBuf,
    /// A config file to validate and copy to <run_dir>/config.json first.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// More folders for the `local` source (repeatable).
    #[arg(long = "data-dir")]
    pub data_dirs: Vec<PathBuf>,
    /// Python interpreter (with pandas) for code/signal_engine.py.
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Never use the online data sources.
    #[arg(long)]
    pub offline: bool,
    /// Print the whole result (artifacts, tails, validation), not just the metrics.
    #[arg(long)]
    pub full: bool,
}

pub async fn backtest(args: BacktestArgs) -> Result<(), CliError> {
    let fail = |code: u8, message: String| CliError::new(code, message).of("backtest");
    if let Some(src) = &args.config {
        let text = std::fs::read_to_string(src)
            .map_err(|e| fail(exit::USAGE, format!("cannot read {}: {e}", src.display())))?;
        let has_code = args.run_dir.join(SIGNAL_ENGINE_FILE).is_file();
        BacktestConfig::from_json_text(&text, has_code)
            .map_err(|e| fail(exit::USAGE, e.to_string()))?;
        let dest = args.run_dir.join(CONFIG_FILE);
        let unwritten = |e: &dyn Display| {
            fail(
                exit::FAILED,
                format!("cannot write {}: {e}", dest.display()),
            )
        };
        std::fs::create_dir_all(&args.run_dir).map_err(|e| unwritten(&e))?;
        atomic_write(&dest, text.as_bytes()).map_err(|e| unwritten(&e))?;
    }
    let run_dir = args.run_dir.canonicalize().map_err(|e| {
        fail(
            exit::USAGE,
            format!("run directory {}: {e}", args.run_dir.display()),
        )
    })?;
    let paths = Paths::from_env();
    let mut cfg = BacktestToolConfig::new(paths.as_ref().map(|p| p.cache_dir.clone()));
    if paths.is_some() {
        // `[backtest]` of config.toml fills what config.json leaves out (docs §7.4).
        cfg.defaults = super::load_config(&crate::config::Overrides::default())
            .map_err(|e| e.of("backtest"))?
            .backtest
            .config_keys();
    }
    cfg.runner.jobs_dir = paths.map(|p| p.jobs_dir());
    cfg.offline = args.offline;
    cfg.python = args.python.clone();
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            c.cancel();
        }
    });
    let result = run_backtest(&cfg, &run_dir, &args.data_dirs, &cancel).await;
    let ok = result["status"] == "ok";
    let out = if args.full || !ok {
        result.clone()
    } else {
        result["metrics"].clone()
    };
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    if ok {
        if let Some(s) = result["summary"].as_str() {
            eprintln!("{s}");
        }
        if let Some(p) = result["chart"]["svg"].as_str() {
            eprintln!("chart: {p}");
        }
        return Ok(());
    }
    let code = match result["error_code"].as_str().unwrap_or("") {
        "cancelled" => exit::CANCELLED,
        _ if result.get("issues").is_some_and(Value::is_array) => exit::USAGE,
        _ => exit::FAILED,
    };
    Err(fail(
        code,
        result["error"].as_str().unwrap_or("failed").to_string(),
    ))
}
