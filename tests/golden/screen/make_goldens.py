#!/usr/bin/env python3
"""Goldens for vibedesk's factor screen (docs §17.8), from alphalens-reloaded.

Writes screen.json next to this file; tests/engine/screen_goldens.rs reads it
and needs no Python. Run it in a fresh virtual environment with the versions
pinned in requirements.txt (the JSON records them, the script refuses others):

    python3 -m venv /tmp/scvenv
    /tmp/scvenv/bin/pip install -r tests/golden/screen/requirements.txt
    /tmp/scvenv/bin/python tests/golden/screen/make_goldens.py

Both sides see the SAME factor values and forward returns: the script computes
close[t+h] / close[t] - 1 itself (NaN where either close is missing; alphalens'
compute_forward_returns would forward-fill a missing bar's price) and hands
them to alphalens through get_clean_factor. The screen's conventions that
differ from alphalens' defaults are encoded here, not waived:

- min names: a date is scored (IC) or bucketed (quantiles) only with at least
  max(min_names, quantiles, 3) names: the frames are filtered before alphalens
  sees them.
- quantiles from the factor alone: each date's buckets come from every name
  with a factor value (alphalens buckets the names that also have all the
  forward returns): quantize_factor runs on the factor-only frame, and the
  per-horizon frames take those buckets.
- per-horizon samples: alphalens drops a name-date missing ANY horizon's
  forward return; the screen drops it per horizon, so get_clean_factor runs
  once per horizon (bins=1: its binning is not the screen's quantiles).
- raw quantile returns: mean_return_by_quantile(demeaned=False).
- the spread is top minus bottom: alphalens-reloaded 0.5's
  compute_mean_returns_spread halves it (a 50/50 gross book), so it is doubled
  here.
- rank autocorrelation on the factor alone (every name-date with a value).
- the long-short of the deflated Sharpe is the 1-day spread per date, negated
  for a factor whose mean rank IC at the rank horizon is negative.

References: alphalens-reloaded get_clean_factor, quantize_factor,
factor_information_coefficient (Spearman), mean_return_by_quantile,
compute_mean_returns_spread, factor_rank_autocorrelation; scipy pearsonr (IC),
skew, kurtosis, norm; statsmodels OLS(ic, 1) with HAC (h - 1 lags) for the
Newey-West t and p; statsmodels multipletests (holm, fdr_bh); pandas
DataFrame.corr(min_periods=3) for the rank IC correlation; pandas qcut.
"""

import contextlib
import datetime as dt
import io
import json
import math
import os
import sys
import warnings
from importlib.metadata import version

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.multitest import multipletests

import alphalens as al

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "stats"))
import make_goldens_factor as market  # noqa: E402  (the offline market's decoder)

PINS = {
    "alphalens-reloaded": "0.5.1",
    "pandas": "3.1.1",
    "numpy": "2.4.6",
    "scipy": "1.17.1",
    "statsmodels": "0.15.0",
}
HORIZONS = [1, 5, 10, 21]
Q = 5
MIN_NAMES = 5
RANK_H = 1
NEED = max(MIN_NAMES, Q, 3)
EULER_GAMMA = 0.5772156649015329


def versions():
    return {p: version(p) for p in PINS} | {"python": sys.version.split()[0]}


def check_pins():
    got = versions()
    bad = {p: got[p] for p in PINS if got[p] != PINS[p]}
    if bad:
        sys.exit(f"pinned versions {PINS} are required, found {bad}")


def num(v):
    v = float(v)
    return v if math.isfinite(v) else None


def nums(xs):
    return [num(v) for v in xs]


def quiet(f, *a, **k):
    """alphalens prints its drop counts; the goldens do not need them."""
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*a, **k)


# ---------------------------------------------------------------- one factor

