//! Which engine runs a plan (docs §18.3, §18.5): the local one on every
//! core, or Ray when `--engine ray --address URL` asks for it.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::SweepError;
use super::events::SweepEvent;
use super::local::{self, Finished, LocalOptions};
use super::plan::Plan;

/// `--engine`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Engine {
    Local,
    /// A Ray cluster's dashboard address (`http://HEAD:8265`).
    Ray {
        address: Option<String>,
    },
}

impl Engine {
    /// Reads `--engine NAME` and `--address URL`.
    pub fn parse(name: &str, address: Option<String>) -> Result<Engine, SweepError> {
        match name {
            "local" => Ok(Engine::Local),
            "ray" => Ok(Engine::Ray { address }),
            other => Err(SweepError::Engine(format!(
                "--engine '{other}' is not an engine: local (the default, every core here) or ray (--address http://HEAD:8265)"
            ))),
        }
    }
}

/// Runs `plan` into `out` on `engine` (owned: the future is `Send` for any
/// caller).
pub async fn run(
    engine: Engine,
    plan: Arc<Plan>,
    out: PathBuf,
    opts: LocalOptions,
    cancel: CancellationToken,
    events: Arc<dyn Fn(&SweepEvent) + Send + Sync>,
) -> Result<Finished, SweepError> {
    match engine {
        Engine::Local => local::run(plan, &out, &opts, cancel, events).await,
        // Without the command line's flags and [engines.ray]: the defaults
        // (docs §19); `vibedesk sweep run --engine ray` reads both.
        Engine::Ray { address } => {
            let client = super::ray::RayConfig::default().client(address.as_deref())?;
            let binary = std::env::current_exe().map_err(|e| {
                SweepError::Engine(format!("cannot find the running vibedesk binary: {e}"))
            })?;
            let mut ray = super::ray::sweep::RaySweep::new(client, binary);
            ray.data_dir = std::path::absolute(&opts.data_dir).ok();
            ray.offline = opts.data.offline;
            super::ray::sweep::run(plan, &out, &ray, cancel, events, &mut |_| {}).await
        }
    }
}
