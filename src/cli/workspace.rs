//! Which folder the file tools, `bash`'s write roots, `source: "local"`
//! data and artifacts work in (docs §2.3.1): `--workspace DIR` / `-C DIR`,
//! else `[agent] workspace`, else the session's own folder. One resolution
//! for `run`, the workstation, `swarm run` and `mcp serve`: the folder is
//! checked once and made absolute and real, so confinement compares real
//! paths; a folder as broad as `$HOME` or `/` is confirmed first.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use super::{CliError, exit};
use crate::config::{Config, WorkspaceChoice};

/// Why the workspace cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("the workspace {} does not exist (from {from})", path.display())]
    Missing { path: PathBuf, from: String },
    #[error("the workspace {} is not a directory (from {from})", path.display())]
    NotADirectory { path: PathBuf, from: String },
    #[error("cannot open the workspace {} (from {from}): {source}", path.display())]
    Unreadable {
        path: PathBuf,
        from: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the current directory: {0}")]
    Cwd(#[source] std::io::Error),
    #[error(
        "the workspace {} is {what}: the agent could read and write anything in it. Pass --yes to work there anyway, or pick a project folder with --workspace DIR",
        path.display()
    )]
    TooBroad { path: PathBuf, what: &'static str },
    #[error("not started: working in {} was not confirmed", path.display())]
    Declined { path: PathBuf },
}

impl WorkspaceError {
    fn into_cli(self) -> CliError {
        let code = match self {
            WorkspaceError::Declined { .. } => exit::FAILED,
            _ => exit::USAGE,
        };
        CliError::new(code, self)
    }
}

/// Where a workspace choice came from, as an error names it.
fn flag_origin() -> String {
    "--workspace".to_string()
}

fn config_origin(config: &Config) -> String {
    let line = config
        .workspace
        .line
        .map(|l| format!(" line {l}"))
        .unwrap_or_default();
    format!(
        "`[agent] workspace` in {}{line}",
        config.config_file.display()
    )
}

/// The invoking user's home folder, for `~/` and the breadth check.
fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `raw` checked as a folder: `~/` expanded, made absolute against the
/// current directory, then real (symlinks resolved).
pub fn check_dir(raw: &Path, from: String, home: Option<&Path>) -> Result<PathBuf, WorkspaceError> {
    let expanded = match (raw.strip_prefix("~"), home) {
        (Ok(rest), Some(h)) => h.join(rest),
        _ => raw.to_path_buf(),
    };
    let absolute = std::path::absolute(&expanded).map_err(WorkspaceError::Cwd)?;
    match std::fs::metadata(&absolute) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(WorkspaceError::NotADirectory {
                path: absolute,
                from,
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(WorkspaceError::Missing {
                path: absolute,
                from,
            });
        }
        Err(source) => {
            return Err(WorkspaceError::Unreadable {
                path: absolute,
                from,
                source,
            });
        }
    }
    absolute
        .canonicalize()
        .map_err(|source| WorkspaceError::Unreadable {
            path: absolute.clone(),
            from,
            source,
        })
}

/// The chosen workspace: `--workspace` first, else `[agent] workspace`;
/// `None` is the session's own folder.
pub fn resolve(
    flag: Option<&Path>,
    config: &Config,
    home: Option<&Path>,
) -> Result<Option<PathBuf>, WorkspaceError> {
    if let Some(dir) = flag {
        return check_dir(dir, flag_origin(), home).map(Some);
    }
    match &config.workspace.choice {
        WorkspaceChoice::Session => Ok(None),
        WorkspaceChoice::Cwd => {
            let cwd = std::env::current_dir().map_err(WorkspaceError::Cwd)?;
            check_dir(&cwd, config_origin(config), home).map(Some)
        }
        WorkspaceChoice::Dir(dir) => check_dir(dir, config_origin(config), home).map(Some),
    }
}

/// `mcp serve`'s workspace: `--workspace`, else the current directory.
pub fn serve_workspace(flag: Option<&Path>) -> Result<PathBuf, CliError> {
    let home = home_dir();
    let dir = match flag {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().map_err(|e| WorkspaceError::Cwd(e).into_cli())?,
    };
    check_dir(&dir, flag_origin(), home.as_deref()).map_err(WorkspaceError::into_cli)
}

