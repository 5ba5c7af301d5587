"""EgoHumans input formats: restricted unpickling, COCO-video validation, detection readers."""

from __future__ import annotations

import copy
import json
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import write_parquet
from egoeval.egohumans.formats import (
    RELEASED_DEPTH,
    ROOT_COLUMNS,
    calibration_path,
    check_detections_known,
    load_pickle,
    read_aria_calibration,
    read_det_txt,
    read_detection_pickle,
    read_detections_parquet,
    read_tracking_annotation,
)
from egoeval.egohumans.official_conversion import (
    decode_released_roots,
    linear_transform,
    released_bbox,
    released_root,
)


class _Touch:
    """Unpickling this runs ``os.system(touch <marker>)`` under the plain loader."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return os.system, (f"touch {self.marker}",)


class _Eval:
    def __reduce__(self) -> tuple[Any, ...]:
        return eval, ("1 + 1",)


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_malicious_pickle_is_refused_and_nothing_runs(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "detections.pkl"
    path.write_bytes(pickle.dumps({"det_bboxes": {"a.jpg": [_Touch(marker)]}}, protocol=protocol))
    with pytest.raises(InputError) as err:
        load_pickle(path)
    assert not marker.exists()
    assert str(path) in str(err.value)
    assert f"{os.system.__module__}.system" in str(err.value)  # posix.system on Linux
    # the plain loader would have run it: proves the file really is malicious
    pickle.loads(path.read_bytes())
    assert marker.exists()


def test_builtin_eval_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "eval.pkl"
    path.write_bytes(pickle.dumps(_Eval()))
    with pytest.raises(InputError, match=r"builtins\.eval"):
        load_pickle(path)


def test_codecs_encode_only_latin1(tmp_path: Path) -> None:
    # protocol-2 GLOBAL _codecs.encode with a codec other than latin-1 (hand-assembled opcodes)
    payload = b"\x80\x02c_codecs\nencode\nq\x00X\x03\x00\x00\x00abcq\x01X\x06\x00\x00\x00rot-13q\x02\x86q\x03Rq\x04."
    path = tmp_path / "codec.pkl"
    path.write_bytes(payload)
    assert pickle.loads(payload) == "nop"  # the plain loader would call the rot-13 codec
    with pytest.raises(InputError, match="rot-13"):
        load_pickle(path)


def _images(names: list[str], sequence: str = "seq") -> pd.DataFrame:
    n = len(names)
    return pd.DataFrame({"sequence": sequence, "frame": np.arange(1, n + 1), "file_name": names, "order": np.arange(n)})


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_detection_pickle_of_numpy_arrays_is_read(tmp_path: Path, protocol: int) -> None:
    boxes = {
        "frames/seq/000001.jpg": [np.array([[10, 20, 40, 80, 0.9], [0, 0, 5.5, 7.25, 0.3]], dtype=np.float32)],
        "frames/seq/000002.jpg": [np.zeros((0, 5), dtype=np.float32)],
        "frames/seq/000003.jpg": np.array([[1, 2, 3, 4, 0.5]]),
    }
    path = tmp_path / "detections.pkl"
    path.write_bytes(pickle.dumps({"det_bboxes": boxes, "roots_3d": {}, "n": np.float64(2.0)}, protocol=protocol))
    df = read_detection_pickle(path, _images(list(boxes)))
    assert df[ROOT_COLUMNS].isna().all().all()  # roots_3d {}: none known
    assert df[RELEASED_DEPTH].isna().all()
    assert df.drop(columns=[*ROOT_COLUMNS, RELEASED_DEPTH]).to_dict("records") == [
        {"sequence": "seq", "frame": 1, "x": 10.0, "y": 20.0, "w": 30.0, "h": 60.0, "score": pytest.approx(0.9)},
        {"sequence": "seq", "frame": 1, "x": 0.0, "y": 0.0, "w": 5.5, "h": 7.25, "score": pytest.approx(0.3)},
        {"sequence": "seq", "frame": 3, "x": 1.0, "y": 2.0, "w": 2.0, "h": 2.0, "score": 0.5},
    ]


def _turned(angle: float, shift: tuple[float, float, float]) -> np.ndarray:
    """A 4 x 4 world-to-camera matrix: a turn about y and a shift."""
    c, s = np.cos(angle), np.sin(angle)
    matrix = np.eye(4)
    matrix[:3, :3] = [[c, 0, s], [0, 1, 0], [-s, 0, c]]
    matrix[:3, 3] = shift
    return matrix


def _released_pickle(path: Path, roots: np.ndarray | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """A released pickle of two boxes on one image whose roots_3d the official formula wrote (or ``roots``), and the
    images table with that image's extrinsics; returns (images, the depth map)."""
    extrinsics = _turned(0.7, (1.0, -2.0, 3.5))
    depth = np.arange(100 * 120, dtype=np.float64).reshape(100, 120) / 100.0
    boxes = [(10.4, 20.7, 30.2, 41.9), (50.0, 5.0, 12.5, 60.5)]
    rows = np.array([released_bbox(box) for box in boxes])
    if roots is None:
        roots = np.stack([released_root(depth, box, extrinsics) for box in boxes])
    path.write_bytes(pickle.dumps({"det_bboxes": {"a.jpg": [rows]}, "roots_3d": {"a.jpg": [roots]}}))
    return _images(["a.jpg"]).assign(extrinsics=[extrinsics.ravel().tolist()]), depth


