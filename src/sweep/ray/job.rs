//! One Ray job of shards (docs §19.2): its own package (the binary, the job
//! file, the driver, the caller's files), its own submission id, and the
//! loop that follows it, turning the driver's `@@vibedesk` log lines into
//! [`JobEvent`]s, and that stops it (`POST /api/jobs/<id>/stop`) when the
//! caller cancels. A package is never reused between jobs: Ray refused a
//! reused one after a node was lost (docs §19.4).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sha2::Digest;
use tokio_util::sync::CancellationToken;

use super::client::{JobInfo, JobStatus, JobsClient, SubmitRequest};
use super::zip::{self, Entry, Method};
use super::{DEFAULT_MAX_RETRIES, RayError};

/// The driver, shipped in every package.
pub const DRIVER: &str = include_str!("../../../assets/ray/driver.py");
/// The prefix of the driver's event lines in the job's log.
pub const MARK: &str = "@@vibedesk ";
/// The binary's name inside the package.
const BINARY: &str = "vibedesk";
/// How often the job's status and log are read.
const POLL: Duration = Duration::from_millis(500);
/// The largest upload Ray's dashboard accepts (its HTTP body limit).
pub const MAX_PACKAGE_BYTES: usize = 100 * 1024 * 1024;
/// How long a stopped job may take to say it stopped.
const STOP_WAIT: Duration = Duration::from_secs(30);

/// What to run: `argv` after the binary, with `{shard}` standing for `i/N`.
#[derive(Clone, Debug)]
pub struct ShardJob {
    /// `sweep` or `batch`: part of the submission id.
    pub kind: String,
    /// The plan's hash: part of the submission id.
    pub key: String,
    pub binary: PathBuf,
    /// Extra files in the package (the plan), by name.
    pub files: Vec<(String, Vec<u8>)>,
    pub argv: Vec<String>,
    /// N: the shard count.
    pub count: usize,
    /// The shards to run (those not already done).
    pub shards: Vec<usize>,
    pub max_retries: u32,
    /// Shards running at once (all when `None`).
    pub max_in_flight: Option<usize>,
    /// The command that runs the driver on the head node.
    pub python: String,
    /// Store the package uncompressed (tests of small files).
    pub stored: bool,
}

impl ShardJob {
    pub fn new(kind: &str, key: &str, binary: PathBuf, argv: Vec<String>, count: usize) -> Self {
        ShardJob {
            kind: kind.to_string(),
            key: key.to_string(),
            binary,
            files: Vec::new(),
            argv,
            count,
            shards: (0..count).collect(),
            max_retries: DEFAULT_MAX_RETRIES,
            max_in_flight: None,
            python: "python".to_string(),
            stored: false,
        }
    }
}

/// What happens to a job, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum JobEvent {
    /// The package is built: its name and size.
    Packaged {
        package: String,
        bytes: usize,
    },
    Uploaded {
        package: String,
        seconds: f64,
    },
    Submitted {
        submission_id: String,
    },
    Status {
        status: JobStatus,
    },
    /// `node` is the host's name, `node_id` Ray's id of the node.
    ShardStarted {
        shard: usize,
        node: String,
        node_id: String,
    },
    ShardDone {
        shard: usize,
        seconds: f64,
        node_id: String,
    },
    ShardFailed {
        shard: usize,
        error: String,
    },
    /// A log line that is not one of the driver's events.
    Log {
        line: String,
    },
    /// Ctrl-C: the job was asked to stop.
    StopRequested,
}

/// How a followed job ended.
#[derive(Clone, Debug)]
pub struct JobOutcome {
    pub submission_id: String,
    pub package: String,
    pub status: JobStatus,
    pub message: Option<String>,
    /// Shards the driver reported done, in the order they finished.
    pub done: Vec<usize>,
    pub failed: BTreeSet<usize>,
    pub seconds: f64,
}

/// The job file the driver reads.
fn job_file(job: &ShardJob, submission_id: &str) -> Vec<u8> {
    let value = serde_json::json!({
        "submission_id": submission_id,
        "binary": BINARY,
        "argv": job.argv,
        "n": job.count,
        "shards": job.shards,
        "max_retries": job.max_retries,
        "max_in_flight": job.max_in_flight,
    });
    serde_json::to_vec_pretty(&value).unwrap_or_default()
}

/// A submission id of its own: kind, plan hash, time and a random part.
pub fn submission_id(job: &ShardJob) -> String {
    let key: String = job.key.chars().take(16).collect();
    format!(
        "vibedesk-{}-{key}-{}-{:08x}",
        job.kind,
        chrono::Utc::now().format("%Y%m%d%H%M%S"),
        rand::random::<u32>()
    )
}

