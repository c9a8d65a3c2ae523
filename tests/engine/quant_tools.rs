//! The quant tools (docs §15) through the real binary: served by
//! `vibedesk mcp serve` with their generated schemas, and answering the
//! offline planner's plain requests through `vibedesk run`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use chrono::NaiveDate;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use vibedesk::research::options::{OptionInputs, OptionKind, black_scholes};
use vibedesk::research::portfolio::{Method, OptimizeOptions, optimize};
use vibedesk::research::returns::aligned_returns;
use vibedesk::research::risk::risk_report;

const QUANT: [&str; 5] = [
    "option_price",
    "implied_volatility",
    "option_strategy",
    "portfolio_optimize",
    "risk_report",
];

/// Speaks newline-delimited JSON-RPC to `vibedesk mcp serve` (stdio):
/// initialises, then sends `requests` (ids 2…) and returns their answers
/// by id.
pub(crate) async fn mcp_session(home: &Path, requests: &[Value]) -> Vec<Value> {
    let mut child = crate::support::harness::vibedesk(home)
        .current_dir(home)
        .args(["mcp", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = Vec::new();
    send.push(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "quant-test", "version": "0"}}}),
    );
    send.push(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for (i, r) in requests.iter().enumerate() {
        let mut r = r.clone();
        r["jsonrpc"] = json!("2.0");
        r["id"] = json!(i + 2);
        send.push(r);
    }
    let mut answers: Vec<Option<Value>> = vec![None; requests.len()];
    let talk = async {
        // The handshake first, then the requests in one go.
        stdin
            .write_all(format!("{}\n", send[0]).as_bytes())
            .await
            .unwrap();
        loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("the server closed stdout");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == 1 {
                break;
            }
        }
        for m in &send[1..] {
            stdin.write_all(format!("{m}\n").as_bytes()).await.unwrap();
        }
        while answers.iter().any(Option::is_none) {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("the server closed stdout");
            let v: Value = serde_json::from_str(&line).unwrap();
            if let Some(id) = v["id"].as_u64().filter(|id| *id >= 2) {
                answers[id as usize - 2] = Some(v);
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), talk)
        .await
        .expect("mcp serve did not answer in 60 s");
    drop(stdin);
    let _ = child.kill().await;
    answers.into_iter().map(Option::unwrap).collect()
}

pub(crate) fn call(name: &str, arguments: Value) -> Value {
    json!({"method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

/// Equal up to JSON's text round trip (serde_json parses floats to within
/// an ulp, not always exactly).
fn same(served: &Value, ours: f64) -> bool {
    let v = served.as_f64().unwrap();
    (v - ours).abs() <= 4.0 * f64::EPSILON * ours.abs().max(1e-300)
}

fn day(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

/// The five tools are served with the schemas generated from their
/// argument types, answer with structured content that equals the
/// library's own numbers, and a bad argument is an `isError` result.
#[tokio::test]
async fn mcp_serve_offers_and_runs_the_quant_tools() {
    let home = tempfile::tempdir().unwrap();
    let answers = mcp_session(
        home.path(),
        &[
            json!({"method": "tools/list"}),
            call(
                "option_price",
                json!({"kind": "put", "spot": 95, "strike": 100, "expiry_years": 0.5, "volatility": 0.3, "rate": 0.02, "dividend_yield": 0.01}),
            ),
            call(
                "portfolio_optimize",
                // rf 0, as the optimizer below is run (docs §15.1.1).
                json!({"symbols": ["AAPL", "MSFT", "IBM"], "start": "2009-01-01", "end": "2010-12-31", "method": "max_sharpe", "risk_free": 0.0}),
            ),
            call(
                "risk_report",
                json!({"returns": {"book": [0.01, -0.02, 0.005, 0.003, -0.011, 0.02, -0.004]}, "confidence": 0.9}),
            ),
            call(
                "implied_volatility",
                json!({"kind": "call", "spot": 100, "strike": 100, "expiry_years": 1, "price": 150}),
            ),
        ],
    )
    .await;
    let tools = answers[0]["result"]["tools"].as_array().unwrap();
    for name in QUANT {
        let t = tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} is served"));
        assert_eq!(t["annotations"]["readOnlyHint"], true, "{t}");
        assert_eq!(t["inputSchema"]["type"], "object");
    }
    let schema =
        |name: &str| tools.iter().find(|t| t["name"] == name).unwrap()["inputSchema"].clone();
    assert_eq!(
        schema("option_price")["required"],
        json!(["kind", "expiry_years"])
    );
    assert_eq!(
        schema("portfolio_optimize")["properties"]["method"]["enum"],
        json!([
            "equal_weight",
            "inverse_volatility",
            "min_variance",
            "max_sharpe",
            "risk_parity",
            "max_diversification",
            "hrp"
        ])
    );

    // The served price is the library's.
    let put = &answers[1]["result"]["structuredContent"];
    let ours = black_scholes(&OptionInputs {
        kind: OptionKind::Put,
        spot: 95.0,
        strike: 100.0,
        expiry_years: 0.5,
        volatility: 0.3,
        rate: 0.02,
        dividend_yield: 0.01,
    })
    .unwrap();
    assert!(same(&put["price"], ours.price), "{put}");
    assert!(same(&put["vega"], ours.vega), "{put}");

    // The served weights are the optimiser's on the embedded closes.
    let served = &answers[2]["result"]["structuredContent"];
    let bars: Vec<_> = ["AAPL", "MSFT", "IBM"]
        .iter()
        .map(|s| {
            vibedesk::research::data::embedded::load(
                s,
                Some(day("2009-01-01")),
                Some(day("2010-12-31")),
            )
            .unwrap()
        })
        .collect();
    let named: Vec<(String, &vibedesk::research::data::Bars)> =
        bars.iter().map(|s| (s.symbol.clone(), &s.bars)).collect();
    let aligned = aligned_returns(&named).unwrap();
    let p = optimize(
        &aligned.columns,
        &aligned.names,
        &OptimizeOptions::new(Method::MaxSharpe),
    )
    .unwrap();
    for (name, w) in aligned.names.iter().zip(&p.weights) {
        assert!(same(&served["weights"][name], *w), "{served}");
    }
    assert_eq!(
        served["data"]["days"].as_u64().unwrap() as usize,
        aligned.columns[0].len()
    );

    // Inline returns: one series is its own book.
    let risk = &answers[3]["result"]["structuredContent"];
    let r = vec![0.01, -0.02, 0.005, 0.003, -0.011, 0.02, -0.004];
    let rep = risk_report(&[r], &[1.0], 0.9, 1).unwrap();
    assert!(same(&risk["var_historical"], rep.var_historical), "{risk}");
    assert_eq!(risk["component_var"], json!({"book": 1.0}));
    // Positions on the wealth path, not dates, without market data.
    assert_eq!(risk["drawdowns"][0]["peak"], json!(rep.drawdowns[0].peak));
    assert_eq!(
        risk["drawdowns"][0]["trough"],
        json!(rep.drawdowns[0].trough)
    );

    // A price above the bounds: an error result naming them.
    let bad = &answers[4]["result"];
    assert_eq!(bad["isError"], true, "{bad}");
    let text = bad["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("outside the no-arbitrage bounds (0, 100)"),
        "{text}"
    );
}