def test_released_roots_are_decoded_for_what_they_hold(tmp_path: Path) -> None:
    """The released roots_3d (box-centre pixel and mean depth through the extrinsics, as the official conversion
    writes them) give back each box's relative depth (released_depth), never a metric root; the same pickle read
    as the user's own detections keeps its roots as metric ones."""
    path = tmp_path / "detections_ego_rgb.pkl"
    images, depth = _released_pickle(path)
    released = read_detection_pickle(path, images, released=True)
    assert released[ROOT_COLUMNS].isna().all().all()
    expected = sorted([depth[20:62, 10:40].mean(), depth[5:65, 50:62].mean()])
    np.testing.assert_allclose(sorted(released[RELEASED_DEPTH]), expected, rtol=1e-12)
    own = read_detection_pickle(path, images)
    assert own[ROOT_COLUMNS].notna().all().all() and own[RELEASED_DEPTH].isna().all()
    point = np.array([[2.0, 4.0, 7.5]])  # decoding inverts the official linear_transform
    roots = linear_transform(point, np.asarray(images["extrinsics"][0]).reshape(4, 4))
    np.testing.assert_allclose(decode_released_roots(roots, np.asarray(images["extrinsics"][0])), point, atol=1e-12)


@pytest.mark.bad_input
def test_released_roots_that_are_no_official_roots_are_named(tmp_path: Path) -> None:
    path = tmp_path / "detections_ego_rgb.pkl"
    images, _ = _released_pickle(path, roots=np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]))
    with pytest.raises(InputError, match=r"detections_ego_rgb\.pkl, row a\.jpg: roots_3d box 0 decodes to pixel"):
        read_detection_pickle(path, images, released=True)
    _released_pickle(path)  # an image without extrinsics (fetch writes []): nothing to decode with, depth unknown
    unposed = read_detection_pickle(path, images.assign(extrinsics=[[]]), released=True)
    assert len(unposed) == 2 and unposed[RELEASED_DEPTH].isna().all()
    _released_pickle(path, roots=np.array([[np.nan, 1.0, 2.0], [np.nan] * 3]))
    with pytest.raises(InputError, match=r"row a\.jpg: roots_3d box 0 is neither three finite numbers nor three NaN"):
        read_detection_pickle(path, images, released=True)


def test_a_released_root_of_nan_leaves_its_depth_unknown(tmp_path: Path) -> None:
    """The official mean over a box narrower than a pixel is NaN (an empty slice): that box's depth is unknown, the
    others are decoded."""
    path = tmp_path / "detections_ego_rgb.pkl"
    images, _ = _released_pickle(path)
    good = pickle.loads(path.read_bytes())["roots_3d"]["a.jpg"][0]
    _released_pickle(path, roots=np.array([good[0], [np.nan] * 3]))
    depths = read_detection_pickle(path, images, released=True).sort_values("x")[RELEASED_DEPTH].to_numpy()
    assert np.isfinite(depths[0]) and np.isnan(depths[1])


