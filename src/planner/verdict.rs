//! Decisions by rule (docs §14.7): with no model, a shipped team's reader
//! weighs its members' figures by a fixed, documented rule and states the
//! outcome, naming the figure each argument rests on. The preset names the
//! rule (a task's `decision: risk_review`); the swarm writes it into the
//! member's message as a `Decision rule: NAME` line and the rule is chosen
//! by that name alone: a message without the line, or with a name not in
//! `model::team_rules::RULES`, gets no verdict, whatever its upstream keys.
//! A rule whose figures are missing says "no decision" and why, rather
//! than deciding on less.
//!
//! Every threshold is read from the board ([`Board::at`]): the preset's
//! value (`thresholds:` beside `decision:`, carried on the rule line), else
//! its default in `model::team_rules::THRESHOLDS`, the one definition docs
//! §14.7 is checked against; the rules' stated text is formatted from the
//! values in force. The shipped presets' prompts state the same rules for
//! a model.

use super::board::{Board, Fig, OWN};
use super::rule::{Need, Point, Verdict, shown, stance};
use super::verdict_teams as teams;

/// The verdict of the board's rule (a name of `model::team_rules::RULES`),
/// if the planner has it, at the thresholds its line gave (the rest at
/// their defaults, `model::team_rules::THRESHOLDS`).
pub(super) fn verdict(b: &Board) -> Option<Verdict> {
    Some(match b.rule.as_str() {
        "risk_review" => risk_review(b),
        "bull_rebuttal" => rebuttal_member(b, Side::Bull),
        "bear_rebuttal" => rebuttal_member(b, Side::Bear),
        "committee" => committee(b),
        "pairs" => teams::pairs(b),
        "validation" => teams::validation(b),
        "quant_desk" => teams::quant_desk(b),
        "backtest_audit" => teams::audit(b),
        "crypto" => teams::crypto(b),
        "equity" => teams::equity(b),
        "factors" => teams::factors(b),
        "macro_regimes" => teams::macro_regimes(b),
        "portfolio" => teams::portfolio(b),
        "risk_memo" => teams::risk_memo(b),
        "technical_panel" => teams::technical_panel(b),
        "options_desk" => super::verdict_quant::options_desk(b),
        _ => return None,
    })
}

/// Which side of the committee.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Side {
    Bull,
    Bear,
}

/// The bull-side researcher's points: trend (close against its SMA(50)),
/// momentum (MACD against its signal) and whether the trend rule paid
/// (SMA-crossover Sharpe ≥ 0.5 for, < 0 against).
pub(super) fn bull_points(n: &mut Need<'_>, from: &str) -> Vec<Point> {
    let mut out = Vec::new();
    let close = n.ending(from, " close", "the last close");
    let sma = n.get(from, &["SMA(50)", "latest"], "the SMA(50)");
    if let (Some(c), Some(s)) = (close, sma) {
        let (score, side) = if c.value >= s.value {
            (1, "above")
        } else {
            (-1, "below")
        };
        out.push(Point::new(
            "trend",
            score,
            format!("{} is {side} {}", c.cite(), s.cite()),
        ));
    }
    let macd = n.ending(from, " macd", "the MACD line");
    let signal = n.ending(from, " signal", "the MACD signal");
    if let (Some(m), Some(s)) = (macd, signal) {
        let (score, side) = if m.value >= s.value {
            (1, "above")
        } else {
            (-1, "below")
        };
        out.push(Point::new(
            "momentum",
            score,
            format!("{} is {side} {}", m.cite(), s.cite()),
        ));
    }
    if let Some(f) = n.get(
        from,
        &["sma_crossover", "Sharpe"],
        "the trend rule's Sharpe",
    ) {
        let paid = n.b.at("paid_sharpe");
        let score = if f.value >= paid {
            1
        } else if f.value < 0.0 {
            -1
        } else {
            0
        };
        out.push(Point::new(
            "trend rule",
            score,
            format!("{} against the {} and 0 lines", f.cite(), shown(paid)),
        ));
    }
    out
}

