"""EgoHumans' paired comparisons of the trackers (``plots/egohumans/paired.csv``; the statistics live in
``egoeval.significance``).

For every detection mode (``setting``) and every pair of trackers run on it (``model_a``, ``model_b``: the run
names, ``<tracker>-<mode>``, in case-insensitive order): IDF1, HOTA and MOTA by a paired bootstrap over the
sequences both runs have a value for (``n`` = sequences; ``split`` = ``all``: every ground-truth sequence fetched).
``a`` and ``b`` are the **means of the per-sequence scores** (each sequence weighs the same: that is what a
bootstrap over sequences resamples), not the COMBINED figures of ``metrics/egohumans.json``, which pool every
sequence's frames. The McNemar columns stay empty; ``p_value`` is the bootstrap's, ``p_holm`` Holm-adjusted within
each (setting, metric). With few sequences the interval is coarse: the three-sequence sample's says little.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from egoeval.egohumans.settings import EgoHumansSettings
from egoeval.significance import PairedRow, compare_continuous, resamples, with_holm

METRICS = ("IDF1", "HOTA", "MOTA")
SPLIT = "all"


def paired_table(results: dict[str, dict[str, Any]], settings: EgoHumansSettings) -> pd.DataFrame:
    """Every tracker pair per detection mode and metric, from the score stage's results by run."""
    bootstrap = settings.paired
    rows: list[PairedRow] = []
    for mode in settings.detect.modes:
        runs = sorted(
            (f"{tracker}-{mode}" for tracker in settings.track.trackers if f"{tracker}-{mode}" in results),
            key=lambda run: (run.casefold(), run),
        )
        for run_a, run_b in combinations(runs, 2):
            seq_a, seq_b = results[run_a]["sequences"], results[run_b]["sequences"]
            for metric in METRICS:
                sequences = [
                    name
                    for name in sorted(set(seq_a) & set(seq_b))
                    if seq_a[name].get(metric) is not None and seq_b[name].get(metric) is not None
                ]
                if not sequences:
                    continue
                a = np.array([seq_a[name][metric] for name in sequences], dtype=np.float64)
                b = np.array([seq_b[name][metric] for name in sequences], dtype=np.float64)
                indices = resamples(len(sequences), bootstrap.bootstrap_samples, bootstrap.bootstrap_seed)
                names = (run_a, run_b)
                rows.append(compare_continuous(mode, SPLIT, metric, names, a, b, indices, bootstrap.confidence))
    return with_holm(rows)
