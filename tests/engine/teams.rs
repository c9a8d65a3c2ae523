//! The shipped research-team presets (docs §14.1) and the offline planner
//! working as their members: every preset parses with the spec's keys, names
//! only tools the registry has and skills that ship, declares exactly the
//! variables it uses and forms a DAG; each member's prompt plans real tool
//! calls, and the binary answers one with real numbers. The presets are read
//! with `serde-saphyr` into the structs below, not through the swarm room's
//! loader, so these checks stand on their own.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::NaiveDate;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use tokio::process::Command;
use vibedesk::model::Message;
use vibedesk::planner::{Plan, PlannedCall, plan};
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
    decision: Option<String>,
    #[serde(default)]
    thresholds: BTreeMap<String, f64>,
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

/// The tools a preset may name: the manifest's built-ins, less the
/// agent's own (`compact`), which every loop has.
fn allowed_tools() -> Vec<&'static str> {
    use vibedesk::tools::builtin::{Family, MANIFEST};
    MANIFEST
        .iter()
        .filter(|e| e.family != Family::Agent)
        .map(|e| e.name)
        .collect()
}

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
    vibedesk::tools::builtin::quant::register_quant_tools(
        &mut r,
        vibedesk::research::data::DataConfig::offline(),
    )
    .unwrap();
    vibedesk::tools::builtin::stats::register_stats_tools(
        &mut r,
        vibedesk::research::data::DataConfig::offline(),
    )
    .unwrap();
    vibedesk::tools::builtin::factor::register_factor_tools(
        &mut r,
        vibedesk::research::data::DataConfig::offline(),
    )
    .unwrap();
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

/// Every shipped reader (a task with upstream inputs) names its decision
/// rule, each a rule the planner has, and every rule is some team's.
#[test]
fn every_shipped_reader_names_a_known_decision_rule() {
    use vibedesk::model::team_rules::RULES;
    let mut used = BTreeSet::new();
    for p in presets() {
        for t in &p.tasks {
            if t.input_from.0.is_empty() {
                assert!(
                    t.decision.is_none(),
                    "{}/{}: no inputs to decide on",
                    p.name,
                    t.id
                );
                continue;
            }
            let rule = t
                .decision
                .as_deref()
                .unwrap_or_else(|| panic!("{}/{} names no decision rule", p.name, t.id));
            assert!(RULES.contains(&rule), "{}/{}: '{rule}'", p.name, t.id);
            assert!(used.insert(rule.to_string()), "'{rule}' is one team's rule");
        }
        // And validation accepts it as the swarm reads it.
        let text = BUNDLED.iter().find(|(n, _)| *n == p.name).unwrap().1;
        let parsed = vibedesk::swarm::preset::parse(text, &p.name).unwrap();
        let catalog = vibedesk::swarm::validate::Catalog {
            tools: allowed_tools().iter().map(|s| s.to_string()).collect(),
            skills: shipped_skills(),
        };
        let r = vibedesk::swarm::validate::inspect(&parsed, &catalog);
        assert!(r.is_ok(), "{}: {:?}", p.name, r.issues);
    }
    assert_eq!(
        used,
        RULES.iter().map(|r| r.to_string()).collect::<BTreeSet<_>>()
    );
}

