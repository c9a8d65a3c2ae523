//! Where vibedesk keeps things. `VIBEDESK_HOME` moves every path under one
//! directory (tests always set it); otherwise the platform's config, data,
//! cache and state directories are used (XDG on Linux).

use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    pub config_dir: PathBuf,
    pub data_dir: PathBuf,
    pub cache_dir: PathBuf,
    /// Logs and other per-machine state.
    pub state_dir: PathBuf,
}

impl Paths {
    /// Resolves from the environment: `VIBEDESK_HOME` if set and non-empty,
    /// else the platform directories. `None` only when no home directory can
    /// be found at all.
    pub fn from_env() -> Option<Self> {
        match std::env::var_os("VIBEDESK_HOME").filter(|v| !v.is_empty()) {
            Some(home) => Some(Self::under(Path::new(&home))),
            None => {
                let dirs = directories::ProjectDirs::from("", "", "vibedesk")?;
                Some(Paths {
                    config_dir: dirs.config_dir().to_path_buf(),
                    data_dir: dirs.data_dir().to_path_buf(),
                    cache_dir: dirs.cache_dir().to_path_buf(),
                    state_dir: dirs
                        .state_dir()
                        .map(Path::to_path_buf)
                        .unwrap_or_else(|| dirs.data_dir().join("state")),
                })
            }
        }
    }

    /// Everything under one root: `config/`, `data/`, `cache/`, `state/`.
    pub fn under(root: &Path) -> Self {
        Paths {
            config_dir: root.join("config"),
            data_dir: root.join("data"),
            cache_dir: root.join("cache"),
            state_dir: root.join("state"),
        }
    }

    pub fn config_file(&self) -> PathBuf {
        self.config_dir.join("config.toml")
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.data_dir.join("sessions")
    }

    pub fn session_dir(&self, session_id: &str) -> PathBuf {
        self.sessions_dir().join(session_id)
    }

    pub fn runs_dir(&self) -> PathBuf {
        self.data_dir.join("runs")
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.state_dir.join("logs")
    }

    /// Records of running sandbox jobs (pids are per machine: state).
    pub fn jobs_dir(&self) -> PathBuf {
        self.state_dir.join("jobs")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_root_moves_everything() {
        let p = Paths::under(Path::new("/tmp/x"));
        assert_eq!(p.config_file(), Path::new("/tmp/x/config/config.toml"));
        assert_eq!(p.session_dir("ab"), Path::new("/tmp/x/data/sessions/ab"));
        assert_eq!(p.runs_dir(), Path::new("/tmp/x/data/runs"));
        for d in [&p.config_dir, &p.data_dir, &p.cache_dir, &p.state_dir] {
            assert!(d.starts_with("/tmp/x"));
        }
    }
}
