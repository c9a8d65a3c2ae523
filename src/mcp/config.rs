//! `[mcp_servers.NAME]` in `config.toml` (docs §13.1): which MCP servers
//! the session starts, how, and which of their tools the agent may use.
//!
//! A stdio server is a child process (`command`, `args`, `env`); a remote
//! one is a streamable-HTTP `url` with an optional bearer token read from
//! the environment variable `bearer_token_env` (never written in the file).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Default bound on a server's start-up: spawn (or connect), handshake and
/// the tool list (docs §13.2).
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// MCP tools offered per request, all servers together, by default: with
/// vibedesk's own tools (about 20) under the 128 providers commonly take
/// (docs §13.3).
pub const DEFAULT_MAX_TOOLS: usize = 100;
/// Default deadline of one tool call (docs §13.3).
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid TOML: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: [mcp_servers.{name}]: {problem}")]
    Entry {
        path: PathBuf,
        name: String,
        problem: String,
    },
    #[error("{path}: [mcp]: {problem}")]
    Section { path: PathBuf, problem: String },
}

/// The largest `[mcp] max_tools` accepted.
pub const MAX_TOOLS_LIMIT: usize = 1000;

/// `[mcp]`: what holds for all servers together (docs §13.3).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSection {
    max_tools: Option<i64>,
}

/// `[mcp]` and `[mcp_servers]` validated: what `config::Config` holds for
/// the commands that start servers (docs §13.1, §13.3).
#[derive(Clone, Debug, PartialEq)]
pub struct McpSettings {
    /// `[mcp] max_tools`: MCP tools offered per request, all servers
    /// together.
    pub max_tools: usize,
    /// `[mcp_servers.NAME]`, in name order.
    pub servers: Vec<McpServerConfig>,
}

impl Default for McpSettings {
    fn default() -> Self {
        McpSettings {
            max_tools: DEFAULT_MAX_TOOLS,
            servers: Vec::new(),
        }
    }
}

/// `[mcp] max_tools`: MCP tools offered per request, all servers together
/// (0 offers none; at most [`MAX_TOOLS_LIMIT`]).
fn section_max_tools(table: &toml::Table, path: &Path) -> Result<usize, McpConfigError> {
    let problem = |problem: String| McpConfigError::Section {
        path: path.to_path_buf(),
        problem,
    };
    let Some(section) = table.get("mcp") else {
        return Ok(DEFAULT_MAX_TOOLS);
    };
    let raw: RawSection = section
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| problem(e.message().to_string()))?;
    match raw.max_tools {
        None => Ok(DEFAULT_MAX_TOOLS),
        Some(n) => usize::try_from(n)
            .ok()
            .filter(|n| *n <= MAX_TOOLS_LIMIT)
            .ok_or_else(|| {
                problem(format!(
                    "`max_tools` must be a whole number from 0 to {MAX_TOOLS_LIMIT}, got {n}"
                ))
            }),
    }
}

/// How the session reaches one server.
#[derive(Clone, Debug, PartialEq)]
pub enum McpTransport {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Set for the child on top of the sandbox allow-list (docs §6.1).
        env: BTreeMap<String, String>,
    },
    /// Streamable HTTP.
    Http {
        url: String,
        /// The variable holding the bearer token, read at start-up.
        bearer_token_env: Option<String>,
    },
}

/// One validated `[mcp_servers.NAME]` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct McpServerConfig {
    pub name: String,
    pub transport: McpTransport,
    pub startup_timeout: Duration,
    pub tool_timeout: Duration,
    /// Only these tools are offered, when given.
    pub enabled_tools: Option<Vec<String>>,
    /// Never offered, even when enabled.
    pub disabled_tools: Vec<String>,
}

impl McpServerConfig {
    /// Whether the server's tool `tool` joins the registry.
    pub fn offers(&self, tool: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|allow| allow.iter().any(|t| t == tool))
            && !self.disabled_tools.iter().any(|t| t == tool)
    }

    /// `command arg…` or the URL, for listings.
    pub fn target(&self) -> String {
        match &self.transport {
            McpTransport::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            McpTransport::Http { url, .. } => url.clone(),
        }
    }
}

