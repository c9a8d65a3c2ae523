//! Preset files (docs §14.1): the YAML keys of the original's swarm presets,
//! read with `serde-saphyr` so that every id keeps the line it was written
//! on and a validation error can name it. Loading looks in
//! `<config dir>/swarm/NAME.yaml` first, then in the bundled table.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;

use super::bundled::BUNDLED;

/// A string with the 1-based line it was written on (0 when unknown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    pub value: String,
    pub line: u64,
}

impl<'de> Deserialize<'de> for Located {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<String>::deserialize(deserializer)?;
        Ok(Located {
            line: spanned.referenced.line(),
            value: spanned.value,
        })
    }
}

impl Serialize for Located {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(serializer)
    }
}

impl Located {
    pub fn as_str(&self) -> &str {
        &self.value
    }
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.value)
    }
}

/// A team: who is on it (agents), what they do (tasks, a DAG) and the
/// variables its templates take.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Preset {
    pub name: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub agents: Vec<AgentSpec>,
    #[serde(default)]
    pub tasks: Vec<TaskSpec>,
    #[serde(default)]
    pub variables: Vec<VariableSpec>,
}

/// Defaults of the original (docs §14.1): 25 iterations, 300 s, 2 retries.
const DEFAULT_MAX_ITERATIONS: u32 = 25;
const DEFAULT_TIMEOUT_SECONDS: u64 = 300;
const DEFAULT_MAX_RETRIES: u32 = 2;

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct AgentSpec {
    pub id: Located,
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub system_prompt: String,
    #[serde(default)]
    pub tools: Vec<Located>,
    #[serde(default)]
    pub skills: Vec<Located>,
    #[serde(default = "default_max_iterations")]
    pub max_iterations: u32,
    #[serde(default = "default_timeout_seconds")]
    pub timeout_seconds: u64,
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// A model for this agent only; the run's provider otherwise. The
    /// original's key is `model_name`; both are read.
    #[serde(default, alias = "model_name")]
    pub model: Option<String>,
}

fn default_max_iterations() -> u32 {
    DEFAULT_MAX_ITERATIONS
}
fn default_timeout_seconds() -> u64 {
    DEFAULT_TIMEOUT_SECONDS
}
fn default_max_retries() -> u32 {
    DEFAULT_MAX_RETRIES
}

impl AgentSpec {
    /// The task's whole budget: every attempt shares it (docs §14.3).
    pub fn budget_seconds(&self) -> u64 {
        self.timeout_seconds
            .saturating_mul(u64::from(self.max_retries) + 1)
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct TaskSpec {
    pub id: Located,
    pub agent_id: Located,
    #[serde(default)]
    pub prompt_template: String,
    #[serde(default)]
    pub depends_on: Vec<Located>,
    /// `key → upstream task id`, in the YAML's order (the upstream context
    /// keeps it).
    #[serde(default)]
    pub input_from: InputFrom,
    /// The decision rule the task's reader applies (docs §14.7), by a name
    /// of `model::team_rules::RULES`; the member's message carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Located>,
    /// The rule's thresholds by name, where the preset sets them (docs
    /// §14.7); the rule's defaults otherwise.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "thresholds_map"
    )]
    pub thresholds: Vec<(String, f64)>,
}

/// `thresholds` as a YAML mapping of names to numbers, in the file's order.
mod thresholds_map {
    use serde::de::{Deserializer, MapAccess, Visitor};
    use serde::ser::{SerializeMap, Serializer};
    use std::fmt;

    pub fn serialize<S: Serializer>(v: &[(String, f64)], s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(v.len()))?;
        for (k, x) in v {
            map.serialize_entry(k, x)?;
        }
        map.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, f64)>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vec<(String, f64)>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a mapping of threshold names to numbers")
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(Vec::new())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(kv) = map.next_entry::<String, f64>()? {
                    out.push(kv);
                }
                Ok(out)
            }
        }
        d.deserialize_any(V)
    }
}

/// `input_from` as an ordered list of `(key, task id)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputFrom(pub Vec<(String, Located)>);

