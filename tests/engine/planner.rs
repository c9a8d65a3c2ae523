//! The offline planner through the real binary (issue 23 items 4 and 5):
//! dates read by their meaning, and every backtest answer stating the
//! costs, lots, cash, prices and benchmark it ran on — the defaults, the
//! `[backtest]` section of `config.toml`, and a remembered preference.
//! Expected figures come from the run's own files (its `config.json` and
//! run card), never from the embedded data's prices.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::harness::{read_json, vibedesk};

/// What one offline `run --json` left: its events, its answer, and the
/// backtest's output when one ran.
pub(crate) struct Run {
    pub(crate) events: Vec<Value>,
    pub(crate) answer: String,
}

impl Run {
    fn backtest_output(&self) -> &Value {
        let done = self
            .events
            .iter()
            .find(|e| e["type"] == "tool_call_finished" && e["tool"] == "backtest")
            .unwrap_or_else(|| panic!("no backtest ran: {:?}", self.events));
        assert_eq!(done["status"], "ok", "{done}");
        &done["output"]
    }

    fn run_dir(&self) -> PathBuf {
        PathBuf::from(self.backtest_output()["run_dir"].as_str().unwrap())
    }

    fn config(&self) -> Value {
        read_json(&self.run_dir().join("config.json"))
    }

    fn card(&self) -> Value {
        read_json(&self.run_dir().join("run_card.json"))
    }
}

async fn run(home: &Path, prompt: &str) -> Run {
    run_with(home, prompt, &[]).await
}

/// [`run`] with more flags (`--yes` for a memory write, which needs the
/// user's approval: docs §2.14.2).
pub(crate) async fn run_with(home: &Path, prompt: &str, flags: &[&str]) -> Run {
    let out = vibedesk(home)
        .args(["run", "--json"])
        .args(flags)
        .args(["-p", prompt])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{prompt}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let answer = events
        .iter()
        .find(|e| e["type"] == "answer")
        .and_then(|e| e["content"].as_str())
        .unwrap_or_default()
        .to_string();
    Run { events, answer }
}

