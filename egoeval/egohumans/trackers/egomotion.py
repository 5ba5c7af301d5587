"""Ego-motion-aware tracking: ByteTrack whose predicted boxes follow the wearer's known head rotation.

In egocentric video the camera turns with the head, so a person standing still jumps across the image: an image-plane
Kalman filter predicts them where they were, and association fails. Each frame's camera pose is known (the
annotation's 4 x 4 world-to-camera extrinsics, the Aria calibration's intrinsics), so before association every
track's predicted box is carried from the previous camera to the current one: its centre is unprojected to a ray,
rotated by the relative rotation ``R_t R_{t-1}^T`` and projected again; its velocity and size follow the local
Jacobian of that mapping. Translation is ignored (people are metres away; the head moves centimetres per frame).

The camera model is Aria's ``FisheyeRadTanThinPrism`` (15 intrinsics: f, cx, cy, k0..k5, p0, p1, s0..s3: an
equidistant fisheye with radial, tangential and thin-prism distortion), or a pinhole with the same f, cx, cy (the
bundled sample renders so); fetch's ``camera_model`` column says which. Association, the Kalman filter and matching
are ultralytics' ByteTrack, unchanged; the tracker's settings are ByteTrack's (``egomotion.yaml`` beside this module).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

import numpy as np

NEWTON_STEPS = 10
CONVERGED = 1e-15  # radians: a Newton step this small is the last one


CAMERA_MODELS = ("aria_fisheye", "pinhole")


@dataclass(frozen=True)
class CameraModel:
    """Aria's FisheyeRadTanThinPrism camera model, or a pinhole (pixels <-> rays in the camera frame, OpenCV axes)."""

    focal: float
    centre: np.ndarray  # (2,)
    radial: np.ndarray  # k0..k5
    tangential: np.ndarray  # p0, p1
    thin_prism: np.ndarray  # s0..s3
    pinhole: bool = False  # f, cx, cy only: x/z, y/z scaled by f

    @classmethod
    def from_intrinsics(cls, values: Any, model: str = "aria_fisheye") -> CameraModel:
        v = np.asarray(values, dtype=np.float64)
        if v.shape != (15,) or not np.isfinite(v).all() or v[0] <= 0:
            raise ValueError(f"expected 15 finite intrinsics with a positive focal length, got {v.tolist()}")
        if model not in CAMERA_MODELS:
            raise ValueError(f"camera model {model!r} must be one of {CAMERA_MODELS}")
        pinhole = model == "pinhole"
        if pinhole and v[3:].any():
            raise ValueError("a pinhole camera takes f, cx, cy only: the 12 distortion coefficients must be 0")
        return cls(float(v[0]), v[1:3], v[3:9], v[9:11], v[11:15], pinhole)

    def _distort(self, xr: np.ndarray) -> np.ndarray:
        if not self.tangential.any() and not self.thin_prism.any():
            return xr  # no tangential or thin-prism terms: the map is the identity
        r2 = np.sum(xr * xr, axis=-1, keepdims=True)
        out = xr + 2 * np.sum(xr * self.tangential, axis=-1, keepdims=True) * xr + r2 * self.tangential
        powers = np.concatenate([r2, r2 * r2], axis=-1)
        out[..., 0] += powers @ self.thin_prism[0:2]
        out[..., 1] += powers @ self.thin_prism[2:4]
        return out

    @cached_property
    def _radial_terms(self) -> tuple[tuple[float, float], ...]:
        """(k_i, (2 i + 3) k_i) from the last nonzero term down to k0 (trailing zero terms add nothing)."""
        terms = [float(k) for k in self.radial]
        while terms and terms[-1] == 0.0:
            terms.pop()
        return tuple((terms[i], (2 * i + 3) * terms[i]) for i in range(len(terms) - 1, -1, -1))

    def _radial(self, t2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """At theta^2 = ``t2``: theta_d / theta = 1 + k0 theta^2 + k1 theta^4 + ... and its derivative d theta_d /
        d theta = 1 + 3 k0 theta^2 + 5 k1 theta^4 + ..., by Horner's rule."""
        value, slope = 0.0 * t2, 0.0 * t2
        for term, slope_term in self._radial_terms:
            value = (value + term) * t2
            slope = (slope + slope_term) * t2
        return 1 + value, 1 + slope

    def project(self, rays: np.ndarray) -> np.ndarray:
        """(N, 3) directions with z > 0 -> (N, 2) pixels."""
        planar = rays[:, :2] / rays[:, 2:3]
        if self.pinhole:
            return self.focal * planar + self.centre
        norm = np.linalg.norm(planar, axis=1, keepdims=True)
        theta = np.arctan(norm)
        radial = theta * self._radial(theta * theta)[0]
        scale = np.divide(radial, norm, out=np.ones_like(norm), where=norm > 1e-12)
        return self.focal * self._distort(planar * scale) + self.centre

    def unproject(self, pixels: np.ndarray) -> np.ndarray:
        """(N, 2) pixels -> (N, 3) directions (z = 1), inverting :meth:`project` by Newton's method."""
        target = (pixels - self.centre) / self.focal
        if self.pinhole:
            return np.column_stack([target, np.ones(len(target))])
        xr = target.copy()
        for _ in range(NEWTON_STEPS if self.tangential.any() or self.thin_prism.any() else 0):
            # tangential and thin prism: xr such that distort(xr) = target
            distorted, jacobian = _value_and_jacobian(self._distort, xr, 1e-6)
            xr = xr + np.linalg.solve(jacobian, (target - distorted)[..., None])[..., 0]
        wanted = np.linalg.norm(xr, axis=1)
        theta = wanted.copy()
        moving = np.ones(len(theta), dtype=bool)  # each pixel stops at its own first negligible step, as if alone
        for _ in range(NEWTON_STEPS):  # radial: theta such that theta * poly(theta^2) = |xr|
            poly, slope = self._radial(theta * theta)
            value = theta * poly
            step = (wanted - value) / np.where(np.abs(slope) > 1e-9, slope, 1e-9)
            stepped = np.clip(theta + step, 0, np.pi / 2 - 1e-6)
            converged = np.abs(stepped - theta) <= CONVERGED  # Newton's method has converged: more steps change nothing
            theta = np.where(moving, stepped, theta)
            moving &= ~converged
            if not moving.any():
                break
        scale = np.divide(np.tan(theta), wanted, out=np.ones_like(wanted), where=wanted > 1e-12)
        return np.column_stack([xr * scale[:, None], np.ones(len(xr))])


def _value_and_jacobian(fn: Any, points: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
    """A (N, 2) -> (N, 2) map at ``points`` and its (N, 2, 2) Jacobians by central differences, in one call of it."""
    offsets = np.array([[0, 0], [step, 0], [-step, 0], [0, step], [0, -step]])
    moved = fn((points[None, :, :] + offsets[:, None, :]).reshape(-1, 2)).reshape(5, len(points), 2)
    columns = [(moved[1] - moved[2]) / (2 * step), (moved[3] - moved[4]) / (2 * step)]
    return moved[0], np.stack(columns, axis=-1)


@dataclass(frozen=True)
class CameraPose:
    """One frame's camera: its model and world-to-camera rotation and translation."""

    camera: CameraModel
    rotation: np.ndarray  # (3, 3) world -> camera
    translation: np.ndarray  # (3,) world -> camera: x_camera = rotation @ x_world + translation

    def to_camera(self, points: np.ndarray) -> np.ndarray:
        """(N, 3) world points -> (N, 3) camera coordinates (OpenCV axes, z ahead)."""
        return points @ self.rotation.T + self.translation

    @classmethod
    def from_calibration(cls, intrinsics: Any, extrinsics: Any, model: str = "aria_fisheye") -> CameraPose:
        matrix = np.asarray(extrinsics, dtype=np.float64)
        if matrix.shape != (16,) or not np.isfinite(matrix).all():
            raise ValueError(f"expected a 4 x 4 world-to-camera matrix (16 numbers), got {matrix.tolist()}")
        rotation = matrix.reshape(4, 4)[:3, :3]
        if not np.allclose(rotation @ rotation.T, np.eye(3), atol=1e-4):
            raise ValueError("the extrinsics' 3 x 3 block is not a rotation")
        return cls(CameraModel.from_intrinsics(intrinsics, model), rotation, matrix.reshape(4, 4)[:3, 3])


def camera_motion(before: CameraPose, after: CameraPose) -> Any:
    """The image-to-image map of a pure head rotation: pixels of ``before`` -> pixels of ``after``."""
    relative = after.rotation @ before.rotation.T

    def warp(pixels: np.ndarray) -> np.ndarray:
        rays = before.camera.unproject(pixels) @ relative.T
        ahead = rays[:, 2] > 1e-6  # a point turned behind the camera keeps its place
        moved = pixels.copy()
        moved[ahead] = after.camera.project(rays[ahead])
        return moved

    return warp


def warp_tracks(tracks: list[Any], warp: Any) -> None:
    """Move each track's Kalman state (ByteTrack's x, y, a, h and their velocities) through the map ``warp``."""
    if not tracks:
        return
    centres = np.array([track.mean[:2] for track in tracks], dtype=np.float64)
    moved, jacobians = _value_and_jacobian(warp, centres, 0.5)  # half a pixel either way
    for track, centre, jacobian in zip(tracks, moved, jacobians, strict=True):
        if not np.isfinite(jacobian).all():
            continue
        transform = np.eye(8)
        transform[0:2, 0:2] = jacobian
        transform[4:6, 4:6] = jacobian
        scale = float(np.sqrt(abs(np.linalg.det(jacobian))))
        transform[3, 3] = transform[7, 7] = scale  # the height follows the local zoom; the aspect ratio is kept
        track.mean = transform @ track.mean
        track.mean[:2] = centre
        track.covariance = transform @ track.covariance @ transform.T


def make_egomotion_tracker(settings: Any) -> Any:
    """ByteTrack with the ego-motion step; ``tracker.camera = CameraPose`` before each ``update``."""
    return egomotion_tracker_class()(settings)


@cache
def egomotion_tracker_class() -> type:
    """The tracker class (defined on first use: ultralytics is imported only when a tracker runs)."""
    from ultralytics.trackers.byte_tracker import BYTETracker

    class EgoMotionTracker(BYTETracker):
        def __init__(self, args: Any) -> None:
            super().__init__(args)
            self.camera: CameraPose | None = None
            self._previous: CameraPose | None = None

        def _pre_first_associate(self, strack_pool: list, unconfirmed: list, img: Any, results_high: Any) -> None:
            if self.camera is not None:
                if self._previous is not None:
                    warp = camera_motion(self._previous, self.camera)
                    warp_tracks(strack_pool, warp)
                    warp_tracks(unconfirmed, warp)
                self._previous = self.camera  # a frame without a pose: the next pose is compared with the last one

    return EgoMotionTracker
