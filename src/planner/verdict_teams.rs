//! The rules of the shipped teams other than the investment committee
//! (docs §14.7), one function per reader. Each cites the figures it rests
//! on and says "no decision" when too few of them were reported.

use std::collections::BTreeMap;

use super::board::{Board, Fig, OWN, subject};
use super::rule::{Need, Point, Verdict, ranked, shown};

/// "Sharpe (annualized, rf 0 %)": what a backtest figure measures, as its
/// member labelled it.
fn measure(f: &Fig) -> &str {
    f.label[subject(&f.label, "Sharpe").len()..].trim()
}

/// The symbol a figure is about: its label's first word.
fn sym(f: &Fig) -> &str {
    f.label.split_whitespace().next().unwrap_or("")
}

/// A three-way test result.
#[derive(Clone, Copy, PartialEq)]
enum Mark {
    Pass,
    Weak,
    Fail,
}

fn mark_word(m: Mark) -> &'static str {
    match m {
        Mark::Pass => "pass",
        Mark::Weak => "weak",
        Mark::Fail => "fail",
    }
}

fn by(x: f64, pass: f64, fail: f64, higher_is_better: bool) -> Mark {
    let (p, f) = if higher_is_better {
        (x >= pass, x < fail)
    } else {
        (x <= pass, x > fail)
    };
    if p {
        Mark::Pass
    } else if f {
        Mark::Fail
    } else {
        Mark::Weak
    }
}

fn table(head: &str, rows: Vec<String>) -> Vec<String> {
    let cols = head.matches('|').count().saturating_sub(1);
    let mut out = vec![head.to_string(), format!("|{}", "---|".repeat(cols))];
    out.extend(rows);
    out.push(String::new());
    out
}

/// `pairs_stat_arb`: co-movement, cointegration, reversion and the traded
/// spread (docs §14.7, §16.3).
pub(super) fn pairs(b: &Board) -> Verdict {
    let t = |name: &str| b.at(name);
    let rule = format!(
        "Rule (docs §14.7): co-movement passes when the latest 60-day return correlation is ≥ {} and fails below {}; cointegration passes when the Engle–Granger p-value over the period (docs §16.3) is ≤ {} and fails above {}; reversion passes when the cointegrated spread's half-life is ≤ {} bars and fails above {} bars or when the spread does not revert; the spread trade after costs on both legs passes at a Sharpe ≥ {} and fails below {}. Any fail: not worth a spread model; four passes: worth a spread model; else: watch list. Research by rule, not advice.",
        shown(t("pass_correlation")),
        shown(t("fail_correlation")),
        shown(t("pass_p_value")),
        shown(t("fail_p_value")),
        shown(t("pass_half_life")),
        shown(t("fail_half_life")),
        shown(t("pass_sharpe")),
        shown(t("fail_sharpe")),
    );
    let mut n = Need::new(b);
    let mut tests: Vec<(&str, Mark, String)> = Vec::new();
    if let Some(c) = n.get(
        "co_movement",
        &["correlation", "latest"],
        "the latest correlation",
    ) {
        tests.push((
            "co-movement",
            by(c.value, t("pass_correlation"), t("fail_correlation"), true),
            c.cite(),
        ));
    }
    // The test over the whole period, not the backtest's formation window.
    let coint = b
        .all("reversion", &["Engle–Granger p-value"])
        .into_iter()
        .find(|f| !f.label.contains("formation"));
    match coint {
        Some(p) => tests.push((
            "cointegration",
            by(p.value, t("pass_p_value"), t("fail_p_value"), false),
            p.cite(),
        )),
        None => {
            n.get(
                "reversion",
                &["Engle–Granger p-value"],
                "the Engle–Granger p-value",
            );
        }
    }
    let hedge = n.get("reversion", &["hedge ratio"], "the pair's hedge ratio");
    let half_life = b
        .get("reversion", &["cointegrated spread half-life"])
        .or_else(|| b.get("reversion", &["half-life"]));
    match (hedge, half_life) {
        (_, Some(h)) => tests.push((
            "reversion",
            by(h.value, t("pass_half_life"), t("fail_half_life"), false),
            h.cite(),
        )),
        (Some(h), None) => tests.push((
            "reversion",
            Mark::Fail,
            format!(
                "no half-life: the spread did not revert (AR(1) slope b ≥ 0) beside {}",
                h.cite()
            ),
        )),
        (None, None) => {}
    }
    if let Some(s) = n.get(
        "reversion",
        &["pairs", "Sharpe"],
        "the spread trade's Sharpe",
    ) {
        tests.push((
            "spread trade after costs",
            by(s.value, t("pass_sharpe"), t("fail_sharpe"), true),
            s.cite(),
        ));
    }
    if tests.len() < 4 {
        return Verdict::none("Decision", &rule, &n.reasons());
    }
    let marks: Vec<Mark> = tests.iter().map(|t| t.1).collect();
    let decision = if marks.contains(&Mark::Fail) {
        "not worth a spread model"
    } else if marks.iter().all(|m| *m == Mark::Pass) {
        "worth a spread model"
    } else {
        "watch list"
    };
    let mut body = table(
        "| test | result | rests on |",
        tests
            .iter()
            .map(|(t, m, why)| format!("| {t} | {} | {why} |", mark_word(*m)))
            .collect(),
    );
    if let Some(z) = b.get("reversion", &["z-score"]) {
        let entry = t("entry_z");
        let now = if z.value >= entry {
            "stretched high: the rule would be short the spread".to_string()
        } else if z.value <= -entry {
            "stretched low: the rule would be long the spread".to_string()
        } else {
            format!("inside ±{}: no entry now", shown(entry))
        };
        body.push(format!("- Now: {} is {now}.", z.cite()));
    }
    if let Some(h) = hedge {
        body.push(format!(
            "- Hedge: {} dollars of the second leg per dollar of the first.",
            h.cite()
        ));
    }
    for f in b.all("stretch", &["RSI(14)", "latest"]) {
        body.push(format!("- Leg stretch: {}.", f.cite()));
    }
    Verdict {
        title: format!("Decision: {decision}"),
        rule,
        body,
    }
}

