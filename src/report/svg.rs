//! The report's charts as inline SVG (docs §20.4): plain elements, no
//! script, no font file, no reference outside the document, so they read
//! the same in a browser with JavaScript off, in a Markdown viewer and
//! inside an HTML file. Date axes tick on month or year boundaries
//! ([`date_ticks`]); the monthly heatmap carries its values in the cells
//! and a colour legend.

use std::fmt::Write;

use chrono::NaiveDate;

use super::escape;
use crate::research::backtest::chart::date_ticks;
use crate::research::tearsheet::{Distribution, MonthlyTable};

const W: f64 = 760.0;
const H: f64 = 260.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 26.0;
/// Points per line at most: 2,520 days draw alike with a third of them.
const MAX_POINTS: usize = 900;

pub const BLUE: &str = "#1f77b4";
pub const GRAY: &str = "#8c8c8c";
pub const RED: &str = "#d62728";
pub const GREEN: &str = "#2ca02c";
pub const ORANGE: &str = "#ff7f0e";

/// How a value axis labels its ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    Percent,
    Number,
}

impl Axis {
    fn label(self, v: f64) -> String {
        match self {
            Axis::Percent => format!("{:.0}%", v * 100.0),
            Axis::Number => {
                if v.abs() >= 100.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.2}")
                }
            }
        }
    }
}

/// One line of a line chart.
pub struct Line<'a> {
    pub name: &'a str,
    pub values: &'a [Option<f64>],
    pub color: &'a str,
}

fn open(title: &str, height: f64) -> String {
    let t = escape(title);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {height}\" width=\"{W}\" height=\"{height}\" role=\"img\" aria-label=\"{t}\" font-family=\"sans-serif\" font-size=\"11\">\
<title>{t}</title><rect width=\"{W}\" height=\"{height}\" fill=\"#ffffff\"/>\
<text x=\"{LEFT}\" y=\"18\" font-size=\"14\" font-weight=\"bold\" fill=\"#222\">{t}</text>"
    )
}

/// Rounded tick values covering `lo..hi` (1, 2 or 5 times a power of 10).
fn nice_ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    let span = hi - lo;
    if !span.is_finite() || span <= 0.0 {
        return vec![lo];
    }
    let raw = span / count.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).take(50).map(|k| k as f64 * step).collect()
}

fn bounds<'a>(values: impl Iterator<Item = &'a Option<f64>>, zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = if zero {
        (0.0, 0.0)
    } else {
        (f64::INFINITY, f64::NEG_INFINITY)
    };
    for v in values.flatten().filter(|v| v.is_finite()) {
        lo = lo.min(*v);
        hi = hi.max(*v);
    }
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.05).max(1e-9);
    (lo - pad, hi + pad)
}

