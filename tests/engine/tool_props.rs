//! Every tool of the manifest under generated arguments (issue 35): values
//! drawn from the tool's own JSON schema and extremes (1e15, −1e308, "NaN",
//! empty and 10⁵-element arrays, far dates, huge integers), alone or
//! mutating a valid call of the tool. For each call: no panic (caught here,
//! on the call's thread and the runtime's workers, so the test does not
//! lean on the scheduler's panic boundary), an answer within the call's
//! deadline + 1 s, and no `ok` answer with a null number in it.
//!
//! Seeded (a SplitMix64 of its own rather than `proptest`: the values come
//! from each tool's schema and a valid call of it, and a failure names the
//! seed's call whole, so there is nothing to shrink): `VIBEDESK_PROPTEST_SEED`
//! replays a run, `VIBEDESK_PROPTEST_CASES` sets the calls per tool (default
//! 16, 400 calls in all, a few seconds), `VIBEDESK_PROPTEST_TOOL` keeps one
//! tool, `VIBEDESK_PROPTEST_VERBOSE` prints every answer's status and nulls.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::memory::{MemoryFlags, MemoryStore, SkillSet};
use vibedesk::research::data::DataConfig;
use vibedesk::sandbox::RunnerConfig;
use vibedesk::tools::builtin::backtest::BacktestToolConfig;
use vibedesk::tools::builtin::{MANIFEST, MemoryEnv, ToolEnv, register_entries};
use vibedesk::tools::{BackgroundQueue, Registry, Tool, ToolContext};

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");

/// The deadline each call gets here (its cancel token fires then); the
/// answer must come within it + 1 s. Far below the tools' own (minutes):
/// the generated values stay within documented maxima that answer fast.
const DEADLINE: Duration = Duration::from_secs(10);

/// A small seeded generator (SplitMix64): the same seed, the same calls.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())].clone()
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// A daily return: about N(0, 1 %), from the sum of uniforms.
    fn ret(&mut self) -> f64 {
        let s: f64 = (0..4).map(|_| self.unit()).sum::<f64>() - 2.0;
        s * 0.017
    }
}

const NUMBERS: [f64; 14] = [
    1e15, -1e15, -1e308, 1e308, 0.0, -1.0, 1.0, 0.5, 1000.0, -2.0, 1e-300, 5e-324, 0.2, 100.0,
];
const DATES: [&str; 7] = [
    "9999-12-31",
    "0001-01-01",
    "2010-01-04",
    "2016-12-30",
    "2017-11-10",
    "2000-01-03",
    "not a date",
];
const STRINGS: [&str; 9] = [
    "SPY",
    "AAPL",
    "",
    "NaN",
    "9999-12-31",
    "ff:MktRF",
    "../../etc/passwd",
    "MSFT",
    "inf",
];

fn extreme_int(g: &mut Gen) -> Value {
    match g.below(9) {
        0 => json!(i64::MAX),
        1 => json!(i64::MIN),
        2 => json!(u64::MAX),
        3 => json!(1_000_000_000_000_000i64),
        4 => json!(-1),
        5 => json!(0),
        6 => json!(100_000),
        7 => json!(1),
        _ => json!(g.below(300)),
    }
}

fn extreme_number(g: &mut Gen) -> Value {
    match g.below(10) {
        // "NaN as a string", where a number is due.
        0 => json!(g.pick(&["NaN", "inf", "-1e400"])),
        1 => json!(g.ret()),
        _ => json!(g.pick(&NUMBERS)),
    }
}

/// A numeric series: ordinary returns, a constant, extremes mixed in,
/// empty, one value, or 10⁵ values.
fn series(g: &mut Gen, len: usize) -> Value {
    let kind = g.below(5);
    let c = g.pick(&NUMBERS);
    let xs: Vec<Value> = (0..len)
        .map(|i| match kind {
            0 => json!(c),
            1 if i % 7 == 3 => json!(g.pick(&NUMBERS)),
            2 => json!(100.0 + g.ret() * i as f64),
            _ => json!(g.ret()),
        })
        .collect();
    Value::Array(xs)
}

