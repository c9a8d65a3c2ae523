#!/usr/bin/env python3
"""Goldens for vibedesk's bundled 101 Formulaic Alphas (assets/alpha101.txt).

Writes alpha101.json next to this file; the Rust test
(tests/engine/alpha_goldens.rs) reads it and needs no Python.

Each bundled alpha is written below from the paper's formulas (Kakushadze,
"101 Formulaic Alphas", Wilmott 2016(84), appendix A) with numpy and pandas,
independently of the Rust evaluator and of the asset's text, using the
operator definitions of the factor language's contract:

- inputs: returns = close / delay(close, 1) - 1; vwap = (high + low + close) / 3
  (daily bars carry no intraday volume profile); adv{d} = ts_mean(close * volume, d);
- time series over the past d rows including today, d floored; NaN until d
  rows and whenever a value in the window is NaN; every window is computed
  on its own with numpy (no online updates, which drift);
- ts_stddev / ts_cov with ddof = 1 (two passes from the window's mean);
  ts_corr Pearson, NaN when either window is constant; a window of one
  repeated value has that value as its mean and value * d as its sum, so
  its deviations, variance and covariance are exactly 0; ts_argmax /
  ts_argmin 1-based, oldest = 1, ties to the earliest; ts_rank the average-tie rank of today's value among the d values
  over d; decay_linear with weights 1 (oldest) .. d (today) over their sum;
- cross-sectional rank = pandas rank(pct=True) (average ties, over the
  symbols with a value); scale(x, a) = x * a / sum|x|;
- comparisons give 1.0 / 0.0 and NaN when a side is NaN; c ? a : b is NaN
  when c is NaN; min / max of two series are elementwise (NaN if either is);
  with an integer second argument they are ts_min / ts_max (the paper's use).

The panel is the union of the universe's trading dates (NaN where a symbol
has no bar), evaluated from the data's first date; the JSON keeps a sample
of dates: the first 60 rows (warm-up NaN pattern) and every 45th row from
2005-01-03. Values are rounded to 12 significant digits; NaN is null and
infinities (division by a zero range, IEEE) are the strings "inf" / "-inf".

Ill-conditioned cells: the script evaluates every alpha eight times, with
sums oldest-first, newest-first, numpy's pairwise order and (for ts_sum,
ts_mean and adv) carried from row to row as online algorithms do, each with the
formulas in two forms equal in exact arithmetic (correlation over
sqrt(sxx * syy) or sqrt(sxx) * sqrt(syy), decay weights normalised before or
after summing, x * a / sum|x| or x / sum|x| * a, the variance with or
without the residual correction). "unstable" lists, per alpha, the sampled
cells (row-major index into its values) where any evaluation parts from the
first by more than 1e-10 or in its NaN / infinity pattern: a rank, window
rank, argmin or comparison of quantities equal on paper that rounding
orders. The Rust test skips and counts them.

Inputs: the offline market as the binary decodes it (assets/data/
us_daily_2000_2017.bin, layout in src/research/data/embedded/pack.rs; each
ticker's rows are checked against the index's SHA-256).

Run in a fresh virtual environment with the versions in requirements.txt:

    python3 -m venv /tmp/avenv
    /tmp/avenv/bin/pip install -r tests/golden/alpha101/requirements.txt
    /tmp/avenv/bin/python tests/golden/alpha101/make_goldens.py
"""

import datetime as dt
import hashlib
import json
import math
import os
import sys
import zlib
from importlib.metadata import version

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
PINS = {"numpy": "2.4.6", "pandas": "3.1.1"}

# 26 stocks with every bar since 2000-01-03, two with a few missing bars (a
# NaN inside windows) and two that list later (a warm-up mid-panel).
UNIVERSE = [
    "AABA", "ABT", "AIG", "AXP", "BMY", "C", "CAT", "COST", "CSCO", "DUK",
    "DVN", "FCX", "HPQ", "IBM", "INTC", "JNJ", "KO", "LLY", "MCD", "MMM",
    "MRK", "MSFT", "ORCL", "PEP", "PG", "QCOM",
    "AAPL", "BA",
    "V", "TSLA",
]
SAMPLE_FROM = dt.date(2005, 1, 3)
SAMPLE_EVERY = 45
WARMUP_ROWS = 60


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
            if line.startswith(("#", "ticker,")) or not line.strip():
                continue
            t, kind, _first, _last, rows, off, nbytes, sha = line.strip().split(",")
            out[t] = dict(kind=kind, rows=int(rows), off=int(off), nbytes=int(nbytes), sha=sha)
    return out


