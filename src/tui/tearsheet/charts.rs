//! The view's shared drawing pieces: braille line charts over dates with
//! ticks on year or month boundaries, number formats, and laying two
//! columns of lines side by side on wide screens.

use chrono::{Datelike, NaiveDate};
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Dataset, GraphType};

use super::super::backtest::draw_indented;
use super::super::format::width as text_width;
use super::super::theme::Theme;
use crate::research::backtest::chart::terminal_points;

/// Widths from which two columns sit side by side.
pub(crate) const WIDE: usize = 120;
/// The view's left margin.
pub(crate) const MARGIN: &str = " ";
/// Columns of the y-axis labels: every chart's plot starts at the same
/// column, so ticks can be placed under it.
const LABEL_W: usize = 8;

/// One curve of a chart.
pub(crate) struct Curve<'a> {
    pub values: &'a [f64],
    pub style: Style,
}

/// How a chart is drawn.
#[derive(Clone, Copy)]
pub(crate) struct ChartSpec {
    pub width: usize,
    pub height: usize,
    /// Fill between the first curve and zero (the underwater curve).
    pub area: bool,
    /// Always show zero on the y axis (returns, drawdowns, ratios).
    pub with_zero: bool,
    pub y_fmt: fn(f64) -> String,
}

/// A percentage with `d` decimals: `12.34%`, `-5.0%`.
pub(crate) fn pct(x: f64, d: usize) -> String {
    format!("{:.d$}%", hundredths(x, d))
}

/// A signed percentage: `+12.34%`.
pub(crate) fn spct(x: f64, d: usize) -> String {
    format!("{:+.d$}%", hundredths(x, d))
}

/// `x` in percent, with what rounds to zero at `d` decimals made zero, so
/// a tiny negative never reads `-0.0%`.
fn hundredths(x: f64, d: usize) -> f64 {
    let p = x * 100.0;
    let half_step = 0.5 / 10f64.powi(i32::try_from(d).unwrap_or(6));
    if p.abs() < half_step { 0.0 } else { p }
}

pub(crate) fn pct0(x: f64) -> String {
    pct(x, 0)
}

pub(crate) fn pct1(x: f64) -> String {
    pct(x, 1)
}

pub(crate) fn num2(x: f64) -> String {
    format!("{x:.2}")
}

/// `None` as the gap a chart skips.
pub(crate) fn gaps(values: &[Option<f64>]) -> Vec<f64> {
    values.iter().map(|v| v.unwrap_or(f64::NAN)).collect()
}

fn bounds(curves: &[Curve<'_>], with_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in curves.iter().flat_map(|c| c.values.iter()) {
        if v.is_finite() {
            lo = lo.min(*v);
            hi = hi.max(*v);
        }
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if with_zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    let pad = ((hi - lo) * 0.04)
        .max(hi.abs().max(lo.abs()) * 1e-6)
        .max(1e-9);
    let lo = if with_zero && lo == 0.0 {
        0.0
    } else {
        lo - pad
    };
    let hi = if with_zero && hi == 0.0 {
        0.0
    } else {
        hi + pad
    };
    (lo, hi)
}

fn y_label(text: String, theme: &Theme) -> Span<'static> {
    let text: String = text.chars().take(LABEL_W).collect();
    Span::styled(format!("{text:>LABEL_W$}"), theme.muted)
}