/// The package's bytes and its name, `_ray_pkg_vibedesk_<hash>.zip`: the
/// job file holds the submission id, so every job's package differs.
pub fn package(job: &ShardJob, submission_id: &str) -> Result<(String, Vec<u8>), RayError> {
    let binary = std::fs::read(&job.binary).map_err(|source| RayError::Binary {
        path: job.binary.clone(),
        source,
    })?;
    let job_json = job_file(job, submission_id);
    let mut entries = vec![
        Entry {
            name: BINARY,
            mode: 0o100755,
            data: &binary,
        },
        Entry {
            name: "driver.py",
            mode: 0o100644,
            data: DRIVER.as_bytes(),
        },
        Entry {
            name: "job.json",
            mode: 0o100644,
            data: &job_json,
        },
    ];
    for (name, data) in &job.files {
        entries.push(Entry {
            name,
            mode: 0o100644,
            data,
        });
    }
    let method = if job.stored {
        Method::Stored
    } else {
        Method::Deflated
    };
    let bytes = zip::build(&entries, method)?;
    if bytes.len() > MAX_PACKAGE_BYTES {
        return Err(RayError::PackageTooLarge {
            mb: bytes.len() as f64 / 1e6,
        });
    }
    // Named by the job file (which holds the submission id) and the size:
    // unique per job without hashing the whole binary again.
    let mut hasher = sha2::Sha256::new();
    hasher.update(&job_json);
    hasher.update((bytes.len() as u64).to_le_bytes());
    let digest = hasher.finalize();
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    Ok((format!("_ray_pkg_vibedesk_{hex}.zip"), bytes))
}

