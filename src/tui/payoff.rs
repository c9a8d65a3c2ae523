//! A finished `option_strategy` call as a chat cell (docs §15.2.3), drawn
//! like a backtest's equity curve: a headline (the position, its net
//! premium, breakevens, maximum profit and loss), then the profit and loss
//! at expiry against the underlying with ratatui's `Chart` in braille, the
//! zero line and the breakevens marked. Below [`super::backtest::CHART_MIN_WIDTH`]
//! the curve folds to a one-line sparkline until the cell is expanded.
//!
//! Everything comes from the call's typed output ([`OptionStrategyOutput`]):
//! no file is read, so the cell is whole as soon as the event arrives.

use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Dataset, GraphType};
use serde::Deserialize;
use serde_json::Value;

use super::backtest::{LABEL_W, PAD, draw, y_label};
use super::format::one_line;
use super::theme::Theme;
use super::wrap::wrap_spans;
use crate::model::quant::OptionStrategyOutput;
use crate::research::backtest::chart::{compact, sparkline};

/// The tool whose results get this cell.
pub(crate) const TOOL: &str = crate::model::names::OPTION_STRATEGY;

/// The cell: the output's figures, parsed once.
#[derive(Clone, Debug, PartialEq)]
pub struct PayoffCell {
    pub call_id: String,
    pub output: OptionStrategyOutput,
}

impl PayoffCell {
    /// Text for search.
    pub fn plain_text(&self) -> String {
        format!("{TOOL} {}", headline(&self.output))
    }
}

/// A cell from a successful call's structured output, or from its stored
/// result text (a resumed session); `None` when it is not one.
pub(crate) fn cell_for_output(call_id: &str, output: &Value) -> Option<PayoffCell> {
    let out = OptionStrategyOutput::deserialize(output).ok()?;
    (out.status == "ok" && out.payoff.len() >= 2).then(|| PayoffCell {
        call_id: call_id.to_string(),
        output: out,
    })
}

/// As [`cell_for_output`] from the result's text.
pub(crate) fn cell_for_result(call_id: &str, text: &str) -> Option<PayoffCell> {
    cell_for_output(call_id, &serde_json::from_str(text).ok()?)
}

fn money(x: Option<f64>) -> String {
    x.map_or("unbounded".into(), |x| format!("{x:.2}"))
}

/// "IBM straddle payoff at expiry (0.25 y): net premium 10.63 · …".
fn headline(o: &OptionStrategyOutput) -> String {
    let be: Vec<String> = o.breakevens.iter().map(|b| format!("{b:.2}")).collect();
    format!(
        "{}{} payoff at expiry ({} y): net premium {:.2} · breakevens {} · max profit {} · max loss {}",
        o.symbol
            .as_ref()
            .map(|s| format!("{s} "))
            .unwrap_or_default(),
        o.position,
        o.inputs.expiry_years,
        o.net_premium,
        if be.is_empty() {
            "none".into()
        } else {
            be.join(", ")
        },
        money(o.max_profit),
        money(o.max_loss),
    )
}

/// The cell's lines at `width`: expanded, the chart; folded, a sparkline.
pub(crate) fn render(
    cell: &PayoffCell,
    width: usize,
    theme: &Theme,
    expanded: bool,
    out: &mut Vec<Line<'static>>,
) {
    let o = &cell.output;
    let head = headline(o);
    let first = vec![Span::raw("  "), Span::styled("◆ ", theme.accent)];
    if expanded {
        let spans = [Span::styled(head, theme.text)];
        out.extend(wrap_spans(&spans, width, &first, &[Span::raw(PAD)]));
    } else {
        let mut spans = first;
        spans.push(Span::styled(
            one_line(&head, width.saturating_sub(4)),
            theme.text,
        ));
        out.push(Line::from(spans));
    }
    let pnl: Vec<f64> = o.payoff.iter().map(|p| p.pnl).collect();
    if expanded && width >= PAD.len() + LABEL_W + 12 {
        chart(o, width, theme, out);
    } else {
        let label = "P&L at expiry ";
        let w = width.saturating_sub(PAD.len() + label.len());
        out.push(Line::from(vec![
            Span::raw(PAD),
            Span::styled(label, theme.muted),
            Span::styled(sparkline(&pnl, w), theme.accent),
        ]));
    }
    out.push(Line::from(vec![
        Span::raw(PAD),
        Span::styled(
            format!(
                "value today {:.2} · delta {:.4} · gamma {:.4} · vega {:.4} · theta {:.4} / year",
                o.greeks.value, o.greeks.delta, o.greeks.gamma, o.greeks.vega, o.greeks.theta
            ),
            theme.muted,
        ),
    ]));
}

