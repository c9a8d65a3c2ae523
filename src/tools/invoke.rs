//! The one path a tool call runs by (docs §2.4, §13.4): the scheduler runs
//! each call of a batch through [`invoke`], and `vibedesk mcp serve` runs
//! each served call through it too, so a client's call has the same
//! deadline, cancellation, heartbeats, progress and result limit as an
//! agent's.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::events::{ToolCallStatus, ToolEvent, ToolEventSink};
use super::finalize::{error_code, is_success, preview, truncate_for_model};
use super::progress::{ProgressHandle, round2};
use super::redact::{Sink, redact_tool_result, redact_value};
use super::{Tool, ToolContext};
use crate::model::ToolCall;

#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// Deadline for a call whose tool names none; `None` disables (docs §2.6: 1 800 s).
    pub default_timeout: Option<Duration>,
    /// Heartbeat period, floored at 0.5 s (docs §2.4: 3 s).
    pub heartbeat_interval: Duration,
    /// Concurrent read-only calls per batch (docs §2.3: 8).
    pub max_parallel: usize,
    /// Characters of a result the model sees (docs §2.7: 10 000).
    pub result_limit: usize,
    /// The model sees each tool's lean result ([`Tool::lean_result`]):
    /// a lean prompt's small model (docs §2.7).
    pub lean_results: bool,
    /// After the user cancels, how long a running write tool may take to
    /// notice before it is abandoned. The original waits forever (docs §12.20).
    pub write_cancel_grace: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            default_timeout: Some(Duration::from_secs(1800)),
            heartbeat_interval: Duration::from_secs(3),
            max_parallel: 8,
            result_limit: 10_000,
            lean_results: false,
            write_cancel_grace: Duration::from_secs(10),
        }
    }
}

/// What happened to one call.
#[derive(Clone, Debug)]
pub struct CallOutcome {
    pub call: ToolCall,
    /// Parsed arguments (`Null` when they were not valid JSON).
    pub args: Value,
    pub status: ToolCallStatus,
    /// The full, unredacted result.
    pub raw: String,
    /// A typed tool's result as data (unredacted), when it ran and answered.
    pub output: Option<Value>,
    /// What the model sees: the raw result, truncated (docs §2.5 step 7).
    pub model_content: String,
    pub elapsed: Duration,
    pub error_code: Option<String>,
    /// Whether the tool actually ran.
    pub executed: bool,
}

impl CallOutcome {
    pub fn succeeded(&self) -> bool {
        self.status == ToolCallStatus::Ok
    }
}

/// A call answered without running (boxed: an outcome is large).
pub(super) fn cancelled_json(tool: &str, message: &str) -> String {
    json!({"status": "cancelled", "error_code": "cancelled", "tool": tool, "error": message})
        .to_string()
}

/// One call to run, with what it needs borrowed from its caller.
pub struct Invocation<'a> {
    /// The loop iteration the call belongs to (0 outside a loop).
    pub iter: u64,
    pub tool: Arc<dyn Tool>,
    /// The arguments as checked.
    pub args: Value,
    /// The arguments as events show them (redacted for display).
    pub shown_args: Value,
    /// The deadline when the tool names none, the heartbeat, the result
    /// limit, the write tools' cancel grace.
    pub config: &'a SchedulerConfig,
    /// Where the call's events go.
    pub sink: &'a ToolEventSink,
    /// The caller's cancellation: the agent's run, or an MCP client's request.
    pub run_cancel: &'a CancellationToken,
}

/// A call from outside a conversation (an MCP client's), named by its
/// context's call id and the tool's name, its arguments as given.
pub async fn invoke_outside(inv: Invocation<'_>, ctx: ToolContext) -> CallOutcome {
    let call = ToolCall::new(&ctx.call_id, inv.tool.name(), inv.args.to_string());
    invoke(inv, call, ctx).await
}

