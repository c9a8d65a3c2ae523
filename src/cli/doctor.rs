//! `vibedesk doctor`: the resolved configuration, secrets masked, and a
//! check that the provider answers.
//!
//! Exit codes (README "Other commands"): 0 when the configuration is valid,
//! offline mode (no model) included; 2 when it is invalid (`config.toml`
//! does not parse, a bad `[mcp_servers]` entry); 1 when a configured model
//! cannot be used (a key or base URL missing, its server not answering).

use std::path::PathBuf;
use std::time::Duration;

use super::{CliError, NO_MODEL_HELP, ProviderArgs, Wire, connect, exit, load_config};
use crate::config::EXAMPLE_CONFIG;
use crate::llm::Provider;

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// Skip the network check of the provider.
    #[arg(long)]
    pub offline: bool,
    /// Report this folder as the workspace, as `run -C DIR` would use it.
    #[arg(short = 'C', long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

fn secs(d: Option<Duration>) -> String {
    d.map(|d| format!("{}s", d.as_secs_f64()))
        .unwrap_or_else(|| "off".into())
}

/// Prints the report on stdout; a failed check ends with its exit code and
/// nothing more on stderr (the report says why).
pub async fn doctor(args: DoctorArgs) -> Result<(), CliError> {
    let overrides = args.provider.overrides();
    let config = load_config(&overrides)?;
    let p = &config.paths;
    println!("vibedesk {}", env!("CARGO_PKG_VERSION"));
    println!(
        "config file   {} ({})",
        config.config_file.display(),
        if config.config_file_found {
            "found"
        } else {
            "absent: defaults in use"
        }
    );
    println!("data dir      {}", p.data_dir.display());
    println!("cache dir     {}", p.cache_dir.display());
    println!("logs          {}", p.logs_dir().display());
    let a = &config.agent;
    println!(
        "agent         max_iterations={} token_threshold={} llm_timeout={} idle_timeout={} tool_timeout={} stall_timeout={} heartbeat={}s",
        a.max_iterations,
        a.token_threshold,
        secs(a.llm_timeout),
        secs(a.idle_timeout),
        secs(a.scheduler.default_timeout),
        secs(a.stall_timeout),
        a.scheduler.heartbeat_interval.as_secs_f64()
    );
    // Which sandbox protections a child would get here (issue 5, docs §6).
    let sandbox = crate::sandbox::Runner::new(crate::sandbox::RunnerConfig::from_env());
    let guard = sandbox.probe(Some(&p.runs_dir()));
    println!(
        "sandbox       {} {}{}",
        guard.flags(),
        sandbox.config().limits.summary(),
        guard
            .notes
            .iter()
            .map(|n| format!("; {n}"))
            .collect::<String>()
    );
    // The MCP servers, each started as a session would (docs §13.2). One
    // that does not start is reported, not a failed check: it holds up
    // nothing; an invalid entry is an invalid configuration.
    let mut invalid = !report_workspace(&config, args.workspace.as_deref());
    match &config.mcp {
        Ok(mcp) if mcp.servers.is_empty() => println!("mcp servers   (none configured)"),
        Ok(mcp) => {
            let servers = crate::mcp::probe(&mcp.servers, &super::mcp_start_options(&config)).await;
            print!(
                "mcp servers   {} configured\n{}",
                servers.len(),
                crate::mcp::render_list(&servers, "  ")
            );
        }
        Err(e) => {
            println!("mcp servers   FAIL: {e}");
            invalid = true;
        }
    }
    // The sections only some commands use were validated when the file
    // loaded; a bad one is reported here rather than when those run.
    for (label, problem) in [
        ("workstation", config.tui.as_ref().err()),
        ("ray engine", config.ray.as_ref().err()),
    ] {
        if let Some(e) = problem {
            println!("{label:<13} FAIL: {e}");
            invalid = true;
        }
    }
    report_first_request(&config)?;
    let checked = check_provider(&config, args.offline).await;
    if invalid {
        return Err(CliError::quiet(exit::USAGE));
    }
    checked
}

