//! One writer per results file (docs §18.3): a run holds an exclusive,
//! advisory `flock` on `<out>.sweep/lock` from before it reads the journal
//! until it ends, and the folder belongs to one plan.
//!
//! A second run on the same `out` while the first holds the lock is refused
//! with the first's pid and plan hash (read from the lock file). A run of
//! another plan on an `out` that already holds one is refused too, rather
//! than starting over on top of it: the first plan's finished cells are
//! not thrown away by a different spec given the same name. The lock is the
//! kernel's, so a run killed by SIGKILL leaves nothing to clean up.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest, Sha256};

use super::SweepError;
use super::plan::Plan;

/// The held lock; dropping it releases the folder.
pub struct Claim {
    _lock: Flock<File>,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Claim")
    }
}

/// The first 16 hex digits of a hash.
fn short(hash: &str) -> &str {
    hash.get(..16).unwrap_or(hash)
}

/// The hash of the plan a state folder was started with: the sha256 of its
/// `plan.json`, which [`Plan::save`] writes as the bytes [`Plan::hash`]
/// digests; `None` when there is none.
fn saved_hash(state: &Path) -> Option<String> {
    let mut file = File::open(state.join("plan.json")).ok()?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(buf.get(..n)?),
            Err(_) => return None,
        }
    }
    Some(
        hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

impl Claim {
    /// Takes `<state>/lock` for `plan`, writing `out`'s results: refused
    /// when another run holds it, or when `state` was started with another
    /// plan.
    pub fn take(state: &Path, out: &Path, plan: &Plan) -> Result<Claim, SweepError> {
        let path = state.join("lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(SweepError::io("open", &path))?;
        let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((file, Errno::EWOULDBLOCK)) => {
                let mut holder = String::new();
                let _ = file.take(512).read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(SweepError::Busy(format!(
                    "another sweep is writing {} ({}): one sweep at a time per results file; wait for it to finish (running it again afterwards resumes) or give another out",
                    out.display(),
                    if holder.is_empty() {
                        "its pid is not recorded yet".to_string()
                    } else {
                        holder.to_string()
                    }
                )));
            }
            Err((_, e)) => {
                return Err(SweepError::io("lock", &path)(std::io::Error::from(e)));
            }
        };
        let hash = plan.hash();
        if let Some(old) = saved_hash(state)
            && old != hash
        {
            return Err(SweepError::OtherPlan(format!(
                "{} belongs to another sweep (plan {}; this spec's plan is {}): a results file holds one plan, so give this sweep another out, or delete {} to start that one over",
                out.display(),
                short(&old),
                short(&hash),
                state.display()
            )));
        }
        let who = format!(
            "pid {}, plan {}, started {}\n",
            std::process::id(),
            short(&hash),
            chrono::Local::now().format("%Y-%m-%d %H:%M:%S")
        );
        let written = lock
            .set_len(0)
            .and_then(|()| lock.rewind())
            .and_then(|()| lock.write_all(who.as_bytes()));
        written.map_err(SweepError::io("write", &path))?;
        Ok(Claim { _lock: lock })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::Spec;
    use serde_json::json;

    fn plan(fast: i64) -> Plan {
        let spec = Spec::from_value(
            json!({"base": {"codes": ["AAPL"], "start_date": "2005-01-01", "end_date": "2006-12-31",
            "strategy": {"name": "sma_crossover"}},
            "axes": {"strategy.params.fast": [fast], "strategy.params.slow": [50]}}),
        )
        .unwrap();
        Plan::from_spec(&spec).unwrap()
    }

    #[test]
    fn one_writer_per_out_and_one_plan_per_folder() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.csv");
        let state = dir.path().join("r.csv.sweep");
        std::fs::create_dir_all(&state).unwrap();
        let a = plan(5);
        let first = Claim::take(&state, &out, &a).unwrap();
        a.save(&state.join("plan.json")).unwrap();
        // A second open file description conflicts, even in this process.
        let e = Claim::take(&state, &out, &a).unwrap_err();
        assert_eq!(e.code(), "sweep_busy");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("pid {}", std::process::id())) && msg.contains(&a.short_hash()),
            "{msg}"
        );
        drop(first);
        // Released: the same plan resumes; another plan is refused.
        drop(Claim::take(&state, &out, &a).unwrap());
        let e = Claim::take(&state, &out, &plan(10)).unwrap_err();
        assert_eq!(e.code(), "out_has_another_plan");
        assert!(e.to_string().contains(&a.short_hash()), "{e}");
    }
}
