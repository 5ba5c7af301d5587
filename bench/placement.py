"""EgoHumans in 3D from what the download gives, and the trackers that stand on it: one run, two tables.

1. Each source of a person's place in the world frame against the ground truth (fit_poses3d's pelvis, read here
   only, never by a tracker), on the bundled sample: median and 90th-percentile error in metres and the boxes
   measured. The geometric sources (``egoeval.egohumans.trackers.placement``: the foot on the ground plane the
   wearers' trajectories give, the height prior, the two fused) on the ground-truth boxes (their ids name the
   person); the metric roots of the user's own detections (the sample's simulated detector, about 10 % depth error:
   detection mode ``file``) and those roots fused with the geometry on the detector's boxes that overlap a
   ground-truth box (IoU >= 0.5, the best one); and the released pickle's ``roots_3d`` decoded (``released_depth``,
   a relative inverse depth) with the best scale per frame an oracle could fit (no tracker reads them).
2. Every configured tracker (params.yaml ``egohumans.track``) in modes ``gt`` and ``file`` on the sample and on two
   unseen seeds with more people, several exo cameras and a lower frame rate (``SEEDS``): per-camera IDF1 and HOTA
   (the score stage's protocol), world-frame MOTA and multi-camera IDF1 (its cross-view scores). Goal: the
   multi-view tracker's per-camera IDF1 at least the ego-motion tracker's, its multi-camera IDF1 at least
   ``GOAL_POINTS`` above the linked baseline's, on every data set.

Each data set is generated, fetched and detected in a temporary copy by the project's own stages, exactly as
``dvc repro`` would; tracking and scoring run in process through the stages' library functions (``gt`` mode: the
ground-truth boxes with score 1 and nothing more). ``python -m bench.placement`` prints both tables and
writes bench/out/placement.json; BENCHMARKS.md holds them and tests/test_placement.py re-derives the sample's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from bench import save
from egoeval.core.settings import load_settings
from egoeval.core.stage_shell import command_env
from egoeval.egohumans.crossview import cross_view_runs
from egoeval.egohumans.formats import RELEASED_DEPTH, ROOT_COLUMNS, WORLD_COLUMNS
from egoeval.egohumans.scoring import read_runs, run_names, score_runs
from egoeval.egohumans.trackers.placement import (
    Priors,
    by_height,
    camera_centre,
    foot_on_ground,
    from_roots,
    fuse,
    take_planes,
)
from egoeval.egohumans.tracking import camera_poses, track
from egoeval.tracking.mot import read_mot

REPO = Path(__file__).resolve().parents[1]
MODES = ("gt", "file")
SEEDS = {  # unseen data sets: egohumans.sample settings over the sample's own (seed 7, 5 people, 1 exo, 30 fps)
    "seed 11 (8 people, 3 exo, 15 fps)": {"seed": 11, "people": 8, "exo_cameras": 3, "fps": 15, "frames": 60},
    "seed 23 (12 people, 4 exo, 10 fps)": {"seed": 23, "people": 12, "exo_cameras": 4, "fps": 10, "frames": 40},
    "seed 11 (the sample's settings, 2 takes)": {"seed": 11, "sequences": 2},  # tests/test_egomotion.py's
    "seed 23 (the sample's settings, 2 takes)": {"seed": 23, "sequences": 2},
}
SAMPLE = "sample"
MATCH_IOU = 0.5
GOAL_POINTS = 5.0
SOURCES = ("foot on ground", "height prior", "fused (boxes only)", "file-mode metric roots", "file roots fused")
RELEASED = "released roots, best scale per frame"  # the released pickle's relative depth decoded


def prepare(work: Path, sample: dict[str, Any] | None = None) -> Path:
    """A copy of this repository's params in ``work`` (``sample``: egohumans.sample settings changed), the data
    generated, fetched and detected (modes gt and file) by the project's stages; returns ``work``."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["egohumans"]["sample"] |= sample or {}
    params["egohumans"]["detect"]["modes"] = list(MODES)
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    commands = [["stages.egohumans.sample"], ["stages.egohumans.fetch"]]
    commands += [["stages.egohumans.detect", "--mode", mode] for mode in MODES]
    for command in commands:
        subprocess.run([sys.executable, "-m", *command], cwd=work, env=command_env(), check=True, capture_output=True)
    return work


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) IoU of ``x, y, w, h`` boxes."""
    lo = np.maximum(a[:, None, :2], b[None, :, :2])
    hi = np.minimum(a[:, None, :2] + a[:, None, 2:], b[None, :, :2] + b[None, :, 2:])
    inter = np.prod(np.clip(hi - lo, 0, None), axis=2)
    return inter / (a[:, None, 2] * a[:, None, 3] + b[None, :, 2] * b[None, :, 3] - inter)


def _summary(errors: list[float]) -> dict[str, Any]:
    values = np.asarray(errors, dtype=np.float64)
    return {"n": len(values), "median_m": float(np.median(values)), "p90_m": float(np.quantile(values, 0.9))}


def placement_errors(work: Path) -> dict[str, dict[str, Any]]:
    """Each source's 3D error against the ground truth on the data set prepared in ``work`` (SOURCES order)."""
    fetched = work / "data/egohumans/fetched"
    config = load_settings(work / "params.yaml").egohumans.track.config["world"]
    priors = Priors.of(config.model_dump())
    images = pd.read_parquet(fetched / "images.parquet")
    cameras = camera_poses(images, fetched / "images.parquet")
    planes = take_planes(images, cameras, priors.eye_height_m)
    truth = pd.read_parquet(fetched / "world_roots.parquet").set_index(["take", "time_stamp", "person"])
    detections = dict(tuple(pd.read_parquet(work / "data/egohumans/detections/file.parquet").groupby("sequence")))
    official = pd.read_parquet(fetched / "detections_official.parquet")
    released = dict(tuple(official.groupby("sequence"))) if RELEASED_DEPTH in official.columns else None
    errors: dict[str, list[float]] = {source: [] for source in SOURCES} | ({RELEASED: []} if released else {})
    for sequence, frames in images.groupby("sequence", sort=True):
        take = str(frames["take"].iloc[0])
        size = (float(frames["width"].iloc[0]), float(frames["height"].iloc[0]))
        stamps = dict(zip(frames["frame"].astype(int), frames["time_stamp"].astype(int), strict=True))
        gt = dict(tuple(read_mot(fetched / "gt" / f"{sequence}.txt", kind="gt").groupby("frame")))
        found = dict(tuple(detections.get(sequence, pd.DataFrame(columns=["frame"])).groupby("frame")))
        for frame, boxes in gt.items():
            pose = cameras.get(sequence, {}).get(int(frame))
            if pose is None:
                continue
            where = truth.loc[[(take, stamps[int(frame)], int(p)) for p in boxes["id"]], WORLD_COLUMNS].to_numpy()
            corners = boxes[["x", "y", "w", "h"]].to_numpy(np.float64)
            foot = foot_on_ground(pose, corners, size, planes[take], priors)
            height = by_height(pose, corners, size, priors)
            estimates = {SOURCES[0]: foot, SOURCES[1]: height, SOURCES[2]: fuse(foot, height)}
            for source, (points, _) in estimates.items():
                known = np.isfinite(points).all(axis=1)
                errors[source] += np.linalg.norm(points[known] - where[known], axis=1).tolist()
            if released is not None:
                errors[RELEASED] += _released_errors(pose, released.get(sequence), int(frame), corners, where)
            mine = found.get(frame)
            if mine is None:
                continue
            overlap = _iou(mine[["x", "y", "w", "h"]].to_numpy(np.float64), corners)
            best = overlap.argmax(axis=1)
            matched = overlap.max(axis=1) >= MATCH_IOU
            if not matched.any():
                continue
            boxes_found = mine[["x", "y", "w", "h"]].to_numpy(np.float64)[matched]
            roots = mine[ROOT_COLUMNS].to_numpy(np.float64)[matched]
            metric = from_roots(pose, roots, priors)
            fused = fuse(
                foot_on_ground(pose, boxes_found, size, planes[take], priors),
                by_height(pose, boxes_found, size, priors),
                metric,
            )
            for source, (points, _) in {SOURCES[3]: metric, SOURCES[4]: fused}.items():
                known = np.isfinite(points).all(axis=1)
                errors[source] += np.linalg.norm(points[known] - where[best[matched]][known], axis=1).tolist()
    return {source: _summary(values) for source, values in errors.items()}