/// The members that ran the in-sample backtests of `quant_strategy_desk`.
const IN_SAMPLE: [&str; 3] = ["trend", "reversion", "breakout"];

/// In-sample and out-of-sample results ranked apart, each rule's share of
/// its in-sample Sharpe kept out of sample, and what survived.
fn survival(b: &Board, oos_key: &str) -> (Vec<String>, Vec<(String, f64)>, bool) {
    let is: Vec<&Fig> = IN_SAMPLE
        .iter()
        .flat_map(|k| b.all(k, &["Sharpe"]))
        .collect();
    let oos: Vec<&Fig> = b.all(oos_key, &["Sharpe"]);
    let mut body = Vec::new();
    let mut periods: Vec<&str> = is.iter().map(|f| f.as_of.as_str()).collect();
    periods.dedup();
    for p in periods {
        let here: Vec<&Fig> = is.iter().copied().filter(|f| f.as_of == p).collect();
        body.push(format!(
            "In-sample backtests, {p}, ranked by {}:",
            measure(here[0])
        ));
        body.push(String::new());
        body.extend(ranked(&here, "Sharpe"));
        body.push(String::new());
    }
    let (oos_period, oos_measure) = oos
        .first()
        .map_or(("", "Sharpe"), |f| (f.as_of.as_str(), measure(f)));
    body.push(format!(
        "Out-of-sample backtests, {oos_period}, ranked by {oos_measure}:"
    ));
    body.push(String::new());
    body.extend(ranked(&oos, "Sharpe"));
    body.push(String::new());
    let mut rows = Vec::new();
    let mut survivors = Vec::new();
    for o in &oos {
        let name = subject(&o.label, "Sharpe");
        let Some(i) = is.iter().find(|f| subject(&f.label, "Sharpe") == name) else {
            rows.push(format!(
                "| {name} | not run | {} | n/a | no in-sample run |",
                o.shown
            ));
            continue;
        };
        let kept = (i.value > 0.0).then(|| o.value / i.value * 100.0);
        let ok = i.value > 0.0
            && o.value >= b.at("min_oos_sharpe")
            && o.value >= b.at("min_kept_share") * i.value;
        if ok {
            survivors.push((name.to_string(), o.value));
        }
        rows.push(format!(
            "| {name} | {} (`{}`) | {} (`{}`) | {} | {} |",
            i.shown,
            i.from,
            o.shown,
            o.from,
            kept.map_or("n/a".into(), |k| format!("{k:.0} %")),
            if ok { "yes" } else { "no" }
        ));
    }
    body.extend(table(
        "| rule | in-sample Sharpe | out-of-sample Sharpe | share of the in-sample Sharpe kept | survived |",
        rows,
    ));
    for i in &is {
        let name = subject(&i.label, "Sharpe");
        if !oos.iter().any(|o| subject(&o.label, "Sharpe") == name) {
            body.push(format!("- Not validated out of sample: {}.", i.cite()));
        }
    }
    (body, survivors, !oos.is_empty())
}

/// The survival rule at the board's thresholds.
fn survival_rule(b: &Board) -> String {
    format!(
        "Rule (docs §14.7): in-sample and out-of-sample backtests are ranked apart; a rule survives when its out-of-sample Sharpe is ≥ {} and at least {} × its (positive) in-sample Sharpe; the survivor with the highest out-of-sample Sharpe earns its place, and with no survivor no rule does. Research by rule, not advice.",
        shown(b.at("min_oos_sharpe")),
        shown(b.at("min_kept_share"))
    )
}

/// The validator: its own out-of-sample runs against the quants' in-sample ones.
pub(super) fn validation(b: &Board) -> Verdict {
    let (body, survivors, any) = survival(b, OWN);
    if !any {
        return Verdict::none(
            "Out-of-sample check",
            &survival_rule(b),
            &[b.missing(OWN, "an out-of-sample Sharpe")],
        );
    }
    Verdict {
        title: format!("Out-of-sample check: {} rule(s) survived", survivors.len()),
        rule: survival_rule(b),
        body,
    }
}

