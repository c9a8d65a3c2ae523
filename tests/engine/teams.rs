//! The shipped research-team presets (docs §14.1) and the offline planner
//! working as their members: every preset parses with the spec's keys, names
//! only tools the registry has and skills that ship, declares exactly the
//! variables it uses and forms a DAG; each member's prompt plans real tool
//! calls, and the binary answers one with real numbers. The presets are read
//! with `serde-saphyr` into the structs below, not through the swarm room's
//! loader, so these checks stand on their own.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use tokio::process::Command;
use vibedesk::llm::offline::{Plan, PlannedCall, plan};
use vibedesk::model::Message;
use vibedesk::swarm::bundled::BUNDLED;

/// The top-level keys of spec §9.3, every one required.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Preset {
    name: String,
    title: String,
    description: String,
    agents: Vec<Agent>,
    tasks: Vec<Task>,
    variables: Vec<Variable>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Agent {
    id: String,
    role: String,
    system_prompt: String,
    tools: Vec<String>,
    skills: Vec<String>,
    max_iterations: Option<u32>,
    timeout_seconds: Option<u64>,
    max_retries: Option<u32>,
    model: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Task {
    id: String,
    agent_id: String,
    prompt_template: String,
    depends_on: Vec<String>,
    #[serde(default)]
    input_from: indexmap_free::Ordered,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Variable {
    name: String,
    description: String,
    required: bool,
    default: Option<String>,
}

/// `input_from` in the YAML's order (the upstream context keeps it).
mod indexmap_free {
    use serde::de::{Deserializer, MapAccess, Visitor};

    #[derive(Debug, Default)]
    pub struct Ordered(pub Vec<(String, String)>);

    impl<'de> serde::Deserialize<'de> for Ordered {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Ordered;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a map of key to task id")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Ordered, A::Error> {
                    let mut out = Vec::new();
                    while let Some(kv) = m.next_entry::<String, String>()? {
                        out.push(kv);
                    }
                    Ok(Ordered(out))
                }
            }
            d.deserialize_map(V)
        }
    }
}

/// The teams the issue asks for, by name.
const REQUIRED: [&str; 10] = [
    "equity_research",
    "investment_committee",
    "risk_committee",
    "quant_strategy_desk",
    "technical_analysis_panel",
    "factor_research",
    "pairs_stat_arb",
    "macro_rates",
    "crypto_desk",
    "portfolio_review",
];

