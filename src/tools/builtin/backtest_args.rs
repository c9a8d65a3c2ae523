//! `backtest`'s arguments as one `config.json` (docs §7.1): the typed flat
//! arguments (strategy and its params, symbols, dates, costs) laid over an
//! inline `config`, and the harmless slips small models make in it put
//! right, each with a warning in the result (docs §2.2.1): `validation` as a
//! string, `codes` as a comma-separated string, a JSON string where an
//! object belongs, numbers written as strings, a strategy's parameters
//! under another spelling (`sma_fast` for `fast`) or wrapped in the
//! strategy's name.

use serde_json::{Map, Value, json};

use crate::model::contract::BacktestArgs;

/// The config to write (`None`: run the run dir's own `config.json`) and
/// the slips that were put right.
pub fn config_of(args: &BacktestArgs) -> (Option<Map<String, Value>>, Vec<String>) {
    let flat = flat(args);
    let mut cfg = match (&args.config, flat.is_empty()) {
        (None, true) => return (None, Vec::new()),
        (Some(c), _) => c.clone(),
        (None, false) => Map::new(),
    };
    for (k, v) in flat {
        cfg.insert(k, v);
    }
    let warnings = tidy(&mut cfg);
    (Some(cfg), warnings)
}

/// The flat arguments as `config.json` keys, only those given.
fn flat(args: &BacktestArgs) -> Map<String, Value> {
    let mut m = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.to_string(), v);
        }
    };
    put("codes", args.symbols.clone());
    put("start_date", args.start.clone().map(Value::from));
    put("end_date", args.end.clone().map(Value::from));
    put("commission_rate", args.commission_rate.map(Value::from));
    put("slippage", args.slippage.map(Value::from));
    put("initial_cash", args.initial_cash.map(Value::from));
    put("benchmark", args.benchmark.clone().map(Value::from));
    put("risk_free", args.risk_free.map(Value::from));
    put("validation", args.validation.clone());
    let rules = args.strategy.as_deref().map(str::trim) == Some("rules")
        || args.entry.is_some()
        || args.exit.is_some();
    let strategy = if rules {
        let mut r = Map::new();
        if let Some(e) = &args.entry {
            r.insert("entry".into(), json!(e));
        }
        if let Some(x) = &args.exit {
            r.insert("exit".into(), json!(x));
        }
        Some(json!({"rules": r}))
    } else {
        args.strategy.as_deref().map(|name| {
            let mut s = Map::new();
            s.insert("name".into(), json!(name.trim()));
            if let Some(p) = &args.params {
                s.insert("params".into(), Value::Object(p.clone()));
            }
            Value::Object(s)
        })
    };
    put("strategy", strategy);
    m
}

const VALIDATION_PARTS: [&str; 3] = ["monte_carlo", "bootstrap", "walk_forward"];

/// Puts right what is clearly meant; returns a warning per repair.
pub fn tidy(cfg: &mut Map<String, Value>) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(Value::String(s)) = cfg.get("codes").cloned() {
        let codes: Vec<Value> = s
            .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
            .filter(|p| !p.is_empty())
            .map(|p| json!(p))
            .collect();
        warnings.push(format!(
            "`codes` was the string {s:?}; read as the list {}",
            Value::Array(codes.clone())
        ));
        cfg.insert("codes".into(), Value::Array(codes));
    }
    for key in ["strategy", "validation"] {
        if let Some(Value::String(s)) = cfg.get(key)
            && let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(s.trim())
        {
            warnings.push(format!(
                "`{key}` was a JSON string; read as the object it holds"
            ));
            cfg.insert(key.into(), v);
        }
    }
    if let Some(Value::Object(strategy)) = cfg.get_mut("strategy")
        && let Some(Value::String(p)) = strategy.get("params").cloned()
        && let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(p.trim())
    {
        warnings.push("`strategy.params` was a JSON string; read as the object it holds".into());
        strategy.insert("params".into(), v);
    }
    tidy_validation(cfg, &mut warnings);
    tidy_params(cfg, &mut warnings);
    for key in [
        "commission_rate",
        "slippage",
        "min_commission",
        "stamp_tax",
        "lot_size",
        "initial_cash",
    ] {
        if let Some(Value::String(s)) = cfg.get(key)
            && let Ok(x) = s.trim().parse::<f64>()
        {
            warnings.push(format!("`{key}` was the string {s:?}; read as {x}"));
            cfg.insert(key.into(), json!(x));
        }
    }
    warnings
}