/// One definition of the team thresholds (docs §14.7): every shipped
/// reader sets each threshold of its rule, at the default; docs §14.7's
/// threshold table is that definition row for row; and a reader's prompt
/// names its numbers as `{name}` placeholders of its rule, never as a
/// second written copy of a default.
#[test]
fn shipped_thresholds_are_the_defaults_and_the_documented_ones() {
    use vibedesk::model::team_rules::{THRESHOLDS, thresholds_of};
    let docs = std::fs::read_to_string(repo().join("docs/14-swarm.md")).unwrap();
    let section = docs
        .split("### 14.7 ")
        .nth(1)
        .and_then(|s| s.split("\n### ").next())
        .unwrap();
    let documented: Vec<(String, String, String)> = section
        .lines()
        .filter(|l| l.starts_with("| `") && l.matches('|').count() == 5)
        .map(|l| {
            let c: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (
                c[0].trim_matches('`').to_string(),
                c[1].trim_matches('`').to_string(),
                c[2].to_string(),
            )
        })
        .collect();
    let defined: Vec<(String, String, String)> = THRESHOLDS
        .iter()
        .flat_map(|(r, t)| {
            t.iter()
                .map(move |(n, v)| (r.to_string(), n.to_string(), format!("{v}")))
        })
        .collect();
    assert_eq!(documented, defined, "docs §14.7's threshold table");
    let mut set = BTreeSet::new();
    for p in presets() {
        for t in &p.tasks {
            let Some(rule) = t.decision.as_deref() else {
                assert!(t.thresholds.is_empty(), "{}/{}", p.name, t.id);
                continue;
            };
            let want: BTreeMap<String, f64> = thresholds_of(rule)
                .iter()
                .map(|(n, v)| (n.to_string(), *v))
                .collect();
            assert_eq!(t.thresholds, want, "{}/{}: {rule}", p.name, t.id);
            set.insert(rule.to_string());
            // Numbers the rule decides by are placeholders, not literals:
            // a default written out beside a threshold word would be a
            // second copy (a test cannot tell every such word, so it checks
            // the placeholders resolve and the sentence keeps none of the
            // old literals of the rule's percentages).
            let text = &t.prompt_template;
            for (name, v) in thresholds_of(rule) {
                let literal = format!("{v} %");
                if v.abs() >= 5.0 && text.contains(&format!("{{{name}}}")) {
                    assert!(
                        !text.contains(&literal),
                        "{}/{}: '{literal}' beside {{{name}}}",
                        p.name,
                        t.id
                    );
                }
            }
        }
    }
    let all: BTreeSet<String> = THRESHOLDS.iter().map(|(r, _)| r.to_string()).collect();
    assert_eq!(set, all, "every rule with thresholds has a shipped reader");
}

