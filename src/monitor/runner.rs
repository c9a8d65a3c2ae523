//! A fire's job run as an ordinary run (docs §21.2): the vibedesk binary
//! itself, started as `run --json`, `swarm run --json` or `sweep run`, so
//! each fire has its own run dir and trace. The daemon reads the child's
//! event stream for the status, the run dir and the final answer.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::def::{Job, Monitor};
use crate::model::approval::ApprovalMode;

/// What a fire's run ended with.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunOutput {
    /// `success`, `partial`, `failed`, `unsupported`, `cancelled` or
    /// `interrupted` (stopped by the daemon's shutdown).
    pub status: String,
    pub run_dir: Option<String>,
    /// The final answer (a team's report, a sweep's summary).
    pub answer: Option<String>,
    /// Why it failed, when it did.
    pub reason: Option<String>,
}

pub type RunFuture<'a> = Pin<Box<dyn Future<Output = RunOutput> + Send + 'a>>;

/// Runs a fire's job; the daemon's tests pass their own.
pub trait Runner: Send + Sync {
    fn run<'a>(
        &'a self,
        monitor: &'a Monitor,
        fire_id: i64,
        stop: &'a CancellationToken,
    ) -> RunFuture<'a>;
}

/// Starts the vibedesk binary for each fire.
#[derive(Clone, Debug)]
pub struct ProcessRunner {
    pub exe: PathBuf,
    pub approval: ApprovalMode,
    /// Where sweep results go: `<data>/monitors/<name>/`.
    pub out_dir: PathBuf,
    /// How long a running job gets to end after the daemon is told to stop.
    pub grace: Duration,
}

impl ProcessRunner {
    /// The command line of a fire's job.
    pub fn args(&self, monitor: &Monitor, fire_id: i64) -> Vec<String> {
        match &monitor.job {
            Job::Prompt { prompt } => vec![
                "run".into(),
                "--json".into(),
                "--approval".into(),
                self.approval.as_str().into(),
                "-p".into(),
                prompt.clone(),
            ],
            Job::Team { preset, vars } => {
                let mut a = vec![
                    "swarm".into(),
                    "run".into(),
                    preset.clone(),
                    "--json".into(),
                ];
                for (k, v) in vars {
                    a.push("--var".into());
                    a.push(format!("{k}={v}"));
                }
                a
            }
            Job::Sweep { spec } => vec![
                "sweep".into(),
                "run".into(),
                spec.display().to_string(),
                "--out".into(),
                self.sweep_out(monitor, fire_id).display().to_string(),
            ],
        }
    }

    fn sweep_out(&self, monitor: &Monitor, fire_id: i64) -> PathBuf {
        self.out_dir
            .join(&monitor.name)
            .join(format!("fire-{fire_id}.csv"))
    }

    async fn run_child(
        &self,
        monitor: &Monitor,
        fire_id: i64,
        stop: &CancellationToken,
    ) -> RunOutput {
        if let Job::Sweep { .. } = monitor.job {
            let _ = std::fs::create_dir_all(self.out_dir.join(&monitor.name));
        }
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.args(self.args(monitor, fire_id))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return failed(format!("cannot start {}: {e}", self.exe.display())),
        };
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let reader = tokio::spawn(read_stdout(
            stdout,
            matches!(monitor.job, Job::Sweep { .. }),
        ));
        let errors = tokio::spawn(last_stderr_line(stderr));
        let status = tokio::select! {
            s = child.wait() => Some(s),
            () = stop.cancelled() => None,
        };
        let status = match status {
            Some(s) => s.ok(),
            None => match tokio::time::timeout(self.grace, child.wait()).await {
                Ok(s) => s.ok(),
                Err(_) => {
                    let _ = child.kill().await;
                    let _ = reader.await;
                    return RunOutput {
                        status: "interrupted".into(),
                        reason: Some("the daemon stopped during the run".into()),
                        ..RunOutput::default()
                    };
                }
            },
        };
        let mut out = reader.await.unwrap_or_default();
        let last_error = errors.await.ok().flatten();
        if let Job::Sweep { .. } = monitor.job {
            out.run_dir = Some(self.out_dir.join(&monitor.name).display().to_string());
            out.status = match status.and_then(|s| s.code()) {
                Some(0) => "success".into(),
                _ => "failed".into(),
            };
        }
        if out.status.is_empty() {
            out.status = "failed".into();
        }
        if out.status != "success" && out.reason.is_none() {
            out.reason = last_error;
        }
        out
    }
}

impl Runner for ProcessRunner {
    fn run<'a>(
        &'a self,
        monitor: &'a Monitor,
        fire_id: i64,
        stop: &'a CancellationToken,
    ) -> RunFuture<'a> {
        Box::pin(self.run_child(monitor, fire_id, stop))
    }
}

fn failed(reason: String) -> RunOutput {
    RunOutput {
        status: "failed".into(),
        reason: Some(reason),
        ..RunOutput::default()
    }
}

