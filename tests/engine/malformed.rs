//! Malformed input never panics: random and mutated data files, online
//! answers, rule expressions and configs either work or give an error.
//! Each property drives the real entry point (parsers, the parsed-bars
//! cache, a whole backtest run) with inputs shaped to reach deep into it:
//! valid-looking headers and rows with broken cells, truncated and
//! byte-flipped real files.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRng, TestRunner};
use serde_json::{Value, json};
use vibedesk::research::backtest::config::BacktestConfig;
use vibedesk::research::backtest::rules::RuleSet;
use vibedesk::research::backtest::{self as bt};
use vibedesk::research::data::{local, online, parquet_file};

fn fixture(rel: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A fixed seed: every run tests the same cases (CI is reproducible, and
/// the coverage floors below hold every time).
fn runner(cases: u32) -> TestRunner {
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::deterministic_rng(config.rng_algorithm);
    TestRunner::new_with_rng(config, rng)
}

/// Odd cells a file can hold: values the sanity filter must drop, missing
/// ones, and (rarely) text that is no number at all.
const ODD_CELLS: [&str; 20] = [
    "NaN",
    "null",
    "-",
    "",
    "inf",
    "-inf",
    "1e308",
    "1e-320",
    "-0",
    "0",
    "-5",
    " 12 ",
    "99999999999999999999",
    "n/a",
    "1e309",
    "0.0000001",
    "\u{a0}3\u{a0}",
    "\"7.5\"",
    "12abc",
    "\"1,5\"",
];

/// A price file shaped like a real one (a header, rows of dates and OHLCV
/// in order) with damage sprinkled in: odd cells, repeated or missing
/// dates, short and long rows, a bad date now and then.
fn csv_file() -> impl Strategy<Value = Vec<u8>> {
    let layout = prop::sample::select(vec![
        ("date,open,high,low,close,volume", 0usize),
        ("Date,Open,High,Low,Close,Adj Close,Volume", 1),
        ("ticker,date,open,high,low,close", 2),
        ("timestamp,close,open,low,high", 3),
        ("date,close", 4),
    ]);
    // (days forward, price move, damage: (odd cell or bad date, column, which))
    let row = (
        0u32..4,
        -0.05f64..0.05,
        prop::option::weighted(0.08, (0u8..10, 0usize..8, 0usize..ODD_CELLS.len())),
    );
    (
        layout,
        prop::sample::select(vec![",", ";", "\t"]),
        prop::sample::select(vec!["\n", "\r\n"]),
        prop::collection::vec(row, 0..60),
    )
        .prop_map(|((header, kind), sep, eol, rows)| {
            let mut s = header.replace(',', sep);
            s.push_str(eol);
            let mut day = chrono::NaiveDate::from_ymd_opt(2001, 1, 2).unwrap();
            let mut price = 100.0f64;
            for (i, (step, change, damage)) in rows.into_iter().enumerate() {
                day += chrono::Duration::days(i64::from(step));
                price *= 1.0 + change;
                let (o, c) = (price, price * (1.0 + change / 2.0));
                let (h, l) = (o.max(c) * 1.01, o.min(c) * 0.99);
                let d = day.to_string();
                let v = format!("{}", 1000 + i * 7);
                let f = |x: f64| format!("{x:.2}");
                let mut cells: Vec<String> = match kind {
                    0 => vec![d, f(o), f(h), f(l), f(c), v],
                    1 => vec![d, f(o), f(h), f(l), f(c), f(c / 2.0), v],
                    2 => vec![
                        if i % 5 == 0 { "Y" } else { "X" }.into(),
                        d,
                        f(o),
                        f(h),
                        f(l),
                        f(c),
                    ],
                    3 => vec![
                        (day.and_hms_opt(0, 0, 0).unwrap().and_utc().timestamp()).to_string(),
                        f(c),
                        f(o),
                        f(l),
                        f(h),
                    ],
                    _ => vec![d, f(c)],
                };
                match damage {
                    // A rare bad date fails the file (by design).
                    Some((0, _, _)) => cells[0] = "2001-02-30".into(),
                    Some((1, _, _)) => {
                        cells.pop();
                    }
                    Some((2, _, w)) => cells.push(ODD_CELLS[w].into()),
                    Some((_, col, w)) => {
                        let n = cells.len();
                        cells[1 + col % (n - 1)] = ODD_CELLS[w].into();
                    }
                    None => {}
                }
                s.push_str(&cells.join(sep));
                s.push_str(eol);
            }
            s.into_bytes()
        })
}

/// Truncations and byte flips of a real file.
fn mutated(original: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = original.len();
    (
        0..=len,
        prop::collection::vec((0..len.max(1), any::<u8>()), 0..6),
    )
        .prop_map(move |(cut, flips)| {
            let mut b = original.clone();
            for (at, byte) in flips {
                if let Some(x) = b.get_mut(at) {
                    *x = byte;
                }
            }
            b.truncate(cut.max(1));
            b
        })
}

/// Dates and values by bit pattern (any NaN as one: an artifact writes a
/// missing value as an empty cell).
fn value_bits(b: &vibedesk::research::data::Bars) -> Vec<(chrono::NaiveDate, [u64; 5])> {
    (0..b.len())
        .map(|i| {
            let v = [b.open[i], b.high[i], b.low[i], b.close[i], b.volume[i]];
            (
                b.dates[i],
                v.map(|x| if x.is_nan() { f64::NAN } else { x }.to_bits()),
            )
        })
        .collect()
}

#[test]
fn random_price_files_parse_or_fail_cleanly_and_what_parses_backtests() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ran = std::sync::atomic::AtomicU32::new(0);
    let completed = std::sync::atomic::AtomicU32::new(0);
    runner(96)
        .run(&csv_file(), |bytes| {
            // The parser alone, both symbol modes.
            let parsed = local::parse_csv(&bytes, "f.csv", Some("X"));
            let _ = local::parse_csv(&bytes, "f.csv", None);
            let Ok(parsed) = parsed else { return Ok(()) };
            let (bars, ..) = parsed.finish(None, None);
            prop_assert_eq!(bars.dates.len(), bars.close.len());
            // Whatever survives the sanity filter runs through a whole
            // backtest: signals, simulation, metrics, artifacts, chart.
            let n = ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let run = dir.path().join(format!("run{n}"));
            std::fs::create_dir_all(run.join("data")).unwrap();
            std::fs::write(run.join("data/X.csv"), &bytes).unwrap();
            let cfg = json!({"codes": ["X"], "start_date": "2000-01-01", "end_date": "2003-12-31",
                             "source": "local",
                             "strategy": {"name": "sma_crossover", "params": {"fast": 2, "slow": 3}},
                             "validation": {"bootstrap": {"n_bootstrap": 20}, "walk_forward": {"n_windows": 2}}});
            std::fs::write(run.join("config.json"), cfg.to_string()).unwrap();
            let opts = bt::RunOptions {
                offline: true,
                ..bt::RunOptions::default()
            };
            match rt.block_on(bt::run_in_dir(&run, &opts)) {
                Ok(summary) => {
                    completed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    prop_assert!(summary.scalars.contains_key("final_value"));
                    // The OHLCV artifact (copied lines or formatted ones)
                    // reads back to the bars the engine used.
                    let art = std::fs::read(run.join("artifacts/ohlcv_X.csv")).unwrap();
                    let back = local::parse_csv(&art, "artifact", None).unwrap();
                    prop_assert_eq!(value_bits(&back.finish(None, None).0), value_bits(&bars));
                }
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
            let _ = std::fs::remove_dir_all(&run);
            Ok(())
        })
        .unwrap();
    // The generator is meant to reach the engine, not just the parser.
    let (ran, completed) = (ran.into_inner(), completed.into_inner());
    assert!(
        ran >= 40 && completed >= 30,
        "{ran} parsed, {completed} backtests"
    );
}

#[test]
fn random_bytes_never_panic_the_csv_parser() {
    runner(256)
        .run(&prop::collection::vec(any::<u8>(), 0..300), |bytes| {
            let _ = local::parse_csv(&bytes, "f.csv", Some("X"));
            Ok(())
        })
        .unwrap();
}

#[test]
fn broken_yahoo_answers_are_errors() {
    let body = fixture("market/yahoo_aapl_2024-01-02_2024-02-29.json");
    runner(128)
        .run(&mutated(body), |b| {
            // Ok (the flips left it valid), Yahoo's "no data", or a decode
            // error that quotes the answer: never a panic.
            if let Err(e) = online::parse_yahoo(&b, "http://127.0.0.1/x") {
                prop_assert!(e.to_string().contains("127.0.0.1"), "{}", e);
            }
            Ok(())
        })
        .unwrap();
    // Shapes serde accepts but the data does not fit.
    for v in [
        json!({"chart": {"result": [{"timestamp": [1, 2], "indicators": {"quote": [{"close": [1.0]}]}}]}}),
        json!({"chart": {"result": [{"timestamp": [1e300], "indicators": {"quote": []}}]}}),
        json!({"chart": {"result": [], "error": null}}),
        json!({"chart": {"result": [{"timestamp": [-99999999999i64], "indicators": {"quote": [{"open": [1], "high": [1], "low": [1], "close": [1], "volume": [1]}]}}]}}),
    ] {
        let _ = online::parse_yahoo(v.to_string().as_bytes(), "http://127.0.0.1/x");
    }
}

#[test]
fn broken_parquet_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["IBM.parquet", "two_tickers_zstd.parquet"] {
        let path = dir.path().join(name);
        runner(48)
            .run(&mutated(fixture(&format!("parquet/{name}"))), |b| {
                std::fs::write(&path, &b).unwrap();
                let _ = parquet_file::parse(&path, "f.parquet", Some("IBM"));
                Ok(())
            })
            .unwrap();
    }
}

#[test]
fn damaged_parsed_bars_entries_are_misses_or_same_length_data() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("IBM.csv");
    std::fs::write(&data, fixture("parquet/IBM.csv")).unwrap();
    let cache = dir.path().join("cache");
    let fresh = local::load_file(&data, "IBM", None, None, None, false).unwrap();
    local::load_file(&data, "IBM", None, None, Some(&cache), true).unwrap();
    let entry = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .next()
        .unwrap();
    let original = std::fs::read(&entry).unwrap();
    runner(128)
        .run(&mutated(original), |b| {
            std::fs::write(&entry, &b).unwrap();
            // Read-only: a damaged entry must not be replaced mid-test.
            let s = local::load_file(&data, "IBM", None, None, Some(&cache), false).unwrap();
            // A flipped value byte can change a value (the entry is trusted
            // once its identity and length check out), never the shape.
            prop_assert_eq!(s.bars.len(), s.bars.close.len());
            if b.len() < 64 {
                prop_assert_eq!(&s.bars.close, &fresh.bars.close, "a cut header is a miss");
            }
            Ok(())
        })
        .unwrap();
}

