//! Remembered cost preferences (docs §2.13): a memory such as "I use 10 bp
//! commission" sets the commission (or slippage) of every backtest the
//! offline planner runs whose request names none, and the answer says
//! where the figure came from. A cost the request names wins.
//!
//! The planner sees memories two ways, both already in the conversation:
//! the `<recalled-memories>` block in front of the user's message (docs
//! §4.2: full bodies, but only when the request shares words with them)
//! and the persistent-memory snapshot of the system prompt (docs §4.4:
//! every memory's title and description, the newest last). A memory counts
//! as a preference when it speaks for the user ("I", "my", "prefer",
//! "always" …), so a note on what a paper assumed is not taken as one.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};

use super::{Plan, PlannedCall, cost_rates, rate_bp};
use crate::model::names as tool;
use crate::model::{Message, Role};

/// Words that make a memory the user's own preference.
static FIRST_PERSON: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(i|i'm|i've|my|me|we|our|prefer|preferred|always|usually|default)\b").ok()
});

/// The heading the system prompt puts before the memory snapshot.
const SNAPSHOT_HEADING: &str = "## Persistent Memory (cross-session)";

/// One remembered rate and the memory it came from.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Remembered {
    pub rate: f64,
    pub title: String,
}

/// The commission and slippage the user's memories set, if any.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct RememberedCosts {
    pub commission: Option<Remembered>,
    pub slippage: Option<Remembered>,
}

impl RememberedCosts {
    /// From the recalled block of the user's message at `at` (first, in
    /// recall's order), then the snapshot of the system prompt (newest
    /// first).
    pub fn from_messages(messages: &[Message], at: usize) -> Self {
        let mut memories = messages
            .get(at)
            .filter(|m| m.role == Role::User)
            .map(|m| recalled(&m.content))
            .unwrap_or_default();
        if let Some(system) = messages.iter().find(|m| m.role == Role::System) {
            memories.extend(snapshot(&system.content).into_iter().rev());
        }
        let mut out = RememberedCosts::default();
        for (title, text) in memories {
            if !FIRST_PERSON.as_ref().is_some_and(|re| re.is_match(&text)) {
                continue;
            }
            let (commission, slippage) = cost_rates(&text);
            let found = |rate: Option<f64>| {
                rate.map(|rate| Remembered {
                    rate,
                    title: title.clone(),
                })
            };
            out.commission = out.commission.or_else(|| found(commission));
            out.slippage = out.slippage.or_else(|| found(slippage));
        }
        out
    }

    /// Every backtest call of `plan` with the remembered costs where its
    /// config names none.
    pub fn apply(&self, plan: Plan) -> Plan {
        match plan {
            Plan::Call(c) => Plan::Call(self.apply_call(c)),
            Plan::Calls(cs) => Plan::Calls(cs.into_iter().map(|c| self.apply_call(c)).collect()),
            answer => answer,
        }
    }

    fn apply_call(&self, mut call: PlannedCall) -> PlannedCall {
        // A backtest's config, or a sweep's base (docs §18.1).
        let cfg = match call.name.as_str() {
            tool::BACKTEST => call.args.get_mut("config"),
            tool::SWEEP => call.args.get_mut("spec").and_then(|s| s.get_mut("base")),
            _ => None,
        };
        let Some(Value::Object(cfg)) = cfg else {
            return call;
        };
        let sweep = call.name == tool::SWEEP;
        let mut notes = Vec::new();
        for (key, remembered) in [
            ("commission_rate", &self.commission),
            ("slippage", &self.slippage),
        ] {
            if let Some(r) = remembered
                && !cfg.contains_key(key)
            {
                cfg.insert(key.to_string(), json!(r.rate));
                notes.push(format!("{key} from the user's memory '{}'", r.title));
            }
        }
        // A sweep's base is a backtest config without free text.
        if !sweep && !notes.is_empty() && !cfg.contains_key("notes") {
            cfg.insert("notes".into(), json!(notes.join("; ")));
        }
        call
    }

    /// The sentence naming each remembered cost `request` used: those of
    /// a kind it does not name itself.
    pub fn note(&self, request: &str) -> Option<String> {
        let (commission, slippage) = cost_rates(request);
        let used = [
            ("commission", commission.is_none(), &self.commission),
            ("slippage", slippage.is_none(), &self.slippage),
        ];
        let parts: Vec<String> = used
            .iter()
            .filter_map(|(kind, unnamed, r)| {
                let r = r.as_ref().filter(|_| *unnamed)?;
                Some(format!(
                    "{kind} {} from your memory '{}'",
                    rate_bp(r.rate),
                    r.title
                ))
            })
            .collect();
        (!parts.is_empty()).then(|| {
            format!(
                "Costs: {}, since the request names none (name one to use another).",
                parts.join(" and ")
            )
        })
    }

