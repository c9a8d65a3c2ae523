//! quantstats' `reports.metrics(mode="full")` rows, in its order and with
//! its labels, from the prepared days (docs §20.1). Each row is computed
//! for the strategy and, under the same definition, for the benchmark;
//! the rows that compare the two (R², information ratio, beta, alpha,
//! correlation, Treynor) have no benchmark value.

use chrono::{Datelike, Months, NaiveDate};

use super::calc::{
    autocorr_penalty, cagr, comp, cov_var, gaussian_es, gaussian_var, kurtosis, mean, mean_where,
    ncdf, opt, skew, std, sum,
};
use super::drawdown::{periods, underwater};
use super::prep::{Group, Prepared, compound_runs, runs, sum_runs};
use super::{Metric, Unit};
use crate::research::stats::quantile_sorted;

/// One series' days and what the metrics need of it.
pub(crate) struct View<'a> {
    pub dates: &'a [NaiveDate],
    pub r: &'a [f64],
    /// Excess returns r − rf.
    pub x: Vec<f64>,
    pub rf: &'a [f64],
    pub ppy: f64,
    pub dd: Vec<f64>,
    /// The returns sorted, for the quantiles.
    sorted: Vec<f64>,
    months: Vec<f64>,
    quarters: Vec<f64>,
    years: Vec<f64>,
    month_sums: Vec<f64>,
}

impl<'a> View<'a> {
    pub(crate) fn new(p: &'a Prepared, r: &'a [f64]) -> Self {
        let m = runs(&p.dates, Group::Month);
        let mut sorted = r.to_vec();
        sorted.sort_by(f64::total_cmp);
        View {
            sorted,
            dates: &p.dates,
            r,
            x: p.excess(r),
            rf: &p.rf,
            ppy: p.ppy,
            dd: underwater(r),
            months: compound_runs(r, &m),
            quarters: compound_runs(r, &runs(&p.dates, Group::Quarter)),
            years: compound_runs(r, &runs(&p.dates, Group::Year)),
            month_sums: sum_runs(r, &m),
        }
    }
}

/// A row before the benchmark's value joins it.
pub(crate) struct Row {
    pub key: &'static str,
    pub name: &'static str,
    pub unit: Unit,
    pub value: f64,
    pub note: Option<&'static str>,
}

fn row(key: &'static str, name: &'static str, unit: Unit, value: f64) -> Row {
    Row {
        key,
        name,
        unit,
        value,
        note: None,
    }
}

fn noted(mut r: Row, note: &'static str) -> Row {
    r.note = Some(note);
    r
}

const P: Unit = Unit::Percent;
const R: Unit = Unit::Ratio;
const C: Unit = Unit::Count;

/// The share of values above zero among the non-zero ones.
fn win_rate(x: &[f64]) -> f64 {
    let nz = x.iter().filter(|v| **v != 0.0).count();
    if nz == 0 {
        return 0.0;
    }
    x.iter().filter(|v| **v > 0.0).count() as f64 / nz as f64
}

fn exposure(x: &[f64]) -> f64 {
    if x.is_empty() {
        return 0.0;
    }
    x.iter().filter(|v| **v != 0.0).count() as f64 / x.len() as f64
}

fn payoff(x: &[f64]) -> f64 {
    let loss = mean_where(x, |v| v < 0.0);
    if loss == 0.0 {
        return f64::NAN;
    }
    mean_where(x, |v| v > 0.0) / loss.abs()
}

fn profit_factor(x: &[f64]) -> f64 {
    let wins: f64 = x.iter().filter(|v| **v >= 0.0).sum();
    let losses: f64 = x.iter().filter(|v| **v < 0.0).sum::<f64>().abs();
    if losses == 0.0 {
        return if wins == 0.0 { 0.0 } else { f64::INFINITY };
    }
    wins / losses
}

fn tail_ratio(sorted: &[f64]) -> f64 {
    let (hi, lo) = (quantile_sorted(sorted, 0.95), quantile_sorted(sorted, 0.05));
    if lo == 0.0 || lo.is_nan() {
        return f64::NAN;
    }
    (hi / lo).abs()
}