/// The bear-side researcher's points: the latest drawdown (≤ −20 %
/// against, ≥ −5 % for), the latest annualized volatility (≥ 40 % against,
/// ≤ 20 % for), RSI(14) (≥ 70, stretched: against) and buying dips
/// (RSI-mean-reversion Sharpe < 0 against, ≥ 0.5 for).
pub(super) fn bear_points(n: &mut Need<'_>, from: &str) -> Vec<Point> {
    let mut out = Vec::new();
    let b = n.b;
    if let Some(f) = n.get(from, &["drawdown", "latest"], "the latest drawdown") {
        let (deep, shallow) = (b.at("deep_drawdown"), b.at("shallow_drawdown"));
        let score = if f.value <= deep {
            -1
        } else if f.value >= shallow {
            1
        } else {
            0
        };
        out.push(Point::new(
            "drawdown",
            score,
            format!(
                "{} against the {} % and {} % lines",
                f.cite(),
                shown(deep),
                shown(shallow)
            ),
        ));
    }
    if let Some(f) = n.get(from, &["volatility", "latest"], "the latest volatility") {
        let (high, low) = (b.at("high_volatility"), b.at("low_volatility"));
        let score = if f.value >= high {
            -1
        } else if f.value <= low {
            1
        } else {
            0
        };
        out.push(Point::new(
            "volatility",
            score,
            format!(
                "{} against the {} % and {} % lines",
                f.cite(),
                shown(high),
                shown(low)
            ),
        ));
    }
    if let Some(f) = n.get(from, &["RSI(14)", "latest"], "the latest RSI(14)") {
        let stretched = b.at("overbought_rsi");
        let score = if f.value >= stretched { -1 } else { 0 };
        out.push(Point::new(
            "RSI",
            score,
            format!("{} against the {} line", f.cite(), shown(stretched)),
        ));
    }
    if let Some(f) = n.get(
        from,
        &["rsi_mean_reversion", "Sharpe"],
        "the dip-buying rule's Sharpe",
    ) {
        let paid = b.at("paid_sharpe");
        let score = if f.value < 0.0 {
            -1
        } else if f.value >= paid {
            1
        } else {
            0
        };
        out.push(Point::new(
            "dip buying",
            score,
            format!("{} against the 0 and {} lines", f.cite(), shown(paid)),
        ));
    }
    out
}

/// A side's strongest point in its own direction (the first of the
/// largest), if it has one.
fn strongest(points: &[Point], side: Side) -> Option<&Point> {
    let dir = if side == Side::Bull { 1 } else { -1 };
    let best = points.iter().map(|p| p.score * dir).max()?;
    if best <= 0 {
        return None;
    }
    points.iter().find(|p| p.score * dir == best)
}

/// One side's answer to the other's strongest figure.
pub(super) struct Answer {
    /// The other side's point answered.
    pub target: Point,
    pub text: String,
    pub holds: bool,
}

/// How `side` (whose figures are under `own`) answers the strongest
/// point of the other side (under `other`), by a fixed pairing of topics:
/// a drawdown with the trend rule's own drawdown, volatility with the rule's
/// Sharpe, a stretched RSI with MACD, losing dips with the trend rule; the
/// trend with the latest drawdown, momentum with RSI and volatility, the
/// trend rule with the deepest decline.
pub(super) fn answer(b: &Board, side: Side, own: &str, other: &str) -> Option<Answer> {
    let mut n = Need::new(b);
    let theirs = match side {
        Side::Bull => bear_points(&mut n, other),
        Side::Bear => bull_points(&mut n, other),
    };
    let opposite = if side == Side::Bull {
        Side::Bear
    } else {
        Side::Bull
    };
    let target = strongest(&theirs, opposite)?.clone();
    let (text, holds) = match side {
        Side::Bull => bull_answer(b, target.topic, own, other),
        Side::Bear => bear_answer(b, target.topic, own),
    };
    Some(Answer {
        target,
        text,
        holds,
    })
}

