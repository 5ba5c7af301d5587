"""Cross-view scoring of EgoHumans runs beside the per-camera protocols: its entry in ``metrics/egohumans.json``,
its section of the report and its lines of ``egoeval compare`` (the metrics are ``egoeval.tracking.crossview``).

Each run gets ``cross_view``: ``{"ids": "global" | "per camera", "COMBINED": entry, "takes": {take: entry}}``, an
entry being ``{"camera": {IDF1, IDP, IDR, IDTP, IDFN, IDFP, ci95}, "world": {HOTA, DetA, AssA, LocA, MOTA, MOTP,
IDF1, IDP, IDR, IDSW, FP, FN, ..., distance_m, ci95} or None}``. ``camera`` is the multi-camera identity over every
camera of a take; ``world`` tracking on each run's world points (None where the take has no 3D ground truth or the
run's boxes carry no world points). Ground truth is read as TrackEval reads it (ignore boxes dropped). A take's
cameras are its videos (fetch's ``take`` of each image); the 3D ground truth is fetch's ``world_roots.parquet`` (the
official ``fit_poses3d``), kept at the time stamps where some camera sees the person.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from egoeval.core.errors import InputError
from egoeval.core.io.bounded import read_parquet
from egoeval.egohumans.artifacts import WORLD_POINTS
from egoeval.markup import esc, table
from egoeval.tracking.crossview import CameraView, CrossViewSettings, evaluate_take, summarize_takes
from egoeval.tracking.mot import WORLD_COLUMNS, MotTable
from egoeval.tracking.trackeval import kept_ground_truth


def _views(
    gt: dict[str, pd.DataFrame], pred: dict[str, pd.DataFrame], images: pd.DataFrame
) -> dict[str, list[tuple[str, CameraView]]]:
    """Per take, its cameras (sequence name, view) in name order."""
    takes: dict[str, list[tuple[str, CameraView]]] = {}
    known = images.dropna(subset=["time_stamp"])
    for sequence, rows in known[known["take"] != ""].groupby("sequence", sort=True):
        if sequence not in gt:
            continue
        stamps = dict(zip(rows["frame"].astype(int), rows["time_stamp"].astype(int), strict=True))
        view = CameraView(kept_ground_truth(gt[sequence]), pred[sequence], stamps)
        takes.setdefault(str(rows["take"].iat[0]), []).append((str(sequence), view))
    return takes


def _world_truth(take: str, views: list[CameraView], roots: pd.DataFrame) -> pd.DataFrame | None:
    """The take's people at the time stamps where some camera sees them, with their roots; None: no 3D truth."""
    mine = roots[roots["take"] == take]
    if mine.empty:
        return None
    tables = [(v, MotTable.of(v.gt)) for v in views]
    seen = pd.concat(
        [pd.DataFrame({"time_stamp": [v.time_stamp[int(f)] for f in t.frame], "person": t.id}) for v, t in tables],
        ignore_index=True,
    ).drop_duplicates()
    return seen.merge(mine[["time_stamp", "person", *WORLD_COLUMNS]], on=["time_stamp", "person"], how="inner")


def cross_view_scores(
    gt: dict[str, pd.DataFrame],
    runs: dict[str, dict[str, pd.DataFrame]],
    images: pd.DataFrame,
    roots: pd.DataFrame,
    global_ids: dict[str, bool],
    settings: CrossViewSettings,
) -> dict[str, dict[str, Any]]:
    """Each run's ``cross_view`` entry (see the module docstring). ``gt``: every ground-truth row by sequence
    (``conf == 0`` marks ignore boxes); ``runs``: each run's rows by sequence, with WORLD_COLUMNS; ``images``:
    fetch's sequence, frame, take, time_stamp; ``roots``: fetch's world_roots table."""
    out = {}
    for run, pred in runs.items():
        takes = _views(gt, pred, images)
        if not takes:
            continue
        results = {}
        for take, members in takes.items():
            views = [view for _, view in members]
            results[take] = evaluate_take(views, _world_truth(take, views, roots), global_ids[run], settings)
        out[run] = {"ids": "global" if global_ids[run] else "per camera", **summarize_takes(results, settings)}
    return out


