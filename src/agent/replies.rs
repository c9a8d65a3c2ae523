//! Replies that are no answer and replies that run away (docs §1.5,
//! §2.11.2). A small local model sometimes answers a research question with
//! "I need a question to proceed", apologises after its tools gave it the
//! data, or streams invented price rows until the call times out; none of
//! that may pass as `success`, and a runaway is cut while it streams.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

use super::figures::check_figures;

/// Most tokens a local server's reply may take when nothing is configured.
pub const LOCAL_REPLY_TOKENS: u64 = 1_024;

/// The least `max_tokens` sent: a prompt that leaves less room is about to
/// overflow, and the context-size retry (§3.9) sizes the next request again.
pub const MIN_REPLY_TOKENS: u64 = 64;

/// The `max_tokens` of one local reply (docs §2.11.2): at most
/// [`LOCAL_REPLY_TOKENS`], a quarter of the window, and what the window
/// leaves after `prompt` tokens; 1 024 when the window is unknown.
pub fn reply_tokens(window: Option<u64>, prompt: u64) -> u32 {
    let cap = match window {
        None => LOCAL_REPLY_TOKENS,
        Some(w) => LOCAL_REPLY_TOKENS.min(w / 4).min(w.saturating_sub(prompt)),
    };
    u32::try_from(cap.max(MIN_REPLY_TOKENS)).unwrap_or(u32::MAX)
}

/// The same line this many times in one reply is a loop, not an answer.
pub const REPEATED_LINES: u32 = 12;
/// More data rows (CSV- or table-like lines of numbers) than this in one
/// reply is a data dump, not an answer.
pub const DATA_ROWS: u32 = 40;
/// The repeated-text check without line breaks: the last `NEEDLE` chars
/// found `REPEATS` times in the last `RECENT` chars.
const NEEDLE: usize = 64;
const REPEATS: usize = 8;
const RECENT: usize = 4_096;
/// The repeated-text check runs every this many characters.
const CHECK_EVERY: usize = 1_024;
/// Lines shorter than this (blank lines, `---`) are not counted as repeats.
const MIN_LINE: usize = 6;

/// Why a reply was cut while it streamed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cut {
    pub why: String,
    /// The reply opened with the prompt's own text ([`ECHO_OPENINGS`]):
    /// asked again as it was, not told to be short (docs §2.11.2).
    pub echo: bool,
}

/// Openings of a reply that write the prompt back instead of answering:
/// the run's context block a lean prompt puts before the question (§4.3)
/// and a steering note. Measured with the 1.5B model: 2 to 3 of 12 first
/// replies wrote the block and the tool schemas out for 150 s before a
/// call, or with none after it. Not `<tools>`: the model also opens its
/// calls so (`<tools>` then JSON lines, §2.11.1), and cutting that opening
/// cut real calls.
pub const ECHO_OPENINGS: [&str; 2] = ["<run-context>", "[SYSTEM]"];

/// A reply opening with this many characters of the question, as written,
/// writes it back: an answer restates a question in its own words.
pub const QUESTION_HEAD: usize = 32;

/// Watches a reply as it streams, for an echoed prompt, repetition and
/// data rows.
#[derive(Default)]
pub struct RunawayGuard {
    /// The reply's first characters, until its opening is known.
    opening: String,
    opened: bool,
    /// The question's first [`QUESTION_HEAD`] characters.
    question: Option<String>,
    line: String,
    lines: HashMap<String, u32>,
    rows: u32,
    recent: String,
    since_check: usize,
    tripped: Option<String>,
}

impl RunawayGuard {
    /// Takes the next streamed text; why the reply is cut, once, when this
    /// text makes it an echo of the prompt or a runaway.
    pub fn push_cut(&mut self, text: &str) -> Option<Cut> {
        if self.tripped.is_none() && !self.opened {
            self.opening.push_str(text);
            let head = self.opening.trim_start();
            let marks = || {
                ECHO_OPENINGS
                    .iter()
                    .copied()
                    .chain(self.question.as_deref())
            };
            if let Some(mark) = marks().find(|m| head.starts_with(m)) {
                let why = format!(
                    "the reply writes the prompt back (it opens with `{}`)",
                    crate::text::preview(mark, 40)
                );
                self.tripped = Some(why.clone());
                return Some(Cut { why, echo: true });
            }
            // Known once the opening cannot grow into any of them.
            self.opened = !head.is_empty() && !marks().any(|m| m.starts_with(head));
            if self.opened {
                self.opening = String::new();
            }
        }
        self.push(text).map(|why| Cut { why, echo: false })
    }

