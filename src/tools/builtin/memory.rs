//! Memory and skill tools: `remember` (docs §8.9), `recall`, `session_search`
//! and `load_skill` (docs §4.6).
//!
//! Store calls touch files and SQLite, so they run on the blocking pool.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::Utc;
use serde_json::{Value, json};

use super::{Builtin, Family, MemoryEnv, ToolEnv, register_family};
use crate::memory::entry::cut_chars;
use crate::memory::links::Link;
use crate::memory::skills::load_skill_page;
use crate::memory::store::{AddOutcome, Reinforce, ReinforceEvent};
use crate::memory::{Entry, MemoryError, MemoryStore, MemoryType, NewEntry, Origin, SkillSet};
use crate::model::contract::{
    LoadSkillArgs, MemoryOutput, RecallArgs, RecalledMemory, RelatedMemory, RememberArgs,
    SessionSearchArgs,
};
use crate::model::names;
use crate::research::data::DataConfig;
use crate::tools::registry::DuplicateTool;
use crate::tools::{Access, Caps, Gate};
use crate::tools::{Registry, ToolContext, ToolError, TypedTool, origin};

/// Characters of each memory body a recall returns (docs §8.9).
const RECALL_CONTENT_CHARS: usize = 2_000;
const RECALL_DEFAULT: usize = 5;
const RECALL_MAX: usize = 20;
const SESSIONS_DEFAULT: usize = 3;
const SESSIONS_MAX: usize = 10;

/// Registers `remember`, `recall`, `session_search` and `load_skill`.
/// `sessions_dir` is `<data>/sessions` (what `session_search` searches).
pub fn register_memory_tools(
    registry: &mut Registry,
    store: Arc<MemoryStore>,
    skills: Arc<SkillSet>,
    sessions_dir: PathBuf,
) -> Result<(), DuplicateTool> {
    let mut env = ToolEnv::new(DataConfig::default());
    env.memory = Some(MemoryEnv {
        store,
        skills,
        sessions_dir,
    });
    register_family(registry, Family::Memory, &env)
}

fn memory_error(e: MemoryError) -> ToolError {
    match e {
        MemoryError::Invalid(m) => ToolError::InvalidArguments(m),
        MemoryError::Locked(_) => ToolError::failed("memory_locked", e.to_string()),
        MemoryError::Protected(_) => ToolError::failed("memory_protected", e.to_string()),
        other => ToolError::failed("memory_error", other.to_string()),
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, MemoryError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ToolError::failed("memory_error", format!("memory task failed: {e}")))?
        .map_err(memory_error)
}

/// A string argument, trimmed; blank is absent.
fn opt_str(value: Option<&String>) -> Option<&str> {
    value.map(|s| s.trim()).filter(|s| !s.is_empty())
}

fn need_str<'a>(value: Option<&'a String>, key: &str, action: &str) -> Result<&'a str, ToolError> {
    opt_str(value).ok_or_else(|| {
        ToolError::InvalidArguments(format!("'{key}' is required for action '{action}'"))
    })
}

fn max_arg(value: Option<i64>, default: usize, max: usize) -> Result<usize, ToolError> {
    match value {
        None => Ok(default),
        Some(n) => u64::try_from(n)
            .map(|n| (n as usize).clamp(1, max))
            .map_err(|_| {
                ToolError::InvalidArguments(format!(
                    "'max_results' must be a positive integer, got {n}"
                ))
            }),
    }
}

/// Links shown per recalled memory (docs §8.9).
const RECALL_RELATED: usize = 3;

/// One recalled memory; `related` (its best links, scores to 2 decimals)
/// only when it has any, as in the original.
fn recalled(e: &Entry, links: &[Link]) -> RecalledMemory {
    RecalledMemory {
        title: e.title.clone(),
        memory_type: e.memory_type.clone(),
        content: cut_chars(&e.body, RECALL_CONTENT_CHARS).to_string(),
        level: e.level.as_str().to_string(),
        source: e.source.clone(),
        note: e
            .is_unconfirmed()
            .then(|| crate::memory::entry::UNCONFIRMED_LABEL.to_string()),
        related: (!links.is_empty()).then(|| {
            links
                .iter()
                .take(RECALL_RELATED)
                .map(|l| RelatedMemory {
                    target: l.target.clone(),
                    score: (l.score * 100.0).round() / 100.0,
                })
                .collect()
        }),
    }
}