/// The tools a preset may name (the contract's list).
const ALLOWED_TOOLS: [&str; 13] = [
    "bash",
    "read_file",
    "list_dir",
    "write_file",
    "edit_file",
    "backtest",
    "read_artifact",
    "remember",
    "recall",
    "session_search",
    "load_skill",
    "get_market_data",
    "technical_indicator",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn presets() -> Vec<Preset> {
    BUNDLED
        .iter()
        .map(|(name, text)| {
            let p: Preset = serde_saphyr::from_str(text)
                .unwrap_or_else(|e| panic!("{name}.yaml does not parse with the §9.3 keys: {e}"));
            assert_eq!(&p.name, name, "the table's name is the file's");
            p
        })
        .collect()
}

fn preset(name: &str) -> Preset {
    presets().into_iter().find(|p| p.name == name).unwrap()
}

/// The tools a session registers: files and shell, market data, backtest,
/// memory and skills (a temp memory store), as `cli` builds them.
fn registry_names() -> BTreeSet<String> {
    use vibedesk::tools::builtin::{backtest, market, memory};
    let dir = tempfile::tempdir().unwrap();
    let mut r = vibedesk::tools::Registry::new();
    vibedesk::tools::builtin::register_defaults(&mut r).unwrap();
    market::register_market_tools(&mut r, dir.path().join("cache")).unwrap();
    backtest::register_backtest_tools(
        &mut r,
        backtest::BacktestToolConfig::new(Some(dir.path().join("cache"))),
    )
    .unwrap();
    let store = vibedesk::memory::MemoryStore::open(
        dir.path().join("memory"),
        vibedesk::memory::MemoryFlags::default(),
    )
    .unwrap();
    memory::register_memory_tools(
        &mut r,
        Arc::new(store),
        Arc::new(vibedesk::memory::skills::SkillSet::load(None)),
        dir.path().join("sessions"),
    )
    .unwrap();
    r.names().into_iter().map(String::from).collect()
}

fn shipped_skills() -> BTreeSet<String> {
    std::fs::read_dir(repo().join("assets/skills"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("SKILL.md").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// `{name}` placeholders of a template.
fn placeholders(text: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\{([A-Za-z_][A-Za-z0-9_]*)\}").unwrap();
    re.captures_iter(text).map(|c| c[1].to_string()).collect()
}

/// Kahn's layers; panics (naming the preset) on a cycle.
fn layers(p: &Preset) -> Vec<Vec<String>> {
    let mut left: BTreeMap<&str, BTreeSet<&str>> = p
        .tasks
        .iter()
        .map(|t| {
            (
                t.id.as_str(),
                t.depends_on.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    let mut out = Vec::new();
    while !left.is_empty() {
        let ready: Vec<String> = left
            .iter()
            .filter(|(_, deps)| deps.is_empty())
            .map(|(id, _)| id.to_string())
            .collect();
        assert!(!ready.is_empty(), "{}: a cycle among {left:?}", p.name);
        for id in &ready {
            left.remove(id.as_str());
        }
        for deps in left.values_mut() {
            for id in &ready {
                deps.remove(id.as_str());
            }
        }
        out.push(ready);
    }
    out
}

#[test]
fn every_shipped_preset_has_the_spec_keys_and_names_only_real_tools_and_skills() {
    let all = presets();
    let names: BTreeSet<&str> = all.iter().map(|p| p.name.as_str()).collect();
    for want in REQUIRED {
        assert!(names.contains(want), "{want} ships");
    }
    // Every file in assets/swarm is in the binary's table.
    let files: BTreeSet<String> = std::fs::read_dir(repo().join("assets/swarm"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".yaml"))
        .map(|f| f.trim_end_matches(".yaml").to_string())
        .collect();
    assert_eq!(
        files,
        names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>()
    );
    let registry = registry_names();
    let skills = shipped_skills();
    for p in &all {
        let n = &p.name;
        assert!(
            !n.is_empty() && !n.contains(['/', '\\', '.']),
            "{n}: one path segment"
        );
        assert!(!p.title.trim().is_empty() && !p.description.trim().is_empty());
        let agent_ids: BTreeSet<&str> = p.agents.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(agent_ids.len(), p.agents.len(), "{n}: duplicate agent id");
        for a in &p.agents {
            assert!(!a.role.trim().is_empty() && !a.system_prompt.trim().is_empty());
            for t in &a.tools {
                assert!(
                    registry.contains(t),
                    "{n}/{}: no tool {t} in {registry:?}",
                    a.id
                );
                assert!(ALLOWED_TOOLS.contains(&t.as_str()), "{n}/{}: {t}", a.id);
            }
            for s in &a.skills {
                assert!(
                    skills.contains(s),
                    "{n}/{}: no skill {s} in {skills:?}",
                    a.id
                );
            }
            assert!(a.max_iterations.is_none_or(|i| (1..=50).contains(&i)));
            assert!(a.timeout_seconds.is_none_or(|t| t >= 60));
            assert!(a.max_retries.is_none_or(|r| r <= 3));
            assert!(
                a.model.is_none(),
                "{n}: a bundled preset uses the run's model"
            );
        }
        assert!(
            (3..=6).contains(&p.tasks.len()),
            "{n}: 3-6 tasks, not {}",
            p.tasks.len()
        );
        let task_ids: BTreeSet<&str> = p.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(task_ids.len(), p.tasks.len(), "{n}: duplicate task id");
        for t in &p.tasks {
            assert!(agent_ids.contains(t.agent_id.as_str()), "{n}/{}", t.id);
            for d in &t.depends_on {
                assert!(task_ids.contains(d.as_str()), "{n}/{}: {d}", t.id);
            }
            for (key, from) in &t.input_from.0 {
                assert!(
                    t.depends_on.contains(from),
                    "{n}/{}: input_from {key} = {from} is not a dependency",
                    t.id
                );
            }
            if !t.input_from.0.is_empty() {
                assert!(
                    t.prompt_template.contains("{upstream_context}"),
                    "{n}/{}",
                    t.id
                );
            }
        }
        let layers = layers(p);
        assert!(layers[0].len() >= 2, "{n}: members work in parallel first");
        // One decider at the end, reading (directly or through a reader)
        // every other task.
        let last = layers.last().unwrap();
        assert_eq!(last.len(), 1, "{n}: one final task");
        let decider = p.tasks.iter().find(|t| t.id == last[0]).unwrap();
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut stack: Vec<&Task> = vec![decider];
        while let Some(t) = stack.pop() {
            for (_, from) in &t.input_from.0 {
                if seen.insert(from.as_str()) {
                    stack.push(p.tasks.iter().find(|x| &x.id == from).unwrap());
                }
            }
        }
        assert_eq!(
            seen.len(),
            p.tasks.len() - 1,
            "{n}: the report cites every member"
        );
        check_variables(p);
    }
}

/// Every `{var}` is declared (or is `upstream_context`), every declared
/// variable is used in a task's prompt, and an optional one has a default.
fn check_variables(p: &Preset) {
    let n = &p.name;
    let declared: BTreeSet<&str> = p.variables.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(declared.len(), p.variables.len(), "{n}: duplicate variable");
    let mut in_tasks = BTreeSet::new();
    for t in &p.tasks {
        in_tasks.extend(placeholders(&t.prompt_template));
    }
    let mut used = in_tasks.clone();
    for a in &p.agents {
        used.extend(placeholders(&a.system_prompt));
    }
    for u in &used {
        assert!(
            u == "upstream_context" || declared.contains(u.as_str()),
            "{n}: {{{u}}} is not declared"
        );
    }
    for v in &p.variables {
        assert!(in_tasks.contains(&v.name), "{n}: {} is never used", v.name);
        assert!(!v.description.trim().is_empty(), "{n}: {}", v.name);
        if v.name == "target" {
            assert!(v.required, "{n}: target is required");
        }
        if !v.required {
            assert!(v.default.is_some(), "{n}: {} needs a default", v.name);
        }
    }
}

/// The task's prompt as a worker gets it: defaults, then `vars`; the
/// upstream context where the template says.
fn render(p: &Preset, task: &Task, vars: &[(&str, &str)], upstream: &str) -> String {
    let mut values: HashMap<String, String> = p
        .variables
        .iter()
        .filter_map(|v| Some((v.name.clone(), v.default.clone()?)))
        .collect();
    for (k, v) in vars {
        values.insert(k.to_string(), v.to_string());
    }
    let mut out = task.prompt_template.replace("{upstream_context}", upstream);
    for (k, v) in &values {
        out = out.replace(&format!("{{{k}}}"), v);
    }
    out.trim_end().to_string()
}

fn planned(prompt: &str, offered: &[String]) -> Vec<PlannedCall> {
    match plan(&[Message::system("s"), Message::user(prompt)], offered) {
        Plan::Call(c) => vec![c],
        Plan::Calls(c) => c,
        Plan::Answer(a) => panic!("no calls planned for:\n{prompt}\n---\n{a}"),
    }
}

/// What a call computes: the tool and its indicator or strategy.
fn signature(c: &PlannedCall) -> String {
    let what = c.args["indicator"]
        .as_str()
        .or(c.args["config"]["strategy"]["name"].as_str())
        .unwrap_or("");
    format!("{}:{what}", c.name)
}

#[test]
fn every_members_prompt_plans_real_tool_calls_offline() {
    let registry = registry_names();
    for p in presets() {
        for t in p.tasks.iter().filter(|t| t.depends_on.is_empty()) {
            let agent = p.agents.iter().find(|a| a.id == t.agent_id).unwrap();
            let prompt = render(&p, t, &[("target", "AAPL")], "");
            let calls = planned(&prompt, &agent.tools);
            for c in &calls {
                assert!(
                    agent.tools.contains(&c.name) && registry.contains(&c.name),
                    "{}/{}: {}",
                    p.name,
                    t.id,
                    c.name
                );
                // Only tickers the prompt names.
                if let Some(sym) = c.args["symbol"].as_str() {
                    assert!(prompt.contains(sym), "{}/{}: {}", p.name, t.id, c.args);
                }
            }
            // Several angles per researcher, so no one is a single lookup.
            let kinds: BTreeSet<String> = calls.iter().map(signature).collect();
            assert!(
                kinds.len() >= 2 || calls.len() >= 2,
                "{}/{}: {kinds:?}",
                p.name,
                t.id
            );
        }
    }
}

/// No member's prompt asks for a tool its agent does not have (the planner
/// would drop the angle): planned with every tool offered, each call is one
/// of the agent's.
#[test]
fn every_prompt_asks_only_for_its_agents_tools() {
    let everything: Vec<String> = ALLOWED_TOOLS.iter().map(|s| s.to_string()).collect();
    let upstream = "## Upstream results\n\n### a (task-a, Analyst)\n| AAPL close | 69.01 | 2012-12-31 | get_market_data |\n";
    for p in presets() {
        for t in &p.tasks {
            let agent = p.agents.iter().find(|a| a.id == t.agent_id).unwrap();
            let prompt = render(&p, t, &[("target", "AAPL")], upstream);
            let calls = match plan(&[Message::user(prompt.as_str())], &everything) {
                Plan::Call(c) => vec![c],
                Plan::Calls(c) => c,
                Plan::Answer(_) => Vec::new(),
            };
            for c in calls {
                assert!(
                    agent.tools.contains(&c.name),
                    "{}/{} asks for {} but {} has {:?}",
                    p.name,
                    t.id,
                    c.name,
                    agent.id,
                    agent.tools
                );
            }
        }
    }
}

#[test]
fn investment_committee_members_run_different_tools() {
    let p = preset("investment_committee");
    let upstream = "## Upstream results\n\n### bull_report (task-bull, Bull-side Researcher)\n| AAPL close | 69.01 | 2012-12-31 | get_market_data |\n";
    let mut sets: Vec<(String, BTreeSet<String>)> = Vec::new();
    for t in &p.tasks {
        let agent = p.agents.iter().find(|a| a.id == t.agent_id).unwrap();
        let prompt = render(&p, t, &[("target", "AAPL")], upstream);
        let calls = planned(&prompt, &agent.tools);
        sets.push((t.id.clone(), calls.iter().map(signature).collect()));
    }
    for (i, (a, sa)) in sets.iter().enumerate() {
        for (b, sb) in &sets[i + 1..] {
            assert_ne!(sa, sb, "{a} and {b} plan the same tools");
        }
    }
    let tools: BTreeSet<&str> = sets
        .iter()
        .flat_map(|(_, s)| s.iter())
        .map(|s| s.split(':').next().unwrap())
        .collect();
    for want in [
        "get_market_data",
        "technical_indicator",
        "backtest",
        "recall",
    ] {
        assert!(
            tools.contains(want),
            "prices, indicators, a backtest and memory: {tools:?}"
        );
    }
}

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");

/// `vibedesk run --json -p PROMPT` on the offline planner in `home`: its
/// events, after checking it exited 0.
async fn offline_run(home: &Path, prompt: &str) -> Vec<Value> {
    let out = Command::new(BIN)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("VIBEDESK_HOME", home)
        .args(["run", "--json", "-p", prompt])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn answer_of(evs: &[Value]) -> String {
    let finished = evs.iter().find(|e| e["type"] == "run_finished").unwrap();
    assert_eq!(finished["status"], "success", "{finished}");
    evs.iter().rfind(|e| e["type"] == "answer").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The value cell of the key-figures row `figure`, as a number.
fn figure(answer: &str, figure: &str) -> f64 {
    let row = answer
        .lines()
        .find(|l| l.starts_with(&format!("| {figure} |")))
        .unwrap_or_else(|| panic!("no {figure} row in:\n{answer}"));
    let cell = row.split('|').nth(2).unwrap().trim();
    cell.trim_end_matches(" %")
        .parse()
        .unwrap_or_else(|_| panic!("{row}"))
}

/// Issue 18's offline promise, one worker at a time through the real
/// binary: the bull and the bear run their own tools on the embedded data
/// and answer with real numbers; the risk officer, given their answers as
/// the swarm passes them, quotes each under its `input_from` key.
#[tokio::test]
async fn offline_members_answer_with_real_numbers_and_the_reader_cites_both() {
    let home = tempfile::tempdir().unwrap();
    let p = preset("investment_committee");
    let task = |id: &str| p.tasks.iter().find(|t| t.id == id).unwrap();
    let vars = [("target", "AAPL")];

    let bull_evs = offline_run(home.path(), &render(&p, task("task-bull"), &vars, "")).await;
    let finished: Vec<(&str, &str)> = bull_evs
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .map(|e| (e["tool"].as_str().unwrap(), e["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        finished.iter().map(|f| f.0).collect::<BTreeSet<_>>(),
        BTreeSet::from(["get_market_data", "technical_indicator", "backtest"]),
        "{finished:?}"
    );
    assert!(finished.iter().all(|f| f.1 == "ok"), "{finished:?}");
    let turns: BTreeSet<u64> = bull_evs
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .map(|e| e["iter"].as_u64().unwrap())
        .collect();
    assert_eq!(
        (finished.len(), turns.len()),
        (4, 1),
        "four calls in one turn"
    );
    let bull = answer_of(&bull_evs);
    let close = figure(&bull, "AAPL close");
    assert!(close > 0.0, "{bull}");
    let sharpe = figure(&bull, "AAPL sma_crossover(20/50) Sharpe");
    assert!(sharpe.is_finite() && sharpe != 0.0, "{bull}");
    assert!(figure(&bull, "AAPL SMA(50) latest") > 0.0);

    let bear =
        answer_of(&offline_run(home.path(), &render(&p, task("task-bear"), &vars, "")).await);
    let deepest = figure(&bear, "AAPL drawdown deepest");
    assert!(deepest < 0.0, "{bear}");

    // The upstream context exactly as the contract writes it.
    let upstream = format!(
        "## Upstream results\n\n### bull_report (task-bull, Bull-side Researcher)\n{bull}\n\n### bear_report (task-bear, Bear-side Researcher)\n{bear}"
    );
    let risk_evs = offline_run(
        home.path(),
        &render(&p, task("task-risk"), &vars, &upstream),
    )
    .await;
    let risk = answer_of(&risk_evs);
    assert!(
        risk_evs
            .iter()
            .any(|e| e["type"] == "tool_call_finished" && e["tool"] == "recall"),
        "the risk officer's own angle: memory"
    );
    for want in [
        "#### bull_report (task-bull, Bull-side Researcher)".to_string(),
        "#### bear_report (task-bear, Bear-side Researcher)".to_string(),
        format!("AAPL close: {close:.2}"),
        format!("AAPL sma_crossover(20/50) Sharpe: {sharpe:.2}"),
        format!("AAPL drawdown deepest: {deepest:.2} %"),
        "| AAPL ATR(14) latest |".to_string(),
    ] {
        assert!(risk.contains(&want), "{want} in:\n{risk}");
    }
}