# ----------------------------------------------------------------------------------------- report and compare


def _cell(entry: dict[str, Any] | None, metric: str) -> str:
    if not entry or not isinstance(entry.get(metric), int | float):
        return "–"
    interval = (entry.get("ci95") or {}).get(metric)
    shown = f"{entry[metric]:.1f}"
    return shown + (f' <span class="ci">[{interval[0]:.1f}, {interval[1]:.1f}]</span>' if interval else "")


def report_section(metrics: dict[str, Any], runs: list[str], distance_m: float) -> str:
    """The report's cross-view section: per run, multi-camera IDF1/IDP/IDR and world-frame HOTA/MOTA/IDF1 with their
    intervals, combined over takes (HTML)."""
    rows = []
    for run in runs:
        found = metrics.get(run, {}).get("cross_view")
        if not found:
            continue
        camera, world = found["COMBINED"]["camera"], found["COMBINED"]["world"]
        cells = [_cell(camera, m) for m in ("IDF1", "IDP", "IDR")]
        cells += [_cell(world, m) for m in ("HOTA", "MOTA", "IDF1")]
        rows.append([esc(run), esc(found["ids"]), *cells])
    if not rows:
        return ""
    names = ("run", "ids", "cameras IDF1", "IDP", "IDR", "world HOTA", "world MOTA", f"world IDF1 (≤ {distance_m:g} m)")
    return (
        '<section id="egohumans-crossview"><h2>EgoHumans: across views</h2>'
        "<p>Identity over every camera of a take at once (multi-camera IDF1, IDP, IDR: one global match between "
        "people and tracker identities over all cameras' boxes) and tracking in the world frame on each run's world "
        "points (HOTA over distance thresholds, MOTA and IDF1 at the distance shown), combined over takes, with 95% "
        "block-bootstrap intervals. World points are where the world, multi-view and linked trackers place each "
        "person from the boxes, the cameras and the wearers' trajectories, or the metric roots of the user's own "
        "detections; no tracker reads the ground truth's 3D. "
        "A per-camera tracker's ids are its own per camera, which caps its multi-camera IDF1 near one camera's share "
        "of each person; <code>linked</code> is the baseline with global ids. No published numbers exist for these "
        "metrics.</p>"
        f"{table(names, rows, 'tracking crossview')}</section>"
    )


def check_metrics_shape(metrics: Any, path: Path) -> None:
    """``metrics/egohumans.json`` as an input (the report, ``egoeval compare``): each run an object with its
    ``COMBINED`` and ``sequences`` objects, a ``cross_view`` entry (where there is one) with ``ids`` and a
    ``COMBINED`` whose ``camera`` is an object and ``world`` an object or null, each take's likewise; else
    InputError naming the file and key. (The values themselves: ``egoeval.reported.check_metric_values``.)"""

    def need(ok: bool, key: str, what: str) -> None:
        if not ok:
            raise InputError(path, f"key {key}: {what}")

    def scores(entry: Any, key: str) -> None:
        need(isinstance(entry, dict), key, "expected an object with camera and world")
        need(isinstance(entry.get("camera"), dict), f"{key}/camera", "expected an object of multi-camera scores")
        need(entry.get("world") is None or isinstance(entry["world"], dict), f"{key}/world", "an object or null")

    for run, entry in metrics.items():
        need(isinstance(entry, dict), run, "expected a run's entry (COMBINED, sequences, ...)")
        for part in ("COMBINED", "sequences"):
            need(isinstance(entry.get(part), dict), f"{run}/{part}", "missing or not an object")
        cross = entry.get("cross_view")
        if cross is None:
            continue
        need(isinstance(cross, dict), f"{run}/cross_view", "expected an object with ids, COMBINED and takes")
        need(cross.get("ids") in ("global", "per camera"), f"{run}/cross_view/ids", "'global' or 'per camera'")
        scores(cross.get("COMBINED"), f"{run}/cross_view/COMBINED")
        takes = cross.get("takes", {})
        need(isinstance(takes, dict), f"{run}/cross_view/takes", "expected an object of takes")
        for take, scored in takes.items():
            scores(scored, f"{run}/cross_view/takes/{take}")


