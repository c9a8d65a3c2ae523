//! American options on a Cox–Ross–Rubinstein tree (docs §15.2), built as
//! QuantLib's `BinomialVanillaEngine<CoxRossRubinstein>` builds it, so the
//! two agree to rounding:
//!
//! - log-price steps of `dx = σ√dt`, node `(i, j)` at `S·e^{(2j−i)·dx}`;
//! - up probability `pu = ½ + ½·(r − q − σ²/2)·dt / dx` (the drift of the
//!   log price), `pd = 1 − pu`, one discount `e^{−r·dt}` a step;
//! - early exercise checked at every node, the root included;
//! - delta and gamma from the nodes of steps 1 and 2 (Hull), theta from
//!   the Black–Scholes equation `θ = rV − (r−q)SΔ − ½σ²S²Γ`.
//!
//! QuantLib's tree gives no vega or rho; here they are central differences
//! on the same tree (volatility ±1e-4, rate ±1e-4).

use super::{Greeks, OptionError, OptionInputs};
use crate::research::Interrupt;

/// The most steps a tree may have: 100,000 steps is 5·10⁹ node updates.
pub const MAX_STEPS: usize = 100_000;

/// Trees one price rolls back: the price, two for vega, two for rho.
const TREES: f64 = 5.0;

/// Seconds one node update takes, measured on the project's 2-core
/// machines (docs §2.4): 6 to 7 ns optimised, 30 to 50 ns in a debug
/// build (idle to loaded).
const NODE_SECONDS: f64 = if cfg!(debug_assertions) { 40e-9 } else { 6e-9 };

/// The node updates [`crr_american`] makes for `steps` steps.
pub fn crr_nodes(steps: usize) -> f64 {
    let n = steps as f64;
    TREES * n * (n + 1.0) / 2.0
}

/// Roughly how long [`crr_american`] takes for `steps` steps on this build.
pub fn crr_estimate(steps: usize) -> std::time::Duration {
    std::time::Duration::from_secs_f64(crr_nodes(steps) * NODE_SECONDS)
}

/// The bump for the finite-difference vega and rho.
const BUMP: f64 = 1e-4;

/// An American option's price and Greeks on a CRR tree of `steps` steps.
pub fn crr_american(inputs: &OptionInputs, steps: usize) -> Result<Greeks, OptionError> {
    crr_american_within(inputs, steps, &Interrupt::new())
}

/// [`crr_american`] that stops with [`OptionError::Interrupted`] within a
/// row of the tree once `interrupt` fires (docs §2.4).
pub fn crr_american_within(
    inputs: &OptionInputs,
    steps: usize,
    interrupt: &Interrupt,
) -> Result<Greeks, OptionError> {
    let o = inputs.checked()?;
    if !(1..=MAX_STEPS).contains(&steps) {
        return Err(OptionError::Steps {
            value: steps,
            max: MAX_STEPS,
        });
    }
    let base = tree(&o, steps, interrupt)?;
    let at = |vol: f64, rate: f64| {
        tree(
            &OptionInputs {
                volatility: vol,
                rate,
                ..o
            },
            steps,
            interrupt,
        )
        .map(|t| t.price)
    };
    let (v, r) = (o.volatility, o.rate);
    // A volatility too small to bump down stays one-sided.
    let vega = if v > 2.0 * BUMP {
        (at(v + BUMP, r)? - at(v - BUMP, r)?) / (2.0 * BUMP)
    } else {
        (at(v + BUMP, r)? - base.price) / BUMP
    };
    let rho = (at(v, r + BUMP)? - at(v, r - BUMP)?) / (2.0 * BUMP);
    let theta = o.rate * base.price
        - (o.rate - o.dividend_yield) * o.spot * base.delta
        - 0.5 * v * v * o.spot * o.spot * base.gamma;
    Ok(Greeks {
        price: base.price,
        delta: base.delta,
        gamma: base.gamma,
        vega,
        theta,
        rho,
    })
}

/// What one roll-back gives.
struct TreeValue {
    price: f64,
    delta: f64,
    gamma: f64,
}

