//! `vibedesk monitor …` and `vibedesk daemon` (docs §21.2): add, list,
//! show, run, pause, resume, remove and the history of monitors; the
//! daemon that runs them on schedule.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use chrono::{DateTime, Local, Utc};

use super::{CliError, init_logging, load_config};
use crate::config::{Config, Overrides};
use crate::monitor::daemon::{self, anchor};
use crate::monitor::def::{self, Job, Monitor, Notify};
use crate::monitor::outbox::Worker;
use crate::monitor::runner::{ProcessRunner, Runner};
use crate::monitor::settings::MonitorSettings;
use crate::monitor::store::{FireRow, Store, Trigger};

#[derive(clap::Args, Debug)]
pub struct MonitorArgs {
    #[command(subcommand)]
    pub command: MonitorCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum MonitorCommand {
    /// Add a monitor: a schedule, one job, where its verdict goes.
    Add(Box<AddArgs>),
    /// Every monitor: schedule, next fire (local time), last result, deliveries.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One monitor: its definition, recent fires and undelivered (dead) deliveries.
    Show { name: String },
    /// Run a monitor now, record it like a fire and deliver its verdict.
    Run { name: String },
    /// Stop a monitor's fires until `resume` (slots in between are skipped).
    Pause { name: String },
    /// Fire again from the next slot on.
    Resume { name: String },
    /// Delete a monitor with its history and queued deliveries.
    Remove { name: String },
    /// A monitor's fires, newest first.
    History {
        name: String,
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
}

#[derive(clap::Args, Debug)]
pub struct AddArgs {
    pub name: String,
    /// Five-field cron: minute hour day-of-month month day-of-week, e.g. "30 16 * * 1-5".
    #[arg(long)]
    pub cron: String,
    /// The IANA time zone the schedule is read in.
    #[arg(long, default_value = "UTC")]
    pub tz: String,
    /// The job: one research prompt…
    #[arg(long, group = "job")]
    pub prompt: Option<String>,
    /// …or a research team (a preset name or YAML file)…
    #[arg(long, group = "job")]
    pub team: Option<String>,
    /// A team variable, NAME=VALUE (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE", requires = "team")]
    pub vars: Vec<String>,
    /// …or a parameter sweep spec.
    #[arg(long, group = "job")]
    pub sweep: Option<PathBuf>,
    /// Where the verdict goes: file:PATH, webhook:URL or email:ADDRESS (repeatable).
    #[arg(long)]
    pub deliver: Vec<String>,
    /// change (only when a symbol's state changed) or always.
    #[arg(long, default_value = "always")]
    pub notify: String,
    /// The verdict's state vocabulary, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub states: Vec<String>,
    /// The symbols the verdict tracks, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub symbols: Vec<String>,
}

fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

fn open(config: &Config) -> Result<Store, CliError> {
    Store::open(&Store::path_in(&config.paths)).map_err(CliError::failed)
}

fn settings(config: &Config) -> Result<MonitorSettings, CliError> {
    config.monitor.clone().map_err(CliError::usage)
}

pub async fn monitor(args: MonitorArgs) -> Result<(), CliError> {
    let config = load_config(&Overrides::default())?;
    let result = match args.command {
        MonitorCommand::Add(a) => add(&config, *a),
        MonitorCommand::List { json } => list(&config, json),
        MonitorCommand::Show { name } => show(&config, &name),
        MonitorCommand::Run { name } => run_now(&config, &name).await,
        MonitorCommand::Pause { name } => pause(&config, &name, true),
        MonitorCommand::Resume { name } => pause(&config, &name, false),
        MonitorCommand::Remove { name } => remove(&config, &name),
        MonitorCommand::History { name, limit } => history(&config, &name, limit),
    };
    result.map_err(|e| e.of("monitor"))
}

fn job(config: &Config, a: &AddArgs) -> Result<Job, CliError> {
    if let Some(prompt) = &a.prompt {
        if prompt.trim().is_empty() {
            return Err(CliError::usage("--prompt is empty"));
        }
        return Ok(Job::Prompt {
            prompt: prompt.clone(),
        });
    }
    if let Some(preset) = &a.team {
        crate::swarm::preset::load_name_or_file(&config.paths.config_dir, preset)
            .map_err(|e| CliError::usage(format!("--team {preset}: {e}")))?;
        let mut vars = BTreeMap::new();
        for kv in &a.vars {
            match kv.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    vars.insert(k.trim().to_string(), v.to_string());
                }
                _ => return Err(CliError::usage(format!("--var '{kv}': use NAME=VALUE"))),
            }
        }
        return Ok(Job::Team {
            preset: preset.clone(),
            vars,
        });
    }
    if let Some(spec) = &a.sweep {
        // The daemon runs elsewhere: keep the spec's absolute path.
        let spec = std::fs::canonicalize(spec)
            .map_err(|e| CliError::usage(format!("--sweep {}: {e}", spec.display())))?;
        crate::sweep::spec::Spec::load(&spec)
            .map_err(|e| CliError::usage(format!("--sweep {}: {e}", spec.display())))?;
        return Ok(Job::Sweep { spec });
    }
    Err(CliError::usage(
        "give the monitor one job: --prompt \"…\", --team PRESET [--var k=v…] or --sweep SPEC",
    ))
}

