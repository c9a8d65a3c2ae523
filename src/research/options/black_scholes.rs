//! Black–Scholes–Merton for a European option with a continuous rate `r`
//! and dividend yield `q` (docs §15.2):
//!
//! ```text
//! F = S·e^{(r−q)T}, D = e^{−rT}, s = σ√T, d1 = ln(F/K)/s + s/2, d2 = d1 − s
//! call = D·(F·N(d1) − K·N(d2)),  put = D·(K·N(−d2) − F·N(−d1))
//! ```
//!
//! Greeks in QuantLib's units. Each tail is computed on its own side
//! (`N(−d1)`, never `1 − N(d1)`), so a deep out-of-the-money put keeps its
//! digits; QuantLib's own `1 − N(d1)` does not, which is why the goldens
//! also carry a 50-digit value (tests/golden/quant).

use super::{Greeks, OptionError, OptionInputs, OptionKind};
use crate::research::stats::{norm_cdf, norm_pdf};

/// The price and Greeks of a European option.
pub fn black_scholes(inputs: &OptionInputs) -> Result<Greeks, OptionError> {
    let o = inputs.checked()?;
    Ok(price_unchecked(&o))
}

/// [`black_scholes`] on inputs already checked (the solvers' inner loop).
pub(crate) fn price_unchecked(o: &OptionInputs) -> Greeks {
    let t = o.expiry_years;
    let sqrt_t = t.sqrt();
    let std_dev = o.volatility * sqrt_t;
    let df_r = (-o.rate * t).exp();
    let df_q = (-o.dividend_yield * t).exp();
    let forward = o.spot * df_q / df_r;
    let d1 = (forward / o.strike).ln() / std_dev + 0.5 * std_dev;
    let d2 = d1 - std_dev;
    let pdf1 = norm_pdf(d1);
    let gamma = df_q * pdf1 / (o.spot * std_dev);
    let vega = o.spot * df_q * pdf1 * sqrt_t;
    // The time-decay term every option shares: −S·e^{−qT}·n(d1)·σ/(2√T).
    let decay = -o.spot * df_q * pdf1 * o.volatility / (2.0 * sqrt_t);
    match o.kind {
        OptionKind::Call => {
            let (n1, n2) = (norm_cdf(d1), norm_cdf(d2));
            let price = df_r * (forward * n1 - o.strike * n2);
            Greeks {
                price,
                delta: df_q * n1,
                gamma,
                vega,
                theta: decay - o.rate * o.strike * df_r * n2
                    + o.dividend_yield * o.spot * df_q * n1,
                rho: o.strike * t * df_r * n2,
            }
        }
        OptionKind::Put => {
            let (n1, n2) = (norm_cdf(-d1), norm_cdf(-d2));
            let price = df_r * (o.strike * n2 - forward * n1);
            Greeks {
                price,
                delta: -df_q * n1,
                gamma,
                vega,
                theta: decay + o.rate * o.strike * df_r * n2
                    - o.dividend_yield * o.spot * df_q * n1,
                rho: -o.strike * t * df_r * n2,
            }
        }
    }
}

/// The no-arbitrage bounds of a European price: (intrinsic on the
/// forward, the discounted asset or strike).
pub(crate) fn price_bounds(o: &OptionInputs) -> (f64, f64) {
    let df_r = (-o.rate * o.expiry_years).exp();
    let df_q = (-o.dividend_yield * o.expiry_years).exp();
    let (s, k) = (o.spot * df_q, o.strike * df_r);
    match o.kind {
        OptionKind::Call => ((s - k).max(0.0), s),
        OptionKind::Put => ((k - s).max(0.0), k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(kind: OptionKind) -> OptionInputs {
        OptionInputs {
            kind,
            spot: 100.0,
            strike: 100.0,
            expiry_years: 1.0,
            volatility: 0.2,
            rate: 0.05,
            dividend_yield: 0.0,
        }
    }

    #[test]
    fn the_textbook_at_the_money_call() {
        // Hull's classic: S = K = 100, T = 1, σ = 20 %, r = 5 % → 10.4506.
        let g = black_scholes(&inputs(OptionKind::Call)).unwrap();
        assert!((g.price - 10.450_583_572_185_565).abs() < 1e-12, "{g:?}");
        assert!((g.delta - 0.636_830_651_175_619).abs() < 1e-12);
    }

    #[test]
    fn put_call_parity_holds() {
        for q in [0.0, 0.03] {
            let mut c = inputs(OptionKind::Call);
            c.dividend_yield = q;
            c.strike = 120.0;
            let p = OptionInputs {
                kind: OptionKind::Put,
                ..c
            };
            let (gc, gp) = (black_scholes(&c).unwrap(), black_scholes(&p).unwrap());
            let parity = 100.0 * (-q).exp() - 120.0 * (-0.05f64).exp();
            assert!((gc.price - gp.price - parity).abs() < 1e-12);
            assert!((gc.delta - gp.delta - (-q).exp()).abs() < 1e-14);
            assert_eq!(gc.gamma, gp.gamma);
        }
    }

    #[test]
    fn bad_inputs_name_the_field() {
        let mut o = inputs(OptionKind::Put);
        o.volatility = 0.0;
        let e = black_scholes(&o).unwrap_err().to_string();
        assert!(
            e.contains("'volatility' must be") && e.contains("got 0"),
            "{e}"
        );
        o.volatility = 0.2;
        o.rate = f64::NAN;
        assert!(
            black_scholes(&o)
                .unwrap_err()
                .to_string()
                .contains("'rate'")
        );
    }
}
