//! Built-in tools, one file per family.

mod args;
pub mod backtest;
mod backtest_args;
pub mod factor;
pub mod fs;
pub mod market;
pub mod memory;
pub mod quant;
pub mod shell;
pub mod stats;
pub mod sweep;

use std::sync::Arc;

use super::Registry;
use super::registry::DuplicateTool;
use crate::sandbox::RunnerConfig;

/// Registers the tools every run has.
pub fn register_defaults(registry: &mut Registry) -> Result<(), DuplicateTool> {
    register_defaults_with(registry, RunnerConfig::from_env())
}

/// [`register_defaults`] with `bash` run under `runner`.
pub fn register_defaults_with(
    registry: &mut Registry,
    runner: RunnerConfig,
) -> Result<(), DuplicateTool> {
    registry.register(Arc::new(fs::ReadFile))?;
    registry.register(Arc::new(fs::ListDir))?;
    registry.register(Arc::new(fs::WriteFile))?;
    registry.register(Arc::new(fs::EditFile))?;
    registry.register(Arc::new(shell::Bash::new(runner)))?;
    Ok(())
}

/// A registry with the default tools.
pub fn default_registry() -> Registry {
    let mut r = Registry::new();
    // The default names are distinct literals, so this cannot collide.
    let _ = register_defaults(&mut r);
    r
}