fn add(config: &Config, a: AddArgs) -> Result<(), CliError> {
    def::check_name(&a.name).map_err(CliError::usage)?;
    let schedule = crate::monitor::cron::Schedule::parse(&a.cron)
        .map_err(|e| CliError::usage(def::DefError::Cron(e)))?;
    let tz = def::parse_tz(&a.tz).map_err(CliError::usage)?;
    let job = job(config, &a)?;
    let deliver = a
        .deliver
        .iter()
        .map(|d| {
            d.parse()
                .map_err(|e| CliError::usage(def::DefError::Channel(e)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let notify: Notify = a.notify.parse().map_err(CliError::usage)?;
    let contract = crate::monitor::verdict::Contract {
        states: a.states.clone(),
        symbols: a.symbols.clone(),
    };
    let now = Utc::now();
    let m = Monitor {
        name: a.name.clone(),
        cron: a.cron.trim().to_string(),
        schedule,
        tz,
        job,
        deliver,
        notify,
        paused: false,
        contract,
        created: now,
        since: now,
    };
    let store = open(config)?;
    store.add_monitor(&m.to_row()).map_err(CliError::usage)?;
    let told = daemon::signal_change(&config.paths.state_dir);
    println!(
        "added monitor {} · {} · next fire {}",
        m.name,
        m.job.describe(),
        next_fire(&m, now)
    );
    if !told {
        eprintln!("vibedesk: no daemon runs; start one with `vibedesk daemon` (docs §21.2)");
    }
    Ok(())
}

/// The next fire in local time, or why there is none.
fn next_fire(m: &Monitor, after: DateTime<Utc>) -> String {
    if m.paused {
        return "paused".into();
    }
    match m.next_after(after) {
        Some(t) => t
            .with_timezone(&Local)
            .format("%a %Y-%m-%d %H:%M")
            .to_string(),
        None => "never".into(),
    }
}

/// One line of a verdict for listings.
pub fn verdict_line(json: Option<&str>) -> String {
    match json.and_then(|j| serde_json::from_str::<crate::monitor::verdict::Verdict>(j).ok()) {
        Some(v) => crate::text::preview(&v.to_string(), 80),
        None => "-".into(),
    }
}

fn list(config: &Config, json: bool) -> Result<(), CliError> {
    let store = open(config)?;
    let now = Utc::now();
    let mut out = String::new();
    let mut rows = Vec::new();
    for row in store.monitors().map_err(CliError::failed)? {
        let m = Monitor::from_row(&row).map_err(CliError::failed)?;
        let last = store.fires(&m.name, 1).map_err(CliError::failed)?;
        let counts = store.delivery_counts(&m.name).map_err(CliError::failed)?;
        let next = anchor(&store, &m)
            .map_err(CliError::failed)
            .map(|a| next_fire(&m, a.max(now)))?;
        let last_status = last.first().map_or("-".to_string(), |f| f.status.clone());
        if json {
            rows.push(serde_json::json!({
                "name": m.name, "cron": m.cron, "tz": m.tz.name(), "job": m.job,
                "paused": m.paused, "next": next, "last_status": last_status,
                "deliveries": {"sent": counts.sent, "pending": counts.pending,
                               "claimed": counts.claimed, "dead": counts.dead},
            }));
            continue;
        }
        let _ = writeln!(
            out,
            "{:<18} {:<28} {:<22} {:<10} sent {} · waiting {} · dead {}  {}",
            m.name,
            format!("{} {}", m.cron, m.tz.name()),
            next,
            last_status,
            counts.sent,
            counts.pending.saturating_add(counts.claimed),
            counts.dead,
            m.job.describe()
        );
    }
    if json {
        println!("{}", serde_json::Value::Array(rows));
    } else if out.is_empty() {
        println!("no monitors (add one with `vibedesk monitor add`)");
    } else {
        println!(
            "{:<18} {:<28} {:<22} {:<10} DELIVERIES  JOB",
            "NAME", "SCHEDULE", "NEXT FIRE (LOCAL)", "LAST"
        );
        print!("{out}");
    }
    Ok(())
}

fn fire_line(f: &FireRow, tz: chrono_tz::Tz) -> String {
    let at = DateTime::<Utc>::from_timestamp_millis(f.scheduled_for_ms)
        .map(|t| t.with_timezone(&tz).format("%Y-%m-%d %H:%M %Z").to_string())
        .unwrap_or_default();
    let mut line = format!(
        "#{:<5} {at:<22} {:<9} {:<12} {}",
        f.id,
        f.trigger,
        f.status,
        verdict_line(f.verdict.as_deref())
    );
    if let Some(note) = &f.note {
        let _ = write!(line, "\n       note: {note}");
    }
    if let Some(dir) = &f.run_dir {
        let _ = write!(line, "\n       run: {dir}");
    }
    line
}

fn show(config: &Config, name: &str) -> Result<(), CliError> {
    let store = open(config)?;
    let m = Monitor::from_row(&store.monitor(name).map_err(CliError::usage)?)
        .map_err(CliError::failed)?;
    let counts = store.delivery_counts(name).map_err(CliError::failed)?;
    let next = next_fire(
        &m,
        anchor(&store, &m)
            .map_err(CliError::failed)?
            .max(Utc::now()),
    );
    println!(
        "monitor {}{}",
        m.name,
        if m.paused { " (paused)" } else { "" }
    );
    println!(
        "  schedule   {} in {} · next fire {next} (local)",
        m.cron,
        m.tz.name()
    );
    println!("  job        {}", m.job.describe());
    println!("  notify     {}", m.notify.as_str());
    for d in &m.deliver {
        println!("  deliver    {d}");
    }
    println!(
        "  deliveries sent {} · pending {} · claimed {} · dead {}",
        counts.sent, counts.pending, counts.claimed, counts.dead
    );
    for row in store.outbox(Some(name)).map_err(CliError::failed)? {
        if row.state == "sent" {
            continue;
        }
        println!(
            "  {:<7} fire #{} {} tries {} {}",
            row.state,
            row.fire_id,
            row.channel,
            row.tries,
            row.last_error.as_deref().unwrap_or("")
        );
    }
    let fires = store.fires(name, 5).map_err(CliError::failed)?;
    if !fires.is_empty() {
        println!("recent fires:");
        for f in &fires {
            println!("  {}", fire_line(f, m.tz));
        }
    }
    Ok(())
}

fn history(config: &Config, name: &str, limit: u32) -> Result<(), CliError> {
    let store = open(config)?;
    let m = Monitor::from_row(&store.monitor(name).map_err(CliError::usage)?)
        .map_err(CliError::failed)?;
    let fires = store.fires(name, limit).map_err(CliError::failed)?;
    if fires.is_empty() {
        println!("monitor {name} has not fired yet");
    }
    for f in &fires {
        println!("{}", fire_line(f, m.tz));
    }
    Ok(())
}

fn pause(config: &Config, name: &str, paused: bool) -> Result<(), CliError> {
    let store = open(config)?;
    store
        .set_paused(name, paused, now_ms())
        .map_err(CliError::usage)?;
    daemon::signal_change(&config.paths.state_dir);
    println!("{} {name}", if paused { "paused" } else { "resumed" });
    Ok(())
}

fn remove(config: &Config, name: &str) -> Result<(), CliError> {
    let store = open(config)?;
    store.remove_monitor(name).map_err(CliError::usage)?;
    daemon::signal_change(&config.paths.state_dir);
    println!("removed {name}");
    Ok(())
}

/// Runs the monitor's job now as a manual fire, records it, and delivers
/// what it queued before returning.
async fn run_now(config: &Config, name: &str) -> Result<(), CliError> {
    let settings = settings(config)?;
    let _log = init_logging(config);
    let mut store = open(config)?;
    let m = Monitor::from_row(&store.monitor(name).map_err(CliError::usage)?)
        .map_err(CliError::failed)?;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failed(format!("cannot find the vibedesk binary: {e}")))?;
    let runner = ProcessRunner {
        exe,
        approval: settings.approval,
        out_dir: config.paths.data_dir.join("monitors"),
        grace: settings.stop_grace,
    };
    let now = Utc::now();
    let id = store
        .start_fire(
            name,
            now.timestamp_millis(),
            Trigger::Manual,
            None,
            now.timestamp_millis(),
        )
        .map_err(CliError::failed)?
        .ok_or_else(|| CliError::failed("a fire of this monitor started this very millisecond"))?;
    eprintln!("vibedesk: running {} (fire #{id})…", m.job.describe());
    let stop = tokio_util::sync::CancellationToken::new();
    let out = runner.run(&m, id, &stop).await;
    let recorded = daemon::record(&mut store, &m, id, now, Trigger::Manual, &out, Utc::now())
        .map_err(CliError::failed)?;
    let mut summary = crate::monitor::outbox::PassSummary::default();
    if recorded.queued > 0 {
        let mut worker = Worker::new(open(config)?, settings).map_err(CliError::failed)?;
        let clock = crate::monitor::clock::SystemClock::default();
        summary = worker.pass(&clock, &stop).await.map_err(CliError::failed)?;
    }
    println!(
        "fire #{id} {} · verdict {} · delivered {} · retrying {} · dead {}",
        out.status,
        crate::text::preview(&recorded.verdict.to_string(), 80),
        summary.sent,
        summary.retried,
        summary.dead
    );
    if let Some(dir) = &out.run_dir {
        println!("run: {dir}");
    }
    match out.status.as_str() {
        "success" | "partial" => Ok(()),
        _ => Err(CliError::failed(format!(
            "fire #{id} {}: {}",
            out.status,
            out.reason.as_deref().unwrap_or("see the run's trace")
        ))),
    }
}

#[derive(clap::Args, Debug)]
pub struct DaemonArgs {
    /// Run the fires due now, deliver the outbox once, and exit.
    #[arg(long)]
    pub once: bool,
}

/// `vibedesk daemon`: in the foreground until SIGTERM.
pub async fn daemon(args: DaemonArgs) -> Result<(), CliError> {
    let config = load_config(&Overrides::default())?;
    let settings = settings(&config)?;
    let _log = init_logging(&config);
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failed(format!("cannot find the vibedesk binary: {e}")))?;
    let opts = crate::monitor::service::ServeOptions {
        paths: config.paths.clone(),
        settings,
        exe,
        once: args.once,
    };
    let say = |line: &str| {
        eprintln!(
            "{} vibedesk daemon: {line}",
            Local::now().format("%Y-%m-%d %H:%M:%S")
        );
    };
    crate::monitor::service::serve(opts, &say)
        .await
        .map_err(|e| match e {
            crate::monitor::service::ServeError::Daemon(
                crate::monitor::daemon::DaemonError::Locked(_),
            ) => CliError::usage(e),
            e => CliError::failed(e),
        })
        .map_err(|e| e.of("daemon"))
}
