//! Built-in tools, one file per family, and the manifest: the one list of
//! them (docs §2.1, `docs/extending.md`).
//!
//! A tool's type declares its name and capabilities
//! ([`TypedTool::NAME`], [`TypedTool::CAPS`]) and how it is built
//! ([`Builtin::build`]); [`MANIFEST`] lists the types. Registration, the
//! MCP server's offer, the loop's file-write rule, the offline planner's
//! tools and the docs' table all read the manifest, so a new tool is its
//! module plus one line there (and its docs section).

/// [`Builtin`] for tools made of the shared market data alone (a `data`
/// field): one line per family instead of one impl per tool.
macro_rules! built_from_data {
    ($($tool:ident),+ $(,)?) => {$(
        impl $crate::tools::builtin::Builtin for $tool {
            fn build(env: &$crate::tools::builtin::ToolEnv) -> Option<Self> {
                Some($tool {
                    data: env.data.clone(),
                })
            }
        }
    )+};
}

mod args;
pub mod backtest;
mod backtest_args;
pub mod compact;
pub mod factor;
pub mod factor_screen;
pub mod fs;
pub mod market;
mod market_rank;
pub mod memory;
#[cfg(debug_assertions)]
pub mod panic_probe;
#[cfg(test)]
pub(crate) mod probe;
pub mod quant;
pub mod shell;
pub mod stats;
pub mod sweep;
pub mod tearsheet;
#[cfg(test)]
pub(crate) mod testkit;

use std::path::PathBuf;
use std::sync::Arc;

use super::registry::DuplicateTool;
use super::{Caps, Registry, Tool, TypedTool};
use crate::memory::{MemoryStore, SkillSet};
use crate::research::data::{DataConfig, MarketData};
use crate::sandbox::RunnerConfig;

/// Every built-in tool, in the order the model is offered them.
///
/// A new tool: its module above, and one line here.
pub const MANIFEST: &[Entry] = &[
    entry::<fs::ReadFile>(Family::Files),
    entry::<fs::ListDir>(Family::Files),
    entry::<fs::WriteFile>(Family::Files),
    entry::<fs::EditFile>(Family::Files),
    entry::<shell::Bash>(Family::Files),
    entry::<compact::CompactTool>(Family::Agent),
    entry::<market::GetMarketData>(Family::Market),
    entry::<market::TechnicalIndicator>(Family::Market),
    entry::<quant::OptionPrice>(Family::Quant),
    entry::<quant::ImpliedVolatility>(Family::Quant),
    entry::<quant::OptionStrategy>(Family::Quant),
    entry::<quant::PortfolioOptimize>(Family::Quant),
    entry::<quant::RiskReport>(Family::Quant),
    entry::<tearsheet::Tearsheet>(Family::Quant),
    entry::<stats::StatTest>(Family::Stats),
    entry::<stats::VolatilityModel>(Family::Stats),
    entry::<factor::FactorIc>(Family::Factor),
    entry::<factor::Regression>(Family::Factor),
    entry::<factor::Overfitting>(Family::Factor),
    entry::<factor_screen::FactorScreen>(Family::Factor),
    entry::<backtest::Backtest>(Family::Backtest),
    entry::<backtest::ReadArtifact>(Family::Backtest),
    entry::<sweep::SweepTool>(Family::Sweep),
    entry::<memory::Remember>(Family::Memory),
    entry::<memory::Recall>(Family::Memory),
    entry::<memory::SessionSearch>(Family::Memory),
    entry::<memory::LoadSkill>(Family::Memory),
];

/// A group of tools registered together by the older per-family
/// functions, and the order `mcp serve` lists them in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Workspace files and `bash`.
    Files,
    /// The agent's own (`compact`).
    Agent,
    Market,
    /// Options, portfolios, risk (docs §15).
    Quant,
    /// Time-series tests and volatility models (docs §16).
    Stats,
    /// Factor IC, regressions, overfitting (docs §17).
    Factor,
    Backtest,
    Memory,
    /// Parameter sweeps over backtests (docs §18).
    Sweep,
}

