#!/usr/bin/env python3
"""vectorbt's side of `cargo bench --bench sweep` (docs §18.6).

Reads the inputs the Rust bench wrote in DIR: `open.f64` and `close.f64`
(little-endian float64, symbol after symbol, all the symbol's history
before the window then its bars in it) and `inputs.json` (each symbol's
bars in the window and before it, the grid's (fast, slow) pairs in the
plan's order, fees, initial cash). Runs the grid the way vectorbt is used for it: every moving average
once (pandas' rolling mean on the whole history, as the engine's SMA;
vectorbt's `MA.run` sums in another order, which flips a crossover where
the two averages are exactly equal), one column per (pair, symbol),
`Portfolio.from_signals` with the whole cash on each entry, filled at the
bar's open on the previous bar's signal (the first bar on the last signal
before the window, as the engine does). Symbols with as many bars go
together (the offline set's ETFs lack a day its stocks have).

Prints one JSON object: the first call's seconds (with numba's JIT), the
best warm call's, and each cell's final value in the plan's cell order
(symbol-major), less the fee of closing what is held at the last close (the
engine closes every position there).

Usage: sweep.py DIR (with the packages of sweep-requirements.txt).
"""

import json
import os
import sys
import time

import numpy as np
import pandas as pd
import vectorbt as vbt

DIR = sys.argv[1]
INP = json.load(open(os.path.join(DIR, "inputs.json")))
LENS, HIST = INP["bars"], INP["history"]
FEES, CASH = INP["fees"], INP["init_cash"]
COMBOS = [(int(f), int(s)) for f, s in INP["combos"]]
S = len(LENS)


def load(name):
    flat = np.fromfile(os.path.join(DIR, name + ".f64"), dtype="<f8")
    out, at = [], 0
    for h, n in zip(HIST, LENS):
        out.append(flat[at:at + h + n])
        at += h + n
    return out


OPEN, CLOSE = load("open"), load("close")
# Symbols by window length: each group is one matrix.
GROUPS = {}
for i, n in enumerate(LENS):
    GROUPS.setdefault(n, []).append(i)


def grid(members):
    b = LENS[members[0]]
    s = len(members)
    windows = sorted({w for pair in COMBOS for w in pair})
    at = {w: i for i, w in enumerate(windows)}
    # pandas' rolling means on each symbol's whole history (the engine's
    # SMA is pandas' to the bit; vectorbt's MA.run sums in another order,
    # which flips a crossover where the two averages are exactly equal),
    # from the bar before the window to its last.
    ma = np.empty((b + 1, len(windows), s))
    for j, i in enumerate(members):
        h, series = HIST[i], pd.Series(CLOSE[i])
        for w in windows:
            ma[:, at[w], j] = series.rolling(w).mean().values[h - 1:h + b]
    c = len(COMBOS)
    # Column k*s + j: pair k on the group's symbol j.
    signal = np.empty((b + 1, c * s), dtype=bool)
    for k, (f, sl) in enumerate(COMBOS):
        signal[:, k * s:(k + 1) * s] = ma[:, at[f], :] > ma[:, at[sl], :]
    target = signal[:-1]
    close = np.tile(np.column_stack([CLOSE[i][HIST[i]:] for i in members]), (1, c))
    price = np.tile(np.column_stack([OPEN[i][HIST[i]:] for i in members]), (1, c))
    pf = vbt.Portfolio.from_signals(
        close, target, ~target, price=price, fees=FEES, init_cash=CASH, size=np.inf)
    final = pf.final_value().values - pf.assets().values[-1] * close[-1] * FEES
    return final.reshape(c, s)


def all_groups():
    out = np.empty((len(COMBOS), S))
    for members in GROUPS.values():
        out[:, members] = grid(members)
    return out


t = time.perf_counter()
all_groups()
first_seconds = time.perf_counter() - t
warm = float("inf")
for _ in range(2):
    t = time.perf_counter()
    final = all_groups()
    warm = min(warm, time.perf_counter() - t)

# The plan numbers cells symbol-major: cell = symbol * pairs + pair.
print(json.dumps({
    "version": vbt.__version__,
    "first_seconds": first_seconds,
    "warm_seconds": warm,
    "final_values": [float(x) for x in final.T.reshape(-1)],
}))
