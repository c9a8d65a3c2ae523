//! A finished `backtest` call as a chat cell (issue 5, item 9): the one-line
//! summary, the key metrics, the equity curve (and the benchmark) over the
//! drawdown drawn with ratatui's `Chart` in braille, and the paths of the
//! SVG/PNG charts. Below [`CHART_MIN_WIDTH`] the curves fold to a one-line
//! sparkline until the cell is expanded.
//!
//! The series come from `<run_dir>/artifacts/equity.csv`. Reading it is IO:
//! `update` asks for it with an `Effect::LoadBacktest`, the runtime calls
//! [`load`] on a blocking thread and sends the parsed series back as
//! `Msg::BacktestLoaded`; the renderers only ever see parsed values. The live
//! chat learns of the call from `tool_call_finished`, whose structured
//! output is the typed [`BacktestOutput`] (run dir, summary, metrics); an
//! event without one (an older producer) has only a 200-character preview,
//! and then the summary and metrics are read from the run's files in the
//! same load.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ratatui::buffer::Buffer;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, Widget};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::format::{one_line, width as text_width};
use super::theme::Theme;
use super::wrap::{wrap_hard, wrap_spans};
use crate::model::contract::BacktestOutput;
use crate::research::backtest::chart::{compact, sparkline, terminal_points};

/// The tool whose results get this cell.
pub(crate) const TOOL: &str = crate::model::names::BACKTEST;
/// Where the engine writes the series, relative to the run directory.
pub(crate) const EQUITY_FILE: &str = "artifacts/equity.csv";
/// Chat widths from which the charts show without expanding. The chat keeps
/// one column of margin, so this is a terminal of 100 columns.
pub(crate) const CHART_MIN_WIDTH: usize = 99;
/// A bigger file is not a daily equity curve; it is not read at all.
const MAX_EQUITY_BYTES: u64 = 64 << 20;
/// Columns of the y-axis labels, the same for both charts so their plot
/// areas line up.
pub(super) const LABEL_W: usize = 7;
/// Decimals of the y-axis labels below 100: three labels on a curve of small
/// values must not read alike (see [`compact`]).
const LABEL_SMALL_DECIMALS: usize = 2;
/// Indent of everything under the cell's first line.
pub(super) const PAD: &str = "    ";

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh id to route a load's answer to its cell. Ids are never reused, so
/// an answer arriving after the chat was cleared matches nothing.
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// What the runtime is asked to read.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadRequest {
    pub id: u64,
    pub run_dir: PathBuf,
    /// Also read the summary, metrics and chart paths from the run's files
    /// (the cell only had a preview of the result).
    pub info: bool,
}

/// The metrics the cell shows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KeyMetrics {
    pub total_return: Option<f64>,
    pub annual_return: Option<f64>,
    pub sharpe: Option<f64>,
    pub max_drawdown: Option<f64>,
    pub trades: Option<u64>,
    pub win_rate: Option<f64>,
}

impl KeyMetrics {
    /// From the `metrics` object of a result (or `metrics.json`).
    pub(crate) fn from_json(m: &Map<String, Value>) -> Self {
        let f = |k: &str| m.get(k).and_then(Value::as_f64).filter(|x| x.is_finite());
        KeyMetrics {
            total_return: f("total_return"),
            annual_return: f("annual_return"),
            sharpe: f("sharpe"),
            max_drawdown: f("max_drawdown"),
            trades: f("trade_count").map(|x| x.max(0.0).round() as u64),
            win_rate: f("win_rate"),
        }
    }

    fn is_empty(&self) -> bool {
        *self == KeyMetrics::default()
    }
}

/// The result's text parts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BacktestInfo {
    pub summary: Option<String>,
    pub metrics: KeyMetrics,
    pub svg: Option<String>,
    pub png: Option<String>,
}

