//! Validation (docs §14.2): errors (duplicate ids, unknown agents, unknown
//! `input_from` tasks, cycles, unknown tools or skills, dependencies on
//! unknown tasks) and warnings (`input_from` from a task that is not
//! upstream, variables used but not declared or declared but not used),
//! each with the YAML line, and the topological layers of the task DAG.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use serde::Serialize;

use super::preset::Preset;
use super::template::{UPSTREAM_CONTEXT, placeholders};

/// What a preset may name: the tools of the registry the workers get and
/// the skills the session knows.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    pub tools: BTreeSet<String>,
    pub skills: BTreeSet<String>,
}

impl Catalog {
    /// The tools of `deps`' registry and its skills: what a worker built
    /// from this template can use.
    pub fn from_deps(deps: &crate::agent::LoopDeps) -> Self {
        Catalog {
            tools: deps
                .registry
                .names()
                .into_iter()
                .map(String::from)
                .chain(
                    deps.late_tools
                        .snapshot()
                        .iter()
                        .map(|t| t.name().to_string()),
                )
                .collect(),
            skills: deps.skills.iter().map(|s| s.name.clone()).collect(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

/// One finding, with the line it is about (0 when the line is unknown).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Issue {
    pub severity: Severity,
    pub line: u64,
    pub message: String,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        if self.line > 0 {
            write!(f, "line {}: {kind}: {}", self.line, self.message)
        } else {
            write!(f, "{kind}: {}", self.message)
        }
    }
}

/// What `inspect` found: issues in file order, and the layers (empty when
/// the DAG has errors that make them meaningless).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Inspection {
    pub issues: Vec<Issue>,
    pub layers: Vec<Vec<String>>,
}

impl Inspection {
    pub fn errors(&self) -> impl Iterator<Item = &Issue> {
        self.issues.iter().filter(|i| i.severity == Severity::Error)
    }

    pub fn warnings(&self) -> impl Iterator<Item = &Issue> {
        self.issues
            .iter()
            .filter(|i| i.severity == Severity::Warning)
    }

    pub fn is_ok(&self) -> bool {
        self.errors().next().is_none()
    }
}

struct Findings(Vec<Issue>);

impl Findings {
    fn error(&mut self, line: u64, message: String) {
        self.0.push(Issue {
            severity: Severity::Error,
            line,
            message,
        });
    }
    fn warning(&mut self, line: u64, message: String) {
        self.0.push(Issue {
            severity: Severity::Warning,
            line,
            message,
        });
    }
}

/// Checks `preset` against `catalog` (docs §14.2).
pub fn inspect(preset: &Preset, catalog: &Catalog) -> Inspection {
    let mut f = Findings(Vec::new());
    check_ids(preset, &mut f);
    check_agents(preset, catalog, &mut f);
    check_references(preset, &mut f);
    let layers = match layers(preset) {
        Ok(l) => l,
        Err(cycle) => {
            let line = preset.task(&cycle[0]).map_or(0, |t| t.id.line);
            f.error(
                line,
                format!("the tasks form a cycle: {}", cycle.join(" -> ")),
            );
            Vec::new()
        }
    };
    check_input_from_upstream(preset, &mut f);
    check_variables(preset, &mut f);
    let mut issues = f.0;
    issues.sort_by_key(|i| i.line);
    let layers = if issues.iter().any(|i| i.severity == Severity::Error) {
        Vec::new()
    } else {
        layers
    };
    Inspection { issues, layers }
}

fn check_ids(preset: &Preset, f: &mut Findings) {
    if preset.tasks.is_empty() {
        f.error(0, "the preset has no tasks".into());
    }
    let mut seen: HashMap<&str, u64> = HashMap::new();
    for a in &preset.agents {
        if let Some(first) = seen.insert(a.id.as_str(), a.id.line) {
            f.error(
                a.id.line,
                format!("duplicate agent id '{}' (first on line {first})", a.id),
            );
        }
    }
    let mut seen: HashMap<&str, u64> = HashMap::new();
    for t in &preset.tasks {
        if let Some(first) = seen.insert(t.id.as_str(), t.id.line) {
            f.error(
                t.id.line,
                format!("duplicate task id '{}' (first on line {first})", t.id),
            );
        }
    }
}

fn check_agents(preset: &Preset, catalog: &Catalog, f: &mut Findings) {
    for a in &preset.agents {
        for tool in &a.tools {
            if !catalog.tools.contains(tool.as_str()) {
                f.error(
                    tool.line,
                    format!("agent '{}' names unknown tool '{tool}'", a.id),
                );
            }
        }
        for skill in &a.skills {
            if !catalog.skills.contains(skill.as_str()) {
                f.error(
                    skill.line,
                    format!("agent '{}' names unknown skill '{skill}'", a.id),
                );
            }
        }
        if a.max_iterations == 0 {
            f.error(a.id.line, format!("agent '{}' has max_iterations 0", a.id));
        }
        if a.timeout_seconds == 0 {
            f.error(a.id.line, format!("agent '{}' has timeout_seconds 0", a.id));
        }
    }
}

fn check_references(preset: &Preset, f: &mut Findings) {
    for t in &preset.tasks {
        if preset.agent(t.agent_id.as_str()).is_none() {
            f.error(
                t.agent_id.line,
                format!("task '{}' names unknown agent '{}'", t.id, t.agent_id),
            );
        }
        for d in &t.depends_on {
            if preset.task(d.as_str()).is_none() {
                f.error(
                    d.line,
                    format!("task '{}' depends on unknown task '{d}'", t.id),
                );
            }
        }
        for (key, source) in &t.input_from.0 {
            if preset.task(source.as_str()).is_none() {
                f.error(
                    source.line,
                    format!(
                        "task '{}' takes input '{key}' from unknown task '{source}'",
                        t.id
                    ),
                );
            }
        }
    }
}

/// `input_from` naming a task that is not among the task's ancestors: its
/// answer would not exist yet when the task starts (the original warns too).
fn check_input_from_upstream(preset: &Preset, f: &mut Findings) {
    for t in &preset.tasks {
        let ancestors = ancestors(preset, t.id.as_str());
        for (key, source) in &t.input_from.0 {
            if preset.task(source.as_str()).is_some() && !ancestors.contains(source.as_str()) {
                f.warning(
                    source.line,
                    format!(
                        "task '{}' takes input '{key}' from '{source}', which is not upstream of it (its result will be missing)",
                        t.id
                    ),
                );
            }
        }
    }
}

/// Every task `id` depends on, directly or not.
pub fn ancestors<'a>(preset: &'a Preset, id: &str) -> BTreeSet<&'a str> {
    let mut out = BTreeSet::new();
    let mut stack: Vec<&str> = preset
        .task(id)
        .map(|t| t.depends_on.iter().map(|d| d.as_str()).collect())
        .unwrap_or_default();
    while let Some(next) = stack.pop() {
        if let Some(t) = preset.task(next)
            && out.insert(t.id.as_str())
        {
            stack.extend(t.depends_on.iter().map(|d| d.as_str()));
        }
    }
    out
}

