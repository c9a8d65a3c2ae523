//! The time-series tools (docs §16): `stat_test` and `volatility_model`,
//! thin typed layers over [`crate::research::timeseries`].
//!
//! Both are read-only computations. Data comes from the market-data layer
//! (adjusted closes on the dates every symbol has, turned into closes, log
//! closes or simple daily returns) or inline (`series` / `returns`). Every
//! answer names its data, its conventions and its reference.

use std::sync::Arc;

use chrono::NaiveDate;
use serde_json::{Map, Value};

use super::args::{check_returns, check_values, nonempty, opt_usize};
use super::market::{fetch, opt_date};
use super::{Family, ToolEnv, register_family};
use crate::model::names;
use crate::model::stats::*;
use crate::research::data::{DataConfig, DataRequest, MarketData, PriceSeries};
use crate::research::stats::std_dev;
use crate::research::timeseries::{
    self as ts, Autolag, ErrorDist, GarchSpec, JOHANSEN_MAX_SERIES, KpssLags, Trend, TsError,
    engle_granger, ewma, family_inference, fit_family, fit_garch, garch_inference, half_life,
    hurst, jarque_bera, johansen, kpss, ljung_box,
};
use crate::tools::registry::DuplicateTool;
use crate::tools::{Caps, guard};
use crate::tools::{Registry, ToolContext, ToolError, TypedTool};

/// Trading days a year, for annualizing.
const YEAR: f64 = 252.0;
/// Daily returns a volatility model reads by default (ten years).
pub const DEFAULT_VOL_DAYS: usize = 2_520;
/// Longest volatility forecast.
const MAX_HORIZON: usize = 252;
/// Days of the conditional volatility path an answer shows.
const TAIL: usize = 10;
/// Ljung–Box lags by default (statsmodels' `lags=10`).
const LB_LAGS: usize = 10;

/// Registers the two tools, sharing one data service.
pub fn register_stats_tools(
    registry: &mut Registry,
    config: DataConfig,
) -> Result<(), DuplicateTool> {
    register_family(registry, Family::Stats, &ToolEnv::new(config))
}

fn ts_error(e: TsError) -> ToolError {
    match e {
        TsError::NoFit(m) => ToolError::failed("fit_failed", m),
        TsError::Interrupted(i) => ToolError::failed("cancelled", i.to_string()),
        other => ToolError::InvalidArguments(other.to_string()),
    }
}

// ---------------------------------------------------------------------------
// Closes of symbols on their common dates.

/// Named closes on common dates, and where they came from.
struct Closes {
    names: Vec<String>,
    dates: Vec<NaiveDate>,
    columns: Vec<Vec<f64>>,
    data: ReturnsData,
}

async fn load_closes(
    data: &MarketData,
    ctx: &ToolContext,
    symbols: &[String],
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
) -> Result<Closes, ToolError> {
    let mut loaded: Vec<PriceSeries> = Vec::with_capacity(symbols.len());
    for s in symbols {
        let s = nonempty(s, "symbols")?;
        if loaded.iter().any(|l| l.symbol.eq_ignore_ascii_case(s)) {
            return Err(ToolError::InvalidArguments(format!(
                "{s} is listed twice: give two different symbols"
            )));
        }
        loaded.push(fetch(data, ctx, DataRequest::new(s).range(start, end)).await?);
    }
    let Some(first) = loaded.first() else {
        return Err(ToolError::InvalidArguments(
            "give at least one symbol".into(),
        ));
    };
    let dates: Vec<NaiveDate> = first
        .bars
        .dates
        .iter()
        .copied()
        .filter(|d| loaded[1..].iter().all(|s| s.bars.index_of(*d).is_some()))
        .collect();
    let columns: Vec<Vec<f64>> = loaded
        .iter()
        .map(|s| {
            dates
                .iter()
                .filter_map(|d| {
                    s.bars
                        .index_of(*d)
                        .and_then(|i| s.bars.close.get(i).copied())
                })
                .collect()
        })
        .collect();
    let mut notes: Vec<String> = loaded
        .iter()
        .flat_map(|s| {
            s.provenance
                .notes
                .iter()
                .map(move |n| format!("{}: {n}", s.symbol))
        })
        .collect();
    if loaded.len() > 1 && loaded.iter().any(|s| s.bars.len() > dates.len()) {
        let which = if loaded.len() == 2 {
            "both symbols".to_string()
        } else {
            format!("all {} symbols", loaded.len())
        };
        notes.push(format!(
            "only the {} dates {which} traded are used",
            dates.len()
        ));
    }
    Ok(Closes {
        names: loaded.iter().map(|s| s.symbol.clone()).collect(),
        data: ReturnsData {
            origin: "market data".into(),
            start: dates.first().map(ToString::to_string),
            end: dates.last().map(ToString::to_string),
            days: dates.len(),
            sources: loaded
                .iter()
                .map(|s| format!("{}: {}", s.symbol, s.provenance.source.as_str()))
                .collect(),
            notes,
        },
        dates,
        columns,
    })
}

fn simple_returns(closes: &[f64]) -> Vec<f64> {
    closes.windows(2).map(|w| w[1] / w[0] - 1.0).collect()
}

// ---------------------------------------------------------------------------
// stat_test

pub struct StatTest {
    data: Arc<MarketData>,
}

/// The test by name.
fn test_arg(s: &str) -> Result<StatTestName, ToolError> {
    let key = s.trim().to_ascii_lowercase().replace(['-', ' '], "_");
    Ok(match key.as_str() {
        "adf" | "adfuller" | "dickey_fuller" | "augmented_dickey_fuller" => StatTestName::Adf,
        "kpss" => StatTestName::Kpss,
        "engle_granger" | "coint" | "cointegration" | "eg" => StatTestName::EngleGranger,
        "johansen" | "coint_johansen" | "johansen_trace" => StatTestName::Johansen,
        "half_life" | "halflife" | "ou_half_life" => StatTestName::HalfLife,
        "hurst" | "hurst_exponent" => StatTestName::Hurst,
        "ljung_box" | "ljungbox" | "acorr_ljungbox" => StatTestName::LjungBox,
        "jarque_bera" | "jarquebera" | "jb" => StatTestName::JarqueBera,
        _ => {
            return Err(ToolError::InvalidArguments(format!(
                "test '{}' is not one of adf, kpss, engle_granger, johansen, half_life, hurst, ljung_box, jarque_bera",
                s.trim()
            )));
        }
    })
}

fn test_name(t: StatTestName) -> &'static str {
    match t {
        StatTestName::Adf => "adf",
        StatTestName::Kpss => "kpss",
        StatTestName::EngleGranger => "engle_granger",
        StatTestName::Johansen => "johansen",
        StatTestName::HalfLife => "half_life",
        StatTestName::Hurst => "hurst",
        StatTestName::LjungBox => "ljung_box",
        StatTestName::JarqueBera => "jarque_bera",
    }
}

