//! An honest `unsupported` (issue 36 item 1, docs §1.4): a request no
//! offered tool can serve ends `unsupported` with exit code 4, in the
//! events, `state.json` and the session, and its answer names what is
//! missing and the nearest request that runs; "help" stays `success`; a
//! team member whose request is unsupported has failed. Through the real
//! binary, with no model configured (the offline planner) and no network.

use std::path::{Path, PathBuf};

use serde_json::Value;
use vibedesk::cli::exit;

use crate::support::harness::read_json;

// The same clean, offline environment and event readers as status.rs.
use crate::status::{events, last_of, run, vibedesk};

/// Requests no offline tool serves, each with what its answer must name as
/// missing and, where one exists, the nearest request it must offer (with
/// the user's own tickers where that request takes tickers).
const UNSERVABLE: &[(&str, &str, Option<&str>)] = &[
    (
        "Build me a Black-Litterman allocation across AAPL, MSFT and XOM with a bullish view on XOM",
        "Black-Litterman views",
        Some("optimize AAPL, MSFT and XOM for maximum Sharpe"),
    ),
    (
        "Estimate a time-varying hedge ratio for KO vs PEP with a Kalman filter",
        "a Kalman filter",
        Some("Engle-Granger cointegration test of KO and PEP"),
    ),
    (
        "What is Tesla's latest earnings surprise?",
        "earnings and fundamentals",
        None,
    ),
    (
        "Show me MSFT's revenue growth over the last five years",
        "earnings and fundamentals",
        None,
    ),
    ("Any news on Apple this week?", "news and sentiment", None),
    (
        "Give me 1-minute bars for SPY from yesterday",
        "intraday and tick data",
        Some("show SPY's last 30 days in 2017"),
    ),
    (
        "what's the real-time quote for IBM",
        "live quotes and today's price",
        Some("show IBM's last 30 days in 2017"),
    ),
    (
        "Train an LSTM to predict GOOGL's next-day return",
        "machine-learning forecasts",
        Some("walk-forward sweep of momentum on GOOGL"),
    ),
    (
        "Pull the options chain and open interest for AAPL",
        "market options data",
        Some("a 3-month at-the-money straddle on AAPL"),
    ),
    (
        "How did CPI surprises move stocks in 2010?",
        "macroeconomic data",
        Some("correlation of SPY and TLT in 2010"),
    ),
    (
        "plot the bitcoin price for 2021",
        "crypto prices",
        Some("Sharpe of GLD from 2005 to 2015"),
    ),
    (
        "how has the euro to dollar exchange rate moved since 2015",
        "forex rates",
        Some("correlation of EFA and SPY in 2010"),
    ),
    (
        "is crude oil in contango on the futures curve",
        "futures",
        Some("Sharpe of USO from 2007 to 2015"),
    ),
    (
        "Which funds bought NVDA in their latest 13F filings?",
        "ownership, ratings and ESG data",
        None,
    ),
    ("Who won the 1998 World Cup?", "can't answer", None),
];

/// `state.json` of the run `evs` reported, and `session.json`.
fn recorded(home: &Path, evs: &[Value]) -> (Value, Value) {
    let started = last_of(evs, "run_started");
    let run_dir = PathBuf::from(started["run_dir"].as_str().unwrap());
    let session = home
        .join("data/sessions")
        .join(started["session_id"].as_str().unwrap());
    (
        read_json(&run_dir.join("state.json")),
        read_json(&session.join("session.json")),
    )
}

#[tokio::test]
async fn every_unservable_request_ends_unsupported_exit_4_and_says_what_is_missing() {
    assert_eq!(exit::UNSUPPORTED, 4);
    assert!(UNSERVABLE.len() >= 12);
    let home = tempfile::tempdir().unwrap();
    // Each run is its own session: they may run at once.
    let outs = futures_util::future::join_all(UNSERVABLE.iter().map(|(request, ..)| {
        vibedesk(home.path())
            .args(["run", "--json", "-p", request])
            .output()
    }))
    .await;
    for ((request, missing, nearest), out) in UNSERVABLE.iter().zip(outs) {
        let out = out.unwrap();
        assert_eq!(
            out.status.code(),
            Some(i32::from(exit::UNSUPPORTED)),
            "{request}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let evs = events(&out.stdout);
        assert_eq!(evs[0]["provider"], "offline", "{request}");
        let finished = last_of(&evs, "run_finished");
        assert_eq!(finished["status"], "unsupported", "{request}: {finished}");
        assert!(
            finished["reason"]
                .as_str()
                .is_some_and(|r| r.contains("no tool offered")),
            "{request}: {finished}"
        );
        // No tool ran: the answer is the planner's word, not a result.
        assert!(
            !evs.iter().any(|e| e["type"] == "tool_call_started"),
            "{request}"
        );
        let answer = last_of(&evs, "answer")["content"].as_str().unwrap();
        assert!(answer.contains(missing), "{request}: {answer}");
        if let Some(n) = nearest {
            assert!(answer.contains(&format!("\"{n}\"")), "{request}: {answer}");
        }
        let (state, session) = recorded(home.path(), &evs);
        assert_eq!(state["status"], "unsupported", "{request}: {state}");
        assert_eq!(session["last_status"], "unsupported", "{request}");
    }
    // `sessions` lists the status as the runs left it.
    let out = run(home.path(), &["sessions"]).await;
    assert!(out.status.success());
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("unsupported"), "{listed}");
}

