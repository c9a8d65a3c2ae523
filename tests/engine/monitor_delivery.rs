//! Exactly-once delivery across crashes (docs §21.4): 200 deliveries to a
//! real HTTP receiver and a real SMTP server (aiosmtpd) on loopback while
//! the real daemon is killed with SIGKILL at random points and started
//! again. Every delivery arrives, once per fire and channel by its key; raw
//! repeats are at most one per kill; nothing stays claimed.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use vibedesk::monitor::channels::signature;
use vibedesk::monitor::daemon::record;
use vibedesk::monitor::def::{Job, Monitor, Notify};
use vibedesk::monitor::runner::RunOutput;
use vibedesk::monitor::store::{Store, Trigger};
use vibedesk::monitor::verdict::Contract;

use crate::support::outside::Outside;

const SECRET: &str = "loopback-test-secret";
const FIRES: usize = 100;

/// An HTTP/1.1 receiver that answers 200 and keeps each request's key,
/// checking its signature.
#[derive(Default)]
struct Received {
    keys: Vec<String>,
    bad_signatures: usize,
}

fn serve_http(listener: TcpListener, got: Arc<Mutex<Received>>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let got = got.clone();
        std::thread::spawn(move || {
            let _ = handle_connection(stream, &got);
        });
    }
}