impl BacktestInfo {
    /// From a whole tool result; `None` unless it is a successful one.
    pub fn from_result(v: &Value) -> Option<Self> {
        let o = v.as_object()?;
        if o.get("status").and_then(Value::as_str) != Some("ok") {
            return None;
        }
        let text = |x: Option<&Value>| {
            x.and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };
        let chart = o.get("chart");
        Some(BacktestInfo {
            summary: text(o.get("summary")),
            metrics: o
                .get("metrics")
                .and_then(Value::as_object)
                .map(KeyMetrics::from_json)
                .unwrap_or_default(),
            svg: text(chart.and_then(|c| c.get("svg"))),
            png: text(chart.and_then(|c| c.get("png"))),
        })
    }
}

/// The curves of one run, one value per bar.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EquitySeries {
    pub dates: Vec<String>,
    pub equity: Vec<f64>,
    /// Fractions at or below zero.
    pub drawdown: Vec<f64>,
    pub benchmark: Option<Vec<f64>>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum SeriesState {
    Loading,
    Loaded(EquitySeries),
    /// Why there is no curve, short enough for the cell.
    Failed(String),
}

/// The cell's state.
#[derive(Clone, Debug, PartialEq)]
pub struct BacktestCell {
    pub id: u64,
    pub call_id: String,
    pub run_dir: PathBuf,
    /// `None` until the run's files were read (a live call has only a preview).
    pub info: Option<BacktestInfo>,
    pub series: SeriesState,
}

impl BacktestCell {
    pub(crate) fn new(call_id: &str, run_dir: PathBuf, info: Option<BacktestInfo>) -> Self {
        BacktestCell {
            id: next_id(),
            call_id: call_id.to_string(),
            run_dir,
            info,
            series: SeriesState::Loading,
        }
    }

    /// Whether the result's text is still to be read from the run's files.
    fn needs_info(&self) -> bool {
        self.info
            .as_ref()
            .is_none_or(|i| i.summary.is_none() && i.metrics.is_empty())
    }

    /// The load that fills this cell.
    pub(crate) fn request(&self) -> LoadRequest {
        LoadRequest {
            id: self.id,
            run_dir: self.run_dir.clone(),
            info: self.needs_info(),
        }
    }

    /// Takes a load's answer.
    pub(crate) fn apply(
        &mut self,
        series: Result<EquitySeries, EquityError>,
        info: Option<BacktestInfo>,
    ) {
        self.series = match series {
            Ok(s) => SeriesState::Loaded(s),
            Err(e) => SeriesState::Failed(e.to_string()),
        };
        if let Some(i) = info
            && self.needs_info()
        {
            self.info = Some(i);
        }
    }

    /// Text for search.
    pub fn plain_text(&self) -> String {
        let summary = self
            .info
            .as_ref()
            .and_then(|i| i.summary.clone())
            .unwrap_or_default();
        format!("{TOOL} {summary} {}", self.run_dir.display())
    }
}

/// The `run_dir` a backtest result names: from the whole JSON, or from the
/// head of a preview cut mid-document (the tool writes it second).
pub(crate) fn result_run_dir(text: &str) -> Option<PathBuf> {
    result_abs_path(text, "run_dir")
}

/// The absolute path a result names under the top-level `field` (the
/// factor screen's `screen_file` too), read as [`result_run_dir`] reads.
pub(crate) fn result_abs_path(text: &str, field: &str) -> Option<PathBuf> {
    let absolute = |s: String| Some(PathBuf::from(s)).filter(|p| p.is_absolute());
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return v
            .get(field)
            .and_then(Value::as_str)
            .and_then(|s| absolute(s.to_string()));
    }
    let key = format!("\"{field}\":");
    let start = text.find(&key)? + key.len();
    let rest = text[start..].trim_start();
    if !rest.starts_with('"') {
        return None;
    }
    let mut escaped = false;
    for (i, b) in rest.bytes().enumerate().skip(1) {
        if escaped {
            escaped = false;
            continue;
        }
        match b {
            b'\\' => escaped = true,
            b'"' => {
                let s: String = serde_json::from_str(&rest[..=i]).ok()?;
                return absolute(s);
            }
            _ => {}
        }
    }
    // The path itself was cut: unusable.
    None
}