/// The order `vibedesk mcp serve` lists its tools in (docs §13.4.1): by
/// family, then in manifest order; a family not named here comes last.
const SERVE_ORDER: [Family; 7] = [
    Family::Backtest,
    Family::Market,
    Family::Memory,
    Family::Quant,
    Family::Stats,
    Family::Factor,
    Family::Sweep,
];

/// One line of the manifest.
#[derive(Clone, Copy)]
pub struct Entry {
    pub name: &'static str,
    pub caps: Caps,
    pub family: Family,
    /// The Rust type, named when two entries clash.
    type_name: fn() -> &'static str,
    build: fn(&ToolEnv) -> Option<Arc<dyn Tool>>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .field("type", &(self.type_name)())
            .finish()
    }
}

impl Entry {
    /// The tool, built from `env`; `None` when what it needs is missing.
    pub fn build(&self, env: &ToolEnv) -> Option<Arc<dyn Tool>> {
        (self.build)(env)
    }
    pub fn type_name(&self) -> &'static str {
        (self.type_name)()
    }
}

/// The manifest line of tool type `T`.
pub const fn entry<T: Builtin>(family: Family) -> Entry {
    Entry {
        name: T::NAME,
        caps: T::CAPS,
        family,
        type_name: std::any::type_name::<T>,
        build: build_erased::<T>,
    }
}

fn build_erased<T: Builtin>(env: &ToolEnv) -> Option<Arc<dyn Tool>> {
    T::build(env).map(|t| Arc::new(t) as Arc<dyn Tool>)
}

/// A built-in tool: a typed tool the manifest can build.
pub trait Builtin: TypedTool + Sized + 'static {
    /// The tool from what every built-in is made of; `None` when a part
    /// it needs is missing (the memory tools without a store).
    fn build(env: &ToolEnv) -> Option<Self>;
}

/// What the built-in tools are made of (the command's setup builds it).
#[derive(Clone)]
pub struct ToolEnv {
    /// The sandbox runner `bash` runs under.
    pub runner: RunnerConfig,
    /// Market data, shared by the research tools.
    pub data: Arc<MarketData>,
    pub backtest: Arc<backtest::BacktestToolConfig>,
    /// The memory tools' store, skills and `<data>/sessions`; without it
    /// they are not registered.
    pub memory: Option<MemoryEnv>,
    /// The scheduler's per-call deadline when the configuration names one
    /// (`sweep` keeps its own under it, docs §18.7).
    pub tool_timeout: Option<std::time::Duration>,
    /// The data dir (`factor_screen` keeps its records under its
    /// `factor/`, docs §17.9); `None`: the call's run dir.
    pub data_dir: Option<PathBuf>,
}

/// What the memory and skill tools need.
#[derive(Clone)]
pub struct MemoryEnv {
    pub store: Arc<MemoryStore>,
    pub skills: Arc<SkillSet>,
    pub sessions_dir: PathBuf,
}

impl ToolEnv {
    /// Market data from `data`, the environment's runner, the default
    /// backtest settings with `data`'s cache, no memory.
    pub fn new(data: DataConfig) -> Self {
        let backtest = backtest::BacktestToolConfig::new(data.cache_dir.clone());
        ToolEnv {
            runner: RunnerConfig::from_env(),
            data: Arc::new(MarketData::new(data)),
            backtest: Arc::new(backtest),
            memory: None,
            tool_timeout: None,
            data_dir: None,
        }
    }
}

/// Two manifest entries that declare the same name (a start-up error).
#[derive(Debug, thiserror::Error)]
#[error(
    "two built-in tools are named '{name}': {first} and {second}; rename one (its NAME constant)"
)]
pub struct ManifestClash {
    pub name: &'static str,
    pub first: &'static str,
    pub second: &'static str,
}

