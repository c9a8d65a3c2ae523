//! Validation (docs §14.2): errors (duplicate ids, unknown agents, unknown
//! `input_from` tasks, cycles, unknown tools or skills, dependencies on
//! unknown tasks, unknown decision rules) and warnings (`input_from` from a task that is not
//! upstream, variables used but not declared or declared but not used),
//! each with the YAML line, and the topological layers of the task DAG.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;

use serde::Serialize;

use super::preset::{Located, Preset, TaskSpec};
use super::template::{UPSTREAM_CONTEXT, placeholders};

/// Variables by name.
type Vars = BTreeMap<String, String>;

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

/// Checks `preset` against `catalog` (docs §14.2). Every check is linear in
/// the tasks and their dependencies (ids are resolved once, through
/// [`Graph`]): the original's walk is cubic, so a 10,000-task chain took
/// minutes before anything ran.
pub fn inspect(preset: &Preset, catalog: &Catalog) -> Inspection {
    let graph = Graph::new(preset);
    let mut f = Findings(Vec::new());
    check_ids(preset, &mut f);
    check_agents(preset, catalog, &mut f);
    check_references(preset, &graph, &mut f);
    check_decisions(preset, &mut f);
    let order = graph.topological();
    let layers = match graph.layers(&order) {
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
    check_input_from_upstream(preset, &graph, &order, &mut f);
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

fn check_references(preset: &Preset, graph: &Graph<'_>, f: &mut Findings) {
    let agents: HashSet<&str> = preset.agents.iter().map(|a| a.id.as_str()).collect();
    for t in &preset.tasks {
        if !agents.contains(t.agent_id.as_str()) {
            f.error(
                t.agent_id.line,
                format!("task '{}' names unknown agent '{}'", t.id, t.agent_id),
            );
        }
        for d in &t.depends_on {
            if graph.node(d.as_str()).is_none() {
                f.error(
                    d.line,
                    format!("task '{}' depends on unknown task '{d}'", t.id),
                );
            }
        }
        for (key, source) in &t.input_from.0 {
            if graph.node(source.as_str()).is_none() {
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

/// A task's `decision` must name a rule the offline planner has: an
/// unknown one would silently decide nothing.
fn check_decisions(preset: &Preset, f: &mut Findings) {
    use crate::model::team_rules::{RULES, is_rule, thresholds_of};
    for t in &preset.tasks {
        let Some(rule) = &t.decision else {
            if !t.thresholds.is_empty() {
                f.error(
                    t.id.line,
                    format!("task '{}' sets thresholds but names no decision rule", t.id),
                );
            }
            continue;
        };
        let known = thresholds_of(rule.as_str());
        for (name, value) in &t.thresholds {
            if !known.iter().any(|(n, _)| n == name) {
                let names: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
                f.error(
                    rule.line,
                    format!(
                        "task '{}': decision rule '{rule}' has no threshold '{name}'; its thresholds are: {}",
                        t.id,
                        if names.is_empty() { "none".to_string() } else { names.join(", ") }
                    ),
                );
            } else if !value.is_finite() {
                f.error(
                    rule.line,
                    format!("task '{}': threshold '{name}' is not a number", t.id),
                );
            }
        }
        if !is_rule(rule.as_str()) {
            f.error(
                rule.line,
                format!(
                    "task '{}' names unknown decision rule '{rule}'; the known rules are: {}",
                    t.id,
                    RULES.join(", ")
                ),
            );
        }
    }
}

/// `input_from` naming a task that is not among the task's ancestors: its
/// answer would not exist yet when the task starts (the original warns too).
fn check_input_from_upstream(
    preset: &Preset,
    graph: &Graph<'_>,
    order: &[usize],
    f: &mut Findings,
) {
    // The usual case, a direct dependency, is answered at once; the rest
    // are asked of the graph together.
    let mut questions: Vec<(usize, usize)> = Vec::new();
    let mut asked: Vec<(&TaskSpec, &str, &Located)> = Vec::new();
    for t in &preset.tasks {
        let Some(node) = graph.node(t.id.as_str()) else {
            continue;
        };
        for (key, source) in &t.input_from.0 {
            let Some(s) = graph.node(source.as_str()) else {
                continue;
            };
            if !graph.deps[node].contains(&s) {
                questions.push((node, s));
                asked.push((t, key, source));
            }
        }
    }
    let upstream = graph.is_ancestor(&questions, order);
    for ((t, key, source), up) in asked.into_iter().zip(upstream) {
        if !up {
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

/// The task DAG with ids resolved to positions once. A node is the first
/// task of each id (duplicates are an error of their own); dependencies on
/// unknown tasks are left out (also reported on their own).
struct Graph<'a> {
    tasks: &'a [TaskSpec],
    index: HashMap<&'a str, usize>,
    /// The nodes, in file order.
    nodes: Vec<usize>,
    /// Each task's known dependencies (by position), deduplicated.
    deps: Vec<Vec<usize>>,
    /// Each task's dependents: the reverse edges.
    dependents: Vec<Vec<usize>>,
}

impl<'a> Graph<'a> {
    fn new(preset: &'a Preset) -> Self {
        let tasks = preset.tasks.as_slice();
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(tasks.len());
        let mut nodes = Vec::with_capacity(tasks.len());
        for (i, t) in tasks.iter().enumerate() {
            if !index.contains_key(t.id.as_str()) {
                index.insert(t.id.as_str(), i);
                nodes.push(i);
            }
        }
        let mut deps: Vec<Vec<usize>> = vec![Vec::new(); tasks.len()];
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); tasks.len()];
        for &n in &nodes {
            for d in &tasks[n].depends_on {
                if let Some(&dn) = index.get(d.as_str())
                    && !deps[n].contains(&dn)
                {
                    deps[n].push(dn);
                    dependents[dn].push(n);
                }
            }
        }
        Graph {
            tasks,
            index,
            nodes,
            deps,
            dependents,
        }
    }

    fn node(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    fn id(&self, node: usize) -> &'a str {
        self.tasks[node].id.as_str()
    }

    /// Kahn's algorithm: the nodes whose dependencies can all be met, each
    /// after its dependencies. Nodes on or behind a cycle are missing.
    fn topological(&self) -> Vec<usize> {
        let mut waiting: Vec<usize> = self.deps.iter().map(Vec::len).collect();
        let mut order: Vec<usize> = self
            .nodes
            .iter()
            .copied()
            .filter(|&n| waiting[n] == 0)
            .collect();
        let mut next = 0;
        while next < order.len() {
            let n = order[next];
            next += 1;
            for &m in &self.dependents[n] {
                waiting[m] -= 1;
                if waiting[m] == 0 {
                    order.push(m);
                }
            }
        }
        order
    }

    /// The layers of [`layers`] from a topological `order`, or one cycle.
    fn layers(&self, order: &[usize]) -> Result<Vec<Vec<String>>, Vec<String>> {
        let mut layer: Vec<Option<usize>> = vec![None; self.tasks.len()];
        for &n in order {
            let l = self.deps[n]
                .iter()
                .filter_map(|&d| layer[d])
                .map(|l| l + 1)
                .max()
                .unwrap_or(0);
            layer[n] = Some(l);
        }
        if order.len() < self.nodes.len() {
            return Err(self.find_cycle(&layer));
        }
        let depth = layer.iter().flatten().max().map_or(0, |l| l + 1);
        let mut out: Vec<Vec<String>> = vec![Vec::new(); depth];
        for &n in &self.nodes {
            if let Some(l) = layer[n] {
                out[l].push(self.id(n).to_string());
            }
        }
        Ok(out)
    }

    /// A cycle among the nodes not placed: walk first unplaced dependencies
    /// from the first unplaced node in file order until a node repeats
    /// (every unplaced node has an unplaced dependency).
    fn find_cycle(&self, layer: &[Option<usize>]) -> Vec<String> {
        let Some(&start) = self.nodes.iter().find(|&&n| layer[n].is_none()) else {
            return Vec::new();
        };
        let mut on_path: HashMap<usize, usize> = HashMap::from([(start, 0)]);
        let mut path = vec![start];
        let mut current = start;
        loop {
            let Some(&next) = self.deps[current].iter().find(|&&d| layer[d].is_none()) else {
                return path.iter().map(|&n| self.id(n).to_string()).collect();
            };
            if let Some(&pos) = on_path.get(&next) {
                let mut cycle: Vec<String> = path[pos..]
                    .iter()
                    .map(|&n| self.id(n).to_string())
                    .collect();
                // Written in the direction of the edges: a depends on b.
                cycle.push(self.id(next).to_string());
                return cycle;
            }
            on_path.insert(next, path.len());
            path.push(next);
            current = next;
        }
    }

    /// For each `(node, source)`: whether `source` is an ancestor of `node`.
    /// Ancestor sets over the asked-about sources are propagated along the
    /// topological order as bit sets, 4,096 sources a pass, so the cost is
    /// (tasks + dependencies) × sources / 64 words. A node on a cycle (an
    /// error already) is answered by a plain walk.
    fn is_ancestor(&self, questions: &[(usize, usize)], order: &[usize]) -> Vec<bool> {
        const PASS: usize = 4096;
        let mut answers = vec![false; questions.len()];
        let mut sources: Vec<usize> = questions.iter().map(|&(_, s)| s).collect();
        sources.sort_unstable();
        sources.dedup();
        let mut placed = vec![false; self.tasks.len()];
        for &n in order {
            placed[n] = true;
        }
        for chunk in sources.chunks(PASS) {
            let words = chunk.len().div_ceil(64);
            let bit: HashMap<usize, usize> =
                chunk.iter().enumerate().map(|(i, &s)| (s, i)).collect();
            let mut sets = vec![0u64; self.tasks.len() * words];
            for &n in order {
                for &d in &self.deps[n] {
                    for w in 0..words {
                        let from = sets[d * words + w];
                        sets[n * words + w] |= from;
                    }
                    if let Some(&b) = bit.get(&d) {
                        sets[n * words + b / 64] |= 1 << (b % 64);
                    }
                }
            }
            for (answer, &(node, s)) in answers.iter_mut().zip(questions) {
                let Some(&b) = bit.get(&s) else { continue };
                *answer = if placed[node] {
                    sets[node * words + b / 64] & (1 << (b % 64)) != 0
                } else {
                    self.walk_finds(node, s)
                };
            }
        }
        answers
    }

    /// Whether walking dependencies up from `node` reaches `target`.
    fn walk_finds(&self, node: usize, target: usize) -> bool {
        let mut seen: HashSet<usize> = HashSet::new();
        let mut stack: Vec<usize> = self.deps[node].clone();
        while let Some(n) = stack.pop() {
            if n == target {
                return true;
            }
            if seen.insert(n) {
                stack.extend(&self.deps[n]);
            }
        }
        false
    }
}

/// Every task `id` depends on, directly or not.
pub fn ancestors<'a>(preset: &'a Preset, id: &str) -> BTreeSet<&'a str> {
    let graph = Graph::new(preset);
    let Some(node) = graph.node(id) else {
        return BTreeSet::new();
    };
    let mut out = BTreeSet::new();
    let mut stack: Vec<usize> = graph.deps[node].clone();
    while let Some(n) = stack.pop() {
        if out.insert(graph.id(n)) {
            stack.extend(&graph.deps[n]);
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
    // A reader's prompt may also name its rule's thresholds (docs §14.7).
    let texts = preset
        .agents
        .iter()
        .map(|a| (a.system_prompt.as_str(), a.id.line, None))
        .chain(preset.tasks.iter().map(|t| {
            let rule = t.decision.as_ref().map(|d| d.as_str());
            (t.prompt_template.as_str(), t.id.line, rule)
        }));
    for (text, line, rule) in texts {
        let own = rule.map_or(&[][..], crate::model::team_rules::thresholds_of);
        for name in placeholders(text) {
            if name == UPSTREAM_CONTEXT || own.iter().any(|(n, _)| *n == name) {
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

/// Layers of the task DAG (longest-path layering, as Kahn's algorithm by
/// layers gives): layer 0 holds the tasks with no dependencies, each next
/// layer the tasks whose dependencies are all in earlier layers; tasks keep
/// the file's order within a layer. `Err` holds one cycle. Dependencies on
/// unknown tasks are ignored here (they are reported as errors on their own).
pub fn layers(preset: &Preset) -> Result<Vec<Vec<String>>, Vec<String>> {
    let graph = Graph::new(preset);
    let order = graph.topological();
    graph.layers(&order)
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
) -> Result<Vars, VariableError> {
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
    fn an_unknown_decision_rule_is_refused_and_the_known_ones_named() {
        let p = parse(
            "name: x\nagents: [{id: a}]\ntasks:\n  - id: t\n    agent_id: a\n    decision: vibes\n  - {id: u, agent_id: a, decision: pairs}\n",
            "x",
        )
        .unwrap();
        let r = inspect(&p, &catalog());
        let shown: Vec<String> = r.issues.iter().map(|i| i.to_string()).collect();
        assert_eq!(shown.len(), 1, "{shown:#?}");
        assert!(
            shown[0].starts_with(
                "line 6: error: task 't' names unknown decision rule 'vibes'; the known rules are: risk_review, bull_rebuttal,"
            ),
            "{shown:#?}"
        );
        assert!(
            shown[0].ends_with("technical_panel, options_desk"),
            "{shown:#?}"
        );
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

    /// A chain of `n` tasks, each after the one before; `input_from`
    /// names the first task (two or more steps up the chain for most).
    fn chain(n: usize) -> String {
        let mut y =
            String::from("name: chain\nagents: [{id: a}]\ntasks:\n  - {id: t0, agent_id: a}\n");
        for i in 1..n {
            y.push_str(&format!(
                "  - {{id: t{i}, agent_id: a, depends_on: [t{}], input_from: {{first: t0}}}}\n",
                i - 1
            ));
        }
        y
    }

    #[test]
    fn a_ten_thousand_task_chain_validates() {
        let p = parse(&chain(10_000), "chain").unwrap();
        let r = inspect(&p, &catalog());
        assert!(r.is_ok(), "{:?}", &r.issues[..r.issues.len().min(3)]);
        // Every input is upstream: no warning either.
        assert!(r.issues.is_empty(), "{:?}", &r.issues[..3]);
        assert_eq!(r.layers.len(), 10_000);
        assert_eq!(r.layers[9_999], vec!["t9999"]);
        assert_eq!(ancestors(&p, "t9999").len(), 9_999);
    }

    #[test]
    fn inputs_from_far_upstream_downstream_and_beside_are_told_apart() {
        let yaml = "name: x\nagents: [{id: a}]\ntasks:
  - {id: root, agent_id: a}
  - {id: left, agent_id: a, depends_on: [root]}
  - {id: right, agent_id: a, depends_on: [root]}
  - {id: join, agent_id: a, depends_on: [left, right], input_from: {r: root, l: left}}
  - {id: late, agent_id: a, depends_on: [left], input_from: {side: right, after: join}}
";
        let p = parse(yaml, "x").unwrap();
        let r = inspect(&p, &catalog());
        let warned: Vec<&str> = r.warnings().map(|i| i.message.as_str()).collect();
        assert_eq!(warned.len(), 2, "{warned:#?}");
        assert!(warned[0].contains("from 'right'"), "{warned:#?}");
        assert!(warned[1].contains("from 'join'"), "{warned:#?}");
        assert_eq!(
            r.layers,
            vec![vec!["root"], vec!["left", "right"], vec!["join", "late"]]
        );
    }

    #[test]
    fn a_long_cycle_is_found_and_named_from_its_first_task() {
        let mut yaml = chain(2_000);
        yaml = yaml.replacen(
            "{id: t0, agent_id: a}",
            "{id: t0, agent_id: a, depends_on: [t1999]}",
            1,
        );
        let p = parse(&yaml, "chain").unwrap();
        let r = inspect(&p, &catalog());
        let errors: Vec<String> = r.errors().map(|i| i.to_string()).collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("line 4: error: the tasks form a cycle: t0 -> t1999 -> t1998"),
            "{}",
            &errors[0][..120]
        );
        assert!(
            errors[0].ends_with("t1 -> t0"),
            "{}",
            &errors[0][errors[0].len() - 60..]
        );
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
