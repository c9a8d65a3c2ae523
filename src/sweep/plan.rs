//! The plan (docs §18.2): everything a shard needs, fixed before any cell
//! runs, as deterministic JSON bytes whose sha256 names it.
//!
//! Cells are numbered `unit × combos + combo`: all parameter sets of the
//! first symbol (or the portfolio), then the next, so a shard's contiguous
//! block shares one symbol's prices and indicators. Every cell runs every
//! window, in the plan's window order.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::SweepError;
use super::spec::{Spec, Universe, Window, set_path};
use crate::research::backtest::BacktestConfig;

/// The plan format; a plan of another format is refused.
pub const FORMAT: u32 = 1;

/// Bar-simulations a second one core runs in a sweep (measured by `cargo
/// bench --bench sweep`, docs §18.6), for the estimate.
pub const BARS_PER_SECOND_PER_CORE: f64 = 35e6;

/// The largest plan file read: a plan of the most cells a spec may make
/// (docs §18.2) is well under it.
pub const MAX_PLAN_BYTES: u64 = 1 << 30;

/// An axis as the plan keeps it (its values are in the combos).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanAxis {
    pub path: String,
    pub name: String,
}

/// Who a cell trades: one symbol, or `base.codes` as "portfolio".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unit {
    /// The results' `symbol` column.
    pub label: String,
    pub codes: Vec<String>,
}

/// A fixed sweep: the spec as given, its axes expanded and constrained.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub format: u32,
    /// The spec as given (JSON form).
    pub spec: Value,
    /// `base` with the dates and codes the cells replace.
    pub base: Map<String, Value>,
    pub axes: Vec<PlanAxis>,
    /// The parameter sets that pass the constraint, values in axis order
    /// (the first axis varies slowest).
    pub combos: Vec<Vec<Value>>,
    pub units: Vec<Unit>,
    pub windows: Vec<Window>,
    pub rank_by: String,
    /// The heatmap's two axes (names).
    pub heatmap: Option<(String, String)>,
    /// A purged k-fold or CPCV split (docs §18.9); absent from the JSON of
    /// other plans, whose hashes stay as they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<super::cv::CvLayout>,
}

/// What a cell is: its parameter set and its unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CellRef {
    pub index: usize,
    pub combo: usize,
    pub unit: usize,
}

impl Plan {
    /// Expands the spec: the axes' product in order, the constraint, the
    /// universe; checks every parameter set as a backtest config (docs
    /// §7.1) so that no cell fails on its config later.
    pub fn from_spec(spec: &Spec) -> Result<Plan, SweepError> {
        let units = units_of(spec)?;
        let combos = combos_of(spec)?;
        let axes: Vec<PlanAxis> = spec
            .axes
            .iter()
            .map(|a| PlanAxis {
                path: a.path.clone(),
                name: a.name.clone(),
            })
            .collect();
        let plan = Plan {
            format: FORMAT,
            spec: spec.source.clone(),
            base: spec.base.clone(),
            axes,
            combos,
            units,
            windows: spec.windows.clone(),
            rank_by: spec.rank_by.clone(),
            heatmap: spec.heatmap.clone().or_else(|| match spec.axes.as_slice() {
                [a, b, ..] => Some((a.name.clone(), b.name.clone())),
                _ => None,
            }),
            cv: spec.cv.clone(),
        };
        plan.check_configs()?;
        Ok(plan)
    }

