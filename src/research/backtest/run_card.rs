//! The run card (docs §7.6): `run_card.json` (schema 0.1) and `run_card.md`
//! in the run dir — what was run, on which data (with the warm-up history
//! before the start, docs §7.4.1), with which result, and the hashes to
//! reproduce it.
//!
//! `config_hash` is the SHA-256 of the `config.json` file's bytes (as the
//! spec says). `strategy_hash` is the SHA-256 of `code/signal_engine.py`'s
//! bytes for the Python path, and of the canonical JSON of the resolved
//! strategy (name and every parameter, defaults included; or the rule
//! texts) for built-ins and rules, so two configs that differ only in
//! spelling hash alike.

use std::path::{Path, PathBuf};

use chrono::Utc;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::artifacts::write_file;
use super::{BacktestError, Outcome, metrics};
use crate::research::data::{PriceSeries, Source};
use crate::research::warmup::WarmupRecord;

pub(crate) const SCHEMA: &str = "0.1";

pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Builds the card. `artifacts` are the files written so far.
pub fn build(
    run_dir: &Path,
    o: &Outcome,
    series: &[PriceSeries],
    effective_sources: &[Source],
    config_bytes: &[u8],
    strategy_bytes: &[u8],
    artifacts: &[(String, PathBuf)],
) -> Value {
    let c = &o.config;
    let files: Vec<Value> = artifacts
        .iter()
        .map(|(name, p)| {
            let rel = p.strip_prefix(run_dir).unwrap_or(p).display().to_string();
            let bytes = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
            json!({"name": name, "path": rel, "bytes": bytes})
        })
        .collect();
    let data: Vec<Value> = series
        .iter()
        .map(|s| {
            let p = &s.provenance;
            json!({"symbol": s.symbol, "source": p.source, "requested_source": p.requested_source,
                   "location": p.location, "rows": p.rows,
                   "first_date": p.first_date, "last_date": p.last_date, "from_cache": p.from_cache,
                   "adjustments": p.adjustments, "notes": p.notes, "attempts": p.attempts})
        })
        .collect();
    json!({
        "schema": SCHEMA,
        "generated_at": Utc::now().to_rfc3339(),
        "run_dir": run_dir.display().to_string(),
        "backtest": {
            "codes": c.codes, "start_date": c.start_date.to_string(), "end_date": c.end_date.to_string(),
            "interval": c.interval.as_str(), "engine": "daily", "initial_cash": c.initial_cash,
            "source": c.source.as_str(), "strategy": c.strategy.describe(),
            "position_adjustment": c.position_adjustment.as_str(), "rebalance_tolerance": c.rebalance_tolerance,
            "benchmark": o.benchmark_label, "benchmark_note": o.benchmark_note,
            "risk_free": o.risk_free.label, "risk_free_rate": metrics::num(o.risk_free.mean_annual),
            "risk_free_note": o.risk_free.note, "bars_per_year": o.bars_per_year,
            "bars": o.panel.n(), "first_bar": o.panel.dates.first().map(ToString::to_string),
            "last_bar": o.panel.dates.last().map(ToString::to_string),
            "symbol_rules": o.panel.codes.iter().zip(&o.rules).map(|(code, r)| json!({"code": code, "rules": r})).collect::<Vec<_>>(),
            "warmup": o.warmup,
            "optimizer": optimizer_line(o),
        },
        "reproducibility": {
            "config_hash": sha256_hex(config_bytes),
            "strategy_hash": sha256_hex(strategy_bytes),
            "engine": format!("vibedesk {}", env!("CARGO_PKG_VERSION")),
        },
        "data_sources": {"effective_sources": effective_sources, "series": data},
        "assumptions": assumptions(o, series),
        "metrics": o.scalars,
        "warnings": o.warnings,
        "artifacts": files,
        "validation": o.validation,
    })
}

