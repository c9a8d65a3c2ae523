//! A position of option and stock legs (docs §15.2.3): its profit and loss
//! at expiry, which is piecewise linear in the underlying with kinks at the
//! strikes, so the breakevens, the maximum profit and the maximum loss are
//! exact (solved on each linear piece, not read off a grid); its Greeks
//! and a small stress table by Black–Scholes–Merton.
//!
//! A leg's premium is what one unit costs to enter (a stock leg's is its
//! price, the spot by default); an option leg without one is priced by
//! Black–Scholes–Merton on the given market. The net premium is the sum of
//! quantity × premium: positive is paid (a debit), negative received.

use serde::{Deserialize, Serialize};

use super::black_scholes::price_unchecked;
use super::{Greeks, OptionError, OptionInputs, OptionKind, PRICE_RANGE};

/// Most points of a payoff grid.
pub(crate) const MAX_POINTS: usize = 1001;
/// Points of a payoff grid by default (before the kinks and breakevens are
/// added).
pub(crate) const DEFAULT_POINTS: usize = 41;
/// Most legs of one position.
pub(crate) const MAX_LEGS: usize = 20;

/// What a leg holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LegKind {
    Call,
    Put,
    Stock,
}

impl LegKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LegKind::Call => "call",
            LegKind::Put => "put",
            LegKind::Stock => "stock",
        }
    }

    fn option(self) -> Option<OptionKind> {
        match self {
            LegKind::Call => Some(OptionKind::Call),
            LegKind::Put => Some(OptionKind::Put),
            LegKind::Stock => None,
        }
    }
}

/// One leg as given: a stock leg needs no strike; `premium` absent means
/// priced by the model (options) or at the spot (stock).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Leg {
    pub kind: LegKind,
    pub strike: Option<f64>,
    pub quantity: f64,
    pub premium: Option<f64>,
}

/// The market the legs are priced in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Market {
    pub spot: f64,
    pub volatility: f64,
    pub expiry_years: f64,
    pub rate: f64,
    pub dividend_yield: f64,
}

/// A leg with its premium settled.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct PricedLeg {
    pub kind: LegKind,
    /// Absent for a stock leg.
    pub strike: Option<f64>,
    pub quantity: f64,
    pub premium: f64,
    /// True when the premium was computed (Black–Scholes–Merton, or the
    /// spot for stock), false when given.
    pub premium_from_model: bool,
}

/// The position's value after a shock to the spot and the volatility.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct StressRow {
    /// Relative spot move (−0.1: the spot 10 % lower).
    pub spot_shift: f64,
    /// Absolute volatility move (0.05: five volatility points higher).
    pub volatility_shift: f64,
    /// The position's model value after the shock.
    pub value: f64,
    /// The change from today's model value.
    pub pnl: f64,
}

/// Everything [`analyze`] finds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct StrategyResult {
    /// The position's name when its legs have a known shape ([`name_of`]).
    pub name: String,
    pub legs: Vec<PricedLeg>,
    pub net_premium: f64,
    /// (underlying at expiry, profit and loss), sorted by the underlying;
    /// the strikes and breakevens are among the points.
    pub payoff: Vec<(f64, f64)>,
    pub breakevens: Vec<f64>,
    /// None when unbounded.
    pub max_profit: Option<f64>,
    /// The largest loss as a positive amount; None when unbounded.
    pub max_loss: Option<f64>,
    /// The position's Greeks (price: its model value today).
    pub greeks: Greeks,
    pub stress: Vec<StressRow>,
}

/// The spot moves and volatility moves of the stress table.
pub(crate) const SPOT_SHIFTS: [f64; 5] = [-0.2, -0.1, 0.0, 0.1, 0.2];
pub(crate) const VOL_SHIFTS: [f64; 3] = [-0.05, 0.0, 0.05];

/// Prices the legs and analyses the position's payoff at expiry over
/// `[low, high]` (default half the lowest to 1.5 times the highest of the
/// spot and the strikes) with `points` evenly spaced points.
pub(crate) fn analyze(
    legs: &[Leg],
    market: &Market,
    range: Option<(f64, f64)>,
    points: Option<usize>,
) -> Result<StrategyResult, OptionError> {
    check_market(market)?;
    if legs.is_empty() || legs.len() > MAX_LEGS {
        return Err(OptionError::Strategy(format!(
            "a position needs 1 to {MAX_LEGS} legs, got {}",
            legs.len()
        )));
    }
    let priced = legs
        .iter()
        .enumerate()
        .map(|(i, l)| price_leg(i, l, market))
        .collect::<Result<Vec<_>, _>>()?;
    let net_premium = priced.iter().map(|l| l.quantity * l.premium).sum();
    let pieces = Pieces::of(&priced);
    let breakevens = pieces.breakevens();
    let (max_profit, max_loss) = pieces.extremes();
    let grid = grid(&priced, market.spot, range, points, &breakevens)?;
    let payoff = grid.into_iter().map(|s| (s, pieces.pnl(s))).collect();
    let greeks = position_greeks(&priced, market);
    let stress = stress(&priced, market, greeks.price);
    Ok(StrategyResult {
        name: name_of(&priced),
        legs: priced,
        net_premium,
        payoff,
        breakevens,
        max_profit,
        max_loss,
        greeks,
        stress,
    })
}

