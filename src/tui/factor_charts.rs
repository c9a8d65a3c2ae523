//! Drawing the factor view (docs §17.12): the frame (title, tab strip,
//! hint line), the ranked list beside (or, when narrow, above) the
//! selected factor's charts, and the correlation heatmap. Every value may
//! be NaN (written as null in the record): it reads `–`, a chart skips it.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::factor_view::{FactorData, FactorState, FactorTab, FactorView, ranked};
use super::format::{truncate, width as text_width};
use super::tearsheet::charts::{
    ChartSpec, Curve, MARGIN, beside, cell, chart, heading, legend, pct,
};
use super::theme::Theme;
use crate::research::factor::record::ScreenRecord;
use crate::research::factor::screen::{FactorStats, HorizonStats, ScreenedFactor};

/// Widths from which the list and the charts sit side by side.
const SIDE_BY_SIDE: usize = 110;
/// Dates in the rank IC's rolling mean (a trading month).
const ROLLING: usize = 21;
/// Most factors the heatmap shows.
const HEATMAP_MAX: usize = 24;
/// A heatmap cell's columns (`+0.52` and a space).
const CELL_W: usize = 6;

/// Draws the view into `area` (the view's state holds no drawing code:
/// the two files form a tree).
pub fn frame(view: &mut FactorView, area: Rect, buf: &mut Buffer, theme: &Theme) {
    if area.height < 4 || area.width < 20 {
        return;
    }
    buf.set_style(area, theme.text);
    let w = area.width as usize;
    let title = Line::from(Span::styled(
        format!("{:<w$}", truncate(&title(view, w), w)),
        theme.status.add_modifier(Modifier::BOLD),
    ));
    buf.set_line(area.x, area.y, &title, area.width);
    let mut strip = vec![Span::raw(MARGIN)];
    for (i, (t, label)) in [
        (FactorTab::Factors, "Factors"),
        (FactorTab::Correlation, "Correlation"),
    ]
    .iter()
    .enumerate()
    {
        strip.push(Span::styled(
            format!(" {} {label} ", i + 1),
            theme.tab(*t == view.tab),
        ));
        strip.push(Span::raw(" "));
    }
    buf.set_line(area.x, area.y + 1, &Line::from(strip), area.width);
    let body_h = (area.height - 3) as usize;
    let lines = body(view, w, body_h, theme);
    for (i, l) in lines.iter().take(body_h).enumerate() {
        buf.set_line(area.x, area.y + 2 + i as u16, l, area.width);
    }
    let keys = if w >= 100 {
        "↑↓ j/k select · Tab/1–2 factors, correlation · Esc/q close"
    } else {
        "j/k select · 1-2 tabs · q close"
    };
    let hint = Line::from(Span::styled(format!("{MARGIN}{keys}"), theme.muted));
    buf.set_line(area.x, area.y + area.height - 1, &hint, area.width);
}

/// The header: universe, window, counts and the deflated best.
fn title(view: &FactorView, w: usize) -> String {
    let Some(d) = view.data() else {
        return match &view.asked {
            Some(p) => format!(" Factor screen · {}", p.display()),
            None => " Factor screen · the newest record".into(),
        };
    };
    let r = &d.record;
    let s = &r.screen;
    let scored = s.factors.iter().filter(|f| f.stats.is_some()).count();
    let what = r.library.as_deref().unwrap_or("expressions");
    let mut text = format!(
        " Factor screen · {what} · {} symbols ({}) · {} → {} · {} factors, {scored} scored",
        r.universe.symbols.len(),
        r.universe.source,
        r.universe.start,
        r.universe.end,
        s.factors.len(),
    );
    if let Some(b) = &s.deflated {
        text.push_str(&format!(
            " · best {}: SR {} ann., DSR {}",
            b.best,
            fmt(b.sharpe * 252f64.sqrt(), 2),
            fmt(b.dsr, 2)
        ));
    }
    if text_width(&text) + 14 <= w {
        text.push_str(&format!(" · read in {} ms", d.elapsed_ms));
    }
    text
}

