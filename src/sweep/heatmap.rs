//! A heatmap of the ranking metric over two axes (docs §18.4): in braille
//! for the chat and the terminal (one character a cell, more dots for a
//! higher value), and as SVG and PNG drawn with `plotters` and the font the
//! backtest charts ship.
//!
//! A square is the mean over the universe of each cell's score (its
//! out-of-sample result, see [`super::local::cell_score`]), the best over
//! the other axes' values; a square no parameter set reached (the
//! constraint) is empty.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::{Value, json};

use super::plan::Plan;
use crate::research::backtest::chart::{ChartError, encode_png, font_ready};

#[derive(Clone, Debug, PartialEq)]
pub struct Heatmap {
    pub x: String,
    pub y: String,
    pub xs: Vec<Value>,
    pub ys: Vec<Value>,
    /// `grid[j][i]`: the value at `ys[j]`, `xs[i]`.
    pub grid: Vec<Vec<Option<f64>>>,
    pub metric: String,
    /// False when the plan has no out-of-sample window (in-sample scores).
    pub out_of_sample: bool,
}

/// Distinct values of an axis, numbers sorted, others in plan order.
fn distinct(plan: &Plan, axis: usize) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for c in &plan.combos {
        if let Some(v) = c.get(axis).filter(|v| !out.contains(v)) {
            out.push(v.clone());
        }
    }
    if out.iter().all(Value::is_number) {
        out.sort_by(|a, b| {
            a.as_f64()
                .unwrap_or(0.0)
                .total_cmp(&b.as_f64().unwrap_or(0.0))
        });
    }
    out
}

/// The heatmap of `scores` (one per cell) over the plan's heatmap axes.
pub fn build(plan: &Plan, scores: &[f64]) -> Option<Heatmap> {
    let (xn, yn) = plan.heatmap.clone()?;
    let xa = plan.axes.iter().position(|a| a.name == xn)?;
    let ya = plan.axes.iter().position(|a| a.name == yn)?;
    let (xs, ys) = (distinct(plan, xa), distinct(plan, ya));
    let combos = plan.combos.len();
    // Mean over units per parameter set, then best over the other axes.
    let mut grid = vec![vec![None::<f64>; xs.len()]; ys.len()];
    for (c, combo) in plan.combos.iter().enumerate() {
        let vals: Vec<f64> = (0..plan.units.len())
            .filter_map(|u| scores.get(u * combos + c).copied())
            .filter(|v| v.is_finite())
            .collect();
        if vals.is_empty() {
            continue;
        }
        let mean = vals.iter().sum::<f64>() / vals.len() as f64;
        let (Some(i), Some(j)) = (
            combo.get(xa).and_then(|v| xs.iter().position(|x| x == v)),
            combo.get(ya).and_then(|v| ys.iter().position(|y| y == v)),
        ) else {
            continue;
        };
        let slot = &mut grid[j][i];
        if slot.is_none_or(|old| mean > old) {
            *slot = Some(mean);
        }
    }
    Some(Heatmap {
        x: xn,
        y: yn,
        xs,
        ys,
        grid,
        metric: plan.rank_by.clone(),
        out_of_sample: plan.cv.is_some() || plan.windows.iter().any(|w| w.is_out_of_sample()),
    })
}

