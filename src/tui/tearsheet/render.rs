//! The view's frame (title, tab strip, body, hint line) and the overview
//! and drawdowns tabs.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};

use super::super::format::{truncate, width as text_width};
use super::super::theme::Theme;
use super::charts::{
    ChartSpec, Curve, MARGIN, WIDE, beside, cell, chart, heading, legend, num2, pct, pct1,
};
use super::{SheetData, SheetState, SheetTab, TearSheetView, monthly, panels};
use crate::research::tearsheet::{Metric, TearSheet, Unit};

/// The metrics the overview puts first, by key, in this order.
const KEY_METRICS: &[&str] = &[
    "cumulative_return",
    "cagr",
    "sharpe",
    "sortino",
    "max_drawdown",
    "volatility",
    "calmar",
    "win_days",
    "beta",
    "alpha",
];

pub(super) fn frame(view: &mut TearSheetView, area: Rect, buf: &mut Buffer, theme: &Theme) {
    if area.height < 4 || area.width < 20 {
        return;
    }
    buf.set_style(area, theme.text);
    let w = area.width as usize;
    title_line(view, area, buf, theme);
    tab_strip(view.tab, w, theme, area, buf);
    let body_h = (area.height - 3) as usize;
    let lines = body(view, w, body_h, theme);
    view.laid_out(body_h, lines.len());
    for (i, l) in lines.iter().skip(view.scroll()).take(body_h).enumerate() {
        buf.set_line(area.x, area.y + 2 + i as u16, l, area.width);
    }
    let hint = match &view.message {
        Some(m) => Line::from(Span::styled(truncate(m, w), theme.accent)),
        None => hint_line(view, lines.len(), body_h, w, theme),
    };
    buf.set_line(area.x, area.y + area.height - 1, &hint, area.width);
}

fn title_line(view: &TearSheetView, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let w = area.width as usize;
    let text = match &view.state {
        SheetState::Loaded(d) => {
            let s = &d.sheet;
            let full = format!(
                " Tear sheet · {} · {} → {} · computed in {} ms",
                s.title, s.start, s.end, d.elapsed_ms
            );
            if text_width(&full) <= w {
                full
            } else {
                // Narrow: the span first, the (often long) title after it.
                format!(" {} → {} · {}", s.start, s.end, s.title)
            }
        }
        _ => format!(" Tear sheet · {}", view.run_dir.display()),
    };
    let line = Line::from(Span::styled(
        format!("{:<w$}", truncate(&text, w)),
        theme.status.add_modifier(Modifier::BOLD),
    ));
    buf.set_line(area.x, area.y, &line, area.width);
}

fn tab_strip(tab: SheetTab, w: usize, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let build = |short: bool| {
        let mut spans = vec![Span::raw(MARGIN)];
        for (i, t) in SheetTab::ALL.iter().enumerate() {
            let (long, brief) = t.titles();
            let label = if short { brief } else { long };
            spans.push(Span::styled(
                format!(" {} {label} ", i + 1),
                theme.tab(*t == tab),
            ));
            spans.push(Span::raw(" "));
        }
        Line::from(spans)
    };
    let full = build(false);
    let line = if full.width() <= w { full } else { build(true) };
    buf.set_line(area.x, area.y + 1, &line, area.width);
}

fn hint_line(
    view: &TearSheetView,
    total: usize,
    body_h: usize,
    w: usize,
    theme: &Theme,
) -> Line<'static> {
    let pos = if total > body_h {
        format!(
            "  {}–{} of {}",
            view.scroll() + 1,
            (view.scroll() + body_h).min(total),
            total
        )
    } else {
        String::new()
    };
    let keys = if w >= 100 {
        "Tab/1–6 tabs · ↑↓ j/k PgUp PgDn scroll · r HTML report · Esc/q close"
    } else {
        "Tab/1-6 tabs · j/k scroll · r report · q close"
    };
    Line::from(vec![
        Span::styled(format!("{MARGIN}{keys}"), theme.muted),
        Span::styled(pos, theme.muted),
    ])
}

fn body(view: &TearSheetView, w: usize, h: usize, theme: &Theme) -> Vec<Line<'static>> {
    match &view.state {
        SheetState::Loading => vec![Line::from(Span::styled(
            format!(
                "{MARGIN}computing the tear sheet of {}…",
                view.run_dir.display()
            ),
            theme.muted,
        ))],
        SheetState::Failed(e) => vec![
            Line::from(Span::styled(
                format!("{MARGIN}⚠ no tear sheet: {e}"),
                theme.warn,
            )),
            Line::from(Span::styled(
                format!("{MARGIN}run {}", view.run_dir.display()),
                theme.muted,
            )),
        ],
        SheetState::Loaded(d) => tab_body(view.tab, d, w, h, theme),
    }
}

