//! The offline planner on time series (docs §16.7): plain requests for a
//! cointegration, unit-root, stationarity, half-life, Hurst, autocorrelation
//! or normality test become `stat_test` calls, and a volatility forecast a
//! `volatility_model` call; the answers state every input (data, field,
//! regression, lag choice, model, units) beside the figures. A team
//! member's sentences ("Compute the Engle–Granger cointegration test of KO
//! on PEP from 2009-01-01 to 2012-12-31.") become the same calls, and their
//! key figures are labelled rows for the team's reader (docs §14.7); a
//! pairs backtest that names a cointegration hedge gets its parameters here.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};

use super::{PlannedCall, date_range, embedded, names, symbols, typed};
use crate::model::names as tool;
use crate::model::stats::{
    StatTestArgs, StatTestOutput, VolatilityModelArgs, VolatilityModelOutput,
};

/// Words in capitals a time-series request uses that are not tickers.
const NOT_TICKERS: [&str; 15] = [
    "GARCH", "EWMA", "ARCH", "ADF", "KPSS", "OU", "JB", "AIC", "BIC", "LB", "EG", "VOL", "H", "Z",
    "GJR",
];

static HORIZON: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:next\s+)?(\d{1,3})\s*-?\s*(?:trading\s+)?(?:days?|d)\b").ok()
});
static FORMATION: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\b(\d{2,4})\s*-?\s*(?:day|bar)s?\s+formation").ok());
static Z_WINDOW: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\b(\d{1,4})\s*-?\s*(?:day|bar)s?\s+z-?score").ok());
/// Student-t errors: "t errors", "Student-t", "t-distributed innovations",
/// "fat-tailed errors", "GARCH-t".
static T_ERRORS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:students?'?s?[\s-]*t\b|t[\s-]*(?:distributed|distribution|dist)?[\s-]*(?:errors?|innovations?|shocks?|residuals?)\b|t[\s-]+dist(?:ribution)?\b|fat[\s-]*tail(?:ed|s)?\s+(?:errors?|innovations?|shocks?)\b|garch[\s-]+t\b)",
    )
    .ok()
});
static LAMBDA: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)(?:lambda|λ)\s*(?:of|=|:)?\s*(0\.\d+)").ok());

fn tickers(text: &str) -> Vec<String> {
    symbols(text)
        .into_iter()
        .filter(|s| embedded(s) || !NOT_TICKERS.contains(&s.as_str()))
        .collect()
}

/// The test a request names, if any.
fn test_named(lower: &str) -> Option<&'static str> {
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    if names(lower, "johansen") {
        Some("johansen")
    } else if has(&[
        "cointegrat",
        "engle-granger",
        "engle granger",
        "engle–granger",
    ]) {
        Some("engle_granger")
    } else if names(lower, "kpss") {
        Some("kpss")
    } else if names(lower, "adf") || has(&["dickey", "unit root", "unit-root", "stationar"]) {
        Some("adf")
    } else if has(&["half-life", "half life", "halflife"]) {
        Some("half_life")
    } else if names(lower, "hurst") {
        Some("hurst")
    } else if has(&["ljung", "autocorrelat", "serial correlation"]) {
        Some("ljung_box")
    } else if has(&[
        "jarque",
        "normality",
        "normally distributed",
        "fat tails",
        "returns normal",
        "normal distribution",
        "gaussian",
    ]) {
        Some("jarque_bera")
    } else {
        None
    }
}

/// The volatility model a request names ("GARCH vol forecast",
/// "EWMA volatility", "forecast the volatility").
fn model_named(lower: &str) -> Option<&'static str> {
    if lower.contains("gjr") || lower.contains("glosten") {
        Some("gjr_garch")
    } else if names(lower, "garch") {
        Some("garch")
    } else if names(lower, "ewma") || lower.contains("riskmetrics") {
        Some("ewma")
    } else if (lower.contains("vol forecast") || lower.contains("volatility forecast"))
        || (names(lower, "forecast") && (names(lower, "vol") || lower.contains("volatility")))
    {
        Some("garch")
    } else {
        None
    }
}

