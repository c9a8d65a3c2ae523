//! The quant desk's tools (docs §15): `option_price`,
//! `implied_volatility`, `option_strategy`, `portfolio_optimize` and
//! `risk_report`, thin typed layers over [`crate::research::options`],
//! [`crate::research::portfolio`] and [`crate::research::risk`].
//!
//! All are read-only computations. Data comes from the market-data layer
//! (`symbols`, `start`, `end`: adjusted closes on the dates every symbol
//! has, simple daily returns) or inline (`returns`); the option tools can
//! fill a missing spot, volatility and rate from a `symbol`'s data and say
//! where each came from.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::NaiveDate;

use super::args::{check_returns, nonempty, opt_usize, rate};
use super::market::{fetch, opt_date};
use super::{Family, ToolEnv, register_family};
use crate::model::names;
use crate::model::quant::*;
use crate::research::data::{self, DataConfig, DataRequest, MarketData, PriceSeries};
use crate::research::options::binomial::{MAX_STEPS, crr_nodes};
use crate::research::options::strategy::{self, Leg, LegKind, Market};
use crate::research::options::{
    OptionError, OptionInputs, OptionKind, black_scholes, crr_american_within, crr_estimate,
    implied_volatility,
};
use crate::research::portfolio::{self, CovarianceKind, Method, OptimizeOptions, PortfolioError};
use crate::research::returns::{aligned_returns, realised_volatility};
use crate::research::risk::{self, RiskError};
use crate::tools::registry::DuplicateTool;
use crate::tools::{Caps, guard};
use crate::tools::{Registry, ToolContext, ToolError, TypedTool};

/// Daily returns behind a filled-in volatility.
const VOL_WINDOW: usize = 252;
/// Most symbols or inline series one call takes.
const MAX_SERIES: usize = 200;
/// Binomial steps by default.
const DEFAULT_STEPS: usize = 500;

/// Registers the five tools, sharing one data service.
pub fn register_quant_tools(
    registry: &mut Registry,
    config: DataConfig,
) -> Result<(), DuplicateTool> {
    register_family(registry, Family::Quant, &ToolEnv::new(config))
}

fn option_error(e: OptionError) -> ToolError {
    match e {
        OptionError::Interrupted(i) => ToolError::failed("cancelled", i.to_string()),
        e => ToolError::InvalidArguments(e.to_string()),
    }
}

fn portfolio_error(e: PortfolioError) -> ToolError {
    match e {
        PortfolioError::Input(_) | PortfolioError::Bounds { .. } => {
            ToolError::InvalidArguments(e.to_string())
        }
        PortfolioError::Interrupted(i) => ToolError::failed("cancelled", i.to_string()),
        other => ToolError::failed("optimization_failed", other.to_string()),
    }
}

fn risk_error(e: RiskError) -> ToolError {
    ToolError::InvalidArguments(e.to_string())
}

fn option_kind(s: &str) -> Result<OptionKind, ToolError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "call" | "c" => Ok(OptionKind::Call),
        "put" | "p" => Ok(OptionKind::Put),
        other => Err(ToolError::InvalidArguments(format!(
            "kind '{other}' is not one of call, put"
        ))),
    }
}

// ---------------------------------------------------------------------------
// Filling spot, volatility and rate from a symbol's data.

/// What a symbol's data gives an option: its last close on or before
/// `as_of`, the realised volatility before it, the 3-month Treasury rate.
struct SymbolMarket {
    spot: f64,
    date: NaiveDate,
    volatility: Option<(f64, usize)>,
    rate: Option<f64>,
    rate_note: String,
}

async fn symbol_market(
    data: &MarketData,
    ctx: &ToolContext,
    symbol: &str,
    as_of: Option<NaiveDate>,
) -> Result<SymbolMarket, ToolError> {
    let anchor = as_of.unwrap_or_else(|| chrono::Utc::now().date_naive());
    let req = DataRequest::new(symbol)
        .range(Some(anchor), as_of)
        .history(VOL_WINDOW + 1);
    let mut series: PriceSeries = fetch(data, ctx, req).await?;
    crate::research::warmup::cut(&mut series, None, as_of);
    let b = &series.bars;
    let (Some(date), Some(spot)) = (b.last_date(), b.close.last().copied()) else {
        return Err(ToolError::failed(
            "no_data",
            format!(
                "{symbol} has no bars on or before {}; pick an as_of within its history",
                as_of.map_or_else(|| "today".into(), |d| d.to_string())
            ),
        ));
    };
    let volatility = realised_volatility(&b.close, VOL_WINDOW);
    let (rate, rate_note) = match data::rates::three_month(date) {
        Ok(Some(q)) => {
            // A bill's yield is quoted bond-equivalent (semi-annual): the
            // continuous rate the formulas take is 2·ln(1 + y/2).
            let r = 2.0 * (1.0 + q.value / 2.0).ln();
            (
                Some(r),
                format!(
                    "rate: 3-month Treasury {:.4} % (published {}), as continuous {r:.6}",
                    q.value * 100.0,
                    q.published
                ),
            )
        }
        _ => (
            None,
            format!("rate: 0 (no Treasury yield on {date} in the embedded curve)"),
        ),
    };
    Ok(SymbolMarket {
        spot,
        date,
        volatility,
        rate,
        rate_note,
    })
}

/// Spot, volatility and rate: as given, else from `symbol`'s data; each
/// input not given as a number is named in `sources`.
struct Filled {
    spot: f64,
    volatility: f64,
    rate: f64,
    sources: Vec<String>,
    as_of: Option<NaiveDate>,
}

/// What an option call gives of its market.
struct Given<'a> {
    symbol: Option<&'a str>,
    as_of: Option<&'a str>,
    spot: Option<f64>,
    /// `None` when the tool does not take one (implied volatility).
    volatility: Option<Option<f64>>,
    rate: Option<f64>,
}

