"""Paired comparisons of two systems scored on the same units (clips, sequences), knowing no benchmark.

- ``resamples``: the bootstrap's index matrix, drawn once from ``numpy.random.default_rng(seed)``; every system
  scored on the same number of units sees the same resamples, which is what makes a bootstrap paired;
- ``mcnemar_exact``: the exact McNemar test, a two-sided binomial test at 0.5 on the discordant units
  (SciPy's ``binomtest``); 1.0 when no unit is discordant;
- ``paired_bootstrap``: the difference of two per-unit value vectors' means with its percentile interval over the
  same resamples, and a two-sided bootstrap p-value: twice the smaller share of resampled differences on either
  side of zero, each share counted as (k + 1) / (samples + 1) so it is never 0, at most 1;
- ``holm``: Holm's step-down adjustment of a family of p-values.

Every comparison is one ``PairedRow`` (the columns of ``plots/<benchmark>/paired.csv``); values are percentages.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

MCNEMAR = "exact McNemar"
BOOTSTRAP = "paired bootstrap"


@dataclass(frozen=True)
class PairedRow:
    """One comparison: ``diff = a - b`` (percent) on ``n`` units, ``ci_low``/``ci_high`` the paired bootstrap
    interval of ``diff``; ``n_a_only`` (``n_b_only``) the units only system a (b) got right (NaN for a continuous
    metric); ``p_holm`` is filled in by ``with_holm``."""

    setting: str
    split: str
    metric: str
    model_a: str
    model_b: str
    n: int
    a: float
    b: float
    diff: float
    ci_low: float
    ci_high: float
    n_a_only: float
    n_b_only: float
    p_value: float
    p_holm: float
    test: str


COLUMNS = [field.name for field in fields(PairedRow)]


def resamples(n: int, samples: int, seed: int) -> np.ndarray:
    """A (samples, n) matrix of unit indices drawn with replacement, the same for every call with these arguments."""
    return np.random.default_rng(seed).integers(0, n, size=(samples, n))


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (1.0 when there is none)."""
    from scipy.stats import binomtest  # here: the modules that draw resamples only stay light to import

    discordant = int(a_only) + int(b_only)
    return 1.0 if discordant == 0 else float(binomtest(int(a_only), discordant, 0.5).pvalue)


def paired_bootstrap(
    a: np.ndarray, b: np.ndarray, indices: np.ndarray, confidence: float
) -> tuple[float, float, float, float, float, float]:
    """(mean a, mean b, diff = mean a - mean b, ci_low, ci_high, p) of two per-unit value vectors (in the unit
    the caller reports, percent here), resampling units by ``indices`` (``resamples``) for both vectors alike."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    mean_a, mean_b = float(a.mean()), float(b.mean())
    diffs = (a - b)[indices].mean(axis=1)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(diffs, [tail, 100.0 - tail])
    samples = len(diffs)
    below, above = int((diffs <= 0).sum()), int((diffs >= 0).sum())
    p = min(1.0, 2.0 * (min(below, above) + 1) / (samples + 1))
    return mean_a, mean_b, mean_a - mean_b, float(low), float(high), p


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the given order: the k-th smallest times (m - k + 1), kept monotone, at most 1."""
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    scaled = p[order] * (len(p) - np.arange(len(p)))
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return [float(value) for value in adjusted]


def compare_binary(
    setting: str,
    split: str,
    metric: str,
    names: tuple[str, str],
    right_a: np.ndarray,
    right_b: np.ndarray,
    indices: np.ndarray,
    confidence: float,
) -> PairedRow:
    """A right/wrong metric: accuracies, their paired bootstrap interval and the exact McNemar test."""
    right_a, right_b = np.asarray(right_a, dtype=bool), np.asarray(right_b, dtype=bool)
    a_only, b_only = int((right_a & ~right_b).sum()), int((right_b & ~right_a).sum())
    a, b, diff, low, high, _ = paired_bootstrap(right_a * 100.0, right_b * 100.0, indices, confidence)
    p = mcnemar_exact(a_only, b_only)
    return PairedRow(setting, split, metric, *names, len(right_a), a, b, diff, low, high, a_only, b_only, p, p, MCNEMAR)


def compare_continuous(
    setting: str,
    split: str,
    metric: str,
    names: tuple[str, str],
    values_a: np.ndarray,
    values_b: np.ndarray,
    indices: np.ndarray,
    confidence: float,
) -> PairedRow:
    """A per-unit score already in percent: means, the paired bootstrap interval and its p-value."""
    a, b, diff, low, high, p = paired_bootstrap(values_a, values_b, indices, confidence)
    nan = float("nan")
    return PairedRow(setting, split, metric, *names, len(values_a), a, b, diff, low, high, nan, nan, p, p, BOOTSTRAP)


