//! The built-in tools' names (docs §2.1), beside their argument types in
//! [`crate::model::contract`]: the tools declare them (`TypedTool::NAME`)
//! and the offline planner, which sees only this room, calls them by them.
//! Every other room reads them from the manifest (`tools::builtin`).

pub const READ_FILE: &str = "read_file";
pub const LIST_DIR: &str = "list_dir";
pub const WRITE_FILE: &str = "write_file";
pub const EDIT_FILE: &str = "edit_file";
pub const BASH: &str = "bash";
pub const COMPACT: &str = "compact";
pub const GET_MARKET_DATA: &str = "get_market_data";
pub const TECHNICAL_INDICATOR: &str = "technical_indicator";
pub const OPTION_PRICE: &str = "option_price";
pub const IMPLIED_VOLATILITY: &str = "implied_volatility";
pub const OPTION_STRATEGY: &str = "option_strategy";
pub const PORTFOLIO_OPTIMIZE: &str = "portfolio_optimize";
pub const RISK_REPORT: &str = "risk_report";
pub const STAT_TEST: &str = "stat_test";
pub const VOLATILITY_MODEL: &str = "volatility_model";
pub const FACTOR_IC: &str = "factor_ic";
pub const REGRESSION: &str = "regression";
pub const OVERFITTING: &str = "overfitting";
pub const FACTOR_SCREEN: &str = "factor_screen";
pub const TEARSHEET: &str = "tearsheet";
pub const BACKTEST: &str = "backtest";
pub const READ_ARTIFACT: &str = "read_artifact";
pub const SWEEP: &str = "sweep";
pub const REMEMBER: &str = "remember";
pub const RECALL: &str = "recall";
pub const SESSION_SEARCH: &str = "session_search";
pub const LOAD_SKILL: &str = "load_skill";
