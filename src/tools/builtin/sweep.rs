//! The `sweep` tool (docs §18): a parameter sweep from the agent, a team or
//! an MCP client, run by the local engine on every core ([`crate::sweep`]).
//!
//! A writing tool: it writes the results file (and its journal, plan and
//! heatmaps beside it in `<out>.sweep/`) under the run directory. It runs
//! alone and the loop does not kill it, so it keeps its own deadline: when
//! the deadline or the run's cancellation fires it stops at the next cell,
//! keeps the finished ones, and says how to resume (call again with the
//! same spec and `out`). Progress goes out as `tool_progress` events.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::fsio::{ConfineError, confine};
use crate::model::names;
use crate::model::sweep::{
    SweepArgs, SweepCvOutput, SweepDeflatedOutput, SweepOutput, SweepRankedOutput,
};
use crate::research::backtest::RunOptions;
use crate::sweep::dispatch::{self, Engine};
use crate::sweep::events::SweepEvent;
use crate::sweep::local::{LocalOptions, default_threads};
use crate::sweep::{Plan, Spec, SweepError, report};
use crate::tools::builtin::{Builtin, ToolEnv};
use crate::tools::{Caps, ToolContext, ToolError, TypedTool, progress};

/// How long one call may run before it stops and keeps what finished.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// The most cells one call plans (the CLI has no limit).
pub const MAX_CELLS: usize = 2_000_000;
/// The results file when the call names none: named by the plan's hash, so
/// the same spec called again resumes its own journal and two specs never
/// share a folder (docs §18.7).
fn default_out(plan: &Plan) -> String {
    format!("sweep/{}.parquet", plan.short_hash())
}

pub struct SweepTool {
    cache_dir: Option<PathBuf>,
    timeout: Duration,
    /// The user's `[backtest]` defaults, filled into a spec's base as the
    /// `backtest` tool fills them into its config.
    defaults: serde_json::Map<String, serde_json::Value>,
}

impl SweepTool {
    pub fn new(cache_dir: Option<PathBuf>, timeout: Duration) -> Self {
        SweepTool {
            cache_dir,
            timeout,
            defaults: serde_json::Map::new(),
        }
    }
}

impl Builtin for SweepTool {
    /// The backtests' data cache, and the scheduler's deadline when the
    /// configuration names one.
    fn build(env: &ToolEnv) -> Option<Self> {
        Some(SweepTool {
            defaults: env.backtest.defaults.clone(),
            ..SweepTool::new(
                env.backtest.cache_dir.clone(),
                env.tool_timeout.unwrap_or(DEFAULT_TIMEOUT),
            )
        })
    }
}

fn invalid(e: SweepError) -> ToolError {
    match e {
        SweepError::Spec(_) | SweepError::Plan(_) | SweepError::Output(_) => {
            ToolError::InvalidArguments(e.to_string())
        }
        other => ToolError::failed(other.code(), other.to_string()),
    }
}

/// A path in the run directory (or the workspace, for a spec file).
fn inside(ctx: &ToolContext, raw: &str, base: &Path) -> Result<PathBuf, ToolError> {
    let joined = if Path::new(raw).is_absolute() {
        PathBuf::from(raw)
    } else {
        base.join(raw)
    };
    match confine(&joined, &[&ctx.run_dir, &ctx.workspace]) {
        Ok(p) => Ok(p),
        Err(ConfineError::Outside) => Err(ToolError::failed(
            "path_outside_run_dir",
            format!(
                "'{raw}' is outside the run directory {}: use a relative path",
                ctx.run_dir.display()
            ),
        )),
        Err(ConfineError::Io(e)) => Err(ToolError::io("resolve", raw, e)),
    }
}

