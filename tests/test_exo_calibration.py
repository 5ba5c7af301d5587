"""The exo cameras' COLMAP calibration (egoeval/egohumans/exo.py) and the takes' 3D ground truth
(egoeval/egohumans/views.py): camera models against OpenCV's, poses through the anchor transform, the official
nearest-time-stamp rule, and hostile files."""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from egoeval.core.errors import InputError
from egoeval.egohumans.exo import ColmapCamera, camera_pose, read_exo_calibration
from egoeval.egohumans.views import read_pose_file, view_of

TAKE = "01_tagging/001_tagging"


def rays(draw: st.DrawFn, count: int = 5) -> np.ndarray:
    points = [[draw(st.floats(-1.2, 1.2)), draw(st.floats(-0.9, 0.9)), 1.0] for _ in range(count)]
    return np.array(points) * draw(st.floats(0.5, 8.0))


@settings(max_examples=60, deadline=None)
@given(st.data(), st.lists(st.floats(-0.05, 0.05), min_size=4, max_size=4), st.floats(0.99, 1.01))
def test_opencv_fisheye_is_opencvs(data: st.DataObject, k: list[float], stretch: float) -> None:
    fx, cx, cy = 600.0, 960.0, 540.0
    camera = ColmapCamera.from_params("OPENCV_FISHEYE", [fx, fx * stretch, cx, cy, *k])
    points = rays(data.draw)
    matrix = np.array([[fx, 0, cx], [0, fx * stretch, cy], [0, 0, 1]])
    expected, _ = cv2.fisheye.projectPoints(points[:, None, :], np.zeros(3), np.zeros(3), matrix, np.array(k))
    np.testing.assert_allclose(camera.project(points), expected[:, 0], atol=1e-6)
    back = camera.unproject(camera.project(points))
    np.testing.assert_allclose(back, points / points[:, 2:], atol=1e-7)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_pinholes_are_opencvs(data: st.DataObject) -> None:
    points = rays(data.draw)
    matrix = np.array([[500, 0, 320], [0, 510, 240.0], [0, 0, 1]])
    expected, _ = cv2.projectPoints(points, np.zeros(3), np.zeros(3), matrix, None)
    np.testing.assert_allclose(
        ColmapCamera.from_params("PINHOLE", [500, 510, 320, 240]).project(points), expected[:, 0]
    )
    simple = ColmapCamera.from_params("SIMPLE_PINHOLE", [500, 320, 240])
    np.testing.assert_allclose(simple.project(points)[:, 0], expected[:, 0, 0])


def write_colmap(folder: Path, world_to_colmap: np.ndarray, cameras: dict[str, tuple[np.ndarray, list[int]]]) -> None:
    """``colmap/workplace`` for exo cameras ``{camXX: (world-to-camera 4 x 4, calibrated time stamps)}`` in a COLMAP
    frame ``world_to_colmap`` (a similarity), as COLMAP writes it: headers, an image line and a points line each."""
    folder.mkdir(parents=True)
    scale = np.cbrt(np.linalg.det(world_to_colmap[:3, :3]))
    lines = ["# Camera list", "#   CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]", "# Number of cameras: 1"]
    lines += ["1 OPENCV_FISHEYE 1920 1080 600 601 960 540 0.01 -0.002 0 0"]
    (folder / "cameras.txt").write_text("\n".join(lines) + "\n")
    images, n = ["# Image list", "#   IMAGE_ID, ...", "#   POINTS2D[]", "# Number of images: 2"], 0
    for name, (world_pose, stamps) in cameras.items():
        pose = world_pose @ np.linalg.inv(world_to_colmap) * scale  # COLMAP frame -> camera, in COLMAP's units
        w, x, y, z = np.roll(Rotation.from_matrix(pose[:3, :3]).as_quat(), 1)
        for stamp in stamps:
            n += 1
            images += [f"{n} {w} {x} {y} {z} {pose[0, 3]} {pose[1, 3]} {pose[2, 3]} 1 {name}/{stamp:05d}.jpg", ""]
    images += [f"{n + 1} 1 0 0 0 0 0 0 1 aria01/00001.jpg", "12.5 3.5 -1"]  # an Aria image of the reconstruction
    (folder / "images.txt").write_text("\n".join(images) + "\n")
    (folder / "colmap_from_aria_transforms.pkl").write_bytes(pickle.dumps({"aria01": world_to_colmap}))


def pose(yaw: float, centre: list[float]) -> np.ndarray:
    rotation = Rotation.from_euler("y", yaw).as_matrix()
    out = np.eye(4)
    out[:3, :3], out[:3, 3] = rotation, -rotation @ np.array(centre)
    return out


