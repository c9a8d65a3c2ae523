//! Named actions and the keys bound to them. Views never match on keys:
//! they receive an [`Action`], so every binding is visible in the help popup
//! and overridable from `config.toml` (`[tui.keys] transcripts = "f2"`).
//! User bindings patch the defaults action by action (gitui's convention).

use std::collections::BTreeMap;
use std::fmt;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// Where an action applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Context {
    /// Everywhere.
    Global,
    /// The chat screen, whether the input or the chat has focus.
    Main,
    /// The chat screen with the input focused.
    Input,
    /// The chat screen with a chat cell selected.
    Chat,
    /// Full-screen lists: the transcript browser, the team view and the
    /// help page.
    List,
    /// The browser's search line (after `/`): it takes every key, and keys
    /// bound to nothing here type into it.
    Search,
    /// The tear-sheet view (docs §20.2); the list keys scroll it and
    /// Esc/q close it.
    TearSheet,
    /// The factor view (docs §17.12); the list keys select a factor and
    /// Esc/q close it.
    Factors,
}

impl Context {
    pub fn title(self) -> &'static str {
        match self {
            Context::Global => "Everywhere",
            Context::Main => "Chat screen",
            Context::Input => "Input",
            Context::Chat => "Chat cells (Tab to enter)",
            Context::List => "Transcript browser, team view and help",
            Context::Search => "Search line (after / in the browser; other keys type)",
            Context::TearSheet => "Tear sheet (s on a result; list keys scroll, Esc/q close)",
            Context::Factors => {
                "Factor view (/factors, or f on a screen result; list keys select, Esc/q close)"
            }
        }
    }
}

macro_rules! actions {
    ($($variant:ident => $name:literal, $ctx:ident, $desc:literal, [$($key:literal),*];)*) => {
        /// Everything a key can do, by name.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Action { $($variant),* }

        impl Action {
            pub(crate) const ALL: &'static [Action] = &[$(Action::$variant),*];

            /// The name used in `config.toml`.
            pub(crate) fn name(self) -> &'static str {
                match self { $(Action::$variant => $name),* }
            }

            pub(crate) fn context(self) -> Context {
                match self { $(Action::$variant => Context::$ctx),* }
            }

            pub(crate) fn description(self) -> &'static str {
                match self { $(Action::$variant => $desc),* }
            }

            fn default_keys(self) -> &'static [&'static str] {
                match self { $(Action::$variant => &[$($key),*]),* }
            }

            pub(crate) fn from_name(name: &str) -> Option<Action> {
                match name { $($name => Some(Action::$variant),)* _ => None }
            }
        }
    };
}

