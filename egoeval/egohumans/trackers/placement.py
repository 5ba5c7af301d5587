"""Where a box's person stands in the world frame, from what the download gives: each camera's calibration and pose
per frame, the box, and priors on people's build. Shared by the world, multi-view and linked trackers.

Three sources, each a world point (the person's pelvis, as EgoHumans' roots) with a covariance:

- **foot on the ground** (:func:`foot_on_ground`): the box's bottom centre unprojected through the camera model and
  intersected with the ground plane, then lifted by the pelvis height (``PELVIS_FRACTION`` of ``person_height_m``).
  The ground plane (:func:`ground_plane`) is estimated per take from the wearers' own Aria trajectories: their camera
  centres over time fitted by a plane (its normal, pointing along the cameras' mean "up"; where they do not spread in
  two directions, the plane across that mean up, its tilt uncertain by HEAD_TILT_STD), moved down by an eye-height
  prior (``eye_height_m``). Its error along the ray grows with the plane's height error there (eye height, the
  wearers' own scatter, the tilt's error times the distance) and the pixel error of the box's bottom, over the ray's
  slope to the plane; none where the image's bottom edge cuts the box (the feet are not
  seen) or the ray meets the plane at less than ``MIN_GRAZING_DEG`` (near-parallel: the point runs off to infinity).
- **height prior** (:func:`by_height`): on the ray through the box centre at the distance where a person of
  ``person_height_m`` has the box's angular height; error ``size_noise`` of that distance (people's heights vary,
  boxes jitter), as large as the distance where the image's top or bottom edge cuts the box.
- **metric roots** the user's own detections carry (detection mode ``file`` only: the released pickle's ``roots_3d``
  are no metric point, see the user guide): the root, error ``root_noise`` of its distance along its ray.

:func:`place` fuses the sources a box has, information-weighted (each covariance inverted, summed); a box with none
(a frame without a pose) is NaN. Measured against the ground truth in ``bench/placement.py`` (BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from egoeval.egohumans.trackers.egomotion import CameraPose

PELVIS_FRACTION = 0.53  # the hip joint's height as a fraction of stature (Drillis and Contini's body proportions)
EYE_HEIGHT_STD_M = 0.08  # the spread of adults' eye height about the prior
PELVIS_HEIGHT_STD_M = 0.06  # the spread of the pelvis height about PELVIS_FRACTION x the height prior
BOX_CENTRE_STD_M = 0.1  # the box centre (or bottom centre) finds the pelvis to within about half a person's width
CUT_BOX_STD = 0.25  # ... when the image's edge cuts the box: this fraction of a person's height
BOX_EDGE_STD = 0.03  # a box edge's pixel error, as a fraction of the box's height (at least one pixel)
MIN_GRAZING_DEG = 2.0  # a foot ray meeting the ground at less than this is not intersected
MIN_DISTANCE_M = 0.3  # a placed point is never nearer to its camera than this
MIN_SPREAD_M = 1.0  # the wearers' centres must spread this far in two directions to fit a plane to them
HEAD_TILT_STD = np.radians(10.0)  # a plane across the cameras' mean up: their heads' mean pitch and roll unknown
EDGE_PX = 1.0  # a box within this of the image's edge is cut by it


@dataclass(frozen=True)
class GroundPlane:
    """The floor of a take: points x with ``up @ x == offset``; ``std_m`` its height error at ``anchor`` (the wearers'
    mean place), ``tilt_std`` the error of its normal's direction (radians: its height error grows with the distance
    from the anchor)."""

    up: np.ndarray  # (3,) unit normal, pointing up
    offset: float
    std_m: float
    anchor: np.ndarray = field(default_factory=lambda: np.zeros(3))
    tilt_std: float = 0.0

    def height_error(self, points: np.ndarray) -> np.ndarray:
        """The plane's height error under each of ``points`` (N, 3)."""
        offset = points - self.anchor
        along = np.linalg.norm(offset - np.outer(offset @ self.up, self.up), axis=1)
        return np.hypot(self.std_m, self.tilt_std * along)


@dataclass(frozen=True)
class Priors:
    """The settings placement reads (a tracker's YAML keys)."""

    person_height_m: float
    eye_height_m: float
    size_noise: float
    root_noise: float

    @classmethod
    def of(cls, settings: Any) -> Priors:
        """From a tracker's settings (a mapping or an object with these keys)."""
        get = settings.get if isinstance(settings, dict) else lambda key: getattr(settings, key)
        return cls(*(float(get(key)) for key in ("person_height_m", "eye_height_m", "size_noise", "root_noise")))


def camera_centre(pose: CameraPose) -> np.ndarray:
    """The camera's centre in the world."""
    return -pose.translation @ pose.rotation


