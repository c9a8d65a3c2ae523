//! factor_ic, regression and overfitting (docs §17) through the real
//! binary: served by `vibedesk mcp serve` with their generated schemas,
//! answering with the goldens' numbers (tests/golden/stats/factor.json),
//! and answering the offline planner's plain requests through
//! `vibedesk run`.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use chrono::NaiveDate;
use serde_json::{Value, json};
use vibedesk::research::data::embedded;
use vibedesk::research::factor::{IcOptions, factor_ic, indicator_panel};
use vibedesk::research::indicators::IndicatorSpec;
use vibedesk::research::overfitting::{SharpeMoments, expected_max_sharpe, psr};

use crate::quant_tools::{call, mcp_session};

const TOOLS: [&str; 3] = ["factor_ic", "regression", "overfitting"];

fn golden() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/stats/factor.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn near(served: &Value, want: &Value, tol: f64) -> bool {
    let (a, b) = (served.as_f64().unwrap(), want.as_f64().unwrap());
    (a - b).abs() <= tol * b.abs().max(1.0)
}

/// The three tools are served read-only with their schemas; 12-1 momentum
/// on the offline universe, AAPL's market beta and the deflated Sharpe
/// come back equal to the references'.
#[tokio::test]
async fn mcp_serve_offers_and_runs_the_edge_tools() {
    let g = golden();
    let home = tempfile::tempdir().unwrap();
    let returns = &g["overfitting"]["returns"];
    let answers = mcp_session(
        home.path(),
        &[
            json!({"method": "tools/list"}),
            call(
                "factor_ic",
                json!({"factor": {"indicator": "momentum", "params": {"window": 252, "skip": 21}},
                       "start": "2010-01-01", "end": "2012-12-31"}),
            ),
            call(
                "regression",
                json!({"y": "AAPL", "x": ["ff:MktRF"], "start": "2010-01-01", "end": "2017-03-31", "hac_lags": 3}),
            ),
            call("overfitting", json!({"returns": returns, "trials": 50})),
            call("regression", json!({"y": "AAPL", "x": ["ff:MktRF"], "frequency": "daily"})),
        ],
    )
    .await;
    let tools = answers[0]["result"]["tools"].as_array().unwrap();
    for name in TOOLS {
        let t = tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} is served"));
        assert_eq!(t["annotations"]["readOnlyHint"], true, "{t}");
        assert_eq!(t["inputSchema"]["type"], "object");
    }

    let ic = &answers[1]["result"]["structuredContent"];
    assert!(ic.get("universe").is_some(), "{}", answers[1]);
    // GOOG (class C) starts in 2014: 105 of the 106 stocks have data.
    assert_eq!(ic["universe"].as_array().unwrap().len(), 105, "{ic}");
    assert!(
        ic["data"]["notes"]
            .to_string()
            .contains("left out: GOOG (2014-03-27"),
        "{ic}"
    );
    for (h, want) in ic["horizons"]
        .as_array()
        .unwrap()
        .iter()
        .zip(g["ic_market"]["expected"].as_array().unwrap())
    {
        for key in ["ic_mean", "ic_std", "hit_rate", "spread", "top_turnover"] {
            assert!(near(&h[key], &want[key], 1e-12), "{key}: {h} / {want}");
        }
        assert_eq!(
            h["dates_scored"].as_u64(),
            Some(want["ic"].as_array().unwrap().len() as u64)
        );
    }
    assert!(
        ic["data"]["notes"].to_string().contains("survivorship"),
        "{ic}"
    );

    let reg = &answers[2]["result"]["structuredContent"];
    let want = &g["regression_market"]["monthly"]["market"];
    assert!(
        near(
            &reg["coefficients"]["ff:MktRF"]["estimate"],
            &want["estimate"][1],
            1e-10
        ),
        "{reg}"
    );
    assert!(
        near(
            &reg["coefficients"]["ff:MktRF"]["std_error"],
            &want["std_error"][1],
            1e-10
        ),
        "{reg}"
    );
    assert_eq!(reg["excess_returns"], true);

    let o = &answers[3]["result"]["structuredContent"];
    assert_eq!(o["best"], g["overfitting"]["best"]);
    assert!(near(&o["dsr"], &g["overfitting"]["dsr_50"], 1e-12), "{o}");

    let bad = &answers[4]["result"];
    assert_eq!(bad["isError"], true, "{bad}");
    let text = bad["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("use frequency monthly"), "{text}");
}

// ---------------------------------------------------------------------------
// The offline planner and the teams (docs §17.4), through `vibedesk run`
// and `vibedesk swarm run`.

