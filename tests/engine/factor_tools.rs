//! factor_ic, regression and overfitting (docs §17) through the real
//! binary: served by `vibedesk mcp serve` with their generated schemas,
//! answering with the goldens' numbers (tests/golden/stats/factor.json),
//! and answering the offline planner's plain requests through
//! `vibedesk run`.

use std::path::PathBuf;

use serde_json::{Value, json};

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
