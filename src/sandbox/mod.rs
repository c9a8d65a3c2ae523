//! The sandbox room: runs one child process under a set of protections
//! (docs §6.1–§6.3), for the `bash` tool and, later, the backtest engine.
//!
//! What a child gets, in order of setup:
//! - an allow-listed environment; provider, cloud and broker secrets are
//!   refused even when asked for, and nothing tells it to load a `.env`
//!   ([`env`], §6.1, §12.13);
//! - a throwaway HOME and TMPDIR, removed afterwards ([`scratch`], §6.2);
//! - when the engine is root, an unprivileged user (`vibedesk-sandbox`, else
//!   `nobody`) so that `RLIMIT_NPROC` holds ([`user`], §6.2);
//! - stdin from `/dev/null`, stdout/stderr captured within a cap, in memory
//!   and in `logs/` ([`output`]);
//! - in the child before exec: its own session and process group, a PID
//!   namespace of its own where the engine may make one ([`pidns`]),
//!   resource limits ([`limits`]), death with the engine
//!   (`PR_SET_PDEATHSIG`), and Landlock write confinement to its run dir,
//!   workspace and scratch ([`confine`]);
//! - a deadline and a cancel token that kill **everything the job
//!   started**, however it detached (the namespace; the process group where
//!   there is none); partial output is kept and the result says `timed_out`
//!   (the original raises and writes no logs, §12.14);
//! - a record of the running job ([`jobs`]), so that a later start ends
//!   what a crash of the engine left behind;
//! - artifact collection per the §6.3 table ([`artifacts`]).
//!
//! [`Protections`] reports which of these hold; `vibedesk doctor` prints it.
//!
//! POSIX only (Linux for pdeathsig, Landlock and the privilege drop).

pub mod artifacts;
pub mod config;
pub mod confine;
pub mod env;
pub mod jobs;
pub mod limits;
pub mod output;
pub mod pidns;
pub mod protections;
pub mod runner;
pub mod scratch;
pub mod user;

pub use artifacts::{ArtifactSpec, BACKTEST_ARTIFACTS};
pub use limits::Limits;
pub use protections::Protections;
pub use runner::{Progress, RunResult, RunSpec, Runner, RunnerConfig};
pub use user::UserPolicy;

/// Why a child could not be set up or started. Timeouts and cancellation
/// are not errors: they are [`RunResult`]s.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("sandbox: cannot {0}")]
    Io(#[source] crate::fsio::IoError),
    #[error("sandbox: cannot start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("sandbox: {0}")]
    Setup(String),
}
