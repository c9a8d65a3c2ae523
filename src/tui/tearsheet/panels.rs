//! The rolling, distribution, and trades-and-positions tabs.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::super::format::width as text_width;
use super::super::theme::Theme;
use super::charts::{
    ChartSpec, Curve, MARGIN, WIDE, beside, cell, chart, gaps, heading, legend, num2, pct, pct0,
    pct1,
};
use super::{SheetData, TradesTable};
use crate::research::tearsheet::{Distribution, Period, PositionStats, TearSheet};

/// The rolling statistics in the order they are drawn, with their titles.
const ROLLING: [(&str, &str); 4] = [
    ("sharpe", "Rolling Sharpe"),
    ("sortino", "Rolling Sortino"),
    ("volatility", "Rolling volatility (annualised)"),
    ("beta", "Rolling beta to the benchmark"),
];

fn rolling_block(
    s: &TearSheet,
    stat: &str,
    title: &str,
    w: usize,
    h: usize,
    theme: &Theme,
) -> Option<Vec<Line<'static>>> {
    let mut found: Vec<(usize, Vec<f64>)> = s
        .series
        .rolling
        .iter()
        .filter(|r| r.statistic == stat)
        .map(|r| (r.window, gaps(&r.values)))
        .collect();
    if found.is_empty() {
        return None;
    }
    // The longer window under the shorter one.
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    let styles = [theme.muted, theme.accent, theme.warn];
    let names: Vec<String> = found.iter().map(|(win, _)| window_name(*win)).collect();
    let items: Vec<(&str, Style)> = names
        .iter()
        .zip(styles.iter())
        .map(|(n, st)| (n.as_str(), *st))
        .collect();
    let curves: Vec<Curve<'_>> = found
        .iter()
        .zip(styles.iter())
        .map(|((_, v), st)| Curve {
            values: v,
            style: *st,
        })
        .collect();
    let y_fmt: fn(f64) -> String = if stat == "volatility" { pct0 } else { num2 };
    let mut out = vec![heading(title, theme), legend(&items, theme)];
    out.extend(chart(
        &curves,
        &s.series.dates,
        ChartSpec {
            width: w,
            height: h,
            area: false,
            with_zero: stat != "volatility",
            y_fmt,
        },
        theme,
    ));
    Some(out)
}

/// `126` trading days read as "6 months".
fn window_name(days: usize) -> String {
    match days {
        126 => "6 months".into(),
        252 => "12 months".into(),
        d => format!("{d} days"),
    }
}

pub(super) fn rolling(s: &TearSheet, w: usize, h: usize, theme: &Theme) -> Vec<Line<'static>> {
    let wide = w >= WIDE;
    let chart_h = if wide {
        (h / 2).saturating_sub(4).clamp(5, 16)
    } else {
        (h / 2).saturating_sub(3).clamp(4, 10)
    };
    let col_w = if wide { w / 2 } else { w };
    let blocks: Vec<Vec<Line<'static>>> = ROLLING
        .iter()
        .filter_map(|(stat, title)| rolling_block(s, stat, title, col_w, chart_h, theme))
        .collect();
    if blocks.is_empty() {
        return vec![Line::from(Span::styled(
            format!("{MARGIN}no rolling statistics: the series is shorter than six months"),
            theme.muted,
        ))];
    }
    let mut out = Vec::new();
    let mut it = blocks.into_iter();
    while let Some(a) = it.next() {
        if wide {
            match it.next() {
                Some(b) => out.extend(beside(a, col_w, b)),
                None => out.extend(a),
            }
        } else {
            out.extend(a);
        }
        out.push(Line::default());
    }
    out
}

fn period_name(p: Period) -> &'static str {
    match p {
        Period::Day => "Daily",
        Period::Week => "Weekly",
        Period::Month => "Monthly",
        Period::Quarter => "Quarterly",
        Period::Year => "Yearly",
    }
}

fn quantile_table(ds: &[Distribution], theme: &Theme) -> Vec<Line<'static>> {
    let probs: Vec<f64> = ds
        .first()
        .map(|d| d.quantiles.iter().map(|(p, _)| *p).collect())
        .unwrap_or_default();
    let mut head = format!(
        "{MARGIN}{} {}",
        cell("Period", 9, false),
        cell("n", 5, true)
    );
    for p in &probs {
        head.push_str(&format!(
            " {}",
            cell(&format!("q{:.0}", p * 100.0), 7, true)
        ));
    }
    let mut out = vec![
        heading("Return quantiles", theme),
        Line::from(Span::styled(head, theme.heading)),
    ];
    for d in ds {
        let mut spans = vec![Span::styled(
            format!(
                "{MARGIN}{} {}",
                cell(period_name(d.period), 9, false),
                cell(&d.count.to_string(), 5, true)
            ),
            theme.text,
        )];
        for (_, q) in &d.quantiles {
            let style = if *q < 0.0 { theme.error } else { theme.ok };
            spans.push(Span::styled(
                format!(" {}", cell(&pct(*q, 2), 7, true)),
                style,
            ));
        }
        out.push(Line::from(spans));
    }
    out
}

