"""Placing a box's person in the world from the download's own inputs (egoeval/egohumans/trackers/placement.py): the
ground plane from the wearers' trajectories on a floor of any tilt, the foot on it through a fisheye, where the
feet are cut off or the ray grazes, the information-weighted fusion, and the figures BENCHMARKS.md documents
(bench/placement.py re-derived on the sample the shared reproduced run generated, fetched and detected)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, copy_workspace
from scipy.spatial.transform import Rotation

from bench.placement import SAMPLE, goals, placement_errors, tracker_scores
from egoeval.egohumans.trackers.egomotion import CameraPose
from egoeval.egohumans.trackers.placement import (
    HEAD_TILT_STD,
    PELVIS_FRACTION,
    Priors,
    by_height,
    camera_centre,
    foot_on_ground,
    fuse,
    ground_plane,
)

ARIA = [300.0, 322.0, 238.0, 0.02, -0.004, 0.0005, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
WIDTH, HEIGHT = 640, 480
PRIORS = Priors(person_height_m=1.7, eye_height_m=1.6, size_noise=0.2, root_noise=0.1)


def wearer(centre: np.ndarray, yaw: float, tilt: np.ndarray, pitch: float = 0.1) -> CameraPose:
    """An Aria at ``centre`` (floor coordinates: y up) turned by ``yaw``, pitched down by ``pitch``, in a world
    that is the floor frame turned by ``tilt`` (a rotation matrix)."""
    forward = np.array([math.sin(yaw) * math.cos(pitch), -math.sin(pitch), math.cos(yaw) * math.cos(pitch)])
    right = np.cross(forward, [0.0, 1.0, 0.0])
    right /= np.linalg.norm(right)
    rotation = np.stack([right, np.cross(forward, right), forward]) @ tilt.T  # world -> camera
    pose = np.eye(4)
    pose[:3, :3], pose[:3, 3] = rotation, -rotation @ (tilt @ centre)
    return CameraPose.from_calibration(ARIA, pose.ravel(), "aria_fisheye")


def box_of(pose: CameraPose, feet: np.ndarray, head: np.ndarray) -> np.ndarray:
    """The x, y, w, h box from a person's feet to the head (world points), 0.35 of its height wide."""
    (fx, fy), (hx, hy) = pose.camera.project(pose.to_camera(np.stack([feet, head])))
    h = fy - hy
    return np.array([(fx + hx) / 2 - 0.175 * h, hy, 0.35 * h, h])


@pytest.mark.parametrize("tilt_deg", [0.0, 25.0])
def test_the_floor_is_found_under_walking_wearers_and_the_feet_on_it(tilt_deg: float) -> None:
    """Wearers (eye height 1.6 m) walking over the room, in a world frame tilted against the floor (as a real
    take's, the first wearer's Aria frame): the plane's normal and height come back, and a box's foot lands on it."""
    tilt = Rotation.from_rotvec([math.radians(tilt_deg), 0.0, math.radians(tilt_deg / 2)]).as_matrix()
    rng = np.random.default_rng(5)
    poses = [
        wearer(np.array([x, 1.6 + rng.normal(0, 0.02), z]), yaw, tilt)
        for x, z, yaw in zip(rng.uniform(-3, 3, 200), rng.uniform(-3, 3, 200), rng.uniform(0, 6.28, 200), strict=True)
    ]
    plane = ground_plane(poses, PRIORS.eye_height_m)
    assert plane is not None and plane.tilt_std < math.radians(1)
    assert plane.up @ (tilt @ [0.0, 1.0, 0.0]) > math.cos(math.radians(0.5))
    assert abs(plane.offset - plane.up @ (tilt @ np.zeros(3))) < 0.02
    pose = wearer(np.array([0.0, 1.6, 0.0]), 0.2, tilt)
    feet, height = np.array([1.0, 0.0, 4.0]), 1.7
    found = box_of(pose, tilt @ feet, tilt @ (feet + np.array([0.0, height, 0.0])))[None]
    point, covariance = foot_on_ground(pose, found, (WIDTH, HEIGHT), plane, PRIORS)
    pelvis = tilt @ (feet + np.array([0.0, PELVIS_FRACTION * PRIORS.person_height_m, 0.0]))
    assert np.linalg.norm(point[0] - pelvis) < 0.1
    assert 0.05 < math.sqrt(np.linalg.eigvalsh(covariance[0])[-1]) < 0.5  # a few metres off: decimetres
    by_size, _ = by_height(pose, found, (WIDTH, HEIGHT), PRIORS)
    assert np.linalg.norm(by_size[0] - pelvis) < 0.3


