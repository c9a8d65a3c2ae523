//! Charts of every backtest (issue 9): equity (with the benchmark) over the
//! drawdown, as SVG and PNG, drawn with `plotters` and the DejaVu Sans font
//! shipped in `assets/fonts` (with the `ab_glyph` backend no font exists
//! until one is registered). Plus pure helpers for the terminal: points for
//! ratatui's `Chart` widget and a block sparkline.
//!
//! Long series are decimated (min and max per bucket, in order) so the SVG
//! stays small and the lines keep their extremes.

use std::sync::OnceLock;

use chrono::{Datelike, NaiveDate};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

/// DejaVu Sans (Bitstream Vera licence; see NOTICE).
static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

pub(crate) const WIDTH: u32 = 960;
pub(crate) const HEIGHT: u32 = 600;
/// Decimals of the SVG chart's axis labels below 100 (see [`compact`]).
pub(crate) const SVG_SMALL_DECIMALS: usize = 0;
/// Points per series at most after decimation.
const MAX_POINTS: usize = 1_600;

/// Registers the font once; false when it cannot be read (the chart then
/// fails with an error instead of panicking inside plotters).
pub fn font_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    })
}

/// What a chart shows.
#[derive(Clone, Debug)]
pub struct ChartData<'a> {
    pub title: String,
    pub dates: &'a [NaiveDate],
    pub equity: &'a [f64],
    pub benchmark: Option<&'a [f64]>,
    /// What the benchmark is (`SPY`, `equal_weight`), for the legend.
    pub benchmark_label: &'a str,
    pub drawdown: &'a [f64],
}

/// Indices to keep: the first, the last, and each bucket's min and max.
pub(crate) fn decimate(values: &[f64], max_points: usize) -> Vec<usize> {
    let n = values.len();
    if n <= max_points || max_points < 4 {
        return (0..n).collect();
    }
    let buckets = max_points / 2;
    let mut out = Vec::with_capacity(max_points + 2);
    for b in 0..buckets {
        let a = b * n / buckets;
        let z = ((b + 1) * n / buckets).max(a + 1);
        let (mut lo, mut hi) = (a, a);
        for i in a..z {
            if values[i] < values[lo] {
                lo = i;
            }
            if values[i] > values[hi] {
                hi = i;
            }
        }
        let (x, y) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        out.push(x);
        if y != x {
            out.push(y);
        }
    }
    if out.last() != Some(&(n - 1)) {
        out.push(n - 1);
    }
    out
}

/// An axis label: 1234567 → "1.23M", 45678 → "45.7k", 1234 → "1234";
/// below 100 with `decimals_below_100` decimals. The SVG chart uses 0
/// ([`SVG_SMALL_DECIMALS`]); the workstation keeps 2, since its axis has only
/// three labels, which whole numbers would make read alike on a curve of
/// small values (0.95 … 1.20).
pub(crate) fn compact(y: f64, decimals_below_100: usize) -> String {
    let a = y.abs();
    if a >= 1e9 {
        format!("{:.2}B", y / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", y / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", y / 1e3)
    } else if a >= 100.0 {
        format!("{y:.0}")
    } else {
        format!("{y:.decimals_below_100$}")
    }
}

/// Month steps a date axis may take, smallest first: a tick every month,
/// quarter, half year, year, and then every few years.
const TICK_MONTHS: [u32; 10] = [1, 2, 3, 6, 12, 24, 60, 120, 240, 600];

/// At most `max_ticks` ticks on calendar boundaries (docs §20.4): each at
/// the first trading day of a month (every 1, 2, 3 or 6 months, labelled
/// `2004-03`) or of a year (every 1, 2, 5, … years, labelled `2004`),
/// as `(index into dates, label)`. The first date is a boundary only when
/// it is the 1st. A series within one month gets its first and last dates.
pub fn date_ticks(dates: &[NaiveDate], max_ticks: usize) -> Vec<(usize, String)> {
    let month_no = |d: &NaiveDate| d.year() as i64 * 12 + d.month0() as i64;
    let boundaries: Vec<usize> = dates
        .iter()
        .enumerate()
        .filter(|(i, d)| match i.checked_sub(1).and_then(|p| dates.get(p)) {
            Some(prev) => month_no(prev) != month_no(d),
            None => d.day() == 1,
        })
        .map(|(i, _)| i)
        .collect();
    if boundaries.is_empty() {
        let mut ends: Vec<usize> = vec![0, dates.len().saturating_sub(1)];
        ends.dedup();
        return ends
            .into_iter()
            .filter_map(|i| dates.get(i).map(|d| (i, d.to_string())))
            .take(max_ticks.max(1))
            .collect();
    }
    let on_step = |i: &usize, step: u32| {
        dates
            .get(*i)
            .is_some_and(|d| month_no(d).rem_euclid(i64::from(step)) == 0)
    };
    let step = TICK_MONTHS
        .iter()
        .copied()
        .find(|&s| boundaries.iter().filter(|i| on_step(i, s)).count() <= max_ticks.max(1))
        .unwrap_or(600);
    boundaries
        .iter()
        .filter(|i| on_step(i, step))
        .filter_map(|&i| {
            let d = dates.get(i)?;
            let label = if step < 12 {
                d.format("%Y-%m").to_string()
            } else {
                d.year().to_string()
            };
            Some((i, label))
        })
        .collect()
}