    /// A team member's sentence: its sentences each name their own costs,
    /// so the remembered ones stand where a backtest names none.
    pub fn member_note(&self) -> Option<String> {
        let parts: Vec<String> = [
            ("commission", &self.commission),
            ("slippage", &self.slippage),
        ]
        .iter()
        .filter_map(|(kind, r)| {
            let r = r.as_ref()?;
            Some(format!(
                "{kind} {} from your memory '{}'",
                rate_bp(r.rate),
                r.title
            ))
        })
        .collect();
        (!parts.is_empty()).then(|| {
            format!(
                "Costs: where a backtest here names none, it used {}.",
                parts.join(" and ")
            )
        })
    }
}

/// `(title, text)` of each memory in a `<recalled-memories>` block
/// (`- **title** (type): body`, bodies possibly over several lines).
fn recalled(message: &str) -> Vec<(String, String)> {
    let Some(open) = message.find("<recalled-memories>") else {
        return Vec::new();
    };
    let rest = &message[open + "<recalled-memories>".len()..];
    let block = rest
        .find("</recalled-memories>")
        .map_or(rest, |end| &rest[..end]);
    format!("\n{}", block.trim_start())
        .split("\n- **")
        .filter_map(|entry| {
            let (title, rest) = entry.split_once("** (")?;
            let (_, body) = rest.split_once("): ")?;
            Some((title.trim().to_string(), format!("{title} {body}")))
        })
        .collect()
}

/// `(title, text)` of each line of the system prompt's memory snapshot
/// (`- [title](entries/file) — description`), in its order.
fn snapshot(system: &str) -> Vec<(String, String)> {
    let Some(at) = system.find(SNAPSHOT_HEADING) else {
        return Vec::new();
    };
    system[at + SNAPSHOT_HEADING.len()..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| {
            // A memory the model saved and the user has not kept is
            // listed with its label first (docs §8.3); it is still a
            // memory the planner reads, as recall still shows it.
            let line = l.trim();
            let rest = match line.strip_prefix("- (unconfirmed, written by the model) [") {
                Some(rest) => rest,
                None => line.strip_prefix("- [")?,
            };
            let (title, rest) = rest.split_once("](")?;
            let description = rest.split_once(") — ").map_or("", |(_, d)| d);
            Some((title.to_string(), format!("{title} {description}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn system_with(lines: &str) -> Message {
        Message::system(format!(
            "You are vibedesk.\n{SNAPSHOT_HEADING}\n{lines}\n\n## Tools\n- [not](entries/x.md) — I use 99 bp commission"
        ))
    }

    #[test]
    fn a_snapshot_line_sets_the_cost_and_the_newest_wins() {
        let msgs = vec![
            system_with(
                "- [I use 5 bp commission](entries/a.md) — I use 5 bp commission\n- [Fees](entries/b.md) — I now pay 0.1% commission and 2 bp slippage",
            ),
            Message::user("backtest AAPL"),
        ];
        let c = RememberedCosts::from_messages(&msgs, 1);
        let commission = c.commission.unwrap();
        assert!((commission.rate - 0.001).abs() < 1e-12);
        assert_eq!(commission.title, "Fees");
        assert!((c.slippage.unwrap().rate - 0.0002).abs() < 1e-12);
    }

    #[test]
    fn a_recalled_body_comes_before_the_snapshot_and_others_views_are_not_preferences() {
        let user = "<recalled-memories>\n- **Paper** (reference): The paper assumed 30 bp commission.\n- **Costs** (project): Over the years\nI use 10 bp commission.\n</recalled-memories>\n\nbacktest IBM";
        let msgs = vec![
            system_with("- [Old](entries/a.md) — I use 5 bp commission"),
            Message::user(user),
        ];
        let c = RememberedCosts::from_messages(&msgs, 1);
        assert_eq!(
            c.commission,
            Some(Remembered {
                rate: 0.001,
                title: "Costs".into()
            })
        );
        assert!(c.slippage.is_none());
    }

    #[test]
    fn remembered_costs_fill_only_what_a_backtest_leaves_out_and_are_said() {
        let c = RememberedCosts {
            commission: Some(Remembered {
                rate: 0.001,
                title: "I use 10 bp commission".into(),
            }),
            slippage: None,
        };
        let call = |cfg: Value| PlannedCall {
            name: "backtest".into(),
            args: json!({ "config": cfg }),
        };
        let Plan::Call(got) = c.apply(Plan::Call(call(json!({"codes": ["IBM"]})))) else {
            panic!("a call stays a call");
        };
        assert_eq!(got.args["config"]["commission_rate"], json!(0.001));
        assert!(
            got.args["config"]["notes"]
                .as_str()
                .unwrap()
                .contains("'I use 10 bp commission'")
        );
        assert!(got.args["config"].get("slippage").is_none());
        let named = call(json!({"codes": ["IBM"], "commission_rate": 0.002}));
        let Plan::Call(kept) = c.apply(Plan::Call(named.clone())) else {
            panic!("a call stays a call");
        };
        assert_eq!(kept, named, "a named cost wins");
        let note = c.note("backtest IBM from 2005 to 2012").unwrap();
        assert!(
            note.contains("commission 0.10 % (10 bp) from your memory 'I use 10 bp commission'"),
            "{note}"
        );
        assert!(c.note("backtest IBM with 0.2% commission").is_none());
    }
}