fn spec_of(args: &SweepArgs, ctx: &ToolContext) -> Result<Spec, ToolError> {
    let spec = match (&args.spec, &args.spec_file) {
        (Some(v), None) => Spec::from_value(v.clone()),
        (None, Some(f)) => Spec::load(&inside(ctx, f, &ctx.run_dir)?),
        _ => {
            return Err(ToolError::InvalidArguments(
                "give the sweep as `spec` (an object) or `spec_file` (a path), one of them".into(),
            ));
        }
    };
    spec.map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

fn plan_output(plan: &Plan) -> SweepOutput {
    let secs = plan.estimate_seconds(default_threads());
    SweepOutput {
        status: "ok".into(),
        summary: format!(
            "{} cells ({} parameter sets × {} units), {} windows; estimated {secs:.1} s",
            plan.cell_count(),
            plan.combos.len(),
            plan.units.len(),
            plan.windows.len()
        ),
        cells: plan.cell_count(),
        parameter_sets: plan.combos.len(),
        units: plan.units.len(),
        windows: plan.windows.iter().map(|w| w.name.clone()).collect(),
        estimated_seconds: (secs * 1000.0).round() / 1000.0,
        rank_by: plan.rank_by.clone(),
        ..SweepOutput::default()
    }
}

fn fin(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// The report's PBO and the selection's path Sharpes, typed.
fn cv_output(cv: &crate::sweep::cv::CvSummary) -> SweepCvOutput {
    let sel: Vec<f64> = cv
        .selected_path_sharpe
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    let mean = (!sel.is_empty()).then(|| sel.iter().sum::<f64>() / sel.len() as f64);
    SweepCvOutput {
        kind: cv.kind.clone(),
        splits: cv.splits,
        paths: cv.paths,
        pbo: fin(cv.pbo),
        selected_sharpe_mean: mean.and_then(fin),
        selected_sharpe_min: sel.iter().copied().reduce(f64::min),
        selected_sharpe_max: sel.iter().copied().reduce(f64::max),
    }
}

impl TypedTool for SweepTool {
    type Args = SweepArgs;
    type Output = SweepOutput;

    const NAME: &'static str = names::SWEEP;
    // Its results go to the run dir only (`out` is confined there).
    const CAPS: Caps = Caps::WRITES
        .run_dir_only()
        .served_as(names::SWEEP)
        .planner();

    fn description(&self) -> &str {
        "Parameter sweep over backtests (thousands of configs at once): `spec` = {base: a backtest config, axes: {dotted path into base: [values] | {from,to,step} | {from,to,random:N,seed}}, constraint: \"fast < slow\", universe: [symbols, each run alone] | \"all\" | \"portfolio\" (base.codes together), split: {in_sample:[start,end], out_of_sample:[start,end]} | {walk_forward:{train_months,test_months}} | {purged_kfold:{folds,embargo_days}} | {cpcv:{groups,test_groups,embargo_days}} (answers the PBO), rank_by: sharpe|total_return|final_value|max_drawdown|trade_count}. Runs every cell on every core into a .parquet/.csv file in the run dir; returns the cells ranked by out-of-sample result, the best cell's deflated Sharpe for the number of cells tried, and a braille heatmap. plan_only gives the cell count and time first. Calling again with the same spec and out resumes."
    }
    fn repeatable(&self) -> bool {
        true
    }
    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }
    async fn run(&self, args: SweepArgs, ctx: &ToolContext) -> Result<SweepOutput, ToolError> {
        {
            let mut spec = spec_of(&args, ctx)?;
            let filled = spec.fill_defaults(&self.defaults);
            // Counted before the plan expands the grid (docs §18.7), so a
            // call over the limit costs nothing.
            if spec.max_cells() > MAX_CELLS {
                return Err(ToolError::InvalidArguments(format!(
                    "up to {} cells (every combination of the axes × the symbols, before the constraint) is more than one call runs ({MAX_CELLS}); sweep fewer values or symbols, or run it with `vibedesk sweep run`",
                    spec.max_cells()
                )));
            }
            let plan = Plan::from_spec(&spec).map_err(invalid)?;
            if args.plan_only == Some(true) {
                return Ok(SweepOutput {
                    from_backtest_defaults: filled,
                    ..plan_output(&plan)
                });
            }
            let out_rel = args.out.clone().unwrap_or_else(|| default_out(&plan));
            crate::sweep::output::check_extension(Path::new(&out_rel)).map_err(invalid)?;
            let wanted = ctx.run_dir.join(&out_rel);
            if let Some(dir) = wanted.parent() {
                std::fs::create_dir_all(dir).map_err(|e| ToolError::io("create", dir, e))?;
            }
            let out = inside(ctx, &out_rel, &ctx.run_dir)?;
            let done = self.execute(Arc::new(plan), &out, &out_rel, ctx).await?;
            Ok(SweepOutput {
                from_backtest_defaults: filled,
                ..done
            })
        }
    }
}

impl SweepTool {
    async fn execute(
        &self,
        plan: Arc<Plan>,
        out: &Path,
        out_rel: &str,
        ctx: &ToolContext,
    ) -> Result<SweepOutput, ToolError> {
        let opts = LocalOptions {
            data_dir: ctx.run_dir.clone(),
            data: RunOptions {
                cache_dir: self.cache_dir.clone(),
                ..RunOptions::default()
            },
            threads: None,
        };
        // The run stops at its next cell when the call is cancelled or its
        // deadline passes (a writing tool is not killed by the loop).
        let cancel = ctx.cancel.child_token();
        let timer = {
            let (c, t) = (cancel.clone(), self.timeout);
            tokio::spawn(async move {
                tokio::time::sleep(t).await;
                c.cancel();
            })
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<SweepEvent>();
        let events: Arc<dyn Fn(&SweepEvent) + Send + Sync> = Arc::new(move |e| {
            let _ = tx.send(e.clone());
        });
        // The data loader's future is not `Send` for every lifetime its
        // borrows could have, which this tool's boxed future must be: the
        // run goes on a blocking thread of its own, with owned inputs (as
        // the backtest tool's prefetch does).
        let handle = tokio::runtime::Handle::current();
        let (p2, out2) = (plan.clone(), out.to_path_buf());
        let mut run = tokio::task::spawn_blocking(move || {
            handle.block_on(dispatch::run(Engine::Local, p2, out2, opts, cancel, events))
        });
        let result = loop {
            tokio::select! {
                r = &mut run => break r.unwrap_or_else(|e| Err(SweepError::Engine(format!("the sweep task failed: {e}")))),
                Some(e) = rx.recv() => {
                    if let SweepEvent::Progress { done, total, .. } = &e {
                        progress::emit("sweep", Some(*done as f64), Some(*total as f64), &e.line());
                    }
                }
            }
        };
        let timed_out = timer.is_finished();
        timer.abort();
        let finished = result.map_err(|e| match e {
            SweepError::Cancelled { done, total } => ToolError::failed(
                if timed_out { "timeout" } else { "cancelled" },
                format!(
                    "{} after {done} of {total} cells; the finished cells are kept: call sweep again with the same spec and out \"{out_rel}\" to resume",
                    if timed_out {
                        format!("the sweep reached its {} s deadline", self.timeout.as_secs())
                    } else {
                        "the sweep was cancelled".to_string()
                    }
                ),
            ),
            other => invalid(other),
        })?;
        let rep = report::summarise(&plan, &finished.results);
        let files = rep.write_heatmaps(&finished.state_dir);
        let rel = |p: &str| {
            Path::new(p)
                .strip_prefix(&ctx.run_dir)
                .map_or_else(|_| p.to_string(), |r| r.display().to_string())
        };
        let mut o = plan_output(&plan);
        o.summary = format!(
            "{} cells in {:.2}s ({} run, {} resumed); best by {} {}: {}",
            plan.cell_count(),
            finished.elapsed.as_secs_f64(),
            finished.computed,
            finished.skipped,
            rep.rank_by,
            if rep.out_of_sample {
                "out-of-sample"
            } else {
                "in-sample (no split)"
            },
            rep.top.first().map_or("none".into(), |b| format!(
                "{:.4} ({} {})",
                b.score, b.params, b.symbol
            ))
        );
        o.computed = finished.computed;
        o.skipped = finished.skipped;
        o.elapsed_s = (finished.elapsed.as_secs_f64() * 100.0).round() / 100.0;
        o.results = Some(rel(&out.display().to_string()));
        o.ranked_out_of_sample = rep.out_of_sample;
        o.top = rep
            .top
            .iter()
            .map(|r| SweepRankedOutput {
                params: r.params.clone(),
                symbol: r.symbol.clone(),
                score: fin(r.score),
                in_sample: r.in_sample.and_then(fin),
            })
            .collect();
        o.deflated_sharpe = rep.deflated.as_ref().map(|d| SweepDeflatedOutput {
            dsr: fin(d.dsr),
            sharpe_per_period: fin(d.sharpe),
            expected_max_sharpe: fin(d.expected_max),
            trials: d.trials,
        });
        o.cv = rep.cv.as_ref().map(cv_output);
        if let Some(cv) = &o.cv {
            o.summary.push_str(&format!(
                "; PBO {} over {} {} splits",
                cv.pbo.map_or("n/a".into(), |p| format!("{p:.3}")),
                cv.splits,
                cv.kind
            ));
        }
        o.heatmap = rep
            .heatmap
            .as_ref()
            .map(|h| h.braille())
            .unwrap_or_default();
        o.heatmap_files = files.iter().map(|f| rel(f)).collect();
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::Tool;

    fn spec() -> serde_json::Value {
        json!({"base": {"codes": ["AAPL"], "source": "embedded", "start_date": "2005-01-01", "end_date": "2008-12-31",
                        "strategy": {"name": "sma_crossover"}},
               "axes": {"strategy.params.fast": [5, 10], "strategy.params.slow": [30, 60]},
               "constraint": "fast < slow", "universe": ["AAPL", "MSFT"],
               "split": {"in_sample": ["2005-01-01", "2006-12-31"], "out_of_sample": ["2007-01-01", "2008-12-31"]}})
    }

    #[tokio::test]
    async fn a_sweep_writes_its_results_in_the_run_dir_and_ranks_out_of_sample() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = crate::tools::test_context(tmp.path().join("run"), tmp.path().join("ws"));
        let tool = SweepTool::new(None, DEFAULT_TIMEOUT);
        let plan = tool
            .call_with_output(json!({"spec": spec(), "plan_only": true}), &ctx)
            .await
            .unwrap();
        let p = plan.output.unwrap();
        assert_eq!(p["cells"], 8);
        assert!(p.get("results").is_none());
        let r = tool
            .call_with_output(json!({"spec": spec(), "out": "s/r.csv"}), &ctx)
            .await
            .unwrap()
            .output
            .unwrap();
        assert_eq!(r["results"], "s/r.csv");
        assert!(ctx.run_dir.join("s/r.csv").is_file());
        assert_eq!(
            (r["computed"].as_u64(), r["skipped"].as_u64()),
            (Some(8), Some(0))
        );
        assert_eq!(r["ranked_out_of_sample"], true);
        assert_eq!(r["deflated_sharpe"]["trials"], 8);
        assert!(r["heatmap"].as_str().unwrap().contains("fast"));
        // Again: resumed, nothing run.
        let again = tool
            .call_with_output(json!({"spec": spec(), "out": "s/r.csv"}), &ctx)
            .await
            .unwrap()
            .output
            .unwrap();
        assert_eq!(
            (again["computed"].as_u64(), again["skipped"].as_u64()),
            (Some(0), Some(8))
        );
        assert_eq!(again["top"], r["top"]);
        // Outside the run dir, or a bad spec: refused.
        let e = tool
            .call_with_output(json!({"spec": spec(), "out": "../x.csv"}), &ctx)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("outside the run directory"), "{e}");
        let mut bad = spec();
        bad["constraint"] = json!("fast > slow");
        let e = tool
            .call_with_output(json!({"spec": bad}), &ctx)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("`constraint`"), "{e}");
    }

    #[tokio::test]
    async fn a_cpcv_sweep_answers_its_pbo_and_the_selection_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = crate::tools::test_context(tmp.path().join("run"), tmp.path().join("ws"));
        let tool = SweepTool::new(None, DEFAULT_TIMEOUT);
        let mut s = spec();
        s["split"] = json!({"cpcv": {"groups": 6, "test_groups": 2, "embargo_days": 5}});
        let r = tool
            .call_with_output(json!({"spec": s, "out": "cv.csv"}), &ctx)
            .await
            .unwrap()
            .output
            .unwrap();
        let cv = &r["cv"];
        // C(6, 2) = 15 splits; each group is tested in 5 of them: 5 paths.
        assert_eq!(
            (
                cv["kind"].as_str(),
                cv["splits"].as_u64(),
                cv["paths"].as_u64()
            ),
            (Some("cpcv"), Some(15), Some(5)),
            "{cv}"
        );
        let pbo = cv["pbo"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&pbo), "{pbo}");
        let (lo, mean, hi) = (
            cv["selected_sharpe_min"].as_f64().unwrap(),
            cv["selected_sharpe_mean"].as_f64().unwrap(),
            cv["selected_sharpe_max"].as_f64().unwrap(),
        );
        assert!(lo <= mean && mean <= hi, "{cv}");
        assert!(
            r["summary"].as_str().unwrap().contains("PBO"),
            "{}",
            r["summary"]
        );
        // A plain split has no CV block.
        let plain = tool
            .call_with_output(json!({"spec": spec(), "out": "p.csv"}), &ctx)
            .await
            .unwrap()
            .output
            .unwrap();
        assert!(plain.get("cv").is_none());
    }

    #[tokio::test]
    async fn a_cancelled_sweep_keeps_what_finished_and_says_how_to_resume() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = crate::tools::test_context(tmp.path().join("run"), tmp.path().join("ws"));
        ctx.cancel.cancel();
        let tool = SweepTool::new(None, DEFAULT_TIMEOUT);
        let e = tool
            .call_with_output(json!({"spec": spec(), "out": "c.csv"}), &ctx)
            .await
            .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("cancelled") && msg.contains("call sweep again"),
            "{msg}"
        );
        assert!(!ctx.run_dir.join("c.csv").exists());
        assert!(ctx.run_dir.join("c.csv.sweep/journal.csv").is_file());
    }
}