/// A column histogram `h` rows high in eighth blocks, losses red, gains
/// green, with the outer edges under it.
fn histogram(d: &Distribution, w: usize, h: usize, theme: &Theme) -> Vec<Line<'static>> {
    const BLOCKS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let title = format!("{} returns · {} periods", period_name(d.period), d.count);
    let mut out = vec![heading(title, theme)];
    let bins = d.counts.len();
    let max = d.counts.iter().copied().max().unwrap_or(0);
    if bins == 0 || max == 0 {
        out.push(Line::from(Span::styled(
            format!("{MARGIN}too few returns to draw"),
            theme.muted,
        )));
        return out;
    }
    let room = w.saturating_sub(MARGIN.len() + 1);
    let cw = (room / bins).clamp(1, 4);
    let style_of = |i: usize| {
        let lo = d.edges.get(i).copied().unwrap_or(0.0);
        let hi = d.edges.get(i + 1).copied().unwrap_or(lo);
        if (lo + hi) / 2.0 < 0.0 {
            theme.error
        } else {
            theme.ok
        }
    };
    for row in 0..h {
        let level = (h - 1 - row) * 8;
        let mut spans = vec![Span::raw(MARGIN)];
        for (i, c) in d.counts.iter().enumerate() {
            let eighths = c.saturating_mul(h * 8).div_ceil(max);
            let fill = eighths.saturating_sub(level).min(8);
            let ch = BLOCKS.get(fill).copied().unwrap_or(' ');
            spans.push(Span::styled(ch.to_string().repeat(cw), style_of(i)));
        }
        out.push(Line::from(spans));
    }
    let (lo, hi) = (
        d.edges.first().copied().unwrap_or(0.0),
        d.edges.last().copied().unwrap_or(0.0),
    );
    out.push(edge_labels(lo, hi, bins * cw, theme));
    out
}

/// The outer edges under a histogram `span_w` columns wide, and a `0`
/// where zero falls between them.
fn edge_labels(lo: f64, hi: f64, span_w: usize, theme: &Theme) -> Line<'static> {
    let left = pct1(lo);
    let right = pct1(hi);
    let mut text = left.clone();
    if lo < 0.0 && hi > 0.0 && hi > lo {
        let col = ((-lo / (hi - lo)) * span_w as f64) as usize;
        if col > text_width(&left) + 1 && col + 1 < span_w.saturating_sub(text_width(&right) + 1) {
            text.push_str(&" ".repeat(col - text_width(&left)));
            text.push('0');
        }
    }
    let gap = span_w.saturating_sub(text_width(&text) + text_width(&right));
    Line::from(Span::styled(
        format!("{MARGIN}{text}{}{right}", " ".repeat(gap)),
        theme.muted,
    ))
}

pub(super) fn distribution(s: &TearSheet, w: usize, theme: &Theme) -> Vec<Line<'static>> {
    if s.distribution.is_empty() {
        return vec![Line::from(Span::styled(
            format!("{MARGIN}no return distribution"),
            theme.muted,
        ))];
    }
    let mut out = quantile_table(&s.distribution, theme);
    out.push(Line::default());
    let wide = w >= WIDE;
    let col_w = if wide { w / 2 } else { w };
    let h = if wide { 7 } else { 5 };
    let hists: Vec<Vec<Line<'static>>> = s
        .distribution
        .iter()
        .map(|d| histogram(d, col_w, h, theme))
        .collect();
    let mut it = hists.into_iter();
    while let Some(a) = it.next() {
        if wide {
            match it.next() {
                Some(b) => out.extend(beside(a, col_w, b)),
                None => out.extend(a),
            }
        } else {
            out.extend(a);
        }
        out.push(Line::default());
    }
    out
}

fn mean(v: &[f64]) -> f64 {
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if finite.is_empty() {
        return 0.0;
    }
    finite.iter().sum::<f64>() / finite.len() as f64
}

fn positions(
    p: &PositionStats,
    s: &TearSheet,
    w: usize,
    h: usize,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let mut out = vec![heading("Exposure", theme)];
    out.push(Line::from(Span::styled(
        format!(
            "{MARGIN}mean gross {} · mean net {} · annual turnover {:.1}×",
            pct1(mean(&p.gross)),
            pct1(mean(&p.net)),
            p.annual_turnover
        ),
        theme.text,
    )));
    out.push(legend(&[("gross", theme.accent), ("net", theme.ok)], theme));
    out.extend(chart(
        &[
            Curve {
                values: &p.gross,
                style: theme.accent,
            },
            Curve {
                values: &p.net,
                style: theme.ok,
            },
        ],
        &s.series.dates,
        ChartSpec {
            width: w,
            height: h,
            area: false,
            with_zero: true,
            y_fmt: pct0,
        },
        theme,
    ));
    out.push(heading("Daily turnover", theme));
    out.extend(chart(
        &[Curve {
            values: &p.turnover,
            style: theme.warn,
        }],
        &s.series.dates,
        ChartSpec {
            width: w,
            height: (h / 2).max(3),
            area: false,
            with_zero: true,
            y_fmt: pct0,
        },
        theme,
    ));
    out.extend(weights_table(p, w, theme));
    out
}

