//! The full-screen workstation (issue 4). Consumes only `AgentEvent`s and
//! session commands.
