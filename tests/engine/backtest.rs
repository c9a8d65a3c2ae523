//! The backtest engine (spec §7) end to end: the SMA crossover against an
//! independent reference, every §7.5 metric on a hand-built series, config
//! and rule errors, the `backtest` / `read_artifact` tools through the real
//! sandbox, the Python `SignalEngine` path (skipped cleanly without
//! pandas), and the `backtest`, `data` and `engine` commands.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::outside::Outside;

use chrono::NaiveDate;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::research::backtest::config::BacktestConfig;
use vibedesk::research::backtest::engine::Reason;
use vibedesk::research::backtest::metrics::{self, TradeStat};
use vibedesk::research::backtest::{self as bt, python};
use vibedesk::research::data::{embedded, local};
use vibedesk::sandbox::{RunnerConfig, UserPolicy};
use vibedesk::tools::builtin::backtest::{BacktestToolConfig, register_backtest_tools};
use vibedesk::tools::{BackgroundQueue, Registry, ToolContext};

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");

fn d(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

fn close_rel(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * a.abs().max(b.abs()).max(1.0)
}

// ---------------------------------------------------------------------------
// The SMA crossover against an independent reference.
//
// How the reference is computed (deliberately unlike the engine): one
// scalar loop over AAPL's embedded bars with
// - SMAs as plain window sums recomputed at every bar (the engine uses
//   pandas-style compensated rolling sums from `indicators`);
// - the signal of bar i−1 acted on at bar i's open (the engine shifts a
//   target matrix);
// - the share count found in closed form: the most whole shares with
//   q·open ≤ equity (the weight cap) whose cost q·p + fee fits the cash,
//   searched downward from ⌊cash / (p·(1 + fee))⌋ (the engine bisects a
//   common scale factor);
// - P&L as proceeds − exit fee − (entry cost + entry fee).
// US defaults: slippage 0.0005 (buys pay open·1.0005, sells get
// open·0.9995), commission 0.001 as configured, whole shares; the position
// left at the end is sold at the last close with slippage and fee.

struct RefTrade {
    entry: NaiveDate,
    exit: NaiveDate,
    qty: f64,
    entry_price: f64,
    exit_price: f64,
    pnl: f64,
}

fn naive_sma(x: &[f64], i: usize, w: usize) -> Option<f64> {
    if i + 1 < w {
        return None;
    }
    let mut s = 0.0;
    for v in &x[i + 1 - w..=i] {
        s += v;
    }
    Some(s / w as f64)
}

fn reference(
    bars: &vibedesk::research::data::Bars,
    cash0: f64,
    fee: f64,
    slip: f64,
) -> (Vec<f64>, Vec<RefTrade>) {
    let n = bars.len();
    let sig: Vec<bool> = (0..n)
        .map(
            |i| match (naive_sma(&bars.close, i, 20), naive_sma(&bars.close, i, 50)) {
                (Some(f), Some(s)) => f > s,
                _ => false,
            },
        )
        .collect();
    let mut cash = cash0;
    let mut shares = 0.0f64;
    let mut entry: Option<(NaiveDate, f64, f64)> = None; // date, price, cost incl. fee
    let mut trades = Vec::new();
    let mut equity = vec![cash0];
    let sell = |shares: f64, px: f64, cash: &mut f64| {
        let proceeds = shares * px;
        let f = proceeds * fee;
        *cash += proceeds - f;
        proceeds - f
    };
    for i in 1..n {
        let want = sig[i - 1];
        if want && shares == 0.0 {
            let px = bars.open[i] * (1.0 + slip);
            let cap = (cash / bars.open[i]).floor();
            let mut q = (cash / (px * (1.0 + fee))).floor().min(cap);
            while q > 0.0 && q * px + q * px * fee > cash {
                q -= 1.0;
            }
            let cost = q * px + q * px * fee;
            cash -= cost;
            shares = q;
            entry = Some((bars.dates[i], px, cost));
        } else if !want && shares > 0.0 {
            let px = bars.open[i] * (1.0 - slip);
            let net = sell(shares, px, &mut cash);
            let (ed, ep, cost) = entry.take().unwrap();
            trades.push(RefTrade {
                entry: ed,
                exit: bars.dates[i],
                qty: shares,
                entry_price: ep,
                exit_price: px,
                pnl: net - cost,
            });
            shares = 0.0;
        }
        equity.push(cash + shares * bars.close[i]);
    }
    if shares > 0.0 {
        let px = bars.close[n - 1] * (1.0 - slip);
        let net = sell(shares, px, &mut cash);
        let (ed, ep, cost) = entry.take().unwrap();
        trades.push(RefTrade {
            entry: ed,
            exit: bars.dates[n - 1],
            qty: shares,
            entry_price: ep,
            exit_price: px,
            pnl: net - cost,
        });
        *equity.last_mut().unwrap() = cash;
    }
    (equity, trades)
}

#[test]
fn sma_crossover_matches_an_independent_reference() {
    let cfg = BacktestConfig::from_value(
        &json!({"codes": ["AAPL"], "start_date": "2004-01-01", "end_date": "2012-12-31", "source": "embedded",
                "initial_cash": 100000, "commission_rate": 0.001,
                "strategy": {"name": "sma_crossover", "params": {"fast": 20, "slow": 50}}}),
        false,
    )
    .unwrap();
    let series = embedded::load("AAPL", Some(cfg.start_date), Some(cfg.end_date)).unwrap();
    let signals = bt::rust_signals(&cfg.strategy, std::slice::from_ref(&series));
    let out = bt::evaluate(&cfg, std::slice::from_ref(&series), &signals, None);
    let (ref_equity, ref_trades) = reference(&series.bars, 100_000.0, 0.001, 0.0005);

    assert_eq!(out.sim.equity.len(), ref_equity.len());
    for (i, (a, b)) in out.sim.equity.iter().zip(&ref_equity).enumerate() {
        assert!(
            close_rel(*a, *b, 1e-9),
            "bar {i} ({}): engine {a} reference {b}",
            series.bars.dates[i]
        );
    }
    assert!(
        ref_trades.len() > 20,
        "a meaningful number of trades: {}",
        ref_trades.len()
    );
    assert_eq!(out.sim.trades.len(), ref_trades.len());
    for (t, r) in out.sim.trades.iter().zip(&ref_trades) {
        assert_eq!(out.panel.dates[t.entry_bar], r.entry);
        assert_eq!(out.panel.dates[t.exit_bar], r.exit);
        assert_eq!(t.qty, r.qty, "{}", r.entry);
        assert!(close_rel(t.entry_price, r.entry_price, 1e-12));
        assert!(close_rel(t.exit_price, r.exit_price, 1e-12));
        assert!(
            (t.pnl - r.pnl).abs() < 1e-6,
            "{} {} vs {}",
            r.entry,
            t.pnl,
            r.pnl
        );
    }
    let last = out.sim.trades.last().unwrap();
    assert!(matches!(
        last.exit_reason,
        Reason::EndOfBacktest | Reason::Signal
    ));
    assert_eq!(out.metrics.trade_count, ref_trades.len());
    assert!(close_rel(
        out.metrics.final_value,
        *ref_equity.last().unwrap(),
        1e-9
    ));
    // Fills and round trips agree: every trip is one buy and one sell.
    assert_eq!(out.sim.fills.len(), 2 * ref_trades.len());
}

// ---------------------------------------------------------------------------
// Every §7.5 metric on a hand-built series. The expected values were
// computed with pandas from the definitions (pct_change().fillna(0),
// std(ddof=1), cummax().clip(lower=C), Series.cov / var, round()):
//   E = [100, 110, 99, 121, 121, 96.8], C = 100, B = 252,
//   b = [0, .05, -.02, .1, 0, -.1], trade P&L [10, -5, 8, -2, -3] held
//   [3, 0, 2, 5, 1] bars / [4, 0, 2, 7, 1] days, turnover [0, .5, 0, .25, 0, .1].

#[test]
fn every_metric_matches_its_definition_on_a_hand_built_series() {
    let eq = [100.0, 110.0, 99.0, 121.0, 121.0, 96.8];
    let dates: Vec<NaiveDate> = (0..6)
        .map(|i| d("2020-01-01") + chrono::Duration::days(i))
        .collect();
    let trades: Vec<TradeStat> = [
        (10.0, 3, 4),
        (-5.0, 0, 0),
        (8.0, 2, 2),
        (-2.0, 5, 7),
        (-3.0, 1, 1),
    ]
    .iter()
    .map(|&(pnl, holding_bars, holding_days)| TradeStat {
        pnl,
        holding_bars,
        holding_days,
    })
    .collect();
    let bench = [0.0, 0.05, -0.02, 0.1, 0.0, -0.1];
    let turnover = [0.0, 0.5, 0.0, 0.25, 0.0, 0.1];
    let per_bar = |risk_free| metrics::PerBar {
        benchmark: &bench,
        risk_free,
        turnover: &turnover,
    };
    let m = metrics::compute(&eq, &dates, 100.0, Some(252.0), &trades, per_bar(&[]));
    let near = |a: f64, b: f64| (a - b).abs() < 1e-12 * b.abs().max(1.0);
    assert_eq!(m.final_value, 96.8);
    assert!(near(m.total_return, -0.03200000000000003));
    // (1 − 0.032)^(252/6) − 1
    assert!(
        near(m.annual_return, -0.7448679568662615),
        "{}",
        m.annual_return
    );
    assert!(near(m.sharpe, 0.3976588109253669), "{}", m.sharpe);
    // Peak 121 → 96.8: −20 %.
    assert!(near(m.max_drawdown, -0.2));
    assert_eq!(m.calmar, -3.7243);
    assert_eq!(m.sortino, 0.8315);
    assert_eq!(m.win_rate, 0.4);
    assert_eq!(m.profit_loss_ratio, 2.7);
    assert_eq!(m.profit_factor, 1.8);
    assert_eq!(m.max_consecutive_loss, 2);
    // Trades held > 0 bars: 3, 2, 5, 1 bars → 2.75 → 2.8; 4, 2, 7, 1 days → 3.5.
    assert_eq!(m.avg_holding_bars, 2.8);
    assert_eq!(m.avg_holding_days, 3.5);
    assert_eq!(m.trade_count, 5);
    assert_eq!(m.benchmark_return, 0.01871);
    assert_eq!(m.excess_return, -0.05071);
    assert_eq!(m.information_ratio, -0.2502);
    assert_eq!(m.tracking_error, 1.305734);
    assert_eq!(m.benchmark_beta, 2.1587);
    assert_eq!(m.avg_turnover, 0.141667);
    assert_eq!(m.total_turnover, 0.85);
    assert_eq!(m.bars_per_year, 252.0);
    // With a risk-free rate f = 0.0002 a bar (f_0 = 0), Sharpe and Sortino
    // measure x = r − f (the same pandas definitions on x).
    let rf = [0.0, 0.0002, 0.0002, 0.0002, 0.0002, 0.0002];
    let with_rf = metrics::compute(&eq, &dates, 100.0, Some(252.0), &trades, per_bar(&rf));
    assert!(
        near(with_rf.sharpe, 0.3797666802533287),
        "{}",
        with_rf.sharpe
    );
    assert_eq!(with_rf.sortino, 0.5615);
    assert_eq!(
        (
            with_rf.total_return,
            with_rf.benchmark_return,
            with_rf.information_ratio
        ),
        (m.total_return, m.benchmark_return, m.information_ratio),
        "only Sharpe and Sortino use the rate"
    );
    // Degenerate cases of the definitions.
    let flat = metrics::compute(
        &[100.0, 100.0],
        &dates[..2],
        100.0,
        Some(252.0),
        &[],
        metrics::PerBar::default(),
    );
    assert_eq!(
        (
            flat.sharpe,
            flat.sortino,
            flat.calmar,
            flat.win_rate,
            flat.profit_factor
        ),
        (0.0, 0.0, 0.0, 0.0, 0.0)
    );
    let wiped = metrics::compute(
        &[100.0, -5.0],
        &dates[..2],
        100.0,
        Some(252.0),
        &[],
        metrics::PerBar::default(),
    );
    assert_eq!(wiped.annual_return, -1.0);
    let nan = metrics::compute(
        &[100.0, f64::NAN, 100.0],
        &dates[..3],
        100.0,
        Some(252.0),
        &[],
        metrics::PerBar::default(),
    );
    assert_eq!(nan.sharpe, 0.0);
    let map = m.to_map();
    assert!(map.contains_key("avg_holding_bars") && map.contains_key("avg_holding_days"));
}

// ---------------------------------------------------------------------------
// Config errors: each names the key and says what to do.

#[test]
fn config_errors_each_give_a_clear_message() {
    let base = json!({"codes": ["AAPL"], "start_date": "2010-01-01", "end_date": "2011-01-01",
                      "strategy": {"name": "buy_and_hold"}});
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"codes": null}),
            "missing_key",
            "`codes`: is required: a non-empty list of symbols",
        ),
        (json!({"codes": []}), "invalid_value", "must not be empty"),
        (
            json!({"codes": "AAPL"}),
            "invalid_value",
            "must be a list of symbols",
        ),
        (
            json!({"codes": ["AAPL", " "]}),
            "invalid_value",
            "`codes[1]`: must be a non-blank symbol",
        ),
        (
            json!({"codes": ["AAPL", "aapl"]}),
            "invalid_value",
            "listed twice",
        ),
        (
            json!({"codes": ["ESZ4"]}),
            "unsupported_market",
            "futures and forex engines are not implemented",
        ),
        (
            json!({"start_date": "yesterday"}),
            "invalid_date",
            "'yesterday' is not a date; write YYYY-MM-DD",
        ),
        (
            json!({"start_date": "2012-01-01"}),
            "invalid_range",
            "after end_date 2011-01-01; swap them",
        ),
        (
            json!({"source": "tushare"}),
            "unknown_source",
            "valid sources: auto, embedded, local, yahoo",
        ),
        (
            json!({"interval": "5m"}),
            "unsupported_interval",
            "daily only; use \"1D\"",
        ),
        (
            json!({"engine": "options"}),
            "unsupported_engine",
            "options engine is not implemented",
        ),
        (
            json!({"position_adjustment": "sometimes"}),
            "invalid_value",
            "use \"hold\" or \"rebalance\"",
        ),
        (
            json!({"rebalance_tolerance": -1}),
            "invalid_value",
            "must be a finite number ≥ 0",
        ),
        (
            json!({"initial_cash": 0}),
            "invalid_value",
            "`initial_cash`: must be a finite number > 0",
        ),
        (
            json!({"commission_rate": "0.1%"}),
            "invalid_value",
            "must be a number, got a string",
        ),
        (
            json!({"leverage": 3}),
            "unsupported_key",
            "positions are fully funded",
        ),
        (
            json!({"optimizer": "markowitz"}),
            "invalid_value",
            "'markowitz' is not one of equal_weight, inverse_volatility, min_variance, max_sharpe, risk_parity, max_diversification, hrp",
        ),
        (
            json!({"constraints": {"max_weight": 0.2}}),
            "unsupported_key",
            "portfolio constraints are not implemented",
        ),
        (
            json!({"intial_cash": 5}),
            "unknown_key",
            "did you mean 'initial_cash'?",
        ),
        (
            json!({"strategy": null}),
            "no_strategy",
            "or write code/signal_engine.py",
        ),
        (
            json!({"strategy": {"name": "turtle"}}),
            "unknown_strategy",
            "built-ins: buy_and_hold, sma_crossover",
        ),
        (
            json!({"strategy": {"name": "sma_crossover", "params": {"fast": 50, "slow": 20}}}),
            "invalid_value",
            "fast (50) must be shorter than slow (20)",
        ),
        (
            json!({"strategy": {"name": "sma_crossover", "params": {"fast": 2.5}}}),
            "invalid_value",
            "`strategy.params.fast`: must be an integer",
        ),
        (
            json!({"strategy": {"name": "rsi", "params": {"perod": 14}}}),
            "unknown_key",
            "did you mean 'period'?",
        ),
        (
            json!({"strategy": {"rules": {"entry": "sma(close, 20 > 5"}}}),
            "rule_parse_error",
            "`strategy.rules.entry`: column 18: expected ',' or ')'",
        ),
        (
            json!({"strategy": {"rules": {"entry": "rsi(close, 14)"}}}),
            "rule_type_error",
            "needs a condition (true/false)",
        ),
        (
            json!({"strategy": {"rules": {"exit": "close < 1"}}}),
            "invalid_strategy",
            "rules need an \"entry\"",
        ),
        (
            json!({"validation": {"walk_forward": {"n_windows": 1}}}),
            "invalid_value",
            "`validation.walk_forward.n_windows`: must be an integer from 2 to 100",
        ),
        (
            json!({"validation": {"bootstrap": {"confidence": 1.0}}}),
            "invalid_value",
            "must be below 1",
        ),
    ];
    for (patch, code, needle) in cases {
        let mut v = base.clone();
        for (k, val) in patch.as_object().unwrap() {
            v[k] = val.clone();
        }
        let e = BacktestConfig::from_value(&v, false).unwrap_err();
        let text = e.to_string();
        assert!(
            e.issues.iter().any(|i| i.code == code),
            "{patch}: expected code {code}, got {text}"
        );
        assert!(
            text.contains(needle),
            "{patch}: expected '{needle}' in: {text}"
        );
    }
    // Bad JSON names the line and column.
    let e = BacktestConfig::from_json_text("{\"codes\": [\"AAPL\",]}", false).unwrap_err();
    assert!(e.to_string().contains("line 1, column"), "{e}");
    // Unknown but unrelated keys are kept as warnings, not errors.
    let mut v = base.clone();
    v["my_notes_field"] = json!(1);
    assert_eq!(
        BacktestConfig::from_value(&v, false).unwrap().warnings,
        vec!["unknown key 'my_notes_field' was ignored"]
    );
}

