//! The workstation's own settings: the `[tui]` table of `config.toml`.
//!
//! ```toml
//! [tui]
//! theme = "light"
//! [tui.keys]
//! transcripts = "f2"            # one key …
//! newline = ["alt-enter", "ctrl-j"]   # … or several; [] unbinds
//! ```
//!
//! Only the `[tui]` table is read here, from the file `config::Config`
//! parsed once; the engine's loader owns the rest of the file.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::keymap::{Keymap, KeymapError};

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuiSettings {
    #[serde(default)]
    pub theme: Option<String>,
    #[serde(default)]
    pub keys: BTreeMap<String, KeysValue>,
}

/// One key or a list of keys.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum KeysValue {
    One(String),
    Many(Vec<String>),
}

impl KeysValue {
    pub(crate) fn to_vec(&self) -> Vec<String> {
        match self {
            KeysValue::One(k) => vec![k.clone()],
            KeysValue::Many(v) => v.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{path}: [tui] is not valid: {message}")]
    Invalid { path: String, message: String },
    #[error(transparent)]
    Keys(#[from] KeymapError),
    /// A key problem found as the file loads, so it names the file.
    #[error("{path}: [tui.keys]: {source}")]
    KeysIn {
        path: String,
        #[source]
        source: KeymapError,
    },
}

impl TuiSettings {
    /// Reads `[tui]` from a config file's text; a file without it is the default.
    pub fn from_toml(text: &str, path: &str) -> Result<Self, SettingsError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| SettingsError::Invalid {
            path: path.to_string(),
            message: e.to_string(),
        })?;
        Self::from_table(&table, path)
    }

    /// Reads `[tui]` from the config file as parsed once, when `Config`
    /// loads; the key names are checked here too, so a bad one is reported
    /// with the rest of the file's problems.
    pub(crate) fn from_table(table: &toml::Table, path: &str) -> Result<Self, SettingsError> {
        let settings = match table.get("tui") {
            None => TuiSettings::default(),
            Some(v) => v
                .clone()
                .try_into::<TuiSettings>()
                .map_err(|e| SettingsError::Invalid {
                    path: path.to_string(),
                    message: e.to_string(),
                })?,
        };
        settings.keymap().map_err(|source| SettingsError::KeysIn {
            path: path.to_string(),
            source,
        })?;
        Ok(settings)
    }

    pub fn keymap(&self) -> Result<Keymap, KeymapError> {
        let overrides: BTreeMap<String, Vec<String>> = self
            .keys
            .iter()
            .map(|(k, v)| (k.clone(), v.to_vec()))
            .collect();
        Keymap::with_overrides(&overrides)
    }
}
