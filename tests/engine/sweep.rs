//! Sweeps (docs §18): every cell equals the same config run alone through
//! the backtest engine; walk-forward windows never see their test period;
//! a real `vibedesk sweep run` killed with SIGKILL resumes losing nothing
//! and repeating nothing; the issue's minimal spec works as written; bad
//! specs name their key; a shard's bytes are the same on every run and
//! collected shards give the local run's file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;
use vibedesk::research::backtest::{self as bt, RunOptions};
use vibedesk::research::data::embedded;
use vibedesk::sweep::eval::{Prepared, Scratch, run_one};
use vibedesk::sweep::local::{self, LocalOptions};
use vibedesk::sweep::{Plan, Spec, collect, output, shard};

use crate::support::harness::vibedesk;

fn offline() -> RunOptions {
    RunOptions {
        offline: true,
        ..RunOptions::default()
    }
}

fn opts(dir: &Path) -> LocalOptions {
    LocalOptions {
        data_dir: dir.to_path_buf(),
        data: offline(),
        threads: Some(2),
    }
}

fn plan_of(v: Value) -> Arc<Plan> {
    Arc::new(Plan::from_spec(&Spec::from_value(v).unwrap()).unwrap())
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-300)
}

/// One round trip as both sides can spell it: entry and exit dates, side,
/// quantity, prices and P&L.
#[derive(Debug, PartialEq)]
struct Trip {
    entry: String,
    exit: String,
    code: String,
    side: String,
    qty: f64,
    entry_price: f64,
    exit_price: f64,
    pnl: f64,
}

/// The trades of `artifacts/trades.csv` (an entry line then an exit line).
fn trips_of_csv(text: &str) -> Vec<Trip> {
    let lines: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    lines
        .chunks(2)
        .map(|p| Trip {
            entry: p[0][0].into(),
            exit: p[1][0].into(),
            code: p[0][1].into(),
            side: p[0][2].into(),
            qty: p[0][4].parse().unwrap(),
            entry_price: p[0][3].parse().unwrap(),
            exit_price: p[1][3].parse().unwrap(),
            pnl: p[1][6].parse().unwrap(),
        })
        .collect()
}

fn same_trips(a: &[Trip], b: &[Trip]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            (&x.entry, &x.exit, &x.code, &x.side) == (&y.entry, &y.exit, &y.code, &y.side)
                && close(x.qty, y.qty, 1e-12)
                && close(x.entry_price, y.entry_price, 1e-12)
                && close(x.exit_price, y.exit_price, 1e-12)
                && (x.pnl - y.pnl).abs() <= 1e-9 * x.pnl.abs().max(1.0)
        })
}

/// Runs every cell and window of `plan` through the sweep, then each as a
/// config alone through `backtest::run_in_dir`, and compares.
async fn every_cell_matches(plan: Arc<Plan>, tmp: &Path) -> usize {
    let out = tmp.join("results.csv");
    let done = local::run(
        plan.clone(),
        &out,
        &opts(tmp),
        CancellationToken::new(),
        Arc::new(|_| {}),
    )
    .await
    .unwrap();
    let prep = Prepared::load(plan.clone(), tmp, &offline()).await.unwrap();
    let mut scratch = Scratch::default();
    let mut checked = 0;
    for row in &done.results.rows {
        let c = plan.cell(row.cell);
        let run = tmp.join(format!("alone_{}_{}", row.cell, row.window));
        std::fs::create_dir_all(&run).unwrap();
        let cfg = plan.config_value(c.combo, c.unit, row.window).unwrap();
        std::fs::write(run.join("config.json"), cfg.to_string()).unwrap();
        let alone = bt::run_in_dir(&run, &offline()).await.unwrap();
        let want = alone.scalars["final_value"].as_f64().unwrap();
        assert!(
            close(row.final_value, want, 1e-12),
            "cell {} window {} ({}): sweep {} alone {want}",
            row.cell,
            row.window,
            plan.describe_combo(c.combo),
            row.final_value
        );
        assert_eq!(
            row.trade_count,
            alone.scalars["trade_count"].as_u64().unwrap(),
            "cell {} window {}",
            row.cell,
            row.window
        );
        let sharpe = alone.scalars["sharpe"].as_f64().unwrap();
        assert!(
            close(row.sharpe, sharpe, 1e-9),
            "sharpe {} vs {sharpe}",
            row.sharpe
        );
        let csv = std::fs::read_to_string(run.join("artifacts/trades.csv")).unwrap();
        let want_trips = trips_of_csv(&csv);
        let r = run_one(&prep, row.cell, row.window, &mut scratch);
        assert_eq!(r.row.final_value.to_bits(), row.final_value.to_bits());
        let panel_dates: Vec<String> = {
            // The sweep's panel is the window's calendar: the same as the
            // run's equity file.
            let eq = std::fs::read_to_string(run.join("artifacts/equity.csv")).unwrap();
            eq.lines()
                .skip(1)
                .map(|l| l.split(',').next().unwrap().to_string())
                .collect()
        };
        let codes = &plan.units[c.unit].codes;
        let got: Vec<Trip> = r
            .sim
            .trades
            .iter()
            .map(|t| Trip {
                entry: panel_dates[t.entry_bar].clone(),
                exit: panel_dates[t.exit_bar].clone(),
                code: codes[t.symbol].clone(),
                side: if t.side > 0 {
                    "buy".into()
                } else {
                    "sell".into()
                },
                qty: t.qty,
                entry_price: t.entry_price,
                exit_price: t.exit_price,
                pnl: t.pnl,
            })
            .collect();
        assert!(
            same_trips(&got, &want_trips),
            "cell {} window {}: trades differ\nsweep {got:?}\nalone {want_trips:?}",
            row.cell,
            row.window
        );
        assert!(!want_trips.is_empty() || row.trade_count == 0);
        checked += 1;
    }
    checked
}

