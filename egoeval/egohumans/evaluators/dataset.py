"""Which ground-truth boxes EgoHumans' dataset class passes on to its evaluation (the fetch stage applies the same rules
to the annotation, the ``official`` protocol to MOTChallenge files)."""

from __future__ import annotations

import numpy as np


def dataset_keeps(
    boxes: np.ndarray, area: np.ndarray, width: np.ndarray | None = None, height: np.ndarray | None = None
) -> np.ndarray:
    """Which ground-truth boxes (``x, y, w, h`` rows) reach mmtracking's ``eval_mot``.

    The rules of EgoHumans' dataset class (``MOTChallengeDatasetCustom._parse_ann_info`` in test mode,
    rawalkhirodkar/egohumans' vendored mmtracking, the same as mmtracking 0.x's ``MOTChallengeDataset``): a box is
    dropped when ``inter_w * inter_h == 0`` (``inter_w = max(0, min(x + w, width) - max(x, 0))``: no overlap with
    its image), when ``area <= 0``, or when ``w < 1`` or ``h < 1``. Without an image size (``width`` None) the
    overlap rule is not applied.
    """
    x, y, w, h = boxes.T
    keep = (area > 0) & (w >= 1) & (h >= 1)
    if width is not None and height is not None:
        inter_w = np.maximum(0, np.minimum(x + w, width) - np.maximum(x, 0))
        inter_h = np.maximum(0, np.minimum(y + h, height) - np.maximum(y, 0))
        keep &= inter_w * inter_h != 0
    return keep
