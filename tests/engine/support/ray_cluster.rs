//! A real two-node Ray cluster on this machine for the Ray engine's tests
//! (docs §19.5): `ray start --head` and a second `ray start --address`, each
//! with `--block` in a session of its own, its own temp dir and ports
//! outside 10002–19999 (other services own that range). Ray puts each of
//! its workers in a process group of its own but leaves them in the node's
//! session, so a node is exactly its session's processes. Dropping the
//! cluster ends those two sessions and nothing else: no `ray stop`, which
//! would stop every cluster of the machine.
//!
//! The `ray` executable comes from `VIBEDESK_RAY_BIN`, else `PATH`. Without
//! one the tests say so and pass, unless `VIBEDESK_REQUIRE_RAY` is set (CI,
//! which installs Ray), where they fail.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;

use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The range Ray's ports must stay out of.
pub const FORBIDDEN: std::ops::RangeInclusive<u16> = 10002..=19999;
/// Ports a node takes from its base: see [`node_args`].
const PORTS_PER_NODE: u16 = 40;

/// The `ray` executable, or why there is none.
pub fn ray_bin() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("VIBEDESK_RAY_BIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("VIBEDESK_RAY_BIN={} is not a file", p.display()))
        };
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("ray"))
        .find(|p| p.is_file())
        .ok_or_else(|| "no `ray` on PATH and VIBEDESK_RAY_BIN is not set".to_string())
}

/// The `ray` executable, `None` (after saying why) when the tests may skip.
pub fn ray_or_skip(test: &str) -> Option<PathBuf> {
    match ray_bin() {
        Ok(p) => Some(p),
        Err(why) => {
            assert!(
                std::env::var_os("VIBEDESK_REQUIRE_RAY").is_none(),
                "{test}: Ray is required here (VIBEDESK_REQUIRE_RAY is set) but {why}; .ci/run installs it"
            );
            eprintln!(
                "SKIPPED {test}: {why} (pip install \"ray[default]==2.60.0\" and set VIBEDESK_RAY_BIN)"
            );
            None
        }
    }
}

/// A base port with `2 * PORTS_PER_NODE` free ports above it, in
/// 20000–31999: above the forbidden range, below the kernel's ephemeral
/// ports (where Ray's unnamed ports land).
fn free_base() -> u16 {
    let seed = std::process::id() as u64 ^ Instant::now().elapsed().as_nanos() as u64;
    for attempt in 0..200u64 {
        let slot = (seed.wrapping_mul(2654435761).wrapping_add(attempt * 7919)) % 140;
        let base = 20000 + (slot as u16) * (2 * PORTS_PER_NODE + 5);
        if (base..base + 2 * PORTS_PER_NODE).all(|p| TcpListener::bind(("0.0.0.0", p)).is_ok()) {
            return base;
        }
    }
    panic!("no block of free ports in 20000-31999");
}

/// A node's own ports, all from `base`: node manager, object manager,
/// metrics, the dashboard agent's two, the runtime-env agent and 20 worker
/// ports; the head adds the GCS, the dashboard and the client server.
fn node_args(base: u16, head: bool) -> Vec<String> {
    let mut a = vec![
        format!("--node-manager-port={}", base + 3),
        format!("--object-manager-port={}", base + 4),
        format!("--metrics-export-port={}", base + 5),
        format!("--dashboard-agent-listen-port={}", base + 6),
        format!("--dashboard-agent-grpc-port={}", base + 7),
        format!("--runtime-env-agent-port={}", base + 8),
        format!("--min-worker-port={}", base + 10),
        format!("--max-worker-port={}", base + 29),
        "--num-cpus=1".to_string(),
        "--object-store-memory=80000000".to_string(),
        "--disable-usage-stats".to_string(),
        "--block".to_string(),
    ];
    if head {
        a.extend([
            "--head".to_string(),
            format!("--port={base}"),
            "--dashboard-host=127.0.0.1".to_string(),
            format!("--dashboard-port={}", base + 1),
            format!("--ray-client-server-port={}", base + 2),
        ]);
    }
    a
}

