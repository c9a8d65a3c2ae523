//! `--demo`: a scripted research session on the real tools
//! (`assets/scripts/demo.json`), for `vibedesk --demo` and `vibedesk run
//! --demo`. It shows what the README promises: a parallel batch of
//! read-only calls, serial writes, a slow call with heartbeats and progress,
//! a command stopped at its timeout, and the context gauge passing L1, L2
//! and L3 with each compaction firing (the demo runs with a small
//! compaction threshold, [`DEMO_TOKEN_THRESHOLD`], so that a short session
//! reaches all three gates).

use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde_json::json;

use crate::llm::scripted::{Exhausted, Script, ScriptedProvider};
use crate::llm::{ChatRequest, ChunkStream, LlmError, Provider};
use crate::model::{Role, names};

/// The bundled demo script: one turn per model call of the session.
pub const DEMO_SCRIPT: &str = include_str!("../../assets/scripts/demo.json");
/// The message `vibedesk run --demo` sends when no `-p` is given.
pub const DEMO_PROMPT: &str = "Study AAPL and MSFT through the 2008 crash: prices, IBM's RSI for comparison, a backtest, and notes in the workspace.";
/// The demo's compaction threshold T (L1 at T/2, L2 at 0.7 T, L3 at T):
/// small, so that the session's few tool results reach every gate.
pub const DEMO_TOKEN_THRESHOLD: u64 = 8_000;
/// The tools the demo offers: those its script calls. The gauge counts
/// the schemas every request carries (docs §3.1), and with every tool
/// offered they alone would pass the demo's gates before its first result.
pub const DEMO_TOOLS: [&str; 7] = [
    names::GET_MARKET_DATA,
    names::TECHNICAL_INDICATOR,
    names::LIST_DIR,
    names::WRITE_FILE,
    names::BASH,
    names::BACKTEST,
    names::READ_ARTIFACT,
];

/// The demo's settings: its threshold and its tools.
pub fn demo_config(config: &mut crate::config::Config) {
    config.agent.token_threshold = DEMO_TOKEN_THRESHOLD;
    config.agent.tools = Some(DEMO_TOOLS.iter().map(|t| t.to_string()).collect());
}

/// The demo's script is ours, not a model's: it writes its notes and runs
/// its commands unasked (full-auto) unless the user named a mode.
pub fn demo_approval(config: &mut crate::config::Config, flags: &super::ApprovalArgs) {
    if flags.mode().is_none() {
        config.agent.approval = crate::model::approval::ApprovalMode::FullAuto;
    }
}

/// What the demo model says to any message after the session's first: the
/// script plays once, and says so rather than replaying it.
pub const DEMO_ENDED: &str = "The scripted demo has ended: it plays one research session, for the first message of the session, and cannot answer questions of its own.\n\nTo ask your own questions, quit (Ctrl-C twice) and start `vibedesk` without `--demo`: with no model configured, the offline planner answers plain requests from the embedded data (\"backtest a 20/50 SMA crossover on AAPL from 2005 to 2012\", \"RSI of IBM\"); `vibedesk doctor` shows how to connect a model.";

/// The demo model's handoff summary when the L3 gate compacts the session.
const DEMO_SUMMARY: &str = "## Summary of the demo session so far\n\n- Task: study AAPL and MSFT through the 2008 crash, with IBM's RSI for comparison, a backtest, and notes in the workspace.\n- Done: fetched AAPL and MSFT daily prices (2008-09 to 2009-03) and IBM's 14-day RSI in one parallel batch; wrote crash-notes.md; ran a slow scan and a command that hit its timeout; backtested a 20/50 SMA crossover on AAPL 2005-2012.\n- Next: read the backtest's results and answer with a table.";

/// The demo as a model: the script's turns in order for a session's first
/// message, a handoff summary whenever compaction asks for one, and
/// [`DEMO_ENDED`] for every later message of the session.
pub struct DemoProvider {
    script: Script,
    /// The next turn of the script.
    next: Mutex<usize>,
}

impl DemoProvider {
    pub fn new() -> Result<Self, LlmError> {
        let script = Script::from_json(DEMO_SCRIPT)?;
        if script.turns.is_empty() {
            return Err(LlmError::Config("the demo script has no turns".into()));
        }
        Ok(DemoProvider {
            script,
            next: Mutex::new(usize::MAX),
        })
    }

