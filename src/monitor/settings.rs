//! `[monitor]` and `[smtp]` of `config.toml` (docs §21.2, §21.4): the
//! approval mode fires run under, the outbox's lease and retry timings, the
//! webhook secret's variable, and the SMTP server. Secrets are named by
//! environment variable only, so the file never holds one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::model::approval::ApprovalMode;

/// The variable holding the webhook secret unless `[monitor]
/// webhook_secret_env` names another.
pub const DEFAULT_WEBHOOK_SECRET_ENV: &str = "VIBEDESK_WEBHOOK_SECRET";
/// The variable holding the SMTP password unless `[smtp] password_env`
/// names another.
pub const DEFAULT_SMTP_PASSWORD_ENV: &str = "VIBEDESK_SMTP_PASSWORD";

#[derive(Debug, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct SettingsError {
    path: PathBuf,
    problem: String,
}

/// `[monitor]` as written; every key optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MonitorSection {
    approval: Option<String>,
    lease_seconds: Option<f64>,
    max_tries: Option<u32>,
    retry_base_seconds: Option<f64>,
    retry_max_seconds: Option<f64>,
    send_timeout_seconds: Option<f64>,
    webhook_secret_env: Option<String>,
    /// How long SIGTERM waits for a running fire before marking it.
    stop_grace_seconds: Option<f64>,
}

/// `[smtp]` as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SmtpSection {
    host: Option<String>,
    port: Option<u16>,
    from: Option<String>,
    user: Option<String>,
    password_env: Option<String>,
    starttls: Option<String>,
}

/// Whether the SMTP connection must upgrade to TLS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StartTls {
    /// Refuse to send when the server offers no STARTTLS (the default).
    #[default]
    Required,
    /// Upgrade when offered, else send in the clear (a local relay).
    Opportunistic,
    /// Never upgrade (a loopback test server).
    Never,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmtpSettings {
    pub host: String,
    pub port: u16,
    pub from: String,
    pub user: Option<String>,
    pub password_env: String,
    pub starttls: StartTls,
}

/// The monitors' settings, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct MonitorSettings {
    pub approval: ApprovalMode,
    pub lease: Duration,
    pub max_tries: u32,
    pub retry_base: Duration,
    pub retry_max: Duration,
    pub send_timeout: Duration,
    pub webhook_secret_env: String,
    pub stop_grace: Duration,
    pub smtp: Option<SmtpSettings>,
}

impl Default for MonitorSettings {
    fn default() -> Self {
        MonitorSettings {
            approval: ApprovalMode::ReadOnly,
            lease: Duration::from_secs(60),
            max_tries: 8,
            retry_base: Duration::from_secs(30),
            retry_max: Duration::from_secs(3600),
            send_timeout: Duration::from_secs(20),
            webhook_secret_env: DEFAULT_WEBHOOK_SECRET_ENV.to_string(),
            stop_grace: Duration::from_secs(30),
            smtp: None,
        }
    }
}

impl MonitorSettings {
    /// Reads `[monitor]` and `[smtp]` of the config file's table.
    pub fn from_table(table: &toml::Table, path: &Path) -> Result<Self, SettingsError> {
        let fail = |problem: String| SettingsError {
            path: path.to_path_buf(),
            problem,
        };
        let monitor: MonitorSection = match table.get("monitor") {
            None => MonitorSection::default(),
            Some(v) => v
                .clone()
                .try_into()
                .map_err(|e| fail(format!("[monitor]: {e}")))?,
        };
        let smtp: Option<SmtpSection> = table
            .get("smtp")
            .map(|v| v.clone().try_into())
            .transpose()
            .map_err(|e| fail(format!("[smtp]: {e}")))?;
        let d = MonitorSettings::default();
        let secs = |v: Option<f64>, key: &str, default: Duration| match v {
            None => Ok(default),
            Some(s) => Duration::try_from_secs_f64(s)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    fail(format!(
                        "[monitor] {key} must be a positive number of seconds"
                    ))
                }),
        };
        let approval = match monitor.approval.as_deref() {
            None => d.approval,
            Some(m) => m
                .parse::<ApprovalMode>()
                .map_err(|e| fail(format!("[monitor] approval: {e}")))?,
        };
        let max_tries = monitor.max_tries.unwrap_or(d.max_tries);
        if max_tries == 0 {
            return Err(fail("[monitor] max_tries must be at least 1".into()));
        }
        Ok(MonitorSettings {
            approval,
            lease: secs(monitor.lease_seconds, "lease_seconds", d.lease)?,
            max_tries,
            retry_base: secs(
                monitor.retry_base_seconds,
                "retry_base_seconds",
                d.retry_base,
            )?,
            retry_max: secs(monitor.retry_max_seconds, "retry_max_seconds", d.retry_max)?,
            send_timeout: secs(
                monitor.send_timeout_seconds,
                "send_timeout_seconds",
                d.send_timeout,
            )?,
            webhook_secret_env: monitor.webhook_secret_env.unwrap_or(d.webhook_secret_env),
            stop_grace: secs(
                monitor.stop_grace_seconds,
                "stop_grace_seconds",
                d.stop_grace,
            )?,
            smtp: smtp.map(|s| smtp_settings(s, &fail)).transpose()?,
        })
    }

    /// The pause before try `tries + 1`: the base doubled per failed try,
    /// capped.
    pub fn backoff(&self, tries: u32) -> Duration {
        let factor = 1_u32
            .checked_shl(tries.saturating_sub(1).min(20))
            .unwrap_or(u32::MAX);
        self.retry_base
            .checked_mul(factor)
            .unwrap_or(self.retry_max)
            .min(self.retry_max)
    }

    /// The webhook secret from the environment, if set.
    pub fn webhook_secret(&self) -> Option<String> {
        crate::secrets::var(&self.webhook_secret_env).filter(|s| !s.is_empty())
    }
}

