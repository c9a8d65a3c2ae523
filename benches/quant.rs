//! The quant desk's speed against its Python references (docs §15.8),
//! side by side on the same inputs:
//!
//! - 10,000 European options with price and Greeks (QuantLib's
//!   `AnalyticEuropeanEngine`);
//! - implied volatility of 10,000 quotes (QuantLib's `impliedVolatility`,
//!   accuracy 1e-10; ours to 1e-15 of σ);
//! - each optimiser on 100 assets × 2,520 daily returns, from the returns
//!   (covariance included): PyPortfolioOpt for min variance, max Sharpe,
//!   max diversification and HRP, scipy's L-BFGS-B for equal risk, numpy
//!   for equal and inverse-volatility weights;
//! - a risk report of a 100-asset book (numpy and scipy).
//!
//! The inputs are made here (seeded) and written for the baseline
//! (`benches/baseline/quant.py`), which runs with the interpreter in
//! `VIBEDESK_BENCH_PYTHON` (default `python3`) and needs the packages of
//! `tests/golden/quant/requirements.txt`; without them only our times
//! print. Each row reports ours, the reference's, and their ratio.
//!
//! `cargo bench --bench quant`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};
use vibedesk::research::backtest::validation::Rng;
use vibedesk::research::options::{OptionInputs, OptionKind, black_scholes, implied_volatility};
use vibedesk::research::portfolio::{Method, OptimizeOptions, optimize};
use vibedesk::research::risk::risk_report;

const OPTIONS: usize = 10_000;
const ASSETS: usize = 100;
const DAYS: usize = 2_520;

/// Standard normals by Box–Muller on a split-mix stream.
struct Normal(Rng);

