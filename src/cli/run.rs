//! `vibedesk run`: one turn, headless. The answer streams to stdout (or every
//! event as a JSON line with `--json`); tool activity goes to stderr.

use std::io::{IsTerminal, Seek, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{
    AgentSetup, ApprovalArgs, CliError, DEMO_PROMPT, DemoProvider, ProviderArgs, exit,
    init_logging, load_config, provider_or_offline,
};
use crate::agent::events::{AgentEvent, McpServerState, RunStatus, ToolCallStatus, ToolEvent};
use crate::agent::input::{ReadMessageError, check_message_size, read_message};
use crate::agent::plan::{EXECUTE_PROMPT, MAX_PLAN_CHARS, TurnPlan};
use crate::agent::{EventSink, RunOutcome};
use crate::config::{Config, Overrides};
use crate::llm::Provider;
use crate::session::{Session, reconcile_stale_runs, valid_id};
use crate::store::Paths;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The prompt; `-` reads it from stdin. One message may hold at most
    /// 1 MiB (`[agent] max_message_bytes`); hand larger texts in as a file in
    /// the workspace and ask the agent to read it.
    #[arg(short, long)]
    pub prompt: Option<String>,
    /// Continue this session (default: a new one).
    #[arg(long)]
    pub session: Option<String>,
    #[command(flatten)]
    pub provider: ProviderArgs,
    #[command(flatten)]
    pub approval: ApprovalArgs,
    #[arg(long)]
    pub max_iterations: Option<u32>,
    /// Script for the scripted provider (format in README.md).
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Print every event as one JSON object per line instead of the answer.
    #[arg(long)]
    pub json: bool,
    /// Plan mode (docs §4.8): the model is offered only read-only tools,
    /// answers with a numbered plan and acts on nothing; the plan is
    /// printed and the command ends.
    #[arg(long, conflicts_with_all = ["plan_file", "demo"])]
    pub plan: bool,
    /// Carry out the approved plan in this file: all tools are offered and
    /// the plan is pinned in the system prompt, which compaction keeps.
    #[arg(long, value_name = "FILE", conflicts_with = "demo")]
    pub plan_file: Option<PathBuf>,
    /// Run the bundled demo script: a scripted model driving the real tools.
    #[arg(long, conflicts_with_all = ["provider", "model", "base_url", "script"])]
    pub demo: bool,
    /// Work in this folder: file tools, `bash`'s writes, `source: "local"`
    /// data (default: `[agent] workspace`, else the session's own folder).
    #[arg(short = 'C', long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

pub async fn run(args: RunArgs) -> Result<(), CliError> {
    let overrides = Overrides {
        max_iterations: args.max_iterations,
        script: args.script.clone(),
        approval: args.approval.mode(),
        ..args.provider.overrides()
    };
    let mut config = load_config(&overrides)?;
    if args.demo {
        // A short session reaches every compaction gate (docs §3).
        super::demo_config(&mut config);
        super::demo_approval(&mut config, &args.approval);
    }
    let _log_guard = init_logging(&config);
    let workspace = super::workspace::for_command(
        args.workspace.as_deref(),
        &config,
        super::workspace::Confirm::from_flag(args.approval.yes),
    )?;
    // A plan that cannot be read is refused before anything starts.
    let plan = turn_plan(&args)?;
    let provider = run_provider(&args, &config)?;
    let prompt = run_prompt(&args, &config, workspace.as_deref())?;

    if let Some(notice) = reconcile_stale_runs(&config.paths)
        && !args.json
    {
        eprintln!("vibedesk: {notice}");
    }

    // A bad MCP entry stops the run before anything starts (docs §13.1).
    let mcp_servers = AgentSetup::mcp_servers(&config).map_err(CliError::usage)?;
    let setup = AgentSetup::new(&config)?;
    if !args.json {
        for note in &setup.notes {
            eprintln!("vibedesk: {note}");
        }
    }
    if let Some(done) = setup.maintain().await
        && !args.json
    {
        eprintln!("vibedesk: memory maintenance: {done}");
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let printer = tokio::spawn(print_events(rx, args.json));
    // MCP statuses share the run's event stream (docs §13.2). The servers
    // start in the background; the loop waits for them only when the
    // provider can call their tools, so an offline run never starts them.
    let mcp_sink = EventSink::new(tx.clone());
    let mcp = if provider.calls_offered_tools() {
        setup.start_mcp(&mcp_servers, &config, &mcp_sink)
    } else {
        if !mcp_servers.is_empty() && !args.json {
            eprintln!(
                "vibedesk: MCP servers not started: {} calls built-in tools only",
                provider_label(provider.as_ref())
            );
        }
        crate::mcp::McpClients::default()
    };
    let deps = setup.deps(provider, &config);
    let mut session = Session::open(&config.paths, args.session.as_deref(), deps)
        .map_err(CliError::usage)?
        .with_workspace(workspace);
    let planning = plan == TurnPlan::Draft;
    session.set_plan(plan);
    let cancel = cancel_on_ctrl_c(args.json);

    let outcome = session.send(&prompt, EventSink::new(tx), cancel).await;
    // The servers end before the printer drains: their monitors hold the
    // last senders of the event stream.
    mcp.shutdown().await;
    drop(mcp_sink);
    let _ = printer.await;
    if planning && !args.json && outcome.status == RunStatus::Success {
        eprintln!(
            "vibedesk: plan only, nothing was changed. To carry it out, save the plan to a file and run: vibedesk run --session {} --plan-file FILE -p \"{}\"",
            session.id(),
            EXECUTE_PROMPT
        );
    }
    run_result(&outcome, session.id(), args.json)
}

/// The turn's plan mode from `--plan` and `--plan-file` (docs §4.8).
fn turn_plan(args: &RunArgs) -> Result<TurnPlan, CliError> {
    if args.plan {
        return Ok(TurnPlan::Draft);
    }
    let Some(path) = &args.plan_file else {
        return Ok(TurnPlan::Off);
    };
    let too_long = || {
        CliError::usage(format!(
            "the plan {} is longer than {MAX_PLAN_CHARS} characters",
            path.display()
        ))
    };
    // A plan is a page: a huge file is refused before it is read.
    if std::fs::metadata(path).is_ok_and(|m| m.len() > 4 * MAX_PLAN_CHARS as u64) {
        return Err(too_long());
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("cannot read the plan {}: {e}", path.display())))?;
    if text.trim().is_empty() {
        return Err(CliError::usage(format!(
            "the plan {} is empty",
            path.display()
        )));
    }
    if text.chars().count() > MAX_PLAN_CHARS {
        return Err(too_long());
    }
    Ok(TurnPlan::Execute(text))
}

/// The run's model: the demo's script, the configured provider, or the
/// offline planner (saying why, unless the output is JSON).
fn run_provider(args: &RunArgs, config: &Config) -> Result<Arc<dyn Provider>, CliError> {
    if args.demo {
        let demo = DemoProvider::new()
            .map_err(|e| CliError::failed(format!("the bundled demo script is broken: {e}")))?;
        return Ok(Arc::new(demo));
    }
    let (p, offline_note) = provider_or_offline(config).map_err(CliError::usage)?;
    if let Some(note) = offline_note
        && !args.json
    {
        eprintln!("vibedesk: {note}");
    }
    Ok(p)
}

/// The prompt: `-p TEXT`, `-p -` (stdin) or the demo's, within the message
/// size limit and not blank.
fn run_prompt(args: &RunArgs, config: &Config, chosen: Option<&Path>) -> Result<String, CliError> {
    let limit = config.agent.max_message_bytes;
    let workspace = || workspace_hint(&config.paths, args.session.as_deref(), chosen);
    let prompt = match (&args.prompt, args.demo) {
        (Some(p), _) if p == "-" => {
            let stdin = std::io::stdin();
            read_message(stdin.lock(), limit, stdin_file_size(&stdin), &workspace).map_err(|e| {
                match e {
                    ReadMessageError::TooLarge(e) => CliError::usage(e),
                    e => CliError::usage(format!("cannot read the prompt from stdin: {e}")),
                }
            })?
        }
        (Some(p), _) => {
            check_message_size(p.len(), limit, &workspace).map_err(CliError::usage)?;
            p.clone()
        }
        (None, true) => DEMO_PROMPT.to_string(),
        (None, false) => {
            return Err(CliError::usage(
                "give a prompt with -p \"...\" (or -p - to read stdin)",
            ));
        }
    };
    if prompt.trim().is_empty() {
        return Err(CliError::usage("the prompt is empty"));
    }
    Ok(prompt)
}

/// A token cancelled by the first Ctrl-C; a second quits at once.
fn cancel_on_ctrl_c(json: bool) -> CancellationToken {
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            if !json {
                eprintln!("\nvibedesk: cancelling… (Ctrl-C again to quit at once)");
            }
            on_signal.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                // A second Ctrl-C quits at once, from the signal task:
                // there is no caller left to return an error to.
                std::process::exit(i32::from(exit::CANCELLED));
            }
        }
    });
    cancel
}