fn field_arg(s: Option<&str>, test: StatTestName) -> Result<SeriesField, ToolError> {
    match s.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") => Ok(match test {
            StatTestName::LjungBox | StatTestName::JarqueBera => SeriesField::Returns,
            _ => SeriesField::LogClose,
        }),
        Some("close" | "price" | "prices") => Ok(SeriesField::Close),
        Some("log_close" | "log" | "log_price" | "log_prices") => Ok(SeriesField::LogClose),
        Some("returns" | "return") => Ok(SeriesField::Returns),
        Some(other) => Err(ToolError::InvalidArguments(format!(
            "field '{other}' is not one of close, log_close, returns"
        ))),
    }
}

fn field_name(f: SeriesField) -> &'static str {
    match f {
        SeriesField::Close => "close",
        SeriesField::LogClose => "log_close",
        SeriesField::Returns => "returns",
    }
}

fn trend_arg(s: Option<&str>) -> Result<Trend, ToolError> {
    match s.map(str::trim) {
        None | Some("") => Ok(Trend::Constant),
        Some(v) => Trend::parse(v).ok_or_else(|| {
            ToolError::InvalidArguments(format!("regression '{v}' is not one of c, ct, n"))
        }),
    }
}

fn autolag_arg(s: Option<&str>) -> Result<Autolag, ToolError> {
    match s.map(str::trim) {
        None | Some("") => Ok(Autolag::Aic),
        Some(v) => Autolag::parse(v).ok_or_else(|| {
            ToolError::InvalidArguments(format!("autolag '{v}' is not one of aic, bic, none"))
        }),
    }
}

/// The series a test reads: names, values, dates (market data) and data.
struct Input {
    names: Vec<String>,
    columns: Vec<Vec<f64>>,
    field: String,
    data: ReturnsData,
}

impl StatTest {
    async fn input(
        &self,
        args: &StatTestArgs,
        test: StatTestName,
        ctx: &ToolContext,
    ) -> Result<Input, ToolError> {
        let (want, plural) = match test {
            StatTestName::EngleGranger => (2..=2, "two (the first regressed on the second)"),
            StatTestName::Johansen => (2..=JOHANSEN_MAX_SERIES, "2 to 12"),
            _ => (1..=1, "one"),
        };
        match (&args.symbols, &args.series) {
            (Some(_), Some(_)) => Err(ToolError::InvalidArguments(
                "give either 'symbols' or 'series', not both".into(),
            )),
            (None, None) => Err(ToolError::InvalidArguments(format!(
                "give 'symbols' ({plural}, with start and end) or inline 'series' ({{\"name\": [values]}})"
            ))),
            (None, Some(s)) => {
                if !want.contains(&s.0.len()) {
                    return Err(ToolError::InvalidArguments(format!(
                        "{} takes {plural} series, got {}",
                        test_name(test),
                        s.0.len()
                    )));
                }
                check_values(
                    "series",
                    s.0.iter().map(|(n, c)| (n.as_str(), c.as_slice())),
                )?;
                Ok(Input {
                    names: s.0.iter().map(|(n, _)| n.clone()).collect(),
                    columns: s.0.iter().map(|(_, c)| c.clone()).collect(),
                    field: "inline".into(),
                    data: ReturnsData {
                        origin: "inline".into(),
                        days: s.0[0].1.len(),
                        ..ReturnsData::default()
                    },
                })
            }
            (Some(symbols), None) => {
                if !want.contains(&symbols.len()) {
                    return Err(ToolError::InvalidArguments(format!(
                        "{} takes {plural} symbol(s), got {}",
                        test_name(test),
                        symbols.len()
                    )));
                }
                let field = field_arg(args.field.as_deref(), test)?;
                let (start, end) = (
                    opt_date(args.start.as_deref(), "start")?,
                    opt_date(args.end.as_deref(), "end")?,
                );
                let c = load_closes(&self.data, ctx, symbols, start, end).await?;
                let columns = c
                    .columns
                    .iter()
                    .map(|col| match field {
                        SeriesField::Close => col.clone(),
                        SeriesField::LogClose => col.iter().map(|v| v.ln()).collect(),
                        SeriesField::Returns => simple_returns(col),
                    })
                    .collect();
                Ok(Input {
                    names: c.names,
                    columns,
                    field: field_name(field).into(),
                    data: c.data,
                })
            }
        }
    }
}

impl TypedTool for StatTest {
    type Args = StatTestArgs;
    type Output = StatTestOutput;

    const NAME: &'static str = names::STAT_TEST;
    const CAPS: Caps = Caps::READ_ONLY.served_as(names::STAT_TEST).planner();
    fn description(&self) -> &str {
        "Time-series tests, exact to statsmodels: adf (augmented Dickey–Fuller; MacKinnon p-value and critical values; autolag aic|bic|none), kpss (stationarity, automatic lag), engle_granger (cointegration of two series, the first regressed on the second, as statsmodels' coint: statistic, p-value, hedge ratio, intercept, spread half-life), johansen (cointegration rank of 2 to 12 series, as statsmodels' coint_johansen: trace and max-eigenvalue statistics with 90/95/99 % critical values, the rank at 5 %, cointegrating vectors; regression n|c|ct, max_lags = lagged differences, default 1), half_life (OU: −ln 2 / b from Δy = a + b·y₋₁), hurst (τ = 2…100), ljung_box (lags 10) and jarque_bera. Data: symbols over start..end (field log_close by default, returns for ljung_box and jarque_bera) or inline series."
    }
    fn lean_properties(&self) -> Option<&[&str]> {
        Some(&["test", "symbols", "start", "end"])
    }
    fn lean_description(&self) -> Option<&str> {
        Some(
            "Time-series tests of symbols over start..end: adf, kpss, engle_granger (cointegration of two symbols: statistic, p-value, hedge ratio), johansen (2 to 12 symbols), half_life, hurst, ljung_box, jarque_bera.",
        )
    }
    async fn run(&self, args: StatTestArgs, ctx: &ToolContext) -> Result<Self::Output, ToolError> {
        let test = test_arg(&args.test)?;
        let trend = trend_arg(args.regression.as_deref())?;
        let autolag = autolag_arg(args.autolag.as_deref())?;
        let max_lags = opt_usize(args.max_lags, "max_lags")?;
        let input = self.input(&args, test, ctx).await?;
        let mut out = StatTestOutput {
            status: "ok".into(),
            test: test_name(test).into(),
            series: input.names.clone(),
            field: input.field.clone(),
            n_obs: input.columns[0].len(),
            data: input.data.clone(),
            ..StatTestOutput::default()
        };
        // The math off the async threads, so the deadline fires (§2.4).
        guard::compute_interruptible(Self::NAME, &ctx.cancel, move || {
            let x = &input.columns[0];
            match test {
                StatTestName::Adf => run_adf(&mut out, x, trend, autolag, max_lags)?,
                StatTestName::Kpss => run_kpss(&mut out, x, trend, max_lags)?,
                StatTestName::EngleGranger => {
                    run_eg(&mut out, x, &input.columns[1], trend, autolag, max_lags)?
                }
                StatTestName::Johansen => run_johansen(&mut out, &input.columns, trend, max_lags)?,
                StatTestName::HalfLife => run_half_life(&mut out, x)?,
                StatTestName::Hurst => run_hurst(&mut out, x)?,
                StatTestName::LjungBox => run_ljung_box(&mut out, x, max_lags)?,
                StatTestName::JarqueBera => run_jarque_bera(&mut out, x)?,
            }
            Ok(out)
        })
        .await?
    }
}