#[test]
fn every_builtin_and_rules_run_and_validation_is_reproducible() {
    let series: Vec<_> = ["AAPL", "MSFT", "IBM"]
        .iter()
        .map(|c| embedded::load(c, Some(d("2006-01-01")), Some(d("2010-12-31"))).unwrap())
        .collect();
    let strategies = [
        json!({"name": "buy_and_hold"}),
        json!({"name": "sma_crossover", "params": {"allow_short": true}}),
        json!({"name": "ema_crossover"}),
        json!({"name": "rsi_mean_reversion", "params": {"period": 2, "lower": 10, "upper": 90, "exit": 50}}),
        json!({"name": "momentum", "params": {"lookback": 60}}),
        json!({"name": "breakout", "params": {"window": 55, "exit_window": 20, "allow_short": true}}),
        json!({"name": "bollinger_reversion", "params": {"window": 20, "k": 2}}),
        json!({"rules": {"entry": "crosses_above(ema(close, 12), ema(close, 26)) and rsi(close, 14) < 70",
                         "exit": "crosses_below(macd(close, 12, 26, 9), macd_signal(close, 12, 26, 9)) or close < lowest(low, 20) * 1.01"}}),
    ];
    for s in strategies {
        let cfg = BacktestConfig::from_value(
            &json!({"codes": ["AAPL", "MSFT", "IBM"], "start_date": "2006-01-01", "end_date": "2010-12-31",
                    "position_adjustment": "rebalance", "rebalance_tolerance": 0.2, "strategy": s,
                    "validation": {"monte_carlo": {"n_simulations": 200}, "bootstrap": {"n_bootstrap": 200}, "walk_forward": true}}),
            false,
        )
        .unwrap();
        let sig = bt::rust_signals(&cfg.strategy, &series);
        let a = bt::evaluate(&cfg, &series, &sig, None);
        let b = bt::evaluate(&cfg, &series, &sig, None);
        assert_eq!(
            a.validation, b.validation,
            "seeded validation is reproducible"
        );
        assert!(
            a.metrics.final_value.is_finite() && a.metrics.final_value > 0.0,
            "{s}"
        );
        // Gross exposure never exceeds 1 (targets) and cash never goes negative by much.
        for row in a.targets.chunks(3) {
            assert!(row.iter().map(|w| w.abs()).sum::<f64>() <= 1.0 + 1e-12);
        }
        // The last equity point is after the close-out: no weights left.
        assert!(
            a.sim.weights[a.sim.weights.len() - 3..]
                .iter()
                .all(|w| *w == 0.0)
        );
        let v = a.validation.unwrap();
        assert_eq!(v["walk_forward"]["windows"].as_array().unwrap().len(), 5);
        assert!(
            v["bootstrap"]["sharpe"]["ci_low"].as_f64().unwrap()
                <= v["bootstrap"]["sharpe"]["ci_high"].as_f64().unwrap()
        );
    }
}

