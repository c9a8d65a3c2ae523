//! The append-only `trace.jsonl` of a session or run (docs §5.3): one JSON
//! object per line, fsynced per record, with large text moved to hashed
//! sidecar files (`trace-blobs/`, `tool-results/`) that are durable before
//! the record referring to them is written. A large user message is not
//! copied at all: its records refer to the session's message log, which
//! holds the one full copy (see [`refer_to_message_log`]).
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::StoreError;
use super::atomic::{atomic_write_with_temp, fsync_dir};
use super::jsonl::{FsyncFailure, JsonlLog};

/// File name of the trace inside its directory.
pub const TRACE_FILE: &str = "trace.jsonl";
/// Sidecar directory for large text fields (docs §5.3).
pub const BLOBS_DIR: &str = "trace-blobs";
/// Sidecar directory for large tool results (docs §5.3).
pub const TOOL_RESULTS_DIR: &str = "tool-results";

/// A user message longer than this (in bytes) is stored once, in the
/// session's message log; the trace records and the run's `req.json` refer
/// to it instead of holding more copies. Below it, copies are cheap and the
/// files stay self-contained as in the original.
pub const LARGE_TEXT_BYTES: usize = 64 * 1024;

/// Replaces `obj[field]` by a reference to the same text in the session's
/// message log: `<field>_ref` = `{"in": "messages.jsonl", "bytes", "sha256"}`,
/// plus `<field>_preview` and `<field>_size` (chars) as a sidecar has. The
/// log entry must be durable before the record is written. `read_trace`
/// resolves the reference like a sidecar path. Not in the original, which
/// copies the text into a sidecar (docs §5.3).
pub fn refer_to_message_log(
    obj: &mut Map<String, Value>,
    field: &str,
    text: &str,
    preview_chars: usize,
) {
    obj.remove(field);
    obj.insert(format!("{field}_ref"), message_log_ref(text));
    obj.insert(
        format!("{field}_preview"),
        Value::String(preview(text, preview_chars)),
    );
    obj.insert(format!("{field}_size"), Value::from(text.chars().count()));
}

/// `{"in": "messages.jsonl", "bytes", "sha256"}`: where the one full copy of
/// `text` is, relative to its session directory.
pub fn message_log_ref(text: &str) -> Value {
    serde_json::json!({
        "in": super::messages::MESSAGES_FILE,
        "bytes": text.len(),
        "sha256": sha256_hex(text),
    })
}

/// The longest prefix of `text` of at most `bytes` bytes that ends on a
/// character boundary.
pub fn byte_prefix(text: &str, bytes: usize) -> &str {
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceOptions {
    pub text_inline_limit: usize,
    pub tool_result_inline_limit: usize,
    pub preview_chars: usize,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            text_inline_limit: 50_000,
            tool_result_inline_limit: 50_000,
            preview_chars: 500,
        }
    }
}

impl TraceOptions {
    /// Zero limits fall back to the defaults, as non-positive values do in
    /// docs §5.3 (a zero limit would offload every string, even "").
    fn normalized(self) -> Self {
        let d = TraceOptions::default();
        let or = |v: usize, dv: usize| if v == 0 { dv } else { v };
        TraceOptions {
            text_inline_limit: or(self.text_inline_limit, d.text_inline_limit),
            tool_result_inline_limit: or(self.tool_result_inline_limit, d.tool_result_inline_limit),
            preview_chars: or(self.preview_chars, d.preview_chars),
        }
    }
}

#[derive(Debug)]
pub struct TraceWriter {
    dir: PathBuf,
    /// docs §5.3: after a failed fsync, warn once, then keep writing
    /// flush-only rather than failing the run.
    log: JsonlLog,
    options: TraceOptions,
}