/// The head of the quant desk: which rule earned its place.
pub(super) fn quant_desk(b: &Board) -> Verdict {
    let (body, mut survivors, any) = survival(b, "validation");
    if !any {
        return Verdict::none(
            "Decision",
            &survival_rule(b),
            &[b.missing("validation", "an out-of-sample Sharpe")],
        );
    }
    survivors.sort_by(|a, b| b.1.total_cmp(&a.1));
    let title = match survivors.first() {
        Some((name, s)) => {
            format!("Decision: {name} earned its place (out-of-sample Sharpe {s:.2})")
        }
        None => "Decision: no rule earned its place".into(),
    };
    let mut body = body;
    body.extend(deflated(b));
    Verdict {
        title,
        rule: survival_rule(b),
        body,
    }
}

/// The desk's own deflated Sharpe of its best in-sample rule (docs §17.3,
/// §17.4): reported beside the decision, not part of its rule.
fn deflated(b: &Board) -> Vec<String> {
    let Some(d) = b.get(OWN, &["deflated Sharpe ratio"]) else {
        return vec![format!(
            "- Deflated Sharpe: {}.",
            b.missing(OWN, "the deflated Sharpe ratio")
        )];
    };
    let mut line = format!("- Deflated for the rules tried (docs §17.3): {}", d.cite());
    if let Some(l) = b.get(OWN, &["reaches by luck"]) {
        line.push_str(&format!("; {}", l.cite()));
    }
    line.push_str(if d.value >= 0.95 {
        ": the best in-sample Sharpe survives deflation at 95 %."
    } else {
        ": below 0.95, at 95 % confidence the best in-sample Sharpe is not told apart from the best of that many rules by luck."
    });
    vec![line]
}

/// Commission plus slippage (in %) named in a backtest label ("at 0.30 %
/// commission, 0.10 % slippage"); 0 when none is named.
fn cost_of(label: &str) -> f64 {
    let Some(at) = label.find(" at ") else {
        return 0.0;
    };
    label[at + 4..]
        .split(',')
        .filter_map(|part| part.split_whitespace().next()?.parse::<f64>().ok())
        .sum()
}

/// `backtest_audit`: robust, fragile to costs, or period-dependent.
pub(super) fn audit(b: &Board) -> Verdict {
    let share = b.at("cost_sharpe_share");
    let rule = format!(
        "Rule (docs §14.7): a base case with a Sharpe ≤ 0 has no edge to audit; the rule is fragile to costs when, at the highest costs tried, its Sharpe falls below {} × the base case's or its total return to 0 or less; it is period-dependent when any walk-forward period has a Sharpe ≤ 0; otherwise it is robust. Research by rule, not advice.",
        shown(share)
    );
    let mut n = Need::new(b);
    let base = n.get(
        "base_case",
        &["sma_crossover", "Sharpe"],
        "the base case's Sharpe",
    );
    let costs: Vec<&Fig> = b.all("cost_stress", &["Sharpe"]);
    let periods: Vec<&Fig> = b.all("walk_forward", &["Sharpe"]);
    if costs.is_empty() {
        n.other
            .push(b.missing("cost_stress", "a cost-stressed Sharpe"));
    }
    if periods.len() < 2 {
        n.other
            .push(b.missing("walk_forward", "two walk-forward Sharpes"));
    }
    let (Some(base), Some(worst)) = (
        base,
        costs
            .iter()
            .max_by(|a, c| cost_of(&a.label).total_cmp(&cost_of(&c.label))),
    ) else {
        return Verdict::none("Ruling", &rule, &n.reasons());
    };
    if periods.len() < 2 {
        return Verdict::none("Ruling", &rule, &n.reasons());
    }
    let mut body = vec![format!("- Base case: {}.", base.cite())];
    if let Some(h) = b.get("base_case", &["buy_and_hold", "Sharpe"]) {
        body.push(format!("- Baseline: {}.", h.cite()));
    }
    let worst_return = b.get(
        "cost_stress",
        &[subject(&worst.label, "Sharpe"), "total return"],
    );
    let fragile = worst.value < share * base.value || worst_return.is_some_and(|r| r.value <= 0.0);
    body.push(format!(
        "- Costs: at the highest costs tried, {}{} → {}.",
        worst.cite(),
        worst_return
            .map(|r| format!(" with {}", r.cite()))
            .unwrap_or_default(),
        if fragile {
            "fragile to costs"
        } else {
            "holds up"
        }
    ));
    let bad: Vec<&&Fig> = periods.iter().filter(|f| f.value <= 0.0).collect();
    let cited: Vec<String> = periods.iter().map(|f| f.cite()).collect();
    body.push(format!(
        "- Periods: {} → {}.",
        cited.join("; "),
        if bad.is_empty() {
            "every period positive"
        } else {
            "period-dependent"
        }
    ));
    let ruling = if base.value <= 0.0 {
        "not robust: the base case has no edge".to_string()
    } else {
        match (fragile, !bad.is_empty()) {
            (false, false) => "robust".into(),
            (true, false) => "fragile to costs".into(),
            (false, true) => "period-dependent".into(),
            (true, true) => "fragile to costs and period-dependent".into(),
        }
    };
    Verdict {
        title: format!("Ruling: {ruling}"),
        rule,
        body,
    }
}

