//! The approval policy (docs §2.14): one rule for every tool, by the
//! [`Access`] its capabilities declare. The mode says which calls run
//! freely, which ask the user, and which are refused; headless runs have
//! no one to ask, so a call that would ask is refused with a result that
//! says how to allow it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::Caps;
pub use super::authorize::ApprovalRecord;
use super::authorize::{AuthCall, Authorizer, Denial, Verdict};
use super::manifest::Access;
pub use crate::model::approval::{ApprovalMode, Decision, UnknownMode};

/// What a mode does with one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Free,
    Ask,
    Refuse,
}

/// What `mode` does with a call touching `access`.
pub const fn need(mode: ApprovalMode, access: Access) -> Need {
    if access.is_read() {
        return Need::Free;
    }
    match mode {
        ApprovalMode::FullAuto => Need::Free,
        ApprovalMode::ReadOnly => Need::Refuse,
        ApprovalMode::AutoEdit if matches!(access, Access::WorkspaceWrite) => Need::Free,
        ApprovalMode::AutoEdit | ApprovalMode::Ask => Need::Ask,
    }
}

/// The modes that would let `access` run unasked, for a refusal's hint.
fn allowing(access: Access) -> &'static str {
    match access {
        Access::WorkspaceWrite => "--approval auto-edit or full-auto, or --yes",
        _ => "--approval full-auto or --yes",
    }
}

/// The user's answer to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Yes,
    /// Yes to this tool and target for the rest of the session.
    YesForSession,
    /// No, with the reason the user gave, if any.
    No(Option<String>),
}

/// A call waiting for the user: what it will do, and where the answer
/// goes. Dropping `reply` unanswered counts as no.
#[derive(Debug)]
pub struct ApprovalRequest {
    pub tool: String,
    pub target: String,
    pub access: Access,
    pub mode: ApprovalMode,
    /// What the call will do, as lines to show (a diff, a command, …).
    pub preview: Vec<String>,
    pub reply: oneshot::Sender<Answer>,
}

/// Where requests go: the workstation's overlay.
pub type Asker = mpsc::UnboundedSender<ApprovalRequest>;

/// The policy of one session: its mode (which `/approval` changes), the
/// session's grants, and who answers when a call asks.
pub struct ApprovalPolicy {
    mode: Mutex<ApprovalMode>,
    granted: Mutex<HashSet<(String, String)>>,
    asker: Option<Asker>,
}

impl ApprovalPolicy {
    /// A policy with no one to ask: a call that would ask is refused.
    pub fn headless(mode: ApprovalMode) -> Arc<Self> {
        Arc::new(ApprovalPolicy {
            mode: Mutex::new(mode),
            granted: Mutex::new(HashSet::new()),
            asker: None,
        })
    }

    /// A policy that asks through `asker`.
    pub fn asking(mode: ApprovalMode, asker: Asker) -> Arc<Self> {
        Arc::new(ApprovalPolicy {
            mode: Mutex::new(mode),
            granted: Mutex::new(HashSet::new()),
            asker: Some(asker),
        })
    }

    pub fn mode(&self) -> ApprovalMode {
        self.mode.lock().map(|m| *m).unwrap_or_default()
    }

    pub fn set_mode(&self, mode: ApprovalMode) {
        if let Ok(mut m) = self.mode.lock() {
            *m = mode;
        }
    }

    fn is_granted(&self, key: &(String, String)) -> bool {
        self.granted.lock().is_ok_and(|g| g.contains(key))
    }

    fn grant(&self, key: (String, String)) {
        if let Ok(mut g) = self.granted.lock() {
            g.insert(key);
        }
    }

    /// The decision without asking anyone, or `None` when the call asks.
    fn settled(&self, tool: &str, caps: Caps, args: &Value) -> Result<Verdict, Need> {
        let access = access_of(caps, tool, args);
        let mode = self.mode();
        let target = target_of(tool, access, args);
        let record = |decision, reason: Option<String>| ApprovalRecord {
            tool: tool.to_string(),
            target: target.clone(),
            access: access.as_str().to_string(),
            decision,
            mode,
            reason,
        };
        match need(mode, access) {
            Need::Free => Ok(Verdict::allowed(record(Decision::Allowed, None))),
            Need::Refuse => {
                let message = format!(
                    "not run: {tool} writes ({}), and the approval mode is read-only; tell the user what you would change, or ask them to rerun with {}",
                    access.as_str(),
                    allowing(access)
                );
                Ok(Verdict::denied(
                    record(Decision::RefusedByMode, Some("read-only".into())),
                    Denial {
                        code: "refused_by_mode".into(),
                        message,
                    },
                ))
            }
            Need::Ask if self.is_granted(&(tool.to_string(), target.clone())) => {
                Ok(Verdict::allowed(record(Decision::AskedYesSession, None)))
            }
            Need::Ask => Err(Need::Ask),
        }
    }

