//! The sweep spec (docs §18.1), JSON or TOML with the same keys:
//!
//! ```json
//! {"base": {"codes": ["AAPL"], "start_date": "2005-01-01", "end_date": "2013-12-31",
//!           "strategy": {"name": "sma_crossover", "params": {"fast": 20, "slow": 50}}},
//!  "axes": {"strategy.params.fast": [5, 10, 20],
//!           "strategy.params.slow": {"from": 30, "to": 60, "step": 10}},
//!  "constraint": "fast < slow",
//!  "universe": ["AAPL", "MSFT"],
//!  "split": {"in_sample": ["2005-01-01", "2010-12-31"],
//!            "out_of_sample": ["2011-01-01", "2013-12-31"]},
//!  "rank_by": "sharpe"}
//! ```
//!
//! An axis is a dotted path into `base` whose values are a list, a range
//! (`from`, `to`, `step`) or seeded random draws (`from`, `to`, `random`:
//! how many, `seed`); `constraint` compares axes by their last path segment;
//! `universe` is a list of symbols (each run alone), `"all"` (the offline
//! set's symbols with bars in every window, each alone) or `"portfolio"`
//! (`base.codes` together); `split` is
//! in/out-of-sample dates or walk-forward windows. Every problem is
//! reported at once, each naming its key.

use std::fmt;

use chrono::{Months, NaiveDate};
use serde_json::{Map, Value};

use crate::research::backtest::config::SUPPORTED_KEYS;
use crate::research::seeded::SplitMix64;

/// One thing wrong with a spec: its key and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecIssue {
    pub key: String,
    pub message: String,
}

/// Every problem found in a spec.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct SpecError {
    pub issues: Vec<SpecIssue>,
}

impl SpecError {
    pub fn one(key: impl Into<String>, message: impl Into<String>) -> Self {
        SpecError {
            issues: vec![SpecIssue {
                key: key.into(),
                message: message.into(),
            }],
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.issues.as_slice() {
            [one] => write!(f, "sweep spec: `{}`: {}", one.key, one.message),
            many => {
                write!(f, "sweep spec has {} problems:", many.len())?;
                for (i, x) in many.iter().enumerate() {
                    write!(f, " {}) `{}`: {}", i + 1, x.key, x.message)?;
                }
                Ok(())
            }
        }
    }
}

/// A parameter axis: a path into `base` and its values in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub path: String,
    /// The last path segment: the results column and the constraint's name.
    pub name: String,
    pub values: Vec<Value>,
}

/// A comparison operator of a constraint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// One side of a comparison: an axis (by index) or a number.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    Axis(usize),
    Number(f64),
}

/// `left op right`; the constraint holds when every comparison does.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub left: Operand,
    pub op: Op,
    pub right: Operand,
}

impl Comparison {
    /// Whether the comparison holds for a combination (values by axis).
    /// Non-numbers compare equal or not only.
    pub fn holds(&self, combo: &[Value]) -> bool {
        let side = |o: &Operand| match o {
            Operand::Axis(i) => combo.get(*i).cloned().unwrap_or(Value::Null),
            Operand::Number(x) => serde_json::json!(x),
        };
        let (l, r) = (side(&self.left), side(&self.right));
        match (l.as_f64(), r.as_f64()) {
            (Some(a), Some(b)) => match self.op {
                Op::Lt => a < b,
                Op::Le => a <= b,
                Op::Gt => a > b,
                Op::Ge => a >= b,
                Op::Eq => a == b,
                Op::Ne => a != b,
            },
            _ => match self.op {
                Op::Eq => l == r,
                Op::Ne => l != r,
                _ => false,
            },
        }
    }
}

/// Who a cell trades.
#[derive(Clone, Debug, PartialEq)]
pub enum Universe {
    /// Each symbol alone.
    Symbols(Vec<String>),
    /// `base.codes` together.
    Portfolio,
}

/// A date range (both ends inclusive) with its results name.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Window {
    pub name: String,
    pub start: NaiveDate,
    pub end: NaiveDate,
}

impl Window {
    /// Out-of-sample windows: what the report ranks by (docs §18.4).
    pub fn is_out_of_sample(&self) -> bool {
        self.name == "out_of_sample" || self.name.ends_with("_test")
    }
}

/// The metrics a sweep can rank by; higher is better for each (the max
/// drawdown is negative).
pub const METRICS: [&str; 5] = [
    "sharpe",
    "total_return",
    "final_value",
    "max_drawdown",
    "trade_count",
];

/// A parsed, checked spec.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// The spec as given (JSON form): what the plan keeps and hashes.
    pub source: Value,
    pub base: Map<String, Value>,
    pub axes: Vec<Axis>,
    pub constraints: Vec<Comparison>,
    pub constraint_text: Option<String>,
    pub universe: Universe,
    pub windows: Vec<Window>,
    pub rank_by: String,
    /// The two axes of the heatmap (by name); default the first two.
    pub heatmap: Option<(String, String)>,
    /// A purged k-fold or CPCV split (docs §18.9): its pieces are `windows`.
    pub cv: Option<super::cv::CvLayout>,
}

/// Keys of the spec.
pub const SPEC_KEYS: [&str; 7] = [
    "base",
    "axes",
    "constraint",
    "universe",
    "split",
    "rank_by",
    "heatmap",
];

/// Results columns an axis name may not take.
const RESERVED: [&str; 7] = [
    "symbol",
    "window",
    "final_value",
    "total_return",
    "sharpe",
    "max_drawdown",
    "trade_count",
];

/// The most values one axis may expand to, and combinations in a grid.
pub const MAX_AXIS_VALUES: usize = 100_000;
pub const MAX_COMBOS: usize = 10_000_000;
/// The most cells (parameter sets × units) a plan may have.
pub const MAX_CELLS: usize = 10_000_000;
/// The most symbols `universe` may list.
pub const MAX_UNIVERSE: usize = 10_000;
/// The largest spec file read (a list axis of 10⁵ values is about 1 MB).
pub const MAX_SPEC_BYTES: u64 = 16 << 20;