/// The command's result from the run's: a success line on a terminal, or
/// the exit code and line of a run that did not succeed.
fn run_result(outcome: &RunOutcome, session: &str, json: bool) -> Result<(), CliError> {
    match outcome.status {
        RunStatus::Success => {
            if !json && std::io::stderr().is_terminal() {
                eprintln!(
                    "\n[session {} · run {} · {} iteration(s){}]",
                    session,
                    outcome.run_id,
                    outcome.iterations,
                    if outcome.degraded {
                        format!(" · degraded: {}", outcome.reason)
                    } else {
                        String::new()
                    }
                );
            }
            Ok(())
        }
        RunStatus::Cancelled => Err(CliError::new(
            exit::CANCELLED,
            format!("cancelled (session {}, run {})", session, outcome.run_id),
        )),
        // The answer is on stdout already; the line says what it lacks.
        RunStatus::Partial => Err(CliError::new(
            exit::PARTIAL,
            format!("run partial: {}", outcome.reason),
        )),
        // The answer on stdout says what is missing and what runs instead.
        RunStatus::Unsupported => Err(CliError::new(
            exit::UNSUPPORTED,
            format!("run unsupported: {}", outcome.reason),
        )),
        RunStatus::Failed | RunStatus::Interrupted => {
            Err(CliError::failed(format!("run failed: {}", outcome.reason)))
        }
    }
}

