//! The approval modes and decisions (docs §2.14), shared by the policy
//! (`tools::approval`), the configuration, the trace and the workstation.

use serde::{Deserialize, Serialize};

/// How much the user lets the agent do unasked (docs §2.14.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// Reads are free; every write, shell command, memory write and
    /// non-read-only MCP call asks.
    #[default]
    Ask,
    /// Workspace writes are free too; shell, memory and MCP calls ask.
    AutoEdit,
    /// Nothing asks; the sandbox still confines.
    FullAuto,
    /// Writes are refused, never asked.
    ReadOnly,
}

/// A mode name that is not one of the four.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown approval mode '{0}'; the modes are ask, auto-edit, full-auto, read-only")]
pub struct UnknownMode(pub String);

impl std::str::FromStr for ApprovalMode {
    type Err = UnknownMode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ApprovalMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s.trim())
            .ok_or_else(|| UnknownMode(s.to_string()))
    }
}

impl std::fmt::Display for ApprovalMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ApprovalMode {
    pub const ALL: [ApprovalMode; 4] = [
        ApprovalMode::Ask,
        ApprovalMode::AutoEdit,
        ApprovalMode::FullAuto,
        ApprovalMode::ReadOnly,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Ask => "ask",
            ApprovalMode::AutoEdit => "auto-edit",
            ApprovalMode::FullAuto => "full-auto",
            ApprovalMode::ReadOnly => "read-only",
        }
    }

    /// One line on what the mode lets through.
    pub const fn describe(self) -> &'static str {
        match self {
            ApprovalMode::Ask => {
                "reads are free; writes, shell commands, memory writes and outside tools ask"
            }
            ApprovalMode::AutoEdit => {
                "reads and workspace writes are free; shell commands, memory writes and outside tools ask"
            }
            ApprovalMode::FullAuto => "nothing asks; the sandbox still confines",
            ApprovalMode::ReadOnly => "reads only; every write is refused",
        }
    }
}

/// How one call was decided; every decision is an `approval` event and
/// trace record (docs §2.14.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The mode lets it run unasked.
    Allowed,
    /// The user said yes to this call.
    AskedYes,
    /// The user said yes to this tool and target for the session (now or
    /// earlier).
    AskedYesSession,
    /// The user said no.
    Denied,
    /// The mode refuses it, or it would ask and no one can answer.
    RefusedByMode,
}
