"""The views of EgoHumans takes: which take and camera each video is, the annotations of several modalities read as
one, and the takes' 3D ground truth.

A take (``<big>/<seq>``, e.g. ``01_tagging/001_tagging``) is filmed at once by every wearer's Aria (``ego/ariaXX``)
and by the static secondary cameras (``exo/camXX``); ``time_stamp`` N is the same instant in every view (the frame
files are ``NNNNN.jpg`` in each). A video's take and camera come from its images' ``file_name``
(``<big>/<seq>/ego/ariaXX/images/rgb/N.jpg``, ``<big>/<seq>/exo/camXX/images/N.jpg``, as the official conversion
script writes them). People are the wearers: ``instance_id`` is the wearer's number (``aria02`` -> 2) in every view.

``egohumans.fetch.modality`` may list several modalities (``[ego_rgb, exo]``): their annotations
(``tracking_<modality>.json``) are read as one, their video names must differ (they do in the official files:
``..._aria01_rgb``, ``..._cam01_rgb``), a camera belongs to one of them, and list-layout detection pickles follow
the annotations in that order.

3D ground truth: the official ``<big>/<seq>/processed_data/fit_poses3d/NNNNN.npy`` (``np.save`` of a dict
``{ariaXX: 17 x 4}``, COCO keypoints x, y, z, confidence in the world frame). A person's root is the midpoint of
the hips (keypoints 11 and 12), as the sample's roots and the pelvis of every 3D tracker are. The ``.npy`` holds a
pickle: it is read with the restricted unpickler (containers and arrays only), never with ``np.load``, once its size
(MAX_POSE_FILE) is checked. A keypoint's x, y, z lie within ``MAX_WORLD_M`` of the world origin (formats.py's bound
for every camera and person); NaN marks a keypoint the fit left unplaced (a root needs both hips).
"""

from __future__ import annotations

import ast
import dataclasses
import io
import os
import pickle
import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from egoeval.core.errors import InputError
from egoeval.core.io.bounded import read_bounded
from egoeval.core.io.paths import data_file
from egoeval.egohumans.formats import (
    MAX_WORLD_M,
    MODALITIES,
    RestrictedUnpickler,
    TrackingAnnotation,
    read_tracking_annotation,
    restricted_dtype,
)
from egoeval.egohumans.settings import FetchSettings

VIEW_IMAGE = re.compile(
    r"^(?P<take>[^/].*?)/(?P<kind>ego|exo)/(?P<camera>(?:aria|cam)\d+)/images/(?:(?:rgb|left|right)/)?[^/]+$"
)
POSES_DIR = "processed_data/fit_poses3d"  # under the take
HIPS = (11, 12)  # COCO keypoints: left and right hip
MAX_POSE_FILE = 1 << 20  # bytes of one fit_poses3d file (a few people: a few kilobytes)
WORLD_COLUMNS = ["take", "time_stamp", "person", "root_x", "root_y", "root_z"]


def modalities(settings: FetchSettings) -> list[str]:
    """``egohumans.fetch.modality`` as a list (one modality or several)."""
    value = settings.modality
    return [value] if isinstance(value, str) else list(value)


def annotation_names(settings: FetchSettings) -> list[str]:
    """The annotation of each modality, relative to the root (``{modality}`` filled in)."""
    return [settings.annotation.replace("{modality}", m) for m in modalities(settings)]


def official_detections_names(settings: FetchSettings) -> list[str]:
    """``detections_<modality>.pkl`` beside each annotation (where the official conversion script writes it)."""
    return [
        (Path(name).parent / f"detections_{m}.pkl").as_posix()
        for name, m in zip(annotation_names(settings), modalities(settings), strict=True)
    ]


def view_of(file_name: str) -> tuple[str, str] | None:
    """``(take, camera)`` of an image, e.g. ``("01_tagging/001_tagging", "aria02")``; None outside the layout."""
    match = VIEW_IMAGE.match(file_name)
    return None if match is None else (match["take"], match["camera"])


def read_annotations(root: Path, settings: FetchSettings, roots: tuple[Path, ...]) -> TrackingAnnotation:
    """The annotations of every modality in ``settings`` read as one (see the module docstring); each must lie
    inside the data root (``roots``: its ``data_roots``). The images keep the annotation that lists them (column
    ``annotation``, relative to the root); a camera listed by two annotations is refused."""
    names = annotation_names(settings)
    if len(set(modalities(settings))) != len(names) or not set(modalities(settings)) <= set(MODALITIES):
        raise InputError("egohumans.fetch.modality", f"distinct values among {list(MODALITIES)}")
    where = [data_file(root, name, "egohumans.fetch.annotation", None, roots) for name in names]
    parts = [read_tracking_annotation(path, settings.duplicate_videos) for path in where]
    parts = [  # each image's annotation (relative to the root), for errors found later to name
        dataclasses.replace(part, images=part.images.assign(annotation=name))
        for part, name in zip(parts, names, strict=True)
    ]
    if len(parts) == 1:
        return parts[0]
    seen: dict[str, str] = {}
    cameras: dict[str, str] = {}  # a camera's image folder (ariaXX/images/rgb, .../left, camXX/images) -> annotation
    for name, part in zip(names, parts, strict=True):
        for video in part.sequences["name"]:
            if video in seen:
                raise InputError(root / name, f"video {video!r} is also in {seen[video]}")
            seen[video] = name
        for k, file_name in enumerate(part.images["file_name"]):
            folder = PurePosixPath(str(file_name)).parent.as_posix()
            if cameras.setdefault(folder, name) != name:
                message = f"camera {folder} is also listed in {cameras[folder]}: each camera belongs to one modality"
                raise InputError(root / name, message, row=f"images[{part.images['file_index'].iloc[k]}]")
    offsets = np.cumsum([0, *(len(p.images) for p in parts[:-1])])
    images = pd.concat(
        [p.images.assign(order=p.images["order"] + offset) for p, offset in zip(parts, offsets, strict=True)],
        ignore_index=True,
    )
    sequences = pd.concat([p.sequences for p in parts], ignore_index=True)
    return TrackingAnnotation(
        path=parts[0].path,
        sequences=sequences.sort_values("name", kind="stable").reset_index(drop=True),
        images=images.sort_values(["sequence", "frame"], kind="stable").reset_index(drop=True),
        ground_truth=dict(sorted(item for p in parts for item in p.ground_truth.items())),
        dropped_videos=sorted({v for p in parts for v in p.dropped_videos}),
    )


