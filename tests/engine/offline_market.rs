//! The embedded offline market in use (docs §7.3, §7.5): SPY as the default
//! benchmark of US equity backtests and its honest fallbacks, the 3-month
//! Treasury yield as the risk-free rate of Sharpe and Sortino, and
//! `vibedesk data --list`. Expected values are derived from the embedded
//! data at test time, never copied from the output under test.

use std::path::Path;
use std::process::Command;

use chrono::NaiveDate;
use serde_json::{Value, json};
use vibedesk::research::backtest as bt;
use vibedesk::research::data::{embedded, factors, rates};

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");

fn d(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

fn offline() -> bt::RunOptions {
    bt::RunOptions {
        offline: true,
        ..bt::RunOptions::default()
    }
}

/// Runs `config` offline in a fresh run dir; the metrics and the run card.
async fn run(dir: &Path, name: &str, config: Value) -> (serde_json::Map<String, Value>, Value) {
    let run = dir.join(name);
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("config.json"), config.to_string()).unwrap();
    let summary = bt::run_in_dir(&run, &offline()).await.unwrap();
    let card: Value =
        serde_json::from_slice(&std::fs::read(run.join("run_card.json")).unwrap()).unwrap();
    (summary.scalars, card)
}

fn buy_and_hold(codes: &[&str], from: &str, to: &str) -> Value {
    json!({"codes": codes, "start_date": from, "end_date": to,
           "strategy": {"name": "buy_and_hold"}})
}

