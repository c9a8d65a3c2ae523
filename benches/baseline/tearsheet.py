#!/usr/bin/env python3
"""The quantstats side of `cargo bench --bench tearsheet` (docs §20.1).

Reads the inputs the Rust bench wrote (raw little-endian f64 arrays in DIR,
the dates and shapes in DIR/meta.json) and times, best of five, with the
prepare_returns cache emptied before each run:

- book: the 100-symbol book's daily returns (numpy, weights x returns summed
  by day), reports.metrics(mode="full", display=False) against the benchmark,
  and stats.drawdown_details of its drawdown series;
- single: reports.metrics(mode="full") of one series against the benchmark
  and its drawdown_details.

Prints one JSON object: seconds and the strategy's Sharpe (for the bench to
check both computed on the same numbers).

Usage: tearsheet.py DIR (with the packages of
tests/golden/tearsheet/requirements.txt).
"""

import json
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd
import quantstats as qs

warnings.filterwarnings("ignore")
DIR = sys.argv[1]
META = json.load(open(os.path.join(DIR, "meta.json")))
DAYS, SYMBOLS = META["days"], META["symbols"]
INDEX = pd.DatetimeIndex(pd.to_datetime(META["dates"]))


def load(name, shape):
    return np.fromfile(os.path.join(DIR, name + ".f64"), dtype="<f8").reshape(shape)


def sheet(r, b):
    qs.reports.metrics(r, benchmark=b, mode="full", display=False)
    qs.stats.drawdown_details(qs.stats.to_drawdown_series(r))
    return qs.stats.sharpe(r)


def best(f, repeat=5):
    times, out = [], None
    for _ in range(repeat):
        qs.utils._PREPARE_RETURNS_CACHE.clear()
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return min(times), out


rets = load("returns", (DAYS, SYMBOLS))
weights = load("weights", (DAYS, SYMBOLS))
bench = pd.Series(load("benchmark", (DAYS,)), index=INDEX)
single = pd.Series(load("single", (DAYS,)), index=INDEX)


def book():
    r = pd.Series((rets * weights).sum(axis=1), index=INDEX)
    return sheet(r, bench)


t_book, s_book = best(book)
t_single, s_single = best(lambda: sheet(single, bench))
print(json.dumps({
    "book": {"seconds": t_book, "sharpe": float(s_book)},
    "single": {"seconds": t_single, "sharpe": float(s_single)},
}))