class _PoseFileUnpickler(RestrictedUnpickler):
    """RestrictedUnpickler that also admits what ``np.save`` pickles for a dict: one 0-d array of dtype object
    holding it (its contents checked as everything else is)."""

    def find_class(self, module: str, name: str) -> Any:
        found = super().find_class(module, name)
        if found is not restricted_dtype:
            return found
        return lambda spec, align=False, copy=True: np.dtype("O") if spec in ("O", "O8") else found(spec, align, copy)

    def load_build(self) -> None:
        state, target = self.stack[-1], self.stack[-2]
        if (
            isinstance(target, np.ndarray)
            and isinstance(state, tuple)
            and len(state) == 5
            and isinstance(state[2], np.dtype)
            and state[2].hasobject
        ):
            if state[1] != () or not isinstance(state[4], list) or len(state[4]) != 1:
                raise pickle.UnpicklingError("an array of objects must be one object (np.save of a dict)")
            self.stack.pop()
            self.stack[-1] = np.empty((), dtype=object)
            self.stack[-1][()] = state[4][0]
            return
        super().load_build()

    dispatch: ClassVar[dict[int, Callable[[Any], None]]] = {
        **RestrictedUnpickler.dispatch,
        pickle.BUILD[0]: load_build,
    }


def pose_files(images: pd.DataFrame) -> list[tuple[str, int, str]]:
    """(take, time stamp, fit_poses3d file relative to the root) for every take and time stamp the images have."""
    found = set()
    for file_name, stamp in zip(images["file_name"], images["time_stamp"], strict=True):
        view = view_of(str(file_name))
        if view is not None and not pd.isna(stamp):
            found.add((view[0], int(stamp)))
    return [(take, stamp, f"{take}/{POSES_DIR}/{stamp:05d}.npy") for take, stamp in sorted(found)]


def read_pose_file(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """One ``fit_poses3d`` file: ``{ariaXX: (17, 4) keypoints}`` (see the module docstring)."""
    path = Path(path)
    handle = io.BytesIO(read_bounded(path, MAX_POSE_FILE))  # its size checked before a byte is read
    try:
        version = np.lib.format.read_magic(handle)
        header_len = {(1, 0): 2, (2, 0): 4, (3, 0): 4}[version]
        length = int.from_bytes(handle.read(header_len), "little")
        header = ast.literal_eval(handle.read(length).decode("latin1"))
        if header.get("descr") != "|O" or tuple(header.get("shape", (1,))) != ():
            raise ValueError(f"expected one pickled object (np.save of a dict), got the header {header}")
        doc = _PoseFileUnpickler(handle).load()
    except (pickle.UnpicklingError, ValueError, KeyError, SyntaxError, EOFError, AttributeError, TypeError) as err:
        raise InputError(path, f"not a fit_poses3d file (np.save of a dict of 17 x 4 keypoints): {err}") from None
    doc = doc.item() if isinstance(doc, np.ndarray) and doc.shape == () else doc
    if not isinstance(doc, dict):
        raise InputError(path, "expected a dict of 17 x 4 keypoints by wearer (ariaXX)")
    poses = {}
    for name, value in doc.items():
        try:
            keypoints = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            keypoints = np.zeros(0)
        named = isinstance(name, str) and re.fullmatch(r"aria\d+", name)
        if not named or keypoints.ndim != 2 or keypoints.shape[0] != 17 or keypoints.shape[1] < 3:
            row = name if isinstance(name, str) else repr(name)
            raise InputError(path, "expected a 17 x 4 array of COCO keypoints under each ariaXX", row=row)
        xyz = keypoints[:, :3]
        if (np.abs(xyz[~np.isnan(xyz)]) > MAX_WORLD_M).any():  # infinity too; NaN: a keypoint the fit left unplaced
            message = f"a keypoint beyond {MAX_WORLD_M:g} m of the world origin (or infinite): not a person in the take"
            raise InputError(path, message, row=name)
        poses[name] = keypoints
    return poses


def world_roots(root: Path, files: list[tuple[str, int, str]]) -> pd.DataFrame:
    """WORLD_COLUMNS: every person's root (the midpoint of the hips) in each fit_poses3d file that exists."""
    rows = []
    for take, stamp, name in files:
        if not (root / name).is_file():
            continue
        for person, keypoints in sorted(read_pose_file(root / name).items()):
            hips = keypoints[list(HIPS), :3]
            if np.isfinite(hips).all():
                rows.append((take, stamp, int(person[4:]), *(0.5 * (hips[0] + hips[1])).tolist()))
    table = pd.DataFrame(rows, columns=WORLD_COLUMNS)
    return table.astype({"take": "str", "time_stamp": np.int64, "person": np.int64})
