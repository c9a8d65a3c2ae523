#!/usr/bin/env python3
"""Goldens for vibedesk's time-series tools (docs §16): stat_test and volatility_model.

Writes ts.json next to this file; the Rust tests (tests/engine/ts_goldens.rs)
read it and need no Python.

Run it in a fresh virtual environment with the versions pinned in
requirements.txt (the JSON records the versions that made it):

    python3 -m venv /tmp/svenv
    /tmp/svenv/bin/pip install -r tests/golden/stats/requirements.txt
    /tmp/svenv/bin/python tests/golden/stats/make_goldens_ts.py

With `--only KEY[,KEY...]` (e.g. `--only johansen,johansen_inputs`) only those
top-level sections are replaced and the rest of the committed ts.json is kept
byte for byte: arch's SLSQP fit is not reproducible to the last digits across
machines (its GARCH parameters move in the 8th digit), so a section added later
must not rewrite the others.

Inputs:
- seeded series (numpy's PCG64 with the seeds below, rounded to 8 decimals so
  the JSON carries them exactly): a random walk, an AR(1), a trend-stationary
  series, a short series, a cointegrated pair, two independent random walks,
  i.i.d. normal and Student-t draws, and a simulated GARCH(1,1);
- the offline market's closes in ts_market.csv beside this file (KO and PEP
  2010-2015, SPY's last 2,521 closes to 2017-11-10), exported from the
  binary's embedded data with `vibedesk data SYMBOL --from .. --to .. --offline`
  (the Rust tests check that the embedded data still gives these closes).

References:
- adf: statsmodels.tsa.stattools.adfuller (MacKinnon 1994 p-values, 2010
  critical values), autolag "AIC" / "BIC" / None;
- kpss: statsmodels.tsa.stattools.kpss(nlags="auto") and an integer nlags;
- engle_granger: statsmodels.tsa.stattools.coint, with the first-stage OLS
  (hedge ratio, intercept) from statsmodels OLS and the residuals' OU
  half-life;
- half_life: -ln 2 / b from statsmodels OLS of dy_t on (1, y_{t-1});
- hurst: numpy, the slope of log std(y_{t+tau} - y_t) (ddof 0) on log tau,
  tau = 2..100, by numpy.polyfit;
- ljung_box: statsmodels.stats.diagnostic.acorr_ljungbox(lags=10);
- jarque_bera: statsmodels.stats.stattools.jarque_bera;
- garch: arch.arch_model(100 * returns, mean="Constant", vol="GARCH", p=1,
  q=1, dist="normal").fit(disp="off"), its log-likelihood, backcast,
  conditional volatility and 10-day variance forecast;
- ewma: arch.univariate.ZeroMean(100 * returns, volatility=EWMAVariance(0.94));
- garch_inference: arch's fit as for garch and, at its parameters, std_err,
  tvalues and pvalues (robust Bollerslev-Wooldridge covariance, arch's default
  cov_type="robust") and the classic standard errors from
  compute_param_cov(params, robust=False);
- johansen: statsmodels.tsa.vector_ar.vecm.coint_johansen(levels, det_order,
  k_ar_diff) for det_order -1, 0, 1 and k_ar_diff 1, 2 on the log closes of
  KO/PEP, KO/PEP/PG and KO/PEP/PG/SPY (on the dates all of them have; PG
  2010-2015 is in ts_market.csv too) and on a seeded system of three series
  with one cointegrating relation (written under "johansen_inputs"), with
  the ranks from select_coint_rank (trace and maxeig, 5 %).
- garch_ext: arch_model(100 * returns, mean="Constant", vol="GARCH", p=1,
  o=0 or 1, q=1, dist="t" or "normal") for GARCH with Student-t errors and
  GJR-GARCH(1,1,1) with normal and t errors, on SPY 2005-02-25..2015-12-31
  (ts_market_spy.csv, exported as ts_market.csv), SPY's last 2,520 returns
  (whose t-GARCH optimum lies on alpha + beta = 1), KO 2010-2015 and a seeded
  GJR-GARCH path with standardised t(6) shocks (written under
  "garch_ext_inputs"): params, loglik, robust and classic standard errors,
  t-values, p-values, the conditional volatility's ends and the 10-day
  analytic variance forecast.
"""

import csv
import json
import math
import os
import sys
import warnings
from importlib.metadata import version