/// What is wrong with one axis: the message of its `axes.PATH` issue.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AxisError {
    #[error("is not a dotted path: write e.g. `strategy.params.fast`")]
    NotDotted,
    #[error("`codes` is set by `universe`; sweep symbols with `universe`")]
    SetByUniverse,
    #[error("the dates are set by `split` (or `base`); sweep periods with `split`")]
    SetBySplit,
    #[error(
        "unknown path: `{key}` is not a backtest config key; {hint}an axis is a dotted path into `base` such as `strategy.params.fast` or `commission_rate`"
    )]
    UnknownKey { key: String, hint: String },
    #[error("values must be numbers, strings or booleans, got {0}")]
    NotAScalar(Value),
    #[error(
        "unknown key `{0}`: a range is {{\"from\", \"to\", \"step\"}}, random draws {{\"from\", \"to\", \"random\": COUNT, \"seed\"}}"
    )]
    UnknownRangeKey(String),
    #[error("`{0}` must be a number")]
    NotANumber(&'static str),
    #[error("`from` ({from}) is above `to` ({to})")]
    FromAboveTo { from: f64, to: f64 },
    #[error(
        "must be a list of values, a range {{\"from\", \"to\", \"step\"}} or random draws {{\"from\", \"to\", \"random\", \"seed\"}}, got {0}"
    )]
    Shape(Value),
    #[error("`step` must be above 0, got {0}")]
    Step(f64),
    #[error("expands to {0} values, more than {MAX_AXIS_VALUES}: use a larger step")]
    TooManyValues(f64),
    #[error("`random` must be a count of draws from 1 to {MAX_AXIS_VALUES}")]
    DrawCount,
    #[error("`seed` must be a non-negative integer")]
    Seed,
}

/// What is wrong with one comparison of `constraint`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintError {
    #[error(
        "'{0}' has no comparison: write e.g. \"fast < slow\" (<, <=, >, >=, ==, !=, joined by `and`)"
    )]
    NoComparison(String),
    #[error(
        "'{text}': `{operand}` is neither an axis nor a number; {hint}axes are named by their last segment: {axes}"
    )]
    UnknownOperand {
        text: String,
        operand: String,
        hint: String,
        axes: String,
    },
    #[error("'{0}' compares no axis")]
    NoAxis(String),
}

/// [`set_path`] met a segment of `base` that is not an object.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown path: `{walked}` in base is {kind}, not an object")]
pub struct PathError {
    /// The path up to and including that segment.
    pub walked: String,
    /// What it is instead (`a number`, ...).
    pub kind: &'static str,
}

struct Issues(Vec<SpecIssue>);

impl Issues {
    fn push(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.0.push(SpecIssue {
            key: key.into(),
            message: message.into(),
        });
    }
}

impl Spec {
    /// Parses spec text: TOML when `toml` is set (a `.toml` file), JSON
    /// otherwise.
    pub fn parse(text: &str, toml: bool) -> Result<Spec, SpecError> {
        let value: Value = if toml {
            toml::from_str(text).map_err(|e| {
                SpecError::one("(file)", format!("is not valid TOML: {}", e.message()))
            })?
        } else {
            serde_json::from_str(text)
                .map_err(|e| SpecError::one("(file)", format!("is not valid JSON: {e}")))?
        };
        Spec::from_value(value)
    }

    /// The most cells the spec can plan: every combination of its axes
    /// (the constraint not applied) times its units; known before the plan
    /// expands anything.
    pub fn max_cells(&self) -> usize {
        let units = match &self.universe {
            Universe::Symbols(list) => list.len(),
            Universe::Portfolio => 1,
        };
        self.axes
            .iter()
            .fold(units, |acc, a| acc.saturating_mul(a.values.len()))
    }

