#!/usr/bin/env python3
"""Goldens for vibedesk's tear sheet (docs §20.1), from quantstats and empyrical.

Writes tearsheet.json next to this file; the Rust test
(tests/engine/tearsheet_goldens.rs) reads it and needs no Python.

    python3 -m venv /tmp/tsvenv
    /tmp/tsvenv/bin/pip install -r tests/golden/tearsheet/requirements.txt
    /tmp/tsvenv/bin/python tests/golden/tearsheet/make_goldens.py [DATA_DIR]

DATA_DIR holds the offline market, us_daily_2000_2017.csv.gz (default: the
first of assets/data, ../shared/data and /work/shared/data that has it).

Each case's daily returns are written with its values, so the Rust side
computes on exactly these numbers. reports.metrics(mode="full") rounds every
value to two decimals, so each row is taken from the quantstats.stats call
reports.metrics makes for it, with the same arguments (rf=0, compounded,
252 periods, prepared returns); the script checks that the rounded values
agree with reports.metrics' own table. Before any call the returns and the
benchmark are cut to start on the first day both are non-zero, which
reports.metrics' match_dates does itself, so the input is what both see.

Cases: three strategies on the offline market (SPY held; an SMA 20/50
crossover on AAPL against SPY; a daily-rebalanced 60/40 SPY/TLT against
SPY) and a seeded fat-tailed series with gaps (a tenth of the business days
and all of August 2011 missing) against a seeded benchmark.
"""

import gzip
import json
import math
import os
import sys
import warnings
from importlib.metadata import version

import empyrical as ep
import numpy as np
import pandas as pd
import quantstats as qs
from dateutil.relativedelta import relativedelta

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PACKAGES = ["quantstats", "empyrical-reloaded", "numpy", "pandas", "scipy"]
S = qs.stats


def data_dir():
    if len(sys.argv) > 1:
        return sys.argv[1]
    for d in [os.path.join(ROOT, "assets", "data"), os.path.join(ROOT, "..", "shared", "data"), "/work/shared/data"]:
        if os.path.exists(os.path.join(d, "us_daily_2000_2017.csv.gz")):
            return d
    sys.exit("the offline market us_daily_2000_2017.csv.gz was not found; pass its directory")


def closes(tickers):
    with gzip.open(os.path.join(data_dir(), "us_daily_2000_2017.csv.gz"), "rt") as f:
        df = pd.read_csv(f, usecols=["Ticker", "Date", "Close"])
    df = df[df["Ticker"].isin(tickers)]
    return df.pivot(index="Date", columns="Ticker", values="Close").set_axis(
        pd.to_datetime(df.pivot(index="Date", columns="Ticker", values="Close").index)
    )


def num(x):
    x = float(x)
    return x if math.isfinite(x) else None


def match(r, b):
    if b is None:
        return r, None
    loc = max(r.ne(0).idxmax(), b.ne(0).idxmax())
    return r.loc[loc:], b.loc[loc:]