import numpy as np
import statsmodels.api as sm
from arch import arch_model
from arch.univariate import EWMAVariance, ZeroMean
from statsmodels.stats.diagnostic import acorr_ljungbox
from statsmodels.stats.stattools import jarque_bera
from statsmodels.tsa.stattools import adfuller, coint, kpss
from statsmodels.tsa.vector_ar.vecm import coint_johansen, select_coint_rank

warnings.simplefilter("ignore")

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGES = ["numpy", "scipy", "pandas", "statsmodels", "arch", "patsy"]


def versions():
    return {p: version(p) for p in PACKAGES} | {"python": sys.version.split()[0]}


def r8(x):
    return [round(float(v), 8) for v in x]


def market():
    closes = {}
    with open(os.path.join(HERE, "ts_market.csv")) as f:
        for row in csv.DictReader(f):
            closes.setdefault(row["symbol"], []).append((row["date"], float(row["close"])))
    return closes


def simple_returns(c):
    c = np.asarray(c, dtype=float)
    return c[1:] / c[:-1] - 1.0


def seeded():
    out = {}
    rng = np.random.default_rng(20240601)
    out["random_walk"] = r8(np.cumsum(rng.standard_normal(500)) + 50.0)
    rng = np.random.default_rng(20240602)
    e = rng.standard_normal(1000)
    y = np.zeros(1000)
    for t in range(1, 1000):
        y[t] = 0.9 * y[t - 1] + e[t]
    out["ar1"] = r8(y + 10.0)
    rng = np.random.default_rng(20240603)
    e = rng.standard_normal(300)
    u = np.zeros(300)
    for t in range(1, 300):
        u[t] = 0.5 * u[t - 1] + e[t]
    out["trend_stationary"] = r8(0.05 * np.arange(300) + u)
    rng = np.random.default_rng(20240604)
    out["short"] = r8(np.cumsum(rng.standard_normal(60)) * 0.5 + 3.0)
    rng = np.random.default_rng(20240605)
    x = np.cumsum(rng.standard_normal(1000)) * 0.02 + 4.0
    s = np.zeros(1000)
    e = rng.standard_normal(1000) * 0.01
    for t in range(1, 1000):
        s[t] = 0.95 * s[t - 1] + e[t]
    out["coint_x"] = r8(x)
    out["coint_y"] = r8(0.3 + 0.8 * x + s)
    rng = np.random.default_rng(20240606)
    out["walk_a"] = r8(np.cumsum(rng.standard_normal(800)) * 0.01 + 3.0)
    out["walk_b"] = r8(np.cumsum(rng.standard_normal(800)) * 0.01 + 3.5)
    rng = np.random.default_rng(20240607)
    out["normal"] = r8(rng.standard_normal(1500) * 0.01)
    rng = np.random.default_rng(20240608)
    out["student_t"] = r8(rng.standard_t(4, 1500) * 0.01)
    rng = np.random.default_rng(20240609)
    n, mu, omega, alpha, beta = 2000, 0.05, 0.05, 0.08, 0.9
    z = rng.standard_normal(n + 500)
    h = omega / (1 - alpha - beta)
    r = np.zeros(n + 500)
    for t in range(n + 500):
        eps = math.sqrt(h) * z[t]
        r[t] = mu + eps
        h = omega + alpha * eps * eps + beta * h
    out["garch_returns"] = r8(r[500:] / 100.0)
    return out


def adf_case(name, x, regression, autolag, maxlag=None):
    r = adfuller(np.asarray(x), maxlag=maxlag, regression=regression,
                 autolag=autolag, result_object=False)
    stat, p, lag, nobs, crit = r[0], r[1], r[2], r[3], r[4]
    return {"series": name, "regression": regression,
            "autolag": (autolag or "none").lower(), "maxlag": maxlag,
            "statistic": float(stat), "p_value": float(p), "used_lag": int(lag),
            "n_obs": int(nobs), "icbest": None if autolag is None else float(r[5]),
            "critical_values": {k: exact(v) for k, v in crit.items()}}


def exact(v):
    """A critical value as its shortest round-trip text: the Rust test parses
    it with a correctly rounded parser and compares bit for bit."""
    return repr(float(v))


def ols(y, x_cols, const=True):
    X = np.column_stack(x_cols)
    if const:
        X = sm.add_constant(X, prepend=True, has_constant="add")
    return sm.OLS(y, X).fit()


def half_life(y):
    y = np.asarray(y, dtype=float)
    res = ols(np.diff(y), [y[:-1]])
    a, b = res.params
    return {"a": float(a), "b": float(b),
            "half_life": None if b >= 0 else float(-math.log(2) / b),
            "n_obs": int(len(y) - 1)}


