//! The full-screen workstation (issue 4). Consumes only `AgentEvent`s and
//! session commands.
//!
//! - [`app`]: the state and the pure `update(state, msg) -> effects` (its
//!   research-team part in `app_swarm`).
//! - [`view`]: drawing, a function of the state and the time; [`panes`]
//!   draws one conversation's chat, tool panel and gauge.
//! - [`runtime`]: the terminal, the event loop and the session worker.
//! - panels: [`chat`] (over [`cells`], [`markdown`] and [`backtest`]), [`tool_panel`],
//!   [`gauge`], [`browser`] (over [`transcripts`], [`memory_view`] over
//!   [`memories`], and [`team_runs`]), [`help`]; the last two are [`overlay`]s, stacked over
//!   the chat screen with one rule for who gets a key; the team view
//!   ([`swarm_view`] over [`swarm`]) is one too.
//! - settings: [`keymap`] (named actions), [`theme`], [`settings`].

pub mod app;
mod app_swarm;
pub mod approval_view;
pub mod backtest;
pub mod browser;
pub mod cells;
pub mod chat;
pub mod composer;
pub mod factor_charts;
pub mod factor_view;
pub mod format;
pub mod frame;
pub mod gauge;
pub mod help;
pub mod keymap;
pub mod markdown;
pub mod memories;
pub mod memory_view;
pub mod monitors;
pub mod overlay;
pub mod panes;
pub mod payoff;
pub mod runtime;
pub mod settings;
pub mod swarm;
pub mod swarm_view;
pub mod sweep_cell;
pub mod team_runs;
pub mod tearsheet;
pub mod terminal;
pub mod theme;
pub mod tool_panel;
pub mod transcripts;
pub mod view;
pub mod wrap;

pub use app::{App, AppOptions, Effect, Msg, update};
pub use runtime::{SwarmLaunchError, SwarmLauncher, Workstation, run};