fn horizon(text: &str) -> Option<i64> {
    HORIZON
        .as_ref()?
        .captures(text)?
        .get(1)?
        .as_str()
        .parse()
        .ok()
}

fn number(re: &LazyLock<Option<Regex>>, text: &str) -> Option<f64> {
    re.as_ref()?.captures(text)?.get(1)?.as_str().parse().ok()
}

/// The regression a request names ("with a trend", "no constant").
fn regression(lower: &str) -> Option<String> {
    if lower.contains("trend") {
        Some("ct".into())
    } else if lower.contains("no constant") || lower.contains("without a constant") {
        Some("n".into())
    } else {
        None
    }
}

/// A test call on `syms` (two for engle_granger, all of them — 2 to 12 —
/// for johansen) over the range.
fn test_call(
    test: &str,
    lower: &str,
    syms: &[String],
    start: Option<String>,
    end: Option<String>,
) -> Option<PlannedCall> {
    // The half-life of two names' spread is Engle–Granger's: it fits the
    // hedge ratio and reports the spread's half-life.
    let test = if test == "half_life" && syms.len() >= 2 {
        "engle_granger"
    } else {
        test
    };
    let want = match test {
        "engle_granger" => 2,
        "johansen" => syms.len().clamp(2, 12),
        _ => 1,
    };
    if syms.len() < want {
        return None;
    }
    let field = (lower.contains("returns") && !lower.contains("log price"))
        .then(|| "returns".to_string())
        .filter(|_| matches!(test, "adf" | "kpss" | "hurst" | "half_life"));
    Some(PlannedCall::typed(
        tool::STAT_TEST,
        StatTestArgs {
            test: test.into(),
            symbols: Some(syms[..want].to_vec()),
            start,
            end,
            field,
            regression: regression(lower).filter(|_| test != "ljung_box" && test != "jarque_bera"),
            autolag: names(lower, "bic").then(|| "bic".into()),
            ..StatTestArgs::default()
        },
    ))
}

fn volatility_call(
    model: &str,
    text: &str,
    sym: &str,
    start: Option<String>,
    end: Option<String>,
) -> PlannedCall {
    PlannedCall::typed(
        tool::VOLATILITY_MODEL,
        VolatilityModelArgs {
            symbol: Some(sym.to_string()),
            start,
            end,
            model: model.into(),
            lambda: (model == "ewma").then(|| number(&LAMBDA, text)).flatten(),
            dist: (model != "ewma" && t_errors(text)).then(|| "t".to_string()),
            horizon_days: horizon(text),
            ..VolatilityModelArgs::default()
        },
    )
}

/// Whether a request asks for Student-t errors.
fn t_errors(text: &str) -> bool {
    T_ERRORS.as_ref().is_some_and(|re| re.is_match(text))
}

/// The symbol a volatility request names: "T" in "t errors" is the
/// distribution, not AT&T, when another symbol is named.
fn vol_symbol(text: &str, syms: &[String]) -> Option<String> {
    let named = syms.iter().find(|s| !(s.as_str() == "T" && t_errors(text)));
    named.or(syms.first()).cloned()
}

/// A plain request's time-series call, or `None` (then the other intents
/// run).
/// `volatility_model`: a GARCH-family fit and forecast of one series.
pub(super) fn volatility_read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    if names(&lower, "backtest") || lower.contains("back-test") {
        return None;
    }
    let model = model_named(&lower)?;
    let (start, end) = date_range(text);
    let sym = vol_symbol(text, &tickers(text))?;
    Some(volatility_call(model, text, &sym, start, end))
}

/// `stat_test`: a unit-root, cointegration or normality test.
pub(super) fn test_read(text: &str) -> Option<PlannedCall> {
    let lower = text.to_lowercase();
    if names(&lower, "backtest") || lower.contains("back-test") || model_named(&lower).is_some() {
        return None;
    }
    let (start, end) = date_range(text);
    test_call(test_named(&lower)?, &lower, &tickers(text), start, end)
}