def single(s):
    """Every row of one column, as reports.metrics computes it."""
    dd = S.to_drawdown_series(s)
    det = S.drawdown_details(dd)
    today = s.index[-1]
    since = lambda d: s[s.index >= d]
    m = {
        "time_in_market": S.exposure(s, prepare_returns=False),
        "cumulative_return": S.comp(s),
        "cagr": S.cagr(s, 0.0, True, 252),
        "sharpe": S.sharpe(s, 0.0, 252, True),
        "prob_sharpe_ratio": S.probabilistic_sharpe_ratio(s, 0.0, 252, False),
        "smart_sharpe": S.smart_sharpe(s, 0.0, 252, True),
        "sortino": S.sortino(s, 0.0, 252, True),
        "smart_sortino": S.smart_sortino(s, 0.0, 252, True),
        "omega": S.omega(s, 0.0, 0.0, 252),
        "max_drawdown": S.max_drawdown(s),
        "longest_dd_days": det["days"].max() if len(det) else float("nan"),
        "volatility": S.volatility(s, 252, True, prepare_returns=False),
        "calmar": S.calmar(s, prepare_returns=False, compounded=True, periods=252),
        "skew": S.skew(s, prepare_returns=False),
        "kurtosis": S.kurtosis(s, prepare_returns=False),
        "ulcer_performance_index": S.ulcer_performance_index(s, 0.0),
        "risk_adjusted_return": S.rar(s, 0.0, periods=252, compounded=True),
        "risk_return_ratio": S.risk_return_ratio(s, prepare_returns=False),
        "avg_return": S.avg_return(s, prepare_returns=False),
        "avg_win": S.avg_win(s, prepare_returns=False),
        "avg_loss": S.avg_loss(s, prepare_returns=False),
        "win_loss_ratio": S.win_loss_ratio(s, prepare_returns=False),
        "profit_ratio": S.profit_ratio(s, prepare_returns=False),
        "expected_daily": S.expected_return(s, compounded=True, prepare_returns=False),
        "expected_monthly": S.expected_return(s, compounded=True, aggregate="ME", prepare_returns=False),
        "expected_yearly": S.expected_return(s, compounded=True, aggregate="YE", prepare_returns=False),
        "kelly_criterion": S.kelly_criterion(s, prepare_returns=False),
        "risk_of_ruin": S.risk_of_ruin(s, prepare_returns=False),
        "daily_var": -abs(S.var(s, prepare_returns=False)),
        "cvar": -abs(S.cvar(s, prepare_returns=False)),
        "max_consecutive_wins": S.consecutive_wins(s),
        "max_consecutive_losses": S.consecutive_losses(s),
        "gain_pain_ratio": S.gain_to_pain_ratio(s, 0.0),
        "gain_pain_1m": S.gain_to_pain_ratio(s, 0.0, "ME"),
        "payoff_ratio": S.payoff_ratio(s, prepare_returns=False),
        "profit_factor": S.profit_factor(s, prepare_returns=False),
        "common_sense_ratio": S.common_sense_ratio(s, prepare_returns=False),
        "cpc_index": S.cpc_index(s, prepare_returns=False),
        "tail_ratio": S.tail_ratio(s, prepare_returns=False),
        "outlier_win_ratio": S.outlier_win_ratio(s, prepare_returns=False),
        "outlier_loss_ratio": S.outlier_loss_ratio(s, prepare_returns=False),
        "mtd": S.comp(since(pd.Timestamp(today.year, today.month, 1))),
        "3m": S.comp(since(today - relativedelta(months=3))),
        "6m": S.comp(since(today - relativedelta(months=6))),
        "ytd": S.comp(since(pd.Timestamp(today.year, 1, 1))),
        "1y": S.comp(since(today - relativedelta(years=1))),
        "3y_ann": S.cagr(since(today - relativedelta(months=35)), 0.0, True, 252),
        "5y_ann": S.cagr(since(today - relativedelta(months=59)), 0.0, True, 252),
        "10y_ann": S.cagr(since(today - relativedelta(months=119)), 0.0, True, 252),
        "all_time_ann": S.cagr(s, 0.0, True, 252),
        "best_day": S.best(s, compounded=True, prepare_returns=False),
        "worst_day": S.worst(s, prepare_returns=False),
        "best_month": S.best(s, compounded=True, aggregate="ME", prepare_returns=False),
        "worst_month": S.worst(s, aggregate="ME", prepare_returns=False),
        "best_year": S.best(s, compounded=True, aggregate="YE", prepare_returns=False),
        "worst_year": S.worst(s, compounded=True, aggregate="YE", prepare_returns=False),
        "avg_drawdown": det["max drawdown"].mean() / 100 if len(det) else float("nan"),
        "avg_drawdown_days": float(np.round(det["days"].mean())) if len(det) else float("nan"),
        "recovery_factor": S.recovery_factor(s),
        "ulcer_index": S.ulcer_index(s),
        "serenity_index": S.serenity_index(s, 0.0),
        "avg_up_month": S.avg_win(s, compounded=True, aggregate="ME", prepare_returns=False),
        "avg_down_month": S.avg_loss(s, compounded=True, aggregate="ME", prepare_returns=False),
        "win_days": S.win_rate(s, prepare_returns=False),
        "win_month": S.win_rate(s, compounded=True, aggregate="ME", prepare_returns=False),
        "win_quarter": S.win_rate(s, compounded=True, aggregate="QE", prepare_returns=False),
        "win_year": S.win_rate(s, compounded=True, aggregate="YE", prepare_returns=False),
    }
    m["sortino_sqrt2"] = m["sortino"] / math.sqrt(2)
    m["smart_sortino_sqrt2"] = m["smart_sortino"] / math.sqrt(2)
    m["risk_free_rate"] = 0.0
    return m


def relative(r, b):
    g = S.greeks(r, b, 252, prepare_returns=False)
    return {
        "r_squared": S.r_squared(r, b, prepare_returns=False),
        "information_ratio": S.information_ratio(r, b, prepare_returns=False),
        "beta": g["beta"],
        "alpha": g["alpha"],
        "correlation": b.corr(r),
        "treynor_ratio": S.treynor_ratio(r, b, 252, 0.0),
    }