async fn fill(data: &MarketData, ctx: &ToolContext, g: Given<'_>) -> Result<Filled, ToolError> {
    let symbol = g.symbol.map(str::trim).filter(|s| !s.is_empty());
    let needs_vol = matches!(g.volatility, Some(None));
    let needs = g.spot.is_none() || needs_vol || g.rate.is_none();
    let Some(sym) = symbol.filter(|_| needs) else {
        let missing = |v: Option<f64>, k: &str| {
            v.ok_or_else(|| {
                ToolError::InvalidArguments(format!(
                    "'{k}' is required unless a 'symbol' is given to read it from"
                ))
            })
        };
        let mut sources = Vec::new();
        if g.rate.is_none() {
            sources.push("rate: not given, so 0".to_string());
        }
        return Ok(Filled {
            spot: missing(g.spot, "spot")?,
            volatility: match g.volatility {
                Some(v) => missing(v, "volatility")?,
                None => f64::NAN,
            },
            rate: g.rate.unwrap_or(0.0),
            sources,
            as_of: None,
        });
    };
    let as_of = opt_date(g.as_of, "as_of")?;
    let m = symbol_market(data, ctx, sym, as_of).await?;
    let mut sources = Vec::new();
    let spot = g.spot.unwrap_or_else(|| {
        sources.push(format!(
            "spot: {sym} adjusted close {} on {}",
            m.spot, m.date
        ));
        m.spot
    });
    let volatility = match (g.volatility, m.volatility) {
        (None, _) => f64::NAN,
        (Some(Some(v)), _) => v,
        (Some(None), Some((v, n))) => {
            sources.push(format!(
                "volatility: {sym} realised, {n} daily returns to {} (ddof 1, × √252) = {v:.6}",
                m.date
            ));
            v
        }
        (Some(None), None) => {
            return Err(ToolError::failed(
                "no_data",
                format!(
                    "{sym} has too little history before {} for a volatility; give 'volatility'",
                    m.date
                ),
            ));
        }
    };
    let rate = g.rate.unwrap_or_else(|| {
        sources.push(m.rate_note.clone());
        m.rate.unwrap_or(0.0)
    });
    Ok(Filled {
        spot,
        volatility,
        rate,
        sources,
        as_of: Some(m.date),
    })
}

/// The strike: as given, else `moneyness` × spot (named in `sources`).
fn strike_of(
    strike: Option<f64>,
    moneyness: Option<f64>,
    spot: f64,
    sources: &mut Vec<String>,
    key: &str,
) -> Result<f64, ToolError> {
    match (strike, moneyness) {
        (Some(k), _) => Ok(k),
        (None, Some(m)) if m.is_finite() && m > 0.0 => {
            sources.push(format!("{key}: {m} × spot = {}", m * spot));
            Ok(m * spot)
        }
        (None, Some(m)) => Err(ToolError::InvalidArguments(format!(
            "'moneyness' must be a number > 0 (1 = at the money), got {m}"
        ))),
        (None, None) => Err(ToolError::InvalidArguments(format!(
            "'{key}' is required: give it, or 'moneyness' (1 = at the money)"
        ))),
    }
}

/// The units line every option answer carries.
const OPTION_UNITS: &str = "QuantLib's conventions: continuous rate and dividend yield; vega per 1.00 of volatility, rho per 1.00 of rate, theta per year as calendar time passes; theta_per_day = theta / 365, vega_per_point = vega / 100";

// ---------------------------------------------------------------------------
// option_price

pub struct OptionPrice {
    data: Arc<MarketData>,
}

/// The tree off the async thread, so the call's deadline fires, watching
/// the call's cancel (docs §2.4); refused at once when its estimate clearly
/// cannot fit the deadline.
async fn american_price(
    inputs: OptionInputs,
    steps: usize,
    ctx: &ToolContext,
) -> Result<crate::research::options::Greeks, ToolError> {
    let name = OptionPrice::NAME;
    // Steps out of range are the tree's own error, said below.
    if steps <= MAX_STEPS {
        guard::refuse_past_deadline(
            name,
            &format!(
                "an American tree of {steps} steps ({:.1e} node updates)",
                crr_nodes(steps)
            ),
            crr_estimate(steps),
            "use fewer steps (500 prices to about a cent)",
        )?;
    }
    let (interrupt, _stop) = guard::interrupt_for(&ctx.cancel);
    guard::compute(name, move || {
        crr_american_within(&inputs, steps, &interrupt)
    })
    .await?
    .map_err(option_error)
}

impl TypedTool for OptionPrice {
    type Args = OptionPriceArgs;
    type Output = OptionPriceOutput;

    const NAME: &'static str = names::OPTION_PRICE;
    const CAPS: Caps = Caps::READ_ONLY.served_as(names::OPTION_PRICE).planner();
    fn description(&self) -> &str {
        "Price a call or put with Greeks: european by Black–Scholes–Merton, american on a Cox–Ross–Rubinstein tree (steps, default 500). QuantLib's units (vega, rho per 1.00; theta per year). Give spot and volatility, or a symbol (and as_of) to take the last close, the 252-day realised volatility and the 3-month Treasury rate from its data."
    }
    async fn run(
        &self,
        args: OptionPriceArgs,
        ctx: &ToolContext,
    ) -> Result<Self::Output, ToolError> {
        let kind = option_kind(&args.kind)?;
        let american = match args.style.as_deref().map(str::trim) {
            None | Some("") | Some("european") => false,
            Some("american") => true,
            Some(other) => {
                return Err(ToolError::InvalidArguments(format!(
                    "style '{other}' is not one of european, american"
                )));
            }
        };
        let mut f = fill(
            &self.data,
            ctx,
            Given {
                symbol: args.symbol.as_deref(),
                as_of: args.as_of.as_deref(),
                spot: args.spot,
                volatility: Some(args.volatility),
                rate: args.rate,
            },
        )
        .await?;
        let strike = strike_of(
            args.strike,
            args.moneyness,
            f.spot,
            &mut f.sources,
            "strike",
        )?;
        if args.dividend_yield.is_none() {
            f.sources.push("dividend_yield: not given, so none".into());
        }
        let inputs = OptionInputs {
            kind,
            spot: f.spot,
            strike,
            expiry_years: args.expiry_years,
            volatility: f.volatility,
            rate: f.rate,
            dividend_yield: args.dividend_yield.unwrap_or(0.0),
        };
        let steps = opt_usize(args.steps, "steps")?.unwrap_or(DEFAULT_STEPS);
        // Delta and gamma come from the tree's second step (docs §15.2):
        // one step would answer `ok` without them.
        if american && steps < 2 {
            return Err(ToolError::InvalidArguments(format!(
                "'steps' must be at least 2 for an american option (its delta and gamma come from the tree's second step), got {steps}"
            )));
        }
        let (g, model) = if american {
            (american_price(inputs, steps, ctx).await?, "crr_binomial")
        } else {
            (
                black_scholes(&inputs).map_err(option_error)?,
                "black_scholes_merton",
            )
        };
        Ok(OptionPriceOutput {
            status: "ok".into(),
            kind: kind.as_str().into(),
            style: if american { "american" } else { "european" }.into(),
            model: model.into(),
            price: g.price,
            delta: g.delta,
            gamma: g.gamma,
            vega: g.vega,
            theta: g.theta,
            rho: g.rho,
            theta_per_day: g.theta / 365.0,
            vega_per_point: g.vega / 100.0,
            inputs: used(&inputs, american.then_some(steps), f.sources, f.as_of),
            symbol: args.symbol.clone(),
            units: OPTION_UNITS.into(),
        })
    }
}