fn tab_body(tab: SheetTab, d: &SheetData, w: usize, h: usize, theme: &Theme) -> Vec<Line<'static>> {
    let s = &d.sheet;
    match tab {
        SheetTab::Overview => overview(s, w, h, theme),
        SheetTab::Monthly => monthly::tab(s, w, theme),
        SheetTab::Drawdowns => drawdowns(s, w, h, theme),
        SheetTab::Rolling => panels::rolling(s, w, h, theme),
        SheetTab::Distribution => panels::distribution(s, w, theme),
        SheetTab::Trades => panels::trades(d, w, h, theme),
    }
}

/// A metric's value as its unit reads.
pub(super) fn metric_value(v: Option<f64>, unit: Unit) -> String {
    match v {
        None => "–".into(),
        Some(x) if !x.is_finite() => "–".into(),
        Some(x) => match unit {
            Unit::Percent => pct(x, 2),
            Unit::Ratio => num2(x),
            Unit::Count => format!("{x:.0}"),
        },
    }
}

/// Metric rows in `w` columns: name, strategy, and the benchmark when the
/// sheet has one. A metric whose definition differs from quantstats' is
/// marked †.
fn metric_rows(metrics: &[&Metric], bench: bool, w: usize, theme: &Theme) -> Vec<Line<'static>> {
    let val_w = 10;
    let name_w = w
        .saturating_sub(MARGIN.len() + val_w * if bench { 2 } else { 1 } + 1)
        .clamp(8, 28);
    let mut out = vec![Line::from(vec![
        Span::raw(MARGIN),
        Span::styled(cell("", name_w, false), theme.muted),
        Span::styled(cell("Strategy", val_w, true), theme.heading),
        Span::styled(
            if bench {
                cell("Benchmark", val_w, true)
            } else {
                String::new()
            },
            theme.heading,
        ),
    ])];
    for m in metrics {
        let name = if m.note.is_some() {
            format!("{}†", m.name)
        } else {
            m.name.clone()
        };
        let value = metric_value(m.value, m.unit);
        let style = match (m.unit, m.value) {
            (Unit::Percent | Unit::Ratio, Some(x)) if x < 0.0 => theme.error,
            _ => theme.text,
        };
        let mut spans = vec![
            Span::raw(MARGIN),
            Span::styled(cell(&name, name_w, false), theme.text),
            Span::styled(cell(&value, val_w, true), style),
        ];
        if bench {
            spans.push(Span::styled(
                cell(&metric_value(m.benchmark, m.unit), val_w, true),
                theme.muted,
            ));
        }
        out.push(Line::from(spans));
    }
    out
}

/// The key metrics: the ones named in [`KEY_METRICS`] that the sheet has,
/// else its first ten.
fn key_metrics(s: &TearSheet) -> Vec<&Metric> {
    let picked: Vec<&Metric> = KEY_METRICS
        .iter()
        .filter_map(|k| s.metrics.iter().find(|m| m.key == *k))
        .collect();
    if picked.len() >= 4 {
        picked
    } else {
        s.metrics.iter().take(10).collect()
    }
}

fn has_benchmark(s: &TearSheet) -> bool {
    s.series.benchmark_equity.is_some() || s.metrics.iter().any(|m| m.benchmark.is_some())
}

fn equity_chart(s: &TearSheet, w: usize, h: usize, theme: &Theme) -> Vec<Line<'static>> {
    let mut items = vec![("strategy", theme.accent)];
    let mut curves = Vec::new();
    if let Some(b) = &s.series.benchmark_equity {
        items.push(("benchmark", theme.muted));
        curves.push(Curve {
            values: b,
            style: theme.muted,
        });
    }
    curves.push(Curve {
        values: &s.series.equity,
        style: theme.accent,
    });
    let mut out = vec![legend(&items, theme)];
    out.extend(chart(
        &curves,
        &s.series.dates,
        ChartSpec {
            width: w,
            height: h,
            area: false,
            with_zero: false,
            y_fmt: |x| format!("{x:.2}"),
        },
        theme,
    ));
    out
}

