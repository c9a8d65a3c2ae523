//! Which tools one request is offered (docs §4.7.1): every tool the run may
//! offer is scored against the user's words, lexically (no embedding model
//! to download), and the best fitted under a token budget, the basics
//! always first. A small model's window holds only a few schemas, and the
//! four it used to be offered left option pricing and cointegration out of
//! reach: it then invented the figure.
//!
//! A tool's text is its name's words, its description and, for the tools
//! the offline planner drives, its intent's phrases (`reads`, `examples`);
//! an intent that reads the request as a call for its tool is the strongest
//! sign there is, and the tool the planner would route it to stronger still.

use std::collections::{BTreeMap, BTreeSet};

use super::config::LoopConfig;
use crate::llm::tokens::Estimator;
use crate::model::names;
use crate::planner::intents::INTENTS;
use crate::tools::Registry;

/// Offered to every chosen set: prices and indicators (returns,
/// volatility, drawdown, correlation…) answer most plain questions. The
/// backtest and `remember` join when the request asks for them
/// ("backtest", "strategy", "Sharpe of"; "remember", "prefer"), which their
/// intents and words score: with them always in, an 8 192-token window had
/// no room left for `stat_test` or `option_price` under the first-request
/// target. A memory the user saved is recalled into the message anyway
/// (§4.2).
pub const BASICS: [&str; 2] = [names::GET_MARKET_DATA, names::TECHNICAL_INDICATOR];

/// Most tools a chosen set offers: more schemas cost a small model both
/// window and attention (the 1.5B model picked the wrong one of many).
pub const MAX_CHOSEN: usize = 6;

/// The first request a chosen set aims under, in estimated tokens: 2 500
/// by the server's count, less the ~330 tokens llama.cpp's chat template
/// adds around the tool schemas (measured: 1 745 estimated, 2 071 counted).
pub const FIRST_REQUEST_TOKENS: u64 = 2_100;

/// Tokens kept free for the model's reply when nothing says how long it
/// may be.
pub const ANSWER_ROOM: u64 = 1_024;

/// Least score a tool beyond the basics needs to be chosen: one matching
/// word that at most three tools share, or any intent that reads the
/// request.
const MIN_SCORE: f64 = 2.0;

/// An intent reads the request as a call for its tool.
const READ_BONUS: f64 = 8.0;
/// The planner routes the request to the tool (the first intent that
/// reads it, §2.13).
const ROUTE_BONUS: f64 = 6.0;

/// Weights of a word found in a tool's name, its intent's phrases, its
/// description.
const NAME_WEIGHT: f64 = 3.0;
const PHRASE_WEIGHT: f64 = 2.0;
const DESCRIPTION_WEIGHT: f64 = 1.0;

/// Words that say nothing about which tool is meant.
const STOPWORDS: &[&str] = &[
    "the", "and", "for", "from", "with", "what", "was", "were", "are", "is", "its", "this", "that",
    "these", "those", "there", "their", "then", "than", "into", "over", "under", "during",
    "between", "about", "which", "when", "where", "who", "how", "why", "does", "did", "can",
    "could", "would", "should", "will", "you", "your", "our", "have", "has", "had", "not", "but",
    "all", "any", "each", "per", "via", "use", "using", "give", "show", "tell", "please", "me",
    "of", "on", "in", "to", "at", "by", "an", "or", "as", "be", "it", "if", "so", "do", "my",
    "one", "two", "get", "let", "also", "some", "more", "most", "less", "out", "up", "after",
    "before", "since", "until", "tool", "tools", "call", "calls", "returns", "return", "given",
];

/// One tool's standing for a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranked {
    pub name: String,
    pub score: f64,
    /// Estimated tokens of its schema as the provider sends it.
    pub tokens: u64,
    /// Kept whatever the budget (a basic, or a tool the model asked for).
    pub kept: bool,
}

/// The tools chosen for a request: `offered` (the basics first, then the
/// registry's order), and every candidate ranked best first (what a later
/// shrink drops from).
#[derive(Clone, Debug, Default)]
pub struct Choice {
    pub offered: Vec<String>,
    pub ranked: Vec<Ranked>,
}

impl Choice {
    /// The candidates not offered, best first.
    pub fn held_back(&self) -> Vec<String> {
        self.ranked
            .iter()
            .filter(|r| !self.offered.contains(&r.name))
            .map(|r| r.name.clone())
            .collect()
    }

    /// Estimated tokens of the offered schemas.
    pub fn tokens(&self) -> u64 {
        self.ranked
            .iter()
            .filter(|r| self.offered.contains(&r.name))
            .map(|r| r.tokens)
            .sum()
    }