/// Runs one call with heartbeats, its deadline and cancellation (docs §2.4),
/// progress and its end as events, and the model's view of its result cut
/// to the limit (§2.7).
pub async fn invoke(inv: Invocation<'_>, call: ToolCall, ctx: ToolContext) -> CallOutcome {
    let name = inv.tool.name().to_string();
    let readonly = inv.tool.readonly();
    let timeout = inv.tool.timeout().or(inv.config.default_timeout);
    (inv.sink)(ToolEvent::ToolCallStarted {
        iter: inv.iter,
        call_id: call.id.clone(),
        tool: name.clone(),
        args: inv.shown_args.clone(),
        readonly,
        timeout_s: timeout.map(|t| t.as_secs_f64()),
    });
    let started = Instant::now();
    // Checked: a deadline past the clock's range is no deadline.
    let deadline = timeout.and_then(|t| started.checked_add(t));
    let progress = ProgressHandle::new(inv.sink.clone(), &call.id, &name);
    let call_cancel = ctx.cancel.clone();
    // The panic boundary (docs §2.4): a panic while the tool runs is its
    // `internal_error` result, and the run or the server goes on. A
    // read-only tool may read its deadline, to refuse work that cannot fit.
    let fut = progress.clone().scope(super::guard::with_deadline(
        deadline.filter(|_| readonly),
        super::guard::Guarded::new(inv.tool.call_with_output(inv.args.clone(), &ctx)),
    ));
    tokio::pin!(fut);

    let period = inv
        .config
        .heartbeat_interval
        .max(Duration::from_millis(500));
    let mut heartbeat = tokio::time::interval_at(started + period, period);
    let mut warned = false;
    let mut grace_until: Option<Instant> = None;
    let far = started + Duration::from_secs(86_400 * 365);

    let mut output = None;
    let (status, raw) = loop {
        tokio::select! {
            biased;
            result = &mut fut => {
                let result = result.unwrap_or_else(|p| {
                    tracing::error!(tool = %name, call = %call.id, panic = %p.message, "a tool panicked");
                    Err(p.into_tool_error(&name))
                });
                break match result {
                    Ok(reply) => {
                        output = reply.output;
                        let text = reply.text;
                        (if is_success(&text) { ToolCallStatus::Ok } else { ToolCallStatus::Error }, text)
                    }
                    Err(e) => (ToolCallStatus::Error, e.to_result_json(&name)),
                };
            }
            _ = inv.run_cancel.cancelled(), if grace_until.is_none() => {
                call_cancel.cancel();
                if readonly {
                    progress.silence();
                    break (ToolCallStatus::Cancelled, cancelled_json(&name, "the run was cancelled while this call was running"));
                }
                // Write tools get a grace period to stop cleanly (they saw the token).
                grace_until = Some(Instant::now() + inv.config.write_cancel_grace);
            }
            _ = tokio::time::sleep_until(grace_until.unwrap_or(far)), if grace_until.is_some() => {
                progress.silence();
                break (ToolCallStatus::Cancelled, cancelled_json(&name, "the run was cancelled; this write call did not stop within the grace period and was abandoned, so its effect is unknown"));
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or(far)), if deadline.is_some() && !warned => {
                let elapsed = started.elapsed().as_secs_f64();
                let limit = timeout.unwrap_or_default().as_secs_f64();
                if readonly {
                    // Really stop it: the token tells tools to kill their
                    // children, and dropping the future ends the rest.
                    call_cancel.cancel();
                    progress.silence();
                    (inv.sink)(ToolEvent::ToolProgress {
                        call_id: call.id.clone(),
                        tool: name.clone(),
                        stage: "timeout".into(),
                        current: None,
                        total: None,
                        message: format!("Tool exceeded {} timeout", timeout_label(limit)),
                        elapsed_s: round2(elapsed),
                    });
                    break (ToolCallStatus::Timeout, json!({
                        "status": "error", "error_code": "tool_timeout", "tool": name,
                        "timeout_seconds": limit,
                        "message": format!("'{name}' did not finish within {} and was stopped; narrow the request or try again", timeout_label(limit)),
                    }).to_string());
                }
                warned = true;
                (inv.sink)(ToolEvent::ToolTimeoutWarning {
                    call_id: call.id.clone(),
                    tool: name.clone(),
                    elapsed_s: round2(elapsed),
                    timeout_s: limit,
                });
            }
            _ = heartbeat.tick() => {
                if !progress.is_silenced() {
                    (inv.sink)(ToolEvent::ToolHeartbeat {
                        call_id: call.id.clone(),
                        tool: name.clone(),
                        elapsed_s: round2(started.elapsed().as_secs_f64()),
                        since_progress_s: round2(progress.since_progress_s()),
                    });
                }
            }
        }
    };
    // The latest progress still held back by the coalescing goes out
    // before the call's end (docs §2.9).
    progress.finish();
    let lean = match (&output, status) {
        (Some(v), ToolCallStatus::Ok) if inv.config.lean_results => {
            inv.tool.lean_result(v).map(|l| l.to_string())
        }
        _ => None,
    };
    let outcome = CallOutcome {
        model_content: truncate_for_model(lean.as_ref().unwrap_or(&raw), inv.config.result_limit),
        error_code: error_code(&raw),
        call,
        args: inv.args,
        status,
        raw,
        output,
        elapsed: started.elapsed(),
        executed: true,
    };
    emit_finished(inv.sink, inv.iter, &outcome);
    outcome
}

/// The call's end as an event, its result redacted for display.
pub(super) fn emit_finished(sink: &ToolEventSink, iter: u64, o: &CallOutcome) {
    sink(ToolEvent::ToolCallFinished {
        iter,
        call_id: o.call.id.clone(),
        tool: o.call.name().to_string(),
        status: o.status,
        elapsed_ms: o.elapsed.as_millis() as u64,
        preview: preview(&redact_tool_result(&o.raw), 200),
        error_code: o.error_code.clone(),
        output: o.output.as_ref().map(|v| redact_value(v, Sink::Result)),
    });
}

/// `<1 s` → two decimals, else whole seconds (docs §2.4).
fn timeout_label(seconds: f64) -> String {
    if seconds < 1.0 {
        format!("{seconds:.2}s")
    } else {
        format!("{}s", seconds as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_labels() {
        assert_eq!(timeout_label(0.05), "0.05s");
        assert_eq!(timeout_label(1800.0), "1800s");
    }
}
