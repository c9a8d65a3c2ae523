//! Runs one assistant turn's tool calls (docs §2.2–§2.5).
//!
//! Calls are checked in order (arguments, unknown tools, dedupe, the
//! authorization hook); the runnable ones are grouped so that consecutive
//! read-only calls form one parallel batch (at most `max_parallel` at a time)
//! and every other call runs alone. Every call, run or not, yields exactly one
//! result in call order, so tool-call/result pairs always balance.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::authorize::{ApprovalRecord, AuthCall, Authorizer};
use super::events::{BatchCall, BatchMode, ToolCallStatus, ToolEvent, ToolEventSink};
use super::finalize::{error_code, preview_args};
pub use super::invoke::{CallOutcome, SchedulerConfig};
use super::invoke::{Invocation, cancelled_json, emit_finished, invoke};
use super::redact::{Sink, redact_tool_result, redact_value};
use super::registry::Registry;
use super::{Tool, ToolContext};
use crate::model::ToolCall;
use crate::store::trace_record::ToolResultStatus;
use crate::store::{SharedTrace, TraceRecord, trace_record};

fn done(outcome: CallOutcome) -> Plan {
    Plan::Done(Box::new(outcome))
}

enum Plan {
    Run { tool: Arc<dyn Tool>, args: Value },
    Done(Box<CallOutcome>),
}

/// Per-run tool scheduling state: the dedupe set and the workspace counters.
pub struct Scheduler {
    registry: Arc<Registry>,
    config: SchedulerConfig,
    authorizer: Option<Arc<dyn Authorizer>>,
    sink: ToolEventSink,
    trace: Option<SharedTrace>,
    succeeded: HashSet<String>,
    counters: Vec<(String, u32)>,
    batches: u32,
}

impl Scheduler {
    pub fn new(registry: Arc<Registry>, config: SchedulerConfig, sink: ToolEventSink) -> Self {
        Scheduler {
            registry,
            config,
            authorizer: None,
            sink,
            trace: None,
            succeeded: HashSet::new(),
            counters: Vec::new(),
            batches: 0,
        }
    }

    pub fn with_authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> Self {
        self.authorizer = Some(authorizer);
        self
    }

    pub fn with_trace(mut self, trace: SharedTrace) -> Self {
        self.trace = Some(trace);
        self
    }

