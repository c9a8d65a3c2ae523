//! The `bash` tool (docs §2.6, §2.10): one shell command in the sandbox.
//!
//! The command runs through [`crate::sandbox::Runner`] with cwd = the run
//! dir, the workspace writable and named in `VIBEDESK_WORKSPACE`, a
//! 120 s deadline (at most 600 s on request) that kills the whole process
//! group, and stdout/stderr each capped at 50 000 characters. It is a write
//! tool (runs alone, never killed by the loop); the runner's own deadline
//! still applies.
//!
//! Decisions:
//! - The heredoc rule of §2.6 is **not** applied. It exists because cmd.exe
//!   has no heredocs; this tool is POSIX-only, where a heredoc is the
//!   ordinary way to write a file from a shell, and rejecting it would only
//!   push the model to worse quoting.
//! - The shell-safety rule of §2.10 (no broad Python kills) is applied, and
//!   widened deliberately: besides `;`, newlines and `&`, a pipeline stage or
//!   a subshell is also a segment start, and wrappers (`sudo`, `doas`,
//!   `exec`, `nohup`, `env`, `command`, `time`, `nice`, variable
//!   assignments) are looked through. `kill … -1` (every process the user
//!   may signal) is refused too.
//! - Output keeps a head *and* a tail (the end of a failing command is where
//!   the error is); the original keeps only the head.

use schemars::JsonSchema;
use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;
use serde::Serialize;

use super::{Builtin, ToolEnv};
use crate::model::contract::BashArgs;
use crate::model::names;
use crate::sandbox::{RunResult, RunSpec, Runner, RunnerConfig};
use crate::tools::{Access, Caps};
use crate::tools::{ToolContext, ToolError, TypedTool};

/// Spec §2.6: the command deadline.
const DEFAULT_TIMEOUT_S: u64 = 120;
/// The most a call may ask for; longer work belongs in background tasks.
const MAX_TIMEOUT_S: u64 = 600;
/// Spec §2.6: stdout and stderr are each capped at this many characters.
const OUTPUT_CHARS: usize = 50_000;

pub struct Bash {
    runner: Runner,
}

impl Default for Bash {
    fn default() -> Self {
        Bash::new(RunnerConfig::from_env())
    }
}

impl Bash {
    /// A `bash` tool whose runner uses `config` (its timeout is replaced by
    /// the per-call one).
    pub fn new(config: RunnerConfig) -> Self {
        Bash {
            runner: Runner::new(config),
        }
    }
}

/// The shell to run commands with: bash when installed, else POSIX sh.
fn shell() -> (&'static str, &'static [&'static str]) {
    if std::path::Path::new("/bin/bash").exists() {
        // No rc files: a non-interactive bash reads none anyway except
        // $BASH_ENV, which the environment allow-list never passes.
        ("/bin/bash", &["--noprofile", "--norc", "-c"])
    } else {
        ("/bin/sh", &["-c"])
    }
}

impl TypedTool for Bash {
    type Args = BashArgs;
    type Output = BashOutput;

    const NAME: &'static str = names::BASH;
    const CAPS: Caps = Caps::WRITES.access(Access::Shell);

    fn description(&self) -> &str {
        "Run a shell command in the current run directory (sandboxed). No API keys in its environment, a throwaway HOME, memory/process/file-size limits, and writes allowed only in the run directory, the workspace ($VIBEDESK_WORKSPACE) and $TMPDIR. Default timeout 120 s (timeout_seconds, at most 600); at the deadline the whole process group is killed and the partial output returned. stdout and stderr are each capped at 50,000 characters (head and tail kept). Do not kill Python processes broadly by name (pkill python); target a script (pkill -f my_script.py)."
    }

    fn repeatable(&self) -> bool {
        true
    }

    /// The scheduler only warns for write tools; the runner enforces the
    /// real deadline, so this is the longest a call can legitimately take.
    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_secs(MAX_TIMEOUT_S) + self.runner.config().drain_timeout * 2)
    }

    async fn run(&self, args: BashArgs, ctx: &ToolContext) -> Result<BashOutput, ToolError> {
        let command = Some(args.command.trim())
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                ToolError::InvalidArguments("'command' must be a non-empty string".into())
            })?;
        let timeout_s = match args.timeout_seconds {
            None => DEFAULT_TIMEOUT_S,
            Some(n) => u64::try_from(n)
                .ok()
                .filter(|n| (1..=MAX_TIMEOUT_S).contains(n))
                .ok_or_else(|| {
                    ToolError::InvalidArguments(format!(
                        "'timeout_seconds' must be an integer from 1 to {MAX_TIMEOUT_S}"
                    ))
                })?,
        };
        if let Err(reason) = check_command(command) {
            return Err(ToolError::failed("blocked_command", reason.to_string()));
        }
        let (program, flags) = shell();
        let log_name = if ctx.call_id.is_empty() {
            "bash".to_string()
        } else {
            format!("bash_{}", ctx.call_id)
        };
        let spec = RunSpec::new(program, &ctx.run_dir)
            .args(flags.iter().copied())
            .args([command])
            .writable(&ctx.workspace)
            .env(
                "VIBEDESK_WORKSPACE",
                ctx.workspace.to_string_lossy().into_owned(),
            )
            .log_name(log_name)
            .timeout(Duration::from_secs(timeout_s))
            .progress(crate::tools::progress::sandbox_sink());
        let result = self
            .runner
            .run(spec, &ctx.cancel)
            .await
            .map_err(|e| ToolError::failed("sandbox_error", e.to_string()))?;
        Ok(bash_output(&result, ctx, timeout_s))
    }
}