// ---------------------------------------------------------------------------
// The tools through the real sandbox.

struct Fx {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
}

fn fixture() -> Fx {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = dir.path().join("run");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let ctx = ToolContext {
        call_id: "c1".into(),
        session_id: "s".into(),
        run_dir: run,
        workspace: ws,
        cancel: CancellationToken::new(),
        background: BackgroundQueue::default(),
    };
    Fx { _dir: dir, ctx }
}

fn tool_config(user: UserPolicy) -> BacktestToolConfig {
    BacktestToolConfig {
        engine_program: PathBuf::from(BIN),
        runner: RunnerConfig {
            timeout: Duration::from_secs(60),
            drain_timeout: Duration::from_secs(2),
            user,
            ..RunnerConfig::default()
        },
        cache_dir: None,
        offline: true,
        python: None,
        timeout: Duration::from_secs(60),
        yahoo_base_url: None,
        stooq_base_url: None,
        defaults: Default::default(),
    }
}

/// The `backtest` tool on `config` in the run dir `run` (relative to the
/// session's run dir).
async fn backtest_in(r: &Registry, fx: &Fx, run: &str, config: &Value) -> Value {
    call(
        r,
        "backtest",
        json!({"run_dir": run, "config": config}),
        &fx.ctx,
    )
    .await
}