pub struct RayCluster {
    pub ray: PathBuf,
    /// `http://127.0.0.1:<dashboard>`.
    pub dashboard: String,
    pub base: u16,
    head: Option<Child>,
    worker: Option<Child>,
    /// Holds the nodes' temp dirs (and their logs) until the drop.
    pub dir: tempfile::TempDir,
}

impl RayCluster {
    /// Starts the head and the worker and waits until the dashboard
    /// answers and both nodes are alive.
    pub fn start(ray: PathBuf) -> RayCluster {
        let dir = tempfile::tempdir().unwrap();
        for d in ["vibedesk-home", "home"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        let base = free_base();
        let mut cluster = RayCluster {
            ray,
            dashboard: format!("http://127.0.0.1:{}", base + 1),
            base,
            head: None,
            worker: None,
            dir,
        };
        cluster.head = Some(cluster.spawn("head", node_args(base, true)));
        cluster.wait_for_nodes(1);
        let mut worker = node_args(base + PORTS_PER_NODE, false);
        worker.push(format!("--address=127.0.0.1:{base}"));
        cluster.worker = Some(cluster.spawn("worker", worker));
        cluster.wait_for_nodes(2);
        cluster
    }

    fn spawn(&self, name: &str, args: Vec<String>) -> Child {
        let temp = self.dir.path().join(name);
        std::fs::create_dir_all(&temp).unwrap();
        let log = std::fs::File::create(self.dir.path().join(format!("{name}.log"))).unwrap();
        // The venv's bin first, so the job's `python` is the one with Ray.
        let bin_dir = self.ray.parent().unwrap_or(Path::new("/"));
        let path = std::env::join_paths(
            std::iter::once(bin_dir.to_path_buf()).chain(
                std::env::var_os("PATH")
                    .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                    .unwrap_or_default(),
            ),
        )
        .unwrap();
        let mut c = Command::new(&self.ray);
        c.arg("start")
            .args(args)
            .arg(format!("--temp-dir={}", temp.display()))
            .env("PATH", path)
            .env("RAY_USAGE_STATS_ENABLED", "0")
            // What the shards run with: a home of the test's, not the real one.
            .env("VIBEDESK_HOME", self.dir.path().join("vibedesk-home"))
            .env("HOME", self.dir.path().join("home"))
            .env_remove("RAY_ADDRESS")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        // A session of its own: the drop ends exactly this node.
        // SAFETY: setsid is async-signal-safe; nothing else runs in the child.
        unsafe {
            c.pre_exec(|| {
                nix::unistd::setsid()
                    .map(|_| ())
                    .map_err(std::io::Error::from)
            });
        }
        c.spawn().unwrap()
    }

    /// Waits (up to 90 s) until `n` nodes are alive.
    fn wait_for_nodes(&mut self, n: usize) {
        let started = Instant::now();
        let url = format!("{}/nodes?view=summary", self.dashboard);
        loop {
            if let Some(alive) = get_json(&url).map(|v| alive_nodes(&v))
                && alive >= n
            {
                return;
            }
            for (name, child) in [("head", &mut self.head), ("worker", &mut self.worker)] {
                if let Some(c) = child
                    && let Ok(Some(status)) = c.try_wait()
                {
                    let log = std::fs::read_to_string(self.dir.path().join(format!("{name}.log")));
                    panic!("ray {name} exited ({status}): {}", log.unwrap_or_default());
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(90),
                "{n} Ray node(s) not alive after 90 s: {}",
                self.log("head")
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default()
    }

    /// The sessions this cluster started (one per node).
    pub fn sessions(&self) -> Vec<i32> {
        [&self.head, &self.worker]
            .into_iter()
            .flatten()
            .map(|c| c.id() as i32)
            .collect()
    }

    /// The worker node's session.
    pub fn worker_session(&self) -> Option<i32> {
        self.worker.as_ref().map(|c| c.id() as i32)
    }

    /// Kills the worker node outright (every process of its session,
    /// shards included), as a machine lost mid-job.
    pub fn kill_worker(&mut self) {
        if let Some(mut c) = self.worker.take() {
            let session = [c.id() as i32];
            // Twice: a process forked while the first pass ran dies too.
            for _ in 0..2 {
                kill_all(&pids_in_sessions(&session), Signal::SIGKILL);
            }
            let _ = c.wait();
        }
    }

    /// Every TCP port a process of this cluster listens on.
    pub fn listening_ports(&self) -> Vec<u16> {
        let mut inodes = std::collections::HashSet::new();
        for pid in pids_in_sessions(&self.sessions()) {
            let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
                continue;
            };
            for fd in fds.flatten() {
                if let Ok(target) = std::fs::read_link(fd.path()) {
                    let t = target.to_string_lossy();
                    if let Some(inode) =
                        t.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']'))
                    {
                        inodes.insert(inode.to_string());
                    }
                }
            }
        }
        let mut ports = Vec::new();
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            for line in std::fs::read_to_string(table)
                .unwrap_or_default()
                .lines()
                .skip(1)
            {
                let f: Vec<&str> = line.split_whitespace().collect();
                // State 0A is LISTEN.
                if f.len() > 9 && f[3] == "0A" && inodes.contains(f[9]) {
                    let port = f[1].rsplit(':').next().unwrap_or("0");
                    ports.push(u16::from_str_radix(port, 16).unwrap_or(0));
                }
            }
        }
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// Ray's node ids of the head and the worker, by their node-manager
    /// ports.
    pub fn node_ids(&self) -> (String, String) {
        let v = get_json(&format!("{}/nodes?view=summary", self.dashboard)).unwrap();
        let id = |port: u16| {
            v["data"]["summary"]
                .as_array()
                .unwrap()
                .iter()
                .find(|n| n["raylet"]["nodeManagerPort"].as_u64() == Some(u64::from(port)))
                .and_then(|n| n["raylet"]["nodeId"].as_str())
                .unwrap()
                .to_string()
        };
        (id(self.base + 3), id(self.base + PORTS_PER_NODE + 3))
    }

    /// Command lines of this cluster's processes that contain `needle`.
    pub fn command_lines(&self, sessions: &[i32], needle: &str) -> Vec<String> {
        pids_in_sessions(sessions)
            .into_iter()
            .filter_map(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains(needle))
            .collect()
    }
}

impl Drop for RayCluster {
    fn drop(&mut self) {
        let sessions = self.sessions();
        kill_all(&pids_in_sessions(&sessions), Signal::SIGTERM);
        // Ray's own shutdown takes over 10 s; nothing needs keeping.
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline && !pids_in_sessions(&sessions).is_empty() {
            std::thread::sleep(Duration::from_millis(200));
        }
        for _ in 0..3 {
            kill_all(&pids_in_sessions(&sessions), Signal::SIGKILL);
        }
        for c in [self.head.as_mut(), self.worker.as_mut()]
            .into_iter()
            .flatten()
        {
            let _ = c.wait();
        }
    }
}

/// Signals each of `pids`: processes of our own sessions only.
fn kill_all(pids: &[i32], signal: Signal) {
    for &pid in pids {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
    }
}

/// Live processes whose session is one of `sessions`.
pub fn pids_in_sessions(sessions: &[i32]) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command's closing parenthesis: state, ppid,
        // pgrp, session.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 3 && f[0] != "Z" && f[3].parse::<i32>().is_ok_and(|s| sessions.contains(&s)) {
            out.push(pid);
        }
    }
    out
}

/// A plain HTTP/1.0 GET on loopback (no client crate needed here).
pub fn get_json(url: &str) -> Option<serde_json::Value> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let addr: std::net::SocketAddr = host.parse().ok()?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").ok()?;
    let mut body = Vec::new();
    s.read_to_end(&mut body).ok()?;
    let text = String::from_utf8_lossy(&body);
    let (head, json) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return None;
    }
    serde_json::from_str(json).ok()
}

fn alive_nodes(v: &serde_json::Value) -> usize {
    v["data"]["summary"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|n| n["raylet"]["state"].as_str() == Some("ALIVE"))
                .count()
        })
        .unwrap_or(0)
}
