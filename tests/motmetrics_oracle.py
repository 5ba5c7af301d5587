"""EgoHumans' official tracking evaluation, run where it ran: the test oracle for the ``official`` protocol.

This file runs only inside the oracle environment that ``tests/oracle_env.py`` builds (Python 3.8, NumPy 1.21.6,
pandas 1.3.5, SciPy 1.7.3, py-motmetrics 1.4.0 and lap 0.4.0 built from its sdist: mmtracking's pins), so it is
written for Python 3.8. With ``lap`` installed py-motmetrics solves every assignment with ``lap.lapjv``, as in
mmtracking's environment. It serves JSON requests, one per line on stdin, one answer per line on stdout:

- ``{"op": "versions"}``: the versions and py-motmetrics' default solver;
- ``{"op": "lapjv", "matrices": [...]}``: ``lap.lapjv(m, extend_cost=True, return_cost=False)[0]`` of each;
- ``{"op": "evaluate", "dataset": {...}, "results": {...}}``: a COCO-video annotation (categories, videos, images,
  annotations) and the tracker rows ``[id, x1, y1, x2, y2, score]`` per image id, read as EgoHumans' dataset class
  reads them and scored by ``eval_mot``: ``{"sequences": {video name: fields}, "COMBINED": fields, "seconds"}``.

Modelled line by line on the code EgoHumans ran (Apache-2.0, Copyright (c) OpenMMLab), rawalkhirodkar/egohumans at
commit 3e8e7ef2f3f9f0a374eeb2793239ee88679cba12, ``egohumans/external/mmtracking/``:
``mmtrack/datasets/mot_challenge_dataset_custom.py`` (``_parse_ann_info`` in test mode; its ``evaluate`` hands
``ego_rgb`` annotations to ``CocoVideoDataset.evaluate``), ``mmtrack/datasets/coco_video_dataset.py`` (image and
annotation order: CocoVID), ``mmtrack/core/evaluation/eval_mot.py`` and ``mmtrack/core/track/transforms.py``
(``outs2results``); mmdet 2.x's ``bbox_overlaps``. One addition: an image without ``width`` (a MOTChallenge
sequence without seqinfo.ini) skips the overlap rule, where the official code would stop.
"""

from __future__ import annotations

import json
import sys
import time
import traceback

import lap
import motmetrics as mm
import numpy as np
import pandas as pd
import scipy
from motmetrics.lap import linear_sum_assignment
from motmetrics.math_util import quiet_divide

CLASSES = ("pedestrian",)  # MOTChallengeDatasetCustom.CLASSES
METRIC_MAPS = {
    "idf1": "IDF1",
    "mota": "MOTA",
    "motp": "MOTP",
    "num_false_positives": "FP",
    "num_misses": "FN",
    "num_switches": "IDSw",
    "recall": "Rcll",
    "precision": "Prcn",
    "mostly_tracked": "MT",
    "partially_tracked": "PT",
    "mostly_lost": "ML",
    "num_fragmentations": "FM",
}
EXTRA = ["idp", "idr", "num_objects", "num_predictions"]  # asked beside mmtracking's, to check ours


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


# --- the dataset: CocoVID order and MOTChallengeDatasetCustom._parse_ann_info ---------------------------------


def parse_ann_info(img_info, ann_info, cat_ids, cat2label):
    """MOTChallengeDatasetCustom._parse_ann_info in test mode (no visibility filter)."""
    gt_bboxes = []
    gt_labels = []
    gt_bboxes_ignore = []
    gt_instance_ids = []
    for ann in ann_info:
        x1, y1, w, h = ann["bbox"]
        if img_info.get("width") is not None:  # the one addition: no image size, no overlap rule
            inter_w = max(0, min(x1 + w, img_info["width"]) - max(x1, 0))
            inter_h = max(0, min(y1 + h, img_info["height"]) - max(y1, 0))
            if inter_w * inter_h == 0:
                continue
        if ann["area"] <= 0 or w < 1 or h < 1:
            continue
        if ann["category_id"] not in cat_ids:
            continue
        bbox = [x1, y1, x1 + w, y1 + h]
        if ann.get("ignore", False) or ann.get("iscrowd", False):
            gt_bboxes_ignore.append(bbox)
        else:
            gt_bboxes.append(bbox)
            gt_labels.append(cat2label[ann["category_id"]])
            gt_instance_ids.append(ann["instance_id"])
    if gt_bboxes:
        gt_bboxes = np.array(gt_bboxes, dtype=np.float32)
        gt_labels = np.array(gt_labels, dtype=np.int64)
        gt_instance_ids = np.array(gt_instance_ids, dtype=np.int64)
    else:
        gt_bboxes = np.zeros((0, 4), dtype=np.float32)
        gt_labels = np.array([], dtype=np.int64)
        gt_instance_ids = np.array([], dtype=np.int64)
    if gt_bboxes_ignore:
        gt_bboxes_ignore = np.array(gt_bboxes_ignore, dtype=np.float32)
    else:
        gt_bboxes_ignore = np.zeros((0, 4), dtype=np.float32)
    return dict(bboxes=gt_bboxes, labels=gt_labels, bboxes_ignore=gt_bboxes_ignore, instance_ids=gt_instance_ids)


