//! Research teams (docs §14): swarm presets loaded from YAML and validated,
//! and the DAG scheduler that runs each task as a full `agent::Loop` with its
//! own run dir, upstream context, retries and budgets. The engine side only:
//! the terminal knows a team through `AgentEvent`'s `swarm_*` variants.

pub mod batch;
pub mod bundled;
pub mod preset;
pub mod record;
pub mod report;
pub mod scheduler;
pub mod template;
pub mod validate;
pub mod workers;

pub use crate::agent::events::TaskState;
pub use preset::{LoadedPreset, Preset, PresetError};
pub use record::{
    ReconciledRun, RunRecord, RunSummary, list_runs, load_run, reconcile_interrupted,
};
pub use scheduler::{SwarmError, SwarmOptions, SwarmOutcome, run};
pub use validate::{Catalog, Inspection, inspect};