/// Rule expressions from the grammar's own tokens, in any order: mostly
/// parse errors, each of which must explain itself.
fn token_soup() -> impl Strategy<Value = String> {
    let token = prop::sample::select(vec![
        "sma(",
        "ema(",
        "rsi(",
        "macd(",
        "macd_signal(",
        "highest(",
        "lowest(",
        "crosses_above(",
        "crosses_below(",
        "close",
        "open",
        "high",
        "low",
        "volume",
        ",",
        ")",
        "(",
        "and",
        "or",
        "not",
        ">",
        "<",
        ">=",
        "==",
        "+",
        "-",
        "*",
        "/",
        "0",
        "1",
        "14",
        "-3",
        "1e400",
        "0.5",
        "2.",
        ".",
        "abc",
        "\"",
        " ",
    ]);
    prop::collection::vec(token, 0..14).prop_map(|t| t.join(" "))
}

/// Well-formed numeric expressions with edge-case windows (0, 1, longer
/// than the data, fractional, negative): they reach the evaluator.
fn numeric() -> impl Strategy<Value = String> {
    // Mostly valid (1 and longer than the data included), sometimes not.
    let window = prop_oneof![
        40 => prop::sample::select(vec!["1", "2", "3", "14", "200", "9000"]),
        1 => prop::sample::select(vec!["0", "2.5", "-3", "1e9"]),
    ];
    let column = prop::sample::select(vec!["close", "open", "high", "low", "volume"]);
    let leaf = prop_oneof![
        column.clone().prop_map(str::to_string),
        (-1e3f64..1e3).prop_map(|x| format!("{x:.3}")),
        prop::sample::select(vec!["0", "1e308", "-1e308"]).prop_map(str::to_string),
        (
            prop::sample::select(vec![
                "sma", "ema", "rsi", "std", "highest", "lowest", "lag", "roc"
            ]),
            column.clone(),
            window.clone()
        )
            .prop_map(|(f, c, w)| format!("{f}({c}, {w})")),
        (column.clone(), window.clone(), window.clone())
            .prop_map(|(c, a, b)| format!("bb_upper({c}, {a}, {b})")),
        (column, 1u32..30, 1u32..30, window.clone()).prop_map(|(c, a, b, d)| {
            // fast < slow, as the checker demands; equal ones are refused.
            format!("macd_hist({c}, {}, {}, {d})", a.min(b), a.max(b))
        }),
        window.prop_map(|w| format!("atr({w})")),
    ];
    leaf.prop_recursive(2, 6, 2, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(vec!["+", "-", "*", "/"]),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (
                prop::sample::select(vec!["min", "max"]),
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(f, a, b)| format!("{f}({a}, {b})")),
            inner.prop_map(|a| format!("abs({a})")),
        ]
    })
}

