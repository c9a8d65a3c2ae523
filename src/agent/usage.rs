//! `llm_usage.json` in the run dir (docs §1.3 step 9): totals and one entry
//! per iteration, rewritten atomically after every call.

use std::path::PathBuf;

use serde_json::json;

use crate::model::Usage;
use crate::store::{StoreError, atomic_write_json};

pub struct UsageLedger {
    path: PathBuf,
    provider: String,
    model: String,
    totals: Usage,
    calls: u64,
    per_iteration: Vec<serde_json::Value>,
}

impl UsageLedger {
    pub fn new(path: PathBuf, provider: &str, model: &str) -> Self {
        UsageLedger {
            path,
            provider: provider.to_string(),
            model: model.to_string(),
            totals: Usage::default(),
            calls: 0,
            per_iteration: Vec::new(),
        }
    }

    pub fn totals(&self) -> Usage {
        self.totals
    }

    pub fn set_model(&mut self, model: &str) {
        self.model = model.to_string();
    }

    pub fn record(&mut self, iter: u64, usage: &Usage) -> Result<(), StoreError> {
        self.totals.add(usage);
        self.calls += 1;
        self.per_iteration.push(json!({
            "iter": iter,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
        }));
        let doc = json!({
            "provider": self.provider,
            "model": self.model,
            "totals": {
                "input_tokens": self.totals.input_tokens,
                "output_tokens": self.totals.output_tokens,
                "total_tokens": self.totals.total_tokens,
                "calls": self.calls,
            },
            "per_iteration": self.per_iteration,
            "updated_at": chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        });
        atomic_write_json(&self.path, &doc)
    }
}
