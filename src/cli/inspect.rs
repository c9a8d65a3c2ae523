//! `vibedesk sessions` and `vibedesk trace`: read what runs left on disk.
//! Both first mark runs a crash left `running` as interrupted (as `run` and
//! the workstation do), and say on stderr what they had to skip.

use std::io::Write;

use super::{CliError, load_config};
use crate::config::Overrides;
use crate::session::{
    list_sessions_reporting, reconcile_stale_runs, unreadable_sessions_notice, valid_id,
};
use crate::store::{read_trace, trace::find_trace_dir};

#[derive(clap::Args, Debug)]
pub struct SessionsArgs {
    /// Print JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    /// A session id (or a run id for runs without a session).
    pub id: String,
    /// Read offloaded large texts back into their records.
    #[arg(long)]
    pub resolve: bool,
}

pub fn sessions(args: SessionsArgs) -> Result<(), CliError> {
    let config = load_config(&Overrides::default())?;
    if let Some(notice) = reconcile_stale_runs(&config.paths) {
        eprintln!("vibedesk: {notice}");
    }
    let (sessions, unreadable) = list_sessions_reporting(&config.paths);
    if let Some(notice) = unreadable_sessions_notice(&unreadable) {
        eprintln!("vibedesk: {notice}");
    }
    let mut out = std::io::stdout();
    for s in sessions {
        if args.json {
            let _ = writeln!(out, "{}", serde_json::to_string(&s).unwrap_or_default());
        } else {
            let title: String = s.title.chars().take(60).collect();
            let _ = writeln!(
                out,
                "{:<14} {:<24} {:>4} runs  {:<11} {}",
                s.id,
                s.updated_at,
                s.runs,
                s.last_status.as_deref().unwrap_or("-"),
                title
            );
        }
    }
    Ok(())
}

pub fn trace(args: TraceArgs) -> Result<(), CliError> {
    let config = load_config(&Overrides::default())?;
    if !valid_id(&args.id) {
        return Err(CliError::usage(format!(
            "'{}' is not a valid session or run id",
            args.id
        )));
    }
    if let Some(notice) = reconcile_stale_runs(&config.paths) {
        eprintln!("vibedesk: {notice}");
    }
    let Some(dir) = find_trace_dir(
        &config.paths.sessions_dir(),
        &config.paths.runs_dir(),
        &args.id,
    ) else {
        return Err(CliError::failed(format!("no trace for '{}'", args.id)));
    };
    let fields = ["prompt", "content", "summary", "result"];
    let t = read_trace(&dir, args.resolve.then_some(&fields[..])).map_err(CliError::failed)?;
    let mut out = std::io::stdout();
    for r in &t.records {
        let _ = writeln!(out, "{r}");
    }
    if t.skipped_lines > 0 {
        eprintln!(
            "vibedesk: skipped {} unreadable line(s) of {}",
            t.skipped_lines,
            dir.join(crate::store::trace::TRACE_FILE).display()
        );
    }
    Ok(())
}