fn series_len(g: &mut Gen) -> usize {
    match g.below(10) {
        0 => 0,
        1 => 1,
        2 => 2,
        3 => 100_000,
        4 => 5,
        _ => 30 + g.below(600),
    }
}

/// `{name: [values]}` for an object whose values are numeric arrays.
fn series_map(g: &mut Gen) -> Value {
    let n = g.pick(&[1usize, 1, 2, 2, 3, 13]);
    let len = series_len(g);
    let mut m = Map::new();
    for i in 0..n {
        let l = if g.chance(10) { g.below(len + 2) } else { len };
        m.insert(format!("s{i}"), series(g, l));
    }
    Value::Object(m)
}

/// A value for the property `name` of schema `s`.
fn value_of(g: &mut Gen, name: &str, s: &Value, depth: usize) -> Value {
    if let Some(e) = s.get("enum").and_then(Value::as_array)
        && !g.chance(5)
    {
        return g.pick(e);
    }
    let ty = match s.get("type") {
        Some(Value::Array(ts)) => g.pick(ts),
        Some(t) => t.clone(),
        None => json!(g.pick(&["object", "string", "number"])),
    };
    let date_like = ["start", "end", "as_of"].iter().any(|d| name.contains(d));
    match ty.as_str().unwrap_or("string") {
        "number" => extreme_number(g),
        "integer" => {
            let lo = s.get("minimum").and_then(Value::as_i64);
            let hi = s.get("maximum").and_then(Value::as_i64);
            match (lo, hi) {
                (Some(lo), Some(hi)) if g.chance(70) => json!(g.pick(&[lo, hi])),
                _ => extreme_int(g),
            }
        }
        "boolean" => json!(g.chance(50)),
        "string" if date_like => json!(g.pick(&DATES)),
        "string" => {
            if g.chance(3) {
                json!("x".repeat(100_000))
            } else {
                json!(g.pick(&STRINGS))
            }
        }
        "array" => {
            let items = s.get("items").cloned().unwrap_or(json!({}));
            if items["type"] == "number" {
                let len = series_len(g);
                return series(g, len);
            }
            let len = match g.below(6) {
                0 => 0,
                1 if depth == 0 => 20_000,
                _ => 1 + g.below(13),
            };
            Value::Array(
                (0..len)
                    .map(|_| value_of(g, name, &items, depth + 1))
                    .collect(),
            )
        }
        "object" => {
            if s["additionalProperties"]["type"] == "array" {
                return series_map(g);
            }
            if s["additionalProperties"]["type"] == "number" {
                let mut m = Map::new();
                for t in ["SPY", "TLT", "AAPL"] {
                    m.insert(t.into(), extreme_number(g));
                }
                return Value::Object(m);
            }
            if depth > 2 {
                return json!({});
            }
            match s.get("properties") {
                Some(p) => object_of(g, s, p, depth + 1),
                None => {
                    json!({"window": extreme_int(g), "period": extreme_int(g), "k": extreme_number(g)})
                }
            }
        }
        _ => Value::Null,
    }
}

