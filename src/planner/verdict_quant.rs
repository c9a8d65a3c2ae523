//! The options desk's rule (docs §14.7): the head of the desk rates a long
//! at-the-money straddle from the pricer's volatility (the one the price
//! assumes), the volatility analyst's recent realised volatility and the
//! risk manager's stress of the position, citing each figure.

use super::board::Board;
use super::rule::{Need, Verdict};

const RULE: &str = "Rule (docs §14.7): the long straddle is cheap when the latest 20-day realised volatility is at least 1.2 times the volatility its price assumes (the stock has lately moved more than the price pays for), rich at 0.8 times or less, else fair; the 60-day realised volatility confirms when it stands on the same side of the same line. Cheap: long volatility favoured; rich: not favoured; fair: neutral. Both volatilities must be reported. The premium is the most the position can lose; the worst stress result and the move needed to break even are set beside it. Analysis by rule, not advice.";

/// cheap, rich or fair for a ratio of realised to priced volatility.
fn side(ratio: f64) -> &'static str {
    if ratio >= 1.2 {
        "cheap"
    } else if ratio <= 0.8 {
        "rich"
    } else {
        "fair"
    }
}

/// `options_desk`: whether the straddle's price is cheap or rich against
/// the stock's recent moves.
pub(super) fn options_desk(b: &Board) -> Verdict {
    let mut n = Need::new(b);
    let priced = n
        .get(
            "pricing",
            &["call", "volatility priced"],
            "the volatility priced",
        )
        .or_else(|| b.get("stress", &["straddle", "volatility priced"]));
    let short = n.get(
        "volatility",
        &["volatility(20)", "latest"],
        "the latest 20-day volatility",
    );
    let long = b.get("volatility", &["volatility(60)", "latest"]);
    let (Some(p), Some(s)) = (priced, short) else {
        return Verdict::none("Decision", RULE, &n.reasons());
    };
    if p.value <= 0.0 {
        return Verdict::none(
            "Decision",
            RULE,
            &[format!(
                "the volatility priced is not positive: {}",
                p.cite()
            )],
        );
    }
    let ratio = s.value / p.value;
    let word = side(ratio);
    let mut body = vec![format!(
        "- Recent moves against the price: {} over {} = {ratio:.2} → {word}.",
        s.cite(),
        p.cite()
    )];
    if let Some(l) = long {
        let r60 = l.value / p.value;
        let same = side(r60) == word;
        body.push(format!(
            "- The longer window: {} over the same = {r60:.2} → {}.",
            l.cite(),
            if same { "confirms" } else { "does not confirm" }
        ));
    }
    for (parts, what) in [
        (
            &["straddle", "net premium"][..],
            "Premium paid (the most it can lose)",
        ),
        (
            &["straddle", "move to break even"][..],
            "Move needed by expiry",
        ),
        (&["straddle", "worst stress"][..], "Worst stress result"),
        (&["straddle", "vega"][..], "Sensitivity to volatility"),
        (&["99 % ES", "historical"][..], "The stock's daily tail"),
    ] {
        if let Some(f) = b.get("stress", parts) {
            body.push(format!("- {what}: {}.", f.cite()));
        }
    }
    for f in b.all("pricing", &["price ("]) {
        body.push(format!("- Priced: {}.", f.cite()));
    }
    let decision = match word {
        "cheap" => "long volatility favoured (the straddle is cheap against recent moves)",
        "rich" => "long volatility not favoured (the straddle is rich against recent moves)",
        _ => "neutral (the straddle is fairly priced against recent moves)",
    };
    Verdict {
        title: format!("Decision: {decision}"),
        rule: RULE.into(),
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board(priced: &str, v20: &str, v60: &str) -> Board {
        let mut b = Board::default();
        b.add(
            "pricing",
            "IBM call(K 191.55, 0.25 y) volatility priced",
            priced,
            "2012-12-31",
        );
        b.add(
            "pricing",
            "IBM call(K 191.55, 0.25 y) price (Black–Scholes–Merton)",
            "6.1",
            "2012-12-31",
        );
        b.add(
            "volatility",
            "IBM annualized volatility(20) latest",
            v20,
            "2012-12-31",
        );
        b.add(
            "volatility",
            "IBM annualized volatility(60) latest",
            v60,
            "2012-12-31",
        );
        b.add(
            "stress",
            "IBM straddle(K 191.55/191.55, 0.25 y) net premium",
            "12.20",
            "2012-12-31",
        );
        b
    }

    fn decide(b: &Board) -> String {
        options_desk(b).render()
    }

    #[test]
    fn recent_moves_against_the_price_decide() {
        let t = decide(&board("20.00 %", "25.00 %", "26.00 %"));
        assert!(
            t.starts_with("## Decision: long volatility favoured"),
            "{t}"
        );
        assert!(t.contains("= 1.25 → cheap"), "{t}");
        assert!(t.contains("→ confirms"), "{t}");
        assert!(
            t.contains("Premium paid (the most it can lose): IBM straddle"),
            "{t}"
        );
        let t = decide(&board("20.00 %", "15.00 %", "21.00 %"));
        assert!(
            t.starts_with("## Decision: long volatility not favoured"),
            "{t}"
        );
        assert!(t.contains("does not confirm"), "{t}");
        let t = decide(&board("20.00 %", "20.00 %", "20.00 %"));
        assert!(t.starts_with("## Decision: neutral"), "{t}");
    }

    #[test]
    fn without_the_recent_volatility_there_is_no_decision() {
        let mut b = Board::default();
        b.add(
            "pricing",
            "IBM call(K 191.55, 0.25 y) volatility priced",
            "20 %",
            "",
        );
        let t = decide(&b);
        assert!(t.starts_with("## Decision: no decision"), "{t}");
        assert!(
            t.contains("the latest 20-day volatility missing from `volatility`"),
            "{t}"
        );
    }
}