/// The time-series calls of a team member's sentence, or `None`.
pub(super) fn sentence_calls(
    sentence: &str,
    syms: &[String],
    range: &(Option<String>, Option<String>),
) -> Option<Vec<PlannedCall>> {
    let lower = sentence.to_lowercase();
    if names(&lower, "backtest") {
        return None;
    }
    let syms: Vec<String> = syms
        .iter()
        .filter(|s| embedded(s) || !NOT_TICKERS.contains(&s.as_str()))
        .cloned()
        .collect();
    let (start, end) = range.clone();
    if let Some(model) = model_named(&lower) {
        let sym = vol_symbol(sentence, &syms)?;
        return Some(vec![volatility_call(model, sentence, &sym, start, end)]);
    }
    test_call(test_named(&lower)?, &lower, &syms, start, end).map(|c| vec![c])
}

/// The `pairs` strategy's parameters when a backtest names a cointegration
/// hedge ("with the cointegration hedge ratio of a 252-day formation
/// window, a 60-day z-score"; docs §7.7, §16.3), else `None`.
pub(super) fn pairs_params(lower: &str) -> Option<Value> {
    if !lower.contains("cointegrat") && !lower.contains("engle") {
        return None;
    }
    let window = number(&FORMATION, lower).map_or(252, |w| w as u64);
    let z = number(&Z_WINDOW, lower).map_or(60.min(window), |z| (z as u64).min(window));
    Some(
        json!({"window": window, "z_window": z, "entry": 2.0, "exit": 0.5, "hedge": "cointegration"}),
    )
}

// ---------------------------------------------------------------------------
// Key figures and answers.

const NOT_ADVICE: &str =
    "Figures are statistics from the tool on the data named; they are analysis, not advice.";

fn pct(x: f64) -> String {
    format!("{:.2} %", x * 100.0)
}

fn p_shown(p: f64) -> String {
    if p < 1e-4 {
        format!("{p:.2e}")
    } else {
        format!("{p:.4}")
    }
}

/// "KO/PEP" or "SPY".
fn subject(o: &StatTestOutput) -> String {
    o.series.join("/")
}

fn period(d: &crate::model::quant::ReturnsData) -> String {
    match (&d.start, &d.end) {
        (Some(a), Some(b)) => format!("{a} to {b}"),
        _ => String::new(),
    }
}

/// The key-figure rows (label, value, as of) of a time-series result.
pub(super) fn key_rows(tool: &str, result: &Value) -> Option<Vec<(String, String, String)>> {
    match tool {
        tool::STAT_TEST => Some(test_rows(&typed::<StatTestOutput>(result)?)),
        tool::VOLATILITY_MODEL => Some(vol_rows(&typed::<VolatilityModelOutput>(result)?)),
        _ => None,
    }
}

