#!/usr/bin/env python3
"""vectorbt's side of `cargo bench --bench sweep` (docs §18.6).

Reads the inputs the Rust bench wrote in DIR: `open.f64` and `close.f64`
(little-endian float64, symbol after symbol, HISTORY bars before the window
then the symbol's bars in it) and `inputs.json` (each symbol's bars in the
window, the grid's (fast, slow) pairs in the plan's order, fees, initial
cash). Runs the grid the way vectorbt is used for it: every moving average
once (`vbt.MA.run` over all lengths), one column per (pair, symbol),
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
LENS, H = INP["bars"], INP["history"]
FEES, CASH = INP["fees"], INP["init_cash"]
COMBOS = [(int(f), int(s)) for f, s in INP["combos"]]
S = len(LENS)


def load(name):
    flat = np.fromfile(os.path.join(DIR, name + ".f64"), dtype="<f8")
    out, at = [], 0
    for n in LENS:
        out.append(flat[at:at + H + n])
        at += H + n
    return out


OPEN, CLOSE = load("open"), load("close")
# Symbols by window length: each group is one matrix.
GROUPS = {}
for i, n in enumerate(LENS):
    GROUPS.setdefault(n, []).append(i)


def grid(members):
    b = LENS[members[0]]
    close_all = np.column_stack([CLOSE[i] for i in members])
    open_all = np.column_stack([OPEN[i] for i in members])
    s = len(members)
    windows = sorted({w for pair in COMBOS for w in pair})
    ma = vbt.MA.run(pd.DataFrame(close_all), window=windows).ma.values
    ma = ma.reshape(H + b, len(windows), s)
    at = {w: i for i, w in enumerate(windows)}
    c = len(COMBOS)
    # Column k*s + j: pair k on the group's symbol j.
    signal = np.empty((H + b, c * s), dtype=bool)
    for k, (f, sl) in enumerate(COMBOS):
        signal[:, k * s:(k + 1) * s] = ma[:, at[f], :] > ma[:, at[sl], :]
    target = signal[H - 1:H + b - 1]
    close = np.tile(close_all[H:], (1, c))
    pf = vbt.Portfolio.from_signals(
        close, target, ~target, price=np.tile(open_all[H:], (1, c)),
        fees=FEES, init_cash=CASH, size=np.inf)
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