async fn call(r: &Registry, tool: &str, args: Value, ctx: &ToolContext) -> Value {
    let out = r.get(tool).unwrap().call(args, ctx).await.unwrap();
    serde_json::from_str(&out).unwrap()
}

fn registry(user: UserPolicy) -> Registry {
    let mut r = Registry::new();
    register_backtest_tools(&mut r, tool_config(user)).unwrap();
    r
}

#[tokio::test]
async fn the_backtest_tool_runs_the_engine_in_the_sandbox_and_reports_metrics() {
    let fx = fixture();
    let r = registry(UserPolicy::Auto);
    let t = r.get("backtest").unwrap();
    assert!(!t.readonly() && t.repeatable());
    let cfg = json!({"codes": ["AAPL", "IBM"], "start_date": "2008-01-01", "end_date": "2011-12-31", "source": "embedded",
                     "commission_rate": 0.001, "strategy": {"name": "sma_crossover", "params": {"fast": 10, "slow": 40}},
                     "validation": {"monte_carlo": {"n_simulations": 100}, "walk_forward": {"n_windows": 4}}});
    let out = call(
        &r,
        "backtest",
        json!({"run_dir": "bt1", "config": cfg}),
        &fx.ctx,
    )
    .await;
    assert_eq!(out["status"], "ok", "{out:#}");
    let m = &out["metrics"];
    for k in [
        "total_return",
        "annual_return",
        "sharpe",
        "max_drawdown",
        "win_rate",
        "trade_count",
        "sortino",
        "calmar",
        "avg_holding_bars",
        "avg_holding_days",
        "benchmark_return",
    ] {
        assert!(m.get(k).is_some(), "metric {k} missing: {m:#}");
    }
    assert_eq!(
        m["position_adjustment"], "hold",
        "text metrics keep their type (§12.12)"
    );
    let summary = out["summary"].as_str().unwrap();
    assert!(
        summary.contains("Sharpe") && summary.contains("AAPL, IBM"),
        "{summary}"
    );
    assert!(
        out["validation"]["monte_carlo"]["p_value_sharpe"].is_number(),
        "{:#}",
        out["validation"]
    );
    for k in [
        "equity",
        "metrics",
        "trades",
        "positions",
        "target_positions",
        "run_card_json",
        "run_card_md",
        "fills",
    ] {
        let p = out["artifacts"][k]
            .as_str()
            .unwrap_or_else(|| panic!("artifact {k}: {out:#}"));
        assert!(Path::new(p).is_file(), "{p}");
    }
    let svg = std::fs::read_to_string(out["chart"]["svg"].as_str().unwrap()).unwrap();
    assert!(svg.contains("<svg") && svg.contains("Drawdown"));
    assert!(
        std::fs::read(out["chart"]["png"].as_str().unwrap())
            .unwrap()
            .starts_with(b"\x89PNG")
    );
    let run_dir = PathBuf::from(out["run_dir"].as_str().unwrap());
    assert!(run_dir.ends_with("bt1"));
    let card: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run_card.json")).unwrap())
            .unwrap();
    assert_eq!(card["schema"], "0.1");
    let config_bytes = std::fs::read(run_dir.join("config.json")).unwrap();
    assert_eq!(
        card["reproducibility"]["config_hash"],
        bt::run_card::sha256_hex(&config_bytes)
    );
    assert_eq!(
        card["reproducibility"]["strategy_hash"]
            .as_str()
            .unwrap()
            .len(),
        64
    );

    // read_artifact: the run-card summary and a page of trades.
    let s = call(
        &r,
        "read_artifact",
        json!({"name": "summary", "run_dir": "bt1"}),
        &fx.ctx,
    )
    .await;
    assert_eq!(s["status"], "ok");
    assert_eq!(s["metrics"]["trade_count"], m["trade_count"]);
    let page = call(
        &r,
        "read_artifact",
        json!({"name": "trades", "run_dir": "bt1", "limit": 3}),
        &fx.ctx,
    )
    .await;
    assert_eq!(page["returned"], 3);
    assert!(page["content"].as_str().unwrap().starts_with(
        "timestamp,code,side,price,qty,reason,pnl,holding_days,holding_bars,return_pct\n"
    ));
    let e = r
        .get("read_artifact")
        .unwrap()
        .call(json!({"name": "../../etc/passwd"}), &fx.ctx)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "run_dir_outside");
    let e = r
        .get("read_artifact")
        .unwrap()
        .call(
            json!({"name": "artifacts/equity_chart.png", "run_dir": "bt1"}),
            &fx.ctx,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), "binary_artifact");

    // A rerun after editing config.json runs again (repeatable) and changes the result.
    let mut cfg2: Value = serde_json::from_slice(&config_bytes).unwrap();
    cfg2["strategy"] = json!({"name": "buy_and_hold"});
    std::fs::write(run_dir.join("config.json"), cfg2.to_string()).unwrap();
    let again = call(&r, "backtest", json!({"run_dir": "bt1"}), &fx.ctx).await;
    assert_eq!(again["status"], "ok", "{again:#}");
    assert_ne!(again["metrics"]["final_value"], m["final_value"]);
}

#[tokio::test]
async fn validation_failures_are_structured_and_start_no_process() {
    let fx = fixture();
    let r = registry(UserPolicy::Auto);
    let bad = json!({"codes": ["AAPL"], "start_date": "2010-01-01", "end_date": "2011-01-01", "source": "tushare",
                     "strategy": {"rules": {"entry": "close > sma(close, 20) and"}}});
    let out = call(
        &r,
        "backtest",
        json!({"run_dir": "x", "config": bad}),
        &fx.ctx,
    )
    .await;
    assert_eq!(out["status"], "error");
    assert_eq!(out["error_code"], "unknown_source");
    assert_eq!(out["config_written"], false);
    let issues = out["issues"].as_array().unwrap();
    assert_eq!(issues.len(), 2, "{out:#}");
    assert!(
        issues[1]["message"].as_str().unwrap().contains("column 27"),
        "{out:#}"
    );
    assert!(
        !fx.ctx.run_dir.join("x").exists(),
        "nothing written, no process started"
    );

    // A config.json on disk that is broken: still reported before any process.
    let dir = fx.ctx.run_dir.join("y");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.json"),
        "{\"codes\": [\"AAPL\"], \"start_date\": \"2010-01-01\"}",
    )
    .unwrap();
    let out = call(&r, "backtest", json!({"run_dir": "y"}), &fx.ctx).await;
    assert_eq!(out["status"], "error");
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .contains("`end_date`: is required"),
        "{out:#}"
    );
    assert!(!dir.join("logs").exists(), "the sandbox was never started");
    let out = call(&r, "backtest", json!({"run_dir": "missing"}), &fx.ctx).await;
    assert_eq!(out["error_code"], "run_dir_missing");
    let e = r
        .get("backtest")
        .unwrap()
        .call(json!({"run_dir": "/etc"}), &fx.ctx)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "run_dir_outside");

    // A data failure inside the engine comes back as a structured error.
    let out = call(&r, "backtest", json!({"run_dir": "z", "config": {"codes": ["NVDA"], "start_date": "2010-01-01", "end_date": "2011-01-01", "source": "embedded", "strategy": "buy_and_hold"}}), &fx.ctx).await;
    assert_eq!(out["status"], "error", "{out:#}");
    assert_eq!(out["error_code"], "no_data");
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .contains("131 US stocks and ETFs (run `vibedesk data --list`)"),
        "{out:#}"
    );
}