/// What makes a folder too broad to work in unasked: `/` or the home folder.
pub fn too_broad(dir: &Path, home: Option<&Path>) -> Option<&'static str> {
    if dir.parent().is_none() {
        return Some("the root folder");
    }
    let home = home.map(|h| h.canonicalize().unwrap_or_else(|_| h.to_path_buf()))?;
    (dir == home).then_some("your home folder")
}

/// How a command may confirm a broad workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Confirm {
    /// `--yes` was given: no question.
    Given,
    /// Ask y/N on the terminal (the workstation, or `run` on a terminal).
    Ask,
    /// Headless: refuse.
    Refuse,
}

impl Confirm {
    /// `--yes`, else ask when stdin and stderr are a terminal, else refuse.
    pub fn from_flag(yes: bool) -> Self {
        if yes {
            Confirm::Given
        } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
            Confirm::Ask
        } else {
            Confirm::Refuse
        }
    }
}

/// `Ok` when `dir` may be worked in: not broad, or confirmed by `--yes` or
/// by `ask` (which returns the user's answer).
pub fn confirm_broad(
    dir: &Path,
    home: Option<&Path>,
    how: Confirm,
    ask: &mut dyn FnMut(&str) -> bool,
) -> Result<(), WorkspaceError> {
    let Some(what) = too_broad(dir, home) else {
        return Ok(());
    };
    match how {
        Confirm::Given => Ok(()),
        Confirm::Refuse => Err(WorkspaceError::TooBroad {
            path: dir.to_path_buf(),
            what,
        }),
        Confirm::Ask => {
            let question = format!(
                "vibedesk: the workspace {} is {what}: the agent may read and write anything in it. Work there? [y/N] ",
                dir.display()
            );
            if ask(&question) {
                Ok(())
            } else {
                Err(WorkspaceError::Declined {
                    path: dir.to_path_buf(),
                })
            }
        }
    }
}