def ground_plane(poses: Iterable[CameraPose], eye_height_m: float) -> GroundPlane | None:
    """The floor from the wearers' camera poses (every Aria frame of a take): a plane through their centres (total
    least squares) when they spread at least MIN_SPREAD_M in two directions, else the plane across the cameras' mean
    up direction; its normal points where the cameras' "up" (-y, OpenCV axes) points on average; moved down by
    ``eye_height_m``. None without poses."""
    poses = list(poses)
    if not poses:
        return None
    centres = np.array([camera_centre(p) for p in poses])
    mean_up = -np.sum([p.rotation[1] for p in poses], axis=0)
    mean_up /= max(float(np.linalg.norm(mean_up)), 1e-12)
    up, tilt = mean_up, HEAD_TILT_STD
    anchor = centres.mean(axis=0)
    if len(centres) >= 3:
        _, spreads, axes = np.linalg.svd(centres - anchor, full_matrices=False)
        spread = spreads[1] / np.sqrt(len(centres))  # the second direction's standard deviation
        if spread >= MIN_SPREAD_M / 2:
            up = axes[2] * np.sign(axes[2] @ mean_up or 1.0)
            tilt = float(np.arctan(spreads[2] / spreads[1]))  # the scatter about the plane over its extent
    heights = centres @ up
    eye_level = float(np.median(heights))
    scatter = float(np.median(np.abs(heights - eye_level)) * 1.4826)  # the wearers' own height differences, bobbing
    return GroundPlane(up, eye_level - eye_height_m, float(np.hypot(EYE_HEIGHT_STD_M, scatter)), anchor, tilt)


def _unit_rays(directions: np.ndarray, pose: CameraPose) -> np.ndarray:
    rays = directions @ pose.rotation
    return rays / np.linalg.norm(rays, axis=1, keepdims=True)


@dataclass(frozen=True)
class BoxRays:
    """Unit world rays (N x 3) through each box's bottom centre (the feet), that point one edge error lower, its centre
    and its top centre: every point a box's sources look along, unprojected in one call."""

    feet: np.ndarray
    nudged: np.ndarray
    centre: np.ndarray
    top: np.ndarray

    @classmethod
    def of(cls, pose: CameraPose, boxes: np.ndarray) -> BoxRays:
        """The rays of ``boxes`` (N x 4 ``x, y, w, h``) seen by ``pose``."""
        x, y, w, h = boxes.T
        middle = x + w / 2
        feet = np.column_stack([middle, y + h])
        nudged = feet + np.column_stack([np.zeros(len(boxes)), np.maximum(BOX_EDGE_STD * h, 1.0)])  # one edge error
        pixels = np.concatenate([feet, nudged, np.column_stack([middle, y + h / 2]), np.column_stack([middle, y])])
        return cls(*(_unit_rays(part, pose) for part in np.split(pose.camera.unproject(pixels), 4)))


