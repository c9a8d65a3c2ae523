//! The daemon as a process (docs §21.2): the lock, the signals, the
//! scheduler and the outbox worker side by side on one clock.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::clock::SystemClock;
use super::daemon::{Daemon, DaemonError, DaemonLock};
use super::outbox::Worker;
use super::runner::ProcessRunner;
use super::settings::MonitorSettings;
use super::store::Store;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    #[error(transparent)]
    Store(#[from] super::store::StoreError),
    #[error("cannot start the outbox: {0}")]
    Senders(#[from] super::channels::SendError),
    #[error("cannot listen for signals: {0}")]
    Signals(std::io::Error),
}

/// What the daemon runs with.
pub struct ServeOptions {
    pub paths: crate::store::Paths,
    pub settings: MonitorSettings,
    /// The vibedesk binary each fire starts.
    pub exe: PathBuf,
    /// Run what is due, deliver, and exit instead of sleeping.
    pub once: bool,
}

/// Runs until SIGTERM or SIGINT (or, with `once`, until nothing is due).
pub async fn serve(
    opts: ServeOptions,
    say: &(dyn Fn(&str) + Send + Sync),
) -> Result<(), ServeError> {
    let _lock = DaemonLock::acquire(&opts.paths.state_dir)?;
    let db = Store::path_in(&opts.paths);
    let store = Store::open(&db)?;
    let worker = Worker::new(Store::open(&db)?, opts.settings.clone())?;
    let stop = CancellationToken::new();
    let changed = Arc::new(Notify::new());
    let queued = Arc::new(Notify::new());
    watch_signals(stop.clone(), changed.clone()).map_err(ServeError::Signals)?;
    let clock = SystemClock::default();
    let runner = ProcessRunner {
        exe: opts.exe.clone(),
        approval: opts.settings.approval,
        out_dir: opts.paths.data_dir.join("monitors"),
        grace: opts.settings.stop_grace,
    };
    let mut daemon = Daemon {
        store,
        clock: &clock,
        runner: &runner,
        stop: stop.clone(),
        changed,
        queued: queued.clone(),
        say,
        until: opts.once.then(chrono::Utc::now),
    };
    say(&format!(
        "daemon started (pid {}); monitors in {}",
        std::process::id(),
        db.display()
    ));
    if opts.once {
        daemon.run().await?;
        let mut worker = worker;
        worker.pass(&clock, &stop).await?;
        return Ok(());
    }
    let worker_stop = stop.clone();
    let (scheduled, delivered) = tokio::join!(
        async {
            let r = daemon.run().await;
            // The scheduler ended (stop, or an error): so does the worker.
            worker_stop.cancel();
            r
        },
        worker.run(&clock, &queued, &stop)
    );
    scheduled?;
    delivered?;
    say("daemon stopped");
    Ok(())
}

/// SIGTERM and SIGINT stop the daemon; SIGHUP re-reads the monitors.
fn watch_signals(stop: CancellationToken, changed: Arc<Notify>) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = term.recv() => { stop.cancel(); return; }
                _ = int.recv() => { stop.cancel(); return; }
                _ = hup.recv() => changed.notify_one(),
            }
        }
    });
    Ok(())
}
