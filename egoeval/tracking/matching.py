"""Per-timestep optimal assignment: vectorised where the answer is forced, scipy's Hungarian elsewhere.

TrackEval runs ``linear_sum_assignment`` on every timestep. Where the optimal assignment's positive part
is unique, every optimal solver returns it, so it can be read off without a solver: if each row's
positive maximum is unique and those maxima sit in distinct columns, the sum of row maxima (an upper
bound) is reached by exactly that matching; the same holds with rows and columns swapped. Timesteps
with ties or conflicts go to scipy with TrackEval's own matrix, so ties break the same way.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from egoeval.tracking.base import SequenceData

_LSAP = "scipy.optimize._lsap"  # the extension module that holds SciPy's linear_sum_assignment


def _scipy_linear_sum_assignment() -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """SciPy's ``linear_sum_assignment`` itself, without importing ``scipy.optimize``.

    ``scipy.optimize``'s package imports every optimiser, ``scipy.linalg`` and SciPy's array-API layer (a quarter of
    a second, a fifth of ``egoeval score-tracks``); the solver is the extension module ``scipy.optimize._lsap``,
    which needs NumPy only. It is loaded from its file under its own name, so that a later ``import scipy.optimize``
    finds it in ``sys.modules`` and exports this very function. Another SciPy layout: the public import."""
    if _LSAP not in sys.modules and "scipy.optimize" not in sys.modules:
        import scipy

        folder = Path(scipy.__file__).parent / "optimize"
        path = next(
            (folder / f"_lsap{s}" for s in importlib.machinery.EXTENSION_SUFFIXES if (folder / f"_lsap{s}").is_file()),
            None,
        )
        spec = None if path is None else importlib.util.spec_from_file_location(_LSAP, path)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            sys.modules[_LSAP] = module
            try:
                spec.loader.exec_module(module)
                return module.linear_sum_assignment
            except (ImportError, AttributeError):
                del sys.modules[_LSAP]
    from scipy.optimize import linear_sum_assignment as solve

    return solve


linear_sum_assignment = _scipy_linear_sum_assignment()
"""``scipy.optimize.linear_sum_assignment`` (the same function, loaded without the rest of ``scipy.optimize``)."""


def frame_pairs(
    a_start: np.ndarray, a_count: np.ndarray, b_start: np.ndarray, b_count: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (row of a, row of b) of the same frame, frame by frame in row-major order (frame ``t``'s rows of a are
    ``a_start[t]`` and the ``a_count[t] - 1`` after it, of b likewise): their row indices and where each frame's
    ``a_count x b_count`` block starts."""
    p_at = np.concatenate([[0], np.cumsum(a_count * b_count)])
    row_frame = np.repeat(np.arange(len(a_count)), a_count)  # each row of a: its frame
    first = np.cumsum(a_count) - a_count  # where each frame's rows of a begin among them
    rows = a_start[row_frame] + np.arange(len(row_frame)) - first[row_frame]
    width = b_count[row_frame]  # pairs per row of a
    shift = b_start[row_frame] - (np.cumsum(width) - width)  # b's first row, less where the row's pairs begin
    return np.repeat(rows, width), np.arange(p_at[-1]) + np.repeat(shift, width), p_at


def best_per_group(group: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For entries sorted by group: index of each group's first largest entry, and whether it is the only one."""
    if len(group) == 0:
        return np.empty(0, np.int64), np.empty(0, bool)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    sizes = np.diff(np.r_[starts, len(group)])
    is_max = score == np.repeat(np.maximum.reduceat(score, starts), sizes)
    maxima = np.flatnonzero(is_max)
    return maxima[np.searchsorted(maxima, starts)], np.add.reduceat(is_max, starts) == 1


def forced_matches(data: SequenceData, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which timesteps have a forced optimal assignment on the per-pair ``score`` (zero where no pair is
    stored, never negative), and the matched pair indices (positive scores only) in those timesteps."""
    positive = np.flatnonzero(score > 0)
    step = data.gt_t[data.pair_gt]
    sides = []
    by_column = positive[np.argsort(data.pair_tracker[positive], kind="stable")]
    for entries, own, other, size in (
        (positive, data.pair_gt, data.pair_tracker, data.num_tracker_dets),  # pairs are row-major already
        (by_column, data.pair_tracker, data.pair_gt, data.num_gt_dets),
    ):
        best, strict = best_per_group(own[entries], score[entries])
        best = entries[best]
        clash = np.bincount(other[best], minlength=size)[other[best]] > 1
        ok = np.ones(data.num_steps, bool)
        ok[step[best[~strict | clash]]] = False
        sides.append((ok, best))
    (rows_ok, row_best), (cols_ok, col_best) = sides
    matched = np.concatenate([row_best[rows_ok[step[row_best]]], col_best[(cols_ok & ~rows_ok)[step[col_best]]]])
    return rows_ok | cols_ok, np.sort(matched)
