#!/usr/bin/env python3
"""The Python references' side of `cargo bench --bench stats` (its factor rows) (docs §17.6).

Reads the inputs the Rust bench wrote in DIR (the offline market's closes of its
106 stocks as lens.i64 / days.i64 / close.f64, seeded strategy returns as
strategies.f64, and meta.json), times the same computations and prints one JSON
object of seconds, with the results for the bench to check:

- 12-1 momentum IC, 2005-2017, forward 1, 5, 21 days, quintiles: momentum per
  stock on its own history (numpy), the panel on the union of dates, scipy's
  spearmanr per date (the goldens' definition), quantile means and top turnover
  (numpy), the Newey-West t (statsmodels OLS on a constant, HAC with h - 1 lags);
- PBO by CSCV with 16 partitions on 100 strategies x 2,520 days: the direct
  algorithm (itertools.combinations, numpy Sharpe of each half), and a
  vectorised numpy formulation (block sums times a 0/1 matrix of the splits).

Usage: stats_factor.py DIR (with the packages of tests/golden/stats/requirements.txt).
"""

import itertools
import json
import os
import sys
import time

import numpy as np
import statsmodels.api as sm
from scipy import stats

DIR = sys.argv[1]
META = json.load(open(os.path.join(DIR, "meta.json")))


def load(name, dtype):
    return np.fromfile(os.path.join(DIR, name), dtype=dtype)


def best(f, repeat):
    times = []
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return min(times), out


# ------------------------------------------------------------------ factor IC

lens = load("lens.i64", "<i8")
days = load("days.i64", "<i8")
close = load("close.f64", "<f8")
offsets = np.concatenate([[0], np.cumsum(lens)])
SERIES = [(days[a:b], close[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]


def ic_study(series, start, end, horizons=(1, 5, 21), q=5, window=252, skip=21):
    n = len(series)
    cut = []
    for d, c in series:
        mom = np.full(len(c), np.nan)
        mom[window:] = c[window - skip:len(c) - skip] / c[:len(c) - window] - 1.0
        keep = (d >= start) & (d <= end)
        cut.append((d[keep], c[keep], mom[keep]))
    grid = np.unique(np.concatenate([d for d, _, _ in cut]))
    T = len(grid)
    F = np.full((T, n), np.nan)
    C = np.full((T, n), np.nan)
    for j, (d, c, m) in enumerate(cut):
        at = np.searchsorted(grid, d)
        F[at, j] = m
        C[at, j] = c
    # Buckets by factor value per date: stable order, i*q//m.
    B = np.full((T, n), -1)
    for t in range(T):
        ok = np.flatnonzero(np.isfinite(F[t]))
        if len(ok) >= q:
            order = ok[np.argsort(F[t, ok], kind="stable")]
            B[t, order] = np.arange(len(ok)) * q // len(ok)
    need = max(5, q, 3)
    out = []
    for h in horizons:
        with np.errstate(invalid="ignore", divide="ignore"):
            fwd = C[h:] / C[:-h] - 1.0
        ics, qsum, qcnt, spreads = [], np.zeros(q), np.zeros(q), []
        for t in range(T - h):
            f = F[t]
            if not np.isfinite(f).any():
                continue
            ok = np.isfinite(f) & np.isfinite(fwd[t])
            if ok.sum() < need:
                continue
            r = stats.spearmanr(f[ok], fwd[t][ok]).statistic
            if not np.isfinite(r):
                continue
            ics.append(r)
            okb = (B[t] >= 0) & np.isfinite(fwd[t])
            s = np.bincount(B[t][okb], weights=fwd[t][okb], minlength=q)
            k = np.bincount(B[t][okb], minlength=q)
            m = np.divide(s, k, out=np.zeros(q), where=k > 0)
            qsum += m
            qcnt += k > 0
            if k[0] > 0 and k[q - 1] > 0:
                spreads.append(m[q - 1] - m[0])
        ic = np.array(ics)
        nw = sm.OLS(ic, np.ones(len(ic))).fit(cov_type="HAC", cov_kwds={"maxlags": h - 1})
        top = B == q - 1
        both = top[h:].any(1) & top[:-h].any(1)
        new = (top[h:] & ~top[:-h]).sum(1) / np.maximum(top[h:].sum(1), 1)
        out.append({
            "ic_mean": float(ic.mean()), "ic_std": float(ic.std(ddof=1)),
            "t_stat_nw": float(nw.tvalues[0]), "quantiles": (qsum / qcnt).tolist(),
            "spread": float(np.mean(spreads)), "top_turnover": float(new[both].mean()),
        })
    return out


t_ic, ic = best(lambda: ic_study(SERIES, META["start"], META["end"]), 2)

# ------------------------------------------------------------------ PBO

M = load("strategies.f64", "<f8").reshape(META["strategies"])
S = META["partitions"]


def pbo_direct(M, S):
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
        best_ = int(np.argmax(sr_is))
        w = sr_os[best_]
        rank = 1 + np.sum(sr_os < w) + (np.sum(sr_os == w) - 1) / 2
        om = rank / (N + 1)
        lam.append(np.log(om / (1 - om)))
    return float(np.mean(np.array(lam) <= 0))


def pbo_vectorised(M, S):
    T, N = M.shape
    m = T // S
    M = M[T - m * S:]
    X = M - M.mean(0)
    blocks = X.reshape(S, m, N)
    bs, bq = blocks.sum(1), (blocks ** 2).sum(1)
    C = np.array([[1.0 if b in c else 0.0 for b in range(S)] for c in itertools.combinations(range(S), S // 2)])
    shift = M.mean(0)
    k = m * (S // 2)

    def sharpe(s, q):
        return (shift + s / k) / np.sqrt((q - s * s / k) / (k - 1))

    is_s, is_q = C @ bs, C @ bq
    sr_is = sharpe(is_s, is_q)
    sr_os = sharpe(bs.sum(0) - is_s, bq.sum(0) - is_q)
    best_ = sr_is.argmax(1)
    w = sr_os[np.arange(len(C)), best_][:, None]
    rank = 1 + (sr_os < w).sum(1) + ((sr_os == w).sum(1) - 1) / 2
    om = rank / (N + 1)
    return float(np.mean(np.log(om / (1 - om)) <= 0))


t_pbo, pbo = best(lambda: pbo_direct(M, S), 1)
t_vec, pbo_vec = best(lambda: pbo_vectorised(M, S), 5)

print(json.dumps({
    "ic": t_ic,
    "ic_means": [h["ic_mean"] for h in ic],
    "pbo": t_pbo,
    "pbo_value": pbo,
    "pbo_vectorised": t_vec,
    "pbo_vectorised_value": pbo_vec,
}))