/// Where a successful call's run directory is: named by its result, else by
/// its `run_dir` argument (relative ones resolve in the run's directory, as
/// the tool does), else the run's own directory.
pub(crate) fn locate_run_dir(
    result: &str,
    args: &Value,
    current_run: Option<&Path>,
) -> Option<PathBuf> {
    if let Some(p) = result_run_dir(result) {
        return Some(p);
    }
    let arg = args
        .get("run_dir")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty());
    match arg {
        Some(a) if Path::new(a).is_absolute() => Some(PathBuf::from(a)),
        Some(a) => current_run.map(|r| r.join(a)),
        None => current_run.map(Path::to_path_buf),
    }
}

/// A cell for a successful backtest from the structured output of its
/// `tool_call_finished` event: the run directory and the key numbers come
/// typed, with no text to dig through. `None` when it is not a backtest's
/// output or names no usable run directory.
pub(crate) fn cell_for_output(
    call_id: &str,
    output: &Value,
    args: &Value,
    current_run: Option<&Path>,
) -> Option<BacktestCell> {
    let out = BacktestOutput::deserialize(output).ok()?;
    let named = Some(PathBuf::from(&out.run_dir)).filter(|p| p.is_absolute());
    let run_dir = named.or_else(|| locate_run_dir("", args, current_run))?;
    Some(BacktestCell::new(
        call_id,
        run_dir,
        BacktestInfo::from_result(output),
    ))
}

/// A cell for a successful backtest result: `result` is the whole result or
/// a preview of it, `args` the call's arguments. `None` when no run
/// directory can be found.
pub(crate) fn cell_for_result(
    call_id: &str,
    result: &str,
    args: &Value,
    current_run: Option<&Path>,
) -> Option<BacktestCell> {
    let run_dir = locate_run_dir(result, args, current_run)?;
    let info = serde_json::from_str::<Value>(result)
        .ok()
        .and_then(|v| BacktestInfo::from_result(&v));
    Some(BacktestCell::new(call_id, run_dir, info))
}

// ---------------------------------------------------------------- loading

/// Why a run's equity curve cannot be drawn: a short reason for the cell.
/// Cloned into the message that carries it, hence shared sources.
#[derive(Clone, Debug, thiserror::Error)]
pub enum EquityError {
    #[error("{file} not found in the run directory", file = EQUITY_FILE)]
    Missing,
    #[error("cannot read {file}: {0}", file = EQUITY_FILE)]
    Unreadable(Arc<std::io::Error>),
    #[error("{file} is too large to draw ({0} MB)", file = EQUITY_FILE)]
    TooLarge(u64),
    #[error("{file} is malformed: {0}", file = EQUITY_FILE)]
    Malformed(EquityCsvError),
}

/// What is wrong inside an equity CSV.
#[derive(Clone, Debug, thiserror::Error)]
pub enum EquityCsvError {
    #[error("{0}")]
    Header(Arc<csv::Error>),
    #[error("no equity column")]
    NoEquityColumn,
    #[error("line {line} has {len} fields, the header {expected}")]
    Ragged {
        line: usize,
        len: u64,
        expected: u64,
    },
    #[error("line {line}: {source}")]
    Record {
        line: usize,
        source: Arc<csv::Error>,
    },
    #[error("line {line}: {what} '{cell}' is not a number")]
    NotANumber {
        line: usize,
        what: &'static str,
        cell: String,
    },
    #[error("no equity values")]
    NoValues,
}

/// Reads the series (and, when asked, the result's text parts) of the run
/// in `run_dir`. Blocking IO: the runtime calls this on a blocking thread.
pub fn load(
    run_dir: &Path,
    want_info: bool,
) -> (Result<EquitySeries, EquityError>, Option<BacktestInfo>) {
    let series = read_equity(&run_dir.join(EQUITY_FILE));
    let info = want_info.then(|| info_from_disk(run_dir));
    (series, info)
}

