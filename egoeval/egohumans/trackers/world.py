"""World-frame tracking, EgoHumans' SimpleBaseline idea: a Kalman filter on each person's 3D root in world coordinates.

Each box's person is placed in the world frame from what the download gives (``egoeval.egohumans.trackers.placement``:
its foot on the ground plane the wearers' own trajectories give, its height under a person-height prior, and the
metric roots only the user's own detections carry, fused with their covariances), so a person standing still stays
still in the world however the head turns or the wearer walks. Each
track keeps a constant-velocity Kalman filter on its root (x, y, z and their velocities, metres and metres per
frame). Before association its box is placed where the predicted root projects in the current camera (the full
pose: rotation and translation), at the height its depth implies, keeping the box's offset from the projected root;
ByteTrack's association (ultralytics, unchanged: high-score pass on IoU with score fusion, low-score pass on IoU,
unconfirmed tracks) then matches, and the first pass rules out pairs whose roots disagree beyond the filter's
``gate_probability`` (Mahalanobis distance with both covariances, chi-square with 3 degrees of freedom). A track
seen only without a placed root (a frame without a pose) follows the ego-motion tracker's head-rotation warp
(``egoeval.egohumans.trackers.egomotion``), which this tracker extends.

Settings (``world.yaml`` beside this module): ByteTrack's, plus ``root_noise`` (a metric root's error as a fraction
of its distance from the camera: monocular depth errs in proportion), ``walk_noise_m`` (the spread of a person's
change of velocity per frame, metres per frame), ``gate_probability``, and placement's priors ``person_height_m``,
``eye_height_m`` and ``size_noise``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from egoeval.egohumans.trackers.egomotion import CameraPose, egomotion_tracker_class

MIN_ROOT_STD_M = 0.05  # a root is never trusted to better than 5 cm
MIN_DEPTH_M = 0.1  # a root nearer than this to the camera plane is not projected
START_SPEED_STD_M = 0.05  # a new track's velocity spread, metres per frame (1.5 m/s at 30 fps)


def chi2_quantile(probability: float, dof: int) -> float:
    """The chi-square quantile, bit for bit ``scipy.stats.chi2.ppf`` (which computes ``2 * gammaincinv(dof / 2, p)``)
    without importing scipy.stats, which costs every tracking stage process a second."""
    from scipy.special import gammaincinv

    return float(2 * gammaincinv(dof / 2, probability))


class RootFilter:
    """Constant-velocity Kalman filter on a world point: state (x, y, z, vx, vy, vz), one step per frame."""

    def __init__(self, walk_noise_m: float) -> None:
        self.motion = np.eye(6)
        self.motion[:3, 3:] = np.eye(3)
        shape = np.vstack([0.5 * np.eye(3), np.eye(3)])  # a velocity change spread over the frame
        self.process = shape @ shape.T * walk_noise_m**2
        self.observe = np.hstack([np.eye(3), np.zeros((3, 3))])

    def initiate(self, root: np.ndarray, error: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A new state at ``root`` (its (3, 3) covariance ``error``), standing still give or take START_SPEED_STD_M."""
        covariance = np.diag(np.r_[np.zeros(3), np.full(3, START_SPEED_STD_M**2)])
        covariance[:3, :3] = error
        return np.r_[root, np.zeros(3)], covariance

    def innovation(self, mean: np.ndarray, covariance: np.ndarray, error: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The predicted root and its covariance with a measurement of covariance ``error``."""
        return mean[:3], self.observe @ covariance @ self.observe.T + error

    def update(
        self, mean: np.ndarray, covariance: np.ndarray, root: np.ndarray, error: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        predicted, spread = self.innovation(mean, covariance, error)
        gain = np.linalg.solve(spread, self.observe @ covariance).T  # P H^T S^-1 (S and P symmetric)
        return mean + gain @ (root - predicted), covariance - gain @ spread @ gain.T

    def predict(self, means: np.ndarray, covariances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One frame ahead, for one state ((6,), (6, 6)) or many ((K, 6), (K, 6, 6)) at once."""
        return means @ self.motion.T, self.motion @ covariances @ self.motion.T + self.process

    def squared_distances(
        self, means: np.ndarray, covariances: np.ndarray, roots: np.ndarray, errors: np.ndarray
    ) -> np.ndarray:
        """(K, N) squared Mahalanobis distances of N roots, each with its own (3, 3) error covariance (``errors``:
        (N, 3, 3)), from K predictions ((K, 6) means, (K, 6, 6) covariances)."""
        spreads = covariances[:, None, :3, :3] + errors[None]
        gaps = roots[None, :, :] - means[:, None, :3]
        return np.einsum("kni,kni->kn", gaps, np.linalg.solve(spreads, gaps[..., None])[..., 0])


def make_world_tracker(settings: Any) -> Any:
    """The world-frame tracker; ``tracker.camera = CameraPose`` before each ``update`` (boxes with ``root``)."""
    return world_tracker_class()(settings)


@cache
def world_tracker_class() -> type:
    """The tracker class (defined on first use: ultralytics is imported only when a tracker runs)."""
    from ultralytics.trackers.byte_tracker import STrack

    class WorldTrack(STrack):
        """ByteTrack's track plus its root's world-frame filter (``world`` None until a detection has a root)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.root: np.ndarray = np.full(3, np.nan)  # this detection's root, when the track is a detection
            self.root_error = np.eye(3) * MIN_ROOT_STD_M**2  # its covariance
            self.camera: CameraPose | None = None  # this detection's frame's camera
            self.world: tuple[np.ndarray, np.ndarray] | None = None
            self.anchor: tuple[np.ndarray, float, float] | None = None  # box centre offset / height, height, depth
            self.filter: RootFilter | None = None

        def activate(self, kalman_filter: Any, frame_id: int) -> None:
            super().activate(kalman_filter, frame_id)
            self._observe(self)

        def re_activate(self, new_track: Any, frame_id: int, new_id: bool = False) -> None:
            super().re_activate(new_track, frame_id, new_id)
            self._observe(new_track)

        def update(self, new_track: Any, frame_id: int) -> None:
            super().update(new_track, frame_id)
            self._observe(new_track)

        def _observe(self, detection: Any) -> None:
            """Fold the detection's root into the world filter and remember where the box sits around it."""
            if self.filter is None or not np.isfinite(detection.root).all():
                return
            if self.world is None:
                self.world = self.filter.initiate(detection.root, detection.root_error)
            else:
                self.world = self.filter.update(*self.world, detection.root, detection.root_error)
            camera = detection.camera
            if camera is None:
                return
            seen = camera.to_camera(detection.root[None])[0]
            if seen[2] > MIN_DEPTH_M:
                box = detection.xywh
                pixel = camera.camera.project(seen[None])[0]
                self.anchor = ((box[:2] - pixel) / max(box[3], 1.0), float(box[3]), float(seen[2]))

    class WorldTracker(egomotion_tracker_class()):
        def __init__(self, args: Any) -> None:
            super().__init__(args)
            self.root_filter = RootFilter(float(args.walk_noise_m))
            self.gate = chi2_quantile(float(args.gate_probability), 3)
            self.track_class = WorldTrack

        def init_track(self, results: Any, img: Any = None) -> list:
            tracks = super().init_track(results, img)
            roots = np.asarray(results.root, dtype=np.float64)
            errors = np.nan_to_num(np.asarray(results.root_error, dtype=np.float64)) + np.eye(3) * MIN_ROOT_STD_M**2
            for track, root, error in zip(tracks, roots, errors, strict=True):
                track.root, track.root_error = root, error
                track.camera = self.camera
                track.filter = self.root_filter
            return tracks

        def multi_predict(self, tracks: list) -> None:
            super().multi_predict(tracks)
            placed = [track for track in tracks if track.world is not None]
            if placed:
                means, covariances = self.root_filter.predict(
                    np.array([t.world[0] for t in placed]), np.array([t.world[1] for t in placed])
                )
                for track, mean, covariance in zip(placed, means, covariances, strict=True):
                    track.world = (mean, covariance)

        def _pre_first_associate(self, strack_pool: list, unconfirmed: list, img: Any, results_high: Any) -> None:
            super()._pre_first_associate(strack_pool, unconfirmed, img, results_high)  # head-rotation warp
            if self.camera is None:
                return
            for track in [*strack_pool, *unconfirmed]:
                if track.world is None or track.anchor is None:
                    continue
                seen = self.camera.to_camera(track.world[0][None, :3])[0]
                if seen[2] <= MIN_DEPTH_M:
                    continue
                offset, height, depth = track.anchor
                predicted_height = height * depth / seen[2]
                track.mean[:2] = self.camera.camera.project(seen[None])[0] + offset * predicted_height
                track.mean[3] = predicted_height

        def get_dists(self, tracks: list, detections: list) -> np.ndarray:
            dists = super().get_dists(tracks, detections)
            if not len(tracks) or not len(detections):
                return dists
            roots = np.array([d.root for d in detections])
            errors = np.array([d.root_error for d in detections])
            known = np.flatnonzero(np.isfinite(roots).all(axis=1))
            placed = [row for row, track in enumerate(tracks) if track.world is not None]
            if not len(known) or not placed:
                return dists
            means = np.array([tracks[row].world[0] for row in placed])
            covariances = np.array([tracks[row].world[1] for row in placed])
            far = self.root_filter.squared_distances(means, covariances, roots[known], errors[known]) > self.gate
            dists[np.ix_(placed, known)] = np.where(far, 1.0, dists[np.ix_(placed, known)])
            return dists

    return WorldTracker
