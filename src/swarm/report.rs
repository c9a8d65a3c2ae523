//! `report.md` (docs §14.4): the run's status and, unless it is `success`,
//! which members failed or were partial and why; then the final task's
//! answer, then every member's answer (or why it has none) with its run
//! dir, so a reader can check each number at its source.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::preset::Preset;
use crate::agent::events::RunStatus;
use crate::agent::events::TaskState;

/// One task's part of the report.
#[derive(Clone, Debug)]
pub struct Member {
    pub state: TaskState,
    pub answer: String,
    pub reason: Option<String>,
    pub run_dir: String,
    pub seconds: f64,
    pub tokens: u64,
}

/// The task whose answer opens the report: the last one in topological
/// order (a team's decision comes after everything it reads).
pub fn final_task(order: &[String]) -> Option<&str> {
    order.last().map(String::as_str)
}

pub fn render(
    preset: &Preset,
    vars: &BTreeMap<String, String>,
    order: &[String],
    members: &BTreeMap<String, Member>,
    status: RunStatus,
) -> String {
    let mut out = String::new();
    let title = if preset.title.is_empty() {
        &preset.name
    } else {
        &preset.title
    };
    let _ = writeln!(out, "# {title}\n");
    let vars_line = vars
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        out,
        "Preset `{}` · status {} · variables: {}\n",
        preset.name,
        status.as_str(),
        if vars_line.is_empty() {
            "none"
        } else {
            &vars_line
        }
    );
    out.push_str(&shortfalls(preset, order, members));
    if let Some(last) = final_task(order)
        && let Some(m) = members.get(last)
    {
        let _ = writeln!(out, "## Conclusion: {last} ({})\n", role_of(preset, last));
        out.push_str(&body(m));
        out.push('\n');
    }
    let _ = writeln!(out, "## Members\n");
    for id in order {
        let Some(m) = members.get(id) else { continue };
        let _ = writeln!(
            out,
            "### {id} ({}) · {} · {:.1} s · {} tokens\n",
            role_of(preset, id),
            m.state.as_str(),
            m.seconds,
            m.tokens
        );
        if !m.run_dir.is_empty() {
            let _ = writeln!(out, "Run dir: {}\n", m.run_dir);
        }
        out.push_str(&body(m));
        out.push('\n');
    }
    out
}

/// The members that did not succeed, each with its state and why, before
/// anything else of the report: empty when every member succeeded.
fn shortfalls(preset: &Preset, order: &[String], members: &BTreeMap<String, Member>) -> String {
    let lines: Vec<String> = order
        .iter()
        .filter_map(|id| Some((id, members.get(id)?)))
        .filter(|(_, m)| m.state != TaskState::Success)
        .map(|(id, m)| {
            let why = m.reason.as_deref().unwrap_or("no reason recorded");
            let role = match role_of(preset, id) {
                "" => String::new(),
                r => format!(" ({r})"),
            };
            format!(
                "- **{id}**{role} {} {}: {why}",
                mark(m.state),
                m.state.as_str()
            )
        })
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "## Members that did not succeed ({} of {})\n\n{}\n\n",
        lines.len(),
        order.len(),
        lines.join("\n")
    )
}

/// The glyph of a member's state, as the workstation draws it.
fn mark(state: TaskState) -> &'static str {
    match state {
        TaskState::Success => "✓",
        TaskState::Partial => "◐",
        TaskState::TimedOut => "⏱",
        TaskState::Cancelled => "⊘",
        _ => "✗",
    }
}

fn body(m: &Member) -> String {
    let why = m.reason.as_deref().unwrap_or(m.state.as_str());
    let answer = m.answer.trim_end();
    match m.state {
        TaskState::Success => format!("{answer}\n"),
        TaskState::Partial => format!("_Partial: {why}._\n\n{answer}\n"),
        _ if !answer.is_empty() => format!("_Failed: {why}._\n\n{answer}\n"),
        _ => format!("_No answer: {why}._\n"),
    }
}

fn role_of<'a>(preset: &'a Preset, task: &str) -> &'a str {
    preset
        .task(task)
        .and_then(|t| preset.agent(t.agent_id.as_str()))
        .map_or("", |a| a.role.as_str())
}
