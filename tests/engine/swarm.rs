//! Research teams (docs §14): the scheduler on scripted providers (one per
//! agent, through the per-agent model factory), the real binary's `swarm`
//! commands offline, after SIGKILL, and against the loopback
//! OpenAI-compatible server.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use vibedesk::agent::LoopDeps;
use vibedesk::agent::events::{AgentEvent, RunStatus, TaskState};
use vibedesk::llm::scripted::ScriptedProvider;
use vibedesk::llm::{LlmError, Provider};
use vibedesk::model::Role;
use vibedesk::swarm::preset::parse;
use vibedesk::swarm::scheduler::ProviderFactory;
use vibedesk::swarm::{SwarmError, SwarmOptions, SwarmOutcome};
use vibedesk::tools::{Tool, ToolContext, ToolResult};

use crate::support::harness::vibedesk;
use crate::support::harness::{
    Behaviour, Home, TestTool, call_turn, read_json, registry_with, scripted, test_config,
    text_turn,
};
use crate::support::server::{TestServer, text_reply};

/// Each named model is its own scripted provider, so every agent (one per
/// task here) replays its own script whatever the interleaving.
struct Models(HashMap<String, Arc<ScriptedProvider>>);

impl Models {
    fn new(scripts: &[(&str, Value)]) -> Self {
        Models(
            scripts
                .iter()
                .map(|(name, turns)| (name.to_string(), scripted(turns.clone())))
                .collect(),
        )
    }

    fn get(&self, name: &str) -> Arc<ScriptedProvider> {
        self.0[name].clone()
    }

    fn factory(&self) -> ProviderFactory {
        let map = self.0.clone();
        Arc::new(move |model: &str| {
            map.get(model)
                .map(|p| p.clone() as Arc<dyn Provider>)
                .ok_or_else(|| LlmError::Config(format!("no script for {model}")))
        })
    }
}

struct Team {
    outcome: Result<SwarmOutcome, SwarmError>,
    events: Vec<AgentEvent>,
}

impl Team {
    fn ok(&self) -> &SwarmOutcome {
        self.outcome.as_ref().expect("the team started")
    }

    fn state(&self, task: &str) -> TaskState {
        self.ok()
            .record
            .tasks
            .iter()
            .find(|t| t.id == task)
            .unwrap()
            .state
    }

    fn reason(&self, task: &str) -> String {
        let t = self
            .ok()
            .record
            .tasks
            .iter()
            .find(|t| t.id == task)
            .unwrap();
        t.reason.clone().unwrap_or_default()
    }

    /// Index in the event stream of the first matching swarm event.
    fn position(&self, pred: impl Fn(&AgentEvent) -> bool) -> Option<usize> {
        self.events.iter().position(pred)
    }

    fn started(&self, task: &str) -> Option<usize> {
        self.position(|e| matches!(e, AgentEvent::SwarmTaskStarted { task: t, .. } if t == task))
    }

    fn finished(&self, task: &str) -> Option<usize> {
        self.position(|e| matches!(e, AgentEvent::SwarmTaskFinished { task: t, .. } if t == task))
    }
}

async fn run_team(
    home: &Home,
    yaml: &str,
    models: &Models,
    extra_tools: Vec<Arc<dyn Tool>>,
    options: SwarmOptions,
    cancel: CancellationToken,
    on_event: impl Fn(&AgentEvent) + Send + 'static,
) -> Team {
    let preset = parse(yaml, "test").unwrap();
    let fallback = scripted(json!([{"text": "unused"}]));
    let deps = LoopDeps::new(
        fallback,
        registry_with(extra_tools),
        test_config(),
        home.paths.runs_dir(),
    );
    let options = SwarmOptions {
        provider_for_model: Some(models.factory()),
        ..options
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let collector = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            on_event(&e);
            events.push(e);
        }
        events
    });
    let outcome = vibedesk::swarm::run(
        &preset,
        options,
        deps,
        &home.paths,
        vibedesk::agent::EventSink::new(tx),
        cancel,
    )
    .await;
    let events = collector.await.unwrap();
    Team { outcome, events }
}

/// The user message of a provider's `n`th request.
fn user_message(p: &ScriptedProvider, n: usize) -> String {
    p.requests()[n]
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .unwrap()
        .content
        .clone()
}

fn system_prompt(p: &ScriptedProvider, n: usize) -> String {
    p.requests()[n].messages[0].content.clone()
}

const DAG: &str = "name: dag
title: DAG order
agents:
  - {id: a, role: Role A, model: a, system_prompt: 'You are A for {target}.'}
  - {id: b, role: Role B, model: b}
  - {id: c, role: Role C, model: c, system_prompt: 'You are C, the judge.'}
  - {id: d, role: Role D, model: d}
  - {id: e, role: Role E, model: e}
