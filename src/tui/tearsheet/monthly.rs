//! The monthly tab: the years × months heatmap with the year's return,
//! coloured by sign and magnitude with a legend that names the bands, then
//! the annual returns against the benchmark.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::super::theme::Theme;
use super::charts::{MARGIN, cell, heading, pct, spct};
use crate::research::tearsheet::TearSheet;

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
/// From this width the cells hold two decimals and a sign.
const WIDE_CELLS: usize = 112;

/// The colour bands: strong moves are filled, small ones only coloured.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bands {
    /// The magnitude from which a month counts as strong.
    strong: f64,
}

impl Bands {
    /// Strong is half the largest monthly move, so every sheet uses its
    /// whole colour range whatever its volatility.
    fn of(s: &TearSheet) -> Bands {
        let max = s
            .monthly
            .cells
            .iter()
            .flat_map(|r| r.iter())
            .filter_map(|c| *c)
            .filter(|x| x.is_finite())
            .fold(0.0_f64, |m, x| m.max(x.abs()));
        Bands {
            strong: (max / 2.0).max(1e-4),
        }
    }

    fn style(self, x: f64, theme: &Theme) -> Style {
        let strong = x.abs() >= self.strong;
        let base = if x < 0.0 { theme.error } else { theme.ok };
        if strong {
            base.add_modifier(Modifier::REVERSED | Modifier::BOLD)
        } else {
            base.remove_modifier(Modifier::BOLD)
        }
    }
}

/// A cell's text: `+1.23` on wide screens; on narrow ones at most four
/// columns (`-9.9`, `12`), the sign left to the colour for gains.
fn value(x: f64, wide: bool) -> String {
    let p = x * 100.0;
    if wide {
        format!("{p:+.2}")
    } else if p.abs() < 9.95 {
        format!("{p:.1}")
    } else {
        format!("{p:.0}")
    }
}

pub(super) fn tab(s: &TearSheet, w: usize, theme: &Theme) -> Vec<Line<'static>> {
    let wide = w >= WIDE_CELLS;
    let vw = if wide { 7 } else { 4 };
    let bands = Bands::of(s);
    let mut out = vec![heading("Monthly returns (%)", theme)];
    let mut head = vec![Span::styled(
        format!("{MARGIN}{}", cell("", 4, false)),
        theme.muted,
    )];
    for m in MONTHS {
        head.push(Span::styled(
            format!(" {}", cell(m, vw, true)),
            theme.heading,
        ));
    }
    head.push(Span::styled(
        format!("  {}", cell("Year", vw, true)),
        theme.heading,
    ));
    out.push(Line::from(head));
    for (i, year) in s.monthly.years.iter().enumerate() {
        let mut spans = vec![Span::styled(format!("{MARGIN}{year:>4}"), theme.muted)];
        let row = s.monthly.cells.get(i);
        for m in 0..12 {
            spans.push(Span::raw(" "));
            match row.and_then(|r| r.get(m)).copied().flatten() {
                Some(x) if x.is_finite() => spans.push(Span::styled(
                    cell(&value(x, wide), vw, true),
                    bands.style(x, theme),
                )),
                _ => spans.push(Span::styled(cell("·", vw, true), theme.muted)),
            }
        }
        spans.push(Span::raw("  "));
        match s.monthly.year.get(i).copied().flatten() {
            Some(x) if x.is_finite() => spans.push(Span::styled(
                cell(&value(x, wide), vw, true),
                if x < 0.0 { theme.error } else { theme.ok },
            )),
            _ => spans.push(Span::styled(cell("·", vw, true), theme.muted)),
        }
        out.push(Line::from(spans));
    }
    if s.monthly.years.is_empty() {
        out.push(Line::from(Span::styled(
            format!("{MARGIN}no whole month in the series"),
            theme.muted,
        )));
    }
    out.push(legend(bands, theme));
    out.push(Line::default());
    // Wide screens put the annual table beside the heatmap.
    let heat_w = MARGIN.len() + 4 + 13 * (vw + 1) + 2;
    if w >= heat_w + 44 {
        return super::charts::beside(out, heat_w + 3, annual(s, theme));
    }
    out.extend(annual(s, theme));
    out
}

/// The bands with their bounds, each in its own style.
fn legend(b: Bands, theme: &Theme) -> Line<'static> {
    let t = pct(b.strong, 1);
    let items = [
        (format!("≤ -{t}"), -b.strong),
        (format!("-{t} … 0"), -b.strong / 2.0),
        (format!("0 … +{t}"), b.strong / 2.0),
        (format!("≥ +{t}"), b.strong),
    ];
    let mut spans = vec![Span::styled(format!("{MARGIN}legend "), theme.muted)];
    for (label, x) in items {
        spans.push(Span::styled(format!(" {label} "), b.style(x, theme)));
        spans.push(Span::raw(" "));
    }
    spans.push(Span::styled("· no data", theme.muted));
    Line::from(spans)
}

fn annual(s: &TearSheet, theme: &Theme) -> Vec<Line<'static>> {
    let bench = s.annual.iter().any(|r| r.benchmark.is_some());
    let mut out = vec![heading("Annual returns", theme)];
    let mut head = format!(
        "{MARGIN}{} {}",
        cell("Year", 4, false),
        cell("Strategy", 9, true)
    );
    if bench {
        head.push_str(&format!(
            " {} {}",
            cell("Benchmark", 9, true),
            cell("Excess", 9, true)
        ));
    }
    out.push(Line::from(Span::styled(head, theme.heading)));
    let signed = |x: f64| if x < 0.0 { theme.error } else { theme.ok };
    for r in &s.annual {
        let mut spans = vec![
            Span::styled(format!("{MARGIN}{:>4} ", r.year), theme.muted),
            Span::styled(cell(&spct(r.strategy, 2), 9, true), signed(r.strategy)),
        ];
        if let Some(b) = r.benchmark {
            spans.push(Span::styled(
                format!(" {}", cell(&spct(b, 2), 9, true)),
                theme.muted,
            ));
            let ex = r.strategy - b;
            spans.push(Span::styled(
                format!(" {}", cell(&spct(ex, 2), 9, true)),
                signed(ex),
            ));
        }
        out.push(Line::from(spans));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_cells_fit_four_columns() {
        for x in [0.0123, -0.0987, 0.1234, -0.4567, 0.999] {
            assert!(value(x, false).chars().count() <= 4, "{x}");
        }
        assert_eq!(value(-0.0123, true), "-1.23");
        assert_eq!(value(0.1234, false), "12");
    }
}