    /// Offers `names` too (they are candidates not offered), kept from
    /// now on; returns the ones added.
    pub fn add(&mut self, wanted: &[String], order: &Registry) -> Vec<String> {
        let mut added = Vec::new();
        for name in wanted {
            if self.offered.contains(name) || added.contains(name) {
                continue;
            }
            if let Some(r) = self.ranked.iter_mut().find(|r| &r.name == name) {
                r.kept = true;
                added.push(name.clone());
            }
        }
        if !added.is_empty() {
            self.offered.extend(added.iter().cloned());
            self.sort_by(order);
        }
        added
    }

    /// Drops the lowest-ranked offered tool that is not kept; `None` when
    /// only kept ones are left.
    pub fn drop_lowest(&mut self) -> Option<String> {
        let name = self
            .ranked
            .iter()
            .rev()
            .find(|r| !r.kept && self.offered.contains(&r.name))?
            .name
            .clone();
        self.offered.retain(|n| *n != name);
        Some(name)
    }

    fn sort_by(&mut self, order: &Registry) {
        let position: BTreeMap<&str, usize> = order
            .names()
            .into_iter()
            .enumerate()
            .map(|(i, n)| (n, i))
            .collect();
        // The basics first, in a fixed order: they are in every request, so
        // the prompt's schemas share their longest prefix from one request
        // to the next and a local server's prefix cache skips re-reading
        // them (prompt processing is most of a small model's time).
        self.offered.sort_by_key(|n| {
            let basic = BASICS.iter().position(|b| *b == n.as_str());
            (
                basic.is_none(),
                basic.unwrap_or(0),
                position.get(n.as_str()).copied().unwrap_or(usize::MAX),
            )
        });
    }
}

/// How much a chosen set may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Estimated tokens of the offered schemas together.
    pub tokens: u64,
    /// Most tools offered.
    pub max_tools: usize,
    /// Only tools that match the request join the basics (a chosen set);
    /// otherwise every tool is a candidate, best first (a set cut to fit).
    pub matching_only: bool,
}

/// The most a request may hold in a window of `window` tokens, leaving
/// room for the answer ([`ANSWER_ROOM`], at most a quarter of the window).
pub fn request_limit(window: u64) -> u64 {
    window.saturating_sub(ANSWER_ROOM.min(window / 4))
}

/// Why a run's tools were chosen, as its `tools_chosen` record says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Chosen for the request (a local preset, docs §4.7.1).
    Request,
    /// The tools named (or all) would not fit the window: cut to fit.
    Window,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Request => "request",
            Reason::Window => "window",
        }
    }
}

/// What a run's tool schemas may use, or `None` when it offers every
/// candidate. `fixed` is the first request's other tokens (the system
/// prompt, the user's message, the note naming the others); `all` the
/// schemas of every candidate. A chosen set keeps the first request under
/// [`FIRST_REQUEST_TOKENS`]; a named set (or all) that would not fit the
/// window with room for the answer is cut to half the compaction threshold,
/// so the tool results the run brings have room too.
pub fn budget(
    cfg: &LoopConfig,
    window: Option<u64>,
    fixed: u64,
    all: u64,
) -> Option<(Budget, Reason)> {
    if cfg.choose_tools && cfg.tools.is_none() {
        let cap = window.map_or(FIRST_REQUEST_TOKENS, |w| {
            FIRST_REQUEST_TOKENS.min(request_limit(w))
        });
        let budget = Budget {
            tokens: cap.saturating_sub(fixed),
            max_tools: MAX_CHOSEN,
            matching_only: true,
        };
        return Some((budget, Reason::Request));
    }
    let w = window?;
    if fixed.saturating_add(all) <= request_limit(w) {
        return None;
    }
    let cap = request_limit(w).min(cfg.threshold_for(w) / 2);
    let budget = Budget {
        tokens: cap.saturating_sub(fixed),
        max_tools: usize::MAX,
        matching_only: false,
    };
    Some((budget, Reason::Window))
}

/// A run's chosen tools, why, and the schema tokens they could use.
#[derive(Clone, Debug)]
pub struct Fitted {
    pub choice: Choice,
    pub reason: Reason,
    pub budget: u64,
}