/// A reader's prompt is sent with its rule's thresholds in place: the
/// shipped macro strategist's `{min_sharpe_gap}` reads 1, and a preset of
/// the user's that sets 0.25 says 0.25, carries it on the rule line and
/// decides by it (the offline regimes' gap lies between the two).
#[tokio::test]
async fn a_readers_prompt_states_the_thresholds_in_force() {
    let home = tempfile::tempdir().unwrap();
    let presets_dir = home.path().join("config/swarm");
    std::fs::create_dir_all(&presets_dir).unwrap();
    let shipped = std::fs::read_to_string(repo().join("assets/swarm/macro_rates.yaml")).unwrap();
    assert!(shipped.contains("{min_sharpe_gap}"));
    let mine = shipped
        .replace("name: macro_rates", "name: macro_mine")
        .replace("{min_sharpe_gap: 1.0}", "{min_sharpe_gap: 0.25}");
    std::fs::write(presets_dir.join("macro_mine.yaml"), mine).unwrap();
    let mut titles = Vec::new();
    for (name, want, line) in [
        (
            "macro_rates",
            "differ by 1 or more",
            "Decision rule: macro_regimes; min_sharpe_gap=1\n",
        ),
        (
            "macro_mine",
            "differ by 0.25 or more",
            "Decision rule: macro_regimes; min_sharpe_gap=0.25\n",
        ),
    ] {
        let out = Command::new(BIN)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("VIBEDESK_HOME", home.path())
            .args(["swarm", "run", name, "--var", "target=XOM"])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .unwrap();
        let report = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The newest run's strategist message.
        let mut runs: Vec<PathBuf> = std::fs::read_dir(home.path().join("data/swarm"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        runs.sort();
        let msgs = runs
            .iter()
            .rev()
            .find_map(|r| {
                std::fs::read_to_string(r.join("tasks/task-strategy/messages.jsonl")).ok()
            })
            .unwrap();
        let first: Value = serde_json::from_str(msgs.lines().next().unwrap()).unwrap();
        let msg = first["content"].as_str().unwrap();
        assert!(msg.contains(want), "{name}: {msg}");
        assert!(msg.contains(line), "{name}: {msg}");
        std::fs::remove_dir_all(home.path().join("data/swarm")).unwrap();
        titles.push(
            report
                .lines()
                .find(|l| l.contains("## Decision: "))
                .unwrap_or_default()
                .to_string(),
        );
    }
    assert!(titles.iter().all(|t| !t.is_empty()), "{titles:?}");
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
                assert!(allowed_tools().contains(&t.as_str()), "{n}/{}: {t}", a.id);
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
        let own = t
            .decision
            .as_deref()
            .map_or(&[][..], vibedesk::model::team_rules::thresholds_of);
        in_tasks.extend(
            placeholders(&t.prompt_template)
                .into_iter()
                .filter(|n| !own.iter().any(|(o, _)| o == n)),
        );
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
    if let Some(rule) = task.decision.as_deref() {
        let given: Vec<(String, f64)> = task.thresholds.clone().into_iter().collect();
        values.extend(vibedesk::model::team_rules::in_force(rule, &given));
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
        Plan::Answer(a) | Plan::Unsupported(a) => {
            panic!("no calls planned for:\n{prompt}\n---\n{a}")
        }
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
    let everything: Vec<String> = allowed_tools().iter().map(|s| s.to_string()).collect();
    let upstream = "## Upstream results\n\n### a (task-a, Analyst)\n| AAPL close | 69.01 | 2012-12-31 | get_market_data |\n";
    for p in presets() {
        for t in &p.tasks {
            let agent = p.agents.iter().find(|a| a.id == t.agent_id).unwrap();
            let prompt = render(&p, t, &[("target", "AAPL")], upstream);
            let calls = match plan(&[Message::user(prompt.as_str())], &everything) {
                Plan::Call(c) => vec![c],
                Plan::Calls(c) => c,
                Plan::Answer(_) | Plan::Unsupported(_) => Vec::new(),
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
    // The rebuttals read the two cases and call nothing.
    for t in p.tasks.iter().filter(|t| !t.id.ends_with("-rebuttal")) {
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
    let sharpe = figure(
        &bull,
        "AAPL sma_crossover(20/50) Sharpe (annualized, rf 3-month T-bill)",
    );
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
        format!("AAPL sma_crossover(20/50) Sharpe (annualized, rf 3-month T-bill): {sharpe:.2}"),
        format!("AAPL drawdown deepest: {deepest:.2} %"),
        "| AAPL ATR(14) latest |".to_string(),
    ] {
        assert!(risk.contains(&want), "{want} in:\n{risk}");
    }
}

// ---------------------------------------------------------------------------
// Whole teams through the real binary, offline (docs §14.7): the reader
// decides by its team's rule, every number carries a label.

/// `vibedesk swarm run NAME --var k=v …` with no model in a fresh home:
/// the report (stdout), after checking the run succeeded.
async fn swarm_report(name: &str, vars: &[(&str, &str)]) -> String {
    let home = tempfile::tempdir().unwrap();
    let mut c = Command::new(BIN);
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("VIBEDESK_HOME", home.path())
        .args(["swarm", "run", name]);
    for (k, v) in vars {
        c.args(["--var", &format!("{k}={v}")]);
    }
    let out = c
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name}: {}\n{report}",
        String::from_utf8_lossy(&out.stderr)
    );
    report
}

/// The text from the line starting with `head` to the next line starting
/// with `next` (or the end). Answers hold `##` headings of their own, so
/// the report's parts are cut at the report's own markers.
fn part<'a>(text: &'a str, head: &str, next: &str) -> &'a str {
    let at = text
        .find(&format!("\n{head}"))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("no {head} in:\n{text}"));
    let rest = &text[at..];
    let end = rest[1..]
        .find(&format!("\n{next}"))
        .map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

/// The report's conclusion (the final task's answer).
fn conclusion(report: &str) -> &str {
    part(report, "## Conclusion", "## Members\n")
}

/// A member's answer in the report's Members part.
fn member<'a>(report: &'a str, task: &str) -> &'a str {
    let members = part(report, "## Members\n", "\u{0}");
    part(members, &format!("### {task} ("), "### task-")
}

