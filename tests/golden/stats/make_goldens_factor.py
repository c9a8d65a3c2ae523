#!/usr/bin/env python3
"""Goldens for vibedesk's factor_ic, regression and overfitting tools (docs §17).

Writes factor.json next to this file; the Rust tests (tests/engine/factor_goldens.rs)
read it and need no Python.

Run it in a fresh virtual environment with the versions pinned in requirements.txt
(numpy 2.4.6, scipy 1.17.1, pandas 3.1.1, statsmodels 0.15.0; the JSON records the
versions that made it, and the script refuses others):

    python3 -m venv /tmp/svenv
    /tmp/svenv/bin/pip install -r tests/golden/stats/requirements.txt
    /tmp/svenv/bin/python tests/golden/stats/make_goldens_factor.py

Inputs, all reproducible from the repository:
- the offline market: closes decoded from the binary's own pack
  (assets/data/us_daily_2000_2017.bin, layout in src/research/data/embedded/pack.rs;
  each ticker's rows are checked against the index's SHA-256), and the monthly
  Fama-French factors (assets/data/ff_monthly_1949_2017.csv.gz);
- seeded inputs (numpy's PCG64 with the seeds below), written into the JSON.

References:
- Spearman IC: scipy.stats.spearmanr per date; t statistic scipy.stats.ttest_1samp;
  the Newey-West t statistic statsmodels OLS(ic, 1).fit(cov_type="HAC",
  cov_kwds={"maxlags": h - 1}).
- Regression: statsmodels OLS(y, add_constant(X)).fit(cov_type="HAC",
  cov_kwds={"maxlags": L}); rolling slopes statsmodels RollingOLS.
- PSR / DSR / minimum track record: the papers' formulas (Bailey & Lopez de Prado
  2012, 2014) evaluated with scipy.stats.norm and scipy.stats.skew / kurtosis.
- PBO: a direct CSCV (Bailey, Borwein, Lopez de Prado & Zhu 2017) over
  itertools.combinations with numpy Sharpe ratios.
"""

import datetime as dt
import gzip
import hashlib
import itertools
import json
import math
import os
import sys
import zlib
from importlib.metadata import version

import numpy as np
import pandas as pd
import scipy
import statsmodels.api as sm
from scipy import stats
from statsmodels.regression.rolling import RollingOLS

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
PINS = {"numpy": "2.4.6", "scipy": "1.17.1", "pandas": "3.1.1", "statsmodels": "0.15.0"}


def versions():
    return {p: version(p) for p in PINS} | {"python": sys.version.split()[0]}


def check_pins():
    got = versions()
    bad = {p: got[p] for p in PINS if got[p] != PINS[p]}
    if bad:
        sys.exit(f"pinned versions {PINS} are required, found {bad}")


# ---------------------------------------------------------------- the offline market

def read_index():
    out = {}
    with open(os.path.join(ROOT, "assets/data/us_daily_index.csv")) as f:
        for line in f:
            if line.startswith("#") or line.startswith("ticker,") or not line.strip():
                continue
            t, kind, first, last, rows, off, nbytes, sha = line.strip().split(",")
            out[t] = dict(kind=kind, rows=int(rows), off=int(off), bytes=int(nbytes), sha=sha)
    return out


INDEX = read_index()
with open(os.path.join(ROOT, "assets/data/us_daily_2000_2017.bin"), "rb") as f:
    PACK = f.read()


def varints(buf):
    out, value, shift = [], 0, 0
    for b in buf:
        value |= (b & 0x7F) << shift
        if b & 0x80:
            shift += 7
        else:
            out.append(value)
            value, shift = 0, 0
    return out


def unzig(z):
    return (z >> 1) ^ -(z & 1)