fn object_of(g: &mut Gen, s: &Value, props: &Value, depth: usize) -> Value {
    let required: Vec<&str> = s["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut m = Map::new();
    for (k, p) in props.as_object().into_iter().flatten() {
        if required.contains(&k.as_str()) || g.chance(50) {
            m.insert(k.clone(), value_of(g, k, p, depth));
        }
    }
    Value::Object(m)
}

/// A valid call of each tool, which the generator also mutates: the
/// schema alone rarely reaches past a tool's first check.
fn seed(tool: &str) -> Value {
    let returns = |g: &mut Gen, n: usize, k: usize| {
        let mut m = Map::new();
        for i in 0..k {
            m.insert(
                format!("r{i}"),
                Value::Array((0..n).map(|_| json!(g.ret())).collect()),
            );
        }
        Value::Object(m)
    };
    let mut g = Gen(7);
    match tool {
        "read_file" => json!({"path": "notes.md"}),
        "list_dir" => json!({}),
        "write_file" => json!({"path": "notes.md", "content": "hello"}),
        "edit_file" => json!({"path": "notes.md", "old_string": "hello", "new_string": "bye"}),
        "bash" => json!({"command": "echo hi", "timeout_seconds": 5}),
        "compact" => json!({}),
        "get_market_data" => json!({"symbol": "SPY", "start": "2010-01-04", "end": "2010-03-31"}),
        "technical_indicator" => {
            json!({"symbol": "AAPL", "indicator": "rsi", "params": {"period": 14}, "start": "2012-01-03", "end": "2012-12-31"})
        }
        "option_price" => {
            json!({"kind": "call", "spot": 100.0, "strike": 105.0, "expiry_years": 0.5, "volatility": 0.2, "rate": 0.03, "steps": 200, "style": "american"})
        }
        "implied_volatility" => {
            json!({"kind": "put", "spot": 100.0, "strike": 95.0, "expiry_years": 0.25, "price": 2.1, "rate": 0.02})
        }
        "option_strategy" => {
            json!({"legs": [{"kind": "call", "strike": 100.0, "quantity": 1.0}, {"kind": "call", "strike": 110.0, "quantity": -1.0}], "spot": 100.0, "volatility": 0.25, "expiry_years": 0.5, "rate": 0.01})
        }
        "portfolio_optimize" => {
            json!({"method": "max_sharpe", "returns": returns(&mut g, 250, 3), "risk_free_rate": 0.02})
        }
        "risk_report" => {
            json!({"returns": returns(&mut g, 250, 2), "confidence": 0.99, "horizon_days": 10})
        }
        "stat_test" => json!({"test": "adf", "series": returns(&mut g, 300, 1)}),
        "volatility_model" => json!({"model": "garch", "returns": returns(&mut g, 500, 1)}),
        "factor_ic" => {
            json!({"factor": {"indicator": "momentum", "params": {"window": 60, "skip": 5}}, "universe": ["AAPL", "MSFT", "SPY", "QQQ", "XOM", "JPM"], "start": "2012-01-03", "end": "2013-12-31", "forward_days": [5]})
        }
        "factor_screen" => {
            json!({"expressions": [{"name": "rev", "expr": "-delta(close, 5)"}, {"name": "vol", "expr": "rank(volume)"}], "symbols": ["AAPL", "MSFT", "XOM", "JPM", "KO"], "start": "2012-01-03", "end": "2012-06-29", "horizons": [1, 5]})
        }
        "regression" => {
            json!({"y": {"y": (0..120).map(|_| g.ret()).collect::<Vec<_>>()}, "x": [{"x": (0..120).map(|_| g.ret()).collect::<Vec<_>>()}], "hac_lags": 3})
        }
        "overfitting" => json!({"returns": returns(&mut g, 400, 4), "partitions": 8}),
        "backtest" => {
            json!({"strategy": "sma_crossover", "params": {"fast": 10, "slow": 30}, "symbols": ["SPY"], "start": "2010-01-04", "end": "2011-12-30"})
        }
        "read_artifact" => json!({"name": "metrics.json"}),
        "sweep" => {
            json!({"spec": {"base": {"codes": ["SPY"], "start_date": "2010-01-04", "end_date": "2010-12-31", "strategy": {"name": "sma_crossover"}}, "axes": {"strategy.params.fast": [5, 10], "strategy.params.slow": [30]}}, "plan_only": true})
        }
        "remember" => {
            json!({"action": "save", "title": "costs", "content": "use 10 bp", "memory_type": "feedback"})
        }
        "recall" | "session_search" => json!({"query": "costs"}),
        "load_skill" => json!({"name": "backtest-design"}),
        _ => json!({}),
    }
}

/// Calls run every time beside the generated ones: the extremes issue 35
/// reported, which a generator reaches only by chance.
fn named_extremes(tool: &str) -> Vec<Value> {
    match tool {
        "get_market_data" => vec![
            json!({"symbol": "SPY", "last_n": 1_000_000_000_000_000i64}),
            json!({"symbol": "SPY", "last_n": i64::MAX}),
            json!({"symbol": "SPY", "end": "9999-12-31", "last_n": 5}),
            json!({"symbol": "SPY", "start": "0001-01-01", "end": "9999-12-31", "limit": 3}),
        ],
        "technical_indicator" => vec![
            json!({"symbol": "SPY", "indicator": "sma", "params": {"window": u64::MAX}}),
            json!({"symbol": "SPY", "indicator": "momentum", "params": {"window": 100_000, "skip": 99_999}, "end": "9999-12-31"}),
        ],
        "option_price" => vec![
            json!({"kind": "call", "spot": 100, "strike": 100, "expiry_years": 1, "volatility": 0.2, "rate": 1000}),
        ],
        "risk_report" => vec![json!({"returns": {"a": [0.01, -2.0, 0.02, 0.01, 0.0]}})],
        "overfitting" => vec![json!({"returns": {"flat": vec![0.001; 300]}})],
        _ => vec![],
    }
}

/// The call of case `case` for `tool` with schema `schema`: the seed (case
/// 0), the seed with one or two values replaced, or all from the schema.
fn arguments(g: &mut Gen, tool: &str, schema: &Value, case: usize) -> Value {
    let props = &schema["properties"];
    let mut args = seed(tool);
    if case == 0 {
        return args;
    }
    if g.chance(30) {
        return object_of(g, schema, props, 0);
    }
    let keys: Vec<String> = props
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    for _ in 0..1 + g.below(2) {
        if keys.is_empty() {
            break;
        }
        let k = g.pick(&keys);
        let v = value_of(g, &k, &props[&k], 0);
        args[&k] = v;
    }
    // Within a valid nested series, one value made extreme.
    if g.chance(30)
        && let Some(m) = args.get_mut("returns").and_then(Value::as_object_mut)
        && let Some(Value::Array(xs)) = m.values_mut().next()
        && !xs.is_empty()
    {
        let i = g.below(xs.len());
        xs[i] = json!(g.pick(&[1e308, -1e308, -2.0, 1e15, -1.5, 0.0]));
    }
    args
}

/// Paths of the nulls in `v`.
fn nulls(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Null => out.push(at.to_string()),
        Value::Array(xs) => xs
            .iter()
            .enumerate()
            .for_each(|(i, x)| nulls(x, &format!("{at}[{i}]"), out)),
        Value::Object(m) => m
            .iter()
            .for_each(|(k, x)| nulls(x, &format!("{at}.{k}"), out)),
        _ => {}
    }
}