// ---------------------------------------------------------------------------
// The Python SignalEngine path: skipped when Python with pandas is absent,
// except where VIBEDESK_REQUIRE_PANDAS is set (.ci/run installs pandas and
// sets it, so CI runs these tests rather than skipping them).

fn pandas_available() -> bool {
    Outside::Pandas.available()
}

const SMA_ENGINE: &str = r#"
"""SMA(20/50) crossover, long only."""
import pandas as pd

FAST = 20
SLOW = 50


class SignalEngine:
    def generate(self, data_map):
        out = {}
        for code, df in data_map.items():
            fast = df["close"].rolling(FAST).mean()
            slow = df["close"].rolling(SLOW).mean()
            out[code] = (fast > slow).astype(float)
        return out
"#;

#[tokio::test]
async fn python_signal_engine_matches_the_builtin_strategy() {
    if !pandas_available() {
        eprintln!(
            "skipped: python3 with pandas is not available (`python3 -c \"import pandas\"` fails)"
        );
        return;
    }
    let fx = fixture();
    // With the default policy: an interpreter the sandbox user cannot reach
    // (pyenv under /root) makes the runner keep the current user instead of
    // failing with "permission denied"; a system one keeps the drop.
    let r = registry(UserPolicy::Auto);
    let base = json!({"codes": ["AAPL", "MSFT"], "start_date": "2005-01-01", "end_date": "2010-12-31", "source": "embedded", "commission_rate": 0.001});
    let dir = fx.ctx.run_dir.join("py");
    std::fs::create_dir_all(dir.join("code")).unwrap();
    std::fs::write(dir.join("code/signal_engine.py"), SMA_ENGINE).unwrap();
    let py = call(
        &r,
        "backtest",
        json!({"run_dir": "py", "config": base}),
        &fx.ctx,
    )
    .await;
    assert_eq!(py["status"], "ok", "{py:#}");
    let mut with_builtin = base.clone();
    with_builtin["strategy"] = json!({"name": "sma_crossover", "params": {"fast": 20, "slow": 50}});
    let rs = call(
        &r,
        "backtest",
        json!({"run_dir": "rs", "config": with_builtin}),
        &fx.ctx,
    )
    .await;
    assert_eq!(rs["status"], "ok", "{rs:#}");
    assert_eq!(py["metrics"]["trade_count"], rs["metrics"]["trade_count"]);
    let (a, b) = (
        py["metrics"]["final_value"].as_f64().unwrap(),
        rs["metrics"]["final_value"].as_f64().unwrap(),
    );
    assert!(close_rel(a, b, 1e-9), "python {a} vs builtin {b}");
    let card: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run_card.json")).unwrap()).unwrap();
    assert_eq!(
        card["reproducibility"]["strategy_hash"],
        bt::run_card::sha256_hex(SMA_ENGINE.as_bytes())
    );
}