/// {"1%": a, "5%": b, "10%": c} in that order.
fn levels(pairs: &[(&str, f64)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), Value::from(*v)))
        .collect()
}

fn p_text(p: f64) -> String {
    if p < 0.0001 {
        "p < 0.0001".into()
    } else {
        format!("p = {p:.4}")
    }
}

fn run_adf(
    out: &mut StatTestOutput,
    x: &[f64],
    trend: Trend,
    autolag: Autolag,
    max_lags: Option<usize>,
) -> Result<(), ToolError> {
    let r = ts::adf(x, trend, autolag, max_lags).map_err(ts_error)?;
    let [c1, c5, c10] = r.critical_values;
    out.statistic = Some(r.statistic);
    out.p_value = Some(r.p_value);
    out.critical_values = Some(levels(&[("1%", c1), ("5%", c5), ("10%", c10)]));
    out.used_lag = Some(r.used_lag);
    out.max_lag = Some(r.max_lag);
    out.n_obs = r.n_obs;
    out.regression = Some(trend.as_str().into());
    out.autolag = Some(autolag.as_str().into());
    out.conclusion = if r.p_value < 0.05 {
        format!(
            "rejects a unit root at 5 % ({}): the series looks stationary{}",
            p_text(r.p_value),
            match trend {
                Trend::ConstantTrend => " around a trend",
                Trend::Constant => " around a level",
                Trend::None => " around zero",
            }
        )
    } else {
        format!(
            "cannot reject a unit root at 5 % ({}): the series may wander like a random walk",
            p_text(r.p_value)
        )
    };
    out.conventions = format!(
        "statsmodels adfuller: Δy_t on y_(t−1), {} lagged differences and regression '{}'; lag {} (max {}, Schwert's ⌈12·(n/100)^¼⌉ unless given); MacKinnon (1994) approximate p-value, MacKinnon (2010) critical values for {} observations",
        r.used_lag,
        trend.as_str(),
        match autolag {
            Autolag::None => "as given".to_string(),
            a => format!("by {} on a common sample", a.as_str().to_uppercase()),
        },
        r.max_lag,
        r.n_obs
    );
    Ok(())
}

fn run_kpss(
    out: &mut StatTestOutput,
    x: &[f64],
    trend: Trend,
    max_lags: Option<usize>,
) -> Result<(), ToolError> {
    let lags = max_lags.map_or(KpssLags::Auto, KpssLags::Fixed);
    let r = kpss(x, trend, lags).map_err(ts_error)?;
    let [c10, c5, c25, c1] = r.critical_values;
    out.statistic = Some(r.statistic);
    out.p_value = Some(r.p_value);
    out.critical_values = Some(levels(&[
        ("1%", c1),
        ("2.5%", c25),
        ("5%", c5),
        ("10%", c10),
    ]));
    out.used_lag = Some(r.lags);
    out.n_obs = r.n_obs;
    out.regression = Some(trend.as_str().into());
    let kind = if trend == Trend::ConstantTrend {
        "trend"
    } else {
        "level"
    };
    let p = if r.p_value <= 0.01 {
        "p ≤ 0.01".to_string()
    } else if r.p_value >= 0.1 {
        "p ≥ 0.10".to_string()
    } else {
        format!("p ≈ {:.3}", r.p_value)
    };
    out.conclusion = if r.p_value < 0.05 {
        format!("rejects {kind} stationarity at 5 % ({p})")
    } else {
        format!("does not reject {kind} stationarity at 5 % ({p})")
    };
    out.conventions = format!(
        "statsmodels kpss: the null is {kind} stationarity; η = Σ S_t² / n² over the residuals' partial sums, divided by the Newey–West variance with Bartlett weights and {} lags ({}); p-value interpolated in Kwiatkowski et al.'s (1992) table, so clamped to 0.01–0.10",
        r.lags,
        if max_lags.is_some() {
            "as given"
        } else {
            "Hobijn et al. 1998"
        }
    );
    Ok(())
}

fn run_eg(
    out: &mut StatTestOutput,
    y0: &[f64],
    y1: &[f64],
    trend: Trend,
    autolag: Autolag,
    max_lags: Option<usize>,
) -> Result<(), ToolError> {
    let r = engle_granger(y0, y1, trend, autolag, max_lags).map_err(ts_error)?;
    out.statistic = Some(r.statistic);
    out.p_value = Some(r.p_value);
    out.critical_values = r
        .critical_values
        .map(|[a, b, c]| levels(&[("1%", a), ("5%", b), ("10%", c)]));
    out.used_lag = Some(r.used_lag);
    out.n_obs = r.n_obs;
    out.regression = Some(trend.as_str().into());
    out.autolag = Some(autolag.as_str().into());
    out.hedge_ratio = Some(r.hedge_ratio);
    out.intercept = Some(r.intercept);
    out.trend_slope = r.trend_slope;
    out.half_life_days = r.half_life.half_life;
    let sd = std_dev(&r.residuals, 1);
    out.spread_z = r.residuals.last().map(|v| v / sd).filter(|z| z.is_finite());
    let (a, b) = (
        out.series.first().cloned().unwrap_or_default(),
        out.series.get(1).cloned().unwrap_or_default(),
    );
    let hl = r
        .half_life
        .half_life
        .map_or("the spread does not revert".to_string(), |h| {
            format!("the spread's half-life is {h:.1} bars")
        });
    out.conclusion = if r.p_value < 0.05 {
        format!(
            "{a} and {b} are cointegrated at 5 % ({}): spread = {a} − {:.4} − {:.4} × {b}; {hl}",
            p_text(r.p_value),
            r.intercept,
            r.hedge_ratio
        )
    } else {
        format!(
            "no cointegration at 5 % ({}): the spread {a} − {:.4} × {b} may wander; {hl}",
            p_text(r.p_value),
            r.hedge_ratio
        )
    };
    out.conventions = format!(
        "statsmodels coint (augmented Engle–Granger): OLS of the first series on the second with regression '{}' (hedge ratio = its slope), then ADF without constant on the residuals (lag {} by {}); MacKinnon (1994) p-value and (2010) critical values for two series at n − 1 = {} observations; half-life −ln 2 / b from Δs_t = a + b·s_(t−1) of the spread, in bars; spread z = last residual / its standard deviation",
        trend.as_str(),
        r.used_lag,
        autolag.as_str(),
        y0.len() - 1
    );
    Ok(())
}

