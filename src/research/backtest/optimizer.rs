//! Portfolio optimisers inside a backtest (docs §7.4.2, §15.5): the
//! config's `optimizer` (one of `portfolio_optimize`'s methods) and
//! `optimizer_params` turn each rebalance's signal set into optimiser
//! weights.
//!
//! After the signals are aligned (shifted one bar, forward-filled), the
//! names with a positive target on a bar are its signal set; the optimiser
//! is long-only, so a signal ≤ 0 is out. The weights are recomputed when
//! the set changes and otherwise every `rebalance_bars` bars, each time on
//! the trailing `lookback` daily returns of the set's closes **up to the
//! bar before** (the bar trades at its open, so its close is not known
//! yet): no look-ahead. A window with too few returns (fewer than 20, or
//! not more than the names), or an optimiser that cannot answer (no excess
//! return for `max_sharpe`, equal risk outside the bounds), gives equal
//! weights for that rebalance, counted and said on the run card.

use chrono::NaiveDate;
use serde::Serialize;
use serde_json::{Map, Value};

use super::config_reader::{ConfigIssue, Reader, kind};
use crate::research::portfolio::{CovarianceKind, Method, OptimizeOptions};

/// Bars of returns the optimiser reads by default (a year).
pub(crate) const DEFAULT_LOOKBACK: usize = 252;
/// Bars between re-estimations while the signal set holds (a month).
pub(crate) const DEFAULT_REBALANCE_BARS: usize = 21;
/// The fewest returns an optimisation runs on.
pub(crate) const MIN_RETURNS: usize = 20;

/// `optimizer` + `optimizer_params`, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct OptimizerSpec {
    pub method: Method,
    pub lookback: usize,
    pub rebalance_bars: usize,
    pub min_weight: f64,
    pub max_weight: f64,
    /// Annual.
    pub risk_free_rate: f64,
    pub covariance: CovarianceKind,
}

impl OptimizerSpec {
    /// "min_variance on the trailing 252 bars".
    pub(crate) fn describe(&self) -> String {
        let mut s = format!(
            "{} optimizer on the trailing {} bars, re-estimated every {} bars or when the signal set changes",
            self.method.as_str(),
            self.lookback,
            self.rebalance_bars
        );
        if self.min_weight > 0.0 || self.max_weight < 1.0 {
            s.push_str(&format!(
                ", weights {} to {}",
                self.min_weight, self.max_weight
            ));
        }
        if self.covariance == CovarianceKind::LedoitWolf {
            s.push_str(", Ledoit–Wolf covariance");
        }
        s
    }

    pub(super) fn options(&self) -> OptimizeOptions {
        OptimizeOptions {
            method: self.method,
            risk_free_rate: self.risk_free_rate,
            min_weight: self.min_weight,
            max_weight: self.max_weight,
            covariance: self.covariance,
        }
    }
}