def test_a_wearer_standing_still_gives_a_plane_across_the_head_with_its_tilt_unknown() -> None:
    poses = [wearer(np.array([0.0, 1.6, 0.0]), yaw, np.eye(3)) for yaw in np.linspace(0, 6, 30)]
    plane = ground_plane(poses, PRIORS.eye_height_m)
    assert plane is not None and plane.tilt_std == HEAD_TILT_STD
    assert plane.up[1] > 0.99 and abs(plane.offset) < 0.05
    assert ground_plane([], PRIORS.eye_height_m) is None


def test_no_foot_where_the_feet_are_cut_off_or_the_ray_grazes_the_floor() -> None:
    poses = [wearer(np.array([x, 1.6, z]), 0.0, np.eye(3)) for x in (-2, 0, 2) for z in (-2, 0, 2)]
    plane = ground_plane(poses, PRIORS.eye_height_m)
    pose = wearer(np.array([0.0, 1.6, 0.0]), 0.0, np.eye(3), pitch=0.0)
    near = box_of(pose, np.array([0.0, 0.0, 4.0]), np.array([0.0, 1.7, 4.0]))
    cut = near.copy()
    cut[3] = HEIGHT - cut[1]  # the image's bottom edge cuts the box
    grazing = box_of(pose, np.array([0.0, 0.0, 200.0]), np.array([0.0, 1.7, 200.0]))  # 0.5 degrees below
    points, _ = foot_on_ground(pose, np.stack([near, cut, grazing]), (WIDTH, HEIGHT), plane, PRIORS)
    assert np.isfinite(points[0]).all() and np.isnan(points[1:]).all()
    point, spread = by_height(pose, cut[None], (WIDTH, HEIGHT), PRIORS)
    distance = np.linalg.norm(point[0] - camera_centre(pose))
    assert math.sqrt(np.linalg.eigvalsh(spread[0])[-1]) >= 0.99 * distance  # a cut box's height tells little


def test_fusion_is_the_information_weighted_mean() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    ca = np.stack([np.diag(rng.uniform(0.1, 1, 3)) for _ in range(4)])
    cb = np.stack([np.diag(rng.uniform(0.1, 1, 3)) for _ in range(4)])
    b[3] = np.nan  # one source has no estimate for the last point
    points, covariances = fuse((a, ca), (b, cb))
    for n in range(3):
        ia, ib = np.linalg.inv(ca[n]), np.linalg.inv(cb[n])
        np.testing.assert_allclose(covariances[n], np.linalg.inv(ia + ib))
        np.testing.assert_allclose(points[n], np.linalg.inv(ia + ib) @ (ia @ a[n] + ib @ b[n]))
    np.testing.assert_allclose(points[3], a[3])
    assert np.isnan(fuse((b[3:], cb[3:]))[0]).all()


def _table(text: str, heading: str) -> list[list[str]]:
    """The rows (cells) of the first markdown table after ``heading`` in ``text``."""
    rest = text[text.index(heading) :]
    lines = [line for line in rest.splitlines() if line.startswith("|")]
    block = []
    for line in rest.splitlines()[rest.splitlines().index(lines[0]) :]:
        if not line.startswith("|"):
            break
        block.append([cell.strip() for cell in line.strip("|").split("|")])
    return block[2:]


@pytest.mark.slow
def test_benchmarks_documents_the_sample_as_measured(reproduced: Path, tmp_path: Path) -> None:
    """BENCHMARKS.md's 3D error table and the sample's tracker rows and goal are bench/placement.py's, re-derived
    here on the sample this run generated (the reproduced workspace: this repository's params, the sample, fetch,
    detect and track stages run by ``dvc repro``, the same calls as ``bench.placement.prepare`` and ``tracker_scores``
    make; the tracks scored by ``tracker_scores``)."""
    work = copy_workspace(reproduced, tmp_path / "ws")
    measured = {"placement": placement_errors(work), "trackers": tracker_scores(work, tracked=True)}
    text = (REPO / "BENCHMARKS.md").read_text()
    rows = _table(text, "### 3D from the download's own inputs")
    assert [r[0] for r in rows] == list(measured["placement"])
    for row, entry in zip(rows, measured["placement"].values(), strict=True):
        assert row[1:] == [f"{entry['median_m']:.2f}", f"{entry['p90_m']:.2f}", f"{entry['n']:,}"], row
    documented = {r[1]: r[2:] for r in _table(text, "### Trackers with global ids") if r[0] == SAMPLE}
    assert sorted(documented) == sorted(measured["trackers"])
    for run, entry in measured["trackers"].items():
        cells = ["-" if np.isnan(v) else f"{v:.1f}" for v in entry.values()]
        assert documented[run] == cells, run
    goal_rows = {r[1]: r for r in _table(text, "### The goal") if r[0] == SAMPLE}
    for mode, row in goal_rows.items():
        gap = goals(measured["trackers"], mode)
        assert row[2:] == [
            f"{gap['per_camera_gap']:+.1f}",
            f"{gap['cross_gap']:+.1f}",
            "met" if gap["met"] else "not met",
        ]
    assert sorted(goal_rows) == ["file", "gt"]