fn check_variables(preset: &Preset, f: &mut Findings) {
    let declared: BTreeMap<&str, u64> = preset
        .variables
        .iter()
        .map(|v| (v.name.as_str(), v.name.line))
        .collect();
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut undeclared: BTreeMap<String, u64> = BTreeMap::new();
    let texts = preset
        .agents
        .iter()
        .map(|a| (a.system_prompt.as_str(), a.id.line))
        .chain(
            preset
                .tasks
                .iter()
                .map(|t| (t.prompt_template.as_str(), t.id.line)),
        );
    for (text, line) in texts {
        for name in placeholders(text) {
            if name == UPSTREAM_CONTEXT {
                continue;
            }
            if !declared.contains_key(name.as_str()) {
                undeclared.entry(name.clone()).or_insert(line);
            }
            used.insert(name);
        }
    }
    for (name, line) in undeclared {
        f.warning(
            line,
            format!("template variable '{{{name}}}' is used but not declared in variables"),
        );
    }
    for (name, line) in declared {
        if !used.contains(name) {
            f.warning(
                line,
                format!("variable '{name}' is declared but no template uses it"),
            );
        }
    }
}

/// Kahn's algorithm by layers: layer 0 holds the tasks with no
/// dependencies, each next layer the tasks whose dependencies are all in
/// earlier layers; tasks keep the file's order within a layer. `Err` holds
/// one cycle. Dependencies on unknown tasks are ignored here (they are
/// reported as errors on their own).
pub fn layers(preset: &Preset) -> Result<Vec<Vec<String>>, Vec<String>> {
    let known: BTreeSet<&str> = preset.tasks.iter().map(|t| t.id.as_str()).collect();
    let mut placed: BTreeSet<&str> = BTreeSet::new();
    let mut out: Vec<Vec<String>> = Vec::new();
    while placed.len() < known.len() {
        let mut layer: Vec<String> = Vec::new();
        for t in &preset.tasks {
            let id = t.id.as_str();
            let ready = !placed.contains(id)
                && t.depends_on
                    .iter()
                    .all(|d| placed.contains(d.as_str()) || !known.contains(d.as_str()));
            // Duplicate ids collapse to one entry.
            if ready && !layer.iter().any(|l| l == id) {
                layer.push(id.to_string());
            }
        }
        if layer.is_empty() {
            return Err(find_cycle(preset, &placed));
        }
        for id in &layer {
            if let Some(t) = preset.task(id) {
                placed.insert(t.id.as_str());
            }
        }
        out.push(layer);
    }
    Ok(out)
}