    /// Fills `base` keys the spec leaves out (or null) from the user's
    /// `[backtest]` defaults (costs, lots, benchmark, cash: docs §7.4), as
    /// the `backtest` tool does, so a cell equals the same config run alone
    /// through it. Keys an axis sweeps are left to the axis. Returns the
    /// keys filled, for the run to say.
    pub fn fill_defaults(&mut self, defaults: &Map<String, Value>) -> Vec<String> {
        let swept = |k: &str| {
            self.axes
                .iter()
                .any(|a| a.path.split('.').next() == Some(k))
        };
        let filled: Vec<(String, Value)> = defaults
            .iter()
            .filter(|(k, _)| self.base.get(*k).is_none_or(Value::is_null) && !swept(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let keys = filled.iter().map(|(k, _)| k.clone()).collect();
        self.base.extend(filled);
        keys
    }

    /// Reads a spec file (`.toml` by extension, else JSON).
    pub fn load(path: &std::path::Path) -> Result<Spec, SpecError> {
        // Read with a cap: `--spec /dev/zero` is refused, not read forever.
        let bytes = crate::fsio::read_capped(path, MAX_SPEC_BYTES).map_err(|e| {
            SpecError::one("(file)", format!("cannot read {}: {e}", path.display()))
        })?;
        let text = String::from_utf8(bytes).map_err(|_| {
            SpecError::one("(file)", format!("{} is not UTF-8 text", path.display()))
        })?;
        let toml = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
        Spec::parse(&text, toml)
    }

    /// Checks a spec given as a JSON value.
    pub fn from_value(value: Value) -> Result<Spec, SpecError> {
        let Some(obj) = value.as_object() else {
            return Err(SpecError::one(
                "(spec)",
                "must be an object with `base`, `axes` and optionally `constraint`, `universe`, `split`, `rank_by`",
            ));
        };
        // The size first, from the axes' lengths and the universe's, before
        // a value is expanded (docs §18.2): a grid too large is refused
        // without the memory it would take.
        bound(obj)?;
        let mut issues = Issues(Vec::new());
        for k in obj.keys() {
            if !SPEC_KEYS.contains(&k.as_str()) {
                let hint = crate::text::suggest(k, &SPEC_KEYS)
                    .map(|s| format!("did you mean `{s}`? "))
                    .unwrap_or_default();
                issues.push(
                    k.as_str(),
                    format!("unknown key; {hint}the keys are {}", SPEC_KEYS.join(", ")),
                );
            }
        }
        let base = match obj.get("base") {
            Some(Value::Object(m)) => m.clone(),
            Some(other) => {
                issues.push(
                    "base",
                    format!(
                        "must be a backtest config object (docs §7.1), got {}",
                        crate::research::backtest::config::kind(other)
                    ),
                );
                Map::new()
            }
            None => {
                issues.push("base", "is required: the backtest config every cell starts from, e.g. {\"codes\": [\"AAPL\"], \"start_date\": \"2005-01-01\", \"end_date\": \"2013-12-31\", \"strategy\": {\"name\": \"sma_crossover\"}}");
                Map::new()
            }
        };
        let axes = parse_axes(obj.get("axes"), &mut issues);
        let (constraints, constraint_text) =
            parse_constraint(obj.get("constraint"), &axes, &mut issues);
        let universe = parse_universe(obj.get("universe"), &base, &mut issues);
        let (windows, cv) = parse_split(obj.get("split"), &base, &mut issues);
        let universe = match universe {
            // The offline set's symbols with bars in every window (a CV
            // split's pieces are slices of its first, whole-range window).
            Universe::Symbols(list) if obj.get("universe") == Some(&Value::from("all")) => {
                let span = if cv.is_some() {
                    windows.get(..1).unwrap_or(&[])
                } else {
                    &windows
                };
                Universe::Symbols(offline_in(list, span, &mut issues))
            }
            u => u,
        };
        let rank_by = parse_rank_by(obj.get("rank_by"), &mut issues);
        if cv.is_some() && rank_by != "sharpe" {
            issues.push(
                "rank_by",
                format!("a purged k-fold or CPCV split ranks by the out-of-sample Sharpe of its folds or paths; `{rank_by}` is not offered there"),
            );
        }
        let heatmap = parse_heatmap(obj.get("heatmap"), &axes, &mut issues);
        if !issues.0.is_empty() {
            return Err(SpecError { issues: issues.0 });
        }
        Ok(Spec {
            source: value,
            base,
            axes,
            constraints,
            constraint_text,
            universe,
            windows,
            rank_by,
            heatmap,
            cv,
        })
    }
}

/// How many values an axis expands to, read from its shape alone (a list's
/// length, a range's count, the number of draws); `None` when the shape is
/// wrong, which [`axis_values`] then reports.
fn axis_len(spec: &Value) -> Option<u64> {
    match spec {
        Value::Array(list) => Some(list.len() as u64),
        Value::Object(m) if m.contains_key("random") => m.get("random").and_then(Value::as_u64),
        Value::Object(m) => {
            let num = |k: &str| m.get(k).and_then(Value::as_f64);
            let (a, b, s) = (num("from")?, num("to")?, num("step")?);
            let count = ((b - a) / s + 1e-9).floor() + 1.0;
            // A saturating cast: an infinite count is u64::MAX.
            (s > 0.0 && count >= 1.0).then_some(count as u64)
        }
        _ => None,
    }
}

/// Refuses a spec whose grid is too large, counting from the shapes before
/// anything is expanded: the product of the axes' lengths (every
/// combination, the constraint not applied: it can only remove some) and
/// that times the units (the universe's symbols, or one portfolio).
fn bound(obj: &Map<String, Value>) -> Result<(), SpecError> {
    let lens: Vec<(String, u64)> = obj
        .get("axes")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(path, v)| axis_len(v).map(|n| (path.clone(), n)))
                .collect()
        })
        .unwrap_or_default();
    let product = lens
        .iter()
        .try_fold(1u64, |acc, (_, n)| acc.checked_mul(*n));
    let shown = || {
        lens.iter()
            .map(|(p, n)| format!("{p}: {n}"))
            .collect::<Vec<_>>()
            .join(" × ")
    };
    let combos = match product {
        Some(n) if n <= MAX_COMBOS as u64 => n,
        _ => {
            return Err(SpecError::one(
                "axes",
                format!(
                    "make {} parameter sets before the constraint ({}), more than {MAX_COMBOS} parameter sets: sweep fewer values",
                    product.map_or("over 2^64".to_string(), |n| n.to_string()),
                    shown()
                ),
            ));
        }
    };
    let units = match obj.get("universe") {
        Some(Value::Array(list)) => list.len() as u64,
        Some(Value::String(s)) if s == "all" => {
            crate::research::data::embedded::symbols().len() as u64
        }
        _ => 1,
    };
    if units > MAX_UNIVERSE as u64 {
        return Err(SpecError::one(
            "universe",
            format!("lists {units} symbols, more than {MAX_UNIVERSE}: sweep fewer symbols"),
        ));
    }
    let cells = combos.saturating_mul(units.max(1));
    if cells > MAX_CELLS as u64 {
        return Err(SpecError::one(
            "axes",
            format!(
                "{combos} parameter sets × {units} symbols make {cells} cells before the constraint, more than {MAX_CELLS}: sweep fewer values or symbols"
            ),
        ));
    }
    Ok(())
}

fn parse_axes(v: Option<&Value>, issues: &mut Issues) -> Vec<Axis> {
    let Some(v) = v else {
        issues.push(
            "axes",
            "is required: paths into `base` with their values, e.g. {\"strategy.params.fast\": [5, 10, 20]}",
        );
        return Vec::new();
    };
    let Some(obj) = v.as_object() else {
        issues.push(
            "axes",
            "must be an object of dotted paths to values, e.g. {\"strategy.params.fast\": [5, 10, 20]}",
        );
        return Vec::new();
    };
    if obj.is_empty() {
        issues.push(
            "axes",
            "is empty: the grid needs at least one axis, e.g. {\"strategy.params.fast\": [5, 10, 20]}",
        );
    }
    let mut axes: Vec<Axis> = Vec::new();
    for (path, spec) in obj {
        let key = format!("axes.{path}");
        if let Err(why) = check_path(path) {
            issues.push(key.clone(), why.to_string());
            continue;
        }
        let name = path.rsplit('.').next().unwrap_or(path).to_string();
        if RESERVED.contains(&name.as_str()) {
            issues.push(
                key.clone(),
                format!("its last segment `{name}` is a results column; sweep a path that ends otherwise"),
            );
        }
        if let Some(other) = axes.iter().find(|a| a.name == name) {
            issues.push(
                key.clone(),
                format!(
                    "shares its last segment `{name}` with `{}`: columns and constraints name axes by it, so each must differ",
                    other.path
                ),
            );
        }
        match axis_values(spec) {
            Ok(values) if values.is_empty() => issues.push(key, "has no values: list at least one"),
            Ok(values) => axes.push(Axis {
                path: path.clone(),
                name,
                values,
            }),
            Err(why) => issues.push(key, why.to_string()),
        }
    }
    axes
}

