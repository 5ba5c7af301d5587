"""The multi-view tracker (egoeval/egohumans/trackers/multiview.py):
lifting a box to the world through a fisheye camera,
linking tracklets (two people one camera sees together never join), one identity per person over a turning wearer's
Aria and a tripod's COLMAP fisheye (time stamps shared, frames missing, a camera that detects nobody, a frame
without a pose), bad inputs, and its acceptance on the bundled sample."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, assert_multiview_wins

from egoeval.core.errors import InputError
from egoeval.core.settings import ParamsError, validate_params
from egoeval.egohumans.exo import camera_pose
from egoeval.egohumans.formats import ROOT_COLUMNS
from egoeval.egohumans.settings import TrackerConfig, packaged_trackers
from egoeval.egohumans.trackers import TAKE_TRACKERS, tracks_takes
from egoeval.egohumans.trackers.egomotion import CameraPose
from egoeval.egohumans.trackers.multiview import OUTPUT_COLUMNS, lift, link
from egoeval.egohumans.tracking import track_sequence, track_views
from egoeval.tracking.crossview import CameraView, camera_counts

SETTINGS = packaged_trackers()["multiview"]
CONFIG = TrackerConfig(**SETTINGS)
WIDTH, HEIGHT = 640, 480
ARIA = [300.0, 322.0, 238.0, 0.02, -0.004, 0.0005, 0.0, 0.0, 0.0, 1e-4, -2e-4, 0.0, 0.0, 0.0, 0.0]
GOPRO = [330.0, 331.5, 318.0, 242.0, 0.03, -0.01, 0.002, 0.0]  # COLMAP OPENCV_FISHEYE: fx, fy, cx, cy, k1..k4
PERSON = 1.7


def look(centre: np.ndarray, target: np.ndarray) -> list[float]:
    """World-to-camera 4 x 4 (row-major) of a camera at ``centre`` looking at ``target``, level (world y up)."""
    z = (target - centre) / np.linalg.norm(target - centre)
    x = np.cross(z, [0.0, 1.0, 0.0])
    x /= np.linalg.norm(x)
    rotation = np.stack([x, np.cross(z, x), z])
    pose = np.eye(4)
    pose[:3, :3], pose[:3, 3] = rotation, -rotation @ centre
    return pose.ravel().tolist()


def box(pose: CameraPose, root: np.ndarray) -> tuple[float, float, float, float] | None:
    """The box of a PERSON-tall person whose pelvis is ``root``, or None out of view."""
    up = np.array([0, PERSON / 2, 0])
    ends = np.array([root + up, root, root - up])
    seen = pose.to_camera(ends)
    if seen[:, 2].min() < 0.5:
        return None
    (_, top), (cx, _), (_, bottom) = pose.camera.project(seen)
    h = bottom - top
    x, y, w = cx - 0.175 * h, top, 0.35 * h
    if x < 0 or y < 0 or x + w > WIDTH or y + h > HEIGHT:
        return None
    return x, y, w, h


def walk(t: int, person: int) -> np.ndarray:
    """Three people walking circles 3-6 m ahead of the wearer (along +z), pelvis 0.85 m up."""
    angle = 0.04 * t + 2.1 * person
    return np.array([1.8 * math.cos(angle) + 1.2 * (person - 1), 0.85, 4.5 + 1.5 * math.sin(angle)])


def scene(stamps: int = 60, with_roots: bool = False) -> tuple[pd.DataFrame, pd.DataFrame, dict, pd.DataFrame]:
    """Detections, images, poses and ground truth of one take: ``aria01`` (a wearer turning the head +-35 degrees,
    no image at time stamps 20-24, so its frames are not the time stamps), ``cam01`` (a tripod behind, COLMAP's
    fisheye) and ``cam02`` (detects nobody)."""
    detections, images, gt, cameras = [], [], [], {}
    for t in range(1, stamps + 1):
        yaw = math.radians(35) * math.sin(t / 6)
        views = {
            "cam01": camera_pose(GOPRO, look(np.array([0.5, 3.0, 10.0]), np.array([0, 0.9, 4.5])), "OPENCV_FISHEYE")
        }
        views["cam02"] = camera_pose(GOPRO, look(np.array([0, 3.0, 0]), np.array([0, 9.0, -5])), "OPENCV_FISHEYE")
        if not 20 <= t <= 24:
            centre = np.array([0.02 * t, 1.6, 0.0])
            target = centre + np.array([math.sin(yaw), -0.15, math.cos(yaw)])
            views["aria01"] = CameraPose.from_calibration(ARIA, look(centre, target), "aria_fisheye")
        for name, pose in views.items():
            frame = t - 5 * (t > 24) if name == "aria01" else t
            images.append((name, frame, t, WIDTH, HEIGHT, "01_tagging/001_tagging", name))
            cameras.setdefault(name, {})[frame] = pose
            for person in range(3):
                found = box(pose, walk(t, person)) if name != "cam02" else None
                if found is not None:
                    root = walk(t, person) if with_roots else [np.nan] * 3
                    detections.append((name, frame, *found, 0.9, *root))
                    gt.append((name, frame, person + 1, *found))
    columns = ["sequence", "frame", "x", "y", "w", "h", "score", *ROOT_COLUMNS]
    return (
        pd.DataFrame(detections, columns=columns),
        pd.DataFrame(images, columns=["sequence", "frame", "time_stamp", "width", "height", "take", "camera"]),
        cameras,
        pd.DataFrame(gt, columns=["sequence", "frame", "id", "x", "y", "w", "h"]).assign(conf=1.0),
    )


def run(detections: pd.DataFrame, images: pd.DataFrame, cameras: dict) -> dict[str, pd.DataFrame]:
    lengths = images.groupby("sequence")["frame"].max().to_dict()
    return track_views("mv", CONFIG, detections, images, cameras, lengths)


def multi_camera_identity(tables: dict[str, pd.DataFrame], gt: pd.DataFrame, images: pd.DataFrame) -> tuple:
    views = []
    for name, table in sorted(tables.items()):
        stamps = images[images["sequence"] == name].set_index("frame")["time_stamp"].to_dict()
        views.append(CameraView(gt[gt["sequence"] == name].drop(columns="sequence"), table, stamps))
    counts = camera_counts(views, 0.5, shared_ids=True, block=10)
    return counts.weighted(np.ones(len(counts.gt), np.int64))


def test_lift_places_a_box_at_its_person() -> None:
    """Through Aria's fisheye, no ground plane: the box's person at the distance its height tells, spread along the
    ray; with a metric root (the user's own detections), pulled to it."""
    pose = CameraPose.from_calibration(ARIA, look(np.array([0, 1.6, 0]), np.array([2.0, 1.2, 4.0])), "aria_fisheye")
    root = np.array([1.5, 0.85, 5.0])
    found = np.array([box(pose, root)])
    point, spread = lift(pose, found, np.full((1, 3), np.nan), (WIDTH, HEIGHT), None, SETTINGS)
    centre = -pose.translation @ pose.rotation
    ray = (root - centre) / np.linalg.norm(root - centre)
    assert np.linalg.norm(point[0] - root) < 0.05 * np.linalg.norm(root - centre)
    values, vectors = np.linalg.eigh(spread[0])
    assert abs(vectors[:, -1] @ ray) > 0.999  # the long axis is the ray
    assert np.sqrt(values[-1]) == pytest.approx(SETTINGS["size_noise"] * np.linalg.norm(point[0] - centre), rel=1e-6)
    metric = root + np.array([0.0, 0.0, 0.4])
    with_root, fused = lift(pose, found, metric[None], (WIDTH, HEIGHT), None, SETTINGS)
    assert np.linalg.norm(with_root[0] - metric) < np.linalg.norm(point[0] - metric)
    assert np.linalg.eigvalsh(fused[0])[-1] < values[-1]  # two sources: surer than either


@pytest.mark.parametrize("with_roots", [False, True])
def test_one_identity_per_person_over_a_wearer_and_a_tripod(with_roots: bool) -> None:
    detections, images, cameras, gt = scene(with_roots=with_roots)
    tables = run(detections, images, cameras)
    assert sorted(tables) == ["aria01", "cam01", "cam02"] and tables["cam02"].empty
    assert all(list(table.columns) == OUTPUT_COLUMNS for table in tables.values())
    idtp, _, idfp = multi_camera_identity(tables, gt, images)
    boxes = sum(len(table) for table in tables.values())
    assert idfp == 0 and idtp == boxes  # every box its person's one id (a tracklet's first box is not output)
    both = set(tables["aria01"]["id"]) & set(tables["cam01"]["id"])
    assert len(both) == 3  # the same three ids in both views
    roots = pd.concat(tables.values()).groupby(["id"])[ROOT_COLUMNS].std()
    assert roots.notna().all().all()


def persons(tables: dict[str, pd.DataFrame], names: dict[str, str] | None = None) -> set[frozenset]:
    """The boxes each id groups, as sets of (camera, frame, x), cameras named through ``names``."""
    groups: dict[int, set] = {}
    for name, table in tables.items():
        for row in table.itertuples():
            groups.setdefault(row.id, set()).add(((names or {}).get(name, name), row.frame, row.x))
    return {frozenset(g) for g in groups.values()}


def test_the_order_of_the_cameras_changes_no_identity() -> None:
    detections, images, cameras, _ = scene()
    renamed = {"aria01": "z_aria01", "cam01": "a_cam01", "cam02": "m_cam02"}
    first = run(detections, images, cameras)
    second = run(
        detections.replace({"sequence": renamed}),
        images.replace({"sequence": renamed}),
        {renamed[k]: v for k, v in cameras.items()},
    )
    back = {v: k for k, v in renamed.items()}
    assert persons(first) == persons(second, back)
    for name, table in first.items():
        np.testing.assert_allclose(table[ROOT_COLUMNS], second[renamed[name]][ROOT_COLUMNS], atol=1e-6)


def test_a_frame_without_a_pose_keeps_its_person() -> None:
    detections, images, cameras, _ = scene()
    del cameras["cam01"][10]
    tables = run(detections, images, cameras)
    cam = tables["cam01"]
    assert set(cam[cam["frame"] == 10]["id"]) == set(cam[cam["frame"] == 11]["id"])
    assert cam[cam["frame"] == 10][ROOT_COLUMNS].notna().all().all()  # its person's root from the wearer's view
    del cameras["cam01"]  # a camera with no pose at all cannot be placed
    assert run(detections, images, cameras)["cam01"].empty


def test_people_one_camera_sees_together_are_never_linked() -> None:
    """Two people side by side: camera 0 sees both (two tracklets), camera 1 one tracklet compatible with either;
    it joins the closer one only, and two camera-0 tracklets never join however close."""
    rows = []
    for t in range(1, 11):
        for camera, tracklet, x in ((0, 1, 0.0), (0, 2, 0.3), (1, 7, 0.1)):
            rows.append((camera, tracklet, t, np.array([x, 0.9, 4.0]), np.eye(3) * 0.04))
    boxes = pd.DataFrame(rows, columns=["camera", "tracklet", "time_stamp", "point", "spread"])
    person = link(boxes, 0.99)
    key = 2**32
    assert person[1] != person[2] and person[key + 7] == person[1]


@pytest.mark.bad_input
def test_images_outside_the_official_layout_are_named() -> None:
    detections, images, cameras, _ = scene(stamps=4)
    images.loc[images["sequence"] == "cam02", "take"] = ""
    with pytest.raises(InputError, match=r"cam02, row frame 1: tracker 'mv' needs every image's take"):
        run(detections, images, cameras)
    with pytest.raises(ValueError, match="tracks whole takes"):
        track_sequence(CONFIG, detections, 4)


@pytest.mark.bad_input
def test_its_settings_are_checked() -> None:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["egohumans"]["track"]["config"]["multiview"]["size_noise"] = 2.0
    with pytest.raises(ParamsError, match=r"size_noise = 2\.0: must lie in"):
        validate_params(params)


def test_its_ids_are_scored_as_global() -> None:
    assert tracks_takes(CONFIG) and TAKE_TRACKERS == ("multiview", "linked")


@pytest.mark.slow
def test_it_beats_the_linked_baseline_on_the_sample(reproduced: Path) -> None:
    """The goal of BENCHMARKS.md (bench/placement.py measures it on unseen seeds too)."""
    metrics = json.loads((reproduced / "metrics/egohumans.json").read_text())
    assert_multiview_wins(metrics, ["gt", "file"])
    assert metrics["multiview-file"]["cross_view"]["ids"] == "global"
    assert metrics["world-file"]["cross_view"]["ids"] == "per camera"