def unsigned_varints(buf):
    out, value, shift = [], 0, 0
    for b in buf:
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            out.append(value)
            value, shift = 0, 0
    return out


def decode(pack, x):
    """A ticker's (dates, open, high, low, close, volume), prices in units of 1e-4."""
    v = unsigned_varints(zlib.decompress(pack[x["off"]:x["off"] + x["nbytes"]], -15))
    n = v[0]
    assert n == x["rows"]
    z = [(u >> 1) ^ -(u & 1) for u in v[1:]]
    days, cdelta, ogap, hover, lunder, vdelta = (z[k * n:(k + 1) * n] for k in range(6))
    rows = []
    day = close = vol = 0
    for i in range(n):
        day += days[i]
        prev = cdelta[0] if i == 0 else close
        close += cdelta[i]
        o = prev + ogap[i]
        vol += vdelta[i]
        rows.append((dt.date.fromordinal(day), o, max(o, close) + hover[i],
                     min(o, close) - lunder[i], close, vol))
    h = hashlib.sha256()
    for r in rows:
        h.update((",".join(str(c) for c in r) + "\n").encode())
    assert h.hexdigest() == x["sha"], "digest"
    return rows


def load_panel(tickers):
    index = read_index()
    with open(os.path.join(ROOT, "assets/data/us_daily_2000_2017.bin"), "rb") as f:
        pack = f.read()
    per = {t: decode(pack, index[t]) for t in tickers}
    dates = sorted({r[0] for rows in per.values() for r in rows})
    at = {d: i for i, d in enumerate(dates)}
    cols = {k: np.full((len(dates), len(tickers)), np.nan) for k in ("open", "high", "low", "close", "volume")}
    for j, t in enumerate(tickers):
        for d, o, hi, lo, c, v in per[t]:
            i = at[d]
            cols["open"][i, j] = o / 10000.0
            cols["high"][i, j] = hi / 10000.0
            cols["low"][i, j] = lo / 10000.0
            cols["close"][i, j] = c / 10000.0
            cols["volume"][i, j] = float(v)
    return dates, cols


# ---------------------------------------------------------------- operators (contract)

def days(d):
    d = math.floor(d)
    assert d >= 1
    return d


def windows(x, d):
    """(T, N, d) windows ending at each row, oldest first, NaN-padded on top."""
    pad = np.full((d - 1, x.shape[1]), np.nan)
    return sliding_window_view(np.vstack([pad, x]), d, axis=0)


def rolling(x, d, fn):
    d = days(d)
    w = windows(np.asarray(x, dtype=float), d)
    with np.errstate(all="ignore"):
        out = np.asarray(fn(w), dtype=float)
    out[np.isnan(w).any(axis=-1)] = np.nan
    return out


def delay(x, d):
    d = days(d)
    out = np.full_like(x, np.nan)
    out[d:] = x[:-d]
    return out


def delta(x, d):
    return x - delay(x, d)


# Sums run oldest to newest, one term at a time (the order a plain loop
# takes), in the formulas' first form. ORDER and FORM switch to other sum
# orders (newest first, numpy's pairwise) and to other forms equal in exact
# arithmetic; main() evaluates under every other combination and marks the
# cells where any differs: their value is decided by rounding (a rank or a
# comparison of quantities equal on paper), so no golden can pin them.
ORDER, FORM = "forward", 0
VARIANTS = [(o, f) for o in ("forward", "reverse", "pairwise", "running") for f in (0, 1)][1:]


def seqsum(w):
    """Sum over the last axis in the current ORDER."""
    if ORDER == "pairwise":
        return np.ascontiguousarray(w).sum(axis=-1)
    order = range(w.shape[-1] - 1, -1, -1) if ORDER == "reverse" else range(w.shape[-1])
    acc = np.zeros(w.shape[:-1])
    for k in order:
        acc = acc + w[..., k]
    return acc


def seqprod(w):
    order = range(w.shape[-1] - 1, -1, -1) if ORDER == "reverse" else range(w.shape[-1])
    acc = np.ones(w.shape[:-1])
    for k in order:
        acc = acc * w[..., k]
    return acc


def flat(w):
    return np.ptp(w, axis=-1) == 0