#[test]
fn python_static_checks_refuse_dangerous_strategies() {
    // The §7.2 checks run in the strategy runner before anything is
    // imported; they are exercised here through `python::signals` directly
    // (the sandboxed path is covered above), cases in parallel.
    if !pandas_available() {
        eprintln!("skipped: python3 with pandas is not available");
        return;
    }
    let exe = python::probe(None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let series = embedded::load("AAPL", Some(d("2010-01-01")), Some(d("2010-03-31"))).unwrap();
    let cases = [
        (
            "import pandas as pd\nclass SignalEngine:\n    def generate(self, data_map):\n        import subprocess\n        return {}\n",
            "strategy_rejected",
            "line 4: importing subprocess is not allowed",
        ),
        (
            "import os\nclass SignalEngine:\n    def generate(self, data_map):\n        k = os.environ\n        return {}\n",
            "strategy_rejected",
            "os.environ is not allowed",
        ),
        (
            "import requests as r\nclass SignalEngine:\n    def generate(self, data_map):\n        return r.get('x')\n",
            "strategy_rejected",
            "r (requests) may not be used",
        ),
        (
            "class SignalEngine:\n    def generate(self, data_map):\n        return helper()\n\ndef helper():\n    return eval('1')\n",
            "strategy_rejected",
            "eval() is not allowed",
        ),
        (
            "class SignalEngine:\n    def generate(self, data_map):\n        open('/etc/x', 'w')\n",
            "strategy_rejected",
            "open() may only read",
        ),
        (
            "class SignalEngine:\n    def generate(self, data_map):\n        return ().__class__.__bases__\n",
            "strategy_rejected",
            "__bases__ is not allowed",
        ),
        (
            "x = open('a')\nclass SignalEngine:\n    pass\n",
            "strategy_rejected",
            "the top level may hold only",
        ),
        (
            "from signal_engine import X\nclass SignalEngine:\n    pass\n",
            "strategy_rejected",
            "from itself",
        ),
        (
            "class Other:\n    pass\n",
            "strategy_rejected",
            "must define `class SignalEngine`",
        ),
        (
            "import requests\nclass SignalEngine:\n    def generate(self, data_map):\n        return {c: df['close'] * 0 + 1 for c, df in data_map.items()}\n\ndef unused():\n    return requests.get('x')\n",
            "",
            "",
        ),
        (
            "class SignalEngine:\n    def generate(self, data_map):\n        return [1]\n",
            "bad_signals",
            "must return a dict",
        ),
        (
            "class SignalEngine:\n    def generate(self, data_map):\n        return {'NOPE': 1}\n",
            "bad_signals",
            "No valid signals generated",
        ),
        (
            "class SignalEngine:\n    def generate(self, data_map):\n        return {'AAPL': 1}\n",
            "bad_signals",
            "return a pandas.Series",
        ),
        (
            "class SignalEngine:\n    def generate(self, data_map):\n        raise ValueError('boom')\n",
            "strategy_error",
            "SignalEngine raised ValueError: boom",
        ),
    ];
    std::thread::scope(|scope| {
        for (i, (code, want_code, needle)) in cases.iter().enumerate() {
            let run = dir.path().join(format!("case{i}"));
            let (exe, series) = (&exe, &series);
            scope.spawn(move || {
                std::fs::create_dir_all(run.join("code")).unwrap();
                std::fs::create_dir_all(run.join("artifacts")).unwrap();
                std::fs::write(run.join("code/signal_engine.py"), code).unwrap();
                let files = bt::artifacts::write_ohlcv(
                    &run.join("artifacts"),
                    std::slice::from_ref(series),
                    None,
                )
                .unwrap();
                let r = python::signals(
                    &run,
                    exe,
                    &["AAPL".to_string()],
                    &files,
                    &[series.bars.len()],
                );
                match r {
                    Ok(sig) => {
                        assert!(
                            want_code.is_empty(),
                            "case {i} should fail with {want_code}"
                        );
                        assert!(
                            sig[0].iter().all(|x| *x == 1.0),
                            "unreachable helpers may use anything"
                        );
                    }
                    Err(e) => {
                        assert_eq!(e.code, *want_code, "case {i}: {e}");
                        assert!(
                            e.message.contains(needle),
                            "case {i}: expected '{needle}' in {e}"
                        );
                    }
                }
            });
        }
    });
}

// ---------------------------------------------------------------------------
// The commands.

fn cmd(home: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.env("VIBEDESK_HOME", home).env_remove("VIBEDESK_CONFIG");
    c
}

/// `vibedesk backtest RUN_DIR [--config FILE] --offline`, which must
/// succeed (its stderr is shown if it does not).
fn backtest_command(home: &Path, run: &Path, config: Option<&Path>) -> std::process::Output {
    let mut c = cmd(home);
    c.args(["backtest"]).arg(run);
    if let Some(cfg) = config {
        c.arg("--config").arg(cfg);
    }
    let out = c.arg("--offline").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_data_engine_and_backtest_commands() {
    let dir = tempfile::tempdir().unwrap();
    let out = cmd(dir.path())
        .args([
            "data",
            "AAPL",
            "--from",
            "2010-01-04",
            "--to",
            "2010-01-08",
            "--offline",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = String::from_utf8(out.stdout).unwrap();
    assert_eq!(csv.lines().count(), 6, "{csv}");
    assert!(csv.starts_with("date,open,high,low,close,volume\n2010-01-04,"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("from embedded"));
    let bad = cmd(dir.path())
        .args(["data", "AAPL", "--source", "tushare"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));

    // The engine directly: errors are one JSON line on stdout, exit 1.
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let out = cmd(dir.path()).args(["engine"]).arg(&run).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(e["error_code"], "config_missing");

    // `vibedesk backtest RUN_DIR --config FILE` prints the metrics JSON.
    let cfg = dir.path().join("cfg.json");
    std::fs::write(&cfg, json!({"codes": ["MSFT"], "start_date": "2009-01-01", "end_date": "2012-12-31", "source": "embedded", "strategy": {"rules": {"entry": "close > sma(close, 100)"}}}).to_string()).unwrap();
    let out = backtest_command(dir.path(), &run, Some(&cfg));
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        m["sharpe"].is_number() && m["trade_count"].as_u64().unwrap() > 0,
        "{m:#}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("chart: "));
    std::fs::write(&cfg, "{\"codes\": []}").unwrap();
    let out = cmd(dir.path())
        .args(["backtest"])
        .arg(&run)
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("must not be empty"));
}

/// A symbol's embedded bars as CSV lines with prices in cents and whole
/// shares, as Stooq and most exports spell them.
fn cents_lines(sym: &str, from: &str, to: &str) -> Vec<String> {
    let b = embedded::load(sym, Some(d(from)), Some(d(to)))
        .unwrap()
        .bars;
    (0..b.len())
        .map(|i| {
            format!(
                "{},{:.2},{:.2},{:.2},{:.2},{:.0}\n",
                b.dates[i], b.open[i], b.high[i], b.low[i], b.close[i], b.volume[i]
            )
        })
        .collect()
}

/// Through the real sandbox (`vibedesk backtest`): the confined child
/// copies a local file's exact lines into its OHLCV artifact.
#[test]
fn the_sandboxed_engine_copies_exact_source_lines() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(run.join("data")).unwrap();
    let lines = cents_lines("AAPL", "2010-01-01", "2010-12-31").concat();
    std::fs::write(
        run.join("data/X.csv"),
        format!("date,open,high,low,close,volume\n{lines}"),
    )
    .unwrap();
    write_config(
        &run,
        &json!({"codes": ["X"], "start_date": "2010-01-01", "end_date": "2010-12-31",
                "source": "local", "strategy": {"name": "sma_crossover", "params": {"fast": 5, "slow": 20}}}),
    );
    backtest_command(dir.path(), &run, None);
    assert_eq!(
        std::fs::read_to_string(run.join("artifacts/ohlcv_X.csv")).unwrap(),
        format!("timestamp,open,high,low,close,volume\n{lines}")
    );
}

fn write_bars_csv(path: &Path, b: &vibedesk::research::data::Bars) {
    let mut buf = b"date,open,high,low,close,volume\n".to_vec();
    bt::artifacts::push_ohlcv_rows(&mut buf, b);
    std::fs::write(path, buf).unwrap();
}

/// Bars as an adjusted-close factor leaves them: every price a full
/// 17-digit double (the embedded prices have four decimals, which parse on
/// the quick path and are never kept).
fn full_precision(b: &vibedesk::research::data::Bars) -> vibedesk::research::data::Bars {
    let mut out = b.clone();
    for col in [&mut out.open, &mut out.high, &mut out.low, &mut out.close] {
        for x in col.iter_mut() {
            *x *= 0.987_654_321;
        }
    }
    out
}

fn artifact_bytes(run: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(run.join("artifacts"))
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

fn inode(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).unwrap().ino()
}

/// Online data through the sandbox: the tool fetches it before the engine
/// starts (the sandboxed engine could neither write nor, as another user,
/// read the shared cache), the shared cache keeps it, and the engine finds
/// it in the run dir. A second run in a fresh run dir asks the server
/// nothing.
#[tokio::test]
async fn online_data_is_fetched_outside_the_sandbox_and_cached_for_the_next_run() {
    use crate::research_data::{Server, yahoo_routes};
    let server = Server::start(yahoo_routes()).await;
    let fx = fixture();
    let cache = tempfile::tempdir().unwrap();
    let mut cfg = tool_config(UserPolicy::Auto);
    cfg.offline = false;
    cfg.cache_dir = Some(cache.path().to_path_buf());
    cfg.yahoo_base_url = Some(server.base.clone());
    cfg.stooq_base_url = Some(server.base.clone());
    let mut r = Registry::new();
    register_backtest_tools(&mut r, cfg).unwrap();
    // The equal-weight benchmark: the default SPY would be one more fetch
    // (the benchmark's own tests are in `offline_market`).
    let config = json!({"codes": ["AAPL"], "start_date": "2024-01-02", "end_date": "2024-02-29",
                        "source": "yahoo", "strategy": {"name": "buy_and_hold"}, "benchmark": "equal_weight"});
    let mut results = Vec::new();
    for run in ["online1", "online2"] {
        let out = backtest_in(&r, &fx, run, &config).await;
        assert_eq!(out["status"], "ok", "{out:#}");
        assert_eq!(server.hits().len(), 1, "{:?}", server.hits());
        let card: Value = serde_json::from_slice(
            &std::fs::read(fx.ctx.run_dir.join(run).join("run_card.json")).unwrap(),
        )
        .unwrap();
        let series = &card["data_sources"]["series"][0];
        assert_eq!(series["source"], "yahoo", "{series:#}");
        assert_eq!(series["rows"], 41, "{series:#}");
        assert_eq!(card["warnings"], json!([]), "{card:#}");
        results.push(out["metrics"].clone());
    }
    assert_eq!(results[0], results[1]);
    // The shared cache holds the entry the second run was served from.
    let entries = std::fs::read_dir(cache.path().join("market/yahoo"))
        .unwrap()
        .count();
    assert_eq!(entries, 2, "data and provenance");

    // A range ending after today is never cached: the engine fetches it
    // (once per run, not also before it starts) and the run dir keeps no
    // market cache a later rerun could read back as final.
    let open_end = (chrono::Utc::now().date_naive() + chrono::Days::new(5)).to_string();
    let mut live = config.clone();
    live["end_date"] = json!(open_end);
    for (i, run) in ["live1", "live2"].into_iter().enumerate() {
        let out = backtest_in(&r, &fx, run, &live).await;
        assert_eq!(out["status"], "ok", "{out:#}");
        assert_eq!(server.hits().len(), 2 + i, "{:?}", server.hits());
        assert!(!fx.ctx.run_dir.join(run).join(".cache/market").exists());
    }
}

/// A cancel while the online fetch hangs ends the call at once, before any
/// engine starts.
#[tokio::test]
async fn a_cancel_during_the_data_fetch_stops_the_backtest() {
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let hold = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            open.push(conn);
        }
    });
    let fx = fixture();
    let mut cfg = tool_config(UserPolicy::Auto);
    cfg.offline = false;
    cfg.yahoo_base_url = Some(base.clone());
    cfg.stooq_base_url = Some(base);
    let mut r = Registry::new();
    register_backtest_tools(&mut r, cfg).unwrap();
    // The equal-weight benchmark: the default SPY would be one more fetch
    // (the benchmark's own tests are in `offline_market`).
    let config = json!({"codes": ["AAPL"], "start_date": "2024-01-02", "end_date": "2024-02-29",
                        "source": "yahoo", "strategy": {"name": "buy_and_hold"}, "benchmark": "equal_weight"});
    let cancel = fx.ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let started = std::time::Instant::now();
    let out = backtest_in(&r, &fx, "hang", &config).await;
    assert_eq!(out["error_code"], "cancelled", "{out:#}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        !fx.ctx
            .run_dir
            .join("hang/logs/backtest_stdout.txt")
            .exists()
    );
    hold.abort();
}