fn used(
    i: &OptionInputs,
    steps: Option<usize>,
    sources: Vec<String>,
    as_of: Option<NaiveDate>,
) -> OptionInputsUsed {
    OptionInputsUsed {
        as_of: as_of.map(|d| d.to_string()),
        spot: i.spot,
        strike: Some(i.strike),
        expiry_years: i.expiry_years,
        volatility: i.volatility,
        rate: i.rate,
        dividend_yield: i.dividend_yield,
        steps,
        sources,
    }
}

// ---------------------------------------------------------------------------
// implied_volatility

pub struct ImpliedVolatility {
    data: Arc<MarketData>,
}

impl TypedTool for ImpliedVolatility {
    type Args = ImpliedVolatilityArgs;
    type Output = ImpliedVolatilityOutput;

    const NAME: &'static str = names::IMPLIED_VOLATILITY;
    const CAPS: Caps = Caps::READ_ONLY
        .served_as(names::IMPLIED_VOLATILITY)
        .planner();
    fn description(&self) -> &str {
        "The Black–Scholes–Merton volatility at which a European call or put is worth a given price (continuous rate and dividend yield). A price outside the no-arbitrage bounds is an error that states the bounds. Spot and rate as given, or from a symbol's data."
    }
    async fn run(
        &self,
        args: ImpliedVolatilityArgs,
        ctx: &ToolContext,
    ) -> Result<Self::Output, ToolError> {
        let kind = option_kind(&args.kind)?;
        let mut f = fill(
            &self.data,
            ctx,
            Given {
                symbol: args.symbol.as_deref(),
                as_of: args.as_of.as_deref(),
                spot: args.spot,
                volatility: None,
                rate: args.rate,
            },
        )
        .await?;
        let strike = strike_of(
            args.strike,
            args.moneyness,
            f.spot,
            &mut f.sources,
            "strike",
        )?;
        if args.dividend_yield.is_none() {
            f.sources.push("dividend_yield: not given, so none".into());
        }
        let q = args.dividend_yield.unwrap_or(0.0);
        let iv = implied_volatility(
            kind,
            f.spot,
            strike,
            args.expiry_years,
            args.price,
            f.rate,
            q,
        )
        .map_err(option_error)?;
        let inputs = OptionInputs {
            kind,
            spot: f.spot,
            strike,
            expiry_years: args.expiry_years,
            volatility: iv.volatility,
            rate: f.rate,
            dividend_yield: q,
        };
        let check = black_scholes(&inputs).map_err(option_error)?;
        Ok(ImpliedVolatilityOutput {
            status: "ok".into(),
            kind: kind.as_str().into(),
            volatility: iv.volatility,
            iterations: iv.iterations,
            price_check: check.price,
            inputs: used(&inputs, None, f.sources, f.as_of),
            symbol: args.symbol.clone(),
        })
    }
}

// ---------------------------------------------------------------------------
// option_strategy

pub struct OptionStrategy {
    data: Arc<MarketData>,
}

fn leg_of(i: usize, l: &LegArgs, spot: f64, sources: &mut Vec<String>) -> Result<Leg, ToolError> {
    let kind = match l.kind.trim().to_ascii_lowercase().as_str() {
        "call" => LegKind::Call,
        "put" => LegKind::Put,
        "stock" | "underlying" | "shares" => LegKind::Stock,
        other => {
            return Err(ToolError::InvalidArguments(format!(
                "legs[{i}].kind '{other}' is not one of call, put, stock"
            )));
        }
    };
    let strike = match (kind, l.strike, l.moneyness) {
        (LegKind::Stock, ..) | (_, Some(_), _) | (_, None, None) => l.strike,
        (_, None, Some(_)) => Some(strike_of(
            None,
            l.moneyness,
            spot,
            sources,
            &format!("legs[{i}].strike"),
        )?),
    };
    Ok(Leg {
        kind,
        strike,
        quantity: l.quantity,
        premium: l.premium,
    })
}

impl TypedTool for OptionStrategy {
    type Args = OptionStrategyArgs;
    type Output = OptionStrategyOutput;

