#!/usr/bin/env python3
"""Goldens for vibedesk's quant tools (docs §15), from the reference libraries.

Writes options.json, portfolio.json and risk.json next to this file; the Rust
tests (tests/engine/quant_goldens.rs) read them and need no Python.

Run it in a fresh virtual environment with the versions pinned in
requirements.txt (the JSON records the versions that made it):

    python3 -m venv /tmp/qvenv
    /tmp/qvenv/bin/pip install -r tests/golden/quant/requirements.txt
    /tmp/qvenv/bin/python tests/golden/quant/make_goldens.py

Every input is seeded (numpy's PCG64 with the seeds below), so a rerun with the
same versions writes the same files.

- Options: QuantLib's AnalyticEuropeanEngine (price and Greeks) on a grid of
  strikes, expiries, volatilities, rates and dividend yields, with the same
  quantities from the closed forms evaluated with mpmath at 50 digits: QuantLib
  computes N(x) as (1 + erf(x/sqrt 2))/2 and a put from 1 - N(d1), which loses
  digits far in a tail, and the 50-digit values say which side is right there.
  American options: BinomialVanillaEngine("crr", 500).
- Portfolio: PyPortfolioOpt's EfficientFrontier.min_volatility and max_sharpe
  (mean daily return x 252, sample covariance x 252 or Ledoit-Wolf x 252), and
  HRPOpt with single linkage, on seeded returns.
- Risk: numpy / scipy VaR and expected shortfall (historical, normal,
  Cornish-Fisher) on seeded returns.
"""

import json
import math
import os
import sys
from importlib.metadata import version

import mpmath
import numpy as np
import pandas as pd
import QuantLib as ql
import scipy
from scipy import stats
from pypfopt import EfficientFrontier, HRPOpt, risk_models

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGES = ["numpy", "scipy", "pandas", "QuantLib", "PyPortfolioOpt", "scikit-learn", "mpmath", "cvxpy"]
mpmath.mp.dps = 50


def versions():
    return {p: version(p) for p in PACKAGES} | {"python": sys.version.split()[0]}


def write(name, payload):
    payload = {"generated_by": "tests/golden/quant/make_goldens.py", "versions": versions()} | payload
    with open(os.path.join(HERE, name), "w") as f:
        json.dump(payload, f, indent=None, separators=(",", ":"))
        f.write("\n")


# ---------------------------------------------------------------- options

TODAY = ql.Date(15, 6, 2020)
DC = ql.Actual365Fixed()


def ql_option(kind, style, spot, strike, days, vol, r, q, steps=500):
    ql.Settings.instance().evaluationDate = TODAY
    maturity = TODAY + days
    payoff = ql.PlainVanillaPayoff(ql.Option.Call if kind == "call" else ql.Option.Put, strike)
    if style == "european":
        exercise = ql.EuropeanExercise(maturity)
    else:
        exercise = ql.AmericanExercise(TODAY, maturity)
    option = ql.VanillaOption(payoff, exercise)
    process = ql.BlackScholesMertonProcess(
        ql.QuoteHandle(ql.SimpleQuote(spot)),
        ql.YieldTermStructureHandle(ql.FlatForward(TODAY, q, DC)),
        ql.YieldTermStructureHandle(ql.FlatForward(TODAY, r, DC)),
        ql.BlackVolTermStructureHandle(ql.BlackConstantVol(TODAY, ql.NullCalendar(), vol, DC)),
    )
    if style == "european":
        option.setPricingEngine(ql.AnalyticEuropeanEngine(process))
        return {
            "price": option.NPV(),
            "delta": option.delta(),
            "gamma": option.gamma(),
            "vega": option.vega(),
            "theta": option.theta(),
            "rho": option.rho(),
        }
    option.setPricingEngine(ql.BinomialVanillaEngine(process, "crr", steps))
    return {
        "price": option.NPV(),
        "delta": option.delta(),
        "gamma": option.gamma(),
        "theta": option.theta(),
    }


def mp_bsm(kind, spot, strike, t, vol, r, q):
    """The closed forms at 50 digits (theta as calendar time passes)."""
    S, K, T, s, r, q = (mpmath.mpf(x) for x in (spot, strike, t, vol, r, q))
    sd = s * mpmath.sqrt(T)
    d1 = (mpmath.log(S / K) + (r - q) * T) / sd + sd / 2
    d2 = d1 - sd
    N = lambda x: mpmath.ncdf(x)
    n = lambda x: mpmath.npdf(x)
    dq, dr = mpmath.exp(-q * T), mpmath.exp(-r * T)
    gamma = dq * n(d1) / (S * sd)
    vega = S * dq * n(d1) * mpmath.sqrt(T)
    decay = -S * dq * n(d1) * s / (2 * mpmath.sqrt(T))
    if kind == "call":
        price = S * dq * N(d1) - K * dr * N(d2)
        delta = dq * N(d1)
        theta = decay - r * K * dr * N(d2) + q * S * dq * N(d1)
        rho = K * T * dr * N(d2)
    else:
        price = K * dr * N(-d2) - S * dq * N(-d1)
        delta = -dq * N(-d1)
        theta = decay + r * K * dr * N(-d2) - q * S * dq * N(-d1)
        rho = -K * T * dr * N(-d2)
    return {k: float(v) for k, v in dict(price=price, delta=delta, gamma=gamma, vega=vega, theta=theta, rho=rho).items()}


