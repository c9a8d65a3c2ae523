//! Option pricing (docs §15.2): European options by Black–Scholes–Merton
//! ([`black_scholes`]), American options on a Cox–Ross–Rubinstein tree
//! ([`binomial`]), implied volatility ([`implied`]) and multi-leg positions
//! with their payoff at expiry ([`strategy`]).
//!
//! Conventions are QuantLib's, so the numbers can be checked against it
//! (tests/golden/quant): continuous rate and dividend yield, vega per 1.00
//! of volatility, rho per 1.00 of rate, theta per year as calendar time
//! passes (∂V/∂t, not ∂V/∂T).

pub mod binomial;
pub mod black_scholes;
pub mod implied;
pub mod strategy;

use serde::{Deserialize, Serialize};

pub use binomial::{crr_american, crr_american_within, crr_estimate};
pub use black_scholes::black_scholes;
pub use implied::{ImpliedVolatility, implied_volatility};

/// A call or a put.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptionKind {
    Call,
    Put,
}

impl OptionKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            OptionKind::Call => "call",
            OptionKind::Put => "put",
        }
    }

    /// The payoff at expiry for an underlying at `s`.
    pub fn payoff(self, s: f64, strike: f64) -> f64 {
        match self {
            OptionKind::Call => (s - strike).max(0.0),
            OptionKind::Put => (strike - s).max(0.0),
        }
    }
}

/// One option's terms and market: rates and yield continuous, annual.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OptionInputs {
    pub kind: OptionKind,
    pub spot: f64,
    pub strike: f64,
    pub expiry_years: f64,
    pub volatility: f64,
    pub rate: f64,
    pub dividend_yield: f64,
}

/// A price and its sensitivities, in QuantLib's units (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Greeks {
    pub price: f64,
    pub delta: f64,
    pub gamma: f64,
    pub vega: f64,
    pub theta: f64,
    pub rho: f64,
}

impl Greeks {
    /// `self · q`: a position of `q` units.
    pub(crate) fn scaled(self, q: f64) -> Greeks {
        Greeks {
            price: self.price * q,
            delta: self.delta * q,
            gamma: self.gamma * q,
            vega: self.vega * q,
            theta: self.theta * q,
            rho: self.rho * q,
        }
    }

    /// The sum of two positions.
    pub(crate) fn plus(self, o: Greeks) -> Greeks {
        Greeks {
            price: self.price + o.price,
            delta: self.delta + o.delta,
            gamma: self.gamma + o.gamma,
            vega: self.vega + o.vega,
            theta: self.theta + o.theta,
            rho: self.rho + o.rho,
        }
    }
}

/// A computed figure in a message: six decimals at most, trailing zeros
/// dropped (`14.98109`, `100`), so the bound reads as a price.
fn short(x: &f64) -> String {
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

/// Inputs the formulas cannot take, each naming the value and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OptionError {
    #[error("'{name}' must be a finite number greater than 0, got {value}")]
    NotPositive { name: &'static str, value: f64 },
    #[error("'{name}' must be a finite number, got {value}")]
    NotFinite { name: &'static str, value: f64 },
    #[error("'{name}' must be from {min} to {max}{unit}, got {value}")]
    OutOfRange {
        name: &'static str,
        value: f64,
        min: f64,
        max: f64,
        unit: &'static str,
    },
    #[error("'steps' must be from 1 to {max}, got {value}")]
    Steps { value: usize, max: usize },
    #[error(
        "the binomial tree has a negative probability ({p:.4}) with {steps} steps: the drift per step outweighs the volatility's move; use more steps or a higher volatility"
    )]
    TreeProbability { p: f64, steps: usize },
    #[error(
        "a {kind} price of {price} is outside the no-arbitrage bounds ({lower}, {upper}) for spot {spot}, strike {strike}, {expiry_years} years, rate {rate}, dividend yield {dividend_yield}: no volatility gives it",
        lower = short(.lower),
        upper = short(.upper),
        rate = short(.rate),
    )]
    OutsideBounds {
        kind: &'static str,
        price: f64,
        lower: f64,
        upper: f64,
        spot: f64,
        strike: f64,
        expiry_years: f64,
        rate: f64,
        dividend_yield: f64,
    },
    #[error(transparent)]
    Interrupted(#[from] crate::research::Interrupted),
    #[error("implied volatility did not converge within {iterations} iterations for price {price}")]
    NoConvergence { price: f64, iterations: u32 },
    #[error("{0}")]
    Strategy(String),
}

/// `value` when finite and > 0.
pub(crate) fn positive(name: &'static str, value: f64) -> Result<f64, OptionError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(OptionError::NotPositive { name, value })
    }
}

/// `value` when finite.
pub(crate) fn finite(name: &'static str, value: f64) -> Result<f64, OptionError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(OptionError::NotFinite { name, value })
    }
}

/// `value` when from `min` to `max` (the ranges of docs §15.1: outside
/// them an answer's figures overflow or mean nothing, a price of 10⁻³⁰⁰
/// has no gamma, a rate of 1000 a year no sensible tree).
pub(crate) fn within(
    name: &'static str,
    value: f64,
    (min, max, unit): (f64, f64, &'static str),
) -> Result<f64, OptionError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(OptionError::OutOfRange {
            name,
            value,
            min,
            max,
            unit,
        })
    }
}

/// Spot and strike: a millionth to a billion.
pub(crate) const PRICE_RANGE: (f64, f64, &str) = (1e-6, 1e9, "");
/// Expiry: about half a minute to a century.
pub(crate) const EXPIRY_RANGE: (f64, f64, &str) = (1e-6, 100.0, " years");
/// Volatility: 0.01 % to 1,000 % a year.
pub(crate) const VOLATILITY_RANGE: (f64, f64, &str) = (1e-4, 10.0, " (a fraction a year)");
/// Rate and dividend yield: −100 % to +100 % a year (negative rates are
/// allowed).
pub(crate) const RATE_RANGE: (f64, f64, &str) = (-1.0, 1.0, " (a fraction a year)");

impl OptionInputs {
    /// Checks every input: spot, strike, expiry and volatility positive,
    /// rate and yield finite (negative rates are allowed), each within its
    /// range (docs §15.1).
    pub(crate) fn checked(self) -> Result<Self, OptionError> {
        within("spot", positive("spot", self.spot)?, PRICE_RANGE)?;
        within("strike", positive("strike", self.strike)?, PRICE_RANGE)?;
        within(
            "expiry_years",
            positive("expiry_years", self.expiry_years)?,
            EXPIRY_RANGE,
        )?;
        within(
            "volatility",
            positive("volatility", self.volatility)?,
            VOLATILITY_RANGE,
        )?;
        within("rate", finite("rate", self.rate)?, RATE_RANGE)?;
        within(
            "dividend_yield",
            finite("dividend_yield", self.dividend_yield)?,
            RATE_RANGE,
        )?;
        Ok(self)
    }
}