def load(ticker):
    """(dates, closes) of a ticker as the binary decodes its block."""
    x = INDEX[ticker]
    raw = zlib.decompress(PACK[x["off"]:x["off"] + x["bytes"]], -15)
    v = varints(raw)
    n = v[0]
    cols = [[unzig(z) for z in v[1 + k * n:1 + (k + 1) * n]] for k in range(6)]
    days, cdelta, ogap, hover, lunder, vdelta = cols
    dates, close, opens, highs, lows, vols = [], [], [], [], [], []
    day = c = vol = 0
    for i in range(n):
        day += days[i]
        prev = cdelta[0] if i == 0 else c
        c += cdelta[i]
        o = prev + ogap[i]
        vol += vdelta[i]
        dates.append(dt.date.fromordinal(day))
        close.append(c)
        opens.append(o)
        highs.append(max(o, c) + hover[i])
        lows.append(min(o, c) - lunder[i])
        vols.append(vol)
    h = hashlib.sha256()
    for i in range(n):
        h.update(f"{dates[i]},{opens[i]},{highs[i]},{lows[i]},{close[i]},{vols[i]}\n".encode())
    assert h.hexdigest() == x["sha"], ticker
    return dates, [u / 10000.0 for u in close]


def stocks():
    return [t for t, x in INDEX.items() if x["kind"] == "stock"]


def ff_monthly():
    with gzip.open(os.path.join(ROOT, "assets/data/ff_monthly_1949_2017.csv.gz"), "rt") as f:
        df = pd.read_csv(f)
    df["dates"] = pd.to_datetime(df["dates"])
    return df.set_index("dates")[["MktRF", "SMB", "HML", "Mom", "RF"]]


def write(payload):
    payload = {"generated_by": "tests/golden/stats/make_goldens_factor.py", "versions": versions()} | payload
    with open(os.path.join(HERE, "factor.json"), "w") as f:
        json.dump(payload, f, indent=None, separators=(",", ":"), allow_nan=False)
        f.write("\n")


def nan_to_none(xs):
    return [None if not np.isfinite(v) else float(v) for v in xs]


# ---------------------------------------------------------------- factor IC

def buckets(f, q):
    """Bucket of each name by factor value (stable sort, i*q//m), -1 for none."""
    n = len(f)
    idx = [j for j in range(n) if np.isfinite(f[j])]
    out = [-1] * n
    m = len(idx)
    if m < q:
        return out
    for i, j in enumerate(sorted(idx, key=lambda j: f[j])):
        out[j] = i * q // m
    return out


def ic_study(factor, close, horizons, q, min_names):
    """factor, close: T x N arrays (NaN where missing)."""
    T, N = factor.shape
    B = [buckets(factor[t], q) for t in range(T)]
    need = max(min_names, q, 3)
    out = []
    for h in horizons:
        rows, ics, names = [], [], []
        qsum, qcnt = np.zeros(q), np.zeros(q)
        spreads = []
        skipped = 0
        for t in range(T - h):
            if not np.isfinite(factor[t]).any():
                continue  # no factor value: not a date of the study
            with np.errstate(invalid="ignore", divide="ignore"):
                fwd = close[t + h] / close[t] - 1.0
            fwd[~(close[t] > 0)] = np.nan
            ok = np.isfinite(fwd) & np.isfinite(factor[t])
            ic = np.nan
            if ok.sum() >= need:
                a, b = factor[t][ok], fwd[ok]
                if np.ptp(a) > 0 and np.ptp(b) > 0:
                    ic = stats.spearmanr(a, b).statistic
            if not np.isfinite(ic):
                skipped += 1
                continue
            rows.append(t)
            ics.append(float(ic))
            names.append(int(ok.sum()))
            bm = {}
            for j in range(N):
                if B[t][j] >= 0 and np.isfinite(fwd[j]):
                    bm.setdefault(B[t][j], []).append(fwd[j])
            for k, v in bm.items():
                qsum[k] += np.mean(v)
                qcnt[k] += 1
            if 0 in bm and q - 1 in bm:
                spreads.append(np.mean(bm[q - 1]) - np.mean(bm[0]))
        ic = np.array(ics)
        nw = sm.OLS(ic, np.ones(len(ic))).fit(cov_type="HAC", cov_kwds={"maxlags": h - 1})
        turn = []
        for t in range(h, T):
            now = [j for j in range(N) if B[t][j] == q - 1]
            before = {j for j in range(N) if B[t - h][j] == q - 1}
            if now and before:
                turn.append(sum(1 for j in now if j not in before) / len(now))
        out.append({
            "horizon": h,
            "rows": rows,
            "ic": ics,
            "names": names,
            "ic_mean": float(np.mean(ic)),
            "ic_std": float(np.std(ic, ddof=1)),
            "ic_ir": float(np.mean(ic) / np.std(ic, ddof=1)),
            "t_stat": float(stats.ttest_1samp(ic, 0.0).statistic),
            "t_stat_nw": float(nw.tvalues[0]),
            "hit_rate": float(np.mean(ic > 0)),
            "skipped": skipped,
            "quantile_returns": nan_to_none(qsum / np.where(qcnt > 0, qcnt, np.nan)),
            "spread": float(np.mean(spreads)),
            "top_turnover": float(np.mean(turn)),
        })
    return out


