//! A `sweep` call in the workstation (docs §18): a progress bar in the chat
//! while it runs, fed by the tool's `tool_progress` events, then the
//! ranking, the deflated Sharpe and the braille heatmap of its real output.

use std::time::Duration;

use crossterm::event::KeyCode;
use serde_json::{Value, json};
use tokio::time::Instant;
use vibedesk::agent::events::{AgentEvent, BatchMode, RunStatus, ToolCallStatus};
use vibedesk::tools::Registry;
use vibedesk::tools::events::ToolEvent;
use vibedesk::tui::app::update;
use vibedesk::tui::cells::CellKind;

use super::*;

fn spec() -> Value {
    json!({"base": {"codes": ["AAPL"], "source": "embedded", "start_date": "2005-01-01", "end_date": "2008-12-31",
                    "strategy": {"name": "sma_crossover"}},
           "axes": {"strategy.params.fast": [5, 10, 20], "strategy.params.slow": [30, 60]},
           "constraint": "fast < slow", "universe": ["AAPL", "MSFT"],
           "split": {"in_sample": ["2005-01-01", "2006-12-31"], "out_of_sample": ["2007-01-01", "2008-12-31"]}})
}

/// The tool's real output for the spec.
async fn output() -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Registry::new();
    use vibedesk::tools::builtin::sweep::{DEFAULT_TIMEOUT, SweepTool};
    r.register(std::sync::Arc::new(SweepTool::new(None, DEFAULT_TIMEOUT)))
        .unwrap();
    let ctx = vibedesk::tools::ToolContext {
        call_id: "c1".into(),
        session_id: "s".into(),
        run_dir: dir.path().to_path_buf(),
        workspace: dir.path().to_path_buf(),
        cancel: Default::default(),
        background: Default::default(),
    };
    r.get("sweep")
        .unwrap()
        .call_with_output(json!({"spec": spec()}), &ctx)
        .await
        .unwrap()
        .output
        .unwrap()
}

fn progress(done: f64, total: f64, message: &str) -> AgentEvent {
    tool(ToolEvent::ToolProgress {
        call_id: "c1".into(),
        tool: "sweep".into(),
        stage: "sweep".into(),
        current: Some(done),
        total: Some(total),
        message: message.into(),
        elapsed_s: 0.5,
    })
}

#[tokio::test]
async fn a_sweep_shows_its_progress_bar_then_its_heatmap() {
    let out = output().await;
    let mut a = app();
    let t = Instant::now();
    type_text(&mut a, "sweep the SMA windows on AAPL and MSFT");
    update(&mut a, key(KeyCode::Enter));
    feed(
        &mut a,
        &[
            run_started(),
            batch(
                1,
                0,
                BatchMode::Serial,
                &[("c1", "sweep", json!({"spec": {}}))],
            ),
            started(1, "c1", "sweep", false, Some(600.0)),
            progress(3.0, 12.0, "3/12 cells · 120/s · best sharpe 0.81"),
        ],
        t,
    );
    let now = Instant::now();
    let running = screen(&mut a, 120, 40, now);
    assert!(
        running.contains("25%") && running.contains('█'),
        "{running}"
    );
    assert!(running.contains("best sharpe 0.81"), "{running}");
    feed(
        &mut a,
        &[progress(9.0, 12.0, "9/12 cells")],
        t + Duration::from_millis(2),
    );
    assert!(screen(&mut a, 120, 40, now).contains("75%"));

    feed(
        &mut a,
        &[
            tool(ToolEvent::ToolCallFinished {
                iter: 1,
                call_id: "c1".into(),
                tool: "sweep".into(),
                status: ToolCallStatus::Ok,
                elapsed_ms: 300,
                preview: r#"{"status":"ok","#.into(),
                error_code: None,
                output: Some(out.clone()),
            }),
            text(2, "The heatmap is above.\n"),
            AgentEvent::Answer {
                iter: 2,
                content: "The heatmap is above.\n".into(),
                degraded: false,
            },
            run_finished(RunStatus::Success, "final answer delivered"),
        ],
        t + Duration::from_millis(300),
    );
    let cells = a
        .chat
        .cells
        .iter()
        .filter(|c| matches!(c.kind(), CellKind::Sweep(_)))
        .count();
    assert_eq!(cells, 1, "the bar became the result: one sweep cell");
    // A chat wide enough for charts shows it expanded.
    let done = screen(&mut a, 160, 60, now);
    let best = &out["top"][0];
    assert!(
        done.contains(&format!(
            "{} {}",
            best["params"].as_str().unwrap(),
            best["symbol"].as_str().unwrap()
        )),
        "{done}"
    );
    assert!(done.contains("ranked by sharpe out-of-sample"), "{done}");
    assert!(done.contains("deflated Sharpe of the best"), "{done}");
    // The heatmap's rows, as the tool drew them.
    let heat = out["heatmap"].as_str().unwrap();
    let row = heat.lines().nth(1).unwrap().trim();
    assert!(done.contains(row), "{row:?} in\n{done}");
    assert!(!done.contains("25%"), "the bar is gone");
}
