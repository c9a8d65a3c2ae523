//! The loop's constants (docs §1.1), all settable from `config.toml`
//! (`[agent]`) and the environment. Defaults equal the original's.

use std::time::Duration;

use super::compaction::CompactionSettings;
use crate::store::TraceOptions;
use crate::tools::SchedulerConfig;

/// One user message may hold at most 1 MiB. That is about 260 000 tokens
/// by the chars/4 estimate: six times the default compaction threshold
/// (40 000 tokens) and more than most models' whole context window, so a
/// larger message could only be compacted away before the model reads it.
/// Real typed or pasted prompts are far below it (a long pasted report is
/// 10–100 KB). Larger texts go in as files in the session workspace, which
/// the file tools page through.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// The smallest limit `[agent] max_message_bytes` may set.
pub const MIN_MAX_MESSAGE_BYTES: usize = 1024;

#[derive(Clone, Debug)]
pub struct LoopConfig {
    pub max_iterations: u32,
    /// Wrap-up nudge at `max(1, floor(max * ratio))` (docs §1.1: 0.8).
    pub wrap_up_ratio: f64,
    /// T, the compaction threshold in estimated tokens.
    pub token_threshold: u64,
    /// Whole-call deadline of one model call; `None` disables.
    pub llm_timeout: Option<Duration>,
    /// Longest silence inside one streamed reply; `None` disables.
    pub idle_timeout: Option<Duration>,
    /// Wait before the single stream retry (spec: 1 s). A server's
    /// `Retry-After` wins when longer, capped at `max_retry_after`.
    pub stream_retry_delay: Duration,
    pub max_retry_after: Duration,
    /// Run stall watchdog; `None` disables (docs §1.7: 1 800 s).
    pub stall_timeout: Option<Duration>,
    /// At most one `reasoning_delta` event per interval (spec: 1 s).
    pub reasoning_throttle: Duration,
    /// Consecutive empty replies tolerated before the run fails (spec: 1).
    pub max_empty_skips: u32,
    /// Consecutive content-filter blocks before the breaker trips (spec: 10).
    pub max_content_filter_skips: u32,
    /// Warn when filtered / iterations exceeds this (spec: 0.05).
    pub content_filter_warning_ratio: f64,
    /// History replayed into a new run, in characters (docs §4.1: 12 000).
    pub history_chars: usize,
    /// Largest user message accepted, in bytes of UTF-8 (not in the
    /// original, which takes any size). See [`DEFAULT_MAX_MESSAGE_BYTES`].
    pub max_message_bytes: usize,
    pub scheduler: SchedulerConfig,
    pub compaction: CompactionSettings,
    pub trace: TraceOptions,
    /// How often the streamed text is checkpointed for crash recovery (docs §5.2).
    pub partial_checkpoint_interval: Duration,
    /// Read tool calls a reply writes as text (docs §2.11.1); on for local
    /// OpenAI-compatible servers, off for hosted ones.
    pub text_tool_calls: bool,
    /// The model's context window in tokens, when known from the config;
    /// otherwise discovered from the server or a context-size error (§3.9).
    pub context_window: Option<u64>,
    /// Whether to ask the server for its window when none is configured.
    pub discover_window: bool,
    /// The tools offered, by name, in this order; `None` offers every
    /// registered tool (docs §4.7).
    pub tools: Option<Vec<String>>,
    /// With no `tools` named, offer each request the tools chosen for it
    /// and fitted to the window (docs §4.7.1): the local presets.
    pub choose_tools: bool,
    /// A lean, cache-stable prompt for a small local model (docs §4.3,
    /// §4.7): lean tool schemas, and the run's context in the user message.
    pub lean_prompt: bool,
    /// Which calls run unasked, ask, or are refused (docs §2.14).
    pub approval: crate::model::approval::ApprovalMode,
    /// Send each reply a `max_tokens` sized to the window (docs §2.11.2):
    /// a local server with no `max_tokens` configured.
    pub size_replies: bool,
    /// Cut a streaming reply that repeats itself or streams data rows, and
    /// ask once for a short answer (docs §2.11.2): a local server.
    pub cut_runaways: bool,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            max_iterations: 50,
            wrap_up_ratio: 0.8,
            token_threshold: 40_000,
            llm_timeout: Some(Duration::from_secs(300)),
            idle_timeout: Some(Duration::from_secs(300)),
            stream_retry_delay: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(120),
            stall_timeout: Some(Duration::from_secs(1800)),
            reasoning_throttle: Duration::from_secs(1),
            max_empty_skips: 1,
            max_content_filter_skips: 10,
            content_filter_warning_ratio: 0.05,
            history_chars: 12_000,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            scheduler: SchedulerConfig::default(),
            compaction: CompactionSettings::default(),
            trace: TraceOptions::default(),
            partial_checkpoint_interval: Duration::from_millis(250),
            text_tool_calls: false,
            context_window: None,
            discover_window: false,
            tools: None,
            choose_tools: false,
            lean_prompt: false,
            approval: crate::model::approval::ApprovalMode::Ask,
            size_replies: false,
            cut_runaways: false,
        }
    }
}

