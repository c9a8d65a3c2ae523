//! The figures a team's reader weighs (docs §14.7): each upstream member's
//! key-figures table (`| figure | value | as of | tool |`, the table an
//! offline member's answer opens with) read into [`Fig`]s under the
//! member's `input_from` key, and the reader's own results under `own`.
//! Only that table is read: a member that quotes other members further
//! down its answer does not make their figures its own.

/// The key of the reader's own results on the board.
pub(super) const OWN: &str = "own";

/// One figure a member reported.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Fig {
    /// The `input_from` key of the member, or [`OWN`].
    pub from: String,
    pub label: String,
    /// The number shown (a percentage as its percent: −23.84 for "-23.84 %").
    pub value: f64,
    /// The value cell as written ("-23.84 %").
    pub shown: String,
    pub as_of: String,
}

impl Fig {
    /// "AAPL SMA(50) latest 72.6577 (`bull_report`, 2012-12-31)".
    pub fn cite(&self) -> String {
        let at = if self.as_of.is_empty() {
            String::new()
        } else {
            format!(", {}", self.as_of)
        };
        format!("{} {} (`{}`{at})", self.label, self.shown, self.from)
    }
}

/// Every member's figures, and the tool failures they reported.
#[derive(Clone, Debug, Default)]
pub(super) struct Board {
    pub figs: Vec<Fig>,
    /// (member key, what failed and why).
    pub failures: Vec<(String, String)>,
    /// The rule deciding, a name of `model::team_rules::RULES`.
    pub rule: String,
    /// The thresholds the rule line gave; the rest are at their defaults.
    pub given: Vec<(String, f64)>,
}

impl Board {
    /// The deciding rule's threshold `name`: the line's value, else the
    /// default (docs §14.7).
    pub fn at(&self, name: &str) -> f64 {
        crate::model::team_rules::threshold(&self.rule, &self.given, name)
    }

    /// Adds the key-figures table of `body` under `from`.
    pub fn read(&mut self, from: &str, body: &str) {
        let mut in_table = false;
        for line in body.lines().map(str::trim) {
            if !line.starts_with('|') {
                if in_table {
                    break;
                }
                continue;
            }
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            if cells == ["figure", "value", "as of", "tool"] {
                in_table = true;
                continue;
            }
            if !in_table || cells.iter().all(|c| c.chars().all(|ch| "-: ".contains(ch))) {
                continue;
            }
            let (Some(label), Some(shown)) = (cells.first(), cells.get(1)) else {
                continue;
            };
            let as_of = cells.get(2).copied().unwrap_or("");
            self.add(from, label, shown, as_of);
        }
    }

    /// One figure (a failure row is kept as a failure).
    pub fn add(&mut self, from: &str, label: &str, shown: &str, as_of: &str) {
        if let Some(tool) = label.strip_suffix(" failed") {
            self.failures
                .push((from.to_string(), format!("{tool}: {shown}")));
            return;
        }
        if let Some(value) = number(shown) {
            self.figs.push(Fig {
                from: from.to_string(),
                label: label.to_string(),
                value,
                shown: shown.to_string(),
                as_of: as_of.to_string(),
            });
        }
    }

    /// The first figure of `from` whose label holds every part (any case).
    pub fn get(&self, from: &str, parts: &[&str]) -> Option<&Fig> {
        self.all(from, parts).into_iter().next()
    }

    /// The first figure of `from` whose label ends with `suffix` (" close"
    /// is the close, not "close change").
    pub fn ending(&self, from: &str, suffix: &str) -> Option<&Fig> {
        self.figs
            .iter()
            .find(|f| f.from == from && f.label.ends_with(suffix))
    }

    /// Every figure of `from` whose label holds every part, in order.
    pub fn all(&self, from: &str, parts: &[&str]) -> Vec<&Fig> {
        self.figs
            .iter()
            .filter(|f| f.from == from && has_all(&f.label, parts))
            .collect()
    }

    /// Why `from` has no figure for `what`: its failures, or that it
    /// reported none.
    pub fn missing(&self, from: &str, what: &str) -> String {
        let failed: Vec<&str> = self
            .failures
            .iter()
            .filter(|(k, _)| k == from)
            .map(|(_, why)| why.as_str())
            .collect();
        match failed.first() {
            Some(why) => format!(
                "{what} is missing from `{from}` (a tool call failed: {})",
                crate::text::one_line(why, 160)
            ),
            None => format!("{what} is missing from `{from}`"),
        }
    }
}

fn has_all(label: &str, parts: &[&str]) -> bool {
    let l = label.to_lowercase();
    parts.iter().all(|p| l.contains(&p.to_lowercase()))
}

/// The number of a value cell: "69.01", "-23.84 %", "4.46 bars"; `None`
/// for a range ("66.08 to 89.16") or text.
pub(super) fn number(shown: &str) -> Option<f64> {
    let s = shown.trim();
    let s = s
        .strip_suffix('%')
        .or_else(|| s.strip_suffix("bars"))
        .unwrap_or(s)
        .trim();
    s.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// The strategy part of a backtest label: "AAPL sma_crossover(20/50)" of
/// "AAPL sma_crossover(20/50) Sharpe (annualized, rf 0 %)".
pub(super) fn subject<'a>(label: &'a str, measure: &str) -> &'a str {
    label
        .find(&format!(" {measure}"))
        .map_or(label, |i| &label[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_key_figures_table_is_read() {
        let body = "## Findings on AAPL\n\n| figure | value | as of | tool |\n|---|---|---|---|\n| AAPL close | 69.01 | 2012-12-31 | get_market_data |\n| AAPL close range | 66.08 to 89.16 | 2012-09-24 to 2012-12-31 | get_market_data |\n| AAPL drawdown deepest | -59.88 % | 2009-01-20 | technical_indicator |\n| backtest failed | no data for ZZZ |  | backtest |\n\n## Detail\n\n| metric | value |\n|---|---|\n| Sharpe | 1.15 |\n";
        let mut b = Board::default();
        b.read("bull_report", body);
        assert_eq!(b.figs.len(), 2, "{:?}", b.figs);
        let dd = b.get("bull_report", &["drawdown", "deepest"]).unwrap();
        assert_eq!(dd.value, -59.88);
        assert_eq!(
            dd.cite(),
            "AAPL drawdown deepest -59.88 % (`bull_report`, 2009-01-20)"
        );
        assert!(
            b.get("bull_report", &["sharpe"]).is_none(),
            "detail rows are not key figures"
        );
        assert!(
            b.missing("bull_report", "Sharpe")
                .contains("no data for ZZZ")
        );
        assert_eq!(number("4.46 bars"), Some(4.46));
        assert_eq!(
            subject(
                "AAPL sma_crossover(20/50) Sharpe (annualized, rf 0 %)",
                "Sharpe"
            ),
            "AAPL sma_crossover(20/50)"
        );
    }
}
