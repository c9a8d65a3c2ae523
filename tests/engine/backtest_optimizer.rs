//! Portfolio optimisers inside backtests (docs §7.4.2): weights from the
//! trailing window only (a perturbation of later prices leaves earlier
//! weights unchanged), equal to `portfolio_optimize`'s on that window, and
//! the run card and the answer naming the optimizer that ran.

use chrono::NaiveDate;
use serde_json::{Value, json};

use vibedesk::research::backtest::{self as bt, BacktestConfig};
use vibedesk::research::data::{PriceSeries, embedded};
use vibedesk::research::portfolio::{Method, OptimizeOptions, optimize};

const CODES: [&str; 5] = ["AAPL", "MSFT", "JPM", "XOM", "KO"];

fn day(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

fn config(method: &str) -> BacktestConfig {
    BacktestConfig::from_value(
        &json!({"codes": CODES, "start_date": "2009-01-01", "end_date": "2011-12-31", "source": "embedded",
                "strategy": "buy_and_hold", "optimizer": method,
                "optimizer_params": {"lookback": 126, "rebalance_bars": 21}}),
        false,
    )
    .unwrap()
}

/// The codes over the range with `history` bars before it.
fn load(cfg: &BacktestConfig, from: NaiveDate) -> Vec<PriceSeries> {
    CODES
        .iter()
        .map(|c| embedded::load(c, Some(from), Some(cfg.end_date)).unwrap())
        .collect()
}

/// Targets of a run whose warm-up history is `loaded` (cut as the engine
/// cuts it).
fn targets(
    cfg: &BacktestConfig,
    loaded: &[PriceSeries],
) -> (Vec<NaiveDate>, Vec<f64>, bt::Outcome) {
    let range = bt::in_range(cfg, loaded);
    let signals = bt::rust_signals(&cfg.strategy, loaded);
    let (signals, entry) = bt::signals_in_range(&cfg.strategy, signals, &range.offsets);
    let panel = bt::panel_for(cfg, &range.series);
    let warm = bt::Warm {
        entry: &entry,
        record: &range.warmup,
        history: loaded,
    };
    let out = bt::evaluate_warm(panel, cfg, &range.series, &signals, Some(warm), None);
    (out.panel.dates.clone(), out.targets.clone(), out)
}

/// Multiplies every price after `after` by a factor that differs by day and
/// code, as if later history had been different.
fn perturbed(loaded: &[PriceSeries], after: NaiveDate) -> Vec<PriceSeries> {
    loaded
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let mut s = s.clone();
            let b = &mut s.bars;
            let mut f = 1.0;
            for i in 0..b.len() {
                if b.dates[i] > after {
                    f *= 1.0 + 0.03 * (((i * 7 + k * 13) % 11) as f64 - 5.0) / 5.0;
                    b.open[i] *= f;
                    b.high[i] *= f;
                    b.low[i] *= f;
                    b.close[i] *= f;
                }
            }
            s
        })
        .collect()
}

/// Prices change from a rebalance's own bar on: that rebalance (it trades
/// at the open, on closes up to the day before) and every bar before it
/// keep their weights; later ones move. Reading the bar's own close would
/// change the rebalance's weights.
#[test]
fn weights_depend_on_the_trailing_window_only() {
    let cfg = config("min_variance");
    let loaded = load(&cfg, day("2007-01-01"));
    let (dates, base, out) = targets(&cfg, &loaded);
    let k = CODES.len();
    let rebalance = out.nested["optimizer"]["rebalances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| day(r["date"].as_str().unwrap()))
        .find(|d| *d > day("2010-06-30"))
        .unwrap();
    let at = dates.iter().position(|d| *d == rebalance).unwrap();
    // Every price after the bar before the rebalance changes.
    let cut = dates[at - 1];
    let (_, moved, _) = targets(&cfg, &perturbed(&loaded, cut));
    assert_eq!(
        base[..=at * k + k - 1],
        moved[..=at * k + k - 1],
        "no look-ahead"
    );
    // The rebalance really moved with its window: the next one sees the
    // changed prices.
    assert_ne!(
        base[(at + 1) * k..],
        moved[(at + 1) * k..],
        "the perturbation matters"
    );
    // Fully invested, every bar, within the bounds.
    for row in base.chunks(k) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12, "{row:?}");
        assert!(row.iter().all(|w| *w >= 0.0));
    }
    assert_eq!(out.scalars["optimizer"], "min_variance");
    assert_eq!(out.scalars["optimizer_fallbacks"], 0);
    // Re-estimated about monthly over three years.
    let runs = out.scalars["optimizer_rebalances"].as_u64().unwrap();
    assert!((30..=40).contains(&runs), "{runs}");
}

