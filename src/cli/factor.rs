//! `vibedesk factor screen FILE | --library alpha101` (docs §17.11): the
//! `factor_screen` tool from the command line. Progress goes to stderr,
//! the ranked table (or the tool's JSON with `--json`) to stdout, then the
//! path of the screen record it wrote under `<data>/factor/`. Exit codes:
//! 0 done, 1 failed, 2 a bad file, flag or argument, 130 stopped by Ctrl-C.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{CliError, exit};
use crate::model::factor::{FactorScreenArgs, FactorScreenOutput, NamedExpr};
use crate::research::data::{DataConfig, MarketData};
use crate::research::factor::expr;
use crate::store::Paths;
use crate::tools::ToolError;
use crate::tools::builtin::factor_screen::{FactorScreen, LIBRARY};

#[derive(clap::Args, Debug)]
pub struct FactorArgs {
    #[command(subcommand)]
    pub command: FactorCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum FactorCommand {
    /// Screen factor expressions over a universe: IC, rank IC, decay, quantile spreads, turnover, adjusted p-values; writes a screen record.
    ///
    /// FILE holds one expression a line, either `#NNN expression` (the
    /// bundled alpha101.txt's format: NNN the paper's number, named
    /// alphaNNN) or `name: expression`; `#` followed by a non-digit starts
    /// a comment line, blank lines are skipped.
    Screen {
        /// The expressions file (or give --library).
        #[arg(required_unless_present = "library", conflicts_with = "library")]
        file: Option<PathBuf>,
        /// The bundled library: alpha101 (the 82 alphas daily OHLCV supports).
        #[arg(long)]
        library: Option<String>,
        /// Tickers, comma-separated (default: the offline market's stocks).
        #[arg(long, value_delimiter = ',')]
        symbols: Option<Vec<String>>,
        /// First date screened, YYYY-MM-DD (the factors are warm from before it).
        #[arg(long)]
        start: Option<String>,
        /// Last date screened, YYYY-MM-DD.
        #[arg(long)]
        end: Option<String>,
        /// Forward horizons in trading days, comma-separated (default 1,5,10,21).
        #[arg(long, value_delimiter = ',')]
        horizons: Option<Vec<i64>>,
        /// Buckets per date (default 5).
        #[arg(long)]
        quantiles: Option<i64>,
        /// The horizon the ranking and p-values read (default 1).
        #[arg(long)]
        rank_horizon: Option<i64>,
        /// Rows in the table (default 10; the record holds every factor).
        #[arg(long)]
        top: Option<i64>,
        /// A `symbol,group` file for indneutralize.
        #[arg(long)]
        groups: Option<String>,
        /// Purged validation, JSON: {"purged_kfold": {"folds": 5, "embargo_days": 5}} or {"cpcv": {"groups": 6, "test_groups": 2, "embargo_days": 5}}.
        #[arg(long)]
        split: Option<String>,
        /// Print the tool's JSON answer instead of the table.
        #[arg(long)]
        json: bool,
        /// Never use the online data sources.
        #[arg(long)]
        offline: bool,
    },
}

pub async fn factor(args: FactorArgs) -> Result<(), CliError> {
    match args.command {
        FactorCommand::Screen {
            file,
            library,
            symbols,
            start,
            end,
            horizons,
            quantiles,
            rank_horizon,
            top,
            groups,
            split,
            json,
            offline,
        } => {
            let split = match split.as_deref() {
                None => None,
                Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
                    Ok(serde_json::Value::Object(m)) => Some(m),
                    _ => {
                        return Err(usage(format!(
                            "--split must be a JSON object such as {{\"purged_kfold\": {{\"folds\": 5}}}}, got {text}"
                        )));
                    }
                },
            };
            let expressions = match &file {
                Some(f) => Some(read_file(f)?),
                None => None,
            };
            let call = FactorScreenArgs {
                library: if expressions.is_some() {
                    None
                } else {
                    library.or_else(|| Some(LIBRARY.to_string()))
                },
                expressions,
                symbols,
                start,
                end,
                horizons,
                quantiles,
                rank_horizon,
                top,
                groups,
                split,
            };
            let out = run(call, offline).await?;
            print(&out, json)
        }
    }
}

fn usage(m: impl std::fmt::Display) -> CliError {
    CliError::usage(m).of("factor screen")
}