/// The name of a known shape of legs (one unit each way): "straddle",
/// "strangle", "bull call spread", "bear put spread", "covered call",
/// "protective put", "collar", each "short …" when every sign is flipped;
/// else "position".
pub(crate) fn name_of(legs: &[PricedLeg]) -> String {
    use LegKind::{Call, Put, Stock};
    let mut shape: Vec<(LegKind, f64, f64)> = legs
        .iter()
        .map(|l| (l.kind, l.quantity.signum(), l.strike.unwrap_or(0.0)))
        .collect();
    // Stock first, then by strike: the order the names are written in.
    shape.sort_by(|a, b| {
        (a.0 != Stock)
            .cmp(&(b.0 != Stock))
            .then(a.2.total_cmp(&b.2))
            .then((a.0 == Call).cmp(&(b.0 == Call)))
    });
    let named = |sign: f64| -> Option<&'static str> {
        let s: Vec<(LegKind, f64)> = shape.iter().map(|(k, q, _)| (*k, q * sign)).collect();
        let k: Vec<f64> = shape.iter().map(|l| l.2).collect();
        Some(match s.as_slice() {
            [(Put, 1.0), (Call, 1.0)] if k[0] == k[1] => "straddle",
            [(Put, 1.0), (Call, 1.0)] => "strangle",
            [(Call, 1.0), (Call, -1.0)] => "bull call spread",
            [(Put, -1.0), (Put, 1.0)] => "bear put spread",
            [(Stock, 1.0), (Call, -1.0)] => "covered call",
            [(Stock, 1.0), (Put, 1.0)] => "protective put",
            [(Stock, 1.0), (Put, 1.0), (Call, -1.0)] => "collar",
            _ => return None,
        })
    };
    match (named(1.0), named(-1.0)) {
        (Some(n), _) => n.to_string(),
        (None, Some(n)) => format!("short {n}"),
        (None, None) => "position".to_string(),
    }
}

/// The market's inputs by the one option's rules ([`OptionInputs::checked`]):
/// an at-the-money call stands in for the legs, whose strikes are checked
/// on their own.
fn check_market(m: &Market) -> Result<(), OptionError> {
    inputs(OptionKind::Call, m.spot, m).checked().map(|_| ())
}

fn inputs(kind: OptionKind, strike: f64, m: &Market) -> OptionInputs {
    OptionInputs {
        kind,
        spot: m.spot,
        strike,
        expiry_years: m.expiry_years,
        volatility: m.volatility,
        rate: m.rate,
        dividend_yield: m.dividend_yield,
    }
}

fn price_leg(i: usize, l: &Leg, m: &Market) -> Result<PricedLeg, OptionError> {
    let bad = |what: String| OptionError::Strategy(format!("leg {}: {what}", i + 1));
    // At most a billion units and a billion a unit, so that every P&L of
    // the answer stays a finite number (docs §15.1).
    if !(l.quantity.is_finite() && l.quantity != 0.0 && l.quantity.abs() <= 1e9) {
        return Err(bad(format!(
            "'quantity' must be a non-zero number from -1e9 to 1e9 (negative for a short leg), got {}",
            l.quantity
        )));
    }
    if let Some(p) = l.premium
        && !(p.is_finite() && (0.0..=PRICE_RANGE.1).contains(&p))
    {
        return Err(bad(format!(
            "'premium' must be a number from 0 to 1e9 (what one unit costs), got {p}"
        )));
    }
    let Some(kind) = l.kind.option() else {
        return Ok(PricedLeg {
            kind: l.kind,
            strike: None,
            quantity: l.quantity,
            premium: l.premium.unwrap_or(m.spot),
            premium_from_model: l.premium.is_none(),
        });
    };
    let strike = match l.strike {
        Some(k) if (PRICE_RANGE.0..=PRICE_RANGE.1).contains(&k) => k,
        Some(k) => {
            return Err(bad(format!(
                "'strike' must be a number from 1e-6 to 1e9, got {k}"
            )));
        }
        None => return Err(bad(format!("a {} needs a 'strike'", l.kind.as_str()))),
    };
    let premium = match l.premium {
        Some(p) => p,
        None => price_unchecked(&inputs(kind, strike, m)).price,
    };
    Ok(PricedLeg {
        kind: l.kind,
        strike: Some(strike),
        quantity: l.quantity,
        premium,
        premium_from_model: l.premium.is_none(),
    })
}