/// A line chart over dates; `fill` shades each line down to zero (the
/// underwater curve).
pub fn line_chart(
    title: &str,
    dates: &[NaiveDate],
    lines: &[Line<'_>],
    axis: Axis,
    fill: bool,
) -> String {
    let mut s = open(title, H);
    let (lo, hi) = bounds(lines.iter().flat_map(|l| l.values.iter()), fill);
    let n = dates.len().max(2);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let x = |i: usize| LEFT + plot_w * i as f64 / (n - 1) as f64;
    let y = |v: f64| TOP + plot_h * (hi - v) / (hi - lo);
    value_grid(&mut s, lo, hi, axis, &y);
    for (i, label) in date_ticks(dates, 8) {
        let xi = x(i);
        let _ = write!(
            s,
            "<line x1=\"{xi:.1}\" y1=\"{TOP}\" x2=\"{xi:.1}\" y2=\"{:.1}\" stroke=\"#eeeeee\"/><text x=\"{xi:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#444\">{}</text>",
            TOP + plot_h,
            H - 8.0,
            escape(&label)
        );
    }
    for line in lines {
        let path = path_of(line.values, &x, &y);
        if fill && !path.is_empty() {
            let _ = write!(
                s,
                "<path d=\"{}\" fill=\"{}\" fill-opacity=\"0.25\" stroke=\"none\"/>",
                closed_to(&path, y(0.0)),
                line.color
            );
        }
        let _ = write!(
            s,
            "<path d=\"{path}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>",
            line.color
        );
    }
    legend(&mut s, lines.iter().map(|l| (l.name, l.color)));
    s.push_str("</svg>");
    s
}

/// Horizontal grid lines with their value labels.
fn value_grid(s: &mut String, lo: f64, hi: f64, axis: Axis, y: &dyn Fn(f64) -> f64) {
    for t in nice_ticks(lo, hi, 5) {
        let yt = y(t);
        let _ = write!(
            s,
            "<line x1=\"{LEFT}\" y1=\"{yt:.1}\" x2=\"{:.1}\" y2=\"{yt:.1}\" stroke=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#444\">{}</text>",
            W - RIGHT,
            if t == 0.0 { "#bbbbbb" } else { "#eeeeee" },
            LEFT - 6.0,
            yt + 4.0,
            escape(&axis.label(t))
        );
    }
}

/// The path of a series with gaps where values are missing; for the
/// underwater fill each run is closed down to zero.
fn path_of(values: &[Option<f64>], x: &dyn Fn(usize) -> f64, y: &dyn Fn(f64) -> f64) -> String {
    let plain: Vec<f64> = values.iter().map(|v| v.unwrap_or(f64::NAN)).collect();
    // Decimation keeps each bucket's extremes; the gaps are kept too, so a
    // line never bridges a missing stretch.
    let mut keep = crate::research::backtest::chart::decimate(&plain, MAX_POINTS);
    if keep.len() < plain.len() {
        keep.extend((0..plain.len()).filter(|&i| plain.get(i).is_some_and(|v| v.is_nan())));
        keep.sort_unstable();
        keep.dedup();
    }
    let mut d = String::with_capacity(keep.len() * 14);
    let mut pen_down = false;
    for i in keep {
        match plain.get(i).filter(|v| v.is_finite()) {
            Some(v) => {
                let _ = write!(
                    d,
                    "{}{:.1},{:.1}",
                    if pen_down { "L" } else { "M" },
                    x(i),
                    y(*v)
                );
                pen_down = true;
            }
            None => pen_down = false,
        }
    }
    d
}

/// `path`'s runs each closed down to the baseline at `base`: filled as it
/// stands, a run would close from its last point straight back to its
/// first, a diagonal wedge across the chart.
fn closed_to(path: &str, base: f64) -> String {
    let mut out = String::with_capacity(path.len() + 64);
    for run in path.split('M').filter(|r| !r.is_empty()) {
        let first_x = run.split(',').next().unwrap_or("0");
        let last_x = run
            .rsplit('L')
            .next()
            .and_then(|p| p.split(',').next())
            .unwrap_or(first_x);
        let _ = write!(out, "M{run}L{last_x},{base:.1}L{first_x},{base:.1}Z");
    }
    out
}

fn legend<'a>(s: &mut String, items: impl Iterator<Item = (&'a str, &'a str)>) {
    let mut x = W - RIGHT - 10.0;
    let items: Vec<_> = items.collect();
    for (name, color) in items.iter().rev() {
        let w = 24.0 + 6.5 * name.chars().count() as f64;
        x -= w;
        let _ = write!(
            s,
            "<rect x=\"{x:.1}\" y=\"9\" width=\"14\" height=\"4\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"15\" fill=\"#222\">{}</text>",
            x + 18.0,
            escape(name)
        );
    }
}

/// A colour for `v` on a diverging scale: red below zero, white at zero,
/// green above, full at `max_abs`.
pub fn diverging(v: f64, max_abs: f64) -> String {
    let t = if max_abs > 0.0 {
        (v / max_abs).clamp(-1.0, 1.0)
    } else {
        0.0
    };
    let (r, g, b) = if t < 0.0 {
        (214.0, 39.0, 40.0)
    } else {
        (44.0, 160.0, 44.0)
    };
    let a = t.abs() * 0.85;
    let mix = |c: f64| (255.0 + (c - 255.0) * a).round() as u8;
    format!("#{:02x}{:02x}{:02x}", mix(r), mix(g), mix(b))
}