def running_sum(w):
    """Window sums carried from row to row (add the entering value, take
    off the leaving one), restarted after a window with a NaN: the online
    order, used as one more variant."""
    out = np.full(w.shape[:-1], np.nan)
    prev = None
    for t in range(w.shape[0]):
        good = ~np.isnan(w[t]).any(axis=-1)
        fresh = w[t].sum(axis=-1)
        if prev is not None:
            carried = prev + w[t, :, -1] - w[t - 1, :, 0]
            fresh = np.where(np.isnan(prev), fresh, carried)
        out[t] = np.where(good, fresh, np.nan)
        prev = out[t]
    return out


def window_sum(w):
    """A window of one repeated value sums to value * d exactly (one
    rounding), so a flat stretch leaves no residue."""
    total = running_sum(w) if ORDER == "running" else seqsum(w)
    return np.where(flat(w), w[..., 0] * w.shape[-1], total)


def window_mean(w):
    return np.where(flat(w), w[..., 0], window_sum(w) / w.shape[-1])


def ts_sum(x, d):
    return rolling(x, d, window_sum)


def ts_mean(x, d):
    return rolling(x, d, window_mean)


def product(x, d):
    return rolling(x, d, seqprod)


def ts_min(x, d):
    return rolling(x, d, lambda w: w.min(axis=-1))


def ts_max(x, d):
    return rolling(x, d, lambda w: w.max(axis=-1))


def ts_argmax(x, d):
    return rolling(x, d, lambda w: np.argmax(w, axis=-1) + 1.0)


def ts_argmin(x, d):
    return rolling(x, d, lambda w: np.argmin(w, axis=-1) + 1.0)


def ts_rank(x, d):
    def fn(w):
        today = w[..., -1:]
        below = (w < today).sum(axis=-1)
        ties = (w == today).sum(axis=-1)
        return (below + (ties + 1) / 2.0) / w.shape[-1]
    return rolling(x, d, fn)


def deviations(w):
    """From the window's mean: exactly 0 throughout a flat window."""
    return w - window_mean(w)[..., None]


def stddev(x, d):
    def fn(w):
        e, n = deviations(w), w.shape[-1]
        if FORM:
            return np.sqrt(np.maximum(seqsum(e * e) - seqsum(e) ** 2 / n, 0.0) / (n - 1))
        return np.sqrt(seqsum(e * e) / (n - 1))
    return rolling(x, d, fn)


def decay_linear(x, d):
    def fn(w):
        n = w.shape[-1]
        weights = np.arange(1.0, n + 1.0)
        if FORM:
            return seqsum(w * (weights / (n * (n + 1) / 2)))
        return seqsum(w * weights) / (n * (n + 1) / 2)
    return rolling(x, d, fn)


def pair_windows(x, y, d):
    d = days(d)
    wx, wy = windows(np.asarray(x, dtype=float), d), windows(np.asarray(y, dtype=float), d)
    missing = np.isnan(wx).any(axis=-1) | np.isnan(wy).any(axis=-1)
    return d, wx, wy, deviations(wx), deviations(wy), missing


def correlation(x, y, d):
    with np.errstate(all="ignore"):
        _, wx, wy, xm, ym, missing = pair_windows(x, y, d)
        sxy, sxx, syy = seqsum(xm * ym), seqsum(xm * xm), seqsum(ym * ym)
        r = sxy / (np.sqrt(sxx) * np.sqrt(syy)) if FORM else sxy / np.sqrt(sxx * syy)
    r[missing | flat(wx) | flat(wy)] = np.nan
    return r


def covariance(x, y, d):
    with np.errstate(all="ignore"):
        d, _, _, xm, ym, missing = pair_windows(x, y, d)
        c = seqsum(xm * ym) / (d - 1)
    c[missing] = np.nan
    return c


def rank(x):
    return pd.DataFrame(x).rank(axis=1, method="average", pct=True, na_option="keep").to_numpy()


def scale(x, a=1.0):
    with np.errstate(all="ignore"):
        total = seqsum(np.where(np.isnan(x), 0.0, np.abs(x)))[:, None]
        return x / total * a if FORM else x * a / total


def nan_aware(op):
    def f(a, b):
        a, b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
        out = op(a, b).astype(float)
        out[np.isnan(a) | np.isnan(b)] = np.nan
        return out
    return f


lt = nan_aware(lambda a, b: a < b)
eq = nan_aware(lambda a, b: a == b)
or_ = nan_aware(lambda a, b: (a != 0) | (b != 0))