fn sharpe(x: &[f64]) -> f64 {
    mean(x) / std(x)
}

fn sortino(x: &[f64]) -> f64 {
    let down = (x.iter().filter(|v| **v < 0.0).map(|v| v * v).sum::<f64>() / x.len() as f64).sqrt();
    if down == 0.0 {
        f64::NAN
    } else {
        mean(x) / down
    }
}

fn longest_run(x: &[f64], hit: impl Fn(f64) -> bool) -> f64 {
    let (mut best, mut cur) = (0usize, 0usize);
    for v in x {
        cur = if hit(*v) { cur + 1 } else { 0 };
        best = best.max(cur);
    }
    best as f64
}

/// The returns on or after `from`.
fn since<'b>(dates: &[NaiveDate], r: &'b [f64], from: Option<NaiveDate>) -> &'b [f64] {
    let Some(from) = from else { return &[] };
    let i = dates.partition_point(|d| *d < from);
    r.get(i..).unwrap_or(&[])
}

/// Start Period … Omega, Max Drawdown and Longest DD Days.
pub(crate) fn head(v: &View) -> Vec<Row> {
    let ann = v.ppy.sqrt();
    let rf_rate = (1.0 + comp(v.rf)).powf(v.ppy / v.rf.len().max(1) as f64) - 1.0;
    let sr = sharpe(&v.x);
    let pen = autocorr_penalty(&v.x);
    let so = sortino(&v.x);
    let n = v.r.len() as f64;
    let (sk, ku) = (skew(v.r), kurtosis(v.r) + 3.0);
    let sigma_sr = ((1.0 - sk * sr + (ku - 1.0) / 4.0 * sr * sr) / (n - 1.0)).sqrt();
    let omega = {
        let up: f64 = v.x.iter().filter(|x| **x > 0.0).sum();
        let down: f64 = -v.x.iter().filter(|x| **x < 0.0).sum::<f64>();
        if down > 0.0 && v.x.len() >= 2 {
            up / down
        } else {
            f64::NAN
        }
    };
    let periods = periods(v.dates, &v.dd);
    let max_dd = v.dd.iter().copied().fold(0.0, f64::min);
    let longest = periods
        .iter()
        .map(|p| p.days)
        .max()
        .map_or(f64::NAN, |d| d as f64);
    vec![
        noted(
            row("risk_free_rate", "Risk-Free Rate", P, rf_rate),
            "the compounded daily T-bill rate, annualised; quantstats shows the scalar rate it is given",
        ),
        noted(
            row("time_in_market", "Time in Market", P, exposure(v.r)),
            "the exact share of days with a non-zero return; quantstats rounds it up to a whole percent",
        ),
        row("cumulative_return", "Cumulative Return", P, comp(v.r)),
        // quantstats' label is "CAGR﹪", a small percent sign many fonts
        // lack and terminals draw double-width.
        row("cagr", "CAGR", P, cagr(v.r, v.ppy)),
        row("sharpe", "Sharpe", R, sr * ann),
        row(
            "prob_sharpe_ratio",
            "Prob. Sharpe Ratio",
            P,
            ncdf(sr / sigma_sr),
        ),
        row("smart_sharpe", "Smart Sharpe", R, sr / pen * ann),
        row("sortino", "Sortino", R, so * ann),
        row("smart_sortino", "Smart Sortino", R, so / pen * ann),
        row("sortino_sqrt2", "Sortino/√2", R, so * ann / 2f64.sqrt()),
        row(
            "smart_sortino_sqrt2",
            "Smart Sortino/√2",
            R,
            so / pen * ann / 2f64.sqrt(),
        ),
        row("omega", "Omega", R, omega),
        row("max_drawdown", "Max Drawdown", P, max_dd),
        row("longest_dd_days", "Longest DD Days", C, longest),
    ]
}