/// The entry as written; unknown keys are refused by name.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    url: Option<String>,
    bearer_token_env: Option<String>,
    startup_timeout_s: Option<f64>,
    tool_timeout_s: Option<f64>,
    enabled_tools: Option<Vec<String>>,
    disabled_tools: Option<Vec<String>>,
}

/// Server names become part of tool names (`mcp__<server>__<tool>`), which
/// model APIs restrict to this alphabet.
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The servers of a config file's text (the tests' way in); `path` names
/// the file in errors.
#[cfg(test)]
fn parse(text: &str, path: &Path) -> Result<McpSettings, McpConfigError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| McpConfigError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    from_table(&table, path)
}

/// `[mcp]` and the servers of a config file already parsed, validated once
/// as `config::Config` loads; `path` names the file in errors.
pub fn from_table(table: &toml::Table, path: &Path) -> Result<McpSettings, McpConfigError> {
    // `[mcp]` is checked with the servers, so a bad value stops the same
    // commands.
    let max_tools = section_max_tools(table, path)?;
    let Some(servers) = table.get("mcp_servers") else {
        return Ok(McpSettings {
            max_tools,
            servers: Vec::new(),
        });
    };
    let entry_error = |name: &str, problem: String| McpConfigError::Entry {
        path: path.to_path_buf(),
        name: name.to_string(),
        problem,
    };
    let Some(servers) = servers.as_table() else {
        return Err(entry_error(
            "*",
            "`mcp_servers` must be a table of [mcp_servers.NAME] sections".into(),
        ));
    };
    let mut out = Vec::with_capacity(servers.len());
    for (name, value) in servers {
        if !valid_server_name(name) {
            return Err(entry_error(
                name,
                "the name may use only letters, digits, '_' and '-' (it becomes part of the tool names mcp__NAME__TOOL)".into(),
            ));
        }
        let raw: RawEntry = value
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| entry_error(name, e.message().to_string()))?;
        out.push(validate(name, raw).map_err(|problem| entry_error(name, problem.to_string()))?);
    }
    Ok(McpSettings {
        max_tools,
        servers: out,
    })
}

/// What is wrong with one `[mcp_servers.NAME]` entry.
#[derive(Debug, thiserror::Error)]
enum EntryProblem {
    #[error("give either `command` (a stdio server) or `url` (streamable HTTP), not both")]
    BothTransports,
    #[error("give `command` (a stdio server) or `url` (a streamable-HTTP server)")]
    NoTransport,
    #[error("`command` is empty")]
    EmptyCommand,
    #[error("`bearer_token_env` applies to `url` servers only")]
    TokenOnStdio,
    #[error("`args` and `env` apply to `command` servers only")]
    ArgsOnHttp,
    #[error("`url` must start with http:// or https://, got {0:?}")]
    BadUrl(String),
    #[error("`{key}` must be a number of seconds above 0 and at most 86400, got {value}")]
    BadSeconds { key: &'static str, value: f64 },
}

fn validate(name: &str, raw: RawEntry) -> Result<McpServerConfig, EntryProblem> {
    let transport = match (raw.command, raw.url) {
        (Some(_), Some(_)) => {
            return Err(EntryProblem::BothTransports);
        }
        (None, None) => {
            return Err(EntryProblem::NoTransport);
        }
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(EntryProblem::EmptyCommand);
            }
            if raw.bearer_token_env.is_some() {
                return Err(EntryProblem::TokenOnStdio);
            }
            McpTransport::Stdio {
                command,
                args: raw.args.unwrap_or_default(),
                env: raw.env.unwrap_or_default(),
            }
        }
        (None, Some(url)) => {
            if raw.args.is_some() || raw.env.is_some() {
                return Err(EntryProblem::ArgsOnHttp);
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(EntryProblem::BadUrl(url));
            }
            McpTransport::Http {
                url,
                bearer_token_env: raw.bearer_token_env,
            }
        }
    };
    Ok(McpServerConfig {
        name: name.to_string(),
        transport,
        startup_timeout: seconds(raw.startup_timeout_s, "startup_timeout_s")?
            .unwrap_or(DEFAULT_STARTUP_TIMEOUT),
        tool_timeout: seconds(raw.tool_timeout_s, "tool_timeout_s")?
            .unwrap_or(DEFAULT_TOOL_TIMEOUT),
        enabled_tools: raw.enabled_tools,
        disabled_tools: raw.disabled_tools.unwrap_or_default(),
    })
}