/// The tools of `available` a run with `request` offers, when it chooses
/// or the set would not fit `window` (docs §4.7.1); `None` offers them all.
/// `fixed` counts the first request's other tokens offering a registry,
/// given the note naming the tools held back (asked with every name, the
/// most it can be). `load_skill` brings the skill catalogue into the
/// system prompt (§4.5), so its cost is its schema and the catalogue.
pub fn fit(
    cfg: &LoopConfig,
    window: Option<u64>,
    available: &Registry,
    request: &str,
    estimator: &Estimator,
    fixed: impl Fn(&Registry, Option<&str>) -> u64,
) -> Option<Fitted> {
    let every: Vec<String> = available.names().into_iter().map(String::from).collect();
    let note = others_note(&every);
    let without: Vec<String> = every
        .iter()
        .filter(|n| *n != names::LOAD_SKILL)
        .cloned()
        .collect();
    let base = fixed(&available.subset(&without).0, note.as_deref());
    let catalogue = fixed(available, note.as_deref()).saturating_sub(base);
    let mut ranked = rank(available, request, estimator);
    for r in ranked.iter_mut().filter(|r| r.name == names::LOAD_SKILL) {
        r.tokens += catalogue;
    }
    let all: u64 = ranked.iter().map(|r| r.tokens).sum();
    let (budget, reason) = budget(cfg, window, base, all)?;
    Some(Fitted {
        choice: pick(available, ranked, budget),
        reason,
        budget: budget.tokens,
    })
}

/// Every candidate offered, ranked for `request`: what a shrink after a
/// context-size error drops from when the run offered them all.
pub fn everything(available: &Registry, request: &str, estimator: &Estimator) -> Choice {
    let all = Budget {
        tokens: u64::MAX,
        max_tools: usize::MAX,
        matching_only: false,
    };
    choose(available, request, all, estimator)
}

/// Ranks every tool of `available` for `request` and offers the basics,
/// then the best of the rest, within `budget`. A basic over the budget is
/// still offered: without it no plain question is answered, and a
/// context-size error then drops what else there is.
pub fn choose(
    available: &Registry,
    request: &str,
    budget: Budget,
    estimator: &Estimator,
) -> Choice {
    pick(available, rank(available, request, estimator), budget)
}

/// The basics of `ranked`, then the best of the rest within `budget`, in
/// `available`'s order.
fn pick(available: &Registry, ranked: Vec<Ranked>, budget: Budget) -> Choice {
    let mut offered: Vec<String> = Vec::new();
    let mut used = 0u64;
    for r in ranked.iter().filter(|r| r.kept) {
        offered.push(r.name.clone());
        used += r.tokens;
    }
    for r in ranked.iter().filter(|r| !r.kept) {
        if offered.len() >= budget.max_tools {
            break;
        }
        if budget.matching_only && r.score < MIN_SCORE {
            break;
        }
        if used + r.tokens <= budget.tokens {
            offered.push(r.name.clone());
            used += r.tokens;
        }
    }
    let mut choice = Choice { offered, ranked };
    choice.sort_by(available);
    choice
}

/// Every tool of `available`, best first: the basics, then by score.
pub fn rank(available: &Registry, request: &str, estimator: &Estimator) -> Vec<Ranked> {
    let wanted = terms(request);
    let texts: Vec<ToolText> = available
        .specs()
        .iter()
        .map(|s| ToolText::of(&s.name, &s.description))
        .collect();
    let idf = inverse_frequency(&texts);
    let reads = reading_tools(request);
    let routed = crate::planner::intent(request).map(|c| c.name);
    let mut ranked: Vec<Ranked> = available
        .specs()
        .iter()
        .zip(&texts)
        .map(|(spec, text)| {
            let mut score = text.score(&wanted, &idf);
            if reads.contains(spec.name.as_str()) {
                score += READ_BONUS;
            }
            if routed.as_deref() == Some(spec.name.as_str()) {
                score += ROUTE_BONUS;
            }
            Ranked {
                name: spec.name.clone(),
                score,
                tokens: estimator.count_text(&spec.to_openai().to_string()),
                kept: BASICS.contains(&spec.name.as_str()),
            }
        })
        .collect();
    // Stable: equal scores keep the registry's order.
    ranked.sort_by(|a, b| b.kept.cmp(&a.kept).then(b.score.total_cmp(&a.score)));
    ranked
}

/// The tools whose intent reads `request` as a call for them.
fn reading_tools(request: &str) -> BTreeSet<&'static str> {
    INTENTS
        .iter()
        .filter(|i| (i.read)(request).is_some())
        .map(|i| i.tool)
        .collect()
}

/// A tool's words, by where they stand.
struct ToolText {
    name: BTreeSet<String>,
    phrases: BTreeSet<String>,
    description: BTreeSet<String>,
}