impl TraceWriter {
    /// Creates `dir` and opens `dir/trace.jsonl` for append; a new trace
    /// fsyncs its directory and a torn last line is terminated (docs §5.3).
    pub fn open(dir: &Path, options: TraceOptions) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create", dir, e))?;
        let path = dir.join(TRACE_FILE);
        Ok(TraceWriter {
            dir: dir.to_path_buf(),
            log: JsonlLog::open(path, FsyncFailure::WarnOnceThenFlushOnly)?,
            options: options.normalized(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn options(&self) -> TraceOptions {
        self.options
    }

    /// Writes one record. It must be a JSON object with a string `type`;
    /// `ts` (epoch seconds, ms precision) is added if absent, large fields are
    /// offloaded to sidecars first. A failed sidecar write means the record is
    /// not written and the error is returned.
    pub fn write(&mut self, record: Value) -> Result<(), StoreError> {
        let Value::Object(mut obj) = record else {
            return Err(StoreError::Invalid(format!(
                "trace record for {} must be a JSON object",
                self.log.path().display()
            )));
        };
        let Some(kind) = obj.get("type").and_then(Value::as_str).map(str::to_owned) else {
            return Err(StoreError::Invalid(format!(
                "trace record for {} needs a string \"type\"",
                self.log.path().display()
            )));
        };
        if !obj.contains_key("ts") {
            let ms = chrono::Utc::now().timestamp_millis();
            obj.insert("ts".into(), Value::from(ms as f64 / 1000.0));
        }
        self.offload(&kind, &mut obj)?;

        self.log.append("trace record", &obj)
    }

    /// Moves oversized fields of `obj` to sidecars, by record type (docs §5.3).
    fn offload(&self, kind: &str, obj: &mut Map<String, Value>) -> Result<(), StoreError> {
        let iter = obj
            .get("iter")
            .map(iter_label)
            .unwrap_or_else(|| "0".into());
        let text_field = match kind {
            "start" => Some(("prompt", format!("start-{iter}"))),
            "message" => {
                let role = obj.get("role").and_then(Value::as_str).unwrap_or("unknown");
                Some(("content", format!("{role}-message-{iter}")))
            }
            "thinking" => Some(("content", format!("thinking-{iter}"))),
            "answer" => Some(("content", format!("answer-{iter}"))),
            "answer_rejected" => Some(("content", format!("answer-rejected-{iter}"))),
            "goal_intermediate_answer" => {
                Some(("content", format!("goal-intermediate-answer-{iter}")))
            }
            "compact" => Some(("summary", format!("compact-summary-{iter}"))),
            _ => None,
        };
        if let Some((field, offload_kind)) = text_field
            && let Some(Value::String(text)) = obj.get(field)
            && char_len_exceeds(text, self.options.text_inline_limit)
        {
            let text = text.clone();
            self.move_to_sidecar(obj, field, &text, BLOBS_DIR, &offload_kind)?;
        }
        if kind == "tool_result" {
            self.offload_tool_result(obj)?;
        }
        Ok(())
    }

    fn offload_tool_result(&self, obj: &mut Map<String, Value>) -> Result<(), StoreError> {
        let result = match obj.get("result") {
            None | Some(Value::Null) => return Ok(()),
            Some(Value::String(s)) => s.clone(),
            // The caller should pass a string; keep a structured value readable.
            Some(other) => other.to_string(),
        };
        obj.insert(
            "preview".into(),
            Value::String(preview(&result, self.options.preview_chars)),
        );
        if char_len_exceeds(&result, self.options.tool_result_inline_limit) {
            let tool = obj.get("tool").and_then(Value::as_str).unwrap_or("");
            let call_id = obj.get("call_id").and_then(Value::as_str).unwrap_or("");
            // The call id only feeds the hash: provider ids never become paths.
            let offload_kind = format!("tool-result-{tool}-{call_id}");
            self.move_to_sidecar(obj, "result", &result, TOOL_RESULTS_DIR, &offload_kind)?;
        } else {
            obj.insert("result".into(), Value::String(result));
        }
        Ok(())
    }

    /// Writes `value` to `<sub>/<hash>.txt` and replaces `field` with
    /// `<field>_path`, `<field>_preview` and `<field>_size` (chars).
    fn move_to_sidecar(
        &self,
        obj: &mut Map<String, Value>,
        field: &str,
        value: &str,
        sub: &str,
        offload_kind: &str,
    ) -> Result<(), StoreError> {
        let name = sidecar_name(offload_kind, value);
        self.write_sidecar(sub, &name, value)?;
        obj.remove(field);
        obj.insert(
            format!("{field}_path"),
            Value::String(format!("{sub}/{name}")),
        );
        obj.insert(
            format!("{field}_preview"),
            Value::String(preview(value, self.options.preview_chars)),
        );
        obj.insert(format!("{field}_size"), Value::from(value.chars().count()));
        Ok(())
    }

    /// Durable before the record that points at it (docs §5.3): temp
    /// `.<name>.<pid>.tmp` mode 0600, fsync, rename, fsync of the directory.
    fn write_sidecar(&self, sub: &str, name: &str, value: &str) -> Result<(), StoreError> {
        let sub_dir = self.dir.join(sub);
        match std::fs::create_dir(&sub_dir) {
            // A new sidecar dir is itself an entry of the trace dir.
            Ok(()) => fsync_dir(&self.dir)?,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(StoreError::io("create", &sub_dir, e)),
        }
        let target = sub_dir.join(name);
        // Content-addressed: an existing file of the right size was renamed
        // into place whole, so it already holds this exact value.
        if let Ok(meta) = std::fs::metadata(&target)
            && meta.is_file()
            && meta.len() == value.len() as u64
        {
            return Ok(());
        }
        let tmp = sub_dir.join(format!(".{name}.{}.tmp", std::process::id()));
        atomic_write_with_temp(&target, &tmp, value.as_bytes(), Some(0o600))
    }

    /// The largest integer `iter` in the trace of `dir` (0 if none), so
    /// iteration numbers continue across turns (docs §5.4).
    pub fn max_iter(dir: &Path) -> u64 {
        match read_trace(dir, None) {
            Ok(t) => t
                .records
                .iter()
                .filter_map(|r| r.get("iter").and_then(integer_iter))
                .max()
                .unwrap_or(0),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot read trace for max iter");
                0
            }
        }
    }
}

/// A non-negative integral `iter` (also accepting `3.0`, which some writers emit).
fn integer_iter(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64)
            .map(|f| f as u64)
    })
}