tasks:
  - {id: ta, agent_id: a, prompt_template: 'Study {target}.'}
  - {id: tb, agent_id: b, prompt_template: 'Doubt {target}.'}
  - id: tc
    agent_id: c
    prompt_template: \"Weigh {target}.\\n{upstream_context}\"
    depends_on: [ta, tb]
    input_from: {bull: ta, bear: tb}
  - {id: td, agent_id: d, prompt_template: 'Decide.', depends_on: [tc], input_from: {view: tc}}
  - {id: te, agent_id: e, prompt_template: 'Check.', depends_on: [ta]}
variables:
  - {name: target, required: true}
";

fn dag_models() -> Models {
    Models::new(&[
        (
            "a",
            json!([{"delay_ms": 30, "text": "A found +12% for AAPL."}]),
        ),
        ("b", json!([text_turn("B found -3%.")])),
        ("c", json!([text_turn("C weighs both: hold.")])),
        ("d", json!([text_turn("D decides: buy 2%.")])),
        ("e", json!([text_turn("E checked.")])),
    ])
}

fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn tasks_start_only_after_their_dependencies_finish() {
    let home = Home::new();
    let models = dag_models();
    let team = run_team(
        &home,
        DAG,
        &models,
        Vec::new(),
        SwarmOptions {
            vars: vars(&[("target", "AAPL")]),
            ..SwarmOptions::default()
        },
        CancellationToken::new(),
        |_| {},
    )
    .await;
    let outcome = team.ok();
    assert_eq!(outcome.status, RunStatus::Success, "{:?}", outcome.reason);
    // Proved by the recorded order, not by timing: every task's start
    // comes after each of its dependencies' finish.
    for (task, deps) in [
        ("tc", &["ta", "tb"][..]),
        ("td", &["tc"][..]),
        ("te", &["ta"][..]),
    ] {
        let start = team.started(task).unwrap();
        for dep in deps {
            assert!(
                team.finished(dep).unwrap() < start,
                "{task} started before {dep} finished"
            );
        }
    }
    let Some(AgentEvent::SwarmStarted { layers, run_id, .. }) = team.events.first() else {
        panic!("swarm_started comes first");
    };
    assert_eq!(layers, &[vec!["ta", "tb"], vec!["tc", "te"], vec!["td"]]);
    assert!(run_id.starts_with("swarm-"));
    assert!(matches!(
        team.events.last(),
        Some(AgentEvent::SwarmFinished {
            status: RunStatus::Success,
            ..
        })
    ));
    // Every worker event is forwarded wrapped with its task id.
    let wrapped = team
        .events
        .iter()
        .filter(|e| matches!(e, AgentEvent::SwarmWorker { task, event } if task == "td" && matches!(**event, AgentEvent::RunFinished { .. })))
        .count();
    assert_eq!(wrapped, 1);

    // Upstream context in the contract's exact shape, the role's own
    // system prompt with the variables.
    let c = models.get("c");
    assert_eq!(
        user_message(&c, 0),
        format!(
            "Weigh AAPL.\n## Upstream results\n\n### bull (ta, Role A)\nA found +12% for AAPL.\n\n### bear (tb, Role B)\nB found -3%.\n"
        )
    );
    assert!(system_prompt(&c, 0).ends_with("## Your role\nYou are C, the judge.\n"));
    assert!(system_prompt(&models.get("a"), 0).contains("You are A for AAPL."));
    // No placeholder: the context comes after a blank line.
    assert!(user_message(&models.get("d"), 0).starts_with(
        "Decide.\n\n## Upstream results\n\n### view (tc, Role C)\nC weighs both: hold."
    ));

    // On disk: run.json, events.jsonl, report.md (final answer first).
    let dir = &outcome.dir;
    let record = read_json(&dir.join("run.json"));
    assert_eq!(record["status"], "success");
    assert_eq!(record["vars"]["target"], "AAPL");
    assert!(record["pid"].as_u64().is_some());
    for t in record["tasks"].as_array().unwrap() {
        assert_eq!(t["state"], "success");
        assert_eq!(t["attempts"], 1);
        let run_dir = PathBuf::from(t["run_dirs"][0].as_str().unwrap());
        assert!(
            run_dir.starts_with(dir),
            "worker run dirs live with the team run"
        );
        assert_eq!(read_json(&run_dir.join("state.json"))["status"], "success");
    }
    let lines = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), team.events.len());
    let report = std::fs::read_to_string(&outcome.report).unwrap();
    let conclusion = report.find("D decides: buy 2%.").unwrap();
    for member in [
        "A found +12% for AAPL.",
        "B found -3%.",
        "C weighs both: hold.",
        "E checked.",
    ] {
        assert!(report.find(member).unwrap() > conclusion, "{member}");
    }
    assert!(report.contains("Run dir: "));
    let listed = vibedesk::swarm::list_runs(&home.paths);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].tasks_succeeded, 5);
}

/// Counts how many calls are inside at once and waits at a barrier.
struct Gate {
    barrier: Arc<tokio::sync::Barrier>,
    active: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

impl Tool for Gate {
    fn name(&self) -> &str {
        "gate"
    }
    fn description(&self) -> &str {
        "waits for a partner"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}, "required": []})
    }
    fn call<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            self.barrier.wait().await;
            self.active.fetch_sub(1, Ordering::SeqCst);
            Ok(json!({"status": "ok"}).to_string())
        })
    }
}