fn write_config_toml(home: &Path, text: &str) {
    let dir = home.join("config");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// A rate as the answer writes it: "0.10 % (10 bp)".
fn said(rate: f64) -> String {
    let bp = rate * 10_000.0;
    let bp = if (bp - bp.round()).abs() < 1e-9 {
        format!("{bp:.0}")
    } else {
        format!("{bp:.2}")
    };
    format!("{:.2} % ({bp} bp)", rate * 100.0)
}

/// Issue 23's reproduction: a date quoted from an earlier answer
/// ("Latest (…)") comes first, the range after it. The backtest runs over
/// the range, and the answer says what it left out.
#[tokio::test]
async fn dates_in_mixed_order_run_the_backtest_over_the_period_asked_for() {
    let home = tempfile::tempdir().unwrap();
    let r = run(
        home.path(),
        "Backtest buy and hold of IBM. Latest (2013-03-01) range 2000-03-01 to 2013-03-01",
    )
    .await;
    let cfg = r.config();
    assert_eq!(
        (cfg["start_date"].as_str(), cfg["end_date"].as_str()),
        (Some("2000-03-01"), Some("2013-03-01")),
        "{cfg}"
    );
    let b = &r.card()["backtest"];
    assert_eq!(
        (b["start_date"].as_str(), b["end_date"].as_str()),
        (Some("2000-03-01"), Some("2013-03-01"))
    );
    let last = b["last_bar"].as_str().unwrap();
    assert!(last <= "2013-03-01" && last > "2013-02-15", "{last}");
    assert!(
        r.answer
            .contains("2013-03-01 is quoted, not the period asked for"),
        "{}",
        r.answer
    );

    // Written end first: put in order, and said.
    let r = run(
        home.path(),
        "Backtest a 20/50 SMA crossover on MSFT from 2010 to 2004",
    )
    .await;
    let cfg = r.config();
    assert_eq!(
        (cfg["start_date"].as_str(), cfg["end_date"].as_str()),
        (Some("2004-01-01"), Some("2010-12-31")),
        "{cfg}"
    );
    assert!(
        r.answer
            .contains("the request names 2010 before 2004, so I read the period in date order"),
        "{}",
        r.answer
    );
}

/// With nothing configured, the answer states the costs, lots, shorting,
/// cash, price adjustment, annualisation and benchmark the run card
/// records, and the run card's assumptions are the rules the engine used.
#[tokio::test]
async fn a_backtest_answer_states_the_default_costs_the_run_used() {
    let home = tempfile::tempdir().unwrap();
    let r = run(
        home.path(),
        "Backtest a 20/50 SMA crossover on AAPL from 2005 to 2012",
    )
    .await;
    let card = r.card();
    let a = &card["assumptions"];
    let rules = &card["backtest"]["symbol_rules"][0]["rules"];
    for (key, rule) in [
        ("commission_rate", "fee_rate"),
        ("min_commission", "min_fee"),
        ("slippage", "slippage"),
        ("lot_size", "lot"),
        ("allow_short", "allow_short"),
    ] {
        assert_eq!(a[key], rules[rule], "{key}: {a}");
    }
    assert_eq!(a["benchmark"], card["backtest"]["benchmark"], "{a}");
    assert_eq!(a["initial_cash"], card["backtest"]["initial_cash"], "{a}");
    assert_eq!(
        r.backtest_output()["assumptions"]["slippage"],
        a["slippage"]
    );

    let slippage = a["slippage"].as_f64().unwrap();
    let commission = a["commission_rate"].as_f64().unwrap();
    let commission_said = if commission == 0.0 && a["min_commission"] == 0.0 {
        "no commission".to_string()
    } else {
        format!("commission {}", said(commission))
    };
    let benchmark = a["benchmark"].as_str().unwrap();
    for part in [
        "Assumptions: ".to_string(),
        commission_said,
        format!("slippage {}", said(slippage)),
        "whole shares".to_string(),
        "prices split- and dividend-adjusted".to_string(),
        format!(
            "annualized over {} bars a year",
            a["bars_per_year"].as_f64().unwrap()
        ),
        "benchmark ".to_string(),
    ] {
        assert!(r.answer.contains(&part), "{part} in {}", r.answer);
    }
    if benchmark != "equal_weight" {
        assert!(
            r.answer.contains(&format!("benchmark {benchmark}")),
            "{}",
            r.answer
        );
    }
    let md = std::fs::read_to_string(r.run_dir().join("run_card.md")).unwrap();
    assert!(
        md.contains("## Assumptions") && md.contains("- slippage: "),
        "{md}"
    );
}

/// `[backtest]` in config.toml fills what a call leaves out, for `run`
/// and `vibedesk backtest` alike; a cost the request names wins.
#[tokio::test]
async fn the_backtest_section_of_config_toml_sets_the_defaults() {
    let home = tempfile::tempdir().unwrap();
    write_config_toml(
        home.path(),
        "[backtest]\ncommission_rate = 0.0015\nmin_commission = 1\ninitial_cash = 50000\n",
    );
    let r = run(
        home.path(),
        "Backtest a 20/50 SMA crossover on MSFT from 2004 to 2010",
    )
    .await;
    let cfg = r.config();
    assert_eq!(cfg["commission_rate"], 0.0015, "{cfg}");
    assert_eq!(cfg["initial_cash"], 50000.0, "{cfg}");
    let a = &r.card()["assumptions"];
    assert_eq!(
        (a["commission_rate"].as_f64(), a["initial_cash"].as_f64()),
        (Some(0.0015), Some(50000.0))
    );
    assert_eq!(a["min_commission"].as_f64(), Some(1.0));
    let out = r.backtest_output();
    assert_eq!(
        out["assumptions"]["from_settings"],
        serde_json::json!(["commission_rate", "min_commission", "initial_cash"])
    );
    for part in [
        "commission 0.15 % (15 bp) of notional per fill, at least 1.00 per fill",
        "initial cash 50000.00",
        "From `[backtest]` in config.toml: commission_rate, min_commission, initial_cash.",
    ] {
        assert!(r.answer.contains(part), "{part} in {}", r.answer);
    }

    let r = run(
        home.path(),
        "Backtest a 20/50 SMA crossover on MSFT from 2004 to 2010 with 0.2% commission",
    )
    .await;
    assert_eq!(r.config()["commission_rate"], 0.002);
    assert!(
        r.answer.contains(&format!("commission {}", said(0.002))),
        "{}",
        r.answer
    );

    // `vibedesk backtest` reads the same section.
    let dir = home.path().join("cli-run");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.json"),
        r#"{"codes": ["IBM"], "start_date": "2005-01-01", "end_date": "2006-12-31", "source": "embedded", "strategy": "buy_and_hold"}"#,
    )
    .unwrap();
    let out = vibedesk(home.path())
        .args(["backtest", dir.to_str().unwrap(), "--full"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        read_json(&dir.join("config.json"))["commission_rate"],
        0.0015
    );
    assert_eq!(
        read_json(&dir.join("run_card.json"))["assumptions"]["commission_rate"],
        0.0015
    );
}

/// A mistyped or out-of-range `[backtest]` key stops every command with
/// the key, what is wrong and a suggestion.
#[tokio::test]
async fn a_bad_backtest_section_is_refused_with_a_suggestion() {
    let home = tempfile::tempdir().unwrap();
    write_config_toml(
        home.path(),
        "[backtest]\ncomission_rate = 0.001\nslippage = 3\n",
    );
    let out = vibedesk(home.path())
        .args(["run", "-p", "Backtest buy and hold of IBM in 2010"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for part in [
        "config.toml is not valid: [backtest]:",
        "`comission_rate`: unknown key; did you mean 'commission_rate'?",
        "`slippage`: must be ≥ 0 and ≤ 0.5, got 3",
    ] {
        assert!(err.contains(part), "{part} in {err}");
    }
}

/// "Remember that I use 10 bp commission", then a backtest that names no
/// cost: the run's config and the answer use 10 bp and say where it came
/// from; a cost the request names wins over the memory.
#[tokio::test]
async fn a_remembered_commission_is_used_and_said() {
    let home = tempfile::tempdir().unwrap();
    let saved = run_with(
        home.path(),
        "Remember that I use 10 bp commission",
        &["--yes"],
    )
    .await;
    assert!(saved.answer.contains("Saved"), "{}", saved.answer);

    let r = run(
        home.path(),
        "Backtest buy and hold of IBM from 2005 to 2012",
    )
    .await;
    let cfg = r.config();
    assert_eq!(cfg["commission_rate"].as_f64(), Some(0.001), "{cfg}");
    assert_eq!(
        r.card()["assumptions"]["commission_rate"].as_f64(),
        Some(0.001)
    );
    for part in [
        "commission 0.10 % (10 bp) of notional per fill",
        "Costs: commission 0.10 % (10 bp) from your memory 'I use 10 bp commission'",
    ] {
        assert!(r.answer.contains(part), "{part} in {}", r.answer);
    }

    let r = run(
        home.path(),
        "Backtest buy and hold of IBM from 2005 to 2012 with 0.3% commission",
    )
    .await;
    assert_eq!(r.config()["commission_rate"].as_f64(), Some(0.003));
    assert!(!r.answer.contains("from your memory"), "{}", r.answer);
}

/// "Sweep …" runs one `sweep` (never a single backtest quietly standing in
/// for it): the ranges as asked, each symbol alone, an out-of-sample window,
/// a remembered cost in every cell, and an answer that says what it chose.
#[tokio::test]
async fn a_sweep_request_runs_one_sweep_with_its_ranges_and_says_its_choices() {
    let home = tempfile::tempdir().unwrap();
    run_with(
        home.path(),
        "Remember that I use 10 bp commission",
        &["--yes"],
    )
    .await;
    let r = run(
        home.path(),
        "sweep the SMA crossover fast 5 to 20 and slow 50 to 150 on AAPL, MSFT from 2005 to 2012",
    )
    .await;
    let tools: Vec<&str> = r
        .events
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .filter_map(|e| e["tool"].as_str())
        .collect();
    assert_eq!(tools, ["sweep"], "{:?}", r.events);
    let done = r
        .events
        .iter()
        .find(|e| e["type"] == "tool_call_finished")
        .unwrap();
    assert_eq!(done["status"], "ok", "{done}");
    let out = &done["output"];
    // §18.8: no step named, so about six values ending on the bound asked:
    // fast 5, 8, …, 20 (step 3) × slow 50, 70, …, 150 (step 20), all with
    // fast < slow, for each of the two symbols.
    assert_eq!(out["parameter_sets"], 6 * 6, "{out}");
    assert_eq!(out["cells"], 6 * 6 * 2, "{out}");
    assert_eq!(
        out["windows"],
        serde_json::json!(["in_sample", "out_of_sample"])
    );
    assert_eq!(out["ranked_out_of_sample"], true);

    let runs = home.path().join("data/runs");
    // The default out is named by the plan's hash (§18.7).
    let plan = std::fs::read_dir(&runs)
        .unwrap()
        .filter_map(|d| d.ok())
        .filter_map(|d| std::fs::read_dir(d.path().join("sweep")).ok())
        .flat_map(|dir| {
            dir.filter_map(|e| e.ok())
                .map(|e| e.path().join("plan.json"))
        })
        .find(|p| p.exists())
        .expect("the sweep's plan");
    let spec = read_json(&plan)["spec"].clone();
    assert_eq!(
        spec["base"]["commission_rate"].as_f64(),
        Some(0.001),
        "{spec}"
    );
    assert_eq!(spec["universe"], serde_json::json!(["AAPL", "MSFT"]));
    let split = &spec["split"];
    assert_eq!(split["in_sample"][0], "2005-01-01");
    assert_eq!(split["out_of_sample"][1], "2012-12-31");

    for part in [
        "## Parameter sweep: 72 cells",
        "Deflated Sharpe of the best cell for the",
        "grid fast 5 to 20 step 3 × slow 50 to 150 step 20",
        "each of AAPL, MSFT run alone",
        "cells ranked by the out-of-sample result",
        "from your memory 'I use 10 bp commission'",
    ] {
        assert!(r.answer.contains(part), "{part} in {}", r.answer);
    }
    assert!(
        r.answer.contains(&format!(
            "in-sample 2005-01-01 to {}, out-of-sample {} to 2012-12-31",
            split["in_sample"][1].as_str().unwrap(),
            split["out_of_sample"][0].as_str().unwrap()
        )),
        "{}",
        r.answer
    );
}

/// The output of the run's one `technical_indicator` call.
fn indicator_output(r: &Run) -> &Value {
    let done = r
        .events
        .iter()
        .find(|e| e["type"] == "tool_call_finished" && e["tool"] == "technical_indicator")
        .unwrap_or_else(|| panic!("no indicator ran: {:?}", r.events));
    assert_eq!(done["status"], "ok", "{done}");
    &done["output"]
}

/// "During 2008" means within 2008 (issue 36 item 3): the answer leads
/// with the drawdown measured within the year, names its peak and trough,
/// and says that the deeper running-peak figure starts before the year.
#[tokio::test]
async fn a_drawdown_during_a_year_is_measured_within_it_and_names_its_dates() {
    let home = tempfile::tempdir().unwrap();
    let r = run(home.path(), "SPY's maximum drawdown during 2008").await;
    let p = &indicator_output(&r)["period"];
    let w = &p["max_drawdown_window"];
    let depth = w["depth"].as_f64().unwrap();
    let said = format!(
        "**Max drawdown of SPY within 2008-01-02 to 2008-12-31: {:.2} % from the peak of {} to the trough of {}, not recovered by 2008-12-31.**",
        depth * 100.0,
        w["peak"].as_str().unwrap(),
        w["trough"].as_str().unwrap()
    );
    assert!(r.answer.contains(&said), "{said} in {}", r.answer);
    assert!((-0.50..-0.45).contains(&depth), "{depth}");
    let e = &p["drawdown_from_earlier_peak"];
    let before = format!(
        "the deepest drawdown was {:.2} % from the peak of {}",
        e["depth"].as_f64().unwrap() * 100.0,
        e["peak"].as_str().unwrap()
    );
    assert!(r.answer.contains(&before), "{before} in {}", r.answer);
    assert!(
        r.answer
            .contains("that peak lies before 2008-01-02, so it is not a drawdown within the range"),
        "{}",
        r.answer
    );
    assert!(e["peak"].as_str().unwrap().starts_with("2007-"), "{e}");

    // A return and a volatility over a period are the period's own too.
    let r = run(home.path(), "SPY's return during 2008").await;
    let p = &indicator_output(&r)["period"];
    let said = format!(
        "**Return of SPY over 2008-01-02 to 2008-12-31: {:.2} % (close of {} to close of 2008-12-31).**",
        p["total_return"].as_f64().unwrap() * 100.0,
        p["return_from"].as_str().unwrap()
    );
    assert!(r.answer.contains(&said), "{said} in {}", r.answer);
    let r = run(home.path(), "volatility of QQQ in 2011").await;
    let p = &indicator_output(&r)["period"];
    let said = format!(
        "**Volatility of QQQ over 2011-01-03 to 2011-12-30, annualized: {:.2} % (sample standard deviation of the {} daily returns × √252).**",
        p["annualized_volatility"].as_f64().unwrap() * 100.0,
        p["daily_returns"]
    );
    assert!(r.answer.contains(&said), "{said} in {}", r.answer);
}
