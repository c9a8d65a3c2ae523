//! The pieces every team rule of docs §14.7 is made of: the [`Verdict`] a
//! reader writes, the [`Point`]s a stance sums, the figures a rule [`Need`]s
//! (and why they were missing), and a ranked list.

use super::board::{Board, Fig, subject};

/// What a reader's rule concluded: a heading, the rule in one paragraph,
/// then its lines (tables or bullets).
pub(super) struct Verdict {
    pub title: String,
    pub rule: String,
    pub body: Vec<String>,
}

impl Verdict {
    pub fn render(&self) -> String {
        let mut out = format!("## {}\n\n{}\n\n", self.title, self.rule);
        for l in &self.body {
            out.push_str(l);
            out.push('\n');
        }
        out.push('\n');
        out
    }

    pub(super) fn none(heading: &str, rule: &str, why: &[String]) -> Verdict {
        Verdict {
            title: format!("{heading}: no decision"),
            rule: rule.to_string(),
            body: vec![format!("- No decision: {}.", why.join("; "))],
        }
    }
}

/// One test of a member's figures: its topic, its score (+1 for the
/// stock, −1 against, 0 neither) and the figures it rests on.
#[derive(Clone, Debug)]
pub(super) struct Point {
    pub topic: &'static str,
    pub score: i32,
    pub text: String,
}

impl Point {
    pub fn new(topic: &'static str, score: i32, text: String) -> Point {
        Point { topic, score, text }
    }

    pub fn line(&self) -> String {
        format!("{} {:+}: {}", self.topic, self.score, self.text)
    }
}

/// Figures looked up for a rule, with what was missing.
pub(super) struct Need<'a> {
    pub b: &'a Board,
    /// (member key, the figure not found).
    missing: Vec<(String, String)>,
    /// Reasons that are not one missing figure.
    pub other: Vec<String>,
}

impl<'a> Need<'a> {
    pub fn new(b: &'a Board) -> Need<'a> {
        Need {
            b,
            missing: Vec::new(),
            other: Vec::new(),
        }
    }

    /// The figure of `from` whose label holds `parts`, or a note of its absence.
    pub fn get(&mut self, from: &str, parts: &[&str], what: &str) -> Option<&'a Fig> {
        let f = self.b.get(from, parts);
        if f.is_none() {
            self.missing.push((from.to_string(), what.to_string()));
        }
        f
    }

    /// The figure of `from` whose label ends with `suffix`.
    pub fn ending(&mut self, from: &str, suffix: &str, what: &str) -> Option<&'a Fig> {
        let f = self.b.ending(from, suffix);
        if f.is_none() {
            self.missing.push((from.to_string(), what.to_string()));
        }
        f
    }

    /// What was missing, one line per member, with the first tool failure
    /// that member reported.
    pub fn reasons(&self) -> Vec<String> {
        let mut members: Vec<&str> = Vec::new();
        for (from, _) in &self.missing {
            if !members.contains(&from.as_str()) {
                members.push(from);
            }
        }
        let mut out: Vec<String> = members
            .iter()
            .map(|m| {
                let whats: Vec<&str> = self
                    .missing
                    .iter()
                    .filter(|(f, _)| f == m)
                    .map(|(_, w)| w.as_str())
                    .collect();
                let failed = self
                    .b
                    .failures
                    .iter()
                    .find(|(k, _)| k == m)
                    .map(|(_, why)| {
                        format!(" (a tool call failed: {})", crate::text::one_line(why, 160))
                    })
                    .unwrap_or_default();
                format!("{} missing from `{m}`{failed}", whats.join(", "))
            })
            .collect();
        out.extend(self.other.iter().cloned());
        out
    }
}

/// A threshold as a rule states it: `0.5`, `−20` (a typographic minus, as
/// the rules' text writes negatives).
pub(super) fn shown(v: f64) -> String {
    format!("{v}").replace('-', "−")
}

/// A member's stance from the sum of its points: ≥ +2 bull, ≤ −2 bear.
pub(super) fn stance(score: i32) -> &'static str {
    if score >= 2 {
        "bull"
    } else if score <= -2 {
        "bear"
    } else {
        "neutral"
    }
}

/// "1. AAPL breakout(20) 1.44 (`breakout`)", best first.
pub(super) fn ranked(figs: &[&Fig], measure: &str) -> Vec<String> {
    let mut v: Vec<&&Fig> = figs.iter().collect();
    v.sort_by(|a, b| b.value.total_cmp(&a.value));
    v.iter()
        .enumerate()
        .map(|(i, f)| {
            format!(
                "{}. {} {} (`{}`)",
                i + 1,
                subject(&f.label, measure),
                f.shown,
                f.from
            )
        })
        .collect()
}