fn run_johansen(
    out: &mut StatTestOutput,
    columns: &[Vec<f64>],
    trend: Trend,
    max_lags: Option<usize>,
) -> Result<(), ToolError> {
    let k = max_lags.unwrap_or(1);
    let r = johansen(columns, trend, k).map_err(ts_error)?;
    let cv = |c: [f64; 3]| levels(&[("1%", c[2]), ("5%", c[1]), ("10%", c[0])]);
    out.rank_tests = (0..r.eigenvalues.len())
        .map(|i| JohansenRank {
            r: i,
            eigenvalue: r.eigenvalues[i],
            trace: r.trace[i],
            trace_critical_values: cv(r.trace_critical_values[i]),
            max_eigen: r.max_eigen[i],
            max_eigen_critical_values: cv(r.max_eigen_critical_values[i]),
        })
        .collect();
    out.statistic = Some(r.trace[0]);
    out.critical_values = Some(cv(r.trace_critical_values[0]));
    out.used_lag = Some(k);
    out.n_obs = r.n_obs;
    out.regression = Some(trend.as_str().into());
    out.rank_trace = Some(r.rank_trace);
    out.rank_max_eigen = Some(r.rank_max_eigen);
    out.cointegrating_vectors = r.cointegrating_vectors(r.rank_trace);
    out.conclusion = johansen_conclusion(&out.series, &r, &out.cointegrating_vectors);
    out.conventions = format!(
        "statsmodels coint_johansen (Johansen 1991) with det_order {} (regression '{}') and k_ar_diff {k}: the deterministic terms removed from the levels first, then Δy_t and y_(t−{k}) regressed on {k} lagged difference(s) over T = {} rows; eigenvalues of S10 S00⁻¹ S01 v = λ S11 v; trace −T Σ_(i>r) ln(1 − λ_i) and max-eigenvalue −T ln(1 − λ_(r+1)) against the Osterwald-Lenum / MacKinnon–Haug–Michelis critical values for n − r trends; the rank is the first r not rejected at 5 %; no p-value (the reference gives critical values only); vectors scaled so the first component is 1",
        ts::johansen::det_order(trend),
        trend.as_str(),
        r.n_obs
    );
    Ok(())
}

/// The plain reading of a Johansen test: the ranks and the relations.
fn johansen_conclusion(names: &[String], r: &ts::JohansenResult, vectors: &[Vec<f64>]) -> String {
    let n = r.eigenvalues.len();
    let trace_cv = r.trace_critical_values[0][1];
    let head = format!(
        "trace {:.2} against {:.2} at 5 % for r = 0",
        r.trace[0], trace_cv
    );
    let note = "no p-value: Johansen's statistics are read against critical values";
    let agree = if r.rank_max_eigen == r.rank_trace {
        "the maximum-eigenvalue test agrees".to_string()
    } else {
        format!("the maximum-eigenvalue test says rank {}", r.rank_max_eigen)
    };
    let relation = |v: &Vec<f64>| {
        let mut s = String::new();
        for (i, (b, name)) in v.iter().zip(names).enumerate() {
            match i {
                0 => s.push_str(name),
                _ if *b < 0.0 => s.push_str(&format!(" − {:.4} × {name}", -b)),
                _ => s.push_str(&format!(" + {b:.4} × {name}")),
            }
        }
        s
    };
    match r.rank_trace {
        0 => format!(
            "no cointegration at 5 % among {}: rank 0 by the trace test ({head}); {agree}; {note}",
            names.join(", ")
        ),
        k if k == n => format!(
            "rank {n} at 5 %, as many relations as series: the trace test finds the levels themselves stationary, which is not cointegration; check the data and the deterministic terms ({head}); {agree}; {note}"
        ),
        k => format!(
            "{k} cointegrating relation(s) at 5 % by the trace test ({head}); {agree}; stationary: {}; {note}",
            vectors.iter().map(relation).collect::<Vec<_>>().join("; ")
        ),
    }
}

fn run_half_life(out: &mut StatTestOutput, x: &[f64]) -> Result<(), ToolError> {
    let r = half_life(x).map_err(ts_error)?;
    out.half_life_days = r.half_life;
    out.reversion_coefficient = Some(r.b);
    out.n_obs = r.n_obs;
    out.conclusion = match r.half_life {
        Some(h) => format!("mean-reverting: half-life {h:.1} bars (b = {:.5})", r.b),
        None => format!("no mean reversion: b = {:.5} ≥ 0", r.b),
    };
    out.conventions = "Ornstein–Uhlenbeck half-life −ln 2 / b from the OLS Δy_t = a + b·y_(t−1), in bars (trading days for daily data); none when b ≥ 0".into();
    Ok(())
}

fn run_hurst(out: &mut StatTestOutput, x: &[f64]) -> Result<(), ToolError> {
    let h = hurst(x).map_err(ts_error)?;
    out.hurst = Some(h);
    out.conclusion = if h < 0.45 {
        format!("H = {h:.3} < 0.5: mean-reverting")
    } else if h > 0.55 {
        format!("H = {h:.3} > 0.5: trending (persistent)")
    } else {
        format!("H = {h:.3} ≈ 0.5: close to a random walk")
    };
    out.conventions = format!(
        "slope of ln std(y_(t+τ) − y_t) (population std) on ln τ for τ = {}…{} by least squares; a level series such as log prices",
        ts::HURST_MIN_LAG,
        ts::HURST_MAX_LAG
    );
    Ok(())
}

fn run_ljung_box(
    out: &mut StatTestOutput,
    x: &[f64],
    max_lags: Option<usize>,
) -> Result<(), ToolError> {
    let lags = max_lags.unwrap_or(LB_LAGS);
    let r = ljung_box(x, lags).map_err(ts_error)?;
    out.ljung_box = (0..lags)
        .map(|k| LjungBoxLag {
            lag: k + 1,
            statistic: r.statistics[k],
            p_value: r.p_values[k],
            autocorrelation: r.autocorrelations[k],
        })
        .collect();
    let (q, p) = (r.statistics[lags - 1], r.p_values[lags - 1]);
    out.statistic = Some(q);
    out.p_value = Some(p);
    out.used_lag = Some(lags);
    out.conclusion = if p < 0.05 {
        format!(
            "autocorrelated: Q({lags}) = {q:.2} rejects no autocorrelation at 5 % ({})",
            p_text(p)
        )
    } else {
        format!(
            "no significant autocorrelation up to lag {lags} (Q = {q:.2}, {})",
            p_text(p)
        )
    };
    out.conventions = "statsmodels acorr_ljungbox: Q(m) = n(n+2) Σ_(k≤m) ρ_k² / (n−k), ρ_k from autocovariances over n, against χ²(m); statistic and p-value at the last lag, every lag listed".into();
    Ok(())
}