/// Symbols run alone, two strategies' worth of axes, in- and out-of-sample.
#[tokio::test]
async fn every_cell_equals_the_same_config_run_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan_of(json!({
        "base": {"source": "embedded", "start_date": "2005-01-01", "end_date": "2012-12-31",
                 "strategy": {"name": "sma_crossover", "params": {"fast": 20, "slow": 50, "allow_short": true}}},
        "axes": {"strategy.params.fast": [5, 20], "strategy.params.slow": {"from": 30, "to": 60, "step": 30}},
        "constraint": "fast < slow",
        "universe": ["AAPL", "MSFT"],
        "split": {"in_sample": ["2005-01-01", "2009-12-31"], "out_of_sample": ["2010-01-01", "2012-12-31"]},
    }));
    assert_eq!(plan.cell_count(), 8);
    let n = every_cell_matches(plan, tmp.path()).await;
    assert_eq!(n, 16);
}

/// The portfolio together, a cost axis (contexts per parameter set), a
/// state-machine strategy and walk-forward windows.
#[tokio::test]
async fn portfolio_cells_with_a_cost_axis_equal_their_runs_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan_of(json!({
        "base": {"codes": ["AAPL", "MSFT", "JPM"], "source": "embedded", "start_date": "2005-01-01", "end_date": "2008-12-31",
                 "position_adjustment": "rebalance",
                 "strategy": {"name": "rsi_mean_reversion", "params": {"period": 14}}},
        "axes": {"strategy.params.period": [7, 14], "commission_rate": [0.0005, 0.003]},
        "universe": "portfolio",
        "split": {"walk_forward": {"train_months": 24, "test_months": 12}},
        "rank_by": "total_return",
    }));
    assert_eq!(plan.windows.len(), 4, "{:?}", plan.windows);
    let n = every_cell_matches(plan, tmp.path()).await;
    assert_eq!(n, 16);
}

/// Bars of AAPL to 2012 as a local CSV, its closes after `after` scaled.
fn write_aapl(dir: &Path, after: Option<&str>) {
    let b = embedded::bars("AAPL").unwrap();
    let mut s = String::from("date,open,high,low,close,volume\n");
    for i in 0..b.len() {
        let d = b.dates[i].to_string();
        if d.as_str() > "2012-12-31" {
            break;
        }
        // A different path after the cut: a wave on every price.
        let k = match after {
            Some(a) if d.as_str() > a => 1.0 + 0.2 * ((i as f64) * 0.3).sin(),
            _ => 1.0,
        };
        s.push_str(&format!(
            "{d},{},{},{},{},{}\n",
            b.open[i] * k,
            b.high[i] * k,
            b.low[i] * k,
            b.close[i] * k,
            b.volume[i]
        ));
    }
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("data/AAPL.csv"), s).unwrap();
}

