//! The offline planner on factor screens (docs §17.11): "screen the 101
//! alphas on the offline universe 2005–2017" becomes a `factor_screen`
//! call of the bundled library over that window, and variations name the
//! symbols, the horizons, the quantiles and how many to list. The answer
//! is the top factors, the counts, the deflated Sharpe of the best
//! long-short and the record's path, with what was assumed.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{PlannedCall, date_range, embedded, names, symbols, typed};
use crate::model::factor::{FactorScreenArgs, FactorScreenOutput, ScreenRow};
use crate::model::names as tool;

/// Words in capitals these requests use that are not tickers.
const NOT_TICKERS: [&str; 10] = [
    "IC", "ICIR", "NW", "BH", "DSR", "PSR", "OHLCV", "VWAP", "ADV", "CPCV",
];

static HORIZONS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\bhorizons?\s*(?:of\s*)?((?:\d{1,3})(?:\s*(?:,|and|&)\s*\d{1,3})*)").ok()
});
static NUMBER: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"\d{1,3}").ok());
static TOP: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"(?i)\btop\s+(\d{1,2})\b").ok());

fn is_screen(lower: &str) -> bool {
    names(lower, "screen")
        && (lower.contains("alpha")
            || lower.contains("factor")
            || lower.contains("formulaic")
            || lower.contains("101"))
}

/// `factor_screen`: the bundled library over the request's universe and
/// window.
pub(super) fn read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    if !is_screen(&lower) {
        return None;
    }
    let (start, end) = date_range(text);
    let named: Vec<String> = symbols(text)
        .into_iter()
        .filter(|s| embedded(s) || !NOT_TICKERS.contains(&s.as_str()))
        .collect();
    let horizons = HORIZONS
        .as_ref()
        .and_then(|re| re.captures(text))
        .and_then(|c| c.get(1))
        .map(|m| {
            NUMBER
                .as_ref()
                .map(|n| {
                    n.find_iter(m.as_str())
                        .filter_map(|x| x.as_str().parse::<i64>().ok())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .filter(|v| !v.is_empty());
    let top = TOP
        .as_ref()
        .and_then(|re| re.captures(text))
        .and_then(|c| c.get(1)?.as_str().parse::<i64>().ok());
    let quantiles = [
        ("tercile", 3),
        ("quartile", 4),
        ("quintile", 5),
        ("decile", 10),
    ]
    .iter()
    .find(|(w, _)| lower.contains(w))
    .map(|(_, q)| *q);
    Some(PlannedCall::typed(
        tool::FACTOR_SCREEN,
        FactorScreenArgs {
            library: Some("alpha101".into()),
            symbols: (!named.is_empty()).then_some(named),
            start,
            end,
            horizons,
            quantiles,
            top,
            ..FactorScreenArgs::default()
        },
    ))
}

fn num(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
}

fn p(x: Option<f64>) -> String {
    match x {
        // Below what four decimals show (an exponent is not a figure the
        // grounding check reads).
        Some(v) if v < 1e-4 => "< 1e-4".to_string(),
        other => num(other, 4),
    }
}

fn table_row(r: &ScreenRow) -> String {
    let name = match r.paper_number {
        Some(n) => format!("{} (#{n})", r.name),
        None => r.name.clone(),
    };
    format!(
        "| {} | {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
        r.rank,
        num(r.rank_ic_mean, 4),
        num(r.rank_icir, 3),
        num(r.t_nw, 2),
        p(r.p_value),
        p(r.p_holm),
        p(r.p_bh),
        num(r.spread, 5),
        num(r.turnover, 2),
        num(r.coverage, 3),
    )
}

/// The screen's answer: top factors first, then the counts and the file.
pub(super) fn answer(_request: &str, v: &Value) -> Option<String> {
    let o: FactorScreenOutput = typed(v)?;
    let mut out = format!(
        "## Factor screen: {} on {} stocks, {} to {}\n\nRanked by |rank ICIR| at {} trading day(s):\n\n| # | factor | rank IC mean | ICIR | t (Newey–West) | p | p Holm | p BH | top − bottom (fraction) | turnover | coverage |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
        o.library,
        o.symbols,
        o.data.start.as_deref().unwrap_or("-"),
        o.data.end.as_deref().unwrap_or("-"),
        o.rank_horizon,
    );
    for r in &o.top {
        out.push_str(&table_row(r));
    }
    out.push_str(&format!(
        "\n{} tried, {} scored, {} failed; horizons {:?} trading days, {} quantiles, {} dates.\n",
        o.tried, o.scored, o.failed, o.horizons, o.quantiles, o.dates
    ));
    for f in o.failures.iter().take(5) {
        out.push_str(&format!("- {} failed: {}\n", f.name, f.error));
    }
    if let Some(d) = &o.deflated {
        out.push_str(&format!(
            "\nBest long-short: {} with an annualised Sharpe of {} over {} dates; the best of {} tried reaches {} by luck, so its deflated Sharpe is {} (PSR {}).\n",
            d.best,
            num(d.sharpe_annualized, 2),
            d.observations,
            d.trials,
            num(d.expected_max_sharpe_annualized, 2),
            num(d.dsr, 3),
            num(d.psr, 3),
        ));
    }
    out.push_str(&format!(
        "\nThe whole screen (every factor, its IC series, quantile returns, the correlation matrix) is in `{}`; the workstation's factor view opens it.\n\nAssumed: {}; {}.\n",
        o.screen_file,
        o.warmup,
        o.assumptions.join("; ")
    ));
    Some(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_phrases_read_library_window_symbols_and_horizons() {
        let c = read("screen the 101 alphas on the offline universe 2005–2017").unwrap();
        assert_eq!(c.name, "factor_screen");
        assert_eq!(
            c.args,
            json!({"library": "alpha101", "start": "2005-01-01", "end": "2017-12-31"})
        );
        let c = read("screen alpha101 over 2010-2015 with horizons 1 and 5").unwrap();
        assert_eq!(c.args["horizons"], json!([1, 5]));
        assert_eq!(c.args["start"], "2010-01-01");
        assert_eq!(c.args["end"], "2015-12-31");
        let c = read("screen the alphas on AAPL, MSFT, IBM, JPM and XOM in 2012, top 5").unwrap();
        assert_eq!(
            c.args["symbols"],
            json!(["AAPL", "MSFT", "IBM", "JPM", "XOM"])
        );
        assert_eq!(c.args["start"], "2012-01-01");
        assert_eq!(c.args["end"], "2012-12-31");
        assert_eq!(c.args["top"], 5);
        assert!(read("screen time for AAPL").is_none());
        assert!(read("IC of 12-1 momentum on the offline universe").is_none());
    }
}
