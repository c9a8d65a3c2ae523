//! The research room: market data ([`data`]) and technical indicators
//! ([`indicators`]); the backtest engine (spec §7) builds on both.
//!
//! Everything here is plain columns (`Vec<NaiveDate>`, `Vec<f64>`): a daily
//! engine over a few thousand bars per symbol needs no dataframe library.

pub mod data;
pub mod indicators;