/// Up, down or mixed from a price against its average and MACD against
/// its signal (any of them missing: `None`).
fn direction(
    price_vs_avg: Option<(&Fig, &Fig)>,
    macd: Option<(&Fig, &Fig)>,
) -> Option<(&'static str, String)> {
    let ((c, a), (m, s)) = (price_vs_avg?, macd?);
    let up = (c.value >= a.value, m.value >= s.value);
    let word = match up {
        (true, true) => "up",
        (false, false) => "down",
        _ => "mixed",
    };
    Some((
        word,
        format!(
            "{} against {}; {} against {}",
            c.cite(),
            a.cite(),
            m.cite(),
            s.cite()
        ),
    ))
}

/// `crypto_desk`: a risk rating and a trend, then an analytical stance.
pub(super) fn crypto(b: &Board) -> Verdict {
    let (high, elevated) = (
        b.at("high_risk_volatility"),
        b.at("elevated_risk_volatility"),
    );
    let (crash, paid_at) = (b.at("crash_drawdown"), b.at("paid_sharpe"));
    let rule = format!(
        "Rule (docs §14.7): risk is high at a latest annualized volatility ≥ {} %, elevated at ≥ {} %, else moderate, one level higher when the deepest drawdown is ≤ {} %; the trend is up when the close is above its EMA(50) and MACD above its signal, down when both are below; a rule paid when its Sharpe is ≥ {}. Defensive when risk is high or the trend is down; constructive when the trend is up, risk is not high and a rule paid; else cautious. An analytical stance, with no sizes or instructions.",
        shown(high),
        shown(elevated),
        shown(crash),
        shown(paid_at)
    );
    let mut n = Need::new(b);
    let vol = n.get(
        "volatility",
        &["volatility", "latest"],
        "the latest volatility",
    );
    let dd = n.get(
        "volatility",
        &["drawdown", "deepest"],
        "the deepest drawdown",
    );
    let close = n.ending("trend", " close", "the last close");
    let ema = n.get("trend", &["EMA(50)", "latest"], "the EMA(50)");
    let macd = n.ending("trend", " macd", "the MACD line").zip(n.ending(
        "trend",
        " signal",
        "the MACD signal",
    ));
    let trend = direction(close.zip(ema), macd);
    let Some(v) = vol else {
        return Verdict::none("Stance", &rule, &n.reasons());
    };
    let mut level = if v.value >= high {
        2
    } else if v.value >= elevated {
        1
    } else {
        0
    };
    if dd.is_some_and(|d| d.value <= crash) {
        level = (level + 1).min(2);
    }
    let risk = ["moderate", "elevated", "high"][level];
    let rules: Vec<&Fig> = [
        b.get("trend", &["ema_crossover", "Sharpe"]),
        b.get("breakout", &["breakout", "Sharpe"]),
    ]
    .into_iter()
    .flatten()
    .collect();
    let paid = rules.iter().any(|f| f.value >= paid_at);
    let t = trend.as_ref().map_or("not assessed", |t| t.0);
    let stance = if level == 2 || t == "down" {
        "defensive"
    } else if t == "up" && paid {
        "constructive"
    } else {
        "cautious"
    };
    let mut body = vec![format!(
        "- Risk: {risk}, from {}{}.",
        v.cite(),
        dd.map(|d| format!(" and {}", d.cite())).unwrap_or_default()
    )];
    body.push(match &trend {
        Some((w, why)) => format!("- Trend: {w}, from {why}."),
        None => format!("- Trend: not assessed ({}).", n.reasons().join("; ")),
    });
    let cited: Vec<String> = rules.iter().map(|f| f.cite()).collect();
    body.push(format!(
        "- Rules: {} → {}.",
        cited.join("; "),
        if paid { "a rule paid" } else { "no rule paid" }
    ));
    Verdict {
        title: format!("Stance: {stance}"),
        rule,
        body,
    }
}

/// ±1 as `a` stands above or below `b`.
fn above(topic: &'static str, a: &Fig, b: &Fig) -> Point {
    let (score, side) = if a.value >= b.value {
        (1, "above")
    } else {
        (-1, "below")
    };
    Point::new(topic, score, format!("{} is {side} {}", a.cite(), b.cite()))
}

