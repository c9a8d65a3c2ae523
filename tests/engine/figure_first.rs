//! The asked-for figure first (issue 40 items 2 and 5, docs §2.12.1 and
//! §2.12.2): the market tools lead with the range's own figures, a one-day
//! range with that day's value, and several symbols come back as one
//! ranked table. In-process calls on the embedded data, checked against
//! figures computed here from the raw closes.

use chrono::NaiveDate;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::research::data::{Bars, DataConfig, embedded};
use vibedesk::tools::builtin::market::register_market_tools_with;
use vibedesk::tools::{BackgroundQueue, Registry, ToolContext};

fn d(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

fn ctx(dir: &std::path::Path) -> ToolContext {
    let (run, ws) = (dir.join("run"), dir.join("ws"));
    std::fs::create_dir_all(&run).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    ToolContext {
        call_id: "c1".into(),
        session_id: "s".into(),
        run_dir: run,
        workspace: ws,
        cancel: CancellationToken::new(),
        background: BackgroundQueue::default(),
    }
}

fn registry() -> Registry {
    let mut r = Registry::new();
    register_market_tools_with(&mut r, DataConfig::offline()).unwrap();
    r
}

/// The answer's text as the model reads it, and the lean form's.
async fn call(r: &Registry, tool: &str, args: Value, c: &ToolContext) -> (String, String) {
    let t = r.get(tool).unwrap();
    let text = t.call(args, c).await.unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let lean = t.lean_result(&v).unwrap_or(v).to_string();
    (text, lean)
}

fn value(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

/// `symbol`'s embedded bars up to `end`.
fn bars(symbol: &str, end: &str) -> Bars {
    embedded::load(symbol, None, Some(d(end))).unwrap().bars
}

/// Index of the first bar on or after `day`.
fn at(b: &Bars, day: &str) -> usize {
    b.dates.partition_point(|x| *x < d(day))
}

/// Sample sd (ddof 1) of the daily simple returns of `close` × √252.
fn annualised_volatility(close: &[f64]) -> f64 {
    let r: Vec<f64> = close.windows(2).map(|w| w[1] / w[0] - 1.0).collect();
    let n = r.len() as f64;
    let mean = r.iter().sum::<f64>() / n;
    let var = r.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    var.sqrt() * 252f64.sqrt()
}

/// The deepest fall of `close` below its running peak, which starts at
/// its first value: (depth, peak index, trough index).
fn deepest(close: &[f64]) -> (f64, usize, usize) {
    let (mut peak, mut peak_i, mut worst) = (close[0], 0, (0.0, 0, 0));
    for (i, &c) in close.iter().enumerate() {
        if c > peak {
            (peak, peak_i) = (c, i);
        }
        if c / peak - 1.0 < worst.0 {
            worst = (c / peak - 1.0, peak_i, i);
        }
    }
    worst
}

fn close_to(a: &Value, b: f64) -> bool {
    (a.as_f64().unwrap() - b).abs() < 1e-9 * b.abs().max(1.0)
}

#[tokio::test]
async fn market_data_leads_every_page_with_the_range_s_own_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (c, r) = (ctx(dir.path()), registry());
    let args = json!({"symbol": "SPY", "start": "2008-01-01", "end": "2008-12-31"});
    let (text, lean) = call(&r, "get_market_data", args.clone(), &c).await;
    assert!(
        text.starts_with(r#"{"period":{"first_date":"2008-01-02","#),
        "{text}"
    );
    assert!(
        lean.starts_with(r#"{"period":{"first_date":"2008-01-02","#),
        "{lean}"
    );
    let out = value(&text);
    let p = &out["period"];
    let b = bars("SPY", "2008-12-31");
    let year = &b.close[at(&b, "2008-01-01")..];
    let (depth, peak, trough) = deepest(year);
    let from = at(&b, "2008-01-01");
    let w = &p["max_drawdown_window"];
    assert!(close_to(&w["depth"], depth), "{w}");
    assert_eq!(format!("{:.2}", depth * 100.0), "-47.95");
    assert_eq!(w["peak"], "2008-01-02");
    assert_eq!(w["peak"], b.dates[from + peak].to_string());
    assert_eq!(w["trough"], b.dates[from + trough].to_string());
    // On the range's closes alone: the return and the volatility run from
    // its first close, as the summary's return does.
    assert_eq!(p["return_from"], "2008-01-02");
    assert!(close_to(
        &p["total_return"],
        year[year.len() - 1] / year[0] - 1.0
    ));
    assert!(close_to(
        &p["annualized_volatility"],
        annualised_volatility(year)
    ));
    assert!(
        p["volatility_basis"].as_str().unwrap().contains("× √252"),
        "{p}"
    );
    assert!(close_to(&p["first_close"], year[0]));
    assert!(close_to(&p["last_close"], year[year.len() - 1]));
    assert_eq!(p["last_date"], "2008-12-31");
    assert!(p.get("drawdown_from_earlier_peak").is_none(), "{p}");
    // Every page carries the whole range's figures, first.
    let mut next = args.clone();
    next["offset"] = out["next_offset"].clone();
    let (page, _) = call(&r, "get_market_data", next, &c).await;
    assert!(page.starts_with(r#"{"period":"#), "{page}");
    assert_eq!(value(&page)["period"], *p);

    // A one-day range leads with that day's bar.
    let day = json!({"symbol": "AAPL", "start": "2008-01-25", "end": "2008-01-25"});
    let (text, _) = call(&r, "get_market_data", day, &c).await;
    assert!(
        text.starts_with(r#"{"on_date":{"date":"2008-01-25","#),
        "{text}"
    );
    let a = bars("AAPL", "2008-01-25");
    let close = value(&text)["on_date"]["close"].as_f64().unwrap();
    assert!((close - a.close[a.close.len() - 1]).abs() < 1e-6, "{text}");
}

#[tokio::test]
async fn every_indicator_leads_with_the_period_and_a_day_with_its_value() {
    let dir = tempfile::tempdir().unwrap();
    let (c, r) = (ctx(dir.path()), registry());
    let year = json!({"symbol": "SPY", "indicator": "drawdown", "start": "2008-01-01", "end": "2008-12-31"});
    let (text, lean) = call(&r, "technical_indicator", year, &c).await;
    assert!(
        text.starts_with(r#"{"period":{"first_date":"2008-01-02","#),
        "{text}"
    );
    assert!(lean.starts_with(r#"{"period":"#), "{lean}");
    let p = &value(&text)["period"];
    let w = &p["max_drawdown_window"];
    assert_eq!(
        format!("{:.2}", w["depth"].as_f64().unwrap() * 100.0),
        "-47.95"
    );
    assert_eq!(w["peak"], "2008-01-02");
    let e = &p["drawdown_from_earlier_peak"];
    assert_eq!(
        format!("{:.2}", e["depth"].as_f64().unwrap() * 100.0),
        "-51.78"
    );
    assert!(e["peak"].as_str().unwrap().starts_with("2007-10-"), "{e}");
    assert_eq!(e["trough"], w["trough"], "the same trough, two peaks");

    // An indicator that is not about a period carries it too, first:
    // 2009's volatility on 2009's closes alone, the same as the range's
    // own summary in get_market_data: the warm-up does not reach it.
    let rsi =
        json!({"symbol": "SPY", "indicator": "rsi", "start": "2009-01-01", "end": "2009-12-31"});
    let (text, lean) = call(&r, "technical_indicator", rsi, &c).await;
    assert!(
        text.starts_with(r#"{"period":{"first_date":"2009-01-02","#),
        "{text}"
    );
    assert!(lean.starts_with(r#"{"period":"#), "{lean}");
    let p = &value(&text)["period"];
    let b = bars("SPY", "2009-12-31");
    let closes = &b.close[at(&b, "2009-01-01")..];
    assert_eq!(p["return_from"], "2009-01-02");
    let vol = annualised_volatility(closes);
    assert!(close_to(&p["annualized_volatility"], vol), "{p} vs {vol}");
    assert_eq!(p["daily_returns"], closes.len() - 1);
    assert!((0.2..0.4).contains(&vol), "2009 was volatile: {vol}");

    // A one-day range leads with the value on that day, the same as the
    // latest value of a longer range ending there.
    let day = json!({"symbol": "AAPL", "indicator": "rsi", "params": {"period": 14}, "start": "2008-01-25", "end": "2008-01-25"});
    let (text, lean) = call(&r, "technical_indicator", day, &c).await;
    assert!(
        text.starts_with(r#"{"on_date":{"date":"2008-01-25","rsi":"#),
        "{text}"
    );
    assert!(lean.starts_with(r#"{"on_date":"#), "{lean}");
    let long = json!({"symbol": "AAPL", "indicator": "rsi", "params": {"period": 14}, "start": "2007-06-01", "end": "2008-01-25"});
    let (longer, _) = call(&r, "technical_indicator", long, &c).await;
    let (one, longer) = (value(&text), value(&longer));
    assert_eq!(one["on_date"]["rsi"], longer["latest"]["rsi"]);
    assert!(one["on_date"]["rsi"].as_f64().unwrap() < 30.0, "{one}");
    assert!(longer.get("on_date").is_none());
    // A start without an end names that day too: its value leads, and is
    // the one-day range's, while `latest` is the data's last day.
    let from = json!({"symbol": "AAPL", "indicator": "rsi", "params": {"period": 14}, "start": "2008-01-25"});
    let (text, _) = call(&r, "technical_indicator", from, &c).await;
    let from = value(&text);
    assert!(
        text.starts_with(r#"{"on_date":{"date":"2008-01-25","#),
        "{text}"
    );
    assert_eq!(from["on_date"]["rsi"], one["on_date"]["rsi"]);
    assert_ne!(from["latest"]["date"], "2008-01-25");
}

#[tokio::test]
async fn several_symbols_are_one_ranked_table() {
    let dir = tempfile::tempdir().unwrap();
    let (c, r) = (ctx(dir.path()), registry());
    let vol = |symbols: Value| json!({"symbols": symbols, "indicator": "volatility", "params": {"window": 20}, "start": "2010-12-31", "end": "2010-12-31"});
    let (text, lean) = call(
        &r,
        "technical_indicator",
        vol(json!(["AAPL", "MSFT", "IBM"])),
        &c,
    )
    .await;
    assert!(
        text.starts_with(r#"{"highest":""#),
        "the first-ranked symbol leads: {text}"
    );
    assert_eq!(lean, text, "nothing to cut");
    let out = value(&text);
    let ranked = out["ranked"].as_array().unwrap();
    assert_eq!(ranked.len(), 3);
    assert_eq!(out["highest"], ranked[0]["symbol"]);
    assert!(
        out["ranked_by"]
            .as_str()
            .unwrap()
            .starts_with("volatility on each symbol's last date")
    );
    let mut seen = Vec::new();
    for (i, row) in ranked.iter().enumerate() {
        assert_eq!(row["rank"], i + 1);
        assert_eq!(row["date"], "2010-12-31");
        let sym = row["symbol"].as_str().unwrap();
        let one = json!({"symbol": sym, "indicator": "volatility", "params": {"window": 20}, "start": "2010-12-31", "end": "2010-12-31"});
        let (single, _) = call(&r, "technical_indicator", one, &c).await;
        let single = value(&single);
        assert_eq!(row["value"], single["on_date"]["volatility"], "{sym}");
        assert_eq!(
            row["total_return"], single["period"]["total_return"],
            "{sym}"
        );
        seen.push((row["value"].as_f64().unwrap(), sym.to_string()));
    }
    assert!(
        seen.windows(2).all(|w| w[0].0 >= w[1].0),
        "highest first: {seen:?}"
    );
    let mut names: Vec<&str> = seen.iter().map(|(_, s)| s.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["AAPL", "IBM", "MSFT"]);
    assert_eq!(out["series"], "volatility");
    assert!(out.get("errors").is_none());

    // The same as one string; an unknown ticker is listed, not fatal.
    let (text, _) = call(
        &r,
        "technical_indicator",
        vol(json!("AAPL, MSFT,IBM,NOSUCH")),
        &c,
    )
    .await;
    let again = value(&text);
    assert_eq!(again["ranked"], out["ranked"]);
    assert_eq!(again["errors"][0]["symbol"], "NOSUCH");
    assert!(again["errors"][0]["code"].is_string(), "{again}");

    // A drawdown table says what "highest" means.
    let dd = json!({"symbols": ["SPY", "QQQ", "TLT"], "indicator": "drawdown", "start": "2008-01-01", "end": "2008-12-31"});
    let (text, _) = call(&r, "technical_indicator", dd, &c).await;
    let dd = value(&text);
    assert!(
        dd["ranked_by"]
            .as_str()
            .unwrap()
            .contains("the shallowest first and the deepest last"),
        "{dd}"
    );
    let spy = dd["ranked"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["symbol"] == "SPY")
        .unwrap();
    assert_eq!(
        format!("{:.2}", spy["max_drawdown"].as_f64().unwrap() * 100.0),
        "-47.95"
    );

    // Several tickers in `symbol` are still refused, pointing at `symbols`.
    let t = r.get("technical_indicator").unwrap();
    let e = t
        .call(json!({"symbol": "AAPL,MSFT", "indicator": "rsi"}), &c)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "one_ticker_per_call");
    assert!(
        e.to_string()
            .contains("in `symbols` for a table ranked by value"),
        "{e}"
    );
    let many: Vec<String> = (0..51).map(|i| format!("S{i}")).collect();
    let e = t
        .call(json!({"symbols": many, "indicator": "rsi"}), &c)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "too_many_symbols");
    // A small model is shown `symbols` and how to use it.
    let lean = r.leaned();
    let spec = lean
        .specs()
        .iter()
        .find(|s| s.name == "technical_indicator")
        .cloned()
        .unwrap();
    assert!(
        spec.parameters["properties"]["symbols"]["description"]
            .as_str()
            .unwrap()
            .contains("ranked")
    );
    assert!(
        spec.description.contains("`symbols`"),
        "{}",
        spec.description
    );
}

/// A huge list (the property test sends 20,000 entries, some of 100,000
/// characters) is refused as it stands, at once.
/// "Which had the highest total return in 2009": the returns table of a
/// year ranks each range's total return, the same figure as
/// get_market_data's summary, not 31 December's move.
#[tokio::test]
async fn a_returns_table_over_a_year_ranks_the_total_returns() {
    let dir = tempfile::tempdir().unwrap();
    let (c, r) = (ctx(dir.path()), registry());
    let year = json!({"symbol": "XLK", "symbols": ["XLF", "XLE"], "indicator": "returns", "start": "2009-01-01", "end": "2009-12-31"});
    let (text, _) = call(&r, "technical_indicator", year, &c).await;
    let out = value(&text);
    assert!(
        out["ranked_by"].as_str().unwrap().contains("total return"),
        "{out}"
    );
    let ranked = out["ranked"].as_array().unwrap();
    assert_eq!(ranked.len(), 3, "symbol and symbols together: {out}");
    let mut last = f64::INFINITY;
    for row in ranked {
        let sym = row["symbol"].as_str().unwrap();
        let md = json!({"symbol": sym, "start": "2009-01-01", "end": "2009-12-31", "limit": 1});
        let (summary, _) = call(&r, "get_market_data", md, &c).await;
        let pct = value(&summary)["summary"]["total_return_pct"]
            .as_f64()
            .unwrap();
        let v = row["value"].as_f64().unwrap();
        assert_eq!(row["value"], row["total_return"], "{sym}");
        assert!((v * 100.0 - pct).abs() < 1e-3, "{sym}: {v} vs {pct} %");
        assert!(v <= last, "highest first: {ranked:?}");
        last = v;
    }
    // 2009: technology led.
    assert_eq!(ranked[0]["symbol"], "XLK", "{ranked:?}");
    // One day keeps that day's return.
    let day = json!({"symbols": ["XLK", "XLF"], "indicator": "returns", "start": "2009-12-31", "end": "2009-12-31"});
    let (text, _) = call(&r, "technical_indicator", day, &c).await;
    let out = value(&text);
    for row in out["ranked"].as_array().unwrap() {
        assert_ne!(row["value"], row["total_return"], "{row}");
    }
}

#[tokio::test]
async fn a_huge_list_of_tickers_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (c, r) = (ctx(dir.path()), registry());
    let long = "x".repeat(100_000);
    let many: Vec<&str> = ["SPY", "AAPL", "", "MSFT", &long]
        .into_iter()
        .cycle()
        .take(20_000)
        .collect();
    let t = r.get("technical_indicator").unwrap();
    let args = json!({"symbols": many, "indicator": "ema", "source": "stooq", "tail": i64::MIN});
    let started = std::time::Instant::now();
    let e = t.call(args, &c).await.unwrap_err();
    assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
    assert_eq!(e.code(), "too_many_symbols", "{e}");
    // Repeats within the bound are one symbol each.
    let e = t
        .call(
            json!({"symbols": "SPY,AAPL,spy,,AAPL", "indicator": "ema", "tail": -1}),
            &c,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), "no_symbol_answered", "{e}");
    assert_eq!(e.to_string().matches("'tail'").count(), 2, "{e}");
}
