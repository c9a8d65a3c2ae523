//! The quant tools in the agent and the teams (docs §15.7, §14.7), through
//! the real binary offline: the planner answers the plain requests with
//! the inputs stated, `risk_committee` rates with `risk_report`'s expected
//! shortfall, `portfolio_review` reads `portfolio_optimize`'s risk shares
//! and minimum-variance mix, and `options_desk` prices and stresses a
//! straddle and decides by its rule. Expected numbers are recomputed here
//! from the embedded data with the library.

use std::path::Path;
use std::process::Stdio;

use chrono::NaiveDate;
use serde_json::Value;

use vibedesk::research::data::{Bars, embedded, rates};
use vibedesk::research::options::{OptionInputs, OptionKind, black_scholes};
use vibedesk::research::portfolio::{Method, OptimizeOptions, optimize};
use vibedesk::research::returns::{aligned_returns, realised_volatility};
use vibedesk::research::risk::risk_report;

fn day(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

fn bars(sym: &str, start: &str, end: &str) -> Bars {
    embedded::load(sym, Some(day(start)), Some(day(end)))
        .unwrap()
        .bars
}

/// `vibedesk ARGS` offline in a fresh home: stdout, after checking it
/// exited 0.
async fn run(home: &Path, args: &[&str]) -> String {
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

/// The final answer of `vibedesk run --json -p PROMPT`, and the tools called.
async fn ask(prompt: &str) -> (String, Vec<Value>) {
    let home = tempfile::tempdir().unwrap();
    let out = run(home.path(), &["run", "--json", "-p", prompt]).await;
    let evs: Vec<Value> = out
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

fn pct(x: f64) -> String {
    format!("{:.2} %", x * 100.0)
}

#[tokio::test]
async fn the_planner_prices_a_call_on_a_symbol_and_states_the_inputs() {
    let (answer, calls) = ask("price a 3-month 110 call on AAPL").await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["tool"], "option_price");
    // The inputs, recomputed: AAPL's last embedded close, its 252-day
    // realised volatility, the 3-month Treasury rate carried to that date.
    let b = bars("AAPL", "2016-01-01", "2017-12-31");
    let last = *b.dates.last().unwrap();
    let spot = *b.close.last().unwrap();
    let (vol, _) = realised_volatility(&b.close, 252).unwrap();
    let y = rates::three_month(last).unwrap().unwrap().value;
    let rate = 2.0 * (1.0 + y / 2.0).ln();
    let g = black_scholes(&OptionInputs {
        kind: OptionKind::Call,
        spot,
        strike: 110.0,
        expiry_years: 0.25,
        volatility: vol,
        rate,
        dividend_yield: 0.0,
    })
    .unwrap();
    assert_eq!(
        cell(&answer, "price"),
        format!("{:.4}", g.price),
        "{answer}"
    );
    assert_eq!(
        cell(&answer, "rho (per 1.00 of rate)"),
        format!("{:.4}", g.rho)
    );
    for want in [
        format!("spot {spot:.2} (AAPL adjusted close {spot} on {last})"),
        "strike 110.00 (given)".to_string(),
        "expiry 0.25 years (as asked)".to_string(),
        format!("volatility {}", pct(vol)),
        "252 daily returns".to_string(),
        format!("rate {} continuous (3-month Treasury", pct(rate)),
        "dividend yield 0.00 % (not given, so none)".to_string(),
    ] {
        assert!(answer.contains(&want), "{want} in:\n{answer}");
    }
}

#[tokio::test]
async fn the_planner_optimizes_for_minimum_variance_over_two_years() {
    let (answer, calls) =
        ask("optimize AAPL, MSFT, JPM, XOM and KO for minimum variance over 2015–2016").await;
    assert_eq!(calls[0]["tool"], "portfolio_optimize");
    let syms = ["AAPL", "MSFT", "JPM", "XOM", "KO"];
    let all: Vec<Bars> = syms
        .iter()
        .map(|s| bars(s, "2015-01-01", "2016-12-31"))
        .collect();
    let named: Vec<(String, &Bars)> = syms.iter().map(|s| s.to_string()).zip(&all).collect();
    let a = aligned_returns(&named).unwrap();
    let p = optimize(
        &a.columns,
        &a.names,
        &OptimizeOptions::new(Method::MinVariance),
    )
    .unwrap();
    for (name, w) in a.names.iter().zip(&p.weights) {
        let row = answer
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("{name} in {answer}"));
        assert!(row.contains(&format!("| {} |", pct(*w))), "{row}");
    }
    assert_eq!(cell(&answer, "volatility (annualized)"), pct(p.volatility));
    assert!(
        answer.contains(&format!(
            "on the {} days every holding traded, {} to {}",
            a.columns[0].len(),
            a.dates[0],
            a.dates.last().unwrap()
        )),
        "{answer}"
    );
    assert!(answer.contains("mean daily return × 252") && answer.contains("the default bounds"));
}

#[tokio::test]
async fn the_planner_gives_the_expected_shortfall_of_an_equal_weight_book() {
    let (answer, calls) = ask("99 % ES of an equal-weight SPY/TLT book in 2008").await;
    assert_eq!(calls[0]["tool"], "risk_report");
    let spy = bars("SPY", "2008-01-01", "2008-12-31");
    let tlt = bars("TLT", "2008-01-01", "2008-12-31");
    let a = aligned_returns(&[("SPY".into(), &spy), ("TLT".into(), &tlt)]).unwrap();
    let rep = risk_report(&a.columns, &[0.5, 0.5], 0.99, 1).unwrap();
    assert_eq!(
        cell(&answer, "expected shortfall, historical"),
        pct(rep.es_historical)
    );
    assert_eq!(cell(&answer, "VaR, historical"), pct(rep.var_historical));
    assert_eq!(
        cell(&answer, "VaR, Cornish–Fisher"),
        pct(rep.var_cornish_fisher)
    );
    assert!(
        answer.starts_with("## equal-weight SPY/TLT book: 1-day risk at 99 % confidence"),
        "{answer}"
    );
    assert!(
        answer.contains("weights equal; confidence 99 %; horizon 1 day(s)"),
        "{answer}"
    );
    assert!(answer.contains("2008-01-02 to 2008-12-31"), "{answer}");
}

/// `vibedesk swarm run NAME --var …`: the report.
async fn swarm(name: &str, vars: &[(&str, &str)]) -> String {
    let home = tempfile::tempdir().unwrap();
    let mut args = vec!["swarm".to_string(), "run".to_string(), name.to_string()];
    for (k, v) in vars {
        args.push("--var".into());
        args.push(format!("{k}={v}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(home.path(), &args).await
}

fn conclusion(report: &str) -> &str {
    let at = report.find("## Conclusion").unwrap();
    let end = report.find("\n## Members\n").unwrap_or(report.len());
    &report[at..end]
}

/// The value of the key-figures row `label` in a report (first found).
fn figure(report: &str, label: &str) -> String {
    cell(report, label)
}

/// A percentage figure's number ("11.29 %" → 11.29).
fn number(shown: &str) -> f64 {
    shown.trim_end_matches(" %").parse().unwrap()
}

#[tokio::test]
async fn the_options_desk_prices_stresses_and_decides_by_its_rule() {
    let report = swarm("options_desk", &[("target", "IBM")]).await;
    let c = conclusion(&report);
    let heading = regex::Regex::new(r"(?m)^## Decision: (long volatility favoured|long volatility not favoured|neutral) \(realised 20-day volatility (above|below|in line with) the realised 252-day volatility the straddle was priced at\)$")
        .unwrap()
        .captures(c)
        .unwrap_or_else(|| panic!("a decision in:\n{c}"));
    // The pricer's call, recomputed from IBM's data on 2012-12-31.
    let b = bars("IBM", "2011-01-01", "2012-12-31");
    let spot = *b.close.last().unwrap();
    let (vol, _) = realised_volatility(&b.close, 252).unwrap();
    let y = rates::three_month(day("2012-12-31"))
        .unwrap()
        .unwrap()
        .value;
    let call = black_scholes(&OptionInputs {
        kind: OptionKind::Call,
        spot,
        strike: spot,
        expiry_years: 0.25,
        volatility: vol,
        rate: 2.0 * (1.0 + y / 2.0).ln(),
        dividend_yield: 0.0,
    })
    .unwrap();
    let label = format!("IBM call(K {spot:.2}, 0.25 y)");
    assert_eq!(
        figure(&report, &format!("{label} price (Black–Scholes–Merton)")),
        format!("{:.4}", call.price)
    );
    let priced = number(&figure(&report, &format!("{label} volatility priced")));
    assert_eq!(format!("{priced:.2} %"), pct(vol));
    // The rule, applied here to the figures the head cites.
    let recent = number(&figure(&report, "IBM annualized volatility(20) latest"));
    let ratio = recent / priced;
    let word = if ratio >= 1.2 {
        "above"
    } else if ratio <= 0.8 {
        "below"
    } else {
        "in line with"
    };
    assert_eq!(&heading[2], word, "{c}");
    assert!(c.contains(&format!("= {ratio:.2} →")), "{c}");
    // The straddle's stress: a premium of both options, bounded loss.
    let straddle = format!("IBM straddle(K {spot:.2}/{spot:.2}, 0.25 y)");
    let premium: f64 = figure(&report, &format!("{straddle} net premium"))
        .parse()
        .unwrap();
    let put = black_scholes(&OptionInputs {
        kind: OptionKind::Put,
        ..OptionInputs {
            kind: OptionKind::Call,
            spot,
            strike: spot,
            expiry_years: 0.25,
            volatility: vol,
            rate: 2.0 * (1.0 + y / 2.0).ln(),
            dividend_yield: 0.0,
        }
    })
    .unwrap();
    assert_eq!(
        format!("{premium:.2}"),
        format!("{:.2}", call.price + put.price)
    );
    assert_eq!(
        figure(&report, &format!("{straddle} max loss")),
        format!("{premium:.2}")
    );
    assert_eq!(
        figure(&report, &format!("{straddle} max profit")),
        "unbounded"
    );
    assert!(c.contains("Premium paid (the most it can lose):"), "{c}");
    assert!(
        c.contains("The stock's daily tail: IBM 1-day 99 % ES (historical)"),
        "{c}"
    );
}

#[tokio::test]
async fn the_risk_committee_rates_the_expected_shortfall_from_risk_report() {
    let report = swarm("risk_committee", &[("target", "IBM")]).await;
    let b = bars("IBM", "2006-01-01", "2012-12-31");
    let a = aligned_returns(&[("IBM".into(), &b)]).unwrap();
    let rep = risk_report(&a.columns, &[1.0], 0.99, 1).unwrap();
    let es = figure(&report, "IBM 1-day 99 % ES (historical)");
    assert_eq!(es, pct(rep.es_historical));
    let c = conclusion(&report);
    let line = c
        .lines()
        .find(|l| l.contains("expected shortfall limit 5 %: IBM 1-day 99 % ES (historical)"))
        .unwrap_or_else(|| panic!("the ES limit in:\n{c}"));
    let breached = rep.es_historical >= 0.05;
    assert!(
        line.ends_with(if breached { "breached" } else { "within" }),
        "{line}"
    );
    assert!(c.contains("of 4 limits breached)"), "{c}");
}

#[tokio::test]
async fn the_portfolio_review_reads_where_the_equal_weight_risk_sits() {
    let report = swarm("portfolio_review", &[]).await;
    let syms = ["AAPL", "MSFT", "IBM"];
    let all: Vec<Bars> = syms
        .iter()
        .map(|s| bars(s, "2005-01-01", "2012-12-31"))
        .collect();
    let named: Vec<(String, &Bars)> = syms.iter().map(|s| s.to_string()).zip(&all).collect();
    let a = aligned_returns(&named).unwrap();
    let mv = optimize(
        &a.columns,
        &a.names,
        &OptimizeOptions::new(Method::MinVariance),
    )
    .unwrap();
    let ew = optimize(
        &a.columns,
        &a.names,
        &OptimizeOptions::new(Method::EqualWeight),
    )
    .unwrap();
    for (i, s) in syms.iter().enumerate() {
        assert_eq!(
            figure(&report, &format!("{s} min_variance weight")),
            pct(mv.weights[i])
        );
        assert_eq!(
            figure(&report, &format!("{s} equal_weight risk contribution")),
            pct(ew.risk_contributions[i])
        );
    }
    let top = (0..3)
        .max_by(|x, y| ew.risk_contributions[*x].total_cmp(&ew.risk_contributions[*y]))
        .unwrap();
    let c = conclusion(&report);
    assert!(
        c.contains(&format!(
            "- The book's risk sits in {}: {} equal_weight risk contribution",
            syms[top], syms[top]
        )),
        "{c}"
    );
    assert!(c.contains("- The minimum-variance mix: "), "{c}");
}
