//! The authorization hook's types (docs §2.14): what an authorizer sees of
//! a call, what it answers, and the decision it reports. Kept apart from
//! the scheduler that asks and the policy that answers, so the two and the
//! event stream that reports decisions all depend on this, not on each
//! other.

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Caps, ToolContext};
use crate::model::approval::{ApprovalMode, Decision};

/// One decision, as the scheduler reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    pub tool: String,
    pub target: String,
    pub access: String,
    pub decision: Decision,
    pub mode: ApprovalMode,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
}

/// A refusal from the authorization hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    pub code: String,
    pub message: String,
}

/// One call as the authorizer sees it.
pub struct AuthCall<'a> {
    pub tool: &'a str,
    pub args: &'a Value,
    pub caps: Caps,
    /// The run's directories (a preview reads the workspace).
    pub ctx: &'a ToolContext,
}

/// An authorizer's answer: whether the call runs, and the decision to
/// report as an `approval` event and trace record (docs §2.14.3).
pub struct Verdict {
    pub result: Result<(), Denial>,
    pub record: Option<ApprovalRecord>,
}

impl Verdict {
    pub fn allowed(record: ApprovalRecord) -> Verdict {
        Verdict {
            result: Ok(()),
            record: Some(record),
        }
    }
    pub fn denied(record: ApprovalRecord, denial: Denial) -> Verdict {
        Verdict {
            result: Err(denial),
            record: Some(record),
        }
    }
}

/// Decides, before a call runs, whether it may run. Every call of a turn is
/// judged before the first batch starts (docs §2.2), so implementations get
/// `&self`; [`Authorizer::judge`] may wait for the user.
pub trait Authorizer: Send + Sync {
    fn authorize(&self, tool: &str, args: &Value) -> Result<(), Denial>;
    /// The decision for one call; by default [`Authorizer::authorize`]'s,
    /// reported by nothing.
    fn judge<'a>(&'a self, call: AuthCall<'a>) -> BoxFuture<'a, Verdict> {
        let result = self.authorize(call.tool, call.args);
        Box::pin(std::future::ready(Verdict {
            result,
            record: None,
        }))
    }
}