fn label(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Braille dots in fill order, bottom row first: 0 to 8 dots.
const DOTS: [u32; 8] = [0x40, 0x80, 0x04, 0x20, 0x02, 0x10, 0x01, 0x08];

/// A character with `k` of 8 dots.
pub fn dots(k: usize) -> char {
    let bits: u32 = DOTS.iter().take(k.min(8)).sum();
    char::from_u32(0x2800 + bits).unwrap_or(' ')
}

impl Heatmap {
    fn range(&self) -> Option<(f64, f64)> {
        let vals = self.grid.iter().flatten().flatten().copied();
        let (lo, hi) = vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
        (lo <= hi).then_some((lo, hi))
    }

    /// Where a value lies between the grid's lowest and highest (0 to 1;
    /// 1 when they are equal). The range is computed once by the caller: a
    /// pass over the grid for each cell made a 3,640-cell heatmap take 5 s
    /// in a debug build, past a served sweep's deadline (issue 35).
    fn position(range: Option<(f64, f64)>, v: f64) -> f64 {
        match range {
            Some((lo, hi)) if hi > lo => (v - lo) / (hi - lo),
            _ => 1.0,
        }
    }

    /// Rows from the highest y down, a column per x value; `·` where no
    /// parameter set was run.
    pub fn braille(&self) -> String {
        let yw = self
            .ys
            .iter()
            .map(|y| label(y).len())
            .max()
            .unwrap_or(1)
            .max(self.y.len());
        let mut out = format!(
            "{} ({}), more dots higher\n",
            self.metric,
            if self.out_of_sample {
                "out-of-sample"
            } else {
                "in-sample: no out-of-sample window"
            },
        );
        // The y axis's name heads its column of values; the x axis's name
        // and range run under the columns, each range beside its own name.
        out.push_str(&format!("{:>yw$} ↑\n", self.y));
        let range = self.range();
        for (j, y) in self.ys.iter().enumerate().rev() {
            out.push_str(&format!("{:>yw$} ", label(y)));
            for v in &self.grid[j] {
                out.push(match v {
                    Some(v) => dots((Self::position(range, *v) * 8.0).round() as usize),
                    None => '·',
                });
            }
            out.push('\n');
        }
        let first = self.xs.first().map(label).unwrap_or_default();
        let last = self.xs.last().map(label).unwrap_or_default();
        out.push_str(&format!("{:>yw$} {} → ({first} … {last})\n", "", self.x));
        if let Some((lo, hi)) = range {
            out.push_str(&format!("{} {lo:.4} … {} {hi:.4}\n", dots(0), dots(8)));
        }
        out
    }

    pub fn to_json(&self) -> Value {
        json!({"x": self.x, "y": self.y, "xs": self.xs, "ys": self.ys, "metric": self.metric,
               "out_of_sample": self.out_of_sample,
               "grid": self.grid.iter().map(|r| r.iter().map(|v| v.filter(|x| x.is_finite()).map_or(Value::Null, |x| json!(x))).collect::<Vec<_>>()).collect::<Vec<_>>()})
    }

    /// Blue (low) to yellow (high) through green.
    fn color(range: Option<(f64, f64)>, v: f64) -> RGBColor {
        let t = Self::position(range, v);
        const STOPS: [(f64, (u8, u8, u8)); 3] = [
            (0.0, (68, 1, 84)),
            (0.5, (33, 145, 140)),
            (1.0, (253, 231, 37)),
        ];
        let (a, b) = if t <= 0.5 {
            (STOPS[0], STOPS[1])
        } else {
            (STOPS[1], STOPS[2])
        };
        let f = ((t - a.0) / (b.0 - a.0)).clamp(0.0, 1.0);
        let mix = |x: u8, y: u8| (x as f64 + (y as f64 - x as f64) * f).round() as u8;
        RGBColor(mix(a.1.0, b.1.0), mix(a.1.1, b.1.1), mix(a.1.2, b.1.2))
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, plotters::coord::Shift>,
    ) -> Result<(), ChartError> {
        let e = |x: plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>| {
            ChartError::Draw(format!("{x:?}"))
        };
        root.fill(&WHITE).map_err(e)?;
        let (nx, ny) = (self.xs.len().max(1), self.ys.len().max(1));
        let title = format!(
            "{} ({}) by {} and {}",
            self.metric,
            if self.out_of_sample {
                "out-of-sample"
            } else {
                "in-sample"
            },
            self.x,
            self.y
        );
        let xl = |v: &f64| {
            self.xs
                .get(v.floor().max(0.0) as usize)
                .map(label)
                .unwrap_or_default()
        };
        let yl = |v: &f64| {
            self.ys
                .get(v.floor().max(0.0) as usize)
                .map(label)
                .unwrap_or_default()
        };
        // The colour bar on the right: what each colour stands for.
        let (grid_area, bar_area) = root.split_horizontally(W - BAR_WIDTH);
        let mut chart = ChartBuilder::on(&grid_area)
            .caption(&title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..nx as f64, 0f64..ny as f64)
            .map_err(e)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(nx.min(12))
            .y_labels(ny.min(12))
            .x_label_formatter(&xl)
            .y_label_formatter(&yl)
            .x_desc(&self.x)
            .y_desc(&self.y)
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(e)?;
        let squares: Vec<(usize, usize, f64)> = self
            .grid
            .iter()
            .enumerate()
            .flat_map(|(j, row)| {
                row.iter()
                    .enumerate()
                    .filter_map(move |(i, v)| v.map(|v| (i, j, v)))
            })
            .collect();
        let range = self.range();
        chart
            .draw_series(squares.iter().map(|&(i, j, v)| {
                Rectangle::new(
                    [(i as f64, j as f64), (i as f64 + 1.0, j as f64 + 1.0)],
                    Self::color(range, v).filled(),
                )
            }))
            .map_err(e)?;
        // Values in the cells while they are large enough to be read.
        if nx <= MAX_LABELLED && ny <= MAX_LABELLED {
            let size = if nx.max(ny) > 12 { 9 } else { 12 };
            chart
                .draw_series(squares.iter().map(|&(i, j, v)| {
                    // Dark text on the light (high) end, white on the dark.
                    let ink = if Self::position(range, v) > 0.6 {
                        BLACK
                    } else {
                        WHITE
                    };
                    let style = ("sans-serif", size)
                        .into_font()
                        .color(&ink)
                        .pos(Pos::new(HPos::Center, VPos::Center));
                    Text::new(cell_value(v), (i as f64 + 0.5, j as f64 + 0.5), style)
                }))
                .map_err(e)?;
        }
        self.color_bar(&bar_area, range)?;
        root.present().map_err(e)?;
        Ok(())
    }

    /// A vertical bar of the colour scale from the lowest value to the
    /// highest, labelled with the metric's values.
    fn color_bar<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, plotters::coord::Shift>,
        range: Option<(f64, f64)>,
    ) -> Result<(), ChartError> {
        let e = |x: plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>| {
            ChartError::Draw(format!("{x:?}"))
        };
        let (lo, hi) = match range {
            Some((lo, hi)) if hi > lo => (lo, hi),
            Some((lo, _)) => (lo - 0.5, lo + 0.5),
            None => (0.0, 1.0),
        };
        let mut bar = ChartBuilder::on(area)
            .caption(&self.metric, ("sans-serif", 12))
            .margin_top(40)
            .margin_bottom(48)
            .margin_right(8)
            .y_label_area_size(52)
            .build_cartesian_2d(0f64..1f64, lo..hi)
            .map_err(e)?;
        bar.configure_mesh()
            .disable_mesh()
            .disable_x_axis()
            .y_labels(6)
            .y_label_formatter(&|v| cell_value(*v))
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(e)?;
        const STEPS: usize = 64;
        let step = (hi - lo) / STEPS as f64;
        bar.draw_series((0..STEPS).map(|k| {
            let a = lo + step * k as f64;
            Rectangle::new(
                [(0.0, a), (1.0, a + step)],
                Self::color(Some((lo, hi)), a + step / 2.0).filled(),
            )
        }))
        .map_err(e)?;
        Ok(())
    }

    pub fn svg(&self) -> Result<String, ChartError> {
        if !font_ready() {
            return Err(ChartError::NoFont);
        }
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (W, H)).into_drawing_area();
            self.draw(&root)?;
        }
        Ok(out)
    }

    pub fn png(&self) -> Result<Vec<u8>, ChartError> {
        if !font_ready() {
            return Err(ChartError::NoFont);
        }
        let mut rgb = vec![0u8; (W * H * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut rgb, (W, H)).into_drawing_area();
            self.draw(&root)?;
        }
        encode_png(&rgb, W, H)
    }
}