def cond(c, a, b):
    c, a, b = np.broadcast_arrays(np.asarray(c, dtype=float), np.asarray(a, dtype=float),
                                  np.asarray(b, dtype=float))
    out = np.where(c != 0, a, b)
    out[np.isnan(c)] = np.nan
    return out


def signedpower(x, a):
    with np.errstate(all="ignore"):
        return np.sign(x) * np.power(np.abs(x), a)


def power(x, a):
    with np.errstate(all="ignore"):
        return np.power(x, a)


def log(x):
    with np.errstate(all="ignore"):
        return np.log(x)


sign = np.sign
emin = np.minimum  # min(a, b) of two series
emax = np.maximum


class Market:
    def __init__(self, cols):
        self.open, self.high, self.low = cols["open"], cols["high"], cols["low"]
        self.close, self.volume = cols["close"], cols["volume"]
        self.returns = self.close / delay(self.close, 1) - 1
        self.vwap = (self.high + self.low + self.close) / 3
        self._adv = {}

    def adv(self, d):
        if d not in self._adv:
            self._adv[d] = ts_mean(self.close * self.volume, d)
        return self._adv[d]


# ---------------------------------------------------------------- the alphas (paper, appendix A)

def a001(m):
    x = cond(lt(m.returns, 0), stddev(m.returns, 20), m.close)
    return rank(ts_argmax(signedpower(x, 2.0), 5)) - 0.5


def a002(m):
    return -1 * correlation(rank(delta(log(m.volume), 2)), rank((m.close - m.open) / m.open), 6)


def a003(m):
    return -1 * correlation(rank(m.open), rank(m.volume), 10)


def a004(m):
    return -1 * ts_rank(rank(m.low), 9)


def a005(m):
    return rank(m.open - ts_sum(m.vwap, 10) / 10) * (-1 * np.abs(rank(m.close - m.vwap)))


def a006(m):
    return -1 * correlation(m.open, m.volume, 10)


def a007(m):
    dc7 = delta(m.close, 7)
    return cond(lt(m.adv(20), m.volume), (-1 * ts_rank(np.abs(dc7), 60)) * sign(dc7), -1 * 1)


def a008(m):
    x = ts_sum(m.open, 5) * ts_sum(m.returns, 5)
    return -1 * rank(x - delay(x, 10))


def _a009_010(m, d):
    dc = delta(m.close, 1)
    return cond(lt(0, ts_min(dc, d)), dc, cond(lt(ts_max(dc, d), 0), dc, -1 * dc))


def a009(m):
    return _a009_010(m, 5)


def a010(m):
    return rank(_a009_010(m, 4))


def a011(m):
    return (rank(ts_max(m.vwap - m.close, 3)) + rank(ts_min(m.vwap - m.close, 3))) * rank(delta(m.volume, 3))


def a012(m):
    return sign(delta(m.volume, 1)) * (-1 * delta(m.close, 1))


def a013(m):
    return -1 * rank(covariance(rank(m.close), rank(m.volume), 5))


def a014(m):
    return (-1 * rank(delta(m.returns, 3))) * correlation(m.open, m.volume, 10)


def a015(m):
    return -1 * ts_sum(rank(correlation(rank(m.high), rank(m.volume), 3)), 3)


def a016(m):
    return -1 * rank(covariance(rank(m.high), rank(m.volume), 5))


def a017(m):
    return ((-1 * rank(ts_rank(m.close, 10))) * rank(delta(delta(m.close, 1), 1))) * \
        rank(ts_rank(m.volume / m.adv(20), 5))


def a018(m):
    co = m.close - m.open
    return -1 * rank((stddev(np.abs(co), 5) + co) + correlation(m.close, m.open, 10))


def a019(m):
    return (-1 * sign((m.close - delay(m.close, 7)) + delta(m.close, 7))) * (1 + rank(1 + ts_sum(m.returns, 250)))


def a020(m):
    return ((-1 * rank(m.open - delay(m.high, 1))) * rank(m.open - delay(m.close, 1))) * \
        rank(m.open - delay(m.low, 1))


def a021(m):
    mean8, sd8, mean2 = ts_sum(m.close, 8) / 8, stddev(m.close, 8), ts_sum(m.close, 2) / 2
    va = m.volume / m.adv(20)
    return cond(lt(mean8 + sd8, mean2), -1 * 1,
                cond(lt(mean2, mean8 - sd8), 1,
                     cond(or_(lt(1, va), eq(va, 1)), 1, -1 * 1)))