/// Parses `optimizer` and `optimizer_params` off the config object.
pub(crate) fn parse(
    obj: &Map<String, Value>,
    issues: &mut Vec<ConfigIssue>,
) -> Option<OptimizerSpec> {
    let params = obj.get("optimizer_params").filter(|v| !v.is_null());
    let Some(name) = obj.get("optimizer").filter(|v| !v.is_null()) else {
        if params.is_some() {
            issues.push(ConfigIssue::new(
                "optimizer_params",
                "invalid_value",
                format!(
                    "needs an 'optimizer' to apply to (one of {})",
                    Method::names()
                ),
            ));
        }
        return None;
    };
    let method = match name.as_str().map(|s| (s, Method::parse(s))) {
        Some((_, Some(m))) => m,
        Some((s, None)) => {
            issues.push(ConfigIssue::new(
                "optimizer",
                "invalid_value",
                format!("'{s}' is not one of {}", Method::names()),
            ));
            return None;
        }
        None => {
            issues.push(ConfigIssue::new(
                "optimizer",
                "invalid_value",
                format!(
                    "must be a method name such as \"min_variance\", got {}",
                    kind(name)
                ),
            ));
            return None;
        }
    };
    let empty = Map::new();
    let p = match params {
        None => &empty,
        Some(Value::Object(m)) => m,
        Some(other) => {
            issues.push(ConfigIssue::new(
                "optimizer_params",
                "invalid_value",
                format!(
                    "must be an object such as {{\"lookback\": 252, \"max_weight\": 0.4}}, got {}",
                    kind(other)
                ),
            ));
            &empty
        }
    };
    let mut r = Reader::new(p, "optimizer_params");
    r.only(&[
        "lookback",
        "rebalance_bars",
        "min_weight",
        "max_weight",
        "risk_free_rate",
        "covariance",
    ]);
    let lookback = r
        .integer("lookback", 21, 10_080)
        .map_or(DEFAULT_LOOKBACK, |n| n as usize);
    let rebalance_bars = r
        .integer("rebalance_bars", 1, 10_080)
        .map_or(DEFAULT_REBALANCE_BARS, |n| n as usize);
    let min_weight = r.number("min_weight", 0.0, false, 1.0).unwrap_or(0.0);
    let max_weight = r.number("max_weight", 0.0, true, 1.0).unwrap_or(1.0);
    let risk_free_rate = r.number("risk_free_rate", -1.0, false, 1.0).unwrap_or(0.0);
    let covariance = match r.string("covariance") {
        None | Some("sample") => CovarianceKind::Sample,
        Some("ledoit_wolf") => CovarianceKind::LedoitWolf,
        Some(other) => {
            r.issue(
                "covariance",
                "invalid_value",
                format!("'{other}' is not one of sample, ledoit_wolf"),
            );
            CovarianceKind::Sample
        }
    };
    if min_weight > max_weight {
        r.issue(
            "min_weight",
            "invalid_value",
            format!("min_weight {min_weight} is above max_weight {max_weight}"),
        );
    }
    issues.append(&mut r.issues);
    Some(OptimizerSpec {
        method,
        lookback,
        rebalance_bars,
        min_weight,
        max_weight,
        risk_free_rate,
        covariance,
    })
}

/// One rebalance: the bar's date and the weights by code.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Rebalance {
    pub date: NaiveDate,
    pub weights: Map<String, Value>,
    /// Why equal weights were used instead, when they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

/// What the optimiser did over a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct OptimizerRecord {
    pub method: &'static str,
    pub lookback: usize,
    pub rebalance_bars: usize,
    pub rebalances: Vec<Rebalance>,
    /// Negative signals set to flat (the optimiser is long-only).
    pub short_signals_dropped: usize,
}

impl OptimizerRecord {
    pub(crate) fn fallbacks(&self) -> usize {
        self.rebalances
            .iter()
            .filter(|r| r.fallback.is_some())
            .count()
    }

    /// What a reader must know: fallbacks and dropped shorts.
    pub(crate) fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let fell: Vec<&Rebalance> = self
            .rebalances
            .iter()
            .filter(|r| r.fallback.is_some())
            .collect();
        if let Some(first) = fell.first() {
            out.push(format!(
                "the {} optimizer gave equal weights on {} of {} rebalances (first {}: {})",
                self.method,
                fell.len(),
                self.rebalances.len(),
                first.date,
                first.fallback.as_deref().unwrap_or("")
            ));
        }
        if self.short_signals_dropped > 0 {
            out.push(format!(
                "the {} optimizer is long-only: {} negative targets were set flat",
                self.method, self.short_signals_dropped
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(v: Value) -> (Option<OptimizerSpec>, Vec<ConfigIssue>) {
        let mut issues = Vec::new();
        let spec = parse(v.as_object().unwrap(), &mut issues);
        (spec, issues)
    }

    #[test]
    fn optimizer_params_have_defaults_and_checks() {
        let (s, issues) = parsed(json!({"optimizer": "min_variance"}));
        assert!(issues.is_empty());
        let s = s.unwrap();
        assert_eq!((s.lookback, s.rebalance_bars), (252, 21));
        let (_, issues) = parsed(json!({"optimizer": "markowitz"}));
        assert!(
            issues[0]
                .to_string()
                .contains("'markowitz' is not one of equal_weight"),
            "{issues:?}"
        );
        let (_, issues) = parsed(
            json!({"optimizer": "hrp", "optimizer_params": {"lookback": 5, "max_wieght": 0.3}}),
        );
        let text: Vec<String> = issues.iter().map(ToString::to_string).collect();
        assert!(
            text.iter().any(|t| t.contains("optimizer_params.lookback")),
            "{text:?}"
        );
        assert!(
            text.iter().any(|t| t.contains("did you mean 'max_weight'")),
            "{text:?}"
        );
        let (_, issues) = parsed(json!({"optimizer_params": {"lookback": 60}}));
        assert!(issues[0].to_string().contains("needs an 'optimizer'"));
    }
}
