//! `vibedesk memory`: inspect and maintain persistent memory.
//!
//! `list`, `show`, `add`, `forget`, `keep`, `unkeep`, `search`, `compress`, `gc [--dry-run]`,
//! `import DIR`, `reindex`. `compress --text --level daily|digest` is a pure
//! mode: it reads one body on stdin, prints its compressed form (or
//! `{"text": …, "retention": …}` with `--json`) and touches no store; with
//! default settings its output equals the original's `compression.py`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use clap::Subcommand;
use serde_json::json;

use super::{CliError, exit};
use crate::memory::compression::{self, CompressOptions, Level, Scoring};
use crate::memory::entry::{Entry, cut_chars, entries_notice, format_ts, sanitize_body};
use crate::memory::store::{GcReport, KeepOutcome};
use crate::memory::{MemoryFlags, MemoryStore, MemoryType, NewEntry, maintenance, memory_dir};
use crate::store::Paths;

#[derive(clap::Args, Debug)]
pub struct MemoryArgs {
    #[command(subcommand)]
    pub command: MemoryCommand,
}

#[derive(Subcommand, Debug)]
pub enum MemoryCommand {
    /// List memories (type, level, importance, last access, title).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Print one memory (by title or file name).
    Show { name: String },
    /// Save a memory; the body comes from --content or stdin.
    Add {
        #[arg(long)]
        title: String,
        /// user, feedback, project or reference.
        #[arg(long = "type", default_value = "project")]
        memory_type: String,
        #[arg(long)]
        description: Option<String>,
        /// Comma-separated, at most 5.
        #[arg(long, value_delimiter = ',')]
        keywords: Vec<String>,
        /// The body (default: read stdin).
        #[arg(long)]
        content: Option<String>,
    },
    /// Delete a memory by title.
    Forget { title: String },
    /// Keep a memory the model wrote (by id, title or file name): it is
    /// then the user's, recalled without the "unconfirmed" label.
    Keep { name: String },
    /// Take back a keep: the model's memory is unconfirmed again.
    Unkeep { name: String },
    /// Search memories (or past sessions with --sessions).
    Search {
        query: String,
        #[arg(long, default_value_t = 5)]
        max: usize,
        #[arg(long)]
        sessions: bool,
        #[arg(long)]
        json: bool,
    },
    /// Compress due memories (or one, or stdin text with --text).
    Compress(CompressArgs),
    /// Garbage-collect: archive low-importance memories, then compress due ones.
    Gc {
        /// Show what would happen; change nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        json: bool,
    },
    /// Copy the entries of a Vibe-Trading memory folder (e.g. ~/.vibe-trading/memory) in.
    Import {
        dir: PathBuf,
        #[arg(long)]
        dry_run: bool,
    },
    /// Rebuild the full-text index from the memory files.
    Reindex,
}

#[derive(clap::Args, Debug)]
pub struct CompressArgs {
    /// Pure mode: compress the body read from stdin and print it; no store is touched.
    #[arg(long)]
    pub text: bool,
    /// Target level: daily or digest (required with --text or a NAME).
    #[arg(long)]
    pub level: Option<String>,
    /// Keywords for the header line (comma-separated; --text only).
    #[arg(long, value_delimiter = ',')]
    pub keywords: Vec<String>,
    /// With --text: print {"text": ..., "retention": ...}.
    #[arg(long)]
    pub json: bool,
    /// Score with the smoothed IDF that fixes the original's negative-IDF
    /// inversion (docs §12.7); default: the original's scoring.
    #[arg(long)]
    pub corrected_idf: bool,
    /// Show what would be compressed; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// One memory (title or file) to compress now; default: every due memory.
    pub name: Option<String>,
}

pub fn memory(args: MemoryArgs) -> Result<(), CliError> {
    match args.command {
        MemoryCommand::Compress(c) if c.text => compress_text(&c),
        command => with_store(command),
    }
}

/// The `--level` of a compression: daily or digest, and required (exit 2).
fn parse_level(level: Option<&str>) -> Result<Level, CliError> {
    match level.map(Level::parse) {
        Some(Some(l @ (Level::Daily | Level::Digest))) => Ok(l),
        Some(_) => Err(CliError::usage(format!(
            "--level must be daily or digest, got {:?}",
            level.unwrap_or_default()
        ))),
        None => Err(CliError::usage("--level daily|digest is required")),
    }
}

fn clean_keywords(raw: &[String]) -> Vec<String> {
    raw.iter()
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .collect()
}