async fn vibedesk(home: &Path, args: &[&str]) -> String {
    let out = crate::support::harness::vibedesk(home)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The answer of `vibedesk run --json -p PROMPT` in `home` (a session to
/// continue, when given), the tools called and the session id.
async fn ask_in(home: &Path, prompt: &str, session: Option<&str>) -> (String, Vec<Value>, String) {
    let mut args = vec!["run", "--json", "-p", prompt];
    if let Some(s) = session {
        args.extend(["--session", s]);
    }
    let out = vibedesk(home, &args).await;
    let evs: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let calls = evs
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .cloned()
        .collect();
    let answer = evs.iter().rfind(|e| e["type"] == "answer").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    let session = evs[0]["session_id"].as_str().unwrap_or("").to_string();
    (answer, calls, session)
}

async fn ask(prompt: &str) -> (String, Vec<Value>) {
    let home = tempfile::tempdir().unwrap();
    let (a, c, _) = ask_in(home.path(), prompt, None).await;
    (a, c)
}

/// The cells of the first table row whose first cell is `label`.
fn row<'a>(text: &'a str, label: &str) -> Vec<&'a str> {
    text.lines()
        .find(|l| l.starts_with(&format!("| {label} |")))
        .unwrap_or_else(|| panic!("no row {label} in:\n{text}"))
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect()
}

fn day(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

#[tokio::test]
async fn the_planner_gives_the_ic_of_12_1_momentum_on_the_offline_universe() {
    let (answer, calls) = ask("IC of 12-1 momentum on the offline universe").await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["tool"], "factor_ic");
    // Recomputed: the 106 stocks over all the embedded data.
    let stocks: Vec<&str> = vibedesk::model::universe::all()
        .iter()
        .filter(|x| !x.etf)
        .map(|x| x.ticker)
        .collect();
    let bars: Vec<_> = stocks.iter().map(|t| embedded::bars(t).unwrap()).collect();
    let series: Vec<(&str, &_)> = stocks.iter().copied().zip(&bars).collect();
    let spec = IndicatorSpec::parse("momentum", &json!({"window": 252, "skip": 21})).unwrap();
    let panel = indicator_panel(&spec, &series, None, None).unwrap();
    let got = factor_ic(
        &panel,
        &IcOptions {
            horizons: vec![1, 5, 21],
            quantiles: 5,
            min_names: 3,
        },
    )
    .unwrap();
    let r = row(&answer, "21 days");
    assert_eq!(r[1], format!("{:.4}", got[2].ic_mean), "{answer}");
    assert_eq!(r[5], format!("{:.2}", got[2].t_stat_nw));
    for want in [
        "## Information coefficient of momentum(252/21) on 106 stocks",
        "factor 12-1 momentum: the return from 252 to 21 trading days back (21 a month) (indicator momentum, window 252, skip 21)",
        "universe 106 stocks (the offline market's stocks with data in the range: none was named)",
        "period 2000-01-03 to 2017-11-10 (4495 dates: all the data, none was named)",
        "forward returns over 1, 5, 21 trading days",
        "survivorship bias",
    ] {
        assert!(answer.contains(want), "{want} in:\n{answer}");
    }
}

#[tokio::test]
async fn the_planner_gives_aapls_beta_to_the_market_factor() {
    let g = golden();
    let (answer, calls) = ask("beta of AAPL to the market factor 2010–2017").await;
    assert_eq!(calls[0]["tool"], "regression");
    // The goldens' fit: 2010-01 to 2017-03 (the factors' last month), 3
    // lags (the rule of thumb for 87 months), statsmodels' numbers.
    let want = &g["regression_market"]["monthly"]["market"];
    let r = row(&answer, "beta to ff:MktRF");
    assert_eq!(
        r[1],
        format!("{:.4}", want["estimate"][1].as_f64().unwrap())
    );
    assert_eq!(
        r[2],
        format!("{:.4}", want["std_error"][1].as_f64().unwrap())
    );
    for want in [
        "y AAPL; x ff:MktRF; period 2010-01 to 2017-03 (87 monthly returns); Newey–West lags 3",
        "excess returns: Fama–French RF (the one-month T-bill)",
        "the Fama–French factors end 2017-03",
    ] {
        assert!(answer.contains(want), "{want} in:\n{answer}");
    }
}

