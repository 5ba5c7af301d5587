"""The egohumans_track stage's work: one configured tracker (``egoeval.egohumans.trackers``) fed with a detections
table, one MOTChallenge file per sequence.

The tracker gets the boxes frame by frame (every frame of the sequence, empty ones too). Camera motion compensation
(``gmc_method`` other than ``none``, BoT-SORT and the others that have it) gets each frame's image, read from the
fetched frames; appearance ReID (``with_reid``) is refused by the settings: it would need a model download.
egoeval's own trackers (``egomotion``: the head rotation; ``world``: a Kalman filter on each person's place in the
world frame) read each frame's camera pose from fetch's images table; the world tracker places each box's person
from the download's own inputs (``egoeval.egohumans.trackers.placement``: the foot on its take's floor, the height
prior, metric roots only where the user's own ``file`` detections carry them). A fresh tracker per sequence; track
ids start at 1; ``multiview`` and ``linked`` track each take's sequences at once
(egoeval.egohumans.trackers.multiview). Each run folder also holds ``world.parquet``: the world point of every box
that has one (the world tracker's placed point, the multi-view and linked trackers' fused one, else its detection's
metric root), which the MOTChallenge files leave at ``-1, -1, -1`` (TrackEval reads that column as the class).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import write_parquet
from egoeval.core.io.bounded import read_json, read_parquet
from egoeval.core.io.commit import replaced_dir
from egoeval.core.io.paths import data_roots
from egoeval.egohumans.artifacts import DETECTIONS, FETCHED, TRACKS, WORLD_POINTS
from egoeval.egohumans.exo import camera_pose
from egoeval.egohumans.formats import ROOT_COLUMNS, read_detections_parquet
from egoeval.egohumans.settings import EgoHumansSettings, TrackerConfig
from egoeval.egohumans.trackers import make_tracker, places_people, tracks_takes, uses_cameras, uses_frames
from egoeval.egohumans.trackers.egomotion import CameraPose
from egoeval.egohumans.trackers.multiview import METRIC_COLUMNS, check_views, link_views, local_settings
from egoeval.egohumans.trackers.placement import GroundPlane, Priors, place, take_planes
from egoeval.tracking.mot import write_mot
from egoeval.video import read_pinned_image

MOT_COLUMNS = ["frame", "id", "x", "y", "w", "h", "conf", *ROOT_COLUMNS]  # the world point: its detection's root
WORLD_POINT_COLUMNS = ["sequence", "frame", "id", *ROOT_COLUMNS]


@dataclass(frozen=True)
class Boxes:
    """The detections of one frame in the shape ultralytics trackers read (numpy, boolean-mask indexable)."""

    xywh: np.ndarray  # (N, 4) centre x, centre y, width, height
    conf: np.ndarray  # (N,)
    cls: np.ndarray  # (N,)
    root: np.ndarray  # (N, 3) world root, NaN where unknown (read by the world tracker only)
    root_error: np.ndarray  # (N, 3, 3) its covariance

    @property
    def xyxy(self) -> np.ndarray:
        centre, size = self.xywh[:, :2], self.xywh[:, 2:]
        return np.concatenate([centre - size / 2, centre + size / 2], axis=1)

    def __len__(self) -> int:
        return len(self.conf)

    def __getitem__(self, index: Any) -> Boxes:
        return Boxes(self.xywh[index], self.conf[index], self.cls[index], self.root[index], self.root_error[index])


def camera_poses(images: pd.DataFrame, path: Path) -> dict[str, dict[int, CameraPose]]:
    """Per sequence, frame -> camera pose from fetch's images table (extrinsics; Aria calibration intrinsics, or an
    exo camera's COLMAP model: ``egoeval.egohumans.exo``)."""
    missing = [c for c in ("extrinsics", "calib_intrinsics", "camera_model") if c not in images.columns]
    if missing:
        raise InputError(path, f"the egomotion tracker needs the columns {missing} (fetch the calibration too)")
    poses: dict[str, dict[int, CameraPose]] = {}
    for row in images.itertuples(index=False):
        if row.calib_intrinsics is None or row.extrinsics is None or not len(row.extrinsics):
            continue  # no calibration for this frame: the tracker carries its boxes over the gap
        try:
            pose = camera_pose(row.calib_intrinsics, row.extrinsics, row.camera_model)
        except ValueError as error:
            raise InputError(path, f"camera of frame {row.frame}: {error}", row=row.sequence) from None
        poses.setdefault(str(row.sequence), {})[int(row.frame)] = pose
    return poses