/// An axis path must start at a config key (docs §7.1) that the sweep does
/// not set itself.
fn check_path(path: &str) -> Result<(), AxisError> {
    let first = path.split('.').next().unwrap_or("");
    if path.split('.').any(str::is_empty) {
        return Err(AxisError::NotDotted);
    }
    match first {
        "codes" => Err(AxisError::SetByUniverse),
        "start_date" | "end_date" => Err(AxisError::SetBySplit),
        k if SUPPORTED_KEYS.contains(&k) => Ok(()),
        k => Err(AxisError::UnknownKey {
            key: k.to_string(),
            hint: crate::text::suggest(k, SUPPORTED_KEYS)
                .map(|s| format!("did you mean `{s}`? "))
                .unwrap_or_default(),
        }),
    }
}

fn axis_values(spec: &Value) -> Result<Vec<Value>, AxisError> {
    match spec {
        Value::Array(list) => {
            if let Some(bad) = list.iter().find(|v| v.is_array() || v.is_object()) {
                return Err(AxisError::NotAScalar(bad.clone()));
            }
            Ok(list.clone())
        }
        Value::Object(m) => {
            for k in m.keys() {
                if !["from", "to", "step", "random", "seed"].contains(&k.as_str()) {
                    return Err(AxisError::UnknownRangeKey(k.clone()));
                }
            }
            let num = |k: &'static str| -> Result<&serde_json::Number, AxisError> {
                match m.get(k) {
                    Some(Value::Number(n)) => Ok(n),
                    _ => Err(AxisError::NotANumber(k)),
                }
            };
            let (from, to) = (num("from")?, num("to")?);
            let integer = from.is_i64() && to.is_i64();
            let (a, b) = (from.as_f64().unwrap_or(0.0), to.as_f64().unwrap_or(0.0));
            if a > b {
                return Err(AxisError::FromAboveTo { from: a, to: b });
            }
            if m.contains_key("random") {
                return random_values(m, a, b, integer);
            }
            let step = num("step")?;
            range_values(a, b, step, integer && step.is_i64())
        }
        other => Err(AxisError::Shape(other.clone())),
    }
}

fn range_values(
    a: f64,
    b: f64,
    step: &serde_json::Number,
    integer: bool,
) -> Result<Vec<Value>, AxisError> {
    let s = step.as_f64().unwrap_or(0.0);
    if !(s > 0.0 && s.is_finite()) {
        return Err(AxisError::Step(s));
    }
    let count = ((b - a) / s + 1e-9).floor() + 1.0;
    if count > MAX_AXIS_VALUES as f64 {
        return Err(AxisError::TooManyValues(count));
    }
    let count = count as usize;
    Ok((0..count)
        .map(|k| {
            if integer {
                serde_json::json!(a as i64 + k as i64 * step.as_i64().unwrap_or(1))
            } else {
                // From `from` each time (no drift from repeated adds),
                // rounded to 12 decimals so 0.1 steps read as written.
                serde_json::json!(round12(a + k as f64 * s))
            }
        })
        .collect())
}

fn round12(x: f64) -> f64 {
    let r = (x * 1e12).round() / 1e12;
    if r.is_finite() { r } else { x }
}

fn random_values(
    m: &Map<String, Value>,
    a: f64,
    b: f64,
    integer: bool,
) -> Result<Vec<Value>, AxisError> {
    let count = m
        .get("random")
        .and_then(Value::as_u64)
        .filter(|n| *n >= 1 && *n <= MAX_AXIS_VALUES as u64)
        .ok_or(AxisError::DrawCount)?;
    let seed = match m.get("seed") {
        None => 42,
        Some(v) => v.as_u64().ok_or(AxisError::Seed)?,
    };
    let mut rng = SplitMix64::new(seed);
    let mut out: Vec<Value> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..count {
        let u = rng.uniform();
        let v = if integer {
            let span = (b - a) as u64 + 1;
            serde_json::json!(a as i64 + (u * span as f64).floor().min((span - 1) as f64) as i64)
        } else {
            serde_json::json!(round12(a + u * (b - a)))
        };
        // Draws are kept in order; a repeated integer is one value.
        if seen.insert(v.to_string()) {
            out.push(v);
        }
    }
    Ok(out)
}

fn parse_constraint(
    v: Option<&Value>,
    axes: &[Axis],
    issues: &mut Issues,
) -> (Vec<Comparison>, Option<String>) {
    let texts: Vec<String> = match v {
        None | Some(Value::Null) => return (Vec::new(), None),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(list)) if list.iter().all(Value::is_string) => list
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        Some(_) => {
            issues.push(
                "constraint",
                "must be a string such as \"fast < slow\" (or a list of them)",
            );
            return (Vec::new(), None);
        }
    };
    let joined = texts.join(" and ");
    let mut out = Vec::new();
    for part in joined
        .split("&&")
        .flat_map(|p| p.split(" and "))
        .map(str::trim)
    {
        match parse_comparison(part, axes) {
            Ok(c) => out.push(c),
            Err(why) => issues.push("constraint", why.to_string()),
        }
    }
    (out, Some(joined))
}

fn parse_comparison(text: &str, axes: &[Axis]) -> Result<Comparison, ConstraintError> {
    const OPS: [(&str, Op); 6] = [
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("==", Op::Eq),
        ("!=", Op::Ne),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];
    let Some((at, sym, op)) = OPS
        .iter()
        .filter_map(|(s, op)| text.find(s).map(|i| (i, *s, *op)))
        .min_by_key(|(i, s, _)| (*i, usize::MAX - s.len()))
    else {
        return Err(ConstraintError::NoComparison(text.to_string()));
    };
    let (l, r) = (text[..at].trim(), text[at + sym.len()..].trim());
    let operand = |s: &str| -> Result<Operand, ConstraintError> {
        if let Ok(x) = s.parse::<f64>() {
            return Ok(Operand::Number(x));
        }
        axes.iter()
            .position(|a| a.name == s)
            .map(Operand::Axis)
            .ok_or_else(|| {
                let names: Vec<&str> = axes.iter().map(|a| a.name.as_str()).collect();
                ConstraintError::UnknownOperand {
                    text: text.to_string(),
                    operand: s.to_string(),
                    hint: crate::text::suggest(s, &names)
                        .map(|n| format!("did you mean `{n}`? "))
                        .unwrap_or_default(),
                    axes: names.join(", "),
                }
            })
    };
    let (left, right) = (operand(l)?, operand(r)?);
    if !matches!(left, Operand::Axis(_)) && !matches!(right, Operand::Axis(_)) {
        return Err(ConstraintError::NoAxis(text.to_string()));
    }
    Ok(Comparison { left, op, right })
}