fn weights_table(p: &PositionStats, w: usize, theme: &Theme) -> Vec<Line<'static>> {
    let rows = if w >= WIDE { 20 } else { 10 };
    let mut out = vec![heading(
        format!(
            "Weights (largest mean first, {} of {})",
            rows.min(p.codes.len()),
            p.codes.len()
        ),
        theme,
    )];
    out.push(Line::from(Span::styled(
        format!(
            "{MARGIN}{} {} {} {} {}",
            cell("Code", 10, false),
            cell("Mean", 8, true),
            cell("Last", 8, true),
            cell("Min", 8, true),
            cell("Max", 8, true)
        ),
        theme.heading,
    )));
    for (code, series) in p.codes.iter().zip(&p.weights).take(rows) {
        let finite = series.iter().copied().filter(|x| x.is_finite());
        let min = finite.clone().fold(f64::INFINITY, f64::min);
        let max = finite.fold(f64::NEG_INFINITY, f64::max);
        let last = series.last().copied().unwrap_or(0.0);
        let f = |x: f64| if x.is_finite() { pct1(x) } else { "–".into() };
        out.push(Line::from(Span::styled(
            format!(
                "{MARGIN}{} {} {} {} {}",
                cell(code, 10, false),
                cell(&f(mean(series)), 8, true),
                cell(&f(last), 8, true),
                cell(&f(min), 8, true),
                cell(&f(max), 8, true)
            ),
            theme.text,
        )));
    }
    out
}

/// A short header for the engine's long column names.
fn short_header(name: &str) -> &str {
    match name {
        "timestamp" => "date",
        "holding_days" => "days",
        "holding_bars" => "bars",
        "return_pct" => "ret%",
        other => other,
    }
}

fn trades_table(t: &TradesTable, w: usize, theme: &Theme) -> Vec<Line<'static>> {
    const MAX_COL: usize = 14;
    let widths: Vec<usize> = t
        .header
        .iter()
        .enumerate()
        .map(|(i, name)| {
            t.rows
                .iter()
                .take(500)
                .filter_map(|r| r.get(i))
                .map(|c| text_width(c))
                .chain([text_width(short_header(name))])
                .max()
                .unwrap_or(4)
                .min(MAX_COL)
        })
        .collect();
    // Columns in file order while they fit; the rest are named as hidden.
    let mut shown = Vec::new();
    let mut used = MARGIN.len();
    for (i, cw) in widths.iter().enumerate() {
        if used + cw + 1 > w {
            break;
        }
        used += cw + 1;
        shown.push(i);
    }
    let total = t.rows.len() + t.omitted;
    let mut out = vec![heading(format!("Trades (trades.csv, {total} rows)"), theme)];
    let hidden = t.header.len().saturating_sub(shown.len());
    if hidden > 0 {
        out.push(Line::from(Span::styled(
            format!("{MARGIN}{hidden} column(s) hidden at this width"),
            theme.muted,
        )));
    }
    let numeric = |i: usize| {
        t.rows
            .first()
            .and_then(|r| r.get(i))
            .is_some_and(|c| c.parse::<f64>().is_ok())
    };
    let mut head = String::from(MARGIN);
    for &i in &shown {
        let name = t.header.get(i).map_or("", |s| short_header(s));
        let cw = widths.get(i).copied().unwrap_or(4);
        head.push_str(&cell(name, cw, numeric(i)));
        head.push(' ');
    }
    out.push(Line::from(Span::styled(head, theme.heading)));
    for r in &t.rows {
        let mut line = String::from(MARGIN);
        for &i in &shown {
            let cw = widths.get(i).copied().unwrap_or(4);
            line.push_str(&cell(r.get(i).map_or("", String::as_str), cw, numeric(i)));
            line.push(' ');
        }
        out.push(Line::from(Span::styled(line, theme.text)));
    }
    if t.omitted > 0 {
        out.push(Line::from(Span::styled(
            format!("{MARGIN}… {} more rows in the file", t.omitted),
            theme.muted,
        )));
    }
    out
}

pub(super) fn trades(d: &SheetData, w: usize, h: usize, theme: &Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if let Some(p) = &d.sheet.positions {
        let chart_h = h.saturating_sub(6).clamp(5, 14);
        out.extend(positions(p, &d.sheet, w, chart_h, theme));
        out.push(Line::default());
    }
    if let Some(t) = &d.trades {
        out.extend(trades_table(t, w, theme));
    }
    if out.is_empty() {
        out.push(Line::from(Span::styled(
            format!("{MARGIN}no positions or trades recorded for this result"),
            theme.muted,
        )));
    }
    out
}