/// `equity_research`: a rating from trend, momentum, baseline and drawdown.
pub(super) fn equity(b: &Board) -> Verdict {
    let paid = b.at("paid_sharpe");
    let (deep, shallow) = (b.at("deep_drawdown"), b.at("shallow_drawdown"));
    let rule = format!(
        "Rule (docs §14.7): one point each, +1 for and −1 against: the close against its SMA(200), the SMA(50) against the SMA(200), MACD against its signal, buy and hold's Sharpe (≥ {} for, < 0 against, else 0) and the latest drawdown (≤ {} % against, ≥ {} % for, else 0). A sum of +2 or more is positive, −2 or less negative, else neutral; three points are needed. Research by rule, not advice.",
        shown(paid),
        shown(deep),
        shown(shallow)
    );
    let mut n = Need::new(b);
    let close = n.ending("price_study", " close", "the last close");
    let s50 = n.get("technicals", &["SMA(50)", "latest"], "the SMA(50)");
    let s200 = n.get("technicals", &["SMA(200)", "latest"], "the SMA(200)");
    let macd = n.ending("technicals", " macd", "the MACD line");
    let signal = n.ending("technicals", " signal", "the MACD signal");
    let hold = n.get(
        "backtests",
        &["buy_and_hold", "Sharpe"],
        "buy and hold's Sharpe",
    );
    let dd = n.get(
        "price_study",
        &["drawdown", "latest"],
        "the latest drawdown",
    );
    let mut pts = Vec::new();
    if let (Some(c), Some(s)) = (close, s200) {
        pts.push(above("trend", c, s));
    }
    if let (Some(a), Some(s)) = (s50, s200) {
        pts.push(above("averages", a, s));
    }
    if let (Some(m), Some(s)) = (macd, signal) {
        pts.push(above("momentum", m, s));
    }
    if let Some(h) = hold {
        let score = if h.value >= paid {
            1
        } else if h.value < 0.0 {
            -1
        } else {
            0
        };
        pts.push(Point::new("baseline", score, h.cite()));
    }
    if let Some(d) = dd {
        let score = if d.value <= deep {
            -1
        } else if d.value >= shallow {
            1
        } else {
            0
        };
        pts.push(Point::new("drawdown", score, d.cite()));
    }
    if pts.len() < 3 {
        return Verdict::none("Rating", &rule, &n.reasons());
    }
    let sum: i32 = pts.iter().map(|p| p.score).sum();
    let rating = if sum >= 2 {
        "positive"
    } else if sum <= -2 {
        "negative"
    } else {
        "neutral"
    };
    let mut body: Vec<String> = pts.iter().map(|p| format!("- {}", p.line())).collect();
    body.push(format!("- Sum of the points: {sum:+} → {rating}."));
    if let (Some(m), Some(h)) = (b.get("backtests", &["momentum", "Sharpe"]), hold) {
        body.push(format!(
            "- The momentum rule against buy and hold: {} against {}.",
            m.cite(),
            h.cite()
        ));
    }
    Verdict {
        title: format!("Rating: {rating}"),
        rule,
        body,
    }
}

/// `factor_research`: which factor deserves a full study.
pub(super) fn factors(b: &Board) -> Verdict {
    let (min_margin, min_lead) = (b.at("min_sharpe_margin"), b.at("min_low_vol_lead"));
    let rule = format!(
        "Rule (docs §14.7): momentum and reversal are measured by their rule's Sharpe minus buy and hold's on the same universe and period, supported at a margin ≥ {}; low volatility by the calmest member's close change minus the wildest's (by the latest 60-day annualized volatility), supported at ≥ {} points. The supported one of momentum and reversal with the larger margin deserves a full study; low volatility only when neither is supported; none supported: no factor. Research by rule, not advice.",
        shown(min_margin),
        shown(min_lead)
    );
    let mut n = Need::new(b);
    let hold = n.get(
        "momentum",
        &["buy_and_hold", "Sharpe"],
        "buy and hold's Sharpe",
    );
    let mom = n.get(
        "momentum",
        &["momentum", "Sharpe"],
        "the momentum rule's Sharpe",
    );
    let rev = n.get(
        "reversal",
        &["rsi_mean_reversion", "Sharpe"],
        "the reversal rule's Sharpe",
    );
    let mut body = Vec::new();
    let mut cands: Vec<(&str, f64)> = Vec::new();
    if let Some(h) = hold {
        for (name, f) in [("momentum", mom), ("reversal", rev)] {
            if let Some(f) = f {
                let margin = f.value - h.value;
                body.push(format!(
                    "- {name}: {} against {}: margin {margin:+.2}.",
                    f.cite(),
                    h.cite()
                ));
                if margin >= min_margin {
                    cands.push((name, margin));
                }
            }
        }
    }
    let vols = b.all("low_volatility", &["volatility", "latest"]);
    let calm = vols.iter().min_by(|a, c| a.value.total_cmp(&c.value));
    let wild = vols.iter().max_by(|a, c| a.value.total_cmp(&c.value));
    let change = |f: &Fig| b.get("low_volatility", &[&format!("{} close change", sym(f))]);
    let mut low_vol = false;
    match (calm, wild) {
        (Some(c), Some(w)) if sym(c) != sym(w) => match (change(c), change(w)) {
            (Some(cc), Some(wc)) => {
                let lead = cc.value - wc.value;
                low_vol = lead >= min_lead;
                body.push(format!(
                    "- low volatility: calmest {} with {}, wildest {} with {}: lead {lead:+.2} points.",
                    c.cite(), cc.cite(), w.cite(), wc.cite()
                ));
            }
            _ => body.push(format!(
                "- low volatility: ranked (calmest {}, wildest {}) but no close change to compare.",
                c.cite(),
                w.cite()
            )),
        },
        _ => n
            .other
            .push(b.missing("low_volatility", "two members' volatility")),
    }
    if body.is_empty() {
        return Verdict::none("Decision", &rule, &n.reasons());
    }
    cands.sort_by(|a, c| c.1.total_cmp(&a.1));
    let title = match (cands.first(), low_vol) {
        (Some((name, _)), _) => format!("Decision: {name} deserves a full study"),
        (None, true) => "Decision: low volatility deserves a full study".into(),
        (None, false) => "Decision: no factor deserves a full study on this evidence".into(),
    };
    // Each factor's rank IC (docs §17.1), cited beside the rule's margins.
    for (key, name, sign) in [
        ("momentum", "momentum", ""),
        (
            "low_volatility",
            "volatility",
            " (a low-volatility effect is a negative IC)",
        ),
        (
            "reversal",
            "one-month return",
            " (a reversal is a negative IC)",
        ),
    ] {
        if let Some(m) = b.get(key, &["21-day IC mean"]) {
            let t = b
                .get(key, &["21-day IC t"])
                .map_or(String::new(), |t| format!(", {}", t.cite()));
            body.push(format!(
                "- The {name} factor's rank IC{sign}: {}{t}.",
                m.cite()
            ));
        }
    }
    body.push("- The universe is small and survivor-biased (today's large caps); a full study needs a point-in-time universe and ranked portfolios.".into());
    Verdict { title, rule, body }
}