/// `"validation": "monte_carlo"` (or `"monte carlo, bootstrap"`, `"all"`,
/// `true`) is the block with those parts on; a string naming none is left
/// out. All five configs the 1.5B model wrote had it as a string.
fn tidy_validation(cfg: &mut Map<String, Value>, warnings: &mut Vec<String>) {
    let asked: Vec<&str> = match cfg.get("validation") {
        Some(Value::String(s)) => {
            let s = s.to_ascii_lowercase().replace(['-', ' '], "_");
            if ["all", "true", "yes", "full"].contains(&s.trim_matches('_')) {
                VALIDATION_PARTS.to_vec()
            } else {
                VALIDATION_PARTS
                    .iter()
                    .copied()
                    .filter(|p| s.contains(p) || s.contains(&p.replace('_', "")))
                    .collect()
            }
        }
        Some(Value::Bool(true)) => VALIDATION_PARTS.to_vec(),
        _ => return,
    };
    let was = cfg
        .get("validation")
        .map(ToString::to_string)
        .unwrap_or_default();
    if asked.is_empty() {
        cfg.remove("validation");
        warnings.push(format!(
            "`validation` must be an object such as {{\"monte_carlo\": true}}; {was} names no part of it ({}) and was left out",
            VALIDATION_PARTS.join(", ")
        ));
        return;
    }
    let block: Map<String, Value> = asked.iter().map(|p| (p.to_string(), json!(true))).collect();
    let block = Value::Object(block);
    warnings.push(format!("`validation` was {was}; read as {block}"));
    cfg.insert("validation".into(), block);
}

/// The parameters of the built-in strategies that small models respell.
fn strategy_params(name: &str) -> &'static [&'static str] {
    match name
        .trim()
        .to_ascii_lowercase()
        .replace(['-', ' '], "_")
        .as_str()
    {
        "sma_crossover" | "sma_cross" | "ma_crossover" | "ema_crossover" | "ema_cross" => {
            &["fast", "slow"]
        }
        "rsi_mean_reversion" | "rsi_reversion" | "rsi" => &["period", "lower", "upper"],
        "momentum" => &["lookback"],
        "breakout" | "donchian_breakout" | "donchian" => &["window"],
        "bollinger_reversion" | "bollinger_mean_reversion" | "bollinger" => &["window", "k"],
        _ => &[],
    }
}

/// A parameter's name without the decorations small models add
/// (`sma_fast`, `fast_period`, `short_window`), if that is a known one.
fn known_param(key: &str, known: &[&str]) -> Option<&'static str> {
    const PREFIXES: [&str; 4] = ["sma_", "ema_", "ma_", "rsi_"];
    const SUFFIXES: [&str; 7] = [
        "_period", "_window", "_ma", "_sma", "_ema", "_length", "_days",
    ];
    let mut k = key.trim().to_ascii_lowercase();
    for p in PREFIXES {
        if let Some(rest) = k.strip_prefix(p) {
            k = rest.to_string();
        }
    }
    for s in SUFFIXES {
        if let Some(rest) = k.strip_suffix(s) {
            k = rest.to_string();
        }
    }
    let k = match (k.as_str(), known.contains(&"fast")) {
        ("short", true) => "fast".to_string(),
        ("long", true) => "slow".to_string(),
        _ => k,
    };
    ALL_PARAMS
        .iter()
        .find(|p| **p == k && known.contains(p))
        .copied()
}

const ALL_PARAMS: [&str; 8] = [
    "fast", "slow", "period", "lower", "upper", "lookback", "window", "k",
];

