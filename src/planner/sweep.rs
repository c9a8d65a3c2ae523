//! The offline planner's parameter sweeps (docs §18.8): "sweep the SMA
//! crossover fast 5 to 30 and slow 50 to 200 on AAPL, MSFT from 2005 to
//! 2015" becomes one `sweep` call, each symbol run alone, the first 70 % of
//! the period in-sample and the rest out-of-sample, and the answer gives
//! the ranking (out-of-sample, in-sample beside it), the best cell's
//! deflated Sharpe for the cells tried, and the heatmap.
//!
//! A request that says "sweep" but names no range gets the strategy's
//! usual grid, said in the answer; one that names none of the strategy's
//! parameters is still a sweep, never quietly a single backtest.

use std::sync::LazyLock;

use chrono::NaiveDate;
use regex::Regex;
use serde_json::{Map, Value, json};

use super::{PlannedCall, backtest_config, backtest_period, date_range, symbols, typed};
use crate::model::names as tool;
use crate::model::sweep::{SweepArgs, SweepOutput};

/// Share of the period the parameters are chosen on; the rest is the
/// out-of-sample window the ranking reads.
const IN_SAMPLE_SHARE: f64 = 0.7;
/// Values per axis when a range names no step.
const VALUES_PER_RANGE: f64 = 6.0;
/// Ranked cells the answer shows.
const SHOWN: usize = 10;

/// "fast 5 to 30", "slow from 50 to 200 step 25", "period 7-21 by 7".
static RANGE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(fast|slow|period|lower|upper|window|lookback|k)\s*(?:from\s+|=\s*|of\s+|between\s+)?(\d+(?:\.\d+)?)\s*(?:to|-|–|\.\.|and)\s*(\d+(?:\.\d+)?)(?:\s*,?\s*(?:step|by|every|in steps of)\s*(\d+(?:\.\d+)?))?",
    )
    .ok()
});
/// "fast in [5, 10, 20]", "k = [1.5, 2]".
static LIST: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(fast|slow|period|lower|upper|window|lookback|k)\s*(?:in|=|:)?\s*\[([\d.,\s]+)\]",
    )
    .ok()
});

/// "24-month train", "training 2 years", "36 months of training".
static TRAIN: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:(\d{1,3})[- ]?(month|year)s?\s*(?:of\s+)?(?:train|training|in-sample|fit)|(?:train|training|in-sample|fit)(?:ing)?\s*(?:windows?\s*)?(?:of\s+)?(\d{1,3})[- ]?(month|year)s?)").ok()
});
/// "6-month test", "testing 1 year", "12 months of test".
static TEST: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:(\d{1,3})[- ]?(month|year)s?\s*(?:of\s+)?(?:test|testing|out-of-sample)|(?:test|testing|out-of-sample)(?:ing)?\s*(?:windows?\s*)?(?:of\s+)?(\d{1,3})[- ]?(month|year)s?)").ok()
});
/// Walk-forward windows when the request names none (months).
const TRAIN_MONTHS: u32 = 36;
const TEST_MONTHS: u32 = 12;