/// A `{status, message}` answer.
fn said(status: &str, message: impl Into<String>) -> MemoryOutput {
    MemoryOutput {
        status: status.to_string(),
        message: Some(message.into()),
        ..Default::default()
    }
}

/// Recalls for the model and counts each hit as an access (docs §8.5).
async fn recall_output(
    store: Arc<MemoryStore>,
    query: String,
    max: usize,
) -> Result<MemoryOutput, ToolError> {
    let (found, links) = blocking(move || {
        let now = Utc::now();
        let found = store.find_relevant(&query, max, now)?;
        for e in &found {
            if let Err(err) = store.track_access(e, now) {
                tracing::warn!(file = %e.file, "access not recorded: {err}");
            }
        }
        let links: Vec<Vec<Link>> = found.iter().map(|e| store.links_of(e)).collect();
        Ok((found, links))
    })
    .await?;
    Ok(MemoryOutput {
        status: "ok".into(),
        count: Some(found.len()),
        memories: Some(
            found
                .iter()
                .zip(&links)
                .map(|(e, l)| recalled(e, l))
                .collect(),
        ),
        ..Default::default()
    })
}

/// `remember`: save, recall, forget or reinforce persistent memories.
pub struct Remember {
    store: Arc<MemoryStore>,
}

impl TypedTool for Remember {
    type Args = RememberArgs;
    type Output = MemoryOutput;

    const NAME: &'static str = names::REMEMBER;
    const CAPS: Caps = Caps::WRITES
        .access(Access::MemoryWrite)
        .served_when(names::REMEMBER, Gate::MemoryWrite)
        .planner();
    fn description(&self) -> &str {
        "Persistent memory across sessions: save a finding or preference (action save: title, content, memory_type, optional description/keywords), recall by query, forget by title, or reinforce a memory that helped or misled."
    }
    fn lean_properties(&self) -> Option<&[&str]> {
        Some(&["action", "title", "content", "memory_type", "query"])
    }
    fn repeatable(&self) -> bool {
        true
    }
    async fn run(&self, args: RememberArgs, _ctx: &ToolContext) -> Result<MemoryOutput, ToolError> {
        let store = self.store.clone();
        // Set when an MCP client calls (docs §13.4): what it saves is
        // marked with it, and the user's own memories are out of reach.
        let origin = origin::current();
        match opt_str(args.action.as_ref()).unwrap_or("save") {
            "save" => save(store, &args, origin).await,
            "recall" => {
                let query = need_str(args.query.as_ref(), "query", "recall")?.to_string();
                recall_output(store, query, RECALL_DEFAULT).await
            }
            "forget" => {
                let title = need_str(args.title.as_ref(), "title", "forget")?.to_string();
                let t = title.clone();
                let removed = blocking(move || store.remove_as(&t, origin.as_deref())).await?;
                Ok(if removed {
                    said("ok", format!("Removed: {title}"))
                } else {
                    said("not_found", format!("Not found: {title}"))
                })
            }
            "reinforce" => reinforce(store, &args, origin).await,
            other => Err(ToolError::InvalidArguments(format!(
                "action '{other}' is not one of save, recall, forget, reinforce"
            ))),
        }
    }
}

/// `remember` with action `save`.
async fn save(
    store: Arc<MemoryStore>,
    args: &RememberArgs,
    origin: Option<String>,
) -> Result<MemoryOutput, ToolError> {
    let title = need_str(args.title.as_ref(), "title", "save")?.to_string();
    let content = args
        .content
        .clone()
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| {
            ToolError::InvalidArguments("'content' is required for action 'save'".into())
        })?;
    let memory_type = match opt_str(args.memory_type.as_ref()) {
        None => MemoryType::Project,
        Some(t) => MemoryType::parse(t).ok_or_else(|| {
            ToolError::InvalidArguments(format!(
                "memory_type '{t}' is not one of user, feedback, project, reference"
            ))
        })?,
    };
    // Keywords that are not strings are dropped, as they always were.
    let keywords: Vec<String> = args
        .keywords
        .iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    let mut new = NewEntry::new(title.clone(), content, memory_type);
    new.description = opt_str(args.description.as_ref()).unwrap_or("").to_string();
    new.keywords = keywords;
    new.source = origin;
    // Whoever calls this tool is a model (the session's, or an MCP
    // client's): its memory waits for the user to keep it (docs §8.3).
    new.origin = Origin::Model;
    let outcome = blocking(move || store.add(new, Utc::now())).await?;
    Ok(match outcome {
        AddOutcome::Saved { path, .. } => MemoryOutput {
            path: Some(path.display().to_string()),
            ..said("ok", format!("Saved: {title}"))
        },
        AddOutcome::Duplicate => said(
            "skipped",
            format!("Skipped: an identical memory '{title}' was saved less than 30 s ago"),
        ),
    })
}