fn seconds(value: Option<f64>, key: &'static str) -> Result<Option<Duration>, EntryProblem> {
    match value {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => {
            Ok(Some(Duration::from_secs_f64(s)))
        }
        Some(value) => Err(EntryProblem::BadSeconds { key, value }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<Vec<McpServerConfig>, McpConfigError> {
        parse(text, Path::new("config.toml")).map(|s| s.servers)
    }

    #[test]
    fn both_kinds_parse_with_defaults_and_filters() {
        let servers = parse_str(
            r#"
            model = "x"
            [mcp_servers.time]
            command = "mcp-server-time"
            args = ["--local-timezone", "UTC"]
            env = { TZ = "UTC" }
            startup_timeout_s = 5
            enabled_tools = ["get_current_time"]
            [mcp_servers.remote-1]
            url = "http://127.0.0.1:8808/mcp"
            bearer_token_env = "REMOTE_MCP_TOKEN"
            tool_timeout_s = 0.5
            disabled_tools = ["drop_all"]
            "#,
        )
        .unwrap();
        assert_eq!(servers.len(), 2);
        let remote = &servers[0];
        assert_eq!(remote.name, "remote-1");
        assert_eq!(remote.startup_timeout, DEFAULT_STARTUP_TIMEOUT);
        assert_eq!(remote.tool_timeout, Duration::from_millis(500));
        assert!(remote.offers("query") && !remote.offers("drop_all"));
        let time = &servers[1];
        assert_eq!(time.startup_timeout, Duration::from_secs(5));
        assert_eq!(time.tool_timeout, DEFAULT_TOOL_TIMEOUT);
        assert!(time.offers("get_current_time") && !time.offers("convert_time"));
        assert_eq!(time.target(), "mcp-server-time --local-timezone UTC");
        match &time.transport {
            McpTransport::Stdio { env, .. } => assert_eq!(env["TZ"], "UTC"),
            other => panic!("{other:?}"),
        }
        assert!(parse_str("model = \"x\"").unwrap().is_empty());
        let max = |t: &str| parse(t, Path::new("config.toml")).unwrap().max_tools;
        assert_eq!(max("model = \"x\""), DEFAULT_MAX_TOOLS);
        assert_eq!(max("[mcp]\nmax_tools = 7"), 7);
        let path = Path::new("config.toml");
        let table = |t: &str| toml::from_str::<toml::Table>(t).unwrap();
        assert_eq!(section_max_tools(&table(""), path).unwrap(), 100);
        assert_eq!(
            section_max_tools(&table("[mcp]\nmax_tools = 0"), path).unwrap(),
            0
        );
        assert_eq!(
            section_max_tools(&table("[mcp]\nmax_tools = 40"), path).unwrap(),
            40
        );
    }

    #[test]
    fn bad_entries_are_named_with_the_problem() {
        let cases = [
            (
                "[mcp_servers.a]\ncommand = \"x\"\nurl = \"http://h/mcp\"",
                "not both",
            ),
            ("[mcp_servers.a]\nargs = [\"x\"]", "give `command`"),
            ("[mcp_servers.\"a.b\"]\ncommand = \"x\"", "only letters"),
            ("[mcp_servers.a]\ncommand = \"x\"\ncomand = 1", "comand"),
            (
                "[mcp_servers.a]\nurl = \"http://h\"\nenv = { A = \"1\" }",
                "`command` servers only",
            ),
            (
                "[mcp_servers.a]\ncommand = \"x\"\nstartup_timeout_s = 0",
                "startup_timeout_s",
            ),
            ("[mcp_servers.a]\nurl = \"ftp://h\"", "http://"),
            ("[mcp]\nmax_tools = -1", "from 0 to 1000, got -1"),
            ("[mcp]\nmax_tools = 5000", "got 5000"),
            ("[mcp]\nmax_tool = 5", "max_tool"),
        ];
        for (text, needle) in cases {
            let e = parse_str(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
            assert!(e.contains("config.toml"), "{e}");
        }
    }
}
