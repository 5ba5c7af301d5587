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
    ids = (gt["id"].to_numpy(np.int64), pred["id"].to_numpy(np.int64))
    return _match(ids[0], _corners(gt), ids[1], _corners(pred), iou_threshold)


def _match(
    gt_ids: np.ndarray, gt_corners: np.ndarray, pred_ids: np.ndarray, pred_corners: np.ndarray, iou_threshold: float
) -> dict[int, int]:
    """``match_frame`` on arrays (ids and (4, n) corners)."""
    if not len(gt_ids) or not len(pred_ids):
        return {}
    rows, cols = np.meshgrid(np.arange(len(gt_ids)), np.arange(len(pred_ids)), indexing="ij")
    iou = box_iou(gt_corners, pred_corners, rows.ravel(), cols.ravel()).reshape(rows.shape)
    score = np.where(iou >= iou_threshold - np.finfo(float).eps, iou, 0.0)
    assigned_rows, assigned_cols = linear_sum_assignment(score, maximize=True)
    return {
        int(gt_ids[r]): int(pred_ids[c]) for r, c in zip(assigned_rows, assigned_cols, strict=True) if score[r, c] > 0
    }


def _by_frame(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Frames (sorted, unique), each one's first row, ids and (4, n) corners, rows stably sorted by frame."""
    table = table.iloc[np.argsort(table["frame"].to_numpy(np.int64), kind="stable")]
    frames = table["frame"].to_numpy(np.int64)
    unique, starts = np.unique(frames, return_index=True)
    return unique, np.append(starts, len(frames)), table["id"].to_numpy(np.int64), _corners(table)


def person_states(gt: pd.DataFrame, pred: pd.DataFrame, iou_threshold: float) -> pd.DataFrame:
    """One row per ground-truth box: frame, gt_id, track_id (-1 when missed) and state (ok, missed, switched)."""
    rows: list[tuple[int, int, int, str]] = []
    last: dict[int, int] = {}
    gt_frames, gt_starts, gt_all, gt_corners = _by_frame(gt)
    pred_frames, pred_starts, pred_all, pred_corners = _by_frame(pred)
    where = {int(f): k for k, f in enumerate(pred_frames)}
    for k, frame in enumerate(gt_frames):
        g0, g1 = gt_starts[k], gt_starts[k + 1]
        p = where.get(int(frame))
        p0, p1 = (pred_starts[p], pred_starts[p + 1]) if p is not None else (0, 0)
        ids = gt_all[g0:g1]
        matches = _match(ids, gt_corners[:, g0:g1], pred_all[p0:p1], pred_corners[:, p0:p1], iou_threshold)
        for gt_id in ids:
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