def track_sequence(
    config: TrackerConfig,
    detections: pd.DataFrame,
    length: int,
    frames: dict[int, Callable[[], np.ndarray]] | None = None,
    cameras: dict[int, CameraPose] | None = None,
    ground: tuple[GroundPlane | None, tuple[float, float]] | None = None,
) -> pd.DataFrame:
    """Track one sequence of ``length`` frames; ``detections`` holds its rows (frame, x, y, w, h, score).

    ``frames`` (frame -> a reader of its image: ``egoeval.video.read_pinned_image`` of the frame's path, pinned
    sha256 and data root) is needed when the tracker compensates camera motion from the images; ``cameras`` (frame
    -> camera pose) when it follows the known head rotation (``egomotion``, ``world``);
    ``ground`` (its take's ground plane and the image size) when it places people in the world (``world``).
    """
    tracker = make_tracker(config)
    if length == 0:  # a camera that never sees anyone: the download has no image of it, so no tracks
        columns = [*MOT_COLUMNS, *METRIC_COLUMNS]
        return pd.DataFrame({c: np.zeros(0, np.int64 if c in ("frame", "id") else np.float64) for c in columns})
    if uses_cameras(config) and not cameras:
        raise ValueError(f"the {config.tracker_type} tracker needs each frame's camera pose (cameras)")
    need_images = uses_frames(config)
    if need_images and frames is None:
        raise ValueError(f"gmc_method {config.gmc_method} needs each frame's image (frames)")
    detections = detections.sort_values("frame", kind="mergesort")
    frame_of = detections["frame"].to_numpy(np.int64)
    xywh = detections[["x", "y", "w", "h"]].to_numpy(np.float32, copy=True)
    xywh[:, :2] += xywh[:, 2:] / 2
    conf = detections["score"].to_numpy(np.float32)
    corners = detections[["x", "y", "w", "h"]].to_numpy(np.float64)
    metric = detections.reindex(columns=ROOT_COLUMNS).to_numpy(np.float64)  # the user's own detections' roots
    roots = metric.copy()  # where each box's person is placed (the world tracker), else its metric root
    errors = np.full((len(roots), 3, 3), np.nan)
    bounds = np.searchsorted(frame_of, np.arange(1, length + 2))
    places = places_people(config)
    priors = Priors.of(config.model_dump()) if places else None
    plane, size = ground if ground is not None else (None, (np.inf, np.inf))
    rows = []
    for frame in range(1, length + 1):
        lo, hi = bounds[frame - 1], bounds[frame]
        image = None
        if need_images:
            reader = frames.get(frame)
            if reader is None:
                raise InputError(f"frame {frame}", "no image of this frame (needed by gmc_method)")
            image = reader()
        if cameras is not None and hasattr(tracker, "camera"):
            tracker.camera = cameras.get(frame)
        if places and tracker.camera is not None and hi > lo:
            roots[lo:hi], errors[lo:hi] = place(tracker.camera, corners[lo:hi], metric[lo:hi], size, plane, priors)
        boxes = Boxes(xywh[lo:hi], conf[lo:hi], np.zeros(hi - lo, dtype=np.float32), roots[lo:hi], errors[lo:hi])
        out = tracker.update(boxes, image)
        if len(out):
            out = np.asarray(out, dtype=np.float64)
            source = out[:, 7].astype(np.int64)  # the detection each box comes from
            box = [out[:, :2], out[:, 2:4] - out[:, :2]]
            placed, own = roots[lo:hi][source], metric[lo:hi][source]
            rows.append(np.column_stack([np.full(len(out), frame), out[:, 4], *box, out[:, 5], placed, own]))
    table = np.concatenate(rows) if rows else np.zeros((0, len(MOT_COLUMNS) + len(METRIC_COLUMNS)))
    df = pd.DataFrame(np.round(table, 3), columns=[*MOT_COLUMNS, *METRIC_COLUMNS])
    df[["frame", "id"]] = df[["frame", "id"]].astype(np.int64)
    return df.sort_values(["frame", "id"]).reset_index(drop=True)