/// Asks on stderr, reads one line of stdin: `y` or `yes` agrees.
fn ask_on_terminal(question: &str) -> bool {
    let mut err = std::io::stderr();
    let _ = write!(err, "{question}");
    let _ = err.flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// A command's workspace, resolved, checked and confirmed: `None` is the
/// session's own folder.
pub fn for_command(
    flag: Option<&Path>,
    config: &Config,
    how: Confirm,
) -> Result<Option<PathBuf>, CliError> {
    let home = home_dir();
    let dir = resolve(flag, config, home.as_deref()).map_err(WorkspaceError::into_cli)?;
    if let Some(d) = &dir {
        confirm_broad(d, home.as_deref(), how, &mut ask_on_terminal)
            .map_err(WorkspaceError::into_cli)?;
    }
    Ok(dir)
}

/// `~/x` for a folder under the home folder, else the path as is.
pub fn shown(dir: &Path) -> String {
    let home = home_dir().and_then(|h| h.canonicalize().ok());
    match home.as_deref().and_then(|h| dir.strip_prefix(h).ok()) {
        Some(rest) if rest.as_os_str().is_empty() => "~".to_string(),
        Some(rest) => format!("~/{}", rest.display()),
        None => dir.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Overrides, WorkspaceSetting};
    use crate::store::Paths;
    use std::collections::BTreeMap;

    fn config_with(choice: WorkspaceChoice, line: Option<usize>) -> Config {
        let d = tempfile::tempdir().unwrap();
        let env: BTreeMap<String, String> = BTreeMap::new();
        let mut c = Config::load_with(Paths::under(d.path()), &env, &Overrides::default()).unwrap();
        c.workspace = WorkspaceSetting { choice, line };
        c
    }

    #[test]
    fn the_flag_beats_the_config_and_the_default_is_the_session() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let c = config_with(WorkspaceChoice::Dir(b.clone()), Some(3));
        let got = resolve(Some(&a), &c, None).unwrap().unwrap();
        assert_eq!(got, a.canonicalize().unwrap());
        let got = resolve(None, &c, None).unwrap().unwrap();
        assert_eq!(got, b.canonicalize().unwrap());
        let session = config_with(WorkspaceChoice::Session, None);
        assert_eq!(resolve(None, &session, None).unwrap(), None);
        let cwd = config_with(WorkspaceChoice::Cwd, Some(2));
        assert_eq!(
            resolve(None, &cwd, None).unwrap().unwrap(),
            std::env::current_dir().unwrap().canonicalize().unwrap()
        );
    }

    #[test]
    fn a_missing_folder_or_a_file_is_named_with_where_it_came_from() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("nope");
        let c = config_with(WorkspaceChoice::Dir(missing.clone()), Some(7));
        let e = resolve(None, &c, None).unwrap_err();
        assert!(matches!(e, WorkspaceError::Missing { .. }), "{e:?}");
        let text = e.to_string();
        assert!(text.contains(&missing.display().to_string()), "{text}");
        assert!(text.contains("`[agent] workspace`"), "{text}");
        assert!(text.contains("line 7"), "{text}");
        let file = d.path().join("f.txt");
        std::fs::write(&file, "x").unwrap();
        let e = resolve(Some(&file), &c, None).unwrap_err();
        assert!(matches!(e, WorkspaceError::NotADirectory { .. }), "{e:?}");
        assert!(e.to_string().contains("--workspace"), "{e}");
    }

    #[test]
    fn tilde_expands_and_links_resolve_to_the_real_folder() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("research");
        std::fs::create_dir_all(&real).unwrap();
        std::os::unix::fs::symlink(&real, d.path().join("link")).unwrap();
        let got = check_dir(Path::new("~/link"), flag_origin(), Some(d.path())).unwrap();
        assert_eq!(got, real.canonicalize().unwrap());
    }

    #[test]
    fn home_and_root_need_a_yes_or_an_answer() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().canonicalize().unwrap();
        let project = home.join("p");
        std::fs::create_dir_all(&project).unwrap();
        let mut never = |_: &str| -> bool { panic!("asked about a narrow folder") };
        assert!(confirm_broad(&project, Some(&home), Confirm::Refuse, &mut never).is_ok());
        let e = confirm_broad(&home, Some(&home), Confirm::Refuse, &mut never).unwrap_err();
        assert!(matches!(e, WorkspaceError::TooBroad { .. }), "{e:?}");
        assert!(e.to_string().contains("--yes"), "{e}");
        assert!(confirm_broad(Path::new("/"), None, Confirm::Refuse, &mut never).is_err());
        assert!(confirm_broad(&home, Some(&home), Confirm::Given, &mut never).is_ok());
        let mut asked = Vec::new();
        let mut no = |q: &str| {
            asked.push(q.to_string());
            false
        };
        let e = confirm_broad(&home, Some(&home), Confirm::Ask, &mut no).unwrap_err();
        assert!(matches!(e, WorkspaceError::Declined { .. }), "{e:?}");
        assert!(asked[0].contains("[y/N]"), "{asked:?}");
        assert!(confirm_broad(Path::new("/"), None, Confirm::Ask, &mut |_| true).is_ok());
    }

    #[test]
    fn config_values_parse_and_an_empty_one_is_refused_with_its_line() {
        assert_eq!(
            WorkspaceChoice::parse("session"),
            Some(WorkspaceChoice::Session)
        );
        assert_eq!(WorkspaceChoice::parse("cwd"), Some(WorkspaceChoice::Cwd));
        assert_eq!(
            WorkspaceChoice::parse("/r"),
            Some(WorkspaceChoice::Dir(PathBuf::from("/r")))
        );
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("config.toml");
        std::fs::write(&file, "[agent]\nmax_iterations = 5\nworkspace = \" \"\n").unwrap();
        let env: BTreeMap<String, String> =
            [("VIBEDESK_CONFIG".to_string(), file.display().to_string())].into();
        let e = Config::load_with(Paths::under(d.path()), &env, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 3") && e.contains("[agent] workspace"),
            "{e}"
        );
        std::fs::write(&file, "[agent]\nworkspace = \"cwd\"\n").unwrap();
        let c = Config::load_with(Paths::under(d.path()), &env, &Overrides::default()).unwrap();
        assert_eq!(c.workspace.choice, WorkspaceChoice::Cwd);
        assert_eq!(c.workspace.line, Some(2));
    }
}
