//! Purged k-fold and CPCV for a screen (docs §17.10), through
//! [`crate::research::validation`]: how each factor's rank IC holds out of
//! sample, and the probability that choosing the best in-sample factor
//! overfits (PBO).

use serde::{Deserialize, Serialize};

use crate::research::validation::ValidationError;

/// A screen's `split`: `{"purged_kfold": {"folds": K, "embargo_days": d}}`
/// or `{"cpcv": {"groups": N, "test_groups": k, "embargo_days": d}}`, the
/// sweep's keys (docs §18.9); `horizon_days` defaults to the rank horizon.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ScreenSplit {
    PurgedKfold {
        folds: usize,
        #[serde(default)]
        embargo_days: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        horizon_days: Option<usize>,
    },
    Cpcv {
        groups: usize,
        test_groups: usize,
        #[serde(default)]
        embargo_days: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        horizon_days: Option<usize>,
    },
}

/// Why a screen's split cannot be made.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SplitError {
    #[error("split.{kind}: {source}")]
    Invalid {
        kind: &'static str,
        source: ValidationError,
    },
    #[error(
        "split.{kind}: C({groups}, {test_groups}) splits is more than the {max} a screen makes; choose fewer groups or test groups"
    )]
    TooManySplits {
        kind: &'static str,
        groups: usize,
        test_groups: usize,
        max: usize,
    },
    #[error(
        "split.{kind}: {n} scored dates at the rank horizon {horizon} cannot be split: {source}"
    )]
    Dates {
        kind: &'static str,
        n: usize,
        horizon: usize,
        source: ValidationError,
    },
}

/// In- and out-of-sample rank IC of one factor on one split.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SplitIc {
    #[serde(deserialize_with = "nan_null::f64")]
    pub in_sample_mean: f64,
    #[serde(deserialize_with = "nan_null::f64")]
    pub in_sample_ir: f64,
    #[serde(deserialize_with = "nan_null::f64")]
    pub out_of_sample_mean: f64,
    #[serde(deserialize_with = "nan_null::f64")]
    pub out_of_sample_ir: f64,
}

/// One factor under the split.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FactorValidation {
    pub name: String,
    /// Per split, in split order (empty for a factor the screen could not
    /// score).
    pub splits: Vec<SplitIc>,
    /// Out-of-sample mean rank IC: one value for a purged k-fold (each
    /// date tested once), one per backtest path for CPCV.
    #[serde(deserialize_with = "nan_null::vec")]
    pub out_of_sample_rank_ic: Vec<f64>,
    /// The mean of `out_of_sample_rank_ic`.
    #[serde(deserialize_with = "nan_null::f64")]
    pub out_of_sample_mean: f64,
    /// Share of splits whose in- and out-of-sample mean rank ICs have the
    /// same sign (of those where both are defined and non-zero).
    #[serde(deserialize_with = "nan_null::f64")]
    pub sign_agreement: f64,
}

/// A screen's purged k-fold or CPCV reading.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScreenValidation {
    /// `purged_kfold` or `cpcv`.
    pub kind: String,
    pub groups: usize,
    pub test_groups: usize,
    pub embargo_days: usize,
    pub horizon_days: usize,
    /// Scored dates at the rank horizon (the observations split).
    pub observations: usize,
    pub splits: usize,
    pub paths: usize,
    /// In the screen's factor order.
    pub factors: Vec<FactorValidation>,
    /// Probability that the best in-sample factor (by mean rank IC) ranks
    /// at or below the out-of-sample median; NaN under 2 scored factors.
    #[serde(deserialize_with = "nan_null::f64")]
    pub pbo: f64,
    /// Each split's logit λ.
    #[serde(deserialize_with = "nan_null::vec")]
    pub logits: Vec<f64>,
    /// Each split's in-sample best factor (an index into the factors).
    pub winners: Vec<usize>,
}

/// NaN is written as null (serde_json's way); these read it back.
mod nan_null {
    use serde::{Deserialize, Deserializer};

    pub fn f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }

    pub fn vec<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        let v = Vec::<Option<f64>>::deserialize(d)?;
        Ok(v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
    }
}