/// A symbol's close-to-close return over `[from, to]` in the embedded set.
fn held_return(sym: &str, from: &str, to: &str) -> f64 {
    let b = embedded::load(sym, Some(d(from)), Some(d(to)))
        .unwrap()
        .bars;
    b.close[b.len() - 1] / b.close[0] - 1.0
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

#[tokio::test]
async fn spy_is_the_default_benchmark_of_a_us_equity_backtest() {
    let dir = tempfile::tempdir().unwrap();
    let (m, card) = run(
        dir.path(),
        "aapl",
        buy_and_hold(&["AAPL"], "2010-01-01", "2012-12-31"),
    )
    .await;
    assert_eq!(m["benchmark"], "SPY", "{m:#?}");
    assert!(m.get("benchmark_note").is_none(), "SPY covers 2010-2012");
    assert_eq!(m["benchmark_ticker"], "SPY");
    // The benchmark's return is SPY's over the backtest's bars, from the
    // embedded closes.
    let spy = held_return("SPY", "2010-01-01", "2012-12-31");
    assert_eq!(m["benchmark_return"].as_f64().unwrap(), round6(spy));
    assert!((spy - held_return("AAPL", "2010-01-01", "2012-12-31")).abs() > 0.1);
    assert_eq!(card["backtest"]["benchmark"], "SPY");
    let md = std::fs::read_to_string(dir.path().join("aapl/run_card.md")).unwrap();
    assert!(md.contains("- benchmark: SPY\n"), "{md}");

    // Several US stocks and an ETF: still SPY.
    let (m, _) = run(
        dir.path(),
        "mix",
        buy_and_hold(&["MSFT", "XLK"], "2008-01-01", "2009-12-31"),
    )
    .await;
    assert_eq!(m["benchmark"], "SPY");
    // A named benchmark is used as given, and `equal_weight` asks for it.
    let mut cfg = buy_and_hold(&["IBM"], "2010-01-01", "2010-12-31");
    cfg["benchmark"] = json!("QQQ");
    let (m, _) = run(dir.path(), "qqq", cfg.clone()).await;
    assert_eq!(m["benchmark"], "QQQ");
    assert_eq!(
        m["benchmark_return"].as_f64().unwrap(),
        round6(held_return("QQQ", "2010-01-01", "2010-12-31"))
    );
    cfg["benchmark"] = json!("equal_weight");
    let (m, _) = run(dir.path(), "ew", cfg).await;
    assert_eq!(m["benchmark"], "equal_weight");
    assert!(
        m.get("benchmark_note").is_none(),
        "asked for: nothing to explain"
    );
    assert_eq!(
        m["benchmark_return"].as_f64().unwrap(),
        round6(held_return("IBM", "2010-01-01", "2010-12-31"))
    );
}

#[tokio::test]
async fn the_benchmark_falls_back_honestly_where_spy_does_not_reach() {
    let dir = tempfile::tempdir().unwrap();
    // Before SPY's first embedded bar: the equal weight, and why.
    let (m, card) = run(
        dir.path(),
        "early",
        buy_and_hold(&["AAPL"], "2001-01-01", "2004-12-31"),
    )
    .await;
    assert_eq!(m["benchmark"], "equal_weight");
    let note = m["benchmark_note"].as_str().unwrap();
    assert!(
        note.contains("2005-02-25") && note.contains("equal weight"),
        "{note}"
    );
    assert_eq!(
        m["benchmark_return"].as_f64().unwrap(),
        round6(held_return("AAPL", "2001-01-01", "2004-12-31")),
        "the equal weight of one stock is the stock"
    );
    assert_eq!(card["backtest"]["benchmark_note"], note);
    let md = std::fs::read_to_string(dir.path().join("early/run_card.md")).unwrap();
    assert!(
        md.contains(&format!("- benchmark: equal_weight ({note})")),
        "{md}"
    );

    // A few bars short (2005-01-03 to 2005-02-25): SPY, the gap named.
    let (m, _) = run(
        dir.path(),
        "span",
        buy_and_hold(&["AAPL"], "2005-01-01", "2012-12-31"),
    )
    .await;
    assert_eq!(m["benchmark"], "SPY");
    let aapl = embedded::load("AAPL", Some(d("2005-01-01")), Some(d("2012-12-31"))).unwrap();
    let before = aapl
        .bars
        .dates
        .iter()
        .filter(|x| **x <= d("2005-02-25"))
        .count();
    let note = m["benchmark_note"].as_str().unwrap();
    assert!(
        note.contains(&format!(
            "{before} of the {} bars use the equal weight",
            aapl.bars.len()
        )),
        "{note}"
    );

    // Codes that are not US equities: the equal weight, and a zero rate.
    let run_dir = dir.path().join("crypto");
    std::fs::create_dir_all(run_dir.join("data")).unwrap();
    let b = &aapl.bars;
    let mut csv = String::from("date,open,high,low,close,volume\n");
    for i in 0..b.len() {
        csv.push_str(&format!(
            "{},{},{},{},{},{}\n",
            b.dates[i], b.open[i], b.high[i], b.low[i], b.close[i], b.volume[i]
        ));
    }
    std::fs::write(run_dir.join("data/BTC-USD.csv"), csv).unwrap();
    let mut cfg = buy_and_hold(&["BTC-USD"], "2005-01-01", "2012-12-31");
    cfg["source"] = json!("local");
    let (m, _) = run(dir.path(), "crypto", cfg).await;
    assert_eq!(m["benchmark"], "equal_weight");
    assert!(
        m["benchmark_note"]
            .as_str()
            .unwrap()
            .contains("not all US equities")
    );
    assert_eq!(m["risk_free"], "zero");
    assert!(
        m["risk_free_note"]
            .as_str()
            .unwrap()
            .contains("not all US equities")
    );
}

/// The equity column of `artifacts/equity.csv`, with its dates.
fn equity(run: &Path) -> Vec<(NaiveDate, f64)> {
    let text = std::fs::read_to_string(run.join("artifacts/equity.csv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (d(&f[0][..10]), f[2].parse().unwrap())
        })
        .collect()
}

/// docs §7.5's Sharpe on excess returns, written out here: r from the
/// equity, f from the 3-month yield of each bar's date.
fn sharpe_over_bills(eq: &[(NaiveDate, f64)]) -> f64 {
    let x: Vec<f64> = (0..eq.len())
        .map(|t| {
            if t == 0 {
                return 0.0;
            }
            let y = rates::three_month(eq[t].0).unwrap().unwrap().value;
            eq[t].1 / eq[t - 1].1 - 1.0 - ((1.0 + y).powf(1.0 / 252.0) - 1.0)
        })
        .collect();
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let sd = (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    mean / (sd + 1e-10) * 252f64.sqrt()
}

#[tokio::test]
async fn sharpe_is_measured_over_the_three_month_treasury_yield() {
    let dir = tempfile::tempdir().unwrap();
    // 2006-2007: bills paid about 5 % a year, so the rate matters.
    let (m, card) = run(
        dir.path(),
        "ibm",
        buy_and_hold(&["IBM"], "2006-01-01", "2007-12-31"),
    )
    .await;
    assert_eq!(m["risk_free"], "treasury_3m");
    assert!(m.get("risk_free_note").is_none());
    let eq = equity(&dir.path().join("ibm"));
    let want = sharpe_over_bills(&eq);
    let got = m["sharpe"].as_f64().unwrap();
    assert!(
        (got - want).abs() < 1e-9 * want.abs().max(1.0),
        "{got} vs {want}"
    );
    // The mean yield reported is the bills' over the bars.
    let mean_y = eq
        .iter()
        .map(|(t, _)| rates::three_month(*t).unwrap().unwrap().value)
        .sum::<f64>()
        / eq.len() as f64;
    assert!((m["risk_free_rate"].as_f64().unwrap() - mean_y).abs() < 1e-6);
    assert!((0.04..0.055).contains(&mean_y), "{mean_y}");
    assert_eq!(card["backtest"]["risk_free"], "treasury_3m");
    let md = std::fs::read_to_string(dir.path().join("ibm/run_card.md")).unwrap();
    assert!(
        md.contains("- risk-free rate: 3-month US Treasury yield (mean 4."),
        "{md}"
    );

    // After the curve's last day (2017-03-29) its last yield is carried
    // to the end of the embedded market, and the result says so.
    let (m, _) = run(
        dir.path(),
        "late",
        buy_and_hold(&["SPY"], "2017-01-02", "2017-11-10"),
    )
    .await;
    assert_eq!(m["risk_free"], "treasury_3m");
    let note = m["risk_free_note"].as_str().unwrap();
    assert!(note.contains("ends 2017-03-29"), "{note}");
    assert_eq!(m["benchmark"], "SPY");
}

#[test]
fn the_rates_and_factors_apis_read_the_embedded_tables() {
    // The 3-month yield of a known day (the Treasury's 2008-12-31 curve).
    let q = rates::three_month(d("2008-12-31")).unwrap().unwrap();
    assert_eq!(q.published, d("2008-12-31"));
    assert!(
        (0.0..0.005).contains(&q.value),
        "bills near zero at the end of 2008: {}",
        q.value
    );
    let ten = rates::on(rates::Tenor::Y10, d("2008-12-31"))
        .unwrap()
        .unwrap();
    assert!(ten.value > q.value, "an upward-sloping curve");
    let ff = factors::monthly().unwrap();
    let oct08 = ff.month(d("2008-10-15")).unwrap();
    assert!(oct08.mkt_rf < -0.15, "October 2008: {}", oct08.mkt_rf);
    // The factor table's one-month bill agrees in size with the curve's
    // 3-month yield over 2006 (both about 5 % a year).
    let rf_2006: f64 = ff
        .months
        .iter()
        .filter(|m| m.month.format("%Y").to_string() == "2006")
        .map(|m| m.rf)
        .sum();
    assert!((0.04..0.055).contains(&rf_2006), "{rf_2006}");
}

fn data_cmd(home: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .env("VIBEDESK_HOME", home)
        .env_remove("VIBEDESK_CONFIG")
        .arg("data")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn data_list_shows_the_offline_universe_its_rates_factors_and_biases() {
    let dir = tempfile::tempdir().unwrap();
    let out = data_cmd(dir.path(), &["--list"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.ends_with(|c: char| c.is_ascii_digit()) && l.contains(" 20"))
        .filter(|l| l.contains(" stock ") || l.contains(" etf "))
        .collect();
    assert_eq!(rows.len(), 131, "{text}");
    for x in embedded::universe().unwrap() {
        let line = format!("{} {} {} {}", x.kind.as_str(), x.first, x.last, x.rows);
        let row = rows
            .iter()
            .find(|r| r.split_whitespace().next() == Some(x.ticker.as_str()))
            .unwrap_or_else(|| panic!("{} missing", x.ticker));
        assert_eq!(
            row.split_whitespace().skip(1).collect::<Vec<_>>().join(" "),
            line
        );
    }
    assert!(
        text.contains("106 stocks, 25 ETFs") && text.contains("540808 daily bars"),
        "{text}"
    );
    assert!(
        text.contains("survivorship bias") && text.contains("look-ahead"),
        "{text}"
    );
    assert!(text.contains("split- and dividend-adjusted"));
    assert!(
        text.contains("Rates: 6816 days, 1990-01-02 to 2017-03-29"),
        "{text}"
    );
    assert!(
        text.contains("Factors: 819 months, 1949-01 to 2017-03"),
        "{text}"
    );

    let out = data_cmd(dir.path(), &["--list", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["instruments"].as_array().unwrap().len(), 131);
    assert_eq!(v["rows"], 540_808);
    assert_eq!(v["factors"]["portfolios"].as_array().unwrap().len(), 30);
    // A symbol or --list, not neither.
    let out = data_cmd(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(2));
    // Every ETF is served offline, e.g. SPY from its first bar.
    let out = data_cmd(
        dir.path(),
        &[
            "SPY",
            "--from",
            "2005-01-01",
            "--to",
            "2005-03-01",
            "--offline",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = String::from_utf8(out.stdout).unwrap();
    assert!(
        csv.lines().nth(1).unwrap().starts_with("2005-02-25,"),
        "{csv}"
    );
}