/// Rolls the tree back from expiry, keeping the values at steps 2 and 1.
fn tree(o: &OptionInputs, steps: usize, interrupt: &Interrupt) -> Result<TreeValue, OptionError> {
    let dt = o.expiry_years / steps as f64;
    let dx = o.volatility * dt.sqrt();
    let drift = (o.rate - o.dividend_yield - 0.5 * o.volatility * o.volatility) * dt;
    let pu = 0.5 + 0.5 * drift / dx;
    let pd = 1.0 - pu;
    if !(0.0..=1.0).contains(&pu) {
        return Err(OptionError::TreeProbability { p: pu, steps });
    }
    let disc = (-o.rate * dt).exp();
    let underlying = |i: usize, j: usize| o.spot * ((2.0 * j as f64 - i as f64) * dx).exp();
    let payoff = |i: usize, j: usize| o.kind.payoff(underlying(i, j), o.strike);
    let mut v: Vec<f64> = (0..=steps).map(|j| payoff(steps, j)).collect();
    let mut at2 = [0.0; 3];
    let mut at1 = [0.0; 2];
    for i in (0..steps).rev() {
        // A row is at most MAX_STEPS nodes: well under a millisecond.
        interrupt.check()?;
        for j in 0..=i {
            let cont = (pd * v[j] + pu * v[j + 1]) * disc;
            v[j] = cont.max(payoff(i, j));
        }
        match i {
            2 => at2.copy_from_slice(&v[..3]),
            1 => at1.copy_from_slice(&v[..2]),
            _ => {}
        }
    }
    let price = v[0];
    if steps < 2 {
        // Too few steps for Hull's nodes: no delta or gamma from the tree.
        return Ok(TreeValue {
            price,
            delta: f64::NAN,
            gamma: f64::NAN,
        });
    }
    let (s2d, s2m, s2u) = (underlying(2, 0), underlying(2, 1), underlying(2, 2));
    let delta2u = (at2[2] - at2[1]) / (s2u - s2m);
    let delta2d = (at2[1] - at2[0]) / (s2m - s2d);
    let gamma = (delta2u - delta2d) / ((s2u - s2d) / 2.0);
    let delta = (at1[1] - at1[0]) / (underlying(1, 1) - underlying(1, 0));
    Ok(TreeValue {
        price,
        delta,
        gamma,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{OptionKind, black_scholes};
    use super::*;

    /// A fired interrupt stops the largest tree at once, and one fired
    /// mid-way stops it within a row (issue 35: it ran for minutes).
    #[test]
    fn an_interrupted_tree_stops_promptly() {
        let fired = Interrupt::new();
        fired.interrupt();
        let e = crr_american_within(&put(), MAX_STEPS, &fired).unwrap_err();
        assert_eq!(e, OptionError::Interrupted(crate::research::Interrupted));
        let later = Interrupt::new();
        let firing = later.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            firing.interrupt();
            std::time::Instant::now()
        });
        let e = crr_american_within(&put(), MAX_STEPS, &later).unwrap_err();
        let fired_at = t.join().unwrap();
        assert!(matches!(e, OptionError::Interrupted(_)), "{e}");
        assert!(fired_at.elapsed() < std::time::Duration::from_millis(500));
    }

    /// The estimate grows with the square of the steps and names the
    /// largest tree as minutes, not seconds.
    #[test]
    fn the_estimate_counts_five_trees() {
        assert_eq!(crr_nodes(2), 15.0);
        assert!(crr_estimate(MAX_STEPS).as_secs() > 60);
        assert!(crr_estimate(500).as_millis() < 100);
    }

    fn put() -> OptionInputs {
        OptionInputs {
            kind: OptionKind::Put,
            spot: 100.0,
            strike: 110.0,
            expiry_years: 1.0,
            volatility: 0.25,
            rate: 0.05,
            dividend_yield: 0.0,
        }
    }

    #[test]
    fn an_american_put_is_worth_more_than_the_european() {
        let am = crr_american(&put(), 500).unwrap();
        let eu = black_scholes(&put()).unwrap();
        assert!(am.price > eu.price + 0.1, "{am:?} vs {eu:?}");
        // Vega and delta near the European ones.
        assert!((am.vega - eu.vega).abs() / eu.vega < 0.1, "{am:?} {eu:?}");
        assert!(am.delta < 0.0 && am.gamma > 0.0);
    }

    #[test]
    fn an_american_call_without_dividends_is_european() {
        let c = OptionInputs {
            kind: OptionKind::Call,
            ..put()
        };
        let am = crr_american(&c, 2000).unwrap();
        let eu = black_scholes(&c).unwrap();
        assert!((am.price - eu.price).abs() < 5e-3, "{am:?} vs {eu:?}");
    }

    #[test]
    fn steps_out_of_range_are_refused() {
        let e = crr_american(&put(), 0).unwrap_err().to_string();
        assert!(e.contains("'steps' must be from 1"), "{e}");
    }
}