/// (label, value, as of) of each row of a member's key-figures table.
fn findings(answer: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut on = false;
    for l in answer.lines() {
        let cells: Vec<&str> = l
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if cells == ["figure", "value", "as of", "tool"] {
            on = true;
            continue;
        }
        if on && !l.starts_with('|') {
            break;
        }
        if on && cells.len() == 4 && !cells[0].starts_with('-') {
            out.push((
                cells[0].to_string(),
                cells[1].to_string(),
                cells[2].to_string(),
            ));
        }
    }
    out
}

/// How many of `rows` `text` cites from `key` as "label value (`key`, as of)".
fn cited(text: &str, rows: &[(String, String, String)], key: &str) -> usize {
    rows.iter()
        .filter(|(l, v, d)| text.contains(&format!("{l} {v} (`{key}`, {d})")))
        .count()
}

#[tokio::test]
async fn the_committee_states_a_decision_by_its_vote_and_each_side_answers_the_other() {
    let report = swarm_report("investment_committee", &[("target", "AAPL")]).await;
    let c = conclusion(&report);
    let decision = regex::Regex::new(
        r"(?m)^## Decision: (buy|hold|avoid)(, capped at half a position| \(risk veto\))?$",
    )
    .unwrap()
    .captures(c)
    .unwrap_or_else(|| panic!("a decision heading in:\n{c}"));
    // The vote, and the decision it gives by the documented rule.
    let vote = regex::Regex::new(
        r"(?m)^- Vote: (\d) bull, (\d) neutral, (\d) bear; net ([+-]\d+) → (buy|hold|avoid)\.$",
    )
    .unwrap()
    .captures(c)
    .unwrap_or_else(|| panic!("a vote line in:\n{c}"));
    let n = |i: usize| vote[i].parse::<i32>().unwrap();
    assert_eq!(n(1) + n(2) + n(3), 3, "three stances offline: {c}");
    assert_eq!(n(4), n(1) - n(3), "net = bull − bear");
    let by_vote = if n(4) >= 2 {
        "buy"
    } else if n(4) <= -2 {
        "avoid"
    } else {
        "hold"
    };
    assert_eq!(&vote[5], by_vote);
    let veto = c.contains("→ veto");
    assert_eq!(&decision[1], if veto { "avoid" } else { by_vote }, "{c}");
    // Each stance rests on figures its member reported, cited by key.
    let bull = findings(member(&report, "task-bull"));
    let bear = findings(member(&report, "task-bear"));
    assert!(bull.len() >= 4 && bear.len() >= 4, "{report}");
    let rows: Vec<&str> = c.lines().filter(|l| l.starts_with("| ")).collect();
    let row = |key: &str| {
        *rows
            .iter()
            .find(|l| l.contains(&format!("(`{key}`) |")))
            .unwrap_or_else(|| panic!("{key} row in {c}"))
    };
    assert!(
        cited(row("bull_report"), &bull, "bull_report") >= 2,
        "{}",
        row("bull_report")
    );
    assert!(
        cited(row("bear_report"), &bear, "bear_report") >= 2,
        "{}",
        row("bear_report")
    );
    assert!(row("own").contains("buy_and_hold"), "the baseline: {c}");
    assert!(c.contains("- Risk limits (`risk_review`):"), "{c}");
    // The bull's rebuttal quotes a bear figure, the bear's a bull figure,
    // and the conclusion carries both answers.
    let bull_rebuttal = member(&report, "task-bull-rebuttal");
    let bear_rebuttal = member(&report, "task-bear-rebuttal");
    assert!(report.contains("### task-bull-rebuttal (Bull-side Researcher)"));
    assert!(
        cited(bull_rebuttal, &bear, "bear_case") >= 1,
        "{bull_rebuttal}"
    );
    assert!(
        cited(bull_rebuttal, &bull, "own_case") >= 1,
        "{bull_rebuttal}"
    );
    assert!(
        cited(bear_rebuttal, &bull, "bull_case") >= 1,
        "{bear_rebuttal}"
    );
    assert!(
        cited(bear_rebuttal, &bear, "own_case") >= 1,
        "{bear_rebuttal}"
    );
    assert_eq!(c.matches("\n- Debate: The ").count(), 2, "{c}");
    assert!(c.contains("The bull answers the bear's strongest figure"));
    assert!(c.contains("The bear answers the bull's strongest figure"));
}

