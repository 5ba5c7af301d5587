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

from egoeval.tracking.matching import frame_pairs, linear_sum_assignment
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


def _candidates(gt: tuple[np.ndarray, ...], pred: tuple[np.ndarray, ...], iou_threshold: float) -> np.ndarray:
    """The (gt row, pred row) pairs of one frame whose IoU reaches the threshold, in every frame at once: (2, n)."""
    gt_frames, gt_starts, _, gt_corners = gt
    pred_frames, pred_starts, _, pred_corners = pred
    _, at_gt, at_pred = np.intersect1d(gt_frames, pred_frames, assume_unique=True, return_indices=True)
    n_gt, n_pred = np.diff(gt_starts)[at_gt], np.diff(pred_starts)[at_pred]
    rows, cols, _ = frame_pairs(gt_starts[at_gt], n_gt, pred_starts[at_pred], n_pred)
    iou = box_iou(gt_corners, pred_corners, rows, cols)
    near = (iou >= iou_threshold - np.finfo(float).eps) & (iou > 0)  # what _match keeps
    return np.stack([rows[near], cols[near]])


def person_states(gt: pd.DataFrame, pred: pd.DataFrame, iou_threshold: float) -> pd.DataFrame:
    """One row per ground-truth box: frame, gt_id, track_id (-1 when missed) and state (ok, missed, switched).

    A frame where no box has two candidates (pairs at or above the threshold) matches every candidate pair: the one
    assignment of largest total IoU holds them all. Only the other frames are solved (``_match``)."""
    gt_data, pred_data = _by_frame(gt), _by_frame(pred)
    gt_frames, gt_starts, gt_all, gt_corners = gt_data
    pred_frames, pred_starts, pred_all, pred_corners = pred_data
    rows, cols = _candidates(gt_data, pred_data, iou_threshold)
    track = np.full(len(gt_all), -1, dtype=np.int64)  # each gt row's matched track id, by frame order
    gt_frame_of = np.repeat(np.arange(len(gt_frames)), np.diff(gt_starts))
    contested = np.zeros(len(gt_frames), dtype=bool)
    for ends in (rows, cols):  # a gt box or a tracker box with two candidates: that frame is solved
        contested[gt_frame_of[rows[np.bincount(ends)[ends] > 1]]] = True
    forced = ~contested[gt_frame_of[rows]]
    track[rows[forced]] = pred_all[cols[forced]]
    where = {int(f): k for k, f in enumerate(pred_frames)}
    for k in np.flatnonzero(contested):
        g0, g1 = gt_starts[k], gt_starts[k + 1]
        p = where[int(gt_frames[k])]
        p0, p1 = pred_starts[p], pred_starts[p + 1]
        matches = _match(gt_all[g0:g1], gt_corners[:, g0:g1], pred_all[p0:p1], pred_corners[:, p0:p1], iou_threshold)
        track[g0:g1] = [matches.get(int(gt_id), -1) for gt_id in gt_all[g0:g1]]
    states: list[str] = []
    last: dict[int, int] = {}
    for gt_id, matched in zip(gt_all.tolist(), track.tolist(), strict=True):
        if matched < 0:
            states.append(MISSED)
            continue
        states.append(SWITCHED if last.get(gt_id, matched) != matched else OK)
        last[gt_id] = matched
    return pd.DataFrame({"frame": gt_frames[gt_frame_of], "gt_id": gt_all, "track_id": track, "state": states})


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
    states = {run: person_states(gt, pred, iou_threshold) for run, pred in runs.items()}
    if not states or not len(first := next(iter(states.values()))):
        return pd.DataFrame(columns=["frame", "people"])
    # every run's rows are the ground truth's boxes in the same order (person_states): compare them row by row
    codes = np.column_stack([frame["state"].to_numpy(object) for frame in states.values()])
    frames = first["frame"].to_numpy(np.int64)
    starts = np.flatnonzero(np.r_[True, frames[1:] != frames[:-1]])
    result = {"frame": frames[starts], "people": np.add.reduceat((codes != codes[:, :1]).any(axis=1), starts)}
    for k, run in enumerate(states):
        result[f"missed:{run}"] = np.add.reduceat(codes[:, k] == MISSED, starts)
        result[f"switched:{run}"] = np.add.reduceat(codes[:, k] == SWITCHED, starts)
    return pd.DataFrame({name: np.asarray(values, np.int64) for name, values in result.items()})


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