def options():
    spot = 100.0
    strikes = [50.0, 75.0, 90.0, 100.0, 110.0, 140.0, 200.0]
    days = [2, 30, 91, 365, 1095, 3650]
    vols = [0.08, 0.25, 0.9]
    markets = [(0.0, 0.0), (0.15, 0.0), (0.02, 0.10), (-0.01, 0.04)]
    european = []
    for kind in ["call", "put"]:
        for k in strikes:
            for d in days:
                for v in vols:
                    for r, q in markets:
                        t = d / 365.0
                        european.append({
                            "kind": kind, "spot": spot, "strike": k, "expiry_years": t,
                            "volatility": v, "rate": r, "dividend_yield": q,
                            "quantlib": ql_option(kind, "european", spot, k, d, v, r, q),
                            "exact": mp_bsm(kind, spot, k, t, v, r, q),
                        })
    american = []
    for kind in ["call", "put"]:
        for k in [80.0, 100.0, 125.0]:
            for d in [30, 365, 1095]:
                for v in [0.2, 0.5]:
                    for r, q in [(0.0, 0.0), (0.05, 0.0), (0.02, 0.06)]:
                        american.append({
                            "kind": kind, "spot": spot, "strike": k, "expiry_years": d / 365.0,
                            "volatility": v, "rate": r, "dividend_yield": q, "steps": 500,
                            "quantlib": ql_option(kind, "american", spot, k, d, v, r, q, 500),
                        })
    write("options.json", {"european": european, "american": american})
    print(f"options.json: {len(european)} European, {len(american)} American")


# ---------------------------------------------------------------- portfolio


def seeded_returns(seed, assets, days):
    """Daily returns from a one-factor model with distinct drifts and
    volatilities, rounded to 8 decimals (the rounded values are the inputs)."""
    rng = np.random.default_rng(seed)
    market = rng.normal(0.0003, 0.01, days)
    beta = rng.uniform(0.3, 1.4, assets)
    drift = rng.uniform(0.0, 0.0012, assets)
    idio = rng.uniform(0.004, 0.02, assets)
    r = market[:, None] * beta[None, :] + drift[None, :] + rng.normal(0, 1, (days, assets)) * idio[None, :]
    names = [f"A{i + 1:02d}" for i in range(assets)]
    return pd.DataFrame(np.round(r, 8), columns=names)


def weights_of(w, names):
    return [float(w[n]) for n in names]


def portfolio():
    sets = {
        "five": seeded_returns(11, 5, 260),
        "eight": seeded_returns(7, 8, 500),
        "twelve": seeded_returns(23, 12, 750),
    }
    cases = []

    def frontier(df, cov_kind, lo, hi):
        mu = df.mean() * 252
        if cov_kind == "sample":
            S = risk_models.sample_cov(df, returns_data=True, frequency=252)
        else:
            S = risk_models.CovarianceShrinkage(df, returns_data=True, frequency=252).ledoit_wolf()
        return mu, S, EfficientFrontier(mu, S, weight_bounds=(lo, hi))

    for name, df in sets.items():
        cols = list(df.columns)
        for cov_kind in ["sample", "ledoit_wolf"]:
            for lo, hi in [(0.0, 1.0), (0.02, 0.3)]:
                _, _, ef = frontier(df, cov_kind, lo, hi)
                cases.append({"data": name, "method": "min_variance", "covariance": cov_kind,
                              "min_weight": lo, "max_weight": hi, "risk_free_rate": 0.0,
                              "weights": weights_of(ef.min_volatility(), cols)})
                for rf in [0.0, 0.03]:
                    _, _, ef = frontier(df, cov_kind, lo, hi)
                    cases.append({"data": name, "method": "max_sharpe", "covariance": cov_kind,
                                  "min_weight": lo, "max_weight": hi, "risk_free_rate": rf,
                                  "weights": weights_of(ef.max_sharpe(risk_free_rate=rf), cols)})
        # Maximum diversification is max_sharpe with the volatilities for
        # the expected returns and no risk-free rate.
        S = risk_models.sample_cov(df, returns_data=True, frequency=252)
        ef = EfficientFrontier(pd.Series(np.sqrt(np.diag(S)), index=cols), S, weight_bounds=(0.0, 1.0))
        cases.append({"data": name, "method": "max_diversification", "covariance": "sample",
                      "min_weight": 0.0, "max_weight": 1.0, "risk_free_rate": 0.0,
                      "weights": weights_of(ef.max_sharpe(risk_free_rate=0.0), cols)})
        hrp = HRPOpt(returns=df).optimize(linkage_method="single")
        cases.append({"data": name, "method": "hrp", "covariance": "sample",
                      "min_weight": 0.0, "max_weight": 1.0, "risk_free_rate": 0.0,
                      "weights": weights_of(hrp, cols)})
    covariances = {
        name: {
            "sample": (df.cov() * 252).values.tolist(),
            "ledoit_wolf": risk_models.CovarianceShrinkage(df, returns_data=True, frequency=252)
            .ledoit_wolf().values.tolist(),
        }
        for name, df in sets.items()
    }
    data = {name: {"names": list(df.columns), "returns": [df[c].tolist() for c in df.columns]}
            for name, df in sets.items()}
    write("portfolio.json", {"data": data, "covariances": covariances, "cases": cases})
    print(f"portfolio.json: {len(cases)} cases")