/// Volatility … Expected Shortfall, with R² and the information ratio
/// after the volatility when `bench` is given.
pub(crate) fn risk(v: &View, bench: Option<Option<&[f64]>>) -> Vec<Row> {
    let r = v.r;
    let (mu, sd) = (mean(r), std(r));
    let max_dd = v.dd.iter().copied().fold(0.0, f64::min);
    let ulcer = (v.dd.iter().map(|d| d * d).sum::<f64>() / (r.len() as f64 - 1.0)).sqrt();
    let rf_total = comp(v.rf);
    let wins = win_rate(r);
    let po = payoff(r);
    let mut out = vec![row("volatility", "Volatility (ann.)", P, sd * v.ppy.sqrt())];
    if let Some(b) = bench {
        let (r2, ir) = b.map_or((f64::NAN, f64::NAN), |b| relative_fit(r, b));
        out.push(row("r_squared", "R^2", R, r2));
        out.push(noted(
            row("information_ratio", "Information Ratio", R, ir),
            "per day, not annualised, as quantstats",
        ));
    }
    let profit_ratio = {
        let (w, l) = (
            r.iter().filter(|x| **x >= 0.0).count(),
            r.iter().filter(|x| **x < 0.0).count(),
        );
        if w == 0 {
            0.0
        } else {
            let wr = (mean_where(r, |x| x >= 0.0) / w as f64).abs();
            let lr = (mean_where(r, |x| x < 0.0) / l as f64).abs();
            if l == 0 || lr == 0.0 {
                f64::NAN
            } else {
                wr / lr
            }
        }
    };
    let expected = |x: &[f64]| (1.0 + comp(x)).powf(1.0 / x.len() as f64) - 1.0;
    out.extend([
        row("calmar", "Calmar", R, cagr(r, v.ppy) / max_dd.abs()),
        row("skew", "Skew", R, skew(r)),
        row("kurtosis", "Kurtosis", R, kurtosis(r)),
        noted(
            row(
                "ulcer_performance_index",
                "Ulcer Performance Index",
                R,
                (comp(r) - rf_total) / ulcer,
            ),
            "the cumulative return less the compounded T-bill over the same days, over the ulcer index",
        ),
        noted(
            row(
                "risk_adjusted_return",
                "Risk-Adjusted Return",
                P,
                cagr(&v.x, v.ppy) / exposure(&v.x),
            ),
            "CAGR of excess returns over the exact time in market",
        ),
        row("risk_return_ratio", "Risk-Return Ratio", R, mu / sd),
        row("avg_return", "Avg. Return", P, mean_where(r, |x| x != 0.0)),
        row("avg_win", "Avg. Win", P, mean_where(r, |x| x > 0.0)),
        row("avg_loss", "Avg. Loss", P, mean_where(r, |x| x < 0.0)),
        row("win_loss_ratio", "Win/Loss Ratio", R, po),
        row("profit_ratio", "Profit Ratio", R, profit_ratio),
        row("expected_daily", "Expected Daily", P, expected(r)),
        row("expected_monthly", "Expected Monthly", P, expected(&v.months)),
        row("expected_yearly", "Expected Yearly", P, expected(&v.years)),
        row("kelly_criterion", "Kelly Criterion", P, (po * wins - (1.0 - wins)) / po),
        row(
            "risk_of_ruin",
            "Risk of Ruin",
            P,
            ((1.0 - wins) / (1.0 + wins)).powf(r.len() as f64),
        ),
        row("daily_var", "Daily Value-at-Risk", P, -gaussian_var(mu, sd, 0.05).abs()),
        row("cvar", "Expected Shortfall (cVaR)", P, -gaussian_es(mu, sd, 0.05).abs()),
    ]);
    out
}

/// R² of the regression of `r` on `b` and the daily information ratio.
fn relative_fit(r: &[f64], b: &[f64]) -> (f64, f64) {
    let (c, vr, vb) = cov_var(r, b);
    let r2 = c * c / (vr * vb);
    let diff: Vec<f64> = r.iter().zip(b).map(|(x, y)| x - y).collect();
    let sd = std(&diff);
    let ir = if sd != 0.0 { mean(&diff) / sd } else { 0.0 };
    (r2, ir)
}