    const NAME: &'static str = names::OPTION_STRATEGY;
    const CAPS: Caps = Caps::READ_ONLY.served_as(names::OPTION_STRATEGY).planner();
    fn description(&self) -> &str {
        "Analyse a position of option and stock legs (quantity negative = short; premium absent = Black–Scholes–Merton price): payoff at expiry over a spot grid, exact breakevens, max profit and max loss (null when unbounded), net premium, the position's Greeks and a spot × volatility stress table. Spot and volatility as given or from a symbol's data."
    }
    async fn run(
        &self,
        args: OptionStrategyArgs,
        ctx: &ToolContext,
    ) -> Result<Self::Output, ToolError> {
        let range = match args.spot_range.as_deref() {
            None => None,
            Some([lo, hi]) => Some((*lo, *hi)),
            Some(other) => {
                return Err(ToolError::InvalidArguments(format!(
                    "'spot_range' must be [low, high], got {} numbers",
                    other.len()
                )));
            }
        };
        let points = opt_usize(args.points, "points")?;
        let mut f = fill(
            &self.data,
            ctx,
            Given {
                symbol: args.symbol.as_deref(),
                as_of: args.as_of.as_deref(),
                spot: args.spot,
                volatility: Some(args.volatility),
                rate: args.rate,
            },
        )
        .await?;
        let legs = args
            .legs
            .iter()
            .enumerate()
            .map(|(i, l)| leg_of(i, l, f.spot, &mut f.sources))
            .collect::<Result<Vec<_>, _>>()?;
        if args.dividend_yield.is_none() {
            f.sources.push("dividend_yield: not given, so none".into());
        }
        let market = Market {
            spot: f.spot,
            volatility: f.volatility,
            expiry_years: args.expiry_years,
            rate: f.rate,
            dividend_yield: args.dividend_yield.unwrap_or(0.0),
        };
        let r = strategy::analyze(&legs, &market, range, points).map_err(option_error)?;
        Ok(strategy_output(r, &market, f, args.symbol.clone()))
    }
}

fn strategy_output(
    r: strategy::StrategyResult,
    m: &Market,
    f: Filled,
    symbol: Option<String>,
) -> OptionStrategyOutput {
    OptionStrategyOutput {
        status: "ok".into(),
        position: r.name.clone(),
        legs: r
            .legs
            .iter()
            .map(|l| PricedLegOutput {
                kind: l.kind.as_str().into(),
                strike: l.strike,
                quantity: l.quantity,
                premium: l.premium,
                premium_from_model: l.premium_from_model,
            })
            .collect(),
        net_premium: r.net_premium,
        payoff: r
            .payoff
            .iter()
            .map(|(spot, pnl)| PayoffPoint {
                spot: *spot,
                pnl: *pnl,
            })
            .collect(),
        breakevens: r.breakevens,
        max_profit: r.max_profit,
        max_loss: r.max_loss,
        greeks: GreeksOutput {
            value: r.greeks.price,
            delta: r.greeks.delta,
            gamma: r.greeks.gamma,
            vega: r.greeks.vega,
            theta: r.greeks.theta,
            rho: r.greeks.rho,
        },
        stress: r
            .stress
            .iter()
            .map(|s| StressOutput {
                spot_shift: s.spot_shift,
                volatility_shift: s.volatility_shift,
                value: s.value,
                pnl: s.pnl,
            })
            .collect(),
        inputs: OptionInputsUsed {
            spot: m.spot,
            strike: None,
            expiry_years: m.expiry_years,
            volatility: m.volatility,
            rate: m.rate,
            dividend_yield: m.dividend_yield,
            steps: None,
            sources: f.sources,
            as_of: f.as_of.map(|d| d.to_string()),
        },
        symbol,
    }
}

// ---------------------------------------------------------------------------
// Returns from symbols or inline.

/// Named daily return columns, with dates when they came from market data.
pub(crate) struct Returns {
    pub(crate) names: Vec<String>,
    pub(crate) columns: Vec<Vec<f64>>,
    /// The close dates (one more than the returns), market data only.
    pub(crate) dates: Option<Vec<NaiveDate>>,
    pub(crate) data: ReturnsData,
}

/// The risk-free rate a tool's Sharpe is measured over (docs §15.1.1),
/// one convention for every tool: the `risk_free` a call gives (annual,
/// decimal), else the embedded 3-month T-bill on the returns' own dates
/// as the backtest measures it, else zero with the reason.
pub(crate) struct SharpeRate {
    /// The daily rate of each return (its end date's yield y as
    /// (1 + y)^(1/252) − 1).
    pub(crate) per_return: Vec<f64>,
    /// A year of it: the given rate, else 252 × the mean daily rate.
    pub(crate) annual: f64,
    /// What it is, in words, with its source.
    pub(crate) basis: String,
}

/// [`SharpeRate`] for `n` returns ending on `dates[1..]` (`dates` has one
/// more: the close before the first return).
pub(crate) fn sharpe_rate(
    given: Option<f64>,
    dates: Option<&[NaiveDate]>,
    n: usize,
) -> Result<SharpeRate, ToolError> {
    if let Some(x) = given {
        let x = rate("risk_free", x)?;
        let daily = (1.0 + x).powf(1.0 / 252.0) - 1.0;
        return Ok(SharpeRate {
            per_return: vec![daily; n],
            annual: x,
            basis: format!(
                "excess over the risk_free rate given, {:.4} % a year",
                x * 100.0
            ),
        });
    }
    let why = match dates.filter(|d| d.len() == n + 1) {
        Some(d) => {
            let rf = crate::research::data::rates::per_bar(d, 252.0);
            if rf.label == "treasury_3m" {
                let per_return = rf.per_bar.get(1..).map(<[f64]>::to_vec).unwrap_or_default();
                let annual = 252.0 * per_return.iter().sum::<f64>() / n.max(1) as f64;
                let note = rf.note.map(|n| format!("; {n}")).unwrap_or_default();
                return Ok(SharpeRate {
                    per_return,
                    annual,
                    basis: format!(
                        "excess over the 3-month T-bill on the same dates ({}; mean {:.4} % a year{note})",
                        crate::research::data::rates::ATTRIBUTION,
                        annual * 100.0
                    ),
                });
            }
            rf.note
                .unwrap_or_else(|| "the Treasury curve does not cover the dates".into())
        }
        None => "returns given without dates".into(),
    };
    Ok(SharpeRate {
        per_return: vec![0.0; n],
        annual: 0.0,
        basis: format!("a zero risk-free rate ({why}; give risk_free to set one)"),
    })
}