actions! {
    Quit => "quit", Global, "Quit vibedesk (a running turn is cancelled first)", ["ctrl-q"];
    Help => "help", Global, "Show every key binding", ["f1"];
    Transcripts => "transcripts", Global, "Open the transcript browser (sessions, messages, trace, archive)", ["ctrl-t"];
    Interrupt => "interrupt", Global, "Cancel the run; on an idle prompt clear it, then press again to quit", ["ctrl-c"];
    Redraw => "redraw", Global, "Redraw the whole screen", ["ctrl-l"];
    SwarmView => "team_view", Global, "Show or hide the research team's view (/swarm starts a team)", ["ctrl-g"];

    Submit => "submit", Input, "Send the message (queued while a run is busy)", ["enter"];
    Newline => "newline", Input, "New line in the message", ["shift-enter", "alt-enter", "ctrl-j"];
    HelpFromInput => "help_on_empty_input", Input, "Show help (when the input is empty)", ["?"];
    HistoryPrev => "history_prev", Input, "Previous sent message (on the first line)", ["up"];
    HistoryNext => "history_next", Input, "Next sent message (on the last line)", ["down"];
    FocusChat => "focus_chat", Input, "Select cells in the chat to expand them", ["tab"];

    CancelRun => "cancel_run", Main, "Cancel the running turn; the chat is kept", ["esc"];
    ScrollUp => "scroll_up", Main, "Scroll the chat up a page", ["pageup"];
    ScrollDown => "scroll_down", Main, "Scroll the chat down a page (follows again at the bottom)", ["pagedown"];
    ScrollTop => "scroll_top", Main, "Jump to the start of the chat", ["ctrl-home"];
    FollowBottom => "follow_bottom", Main, "Jump to the end and follow new output", ["ctrl-end"];
    ToggleReasoning => "toggle_reasoning", Main, "Show or hide all reasoning", ["ctrl-r"];
    ToggleDetails => "toggle_details", Main, "Expand or fold all tool calls", ["ctrl-o"];
    ToggleSidebar => "toggle_sidebar", Main, "Show or hide the tool panel and gauge", ["ctrl-b"];

    SelectPrev => "select_prev", Chat, "Select the previous cell", ["up", "k"];
    SelectNext => "select_next", Chat, "Select the next cell", ["down", "j"];
    ToggleCell => "toggle_cell", Chat, "Expand or fold the selected cell", ["enter", "space"];
    FocusInput => "focus_input", Chat, "Back to the input", ["tab", "i"];
    TearSheet => "tear_sheet", Chat, "Open the tear sheet of the selected result (a backtest, or any result with a run directory)", ["s"];
    FactorView => "factor_view", Chat, "Open the factor view of the selected factor-screen result (one that names a screen_file)", ["f"];

    Up => "up", List, "Move up", ["up", "k"];
    Down => "down", List, "Move down", ["down", "j"];
    PageUp => "page_up", List, "Page up", ["pageup"];
    PageDown => "page_down", List, "Page down", ["pagedown"];
    Top => "top", List, "First row", ["home", "g"];
    Bottom => "bottom", List, "Last row", ["end", "G"];
    Open => "open", List, "Open the selected item", ["enter", "right", "l"];
    Back => "back", List, "Back one level (leaves the view at the top)", ["esc", "left", "h", "q"];
    Search => "search", List, "Search within the view", ["/"];
    NextMatch => "next_match", List, "Next search match", ["n"];
    PrevMatch => "prev_match", List, "Previous search match", ["N"];
    NextTab => "next_tab", List, "Next tab (sessions/memory; messages, trace, archive; a memory's next original)", ["tab"];
    PrevTab => "prev_tab", List, "Previous tab", ["backtab"];
    Resume => "resume", List, "Resume the selected session in the chat", ["r"];
    Memory => "memory", List, "Show the memory entries: level, last access, importance, retention, archived originals", ["m"];
    TeamRuns => "team_runs", List, "Show the research teams' runs and their workers", ["t"];
    KeepMemory => "keep_memory", List, "In the memory list or an entry: keep a memory the model wrote (marked ?), or take the keep back", ["K"];
    MonitorRun => "monitor_run", List, "In the Monitors view (/monitors): run the selected monitor now", ["x"];
    MonitorPause => "monitor_pause", List, "In the Monitors view: pause the selected monitor (r resumes it)", ["p"];
    TogglePane => "toggle_pane", List, "In a memory entry: switch between its current text and the archived original", ["v"];
    BrowserTearSheet => "browser_tear_sheet", List, "In the browser: open the tear sheet of the selected backtest result", ["s"];

    SheetOverview => "sheet_overview", TearSheet, "Overview: key metrics, equity against the benchmark", ["1"];
    SheetMonthly => "sheet_monthly", TearSheet, "Monthly returns heatmap and annual returns", ["2"];
    SheetDrawdowns => "sheet_drawdowns", TearSheet, "Worst drawdowns and the underwater curve", ["3"];
    SheetRolling => "sheet_rolling", TearSheet, "Rolling 6- and 12-month Sharpe, Sortino, volatility, beta", ["4"];
    SheetDistribution => "sheet_distribution", TearSheet, "Return histograms and quantiles by day, week, month, quarter, year", ["5"];
    SheetTrades => "sheet_trades", TearSheet, "Trades and positions: exposure, turnover, weights, trades.csv", ["6"];
    SheetReport => "sheet_report", TearSheet, "Write the self-contained HTML report (its path shows on the bottom line)", ["r"];

    FactorList => "factor_list", Factors, "Factors: the ranked list, the selected factor's rank IC series, quantile equity and IC decay", ["1"];
    FactorHeatmap => "factor_heatmap", Factors, "Correlation: the heatmap of the top factors' rank IC series", ["2"];

    SearchConfirm => "search_confirm", Search, "Close the search line and go to the first match", ["enter", "shift-enter", "alt-enter", "ctrl-enter"];
    SearchCancel => "search_cancel", Search, "Close the search line and clear the query", ["esc", "ctrl-c"];
    SearchDelete => "search_delete", Search, "Delete the last character of the query", ["backspace", "alt-backspace", "ctrl-backspace"];
}

/// The character a key types into a text field, if it types one: a
/// character key without Ctrl or Alt (Shift is part of the character).
pub(crate) fn typed_char(key: &KeyEvent) -> Option<char> {
    match key.code {
        KeyCode::Char(c)
            if !key
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
        {
            Some(c)
        }
        _ => None,
    }
}

