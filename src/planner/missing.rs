//! What the offline planner knows it cannot do (docs §1.4): topics no tool
//! of vibedesk serves, each with the nearest request that does run, so an
//! `unsupported` answer says what is missing and what to ask instead. Where
//! the nearest request takes tickers it takes the embedded ones the user
//! named. Also the explicit requests for help ("help", "what can you do",
//! "hello"), which the help answers and which stay `success`.

use crate::model::names as tool;

/// A topic the offline tools do not serve.
pub(super) struct Missing {
    /// Lower-case phrases, matched as whole words; any one names the topic.
    cues: &'static [&'static str],
    /// What is missing, as the answer names it.
    pub what: &'static str,
    /// Why no tool here serves it.
    why: &'static str,
    /// The topic is read before the planner's own reading: a request that
    /// names it explicitly would otherwise get a tool's answer to only a
    /// part of it ("intraday RSI of AAPL": a daily RSI), which hides what is
    /// missing. Topics the online data sources may serve (crypto, forex)
    /// are read only when the planner plans nothing.
    pub preempts: bool,
    nearest: Option<Nearest>,
    /// Said after the nearest request, or instead of it when there is none.
    note: &'static str,
}

/// The nearest request that runs offline.
struct Nearest {
    /// The request, `{T}` standing for the tickers.
    request: &'static str,
    tool: &'static str,
    /// The tickers when the user named too few of the embedded market.
    defaults: &'static [&'static str],
    /// How many of the user's embedded tickers it takes, at least and at
    /// most; `(0, 0)`: it takes none of them (a proxy of its own).
    takes: (usize, usize),
}

const fn nearest(
    request: &'static str,
    tool: &'static str,
    defaults: &'static [&'static str],
    takes: (usize, usize),
) -> Option<Nearest> {
    Some(Nearest {
        request,
        tool,
        defaults,
        takes,
    })
}