fn run_jarque_bera(out: &mut StatTestOutput, x: &[f64]) -> Result<(), ToolError> {
    let r = jarque_bera(x).map_err(ts_error)?;
    out.statistic = Some(r.statistic);
    out.p_value = Some(r.p_value);
    out.skewness = Some(r.skewness);
    out.kurtosis = Some(r.kurtosis);
    out.conclusion = if r.p_value < 0.05 {
        format!(
            "not normal at 5 % ({}): skewness {:.3}, kurtosis {:.3}",
            p_text(r.p_value),
            r.skewness,
            r.kurtosis
        )
    } else {
        format!("normality not rejected at 5 % ({})", p_text(r.p_value))
    };
    out.conventions = "statsmodels jarque_bera: JB = n/6·(S² + (K − 3)²/4) with the population skewness S and kurtosis K, against χ²(2)".into();
    Ok(())
}

// ---------------------------------------------------------------------------
// volatility_model

pub struct VolatilityModel {
    data: Arc<MarketData>,
}

/// One return series and where its returns are dated.
struct Series {
    name: String,
    returns: Vec<f64>,
    /// The date of each return (market data).
    dates: Option<Vec<NaiveDate>>,
    data: ReturnsData,
}

impl VolatilityModel {
    async fn series(
        &self,
        args: &VolatilityModelArgs,
        ctx: &ToolContext,
    ) -> Result<Series, ToolError> {
        match (&args.symbol, &args.returns) {
            (Some(_), Some(_)) => Err(ToolError::InvalidArguments(
                "give either 'symbol' or 'returns', not both".into(),
            )),
            (None, None) => Err(ToolError::InvalidArguments(
                "give a 'symbol' (e.g. \"SPY\") or inline 'returns' ({\"name\": [r, …]}, 0.01 for 1 %)".into(),
            )),
            (None, Some(r)) => {
                let [(name, returns)] = r.0.as_slice() else {
                    return Err(ToolError::InvalidArguments(format!(
                        "'returns' takes one series, got {}",
                        r.0.len()
                    )));
                };
                check_returns("returns", [(name.as_str(), returns.as_slice())])?;
                Ok(Series {
                    name: name.clone(),
                    returns: returns.clone(),
                    dates: None,
                    data: ReturnsData {
                        origin: "inline".into(),
                        days: returns.len(),
                        ..ReturnsData::default()
                    },
                })
            }
            (Some(sym), None) => {
                let (start, end) = (
                    opt_date(args.start.as_deref(), "start")?,
                    opt_date(args.end.as_deref(), "end")?,
                );
                let mut c = load_closes(&self.data, ctx, std::slice::from_ref(sym), start, end)
                    .await?;
                if start.is_none() && c.dates.len() > DEFAULT_VOL_DAYS + 1 {
                    let cut = c.dates.len() - (DEFAULT_VOL_DAYS + 1);
                    c.dates.drain(..cut);
                    c.columns[0].drain(..cut);
                    c.data.notes.push(format!(
                        "no start given: the last {DEFAULT_VOL_DAYS} daily returns (ten years)"
                    ));
                }
                let returns = simple_returns(&c.columns[0]);
                c.data.start = c.dates.first().map(ToString::to_string);
                c.data.days = returns.len();
                Ok(Series {
                    name: c.names[0].clone(),
                    returns,
                    dates: Some(c.dates.get(1..).unwrap_or_default().to_vec()),
                    data: c.data,
                })
            }
        }
    }
}

impl TypedTool for VolatilityModel {
    type Args = VolatilityModelArgs;
    type Output = VolatilityModelOutput;

    const NAME: &'static str = names::VOLATILITY_MODEL;
    const CAPS: Caps = Caps::READ_ONLY.served_as(names::VOLATILITY_MODEL).planner();
    fn description(&self) -> &str {
        "Conditional volatility of daily returns and its forecast, as the arch package computes it: garch (GARCH(1,1), constant mean, maximum likelihood on returns in percent: mu, omega, alpha, beta (each with arch's robust standard error, t-statistic and p-value), persistence, log-likelihood, long-run volatility), gjr_garch (GJR-GARCH(1,1,1): adds gamma, the extra reaction to negative returns; persistence alpha + gamma/2 + beta) or ewma (RiskMetrics, lambda 0.94). dist: normal errors (default) or t (Student-t, degrees of freedom nu estimated with its standard error) for garch and gjr_garch. Returns the annualized volatility forecast for each of horizon_days (default 10) and the path's last days. Data: a symbol over start..end (default the last 2,520 returns) or inline returns."
    }
    async fn run(
        &self,
        args: VolatilityModelArgs,
        ctx: &ToolContext,
    ) -> Result<Self::Output, ToolError> {
        let model = model_arg(&args.model)?;
        let dist = dist_arg(args.dist.as_deref(), model)?;
        let horizon = opt_usize(args.horizon_days, "horizon_days")?.unwrap_or(10);
        if horizon == 0 || horizon > MAX_HORIZON {
            return Err(ToolError::InvalidArguments(format!(
                "'horizon_days' must be 1 to {MAX_HORIZON}, got {horizon}"
            )));
        }
        let s = self.series(&args, ctx).await?;
        let pct: Vec<f64> = s.returns.iter().map(|r| 100.0 * r).collect();
        let lambda = args.lambda.unwrap_or(0.94);
        // The fit off the async threads, watching the deadline (§2.4).
        let mut out = guard::compute_interruptible(Self::NAME, &ctx.cancel, move || {
            match (model, dist) {
                // The default normal GARCH keeps its own exact-derivative fit.
                (VolatilityModelName::Garch, ErrorDist::Normal) => garch_output(&pct, horizon),
                (VolatilityModelName::Garch, _) | (VolatilityModelName::GjrGarch, _) => {
                    let spec = GarchSpec {
                        gjr: model == VolatilityModelName::GjrGarch,
                        dist,
                    };
                    family_output(&pct, spec, horizon)
                }
                (VolatilityModelName::Ewma, _) => ewma_output(&pct, lambda, horizon),
            }
        })
        .await??;
        let n = s.returns.len();
        let at = |i: usize| match &s.dates {
            Some(d) => d.get(i).map_or(Value::Null, |d| d.to_string().into()),
            None => i.into(),
        };
        out.tail = out
            .tail
            .iter()
            .enumerate()
            .map(|(k, p)| VolPoint {
                at: at(n - out.tail.len() + k),
                vol_annualized: p.vol_annualized,
            })
            .collect();
        out.series = s.name;
        out.realized_vol_annualized = std_dev(&s.returns, 1) * YEAR.sqrt();
        out.horizon_days = horizon;
        out.n_obs = n;
        out.data = s.data;
        Ok(out)
    }
}

fn model_arg(s: &str) -> Result<VolatilityModelName, ToolError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "garch" | "garch11" | "garch(1,1)" => Ok(VolatilityModelName::Garch),
        "gjr_garch" | "gjr-garch" | "gjr" | "gjrgarch" | "gjr_garch(1,1,1)" => {
            Ok(VolatilityModelName::GjrGarch)
        }
        "ewma" | "riskmetrics" => Ok(VolatilityModelName::Ewma),
        other => Err(ToolError::InvalidArguments(format!(
            "model '{other}' is not one of ewma, garch, gjr_garch"
        ))),
    }
}

