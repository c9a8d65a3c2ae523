//! `vibedesk report RUN [--html PATH | --md PATH]` and `vibedesk export
//! SESSION [--md | --html] [--out PATH]` (docs §20.3): write the file and
//! print its path on stdout.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::CliError;
use crate::report::export::{Format, export_session};
use crate::report::{DEFAULT_REPORT, Target, html, markdown, of_run};
use crate::session::valid_id;
use crate::store::Paths;

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// A backtest's run directory, or its name (looked up under the runs
    /// and the sessions' workspaces).
    pub run: String,
    /// Write one self-contained HTML file here (default: RUN/report.html).
    #[arg(long, value_name = "PATH", conflicts_with = "md")]
    pub html: Option<PathBuf>,
    /// Write Markdown here, with its charts as SVG files beside it.
    #[arg(long, value_name = "PATH")]
    pub md: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// The session id (`vibedesk sessions` lists them).
    pub session: String,
    /// Markdown (the default).
    #[arg(long, conflicts_with = "html")]
    pub md: bool,
    /// One HTML file with the figures inside.
    #[arg(long)]
    pub html: bool,
    /// Where to write (default: the session's exports/ folder).
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
}

fn paths() -> Result<Paths, CliError> {
    Paths::from_env().ok_or_else(|| CliError::failed("no home directory: set VIBEDESK_HOME"))
}

pub fn report(args: ReportArgs) -> Result<(), CliError> {
    let fail = |e: &dyn std::fmt::Display| CliError::failed(e).of("report");
    let run_dir = resolve_run(&args.run)?;
    let target = match (args.html, args.md) {
        (Some(p), _) => Some(Target::Html(p)),
        (None, Some(p)) => Some(Target::Markdown(p)),
        (None, None) => None,
    };
    let (sheet, facts) = of_run(&run_dir).map_err(|e| fail(&e))?;
    // The write alone is timed: docs §20.3 holds it under 100 ms.
    let started = Instant::now();
    let path = match target.unwrap_or_else(|| Target::Html(run_dir.join(DEFAULT_REPORT))) {
        Target::Html(path) => html::write(&path, &sheet, &facts).map(|()| path),
        Target::Markdown(path) => markdown::write(&path, &sheet, &facts).map(|_| path),
    }
    .map_err(|e| fail(&e))?;
    eprintln!(
        "report of {} written in {:.1} ms",
        run_dir.display(),
        started.elapsed().as_secs_f64() * 1e3
    );
    println!("{}", path.display());
    Ok(())
}

/// A run dir given as a path, or found by its name.
fn resolve_run(run: &str) -> Result<PathBuf, CliError> {
    let given = Path::new(run);
    if given.is_dir() {
        return Ok(given.to_path_buf());
    }
    let not_found = || {
        CliError::usage(format!(
            "no run directory '{run}': give its path, or the name of a run under the runs or a session's workspace"
        ))
        .of("report")
    };
    if !valid_id(run) {
        return Err(not_found());
    }
    let paths = paths()?;
    let mut candidates = vec![paths.runs_dir().join(run)];
    if let Ok(sessions) = std::fs::read_dir(paths.sessions_dir()) {
        for s in sessions.flatten() {
            let ws = s.path().join("workspace");
            candidates.push(ws.join(run));
            if let Ok(inner) = std::fs::read_dir(&ws) {
                candidates.extend(inner.flatten().map(|d| d.path().join(run)));
            }
        }
    }
    candidates
        .into_iter()
        .find(|c| c.join("run_card.json").is_file() || c.join("artifacts/equity.csv").is_file())
        .ok_or_else(not_found)
}

pub fn export(args: ExportArgs) -> Result<(), CliError> {
    if !valid_id(&args.session) {
        return Err(
            CliError::usage(format!("'{}' is not a valid session id", args.session)).of("export"),
        );
    }
    let dir = paths()?.session_dir(&args.session);
    if !dir.is_dir() {
        return Err(CliError::usage(format!(
            "session {} does not exist (list them with `vibedesk sessions`)",
            args.session
        ))
        .of("export"));
    }
    let format = if args.html {
        Format::Html
    } else {
        Format::Markdown
    };
    let path = export_session(&dir, format, args.out.as_deref())
        .map_err(|e| CliError::failed(e).of("export"))?;
    println!("{}", path.display());
    Ok(())
}