/// `equity.csv`, parsed; the error is a short reason for the cell.
pub(crate) fn read_equity(path: &Path) -> Result<EquitySeries, EquityError> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        ErrorKind::NotFound => EquityError::Missing,
        _ => EquityError::Unreadable(Arc::new(e)),
    })?;
    if meta.len() > MAX_EQUITY_BYTES {
        return Err(EquityError::TooLarge(meta.len() >> 20));
    }
    let text = std::fs::read_to_string(path).map_err(|e| EquityError::Unreadable(Arc::new(e)))?;
    parse_equity_csv(&text).map_err(EquityError::Malformed)
}

/// Parses an equity CSV by its header: `equity` is required; `timestamp`
/// (or `date`), `drawdown` and `benchmark_equity` are used when present.
/// Empty cells are gaps; any other cell that is not a number is an error.
pub fn parse_equity_csv(text: &str) -> Result<EquitySeries, EquityCsvError> {
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let head = rdr
        .headers()
        .map_err(|e| EquityCsvError::Header(Arc::new(e)))?
        .clone();
    let col = |names: &[&str]| {
        head.iter()
            .position(|h| names.iter().any(|n| h.eq_ignore_ascii_case(n)))
    };
    let eq_i = col(&["equity"]).ok_or(EquityCsvError::NoEquityColumn)?;
    let ts_i = col(&["timestamp", "date"]);
    let dd_i = col(&["drawdown"]);
    let bm_i = col(&["benchmark_equity"]);
    let mut out = EquitySeries::default();
    let mut dd = Vec::new();
    let mut bench = Vec::new();
    for (n, rec) in rdr.records().enumerate() {
        // Line numbers as an editor shows them (the header is line 1).
        let line = n + 2;
        let rec = rec.map_err(|e| match e.kind() {
            csv::ErrorKind::UnequalLengths {
                expected_len, len, ..
            } => EquityCsvError::Ragged {
                line,
                len: *len,
                expected: *expected_len,
            },
            _ => EquityCsvError::Record {
                line,
                source: Arc::new(e),
            },
        })?;
        let num = |i: usize, what: &'static str| -> Result<f64, EquityCsvError> {
            let cell = rec.get(i).unwrap_or("");
            if cell.is_empty() || cell.eq_ignore_ascii_case("nan") {
                return Ok(f64::NAN);
            }
            cell.parse::<f64>().map_err(|_| EquityCsvError::NotANumber {
                line,
                what,
                cell: one_line(cell, 16),
            })
        };
        out.equity.push(num(eq_i, "equity")?);
        if let Some(i) = dd_i {
            dd.push(num(i, "drawdown")?);
        }
        if let Some(i) = bm_i {
            bench.push(num(i, "benchmark_equity")?);
        }
        out.dates
            .push(ts_i.and_then(|i| rec.get(i)).unwrap_or("").to_string());
    }
    if !out.equity.iter().any(|v| v.is_finite()) {
        return Err(EquityCsvError::NoValues);
    }
    out.drawdown = if dd_i.is_some() {
        dd
    } else {
        drawdown_of(&out.equity)
    };
    out.benchmark = is_curve(&bench).then_some(bench);
    Ok(out)
}

/// The engine writes a flat line at the initial cash when there is no
/// benchmark: only a series that moves is one.
fn is_curve(v: &[f64]) -> bool {
    let mut finite = v.iter().copied().filter(|x| x.is_finite());
    let Some(first) = finite.next() else {
        return false;
    };
    finite.any(|x| (x - first).abs() > 1e-9 * first.abs().max(1.0))
}

/// Drawdown from the running peak, for a file without the column.
fn drawdown_of(equity: &[f64]) -> Vec<f64> {
    let mut peak = f64::NEG_INFINITY;
    equity
        .iter()
        .map(|&e| {
            if !e.is_finite() {
                return f64::NAN;
            }
            peak = peak.max(e);
            if peak > 0.0 { e / peak - 1.0 } else { 0.0 }
        })
        .collect()
}