fn compress_text(args: &CompressArgs) -> Result<(), CliError> {
    let level = parse_level(args.level.as_deref())?;
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::failed(format!("cannot read stdin: {e}")))?;
    let body = String::from_utf8(bytes).map_err(|_| CliError::usage("stdin is not UTF-8 text"))?;
    let opts = CompressOptions {
        scoring: if args.corrected_idf {
            Scoring::Corrected
        } else {
            Scoring::Original
        },
    };
    let keywords = clean_keywords(&args.keywords);
    let text = compression::compress(&body, level, &keywords, opts);
    let out = if args.json {
        json!({"text": text, "retention": compression::estimate_retention(&body, &text)})
            .to_string()
    } else {
        text
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{out}")
        .and_then(|_| stdout.flush())
        // The reader went away (a closed pipe): nothing more to say.
        .map_err(|_| CliError::quiet(exit::FAILED))
}

fn open_store(flags: MemoryFlags) -> Result<MemoryStore, CliError> {
    let paths = Paths::from_env()
        .ok_or_else(|| CliError::usage("no home directory found; set VIBEDESK_HOME"))?;
    MemoryStore::open(memory_dir(&paths.data_dir), flags).map_err(CliError::failed)
}

/// Says on stderr, in one line, which of the entries shown had frontmatter
/// values that could not be read (stdout, `--json` included, stays clean).
fn warn_problems(entries: &[Entry], store: &MemoryStore) {
    if let Some(notice) = entries_notice(entries, store.entries_dir()) {
        eprintln!("vibedesk: warning: {notice}");
    }
}

fn print_json(v: &impl serde::Serialize) -> Result<(), CliError> {
    let s = serde_json::to_string_pretty(v).map_err(CliError::failed)?;
    println!("{s}");
    Ok(())
}

/// Exit 1 when a maintenance report holds errors (already printed).
fn report_outcome(report: &GcReport) -> Result<(), CliError> {
    if report.errors.is_empty() {
        Ok(())
    } else {
        Err(CliError::quiet(exit::FAILED))
    }
}

fn print_gc(report: &GcReport) {
    let verb = if report.dry_run {
        "would archive"
    } else {
        "archived"
    };
    for a in &report.actions {
        println!(
            "{verb}: {} (importance {}, {}){}",
            a.title,
            a.importance,
            a.reason,
            a.error
                .as_ref()
                .map(|e| format!(" — failed: {e}"))
                .unwrap_or_default()
        );
    }
    for c in &report.compressions {
        println!(
            "{}: {} {} → {} ({} → {} chars, retention {:.2}){}",
            if c.archive.is_some() {
                "compressed"
            } else {
                "would compress"
            },
            c.title,
            c.from,
            c.to,
            c.chars_before,
            c.chars_after,
            c.retention,
            c.archive
                .as_ref()
                .map(|p| format!(", original in {}", p.display()))
                .unwrap_or_default()
        );
    }
    for e in &report.errors {
        eprintln!("vibedesk: {e}");
    }
    if report.actions.is_empty() && report.compressions.is_empty() {
        println!("nothing to do");
    }
}

/// Opens the store once (after the flag warnings) and hands it to the
/// subcommand; each subcommand prints its own output.
fn with_store(command: MemoryCommand) -> Result<(), CliError> {
    let flags = MemoryFlags::from_env();
    for w in flags.warnings() {
        eprintln!("vibedesk: warning: {w}");
    }
    let store = open_store(flags.clone())?;
    let now = Utc::now();
    match command {
        MemoryCommand::List { json } => list(&store, &flags, now, json),
        MemoryCommand::Show { name } => show(&store, &name),
        MemoryCommand::Add {
            title,
            memory_type,
            description,
            keywords,
            content,
        } => add(
            &store,
            now,
            AddRequest {
                title,
                memory_type,
                description,
                keywords,
                content,
            },
        ),
        MemoryCommand::Forget { title } => forget(&store, &title),
        MemoryCommand::Keep { name } => keep(&store, &name, true),
        MemoryCommand::Unkeep { name } => keep(&store, &name, false),
        MemoryCommand::Search {
            query,
            max,
            sessions,
            json,
        } if sessions => search_sessions(&store, &query, max, json),
        MemoryCommand::Search {
            query, max, json, ..
        } => search_memories(&store, now, &query, max, json),
        MemoryCommand::Compress(args) => compress(&store, now, &args),
        MemoryCommand::Gc { dry_run, json } => gc(&store, &flags, now, dry_run, json),
        MemoryCommand::Import { dir, dry_run } => import(&store, &dir, dry_run),
        MemoryCommand::Reindex => reindex(&store),
    }
}