fn parse_universe(v: Option<&Value>, base: &Map<String, Value>, issues: &mut Issues) -> Universe {
    let portfolio = |issues: &mut Issues| {
        if !base.get("codes").is_some_and(Value::is_array) {
            issues.push(
                "universe",
                "\"portfolio\" runs `base.codes` together, and `base.codes` is missing",
            );
        }
        Universe::Portfolio
    };
    match v {
        None | Some(Value::Null) => portfolio(issues),
        Some(Value::String(s)) if s == "portfolio" => portfolio(issues),
        Some(Value::String(s)) if s == "all" => Universe::Symbols(
            crate::research::data::embedded::symbols()
                .iter()
                .map(|s| s.to_string())
                .collect(),
        ),
        Some(Value::Array(list)) => {
            let mut out: Vec<String> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for (i, item) in list.iter().enumerate() {
                match item.as_str().map(str::trim) {
                    Some(s) if !s.is_empty() && seen.insert(s.to_ascii_lowercase()) => {
                        out.push(s.to_string())
                    }
                    Some(s) if !s.is_empty() => {
                        issues.push(format!("universe[{i}]"), format!("'{s}' is listed twice"))
                    }
                    _ => issues.push(
                        format!("universe[{i}]"),
                        format!("must be a symbol, got {item}"),
                    ),
                }
            }
            if out.is_empty() && list.is_empty() {
                issues.push("universe", "is empty: list at least one symbol");
            }
            Universe::Symbols(out)
        }
        Some(other) => {
            issues.push(
                "universe",
                format!("must be a list of symbols, \"all\" (the offline set) or \"portfolio\" (base.codes together), got {other}"),
            );
            Universe::Portfolio
        }
    }
}

/// The symbols of `list` the offline set has bars for in every window.
fn offline_in(list: Vec<String>, windows: &[Window], issues: &mut Issues) -> Vec<String> {
    let kept: Vec<String> = list
        .into_iter()
        .filter(|s| {
            let cover = crate::research::data::embedded::coverage(s).ok().flatten();
            cover.is_some_and(|(a, b)| windows.iter().all(|w| a <= w.end && w.start <= b))
        })
        .collect();
    if kept.is_empty() && !windows.is_empty() {
        issues.push(
            "universe",
            "\"all\": no symbol of the offline set has bars in every window (it covers 2000 to 2017)",
        );
    }
    kept
}

fn date_of(v: Option<&Value>, key: &str, issues: &mut Issues) -> Option<NaiveDate> {
    let s = v.and_then(Value::as_str);
    match s.map(|s| crate::research::data::parse_date("date", s)) {
        Some(Ok(d)) => Some(d),
        _ => {
            issues.push(
                key,
                format!(
                    "must be a date YYYY-MM-DD, got {}",
                    v.map_or("nothing".into(), Value::to_string)
                ),
            );
            None
        }
    }
}

fn date_pair(v: Option<&Value>, key: &str, issues: &mut Issues) -> Option<(NaiveDate, NaiveDate)> {
    let Some(Value::Array(list)) = v else {
        issues.push(
            key,
            "must be [start, end], e.g. [\"2005-01-01\", \"2010-12-31\"]",
        );
        return None;
    };
    if list.len() != 2 {
        issues.push(key, "must be [start, end], two dates");
        return None;
    }
    let a = date_of(list.first(), &format!("{key}[0]"), issues)?;
    let b = date_of(list.get(1), &format!("{key}[1]"), issues)?;
    if a > b {
        issues.push(key, format!("starts ({a}) after it ends ({b})"));
        return None;
    }
    Some((a, b))
}

/// The windows a split makes, and a purged k-fold or CPCV's layout.
fn parse_split(
    v: Option<&Value>,
    base: &Map<String, Value>,
    issues: &mut Issues,
) -> (Vec<Window>, Option<super::cv::CvLayout>) {
    const KINDS: [&str; 2] = ["purged_kfold", "cpcv"];
    if let Some(Value::Object(m)) = v
        && let Some(kind) = KINDS.iter().find(|k| m.contains_key(**k))
    {
        if m.len() > 1 {
            issues.push(
                "split",
                format!("`{kind}` stands alone: give no other key beside it"),
            );
            return (Vec::new(), None);
        }
        let Some(range) = split_range(base, issues) else {
            return (Vec::new(), None);
        };
        return match super::cv::parse(kind, m.get(*kind).unwrap_or(&Value::Null), range) {
            Ok((pieces, layout)) => (
                pieces
                    .into_iter()
                    .map(|p| Window {
                        name: p.name,
                        start: p.start,
                        end: p.end,
                    })
                    .collect(),
                Some(layout),
            ),
            Err(found) => {
                for (k, msg) in found {
                    issues.push(k, msg);
                }
                (Vec::new(), None)
            }
        };
    }
    (parse_dated_split(v, base, issues), None)
}

/// `base`'s date range, checked.
fn split_range(base: &Map<String, Value>, issues: &mut Issues) -> Option<(NaiveDate, NaiveDate)> {
    let a = date_of(base.get("start_date"), "base.start_date", issues)?;
    let b = date_of(base.get("end_date"), "base.end_date", issues)?;
    if a > b {
        issues.push("base.start_date", format!("{a} is after base.end_date {b}"));
        return None;
    }
    Some((a, b))
}