pub(crate) async fn returns_from(
    data: &MarketData,
    ctx: &ToolContext,
    symbols: Option<&[String]>,
    inline: Option<&NamedSeries>,
    start: Option<&str>,
    end: Option<&str>,
) -> Result<Returns, ToolError> {
    match (symbols, inline) {
        (Some(_), Some(_)) => Err(ToolError::InvalidArguments(
            "give either 'symbols' or 'returns', not both".into(),
        )),
        (None, None) => Err(ToolError::InvalidArguments(
            "give 'symbols' (with start and end) or inline 'returns' ({\"name\": [r, …]})".into(),
        )),
        (None, Some(series)) => {
            if series.0.is_empty() || series.0.len() > MAX_SERIES {
                return Err(ToolError::InvalidArguments(format!(
                    "'returns' needs 1 to {MAX_SERIES} series, got {}",
                    series.0.len()
                )));
            }
            check_returns(
                "returns",
                series.0.iter().map(|(n, c)| (n.as_str(), c.as_slice())),
            )?;
            let days = series.0[0].1.len();
            Ok(Returns {
                names: series.0.iter().map(|(n, _)| n.clone()).collect(),
                columns: series.0.iter().map(|(_, c)| c.clone()).collect(),
                dates: None,
                data: ReturnsData {
                    origin: "inline".into(),
                    days,
                    ..ReturnsData::default()
                },
            })
        }
        (Some(symbols), None) => load_symbols(data, ctx, symbols, start, end).await,
    }
}

async fn load_symbols(
    data: &MarketData,
    ctx: &ToolContext,
    symbols: &[String],
    start: Option<&str>,
    end: Option<&str>,
) -> Result<Returns, ToolError> {
    if symbols.is_empty() || symbols.len() > MAX_SERIES {
        return Err(ToolError::InvalidArguments(format!(
            "'symbols' needs 1 to {MAX_SERIES} tickers, got {}",
            symbols.len()
        )));
    }
    let (start, end) = (opt_date(start, "start")?, opt_date(end, "end")?);
    let mut loaded = Vec::with_capacity(symbols.len());
    let mut seen = std::collections::BTreeSet::new();
    for s in symbols {
        let s = nonempty(s, "symbols")?;
        if !seen.insert(s.to_ascii_uppercase()) {
            return Err(ToolError::InvalidArguments(format!(
                "{s} is listed twice in 'symbols'"
            )));
        }
        let series = fetch(data, ctx, DataRequest::new(s).range(start, end)).await?;
        loaded.push(series);
    }
    let named: Vec<(String, &data::Bars)> =
        loaded.iter().map(|s| (s.symbol.clone(), &s.bars)).collect();
    let aligned =
        aligned_returns(&named).map_err(|e| ToolError::failed("no_data", e.to_string()))?;
    let mut notes = grouped_notes(loaded.iter().flat_map(|s| {
        s.provenance
            .notes
            .iter()
            .map(|n| (s.symbol.as_str(), n.as_str()))
    }));
    let dropped: Vec<String> = loaded
        .iter()
        .filter(|s| s.bars.len() > aligned.dates.len())
        .map(|s| {
            format!(
                "{} ({} of {} days)",
                s.symbol,
                aligned.dates.len(),
                s.bars.len()
            )
        })
        .collect();
    if !dropped.is_empty() {
        notes.push(format!(
            "only the dates every symbol traded are used: {}",
            dropped.join(", ")
        ));
    }
    Ok(Returns {
        data: ReturnsData {
            origin: "market data".into(),
            start: aligned.dates.first().map(ToString::to_string),
            end: aligned.dates.last().map(ToString::to_string),
            days: aligned.columns.first().map_or(0, Vec::len),
            sources: loaded
                .iter()
                .map(|s| format!("{}: {}", s.symbol, s.provenance.source.as_str()))
                .collect(),
            notes,
        },
        names: aligned.names,
        columns: aligned.columns,
        dates: Some(aligned.dates),
    })
}

/// Data notes, one per distinct note: symbols whose notes differ only by
/// their own name share one ("AAPL, MSFT: partial coverage: the embedded
/// set holds each from …"), so a basket of ten does not repeat it ten times.
fn grouped_notes<'a>(notes: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<String> {
    // (the note with its symbol as "each", the symbols, the first note as written)
    let mut groups: Vec<(String, Vec<&str>, &str)> = Vec::new();
    for (symbol, note) in notes {
        let shape = replace_word(note, symbol, "each");
        match groups.iter_mut().find(|(s, _, _)| *s == shape) {
            Some((_, symbols, _)) => symbols.push(symbol),
            None => groups.push((shape, vec![symbol], note)),
        }
    }
    groups
        .into_iter()
        .map(|(shape, symbols, note)| match symbols.as_slice() {
            [one] => format!("{one}: {note}"),
            many => format!("{}: {shape}", many.join(", ")),
        })
        .collect()
}

/// `text` with each whole-word `word` (not part of a longer name)
/// replaced by `with`.
fn replace_word(text: &str, word: &str, with: &str) -> String {
    if word.is_empty() {
        return text.to_string();
    }
    let joined = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (i, _) in text.match_indices(word) {
        let end = i + word.len();
        if joined(text[..i].chars().next_back()) || joined(text[end..].chars().next()) {
            continue;
        }
        out.push_str(&text[copied..i]);
        out.push_str(with);
        copied = end;
    }
    out.push_str(&text[copied..]);
    out
}

/// By name, in the order the symbols were asked: a small model reads the
/// weights of "AAPL, MSFT and IBM" in that order (measured: given them
/// alphabetically, the 1.5B model paired IBM's weight with MSFT).
fn by_name(names: &[String], values: &[f64]) -> indexmap::IndexMap<String, f64> {
    names.iter().cloned().zip(values.iter().copied()).collect()
}

// ---------------------------------------------------------------------------
// portfolio_optimize

pub struct PortfolioOptimize {
    data: Arc<MarketData>,
}

