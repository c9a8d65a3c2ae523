//! The time-series tools (docs §16) through the real binary: served by
//! `vibedesk mcp serve` with their generated schemas, answering with the
//! library's numbers on the embedded data, and a bad argument is an
//! `isError` result naming what to give.

use chrono::NaiveDate;
use serde_json::{Value, json};

use crate::quant_tools::mcp_session;
use vibedesk::research::data::embedded;
use vibedesk::research::timeseries::{
    Autolag, ErrorDist, GarchSpec, Trend, engle_granger, family_inference, fit_family, fit_garch,
    garch_inference, johansen,
};

fn call(name: &str, arguments: Value) -> Value {
    json!({"method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

fn day(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

/// Equal up to JSON's text round trip.
fn same(served: &Value, ours: f64) -> bool {
    let v = served.as_f64().unwrap();
    (v - ours).abs() <= 4.0 * f64::EPSILON * ours.abs().max(1e-300)
}

fn closes(sym: &str, start: &str, end: &str) -> Vec<f64> {
    embedded::load(sym, Some(day(start)), Some(day(end)))
        .unwrap()
        .bars
        .close
}

#[tokio::test]
async fn mcp_serve_offers_and_runs_the_time_series_tools() {
    let home = tempfile::tempdir().unwrap();
    let answers = mcp_session(
        home.path(),
        &[
            json!({"method": "tools/list"}),
            call(
                "stat_test",
                json!({"test": "engle_granger", "symbols": ["KO", "PEP"], "start": "2010-01-01", "end": "2015-12-31"}),
            ),
            call(
                "volatility_model",
                json!({"symbol": "SPY", "model": "garch", "start": "2010-01-01", "end": "2016-12-31"}),
            ),
            call(
                "stat_test",
                json!({"test": "adf", "series": {"x": [1.0, 2.0]}}),
            ),
        ],
    )
    .await;
    let tools = answers[0]["result"]["tools"].as_array().unwrap();
    for name in ["stat_test", "volatility_model"] {
        let t = tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} is served"));
        assert_eq!(t["annotations"]["readOnlyHint"], true, "{t}");
        assert_eq!(t["inputSchema"]["type"], "object");
    }

    // The served test is the library's on the embedded log closes.
    let eg = &answers[1]["result"]["structuredContent"];
    let ko: Vec<f64> = closes("KO", "2010-01-01", "2015-12-31")
        .iter()
        .map(|c| c.ln())
        .collect();
    let pep: Vec<f64> = closes("PEP", "2010-01-01", "2015-12-31")
        .iter()
        .map(|c| c.ln())
        .collect();
    let r = engle_granger(&ko, &pep, Trend::Constant, Autolag::Aic, None).unwrap();
    assert!(same(&eg["statistic"], r.statistic), "{eg}");
    assert!(same(&eg["p_value"], r.p_value), "{eg}");
    assert!(same(&eg["hedge_ratio"], r.hedge_ratio), "{eg}");
    assert_eq!(eg["used_lag"], r.used_lag);

    // GARCH on SPY's returns in percent over the range.
    let g = &answers[2]["result"]["structuredContent"];
    let c = closes("SPY", "2010-01-01", "2016-12-31");
    let pct: Vec<f64> = c.windows(2).map(|w| 100.0 * (w[1] / w[0] - 1.0)).collect();
    let fit = fit_garch(&pct).unwrap();
    assert!(same(&g["alpha"], fit.params.alpha), "{g}");
    assert!(same(&g["loglik"], fit.loglik), "{g}");
    assert_eq!(g["forecast"].as_array().unwrap().len(), 10);
    // The served standard errors are the library's at the fit's estimates.
    let inf = garch_inference(&pct, &fit.params).unwrap();
    for (i, row) in g["parameters"].as_array().unwrap().iter().enumerate() {
        assert!(same(&row["std_err"], inf.std_err[i]), "{row}");
        assert!(
            same(&row["p_value"], inf.p_value[i]) || inf.p_value[i] == 0.0,
            "{row}"
        );
    }

    let bad = &answers[3]["result"];
    assert_eq!(bad["isError"], true, "{bad}");
    let text = bad["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("at least 10 observations"), "{text}");
}

/// The final answer of `vibedesk run --json -p PROMPT` offline, and the
/// tools called.
async fn ask(prompt: &str) -> (String, Vec<Value>) {
    let home = tempfile::tempdir().unwrap();
    let out = crate::support::harness::vibedesk(home.path())
        .args(["run", "--json", "-p", prompt])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{prompt}: {stdout}");
    let evs: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let calls: Vec<Value> = evs
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .cloned()
        .collect();
    let answer = evs.iter().rfind(|e| e["type"] == "answer").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    (answer, calls)
}

/// The value cell of the first table row whose first cell is `label`.
fn cell(text: &str, label: &str) -> String {
    text.lines()
        .find(|l| l.starts_with(&format!("| {label} |")))
        .unwrap_or_else(|| panic!("no row {label} in:\n{text}"))
        .split('|')
        .nth(2)
        .unwrap()
        .trim()
        .to_string()
}

#[tokio::test]
async fn the_planner_tests_ko_pep_for_cointegration_and_states_the_inputs() {
    let (answer, calls) = ask("is KO/PEP cointegrated 2010–2015").await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["tool"], "stat_test");
    let logs = |s: &str| -> Vec<f64> {
        closes(s, "2010-01-01", "2015-12-31")
            .iter()
            .map(|c| c.ln())
            .collect()
    };
    let r = engle_granger(
        &logs("KO"),
        &logs("PEP"),
        Trend::Constant,
        Autolag::Aic,
        None,
    )
    .unwrap();
    assert_eq!(
        cell(&answer, "KO/PEP Engle–Granger statistic"),
        format!("{:.4}", r.statistic)
    );
    assert_eq!(
        cell(&answer, "KO/PEP Engle–Granger p-value"),
        format!("{:.4}", r.p_value)
    );
    assert_eq!(
        cell(
            &answer,
            "KO/PEP hedge ratio (Engle–Granger, β of the second leg)"
        ),
        format!("{:.4}", r.hedge_ratio)
    );
    for want in [
        "natural logs of the adjusted closes on the 1510 dates every series traded, 2010-01-04 to 2015-12-31",
        "regression with a constant (c, the default)",
        "lag chosen by AIC",
        "MacKinnon (1994) p-value",
    ] {
        assert!(answer.contains(want), "{want} in:\n{answer}");
    }
    let verdict = if r.p_value < 0.05 {
        "are cointegrated at 5 %"
    } else {
        "no cointegration at 5 %"
    };
    assert!(answer.contains(verdict), "{answer}");
}

#[tokio::test]
async fn the_planner_runs_johansen_on_three_names_and_reads_the_rank() {
    let (answer, calls) = ask("Johansen test on KO, PEP and PG 2010-2015").await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["tool"], "stat_test");
    let logs = |s: &str| -> Vec<f64> {
        closes(s, "2010-01-01", "2015-12-31")
            .iter()
            .map(|c| c.ln())
            .collect()
    };
    let r = johansen(&[logs("KO"), logs("PEP"), logs("PG")], Trend::Constant, 1).unwrap();
    assert_eq!(
        cell(
            &answer,
            "KO/PEP/PG cointegration rank at 5 % (Johansen trace)"
        ),
        r.rank_trace.to_string()
    );
    assert_eq!(
        cell(&answer, "KO/PEP/PG Johansen trace (r = 0) statistic"),
        format!("{:.4}", r.trace[0])
    );
    assert!(answer.contains("| rank ≤ 2: eigenvalue;"), "{answer}");
    assert!(answer.contains("no p-value"), "{answer}");
}

#[tokio::test]
async fn the_planner_forecasts_spy_volatility_with_garch_and_states_the_inputs() {
    let (answer, calls) = ask("GARCH vol forecast for SPY").await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["tool"], "volatility_model");
    // The last 2,520 returns of the embedded SPY, in percent.
    let c = closes("SPY", "2000-01-01", "2017-12-31");
    let c = &c[c.len() - 2521..];
    let pct: Vec<f64> = c.windows(2).map(|w| 100.0 * (w[1] / w[0] - 1.0)).collect();
    let fit = fit_garch(&pct).unwrap();
    assert_eq!(cell(&answer, "α"), format!("{:.4}", fit.params.alpha));
    assert_eq!(cell(&answer, "β"), format!("{:.4}", fit.params.beta));
    let inf = garch_inference(&pct, &fit.params).unwrap();
    assert!(
        cell(&answer, "robust standard errors (t)").contains(&format!(
            "beta {:.4} (t {:.2})",
            inf.std_err[3], inf.t_stat[3]
        )),
        "{answer}"
    );
    let day10 = (252.0 * fit.forecast(10)[9]).sqrt() / 100.0;
    assert_eq!(cell(&answer, "10"), format!("{:.2} %", day10 * 100.0));
    for want in [
        "no start given: the last 2520 daily returns (ten years)",
        "2520 daily returns; horizon 10 days",
        "returns in percent",
        "annualized as √(252·σ²)/100",
    ] {
        assert!(answer.contains(want), "{want} in:\n{answer}");
    }
}

#[tokio::test]
async fn the_planner_fits_gjr_garch_and_t_errors_and_names_them() {
    let (answer, calls) = ask("GJR GARCH of SPY 2005-2015").await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["tool"], "volatility_model");
    let c = closes("SPY", "2005-01-01", "2015-12-31");
    let pct: Vec<f64> = c.windows(2).map(|w| 100.0 * (w[1] / w[0] - 1.0)).collect();
    let spec = GarchSpec {
        gjr: true,
        dist: ErrorDist::Normal,
    };
    let fit = fit_family(&pct, spec).unwrap();
    let inf = family_inference(&pct, spec, &fit.params).unwrap();
    assert!(
        answer.starts_with("## GJR-GARCH (normal errors) volatility of SPY"),
        "{answer}"
    );
    assert_eq!(
        cell(&answer, "γ (leverage: extra α after a fall)"),
        format!("{:.4}", fit.params[3])
    );
    assert!(
        cell(&answer, "robust standard errors (t)").contains(&format!(
            "gamma {:.4} (t {:.2})",
            inf.std_err[3], inf.t_stat[3]
        )),
        "{answer}"
    );
    assert_eq!(
        cell(&answer, "persistence α + γ/2 + β"),
        format!("{:.4}", fit.persistence())
    );
    assert!(answer.contains("GJR-GARCH(1,1,1) as arch's"), "{answer}");

    let (answer, calls) = ask("GARCH with t errors of AAPL").await;
    assert_eq!(calls[0]["tool"], "volatility_model");
    let c = closes("AAPL", "2000-01-01", "2017-12-31");
    let c = &c[c.len() - 2521..];
    let pct: Vec<f64> = c.windows(2).map(|w| 100.0 * (w[1] / w[0] - 1.0)).collect();
    let spec = GarchSpec {
        gjr: false,
        dist: ErrorDist::StudentT,
    };
    let fit = fit_family(&pct, spec).unwrap();
    let inf = family_inference(&pct, spec, &fit.params).unwrap();
    assert!(
        answer.starts_with("## GARCH (Student-t errors) volatility of AAPL"),
        "{answer}"
    );
    assert_eq!(
        cell(&answer, "ν (Student-t degrees of freedom)"),
        format!("{:.4}", fit.params[4])
    );
    assert!(
        cell(&answer, "robust standard errors (t)").contains(&format!(
            "nu {:.4} (t {:.2})",
            inf.std_err[4], inf.t_stat[4]
        )),
        "{answer}"
    );
    assert!(answer.contains("standardised Student-t"), "{answer}");
}