/// `memory list`: one line per memory, or every field with `--json`.
fn list(
    store: &MemoryStore,
    flags: &MemoryFlags,
    now: DateTime<Utc>,
    json: bool,
) -> Result<(), CliError> {
    let entries = store.list().map_err(CliError::failed)?;
    warn_problems(&entries, store);
    if json {
        let rows: Vec<_> = entries
            .iter()
            .map(|e| {
                json!({
                    "title": e.title, "type": e.memory_type, "file": e.file,
                    "level": e.level.as_str(), "importance": e.importance(now, flags.decay),
                    "quality": e.quality, "access_count": e.access_count,
                    "created_at": format_ts(e.created_at), "last_accessed": format_ts(e.last_accessed),
                    "description": e.description, "id": e.id,
                    "origin": e.origin.as_str(), "confirmed": !e.is_unconfirmed(),
                })
            })
            .collect();
        return print_json(&rows);
    }
    if entries.is_empty() {
        println!("no memories in {}", store.entries_dir().display());
    }
    for e in &entries {
        println!(
            "{:<9} {:<6} {:>5.2}  {}  {}  ({}){}",
            e.memory_type,
            e.level.as_str(),
            e.importance(now, flags.decay),
            e.last_accessed.format("%Y-%m-%d"),
            sanitize_body(&e.title),
            e.file,
            unconfirmed_mark(e)
        );
    }
    Ok(())
}

/// `memory show NAME`: the file as written, control characters removed.
fn show(store: &MemoryStore, name: &str) -> Result<(), CliError> {
    let e = store
        .get(name)
        .map_err(CliError::failed)?
        .ok_or_else(|| CliError::failed(format!("no memory named {name:?}")))?;
    let text = std::fs::read_to_string(&e.path)
        .map_err(|err| CliError::failed(format!("cannot read {}: {err}", e.path.display())))?;
    warn_problems(std::slice::from_ref(&e), store);
    // Control characters could drive the terminal (the original's #108).
    print!("{}", sanitize_body(&text));
    if !text.ends_with('\n') {
        println!();
    }
    Ok(())
}

/// The arguments of `memory add`, as typed.
struct AddRequest {
    title: String,
    memory_type: String,
    description: Option<String>,
    keywords: Vec<String>,
    content: Option<String>,
}

/// `memory add`: the body from `--content` or stdin.
fn add(store: &MemoryStore, now: DateTime<Utc>, request: AddRequest) -> Result<(), CliError> {
    let memory_type = MemoryType::parse(&request.memory_type)
        .ok_or_else(|| CliError::usage("--type must be user, feedback, project or reference"))?;
    let body = match request.content {
        Some(c) => c,
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| CliError::usage(format!("cannot read the body from stdin: {e}")))?;
            s
        }
    };
    let mut new = NewEntry::new(request.title, body, memory_type);
    new.description = request.description.unwrap_or_default();
    new.keywords = clean_keywords(&request.keywords);
    let added = store.add(new, now).map_err(|e| match e {
        crate::memory::MemoryError::Invalid(m) => CliError::usage(m),
        e => CliError::failed(e),
    })?;
    match added {
        crate::memory::AddOutcome::Saved { path, .. } => println!("saved {}", path.display()),
        crate::memory::AddOutcome::Duplicate => {
            println!("skipped: identical to a memory saved less than 30 s ago")
        }
    }
    Ok(())
}

/// `memory forget TITLE`.
fn forget(store: &MemoryStore, title: &str) -> Result<(), CliError> {
    if !store.remove(title).map_err(CliError::failed)? {
        return Err(CliError::failed(format!("no memory titled {title:?}")));
    }
    println!("removed {title}");
    Ok(())
}

/// `memory keep NAME` / `memory unkeep NAME` (docs §8.3).
fn keep(store: &MemoryStore, name: &str, keep: bool) -> Result<(), CliError> {
    match store.keep(name, keep).map_err(CliError::failed)? {
        KeepOutcome::Set { title, confirmed } => {
            let verb = if confirmed { "kept" } else { "unkept" };
            println!("{verb} {}", sanitize_body(&title));
            Ok(())
        }
        KeepOutcome::UsersOwn { title } => {
            println!(
                "{} is the user's own memory already: nothing to keep",
                sanitize_body(&title)
            );
            Ok(())
        }
        KeepOutcome::NotFound => Err(CliError::failed(format!(
            "no memory with the id, title or file name {name:?}"
        ))),
    }
}

/// The mark `memory list` puts after a memory the model wrote and the
/// user has not kept, with the command that keeps it.
fn unconfirmed_mark(e: &Entry) -> String {
    if e.is_unconfirmed() {
        format!(
            "  [{}; vibedesk memory keep {}]",
            crate::memory::entry::UNCONFIRMED_LABEL,
            e.id
        )
    } else {
        String::new()
    }
}

