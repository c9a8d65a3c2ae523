//! Each tool the planner drives, in one place: what a request carries for
//! it, requests it serves, how a request becomes the call's arguments and
//! how the answer is written from its typed result. Keyed by the tool's
//! manifest name (`model::names`); a tool the manifest marks for the
//! planner without a row here fails `tests/engine/planner_intents.rs`
//! (docs §2.11, `docs/extending.md`).
//!
//! The table's order is the routing order: the first row whose `read`
//! takes a request wins, so the narrower reading comes first (a sweep
//! before the backtest it would otherwise read as, a book's risk before a
//! portfolio, a named test before an indicator).

use serde_json::Value;

use super::{
    PlannedCall, backtest_answer, backtest_read, compact_read, factor, indicator_answer,
    indicator_read, market_data_read, prices_answer, quant, recall_read, remember_answer,
    remember_read, screen, stats, sweep, tearsheet, typed,
};
use crate::model::names as tool;

/// How the planner drives one tool.
pub struct Intent {
    /// The tool's manifest name.
    pub tool: &'static str,
    /// What a request carries that becomes the call's arguments.
    pub reads: &'static str,
    /// Requests this row serves (a test routes each one here).
    pub examples: &'static [&'static str],
    /// The call for a request that asks for this tool, else `None`.
    pub read: fn(&str) -> Option<PlannedCall>,
    /// The answer from the tool's result (`None`: not its output type,
    /// shown as it came).
    pub answer: fn(&str, &Value) -> Option<String>,
    /// Whether the answer says how the request's dates were read.
    pub dated: bool,
}