def _released_errors(
    pose: Any, official: pd.DataFrame | None, frame: int, corners: np.ndarray, where: np.ndarray
) -> list[float]:
    """The errors of one frame's released roots decoded (``released_depth``: the mean over the box of a relative
    inverse depth, MiDaS's kind), placed on the box centre's ray at the depth ``scale / released_depth``, with the one
    scale per frame that fits the ground truth best (least squares: an oracle's scale, more than a user has). The
    released boxes are the ground-truth boxes: matched by IoU."""
    rows = None if official is None else official[official["frame"] == frame].dropna(subset=[RELEASED_DEPTH])
    if rows is None or rows.empty:
        return []
    boxes = rows[["x", "y", "w", "h"]].to_numpy(np.float64)
    overlap = _iou(boxes, corners)
    keep = (overlap.max(axis=1) >= MATCH_IOU) & (rows[RELEASED_DEPTH].to_numpy(np.float64) > 0)
    if not keep.any():
        return []
    boxes, truth = boxes[keep], where[overlap.argmax(axis=1)[keep]]
    rays = pose.camera.unproject(boxes[:, :2] + boxes[:, 2:] / 2) @ pose.rotation  # z = 1: depth along the axis
    steps = rays / rows[RELEASED_DEPTH].to_numpy(np.float64)[keep][:, None]
    centre = camera_centre(pose)
    scale = float(np.sum(steps * (truth - centre)) / max(float(np.sum(steps * steps)), 1e-12))
    return np.linalg.norm(centre + scale * steps - truth, axis=1).tolist()