fn write_config(run: &Path, config: &Value) {
    std::fs::write(run.join("config.json"), config.to_string()).unwrap();
}

/// How many parsed-bars entries the run dir keeps.
fn parsed_entries(run: &Path) -> usize {
    std::fs::read_dir(run.join(bt::PARSED_CACHE_DIR)).map_or(0, |d| d.count())
}

fn offline() -> bt::RunOptions {
    bt::RunOptions {
        offline: true,
        ..bt::RunOptions::default()
    }
}

/// config.json names Stooq, the run is offline: the embedded set serves,
/// and the result says so (warnings, the run card's attempts).
#[tokio::test]
async fn a_named_source_that_cannot_serve_is_reported_in_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    write_config(
        &run,
        &json!({"codes": ["IBM"], "start_date": "2006-01-01", "end_date": "2007-12-31",
                "source": "stooq", "strategy": {"name": "buy_and_hold"}}),
    );
    let summary = bt::run_in_dir(&run, &offline()).await.unwrap();
    let warning = summary
        .warnings
        .iter()
        .find(|w| w.starts_with("stooq did not serve IBM ("))
        .unwrap_or_else(|| panic!("{:?}", summary.warnings));
    assert!(
        warning.ends_with("; the rows come from embedded"),
        "{warning}"
    );
    let card: Value =
        serde_json::from_slice(&std::fs::read(run.join("run_card.json")).unwrap()).unwrap();
    let series = &card["data_sources"]["series"][0];
    assert_eq!(series["source"], "embedded");
    assert_eq!(series["requested_source"], "stooq");
    assert_eq!(series["attempts"][0]["source"], "stooq", "{series:#}");
    assert!(
        card["warnings"]
            .to_string()
            .contains("stooq did not serve IBM"),
        "{card:#}"
    );
    let md = std::fs::read_to_string(run.join("run_card.md")).unwrap();
    assert!(md.contains("stooq did not serve IBM"), "{md}");
}

/// The bars of an OHLCV artifact, by bit pattern.
fn artifact_bar_bits(path: &Path) -> Vec<(NaiveDate, [u64; 5])> {
    let parsed = local::parse_csv(&std::fs::read(path).unwrap(), "artifact", None).unwrap();
    let (b, ..) = parsed.finish(None, None);
    bar_bits(&b)
}

fn bar_bits(b: &vibedesk::research::data::Bars) -> Vec<(NaiveDate, [u64; 5])> {
    (0..b.len())
        .map(|i| {
            let v = [b.open[i], b.high[i], b.low[i], b.close[i], b.volume[i]];
            (b.dates[i], v.map(f64::to_bits))
        })
        .collect()
}

/// A local file read exactly as written lends its lines to the OHLCV
/// artifact (all of them: the signals' warm-up history before the start is
/// part of the bars used, docs §7.4.1); one with a row the sanity filter
/// drops is formatted. Either way the artifact reads back to the bars the
/// engine used, bit for bit.
#[tokio::test]
async fn ohlcv_artifacts_copy_exact_source_lines_and_read_back_to_the_bars() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(run.join("data")).unwrap();
    let header = "date,open,high,low,close,volume\n";
    let lines = |sym: &str| cents_lines(sym, "2008-01-01", "2009-12-31");
    let aapl = lines("AAPL");
    std::fs::write(
        run.join("data/AAPL.csv"),
        format!("{header}{}", aapl.concat()),
    )
    .unwrap();
    let mut msft = lines("MSFT");
    // A bar with its high under its low: dropped on the way in.
    let cells: Vec<&str> = msft[200].trim_end().split(',').collect();
    msft[200] = format!(
        "{},{},0.01,{},{},{}\n",
        cells[0], cells[1], cells[3], cells[4], cells[5]
    );
    std::fs::write(
        run.join("data/MSFT.csv"),
        format!("{header}{}", msft.concat()),
    )
    .unwrap();
    write_config(
        &run,
        &json!({"codes": ["AAPL", "MSFT"], "start_date": "2008-06-02", "end_date": "2009-12-31",
                "source": "local", "strategy": {"name": "sma_crossover", "params": {"fast": 10, "slow": 30}}}),
    );
    bt::run_in_dir(&run, &offline()).await.unwrap();

    let copied = std::fs::read_to_string(run.join("artifacts/ohlcv_AAPL.csv")).unwrap();
    assert_eq!(
        copied,
        format!("timestamp,open,high,low,close,volume\n{}", aapl.concat()),
        "the source lines, warm-up included, as written"
    );
    let formatted = std::fs::read_to_string(run.join("artifacts/ohlcv_MSFT.csv")).unwrap();
    assert!(
        formatted.lines().nth(1).unwrap().ends_with(".0"),
        "formatted (whole volumes as 123.0): {}",
        formatted.lines().nth(1).unwrap()
    );
    for sym in ["AAPL", "MSFT"] {
        let loaded = local::load_file(
            &run.join(format!("data/{sym}.csv")),
            sym,
            None,
            Some(d("2009-12-31")),
            None,
            false,
        )
        .unwrap();
        assert_eq!(loaded.source_rows.is_some(), sym == "AAPL");
        assert_eq!(
            artifact_bar_bits(&run.join(format!("artifacts/ohlcv_{sym}.csv"))),
            bar_bits(&loaded.bars),
            "{sym}"
        );
    }
}