/// A number with `d` decimals, `–` for NaN.
fn fmt(x: f64, d: usize) -> String {
    if x.is_finite() {
        format!("{x:.d$}")
    } else {
        "–".into()
    }
}

fn body(view: &mut FactorView, w: usize, h: usize, theme: &Theme) -> Vec<Line<'static>> {
    let data = match &view.state {
        FactorState::Loading => {
            return vec![Line::from(Span::styled(
                format!("{MARGIN}reading the screen record…"),
                theme.muted,
            ))];
        }
        FactorState::Failed(e) => {
            return vec![Line::from(Span::styled(
                format!("{MARGIN}⚠ no factor view: {e}"),
                theme.warn,
            ))];
        }
        FactorState::Loaded(d) => d.clone(),
    };
    match view.tab {
        FactorTab::Factors => factors_tab(view, &data, w, h, theme),
        FactorTab::Correlation => heatmap(&data.record, w, h, theme),
    }
}

/// The list beside the selected factor's charts (list above, fewer rows,
/// when narrow).
fn factors_tab(
    view: &mut FactorView,
    d: &FactorData,
    w: usize,
    h: usize,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let order = ranked(&d.record);
    let selected = order.get(view.selected).copied();
    let horizon = d.record.screen.options.rank_horizon;
    let side = w >= SIDE_BY_SIDE;
    let list_w = if side { 70.min(w / 2) } else { w };
    let list_rows = if side {
        h.saturating_sub(1)
    } else {
        (h / 4).clamp(2, 8).min(order.len().max(1))
    };
    view.page = list_rows.max(1);
    if view.selected < view.list_top {
        view.list_top = view.selected;
    } else if view.selected >= view.list_top + list_rows.max(1) {
        view.list_top = view.selected + 1 - list_rows.max(1);
    }
    let list = list_lines(&d.record, &order, view, list_w, list_rows, theme);
    let detail_w = if side {
        w.saturating_sub(list_w + 1)
    } else {
        w
    };
    let detail_h = if side {
        h
    } else {
        h.saturating_sub(list.len() + 1)
    };
    let detail = match selected.and_then(|i| d.record.screen.factors.get(i)) {
        Some(f) => detail_lines(f, horizon, detail_w, detail_h, theme),
        None => vec![Line::from(Span::styled(
            format!("{MARGIN}the screen holds no factors"),
            theme.muted,
        ))],
    };
    if side {
        beside(list, list_w + 1, detail)
    } else {
        let mut out = list;
        out.push(Line::default());
        out.extend(detail);
        out
    }
}

/// The stats a row shows, at the rank horizon.
fn horizon_of(stats: &FactorStats, horizon: usize) -> Option<&HorizonStats> {
    stats
        .horizons
        .iter()
        .find(|h| h.horizon == horizon)
        .or_else(|| stats.horizons.first())
}