/// Whether the request asks for a sweep rather than one backtest.
pub(super) fn is_sweep(lower: &str) -> bool {
    [
        "sweep",
        "grid search",
        "parameter search",
        "parameter scan",
        "every combination",
        "walk-forward",
        "walk forward",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// The sweep a plain request asks for, or `None` when it asks for none or
/// names no symbol. Read before the backtest it would otherwise read as
/// (docs §18.8).
pub(super) fn read(text: &str) -> Option<PlannedCall> {
    if !is_sweep(&text.to_lowercase()) {
        return None;
    }
    let spec = spec(text)?;
    Some(PlannedCall::typed(
        tool::SWEEP,
        SweepArgs {
            spec: Some(Value::Object(spec)),
            ..SweepArgs::default()
        },
    ))
}

/// The spec of [`intent`]; its parts are also what the answer says.
fn spec(text: &str) -> Option<Map<String, Value>> {
    let codes = symbols(text);
    let first = codes.first()?.clone();
    let (start, end) = date_range(text);
    let (start, end) = backtest_period(start, end);
    let base = backtest_config(
        text,
        std::slice::from_ref(&first),
        Some(start.clone()),
        Some(end.clone()),
    );
    let strategy = base
        .get("strategy")
        .and_then(|s| s.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("sma_crossover")
        .to_string();
    let mut axes = named_axes(text, &strategy);
    if axes.is_empty() {
        axes = default_axes(&strategy);
    }
    let mut spec = Map::new();
    spec.insert("base".into(), Value::Object(base));
    spec.insert("axes".into(), Value::Object(axes));
    if strategy.ends_with("_crossover") {
        spec.insert("constraint".into(), json!("fast < slow"));
    }
    // Each symbol alone (one too: its results are labelled by it).
    spec.insert("universe".into(), json!(codes));
    let lower = text.to_lowercase();
    let split = if lower.contains("walk-forward") || lower.contains("walk forward") {
        Some(walk_forward(text))
    } else {
        split(&start, &end)
    };
    if let Some(split) = split {
        spec.insert("split".into(), split);
    }
    spec.insert("rank_by".into(), json!("sharpe"));
    Some(spec)
}

/// The axes the request names for the strategy's own parameters.
fn named_axes(text: &str, strategy: &str) -> Map<String, Value> {
    let known = parameters(strategy);
    let mut axes = Map::new();
    let mut put = |name: &str, values: Value| {
        let name = name.to_ascii_lowercase();
        if known.contains(&name.as_str()) {
            axes.insert(format!("strategy.params.{name}"), values);
        }
    };
    if let Some(re) = LIST.as_ref() {
        for c in re.captures_iter(text) {
            let values: Vec<f64> = c[2]
                .split(',')
                .filter_map(|v| v.trim().parse().ok())
                .collect();
            if !values.is_empty() {
                put(&c[1], json!(values));
            }
        }
    }
    if let Some(re) = RANGE.as_ref() {
        for c in re.captures_iter(text) {
            let (Ok(a), Ok(b)) = (c[2].parse::<f64>(), c[3].parse::<f64>()) else {
                continue;
            };
            let (from, to) = (a.min(b), a.max(b));
            let step = c
                .get(4)
                .and_then(|s| s.as_str().parse::<f64>().ok())
                .filter(|s| *s > 0.0);
            put(&c[1], range_axis(from, to, step));
        }
    }
    axes
}

/// A whole number when the value is one, so integer parameters stay so.
fn num(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// A range's axis. One that names no step gets about
/// [`VALUES_PER_RANGE`] values ending on the bound asked ("slow 60 to 180"
/// runs 60, 84, …, 180, not 60 … 160 by a rounder 25): a whole-number range
/// takes a whole step that divides it, or else the values themselves,
/// evenly spaced and rounded, so the bound is always run. A named step is
/// kept as asked (the answer then lists the values run, [`range_values`]).
fn range_axis(from: f64, to: f64, step: Option<f64>) -> Value {
    let ranged = |step: f64| json!({"from": num(from), "to": num(to), "step": num(step)});
    if let Some(step) = step {
        return ranged(step);
    }
    let span = to - from;
    let whole = from.fract() == 0.0 && to.fract() == 0.0;
    if !whole || span <= 0.0 {
        return ranged(nice_step(span / (VALUES_PER_RANGE - 1.0)));
    }
    let divides = [6.0, 5.0, 7.0, 4.0, 8.0, 9.0, 10.0, 11.0]
        .iter()
        .map(|n| span / (n - 1.0))
        .find(|step| *step >= 1.0 && step.fract() == 0.0);
    if let Some(step) = divides {
        return ranged(step);
    }
    let mut values: Vec<Value> = Vec::new();
    for i in 0..VALUES_PER_RANGE as usize {
        let v = num((from + span * i as f64 / (VALUES_PER_RANGE - 1.0)).round());
        if !values.contains(&v) {
            values.push(v);
        }
    }
    Value::Array(values)
}

/// The values `from`, `from + step`, … up to `to` that a range runs, when
/// the step does not land on `to` (then the answer says them, docs §18.8);
/// `None` when it does or the range is not a plain numeric one.
fn range_values(range: &Map<String, Value>) -> Option<Vec<f64>> {
    let get = |k: &str| range.get(k).and_then(Value::as_f64);
    let (from, to, step) = (get("from")?, get("to")?, get("step")?);
    if ![from, to, step].iter().all(|x| x.is_finite()) || step <= 0.0 || to < from {
        return None;
    }
    let steps = (to - from) / step;
    // The sweep's own expansion forgives the same rounding (spec.rs).
    if (steps - steps.round()).abs() < 1e-9 || steps > 1000.0 {
        return None;
    }
    let n = steps.floor() as usize;
    Some((0..=n).map(|i| from + step * i as f64).collect())
}

/// 1, 2 or 5 times a power of ten, at least `raw` (never below 1 for the
/// whole-number windows; `k` ranges name their step).
fn nice_step(raw: f64) -> f64 {
    if !raw.is_finite() || raw <= 1.0 {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * power)
}

/// The parameters a strategy takes (docs §7.3).
fn parameters(strategy: &str) -> &'static [&'static str] {
    match strategy {
        "sma_crossover" | "ema_crossover" => &["fast", "slow"],
        "rsi_mean_reversion" => &["period", "lower", "upper"],
        "bollinger_reversion" => &["window", "k"],
        "breakout" => &["window"],
        "momentum" => &["lookback"],
        _ => &[],
    }
}

/// The usual grid of a strategy when the request names no range.
fn default_axes(strategy: &str) -> Map<String, Value> {
    let grid: &[(&str, Value)] = &match strategy {
        "rsi_mean_reversion" => vec![
            ("period", json!([7, 14, 21])),
            ("lower", json!([20, 25, 30])),
        ],
        "bollinger_reversion" => vec![
            ("window", json!([10, 20, 40])),
            ("k", json!([1.5, 2.0, 2.5])),
        ],
        "breakout" => vec![("window", json!([10, 20, 55, 100]))],
        "momentum" => vec![("lookback", json!([21, 63, 126, 252]))],
        "sma_crossover" | "ema_crossover" => vec![
            ("fast", json!([5, 10, 20, 30])),
            ("slow", json!([50, 100, 150, 200])),
        ],
        _ => Vec::new(),
    };
    grid.iter()
        .map(|(k, v)| (format!("strategy.params.{k}"), v.clone()))
        .collect()
}

/// In-sample the first [`IN_SAMPLE_SHARE`] of the period, out-of-sample the
/// rest; `None` when the dates do not read or the period is too short.
fn split(start: &str, end: &str) -> Option<Value> {
    let (s, e) = (
        NaiveDate::parse_from_str(start, "%Y-%m-%d").ok()?,
        NaiveDate::parse_from_str(end, "%Y-%m-%d").ok()?,
    );
    let days = (e - s).num_days();
    if days < 365 {
        return None;
    }
    let cut = s.checked_add_signed(chrono::TimeDelta::try_days(
        (days as f64 * IN_SAMPLE_SHARE).round() as i64,
    )?)?;
    let next = cut.succ_opt()?;
    let f = |d: NaiveDate| d.format("%Y-%m-%d").to_string();
    Some(json!({"in_sample": [f(s), f(cut)], "out_of_sample": [f(next), f(e)]}))
}

/// Walk-forward windows from the request ("24-month training, 6-month
/// test"), else [`TRAIN_MONTHS`] and [`TEST_MONTHS`].
fn walk_forward(text: &str) -> Value {
    let months = |re: &Option<Regex>, default: u32| {
        re.as_ref()
            .and_then(|re| re.captures(text))
            .and_then(|c| {
                let n: u32 = c.get(1).or(c.get(3))?.as_str().parse().ok()?;
                let unit = c.get(2).or(c.get(4))?.as_str().to_ascii_lowercase();
                Some(if unit.starts_with("year") { n * 12 } else { n })
            })
            .filter(|m| *m > 0)
            .unwrap_or(default)
    };
    json!({"walk_forward": {
        "train_months": months(&TRAIN, TRAIN_MONTHS),
        "test_months": months(&TEST, TEST_MONTHS),
    }})
}

/// The answer to a finished sweep: the ranking, the deflated Sharpe, the
/// heatmap and what was assumed.
pub(super) fn answer(request: &str, v: &Value) -> Option<String> {
    let o: SweepOutput = typed(v)?;
    let spec = spec(request);
    let mut out = format!("## Parameter sweep: {}\n\n", o.summary);
    let window = if o.ranked_out_of_sample {
        "out-of-sample"
    } else {
        "in-sample"
    };
    out.push_str(&format!(
        "| rank | parameters | symbol | {} {window} | {} in-sample |\n|---|---|---|---|---|\n",
        o.rank_by, o.rank_by
    ));
    for (i, t) in o.top.iter().take(SHOWN).enumerate() {
        let f = |x: Option<f64>| x.map_or("n/a".into(), |x| format!("{x:.4}"));
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            i + 1,
            t.params,
            t.symbol,
            f(t.score),
            f(t.in_sample)
        ));
    }
    if let Some(d) = &o.deflated_sharpe {
        // Cells that never traded in the ranked window have no Sharpe there
        // and are no trial (docs §18.4).
        let tried = if d.trials < o.cells {
            format!(
                "{} of the {} cells (the others never traded in the ranked window)",
                d.trials, o.cells
            )
        } else {
            format!("{} cells tried", d.trials)
        };
        out.push_str(&format!(
            "\nDeflated Sharpe of the best cell for the {tried}: {} (the best of that many tries reaches a daily Sharpe of {} by luck alone; its own is {}).\n",
            d.dsr.map_or("n/a".into(), |x| format!("{x:.4}")),
            d.expected_max_sharpe.map_or("n/a".into(), |x| format!("{x:.4}")),
            d.sharpe_per_period.map_or("n/a".into(), |x| format!("{x:.4}")),
        ));
    }
    if !o.heatmap.trim().is_empty() {
        out.push_str(&format!("\n```\n{}\n```\n", o.heatmap.trim_end()));
    }
    if let Some(spec) = &spec {
        out.push_str(&format!("\nAssumptions: {}.", assumptions(spec)));
    }
    if let Some(r) = &o.results {
        out.push_str(&format!(
            "\n\nEvery cell is in `{r}`{}.",
            if o.heatmap_files.is_empty() {
                String::new()
            } else {
                format!(", the heatmap in `{}`", o.heatmap_files.join("`, `"))
            }
        ));
    }
    out.push_str("\n\nFigures come from the sweep tool's backtests on the data named; they are analysis, not advice.\n");
    Some(out)
}

/// The grid, the windows and the universe the planner chose.
fn assumptions(spec: &Map<String, Value>) -> String {
    let mut parts = Vec::new();
    if let Some(axes) = spec.get("axes").and_then(Value::as_object) {
        let grid: Vec<String> = axes
            .iter()
            .map(|(k, v)| {
                let name = k.rsplit('.').next().unwrap_or(k);
                match v {
                    Value::Object(r) => {
                        let mut said = format!(
                            "{name} {} to {} step {}",
                            r.get("from").unwrap_or(&Value::Null),
                            r.get("to").unwrap_or(&Value::Null),
                            r.get("step").unwrap_or(&Value::Null)
                        );
                        // The step stops short of the bound asked: say
                        // what ran rather than let "to 180" stand.
                        if let Some(values) = range_values(r) {
                            let shown: Vec<String> =
                                values.iter().map(|v| num(*v).to_string()).collect();
                            said.push_str(&format!(
                                " (runs {}: the step does not land on {})",
                                shown.join(", "),
                                r.get("to").unwrap_or(&Value::Null)
                            ));
                        }
                        said
                    }
                    // "5, 10, 20": a bare JSON list reads as one number
                    // with thousands separators.
                    Value::Array(values) => format!(
                        "{name} {}",
                        values
                            .iter()
                            .map(Value::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    other => format!("{name} {other}"),
                }
            })
            .collect();
        parts.push(format!("grid {}", grid.join(" × ")));
    }
    if let Some(c) = spec.get("constraint").and_then(Value::as_str) {
        parts.push(format!("only cells with {c}"));
    }
    match spec.get("split") {
        Some(s) if s.get("walk_forward").is_some() => parts.push(format!(
            "walk-forward: each window trains on {} months and tests on the next {}, then moves on by the test length; cells ranked by their mean over the test windows, so the best is picked among every cell tried (the deflated Sharpe discounts that)",
            s["walk_forward"]["train_months"],
            s["walk_forward"]["test_months"],
        )),
        // Ranking on the later window is itself a choice among the cells:
        // the deflated Sharpe is what discounts it, so the answer says so.
        Some(s) => parts.push(format!(
            "in-sample {} to {}, out-of-sample {} to {}; cells ranked by the out-of-sample result, so the best is picked among every cell tried (the deflated Sharpe discounts that), and one strong in both windows is steadier than one strong in one",
            s["in_sample"][0].as_str().unwrap_or("?"),
            s["in_sample"][1].as_str().unwrap_or("?"),
            s["out_of_sample"][0].as_str().unwrap_or("?"),
            s["out_of_sample"][1].as_str().unwrap_or("?"),
        )),
        None => parts
            .push("no out-of-sample window (the period is under a year): ranked in-sample".into()),
    }
    if let Some(u) = spec
        .get("universe")
        .and_then(Value::as_array)
        .filter(|u| u.len() > 1)
    {
        let names: Vec<&str> = u.iter().filter_map(Value::as_str).collect();
        parts.push(format!("each of {} run alone", names.join(", ")));
    }
    parts.push("costs, lots, benchmark and cash as a single backtest takes them (the request's, else config.toml's [backtest], else the market's)".into());
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(text: &str) -> Value {
        let c = read(text).unwrap();
        assert_eq!(c.name, "sweep");
        c.args["spec"].clone()
    }

    #[test]
    fn a_sweep_request_becomes_one_sweep_with_its_ranges_and_a_split() {
        let s = planned(
            "sweep the SMA crossover fast 5 to 30 and slow 50 to 200 step 25 on AAPL, MSFT from 2005 to 2015",
        );
        assert_eq!(s["base"]["codes"], json!(["AAPL"]));
        assert_eq!(s["universe"], json!(["AAPL", "MSFT"]));
        assert_eq!(s["base"]["strategy"]["name"], "sma_crossover");
        assert_eq!(
            s["axes"]["strategy.params.fast"],
            json!({"from": 5, "to": 30, "step": 5})
        );
        assert_eq!(
            s["axes"]["strategy.params.slow"],
            json!({"from": 50, "to": 200, "step": 25})
        );
        assert_eq!(s["constraint"], "fast < slow");
        assert_eq!(s["base"]["start_date"], "2005-01-01");
        assert_eq!(s["base"]["end_date"], "2015-12-31");
        // 70 % of the 4016 days from 2005-01-01 to 2015-12-31 is 2811 days.
        assert_eq!(
            s["split"],
            json!({"in_sample": ["2005-01-01", "2012-09-12"], "out_of_sample": ["2012-09-13", "2015-12-31"]})
        );
        assert_eq!(s["rank_by"], "sharpe");
    }

    #[test]
    fn lists_defaults_and_other_strategies() {
        let s = planned(
            "grid search an RSI mean reversion on KO with period in [7, 14] and lower 20 to 30 by 5",
        );
        assert_eq!(s["axes"]["strategy.params.period"], json!([7.0, 14.0]));
        assert_eq!(
            s["axes"]["strategy.params.lower"],
            json!({"from": 20, "to": 30, "step": 5})
        );
        assert!(s.get("constraint").is_none());
        assert_eq!(s["universe"], json!(["KO"]));
        // No range named: the strategy's usual grid, never one backtest.
        let s = planned("sweep a momentum strategy on IBM");
        assert_eq!(
            s["axes"]["strategy.params.lookback"],
            json!([21, 63, 126, 252])
        );
        // A parameter the strategy does not take is not an axis.
        let s = planned("sweep momentum on IBM with fast 5 to 10");
        assert!(s["axes"].get("strategy.params.fast").is_none(), "{s}");
        assert!(read("sweep the floor").is_none());
    }

    #[test]
    fn walk_forward_windows_are_read_or_defaulted() {
        let s = planned(
            "walk-forward sweep of the SMA crossover on AAPL from 2005 to 2015 with 24-month training and 6-month test windows",
        );
        assert_eq!(
            s["split"],
            json!({"walk_forward": {"train_months": 24, "test_months": 6}})
        );
        let s = planned("walk forward the EMA crossover on MSFT, training 2 years, testing 1 year");
        assert_eq!(
            s["split"],
            json!({"walk_forward": {"train_months": 24, "test_months": 12}})
        );
        let s = planned("walk-forward sweep of momentum on IBM 2003 to 2016");
        assert_eq!(
            s["split"],
            json!({"walk_forward": {"train_months": 36, "test_months": 12}})
        );
    }

    /// A range without a step ends on the bound asked; one whose step
    /// stops short says the values it runs.
    #[test]
    fn a_range_ends_on_its_bound_or_says_what_ran() {
        let s =
            planned("sweep the SMA crossover fast 10 to 30 and slow 60 to 180 on SPY 2005-2015");
        assert_eq!(
            s["axes"]["strategy.params.slow"],
            json!({"from": 60, "to": 180, "step": 24})
        );
        assert_eq!(
            s["axes"]["strategy.params.fast"],
            json!({"from": 10, "to": 30, "step": 4})
        );
        let s = planned("sweep the SMA crossover slow 40 to 160 on SPY 2005-2015");
        assert_eq!(
            s["axes"]["strategy.params.slow"],
            json!({"from": 40, "to": 160, "step": 24})
        );
        // 7 to 20 (13 apart) has no whole step: the values, 20 among them.
        let s = planned("sweep an RSI mean reversion on KO with period 7 to 20");
        assert_eq!(
            s["axes"]["strategy.params.period"],
            json!([7, 10, 12, 15, 17, 20])
        );
        let s = planned("sweep the SMA crossover slow 60 to 180 step 25 on SPY 2005-2015");
        let said = assumptions(s.as_object().unwrap());
        assert!(
            said.contains(
                "slow 60 to 180 step 25 (runs 60, 85, 110, 135, 160: the step does not land on 180)"
            ),
            "{said}"
        );
        let s = planned("sweep the SMA crossover slow 50 to 200 step 25 on SPY 2005-2015");
        assert!(!assumptions(s.as_object().unwrap()).contains("runs"));
    }

    #[test]
    fn steps_are_round_and_short_periods_have_no_split() {
        assert_eq!(nice_step(5.0), 5.0);
        assert_eq!(nice_step(30.0), 50.0);
        assert_eq!(nice_step(21.0), 25.0);
        assert_eq!(nice_step(0.3), 1.0);
        assert!(split("2010-01-01", "2010-06-30").is_none());
    }
}