fn parse_dated_split(
    v: Option<&Value>,
    base: &Map<String, Value>,
    issues: &mut Issues,
) -> Vec<Window> {
    let base_range = |issues: &mut Issues| -> Option<(NaiveDate, NaiveDate)> {
        let a = date_of(base.get("start_date"), "base.start_date", issues)?;
        let b = date_of(base.get("end_date"), "base.end_date", issues)?;
        if a > b {
            issues.push("base.start_date", format!("{a} is after base.end_date {b}"));
            return None;
        }
        Some((a, b))
    };
    let window = |name: &str, (start, end): (NaiveDate, NaiveDate)| Window {
        name: name.to_string(),
        start,
        end,
    };
    let obj = match v {
        None | Some(Value::Null) => {
            return base_range(issues)
                .map(|r| vec![window("full", r)])
                .unwrap_or_default();
        }
        Some(Value::Object(m)) => m,
        Some(_) => {
            issues.push("split", "must be {\"in_sample\": [start, end], \"out_of_sample\": [start, end]} or {\"walk_forward\": {\"train_months\": 36, \"test_months\": 12}}");
            return Vec::new();
        }
    };
    for k in obj.keys() {
        if !["in_sample", "out_of_sample", "walk_forward"].contains(&k.as_str()) {
            issues.push(
                format!("split.{k}"),
                "unknown key; the keys are in_sample, out_of_sample (together), walk_forward, purged_kfold or cpcv",
            );
        }
    }
    if let Some(wf) = obj.get("walk_forward") {
        if obj.contains_key("in_sample") || obj.contains_key("out_of_sample") {
            issues.push(
                "split",
                "give either in_sample/out_of_sample or walk_forward, not both",
            );
            return Vec::new();
        }
        let Some(range) = base_range(issues) else {
            return Vec::new();
        };
        return walk_forward(wf, range, issues);
    }
    let is = date_pair(obj.get("in_sample"), "split.in_sample", issues);
    let oos = date_pair(obj.get("out_of_sample"), "split.out_of_sample", issues);
    match (is, oos) {
        (Some(is), Some(oos)) => {
            if oos.0 <= is.1 {
                issues.push(
                    "split.out_of_sample",
                    format!("starts {} but in_sample ends {}: the out-of-sample period must begin after the in-sample one", oos.0, is.1),
                );
            }
            vec![window("in_sample", is), window("out_of_sample", oos)]
        }
        _ => Vec::new(),
    }
}

/// Rolling (or anchored) train/test windows over `base`'s range, each test
/// window right after its train window, the next one `test_months` later.
fn walk_forward(
    v: &Value,
    (start, end): (NaiveDate, NaiveDate),
    issues: &mut Issues,
) -> Vec<Window> {
    let Some(m) = v.as_object() else {
        issues.push(
            "split.walk_forward",
            "must be {\"train_months\": 36, \"test_months\": 12, \"anchored\": false}",
        );
        return Vec::new();
    };
    for k in m.keys() {
        if !["train_months", "test_months", "anchored"].contains(&k.as_str()) {
            issues.push(
                format!("split.walk_forward.{k}"),
                "unknown key; the keys are train_months, test_months, anchored",
            );
        }
    }
    let months = |k: &str, issues: &mut Issues| match m.get(k).and_then(Value::as_u64) {
        Some(n) if (1..=600).contains(&n) => Some(n as u32),
        _ => {
            issues.push(
                format!("split.walk_forward.{k}"),
                "must be a whole number of months from 1 to 600",
            );
            None
        }
    };
    let (Some(train), Some(test)) = (
        months("train_months", issues),
        months("test_months", issues),
    ) else {
        return Vec::new();
    };
    let anchored = m.get("anchored").and_then(Value::as_bool).unwrap_or(false);
    let day = chrono::Days::new(1);
    let mut out = Vec::new();
    for k in 0u32.. {
        let shift = Months::new(k * test);
        let train_start = if anchored {
            Some(start)
        } else {
            start.checked_add_months(shift)
        };
        let test_start = start
            .checked_add_months(Months::new(train))
            .and_then(|d| d.checked_add_months(shift));
        let test_end = test_start
            .and_then(|d| d.checked_add_months(Months::new(test)))
            .and_then(|d| d.checked_sub_days(day));
        let (Some(ts), Some(te), Some(xs)) = (train_start, test_end, test_start) else {
            break;
        };
        if te > end {
            break;
        }
        let train_end = xs.checked_sub_days(day).unwrap_or(xs);
        out.push(Window {
            name: format!("wf_{}_train", k + 1),
            start: ts,
            end: train_end,
        });
        out.push(Window {
            name: format!("wf_{}_test", k + 1),
            start: xs,
            end: te,
        });
    }
    if out.is_empty() {
        issues.push(
            "split.walk_forward",
            format!("no window fits between base.start_date {start} and base.end_date {end}: train_months + test_months must fit in the range"),
        );
    }
    out
}

fn parse_rank_by(v: Option<&Value>, issues: &mut Issues) -> String {
    match v {
        None | Some(Value::Null) => "sharpe".into(),
        Some(Value::String(s)) if METRICS.contains(&s.as_str()) => s.clone(),
        Some(other) => {
            let hint = other
                .as_str()
                .and_then(|s| crate::text::suggest(s, &METRICS))
                .map(|s| format!("did you mean `{s}`? "))
                .unwrap_or_default();
            issues.push(
                "rank_by",
                format!(
                    "unknown metric {other}; {hint}one of {}",
                    METRICS.join(", ")
                ),
            );
            "sharpe".into()
        }
    }
}