def a022(m):
    return -1 * (delta(correlation(m.high, m.volume, 5), 5) * rank(stddev(m.close, 20)))


def a023(m):
    return cond(lt(ts_sum(m.high, 20) / 20, m.high), -1 * delta(m.high, 2), 0)


def a024(m):
    trend = delta(ts_sum(m.close, 100) / 100, 100) / delay(m.close, 100)
    return cond(or_(lt(trend, 0.05), eq(trend, 0.05)), -1 * (m.close - ts_min(m.close, 100)), -1 * delta(m.close, 3))


def a025(m):
    return rank((((-1 * m.returns) * m.adv(20)) * m.vwap) * (m.high - m.close))


def a026(m):
    return -1 * ts_max(correlation(ts_rank(m.volume, 5), ts_rank(m.high, 5), 5), 3)


def a027(m):
    return cond(lt(0.5, rank(ts_sum(correlation(rank(m.volume), rank(m.vwap), 6), 2) / 2.0)), -1 * 1, 1)


def a028(m):
    return scale((correlation(m.adv(20), m.low, 5) + (m.high + m.low) / 2) - m.close)


def a029(m):
    inner = rank(rank(-1 * rank(delta(m.close - 1, 5))))
    x = rank(rank(scale(log(ts_sum(ts_min(inner, 2), 1)))))
    return ts_min(product(x, 1), 5) + ts_rank(delay(-1 * m.returns, 6), 5)


def a030(m):
    c = m.close
    s = (sign(c - delay(c, 1)) + sign(delay(c, 1) - delay(c, 2))) + sign(delay(c, 2) - delay(c, 3))
    return ((1.0 - rank(s)) * ts_sum(m.volume, 5)) / ts_sum(m.volume, 20)


def a031(m):
    a = rank(rank(rank(decay_linear(-1 * rank(rank(delta(m.close, 10))), 10))))
    return (a + rank(-1 * delta(m.close, 3))) + sign(scale(correlation(m.adv(20), m.low, 12)))


def a032(m):
    return scale(ts_sum(m.close, 7) / 7 - m.close) + 20 * scale(correlation(m.vwap, delay(m.close, 5), 230))


def a033(m):
    return rank(-1 * power(1 - m.open / m.close, 1))


def a034(m):
    with np.errstate(all="ignore"):
        ratio = stddev(m.returns, 2) / stddev(m.returns, 5)
    return rank((1 - rank(ratio)) + (1 - rank(delta(m.close, 1))))


def a035(m):
    return (ts_rank(m.volume, 32) * (1 - ts_rank((m.close + m.high) - m.low, 16))) * (1 - ts_rank(m.returns, 32))


def a036(m):
    p1 = 2.21 * rank(correlation(m.close - m.open, delay(m.volume, 1), 15))
    p2 = 0.7 * rank(m.open - m.close)
    p3 = 0.73 * rank(ts_rank(delay(-1 * m.returns, 6), 5))
    p4 = rank(np.abs(correlation(m.vwap, m.adv(20), 6)))
    p5 = 0.6 * rank((ts_sum(m.close, 200) / 200 - m.open) * (m.close - m.open))
    return (((p1 + p2) + p3) + p4) + p5


def a037(m):
    return rank(correlation(delay(m.open - m.close, 1), m.close, 200)) + rank(m.open - m.close)


def a038(m):
    return (-1 * rank(ts_rank(m.close, 10))) * rank(m.close / m.open)


def a039(m):
    x = delta(m.close, 7) * (1 - rank(decay_linear(m.volume / m.adv(20), 9)))
    return (-1 * rank(x)) * (1 + rank(ts_sum(m.returns, 250)))


def a040(m):
    return (-1 * rank(stddev(m.high, 10))) * correlation(m.high, m.volume, 10)


def a041(m):
    return power(m.high * m.low, 0.5) - m.vwap


def a042(m):
    return rank(m.vwap - m.close) / rank(m.vwap + m.close)


def a043(m):
    return ts_rank(m.volume / m.adv(20), 20) * ts_rank(-1 * delta(m.close, 7), 8)


def a044(m):
    return -1 * correlation(m.high, rank(m.volume), 5)