fn test_rows(o: &StatTestOutput) -> Vec<(String, String, String)> {
    let who = subject(o);
    let at = period(&o.data);
    let row = |k: String, v: String| (k, v, at.clone());
    let mut rows = Vec::new();
    let name = match o.test.as_str() {
        "engle_granger" => "Engle–Granger",
        "johansen" => "Johansen trace (r = 0)",
        "adf" => "ADF",
        "kpss" => "KPSS",
        "ljung_box" => "Ljung–Box Q(10)",
        "jarque_bera" => "Jarque–Bera",
        _ => "",
    };
    if let Some(s) = o.statistic {
        rows.push(row(format!("{who} {name} statistic"), format!("{s:.4}")));
    }
    if let Some(p) = o.p_value {
        rows.push(row(format!("{who} {name} p-value"), p_shown(p)));
    }
    if let Some(c) = o.critical_values.as_ref().and_then(|c| c.get("5%")) {
        rows.push(row(
            format!("{who} {name} 5 % critical value"),
            format!("{:.4}", c.as_f64().unwrap_or(f64::NAN)),
        ));
    }
    if let Some(h) = o.hedge_ratio {
        rows.push(row(
            format!("{who} hedge ratio (Engle–Granger, β of the second leg)"),
            format!("{h:.4}"),
        ));
    }
    if o.test == "engle_granger" {
        rows.push(row(
            format!("{who} cointegrated spread half-life (Engle–Granger)"),
            o.half_life_days
                .map_or("none: the spread does not revert".into(), |h| {
                    format!("{h:.1} bars")
                }),
        ));
        if let Some(z) = o.spread_z {
            rows.push(row(
                format!("{who} cointegrated spread z (latest, Engle–Granger)"),
                format!("{z:.2}"),
            ));
        }
    } else if o.test == "half_life" {
        rows.push(row(
            format!("{who} half-life"),
            o.half_life_days
                .map_or("none: no mean reversion".into(), |h| format!("{h:.1} bars")),
        ));
    }
    if let Some(r) = o.rank_trace {
        rows.push(row(
            format!("{who} cointegration rank at 5 % (Johansen trace)"),
            r.to_string(),
        ));
    }
    if let Some(r) = o.rank_max_eigen {
        rows.push(row(
            format!("{who} cointegration rank at 5 % (Johansen max-eigenvalue)"),
            r.to_string(),
        ));
    }
    if let Some(h) = o.hurst {
        rows.push(row(format!("{who} Hurst exponent"), format!("{h:.4}")));
    }
    if let (Some(s), Some(k)) = (o.skewness, o.kurtosis) {
        rows.push(row(format!("{who} skewness"), format!("{s:.4}")));
        rows.push(row(format!("{who} kurtosis"), format!("{k:.4}")));
    }
    rows
}

/// The model as a heading names it: "GARCH", "EWMA", "GJR-GARCH", with
/// the errors' distribution when one was chosen.
fn model_title(o: &VolatilityModelOutput) -> String {
    let m = match o.model.as_str() {
        "gjr_garch" => "GJR-GARCH".to_string(),
        other => other.to_uppercase(),
    };
    match o.dist.as_deref() {
        Some("t") => format!("{m} (Student-t errors)"),
        Some(d) => format!("{m} ({d} errors)"),
        None => m,
    }
}

/// How the persistence is made up.
fn persistence_terms(o: &VolatilityModelOutput) -> &'static str {
    if o.gamma.is_some() {
        "α + γ/2 + β"
    } else {
        "α + β"
    }
}

fn vol_rows(o: &VolatilityModelOutput) -> Vec<(String, String, String)> {
    let at = o.data.end.clone().unwrap_or_default();
    let m = model_title(o);
    let who = &o.series;
    let mut rows = vec![(
        format!("{who} {m} volatility now (annualized)"),
        pct(o.current_vol_annualized),
        at.clone(),
    )];
    if let Some(f) = o.forecast.last() {
        rows.push((
            format!(
                "{who} {m} volatility forecast, day {} (annualized)",
                o.forecast.len()
            ),
            pct(*f),
            at.clone(),
        ));
    }
    if let Some(p) = o.persistence {
        rows.push((
            format!(
                "{who} GARCH persistence {}",
                persistence_terms(o).replace(' ', "")
            ),
            format!("{p:.4}"),
            at.clone(),
        ));
    }
    if let Some(v) = o.long_run_vol_annualized {
        rows.push((
            format!("{who} GARCH long-run volatility (annualized)"),
            pct(v),
            at,
        ));
    }
    rows
}

/// A time-series tool's answer, every input stated; `None` for another
/// tool.
pub(super) fn answer(request: &str, tool: &str, v: &Value) -> Option<String> {
    match tool {
        tool::STAT_TEST => {
            let o: StatTestOutput = typed(v)?;
            let mut out = test_answer(&o);
            out.push_str(&not_tested(request, &o));
            Some(out)
        }
        tool::VOLATILITY_MODEL => Some(vol_answer(&typed(v)?)),
        _ => None,
    }
}