/// Packages, uploads and submits `job`, then follows it to its end, sending
/// each [`JobEvent`] to `on_event`. Cancelling `cancel` stops the job.
pub async fn run(
    client: &JobsClient,
    job: &ShardJob,
    on_event: &mut (dyn FnMut(JobEvent) + Send),
    cancel: &CancellationToken,
) -> Result<JobOutcome, RayError> {
    let started = Instant::now();
    let submission_id = submission_id(job);
    let (package, bytes) = {
        let job = job.clone();
        let id = submission_id.clone();
        tokio::task::spawn_blocking(move || package(&job, &id))
            .await
            .map_err(|e| RayError::Client(format!("packaging stopped: {e}")))??
    };
    on_event(JobEvent::Packaged {
        package: package.clone(),
        bytes: bytes.len(),
    });
    let upload = Instant::now();
    client.upload_package(&package, bytes).await?;
    on_event(JobEvent::Uploaded {
        package: package.clone(),
        seconds: upload.elapsed().as_secs_f64(),
    });
    let request = SubmitRequest {
        entrypoint: format!("{} driver.py", job.python),
        submission_id: submission_id.clone(),
        runtime_env: serde_json::json!({ "working_dir": format!("gcs://{package}") }),
        metadata: BTreeMap::from([
            ("vibedesk_kind".to_string(), job.kind.clone()),
            ("vibedesk_plan".to_string(), job.key.clone()),
        ]),
    };
    let id = client.submit(&request).await?;
    on_event(JobEvent::Submitted {
        submission_id: id.clone(),
    });
    let mut follow = Follow::default();
    let info = follow_job(client, &id, &mut follow, on_event, cancel).await?;
    Ok(JobOutcome {
        submission_id: id,
        package,
        status: info.status,
        message: info.message,
        done: follow.done,
        failed: follow.failed,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// What the log has said so far.
#[derive(Default)]
struct Follow {
    /// Bytes of the log already read.
    seen: usize,
    status: Option<JobStatus>,
    done: Vec<usize>,
    failed: BTreeSet<usize>,
    /// The log grew past what is read: no longer followed.
    log_capped: bool,
}

/// Polls the job's status and log until it ends; on cancel asks Ray to stop
/// it and waits (bounded) for the stop.
async fn follow_job(
    client: &JobsClient,
    id: &str,
    follow: &mut Follow,
    on_event: &mut (dyn FnMut(JobEvent) + Send),
    cancel: &CancellationToken,
) -> Result<JobInfo, RayError> {
    let mut stop_asked: Option<Instant> = None;
    loop {
        if cancel.is_cancelled() && stop_asked.is_none() {
            client.stop(id).await?;
            on_event(JobEvent::StopRequested);
            stop_asked = Some(Instant::now());
        }
        let info = client.status(id).await?;
        // The status first, then the log: a terminal status read before the
        // log means the log is complete when read after it.
        read_log(client, id, follow, on_event).await?;
        if follow.status != Some(info.status) {
            follow.status = Some(info.status);
            on_event(JobEvent::Status {
                status: info.status,
            });
        }
        if info.status.is_terminal() {
            return Ok(info);
        }
        if stop_asked.is_some_and(|t| t.elapsed() > STOP_WAIT) {
            return Err(RayError::JobEnded {
                id: id.to_string(),
                status: "did not stop",
                message: format!(
                    "it was asked to stop {} s ago and is still {}; stop it with `ray job stop {id}`",
                    STOP_WAIT.as_secs(),
                    info.status.as_str()
                ),
            });
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = cancel.cancelled(), if stop_asked.is_none() => {}
        }
    }
}

async fn read_log(
    client: &JobsClient,
    id: &str,
    follow: &mut Follow,
    on_event: &mut (dyn FnMut(JobEvent) + Send),
) -> Result<(), RayError> {
    if follow.log_capped {
        return Ok(());
    }
    // A log past the cap is no longer read (nor held): the results come
    // from the shard files, the log only tells progress (docs §19.2).
    let logs = match client.logs(id).await {
        Err(super::RayError::TooLarge { mib, .. }) => {
            follow.log_capped = true;
            on_event(JobEvent::Log {
                line: format!(
                    "vibedesk: the job's log passed {mib} MiB and is no longer followed; the sweep goes on and its results are read from the shard files"
                ),
            });
            return Ok(());
        }
        other => other?,
    };
    // Only whole lines: a line still being written is read next time.
    let Some(end) = logs.rfind('\n').map(|i| i + 1) else {
        return Ok(());
    };
    if end <= follow.seen || !logs.is_char_boundary(follow.seen) {
        return Ok(());
    }
    for line in logs[follow.seen..end].lines() {
        match parse_line(line) {
            Some(event) => {
                match &event {
                    JobEvent::ShardDone { shard, .. } => follow.done.push(*shard),
                    JobEvent::ShardFailed { shard, .. } => {
                        follow.failed.insert(*shard);
                    }
                    _ => {}
                }
                on_event(event);
            }
            None if !line.trim().is_empty() => on_event(JobEvent::Log {
                line: line.to_string(),
            }),
            None => {}
        }
    }
    follow.seen = end;
    Ok(())
}

/// A driver event line (anywhere in the line: Ray prefixes a task's output
/// with its name, pid and node) as a [`JobEvent`].
pub fn parse_line(line: &str) -> Option<JobEvent> {
    let at = line.find(MARK)?;
    let value: serde_json::Value = serde_json::from_str(line[at + MARK.len()..].trim()).ok()?;
    let shard = value
        .get("shard")
        .and_then(|s| s.as_u64())
        .map(|s| s as usize);
    let text = |key: &str| {
        value
            .get(key)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    match value.get("event").and_then(|e| e.as_str())? {
        "shard_started" => Some(JobEvent::ShardStarted {
            shard: shard?,
            node: text("node"),
            node_id: text("node_id"),
        }),
        "shard_done" => Some(JobEvent::ShardDone {
            shard: shard?,
            seconds: value.get("seconds").and_then(|s| s.as_f64()).unwrap_or(0.0),
            node_id: text("node_id"),
        }),
        "shard_failed" => Some(JobEvent::ShardFailed {
            shard: shard?,
            error: text("error"),
        }),
        // job_started / job_finished: shown as log lines.
        _ => Some(JobEvent::Log {
            line: line[at + MARK.len()..].trim().to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_lines_become_events_wherever_ray_put_its_prefix() {
        assert_eq!(
            parse_line(
                "(run_shard pid=12, ip=10.0.0.2) @@vibedesk {\"event\": \"shard_started\", \"node\": \"n1\", \"node_id\": \"ab\", \"of\": 4, \"shard\": 2}"
            ),
            Some(JobEvent::ShardStarted {
                shard: 2,
                node: "n1".into(),
                node_id: "ab".into()
            })
        );
        assert_eq!(
            parse_line(
                "@@vibedesk {\"event\": \"shard_done\", \"of\": 4, \"seconds\": 1.5, \"shard\": 3}"
            ),
            Some(JobEvent::ShardDone {
                shard: 3,
                seconds: 1.5,
                node_id: String::new()
            })
        );
        assert_eq!(parse_line("plain output"), None);
        assert_eq!(parse_line("@@vibedesk {not json"), None);
    }

    #[test]
    fn every_job_gets_its_own_package_and_id() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::write(&bin, b"binary").unwrap();
        let job = ShardJob::new("sweep", "abcdef0123456789ff", bin, vec!["x".into()], 2);
        let (a, b) = (submission_id(&job), submission_id(&job));
        assert_ne!(a, b);
        assert!(a.starts_with("vibedesk-sweep-abcdef0123456789-"), "{a}");
        let (pa, _) = package(&job, &a).unwrap();
        let (pb, _) = package(&job, &b).unwrap();
        assert_ne!(pa, pb);
        // The same job and id give the same package.
        assert_eq!(package(&job, &a).unwrap().0, pa);
    }
}