fn handle_connection(stream: TcpStream, got: &Mutex<Received>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut headers = BTreeMap::new();
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        loop {
            let mut h = String::new();
            reader.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let len: usize = headers
            .get("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body)?;
        {
            let mut g = got.lock().unwrap();
            if headers.get("x-vibedesk-signature") != Some(&signature(SECRET.as_bytes(), &body)) {
                g.bad_signatures += 1;
            }
            g.keys
                .push(headers.get("idempotency-key").cloned().unwrap_or_default());
        }
        out.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")?;
        out.flush()?;
    }
}

const SMTP_HANDLER: &str = r#"
import email

class Recorder:
    def __init__(self, path):
        self.path = path

    @classmethod
    def from_cli(cls, parser, *args):
        return cls(args[0])

    async def handle_DATA(self, server, session, envelope):
        msg = email.message_from_bytes(envelope.content)
        with open(self.path, "a") as f:
            f.write(str(msg["Message-ID"]) + "\n")
        return "250 OK"
"#;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `python3 -m aiosmtpd` on loopback with a handler that appends each
/// message's Message-ID to `log`.
fn start_smtp(dir: &Path, log: &Path) -> (Child, u16) {
    std::fs::write(dir.join("vd_smtp_recorder.py"), SMTP_HANDLER).unwrap();
    let port = free_port();
    let child = Command::new("python3")
        .args(["-m", "aiosmtpd", "-n", "-l", &format!("127.0.0.1:{port}")])
        .args(["-c", "vd_smtp_recorder.Recorder", log.to_str().unwrap()])
        .env("PYTHONPATH", dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "aiosmtpd did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, port)
}

fn daemon(home: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_vibedesk"))
        .arg("daemon")
        .env("VIBEDESK_HOME", home)
        .env("VIBEDESK_WEBHOOK_SECRET", SECRET)
        .env_remove("VIBEDESK_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Queues FIRES fires' results, two deliveries each, through the same
/// one-transaction path the daemon records fires by.
fn queue(home: &Path, hook: &str, mail: &str) -> Vec<(String, String)> {
    let db = home.join("data").join("monitors.sqlite");
    let mut store = Store::open(&db).unwrap();
    let now = Utc::now();
    let m = Monitor {
        name: "crash".into(),
        // Once a year: nothing fires during the test.
        cron: "0 0 1 1 *".into(),
        schedule: vibedesk::monitor::cron::Schedule::parse("0 0 1 1 *").unwrap(),
        tz: "UTC".parse().unwrap(),
        job: Job::Prompt { prompt: "p".into() },
        deliver: vec![hook.parse().unwrap(), mail.parse().unwrap()],
        notify: Notify::Always,
        paused: false,
        contract: Contract::default(),
        created: now,
        since: now,
    };
    store.add_monitor(&m.to_row()).unwrap();
    let mut keys = Vec::new();
    for i in 0..FIRES {
        let slot = now - chrono::Duration::seconds(i as i64 + 1);
        let id = store
            .start_fire("crash", slot.timestamp_millis(), Trigger::Manual, None, 0)
            .unwrap()
            .unwrap();
        let out = RunOutput {
            status: "success".into(),
            answer: Some(format!("## Verdict\n\n- SPY: s{i} - fire {i}\n")),
            ..RunOutput::default()
        };
        record(&mut store, &m, id, slot, Trigger::Manual, &out, Utc::now()).unwrap();
        for c in &m.deliver {
            keys.push((
                c.to_string(),
                vibedesk::monitor::daemon::idempotency_key("crash", id, c),
            ));
        }
    }
    keys
}

fn outbox_states(home: &Path) -> BTreeMap<String, usize> {
    let store = Store::open(&home.join("data").join("monitors.sqlite")).unwrap();
    let mut states = BTreeMap::new();
    for row in store.outbox(None).unwrap() {
        *states.entry(row.state).or_insert(0) += 1;
    }
    states
}

#[test]
fn deliveries_survive_sigkill_exactly_once_by_key() {
    if !Outside::Smtp.available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mail_log = work.path().join("message-ids.txt");
    let (mut smtp, smtp_port) = start_smtp(work.path(), &mail_log);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let hook_port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Received::default()));
    {
        let got = got.clone();
        std::thread::spawn(move || serve_http(listener, got));
    }
    let config_dir = home.path().join("config");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("config.toml"),
        format!(
            "[monitor]\nlease_seconds = 1.0\nretry_base_seconds = 0.2\nretry_max_seconds = 1.0\n\
             send_timeout_seconds = 2.0\nmax_tries = 100\nstop_grace_seconds = 1.0\n\
             [smtp]\nhost = \"127.0.0.1\"\nport = {smtp_port}\nfrom = \"desk@vibedesk.test\"\n\
             starttls = \"opportunistic\"\n"
        ),
    )
    .unwrap();
    let hook = format!("webhook:http://127.0.0.1:{hook_port}/hook");
    let keys = queue(home.path(), &hook, "email:reader@vibedesk.test");
    assert_eq!(keys.len(), 2 * FIRES);

    let started = Instant::now();
    let seed = Utc::now().timestamp_subsec_nanos() as u64 | 1;
    let mut rng = seed;
    let mut next = move || {
        // xorshift: random kill points, reproducible from the seed printed.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut kills = 0;
    while kills < 6 {
        let mut d = daemon(home.path());
        std::thread::sleep(Duration::from_millis(150 + next() % 600));
        d.kill().unwrap();
        d.wait().unwrap();
        kills += 1;
    }
    // A last daemon finishes the work and stops cleanly on SIGTERM.
    let mut d = daemon(home.path());
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let states = outbox_states(home.path());
        if states.get("sent") == Some(&(2 * FIRES)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not all delivered (seed {seed}): {states:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let pid = nix::unistd::Pid::from_raw(d.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::SIGTERM).unwrap();
    let status = d.wait().unwrap();
    assert!(status.success(), "daemon on SIGTERM: {status:?}");
    let _ = smtp.kill();
    let _ = smtp.wait();

    let got = got.lock().unwrap();
    let ids = std::fs::read_to_string(&mail_log).unwrap_or_default();
    let mail: Vec<&str> = ids.lines().collect();
    let want_hooks: std::collections::BTreeSet<String> = keys
        .iter()
        .filter(|(c, _)| c.starts_with("webhook:"))
        .map(|(_, k)| k.clone())
        .collect();
    let want_mail: std::collections::BTreeSet<String> = keys
        .iter()
        .filter(|(c, _)| c.starts_with("email:"))
        .map(|(_, k)| vibedesk::monitor::channels::message_id(k))
        .collect();
    let hooks: std::collections::BTreeSet<String> = got.keys.iter().cloned().collect();
    let mails: std::collections::BTreeSet<String> = mail.iter().map(|s| s.to_string()).collect();
    assert_eq!(hooks, want_hooks, "seed {seed}");
    assert_eq!(mails, want_mail, "seed {seed}");
    let repeats = (got.keys.len() - hooks.len()) + (mail.len() - mails.len());
    assert!(
        repeats <= kills,
        "{repeats} repeats after {kills} kills (seed {seed})"
    );
    assert_eq!(got.bad_signatures, 0);
    let states = outbox_states(home.path());
    assert_eq!(states, BTreeMap::from([("sent".to_string(), 2 * FIRES)]));
    eprintln!(
        "monitor delivery: {} deliveries, {kills} kills, {repeats} raw repeats, {:.1} s (seed {seed})",
        keys.len(),
        started.elapsed().as_secs_f64()
    );
}