def empyrical(r, b):
    e = {
        "sharpe": ep.sharpe_ratio(r),
        "sortino": ep.sortino_ratio(r),
        "volatility": ep.annual_volatility(r),
        "max_drawdown": ep.max_drawdown(r),
        "cagr": ep.annual_return(r),
        "calmar": ep.calmar_ratio(r),
        "omega": ep.omega_ratio(r),
        "tail_ratio": ep.tail_ratio(r),
        "cumulative_return": ep.cum_returns_final(r),
    }
    if b is not None:
        e["beta"] = ep.beta(r, b)
    return e


def check_against_report(r, b, mine):
    """The rounded rows of reports.metrics agree with the stats calls."""
    t = qs.reports.metrics(r, benchmark=b, mode="full", display=False, rf=0.0)
    col = "Strategy" if "Strategy" in t.columns else t.columns[-1]
    labels = {"Sharpe": "sharpe", "Sortino": "sortino", "Omega": "omega", "Calmar": "calmar",
              "Skew": "skew", "Kurtosis": "kurtosis", "Ulcer Index": "ulcer_index",
              "Cumulative Return": "cumulative_return", "Volatility (ann.)": "volatility",
              "Best Year": "best_year", "Worst Month": "worst_month", "Win Days %": "win_days",
              "Kelly Criterion": "kelly_criterion", "Serenity Index": "serenity_index"}
    for label, key in labels.items():
        if label in t.index and mine[key] is not None:
            got = float(str(t.loc[label, col]).replace(",", "").rstrip("%"))
            assert abs(got - round(mine[key], 2)) <= 0.011, (label, got, mine[key])


def case(name, r, b=None, bench_name=None):
    r, b = match(r, b)
    m = single(r)
    if b is not None:
        m |= relative(r, b)
    mb = single(b) if b is not None else {}
    check_against_report(r, b, m)
    det = S.drawdown_details(S.to_drawdown_series(r))
    mt = S.monthly_returns(r)
    return {
        "name": name,
        "dates": [d.strftime("%Y-%m-%d") for d in r.index],
        "returns": [float(x) for x in r.values],
        "benchmark_name": bench_name,
        "benchmark": None if b is None else [float(x) for x in b.values],
        "metrics": {k: num(v) for k, v in m.items()},
        "benchmark_metrics": {k: num(v) for k, v in mb.items()},
        "empyrical": {k: num(v) for k, v in empyrical(r, b).items()},
        "drawdowns": [
            {"start": row.start, "valley": row.valley, "end": row.end, "days": int(row.days),
             "max_drawdown": float(row["max drawdown"]) / 100}
            for _, row in det.iterrows()
        ],
        "monthly": {
            "years": [int(y) for y in mt.index],
            "cells": [[float(x) for x in row[:12]] for row in mt.values],
            "eoy": [float(x) for x in mt["EOY"].values],
        },
    }


def sma(close, fast=20, slow=50):
    pos = (close.rolling(fast).mean() > close.rolling(slow).mean()).astype(float).shift(1).fillna(0.0)
    return close.pct_change().fillna(0.0) * pos


def seeded():
    rng = np.random.default_rng(38)
    days = pd.bdate_range("2010-01-04", "2013-12-31")
    keep = rng.random(len(days)) > 0.1
    keep &= ~((days.year == 2011) & (days.month == 8))
    days = days[keep]
    r = pd.Series(rng.standard_t(4, len(days)) * 0.008 + 0.0003, index=days)
    b = pd.Series(0.6 * r.values + rng.normal(0.0002, 0.006, len(days)), index=days)
    return r, b


def main():
    # Only days every ticker of the case trades: a missing close would be a
    # NaN return, which quantstats counts as 0 and vibedesk leaves out.
    px = closes(["SPY", "AAPL", "TLT"])
    both = px[["SPY", "TLT"]].dropna()
    rets = both.pct_change()
    window = (both.index >= "2006-01-01") & (both.index <= "2017-11-10")
    spy = rets["SPY"][window]
    aapl_px = px[["SPY", "AAPL"]].dropna()
    inside = (aapl_px.index >= "2008-01-01") & (aapl_px.index <= "2016-12-31")
    aapl = sma(aapl_px["AAPL"])[inside]
    aapl_bench = aapl_px["SPY"].pct_change()[inside]
    mix = (0.6 * rets["SPY"] + 0.4 * rets["TLT"])[window]
    r, b = seeded()
    cases = [
        case("spy_hold", spy),
        case("sma_aapl", aapl, aapl_bench, "SPY"),
        case("spy_tlt_60_40", mix, spy, "SPY"),
        case("seeded_gaps", r, b, "seeded"),
    ]
    payload = {
        "generated_by": "tests/golden/tearsheet/make_goldens.py",
        "versions": {p: version(p) for p in PACKAGES} | {"python": sys.version.split()[0]},
        "cases": cases,
    }
    with open(os.path.join(HERE, "tearsheet.json"), "w") as f:
        json.dump(payload, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