/// The covariance argument.
fn covariance_arg(s: Option<&str>) -> Result<CovarianceKind, ToolError> {
    match s.map(str::trim) {
        None | Some("") | Some("sample") => Ok(CovarianceKind::Sample),
        Some("ledoit_wolf") | Some("ledoit-wolf") => Ok(CovarianceKind::LedoitWolf),
        Some(other) => Err(ToolError::InvalidArguments(format!(
            "covariance '{other}' is not one of sample, ledoit_wolf"
        ))),
    }
}

/// A portfolio method by name.
pub fn method_arg(s: &str) -> Result<Method, ToolError> {
    Method::parse(s).ok_or_else(|| {
        ToolError::InvalidArguments(format!(
            "method '{}' is not one of {}",
            s.trim(),
            Method::names()
        ))
    })
}

impl TypedTool for PortfolioOptimize {
    type Args = PortfolioOptimizeArgs;
    type Output = PortfolioOptimizeOutput;

    const NAME: &'static str = names::PORTFOLIO_OPTIMIZE;
    const CAPS: Caps = Caps::READ_ONLY
        .served_as(names::PORTFOLIO_OPTIMIZE)
        .planner();
    fn description(&self) -> &str {
        "Long-only portfolio weights (summing to 1, within min_weight..max_weight) by equal_weight, inverse_volatility, min_variance, max_sharpe, risk_parity, max_diversification or hrp, on symbols' daily returns over start..end or inline returns; μ = mean daily return × 252, Σ = sample (ddof 1) or ledoit_wolf covariance × 252. Returns weights, expected return, volatility, Sharpe and risk contributions."
    }
    // Inline `returns` left out: offered them, the 1.5B model filled
    // them with placeholders beside the symbols it had named.
    fn lean_properties(&self) -> Option<&[&str]> {
        Some(&[
            "symbols",
            "start",
            "end",
            "method",
            "min_weight",
            "max_weight",
        ])
    }
    async fn run(
        &self,
        args: PortfolioOptimizeArgs,
        ctx: &ToolContext,
    ) -> Result<Self::Output, ToolError> {
        let method = method_arg(&args.method)?;
        let covariance = covariance_arg(args.covariance.as_deref())?;
        let r = returns_from(
            &self.data,
            ctx,
            args.symbols.as_deref(),
            args.returns.as_ref(),
            args.start.as_deref(),
            args.end.as_deref(),
        )
        .await?;
        let days = r.columns.first().map_or(0, Vec::len);
        // A rate out of range is refused under the name the call used.
        let given = match (args.risk_free, args.risk_free_rate) {
            (Some(x), _) => Some(rate("risk_free", x)?),
            (None, Some(x)) => Some(rate("risk_free_rate", x)?),
            (None, None) => None,
        };
        let rf = sharpe_rate(given, r.dates.as_deref(), days)?;
        let o = OptimizeOptions {
            method,
            risk_free_rate: rf.annual,
            min_weight: args.min_weight.unwrap_or(0.0),
            max_weight: args.max_weight.unwrap_or(1.0),
            covariance,
        };
        // The optimizer off the async threads, watching the deadline (§2.4).
        let (columns, names) = (r.columns, r.names.clone());
        let p = guard::compute_interruptible(Self::NAME, &ctx.cancel, move || {
            portfolio::optimize(&columns, &names, &o)
        })
        .await?
        .map_err(portfolio_error)?;
        Ok(PortfolioOptimizeOutput {
            status: "ok".into(),
            method: method.as_str().into(),
            covariance: covariance.as_str().into(),
            weights: by_name(&r.names, &p.weights),
            expected_return: p.expected_return,
            volatility: p.volatility,
            sharpe: p.sharpe,
            risk_contributions: by_name(&r.names, &p.risk_contributions),
            risk_free_rate: o.risk_free_rate,
            min_weight: o.min_weight,
            max_weight: o.max_weight,
            shrinkage: p.shrinkage,
            data: r.data,
            risk_free: rf.basis,
            conventions: "annual: μ = mean daily simple return × 252, Σ = covariance × 252 (sample: ddof 1); Sharpe = (μᵀw − risk_free_rate) / √(wᵀΣw), risk_free_rate a year as `risk_free` says (docs §15.1.1); risk contribution = w_i·(Σw)_i / wᵀΣw".into(),
        })
    }
}

// ---------------------------------------------------------------------------
// risk_report

pub struct RiskReport {
    data: Arc<MarketData>,
}

/// The weights for `names`: as given by name (every name, no other), or
/// equal.
pub(crate) fn weights_for(
    names: &[String],
    given: Option<&BTreeMap<String, f64>>,
) -> Result<Vec<f64>, ToolError> {
    let Some(given) = given else {
        return Ok(vec![1.0 / names.len() as f64; names.len()]);
    };
    let lookup = |n: &str| {
        given
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| *v)
    };
    if let Some(extra) = given
        .keys()
        .find(|k| !names.iter().any(|n| n.eq_ignore_ascii_case(k)))
    {
        return Err(ToolError::InvalidArguments(format!(
            "weights name '{extra}', which is not among {}",
            names.join(", ")
        )));
    }
    names
        .iter()
        .map(|n| {
            lookup(n)
                .ok_or_else(|| ToolError::InvalidArguments(format!("weights has no entry for {n}")))
        })
        .collect()
}

impl TypedTool for RiskReport {
    type Args = RiskReportArgs;
    type Output = RiskReportOutput;