/// "the offline planner", "the demo model": what a run without MCP says.
fn provider_label(provider: &dyn Provider) -> String {
    if provider.name() == crate::llm::offline::OFFLINE {
        "the offline planner".to_string()
    } else {
        format!("the {} model", provider.model())
    }
}

/// The workspace an oversized prompt should go to: the chosen folder
/// (`--workspace`, `[agent] workspace`), else the session's own when one is
/// named, else where a session's workspace lives.
fn workspace_hint(paths: &Paths, session: Option<&str>, chosen: Option<&Path>) -> String {
    if let Some(dir) = chosen {
        return dir.display().to_string();
    }
    match session.filter(|id| valid_id(id)) {
        Some(id) => paths
            .session_dir(id)
            .join("workspace")
            .display()
            .to_string(),
        None => format!(
            "{}/<session id>/workspace/ (`vibedesk sessions` lists the ids; continue with `vibedesk run --session <session id>`)",
            paths.sessions_dir().display()
        ),
    }
}

/// What is left to read of stdin when it is a regular file (`< big.txt`),
/// so an oversized prompt is refused with its size and without reading it.
fn stdin_file_size(stdin: &std::io::Stdin) -> Option<u64> {
    let file = std::fs::File::from(stdin.as_fd().try_clone_to_owned().ok()?);
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let offset = (&file).stream_position().ok()?;
    Some(meta.len().saturating_sub(offset))
}

/// One event of the `--json` stream (docs §1.9): its JSON with a `ts` in
/// seconds, on a line of its own, flushed at once.
pub(super) fn write_json_event(out: &mut impl Write, event: &AgentEvent) {
    let _ = writeln!(out, "{}", event.stamped());
    let _ = out.flush();
}