/// The `<n>` of an offload kind; only ever hashed, never used as a path.
fn iter_label(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => integer_iter(other).map_or_else(|| other.to_string(), |n| n.to_string()),
    }
}

/// First 24 hex chars of SHA-256 over `<kind>` NUL `<value>`, plus `.txt`.
pub fn sidecar_name(offload_kind: &str, value: &str) -> String {
    let mut h = Sha256::new();
    h.update(offload_kind.as_bytes());
    h.update([0u8]);
    h.update(value.as_bytes());
    let digest = h.finalize();
    let mut name = String::with_capacity(28);
    for b in digest.iter().take(12) {
        name.push_str(&format!("{b:02x}"));
    }
    name.push_str(".txt");
    name
}

fn preview(s: &str, chars: usize) -> String {
    crate::text::preview(s, chars)
}

/// `s.chars().count() > limit` without counting past the limit.
fn char_len_exceeds(s: &str, limit: usize) -> bool {
    s.len() > limit && s.chars().nth(limit).is_some()
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceRead {
    pub records: Vec<Value>,
    /// Lines that were not a JSON object (torn or garbage); blank lines are
    /// ignored without counting, they hold no data.
    pub skipped_lines: usize,
}

/// Reads `dir/trace.jsonl` (a missing trace is empty). With
/// `resolve_fields = Some(fields)`, each listed field `F` whose `F_path` is
/// present and `F` absent is read back from its sidecar, but only if the path
/// resolves inside `dir` (docs §5.3, §10.7 TR-1); otherwise it stays a path.
pub fn read_trace(dir: &Path, resolve_fields: Option<&[&str]>) -> Result<TraceRead, StoreError> {
    let p = dir.join(TRACE_FILE);
    let bytes = match std::fs::read(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(TraceRead::default()),
        Err(e) => return Err(StoreError::io("read", p, e)),
    };
    let mut out = TraceRead::default();
    for raw in crate::text::lines(&bytes) {
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(raw) {
            Ok(v) if v.is_object() => out.records.push(v),
            _ => out.skipped_lines += 1,
        }
    }
    if let Some(fields) = resolve_fields.filter(|f| !f.is_empty()) {
        let root = match dir.canonicalize() {
            Ok(r) => r,
            Err(e) => return Err(StoreError::io("resolve", dir, e)),
        };
        let mut log = LoggedTexts::default();
        for rec in &mut out.records {
            if let Value::Object(obj) = rec {
                for field in fields {
                    resolve_field(&root, obj, field);
                    resolve_ref(dir, &mut log, obj, field);
                }
            }
        }
    }
    Ok(out)
}

/// The session's message log, read once and only if a record refers to it.
#[derive(Default)]
struct LoggedTexts(Option<Vec<String>>);

impl LoggedTexts {
    fn find(&mut self, dir: &Path, bytes: u64, sha256: &str) -> Option<String> {
        let texts = self.0.get_or_insert_with(|| {
            match super::messages::MessageLog::read(dir) {
                Ok(r) => r.messages.into_iter().map(|m| m.message.content).collect(),
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot read the message log a trace refers to");
                    Vec::new()
                }
            }
        });
        // The length check first: only same-sized texts are hashed.
        texts
            .iter()
            .find(|t| t.len() as u64 == bytes && sha256_hex(t) == sha256)
            .cloned()
    }
}