    const NAME: &'static str = names::RISK_REPORT;
    const CAPS: Caps = Caps::READ_ONLY.served_as(names::RISK_REPORT).planner();
    fn description(&self) -> &str {
        "Risk of one return series or a weighted book (symbols + weights over start..end, or inline returns): historical, normal and Cornish–Fisher VaR and expected shortfall at a confidence (default 0.95) over horizon_days (default 1), annual volatility, max drawdown and the five deepest drawdowns, component VaR, HHI and effective number of assets. Losses are positive fractions."
    }
    // As portfolio_optimize's: the symbols, not invented inline returns.
    fn lean_properties(&self) -> Option<&[&str]> {
        Some(&[
            "symbols",
            "weights",
            "start",
            "end",
            "confidence",
            "horizon_days",
        ])
    }
    async fn run(
        &self,
        args: RiskReportArgs,
        ctx: &ToolContext,
    ) -> Result<Self::Output, ToolError> {
        let r = returns_from(
            &self.data,
            ctx,
            args.symbols.as_deref(),
            args.returns.as_ref(),
            args.start.as_deref(),
            args.end.as_deref(),
        )
        .await?;
        let weights = weights_for(&r.names, args.weights.as_ref())?;
        let confidence = args.confidence.unwrap_or(0.95);
        let horizon = opt_usize(args.horizon_days, "horizon_days")?.unwrap_or(1);
        let rep =
            risk::risk_report(&r.columns, &weights, confidence, horizon).map_err(risk_error)?;
        let at = |i: usize| match &r.dates {
            Some(d) => d
                .get(i)
                .map_or(serde_json::Value::Null, |d| d.to_string().into()),
            None => i.into(),
        };
        Ok(RiskReportOutput {
            status: "ok".into(),
            confidence,
            horizon_days: horizon,
            var_historical: rep.var_historical,
            es_historical: rep.es_historical,
            var_parametric: rep.var_parametric,
            es_parametric: rep.es_parametric,
            var_cornish_fisher: rep.var_cornish_fisher,
            volatility: rep.volatility,
            max_drawdown: rep.max_drawdown,
            drawdowns: rep
                .drawdowns
                .iter()
                .map(|d| DrawdownOutput {
                    peak: at(d.peak),
                    trough: at(d.trough),
                    recovery: d.recovery.map_or(serde_json::Value::Null, at),
                    depth: d.depth,
                })
                .collect(),
            component_var: by_name(&r.names, &rep.component_var),
            hhi: rep.hhi,
            effective_n: rep.effective_n,
            weights: by_name(&r.names, &weights),
            skewness: rep.skewness,
            excess_kurtosis: rep.excess_kurtosis,
            data: r.data,
            conventions: conventions(horizon),
        })
    }
}

fn conventions(h: usize) -> String {
    let horizon = if h == 1 {
        "one day".to_string()
    } else {
        format!(
            "{h} days: historical over overlapping {h}-day sums of daily returns; parametric and Cornish–Fisher with the mean × {h} and the standard deviation × √{h} (skewness / √{h}, excess kurtosis / {h})"
        )
    };
    format!(
        "losses as positive fractions of the book; book return = Σ weight × daily simple return (rebalanced daily); historical VaR = −quantile (numpy linear) and ES = mean loss at or beyond it; parametric normal with the sample mean and standard deviation (ddof 1); Cornish–Fisher with population skewness and excess kurtosis; volatility annualised × √252; component VaR = Euler shares of the parametric VaR; horizon {horizon}"
    )
}

// Each is made of the shared market data alone.
built_from_data!(
    OptionPrice,
    ImpliedVolatility,
    OptionStrategy,
    PortfolioOptimize,
    RiskReport
);

#[cfg(test)]
mod tests {

    #[test]
    fn notes_differing_only_by_symbol_are_said_once() {
        let n = |s: &str| {
            format!("partial coverage: the embedded set holds {s} from 2000-01-03 to 2017-11-10")
        };
        let (a, m, t) = (n("AAPL"), n("MSFT"), n("T"));
        let notes = grouped_notes(
            [
                ("AAPL", a.as_str()),
                ("MSFT", m.as_str()),
                ("T", t.as_str()),
                ("XOM", "fell back to stooq"),
            ]
            .into_iter(),
        );
        assert_eq!(
            notes,
            [
                "AAPL, MSFT, T: partial coverage: the embedded set holds each from 2000-01-03 to 2017-11-10",
                "XOM: fell back to stooq",
            ]
        );
        // A lone note is kept as written; a symbol inside a word is no symbol.
        assert_eq!(
            grouped_notes([("T", "Treasury T bill")].into_iter()),
            ["T: Treasury T bill"]
        );
        assert_eq!(replace_word("TT T xT T.", "T", "_"), "TT _ xT _.");
    }

    use serde_json::json;

    use super::*;
    use crate::tools::builtin::testkit::{assert_plain_object, call};

    /// The generated schemas are plain objects that every provider takes:
    /// no references, titles, formats or null types (as typed.rs checks
    /// for the other built-ins).
    #[test]
    fn schemas_are_plain_objects_with_their_enums() {
        use crate::model::contract::parameters_schema;
        let schemas = [
            parameters_schema::<OptionPriceArgs>(),
            parameters_schema::<ImpliedVolatilityArgs>(),
            parameters_schema::<OptionStrategyArgs>(),
            parameters_schema::<PortfolioOptimizeArgs>(),
            parameters_schema::<RiskReportArgs>(),
        ];
        schemas.iter().for_each(assert_plain_object);
        assert_eq!(
            schemas[0]["properties"]["kind"]["enum"],
            json!(["call", "put"])
        );
        assert_eq!(
            schemas[2]["properties"]["legs"]["items"]["properties"]["kind"]["enum"],
            json!(["call", "put", "stock"])
        );
        assert_eq!(schemas[3]["required"], json!(["method"]));
        assert_eq!(
            schemas[4]["properties"]["returns"]["additionalProperties"]["items"]["type"],
            "number"
        );
    }

    #[tokio::test]
    async fn an_option_is_priced_with_the_inputs_given() {
        let v = call(
            "option_price",
            json!({"kind": "call", "spot": 100, "strike": 100, "expiry_years": 1, "volatility": 0.2, "rate": 0.05}),
        )
        .await
        .unwrap();
        assert!(
            (v["price"].as_f64().unwrap() - 10.450_583_572_185_565).abs() < 1e-12,
            "{v}"
        );
        assert_eq!(v["model"], "black_scholes_merton");
        // Only the defaulted input is named; the others were given.
        assert_eq!(
            v["inputs"]["sources"],
            json!(["dividend_yield: not given, so none"])
        );
    }

