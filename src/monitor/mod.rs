//! Monitors: research that runs on a schedule, reaches a verdict and
//! delivers it exactly once (docs §21).

pub mod channels;
pub mod clock;
pub mod cron;
pub mod daemon;
pub mod def;
pub mod outbox;
pub mod runner;
pub mod service;
pub mod settings;
pub mod store;
pub mod verdict;
