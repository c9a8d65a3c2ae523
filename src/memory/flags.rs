//! Memory feature flags (docs §8.1).
//!
//! A preset, `VIBEDESK_MEMORY=off|on|full`, sets every flag; an individual
//! variable that is present (even `false`) overrides it. The original
//! defaults to `off`, which leaves GC and compression dead code (docs §12.5);
//! vibedesk defaults to `full` so they actually run. The flags keep the
//! original's meaning otherwise, including "`on` does not enable
//! compression" and the warning when compression is on but GC is off.

/// Environment variable of the preset.
pub const PRESET_VAR: &str = "VIBEDESK_MEMORY";
/// The preset used when [`PRESET_VAR`] is unset.
pub const DEFAULT_PRESET: &str = "full";

/// Which memory features are on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryFlags {
    /// Quality scoring, dedup, access tracking, reinforcement.
    pub quality: bool,
    /// Garbage collection (archive of low-importance entries).
    pub gc: bool,
    /// Importance decay (14-day half-life).
    pub decay: bool,
    /// Category sub-directories (docs §8.2): new entries go to
    /// `entries/<type>/<slug>.md` instead of `entries/<type>_<slug>.md`, and
    /// `entries/.hierarchy.yaml` summarises the categories. Both layouts are
    /// always read (see [`super::hierarchy`]).
    pub hierarchy: bool,
    /// BM25 semantic links (docs §8.8): each save writes the entry's best
    /// matches to a `<stem>.relations.json` sidecar, and recall appends
    /// linked entries to its results (see `links.rs`).
    pub links: bool,
    /// Raw → daily → digest compression (runs as part of GC).
    pub compression: bool,
    /// Rank recall with the SQLite full-text index; off = the original's scan
    /// scoring. The index itself is always kept (session search uses it).
    pub fts_index: bool,
    /// Use the smoothed IDF in compression (docs §12.7); off = the original's.
    pub corrected_idf: bool,
    /// Problems met while reading the variables (unknown preset, values that
    /// are not booleans); shown with [`MemoryFlags::warnings`].
    pub problems: Vec<String>,
}

impl Default for MemoryFlags {
    fn default() -> Self {
        MemoryFlags::preset(DEFAULT_PRESET)
    }
}

/// The per-flag variables, in spec order.
const FLAG_VARS: [&str; 8] = [
    "VIBEDESK_MEMORY_QUALITY",
    "VIBEDESK_MEMORY_GC",
    "VIBEDESK_MEMORY_DECAY",
    "VIBEDESK_MEMORY_HIERARCHY",
    "VIBEDESK_MEMORY_LINKS",
    "VIBEDESK_MEMORY_COMPRESSION",
    "VIBEDESK_MEMORY_FTS_INDEX",
    "VIBEDESK_MEMORY_CORRECTED_IDF",
];

impl MemoryFlags {
    /// Every flag off.
    pub fn off() -> Self {
        MemoryFlags {
            quality: false,
            gc: false,
            decay: false,
            hierarchy: false,
            links: false,
            compression: false,
            fts_index: false,
            corrected_idf: false,
            problems: Vec::new(),
        }
    }

    /// A preset by name (case-insensitive): `off`, `on` (quality, GC, decay)
    /// or `full` (everything). Unknown names are `off`, as in the original.
    pub fn preset(name: &str) -> Self {
        let mut f = MemoryFlags::off();
        match name.trim().to_ascii_lowercase().as_str() {
            "on" => {
                f.quality = true;
                f.gc = true;
                f.decay = true;
            }
            "full" => {
                f.quality = true;
                f.gc = true;
                f.decay = true;
                f.hierarchy = true;
                f.links = true;
                f.compression = true;
                f.fts_index = true;
            }
            "off" => {}
            other => f.problems.push(format!(
                "{PRESET_VAR}={other:?} is not a preset (off, on, full); memory features are off"
            )),
        }
        f
    }

    /// From the process environment.
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// From any variable lookup (tests pass a map).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let preset = lookup(PRESET_VAR)
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_PRESET.to_string());
        let mut f = MemoryFlags::preset(&preset);
        for var in FLAG_VARS {
            let Some(raw) = lookup(var) else { continue };
            let value = match raw.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" | "" => false,
                _ => {
                    f.problems.push(format!(
                        "{var}={raw:?} is not a boolean (true/false, on/off, 1/0); treated as off"
                    ));
                    false
                }
            };
            match var {
                "VIBEDESK_MEMORY_QUALITY" => f.quality = value,
                "VIBEDESK_MEMORY_GC" => f.gc = value,
                "VIBEDESK_MEMORY_DECAY" => f.decay = value,
                "VIBEDESK_MEMORY_HIERARCHY" => f.hierarchy = value,
                "VIBEDESK_MEMORY_LINKS" => f.links = value,
                "VIBEDESK_MEMORY_COMPRESSION" => f.compression = value,
                "VIBEDESK_MEMORY_FTS_INDEX" => f.fts_index = value,
                _ => f.corrected_idf = value,
            }
        }
        f
    }

    /// What the user should be told about this configuration (docs §8.1):
    /// compression without GC never runs, plus any unreadable variable.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = self.problems.clone();
        if self.compression && !self.gc {
            out.push(
                "memory compression is on but garbage collection is off, and compression only runs \
                 as part of GC: it will not run. Set VIBEDESK_MEMORY_GC=on or VIBEDESK_MEMORY=full."
                    .to_string(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> MemoryFlags {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        MemoryFlags::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn presets_and_overrides() {
        let full = env(&[]);
        assert!(full.gc && full.compression && full.fts_index && full.quality);
        assert!(!full.corrected_idf);
        let on = env(&[("VIBEDESK_MEMORY", "ON")]);
        assert!(on.quality && on.gc && on.decay && !on.compression && !on.fts_index);
        let off = env(&[("VIBEDESK_MEMORY", "off")]);
        assert_eq!(off, MemoryFlags::off());
        // Present-but-false overrides the preset.
        let f = env(&[("VIBEDESK_MEMORY", "full"), ("VIBEDESK_MEMORY_GC", "false")]);
        assert!(!f.gc && f.compression);
        let unknown = env(&[("VIBEDESK_MEMORY", "max")]);
        assert!(!unknown.gc && unknown.warnings()[0].contains("not a preset"));
    }

    #[test]
    fn compression_without_gc_warns() {
        let f = env(&[
            ("VIBEDESK_MEMORY", "off"),
            ("VIBEDESK_MEMORY_COMPRESSION", "1"),
        ]);
        let w = f.warnings();
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("will not run"), "{w:?}");
        assert!(env(&[]).warnings().is_empty());
        let bad = env(&[("VIBEDESK_MEMORY_GC", "maybe")]);
        assert!(
            bad.warnings()
                .iter()
                .any(|w| w.contains("VIBEDESK_MEMORY_GC"))
        );
    }
}