/// `pairs_stat_arb` on KO/PEP (docs §14.7, §16.3): the tester runs the
/// Engle–Granger test over the period, trades the spread whose ratio the
/// test on the formation window before the start fixed, and the head
/// decides with the cointegration among its tests. Every figure is
/// recomputed here from the embedded data with the library.
#[tokio::test]
async fn pairs_stat_arb_tests_cointegration_and_trades_the_spread() {
    use vibedesk::research::timeseries::{Autolag, Trend, engle_granger};
    let report = swarm_report("pairs_stat_arb", &[("target", "KO"), ("pair", "PEP")]).await;
    let rows = findings(member(&report, "task-reversion"));
    let value = |part: &str| {
        rows.iter()
            .find(|r| r.0.contains(part))
            .unwrap_or_else(|| panic!("{part} in {rows:?}"))
            .clone()
    };
    let day = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
    let logs = |sym: &str, from: &str, to: &str| -> Vec<f64> {
        vibedesk::research::data::embedded::load(sym, Some(day(from)), Some(day(to)))
            .unwrap()
            .bars
            .close
            .iter()
            .map(|c| c.ln())
            .collect()
    };
    // The test over the period, on the log closes.
    let (ko, pep) = (
        logs("KO", "2009-01-01", "2012-12-31"),
        logs("PEP", "2009-01-01", "2012-12-31"),
    );
    assert_eq!(ko.len(), pep.len(), "one calendar");
    let eg = engle_granger(&ko, &pep, Trend::Constant, Autolag::Aic, None).unwrap();
    assert_eq!(
        value("Engle–Granger statistic").1,
        format!("{:.4}", eg.statistic)
    );
    assert_eq!(
        value("KO/PEP Engle–Granger p-value").1,
        format!("{:.4}", eg.p_value)
    );
    assert_eq!(
        value("hedge ratio (Engle–Granger").1,
        format!("{:.4}", eg.hedge_ratio)
    );
    let half = value("cointegrated spread half-life").1;
    assert_eq!(
        half,
        eg.half_life
            .half_life
            .map_or("none: the spread does not revert".into(), |h| format!(
                "{h:.1} bars"
            ))
    );
    // The traded spread: the ratio of the test on the 252 common bars
    // before the start, held fixed.
    let (ko8, pep8) = (
        logs("KO", "2007-01-01", "2008-12-31"),
        logs("PEP", "2007-01-01", "2008-12-31"),
    );
    let (a, b) = (&ko8[ko8.len() - 252..], &pep8[pep8.len() - 252..]);
    let formation = engle_granger(a, b, Trend::Constant, Autolag::Aic, None).unwrap();
    let (label, hedge, _) = value("held fixed");
    assert!(
        label.contains(
            "β of ln KO on ln PEP, Engle–Granger on the formation window 2008-01-03 to 2008-12-31"
        ),
        "{label}"
    );
    assert_eq!(hedge, format!("{:.4}", formation.hedge_ratio), "{report}");
    assert_eq!(
        value("formation Engle–Granger p-value").1,
        format!("{:.4}", formation.p_value)
    );
    value("spread z-score (latest)");
    // The head decides by the rule, the cointegration among its tests.
    let c = conclusion(&report);
    assert!(
        regex::Regex::new(
            r"(?m)^## Decision: (worth a spread model|not worth a spread model|watch list)$"
        )
        .unwrap()
        .is_match(c),
        "{c}"
    );
    for test in [
        "| co-movement |",
        "| cointegration |",
        "| reversion |",
        "| spread trade after costs |",
    ] {
        assert!(c.contains(test), "{test} in {c}");
    }
    assert!(c.contains("KO/PEP Engle–Granger p-value"), "{c}");
    assert!(c.contains("spread z-score (latest)"), "{c}");
}