/// One key with its modifiers, as written in config: `ctrl-t`, `alt-enter`,
/// `shift-enter`, `f1`, `pageup`, `?`, `G`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct KeyBinding {
    pub code: KeyCode,
    pub modifiers: KeyModifiers,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum KeymapError {
    #[error("[tui.keys]: unknown action '{0}' (see `?` in the workstation for the names)")]
    UnknownAction(String),
    #[error(
        "[tui.keys] {action}: cannot read key '{key}' (examples: ctrl-t, alt-enter, f2, pageup, ?)"
    )]
    BadKey { action: String, key: String },
}

impl KeyBinding {
    pub(crate) fn parse(s: &str) -> Option<KeyBinding> {
        let s = s.trim();
        if s.is_empty() {
            return None;
        }
        // A lone character (including '-') is that key.
        if s.chars().count() == 1 {
            let c = s.chars().next()?;
            return Some(KeyBinding {
                code: KeyCode::Char(c),
                modifiers: KeyModifiers::NONE,
            });
        }
        let mut modifiers = KeyModifiers::NONE;
        let mut rest = s;
        loop {
            let lower = rest.to_ascii_lowercase();
            let (m, len) = if lower.starts_with("ctrl-") || lower.starts_with("ctrl+") {
                (KeyModifiers::CONTROL, 5)
            } else if lower.starts_with("alt-") || lower.starts_with("alt+") {
                (KeyModifiers::ALT, 4)
            } else if lower.starts_with("shift-") || lower.starts_with("shift+") {
                (KeyModifiers::SHIFT, 6)
            } else {
                break;
            };
            modifiers |= m;
            rest = &rest[len..];
        }
        let code = match rest.to_ascii_lowercase().as_str() {
            "enter" | "return" => KeyCode::Enter,
            "esc" | "escape" => KeyCode::Esc,
            "tab" => KeyCode::Tab,
            "backtab" => KeyCode::BackTab,
            "space" => KeyCode::Char(' '),
            "backspace" => KeyCode::Backspace,
            "delete" | "del" => KeyCode::Delete,
            "insert" | "ins" => KeyCode::Insert,
            "up" => KeyCode::Up,
            "down" => KeyCode::Down,
            "left" => KeyCode::Left,
            "right" => KeyCode::Right,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            "pageup" | "pgup" => KeyCode::PageUp,
            "pagedown" | "pgdn" | "pgdown" => KeyCode::PageDown,
            f if f.starts_with('f') && f.len() > 1 => KeyCode::F(f[1..].parse().ok()?),
            _ if rest.chars().count() == 1 => {
                let c = rest.chars().next()?;
                // `ctrl-T` and `ctrl-t` are the same key to a terminal.
                KeyCode::Char(if modifiers.contains(KeyModifiers::CONTROL) {
                    c.to_ascii_lowercase()
                } else {
                    c
                })
            }
            _ => return None,
        };
        Some(KeyBinding { code, modifiers })
    }

    /// Whether a key event from the terminal is this binding. For printable
    /// characters Shift is part of the character (`G`, `?`) and is ignored.
    pub(crate) fn matches(&self, key: &KeyEvent) -> bool {
        if key.kind == KeyEventKind::Release {
            return false;
        }
        match (self.code, key.code) {
            (KeyCode::Char(a), KeyCode::Char(b)) => {
                let strip = |m: KeyModifiers| m - KeyModifiers::SHIFT;
                let same_char = if key.modifiers.contains(KeyModifiers::CONTROL) {
                    a.eq_ignore_ascii_case(&b)
                } else {
                    a == b
                };
                same_char && strip(self.modifiers) == strip(key.modifiers)
            }
            // Terminals report Shift-Tab as BackTab, sometimes with SHIFT set.
            (KeyCode::BackTab, KeyCode::BackTab) => true,
            (a, b) => a == b && self.modifiers == key.modifiers,
        }
    }
}

