//! The `pairs` built-in (docs §7.7) against an independent computation:
//! `tests/fixtures/pairs/golden.json` holds two synthetic legs and, for two
//! parameter sets, the hedge ratio, spread, z-score, positions, weights and
//! the spread's AR(1) half-life as numpy computed them
//! (`tests/fixtures/pairs/generate.py`, committed with its output; no
//! Python needed here). Then the engine trades the pair: both legs fill on
//! the same bar in opposite directions, each paying its own commission and
//! slippage, and the result reports the pair's figures.

use chrono::NaiveDate;
use serde_json::{Map, Value, json};
use vibedesk::research::backtest::config::BacktestConfig;
use vibedesk::research::backtest::pairs::{self, PairsParams};
use vibedesk::research::backtest::strategies::Builtin;
use vibedesk::research::backtest::{self as bt, StrategySpec};
use vibedesk::research::data::{Bars, PriceSeries, embedded};

fn golden() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/pairs/golden.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap_or(f64::NAN))
        .collect()
}

/// The golden legs as bars (every price the close) from its first date.
fn legs(g: &Value) -> (Bars, Bars) {
    let first = NaiveDate::parse_from_str(g["first_date"].as_str().unwrap(), "%Y-%m-%d").unwrap();
    let mut out = (Bars::default(), Bars::default());
    for (i, (a, b)) in floats(&g["close_a"])
        .into_iter()
        .zip(floats(&g["close_b"]))
        .enumerate()
    {
        let d = first + chrono::Duration::days(i as i64);
        out.0.push(d, a, a, a, a, 1000.0);
        out.1.push(d, b, b, b, b, 1000.0);
    }
    out
}

fn params(case: &Value) -> PairsParams {
    let p: Map<String, Value> = serde_json::from_value(case["params"].clone()).unwrap();
    match Builtin::parse("pairs", &p, "strategy").unwrap() {
        Builtin::Pairs(p) => p,
        other => panic!("{other:?}"),
    }
}

/// Equal where both are numbers (to `tol`, relative) or both are missing.
fn same_series(name: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{name}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else {
            (g - w).abs() <= tol * w.abs().max(1.0)
        };
        assert!(ok, "{name}[{i}]: {g} vs numpy {w}");
    }
}

#[test]
fn pairs_strategy_matches_the_numpy_golden() {
    let g = golden();
    let (a, b) = legs(&g);
    let cases = g["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    for case in cases {
        let p = params(case);
        let path = pairs::path(&p, &a, &b);
        same_series("beta", &path.beta, &floats(&case["beta"]), 1e-9);
        same_series("alpha", &path.alpha, &floats(&case["alpha"]), 1e-9);
        same_series("spread", &path.spread, &floats(&case["spread"]), 1e-9);
        same_series("z", &path.z, &floats(&case["z"]), 1e-7);
        assert_eq!(path.position, floats(&case["position"]), "{p:?}");
        same_series("weight_a", &path.weight_a, &floats(&case["weight_a"]), 1e-9);
        same_series("weight_b", &path.weight_b, &floats(&case["weight_b"]), 1e-9);
        let trades = path
            .position
            .windows(2)
            .filter(|w| w[1] != 0.0 && w[1] != w[0])
            .count();
        assert!(trades >= 3, "the golden case trades: {trades}");
        let (_, slope) = pairs::ar1(&path.spread).unwrap();
        let want_b = case["ar1_b"].as_f64().unwrap();
        assert!((slope - want_b).abs() < 1e-9, "{slope} vs {want_b}");
        let half = pairs::half_life(slope).unwrap();
        let want_half = case["half_life"].as_f64().unwrap();
        assert!((half - want_half).abs() < 1e-7, "{half} vs {want_half}");
        // The reported figures are the last ones of the path.
        let stats = pairs::stats(&p, &[&a, &b], &[&a, &b], &["AAA".into(), "BBB".into()]);
        let last_beta = *floats(&case["beta"]).last().unwrap();
        assert!((stats["pair_hedge_ratio"].as_f64().unwrap() - last_beta).abs() < 1e-6);
        let last_z = *floats(&case["z"]).last().unwrap();
        assert!((stats["pair_zscore"].as_f64().unwrap() - last_z).abs() < 1e-6);
        assert!((stats["pair_half_life_bars"].as_f64().unwrap() - want_half).abs() < 1e-6);
        assert_eq!(stats["pair_legs"], "AAA/BBB");
    }
    // The stop case stops out at least once and then waits for |z| < entry.
    let p = params(&cases[1]);
    let path = pairs::path(&p, &a, &b);
    let stop = p.stop.unwrap();
    let stopped: Vec<usize> = (1..path.z.len())
        .filter(|&t| {
            path.position[t - 1] != 0.0 && path.position[t] == 0.0 && path.z[t].abs() >= stop
        })
        .collect();
    assert!(!stopped.is_empty(), "the golden's stop case stops");
    let t = stopped[0] + 1;
    assert!(
        path.z[t].abs() >= p.entry && path.position[t] == 0.0,
        "no re-entry while still stretched"
    );
}