def test_poses_come_back_in_the_anchor_wearers_world(tmp_path: Path) -> None:
    """A COLMAP frame scaled by 1.7, turned and moved: the extrinsics read back are the world ones, at the nearest
    calibrated time stamp (the earlier on a tie)."""
    similarity = np.eye(4)
    similarity[:3, :3] = 1.7 * Rotation.from_euler("xyz", [0.3, -1.1, 0.4]).as_matrix()
    similarity[:3, 3] = [2.0, -1.0, 5.0]
    first, later = pose(0.4, [5, 3, -2]), pose(0.5, [5, 3, -2.1])
    write_colmap(tmp_path / TAKE / "colmap/workplace", similarity, {"cam01": (first, [1]), "cam02": (later, [20])})
    found = read_exo_calibration(tmp_path / TAKE)
    assert sorted(found) == ["cam01", "cam02"]
    assert found["cam01"].model == "OPENCV_FISHEYE" and found["cam01"].params[:2] == [600.0, 601.0]
    np.testing.assert_allclose(np.reshape(found["cam01"].extrinsics_at(1000), (4, 4)), first, atol=1e-9)
    np.testing.assert_allclose(np.reshape(found["cam02"].extrinsics_at(3), (4, 4)), later, atol=1e-9)
    two = type(found["cam01"])("PINHOLE", [1, 1, 0, 0], {10: [1.0] * 16, 20: [2.0] * 16})
    assert two.extrinsics_at(15) == [1.0] * 16 and two.extrinsics_at(16) == [2.0] * 16
    camera = camera_pose(found["cam01"].params, found["cam01"].extrinsics_at(1), "OPENCV_FISHEYE")
    point = np.array([[5.5, 1.0, 4.0]])
    assert camera.to_camera(point)[0] == pytest.approx((first @ [*point[0], 1])[:3])


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("file", "text", "message"),
    [
        (
            "cameras.txt",
            "1 OPENCV 9 9 6 6 9 5 0 0 0 0\n",
            r"cameras\.txt, row 1: camera 1: COLMAP camera model 'OPENCV' is",
        ),
        ("cameras.txt", "1 OPENCV_FISHEYE 9 9 6 6 9\n", r"cameras\.txt, row 1: camera 1: OPENCV_FISHEYE takes 8"),
        (
            "cameras.txt",
            "# fx 1e308\n1 PINHOLE 1920 1080 1e308 600 960 540\n",
            r"cameras\.txt, row 2: camera 1: PINHOLE: focal length .* outside 1\.\.100000 px",
        ),
        (
            "cameras.txt",
            "1 OPENCV_FISHEYE 1920 1080 600 1e-308 960 540 0 0 0 0\n",
            r"cameras\.txt, row 1: camera 1: OPENCV_FISHEYE: focal length .* outside",
        ),
        (
            "images.txt",
            "1 1 0 0 0 1e308 0 0 1 cam01/00001.jpg\n\n",
            r"images\.txt, row 1: cam01/00001\.jpg .*: the camera centre .* beyond 1000 m",
        ),
        (
            "images.txt",
            "1 1 0 0 0 0 0 0 1 cam01/00001.jpg\n\n2 1 0 0 0 0 0 1 1 cam01/00001.jpg\n\n",
            r"images\.txt, row 3: NAME cam01/00001\.jpg is listed twice \(line 1 and here\)",
        ),
        (
            "images.txt",
            "1 1 0 0 0 0 0 0 1 cam01/00001.jpg\n\n1 1 0 0 0 0 0 1 1 cam01/00002.jpg\n\n",
            r"images\.txt, row 3: IMAGE_ID 1 is listed twice",
        ),
        (
            "images.txt",
            "1 1 0 0 0 0 0 0 1 cam01/00001.jpg\n\n2 1 0 0 0 0 0 1 1 cam01/1.jpg\n\n",
            r"images\.txt, row 3: cam01 has a second image at time stamp 1",
        ),
        ("cameras.txt", "# " + "x" * (2 << 20) + "\n", r"cameras\.txt: 2,097,155 bytes: more than this file may hold"),
        (
            "cameras.txt",
            "1 PINHOLE 1920 1080 600 nan 960 540\n",
            r"cameras\.txt, row 1: camera parameters must be finite",
        ),
        ("images.txt", "1 0 0 0 0 0 0 0 1 cam01/00001.jpg\n\n", r"images\.txt, row 1: expected a unit quaternion"),
        (
            "images.txt",
            "1 1 0 0 0 0 0 0 7 cam01/00001.jpg\n\n",
            r"images\.txt, row 1: camera id 7 is not in cameras\.txt",
        ),
        ("images.txt", "1 1 0 0 0 0 0 cam01/00001.jpg\n\n", r"images\.txt, row 1: expected IMAGE_ID QW"),
        ("images.txt", "1 " + "9" * 70000 + "\n", r"images\.txt, row 1: a line longer than"),
    ],
)
def test_bad_calibration_is_named(tmp_path: Path, file: str, text: str, message: str) -> None:
    write_colmap(tmp_path / TAKE / "colmap/workplace", np.eye(4), {"cam01": (pose(0, [0, 2, 0]), [1])})
    (tmp_path / TAKE / "colmap/workplace" / file).write_text(text)
    with pytest.raises(InputError, match=message):
        read_exo_calibration(tmp_path / TAKE)