/// The planner's tools in routing order.
pub const INTENTS: &[Intent] = &[
    Intent {
        tool: tool::COMPACT,
        reads: "\"compact\" and an optional focus topic after it",
        examples: &["compact", "compact the context", "/compact fees"],
        read: compact_read,
        answer: |_, _| {
            Some(
                "Done: the conversation will be compacted into a summary now (watch the gauge).\n"
                    .into(),
            )
        },
        dated: false,
    },
    Intent {
        tool: tool::FACTOR_SCREEN,
        reads: "\"screen\" with the alphas or factors: the bundled alpha101 library, the symbols (default: the offline market's stocks), the window, the horizons, quantiles, how many to list (docs §17.11)",
        examples: &[
            "screen the 101 alphas on the offline universe 2005–2017",
            "screen alpha101 over 2010-2015 with horizons 1 and 5",
        ],
        read: screen::read,
        answer: screen::answer,
        dated: true,
    },
    Intent {
        tool: tool::TEARSHEET,
        reads: "\"tear sheet\" and a backtest run (its id, or the last backtest) or a held book's tickers and weights, the benchmark after \"against\", the period (docs §20.1)",
        examples: &[
            "tear sheet of SPY 2005-2017",
            "tearsheet for the last backtest",
        ],
        read: tearsheet::read,
        answer: tearsheet::answer,
        dated: true,
    },
    Intent {
        tool: tool::REMEMBER,
        reads: "\"remember that …\" (saved as a user preference, its first eight words the title); \"what do you remember/know about …\" (searched)",
        examples: &[
            "remember that I prefer 10 bp fees",
            "what do you remember about fees",
        ],
        read: remember_read,
        answer: |_, v| typed(v).map(|o| remember_answer(&o)),
        dated: false,
    },
    Intent {
        tool: tool::RECALL,
        reads: "\"recall …\", \"search my memories for …\": the keywords",
        examples: &[
            "recall transaction costs",
            "search my memories for momentum",
        ],
        read: recall_read,
        answer: |_, v| typed(v).map(|o| remember_answer(&o)),
        dated: false,
    },
    Intent {
        tool: tool::SWEEP,
        reads: "the rule, its swept parameters with their ranges and steps, the symbols, the period, walk-forward or a split (docs §18.8)",
        examples: &[
            "sweep the SMA crossover fast 5 to 30 and slow 50 to 200 on AAPL, MSFT from 2005 to 2015",
            "walk-forward sweep of momentum on IBM",
        ],
        read: sweep::read,
        answer: |r, v| sweep::answer(r, v),
        dated: false,
    },
    Intent {
        tool: tool::VOLATILITY_MODEL,
        reads: "the model (GARCH, GJR, EWMA), its error distribution, one symbol, the period, a forecast horizon (docs §16.7)",
        examples: &[
            "GARCH volatility forecast of SPY",
            "GJR GARCH with t errors of SPY 2005-2015",
        ],
        read: stats::volatility_read,
        answer: |r, v| stats::answer(r, tool::VOLATILITY_MODEL, v),
        dated: true,
    },
    Intent {
        tool: tool::STAT_TEST,
        reads: "the test (ADF, KPSS, Engle–Granger, Johansen, Jarque–Bera, Ljung–Box …), its series, the period (docs §16.7)",
        examples: &[
            "Johansen test on KO, PEP and PG",
            "is SPY stationary from 2005 to 2010",
        ],
        read: stats::test_read,
        answer: |r, v| stats::answer(r, tool::STAT_TEST, v),
        dated: true,
    },
    Intent {
        tool: tool::FACTOR_IC,
        reads: "the factor (momentum windows, reversal, volatility …), the universe, the period, the horizon (docs §17.4)",
        examples: &["IC of 12-1 momentum on the offline universe"],
        read: factor::ic_read,
        answer: |r, v| factor::answer(r, tool::FACTOR_IC, v),
        dated: true,
    },
    Intent {
        tool: tool::OVERFITTING,
        reads: "a Sharpe with its length and trials, or named books (PBO by CSCV across them), the period (docs §17.4)",
        examples: &[
            "does a Sharpe of 1.4 over 3 years survive 50 trials",
            "probability of backtest overfitting across buy and hold of HD, LOW, TGT, WMT and COST",
        ],
        read: factor::overfitting_read,
        answer: |r, v| factor::answer(r, tool::OVERFITTING, v),
        dated: false,
    },
    Intent {
        tool: tool::REGRESSION,
        reads: "the asset, the factors (market, Fama–French three or five, Carhart, another asset), the period (docs §17.4)",
        examples: &["beta of AAPL to the market factor 2010–2017"],
        read: factor::regression_read,
        answer: |r, v| factor::answer(r, tool::REGRESSION, v),
        dated: true,
    },
    Intent {
        tool: tool::RISK_REPORT,
        reads: "the book's tickers and weights (every common form, docs §15.7), the confidence, the period",
        examples: &[
            "99 % ES of an equal-weight SPY/TLT book in 2008",
            "99% VaR of a portfolio 50% QQQ, 30% GLD, 20% IEF",
        ],
        read: quant::risk_read,
        answer: |r, v| quant::answer(r, tool::RISK_REPORT, v),
        dated: true,
    },
    Intent {
        tool: tool::PORTFOLIO_OPTIMIZE,
        reads: "two or more tickers, the objective (minimum variance, maximum Sharpe, risk parity …), the period, bounds",
        examples: &["optimize AAPL, MSFT, JPM, XOM and KO for minimum variance over 2015–2016"],
        read: quant::portfolio_read,
        answer: |r, v| quant::answer(r, tool::PORTFOLIO_OPTIMIZE, v),
        dated: true,
    },
    Intent {
        tool: tool::IMPLIED_VOLATILITY,
        reads: "the premium, the option (kind, strike, expiry), the underlying",
        examples: &["implied vol of a 3-month 100 call on IBM priced at 5.20"],
        read: quant::implied_read,
        answer: |r, v| quant::answer(r, tool::IMPLIED_VOLATILITY, v),
        dated: false,
    },
    Intent {
        tool: tool::OPTION_STRATEGY,
        reads: "the structure (straddle, strangle, spreads, collar …), its strikes and expiry, the underlying",
        examples: &["a 3-month at-the-money straddle on IBM"],
        read: quant::strategy_read,
        answer: |r, v| quant::answer(r, tool::OPTION_STRATEGY, v),
        dated: false,
    },
    Intent {
        tool: tool::OPTION_PRICE,
        reads: "the kind (call, put), strike, expiry, style, volatility or its source, the underlying",
        examples: &["price a 3-month 110 call on AAPL"],
        read: quant::option_read,
        answer: |r, v| quant::answer(r, tool::OPTION_PRICE, v),
        dated: false,
    },
    Intent {
        tool: tool::BACKTEST,
        reads: "the rule and its parameters, the symbols (all of them, or those dropped said), the period, costs, benchmark; \"Sharpe of X\" holds X",
        examples: &[
            "backtest a 20/50 SMA crossover on AAPL from 2005 to 2012",
            "Sharpe of SPY from 2005 to 2015",
        ],
        read: backtest_read,
        answer: |_, v| typed(v).map(|o| backtest_answer(&o)),
        dated: true,
    },
    Intent {
        tool: tool::TECHNICAL_INDICATOR,
        reads: "the indicator and its window, the symbol (two for a correlation), the period",
        examples: &[
            "RSI of IBM",
            "20-day SMA of GOOGL in 2011",
            "correlation of AAPL and MSFT in 2010",
        ],
        read: indicator_read,
        answer: |_, v| typed(v).map(|o| indicator_answer(&o)),
        dated: true,
    },
    Intent {
        tool: tool::GET_MARKET_DATA,
        reads: "the symbol, the last N rows or the period",
        examples: &["show MSFT's last 30 days in 2010"],
        read: market_data_read,
        answer: |r, v| typed(v).map(|o| prices_answer(r, &o)),
        dated: true,
    },
];

/// The row of `tool`, if the planner drives it.
pub fn of(tool: &str) -> Option<&'static Intent> {
    INTENTS.iter().find(|i| i.tool == tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_example_routes_to_its_own_row() {
        for row in INTENTS {
            assert!(!row.examples.is_empty(), "{} has no example", row.tool);
            for example in row.examples {
                let call = super::super::intent(example);
                assert_eq!(
                    call.as_ref().map(|c| c.name.as_str()),
                    Some(row.tool),
                    "{example:?} routed to {call:?}"
                );
            }
        }
    }

    #[test]
    fn each_tool_has_one_row() {
        let mut seen = std::collections::BTreeSet::new();
        for row in INTENTS {
            assert!(seen.insert(row.tool), "{} has two rows", row.tool);
        }
    }
}