def hurst(y):
    y = np.asarray(y, dtype=float)
    lags = np.arange(2, 101)
    tau = [np.std(y[lag:] - y[:-lag]) for lag in lags]
    slope = np.polyfit(np.log(lags), np.log(tau), 1)[0]
    return float(slope)


def garch_case(name, returns):
    y = 100.0 * np.asarray(returns, dtype=float)
    am = arch_model(y, mean="Constant", vol="GARCH", p=1, q=1, dist="normal")
    res = am.fit(disp="off")
    params = res.params
    fc = res.forecast(horizon=10, reindex=False).variance.values[-1]
    resid0 = y - y.mean()
    tau = min(75, len(y))
    w = 0.94 ** np.arange(tau)
    w = w / sum(w)
    backcast = float(np.sum((resid0[:tau] ** 2.0) * w))
    cv = np.asarray(res.conditional_volatility)
    return {"series": name, "n_obs": int(len(y)),
            "mu": float(params["mu"]), "omega": float(params["omega"]),
            "alpha": float(params["alpha[1]"]), "beta": float(params["beta[1]"]),
            "loglik": float(res.loglikelihood), "backcast": backcast,
            "conditional_vol_head": [float(v) for v in cv[:5]],
            "conditional_vol_tail": [float(v) for v in cv[-5:]],
            "forecast_variance": [float(v) for v in fc]}


def garch_inference_case(name, returns):
    y = 100.0 * np.asarray(returns, dtype=float)
    am = arch_model(y, mean="Constant", vol="GARCH", p=1, q=1, dist="normal")
    res = am.fit(disp="off")
    names = ["mu", "omega", "alpha[1]", "beta[1]"]
    classic = np.sqrt(np.diag(am.compute_param_cov(res.params.values, robust=False)))
    return {"series": name,
            "params": [float(res.params[k]) for k in names],
            "std_err": [float(res.std_err[k]) for k in names],
            "tvalues": [float(res.tvalues[k]) for k in names],
            "pvalues": [float(res.pvalues[k]) for k in names],
            "classic_std_err": [float(v) for v in classic]}


def gjr_t_returns():
    rng = np.random.default_rng(20240610)
    n, mu, omega, alpha, gamma, beta, nu = 2000, 0.04, 0.03, 0.03, 0.1, 0.88, 6.0
    z = rng.standard_t(nu, n + 500) / math.sqrt(nu / (nu - 2.0))
    h = omega / (1 - alpha - gamma / 2 - beta)
    r = np.zeros(n + 500)
    for t in range(n + 500):
        eps = math.sqrt(h) * z[t]
        r[t] = mu + eps
        h = omega + (alpha + gamma * (eps < 0)) * eps * eps + beta * h
    return r8(r[500:] / 100.0)


def garch_ext_case(name, returns, model, dist):
    y = 100.0 * np.asarray(returns, dtype=float)
    o = 1 if model == "gjr_garch" else 0
    am = arch_model(y, mean="Constant", vol="GARCH", p=1, o=o, q=1, dist=dist)
    res = am.fit(disp="off")
    names = list(res.params.index)
    classic = np.sqrt(np.diag(am.compute_param_cov(res.params.values, robust=False)))
    fc = res.forecast(horizon=10, reindex=False).variance.values[-1]
    cv = np.asarray(res.conditional_volatility)
    return {"series": name, "model": model, "dist": dist, "n_obs": int(len(y)),
            "names": names, "convergence_flag": int(res.convergence_flag),
            "params": [float(res.params[k]) for k in names],
            "loglik": float(res.loglikelihood),
            "std_err": [float(res.std_err[k]) for k in names],
            "tvalues": [float(res.tvalues[k]) for k in names],
            "pvalues": [float(res.pvalues[k]) for k in names],
            "classic_std_err": [float(v) for v in classic],
            "conditional_vol_head": [float(v) for v in cv[:5]],
            "conditional_vol_tail": [float(v) for v in cv[-5:]],
            "forecast_variance": [float(v) for v in fc]}


def ewma_case(name, returns, lam=0.94):
    y = 100.0 * np.asarray(returns, dtype=float)
    am = ZeroMean(y, volatility=EWMAVariance(lam))
    res = am.fit(disp="off")
    cv = np.asarray(res.conditional_volatility)
    fc = res.forecast(horizon=10, reindex=False).variance.values[-1]
    return {"series": name, "lambda": lam, "n_obs": int(len(y)),
            "conditional_vol_head": [float(v) for v in cv[:5]],
            "conditional_vol_tail": [float(v) for v in cv[-5:]],
            "forecast_variance": [float(v) for v in fc],
            "loglik": float(res.loglikelihood)}