impl Normal {
    fn uniform(&mut self) -> f64 {
        ((self.0.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn next(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// (kind ±1, spot, strike, days, volatility, rate, yield) per option.
/// Quotes whose time value is under a cent are drawn again: their price
/// pins no volatility (vega ≈ 0), so neither side could invert them.
fn option_grid() -> Vec<[f64; 7]> {
    let mut n = Normal(Rng::new(7));
    let mut grid = Vec::with_capacity(OPTIONS);
    while grid.len() < OPTIONS {
        let kind = if grid.len() % 2 == 0 { 1.0 } else { -1.0 };
        let spot = 100.0;
        let strike = (100.0 * (0.25 * n.next()).exp()).clamp(60.0, 160.0).round();
        let days = (7 + (n.uniform() * 720.0) as i64) as f64;
        let vol = 0.1 + 0.5 * n.uniform();
        let rate = 0.05 * n.uniform();
        let q = 0.03 * n.uniform();
        let g = [kind, spot, strike, days, vol, rate, q];
        let t = days / 365.0;
        let forward_gap = kind * (spot * (-q * t).exp() - strike * (-rate * t).exp());
        if black_scholes(&inputs(&g)).unwrap().price - forward_gap.max(0.0) >= 0.01 {
            grid.push(g);
        }
    }
    grid
}

fn inputs(g: &[f64; 7]) -> OptionInputs {
    OptionInputs {
        kind: if g[0] > 0.0 {
            OptionKind::Call
        } else {
            OptionKind::Put
        },
        spot: g[1],
        strike: g[2],
        expiry_years: g[3] / 365.0,
        volatility: g[4],
        rate: g[5],
        dividend_yield: g[6],
    }
}

/// One-factor daily returns: 100 assets × 2,520 days, column per asset.
fn returns() -> Vec<Vec<f64>> {
    let mut n = Normal(Rng::new(11));
    let market: Vec<f64> = (0..DAYS).map(|_| 0.0003 + 0.01 * n.next()).collect();
    (0..ASSETS)
        .map(|_| {
            let beta = 0.4 + n.uniform();
            let drift = 0.0008 * n.uniform();
            let idio = 0.005 + 0.015 * n.uniform();
            market
                .iter()
                .map(|m| beta * m + drift + idio * n.next())
                .collect()
        })
        .collect()
}

fn write(dir: &Path, name: &str, shape: &[usize], values: impl Iterator<Item = f64>) -> Value {
    let bytes: Vec<u8> = values.flat_map(f64::to_le_bytes).collect();
    std::fs::write(dir.join(format!("{name}.f64")), bytes).unwrap();
    json!(shape)
}

/// Seconds of the fastest of `n` runs of `f`.
fn best<T>(n: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut out = None;
    let mut secs = f64::INFINITY;
    for _ in 0..n {
        let t = Instant::now();
        let r = std::hint::black_box(f());
        secs = secs.min(t.elapsed().as_secs_f64());
        out = Some(r);
    }
    (secs, out.unwrap())
}

fn baseline(dir: &Path) -> Option<Value> {
    if std::env::var_os("VIBEDESK_BENCH_NO_PYTHON").is_some() {
        return None;
    }
    let python = std::env::var("VIBEDESK_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/baseline/quant.py");
    let out = Command::new(&python).arg(script).arg(dir).output().ok()?;
    if !out.status.success() {
        eprintln!(
            "python baseline skipped ({python}: {}); set VIBEDESK_BENCH_PYTHON to an interpreter with tests/golden/quant/requirements.txt",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn main() {
    let grid = option_grid();
    let cols = returns();
    let names: Vec<String> = (0..ASSETS).map(|i| format!("A{i:03}")).collect();
    let weights: Vec<f64> = (0..ASSETS).map(|i| (1 + i % 7) as f64).collect();
    let total: f64 = weights.iter().sum();
    let weights: Vec<f64> = weights.iter().map(|w| w / total).collect();

    // Ours.
    let mut rows: Vec<(String, f64, &str)> = Vec::new();
    let (t, priced) = best(5, || {
        grid.iter()
            .map(|g| black_scholes(&inputs(g)).unwrap())
            .collect::<Vec<_>>()
    });
    rows.push(("10,000 options, price and Greeks".into(), t, "options"));
    let prices: Vec<f64> = priced.iter().map(|g| g.price).collect();
    let (t, ivs) = best(5, || {
        grid.iter()
            .zip(&prices)
            .map(|(g, p)| {
                let o = inputs(g);
                implied_volatility(
                    o.kind,
                    o.spot,
                    o.strike,
                    o.expiry_years,
                    *p,
                    o.rate,
                    o.dividend_yield,
                )
                .map(|iv| iv.volatility)
                .unwrap_or(f64::NAN)
            })
            .collect::<Vec<_>>()
    });
    rows.push(("implied volatility of 10,000 quotes".into(), t, "implied"));
    let iv_err = grid
        .iter()
        .zip(&ivs)
        .map(|(g, v)| (g[4] - v).abs())
        .fold(0.0, f64::max);
    let mut ours_weights = std::collections::BTreeMap::new();
    for m in Method::ALL {
        let (t, p) = best(5, || {
            optimize(&cols, &names, &OptimizeOptions::new(m)).unwrap()
        });
        rows.push((
            format!("{} on 100 assets × 2,520 days", m.as_str()),
            t,
            m.as_str(),
        ));
        ours_weights.insert(m.as_str(), p.weights);
    }
    let (t, rep) = best(5, || risk_report(&cols, &weights, 0.99, 1).unwrap());
    rows.push(("risk report of a 100-asset book".into(), t, "risk_report"));

    // The reference, on the same inputs.
    let dir = tempfile::tempdir().unwrap();
    let shapes = json!({
        "options": write(dir.path(), "options", &[OPTIONS, 7], grid.iter().flatten().copied()),
        "prices": write(dir.path(), "prices", &[OPTIONS], prices.iter().copied()),
        "returns": write(dir.path(), "returns", &[DAYS, ASSETS], (0..DAYS).flat_map(|t| cols.iter().map(move |c| c[t]))),
        "weights": write(dir.path(), "weights", &[1, ASSETS], weights.iter().copied()),
    });
    std::fs::write(dir.path().join("shapes.json"), shapes.to_string()).unwrap();
    let py = baseline(dir.path());

    println!("quant desk: ours against the Python references (best of several runs)\n");
    println!("| case | ours | reference | ratio |\n|---|---|---|---|");
    let mut worst = f64::INFINITY;
    for (name, ours, key) in &rows {
        let theirs = py.as_ref().and_then(|p| p[*key].as_f64());
        let ratio = theirs.map(|t| t / ours);
        if let Some(r) = ratio {
            worst = worst.min(r);
        }
        println!(
            "| {name} | {:.3} ms | {} | {} |",
            ours * 1e3,
            theirs.map_or("—".into(), |t| format!("{:.1} ms", t * 1e3)),
            ratio.map_or("—".into(), |r| format!("{r:.0}×")),
        );
    }
    println!("\nimplied volatility: largest error against the volatility priced {iv_err:.1e}");
    if let Some(p) = &py {
        println!(
            "reference implied volatility: largest error {:.1e}",
            p["implied_max_error"].as_f64().unwrap_or(f64::NAN)
        );
        // The same problems: the weights agree.
        for m in [
            "min_variance",
            "max_sharpe",
            "max_diversification",
            "hrp",
            "risk_parity",
        ] {
            let theirs: Vec<f64> =
                serde_json::from_value(p[format!("{m}_weights")].clone()).unwrap_or_default();
            let diff = ours_weights[m]
                .iter()
                .zip(&theirs)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            println!("{m}: largest weight difference {diff:.1e}");
        }
        let check = &p["risk_check"];
        println!(
            "risk report: historical VaR {:.6} / {:.6}, ES {:.6} / {:.6} (ours / reference)",
            rep.var_historical,
            check["var_historical"].as_f64().unwrap_or(f64::NAN),
            rep.es_historical,
            check["es_historical"].as_f64().unwrap_or(f64::NAN),
        );
        println!("\nslowest ratio: {worst:.0}× (target: 10× or more on every row)");
    }
}
