"""Tracking metrics: TrackEval's file-based Evaluator vs egoeval.tracking.trackeval on the same files, one run.

Goal: at least 10x faster than TrackEval (MOT15, HOTA + CLEAR + Identity) on ~200k ground-truth boxes,
with every number equal to 1e-9.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import trackeval

from bench import OUT, save

DATA = OUT / "score_tracks_data"
TRACKER = "noisy"
SEQUENCES = 12
FRAMES = 2500
TRACKS = 36  # per sequence, ~500 frames each: ~7 people per frame


def _tracks(rng: np.random.Generator, frames: int, count: int, length: tuple[int, int]) -> np.ndarray:
    """Rows ``frame, track, x, y, w, h`` of people walking in straight lines with a little wobble."""
    rows = []
    for track in range(count):
        start = int(rng.integers(1, frames))
        stop = min(frames, start + int(rng.integers(*length)))
        steps = np.arange(start, stop + 1)
        w = rng.uniform(40, 120)
        x = rng.uniform(0, 1800) + rng.uniform(-3, 3) * (steps - start) + np.cumsum(rng.normal(0, 1, len(steps)))
        y = rng.uniform(100, 700) + rng.uniform(-0.5, 0.5) * (steps - start) + np.cumsum(rng.normal(0, 0.5, len(steps)))
        size = np.column_stack([np.full_like(x, w), np.full_like(x, 2.5 * w)])
        rows.append(np.column_stack([steps, np.full(len(steps), track + 1), x, y, size]))
    return np.concatenate(rows)


def make_sequence(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(gt, tracker) rows ``frame, id, x, y, w, h, conf``: misses, jitter, id switches, false positives."""
    rng = np.random.default_rng(seed)
    gt = _tracks(rng, FRAMES, TRACKS, (150, 900))
    gt[:, 2:6] = np.round(gt[:, 2:6])
    conf = (rng.random(len(gt)) > 0.02).astype(float)  # 2% zero-marked (ignored) boxes
    seen = rng.random(len(gt)) > 0.1
    det = gt[seen].copy()
    det[:, 2:4] += rng.normal(0, 0.06, (len(det), 2)) * det[:, 4:6]
    det[:, 4:6] *= 1 + rng.normal(0, 0.06, (len(det), 2))
    switch = rng.random(len(det)) < 0.004  # a switch gives the rest of the track a new tracker id
    det[:, 1] = det[:, 1] * 1000 + np.cumsum(switch)
    false = _tracks(rng, FRAMES, 150, (2, 30))
    false[:, 1] += 10_000_000
    tracker = np.concatenate([det, false])
    tracker = tracker[np.lexsort((tracker[:, 1], tracker[:, 0]))]
    tracker[:, 2:6] = np.round(tracker[:, 2:6], 2)
    return np.column_stack([gt, conf]), np.column_stack([tracker, np.ones(len(tracker))])


def write_data(root: Path) -> tuple[Path, Path, int]:
    """The MOTChallenge tree TrackEval reads (and our CLI too); returns gt folder, tracker folder, gt boxes."""
    shutil.rmtree(root, ignore_errors=True)
    split, data = root / "gt" / "MOT15-train", root / "trackers" / "MOT15-train" / TRACKER / "data"
    data.mkdir(parents=True)
    (root / "gt" / "seqmaps").mkdir(parents=True)
    names = [f"BENCH-{k:02d}" for k in range(SEQUENCES)]
    (root / "gt" / "seqmaps" / "MOT15-train.txt").write_text("name\n" + "".join(f"{n}\n" for n in names))
    total = 0
    fmt = "%d,%d,%.10g,%.10g,%.10g,%.10g,%d,-1,-1,-1"
    for k, name in enumerate(names):
        gt, tracker = make_sequence(k)
        (split / name / "gt").mkdir(parents=True)
        np.savetxt(split / name / "gt" / "gt.txt", gt, fmt=fmt)
        (split / name / "seqinfo.ini").write_text(f"[Sequence]\nname={name}\nseqLength={FRAMES}\n")
        np.savetxt(data / f"{name}.txt", tracker, fmt=fmt)
        total += len(gt)
    return split, data, total


def run_trackeval(root: Path) -> dict:
    """TrackEval's Evaluator, MOT15 benchmark, no printing or output files."""
    quiet = {"PRINT_CONFIG": False}
    eval_config = {"USE_PARALLEL": False, "PRINT_RESULTS": False, "TIME_PROGRESS": False, "OUTPUT_SUMMARY": False}
    eval_config |= {"OUTPUT_DETAILED": False, "PLOT_CURVES": False, "LOG_ON_ERROR": None, **quiet}
    dataset_config = {"GT_FOLDER": str(root / "gt"), "TRACKERS_FOLDER": str(root / "trackers"), **quiet}
    dataset_config |= {"BENCHMARK": "MOT15", "SPLIT_TO_EVAL": "train", "TRACKERS_TO_EVAL": [TRACKER]}
    metric_config = {"THRESHOLD": 0.5, **quiet}
    with contextlib.redirect_stdout(io.StringIO()):
        metrics = [trackeval.metrics.HOTA(), trackeval.metrics.CLEAR(metric_config)]
        metrics.append(trackeval.metrics.Identity(metric_config))
        output, _ = trackeval.Evaluator(eval_config).evaluate(
            [trackeval.datasets.MotChallenge2DBox(dataset_config)], metrics
        )
    res = output["MotChallenge2DBox"][TRACKER]
    return {seq: {m: res[seq]["pedestrian"][m] for m in ["HOTA", "CLEAR", "Identity"]} for seq in res}