/// The bull's answer to the bear's point on `topic` (docs §14.7).
fn bull_answer(b: &Board, topic: &str, own: &str, other: &str) -> (String, bool) {
    let get = |from: &str, parts: &[&str]| b.get(from, parts);
    match topic {
        "drawdown" => {
            let rule = get(own, &["sma_crossover", "max drawdown"]);
            let deepest = get(other, &["drawdown", "deepest"]);
            match (rule, deepest) {
                (Some(r), Some(d)) => (
                    format!(
                        "following the trend held the loss to {} against the stock's {}",
                        r.cite(),
                        d.cite()
                    ),
                    r.value > d.value,
                ),
                _ => (
                    "the trend rule's max drawdown or the deepest drawdown was not reported".into(),
                    false,
                ),
            }
        }
        "RSI" => match (b.ending(own, " macd"), b.ending(own, " signal")) {
            (Some(m), Some(s)) => (
                format!("momentum still reads {} against {}", m.cite(), s.cite()),
                m.value >= s.value,
            ),
            _ => ("the MACD was not reported".into(), false),
        },
        _ => match get(own, &["sma_crossover", "Sharpe"]) {
            Some(r) => (
                format!(
                    "following the trend rather than buying dips earned {} (it answers if ≥ {})",
                    r.cite(),
                    shown(b.at("paid_sharpe"))
                ),
                r.value >= b.at("paid_sharpe"),
            ),
            None => ("the trend rule's Sharpe was not reported".into(), false),
        },
    }
}

/// The bear's answer to the bull's point on `topic`.
fn bear_answer(b: &Board, topic: &str, own: &str) -> (String, bool) {
    let get = |from: &str, parts: &[&str]| b.get(from, parts);
    match topic {
        "trend" => match get(own, &["drawdown", "latest"]) {
            Some(d) => (
                format!(
                    "the stock still stands {} below its high (it answers if ≤ {} %)",
                    d.cite(),
                    shown(b.at("answer_drawdown"))
                ),
                d.value <= b.at("answer_drawdown"),
            ),
            None => ("the latest drawdown was not reported".into(), false),
        },
        "momentum" => {
            let rsi = get(own, &["RSI(14)", "latest"]);
            let vol = get(own, &["volatility", "latest"]);
            let text = [rsi.map(Fig::cite), vol.map(Fig::cite)]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" and ");
            let (stretched, high) = (b.at("overbought_rsi"), b.at("high_volatility"));
            (
                format!(
                    "momentum comes with {text} (it answers if RSI ≥ {} or volatility ≥ {} %)",
                    shown(stretched),
                    shown(high)
                ),
                rsi.is_some_and(|r| r.value >= stretched) || vol.is_some_and(|v| v.value >= high),
            )
        }
        _ => match get(own, &["drawdown", "deepest"]) {
            Some(d) => (
                format!(
                    "the same period held a decline of {} (it answers if ≤ {} %)",
                    d.cite(),
                    shown(b.at("crash_drawdown"))
                ),
                d.value <= b.at("crash_drawdown"),
            ),
            None => ("the deepest drawdown was not reported".into(), false),
        },
    }
}

fn side_name(side: Side) -> &'static str {
    match side {
        Side::Bull => "bull",
        Side::Bear => "bear",
    }
}

/// "The bull answers the bear's strongest figure, …: holds."
pub(super) fn answer_line(side: Side, a: &Answer) -> String {
    let other = if side == Side::Bull { "bear" } else { "bull" };
    format!(
        "The {} answers the {other}'s strongest figure ({}): {}; the answer {}.",
        side_name(side),
        a.target.line(),
        a.text,
        if a.holds { "holds" } else { "does not hold" }
    )
}