fn data_line(o: &crate::model::quant::ReturnsData, field: &str) -> String {
    let what = match field {
        "log_close" => "natural logs of the adjusted closes",
        "close" => "adjusted closes",
        "returns" => "daily simple returns of the adjusted closes",
        _ => "the values given",
    };
    let mut s = match (&o.start, &o.end) {
        (Some(a), Some(b)) => format!(
            "{what} on the {} dates every series traded, {a} to {b} ({})",
            o.days,
            o.sources.join(", ")
        ),
        _ => format!("{what} ({} values)", o.days),
    };
    for n in &o.notes {
        s.push_str(&format!("; {n}"));
    }
    s
}

/// The tickers the request named that the test did not take, and why
/// (a test takes one series, Engle–Granger two, Johansen 2 to 12: the
/// planner tests the first ones named); empty when it took them all.
fn not_tested(request: &str, o: &StatTestOutput) -> String {
    let tested = |t: &String| o.series.iter().any(|s| s.eq_ignore_ascii_case(t));
    let named = tickers(request);
    if !named.iter().all(tested) && named.iter().any(tested) {
        let left: Vec<String> = named.into_iter().filter(|t| !tested(t)).collect();
        let takes = match o.test.as_str() {
            "johansen" => "at most 12 series",
            "engle_granger" => "two series",
            _ => "one series",
        };
        format!(
            "\n\nNot tested: {} — {} takes {takes}, so the first named were used; ask again with those.\n",
            left.join(", "),
            o.test
        )
    } else {
        String::new()
    }
}

fn test_answer(o: &StatTestOutput) -> String {
    let mut out = format!(
        "## {} of {}: {}\n\n| figure | value |\n|---|---|\n",
        o.test,
        subject(o),
        o.conclusion
    );
    let rows = test_rows(o);
    for (k, v, _) in &rows {
        out.push_str(&format!("| {k} | {v} |\n"));
    }
    if let Some(c) = &o.critical_values {
        let all: Vec<String> = c
            .iter()
            .map(|(k, v)| format!("{k} {:.4}", v.as_f64().unwrap_or(f64::NAN)))
            .collect();
        out.push_str(&format!("| critical values | {} |\n", all.join(", ")));
    }
    if let Some(lag) = o.used_lag {
        out.push_str(&format!("| lags used | {lag} |\n"));
    }
    out.push_str(&format!("| observations | {} |\n", o.n_obs));
    for r in &o.rank_tests {
        let five = |c: &serde_json::Map<String, Value>| {
            c.get("5%").and_then(Value::as_f64).unwrap_or(f64::NAN)
        };
        out.push_str(&format!(
            "| rank ≤ {}: eigenvalue; trace (5 % value); max-eigenvalue (5 % value) | {:.5}; {:.3} ({:.3}); {:.3} ({:.3}) |\n",
            r.r,
            r.eigenvalue,
            r.trace,
            five(&r.trace_critical_values),
            r.max_eigen,
            five(&r.max_eigen_critical_values)
        ));
    }
    for (i, v) in o.cointegrating_vectors.iter().enumerate() {
        let parts: Vec<String> = v
            .iter()
            .zip(&o.series)
            .map(|(b, n)| format!("{b:.4} × {n}"))
            .collect();
        out.push_str(&format!(
            "| cointegrating vector {} | {} |\n",
            i + 1,
            parts.join(" + ")
        ));
    }
    for l in &o.ljung_box {
        out.push_str(&format!(
            "| lag {}: Q, p-value, autocorrelation | {:.3}, {}, {:.4} |\n",
            l.lag,
            l.statistic,
            p_shown(l.p_value),
            l.autocorrelation
        ));
    }
    let mut inputs = format!("Inputs: {}", data_line(&o.data, &o.field));
    if let Some(r) = &o.regression {
        let r = match r.as_str() {
            "ct" => "a constant and a trend (ct)",
            "n" => "no constant (n)",
            _ => "a constant (c, the default)",
        };
        inputs.push_str(&format!("; regression with {r}"));
    }
    if let Some(a) = &o.autolag {
        inputs.push_str(&format!(
            "; lag chosen by {}",
            if a == "none" {
                "the maximum given".to_string()
            } else {
                a.to_uppercase()
            }
        ));
    }
    out.push_str(&format!(
        "\n{inputs}. Method: {}.\n\n{NOT_ADVICE}\n",
        o.conventions
    ));
    out
}