def test_old_numpy_module_names_are_admitted(tmp_path: Path) -> None:
    """Pickles written with NumPy 1 name numpy.core.multiarray (mmcv dumps with protocol 2)."""
    data = pickle.dumps({"det_bboxes": {"a.jpg": [np.array([[1.0, 2.0, 3.0, 5.0, 0.7]])]}}, protocol=2)
    old = data.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")
    assert old != data
    path = tmp_path / "old.pkl"
    path.write_bytes(old)
    df = read_detection_pickle(path, _images(["a.jpg"]))
    assert df[["x", "y", "w", "h", "score"]].to_numpy().tolist() == [[1.0, 2.0, 2.0, 3.0, 0.7]]


def test_detection_pickle_errors_name_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "detections.pkl"
    path.write_bytes(pickle.dumps({"det_bboxes": {"nowhere.jpg": [np.zeros((0, 5))]}}))
    with pytest.raises(InputError, match=r"detections\.pkl, row nowhere\.jpg: unknown image path"):
        read_detection_pickle(path, _images(["a.jpg"]))
    path.write_bytes(pickle.dumps({"det_bboxes": {"a.jpg": [np.array([[0, 0, 1, 1, 0.5], [5, 5, 3, 9, 0.5]])]}}))
    with pytest.raises(InputError, match=r"row a\.jpg box 1: negative box size"):
        read_detection_pickle(path, _images(["a.jpg"]))
    path.write_bytes(pickle.dumps({"det_bboxes": {"a.jpg": [np.array([[0, 0, 1, np.nan, 0.5]])]}}))
    with pytest.raises(InputError, match=r"row a\.jpg box 0: NaN"):
        read_detection_pickle(path, _images(["a.jpg"]))
    path.write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(InputError, match="one entry per image: 2 for 1"):
        read_detection_pickle(path, _images(["a.jpg"]))
    path.write_bytes(pickle.dumps(5))
    with pytest.raises(InputError, match="expected a dict keyed by image path"):
        read_detection_pickle(path, _images(["a.jpg"]))


def test_the_four_mmtracking_pickle_layouts(tmp_path: Path) -> None:
    """MOTChallengeDataset.load_detections: {det_bboxes: {name: ..}}, {name: ..}, {det_bboxes: [..]}, [..]; lists
    follow mmtracking's image order (videos in file order, then frame_id)."""
    doc = _doc()
    ann = read_tracking_annotation(_write(tmp_path, doc))
    order = ["a/0.jpg", "a/1.jpg", "a/2.jpg", "b/0.jpg"]  # video 1 (walk) first, as in the file
    boxes = {name: [np.array([[k, k, k + 5, k + 10, 0.5]])] for k, name in enumerate(order)}
    tables = []
    for obj in (
        {"det_bboxes": boxes, "keypoints_3d": {}, "roots_3d": {}},
        boxes,
        {"det_bboxes": list(boxes.values())},
        list(boxes.values()),
    ):
        path = tmp_path / "d.pkl"
        path.write_bytes(pickle.dumps(obj))
        tables.append(read_detection_pickle(path, ann.images))
    for table in tables[1:]:
        pd.testing.assert_frame_equal(table, tables[0])
    walk = tables[0][tables[0]["sequence"] == "walk"]
    assert walk[["frame", "x"]].to_numpy().tolist() == [[1, 0], [2, 1], [3, 2]]


# ----------------------------------------------------------------------------------------- COCO-video annotation