/// A bull or bear researcher's rebuttal task: its own case under
/// `own_case`, the other side's under `bear_case` / `bull_case`.
fn rebuttal_member(b: &Board, side: Side) -> Verdict {
    let other = if side == Side::Bull {
        "bear_case"
    } else {
        "bull_case"
    };
    let heading = format!(
        "Rebuttal: the {} answers the {}",
        side_name(side),
        other.trim_end_matches("_case")
    );
    let rule = "Rule (docs §14.7): the other side's strongest figure is its point that scores furthest in its direction; it is answered with the figure the committee rule pairs with its topic, and the answer holds or not by that rule's line.".to_string();
    match answer(b, side, "own_case", other) {
        Some(a) => Verdict {
            title: heading,
            rule,
            body: vec![format!("- {}", answer_line(side, &a))],
        },
        None => Verdict {
            title: heading,
            rule,
            body: vec![format!(
                "- The {} case has no figure in its own favour to answer.",
                other.trim_end_matches("_case")
            )],
        },
    }
}

/// The risk officer's limits, read from the bear's volatility and
/// drawdown, the bull's close and (when given) the officer's own ATR.
pub(super) struct Limits {
    pub veto: bool,
    pub cap: bool,
    /// How many of the three limits had their figures.
    pub assessed: usize,
    pub lines: Vec<String>,
}

/// Volatility limit: the latest annualized volatility at `veto_volatility`
/// (60 %) vetoes. Drawdown limit: a deepest drawdown at `cap_drawdown`
/// (−50 %) caps the size at half. ATR limit: ATR(14) at `cap_atr_percent`
/// (5 %) of the last close caps the size at half.
pub(super) fn limits(b: &Board, bull: &str, bear: &str, risk: &str) -> Limits {
    let veto = shown(b.at("veto_volatility"));
    let cap_dd = shown(b.at("cap_drawdown"));
    let cap_atr = shown(b.at("cap_atr_percent"));
    let mut l = Limits {
        veto: false,
        cap: false,
        assessed: 0,
        lines: Vec::new(),
    };
    match b.get(bear, &["volatility", "latest"]) {
        Some(v) => {
            l.assessed += 1;
            l.veto = v.value >= b.at("veto_volatility");
            l.lines.push(format!(
                "volatility limit {veto} %: {} → {}",
                v.cite(),
                if l.veto { "veto" } else { "within" }
            ));
        }
        None => l.lines.push(format!(
            "volatility limit {veto} %: not assessed ({})",
            b.missing(bear, "the latest volatility")
        )),
    }
    match b.get(bear, &["drawdown", "deepest"]) {
        Some(d) => {
            l.assessed += 1;
            let hit = d.value <= b.at("cap_drawdown");
            l.cap |= hit;
            l.lines.push(format!(
                "drawdown limit {cap_dd} %: {} → {}",
                d.cite(),
                if hit { "size cap 50 %" } else { "within" }
            ));
        }
        None => l.lines.push(format!(
            "drawdown limit {cap_dd} %: not assessed ({})",
            b.missing(bear, "the deepest drawdown")
        )),
    }
    match (
        b.get(risk, &["ATR(14)", "latest"]),
        b.ending(bull, " close"),
    ) {
        (Some(a), Some(c)) if c.value > 0.0 => {
            l.assessed += 1;
            let share = a.value / c.value * 100.0;
            let hit = share >= b.at("cap_atr_percent");
            l.cap |= hit;
            l.lines.push(format!(
                "ATR limit {cap_atr} % of the close: {} is {share:.2} % of {} → {}",
                a.cite(),
                c.cite(),
                if hit { "size cap 50 %" } else { "within" }
            ));
        }
        _ => l.lines.push(format!(
            "ATR limit {cap_atr} % of the close: not assessed (the ATR(14) or the last close is missing)"
        )),
    }
    l
}

fn limits_word(l: &Limits) -> &'static str {
    if l.assessed == 0 {
        "not assessed"
    } else if l.veto {
        "veto"
    } else if l.cap {
        "size cap 50 %"
    } else {
        "within limits"
    }
}