/// What the run assumed (docs §7.4): the first code's costs and lots (with
/// `rules_differ` when another code's differ; `backtest.symbol_rules` has
/// each), the cash, the price adjustment, the annualisation and the
/// benchmark as used. The `backtest` tool hands this record on as its
/// output's `assumptions`, so the field names are that type's.
fn assumptions(o: &Outcome, series: &[PriceSeries]) -> Value {
    let Some(first) = o.rules.first().copied() else {
        return Value::Null;
    };
    let rules_differ = o.rules.iter().any(|r| *r != first);
    let mut adjustments: Vec<&str> = Vec::new();
    for s in series {
        for a in &s.provenance.adjustments {
            if !adjustments.contains(&a.as_str()) {
                adjustments.push(a);
            }
        }
    }
    let price_adjustment = if adjustments.is_empty() {
        "none: prices as the source served them".to_string()
    } else {
        adjustments.join("; ")
    };
    json!({
        "commission_rate": first.fee_rate,
        "min_commission": first.min_fee,
        "slippage": first.slippage,
        "sell_tax": first.sell_tax,
        "transfer_fee": first.transfer_fee,
        "lot_size": first.lot,
        "allow_short": first.allow_short,
        "rules_differ": rules_differ,
        "initial_cash": o.config.initial_cash,
        "price_adjustment": price_adjustment,
        "bars_per_year": o.bars_per_year,
        "benchmark": o.benchmark_label,
        "optimizer": optimizer_line(o),
    })
}

/// The optimizer that set the weights and how often it ran (docs §7.4.2).
fn optimizer_line(o: &Outcome) -> Option<String> {
    let spec = o.config.optimizer.as_ref()?;
    let count = |k: &str| o.scalars.get(k).and_then(Value::as_u64).unwrap_or(0);
    let mut line = format!(
        "{}: {} rebalances",
        spec.describe(),
        count("optimizer_rebalances")
    );
    match count("optimizer_fallbacks") {
        0 => {}
        n => line.push_str(&format!(", {n} with equal weights (see the warnings)")),
    }
    Some(line)
}

fn fmt_metric(v: Option<&Value>, pct: bool) -> String {
    match v.and_then(Value::as_f64) {
        Some(x) if pct => format!("{:.2}%", x * 100.0),
        Some(x) => format!("{x:.4}"),
        None => "—".into(),
    }
}

/// " (why)" for a note, nothing without one.
fn note(v: &Value) -> String {
    v.as_str().map(|n| format!(" ({n})")).unwrap_or_default()
}