def test_a_long_points_line_is_read_through_unheld(tmp_path: Path) -> None:
    """An image's 2D points line may be longer than any line read (thousands of points): it is skipped as COLMAP
    skips it, never held, and the image lines around it are read."""
    folder = tmp_path / TAKE / "colmap/workplace"
    write_colmap(folder, np.eye(4), {"cam01": (pose(0, [0, 2, 0]), [1, 2])})
    lines = (folder / "images.txt").read_text().splitlines()
    points = " ".join(["12.5 3.5 -1"] * 20_000)  # 240 kB
    lines = [points if k > 0 and lines[k - 1].endswith(".jpg") and not line else line for k, line in enumerate(lines)]
    (folder / "images.txt").write_text("\n".join(lines) + "\n")
    assert sorted(read_exo_calibration(tmp_path / TAKE)["cam01"].poses) == [1, 2]


@pytest.mark.bad_input
def test_a_singular_anchor_transform_is_named_in_its_file(tmp_path: Path) -> None:
    folder = tmp_path / TAKE / "colmap/workplace"
    write_colmap(folder, np.eye(4), {"cam01": (pose(0, [0, 2, 0]), [1])})
    singular = np.diag([1.0, 1.0, 0.0, 1.0])
    (folder / "colmap_from_aria_transforms.pkl").write_bytes(pickle.dumps({"aria01": singular}))
    with pytest.raises(InputError, match=r"colmap_from_aria_transforms\.pkl, row aria01: the transform must be a simi"):
        read_exo_calibration(tmp_path / TAKE)


class _Touch:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return os.system, (f"touch {self.marker}",)


@pytest.mark.bad_input
def test_a_transforms_pickle_that_runs_code_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / TAKE / "colmap/workplace"
    write_colmap(folder, np.eye(4), {"cam01": (pose(0, [0, 2, 0]), [1])})
    (folder / "colmap_from_aria_transforms.pkl").write_bytes(pickle.dumps({"aria01": _Touch(tmp_path / "pwned")}))
    with pytest.raises(InputError, match=r"colmap_from_aria_transforms\.pkl: refused global posix\.system"):
        read_exo_calibration(tmp_path / TAKE)
    assert not (tmp_path / "pwned").exists()
    (folder / "colmap_from_aria_transforms.pkl").write_bytes(pickle.dumps({"aria02": np.eye(4)}))
    with pytest.raises(InputError, match="anchor wearer 'aria01'"):
        read_exo_calibration(tmp_path / TAKE)


def npy(obj: Any) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array(obj, dtype=object), allow_pickle=True)
    return buffer.getvalue()


def test_fit_poses3d_as_the_official_files_hold_them(tmp_path: Path) -> None:
    keypoints = np.random.default_rng(0).normal(size=(17, 4))
    (tmp_path / "00001.npy").write_bytes(npy({"aria01": keypoints, "aria02": keypoints + 1}))
    poses = read_pose_file(tmp_path / "00001.npy")
    np.testing.assert_array_equal(poses["aria02"], keypoints + 1)
    assert view_of(f"{TAKE}/exo/cam03/images/00017.jpg") == (TAKE, "cam03")
    assert view_of(f"{TAKE}/ego/aria02/images/rgb/00017.jpg") == (TAKE, "aria02")
    assert view_of("ego/aria02/images/rgb/00017.jpg") is None and view_of("frames/00017.jpg") is None


@pytest.mark.bad_input
def test_hostile_pose_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "00001.npy"
    path.write_bytes(npy({"aria01": _Touch(tmp_path / "pwned")}))
    with pytest.raises(InputError, match=r"00001\.npy: not a fit_poses3d file .*refused global posix\.system"):
        read_pose_file(path)
    assert not (tmp_path / "pwned").exists()
    path.write_bytes(npy({"aria01": np.zeros((5, 4))}))
    with pytest.raises(InputError, match=r"00001\.npy, row aria01: expected a 17 x 4 array"):
        read_pose_file(path)
    np.save(path, np.zeros((17, 4)))
    with pytest.raises(InputError, match="expected one pickled object"):
        read_pose_file(path)
    path.write_bytes(b"\x93NUMPY" + b"\0" * (2 << 20))
    with pytest.raises(InputError, match="more than this file may hold"):
        read_pose_file(path)
    for far in (1e308, np.inf, -1001.0):
        keypoints = np.zeros((17, 4))
        keypoints[11, 2] = far
        path.write_bytes(npy({"aria01": np.zeros((17, 4)), "aria02": keypoints}))
        with pytest.raises(InputError, match=r"00001\.npy, row aria02: a keypoint beyond 1000 m"):
            read_pose_file(path)
