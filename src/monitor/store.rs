//! The monitors' database (docs §21.2, §21.4): `<data>/monitors.sqlite`,
//! WAL, its schema versioned by `PRAGMA user_version` and migrated forward
//! one step at a time. Three tables: `monitors` (what runs when and where
//! it goes), `fires` (each run of a monitor, unique per monitor and slot, so
//! two daemons can never both run one slot) and `outbox` (one row per
//! delivery, written in the same transaction as the fire's result).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

/// The schema's steps: `MIGRATIONS[i]` takes version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &["CREATE TABLE monitors (
        name TEXT PRIMARY KEY,
        cron TEXT NOT NULL,
        tz TEXT NOT NULL,
        job_kind TEXT NOT NULL,
        job_spec TEXT NOT NULL,
        deliver TEXT NOT NULL,
        notify TEXT NOT NULL,
        paused INTEGER NOT NULL DEFAULT 0,
        contract TEXT,
        created_ms INTEGER NOT NULL,
        since_ms INTEGER NOT NULL
    );
    CREATE TABLE fires (
        id INTEGER PRIMARY KEY,
        monitor TEXT NOT NULL REFERENCES monitors(name) ON DELETE CASCADE,
        scheduled_for_ms INTEGER NOT NULL,
        trigger TEXT NOT NULL,
        note TEXT,
        started_ms INTEGER NOT NULL,
        finished_ms INTEGER,
        status TEXT NOT NULL,
        run_dir TEXT,
        verdict TEXT,
        answer TEXT,
        UNIQUE (monitor, scheduled_for_ms)
    );
    CREATE TABLE outbox (
        id INTEGER PRIMARY KEY,
        fire_id INTEGER NOT NULL REFERENCES fires(id) ON DELETE CASCADE,
        channel TEXT NOT NULL,
        idempotency_key TEXT NOT NULL UNIQUE,
        payload TEXT NOT NULL,
        state TEXT NOT NULL,
        lease_owner TEXT,
        lease_expiry_ms INTEGER,
        tries INTEGER NOT NULL DEFAULT 0,
        next_attempt_ms INTEGER NOT NULL,
        last_error TEXT,
        sent_ms INTEGER
    );
    CREATE INDEX outbox_due ON outbox (state, next_attempt_ms);
    CREATE INDEX fires_by_monitor ON fires (monitor, scheduled_for_ms);"];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The database's file name under the data dir.
pub const FILE_NAME: &str = "monitors.sqlite";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("monitors database {path}: {source}")]
    Sql {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "monitors database {path} has schema version {found}, newer than this vibedesk knows ({known}); upgrade vibedesk"
    )]
    Newer {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("cannot create {path}: {source}")]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no monitor named '{0}' (see `vibedesk monitor list`)")]
    NoMonitor(String),
    #[error("a monitor named '{0}' exists already (remove it first)")]
    Exists(String),
}

/// A monitor as stored. `job_spec`, `deliver` and `contract` are JSON
/// whose types the monitor room's other modules own.
#[derive(Clone, Debug, PartialEq)]
pub struct MonitorRow {
    pub name: String,
    pub cron: String,
    pub tz: String,
    pub job_kind: String,
    pub job_spec: String,
    pub deliver: Vec<String>,
    pub notify: String,
    pub paused: bool,
    pub contract: Option<String>,
    pub created_ms: i64,
    /// Slots count from here: the monitor's creation or its last resume
    /// (a paused monitor's slots are skipped, not caught up).
    pub since_ms: i64,
}

/// Why a fire ran: its slot, a slot missed while no daemon ran, or by hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    Schedule,
    CatchUp,
    Manual,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Schedule => "schedule",
            Trigger::CatchUp => "catch_up",
            Trigger::Manual => "manual",
        }
    }
}

/// A fire as stored; `finished_ms` is `None` while it runs.
#[derive(Clone, Debug, PartialEq)]
pub struct FireRow {
    pub id: i64,
    pub monitor: String,
    pub scheduled_for_ms: i64,
    pub trigger: String,
    pub note: Option<String>,
    pub started_ms: i64,
    pub finished_ms: Option<i64>,
    pub status: String,
    pub run_dir: Option<String>,
    pub verdict: Option<String>,
    pub answer: Option<String>,
}