/// Perturbing every price after a window's end leaves that window's row
/// bit for bit, while the later windows change: no window sees what comes
/// after it, its test period's end included.
#[tokio::test]
async fn walk_forward_windows_never_see_past_their_end() {
    let spec = json!({
        "base": {"codes": ["AAPL"], "source": "local", "start_date": "2005-01-01", "end_date": "2012-12-31",
                 "strategy": {"name": "sma_crossover", "params": {"fast": 10, "slow": 50}}},
        "axes": {"strategy.params.fast": [5, 10, 20], "strategy.params.slow": [50, 100]},
        "universe": ["AAPL"],
        "split": {"walk_forward": {"train_months": 24, "test_months": 12}},
    });
    let plan = plan_of(spec);
    let run = |after: Option<String>| {
        let plan = plan.clone();
        async move {
            let tmp = tempfile::tempdir().unwrap();
            write_aapl(tmp.path(), after.as_deref());
            let out = tmp.path().join("r.csv");
            local::run(
                plan,
                &out,
                &opts(tmp.path()),
                CancellationToken::new(),
                Arc::new(|_| {}),
            )
            .await
            .unwrap()
            .results
        }
    };
    let clean = run(None).await;
    // Cut right after a train window (its test period changes), and after
    // a later test window.
    for (name, unchanged_windows) in [("wf_1_train", 1), ("wf_2_test", 5)] {
        let cut = plan.windows.iter().find(|w| w.name == name).unwrap().end;
        let perturbed = run(Some(cut.to_string())).await;
        let mut before = 0;
        let mut changed_after = 0;
        for (a, b) in clean.rows.iter().zip(&perturbed.rows) {
            let w = &plan.windows[a.window];
            if w.end <= cut {
                assert_eq!(
                    (a.final_value.to_bits(), a.sharpe.to_bits(), a.trade_count),
                    (b.final_value.to_bits(), b.sharpe.to_bits(), b.trade_count),
                    "{} changed when only prices after {cut} did",
                    w.name
                );
                before += 1;
            } else if a.final_value != b.final_value {
                changed_after += 1;
            }
        }
        // After wf_2_test: two folds' train and test windows, and the
        // third fold's train window (it ends where that test window does).
        assert_eq!(before, 6 * unchanged_windows, "cut after {name}");
        assert!(
            changed_after > 0,
            "the perturbation after {name} reaches the later windows"
        );
    }
}

const MINIMAL: &str = r#"{"base": {"codes": ["AAPL"], "start_date": "2005-01-01", "end_date": "2013-12-31", "strategy": {"name": "sma_crossover", "params": {"fast": 20, "slow": 50}}}, "axes": {"strategy.params.fast": [5, 10, 20], "strategy.params.slow": {"from": 30, "to": 60, "step": 10}}, "constraint": "fast < slow", "universe": ["AAPL", "MSFT"], "split": {"in_sample": ["2005-01-01", "2010-12-31"], "out_of_sample": ["2011-01-01", "2013-12-31"]}, "rank_by": "sharpe"}"#;

const MINIMAL_TOML: &str = r#"
constraint = "fast < slow"
universe = ["AAPL", "MSFT"]
rank_by = "sharpe"
[base]
codes = ["AAPL"]
start_date = "2005-01-01"
end_date = "2013-12-31"
strategy = { name = "sma_crossover", params = { fast = 20, slow = 50 } }
[axes]
"strategy.params.fast" = [5, 10, 20]
"strategy.params.slow" = { from = 30, to = 60, step = 10 }
[split]
in_sample = ["2005-01-01", "2010-12-31"]
out_of_sample = ["2011-01-01", "2013-12-31"]
"#;

async fn cli(home: &Path, args: &[&str]) -> std::process::Output {
    vibedesk(home).args(args).output().await.unwrap()
}