#[tokio::test]
async fn at_most_max_workers_tasks_run_at_once() {
    let home = Home::new();
    let mut yaml = String::from("name: wide\nagents:\n");
    let mut scripts = Vec::new();
    for i in 0..6 {
        yaml.push_str(&format!("  - {{id: a{i}, model: m{i}, tools: [gate]}}\n"));
        scripts.push((
            format!("m{i}"),
            json!([
                call_turn(&[("g", "gate", json!({}))]),
                text_turn(&format!("done {i}"))
            ]),
        ));
    }
    yaml.push_str("tasks:\n");
    for i in 0..6 {
        yaml.push_str(&format!(
            "  - {{id: t{i}, agent_id: a{i}, prompt_template: go}}\n"
        ));
    }
    let named: Vec<(&str, Value)> = scripts
        .iter()
        .map(|(n, s)| (n.as_str(), s.clone()))
        .collect();
    let models = Models::new(&named);
    let peak = Arc::new(AtomicUsize::new(0));
    // A barrier of 2 passes only when two tasks are in at once; the peak
    // shows a third never is.
    let gate = Gate {
        barrier: Arc::new(tokio::sync::Barrier::new(2)),
        active: Arc::default(),
        peak: peak.clone(),
    };
    let team = run_team(
        &home,
        &yaml,
        &models,
        vec![Arc::new(gate)],
        SwarmOptions {
            max_workers: 2,
            ..SwarmOptions::default()
        },
        CancellationToken::new(),
        |_| {},
    )
    .await;
    assert_eq!(
        team.ok().status,
        RunStatus::Success,
        "{:?}",
        team.ok().reason
    );
    assert_eq!(peak.load(Ordering::SeqCst), 2);
    // The registry of a worker holds only its agent's tools.
    let tools: Vec<String> = models.get("m0").requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(tools, ["gate"]);
}

