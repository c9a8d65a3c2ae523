//! A team over a list (docs §14.8): `vibedesk swarm batch NAME --targets
//! FILE` runs one team per target, each team run a *cell* of a hashed
//! [`BatchPlan`], through the same shard runner as a sweep: shard `i` of `N`
//! runs the cells with `index % N == i` one after another and writes
//! `shard-<i>-of-<N>.jsonl` atomically; [`collect`] refuses to report until
//! every shard is present exactly once. The local engine runs the `N`
//! shards in this process; the Ray engine runs each as a Ray task
//! (`vibedesk swarm batch-shard`, docs §19).
//!
//! Concurrent model calls are capped by [`CappedProvider`]: one semaphore
//! for all the teams of a process. A team run is not deterministic the way a
//! backtest is (a model answers differently, run ids and timings differ), so
//! a rerun shard's bytes may differ; the offline planner's reports do not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use tokio::sync::Semaphore;

use super::preset::{LoadedPreset, Origin, Preset, PresetError};
use crate::llm::{ChatRequest, ChunkStream, LlmError, Provider};

/// The plan's format version, in its bytes (and so in its hash).
const PLAN_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error("cannot read the targets file {path}: {source}")]
    Targets {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the targets file {0} lists no target (one per line; `#` starts a comment)")]
    NoTargets(PathBuf),
    #[error(
        "preset '{preset}' has no variable '{var}' to set from each target; pass --target-var with one of: {known}"
    )]
    TargetVar {
        preset: String,
        var: String,
        known: String,
    },
    #[error("cannot read the batch plan {path}: {detail}")]
    Plan { path: PathBuf, detail: String },
    #[error("shard {shard}/{count} is out of range: give i/N with i < N")]
    Shard { shard: usize, count: usize },
    #[error("cannot write {0}")]
    Io(#[from] crate::fsio::IoError),
    #[error(
        "the batch is incomplete: {problem}; run it again to resume (finished shards are kept)"
    )]
    Incomplete { problem: String },
}

/// Everything a shard needs, hashed: the preset's YAML (not its name, so a
/// node without the user's files runs the same team), the variables, the
/// targets in order and the caps.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BatchPlan {
    pub version: u32,
    pub preset_name: String,
    /// The preset's YAML as written.
    pub preset_yaml: String,
    pub target_var: String,
    pub vars: BTreeMap<String, String>,
    pub targets: Vec<String>,
    /// Model calls at once, all teams of a process together.
    pub max_calls: usize,
    /// Tasks at once inside one team.
    pub max_workers: usize,
}