/// The Markdown card.
pub(crate) fn markdown(card: &Value) -> String {
    let b = &card["backtest"];
    let m = &card["metrics"];
    let mut s = String::from("# Backtest run card\n\n");
    s.push_str(&format!(
        "- codes: {}\n- period: {} to {} ({} bars, {} to {})\n- strategy: `{}`\n- source: {}; initial cash {}; {} mode\n- benchmark: {}{}\n- risk-free rate: {}{}\n\n",
        b["codes"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")).unwrap_or_default(),
        b["start_date"].as_str().unwrap_or(""),
        b["end_date"].as_str().unwrap_or(""),
        b["bars"],
        b["first_bar"].as_str().unwrap_or("-"),
        b["last_bar"].as_str().unwrap_or("-"),
        b["strategy"].as_str().unwrap_or(""),
        b["source"].as_str().unwrap_or(""),
        b["initial_cash"],
        b["position_adjustment"].as_str().unwrap_or(""),
        b["benchmark"].as_str().unwrap_or(""),
        note(&b["benchmark_note"]),
        match (b["risk_free"].as_str(), b["risk_free_rate"].as_f64()) {
            (Some("treasury_3m"), Some(r)) => format!(
                "3-month US Treasury yield (mean {:.2} % a year)",
                r * 100.0
            ),
            (Some("zero"), _) => "zero".to_string(),
            (Some("given"), Some(r)) => format!("the rate given, {:.2} % a year", r * 100.0),
            (other, _) => other.unwrap_or("").to_string(),
        },
        note(&b["risk_free_note"]),
    ));
    if let Some(opt) = b["optimizer"].as_str() {
        s.push_str(&format!("Weights: the {opt}.\n\n"));
    }
    s.push_str(&assumptions_markdown(&card["assumptions"]));
    if let Ok(w) = serde_json::from_value::<WarmupRecord>(b["warmup"].clone()) {
        s.push_str(&format!(
            "Signals were computed on history before the start ({}).\n\n",
            w.describe()
        ));
    }
    s.push_str("## Key metrics\n\n| metric | value |\n|---|---|\n");
    for (k, pct) in [
        ("total_return", true),
        ("annual_return", true),
        ("max_drawdown", true),
        ("sharpe", false),
        ("sortino", false),
        ("calmar", false),
        ("win_rate", true),
        ("benchmark_return", true),
        ("excess_return", true),
    ] {
        s.push_str(&format!("| {k} | {} |\n", fmt_metric(m.get(k), pct)));
    }
    s.push_str(&format!(
        "| trade_count | {} |\n| final_value | {} |\n",
        m["trade_count"],
        fmt_metric(m.get("final_value"), false)
    ));
    s.push_str(&format!(
        "\n## Reproducibility\n\n- config_hash: `{}`\n- strategy_hash: `{}`\n- engine: {}\n",
        card["reproducibility"]["config_hash"]
            .as_str()
            .unwrap_or(""),
        card["reproducibility"]["strategy_hash"]
            .as_str()
            .unwrap_or(""),
        card["reproducibility"]["engine"].as_str().unwrap_or("")
    ));
    s.push_str("\n## Data\n\n");
    for d in card["data_sources"]["series"]
        .as_array()
        .into_iter()
        .flatten()
    {
        s.push_str(&format!(
            "- {}: {} rows from {} ({}){}\n",
            d["symbol"].as_str().unwrap_or(""),
            d["rows"],
            d["source"].as_str().unwrap_or(""),
            d["location"].as_str().unwrap_or(""),
            if d["from_cache"] == true {
                ", cached"
            } else {
                ""
            }
        ));
    }
    if let Some(w) = card["warnings"].as_array().filter(|w| !w.is_empty()) {
        s.push_str("\n## Warnings\n\n");
        for x in w {
            s.push_str(&format!("- {}\n", x.as_str().unwrap_or("")));
        }
    }
    s.push_str("\n## Artifacts\n\n");
    for a in card["artifacts"].as_array().into_iter().flatten() {
        s.push_str(&format!(
            "- `{}` ({} bytes)\n",
            a["path"].as_str().unwrap_or(""),
            a["bytes"]
        ));
    }
    s
}

/// The run card's assumptions as a list (docs §7.4).
fn assumptions_markdown(a: &Value) -> String {
    if !a.is_object() {
        return String::new();
    }
    let rate = |k: &str| {
        a[k].as_f64()
            .map_or("—".to_string(), |x| format!("{:.4} % ({x})", x * 100.0))
    };
    let lot = match a["lot_size"].as_f64() {
        Some(l) if l > 0.0 => format!("multiples of {l} units"),
        Some(_) => "fractional quantities".to_string(),
        None => "—".to_string(),
    };
    let mut s = String::from("## Assumptions\n\n");
    s.push_str(&format!(
        "- commission: {} of notional per fill, at least {}\n- slippage: {} of the reference price (the open; the last close at the end), against the trade\n- sell tax: {}; transfer fee: {}\n- lots: {lot}; short selling {}\n- initial cash: {}\n- prices: {}\n- annualisation: {} bars a year\n- benchmark: {}\n",
        rate("commission_rate"),
        a["min_commission"],
        rate("slippage"),
        rate("sell_tax"),
        rate("transfer_fee"),
        if a["allow_short"] == true { "allowed" } else { "not allowed" },
        a["initial_cash"],
        a["price_adjustment"].as_str().unwrap_or("—"),
        a["bars_per_year"],
        a["benchmark"].as_str().unwrap_or("—"),
    ));
    if a["rules_differ"] == true {
        s.push_str("- costs and lots differ by symbol: the first code's are shown; `run_card.json` lists each under `backtest.symbol_rules`\n");
    }
    s.push('\n');
    s
}

/// Writes `run_card.json` and `run_card.md`.
pub fn write(run_dir: &Path, card: &Value) -> Result<Vec<(String, PathBuf)>, BacktestError> {
    let json_path = run_dir.join("run_card.json");
    let md_path = run_dir.join("run_card.md");
    let mut text = serde_json::to_vec_pretty(card).unwrap_or_default();
    text.push(b'\n');
    write_file(&json_path, &text)?;
    write_file(&md_path, markdown(card).as_bytes())?;
    Ok(vec![
        ("run_card_json".into(), json_path),
        ("run_card_md".into(), md_path),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_a_known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