fn overview(s: &TearSheet, w: usize, h: usize, theme: &Theme) -> Vec<Line<'static>> {
    let bench = has_benchmark(s);
    let all: Vec<&Metric> = s.metrics.iter().collect();
    let mut out = Vec::new();
    if w >= WIDE {
        let left_w = 50;
        let mut left = vec![heading("Metrics", theme)];
        left.extend(metric_rows(&all, bench, left_w - 1, theme));
        let chart_h = h.saturating_sub(4).clamp(6, 30);
        let mut right = vec![heading("Equity (growth of 1)", theme)];
        right.extend(equity_chart(s, w - left_w, chart_h, theme));
        out.extend(beside(left, left_w, right));
    } else {
        let keys = key_metrics(s);
        let half = keys.len().div_ceil(2);
        if w >= 78 && keys.len() > 1 {
            let (a, b) = keys.split_at(half);
            let col = w / 2;
            out.extend(beside(
                metric_rows(a, bench, col - 1, theme),
                col,
                metric_rows(b, bench, col - 1, theme),
            ));
        } else {
            out.extend(metric_rows(&keys, bench, w, theme));
        }
        let chart_h = h.saturating_sub(out.len() + 2).clamp(6, 16);
        out.extend(equity_chart(s, w, chart_h, theme));
        out.push(Line::default());
        out.push(heading("All metrics", theme));
        out.extend(metric_rows(&all, bench, w.min(60), theme));
    }
    out.push(Line::default());
    out.extend(assumptions(s, w, theme));
    out
}

/// The conventions the numbers rest on, and the notes of the † metrics.
fn assumptions(s: &TearSheet, w: usize, theme: &Theme) -> Vec<Line<'static>> {
    let mut out = vec![heading("Assumptions", theme)];
    let room = w.saturating_sub(MARGIN.len() + 2);
    for a in &s.assumptions {
        for piece in wrap_plain(a, room) {
            out.push(Line::from(Span::styled(
                format!("{MARGIN}  {piece}"),
                theme.muted,
            )));
        }
    }
    for m in s.metrics.iter().filter(|m| m.note.is_some()) {
        let text = format!("† {}: {}", m.name, m.note.as_deref().unwrap_or(""));
        for piece in wrap_plain(&text, room) {
            out.push(Line::from(Span::styled(
                format!("{MARGIN}  {piece}"),
                theme.muted,
            )));
        }
    }
    out
}

/// Words into lines of at most `w` columns (a longer word is cut).
pub(super) fn wrap_plain(text: &str, w: usize) -> Vec<String> {
    let w = w.max(8);
    let mut out = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        if !cur.is_empty() && text_width(&cur) + 1 + text_width(word) > w {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(&truncate(word, w));
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn drawdown_table(s: &TearSheet, theme: &Theme) -> Vec<Line<'static>> {
    let mut out = vec![heading(
        format!("Worst {} drawdowns", s.drawdowns.len()),
        theme,
    )];
    out.push(Line::from(Span::styled(
        format!(
            "{MARGIN}{} {} {} {} {} {}",
            cell("#", 2, true),
            cell("Start", 10, false),
            cell("Trough", 10, false),
            cell("Recovery", 13, false),
            cell("Depth", 7, true),
            cell("Days", 5, true)
        ),
        theme.heading,
    )));
    for (i, p) in s.drawdowns.iter().enumerate() {
        let (recovery, rstyle) = match p.recovery {
            Some(r) => (r.to_string(), theme.text),
            None => ("not recovered".to_string(), theme.warn),
        };
        out.push(Line::from(vec![
            Span::styled(
                format!("{MARGIN}{} ", cell(&(i + 1).to_string(), 2, true)),
                theme.muted,
            ),
            Span::styled(format!("{} {} ", p.start, p.trough), theme.text),
            Span::styled(cell(&recovery, 13, false), rstyle),
            Span::styled(format!(" {}", cell(&pct1(p.depth), 7, true)), theme.error),
            Span::styled(
                format!(" {}", cell(&p.days.to_string(), 5, true)),
                theme.text,
            ),
        ]));
    }
    if s.drawdowns.is_empty() {
        out.push(Line::from(Span::styled(
            format!("{MARGIN}no drawdown: equity never fell below a peak"),
            theme.muted,
        )));
    }
    out
}

fn underwater(s: &TearSheet, w: usize, h: usize, theme: &Theme) -> Vec<Line<'static>> {
    let mut out = vec![heading(
        "Underwater (drawdown from the running peak)",
        theme,
    )];
    out.extend(chart(
        &[Curve {
            values: &s.series.underwater,
            style: theme.error,
        }],
        &s.series.dates,
        ChartSpec {
            width: w,
            height: h,
            area: true,
            with_zero: true,
            y_fmt: super::charts::pct0,
        },
        theme,
    ));
    out
}

fn drawdowns(s: &TearSheet, w: usize, h: usize, theme: &Theme) -> Vec<Line<'static>> {
    let table = drawdown_table(s, theme);
    if w >= WIDE {
        let left_w = 58;
        let chart_h = h.saturating_sub(3).clamp(6, 30);
        return beside(table, left_w, underwater(s, w - left_w, chart_h, theme));
    }
    let mut out = table;
    out.push(Line::default());
    let chart_h = h.saturating_sub(4).clamp(6, 14);
    out.extend(underwater(s, w, chart_h, theme));
    out
}
