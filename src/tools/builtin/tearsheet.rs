//! `tearsheet` (docs §20.1): the tear sheet of a backtest run (its id, its
//! directory or the last one) or of a buy-and-hold book on the market
//! data, written whole to `tearsheet.json` in the current run's
//! `artifacts/`, answered with its key rows.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::NaiveDate;

use super::args::nonempty;
use super::quant::{returns_from, weights_for};
use crate::fsio::{Durability, write_atomic};
use crate::model::names;
use crate::model::tearsheet::{
    TearsheetArgs, TearsheetDrawdown, TearsheetMetric, TearsheetMonth, TearsheetOutput,
    TearsheetYear,
};
use crate::research::data::MarketData;
use crate::research::data::rates;
use crate::research::tearsheet::{
    self as ts, Benchmark, PositionsInput, RiskFreeInput, TearSheet, TearSheetInput, Unit,
};
use crate::tools::{Caps, ToolContext, ToolError, TypedTool};

/// The metrics the answer carries; the JSON file has all of them.
const KEY_METRICS: [&str; 16] = [
    "cumulative_return",
    "cagr",
    "sharpe",
    "sortino",
    "volatility",
    "max_drawdown",
    "longest_dd_days",
    "calmar",
    "win_days",
    "win_month",
    "daily_var",
    "beta",
    "alpha",
    "correlation",
    "information_ratio",
    "time_in_market",
];

pub struct Tearsheet {
    data: Arc<MarketData>,
}

built_from_data!(Tearsheet);

impl TypedTool for Tearsheet {
    type Args = TearsheetArgs;
    type Output = TearsheetOutput;

    const NAME: &'static str = names::TEARSHEET;
    // It writes only `tearsheet.json` in the run's own artifacts.
    const CAPS: Caps = Caps::WRITES
        .run_dir_only()
        .served_as(names::TEARSHEET)
        .planner();

    fn description(&self) -> &str {
        "The tear sheet of a backtest run (run: its id, directory or \"last\") or of a buy-and-hold book (symbols, optional weights, start, end, benchmark; default SPY): quantstats' full metric set (CAGR, Sharpe, probabilistic and smart Sharpe, Sortino, Calmar, Omega, VaR/CVaR, Kelly, tail ratio, win rates, best/worst periods, drawdown statistics, beta, alpha, information ratio, trailing returns), the monthly and annual tables, the worst drawdown periods, rolling 6/12-month Sharpe, Sortino, volatility and beta, return distributions, exposure and turnover. Sharpe and Sortino are in excess of the 3-month T-bill. Writes the whole sheet to tearsheet.json and returns its key rows and path."
    }

    /// A run's artifacts change when it reruns: never answer from an
    /// earlier call.
    fn repeatable(&self) -> bool {
        true
    }

    async fn run(
        &self,
        args: TearsheetArgs,
        ctx: &ToolContext,
    ) -> Result<TearsheetOutput, ToolError> {
        let (input, run_dir, notes, stem) = match (&args.run, &args.symbols) {
            (Some(_), Some(_)) => {
                return Err(ToolError::InvalidArguments(
                    "give either 'run' or 'symbols', not both".into(),
                ));
            }
            (Some(run), None) => {
                let dir = find_run(ctx, run)?;
                let d = dir.clone();
                let input = tokio::task::spawn_blocking(move || ts::from_run_dir(&d))
                    .await
                    .map_err(|e| ToolError::failed("internal_error", e.to_string()))?
                    .map_err(|e| ToolError::failed("no_data", e.to_string()))?;
                let stem = if dir == ctx.run_dir {
                    "tearsheet".to_string()
                } else {
                    format!("tearsheet_{}", file_stem(&dir))
                };
                (input, Some(dir), Vec::new(), stem)
            }
            (None, Some(symbols)) => {
                let (input, notes) = book(&self.data, ctx, symbols, &args).await?;
                let stem = format!("tearsheet_{}", symbols.join("_").to_ascii_uppercase());
                (input, None, notes, stem)
            }
            (None, None) => {
                return Err(ToolError::InvalidArguments(
                    "give 'run' (a backtest's id, directory or \"last\") or 'symbols' (a buy-and-hold book)".into(),
                ));
            }
        };
        let sheet = tokio::task::spawn_blocking(move || ts::compute(&input))
            .await
            .map_err(|e| ToolError::failed("internal_error", e.to_string()))?
            .map_err(|e| ToolError::failed("no_data", e.to_string()))?;
        let path = ctx.run_dir.join("artifacts").join(format!(
            "{}.json",
            crate::research::backtest::artifacts::file_safe(&stem)
        ));
        write_sheet(&path, &sheet)?;
        let report = write_report(&path, &sheet, run_dir.as_deref()).await?;
        let mut out = answer(&sheet, run_dir.as_deref(), &path, notes);
        out.report = Some(report.display().to_string());
        Ok(out)
    }
}