def ic_seeded():
    """A small panel with ties, gaps and a weak planted signal."""
    rng = np.random.default_rng(20240528)
    T, N = 80, 20
    r = 0.015 * rng.standard_normal((T, N))
    close = 50.0 * np.cumprod(1.0 + r, axis=0)
    signal = np.roll(r, -1, axis=0) + 0.02 * rng.standard_normal((T, N))
    factor = np.round(signal * 200.0) / 200.0  # ties
    factor[rng.random((T, N)) < 0.05] = np.nan
    close[rng.random((T, N)) < 0.02] = np.nan
    # A date with every factor equal (IC undefined) and one too thin to score.
    factor[10, :] = 0.5
    factor[11, 4:] = np.nan
    horizons, q, min_names = [1, 5, 21], 5, 5
    return {
        "inputs": {"factor": [nan_to_none(x) for x in factor], "close": [nan_to_none(x) for x in close],
                   "horizons": horizons, "quantiles": q, "min_names": min_names},
        "expected": ic_study(factor, close, horizons, q, min_names),
    }


def momentum_panel(tickers, start, end, window=252, skip=21):
    per = {}
    for t in tickers:
        dates, close = load(t)
        c = np.array(close)
        mom = np.full(len(c), np.nan)
        mom[window:] = c[window - skip:len(c) - skip] / c[:len(c) - window] - 1.0
        keep = [i for i, d in enumerate(dates) if start <= d <= end]
        per[t] = ({dates[i]: (c[i], mom[i]) for i in keep})
    grid = sorted(set(d for v in per.values() for d in v))
    at = {d: i for i, d in enumerate(grid)}
    factor = np.full((len(grid), len(tickers)), np.nan)
    close = np.full((len(grid), len(tickers)), np.nan)
    for j, t in enumerate(tickers):
        for d, (c, m) in per[t].items():
            close[at[d], j] = c
            factor[at[d], j] = m
    return grid, factor, close


def ic_market():
    """12-1 momentum on the offline universe's 106 stocks, 2010-2012."""
    tickers = stocks()
    start, end = dt.date(2010, 1, 1), dt.date(2012, 12, 31)
    grid, factor, close = momentum_panel(tickers, start, end)
    horizons = [1, 5, 21]
    return {
        "universe": tickers, "start": str(start), "end": str(end),
        "factor": {"indicator": "momentum", "params": {"window": 252, "skip": 21}},
        "horizons": horizons, "quantiles": 5, "dates": [str(d) for d in grid],
        "expected": ic_study(factor, close, horizons, 5, 5),
    }


# ---------------------------------------------------------------- regression

def ols(y, X, names, lags):
    res = sm.OLS(y, sm.add_constant(X, has_constant="add")).fit(cov_type="HAC", cov_kwds={"maxlags": lags})
    return {
        "names": ["const"] + names,
        "estimate": [float(v) for v in res.params],
        "std_error": [float(v) for v in res.bse],
        "t": [float(v) for v in res.tvalues],
        "p_value": [float(v) for v in res.pvalues],
        "r2": float(res.rsquared), "adj_r2": float(res.rsquared_adj),
        "n": int(res.nobs), "residual_std": float(np.sqrt(res.scale)),
    }


