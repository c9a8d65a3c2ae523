//! The CLI edge's one error: the line a failed command prints on stderr and
//! the process exit code ([`super::exit`]). A command is
//! `fn name(args) -> Result<(), CliError>`: `Err(CliError::usage(why))?` for a
//! bad invocation (exit 2), `.map_err(CliError::failed)?` for a failure
//! (exit 1); [`super::main`] prints the line and exits with the code.

use std::fmt;

use super::exit;

/// Why a command ended unsuccessfully.
#[derive(Debug, thiserror::Error)]
pub struct CliError {
    /// The process exit code.
    pub code: u8,
    /// What to print after the `vibedesk: ` prefix; `None` when the command
    /// already said it (on stdout, as `doctor` and `engine` do).
    message: Option<String>,
    /// The subcommand named in the prefix (`vibedesk backtest: …`).
    command: Option<&'static str>,
}

impl CliError {
    pub fn new(code: u8, message: impl fmt::Display) -> Self {
        CliError {
            code,
            message: Some(message.to_string()),
            command: None,
        }
    }

    /// A bad invocation: arguments, input or configuration (exit 2).
    pub fn usage(message: impl fmt::Display) -> Self {
        Self::new(exit::USAGE, message)
    }

    /// The command ran and failed (exit 1).
    pub fn failed(message: impl fmt::Display) -> Self {
        Self::new(exit::FAILED, message)
    }

    /// An exit code whose explanation the command already printed.
    pub fn quiet(code: u8) -> Self {
        CliError {
            code,
            message: None,
            command: None,
        }
    }

    /// Names the subcommand in the prefix: `vibedesk <command>: …`.
    pub fn of(mut self, command: &'static str) -> Self {
        self.command = Some(command);
        self
    }

    /// A command that still reports with a bare exit code: 0 is success.
    pub fn from_exit_code(code: u8) -> Result<(), CliError> {
        if code == exit::OK {
            Ok(())
        } else {
            Err(Self::quiet(code))
        }
    }

    /// The stderr line, if the command has not printed its own.
    pub fn line(&self) -> Option<String> {
        self.message.as_ref().map(|m| match self.command {
            Some(c) => format!("vibedesk {c}: {m}"),
            None => format!("vibedesk: {m}"),
        })
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line() {
            Some(line) => f.write_str(&line),
            None => write!(f, "exit code {}", self.code),
        }
    }
}

impl From<crate::tools::builtin::RegisterError> for CliError {
    /// Two tools with one name: a bug in the build, reported at start-up.
    fn from(e: crate::tools::builtin::RegisterError) -> Self {
        CliError::failed(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_the_prefix_and_codes_the_kind() {
        let e = CliError::usage("the prompt is empty");
        assert_eq!(
            (e.code, e.line().as_deref()),
            (2, Some("vibedesk: the prompt is empty"))
        );
        let e = CliError::failed("no trace").of("backtest");
        assert_eq!(
            (e.code, e.line().as_deref()),
            (1, Some("vibedesk backtest: no trace"))
        );
        assert_eq!(CliError::quiet(130).line(), None);
        assert!(CliError::from_exit_code(0).is_ok());
        assert_eq!(CliError::from_exit_code(2).map_err(|e| e.code), Err(2));
    }
}
