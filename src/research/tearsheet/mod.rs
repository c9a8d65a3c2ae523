//! The tear sheet (docs §20.1): everything a quant reads to judge a daily
//! return series at a glance — quantstats' full metric set, the monthly and
//! annual tables, the worst drawdown periods, the underwater curve, rolling
//! statistics, the return distribution and, where positions exist, exposure
//! and turnover. Pure: plain columns in, one [`TearSheet`] out; the report
//! writers (`report`) and the workstation's view (`tui::tearsheet`) only
//! render it.

mod types;

pub use types::*;