/// The known-missing topics, most specific first.
pub(super) const MISSING: &[Missing] = &[
    Missing {
        cues: &[
            "black-litterman",
            "black litterman",
            "blacklitterman",
            "investor views",
        ],
        what: "Black-Litterman views",
        why: "no offline tool blends market-implied returns with views; `portfolio_optimize` optimises on the history alone",
        preempts: true,
        nearest: nearest(
            "optimize {T} for maximum Sharpe",
            tool::PORTFOLIO_OPTIMIZE,
            &["AAPL", "MSFT", "XOM"],
            (2, 8),
        ),
        note: "weights from the historical means and covariance, with no views",
    },
    Missing {
        cues: &["kalman", "state-space", "state space model"],
        what: "a Kalman filter",
        why: "no offline tool runs a state-space filter, so there is no time-varying hedge ratio",
        preempts: true,
        nearest: nearest(
            "Engle-Granger cointegration test of {T}",
            tool::STAT_TEST,
            &["KO", "PEP"],
            (2, 2),
        ),
        note: "one static hedge ratio, the spread's half-life and its latest z-score",
    },
    Missing {
        cues: &[
            "earnings",
            "eps",
            "revenue",
            "revenues",
            "p/e",
            "pe ratio",
            "price-to-earnings",
            "price to earnings",
            "fundamentals",
            "fundamental data",
            "balance sheet",
            "income statement",
            "cash flow statement",
            "book value",
            "guidance",
            "analyst estimates",
            "analyst ratings",
            "price target",
        ],
        what: "earnings and fundamentals",
        why: "the data is daily prices and volume only: no earnings, estimates or financial statements",
        preempts: true,
        nearest: None,
        note: "nothing offline comes near; a connected model with a fundamentals source (an MCP server, docs §13) can answer it",
    },
    Missing {
        cues: &[
            "news",
            "headline",
            "headlines",
            "sentiment",
            "press release",
            "tweets",
            "twitter",
            "reddit",
        ],
        what: "news and sentiment",
        why: "no offline tool reads news, filings or social media",
        preempts: true,
        nearest: None,
        note: "nothing offline comes near; a connected model with a news source (an MCP server, docs §13) can answer it",
    },
    Missing {
        cues: &[
            "intraday",
            "tick data",
            "tick-by-tick",
            "ticks",
            "minute bars",
            "1-minute",
            "5-minute",
            "15-minute",
            "hourly bars",
            "order book",
            "level 2",
            "bid-ask",
            "bid/ask",
        ],
        what: "intraday and tick data",
        why: "every data source here serves daily bars, none finer",
        preempts: true,
        nearest: nearest(
            "show {T}'s last 30 days in 2017",
            tool::GET_MARKET_DATA,
            &["AAPL"],
            (1, 1),
        ),
        note: "daily bars (open, high, low, close, volume)",
    },
    Missing {
        cues: &[
            "real-time",
            "realtime",
            "real time",
            "live quote",
            "live quotes",
            "live price",
            "streaming quote",
            "quote right now",
            "price right now",
            "today's price",
            "price today",
            "current price",
            "current quote",
        ],
        what: "live quotes and today's price",
        why: "the built-in market ends on 2017-11-10 and no source here streams quotes",
        preempts: true,
        nearest: nearest(
            "show {T}'s last 30 days in 2017",
            tool::GET_MARKET_DATA,
            &["AAPL"],
            (1, 1),
        ),
        note: "the last daily closes the built-in market holds",
    },
    Missing {
        cues: &[
            "machine learning",
            "machine-learning",
            "neural net",
            "neural network",
            "lstm",
            "random forest",
            "xgboost",
            "gradient boosting",
            "deep learning",
            "predict tomorrow",
            "price prediction",
            "predict the price",
        ],
        what: "machine-learning forecasts",
        why: "no offline tool fits a predictive model of prices",
        preempts: true,
        nearest: nearest(
            "walk-forward sweep of momentum on {T}",
            tool::SWEEP,
            &["IBM"],
            (1, 1),
        ),
        note: "a rule's parameters chosen in sample and judged out of sample, the honest test of a forecast's edge",
    },
    Missing {
        cues: &[
            "options chain",
            "option chain",
            "open interest",
            "volatility surface",
            "vol surface",
            "unusual options",
        ],
        what: "market options data (chains, open interest, quoted volatility surfaces)",
        why: "the data has no option quotes; the option tools price from the underlying's own history",
        preempts: true,
        nearest: nearest(
            "a 3-month at-the-money straddle on {T}",
            tool::OPTION_STRATEGY,
            &["AAPL"],
            (1, 1),
        ),
        note: "Black–Scholes prices and Greeks at the underlying's historical volatility",
    },
    Missing {
        cues: &[
            "insider",
            "insiders",
            "13f",
            "institutional holdings",
            "short interest",
            "esg",
            "upgrade",
            "downgrade",
        ],
        what: "ownership, ratings and ESG data",
        why: "the data is daily prices and volume only",
        preempts: true,
        nearest: None,
        note: "nothing offline comes near; a connected model with a data source (an MCP server, docs §13) can answer it",
    },
    Missing {
        cues: &[
            "gdp",
            "cpi",
            "nonfarm",
            "payrolls",
            "unemployment rate",
            "fomc",
            "fed funds",
            "yield curve",
        ],
        what: "macroeconomic data",
        why: "the data holds no economic series, only the prices of 131 US stocks and ETFs",
        preempts: true,
        nearest: nearest(
            "correlation of {T} in 2010",
            tool::TECHNICAL_INDICATOR,
            &["SPY", "TLT"],
            (0, 0),
        ),
        note: "stocks against Treasuries (TLT) as a proxy for rates",
    },
    Missing {
        cues: &[
            "crypto",
            "cryptocurrency",
            "cryptocurrencies",
            "bitcoin",
            "btc",
            "ethereum",
            "eth",
            "solana",
            "dogecoin",
        ],
        what: "crypto prices",
        why: "the built-in market holds no crypto, and online sources need a connected model to be asked",
        preempts: false,
        nearest: nearest(
            "Sharpe of {T} from 2005 to 2015",
            tool::BACKTEST,
            &["GLD"],
            (0, 0),
        ),
        note: "gold, the nearest non-equity store of value the built-in market holds",
    },
    Missing {
        cues: &[
            "forex",
            "fx rate",
            "fx rates",
            "exchange rate",
            "exchange rates",
            "currency pair",
            "eurusd",
            "usdjpy",
            "gbpusd",
            "eur/usd",
            "usd/jpy",
            "gbp/usd",
        ],
        what: "forex rates",
        why: "the built-in market holds no currencies",
        preempts: false,
        nearest: nearest(
            "correlation of {T} in 2010",
            tool::TECHNICAL_INDICATOR,
            &["EFA", "SPY"],
            (0, 0),
        ),
        note: "international against US stocks (EFA, SPY), which carries the dollar's moves",
    },
    Missing {
        cues: &[
            "futures",
            "futures contract",
            "contango",
            "backwardation",
            "roll yield",
        ],
        what: "futures",
        why: "the built-in market holds no futures contracts",
        preempts: false,
        nearest: nearest(
            "Sharpe of {T} from 2007 to 2015",
            tool::BACKTEST,
            &["USO"],
            (0, 0),
        ),
        note: "the oil ETF USO, which holds front-month futures",
    },
];

