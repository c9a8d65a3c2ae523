//! The help page: every action with its keys (as bound now, overrides
//! included) and description, then the slash commands.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};

use super::format::truncate;
use super::keymap::{Action, Context, Keymap};
use super::theme::Theme;

/// Slash commands with their descriptions.
pub(crate) const SLASH_COMMANDS: &[(&str, &str)] = &[
    (
        "/compact [focus]",
        "Compact the conversation now, optionally keeping a focus",
    ),
    (
        "/new",
        "Start a new session (the current one stays on disk)",
    ),
    (
        "/plan [TEXT|off]",
        "Plan mode: read-only tools, the answer is a numbered plan; /plan off leaves it",
    ),
    (
        "/go [TEXT]",
        "Run the last plan with every tool, the plan pinned in the context",
    ),
    (
        "/approval [MODE]",
        "Show the approval mode; ask, auto-edit, full-auto or read-only sets it",
    ),
    (
        "/export [md|html]",
        "Export this session (conversation, tool calls, figures) under its folder",
    ),
    ("/sessions", "Open the transcript browser"),
    (
        "/factors [PATH]",
        "Open the factor view of a screen record (the newest under the data dir without a path)",
    ),
    (
        "/monitors",
        "Open the Monitors view: schedules, next fires, verdicts, deliveries (x run, p pause, r resume)",
    ),
    (
        "/memory",
        "Open the memory view: entries and their archived originals",
    ),
    (
        "/model [NAME]",
        "Show the model; with a name, switch the configured provider to it",
    ),
    (
        "/swarm NAME [k=v …]",
        "Run a research team (a preset) and show its view; /swarm alone shows it",
    ),
    ("/help", "This page"),
    ("/quit", "Quit (a running turn is cancelled first)"),
];

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Help {
    pub scroll: usize,
}

pub fn lines(keymap: &Keymap, theme: &Theme, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let contexts = [
        Context::Global,
        Context::Main,
        Context::Input,
        Context::Chat,
        Context::List,
        Context::Search,
        Context::TearSheet,
        Context::Factors,
    ];
    let key_w = (width / 4).clamp(12, 26);
    for ctx in contexts {
        out.push(Line::from(Span::styled(
            ctx.title().to_string(),
            theme.heading,
        )));
        for a in Action::ALL.iter().filter(|a| a.context() == ctx) {
            let keys: Vec<String> = keymap.keys(*a).iter().map(|k| k.to_string()).collect();
            let keys = if keys.is_empty() {
                "(unbound)".to_string()
            } else {
                keys.join(", ")
            };
            let desc_w = width.saturating_sub(key_w + 2 + a.name().len() + 5);
            out.push(Line::from(vec![
                Span::styled(format!("  {:<key_w$}", truncate(&keys, key_w)), theme.key),
                Span::styled(truncate(a.description(), desc_w), theme.text),
                Span::styled(format!("  [{}]", a.name()), theme.muted),
            ]));
        }
        out.push(Line::default());
    }
    out.push(Line::from(Span::styled(
        "Slash commands (type in the input)",
        theme.heading,
    )));
    for (cmd, desc) in SLASH_COMMANDS {
        out.push(Line::from(vec![
            Span::styled(format!("  {cmd:<key_w$}"), theme.key),
            Span::styled(desc.to_string(), theme.text),
        ]));
    }
    out.push(Line::default());
    out.push(Line::from(Span::styled(
        "Rebind any action in config.toml: [tui.keys] transcripts = \"f2\" (names in brackets).",
        theme.muted,
    )));
    out
}

impl Help {
    pub(crate) fn render(&mut self, area: Rect, buf: &mut Buffer, keymap: &Keymap, theme: &Theme) {
        if area.height < 3 {
            return;
        }
        buf.set_style(area, theme.text);
        let all = lines(keymap, theme, area.width as usize);
        let body_h = area.height.saturating_sub(2) as usize;
        self.scroll = self.scroll.min(all.len().saturating_sub(body_h));
        let title = format!("{:<w$}", "Keys and commands", w = area.width as usize);
        buf.set_line(
            area.x,
            area.y,
            &Line::from(Span::styled(
                title,
                theme.status.add_modifier(Modifier::BOLD),
            )),
            area.width,
        );
        for (i, l) in all.iter().skip(self.scroll).take(body_h).enumerate() {
            buf.set_line(area.x, area.y + 1 + i as u16, l, area.width);
        }
        let hint = "↑↓ PgUp PgDn scroll · Esc or ? close";
        buf.set_line(
            area.x,
            area.y + area.height - 1,
            &Line::from(Span::styled(hint, theme.muted)),
            area.width,
        );
    }
}
