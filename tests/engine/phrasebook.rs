//! The phrasebook (issue 36): plain requests, the tool each must reach
//! and the arguments that carry its meaning (weights, ranges, periods,
//! tickers, thresholds), read by the offline planner as a user would
//! type them: misspellings, reversed dates, weights in every common form.
//! A pointer whose expected value is `null` must be absent (nothing read
//! that was not asked). Requests nothing offline can serve end
//! `unsupported` (docs §1.4); their exit code is tested through the
//! binary in `unsupported.rs`.

use serde_json::Value;
use vibedesk::model::Message;
use vibedesk::planner::intents::INTENTS;
use vibedesk::planner::{Plan, PlannedCall, plan};

/// The planner's whole turn for `request` with every tool it drives
/// offered: the call it makes, if any.
fn planned(request: &str) -> (Option<PlannedCall>, Plan) {
    let offered: Vec<String> = INTENTS.iter().map(|i| i.tool.to_string()).collect();
    let p = plan(&[Message::user(request)], &offered);
    match &p {
        Plan::Call(call) => (Some(call.clone()), p),
        _ => (None, p),
    }
}

/// (request, tool, [(JSON pointer into the arguments, expected JSON)]).
type Phrase = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

const PHRASES: &[Phrase] = &[
    (
        "SPY's maximum drawdown during 2008",
        "technical_indicator",
        &[
            ("/symbol", r#""SPY""#),
            ("/indicator", r#""drawdown""#),
            ("/start", r#""2008-01-01""#),
            ("/end", r#""2008-12-31""#),
        ],
    ),
    (
        "SPY's return during 2008",
        "technical_indicator",
        &[
            ("/symbol", r#""SPY""#),
            ("/indicator", r#""returns""#),
            ("/start", r#""2008-01-01""#),
            ("/end", r#""2008-12-31""#),
        ],
    ),
    (
        "volatility of QQQ in 2011",
        "technical_indicator",
        &[
            ("/symbol", r#""QQQ""#),
            ("/indicator", r#""volatility""#),
            ("/start", r#""2011-01-01""#),
            ("/end", r#""2011-12-31""#),
        ],
    ),
    (
        "backtest a 20/50 SMA crossover on AAPL from 2005 to 2012",
        "backtest",
        &[
            ("/config/codes", r#"["AAPL"]"#),
            ("/config/start_date", r#""2005-01-01""#),
            ("/config/end_date", r#""2012-12-31""#),
            (
                "/config/strategy",
                r#"{"name":"sma_crossover","params":{"fast":20,"slow":50}}"#,
            ),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "backtest an EMA crossover 12/26 on MSFT 2008-2014",
        "backtest",
        &[
            ("/config/codes", r#"["MSFT"]"#),
            ("/config/start_date", r#""2008-01-01""#),
            ("/config/end_date", r#""2014-12-31""#),
            (
                "/config/strategy",
                r#"{"name":"ema_crossover","params":{"fast":12,"slow":26}}"#,
            ),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "simulate RSI mean reversion on KO from 2010 to 2015",
        "backtest",
        &[
            ("/config/codes", r#"["KO"]"#),
            ("/config/start_date", r#""2010-01-01""#),
            ("/config/end_date", r#""2015-12-31""#),
            (
                "/config/strategy",
                r#"{"name":"rsi_mean_reversion","params":{"period":14,"lower":30,"upper":70}}"#,
            ),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "Bollinger reversion on XOM between 2012 and 2016",
        "backtest",
        &[
            ("/config/codes", r#"["XOM"]"#),
            ("/config/start_date", r#""2012-01-01""#),
            ("/config/end_date", r#""2016-12-31""#),
            (
                "/config/strategy",
                r#"{"name":"bollinger_reversion","params":{"window":20,"k":2.0}}"#,
            ),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "buy and hold SPY from 2015 to 2003",
        "backtest",
        &[
            ("/config/codes", r#"["SPY"]"#),
            ("/config/start_date", r#""2003-01-01""#),
            ("/config/end_date", r#""2015-12-31""#),
            ("/config/strategy", r#"{"name":"buy_and_hold"}"#),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "breakout strategy on GLD 2009 to 2013 with 10 bp commission",
        "backtest",
        &[
            ("/config/codes", r#"["GLD"]"#),
            ("/config/start_date", r#""2009-01-01""#),
            ("/config/end_date", r#""2013-12-31""#),
            (
                "/config/strategy",
                r#"{"name":"breakout","params":{"window":20}}"#,
            ),
            ("/config/commission_rate", r#"0.001"#),
        ],
    ),
    (
        "backtest the sma crossover fast 10 slow 100 on AAPL and MSFT in 2011",
        "backtest",
        &[
            ("/config/codes", r#"["AAPL","MSFT"]"#),
            ("/config/start_date", r#""2011-01-01""#),
            ("/config/end_date", r#""2011-12-31""#),
            (
                "/config/strategy",
                r#"{"name":"sma_crossover","params":{"fast":10,"slow":100}}"#,
            ),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "backtest buy and hold of AAPL, MSFT, GOOGL and XOM from 2010 to 2017",
        "backtest",
        &[
            ("/config/codes", r#"["AAPL","MSFT","GOOGL","XOM"]"#),
            ("/config/start_date", r#""2010-01-01""#),
            ("/config/end_date", r#""2017-12-31""#),
            ("/config/strategy", r#"{"name":"buy_and_hold"}"#),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "bactest sma crossover on AAPL from 2006 to 2009",
        "backtest",
        &[
            ("/config/codes", r#"["AAPL"]"#),
            ("/config/start_date", r#""2006-01-01""#),
            ("/config/end_date", r#""2009-12-31""#),
            (
                "/config/strategy",
                r#"{"name":"sma_crossover","params":{"fast":20,"slow":50}}"#,
            ),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "backtest momentum with lookback 60 on QQQ 2010-2016",
        "backtest",
        &[
            ("/config/codes", r#"["QQQ"]"#),
            ("/config/start_date", r#""2010-01-01""#),
            ("/config/end_date", r#""2016-12-31""#),
            (
                "/config/strategy",
                r#"{"name":"momentum","params":{"lookback":60}}"#,
            ),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "backtest a 55-day breakout on GLD from 2006 to 2012",
        "backtest",
        &[
            ("/config/codes", r#"["GLD"]"#),
            ("/config/start_date", r#""2006-01-01""#),
            ("/config/end_date", r#""2012-12-31""#),
            (
                "/config/strategy",
                r#"{"name":"breakout","params":{"window":55}}"#,
            ),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "backtest buy and hold on aapl from 2010 to 2012",
        "backtest",
        &[
            ("/config/codes", r#"["AAPL"]"#),
            ("/config/start_date", r#""2010-01-01""#),
            ("/config/end_date", r#""2012-12-31""#),
            ("/config/strategy", r#"{"name":"buy_and_hold"}"#),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "Sharpe of SPY from 2005 to 2015",
        "backtest",
        &[
            ("/config/codes", r#"["SPY"]"#),
            ("/config/start_date", r#""2005-01-01""#),
            ("/config/end_date", r#""2015-12-31""#),
            ("/config/strategy", r#"{"name":"buy_and_hold"}"#),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "sortino of QQQ in 2012",
        "backtest",
        &[
            ("/config/codes", r#"["QQQ"]"#),
            ("/config/start_date", r#""2012-01-01""#),
            ("/config/end_date", r#""2012-12-31""#),
            ("/config/strategy", r#"{"name":"buy_and_hold"}"#),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "what was the Sharpe ratio of TLT 2008-2012",
        "backtest",
        &[
            ("/config/codes", r#"["TLT"]"#),
            ("/config/start_date", r#""2008-01-01""#),
            ("/config/end_date", r#""2012-12-31""#),
            ("/config/strategy", r#"{"name":"buy_and_hold"}"#),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "sharpe ratio of SPY between 2015 and 2005",
        "backtest",
        &[
            ("/config/codes", r#"["SPY"]"#),
            ("/config/start_date", r#""2005-01-01""#),
            ("/config/end_date", r#""2015-12-31""#),
            ("/config/strategy", r#"{"name":"buy_and_hold"}"#),
            ("/config/commission_rate", r#"null"#),
        ],
    ),
    (
        "sweep the SMA crossover fast 5 to 30 and slow 50 to 200 on AAPL, MSFT from 2005 to 2015",
        "sweep",
        &[
            (
                "/spec/axes",
                r#"{"strategy.params.fast":{"from":5,"to":30,"step":5},"strategy.params.slow":{"from":50,"to":200,"step":30}}"#,
            ),
            ("/spec/universe", r#"["AAPL","MSFT"]"#),
            ("/spec/base/strategy/name", r#""sma_crossover""#),
            ("/spec/base/start_date", r#""2005-01-01""#),
            ("/spec/base/end_date", r#""2015-12-31""#),
            ("/spec/split/walk_forward", r#"null"#),
        ],
    ),
    (
        "sweep slow 60 to 180 on SPY",
        "sweep",
        &[
            (
                "/spec/axes",
                r#"{"strategy.params.slow":{"from":60,"to":180,"step":24}}"#,
            ),
            ("/spec/universe", r#"["SPY"]"#),
            ("/spec/base/strategy/name", r#""sma_crossover""#),
            ("/spec/base/start_date", r#""2005-01-01""#),
            ("/spec/base/end_date", r#""2012-12-31""#),
            ("/spec/split/walk_forward", r#"null"#),
        ],
    ),
    (
        "grid search RSI period 7 to 21 on KO 2010-2016",
        "sweep",
        &[
            (
                "/spec/axes",
                r#"{"strategy.params.period":{"from":7,"to":21,"step":2}}"#,
            ),
            ("/spec/universe", r#"["KO"]"#),
            ("/spec/base/strategy/name", r#""rsi_mean_reversion""#),
            ("/spec/base/start_date", r#""2010-01-01""#),
            ("/spec/base/end_date", r#""2016-12-31""#),
            ("/spec/split/walk_forward", r#"null"#),
        ],
    ),
    (
        "walk-forward sweep of momentum on IBM",
        "sweep",
        &[
            (
                "/spec/axes",
                r#"{"strategy.params.lookback":[21,63,126,252]}"#,
            ),
            ("/spec/universe", r#"["IBM"]"#),
            ("/spec/base/strategy/name", r#""momentum""#),
            ("/spec/base/start_date", r#""2005-01-01""#),
            ("/spec/base/end_date", r#""2012-12-31""#),
            (
                "/spec/split/walk_forward",
                r#"{"train_months":36,"test_months":12}"#,
            ),
        ],
    ),
    (
        "parameter scan of the EMA crossover fast 5 to 20 step 5 on MSFT",
        "sweep",
        &[
            (
                "/spec/axes",
                r#"{"strategy.params.fast":{"from":5,"to":20,"step":5}}"#,
            ),
            ("/spec/universe", r#"["MSFT"]"#),
            ("/spec/base/strategy/name", r#""ema_crossover""#),
            ("/spec/base/start_date", r#""2005-01-01""#),
            ("/spec/base/end_date", r#""2012-12-31""#),
            ("/spec/split/walk_forward", r#"null"#),
        ],
    ),
    (
        "sweep the sma crossover fast 5 to 25 step 5 and slow 40 to 160 step 40 on AAPL",
        "sweep",
        &[
            (
                "/spec/axes",
                r#"{"strategy.params.fast":{"from":5,"to":25,"step":5},"strategy.params.slow":{"from":40,"to":160,"step":40}}"#,
            ),
            ("/spec/universe", r#"["AAPL"]"#),
            ("/spec/base/strategy/name", r#""sma_crossover""#),
            ("/spec/base/start_date", r#""2005-01-01""#),
            ("/spec/base/end_date", r#""2012-12-31""#),
            ("/spec/split/walk_forward", r#"null"#),
        ],
    ),
    (
        "sweep rsi period 5 to 25 step 5 on SPY from 2004 to 2014",
        "sweep",
        &[
            (
                "/spec/axes",
                r#"{"strategy.params.period":{"from":5,"to":25,"step":5}}"#,
            ),
            ("/spec/universe", r#"["SPY"]"#),
            ("/spec/base/strategy/name", r#""rsi_mean_reversion""#),
            ("/spec/base/start_date", r#""2004-01-01""#),
            ("/spec/base/end_date", r#""2014-12-31""#),
            ("/spec/split/walk_forward", r#"null"#),
        ],
    ),
    (
        "show MSFT's last 30 days in 2010",
        "get_market_data",
        &[
            ("/symbol", r#""MSFT""#),
            ("/start", r#"null"#),
            ("/end", r#""2010-12-31""#),
            ("/last_n", r#"30"#),
        ],
    ),
    (
        "AAPL prices in March 2009",
        "get_market_data",
        &[
            ("/symbol", r#""AAPL""#),
            ("/start", r#""2009-03-01""#),
            ("/end", r#""2009-03-31""#),
            ("/last_n", r#"30"#),
        ],
    ),
    (
        "last 10 closes of IBM",
        "get_market_data",
        &[
            ("/symbol", r#""IBM""#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
            ("/last_n", r#"10"#),
        ],
    ),
    (
        "show me SPY data for 2008",
        "get_market_data",
        &[
            ("/symbol", r#""SPY""#),
            ("/start", r#""2008-01-01""#),
            ("/end", r#""2008-12-31""#),
            ("/last_n", r#"30"#),
        ],
    ),
    (
        "RSI of IBM",
        "technical_indicator",
        &[
            ("/symbol", r#""IBM""#),
            ("/indicator", r#""rsi""#),
            ("/params", r#"null"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "14-day RSI of AAPL in 2010",
        "technical_indicator",
        &[
            ("/symbol", r#""AAPL""#),
            ("/indicator", r#""rsi""#),
            ("/params", r#"{"period":14}"#),
            ("/start", r#""2010-01-01""#),
            ("/end", r#""2010-12-31""#),
        ],
    ),
    (
        "RSI of IBM from 2012 to 2010",
        "technical_indicator",
        &[
            ("/symbol", r#""IBM""#),
            ("/indicator", r#""rsi""#),
            ("/params", r#"null"#),
            ("/start", r#""2010-01-01""#),
            ("/end", r#""2012-12-31""#),
        ],
    ),
    (
        "20-day SMA of GOOGL in 2011",
        "technical_indicator",
        &[
            ("/symbol", r#""GOOGL""#),
            ("/indicator", r#""sma""#),
            ("/params", r#"{"window":20}"#),
            ("/start", r#""2011-01-01""#),
            ("/end", r#""2011-12-31""#),
        ],
    ),
    (
        "MACD of AAPL",
        "technical_indicator",
        &[
            ("/symbol", r#""AAPL""#),
            ("/indicator", r#""macd""#),
            ("/params", r#"null"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "bollinger bands of MSFT 2012",
        "technical_indicator",
        &[
            ("/symbol", r#""MSFT""#),
            ("/indicator", r#""bollinger""#),
            ("/params", r#"null"#),
            ("/start", r#""2012-01-01""#),
            ("/end", r#""2012-12-31""#),
        ],
    ),
    (
        "ATR of XOM",
        "technical_indicator",
        &[
            ("/symbol", r#""XOM""#),
            ("/indicator", r#""atr""#),
            ("/params", r#"null"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "50 day moving average of SPY in 2009",
        "technical_indicator",
        &[
            ("/symbol", r#""SPY""#),
            ("/indicator", r#""sma""#),
            ("/params", r#"{"window":50}"#),
            ("/start", r#""2009-01-01""#),
            ("/end", r#""2009-12-31""#),
        ],
    ),
    (
        "correlation of AAPL and MSFT in 2010",
        "technical_indicator",
        &[
            ("/symbol", r#""AAPL""#),
            ("/indicator", r#""correlation""#),
            ("/params", r#"{"with":"MSFT","window":60}"#),
            ("/start", r#""2010-01-01""#),
            ("/end", r#""2010-12-31""#),
        ],
    ),
    (
        "corelation of AAPL and MSFT in 2010",
        "technical_indicator",
        &[
            ("/symbol", r#""AAPL""#),
            ("/indicator", r#""correlation""#),
            ("/params", r#"{"with":"MSFT","window":60}"#),
            ("/start", r#""2010-01-01""#),
            ("/end", r#""2010-12-31""#),
        ],
    ),
    (
        "how correlated are KO and PEP from 2005 to 2010",
        "technical_indicator",
        &[
            ("/symbol", r#""KO""#),
            ("/indicator", r#""correlation""#),
            ("/params", r#"{"with":"PEP","window":60}"#),
            ("/start", r#""2005-01-01""#),
            ("/end", r#""2010-12-31""#),
        ],
    ),
    (
        "90-day correlation of SPY and TLT in 2008",
        "technical_indicator",
        &[
            ("/symbol", r#""SPY""#),
            ("/indicator", r#""correlation""#),
            ("/params", r#"{"with":"TLT","window":90}"#),
            ("/start", r#""2008-01-01""#),
            ("/end", r#""2008-12-31""#),
        ],
    ),
    (
        "price a 3-month 110 call on AAPL",
        "option_price",
        &[
            ("/symbol", r#""AAPL""#),
            ("/kind", r#""call""#),
            ("/style", r#"null"#),
            ("/strike", r#"110.0"#),
            ("/moneyness", r#"null"#),
            ("/expiry_years", r#"0.25"#),
        ],
    ),
    (
        "value of a 6 month put on SPY struck at 120",
        "option_price",
        &[
            ("/symbol", r#""SPY""#),
            ("/kind", r#""put""#),
            ("/style", r#"null"#),
            ("/strike", r#"120.0"#),
            ("/moneyness", r#"null"#),
            ("/expiry_years", r#"0.5"#),
        ],
    ),
    (
        "greeks of a 1-year at-the-money call on IBM",
        "option_price",
        &[
            ("/symbol", r#""IBM""#),
            ("/kind", r#""call""#),
            ("/style", r#"null"#),
            ("/strike", r#"null"#),
            ("/moneyness", r#"1.0"#),
            ("/expiry_years", r#"1.0"#),
        ],
    ),
    (
        "price an american put on KO strike 40 expiring in 3 months",
        "option_price",
        &[
            ("/symbol", r#""KO""#),
            ("/kind", r#""put""#),
            ("/style", r#""american""#),
            ("/strike", r#"40.0"#),
            ("/moneyness", r#"null"#),
            ("/expiry_years", r#"0.25"#),
        ],
    ),
    (
        "price a put on AAPL with strike 95 expiring in 6 weeks",
        "option_price",
        &[
            ("/symbol", r#""AAPL""#),
            ("/kind", r#""put""#),
            ("/style", r#"null"#),
            ("/strike", r#"95.0"#),
            ("/moneyness", r#"null"#),
            ("/expiry_years", r#"0.11506849315068493"#),
        ],
    ),
    (
        "implied vol of a 3-month 100 call on IBM priced at 5.20",
        "implied_volatility",
        &[
            ("/symbol", r#""IBM""#),
            ("/kind", r#""call""#),
            ("/strike", r#"100.0"#),
            ("/price", r#"5.2"#),
            ("/expiry_years", r#"0.25"#),
        ],
    ),
    (
        "implied volatility of a 6-month 120 put on SPY that costs 4.5",
        "implied_volatility",
        &[
            ("/symbol", r#""SPY""#),
            ("/kind", r#""put""#),
            ("/strike", r#"120.0"#),
            ("/price", r#"4.5"#),
            ("/expiry_years", r#"0.5"#),
        ],
    ),
    (
        "a 3-month at-the-money straddle on IBM",
        "option_strategy",
        &[
            ("/symbol", r#""IBM""#),
            (
                "/legs",
                r#"[{"kind":"call","moneyness":1.0,"quantity":1.0},{"kind":"put","moneyness":1.0,"quantity":1.0}]"#,
            ),
            ("/expiry_years", r#"0.25"#),
        ],
    ),
    (
        "straddle on IBM expiring in 3 months",
        "option_strategy",
        &[
            ("/symbol", r#""IBM""#),
            (
                "/legs",
                r#"[{"kind":"call","moneyness":1.0,"quantity":1.0},{"kind":"put","moneyness":1.0,"quantity":1.0}]"#,
            ),
            ("/expiry_years", r#"0.25"#),
        ],
    ),
    (
        "bull call spread 100/110 on AAPL for 2 months",
        "option_strategy",
        &[
            ("/symbol", r#""AAPL""#),
            (
                "/legs",
                r#"[{"kind":"call","strike":100.0,"quantity":1.0},{"kind":"call","strike":110.0,"quantity":-1.0}]"#,
            ),
            ("/expiry_years", r#"0.16666666666666666"#),
        ],
    ),
    (
        "a 3-month strangle on SPY",
        "option_strategy",
        &[
            ("/symbol", r#""SPY""#),
            (
                "/legs",
                r#"[{"kind":"put","moneyness":0.95,"quantity":1.0},{"kind":"call","moneyness":1.05,"quantity":1.0}]"#,
            ),
            ("/expiry_years", r#"0.25"#),
        ],
    ),
    (
        "a collar on MSFT",
        "option_strategy",
        &[
            ("/symbol", r#""MSFT""#),
            (
                "/legs",
                r#"[{"kind":"stock","quantity":1.0},{"kind":"put","moneyness":0.9,"quantity":1.0},{"kind":"call","moneyness":1.1,"quantity":-1.0}]"#,
            ),
            ("/expiry_years", r#"0.25"#),
        ],
    ),
    (
        "optimize AAPL, MSFT, JPM, XOM and KO for minimum variance over 2015–2016",
        "portfolio_optimize",
        &[
            ("/symbols", r#"["AAPL","MSFT","JPM","XOM","KO"]"#),
            ("/method", r#""min_variance""#),
            ("/start", r#""2015-01-01""#),
            ("/end", r#""2016-12-31""#),
        ],
    ),
    (
        "optimise SPY, TLT and GLD for minimum variance",
        "portfolio_optimize",
        &[
            ("/symbols", r#"["SPY","TLT","GLD"]"#),
            ("/method", r#""min_variance""#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "max sharpe portfolio of SPY, TLT and GLD 2010-2015",
        "portfolio_optimize",
        &[
            ("/symbols", r#"["SPY","TLT","GLD"]"#),
            ("/method", r#""max_sharpe""#),
            ("/start", r#""2010-01-01""#),
            ("/end", r#""2015-12-31""#),
        ],
    ),
    (
        "risk parity weights for SPY, TLT, GLD, DBC",
        "portfolio_optimize",
        &[
            ("/symbols", r#"["SPY","TLT","GLD","DBC"]"#),
            ("/method", r#""risk_parity""#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "minimum variance portfolio of KO, PEP, PG in 2012",
        "portfolio_optimize",
        &[
            ("/symbols", r#"["KO","PEP","PG"]"#),
            ("/method", r#""min_variance""#),
            ("/start", r#""2012-01-01""#),
            ("/end", r#""2012-12-31""#),
        ],
    ),
    (
        "min-variance weights for AAPL, MSFT, GOOGL 2013-2016",
        "portfolio_optimize",
        &[
            ("/symbols", r#"["AAPL","MSFT","GOOGL"]"#),
            ("/method", r#""min_variance""#),
            ("/start", r#""2013-01-01""#),
            ("/end", r#""2016-12-31""#),
        ],
    ),
    (
        "tear sheet of SPY 2005-2017",
        "tearsheet",
        &[
            ("/symbols", r#"["SPY"]"#),
            ("/start", r#""2005-01-01""#),
            ("/run", r#"null"#),
        ],
    ),
    (
        "tearsheet for the last backtest",
        "tearsheet",
        &[("/run", r#""last""#), ("/symbols", r#"null"#)],
    ),
    (
        "tear sheet of 60% SPY and 40% TLT against QQQ in 2010",
        "tearsheet",
        &[
            ("/symbols", r#"["SPY","TLT"]"#),
            ("/weights/SPY", r#"0.6"#),
            ("/benchmark", r#""QQQ""#),
        ],
    ),
    (
        "99 % ES of an equal-weight SPY/TLT book in 2008",
        "risk_report",
        &[
            ("/symbols", r#"["SPY","TLT"]"#),
            ("/weights", r#"null"#),
            ("/confidence", r#"0.99"#),
            ("/start", r#""2008-01-01""#),
            ("/end", r#""2008-12-31""#),
        ],
    ),
    (
        "99% VaR of a portfolio 50% QQQ, 30% GLD, 20% IEF",
        "risk_report",
        &[
            ("/symbols", r#"["QQQ","GLD","IEF"]"#),
            ("/weights", r#"{"GLD":0.3,"IEF":0.2,"QQQ":0.5}"#),
            ("/confidence", r#"0.99"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "VaR of 60% SPY and 40% TLT in 2008",
        "risk_report",
        &[
            ("/symbols", r#"["SPY","TLT"]"#),
            ("/weights", r#"{"SPY":0.6,"TLT":0.4}"#),
            ("/confidence", r#"null"#),
            ("/start", r#""2008-01-01""#),
            ("/end", r#""2008-12-31""#),
        ],
    ),
    (
        "expected shortfall of a book that is 70% XLK and 30% XLU",
        "risk_report",
        &[
            ("/symbols", r#"["XLK","XLU"]"#),
            ("/weights", r#"{"XLK":0.7,"XLU":0.3}"#),
            ("/confidence", r#"null"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "95% value at risk of 50/30/20 QQQ/GLD/IEF",
        "risk_report",
        &[
            ("/symbols", r#"["QQQ","GLD","IEF"]"#),
            ("/weights", r#"{"GLD":0.3,"IEF":0.2,"QQQ":0.5}"#),
            ("/confidence", r#"0.95"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "risk report for AAPL and MSFT 2010 to 2012",
        "risk_report",
        &[
            ("/symbols", r#"["AAPL","MSFT"]"#),
            ("/weights", r#"null"#),
            ("/confidence", r#"null"#),
            ("/start", r#""2010-01-01""#),
            ("/end", r#""2012-12-31""#),
        ],
    ),
    (
        "VaR of SPY 120% and TLT -20%",
        "risk_report",
        &[
            ("/symbols", r#"["SPY","TLT"]"#),
            ("/weights", r#"{"SPY":1.2,"TLT":-0.2}"#),
            ("/confidence", r#"null"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "risk of a 40/60 SPY/TLT portfolio in 2011",
        "risk_report",
        &[
            ("/symbols", r#"["SPY","TLT"]"#),
            ("/weights", r#"{"SPY":0.4,"TLT":0.6}"#),
            ("/confidence", r#"null"#),
            ("/start", r#""2011-01-01""#),
            ("/end", r#""2011-12-31""#),
        ],
    ),
    (
        "VaR at 97.5% of 25% each in SPY, TLT, GLD, QQQ",
        "risk_report",
        &[
            ("/symbols", r#"["SPY","TLT","GLD","QQQ"]"#),
            ("/weights", r#"null"#),
            ("/confidence", r#"0.975"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "screen the 101 alphas on the offline universe 2005–2017",
        "factor_screen",
        &[
            ("/library", r#""alpha101""#),
            ("/start", r#""2005-01-01""#),
            ("/end", r#""2017-12-31""#),
            ("/symbols", r#"null"#),
        ],
    ),
    (
        "IC of 12-1 momentum on the offline universe",
        "factor_ic",
        &[
            (
                "/factor",
                r#"{"indicator":"momentum","params":{"window":252,"skip":21}}"#,
            ),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "information coefficient of short-term reversal on the offline universe 2010-2015",
        "factor_ic",
        &[
            (
                "/factor",
                r#"{"indicator":"momentum","params":{"window":21,"skip":0}}"#,
            ),
            ("/start", r#""2010-01-01""#),
            ("/end", r#""2015-12-31""#),
        ],
    ),
    (
        "does 20-day momentum predict returns",
        "factor_ic",
        &[
            (
                "/factor",
                r#"{"indicator":"momentum","params":{"window":20,"skip":0}}"#,
            ),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "beta of AAPL to the market factor 2010–2017",
        "regression",
        &[
            ("/y", r#""AAPL""#),
            ("/x", r#"["ff:MktRF"]"#),
            ("/frequency", r#""monthly""#),
            ("/start", r#""2010-01-01""#),
            ("/end", r#""2017-12-31""#),
        ],
    ),
    (
        "Fama-French three factor regression of MSFT 2005-2015",
        "regression",
        &[
            ("/y", r#""MSFT""#),
            ("/x", r#"["ff:MktRF","ff:SMB","ff:HML"]"#),
            ("/frequency", r#""monthly""#),
            ("/start", r#""2005-01-01""#),
            ("/end", r#""2015-12-31""#),
        ],
    ),
    (
        "alpha of IBM against SPY in 2012",
        "regression",
        &[
            ("/y", r#""IBM""#),
            ("/x", r#"["SPY"]"#),
            ("/frequency", r#""daily""#),
            ("/start", r#""2012-01-01""#),
            ("/end", r#""2012-12-31""#),
        ],
    ),
    (
        "carhart loadings of XOM",
        "regression",
        &[
            ("/y", r#""XOM""#),
            ("/x", r#"["ff:MktRF","ff:SMB","ff:HML","ff:Mom"]"#),
            ("/frequency", r#""monthly""#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "exposure of AAPL to the Fama French 5 factors",
        "regression",
        &[
            ("/y", r#""AAPL""#),
            ("/x", r#"["ff:MktRF","ff:SMB","ff:HML"]"#),
            ("/frequency", r#""monthly""#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "does a Sharpe of 1.4 over 3 years survive 50 trials",
        "overfitting",
        &[
            ("/sharpe", r#"1.4"#),
            ("/observations", r#"756"#),
            ("/trials", r#"50"#),
            ("/symbols", r#"null"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "deflated sharpe of 2.1 over 5 years with 100 trials",
        "overfitting",
        &[
            ("/sharpe", r#"2.1"#),
            ("/observations", r#"1260"#),
            ("/trials", r#"100"#),
            ("/symbols", r#"null"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "overfitting check of a 1.8 sharpe over 4 years across 200 trials",
        "overfitting",
        &[
            ("/sharpe", r#"1.8"#),
            ("/observations", r#"1008"#),
            ("/trials", r#"200"#),
            ("/symbols", r#"null"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "probability of backtest overfitting across buy and hold of HD, LOW, TGT, WMT and COST",
        "overfitting",
        &[
            ("/sharpe", r#"null"#),
            ("/observations", r#"null"#),
            ("/trials", r#"null"#),
            ("/symbols", r#"["HD","LOW","TGT","WMT","COST"]"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "PBO of AAPL, MSFT, IBM, ORCL",
        "overfitting",
        &[
            ("/sharpe", r#"null"#),
            ("/observations", r#"null"#),
            ("/trials", r#"null"#),
            ("/symbols", r#"["AAPL","MSFT","IBM","ORCL"]"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "CSCV overfitting test across KO, PEP, PG, CL from 2005 to 2015",
        "overfitting",
        &[
            ("/sharpe", r#"null"#),
            ("/observations", r#"null"#),
            ("/trials", r#"null"#),
            ("/symbols", r#"["KO","PEP","PG","CL"]"#),
            ("/start", r#""2005-01-01""#),
            ("/end", r#""2015-12-31""#),
        ],
    ),
    (
        "probabilistic sharpe ratio of 0.8 over 2 years",
        "overfitting",
        &[
            ("/sharpe", r#"0.8"#),
            ("/observations", r#"504"#),
            ("/trials", r#"null"#),
            ("/symbols", r#"null"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "Johansen test on KO, PEP and PG",
        "stat_test",
        &[
            ("/test", r#""johansen""#),
            ("/symbols", r#"["KO","PEP","PG"]"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
            ("/field", r#"null"#),
        ],
    ),
    (
        "Johanson test on KO, PEP and PG",
        "stat_test",
        &[
            ("/test", r#""johansen""#),
            ("/symbols", r#"["KO","PEP","PG"]"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
            ("/field", r#"null"#),
        ],
    ),
    (
        "is SPY stationary from 2005 to 2010",
        "stat_test",
        &[
            ("/test", r#""adf""#),
            ("/symbols", r#"["SPY"]"#),
            ("/start", r#""2005-01-01""#),
            ("/end", r#""2010-12-31""#),
            ("/field", r#"null"#),
        ],
    ),
    (
        "ADF test of GLD",
        "stat_test",
        &[
            ("/test", r#""adf""#),
            ("/symbols", r#"["GLD"]"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
            ("/field", r#"null"#),
        ],
    ),
    (
        "Engle-Granger cointegration of KO and PEP 2010-2015",
        "stat_test",
        &[
            ("/test", r#""engle_granger""#),
            ("/symbols", r#"["KO","PEP"]"#),
            ("/start", r#""2010-01-01""#),
            ("/end", r#""2015-12-31""#),
            ("/field", r#"null"#),
        ],
    ),
    (
        "cointegration test of XOM and CVX from 2010 to 2015",
        "stat_test",
        &[
            ("/test", r#""engle_granger""#),
            ("/symbols", r#"["XOM","CVX"]"#),
            ("/start", r#""2010-01-01""#),
            ("/end", r#""2015-12-31""#),
            ("/field", r#"null"#),
        ],
    ),
    (
        "KPSS test on TLT",
        "stat_test",
        &[
            ("/test", r#""kpss""#),
            ("/symbols", r#"["TLT"]"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
            ("/field", r#"null"#),
        ],
    ),
    (
        "are XOM's returns normal",
        "stat_test",
        &[
            ("/test", r#""jarque_bera""#),
            ("/symbols", r#"["XOM"]"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
            ("/field", r#"null"#),
        ],
    ),
    (
        "Ljung-Box test of SPY returns",
        "stat_test",
        &[
            ("/test", r#""ljung_box""#),
            ("/symbols", r#"["SPY"]"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
            ("/field", r#"null"#),
        ],
    ),
    (
        "Hurst exponent of SPY",
        "stat_test",
        &[
            ("/test", r#""hurst""#),
            ("/symbols", r#"["SPY"]"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
            ("/field", r#"null"#),
        ],
    ),
    (
        "half-life of mean reversion of KO and PEP spread",
        "stat_test",
        &[
            ("/test", r#""engle_granger""#),
            ("/symbols", r#"["KO","PEP"]"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
            ("/field", r#"null"#),
        ],
    ),
    (
        "GARCH volatility forecast of SPY",
        "volatility_model",
        &[
            ("/symbol", r#""SPY""#),
            ("/model", r#""garch""#),
            ("/dist", r#"null"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "GJR GARCH with t errors of SPY 2005-2015",
        "volatility_model",
        &[
            ("/symbol", r#""SPY""#),
            ("/model", r#""gjr_garch""#),
            ("/dist", r#""t""#),
            ("/start", r#""2005-01-01""#),
            ("/end", r#""2015-12-31""#),
        ],
    ),
    (
        "EWMA volatility of QQQ",
        "volatility_model",
        &[
            ("/symbol", r#""QQQ""#),
            ("/model", r#""ewma""#),
            ("/dist", r#"null"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "garch forecast for gld",
        "volatility_model",
        &[
            ("/symbol", r#""GLD""#),
            ("/model", r#""garch""#),
            ("/dist", r#"null"#),
            ("/start", r#"null"#),
            ("/end", r#"null"#),
        ],
    ),
    (
        "garch(1,1) of AAPL from 2008 to 2012",
        "volatility_model",
        &[
            ("/symbol", r#""AAPL""#),
            ("/model", r#""garch""#),
            ("/dist", r#"null"#),
            ("/start", r#""2008-01-01""#),
            ("/end", r#""2012-12-31""#),
        ],
    ),
    (
        "remember that I prefer 10 bp fees",
        "remember",
        &[
            ("/action", r#""save""#),
            ("/content", r#""I prefer 10 bp fees""#),
            ("/query", r#"null"#),
        ],
    ),
    (
        "remember: benchmark everything against SPY",
        "remember",
        &[
            ("/action", r#""save""#),
            ("/content", r#""benchmark everything against SPY""#),
            ("/query", r#"null"#),
        ],
    ),
    (
        "what do you remember about fees",
        "remember",
        &[
            ("/action", r#""recall""#),
            ("/content", r#"null"#),
            ("/query", r#""fees""#),
        ],
    ),
    (
        "what do you know about momentum",
        "remember",
        &[
            ("/action", r#""recall""#),
            ("/content", r#"null"#),
            ("/query", r#""momentum""#),
        ],
    ),
    (
        "recall transaction costs",
        "recall",
        &[("/query", r#""transaction costs""#)],
    ),
    (
        "search my memories for momentum",
        "recall",
        &[("/query", r#""momentum""#)],
    ),
    ("compact", "compact", &[("/focus_topic", r#"null"#)]),
    (
        "compact the context",
        "compact",
        &[("/focus_topic", r#"null"#)],
    ),
    ("/compact fees", "compact", &[("/focus_topic", r#""fees""#)]),
];

/// Requests no offline tool serves: views and filters the desk does not
/// have, data the embedded market does not hold, questions for a model.
const UNSERVABLE: &[&str] = &[
    "Black-Litterman portfolio of AAPL, MSFT, XOM",
    "Kalman filter hedge ratio of KO and PEP",
    "What is Tesla's latest earnings surprise?",
    "write me a haiku about bonds",
    "what is the P/E ratio of IBM",
    "translate this into French",
    "latest news on Apple",
    "train an LSTM to forecast SPY",
    "what is bitcoin trading at today",
    "EUR/USD carry trade returns",
    "who will win the election",
    "summarise the Fed minutes",
];

#[test]
fn every_phrase_reaches_its_tool_with_its_meaning() {
    assert!(
        PHRASES.len() >= 80,
        "the phrasebook has {} phrases",
        PHRASES.len()
    );
    let mut wrong = Vec::new();
    for (request, tool, says) in PHRASES {
        let (Some(call), _) = planned(request) else {
            wrong.push(format!("{request:?}: no call, expected {tool}"));
            continue;
        };
        if call.name != *tool {
            wrong.push(format!("{request:?}: {} instead of {tool}", call.name));
            continue;
        }
        for (pointer, expected) in *says {
            let expected: Value = serde_json::from_str(expected).unwrap();
            let got = call.args.pointer(pointer).cloned().unwrap_or(Value::Null);
            if !same(&got, &expected) {
                wrong.push(format!(
                    "{request:?}: {pointer} is {got}, expected {expected}"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} phrases misread:\n{}",
        wrong.len(),
        PHRASES.len(),
        wrong.join("\n")
    );
}

/// Equal JSON, numbers to 1e-12 relative (a year's fraction in weeks
/// does not print to the same last digit everywhere).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-12 * x.abs().max(1.0)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn unservable_requests_end_unsupported_and_say_what_is_missing() {
    assert!(UNSERVABLE.len() >= 10);
    for request in UNSERVABLE {
        match planned(request).1 {
            Plan::Unsupported(text) => assert!(
                text.contains("vibedesk doctor") || text.contains("offline"),
                "{request:?}: {text}"
            ),
            other => panic!("{request:?} was planned as {other:?}"),
        }
    }
}

#[test]
fn every_tool_the_planner_drives_is_in_the_phrasebook() {
    for row in INTENTS {
        assert!(
            PHRASES.iter().any(|(_, tool, _)| *tool == row.tool),
            "no phrase reaches {}",
            row.tool
        );
    }
}