/// `macro_rates`: how much the regimes differ, and the precedents.
pub(super) fn macro_regimes(b: &Board) -> Verdict {
    let min_gap = b.at("min_sharpe_gap");
    let rule = format!(
        "Rule (docs §14.7): the regimes are ranked by buy and hold's Sharpe in each; the stock is rate-regime-sensitive when the best and the worst differ by {min_gap:.1} or more, else not clearly so; each rate turn is read against its nearest precedent (a hiking turn: the hiking cycle; cuts: the easing cycle; rates held at zero: the zero-rate years). Scenarios, not forecasts or advice."
    );
    let names = [
        ("hiking", "the 2004–2006 hiking cycle"),
        ("easing", "the 2007–2008 easing cycle"),
        ("zero_rates", "the zero-rate years"),
    ];
    let mut n = Need::new(b);
    let mut rows = Vec::new();
    let mut sharpe: Vec<(&str, &Fig)> = Vec::new();
    for (key, name) in names {
        let s = n.get(key, &["buy_and_hold", "Sharpe"], "buy and hold's Sharpe");
        let r = b.get(key, &["buy_and_hold", "annual return"]);
        let d = b.get(key, &["drawdown", "deepest"]);
        if let Some(s) = s {
            sharpe.push((key, s));
            rows.push(format!(
                "| {name} (`{key}`) | {} | {} | {} |",
                s.shown,
                r.map_or("n/a", |f| f.shown.as_str()),
                d.map_or("n/a", |f| f.shown.as_str())
            ));
        }
    }
    if sharpe.len() < 2 {
        return Verdict::none("Decision", &rule, &n.reasons());
    }
    sharpe.sort_by(|a, c| c.1.value.total_cmp(&a.1.value));
    let (best, worst) = (sharpe[0], sharpe[sharpe.len() - 1]);
    let gap = best.1.value - worst.1.value;
    let mut body = table(
        &format!(
            "| regime | buy-and-hold {} | buy-and-hold annual return | deepest drawdown |",
            measure(best.1)
        ),
        rows,
    );
    body.push(format!(
        "- Best: {}; worst: {}; gap {gap:.2}.",
        best.1.cite(),
        worst.1.cite()
    ));
    for (turn, key) in [
        ("A hiking turn", "hiking"),
        ("Cuts in a downturn", "easing"),
        ("Rates held at zero", "zero_rates"),
    ] {
        if let Some((_, f)) = sharpe.iter().find(|(k, _)| *k == key) {
            body.push(format!("- {turn}: the precedent is {}.", f.cite()));
        }
    }
    let title = if gap >= min_gap {
        format!(
            "Decision: rate-regime-sensitive (best in `{}`, worst in `{}`)",
            best.0, worst.0
        )
    } else {
        "Decision: not clearly rate-regime-sensitive".into()
    };
    Verdict { title, rule, body }
}