/// Why the built-in tools cannot be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error(transparent)]
    Clash(#[from] ManifestClash),
    #[error(transparent)]
    Duplicate(#[from] DuplicateTool),
}

/// The first name two entries of `entries` share, naming both tools.
pub fn check_entries(entries: &[Entry]) -> Result<(), ManifestClash> {
    for (i, a) in entries.iter().enumerate() {
        if let Some(b) = entries[..i].iter().find(|b| b.name == a.name) {
            return Err(ManifestClash {
                name: a.name,
                first: b.type_name(),
                second: a.type_name(),
            });
        }
    }
    Ok(())
}

/// Registers every tool of `entries` that `env` can build, in order.
pub fn register_entries(
    registry: &mut Registry,
    entries: &[Entry],
    env: &ToolEnv,
) -> Result<(), RegisterError> {
    check_entries(entries)?;
    for e in entries {
        if let Some(tool) = e.build(env) {
            registry.register(tool)?;
        }
    }
    Ok(())
}

/// Registers the manifest's tools of one family.
pub fn register_family(
    registry: &mut Registry,
    family: Family,
    env: &ToolEnv,
) -> Result<(), DuplicateTool> {
    for e in MANIFEST.iter().filter(|e| e.family == family) {
        if let Some(tool) = e.build(env) {
            registry.register(tool)?;
        }
    }
    Ok(())
}

/// Every built-in tool's name, in manifest order.
pub fn names() -> impl Iterator<Item = &'static str> {
    MANIFEST.iter().map(|e| e.name)
}

/// The built-in tools the offline planner may call (docs §2.11).
pub fn planner_tools() -> Vec<String> {
    MANIFEST
        .iter()
        .filter(|e| e.caps.planner)
        .map(|e| e.name.to_string())
        .collect()
}

/// Where a tool comes in `mcp serve`'s list: its family's place in
/// [`SERVE_ORDER`] (last when not a listed family's built-in).
fn serve_rank(name: &str) -> usize {
    MANIFEST
        .iter()
        .find(|e| e.name == name)
        .and_then(|e| SERVE_ORDER.iter().position(|f| *f == e.family))
        .unwrap_or(SERVE_ORDER.len())
}

/// The manifest's served entries in `mcp serve`'s order (docs §13.4.1),
/// every gate open: what a server started with every `--allow-*` flag
/// lists, for docs and tests to check against.
pub fn served_entries() -> Vec<&'static Entry> {
    let mut out: Vec<&'static Entry> = MANIFEST
        .iter()
        .filter(|e| e.caps.served_name().is_some())
        .collect();
    // Stable: manifest order within a family.
    out.sort_by_key(|e| serve_rank(e.name));
    out
}

/// The tools of `registry` served over MCP (their caps say how), in
/// `mcp serve`'s order: by [`SERVE_ORDER`] family, then registry order.
pub fn served(registry: &Registry) -> Vec<Arc<dyn Tool>> {
    let mut tools: Vec<Arc<dyn Tool>> = registry
        .iter()
        .filter(|t| t.caps().served_name().is_some())
        .cloned()
        .collect();
    // Stable: registry order within a family.
    tools.sort_by_key(|t| serve_rank(t.name()));
    tools
}

/// How `entries` and a markdown table of tools (`docs/extending.md`'s,
/// the first column's code spans) differ: the names only one side has.
pub fn table_mismatches(entries: &[Entry], markdown: &str) -> Vec<String> {
    let listed: Vec<&str> = markdown
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let mut out: Vec<String> = entries
        .iter()
        .filter(|e| !listed.contains(&e.name))
        .map(|e| format!("'{}' is a built-in tool the table does not list", e.name))
        .collect();
    out.extend(
        listed
            .iter()
            .filter(|n| !entries.iter().any(|e| e.name == **n))
            .map(|n| format!("the table lists '{n}', which is not in the manifest")),
    );
    out
}

/// Registers the tools every run has: the file tools and `bash`.
pub fn register_defaults(registry: &mut Registry) -> Result<(), DuplicateTool> {
    register_defaults_with(registry, RunnerConfig::from_env())
}

