"""TrackEval (PyPI 1.3.0) as the test oracle: its file-based Evaluator on a MOTChallenge tree, MOT15 rules."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import numpy as np
import trackeval

from egoeval.tracking.base import SequenceData

TRACKER = "oracle"
METRIC_NAMES = ["HOTA", "CLEAR", "Identity", "Count"]


def write_tree(root: Path, gt: dict[str, Path], pred: dict[str, Path], seq_lengths: dict[str, int]) -> None:
    """The MOTChallenge layout TrackEval reads: gt tree with seqinfo.ini, seqmap, tracker data folder.

    A sequence missing from ``pred`` gets an empty tracker file (TrackEval needs one per sequence).
    """
    split = root / "gt" / "MOT15-train"
    data = root / "trackers" / "MOT15-train" / TRACKER / "data"
    data.mkdir(parents=True)
    (root / "gt" / "seqmaps").mkdir(parents=True)
    (root / "gt" / "seqmaps" / "MOT15-train.txt").write_text("name\n" + "".join(f"{s}\n" for s in gt))
    for seq, path in gt.items():
        (split / seq / "gt").mkdir(parents=True)
        shutil.copyfile(path, split / seq / "gt" / "gt.txt")
        (split / seq / "seqinfo.ini").write_text(f"[Sequence]\nname={seq}\nseqLength={seq_lengths[seq]}\n")
        if seq in pred:
            shutil.copyfile(pred[seq], data / f"{seq}.txt")
        else:
            (data / f"{seq}.txt").write_text("")


def run_trackeval(root: Path, threshold: float = 0.5) -> dict:
    """Evaluate the tree under ``root``; returns ``{"sequences": {seq: {metric: res}}, "COMBINED": ...}``."""
    eval_config = {
        "USE_PARALLEL": False,
        "PRINT_RESULTS": False,
        "PRINT_CONFIG": False,
        "TIME_PROGRESS": False,
        "OUTPUT_SUMMARY": False,
        "OUTPUT_DETAILED": False,
        "PLOT_CURVES": False,
        "LOG_ON_ERROR": None,
    }
    dataset_config = {
        "GT_FOLDER": str(root / "gt"),
        "TRACKERS_FOLDER": str(root / "trackers"),
        "OUTPUT_FOLDER": str(root / "out"),
        "BENCHMARK": "MOT15",
        "SPLIT_TO_EVAL": "train",
        "TRACKERS_TO_EVAL": [TRACKER],
        "PRINT_CONFIG": False,
    }
    metric_config = {"THRESHOLD": threshold, "PRINT_CONFIG": False}
    with contextlib.redirect_stdout(io.StringIO()):
        evaluator = trackeval.Evaluator(eval_config)
        dataset = trackeval.datasets.MotChallenge2DBox(dataset_config)
        metrics = [
            trackeval.metrics.HOTA(),
            trackeval.metrics.CLEAR(metric_config),
            trackeval.metrics.Identity(metric_config),
        ]
        output, messages = evaluator.evaluate([dataset], metrics)
    status = messages["MotChallenge2DBox"][TRACKER]
    if status != "Success":
        raise RuntimeError(f"trackeval failed: {status}")
    res = output["MotChallenge2DBox"][TRACKER]

    def pick(r: dict) -> dict:
        return {name: r["pedestrian"][name] for name in METRIC_NAMES}

    return {
        "sequences": {s: pick(r) for s, r in res.items() if s != "COMBINED_SEQ"},
        "COMBINED": pick(res["COMBINED_SEQ"]),
    }


def assert_same(ours: dict, theirs: dict, where: str = "") -> None:
    """Every TrackEval field equal to 1e-9 (counts exactly)."""
    for metric in METRIC_NAMES:
        mine = ours["Count" if metric == "Count" else metric]
        for field, expected in theirs[metric].items():
            got = np.asarray(mine[field], float)
            want = np.asarray(expected, float)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9, err_msg=f"{where} {metric}.{field}")


def sequence_data(
    gt_ids: list[np.ndarray], tracker_ids: list[np.ndarray], similarity_scores: list[np.ndarray]
) -> SequenceData:
    """A SequenceData from TrackEval's layout: per timestep, gt ids, tracker ids and the (gt x tracker) similarity
    matrix (what ``get_preprocessed_seq_data`` returns)."""
    gt_counts = np.array([len(ids) for ids in gt_ids], np.int64)
    tracker_counts = np.array([len(ids) for ids in tracker_ids], np.int64)
    gt_offsets = np.concatenate([[0], np.cumsum(gt_counts)])
    tracker_offsets = np.concatenate([[0], np.cumsum(tracker_counts)])
    rows, cols, values = [np.empty(0, np.int64)], [np.empty(0, np.int64)], [np.empty(0)]
    for t, matrix in enumerate(similarity_scores):
        r, c = np.nonzero(matrix)
        rows.append(r + gt_offsets[t])
        cols.append(c + tracker_offsets[t])
        values.append(matrix[r, c])
    steps = np.arange(len(gt_ids))
    return SequenceData.from_arrays(
        len(gt_ids),
        len(gt_ids),
        np.repeat(steps, gt_counts),
        np.concatenate([np.empty(0, np.int64), *gt_ids]),
        np.repeat(steps, tracker_counts),
        np.concatenate([np.empty(0, np.int64), *tracker_ids]),
        np.concatenate(rows),
        np.concatenate(cols),
        np.concatenate(values),
    )
