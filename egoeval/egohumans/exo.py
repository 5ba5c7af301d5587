"""The secondary (exo) cameras of an EgoHumans take: their COLMAP calibration, read as the official code reads it.

The official download has no exo poses in ``tracking_exo.json`` (the conversion script writes ``extrinsics`` for
Aria RGB images only). Each take keeps them in ``<big>/<seq>/colmap/workplace/`` (rawalkhirodkar/egohumans,
``lib/datasets/ego_exo_scene.py`` and ``exo_camera.py``):

- ``cameras.txt``: COLMAP's text model, ``CAMERA_ID MODEL WIDTH HEIGHT PARAMS...`` (the GoPros are
  ``OPENCV_FISHEYE``: fx, fy, cx, cy, k1..k4);
- ``images.txt``: two lines per image, ``IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME`` (the COLMAP frame -> camera
  pose) and its 2D points; ``NAME`` is ``camXX/NNNNN.jpg`` for the exo cameras (time stamp ``NNNNN``);
- ``colmap_from_aria_transforms.pkl``: ``{ariaXX: 4 x 4}``, each wearer's Aria frame -> the COLMAP frame. The world
  is the anchor wearer's Aria frame (``aria01``, the official ``CALIBRATION.ANCHOR_EGO_CAMERA`` default), as the
  annotation's ego extrinsics are: an exo camera's world-to-camera matrix is ``[R | t] @ colmap_from_aria[aria01]``,
  divided by that transform's scale (COLMAP's reconstruction is up to scale; dividing keeps a rotation and metres,
  and leaves the projection unchanged).

A camera's pose at a time stamp is the one of its nearest calibrated time stamp (the earlier on a tie), as the
official ``set_closest_calibration`` picks it. Camera models: ``SIMPLE_PINHOLE``, ``PINHOLE`` and COLMAP's
equidistant fisheyes ``SIMPLE_RADIAL_FISHEYE``, ``RADIAL_FISHEYE``, ``OPENCV_FISHEYE`` (theta_d = theta (1 + k1
theta^2 + ...)), each as egoeval's :class:`~egoeval.egohumans.trackers.egomotion.CameraModel` (Aria's radial polynomial
is the same one) seen through a ``fy / fx`` stretch of the image rows. Other models are refused by name.

Hostile files: ``cameras.txt`` and ``images.txt`` are sized before a byte is read (MAX_BYTES) and read a line at a
time (an image's 2D points line read through, never held); an image id, a name or a camera's time stamp listed twice
is refused naming both lines; the anchor transform must be a similarity (named in its own file); an exo camera's
intrinsics and its pose in metres must be physical (``egoeval.egohumans.formats``' bounds, stated there once).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from egoeval.core.errors import InputError
from egoeval.core.io.bounded import MAX_INPUT_BYTES, stream_lines
from egoeval.egohumans.formats import ROTATION_TOLERANCE, intrinsics_problem, load_pickle, rigid_problem
from egoeval.egohumans.trackers.egomotion import CameraModel, CameraPose

COLMAP_DIR = "colmap/workplace"  # under the take (<big>/<seq>)
CAMERAS_FILE, IMAGES_FILE, TRANSFORMS_FILE = "cameras.txt", "images.txt", "colmap_from_aria_transforms.pkl"
ANCHOR = "aria01"  # the wearer whose Aria frame is the world (CALIBRATION.ANCHOR_EGO_CAMERA)
# COLMAP model -> number of parameters; the fisheyes' radial terms follow f (or fx, fy) and cx, cy
COLMAP_MODELS = {
    "SIMPLE_PINHOLE": 3,
    "PINHOLE": 4,
    "SIMPLE_RADIAL_FISHEYE": 4,
    "RADIAL_FISHEYE": 5,
    "OPENCV_FISHEYE": 8,
}
EXO_IMAGE = re.compile(r"^(cam\d+)/(\d+)\.[A-Za-z]+$")
MAX_LINE = 1 << 16  # bytes of a line read from a COLMAP text file (an image's 2D points line is read through, unheld)
# bytes of each COLMAP text file, checked before it is read: cameras.txt holds a line per camera; images.txt also
# holds every image's 2D points, so it may be large, and is streamed a line at a time
MAX_BYTES = {CAMERAS_FILE: 1 << 20, IMAGES_FILE: MAX_INPUT_BYTES}


@dataclass(frozen=True)
class ColmapCamera:
    """A COLMAP camera model: :class:`CameraModel` (one focal length, ``fx``) on an image whose rows are stretched by
    ``aspect = fy / fx`` about ``cy``. Same interface as CameraModel: ``project`` and ``unproject``."""

    inner: CameraModel
    aspect: float

    @classmethod
    def from_params(cls, model: str, params: Any) -> ColmapCamera:
        if model not in COLMAP_MODELS:
            raise ValueError(f"COLMAP camera model {model!r} is not supported (supported: {sorted(COLMAP_MODELS)})")
        p = np.asarray(params, dtype=np.float64)
        if p.shape != (COLMAP_MODELS[model],) or not np.isfinite(p).all():
            raise ValueError(f"{model} takes {COLMAP_MODELS[model]} finite parameters, got {list(params)}")
        fx, fy, rest = (p[0], p[1], p[2:]) if model in ("PINHOLE", "OPENCV_FISHEYE") else (p[0], p[0], p[1:])
        if (problem := intrinsics_problem([fx, fy], rest[:2], rest[2:])) is not None:
            raise ValueError(f"{model}: {problem}")
        radial = np.zeros(12)
        radial[: len(rest) - 2] = rest[2:]
        kind = "pinhole" if model.endswith("PINHOLE") else "aria_fisheye"
        return cls(CameraModel.from_intrinsics([fx, rest[0], rest[1], *radial], kind), float(fy / fx))

    def project(self, rays: np.ndarray) -> np.ndarray:
        pixels = self.inner.project(rays)
        pixels[:, 1] = self.inner.centre[1] + (pixels[:, 1] - self.inner.centre[1]) * self.aspect
        return pixels

    def unproject(self, pixels: np.ndarray) -> np.ndarray:
        squeezed = np.array(pixels, dtype=np.float64)
        squeezed[:, 1] = self.inner.centre[1] + (squeezed[:, 1] - self.inner.centre[1]) / self.aspect
        return self.inner.unproject(squeezed)


def camera_pose(intrinsics: Any, extrinsics: Any, model: str) -> CameraPose:
    """One image's camera from fetch's images table: an Aria model (``aria_fisheye``, ``pinhole``: 15 intrinsics) or a
    COLMAP one (its parameters), and the 4 x 4 world-to-camera extrinsics. Raises ValueError on bad values."""
    if model not in COLMAP_MODELS:
        return CameraPose.from_calibration(intrinsics, extrinsics, model)
    pose = CameraPose.from_calibration([1.0, 0.0, 0.0, *[0.0] * 12], extrinsics, "pinhole")  # checks the matrix
    return CameraPose(ColmapCamera.from_params(model, intrinsics), pose.rotation, pose.translation)


@dataclass(frozen=True)
class ExoCalibration:
    """One exo camera of a take: its COLMAP model and parameters, and its world-to-camera extrinsics (4 x 4,
    row-major, 16 numbers) at each calibrated time stamp."""

    model: str
    params: list[float]
    poses: dict[int, list[float]]  # time stamp -> extrinsics

    def extrinsics_at(self, time_stamp: int) -> list[float]:
        """The pose of the nearest calibrated time stamp (the earlier on a tie)."""
        nearest = min(self.poses, key=lambda t: (abs(t - time_stamp), t))
        return self.poses[nearest]


def _lines(path: Path, skip_next: bool = False) -> Iterator[tuple[int, list[str]]]:
    """(1-based line number, fields) of each line of a COLMAP text file that is neither blank nor a comment, streamed
    within MAX_BYTES of its name. With ``skip_next`` the line after each one yielded (an image's 2D points, which may
    be long and may be empty) is read through unheld, as COLMAP reads images.txt."""
    limit = MAX_BYTES.get(path.name, MAX_BYTES[CAMERAS_FILE])
    lines = stream_lines(path, limit, MAX_LINE)
    for row, text in lines:
        if text is None:
            raise InputError(path, f"a line longer than {MAX_LINE} bytes", row=row)
        fields = text.split()
        if not fields or fields[0].startswith("#"):
            continue
        yield row, fields
        if skip_next:
            next(lines, None)


def _numbers(path: Path, row: int, fields: list[str], what: str) -> list[float]:
    try:
        values = [float(f) for f in fields]
    except ValueError:
        raise InputError(path, f"{what} must be numbers, got {fields}", row=row) from None
    if not np.isfinite(values).all():
        raise InputError(path, f"{what} must be finite, got {fields}", row=row)
    return values


def read_colmap_cameras(path: str | os.PathLike[str]) -> dict[int, tuple[str, list[float], int]]:
    """``cameras.txt``: camera id -> (model, parameters, line). Comment lines (``#``) and blank lines are skipped."""
    path = Path(path)
    cameras: dict[int, tuple[str, list[float], int]] = {}
    for row, fields in _lines(path):
        if len(fields) < 5 or not fields[0].isdigit():
            raise InputError(path, "expected CAMERA_ID MODEL WIDTH HEIGHT PARAMS...", row=row)
        camera_id, model = int(fields[0]), fields[1]
        if camera_id in cameras:
            raise InputError(
                path, f"camera id {camera_id} appears twice (line {cameras[camera_id][2]} and here)", row=row
            )
        cameras[camera_id] = (model, _numbers(path, row, fields[4:], "camera parameters"), row)
    return cameras


def read_colmap_images(path: str | os.PathLike[str]) -> list[tuple[int, str, np.ndarray, int]]:
    """``images.txt``: (line, name, 3 x 4 COLMAP-frame-to-camera matrix, camera id) per image. As COLMAP reads it, an
    image line is followed by its 2D points line (which may be empty and is not read). An image id or a name listed
    twice is refused, naming both lines."""
    path = Path(path)
    images = []
    first: dict[tuple[str, str], int] = {}  # ("IMAGE_ID" or "NAME", value) -> the line that listed it
    for row, fields in _lines(path, skip_next=True):
        if len(fields) != 10:
            raise InputError(path, "expected IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME", row=row)
        qw, qx, qy, qz, tx, ty, tz = _numbers(path, row, fields[1:8], "QW QX QY QZ TX TY TZ")
        norm = qw * qw + qx * qx + qy * qy + qz * qz
        if not fields[8].isdigit() or not 0.5 < norm < 2.0:
            raise InputError(path, "expected a unit quaternion and an integer CAMERA_ID", row=row)
        for key in (("IMAGE_ID", fields[0]), ("NAME", fields[9])):
            if key in first:
                raise InputError(path, f"{key[0]} {key[1]} is listed twice (line {first[key]} and here)", row=row)
            first[key] = row
        images.append(
            (row, fields[9], _quaternion_pose(np.array([qw, qx, qy, qz]) / np.sqrt(norm), [tx, ty, tz]), int(fields[8]))
        )
    return images


def _quaternion_pose(q: np.ndarray, translation: list[float]) -> np.ndarray:
    """COLMAP's ``qvec2rotmat`` beside the translation: a 3 x 4 matrix."""
    w, x, y, z = q
    rotation = np.array(
        [
            [1 - 2 * y * y - 2 * z * z, 2 * x * y - 2 * w * z, 2 * z * x + 2 * w * y],
            [2 * x * y + 2 * w * z, 1 - 2 * x * x - 2 * z * z, 2 * y * z - 2 * w * x],
            [2 * z * x - 2 * w * y, 2 * y * z + 2 * w * x, 1 - 2 * x * x - 2 * y * y],
        ]
    )
    return np.column_stack([rotation, translation])


def read_anchor_transform(path: str | os.PathLike[str], anchor: str = ANCHOR) -> np.ndarray:
    """The anchor wearer's Aria frame -> COLMAP frame (4 x 4) from ``colmap_from_aria_transforms.pkl`` (restricted
    unpickling: plain containers and arrays only)."""
    path = Path(path)
    doc = load_pickle(path)
    if not isinstance(doc, dict) or anchor not in doc:
        raise InputError(path, f"expected a dict of 4 x 4 transforms with the anchor wearer {anchor!r}")
    try:
        matrix = np.asarray(doc[anchor], dtype=np.float64)
    except (TypeError, ValueError):
        matrix = np.zeros(0)
    if matrix.shape != (4, 4) or not np.isfinite(matrix).all() or not np.allclose(matrix[3], [0, 0, 0, 1]):
        raise InputError(path, "the transform must be a finite 4 x 4 matrix with the last row 0 0 0 1", row=anchor)
    scale = float(np.cbrt(np.linalg.det(matrix[:3, :3])))
    rotation = matrix[:3, :3] / scale if scale > 0 else np.zeros((3, 3))
    if not np.isfinite(rotation).all() or not np.allclose(rotation @ rotation.T, np.eye(3), atol=ROTATION_TOLERANCE):
        message = f"the transform must be a similarity (a rotation times a scale > 0), got {matrix[:3, :3].tolist()}"
        raise InputError(path, message, row=anchor)
    return matrix


def read_exo_calibration(take_dir: str | os.PathLike[str]) -> dict[str, ExoCalibration]:
    """Every exo camera (``camXX``) of the take at ``take_dir`` (``<root>/<big>/<seq>``) with its calibration."""
    folder = Path(take_dir) / COLMAP_DIR
    cameras = read_colmap_cameras(folder / CAMERAS_FILE)
    anchor = read_anchor_transform(folder / TRANSFORMS_FILE)
    found: dict[str, ExoCalibration] = {}
    for row, name, pose, camera_id in read_colmap_images(folder / IMAGES_FILE):
        match = EXO_IMAGE.match(name)
        if match is None:
            continue  # an Aria image of the reconstruction
        if camera_id not in cameras:
            raise InputError(folder / IMAGES_FILE, f"camera id {camera_id} is not in {CAMERAS_FILE}", row=row)
        model, params, line = cameras[camera_id]
        try:  # checked here, not where read: only the exo cameras' models are read (not the Aria ones COLMAP used)
            ColmapCamera.from_params(model, params)
        except ValueError as err:
            raise InputError(folder / CAMERAS_FILE, f"camera {camera_id}: {err}", row=line) from None
        world = pose @ anchor  # a rotation times a similarity: a similarity (both are checked where read)
        world = world / float(np.cbrt(np.linalg.det(world[:, :3])))
        if (problem := rigid_problem(world)) is not None:
            raise InputError(folder / IMAGES_FILE, f"{name} (through {TRANSFORMS_FILE}): {problem}", row=row)
        extrinsics = np.vstack([world, [0.0, 0.0, 0.0, 1.0]])
        camera = match[1]
        entry = found.setdefault(camera, ExoCalibration(model, params, {}))
        if (entry.model, entry.params) != (model, params):
            raise InputError(folder / IMAGES_FILE, f"{camera} appears with two COLMAP cameras", row=row)
        if int(match[2]) in entry.poses:
            raise InputError(folder / IMAGES_FILE, f"{camera} has a second image at time stamp {match[2]}", row=row)
        entry.poses[int(match[2])] = extrinsics.ravel().tolist()
    return found


def calibration_files(root: Path, takes: list[str]) -> list[str]:
    """The COLMAP files fetch reads for these takes (relative to the root), where a take has them."""
    names = []
    for take in takes:
        folder = f"{take}/{COLMAP_DIR}"
        if (root / folder / CAMERAS_FILE).is_file():
            names += [f"{folder}/{CAMERAS_FILE}", f"{folder}/{IMAGES_FILE}", f"{folder}/{TRANSFORMS_FILE}"]
    return names


def exo_image_calibration(
    root: Path, images: list[tuple[str, str, int | None]]
) -> list[tuple[list[float], list[float], str] | None]:
    """Per image ``(take, camera, time stamp)``: the exo camera's (COLMAP parameters, extrinsics, model), or None
    (not an exo camera, no time stamp, or a take without COLMAP files)."""
    takes: dict[str, dict[str, ExoCalibration]] = {}
    out: list[tuple[list[float], list[float], str] | None] = []
    for take, camera, stamp in images:
        if not camera.startswith("cam") or stamp is None:
            out.append(None)
            continue
        if take not in takes:
            folder = root / take / COLMAP_DIR
            takes[take] = read_exo_calibration(root / take) if (folder / CAMERAS_FILE).is_file() else {}
        found = takes[take].get(camera)
        out.append(None if found is None else (found.params, found.extrinsics_at(stamp), found.model))
    return out
