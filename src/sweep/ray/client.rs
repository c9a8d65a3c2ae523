//! Ray's Jobs REST API over plain HTTP (docs §19.2): the dashboard's
//! `/api/version`, `/api/packages/gcs/<name>` (upload a package),
//! `/api/jobs/` (submit), `/api/jobs/<id>` (status), `/api/jobs/<id>/logs`
//! and `/api/jobs/<id>/stop`. No Python and no Ray SDK on the client: the
//! same requests Ray's own `JobSubmissionClient` sends, through reqwest.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::RayError;

/// Bound on connecting to the dashboard.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on one small request (status, logs, stop, submit).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on a package upload: a release binary is tens of MB.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);
/// The most of an answer read: a status, version or submit answer is a few
/// KB; past it the answer is refused, not held (docs §19.2).
pub const MAX_ANSWER_BYTES: u64 = 4 << 20;
/// The most of a job's log read at once: the driver prints a line a shard.
pub const MAX_LOG_BYTES: u64 = 32 << 20;

/// A job's state as Ray names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobStatus {
    Pending,
    Running,
    Stopped,
    Succeeded,
    Failed,
}

impl JobStatus {
    /// Whether the job has ended (Ray never changes the status again).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobStatus::Stopped | JobStatus::Succeeded | JobStatus::Failed
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Pending => "PENDING",
            JobStatus::Running => "RUNNING",
            JobStatus::Stopped => "STOPPED",
            JobStatus::Succeeded => "SUCCEEDED",
            JobStatus::Failed => "FAILED",
        }
    }
}

/// `GET /api/jobs/<id>`: the fields vibedesk reads.
#[derive(Clone, Debug, Deserialize)]
pub struct JobInfo {
    pub status: JobStatus,
    #[serde(default)]
    pub message: Option<String>,
}

/// `POST /api/jobs/`'s body.
#[derive(Clone, Debug, Serialize)]
pub struct SubmitRequest {
    pub entrypoint: String,
    pub submission_id: String,
    pub runtime_env: serde_json::Value,
    pub metadata: std::collections::BTreeMap<String, String>,
}

/// A client of one Ray cluster's dashboard.
#[derive(Clone, Debug)]
pub struct JobsClient {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl JobsClient {
    /// `address` is the dashboard's URL (`http://HEAD:8265`); a bare
    /// `HEAD:8265` means plain HTTP.
    pub fn new(address: &str, token: Option<String>) -> Result<Self, RayError> {
        let trimmed = address.trim().trim_end_matches('/');
        let base = if trimmed.contains("://") {
            trimmed.to_string()
        } else {
            format!("http://{trimmed}")
        };
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(RayError::Address(address.to_string()));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| RayError::Client(e.to_string()))?;
        Ok(JobsClient { base, token, http })
    }

    pub fn address(&self) -> &str {
        &self.base
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .timeout(REQUEST_TIMEOUT);
        if let Some(token) = &self.token {
            r = r.bearer_auth(token);
        }
        r
    }

    /// Sends `r` and returns the body of a 2xx answer; any other answer is
    /// an error naming `what` and quoting Ray's text.
    async fn send(&self, what: &str, r: reqwest::RequestBuilder) -> Result<String, RayError> {
        self.send_capped(what, r, MAX_ANSWER_BYTES).await
    }