/// A braille chart of `curves` (the last drawn on top) over `dates`, then
/// a line of date ticks on year (or, over short spans, month) boundaries.
pub(crate) fn chart(
    curves: &[Curve<'_>],
    dates: &[NaiveDate],
    spec: ChartSpec,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let w = spec.width.saturating_sub(MARGIN.len()).max(LABEL_W + 4);
    let plot_w = w.saturating_sub(LABEL_W + 1).max(1);
    let n = curves.iter().map(|c| c.values.len()).max().unwrap_or(0);
    let x_max = (n.max(2) - 1) as f64;
    let points: Vec<Vec<(f64, f64)>> = curves
        .iter()
        .map(|c| terminal_points(c.values, plot_w * 2))
        .collect();
    let (lo, hi) = bounds(curves, spec.with_zero);
    let mut sets = Vec::new();
    for (i, (c, pts)) in curves.iter().zip(&points).enumerate() {
        let mut d = Dataset::default()
            .marker(Marker::Braille)
            .style(c.style)
            .data(pts);
        d = if spec.area && i == 0 {
            d.graph_type(GraphType::Area).fill_to_y(0.0)
        } else {
            d.graph_type(GraphType::Line)
        };
        sets.push(d);
    }
    let mid = (lo + hi) / 2.0;
    let labels = if spec.height >= 5 {
        vec![
            y_label((spec.y_fmt)(lo), theme),
            y_label((spec.y_fmt)(mid), theme),
            y_label((spec.y_fmt)(hi), theme),
        ]
    } else {
        vec![
            y_label((spec.y_fmt)(lo), theme),
            y_label((spec.y_fmt)(hi), theme),
        ]
    };
    let widget = Chart::new(sets)
        .legend_position(None)
        .x_axis(Axis::default().bounds([0.0, x_max]))
        .y_axis(
            Axis::default()
                .bounds([lo, hi])
                .style(theme.border)
                .labels(labels),
        );
    let mut out = draw_indented(widget, w, spec.height.max(2), MARGIN);
    out.push(ticks(dates, n, plot_w, theme));
    out
}

/// Date labels under a plot of `n` points `plot_w` columns wide, each at
/// the column where its year (or month) starts, none overlapping.
fn ticks(dates: &[NaiveDate], n: usize, plot_w: usize, theme: &Theme) -> Line<'static> {
    let (Some(first), Some(last)) = (dates.first(), dates.last()) else {
        return Line::default();
    };
    let years = last.year() - first.year();
    // Month ticks on spans under two years, else years (every k-th when
    // they crowd).
    let monthly = years < 2;
    let label = |d: &NaiveDate| {
        if monthly {
            d.format("%Y-%m").to_string()
        } else {
            d.year().to_string()
        }
    };
    let mut marks: Vec<(usize, String)> = Vec::new();
    let mut prev: Option<&NaiveDate> = None;
    for (i, d) in dates.iter().enumerate().take(n) {
        let boundary = match prev {
            None => false,
            Some(p) if monthly => p.month() != d.month(),
            Some(p) => p.year() != d.year(),
        };
        prev = Some(d);
        if boundary {
            let col = (i * plot_w.saturating_sub(1)) / n.saturating_sub(1).max(1);
            marks.push((col, label(d)));
        }
    }
    let start = MARGIN.len() + LABEL_W + 1;
    let mut text = String::new();
    let mut used = 0usize;
    for (col, l) in marks {
        let at = start + col;
        // One blank between labels; a label past the plot is dropped.
        if at < used + 1 && used > 0 || at + text_width(&l) > start + plot_w + 2 {
            continue;
        }
        text.push_str(&" ".repeat(at.saturating_sub(used)));
        text.push_str(&l);
        used = at.max(used) + text_width(&l);
    }
    if text.trim().is_empty() {
        // No boundary inside the span: its two ends.
        text = format!(
            "{}{}  →  {}",
            " ".repeat(start),
            first.format("%Y-%m-%d"),
            last.format("%Y-%m-%d")
        );
    }
    Line::from(Span::styled(text, theme.muted))
}

/// A heading line of the body.
pub(crate) fn heading(text: impl Into<String>, theme: &Theme) -> Line<'static> {
    Line::from(vec![
        Span::raw(MARGIN),
        Span::styled(text.into(), theme.heading),
    ])
}

/// A legend: `━ name` per curve.
pub(crate) fn legend(items: &[(&str, Style)], theme: &Theme) -> Line<'static> {
    let mut spans = vec![Span::raw(MARGIN)];
    for (i, (name, style)) in items.iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled("  ", theme.muted));
        }
        spans.push(Span::styled(format!("━ {name}"), *style));
    }
    Line::from(spans)
}

/// Two columns of lines side by side, the left one padded to `left_w`.
pub(crate) fn beside(
    left: Vec<Line<'static>>,
    left_w: usize,
    right: Vec<Line<'static>>,
) -> Vec<Line<'static>> {
    let rows = left.len().max(right.len());
    let mut left = left.into_iter();
    let mut right = right.into_iter();
    (0..rows)
        .map(|_| {
            let mut spans: Vec<Span<'static>> = Vec::new();
            let mut used = 0;
            if let Some(l) = left.next() {
                used = l.width();
                spans.extend(l.spans);
            }
            spans.push(Span::raw(" ".repeat(left_w.saturating_sub(used))));
            if let Some(r) = right.next() {
                spans.extend(r.spans);
            }
            Line::from(spans)
        })
        .collect()
}

/// Text padded (or cut) to `w` columns, on the right or the left, by
/// display width (`﹪` is two columns).
pub(crate) fn cell(text: &str, w: usize, right: bool) -> String {
    let t = truncate_to(text, w);
    let pad = " ".repeat(w.saturating_sub(text_width(&t)));
    if right {
        format!("{pad}{t}")
    } else {
        format!("{t}{pad}")
    }
}

fn truncate_to(text: &str, w: usize) -> String {
    let mut out = String::new();
    for c in text.chars() {
        let next = format!("{out}{c}");
        if text_width(&next) > w {
            break;
        }
        out = next;
    }
    out
}