/// A delivery's state in the outbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryState {
    Pending,
    Claimed,
    Sent,
    Dead,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Claimed => "claimed",
            DeliveryState::Sent => "sent",
            DeliveryState::Dead => "dead",
        }
    }
}

/// One outbox row.
#[derive(Clone, Debug, PartialEq)]
pub struct OutboxRow {
    pub id: i64,
    pub fire_id: i64,
    pub channel: String,
    pub idempotency_key: String,
    pub payload: String,
    pub state: String,
    pub lease_owner: Option<String>,
    pub lease_expiry_ms: Option<i64>,
    pub tries: i64,
    pub next_attempt_ms: i64,
    pub last_error: Option<String>,
    pub sent_ms: Option<i64>,
}

/// A delivery to queue with a fire's result.
#[derive(Clone, Debug, PartialEq)]
pub struct NewDelivery {
    pub channel: String,
    pub idempotency_key: String,
    pub payload: String,
}

/// What a fire ended with.
#[derive(Clone, Debug, PartialEq)]
pub struct FireResult {
    pub status: String,
    pub run_dir: Option<String>,
    pub verdict: Option<String>,
    pub answer: Option<String>,
    pub finished_ms: i64,
}

/// Counts of a monitor's deliveries by state, for `monitor show` and the view.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryCounts {
    pub pending: u64,
    pub claimed: u64,
    pub sent: u64,
    pub dead: u64,
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// `<data dir>/monitors.sqlite`.
    pub fn path_in(paths: &crate::store::Paths) -> PathBuf {
        paths.data_dir.join(FILE_NAME)
    }

    /// Opens (creating and migrating as needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let dir = crate::fsio::parent_dir(path);
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Dir {
            path: dir.clone(),
            source,
        })?;
        let sql = |source| StoreError::Sql {
            path: path.to_path_buf(),
            source,
        };
        let mut conn = Connection::open(path).map_err(sql)?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(sql)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;",
        )
        .map_err(sql)?;
        migrate(&mut conn, path)?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sql {
            path: self.path.clone(),
            source,
        }
    }

    pub fn add_monitor(&self, m: &MonitorRow) -> Result<(), StoreError> {
        let deliver = serde_json::to_string(&m.deliver).unwrap_or_else(|_| "[]".into());
        let r = self.conn.execute(
            "INSERT INTO monitors (name, cron, tz, job_kind, job_spec, deliver, notify, paused, contract, created_ms, since_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                m.name, m.cron, m.tz, m.job_kind, m.job_spec, deliver, m.notify, m.paused,
                m.contract, m.created_ms, m.since_ms
            ],
        );
        match r {
            Ok(_) => Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                Err(StoreError::Exists(m.name.clone()))
            }
            Err(e) => Err(self.err(e)),
        }
    }

    pub fn monitors(&self) -> Result<Vec<MonitorRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {MONITOR_COLUMNS} FROM monitors ORDER BY name"
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], monitor_row)
            .and_then(|r| r.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.err(e))?;
        Ok(rows)
    }

    pub fn monitor(&self, name: &str) -> Result<MonitorRow, StoreError> {
        self.conn
            .query_row(
                &format!("SELECT {MONITOR_COLUMNS} FROM monitors WHERE name = ?1"),
                [name],
                monitor_row,
            )
            .optional()
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NoMonitor(name.to_string()))
    }

    /// Pauses or resumes; a resume counts slots from `now_ms` on.
    pub fn set_paused(&self, name: &str, paused: bool, now_ms: i64) -> Result<(), StoreError> {
        let n = self
            .conn
            .execute(
                "UPDATE monitors SET paused = ?2,
                 since_ms = CASE WHEN ?2 THEN since_ms ELSE ?3 END WHERE name = ?1",
                params![name, paused, now_ms],
            )
            .map_err(|e| self.err(e))?;
        if n == 0 {
            return Err(StoreError::NoMonitor(name.to_string()));
        }
        Ok(())
    }

    /// Removes a monitor with its fires and their deliveries.
    pub fn remove_monitor(&self, name: &str) -> Result<(), StoreError> {
        let n = self
            .conn
            .execute("DELETE FROM monitors WHERE name = ?1", [name])
            .map_err(|e| self.err(e))?;
        if n == 0 {
            return Err(StoreError::NoMonitor(name.to_string()));
        }
        Ok(())
    }

    /// Records a fire as started, unless a fire of that monitor and slot
    /// exists already (another daemon, or this one before a crash, ran
    /// it): then `None`.
    pub fn start_fire(
        &self,
        monitor: &str,
        scheduled_for_ms: i64,
        trigger: Trigger,
        note: Option<&str>,
        started_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        let n = self
            .conn
            .execute(
                "INSERT OR IGNORE INTO fires (monitor, scheduled_for_ms, trigger, note, started_ms, status)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'running')",
                params![monitor, scheduled_for_ms, trigger.as_str(), note, started_ms],
            )
            .map_err(|e| self.err(e))?;
        Ok((n == 1).then(|| self.conn.last_insert_rowid()))
    }

    /// Records a fire's result and queues its deliveries in one
    /// transaction: either both are on disk or neither is.
    pub fn finish_fire(
        &mut self,
        fire_id: i64,
        result: &FireResult,
        deliveries: &[NewDelivery],
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let sql = |source| StoreError::Sql {
            path: path.clone(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        tx.execute(
            "UPDATE fires SET status = ?2, run_dir = ?3, verdict = ?4, answer = ?5, finished_ms = ?6
             WHERE id = ?1",
            params![
                fire_id,
                result.status,
                result.run_dir,
                result.verdict,
                result.answer,
                result.finished_ms
            ],
        )
        .map_err(sql)?;
        for d in deliveries {
            tx.execute(
                "INSERT OR IGNORE INTO outbox (fire_id, channel, idempotency_key, payload, state, next_attempt_ms)
                 VALUES (?1, ?2, ?3, ?4, 'pending', ?5)",
                params![fire_id, d.channel, d.idempotency_key, d.payload, result.finished_ms],
            )
            .map_err(sql)?;
        }
        tx.commit().map_err(sql)
    }

    /// Fires left `running` by a daemon that is gone are marked
    /// `interrupted`; returns how many. Only the lock's holder calls it.
    pub fn interrupt_unfinished(&self, now_ms: i64, why: &str) -> Result<usize, StoreError> {
        self.conn
            .execute(
                "UPDATE fires SET status = 'interrupted', finished_ms = ?1,
                 note = CASE WHEN note IS NULL THEN ?2 ELSE note || '; ' || ?2 END
                 WHERE finished_ms IS NULL",
                params![now_ms, why],
            )
            .map_err(|e| self.err(e))
    }

    /// The latest slot a scheduled (or caught-up) fire ran for.
    pub fn last_slot_ms(&self, monitor: &str) -> Result<Option<i64>, StoreError> {
        self.conn
            .query_row(
                "SELECT max(scheduled_for_ms) FROM fires WHERE monitor = ?1 AND trigger != 'manual'",
                [monitor],
                |r| r.get::<_, Option<i64>>(0),
            )
            .map_err(|e| self.err(e))
    }

    /// A monitor's fires, newest first.
    pub fn fires(&self, monitor: &str, limit: u32) -> Result<Vec<FireRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {FIRE_COLUMNS} FROM fires WHERE monitor = ?1 ORDER BY started_ms DESC, id DESC LIMIT ?2"
            ))
            .map_err(|e| self.err(e))?;
        stmt.query_map(params![monitor, limit], fire_row)
            .and_then(|r| r.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.err(e))
    }

    /// The verdict of the monitor's latest finished fire that has one,
    /// before `fire_id`.
    pub fn previous_verdict(
        &self,
        monitor: &str,
        fire_id: i64,
    ) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row(
                "SELECT verdict FROM fires WHERE monitor = ?1 AND id != ?2 AND verdict IS NOT NULL
                 AND finished_ms IS NOT NULL ORDER BY finished_ms DESC, id DESC LIMIT 1",
                params![monitor, fire_id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()
            .map(Option::flatten)
            .map_err(|e| self.err(e))
    }

    /// Claims up to `limit` deliveries that are due (pending and past their
    /// next attempt, or claimed under a lease that expired) for `owner`
    /// until `lease_expiry_ms`, in one write transaction so two workers
    /// never claim one row.
    pub fn claim_due(
        &mut self,
        owner: &str,
        now_ms: i64,
        lease_expiry_ms: i64,
        limit: u32,
    ) -> Result<Vec<OutboxRow>, StoreError> {
        let path = self.path.clone();
        let sql = |source| StoreError::Sql {
            path: path.clone(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let rows = {
            let mut stmt = tx
                .prepare(&format!(
                    "SELECT {OUTBOX_COLUMNS} FROM outbox
                     WHERE (state = 'pending' AND next_attempt_ms <= ?1)
                        OR (state = 'claimed' AND lease_expiry_ms <= ?1)
                     ORDER BY next_attempt_ms, id LIMIT ?2"
                ))
                .map_err(sql)?;
            stmt.query_map(params![now_ms, limit], outbox_row)
                .and_then(|r| r.collect::<Result<Vec<_>, _>>())
                .map_err(sql)?
        };
        let mut claimed = Vec::with_capacity(rows.len());
        for mut row in rows {
            tx.execute(
                "UPDATE outbox SET state = 'claimed', lease_owner = ?2, lease_expiry_ms = ?3,
                 tries = tries + 1 WHERE id = ?1",
                params![row.id, owner, lease_expiry_ms],
            )
            .map_err(sql)?;
            row.state = DeliveryState::Claimed.as_str().to_string();
            row.lease_owner = Some(owner.to_string());
            row.lease_expiry_ms = Some(lease_expiry_ms);
            row.tries = row.tries.saturating_add(1);
            claimed.push(row);
        }
        tx.commit().map_err(sql)?;
        Ok(claimed)
    }

    /// Marks a claimed delivery sent, if `owner` still holds it; returns
    /// whether it did.
    pub fn mark_sent(&self, id: i64, owner: &str, now_ms: i64) -> Result<bool, StoreError> {
        let n = self
            .conn
            .execute(
                "UPDATE outbox SET state = 'sent', sent_ms = ?3, lease_owner = NULL,
                 lease_expiry_ms = NULL, last_error = NULL
                 WHERE id = ?1 AND state = 'claimed' AND lease_owner = ?2",
                params![id, owner, now_ms],
            )
            .map_err(|e| self.err(e))?;
        Ok(n == 1)
    }

    /// Gives a failed delivery back: pending again from `next_attempt_ms`,
    /// or `dead` (when `dead` is set) with its last error kept.
    pub fn mark_failed(
        &self,
        id: i64,
        owner: &str,
        error: &str,
        next_attempt_ms: i64,
        dead: bool,
    ) -> Result<bool, StoreError> {
        let state = if dead {
            DeliveryState::Dead
        } else {
            DeliveryState::Pending
        };
        let n = self
            .conn
            .execute(
                "UPDATE outbox SET state = ?3, last_error = ?4, next_attempt_ms = ?5,
                 lease_owner = NULL, lease_expiry_ms = NULL
                 WHERE id = ?1 AND state = 'claimed' AND lease_owner = ?2",
                params![id, owner, state.as_str(), error, next_attempt_ms],
            )
            .map_err(|e| self.err(e))?;
        Ok(n == 1)
    }

    /// Gives back every row `owner` holds, untried (a clean stop).
    pub fn release(&self, owner: &str) -> Result<usize, StoreError> {
        self.conn
            .execute(
                "UPDATE outbox SET state = 'pending', lease_owner = NULL, lease_expiry_ms = NULL,
                 tries = max(tries - 1, 0) WHERE state = 'claimed' AND lease_owner = ?1",
                [owner],
            )
            .map_err(|e| self.err(e))
    }

    /// When the outbox next has work: the earliest pending attempt or
    /// lease expiry; `None` when nothing waits.
    pub fn next_outbox_ms(&self) -> Result<Option<i64>, StoreError> {
        self.conn
            .query_row(
                "SELECT min(CASE WHEN state = 'pending' THEN next_attempt_ms ELSE lease_expiry_ms END)
                 FROM outbox WHERE state IN ('pending', 'claimed')",
                [],
                |r| r.get::<_, Option<i64>>(0),
            )
            .map_err(|e| self.err(e))
    }

    /// Every outbox row of a monitor's fires (or of all, with `None`).
    pub fn outbox(&self, monitor: Option<&str>) -> Result<Vec<OutboxRow>, StoreError> {
        let cols = OUTBOX_COLUMNS
            .split(", ")
            .map(|c| format!("o.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {cols} FROM outbox o JOIN fires f ON f.id = o.fire_id
                 WHERE ?1 IS NULL OR f.monitor = ?1 ORDER BY o.id"
            ))
            .map_err(|e| self.err(e))?;
        stmt.query_map([monitor], outbox_row)
            .and_then(|r| r.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.err(e))
    }

    /// A monitor's deliveries counted by state.
    pub fn delivery_counts(&self, monitor: &str) -> Result<DeliveryCounts, StoreError> {
        let mut counts = DeliveryCounts::default();
        for row in self.outbox(Some(monitor))? {
            let slot = match row.state.as_str() {
                "pending" => &mut counts.pending,
                "claimed" => &mut counts.claimed,
                "sent" => &mut counts.sent,
                _ => &mut counts.dead,
            };
            *slot = slot.saturating_add(1);
        }
        Ok(counts)
    }
}

const MONITOR_COLUMNS: &str =
    "name, cron, tz, job_kind, job_spec, deliver, notify, paused, contract, created_ms, since_ms";
const FIRE_COLUMNS: &str = "id, monitor, scheduled_for_ms, trigger, note, started_ms, finished_ms, status, run_dir, verdict, answer";
const OUTBOX_COLUMNS: &str = "id, fire_id, channel, idempotency_key, payload, state, lease_owner, lease_expiry_ms, tries, next_attempt_ms, last_error, sent_ms";

fn monitor_row(r: &Row) -> rusqlite::Result<MonitorRow> {
    let deliver: String = r.get(5)?;
    Ok(MonitorRow {
        name: r.get(0)?,
        cron: r.get(1)?,
        tz: r.get(2)?,
        job_kind: r.get(3)?,
        job_spec: r.get(4)?,
        deliver: serde_json::from_str(&deliver).unwrap_or_default(),
        notify: r.get(6)?,
        paused: r.get(7)?,
        contract: r.get(8)?,
        created_ms: r.get(9)?,
        since_ms: r.get(10)?,
    })
}

fn fire_row(r: &Row) -> rusqlite::Result<FireRow> {
    Ok(FireRow {
        id: r.get(0)?,
        monitor: r.get(1)?,
        scheduled_for_ms: r.get(2)?,
        trigger: r.get(3)?,
        note: r.get(4)?,
        started_ms: r.get(5)?,
        finished_ms: r.get(6)?,
        status: r.get(7)?,
        run_dir: r.get(8)?,
        verdict: r.get(9)?,
        answer: r.get(10)?,
    })
}

fn outbox_row(r: &Row) -> rusqlite::Result<OutboxRow> {
    Ok(OutboxRow {
        id: r.get(0)?,
        fire_id: r.get(1)?,
        channel: r.get(2)?,
        idempotency_key: r.get(3)?,
        payload: r.get(4)?,
        state: r.get(5)?,
        lease_owner: r.get(6)?,
        lease_expiry_ms: r.get(7)?,
        tries: r.get(8)?,
        next_attempt_ms: r.get(9)?,
        last_error: r.get(10)?,
        sent_ms: r.get(11)?,
    })
}

/// Applies the steps from the file's version to [`SCHEMA_VERSION`], each
/// with its version bump in one transaction.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let sql = |source| StoreError::Sql {
        path: path.to_path_buf(),
        source,
    };
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sql)?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::Newer {
            path: path.to_path_buf(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    for (step, version) in MIGRATIONS
        .iter()
        .zip(1_i64..)
        .skip_while(|(_, v)| *v <= found)
    {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        // Another process may have migrated while this one waited.
        let now: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sql)?;
        if now < version {
            tx.execute_batch(step).map_err(sql)?;
            tx.execute_batch(&format!("PRAGMA user_version = {version}"))
                .map_err(sql)?;
        }
        tx.commit().map_err(sql)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn monitor(name: &str) -> MonitorRow {
        MonitorRow {
            name: name.into(),
            cron: "30 16 * * 1-5".into(),
            tz: "America/New_York".into(),
            job_kind: "prompt".into(),
            job_spec: r#"{"kind":"prompt","prompt":"p"}"#.into(),
            deliver: vec!["file:/tmp/x.json".into()],
            notify: "always".into(),
            paused: false,
            contract: None,
            created_ms: 1,
            since_ms: 1,
        }
    }

    fn open() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("m.sqlite")).unwrap();
        (dir, store)
    }

    #[test]
    fn schema_is_versioned_and_a_newer_file_is_refused() {
        let (dir, store) = open();
        let v: i64 = store
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        drop(store);
        // Reopening migrates nothing and keeps the data.
        let store = Store::open(&dir.path().join("m.sqlite")).unwrap();
        store.add_monitor(&monitor("a")).unwrap();
        store
            .conn
            .execute_batch("PRAGMA user_version = 99")
            .unwrap();
        drop(store);
        let e = Store::open(&dir.path().join("m.sqlite")).err().unwrap();
        assert!(matches!(e, StoreError::Newer { found: 99, .. }), "{e}");
    }

    #[test]
    fn monitors_round_trip_and_names_are_unique() {
        let (_d, store) = open();
        store.add_monitor(&monitor("b")).unwrap();
        store.add_monitor(&monitor("a")).unwrap();
        assert!(matches!(
            store.add_monitor(&monitor("a")),
            Err(StoreError::Exists(_))
        ));
        let names: Vec<_> = store
            .monitors()
            .unwrap()
            .into_iter()
            .map(|m| m.name)
            .collect();
        assert_eq!(names, ["a", "b"]);
        store.set_paused("a", true, 5).unwrap();
        assert!(store.monitor("a").unwrap().paused);
        assert_eq!(store.monitor("b").unwrap(), monitor("b"));
        store.remove_monitor("a").unwrap();
        assert!(matches!(store.monitor("a"), Err(StoreError::NoMonitor(_))));
        assert!(matches!(
            store.set_paused("zz", false, 5),
            Err(StoreError::NoMonitor(_))
        ));
    }

    #[test]
    fn a_slot_fires_once_and_its_deliveries_are_leased() {
        let (_d, mut store) = open();
        store.add_monitor(&monitor("a")).unwrap();
        let id = store
            .start_fire("a", 1000, Trigger::Schedule, None, 1000)
            .unwrap()
            .unwrap();
        assert_eq!(
            store
                .start_fire("a", 1000, Trigger::Schedule, None, 1001)
                .unwrap(),
            None
        );
        let result = FireResult {
            status: "success".into(),
            run_dir: None,
            verdict: None,
            answer: Some("x".into()),
            finished_ms: 2000,
        };
        let d = NewDelivery {
            channel: "file:/x".into(),
            idempotency_key: "k1".into(),
            payload: "{}".into(),
        };
        store.finish_fire(id, &result, &[d]).unwrap();
        assert_eq!(store.last_slot_ms("a").unwrap(), Some(1000));
        assert_eq!(store.next_outbox_ms().unwrap(), Some(2000));
        // Not due yet, then claimed once; a second worker finds nothing.
        assert!(store.claim_due("w1", 1999, 5000, 10).unwrap().is_empty());
        let got = store.claim_due("w1", 2000, 5000, 10).unwrap();
        assert_eq!((got.len(), got[0].tries), (1, 1));
        assert!(store.claim_due("w2", 4999, 9000, 10).unwrap().is_empty());
        // The lease expires: w2 takes it over, and w1's late answer is void.
        let got = store.claim_due("w2", 5000, 9000, 10).unwrap();
        assert_eq!(got[0].tries, 2);
        assert!(!store.mark_sent(got[0].id, "w1", 5001).unwrap());
        assert!(
            store
                .mark_failed(got[0].id, "w2", "boom", 6000, false)
                .unwrap()
        );
        let got = store.claim_due("w2", 6000, 9000, 10).unwrap();
        assert!(store.mark_sent(got[0].id, "w2", 6001).unwrap());
        assert_eq!(store.next_outbox_ms().unwrap(), None);
        let counts = store.delivery_counts("a").unwrap();
        assert_eq!((counts.sent, counts.pending, counts.claimed), (1, 0, 0));
    }

    #[test]
    fn unfinished_fires_are_marked_interrupted() {
        let (_d, store) = open();
        store.add_monitor(&monitor("a")).unwrap();
        store
            .start_fire("a", 10, Trigger::Schedule, None, 10)
            .unwrap();
        assert_eq!(store.interrupt_unfinished(20, "daemon stopped").unwrap(), 1);
        let f = &store.fires("a", 10).unwrap()[0];
        assert_eq!(
            (f.status.as_str(), f.finished_ms),
            ("interrupted", Some(20))
        );
        assert_eq!(f.note.as_deref(), Some("daemon stopped"));
    }
}