/// `{"sma_crossover": {"fast": 20, "slow": 50}}` is the inner object;
/// `sma_fast` is `fast` (only where the strategy takes `fast` and it is
/// not given as well).
fn tidy_params(cfg: &mut Map<String, Value>, warnings: &mut Vec<String>) {
    let Some(Value::Object(strategy)) = cfg.get_mut("strategy") else {
        return;
    };
    let name = strategy
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let known = strategy_params(&name);
    let Some(Value::Object(params)) = strategy.get_mut("params") else {
        return;
    };
    if params.len() == 1
        && let Some((key, Value::Object(inner))) = params.iter().next()
        && !known.contains(&key.as_str())
    {
        warnings.push(format!(
            "`params` held the object `{key}`; read its keys as the parameters"
        ));
        *params = inner.clone();
    }
    let keys: Vec<String> = params.keys().cloned().collect();
    for key in keys {
        if known.contains(&key.as_str()) {
            continue;
        }
        let Some(to) = known_param(&key, known) else {
            continue;
        };
        if params.contains_key(to) {
            continue;
        }
        if let Some(v) = params.remove(&key) {
            warnings.push(format!("`params.{key}` was read as `{to}`"));
            params.insert(to.to_string(), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_arguments_make_a_config() {
        let args = BacktestArgs {
            strategy: Some("sma_crossover".into()),
            params: Some(json!({"fast": 10, "slow": 30}).as_object().unwrap().clone()),
            symbols: Some(json!(["AAPL"])),
            start: Some("2005-01-01".into()),
            end: Some("2008-12-31".into()),
            commission_rate: Some(0.0005),
            ..BacktestArgs::default()
        };
        let (cfg, warnings) = config_of(&args);
        assert!(warnings.is_empty());
        assert_eq!(
            Value::Object(cfg.unwrap()),
            json!({"codes": ["AAPL"], "start_date": "2005-01-01", "end_date": "2008-12-31",
                   "commission_rate": 0.0005,
                   "strategy": {"name": "sma_crossover", "params": {"fast": 10, "slow": 30}}})
        );
        assert_eq!(config_of(&BacktestArgs::default()), (None, Vec::new()));
    }

    #[test]
    fn rules_and_a_full_config_under_flat_arguments() {
        let args = BacktestArgs {
            entry: Some("sma(close, 20) > sma(close, 50)".into()),
            exit: Some("sma(close, 20) < sma(close, 50)".into()),
            end: Some("2012-12-31".into()),
            config: Some(
                json!({"codes": ["IBM"], "start_date": "2010-01-01", "end_date": "2011-01-01"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
            ..BacktestArgs::default()
        };
        let cfg = Value::Object(config_of(&args).0.unwrap());
        assert_eq!(cfg["end_date"], "2012-12-31", "a flat argument wins");
        assert_eq!(cfg["codes"], json!(["IBM"]));
        assert_eq!(
            cfg["strategy"]["rules"]["entry"],
            "sma(close, 20) > sma(close, 50)"
        );
    }

    #[test]
    fn slips_are_put_right_with_a_warning() {
        let mut cfg = json!({"codes": "AAPL, MSFT", "validation": "monte_carlo",
            "strategy": {"name": "momentum", "params": "{\"lookback\": 60}"}, "slippage": "0.0005"})
        .as_object()
        .unwrap()
        .clone();
        let warnings = tidy(&mut cfg);
        assert_eq!(
            Value::Object(cfg),
            json!({"codes": ["AAPL", "MSFT"], "validation": {"monte_carlo": true},
                   "strategy": {"name": "momentum", "params": {"lookback": 60}}, "slippage": 0.0005})
        );
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert!(
            warnings
                .iter()
                .any(|w| w == "`validation` was \"monte_carlo\"; read as {\"monte_carlo\":true}"),
            "{warnings:?}"
        );
        let mut cfg = json!({"validation": "robust"}).as_object().unwrap().clone();
        let warnings = tidy(&mut cfg);
        assert!(cfg.get("validation").is_none());
        assert!(warnings[0].contains("names no part of it"), "{warnings:?}");
        let mut cfg = json!({"validation": "Monte Carlo and walk-forward"})
            .as_object()
            .unwrap()
            .clone();
        tidy(&mut cfg);
        assert_eq!(
            cfg["validation"],
            json!({"monte_carlo": true, "walk_forward": true})
        );
    }

    /// Parameter spellings the 1.5B model wrote in the evaluation.
    #[test]
    fn respelled_and_wrapped_strategy_params_are_read() {
        let read = |strategy: Value| {
            let mut cfg = json!({ "strategy": strategy }).as_object().unwrap().clone();
            let warnings = tidy(&mut cfg);
            (cfg["strategy"]["params"].clone(), warnings)
        };
        let (p, w) =
            read(json!({"name": "sma_crossover", "params": {"sma_fast": 20, "sma_slow": 50}}));
        assert_eq!(p, json!({"fast": 20, "slow": 50}));
        assert_eq!(
            w,
            [
                "`params.sma_fast` was read as `fast`",
                "`params.sma_slow` was read as `slow`"
            ]
        );
        let (p, w) = read(
            json!({"name": "sma_crossover", "params": {"sma_crossover": {"fast": 20, "slow": 50}}}),
        );
        assert_eq!(p, json!({"fast": 20, "slow": 50}));
        assert_eq!(
            w,
            ["`params` held the object `sma_crossover`; read its keys as the parameters"]
        );
        let (p, _) = read(
            json!({"name": "ema_crossover", "params": {"short_window": 5, "long_window": 20}}),
        );
        assert_eq!(p, json!({"fast": 5, "slow": 20}));
        let (p, _) =
            read(json!({"name": "rsi_mean_reversion", "params": {"rsi_period": 10, "lower": 25}}));
        assert_eq!(p, json!({"period": 10, "lower": 25}));
        // Not a clear slip: left for the engine to refuse with its own message.
        let (p, w) = read(
            json!({"name": "sma_crossover", "params": {"fast": 20, "fast_period": 10, "sma": 5}}),
        );
        assert_eq!(p, json!({"fast": 20, "fast_period": 10, "sma": 5}));
        assert!(w.is_empty(), "{w:?}");
        let (p, _) = read(json!({"name": "momentum", "params": {"sma_fast": 3}}));
        assert_eq!(p, json!({"sma_fast": 3}));
    }
}