def track_views(
    name: str,
    config: TrackerConfig,
    detections: pd.DataFrame,
    images: pd.DataFrame,
    cameras: dict[str, dict[int, CameraPose]],
    lengths: dict[str, int],
) -> dict[str, pd.DataFrame]:
    """A tracker of whole takes (``multiview``, ``linked``: egoeval.egohumans.trackers.multiview) over every take of
    fetch's ``images`` table (sequence, frame, take, camera, time_stamp, width, height): each camera tracked by its
    per-camera tracker, then its tracklets linked across the take's cameras (a camera without any pose is left out).
    ``lengths``: each sequence's frames. Returns each sequence's table."""
    check_views(name, images)
    local = local_settings(config)
    planes = take_planes(images, cameras, float(config.eye_height_m))
    by_sequence = dict(tuple(detections.groupby("sequence", sort=True)))
    out: dict[str, pd.DataFrame] = {}
    for take, frames in images.groupby("take", sort=True):
        tables = {}
        for sequence in sorted(set(frames["sequence"])):
            rows = by_sequence.get(sequence, detections.iloc[:0])
            if not cameras.get(sequence):  # a camera with no pose at all cannot be placed: its boxes are left out
                tables[sequence] = track_sequence(local, rows.iloc[:0], 0, cameras={0: None})
                continue
            ground = (planes[str(take)], image_size(frames[frames["sequence"] == sequence]))
            tables[sequence] = track_sequence(local, rows, lengths[sequence], cameras=cameras[sequence], ground=ground)
        out |= link_views(config.model_dump(), tables, frames, cameras, planes[str(take)])
    return out