def videos_as_mmtracking_reads_them(dataset):
    """``[(video name, [(img_info, ann_info), ...])]``: videos in file order, images by frame_id, each image's
    annotations of the dataset's classes in file order (CocoVID and pycocotools' getAnnIds)."""
    cat_ids = [c["id"] for c in dataset["categories"] if c["name"] in CLASSES]
    anns_of = {}
    for ann in dataset["annotations"]:
        anns_of.setdefault(ann["image_id"], []).append(ann)
    images_of = {}
    for img in dataset["images"]:
        images_of.setdefault(img["video_id"], []).append(img)
    out = []
    for video in dataset["videos"]:
        images = sorted(images_of.get(video["id"], []), key=lambda img: img["frame_id"])
        frames = []
        for img in images:
            anns = [a for a in anns_of.get(img["id"], []) if a["category_id"] in cat_ids]
            frames.append((img, anns))
        if frames:
            out.append((video["name"], frames))
    return out, cat_ids


# --- mmtracking's eval_mot ---------------------------------------------------------------------------------------


def outs2results_gt(gt):
    """``outs2results(bboxes, labels, ids, num_classes=1)['bbox_results'][0]`` for ground truth."""
    ids, labels, bboxes = gt["instance_ids"], gt["labels"], gt["bboxes"]
    valid_inds = ids > -1
    ids, labels, bboxes = ids[valid_inds], labels[valid_inds], bboxes[valid_inds]
    if bboxes.shape[0] == 0:
        return np.zeros((0, 5), dtype=np.float32)
    return np.concatenate((ids[labels == 0, None], bboxes[labels == 0, :]), axis=1)


def bbox_distances(bboxes1, bboxes2, iou_thr=0.5):
    ious = bbox_overlaps(bboxes1, bboxes2, mode="iou")
    distances = 1 - ious
    distances = np.where(distances > iou_thr, np.nan, distances)
    return distances


def acc_single_video(results, gts, iou_thr=0.5, ignore_iof_thr=0.5):
    """eval_mot's ``acc_single_video`` for the one class (``ignore_by_classes=False``)."""
    acc = mm.MOTAccumulator(auto_id=True)
    for result, gt in zip(results, gts):  # noqa: B905 (as written in mmtracking)
        gt_ignore = gt["bboxes_ignore"]
        gt = outs2results_gt(gt)
        gt_ids, gt_bboxes = gt[:, 0].astype(int), gt[:, 1:]
        pred_ids, pred_bboxes = result[:, 0].astype(int), result[:, 1:-1]
        dist = bbox_distances(gt_bboxes, pred_bboxes, iou_thr)
        if gt_ignore.shape[0] > 0:
            fps = np.ones(pred_bboxes.shape[0]).astype(np.bool)
            row, col = linear_sum_assignment(dist)
            for m, n in zip(row, col):  # noqa: B905
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


def evaluate(dataset, results, iou_thr=0.5):
    """CocoVideoDataset.evaluate's track part: per video accumulators, empty ones left out, OVERALL pooled."""
    videos, cat_ids = videos_as_mmtracking_reads_them(dataset)
    cat2label = {cat_id: i for i, cat_id in enumerate(cat_ids)}
    names, accs = [], []
    for name, frames in videos:
        gts = [parse_ann_info(img, anns, cat_ids, cat2label) for img, anns in frames]
        preds = [np.array(results.get(str(img["id"]), []), dtype=np.float64).reshape(-1, 6) for img, _ in frames]
        acc = acc_single_video(preds, gts, iou_thr)
        if len(acc._events["Type"]) == 0:  # aggregate_accs
            continue
        names.append(name)
        accs.append(acc)
    if not accs:
        return {"sequences": {}, "COMBINED": None}
    mh = mm.metrics.create()
    summary = mh.compute_many(accs, names=names, metrics=[*METRIC_MAPS, *EXTRA], generate_overall=True)
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


# --- the server ----------------------------------------------------------------------------------------------------


def plain(value):
    """JSON-ready: NumPy scalars to Python numbers, NaN and infinity to strings."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (np.integer, int)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value) if np.isfinite(value) else str(float(value))
    return value


def answer(request):
    op = request["op"]
    if op == "versions":
        return {
            "python": sys.version.split()[0],
            "numpy": np.__version__,
            "pandas": pd.__version__,
            "scipy": scipy.__version__,
            "motmetrics": mm.__version__,
            "lap": lap.__version__,
            "solver": mm.lap.default_solver,
        }
    if op == "lapjv":
        out = []
        for matrix in request["matrices"]:
            cost = np.array(matrix, dtype=np.float64).reshape(len(matrix), -1)
            out.append(lap.lapjv(cost, extend_cost=True, return_cost=False)[0].tolist())
        return {"x": out}
    if op == "evaluate":
        start, cpu = time.perf_counter(), time.process_time()
        result = evaluate(request["dataset"], request["results"], request.get("iou_thr", 0.5))
        result["seconds"] = time.perf_counter() - start
        result["cpu_seconds"] = time.process_time() - cpu
        return result
    raise ValueError(f"unknown op {op!r}")


def main():
    for line in sys.stdin:
        try:
            reply = plain(answer(json.loads(line)))
        except Exception:
            reply = {"error": traceback.format_exc()}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