/// Max Consecutive Wins … Outlier Loss Ratio.
pub(crate) fn trades(v: &View) -> Vec<Row> {
    let r = v.r;
    let gain_pain = |x: &[f64]| {
        let down = x.iter().filter(|v| **v < 0.0).sum::<f64>().abs();
        if down == 0.0 { f64::NAN } else { sum(x) / down }
    };
    let pf = profit_factor(r);
    let tail = tail_ratio(&v.sorted);
    let outlier = |q: f64, m: f64| {
        if m == 0.0 {
            f64::NAN
        } else {
            quantile_sorted(&v.sorted, q) / m
        }
    };
    vec![
        row(
            "max_consecutive_wins",
            "Max Consecutive Wins",
            C,
            longest_run(r, |x| x > 0.0),
        ),
        row(
            "max_consecutive_losses",
            "Max Consecutive Losses",
            C,
            longest_run(r, |x| x < 0.0),
        ),
        row("gain_pain_ratio", "Gain/Pain Ratio", R, gain_pain(r)),
        row(
            "gain_pain_1m",
            "Gain/Pain (1M)",
            R,
            gain_pain(&v.month_sums),
        ),
        row("payoff_ratio", "Payoff Ratio", R, payoff(r)),
        row("profit_factor", "Profit Factor", R, pf),
        row("common_sense_ratio", "Common Sense Ratio", R, pf * tail),
        row("cpc_index", "CPC Index", R, pf * win_rate(r) * payoff(r)),
        row("tail_ratio", "Tail Ratio", R, tail),
        row(
            "outlier_win_ratio",
            "Outlier Win Ratio",
            R,
            outlier(0.99, mean_where(r, |x| x >= 0.0)),
        ),
        row(
            "outlier_loss_ratio",
            "Outlier Loss Ratio",
            R,
            outlier(0.01, mean_where(r, |x| x < 0.0)),
        ),
    ]
}

/// MTD … All-time (ann.), counted back from the last date.
pub(crate) fn trailing(v: &View) -> Vec<Row> {
    let (d, r, ppy) = (v.dates, v.r, v.ppy);
    let Some(today) = d.last().copied() else {
        return Vec::new();
    };
    let back = |m: u32| today.checked_sub_months(Months::new(m));
    let ytd = NaiveDate::from_ymd_opt(today.year(), 1, 1);
    vec![
        row("mtd", "MTD", P, comp(since(d, r, today.with_day(1)))),
        row("3m", "3M", P, comp(since(d, r, back(3)))),
        row("6m", "6M", P, comp(since(d, r, back(6)))),
        row("ytd", "YTD", P, comp(since(d, r, ytd))),
        row("1y", "1Y", P, comp(since(d, r, back(12)))),
        row("3y_ann", "3Y (ann.)", P, cagr(since(d, r, back(35)), ppy)),
        row("5y_ann", "5Y (ann.)", P, cagr(since(d, r, back(59)), ppy)),
        row(
            "10y_ann",
            "10Y (ann.)",
            P,
            cagr(since(d, r, back(119)), ppy),
        ),
        row("all_time_ann", "All-time (ann.)", P, cagr(r, ppy)),
    ]
}

fn max(x: &[f64]) -> f64 {
    x.iter().copied().fold(f64::NAN, f64::max)
}

fn min(x: &[f64]) -> f64 {
    x.iter().copied().fold(f64::NAN, f64::min)
}