/// A cycle among the tasks not yet placed: walk dependencies from any of
/// them until a task repeats.
fn find_cycle(preset: &Preset, placed: &BTreeSet<&str>) -> Vec<String> {
    let Some(start) = preset
        .tasks
        .iter()
        .find(|t| !placed.contains(t.id.as_str()))
    else {
        return Vec::new();
    };
    let mut path: Vec<&str> = vec![start.id.as_str()];
    let mut current = start;
    loop {
        let Some(next) = current
            .depends_on
            .iter()
            .filter_map(|d| preset.task(d.as_str()))
            .find(|t| !placed.contains(t.id.as_str()))
        else {
            return path.into_iter().map(String::from).collect();
        };
        if let Some(pos) = path.iter().position(|id| *id == next.id.as_str()) {
            let mut cycle: Vec<String> = path[pos..].iter().map(|s| s.to_string()).collect();
            cycle.push(next.id.value.clone());
            // Written in the direction of the edges: a depends on b.
            return cycle;
        }
        path.push(next.id.as_str());
        current = next;
    }
}

/// A required variable with no value and no default.
#[derive(Debug, thiserror::Error)]
pub enum VariableError {
    #[error(
        "missing required variable{}: {}; pass --var {}=VALUE",
        if .0.len() > 1 { "s" } else { "" },
        .0.iter().map(|(n, d)| if d.is_empty() { n.clone() } else { format!("{n} ({d})") }).collect::<Vec<_>>().join(", "),
        .0.first().map(|(n, _)| n.as_str()).unwrap_or("name")
    )]
    Missing(Vec<(String, String)>),
}

/// The values the templates get: the given ones, then the defaults. A
/// required variable without either is an error before anything starts.
pub fn resolve_variables(
    preset: &Preset,
    given: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, VariableError> {
    let mut out = given.clone();
    let mut missing = Vec::new();
    for v in &preset.variables {
        if out.contains_key(v.name.as_str()) {
            continue;
        }
        match &v.default {
            Some(d) => {
                out.insert(v.name.value.clone(), d.clone());
            }
            None if v.required => missing.push((v.name.value.clone(), v.description.clone())),
            None => {}
        }
    }
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(VariableError::Missing(missing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swarm::preset::parse;

    fn catalog() -> Catalog {
        Catalog {
            tools: ["bash", "read_file"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            skills: ["technical-basic"].iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn layers_follow_dependencies() {
        let p = parse(
            "name: x\nagents: [{id: a}]\ntasks:\n  - {id: d, agent_id: a, depends_on: [b, c]}\n  - {id: b, agent_id: a}\n  - {id: c, agent_id: a, depends_on: [b]}\n  - {id: e, agent_id: a}\n",
            "x",
        )
        .unwrap();
        let r = inspect(&p, &catalog());
        assert!(r.is_ok(), "{:?}", r.issues);
        assert_eq!(r.layers, vec![vec!["b", "e"], vec!["c"], vec!["d"]]);
    }

    #[test]
    fn every_error_has_its_line() {
        let yaml = "name: bad
agents:
  - id: a
    tools: [bash, nope]
    skills: [no-such-skill]
  - id: a
tasks:
  - id: t1
    agent_id: ghost
    prompt_template: \"{undeclared}\"
  - id: t1
    agent_id: a
  - id: t2
    agent_id: a
    depends_on: [t3]
    input_from:
      x: missing
      y: t4
  - id: t3
    agent_id: a
    depends_on: [t2]
  - id: t4
    agent_id: a
variables:
  - name: unused
";
        let p = parse(yaml, "bad").unwrap();
        let r = inspect(&p, &catalog());
        let shown: Vec<String> = r.issues.iter().map(|i| i.to_string()).collect();
        let has = |needle: &str| shown.iter().any(|s| s.contains(needle));
        assert!(
            has("line 4: error: agent 'a' names unknown tool 'nope'"),
            "{shown:#?}"
        );
        assert!(has(
            "line 5: error: agent 'a' names unknown skill 'no-such-skill'"
        ));
        assert!(has(
            "line 6: error: duplicate agent id 'a' (first on line 3)"
        ));
        assert!(has("line 9: error: task 't1' names unknown agent 'ghost'"));
        assert!(has(
            "line 11: error: duplicate task id 't1' (first on line 8)"
        ));
        assert!(has(
            "line 17: error: task 't2' takes input 'x' from unknown task 'missing'"
        ));
        assert!(has(
            "line 18: warning: task 't2' takes input 'y' from 't4', which is not upstream"
        ));
        assert!(has("error: the tasks form a cycle: t2 -> t3 -> t2"));
        assert!(has(
            "line 8: warning: template variable '{undeclared}' is used but not declared"
        ));
        assert!(has(
            "line 25: warning: variable 'unused' is declared but no template uses it"
        ));
        assert!(r.layers.is_empty());
    }

    #[test]
    fn missing_required_variables_are_named() {
        let p = parse(
            "name: x\nagents: [{id: a}]\ntasks: [{id: t, agent_id: a, prompt_template: '{target} {market}'}]\nvariables:\n  - {name: target, required: true, description: the ticker}\n  - {name: market, required: true, default: US}\n",
            "x",
        )
        .unwrap();
        let e = resolve_variables(&p, &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "missing required variable: target (the ticker); pass --var target=VALUE"
        );
        let given = BTreeMap::from([("target".to_string(), "AAPL".to_string())]);
        let vars = resolve_variables(&p, &given).unwrap();
        assert_eq!(vars["market"], "US");
    }
}