impl<'de> Deserialize<'de> for InputFrom {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OrderedVisitor;
        impl<'de> Visitor<'de> for OrderedVisitor {
            type Value = InputFrom;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a mapping of input keys to task ids")
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<InputFrom, E> {
                Ok(InputFrom::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<InputFrom, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Located>()? {
                    out.push((k, v));
                }
                Ok(InputFrom(out))
            }
        }
        deserializer.deserialize_any(OrderedVisitor)
    }
}

impl Serialize for InputFrom {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, &v.value)?;
        }
        map.end()
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct VariableSpec {
    pub name: Located,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub default: Option<String>,
}

impl Preset {
    pub fn agent(&self, id: &str) -> Option<&AgentSpec> {
        self.agents.iter().find(|a| a.id.value == id)
    }

    pub fn task(&self, id: &str) -> Option<&TaskSpec> {
        self.tasks.iter().find(|t| t.id.value == id)
    }
}

/// Why a preset could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PresetError {
    #[error(
        "'{0}' is not a preset name: a name is one path segment of letters, digits, '-', '_' or '.' (give a FILE path to `swarm inspect` instead)"
    )]
    BadName(String),
    #[error(
        "no preset named '{name}' (bundled, or {dir}/{name}.yaml); `vibedesk swarm list` shows them"
    )]
    NotFound { name: String, dir: PathBuf },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
}