/// A rebalance's weights are `portfolio_optimize`'s on the 126 daily
/// returns before the bar, recomputed here from the embedded closes.
#[test]
fn a_rebalance_equals_the_optimizer_on_its_window() {
    for method in ["min_variance", "max_diversification", "hrp"] {
        let cfg = config(method);
        let loaded = load(&cfg, day("2007-01-01"));
        let (dates, targets, out) = targets(&cfg, &loaded);
        let k = CODES.len();
        let rebalances = out.nested["optimizer"]["rebalances"]
            .as_array()
            .unwrap()
            .clone();
        let second = &rebalances[1];
        let at = day(second["date"].as_str().unwrap());
        let t = dates.iter().position(|d| *d == at).unwrap();
        // The window: the 127 closes before the bar (all five trade on the
        // same days in the embedded set).
        let columns: Vec<Vec<f64>> = loaded
            .iter()
            .map(|s| {
                let i = s.bars.index_of(at).unwrap();
                let c = &s.bars.close[i - 127..i];
                c.windows(2).map(|w| w[1] / w[0] - 1.0).collect()
            })
            .collect();
        let names: Vec<String> = CODES.iter().map(|s| s.to_string()).collect();
        let p = optimize(
            &columns,
            &names,
            &OptimizeOptions::new(Method::parse(method).unwrap()),
        )
        .unwrap();
        for (s, w) in p.weights.iter().enumerate() {
            assert!(
                (targets[t * k + s] - w).abs() < 1e-12,
                "{method} {s}: {} vs {w}",
                targets[t * k + s]
            );
            let logged = second["weights"][CODES[s]].as_f64().unwrap_or(0.0);
            assert!((logged - w).abs() < 1e-12);
        }
    }
}

#[test]
fn an_optimizer_defaults_to_rebalancing_and_warms_up_its_window() {
    let cfg = config("risk_parity");
    assert_eq!(cfg.position_adjustment, bt::Adjustment::Rebalance);
    assert_eq!(cfg.warmup_bars(), 127, "the lookback and the bar before");
    let explicit = BacktestConfig::from_value(
        &json!({"codes": ["AAPL", "MSFT"], "start_date": "2009-01-01", "end_date": "2011-12-31",
                "strategy": "buy_and_hold", "optimizer": "hrp", "position_adjustment": "hold"}),
        false,
    )
    .unwrap();
    assert_eq!(explicit.position_adjustment, bt::Adjustment::Hold);
}

/// The backtest through the real binary: the run card and the metrics name
/// the optimizer, and the summary line says it.
#[tokio::test]
async fn the_run_card_and_summary_say_which_optimizer_ran() {
    let home = tempfile::tempdir().unwrap();
    let run = home.path().join("run");
    let cfg_path = home.path().join("cfg.json");
    std::fs::write(
        &cfg_path,
        json!({"codes": ["AAPL", "MSFT", "IBM"], "start_date": "2010-01-01", "end_date": "2011-12-31",
               "source": "embedded", "strategy": "buy_and_hold", "optimizer": "max_sharpe",
               "optimizer_params": {"max_weight": 0.5}})
        .to_string(),
    )
    .unwrap();
    let out = crate::support::harness::vibedesk(home.path())
        .args([
            "backtest",
            run.to_str().unwrap(),
            "--config",
            cfg_path.to_str().unwrap(),
            "--offline",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let card: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run_card.json")).unwrap()).unwrap();
    let line = card["backtest"]["optimizer"].as_str().unwrap();
    assert!(
        line.starts_with("max_sharpe optimizer on the trailing 252 bars")
            && line.contains("weights 0 to 0.5"),
        "{line}"
    );
    assert_eq!(card["assumptions"]["optimizer"].as_str(), Some(line));
    assert_eq!(card["backtest"]["position_adjustment"], "rebalance");
    assert_eq!(card["metrics"]["optimizer"], "max_sharpe");
    let md = std::fs::read_to_string(run.join("run_card.md")).unwrap();
    assert!(md.contains("Weights: the max_sharpe optimizer"), "{md}");
    assert!(
        card["metrics"]["strategy"]
            .as_str()
            .unwrap()
            .ends_with("weights by the max_sharpe optimizer"),
        "{}",
        card["metrics"]
    );
}
