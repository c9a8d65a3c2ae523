//! The options desk's rule (docs §14.7): the head of the desk rates a long
//! at-the-money straddle from the pricer's volatility (the one the price
//! assumes), the volatility analyst's recent realised volatility and the
//! risk manager's stress of the position, citing each figure.

use super::board::Board;
use super::rule::{Need, Verdict, shown};

/// The rule at the board's thresholds.
fn rule(b: &Board) -> String {
    format!(
        "{RULE_HEAD} Recent moves are above it when the ratio is at least {}, below it at {} or less, else in line;{RULE_TAIL}",
        shown(b.at("above_ratio")),
        shown(b.at("below_ratio"))
    )
}

const RULE_HEAD: &str = "Rule (docs §14.7): it compares two realised volatilities, not realised against implied: the latest 20-day realised volatility against the volatility the straddle was priced at, which offline is the realised volatility of the last 252 daily returns (no implied volatility is known).";

const RULE_TAIL: &str = " the 60-day realised volatility confirms when it stands on the same side of the same line. Above: long volatility favoured; below: not favoured; in line: neutral. It says nothing of whether the market prices the straddle cheap or rich. Both volatilities must be reported. The premium is the most the position can lose; the worst stress result and the move needed to break even are set beside it. Analysis by rule, not advice.";

/// above, below or in line for a ratio of recent realised volatility to
/// the (realised, 252-day) volatility the straddle was priced at.
fn side(b: &Board, ratio: f64) -> &'static str {
    if ratio >= b.at("above_ratio") {
        "above"
    } else if ratio <= b.at("below_ratio") {
        "below"
    } else {
        "in line"
    }
}

/// `options_desk`: the stock's recent realised volatility against the
/// realised volatility its straddle was priced at: two realised
/// volatilities, so no reading of cheap or rich against the market.
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
        return Verdict::none("Decision", &rule(b), &n.reasons());
    };
    if p.value <= 0.0 {
        return Verdict::none(
            "Decision",
            &rule(b),
            &[format!(
                "the volatility priced is not positive: {}",
                p.cite()
            )],
        );
    }
    let ratio = s.value / p.value;
    let word = side(b, ratio);
    let mut body = vec![format!(
        "- Realised 20-day volatility against the volatility priced (realised over 252 days): {} over {} = {ratio:.2} → {word}.",
        s.cite(),
        p.cite()
    )];
    if let Some(l) = long {
        let r60 = l.value / p.value;
        let same = side(b, r60) == word;
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
        "above" => {
            "long volatility favoured (realised 20-day volatility above the realised 252-day volatility the straddle was priced at)"
        }
        "below" => {
            "long volatility not favoured (realised 20-day volatility below the realised 252-day volatility the straddle was priced at)"
        }
        _ => {
            "neutral (realised 20-day volatility in line with the realised 252-day volatility the straddle was priced at)"
        }
    };
    Verdict {
        title: format!("Decision: {decision}"),
        rule: rule(b),
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
        let mut b = b.clone();
        b.rule = "options_desk".into();
        options_desk(&b).render()
    }

    #[test]
    fn recent_moves_against_the_price_decide() {
        let t = decide(&board("20.00 %", "25.00 %", "26.00 %"));
        assert!(
            t.starts_with("## Decision: long volatility favoured"),
            "{t}"
        );
        assert!(t.contains("= 1.25 → above"), "{t}");
        // Two realised volatilities are compared, and said so; neither is
        // called the market's price of the option.
        assert!(
            t.contains("realised 20-day volatility above the realised 252-day volatility the straddle was priced at"),
            "{t}"
        );
        for word in ["cheap", "rich", "fairly priced"] {
            let said = t.replace("cheap or rich", "");
            assert!(!said.contains(word), "{word} in {t}");
        }
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
