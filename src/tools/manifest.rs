//! What a tool may do, as the rest of the engine reads it (docs §2.1): the
//! capabilities each built-in tool declares beside its name
//! ([`crate::tools::TypedTool::CAPS`]), which the manifest
//! (`tools::builtin::MANIFEST`) lists. The loop's file-write rule, the MCP
//! server's offer and the offline planner's tools read these, never a
//! tool's name.

/// A tool's capabilities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Read-only tools run in parallel batches and are cancelled on
    /// timeout; the others run alone (docs §2.4).
    pub readonly: bool,
    /// A successful call wrote the workspace file its `path` argument
    /// names, which the answer check then expects to be mentioned (docs
    /// §1.3).
    pub writes_files: bool,
    /// Whether and how `vibedesk mcp serve` offers it (docs §13.4).
    pub served: Served,
    /// The offline planner may call it (docs §2.11).
    pub planner: bool,
    /// What it writes stays in the run's own directory (artifacts, logs):
    /// nothing the user owns or later sessions read changes, so a call
    /// written as text may run it (docs §2.11.1).
    pub run_dir_only: bool,
    /// What the approval policy judges it by (docs §2.14).
    pub access: Access,
}

/// What a call touches, as the approval policy reads it (docs §2.14.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Reads only.
    Read,
    /// Writes only the run's own directory (artifacts, logs): nothing the
    /// user owns or later sessions read, so approval treats it as a read.
    RunDir,
    /// Writes the workspace file its `path` argument names.
    WorkspaceWrite,
    /// Runs a shell command (confined by the sandbox).
    Shell,
    /// Writes persistent memory, which later sessions recall.
    MemoryWrite,
    /// Sends something out over the network beyond fetching data.
    Network,
    /// A tool whose effects the engine cannot name: an MCP server's tool
    /// not marked read-only.
    Outside,
}

impl Access {
    /// Free under every approval mode.
    pub const fn is_read(self) -> bool {
        matches!(self, Access::Read | Access::RunDir)
    }

    /// The name events and traces use.
    pub const fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::RunDir => "run_dir",
            Access::WorkspaceWrite => "workspace_write",
            Access::Shell => "shell",
            Access::MemoryWrite => "memory_write",
            Access::Network => "network",
            Access::Outside => "outside",
        }
    }
}

/// How `vibedesk mcp serve` offers a tool (docs §13.4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// Not offered to MCP clients.
    No,
    /// Offered under `name`, when `gate` allows.
    As { name: &'static str, gate: Gate },
}

/// Which of the user's `mcp serve` flags a served tool needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    Always,
    /// `--allow-memory-write`.
    MemoryWrite,
    /// `--allow-sessions`.
    Sessions,
}

impl Caps {
    /// Reads only; not served; not the planner's.
    pub const READ_ONLY: Caps = Caps {
        readonly: true,
        writes_files: false,
        served: Served::No,
        planner: false,
        run_dir_only: false,
        access: Access::Read,
    };
    /// Changes something beyond its result (runs alone, never killed);
    /// what, the engine cannot say until [`Caps::access`] names it.
    pub const WRITES: Caps = Caps {
        readonly: false,
        access: Access::Outside,
        ..Caps::READ_ONLY
    };
    /// Writes the workspace file its `path` argument names.
    pub const WRITES_FILES: Caps = Caps {
        writes_files: true,
        access: Access::WorkspaceWrite,
        ..Caps::WRITES
    };

    /// The same, offered over MCP under `name` (always).
    pub const fn served_as(self, name: &'static str) -> Caps {
        self.served_when(name, Gate::Always)
    }

    /// The same, offered over MCP under `name` when `gate` allows.
    pub const fn served_when(mut self, name: &'static str, gate: Gate) -> Caps {
        self.served = Served::As { name, gate };
        self
    }

    /// The same, callable by the offline planner.
    pub const fn planner(mut self) -> Caps {
        self.planner = true;
        self
    }

    /// The same, its writes confined to the run directory.
    pub const fn run_dir_only(mut self) -> Caps {
        self.run_dir_only = true;
        self.access = Access::RunDir;
        self
    }

    /// The same, touching what `access` names.
    pub const fn access(mut self, access: Access) -> Caps {
        self.access = access;
        self
    }

    /// Whether it changes something that outlasts the run: memory, the
    /// user's files, whatever a shell or an outside server touches. A call
    /// written as text is never run for such a tool (docs §2.11.1).
    pub const fn writes_beyond_the_run(&self) -> bool {
        !self.readonly && !self.run_dir_only
    }

    /// What a tool that declares only [`crate::tools::Tool::readonly`]
    /// may do (an MCP server's tool, say).
    pub const fn of_readonly(readonly: bool) -> Caps {
        if readonly {
            Caps::READ_ONLY
        } else {
            Caps::WRITES
        }
    }

    /// The MCP name, when served.
    pub const fn served_name(&self) -> Option<&'static str> {
        match self.served {
            Served::No => None,
            Served::As { name, .. } => Some(name),
        }
    }
}