def _doc() -> dict[str, Any]:
    """Two videos; video 1 has three frames, video 2 one frame."""
    images = [
        {
            "id": 10,
            "video_id": 1,
            "frame_id": 0,
            "file_name": "a/0.jpg",
            "height": 100,
            "width": 200,
            "extrinsics": [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0],
            "depth_path": None,
        },
        {
            "id": 11,
            "video_id": 1,
            "frame_id": 1,
            "file_name": "a/1.jpg",
            "height": 100,
            "width": 200,
            "extrinsics": [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0.5],
            "depth_path": None,
        },
        {
            "id": 12,
            "video_id": 1,
            "frame_id": 2,
            "file_name": "a/2.jpg",
            "height": 100,
            "width": 200,
            "extrinsics": [],
            "depth_path": None,
        },
        {
            "id": 20,
            "video_id": 2,
            "frame_id": 0,
            "file_name": "b/0.jpg",
            "height": 100,
            "width": 200,
            "extrinsics": [],
            "depth_path": None,
        },
    ]

    def ann(i: int, image: int, video: int, inst: int, bbox: list[float], **extra: Any) -> dict[str, Any]:
        return {
            "id": i,
            "image_id": image,
            "video_id": video,
            "category_id": 0,
            "instance_id": inst,
            "bbox": bbox,
            "area": bbox[2] * bbox[3],
            "occluded": 0,
            "truncated": 0,
            "iscrowd": 0,
            "ignore": 0,
            "visibility": 1.0,
            "human_name": f"aria{inst:02d}",
            "camera_name": "aria01",
            "camera_mode": "rgb",
            "time_stamp": image,  # the image's number on its camera's clock: increasing with its frames
            **extra,
        }

    annotations = [
        ann(1, 10, 1, 2, [10, 10, 20, 40]),
        ann(2, 10, 1, 3, [50.5, 5, 10, 30], ignore=1),
        ann(3, 11, 1, 2, [12, 10, 20, 40]),
        ann(4, 11, 1, 3, [250, 10, 20, 40]),  # entirely right of the 200 px image: dropped
        ann(5, 12, 1, 3, [60, 10, 0.5, 40]),  # narrower than a pixel: dropped
        ann(6, 20, 2, 7, [0, 0, 5, 5], iscrowd=1),
    ]
    return {
        "categories": [{"id": 0, "name": "pedestrian"}],
        "videos": [{"id": 1, "name": "walk"}, {"id": 2, "name": "fence", "fps": 20}],
        "images": images,
        "annotations": annotations,
    }


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "tracking_ego_rgb.json"
    path.write_text(json.dumps(doc))  # json writes NaN as NaN, which json reads back
    return path


def test_annotation_to_mot_ground_truth(tmp_path: Path) -> None:
    ann = read_tracking_annotation(_write(tmp_path, _doc()))
    assert sorted(ann.ground_truth) == ["fence", "walk"]
    assert ann.ground_truth["walk"].to_numpy().tolist() == [
        [1, 2, 10, 10, 20, 40, 1],
        [1, 3, 50.5, 5, 10, 30, 0],
        [2, 2, 12, 10, 20, 40, 1],
    ]
    assert ann.ground_truth["fence"].to_numpy().tolist() == [[1, 7, 0, 0, 5, 5, 0]]
    assert ann.ground_truth["walk"]["frame"].dtype == np.int64
    seqs = ann.sequences.set_index("name")
    assert seqs.loc["walk", ["length", "images", "width", "height"]].tolist() == [3, 3, 200, 100]
    assert np.isnan(seqs.loc["walk", "fps"]) and seqs.loc["fence", "fps"] == 20
    assert ann.images["frame"].tolist() == [1, 1, 2, 3]  # sorted by sequence: fence, then walk
    pose = np.asarray(ann.images.loc[ann.images["image_id"] == 11, "extrinsics"].item()).reshape(4, 4)
    assert pose[2, 3] == 0.5 and pose[3].tolist() == [0, 0, 0, 1]  # 3 x 4 read as 4 x 4
    assert ann.images.loc[ann.images["image_id"] == 12, "extrinsics"].item() == []


