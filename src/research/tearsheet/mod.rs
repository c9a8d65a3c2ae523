//! The tear sheet (docs §20.1): everything a quant reads to judge a daily
//! return series at a glance — quantstats' full metric set, the monthly and
//! annual tables, the worst drawdown periods, the underwater curve, rolling
//! statistics, the return distribution and, where positions exist, exposure
//! and turnover. Pure: plain columns in, one [`TearSheet`] out; the report
//! writers (`report`) and the workstation's view (`tui::tearsheet`) only
//! render it.

mod calc;
mod distribution;
mod drawdown;
mod load;
mod metrics;
mod positions;
mod prep;
mod series;
mod tables;
#[cfg(test)]
mod tests;
mod types;

pub use load::from_run_dir;
pub use types::*;

use chrono::NaiveDate;

/// Why a tear sheet cannot be computed or its input read.
#[derive(Debug, thiserror::Error)]
pub enum TearSheetError {
    #[error("{what}: {got} values for {expected} dates")]
    Length {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("the dates are not strictly increasing at {0}")]
    Unsorted(NaiveDate),
    #[error("no day has a return")]
    Empty,
    #[error("bad option: {0}")]
    Option(&'static str),
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {why}")]
    Format { path: String, why: String },
}

/// The rolling windows: 6 and 12 months of trading days.
pub const ROLLING_WINDOWS: [usize; 2] = [126, 252];

/// The whole tear sheet of `input` (docs §20.1).
pub fn compute(input: &TearSheetInput) -> Result<TearSheet, TearSheetError> {
    let p = prep::prepare(input)?;
    let view = metrics::View::new(&p, &p.r);
    let bench_view = p.b.as_deref().map(|b| metrics::View::new(&p, b));
    let strategy_rows = metrics::all(&view, p.b.as_deref().map(Some));
    let bench_rows = bench_view.as_ref().map(|v| metrics::all(v, Some(None)));
    let metrics = metrics::join(strategy_rows, bench_rows);
    let (Some(start), Some(end)) = (p.dates.first().copied(), p.dates.last().copied()) else {
        return Err(TearSheetError::Empty);
    };
    let drawdowns: Vec<DrawdownPeriod> =
        drawdown::worst_first(drawdown::periods(&p.dates, &view.dd))
            .into_iter()
            .take(input.options.top_drawdowns)
            .collect();
    Ok(TearSheet {
        title: input.title.clone(),
        start,
        end,
        assumptions: assumptions(input, &p),
        metrics,
        monthly: tables::monthly(&p.dates, &p.r),
        annual: tables::annual(&p.dates, &p.r, p.b.as_deref()),
        drawdowns,
        series: curves(input, &p),
        distribution: distribution::all(&p.dates, &p.r, input.options.histogram_bins),
        positions: input
            .positions
            .as_ref()
            .map(|pos| positions::stats(pos, p.ppy)),
    })
}

/// The curves on every input date (a gap carries the previous value);
/// the rolling statistics on the days with a return, spread back.
fn curves(input: &TearSheetInput, p: &prep::Prepared) -> Series {
    let equity = series::equity(&input.returns);
    let benchmark_equity = input.benchmark.as_ref().map(|b| series::equity(&b.returns));
    let underwater_days = drawdown::underwater(&p.r);
    let excess = p.excess(&p.r);
    let mut rolling = Vec::new();
    for w in ROLLING_WINDOWS {
        rolling.extend(series::rolling_single(&excess, w, p.ppy));
        if let Some(b) = &p.b {
            rolling.push(series::rolling_beta(&p.r, b, w));
        }
    }
    // Back onto every input date: a gap repeats the last value.
    let mut underwater = Vec::with_capacity(input.dates.len());
    let mut idx = Vec::with_capacity(input.dates.len());
    let mut k: Option<usize> = None;
    for r in &input.returns {
        if r.is_finite() {
            k = Some(k.map_or(0, |k| k + 1));
        }
        idx.push(k);
        underwater.push(
            k.and_then(|k| underwater_days.get(k).copied())
                .unwrap_or(0.0),
        );
    }
    if idx.len() != p.r.len() {
        for roll in &mut rolling {
            let vals = std::mem::take(&mut roll.values);
            roll.values = idx
                .iter()
                .map(|k| k.and_then(|k| vals.get(k).copied().flatten()))
                .collect();
        }
    }
    Series {
        dates: input.dates.clone(),
        equity,
        benchmark_equity,
        underwater,
        rolling,
    }
}

/// The conventions the numbers rest on, for the report's reader.
fn assumptions(input: &TearSheetInput, p: &prep::Prepared) -> Vec<String> {
    let mut out = vec![format!(
        "{} periods a year; daily simple returns, compounded",
        p.ppy
    )];
    out.push(match &input.risk_free {
        Some(rf) if p.has_rf => format!(
            "risk-free rate: {} (Sharpe, Sortino, Omega and their kin use excess returns)",
            rf.source
        ),
        _ => "risk-free rate: zero".to_string(),
    });
    let gaps = input.returns.len() - p.r.len();
    if gaps > 0 {
        out.push(format!(
            "{gaps} days without a return are left out of every statistic"
        ));
    }
    out.push(match &input.benchmark {
        Some(b) => format!("benchmark: {}", b.name),
        None => "no benchmark".to_string(),
    });
    out.push("drawdowns from a starting value of 1 the day before the first return".to_string());
    out
}