/// Writes events as they arrive. In text mode the answer goes to stdout and
/// tool activity to stderr, so `vibedesk run -p … > answer.md` works.
async fn print_events(mut rx: mpsc::UnboundedReceiver<AgentEvent>, json: bool) {
    let mut out = std::io::stdout();
    let mut ends_with_newline = true;
    let mut printed_text = false;
    while let Some(event) = rx.recv().await {
        if json {
            write_json_event(&mut out, &event);
            continue;
        }
        match &event {
            AgentEvent::IterationStarted { .. } if printed_text => {
                // Each iteration's text is its own paragraph.
                let _ = write!(out, "{}", if ends_with_newline { "\n" } else { "\n\n" });
                ends_with_newline = true;
                printed_text = false;
            }
            AgentEvent::TextDelta { delta, .. } => {
                printed_text = true;
                let _ = write!(out, "{delta}");
                let _ = out.flush();
                ends_with_newline = delta.ends_with('\n');
            }
            AgentEvent::Tool(ToolEvent::ToolCallStarted { tool, args, .. }) => {
                eprintln!(
                    "  → {tool} {}",
                    crate::tools::finalize::preview(&args.to_string(), 120)
                );
            }
            AgentEvent::Tool(ToolEvent::ToolCallFinished {
                tool,
                status,
                elapsed_ms,
                preview,
                ..
            }) => {
                let mark = match status {
                    ToolCallStatus::Ok => "✓",
                    ToolCallStatus::Skipped => "↷",
                    _ => "✗",
                };
                let detail = if *status == ToolCallStatus::Ok {
                    String::new()
                } else {
                    format!(" — {}", crate::tools::finalize::preview(preview, 160))
                };
                eprintln!("  {mark} {tool} {status:?} {elapsed_ms} ms{detail}");
            }
            AgentEvent::Tool(ToolEvent::ToolTimeoutWarning {
                tool, elapsed_s, ..
            }) => {
                eprintln!(
                    "  ! {tool} is past its deadline ({elapsed_s:.0}s); still waiting (write tools are never killed)"
                );
            }
            AgentEvent::StreamReset {
                error, retry_in_ms, ..
            } => {
                if !ends_with_newline {
                    let _ = writeln!(out);
                    ends_with_newline = true;
                }
                eprintln!(
                    "  ↻ model stream failed ({error}); retrying in {:.1}s",
                    *retry_in_ms as f64 / 1000.0
                );
            }
            AgentEvent::AnswerRejected { issues, .. } => {
                eprintln!("\n  ↺ draft sent back for revision: {}", issues.join("; "));
            }
            AgentEvent::UnverifiedNumbers {
                numbers, figures, ..
            } => {
                if !ends_with_newline {
                    let _ = writeln!(out);
                    ends_with_newline = true;
                }
                eprintln!(
                    "  ⚠ unverified: {} of the answer's {figures} figure(s) appear in no tool result of this run: {}",
                    numbers.len(),
                    numbers.join(", ")
                );
            }
            AgentEvent::ContentFiltered {
                consecutive, limit, ..
            } => {
                eprintln!(
                    "  ⚠ reply blocked by the provider's content filter ({consecutive}/{limit})"
                );
            }
            AgentEvent::McpServerStatus {
                server,
                state,
                tools,
                reason,
                notes,
            } => {
                let reason = reason.as_deref().unwrap_or("");
                match state {
                    McpServerState::Ready => {
                        eprintln!("  MCP server {server} ready ({tools} tool(s))");
                        for note in notes {
                            eprintln!("  ⚠ MCP server {server}: {note}");
                        }
                    }
                    McpServerState::Starting => eprintln!("  MCP server {server} starting"),
                    McpServerState::Failed => {
                        eprintln!("  ⚠ MCP server {server} failed to start: {reason}")
                    }
                    McpServerState::Exited => eprintln!("  ⚠ MCP server {server} exited: {reason}"),
                }
            }
            AgentEvent::StallWarning { idle_s, .. } => {
                eprintln!("  ⚠ no progress for {idle_s:.0}s")
            }
            AgentEvent::Stalled { reason }
            | AgentEvent::Notice {
                message: reason, ..
            } => eprintln!("  ⚠ {reason}"),
            _ => {}
        }
    }
    if !json && !ends_with_newline {
        let _ = writeln!(out);
    }
    let _ = out.flush();
}