fn list_lines(
    record: &ScreenRecord,
    order: &[usize],
    view: &FactorView,
    w: usize,
    rows: usize,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let horizon = record.screen.options.rank_horizon;
    let num_cols: [(&str, usize); 7] = [
        ("rank IC", 8),
        ("ICIR", 7),
        ("NW t", 7),
        ("p Holm", 7),
        ("p BH", 7),
        ("spread", 8),
        ("turn", 6),
    ];
    // Columns drop from the right when the list is narrow; the name keeps
    // at least 10.
    let mut shown = num_cols.len();
    while shown > 1 && 4 + 10 + num_cols.iter().take(shown).map(|c| c.1).sum::<usize>() > w {
        shown -= 1;
    }
    let nums_w: usize = num_cols.iter().take(shown).map(|c| c.1).sum();
    let name_w = w.saturating_sub(4 + nums_w).clamp(6, 24);
    let mut head = format!("{MARGIN}  {}", cell("factor", name_w, false));
    for (label, cw) in num_cols.iter().take(shown) {
        head.push_str(&cell(label, *cw, true));
    }
    let mut out = vec![Line::from(Span::styled(head, theme.heading))];
    for (pos, &i) in order.iter().enumerate().skip(view.list_top).take(rows) {
        let Some(f) = record.screen.factors.get(i) else {
            continue;
        };
        let mark = if pos == view.selected { "▸ " } else { "  " };
        let mut text = format!("{MARGIN}{mark}{}", cell(&f.name, name_w, false));
        let style = match f.stats.as_ref().and_then(|s| horizon_of(s, horizon)) {
            Some(hs) => {
                let turnover = f.stats.as_ref().map_or(f64::NAN, |s| s.turnover);
                let values = [
                    fmt(hs.rank_ic_stats.mean, 4),
                    fmt(hs.rank_ic_stats.ir, 3),
                    fmt(hs.rank_ic_stats.t_nw, 2),
                    fmt(f.p_holm, 3),
                    fmt(f.p_bh, 3),
                    pct_or_dash(hs.spread),
                    fmt(turnover, 2),
                ];
                for (v, (_, cw)) in values.iter().zip(num_cols.iter()).take(shown) {
                    text.push_str(&cell(v, *cw, true));
                }
                theme.text
            }
            None => {
                text.push_str(&format!(
                    "  not scored: {}",
                    f.error.as_deref().unwrap_or("no statistics")
                ));
                theme.warn
            }
        };
        let style = if pos == view.selected {
            theme.selection
        } else {
            style
        };
        out.push(Line::from(Span::styled(truncate(&text, w), style)));
    }
    out
}

fn pct_or_dash(x: f64) -> String {
    if x.is_finite() {
        pct(x, 3)
    } else {
        "–".into()
    }
}

/// The selected factor: its rank IC series, quantile equity and IC decay.
fn detail_lines(
    f: &ScreenedFactor,
    horizon: usize,
    w: usize,
    h: usize,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let Some(stats) = &f.stats else {
        return vec![
            heading(f.name.clone(), theme),
            Line::from(Span::styled(
                format!(
                    "{MARGIN}not scored: {}",
                    f.error.as_deref().unwrap_or("no statistics")
                ),
                theme.warn,
            )),
        ];
    };
    let Some(hs) = horizon_of(stats, horizon) else {
        return vec![heading(format!("{}: no horizon scored", f.name), theme)];
    };
    let q = stats.quantile_daily.returns.len();
    let decay_rows = stats.horizons.len();
    // Fixed rows: three headings, two legends, two tick lines, the decay.
    let fixed = 7 + decay_rows;
    let room = h.saturating_sub(fixed);
    // Two charts need at least 4 rows each; short of that the IC chart
    // takes the room and the equity curves keep their legend.
    let (ic_h, eq_h) = if q > 0 && room >= 8 {
        (room / 2, room - room / 2)
    } else {
        (room, 0)
    };
    let mut out = vec![heading(
        format!(
            "{} · rank IC ({}d) mean {} · ICIR {} · NW t {} · coverage {}",
            f.name,
            hs.horizon,
            fmt(hs.rank_ic_stats.mean, 4),
            fmt(hs.rank_ic_stats.ir, 3),
            fmt(hs.rank_ic_stats.t_nw, 2),
            pct_or_dash(stats.coverage)
        ),
        theme,
    )];
    if ic_h >= 3 {
        let mean = vec![hs.rank_ic_stats.mean; hs.rank_ic.len()];
        let rolling = rolling_mean(&hs.rank_ic, ROLLING);
        let spec = ChartSpec {
            width: w,
            height: ic_h,
            area: false,
            with_zero: true,
            y_fmt: |x| format!("{x:.3}"),
        };
        let curves = [
            Curve {
                values: &hs.rank_ic,
                style: theme.muted,
            },
            Curve {
                values: &rolling,
                style: theme.accent,
            },
            Curve {
                values: &mean,
                style: theme.warn,
            },
        ];
        out.extend(chart(&curves, &hs.dates, spec, theme));
        let mean_label = format!("mean {}", fmt(hs.rank_ic_stats.mean, 4));
        out.push(legend(
            &[
                ("daily rank IC", theme.muted),
                ("21-day mean", theme.accent),
                (&mean_label, theme.warn),
            ],
            theme,
        ));
    }
    out.extend(equity_lines(stats, eq_h, w, theme));
    out.extend(decay_lines(stats, w, theme));
    out
}

