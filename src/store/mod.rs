//! Everything the engine writes to disk: paths, run directories and their
//! `state.json`, the session trace, the session message log and atomic writes.
//! Append-only logs are fsynced per record; state files are written atomically
//! (temp file, fsync, rename, fsync of the directory).

pub mod atomic;
pub mod jsonl;
pub mod messages;
pub mod paths;
pub mod run_state;
pub mod trace;
pub mod trace_record;

use std::path::PathBuf;

use serde_json::Value;

pub use atomic::{atomic_write, atomic_write_json};
pub use messages::{MessageLog, StoredMessage};
pub use paths::Paths;
pub use run_state::{RunDir, RunState, RunStateStore};
pub use trace::{TraceOptions, TraceRead, TraceWriter, read_trace};
pub use trace_record::TraceRecord;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Io(#[from] crate::fsio::IoError),
    #[error("cannot encode {what} as JSON: {source}")]
    Json {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

impl StoreError {
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StoreError::Io(crate::fsio::IoError::new(action, path, source))
    }
}

/// The trace shared by the loop and the scheduler.
pub type SharedTrace = std::sync::Arc<std::sync::Mutex<TraceWriter>>;

/// Appends a record to a shared trace. A failed trace write must not fail the
/// run (the run's own results matter more than its diary), so it is logged.
pub fn trace_record(trace: &SharedTrace, record: TraceRecord) {
    write_shared(trace, |_| Value::from(record));
}

/// Appends `record` with its text `field` replaced by a reference to the
/// same text in the session's message log, which must already hold it
/// durably (see [`trace::refer_to_message_log`]).
pub fn trace_record_in_log(trace: &SharedTrace, record: TraceRecord, field: &str) {
    write_shared(trace, |options| {
        let mut obj = record.to_object();
        if let Some(Value::String(text)) = obj.get(field).cloned() {
            trace::refer_to_message_log(&mut obj, field, &text, options.preview_chars);
        }
        Value::Object(obj)
    });
}

fn write_shared(trace: &SharedTrace, record: impl FnOnce(TraceOptions) -> Value) {
    let result = match trace.lock() {
        Ok(mut t) => {
            let r = record(t.options());
            t.write(r)
        }
        Err(poisoned) => {
            let mut t = poisoned.into_inner();
            let r = record(t.options());
            t.write(r)
        }
    };
    if let Err(e) = result {
        tracing::warn!("trace write failed: {e}");
    }
}
