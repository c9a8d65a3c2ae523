//! `factor_screen` and `vibedesk factor screen` (docs §17.11) through the
//! real binary: the bundled library screened from the command line into a
//! record the factor view reads, a user file's parse error with its caret,
//! the offline planner's phrase answered end to end by `vibedesk run`, and
//! the tool served by `vibedesk mcp serve`.

use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};
use vibedesk::research::factor::record::ScreenRecord;

use crate::quant_tools::{call, mcp_session};

/// Fifteen of the offline market's stocks with bars all through 2011–2012.
const SYMBOLS: &str = "AAPL,MSFT,IBM,JPM,XOM,WMT,KO,PFE,GE,INTC,CSCO,ORCL,T,VZ,PG";

async fn vibedesk(home: &Path, args: &[&str]) -> std::process::Output {
    crate::support::harness::vibedesk(home)
        .current_dir(home)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap()
}

/// The library over 15 stocks × 2 years: every alpha tried, the JSON
/// answer's top rows are the record's ranking, and the record's universe
/// is what was asked.
#[tokio::test]
async fn the_cli_screens_the_library_into_a_record_the_view_reads() {
    let home = tempfile::tempdir().unwrap();
    let out = vibedesk(
        home.path(),
        &[
            "factor",
            "screen",
            "--library",
            "alpha101",
            "--symbols",
            SYMBOLS,
            "--start",
            "2011-01-01",
            "--end",
            "2012-12-31",
            "--horizons",
            "1,5",
            "--top",
            "5",
            "--offline",
            "--json",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("evaluating") && stderr.contains("screening"),
        "{stderr}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tried"], 82, "{v}");
    assert_eq!(
        v["scored"].as_u64().unwrap() + v["failed"].as_u64().unwrap(),
        82
    );
    assert!(v["scored"].as_u64().unwrap() >= 70, "{v}");
    assert_eq!(v["symbols"], 15);
    assert_eq!(v["horizons"], json!([1, 5]));
    assert_eq!(v["data"]["start"], "2011-01-03");
    let top = v["top"].as_array().unwrap();
    assert_eq!(top.len(), 5);
    let file = v["screen_file"].as_str().unwrap();
    assert!(
        file.starts_with(&home.path().join("data/factor").display().to_string()),
        "{file}"
    );
    let r = ScreenRecord::read(Path::new(file)).unwrap();
    assert_eq!(r.library.as_deref(), Some("alpha101"));
    assert_eq!(r.expressions.len(), 82);
    assert_eq!(r.screen.factors.len(), 82);
    assert_eq!(r.universe.symbols.len(), 15);
    assert_eq!(r.universe.source, "offline");
    assert_eq!(r.expressions[0].paper_number, Some(1));
    for (k, row) in top.iter().enumerate() {
        let i = r.screen.ranking[k];
        assert_eq!(row["name"], r.screen.factors[i].name.as_str());
        assert_eq!(row["paper_number"], json!(r.expressions[i].paper_number));
    }
    let scores: Vec<f64> = r.screen.ranking[..5]
        .iter()
        .map(|&i| r.screen.factors[i].score)
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    assert!(v["warmup"].as_str().unwrap().contains("before 2011-01-01"));
    // The table form names the file too.
    let out = vibedesk(
        home.path(),
        &[
            "factor",
            "screen",
            "--library",
            "alpha101",
            "--symbols",
            "AAPL,MSFT,IBM,KO,XOM",
            "--start",
            "2012-01-01",
            "--end",
            "2012-06-30",
            "--horizons",
            "1",
            "--offline",
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("82 tried"), "{stdout}");
    assert!(stdout.contains("screen file: "), "{stdout}");
}

/// A user's file: a parse error names the line and shows the caret, an
/// unknown symbol and an empty window are refused, all with exit 2.
#[tokio::test]
async fn a_users_file_with_a_parse_error_shows_the_caret_and_exits_non_zero() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("mine.txt"),
        "# my alphas\nrev: -delta(close, 5)\n#012 sign(delta(volume, 1)) * (-1 * delta(close, 1))\nbroken: rank(close +) \n",
    )
    .unwrap();
    let out = vibedesk(home.path(), &["factor", "screen", "mine.txt", "--offline"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("mine.txt:4: broken: column"), "{stderr}");
    assert!(
        stderr.contains("rank(close +)") && stderr.contains('^'),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    std::fs::write(
        home.path().join("ok.txt"),
        "rev: -delta(close, 5)\n#012 sign(delta(volume, 1)) * (-1 * delta(close, 1))\n",
    )
    .unwrap();
    let out = vibedesk(
        home.path(),
        &[
            "factor",
            "screen",
            "ok.txt",
            "--symbols",
            "AAPL,MSFT,NOSUCHX",
            "--offline",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("NOSUCHX"), "{stderr}");
    let out = vibedesk(
        home.path(),
        &[
            "factor",
            "screen",
            "ok.txt",
            "--symbols",
            "AAPL,MSFT,IBM",
            "--start",
            "2030-01-01",
            "--offline",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// The planner's phrase with named tickers and a year, through `vibedesk
/// run` and the offline provider: the screen runs and the answer gives
/// the top factors and the record.
#[tokio::test]
async fn the_planner_screens_the_alphas_end_to_end() {
    let home = tempfile::tempdir().unwrap();
    let out = vibedesk(
        home.path(),
        &[
            "run",
            "--json",
            "-p",
            "screen the alphas on AAPL, MSFT, IBM, JPM, XOM, WMT, KO and PFE in 2012 with horizons 1 and 5",
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evs: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = evs
        .iter()
        .find(|e| e["type"] == "tool_call_finished")
        .unwrap();
    assert_eq!(call["tool"], "factor_screen", "{call}");
    let answer = evs.iter().rfind(|e| e["type"] == "answer").unwrap()["content"]
        .as_str()
        .unwrap();
    assert!(
        answer.contains("## Factor screen: alpha101 on 8 stocks, 2012-01-03"),
        "{answer}"
    );
    assert!(answer.contains("82 tried"), "{answer}");
    let file = answer
        .split('`')
        .find(|s| s.ends_with("screen.json"))
        .unwrap();
    let r = ScreenRecord::read(Path::new(file)).unwrap();
    assert_eq!(r.screen.options.horizons, vec![1, 5]);
    assert_eq!(r.universe.symbols.len(), 8);
}

/// `mcp serve` lists the tool with its schema and runs a small call.
#[tokio::test]
async fn mcp_serve_offers_factor_screen() {
    let home = tempfile::tempdir().unwrap();
    let answers = mcp_session(
        home.path(),
        &[
            json!({"method": "tools/list"}),
            call(
                "factor_screen",
                json!({"expressions": [{"name": "rev", "expr": "-delta(close, 5)"}, {"name": "vol", "expr": "rank(volume)"}],
                       "symbols": ["AAPL", "MSFT", "IBM", "JPM", "XOM"], "start": "2012-01-01", "end": "2012-12-31", "horizons": [1]}),
            ),
        ],
    )
    .await;
    let tools = answers[0]["result"]["tools"].as_array().unwrap();
    let t = tools.iter().find(|t| t["name"] == "factor_screen").unwrap();
    assert!(t["inputSchema"]["properties"]["library"].is_object(), "{t}");
    let s = &answers[1]["result"]["structuredContent"];
    assert_eq!(s["tried"], 2, "{}", answers[1]);
    assert!(Path::new(s["screen_file"].as_str().unwrap()).is_file());
}
