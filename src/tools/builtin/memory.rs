//! Memory and skill tools: `remember` (spec §8.9), `recall`, `session_search`
//! and `load_skill` (spec §4.6).
//!
//! Store calls touch files and SQLite, so they run on the blocking pool.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::Utc;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use crate::memory::entry::cut_chars;
use crate::memory::links::Link;
use crate::memory::skills::load_skill_page;
use crate::memory::store::{AddOutcome, Reinforce, ReinforceEvent};
use crate::memory::{Entry, MemoryError, MemoryStore, MemoryType, NewEntry, SkillSet};
use crate::tools::registry::DuplicateTool;
use crate::tools::{Registry, Tool, ToolContext, ToolError, ToolResult};

/// Characters of each memory body a recall returns (spec §8.9).
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
    registry.register(Arc::new(Remember {
        store: store.clone(),
    }))?;
    registry.register(Arc::new(Recall {
        store: store.clone(),
    }))?;
    registry.register(Arc::new(SessionSearch {
        store,
        sessions_dir,
    }))?;
    registry.register(Arc::new(LoadSkill { skills }))?;
    Ok(())
}

fn memory_error(e: MemoryError) -> ToolError {
    match e {
        MemoryError::Invalid(m) => ToolError::InvalidArguments(m),
        MemoryError::Locked(_) => ToolError::failed("memory_locked", e.to_string()),
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

fn opt_str<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn need_str<'a>(args: &'a Value, key: &str, action: &str) -> Result<&'a str, ToolError> {
    opt_str(args, key).ok_or_else(|| {
        ToolError::InvalidArguments(format!("'{key}' is required for action '{action}'"))
    })
}

fn max_arg(args: &Value, default: usize, max: usize) -> Result<usize, ToolError> {
    match args.get("max_results") {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .map(|n| (n as usize).clamp(1, max))
            .ok_or_else(|| {
                ToolError::InvalidArguments(format!(
                    "'max_results' must be a positive integer, got {v}"
                ))
            }),
    }
}

/// Links shown per recalled memory (spec §8.9).
const RECALL_RELATED: usize = 3;

/// One recalled memory; `related` (its best links, scores to 2 decimals)
/// only when it has any, as in the original.
fn memory_json(e: &Entry, links: &[Link]) -> Value {
    let mut v = json!({
        "title": e.title,
        "type": e.memory_type,
        "content": cut_chars(&e.body, RECALL_CONTENT_CHARS),
        "level": e.level.as_str(),
    });
    if !links.is_empty() {
        v["related"] = links
            .iter()
            .take(RECALL_RELATED)
            .map(|l| json!({"target": l.target, "score": (l.score * 100.0).round() / 100.0}))
            .collect();
    }
    v
}

/// Recalls for the model and counts each hit as an access (spec §8.5).
async fn recall_json(store: Arc<MemoryStore>, query: String, max: usize) -> ToolResult {
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
    Ok(json!({
        "status": "ok",
        "count": found.len(),
        "memories": found
            .iter()
            .zip(&links)
            .map(|(e, l)| memory_json(e, l))
            .collect::<Vec<_>>(),
    })
    .to_string())
}

/// `remember`: save, recall, forget or reinforce persistent memories.
pub struct Remember {
    store: Arc<MemoryStore>,
}