def _cuts(boxes: np.ndarray, image_size: tuple[float, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Whether the image's top, bottom, or any edge cuts each box."""
    x, y, w, h = boxes.T
    width, height = image_size
    top, bottom = y <= EDGE_PX, y + h >= height - EDGE_PX
    return top, bottom, top | bottom | (x <= EDGE_PX) | (x + w >= width - EDGE_PX)


def _covariance(along: np.ndarray, along_std: np.ndarray, across_std: np.ndarray) -> np.ndarray:
    """(N, 3, 3) covariances with ``along_std`` along the unit directions ``along`` and ``across_std`` across."""
    outer = along[:, :, None] * along[:, None, :]
    across = (across_std**2)[:, None, None]
    return across * np.eye(3) + ((along_std**2)[:, None, None] - across) * outer


def foot_on_ground(
    pose: CameraPose,
    boxes: np.ndarray,
    image_size: tuple[float, float],
    plane: GroundPlane | None,
    priors: Priors,
    rays: BoxRays | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Points (N, 3) and covariances (N, 3, 3) from each box's bottom centre on the ground plane (``boxes``: N x 4
    ``x, y, w, h``); NaN where the feet are cut off, the ray grazes or misses the plane, or there is no plane.
    ``rays``: the boxes' rays where the caller has them already."""
    n = len(boxes)
    points, covariances = np.full((n, 3), np.nan), np.full((n, 3, 3), np.nan)
    if plane is None or not n:
        return points, covariances
    seen = BoxRays.of(pose, boxes) if rays is None else rays
    feet = seen.feet
    angle_error = np.arccos(np.clip(np.sum(feet * seen.nudged, axis=1), -1.0, 1.0))  # the bottom edge's error
    centre = camera_centre(pose)
    above = float(plane.up @ centre - plane.offset)  # the camera's height over the floor
    descent = -(feet @ plane.up)  # sine of the ray's angle below the floor's horizon
    _, bottom_cut, cut = _cuts(boxes, image_size)
    usable = (descent > np.sin(np.radians(MIN_GRAZING_DEG))) & ~bottom_cut & (above > 0)
    if not usable.any():
        return points, covariances
    descent, feet, angle_error = descent[usable], feet[usable], angle_error[usable]
    distance = above / descent
    slope = np.sqrt(np.maximum(1 - descent**2, 0.0))  # d(descent) / d(angle)
    floor_error = plane.height_error(centre + distance[:, None] * feet)
    along = np.hypot(floor_error / descent, above * slope / descent**2 * angle_error)
    pelvis = PELVIS_FRACTION * priors.person_height_m
    points[usable] = centre + distance[:, None] * feet + pelvis * plane.up
    across = np.hypot(
        np.where(cut[usable], CUT_BOX_STD * priors.person_height_m, BOX_CENTRE_STD_M), angle_error * distance
    )
    spread = _covariance(feet, along, across)
    covariances[usable] = spread + PELVIS_HEIGHT_STD_M**2 * np.outer(plane.up, plane.up)
    return points, covariances


def by_height(
    pose: CameraPose,
    boxes: np.ndarray,
    image_size: tuple[float, float],
    priors: Priors,
    rays: BoxRays | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Points (N, 3) and covariances (N, 3, 3) on each box centre's ray at the distance a person of
    ``person_height_m`` has at the box's angular height (``rays`` as :func:`foot_on_ground`'s)."""
    seen = BoxRays.of(pose, boxes) if rays is None else rays
    angle = np.arccos(np.clip(np.sum(seen.top * seen.feet, axis=1), -1.0, 1.0))
    distance = np.maximum(priors.person_height_m / (2 * np.tan(np.maximum(angle, 1e-6) / 2)), MIN_DISTANCE_M)
    top_cut, bottom_cut, cut = _cuts(boxes, image_size)
    fraction = np.where(top_cut | bottom_cut, 1.0, priors.size_noise)
    across = np.where(cut, CUT_BOX_STD * priors.person_height_m, BOX_CENTRE_STD_M)
    points = camera_centre(pose) + distance[:, None] * seen.centre
    return points, _covariance(seen.centre, np.maximum(fraction * distance, across), across)


def from_roots(pose: CameraPose, roots: np.ndarray, priors: Priors) -> tuple[np.ndarray, np.ndarray]:
    """Metric roots (N, 3; NaN where none) with error ``root_noise`` of their distance along their ray (at least
    BOX_CENTRE_STD_M) and BOX_CENTRE_STD_M across."""
    offset = roots - camera_centre(pose)
    distance = np.maximum(np.linalg.norm(offset, axis=1), 1e-9)
    across = np.full(len(roots), BOX_CENTRE_STD_M)
    along = np.maximum(priors.root_noise * distance, across)
    return roots.copy(), _covariance(offset / distance[:, None], along, across)


def fuse(*estimates: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The information-weighted mean of several (points, covariances) estimates of the same N points, NaN in an
    estimate meaning it has none; NaN where none has one."""
    n = len(estimates[0][0])
    information, weighted = np.zeros((n, 3, 3)), np.zeros((n, 3))
    for points, covariances in estimates:
        known = np.isfinite(points).all(axis=1) & np.isfinite(covariances).all(axis=(1, 2))
        inverse = np.linalg.inv(covariances[known])
        information[known] += inverse
        weighted[known] += np.einsum("nij,nj->ni", inverse, points[known])
    placed = np.abs(np.linalg.det(information)) > 0
    points, covariances = np.full((n, 3), np.nan), np.full((n, 3, 3), np.nan)
    covariances[placed] = np.linalg.inv(information[placed])
    points[placed] = np.einsum("nij,nj->ni", covariances[placed], weighted[placed])
    return points, covariances


def place(
    pose: CameraPose,
    boxes: np.ndarray,
    roots: np.ndarray,
    image_size: tuple[float, float],
    plane: GroundPlane | None,
    priors: Priors,
) -> tuple[np.ndarray, np.ndarray]:
    """World points (N, 3) and covariances (N, 3, 3) of one camera frame's boxes (N x 4 ``x, y, w, h``): the foot on
    the ground, the height prior and the metric roots (N x 3, NaN where a box has none) fused."""
    rays = BoxRays.of(pose, boxes)  # both sources' rays, in one call of the camera model
    return fuse(
        foot_on_ground(pose, boxes, image_size, plane, priors, rays),
        by_height(pose, boxes, image_size, priors, rays),
        from_roots(pose, roots, priors),
    )


def take_planes(images: Any, cameras: dict[str, dict[int, CameraPose]], eye_height_m: float) -> dict[str, Any]:
    """Each take's ground plane from its wearers' poses (fetch's images table: sequence, frame, take, camera; the
    wearers' cameras are ``ariaXX``). A take without a wearer's pose has none (None), nor do images outside the
    official layout (take ``""``: which wearers share a floor is unknown)."""
    planes = {}
    for take, rows in images.groupby("take", sort=True):
        worn = rows[rows["camera"].astype(str).str.startswith("aria") & (rows["take"] != "")]
        poses = [
            cameras[s][int(f)]
            for s, f in zip(worn["sequence"], worn["frame"], strict=True)
            if int(f) in cameras.get(s, {})
        ]
        planes[str(take)] = ground_plane(poses, eye_height_m)
    return planes