/// Where a preset came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "path")]
pub enum Origin {
    Bundled,
    User(PathBuf),
    File(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Bundled => f.write_str("bundled"),
            Origin::User(p) | Origin::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A preset with where it came from.
#[derive(Clone, Debug)]
pub struct LoadedPreset {
    pub preset: Preset,
    pub origin: Origin,
}

/// `<config dir>/swarm`: user presets, which win over bundled ones by name.
pub fn user_dir(config_dir: &Path) -> PathBuf {
    config_dir.join("swarm")
}

/// One path segment, no hidden names: what `NAME` may be.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Parses a preset's YAML; `origin` names it in the error.
pub fn parse(text: &str, origin: &str) -> Result<Preset, PresetError> {
    serde_saphyr::from_str(text).map_err(|e| PresetError::Parse {
        origin: origin.to_string(),
        message: e.to_string(),
    })
}

/// The preset called `name`: the user's file if there is one, else the
/// bundled one.
pub fn load(config_dir: &Path, name: &str) -> Result<LoadedPreset, PresetError> {
    if !valid_name(name) {
        return Err(PresetError::BadName(name.to_string()));
    }
    let dir = user_dir(config_dir);
    let path = dir.join(format!("{name}.yaml"));
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let preset = parse(&text, &path.display().to_string())?;
            return Ok(LoadedPreset {
                preset,
                origin: Origin::User(path),
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(PresetError::Read { path, source }),
    }
    match BUNDLED.iter().find(|(n, _)| *n == name) {
        Some((_, text)) => Ok(LoadedPreset {
            preset: parse(text, &format!("bundled preset {name}"))?,
            origin: Origin::Bundled,
        }),
        None => Err(PresetError::NotFound {
            name: name.to_string(),
            dir,
        }),
    }
}

/// A preset from a file path (`swarm inspect FILE`).
pub fn load_file(path: &Path) -> Result<LoadedPreset, PresetError> {
    let text = std::fs::read_to_string(path).map_err(|source| PresetError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(LoadedPreset {
        preset: parse(&text, &path.display().to_string())?,
        origin: Origin::File(path.to_path_buf()),
    })
}

/// `NAME` or a path: anything with a `/` or ending in `.yaml`/`.yml` that
/// exists is read as a file.
pub fn load_name_or_file(config_dir: &Path, arg: &str) -> Result<LoadedPreset, PresetError> {
    let path = Path::new(arg);
    let looks_like_file = arg.contains('/') || arg.ends_with(".yaml") || arg.ends_with(".yml");
    if looks_like_file && path.is_file() {
        return load_file(path);
    }
    load(config_dir, arg)
}

/// Every preset by name, user files overriding bundled ones, sorted by
/// name. Unreadable user files are returned as errors beside the list.
pub fn list(config_dir: &Path) -> (Vec<LoadedPreset>, Vec<PresetError>) {
    let mut out: Vec<LoadedPreset> = Vec::new();
    let mut errors = Vec::new();
    for (name, text) in BUNDLED {
        match parse(text, &format!("bundled preset {name}")) {
            Ok(preset) => out.push(LoadedPreset {
                preset,
                origin: Origin::Bundled,
            }),
            Err(e) => errors.push(e),
        }
    }
    let mut user: Vec<PathBuf> = std::fs::read_dir(user_dir(config_dir))
        .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    user.sort();
    for path in user {
        let Some(stem) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".yaml"))
        else {
            continue;
        };
        if !valid_name(stem) {
            continue;
        }
        match load(config_dir, stem) {
            Ok(loaded) => {
                out.retain(|p| p.preset.name != loaded.preset.name && !same_file_name(p, stem));
                out.push(loaded);
            }
            Err(e) => errors.push(e),
        }
    }
    out.sort_by(|a, b| a.preset.name.cmp(&b.preset.name));
    (out, errors)
}

/// A bundled preset is looked up by its table name, which is its file name.
fn same_file_name(p: &LoadedPreset, stem: &str) -> bool {
    p.origin == Origin::Bundled && BUNDLED.iter().any(|(n, _)| *n == stem) && p.preset.name == stem
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEAM: &str = "name: t\ntitle: T\ndescription: d\nagents:\n  - id: a\n    role: R\n    system_prompt: hi\n    tools: [bash]\ntasks:\n  - id: one\n    agent_id: a\n    prompt_template: \"do {target}\"\n  - id: two\n    agent_id: a\n    prompt_template: x\n    depends_on: [one]\n    input_from:\n      z_first: one\n      a_second: one\nvariables:\n  - name: target\n    required: true\n";

    #[test]
    fn ids_keep_their_lines_and_defaults_apply() {
        let p = parse(TEAM, "t").unwrap();
        assert_eq!(p.agents[0].id.line, 5);
        assert_eq!(p.agents[0].tools[0].line, 8);
        assert_eq!(p.agents[0].max_iterations, 25);
        assert_eq!(p.agents[0].timeout_seconds, 300);
        assert_eq!(p.agents[0].max_retries, 2);
        assert_eq!(p.agents[0].budget_seconds(), 900);
        assert_eq!(p.tasks[1].id.line, 13);
        assert_eq!(p.tasks[1].depends_on[0].line, 16);
        // input_from keeps the file's order, not alphabetical.
        let keys: Vec<&str> = p.tasks[1]
            .input_from
            .0
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(keys, ["z_first", "a_second"]);
        assert_eq!(p.tasks[1].input_from.0[0].1.line, 18);
        assert_eq!(p.variables[0].name.value, "target");
    }

    #[test]
    fn names_are_one_segment_and_user_files_win() {
        for bad in ["../x", "a/b", "", ".hidden", "a b"] {
            assert!(!valid_name(bad), "{bad:?}");
            assert!(matches!(
                load(Path::new("/nonexistent"), bad),
                Err(PresetError::BadName(_))
            ));
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(user_dir(dir.path())).unwrap();
        std::fs::write(user_dir(dir.path()).join("t.yaml"), TEAM).unwrap();
        let loaded = load(dir.path(), "t").unwrap();
        assert!(matches!(loaded.origin, Origin::User(_)));
        let (all, errors) = list(dir.path());
        assert!(errors.is_empty());
        assert_eq!(all.iter().filter(|p| p.preset.name == "t").count(), 1);
        assert!(matches!(
            load(dir.path(), "missing"),
            Err(PresetError::NotFound { .. })
        ));
    }

    #[test]
    fn a_yaml_error_names_the_origin() {
        let e = parse("name: [", "bad.yaml").unwrap_err().to_string();
        assert!(e.starts_with("bad.yaml: "), "{e}");
    }
}