impl Tool for Remember {
    fn name(&self) -> &str {
        "remember"
    }
    fn description(&self) -> &str {
        "Persistent memory across sessions: save a finding or preference (action save: title, content, memory_type, optional description/keywords), recall by query, forget by title, or reinforce a memory that helped or misled."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "action": {"type": "string", "enum": ["save", "recall", "forget", "reinforce"], "description": "Default save"},
            "title": {"type": "string", "description": "Memory title (save, forget, reinforce); saving the same title again replaces it"},
            "content": {"type": "string", "description": "The memory text (save)"},
            "memory_type": {"type": "string", "enum": ["user", "feedback", "project", "reference"], "description": "user = preferences, feedback = how to work, project = findings, reference = pointers (default project)"},
            "description": {"type": "string", "description": "One line used for retrieval (default: the title)"},
            "keywords": {"type": "array", "items": {"type": "string"}, "description": "Up to 5 keywords (save)"},
            "query": {"type": "string", "description": "What to look for (recall)"},
            "event": {"type": "string", "enum": ["task_success", "task_failure", "user_confirm", "user_reject"], "description": "What happened (reinforce)"},
            "source": {"type": "string", "enum": ["user", "system"], "description": "Who judged it (reinforce, default system)"}
        }, "required": []})
    }
    fn readonly(&self) -> bool {
        false
    }
    fn repeatable(&self) -> bool {
        true
    }
    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let action = opt_str(&args, "action").unwrap_or("save").to_string();
            let store = self.store.clone();
            match action.as_str() {
                "save" => {
                    let title = need_str(&args, "title", "save")?.to_string();
                    let content = args
                        .get("content")
                        .and_then(Value::as_str)
                        .filter(|c| !c.trim().is_empty())
                        .ok_or_else(|| {
                            ToolError::InvalidArguments(
                                "'content' is required for action 'save'".into(),
                            )
                        })?
                        .to_string();
                    let memory_type = match opt_str(&args, "memory_type") {
                        None => MemoryType::Project,
                        Some(t) => MemoryType::parse(t).ok_or_else(|| {
                            ToolError::InvalidArguments(format!(
                                "memory_type '{t}' is not one of user, feedback, project, reference"
                            ))
                        })?,
                    };
                    let keywords: Vec<String> = args
                        .get("keywords")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default();
                    let mut new = NewEntry::new(title.clone(), content, memory_type);
                    new.description = opt_str(&args, "description").unwrap_or("").to_string();
                    new.keywords = keywords;
                    let outcome = blocking(move || store.add(new, Utc::now())).await?;
                    Ok(match outcome {
                        AddOutcome::Saved { path, .. } => json!({
                            "status": "ok", "message": format!("Saved: {title}"), "path": path.display().to_string(),
                        }),
                        AddOutcome::Duplicate => json!({
                            "status": "skipped",
                            "message": format!("Skipped: an identical memory '{title}' was saved less than 30 s ago"),
                        }),
                    }
                    .to_string())
                }
                "recall" => {
                    let query = need_str(&args, "query", "recall")?.to_string();
                    recall_json(store, query, RECALL_DEFAULT).await
                }
                "forget" => {
                    let title = need_str(&args, "title", "forget")?.to_string();
                    let t = title.clone();
                    let removed = blocking(move || store.remove(&t)).await?;
                    Ok(if removed {
                        json!({"status": "ok", "message": format!("Removed: {title}")})
                    } else {
                        json!({"status": "not_found", "message": format!("Not found: {title}")})
                    }
                    .to_string())
                }
                "reinforce" => {
                    let title = need_str(&args, "title", "reinforce")?.to_string();
                    let event_name = need_str(&args, "event", "reinforce")?;
                    let event = ReinforceEvent::parse(event_name)
                        .filter(|e| *e != ReinforceEvent::PassiveDecay)
                        .ok_or_else(|| {
                            ToolError::InvalidArguments(format!(
                                "event '{event_name}' is not one of task_success, task_failure, user_confirm, user_reject"
                            ))
                        })?;
                    // Default and unknown sources count as the system (spec §8.9).
                    let source = match opt_str(&args, "source") {
                        Some("user") => "user",
                        _ => "system",
                    };
                    let t = title.clone();
                    let outcome =
                        blocking(move || store.reinforce(&t, event, source, Utc::now())).await?;
                    Ok(match outcome {
                        Reinforce::Applied { old, new } => json!({
                            "status": "ok",
                            "message": format!("Reinforced: {title} (quality {old:.2} → {new:.2})"),
                        }),
                        Reinforce::Disabled => json!({"status": "skipped", "message": "Memory quality scoring is off (VIBEDESK_MEMORY_QUALITY)"}),
                        Reinforce::NotFound => json!({"status": "skipped", "message": format!("Not found: {title}")}),
                        Reinforce::CapReached => json!({"status": "skipped", "message": format!("Skipped: '{title}' was already reinforced by ±0.5 in this session")}),
                    }
                    .to_string())
                }
                other => Err(ToolError::InvalidArguments(format!(
                    "action '{other}' is not one of save, recall, forget, reinforce"
                ))),
            }
        })
    }
}