    /// Issue 35: a rate of 1000, a −200 % or ±1e308 return and a one-step
    /// american tree answered `ok` with nulls (or a 210 % drawdown); each is
    /// refused now, naming the input and its range (docs §15.1, §15.4).
    #[tokio::test]
    async fn inputs_without_a_meaningful_answer_are_refused() {
        let base = json!({"kind": "call", "spot": 100, "strike": 100, "expiry_years": 1, "volatility": 0.2});
        for (key, value, needle) in [
            (
                "rate",
                json!(1000),
                "'rate' must be from -1 to 1 (a fraction a year), got 1000",
            ),
            (
                "dividend_yield",
                json!(-5),
                "'dividend_yield' must be from -1 to 1",
            ),
            (
                "volatility",
                json!(1e15),
                "'volatility' must be from 0.0001 to 10",
            ),
            (
                "spot",
                json!(5e-324),
                "'spot' must be from 0.000001 to 1000000000",
            ),
        ] {
            let mut args = base.clone();
            args[key] = value;
            let e = call("option_price", args).await.unwrap_err();
            assert!(e.contains(needle), "{key}: {e}");
        }
        let mut args = base.clone();
        args["style"] = json!("american");
        args["steps"] = json!(1);
        let e = call("option_price", args).await.unwrap_err();
        assert!(
            e.contains("'steps' must be at least 2 for an american option"),
            "{e}"
        );

        let mut r = vec![0.01; 30];
        for (bad, shown) in [(-2.0, "-2.0"), (1e308, "1e308"), (-1e308, "-1e308")] {
            r[3] = bad;
            for tool in ["risk_report", "portfolio_optimize"] {
                let mut args = json!({"returns": {"a": r, "b": vec![0.002; 30]}});
                if tool == "portfolio_optimize" {
                    args["method"] = json!("equal_weight");
                }
                let e = call(tool, args).await.unwrap_err();
                assert!(
                    e.contains(&format!(
                        "a[3] = {shown} is not a daily simple return from -1"
                    )),
                    "{tool}: {e}"
                );
            }
        }
        let e = call(
            "portfolio_optimize",
            json!({"method": "max_sharpe", "returns": {"a": [0.01, 0.02, -0.01], "b": [0.0, 0.01, 0.02]}, "risk_free_rate": 1000}),
        )
        .await
        .unwrap_err();
        assert!(
            e.contains("'risk_free_rate' must be a rate a year from -1 to 1"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_symbol_fills_spot_volatility_and_rate_and_says_so() {
        let v = call(
            "option_price",
            json!({"kind": "put", "strike": 20, "expiry_years": 0.25, "symbol": "AAPL", "as_of": "2010-06-30"}),
        )
        .await
        .unwrap();
        let sources: Vec<String> = serde_json::from_value(v["inputs"]["sources"].clone()).unwrap();
        assert_eq!(sources.len(), 4, "{v}");
        assert!(
            sources[0].starts_with("spot: AAPL adjusted close ")
                && sources[0].ends_with(" on 2010-06-30"),
            "{sources:?}"
        );
        assert!(
            sources[1].contains("252 daily returns to 2010-06-30"),
            "{sources:?}"
        );
        assert!(
            sources[2].starts_with("rate: 3-month Treasury "),
            "{sources:?}"
        );
        let vol = v["inputs"]["volatility"].as_f64().unwrap();
        assert!(vol > 0.1 && vol < 1.0, "{v}");
    }

    #[tokio::test]
    async fn a_missing_spot_without_a_symbol_is_named() {
        let e = call(
            "option_price",
            json!({"kind": "call", "strike": 100, "expiry_years": 1, "volatility": 0.2}),
        )
        .await
        .unwrap_err();
        assert_eq!(
            e,
            "invalid arguments: 'spot' is required unless a 'symbol' is given to read it from"
        );
    }

    #[tokio::test]
    async fn implied_volatility_outside_the_bounds_states_them() {
        let e = call(
            "implied_volatility",
            json!({"kind": "call", "spot": 100, "strike": 90, "expiry_years": 1, "price": 5}),
        )
        .await
        .unwrap_err();
        assert!(
            e.contains("outside the no-arbitrage bounds (10, 100)"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn portfolio_weights_come_back_by_name() {
        let v = call(
            "portfolio_optimize",
            json!({"symbols": ["AAPL", "MSFT", "IBM"], "start": "2010-01-01", "end": "2011-12-31", "method": "min_variance"}),
        )
        .await
        .unwrap();
        // In the order asked, not alphabetical.
        let order: Vec<&str> = v["weights"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(order, ["AAPL", "MSFT", "IBM"]);
        let w: BTreeMap<String, f64> = serde_json::from_value(v["weights"].clone()).unwrap();
        assert!((w.values().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(v["data"]["start"], "2010-01-04");
        assert_eq!(v["data"]["origin"], "market data");
        let e = call(
            "portfolio_optimize",
            json!({"returns": {"a": [0.01, 0.02, -0.01], "b": [0.0, 0.01, 0.02]}, "method": "min_variance", "max_weight": 0.4}),
        )
        .await
        .unwrap_err();
        assert!(e.contains("infeasible bounds: 2 assets"), "{e}");
    }

    #[tokio::test]
    async fn risk_report_dates_its_drawdowns() {
        let v = call(
            "risk_report",
            json!({"symbols": ["AAPL", "MSFT"], "weights": {"AAPL": 0.5, "MSFT": 0.5}, "start": "2008-01-01", "end": "2008-12-31", "confidence": 0.99}),
        )
        .await
        .unwrap();
        let dd = &v["drawdowns"][0];
        assert!(dd["peak"].as_str().unwrap().starts_with("2008-"), "{v}");
        assert!(v["var_historical"].as_f64().unwrap() > 0.0);
        assert!(v["es_historical"].as_f64().unwrap() >= v["var_historical"].as_f64().unwrap());
        let e = call(
            "risk_report",
            json!({"symbols": ["AAPL"], "weights": {"MSFT": 1}, "start": "2008-01-01", "end": "2008-12-31"}),
        )
        .await
        .unwrap_err();
        assert!(
            e.contains("weights name 'MSFT', which is not among AAPL"),
            "{e}"
        );
    }
}