/// [`register_defaults`] with `bash` run under `runner`.
pub fn register_defaults_with(
    registry: &mut Registry,
    runner: RunnerConfig,
) -> Result<(), DuplicateTool> {
    let mut env = ToolEnv::new(DataConfig::default());
    env.runner = runner;
    register_family(registry, Family::Files, &env)
}

/// A registry with the default tools.
pub fn default_registry() -> Registry {
    let mut r = Registry::new();
    // The manifest's names are distinct (a test checks), so this cannot
    // collide.
    let _ = register_defaults(&mut r);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_holds_the_manifest_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let r = testkit::registry(dir.path(), true);
        assert_eq!(r.names(), names().collect::<Vec<_>>());
        for e in MANIFEST {
            let tool = r.get(e.name).unwrap();
            assert_eq!(tool.caps(), e.caps, "{}", e.name);
            assert_eq!(tool.readonly(), e.caps.readonly, "{}", e.name);
        }
    }

    /// Every built-in tool has an approval class that agrees with its other
    /// capabilities (docs §2.14.1): only an outside server's tool may be
    /// `Outside`, and a tool that writes never counts as a read unless its
    /// writes stay in the run dir.
    #[test]
    fn every_manifest_tool_has_a_sensible_access_class() {
        use crate::tools::Access;
        for e in MANIFEST {
            let c = e.caps;
            assert_ne!(c.access, Access::Outside, "{} lacks a class", e.name);
            assert_eq!(c.readonly, c.access == Access::Read, "{}", e.name);
            assert_eq!(c.run_dir_only, c.access == Access::RunDir, "{}", e.name);
            assert_eq!(
                c.writes_files,
                c.access == Access::WorkspaceWrite,
                "{}",
                e.name
            );
            assert_eq!(c.access.is_read(), !c.writes_beyond_the_run(), "{}", e.name);
        }
        let class = |n: &str| MANIFEST.iter().find(|e| e.name == n).unwrap().caps.access;
        assert_eq!(class("write_file"), Access::WorkspaceWrite);
        assert_eq!(class("edit_file"), Access::WorkspaceWrite);
        assert_eq!(class("bash"), Access::Shell);
        assert_eq!(class("remember"), Access::MemoryWrite);
        assert_eq!(class("backtest"), Access::RunDir);
        assert_eq!(class("sweep"), Access::RunDir);
        assert_eq!(class("read_file"), Access::Read);
    }

    /// Two entries with one name stop the registration, naming both
    /// tools' types.
    #[test]
    fn a_clash_is_an_error_naming_both_tools() {
        assert!(check_entries(MANIFEST).is_ok());
        let clash = [
            entry::<fs::ReadFile>(Family::Files),
            entry::<backtest::Backtest>(Family::Backtest),
            entry::<fs::ReadFile>(Family::Files),
        ];
        let mut r = Registry::new();
        let env = ToolEnv::new(DataConfig::offline());
        let e = register_entries(&mut r, &clash, &env)
            .unwrap_err()
            .to_string();
        assert!(e.contains("'read_file'"), "{e}");
        assert_eq!(e.matches("fs::ReadFile").count(), 2, "{e}");
        assert!(r.is_empty(), "nothing registered before the check");
    }

    /// `mcp serve` lists by family (docs §13.4.1), then manifest order.
    #[test]
    fn served_tools_follow_the_serving_order() {
        let dir = tempfile::tempdir().unwrap();
        let r = testkit::registry(dir.path(), true);
        let served: Vec<&str> = served(&r)
            .iter()
            .filter_map(|t| t.caps().served_name())
            .collect();
        assert_eq!(
            served[..4],
            ["backtest", "market_data", "indicators", "remember"]
        );
        assert_eq!(
            served[served.len() - 3..],
            ["overfitting", "factor_screen", "sweep"]
        );
        assert_eq!(
            served.len(),
            MANIFEST
                .iter()
                .filter(|e| e.caps.served_name().is_some())
                .count()
        );
    }
}