def regression_seeded():
    rng = np.random.default_rng(7)
    n = 250
    X = rng.standard_normal((n, 3)) * [0.01, 0.02, 0.005]
    X[:, 2] += 0.3 * X[:, 0]  # correlated regressors
    e = np.zeros(n)
    shocks = 0.004 * rng.standard_normal(n)
    for t in range(n):
        e[t] = shocks[t] + (0.6 * e[t - 1] if t else 0.0)  # autocorrelated errors
    y = 0.0005 + X @ np.array([1.2, -0.4, 0.8]) + e
    cases = [ols(y, X, ["a", "b", "c"], L) for L in (0, 4, 12)]
    roll = RollingOLS(y, sm.add_constant(X), window=60).fit()
    params = np.asarray(roll.params)
    return {
        "y": y.tolist(), "x": {"a": X[:, 0].tolist(), "b": X[:, 1].tolist(), "c": X[:, 2].tolist()},
        "lags": [0, 4, 12], "expected": cases,
        "rolling": {"window": 60, "last": [params[i, 1:].tolist() for i in range(n - 5, n)]},
    }


def month_end_returns(ticker, first_month, last_month):
    dates, close = load(ticker)
    s = pd.Series(close, index=pd.to_datetime(dates))
    m = s.groupby(s.index.to_period("M")).last()
    r = m / m.shift(1) - 1.0
    return r[(r.index >= first_month) & (r.index <= last_month)]


def regression_market():
    """AAPL's monthly excess return on the four factors, 2010-01 to 2017-03 (the
    factors' last month), and AAPL on SPY daily, 2010-2017."""
    ff = ff_monthly()
    ff.index = ff.index.to_period("M")
    first, last = pd.Period("2010-01", "M"), pd.Period("2017-03", "M")
    r = month_end_returns("AAPL", first, last)
    f = ff.loc[r.index]
    y = (r - f["RF"]).to_numpy()
    names = ["MktRF", "SMB", "HML", "Mom"]
    monthly = ols(y, f[names].to_numpy(), ["ff:" + n for n in names], 3)
    market = ols(y, f[["MktRF"]].to_numpy(), ["ff:MktRF"], 3)

    def daily(t):
        d, c = load(t)
        return pd.Series(c, index=pd.to_datetime(d))
    a, s = daily("AAPL"), daily("SPY")
    both = pd.concat([a, s], axis=1, join="inner").loc["2010-01-01":"2017-12-31"]
    ret = (both / both.shift(1) - 1.0).iloc[1:]
    day = ols(ret.iloc[:, 0].to_numpy(), ret.iloc[:, [1]].to_numpy(), ["SPY"], 5)
    return {
        "monthly": {"y": "AAPL", "start": "2010-01-01", "end": "2017-12-31", "months": [str(p) for p in r.index],
                    "hac_lags": 3, "four_factor": monthly, "market": market},
        "daily": {"y": "AAPL", "x": "SPY", "start": "2010-01-01", "end": "2017-12-31", "hac_lags": 5,
                  "first_date": str(ret.index[0].date()), "expected": day},
    }


# ---------------------------------------------------------------- overfitting

EULER_GAMMA = 0.5772156649015329


def moments(r):
    return {
        "n": len(r), "mean": float(np.mean(r)), "std": float(np.std(r, ddof=1)),
        "sharpe": float(np.mean(r) / np.std(r, ddof=1)),
        "skewness": float(stats.skew(r)), "kurtosis": float(stats.kurtosis(r, fisher=False)),
    }


def psr(m, sr_star):
    sr = m["sharpe"]
    disp = 1.0 - m["skewness"] * sr + (m["kurtosis"] - 1.0) / 4.0 * sr * sr
    return float(stats.norm.cdf((sr - sr_star) * math.sqrt(m["n"] - 1) / math.sqrt(disp)))


