"""EgoHumans inputs as downloaded: check the pinned data root and normalise it (the egohumans_fetch stage).

``egohumans.fetch.path`` is the data root. ``annotation`` is the COCO-video JSON relative to the root (``{modality}``
is replaced by ``modality``: ``ego_rgb``, ``ego_slam`` or ``exo``; default the official
``benchmark/<set>/all/coco_track/tracking_{modality}.json``); its ``file_name``s are relative to the root. The
released detections ``detections_<modality>.pkl`` beside the annotation (ground-truth boxes with score 1.0, as the
official conversion script writes them) are read when present, for detection mode ``official``: their boxes and
scores, and their ``roots_3d`` decoded for what they hold (``egoeval.egohumans.official_conversion``: each box's
centre pixel, checked, and a relative depth, kept as ``released_depth``; never a metric root). ``detections``
(relative to the root, or null) names detections the user brings, for mode ``file``: a pickle (any layout
mmtracking's MOTChallenge dataset accepts), a parquet table, or a folder of MOTChallenge ``<seq>.txt`` files. Aria
images' per-frame calibration (``<seq>/ego/ariaXX/calib/N.txt``) is read too. Every file read is checked against
the sha256 manifest first (in parallel). Written to ``data/egohumans/fetched`` (replaced as a whole):

- ``gt/<seq>.txt`` ground truth, MOTChallenge text (ignore/crowd boxes with conf 0),
- ``detections_official.parquet``, ``detections_file.parquet`` (sequence, frame, x, y, w, h, score, the metric
  roots root_x, root_y, root_z of the user's own detections, released_depth of the released pickle; NaN where none;
  empty when none),
- ``images.parquet`` sequence, frame, path (the frame at its source location; frames are not copied), sha256 (as
  the manifest pins it: the stages that read the frame later check its bytes against it), width,
  height, extrinsics (4 x 4 world-to-camera, row-major), time_stamp, calib_intrinsics (15), camera_model (params
  ``camera_model``: how those intrinsics map rays to pixels; an exo camera's COLMAP model), calib_extrinsics (12),
  take and camera (from the ``file_name``; ``modality`` may list several annotations, read as one),
- ``world_roots.parquet`` the takes' 3D ground truth (take, time_stamp, person, root; ``egoeval.egohumans.views``),
  read by the score stage only (as ``gt/``: no tracker input derives from ground truth but mode gt's boxes),
- ``sequences.json`` names, lengths, fps, sizes, the modality, which detections were found, dropped duplicates,
  and ``limit`` in a smoke run (``egohumans.fetch.limit``: only the first N sequences by name are verified and kept).

``python -m stages.egohumans.fetch --write-manifest ROOT`` pins the files the annotation references (frames,
calibration, detections) in parallel, using the ``egohumans.fetch`` settings' annotation, modality and detections.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import write_json, write_parquet
from egoeval.core.io.commit import replaced_dir
from egoeval.core.io.manifest import read_manifest, verify_manifest, write_manifest
from egoeval.core.io.paths import data_file, data_roots, inside
from egoeval.egohumans.artifacts import FETCHED
from egoeval.egohumans.exo import calibration_files, exo_image_calibration
from egoeval.egohumans.formats import (
    DETECTION_COLUMNS,
    TrackingAnnotation,
    calibration_path,
    check_detections_known,
    empty_detections,
    read_aria_calibration,
    read_det_txt,
    read_detection_pickle,
    read_detections_parquet,
    sort_detections,
)
from egoeval.egohumans.settings import EgoHumansSettings, FetchSettings
from egoeval.egohumans.views import (
    annotation_names,
    official_detections_names,
    pose_files,
    read_annotations,
    view_of,
    world_roots,
)
from egoeval.tracking.mot import write_mot

OUT_DIR = FETCHED


def limit_sequences(annotation: TrackingAnnotation, limit: int | None) -> TrackingAnnotation:
    """``egohumans.fetch.limit``: the annotation cut to its first ``limit`` sequences by name (all when None)."""
    if limit is None or limit >= len(annotation.sequences):
        return annotation
    names = sorted(annotation.sequences["name"])[:limit]
    sequences = annotation.sequences[annotation.sequences["name"].isin(names)].reset_index(drop=True)
    images = annotation.images[annotation.images["sequence"].isin(names)].reset_index(drop=True)
    ground_truth = {name: gt for name, gt in annotation.ground_truth.items() if name in names}
    return dataclasses.replace(annotation, sequences=sequences, images=images, ground_truth=ground_truth)


def input_files(
    root: Path, settings: FetchSettings, file_mode: bool, limit: int | None = None
) -> tuple[TrackingAnnotation, list[str]]:
    """The parsed annotation(s) (whole) and every file they make fetch read, each inside the data root (symlinks
    followed; else an error naming the annotation's image or the param): frames and calibration (Aria's, the exo
    cameras' COLMAP files) of the first ``limit`` sequences (``limit_sequences``; all when None), the takes' 3D
    ground truth, the released detections, and with ``file_mode`` (``file`` among egohumans.detect.modes) the
    user's detections."""
    roots = data_roots(root)
    annotation = read_annotations(root, settings, roots)
    names = annotation_names(settings)
    images = limit_sequences(annotation, limit).images
    for source, index, name in zip(images["annotation"], images["file_index"], images["file_name"], strict=True):
        calibration = calibration_path(name)
        for needed in (name, *([calibration[0]] if calibration else [])):
            data_file(root, needed, root / source, f"images[{index}]", roots)  # the annotation that lists it
            names.append(needed)
    takes = sorted({view[0] for view in map(view_of, images["file_name"]) if view is not None})
    for name in calibration_files(root, takes):  # named by their place in the layout: no annotation lists them
        names.append(inside(root / name, roots, root / name).relative_to(root).as_posix())
    for _, _, name in pose_files(images):
        if data_file(root, name, root / name, None, roots).is_file():
            names.append(name)
    for official in official_detections_names(settings):
        if data_file(root, official, "egohumans.fetch.annotation", None, roots).is_file():
            names.append(official)
    return annotation, names + (user_detections(root, settings, roots, required=True) if file_mode else [])


def user_detections(root: Path, settings: FetchSettings, roots: tuple[Path, ...], required: bool) -> list[str]:
    """The files of ``egohumans.fetch.detections`` relative to the root (a file, or a folder's ``<seq>.txt``); none
    when it is null, or when they are missing and not ``required``."""
    name = settings.detections
    if not name:
        return []
    path = data_file(root, name, "egohumans.fetch.detections", None, roots)
    if path.is_dir():
        return sorted(inside(txt, roots, path, txt.name).relative_to(root).as_posix() for txt in path.glob("*.txt"))
    if not path.is_file() and required:
        raise InputError(
            path,
            "missing: egohumans.fetch.detections names it (relative to the data root egohumans.fetch.path); set it "
            "to null, or leave file out of egohumans.detect.modes",
        )
    return [name] if path.is_file() else []


def _file_detections(root: Path, name: str, annotation: Any) -> pd.DataFrame:
    """The user's detections for mode ``file``: a pickle, a parquet table or a folder of ``<seq>.txt`` files."""
    path = root / name
    if path.is_dir():
        known = set(annotation.sequences["name"])
        parts = []
        for txt in sorted(path.glob("*.txt")):
            if txt.stem not in known:
                raise InputError(txt, "no sequence of this name in the annotation")
            parts.append(read_det_txt(txt, txt.stem))
        table = sort_detections(pd.concat([empty_detections(), *parts], ignore_index=True))
    elif path.suffix == ".parquet":
        table = read_detections_parquet(path)
    elif path.suffix in {".pkl", ".pickle"}:
        table = read_detection_pickle(path, annotation.images)
    else:
        raise InputError(path, "egohumans.fetch.detections must name a .pkl, a .parquet or a folder of <seq>.txt")
    check_detections_known(table, annotation.images, path)
    return table


def _calibration(root: Path, images: pd.DataFrame, camera_model: str) -> pd.DataFrame:
    """Per image: take, camera, calib_intrinsics, camera_model, calib_extrinsics and extrinsics (the annotation's;
    an exo camera's from its take's COLMAP files, which also give its model and parameters)."""
    views = [view_of(name) or ("", "") for name in images["file_name"]]
    stamps = [None if pd.isna(t) else int(t) for t in images["time_stamp"]]
    exo = exo_image_calibration(root, [(take, camera, t) for (take, camera), t in zip(views, stamps, strict=True)])
    rows = []
    pairs = tqdm(
        zip(images["file_name"], images["extrinsics"], exo, strict=True),
        desc="calibration",
        unit="file",
        total=len(exo),
        disable=len(exo) < 1000,
    )
    for name, extrinsics, found in pairs:
        aria = calibration_path(name)
        if found is not None:
            rows.append((found[0], found[2], [], list(extrinsics) or found[1]))
        else:
            k, e = read_aria_calibration(root / aria[0], aria[1]) if aria else ([], [])
            rows.append((k, camera_model, e, list(extrinsics)))
    table = pd.DataFrame(rows, columns=["calib_intrinsics", "camera_model", "calib_extrinsics", "extrinsics"])
    return table.assign(take=[v[0] for v in views], camera=[v[1] for v in views])


def fetch(settings: FetchSettings, out_dir: str | Path, modes: Sequence[str]) -> dict[str, object]:
    """Verify and normalise the inputs under the data root ``settings.path`` into ``out_dir``; return the summary.

    ``modes`` (egohumans.detect.modes): the user's detections are read only when ``file`` is among them."""
    root, manifest, out_dir = Path(settings.path), Path(settings.manifest), Path(out_dir)
    if not manifest.is_file():
        raise InputError(manifest, "the sha256 manifest (egohumans.fetch.manifest) does not exist")
    for name in annotation_names(settings):
        if not (root / name).is_file():
            raise InputError(root / name, "missing (egohumans.fetch.annotation, under the data root)")
    verify_manifest(manifest, root, annotation_names(settings))
    file_mode = "file" in modes
    annotation, names = input_files(root, settings, file_mode, settings.limit)
    verify_manifest(manifest, root, names)
    pinned = read_manifest(manifest)  # each frame's digest travels with it: every later read is checked against it

    found = [name for name in official_detections_names(settings) if (root / name).is_file()]
    official = None
    if found:
        parts = [read_detection_pickle(root / name, annotation.images, released=True) for name in found]
        official = sort_detections(pd.concat(parts, ignore_index=True))
    file_name = settings.detections if file_mode else None
    file = _file_detections(root, file_name, annotation) if file_name else None
    annotation = limit_sequences(annotation, settings.limit)  # detections were read against the whole annotation
    kept = set(annotation.sequences["name"])
    official, file = (None if t is None else t[t["sequence"].isin(kept)] for t in (official, file))
    images = annotation.images
    unpinned = [name for name in images["file_name"] if name not in pinned]
    if unpinned:
        raise InputError(manifest, f"{unpinned[0]} is not pinned in the manifest")
    calibration = _calibration(root, images, settings.camera_model)
    image_table = pd.DataFrame(
        {
            "sequence": images["sequence"],
            "frame": images["frame"],
            "path": [(root / name).as_posix() for name in images["file_name"]],
            "sha256": [pinned[name] for name in images["file_name"]],
            "width": images["width"],
            "height": images["height"],
            "extrinsics": calibration["extrinsics"],
            "time_stamp": images["time_stamp"],
            "calib_intrinsics": calibration["calib_intrinsics"],
            "camera_model": calibration["camera_model"],
            "calib_extrinsics": calibration["calib_extrinsics"],
            "take": calibration["take"],
            "camera": calibration["camera"],
        }
    )
    world = world_roots(root, pose_files(images))
    annotations = annotation_names(settings)
    summary: dict[str, object] = {
        "source": settings.source,
        "modality": settings.modality,
        "annotation": annotations[0] if len(annotations) == 1 else annotations,
        "detections": {
            "official": (found[0] if len(found) == 1 else found) if official is not None else None,
            "file": file_name or None,
        },
        "dropped_videos": annotation.dropped_videos,
        **({"limit": settings.limit} if settings.limit is not None else {}),  # absent: every sequence
        "sequences": [
            {
                "name": row.name,
                "length": int(row.length),
                "images": int(row.images),
                "fps": None if np.isnan(row.fps) else float(row.fps),
                "width": int(row.width),
                "height": int(row.height),
            }
            for row in annotation.sequences.itertuples(index=False)
        ],
    }
    with replaced_dir(out_dir) as work:
        (work / "gt").mkdir()
        for name, gt in annotation.ground_truth.items():
            write_mot(work / "gt" / f"{name}.txt", gt)
        for kind, table in (("official", official), ("file", file)):
            write_parquet(
                work / f"detections_{kind}.parquet", (empty_detections() if table is None else table)[DETECTION_COLUMNS]
            )
        write_parquet(work / "images.parquet", image_table)
        write_parquet(work / "world_roots.parquet", world)
        write_json(work / "sequences.json", summary)
    return summary


def write_root_manifest(
    root: Path, settings: FetchSettings, modes: Sequence[str], manifest: Path | None = None
) -> list[str]:
    """Pin every file fetch reads under the data root ``root`` (in parallel), the user's detections too when they
    are there (whatever ``modes``: so that selecting ``file`` later needs no new manifest); return the pinned names."""
    _, names = input_files(root, settings, "file" in modes)
    if "file" not in modes:
        names += user_detections(root, settings, data_roots(root), required=False)
    write_manifest(manifest or root / "manifest.sha256", root, names)
    return names


def write_fetched(settings: EgoHumansSettings) -> None:
    """The egohumans_fetch stage: fetch into ``OUT_DIR`` and say what came."""
    summary = fetch(settings.fetch, OUT_DIR, settings.detect.modes)
    found = [kind for kind, name in summary["detections"].items() if name]
    print(f"fetched {len(summary['sequences'])} sequences (detections: {found or 'none'}) to {OUT_DIR}")


def pin_root(root: Path, settings: EgoHumansSettings, manifest: Path | None = None) -> None:
    """``--write-manifest``: pin the data root ``root`` (``write_root_manifest``) and say how many files."""
    names = write_root_manifest(root, settings.fetch, settings.detect.modes, manifest)
    print(f"pinned {len(names)} files under {root}", file=sys.stderr)