fn smtp_settings(
    s: SmtpSection,
    fail: &dyn Fn(String) -> SettingsError,
) -> Result<SmtpSettings, SettingsError> {
    let host = s
        .host
        .filter(|h| !h.trim().is_empty())
        .ok_or_else(|| fail("[smtp] host is required".into()))?;
    let from = s
        .from
        .filter(|f| f.contains('@'))
        .ok_or_else(|| fail("[smtp] from must be an address such as desk@example.com".into()))?;
    let starttls = match s.starttls.as_deref() {
        None | Some("required") => StartTls::Required,
        Some("opportunistic") => StartTls::Opportunistic,
        Some("never") => StartTls::Never,
        Some(other) => {
            return Err(fail(format!(
                "[smtp] starttls '{other}': use required, opportunistic or never"
            )));
        }
    };
    Ok(SmtpSettings {
        host,
        port: s.port.unwrap_or(587),
        from,
        user: s.user,
        password_env: s
            .password_env
            .unwrap_or_else(|| DEFAULT_SMTP_PASSWORD_ENV.to_string()),
        starttls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<MonitorSettings, SettingsError> {
        MonitorSettings::from_table(&toml::from_str(text).unwrap(), Path::new("c.toml"))
    }

    #[test]
    fn defaults_are_read_only_with_no_smtp() {
        let s = read("").unwrap();
        assert_eq!(s, MonitorSettings::default());
        assert_eq!(s.approval, ApprovalMode::ReadOnly);
    }

    #[test]
    fn sections_are_checked_with_the_key_named() {
        let s = read(
            "[monitor]\napproval = \"ask\"\nlease_seconds = 0.5\nmax_tries = 3\n\
             [smtp]\nhost = \"127.0.0.1\"\nport = 2525\nfrom = \"d@x.org\"\nstarttls = \"never\"\n",
        )
        .unwrap();
        assert_eq!(s.approval, ApprovalMode::Ask);
        assert_eq!(s.lease, Duration::from_millis(500));
        let smtp = s.smtp.unwrap();
        assert_eq!((smtp.port, smtp.starttls), (2525, StartTls::Never));
        for (bad, says) in [
            ("[monitor]\napproval = \"yolo\"\n", "approval"),
            ("[monitor]\nlease_seconds = -1\n", "lease_seconds"),
            ("[monitor]\nleese = 1\n", "leese"),
            ("[smtp]\nfrom = \"d@x.org\"\n", "host"),
            (
                "[smtp]\nhost = \"h\"\nfrom = \"d@x.org\"\nstarttls = \"maybe\"\n",
                "maybe",
            ),
        ] {
            let e = read(bad).unwrap_err().to_string();
            assert!(e.contains(says) && e.starts_with("c.toml"), "{bad}: {e}");
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let s = MonitorSettings {
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(10),
            ..MonitorSettings::default()
        };
        let got: Vec<u64> = (1..=6).map(|t| s.backoff(t).as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 10, 10]);
        assert_eq!(s.backoff(u32::MAX), Duration::from_secs(10));
    }
}