def compare_lines(metrics: dict[str, Any]) -> str:
    """The cross-view lines of ``egoeval compare``: our runs only (nothing published to stand beside)."""
    lines = ["\nAcross views (no published numbers exist for these metrics):"]
    lines.append(f"  {'run':<20} {'ids':<10} {'cam IDF1':>9} {'world HOTA':>11} {'world MOTA':>11} {'world IDF1':>11}")
    found = False
    for run, entry in sorted(metrics.items()):
        cross = entry.get("cross_view") if isinstance(entry, dict) else None
        if not cross:
            continue
        found = True
        camera, world = cross["COMBINED"]["camera"], cross["COMBINED"]["world"] or {}

        def number(entry: dict[str, Any], key: str, width: int) -> str:
            value = entry.get(key)
            finite = isinstance(value, int | float) and np.isfinite(value)
            return f"{value:>{width}.2f}" if finite else f"{'–':>{width}}"

        lines.append(
            f"  {run:<20} {cross['ids']:<10} {number(camera, 'IDF1', 9)} {number(world, 'HOTA', 11)} "
            f"{number(world, 'MOTA', 11)} {number(world, 'IDF1', 11)}"
        )
    return "\n".join(lines) if found else ""


def with_world_points(pred: dict[str, pd.DataFrame], run_dir: Path) -> dict[str, pd.DataFrame]:
    """A run's rows by sequence with the world point of each box (WORLD_COLUMNS, NaN where it has none) from the
    run folder's world.parquet (the track stage writes it; a folder without one has no world points)."""
    path = run_dir / WORLD_POINTS
    if not path.is_file():
        return {name: rows.assign(**dict.fromkeys(WORLD_COLUMNS, np.nan)) for name, rows in pred.items()}
    try:
        points = read_parquet(path, ["sequence", "frame", "id", *WORLD_COLUMNS])
    except (OSError, ValueError, KeyError) as err:
        raise InputError(path, f"not a readable world points table: {err}") from None
    if points.duplicated(["sequence", "frame", "id"]).any():
        row = points[points.duplicated(["sequence", "frame", "id"])].iloc[0]
        raise InputError(path, "a box's world point appears twice", row=f"{row['sequence']} frame {row['frame']}")
    by_sequence = dict(tuple(points.groupby("sequence")))
    out = {}
    for name, rows in pred.items():
        mine = by_sequence.get(name, points.iloc[:0])[["frame", "id", *WORLD_COLUMNS]]
        out[name] = rows.merge(mine, on=["frame", "id"], how="left", validate="one_to_one")
    return out


def cross_view_runs(
    params: Any, gt: dict[str, pd.DataFrame], runs: dict[str, dict[str, pd.DataFrame]], fetched: Path, tracks: Path
) -> dict[str, dict[str, Any]]:
    """``cross_view_scores`` of the score stage's runs: ``params`` is ``egohumans`` of the settings, ``fetched`` fetch's
    folder (images.parquet, world_roots.parquet), ``tracks`` the folder of the run folders (their world points)."""
    from egoeval.egohumans.trackers import TAKE_TRACKERS  # the score stage's only (the report's needs no tracker)

    runs = {run: with_world_points(pred, tracks / run) for run, pred in runs.items()}
    settings = params.score.cross_view
    images = read_parquet(fetched / "images.parquet", ["sequence", "frame", "take", "time_stamp"])
    roots = read_parquet(fetched / "world_roots.parquet")
    config = params.track.config
    kinds = {f"{t}-{m}": config[t].tracker_type for t in params.track.trackers for m in params.detect.modes}
    return cross_view_scores(
        gt,
        runs,
        images,
        roots,
        {run: kinds.get(run) in TAKE_TRACKERS for run in runs},  # ids global over a take's cameras
        CrossViewSettings(
            iou_threshold=params.score.iou_threshold,
            distance_m=settings.distance_m,
            zero_distance_m=settings.zero_distance_m,
            block=settings.bootstrap_block,
            samples=settings.bootstrap_samples,
            seed=settings.bootstrap_seed,
            confidence=settings.confidence,
        ),
    )
