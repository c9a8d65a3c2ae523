#!/usr/bin/env python3
"""Goldens for vibedesk's purged cross-validation (docs §18.9).

Writes splits.json next to this file; tests/engine/validation_goldens.rs reads
it and needs no Python.

    python3 -m venv /tmp/vvenv
    /tmp/vvenv/bin/pip install -r tests/golden/validation/requirements.txt
    /tmp/vvenv/bin/python tests/golden/validation/make_goldens.py

A reference written from the definitions in López de Prado, *Advances in
Financial Machine Learning* (2018):

- ch. 7: observations on a business-day index, each with its label's end time
  t1 (a pandas Series, index = the observation's time). Test groups are cut by
  numpy.array_split. Training times are what remains of t1 after dropping, for
  every test interval [i, j], the observations that start in it, end in it, or
  envelop it (getTrainTimes); the test intervals' ends are first moved
  `step` observations later (getEmbargoTimes: step = the embargo in
  observations, or int(n * pct); the last `step` times map to the last time).
  A test group's interval runs from its first observation's time to its
  labels' latest end.
- ch. 12: CPCV(N, k) tests every k of N groups (itertools.combinations order);
  each group is tested phi = C(N-1, k-1) times, and path p takes, for every
  group, the p-th split testing it.
- PBO (Bailey, Borwein, Lopez de Prado & Zhu): per split, the configuration
  with the best in-sample Sharpe (mean / std, ddof 1) and its out-of-sample
  relative rank w = rank / (N + 1) (ties averaged), logit ln(w / (1 - w));
  PBO is the share of logits <= 0.

Label ends come from a horizon h (t1 = the time h observations later, capped
at the last), or, for some cases, from seeded random horizons (as a triple
barrier's first touch gives). Everything is seeded, so a rerun with the same
versions writes the same file.
"""

import itertools
import json
import os
from importlib.metadata import version

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))


def get_train_times(t1, test_times):
    """AFML snippet 7.1's rule, from its definition."""
    trn = t1.copy(deep=True)
    for i, j in test_times.items():
        starts_within = trn[(i <= trn.index) & (trn.index <= j)].index
        ends_within = trn[(i <= trn) & (trn <= j)].index
        envelops = trn[(trn.index <= i) & (j <= trn)].index
        trn = trn.drop(starts_within.union(ends_within).union(envelops))
    return trn


def get_embargo_times(times, step):
    """AFML snippet 7.2's map: each time to the time `step` observations on."""
    if step == 0:
        return pd.Series(times, index=times)
    mbrg = pd.Series(times[step:], index=times[:-step])
    tail = pd.Series(times[-1], index=times[-step:])
    return pd.concat([mbrg, tail])


def splits_of(t1, groups, test_groups, step):
    times = t1.index
    n = len(times)
    cut = np.array_split(np.arange(n), groups)
    mbrg = get_embargo_times(times, step)
    out = []
    for chosen in itertools.combinations(range(groups), test_groups):
        test = np.concatenate([cut[g] for g in chosen])
        starts = [times[cut[g][0]] for g in chosen]
        ends = [mbrg[t1.iloc[cut[g]].max()] for g in chosen]
        test_times = pd.Series(ends, index=starts)
        trn = get_train_times(t1.drop(times[test]), test_times)
        train = times.get_indexer(trn.index)
        out.append({
            "test_groups": list(chosen),
            "train": sorted(int(v) for v in train),
            "test": [int(v) for v in test],
        })
    return out, cut


def paths_of(splits, groups):
    testing = [[s for s, sp in enumerate(splits) if g in sp["test_groups"]]
               for g in range(groups)]
    phi = len(testing[0])
    return [[testing[g][p] for g in range(groups)] for p in range(phi)]


def sharpe(x):
    if len(x) < 2:
        return 0.0
    sd = np.std(x, ddof=1)
    return float(np.mean(x) / sd) if sd > 0 else 0.0