impl BatchPlan {
    pub fn new(
        loaded: &LoadedPreset,
        target_var: &str,
        vars: BTreeMap<String, String>,
        targets: Vec<String>,
        max_calls: usize,
        max_workers: usize,
    ) -> Result<BatchPlan, BatchError> {
        let preset = &loaded.preset;
        if !preset
            .variables
            .iter()
            .any(|v| v.name.as_str() == target_var)
        {
            return Err(BatchError::TargetVar {
                preset: preset.name.clone(),
                var: target_var.to_string(),
                known: preset
                    .variables
                    .iter()
                    .map(|v| v.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        Ok(BatchPlan {
            version: PLAN_VERSION,
            preset_name: preset.name.clone(),
            preset_yaml: preset_yaml(loaded)?,
            target_var: target_var.to_string(),
            vars,
            targets,
            max_calls: max_calls.max(1),
            max_workers: max_workers.max(1),
        })
    }

    /// The preset, parsed from the plan's YAML.
    pub fn preset(&self) -> Result<Preset, PresetError> {
        super::preset::parse(
            &self.preset_yaml,
            &format!("the batch plan's preset {}", self.preset_name),
        )
    }

    /// Deterministic JSON: fields in declaration order, maps sorted.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Hex sha256 of [`BatchPlan::to_bytes`].
    pub fn hash(&self) -> String {
        sha2::Sha256::digest(self.to_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    pub fn load(path: &Path) -> Result<BatchPlan, BatchError> {
        let err = |detail: String| BatchError::Plan {
            path: path.to_path_buf(),
            detail,
        };
        let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
        serde_json::from_slice(&bytes).map_err(|e| err(e.to_string()))
    }

    /// Shards a batch is cut into: one per team run at once, so the same
    /// count serves both engines and a resume across them.
    pub fn shard_count(&self) -> usize {
        self.targets.len().min(self.max_calls).max(1)
    }

    /// The variables of cell `index`: the batch's, and the target's.
    pub fn vars_of(&self, index: usize) -> BTreeMap<String, String> {
        let mut vars = self.vars.clone();
        if let Some(t) = self.targets.get(index) {
            vars.insert(self.target_var.clone(), t.clone());
        }
        vars
    }
}

/// The YAML a loaded preset came from.
fn preset_yaml(loaded: &LoadedPreset) -> Result<String, BatchError> {
    let name = loaded.preset.name.as_str();
    match &loaded.origin {
        Origin::Bundled => super::bundled::BUNDLED
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, text)| text.to_string())
            .ok_or_else(|| BatchError::Plan {
                path: PathBuf::from(name),
                detail: "no bundled preset of that name".to_string(),
            }),
        Origin::User(path) | Origin::File(path) => {
            std::fs::read_to_string(path).map_err(|source| BatchError::Targets {
                path: path.clone(),
                source,
            })
        }
    }
}

/// The targets of a file: one per line, blank lines and `#` comments
/// skipped, surrounding spaces trimmed.
pub fn read_targets(path: &Path) -> Result<Vec<String>, BatchError> {
    let text = std::fs::read_to_string(path).map_err(|source| BatchError::Targets {
        path: path.to_path_buf(),
        source,
    })?;
    let targets: Vec<String> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    if targets.is_empty() {
        return Err(BatchError::NoTargets(path.to_path_buf()));
    }
    Ok(targets)
}

/// One team run's result: a row of the batch's output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    pub index: usize,
    pub target: String,
    /// `success`, `partial`, `failed`, `cancelled`, `interrupted`, or
    /// `refused` (the team could not start).
    pub status: String,
    pub reason: Option<String>,
    pub run_id: Option<String>,
    pub seconds: f64,
    /// The team's `report.md`.
    pub report: String,
}

/// A shard file's first line.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct ShardHeader {
    plan: String,
    shard: usize,
    of: usize,
    cells: usize,
}

pub fn shard_file(dir: &Path, shard: usize, count: usize) -> PathBuf {
    dir.join(format!("shard-{shard}-of-{count}.jsonl"))
}

/// The cells of shard `shard` of `count`.
pub fn cells_of(plan: &BatchPlan, shard: usize, count: usize) -> Vec<usize> {
    (0..plan.targets.len())
        .filter(|i| i % count == shard)
        .collect()
}

/// Whether shard `shard` of `count` is on disk, complete, for this plan.
pub fn shard_done(plan: &BatchPlan, dir: &Path, shard: usize, count: usize) -> bool {
    read_shard(plan, &plan.hash(), dir, shard, count).is_ok()
}

/// Runs one team for a cell: given the cell's index, target and variables.
pub type CellRunner = Arc<
    dyn Fn(usize, String, BTreeMap<String, String>) -> BoxFuture<'static, CellResult> + Send + Sync,
>;

/// Runs shard `shard` of `count` (skipped when its file is already complete
/// for this plan) and writes its file atomically; returns the file.
pub async fn run_shard(
    plan: &BatchPlan,
    shard: usize,
    count: usize,
    dir: &Path,
    run_cell: CellRunner,
) -> Result<PathBuf, BatchError> {
    if shard >= count {
        return Err(BatchError::Shard { shard, count });
    }
    let path = shard_file(dir, shard, count);
    if shard_done(plan, dir, shard, count) {
        return Ok(path);
    }
    let cells = cells_of(plan, shard, count);
    let mut lines = vec![
        serde_json::to_string(&ShardHeader {
            plan: plan.hash(),
            shard,
            of: count,
            cells: cells.len(),
        })
        .unwrap_or_default(),
    ];
    for index in cells {
        let target = plan.targets.get(index).cloned().unwrap_or_default();
        let result = run_cell(index, target, plan.vars_of(index)).await;
        lines.push(serde_json::to_string(&result).unwrap_or_default());
    }
    let mut bytes = lines.join("\n").into_bytes();
    bytes.push(b'\n');
    std::fs::create_dir_all(dir)
        .map_err(|e| crate::fsio::IoError::new("create the shard directory", dir, e))?;
    crate::fsio::write_atomic(&path, &bytes, crate::fsio::Durability::Synced)?;
    Ok(path)
}

/// Why a shard file does not count toward the batch.
#[derive(Debug, thiserror::Error)]
enum ShardFileError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} has no header line", .0.display())]
    NoHeader(PathBuf),
    #[error("{} belongs to another plan", .0.display())]
    OtherPlan(PathBuf),
    #[error("{}: {source}", path.display())]
    Row {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{} holds cells {held:?}, not {want:?}", path.display())]
    Cells {
        path: PathBuf,
        held: Vec<usize>,
        want: Vec<usize>,
    },
}

fn read_shard(
    plan: &BatchPlan,
    hash: &str,
    dir: &Path,
    shard: usize,
    count: usize,
) -> Result<Vec<CellResult>, ShardFileError> {
    let path = shard_file(dir, shard, count);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(source) => return Err(ShardFileError::Read { path, source }),
    };
    let mut lines = text.lines();
    let Some(header) = lines
        .next()
        .and_then(|l| serde_json::from_str::<ShardHeader>(l).ok())
    else {
        return Err(ShardFileError::NoHeader(path));
    };
    let cells = cells_of(plan, shard, count);
    if header.plan != hash || header.shard != shard || header.of != count {
        return Err(ShardFileError::OtherPlan(path));
    }
    let rows: Vec<CellResult> = match lines.map(serde_json::from_str).collect() {
        Ok(rows) => rows,
        Err(source) => return Err(ShardFileError::Row { path, source }),
    };
    let indices: Vec<usize> = rows.iter().map(|r| r.index).collect();
    if indices != cells || header.cells != cells.len() {
        return Err(ShardFileError::Cells {
            path,
            held: indices,
            want: cells,
        });
    }
    Ok(rows)
}