/// The payoff at expiry as linear pieces between the strikes.
struct Pieces<'a> {
    legs: &'a [PricedLeg],
    /// The distinct strikes, ascending.
    knots: Vec<f64>,
}

impl<'a> Pieces<'a> {
    fn of(legs: &'a [PricedLeg]) -> Self {
        let mut knots: Vec<f64> = legs.iter().filter_map(|l| l.strike).collect();
        knots.sort_by(f64::total_cmp);
        knots.dedup();
        Pieces { legs, knots }
    }

    /// Profit and loss at expiry with the underlying at `s`.
    fn pnl(&self, s: f64) -> f64 {
        self.legs
            .iter()
            .map(|l| {
                let value = match (l.kind.option(), l.strike) {
                    (Some(k), Some(strike)) => k.payoff(s, strike),
                    _ => s,
                };
                l.quantity * (value - l.premium)
            })
            .sum()
    }

    /// The slope just above `s` (exact: a sum of ±quantities).
    fn slope_above(&self, s: f64) -> f64 {
        self.legs
            .iter()
            .map(|l| match (l.kind, l.strike) {
                (LegKind::Call, Some(k)) if s >= k => l.quantity,
                (LegKind::Put, Some(k)) if s < k => -l.quantity,
                (LegKind::Stock, _) => l.quantity,
                _ => 0.0,
            })
            .sum()
    }

    /// The segment starts: 0 and each strike.
    fn starts(&self) -> Vec<f64> {
        let mut s = vec![0.0];
        s.extend(self.knots.iter().copied().filter(|k| *k > 0.0));
        s
    }

    /// Where the profit and loss is zero: on each piece `a + t` solved
    /// from its value at `a` and its exact slope.
    fn breakevens(&self) -> Vec<f64> {
        let starts = self.starts();
        let mut out: Vec<f64> = Vec::new();
        for (i, a) in starts.iter().enumerate() {
            let b = starts.get(i + 1).copied().unwrap_or(f64::INFINITY);
            let (pa, slope) = (self.pnl(*a), self.slope_above(*a));
            if pa == 0.0 {
                out.push(*a);
            }
            if slope != 0.0 {
                let root = a - pa / slope;
                if root > *a && root < b {
                    out.push(root);
                }
            }
        }
        out.dedup_by(|x, y| (*x - *y).abs() <= 1e-12 * y.abs().max(1.0));
        out
    }

    /// (max profit, max loss as a positive amount), None when unbounded.
    /// The underlying cannot fall below 0, so only the last piece can run
    /// to infinity.
    fn extremes(&self) -> (Option<f64>, Option<f64>) {
        let values: Vec<f64> = self.starts().iter().map(|s| self.pnl(*s)).collect();
        let last = self.starts().last().map_or(0.0, |s| self.slope_above(*s));
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        ((last <= 0.0).then_some(hi), (last >= 0.0).then_some(-lo))
    }
}

/// The grid of underlyings: evenly spaced, with the strikes and breakevens
/// inside the range added, sorted.
fn grid(
    legs: &[PricedLeg],
    spot: f64,
    range: Option<(f64, f64)>,
    points: Option<usize>,
    breakevens: &[f64],
) -> Result<Vec<f64>, OptionError> {
    let strikes = legs.iter().filter_map(|l| l.strike);
    let lo_all = strikes.clone().fold(spot, f64::min);
    let hi_all = strikes.fold(spot, f64::max);
    let (low, high) = range.unwrap_or((0.5 * lo_all, 1.5 * hi_all));
    if !(low.is_finite() && high.is_finite() && low >= 0.0 && high > low && high <= 1e12) {
        return Err(OptionError::Strategy(format!(
            "'spot_range' must be two numbers 0 ≤ low < high ≤ 1e12, got [{low}, {high}]"
        )));
    }
    let n = points.unwrap_or(DEFAULT_POINTS);
    if !(2..=MAX_POINTS).contains(&n) {
        return Err(OptionError::Strategy(format!(
            "'points' must be from 2 to {MAX_POINTS}, got {n}"
        )));
    }
    let step = (high - low) / (n - 1) as f64;
    let mut g: Vec<f64> = (0..n).map(|i| low + step * i as f64).collect();
    g.extend(
        legs.iter()
            .filter_map(|l| l.strike)
            .chain(breakevens.iter().copied())
            .filter(|s| *s >= low && *s <= high),
    );
    g.sort_by(f64::total_cmp);
    g.dedup_by(|x, y| (*x - *y).abs() <= 1e-12 * y.abs().max(1.0));
    Ok(g)
}