/// The date axis: bar indices as `f64`, with its ticks at [`date_ticks`]'
/// boundaries instead of plotters' evenly spaced ones.
struct DateAxis {
    inner: plotters::coord::types::RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ranged for DateAxis {
    type FormatOption = plotters::coord::ranged1d::NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: plotters::coord::ranged1d::KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

impl plotters::coord::ranged1d::ValueFormatter<f64> for DateAxis {
    /// Only reached without a label formatter, which every chart sets.
    fn format(value: &f64) -> String {
        format!("{value:.0}")
    }
}

fn bounds(series: &[&[f64]]) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for s in series {
        for &v in s.iter() {
            if v.is_finite() {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.05).max(hi.abs() * 1e-6).max(1e-9);
    (lo - pad, hi + pad)
}

/// Why a chart was not drawn.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("the chart font (assets/fonts/DejaVuSans.ttf) cannot be loaded")]
    NoFont,
    /// The drawing backend's error, which is generic over the backend, as
    /// its debug text.
    #[error("{0}")]
    Draw(String),
    #[error("pixel buffer size does not match the image")]
    BufferSize,
    #[error("{0}")]
    Encode(#[from] std::io::Error),
    /// A thread writing artifacts panicked (`what` names it).
    #[error("{0} thread panicked")]
    Panicked(&'static str),
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    d: &ChartData<'_>,
) -> Result<(), ChartError> {
    let e = |x: plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>| {
        ChartError::Draw(format!("{x:?}"))
    };
    root.fill(&WHITE).map_err(e)?;
    let n = d.equity.len();
    let x_max = (n.max(2) - 1) as f64;
    let (top, bottom) = root.split_vertically((HEIGHT as f64 * 0.64) as u32);
    let ticks = date_ticks(&d.dates[..d.dates.len().min(n)], 8);
    let tick_points: Vec<f64> = ticks.iter().map(|(i, _)| *i as f64).collect();
    let date_label = |x: &f64| {
        let i = x.round().max(0.0) as usize;
        ticks
            .iter()
            .find(|(t, _)| *t == i)
            .map(|(_, l)| l.clone())
            .unwrap_or_default()
    };
    let bench = d.benchmark.unwrap_or(&[]);
    let (lo, hi) = bounds(&[d.equity, bench]);
    let mut chart = ChartBuilder::on(&top)
        .caption(&d.title, ("sans-serif", 18))
        .margin(10)
        .margin_right(36)
        .x_label_area_size(22)
        .y_label_area_size(64)
        .build_cartesian_2d(
            DateAxis {
                inner: (0f64..x_max).into(),
                ticks: tick_points.clone(),
            },
            lo..hi,
        )
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_labels(tick_points.len())
        .y_labels(6)
        .x_label_formatter(&date_label)
        .y_label_formatter(&|y| compact(*y, SVG_SMALL_DECIMALS))
        .light_line_style(RGBColor(246, 246, 246))
        .bold_line_style(RGBColor(222, 222, 222))
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(e)?;
    let blue = RGBColor(31, 119, 180);
    let gray = RGBColor(150, 150, 150);
    if !bench.is_empty() {
        let idx = decimate(bench, MAX_POINTS);
        chart
            .draw_series(LineSeries::new(
                idx.iter().map(|&i| (i as f64, bench[i])),
                gray.stroke_width(1),
            ))
            .map_err(e)?
            .label(if d.benchmark_label.is_empty() {
                "benchmark".to_string()
            } else {
                format!("benchmark: {}", d.benchmark_label.replace('_', " "))
            })
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], gray));
    }
    let idx = decimate(d.equity, MAX_POINTS);
    chart
        .draw_series(LineSeries::new(
            idx.iter().map(|&i| (i as f64, d.equity[i])),
            blue.stroke_width(2),
        ))
        .map_err(e)?
        .label("strategy")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], blue));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 12))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(e)?;

    let (dd_lo, _) = bounds(&[d.drawdown]);
    let dd_lo = dd_lo.min(-0.01);
    let mut dd = ChartBuilder::on(&bottom)
        .caption("Drawdown", ("sans-serif", 14))
        .margin(10)
        .margin_right(36)
        .x_label_area_size(22)
        .y_label_area_size(64)
        .build_cartesian_2d(
            DateAxis {
                inner: (0f64..x_max).into(),
                ticks: tick_points.clone(),
            },
            dd_lo..0.0,
        )
        .map_err(e)?;
    dd.configure_mesh()
        .x_labels(tick_points.len())
        .y_labels(4)
        .x_label_formatter(&date_label)
        .y_label_formatter(&|y| format!("{:.0}%", y * 100.0))
        .light_line_style(RGBColor(246, 246, 246))
        .bold_line_style(RGBColor(222, 222, 222))
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(e)?;
    let red = RGBColor(214, 39, 40);
    let idx = decimate(d.drawdown, MAX_POINTS);
    let mut poly: Vec<(f64, f64)> = Vec::with_capacity(idx.len() + 2);
    poly.push((0.0, 0.0));
    poly.extend(idx.iter().map(|&i| (i as f64, d.drawdown[i])));
    poly.push((x_max, 0.0));
    dd.draw_series(std::iter::once(Polygon::new(poly, red.mix(0.25).filled())))
        .map_err(e)?;
    dd.draw_series(LineSeries::new(
        idx.iter().map(|&i| (i as f64, d.drawdown[i])),
        red.stroke_width(1),
    ))
    .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