/// `memory search --sessions`: past sessions, not memories.
fn search_sessions(
    store: &MemoryStore,
    query: &str,
    max: usize,
    json: bool,
) -> Result<(), CliError> {
    // The store opened, so a home was found; this cannot fail in practice.
    let paths = Paths::from_env().ok_or(CliError::quiet(exit::USAGE))?;
    let results = store
        .search_sessions(&paths.sessions_dir(), query, max.max(1), None)
        .map_err(CliError::failed)?;
    if json {
        return print_json(&results);
    }
    if results.is_empty() {
        println!("no sessions match");
    }
    for r in results {
        println!("{}  {}", r.session_id, sanitize_body(&r.title));
        for m in r.matches {
            println!("  [{}] {}", m.role, sanitize_body(&m.snippet));
        }
    }
    Ok(())
}

/// `memory search QUERY`: the most relevant memories with a preview.
fn search_memories(
    store: &MemoryStore,
    now: DateTime<Utc>,
    query: &str,
    max: usize,
    json: bool,
) -> Result<(), CliError> {
    let found = store
        .find_relevant(query, max.max(1), now)
        .map_err(CliError::failed)?;
    warn_problems(&found, store);
    if json {
        let rows: Vec<_> = found
            .iter()
            .map(|e| json!({"title": e.title, "type": e.memory_type, "file": e.file, "content": cut_chars(&e.body, 2_000)}))
            .collect();
        return print_json(&rows);
    }
    if found.is_empty() {
        println!("no memories match");
    }
    for e in found {
        let preview = cut_chars(&e.body, 120).replace('\n', " ");
        println!(
            "{} ({}, {}): {}",
            sanitize_body(&e.title),
            e.memory_type,
            e.file,
            sanitize_body(&preview)
        );
    }
    Ok(())
}

/// `memory compress [NAME]`: one memory now, or every due one.
fn compress(store: &MemoryStore, now: DateTime<Utc>, args: &CompressArgs) -> Result<(), CliError> {
    if let Some(name) = &args.name {
        return compress_one(store, now, name, args.level.as_deref());
    }
    let report = store
        .compress_due(args.dry_run, now)
        .map_err(CliError::failed)?;
    if args.json {
        return print_json(&report);
    }
    print_gc(&report);
    report_outcome(&report)
}

/// `memory compress NAME --level L`.
fn compress_one(
    store: &MemoryStore,
    now: DateTime<Utc>,
    name: &str,
    level: Option<&str>,
) -> Result<(), CliError> {
    let level = parse_level(level)?;
    let rec = store
        .compress_entry(name, level, now)
        .map_err(CliError::failed)?;
    print_gc(&GcReport {
        enabled: true,
        compressions: vec![rec],
        ..GcReport::default()
    });
    Ok(())
}

/// `memory gc [--dry-run]`: a dry run asks the store; a real one runs
/// maintenance now, which records the run.
fn gc(
    store: &MemoryStore,
    flags: &MemoryFlags,
    now: DateTime<Utc>,
    dry_run: bool,
    json: bool,
) -> Result<(), CliError> {
    let report = if dry_run {
        store
            .run_gc_with(flags, true, now)
            .map_err(CliError::failed)?
    } else {
        let m = maintenance::run_now(store, now, flags);
        if let Some(e) = &m.error {
            return Err(CliError::failed(e));
        }
        if let Some(s) = &m.skipped {
            eprintln!("vibedesk: {s}");
        }
        m.gc.unwrap_or_default()
    };
    if json {
        return print_json(&report);
    }
    if !report.enabled {
        eprintln!(
            "vibedesk: memory GC is off (set VIBEDESK_MEMORY_GC=on or VIBEDESK_MEMORY=on|full)"
        );
        return Ok(());
    }
    print_gc(&report);
    report_outcome(&report)
}

/// `memory import DIR [--dry-run]`: one line per file, then the counts.
fn import(store: &MemoryStore, dir: &Path, dry_run: bool) -> Result<(), CliError> {
    let report = store.import_dir(dir, dry_run).map_err(CliError::failed)?;
    let verb = if dry_run { "would import" } else { "imported" };
    for (src, file, title) in &report.imported {
        println!(
            "{verb}: {} → {file} ({})",
            src.display(),
            sanitize_body(title)
        );
    }
    for (src, reason) in &report.skipped {
        println!("skipped: {} ({reason})", src.display());
    }
    println!(
        "{} {verb}, {} skipped",
        report.imported.len(),
        report.skipped.len()
    );
    Ok(())
}

/// `memory reindex`.
fn reindex(store: &MemoryStore) -> Result<(), CliError> {
    let n = store.rebuild_index().map_err(CliError::failed)?;
    println!("indexed {n} memories into {}", store.index_path().display());
    Ok(())
}