fn file_stem(dir: &Path) -> String {
    dir.file_name()
        .map_or_else(|| "run".into(), |n| n.to_string_lossy().into_owned())
}

/// Whether `dir` holds a backtest's equity curve.
fn has_equity(dir: &Path) -> bool {
    dir.join("artifacts").join("equity.csv").is_file() || dir.join("equity.csv").is_file()
}

/// `run` → the run directory: "last" (the newest run beside the current
/// one with an equity curve, the current one included), a run id beside
/// the current run, or a directory inside the run dir or workspace.
fn find_run(ctx: &ToolContext, run: &str) -> Result<PathBuf, ToolError> {
    let run = nonempty(run, "run")?;
    let runs_root = ctx.run_dir.parent().map(Path::to_path_buf);
    if run.eq_ignore_ascii_case("last") || run.eq_ignore_ascii_case("latest") {
        if has_equity(&ctx.run_dir) {
            return Ok(ctx.run_dir.clone());
        }
        let mut dirs: Vec<PathBuf> = runs_root
            .as_deref()
            .and_then(|r| std::fs::read_dir(r).ok())
            .map(|it| it.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        dirs.retain(|d| has_equity(d));
        // Run ids start with their time, so the largest name is the newest.
        dirs.sort();
        return dirs.pop().ok_or_else(|| {
            ToolError::failed(
                "no_data",
                "no backtest run with an equity curve yet: run a backtest first, or give symbols",
            )
        });
    }
    let plain_id = !run.contains(['/', '\\']) && run != "." && run != "..";
    if let Some(dir) = runs_root.filter(|_| plain_id).map(|r| r.join(run))
        && has_equity(&dir)
    {
        return Ok(dir);
    }
    let dir = super::backtest::resolve_run_dir(ctx, Some(run))?;
    if has_equity(&dir) {
        Ok(dir)
    } else {
        Err(ToolError::failed(
            "no_data",
            format!("{run}: no artifacts/equity.csv there; give a backtest's run id or directory"),
        ))
    }
}

/// A buy-and-hold book: each symbol bought at its weight on the first
/// close and held (the weights drift), against the benchmark, with the
/// T-bill on the same dates.
async fn book(
    data: &MarketData,
    ctx: &ToolContext,
    symbols: &[String],
    args: &TearsheetArgs,
) -> Result<(TearSheetInput, Vec<String>), ToolError> {
    let (start, end) = (args.start.as_deref(), args.end.as_deref());
    let r = returns_from(data, ctx, Some(symbols), None, start, end).await?;
    let weights = weights_for(&r.names, args.weights.as_ref())?;
    let closes = r.dates.clone().unwrap_or_default();
    let dates: Vec<NaiveDate> = closes.iter().skip(1).copied().collect();
    let (returns, held) = hold(&r.columns, &weights, dates.len());
    let mut notes = r.data.notes.clone();
    let bench_name = args.benchmark.clone().unwrap_or_else(|| "SPY".into());
    let benchmark = if bench_name.eq_ignore_ascii_case("none") {
        None
    } else {
        match returns_from(
            data,
            ctx,
            Some(std::slice::from_ref(&bench_name)),
            None,
            start,
            end,
        )
        .await
        {
            Ok(b) => Some(Benchmark {
                returns: on_dates(&dates, b.dates.as_deref().unwrap_or(&[]), b.columns.first()),
                name: bench_name,
            }),
            Err(e) => {
                notes.push(format!(
                    "no benchmark: {bench_name} could not be loaded ({e})"
                ));
                None
            }
        }
    };
    let rf = rates::per_bar(&closes, 252.0);
    if let Some(n) = &rf.note {
        notes.push(n.clone());
    }
    let risk_free = (rf.label == "treasury_3m").then(|| RiskFreeInput {
        source: format!("3-month T-bill ({})", rates::ATTRIBUTION),
        daily: rf.per_bar.iter().skip(1).copied().collect(),
    });
    notes.push(
        "a buy-and-hold book: bought at the weights on the first close, never rebalanced".into(),
    );
    Ok((
        TearSheetInput {
            title: format!("buy and hold {}", r.names.join(", ")),
            dates,
            returns,
            benchmark,
            risk_free,
            positions: Some(PositionsInput {
                codes: r.names.clone(),
                weights: held,
            }),
            ..TearSheetInput::default()
        },
        notes,
    ))
}

/// The held book's daily returns and its drifting weights (after each
/// day's moves).
fn hold(columns: &[Vec<f64>], weights: &[f64], n: usize) -> (Vec<f64>, Vec<Vec<f64>>) {
    let mut value: Vec<f64> = weights.to_vec();
    let mut total: f64 = value.iter().sum();
    let mut returns = Vec::with_capacity(n);
    let mut held = Vec::with_capacity(n);
    for t in 0..n {
        for (v, c) in value.iter_mut().zip(columns) {
            *v *= 1.0 + c.get(t).copied().unwrap_or(0.0);
        }
        let now: f64 = value.iter().sum();
        returns.push(if total != 0.0 { now / total - 1.0 } else { 0.0 });
        total = now;
        held.push(
            value
                .iter()
                .map(|v| if now != 0.0 { v / now } else { 0.0 })
                .collect(),
        );
    }
    (returns, held)
}

/// The benchmark's returns on the book's return dates (NaN where it has
/// none, which the tear sheet counts as 0).
fn on_dates(dates: &[NaiveDate], closes: &[NaiveDate], col: Option<&Vec<f64>>) -> Vec<f64> {
    let by_date: std::collections::HashMap<NaiveDate, f64> = closes
        .iter()
        .skip(1)
        .zip(col.map_or(&[][..], Vec::as_slice))
        .map(|(d, r)| (*d, *r))
        .collect();
    dates
        .iter()
        .map(|d| by_date.get(d).copied().unwrap_or(f64::NAN))
        .collect()
}

fn write_sheet(path: &Path, sheet: &TearSheet) -> Result<(), ToolError> {
    let bytes = serde_json::to_vec(sheet)
        .map_err(|e| ToolError::failed("internal_error", e.to_string()))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| ToolError::io("create", dir, e))?;
    }
    write_atomic(path, &bytes, Durability::Synced).map_err(ToolError::Io)
}