def johansen_system():
    """Three series, one relation: x0 and x1 random walks, x2 = 0.5 + 2 x0 + AR(1)."""
    rng = np.random.default_rng(20240610)
    n = 1000
    a = np.cumsum(rng.standard_normal(n)) * 0.02
    b = np.cumsum(rng.standard_normal(n)) * 0.02 + 1.0
    e = rng.standard_normal(n) * 0.01
    u = np.zeros(n)
    for t in range(1, n):
        u[t] = 0.6 * u[t - 1] + e[t]
    return [r8(a), r8(b), r8(0.5 + 2.0 * a + u)]


def aligned_logs(m, symbols):
    """Log closes of `symbols` on the dates all of them have."""
    dates = set.intersection(*[{d for d, _ in m[sym]} for sym in symbols])
    return [[math.log(c) for d, c in m[sym] if d in dates] for sym in symbols]


def johansen_case(name, cols, det_order, k):
    x = np.column_stack([np.asarray(c, dtype=float) for c in cols])
    r = coint_johansen(x, det_order, k)
    ranks = {m: int(select_coint_rank(x, det_order, k, method=m, signif=0.05).rank)
             for m in ["trace", "maxeig"]}
    return {"system": name, "det_order": det_order, "k_ar_diff": k,
            "n_obs": int(r.rkt.shape[0]),
            "eigenvalues": [float(v) for v in r.eig],
            "trace": [float(v) for v in r.lr1],
            "max_eigen": [float(v) for v in r.lr2],
            "trace_critical_values": [[exact(v) for v in row] for row in r.cvt],
            "max_eigen_critical_values": [[exact(v) for v in row] for row in r.cvm],
            "eigenvectors": [[float(v) for v in r.evec[:, i]] for i in range(x.shape[1])],
            "rank_trace": ranks["trace"], "rank_max_eigen": ranks["maxeig"]}


def johansen_cases(m, system):
    systems = {
        "ko_pep": aligned_logs(m, ["KO", "PEP"]),
        "ko_pep_pg": aligned_logs(m, ["KO", "PEP", "PG"]),
        "ko_pep_pg_spy": aligned_logs(m, ["KO", "PEP", "PG", "SPY"]),
        "seeded_system": system,
    }
    return [johansen_case(name, cols, det, k) for name, cols in systems.items()
            for det in [-1, 0, 1] for k in [1, 2]]