/// The mean of each trailing window of `n` (over its finite values),
/// NaN until the window has half its values.
fn rolling_mean(xs: &[f64], n: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(xs.len());
    for i in 0..xs.len() {
        let from = (i + 1).saturating_sub(n);
        let window = xs.get(from..=i).unwrap_or(&[]);
        let kept: Vec<f64> = window.iter().copied().filter(|x| x.is_finite()).collect();
        out.push(if kept.len() * 2 >= n {
            kept.iter().sum::<f64>() / kept.len() as f64
        } else {
            f64::NAN
        });
    }
    out
}

/// Growth of 1 per quantile from the 1-day returns (a date a bucket has
/// no return keeps it flat).
fn growth(returns: &[f64]) -> Vec<f64> {
    let mut e = 1.0;
    returns
        .iter()
        .map(|r| {
            if r.is_finite() {
                e *= 1.0 + r;
            }
            e
        })
        .collect()
}

/// The quantile's colour: lowest red through highest green.
fn quantile_style(k: usize, q: usize, theme: &Theme) -> Style {
    let palette = [theme.error, theme.warn, theme.text, theme.accent, theme.ok];
    let at = if q <= 1 {
        palette.len() - 1
    } else {
        k * (palette.len() - 1) / (q - 1)
    };
    palette.get(at).copied().unwrap_or(theme.text)
}

fn equity_lines(stats: &FactorStats, h: usize, w: usize, theme: &Theme) -> Vec<Line<'static>> {
    let daily = &stats.quantile_daily;
    let q = daily.returns.len();
    let mut out = vec![heading(
        "Quantile equity · growth of 1 on 1-day returns, lowest to highest",
        theme,
    )];
    if q == 0 || daily.dates.is_empty() {
        out.push(Line::from(Span::styled(
            format!("{MARGIN}no per-date quantile returns in this record (written before they were kept)"),
            theme.muted,
        )));
        return out;
    }
    let curves: Vec<Vec<f64>> = daily.returns.iter().map(|r| growth(r)).collect();
    if h >= 3 {
        let spec = ChartSpec {
            width: w,
            height: h,
            area: false,
            with_zero: false,
            y_fmt: |x| format!("{x:.2}"),
        };
        let drawn: Vec<Curve<'_>> = curves
            .iter()
            .enumerate()
            .map(|(k, c)| Curve {
                values: c,
                style: quantile_style(k, q, theme),
            })
            .collect();
        out.extend(chart(&drawn, &daily.dates, spec, theme));
    }
    let labels: Vec<String> = curves
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let end = c.last().copied().unwrap_or(f64::NAN);
            format!("Q{} {}", k + 1, fmt(end, 2))
        })
        .collect();
    let items: Vec<(&str, Style)> = labels
        .iter()
        .enumerate()
        .map(|(k, l)| (l.as_str(), quantile_style(k, q, theme)))
        .collect();
    out.push(legend(&items, theme));
    out
}

/// The mean rank IC at each horizon as a bar from a zero axis, with its
/// value.
fn decay_lines(stats: &FactorStats, w: usize, theme: &Theme) -> Vec<Line<'static>> {
    let mut out = vec![heading("IC decay · mean rank IC by horizon", theme)];
    let top = stats
        .ic_decay
        .iter()
        .filter(|x| x.is_finite())
        .fold(0.0f64, |m, x| m.max(x.abs()));
    let half = (w.saturating_sub(24) / 2).clamp(2, 30);
    for (hs, ic) in stats.horizons.iter().zip(&stats.ic_decay) {
        let len = if top > 0.0 && ic.is_finite() {
            ((ic.abs() / top) * half as f64).round() as usize
        } else {
            0
        };
        let bar = "█".repeat(len.min(half));
        let (left, right, style) = if *ic < 0.0 {
            (format!("{bar:>half$}"), " ".repeat(half), theme.error)
        } else {
            (" ".repeat(half), format!("{bar:<half$}"), theme.ok)
        };
        out.push(Line::from(vec![
            Span::styled(format!("{MARGIN}{:>4}d ", hs.horizon), theme.muted),
            Span::styled(left, style),
            Span::styled("│", theme.border),
            Span::styled(right, style),
            Span::styled(format!(" {}", fmt(*ic, 4)), theme.text),
        ]));
    }
    out
}