def tracker_scores(work: Path, *, tracked: bool = False) -> dict[str, dict[str, float]]:
    """Every configured tracker x mode on the data set prepared in ``work``: per-camera IDF1 and HOTA, world-frame
    MOTA and multi-camera IDF1 (percentages), from the track and score stages' library functions. ``tracked``: the
    tracks are already in ``work`` (the track stages' outputs, the same ``track`` calls), only scored."""
    params = load_settings(work / "params.yaml").egohumans
    fetched, tracks = work / "data/egohumans/fetched", work / "data/egohumans/tracks"
    data_root = work / params.fetch.path  # frames are read only inside it
    for name in params.track.trackers if not tracked else ():
        for mode in MODES:
            detections = work / f"data/egohumans/detections/{mode}.parquet"
            track(name, params.track.config[name], detections, fetched, tracks / f"{name}-{mode}", data_root)
    gt, runs = read_runs(fetched / "gt", tracks, run_names(params))
    results = score_runs(gt, runs, params.score)
    crossview = cross_view_runs(params, gt, runs, fetched, tracks)
    table = {}
    for run, result in results.items():
        combined, cross = result["COMBINED"], crossview[run]["COMBINED"]
        table[run] = {
            "IDF1": float(combined["IDF1"]),
            "HOTA": float(combined["HOTA"]),
            "world MOTA": float((cross["world"] or {}).get("MOTA", np.nan)),  # None: no world points
            "multi-camera IDF1": float(cross["camera"]["IDF1"]),
        }
    return table


def measure(work: Path, sample: dict[str, Any] | None = None) -> dict[str, Any]:
    """Both tables on one data set, prepared in the empty folder ``work``."""
    prepare(work, sample)
    return {"placement": placement_errors(work), "trackers": tracker_scores(work)}


def goals(trackers: dict[str, dict[str, float]], mode: str) -> dict[str, Any]:
    """The goal's two comparisons in ``mode``: multiview's per-camera IDF1 minus egomotion's; its multi-camera IDF1
    minus the linked baseline's (goal: >= 0 and >= GOAL_POINTS)."""
    multiview, egomotion, linked = (trackers[f"{t}-{mode}"] for t in ("multiview", "egomotion", "linked"))
    per_camera = multiview["IDF1"] - egomotion["IDF1"]
    cross = multiview["multi-camera IDF1"] - linked["multi-camera IDF1"]
    return {"per_camera_gap": per_camera, "cross_gap": cross, "met": per_camera >= 0 and cross >= GOAL_POINTS}


def placement_markdown(placement: dict[str, dict[str, Any]]) -> str:
    lines = ["| source | median error (m) | p90 error (m) | boxes |", "|---|---:|---:|---:|"]
    for source, row in placement.items():
        lines.append(f"| {source} | {row['median_m']:.2f} | {row['p90_m']:.2f} | {row['n']:,} |")
    return "\n".join(lines)


def _cell(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:.1f}"


def tracker_markdown(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| data | run | IDF1 | HOTA | world MOTA | multi-camera IDF1 |", "|---|---|---:|---:|---:|---:|"]
    for data, result in results.items():
        for run, row in result["trackers"].items():
            cells = " | ".join(_cell(row[k]) for k in ("IDF1", "HOTA", "world MOTA", "multi-camera IDF1"))
            lines.append(f"| {data} | {run} | {cells} |")
    return "\n".join(lines)


def goal_markdown(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| data | mode | multiview - egomotion IDF1 | multiview - linked multi-camera IDF1 | goal |",
        "|---|---|---:|---:|---|",
    ]
    for data, result in results.items():
        for mode in MODES:
            gap = goals(result["trackers"], mode)
            met = "met" if gap["met"] else "not met"
            lines.append(f"| {data} | {mode} | {gap['per_camera_gap']:+.1f} | {gap['cross_gap']:+.1f} | {met} |")
    return "\n".join(lines)


def run() -> dict[str, Any]:
    results = {}
    for data, sample in {SAMPLE: None, **SEEDS}.items():
        with tempfile.TemporaryDirectory(prefix="egoeval-bench-placement-") as folder:
            work = Path(folder)
            results[data] = measure(work, sample)
            shutil.rmtree(work / "data", ignore_errors=True)
    print("3D error on the sample\n")
    print(placement_markdown(results[SAMPLE]["placement"]))
    print("\nTrackers\n")
    print(tracker_markdown(results))
    print("\nGoal\n")
    print(goal_markdown(results))
    save("placement", results)
    return results


if __name__ == "__main__":
    run()