    /// [`JobsClient::send`] reading at most `cap` bytes of the answer: a
    /// longer one is [`RayError::TooLarge`], whatever the server streams.
    async fn send_capped(
        &self,
        what: &str,
        r: reqwest::RequestBuilder,
        cap: u64,
    ) -> Result<String, RayError> {
        let mut response = r.send().await.map_err(|e| RayError::Unreachable {
            address: self.base.clone(),
            what: what.to_string(),
            detail: crate::text::preview(&error_chain(&e), 300),
        })?;
        let status = response.status();
        let mut bytes: Vec<u8> = Vec::new();
        // A body cut short by the connection is read as far as it came.
        while let Ok(Some(chunk)) = response.chunk().await {
            if bytes.len() as u64 + chunk.len() as u64 > cap {
                return Err(RayError::TooLarge {
                    what: what.to_string(),
                    mib: cap >> 20,
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        let body = String::from_utf8_lossy(&bytes).into_owned();
        if status.is_success() {
            Ok(body)
        } else {
            Err(RayError::Http {
                what: what.to_string(),
                status: status.as_u16(),
                body: crate::text::preview(body.trim(), 600),
            })
        }
    }

    /// The cluster's Ray version (`GET /api/version`): also the check that
    /// the address is a Ray dashboard.
    pub async fn ray_version(&self) -> Result<String, RayError> {
        #[derive(Deserialize)]
        struct Version {
            ray_version: String,
        }
        let body = self
            .send(
                "ask the Ray version",
                self.request(reqwest::Method::GET, "/api/version"),
            )
            .await?;
        serde_json::from_str::<Version>(&body)
            .map(|v| v.ray_version)
            .map_err(|e| RayError::Decode {
                what: "/api/version".to_string(),
                detail: e.to_string(),
            })
    }

    /// Uploads a package (`PUT /api/packages/gcs/<name>`); the job names it
    /// as `gcs://<name>` in its `working_dir`.
    pub async fn upload_package(&self, name: &str, zip: Vec<u8>) -> Result<(), RayError> {
        let r = self
            .request(reqwest::Method::PUT, &format!("/api/packages/gcs/{name}"))
            .timeout(UPLOAD_TIMEOUT)
            .body(zip);
        self.send("upload the package", r).await.map(|_| ())
    }

    /// Submits a job; returns its submission id.
    pub async fn submit(&self, request: &SubmitRequest) -> Result<String, RayError> {
        #[derive(Deserialize)]
        struct Submitted {
            submission_id: String,
        }
        let r = self
            .request(reqwest::Method::POST, "/api/jobs/")
            .json(request);
        let body = self.send("submit the job", r).await?;
        serde_json::from_str::<Submitted>(&body)
            .map(|s| s.submission_id)
            .map_err(|e| RayError::Decode {
                what: "the job submission's answer".to_string(),
                detail: e.to_string(),
            })
    }

    pub async fn status(&self, id: &str) -> Result<JobInfo, RayError> {
        let body = self
            .send(
                "read the job's status",
                self.request(reqwest::Method::GET, &format!("/api/jobs/{id}")),
            )
            .await?;
        serde_json::from_str(&body).map_err(|e| RayError::Decode {
            what: format!("job {id}'s status"),
            detail: e.to_string(),
        })
    }

    /// The job's whole log so far (the driver's output, with its tasks').
    pub async fn logs(&self, id: &str) -> Result<String, RayError> {
        #[derive(Deserialize)]
        struct Logs {
            #[serde(default)]
            logs: String,
        }
        let body = self
            .send_capped(
                "read the job's logs",
                self.request(reqwest::Method::GET, &format!("/api/jobs/{id}/logs")),
                MAX_LOG_BYTES,
            )
            .await?;
        serde_json::from_str::<Logs>(&body)
            .map(|l| l.logs)
            .map_err(|e| RayError::Decode {
                what: format!("job {id}'s logs"),
                detail: e.to_string(),
            })
    }

    /// Asks Ray to stop the job (`POST /api/jobs/<id>/stop`); `false` when
    /// it had ended already.
    pub async fn stop(&self, id: &str) -> Result<bool, RayError> {
        #[derive(Deserialize)]
        struct Stopped {
            stopped: bool,
        }
        let body = self
            .send(
                "stop the job",
                self.request(reqwest::Method::POST, &format!("/api/jobs/{id}/stop")),
            )
            .await?;
        Ok(serde_json::from_str::<Stopped>(&body).is_ok_and(|s| s.stopped))
    }
}

/// An error with its sources, which reqwest keeps apart ("error sending
/// request" alone does not say "connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