/// Every cell's result in cell order, from shards `0..count` in `dir`;
/// refuses unless every shard is present, for this plan, with each of its
/// cells exactly once.
pub fn collect(plan: &BatchPlan, dir: &Path, count: usize) -> Result<Vec<CellResult>, BatchError> {
    let hash = plan.hash();
    let mut problems = Vec::new();
    let mut by_index = BTreeMap::new();
    for shard in 0..count {
        match read_shard(plan, &hash, dir, shard, count) {
            Ok(rows) => {
                for r in rows {
                    if by_index.insert(r.index, r).is_some() {
                        problems.push(format!("a cell appears twice in shard {shard}"));
                    }
                }
            }
            Err(e) => problems.push(format!("shard {shard}/{count}: {e}")),
        }
    }
    if !problems.is_empty() || by_index.len() != plan.targets.len() {
        if problems.is_empty() {
            problems.push(format!(
                "{} of {} cells present",
                by_index.len(),
                plan.targets.len()
            ));
        }
        return Err(BatchError::Incomplete {
            problem: problems.join("; "),
        });
    }
    Ok(by_index.into_values().collect())
}

/// A provider whose concurrent calls share a fixed number of permits: a
/// call holds one from its request until its stream ends or is dropped.
pub struct CappedProvider {
    inner: Arc<dyn Provider>,
    permits: Arc<Semaphore>,
}

impl CappedProvider {
    pub fn new(inner: Arc<dyn Provider>, permits: Arc<Semaphore>) -> Self {
        CappedProvider { inner, permits }
    }
}

