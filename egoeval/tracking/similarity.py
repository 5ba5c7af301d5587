"""Box IoU computed exactly as TrackEval computes it, and SequenceData built from MOTChallenge rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from egoeval.tracking.base import EPS, SequenceData
from egoeval.tracking.mot import MotTable

if TYPE_CHECKING:
    import pandas as pd

CHUNK_PAIRS = 1 << 22  # (gt, tracker) pairs looked at once


def box_iou(gt_boxes: np.ndarray, tracker_boxes: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """IoU of box pairs (``x0, y0, x1, y1`` columns) with TrackEval's operations in its order (bit-identical)."""
    a, b = gt_boxes[:, rows], tracker_boxes[:, cols]
    width = np.maximum(np.minimum(a[2], b[2]) - np.maximum(a[0], b[0]), 0)
    intersection = width * np.maximum(np.minimum(a[3], b[3]) - np.maximum(a[1], b[1]), 0)
    area_gt = (a[2] - a[0]) * (a[3] - a[1])
    area_tracker = (b[2] - b[0]) * (b[3] - b[1])
    union = area_gt + area_tracker - intersection
    intersection[(area_gt <= EPS) | (area_tracker <= EPS) | (union <= EPS)] = 0
    union[union <= EPS] = 1
    return intersection / union


def sequence_data(
    gt: MotTable | pd.DataFrame, pred: MotTable | pd.DataFrame, num_timesteps: int | None = None
) -> SequenceData:
    """One sequence from MOTChallenge rows (gt already filtered): order by frame, relabel ids, IoU per timestep.

    ``num_timesteps`` (the sequence length) defaults to the last frame with a box.
    """
    gt_frames, gt_ids, gt_boxes = _by_frame(MotTable.of(gt), "ground truth")
    tracker_frames, tracker_ids, tracker_boxes = _by_frame(MotTable.of(pred), "tracker output")
    frames = np.unique(np.concatenate([gt_frames, tracker_frames]))  # the steps: frames with a box
    last = int(frames.max(initial=0))
    if num_timesteps is None:
        num_timesteps = last
    elif num_timesteps < last:
        raise ValueError(f"a box in frame {last} lies beyond the sequence length {num_timesteps}")
    gt_t, tracker_t = np.searchsorted(frames, gt_frames), np.searchsorted(frames, tracker_frames)
    gt_start = np.searchsorted(gt_t, np.arange(len(frames) + 1))
    tracker_start = np.searchsorted(tracker_t, np.arange(len(frames) + 1))
    pair_gt, pair_tracker, similarity = [np.empty(0, np.int64)], [np.empty(0, np.int64)], [np.empty(0)]
    for rows, cols in _dense_pairs(gt_start, tracker_start):
        for axis in (0, 1):  # IoU > 0 needs overlap along x and along y: look only at those pairs
            low = np.maximum(gt_boxes[axis, rows], tracker_boxes[axis, cols])
            overlap = np.minimum(gt_boxes[axis + 2, rows], tracker_boxes[axis + 2, cols]) > low
            rows, cols = rows[overlap], cols[overlap]
        iou = box_iou(gt_boxes, tracker_boxes, rows, cols)
        keep = iou > 0
        pair_gt.append(rows[keep])
        pair_tracker.append(cols[keep])
        similarity.append(iou[keep])
    return SequenceData.from_arrays(
        num_timesteps,
        len(frames),
        gt_t,
        gt_ids,
        tracker_t,
        tracker_ids,
        np.concatenate(pair_gt),
        np.concatenate(pair_tracker),
        np.concatenate(similarity),
    )


def _by_frame(table: MotTable, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Frames, ids and (4, n) ``x0, y0, x1, y1`` boxes, stably sorted by frame.

    Rejects frames < 1 and an id twice in one frame (TrackEval refuses both).
    """
    frames, ids = table.frame, table.id
    if len(frames) and frames.min() < 1:
        raise ValueError(f"{what}: frames are 1-based, found frame {frames.min()}")
    order = np.argsort(frames, kind="stable")
    frames, ids = frames[order], ids[order]
    by_id = np.lexsort((ids, frames))
    twice = (np.diff(frames[by_id]) == 0) & (np.diff(ids[by_id]) == 0)
    if twice.any():
        k = by_id[np.argmax(twice)]
        raise ValueError(f"{what}: id {ids[k]} appears twice in frame {frames[k]}")
    x, y = table.x[order], table.y[order]
    boxes = np.stack([x, y, x + table.w[order], y + table.h[order]])
    return frames, ids, boxes


def _dense_pairs(gt_start: np.ndarray, tracker_start: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every (gt, tracker) detection pair of every step, row-major, in chunks of about CHUNK_PAIRS pairs."""
    num_tracker = np.diff(tracker_start)
    gt_step = np.repeat(np.arange(len(num_tracker)), np.diff(gt_start))
    width = num_tracker[gt_step]  # pairs per gt detection
    ends = np.cumsum(width)
    first = 0
    while first < len(width):
        last = max(first + 1, int(np.searchsorted(ends, ends[first] - width[first] + CHUNK_PAIRS, side="right")))
        sizes = width[first:last]
        rows = np.repeat(np.arange(first, last), sizes)
        # column = the row's first tracker detection + position within the row
        shift = tracker_start[gt_step[first:last]] - (np.cumsum(sizes) - sizes)
        yield rows, np.arange(len(rows)) + np.repeat(shift, sizes)
        first = last