/// The chart as an SVG document.
pub fn svg(d: &ChartData<'_>) -> Result<String, ChartError> {
    if !font_ready() {
        return Err(ChartError::NoFont);
    }
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, d)?;
    }
    Ok(out)
}

/// The chart as a PNG file's bytes.
pub fn png(d: &ChartData<'_>) -> Result<Vec<u8>, ChartError> {
    if !font_ready() {
        return Err(ChartError::NoFont);
    }
    let mut rgb = vec![0u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, d)?;
    }
    encode_png(&rgb, WIDTH, HEIGHT)
}

/// A minimal PNG encoder (8-bit RGB, filter 0, zlib at the fast level):
/// the flat colours of a chart compress well, and the fast level keeps the
/// whole backtest within its latency budget.
pub(crate) fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, ChartError> {
    use std::io::Write;
    let row = (w * 3) as usize;
    if rgb.len() != row * h as usize {
        return Err(ChartError::BufferSize);
    }
    let mut z = flate2::write::ZlibEncoder::new(
        Vec::with_capacity(rgb.len() / 8),
        flate2::Compression::fast(),
    );
    for line in rgb.chunks_exact(row) {
        z.write_all(&[0])?;
        z.write_all(line)?;
    }
    let idat = z.finish()?;
    let mut out = Vec::with_capacity(idat.len() + 64);
    out.extend_from_slice(b"\x89PNG\r\n\x1a\n");
    let mut chunk = |kind: &[u8; 4], data: &[u8]| {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(data);
        out.extend_from_slice(&crc.sum().to_be_bytes());
    };
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(b"IHDR", &ihdr);
    chunk(b"IDAT", &idat);
    chunk(b"IEND", &[]);
    Ok(out)
}

/// Points for a terminal line chart (ratatui's `Chart`): at most `width`
/// points `(bar index, value)`, each the last value of its bucket, so the
/// final point is the final equity. Non-finite values are skipped.
pub(crate) fn terminal_points(values: &[f64], width: usize) -> Vec<(f64, f64)> {
    let n = values.len();
    if n == 0 || width == 0 {
        return Vec::new();
    }
    if n <= width {
        return values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(|(i, v)| (i as f64, *v))
            .collect();
    }
    (0..width)
        .filter_map(|b| {
            let i = ((b + 1) * n / width).saturating_sub(1);
            values
                .get(i)
                .filter(|v| v.is_finite())
                .map(|v| (i as f64, *v))
        })
        .collect()
}