/// Where the full output was logged, relative to the run dir.
#[derive(Serialize, JsonSchema)]
pub struct BashLogs {
    stdout: String,
    stderr: String,
}

/// The tool result: `status` "ok", "error", "timed_out" or "cancelled".
/// `ok` is false for all but success, so the scheduler (§2.5) counts a
/// timeout as the failure it is.
#[derive(Serialize, JsonSchema)]
pub struct BashOutput {
    status: &'static str,
    ok: bool,
    /// Null when a signal ended the command.
    exit_code: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
    truncated: bool,
    stdout_bytes: u64,
    stderr_bytes: u64,
    elapsed_ms: u64,
    logs: BashLogs,
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

fn bash_output(r: &RunResult, ctx: &ToolContext, timeout_s: u64) -> BashOutput {
    let (stdout, cut_out) = cap_chars(&r.stdout, OUTPUT_CHARS);
    let (stderr, cut_err) = cap_chars(&r.stderr, OUTPUT_CHARS);
    let truncated = cut_out || cut_err || r.stdout_dropped > 0 || r.stderr_dropped > 0;
    let status = if r.timed_out {
        "timed_out"
    } else if r.cancelled {
        "cancelled"
    } else if r.success {
        "ok"
    } else {
        "error"
    };
    let rel = |p: &std::path::Path| {
        let base = ctx
            .run_dir
            .canonicalize()
            .unwrap_or_else(|_| ctx.run_dir.clone());
        p.strip_prefix(&base)
            .map(|x| x.display().to_string())
            .unwrap_or_else(|_| p.display().to_string())
    };
    let (error_code, message) = match status {
        "timed_out" => (
            Some("command_timeout"),
            Some(format!(
                "the command did not finish within {timeout_s}s; its whole process group was killed. The output so far is above and in the logs. Use a narrower command or a larger timeout_seconds (at most {MAX_TIMEOUT_S})."
            )),
        ),
        "cancelled" => (
            Some("cancelled"),
            Some("the run was cancelled; the command's process group was killed".to_string()),
        ),
        "error" => (Some("exit_nonzero"), None),
        _ => (None, None),
    };
    BashOutput {
        status,
        ok: status == "ok",
        exit_code: r.exit_code,
        stdout,
        stderr,
        timed_out: r.timed_out,
        truncated,
        stdout_bytes: r.stdout_bytes,
        stderr_bytes: r.stderr_bytes,
        elapsed_ms: r.elapsed_ms,
        logs: BashLogs {
            stdout: rel(&r.stdout_log),
            stderr: rel(&r.stderr_log),
        },
        signal: r.signal,
        error_code,
        message,
    }
}

/// Keeps at most `limit` characters: a head and a tail around a marker.
fn cap_chars(text: &str, limit: usize) -> (String, bool) {
    let total = text.chars().count();
    if total <= limit {
        return (text.to_string(), false);
    }
    let marker = |n: usize| format!("\n[... {n} characters omitted ...]\n");
    let room = limit.saturating_sub(marker(total).chars().count());
    let head_n = room / 2;
    let tail_n = room - head_n;
    let head: String = text.chars().take(head_n).collect();
    let tail: String = text.chars().skip(total - tail_n).collect();
    (
        format!("{head}{}{tail}", marker(total - head_n - tail_n)),
        true,
    )
}

/// `python`, `pythonw`, `python3`, `python3.11`, optional `.exe`, and the
/// glob/regex spellings `python*`, `python.*`, `^python$`.
static PYTHON_NAME: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^\^?python(w)?(3(\.\d+)?)?(\.exe)?(\*|\.\*)?\$?$").ok());

fn is_python_name(token: &str) -> bool {
    PYTHON_NAME.as_ref().is_some_and(|re| re.is_match(token))
}

/// A command [`check_command`] refuses: why, and what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum CommandRefused {
    #[error(
        "refused: {0}. Killing every Python process by name would also kill the engine's own helpers and other users' work; target your script instead, e.g. `pkill -f my_script.py`, or a pid you started."
    )]
    PythonByName(String),
    #[error(
        "refused: `kill -1` signals every process you may signal, the engine included; kill the pid you started"
    )]
    KillEverything,
}

