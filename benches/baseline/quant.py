#!/usr/bin/env python3
"""The Python references' side of `cargo bench --bench quant` (docs §15.8).

Reads the inputs the Rust bench wrote (raw little-endian f64 arrays in DIR,
shapes in DIR/shapes.json), times the same computations with the reference
libraries, and prints one JSON object of seconds (and a few results for the
bench to check it computed the same thing):

- 10,000 European options with price and Greeks: QuantLib's
  AnalyticEuropeanEngine, the quotes reset per option;
- implied volatility of 10,000 quotes: QuantLib's VanillaOption.impliedVolatility
  (accuracy 1e-10);
- each optimiser on 100 assets x 2,520 daily returns, from the returns:
  PyPortfolioOpt (min_volatility, max_sharpe, max diversification as max_sharpe
  on the volatilities, HRPOpt single linkage), scipy (equal risk contributions
  by L-BFGS-B on the log-barrier objective), numpy (equal and inverse-volatility
  weights with their figures);
- a risk report of a 100-asset book: numpy and scipy.

Usage: quant.py DIR (with the packages of tests/golden/quant/requirements.txt).
"""

import json
import math
import os
import sys
import time

import numpy as np
import pandas as pd
import QuantLib as ql
from scipy import optimize, stats
from pypfopt import EfficientFrontier, HRPOpt, risk_models

DIR = sys.argv[1]
SHAPES = json.load(open(os.path.join(DIR, "shapes.json")))


def load(name):
    return np.fromfile(os.path.join(DIR, name + ".f64"), dtype="<f8").reshape(SHAPES[name])


def best(f, repeat):
    times = []
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return min(times), out


# ------------------------------------------------------------------ options

TODAY = ql.Date(15, 6, 2020)
ql.Settings.instance().evaluationDate = TODAY
DC = ql.Actual365Fixed()
spot_q, vol_q, r_q, q_q = (ql.SimpleQuote(0.0) for _ in range(4))
PROCESS = ql.BlackScholesMertonProcess(
    ql.QuoteHandle(spot_q),
    ql.YieldTermStructureHandle(ql.FlatForward(TODAY, ql.QuoteHandle(q_q), DC)),
    ql.YieldTermStructureHandle(ql.FlatForward(TODAY, ql.QuoteHandle(r_q), DC)),
    ql.BlackVolTermStructureHandle(ql.BlackConstantVol(TODAY, ql.NullCalendar(), ql.QuoteHandle(vol_q), DC)),
)
ENGINE = ql.AnalyticEuropeanEngine(PROCESS)


def option(kind, strike, days):
    payoff = ql.PlainVanillaPayoff(ql.Option.Call if kind > 0 else ql.Option.Put, strike)
    o = ql.VanillaOption(payoff, ql.EuropeanExercise(TODAY + int(days)))
    o.setPricingEngine(ENGINE)
    return o


def price_all(grid):
    out = np.empty((len(grid), 6))
    for i, (kind, s, k, days, v, r, q) in enumerate(grid):
        spot_q.setValue(s)
        vol_q.setValue(v)
        r_q.setValue(r)
        q_q.setValue(q)
        o = option(kind, k, days)
        out[i] = (o.NPV(), o.delta(), o.gamma(), o.vega(), o.theta(), o.rho())
    return out


def implied_all(grid, prices):
    out = np.empty(len(grid))
    for i, ((kind, s, k, days, v, r, q), p) in enumerate(zip(grid, prices)):
        spot_q.setValue(s)
        vol_q.setValue(v)
        r_q.setValue(r)
        q_q.setValue(q)
        o = option(kind, k, days)
        out[i] = o.impliedVolatility(p, PROCESS, 1e-10, 200, 1e-7, 4.0)
    return out


# ---------------------------------------------------------------- portfolio


def frame(x):
    return pd.DataFrame(x, columns=[f"A{i:03d}" for i in range(x.shape[1])])


def figures(w, mu, S):
    return w @ mu, math.sqrt(w @ S @ w)


def equal_weight(df):
    S = df.cov().values * 252
    mu = df.mean().values * 252
    w = np.full(df.shape[1], 1.0 / df.shape[1])
    return w, figures(w, mu, S)