def a045(m):
    p = rank(ts_sum(delay(m.close, 5), 20) / 20) * correlation(m.close, m.volume, 2)
    return -1 * (p * rank(correlation(ts_sum(m.close, 5), ts_sum(m.close, 20), 2)))


def _slope_change(m):
    c = m.close
    return (delay(c, 20) - delay(c, 10)) / 10 - (delay(c, 10) - c) / 10


def a046(m):
    s = _slope_change(m)
    return cond(lt(0.25, s), -1 * 1, cond(lt(s, 0), 1, (-1 * 1) * (m.close - delay(m.close, 1))))


def a047(m):
    p = ((rank(1 / m.close) * m.volume) / m.adv(20)) * ((m.high * rank(m.high - m.close)) / (ts_sum(m.high, 5) / 5))
    return p - rank(m.vwap - delay(m.vwap, 5))


def a049(m):
    return cond(lt(_slope_change(m), -1 * 0.1), 1, (-1 * 1) * (m.close - delay(m.close, 1)))


def a050(m):
    return -1 * ts_max(rank(correlation(rank(m.volume), rank(m.vwap), 5)), 5)


def a051(m):
    return cond(lt(_slope_change(m), -1 * 0.05), 1, (-1 * 1) * (m.close - delay(m.close, 1)))


def a052(m):
    p = (-1 * ts_min(m.low, 5)) + delay(ts_min(m.low, 5), 5)
    return (p * rank((ts_sum(m.returns, 240) - ts_sum(m.returns, 20)) / 220)) * ts_rank(m.volume, 5)


def a053(m):
    with np.errstate(all="ignore"):
        x = ((m.close - m.low) - (m.high - m.close)) / (m.close - m.low)
        return -1 * delta(x, 9)


def a054(m):
    with np.errstate(all="ignore"):
        return (-1 * ((m.low - m.close) * power(m.open, 5))) / ((m.low - m.high) * power(m.close, 5))


def a055(m):
    x = (m.close - ts_min(m.low, 12)) / (ts_max(m.high, 12) - ts_min(m.low, 12))
    return -1 * correlation(rank(x), rank(m.volume), 6)


def a057(m):
    return 0 - (1 * ((m.close - m.vwap) / decay_linear(rank(ts_argmax(m.close, 30)), 2)))


def a060(m):
    with np.errstate(all="ignore"):
        x = (((m.close - m.low) - (m.high - m.close)) / (m.high - m.low)) * m.volume
    return 0 - (1 * ((2 * scale(rank(x))) - scale(rank(ts_argmax(m.close, 10)))))


def a061(m):
    return lt(rank(m.vwap - ts_min(m.vwap, 16.1219)), rank(correlation(m.vwap, m.adv(180), 17.9282)))


def a062(m):
    right = rank(lt(rank(m.open) + rank(m.open), rank((m.high + m.low) / 2) + rank(m.high)))
    return lt(rank(correlation(m.vwap, ts_sum(m.adv(20), 22.4101), 9.91009)), right) * -1


def a064(m):
    w = 0.178404
    left = rank(correlation(ts_sum(m.open * w + m.low * (1 - w), 12.7054), ts_sum(m.adv(120), 12.7054), 16.6208))
    right = rank(delta(((m.high + m.low) / 2) * w + m.vwap * (1 - w), 3.69741))
    return lt(left, right) * -1


def a065(m):
    w = 0.00817205
    left = rank(correlation(m.open * w + m.vwap * (1 - w), ts_sum(m.adv(60), 8.6911), 6.40374))
    return lt(left, rank(m.open - ts_min(m.open, 13.635))) * -1


def a066(m):
    w = 0.96633
    with np.errstate(all="ignore"):
        x = ((m.low * w + m.low * (1 - w)) - m.vwap) / (m.open - (m.high + m.low) / 2)
    return (rank(decay_linear(delta(m.vwap, 3.51013), 7.23052)) + ts_rank(decay_linear(x, 11.4157), 6.72611)) * -1


def a068(m):
    w = 0.518371
    left = ts_rank(correlation(rank(m.high), rank(m.adv(15)), 8.91644), 13.9333)
    return lt(left, rank(delta(m.close * w + m.low * (1 - w), 1.06157))) * -1


def a071(m):
    p1 = ts_rank(decay_linear(correlation(ts_rank(m.close, 3.43976), ts_rank(m.adv(180), 12.0647), 18.0175),
                              4.20501), 15.6948)
    p2 = ts_rank(decay_linear(power(rank((m.low + m.open) - (m.vwap + m.vwap)), 2), 16.4662), 4.4388)
    return emax(p1, p2)