/// Years × months with the value in each cell, the year's return last, and
/// a colour legend below (docs §20.4).
pub fn monthly_heatmap(title: &str, table: &MonthlyTable) -> String {
    const CW: f64 = 50.0;
    const CH: f64 = 22.0;
    let x0 = 56.0;
    let y0 = 48.0;
    let rows = table.years.len();
    let height = y0 + CH * rows as f64 + 64.0;
    let max_abs = table
        .cells
        .iter()
        .flat_map(|r| r.iter())
        .flatten()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let mut s = open(title, height);
    const MONTHS: [&str; 13] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec", "Year",
    ];
    for (m, name) in MONTHS.iter().enumerate() {
        let gap = if m == 12 { 8.0 } else { 0.0 };
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#444\">{name}</text>",
            x0 + gap + CW * (m as f64 + 0.5),
            y0 - 6.0
        );
    }
    for (r, year) in table.years.iter().enumerate() {
        let y = y0 + CH * r as f64;
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#444\">{year}</text>",
            x0 - 6.0,
            y + 15.0
        );
        let cells = table.cells.get(r).copied().unwrap_or([None; 12]);
        let year_value = table.year.get(r).copied().flatten();
        for (m, v) in cells.iter().chain(std::iter::once(&year_value)).enumerate() {
            let gap = if m == 12 { 8.0 } else { 0.0 };
            let x = x0 + gap + CW * m as f64;
            heat_cell(&mut s, x, y, CW, CH, *v, max_abs);
        }
    }
    color_legend(&mut s, x0, y0 + CH * rows as f64 + 18.0, max_abs);
    s.push_str("</svg>");
    s
}

fn heat_cell(s: &mut String, x: f64, y: f64, w: f64, h: f64, v: Option<f64>, max_abs: f64) {
    let (fill, text) = match v.filter(|v| v.is_finite()) {
        Some(v) => (diverging(v, max_abs), format!("{:.1}", v * 100.0)),
        None => ("#f7f7f7".to_string(), String::new()),
    };
    let _ = write!(
        s,
        "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{fill}\" stroke=\"#ffffff\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#111\">{text}</text>",
        x + w / 2.0,
        y + 15.0
    );
}

/// A bar of colours from −max to +max with its end and middle values.
fn color_legend(s: &mut String, x0: f64, y: f64, max_abs: f64) {
    const STEPS: usize = 21;
    const SW: f64 = 14.0;
    let _ = write!(
        s,
        "<g class=\"legend\"><text x=\"{x0:.1}\" y=\"{:.1}\" fill=\"#444\">monthly return, %</text>",
        y - 4.0
    );
    for k in 0..STEPS {
        let v = max_abs * (2.0 * k as f64 / (STEPS - 1) as f64 - 1.0);
        let _ = write!(
            s,
            "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{SW}\" height=\"12\" fill=\"{}\"/>",
            x0 + SW * k as f64,
            diverging(v, max_abs)
        );
    }
    for (k, v) in [(0, -max_abs), (STEPS / 2, 0.0), (STEPS - 1, max_abs)] {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#444\">{:.1}</text>",
            x0 + SW * (k as f64 + 0.5),
            y + 26.0,
            v * 100.0
        );
    }
    s.push_str("</g>");
}

/// Bars per label, one colour per group (strategy, benchmark), from zero.
pub fn bar_chart(
    title: &str,
    labels: &[String],
    groups: &[(&str, &str, Vec<Option<f64>>)],
    axis: Axis,
) -> String {
    let mut s = open(title, H);
    let (lo, hi) = bounds(groups.iter().flat_map(|g| g.2.iter()), true);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let y = |v: f64| TOP + plot_h * (hi - v) / (hi - lo);
    value_grid(&mut s, lo, hi, axis, &y);
    let slot = plot_w / labels.len().max(1) as f64;
    let bar_w = (slot * 0.8) / groups.len().max(1) as f64;
    let every = labels.len().div_ceil(16).max(1);
    for (i, label) in labels.iter().enumerate() {
        let x = LEFT + slot * i as f64;
        if i % every == 0 {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#444\">{}</text>",
                x + slot / 2.0,
                H - 8.0,
                escape(label)
            );
        }
        for (g, (_, color, values)) in groups.iter().enumerate() {
            let Some(v) = values.get(i).copied().flatten().filter(|v| v.is_finite()) else {
                continue;
            };
            let (top, bottom) = (y(v.max(0.0)), y(v.min(0.0)));
            let _ = write!(
                s,
                "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{bar_w:.1}\" height=\"{:.1}\" fill=\"{color}\"><title>{} {}</title></rect>",
                x + slot * 0.1 + bar_w * g as f64,
                (bottom - top).max(0.5),
                escape(label),
                escape(&axis.label(v))
            );
        }
    }
    legend(&mut s, groups.iter().map(|g| (g.0, g.1)));
    s.push_str("</svg>");
    s
}

