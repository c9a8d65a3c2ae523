//! STUB: to be completed (spec §5.3).
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::StoreError;

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

#[derive(Debug)]
pub struct TraceWriter {
    dir: PathBuf,
    file: std::fs::File,
}

impl TraceWriter {
    pub fn open(dir: &Path, _options: TraceOptions) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create", dir, e))?;
        let p = dir.join("trace.jsonl");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .map_err(|e| StoreError::io("open", &p, e))?;
        Ok(TraceWriter { dir: dir.to_path_buf(), file })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn write(&mut self, mut record: Value) -> Result<(), StoreError> {
        if let Some(o) = record.as_object_mut() {
            o.entry("ts").or_insert_with(|| Value::from(chrono::Utc::now().timestamp_millis() as f64 / 1000.0));
        }
        let line = record.to_string() + "\n";
        self.file
            .write_all(line.as_bytes())
            .map_err(|e| StoreError::io("append to", self.dir.join("trace.jsonl"), e))
    }

    pub fn max_iter(dir: &Path) -> u64 {
        read_trace(dir, None)
            .map(|t| t.records.iter().filter_map(|r| r.get("iter").and_then(Value::as_u64)).max().unwrap_or(0))
            .unwrap_or(0)
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceRead {
    pub records: Vec<Value>,
    pub skipped_lines: usize,
}

pub fn read_trace(dir: &Path, _resolve_fields: Option<&[&str]>) -> Result<TraceRead, StoreError> {
    let p = dir.join("trace.jsonl");
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TraceRead::default()),
        Err(e) => return Err(StoreError::io("read", p, e)),
    };
    let mut out = TraceRead::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Value>(line) {
            Ok(v) if v.is_object() => out.records.push(v),
            _ => out.skipped_lines += 1,
        }
    }
    Ok(out)
}