@pytest.mark.parametrize(
    ("mutate", "row", "message"),
    [
        (
            lambda d: d["annotations"][2].update(image_id=10, time_stamp=10),
            "annotations[2]",
            "instance id 2 appears twice in image 10",
        ),
        (lambda d: d["annotations"][1].update(bbox=[1, float("nan"), 3, 4]), "annotations[1]", "NaN"),
        (lambda d: d["annotations"][3].update(bbox=[1, 2, -3, 4]), "annotations[3]", "negative box size"),
        (lambda d: d["annotations"][5].update(image_id=99), "annotations[5]", "unknown image id 99"),
        (lambda d: d["annotations"][0].update(video_id=5), "annotations[0]", "unknown video id 5"),
        (lambda d: d["annotations"][0].update(video_id=2), "annotations[0]", "differs from its image"),
        (lambda d: d["images"][3].update(video_id=9), "images[3]", "unknown video id 9"),
        (lambda d: d["images"][1].update(frame_id=0), "images[1]", "duplicate frame_id"),
        (lambda d: d["annotations"][4].pop("instance_id"), "annotations[4]", "missing field 'instance_id'"),
        (lambda d: d["annotations"][4].update(category_id=1), "annotations[4]", "unknown category id 1"),
        (lambda d: d["videos"][1].update(name="../x"), "videos[1]", "plain file name"),
        (lambda d: d["images"][0].update(extrinsics=[1.0] * 9), "images[0]", "16 numbers (4 x 4) or 12"),
        (lambda d: d["images"][0].update(extrinsics=[1.0] * 16), "images[0]", "last row must be 0 0 0 1"),
        (lambda d: d["annotations"][2].update(time_stamp=-1), "annotations[2]", "time_stamp must be an integer"),
        (lambda d: d["annotations"][1].update(time_stamp=7), "annotations[1]", "differs from 10 of another box"),
        (
            lambda d: [a.update(time_stamp=5) for a in d["annotations"]],
            "annotations[2]",
            "time_stamp 5 of images[1] does not follow 5 of images[0], its video's previous frame",
        ),
        (
            lambda d: d["annotations"][4].update(time_stamp=9),
            "annotations[4]",
            "time_stamp 9 of images[2] does not follow 11 of images[1]",
        ),
        (
            lambda d: d["annotations"][3].update(bbox=[1e308, 2, 1e308, 4]),
            "annotations[3]",
            "the box's far corner (x + w, y + h) is beyond a float",
        ),
        (
            lambda d: d["images"][0].update(extrinsics=[1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            "images[0]",
            "extrinsics: the 3 x 3 block is not a rotation",
        ),
        (
            lambda d: d["images"][0].update(extrinsics=[1, 0, 0, 1e308, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]),
            "images[0]",
            "extrinsics: the camera centre",
        ),
        (lambda d: d["videos"][1].update(name="walk"), "videos[1]", "set egohumans.fetch.duplicate_videos: drop"),
        (lambda d: d["annotations"][3].update(area="big"), "annotations[3]", "'area' must be a finite number"),
        (lambda d: d["annotations"][3].update(area=float("nan")), "annotations[3]", "'area' must be a finite"),
        (lambda d: d["annotations"][3].update(area=10**400), "annotations[3]", "'area' must be a finite number"),
    ],
)
def test_annotation_errors_name_file_and_row(tmp_path: Path, mutate: Any, row: str, message: str) -> None:
    doc = copy.deepcopy(_doc())
    mutate(doc)
    path = _write(tmp_path, doc)
    with pytest.raises(InputError) as err:
        read_tracking_annotation(path)
    assert str(err.value).startswith(f"{path}, row {row}: ")
    assert message in str(err.value)


def test_ground_truth_as_the_dataset_class_reads_it(tmp_path: Path) -> None:
    """mmtracking's MOTChallengeDatasetCustom._parse_ann_info: area <= 0, under a pixel or no overlap with the image
    (touching its edge is none) drops a box; a frame's boxes keep the file's order (it decides exact ties)."""
    doc = _doc()
    later = [
        {**doc["annotations"][0], "id": 7, "instance_id": 1},  # the same box, no area field: w * h
        {**doc["annotations"][0], "id": 8, "instance_id": 8, "bbox": [199.5, 10, 5, 5]},  # half a pixel inside
        {**doc["annotations"][0], "id": 9, "instance_id": 9, "bbox": [-5, 99, 5, 5]},  # ends at x = 0
        {**doc["annotations"][0], "id": 10, "instance_id": 10, "bbox": [20, 100, 5, 5]},  # starts at y = height
    ]
    del later[0]["area"]
    doc["annotations"][0]["area"] = 0  # 20 x 40, but area 0: dropped
    doc["annotations"][2:2] = later
    gt = read_tracking_annotation(_write(tmp_path, doc)).ground_truth["walk"]
    assert gt.to_numpy().tolist()[:3] == [
        [1, 3, 50.5, 5, 10, 30, 0],
        [1, 1, 10, 10, 20, 40, 1],
        [1, 8, 199.5, 10, 5, 5, 1],
    ]
    assert gt["frame"].tolist() == [1, 1, 1, 2]


def test_annotation_not_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{")
    with pytest.raises(InputError, match=r"bad\.json"):
        read_tracking_annotation(path)


# ----------------------------------------------------------------------------------------- text and parquet


def test_det_txt(tmp_path: Path) -> None:
    path = tmp_path / "seq.txt"
    path.write_text("1,-1,10,20,30,40,0.5,-1,-1,-1\n\n2,-1,1.5,2.5,3,4,0.9\n1,-1,0,0,1,1,0.7,-1,-1,-1\n")
    df = read_det_txt(path, "seq")
    assert df[["frame", "x", "y", "w", "h", "score"]].to_numpy().tolist() == [
        [1, 0, 0, 1, 1, 0.7],
        [1, 10, 20, 30, 40, 0.5],
        [2, 1.5, 2.5, 3, 4, 0.9],
    ]
    path.write_text("1,-1,10,20,30,40,0.5\n2,-1,10,20,-3,40,0.5\n")
    with pytest.raises(InputError, match=r"seq\.txt, row 2: negative box size"):
        read_det_txt(path, "seq")
    path.write_text("1,-1,10,20,30,40,0.5\n\n3,-1,x,20,3,40,0.5\n")
    with pytest.raises(InputError, match=r"seq\.txt, row 3: not a number"):
        read_det_txt(path, "seq")
    path.write_text("0,-1,10,20,30,40,0.5\n")
    with pytest.raises(InputError, match=r"row 1: frame must be an integer >= 1"):
        read_det_txt(path, "seq")


def test_detections_parquet_and_known_images(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    df = pd.DataFrame(
        {
            "sequence": ["s", "s"],
            "frame": [2, 1],
            "x": [0.0, 1],
            "y": [0.0, 1],
            "w": [1.0, 1],
            "h": [1.0, 1],
            "score": [0.5, 0.6],
        }
    )
    write_parquet(path, df)
    read = read_detections_parquet(path)
    assert read["frame"].tolist() == [1, 2]
    images = _images(["a", "b"], sequence="s")
    check_detections_known(read, images, path)
    with pytest.raises(InputError, match=r"row s frame 3: no image"):
        check_detections_known(pd.concat([read, read.assign(frame=3)]), images, path)
    with pytest.raises(InputError, match=r"row t frame 1: unknown sequence"):
        check_detections_known(read.assign(sequence="t"), images, path)
    write_parquet(path, df.assign(w=[1.0, np.nan]))
    with pytest.raises(InputError, match=r"d\.parquet, row 1: NaN"):
        read_detections_parquet(path)
    write_parquet(path, df.drop(columns="score"))
    with pytest.raises(InputError, match="missing columns"):
        read_detections_parquet(path)


def test_time_stamps_and_official_extrinsics(tmp_path: Path) -> None:
    doc = _doc()
    turned = [0.0, -1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 2.0, 0.0, 0.0, 1.0, 3.0]  # a quarter turn about z, then moved
    doc["images"][0]["extrinsics"] = [*turned, 0, 0, 0, 1]
    for a in doc["annotations"]:
        a["time_stamp"] = 100 + a["image_id"]
    ann = read_tracking_annotation(_write(tmp_path, doc))
    images = ann.images.set_index("image_id")
    assert images.loc[10, "extrinsics"] == [*turned, 0.0, 0.0, 0.0, 1.0]
    assert images["time_stamp"].to_dict() == {20: 120, 10: 110, 11: 111, 12: 112}


def test_duplicate_video_names_drop_keeps_the_first(tmp_path: Path) -> None:
    """The official concatenation lists 003_fencing twice: ``drop`` keeps the first copy and says which it dropped."""
    doc = _doc()
    copy_of_walk = {"id": 3, "name": "walk"}
    doc["videos"].append(copy_of_walk)
    doc["images"].append({**doc["images"][0], "id": 30, "video_id": 3, "file_name": "a/0.jpg"})
    doc["annotations"].append({**doc["annotations"][0], "id": 30, "image_id": 30, "video_id": 3})
    path = _write(tmp_path, doc)
    with pytest.raises(InputError, match=r"video name 'walk' appears twice \(videos\[0\] and videos\[2\]"):
        read_tracking_annotation(path)
    ann = read_tracking_annotation(path, duplicate_videos="drop")
    assert ann.dropped_videos == ["walk"]
    assert sorted(ann.ground_truth) == ["fence", "walk"] and len(ann.images) == 4
    expected = read_tracking_annotation(_write(tmp_path / "..", _doc()))
    pd.testing.assert_frame_equal(ann.ground_truth["walk"], expected.ground_truth["walk"])


RGB = [600.0, 704.0, 704.0, 0.4, -0.5, 0.1, 0.0, 0.0, 0.0, 1e-4, -1e-4, 0.0, 0.0, 0.0, 0.0]  # f, cx, cy, k0..
SLAM = [240.0, 320.0, 240.0, *[0.0] * 12]
POSE = [1, 0, 0, 0, 1, 0, 0, 0, 1, 0.1, 0.2, 0.3]  # 3 x 4 column-major: R = I, t = (0.1, 0.2, 0.3)


def _calib_text(rgb: list[float], pose: list[float] = POSE) -> str:
    other = " ".join(map(str, SLAM)) + "\n" + " ".join(map(str, POSE)) + "\n"
    return "header\naria01\n" + " ".join(map(str, rgb)) + "\n" + " ".join(map(str, pose)) + "\n" + other * 2


def test_aria_calibration(tmp_path: Path) -> None:
    assert calibration_path("big/seq/ego/aria03/images/rgb/00042.jpg") == ("big/seq/ego/aria03/calib/00042.txt", "rgb")
    assert calibration_path("big/seq/ego/aria03/images/left/00042.jpg")[1] == "left"
    assert calibration_path("big/seq/exo/cam01/images/00042.jpg") is None
    path = tmp_path / "00042.txt"
    path.write_text(_calib_text(RGB))
    intrinsics, extrinsics = read_aria_calibration(path, "rgb")
    assert intrinsics == RGB and extrinsics == list(map(float, POSE))
    assert read_aria_calibration(path, "right") == (SLAM, list(map(float, POSE)))
    for bad, row, message in (
        ([1e308, *RGB[1:]], 3, "focal length [1e+308] outside 1..100000 px"),
        ([600.0, 1e9, *RGB[2:]], 3, "principal point [1000000000.0, 704.0] beyond 100000 px"),
        (
            [*RGB[:3], 1e300, *RGB[4:]],
            3,
            "a distortion coefficient beyond 1000: "
            "[1e+300, -0.5, 0.1, 0.0, 0.0, 0.0, 0.0001, -0.0001, 0.0, 0.0, 0.0, 0.0]",
        ),
    ):
        path.write_text(_calib_text(bad))
        with pytest.raises(InputError) as err:
            read_aria_calibration(path, "rgb")
        assert str(err.value) == f"{path}, row {row}: {message}"
    for pose, message in (
        ([2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0], "not a rotation"),
        ([*POSE[:9], 0, 0, 1e308], "centre"),
    ):
        path.write_text(_calib_text(RGB, pose))
        with pytest.raises(InputError, match=rf"00042\.txt, row 4: .*{message}"):
            read_aria_calibration(path, "rgb")
    path.write_text(_calib_text(list(range(14))))
    with pytest.raises(InputError, match=r"00042\.txt, row 3: expected 15 finite numbers, got 14"):
        read_aria_calibration(path, "rgb")
    path.write_text("header\naria01\n")
    with pytest.raises(InputError, match="a header and 7 lines"):
        read_aria_calibration(path, "rgb")