def pbo(columns, splits, cut, paths):
    cols = np.asarray(columns)
    logits, winners = [], []
    for sp in splits:
        is_ = [sharpe(c[sp["train"]]) for c in cols]
        oos = np.array([sharpe(c[sp["test"]]) for c in cols])
        best = int(np.argmax(is_))
        w = oos[best]
        below = int(np.sum(oos < w))
        ties = int(np.sum(oos == w))
        omega = (1 + below + (ties - 1) / 2) / (len(cols) + 1)
        logits.append(float(np.log(omega / (1 - omega))))
        winners.append(best)
    selected = []
    for path in paths:
        x = np.concatenate([cols[winners[s]][cut[g]] for g, s in enumerate(path)])
        selected.append(sharpe(x))
    return {
        "logits": logits,
        "winners": winners,
        "pbo": float(np.mean(np.array(logits) <= 0)),
        "mean_oos_sharpe": [sharpe(c) for c in cols],
        "selected_path_sharpe": selected,
    }


def case(name, n, horizon, groups, test_groups, embargo, rng, random_h=None):
    times = pd.bdate_range("2015-01-02", periods=n)
    if random_h is None:
        h = np.full(n, horizon)
    else:
        h = rng.integers(0, random_h + 1, size=n)
    end = np.minimum(np.arange(n) + h, n - 1)
    t1 = pd.Series(times[end], index=times)
    if "fraction" in embargo:
        step = int(n * embargo["fraction"])
    else:
        step = embargo["observations"]
    splits, cut = splits_of(t1, groups, test_groups, step)
    return {
        "name": name,
        "n": n,
        "label_end": [int(v) for v in end],
        "kind": "purged_kfold" if test_groups == 1 else "cpcv",
        "groups": groups,
        "test_groups": test_groups,
        "embargo": embargo,
        "splits": splits,
        "paths": paths_of(splits, groups),
    }, cut


def main():
    rng = np.random.default_rng(20260412)
    specs = [
        # name, n, horizon, N, k, embargo, random horizon bound
        ("kfold_even_h0", 60, 0, 5, 1, {"observations": 0}, None),
        ("kfold_uneven_h5_e3", 103, 5, 5, 1, {"observations": 3}, None),
        ("kfold_h10_frac", 250, 10, 10, 1, {"fraction": 0.01}, None),
        ("kfold_random_h", 157, 0, 6, 1, {"observations": 2}, 12),
        ("kfold_two_folds_long_h", 41, 15, 2, 1, {"observations": 4}, None),
        ("cpcv_6_2_h0", 120, 0, 6, 2, {"observations": 0}, None),
        ("cpcv_6_2_uneven_h5_e5", 127, 5, 6, 2, {"observations": 5}, None),
        ("cpcv_8_3_h3_frac", 241, 3, 8, 3, {"fraction": 0.02}, None),
        ("cpcv_5_4_h2_e1", 53, 2, 5, 4, {"observations": 1}, None),
        ("cpcv_7_2_random_h", 199, 0, 7, 2, {"observations": 4}, 9),
        ("cpcv_10_2_h21_e10", 530, 21, 10, 2, {"observations": 10}, None),
        ("cpcv_4_1_big_embargo", 80, 1, 4, 1, {"observations": 25}, None),
    ]
    cases = []
    for name, n, h, big_n, k, emb, rh in specs:
        c, _ = case(name, n, h, big_n, k, emb, rng, rh)
        cases.append(c)
    # PBO over seeded returns of 12 configurations, one with an edge.
    c, cut = case("pbo_cpcv_6_2", 240, 2, 6, 2, {"observations": 3}, rng)
    cols = rng.normal(0.0, 0.01, size=(12, 240))
    cols[5] += 0.0015
    c["columns"] = [[float(v) for v in col] for col in cols]
    c["pbo"] = pbo(cols, c["splits"], cut, c["paths"])
    cases.append(c)
    c, cut = case("pbo_kfold_noise", 300, 0, 10, 1, {"fraction": 0.01}, rng)
    cols = rng.normal(0.0, 0.01, size=(8, 300))
    c["columns"] = [[float(v) for v in col] for col in cols]
    c["pbo"] = pbo(cols, c["splits"], cut, c["paths"])
    cases.append(c)
    out = {
        "versions": {"numpy": version("numpy"), "pandas": version("pandas")},
        "cases": cases,
    }
    with open(os.path.join(HERE, "splits.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