/// `remember` with action `reinforce`.
async fn reinforce(
    store: Arc<MemoryStore>,
    args: &RememberArgs,
    origin: Option<String>,
) -> Result<MemoryOutput, ToolError> {
    let title = need_str(args.title.as_ref(), "title", "reinforce")?.to_string();
    let event_name = need_str(args.event.as_ref(), "event", "reinforce")?;
    let event = ReinforceEvent::parse(event_name)
        .filter(|e| *e != ReinforceEvent::PassiveDecay)
        .ok_or_else(|| {
            ToolError::InvalidArguments(format!(
                "event '{event_name}' is not one of task_success, task_failure, user_confirm, user_reject"
            ))
        })?;
    // Default and unknown sources count as the system (docs §8.9).
    let source = match opt_str(args.source.as_ref()) {
        Some("user") => "user",
        _ => "system",
    };
    let t = title.clone();
    let outcome = blocking(move || {
        // An MCP client's verdict could push the user's memory into GC.
        if origin.is_some() && store.get(&t)?.is_some_and(|e| !e.is_external()) {
            return Err(MemoryError::Protected(t));
        }
        store.reinforce(&t, event, source, Utc::now())
    })
    .await?;
    Ok(match outcome {
        Reinforce::Applied { old, new } => said(
            "ok",
            format!("Reinforced: {title} (quality {old:.2} → {new:.2})"),
        ),
        Reinforce::Disabled => said(
            "skipped",
            "Memory quality scoring is off (VIBEDESK_MEMORY_QUALITY)",
        ),
        Reinforce::NotFound => said("skipped", format!("Not found: {title}")),
        Reinforce::CapReached => said(
            "skipped",
            format!("Skipped: '{title}' was already reinforced by ±0.5 in this session"),
        ),
    })
}

/// `recall`: search persistent memories.
pub struct Recall {
    store: Arc<MemoryStore>,
}

impl TypedTool for Recall {
    type Args = RecallArgs;
    type Output = MemoryOutput;

    const NAME: &'static str = names::RECALL;
    const CAPS: Caps = Caps::READ_ONLY.served_as(names::RECALL).planner();
    fn description(&self) -> &str {
        "Search persistent memories (findings, preferences, references saved in earlier sessions) by keywords; tickers like BRK.B and CJK text work. Verify any number in a memory with a data tool before reporting it."
    }
    fn repeatable(&self) -> bool {
        true
    }
    async fn run(&self, args: RecallArgs, _ctx: &ToolContext) -> Result<MemoryOutput, ToolError> {
        let query = need_str(Some(&args.query), "query", "recall")?.to_string();
        let max = max_arg(args.max_results, RECALL_DEFAULT, RECALL_MAX)?;
        recall_output(self.store.clone(), query, max).await
    }
}

/// `session_search`: full-text search over earlier sessions' messages.
pub struct SessionSearch {
    store: Arc<MemoryStore>,
    sessions_dir: PathBuf,
}

impl TypedTool for SessionSearch {
    type Args = SessionSearchArgs;
    /// The matching sessions as the store reports them.
    type Output = Value;