/// Best Day … Win Year.
pub(crate) fn extremes(v: &View) -> Vec<Row> {
    let r = v.r;
    let periods = periods(v.dates, &v.dd);
    let n_dd = periods.len() as f64;
    let avg_dd = periods.iter().map(|p| p.depth).sum::<f64>() / n_dd;
    let avg_days = (periods.iter().map(|p| p.days as f64).sum::<f64>() / n_dd).round_ties_even();
    let max_dd = v.dd.iter().copied().fold(0.0, f64::min);
    let ulcer = (v.dd.iter().map(|d| d * d).sum::<f64>() / (r.len() as f64 - 1.0)).sqrt();
    let pitfall = -gaussian_es(mean(&v.dd), std(&v.dd), 0.05) / std(r);
    let serenity = (sum(r) - sum(v.rf)) / (ulcer * pitfall);
    vec![
        row("best_day", "Best Day", P, max(r)),
        row("worst_day", "Worst Day", P, min(r)),
        row("best_month", "Best Month", P, max(&v.months)),
        row("worst_month", "Worst Month", P, min(&v.months)),
        row("best_year", "Best Year", P, max(&v.years)),
        row("worst_year", "Worst Year", P, min(&v.years)),
        row("avg_drawdown", "Avg. Drawdown", P, avg_dd),
        noted(
            row("avg_drawdown_days", "Avg. Drawdown Days", C, avg_days),
            "rounded half to even, as quantstats",
        ),
        noted(
            row(
                "recovery_factor",
                "Recovery Factor",
                R,
                sum(r).abs() / max_dd.abs(),
            ),
            "the sum of daily returns (not compounded) over the max drawdown, as quantstats",
        ),
        row("ulcer_index", "Ulcer Index", R, ulcer),
        row("serenity_index", "Serenity Index", R, serenity),
        row(
            "avg_up_month",
            "Avg. Up Month",
            P,
            mean_where(&v.months, |x| x > 0.0),
        ),
        row(
            "avg_down_month",
            "Avg. Down Month",
            P,
            mean_where(&v.months, |x| x < 0.0),
        ),
        row("win_days", "Win Days", P, win_rate(r)),
        row("win_month", "Win Month", P, win_rate(&v.months)),
        row("win_quarter", "Win Quarter", P, win_rate(&v.quarters)),
        row("win_year", "Win Year", P, win_rate(&v.years)),
    ]
}

/// Beta, Alpha, Correlation and the Treynor ratio of `r` against `b`.
pub(crate) fn greeks(v: &View, b: &[f64]) -> Vec<Row> {
    let r = v.r;
    let (c, vr, vb) = cov_var(r, b);
    let beta = if vb == 0.0 { f64::NAN } else { c / vb };
    let alpha = (mean(r) - beta * mean(b)) * v.ppy;
    let treynor = if beta == 0.0 {
        f64::NAN
    } else {
        (comp(r) - comp(v.rf)) / beta
    };
    vec![
        row("beta", "Beta", R, beta),
        row("alpha", "Alpha", R, alpha),
        row("correlation", "Correlation", P, c / (vr * vb).sqrt()),
        noted(
            row("treynor_ratio", "Treynor Ratio", P, treynor),
            "the cumulative (not annualised) return less the compounded T-bill, over beta, as quantstats",
        ),
    ]
}

/// Every row for the series `v`; `bench` is `Some` when a benchmark is
/// given (`Some(Some(b))` for the strategy, `Some(None)` for the
/// benchmark's own column).
pub(crate) fn all(v: &View, bench: Option<Option<&[f64]>>) -> Vec<Row> {
    let mut out = head(v);
    out.extend(risk(v, bench));
    out.extend(trades(v));
    out.extend(trailing(v));
    out.extend(extremes(v));
    match bench {
        Some(Some(b)) => out.extend(greeks(v, b)),
        Some(None) => out.extend(greeks(v, &[]).into_iter().map(|mut r| {
            r.value = f64::NAN;
            r
        })),
        None => {}
    }
    out
}

/// The strategy's rows joined with the benchmark's.
pub(crate) fn join(strategy: Vec<Row>, bench: Option<Vec<Row>>) -> Vec<Metric> {
    let mut bench = bench.map(Vec::into_iter);
    strategy
        .into_iter()
        .map(|s| {
            let b = bench.as_mut().and_then(Iterator::next);
            Metric {
                key: s.key.to_string(),
                name: s.name.to_string(),
                unit: s.unit,
                value: opt(s.value),
                benchmark: b.and_then(|b| opt(b.value)),
                note: s.note.map(str::to_string),
            }
        })
        .collect()
}