/// Spec §2.10, widened (see the module docs). `Err` says why and what to do.
pub fn check_command(command: &str) -> Result<(), CommandRefused> {
    let refuse = |what: &str| Err(CommandRefused::PythonByName(what.to_string()));
    for segment in split_segments(command) {
        let clean = normalise(&segment);
        let tokens: Vec<&str> = clean.split(' ').filter(|t| !t.is_empty()).collect();
        if is_taskkill_python(&tokens) {
            return refuse("taskkill of python by image name");
        }
        if is_powershell_python_kill(&tokens) {
            return refuse("Stop-Process of python by name");
        }
        for part in split_subcommands(&clean) {
            let words: Vec<&str> = part.split(' ').filter(|t| !t.is_empty()).collect();
            let words = strip_wrappers(&words);
            let Some(first) = words.first() else { continue };
            let prog = first.rsplit('/').next().unwrap_or(first);
            if matches!(prog, "pkill" | "killall") && words[1..].iter().any(|t| is_python_name(t)) {
                return refuse(&format!("`{prog}` naming python"));
            }
            if prog == "kill" && words.last() == Some(&"-1") && words.len() > 1 {
                return Err(CommandRefused::KillEverything);
            }
        }
    }
    Ok(())
}

/// §2.10: split on `;`, CR/LF and a bare `&` (not part of `<&`, `>&`, `&>`).
fn split_segments(command: &str) -> Vec<String> {
    let chars: Vec<char> = command.chars().collect();
    let mut out = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let bare_amp = c == '&'
            && !matches!(i.checked_sub(1).map(|j| chars[j]), Some('<' | '>'))
            && chars.get(i + 1) != Some(&'>');
        if matches!(c, ';' | '\r' | '\n') || bare_amp {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

/// Quotes removed, whitespace collapsed, lower-cased (§2.10).
fn normalise(segment: &str) -> String {
    segment
        .chars()
        .filter(|c| !matches!(c, '"' | '\''))
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Widening: pipeline stages, subshells, groups and command substitutions
/// each start a command of their own.
fn split_subcommands(segment: &str) -> Vec<String> {
    segment
        .split(['|', '(', ')', '`', '{', '}', '$'])
        .map(|s| s.trim().to_string())
        .collect()
}

/// Drops leading wrappers, their options (and the values of the common
/// value-taking ones), durations and `VAR=value` assignments.
fn strip_wrappers<'a, 'b>(words: &'b [&'a str]) -> &'b [&'a str] {
    const WRAPPERS: &[&str] = &[
        "sudo", "doas", "exec", "nohup", "env", "command", "time", "nice", "timeout", "!",
    ];
    // sudo -u/-g/-h/-p/-C/-D/-r/-t, env -u/-C, timeout -k (lower-cased).
    const VALUE_OPTIONS: &[&str] = &["-u", "-g", "-h", "-p", "-c", "-d", "-r", "-t", "-k"];
    let is_duration = |w: &str| {
        let digits = w.trim_end_matches(['s', 'm', 'h', 'd']);
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.')
    };
    let mut i = 0;
    let mut after_wrapper = false;
    while let Some(w) = words.get(i) {
        let base = w.rsplit('/').next().unwrap_or(w);
        i += 1;
        if WRAPPERS.contains(&base) {
            after_wrapper = true;
        } else if after_wrapper && w.starts_with('-') {
            if VALUE_OPTIONS.contains(w) {
                i += 1;
            }
        } else if (after_wrapper && is_duration(w)) || (w.contains('=') && !w.starts_with('=')) {
            // a duration or niceness of the wrapper, or an assignment
        } else {
            i -= 1;
            break;
        }
    }
    words.get(i..).unwrap_or(&[])
}

fn is_taskkill_python(tokens: &[&str]) -> bool {
    let Some(pos) = tokens
        .iter()
        .position(|t| matches!(*t, "taskkill" | "taskkill.exe"))
    else {
        return false;
    };
    tokens[pos..]
        .windows(2)
        .any(|w| matches!(w[0], "/im" | "-im" | "get-process") && is_python_name(w[1]))
}

fn is_powershell_python_kill(tokens: &[&str]) -> bool {
    let Some(first) = tokens.first() else {
        return false;
    };
    if !matches!(
        *first,
        "powershell" | "powershell.exe" | "pwsh" | "pwsh.exe"
    ) {
        return false;
    }
    let by_name = tokens.windows(3).any(|w| {
        w[0] == "stop-process" && matches!(w[1], "-name" | "-processname") && is_python_name(w[2])
    });
    let piped = tokens
        .windows(2)
        .position(|w| w[0] == "get-process" && is_python_name(w[1]))
        .is_some_and(|p| tokens[p..].contains(&"stop-process"));
    by_name || piped
}

impl Builtin for Bash {
    fn build(env: &ToolEnv) -> Option<Self> {
        Some(Bash::new(env.runner.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broad_python_kills_are_refused() {
        for cmd in [
            "pkill python",
            "sudo killall python3",
            "taskkill /im python.exe",
            "taskkill /F /IM python.exe /T",
            "echo hi; pkill -9 python3.11",
            "ls && killall pythonw",
            "sleep 1 & pkill python",
            "true | pkill python",
            "(pkill python)",
            "sudo -n pkill -f python",
            "sudo -u root pkill python",
            "nice -n 10 pkill python",
            "timeout 5s killall python3",
            "FOO=1 nohup /usr/bin/pkill 'python3'",
            "killall -r 'python.*'",
            "pkill python*",
            "powershell -Command Stop-Process -Name python -Force",
            "pwsh -c \"Get-Process python | Stop-Process\"",
            "echo a\npkill python",
        ] {
            assert!(check_command(cmd).is_err(), "should refuse: {cmd}");
        }
    }

    #[test]
    fn targeted_kills_and_ordinary_commands_pass() {
        for cmd in [
            "pkill -f my_script.py",
            "python3 train.py > out.log 2>&1 &",
            "echo pkill python",
            "ls -la &> listing.txt",
            "cat <&3",
            "kill 12345",
            "kill -1 12345",
            "grep python requirements.txt | wc -l",
            "cat <<'EOF' > a.py\nprint(1)\nEOF",
            "python -c 'print(1)'",
        ] {
            assert!(check_command(cmd).is_ok(), "should allow: {cmd}");
        }
    }

    #[test]
    fn kill_minus_one_is_refused() {
        assert!(check_command("kill -9 -1").is_err());
        assert!(check_command("kill -- -1").is_err());
    }

    #[test]
    fn bare_ampersand_split_follows_the_spec() {
        assert_eq!(split_segments("a & b"), vec!["a ", " b"]);
        assert_eq!(split_segments("a 2>&1"), vec!["a 2>&1"]);
        assert_eq!(split_segments("a &> f"), vec!["a &> f"]);
        assert_eq!(split_segments("a <&3"), vec!["a <&3"]);
    }

    #[test]
    fn output_cap_keeps_head_and_tail_within_the_limit() {
        let text: String = "a".repeat(60_000) + "END";
        let (capped, cut) = cap_chars(&text, OUTPUT_CHARS);
        assert!(cut);
        assert!(capped.chars().count() <= OUTPUT_CHARS);
        assert!(capped.starts_with("aaa"));
        assert!(capped.ends_with("END"));
        assert!(capped.contains("characters omitted"));
        assert_eq!(cap_chars("short", 10), ("short".to_string(), false));
    }
}