/// The expressions of a file, each parsed here so an error names its line.
fn read_file(path: &Path) -> Result<Vec<NamedExpr>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
    let shown = path.display();
    let mut out: Vec<NamedExpr> = Vec::new();
    for (k, raw) in text.lines().enumerate() {
        let line = k + 1;
        let t = raw.trim();
        let (name, body) = if let Some(rest) = t.strip_prefix('#') {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            if digits == 0 {
                continue;
            }
            let (num, body) = rest.split_at_checked(digits).unwrap_or((rest, ""));
            let n: u16 = num
                .parse()
                .map_err(|_| usage(format!("{shown}:{line}: `#{num}` is not an alpha number")))?;
            (format!("alpha{n:03}"), body.trim())
        } else if t.is_empty() {
            continue;
        } else if let Some((name, body)) = t.split_once(':') {
            (name.trim().to_string(), body.trim())
        } else {
            return Err(usage(format!(
                "{shown}:{line}: write `name: expression` or `#NNN expression`, got `{t}`"
            )));
        };
        if name.is_empty() || body.is_empty() {
            return Err(usage(format!(
                "{shown}:{line}: a name and an expression are both needed"
            )));
        }
        if out.iter().any(|e| e.name == name) {
            return Err(usage(format!("{shown}:{line}: {name} is listed twice")));
        }
        if let Err(e) = expr::parse(body) {
            let pad: String = e
                .source_line
                .chars()
                .take(e.column.saturating_sub(1))
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            return Err(usage(format!(
                "{shown}:{line}: {name}: column {}: {}\n  {}\n  {pad}^",
                e.column, e.kind, e.source_line
            )));
        }
        out.push(NamedExpr {
            name,
            expr: body.to_string(),
        });
    }
    if out.is_empty() {
        return Err(usage(format!("{shown} holds no expressions")));
    }
    Ok(out)
}

async fn run(call: FactorScreenArgs, offline: bool) -> Result<FactorScreenOutput, CliError> {
    let paths = Paths::from_env()
        .ok_or_else(|| CliError::failed("no home directory to keep the screen record in"))?;
    let data = Arc::new(MarketData::new(DataConfig {
        cache_dir: Some(paths.cache_dir.clone()),
        online: !offline,
        ..DataConfig::default()
    }));
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let watcher = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            stop.cancel();
        }
    });
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let ctx = crate::tools::ToolContext {
        call_id: "cli".into(),
        session_id: "cli".into(),
        run_dir: paths.data_dir.clone(),
        workspace: here,
        cancel: cancel.clone(),
        background: crate::tools::BackgroundQueue::default(),
    };
    let tool = FactorScreen::new(data, Some(paths.data_dir.clone()));
    let report = |stage: &str, done: usize, total: usize, m: &str| {
        // One line a stage step; the symbols load quietly but the first.
        if stage != "loading" || done == 0 {
            eprintln!("{stage} {done}/{total} {m}");
        }
    };
    let r = tool.execute(call, &ctx, &report).await;
    watcher.abort();
    r.map_err(|e| {
        if cancel.is_cancelled() {
            return CliError::new(exit::CANCELLED, "stopped by Ctrl-C").of("factor screen");
        }
        match e {
            ToolError::InvalidArguments(m) => usage(m),
            e => CliError::failed(e).of("factor screen"),
        }
    })
}

fn cell(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

fn print(o: &FactorScreenOutput, json: bool) -> Result<(), CliError> {
    if json {
        let s = serde_json::to_string_pretty(o).map_err(CliError::failed)?;
        println!("{s}");
        return Ok(());
    }
    println!(
        "{} on {} symbols, {} to {} ({} dates); ranked by |rank ICIR| at {} day(s)",
        o.library,
        o.symbols,
        o.data.start.as_deref().unwrap_or("-"),
        o.data.end.as_deref().unwrap_or("-"),
        o.dates,
        o.rank_horizon
    );
    println!(
        "{:>3}  {:<12} {:>9} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "#",
        "factor",
        "rankIC",
        "ICIR",
        "t_NW",
        "p",
        "p_holm",
        "p_bh",
        "spread",
        "turnover",
        "coverage"
    );
    for r in &o.top {
        println!(
            "{:>3}  {:<12} {:>9} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
            r.rank,
            r.name,
            cell(r.rank_ic_mean, 4),
            cell(r.rank_icir, 3),
            cell(r.t_nw, 2),
            cell(r.p_value, 4),
            cell(r.p_holm, 4),
            cell(r.p_bh, 4),
            cell(r.spread, 5),
            cell(r.turnover, 3),
            cell(r.coverage, 3),
        );
    }
    println!(
        "{} tried, {} scored, {} failed",
        o.tried, o.scored, o.failed
    );
    for f in &o.failures {
        println!("  {} failed: {}", f.name, f.error);
    }
    if let Some(d) = &o.deflated {
        println!(
            "best long-short {}: Sharpe {} a year over {} dates, deflated Sharpe {} for {} tried",
            d.best,
            cell(d.sharpe_annualized, 2),
            d.observations,
            cell(d.dsr, 3),
            d.trials
        );
    }
    if let Some(v) = &o.validation {
        println!(
            "{}: {} splits, {} paths over {} dates (embargo {} days): PBO {}",
            v.kind,
            v.splits,
            v.paths,
            v.observations,
            v.embargo_days,
            cell(v.pbo, 3)
        );
    }
    println!("{}", o.warmup);
    println!("screen file: {}", o.screen_file);
    Ok(())
}
