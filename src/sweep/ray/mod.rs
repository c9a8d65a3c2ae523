//! The Ray engine (docs §19): shards run as Ray tasks on a cluster, reached
//! through its Jobs REST API with plain HTTP ([`client`]). A job's package
//! ([`zip`]) holds the running vibedesk binary, the job file and a small
//! Python driver kept in `assets/ray/driver.py`; the driver runs one task per
//! shard, each the engine-neutral shard command, with Ray's retries
//! ([`job`]). What a shard computes is the caller's: a sweep's plan
//! ([`sweep`]) or a list of team runs (`swarm batch`).
//!
//! Shard outputs come back through a directory the client and every node
//! see at the same path (docs §19.3): each shard writes its file there
//! atomically, and the client collects them, refusing to report until every
//! shard is present exactly once.

pub mod client;
pub mod job;
pub mod sweep;
pub mod zip;

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use client::{JobStatus, JobsClient};
pub use job::{JobEvent, JobOutcome, ShardJob};

/// Ray's retries of a failed shard (a non-zero exit or a lost node) unless
/// `--max-retries` or `[engines.ray] max_retries` says otherwise.
pub const DEFAULT_MAX_RETRIES: u32 = 3;

/// Why a Ray run could not start or finish; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum RayError {
    #[error(
        "no Ray cluster given: pass --address http://HEAD:8265 or set address in [engines.ray] of config.toml (docs §19.1)"
    )]
    NoAddress,
    #[error("'{0}' is not a Ray dashboard address: give http://HEAD:8265")]
    Address(String),
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    #[error(
        "cannot {what}: the Ray dashboard at {address} does not answer ({detail}); is the cluster up (`ray status`), and is the dashboard port right?"
    )]
    Unreachable {
        address: String,
        what: String,
        detail: String,
    },
    #[error("cannot {what}: Ray answered HTTP {status}: {body}")]
    Http {
        what: String,
        status: u16,
        body: String,
    },
    #[error("cannot read {what} from Ray: {detail}")]
    Decode { what: String, detail: String },
    /// An answer longer than the client reads (§19.2).
    #[error(
        "cannot {what}: Ray's answer is longer than the {mib} MiB this client reads; is the address a Ray dashboard?"
    )]
    TooLarge { what: String, mib: u64 },
    #[error("cannot build the job's package: {0}")]
    Zip(#[from] zip::ZipError),
    #[error(
        "the job's package is {mb:.0} MB, over the 100 MiB Ray's dashboard takes in one upload; ship a release build (`cargo build --release`), which is far smaller"
    )]
    PackageTooLarge { mb: f64 },
    #[error("cannot read the vibedesk binary to send to the cluster ({path}): {source}")]
    Binary {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: [engines.ray]: {problem}")]
    Config { path: PathBuf, problem: String },
    #[error(
        "the shard directory {path} cannot be used: {detail}; give --shard-dir a directory every node and this machine see at the same path (docs §19.3)"
    )]
    ShardDir { path: PathBuf, detail: String },
    #[error("Ray job {id} {status}: {message}")]
    JobEnded {
        id: String,
        status: &'static str,
        message: String,
    },
}

/// `[engines.ray]` in config.toml (docs §19.1).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RayConfig {
    /// The dashboard's address, `http://HEAD:8265`.
    pub address: Option<String>,
    /// The environment variable holding the cluster's token (sent as
    /// `Authorization: Bearer`); preferred to `token`.
    pub token_env: Option<String>,
    /// The token itself (discouraged: the file is not a secret store).
    pub token: Option<String>,
    /// Where shards write their outputs: a directory every node and the
    /// client see at the same path.
    pub shard_dir: Option<PathBuf>,
    /// Ray's retries of a failed shard.
    pub max_retries: Option<u32>,
    /// The Python that runs the driver on the head node.
    pub python: Option<String>,
}

impl RayConfig {
    /// `[engines.ray]` of the config file as parsed once, when `Config`
    /// loads (`path` names it in errors); the defaults when the table is
    /// absent.
    pub fn from_table(table: &toml::Table, path: &Path) -> Result<RayConfig, RayError> {
        let Some(ray) = table
            .get("engines")
            .and_then(|e| e.as_table())
            .and_then(|e| e.get("ray"))
        else {
            return Ok(RayConfig::default());
        };
        ray.clone()
            .try_into::<RayConfig>()
            .map_err(|e| RayError::Config {
                path: path.to_path_buf(),
                problem: e.to_string(),
            })
    }

    /// The token: `token_env`'s variable, else `token`.
    pub fn token(&self) -> Option<String> {
        self.token_env
            .as_deref()
            .and_then(crate::secrets::var)
            .or_else(|| self.token.clone())
            .filter(|t| !t.trim().is_empty())
    }

    /// A client of the cluster at `address` (the flag), else the file's.
    pub fn client(&self, address: Option<&str>) -> Result<JobsClient, RayError> {
        let address = address
            .or(self.address.as_deref())
            .ok_or(RayError::NoAddress)?;
        JobsClient::new(address, self.token())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_ray_is_read_and_checked() {
        let path = Path::new("/home/u/.config/vibedesk/config.toml");
        let load = |text: &str| RayConfig::from_table(&toml::from_str(text).unwrap(), path);
        assert_eq!(load("provider = \"openai\"").unwrap(), RayConfig::default());
        let c = load(
            "provider = \"openai\"\n[engines.ray]\naddress = \"http://h:8265\"\nmax_retries = 5\nshard_dir = \"/mnt/x\"\n",
        )
        .unwrap();
        assert_eq!(c.address.as_deref(), Some("http://h:8265"));
        assert_eq!(c.max_retries, Some(5));
        assert_eq!(c.shard_dir.as_deref(), Some(Path::new("/mnt/x")));
        let e = load("[engines.ray]\nadress = \"http://h:8265\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("adress") && e.contains("[engines.ray]"), "{e}");
    }

    #[test]
    fn the_flag_wins_and_a_missing_address_says_where_to_put_one() {
        let c = RayConfig {
            address: Some("h:1".into()),
            ..RayConfig::default()
        };
        assert_eq!(c.client(None).unwrap().address(), "http://h:1");
        assert_eq!(
            c.client(Some("http://x:2/")).unwrap().address(),
            "http://x:2"
        );
        let e = RayConfig::default().client(None).unwrap_err().to_string();
        assert!(
            e.contains("--address") && e.contains("[engines.ray]"),
            "{e}"
        );
    }
}