/// The risk officer's review: the limits, and each side's strongest figure.
fn risk_review(b: &Board) -> Verdict {
    let l = limits(b, "bull_report", "bear_report", OWN);
    let rule = format!(
        "Rule (docs §14.7): the latest annualized volatility at or above {} % vetoes; a deepest drawdown at or below {} %, or an ATR(14) at or above {} % of the last close, caps the size at half a position.",
        shown(b.at("veto_volatility")),
        shown(b.at("cap_drawdown")),
        shown(b.at("cap_atr_percent"))
    );
    if l.assessed == 0 {
        return Verdict::none("Risk limits", &rule, &l.lines);
    }
    let mut body: Vec<String> = l.lines.iter().map(|x| format!("- {x}")).collect();
    let mut n = Need::new(b);
    let bull = bull_points(&mut n, "bull_report");
    let bear = bear_points(&mut n, "bear_report");
    if let Some(p) = strongest(&bull, Side::Bull) {
        body.push(format!("- The bull's strongest figure: {}.", p.line()));
    }
    if let Some(p) = strongest(&bear, Side::Bear) {
        body.push(format!("- The bear's strongest figure: {}.", p.line()));
    }
    Verdict {
        title: format!("Risk limits: {}", limits_word(&l)),
        rule,
        body,
    }
}

/// The baseline's stance from buy and hold: Sharpe at `paid_sharpe` (0.5)
/// with a gain is bull, a Sharpe below 0 bear.
fn baseline(n: &mut Need<'_>) -> Option<(i32, String)> {
    let paid = n.b.at("paid_sharpe");
    let s = n.get(OWN, &["buy_and_hold", "Sharpe"], "the buy-and-hold Sharpe")?;
    let r = n.get(
        OWN,
        &["buy_and_hold", "total return"],
        "the buy-and-hold return",
    )?;
    let score = if s.value >= paid && r.value > 0.0 {
        1
    } else if s.value < 0.0 {
        -1
    } else {
        0
    };
    Some((
        score,
        format!("baseline {score:+}: {} with {}", s.cite(), r.cite()),
    ))
}

/// The points left after the other side's answer: an answer that holds
/// strikes the point it answered.
fn struck(points: Vec<Point>, answer: Option<&Answer>) -> Vec<Point> {
    let hit = answer.filter(|a| a.holds).map(|a| a.target.topic);
    points
        .into_iter()
        .map(|mut p| {
            if Some(p.topic) == hit {
                p.text.push_str(" [struck: answered]");
                p.score = 0;
            }
            p
        })
        .collect()
}