#[tokio::test]
async fn the_planner_deflates_a_sharpe_named_or_just_backtested() {
    let (answer, calls) = ask("does a Sharpe of 1.4 over 3 years survive 50 trials").await;
    assert_eq!(calls[0]["tool"], "overfitting");
    let m = SharpeMoments {
        n: 756,
        mean: f64::NAN,
        std: f64::NAN,
        sharpe: 1.4 / 252f64.sqrt(),
        skewness: 0.0,
        kurtosis: 3.0,
    };
    let var = m.dispersion() / 755.0;
    let dsr = psr(&m, expected_max_sharpe(var, 50, 0.0));
    assert_eq!(
        row(&answer, "deflated Sharpe ratio (DSR)")[1],
        format!("{dsr:.4}")
    );
    assert!(answer.contains("trials 50;"), "{answer}");
    assert!(
        answer.contains("skewness 0 and kurtosis 3 (a normal's)"),
        "{answer}"
    );

    // "This Sharpe" with nothing to read: what it needs, no call.
    let (answer, calls) = ask("does this Sharpe survive 50 trials").await;
    assert!(calls.is_empty());
    assert!(
        answer.starts_with("To deflate a Sharpe ratio I need one"),
        "{answer}"
    );

    // After a backtest in the same session: that backtest's Sharpe and bars.
    let home = tempfile::tempdir().unwrap();
    let (bt, _, session) = ask_in(
        home.path(),
        "backtest a 20/50 SMA crossover on AAPL from 2005 to 2012",
        None,
    )
    .await;
    let sharpe = row(&bt, "Sharpe (annualized, rf 3-month T-bill)")[1].to_string();
    let bars: usize = row(&bt, "bars")[1].parse().unwrap();
    let (answer, calls, _) = ask_in(
        home.path(),
        "does this Sharpe survive 50 trials",
        Some(&session),
    )
    .await;
    assert_eq!(calls[0]["tool"], "overfitting");
    assert!(
        answer.contains(&format!(
            "a reported Sharpe of {sharpe} (annualised, ÷ √252 = "
        )) && answer.contains(&format!("over {} daily returns", bars - 1)),
        "{answer}"
    );
    assert!(
        answer.contains(
            "## Does the Sharpe of the last backtest (AAPL · sma_crossover) survive 50 trial(s)?"
        ),
        "{answer}"
    );
}

fn conclusion(report: &str) -> &str {
    let at = report.find("## Conclusion").unwrap();
    let end = report.find("\n## Members\n").unwrap_or(report.len());
    &report[at..end]
}

