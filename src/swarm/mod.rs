//! Research teams (docs §14): swarm presets loaded from YAML and validated,
//! and the DAG scheduler that runs each task as a full `agent::Loop` with its
//! own run dir, upstream context, retries and budgets. The engine side only:
//! the terminal knows a team through `AgentEvent`'s `swarm_*` variants.

pub mod bundled;