impl Provider for CappedProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChunkStream, LlmError>> {
        Box::pin(async move {
            let permit = self
                .permits
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| LlmError::Config("the model-call cap was closed".to_string()))?;
            let stream = self.inner.stream(request).await?;
            let held = stream.map(move |chunk| {
                let _ = &permit;
                chunk
            });
            Ok(Box::pin(held) as ChunkStream)
        })
    }

    fn calls_offered_tools(&self) -> bool {
        self.inner.calls_offered_tools()
    }

    fn context_window(&self) -> BoxFuture<'_, Option<u64>> {
        self.inner.context_window()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(targets: &[&str], max_calls: usize) -> BatchPlan {
        let loaded =
            crate::swarm::preset::load(Path::new("/nonexistent"), "equity_research").unwrap();
        BatchPlan::new(
            &loaded,
            "target",
            BTreeMap::new(),
            targets.iter().map(|s| s.to_string()).collect(),
            max_calls,
            2,
        )
        .unwrap()
    }

    fn echo_runner(calls: Arc<std::sync::atomic::AtomicUsize>) -> CellRunner {
        Arc::new(move |index, target, vars| {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async move {
                CellResult {
                    index,
                    status: "success".into(),
                    reason: None,
                    run_id: None,
                    seconds: 0.0,
                    report: format!("{target} {}", vars["target"]),
                    target,
                }
            })
        })
    }

    #[tokio::test]
    async fn shards_cover_every_target_once_and_rerun_nothing() {
        let p = plan(&["AAPL", "MSFT", "IBM", "KO", "PEP"], 2);
        assert_eq!(p.shard_count(), 2);
        let dir = tempfile::tempdir().unwrap();
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        // Nothing to collect yet: a refusal naming the shards.
        let e = collect(&p, dir.path(), 2).unwrap_err().to_string();
        assert!(e.contains("shard 0/2") && e.contains("shard 1/2"), "{e}");
        run_shard(&p, 1, 2, dir.path(), echo_runner(calls.clone()))
            .await
            .unwrap();
        let e = collect(&p, dir.path(), 2).unwrap_err().to_string();
        assert!(e.contains("shard 0/2") && !e.contains("shard 1/2"), "{e}");
        run_shard(&p, 0, 2, dir.path(), echo_runner(calls.clone()))
            .await
            .unwrap();
        let rows = collect(&p, dir.path(), 2).unwrap();
        let targets: Vec<&str> = rows.iter().map(|r| r.target.as_str()).collect();
        assert_eq!(targets, ["AAPL", "MSFT", "IBM", "KO", "PEP"]);
        assert_eq!(rows[3].report, "KO KO");
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 5);
        // A finished shard is not run again.
        run_shard(&p, 0, 2, dir.path(), echo_runner(calls.clone()))
            .await
            .unwrap();
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 5);
        // Another plan's shard file is not taken for this one.
        let other = plan(&["AAPL", "MSFT", "IBM", "KO", "XOM"], 2);
        assert!(!shard_done(&other, dir.path(), 0, 2));
        assert!(collect(&other, dir.path(), 2).is_err());
    }

    #[test]
    fn a_preset_without_the_target_variable_is_refused_with_its_variables() {
        let loaded =
            crate::swarm::preset::load(Path::new("/nonexistent"), "equity_research").unwrap();
        let e = BatchPlan::new(&loaded, "ticker", BTreeMap::new(), vec![], 1, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("'ticker'") && e.contains("target"), "{e}");
    }

    #[test]
    fn the_plan_round_trips_and_its_hash_follows_its_content() {
        let p = plan(&["AAPL", "MSFT"], 4);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.json");
        std::fs::write(&path, p.to_bytes()).unwrap();
        let back = BatchPlan::load(&path).unwrap();
        assert_eq!(back.to_bytes(), p.to_bytes());
        assert_eq!(back.hash(), p.hash());
        assert_eq!(back.preset().unwrap().name, "equity_research");
        assert_ne!(plan(&["AAPL", "IBM"], 4).hash(), p.hash());
    }

    /// A provider that answers after a pause and counts calls in flight.
    struct Slow {
        now: Arc<std::sync::atomic::AtomicUsize>,
        most: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Provider for Slow {
        fn name(&self) -> &str {
            "slow"
        }
        fn model(&self) -> &str {
            "slow"
        }
        fn stream(&self, _: ChatRequest) -> BoxFuture<'_, Result<ChunkStream, LlmError>> {
            use std::sync::atomic::Ordering::SeqCst;
            let n = self.now.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(n, SeqCst);
            let now = self.now.clone();
            Box::pin(async move {
                let s = futures_util::stream::once(async move {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    now.fetch_sub(1, SeqCst);
                    Err(LlmError::Stream("done".into()))
                });
                Ok(Box::pin(s) as ChunkStream)
            })
        }
    }

    #[tokio::test]
    async fn the_cap_holds_across_every_caller() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        let most = Arc::new(AtomicUsize::new(0));
        let slow = Arc::new(Slow {
            now: Arc::new(AtomicUsize::new(0)),
            most: most.clone(),
        });
        let capped = Arc::new(CappedProvider::new(slow, Arc::new(Semaphore::new(3))));
        let calls = (0..12).map(|_| {
            let c = capped.clone();
            tokio::spawn(async move {
                let mut s = c.stream(ChatRequest::default()).await.unwrap();
                while s.next().await.is_some() {}
            })
        });
        for h in futures_util::future::join_all(calls).await {
            h.unwrap();
        }
        assert_eq!(most.load(SeqCst), 3);
    }
}
