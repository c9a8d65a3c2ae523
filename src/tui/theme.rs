//! Themes: TOML files of semantic tokens (`themes/*.toml`). Views ask for a
//! token (`muted`, `warn`, …), never for a colour, so a theme can change every
//! colour without touching a view. Three themes ship inside the binary; users
//! add or override them in `<config>/themes/NAME.toml`, and a theme may
//! `inherits = "other"` to change only a few tokens (helix's convention).

use std::collections::BTreeMap;
use std::path::Path;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

/// The themes compiled into the binary, by name.
pub(crate) const BUILTIN: &[(&str, &str)] = &[
    ("default", include_str!("../../themes/default.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
];

#[derive(Debug, thiserror::Error)]
pub enum ThemeError {
    #[error("theme '{name}' not found; available: {available}")]
    NotFound { name: String, available: String },
    #[error("theme '{name}' is not valid: {message}")]
    Invalid { name: String, message: String },
    #[error("theme '{0}' inherits from itself (directly or through others)")]
    Cycle(String),
}

macro_rules! tokens {
    ($($(#[$doc:meta])* $field:ident),* $(,)?) => {
        /// Resolved styles, one per semantic token.
        #[derive(Clone, Debug, PartialEq)]
        pub struct Theme {
            pub name: String,
            $($(#[$doc])* pub $field: Style,)*
        }

        /// Every token name, as written in theme files.
        pub const TOKEN_NAMES: &[&str] = &[$(stringify!($field)),*];

        impl Theme {
            fn set(&mut self, token: &str, style: Style) -> bool {
                match token {
                    $(stringify!($field) => { self.$field = style; true })*
                    _ => false,
                }
            }

            /// Every token's style, in `TOKEN_NAMES` order.
            pub fn styles(&self) -> Vec<Style> {
                vec![$(self.$field),*]
            }

            fn blank(name: &str) -> Theme {
                Theme { name: name.to_string(), $($field: Style::default(),)* }
            }
        }
    };
}

tokens! {
    /// Body text.
    text,
    /// Secondary text: timestamps, hints, ids.
    muted,
    /// The one colour that says "look here": titles, the selected tab.
    accent,
    ok,
    warn,
    error,
    /// The user's own turns.
    user,
    /// The assistant's name tag.
    assistant,
    /// Model reasoning (shown dimmed).
    reasoning,
    /// Inline code and code blocks.
    code,
    heading,
    link,
    quote,
    border,
    /// The border of the focused pane.
    border_focus,
    /// The selected row or cell.
    selection,
    /// Status bar (top line).
    status,
    /// Key names in hints and help.
    key,
    gauge_ok,
    gauge_warn,
    gauge_over,
    gauge_empty,
    gauge_mark,
    search_match,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    // Documentation for people reading the file; accepted, not used.
    #[serde(default)]
    #[allow(dead_code)]
    name: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    #[serde(default)]
    inherits: Option<String>,
    #[serde(default)]
    tokens: BTreeMap<String, StyleSpec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StyleSpec {
    #[serde(default)]
    fg: Option<String>,
    #[serde(default)]
    bg: Option<String>,
    #[serde(default)]
    modifiers: Vec<String>,
}

impl Default for Theme {
    fn default() -> Self {
        // The shipped default always parses (a test guards it); an empty
        // theme is the fallback that still renders text.
        Theme::builtin("default").unwrap_or_else(|_| Theme::blank("default"))
    }
}

impl Theme {
    /// A tab label in a tab strip: the selected one stands out.
    pub(crate) fn tab(&self, selected: bool) -> Style {
        if selected {
            self.accent
                .add_modifier(Modifier::BOLD | Modifier::REVERSED)
        } else {
            self.muted
        }
    }

    /// A shipped theme by name.
    pub fn builtin(name: &str) -> Result<Theme, ThemeError> {
        Self::load(name, None)
    }

    /// Names of the shipped themes plus those in `user_dir`.
    pub fn available(user_dir: Option<&Path>) -> Vec<String> {
        let mut names: Vec<String> = BUILTIN.iter().map(|(n, _)| n.to_string()).collect();
        if let Some(dir) = user_dir
            && let Ok(rd) = std::fs::read_dir(dir)
        {
            for e in rd.filter_map(Result::ok) {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "toml")
                    && let Some(stem) = p.file_stem().and_then(|s| s.to_str())
                    && !names.iter().any(|n| n == stem)
                {
                    names.push(stem.to_string());
                }
            }
        }
        names
    }

    /// Loads a theme: `<user_dir>/NAME.toml` first, then the shipped ones.
    pub fn load(name: &str, user_dir: Option<&Path>) -> Result<Theme, ThemeError> {
        let mut chain: Vec<(String, ThemeFile)> = Vec::new();
        let mut next = Some(name.to_string());
        while let Some(n) = next.take() {
            if chain.iter().any(|(seen, _)| *seen == n) {
                return Err(ThemeError::Cycle(n));
            }
            let text = Self::source(&n, user_dir).ok_or_else(|| ThemeError::NotFound {
                name: n.clone(),
                available: Self::available(user_dir).join(", "),
            })?;
            let file: ThemeFile = toml::from_str(&text).map_err(|e| ThemeError::Invalid {
                name: n.clone(),
                message: e.to_string(),
            })?;
            next = file.inherits.clone();
            chain.push((n, file));
        }
        let mut theme = Theme::blank(name);
        // Apply from the root ancestor down, so children override parents.
        for (n, file) in chain.iter().rev() {
            for (token, spec) in &file.tokens {
                let style = spec.to_style().map_err(|message| ThemeError::Invalid {
                    name: n.clone(),
                    message: format!("token '{token}': {message}"),
                })?;
                if !theme.set(token, style) {
                    return Err(ThemeError::Invalid {
                        name: n.clone(),
                        message: format!(
                            "unknown token '{token}'; known: {}",
                            TOKEN_NAMES.join(", ")
                        ),
                    });
                }
            }
        }
        Ok(theme)
    }

    fn source(name: &str, user_dir: Option<&Path>) -> Option<String> {
        let safe = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if safe
            && let Some(dir) = user_dir
            && let Ok(text) = std::fs::read_to_string(dir.join(format!("{name}.toml")))
        {
            return Some(text);
        }
        BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| t.to_string())
    }
}

/// A colour or modifier in a theme file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StyleError {
    #[error("bad colour '{0}'")]
    BadHex(String),
    #[error("unknown colour '{0}' (use an ANSI name such as red or dark_gray, #rrggbb, or 0-255)")]
    UnknownColour(String),
    #[error("unknown modifier '{0}' (bold, dim, italic, underlined, reversed, crossed_out)")]
    UnknownModifier(String),
}

impl StyleSpec {
    fn to_style(&self) -> Result<Style, StyleError> {
        let mut style = Style::default();
        if let Some(fg) = &self.fg {
            style = style.fg(parse_color(fg)?);
        }
        if let Some(bg) = &self.bg {
            style = style.bg(parse_color(bg)?);
        }
        for m in &self.modifiers {
            style = style.add_modifier(parse_modifier(m)?);
        }
        Ok(style)
    }
}

/// ANSI names (`red`, `light_blue`, `dark_gray`, `reset`), `#rrggbb` or a
/// 256-colour index.
pub(crate) fn parse_color(s: &str) -> Result<Color, StyleError> {
    let n = s.trim().to_ascii_lowercase().replace(['-', ' '], "_");
    Ok(match n.as_str() {
        "reset" | "default" => Color::Reset,
        "black" => Color::Black,
        "red" => Color::Red,
        "green" => Color::Green,
        "yellow" => Color::Yellow,
        "blue" => Color::Blue,
        "magenta" => Color::Magenta,
        "cyan" => Color::Cyan,
        "gray" | "grey" => Color::Gray,
        "dark_gray" | "dark_grey" | "bright_black" => Color::DarkGray,
        "light_red" | "bright_red" => Color::LightRed,
        "light_green" | "bright_green" => Color::LightGreen,
        "light_yellow" | "bright_yellow" => Color::LightYellow,
        "light_blue" | "bright_blue" => Color::LightBlue,
        "light_magenta" | "bright_magenta" => Color::LightMagenta,
        "light_cyan" | "bright_cyan" => Color::LightCyan,
        "white" | "bright_white" => Color::White,
        hex if hex.starts_with('#') && hex.len() == 7 => {
            let v = u32::from_str_radix(&hex[1..], 16)
                .map_err(|_| StyleError::BadHex(s.to_string()))?;
            Color::Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8)
        }
        idx => match idx.parse::<u8>() {
            Ok(i) => Color::Indexed(i),
            Err(_) => return Err(StyleError::UnknownColour(s.to_string())),
        },
    })
}

fn parse_modifier(s: &str) -> Result<Modifier, StyleError> {
    Ok(match s.trim().to_ascii_lowercase().as_str() {
        "bold" => Modifier::BOLD,
        "dim" => Modifier::DIM,
        "italic" => Modifier::ITALIC,
        "underlined" | "underline" => Modifier::UNDERLINED,
        "reversed" | "reverse" => Modifier::REVERSED,
        "crossed_out" | "strikethrough" => Modifier::CROSSED_OUT,
        "slow_blink" | "blink" => Modifier::SLOW_BLINK,
        other => return Err(StyleError::UnknownModifier(other.to_string())),
    })
}

/// Whether a colour is one of the 16 ANSI colours (or the terminal default),
/// which the terminal's own palette maps to something readable.
pub fn is_ansi(c: Option<Color>) -> bool {
    !matches!(c, Some(Color::Rgb(..)) | Some(Color::Indexed(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_themes_parse_and_default_is_ansi_only() {
        for (name, _) in BUILTIN {
            let t = Theme::builtin(name).unwrap();
            assert_eq!(t.name, *name);
        }
        let d = Theme::builtin("default").unwrap();
        for s in d.styles() {
            assert!(is_ansi(s.fg) && is_ansi(s.bg), "{s:?}");
        }
    }

    #[test]
    fn inheritance_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("mine.toml"),
            "inherits = \"default\"\n[tokens]\naccent = { fg = \"#ff8800\", modifiers = [\"bold\"] }\n",
        )
        .unwrap();
        let t = Theme::load("mine", Some(dir.path())).unwrap();
        let d = Theme::default();
        assert_eq!(t.accent.fg, Some(Color::Rgb(0xff, 0x88, 0)));
        assert_eq!(t.muted, d.muted);
        std::fs::write(dir.path().join("bad.toml"), "[tokens]\nnope = {}\n").unwrap();
        assert!(matches!(
            Theme::load("bad", Some(dir.path())),
            Err(ThemeError::Invalid { .. })
        ));
        std::fs::write(dir.path().join("loop.toml"), "inherits = \"loop\"\n").unwrap();
        assert!(matches!(
            Theme::load("loop", Some(dir.path())),
            Err(ThemeError::Cycle(_))
        ));
        assert!(matches!(
            Theme::load("absent", None),
            Err(ThemeError::NotFound { .. })
        ));
    }
}