/// Whether the output schema has a number at a null's path (a plain
/// `number` or `integer`, or one that may be null). A NaN or an infinity
/// serialises as null, so this is how they show.
fn number_promised(schema: &Value, defs: &Value, path: &str) -> bool {
    let resolve = |mut s: Value| -> Value {
        for _ in 0..8 {
            if let Some(r) = s.get("$ref").and_then(Value::as_str) {
                let name = r.rsplit('/').next().unwrap_or("");
                s = defs[name].clone();
                continue;
            }
            break;
        }
        s
    };
    let mut s = schema.clone();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, rest) = part.split_once('[').unwrap_or((part, ""));
        s = resolve(s);
        s = if !s["properties"][key].is_null() {
            s["properties"][key].clone()
        } else {
            s["additionalProperties"].clone()
        };
        for _ in rest.split('[').filter(|r| !r.is_empty()) {
            s = resolve(s)["items"].clone();
        }
    }
    let s = resolve(s);
    let types: Vec<String> = match &s["type"] {
        Value::String(t) => vec![t.clone()],
        Value::Array(ts) => ts
            .iter()
            .filter_map(|t| t.as_str().map(String::from))
            .collect(),
        _ => vec![],
    };
    types.iter().any(|t| t == "number" || t == "integer")
}

/// Number fields whose null the docs give a meaning, by their key: not a
/// figure that could not be computed, but one that does not exist.
const DOCUMENTED_NULLS: [(&str, &str); 7] = [
    ("next_offset", "no further page"),
    ("recovery", "the drawdown has not recovered"),
    ("in_sample", "the sweep has no in-sample split"),
    (
        "std_err_classic",
        "a parameter at its bound: H⁻¹ has no root there",
    ),
    ("std_err", "a singular Hessian leaves the errors null"),
    ("t_stat", "a singular Hessian leaves the errors null"),
    ("p_value", "a singular Hessian leaves the errors null"),
];