fn condition() -> impl Strategy<Value = String> {
    let compare = (
        numeric(),
        prop::sample::select(vec![">", "<", ">=", "<=", "==", "!="]),
        numeric(),
    )
        .prop_map(|(a, op, b)| format!("{a} {op} {b}"));
    let cross = (
        prop::sample::select(vec!["crosses_above", "crosses_below"]),
        numeric(),
        numeric(),
    )
        .prop_map(|(f, a, b)| format!("{f}({a}, {b})"));
    prop_oneof![compare, cross].prop_recursive(2, 4, 2, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(vec!["and", "or"]),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("({a}) {op} ({b})")),
            inner.prop_map(|a| format!("not ({a})")),
        ]
    })
}

#[test]
fn random_rule_expressions_parse_or_explain_and_what_parses_evaluates() {
    let bars = local::parse_csv(&fixture("parquet/IBM.csv"), "IBM.csv", Some("IBM"))
        .unwrap()
        .finish(None, None)
        .0;
    let short = local::parse_csv(
        b"date,open,high,low,close\n2020-01-02,1,2,0.5,1.5\n2020-01-03,1,2,0.5,0\n",
        "s.csv",
        None,
    )
    .unwrap()
    .finish(None, None)
    .0;
    let evaluated = std::sync::atomic::AtomicU32::new(0);
    let expr = prop_oneof![1 => token_soup(), 3 => condition()];
    runner(384)
        .run(&(expr.clone(), expr), |(entry, exit)| {
            match RuleSet::parse(&json!({"entry": entry, "exit": exit}), "strategy.rules") {
                Ok(rules) => {
                    evaluated.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    for b in [&bars, &short] {
                        let s = rules.signals(b);
                        prop_assert_eq!(s.len(), b.len());
                        prop_assert!(s.iter().all(|x| x.is_finite()), "{:?}", s);
                    }
                }
                Err(issues) => {
                    prop_assert!(!issues.is_empty());
                    prop_assert!(issues.iter().all(|i| !i.to_string().is_empty()));
                }
            }
            Ok(())
        })
        .unwrap();
    let evaluated = evaluated.into_inner();
    assert!(
        evaluated >= 100,
        "only {evaluated} rule sets reached the evaluator"
    );
}