impl ToolText {
    fn of(name: &str, description: &str) -> Self {
        let phrases = crate::planner::intents::of(name)
            .map(|i| {
                let mut text = i.reads.to_string();
                for e in i.examples {
                    text.push(' ');
                    text.push_str(e);
                }
                terms(&text)
            })
            .unwrap_or_default();
        ToolText {
            name: terms(&name.replace('_', " ")),
            phrases,
            description: terms(description),
        }
    }

    /// The weight of `word` here: the best place it stands.
    fn weight(&self, word: &str) -> f64 {
        if self.name.contains(word) {
            NAME_WEIGHT
        } else if self.phrases.contains(word) {
            PHRASE_WEIGHT
        } else if self.description.contains(word) {
            DESCRIPTION_WEIGHT
        } else {
            0.0
        }
    }

    fn has(&self, word: &str) -> bool {
        self.weight(word) > 0.0
    }

    fn score(&self, wanted: &BTreeSet<String>, idf: &BTreeMap<String, f64>) -> f64 {
        wanted
            .iter()
            .map(|w| self.weight(w) * idf.get(w).copied().unwrap_or(0.0))
            .sum()
    }
}

/// How rare each word is among the tools: a word every tool has ("symbol",
/// "period") tells them apart no better than none.
fn inverse_frequency(texts: &[ToolText]) -> BTreeMap<String, f64> {
    let n = texts.len() as f64;
    let mut words: BTreeSet<&String> = BTreeSet::new();
    for t in texts {
        words.extend(t.name.iter().chain(&t.phrases).chain(&t.description));
    }
    words
        .into_iter()
        .map(|w| {
            let df = texts.iter().filter(|t| t.has(w)).count() as f64;
            (w.clone(), ((n + 1.0) / (df + 0.5)).ln().max(0.0))
        })
        .collect()
}

/// The words of `text` that may tell tools apart: lower case, split on
/// anything not a letter or digit, stop words and one- or two-letter words
/// dropped (but `iv`, `ic`, `es`), each reduced to a rough stem.
pub fn terms(text: &str) -> BTreeSet<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| {
            (w.len() > 2 || matches!(*w, "iv" | "ic" | "es"))
                && !w.chars().all(|c| c.is_ascii_digit())
                && !STOPWORDS.contains(w)
        })
        .map(stem)
        .collect()
}

/// A rough stem, the same for a word's common forms: "volatilities" and
/// "volatility", "tests" and "test", "price", "prices", "priced" and
/// "pricing" (`pric`).
fn stem(word: &str) -> String {
    let cut = |w: &str, suffix: &str| {
        w.strip_suffix(suffix)
            .filter(|rest| rest.chars().count() >= 3)
            .map(str::to_string)
    };
    if let Some(rest) = cut(word, "ies") {
        return format!("{rest}y");
    }
    let single = match cut(word, "s") {
        Some(rest) if !rest.ends_with('s') => rest,
        _ => word.to_string(),
    };
    ["ing", "ed", "e"]
        .iter()
        .find_map(|suffix| cut(&single, suffix))
        .unwrap_or(single)
}

