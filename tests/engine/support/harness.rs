//! Helpers for running the real loop in a temp `VIBEDESK_HOME`-like tree.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use vibedesk::agent::events::AgentEvent;
use vibedesk::agent::{EventSink, Loop, LoopConfig, LoopDeps, RunOutcome, RunRequest};
use vibedesk::llm::Provider;
use vibedesk::llm::scripted::{Script, ScriptedProvider};
use vibedesk::store::Paths;
use vibedesk::tools::builtin::register_defaults;
use vibedesk::tools::{BackgroundQueue, Registry, Tool, ToolContext, ToolResult};

pub struct Home {
    _dir: TempDir,
    pub paths: Paths,
    pub session_id: String,
}

impl Home {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = Paths::under(dir.path());
        Home {
            _dir: dir,
            paths,
            session_id: "testsession01".into(),
        }
    }

    pub fn session_dir(&self) -> PathBuf {
        self.paths.session_dir(&self.session_id)
    }

    pub fn workspace(&self) -> PathBuf {
        self.session_dir().join("workspace")
    }

    pub fn request(&self, prompt: &str) -> RunRequest {
        RunRequest {
            prompt: prompt.to_string(),
            history: Vec::new(),
            session_id: self.session_id.clone(),
            session_dir: self.session_dir(),
            workspace: self.workspace(),
            background: BackgroundQueue::default(),
            compaction: Default::default(),
            notices: Vec::new(),
            plan: Default::default(),
        }
    }
}

/// Fast, deterministic defaults for tests: no watchdog, tiny retry delay.
pub fn test_config() -> LoopConfig {
    LoopConfig {
        stall_timeout: None,
        stream_retry_delay: Duration::from_millis(5),
        max_iterations: 10,
        ..LoopConfig::default()
    }
}

pub fn scripted(turns: Value) -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::new(
        Script::from_json(&turns.to_string()).expect("valid script"),
    ))
}

pub fn registry_with(extra: Vec<Arc<dyn Tool>>) -> Arc<Registry> {
    let mut r = Registry::new();
    register_defaults(&mut r).expect("defaults");
    vibedesk::agent::register_agent_tools(&mut r).expect("agent tools");
    for t in extra {
        r.register(t).expect("unique test tool");
    }
    Arc::new(r)
}

pub struct Ran {
    pub outcome: RunOutcome,
    pub events: Vec<AgentEvent>,
}

impl Ran {
    pub fn kinds(&self) -> Vec<String> {
        self.events.iter().map(|e| e.kind()).collect()
    }

    pub fn count(&self, kind: &str) -> usize {
        self.kinds().iter().filter(|k| *k == kind).count()
    }
}

pub async fn run_with(
    home: &Home,
    provider: Arc<dyn Provider>,
    registry: Arc<Registry>,
    config: LoopConfig,
    prompt: &str,
    cancel: CancellationToken,
) -> Ran {
    let deps = LoopDeps::new(provider, registry, config, home.paths.runs_dir());
    let mut lp = Loop::new(deps);
    run_loop(&mut lp, home, prompt, cancel).await
}

pub async fn run_loop(lp: &mut Loop, home: &Home, prompt: &str, cancel: CancellationToken) -> Ran {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let outcome = lp
        .run(home.request(prompt), EventSink::new(tx), cancel)
        .await;
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    Ran { outcome, events }
}

/// A configurable test tool.
pub struct TestTool {
    pub name: &'static str,
    pub readonly: bool,
    pub repeatable: bool,
    pub timeout: Option<Duration>,
    pub calls: Arc<AtomicUsize>,
    pub behaviour: Behaviour,
}

pub enum Behaviour {
    /// Echo the arguments back as `{"status":"ok","args":…}`.
    Echo,
    /// Wait at a shared barrier, then succeed.
    Barrier(Arc<tokio::sync::Barrier>),
    /// Sleep, then succeed.
    Sleep(Duration),
    /// Spawn `sleep 300` and wait for it; the pid goes into the slot.
    Child(Arc<Mutex<Option<u32>>>),
    /// Cancel the given token, then succeed.
    Cancel(CancellationToken),
    /// Fail with a structured error.
    Fail,
}

impl TestTool {
    pub fn new(name: &'static str, readonly: bool, behaviour: Behaviour) -> Self {
        TestTool {
            name,
            readonly,
            repeatable: false,
            timeout: None,
            calls: Arc::default(),
            behaviour,
        }
    }

    pub fn repeatable(mut self) -> Self {
        self.repeatable = true;
        self
    }

    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }

    pub fn counter(&self) -> Arc<AtomicUsize> {
        self.calls.clone()
    }
}

impl Tool for TestTool {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "test tool"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": []})
    }
    fn readonly(&self) -> bool {
        self.readonly
    }
    fn repeatable(&self) -> bool {
        self.repeatable
    }
    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            match &self.behaviour {
                Behaviour::Echo => {}
                Behaviour::Barrier(b) => {
                    b.wait().await;
                }
                Behaviour::Sleep(d) => tokio::time::sleep(*d).await,
                Behaviour::Child(slot) => {
                    let mut child = tokio::process::Command::new("sleep")
                        .arg("300")
                        .kill_on_drop(true)
                        .spawn()
                        .expect("spawn sleep");
                    *slot.lock().unwrap() = child.id();
                    tokio::select! {
                        _ = child.wait() => {}
                        _ = ctx.cancel.cancelled() => { let _ = child.kill().await; }
                    }
                }
                Behaviour::Cancel(t) => t.cancel(),
                Behaviour::Fail => {
                    return Ok(
                        json!({"status": "error", "error": "deliberate failure"}).to_string()
                    );
                }
            }
            Ok(json!({"status": "ok", "tool": self.name, "args": args}).to_string())
        })
    }
}

/// A turn that calls the given tools: `[(id, name, args)]`.
pub fn call_turn(calls: &[(&str, &str, Value)]) -> Value {
    json!({
        "tool_calls": calls.iter().map(|(id, name, args)| json!({"id": id, "name": name, "arguments": args})).collect::<Vec<_>>()
    })
}

pub fn text_turn(text: &str) -> Value {
    json!({"text": text})
}

pub fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display())),
    )
    .expect("json")
}

/// Every file under `dir` (recursively), with its size, sorted.
pub fn files_under(dir: &std::path::Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push((p, e.metadata().unwrap().len()));
        }
    }
    out.sort();
    out
}

/// The real binary with a clean environment and a temp home: nothing of
/// the user's home, config or keys leaks in, and with no model configured
/// the offline planner answers.
pub fn vibedesk(home: &std::path::Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_vibedesk"));
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("VIBEDESK_HOME", home)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    c
}
