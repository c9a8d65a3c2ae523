#!/usr/bin/env python3
"""The reference side of `cargo bench --bench stats` (docs §16.8).

Reads the inputs the Rust bench wrote (raw little-endian f64 arrays in DIR,
shapes in DIR/shapes.json), times the same computations with statsmodels and
arch, and prints one JSON object of seconds (and results for the bench to
check that both sides computed the same thing):

- ADF with autolag: statsmodels.tsa.stattools.adfuller(x, regression="c",
  autolag="AIC") on 2,520 log closes;
- Engle-Granger: statsmodels.tsa.stattools.coint(y0, y1, trend="c",
  autolag="aic") on a fixed sample of the 8,515 pairs of the 131 instruments
  (every SAMPLE_EVERY-th pair in the order i < j), timed once and scaled to
  all pairs (`coint_all_scaled`): the whole set takes minutes;
- GARCH(1,1): arch.arch_model(y, mean="Constant", vol="GARCH", p=1, q=1,
  dist="normal").fit(disp="off") on 2,520 returns in percent, and the same
  with dist="t";
- Johansen: statsmodels.tsa.vector_ar.vecm.coint_johansen(x, 0, 1) on 2,520
  log closes of three series.

The bench runs this with OPENBLAS_NUM_THREADS=1 (one core, as ours).
Usage: stats.py DIR (with the packages of tests/golden/stats/requirements.txt).
"""

import json
import os
import sys
import time
import warnings

import numpy as np
from arch import arch_model
from statsmodels.tsa.stattools import adfuller, coint
from statsmodels.tsa.vector_ar.vecm import coint_johansen

warnings.simplefilter("ignore")
DIR = sys.argv[1]
SHAPES = json.load(open(os.path.join(DIR, "shapes.json")))


def load(name):
    return np.fromfile(os.path.join(DIR, name + ".f64"), dtype="<f8").reshape(SHAPES[name])


def best(f, repeat):
    times = []
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return min(times), out


def main():
    levels = load("levels")
    pct = load("pct")
    panel = load("panel")
    every = SHAPES["sample_every"]
    out = {}

    t, r = best(lambda: adfuller(levels, regression="c", autolag="AIC", result_object=False), 7)
    out["adf"] = t
    out["adf_statistic"] = float(r[0])

    n = panel.shape[0]
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    sample = pairs[::every]
    t0 = time.perf_counter()
    stats = [float(coint(panel[i], panel[j], trend="c", autolag="aic")[0]) for i, j in sample]
    t = time.perf_counter() - t0
    out["coint_sample"] = t
    out["coint_sample_pairs"] = len(sample)
    out["coint_all_scaled"] = t * len(pairs) / len(sample)
    out["coint_sample_statistics"] = stats

    def fit():
        return arch_model(pct, mean="Constant", vol="GARCH", p=1, q=1, dist="normal").fit(disp="off")

    t, res = best(fit, 7)
    out["garch"] = t
    out["garch_loglik"] = float(res.loglikelihood)

    def fit_t():
        return arch_model(pct, mean="Constant", vol="GARCH", p=1, q=1, dist="t").fit(disp="off")

    t, res = best(fit_t, 7)
    out["garch_t"] = t
    out["garch_t_loglik"] = float(res.loglikelihood)

    basket = load("basket").T.copy()
    t, res = best(lambda: coint_johansen(basket, 0, 1), 7)
    out["johansen"] = t
    out["johansen_trace"] = [float(v) for v in res.lr1]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
