#!/usr/bin/env python3
"""vectorbt's side of `cargo bench --bench sweep` (docs §18.6).

Reads the inputs the Rust bench wrote in DIR: `open.f64` and `close.f64`
(little-endian float64, symbol after symbol, HISTORY + BARS bars each) and
`inputs.json` (the grid's (fast, slow) pairs in the plan's order, fees,
initial cash). Runs the grid the way vectorbt is used for it: every moving
average once (`vbt.MA.run` over all lengths), one column per (pair,
symbol), `Portfolio.from_signals` with the whole cash on each entry, filled
at the next bar's open (the signal of bar t-1 is traded at bar t's open,
the first bar on the last signal before the window, as the engine does).
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
S, B, H = INP["symbols"], INP["bars"], INP["history"]
FEES, CASH = INP["fees"], INP["init_cash"]
COMBOS = [(int(f), int(s)) for f, s in INP["combos"]]


def load(name):
    return np.fromfile(os.path.join(DIR, name + ".f64"), dtype="<f8").reshape(S, H + B).T.copy()


OPEN, CLOSE = load("open"), load("close")


def grid():
    windows = sorted({w for pair in COMBOS for w in pair})
    ma = vbt.MA.run(pd.DataFrame(CLOSE), window=windows).ma.values
    ma = ma.reshape(H + B, len(windows), S)
    at = {w: i for i, w in enumerate(windows)}
    c = len(COMBOS)
    # Column c*S + s: pair c on symbol s.
    signal = np.empty((H + B, c * S), dtype=bool)
    for k, (f, s) in enumerate(COMBOS):
        signal[:, k * S:(k + 1) * S] = ma[:, at[f], :] > ma[:, at[s], :]
    target = signal[H - 1:H + B - 1]
    close = np.tile(CLOSE[H:], (1, c))
    pf = vbt.Portfolio.from_signals(
        close, target, ~target, price=np.tile(OPEN[H:], (1, c)),
        fees=FEES, init_cash=CASH, size=np.inf)
    final = pf.final_value().values - pf.assets().values[-1] * close[-1] * FEES
    return final


t = time.perf_counter()
first = grid()
first_seconds = time.perf_counter() - t
warm = float("inf")
for _ in range(2):
    t = time.perf_counter()
    final = grid()
    warm = min(warm, time.perf_counter() - t)

# The plan numbers cells symbol-major: cell = symbol * pairs + pair.
c = len(COMBOS)
by_cell = final.reshape(c, S).T.reshape(-1)
print(json.dumps({
    "version": vbt.__version__,
    "first_seconds": first_seconds,
    "warm_seconds": warm,
    "final_values": [float(x) for x in by_cell],
}))
