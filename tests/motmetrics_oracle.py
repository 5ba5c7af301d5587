"""py-motmetrics 1.4.0 as mmtracking's ``eval_mot`` calls it: the test oracle for the ``official`` protocol.

``acc_single_video``, ``aggregate_accs`` and ``eval_single_class`` follow mmtracking 0.x
(open-mmlab/mmtracking, mmtrack/core/evaluation/eval_mot.py) line by line, with mmdet 2.x's loop-form
``bbox_overlaps`` (mmdet/core/evaluation/bbox_overlaps.py). mmtracking itself cannot be imported here (it needs
mmcv and NumPy < 2): its ``np.int``/``np.bool`` uses run under a small shim that restores those removed aliases.
py-motmetrics picks the first LAP solver installed; the oracle pins SciPy's, as the project's implementation uses
(the solvers differ only in how they break exact ties).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# --- shim: the NumPy 1 aliases mmtracking's eval_mot uses (removed in NumPy 2) ---------------------------------
for _alias, _type in (("int", int), ("bool", bool), ("float", float), ("object", object)):
    if _alias not in np.__dict__:
        setattr(np, _alias, _type)

import motmetrics as mm  # noqa: E402
from motmetrics.lap import linear_sum_assignment  # noqa: E402
from motmetrics.math_util import quiet_divide  # noqa: E402

mm.lap.default_solver = "scipy"

METRIC_MAPS = {
    "idf1": "IDF1",
    "mota": "MOTA",
    "motp": "MOTP",
    "num_false_positives": "FP",
    "num_misses": "FN",
    "num_switches": "IDSW",
    "recall": "Rcll",
    "precision": "Prcn",
    "mostly_tracked": "MT",
    "partially_tracked": "PT",
    "mostly_lost": "ML",
    "num_fragmentations": "Frag",
}
EXTRA = ["idp", "idr", "num_objects", "num_predictions"]


def bbox_overlaps(bboxes1, bboxes2, mode="iou", eps=1e-6):
    """mmdet 2.x ``bbox_overlaps`` (non-legacy coordinates), as written there."""
    extra_length = 0.0
    bboxes1 = bboxes1.astype(np.float32)
    bboxes2 = bboxes2.astype(np.float32)
    rows = bboxes1.shape[0]
    cols = bboxes2.shape[0]
    ious = np.zeros((rows, cols), dtype=np.float32)
    if rows * cols == 0:
        return ious
    exchange = False
    if bboxes1.shape[0] > bboxes2.shape[0]:
        bboxes1, bboxes2 = bboxes2, bboxes1
        ious = np.zeros((cols, rows), dtype=np.float32)
        exchange = True
    area1 = (bboxes1[:, 2] - bboxes1[:, 0] + extra_length) * (bboxes1[:, 3] - bboxes1[:, 1] + extra_length)
    area2 = (bboxes2[:, 2] - bboxes2[:, 0] + extra_length) * (bboxes2[:, 3] - bboxes2[:, 1] + extra_length)
    for i in range(bboxes1.shape[0]):
        x_start = np.maximum(bboxes1[i, 0], bboxes2[:, 0])
        y_start = np.maximum(bboxes1[i, 1], bboxes2[:, 1])
        x_end = np.minimum(bboxes1[i, 2], bboxes2[:, 2])
        y_end = np.minimum(bboxes1[i, 3], bboxes2[:, 3])
        overlap = np.maximum(x_end - x_start + extra_length, 0) * np.maximum(y_end - y_start + extra_length, 0)
        if mode == "iou":  # noqa: SIM108 (as written in mmdet)
            union = area1[i] + area2 - overlap
        else:
            union = area1[i] if not exchange else area2
        union = np.maximum(union, eps)
        ious[i, :] = overlap / union
    if exchange:
        ious = ious.T
    return ious


def bbox_distances(bboxes1, bboxes2, iou_thr=0.5):
    ious = bbox_overlaps(bboxes1, bboxes2, mode="iou")
    distances = 1 - ious
    distances = np.where(distances > iou_thr, np.nan, distances)
    return distances


def acc_single_video(frames, iou_thr=0.5, ignore_iof_thr=0.5):
    """mmtracking's ``acc_single_video`` for one class; ``frames``: (gt_ids, gt_bboxes, ignore_bboxes, pred_ids,
    pred_bboxes) per image."""
    acc = mm.MOTAccumulator(auto_id=True)
    for gt_ids, gt_bboxes, gt_ignore, pred_ids, pred_bboxes in frames:
        gt_ids = gt_ids.astype(np.int)
        pred_ids = pred_ids.astype(np.int)
        dist = bbox_distances(gt_bboxes, pred_bboxes, iou_thr)
        if gt_ignore.shape[0] > 0:
            fps = np.ones(pred_bboxes.shape[0]).astype(np.bool)
            row, col = linear_sum_assignment(dist)
            for m, n in zip(row, col, strict=True):
                if not np.isfinite(dist[m, n]):
                    continue
                fps[n] = False
            iofs = bbox_overlaps(pred_bboxes, gt_ignore, mode="iof")
            ignores = (iofs > ignore_iof_thr).any(axis=1)
            valid_inds = ~(fps & ignores)
            pred_ids = pred_ids[valid_inds]
            dist = dist[:, valid_inds]
        if dist.shape != (0, 0):
            acc.update(gt_ids, pred_ids, dist)
    return acc


def _xyxy(df: pd.DataFrame) -> np.ndarray:
    x, y = df["x"].to_numpy(np.float64), df["y"].to_numpy(np.float64)
    return np.stack([x, y, x + df["w"].to_numpy(np.float64), y + df["h"].to_numpy(np.float64)], axis=1).astype(
        np.float32
    )


def video_frames(gt: pd.DataFrame, pred: pd.DataFrame) -> list[tuple]:
    """Per image (every frame with a ground-truth or tracker row, ascending), the arrays mmtracking passes."""
    ignored = np.trunc(gt["conf"].to_numpy()) == 0
    out = []
    for frame in sorted(set(gt["frame"]) | set(pred["frame"])):
        g, p = gt[gt["frame"] == frame], pred[pred["frame"] == frame]
        keep = ~ignored[(gt["frame"] == frame).to_numpy()]
        out.append((g["id"].to_numpy()[keep], _xyxy(g)[keep], _xyxy(g)[~keep], p["id"].to_numpy(), _xyxy(p)))
    return out


def run_oracle(gt: dict[str, pd.DataFrame], pred: dict[str, pd.DataFrame], iou_thr: float = 0.5) -> dict:
    """``{"sequences": {name: row}, "COMBINED": row}`` with mmtracking's fields (fractions, as py-motmetrics)."""
    names, accs = [], []
    for name in sorted(gt):
        acc = acc_single_video(video_frames(gt[name], pred.get(name, gt[name].iloc[:0])), iou_thr)
        if len(acc._events["Type"]) == 0:  # aggregate_accs: empty videos are left out
            continue
        names.append(name)
        accs.append(acc)
    if not accs:
        return {"sequences": {}, "COMBINED": None}
    mh = mm.metrics.create()
    metrics = [*METRIC_MAPS, *EXTRA]
    summary = mh.compute_many(accs, names=names, metrics=metrics, generate_overall=True)
    overall = summary.loc["OVERALL"].to_dict()
    if np.isnan(overall["motp"]):  # eval_single_class's fallback
        num_dets = mh.compute_many(accs, names=names, metrics=["num_detections"], generate_overall=True)
        sum_motp = (summary["motp"] * num_dets["num_detections"]).sum()
        overall["motp"] = quiet_divide(sum_motp, num_dets["num_detections"]["OVERALL"])
    overall["motp"] = 1 - overall["motp"]
    sequences = {}
    for name in names:
        row = summary.loc[name].to_dict()
        row["motp"] = 1 - row["motp"]
        sequences[name] = row
    return {"sequences": sequences, "COMBINED": overall}