/// The investment committee: stances, the vote, the risk limits, the debate.
fn committee(b: &Board) -> Verdict {
    let rule = format!(
        "Rule (docs §14.7): each researcher's stance is the sum of its points (≥ +2 bull, ≤ −2 bear, else neutral; a point the other side answered is struck), the baseline's is buy and hold (Sharpe ≥ {} with a gain: bull; below 0: bear); a net vote of +2 or more is buy, −2 or less avoid, else hold; the risk officer's volatility limit vetoes (avoid) and its drawdown and ATR limits cap a buy at half a position. A stance needs two points; the vote needs two stances. Research by rule, not advice.",
        shown(b.at("paid_sharpe"))
    );
    let mut n = Need::new(b);
    let bull_answer = answer(b, Side::Bull, "bull_report", "bear_report");
    let bear_answer = answer(b, Side::Bear, "bear_report", "bull_report");
    let bull = struck(bull_points(&mut n, "bull_report"), bear_answer.as_ref());
    let bear = struck(bear_points(&mut n, "bear_report"), bull_answer.as_ref());
    let base = baseline(&mut n);
    let mut rows = vec![
        "| member | stance | score | rests on |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    let mut votes: Vec<&'static str> = Vec::new();
    for (who, pts) in [
        ("Bull-side Researcher (`bull_report`)", &bull),
        ("Bear-side Researcher (`bear_report`)", &bear),
    ] {
        if pts.len() >= 2 {
            let sum: i32 = pts.iter().map(|p| p.score).sum();
            let lines: Vec<String> = pts.iter().map(Point::line).collect();
            rows.push(format!(
                "| {who} | {} | {sum:+} | {} |",
                stance(sum),
                lines.join("; ")
            ));
            votes.push(stance(sum));
        } else {
            rows.push(format!(
                "| {who} | abstains | n/a | fewer than two of its figures |"
            ));
        }
    }
    if let Some((score, text)) = &base {
        let st = stance(score * 2);
        rows.push(format!(
            "| Portfolio Manager's baseline (`own`) | {st} | {score:+} | {text} |"
        ));
        votes.push(st);
    }
    if votes.len() < 2 {
        let mut why = vec![format!("only {} of 3 stances could be taken", votes.len())];
        why.extend(n.reasons());
        return Verdict::none("Decision", &rule, &why);
    }
    let net: i32 = votes
        .iter()
        .map(|s| match *s {
            "bull" => 1,
            "bear" => -1,
            _ => 0,
        })
        .sum();
    let l = limits(b, "bull_report", "bear_report", "risk_review");
    let mut decision = if net >= 2 {
        "buy"
    } else if net <= -2 {
        "avoid"
    } else {
        "hold"
    }
    .to_string();
    if l.veto {
        decision = "avoid (risk veto)".into();
    } else if l.cap && decision == "buy" {
        decision = "buy, capped at half a position".into();
    }
    let count = |w: &str| votes.iter().filter(|s| **s == w).count();
    let mut body = rows;
    body.push(String::new());
    body.push(format!(
        "- Vote: {} bull, {} neutral, {} bear; net {net:+} → {}.",
        count("bull"),
        count("neutral"),
        count("bear"),
        if net >= 2 {
            "buy"
        } else if net <= -2 {
            "avoid"
        } else {
            "hold"
        }
    ));
    body.push(format!(
        "- Risk limits (`risk_review`): {}; → {}.",
        l.lines.join("; "),
        limits_word(&l)
    ));
    for (side, a) in [(Side::Bull, &bull_answer), (Side::Bear, &bear_answer)] {
        if let Some(a) = a {
            body.push(format!("- Debate: {}", answer_line(side, a)));
        }
    }
    Verdict {
        title: format!("Decision: {decision}"),
        rule,
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verdict of `rule` over `b` with the thresholds `given`.
    pub(in crate::planner) fn verdict_by(
        rule: &str,
        given: &[(String, f64)],
        b: &Board,
    ) -> Option<Verdict> {
        let mut b = b.clone();
        b.rule = rule.to_string();
        b.given = given.to_vec();
        verdict(&b)
    }

    const P: &str = "2008-01-01 to 2012-12-31";
    const D: &str = "2012-12-31";

    /// A committee board: a bull with every point for, a bear whose figures
    /// `bear` gives (drawdown latest, volatility, deepest drawdown, dip
    /// Sharpe), the risk officer's ATR and the baseline.
    fn board(bear: [&str; 4]) -> Board {
        let mut b = Board::default();
        for (l, v, d) in [
            ("X close", "110.00", D),
            ("X SMA(50) latest", "100.0000", D),
            ("X MACD(12, 26, 9) macd", "1.5000", D),
            ("X MACD(12, 26, 9) signal", "1.0000", D),
            (
                "X sma_crossover(20/50) Sharpe (annualized, rf 0 %)",
                "1.20",
                P,
            ),
            ("X sma_crossover(20/50) max drawdown", "-20.00 %", P),
        ] {
            b.add("bull_report", l, v, d);
        }
        for (l, v, d) in [
            ("X drawdown latest", bear[0], D),
            ("X annualized volatility(20) latest", bear[1], D),
            ("X drawdown deepest", bear[2], "2009-01-20"),
            ("X RSI(14) latest", "55.0000", D),
            (
                "X rsi_mean_reversion(14/30/70) Sharpe (annualized, rf 0 %)",
                bear[3],
                P,
            ),
        ] {
            b.add("bear_report", l, v, d);
        }
        b.add("risk_review", "X ATR(14) latest", "2.0000", D);
        b.add(OWN, "X buy_and_hold Sharpe (annualized, rf 0 %)", "0.80", P);
        b.add(OWN, "X buy_and_hold total return", "90.00 %", P);
        b
    }

    fn decide(b: &Board) -> String {
        verdict_by("committee", &[], b).unwrap().render()
    }

    #[test]
    fn every_named_rule_is_one_the_planner_has() {
        for rule in crate::model::team_rules::RULES {
            assert!(verdict_by(rule, &[], &Board::default()).is_some(), "{rule}");
        }
    }

    #[test]
    fn the_macro_rule_reads_its_gap_from_the_line_else_its_default() {
        let mut b = Board::default();
        for (key, v) in [
            ("hiking", "0.90"),
            ("easing", "0.10"),
            ("zero_rates", "0.50"),
        ] {
            b.add(key, "X buy_and_hold Sharpe (annualized, rf 0 %)", v, P);
        }
        let title = |given: &[(String, f64)]| verdict_by("macro_regimes", given, &b).unwrap().title;
        // A gap of 0.80: under the default 1.0, over a preset's 0.5.
        assert_eq!(title(&[]), "Decision: not clearly rate-regime-sensitive");
        let given = [("min_sharpe_gap".to_string(), 0.5)];
        assert!(title(&given).starts_with("Decision: rate-regime-sensitive"));
        let text = verdict_by("macro_regimes", &given, &b).unwrap().render();
        assert!(text.contains("differ by 0.5 or more"), "{text}");
    }

    #[test]
    fn a_bull_vote_buys_and_a_deep_drawdown_caps_it() {
        // Bear: drawdown −2 % (+1), volatility 30 % (0), RSI 55 (0), dips 0.6 (+1):
        // a bull too. Three bulls: net +3, buy; deepest −55 % caps it.
        let text = decide(&board(["-2.00 %", "30.00 %", "-55.00 %", "0.60"]));
        assert!(
            text.starts_with("## Decision: buy, capped at half a position\n"),
            "{text}"
        );
        assert!(
            text.contains("- Vote: 3 bull, 0 neutral, 0 bear; net +3 → buy."),
            "{text}"
        );
        assert!(
            text.contains(
                "X drawdown deepest -55.00 % (`bear_report`, 2009-01-20) → size cap 50 %"
            )
        );
        assert!(
            text.contains("| Bull-side Researcher (`bull_report`) | bull | +3 |"),
            "{text}"
        );
        // The bear had no point against: nothing for the bull to answer.
        assert!(!text.contains("The bull answers"), "{text}");
        assert!(
            text.contains("The bear answers the bull's strongest figure (trend +1: X close 110.00")
        );
    }

    #[test]
    fn the_committee_decides_and_states_its_rule_at_the_lines_given() {
        let b = board(["-30.00 %", "65.00 %", "-40.00 %", "-0.20"]);
        let at_default = verdict_by("committee", &[], &b).unwrap().render();
        assert!(at_default.contains("volatility limit 60 %"), "{at_default}");
        assert!(at_default.starts_with("## Decision: avoid (risk veto)\n"));
        // The preset's veto at 70 %: 65 % no longer vetoes, and every line
        // that states the limit says 70.
        let given = [("veto_volatility".to_string(), 70.0)];
        let text = verdict_by("committee", &given, &b).unwrap().render();
        assert!(!text.contains("risk veto"), "{text}");
        assert!(text.contains("volatility limit 70 %: "), "{text}");
        assert!(!text.contains("60 %"), "{text}");
        // A drawdown line moved past the bear's −30 %: no longer a point against.
        let given = [("deep_drawdown".to_string(), -35.0)];
        let text = verdict_by("committee", &given, &b).unwrap().render();
        assert!(text.contains("against the −35 % and −5 % lines"), "{text}");
    }

    #[test]
    fn a_volatility_veto_overrides_the_vote_and_answers_strike_points() {
        // Bear: drawdown −30 % (−1), volatility 65 % (−1), dips −0.2 (−1).
        let text = decide(&board(["-30.00 %", "65.00 %", "-40.00 %", "-0.20"]));
        assert!(
            text.starts_with("## Decision: avoid (risk veto)\n"),
            "{text}"
        );
        // The bull answers the drawdown with the rule's −20 % against the
        // stock's −40 %: it holds, and the bear's drawdown point is struck.
        assert!(
            text.contains(
                "following the trend held the loss to X sma_crossover(20/50) max drawdown -20.00 %"
            ),
            "{text}"
        );
        assert!(text.contains("[struck: answered]"), "{text}");
        assert!(
            text.contains("| Bear-side Researcher (`bear_report`) | bear | -2 |"),
            "{text}"
        );
    }

    #[test]
    fn too_few_figures_is_no_decision_and_says_why() {
        let mut b = Board::default();
        b.add(
            "bear_report",
            "technical_indicator failed",
            "no data for ZZZ",
            "",
        );
        b.add(OWN, "X buy_and_hold Sharpe (annualized, rf 0 %)", "0.80", P);
        b.add(OWN, "X buy_and_hold total return", "90.00 %", P);
        let text = decide(&b);
        assert!(text.starts_with("## Decision: no decision\n"), "{text}");
        assert!(
            text.contains("only 1 of 3 stances could be taken"),
            "{text}"
        );
        assert!(text.contains("missing from `bear_report` (a tool call failed: technical_indicator: no data for ZZZ)"), "{text}");
        // A rule the planner does not have gives no verdict at all.
        assert!(verdict_by("vibes", &[], &b).is_none());
    }

    #[test]
    fn the_quant_desk_keeps_the_rule_that_survived_out_of_sample() {
        let mut b = Board::default();
        let is = "2005-01-01 to 2010-12-31";
        let oos = "2011-01-01 to 2013-02-28";
        b.add(
            "trend",
            "X sma_crossover(20/50) Sharpe (annualized, rf 0 %)",
            "0.90",
            is,
        );
        b.add(
            "trend",
            "X ema_crossover(12/26) Sharpe (annualized, rf 0 %)",
            "1.40",
            is,
        );
        b.add(
            "reversion",
            "X rsi_mean_reversion(14/30/70) Sharpe (annualized, rf 0 %)",
            "1.50",
            is,
        );
        b.add(
            "validation",
            "X sma_crossover(20/50) Sharpe (annualized, rf 0 %)",
            "0.60",
            oos,
        );
        b.add(
            "validation",
            "X rsi_mean_reversion(14/30/70) Sharpe (annualized, rf 0 %)",
            "0.70",
            oos,
        );
        let text = verdict_by("quant_desk", &[], &b).unwrap().render();
        // 0.60 ≥ 0.5 and ≥ half of 0.90: survives; 0.70 < half of 1.50: does not.
        assert!(
            text.starts_with(
                "## Decision: X sma_crossover(20/50) earned its place (out-of-sample Sharpe 0.60)\n"
            ),
            "{text}"
        );
        assert!(text.contains(&format!("In-sample backtests, {is}, ranked by Sharpe (annualized, rf 0 %):\n\n1. X rsi_mean_reversion(14/30/70) 1.50 (`reversion`)\n2. X ema_crossover(12/26) 1.40 (`trend`)\n3. X sma_crossover(20/50) 0.90 (`trend`)\n")), "{text}");
        assert!(text.contains(&format!("Out-of-sample backtests, {oos}, ranked by Sharpe (annualized, rf 0 %):\n\n1. X rsi_mean_reversion(14/30/70) 0.70 (`validation`)\n2. X sma_crossover(20/50) 0.60 (`validation`)\n")), "{text}");
        assert!(text.contains("| X rsi_mean_reversion(14/30/70) | 1.50 (`reversion`) | 0.70 (`validation`) | 47 % | no |"), "{text}");
        assert!(
            text.contains("- Not validated out of sample: X ema_crossover(12/26)"),
            "{text}"
        );
    }
}