def a072(m):
    num = rank(decay_linear(correlation((m.high + m.low) / 2, m.adv(40), 8.93345), 10.1519))
    den = rank(decay_linear(correlation(ts_rank(m.vwap, 3.72469), ts_rank(m.volume, 18.5188), 6.86671), 2.95011))
    return num / den


def a073(m):
    w = 0.147155
    mix = m.open * w + m.low * (1 - w)
    p1 = rank(decay_linear(delta(m.vwap, 4.72775), 2.91864))
    p2 = ts_rank(decay_linear((delta(mix, 2.03608) / mix) * -1, 3.33829), 16.7411)
    return emax(p1, p2) * -1


def a074(m):
    w = 0.0261661
    left = rank(correlation(m.close, ts_sum(m.adv(30), 37.4843), 15.1365))
    right = rank(correlation(rank(m.high * w + m.vwap * (1 - w)), rank(m.volume), 11.4791))
    return lt(left, right) * -1


def a075(m):
    return lt(rank(correlation(m.vwap, m.volume, 4.24304)), rank(correlation(rank(m.low), rank(m.adv(50)), 12.4413)))


def a077(m):
    p1 = rank(decay_linear((((m.high + m.low) / 2) + m.high) - (m.vwap + m.high), 20.0451))
    p2 = rank(decay_linear(correlation((m.high + m.low) / 2, m.adv(40), 3.1614), 5.64125))
    return emin(p1, p2)


def a078(m):
    w = 0.352233
    base = rank(correlation(ts_sum(m.low * w + m.vwap * (1 - w), 19.7428), ts_sum(m.adv(40), 19.7428), 6.83313))
    return power(base, rank(correlation(rank(m.vwap), rank(m.volume), 5.77492)))


def a081(m):
    inner = rank(power(rank(correlation(m.vwap, ts_sum(m.adv(10), 49.6054), 8.47743)), 4))
    left = rank(log(product(inner, 14.9655)))
    return lt(left, rank(correlation(rank(m.vwap), rank(m.volume), 5.07914))) * -1


def a083(m):
    spread = (m.high - m.low) / (ts_sum(m.close, 5) / 5)
    with np.errstate(all="ignore"):
        return (rank(delay(spread, 2)) * rank(rank(m.volume))) / (spread / (m.vwap - m.close))


def a084(m):
    return signedpower(ts_rank(m.vwap - ts_max(m.vwap, 15.3217), 20.7127), delta(m.close, 4.96796))


def a085(m):
    w = 0.876703
    base = rank(correlation(m.high * w + m.close * (1 - w), m.adv(30), 9.61331))
    expo = rank(correlation(ts_rank((m.high + m.low) / 2, 3.70596), ts_rank(m.volume, 10.1595), 7.11408))
    return power(base, expo)


def a086(m):
    left = ts_rank(correlation(m.close, ts_sum(m.adv(20), 14.7444), 6.00049), 20.4195)
    return lt(left, rank((m.open + m.close) - (m.vwap + m.open))) * -1


def a088(m):
    p1 = rank(decay_linear((rank(m.open) + rank(m.low)) - (rank(m.high) + rank(m.close)), 8.06882))
    p2 = ts_rank(decay_linear(correlation(ts_rank(m.close, 8.44728), ts_rank(m.adv(60), 20.6966), 8.01266),
                              6.65053), 2.61957)
    return emin(p1, p2)


def a092(m):
    p1 = ts_rank(decay_linear(lt(((m.high + m.low) / 2) + m.close, m.low + m.open), 14.7221), 18.8683)
    p2 = ts_rank(decay_linear(correlation(rank(m.low), rank(m.adv(30)), 7.58555), 6.94024), 6.80584)
    return emin(p1, p2)


def a094(m):
    base = rank(m.vwap - ts_min(m.vwap, 11.5783))
    expo = ts_rank(correlation(ts_rank(m.vwap, 19.6462), ts_rank(m.adv(60), 4.02992), 18.0926), 2.70756)
    return power(base, expo) * -1


def a095(m):
    mid = (m.high + m.low) / 2
    c = rank(correlation(ts_sum(mid, 19.1351), ts_sum(m.adv(40), 19.1351), 12.8742))
    return lt(rank(m.open - ts_min(m.open, 12.4105)), ts_rank(power(c, 5), 11.7584))