/// The axis bounds of the profit and loss, with zero always inside.
fn y_bounds(pnl: &[f64]) -> (f64, f64) {
    let lo = pnl.iter().copied().fold(0.0_f64, f64::min);
    let hi = pnl.iter().copied().fold(0.0_f64, f64::max);
    let pad = ((hi - lo) * 0.05).max(1e-9);
    (lo - pad, hi + pad)
}

/// The legend, the chart, and the spot range under it.
fn chart(o: &OptionStrategyOutput, width: usize, theme: &Theme, out: &mut Vec<Line<'static>>) {
    let w = width - PAD.len();
    let pts: Vec<(f64, f64)> = o.payoff.iter().map(|p| (p.spot, p.pnl)).collect();
    let (x_lo, x_hi) = (pts[0].0, pts[pts.len() - 1].0);
    let (lo, hi) = y_bounds(&o.payoff.iter().map(|p| p.pnl).collect::<Vec<_>>());
    let zero = [(x_lo, 0.0), (x_hi, 0.0)];
    let marks: Vec<(f64, f64)> = o.breakevens.iter().map(|b| (*b, 0.0)).collect();
    let spot = [(o.inputs.spot, lo), (o.inputs.spot, hi)];
    out.push(Line::from(vec![
        Span::raw(PAD),
        Span::styled("P&L at expiry  ", theme.muted),
        Span::styled("━ position", theme.accent),
        Span::raw("  "),
        Span::styled("• breakeven", theme.warn),
        Span::raw("  "),
        Span::styled(format!("┆ spot {:.2}", o.inputs.spot), theme.muted),
    ]));
    let sets = vec![
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.border)
            .data(&zero),
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.muted)
            .data(&spot),
        // The position last but the marks, so it draws over the guides.
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.accent)
            .data(&pts),
        Dataset::default()
            .marker(Marker::Dot)
            .graph_type(GraphType::Scatter)
            .style(theme.warn)
            .data(&marks),
    ];
    let label = |x: f64| Span::styled(compact(x, 2), theme.muted);
    let chart = Chart::new(sets)
        .legend_position(None)
        .x_axis(
            Axis::default()
                .bounds([x_lo, x_hi])
                .style(theme.border)
                .labels([label(x_lo), label((x_lo + x_hi) / 2.0), label(x_hi)]),
        )
        .y_axis(
            Axis::default()
                .bounds([lo, hi])
                .style(theme.border)
                .labels([
                    y_label(compact(lo, 2), theme),
                    y_label(compact((lo + hi) / 2.0, 2), theme),
                    y_label(compact(hi, 2), theme),
                ]),
        );
    let h = (width / 8).clamp(8, 14);
    out.extend(draw(chart, w, h));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn output() -> Value {
        json!({"status": "ok", "position": "bull call spread",
               "legs": [{"kind": "call", "strike": 100.0, "quantity": 1.0, "premium": 5.0, "premium_from_model": false},
                        {"kind": "call", "strike": 110.0, "quantity": -1.0, "premium": 2.0, "premium_from_model": false}],
               "net_premium": 3.0,
               "payoff": [{"spot": 90.0, "pnl": -3.0}, {"spot": 100.0, "pnl": -3.0}, {"spot": 103.0, "pnl": 0.0},
                          {"spot": 110.0, "pnl": 7.0}, {"spot": 120.0, "pnl": 7.0}],
               "breakevens": [103.0], "max_profit": 7.0, "max_loss": 3.0,
               "greeks": {"value": 3.1, "delta": 0.4, "gamma": 0.02, "vega": 10.0, "theta": -4.0, "rho": 5.0},
               "stress": [], "inputs": {"spot": 102.0, "expiry_years": 0.25, "volatility": 0.2, "rate": 0.0, "dividend_yield": 0.0},
               "symbol": "IBM"})
    }

    #[test]
    fn only_successful_outputs_with_a_curve_make_a_cell() {
        let c = cell_for_output("c1", &output()).unwrap();
        assert!(c.plain_text().contains("IBM bull call spread payoff at expiry (0.25 y): net premium 3.00 · breakevens 103.00 · max profit 7.00 · max loss 3.00"));
        assert!(cell_for_output("c1", &json!({"status": "error"})).is_none());
        assert!(cell_for_result("c1", &output().to_string()).is_some());
        assert!(cell_for_result("c1", "not json").is_none());
    }

    #[test]
    fn the_zero_line_is_always_inside_the_axis() {
        let (lo, hi) = y_bounds(&[1.0, 2.0, 5.0]);
        assert!(lo < 0.0 && hi > 5.0);
    }
}