    /// The plan as deterministic JSON bytes (keys in a fixed order, floats
    /// in their shortest exact form).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).unwrap_or_default();
        v.push(b'\n');
        v
    }

    /// Hex sha256 of [`Plan::to_bytes`].
    pub fn hash(&self) -> String {
        let d = Sha256::digest(self.to_bytes());
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The first 16 hex digits of the hash: enough for names.
    pub fn short_hash(&self) -> String {
        self.hash().chars().take(16).collect()
    }

    pub fn cell_count(&self) -> usize {
        self.combos.len() * self.units.len()
    }

    /// Rows of the results: a cell's rows are its windows.
    pub fn row_count(&self) -> usize {
        self.cell_count() * self.windows.len()
    }

    pub fn cell(&self, index: usize) -> CellRef {
        let n = self.combos.len().max(1);
        CellRef {
            index,
            combo: index % n,
            unit: index / n,
        }
    }

    /// Seconds the plan should take on `threads` cores: its bars over
    /// every cell and window (about 252 trading days a year) at
    /// [`BARS_PER_SECOND_PER_CORE`].
    pub fn estimate_seconds(&self, threads: usize) -> f64 {
        let codes: usize = self.units.iter().map(|u| u.codes.len()).sum();
        let days: i64 = self
            .windows
            .iter()
            .map(|w| (w.end - w.start).num_days() + 1)
            .sum();
        let bars = days as f64 * 252.0 / 365.25;
        self.combos.len() as f64 * codes as f64 * bars
            / (BARS_PER_SECOND_PER_CORE * threads.max(1) as f64)
    }

    /// Writes the plan atomically.
    pub fn save(&self, path: &Path) -> Result<(), SweepError> {
        crate::fsio::write_atomic(
            path,
            &self.to_bytes(),
            crate::fsio::Durability::ProcessCrash,
        )?;
        Ok(())
    }

    /// Reads a plan written by [`Plan::save`].
    pub fn load(path: &Path) -> Result<Plan, SweepError> {
        let bytes =
            crate::fsio::read_capped(path, MAX_PLAN_BYTES).map_err(SweepError::io("read", path))?;
        let plan: Plan = serde_json::from_slice(&bytes).map_err(|e| {
            SweepError::Plan(format!(
                "{} is not a sweep plan: {e}; write one with `vibedesk sweep plan SPEC --save PLAN`",
                path.display()
            ))
        })?;
        if plan.format != FORMAT {
            return Err(SweepError::Plan(format!(
                "{} is a plan of format {}, this vibedesk reads format {FORMAT}: plan the spec again",
                path.display(),
                plan.format
            )));
        }
        Ok(plan)
    }

    /// The backtest config of a cell over a window, as JSON: `base` with
    /// the combo's values, the unit's codes and the window's dates.
    pub fn config_value(
        &self,
        combo: usize,
        unit: usize,
        window: usize,
    ) -> Result<Value, SweepError> {
        let (Some(values), Some(u), Some(w)) = (
            self.combos.get(combo),
            self.units.get(unit),
            self.windows.get(window),
        ) else {
            return Err(SweepError::Plan(format!(
                "the plan has no parameter set {combo}, unit {unit} or window {window}"
            )));
        };
        let mut m = self.base.clone();
        for (a, v) in self.axes.iter().zip(values) {
            set_path(&mut m, &a.path, v.clone())
                .map_err(|why| SweepError::Plan(format!("axes.{}: {why}", a.path)))?;
        }
        m.insert("codes".into(), serde_json::json!(u.codes));
        m.insert("start_date".into(), serde_json::json!(w.start.to_string()));
        m.insert("end_date".into(), serde_json::json!(w.end.to_string()));
        Ok(Value::Object(m))
    }

    /// The validated config of a cell over a window.
    pub fn config(
        &self,
        combo: usize,
        unit: usize,
        window: usize,
    ) -> Result<BacktestConfig, SweepError> {
        let v = self.config_value(combo, unit, window)?;
        BacktestConfig::from_value(&v, false).map_err(|e| {
            SweepError::Plan(format!(
                "the parameter set {}: {e}",
                self.describe_combo(combo)
            ))
        })
    }

    /// `fast=5 slow=30`.
    pub fn describe_combo(&self, combo: usize) -> String {
        let Some(values) = self.combos.get(combo) else {
            return String::new();
        };
        self.axes
            .iter()
            .zip(values)
            .map(|(a, v)| format!("{}={v}", a.name))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Every parameter set must be a valid config (checked on the first
    /// unit and window; codes and dates were checked with the spec).
    fn check_configs(&self) -> Result<(), SweepError> {
        for unit in 0..self.units.len() {
            // Codes are checked once each; parameter sets on the first.
            let combos = if unit == 0 { self.combos.len() } else { 1 };
            for combo in 0..combos {
                let cfg = self.config(combo, unit, 0).map_err(|e| match e {
                    SweepError::Plan(m) if self.axes.len() >= 2 => SweepError::Plan(format!(
                        "{m}; if some parameter sets are invalid by design, exclude them with `constraint`, e.g. \"{} < {}\"",
                        self.axes[0].name, self.axes[1].name
                    )),
                    e => e,
                })?;
                if matches!(
                    cfg.strategy,
                    crate::research::backtest::StrategySpec::Python
                ) {
                    return Err(SweepError::Plan(
                        "`base.strategy` is missing: a sweep runs built-in or rules strategies (code/signal_engine.py is not swept)".into(),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn units_of(spec: &Spec) -> Result<Vec<Unit>, SweepError> {
    Ok(match &spec.universe {
        Universe::Symbols(list) => list
            .iter()
            .map(|s| Unit {
                label: s.clone(),
                codes: vec![s.clone()],
            })
            .collect(),
        Universe::Portfolio => {
            let codes: Vec<String> = spec
                .base
                .get("codes")
                .and_then(Value::as_array)
                .map(|l| {
                    l.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            if codes.is_empty() {
                return Err(super::SpecError::one(
                    "universe",
                    "\"portfolio\" runs `base.codes` together: give base.codes",
                )
                .into());
            }
            vec![Unit {
                label: "portfolio".into(),
                codes,
            }]
        }
    })
}

/// The axes' product, first axis slowest, filtered by the constraint.
fn combos_of(spec: &Spec) -> Result<Vec<Vec<Value>>, SweepError> {
    let total = spec
        .axes
        .iter()
        .try_fold(1usize, |acc, a| acc.checked_mul(a.values.len()))
        .filter(|n| *n <= super::spec::MAX_COMBOS)
        .ok_or_else(|| {
            super::SpecError::one(
                "axes",
                format!(
                    "make more than {} parameter sets before the constraint: sweep fewer values",
                    super::spec::MAX_COMBOS
                ),
            )
        })?;
    let mut out = Vec::new();
    let mut idx = vec![0usize; spec.axes.len()];
    for _ in 0..total {
        let combo: Vec<Value> = spec
            .axes
            .iter()
            .zip(&idx)
            .map(|(a, i)| a.values[*i].clone())
            .collect();
        if spec.constraints.iter().all(|c| c.holds(&combo)) {
            out.push(combo);
        }
        // The last axis varies fastest.
        for k in (0..idx.len()).rev() {
            idx[k] += 1;
            if idx[k] < spec.axes[k].values.len() {
                break;
            }
            idx[k] = 0;
        }
    }
    if out.is_empty() {
        return Err(match &spec.constraint_text {
            Some(c) => super::SpecError::one(
                "constraint",
                format!(
                    "'{c}' leaves no parameter set of the {total} the axes make: the grid is empty"
                ),
            ),
            None => super::SpecError::one("axes", "the grid is empty"),
        }
        .into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(extra: Value) -> Spec {
        let mut v = json!({"base": {"codes": ["AAPL"], "start_date": "2005-01-01", "end_date": "2013-12-31",
                        "strategy": {"name": "sma_crossover", "params": {"fast": 20, "slow": 50}}},
               "axes": {"strategy.params.fast": [5, 10, 20], "strategy.params.slow": {"from": 30, "to": 60, "step": 10}},
               "constraint": "fast < slow", "universe": ["AAPL", "MSFT"]});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        Spec::from_value(v).unwrap()
    }

    #[test]
    fn cells_are_numbered_symbol_by_symbol_and_the_bytes_are_stable() {
        let p = Plan::from_spec(&spec(json!({}))).unwrap();
        assert_eq!(p.combos.len(), 12);
        assert_eq!(p.cell_count(), 24);
        assert_eq!(
            p.cell(13),
            CellRef {
                index: 13,
                combo: 1,
                unit: 1
            }
        );
        assert_eq!(p.combos[0], vec![json!(5), json!(30)]);
        let again = Plan::from_spec(&spec(json!({}))).unwrap();
        assert_eq!(p.to_bytes(), again.to_bytes());
        assert_eq!(p.hash().len(), 64);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.json");
        p.save(&path).unwrap();
        assert_eq!(Plan::load(&path).unwrap().hash(), p.hash());
        let cfg = p.config(13, 1, 0);
        assert!(cfg.is_err(), "combo 13 does not exist");
        let cfg = p.config(1, 1, 0).unwrap();
        assert_eq!(cfg.codes, vec!["MSFT".to_string()]);
    }

    #[test]
    fn a_constraint_that_leaves_nothing_and_invalid_sets_are_refused() {
        let e = Plan::from_spec(&spec(json!({"constraint": "fast > slow"}))).unwrap_err();
        assert!(
            e.to_string().contains("`constraint`") && e.to_string().contains("empty"),
            "{e}"
        );
        let e = Plan::from_spec(&spec(json!({"constraint": null, "axes": {"strategy.params.fast": [50], "strategy.params.slow": [30]}}))).unwrap_err();
        assert!(e.to_string().contains("fast=50 slow=30"), "{e}");
        assert!(e.to_string().contains("constraint"), "{e}");
        let e = Plan::from_spec(&spec(
            json!({"axes": {"strategy.params.fst": [5]}, "constraint": null}),
        ))
        .unwrap_err();
        assert!(e.to_string().contains("strategy.params.fst"), "{e}");
    }
}