async fn swarm(name: &str, vars: &[(&str, &str)]) -> String {
    let home = tempfile::tempdir().unwrap();
    let mut args = vec!["swarm".to_string(), "run".to_string(), name.to_string()];
    for (k, v) in vars {
        args.push("--var".into());
        args.push(format!("{k}={v}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    vibedesk(home.path(), &args).await
}

/// The desk head deflates the best in-sample Sharpe for the rules the
/// desk tried: every in-sample Sharpe is a trial, the best's bars its
/// length; recomputed here from the figures the report shows.
#[tokio::test]
async fn the_quant_desk_reports_the_deflated_sharpe_of_its_best_rule() {
    let report = swarm("quant_strategy_desk", &[("target", "AAPL")]).await;
    let c = conclusion(&report);
    let period = "2005-01-01 to 2010-12-31";
    let sharpes: Vec<(String, f64)> = report
        .lines()
        .filter(|l| {
            l.starts_with("| AAPL ")
                && l.contains(" Sharpe (annualized, rf 3-month T-bill) |")
                && l.contains(period)
        })
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (
                cells[0].split(" Sharpe").next().unwrap().to_string(),
                cells[1].parse().unwrap(),
            )
        })
        .collect::<std::collections::BTreeMap<_, _>>()
        .into_iter()
        .collect();
    assert_eq!(sharpes.len(), 5, "{sharpes:?}");
    let (best, sr) = sharpes.iter().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
    let bars: f64 = report
        .lines()
        .find(|l| l.starts_with(&format!("| {best} bars |")))
        .unwrap()
        .split('|')
        .nth(2)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let trial: Vec<f64> = sharpes.iter().map(|s| s.1).collect();
    let var = vibedesk::research::stats::variance(&trial, 1) / 252.0;
    let m = SharpeMoments {
        n: bars as usize - 1,
        mean: f64::NAN,
        std: f64::NAN,
        sharpe: sr / 252f64.sqrt(),
        skewness: 0.0,
        kurtosis: 3.0,
    };
    let dsr = psr(&m, expected_max_sharpe(var, 5, 0.0));
    let line = c
        .lines()
        .find(|l| l.starts_with("- Deflated for the rules tried (docs §17.3): "))
        .unwrap_or_else(|| panic!("a deflated Sharpe in:\n{c}"));
    assert!(
        line.contains(&format!(
            "{best} deflated Sharpe ratio (5 trials) {dsr:.4} (`own`)"
        )),
        "{line}"
    );
    assert!(line.contains("reaches by luck (annualized)"), "{line}");
}

/// The momentum and reversal researchers measure their factor's IC with
/// factor_ic on the team's universe, and the lead cites both.
#[tokio::test]
async fn factor_research_measures_each_factors_ic() {
    let report = swarm("factor_research", &[]).await;
    let c = conclusion(&report);
    let universe = ["AAPL", "MSFT", "IBM", "GOOGL"];
    let bars: Vec<_> = universe
        .iter()
        .map(|t| embedded::bars(t).unwrap())
        .collect();
    let series: Vec<(&str, &_)> = universe.iter().copied().zip(&bars).collect();
    for (params, label) in [
        (json!({"window": 252, "skip": 21}), "momentum(252/21)"),
        (json!({"window": 21, "skip": 0}), "momentum(21/0)"),
    ] {
        let spec = IndicatorSpec::parse("momentum", &params).unwrap();
        let panel = indicator_panel(
            &spec,
            &series,
            Some(day("2006-01-01")),
            Some(day("2012-12-31")),
        )
        .unwrap();
        let got = factor_ic(
            &panel,
            &IcOptions {
                horizons: vec![1, 5, 21],
                quantiles: 2,
                min_names: 3,
            },
        )
        .unwrap();
        let want = format!(
            "AAPL+MSFT+IBM+GOOGL {label} 21-day IC mean {:.4}",
            got[2].ic_mean
        );
        assert!(c.contains(&want), "{want} in:\n{c}");
    }
    assert!(c.contains("- The momentum factor's rank IC: "), "{c}");
    assert!(
        c.contains("- The one-month return factor's rank IC (a reversal is a negative IC): "),
        "{c}"
    );
}

/// One Sharpe convention (docs §15.1.1): the same buy-and-hold of SPY over
/// the same dates has the same Sharpe in backtest, portfolio_optimize and
/// overfitting (excess over the 3-month T-bill), and `risk_free`
/// overrides it.
#[tokio::test]
async fn the_same_buy_and_hold_has_one_sharpe_in_every_tool() {
    let home = tempfile::tempdir().unwrap();
    let (start, end) = ("2005-03-01", "2007-12-31");
    let held = json!({"symbols": ["SPY"], "start": start, "end": end});
    let mut po = held.clone();
    po["method"] = json!("equal_weight");
    let mut po0 = po.clone();
    po0["risk_free"] = json!(0.0);
    let mut o0 = held.clone();
    o0["risk_free"] = json!(0.0);
    let answers = mcp_session(
        home.path(),
        &[
            call(
                "backtest",
                json!({"strategy": "buy_and_hold", "symbols": ["SPY"], "start": start, "end": end,
                       "commission_rate": 0.0, "slippage": 0.0}),
            ),
            call("portfolio_optimize", po),
            call("overfitting", held),
            call("portfolio_optimize", po0),
            call("overfitting", o0),
            call(
                "backtest",
                json!({"strategy": "buy_and_hold", "symbols": ["SPY"], "start": start, "end": end,
                       "commission_rate": 0.0, "slippage": 0.0, "risk_free": 0.0}),
            ),
        ],
    )
    .await;
    let out = |i: usize| answers[i]["result"]["structuredContent"].clone();
    let bt = out(0);
    assert_eq!(bt["metrics"]["risk_free"], "treasury_3m", "{}", answers[0]);
    let backtest = bt["metrics"]["sharpe"].as_f64().unwrap();
    let (p, o) = (out(1), out(2));
    let portfolio = p["sharpe"].as_f64().unwrap();
    let overfit = o["sharpe_annualized"].as_f64().unwrap();
    // The backtest buys at the first open and counts a first bar without
    // a return: the same Sharpe to within that day.
    assert!(
        (backtest - portfolio).abs() < 0.03,
        "{backtest} vs {portfolio}"
    );
    assert!((backtest - overfit).abs() < 0.03, "{backtest} vs {overfit}");
    for said in [&p["risk_free"], &o["risk_free"]] {
        assert!(
            said.as_str()
                .unwrap()
                .contains("3-month T-bill on the same dates"),
            "{said}"
        );
    }
    // The T-bill paid about 4 % a year then: risk_free 0 gives the raw
    // ratio, the same in both.
    let p0 = out(3)["sharpe"].as_f64().unwrap();
    let z0 = out(4)["sharpe_annualized"].as_f64().unwrap();
    assert!(p0 - portfolio > 0.2, "{p0} vs {portfolio}");
    assert!((p0 - z0).abs() < 0.01, "{p0} vs {z0}");
    // The backtest takes the same override and says so.
    let bt0 = out(5);
    assert_eq!(bt0["metrics"]["risk_free"], "given", "{}", answers[5]);
    let b0 = bt0["metrics"]["sharpe"].as_f64().unwrap();
    assert!((b0 - p0).abs() < 0.03, "{b0} vs {p0}");
}