/// `portfolio_review`: flags per holding, where the risk sits.
pub(super) fn portfolio(b: &Board) -> Verdict {
    let (crash, high) = (b.at("crash_drawdown"), b.at("high_volatility"));
    let (close, multiple) = (b.at("high_correlation"), b.at("risk_share_multiple"));
    let edge = b.at("trend_sharpe_edge");
    let rule = format!(
        "Rule (docs §14.7): a holding is flagged for a deepest drawdown ≤ {} %, for a latest 60-day annualized volatility ≥ {} %, for a latest 60-day correlation ≥ {} with another holding (both are flagged), and for a share of the equal-weight book's variance of at least {} times its equal share (`portfolio_optimize`'s risk contributions); the book's risk sits in the holding with the largest share (without the shares: the highest latest volatility); the holding with the most flags (ties: the more volatile) is the one to look at next; the minimum-variance weights are set beside it; a trend rule whose Sharpe beats buy and hold's by {} or more is noted. No trading instructions or sizes.",
        shown(crash),
        shown(high),
        shown(close),
        shown(multiple),
        shown(edge)
    );
    let mut flags: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let vols = b.all("holding_risk", &["volatility", "latest"]);
    for d in b.all("holding_risk", &["drawdown", "deepest"]) {
        let e = flags.entry(sym(d).to_string()).or_default();
        if d.value <= crash {
            e.push(d.cite());
        }
    }
    for v in &vols {
        let e = flags.entry(sym(v).to_string()).or_default();
        if v.value >= high {
            e.push(v.cite());
        }
    }
    for c in b.all("diversification", &["correlation", "latest"]) {
        let other = c
            .label
            .split("with ")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .unwrap_or("");
        if c.value >= close {
            for s in [sym(c), other] {
                flags.entry(s.to_string()).or_default().push(c.cite());
            }
        }
    }
    let shares = b.all("diversification", &["equal_weight", "risk contribution"]);
    let equal_share = 100.0 / shares.len().max(1) as f64;
    for c in &shares {
        let e = flags.entry(sym(c).to_string()).or_default();
        if c.value >= multiple * equal_share {
            e.push(c.cite());
        }
    }
    if flags.is_empty() {
        return Verdict::none(
            "Decision",
            &rule,
            &[b.missing("holding_risk", "each holding's volatility and drawdown")],
        );
    }
    let vol_of = |s: &str| {
        vols.iter()
            .find(|v| sym(v) == s)
            .map_or(f64::MIN, |v| v.value)
    };
    let mut body: Vec<String> = flags
        .iter()
        .map(|(s, f)| {
            if f.is_empty() {
                format!("- {s}: no flag.")
            } else {
                format!("- {s}: {} flag(s): {}.", f.len(), f.join("; "))
            }
        })
        .collect();
    let largest = shares.iter().max_by(|a, c| a.value.total_cmp(&c.value));
    if let Some(top) = largest.or(vols.iter().max_by(|a, c| a.value.total_cmp(&c.value))) {
        body.push(format!(
            "- The book's risk sits in {}: {}.",
            sym(top),
            top.cite()
        ));
    }
    let mix: Vec<String> = b
        .all("diversification", &["min_variance", "weight"])
        .iter()
        .map(|f| f.cite())
        .collect();
    if !mix.is_empty() {
        body.push(format!("- The minimum-variance mix: {}.", mix.join("; ")));
    }
    if let (Some(t), Some(h)) = (
        b.get("performance", &["sma_crossover", "Sharpe"]),
        b.get("performance", &["buy_and_hold", "Sharpe"]),
    ) {
        let helped = t.value - h.value >= edge;
        body.push(format!(
            "- Trend overlay: {} against {} → {}.",
            t.cite(),
            h.cite(),
            if helped {
                "the trend rule would have helped"
            } else {
                "no clear help"
            }
        ));
    }
    let next = flags.iter().filter(|(_, f)| !f.is_empty()).max_by(|a, c| {
        a.1.len()
            .cmp(&c.1.len())
            .then(vol_of(a.0).total_cmp(&vol_of(c.0)))
    });
    let title = match next {
        Some((s, f)) => format!("Decision: look next at {s} ({} flag(s))", f.len()),
        None => "Decision: no holding breaches the review limits".into(),
    };
    Verdict { title, rule, body }
}

/// `risk_committee`: limits breached, ranked by size, and the levels to watch.
pub(super) fn risk_memo(b: &Board) -> Verdict {
    let (vol_limit, es_limit) = (b.at("volatility_limit"), b.at("es_limit"));
    let (loss_limit, dd_limit) = (b.at("stress_loss_limit"), b.at("drawdown_limit"));
    let corr_limit = b.at("correlation_limit");
    let rule = format!(
        "Rule (docs §14.7): four limits — the latest 20-day annualized volatility at {} %, a 1-day 99 % historical expected shortfall of {} %, a loss of {} % (or a max drawdown of {} %) over the stress window, and a 60-day correlation with the second holding at {}; each reading is sized as its share of its limit and ranked. No breach: green; one: amber; two or more: red. Two of the four must be assessed. Analytical levels, no trading instructions.",
        shown(vol_limit),
        shown(es_limit),
        shown(loss_limit),
        shown(dd_limit),
        shown(corr_limit)
    );
    let mut n = Need::new(b);
    let mut risks: Vec<(f64, bool, String)> = Vec::new();
    if let Some(v) = n.get(
        "market_risk",
        &["volatility", "latest"],
        "the latest volatility",
    ) {
        risks.push((
            v.value / vol_limit,
            v.value >= vol_limit,
            format!("volatility limit {} %: {}", shown(vol_limit), v.cite()),
        ));
    }
    // The tail of daily returns, from `risk_report` (docs §15.4).
    if let Some(es) = n.get(
        "market_risk",
        &["99 % ES", "historical"],
        "the 99 % expected shortfall",
    ) {
        risks.push((
            es.value / es_limit,
            es.value >= es_limit,
            format!(
                "expected shortfall limit {} %: {}",
                shown(es_limit),
                es.cite()
            ),
        ));
    }
    let loss = n.get(
        "stress_test",
        &["buy_and_hold", "total return"],
        "the stress window's return",
    );
    let mdd = b.get("stress_test", &["buy_and_hold", "max drawdown"]);
    if let Some(l) = loss {
        let size = (-l.value / loss_limit).max(mdd.map_or(0.0, |d| -d.value / dd_limit));
        let hit = l.value <= -loss_limit || mdd.is_some_and(|d| d.value <= -dd_limit);
        let d = mdd.map(|d| format!(", {}", d.cite())).unwrap_or_default();
        risks.push((
            size,
            hit,
            format!(
                "stress limit {} % (max drawdown {} %): {}{d}",
                shown(-loss_limit),
                shown(-dd_limit),
                l.cite()
            ),
        ));
    }
    if let Some(c) = n.get(
        "correlation",
        &["correlation", "latest"],
        "the latest correlation",
    ) {
        risks.push((
            c.value / corr_limit,
            c.value >= corr_limit,
            format!("correlation limit {}: {}", shown(corr_limit), c.cite()),
        ));
    }
    if risks.len() < 2 {
        return Verdict::none("Rating", &rule, &n.reasons());
    }
    risks.sort_by(|a, c| c.0.total_cmp(&a.0));
    let breaches = risks.iter().filter(|r| r.1).count();
    let rating = match breaches {
        0 => "green",
        1 => "amber",
        _ => "red",
    };
    let mut body: Vec<String> = risks
        .iter()
        .enumerate()
        .map(|(i, (size, hit, text))| {
            format!(
                "{}. {text}: {:.1} % of the limit, {}",
                i + 1,
                size * 100.0,
                if *hit { "breached" } else { "within" }
            )
        })
        .collect();
    body.push(String::new());
    if let Some(a) = b.get("market_risk", &["ATR(14)", "latest"]) {
        body.push(format!("- Also watch the daily range: {}.", a.cite()));
    }
    if let Some(v) = b.get("market_risk", &["99 % VaR", "historical"]) {
        body.push(format!("- The 99 % daily loss line: {}.", v.cite()));
    }
    Verdict {
        title: format!(
            "Rating: {rating} ({breaches} of {} limits breached)",
            risks.len()
        ),
        rule,
        body,
    }
}