/// The line that names the tools not offered, so the model can ask for
/// one by calling it (docs §4.7.1); `None` when every tool is offered.
pub fn others_note(held_back: &[String]) -> Option<String> {
    if held_back.is_empty() {
        return None;
    }
    Some(format!(
        "Other tools, offered as soon as you call one by name: {}.",
        held_back.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built-in tool, memory included, offered lean as a local
    /// preset offers them.
    fn all_tools(dir: &std::path::Path) -> Registry {
        crate::tools::builtin::testkit::registry(dir, true).leaned()
    }

    fn estimator() -> Estimator {
        Estimator::for_model("qwen2.5-coder-1.5b-instruct")
    }

    fn local_budget() -> Budget {
        Budget {
            tokens: 1_600,
            max_tools: MAX_CHOSEN,
            matching_only: true,
        }
    }

    fn top_scored(reg: &Registry, request: &str) -> String {
        rank(reg, request, &estimator())
            .into_iter()
            .filter(|r| !r.kept)
            .max_by(|a, b| a.score.total_cmp(&b.score))
            .unwrap()
            .name
    }

    #[test]
    fn words_are_lowered_stemmed_and_stripped_of_the_common_ones() {
        let t =
            terms("Is there cointegration between KO and PEP 2010-2015? Engle-Granger p-values");
        for w in ["cointegration", "engl", "granger", "valu", "pep"] {
            assert!(t.contains(w), "{w} in {t:?}");
        }
        for w in ["is", "there", "between", "and", "2010", "2015"] {
            assert!(!t.contains(w), "{w} in {t:?}");
        }
        assert_eq!(stem("volatilities"), "volatility");
        assert_eq!(stem("tests"), "test");
        assert_eq!(stem("stress"), "stress");
        for form in ["price", "prices", "priced", "pricing"] {
            assert_eq!(stem(form), "pric", "{form}");
        }
    }

    #[test]
    fn each_request_ranks_its_own_tool_first() {
        let dir = tempfile::tempdir().unwrap();
        let reg = all_tools(dir.path());
        for (request, tool) in [
            (
                "What is the Black-Scholes price of a 3-month 110 call on AAPL?",
                names::OPTION_PRICE,
            ),
            (
                "Is there cointegration between KO and PEP 2010-2015? Engle-Granger p-value",
                names::STAT_TEST,
            ),
            ("GARCH volatility forecast of SPY", names::VOLATILITY_MODEL),
            (
                "minimum variance portfolio of AAPL, MSFT and JPM",
                names::PORTFOLIO_OPTIMIZE,
            ),
            ("backtest a 20/50 SMA crossover on AAPL", names::BACKTEST),
            ("beta of AAPL to the market factor", names::REGRESSION),
        ] {
            assert_eq!(top_scored(&reg, request), tool, "{request}");
        }
    }

    #[test]
    fn the_chosen_set_holds_the_basics_and_the_tool_asked_for_within_budget() {
        let dir = tempfile::tempdir().unwrap();
        let reg = all_tools(dir.path());
        let est = estimator();
        let choice = choose(
            &reg,
            "Price a 3-month 110 call on AAPL",
            local_budget(),
            &est,
        );
        for tool in [
            names::OPTION_PRICE,
            names::GET_MARKET_DATA,
            names::TECHNICAL_INDICATOR,
        ] {
            assert!(choice.offered.contains(&tool.to_string()), "{choice:?}");
        }
        assert!(choice.offered.len() <= MAX_CHOSEN);
        assert!(choice.tokens() <= local_budget().tokens, "{choice:?}");
        // The basics first, then the registry's order; the rest named for
        // the note.
        let order: Vec<&str> = BASICS
            .into_iter()
            .chain(
                reg.names()
                    .into_iter()
                    .filter(|n| !BASICS.contains(n) && choice.offered.iter().any(|o| o == n)),
            )
            .collect();
        assert_eq!(choice.offered, order);
        let held = choice.held_back();
        assert_eq!(held.len() + choice.offered.len(), reg.len());
        assert!(others_note(&held).unwrap().contains("stat_test"));
        assert!(!choice.offered.contains(&names::STAT_TEST.to_string()));
        // A plain greeting matches nothing: the basics alone.
        let hello = choose(&reg, "hello there", local_budget(), &est);
        assert_eq!(hello.offered, BASICS);
        // A preference to keep brings `remember`.
        let keep = choose(
            &reg,
            "remember that I prefer 10 bp fees",
            local_budget(),
            &est,
        );
        assert!(
            keep.offered.contains(&names::REMEMBER.to_string()),
            "{keep:?}"
        );
    }

    #[test]
    fn a_tight_budget_keeps_the_basics_and_drops_the_rest_lowest_first() {
        let dir = tempfile::tempdir().unwrap();
        let reg = all_tools(dir.path());
        let est = estimator();
        let all = Budget {
            tokens: u64::MAX,
            max_tools: usize::MAX,
            matching_only: false,
        };
        let mut choice = choose(&reg, "Engle-Granger cointegration of KO and PEP", all, &est);
        assert_eq!(
            choice.offered.len(),
            reg.len(),
            "a set cut to fit takes all that fit"
        );
        let before = choice.tokens();
        let first = choice.drop_lowest().unwrap();
        assert_ne!(first, names::STAT_TEST);
        assert!(choice.tokens() < before);
        while choice.drop_lowest().is_some() {}
        assert_eq!(choice.offered.len(), BASICS.len(), "{choice:?}");
        // A tool the model asks for is kept from then on.
        let added = choice.add(&[names::STAT_TEST.to_string(), "nope".to_string()], &reg);
        assert_eq!(added, [names::STAT_TEST]);
        assert_eq!(choice.drop_lowest(), None);
        let tight = Budget {
            tokens: 1,
            ..local_budget()
        };
        let only = choose(&reg, "Engle-Granger cointegration", tight, &est);
        assert_eq!(only.offered.len(), BASICS.len(), "{only:?}");
    }
}