/// The issue's minimal spec, as written, JSON and TOML, through the CLI.
#[tokio::test]
async fn the_minimal_spec_runs_as_written_through_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let spec = tmp.path().join("spec.json");
    std::fs::write(&spec, MINIMAL).unwrap();
    let toml = tmp.path().join("spec.toml");
    std::fs::write(&toml, MINIMAL_TOML).unwrap();

    let plan = cli(&home, &["sweep", "plan", spec.to_str().unwrap(), "--json"]).await;
    assert!(
        plan.status.success(),
        "{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    let p: Value = serde_json::from_slice(&plan.stdout).unwrap();
    assert_eq!(p["cells"], 24, "{p}");
    assert_eq!(p["windows"], json!(["in_sample", "out_of_sample"]));
    assert!(p["estimated_seconds"].as_f64().unwrap() > 0.0);

    let out = tmp.path().join("r.csv");
    let run = cli(
        &home,
        &[
            "sweep",
            "run",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        stdout.contains("ranked by sharpe out-of-sample"),
        "{stdout}"
    );
    assert!(stdout.contains("deflated Sharpe"), "{stdout}");
    assert!(
        stdout.contains("the expected best of 24 cells tried"),
        "{stdout}"
    );
    assert!(
        stdout
            .chars()
            .any(|c| ('\u{2801}'..='\u{28ff}').contains(&c)),
        "a braille heatmap: {stdout}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "fast,slow,symbol,window,final_value,total_return,sharpe,max_drawdown,trade_count"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 48);
    assert_eq!(rows[0][..4], ["5", "30", "AAPL", "in_sample"]);
    assert_eq!(rows[1][..4], ["5", "30", "AAPL", "out_of_sample"]);
    assert_eq!(rows[24][..4], ["5", "30", "MSFT", "in_sample"]);
    assert!(
        rows.iter()
            .all(|r| r[0].parse::<i64>().unwrap() < r[1].parse::<i64>().unwrap())
    );
    let svg = std::fs::read_to_string(tmp.path().join("r.csv.sweep/heatmap.svg")).unwrap();
    assert!(svg.contains("<svg"));
    assert!(tmp.path().join("r.csv.sweep/heatmap.png").is_file());

    // TOML, same keys: the same results, byte for byte.
    let out2 = tmp.path().join("t.csv");
    let run = cli(
        &home,
        &[
            "sweep",
            "run",
            toml.to_str().unwrap(),
            "--out",
            out2.to_str().unwrap(),
            "--json",
        ],
    )
    .await;
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(std::fs::read(&out2).unwrap(), text.as_bytes());
    let events: Vec<Value> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"sweep_started"));
    assert!(kinds.contains(&"sweep_progress"), "{kinds:?}");
    let report = events.last().unwrap();
    assert_eq!(report["event"], "sweep_report");
    let best = &events
        .iter()
        .rev()
        .find(|e| e["event"] == "sweep_progress")
        .unwrap()["best"];
    let top = report["top"][0]["score"].as_f64().unwrap();
    assert!(
        (best["value"].as_f64().unwrap() - top).abs() < 1e-6,
        "{best} vs {top}"
    );
    assert_eq!(best["cell"], report["top"][0]["cell"]);
    // Parquet: the same rows.
    let pq = tmp.path().join("r.parquet");
    let run = cli(
        &home,
        &[
            "sweep",
            "run",
            spec.to_str().unwrap(),
            "--out",
            pq.to_str().unwrap(),
        ],
    )
    .await;
    assert!(run.status.success());
    assert_eq!(&std::fs::read(&pq).unwrap()[..4], b"PAR1");
}

/// Bad specs exit 2 with a message naming the key.
#[tokio::test]
async fn bad_specs_name_their_key_through_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let cases: [(&str, Value, &str); 5] = [
        (
            "unknown path",
            json!({"axes": {"strategy.params.fast": [5], "strategy.parms.slow": [50]}}),
            "strategy.parms",
        ),
        (
            "unknown config key",
            json!({"axes": {"comission_rate": [0.001]}, "constraint": null}),
            "did you mean `commission_rate`",
        ),
        (
            "empty grid",
            json!({"constraint": "fast > slow"}),
            "`constraint`",
        ),
        (
            "bad constraint",
            json!({"constraint": "fast <> slow"}),
            "`constraint`",
        ),
        ("bad metric", json!({"rank_by": "profit"}), "`rank_by`"),
    ];
    for (what, patch, needle) in cases {
        let mut spec: Value = serde_json::from_str(MINIMAL).unwrap();
        for (k, v) in patch.as_object().unwrap() {
            spec[k] = v.clone();
        }
        let path = tmp.path().join("bad.json");
        std::fs::write(&path, spec.to_string()).unwrap();
        let out = cli(&home, &["sweep", "plan", path.to_str().unwrap()]).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {err}");
        assert!(err.contains(needle), "{what}: {err}");
        assert!(err.starts_with("vibedesk sweep:"), "{what}: {err}");
    }
}

fn journal_cells(path: &Path, windows: usize) -> (usize, usize) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut by_cell = std::collections::BTreeMap::<usize, usize>::new();
    let mut rows = 0;
    for line in text.split_inclusive('\n').skip(2) {
        if !line.ends_with('\n') {
            continue;
        }
        let cell: usize = line.split(',').next().unwrap().parse().unwrap();
        *by_cell.entry(cell).or_default() += 1;
        rows += 1;
    }
    (by_cell.values().filter(|n| **n == windows).count(), rows)
}

fn kill_spec(dir: &Path) -> PathBuf {
    let symbols: Vec<&str> = embedded::symbols().into_iter().take(12).collect();
    let spec = json!({
        "base": {"source": "embedded", "start_date": "2004-01-01", "end_date": "2012-12-31",
                 "strategy": {"name": "sma_crossover"}},
        "axes": {"strategy.params.fast": {"from": 5, "to": 50, "step": 5}, "strategy.params.slow": {"from": 20, "to": 200, "step": 10}},
        "constraint": "fast < slow",
        "universe": symbols,
        "split": {"in_sample": ["2004-01-01", "2009-12-31"], "out_of_sample": ["2010-01-01", "2012-12-31"]},
    });
    let path = dir.join("spec.json");
    std::fs::write(&path, spec.to_string()).unwrap();
    path
}