/// `technical_analysis_panel`: where trend and momentum agree.
pub(super) fn technical_panel(b: &Board) -> Verdict {
    let line = b.at("momentum_rsi");
    let rule = format!(
        "Rule (docs §14.7): the trend is up when the close is above its SMA(50) and the SMA(50) above the SMA(200), down when both are below, else mixed; momentum is up when MACD is above its signal and RSI(14) at or above {}, down when both are below, else mixed. Trend and momentum both up: a bullish reading; both down: bearish; otherwise mixed, naming the conflict. A close outside its Bollinger bands is noted as stretched. Analytical levels, not signals.",
        shown(line)
    );
    let mut n = Need::new(b);
    let close = n.ending(OWN, " close", "the last close");
    let s50 = n.get("trend", &["SMA(50)", "latest"], "the SMA(50)");
    let s200 = n.get("trend", &["SMA(200)", "latest"], "the SMA(200)");
    let rsi = n.get("momentum", &["RSI(14)", "latest"], "the RSI(14)");
    let macd = n.ending("momentum", " macd", "the MACD line");
    let signal = n.ending("momentum", " signal", "the MACD signal");
    let trend = match (close, s50, s200) {
        (Some(c), Some(a), Some(l)) => {
            let w = if c.value > a.value && a.value > l.value {
                "up"
            } else if c.value < a.value && a.value < l.value {
                "down"
            } else {
                "mixed"
            };
            Some((w, format!("{}, {}, {}", c.cite(), a.cite(), l.cite())))
        }
        _ => None,
    };
    let momentum = match (rsi, macd, signal) {
        (Some(r), Some(m), Some(s)) => {
            let w = if m.value >= s.value && r.value >= line {
                "up"
            } else if m.value < s.value && r.value < line {
                "down"
            } else {
                "mixed"
            };
            Some((
                w,
                format!("{}, {} against {}", r.cite(), m.cite(), s.cite()),
            ))
        }
        _ => None,
    };
    let (Some(t), Some(m)) = (trend, momentum) else {
        return Verdict::none("Reading", &rule, &n.reasons());
    };
    let reading = match (t.0, m.0) {
        ("up", "up") => "bullish (trend and momentum agree)".to_string(),
        ("down", "down") => "bearish (trend and momentum agree)".to_string(),
        (a, c) => format!("mixed (trend {a}, momentum {c})"),
    };
    let mut body = vec![
        format!("- Trend: {}, from {}.", t.0, t.1),
        format!("- Momentum: {}, from {}.", m.0, m.1),
    ];
    if let (Some(c), Some(u), Some(l)) = (
        close,
        b.ending("volatility", " upper"),
        b.ending("volatility", " lower"),
    ) {
        let where_ = if c.value > u.value {
            "above the upper band: stretched"
        } else if c.value < l.value {
            "below the lower band: stretched"
        } else {
            "inside the bands"
        };
        body.push(format!(
            "- Volatility: {} is {where_} ({}, {}).",
            c.cite(),
            l.cite(),
            u.cite()
        ));
    }
    if let Some(v) = b.get("volatility", &["volatility", "latest"]) {
        body.push(format!("- Realised volatility: {}.", v.cite()));
    }
    Verdict {
        title: format!("Reading: {reading}"),
        rule,
        body,
    }
}
