//! A tear sheet built by hand for the writers' tests: a seeded-looking
//! wave of returns, its equity, underwater curve, monthly table and a few
//! metrics, so the writers are tested without the computation.

use chrono::{Datelike, NaiveDate};

use crate::research::tearsheet::*;

pub(crate) fn sheet(n: usize) -> TearSheet {
    let d0 = NaiveDate::from_ymd_opt(2014, 2, 25).unwrap_or_default();
    let dates: Vec<NaiveDate> = d0
        .iter_days()
        .filter(|d| d.weekday().num_days_from_monday() < 5)
        .take(n)
        .collect();
    let returns: Vec<f64> = (0..n)
        .map(|i| 0.0004 + 0.01 * ((i as f64) * 0.7).sin() * ((i as f64) * 0.013).cos())
        .collect();
    let mut equity = Vec::with_capacity(n);
    let mut underwater = Vec::with_capacity(n);
    let (mut e, mut peak) = (1.0f64, 1.0f64);
    for r in &returns {
        e *= 1.0 + r;
        peak = peak.max(e);
        equity.push(e);
        underwater.push(e / peak - 1.0);
    }
    let bench: Vec<f64> = equity.iter().map(|x| 0.5 + x * 0.5).collect();
    let mut monthly = MonthlyTable::default();
    for (d, r) in dates.iter().zip(&returns) {
        if monthly.years.last() != Some(&d.year()) {
            monthly.years.push(d.year());
            monthly.cells.push([None; 12]);
            monthly.year.push(Some(0.0));
        }
        if let (Some(row), Some(y)) = (monthly.cells.last_mut(), monthly.year.last_mut()) {
            let m = d.month0() as usize;
            row[m] = Some((1.0 + row[m].unwrap_or(0.0)) * (1.0 + r) - 1.0);
            *y = y.map(|y| (1.0 + y) * (1.0 + r) - 1.0);
        }
    }
    let annual = monthly
        .years
        .iter()
        .zip(&monthly.year)
        .map(|(y, v)| AnnualRow {
            year: *y,
            strategy: v.unwrap_or(0.0),
            benchmark: Some(v.unwrap_or(0.0) / 2.0),
        })
        .collect();
    let metric = |key: &str, name: &str, unit, value: Option<f64>| Metric {
        key: key.into(),
        name: name.into(),
        unit,
        value,
        benchmark: value.map(|v| v / 2.0),
        note: None,
    };
    let total = equity.last().copied().unwrap_or(1.0) - 1.0;
    let rolling = |statistic: &str, window: usize| Rolling {
        statistic: statistic.into(),
        window,
        values: (0..n)
            .map(|i| (i + 1 >= window).then(|| ((i as f64) * 0.01).sin()))
            .collect(),
    };
    TearSheet {
        title: "fixture".into(),
        start: dates.first().copied().unwrap_or(d0),
        end: dates.last().copied().unwrap_or(d0),
        assumptions: vec!["252 periods a year".into(), "risk-free: zero".into()],
        metrics: vec![
            metric(
                "cumulative_return",
                "Cumulative Return",
                Unit::Percent,
                Some(total),
            ),
            metric("sharpe", "Sharpe", Unit::Ratio, Some(1.234_567_890_123)),
            metric("max_drawdown", "Max Drawdown", Unit::Percent, Some(-0.1234)),
            metric("omega", "Omega", Unit::Ratio, None),
        ],
        monthly,
        annual,
        drawdowns: vec![DrawdownPeriod {
            start: d0,
            trough: d0,
            end: d0,
            recovery: None,
            depth: -0.1234,
            days: 40,
        }],
        series: Series {
            dates,
            equity,
            benchmark_equity: Some(bench),
            underwater,
            rolling: vec![
                rolling("sharpe", 126),
                rolling("sharpe", 252),
                rolling("volatility", 126),
            ],
        },
        distribution: vec![Distribution {
            period: Period::Day,
            count: n,
            quantiles: vec![(0.05, -0.015), (0.5, 0.0), (0.95, 0.016)],
            edges: vec![-0.02, -0.01, 0.0, 0.01, 0.02],
            counts: vec![n / 8, n / 3, n / 3, n / 8],
        }],
        positions: None,
    }
}