    /// Whether an authorization hook judges the calls.
    pub fn has_authorizer(&self) -> bool {
        self.authorizer.is_some()
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Offers `registry` from the next batch on: the loop grows or shrinks
    /// a run's tools between iterations (docs §4.7.1).
    pub fn set_registry(&mut self, registry: Arc<Registry>) {
        self.registry = registry;
    }

    /// Calls per tool name in first-use order (docs §4.5 workspace state).
    pub fn counters(&self) -> &[(String, u32)] {
        &self.counters
    }

    /// Runs the calls of one assistant turn. `base` supplies the run's
    /// directories and cancel token; each call gets its own id and a child
    /// token. Returns one outcome per call, in call order.
    pub async fn run(
        &mut self,
        iter: u64,
        calls: &[ToolCall],
        base: &ToolContext,
    ) -> Vec<CallOutcome> {
        let mut plans: Vec<Plan> = calls.iter().map(|c| self.plan(iter, c)).collect();
        for (plan, call) in plans.iter_mut().zip(calls) {
            self.authorize(iter, plan, call, base).await;
        }
        let mut outcomes: Vec<Option<CallOutcome>> = Vec::with_capacity(calls.len());
        let mut i = 0;
        while i < plans.len() {
            // Checkpoint D/E (docs §1.11): no new batch starts after a cancel.
            if base.cancel.is_cancelled() {
                for (plan, call) in plans[i..].iter().zip(&calls[i..]) {
                    let o = match plan {
                        Plan::Done(o) => (**o).clone(),
                        Plan::Run { args, .. } => cancelled_before_start(call, args.clone()),
                    };
                    emit_finished(&self.sink, iter, &o);
                    outcomes.push(Some(o));
                }
                break;
            }
            let batch_end = match &plans[i] {
                Plan::Done(_) => {
                    if let Plan::Done(o) =
                        std::mem::replace(&mut plans[i], Plan::Done(Box::new(placeholder())))
                    {
                        emit_finished(&self.sink, iter, &o);
                        outcomes.push(Some(*o));
                    }
                    i += 1;
                    continue;
                }
                Plan::Run { tool, .. } if tool.readonly() => {
                    let mut end = i + 1;
                    while let Some(Plan::Run { tool, .. }) = plans.get(end) {
                        if !tool.readonly() {
                            break;
                        }
                        end += 1;
                    }
                    end
                }
                Plan::Run { .. } => i + 1,
            };
            let batch: Vec<(usize, Arc<dyn Tool>, Value)> = (i..batch_end)
                .filter_map(|k| match &plans[k] {
                    Plan::Run { tool, args } => Some((k, tool.clone(), args.clone())),
                    Plan::Done(_) => None,
                })
                .collect();
            let results = self.run_batch(iter, calls, &batch, base).await;
            outcomes.extend(results.into_iter().map(Some));
            i = batch_end;
        }
        let outcomes: Vec<CallOutcome> = outcomes.into_iter().flatten().collect();
        for o in &outcomes {
            self.finalize(iter, o);
        }
        outcomes
    }

    /// Checks one call before anything runs (docs §2.2).
    fn plan(&mut self, iter: u64, call: &ToolCall) -> Plan {
        let name = call.name();
        let raw_args = call.function.arguments.trim();
        let args = if raw_args.is_empty() {
            Ok(json!({}))
        } else {
            serde_json::from_str::<Value>(raw_args)
        };
        let args = match args {
            Ok(a) => a,
            Err(e) => {
                return done(not_run(
                    call,
                    Value::Null,
                    ToolCallStatus::Error,
                    error_json(
                        name,
                        "invalid_arguments",
                        &format!("the arguments are not valid JSON ({e}); send a JSON object"),
                    ),
                ));
            }
        };
        let Some(tool) = self.registry.get(name).cloned() else {
            return done(not_run(
                call,
                args,
                ToolCallStatus::Error,
                error_json(
                    name,
                    "unknown_tool",
                    &unknown_tool_message(name, &self.registry),
                ),
            ));
        };
        if let Err(problem) = tool.check_arguments(&args) {
            return done(not_run(
                call,
                args,
                ToolCallStatus::Error,
                error_json(name, "invalid_arguments", &problem.to_string()),
            ));
        }
        // Dedupe on name *and* arguments: the original keys on the name only,
        // which blocked legitimate re-fetches with new arguments (docs §12.2).
        if !tool.repeatable() && self.succeeded.contains(&dedupe_key(name, &args)) {
            if let Some(t) = &self.trace {
                trace_record(
                    t,
                    TraceRecord::ToolSkipped {
                        iter,
                        tool: name.to_string(),
                        call_id: call.id.clone(),
                    },
                );
            }
            let reason = format!(
                "'{name}' already succeeded with these same arguments earlier in this run; reuse that result instead of calling it again"
            );
            return done(not_run(
                call,
                args,
                ToolCallStatus::Skipped,
                json!({"skipped": true, "reason": reason}).to_string(),
            ));
        }
        Plan::Run { tool, args }
    }

    /// The authorization hook's turn (docs §2.2 step 5, §2.14): a refused
    /// call becomes `denied`; each decision is reported.
    async fn authorize(&self, iter: u64, plan: &mut Plan, call: &ToolCall, base: &ToolContext) {
        let (Some(auth), Plan::Run { tool, args }) = (&self.authorizer, &*plan) else {
            return;
        };
        let name = call.name();
        let verdict = auth
            .judge(AuthCall {
                tool: name,
                args,
                caps: tool.caps(),
                ctx: base,
            })
            .await;
        if let Some(record) = verdict.record {
            if let Some(t) = &self.trace {
                trace_record(
                    t,
                    TraceRecord::Approval {
                        iter,
                        call_id: call.id.clone(),
                        tool: record.tool.clone(),
                        target: masked(&record.target, Sink::Arguments),
                        access: record.access.clone(),
                        decision: record.decision,
                        mode: record.mode,
                        reason: record.reason.clone(),
                    },
                );
            }
            let target = masked(&record.target, Sink::Display);
            (self.sink)(ToolEvent::Approval {
                iter,
                call_id: call.id.clone(),
                approval: ApprovalRecord { target, ..record },
            });
        }
        if let Err(denial) = verdict.result {
            let args = args.clone();
            *plan = done(not_run(
                call,
                args,
                ToolCallStatus::Denied,
                json!({"status": "error", "error_code": denial.code, "tool": name, "message": denial.message})
                    .to_string(),
            ));
        }
    }

    async fn run_batch(
        &mut self,
        iter: u64,
        calls: &[ToolCall],
        batch: &[(usize, Arc<dyn Tool>, Value)],
        base: &ToolContext,
    ) -> Vec<CallOutcome> {
        let batch_no = self.batches;
        self.batches += 1;
        let mode = if batch.len() > 1 {
            BatchMode::Parallel
        } else {
            BatchMode::Serial
        };
        // Events go only to the user who made the call (chat, `run` text and
        // `--json` output), so they mask secrets but show ordinary arguments;
        // the trace on disk keeps the spec's fail-closed redaction (§2.8).
        let announced: Vec<BatchCall> = batch
            .iter()
            .map(|(k, _, args)| BatchCall {
                call_id: calls[*k].id.clone(),
                tool: calls[*k].name().to_string(),
                args: preview_args(&redact_value(args, Sink::Display)),
            })
            .collect();
        if let Some(t) = &self.trace {
            for (c, (k, _, args)) in announced.iter().zip(batch) {
                trace_record(
                    t,
                    TraceRecord::ToolCall {
                        iter,
                        tool: c.tool.clone(),
                        call_id: calls[*k].id.clone(),
                        args: redact_value(args, Sink::Arguments),
                        batch: batch_no,
                    },
                );
            }
        }
        (self.sink)(ToolEvent::ToolBatchStarted {
            iter,
            batch: batch_no,
            mode,
            calls: announced.clone(),
        });
        let started = Instant::now();
        let permits = Arc::new(Semaphore::new(self.config.max_parallel.max(1)));
        let futures = batch.iter().zip(announced).map(|((k, tool, args), shown)| {
            let call = calls[*k].clone();
            let permits = permits.clone();
            let ctx = ToolContext {
                call_id: call.id.clone(),
                cancel: base.cancel.child_token(),
                ..base.clone()
            };
            let run = Invocation {
                iter,
                tool: tool.clone(),
                args: args.clone(),
                shown_args: shown.args,
                config: &self.config,
                sink: &self.sink,
                run_cancel: &base.cancel,
            };
            async move {
                // Queued until a permit frees up: at most `max_parallel` run at once.
                let _permit = permits.acquire_owned().await.ok();
                invoke(run, call, ctx).await
            }
        });
        let outcomes = join_all(futures).await;
        (self.sink)(ToolEvent::ToolBatchFinished {
            iter,
            batch: batch_no,
            elapsed_ms: started.elapsed().as_millis() as u64,
        });
        outcomes
    }

    /// Bookkeeping after a call (docs §2.5): counters, the dedupe set, the
    /// trace record, in call order.
    fn finalize(&mut self, iter: u64, o: &CallOutcome) {
        let name = o.call.name();
        if o.executed {
            match self.counters.iter_mut().find(|(n, _)| n == name) {
                Some((_, n)) => *n += 1,
                None => self.counters.push((name.to_string(), 1)),
            }
            if o.succeeded()
                && let Some(tool) = self.registry.get(name)
                && !tool.repeatable()
            {
                self.succeeded.insert(dedupe_key(name, &o.args));
            }
        }
        if let Some(t) = &self.trace {
            let status = if o.succeeded() || o.status == ToolCallStatus::Skipped {
                ToolResultStatus::Ok
            } else {
                ToolResultStatus::Error
            };
            let record = TraceRecord::ToolResult {
                iter,
                tool: name.to_string(),
                call_id: o.call.id.clone(),
                status,
                outcome: o.status.as_str().to_string(),
                elapsed_ms: o.elapsed.as_millis() as u64,
                result: redact_tool_result(&o.raw),
                blocked: o.status == ToolCallStatus::Denied,
            };
            trace_record(t, record);
        }
    }
}

/// A decision's target (a command may hold a secret) as `sink` shows it.
fn masked(target: &str, sink: Sink) -> String {
    match redact_value(&Value::String(target.to_string()), sink) {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

/// Names at most [`UNKNOWN_TOOL_SUGGESTIONS`] of the closest tools, never
/// the whole list: with thousands of MCP tools that alone was 44k tokens
/// (docs §2.2).
fn unknown_tool_message(name: &str, registry: &Registry) -> String {
    let names = registry.names();
    let close = crate::text::closest(name, &names, UNKNOWN_TOOL_SUGGESTIONS);
    let offered = names.len();
    if close.is_empty() {
        format!(
            "Tool '{name}' not found, and no offered tool has a similar name; call one of the {offered} tools of this request by its exact name"
        )
    } else {
        format!(
            "Tool '{name}' not found. Closest: {}. Call one of the {offered} tools of this request by its exact name",
            close.join(", ")
        )
    }
}

/// How many names an unknown-tool error suggests.
pub const UNKNOWN_TOOL_SUGGESTIONS: usize = 5;

fn error_json(tool: &str, code: &str, message: &str) -> String {
    json!({"status": "error", "error_code": code, "tool": tool, "error": message}).to_string()
}

fn not_run(call: &ToolCall, args: Value, status: ToolCallStatus, raw: String) -> CallOutcome {
    CallOutcome {
        model_content: raw.clone(),
        error_code: error_code(&raw),
        call: call.clone(),
        args,
        status,
        raw,
        output: None,
        elapsed: Duration::ZERO,
        executed: false,
    }
}

fn cancelled_before_start(call: &ToolCall, args: Value) -> CallOutcome {
    not_run(
        call,
        args,
        ToolCallStatus::Cancelled,
        cancelled_json(
            call.name(),
            "the run was cancelled before this call started",
        ),
    )
}

fn placeholder() -> CallOutcome {
    not_run(
        &ToolCall::new("", "", ""),
        Value::Null,
        ToolCallStatus::Skipped,
        String::new(),
    )
}

/// Name plus canonical arguments (keys sorted at every depth).
pub fn dedupe_key(name: &str, args: &Value) -> String {
    format!("{name}\u{0}{}", canonical_json(args))
}

pub fn canonical_json(v: &Value) -> String {
    fn canon(v: &Value) -> Value {
        match v {
            Value::Object(o) => {
                let mut keys: Vec<&String> = o.keys().collect();
                keys.sort();
                let mut out = serde_json::Map::new();
                for k in keys {
                    if let Some(x) = o.get(k) {
                        out.insert(k.clone(), canon(x));
                    }
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(canon).collect()),
            other => other.clone(),
        }
    }
    canon(v).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_args_ignore_key_order() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":2,"x":[{"q":1,"p":2}]}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":{"x":[{"p":2,"q":1}],"y":2},"b":1}"#).unwrap();
        assert_eq!(dedupe_key("t", &a), dedupe_key("t", &b));
        assert_ne!(dedupe_key("t", &a), dedupe_key("u", &a));
    }
}