/// Σ quantity × each leg's Greeks (a stock's delta is 1, its price the
/// spot).
fn position_greeks(legs: &[PricedLeg], m: &Market) -> Greeks {
    legs.iter().fold(Greeks::default(), |acc, l| {
        let g = match (l.kind.option(), l.strike) {
            (Some(kind), Some(k)) => price_unchecked(&inputs(kind, k, m)),
            _ => Greeks {
                price: m.spot,
                delta: 1.0,
                ..Greeks::default()
            },
        };
        acc.plus(g.scaled(l.quantity))
    })
}

/// The model value under each spot and volatility shock.
fn stress(legs: &[PricedLeg], m: &Market, now: f64) -> Vec<StressRow> {
    let mut rows = Vec::new();
    for dv in VOL_SHIFTS {
        let vol = m.volatility + dv;
        if vol <= 0.0 {
            continue;
        }
        for ds in SPOT_SHIFTS {
            let shocked = Market {
                spot: m.spot * (1.0 + ds),
                volatility: vol,
                ..*m
            };
            let value = position_greeks(legs, &shocked).price;
            rows.push(StressRow {
                spot_shift: ds,
                volatility_shift: dv,
                value,
                pnl: value - now,
            });
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn market() -> Market {
        Market {
            spot: 100.0,
            volatility: 0.2,
            expiry_years: 0.25,
            rate: 0.0,
            dividend_yield: 0.0,
        }
    }

    fn leg(kind: LegKind, strike: f64, quantity: f64, premium: f64) -> Leg {
        Leg {
            kind,
            strike: Some(strike),
            quantity,
            premium: Some(premium),
        }
    }

    #[test]
    fn a_bull_call_spread_has_one_breakeven_and_bounded_ends() {
        let legs = [
            leg(LegKind::Call, 100.0, 1.0, 5.0),
            leg(LegKind::Call, 110.0, -1.0, 2.0),
        ];
        let r = analyze(&legs, &market(), None, None).unwrap();
        assert_eq!(r.net_premium, 3.0);
        assert_eq!(r.name, "bull call spread");
        assert_eq!(r.breakevens, vec![103.0]);
        assert_eq!(r.max_profit, Some(7.0));
        assert_eq!(r.max_loss, Some(3.0));
        // The kinks and the breakeven are grid points, with their values.
        for (s, p) in [(100.0, -3.0), (103.0, 0.0), (110.0, 7.0)] {
            assert!(r.payoff.contains(&(s, p)), "{s} in {:?}", r.payoff);
        }
    }

    #[test]
    fn a_short_straddle_loses_without_bound_above() {
        let legs = [
            leg(LegKind::Call, 100.0, -1.0, 4.0),
            leg(LegKind::Put, 100.0, -1.0, 4.0),
        ];
        let r = analyze(&legs, &market(), None, None).unwrap();
        assert_eq!(r.breakevens, vec![92.0, 108.0]);
        assert_eq!(r.name, "short straddle");
        assert_eq!(r.max_profit, Some(8.0));
        assert_eq!(r.max_loss, None);
        assert!(r.greeks.gamma < 0.0 && r.greeks.vega < 0.0);
    }

    #[test]
    fn a_covered_call_prices_its_leg_and_counts_the_stock() {
        let legs = [
            Leg {
                kind: LegKind::Stock,
                strike: None,
                quantity: 1.0,
                premium: None,
            },
            Leg {
                kind: LegKind::Call,
                strike: Some(110.0),
                quantity: -1.0,
                premium: None,
            },
        ];
        let r = analyze(&legs, &market(), None, None).unwrap();
        assert_eq!(r.name, "covered call");
        let call = r.legs[1].premium;
        assert!(r.legs[1].premium_from_model && call > 0.0 && call < 5.0);
        assert_eq!(r.net_premium, 100.0 - call);
        assert_eq!(r.max_profit, Some(10.0 + call));
        // Loses everything but the premium if the stock goes to 0.
        assert_eq!(r.max_loss, Some(100.0 - call));
        assert_eq!(r.breakevens, vec![100.0 - call]);
        assert!(r.greeks.delta > 0.0 && r.greeks.delta < 1.0);
        assert_eq!(r.stress.len(), 15);
        let up = r
            .stress
            .iter()
            .find(|s| s.spot_shift == 0.1 && s.volatility_shift == 0.0)
            .unwrap();
        assert!(up.pnl > 0.0);
    }

    #[test]
    fn bad_legs_are_named() {
        let legs = [Leg {
            kind: LegKind::Put,
            strike: None,
            quantity: 1.0,
            premium: None,
        }];
        let e = analyze(&legs, &market(), None, None)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "leg 1: a put needs a 'strike'");
    }
}