def sr0(var, trials, bench=0.0):
    z1 = stats.norm.ppf(1.0 - 1.0 / trials)
    z2 = stats.norm.ppf(1.0 - 1.0 / (trials * math.e))
    return bench + math.sqrt(var) * ((1.0 - EULER_GAMMA) * z1 + EULER_GAMMA * z2)


def mintrl(m, sr_star, conf):
    sr = m["sharpe"]
    disp = 1.0 - m["skewness"] * sr + (m["kurtosis"] - 1.0) / 4.0 * sr * sr
    return float(1.0 + disp * (stats.norm.ppf(conf) / (sr - sr_star)) ** 2)


def pbo(M, S):
    T, N = M.shape
    m = T // S
    M = M[T - m * S:]
    lam = []
    for c in itertools.combinations(range(S), S // 2):
        mask = np.zeros(m * S, bool)
        for b in c:
            mask[b * m:(b + 1) * m] = True
        IS, OS = M[mask], M[~mask]
        sr_is = IS.mean(0) / IS.std(0, ddof=1)
        sr_os = OS.mean(0) / OS.std(0, ddof=1)
        best = int(np.argmax(sr_is))
        w = sr_os[best]
        rank = 1 + np.sum(sr_os < w) + (np.sum(sr_os == w) - 1) / 2
        om = rank / (N + 1)
        lam.append(math.log(om / (1 - om)))
    lam = np.array(lam)
    return {"pbo": float(np.mean(lam <= 0)), "logits": lam.tolist(), "rows_dropped": T - m * S}


def overfitting():
    rng = np.random.default_rng(99)
    T, K = 756, 5
    # Skewed, fat-tailed daily returns (Student t, a negative jump now and then).
    R = 0.0004 + 0.01 * rng.standard_t(5, size=(T, K)) / math.sqrt(5 / 3)
    R -= 0.03 * (rng.random((T, K)) < 0.01)
    R[:, 2] += 0.0006  # one better strategy
    names = [f"s{k}" for k in range(K)]
    ms = [moments(R[:, k]) for k in range(K)]
    best = int(np.argmax([m["sharpe"] for m in ms]))
    var = float(np.var([m["sharpe"] for m in ms], ddof=1))
    bench_annual = 0.5
    bench = bench_annual / math.sqrt(252)
    cases = {
        "returns": {n: R[:, k].tolist() for k, n in enumerate(names)},
        "moments": ms, "best": names[best],
        "psr0": [psr(m, 0.0) for m in ms],
        "psr_bench": [psr(m, bench) for m in ms],
        "benchmark_sharpe_annual": bench_annual,
        "trial_sharpe_variance": var,
        "sr0_5": sr0(var, K), "dsr_5": psr(ms[best], sr0(var, K)),
        "sr0_50": sr0(var, 50), "dsr_50": psr(ms[best], sr0(var, 50)),
        "sr0_50_bench": sr0(var, 50, bench), "dsr_50_bench": psr(ms[best], sr0(var, 50, bench)),
        "mintrl_95": mintrl(ms[best], 0.0, 0.95), "mintrl_99_bench": mintrl(ms[best], bench, 0.99),
    }
    rng = np.random.default_rng(5)
    M = 0.01 * rng.standard_normal((170, 8))
    M[:, 3] += 0.002
    cases["pbo_small"] = {"returns": M.tolist(), "partitions": 8} | pbo(M, 8)
    return cases


def main():
    check_pins()
    payload = {
        "ic_seeded": ic_seeded(),
        "ic_market": ic_market(),
        "regression_seeded": regression_seeded(),
        "regression_market": regression_market(),
        "overfitting": overfitting(),
    }
    write(payload)
    m = payload["ic_market"]["expected"]
    print("factor.json:", ", ".join(f"IC({e['horizon']}d) {e['ic_mean']:.4f}" for e in m))


if __name__ == "__main__":
    main()