fn vol_answer(o: &VolatilityModelOutput) -> String {
    let mut out = format!(
        "## {} volatility of {}: {} now, {} in {} trading days (annualized)\n\n| figure | value |\n|---|---|\n",
        model_title(o),
        o.series,
        pct(o.current_vol_annualized),
        o.forecast.last().map_or("n/a".into(), |f| pct(*f)),
        o.horizon_days
    );
    let mut put = |k: &str, v: String| out.push_str(&format!("| {k} | {v} |\n"));
    if let (Some(mu), Some(w), Some(a), Some(b)) = (o.mu, o.omega, o.alpha, o.beta) {
        put("μ (mean daily return, %)", format!("{mu:.4}"));
        put("ω (%²)", format!("{w:.6}"));
        put("α", format!("{a:.4}"));
        if let Some(g) = o.gamma {
            put("γ (leverage: extra α after a fall)", format!("{g:.4}"));
        }
        put("β", format!("{b:.4}"));
        if let Some(nu) = o.nu {
            put("ν (Student-t degrees of freedom)", format!("{nu:.4}"));
        }
    }
    let se: Vec<String> = o
        .parameters
        .iter()
        .map(|p| match (p.std_err, p.t_stat) {
            (Some(s), Some(t)) => format!("{} {s:.4} (t {t:.2})", p.name),
            _ => format!("{} n/a", p.name),
        })
        .collect();
    if !se.is_empty() {
        put("robust standard errors (t)", se.join(", "));
    }
    if let Some(p) = o.persistence {
        put(
            &format!("persistence {}", persistence_terms(o)),
            format!("{p:.4}"),
        );
    }
    if let Some(h) = o.shock_half_life_days {
        put("half-life of a variance shock", format!("{h:.1} days"));
    }
    if let Some(v) = o.long_run_vol_annualized {
        put("long-run volatility (annualized)", pct(v));
    }
    if let Some(l) = o.lambda {
        put("λ", format!("{l}"));
    }
    put("log-likelihood (returns in %)", format!("{:.4}", o.loglik));
    put(
        "realized volatility of the sample (annualized)",
        pct(o.realized_vol_annualized),
    );
    out.push_str("\n| day | forecast volatility (annualized) |\n|---|---|\n");
    for (i, f) in o.forecast.iter().enumerate() {
        out.push_str(&format!("| {} | {} |\n", i + 1, pct(*f)));
    }
    out.push_str(&format!(
        "\nInputs: {}; {} daily returns; horizon {} days. Model: {}.\n\n{NOT_ADVICE}\n",
        data_line(&o.data, "returns"),
        o.n_obs,
        o.horizon_days,
        o.conventions
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The call of whichever of this module's tools reads `text`.
    fn intent(text: &str) -> Option<PlannedCall> {
        volatility_read(text).or_else(|| test_read(text))
    }

    fn call(text: &str) -> PlannedCall {
        intent(text).unwrap_or_else(|| panic!("no call for {text}"))
    }

    #[test]
    fn the_two_plain_requests_plan_their_tools_with_their_inputs() {
        let c = call("is KO/PEP cointegrated 2010–2015");
        assert_eq!(c.name, "stat_test");
        assert_eq!(c.args["test"], "engle_granger");
        assert_eq!(c.args["symbols"], json!(["KO", "PEP"]));
        assert_eq!(c.args["start"], "2010-01-01");
        assert_eq!(c.args["end"], "2015-12-31");
        let c = call("GARCH vol forecast for SPY");
        assert_eq!(c.name, "volatility_model");
        assert_eq!(c.args["model"], "garch");
        assert_eq!(c.args["symbol"], "SPY");
        assert!(c.args.get("start").is_none());
    }

    /// Johansen takes 12 series: a 13th named is dropped from the call,
    /// and the answer says which and why (before, silently).
    #[test]
    fn tickers_the_test_cannot_take_are_named_in_the_answer() {
        let names = [
            "KO", "PEP", "XOM", "CVX", "JPM", "BAC", "WFC", "C", "GS", "MS", "AAPL", "MSFT", "IBM",
        ];
        let request = format!("Johansen test on {} from 2010 to 2015", names.join(", "));
        let c = call(&request);
        assert_eq!(c.args["test"], "johansen");
        assert_eq!(c.args["symbols"], json!(names[..12]));
        let out = StatTestOutput {
            test: "johansen".into(),
            series: names[..12].iter().map(|s| s.to_string()).collect(),
            ..StatTestOutput::default()
        };
        let text = answer(
            &request,
            tool::STAT_TEST,
            &serde_json::to_value(&out).unwrap(),
        )
        .unwrap();
        assert!(
            text.contains("Not tested: IBM — johansen takes at most 12 series"),
            "{text}"
        );
        // All taken: no note.
        let request = format!("Johansen test on {}", names[..3].join(", "));
        let out = StatTestOutput {
            series: names[..3].iter().map(|s| s.to_string()).collect(),
            ..out
        };
        let text = answer(
            &request,
            tool::STAT_TEST,
            &serde_json::to_value(&out).unwrap(),
        )
        .unwrap();
        assert!(!text.contains("Not tested"), "{text}");
    }

    #[test]
    fn other_phrasings() {
        let c = call("ADF test on SPY with a trend");
        assert_eq!(
            (c.args["test"].as_str(), c.args["regression"].as_str()),
            (Some("adf"), Some("ct"))
        );
        assert_eq!(call("half-life of XOM").args["test"], "half_life");
        assert_eq!(call("Hurst exponent of AAPL in 2010").args["test"], "hurst");
        assert_eq!(
            call("Ljung-Box test on SPY returns").args["test"],
            "ljung_box"
        );
        assert_eq!(
            call("are IBM returns normally distributed").args["test"],
            "jarque_bera"
        );
        let c = call("EWMA volatility of AAPL with lambda 0.97 for the next 5 days");
        assert_eq!(c.args["model"], "ewma");
        assert_eq!(c.args["lambda"], 0.97);
        assert_eq!(c.args["horizon_days"], 5);
        let c = call("Johansen test on KO, PEP and PG 2010-2015 with a trend");
        assert_eq!(c.args["test"], "johansen");
        assert_eq!(c.args["symbols"], json!(["KO", "PEP", "PG"]));
        assert_eq!(c.args["regression"], "ct");
        assert!(intent("backtest a pairs spread trade on KO and PEP").is_none());
        assert!(intent("20-day volatility of AAPL").is_none());
        let c = call("GJR GARCH of SPY 2005-2015");
        assert_eq!(
            (c.args["model"].as_str(), c.args["symbol"].as_str()),
            (Some("gjr_garch"), Some("SPY"))
        );
        assert_eq!(c.args["start"], "2005-01-01");
        assert!(c.args.get("dist").is_none());
        for text in [
            "GARCH with t errors of AAPL",
            "GARCH with T errors of AAPL",
            "fit a GARCH with Student-t innovations to AAPL",
        ] {
            let c = call(text);
            assert_eq!(c.args["model"], "garch", "{text}");
            assert_eq!(c.args["dist"], "t", "{text}");
            assert_eq!(c.args["symbol"], "AAPL", "{text}");
        }
        let c = call("GJR-GARCH with fat-tailed errors for MSFT");
        assert_eq!(
            (c.args["model"].as_str(), c.args["dist"].as_str()),
            (Some("gjr_garch"), Some("t"))
        );
        assert!(call("GARCH vol forecast for T").args.get("dist").is_none());
    }

    #[test]
    fn a_cointegration_hedge_sets_the_pairs_parameters() {
        let p = pairs_params("backtest a pairs spread trade on ko and pep with the cointegration hedge ratio of a 252-day formation window, a 60-day z-score").unwrap();
        assert_eq!(
            p,
            json!({"window": 252, "z_window": 60, "entry": 2.0, "exit": 0.5, "hedge": "cointegration"})
        );
        assert!(pairs_params("backtest a pairs spread trade").is_none());
    }
}