/// `bars` as a loaded series named `symbol` (a real provenance borrowed
/// from an embedded load).
fn series(symbol: &str, bars: Bars) -> PriceSeries {
    let day = NaiveDate::from_ymd_opt(2010, 1, 4);
    let mut s = embedded::load("AAPL", day, day).unwrap();
    s.symbol = symbol.into();
    s.bars = bars;
    s.source_rows = None;
    s
}

#[test]
fn a_pair_trades_both_legs_with_costs_on_each() {
    let g = golden();
    let (a, b) = legs(&g);
    let cfg = BacktestConfig::from_value(
        &json!({"codes": ["AAA", "BBB"], "start_date": g["first_date"], "end_date": "2011-12-31",
                "commission_rate": 0.001, "slippage": 0.0005,
                "strategy": {"name": "pairs", "params": g["cases"][0]["params"]}}),
        false,
    )
    .unwrap();
    let StrategySpec::Builtin(Builtin::Pairs(p)) = cfg.strategy.clone() else {
        panic!("{:?}", cfg.strategy)
    };
    let path = pairs::path(&p, &a, &b);
    let all = [series("AAA", a.clone()), series("BBB", b.clone())];
    let signals = bt::rust_signals(&cfg.strategy, &all);
    assert_eq!(signals, vec![path.weight_a.clone(), path.weight_b.clone()]);
    let out = bt::evaluate(&cfg, &all, &signals, None);
    let fills = &out.sim.fills;
    // The first entry: signalled at a close, filled at the next open, both legs.
    let first = path.position.iter().position(|x| *x != 0.0).unwrap();
    let opening: Vec<_> = fills.iter().filter(|f| f.bar == first + 1).collect();
    assert_eq!(opening.len(), 2, "{fills:?}");
    assert_ne!(opening[0].symbol, opening[1].symbol);
    assert!(
        opening[0].signed_quantity * opening[1].signed_quantity < 0.0,
        "one long, one short"
    );
    for f in fills
        .iter()
        .filter(|f| f.reason != bt::engine::Reason::EndOfBacktest)
    {
        let open = if f.symbol == 0 {
            a.open[f.bar]
        } else {
            b.open[f.bar]
        };
        let buy = f.signed_quantity > 0.0;
        let want = if buy { open * 1.0005 } else { open * 0.9995 };
        assert!((f.execution_price - want).abs() < 1e-9, "{f:?}");
        assert!(
            (f.fee - f.notional * 0.001).abs() < 1e-9,
            "commission on every leg: {f:?}"
        );
    }
    // The legs' dollar ratio at entry is the hedge ratio (whole shares aside).
    let (na, nb) = opening.iter().fold((0.0, 0.0), |acc, f| {
        if f.symbol == 0 {
            (f.notional, acc.1)
        } else {
            (acc.0, f.notional)
        }
    });
    assert!(
        (nb / na - path.beta[first]).abs() < 0.01,
        "{} vs {}",
        nb / na,
        path.beta[first]
    );
    // Every cent is accounted for: the final value is the cash plus each
    // round trip's P&L after both legs' fees.
    let pnl: f64 = out.sim.trades.iter().map(|t| t.pnl).sum();
    assert!((out.metrics.final_value - (cfg.initial_cash + pnl)).abs() < 1e-6);
    let fees: f64 = fills.iter().map(|f| f.fee).sum();
    let trip_fees: f64 = out.sim.trades.iter().map(|t| t.fees).sum();
    assert!(fees > 0.0 && (fees - trip_fees).abs() < 1e-6);
    assert!(out.sim.trades.iter().any(|t| t.side < 0), "a short leg");
    // The result names the pair's figures.
    for k in ["pair_hedge_ratio", "pair_zscore", "pair_half_life_bars"] {
        assert!(
            out.scalars[k].as_f64().is_some(),
            "{k} in {:?}",
            out.scalars
        );
    }
}

#[test]
fn a_pair_config_is_checked_up_front() {
    let one = BacktestConfig::from_value(
        &json!({"codes": ["AAPL"], "start_date": "2010-01-01", "end_date": "2011-01-01",
                "strategy": {"name": "pairs"}}),
        false,
    )
    .unwrap_err();
    assert!(one.to_string().contains("exactly two codes"), "{one}");
    let bad = BacktestConfig::from_value(
        &json!({"codes": ["AAPL", "MSFT"], "start_date": "2010-01-01", "end_date": "2011-01-01",
                "allow_short": false,
                "strategy": {"name": "pairs", "params": {"entry": 1, "exit": 1.5, "stop": 0.5, "z_window": 90}}}),
        false,
    )
    .unwrap_err();
    let keys: Vec<&str> = bad.issues.iter().map(|i| i.key.as_str()).collect();
    for k in [
        "strategy.params.exit",
        "strategy.params.stop",
        "strategy.params.z_window",
        "allow_short",
    ] {
        assert!(keys.contains(&k), "{k} in {keys:?}");
    }
}