/// The summary, metrics and chart paths from the run's files.
fn info_from_disk(run_dir: &Path) -> BacktestInfo {
    use crate::tools::builtin::backtest::{read_metrics, run_card_summary};
    let mut info = BacktestInfo::default();
    if let Ok(card) = run_card_summary(run_dir) {
        info.summary = card
            .get("summary")
            .and_then(Value::as_str)
            .map(String::from);
        if let Some(m) = card.get("metrics").and_then(Value::as_object) {
            info.metrics = KeyMetrics::from_json(m);
        }
    }
    if info.metrics.is_empty()
        && let Some(m) = read_metrics(run_dir)
    {
        info.metrics = KeyMetrics::from_json(&m);
    }
    let art = run_dir.join("artifacts");
    for (slot, name) in [
        (&mut info.svg, "equity_chart.svg"),
        (&mut info.png, "equity_chart.png"),
    ] {
        let p = art.join(name);
        if p.is_file() {
            *slot = Some(p.display().to_string());
        }
    }
    info
}

// -------------------------------------------------------------- rendering

fn pad() -> Vec<Span<'static>> {
    vec![Span::raw(PAD)]
}

/// The cell's lines at `width`: expanded, the charts; folded, a sparkline.
pub(crate) fn render(
    cell: &BacktestCell,
    width: usize,
    theme: &Theme,
    expanded: bool,
    out: &mut Vec<Line<'static>>,
) {
    let head = match &cell.info {
        Some(BacktestInfo {
            summary: Some(s), ..
        }) => s.clone(),
        Some(_) => format!("backtest result · {}", cell.run_dir.display()),
        None => "backtest result · reading the run's files…".to_string(),
    };
    let first = vec![Span::raw("  "), Span::styled("◆ ", theme.accent)];
    if expanded {
        let spans = [Span::styled(head, theme.text)];
        out.extend(wrap_spans(&spans, width, &first, &pad()));
    } else {
        // The one-line summary: the metrics line below carries the numbers.
        let mut spans = first;
        spans.push(Span::styled(
            one_line(&head, width.saturating_sub(4)),
            theme.text,
        ));
        out.push(Line::from(spans));
    }
    if let Some(info) = &cell.info
        && !info.metrics.is_empty()
    {
        out.extend(flow(metric_items(&info.metrics, theme), width));
    }
    match &cell.series {
        SeriesState::Loading => out.push(Line::from(vec![
            Span::raw(PAD),
            Span::styled("loading the equity curve…", theme.muted),
        ])),
        SeriesState::Failed(e) => {
            let spans = [Span::styled(format!("no equity curve: {e}"), theme.warn)];
            let first = [Span::raw(PAD), Span::styled("⚠ ", theme.warn)];
            out.extend(wrap_spans(&spans, width, &first, &[Span::raw("      ")]));
        }
        SeriesState::Loaded(s) if s.equity.len() < 2 => out.push(Line::from(vec![
            Span::raw(PAD),
            Span::styled("one bar: nothing to draw", theme.muted),
        ])),
        // The chart needs room for its labels and a few columns of plot.
        SeriesState::Loaded(s) if expanded && width >= PAD.len() + LABEL_W + 12 => {
            charts(s, width, theme, out)
        }
        SeriesState::Loaded(s) => out.push(spark_line(s, width, theme)),
    }
    let mut files = false;
    if let Some(info) = &cell.info {
        for (label, path) in [("svg ", &info.svg), ("png ", &info.png)] {
            if let Some(p) = path {
                files = true;
                // Hard-wrapped, never cut: the user copies it to open the file.
                let prefix = [Span::raw(PAD), Span::styled(label, theme.muted)];
                out.extend(wrap_hard(p, theme.link, width, &prefix));
            }
        }
    }
    if !files && cell.info.is_some() {
        let prefix = [Span::raw(PAD), Span::styled("run ", theme.muted)];
        out.extend(wrap_hard(
            &cell.run_dir.display().to_string(),
            theme.link,
            width,
            &prefix,
        ));
    }
}

fn pct(x: f64) -> String {
    format!("{:+.2}%", x * 100.0)
}

fn signed(theme: &Theme, x: f64) -> Style {
    if x < 0.0 { theme.error } else { theme.ok }
}