/// JSON values of the kinds a config holds, nested a little.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        prop::sample::select(vec![
            "",
            "AAPL",
            "2005-01-01",
            "2001-02-30",
            "sma_crossover",
            "momentum",
            "local",
            "embedded",
            "yahoo",
            "rebalance",
            "hold",
            "close > 1",
            "nope",
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "name",
                    "params",
                    "fast",
                    "slow",
                    "rules",
                    "entry",
                    "n_simulations",
                    "seed",
                ]),
                inner,
                0..4,
            )
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

#[test]
fn random_configs_are_accepted_or_explained() {
    // A valid config with one to three keys replaced or removed: each key's
    // check is reached with the others fine.
    let base = json!({"codes": ["AAPL", "MSFT"], "start_date": "2005-01-01", "end_date": "2010-12-31",
        "source": "embedded", "initial_cash": 100000, "commission_rate": 0.001, "slippage": 0.0005,
        "position_adjustment": "rebalance", "rebalance_tolerance": 0.01, "benchmark": "IBM",
        "strategy": {"name": "sma_crossover", "params": {"fast": 10, "slow": 30}},
        "validation": {"monte_carlo": {"n_simulations": 50, "seed": 1}, "walk_forward": {"n_windows": 3}}});
    assert!(BacktestConfig::from_value(&base, false).is_ok());
    let keys = vec![
        "codes",
        "start_date",
        "end_date",
        "source",
        "initial_cash",
        "commission_rate",
        "slippage",
        "strategy",
        "validation",
        "benchmark",
        "position_adjustment",
        "rebalance_tolerance",
        "interval",
        "unknown_key",
    ];
    let edits = prop::collection::vec(
        (
            prop::sample::select(keys),
            prop::option::weighted(0.85, json_value()),
        ),
        1..4,
    );
    let accepted = std::sync::atomic::AtomicU32::new(0);
    runner(512)
        .run(&edits, |edits| {
            let mut v = base.clone();
            for (k, value) in edits {
                match value {
                    Some(x) => v[k] = x,
                    None => {
                        v.as_object_mut().unwrap().remove(k);
                    }
                }
            }
            match BacktestConfig::from_value(&v, false) {
                Ok(c) => {
                    accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    prop_assert!(!c.codes.is_empty());
                }
                Err(e) => {
                    let text = e.to_string();
                    // Every problem names the key it is about.
                    prop_assert!(text.contains('`'), "{}", text);
                }
            }
            Ok(())
        })
        .unwrap();
    assert!(
        accepted.into_inner() > 0,
        "some edits keep the config valid"
    );
}