def with_holm(rows: list[PairedRow], family: tuple[str, ...] = ("setting", "split", "metric")) -> pd.DataFrame:
    """The rows as a table in ``COLUMNS`` order, ``p_holm`` adjusted within each family of equal ``family`` values."""
    table = pd.DataFrame([astuple(row) for row in rows], columns=COLUMNS)
    if table.empty:
        return table
    table["p_holm"] = table.groupby(list(family), sort=False)["p_value"].transform(
        lambda p: pd.Series(holm(p), p.index)
    )
    return table


def csv_bytes(table: pd.DataFrame) -> bytes:
    """The table as CSV, floats at full precision, counts as integers (blank where a test has none)."""
    out = table.copy()
    for column in ("n_a_only", "n_b_only"):
        out[column] = out[column].astype("Int64")
    return out.to_csv(index=False, lineterminator="\n").encode()


def read_paired(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A paired.csv, checked: exactly ``COLUMNS`` (InputError naming the file otherwise)."""
    from egoeval.core.errors import InputError
    from egoeval.core.io.bounded import read_csv

    if not Path(path).is_file():
        raise InputError(path, "file not found (run the score stage first)")
    table = read_csv(path)
    if list(table.columns) != COLUMNS:
        raise InputError(path, f"columns {list(table.columns)} are not {COLUMNS}")
    for column in ("setting", "split", "metric", "model_a", "model_b", "test"):
        table[column] = table[column].astype(str)
    return table


def oriented(table: pd.DataFrame, model_a: str, model_b: str) -> pd.DataFrame:
    """The rows comparing ``model_a`` with ``model_b`` in either order, written as ``model_a`` minus ``model_b``."""
    same = table[(table["model_a"] == model_a) & (table["model_b"] == model_b)]
    swapped = table[(table["model_a"] == model_b) & (table["model_b"] == model_a)].copy()
    swapped[["model_a", "model_b"]] = model_a, model_b
    swapped[["a", "b"]] = swapped[["b", "a"]].to_numpy()
    swapped["diff"] = 0.0 - swapped["diff"]  # 0.0 - x: no negative zero
    swapped[["ci_low", "ci_high"]] = 0.0 - swapped[["ci_high", "ci_low"]].to_numpy()
    swapped[["n_a_only", "n_b_only"]] = swapped[["n_b_only", "n_a_only"]].to_numpy()
    return pd.concat([same, swapped]) if len(swapped) else same


def formatted(table: pd.DataFrame, models: bool = False) -> list[list[str]]:
    """The header and the rows as display strings (columns a, b, diff = a - b; with ``models``, model a and model b
    after the metric): one decimal for percentages, p to 3 significant digits, blanks where a test has no
    discordant counts; what the text table and the report show."""
    header = [
        "setting",
        "split",
        "metric",
        *(["model a", "model b"] if models else []),
        "n",
        "a",
        "b",
        "diff",
        "interval",
        "a only",
        "b only",
        "p",
        "p Holm",
        "test",
    ]
    rows = [header]
    for row in table.itertuples(index=False):
        counts = ["" if pd.isna(v) else str(int(v)) for v in (row.n_a_only, row.n_b_only)]
        rows.append(
            [
                row.setting,
                row.split,
                row.metric,
                *([row.model_a, row.model_b] if models else []),
                str(row.n),
                f"{row.a:.1f}",
                f"{row.b:.1f}",
                _signed(row.diff),
                f"[{_signed(row.ci_low)}, {_signed(row.ci_high)}]",
                *counts,
                f"{row.p_value:.3g}",
                f"{row.p_holm:.3g}",
                row.test,
            ]
        )
    return rows


def text_table(table: pd.DataFrame) -> str:
    """The rows as an aligned text table (``formatted``), numbers right-aligned."""
    rows = formatted(table)
    header = rows[0]
    widths = [max(len(r[k]) for r in rows) for k in range(len(header))]
    text = {0, 1, 2, len(header) - 1}  # setting, split, metric and test are left-aligned
    lines = ["  ".join(_cell(r[k], widths[k], k in text) for k in range(len(header))) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def _cell(value: str, width: int, text: bool) -> str:
    return value.ljust(width) if text else value.rjust(width)


def _signed(value: float) -> str:
    text = f"{value:+.1f}"
    return "0.0" if text in ("+0.0", "-0.0") else text