/// `label value` pairs of the key metrics, each kept whole on one line.
fn metric_items(m: &KeyMetrics, theme: &Theme) -> Vec<Vec<Span<'static>>> {
    let mut items = Vec::new();
    let mut item = |label: &str, value: String, style: Style| {
        items.push(vec![
            Span::styled(format!("{label} "), theme.muted),
            Span::styled(value, style),
        ]);
    };
    if let Some(x) = m.total_return {
        item("total", pct(x), signed(theme, x));
    }
    if let Some(x) = m.annual_return {
        item("annual", pct(x), signed(theme, x));
    }
    if let Some(x) = m.sharpe {
        item("Sharpe", format!("{x:.2}"), signed(theme, x));
    }
    if let Some(x) = m.max_drawdown {
        // Stored as a negative fraction; shown the way the summary does.
        item("max drawdown", format!("{:.2}%", x * 100.0), theme.warn);
    }
    if let Some(n) = m.trades {
        item("trades", n.to_string(), theme.text);
    }
    if let Some(x) = m.win_rate {
        item("win rate", format!("{:.1}%", x * 100.0), theme.text);
    }
    items
}

/// Lays items out left to right, starting a new line when the next one
/// does not fit.
fn flow(items: Vec<Vec<Span<'static>>>, width: usize) -> Vec<Line<'static>> {
    const GAP: &str = "   ";
    let mut lines = Vec::new();
    let mut cur = pad();
    let mut used = PAD.len();
    for item in items {
        let w: usize = item.iter().map(Span::width).sum();
        let at_start = used == PAD.len();
        if !at_start && used + GAP.len() + w > width {
            lines.push(Line::from(std::mem::replace(&mut cur, pad())));
            used = PAD.len();
        }
        if used > PAD.len() {
            cur.push(Span::raw(GAP));
            used += GAP.len();
        }
        used += w;
        cur.extend(item);
    }
    if used > PAD.len() {
        lines.push(Line::from(cur));
    }
    lines
}

/// Folded: the equity and drawdown as block sparklines on one line.
fn spark_line(s: &EquitySeries, width: usize, theme: &Theme) -> Line<'static> {
    let room = width.saturating_sub(PAD.len());
    let (eq_label, dd_label) = ("equity ", "   drawdown ");
    let labels = eq_label.len() + dd_label.len();
    let mut spans = vec![Span::raw(PAD), Span::styled(eq_label, theme.muted)];
    if room >= labels + 24 {
        let cells = room - labels;
        let eq_w = cells * 2 / 3;
        spans.push(Span::styled(sparkline(&s.equity, eq_w), theme.accent));
        spans.push(Span::styled(dd_label, theme.muted));
        spans.push(Span::styled(
            sparkline(&s.drawdown, cells - eq_w),
            theme.error,
        ));
    } else {
        let w = room.saturating_sub(eq_label.len());
        spans.push(Span::styled(sparkline(&s.equity, w), theme.accent));
    }
    Line::from(spans)
}

/// A drawdown label: whole percents, with a decimal for shallow ones.
fn dd_pct(x: f64) -> String {
    let p = x * 100.0;
    if p > -10.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

/// A y-axis label, right-aligned to [`LABEL_W`].
pub(super) fn y_label(text: String, theme: &Theme) -> Span<'static> {
    Span::styled(format!("{text:>LABEL_W$}"), theme.muted)
}

fn bounds(series: &[&[f64]]) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in series.iter().flat_map(|s| s.iter()) {
        if v.is_finite() {
            lo = lo.min(*v);
            hi = hi.max(*v);
        }
    }
    if !lo.is_finite() {
        return None;
    }
    let pad = ((hi - lo) * 0.05).max(hi.abs() * 1e-6).max(1e-9);
    // Padding never invents a negative axis for values that are not.
    let floor = if lo >= 0.0 { 0.0 } else { f64::NEG_INFINITY };
    Some(((lo - pad).max(floor), hi + pad))
}