/// The topic `request` names, if any.
pub(super) fn topic(request: &str) -> Option<&'static Missing> {
    let lower = request.to_lowercase();
    MISSING
        .iter()
        .find(|m| m.cues.iter().any(|c| mentions(&lower, c)))
}

/// Whether `cue` occurs in `lower` as whole words (not inside "stepsize").
fn mentions(lower: &str, cue: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    lower.match_indices(cue).any(|(at, _)| {
        let before = lower.get(..at).and_then(|s| s.chars().next_back());
        let after = lower.get(at + cue.len()..).and_then(|s| s.chars().next());
        !word(before) && !word(after)
    })
}

impl Missing {
    /// The answer: what is missing and why, the nearest request that runs
    /// (with `tickers`, the embedded ones the user named, where it takes
    /// them) or that none does, and how to ask anything else.
    pub(super) fn answer(&self, tickers: &[String], offered: &[String], connect: &str) -> String {
        let mut out = format!(
            "**Not available offline: {}.** I am the offline planner (no language model is connected): {}.\n\n",
            self.what, self.why
        );
        match &self.nearest {
            Some(n) => {
                let request = n.request.replace("{T}", &list(&n.tickers(tickers)));
                out.push_str(&format!(
                    "The nearest I can run: \"{request}\" (`{}`): {}.",
                    n.tool, self.note
                ));
                if !offered.iter().any(|o| o == n.tool) {
                    out.push_str(&format!(
                        " It needs the `{}` tool, which this session does not offer.",
                        n.tool
                    ));
                }
            }
            None => out.push_str(&format!("Offline: {}.", self.note)),
        }
        out.push_str(&format!("\n\n{connect}\n"));
        out
    }

    #[cfg(test)]
    pub(super) fn nearest_request(&self, tickers: &[String]) -> Option<(String, &'static str)> {
        self.nearest
            .as_ref()
            .map(|n| (n.request.replace("{T}", &list(&n.tickers(tickers))), n.tool))
    }
}

impl Nearest {
    /// The user's tickers when there are enough (the first `takes.1` of
    /// them), else the defaults.
    fn tickers(&self, named: &[String]) -> Vec<String> {
        let (least, most) = self.takes;
        if most > 0 && named.len() >= least {
            named.iter().take(most).cloned().collect()
        } else {
            self.defaults.iter().map(|t| t.to_string()).collect()
        }
    }
}

/// "A", "A and B", "A, B and C".
fn list(items: &[String]) -> String {
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// Whether the request asks for help, or only greets: the help answers it.
pub(super) fn asks_for_help(request: &str) -> bool {
    let lower = request.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .collect();
    const GREETINGS: [&str; 7] = ["hi", "hello", "hey", "help", "howdy", "greetings", "hiya"];
    const ASKS: [&str; 9] = [
        "what can you do",
        "what can i ask",
        "what do you do",
        "what can you help",
        "who are you",
        "what are you",
        "how do i use",
        "how does this work",
        "what should i ask",
    ];
    let trimmed = lower.trim();
    trimmed.is_empty()
        || trimmed == "?"
        || trimmed == "/help"
        || (words.len() <= 4 && words.first().is_some_and(|w| GREETINGS.contains(w)))
        || (words.len() <= 3 && words.starts_with(&["good"]))
        || ASKS.iter().any(|a| lower.contains(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cues_match_whole_words_only() {
        assert!(mentions("what were aapl's eps last year", "eps"));
        assert!(!mentions("sweep the steps of a rule", "eps"));
        assert!(mentions("a kalman filter", "kalman"));
        assert!(!mentions("hether", "eth"));
        assert!(topic("ETH price history").is_some());
        assert!(topic("backtest a momentum rule on AAPL").is_none());
    }

    #[test]
    fn help_and_greetings_are_told_from_requests() {
        for yes in [
            "help",
            "Hello!",
            "hi there",
            "hello again",
            "What can you do?",
            "who are you",
            "good morning",
            "/help",
        ] {
            assert!(asks_for_help(yes), "{yes}");
        }
        for no in [
            "What is the meaning of life?",
            "hedge ratio of KO and PEP",
            "help me build a Black-Litterman book of AAPL, MSFT and XOM for 2015",
            "history of the dot-com crash",
        ] {
            assert!(!asks_for_help(no), "{no}");
        }
    }

    #[test]
    fn lists_read_as_english() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(list(&s(&["A"])), "A");
        assert_eq!(list(&s(&["A", "B"])), "A and B");
        assert_eq!(list(&s(&["A", "B", "C"])), "A, B and C");
    }
}
