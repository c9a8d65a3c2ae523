//! The outside programs some tests need, and the one rule for their
//! absence: the test says so on stderr and passes, unless the matching
//! `VIBEDESK_REQUIRE_*` variable is set (CI installs them and sets it),
//! where it fails. `cargo test --locked` on a fresh machine (Rust and a C
//! compiler only) therefore passes, and CI's second, hidden pass (`.ci/run`)
//! proves that it does.

use std::process::{Command, Stdio};

/// A program (or Python package) outside the project that a test drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outside {
    /// python3 with pandas and numpy: the backtest's `code/signal_engine.py`.
    Pandas,
    /// python3 with the official `mcp` SDK's client: MCP clients of `mcp serve`.
    McpClient,
    /// python3 with the `mcp` SDK's server and `mcp-server-time`: real MCP
    /// servers for vibedesk's client.
    McpPeers,
    /// tmux: the workstation in a real terminal.
    Tmux,
    /// Chromium (Debian's `chromium`): the HTML report in a real browser.
    Browser,
}

impl Outside {
    /// The variable that turns this program's absence into a failure.
    pub fn require_var(self) -> &'static str {
        match self {
            Outside::Pandas => "VIBEDESK_REQUIRE_PANDAS",
            Outside::McpClient | Outside::McpPeers => "VIBEDESK_REQUIRE_MCP",
            Outside::Tmux => "VIBEDESK_REQUIRE_TMUX",
            Outside::Browser => "VIBEDESK_REQUIRE_BROWSER",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Outside::Pandas => "python3 with pandas",
            Outside::McpClient => "python3 with the `mcp` package",
            Outside::McpPeers => "python3 with `mcp` 2.x and `mcp-server-time`",
            Outside::Tmux => "tmux",
            Outside::Browser => "chromium",
        }
    }

    fn found(self) -> bool {
        match self {
            Outside::Pandas => vibedesk::research::backtest::python::probe(None).is_ok(),
            Outside::McpClient => succeeds(
                "python3",
                &["-c", "import mcp.client.stdio, mcp.client.streamable_http"],
            ),
            Outside::McpPeers => {
                succeeds("python3", &["-c", "import mcp.server.mcpserver"])
                    && succeeds("mcp-server-time", &["--help"])
            }
            Outside::Tmux => succeeds("tmux", &["-V"]),
            Outside::Browser => succeeds("chromium", &["--version"]),
        }
    }

    /// Whether the running test can use it; `false` after saying why the
    /// test skips. Where [`Outside::require_var`] is set its absence fails
    /// the test instead.
    pub fn available(self) -> bool {
        if self.found() {
            return true;
        }
        // libtest names each test's thread after the test.
        let thread = std::thread::current();
        let test = thread.name().unwrap_or("a test");
        assert!(
            std::env::var_os(self.require_var()).is_none(),
            "{test}: {} is required here ({} is set); .ci/run installs it",
            self.what(),
            self.require_var()
        );
        eprintln!(
            "SKIPPED {test}: {} is not available (CI installs it)",
            self.what()
        );
        false
    }
}

fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