/// Expanded: a legend line, the equity chart, then the drawdown chart with
/// the dates under it.
fn charts(s: &EquitySeries, width: usize, theme: &Theme, out: &mut Vec<Line<'static>>) {
    let w = width - PAD.len();
    // Plot columns: what is left of the labels and the axis.
    let plot_w = w.saturating_sub(LABEL_W + 1).max(1);
    let n = s.equity.len();
    let x_max = (n.max(2) - 1) as f64;
    let bench = s.benchmark.as_deref();

    let mut legend = vec![
        Span::raw(PAD),
        Span::styled("equity  ", theme.muted),
        Span::styled("━ strategy", theme.accent),
    ];
    if bench.is_some() {
        legend.push(Span::raw("  "));
        legend.push(Span::styled("━ benchmark", theme.muted));
    }
    let used: usize = legend.iter().map(Span::width).sum();
    if let (Some(a), Some(z)) = (s.dates.first(), s.dates.last())
        && !a.is_empty()
    {
        let range = format!("   {a} → {z}");
        if used + text_width(&range) <= width {
            legend.push(Span::styled(range, theme.muted));
        }
    }
    out.push(Line::from(legend));

    // Braille packs two points per column.
    let eq_pts = terminal_points(&s.equity, plot_w * 2);
    let bm_pts = bench.map(|b| terminal_points(b, plot_w * 2));
    let (lo, hi) = bounds(&[&s.equity, bench.unwrap_or(&[])]).unwrap_or((0.0, 1.0));
    let mut sets = Vec::new();
    if let Some(b) = &bm_pts {
        sets.push(
            Dataset::default()
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(theme.muted)
                .data(b),
        );
    }
    // The strategy last, so it draws over the benchmark.
    sets.push(
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.accent)
            .data(&eq_pts),
    );
    let equity = Chart::new(sets)
        .legend_position(None)
        .x_axis(Axis::default().bounds([0.0, x_max]))
        .y_axis(
            Axis::default()
                .bounds([lo, hi])
                .style(theme.border)
                .labels([
                    y_label(compact(lo, LABEL_SMALL_DECIMALS), theme),
                    y_label(compact((lo + hi) / 2.0, LABEL_SMALL_DECIMALS), theme),
                    y_label(compact(hi, LABEL_SMALL_DECIMALS), theme),
                ]),
        );
    let eq_h = (width / 8).clamp(8, 14);
    out.extend(draw(equity, w, eq_h));

    out.push(Line::from(vec![
        Span::raw(PAD),
        Span::styled("drawdown", theme.muted),
    ]));
    let dd_pts = terminal_points(&s.drawdown, plot_w * 2);
    let dd_lo = bounds(&[&s.drawdown]).map_or(-0.01, |(lo, _)| lo.min(-0.01));
    let mut x_axis = Axis::default().bounds([0.0, x_max]).style(theme.border);
    let dates_known = s.dates.iter().all(|d| !d.is_empty());
    if dates_known && let (Some(a), Some(z)) = (s.dates.first(), s.dates.last()) {
        let mid = s.dates.get(n / 2).map_or("", String::as_str);
        x_axis = x_axis
            .labels([
                Span::styled(a.clone(), theme.muted),
                Span::styled(mid.to_string(), theme.muted),
                Span::styled(z.clone(), theme.muted),
            ])
            .labels_alignment(Alignment::Right);
    }
    let drawdown = Chart::new(vec![
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Area)
            .fill_to_y(0.0)
            .style(theme.error)
            .data(&dd_pts),
    ])
    .legend_position(None)
    .x_axis(x_axis)
    .y_axis(
        Axis::default()
            .bounds([dd_lo, 0.0])
            .style(theme.border)
            .labels([y_label(dd_pct(dd_lo), theme), y_label("0%".into(), theme)]),
    );
    let dd_h = if dates_known { 6 } else { 4 };
    out.extend(draw(drawdown, w, dd_h));
}

/// Renders a widget off screen and returns its rows as indented lines, so
/// it sits in the chat's line cache like any other cell text.
pub(super) fn draw(widget: impl Widget, width: usize, height: usize) -> Vec<Line<'static>> {
    draw_indented(widget, width, height, PAD)
}