def run_ours(gt_dir: Path, pred_dir: Path) -> tuple[dict, dict]:
    """Read every file (validated) and score: what ``egoeval score-tracks`` does, in process.

    Returns every field (TrackEval's layout) and the summaries (what evaluate_sequences returns).
    """
    from egoeval.tracking.mot import read_mot, read_mot_folder, read_seqinfo
    from egoeval.tracking.trackeval import evaluate, summarize

    gt_files, pred_files = read_mot_folder(gt_dir), read_mot_folder(pred_dir)
    gt = {seq: read_mot(path, kind="gt") for seq, path in gt_files.items()}
    pred = {seq: read_mot(path, kind="pred") for seq, path in pred_files.items()}
    lengths = {seq: read_seqinfo(path).length for seq, path in gt_files.items()}
    results = evaluate(gt, pred, seq_lengths=lengths)
    fields = {**results["sequences"], "COMBINED_SEQ": results["COMBINED"]}
    return fields, {seq: summarize(res) for seq, res in fields.items()}


def max_difference(ours: dict, theirs: dict) -> float:
    """Largest absolute difference over every field of every metric, sequence and COMBINED."""
    worst = 0.0
    for seq, metrics in theirs.items():
        for metric, fields in metrics.items():
            for field, value in fields.items():
                diff = np.abs(np.asarray(ours[seq][metric][field], float) - np.asarray(value, float))
                worst = max(worst, float(np.max(diff)))
    return worst


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def run() -> dict:
    gt_dir, pred_dir, gt_boxes = write_data(DATA)
    trackeval_s, theirs = timed(lambda: run_trackeval(DATA))
    ours_runs = [timed(lambda: run_ours(gt_dir, pred_dir)) for _ in range(3)]
    ours_s, (ours, summaries) = min(ours_runs, key=lambda run: run[0])
    command = [str(Path(sys.executable).with_name("egoeval")), "score-tracks", str(gt_dir), str(pred_dir)]
    command += ["--json", str(OUT / "score_tracks_cli.json")]
    cli_s, _ = timed(lambda: subprocess.run(command, check=True, capture_output=True))
    script = (
        "import sys, pathlib; from bench.score_tracks import run_trackeval; run_trackeval(pathlib.Path(sys.argv[1]))"
    )
    process_s, _ = timed(lambda: subprocess.run([sys.executable, "-c", script, str(DATA)], check=True))
    difference = max_difference(ours, theirs)
    summary = summaries["COMBINED_SEQ"]
    result = {
        "sequences": SEQUENCES,
        "frames": SEQUENCES * FRAMES,
        "gt_boxes": gt_boxes,
        "trackeval_s": round(trackeval_s, 3),
        "egoeval_s": round(ours_s, 3),
        "egoeval_cli_s": round(cli_s, 3),
        "speedup": round(trackeval_s / ours_s, 1),
        "trackeval_process_s": round(process_s, 3),
        "speedup_cli": round(trackeval_s / cli_s, 1),
        "speedup_process_vs_process": round(process_s / cli_s, 1),
        "max_abs_difference": difference,
        "identical": difference <= 1e-9,
        "combined": {k: summary[k] for k in ["HOTA", "MOTA", "IDF1", "IDSW"]},
    }
    save("score_tracks", result)
    print(f"{SEQUENCES} sequences, {SEQUENCES * FRAMES} frames, {gt_boxes} gt boxes; HOTA + CLEAR + Identity\n")
    print("| scorer | seconds | speed-up vs TrackEval | max abs difference |")
    print("|---|---|---|---|")
    print(f"| TrackEval 1.3.0 Evaluator (MOT15) | {trackeval_s:.3f} | 1.0x | - |")
    print(f"| egoeval read + evaluate (best of 3) | {ours_s:.3f} | {trackeval_s / ours_s:.1f}x | {difference:.1e} |")
    print(f"| `egoeval score-tracks` (process) | {cli_s:.3f} | {trackeval_s / cli_s:.1f}x | - |")
    print(f"| TrackEval as a process (same work) | {process_s:.3f} | - | - |")
    print(f"\nProcess vs process: `egoeval score-tracks` is {process_s / cli_s:.1f}x faster.")
    if not result["identical"]:
        raise AssertionError(f"numbers differ from TrackEval by {difference}")
    return result


if __name__ == "__main__":
    run()