/// Reads the child's stdout: JSON events (the last `answer`, and
/// `run_finished` or `swarm_finished`), or a sweep's plain summary.
async fn read_stdout(stdout: Option<tokio::process::ChildStdout>, plain: bool) -> RunOutput {
    let mut out = RunOutput::default();
    let Some(stdout) = stdout else {
        return out;
    };
    let mut lines = BufReader::new(stdout).lines();
    let mut text = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        if plain {
            // A sweep's summary is short; cap it anyway.
            if text.len() < 64 * 1024 {
                text.push_str(&line);
                text.push('\n');
            }
            continue;
        }
        read_event(&line, &mut out);
    }
    if plain {
        out.answer = Some(text);
    }
    out
}

/// Takes what a monitor needs from one event line.
pub fn read_event(line: &str, out: &mut RunOutput) {
    // Most lines are text deltas: skip them before parsing.
    if !(line.contains("\"answer\"")
        || line.contains("\"run_finished\"")
        || line.contains("\"swarm_finished\""))
    {
        return;
    }
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        return;
    };
    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    match v.get("type").and_then(|t| t.as_str()) {
        Some("answer") => out.answer = field("content"),
        Some("run_finished") => {
            out.status = field("status").unwrap_or_default();
            out.run_dir = field("run_dir");
            out.reason = field("reason");
        }
        Some("swarm_finished") => {
            out.status = field("status").unwrap_or_default();
            out.reason = field("reason");
            if let Some(report) = field("report") {
                let path = Path::new(&report);
                out.run_dir = path.parent().map(|p| p.display().to_string());
                out.answer = std::fs::read_to_string(path).ok();
            }
        }
        _ => {}
    }
}

async fn last_stderr_line(stderr: Option<tokio::process::ChildStderr>) -> Option<String> {
    let mut lines = BufReader::new(stderr?).lines();
    let mut last = None;
    while let Ok(Some(line)) = lines.next_line().await {
        if !line.trim().is_empty() {
            last = Some(crate::text::preview(&line, 400));
        }
    }
    last
}

/// An offline team's rule-based decision as a `## Verdict` tail: the
/// report's first decision heading (`## Decision: buy (…)`, `## Reading:
/// mixed (…)`) becomes one row for the team's subject (its `target`,
/// `symbol` or `ticker` variable, else the preset). A report that already
/// has a `## Verdict` section, or reached no decision, gets nothing.
pub fn team_verdict_tail(report: &str, job: &Job) -> Option<String> {
    let Job::Team { preset, vars } = job else {
        return None;
    };
    if report.lines().any(|l| l.trim_end() == "## Verdict") {
        return None;
    }
    const KINDS: [&str; 6] = [
        "Decision",
        "Reading",
        "Rating",
        "Stance",
        "Ruling",
        "Risk limits",
    ];
    let heading = report.lines().find_map(|l| {
        let h = l.strip_prefix("## ")?;
        let (kind, value) = h.split_once(": ")?;
        KINDS.contains(&kind).then_some(value.trim())
    })?;
    if heading.is_empty() || heading.ends_with("no decision") {
        return None;
    }
    let (state, reason) = match heading.split_once(" (") {
        Some((s, r)) => (s.trim(), r.trim_end_matches(')').trim()),
        None => (heading, heading),
    };
    let state = state.to_lowercase().replace([' ', '-'], "_");
    let subject = ["target", "symbol", "ticker"]
        .iter()
        .find_map(|k| vars.get(*k))
        .unwrap_or(preset);
    Some(format!(
        "\n\n## Verdict\n\n- {subject}: {state} - {reason}\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn events_give_the_answer_status_and_run_dir() {
        let mut out = RunOutput::default();
        for line in [
            r#"{"type":"text_delta","delta":"\"answer\""}"#,
            r#"{"type":"answer","iter":1,"content":"first"}"#,
            r#"{"type":"answer","iter":2,"content":"final"}"#,
            r#"{"type":"run_finished","run_id":"r","status":"success","run_dir":"/d/r"}"#,
            "not json",
        ] {
            read_event(line, &mut out);
        }
        assert_eq!(out.answer.as_deref(), Some("final"));
        assert_eq!(
            (out.status.as_str(), out.run_dir.as_deref()),
            ("success", Some("/d/r"))
        );
    }

    #[test]
    fn a_team_decision_becomes_a_verdict_row() {
        let job = Job::Team {
            preset: "technical_analysis_panel".into(),
            vars: BTreeMap::from([("target".into(), "AAPL".into())]),
        };
        let report = "# T\n\n## Conclusion: task-panel\n\n## Reading: mixed (trend down, momentum mixed)\n\nRule…\n";
        assert_eq!(
            team_verdict_tail(report, &job).unwrap(),
            "\n\n## Verdict\n\n- AAPL: mixed - trend down, momentum mixed\n"
        );
        assert_eq!(team_verdict_tail("## Decision: no decision\n", &job), None);
        assert_eq!(team_verdict_tail("## Verdict\n- X: up - y\n", &job), None);
        let prompt = Job::Prompt { prompt: "p".into() };
        assert_eq!(team_verdict_tail(report, &prompt), None);
    }
}