#[tokio::test]
async fn the_quant_desk_ranks_in_sample_and_out_of_sample_apart() {
    let report = swarm_report("quant_strategy_desk", &[("target", "AAPL")]).await;
    let c = conclusion(&report);
    let list = |head: &str| -> Vec<(String, f64, String)> {
        let at = c.find(head).unwrap_or_else(|| panic!("{head} in {c}"));
        c[at..]
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with(|ch: char| ch.is_ascii_digit()))
            .map(|l| {
                let re = regex::Regex::new(r"^\d+\. (.+) (-?\d+\.\d+) \(`(\w+)`\)$").unwrap();
                let m = re.captures(l).unwrap_or_else(|| panic!("{l}"));
                (m[1].to_string(), m[2].parse().unwrap(), m[3].to_string())
            })
            .collect()
    };
    let is = list(
        "In-sample backtests, 2005-01-01 to 2010-12-31, ranked by Sharpe (annualized, rf 3-month T-bill):",
    );
    let oos = list(
        "Out-of-sample backtests, 2011-01-01 to 2013-02-28, ranked by Sharpe (annualized, rf 3-month T-bill):",
    );
    assert_eq!(is.len(), 5, "{c}");
    assert_eq!(oos.len(), 2, "{c}");
    for (l, who) in [
        (&is, &["trend", "reversion", "breakout"][..]),
        (&oos, &["validation"][..]),
    ] {
        assert!(l.iter().all(|(_, _, k)| who.contains(&k.as_str())), "{l:?}");
        assert!(l.windows(2).all(|w| w[0].1 >= w[1].1), "ranked: {l:?}");
        let names: BTreeSet<&String> = l.iter().map(|e| &e.0).collect();
        assert_eq!(names.len(), l.len(), "one entry per rule: {l:?}");
    }
    // The same rule appears in both lists, never in one.
    assert!(is.iter().any(|e| e.0 == oos[0].0) || is.iter().any(|e| e.0 == oos[1].0));
    assert!(
        c.contains("| rule | in-sample Sharpe | out-of-sample Sharpe |"),
        "{c}"
    );
    assert!(
        regex::Regex::new(r"(?m)^## Decision: (.+ earned its place \(out-of-sample Sharpe -?\d+\.\d\d\)|no rule earned its place)$").unwrap().is_match(c),
        "{c}"
    );
    assert!(
        !report.contains("has the highest Sharpe"),
        "no ranking across periods"
    );
}