def inverse_volatility(df):
    S = df.cov().values * 252
    mu = df.mean().values * 252
    inv = 1.0 / np.sqrt(np.diag(S))
    w = inv / inv.sum()
    return w, figures(w, mu, S)


def frontier(df):
    mu = df.mean() * 252
    S = risk_models.sample_cov(df, returns_data=True, frequency=252)
    return mu, S


def min_variance(df):
    mu, S = frontier(df)
    w = EfficientFrontier(mu, S).min_volatility()
    return np.array(list(w.values()))


def max_sharpe(df):
    mu, S = frontier(df)
    w = EfficientFrontier(mu, S).max_sharpe(risk_free_rate=0.0)
    return np.array(list(w.values()))


def max_diversification(df):
    _, S = frontier(df)
    vols = pd.Series(np.sqrt(np.diag(S)), index=S.index)
    w = EfficientFrontier(vols, S).max_sharpe(risk_free_rate=0.0)
    return np.array(list(w.values()))


def hrp(df):
    w = HRPOpt(returns=df).optimize(linkage_method="single")
    return np.array([w[c] for c in df.columns])


def risk_parity(df):
    S = df.cov().values * 252
    n = S.shape[0]
    b = 1.0 / n

    def f(y):
        return 0.5 * y @ S @ y - b * np.log(y).sum(), S @ y - b / y

    y0 = 1.0 / np.sqrt(np.diag(S))
    y0 /= math.sqrt(y0 @ S @ y0)
    res = optimize.minimize(f, y0, jac=True, method="L-BFGS-B",
                            bounds=[(1e-12, None)] * n, options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10000})
    return res.x / res.x.sum()


# --------------------------------------------------------------------- risk


def risk_report(x, w, c=0.99):
    r = x @ w
    alpha = 1 - c
    q = np.quantile(r, alpha)
    es = -r[r <= q].mean()
    mu, sd = r.mean(), r.std(ddof=1)
    z = stats.norm.ppf(alpha)
    S, K = stats.skew(r), stats.kurtosis(r)
    zcf = z + (z * z - 1) * S / 6 + (z ** 3 - 3 * z) * K / 24 - (2 * z ** 3 - 5 * z) * S * S / 36
    cov = np.cov(x.T, ddof=1)
    sw = cov @ w
    var_p = -(mu + z * sd)
    comp = w * (-x.mean(axis=0) - z * sw / math.sqrt(w @ sw)) / var_p
    wealth = np.concatenate([[1.0], np.cumprod(1 + r)])
    dd = 1 - wealth / np.maximum.accumulate(wealth)
    return {
        "var_historical": -q, "es_historical": es, "var_parametric": var_p,
        "es_parametric": -mu + sd * stats.norm.pdf(z) / alpha,
        "var_cornish_fisher": -(mu + zcf * sd), "volatility": sd * math.sqrt(252),
        "max_drawdown": dd.max(), "component": comp.sum(), "hhi": (w ** 2).sum() / np.abs(w).sum() ** 2,
    }


def main():
    grid = load("options")
    prices = load("prices")
    returns = load("returns")
    weights = load("weights")
    df = frame(returns)
    out = {}
    out["options"], priced = best(lambda: price_all(grid), 1)
    out["implied"], ivs = best(lambda: implied_all(grid, prices), 1)
    out["implied_max_error"] = float(np.abs(ivs - grid[:, 4]).max())
    out["options_check"] = priced[:3, 0].tolist()
    for name, f, repeat in [
        ("equal_weight", equal_weight, 5),
        ("inverse_volatility", inverse_volatility, 5),
        ("min_variance", min_variance, 3),
        ("max_sharpe", max_sharpe, 3),
        ("risk_parity", risk_parity, 3),
        ("max_diversification", max_diversification, 3),
        ("hrp", hrp, 3),
    ]:
        secs, w = best(lambda: f(df), repeat)
        if isinstance(w, tuple):
            w = w[0]
        out[name] = secs
        out[name + "_weights"] = np.asarray(w, dtype=float).tolist()
    out["risk_report"], rep = best(lambda: risk_report(returns, weights[0]), 5)
    out["risk_check"] = {k: float(v) for k, v in rep.items()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
