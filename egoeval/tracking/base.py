"""The per-sequence data every metric reads, and the interface every metric has (TrackEval's, vectorised)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

EPS = np.finfo("float").eps  # TrackEval's tolerance in threshold comparisons
Result = dict[str, Any]  # one metric's fields: numpy scalars and arrays


@dataclass(frozen=True, eq=False)
class SequenceData:
    """TrackEval's preprocessed data for one sequence, as flat arrays instead of per-timestep lists.

    ``gt_t``/``tracker_t`` give each detection's step (non-decreasing; within a step the input order,
    which is TrackEval's row/column order). Steps are the sequence's timesteps in order, where timesteps
    without any detection may be left out (no metric depends on them): ``num_steps`` of them, while
    ``num_timesteps`` is the sequence length. ``gt_ids``/``tracker_ids`` are relabelled to ``0..n-1``.
    ``pair_gt``, ``pair_tracker`` and ``similarity`` hold the non-zero entries of every step's
    similarity matrix (detection indices and value), in row-major order.
    """

    num_timesteps: int
    num_steps: int
    gt_t: np.ndarray
    gt_ids: np.ndarray
    tracker_t: np.ndarray
    tracker_ids: np.ndarray
    pair_gt: np.ndarray
    pair_tracker: np.ndarray
    similarity: np.ndarray
    num_gt_ids: int
    num_tracker_ids: int

    @property
    def num_gt_dets(self) -> int:
        return len(self.gt_t)

    @property
    def num_tracker_dets(self) -> int:
        return len(self.tracker_t)

    @cached_property
    def gt_start(self) -> np.ndarray:
        """gt detections of step t are ``gt_start[t]:gt_start[t + 1]``."""
        return np.searchsorted(self.gt_t, np.arange(self.num_steps + 1))

    @cached_property
    def tracker_start(self) -> np.ndarray:
        return np.searchsorted(self.tracker_t, np.arange(self.num_steps + 1))

    @cached_property
    def pair_start(self) -> np.ndarray:
        """pairs of step t are ``pair_start[t]:pair_start[t + 1]``."""
        return np.searchsorted(self.pair_gt, self.gt_start)

    @cached_property
    def active(self) -> np.ndarray:
        """Steps with both gt and tracker detections (the ones TrackEval matches in)."""
        return (np.diff(self.gt_start) > 0) & (np.diff(self.tracker_start) > 0)

    def dense(self, t: int, values: np.ndarray) -> np.ndarray:
        """Step t's (gt x tracker) matrix of per-pair ``values``, zero where no pair is stored."""
        g0, g1, k0, k1 = self.gt_start[t], self.gt_start[t + 1], self.tracker_start[t], self.tracker_start[t + 1]
        lo, hi = self.pair_start[t], self.pair_start[t + 1]
        matrix = np.zeros((g1 - g0, k1 - k0))
        matrix[self.pair_gt[lo:hi] - g0, self.pair_tracker[lo:hi] - k0] = values[lo:hi]
        return matrix

    @classmethod
    def from_arrays(
        cls,
        num_timesteps: int,
        num_steps: int,
        gt_t: np.ndarray,
        gt_ids: np.ndarray,
        tracker_t: np.ndarray,
        tracker_ids: np.ndarray,
        pair_gt: np.ndarray,
        pair_tracker: np.ndarray,
        similarity: np.ndarray,
    ) -> SequenceData:
        """Relabel ids to ``0..n-1`` (sorted, as TrackEval does), drop zero similarities, order pairs row-major.

        Detections must already be ordered by step.
        """
        pair_gt, pair_tracker = np.asarray(pair_gt, np.int64), np.asarray(pair_tracker, np.int64)
        similarity = np.asarray(similarity, np.float64)
        key = pair_gt * (len(tracker_t) + 1) + pair_tracker
        if len(key) > 1 and not (np.diff(key) > 0).all():
            order = np.argsort(key, kind="stable")
            pair_gt, pair_tracker, similarity = pair_gt[order], pair_tracker[order], similarity[order]
        gt_unique, gt_new = np.unique(np.asarray(gt_ids, np.int64), return_inverse=True)
        tracker_unique, tracker_new = np.unique(np.asarray(tracker_ids, np.int64), return_inverse=True)
        keep = similarity > 0
        return cls(
            num_timesteps=int(num_timesteps),
            num_steps=int(num_steps),
            gt_t=np.asarray(gt_t, np.int64),
            gt_ids=gt_new.astype(np.int64),
            tracker_t=np.asarray(tracker_t, np.int64),
            tracker_ids=tracker_new.astype(np.int64),
            pair_gt=pair_gt[keep],
            pair_tracker=pair_tracker[keep],
            similarity=similarity[keep],
            num_gt_ids=len(gt_unique),
            num_tracker_ids=len(tracker_unique),
        )


class Metric(ABC):
    """One metric: per-sequence results from a SequenceData, and their combination over sequences."""

    name: str
    fields: list[str]  # the keys of eval_sequence's and combine_sequences' results

    @abstractmethod
    def eval_sequence(self, data: SequenceData) -> Result: ...

    @abstractmethod
    def combine_sequences(self, per_seq: dict[str, Result]) -> Result: ...


def combine_sum(per_seq: dict[str, Result], field: str) -> Any:
    """Sum of a field over sequences (TrackEval's ``_combine_sum``)."""
    return sum(res[field] for res in per_seq.values())