    /// A guard that also takes a reply opening with the question's own
    /// first words for an echo (a question of at least
    /// [`QUESTION_HEAD`] characters).
    pub fn for_question(question: &str) -> RunawayGuard {
        let q = question.trim_start();
        let question = (q.chars().count() >= QUESTION_HEAD)
            .then(|| q.chars().take(QUESTION_HEAD).collect::<String>());
        RunawayGuard {
            question,
            ..RunawayGuard::default()
        }
    }

    /// Takes the next streamed text; the reason the reply runs away, once,
    /// when this text makes it so.
    pub fn push(&mut self, text: &str) -> Option<String> {
        if self.tripped.is_some() {
            return None;
        }
        for c in text.chars() {
            if c == '\n' {
                let line = std::mem::take(&mut self.line);
                if let Some(why) = self.end_line(line.trim()) {
                    return self.trip(why);
                }
            } else {
                self.line.push(c);
            }
        }
        self.recent.push_str(text);
        self.since_check += text.len();
        if self.recent.len() > 2 * RECENT {
            let cut = self.recent.len() - RECENT;
            let at = (cut..self.recent.len())
                .find(|i| self.recent.is_char_boundary(*i))
                .unwrap_or(0);
            self.recent.drain(..at);
        }
        if self.since_check >= CHECK_EVERY {
            self.since_check = 0;
            if repeats_itself(&self.recent) {
                return self.trip(format!(
                    "the reply repeats the same text over and over (the same {NEEDLE} characters {REPEATS} times or more)"
                ));
            }
        }
        None
    }

    fn trip(&mut self, why: String) -> Option<String> {
        self.tripped = Some(why.clone());
        Some(why)
    }

    fn end_line(&mut self, line: &str) -> Option<String> {
        if is_data_row(line) {
            self.rows += 1;
            if self.rows > DATA_ROWS {
                return Some(format!(
                    "the reply streams data rows (more than {DATA_ROWS} table or CSV lines)"
                ));
            }
        }
        if line.chars().count() < MIN_LINE {
            return None;
        }
        let n = self.lines.entry(line.to_string()).or_insert(0);
        *n += 1;
        (*n >= REPEATED_LINES).then(|| {
            format!(
                "the reply repeats the line {:?} {REPEATED_LINES} times",
                crate::text::preview(line, 60)
            )
        })
    }
}

/// The last [`NEEDLE`] characters of `recent` occur [`REPEATS`] times in it.
fn repeats_itself(recent: &str) -> bool {
    let chars = recent.chars().count();
    if chars < NEEDLE * REPEATS {
        return false;
    }
    let needle: String = recent.chars().skip(chars - NEEDLE).collect();
    if needle.trim().is_empty() {
        return false;
    }
    recent.matches(needle.as_str()).count() >= REPEATS
}

/// A line of numbers in columns: three fields or more split by `,`, `|`,
/// `;` or a tab (else by spaces, four or more), most of them numbers or
/// dates.
fn is_data_row(line: &str) -> bool {
    let split: Vec<&str> = if line.contains([',', '|', ';', '\t']) {
        line.split([',', '|', ';', '\t'])
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .collect()
    } else {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 4 {
            return false;
        }
        fields
    };
    if split.len() < 3 {
        return false;
    }
    let numeric = split.iter().filter(|f| is_numeric_field(f)).count();
    numeric >= 2 && numeric * 2 >= split.len()
}

fn is_numeric_field(f: &str) -> bool {
    f.chars().any(|c| c.is_ascii_digit())
        && f.chars()
            .all(|c| c.is_ascii_digit() || "+-.:/%$eE ".contains(c))
}

/// Why a reply is not an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NonAnswer {
    /// It asks for the question the user already asked.
    AsksForQuestion,
    /// It apologises or refuses after tools gave it data.
    Refusal,
    /// It repeats the run's context (the `<run-context>` block a lean
    /// prompt puts in the user message, §4.3) or a `[SYSTEM]` note
    /// instead of answering: measured, the 1.5B model once replied with
    /// that block alone.
    EchoesContext,
}

impl NonAnswer {
    pub fn describe(self) -> &'static str {
        match self {
            NonAnswer::AsksForQuestion => "it asks for the question the user already asked",
            NonAnswer::Refusal => "it apologises or refuses although the run's tools returned data",
            NonAnswer::EchoesContext => {
                "it repeats the run's context or a system note instead of answering"
            }
        }
    }
}