/// The self-contained HTML report beside the JSON (docs §20.3), with the
/// run card's assumptions and provenance when the sheet is a run's.
async fn write_report(
    json: &Path,
    sheet: &TearSheet,
    run_dir: Option<&Path>,
) -> Result<PathBuf, ToolError> {
    let html = json.with_extension("html");
    let (target, sheet, run_dir) = (html.clone(), sheet.clone(), run_dir.map(Path::to_path_buf));
    tokio::task::spawn_blocking(move || {
        let facts = match &run_dir {
            Some(dir) => crate::report::RunFacts::read(dir)?,
            None => crate::report::RunFacts::default(),
        };
        crate::report::html::write(&target, &sheet, &facts)
    })
    .await
    .map_err(|e| ToolError::failed("internal_error", e.to_string()))?
    .map_err(|e| ToolError::failed("report_failed", e.to_string()))?;
    Ok(html)
}

fn unit(u: Unit) -> &'static str {
    match u {
        Unit::Percent => "percent",
        Unit::Ratio => "ratio",
        Unit::Count => "count",
    }
}

fn answer(
    sheet: &TearSheet,
    run_dir: Option<&Path>,
    path: &Path,
    notes: Vec<String>,
) -> TearsheetOutput {
    let metrics = KEY_METRICS
        .iter()
        .filter_map(|k| sheet.metrics.iter().find(|m| m.key == *k))
        .map(|m| TearsheetMetric {
            key: m.key.clone(),
            name: m.name.clone(),
            unit: unit(m.unit).into(),
            value: m.value,
            benchmark: m.benchmark,
        })
        .collect();
    let mut months: Vec<(String, f64)> = Vec::new();
    for (y, row) in sheet.monthly.years.iter().zip(&sheet.monthly.cells) {
        for (m, v) in row.iter().enumerate() {
            if let Some(v) = v {
                months.push((format!("{y}-{:02}", m + 1), *v));
            }
        }
    }
    let month = |m: &(String, f64)| TearsheetMonth {
        month: m.0.clone(),
        value: m.1,
    };
    let best = months.iter().max_by(|a, b| a.1.total_cmp(&b.1)).map(month);
    let worst = months.iter().min_by(|a, b| a.1.total_cmp(&b.1)).map(month);
    let up = months.iter().filter(|m| m.1 > 0.0).count();
    let pos = sheet.positions.as_ref();
    TearsheetOutput {
        status: "ok".into(),
        title: sheet.title.clone(),
        run_dir: run_dir.map(|d| d.display().to_string()),
        start: sheet.start.to_string(),
        end: sheet.end.to_string(),
        benchmark: sheet
            .assumptions
            .iter()
            .find_map(|a| a.strip_prefix("benchmark: ").map(str::to_string)),
        json_path: path.display().to_string(),
        report: None,
        metrics,
        metric_count: sheet.metrics.len(),
        annual: sheet
            .annual
            .iter()
            .map(|a| TearsheetYear {
                year: a.year,
                strategy: a.strategy,
                benchmark: a.benchmark,
            })
            .collect(),
        drawdowns: sheet
            .drawdowns
            .iter()
            .take(5)
            .map(|d| TearsheetDrawdown {
                start: d.start.to_string(),
                trough: d.trough.to_string(),
                recovery: d.recovery.map(|r| r.to_string()),
                depth: d.depth,
                days: d.days,
            })
            .collect(),
        best_month: best,
        worst_month: worst,
        months: months.len(),
        positive_months: if months.is_empty() {
            0.0
        } else {
            up as f64 / months.len() as f64
        },
        mean_gross_exposure: pos.map(|p| p.gross.iter().sum::<f64>() / p.gross.len().max(1) as f64),
        annual_turnover: pos.map(|p| p.annual_turnover),
        assumptions: sheet.assumptions.clone(),
        notes,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testkit::call_in;
    use crate::model::tearsheet::TearsheetOutput;

    fn out(v: serde_json::Value) -> TearsheetOutput {
        serde_json::from_value(v).unwrap()
    }

    #[tokio::test]
    async fn a_held_book_against_spy_with_the_t_bill() {
        let dir = tempfile::tempdir().unwrap();
        let args = json!({"symbols": ["SPY", "TLT"], "weights": {"SPY": 0.6, "TLT": 0.4},
                          "start": "2008-01-01", "end": "2012-12-31"});
        let o = out(call_in(dir.path(), "tearsheet", args).await.unwrap());
        assert_eq!(o.benchmark.as_deref(), Some("SPY"));
        assert_eq!(o.start.get(..4), Some("2008"));
        assert!(o.metric_count > 70, "{}", o.metric_count);
        let sharpe = o.metrics.iter().find(|m| m.key == "sharpe").unwrap();
        assert!(sharpe.value.is_some() && sharpe.benchmark.is_some());
        assert!(
            o.assumptions.iter().any(|a| a.contains("T-bill")),
            "{:?}",
            o.assumptions
        );
        assert_eq!(o.annual.len(), 5);
        // The HTML report beside the JSON, self-contained, holding the
        // sheet's Sharpe as its metric row.
        let report = o.report.as_deref().unwrap();
        assert!(
            report.ends_with("artifacts/tearsheet_SPY_TLT.html"),
            "{report}"
        );
        let html = std::fs::read_to_string(report).unwrap();
        assert!(html.contains("id=\"metric-sharpe\""));
        assert!(!html.contains("<script"));
        // Held, not rebalanced: the weights drift from 60/40.
        assert!(o.annual_turnover.is_some());
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&o.json_path).unwrap()).unwrap();
        assert_eq!(written["metrics"].as_array().unwrap().len(), o.metric_count);
        assert!(
            o.json_path.ends_with("artifacts/tearsheet_SPY_TLT.json"),
            "{}",
            o.json_path
        );
    }

    #[tokio::test]
    async fn a_run_by_id_and_the_last_run() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("20240102_030405_abcdef");
        std::fs::create_dir_all(run.join("artifacts")).unwrap();
        let mut csv = String::from("timestamp,ret,equity,drawdown,benchmark_equity,active_ret\n");
        let mut eq = 100.0;
        for (i, r) in [0.0, 0.01, -0.02, 0.015, 0.003, -0.001].iter().enumerate() {
            eq *= 1.0 + r;
            csv.push_str(&format!(
                "2024-01-{:02},{r},{eq},0,100,{}\n",
                i + 2,
                r / 2.0
            ));
        }
        std::fs::write(run.join("artifacts/equity.csv"), csv).unwrap();
        let card = json!({"backtest": {"codes": ["X"], "strategy": "sma", "benchmark": "SPY",
                                       "risk_free": "zero", "bars_per_year": 252}});
        std::fs::write(run.join("run_card.json"), card.to_string()).unwrap();
        // The tool's own run dir is `<dir>/run`, beside the backtest's.
        for id in ["20240102_030405_abcdef", "last"] {
            let o = out(call_in(dir.path(), "tearsheet", json!({"run": id}))
                .await
                .unwrap());
            assert_eq!(o.title, "sma on X");
            assert_eq!(o.start, "2024-01-03");
            let total = o
                .metrics
                .iter()
                .find(|m| m.key == "cumulative_return")
                .unwrap();
            let want = 1.01 * 0.98 * 1.015 * 1.003 * 0.999 - 1.0;
            assert!((total.value.unwrap() - want).abs() < 1e-12);
            let bench = (1.005f64 * 0.99 * 1.0075 * 1.0015 * 0.9995) - 1.0;
            assert!((total.benchmark.unwrap() - bench).abs() < 1e-12);
            assert!(
                o.json_path
                    .contains("tearsheet_20240102_030405_abcdef.json")
            );
        }
        let e = call_in(
            dir.path(),
            "tearsheet",
            json!({"run": "last", "symbols": ["SPY"]}),
        )
        .await;
        assert!(e.unwrap_err().contains("not both"));
        let e = call_in(dir.path(), "tearsheet", json!({"run": "nope"})).await;
        assert!(e.is_err());
    }
}
