//! The result cell of a finished `option_strategy` call (docs §15.2.3): the
//! payoff at expiry drawn in the chat like a backtest's equity curve, from
//! the call's structured output (snapshots at 80×24 and 160×48), and the
//! same cell rebuilt from a stored session.

use std::time::Duration;

use crossterm::event::KeyCode;
use serde_json::{Value, json};
use tokio::time::Instant;
use vibedesk::agent::events::{AgentEvent, BatchMode, RunStatus, ToolCallStatus};
use vibedesk::research::data::DataConfig;
use vibedesk::tools::Registry;
use vibedesk::tools::events::ToolEvent;
use vibedesk::tui::App;
use vibedesk::tui::app::update;
use vibedesk::tui::cells::CellKind;

use super::*;

/// The tool's real output for a long 3-month straddle struck at 100 on a
/// spot of 100 at 20 % volatility (pure arithmetic: no data is read).
async fn straddle() -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Registry::new();
    vibedesk::tools::builtin::quant::register_quant_tools(&mut r, DataConfig::offline()).unwrap();
    let ctx = vibedesk::tools::ToolContext {
        call_id: "c1".into(),
        session_id: "s".into(),
        run_dir: dir.path().to_path_buf(),
        workspace: dir.path().to_path_buf(),
        cancel: Default::default(),
        background: Default::default(),
    };
    let args = json!({"legs": [{"kind": "call", "strike": 100, "quantity": 1}, {"kind": "put", "strike": 100, "quantity": 1}],
                      "spot": 100, "volatility": 0.2, "expiry_years": 0.25, "rate": 0.02});
    r.get("option_strategy")
        .unwrap()
        .call_with_output(args, &ctx)
        .await
        .unwrap()
        .output
        .unwrap()
}

fn with_result(output: &Value) -> App {
    let mut a = app();
    let t = Instant::now();
    type_text(&mut a, "a 3-month at-the-money straddle at 100");
    update(&mut a, key(KeyCode::Enter));
    feed(
        &mut a,
        &[
            run_started(),
            batch(
                1,
                0,
                BatchMode::Parallel,
                &[("c1", "option_strategy", json!({"legs": []}))],
            ),
            started(1, "c1", "option_strategy", true, Some(60.0)),
        ],
        t,
    );
    feed(
        &mut a,
        &[
            tool(ToolEvent::ToolCallFinished {
                iter: 1,
                call_id: "c1".into(),
                tool: "option_strategy".into(),
                status: ToolCallStatus::Ok,
                elapsed_ms: 3,
                preview: r#"{"status":"ok","#.into(),
                error_code: None,
                output: Some(output.clone()),
            }),
            text(2, "The payoff is drawn above.\n"),
            AgentEvent::Answer {
                iter: 2,
                content: "The payoff is drawn above.\n".into(),
                degraded: false,
            },
            run_finished(RunStatus::Success, "final answer delivered"),
        ],
        t + Duration::from_millis(3),
    );
    update(&mut a, vibedesk::tui::app::Msg::TurnDone { error: None });
    a
}

#[tokio::test]
async fn the_payoff_is_drawn_in_the_chat_at_80x24_and_160x48() {
    let out = straddle().await;
    let mut a = with_result(&out);
    let cells: Vec<_> = a
        .chat
        .cells
        .iter()
        .filter(|c| matches!(c.kind(), CellKind::Payoff(_)))
        .collect();
    assert_eq!(cells.len(), 1, "one payoff cell");
    let now = Instant::now();
    for (w, h) in [(80, 24), (160, 48)] {
        insta::assert_snapshot!(format!("payoff_cell_{w}x{h}"), screen(&mut a, w, h, now));
    }
    let wide = screen(&mut a, 160, 48, now);
    // The headline carries the exact figures of the output.
    let be: Vec<String> = out["breakevens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| format!("{:.2}", b.as_f64().unwrap()))
        .collect();
    assert!(
        wide.contains(&format!(
            "straddle payoff at expiry (0.25 y): net premium {:.2}",
            out["net_premium"].as_f64().unwrap()
        )),
        "{wide}"
    );
    assert!(
        wide.contains(&format!("breakevens {}", be.join(", "))),
        "{wide}"
    );
    // (The headline wraps before "unbounded" beside the side panel.)
    assert!(wide.contains("unbounded · max loss"), "{wide}");
    assert!(
        wide.contains("━ position") && wide.contains("• breakeven"),
        "{wide}"
    );
    let narrow = screen(&mut a, 80, 24, now);
    assert!(
        narrow.contains("P&L at expiry ▇") || narrow.contains("P&L at expiry █"),
        "{narrow}"
    );
}

#[tokio::test]
async fn a_failed_or_other_call_gets_no_payoff_cell() {
    let mut a = app();
    let t = Instant::now();
    type_text(&mut a, "x");
    update(&mut a, key(KeyCode::Enter));
    feed(
        &mut a,
        &[
            run_started(),
            batch(
                1,
                0,
                BatchMode::Parallel,
                &[("c1", "option_strategy", json!({}))],
            ),
            started(1, "c1", "option_strategy", true, Some(60.0)),
            finished(
                1,
                "c1",
                "option_strategy",
                ToolCallStatus::Error,
                2,
                r#"{"status":"error"}"#,
            ),
        ],
        t,
    );
    assert!(
        !a.chat
            .cells
            .iter()
            .any(|c| matches!(c.kind(), CellKind::Payoff(_)))
    );
}
