#!/usr/bin/env python3
"""The pandas + alphalens side of `cargo bench --bench factor_screen`.

Reads meta.json from the directory given (tickers, window, horizons,
quantiles, the alphas to time), loads the offline market with the alpha
goldens' loader, evaluates those alphas with the goldens' pandas
implementations (tests/golden/alpha101/make_goldens.py, written from the
paper), then reads each as alphalens-reloaded does:
get_clean_factor_and_forward_returns (periods = the horizons, quantiles),
factor_information_coefficient, mean_return_by_quantile and
factor_rank_autocorrelation. Prints JSON: seconds evaluating, seconds in
alphalens, and each alpha's rank IC at horizon 1, its mean and per date
(the dates alphalens kept), so the bench can compare the work date by date.
"""

import contextlib
import json
import os
import sys
import time
import warnings
from importlib.metadata import version

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "golden", "alpha101"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import alphalens as al  # noqa: E402
import make_goldens as mg  # noqa: E402

PINS = {"alphalens-reloaded": "0.5.1", "pandas": "3.1.1", "numpy": "2.4.6", "scipy": "1.17.1"}


def main():
    bad = {p: version(p) for p in PINS if version(p) != PINS[p]}
    if bad:
        sys.exit(f"pinned versions {PINS} are required, found {bad}")
    warnings.filterwarnings("ignore")
    meta = json.load(open(os.path.join(sys.argv[1], "meta.json")))
    tickers, periods = meta["tickers"], tuple(meta["horizons"])
    dates, cols = mg.load_panel(tickers)
    index = pd.DatetimeIndex(pd.to_datetime([d.isoformat() for d in dates]))
    prices = pd.DataFrame(cols["close"], index=index, columns=tickers)
    window = (index >= pd.Timestamp(meta["start"])) & (index <= pd.Timestamp(meta["end"]))

    t0 = time.perf_counter()
    m = mg.Market(cols)
    values = {}
    with np.errstate(all="ignore"):
        for n in meta["alphas"]:
            values[n] = np.asarray(mg.ALPHAS[n](m), dtype=float)
    t_eval = time.perf_counter() - t0

    t0 = time.perf_counter()
    rank_ic_1, daily_1 = {}, {}
    for n, v in values.items():
        factor = pd.DataFrame(v, index=index, columns=tickers)[window].stack()
        factor.index.names = ["date", "asset"]
        # alphalens prints its losses; stdout carries the JSON.
        with contextlib.redirect_stdout(sys.stderr):
            clean = al.utils.get_clean_factor_and_forward_returns(
                factor, prices, periods=periods, quantiles=meta["quantiles"], max_loss=1.0
            )
        ic = al.performance.factor_information_coefficient(clean)
        al.performance.mean_return_by_quantile(clean)
        al.performance.factor_rank_autocorrelation(clean)
        first = ic.iloc[:, 0].dropna()
        rank_ic_1[f"alpha{n:03d}"] = float(first.mean())
        daily_1[f"alpha{n:03d}"] = {d.date().isoformat(): float(v) for d, v in first.items()}
    t_screen = time.perf_counter() - t0
    json.dump({"alphas": meta["alphas"], "evaluate": t_eval, "screen": t_screen,
               "rank_ic_1": rank_ic_1, "rank_ic_1_daily": daily_1}, sys.stdout)


if __name__ == "__main__":
    main()