/// A one-line block sparkline of `values` in `width` cells.
pub(crate) fn sparkline(values: &[f64], width: usize) -> String {
    const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let pts = terminal_points(values, width);
    let (lo, hi) = pts
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (_, v)| {
            (a.min(*v), b.max(*v))
        });
    pts.iter()
        .map(|(_, v)| {
            let f = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
            BLOCKS[((f * 7.0).round() as usize).min(7)]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_helpers_keep_the_end() {
        let v: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        let p = terminal_points(&v, 50);
        assert_eq!(p.len(), 50);
        assert_eq!(p.last(), Some(&(999.0, 999.0)));
        assert_eq!(sparkline(&[1.0, 2.0, 3.0], 3), "▁▅█");
        assert!(terminal_points(&[], 10).is_empty());
    }

    #[test]
    fn compact_labels_differ_only_below_100() {
        for decimals in [SVG_SMALL_DECIMALS, 2] {
            assert_eq!(compact(1_234_567.0, decimals), "1.23M");
            assert_eq!(compact(-2.5e9, decimals), "-2.50B");
            assert_eq!(compact(45_678.0, decimals), "45.7k");
            assert_eq!(compact(1_234.4, decimals), "1234");
        }
        assert_eq!(compact(0.987, SVG_SMALL_DECIMALS), "1");
        assert_eq!(compact(0.987, 2), "0.99");
    }

    #[test]
    fn decimation_keeps_extremes_in_order() {
        let v: Vec<f64> = (0..10_000).map(|i| ((i as f64) / 100.0).sin()).collect();
        let idx = decimate(&v, 200);
        assert!(idx.len() <= 202);
        assert!(idx.windows(2).all(|w| w[0] < w[1]));
        let max = idx.iter().map(|&i| v[i]).fold(f64::MIN, f64::max);
        assert!((max - 1.0).abs() < 1e-3);
    }

    fn day(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    /// Trading days (weekdays) from `from` for `n` days.
    fn weekdays(from: NaiveDate, n: usize) -> Vec<NaiveDate> {
        from.iter_days()
            .filter(|d| d.weekday().num_days_from_monday() < 5)
            .take(n)
            .collect()
    }

    #[test]
    fn date_ticks_fall_on_month_or_year_boundaries() {
        // 2004-02-25 onwards: the old ticks fell on such odd days.
        let dates = weekdays(day(2004, 2, 25), 2_000);
        let ticks = date_ticks(&dates, 8);
        assert!(!ticks.is_empty() && ticks.len() <= 8, "{ticks:?}");
        for (i, label) in &ticks {
            let (d, prev) = (dates[*i], dates[*i - 1]);
            assert_ne!(d.month(), prev.month(), "{d} is not a month's first day");
            // Years apart: the first trading day of January, labelled by year.
            assert_eq!(d.month(), 1, "{ticks:?}");
            assert_eq!(label, &d.year().to_string());
        }
        // A year of data: monthly steps, labelled year-month.
        let dates = weekdays(day(2020, 1, 1), 250);
        let ticks = date_ticks(&dates, 8);
        assert_eq!(ticks[0], (0, "2020-01".to_string()), "{ticks:?}");
        assert!(ticks.len() >= 4 && ticks.len() <= 8, "{ticks:?}");
        for (i, label) in &ticks {
            assert!(*i == 0 || dates[*i - 1].month() != dates[*i].month());
            assert_eq!(label, &dates[*i].format("%Y-%m").to_string());
        }
        // Inside one month: the ends, and never an index out of range.
        let dates = weekdays(day(2020, 3, 3), 5);
        assert_eq!(date_ticks(&dates, 8).len(), 2);
        assert!(date_ticks(&[], 8).is_empty());
    }

    #[test]
    fn svg_and_png_render_with_the_shipped_font() {
        let d0 = NaiveDate::from_ymd_opt(2020, 1, 1).unwrap();
        let dates: Vec<NaiveDate> = (0..300).map(|i| d0 + chrono::Duration::days(i)).collect();
        let eq: Vec<f64> = (0..300)
            .map(|i| 100.0 + (i as f64 / 20.0).sin() * 10.0 + i as f64 * 0.1)
            .collect();
        let dd = super::super::metrics::drawdown_series(&eq, 100.0);
        let data = ChartData {
            title: "T".into(),
            dates: &dates,
            equity: &eq,
            benchmark: Some(&eq),
            benchmark_label: "SPY",
            drawdown: &dd,
        };
        let s = svg(&data).unwrap();
        assert!(s.starts_with("<svg") && s.contains("Drawdown"));
        assert!(s.contains("benchmark: SPY"), "the legend names it");
        // Ticks on month boundaries, not on odd days.
        assert!(s.contains("\n2020-03\n") && !s.contains("2020-01-"), "{s}");
        let p = png(&data).unwrap();
        assert!(p.starts_with(b"\x89PNG\r\n\x1a\n"));
    }
}