/// What only the prompt holds: the run's context block
/// (`agent::context`) and the loop's own steering notes, which start
/// `[SYSTEM]` (measured: asked again after echoing the block, the 1.5B
/// model echoed the steering note).
const CONTEXT_MARKS: [&str; 4] = [
    "<run-context>",
    "</run-context>",
    "Other tools, offered as soon as you call one by name:",
    "[SYSTEM]",
];

/// A reply longer than this is taken to say something.
pub const SHORT_REPLY_CHARS: usize = 300;
/// A prompt of this many words is a request, not a greeting.
const REQUEST_WORDS: usize = 5;

static ASKS_FOR_QUESTION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\bneed (?:a|your|the|more) (?:specific )?(?:question|query|request|details)\b|\b(?:provide|give|ask|share|send)(?: me)? (?:a|your|the)(?: specific)? (?:question|query|request)\b|\bwhat (?:is your question|would you like(?: me)? to|do you want(?: me)? to|can i (?:help|do))\b|\bhow (?:can|may) i (?:help|assist)\b",
    )
    .ok()
});

static REFUSAL: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^\W*(?:i(?:'m| am) sorry|sorry|i apologi[sz]e|my apologies|unfortunately|as an ai|i (?:cannot|can't|can not|am unable|'m unable|am not able|'m not able|do not have|don't have)\b)",
    )
    .ok()
});