    /// The refusal when a call would ask and no one can answer.
    fn unanswerable(&self, tool: &str, caps: Caps, args: &Value) -> Verdict {
        let access = access_of(caps, tool, args);
        let mode = self.mode();
        let message = format!(
            "not run: {tool} needs approval in mode {mode}; rerun with {}",
            allowing(access)
        );
        Verdict::denied(
            ApprovalRecord {
                tool: tool.to_string(),
                target: target_of(tool, access, args),
                access: access.as_str().to_string(),
                decision: Decision::RefusedByMode,
                mode,
                reason: Some("needs approval; no one to ask (headless)".into()),
            },
            Denial {
                code: "needs_approval".into(),
                message,
            },
        )
    }

    async fn ask(&self, asker: &Asker, call: AuthCall<'_>) -> Verdict {
        let access = access_of(call.caps, call.tool, call.args);
        let mode = self.mode();
        let target = target_of(call.tool, access, call.args);
        let (reply, answer) = oneshot::channel();
        let request = ApprovalRequest {
            tool: call.tool.to_string(),
            target: target.clone(),
            access,
            mode,
            preview: super::approval_preview::preview(call.tool, access, call.args, call.ctx),
            reply,
        };
        let answer = match asker.send(request) {
            Ok(()) => answer.await.unwrap_or(Answer::No(None)),
            Err(_) => return self.unanswerable(call.tool, call.caps, call.args),
        };
        let record = |decision, reason| ApprovalRecord {
            tool: call.tool.to_string(),
            target: target.clone(),
            access: access.as_str().to_string(),
            decision,
            mode,
            reason,
        };
        match answer {
            Answer::Yes => Verdict::allowed(record(Decision::AskedYes, None)),
            Answer::YesForSession => {
                self.grant((call.tool.to_string(), target.clone()));
                Verdict::allowed(record(Decision::AskedYesSession, None))
            }
            Answer::No(reason) => {
                let reason = reason
                    .map(|r| r.trim().to_string())
                    .filter(|r| !r.is_empty());
                let message = match &reason {
                    Some(r) => format!("not run: the user declined this {} call: {r}", call.tool),
                    None => format!(
                        "not run: the user declined this {} call; do not retry it unchanged",
                        call.tool
                    ),
                };
                Verdict::denied(
                    record(Decision::Denied, reason),
                    Denial {
                        code: "denied_by_user".into(),
                        message,
                    },
                )
            }
        }
    }
}

impl Authorizer for ApprovalPolicy {
    /// The decision with no one to ask (a headless run's).
    fn authorize(&self, tool: &str, args: &Value) -> Result<(), Denial> {
        let caps = Caps::WRITES;
        match self.settled(tool, caps, args) {
            Ok(v) => v.result,
            Err(_) => self.unanswerable(tool, caps, args).result,
        }
    }

    fn judge<'a>(&'a self, call: AuthCall<'a>) -> BoxFuture<'a, Verdict> {
        Box::pin(async move {
            match self.settled(call.tool, call.caps, call.args) {
                Ok(v) => v,
                Err(_) => match &self.asker {
                    Some(asker) => self.ask(asker, call).await,
                    None => self.unanswerable(call.tool, call.caps, call.args),
                },
            }
        })
    }
}

/// The call's class: its tool's, except that `remember`'s `recall` action
/// only reads.
pub fn access_of(caps: Caps, tool: &str, args: &Value) -> Access {
    if caps.access == Access::MemoryWrite
        && tool == crate::model::names::REMEMBER
        && args.get("action").and_then(Value::as_str) == Some("recall")
    {
        return Access::Read;
    }
    caps.access
}

/// What a "yes for this session" covers besides the tool: the file, the
/// command, the memory's title.
pub fn target_of(tool: &str, access: Access, args: &Value) -> String {
    let field = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    match access {
        Access::WorkspaceWrite => field("path"),
        Access::Shell => field("command"),
        Access::MemoryWrite => field("title"),
        _ => tool.to_string(),
    }
}