def main():
    s = seeded()
    m = market()
    ko = [c for _, c in m["KO"]]
    pep = [c for _, c in m["PEP"]]
    assert [d for d, _ in m["KO"]] == [d for d, _ in m["PEP"]]
    spy = [c for _, c in m["SPY"]]
    levels = {
        "random_walk": s["random_walk"], "ar1": s["ar1"],
        "trend_stationary": s["trend_stationary"], "short": s["short"],
        "ko_log": list(np.log(ko)), "spy_log": list(np.log(spy)),
    }
    adf = []
    for name, x in levels.items():
        for reg in ["c", "ct", "n"]:
            for auto in ["AIC", "BIC", None]:
                adf.append(adf_case(name, x, reg, auto))
    adf.append(adf_case("ar1", levels["ar1"], "c", "AIC", maxlag=5))
    adf.append(adf_case("spy_log", levels["spy_log"], "ct", None, maxlag=3))
    adf.append(adf_case("random_walk", levels["random_walk"], "n", "BIC", maxlag=12))

    kp = []
    for name, x in levels.items():
        for reg in ["c", "ct"]:
            for nl in ["auto", 8]:
                stat, p, lags, crit = kpss(np.asarray(x), regression=reg, nlags=nl,
                                           result_object=False)
                kp.append({"series": name, "regression": reg, "nlags": nl,
                           "statistic": float(stat), "p_value": float(p), "lags": int(lags),
                           "critical_values": {k: float(v) for k, v in crit.items()}})

    pairs = {
        "seeded_coint": (s["coint_y"], s["coint_x"]),
        "seeded_walks": (s["walk_a"], s["walk_b"]),
        "ko_pep": (list(np.log(ko)), list(np.log(pep))),
        "pep_ko": (list(np.log(pep)), list(np.log(ko))),
    }
    eg = []
    for name, (y0, y1) in pairs.items():
        for trend in ["c", "ct", "n"]:
            for auto in ["aic", "bic"]:
                stat, p, crit = coint(np.asarray(y0), np.asarray(y1), trend=trend, autolag=auto)
                cols = [np.asarray(y1)]
                if trend == "ct":
                    cols.append(np.arange(1, len(y0) + 1, dtype=float))
                first = ols(np.asarray(y0), cols, const=(trend != "n"))
                params = list(first.params)
                if trend == "n":
                    intercept, hedge = 0.0, params[0]
                else:
                    intercept, hedge = params[0], params[1]
                adf_resid = adfuller(first.resid, regression="n", autolag=auto.upper(),
                                     result_object=False)
                eg.append({"pair": name, "trend": trend, "autolag": auto,
                           "statistic": float(stat), "p_value": float(p),
                           "critical_values": [None if math.isnan(v) else exact(v) for v in crit],
                           "hedge_ratio": float(hedge), "intercept": float(intercept),
                           "used_lag": int(adf_resid[2]), "n_obs": int(adf_resid[3]),
                           "residual_half_life": half_life(first.resid)})

    hl = {name: half_life(x) for name, x in
          [("ar1", s["ar1"]), ("random_walk", s["random_walk"]),
           ("ko_log", levels["ko_log"]), ("coint_y", s["coint_y"])]}
    hu = {name: hurst(x) for name, x in
          [("random_walk", s["random_walk"]), ("ar1", s["ar1"]), ("spy_log", levels["spy_log"]),
           ("normal", s["normal"])]}

    returns = {"spy_returns": list(simple_returns(spy)), "ko_returns": list(simple_returns(ko)),
               "normal": s["normal"], "student_t": s["student_t"],
               "garch_returns": s["garch_returns"]}
    lb = []
    for name in ["spy_returns", "normal", "student_t"]:
        df = acorr_ljungbox(np.asarray(returns[name]), lags=10)
        lb.append({"series": name, "lags": 10,
                   "statistic": [float(v) for v in df["lb_stat"]],
                   "p_value": [float(v) for v in df["lb_pvalue"]]})
    jb = []
    for name in ["spy_returns", "normal", "student_t", "ko_returns"]:
        stat, p, skew, kurt = jarque_bera(np.asarray(returns[name]))
        jb.append({"series": name, "statistic": float(stat), "p_value": float(p),
                   "skewness": float(skew), "kurtosis": float(kurt)})

    garch = [garch_case(n, returns[n]) for n in ["spy_returns", "ko_returns", "garch_returns"]]
    ewma = [ewma_case(n, returns[n]) for n in ["spy_returns", "ko_returns"]]

    payload = {
        "generated_by": "tests/golden/stats/make_goldens_ts.py",
        "versions": versions(),
        "inputs": {
            "seeded": s,
            "market": "ts_market.csv (KO, PEP 2010-2015; SPY's last 2,521 closes); levels are natural logs of the closes, returns simple daily returns",
        },
        "adf": adf, "kpss": kp, "engle_granger": eg, "half_life": hl, "hurst": hu,
        "ljung_box": lb, "jarque_bera": jb, "garch": garch, "ewma": ewma,
    }
    system = johansen_system()
    payload["johansen_inputs"] = {"seeded_system": system}
    payload["johansen"] = johansen_cases(m, system)
    payload["garch_inference"] = [garch_inference_case(n, returns[n])
                                  for n in ["spy_returns", "ko_returns", "garch_returns"]]
    with open(os.path.join(HERE, "ts_market_spy.csv")) as f:
        spy0515 = [float(r["close"]) for r in csv.DictReader(f)]
    ext_inputs = {"gjr_t_returns": gjr_t_returns()}
    payload["garch_ext_inputs"] = ext_inputs
    ext_series = {"spy_2005_2015": list(simple_returns(spy0515)),
                  "spy_returns": returns["spy_returns"],
                  "ko_returns": returns["ko_returns"],
                  "gjr_t_returns": ext_inputs["gjr_t_returns"]}
    payload["garch_ext"] = [garch_ext_case(n, ext_series[n], model, dist)
                            for n in ext_series
                            for model, dist in [("garch", "t"), ("gjr_garch", "normal"),
                                                ("gjr_garch", "t")]]
    path = os.path.join(HERE, "ts.json")
    if "--only" in sys.argv:
        keys = sys.argv[sys.argv.index("--only") + 1].split(",")
        with open(path) as f:
            kept = json.load(f)
        for k in keys:
            kept[k] = payload[k]
        payload = kept
    with open(path, "w") as f:
        json.dump(payload, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