/// The lines of `report` with a number that carries no label (docs §14.7):
/// outside code and headings, and once dates, paths, backticked text,
/// names with parameters (`SMA(50)`) and ids with digits are set aside,
/// - a table row's number needs a header over its column and a first cell
///   with a word or a date, and a key-figures row (`| figure | value | as
///   of | tool |`) names one of the run's `symbols` (failures and memory
///   counts aside);
/// - a quoted figure (`- …` under "What each member found") names one of
///   the run's symbols;
/// - on any other line, a number needs a word of three letters before it in
///   its clause (since the last `. ` or `; `, list ordinals aside).
fn bare_numbers(report: &str, symbols: &[&str]) -> Vec<String> {
    let date = regex::Regex::new(r"\b\d{4}-\d{2}-\d{2}\b").unwrap();
    let num = regex::Regex::new(r"(?:^|[^\w.])([-+−]?\d+(?:[.,]\d+)*(?:\s?%)?)").unwrap();
    let word = regex::Regex::new(r"[A-Za-z]{3}").unwrap();
    let ordinal = regex::Regex::new(r"(^|;\s)\d+\.\s").unwrap();
    let strip = |t: &str| -> String {
        let t = regex::Regex::new(r"`[^`]*`").unwrap().replace_all(t, " ");
        let t = regex::Regex::new(r"\S*/[^\s\d]\S*|\S*[^\s\d]/\S*")
            .unwrap()
            .replace_all(&t, " ");
        let t = date.replace_all(&t, " ");
        let t = regex::Regex::new(r"\w+\([^()]*\)")
            .unwrap()
            .replace_all(&t, " ");
        regex::Regex::new(r"\b[A-Za-z_]+[-_]?\d+\w*")
            .unwrap()
            .replace_all(&t, " ")
            .into_owned()
    };
    let has_num = |t: &str| num.is_match(&strip(t));
    let names_symbol = |t: &str| symbols.iter().any(|s| t.contains(s));
    let lines: Vec<&str> = report.lines().collect();
    let is_rule = |l: &str| {
        l.starts_with('|')
            && l.trim_matches('|')
                .split('|')
                .all(|c| c.trim().chars().all(|ch| "-: ".contains(ch)))
    };
    let (mut out, mut code, mut header, mut quoting) =
        (Vec::new(), false, Vec::<String>::new(), false);
    for (i, raw) in lines.iter().enumerate() {
        let l = raw.trim();
        if l.starts_with("```") {
            code = !code;
            continue;
        }
        if code || l.is_empty() || l.starts_with("Run dir:") || l.starts_with("Preset `") {
            continue;
        }
        if l.starts_with('#') {
            quoting =
                l.starts_with("## What each member found") || (quoting && l.starts_with("####"));
            continue;
        }
        if l.starts_with('|') {
            if is_rule(l) {
                continue;
            }
            let cells: Vec<String> = l
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect();
            if lines.get(i + 1).is_some_and(|n| is_rule(n.trim())) {
                header = cells;
                continue;
            }
            let first_ok = word.is_match(&cells[0]) || date.is_match(&cells[0]);
            let col_ok = |j: usize| header.get(j).is_some_and(|h| word.is_match(h));
            if cells
                .iter()
                .enumerate()
                .skip(1)
                .any(|(j, c)| has_num(c) && !(first_ok && col_ok(j)))
            {
                out.push(l.to_string());
            }
            let key_table = header == ["figure", "value", "as of", "tool"];
            let exempt = cells[0].ends_with(" failed") || cells[0].starts_with("memories");
            if key_table && !exempt && !names_symbol(&cells[0]) {
                out.push(format!("no subject: {l}"));
            }
            continue;
        }
        let body = strip(l.trim_start_matches(['-', '*', ' ']));
        let body = ordinal.replace_all(&body, "$1 ");
        for m in num.captures_iter(&body) {
            let at = m.get(1).map_or(0, |g| g.start());
            let clause = body[..at]
                .rsplit(". ")
                .next()
                .unwrap_or("")
                .rsplit("; ")
                .next()
                .unwrap_or("");
            if !word.is_match(clause) {
                out.push(l.to_string());
                break;
            }
        }
        let exempt =
            l.contains("memories") || l.contains(" failed") || l.contains("no figures given");
        if quoting && l.starts_with("- ") && has_num(l) && !names_symbol(l) && !exempt {
            out.push(format!("no subject: {l}"));
        }
    }
    out
}

