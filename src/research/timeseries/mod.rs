//! Time-series statistics (docs §16): unit-root and stationarity tests
//! ([`unit_root`]: ADF, KPSS), Engle–Granger cointegration and the OU
//! half-life ([`coint`]), the Hurst exponent, Ljung–Box and Jarque–Bera
//! ([`diagnostics`]), Johansen's cointegration rank test ([`johansen`]),
//! and volatility models ([`garch`]: EWMA and GARCH(1,1); [`garch_family`]:
//! Student-t errors and GJR-GARCH).
//!
//! Each follows a named reference exactly (statsmodels 0.15 for the tests,
//! arch 8.0 for the volatility models; docs §16.1 lists them), so a result
//! can be checked against it: the goldens in `tests/golden/stats/ts.json`
//! hold the references' numbers. The regressions behind the tests are small
//! least-squares problems solved on the Gram matrix of columns from which
//! the deterministic terms were partialled out first ([`ols`]), which keeps
//! them well conditioned and lets one Cholesky factor score every lag length
//! of an autolag search at once.

pub mod coint;
pub mod diagnostics;
mod eigen;
pub mod garch;
pub mod garch_family;
pub mod garch_inference;
pub mod johansen;
mod johansen_tables;
pub mod mackinnon;
pub mod ols;
pub mod unit_root;

pub use coint::{CointResult, HalfLife, engle_granger, half_life};
pub use diagnostics::{
    HURST_MAX_LAG, HURST_MIN_LAG, JarqueBera, LjungBox, chi2_sf, hurst, jarque_bera, ljung_box,
};
pub use garch::{EwmaResult, GarchFit, GarchParams, ewma, fit_garch, garch_loglik};
pub use garch_family::{
    ErrorDist, FamilyFit, FamilyInference, FamilyParams, GarchSpec, family_inference,
    family_loglik, family_variance, fit_family,
};
pub use garch_inference::{GarchInference, garch_inference};
pub use johansen::{JOHANSEN_MAX_SERIES, JohansenResult, johansen, johansen_min_obs};
pub use unit_root::{AdfResult, KpssLags, KpssResult, adf, kpss};

/// The deterministic terms of a test regression: statsmodels' `"n"`,
/// `"c"` and `"ct"` (none, a constant, a constant and a linear trend).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trend {
    None,
    Constant,
    ConstantTrend,
}

impl Trend {
    pub fn parse(s: &str) -> Option<Trend> {
        match s.trim().to_ascii_lowercase().as_str() {
            "n" | "nc" | "none" => Some(Trend::None),
            "c" | "constant" => Some(Trend::Constant),
            "ct" | "trend" | "constant_trend" => Some(Trend::ConstantTrend),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Trend::None => "n",
            Trend::Constant => "c",
            Trend::ConstantTrend => "ct",
        }
    }

    /// How many deterministic regressors the terms add.
    pub(crate) fn terms(self) -> usize {
        match self {
            Trend::None => 0,
            Trend::Constant => 1,
            Trend::ConstantTrend => 2,
        }
    }
}

/// How an ADF regression picks its number of lagged differences.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Autolag {
    Aic,
    Bic,
    /// Use `max_lags` as given (or statsmodels' default maximum).
    None,
}

impl Autolag {
    pub fn parse(s: &str) -> Option<Autolag> {
        match s.trim().to_ascii_lowercase().as_str() {
            "aic" => Some(Autolag::Aic),
            "bic" => Some(Autolag::Bic),
            "none" | "fixed" | "" => Some(Autolag::None),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Autolag::Aic => "aic",
            Autolag::Bic => "bic",
            Autolag::None => "none",
        }
    }
}

/// What a time-series computation cannot take.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TsError {
    #[error(
        "{test} needs at least {need} observations, got {got}: widen the dates or give a longer series"
    )]
    TooFew {
        test: &'static str,
        need: usize,
        got: usize,
    },
    #[error("{test}: the series is constant, so there is nothing to test; check the data")]
    Constant { test: &'static str },
    #[error("{test}: every value must be a finite number (position {at} is not)")]
    NotFinite { test: &'static str, at: usize },
    #[error("{0}")]
    Input(String),
    #[error(
        "{test}: the regressors are collinear (the least-squares problem is singular); use fewer lags or a longer series"
    )]
    Singular { test: &'static str },
    #[error("{0}")]
    NoFit(String),
    #[error(transparent)]
    Interrupted(#[from] crate::research::Interrupted),
}

/// Checks that `x` has at least `need` finite values.
pub(crate) fn check_series(x: &[f64], need: usize, test: &'static str) -> Result<(), TsError> {
    if x.len() < need {
        return Err(TsError::TooFew {
            test,
            need,
            got: x.len(),
        });
    }
    if let Some(at) = x.iter().position(|v| !v.is_finite()) {
        return Err(TsError::NotFinite { test, at });
    }
    Ok(())
}

/// Whether every value of `x` is the same.
pub(crate) fn is_constant(x: &[f64]) -> bool {
    x.iter().all(|v| *v == x[0])
}