/// Whether a short reply without figures fails to answer (docs §1.5): it
/// asks for the question when the prompt was a request or tools ran, or it
/// apologises or refuses after a tool returned data.
pub fn non_answer(
    reply: &str,
    prompt: &str,
    tools_called: bool,
    tool_data: bool,
) -> Option<NonAnswer> {
    let reply = reply.trim();
    // Whatever its length or figures: the block is the prompt's, not an
    // answer (its paths and dates would even ground as figures).
    if CONTEXT_MARKS.iter().any(|m| reply.contains(m)) {
        return Some(NonAnswer::EchoesContext);
    }
    if reply.is_empty()
        || reply.chars().count() > SHORT_REPLY_CHARS
        || check_figures(reply, &[]).figures > 0
    {
        return None;
    }
    let request = tools_called || prompt.split_whitespace().count() >= REQUEST_WORDS;
    let asks = ASKS_FOR_QUESTION
        .as_ref()
        .is_some_and(|re| re.is_match(reply));
    if asks && request {
        return Some(NonAnswer::AsksForQuestion);
    }
    let refuses = REFUSAL.as_ref().is_some_and(|re| re.is_match(reply));
    (refuses && tool_data).then_some(NonAnswer::Refusal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_reply_is_sized_to_the_window() {
        assert_eq!(reply_tokens(None, 2_000), 1_024);
        assert_eq!(reply_tokens(Some(8_192), 2_000), 1_024);
        assert_eq!(reply_tokens(Some(2_048), 500), 512, "a quarter");
        assert_eq!(reply_tokens(Some(4_096), 3_700), 396, "what fits");
        assert_eq!(reply_tokens(Some(4_096), 5_000), 64, "the floor");
    }

    #[test]
    fn data_rows_trip_the_guard_past_the_limit() {
        let mut g = RunawayGuard::default();
        assert_eq!(g.push("Here are the prices:\n"), None);
        let mut tripped_at = None;
        for i in 0..200 {
            let row = format!(
                "2026-01-{:02},{}.4,{}.0,{}.1\n",
                i % 28 + 1,
                120 + i,
                121 + i,
                119 + i
            );
            if let Some(why) = g.push(&row) {
                tripped_at = Some((i, why));
                break;
            }
        }
        let (i, why) = tripped_at.expect("tripped");
        assert_eq!(i, DATA_ROWS as usize, "{why}");
        assert!(why.contains("data rows"), "{why}");
        assert_eq!(g.push("more\n"), None, "once");
    }

    #[test]
    fn a_repeated_line_or_text_trips_the_guard() {
        let mut g = RunawayGuard::default();
        let mut n = 0;
        while g.push("The price is going up.\n").is_none() {
            n += 1;
            assert!(n < 100);
        }
        assert_eq!(n + 1, REPEATED_LINES as usize);
        let mut g = RunawayGuard::default();
        let mut sent = 0;
        let why = loop {
            if let Some(w) = g.push("and the stock went up and then ") {
                break w;
            }
            sent += 1;
            assert!(sent < 1_000);
        };
        assert!(why.contains("repeats"), "{why}");
    }

    #[test]
    fn a_reply_that_opens_with_the_prompt_is_cut_at_once() {
        let mut g = RunawayGuard::default();
        assert_eq!(g.push_cut("\n  <run-"), None, "not known yet");
        let cut = g.push_cut("context>\n## State").expect("cut");
        assert!(cut.echo && cut.why.contains("<run-context>"), "{cut:?}");
        assert_eq!(g.push_cut("- run_dir: /tmp/x\n"), None, "once");
        let mut g = RunawayGuard::default();
        assert!(g.push_cut("[SYSTEM] Only your").is_some_and(|c| c.echo));
    }

    #[test]
    fn a_reply_that_opens_with_the_question_is_cut() {
        let q = "Which of AAPL, MSFT and IBM had the highest 20-day volatility on 2010-12-31?";
        let mut g = RunawayGuard::for_question(q);
        assert_eq!(g.push_cut("Which of AAPL, MSFT "), None, "not known yet");
        assert!(
            g.push_cut("and IBM had the highest")
                .is_some_and(|c| c.echo)
        );
        let mut g = RunawayGuard::for_question(q);
        for c in "Which of the three was most volatile? MSFT, at 41%.".chars() {
            assert_eq!(g.push_cut(&c.to_string()), None);
        }
        // A short question is no mark: "Hello" back is a greeting.
        let mut g = RunawayGuard::for_question("Hello");
        assert_eq!(g.push_cut("Hello! How can I help?"), None);
    }

    #[test]
    fn a_call_or_an_answer_is_not_an_echo() {
        for reply in [
            "<tool_call>\n{\"name\": \"backtest\"}",
            "<tools>\n{\"name\": \"backtest\", \"arguments\": {}}\n</tools>",
            "```json\n{\"name\": \"x\"}\n```",
            "<",
            "AAPL's RSI(14) was 13.31. <run-context> is the prompt's block.",
        ] {
            let mut g = RunawayGuard::default();
            for c in reply.chars() {
                assert_eq!(g.push_cut(&c.to_string()), None, "{reply}");
            }
        }
    }

    #[test]
    fn an_ordinary_answer_with_a_table_does_not_trip() {
        let mut g = RunawayGuard::default();
        let mut text = String::from("| date | close |\n|---|---|\n");
        for i in 0..20 {
            text.push_str(&format!("| 2024-01-{:02} | {}.5 |\n", i + 1, 180 + i));
        }
        text.push_str("AAPL rose over the month; the last close was 199.5.\n\n\n\n");
        assert_eq!(g.push(&text), None);
    }

    #[test]
    fn non_answers_are_recognised_conservatively() {
        let q = "What is the Engle-Granger p-value of AAPL and MSFT over 2020?";
        assert_eq!(
            non_answer(
                "I apologize, but I need a question to proceed.",
                q,
                false,
                false
            ),
            Some(NonAnswer::AsksForQuestion)
        );
        assert_eq!(
            non_answer("How can I help you today?", "hi", false, false),
            None,
            "a greeting may be answered so"
        );
        assert_eq!(
            non_answer("I'm sorry, I cannot help with that.", q, true, true),
            Some(NonAnswer::Refusal)
        );
        assert_eq!(
            non_answer("I'm sorry, I cannot help with that.", q, true, false),
            None,
            "no data: an honest refusal"
        );
        assert_eq!(
            non_answer("Sorry for the delay: the p-value is 0.0312.", q, true, true),
            None,
            "a figure is an answer"
        );
        assert_eq!(
            non_answer(
                "AAPL and MSFT are not cointegrated over 2020.",
                q,
                true,
                true
            ),
            None
        );
    }

    #[test]
    fn an_echo_of_the_run_context_is_no_answer() {
        let q = "Which of AAPL, MSFT and IBM had the highest 20-day volatility on 2010-12-31?";
        let echo = "<run-context> ## State - run_dir: /tmp/x/data/runs/20261207_140623_b9690c - workspace: /tmp/x/ws ## Current Date & Time Today is Monday, December 07, 2026 14:06 UTC. Other tools, offered as soon as you call one by name: sweep, portfolio_optimize";
        assert_eq!(
            non_answer(echo, q, false, false),
            Some(NonAnswer::EchoesContext)
        );
        let steering = "<system>[SYSTEM] The user's request is in their message above; answer it now in plain text, with the figures from the tool results.</system>";
        assert_eq!(
            non_answer(steering, q, true, true),
            Some(NonAnswer::EchoesContext)
        );
        assert_eq!(
            non_answer(
                "MSFT had the highest 20-day volatility, 23.1%.",
                q,
                true,
                true
            ),
            None
        );
    }

    #[test]
    fn regexes_compile() {
        assert!(ASKS_FOR_QUESTION.is_some() && REFUSAL.is_some());
    }
}