/// The band a correlation falls in, for the cell's colour and the legend.
fn corr_style(x: f64, theme: &Theme) -> Style {
    if !x.is_finite() {
        return theme.muted;
    }
    let base = if x < 0.0 { theme.error } else { theme.ok };
    if x.abs() >= 0.5 {
        base.add_modifier(Modifier::REVERSED | Modifier::BOLD)
    } else if x.abs() >= 0.2 {
        base
    } else {
        theme.muted
    }
}

/// The top factors' correlation matrix: rows named, columns numbered to
/// match.
fn heatmap(record: &ScreenRecord, w: usize, h: usize, theme: &Theme) -> Vec<Line<'static>> {
    let s = &record.screen;
    let top: Vec<usize> = ranked(record)
        .into_iter()
        .filter(|i| s.factors.get(*i).is_some_and(|f| f.stats.is_some()))
        .collect();
    let label_w = top
        .iter()
        .filter_map(|i| s.factors.get(*i))
        .map(|f| text_width(&f.name))
        .max()
        .unwrap_or(6)
        .clamp(6, 18)
        + 4;
    let fit_w = w.saturating_sub(label_w + 2) / CELL_W;
    let fit_h = h.saturating_sub(5);
    let n = top.len().min(HEATMAP_MAX).min(fit_w).min(fit_h);
    let mut out = vec![heading(
        format!(
            "Correlation of the rank IC series ({}d) · top {n} of {} scored, by ranking",
            s.options.rank_horizon,
            top.len()
        ),
        theme,
    )];
    if n == 0 {
        out.push(Line::from(Span::styled(
            format!("{MARGIN}no scored factors to correlate, or no room: widen the terminal"),
            theme.muted,
        )));
        return out;
    }
    let mut head = format!("{MARGIN}{}", " ".repeat(label_w));
    for k in 0..n {
        head.push_str(&cell(&format!("#{}", k + 1), CELL_W, true));
    }
    out.push(Line::from(Span::styled(head, theme.muted)));
    for (r, &i) in top.iter().take(n).enumerate() {
        let name = s.factors.get(i).map_or("", |f| f.name.as_str());
        let label = format!("{:>2} {}", r + 1, name);
        let mut spans = vec![Span::styled(
            format!("{MARGIN}{}", cell(&label, label_w, false)),
            theme.text,
        )];
        for &j in top.iter().take(n) {
            let x = s
                .correlation
                .get(i)
                .and_then(|row| row.get(j))
                .copied()
                .unwrap_or(f64::NAN);
            let text = if x.is_finite() {
                format!("{x:+.2}")
            } else {
                "·".into()
            };
            spans.push(Span::raw(" "));
            spans.push(Span::styled(
                cell(&text, CELL_W - 1, true),
                corr_style(x, theme),
            ));
        }
        out.push(Line::from(spans));
    }
    out.push(Line::default());
    let mut spans = vec![Span::styled(format!("{MARGIN}scale "), theme.muted)];
    for (label, x) in [
        ("≤ −0.5", -0.7),
        ("−0.5…−0.2", -0.3),
        ("|ρ| < 0.2", 0.0),
        ("0.2…0.5", 0.3),
        ("≥ 0.5", 0.7),
        ("· none", f64::NAN),
    ] {
        spans.push(Span::styled(format!(" {label} "), corr_style(x, theme)));
        spans.push(Span::raw(" "));
    }
    out.push(Line::from(spans));
    out
}