#[tokio::test]
async fn a_failed_attempt_is_retried_with_a_fresh_loop() {
    let home = Home::new();
    let yaml = "name: retry
agents:
  - {id: a, model: m, tools: [echo], max_retries: 1}
tasks:
  - {id: t, agent_id: a, prompt_template: 'Do it.'}
";
    let models = Models::new(&[(
        "m",
        json!([
            call_turn(&[("c1", "echo", json!({"q": "first"}))]),
            {"error": {"kind": "http", "status": 400, "message": "bad request"}},
            text_turn("Second attempt answered."),
        ]),
    )]);
    let echo: Arc<dyn Tool> = Arc::new(TestTool::new("echo", true, Behaviour::Echo));
    let team = run_team(
        &home,
        yaml,
        &models,
        vec![echo],
        SwarmOptions::default(),
        CancellationToken::new(),
        |_| {},
    )
    .await;
    let outcome = team.ok();
    assert_eq!(outcome.status, RunStatus::Success, "{:?}", outcome.reason);
    let retry = team
        .events
        .iter()
        .find_map(|e| match e {
            AgentEvent::SwarmTaskRetry {
                attempt, reason, ..
            } => Some((*attempt, reason.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(retry.0, 1);
    assert!(retry.1.contains("400"), "{}", retry.1);
    let starts: Vec<(u32, String)> = team
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::SwarmTaskStarted {
                attempt, run_dir, ..
            } => Some((*attempt, run_dir.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(starts.len(), 2);
    assert_eq!((starts[0].0, starts[1].0), (1, 2));
    assert_ne!(starts[0].1, starts[1].1, "each attempt has its own run dir");
    // Fresh: the second attempt's first request holds only the system
    // prompt and the task, none of the first attempt's tool exchange.
    let requests = models.get("m").requests();
    assert_eq!(requests[1].messages.len(), 4);
    assert_eq!(requests[2].messages.len(), 2);
    assert_eq!(user_message(&models.get("m"), 2), "Do it.");
    let task = &outcome.record.tasks[0];
    assert_eq!(task.attempts, 2);
    assert_eq!(task.run_dirs.len(), 2);
    let first = read_json(&Path::new(&task.run_dirs[0]).join("state.json"));
    assert_eq!(first["status"], "failed");
}

/// Tool failures that repeat exactly come from the task (no data for a
/// symbol, arguments a tool refuses): the member stops retrying after the
/// second such attempt instead of spending its budget on more; a failure
/// that changes is still retried.
#[tokio::test]
async fn the_same_tool_failures_twice_end_the_retries() {
    let home = Home::new();
    let yaml = "name: repeat
agents:
  - {id: a, model: m, tools: [broken], max_retries: 3}
tasks:
  - {id: t, agent_id: a, prompt_template: 'Do it.'}
";
    let attempt = |tool: &str| {
        [
            call_turn(&[("c1", tool, json!({}))]),
            text_turn("Nothing found."),
        ]
    };
    let turns: Vec<Value> = [
        attempt("broken"),
        attempt("no_such_tool"),
        attempt("no_such_tool"),
        attempt("broken"),
    ]
    .into_iter()
    .flatten()
    .collect();
    let models = Models::new(&[("m", Value::Array(turns))]);
    let broken: Arc<dyn Tool> = Arc::new(TestTool::new("broken", true, Behaviour::Fail));
    let team = run_team(
        &home,
        yaml,
        &models,
        vec![broken],
        SwarmOptions::default(),
        CancellationToken::new(),
        |_| {},
    )
    .await;
    let outcome = team.ok();
    assert_eq!(outcome.status, RunStatus::Failed, "{:?}", outcome.reason);
    assert_eq!(team.state("t"), TaskState::Failed);
    let reason = team.reason("t");
    assert!(
        reason.starts_with("attempt 3 of 4 failed: 1 of 1 tool call failed: no_such_tool")
            && reason.ends_with("the same tool failures as attempt 2, so not retried again"),
        "{reason}"
    );
    // Attempt 1 (broken) and 2 (unknown tool) differ: retried; 3 repeats 2.
    let retries = team
        .events
        .iter()
        .filter(|e| matches!(e, AgentEvent::SwarmTaskRetry { .. }))
        .count();
    assert_eq!(retries, 2);
    assert_eq!(outcome.record.tasks[0].attempts, 3);
    assert_eq!(models.get("m").requests().len(), 6, "no fourth attempt");
}

#[tokio::test]
async fn a_timed_out_task_fails_its_dependents_only() {
    let home = Home::new();
    let yaml = "name: timeout
agents:
  - {id: slow, model: slow, timeout_seconds: 1, max_retries: 0}
  - {id: after, model: after}
  - {id: quick, model: quick}
  - {id: quick2, model: quick2}
tasks:
  - {id: t-slow, agent_id: slow, prompt_template: wait}
  - {id: t-after, agent_id: after, prompt_template: next, depends_on: [t-slow]}
  - {id: t-after2, agent_id: after, prompt_template: last, depends_on: [t-after]}
  - {id: t-quick, agent_id: quick, prompt_template: fast}
  - {id: t-quick2, agent_id: quick2, prompt_template: faster, depends_on: [t-quick]}
";
    let models = Models::new(&[
        ("slow", json!([{"text": "thinking", "hang": true}])),
        ("after", json!([text_turn("never")])),
        ("quick", json!([text_turn("quick answer")])),
        ("quick2", json!([text_turn("quick2 answer")])),
    ]);
    let team = run_team(
        &home,
        yaml,
        &models,
        Vec::new(),
        SwarmOptions::default(),
        CancellationToken::new(),
        |_| {},
    )
    .await;
    let outcome = team.ok();
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(team.state("t-slow"), TaskState::TimedOut);
    assert!(
        team.reason("t-slow").contains("budget of 1 s"),
        "{}",
        team.reason("t-slow")
    );
    assert_eq!(team.state("t-after"), TaskState::Failed);
    assert_eq!(team.reason("t-after"), "upstream task 't-slow' timed out");
    assert_eq!(team.state("t-after2"), TaskState::Failed);
    assert_eq!(team.reason("t-after2"), "upstream task 't-after' failed");
    assert!(
        team.started("t-after").is_none(),
        "a blocked task never starts"
    );
    assert_eq!(models.get("after").calls(), 0);
    assert_eq!(team.state("t-quick"), TaskState::Success);
    assert_eq!(team.state("t-quick2"), TaskState::Success);
    let finished = team
        .events
        .iter()
        .find_map(|e| match e {
            AgentEvent::SwarmTaskFinished { task, status, .. } if task == "t-slow" => Some(*status),
            _ => None,
        })
        .unwrap();
    assert_eq!(finished, TaskState::TimedOut);
}

/// `ta` answers with one of its two calls failed, `tb`'s only call fails,
/// `tc` (the final task) reads `ta` only.
const PARTIAL_DAG: &str = "name: partial
agents:
  - {id: a, model: a, tools: [echo, broken], max_retries: 0}
  - {id: b, model: b, tools: [broken], max_retries: 0}
  - {id: c, model: c, tools: [broken], max_retries: 0}
tasks:
  - {id: ta, agent_id: a, prompt_template: 'Study.'}
  - {id: tb, agent_id: b, prompt_template: 'Doubt.'}
  - {id: tc, agent_id: c, prompt_template: \"Decide.\\n{upstream_context}\", depends_on: [ta], input_from: {study: ta}}
";

fn partial_models(final_fails: bool) -> Models {
    let c = if final_fails {
        json!([
            call_turn(&[("c1", "broken", json!({}))]),
            text_turn("C could not check.")
        ])
    } else {
        json!([text_turn("C decides on A's half.")])
    };
    Models::new(&[
        (
            "a",
            json!([
                call_turn(&[
                    ("a1", "echo", json!({"q": "x"})),
                    ("a2", "broken", json!({}))
                ]),
                text_turn("A found half of it."),
            ]),
        ),
        (
            "b",
            json!([
                call_turn(&[("b1", "broken", json!({}))]),
                text_turn("B found nothing.")
            ]),
        ),
        ("c", c),
    ])
}

fn echo_and_broken() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(TestTool::new("echo", true, Behaviour::Echo).repeatable()),
        Arc::new(TestTool::new("broken", true, Behaviour::Fail).repeatable()),
    ]
}

#[tokio::test]
async fn a_partial_member_passes_its_answer_on_and_the_team_is_partial() {
    let home = Home::new();
    let models = partial_models(false);
    let team = run_team(
        &home,
        PARTIAL_DAG,
        &models,
        echo_and_broken(),
        SwarmOptions::default(),
        CancellationToken::new(),
        |_| {},
    )
    .await;
    let outcome = team.ok();
    assert_eq!(team.state("ta"), TaskState::Partial);
    assert_eq!(
        team.reason("ta"),
        "1 of 2 tool calls failed: broken (deliberate failure)"
    );
    assert_eq!(team.state("tb"), TaskState::Failed);
    assert!(
        team.reason("tb")
            .contains("1 of 1 tool call failed: broken (deliberate failure)"),
        "{}",
        team.reason("tb")
    );
    assert_eq!(team.state("tc"), TaskState::Success);
    // The partial answer reached the final task.
    assert!(
        user_message(&models.get("c"), 0).contains("A found half of it."),
        "{}",
        user_message(&models.get("c"), 0)
    );
    assert_eq!(outcome.status, RunStatus::Partial, "{:?}", outcome.reason);
    let reason = outcome.reason.clone().unwrap();
    assert_eq!(
        reason,
        "1 of 3 task(s) failed: tb; 1 partial (some tool calls failed): ta"
    );
    assert!(team.events.iter().any(|e| matches!(
        e,
        AgentEvent::SwarmTaskFinished { task, status: TaskState::Partial, .. } if task == "ta"
    )));
    assert!(matches!(
        team.events.last(),
        Some(AgentEvent::SwarmFinished {
            status: RunStatus::Partial,
            ..
        })
    ));
    let record = read_json(&outcome.dir.join("run.json"));
    assert_eq!(record["status"], "partial");
    assert_eq!(record["reason"], reason);
    let report = std::fs::read_to_string(&outcome.report).unwrap();
    let top = report
        .find("## Members that did not succeed (2 of 3)")
        .unwrap();
    assert!(top < report.find("## Conclusion: tc").unwrap());
    assert!(
        report.contains("- **ta** ◐ partial: 1 of 2 tool calls failed: broken"),
        "{report}"
    );
    assert!(
        report.contains("- **tb** ✗ failed: attempt 1 of 1 failed: 1 of 1 tool call failed"),
        "{report}"
    );
    // Each member's answer, a failed one's too, with why.
    assert!(
        report.contains("_Partial: 1 of 2 tool calls failed"),
        "{report}"
    );
    assert!(report.contains("B found nothing."), "{report}");
}

#[tokio::test]
async fn a_team_whose_final_task_failed_is_failed() {
    let home = Home::new();
    let models = partial_models(true);
    let team = run_team(
        &home,
        PARTIAL_DAG,
        &models,
        echo_and_broken(),
        SwarmOptions::default(),
        CancellationToken::new(),
        |_| {},
    )
    .await;
    let outcome = team.ok();
    assert_eq!(team.state("ta"), TaskState::Partial);
    assert_eq!(team.state("tc"), TaskState::Failed);
    assert_eq!(outcome.status, RunStatus::Failed, "{:?}", outcome.reason);
    assert!(
        outcome
            .reason
            .as_deref()
            .unwrap()
            .ends_with("the final task tc has no answer"),
        "{:?}",
        outcome.reason
    );
    let report = std::fs::read_to_string(&outcome.report).unwrap();
    assert!(report.contains("status failed"), "{report}");
    assert!(report.contains("C could not check."), "{report}");
}

#[tokio::test]
async fn cancel_stops_the_workers_and_each_task_keeps_its_state() {
    let home = Home::new();
    let yaml = "name: cancel
agents:
  - {id: a, model: a}
  - {id: b, model: b}
  - {id: c, model: c}
tasks:
  - {id: ta, agent_id: a, prompt_template: one}
  - {id: tb, agent_id: b, prompt_template: two}
  - {id: tc, agent_id: c, prompt_template: three, depends_on: [ta]}
";
    let models = Models::new(&[
        ("a", json!([{"text": "working on it", "hang": true}])),
        ("b", json!([text_turn("b is done")])),
        ("c", json!([text_turn("never")])),
    ]);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    // Cancel once `ta` is streaming and `tb` has finished.
    let streaming = Arc::new(AtomicBool::new(false));
    let b_done = Arc::new(AtomicBool::new(false));
    let team = run_team(
        &home,
        yaml,
        &models,
        Vec::new(),
        SwarmOptions::default(),
        cancel,
        move |e| {
            match e {
                AgentEvent::SwarmWorker { task, event }
                    if task == "ta" && matches!(**event, AgentEvent::TextDelta { .. }) =>
                {
                    streaming.store(true, Ordering::SeqCst)
                }
                AgentEvent::SwarmTaskFinished { task, .. } if task == "tb" => {
                    b_done.store(true, Ordering::SeqCst)
                }
                _ => {}
            }
            if streaming.load(Ordering::SeqCst) && b_done.load(Ordering::SeqCst) {
                trigger.cancel();
            }
        },
    )
    .await;
    let outcome = team.ok();
    assert_eq!(outcome.status, RunStatus::Cancelled);
    assert_eq!(team.state("tb"), TaskState::Success);
    assert_eq!(team.state("ta"), TaskState::Cancelled);
    assert_eq!(team.state("tc"), TaskState::Cancelled);
    assert_eq!(
        team.reason("tc"),
        "the run was cancelled before the task finished"
    );
    assert_eq!(models.get("c").calls(), 0);
    let ta = outcome.record.tasks.iter().find(|t| t.id == "ta").unwrap();
    let state = read_json(&Path::new(&ta.run_dirs[0]).join("state.json"));
    assert_eq!(state["status"], "cancelled");
    assert_eq!(
        read_json(&outcome.dir.join("run.json"))["status"],
        "cancelled"
    );
}

#[tokio::test]
async fn errors_come_before_anything_starts() {
    let home = Home::new();
    let models = dag_models();
    let team = run_team(
        &home,
        DAG,
        &models,
        Vec::new(),
        SwarmOptions::default(),
        CancellationToken::new(),
        |_| {},
    )
    .await;
    let Err(e) = &team.outcome else {
        panic!("a missing required variable is an error");
    };
    assert!(
        e.to_string().contains("missing required variable: target"),
        "{e}"
    );
    assert!(team.events.is_empty());
    assert!(!home.paths.data_dir.join("swarm").exists());
    let bad = DAG.replace("model: e}", "model: e, tools: [no_such_tool]}");
    let team = run_team(
        &home,
        &bad,
        &models,
        Vec::new(),
        SwarmOptions {
            vars: vars(&[("target", "AAPL")]),
            ..SwarmOptions::default()
        },
        CancellationToken::new(),
        |_| {},
    )
    .await;
    let Err(SwarmError::Invalid(issues)) = &team.outcome else {
        panic!("an unknown tool is an error");
    };
    assert_eq!(issues[0].line, 8);
}

// ---- the binary ----

fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn write_preset(home: &Path, name: &str, yaml: &str) {
    let dir = home.join("config/swarm");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.yaml")), yaml).unwrap();
}

const DESK: &str = "name: desk
title: Small desk
agents:
  - {id: prices, role: Price analyst, tools: [get_market_data], max_iterations: 5}
  - {id: rsi, role: Momentum analyst, tools: [technical_indicator], max_iterations: 5}
  - {id: judge, role: Portfolio manager, tools: [read_file], max_iterations: 4, system_prompt: 'Decide on {target}.'}
tasks:
  - {id: task-prices, agent_id: prices, prompt_template: 'Show the latest daily prices of {target}.'}
  - {id: task-rsi, agent_id: rsi, prompt_template: 'Compute the RSI of {target}.'}
  - id: task-decide
    agent_id: judge
    prompt_template: \"Decide on {target}.\\n{upstream_context}\"
    depends_on: [task-prices, task-rsi]
    input_from: {prices: task-prices, momentum: task-rsi}
variables:
  - {name: target, required: true}
";

#[tokio::test]
async fn offline_swarm_run_ends_success_with_a_report() {
    let home = tempfile::tempdir().unwrap();
    write_preset(home.path(), "desk", DESK);
    let out = vibedesk(home.path())
        .args(["swarm", "run", "desk", "--var", "target=AAPL", "--json"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evs = events(&out.stdout);
    assert_eq!(evs[0]["type"], "swarm_started");
    assert!(evs.iter().all(|e| e["ts"].as_f64().is_some()));
    let last = evs.last().unwrap();
    assert_eq!(last["type"], "swarm_finished");
    assert_eq!(last["status"], "success");
    for task in ["task-prices", "task-rsi", "task-decide"] {
        assert!(evs.iter().any(|e| e["type"] == "swarm_task_finished"
            && e["task"] == task
            && e["status"] == "success"));
        assert!(evs.iter().any(|e| e["type"] == "swarm_worker"
            && e["task"] == task
            && e["event"]["type"] == "run_finished"));
    }
    // Members ran different real tools.
    let tools: Vec<(&str, &str)> = evs
        .iter()
        .filter(|e| e["type"] == "swarm_worker" && e["event"]["type"] == "tool_call_started")
        .map(|e| {
            (
                e["task"].as_str().unwrap(),
                e["event"]["tool"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(
        tools.contains(&("task-prices", "get_market_data")),
        "{tools:?}"
    );
    assert!(
        tools.contains(&("task-rsi", "technical_indicator")),
        "{tools:?}"
    );
    let report = std::fs::read_to_string(last["report"].as_str().unwrap()).unwrap();
    assert!(report.starts_with("# Small desk"));
    assert!(report.contains("## Conclusion: task-decide (Portfolio manager)"));
    assert!(report.contains("RSI of AAPL"), "{report}");

    let show = vibedesk(home.path())
        .args(["swarm", "show", evs[0]["run_id"].as_str().unwrap()])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success());
    assert!(text.contains("status success"), "{text}");
    assert!(text.contains("task-decide"));

    // The workstation's Teams view reads the engine's own record.
    let rows = vibedesk::tui::team_runs::list(&home.path().join("data"));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].id, evs[0]["run_id"].as_str().unwrap());
    assert_eq!(rows[0].status, "success");
    assert!(!rows[0].workers.is_empty());
    for w in &rows[0].workers {
        assert_eq!(w.state, "success", "{w:?}");
        let dir = w.run_dir.as_deref().expect("each worker's run dir");
        assert!(
            std::path::Path::new(dir).join("state.json").exists(),
            "{dir}"
        );
    }
}

#[tokio::test]
async fn inspect_gives_each_error_with_its_line() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("broken.yaml");
    std::fs::write(
        &file,
        "name: broken
agents:
  - id: a
    tools: [bash, teleport]
    skills: [no-such-skill]
tasks:
  - id: t1
    agent_id: nobody
  - id: t1
    agent_id: a
    depends_on: [t2]
  - id: t2
    agent_id: a
    depends_on: [t2]
    input_from:
      x: ghost
",
    )
    .unwrap();
    let out = vibedesk(home.path())
        .args(["swarm", "inspect", file.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "line 4: error: agent 'a' names unknown tool 'teleport'",
        "line 5: error: agent 'a' names unknown skill 'no-such-skill'",
        "line 8: error: task 't1' names unknown agent 'nobody'",
        "line 9: error: duplicate task id 't1' (first on line 7)",
        "line 16: error: task 't2' takes input 'x' from unknown task 'ghost'",
        "line 12: error: the tasks form a cycle: t2 -> t2",
        "invalid: 6 error(s)",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    // A name that is not one path segment is refused.
    let out = vibedesk(home.path())
        .args(["swarm", "run", "../etc/passwd"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a preset name"));
}

async fn wait_for_event(child: &mut Child, lines: &mut Vec<Value>, pred: impl Fn(&Value) -> bool) {
    let stdout = child.stdout.as_mut().expect("piped stdout");
    let mut reader = BufReader::new(stdout);
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).await.unwrap() == 0 {
                return false;
            }
            let v: Value = serde_json::from_str(line.trim()).unwrap();
            let hit = pred(&v);
            lines.push(v);
            if hit {
                return true;
            }
        }
    })
    .await
    .expect("the event never came");
    assert!(found, "stdout closed before the event came: {lines:?}");
}

#[tokio::test]
async fn a_killed_team_run_is_interrupted_on_the_next_start() {
    let home = tempfile::tempdir().unwrap();
    write_preset(
        home.path(),
        "hang",
        "name: hang\nagents: [{id: a, role: Waiter}]\ntasks: [{id: t-wait, agent_id: a, prompt_template: wait}]\n",
    );
    let script = home.path().join("s.json");
    std::fs::write(
        &script,
        json!([{"text": "Partial", "hang": true}]).to_string(),
    )
    .unwrap();
    let mut child = vibedesk(home.path())
        .args([
            "swarm",
            "run",
            "hang",
            "--json",
            "--script",
            script.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    wait_for_event(&mut child, &mut seen, |e| {
        e["type"] == "swarm_worker" && e["event"]["type"] == "text_delta"
    })
    .await;
    let run_id = seen[0]["run_id"].as_str().unwrap().to_string();
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let dir = home.path().join("data/swarm").join(&run_id);
    assert_eq!(
        read_json(&dir.join("run.json"))["status"],
        "running",
        "the crash left it running"
    );

    let show = vibedesk(home.path())
        .args(["swarm", "show", &run_id])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains("status interrupted"), "{text}");
    assert!(String::from_utf8_lossy(&show.stderr).contains("marked interrupted"));
    let record = read_json(&dir.join("run.json"));
    assert_eq!(record["status"], "interrupted");
    assert_eq!(record["tasks"][0]["state"], "interrupted");
    let worker = PathBuf::from(record["tasks"][0]["run_dirs"][0].as_str().unwrap());
    assert_eq!(
        read_json(&worker.join("state.json"))["status"],
        "interrupted"
    );
    let list = vibedesk(home.path())
        .args(["swarm", "list"])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains(&run_id) && l.contains("interrupted")),
        "{text}"
    );
}

#[tokio::test]
async fn each_worker_sends_its_own_system_prompt_and_the_upstream_text() {
    let home = tempfile::tempdir().unwrap();
    write_preset(
        home.path(),
        "trio",
        "name: trio
agents:
  - {id: bull, role: Bull, system_prompt: 'BULL-ROLE: argue for {target}.'}
  - {id: bear, role: Bear, system_prompt: 'BEAR-ROLE: argue against {target}.'}
  - {id: pm, role: PM, system_prompt: 'PM-ROLE: decide.'}
tasks:
  - {id: task-bull, agent_id: bull, prompt_template: 'Bull case for {target}.'}
  - {id: task-bear, agent_id: bear, prompt_template: 'Bear case for {target}.'}
  - id: task-pm
    agent_id: pm
    prompt_template: 'Decide on {target}: {upstream_context}'
    depends_on: [task-bull, task-bear]
    input_from: {bull_case: task-bull, bear_case: task-bear}
variables:
  - {name: target, required: true}
",
    );
    let server = TestServer::start(vec![
        text_reply("Bull: revenue up 12%."),
        text_reply("Bear: margin down 3%."),
        text_reply("PM: hold."),
    ])
    .await;
    // One worker at a time, so the replies meet the tasks in order.
    let out = vibedesk(home.path())
        .args([
            "swarm",
            "run",
            "trio",
            "--var",
            "target=MSFT",
            "--json",
            "--max-workers",
            "1",
            "--base-url",
            &server.base_url(),
            "--model",
            "m1",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let message = |i: usize, role: &str| -> String {
        requests[i].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == role)
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(message(0, "system").contains("BULL-ROLE: argue for MSFT."));
    assert!(!message(0, "system").contains("BEAR-ROLE"));
    assert!(message(1, "system").contains("BEAR-ROLE: argue against MSFT."));
    assert!(message(2, "system").contains("PM-ROLE: decide."));
    // A server on this machine gets a lean prompt: the run's context heads
    // the user message (docs §4.3).
    let message = |i: usize, role: &str| -> String {
        vibedesk::agent::context::without_run_context(&message(i, role)).to_string()
    };
    assert_eq!(message(0, "user"), "Bull case for MSFT.");
    assert_eq!(
        message(2, "user"),
        "Decide on MSFT: ## Upstream results\n\n### bull_case (task-bull, Bull)\nBull: revenue up 12%.\n\n### bear_case (task-bear, Bear)\nBear: margin down 3%.\n"
    );
    let evs = events(&out.stdout);
    let report = std::fs::read_to_string(evs.last().unwrap()["report"].as_str().unwrap()).unwrap();
    assert!(report.contains("PM: hold.") && report.contains("Bull: revenue up 12%."));
}

#[tokio::test]
async fn the_whole_run_deadline_stops_every_worker() {
    let home = Home::new();
    let yaml = "name: deadline
agents:
  - {id: a, model: a}
  - {id: b, model: b}
tasks:
  - {id: ta, agent_id: a, prompt_template: wait}
  - {id: tb, agent_id: b, prompt_template: after, depends_on: [ta]}
";
    let models = Models::new(&[
        ("a", json!([{"text": "working", "hang": true}])),
        ("b", json!([text_turn("never")])),
    ]);
    let team = run_team(
        &home,
        yaml,
        &models,
        Vec::new(),
        SwarmOptions {
            deadline: Duration::from_secs(1),
            ..SwarmOptions::default()
        },
        CancellationToken::new(),
        |_| {},
    )
    .await;
    let outcome = team.ok();
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(
        outcome.reason.as_deref(),
        Some("the run's deadline of 1 s passed")
    );
    assert_eq!(team.state("ta"), TaskState::Cancelled);
    assert_eq!(team.reason("ta"), "the run's deadline of 1 s passed");
    assert_eq!(team.state("tb"), TaskState::Cancelled);
    assert_eq!(models.get("b").calls(), 0);
}

/// Every preset shipped in the binary validates against the tools and
/// skills a real run has (the registry `vibedesk run` builds).
#[test]
fn every_bundled_preset_validates() {
    let home = tempfile::tempdir().unwrap();
    let config = vibedesk::config::Config::load_with(
        vibedesk::store::Paths::under(home.path()),
        &BTreeMap::<String, String>::new(),
        &Default::default(),
    )
    .unwrap();
    let setup = vibedesk::cli::AgentSetup::new(&config).unwrap();
    let catalog = vibedesk::swarm::Catalog {
        tools: setup
            .registry
            .names()
            .into_iter()
            .map(String::from)
            .collect(),
        skills: setup.skills.iter().map(|s| s.name.clone()).collect(),
    };
    for required in [
        "get_market_data",
        "technical_indicator",
        "backtest",
        "load_skill",
    ] {
        assert!(catalog.tools.contains(required), "{required}");
    }
    for (name, text) in vibedesk::swarm::bundled::BUNDLED {
        let preset = parse(text, name).unwrap();
        assert_eq!(
            &preset.name, name,
            "a bundled preset's name is its file name"
        );
        let report = vibedesk::swarm::inspect(&preset, &catalog);
        let errors: Vec<String> = report.errors().map(|i| i.to_string()).collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
    }
}
