"""The world-frame tracker (egoeval/egohumans/trackers/world.py): its Kalman filter on 3D roots, that placing people
in the world is what it adds to the ego-motion tracker, re-finding a person the wearer walked past (with the user's
metric roots, and from the boxes and the ground alone), bad inputs, and the bundled sample."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import assert_tracker_wins
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import mahalanobis

from egoeval.core.errors import InputError, ParamsError
from egoeval.core.io.atomic import write_parquet
from egoeval.core.settings import validate_params
from egoeval.egohumans.formats import ROOT_COLUMNS, read_det_txt, read_detection_pickle
from egoeval.egohumans.settings import TrackerConfig, packaged_trackers
from egoeval.egohumans.trackers.egomotion import CameraPose
from egoeval.egohumans.trackers.placement import GroundPlane
from egoeval.egohumans.trackers.world import RootFilter
from egoeval.egohumans.tracking import track, track_sequence
from egoeval.tracking.mot import read_mot

REPO = Path(__file__).resolve().parents[1]
FOCAL, WIDTH, HEIGHT = 400.0, 640, 360
TURNED = np.diag([1.0, -1.0, -1.0])  # world y up, camera y down: the camera looks along world -z


def test_the_filter_on_a_still_walker_is_a_least_squares_line() -> None:
    """Without process noise, the filter's position and velocity are the least-squares line through the roots."""
    rng = np.random.default_rng(3)
    frames = np.arange(60)
    truth = np.array([1.0, 0.9, -4.0]) + np.outer(frames, [0.03, 0.0, -0.01])
    seen = truth + rng.normal(0, 0.05, truth.shape)
    rf = RootFilter(walk_noise_m=1e-9)
    error = np.eye(3) * 0.05**2
    mean, covariance = rf.initiate(seen[0], error)
    for root in seen[1:]:
        mean, covariance = rf.update(*rf.predict(mean, covariance), root, error)
    slope, intercept = np.polynomial.polynomial.polyfit(frames, seen, 1)[::-1]
    np.testing.assert_allclose(mean[3:], slope, atol=2e-4)
    np.testing.assert_allclose(mean[:3], intercept + slope * frames[-1], atol=2e-3)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-5, 5), min_size=3, max_size=3),
    st.floats(0.01, 2.0),
    st.integers(0, 20),
)
def test_the_gate_is_the_mahalanobis_distance(root: list[float], std: float, steps: int) -> None:
    rf = RootFilter(walk_noise_m=0.01)
    mean, covariance = rf.initiate(np.array([0.5, 1.0, -3.0]), np.eye(3) * 0.2**2)
    for _ in range(steps):
        mean, covariance = rf.predict(mean, covariance)
    spread = covariance[:3, :3] + np.eye(3) * std**2
    expected = mahalanobis(root, mean[:3], np.linalg.inv(spread)) ** 2
    got = rf.squared_distances(mean[None], covariance[None], np.array([root]), np.eye(3)[None] * std**2)[0, 0]
    assert got == pytest.approx(expected, rel=1e-9)


def _camera(x: float) -> CameraPose:
    """A pinhole camera 1.6 m up at world ``x``, looking along world -z."""
    centre = np.array([x, 1.6, 0.0])
    pose = np.eye(4)
    pose[:3, :3], pose[:3, 3] = TURNED, -TURNED @ centre
    return CameraPose.from_calibration([FOCAL, WIDTH / 2, HEIGHT / 2, *[0.0] * 12], pose.ravel(), "pinhole")


def _walked_past(frames: int, gap: range, step_m: float) -> tuple[pd.DataFrame, dict[int, CameraPose]]:
    """A person standing 3 m ahead while the wearer walks sideways ``step_m`` per frame, and back from the start of
    ``gap`` on; no detection during ``gap`` (the person is hidden)."""
    walked = [step_m * (f if f < gap.start else 2 * gap.start - f) for f in range(1, frames + 1)]
    cameras = {f: _camera(x) for f, x in enumerate(walked, start=1)}
    root = np.array([0.4, 0.9, -3.0])
    rows = []
    for frame, camera in cameras.items():
        if frame in gap:
            continue
        seen = camera.to_camera(root[None])
        (cx, cy), depth = camera.camera.project(seen)[0], seen[0, 2]
        w, h = FOCAL * 0.5 / depth, FOCAL * 1.7 / depth
        rows.append((frame, cx - w / 2, cy - h / 2, w, h, 0.9, *root))
    return pd.DataFrame(rows, columns=["frame", "x", "y", "w", "h", "score", *ROOT_COLUMNS]), cameras


def test_it_finds_again_a_person_the_wearer_walked_past() -> None:
    """While the person was hidden the wearer turned back: an image-plane filter extrapolates the person's drift
    across the image, the world filter knows they stood still and where the camera went."""
    detections, cameras = _walked_past(60, range(20, 40), 0.05)
    trackers = {kind: TrackerConfig(**settings) for kind, settings in packaged_trackers().items()}
    world = track_sequence(trackers["world"], detections, 60, cameras=cameras)
    ego = track_sequence(trackers["egomotion"], detections, 60, cameras=cameras)
    byte = track_sequence(trackers["bytetrack"], detections, 60)
    assert world["id"].nunique() == 1 and world["frame"].max() == 60
    assert ego["id"].nunique() == 2 and byte["id"].nunique() == 2  # the head did not turn: the warp cannot help