#[test]
fn the_bare_number_check_finds_what_it_should() {
    let report = "## Conclusion: t (r)\n\nThe close was 69.01 on 2012-12-31.\n\n42\n\n| metric | value |\n|---|---|\n| | 5.0 |\n| Sharpe | 1.15 |\n\n| figure | value | as of | tool |\n|---|---|---|---|\n| AAPL close | 69.01 | 2012-12-31 | get_market_data |\n| final value | 949702.00 |  | backtest |\n\n## What each member found\n\n#### a (t, r)\n\n- AAPL SMA(50) latest: 72.66 (2012-12-31, technical_indicator)\n- final value: 949702.00\n\nRun dir: /tmp/x/20261205_012424_d7c2ff\n";
    let bare = bare_numbers(report, &["AAPL"]);
    assert_eq!(
        bare,
        vec![
            "42",
            "| | 5.0 |",
            "no subject: | final value | 949702.00 |  | backtest |",
            "no subject: - final value: 949702.00",
        ],
        "{bare:#?}"
    );
}

/// A preset, its variables and the symbols its report is about.
type Run = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static [&'static str],
);

#[tokio::test]
async fn no_shipped_team_report_has_a_bare_number() {
    // Every preset on embedded symbols (crypto_desk too: its rule needs
    // prices, and a crypto pair would be fetched online).
    let runs: [Run; 12] = [
        ("investment_committee", &[("target", "AAPL")], &["AAPL"]),
        (
            "pairs_stat_arb",
            &[("target", "AAPL"), ("pair", "MSFT")],
            &["AAPL", "MSFT"],
        ),
        ("quant_strategy_desk", &[("target", "IBM")], &["IBM"]),
        ("backtest_audit", &[("target", "MSFT")], &["MSFT"]),
        (
            "crypto_desk",
            &[
                ("target", "AAPL"),
                ("start", "2009-01-01"),
                ("end", "2012-12-31"),
            ],
            &["AAPL"],
        ),
        ("equity_research", &[("target", "MSFT")], &["MSFT"]),
        ("factor_research", &[], &["AAPL", "MSFT", "IBM", "GOOG"]),
        ("macro_rates", &[("target", "IBM")], &["IBM"]),
        ("portfolio_review", &[], &["AAPL", "MSFT", "IBM"]),
        ("risk_committee", &[("target", "IBM")], &["IBM", "MSFT"]),
        ("technical_analysis_panel", &[("target", "AAPL")], &["AAPL"]),
        ("options_desk", &[("target", "IBM")], &["IBM"]),
    ];
    let reports =
        futures_util::future::join_all(runs.iter().map(|(name, vars, _)| swarm_report(name, vars)))
            .await;
    let bare: Vec<String> = runs
        .iter()
        .zip(&reports)
        .flat_map(|((name, _, symbols), report)| {
            bare_numbers(report, symbols)
                .into_iter()
                .map(move |l| format!("{name}: {l}"))
        })
        .collect();
    assert!(
        bare.is_empty(),
        "numbers without a label:\n{}",
        bare.join("\n")
    );
    for ((name, _, _), report) in runs.iter().zip(&reports) {
        // Every shipped reader reached a decision by its rule.
        let c = conclusion(report);
        let head = c
            .lines()
            .find(|l| l.starts_with("## ") && !l.starts_with("## Conclusion"))
            .unwrap_or("");
        assert!(
            [
                "## Decision: ",
                "## Ruling: ",
                "## Rating: ",
                "## Reading: ",
                "## Stance: "
            ]
            .iter()
            .any(|p| head.starts_with(p))
                && !head.ends_with("no decision"),
            "{name}: {head}\n{c}"
        );
        assert!(c.contains("Rule (docs §14.7):"), "{name}");
    }
}