/// The `workspace` line: the folder file tools work in, as `run` would
/// resolve it; `false` when it cannot be used.
fn report_workspace(config: &crate::config::Config, flag: Option<&std::path::Path>) -> bool {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match super::workspace::resolve(flag, config, home.as_deref()) {
        Ok(None) => {
            println!(
                "workspace     each session's own: {}/<session id>/workspace/ (`-C DIR` or `[agent] workspace` for a folder of yours)",
                config.paths.sessions_dir().display()
            );
            true
        }
        Ok(Some(dir)) => {
            let broad = super::workspace::too_broad(&dir, home.as_deref())
                .map(|what| format!(" ({what}: `run` needs --yes)"))
                .unwrap_or_default();
            println!("workspace     {}{broad}", dir.display());
            true
        }
        Err(e) => {
            println!("workspace     FAIL: {e}");
            false
        }
    }
}

/// A sample research question, for the size of a first request.
pub const SAMPLE_PROMPT: &str = "What was AAPL's RSI(14) on 2008-01-25?";

/// The window, the sampling, the tools offered and what a first request
/// costs (docs §3.9, §4.7).
fn report_first_request(config: &crate::config::Config) -> Result<(), CliError> {
    let a = &config.agent;
    let window = match (a.context_window, a.discover_window) {
        (Some(w), _) => format!("{w} tokens (configured)"),
        (None, true) => "asked from the server at the first run".to_string(),
        (None, false) => "unknown (learned from a context-size error)".to_string(),
    };
    println!("window        {window}");
    if let Some(p) = &config.provider {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "server default".into());
        println!(
            "sampling      temperature={} max_tokens={} text_tool_calls={} lean_prompt={}",
            opt(p.temperature.map(|t| t.to_string())),
            opt(p.max_tokens.map(|m| m.to_string())),
            if p.text_tool_calls { "on" } else { "off" },
            if p.lean_prompt { "on" } else { "off" }
        );
    }
    let setup = super::AgentSetup::new(config)?;
    let first = setup.first_request(config, SAMPLE_PROMPT);
    println!(
        "tools         {}",
        match &a.tools {
            Some(names) => names.join(", "),
            None if a.choose_tools => format!(
                "chosen per request from {} ({} for the question below)",
                setup.registry.len(),
                first.tool_count
            ),
            None => format!("all {}", setup.registry.len()),
        }
    );
    println!(
        "first request ~{} tokens: system prompt {}, {} tool schemas {}, a one-line question",
        first.total, first.system, first.tool_count, first.tools
    );
    Ok(())
}

/// The provider part of the report, and whether the configured model can
/// be used; with none configured the offline planner answers, which is a
/// supported mode, not a failure.
async fn check_provider(config: &crate::config::Config, offline: bool) -> Result<(), CliError> {
    let Some(prov) = &config.provider else {
        println!("provider      (none: the offline planner answers from the embedded data)");
        println!("\n{NO_MODEL_HELP}\n\nA commented config.toml to start from:\n{EXAMPLE_CONFIG}");
        return Ok(());
    };
    println!("provider      {}", prov.name);
    println!(
        "model         {}",
        prov.model.as_deref().unwrap_or("(not set)")
    );
    println!(
        "base url      {}",
        prov.base_url.as_deref().unwrap_or("(not set)")
    );
    println!("api key       {}", prov.masked_key());
    // Built as every command builds it, with a shorter connect deadline.
    let client = match connect(prov, Duration::from_secs(10)) {
        Ok(Wire::OpenAi(client)) => client,
        Ok(Wire::Scripted(_)) => {
            println!("check         ok: the script parses");
            return Ok(());
        }
        Err(e) => {
            println!("check         FAIL: {e}");
            return Err(CliError::quiet(exit::FAILED));
        }
    };
    if offline {
        println!("check         skipped (--offline)");
        return Ok(());
    }
    let model = client.model().to_string();
    match tokio::time::timeout(Duration::from_secs(20), client.list_models()).await {
        Ok(Ok(models)) => {
            let listed = models.iter().any(|m| m == &model);
            println!(
                "check         ok: the server answered with {} model(s){}",
                models.len(),
                if models.is_empty() || listed {
                    String::new()
                } else {
                    format!("; note: '{model}' is not among them")
                }
            );
            Ok(())
        }
        Ok(Err(e)) => {
            println!("check         FAIL: {e}");
            Err(CliError::quiet(exit::FAILED))
        }
        Err(_) => {
            println!("check         FAIL: no answer within 20s");
            Err(CliError::quiet(exit::FAILED))
        }
    }
}