def test_without_roots_it_places_people_from_the_boxes_and_the_ground() -> None:
    """No metric root (gt and official modes): the box's foot on the floor and its height place the person; without
    a ground plane the height alone does; the ego-motion tracker, with neither, loses the person."""
    detections, cameras = _walked_past(60, range(20, 40), 0.05)
    rootless = detections.assign(**{c: np.nan for c in ROOT_COLUMNS})
    trackers = {kind: TrackerConfig(**settings) for kind, settings in packaged_trackers().items()}
    floor = GroundPlane(np.array([0.0, 1.0, 0.0]), 0.0, 0.08)
    for ground in ((floor, (WIDTH, HEIGHT)), None):
        world = track_sequence(trackers["world"], rootless, 60, cameras=cameras, ground=ground)
        assert world["id"].nunique() == 1 and world["frame"].max() == 60
        np.testing.assert_allclose(world[ROOT_COLUMNS].median(), [0.4, 0.9, -3.0], atol=0.3)
    ego = track_sequence(trackers["egomotion"], rootless, 60, cameras=cameras)
    assert ego["id"].nunique() == 2


@pytest.mark.parametrize("layout", ["official", "other"])
def test_the_track_stage_gives_it_the_take_floor_from_the_wearer(tmp_path: Path, layout: str) -> None:
    """Through the stage's work (``track``): in the official layout the wearer's own trajectory gives the floor (a
    take's ``ariaXX``); outside it (no take) the height alone places the person; either way one identity."""
    detections, cameras = _walked_past(60, range(20, 40), 0.05)
    fetched = tmp_path / "fetched"
    fetched.mkdir()
    (fetched / "sequences.json").write_text(json.dumps({"sequences": [{"name": "s", "length": 60}]}))
    take, camera = ("t/001_t", "aria01") if layout == "official" else ("", "")
    images = pd.DataFrame(
        {
            "sequence": "s",
            "frame": list(cameras),
            "extrinsics": [
                np.r_[np.c_[c.rotation, c.translation].ravel(), 0, 0, 0, 1].tolist() for c in cameras.values()
            ],
            "calib_intrinsics": [[FOCAL, WIDTH / 2, HEIGHT / 2, *[0.0] * 12]] * len(cameras),
            "camera_model": "pinhole",
            "take": take,
            "camera": camera,
            "time_stamp": list(cameras),
            "width": WIDTH,
            "height": HEIGHT,
        }
    )
    write_parquet(fetched / "images.parquet", images)
    rootless = detections.assign(sequence="s", **{c: np.nan for c in ROOT_COLUMNS})
    write_parquet(tmp_path / "gt.parquet", rootless)
    config = TrackerConfig(**packaged_trackers()["world"])
    assert track("w", config, tmp_path / "gt.parquet", fetched, tmp_path / "tracks", tmp_path) > 0
    tracks = read_mot(tmp_path / "tracks" / "s.txt", kind="pred")
    assert tracks["id"].nunique() == 1
    points = pd.read_parquet(tmp_path / "tracks" / "world.parquet")
    np.testing.assert_allclose(points[ROOT_COLUMNS].median(), [0.4, 0.9, -3.0], atol=0.3)


@pytest.mark.bad_input
def test_misshapen_roots_are_named(tmp_path: Path) -> None:
    images = pd.DataFrame({"file_name": ["a.jpg"], "sequence": ["s"], "frame": [1], "order": [0]})
    boxes = {"a.jpg": [np.array([[0, 0, 4, 8, 0.9], [1, 1, 5, 9, 0.8]])]}
    path = tmp_path / "d.pkl"
    path.write_bytes(pickle.dumps({"det_bboxes": boxes, "roots_3d": {"a.jpg": np.zeros((1, 3))}}))
    with pytest.raises(InputError, match=r"d\.pkl.*a\.jpg.*one x, y, z per box \(2 boxes\)"):
        read_detection_pickle(path, images)
    path.write_bytes(pickle.dumps({"det_bboxes": boxes, "roots_3d": {"a.jpg": np.zeros((2, 3))}}))
    assert (read_detection_pickle(path, images)[ROOT_COLUMNS].to_numpy() == 0).all()
    txt = tmp_path / "s.txt"
    txt.write_text("1,-1,0,0,4,8,0.9,1.0,2.0,3.0\n1,-1,1,1,4,8,0.8,1.0,nan,3.0\n")
    with pytest.raises(InputError, match=r"s\.txt.*row 2.*three finite numbers"):
        read_det_txt(txt, "s")


@pytest.mark.bad_input
def test_its_settings_are_checked() -> None:
    import yaml

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["egohumans"]["track"]["config"]["world"]["gate_probability"] = 1.5
    with pytest.raises(ParamsError, match=r"gate_probability = 1\.5: must lie in"):
        validate_params(params)


@pytest.mark.slow
def test_it_beats_image_plane_trackers_on_the_sample(reproduced: Path) -> None:
    """(Sequences of other seeds: tests/test_egomotion.py runs them for both of egoeval's trackers.)"""
    metrics = json.loads((reproduced / "metrics/egohumans.json").read_text())
    assert_tracker_wins(metrics, ["gt", "file"], "world")