# ---------------------------------------------------------------- risk


def drawdown_episodes(r):
    """Underwater runs of the compounded wealth, deepest first (stable)."""
    w = np.concatenate([[1.0], np.cumprod(1.0 + r)])
    under = w < np.maximum.accumulate(w)
    episodes, t = [], 1
    while t < len(w):
        if not under[t]:
            t += 1
            continue
        start = t
        while t < len(w) and under[t]:
            t += 1
        trough = start + int(np.argmin(w[start:t]))
        episodes.append({"peak": start - 1, "trough": trough,
                         "recovery": t if t < len(w) else None,
                         "depth": float(1.0 - w[trough] / w[start - 1])})
    order = np.argsort([-e["depth"] for e in episodes], kind="stable")
    return [episodes[i] for i in order]


def risk_case(X, w, c, h):
    r = X @ w
    alpha = 1.0 - c
    s = r if h == 1 else np.array([r[t:t + h].sum() for t in range(len(r) - h + 1)])
    q = np.quantile(s, alpha)
    mu, sd = r.mean(), r.std(ddof=1)
    z = stats.norm.ppf(alpha)
    S, K = stats.skew(r, bias=True), stats.kurtosis(r, fisher=True, bias=True)
    Sh, Kh = S / math.sqrt(h), K / h
    zcf = z + (z * z - 1) * Sh / 6 + (z ** 3 - 3 * z) * Kh / 24 - (2 * z ** 3 - 5 * z) * Sh * Sh / 36
    var_p = -(h * mu + z * sd * math.sqrt(h))
    if X.shape[1] > 1:
        cov = np.cov(X.T, ddof=1)
        sw = cov @ w
        sp = math.sqrt(w @ sw)
        comp = (w * (-h * X.mean(axis=0) - z * math.sqrt(h) * sw / sp) / var_p).tolist()
    else:
        comp = [1.0]
    hhi = float((w ** 2).sum() / np.abs(w).sum() ** 2)
    dd = drawdown_episodes(r)
    return {
        "var_historical": float(-q),
        "es_historical": float(-s[s <= q].mean()),
        "var_parametric": float(var_p),
        "es_parametric": float(-h * mu + sd * math.sqrt(h) * stats.norm.pdf(z) / alpha),
        "var_cornish_fisher": float(-(h * mu + zcf * sd * math.sqrt(h))),
        "volatility": float(sd * math.sqrt(252)),
        "max_drawdown": dd[0]["depth"] if dd else 0.0,
        "drawdowns": dd[:5],
        "component_var": comp,
        "hhi": hhi,
        "effective_n": 1.0 / hhi,
        "skewness": float(S),
        "excess_kurtosis": float(K),
    }


def risk():
    books = {
        "single": (seeded_returns(31, 1, 1000), [1.0]),
        "book": (seeded_returns(37, 6, 1500), [0.3, 0.25, 0.2, 0.1, 0.1, 0.05]),
        "long_short": (seeded_returns(41, 3, 800), [1.2, -0.5, 0.3]),
    }
    cases = []
    for name, (df, w) in books.items():
        for c in [0.95, 0.99, 0.975]:
            for h in [1, 10]:
                cases.append({"data": name, "weights": w, "confidence": c, "horizon_days": h,
                              "expected": risk_case(df.values, np.array(w), c, h)})
    data = {name: {"names": list(df.columns), "returns": [df[c].tolist() for c in df.columns]}
            for name, (df, _) in books.items()}
    write("risk.json", {"data": data, "cases": cases})
    print(f"risk.json: {len(cases)} cases")


if __name__ == "__main__":
    which = sys.argv[1:] or ["options", "portfolio", "risk"]
    for part in which:
        globals()[part]()
