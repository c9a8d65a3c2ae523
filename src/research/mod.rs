//! The research room: market data ([`data`]), technical indicators
//! ([`indicators`]) and the backtest engine ([`backtest`], docs §7), which
//! builds on both; [`warmup`] is the history both compute on before a
//! range's start (docs §7.4.1). The quant desk (docs §15): option pricing
//! ([`options`]), portfolio construction ([`portfolio`]) and risk
//! ([`risk`]), on the shared [`stats`]. Is the edge real (docs §17):
//! factor ICs and regressions ([`factor`]) and overfitting statistics
//! ([`overfitting`]), and purged cross-validation ([`validation`], docs
//! §18.9).
//!
//! Everything here is plain columns (`Vec<NaiveDate>`, `Vec<f64>`): a daily
//! engine over a few thousand bars per symbol needs no dataframe library.

pub mod backtest;
pub mod data;
pub mod factor;
pub mod indicators;
pub mod interrupt;
pub mod options;
pub mod overfitting;
pub mod portfolio;
pub mod returns;
pub mod risk;
pub mod seeded;
pub mod stats;
pub mod tearsheet;
pub mod timeseries;
pub mod validation;
pub mod warmup;

pub use interrupt::{Interrupt, Interrupted, checkpoint};