fn documented_null(path: &str) -> bool {
    let key = path.rsplit('.').next().unwrap_or(path);
    let key = key.split('[').next().unwrap_or(key);
    DOCUMENTED_NULLS.iter().any(|(k, _)| *k == key)
}

/// Panics seen on this test's threads (named `props-…`), by message; the
/// other tests' panics go to the hook that was there.
fn panics() -> &'static Mutex<Vec<String>> {
    static PANICS: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let name = std::thread::current().name().unwrap_or("").to_string();
            if name.starts_with("props-") {
                panics()
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(format!("{name}: {info}"));
            } else {
                previous(info);
            }
        }));
    });
    PANICS.get_or_init(|| Mutex::new(Vec::new()))
}

fn registry(dir: &Path) -> Registry {
    let mut env = ToolEnv::new(DataConfig::offline());
    let runner = RunnerConfig {
        timeout: Duration::from_secs(8),
        drain_timeout: Duration::from_secs(1),
        ..RunnerConfig::default()
    };
    env.runner = runner.clone();
    env.backtest = Arc::new(BacktestToolConfig {
        engine_program: PathBuf::from(BIN),
        runner,
        cache_dir: None,
        offline: true,
        python: None,
        timeout: Duration::from_secs(8),
        yahoo_base_url: None,
        stooq_base_url: None,
        defaults: Default::default(),
    });
    env.tool_timeout = Some(Duration::from_secs(8));
    let store = MemoryStore::open(dir.join("mem"), MemoryFlags::default()).unwrap();
    env.memory = Some(MemoryEnv {
        store: Arc::new(store),
        skills: Arc::new(SkillSet::load(None)),
        sessions_dir: dir.join("sessions"),
    });
    let mut r = Registry::new();
    register_entries(&mut r, MANIFEST, &env).unwrap();
    r
}

/// What one call came to, when it broke a property.
fn call(tool: Arc<dyn Tool>, args: Value, dir: &Path) -> Option<String> {
    let run = dir.join("run");
    let ws = dir.join("ws");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.md"), "hello\n").unwrap();
    let cancel = CancellationToken::new();
    let ctx = ToolContext {
        call_id: "p".into(),
        session_id: "s".into(),
        run_dir: run,
        workspace: ws,
        cancel: cancel.clone(),
        background: BackgroundQueue::default(),
    };
    let name = tool.name().to_string();
    let args_shown = args.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let thread_name = format!("props-{name}");
    let spawned = std::thread::Builder::new()
        .name(thread_name.clone())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name(thread_name)
                .enable_all()
                .build()
                .unwrap();
            let out = std::panic::catch_unwind(AssertUnwindSafe(|| {
                rt.block_on(tool.call_with_output(args, &ctx))
            }));
            let _ = tx.send(out.map_err(|p| {
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            }));
            rt.shutdown_background();
        });
    spawned.unwrap();
    let started = Instant::now();
    let answer = match rx.recv_timeout(DEADLINE) {
        Ok(a) => a,
        Err(_) => {
            // The deadline: cancel, then 1 s more to answer.
            cancel.cancel();
            match rx.recv_timeout(Duration::from_secs(1)) {
                Ok(a) => a,
                Err(_) => {
                    return Some(format!(
                        "no answer {:.1} s after the call ({DEADLINE:?} deadline + 1 s)",
                        started.elapsed().as_secs_f64()
                    ));
                }
            }
        }
    };
    match answer {
        Err(panic) => Some(format!("panicked: {panic}")),
        Ok(Err(e)) => {
            if std::env::var_os("VIBEDESK_PROPTEST_VERBOSE").is_some() {
                let e = e.to_string();
                eprintln!("ERR {name} {}", e.chars().take(150).collect::<String>());
            }
            None
        }
        Ok(Ok(reply)) => {
            if std::env::var_os("VIBEDESK_PROPTEST_VERBOSE").is_some() {
                eprintln!("OK {name}");
            }
            let out = reply.output?;
            let mut found = Vec::new();
            nulls(&out, "", &mut found);
            let schema = registry_output_schema(&name);
            let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
            if std::env::var_os("VIBEDESK_PROPTEST_VERBOSE").is_some() && !found.is_empty() {
                eprintln!("NULLS {name} {found:?} ARGS {}", shown(&args_shown));
            }
            found.retain(|p| number_promised(&schema, &defs, p) && !documented_null(p));
            (!found.is_empty()).then(|| {
                let text: String = out.to_string().chars().take(600).collect();
                format!("ok with null numbers at {found:?}: {text}")
            })
        }
    }
}

