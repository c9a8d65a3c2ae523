//! The scheduler on a manual clock: a week of fires with an outage in the
//! middle, in milliseconds, its wake-ups counted.

use std::collections::BTreeMap;
use std::sync::Mutex;

use chrono::{DateTime, Duration, TimeZone, Utc};

use super::*;
use crate::monitor::clock::ManualClock;
use crate::monitor::def::Job;
use crate::monitor::runner::RunFuture;
use crate::monitor::verdict::Contract;

/// Answers every fire at once with a fixed verdict, and remembers them.
#[derive(Default)]
struct Recorder {
    fires: Mutex<Vec<(String, i64)>>,
}

impl Runner for Recorder {
    fn run<'a>(
        &'a self,
        monitor: &'a Monitor,
        fire_id: i64,
        _stop: &'a CancellationToken,
    ) -> RunFuture<'a> {
        self.fires
            .lock()
            .unwrap()
            .push((monitor.name.clone(), fire_id));
        Box::pin(async {
            RunOutput {
                status: "success".into(),
                answer: Some("Quiet day.\n\n## Verdict\n\n- SPY: hold - nothing moved\n".into()),
                ..RunOutput::default()
            }
        })
    }
}

fn monitor(name: &str, cron: &str, tz: &str, notify: NotifyWhen, since: DateTime<Utc>) -> Monitor {
    Monitor {
        name: name.into(),
        cron: cron.into(),
        schedule: crate::monitor::cron::Schedule::parse(cron).unwrap(),
        tz: tz.parse().unwrap(),
        job: Job::Prompt { prompt: "p".into() },
        deliver: vec!["file:/dev/null/never-sent".parse().unwrap()],
        notify,
        paused: false,
        contract: Contract::default(),
        created: since,
        since,
    }
}

/// Every slot of `m` in (from, to].
fn slots(m: &Monitor, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let mut out = Vec::new();
    let mut t = from;
    while let Some(n) = m.next_after(t).filter(|n| *n <= to) {
        out.push(n);
        t = n;
    }
    out
}

fn daemon<'a>(
    store: Store,
    clock: &'a ManualClock,
    runner: &'a Recorder,
    until: DateTime<Utc>,
) -> Daemon<'a> {
    Daemon {
        store,
        clock,
        runner,
        stop: CancellationToken::new(),
        changed: Arc::new(Notify::new()),
        queued: Arc::new(Notify::new()),
        say: &|_| {},
        until: Some(until),
    }
}

#[tokio::test]
async fn a_week_with_an_outage_runs_each_missed_monitor_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.sqlite");
    // Monday 2 March 2026, 00:00 UTC; New York is on EST until the 8th.
    let t0 = Utc.with_ymd_and_hms(2026, 3, 2, 0, 0, 0).unwrap();
    let monitors = [
        monitor(
            "close",
            "30 16 * * 1-5",
            "America/New_York",
            NotifyWhen::Always,
            t0,
        ),
        monitor(
            "london",
            "0 9 * * *",
            "Europe/London",
            NotifyWhen::Change,
            t0,
        ),
        monitor("hourly", "15 * * * *", "UTC", NotifyWhen::Always, t0),
    ];
    let store = Store::open(&db).unwrap();
    for m in &monitors {
        store.add_monitor(&m.to_row()).unwrap();
    }
    let clock = ManualClock::new(t0);
    let runner = Recorder::default();
    let down = Utc.with_ymd_and_hms(2026, 3, 4, 12, 0, 0).unwrap();
    let up = Utc.with_ymd_and_hms(2026, 3, 6, 12, 0, 0).unwrap();
    let end = Utc.with_ymd_and_hms(2026, 3, 8, 23, 59, 0).unwrap();

    daemon(store, &clock, &runner, down).run().await.unwrap();
    let before = clock.wakeups();
    // The daemon is down for two days; then it starts again.
    clock.set(up);
    let store = Store::open(&db).unwrap();
    daemon(store, &clock, &runner, end).run().await.unwrap();

    let store = Store::open(&db).unwrap();
    let mut instants = std::collections::BTreeSet::new();
    for m in &monitors {
        let fires = store.fires(&m.name, 10_000).unwrap();
        let mut got: Vec<i64> = fires.iter().map(|f| f.scheduled_for_ms).collect();
        got.sort_unstable();
        let mut want: Vec<i64> = slots(m, t0, down)
            .into_iter()
            .chain(slots(m, up, end))
            .map(|t| t.timestamp_millis())
            .collect();
        // The outage's slots: only the latest runs, once, as a catch-up.
        let missed = slots(m, down, up);
        let latest = missed.last().unwrap().timestamp_millis();
        want.push(latest);
        want.sort_unstable();
        assert_eq!(got, want, "{}", m.name);
        let catch_ups: Vec<_> = fires.iter().filter(|f| f.trigger == "catch_up").collect();
        assert_eq!(catch_ups.len(), 1, "{}", m.name);
        assert_eq!(catch_ups[0].scheduled_for_ms, latest);
        let note = catch_ups[0].note.as_deref().unwrap();
        assert!(
            note.contains(&format!("missed {} slots", missed.len())) || missed.len() == 1,
            "{note}"
        );
        assert!(fires.iter().all(|f| f.status == "success"));
        for f in fires.iter().filter(|f| f.trigger == "schedule") {
            instants.insert(f.scheduled_for_ms);
        }
    }
    // One wake-up per fire instant, none between; the restart itself
    // needed none (the catch-ups were due at once).
    assert_eq!(clock.wakeups(), instants.len() as u64);
    assert!(before > 0);
    // 16:30 New York is 21:30 UTC on EST.
    let close = store.fires("close", 1).unwrap();
    let last = DateTime::from_timestamp_millis(close[0].scheduled_for_ms).unwrap();
    assert_eq!(last, Utc.with_ymd_and_hms(2026, 3, 6, 21, 30, 0).unwrap());
    // `--notify change` with the same verdict every day: one delivery.
    let london = store.outbox(Some("london")).unwrap();
    assert_eq!(london.len(), 1);
    let hourly = store.outbox(Some("hourly")).unwrap();
    assert_eq!(hourly.len(), store.fires("hourly", 10_000).unwrap().len());
    assert_eq!(runner.fires.lock().unwrap().len(), {
        let mut n = 0;
        for m in &monitors {
            n += store.fires(&m.name, 10_000).unwrap().len();
        }
        n
    });
}