const W: u32 = 880;
const H: u32 = 600;
/// The colour bar's width, taken from the right of the picture.
const BAR_WIDTH: u32 = 96;
/// Above this many columns or rows a cell is too small for its value.
const MAX_LABELLED: usize = 24;

/// A value as a cell and the colour bar show it: three significant
/// decimals for ratios, fewer for large numbers.
fn cell_value(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> Heatmap {
        Heatmap {
            x: "fast".into(),
            y: "slow".into(),
            xs: vec![json!(5), json!(10)],
            ys: vec![json!(30), json!(40)],
            grid: vec![vec![Some(0.0), Some(1.0)], vec![None, Some(0.5)]],
            metric: "sharpe".into(),
            out_of_sample: true,
        }
    }

    #[test]
    fn braille_levels_follow_the_values() {
        assert_eq!(dots(0), '\u{2800}');
        assert_eq!(dots(8), '\u{28ff}');
        let text = map().braille();
        let rows: Vec<&str> = text.lines().collect();
        // The y axis named above its values, highest first: slow 40 has no
        // value at fast 5.
        assert_eq!(rows[1], "slow ↑", "{text}");
        assert_eq!(rows[2], format!("  40 ·{}", dots(4)), "{text}");
        assert_eq!(rows[3], format!("  30 {}{}", dots(0), dots(8)), "{text}");
        // The x axis's name with its own range, never the y's name beside
        // the x's values ("slow 5 … 10 (fast)" read as slow's range).
        assert_eq!(rows[4], "     fast → (5 … 10)", "{text}");
        assert!(!text.contains("slow 5"), "{text}");
    }

    /// A 400 × 400 grid renders in linear time: the range was once
    /// recomputed for every cell, 160,000 passes over 160,000 values.
    #[test]
    fn a_large_grid_renders_in_linear_time() {
        let n = 400;
        let m = Heatmap {
            xs: (0..n).map(|i| json!(i)).collect(),
            ys: (0..n).map(|j| json!(j)).collect(),
            grid: (0..n)
                .map(|j| (0..n).map(|i| Some((i * n + j) as f64)).collect())
                .collect(),
            ..map()
        };
        let started = std::time::Instant::now();
        let text = m.braille();
        assert!(text.starts_with("sharpe"), "{}", &text[..80]);
        assert!(text.contains(dots(8)) && text.contains(dots(0)));
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(3), "{took:?}");
    }

    #[test]
    fn svg_and_png_draw() {
        let m = map();
        let svg = m.svg().unwrap();
        assert!(svg.contains("<svg") && svg.contains("fast"));
        // The values in their cells (a missing cell has none) ...
        for v in ["\n0.00\n", "\n1.00\n", "\n0.50\n"] {
            assert!(svg.contains(v), "{v} not in the cells: {svg}");
        }
        // ... and the colour bar: its scale from the lowest colour to the
        // highest, captioned with the metric.
        assert!(svg.contains("\nsharpe\n"), "{svg}");
        assert!(
            svg.contains("#440154") && svg.contains("#FDE725"),
            "both ends of the scale"
        );
        assert!(
            svg.contains("\n0.20\n") && svg.contains("\n0.80\n"),
            "the bar's labels"
        );
        let png = m.png().unwrap();
        assert_eq!(&png[..4], b"\x89PNG");
    }
}