def forward(close, h):
    T = close.shape[0]
    out = np.full(close.shape, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = close[h:] / close[:T - h] - 1.0
    r[~(close[:T - h] > 0)] = np.nan
    out[:T - h] = r
    return out


def at_least(frame, need):
    """Rows of the dates with at least `need` of them."""
    size = frame.groupby(level="date")["factor"].transform("size")
    return frame[size >= need]


def ic_stats(ic, h):
    ic = np.asarray(ic)
    mean, std = float(np.mean(ic)), float(np.std(ic, ddof=1))
    fit = sm.OLS(ic, np.ones(len(ic))).fit(cov_type="HAC", cov_kwds={"maxlags": h - 1})
    return {"mean": mean, "std": std, "ir": mean / std,
            "t_nw": float(fit.tvalues[0]), "p_value": float(fit.pvalues[0])}


def horizon(f, fwd, buckets, dates, h):
    """One horizon through alphalens: the IC frame, the quantile frame."""
    col = f"{h}D"
    fr = pd.DataFrame({col: fwd})
    clean = quiet(al.utils.get_clean_factor, f, fr, quantiles=None, bins=1, max_loss=1.0)
    clean = at_least(clean, NEED)
    rank_ic = quiet(al.performance.factor_information_coefficient, clean)[col]
    pear = clean.groupby(level="date").apply(
        lambda g: stats.pearsonr(g["factor"], g[col]).statistic if g[col].nunique() > 1
        and g["factor"].nunique() > 1 else np.nan)
    ok = rank_ic.notna() & pear.reindex(rank_ic.index).notna()
    rank_ic, pear = rank_ic[ok], pear.reindex(rank_ic.index)[ok]
    names = clean.groupby(level="date").size().reindex(rank_ic.index)
    qf = pd.DataFrame({col: fwd}).dropna().join(buckets, how="inner")
    qf["factor"] = f.reindex(qf.index)
    mean_ret, _ = al.performance.mean_return_by_quantile(qf, demeaned=False)
    by_date, _ = al.performance.mean_return_by_quantile(qf, by_date=True, demeaned=False)
    spread, _ = al.performance.compute_mean_returns_spread(by_date[col], Q, 1)
    spread = (2.0 * spread).dropna()  # alphalens-reloaded 0.5 halves top - bottom
    qr = mean_ret[col].reindex(range(1, Q + 1))
    pos = {pd.Timestamp(d): i for i, d in enumerate(dates)}
    return {
        "horizon": h,
        "rows": [pos[d] for d in rank_ic.index],
        "ic": [float(v) for v in pear], "rank_ic": [float(v) for v in rank_ic],
        "names": [int(v) for v in names],
        "ic_stats": ic_stats(pear.values, h), "rank_ic_stats": ic_stats(rank_ic.values, h),
        "quantile_returns": nums(qr.values),
        "spread": num(spread.mean()) if len(spread) else None, "spread_dates": int(len(spread)),
    }, spread


def study(dates, symbols, factor, close):
    """Everything the screen says about one factor, or None when a horizon has
    fewer than two scored dates (the screen's error)."""
    idx = pd.MultiIndex.from_product([pd.DatetimeIndex(dates), symbols], names=["date", "asset"])
    f = pd.Series(factor.ravel(), index=idx, name="factor")
    fin = f[np.isfinite(f)].to_frame("factor")
    if fin.empty:
        return None
    buckets = quiet(al.utils.quantize_factor, at_least(fin, NEED), quantiles=Q, no_raise=True)
    buckets = buckets.astype(int).rename("factor_quantile")
    out, ls = {"horizons": []}, None
    for h in HORIZONS:
        fwd = pd.Series(forward(close, h).ravel(), index=idx)
        hs, spread = horizon(f, fwd, buckets, dates, h)
        if len(hs["rows"]) < 2:
            return None
        out["horizons"].append(hs)
        if h == 1:
            ls = spread
    ac = al.performance.factor_rank_autocorrelation(fin, period=1).dropna()
    pos = {pd.Timestamp(d): i for i, d in enumerate(dates)}
    out |= {
        "coverage": float(np.isfinite(factor).sum() / factor.size),
        "ic_decay": [h["rank_ic_stats"]["mean"] for h in out["horizons"]],
        "rank_autocorrelation": {"rows": [pos[d] for d in ac.index], "values": [float(v) for v in ac]},
        "rank_autocorrelation_mean": float(ac.mean()),
        "turnover": float(1.0 - ac.mean()),
        "long_short": {"rows": [pos[d] for d in ls.index], "values": [float(v) for v in ls]},
    }
    return out


# ---------------------------------------------------------------- the comparison

def moments(r):
    r = np.asarray(r)
    if len(r) < 3 or not np.std(r, ddof=1) > 1e-12:
        return None
    sr = float(np.mean(r) / np.std(r, ddof=1))
    return {"n": len(r), "sharpe": sr, "skew": float(stats.skew(r)),
            "kurt": float(stats.kurtosis(r, fisher=False))}


def psr(m, bench):
    disp = 1.0 - m["skew"] * m["sharpe"] + (m["kurt"] - 1.0) / 4.0 * m["sharpe"] ** 2
    return float(stats.norm.cdf((m["sharpe"] - bench) * math.sqrt(m["n"] - 1) / math.sqrt(disp))), disp


def compare(names, studies):
    at = [None if s is None else next(h for h in s["horizons"] if h["horizon"] == RANK_H) for s in studies]
    p = [1.0 if a is None else a["rank_ic_stats"]["p_value"] for a in at]
    score = [math.nan if a is None else abs(a["rank_ic_stats"]["ir"]) for a in at]
    ranking = sorted(range(len(names)), key=lambda i: (math.isnan(score[i]), -score[i] if not math.isnan(score[i]) else 0, i))
    ms = []
    for s, a in zip(studies, at):
        if s is None:
            ms.append(None)
            continue
        sign = -1.0 if a["rank_ic_stats"]["mean"] < 0 else 1.0
        ms.append(moments([sign * v for v in s["long_short"]["values"]]))
    # The rank IC series on a common date index; an unscored factor is an empty column.
    cols = {}
    for n, a in zip(names, at):
        cols[n] = pd.Series({} if a is None else dict(zip(a["rows"], a["rank_ic"])), dtype=float)
    corr = pd.DataFrame(cols).sort_index().corr(min_periods=3)
    corr = corr.reindex(index=names, columns=names)
    out = {
        "p_value": p,
        "p_holm": [float(v) for v in multipletests(p, method="holm")[1]],
        "p_bh": [float(v) for v in multipletests(p, method="fdr_bh")[1]],
        "score": nums(score), "ranking": ranking,
        "long_short_sharpe": [None if m is None else m["sharpe"] for m in ms],
        "correlation": [nums(row) for row in corr.values],
    }
    have = [(i, m) for i, m in enumerate(ms) if m is not None]
    best, m = max(have, key=lambda x: (x[1]["sharpe"], -x[0]))
    sharpes = [m2["sharpe"] for _, m2 in have]
    psr0, disp = psr(m, 0.0)
    var = float(np.var(sharpes, ddof=1)) if len(sharpes) >= 2 else disp / (m["n"] - 1)
    n = len(names)
    sr0 = math.sqrt(var) * ((1 - EULER_GAMMA) * stats.norm.ppf(1 - 1 / n)
                            + EULER_GAMMA * stats.norm.ppf(1 - 1 / (n * math.e))) if n > 1 else 0.0
    out["deflated"] = {"best": names[best], "sharpe": m["sharpe"], "observations": m["n"],
                       "trials": n, "sharpe_variance": var, "expected_max_sharpe": float(sr0),
                       "psr": psr0, "dsr": psr(m, sr0)[0]}
    return out


def screen(dates, symbols, close, factors):
    names = list(factors)
    studies = [study(dates, symbols, factors[n], close) for n in names]
    return {"names": names, "options": {"horizons": HORIZONS, "quantiles": Q, "min_names": MIN_NAMES,
                                        "rank_horizon": RANK_H},
            "factors": studies, "compare": compare(names, studies)}


# ---------------------------------------------------------------- cases

def seeded():
    """A 120 x 24 panel: missing bars, a late listing, a date without any
    factor, a constant date, ties that make qcut edges coincide, a sparse
    factor and an empty one.

    Every input is an integer over a power of ten, and the JSON holds the
    integers: both sides divide them the same way, so they see the same
    doubles (serde_json's default float parsing may miss by an ulp)."""
    rng = np.random.Generator(np.random.PCG64(41))
    T, N = 120, 24
    grids = {}

    def scaled(name, x, scale):
        ints = np.where(np.isfinite(x), np.round(x * scale), np.nan)
        grids[name] = {"scale": scale, "ints": [[None if not np.isfinite(v) else int(v) for v in r] for r in ints]}
        return ints / scale

    close = 100 * np.cumprod(1 + 0.02 * rng.standard_normal((T, N)), axis=0)
    close[rng.random((T, N)) < 0.03] = np.nan
    close[:30, 5] = np.nan
    close = scaled("close", close, 10_000)
    fwd1 = forward(close, 1)
    raw = {
        "planted": (np.nan_to_num(fwd1, nan=0.0) * 50 + rng.standard_normal((T, N)), 10),
        "ties": (rng.integers(0, 4, (T, N)).astype(float), 1),
        "noise": (rng.standard_normal((T, N)), 1000),
        "sparse": (rng.standard_normal((T, N)), 100),
        "empty": (np.full((T, N), np.nan), 1),
    }
    raw["noise"][0][rng.random((T, N)) < 0.1] = np.nan
    raw["noise"][0][20] = 0.5
    raw["sparse"][0][:, 8:] = np.nan
    raw["sparse"][0][rng.random((T, N)) < 0.25] = np.nan
    for v, _ in raw.values():
        v[:, 5][np.isnan(close[:, 5])] = np.nan
        v[10] = np.nan
    factors = {n: scaled(n, v, k) for n, (v, k) in raw.items()}
    d0 = dt.date(2010, 1, 1)
    dates = [d0 + dt.timedelta(days=i) for i in range(T)]
    symbols = [f"S{j}" for j in range(N)]
    out = screen(dates, symbols, close, factors)
    out["inputs"] = grids
    return out


MARKET_FACTORS = {"mom_12_1": (252, 21), "rev_21": (21, 0), "rev_5": (5, 0)}


def market_case():
    """Momentum-family factors on the offline universe's 106 stocks, 2010-2012
    (indicator `momentum`, close[t-skip] / close[t-window] - 1)."""
    tickers = market.stocks()
    start, end = dt.date(2010, 1, 1), dt.date(2012, 12, 31)
    factors, grid, close = {}, None, None
    for name, (w, s) in MARKET_FACTORS.items():
        grid, factor, close = market.momentum_panel(tickers, start, end, window=w, skip=s)
        factors[name] = factor
    out = screen(grid, tickers, close, factors)
    out |= {"universe": tickers, "start": str(start), "end": str(end), "dates": [str(d) for d in grid],
            "params": {n: {"window": w, "skip": s} for n, (w, s) in MARKET_FACTORS.items()}}
    return out


def qcut_cases():
    """pandas qcut labels (0-based, None where the edges coincide) on small
    vectors: ties at the edges, values an ulp apart, every q from 2 to 20."""
    rng = np.random.Generator(np.random.PCG64(7))
    cases = []
    for q in range(2, 21):
        for kind in ("distinct", "ties", "tiny"):
            m = int(rng.integers(q, 3 * q + 5))
            if kind == "distinct":
                x = np.round(rng.standard_normal(m), 6)
            elif kind == "ties":
                x = rng.integers(0, max(2, m // 2), m).astype(float)
            else:
                x = 1.0 + rng.integers(0, 5, m) * 2.0 ** -52
            try:
                lab = [int(v) for v in pd.qcut(x, q, labels=False)]
            except ValueError:
                lab = None
            # The doubles' bits: the last-ulp ties must reach Rust exactly.
            bits = [int(b) for b in np.asarray(x, dtype=np.float64).view(np.uint64)]
            cases.append({"q": q, "x_bits": bits, "labels": lab})
    return cases


def main():
    check_pins()
    payload = {"generated_by": "tests/golden/screen/make_goldens.py", "versions": versions(),
               "qcut": qcut_cases(), "seeded": seeded(), "market": market_case()}
    with open(os.path.join(HERE, "screen.json"), "w") as f:
        json.dump(payload, f, indent=None, separators=(",", ":"), allow_nan=False)
        f.write("\n")
    c = payload["market"]["compare"]
    print("screen.json: market best", c["deflated"]["best"], "DSR", round(c["deflated"]["dsr"], 4),
          "ranking", [payload["market"]["names"][i] for i in c["ranking"]])


if __name__ == "__main__":
    main()