/// [`draw`] with another indent (the tear-sheet view's margin).
pub(super) fn draw_indented(
    widget: impl Widget,
    width: usize,
    height: usize,
    indent: &'static str,
) -> Vec<Line<'static>> {
    let area = Rect::new(
        0,
        0,
        width.min(u16::MAX as usize) as u16,
        height.min(u16::MAX as usize) as u16,
    );
    let mut buf = Buffer::empty(area);
    widget.render(area, &mut buf);
    buffer_lines(&buf, indent)
}

/// A cell's style without the terminal defaults the buffer starts with, so
/// the chat's own background shows through.
fn cell_style(c: &ratatui::buffer::Cell) -> Style {
    let mut s = Style::default().add_modifier(c.modifier);
    if c.fg != Color::Reset {
        s = s.fg(c.fg);
    }
    if c.bg != Color::Reset {
        s = s.bg(c.bg);
    }
    s
}

fn buffer_lines(buf: &Buffer, indent: &'static str) -> Vec<Line<'static>> {
    let area = buf.area;
    (area.top()..area.bottom())
        .map(|y| {
            let mut spans = vec![Span::raw(indent)];
            let mut text = String::new();
            let mut style = Style::default();
            for x in area.left()..area.right() {
                let Some(c) = buf.cell((x, y)) else {
                    continue;
                };
                let s = cell_style(c);
                if s != style && !text.is_empty() {
                    spans.push(Span::styled(std::mem::take(&mut text), style));
                }
                style = s;
                text.push_str(c.symbol());
            }
            // Trailing blanks carry nothing.
            let kept = if style == Style::default() {
                text.trim_end().to_string()
            } else {
                text
            };
            if !kept.is_empty() {
                spans.push(Span::styled(kept, style));
            }
            Line::from(spans)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_dir_from_whole_and_cut_results() {
        let whole = r#"{"status":"ok","run_dir":"/d/runs/a\"b","summary":"x"}"#;
        assert_eq!(result_run_dir(whole), Some(PathBuf::from("/d/runs/a\"b")));
        let cut = r#"{"status":"ok","run_dir":"/d/runs/x","exit_code":0,"stdout":"lo"#;
        assert_eq!(result_run_dir(cut), Some(PathBuf::from("/d/runs/x")));
        assert_eq!(result_run_dir(r#"{"status":"ok","run_dir":"/d/ru"#), None);
        assert_eq!(result_run_dir(r#"{"run_dir":"relative"}"#), None);
        let args = serde_json::json!({"run_dir": "sub"});
        assert_eq!(
            locate_run_dir("{}", &args, Some(Path::new("/r"))),
            Some(PathBuf::from("/r/sub"))
        );
        assert_eq!(locate_run_dir("", &Value::Null, None), None);
    }

    #[test]
    fn csv_columns_gaps_and_errors() {
        let s = parse_equity_csv("timestamp,equity\n2020-01-01,100\n2020-01-02,\n2020-01-03,90\n")
            .unwrap();
        assert_eq!(s.dates.len(), 3);
        assert!(s.equity[1].is_nan());
        assert_eq!(s.drawdown[2], 90.0 / 100.0 - 1.0);
        assert_eq!(s.benchmark, None);
        let flat = "timestamp,equity,drawdown,benchmark_equity\nd1,1,0,5\nd2,2,0,5\n";
        assert_eq!(parse_equity_csv(flat).unwrap().benchmark, None);
        assert!(
            parse_equity_csv("a,b\n1,2\n")
                .unwrap_err()
                .to_string()
                .contains("no equity")
        );
        assert!(
            parse_equity_csv("equity\nabc\n")
                .unwrap_err()
                .to_string()
                .contains("line 2")
        );
        assert!(
            parse_equity_csv("equity,x\n1,2\n3\n")
                .unwrap_err()
                .to_string()
                .contains("line 3 has 1 fields")
        );
        assert!(parse_equity_csv("equity\n").is_err());
    }
}
