//! Implied volatility of a European price (docs §15.2): the σ at which
//! Black–Scholes–Merton gives the price.
//!
//! A price outside the no-arbitrage bounds has no volatility and is an
//! error that states the bounds. Inside them the price is increasing in σ,
//! so the root is bracketed and unique. The solver is Newton's method from
//! Manaster and Koehler's start (σ₀ = √(2·|ln(F/K)|/T), the inflection
//! point of price in σ, from which Newton converges monotonically), kept
//! inside a shrinking bracket with a bisection fallback; it stops when a
//! step moves σ by less than 1e-15 of itself.

use super::black_scholes::{price_bounds, price_unchecked};
use super::{OptionError, OptionInputs, OptionKind, positive};

/// The solver's iteration cap (bisection alone reaches 1e-15 within it).
pub(crate) const MAX_ITERATIONS: u32 = 200;

/// The solved volatility and the iterations it took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImpliedVolatility {
    pub volatility: f64,
    pub iterations: u32,
}

/// The volatility at which a European `kind` option is worth `price`.
pub fn implied_volatility(
    kind: OptionKind,
    spot: f64,
    strike: f64,
    expiry_years: f64,
    price: f64,
    rate: f64,
    dividend_yield: f64,
) -> Result<ImpliedVolatility, OptionError> {
    let base = OptionInputs {
        kind,
        spot,
        strike,
        expiry_years,
        volatility: 1.0,
        rate,
        dividend_yield,
    }
    .checked()?;
    positive("price", price)?;
    let (lower, upper) = price_bounds(&base);
    if !(price > lower && price < upper) {
        return Err(OptionError::OutsideBounds {
            kind: kind.as_str(),
            price,
            lower,
            upper,
            spot,
            strike,
            expiry_years,
            rate,
            dividend_yield,
        });
    }
    solve(&base, price)
}

/// Safeguarded Newton on f(σ) = BSM(σ) − price, increasing in σ.
fn solve(base: &OptionInputs, price: f64) -> Result<ImpliedVolatility, OptionError> {
    let at = |sigma: f64| {
        price_unchecked(&OptionInputs {
            volatility: sigma,
            ..*base
        })
    };
    let t = base.expiry_years;
    let forward = base.spot * ((base.rate - base.dividend_yield) * t).exp();
    let mut lo = 0.0_f64;
    let mut hi = f64::INFINITY;
    let mut sigma = (2.0 * (forward / base.strike).ln().abs() / t).sqrt();
    if !(sigma.is_finite() && sigma > 1e-8) {
        sigma = 0.2;
    }
    for iteration in 1..=MAX_ITERATIONS {
        let g = at(sigma);
        let f = g.price - price;
        if f == 0.0 {
            return Ok(done(sigma, iteration));
        }
        if f > 0.0 {
            hi = hi.min(sigma);
        } else {
            lo = lo.max(sigma);
        }
        let newton = sigma - f / g.vega;
        let next = if g.vega > 0.0 && newton > lo && newton < hi && newton.is_finite() {
            newton
        } else if hi.is_finite() {
            0.5 * (lo + hi)
        } else {
            // No upper bracket yet: double until the price is passed.
            2.0 * sigma.max(lo)
        };
        if (next - sigma).abs() <= 1e-15 * sigma {
            return Ok(done(next, iteration));
        }
        sigma = next;
    }
    Err(OptionError::NoConvergence {
        price,
        iterations: MAX_ITERATIONS,
    })
}

fn done(volatility: f64, iterations: u32) -> ImpliedVolatility {
    ImpliedVolatility {
        volatility,
        iterations,
    }
}

#[cfg(test)]
mod tests {
    use super::super::black_scholes;
    use super::*;

    #[test]
    fn a_price_round_trips_to_its_volatility() {
        for (kind, strike, vol) in [
            (OptionKind::Call, 100.0, 0.2),
            (OptionKind::Put, 80.0, 0.45),
            (OptionKind::Call, 150.0, 0.6),
            (OptionKind::Put, 120.0, 0.1),
        ] {
            let o = OptionInputs {
                kind,
                spot: 100.0,
                strike,
                expiry_years: 0.5,
                volatility: vol,
                rate: 0.03,
                dividend_yield: 0.01,
            };
            let p = black_scholes(&o).unwrap().price;
            let iv = implied_volatility(kind, 100.0, strike, 0.5, p, 0.03, 0.01).unwrap();
            assert!((iv.volatility - vol).abs() < 1e-12, "{iv:?} for {vol}");
            assert!(iv.iterations < 20, "{iv:?}");
        }
    }

    #[test]
    fn a_price_outside_the_bounds_states_them() {
        // A call is worth less than the discounted spot (q = 0: 100).
        let e = implied_volatility(OptionKind::Call, 100.0, 100.0, 1.0, 101.0, 0.0, 0.0)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("outside the no-arbitrage bounds (0, 100)"),
            "{e}"
        );
        // A put below its intrinsic value on the forward.
        let e = implied_volatility(OptionKind::Put, 100.0, 120.0, 1.0, 15.0, 0.0, 0.0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("(20, 120)"), "{e}");
        // Computed bounds and rates read as prices, six decimals at most.
        let e = implied_volatility(OptionKind::Call, 174.67, 160.0, 0.25, 5.0, 0.03, 0.0)
            .unwrap_err()
            .to_string();
        // Lower bound: S − K·e^(−rT).
        let lower = 174.67 - 160.0 * (-0.03f64 * 0.25).exp();
        assert!(
            e.contains(&format!("bounds ({lower:.6}, 174.67)")) && e.contains("rate 0.03,"),
            "{e}"
        );
    }
}