fn parse_heatmap(
    v: Option<&Value>,
    axes: &[Axis],
    issues: &mut Issues,
) -> Option<(String, String)> {
    let v = v?;
    let names: Vec<&str> = match v.as_array() {
        Some(list) if list.len() == 2 => list.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if names.len() != 2 || names[0] == names[1] {
        issues.push(
            "heatmap",
            "must name two different axes, e.g. [\"fast\", \"slow\"]",
        );
        return None;
    }
    for n in &names {
        if !axes.iter().any(|a| a.name == *n) {
            issues.push(
                "heatmap",
                format!("`{n}` is not an axis (axes are named by their last segment)"),
            );
            return None;
        }
    }
    Some((names[0].to_string(), names[1].to_string()))
}

/// Sets `path` (dotted) in `obj` to `value`, creating objects on the way;
/// `Err` names the segment that is not an object.
pub fn set_path(obj: &mut Map<String, Value>, path: &str, value: Value) -> Result<(), PathError> {
    let mut parts = path.split('.').peekable();
    let mut cur = obj;
    let mut walked = String::new();
    while let Some(seg) = parts.next() {
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(seg);
        if parts.peek().is_none() {
            cur.insert(seg.to_string(), value);
            return Ok(());
        }
        let slot = cur
            .entry(seg.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        cur = match slot {
            Value::Object(m) => m,
            other => {
                return Err(PathError {
                    walked,
                    kind: crate::research::backtest::config::kind(other),
                });
            }
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn minimal() -> Value {
        json!({"base": {"codes": ["AAPL"], "start_date": "2005-01-01", "end_date": "2013-12-31",
                        "strategy": {"name": "sma_crossover", "params": {"fast": 20, "slow": 50}}},
               "axes": {"strategy.params.fast": [5, 10, 20], "strategy.params.slow": {"from": 30, "to": 60, "step": 10}},
               "constraint": "fast < slow", "universe": ["AAPL", "MSFT"],
               "split": {"in_sample": ["2005-01-01", "2010-12-31"], "out_of_sample": ["2011-01-01", "2013-12-31"]},
               "rank_by": "sharpe"})
    }

    #[test]
    fn backtest_defaults_fill_only_what_the_spec_leaves_out() {
        let mut v = minimal();
        v["base"]["slippage"] = json!(0.0);
        v["base"]["lot_size"] = Value::Null;
        v["axes"]["commission_rate"] = json!([0.0, 0.001]);
        let mut spec = Spec::from_value(v).unwrap();
        let defaults: Map<String, Value> = serde_json::from_value(json!({
            "slippage": 0.002, "lot_size": 100, "commission_rate": 0.0005, "benchmark": "SPY"
        }))
        .unwrap();
        let mut filled = spec.fill_defaults(&defaults);
        filled.sort();
        // The spec's own slippage stays; a null is filled; a swept key is the axis's.
        assert_eq!(filled, ["benchmark", "lot_size"]);
        assert_eq!(spec.base["slippage"], json!(0.0));
        assert_eq!(spec.base["lot_size"], json!(100));
        assert_eq!(spec.base["benchmark"], json!("SPY"));
        assert!(!spec.base.contains_key("commission_rate"));
    }

    #[test]
    fn the_minimal_form_reads_as_written() {
        let s = Spec::from_value(minimal()).unwrap();
        assert_eq!(s.axes[0].name, "fast");
        assert_eq!(
            s.axes[1].values,
            vec![json!(30), json!(40), json!(50), json!(60)]
        );
        assert_eq!(s.windows.len(), 2);
        assert_eq!(s.windows[1].name, "out_of_sample");
        assert!(s.constraints[0].holds(&[json!(5), json!(30)]));
        assert!(!s.constraints[0].holds(&[json!(30), json!(30)]));
        assert_eq!(
            s.universe,
            Universe::Symbols(vec!["AAPL".into(), "MSFT".into()])
        );
    }

    #[test]
    fn toml_and_json_read_the_same() {
        let toml_text = r#"
constraint = "fast < slow"
universe = ["AAPL", "MSFT"]
rank_by = "sharpe"
[base]
codes = ["AAPL"]
start_date = "2005-01-01"
end_date = "2013-12-31"
strategy = { name = "sma_crossover", params = { fast = 20, slow = 50 } }
[axes]
"strategy.params.fast" = [5, 10, 20]
"strategy.params.slow" = { from = 30, to = 60, step = 10 }
[split]
in_sample = ["2005-01-01", "2010-12-31"]
out_of_sample = ["2011-01-01", "2013-12-31"]
"#;
        let a = Spec::parse(toml_text, true).unwrap();
        let b = Spec::from_value(minimal()).unwrap();
        assert_eq!(
            (a.axes, a.windows, a.universe),
            (b.axes, b.windows, b.universe)
        );
    }

    /// A CPCV split's pieces tile base's weekdays after `cv_full`; no
    /// split trains on a piece of a group it tests or on one starting
    /// within the embargo after it; bad parameters name their key.
    #[test]
    fn purged_splits_make_pieces_and_name_their_errors() {
        let mut s = minimal();
        s["split"] = json!({"cpcv": {"groups": 6, "test_groups": 2, "embargo_days": 5}});
        let spec = Spec::from_value(s).unwrap();
        let cv = spec.cv.as_ref().unwrap();
        assert_eq!((cv.splits.len(), cv.paths.len()), (15, 5));
        let w = &spec.windows;
        assert_eq!(w[0].name, super::super::cv::FULL);
        let d = |t: &str| NaiveDate::parse_from_str(t, "%Y-%m-%d").unwrap();
        // 2005-01-01 is a Saturday, 2013-12-31 a Tuesday.
        assert_eq!((w[0].start, w[0].end), (d("2005-01-03"), d("2013-12-31")));
        assert_eq!((w[1].start, w.last().unwrap().end), (w[0].start, w[0].end));
        for p in w[1..].windows(2) {
            let gap = (p[1].start - p[0].end).num_days();
            assert!(gap == 1 || gap == 3, "{p:?}");
        }
        let pieces: Vec<usize> = cv.group_windows.iter().flatten().copied().collect();
        assert_eq!(pieces, (1..w.len()).collect::<Vec<_>>());
        for sp in &cv.splits {
            for &g in &sp.test_groups {
                let gw = &cv.group_windows[g];
                let end = w[*gw.last().unwrap()].end;
                for &t in &sp.train {
                    assert!(!gw.contains(&t));
                    // Five weekdays after the group's end are at most
                    // seven days later.
                    let after = (w[t].start - end).num_days();
                    assert!(after <= 0 || after > 7, "{:?} trains {t}", sp.test_groups);
                }
            }
        }
        let with_split = |split: Value, rank: &str| {
            let mut s = minimal();
            s["split"] = split;
            s["rank_by"] = json!(rank);
            Spec::from_value(s).unwrap_err().to_string()
        };
        let e = with_split(json!({"cpcv": {"groups": 6, "test_groups": 6}}), "sharpe");
        assert!(e.contains("split.cpcv") && e.contains("test groups"), "{e}");
        let e = with_split(
            json!({"cpcv": {"groups": 6, "test_groups": 2}}),
            "total_return",
        );
        assert!(e.contains("`rank_by`") && e.contains("Sharpe"), "{e}");
        let e = with_split(
            json!({"purged_kfold": {"folds": 5, "embargo": 3}}),
            "sharpe",
        );
        assert!(e.contains("split.purged_kfold.embargo"), "{e}");
        let e = with_split(json!({"purged_kfold": {"embargo_days": 3}}), "sharpe");
        assert!(e.contains("split.purged_kfold.folds"), "{e}");
        let e = with_split(json!({"cpcv": {"groups": 30, "test_groups": 10}}), "sharpe");
        assert!(e.contains("1000"), "{e}");
        let e = with_split(
            json!({"cpcv": {"groups": 4, "test_groups": 1}, "in_sample": ["2005-01-01", "2006-01-01"]}),
            "sharpe",
        );
        assert!(e.contains("stands alone"), "{e}");
        let mut s = minimal();
        s["split"] = json!({"purged_kfold": {"folds": 4}});
        let spec = Spec::from_value(s).unwrap();
        assert_eq!(spec.cv.as_ref().unwrap().paths.len(), 1);
        // Without purge or embargo, a fold is one piece.
        assert_eq!(spec.windows.len(), 5);
    }

    #[test]
    fn bad_specs_name_their_key() {
        let with = |k: &str, v: Value| {
            let mut s = minimal();
            s[k] = v;
            Spec::from_value(s).unwrap_err().to_string()
        };
        let e = with(
            "axes",
            json!({"strategy.params.fast": [5], "stratgy.x": [1]}),
        );
        assert!(
            e.contains("axes.stratgy.x") && e.contains("did you mean `strategy`"),
            "{e}"
        );
        let e = with("axes", json!({}));
        assert!(e.contains("`axes`") && e.contains("empty"), "{e}");
        let e = with("constraint", json!("fats < slow"));
        assert!(
            e.contains("`constraint`") && e.contains("did you mean `fast`"),
            "{e}"
        );
        let e = with("constraint", json!("fast slow"));
        assert!(e.contains("no comparison"), "{e}");
        let e = with("rank_by", json!("sharp"));
        assert!(e.contains("`rank_by`") && e.contains("sharpe"), "{e}");
        let e = with(
            "split",
            json!({"in_sample": ["2005-01-01", "2010-12-31"], "out_of_sample": ["2009-01-01", "2013-12-31"]}),
        );
        assert!(e.contains("split.out_of_sample"), "{e}");
        let e = with(
            "axes",
            json!({"strategy.params.slow": {"from": 30, "to": 10, "step": 10}}),
        );
        assert!(e.contains("above `to`"), "{e}");
    }

    #[test]
    fn a_grid_too_large_is_refused_from_its_shape_before_expanding() {
        let mut v = minimal();
        v["axes"] = json!({"strategy.params.fast": {"from": 1, "to": 10000, "step": 1},
                           "strategy.params.slow": {"from": 1, "to": 10000, "step": 1}});
        let e = Spec::from_value(v.clone()).unwrap_err().to_string();
        assert!(
            e.contains("100000000 parameter sets before the constraint") && e.contains("10000000"),
            "{e}"
        );
        // Symbols multiply: 10⁴ sets on 2,000 symbols is 2·10⁷ cells.
        v["axes"] = json!({"strategy.params.fast": {"from": 1, "to": 100, "step": 1},
                           "strategy.params.slow": {"from": 101, "to": 200, "step": 1}});
        v["universe"] = json!((0..2000).map(|i| format!("S{i}")).collect::<Vec<_>>());
        let e = Spec::from_value(v).unwrap_err().to_string();
        assert!(e.contains("make 20000000 cells"), "{e}");
        // A product past u64 is refused too.
        let mut v = minimal();
        v["axes"] = json!({"strategy.params.fast": {"from": 0, "to": 1e300, "step": 1e-300}});
        assert!(Spec::from_value(v).is_err());
        // 10⁵ seeded draws deduplicate without quadratic time.
        let d = axis_values(&json!({"from": 0, "to": 1000, "random": 100000})).unwrap();
        assert_eq!(d.len(), 1001);
    }

    #[test]
    fn ranges_and_draws_are_exact_and_seeded() {
        let v = axis_values(&json!({"from": 0.1, "to": 0.5, "step": 0.1})).unwrap();
        assert_eq!(
            v,
            vec![json!(0.1), json!(0.2), json!(0.3), json!(0.4), json!(0.5)]
        );
        let a = axis_values(&json!({"from": 5, "to": 50, "random": 8, "seed": 3})).unwrap();
        let b = axis_values(&json!({"from": 5, "to": 50, "random": 8, "seed": 3})).unwrap();
        let c = axis_values(&json!({"from": 5, "to": 50, "random": 8, "seed": 4})).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|x| (5..=50).contains(&x.as_i64().unwrap())));
    }

    #[test]
    fn all_is_the_offline_set_with_bars_in_every_window() {
        let mut s = minimal();
        s["universe"] = json!("all");
        let Universe::Symbols(all) = Spec::from_value(s).unwrap().universe else {
            panic!("symbols")
        };
        assert!(
            all.len() > 100 && all.iter().any(|x| x == "AAPL"),
            "{all:?}"
        );
        assert!(
            !all.iter().any(|x| x == "FB"),
            "FB listed in 2012: no bars in 2005-2010"
        );
    }

    #[test]
    fn walk_forward_windows_tile_the_range() {
        let mut s = minimal();
        s["split"] = json!({"walk_forward": {"train_months": 36, "test_months": 12}});
        let w = Spec::from_value(s).unwrap().windows;
        // 2005..2013: train 3 years then 1 test year, rolled 1 year: 6 folds.
        assert_eq!(w.len(), 12);
        assert_eq!(w[0].name, "wf_1_train");
        assert_eq!(w[1].start.to_string(), "2008-01-01");
        assert_eq!(w[1].end.to_string(), "2008-12-31");
        for pair in w.chunks(2) {
            assert!(pair[0].end < pair[1].start, "train ends before its test");
        }
        assert_eq!(w[11].end.to_string(), "2013-12-31");
    }
}
