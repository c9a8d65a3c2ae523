//! A monitor's definition (docs §21.2): its schedule and time zone, its one
//! job, where its verdict goes and when, and its verdict contract; checked
//! when added and again when read back.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::channels::{Channel, ChannelError};
use super::cron::{CronError, Schedule};
use super::store::MonitorRow;
use super::verdict::Contract;

/// What a fire runs: one ordinary headless command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Job {
    /// `vibedesk run --json -p PROMPT`.
    Prompt { prompt: String },
    /// `vibedesk swarm run PRESET --var k=v…`.
    Team {
        preset: String,
        #[serde(default)]
        vars: BTreeMap<String, String>,
    },
    /// `vibedesk sweep run SPEC`.
    Sweep { spec: PathBuf },
}

impl Job {
    pub fn kind(&self) -> &'static str {
        match self {
            Job::Prompt { .. } => "prompt",
            Job::Team { .. } => "team",
            Job::Sweep { .. } => "sweep",
        }
    }

    /// One line for listings.
    pub fn describe(&self) -> String {
        match self {
            Job::Prompt { prompt } => format!("prompt \"{}\"", crate::text::preview(prompt, 60)),
            Job::Team { preset, vars } => {
                let vars: Vec<String> = vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
                if vars.is_empty() {
                    format!("team {preset}")
                } else {
                    format!("team {preset} ({})", vars.join(", "))
                }
            }
            Job::Sweep { spec } => format!("sweep {}", spec.display()),
        }
    }
}

/// When a fire's verdict is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notify {
    /// Only when a tracked symbol's state changed since the last verdict.
    Change,
    /// After every fire.
    Always,
}

impl Notify {
    pub fn as_str(self) -> &'static str {
        match self {
            Notify::Change => "change",
            Notify::Always => "always",
        }
    }
}

impl std::str::FromStr for Notify {
    type Err = DefError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "change" => Ok(Notify::Change),
            "always" => Ok(Notify::Always),
            other => Err(DefError::Notify(other.to_string())),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DefError {
    #[error(
        "monitor name '{0}': use 1 to 64 letters, digits, '-' or '_' (it names files and commands)"
    )]
    Name(String),
    #[error("--cron: {0}")]
    Cron(#[from] CronError),
    #[error("--tz '{0}': not an IANA time zone such as America/New_York, Europe/London or UTC")]
    Tz(String),
    #[error("--notify '{0}': use change or always")]
    Notify(String),
    #[error("--deliver {0}")]
    Channel(#[from] ChannelError),
    #[error("stored job of '{name}' cannot be read: {why}")]
    Job { name: String, why: String },
}

/// A monitor, checked.
#[derive(Clone, Debug)]
pub struct Monitor {
    pub name: String,
    pub cron: String,
    pub schedule: Schedule,
    pub tz: chrono_tz::Tz,
    pub job: Job,
    pub deliver: Vec<Channel>,
    pub notify: Notify,
    pub paused: bool,
    pub contract: Contract,
    pub created: DateTime<Utc>,
    /// Slots count from here (creation or the last resume).
    pub since: DateTime<Utc>,
}

pub fn check_name(name: &str) -> Result<(), DefError> {
    let ok = (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(DefError::Name(name.to_string()))
    }
}

pub fn parse_tz(tz: &str) -> Result<chrono_tz::Tz, DefError> {
    tz.trim()
        .parse::<chrono_tz::Tz>()
        .map_err(|_| DefError::Tz(tz.to_string()))
}

fn from_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

impl Monitor {
    pub fn from_row(row: &MonitorRow) -> Result<Monitor, DefError> {
        let job_error = |why: String| DefError::Job {
            name: row.name.clone(),
            why,
        };
        let job: Job = serde_json::from_str(&row.job_spec).map_err(|e| job_error(e.to_string()))?;
        let contract = match &row.contract {
            None => Contract::default(),
            Some(c) => serde_json::from_str(c).map_err(|e| job_error(e.to_string()))?,
        };
        Ok(Monitor {
            name: row.name.clone(),
            cron: row.cron.clone(),
            schedule: Schedule::parse(&row.cron)?,
            tz: parse_tz(&row.tz)?,
            job,
            deliver: row
                .deliver
                .iter()
                .map(|d| d.parse())
                .collect::<Result<_, _>>()?,
            notify: row.notify.parse()?,
            paused: row.paused,
            contract,
            created: from_ms(row.created_ms),
            since: from_ms(row.since_ms),
        })
    }

    pub fn to_row(&self) -> MonitorRow {
        MonitorRow {
            name: self.name.clone(),
            cron: self.cron.clone(),
            tz: self.tz.name().to_string(),
            job_kind: self.job.kind().to_string(),
            job_spec: serde_json::to_string(&self.job).unwrap_or_default(),
            deliver: self.deliver.iter().map(Channel::to_string).collect(),
            notify: self.notify.as_str().to_string(),
            paused: self.paused,
            contract: serde_json::to_string(&self.contract).ok(),
            created_ms: self.created.timestamp_millis(),
            since_ms: self.since.timestamp_millis(),
        }
    }

    /// The first slot strictly after `t`.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.schedule.next_after(t, self.tz)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_time_zones_and_notify_are_checked() {
        assert!(check_name("close-screen_1").is_ok());
        for bad in ["", "a b", "../x", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_tz("America/New_York").unwrap().name(),
            "America/New_York"
        );
        assert!(
            parse_tz("Mars/Olympus")
                .unwrap_err()
                .to_string()
                .contains("IANA")
        );
        assert!("sometimes".parse::<Notify>().is_err());
    }

    #[test]
    fn jobs_are_stored_as_tagged_json() {
        let job = Job::Team {
            preset: "pairs_desk".into(),
            vars: BTreeMap::from([("universe".into(), "KO,PEP".into())]),
        };
        let text = serde_json::to_string(&job).unwrap();
        assert_eq!(
            text,
            r#"{"kind":"team","preset":"pairs_desk","vars":{"universe":"KO,PEP"}}"#
        );
        assert_eq!(serde_json::from_str::<Job>(&text).unwrap(), job);
        assert_eq!(job.describe(), "team pairs_desk (universe=KO,PEP)");
    }
}