impl LoopConfig {
    /// The iteration that gets the wrap-up nudge (docs §1.1).
    pub fn wrap_up_at(&self) -> u32 {
        ((self.max_iterations as f64 * self.wrap_up_ratio) as u32).max(1)
    }

    /// The threshold for a model whose window is `window` tokens: the
    /// configured one, or lower so that a reply still fits (docs §3.9).
    pub fn threshold_for(&self, window: u64) -> u64 {
        let reserve = (window / 4).min(4_096);
        self.token_threshold
            .min(window.saturating_sub(reserve))
            .max(512)
    }

    /// Scales what depends on the model's window to `window` tokens
    /// (docs §3.9): the compaction threshold (and so its gates), the
    /// characters of a tool result the model sees, and the size of a
    /// summary chunk. Never raises a configured value.
    pub fn fit_window(&mut self, window: u64) {
        self.token_threshold = self.threshold_for(window);
        let result_chars = usize::try_from(window * 3 / 8).unwrap_or(usize::MAX);
        self.scheduler.result_limit = self.scheduler.result_limit.min(result_chars.max(1_000));
        let chunk_chars = usize::try_from(window * 3 / 4).unwrap_or(usize::MAX);
        self.compaction.auto.chunk_chars =
            self.compaction.auto.chunk_chars.min(chunk_chars.max(2_000));
    }

    /// Compaction gates in tokens: L1 `int(0.5T)`, L2 `int(0.7T)`, L3 `T`.
    pub fn gates(&self) -> [u64; 3] {
        let t = self.token_threshold;
        [t / 2, (t as f64 * 0.7) as u64, t]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_values_match_the_spec() {
        let c = LoopConfig::default();
        assert_eq!(c.wrap_up_at(), 40);
        assert_eq!(c.gates(), [20_000, 28_000, 40_000]);
        let small = LoopConfig {
            max_iterations: 1,
            ..LoopConfig::default()
        };
        assert_eq!(small.wrap_up_at(), 1);
    }

    #[test]
    fn a_small_window_scales_the_gates_and_the_result_cap() {
        let mut c = LoopConfig::default();
        c.fit_window(8_192);
        assert_eq!(c.token_threshold, 6_144, "a quarter kept for the reply");
        assert_eq!(c.gates(), [3_072, 4_300, 6_144]);
        assert_eq!(c.scheduler.result_limit, 3_072);
        assert_eq!(c.compaction.auto.chunk_chars, 6_144);
        let mut big = LoopConfig::default();
        big.fit_window(128_000);
        assert_eq!(
            big.token_threshold, 40_000,
            "never above the configured one"
        );
        assert_eq!(big.scheduler.result_limit, 10_000);
    }
}
