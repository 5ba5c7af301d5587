"""Where tracking runs disagree: per frame, the ground-truth people whose fate differs between runs.

In every frame each run's boxes are matched to the ground truth one to one (Hungarian assignment on IoU, pairs below
the threshold never match). A ground-truth person is then, for that run, ``missed`` (no box matched), ``switched``
(matched to another track id than the last time this person was matched) or ``ok``. A frame's disagreement is the
number of people whose state is not the same in every run; the report shows the frames where it is highest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import linear_sum_assignment

from egoeval.tracking.similarity import box_iou

OK, MISSED, SWITCHED = "ok", "missed", "switched"


def _corners(frame: pd.DataFrame) -> np.ndarray:
    x, y, w, h = (frame[c].to_numpy(np.float64) for c in ("x", "y", "w", "h"))
    return np.stack([x, y, x + w, y + h])


def match_frame(gt: pd.DataFrame, pred: pd.DataFrame, iou_threshold: float) -> dict[int, int]:
    """``{gt id: track id}`` of one frame: the one-to-one assignment of largest total IoU among pairs >= threshold."""
    if gt.empty or pred.empty:
        return {}
    rows, cols = np.meshgrid(np.arange(len(gt)), np.arange(len(pred)), indexing="ij")
    iou = box_iou(_corners(gt), _corners(pred), rows.ravel(), cols.ravel()).reshape(rows.shape)
    score = np.where(iou >= iou_threshold - np.finfo(float).eps, iou, 0.0)
    assigned_rows, assigned_cols = linear_sum_assignment(score, maximize=True)
    gt_ids, pred_ids = gt["id"].to_numpy(np.int64), pred["id"].to_numpy(np.int64)
    return {
        int(gt_ids[r]): int(pred_ids[c]) for r, c in zip(assigned_rows, assigned_cols, strict=True) if score[r, c] > 0
    }


def person_states(gt: pd.DataFrame, pred: pd.DataFrame, iou_threshold: float) -> pd.DataFrame:
    """One row per ground-truth box: frame, gt_id, track_id (-1 when missed) and state (ok, missed, switched)."""
    rows: list[tuple[int, int, int, str]] = []
    last: dict[int, int] = {}
    predicted = {int(f): part for f, part in pred.groupby("frame", sort=False)}
    empty = pred.iloc[0:0]
    for frame, part in gt.groupby("frame", sort=True):
        matches = match_frame(part, predicted.get(int(frame), empty), iou_threshold)
        for gt_id in part["id"].to_numpy(np.int64):
            track = matches.get(int(gt_id))
            if track is None:
                rows.append((int(frame), int(gt_id), -1, MISSED))
                continue
            state = SWITCHED if last.get(int(gt_id), track) != track else OK
            last[int(gt_id)] = track
            rows.append((int(frame), int(gt_id), track, state))
    return pd.DataFrame(rows, columns=["frame", "gt_id", "track_id", "state"])


@dataclass(frozen=True)
class Disagreement:
    """One frame of one sequence: how many people the runs disagree on, and each run's misses and switches there."""

    sequence: str
    frame: int
    people: int  # ground-truth people whose state differs between runs
    missed: dict[str, int]
    switched: dict[str, int]


def frame_disagreement(gt: pd.DataFrame, runs: dict[str, pd.DataFrame], iou_threshold: float) -> pd.DataFrame:
    """Per frame with ground truth: ``people`` (disagreement) and per run ``missed:<run>``, ``switched:<run>``."""
    states = {run: person_states(gt, pred, iou_threshold).set_index(["frame", "gt_id"]) for run, pred in runs.items()}
    table = pd.DataFrame({run: frame["state"] for run, frame in states.items()})
    if table.empty:
        return pd.DataFrame(columns=["frame", "people"])
    differs = table.nunique(axis=1) > 1
    result = differs.groupby(level="frame").sum().rename("people").to_frame()
    for run in runs:
        result[f"missed:{run}"] = (table[run] == MISSED).groupby(level="frame").sum()
        result[f"switched:{run}"] = (table[run] == SWITCHED).groupby(level="frame").sum()
    return result.reset_index()


def most_disputed(
    sequences: dict[str, tuple[pd.DataFrame, dict[str, pd.DataFrame]]], iou_threshold: float, count: int, gap: int
) -> list[Disagreement]:
    """The ``count`` frames of largest disagreement over all sequences (ties: sequence, then frame order), no two in
    one sequence closer than ``gap`` frames; frames where every run agrees are never picked."""
    candidates: list[Disagreement] = []
    for sequence, (gt, runs) in sorted(sequences.items()):
        table = frame_disagreement(gt, runs, iou_threshold)
        for row in table[table["people"] > 0].to_dict("records"):
            candidates.append(
                Disagreement(
                    sequence=sequence,
                    frame=int(row["frame"]),
                    people=int(row["people"]),
                    missed={run: int(row[f"missed:{run}"]) for run in runs},
                    switched={run: int(row[f"switched:{run}"]) for run in runs},
                )
            )
    candidates.sort(key=lambda d: (-d.people, d.sequence, d.frame))
    chosen: list[Disagreement] = []
    for candidate in candidates:
        if len(chosen) >= count:
            break
        if all(c.sequence != candidate.sequence or abs(c.frame - candidate.frame) >= gap for c in chosen):
            chosen.append(candidate)
    return chosen