#[tokio::test]
async fn in_text_mode_the_answer_is_on_stdout_and_the_reason_on_stderr() {
    let home = tempfile::tempdir().unwrap();
    let out = run(
        home.path(),
        &["run", "-p", "Black-Litterman portfolio of AAPL, MSFT, XOM"],
    )
    .await;
    assert_eq!(out.status.code(), Some(i32::from(exit::UNSUPPORTED)));
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(
        answer.contains("Not available offline: Black-Litterman views")
            && answer.contains(
                "\"optimize AAPL, MSFT and XOM for maximum Sharpe\" (`portfolio_optimize`)"
            ),
        "{answer}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines()
            .any(|l| l.starts_with("vibedesk: run unsupported: no tool offered")),
        "{err}"
    );
}

#[tokio::test]
async fn help_and_greetings_get_the_help_and_succeed() {
    let home = tempfile::tempdir().unwrap();
    for request in ["help", "hello", "What can you do?"] {
        let out = run(home.path(), &["run", "--json", "-p", request]).await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{request}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let evs = events(&out.stdout);
        assert_eq!(last_of(&evs, "run_finished")["status"], "success");
        let answer = last_of(&evs, "answer")["content"].as_str().unwrap();
        assert!(
            answer.contains("backtest a 20/50 SMA crossover on AAPL"),
            "{request}: {answer}"
        );
        let (state, _) = recorded(home.path(), &evs);
        assert_eq!(state["status"], "success");
    }
}

/// The served member computes an RSI; the other asks for a Kalman filter,
/// which no tool serves; the decider reads only the first.
const KALMAN_DESK: &str = "name: kalman_desk
title: Kalman desk
agents:
  - {id: rsi, role: Momentum analyst, tools: [technical_indicator], max_iterations: 4}
  - {id: pairs, role: Pairs analyst, tools: [stat_test], max_iterations: 4, max_retries: 2}
  - {id: judge, role: Portfolio manager, tools: [read_file], max_iterations: 4}
tasks:
  - {id: task-rsi, agent_id: rsi, prompt_template: 'Compute the RSI of {target}.'}
  - {id: task-kalman, agent_id: pairs, prompt_template: 'Estimate the Kalman filter hedge ratio of {target} against PEP.'}
  - id: task-decide
    agent_id: judge
    prompt_template: \"Decide on {target}.\\n{upstream_context}\"
    depends_on: [task-rsi]
    input_from: {momentum: task-rsi}
variables:
  - {name: target, required: true}
";

#[tokio::test]
async fn a_member_whose_request_is_unsupported_has_failed_and_the_team_is_partial() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("config/swarm");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("kalman_desk.yaml"), KALMAN_DESK).unwrap();
    let out = run(
        home.path(),
        &[
            "swarm",
            "run",
            "kalman_desk",
            "--var",
            "target=KO",
            "--json",
        ],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(i32::from(exit::PARTIAL)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evs = events(&out.stdout);
    let member = |task: &str| {
        evs.iter()
            .find(|e| e["type"] == "swarm_task_finished" && e["task"] == task)
            .unwrap_or_else(|| panic!("{task} finished"))
            .clone()
    };
    let kalman = member("task-kalman");
    assert_eq!(kalman["status"], "failed", "{kalman}");
    assert!(
        kalman["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("unsupported: ")),
        "{kalman}"
    );
    // Its worker's run ended `unsupported`, once: an unsupported request is
    // not retried.
    let worker_ends: Vec<&Value> = evs
        .iter()
        .filter(|e| {
            e["type"] == "swarm_worker"
                && e["task"] == "task-kalman"
                && e["event"]["type"] == "run_finished"
        })
        .collect();
    assert_eq!(worker_ends.len(), 1, "{worker_ends:?}");
    assert_eq!(worker_ends[0]["event"]["status"], "unsupported");
    assert!(
        !evs.iter()
            .any(|e| e["type"] == "swarm_task_retry" && e["task"] == "task-kalman")
    );
    assert_eq!(member("task-rsi")["status"], "success");
    assert_eq!(member("task-decide")["status"], "success");
    let last = last_of(&evs, "swarm_finished");
    assert_eq!(last["status"], "partial", "{last}");
    assert!(
        last["reason"]
            .as_str()
            .is_some_and(|r| r.contains("1 of 3 task(s) failed: task-kalman")),
        "{last}"
    );
    // The report keeps what the member said is missing.
    let report = std::fs::read_to_string(last["report"].as_str().unwrap()).unwrap();
    assert!(report.contains("a Kalman filter"), "{report}");
}