def image_size(images: pd.DataFrame) -> tuple[float, float]:
    """A sequence's image width and height (its first image's: a video's frames share them)."""
    return float(images["width"].iloc[0]), float(images["height"].iloc[0])


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def track(
    name: str, config: TrackerConfig, detections_path: Path, fetched: Path, out_dir: Path, data_root: Path
) -> int:
    """Track every sequence fetch listed with the configured tracker ``name``; write one MOTChallenge file each.
    Frames (for ``gmc_method``) are read only inside ``data_root`` (egohumans.fetch.path), as every pinned frame is.
    Returns the row count."""
    sequences_path = fetched / "sequences.json"
    if not sequences_path.is_file():
        raise InputError(sequences_path, "file not found (run the stages before this one)")
    summary = read_json(sequences_path)
    sequences = summary.get("sequences") if isinstance(summary, dict) else None
    if not isinstance(sequences, list) or not all(
        isinstance(s, dict) and isinstance(s.get("name"), str) and _count(s.get("length")) for s in sequences
    ):
        raise InputError(sequences_path, "not a sequences summary: 'sequences' must list each one's name and length")
    detections = read_detections_parquet(detections_path)
    unknown = sorted(set(detections["sequence"]) - {s["name"] for s in sequences})
    if unknown:
        raise InputError(detections_path, f"detections for sequences not in {sequences_path}: {unknown}")
    cameras: dict[str, dict[int, CameraPose]] = {}
    if uses_cameras(config):
        columns = ["sequence", "frame", "extrinsics", "calib_intrinsics", "camera_model"]
        images_path = fetched / "images.parquet"
        cameras = camera_poses(read_parquet(images_path, columns), images_path)
        uncalibrated = [s["name"] for s in sequences if s["length"] and s["name"] not in cameras]
        if uncalibrated:
            message = f"the {config.tracker_type} tracker ({name}) needs camera poses: no frame has calibration"
            raise InputError(images_path, message, row=uncalibrated[0])
    frames: dict[str, dict[int, Callable[[], np.ndarray]]] = {}
    if uses_frames(config):
        images_path, roots = fetched / "images.parquet", data_roots(data_root)
        images = read_parquet(images_path, ["sequence", "frame", "path", "sha256"])
        for row in images.itertuples(index=False):
            where = f"{row.sequence} frame {row.frame}"
            reader = functools.partial(read_pinned_image, row.path, row.sha256, roots, images_path, where)
            frames.setdefault(str(row.sequence), {})[int(row.frame)] = reader
    by_sequence = dict(tuple(detections.groupby("sequence", sort=True)))
    for seq in sequences:
        rows = by_sequence.get(seq["name"], detections.iloc[:0])
        if len(rows) and rows["frame"].max() > seq["length"]:
            raise InputError(
                detections_path,
                f"frame beyond the sequence's {seq['length']} frames",
                row=f"{seq['name']} frame {rows['frame'].max()}",
            )
    grounds: dict[str, tuple[GroundPlane | None, tuple[float, float]]] = {}
    if tracks_takes(config) or places_people(config):
        columns = ["sequence", "frame", "take", "camera", "time_stamp", "width", "height"]
        images = read_parquet(fetched / "images.parquet", columns)
    if tracks_takes(config):
        lengths = {s["name"]: int(s["length"]) for s in sequences}
        tables = track_views(name, config, detections, images, cameras, lengths)
    elif places_people(config):  # a take's floor from its wearers (none outside the official layout: no take)
        planes = take_planes(images, cameras, float(config.eye_height_m))
        for sequence, rows in images.groupby("sequence", sort=True):
            grounds[str(sequence)] = (planes[str(rows["take"].iloc[0])], image_size(rows))
    total, points = 0, []
    with replaced_dir(out_dir) as work:
        for seq in tqdm(sequences, desc=f"{name} {out_dir.name}", unit="seq"):
            rows = by_sequence.get(seq["name"], detections.iloc[:0])
            if tracks_takes(config):
                table = tables.get(seq["name"], pd.DataFrame(columns=MOT_COLUMNS))
            else:
                table = track_sequence(
                    config,
                    rows,
                    int(seq["length"]),
                    frames.get(seq["name"], {}),
                    cameras.get(seq["name"]),
                    grounds.get(seq["name"]),
                )
            write_mot(work / f"{seq['name']}.txt", table)
            points.append(table.dropna(subset=ROOT_COLUMNS).assign(sequence=seq["name"])[WORLD_POINT_COLUMNS])
            total += len(table)
        world = pd.concat([pd.DataFrame(columns=WORLD_POINT_COLUMNS), *points], ignore_index=True)
        write_parquet(work / WORLD_POINTS, world.astype({"sequence": "str", "frame": np.int64, "id": np.int64}))
    return total


def write_tracks(settings: EgoHumansSettings, tracker: str, mode: str) -> None:
    """The egohumans_track stage: the tracker ``tracker`` (a key of egohumans.track.config) over ``mode``'s
    detections -> ``data/egohumans/tracks/<tracker>-<mode>/``."""
    configured = settings.track.config
    if tracker not in configured:
        known = ", ".join(sorted(configured))
        raise InputError("egohumans.track.config", f"--tracker {tracker!r} is not one of its keys ({known})")
    run = f"{tracker}-{mode}"
    detections = DETECTIONS / f"{mode}.parquet"
    rows = track(tracker, configured[tracker], detections, FETCHED, TRACKS / run, Path(settings.fetch.path))
    print(f"{run}: {rows} track boxes")