    const NAME: &'static str = names::SESSION_SEARCH;
    const CAPS: Caps = Caps::READ_ONLY.served_when(names::SESSION_SEARCH, Gate::Sessions);
    fn description(&self) -> &str {
        "Search past conversation sessions by keyword. Returns matching sessions with context snippets. Use when the user refers to earlier work, strategies or conversations."
    }
    fn repeatable(&self) -> bool {
        true
    }
    async fn run(&self, args: SessionSearchArgs, ctx: &ToolContext) -> Result<Value, ToolError> {
        let query = need_str(Some(&args.query), "query", "search")?.to_string();
        let max = max_arg(args.max_results, SESSIONS_DEFAULT, SESSIONS_MAX)?;
        let store = self.store.clone();
        let dir = self.sessions_dir.clone();
        let current = ctx.session_id.clone();
        let q = query.clone();
        // The current conversation is already in context: search the others.
        let results =
            blocking(move || store.search_sessions(&dir, &q, max, Some(&current))).await?;
        if results.is_empty() {
            return Ok(json!({
                "status": "ok", "message": format!("No past sessions matching '{query}'"), "results": [],
            }));
        }
        Ok(json!({"status": "ok", "query": query, "results": results}))
    }
}

/// `load_skill`: a skill's documentation, whole, by outline and section, or paged.
pub struct LoadSkill {
    skills: Arc<SkillSet>,
}

impl LoadSkill {
    pub fn new(skills: Arc<SkillSet>) -> Self {
        LoadSkill { skills }
    }
}

/// The original accepts anything `int()` takes; negative offsets are 0.
fn offset_arg(value: Option<&Value>) -> Result<Option<usize>, ToolError> {
    let bad = || ToolError::failed("invalid_offset", "Error: offset must be an integer");
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(i) = n.as_i64() {
                Ok(Some(i.max(0) as usize))
            } else if let Some(u) = n.as_u64() {
                Ok(Some(u as usize))
            } else {
                n.as_f64()
                    .filter(|f| f.is_finite())
                    .map(|f| Some(f.trunc().max(0.0) as usize))
                    .ok_or_else(bad)
            }
        }
        Some(Value::String(s)) => s
            .trim()
            .parse::<i64>()
            .map(|i| Some(i.max(0) as usize))
            .map_err(|_| bad()),
        Some(_) => Err(bad()),
    }
}

impl TypedTool for LoadSkill {
    type Args = LoadSkillArgs;
    /// The skill store's JSON envelope (`mode`, `offset`, `next_offset`, …).
    type Output = Value;

    const NAME: &'static str = names::LOAD_SKILL;
    const CAPS: Caps = Caps::READ_ONLY.served_as(names::LOAD_SKILL);
    fn description(&self) -> &str {
        "Load documentation for a named skill before starting unfamiliar work. A skill that fits comes back complete; a long one comes back as an outline plus its opening text: call again with section=\"<title from the outline>\" for one section, or offset=next_offset to read on."
    }
    fn repeatable(&self) -> bool {
        true
    }
    async fn run(&self, args: LoadSkillArgs, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let name = Some(args.name.trim())
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ToolError::InvalidArguments("'name' must be a skill name".into()))?;
        let offset = offset_arg(args.offset.as_ref())?;
        let page = load_skill_page(&self.skills, name, args.section.as_deref(), offset)
            .map_err(|e| ToolError::failed(e.code(), e.to_string()))?;
        // The page is compact JSON written by serde_json, so parsing and
        // writing it again gives the same text.
        serde_json::from_str(&page).map_err(|e| {
            ToolError::failed("internal_error", format!("skill page is not JSON: {e}"))
        })
    }
}

impl Builtin for Remember {
    fn build(env: &ToolEnv) -> Option<Self> {
        let m = env.memory.as_ref()?;
        Some(Remember {
            store: m.store.clone(),
        })
    }
}

impl Builtin for Recall {
    fn build(env: &ToolEnv) -> Option<Self> {
        let m = env.memory.as_ref()?;
        Some(Recall {
            store: m.store.clone(),
        })
    }
}

impl Builtin for SessionSearch {
    fn build(env: &ToolEnv) -> Option<Self> {
        let m = env.memory.as_ref()?;
        Some(SessionSearch {
            store: m.store.clone(),
            sessions_dir: m.sessions_dir.clone(),
        })
    }
}

impl Builtin for LoadSkill {
    fn build(env: &ToolEnv) -> Option<Self> {
        let m = env.memory.as_ref()?;
        Some(LoadSkill {
            skills: m.skills.clone(),
        })
    }
}