impl fmt::Display for KeyBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.modifiers.contains(KeyModifiers::CONTROL) {
            f.write_str("Ctrl-")?;
        }
        if self.modifiers.contains(KeyModifiers::ALT) {
            f.write_str("Alt-")?;
        }
        if self.modifiers.contains(KeyModifiers::SHIFT) {
            f.write_str("Shift-")?;
        }
        match self.code {
            KeyCode::Char(' ') => f.write_str("Space"),
            KeyCode::Char(c) if self.modifiers.contains(KeyModifiers::CONTROL) => {
                write!(f, "{}", c.to_ascii_uppercase())
            }
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::Enter => f.write_str("Enter"),
            KeyCode::Esc => f.write_str("Esc"),
            KeyCode::Tab => f.write_str("Tab"),
            KeyCode::BackTab => f.write_str("Shift-Tab"),
            KeyCode::Up => f.write_str("↑"),
            KeyCode::Down => f.write_str("↓"),
            KeyCode::Left => f.write_str("←"),
            KeyCode::Right => f.write_str("→"),
            KeyCode::Home => f.write_str("Home"),
            KeyCode::End => f.write_str("End"),
            KeyCode::PageUp => f.write_str("PgUp"),
            KeyCode::PageDown => f.write_str("PgDn"),
            KeyCode::F(n) => write!(f, "F{n}"),
            KeyCode::Backspace => f.write_str("Backspace"),
            KeyCode::Delete => f.write_str("Del"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// Bindings, looked up by context.
#[derive(Clone, Debug)]
pub struct Keymap {
    bindings: Vec<(Action, KeyBinding)>,
}

impl Default for Keymap {
    fn default() -> Self {
        let mut bindings = Vec::new();
        for a in Action::ALL {
            for k in a.default_keys() {
                if let Some(b) = KeyBinding::parse(k) {
                    bindings.push((*a, b));
                }
            }
        }
        Keymap { bindings }
    }
}

impl Keymap {
    /// The defaults patched by `overrides` (action name → keys). An action
    /// given an empty list is unbound. Overridden bindings take precedence
    /// over defaults that use the same key.
    pub(crate) fn with_overrides(
        overrides: &BTreeMap<String, Vec<String>>,
    ) -> Result<Self, KeymapError> {
        let mut map = Keymap::default();
        let mut front = Vec::new();
        for (name, keys) in overrides {
            let action =
                Action::from_name(name).ok_or_else(|| KeymapError::UnknownAction(name.clone()))?;
            map.bindings.retain(|(a, _)| *a != action);
            for k in keys {
                let b = KeyBinding::parse(k).ok_or_else(|| KeymapError::BadKey {
                    action: name.clone(),
                    key: k.clone(),
                })?;
                front.push((action, b));
            }
        }
        front.extend(map.bindings);
        map.bindings = front;
        Ok(map)
    }

    /// The first action of `context` bound to `key`.
    pub(crate) fn lookup(&self, context: Context, key: &KeyEvent) -> Option<Action> {
        self.bindings
            .iter()
            .find(|(a, b)| a.context() == context && b.matches(key))
            .map(|(a, _)| *a)
    }

    /// The keys bound to `action`, in order.
    pub(crate) fn keys(&self, action: Action) -> Vec<KeyBinding> {
        self.bindings
            .iter()
            .filter(|(a, _)| *a == action)
            .map(|(_, b)| *b)
            .collect()
    }

    /// The keys of `action` for a hint line, e.g. `Ctrl-T`.
    pub(crate) fn hint(&self, action: Action) -> String {
        self.keys(action)
            .first()
            .map(|k| k.to_string())
            .unwrap_or_else(|| "(unbound)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, m: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, m)
    }

    #[test]
    fn parses_and_matches() {
        let b = KeyBinding::parse("ctrl-t").unwrap();
        assert!(b.matches(&key(KeyCode::Char('t'), KeyModifiers::CONTROL)));
        assert!(!b.matches(&key(KeyCode::Char('t'), KeyModifiers::NONE)));
        let g = KeyBinding::parse("G").unwrap();
        assert!(g.matches(&key(KeyCode::Char('G'), KeyModifiers::SHIFT)));
        assert!(!g.matches(&key(KeyCode::Char('g'), KeyModifiers::NONE)));
        let ae = KeyBinding::parse("alt-enter").unwrap();
        assert!(ae.matches(&key(KeyCode::Enter, KeyModifiers::ALT)));
        assert!(!ae.matches(&key(KeyCode::Enter, KeyModifiers::NONE)));
        assert_eq!(KeyBinding::parse("f12").unwrap().code, KeyCode::F(12));
        assert!(KeyBinding::parse("ctrl-nope").is_none());
        assert_eq!(KeyBinding::parse("ctrl-t").unwrap().to_string(), "Ctrl-T");
    }

    #[test]
    fn every_action_has_a_description_and_a_default_key() {
        let map = Keymap::default();
        for a in Action::ALL {
            assert!(!a.description().is_empty());
            assert!(!map.keys(*a).is_empty(), "{a:?} has no default key");
            assert_eq!(Action::from_name(a.name()), Some(*a));
        }
    }
}