/// The errors' distribution; EWMA takes none.
fn dist_arg(s: Option<&str>, model: VolatilityModelName) -> Result<ErrorDist, ToolError> {
    let Some(s) = s else {
        return Ok(ErrorDist::Normal);
    };
    let dist = match s.trim().to_ascii_lowercase().as_str() {
        "normal" | "gaussian" => ErrorDist::Normal,
        "t" | "student_t" | "studentst" | "student-t" | "students_t" => ErrorDist::StudentT,
        other => {
            return Err(ToolError::InvalidArguments(format!(
                "dist '{other}' is not one of normal, t"
            )));
        }
    };
    if model == VolatilityModelName::Ewma && dist != ErrorDist::Normal {
        return Err(ToolError::InvalidArguments(
            "'dist' applies to garch and gjr_garch; ewma has no error distribution to fit".into(),
        ));
    }
    Ok(dist)
}

/// √(252·σ²) / 100: a percent² daily variance as an annualized fraction.
fn annualized(var_pct: f64) -> f64 {
    (YEAR * var_pct).sqrt() / 100.0
}

fn tail_of(variance: &[f64]) -> Vec<VolPoint> {
    let from = variance.len().saturating_sub(TAIL);
    variance[from..]
        .iter()
        .map(|v| VolPoint {
            at: Value::Null,
            vol_annualized: annualized(*v),
        })
        .collect()
}

/// What every GARCH fit reports of its variance path: the shock half-life
/// from the persistence, the current, long-run and forecast volatilities,
/// and the path's tail; the rest of the output is the caller's.
fn variance_path(
    persistence: f64,
    variance: &[f64],
    long_run: Option<f64>,
    forecast: Vec<f64>,
) -> VolatilityModelOutput {
    VolatilityModelOutput {
        shock_half_life_days: (persistence > 0.0 && persistence < 1.0)
            .then(|| 0.5f64.ln() / persistence.ln()),
        long_run_vol_annualized: long_run.map(annualized),
        current_vol_annualized: variance.last().copied().map_or(f64::NAN, annualized),
        forecast: forecast.into_iter().map(annualized).collect(),
        tail: tail_of(variance),
        ..VolatilityModelOutput::default()
    }
}

fn garch_output(pct: &[f64], horizon: usize) -> Result<VolatilityModelOutput, ToolError> {
    let fit = fit_garch(pct).map_err(ts_error)?;
    let p = fit.params;
    let persistence = fit.persistence();
    let (parameters, se_note) = garch_parameters(pct, &p);
    Ok(VolatilityModelOutput {
        status: "ok".into(),
        model: "garch".into(),
        mu: Some(p.mu),
        omega: Some(p.omega),
        alpha: Some(p.alpha),
        beta: Some(p.beta),
        persistence: Some(persistence),
        parameters,
        loglik: fit.loglik,
        iterations: Some(fit.iterations),
        conventions: "GARCH(1,1) as arch's arch_model(100 × returns, mean=\"Constant\", vol=\"GARCH\", p=1, q=1, dist=\"normal\"): e_t = y_t − μ, σ²_t = ω + α·e²_(t−1) + β·σ²_(t−1) on returns in percent, started from arch's backcast; maximum likelihood (normal); mu in percent per day, omega in percent²; volatilities annualized as √(252·σ²)/100 (a fraction); forecast σ²_(T+h) = ω + (α+β)·σ²_(T+h−1)".to_string() + se_note,
        ..variance_path(
            persistence,
            &fit.conditional_variance,
            fit.long_run_variance(),
            fit.forecast(horizon),
        )
    })
}

/// The GARCH parameters with arch's robust standard errors (docs §16.5.1),
/// and what the conventions say of them.
fn garch_parameters(pct: &[f64], p: &ts::GarchParams) -> (Vec<ParamEstimate>, &'static str) {
    let finite = |v: f64| v.is_finite().then_some(v);
    let estimates = [p.mu, p.omega, p.alpha, p.beta];
    let names = ["mu", "omega", "alpha", "beta"];
    match garch_inference(pct, p) {
        Ok(inf) => (
            (0..4)
                .map(|i| ParamEstimate {
                    name: names[i].into(),
                    estimate: estimates[i],
                    std_err: finite(inf.std_err[i]),
                    t_stat: finite(inf.t_stat[i]),
                    p_value: finite(inf.p_value[i]),
                    std_err_classic: finite(inf.classic_std_err[i]),
                })
                .collect(),
            "; standard errors robust (Bollerslev–Wooldridge sandwich H⁻¹SH⁻¹/n, arch's default cov_type=\"robust\") with arch's numerical Hessian and scores, t = estimate / se, two-sided normal p-values; std_err_classic = √diag(H⁻¹/n)",
        ),
        Err(_) => (
            names
                .iter()
                .zip(estimates)
                .map(|(n, e)| ParamEstimate {
                    name: (*n).into(),
                    estimate: e,
                    ..ParamEstimate::default()
                })
                .collect(),
            "; no standard errors: the log-likelihood's Hessian is singular at the estimates",
        ),
    }
}

/// GARCH with t errors or GJR-GARCH (docs §16.5), with arch's standard
/// errors of every parameter, ν and γ included (docs §16.5.1).
fn family_output(
    pct: &[f64],
    spec: GarchSpec,
    horizon: usize,
) -> Result<VolatilityModelOutput, ToolError> {
    let fit = fit_family(pct, spec).map_err(ts_error)?;
    let p = fit.named();
    let persistence = fit.persistence();
    let finite = |v: f64| v.is_finite().then_some(v);
    let inf = family_inference(pct, spec, &fit.params).ok();
    let parameters = spec
        .names()
        .iter()
        .enumerate()
        .map(|(i, name)| ParamEstimate {
            name: (*name).into(),
            estimate: fit.params[i],
            std_err: inf.as_ref().and_then(|r| finite(r.std_err[i])),
            t_stat: inf.as_ref().and_then(|r| finite(r.t_stat[i])),
            p_value: inf.as_ref().and_then(|r| finite(r.p_value[i])),
            std_err_classic: inf.as_ref().and_then(|r| finite(r.classic_std_err[i])),
        })
        .collect();
    let (model, vol, recursion, pers) = if spec.gjr {
        (
            "gjr_garch",
            "p=1, o=1, q=1",
            "σ²_t = ω + (α + γ·1[e_(t−1)<0])·e²_(t−1) + β·σ²_(t−1)",
            "α + γ/2 + β",
        )
    } else {
        (
            "garch",
            "p=1, q=1",
            "σ²_t = ω + α·e²_(t−1) + β·σ²_(t−1)",
            "α + β",
        )
    };
    let (dist, likelihood) = match spec.dist {
        ErrorDist::Normal => ("normal", "normal"),
        ErrorDist::StudentT => (
            "t",
            "standardised Student-t (unit variance), ν estimated jointly within [2.05, 500]",
        ),
    };
    let se_note = if inf.is_some() {
        "; standard errors robust (Bollerslev–Wooldridge sandwich H⁻¹SH⁻¹/n, arch's default cov_type=\"robust\") with arch's numerical Hessian and scores, t = estimate / se, two-sided normal p-values; std_err_classic = √diag(H⁻¹/n)"
    } else {
        "; no standard errors: the log-likelihood's Hessian is singular at the estimates"
    };
    Ok(VolatilityModelOutput {
        status: "ok".into(),
        model: model.into(),
        dist: Some(dist.into()),
        mu: Some(p.mu),
        omega: Some(p.omega),
        alpha: Some(p.alpha),
        gamma: spec.gjr.then_some(p.gamma),
        beta: Some(p.beta),
        nu: p.nu,
        persistence: finite(persistence),
        parameters,
        loglik: fit.loglik,
        iterations: Some(fit.iterations),
        conventions: format!(
            "{} as arch's arch_model(100 × returns, mean=\"Constant\", vol=\"GARCH\", {vol}, dist=\"{dist}\"): e_t = y_t − μ, {recursion} on returns in percent, started from arch's backcast; maximum likelihood ({likelihood}); mu in percent per day, omega in percent²; persistence {pers}; volatilities annualized as √(252·σ²)/100 (a fraction); forecast σ²_(T+h) = ω + ({pers})·σ²_(T+h−1){se_note}",
            if spec.gjr {
                "GJR-GARCH(1,1,1)"
            } else {
                "GARCH(1,1)"
            }
        ),
        ..variance_path(
            persistence,
            &fit.conditional_variance,
            fit.long_run_variance(),
            fit.forecast(horizon),
        )
    })
}

