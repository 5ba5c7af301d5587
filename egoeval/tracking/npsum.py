"""Row and column sums of each timestep's similarity matrix, bit-identical to numpy's ``sum(1)``/``sum(0)``.

HOTA's matching scores depend on these sums; reproducing numpy's summation order (pairwise along a
contiguous axis, sequential across rows) keeps every score, and so every tie in the matching, identical.
"""

from __future__ import annotations

import numpy as np

from egoeval.tracking.base import SequenceData

_BLOCK = 128  # numpy's PW_BLOCKSIZE


def pairwise_sum(values: np.ndarray) -> np.ndarray:
    """numpy's pairwise summation of each row of a 2-D array (``pairwise_sum`` in numpy's C loops)."""
    n = values.shape[1]
    if n < 8:
        total = np.zeros(len(values))
        for k in range(n):
            total = total + values[:, k]
        return total
    if n <= _BLOCK:
        acc = values[:, :8].copy()
        stop = n - n % 8
        for k in range(8, stop, 8):
            acc += values[:, k : k + 8]
        total = ((acc[:, 0] + acc[:, 1]) + (acc[:, 2] + acc[:, 3])) + (
            (acc[:, 4] + acc[:, 5]) + (acc[:, 6] + acc[:, 7])
        )
        for k in range(stop, n):
            total = total + values[:, k]
        return total
    half = n // 2
    half -= half % 8
    return pairwise_sum(values[:, :half]) + pairwise_sum(values[:, half:])


def group_sums(
    group: np.ndarray, position: np.ndarray, length: np.ndarray, pairwise: np.ndarray, values: np.ndarray, size: int
) -> np.ndarray:
    """Sum of the non-zero ``values`` of each group, in numpy's order.

    Entries are ordered by position within their group; ``length``/``pairwise`` are per group (the full
    row or column length including zeros, and whether numpy reduces it pairwise or sequentially).
    Adding zero is exact, so only groups reduced pairwise with 3+ non-zero entries need the dense replay.
    """
    totals = np.bincount(group, weights=values, minlength=size)  # sequential, in entry order
    counts = np.bincount(group, minlength=size)
    replay = pairwise & (length >= 8) & (counts >= 3)
    if replay.any():
        entry = replay[group]
        group, position, values = group[entry], position[entry], values[entry]
        for n in np.unique(length[group]):
            same = length[group] == n
            ids, rank = np.unique(group[same], return_inverse=True)
            dense = np.zeros((len(ids), n))
            dense[rank, position[same]] = values[same]
            totals[ids] = pairwise_sum(dense)
    return totals


def row_col_sums(data: SequenceData) -> tuple[np.ndarray, np.ndarray]:
    """Per gt detection its row's sum, per tracker detection its column's sum, as numpy computes them."""
    step = data.gt_t[data.pair_gt]
    num_gt, num_tracker = np.diff(data.gt_start), np.diff(data.tracker_start)
    rows = group_sums(
        data.pair_gt,
        data.pair_tracker - data.tracker_start[step],
        num_tracker[data.gt_t],
        np.ones(data.num_gt_dets, bool),
        data.similarity,
        data.num_gt_dets,
    )
    # column entries are visited row by row (ascending position) because pairs are row-major
    cols = group_sums(
        data.pair_tracker,
        data.pair_gt - data.gt_start[step],
        num_gt[data.tracker_t],
        num_tracker[data.tracker_t] == 1,  # a single column is a contiguous reduction
        data.similarity,
        data.num_tracker_dets,
    )
    return rows, cols
