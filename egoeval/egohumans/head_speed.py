"""Tracking quality against the wearer's head speed: IDF1 and ID switches of the frames in each speed bin.

The head's angular speed at a frame is the angle of the relative rotation between the previous frame's camera and
this one's (from the 4 x 4 world-to-camera extrinsics), in degrees per frame. A frame without extrinsics (an image the
annotation gives none: ``[]`` in images.parquet), and the frame after it, have no speed and fall in no bin. Each
bin's frames are scored as their own set (every sequence cut to those frames), so a bin's IDF1 says how well
identities held where the head moved that fast, and its IDSW counts the switches among those frames.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from egoeval.core.errors import InputError
from egoeval.egohumans.evaluators import evaluator
from egoeval.egohumans.settings import ScoreSettings

EDGES = (0.0, 0.5, 1.0, 2.0, 4.0, float("inf"))  # degrees per frame
COLUMNS = ["run", "speed", "speed_from", "frames", "IDF1", "IDSW"]  # speed_from: the bin's lower edge, a number


def head_speeds(images: pd.DataFrame, path: Path) -> dict[str, dict[int, float]]:
    """Per sequence, frame -> degrees turned since the previous frame (frames after a gap or without a pose: none).
    ``images`` is the table at ``path`` (images.parquet), which errors name with the sequence and frame."""
    speeds: dict[str, dict[int, float]] = {}
    for sequence, rows in images.sort_values(["sequence", "frame"]).groupby("sequence", sort=True):
        frames = rows["frame"].to_numpy(np.int64)
        poses = [_rotation(e, path, f"{sequence} frame {f}") for e, f in zip(rows["extrinsics"], frames, strict=True)]
        found = {}
        for k in range(1, len(frames)):
            if frames[k] - frames[k - 1] != 1 or poses[k] is None or poses[k - 1] is None:
                continue
            cosine = (np.trace(poses[k] @ poses[k - 1].T) - 1) / 2
            found[int(frames[k])] = float(np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0))))
        speeds[str(sequence)] = found
    return speeds


def _rotation(extrinsics: Any, path: Path, row: str) -> np.ndarray | None:
    """The 3 x 3 rotation of an image's 4 x 4 extrinsics (16 finite numbers); None for an image without them (``[]``,
    as fetch writes it, or null): such a frame, and the one after it, get no speed. Anything else is an InputError
    naming ``path`` and ``row``."""
    if extrinsics is None or len(extrinsics) == 0:
        return None
    try:
        matrix = np.asarray(extrinsics, dtype=np.float64)
    except (TypeError, ValueError):
        matrix = np.zeros(0)
    if matrix.shape != (16,) or not np.isfinite(matrix).all():
        raise InputError(path, "extrinsics must be 16 finite numbers (4 x 4) or none ([])", row=row)
    return matrix.reshape(4, 4)[:3, :3]


def _label(low: float, high: float) -> str:
    return f"{low:g}+ deg/frame" if high == float("inf") else f"{low:g}-{high:g} deg/frame"


def head_speed_table(
    gt: dict[str, pd.DataFrame],
    runs: dict[str, dict[str, pd.DataFrame]],
    speeds: dict[str, dict[int, float]],
    settings: ScoreSettings,
) -> pd.DataFrame:
    """One row per run and speed bin that holds ground truth: frames in the bin, IDF1 and IDSW of those frames
    (under the protocol of ``settings``)."""
    scoring = evaluator(settings.protocol)
    rows: list[dict[str, Any]] = []
    for low, high in itertools.pairwise(EDGES):
        chosen = {seq: {f for f, speed in found.items() if low <= speed < high} for seq, found in speeds.items()}
        kept = {seq: gt[seq][gt[seq]["frame"].isin(frames)] for seq, frames in chosen.items() if seq in gt and frames}
        kept = {seq: table for seq, table in kept.items() if len(table)}
        if not kept:
            continue
        count = sum(len(chosen[seq]) for seq in kept)
        for run, pred in sorted(runs.items()):
            cut = {seq: pred[seq][pred[seq]["frame"].isin(chosen[seq])] for seq in kept}
            combined = scoring.evaluate(kept, cut, settings.iou_threshold)["COMBINED"]
            rows.append(
                {
                    "run": run,
                    "speed": _label(low, high),
                    "speed_from": low,
                    "frames": count,
                    "IDF1": combined["IDF1"],
                    "IDSW": combined["IDSW"],
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)