    /// The turn that answers `request`.
    fn turn_for(&self, request: &ChatRequest) -> Result<crate::llm::scripted::Turn, LlmError> {
        // Compaction's summary request has no system prompt (docs §3.4).
        if request.messages.first().map(|m| m.role) != Some(Role::System) {
            return one_turn(DEMO_SUMMARY);
        }
        // A new message: the list ends with the user's own text (recalled
        // memories go before it), not a steering note, nor the handoff
        // summary that an L3 compaction leaves last.
        let fresh_prompt = request.messages.last().is_some_and(|m| {
            m.role == Role::User
                && !m.content.trim_start().starts_with("<system>")
                && request
                    .user_request
                    .as_deref()
                    .is_none_or(|p| m.content.ends_with(p))
        });
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        if fresh_prompt {
            // The session's first message plays the script; one that comes
            // after earlier turns (history before it) gets the ended note.
            let first_of_session = request.messages.len() <= 2;
            *next = if first_of_session {
                0
            } else {
                self.script.turns.len()
            };
        }
        match self.script.turns.get(*next) {
            Some(turn) => {
                *next += 1;
                Ok(turn.clone())
            }
            None => one_turn(DEMO_ENDED),
        }
    }
}

/// A turn that says `text`.
fn one_turn(text: &str) -> Result<crate::llm::scripted::Turn, LlmError> {
    let script = Script::from_json(&json!([{"text": text, "chunk_delay_ms": 4}]).to_string())?;
    script
        .turns
        .into_iter()
        .next()
        .ok_or_else(|| LlmError::Config("an empty demo turn".into()))
}

impl Provider for DemoProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn model(&self) -> &str {
        &self.script.model
    }

    /// The script calls built-in tools only: a demo run never waits for
    /// MCP servers (docs §13.2).
    fn calls_offered_tools(&self) -> bool {
        false
    }

    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChunkStream, LlmError>> {
        let turn = match self.turn_for(&request) {
            Ok(t) => t,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        let one = Arc::new(ScriptedProvider::new(Script {
            model: self.script.model.clone(),
            turns: vec![turn],
            on_exhausted: Exhausted::Error,
        }));
        Box::pin(async move { one.stream(request).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Message;

    fn ask(p: &DemoProvider, messages: Vec<Message>) -> Option<String> {
        let user_request = messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User && !m.content.starts_with("<system>"))
            .map(|m| m.content.clone());
        p.turn_for(&ChatRequest {
            messages: messages.into(),
            user_request,
            ..ChatRequest::default()
        })
        .unwrap()
        .text
    }

    #[test]
    fn the_script_plays_once_then_the_demo_says_it_has_ended() {
        let p = DemoProvider::new().unwrap();
        let n = p.script.turns.len();
        let first = vec![Message::system("s"), Message::user("go")];
        assert_eq!(ask(&p, first.clone()), p.script.turns[0].text);
        // Steering continues the script, as does the handoff summary an L3
        // compaction leaves last.
        let steer = vec![Message::system("s"), Message::steering("Continue.")];
        assert_eq!(ask(&p, steer), p.script.turns[1].text);
        let mut compacted = p
            .turn_for(&ChatRequest {
                messages: vec![Message::system("s"), Message::user("## Summary …")].into(),
                user_request: Some("go".into()),
                ..ChatRequest::default()
            })
            .unwrap();
        assert_eq!(compacted.text.take(), p.script.turns[2].text);
        // A summary request gets the summary, without moving the script.
        assert_eq!(
            ask(&p, vec![Message::user("summarise")]).as_deref(),
            Some(DEMO_SUMMARY)
        );
        assert!(n > 2);
        // A later message of the session: the ended note, every time.
        for _ in 0..2 {
            let again = vec![
                Message::system("s"),
                Message::user("go"),
                Message::assistant("## Done"),
                Message::user("and now?"),
            ];
            assert_eq!(ask(&p, again).as_deref(), Some(DEMO_ENDED));
        }
        // A new session's first message plays it again.
        let fresh = vec![Message::system("s"), Message::user("again")];
        assert_eq!(ask(&p, fresh), p.script.turns[0].text);
    }
}