/// A run dir's first run keeps no parsed copies of its data files (most run
/// once); its second keeps them, later runs read them. A rerun links the
/// OHLCV files it would write identically, with byte-identical artifacts;
/// a changed data file is parsed and written again.
#[tokio::test]
async fn a_rerun_reuses_parsed_data_and_unchanged_ohlcv_files_but_sees_changes() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(run.join("data")).unwrap();
    let (from, to) = (Some(d("2008-01-01")), Some(d("2011-12-31")));
    for sym in ["AAPL", "MSFT"] {
        let s = embedded::load(sym, from, to).unwrap();
        write_bars_csv(
            &run.join(format!("data/{sym}.csv")),
            &full_precision(&s.bars),
        );
    }
    write_config(
        &run,
        &json!({"codes": ["AAPL", "MSFT"], "start_date": "2008-01-01", "end_date": "2011-12-31",
                "source": "local", "strategy": {"name": "sma_crossover", "params": {"fast": 10, "slow": 30}}}),
    );
    let opts = offline();
    // As the agent makes run dirs: with an empty artifacts/ already there.
    std::fs::create_dir_all(run.join("artifacts")).unwrap();
    let first = bt::run_in_dir(&run, &opts).await.unwrap();
    let before = artifact_bytes(&run);
    assert_eq!(
        parsed_entries(&run),
        0,
        "a first run keeps no parsed copies"
    );
    let aapl = run.join("artifacts/ohlcv_AAPL.csv");
    let msft = run.join("artifacts/ohlcv_MSFT.csv");
    // Keep a second name for each file, to see whether the rerun links it.
    std::fs::hard_link(&aapl, dir.path().join("aapl.keep")).unwrap();
    std::fs::hard_link(&msft, dir.path().join("msft.keep")).unwrap();

    let second = bt::run_in_dir(&run, &opts).await.unwrap();
    assert_eq!(
        artifact_bytes(&run),
        before,
        "a rerun writes the same bytes"
    );
    assert_eq!(
        parsed_entries(&run),
        2,
        "the second run keeps one per data file"
    );
    let third = bt::run_in_dir(&run, &opts).await.unwrap();
    assert_eq!(third.scalars, first.scalars);
    assert_eq!(artifact_bytes(&run), before);
    assert_eq!(second.scalars, first.scalars);
    assert_eq!(inode(&aapl), inode(&dir.path().join("aapl.keep")), "linked");
    assert_eq!(inode(&msft), inode(&dir.path().join("msft.keep")), "linked");
    let card: Value =
        serde_json::from_slice(&std::fs::read(run.join("run_card.json")).unwrap()).unwrap();
    assert!(
        !card["artifacts"]
            .to_string()
            .contains(bt::artifacts::OHLCV_FINGERPRINTS),
        "the fingerprint file is not an artifact: {}",
        card["artifacts"]
    );

    // MSFT's file changes: its cache entry and its OHLCV file are stale.
    let mut b = full_precision(&embedded::load("MSFT", from, to).unwrap().bars);
    b.close[100] *= 1.01;
    b.high[100] = b.high[100].max(b.close[100]);
    write_bars_csv(&run.join("data/MSFT.csv"), &b);
    bt::run_in_dir(&run, &opts).await.unwrap();
    assert_eq!(
        inode(&aapl),
        inode(&dir.path().join("aapl.keep")),
        "still linked"
    );
    assert_ne!(
        inode(&msft),
        inode(&dir.path().join("msft.keep")),
        "written anew"
    );
    let new_msft = std::fs::read_to_string(&msft).unwrap();
    let old_msft = std::fs::read_to_string(dir.path().join("msft.keep")).unwrap();
    let changed: Vec<(&str, &str)> = new_msft
        .lines()
        .zip(old_msft.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(changed.len(), 1, "exactly the edited bar: {changed:?}");
    let mut cell = Vec::new();
    bt::artifacts::push_f64(&mut cell, b.close[100]);
    assert!(
        changed[0].0.contains(&*String::from_utf8_lossy(&cell)),
        "{changed:?}"
    );

    // Later runs read the entries: an entry stands in for its file's parse
    // (it is checked against the file's identity, not re-derived), so a
    // doctored one shows in the artifacts. Its last 8 bytes are the last
    // bar's volume.
    let aapl_entry = std::fs::read_dir(run.join(bt::PARSED_CACHE_DIR))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let b = std::fs::read(p).unwrap();
            b.windows(8).any(|w| w == b"AAPL.csv")
        })
        .unwrap();
    let mut entry = std::fs::read(&aapl_entry).unwrap();
    let at = entry.len() - 8;
    entry[at..].copy_from_slice(&123_456_789.0f64.to_le_bytes());
    std::fs::write(&aapl_entry, entry).unwrap();
    bt::run_in_dir(&run, &opts).await.unwrap();
    let aapl_text = std::fs::read_to_string(&aapl).unwrap();
    assert!(
        aapl_text.trim_end().ends_with(",123456789.0"),
        "{}",
        aapl_text.lines().last().unwrap()
    );
}

/// A load the caller knows is followed by the engine (the `backtest` tool's
/// prefetch) keeps its parses even in a fresh run dir; the same load
/// without that knowledge keeps none.
#[tokio::test]
async fn a_load_followed_by_the_engine_keeps_its_parses() {
    let dir = tempfile::tempdir().unwrap();
    for (keep, expected) in [(false, 0), (true, 1)] {
        let run = dir.path().join(format!("run-{keep}"));
        std::fs::create_dir_all(run.join("data")).unwrap();
        let s = embedded::load("IBM", Some(d("2010-01-01")), Some(d("2010-12-31"))).unwrap();
        write_bars_csv(&run.join("data/IBM.csv"), &full_precision(&s.bars));
        write_config(
            &run,
            &json!({"codes": ["IBM"], "start_date": "2010-01-01", "end_date": "2010-12-31",
                    "source": "local", "strategy": {"name": "buy_and_hold"}}),
        );
        let (cfg, _) = bt::load_config(&run).unwrap();
        let opts = bt::RunOptions {
            keep_parsed_bars: keep,
            ..offline()
        };
        let (series, _, _) = bt::fetch_data(&cfg, &run, &opts).await.unwrap();
        assert_eq!(series[0].bars.len(), s.bars.len());
        let kept = parsed_entries(&run);
        assert_eq!(kept, expected, "keep_parsed_bars: {keep}");
    }
}