fn registry_output_schema(name: &str) -> Value {
    static SCHEMAS: OnceLock<Map<String, Value>> = OnceLock::new();
    SCHEMAS
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            registry(dir.path())
                .iter()
                .map(|t| {
                    (
                        t.name().to_string(),
                        t.output_schema().unwrap_or(Value::Null),
                    )
                })
                .collect()
        })
        .get(name)
        .cloned()
        .unwrap_or(Value::Null)
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// `args` with each long array cut to its first values and its extremes.
fn brief(v: &Value) -> Value {
    match v {
        Value::Array(xs) if xs.len() > 6 => {
            let nums: Vec<f64> = xs.iter().filter_map(Value::as_f64).collect();
            let lo = nums.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = nums.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            json!(format!(
                "[{} values: {}, {}, … min {lo:e} max {hi:e}]",
                xs.len(),
                xs[0],
                xs[1]
            ))
        }
        Value::Array(xs) => Value::Array(xs.iter().map(brief).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, x)| (k.clone(), brief(x))).collect()),
        Value::String(s) if s.len() > 60 => json!(format!("{}… ({} bytes)", &s[..40], s.len())),
        other => other.clone(),
    }
}

fn shown(args: &Value) -> String {
    let text = brief(args).to_string();
    if text.len() <= 400 {
        return text;
    }
    let head: String = text.chars().take(400).collect();
    format!("{head}… ({} bytes)", text.len())
}

#[test]
fn every_manifest_tool_survives_generated_and_extreme_arguments() {
    let cases = env_number("VIBEDESK_PROPTEST_CASES", 16) as usize;
    let seed = env_number("VIBEDESK_PROPTEST_SEED", 35);
    let only = std::env::var("VIBEDESK_PROPTEST_TOOL").ok();
    let panics = panics();
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path());
    assert_eq!(registry.len(), MANIFEST.len(), "every tool is built");
    let mut failures = Vec::new();
    let started = Instant::now();
    for (t, tool) in registry.iter().enumerate() {
        let name = tool.name().to_string();
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let schema = tool.parameters();
        let mut g = Gen(seed ^ (t as u64 + 1).wrapping_mul(0x51_7CC1_B727_220A));
        let named = named_extremes(&name);
        for case in 0..cases + named.len() {
            let args = match case.checked_sub(cases) {
                Some(i) => named[i].clone(),
                None => arguments(&mut g, &name, &schema, case),
            };
            let call_dir = dir.path().join(format!("{name}-{case}"));
            let before = panics.lock().unwrap().len();
            let broken = call(tool.clone(), args.clone(), &call_dir);
            let caught: Vec<String> = panics.lock().unwrap()[before..].to_vec();
            if let Some(b) = broken {
                failures.push(format!("{name} {}: {b}", shown(&args)));
            } else if !caught.is_empty() {
                failures.push(format!(
                    "{name} {}: panicked inside: {caught:?}",
                    shown(&args)
                ));
            }
        }
    }
    eprintln!(
        "tool_props: {} tools × {cases} cases (seed {seed}) in {:.1} s",
        registry.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
#[test]
fn dump_output_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = String::new();
    for t in registry(dir.path()).iter() {
        s.push_str(&format!(
            "== {}\n{}\n",
            t.name(),
            serde_json::to_string_pretty(&t.output_schema().unwrap_or(Value::Null)).unwrap()
        ));
    }
    std::fs::write("/tmp/out_schemas.txt", s).unwrap();
}