/// Fills `field` from a `<field>_ref` into the message log (see
/// [`refer_to_message_log`]); an entry that is not found leaves the preview.
fn resolve_ref(dir: &Path, log: &mut LoggedTexts, obj: &mut Map<String, Value>, field: &str) {
    if obj.contains_key(field) {
        return;
    }
    let Some(r) = obj.get(&format!("{field}_ref")) else {
        return;
    };
    let (Some(super::messages::MESSAGES_FILE), Some(bytes), Some(sha)) = (
        r.get("in").and_then(Value::as_str),
        r.get("bytes").and_then(Value::as_u64),
        r.get("sha256").and_then(Value::as_str),
    ) else {
        return;
    };
    match log.find(dir, bytes, sha) {
        Some(text) => {
            obj.insert(field.to_owned(), Value::String(text));
        }
        None => tracing::warn!(
            dir = %dir.display(),
            field,
            "the message a trace record refers to is not in the message log"
        ),
    }
}

fn resolve_field(root: &Path, obj: &mut Map<String, Value>, field: &str) {
    if obj.contains_key(field) {
        return;
    }
    let Some(rel) = obj.get(&format!("{field}_path")).and_then(Value::as_str) else {
        return;
    };
    match sidecar_inside(root, rel) {
        Some(path) => match std::fs::read_to_string(&path) {
            Ok(text) => {
                obj.insert(field.to_owned(), Value::String(text));
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read trace sidecar")
            }
        },
        None => tracing::warn!(
            dir = %root.display(),
            path = rel,
            "refusing trace sidecar path outside the trace directory"
        ),
    }
}

/// The canonical path of `rel` if it names a file strictly inside `root`
/// (itself canonical); symlinks and `..` are resolved before the check.
fn sidecar_inside(root: &Path, rel: &str) -> Option<PathBuf> {
    let rel = Path::new(rel);
    // Cheap early refusal; canonicalize below is the real guard.
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return None;
    }
    let full = crate::fsio::confine(&root.join(rel), &[root]).ok()?;
    (full != root && full.is_file()).then_some(full)
}