/// `recall`: search persistent memories.
pub struct Recall {
    store: Arc<MemoryStore>,
}

impl Tool for Recall {
    fn name(&self) -> &str {
        "recall"
    }
    fn description(&self) -> &str {
        "Search persistent memories (findings, preferences, references saved in earlier sessions) by keywords; tickers like BRK.B and CJK text work. Verify any number in a memory with a data tool before reporting it."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "query": {"type": "string", "description": "Keywords to look for"},
            "max_results": {"type": "integer", "description": "Most memories to return (default 5, at most 20)"}
        }, "required": ["query"]})
    }
    fn repeatable(&self) -> bool {
        true
    }
    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let query = need_str(&args, "query", "recall")?.to_string();
            let max = max_arg(&args, RECALL_DEFAULT, RECALL_MAX)?;
            recall_json(self.store.clone(), query, max).await
        })
    }
}

/// `session_search`: full-text search over earlier sessions' messages.
pub struct SessionSearch {
    store: Arc<MemoryStore>,
    sessions_dir: PathBuf,
}

impl Tool for SessionSearch {
    fn name(&self) -> &str {
        "session_search"
    }
    fn description(&self) -> &str {
        "Search past conversation sessions by keyword. Returns matching sessions with context snippets. Use when the user refers to earlier work, strategies or conversations."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "query": {"type": "string", "description": "Keywords or a phrase"},
            "max_results": {"type": "integer", "description": "Most sessions to return (default 3, at most 10)"}
        }, "required": ["query"]})
    }
    fn repeatable(&self) -> bool {
        true
    }
    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let query = need_str(&args, "query", "search")?.to_string();
            let max = max_arg(&args, SESSIONS_DEFAULT, SESSIONS_MAX)?;
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
                })
                .to_string());
            }
            Ok(json!({"status": "ok", "query": query, "results": results}).to_string())
        })
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
fn offset_arg(args: &Value) -> Result<Option<usize>, ToolError> {
    let bad = || ToolError::failed("invalid_offset", "Error: offset must be an integer");
    match args.get("offset") {
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

impl Tool for LoadSkill {
    fn name(&self) -> &str {
        "load_skill"
    }
    fn description(&self) -> &str {
        "Load documentation for a named skill before starting unfamiliar work. A skill that fits comes back complete; a long one comes back as an outline plus its opening text: call again with section=\"<title from the outline>\" for one section, or offset=next_offset to read on."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "name": {"type": "string", "description": "Skill name, e.g. 'backtest-design'"},
            "section": {"type": "string", "description": "A section label from a previous outline, copied verbatim (a repeated title as its \"Parent > Child\" path)"},
            "offset": {"type": ["integer", "string"], "description": "Character offset to read from (default 0); pass next_offset to continue. With section, relative to the section."}
        }, "required": ["name"]})
    }
    fn repeatable(&self) -> bool {
        true
    }
    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let name = args
                .get("name")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| ToolError::InvalidArguments("'name' must be a skill name".into()))?;
            let offset = offset_arg(&args)?;
            let section = args.get("section").and_then(Value::as_str);
            load_skill_page(&self.skills, name, section, offset).map_err(|message| {
                let code = if message.contains("Unknown skill") {
                    "unknown_skill"
                } else if message.contains("offset") {
                    "invalid_offset"
                } else {
                    "unknown_section"
                };
                ToolError::failed(code, message)
            })
        })
    }
}
