#!/usr/bin/env python3
"""vectorbt's side of `cargo bench --bench sweep` (docs §18.6).

Reads the inputs the Rust bench wrote in DIR: `open.f64` and `close.f64`
(little-endian float64, symbol after symbol, all the symbol's history
before the window then its bars in it) and `inputs.json` (each symbol's
bars in the window and before it, the grid's (fast, slow) pairs in the
plan's order, fees, initial cash). Runs the grid two ways, each then one
`Portfolio.from_signals` over every (pair, symbol) column with the whole
cash on each entry, filled at the bar's open on the previous bar's signal
(the first bar on the last signal before the window, as the engine does):

- vectorised: vectorbt's own idiom, `vbt.MA.run` once for every window
  on the symbols' matrix of closes (each symbol's whole history);
- per window: pandas' rolling mean, symbol by symbol and window by window
  (the engine's SMA is pandas' to the bit; `MA.run` sums in another
  order, which flips a crossover where the two averages are exactly
  equal, so the bench checks every final value against this one).

Symbols with as many bars go together (the offline set's ETFs lack a day
its stocks have).

Prints one JSON object: for each way, the first call's seconds (with
numba's JIT), the best warm call's, and each cell's final value in the
plan's cell order (symbol-major), less the fee of closing what is held at
the last close (the engine closes every position there).

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


WINDOWS = sorted({w for pair in COMBOS for w in pair})
AT = {w: i for i, w in enumerate(WINDOWS)}


def loop_averages(members, b):
    """pandas' rolling means, symbol by symbol and window by window, from
    the bar before the window to its last: (b + 1, windows, symbols)."""
    ma = np.empty((b + 1, len(WINDOWS), len(members)))
    for j, i in enumerate(members):
        h, series = HIST[i], pd.Series(CLOSE[i])
        for w in WINDOWS:
            ma[:, AT[w], j] = series.rolling(w).mean().values[h - 1:h + b]
    return ma


def vectorised_averages(members, b):
    """`vbt.MA.run` once, every window on the symbols' closes (their
    histories aligned at the window's start, NaN before a shorter one)."""
    top = max(HIST[i] for i in members)
    close = np.full((top + b, len(members)), np.nan)
    for j, i in enumerate(members):
        close[top - HIST[i]:, j] = CLOSE[i]
    ma = vbt.MA.run(close, window=WINDOWS).ma.values
    # Columns window-major: window k's symbols are k*s .. (k+1)*s.
    return ma[top - 1:].reshape(b + 1, len(WINDOWS), len(members))


def grid(members, averages):
    b = LENS[members[0]]
    s = len(members)
    ma = averages(members, b)
    c = len(COMBOS)
    # Column k*s + j: pair k on the group's symbol j.
    signal = np.empty((b + 1, c * s), dtype=bool)
    for k, (f, sl) in enumerate(COMBOS):
        signal[:, k * s:(k + 1) * s] = ma[:, AT[f], :] > ma[:, AT[sl], :]
    target = signal[:-1]
    close = np.tile(np.column_stack([CLOSE[i][HIST[i]:] for i in members]), (1, c))
    price = np.tile(np.column_stack([OPEN[i][HIST[i]:] for i in members]), (1, c))
    pf = vbt.Portfolio.from_signals(
        close, target, ~target, price=price, fees=FEES, init_cash=CASH, size=np.inf)
    final = pf.final_value().values - pf.assets().values[-1] * close[-1] * FEES
    return final.reshape(c, s)


def all_groups(averages):
    out = np.empty((len(COMBOS), S))
    for members in GROUPS.values():
        out[:, members] = grid(members, averages)
    return out


def timed(averages):
    t = time.perf_counter()
    all_groups(averages)
    first_seconds = time.perf_counter() - t
    warm = float("inf")
    for _ in range(2):
        t = time.perf_counter()
        final = all_groups(averages)
        warm = min(warm, time.perf_counter() - t)
    # The plan numbers cells symbol-major: cell = symbol * pairs + pair.
    return {
        "first_seconds": first_seconds,
        "warm_seconds": warm,
        "final_values": [float(x) for x in final.T.reshape(-1)],
    }


# The vectorised idiom first: its first call pays numba's JIT of the
# portfolio, which the per-window way then finds compiled.
vectorised = timed(vectorised_averages)
per_window = timed(loop_averages)
print(json.dumps({
    "version": vbt.__version__,
    "vectorised": vectorised,
    "per_window": per_window,
}))