/// The directory holding the trace for `id`: the session's if it has a
/// `trace.jsonl`, else the run's, else none (docs §5.3). An id that is not
/// a single plain path component is never looked up.
pub fn find_trace_dir(paths_sessions: &Path, paths_runs: &Path, id: &str) -> Option<PathBuf> {
    let mut comps = Path::new(id).components();
    if !matches!(
        (comps.next(), comps.next()),
        (Some(Component::Normal(_)), None)
    ) {
        return None;
    }
    [paths_sessions, paths_runs]
        .into_iter()
        .map(|root| root.join(id))
        .find(|d| d.join(TRACE_FILE).is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn small() -> TraceOptions {
        TraceOptions {
            text_inline_limit: 16,
            tool_result_inline_limit: 16,
            preview_chars: 5,
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn write_adds_ts_and_keeps_given_fields() {
        let d = tempfile::tempdir().unwrap();
        let mut w = TraceWriter::open(d.path(), TraceOptions::default()).unwrap();
        w.write(json!({"type": "tool_call", "iter": 1, "tool": "bash", "args": {"cmd": "ls é"}}))
            .unwrap();
        w.write(json!({"type": "end", "ts": 12.5, "status": "success"}))
            .unwrap();
        let t = read_trace(d.path(), None).unwrap();
        assert_eq!(t.records.len(), 2);
        assert_eq!(t.skipped_lines, 0);
        let ts = t.records[0]["ts"].as_f64().unwrap();
        assert!(ts > 1.6e9, "{ts}");
        assert_eq!((ts * 1000.0).round() / 1000.0, ts);
        assert_eq!(t.records[0]["args"]["cmd"], "ls é");
        assert_eq!(t.records[1]["ts"], 12.5);
        let raw = std::fs::read_to_string(d.path().join(TRACE_FILE)).unwrap();
        assert!(raw.contains("ls é"), "non-ASCII kept: {raw}");
        assert_eq!(raw.lines().count(), 2);
    }

    #[test]
    fn write_rejects_non_objects_and_missing_type() {
        let d = tempfile::tempdir().unwrap();
        let mut w = TraceWriter::open(d.path(), TraceOptions::default()).unwrap();
        assert!(matches!(w.write(json!([1])), Err(StoreError::Invalid(_))));
        assert!(matches!(
            w.write(json!({"iter": 1})),
            Err(StoreError::Invalid(_))
        ));
        assert!(matches!(
            w.write(json!({"type": 3})),
            Err(StoreError::Invalid(_))
        ));
        assert_eq!(std::fs::read(d.path().join(TRACE_FILE)).unwrap().len(), 0);
    }

    #[test]
    fn text_fields_offload_and_resolve_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let mut w = TraceWriter::open(d.path(), small()).unwrap();
        let long = "ünïcode prompt that is long enough";
        w.write(json!({"type": "start", "iter": 3, "prompt": long}))
            .unwrap();
        w.write(json!({"type": "message", "iter": 3, "role": "assistant", "content": long}))
            .unwrap();
        w.write(json!({"type": "compact", "iter": 3, "summary": long}))
            .unwrap();
        w.write(json!({"type": "answer", "iter": 3, "content": "short"}))
            .unwrap();

        let t = read_trace(d.path(), None).unwrap();
        let start = &t.records[0];
        let name = sidecar_name("start-3", long);
        assert_eq!(name.len(), 28);
        assert!(
            name[..24]
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(start["prompt_path"], format!("trace-blobs/{name}"));
        assert_eq!(start["prompt_preview"], "ünïco");
        assert_eq!(start["prompt_size"], long.chars().count());
        assert!(start.get("prompt").is_none());
        let msg_name = sidecar_name("assistant-message-3", long);
        assert_ne!(msg_name, name, "the kind is part of the hash");
        assert_eq!(
            t.records[1]["content_path"],
            format!("trace-blobs/{msg_name}")
        );
        assert_eq!(t.records[3]["content"], "short");
        assert!(t.records[3].get("content_path").is_none());
        assert_eq!(
            std::fs::read_to_string(d.path().join("trace-blobs").join(&name)).unwrap(),
            long
        );

        // Only the listed fields are resolved.
        let r = read_trace(d.path(), Some(&["prompt", "content"])).unwrap();
        assert_eq!(r.records[0]["prompt"], long);
        assert_eq!(r.records[1]["content"], long);
        assert!(r.records[2].get("summary").is_none());
        let r = read_trace(d.path(), Some(&["summary"])).unwrap();
        assert_eq!(r.records[2]["summary"], long);
        assert!(r.records[0].get("prompt").is_none());
    }

    #[test]
    fn message_kind_depends_on_role() {
        let d = tempfile::tempdir().unwrap();
        let mut w = TraceWriter::open(d.path(), small()).unwrap();
        let long = "x".repeat(40);
        w.write(json!({"type": "message", "iter": 2, "role": "user", "content": long}))
            .unwrap();
        let t = read_trace(d.path(), None).unwrap();
        assert_eq!(
            t.records[0]["content_path"],
            format!("trace-blobs/{}", sidecar_name("user-message-2", &long))
        );
    }

    #[test]
    fn tool_result_offload_uses_hashed_name_not_call_id() {
        let d = tempfile::tempdir().unwrap();
        let mut w = TraceWriter::open(d.path(), small()).unwrap();
        let call_id = "call_../../evil";
        let big = "R".repeat(17);
        w.write(
            json!({"type": "tool_result", "iter": 1, "tool": "bash", "call_id": call_id,
            "status": "ok", "elapsed_ms": 3, "result": big}),
        )
        .unwrap();
        w.write(
            json!({"type": "tool_result", "iter": 1, "tool": "bash", "call_id": "c2",
            "status": "ok", "elapsed_ms": 3, "result": "exactly16chars!!"}),
        )
        .unwrap();
        let t = read_trace(d.path(), None).unwrap();
        let r = &t.records[0];
        let name = sidecar_name(&format!("tool-result-bash-{call_id}"), &big);
        assert_eq!(r["result_path"], format!("tool-results/{name}"));
        assert!(!r["result_path"].as_str().unwrap().contains("call_"));
        assert_eq!(r["preview"], "RRRRR");
        assert_eq!(r["result_preview"], "RRRRR");
        assert_eq!(r["result_size"], 17);
        assert!(r.get("result").is_none());
        assert_eq!(names(&d.path().join("tool-results")), vec![name.clone()]);
        assert!(!d.path().join("evil").exists());

        // At the limit the result stays inline, with a preview.
        assert_eq!(t.records[1]["result"], "exactly16chars!!");
        assert_eq!(t.records[1]["preview"], "exact");
        assert!(t.records[1].get("result_path").is_none());

        let r = read_trace(d.path(), Some(&["result"])).unwrap();
        assert_eq!(r.records[0]["result"], big);

        // Sidecars leave no temp files and are private.
        assert_eq!(
            names(d.path()),
            vec!["tool-results".to_string(), TRACE_FILE.to_string()]
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let m = std::fs::metadata(d.path().join("tool-results").join(&name)).unwrap();
            assert_eq!(m.permissions().mode() & 0o777, 0o600);
        }
    }

    #[test]
    fn resolve_refuses_paths_outside_the_trace_dir() {
        let d = tempfile::tempdir().unwrap();
        let trace_dir = d.path().join("sessions").join("s1");
        std::fs::create_dir_all(&trace_dir).unwrap();
        std::fs::write(d.path().join("secret.txt"), "top secret").unwrap();
        let mut w = TraceWriter::open(&trace_dir, TraceOptions::default()).unwrap();
        w.write(json!({"type": "tool_result", "result_path": "../../secret.txt"}))
            .unwrap();
        w.write(json!({"type": "tool_result", "result_path": "../../../../../../etc/passwd"}))
            .unwrap();
        let abs = d.path().join("secret.txt").to_string_lossy().into_owned();
        w.write(json!({"type": "tool_result", "result_path": abs}))
            .unwrap();
        #[cfg(unix)]
        {
            std::fs::create_dir(trace_dir.join("tool-results")).unwrap();
            std::os::unix::fs::symlink(
                d.path().join("secret.txt"),
                trace_dir.join("tool-results/link.txt"),
            )
            .unwrap();
            w.write(json!({"type": "tool_result", "result_path": "tool-results/link.txt"}))
                .unwrap();
        }
        let t = read_trace(&trace_dir, Some(&["result"])).unwrap();
        assert!(t.records.len() >= 3);
        for r in &t.records {
            assert!(r.get("result").is_none(), "escaped: {r}");
            assert!(r.get("result_path").is_some());
        }
    }

    #[test]
    fn resolve_does_not_overwrite_an_inline_field() {
        let d = tempfile::tempdir().unwrap();
        let mut w = TraceWriter::open(d.path(), small()).unwrap();
        let long = "y".repeat(30);
        w.write(json!({"type": "answer", "iter": 1, "content": long}))
            .unwrap();
        let t = read_trace(d.path(), None).unwrap();
        let path = t.records[0]["content_path"].as_str().unwrap().to_owned();
        // A record that has both keeps its inline value.
        w.write(json!({"type": "note", "content": "inline", "content_path": path}))
            .unwrap();
        let r = read_trace(d.path(), Some(&["content"])).unwrap();
        assert_eq!(r.records[0]["content"], long);
        assert_eq!(r.records[1]["content"], "inline");
    }

    #[test]
    fn torn_trace_line_is_repaired_and_counted() {
        let d = tempfile::tempdir().unwrap();
        {
            let mut w = TraceWriter::open(d.path(), TraceOptions::default()).unwrap();
            w.write(json!({"type": "start", "iter": 1, "prompt": "p"}))
                .unwrap();
        }
        let p = d.path().join(TRACE_FILE);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes.extend_from_slice(br#"{"type":"tool_call","it"#);
        std::fs::write(&p, bytes).unwrap();
        let mut w = TraceWriter::open(d.path(), TraceOptions::default()).unwrap();
        w.write(json!({"type": "end", "iter": 2, "status": "success"}))
            .unwrap();
        let t = read_trace(d.path(), None).unwrap();
        assert_eq!(t.skipped_lines, 1);
        let types: Vec<&str> = t
            .records
            .iter()
            .map(|r| r["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["start", "end"]);
    }

    #[test]
    fn read_skips_blank_and_invalid_lines() {
        let d = tempfile::tempdir().unwrap();
        let mut bytes = b"{\"type\":\"a\"}\n\n   \nnot json\n[1]\n".to_vec();
        bytes.extend_from_slice(&[0xff, b'\n']);
        bytes.extend_from_slice(b"{\"type\":\"b\"}");
        std::fs::write(d.path().join(TRACE_FILE), bytes).unwrap();
        let t = read_trace(d.path(), Some(&["content"])).unwrap();
        assert_eq!(t.records.len(), 2);
        assert_eq!(t.skipped_lines, 3);
        assert_eq!(
            read_trace(&d.path().join("none"), None).unwrap(),
            TraceRead::default()
        );
    }

    #[test]
    fn max_iter_finds_the_largest_integer_iter() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(TraceWriter::max_iter(d.path()), 0);
        let mut w = TraceWriter::open(d.path(), TraceOptions::default()).unwrap();
        assert_eq!(TraceWriter::max_iter(d.path()), 0);
        for v in [
            json!(3),
            json!(11),
            json!(7.0),
            json!("99"),
            json!(-4),
            json!(2.5),
        ] {
            w.write(json!({"type": "x", "iter": v})).unwrap();
        }
        w.write(json!({"type": "x"})).unwrap();
        assert_eq!(TraceWriter::max_iter(d.path()), 11);
        w.write(json!({"type": "x", "iter": 12.0})).unwrap();
        assert_eq!(TraceWriter::max_iter(d.path()), 12);
    }

    #[test]
    fn same_sidecar_written_twice_is_kept_once() {
        let d = tempfile::tempdir().unwrap();
        let mut w = TraceWriter::open(d.path(), small()).unwrap();
        let long = "z".repeat(50);
        w.write(json!({"type": "thinking", "iter": 1, "content": long}))
            .unwrap();
        w.write(json!({"type": "thinking", "iter": 1, "content": long}))
            .unwrap();
        assert_eq!(names(&d.path().join("trace-blobs")).len(), 1);
        let t = read_trace(d.path(), Some(&["content"])).unwrap();
        assert_eq!(t.records.len(), 2);
        assert!(t.records.iter().all(|r| r["content"] == long));
    }

    #[test]
    fn failed_sidecar_rename_does_not_write_the_record() {
        let d = tempfile::tempdir().unwrap();
        let mut w = TraceWriter::open(d.path(), small()).unwrap();
        let content = "q".repeat(40);
        // Occupy the sidecar's name with a non-empty directory: the rename fails
        // (even as root, unlike a permission-based setup).
        let name = sidecar_name("answer-1", &content);
        let blocked = d.path().join("trace-blobs").join(&name);
        std::fs::create_dir_all(blocked.join("inner")).unwrap();
        let err = w.write(json!({"type": "answer", "iter": 1, "content": content}));
        match &err {
            Err(StoreError::Io(e)) => assert_eq!(&e.path, &blocked),
            other => panic!("expected an Io error, got {other:?}"),
        }
        assert_eq!(std::fs::read(d.path().join(TRACE_FILE)).unwrap().len(), 0);
        // The temp file was removed; only the blocking directory remains.
        assert_eq!(names(&d.path().join("trace-blobs")), vec![name]);
        // The writer still works afterwards.
        w.write(json!({"type": "end", "iter": 1})).unwrap();
        assert_eq!(read_trace(d.path(), None).unwrap().records.len(), 1);
    }

    #[test]
    fn sidecar_dir_being_a_file_is_an_error_without_record() {
        let d = tempfile::tempdir().unwrap();
        let mut w = TraceWriter::open(d.path(), small()).unwrap();
        std::fs::write(d.path().join("tool-results"), "not a dir").unwrap();
        let r = w.write(
            json!({"type": "tool_result", "tool": "t", "call_id": "c", "result": "r".repeat(99)}),
        );
        assert!(matches!(r, Err(StoreError::Io(_))), "{r:?}");
        assert_eq!(std::fs::read(d.path().join(TRACE_FILE)).unwrap().len(), 0);
    }

    #[test]
    fn find_trace_dir_prefers_sessions_over_runs() {
        let d = tempfile::tempdir().unwrap();
        let sessions = d.path().join("sessions");
        let runs = d.path().join("runs");
        for dir in [
            sessions.join("both"),
            runs.join("both"),
            runs.join("runonly"),
        ] {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(TRACE_FILE), "").unwrap();
        }
        std::fs::create_dir_all(sessions.join("notrace")).unwrap();
        assert_eq!(
            find_trace_dir(&sessions, &runs, "both"),
            Some(sessions.join("both"))
        );
        assert_eq!(
            find_trace_dir(&sessions, &runs, "runonly"),
            Some(runs.join("runonly"))
        );
        assert_eq!(find_trace_dir(&sessions, &runs, "notrace"), None);
        assert_eq!(find_trace_dir(&sessions, &runs, "missing"), None);
        assert_eq!(find_trace_dir(&sessions, &runs, "../runs/both"), None);
        assert_eq!(find_trace_dir(&sessions, &runs, ""), None);
        assert_eq!(find_trace_dir(&sessions, &runs, ".."), None);
    }

    #[test]
    fn zero_options_fall_back_to_defaults() {
        let d = tempfile::tempdir().unwrap();
        let w = TraceWriter::open(
            d.path(),
            TraceOptions {
                text_inline_limit: 0,
                tool_result_inline_limit: 0,
                preview_chars: 0,
            },
        )
        .unwrap();
        assert_eq!(w.options(), TraceOptions::default());
        assert_eq!(w.dir(), d.path());
    }

    #[test]
    fn a_large_user_message_is_referred_to_in_the_log_and_resolved_from_it() {
        use crate::model::Message;
        use crate::store::{MessageLog, StoredMessage};
        let d = tempfile::tempdir().unwrap();
        let text = "ünïcode ".repeat(10_000);
        let other = "x".repeat(text.len());
        let mut log = MessageLog::open(d.path()).unwrap();
        for t in [&other, &text] {
            log.append(&StoredMessage::now(Message::user(t.as_str())))
                .unwrap();
        }
        let mut w = TraceWriter::open(d.path(), small()).unwrap();
        let mut start = Map::new();
        start.insert("type".into(), json!("start"));
        start.insert("iter".into(), json!(1));
        refer_to_message_log(&mut start, "prompt", &text, 5);
        w.write(Value::Object(start)).unwrap();
        // A reference to a text the log does not hold stays unresolved.
        let mut missing = Map::new();
        missing.insert("type".into(), json!("message"));
        refer_to_message_log(&mut missing, "content", "not logged", 5);
        w.write(Value::Object(missing)).unwrap();

        assert!(!d.path().join(BLOBS_DIR).exists(), "no sidecar copy");
        let raw = std::fs::read_to_string(d.path().join(TRACE_FILE)).unwrap();
        assert!(raw.len() < 1000, "the trace holds no copy: {raw}");
        let t = read_trace(d.path(), None).unwrap();
        let r = &t.records[0];
        assert!(r.get("prompt").is_none());
        assert_eq!(r["prompt_preview"], "ünïco");
        assert_eq!(r["prompt_size"], text.chars().count());
        assert_eq!(r["prompt_ref"]["in"], "messages.jsonl");
        assert_eq!(r["prompt_ref"]["bytes"], text.len());
        assert_eq!(r["prompt_ref"]["sha256"].as_str().unwrap().len(), 64);

        let resolved = read_trace(d.path(), Some(&["prompt", "content"])).unwrap();
        assert_eq!(resolved.records[0]["prompt"], text.as_str());
        assert!(resolved.records[1].get("content").is_none());
        assert_eq!(resolved.records[1]["content_preview"], "not l");
    }

    #[test]
    fn byte_prefixes_end_on_a_character() {
        assert_eq!(byte_prefix("héllo", 2), "h");
        assert_eq!(byte_prefix("héllo", 3), "hé");
        assert_eq!(byte_prefix("hi", 10), "hi");
    }
}