/// SIGKILL in the middle of a real `vibedesk sweep run`: the re-run skips
/// exactly the cells the journal holds, runs the others once, and the
/// results equal a run that was never interrupted, byte for byte.
#[tokio::test]
async fn a_sweep_killed_with_sigkill_resumes_losing_nothing_and_repeating_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let spec = kill_spec(tmp.path());
    let out = tmp.path().join("r.csv");
    let mut child = vibedesk(&home)
        .args([
            "sweep",
            "run",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
            "--threads",
            "2",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut total = 0;
    // Kill once some cells are done and before the end.
    while let Some(line) = lines.next_line().await.unwrap() {
        let e: Value = serde_json::from_str(&line).unwrap();
        if e["event"] == "sweep_started" {
            total = e["total"].as_u64().unwrap() as usize;
        }
        if e["event"] == "sweep_progress" && e["done"].as_u64().unwrap() > 0 {
            break;
        }
        assert_ne!(
            e["event"], "sweep_finished",
            "the run ended before it could be killed"
        );
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let status = child.wait().await.unwrap();
    assert!(!status.success());
    assert!(!out.exists(), "no results file from a killed run");
    assert_eq!(total, 174 * 12);
    let journal = tmp.path().join("r.csv.sweep/journal.csv");
    let (kept, _) = journal_cells(&journal, 2);
    assert!(
        kept > 0 && kept < total,
        "{kept} of {total} cells done at the kill"
    );

    let resumed = cli(
        &home,
        &[
            "sweep",
            "run",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
    )
    .await;
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&resumed.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let started = events
        .iter()
        .find(|e| e["event"] == "sweep_started")
        .unwrap();
    let finished = events
        .iter()
        .find(|e| e["event"] == "sweep_finished")
        .unwrap();
    assert_eq!(started["skipped"], kept, "every kept cell is skipped");
    assert_eq!(finished["computed"], total - kept, "only the others run");
    // The journal holds each cell once, with both windows.
    let (complete, rows) = journal_cells(&journal, 2);
    assert_eq!((complete, rows), (total, 2 * total));

    let clean_out = tmp.path().join("clean.csv");
    let clean = cli(
        &home,
        &[
            "sweep",
            "run",
            spec.to_str().unwrap(),
            "--out",
            clean_out.to_str().unwrap(),
        ],
    )
    .await;
    assert!(clean.status.success());
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(&clean_out).unwrap()
    );
    // A third run of a finished sweep runs nothing.
    let again = cli(
        &home,
        &[
            "sweep",
            "run",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
    )
    .await;
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(
        text.contains(&format!("\"computed\":0,\"skipped\":{total}")),
        "{text}"
    );
}

/// A shard run twice gives the same bytes (and the second run is a no-op);
/// the collected shards give the local run's results file byte for byte.
#[tokio::test]
async fn shards_are_reproducible_and_collect_to_the_local_results() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let spec = tmp.path().join("spec.json");
    std::fs::write(&spec, MINIMAL).unwrap();
    let plan_path = tmp.path().join("plan.json");
    let saved = cli(
        &home,
        &[
            "sweep",
            "plan",
            spec.to_str().unwrap(),
            "--save",
            plan_path.to_str().unwrap(),
        ],
    )
    .await;
    assert!(saved.status.success());
    let dir = tmp.path().join("shards");
    let shard_run = |i: &str| {
        let (home, plan_path, dir) = (home.clone(), plan_path.clone(), dir.clone());
        let i = i.to_string();
        async move {
            let o = cli(
                &home,
                &[
                    "sweep",
                    "shard",
                    "--plan",
                    plan_path.to_str().unwrap(),
                    "--shard",
                    &i,
                    "--out",
                    dir.to_str().unwrap(),
                    "--json",
                ],
            )
            .await;
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8_lossy(&o.stdout).into_owned()
        }
    };
    shard_run("0/3").await;
    let first = std::fs::read(dir.join("shard-0-of-3.csv")).unwrap();
    let again = shard_run("0/3").await;
    assert!(
        again.contains("\"computed\":0"),
        "a complete shard is not run again: {again}"
    );
    std::fs::remove_file(dir.join("shard-0-of-3.csv")).unwrap();
    shard_run("0/3").await;
    assert_eq!(std::fs::read(dir.join("shard-0-of-3.csv")).unwrap(), first);

    let plan = Plan::load(&plan_path).unwrap();
    shard_run("2/3").await;
    let missing = collect(&plan, &dir, 3).unwrap_err().to_string();
    assert!(
        missing.contains("shards missing or incomplete") && missing.contains(": 1 (of 3)"),
        "{missing}"
    );
    shard_run("1/3").await;
    let results = collect(&plan, &dir, 3).unwrap();
    let from_shards = tmp.path().join("from_shards.parquet");
    output::write(&plan, &results, &from_shards).unwrap();
    let local_out = tmp.path().join("local.parquet");
    let run = cli(
        &home,
        &[
            "sweep",
            "run",
            spec.to_str().unwrap(),
            "--out",
            local_out.to_str().unwrap(),
        ],
    )
    .await;
    assert!(run.status.success());
    assert_eq!(
        std::fs::read(&from_shards).unwrap(),
        std::fs::read(&local_out).unwrap()
    );
    // A shard of another plan is refused, not mixed in.
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    for i in 0..3 {
        let text = std::fs::read_to_string(dir.join(shard::file_name(i, 3))).unwrap();
        std::fs::write(
            other.join(shard::file_name(i, 3)),
            text.replacen(&plan.hash(), &"0".repeat(64), 1),
        )
        .unwrap();
    }
    assert!(collect(&plan, &other, 3).is_err());
}

/// Ctrl-C (SIGINT) stops a real `vibedesk sweep run` at the next cell: exit
/// 130, a message saying how to resume, the finished cells kept.
#[tokio::test]
async fn ctrl_c_stops_at_the_next_cell_and_keeps_what_finished() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let spec = kill_spec(tmp.path());
    let out = tmp.path().join("r.parquet");
    let mut child = vibedesk(&home)
        .args([
            "sweep",
            "run",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(line) = lines.next_line().await.unwrap() {
        let e: Value = serde_json::from_str(&line).unwrap();
        if e["event"] == "sweep_progress" && e["done"].as_u64().unwrap() > 0 {
            break;
        }
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let mut finished = None;
    while let Some(line) = lines.next_line().await.unwrap() {
        let e: Value = serde_json::from_str(&line).unwrap();
        if e["event"] == "sweep_finished" {
            finished = Some(e);
        }
    }
    let o = child.wait_with_output().await.unwrap();
    assert_eq!(o.status.code(), Some(130));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("run it again to resume"), "{err}");
    let f = finished.unwrap();
    assert_eq!(f["cancelled"], true);
    let done = f["done"].as_u64().unwrap() as usize;
    assert!(done > 0 && done < 174 * 12, "{f}");
    let (kept, rows) = journal_cells(&tmp.path().join("r.parquet.sweep/journal.csv"), 2);
    assert_eq!(
        (kept, rows),
        (done, 2 * done),
        "every finished cell kept, once"
    );
    assert!(!out.exists());
}

/// The user's `[backtest]` costs reach a sweep's cells as they reach the
/// `backtest` tool: the plan's base carries them, and a cell's final value
/// is the one the engine gives with them (docs §18.1).
#[tokio::test]
async fn backtest_defaults_from_config_reach_every_cell() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(home.join("config")).unwrap();
    std::fs::write(
        home.join("config/config.toml"),
        "[backtest]\ncommission_rate = 0.004\n",
    )
    .unwrap();
    let spec = tmp.path().join("spec.json");
    std::fs::write(&spec, MINIMAL).unwrap();
    let saved = tmp.path().join("plan.json");
    let out = cli(
        &home,
        &[
            "sweep",
            "plan",
            spec.to_str().unwrap(),
            "--save",
            saved.to_str().unwrap(),
        ],
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("commission_rate from [backtest]"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let with = Plan::load(&saved).unwrap();
    assert_eq!(with.base["commission_rate"], json!(0.004));
    let without = plan_of(serde_json::from_str(MINIMAL).unwrap());
    assert!(!without.base.contains_key("commission_rate"));
    assert_ne!(
        with.hash(),
        without.hash(),
        "the costs are part of the plan"
    );

    // The same cell with and without the cost: the cost lowers it.
    let dir = tempfile::tempdir().unwrap();
    let run = |plan: Arc<Plan>, d: PathBuf| async move {
        local::run(
            plan,
            &d.join("r.csv"),
            &opts(&d),
            CancellationToken::new(),
            Arc::new(|_| {}),
        )
        .await
        .unwrap()
        .results
    };
    let a = run(Arc::new(with), dir.path().join("a")).await;
    let b = run(without, dir.path().join("b")).await;
    assert_eq!(a.rows.len(), b.rows.len());
    let mut traded = 0;
    for (x, y) in a.rows.iter().zip(&b.rows) {
        assert_eq!((x.cell, &x.window), (y.cell, &y.window));
        if y.trade_count > 0 {
            assert!(x.final_value < y.final_value, "{x:?} against {y:?}");
            traded += 1;
        }
    }
    assert!(traded > 0);
}

/// A cell whose book never moves out-of-sample (RSI thresholds the window
/// never reaches) has a Sharpe of 0 there, not the T-bill's drift over its
/// tiny spread (it was −29.6), and is no trial for the deflated Sharpe
/// (docs §7.5, §18.4).
#[tokio::test]
async fn cells_that_never_trade_out_of_sample_have_no_sharpe_and_are_no_trial() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let spec = tmp.path().join("rsi.json");
    std::fs::write(
        &spec,
        json!({
            "base": {"source": "embedded", "codes": ["KO"], "start_date": "2006-01-01", "end_date": "2014-12-31",
                     "strategy": {"name": "rsi_mean_reversion", "params": {"period": 14, "lower": 30, "upper": 70}}},
            "axes": {"strategy.params.period": [7, 14, 21], "strategy.params.lower": [20, 25, 30]},
            "universe": ["KO", "PEP"],
            "split": {"in_sample": ["2006-01-01", "2012-04-19"], "out_of_sample": ["2012-04-20", "2014-12-31"]},
            "rank_by": "sharpe"
        })
        .to_string(),
    )
    .unwrap();
    let out = tmp.path().join("r.csv");
    let run = cli(
        &home,
        &[
            "sweep",
            "run",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
    )
    .await;
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (window, value, sharpe, trades) = (
        col("window"),
        col("final_value"),
        col("sharpe"),
        col("trade_count"),
    );
    let (mut flat, mut traded) = (0, 0);
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        if f[window] != "out_of_sample" {
            continue;
        }
        if f[trades] == "0" && f[value].parse::<f64>().unwrap() == 1_000_000.0 {
            flat += 1;
            assert_eq!(f[sharpe].parse::<f64>().unwrap(), 0.0, "{line}");
        } else {
            traded += 1;
        }
    }
    assert!(flat > 0 && traded > 1, "flat {flat}, traded {traded}");
    let report: Value = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "sweep_report")
        .unwrap();
    let d = &report["deflated_sharpe"];
    assert_eq!(d["trials"], traded, "{report}");
    assert!(report.get("cv").is_none(), "only CV plans report one");
    // The luck-only maximum is a plausible daily Sharpe, not the 1.8 the
    // flat cells' ratios made it.
    assert!(d["expected_max_sharpe"].as_f64().unwrap() < 0.2, "{report}");
    // The printed report says how many cells the deflation counted (a
    // second run resumes every cell and reports the same).
    let again = cli(
        &home,
        &[
            "sweep",
            "run",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(
        stdout.contains(&format!("the {traded} cells with a Sharpe of 18 tried")),
        "{stdout}"
    );
}

/// A CPCV sweep (docs §18.9): each cell runs the whole range once and its
/// pieces are slices of that run (their returns compound to the whole
/// run's, their excess-return sums add up to its), the cell's score is
/// its mean out-of-sample Sharpe over the paths, and the report's PBO
/// reads the plan's 15 splits.
#[tokio::test]
async fn cpcv_pieces_slice_one_run_and_the_report_gives_pbo() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan_of(json!({
        "base": {"source": "embedded", "start_date": "2005-01-01", "end_date": "2012-12-31",
                 "strategy": {"name": "sma_crossover", "params": {"fast": 20, "slow": 50}}},
        "axes": {"strategy.params.fast": [5, 10, 20], "strategy.params.slow": [50, 100]},
        "universe": ["AAPL", "MSFT"],
        "split": {"cpcv": {"groups": 6, "test_groups": 2, "embargo_days": 5, "horizon_days": 2}},
    }));
    let cv = plan.cv.clone().unwrap();
    let out = tmp.path().join("cv.csv");
    let done = local::run(
        plan.clone(),
        &out,
        &opts(tmp.path()),
        CancellationToken::new(),
        Arc::new(|_| {}),
    )
    .await
    .unwrap();
    let rows = &done.results.rows;
    assert_eq!(rows.len(), plan.cell_count() * plan.windows.len());
    for cell in rows.chunk_by(|a, b| a.cell == b.cell) {
        let (full, pieces) = cell.split_first().unwrap();
        assert_eq!(full.window, 0);
        let growth: f64 = pieces.iter().map(|r| 1.0 + r.total_return).product();
        assert!(
            close(growth, 1.0 + full.total_return, 1e-9),
            "cell {}: pieces compound to {growth}, the run to {}",
            full.cell,
            1.0 + full.total_return
        );
        let n: u64 = pieces.iter().map(|r| r.moments.n).sum();
        let s1: f64 = pieces.iter().map(|r| r.moments.s[0]).sum();
        assert_eq!(n, full.moments.n, "cell {}", full.cell);
        assert!(
            close(s1, full.moments.s[0], 1e-9),
            "{s1} vs {}",
            full.moments.s[0]
        );
        let trades: u64 = pieces.iter().map(|r| r.trade_count).sum();
        assert_eq!(trades, full.trade_count);
        // A fixed parameter set's paths are one series: each path's Sharpe
        // is the pieces' pooled Sharpe.
        let mut all = vibedesk::sweep::rows::PowerSums::default();
        for r in pieces {
            all.add(&r.moments);
        }
        let want = all.moments().unwrap().sharpe * 252f64.sqrt();
        let got = local::cell_score(&plan, cell);
        assert!(close(got, want, 1e-12), "score {got} vs {want}");
    }
    // The full run equals the same config run alone.
    let c = plan.cell(0);
    let run = tmp.path().join("alone");
    std::fs::create_dir_all(&run).unwrap();
    let cfg = plan.config_value(c.combo, c.unit, 0).unwrap();
    std::fs::write(run.join("config.json"), cfg.to_string()).unwrap();
    let alone = bt::run_in_dir(&run, &offline()).await.unwrap();
    assert!(close(
        rows[0].final_value,
        alone.scalars["final_value"].as_f64().unwrap(),
        1e-12
    ));
    let report = vibedesk::sweep::report::summarise(&plan, &done.results);
    assert!(report.out_of_sample);
    let s = report.cv.as_ref().unwrap();
    assert_eq!((s.kind.as_str(), s.splits, s.paths), ("cpcv", 15, 5));
    assert_eq!((s.logits.len(), s.selected_path_sharpe.len()), (15, 5));
    let below = s.logits.iter().filter(|l| **l <= 0.0).count();
    assert_eq!(s.pbo, below as f64 / 15.0);
    assert_eq!(cv.splits.len(), 15);
    // The deflated Sharpe reads the best cell's pieces once (not
    // `cv_full` again: twice the returns would double its n).
    let d = report.deflated.as_ref().unwrap();
    let best = report.top[0].cell;
    let mut pieces = vibedesk::sweep::rows::PowerSums::default();
    for r in rows.iter().filter(|r| r.cell == best && r.window > 0) {
        pieces.add(&r.moments);
    }
    let m = pieces.moments().unwrap();
    let want = vibedesk::research::overfitting::psr(&m, d.expected_max);
    assert!(close(d.dsr, want, 1e-12), "dsr {} vs {want}", d.dsr);
    let json = report.to_json();
    assert_eq!(json["cv"]["splits"], 15, "{json}");
    assert!(
        report
            .text()
            .contains("probability of backtest overfitting")
    );
}

/// A purged k-fold through the CLI: the results name the pieces, the
/// report ranks by the mean Sharpe over the folds and gives the PBO; the
/// other split forms' reports have no `cv` key.
#[tokio::test]
async fn a_purged_kfold_sweep_runs_through_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let spec = tmp.path().join("kfold.json");
    std::fs::write(
        &spec,
        json!({
            "base": {"source": "embedded", "codes": ["KO"], "start_date": "2006-01-01", "end_date": "2012-12-31",
                     "strategy": {"name": "sma_crossover", "params": {"fast": 10, "slow": 50}}},
            "axes": {"strategy.params.fast": [5, 10, 20], "strategy.params.slow": [50, 100]},
            "split": {"purged_kfold": {"folds": 5, "embargo_days": 10}}
        })
        .to_string(),
    )
    .unwrap();
    let out = tmp.path().join("k.csv");
    let run = cli(
        &home,
        &[
            "sweep",
            "run",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
    )
    .await;
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains(",cv_full,") && text.contains(",cv_2_1,") && text.contains(",cv_2_2,"));
    let report: Value = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "sweep_report")
        .unwrap();
    assert_eq!(report["cv"]["kind"], "purged_kfold", "{report}");
    assert_eq!(report["cv"]["splits"], 5);
    assert_eq!(report["cv"]["paths"], 1);
    let pbo = report["cv"]["pbo"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&pbo));
    assert_eq!(report["ranked_out_of_sample"], true);
    assert_eq!(report["top"].as_array().unwrap().len(), 6);
}