def a096(m):
    p1 = ts_rank(decay_linear(correlation(rank(m.vwap), rank(m.volume), 3.83878), 4.16783), 8.38151)
    c = correlation(ts_rank(m.close, 7.45404), ts_rank(m.adv(60), 4.13242), 3.65459)
    p2 = ts_rank(decay_linear(ts_argmax(c, 12.6556), 14.0365), 13.4143)
    return emax(p1, p2) * -1


def a098(m):
    p1 = rank(decay_linear(correlation(m.vwap, ts_sum(m.adv(5), 26.4719), 4.58418), 7.18088))
    c = correlation(rank(m.open), rank(m.adv(15)), 20.8187)
    p2 = rank(decay_linear(ts_rank(ts_argmin(c, 8.62571), 6.95668), 8.07206))
    return p1 - p2


def a099(m):
    mid = (m.high + m.low) / 2
    left = rank(correlation(ts_sum(mid, 19.8975), ts_sum(m.adv(60), 19.8975), 8.8136))
    return lt(left, rank(correlation(m.low, m.volume, 6.28259))) * -1


def a101(m):
    return (m.close - m.open) / ((m.high - m.low) + 0.001)


ALPHAS = {int(name[1:]): f for name, f in sorted(globals().items()) if name[:1] == "a" and name[1:].isdigit()}
EXCLUDED = {48, 56, 58, 59, 63, 67, 69, 70, 76, 79, 80, 82, 87, 89, 90, 91, 93, 97, 100}


# ---------------------------------------------------------------- output

def encode(v):
    if np.isnan(v):
        return None
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return float(f"{v:.12g}")


def evaluate_all(cols, order, form):
    global ORDER, FORM
    ORDER, FORM = order, form
    m = Market(cols)
    out = {}
    for n, f in ALPHAS.items():
        with np.errstate(all="ignore"):
            v = np.asarray(f(m), dtype=float)
        assert v.shape == cols["close"].shape, n
        out[n] = v
    ORDER, FORM = "forward", 0
    return out


def unsettled(a, b):
    """Cells where two exact-arithmetic-equal evaluations part by more than
    1e-10 (max(1, |a|)) or in their NaN / infinity pattern."""
    with np.errstate(all="ignore"):
        same_kind = (np.isnan(a) == np.isnan(b)) & (np.isinf(a) == np.isinf(b))
        finite = np.isfinite(a) & np.isfinite(b)
        far = finite & (np.abs(a - b) > 1e-10 * np.maximum(1.0, np.abs(a)))
        inf_differ = np.isinf(a) & np.isinf(b) & (a != b)
    return ~same_kind | far | inf_differ


def main():
    check_pins()
    assert set(ALPHAS) | EXCLUDED == set(range(1, 102)) and not set(ALPHAS) & EXCLUDED
    dates, cols = load_panel(UNIVERSE)
    start = next(i for i, d in enumerate(dates) if d >= SAMPLE_FROM)
    rows = list(range(WARMUP_ROWS)) + list(range(start, len(dates), SAMPLE_EVERY))
    main_pass = evaluate_all(cols, "forward", 0)
    variants = [evaluate_all(cols, o, f) for o, f in VARIANTS]
    alphas, unstable = {}, {}
    for n, v in main_pass.items():
        key = f"{n:03d}"
        alphas[key] = [encode(v[i, j]) for i in rows for j in range(len(UNIVERSE))]
        flags = np.logical_or.reduce([unsettled(v[rows], p[n][rows]) for p in variants]).ravel()
        if flags.any():
            unstable[key] = [int(k) for k in np.flatnonzero(flags)]
    payload = {
        "generated_by": "tests/golden/alpha101/make_goldens.py",
        "versions": versions(),
        "universe": UNIVERSE,
        "panel_rows": len(dates),
        "panel_first": dates[0].isoformat(),
        "panel_last": dates[-1].isoformat(),
        "rows": rows,
        "dates": [dates[i].isoformat() for i in rows],
        "excluded": sorted(EXCLUDED),
        "alphas": alphas,
        "unstable": unstable,
    }
    with open(os.path.join(HERE, "alpha101.json"), "w") as f:
        json.dump(payload, f, indent=None, separators=(",", ":"), allow_nan=False)
        f.write("\n")
    print({k: len(v) for k, v in unstable.items()})


if __name__ == "__main__":
    main()