#[tokio::test]
async fn a_paused_monitor_skips_its_slots_and_a_taken_slot_is_not_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.sqlite");
    let t0 = Utc.with_ymd_and_hms(2026, 3, 2, 0, 0, 0).unwrap();
    let m = monitor("daily", "0 9 * * *", "UTC", NotifyWhen::Always, t0);
    let store = Store::open(&db).unwrap();
    store.add_monitor(&m.to_row()).unwrap();
    store
        .set_paused("daily", true, t0.timestamp_millis())
        .unwrap();
    let clock = ManualClock::new(t0);
    let runner = Recorder::default();
    let day3 = t0 + Duration::days(3);
    daemon(store, &clock, &runner, day3).run().await.unwrap();
    assert!(runner.fires.lock().unwrap().is_empty());
    // Resumed on day 3: the paused days are not caught up.
    clock.set(day3);
    let store = Store::open(&db).unwrap();
    store
        .set_paused("daily", false, day3.timestamp_millis())
        .unwrap();
    // Another daemon took the next slot already (its fire row exists).
    let slot = Utc.with_ymd_and_hms(2026, 3, 5, 9, 0, 0).unwrap();
    store
        .start_fire("daily", slot.timestamp_millis(), Trigger::Schedule, None, 0)
        .unwrap();
    let until = Utc.with_ymd_and_hms(2026, 3, 6, 10, 0, 0).unwrap();
    daemon(store, &clock, &runner, until).run().await.unwrap();
    let store = Store::open(&db).unwrap();
    let fires = store.fires("daily", 100).unwrap();
    let slots: BTreeMap<i64, &str> = fires
        .iter()
        .map(|f| (f.scheduled_for_ms, f.status.as_str()))
        .collect();
    // The other daemon's fire (left running when it died) is marked; ours
    // ran only the 6th.
    assert_eq!(runner.fires.lock().unwrap().len(), 1);
    assert_eq!(
        slots,
        BTreeMap::from([
            (slot.timestamp_millis(), "interrupted"),
            ((slot + Duration::days(1)).timestamp_millis(), "success"),
        ])
    );
}

#[test]
fn two_daemons_never_hold_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let first = DaemonLock::acquire(dir.path()).unwrap();
    let e = DaemonLock::acquire(dir.path()).err().unwrap();
    assert!(
        e.to_string().contains(&std::process::id().to_string()),
        "{e}"
    );
    drop(first);
    assert!(DaemonLock::acquire(dir.path()).is_ok());
}

#[test]
fn keys_are_stable_per_fire_and_channel() {
    let a: Channel = "webhook:http://127.0.0.1:1/h".parse().unwrap();
    let b: Channel = "email:d@example.com".parse().unwrap();
    assert_eq!(idempotency_key("m", 7, &a), idempotency_key("m", 7, &a));
    assert_ne!(idempotency_key("m", 7, &a), idempotency_key("m", 7, &b));
    assert_ne!(idempotency_key("m", 7, &a), idempotency_key("m", 8, &a));
}