fn ewma_output(
    pct: &[f64],
    lambda: f64,
    horizon: usize,
) -> Result<VolatilityModelOutput, ToolError> {
    let r = ewma(pct, lambda).map_err(ts_error)?;
    Ok(VolatilityModelOutput {
        status: "ok".into(),
        model: "ewma".into(),
        loglik: r.loglik,
        lambda: Some(lambda),
        current_vol_annualized: r.variance.last().copied().map_or(f64::NAN, annualized),
        forecast: vec![annualized(r.next_variance); horizon],
        tail: tail_of(&r.variance),
        conventions: format!(
            "RiskMetrics EWMA as arch's EWMAVariance({lambda}) with a zero mean: σ²_t = (1−λ)·y²_(t−1) + λ·σ²_(t−1) on returns in percent, σ²_0 = arch's backcast; the forecast is flat at σ²_(T+1); volatilities annualized as √(252·σ²)/100 (a fraction)"
        ),
        ..VolatilityModelOutput::default()
    })
}

// Each is made of the shared market data alone.
built_from_data!(StatTest, VolatilityModel);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::builtin::testkit::{assert_plain_object, call};

    #[test]
    fn schemas_are_plain_objects_with_their_enums() {
        use crate::model::contract::parameters_schema;
        let schemas = [
            parameters_schema::<StatTestArgs>(),
            parameters_schema::<VolatilityModelArgs>(),
        ];
        schemas.iter().for_each(assert_plain_object);
        assert_eq!(
            schemas[0]["properties"]["test"]["enum"],
            json!([
                "adf",
                "kpss",
                "engle_granger",
                "johansen",
                "half_life",
                "hurst",
                "ljung_box",
                "jarque_bera"
            ])
        );
        assert_eq!(schemas[0]["required"], json!(["test"]));
        assert_eq!(
            schemas[1]["properties"]["model"]["enum"],
            json!(["ewma", "garch", "gjr_garch"])
        );
        assert_eq!(
            schemas[1]["properties"]["dist"]["enum"],
            json!(["normal", "t"])
        );
    }

    #[tokio::test]
    async fn ko_pep_cointegration_reads_the_offline_market() {
        let v = call(
            "stat_test",
            json!({"test": "engle_granger", "symbols": ["KO", "PEP"], "start": "2010-01-01", "end": "2015-12-31"}),
        )
        .await
        .unwrap();
        assert_eq!(v["series"], json!(["KO", "PEP"]));
        assert_eq!(v["field"], "log_close");
        assert_eq!(v["data"]["start"], "2010-01-04");
        assert_eq!(v["data"]["days"], 1510);
        assert!(v["hedge_ratio"].as_f64().unwrap() > 0.0, "{v}");
        let crit = v["critical_values"].as_object().unwrap();
        assert_eq!(
            crit.keys().cloned().collect::<Vec<_>>(),
            ["1%", "5%", "10%"]
        );
        assert!(v["conclusion"].as_str().unwrap().contains("KO"), "{v}");
    }

    #[tokio::test]
    async fn wrong_counts_and_names_say_what_to_give() {
        let e = call(
            "stat_test",
            json!({"test": "engle_granger", "symbols": ["KO"]}),
        )
        .await
        .unwrap_err();
        assert!(e.contains("two (the first regressed on the second)"), "{e}");
        let e = call("stat_test", json!({"test": "granger", "symbols": ["KO"]}))
            .await
            .unwrap_err();
        assert!(e.contains("not one of adf, kpss"), "{e}");
        let e = call(
            "stat_test",
            json!({"test": "adf", "series": {"x": [1.0, 2.0, 3.0]}}),
        )
        .await
        .unwrap_err();
        assert!(e.contains("at least 10 observations"), "{e}");
        let e = call("volatility_model", json!({"model": "garch"}))
            .await
            .unwrap_err();
        assert!(e.contains("give a 'symbol'"), "{e}");
    }

    #[tokio::test]
    async fn johansen_on_three_etfs_reads_the_offline_market() {
        let v = call(
            "stat_test",
            json!({"test": "johansen", "symbols": ["XLP", "XLU", "SPY"], "start": "2012-01-01", "end": "2016-12-31", "regression": "c", "max_lags": 2}),
        )
        .await
        .unwrap();
        assert_eq!(v["series"], json!(["XLP", "XLU", "SPY"]));
        assert_eq!(v["field"], "log_close");
        assert_eq!(v["used_lag"], 2);
        let days = v["data"]["days"].as_u64().unwrap() as usize;
        // T = N − 1 − k rows.
        assert_eq!(v["n_obs"], days - 3);
        let rows = v["rank_tests"].as_array().unwrap();
        assert_eq!(rows.len(), 3);
        // Constant terms, three series: the trace's 5 % value for r = 0 is
        // the table's 29.7961; the last row is χ²(1)'s 3.8415.
        assert_eq!(rows[0]["trace_critical_values"]["5%"], 29.7961);
        assert_eq!(rows[2]["max_eigen_critical_values"]["5%"], 3.8415);
        assert_eq!(v["statistic"], rows[0]["trace"]);
        assert!(v.get("p_value").is_none(), "{v}");
        let rank = v["rank_trace"].as_u64().unwrap() as usize;
        let vectors = v["cointegrating_vectors"].as_array().cloned();
        assert_eq!(vectors.as_ref().map_or(0, Vec::len), rank, "{v}");
        for b in vectors.iter().flatten() {
            assert_eq!(b[0], 1.0);
        }
        // The reading matches the rank the rows imply.
        let first_kept = rows
            .iter()
            .position(|r| r["trace"].as_f64() < r["trace_critical_values"]["5%"].as_f64())
            .unwrap_or(3);
        assert_eq!(rank, first_kept);
        assert!(v["conclusion"].as_str().unwrap().contains("trace"), "{v}");
        assert!(v["conventions"].as_str().unwrap().contains("det_order 0"));
    }

    #[tokio::test]
    async fn johansen_refuses_one_series_thirteen_and_short_samples() {
        let e = call("stat_test", json!({"test": "johansen", "symbols": ["KO"]}))
            .await
            .unwrap_err();
        assert!(e.contains("johansen takes 2 to 12 symbol(s), got 1"), "{e}");
        let thirteen: Vec<String> = [
            "KO", "PEP", "PG", "SPY", "XLP", "XLU", "XLE", "XOM", "CVX", "MCD", "WMT", "JNJ", "IBM",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        let e = call(
            "stat_test",
            json!({"test": "johansen", "symbols": thirteen}),
        )
        .await
        .unwrap_err();
        assert!(e.contains("2 to 12"), "{e}");
        let series: serde_json::Map<String, Value> = (0..13)
            .map(|i| (format!("s{i}"), json!([1.0, 2.0, 3.0])))
            .collect();
        let e = call("stat_test", json!({"test": "johansen", "series": series}))
            .await
            .unwrap_err();
        assert!(e.contains("johansen takes 2 to 12 series, got 13"), "{e}");
        let e = call(
            "stat_test",
            json!({"test": "johansen", "symbols": ["KO", "PEP"], "start": "2015-12-18", "end": "2015-12-31"}),
        )
        .await
        .unwrap_err();
        assert!(
            e.contains("johansen needs at least 16 observations, got 9"),
            "{e}"
        );
        let e = call(
            "stat_test",
            json!({"test": "johansen", "symbols": ["KO", "PEP"], "max_lags": 0}),
        )
        .await
        .unwrap_err();
        assert!(e.contains("at least 1"), "{e}");
    }

    #[tokio::test]
    async fn garch_on_spy_forecasts_annualized_volatility() {
        let v = call(
            "volatility_model",
            json!({"symbol": "SPY", "model": "garch", "horizon_days": 5}),
        )
        .await
        .unwrap();
        assert_eq!(v["n_obs"], 2520);
        assert_eq!(v["data"]["end"], "2017-11-10");
        let f: Vec<f64> = serde_json::from_value(v["forecast"].clone()).unwrap();
        assert_eq!(f.len(), 5);
        assert!(f.iter().all(|x| *x > 0.03 && *x < 0.6), "{f:?}");
        assert!(v["persistence"].as_f64().unwrap() < 1.0);
        // Each parameter with its inference, in the top-level order.
        let rows = v["parameters"].as_array().unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["mu", "omega", "alpha", "beta"]);
        for r in rows {
            let key = r["name"].as_str().unwrap();
            assert_eq!(r["estimate"], v[key], "{r}");
            let (est, se) = (
                r["estimate"].as_f64().unwrap(),
                r["std_err"].as_f64().unwrap(),
            );
            assert!(
                se > 0.0 && r["std_err_classic"].as_f64().unwrap() > 0.0,
                "{r}"
            );
            assert!((r["t_stat"].as_f64().unwrap() - est / se).abs() < 1e-9 * (est / se).abs());
            let p = r["p_value"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&p), "{r}");
        }
        // Ten years of SPY pin β down: t far above 2.
        assert!(rows[3]["t_stat"].as_f64().unwrap() > 10.0, "{}", rows[3]);
        assert_eq!(v["tail"].as_array().unwrap().len(), 10);
        assert_eq!(v["tail"][9]["at"], "2017-11-10");
        let e = call(
            "volatility_model",
            json!({"symbol": "SPY", "model": "ewma", "lambda": 0.94, "horizon_days": 3}),
        )
        .await
        .unwrap();
        let f: Vec<f64> = serde_json::from_value(e["forecast"].clone()).unwrap();
        assert!(f.iter().all(|x| *x == f[0]));
        // EWMA estimates nothing, so it has no parameter table.
        assert!(e.get("parameters").is_none(), "{e}");
    }

    #[tokio::test]
    async fn gjr_with_t_errors_reports_gamma_and_nu_with_their_errors() {
        let v = call(
            "volatility_model",
            json!({"symbol": "SPY", "model": "gjr_garch", "dist": "t", "start": "2005-01-01", "end": "2015-12-31"}),
        )
        .await
        .unwrap();
        assert_eq!(v["model"], "gjr_garch");
        assert_eq!(v["dist"], "t");
        let rows = v["parameters"].as_array().unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["mu", "omega", "alpha", "gamma", "beta", "nu"]);
        for r in rows {
            assert_eq!(r["estimate"], v[r["name"].as_str().unwrap()], "{r}");
        }
        // SPY's leverage effect and fat tails are both significant.
        assert!(rows[3]["t_stat"].as_f64().unwrap() > 3.0, "{}", rows[3]);
        let nu = v["nu"].as_f64().unwrap();
        assert!(nu > 3.0 && nu < 15.0, "{nu}");
        assert!(rows[5]["std_err"].as_f64().unwrap() > 0.0);
        let (a, g, b) = (
            v["alpha"].as_f64().unwrap(),
            v["gamma"].as_f64().unwrap(),
            v["beta"].as_f64().unwrap(),
        );
        let pers = v["persistence"].as_f64().unwrap();
        assert!((pers - (a + g / 2.0 + b)).abs() < 1e-12);
        let hl = v["shock_half_life_days"].as_f64().unwrap();
        assert!((hl - 0.5f64.ln() / pers.ln()).abs() < 1e-9);
        assert!(v["conventions"].as_str().unwrap().contains("o=1"), "{v}");
        // t errors on the plain GARCH: nu, no gamma.
        let t = call(
            "volatility_model",
            json!({"symbol": "SPY", "model": "garch", "dist": "t", "horizon_days": 3}),
        )
        .await
        .unwrap();
        assert!(
            t.get("gamma").is_none() && t["nu"].as_f64().is_some(),
            "{t}"
        );
        assert_eq!(t["forecast"].as_array().unwrap().len(), 3);
    }

    #[tokio::test]
    async fn bad_dist_and_model_name_the_valid_ones() {
        for (args, want) in [
            (
                json!({"symbol": "SPY", "model": "garch", "dist": "cauchy"}),
                "dist 'cauchy' is not one of normal, t",
            ),
            (
                json!({"symbol": "SPY", "model": "egarch"}),
                "model 'egarch' is not one of ewma, garch, gjr_garch",
            ),
            (
                json!({"symbol": "SPY", "model": "ewma", "dist": "t"}),
                "ewma has no error distribution",
            ),
        ] {
            let e = call("volatility_model", args).await.unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }
}
