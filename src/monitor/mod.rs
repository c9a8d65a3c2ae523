//! Monitors: research that runs on a schedule, reaches a verdict and
//! delivers it exactly once (docs §21).

pub mod cron;
pub mod verdict;