/// The histogram of one distribution's returns.
pub fn histogram(title: &str, d: &Distribution) -> String {
    let labels: Vec<String> = d
        .edges
        .windows(2)
        .map(|w| format!("{:.1}", (w[0] + w[1]) * 50.0))
        .collect();
    let counts: Vec<Option<f64>> = d.counts.iter().map(|c| Some(*c as f64)).collect();
    bar_chart(title, &labels, &[("count", BLUE, counts)], Axis::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_run_closes_along_the_baseline() {
        assert_eq!(
            closed_to("M1.0,5.0L2.0,9.0L3.0,7.0M5.0,6.0L6.0,8.0", 4.0),
            "M1.0,5.0L2.0,9.0L3.0,7.0L3.0,4.0L1.0,4.0ZM5.0,6.0L6.0,8.0L6.0,4.0L5.0,4.0Z"
        );
        let dates: Vec<NaiveDate> = (1..=4)
            .filter_map(|d| NaiveDate::from_ymd_opt(2020, 1, d))
            .collect();
        let dd = [Some(0.0), Some(-0.2), Some(-0.1), Some(-0.3)];
        let svg = line_chart(
            "Underwater",
            &dates,
            &[Line {
                name: "drawdown",
                color: "#d62728",
                values: &dd,
            }],
            Axis::Percent,
            true,
        );
        let filled = svg
            .split("fill-opacity=\"0.25\"")
            .next()
            .and_then(|s| s.rsplit("d=\"").next())
            .unwrap_or_default();
        assert!(filled.ends_with("Z\" fill=\"#d62728\" "), "{filled}");
    }

    #[test]
    fn nice_ticks_are_round_and_inside() {
        assert_eq!(
            nice_ticks(0.0, 1.0, 5),
            vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
        );
        let t = nice_ticks(-0.37, 0.05, 5);
        assert!(
            t.contains(&0.0) && t.iter().all(|v| (-0.37..=0.05).contains(v)),
            "{t:?}"
        );
        assert_eq!(nice_ticks(1.0, 1.0, 5), vec![1.0]);
    }

    #[test]
    fn the_heatmap_holds_its_values_and_a_legend() {
        let table = MonthlyTable {
            years: vec![2020, 2021],
            cells: vec![
                [
                    Some(0.012),
                    Some(-0.034),
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                ],
                [Some(0.05); 12],
            ],
            year: vec![Some(-0.0226), Some(0.7959)],
        };
        let s = monthly_heatmap("Monthly <returns>", &table);
        assert!(
            s.contains(">1.2</text>") && s.contains(">-3.4</text>"),
            "{s}"
        );
        assert!(s.contains(">79.6</text>") && s.contains(">Year</text>"));
        assert!(
            s.contains("class=\"legend\"")
                && s.contains(">-5.0</text>")
                && s.contains(">5.0</text>")
        );
        assert!(s.contains("Monthly &lt;returns&gt;") && !s.contains("<returns>"));
        // The largest gain is the deepest green, a loss is red.
        assert_eq!(diverging(0.05, 0.05), "#4cae4c");
        assert!(diverging(-0.05, 0.05).starts_with("#d"));
        assert_eq!(diverging(0.0, 0.05), "#ffffff");
    }

    #[test]
    fn lines_break_at_gaps_and_ticks_fall_on_months() {
        let d0 = NaiveDate::from_ymd_opt(2021, 1, 4).unwrap();
        let dates: Vec<NaiveDate> = (0..120).map(|i| d0 + chrono::Duration::days(i)).collect();
        let mut v: Vec<Option<f64>> = (0..120).map(|i| Some(i as f64)).collect();
        v[50] = None;
        let s = line_chart(
            "t",
            &dates,
            &[Line {
                name: "a",
                values: &v,
                color: BLUE,
            }],
            Axis::Number,
            false,
        );
        let d = s
            .split("<path d=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert_eq!(d.matches('M').count(), 2, "{d}");
        assert!(s.contains(">2021-02</text>") && s.contains(">2021-03</text>"));
        assert!(!s.contains(">2021-01-"));
    }
}
