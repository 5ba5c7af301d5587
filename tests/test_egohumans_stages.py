"""EgoHumans stages end to end on a small generated sample: sample, fetch, detect, track, score."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import copy_workspace, dvc, official_annotation, run_egohumans_stages
from oracle_env import MotmetricsOracle, assert_equal_to_oracle

from egoeval.core.errors import InputError
from egoeval.core.io.manifest import read_manifest, verify_manifest, write_manifest
from egoeval.core.io.paths import data_roots
from egoeval.core.settings import benchmark_settings, validate_params
from egoeval.core.stage_shell import run_stage
from egoeval.egohumans import crossview, detection, fetching, scoring, tracking
from egoeval.egohumans.exo import camera_pose, read_exo_calibration
from egoeval.egohumans.formats import (
    DETECTION_COLUMNS,
    RELEASED_DEPTH,
    ROOT_COLUMNS,
    read_det_txt,
    read_detection_pickle,
    read_detections_parquet,
)
from egoeval.egohumans.official_conversion import (
    annotation_bbox,
    decode_released_roots,
    linear_transform,
    pose_to_bbox,
    released_bbox,
    released_root,
)
from egoeval.egohumans.sample import generate_sample
from egoeval.egohumans.settings import (
    DetectSettings,
    EgoHumansSettings,
    FetchSettings,
    SampleSettings,
    ScoreSettings,
    TrackerConfig,
)
from egoeval.egohumans.views import read_annotations, read_pose_file
from egoeval.tracking.mot import read_mot, write_mot

REPO = Path(__file__).resolve().parents[1]
SMALL = {"sequences": 2, "frames": 150, "fps": 30, "width": 320, "height": 180, "people": 4, "exo_cameras": 1}
SMALL["seed"] = 3
TRACKERS = ("botsort", "bytetrack", "egomotion", "world", "multiview", "linked")
RUNS = sorted(f"{t}-{m}" for t in TRACKERS for m in ("file", "gt", "official"))
MODES = ["gt", "official", "file"]
ANNOTATION = "benchmark/sample/all/coco_track/tracking_ego_rgb.json"
EXO_ANNOTATION = "benchmark/sample/all/coco_track/tracking_exo.json"
OFFICIAL_PKL = "benchmark/sample/all/coco_track/detections_ego_rgb.pkl"
EXO_PKL = "benchmark/sample/all/coco_track/detections_exo.pkl"
FRAMES = "synthetic/*/ego/aria01/images/rgb/*.jpg"
VIEWS = SMALL["people"] + SMALL["exo_cameras"]
TRACKS = "data/egohumans/tracks"
TRANSFORMS = "colmap/workplace/colmap_from_aria_transforms.pkl"
# what the official conversion (tools/create_benchmark/coco_video_format.py, coco_add_to) writes per image and box
OFFICIAL_IMAGE_KEYS = {"file_name", "height", "width", "id", "video_id", "frame_id", "extrinsics", "depth_path"}
OFFICIAL_ANNOTATION_KEYS = {"id", "image_id", "video_id", "category_id", "instance_id", "bbox", "area", "occluded"}
OFFICIAL_ANNOTATION_KEYS |= {"truncated", "iscrowd", "ignore", "is_vid_train_frame", "visibility", "human_name"}
OFFICIAL_ANNOTATION_KEYS |= {"camera_name", "camera_mode", "time_stamp"}
# the download's files (assets/DOWNLOAD.md: colmap, ego/ariaXX/{calib, images/rgb}, exo/camXX/images,
# processed_data/fit_poses3d; COCO_VIDEO.md: the benchmark annotation and pickles), the user's detections, the manifest
DOWNLOAD_LAYOUT = re.compile(
    r"^(synthetic/\d{3}_synthetic/(colmap/workplace/[^/]+|ego/aria\d\d/(calib/\d{5}\.txt|images/rgb/\d{5}\.jpg)"
    r"|exo/cam\d\d/images/\d{5}\.jpg|processed_data/fit_poses3d/\d{5}\.npy)"
    r"|benchmark/sample/all/coco_track/(tracking_(ego_rgb|exo)\.json|detections_(ego_rgb|exo)\.pkl)"
    r"|detections/(simulated\.pkl|det/[^/]+\.txt)|manifest\.sha256)$"
)


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


def _params(**sample_overrides: Any) -> dict[str, Any]:
    """The repository's params.yaml with a small egohumans sample and every fetched detection mode."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["egohumans"]["sample"] = {**SMALL, **sample_overrides}
    params["egohumans"]["detect"]["modes"] = MODES
    return params


def _fetch_params(root: Path, **changes: Any) -> FetchSettings:
    """egohumans.fetch for a data root ``root`` pinned by ``root/manifest.sha256``."""
    fetch_params = _params()["egohumans"]["fetch"]
    local = {"source": "local", "path": str(root), "manifest": str(root / "manifest.sha256")}
    return FetchSettings(**{**fetch_params, **local, **changes})


def _detect_settings(**changes: Any) -> DetectSettings:
    """egohumans.detect of ``_params`` with ``changes``."""
    return DetectSettings(**{**_params()["egohumans"]["detect"], **changes})


def _score_settings(**changes: Any) -> ScoreSettings:
    """egohumans.score of ``_params`` with ``changes``."""
    return ScoreSettings(**{**_params()["egohumans"]["score"], **changes})


def stage(work: Callable[[EgoHumansSettings], object]) -> int:
    """A stage's work as its CLI runs it: through the stage shell (params checked first, failures mapped to exit
    codes), given params.yaml's egohumans section."""
    return run_stage(lambda: work(benchmark_settings("egohumans", EgoHumansSettings)), benchmark="egohumans")


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Run every egohumans stage through the stage shell in a scratch project folder; yield that folder."""
    root = tmp_path_factory.mktemp("egohumans")
    (root / "params.yaml").write_text(yaml.safe_dump(_params()))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        run_egohumans_stages(root)
        yield root


# ----------------------------------------------------------------------------------------- sample


def test_sample_is_byte_identical_on_rerun(tmp_path: Path) -> None:
    small = SampleSettings(**{**SMALL, "sequences": 1, "frames": 40})
    generate_sample(tmp_path / "a", small)
    generate_sample(tmp_path / "b", small)
    first, second = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    assert first == second
    assert len([name for name in first if name.endswith(".jpg")]) == 40 * VIEWS
    assert len([name for name in first if "/calib/" in name]) == 40 * SMALL["people"]
    assert len([name for name in first if "/fit_poses3d/" in name]) == 40
    names = sorted(n for n in first if n != "manifest.sha256")
    verify_manifest(tmp_path / "a" / "manifest.sha256", tmp_path / "a", names)
    generate_sample(tmp_path / "c", SampleSettings(**{**SMALL, "sequences": 1, "frames": 40, "seed": 4}))
    assert _tree(tmp_path / "c")[ANNOTATION] != first[ANNOTATION]


def test_sample_content(pipeline: Path) -> None:
    root = pipeline / "data/egohumans/sample"
    annotation = read_annotations(root, _fetch_params(root), data_roots(root))
    # as the official conversion: only images where someone is visible, frame_id counting those
    assert (annotation.sequences["length"] == annotation.sequences["images"]).all()
    assert (annotation.sequences["length"] <= SMALL["frames"]).all()
    assert len(annotation.sequences) == VIEWS * SMALL["sequences"]
    assert len(list(root.glob(FRAMES))) == SMALL["frames"] * SMALL["sequences"]
    rendered = SMALL["frames"] * SMALL["sequences"] * VIEWS
    assert sum(p.stat().st_size for p in root.rglob("*")) < 15e3 * rendered  # bytes per rendered view and frame
    # ego extrinsics: 4 x 4, a rotation and a translation whose camera centre sits at eye height; exo: none, as the
    # official conversion writes them; time stamps from 1
    ego = annotation.images[annotation.images["file_name"].str.contains("/ego/")]
    assert len(ego) and (annotation.images["extrinsics"].map(len) == 16).sum() == len(ego)
    for extrinsics in ego["extrinsics"]:
        pose = np.asarray(extrinsics).reshape(4, 4)
        rotation, centre = pose[:3, :3], -pose[:3, :3].T @ pose[:3, 3]
        np.testing.assert_allclose(rotation @ rotation.T, np.eye(3), atol=1e-5)
        assert np.linalg.det(rotation) == pytest.approx(1, abs=1e-5)
        assert 1.4 < centre[1] < 1.8
        assert pose[3].tolist() == [0, 0, 0, 1]
    assert (annotation.images["time_stamp"] >= 1).all()
    exo = json.loads((root / EXO_ANNOTATION).read_text())
    assert exo["images"] and all("extrinsics" not in image for image in exo["images"])
    doc = json.loads((root / ANNOTATION).read_text())
    anns = pd.DataFrame(doc["annotations"] + exo["annotations"])
    assert set(anns["instance_id"]) == set(range(1, SMALL["people"] + 1))  # every wearer, the same id in every view
    assert (anns["human_name"] == anns["instance_id"].map("aria{:02d}".format)).all()
    assert not (anns["camera_name"] == anns["human_name"]).any()  # nobody sees themselves
    # nothing the official conversion does not write: every box visibility 1.0, no occlusion or truncation flags
    assert (anns["visibility"] == 1.0).all() and not anns["occluded"].any() and not anns["truncated"].any()
    for key, fields in (("images", OFFICIAL_IMAGE_KEYS), ("annotations", OFFICIAL_ANNOTATION_KEYS)):
        assert set().union(*(set(record) for record in doc[key] + exo[key])) <= fields, key
    # and no file the download lacks (assets/DOWNLOAD.md, COCO_VIDEO.md) but the user's own detector's
    files = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    assert [name for name in files if not DOWNLOAD_LAYOUT.match(name)] == []
    reentries = 0
    for gt in annotation.ground_truth.values():
        for _, track_rows in gt.groupby("id"):
            reentries += int((np.diff(track_rows["frame"].to_numpy()) > 1).sum())
    assert reentries > 0  # people leave the view and come back
    for take in ("synthetic/001_synthetic", "synthetic/002_synthetic"):
        assert len(read_exo_calibration(root / take)["cam01"].poses) == 1
        poses = read_pose_file(root / take / "processed_data/fit_poses3d/00001.npy")
        assert sorted(poses) == [f"aria{k:02d}" for k in range(1, SMALL["people"] + 1)]
    # the detector output is written twice, as EgoHumans' pickle and as MOTChallenge det.txt: they agree
    from_pickle = read_detection_pickle(root / "detections/simulated.pkl", annotation.images)
    det_files = sorted(root.glob("detections/det/*.txt"))
    from_txt = pd.concat([read_det_txt(p, p.stem) for p in det_files], ignore_index=True)
    assert len(from_pickle) == len(from_txt) > 0 and len(det_files) == VIEWS * SMALL["sequences"]
    columns = ["frame", "x", "y", "w", "h", "score", *ROOT_COLUMNS]  # the roots too: det.txt's world x, y, z
    np.testing.assert_allclose(from_pickle[columns].to_numpy(), from_txt[columns].to_numpy(), atol=2e-3)
    assert from_pickle[ROOT_COLUMNS].notna().all().all()


def test_every_view_sees_each_person_where_the_3d_truth_is(pipeline: Path) -> None:
    """The poses fetch reads (the annotation's ego extrinsics and Aria fisheye calibration, the exo camera's COLMAP
    files through the anchor transform) project each person's fit_poses3d pelvis into that person's box."""
    fetched = pipeline / "data/egohumans/fetched"
    images = pd.read_parquet(fetched / "images.parquet")
    cameras = tracking.camera_poses(images, fetched / "images.parquet")
    roots = pd.read_parquet(fetched / "world_roots.parquet").set_index(["take", "time_stamp", "person"])
    checked = set()
    for sequence, rows in images.groupby("sequence"):
        meta = rows.set_index("frame")
        gt = read_mot(fetched / "gt" / f"{sequence}.txt", kind="gt")
        inside = (gt["x"] > 1) & (gt["y"] > 1) & (gt["x"] + gt["w"] < 319) & (gt["y"] + gt["h"] < 179)
        for box in gt[inside & (gt["h"] > 20)].itertuples():
            row = meta.loc[box.frame]
            root = roots.loc[(row["take"], row["time_stamp"], box.id)].to_numpy()
            pose = cameras[sequence][box.frame]
            pixel = pose.camera.project(pose.to_camera(root[None]))[0]
            assert abs(pixel[0] - (box.x + box.w / 2)) < 0.15 * box.h, (sequence, box)
            assert box.y < pixel[1] < box.y + box.h, (sequence, box)
            checked.add(row["camera"])
    assert checked == {"aria01", "aria02", "aria03", "aria04", "cam01"}


# ----------------------------------------------------------------------------------------- fetch


def test_fetch_outputs(pipeline: Path) -> None:
    fetched = pipeline / "data/egohumans/fetched"
    summary = json.loads((fetched / "sequences.json").read_text())
    names = [s["name"] for s in summary["sequences"]]
    assert summary["detections"] == {"official": [OFFICIAL_PKL, EXO_PKL], "file": "detections/simulated.pkl"}
    assert (summary["modality"], summary["dropped_videos"]) == (["ego_rgb", "exo"], [])
    assert summary["annotation"] == [ANNOTATION, EXO_ANNOTATION]
    assert sorted(p.stem for p in (fetched / "gt").glob("*.txt")) == names
    images = pd.read_parquet(fetched / "images.parquet")
    assert list(images.columns) == [
        "sequence",
        "frame",
        "path",
        "sha256",
        "width",
        "height",
        "extrinsics",
        "time_stamp",
        "calib_intrinsics",
        "camera_model",
        "calib_extrinsics",
        "take",
        "camera",
    ]
    assert len(images) == sum(s["images"] for s in summary["sequences"])
    assert all((pipeline / p).is_file() and p.startswith("data/egohumans/sample/synthetic/") for p in images["path"])
    # an Aria calibration's rgb extrinsics (3 x 4, stored column-major) are in its wearer's own Aria frame: the
    # official coordinate transform (colmap_from_aria of the wearer, inverted, times the anchor's) gives the image's
    # world-to-camera pose
    for row in images[images["camera"] != "cam01"].iloc[::25].itertuples():
        transforms = pickle.loads((pipeline / "data/egohumans/sample" / row.take / TRANSFORMS).read_bytes())
        own = np.vstack([np.asarray(row.calib_extrinsics).reshape(4, 3).T, [0, 0, 0, 1]])
        world = own @ np.linalg.inv(transforms[row.camera]) @ transforms["aria01"]
        np.testing.assert_allclose(world[:3], np.asarray(row.extrinsics).reshape(4, 4)[:3], atol=2e-5)
        assert len(row.calib_intrinsics) == 15 and row.camera_model == "aria_fisheye"
    exo = images[images["camera"] == "cam01"]
    assert (
        len(exo) and (exo["camera_model"] == "OPENCV_FISHEYE").all() and (exo["calib_intrinsics"].map(len) == 8).all()
    )
    roots = pd.read_parquet(fetched / "world_roots.parquet")
    assert len(roots) == SMALL["people"] * len(images[["take", "time_stamp"]].drop_duplicates())
    detections = pd.read_parquet(fetched / "detections_file.parquet")
    assert list(detections.columns) == DETECTION_COLUMNS
    gt_boxes = sum(len(read_mot(p, kind="gt")) for p in (fetched / "gt").glob("*.txt"))
    assert 0.5 * gt_boxes < len(detections) < 1.5 * gt_boxes


def _copy_sample(pipeline: Path, dest: Path) -> Path:
    shutil.copytree(pipeline / "data/egohumans/sample", dest)
    return dest


def test_fetch_from_det_txt_matches_pickle(pipeline: Path, tmp_path: Path) -> None:
    source = _copy_sample(pipeline, tmp_path / "src")
    (source / OFFICIAL_PKL).unlink()
    (source / EXO_PKL).unlink()
    summary = fetching.fetch(_fetch_params(source, detections="detections/det"), tmp_path / "fetched", MODES)
    assert summary["detections"] == {"official": None, "file": "detections/det"}
    from_txt = read_detections_parquet(tmp_path / "fetched/detections_file.parquet")
    from_pickle = read_detections_parquet(pipeline / "data/egohumans/fetched/detections_file.parquet")
    np.testing.assert_allclose(from_txt.iloc[:, 1:].to_numpy(), from_pickle.iloc[:, 1:].to_numpy(), atol=2e-3)


def test_fetch_rejects_tampered_frame(pipeline: Path, tmp_path: Path) -> None:
    source = _copy_sample(pipeline, tmp_path / "src")
    frame = sorted(source.glob(FRAMES))[7]
    frame.write_bytes(frame.read_bytes() + b"\0")
    with pytest.raises(InputError, match="differs from the manifest") as err:
        fetching.fetch(_fetch_params(source), tmp_path / "fetched", MODES)
    assert str(frame) in str(err.value)
    assert not (tmp_path / "fetched").exists()


class _Touch:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return os.system, (f"touch {self.marker}",)


def test_fetch_refuses_malicious_pickle_even_when_pinned(pipeline: Path, tmp_path: Path) -> None:
    source = _copy_sample(pipeline, tmp_path / "src")
    marker = tmp_path / "pwned"
    (source / OFFICIAL_PKL).write_bytes(pickle.dumps({"det_bboxes": {}, "x": _Touch(marker)}))
    assert fetching.write_root_manifest(source, _fetch_params(source), MODES)  # pinned, as --write-manifest does
    with pytest.raises(InputError, match=r"refused global posix\.system") as err:
        fetching.fetch(_fetch_params(source), tmp_path / "fetched", MODES)
    assert str(source / OFFICIAL_PKL) in str(err.value)
    assert not marker.exists()


def test_fetch_requires_a_manifest() -> None:
    params = _params()
    params["egohumans"]["fetch"]["manifest"] = None
    with pytest.raises(InputError, match=r"egohumans\.fetch\.manifest"):
        validate_params(params)


# ----------------------------------------------------------------------------------------- detect, track, score


def test_detect_gt_official_and_file(pipeline: Path) -> None:
    detections = pipeline / "data/egohumans/detections"
    gt = read_detections_parquet(detections / "gt.parquet")
    assert (gt["score"] == 1).all()
    fetched_gt = sum(len(read_mot(p, kind="gt")) for p in (pipeline / "data/egohumans/fetched/gt").glob("*.txt"))
    assert len(gt) == fetched_gt
    # the released pickle holds the ground-truth boxes with score 1.0 (as the official conversion writes it) and
    # their 3D roots, which the ground-truth boxes take from it
    # and beside them their roots_3d decoded: a relative depth (released_depth, ego images only); neither mode carries
    # a metric root, so both feed a tracker the same inputs
    official = read_detections_parquet(detections / "official.parquet")
    pd.testing.assert_frame_equal(official.drop(columns=RELEASED_DEPTH), gt.drop(columns=RELEASED_DEPTH))
    assert gt[[*ROOT_COLUMNS, RELEASED_DEPTH]].isna().all().all() and official[ROOT_COLUMNS].isna().all().all()
    ego = official["sequence"].str.contains("_aria")
    assert official.loc[ego, RELEASED_DEPTH].notna().all() and official.loc[~ego, RELEASED_DEPTH].isna().all()
    file = pd.read_parquet(detections / "file.parquet")
    pd.testing.assert_frame_equal(file, pd.read_parquet(pipeline / "data/egohumans/fetched/detections_file.parquet"))


def test_detect_official_without_the_pickle_names_it(pipeline: Path, tmp_path: Path) -> None:
    source = _copy_sample(pipeline, tmp_path / "src")
    (source / OFFICIAL_PKL).unlink()
    (source / EXO_PKL).unlink()
    fetching.fetch(_fetch_params(source), tmp_path / "fetched", MODES)
    with pytest.raises(InputError, match=r"no detections_ego_rgb\.pkl or detections_exo\.pkl beside benchmark/sample"):
        detection.detect("official", tmp_path / "fetched", tmp_path / "official.parquet", _detect_settings(), source)


def test_tracks_and_scores(pipeline: Path) -> None:
    metrics = json.loads((pipeline / "metrics/egohumans.json").read_text())
    assert sorted(metrics) == RUNS
    gt_dir = pipeline / "data/egohumans/fetched/gt"
    gt_ids = {p.stem: read_mot(p, kind="gt")["id"].nunique() for p in gt_dir.glob("*.txt")}
    for run, result in metrics.items():
        assert sorted(result["sequences"]) == sorted(gt_ids)
        for name, seq in result["sequences"].items():
            assert seq["MT"] + seq["PT"] + seq["ML"] == gt_ids[name]  # every person that appears is counted once
        combined = result["COMBINED"]
        for key in ("HOTA", "DetA", "AssA", "IDF1", "MOTA"):
            assert 0 <= combined[key] <= 100, (run, key)
    for tracker in ("bytetrack", "botsort"):
        assert metrics[f"{tracker}-official"]["COMBINED"] == metrics[f"{tracker}-gt"]["COMBINED"]
        with_gt, with_file = metrics[f"{tracker}-gt"]["COMBINED"], metrics[f"{tracker}-file"]["COMBINED"]
        assert with_gt["IDF1"] > with_file["IDF1"]
        assert with_gt["MOTA"] > with_file["MOTA"]
        assert with_gt["MOTA"] > 60 and with_gt["DetA"] > 60  # most ground-truth boxes survive fast head turns
        assert with_file["MOTA"] > 30  # the simulated detector is decent, not perfect
    for run in RUNS:
        ids = [
            read_mot(p, kind="pred")["id"].nunique() for p in (pipeline / "data/egohumans/tracks" / run).glob("*.txt")
        ]
        assert sum(ids) >= sum(gt_ids.values())
    for run, result in metrics.items():  # across views: per take and combined, each run's world points
        cross = result["cross_view"]
        assert sorted(cross["takes"]) == ["synthetic/001_synthetic", "synthetic/002_synthetic"]
        assert cross["ids"] == ("global" if run.startswith(("multiview", "linked")) else "per camera")
        # world points only where the detections carry metric roots (the user's, mode file) or the tracker places
        # people itself from the boxes and cameras (world, multiview, linked): modes gt and official carry no 3D
        placed = run.endswith("-file") or run.startswith(("world", "multiview", "linked"))
        for entry in (cross["COMBINED"], *cross["takes"].values()):
            low, high = entry["camera"]["ci95"]["IDF1"]
            assert 0 <= low <= high <= 100 and (entry["world"] is not None) == placed, run
        points = pd.read_parquet(pipeline / TRACKS / run / "world.parquet")
        assert list(points.columns) == ["sequence", "frame", "id", *ROOT_COLUMNS] and bool(len(points)) == placed
    table = pd.read_csv(pipeline / "plots/egohumans/sequences.csv")
    assert list(table.columns) == ["run", "sequence", "IDF1", "MOTA", "HOTA"]
    assert len(table) == len(RUNS) * (len(gt_ids) + 1)
    assert table.equals(table.sort_values(["run", "sequence"]).reset_index(drop=True))
    combined = table[table["sequence"] == "COMBINED"].set_index("run")
    for run in RUNS:
        assert combined.loc[run, "IDF1"] == pytest.approx(metrics[run]["COMBINED"]["IDF1"], abs=1e-4)


@pytest.mark.bad_input
def test_a_world_point_twice_is_named(pipeline: Path, tmp_path: Path) -> None:
    run = tmp_path / "multiview-file"
    shutil.copytree(pipeline / TRACKS / "multiview-file", run)
    points = pd.read_parquet(run / "world.parquet")
    points = pd.concat([points, points.iloc[:1]])
    points.to_parquet(run / "world.parquet")
    _, tracks = scoring.read_runs(pipeline / "data/egohumans/fetched/gt", tmp_path, ["multiview-file"])
    first = points.iloc[0]
    with pytest.raises(InputError, match=rf"world\.parquet, row {first['sequence']} frame {first['frame']}: .*twice"):
        crossview.with_world_points(tracks["multiview-file"], run)


def test_tracking_is_deterministic(pipeline: Path, tmp_path: Path) -> None:
    config = TrackerConfig(**_params()["egohumans"]["track"]["config"]["botsort"])
    data = pipeline / "data/egohumans"
    tracking.track(
        "botsort", config, data / "detections/file.parquet", data / "fetched", tmp_path / "again", data / "sample"
    )
    assert _tree(tmp_path / "again") == _tree(data / "tracks/botsort-file")


def test_tracker_frames_without_detections(pipeline: Path, tmp_path: Path) -> None:
    """A sequence with no detections at all still gets an (empty) file; gaps still age tracks out."""
    data = pipeline / "data/egohumans"
    table = read_detections_parquet(data / "detections/gt.parquet")
    first = table["sequence"].min()
    table = table[table["sequence"] != first]
    path = tmp_path / "fewer.parquet"
    table.to_parquet(path, index=False)
    config = TrackerConfig(**_params()["egohumans"]["track"]["config"]["bytetrack"])
    tracking.track("bytetrack", config, path, data / "fetched", tmp_path / "out", data / "sample")
    assert (tmp_path / "out" / f"{first}.txt").read_text() == ""


# ----------------------------------------------------------------------------------------- yolo


@pytest.fixture
def tiny_fetched(tmp_path: Path) -> Path:
    generate_sample(tmp_path / "sample", SampleSettings(**{**SMALL, "sequences": 1, "frames": 3}))
    fetching.fetch(_fetch_params(tmp_path / "sample"), tmp_path / "fetched", MODES)
    return tmp_path / "fetched"


def test_yolo_architecture_only_end_to_end(tiny_fetched: Path, tmp_path: Path) -> None:
    settings = _detect_settings(yolo_weights="arch-only", yolo_batch=2, yolo_imgsz=320, yolo_conf=0.001)
    out = tmp_path / "yolo.parquet"
    detection.detect("yolo", tiny_fetched, out, settings, tiny_fetched.parent / "sample")
    table = pd.read_parquet(out)  # random weights: maybe no boxes at all; the plumbing is what is checked
    assert list(table.columns) == DETECTION_COLUMNS
    assert table["frame"].dtype == np.int64 and table["score"].dtype == np.float64
    assert set(table["frame"]) <= {1, 2, 3}
    read_detections_parquet(out)


def test_yolo_without_weights_is_a_clear_error(tiny_fetched: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"egohumans\.detect\.yolo_weights: not set"):
        detection.detect("yolo", tiny_fetched, tmp_path / "yolo.parquet", _detect_settings(yolo_weights=None), tmp_path)
    missing = tmp_path / "yolo11n.pt"
    with pytest.raises(InputError, match="names no such file") as err:
        settings = _detect_settings(yolo_weights=str(missing))
        detection.detect("yolo", tiny_fetched, tmp_path / "yolo.parquet", settings, tmp_path)
    assert str(missing) in str(err.value)
    assert not missing.exists() and not (tmp_path / "yolo.parquet").exists()


def test_stage_cli_reports_bad_input(pipeline: Path) -> None:
    """The stage CLI turns the missing-weights error into exit code 2 and a one-line message."""
    command = [sys.executable, "-m", "stages.egohumans.detect", "--mode", "yolo"]
    run = subprocess.run(command, cwd=pipeline, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    assert "egohumans.detect.yolo_weights: not set" in run.stderr and "Traceback" not in run.stderr


def merged(*docs: dict[str, Any]) -> dict[str, Any]:
    """Several COCO-video annotations as one (ids offset), as mmtracking would read their concatenation."""
    out: dict[str, Any] = {"categories": docs[0]["categories"], "videos": [], "images": [], "annotations": []}
    for doc in docs:
        videos, images, anns = len(out["videos"]), len(out["images"]), len(out["annotations"])
        out["videos"] += [{**v, "id": v["id"] + videos} for v in doc["videos"]]
        out["images"] += [{**i, "id": i["id"] + images, "video_id": i["video_id"] + videos} for i in doc["images"]]
        out["annotations"] += [
            {**a, "id": a["id"] + anns, "image_id": a["image_id"] + images, "video_id": a["video_id"] + videos}
            for a in doc["annotations"]
        ]
    return out


def official_results(annotation: dict[str, Any], run: Path) -> dict[str, list[list[float]]]:
    """A run's tracker rows ``[id, x1, y1, x2, y2, score]`` per image id of ``annotation``, as mmtracking holds
    them (a video's MOTChallenge frame is its image's ``frame_id + 1``)."""
    names = {video["id"]: video["name"] for video in annotation["videos"]}
    image_of = {(names[img["video_id"]], img["frame_id"] + 1): img["id"] for img in annotation["images"]}
    results: dict[str, list[list[float]]] = {str(img["id"]): [] for img in annotation["images"]}
    for path in sorted(run.glob("*.txt")):
        for r in read_mot(path, kind="pred").itertuples():
            results[str(image_of[path.stem, r.frame])].append([r.id, r.x, r.y, r.x + r.w, r.y + r.h, r.conf])
    return results


def test_scores_equal_eval_mot(pipeline: Path, motmetrics_oracle: MotmetricsOracle) -> None:
    """The score stage's numbers (protocol official) are EgoHumans' evaluation of the annotation it was given."""
    metrics = json.loads((pipeline / "metrics/egohumans.json").read_text())
    root = pipeline / "data/egohumans/sample"
    annotation = merged(*(json.loads((root / name).read_text()) for name in (ANNOTATION, EXO_ANNOTATION)))
    for run in ("bytetrack-file", "botsort-gt", "multiview-file"):
        assert metrics[run]["protocol"] == "official"
        theirs = motmetrics_oracle.evaluate(annotation, official_results(annotation, pipeline / TRACKS / run))
        assert_equal_to_oracle(metrics[run], theirs)


def test_official_score_reads_ground_truth_as_the_dataset_class(
    pipeline: Path, motmetrics_oracle: MotmetricsOracle, tmp_path: Path
) -> None:
    """Boxes narrower or lower than a pixel, with area <= 0 or off the image are dropped and crowd boxes become
    ignore boxes, as EgoHumans' dataset class reads the annotation; exact duplicates (a second person on one box,
    tracker boxes under two ids) tie as lap 0.4.0 breaks them."""
    source = _copy_sample(pipeline, tmp_path / "src")
    annotation = json.loads((source / ANNOTATION).read_text())
    images = {img["id"]: img for img in annotation["images"]}
    added = []
    for k, ann in enumerate(list(annotation["annotations"])[::5]):
        img = images[ann["image_id"]]
        x, y, w, h = ann["bbox"]
        variants = [
            {"bbox": [x, y, 0.5, h]},  # under a pixel wide
            {"bbox": [x, y, w, 0.9]},  # under a pixel high
            {"bbox": [img["width"] + 1, y, w, h]},  # right of the image
            {"bbox": [x, -h, w, h]},  # ends exactly at the top edge
            {"bbox": [x, y, w, h], "area": 0},  # area 0
            {"bbox": [x, y, w, h], "iscrowd": 1},  # a crowd box on the person: an ignore box
            {"bbox": [x, y, w, h], "instance_id": 0},  # a second person on the box, later in the file, lower id
            {"bbox": [x + w - 1, y, w, h]},  # mostly off the person, still on the image (kept)
        ]
        extra = {**ann, "id": 10**6 + k, "instance_id": 900 + k % 40, "area": None, "iscrowd": 0, "ignore": 0}
        extra |= variants[k % len(variants)]
        extra["area"] = extra["bbox"][2] * extra["bbox"][3] if extra["area"] is None else extra["area"]
        added.append(extra)
    annotation["annotations"] += added
    (source / ANNOTATION).write_text(json.dumps(annotation))
    fetching.write_root_manifest(source, _fetch_params(source), MODES)
    fetching.fetch(_fetch_params(source), tmp_path / "fetched", MODES)
    tracks = tmp_path / "tracks"
    shutil.copytree(pipeline / TRACKS / "bytetrack-gt", tracks / "bytetrack-gt")
    (tracks / "duplicates").mkdir()
    for path in (tracks / "bytetrack-gt").glob("*.txt"):  # every third box again under another id
        rows = read_mot(path, kind="pred")
        copies = rows.iloc[::3].assign(id=rows["id"].iloc[::3] + 5000)
        write_mot(tracks / "duplicates" / path.name, pd.concat([rows, copies]))
    runs = ["bytetrack-gt", "duplicates"]
    ours = scoring.score(tmp_path / "fetched/gt", tracks, runs, _score_settings(protocol="official", iou_threshold=0.5))
    both = merged(annotation, json.loads((source / EXO_ANNOTATION).read_text()))
    for run in runs:
        theirs = motmetrics_oracle.evaluate(both, official_results(both, tracks / run))
        assert_equal_to_oracle(ours[run], theirs)
    before = json.loads((pipeline / "metrics/egohumans.json").read_text())["bytetrack-gt"]["COMBINED"]["GT_Dets"]
    gained = ours["bytetrack-gt"]["COMBINED"]["GT_Dets"] - before
    assert 0 < gained < len(added)  # the second persons and most shifted boxes count, the rest were dropped


def test_trackeval_protocol_equals_trackeval(pipeline: Path, tmp_path: Path) -> None:
    """With protocol trackeval the score stage's numbers are TrackEval's (PyPI 1.3.0, MOT15 rules)."""
    from trackeval_oracle import run_trackeval, write_tree

    data = pipeline / "data/egohumans"
    runs = ["bytetrack-file", "botsort-gt"]
    metrics = scoring.score(
        data / "fetched/gt", data / "tracks", runs, _score_settings(protocol="trackeval", iou_threshold=0.5)
    )
    sequences = json.loads((pipeline / "data/egohumans/fetched/sequences.json").read_text())["sequences"]
    lengths = {s["name"]: s["length"] for s in sequences}
    gt = {name: pipeline / "data/egohumans/fetched/gt" / f"{name}.txt" for name in lengths}
    for run in ("bytetrack-file", "botsort-gt"):
        pred = {name: pipeline / "data/egohumans/tracks" / run / f"{name}.txt" for name in lengths}
        write_tree(tmp_path / run, gt, pred, lengths)
        theirs = run_trackeval(tmp_path / run)
        for where, ours, ref in [
            ("COMBINED", metrics[run]["COMBINED"], theirs["COMBINED"]),
            *((name, metrics[run]["sequences"][name], theirs["sequences"][name]) for name in lengths),
        ]:
            assert ours["IDF1"] == pytest.approx(100 * ref["Identity"]["IDF1"], abs=1e-9), (run, where)
            assert ours["MOTA"] == pytest.approx(100 * ref["CLEAR"]["MOTA"], abs=1e-9), (run, where)
            assert ours["HOTA"] == pytest.approx(100 * np.mean(ref["HOTA"]["HOTA"]), abs=1e-9), (run, where)
            assert ours["IDSW"] == ref["CLEAR"]["IDSW"], (run, where)


def test_write_manifest_pins_what_the_annotation_references(pipeline: Path, tmp_path: Path) -> None:
    source = _copy_sample(pipeline, tmp_path / "src")
    names = fetching.write_root_manifest(source, _fetch_params(source), MODES, tmp_path / "m.sha256")
    pinned = (tmp_path / "m.sha256").read_text().splitlines()
    assert len(pinned) == len(set(names)) and all(len(line.split("  ")[0]) == 64 for line in pinned)
    assert {ANNOTATION, EXO_ANNOTATION, OFFICIAL_PKL, EXO_PKL, "detections/simulated.pkl"} <= set(names)
    assert sum("/calib/" in n for n in names) == sum("/images/rgb/" in n for n in names)  # one per annotated image
    assert sum("/fit_poses3d/" in n for n in names) == SMALL["frames"] * SMALL["sequences"]
    assert sum(n.endswith(TRANSFORMS) for n in names) == SMALL["sequences"]
    frame = source / next(n for n in sorted(names) if "/images/rgb/" in n)
    frame.unlink()
    with pytest.raises(InputError, match="missing") as err:
        fetching.write_root_manifest(source, _fetch_params(source), MODES, tmp_path / "m2.sha256")
    assert str(frame) in str(err.value)


@pytest.mark.slow
def test_the_manifest_stands_for_the_data_root_and_every_frame_read_is_checked(
    reproduced: Path, tmp_path: Path
) -> None:
    """egohumans_fetch depends on the manifest, not the data root (no stage walks the root as a dep): a frame
    edited without a new manifest changes no stage's inputs, and the first stage that reads the frame refuses it,
    naming it; restored, the stage runs."""
    root = copy_workspace(reproduced, tmp_path / "repo")
    images = pd.read_parquet(root / "data/egohumans/fetched/images.parquet")
    first = images.sort_values(["sequence", "frame"]).iloc[0]
    frame = root / first["path"]
    assert hashlib.sha256(frame.read_bytes()).hexdigest() == first["sha256"]  # fetch recorded the pinned digest
    original = frame.read_bytes()
    frame.write_bytes(original + b"\0")  # edited in place, no new manifest
    # only the sample's own stage sees it (the bundled root is its output); no stage walks the root as a dep
    status = json.loads(dvc(root, "status", "--json").stdout)
    assert status == {"egohumans_sample": [{"changed outs": {"data/egohumans/sample": "modified"}}]}, status
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["egohumans"]["track"]["config"]["botsort"]["gmc_method"] = "sparseOptFlow"  # reads every frame
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    refused = dvc(root, "repro", "--single-item", "egohumans_track@botsort-gt")  # not the sample stage first
    assert refused.returncode != 0
    assert str(first["path"]) in refused.stderr and "differs from the pinned" in refused.stderr, refused.stderr[-2000:]
    assert "Traceback" not in refused.stderr
    frame.write_bytes(original)
    ran = dvc(root, "repro", "--single-item", "egohumans_track@botsort-gt")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]


# ----------------------------------------------------------------------------------------- no ground truth in a tracker


def _released(pipeline: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sample's ego annotation and released pickle (the test's own files: the plain unpickler is safe here)."""
    root = pipeline / "data/egohumans/sample"
    return json.loads((root / ANNOTATION).read_text()), pickle.loads((root / OFFICIAL_PKL).read_bytes())


def test_released_roots_hold_a_pixel_and_a_relative_depth(pipeline: Path) -> None:
    """The sample's released pickle computes roots_3d as the official conversion does: each box's centre pixel and
    the mean of a MiDaS-like relative inverse depth map through the image's extrinsics, wrapped as det_bboxes; the
    decoded depth follows the person's inverse depth, with a scale of its own in every frame (never metres)."""
    doc, released = _released(pipeline)
    exo = pickle.loads((pipeline / "data/egohumans/sample" / EXO_PKL).read_bytes())
    assert exo["roots_3d"] == {} and exo["det_bboxes"] and exo["keypoints_3d"]  # no depth for the exo cameras
    fetched = pipeline / "data/egohumans/fetched"
    truth = pd.read_parquet(fetched / "world_roots.parquet").set_index(["take", "time_stamp", "person"])
    boxes_of: dict[int, list[dict[str, Any]]] = {}
    for ann in doc["annotations"]:
        boxes_of.setdefault(ann["image_id"], []).append(ann)
    products, gaps = [], []
    for image in doc["images"]:
        name, anns = image["file_name"], boxes_of[image["id"]]
        (roots,), (boxes,) = released["roots_3d"][name], released["det_bboxes"][name]
        assert roots.shape == (len(boxes), 3) == (len(anns), 3)
        extrinsics = np.asarray(image["extrinsics"]).reshape(4, 4)
        decoded = decode_released_roots(roots, extrinsics)
        np.testing.assert_allclose(decoded[:, :2], (boxes[:, :2] + boxes[:, 2:4]) / 2, atol=1e-6)
        np.testing.assert_allclose(linear_transform(decoded, extrinsics), roots, atol=1e-9)
        take = "/".join(name.split("/")[:2])
        for ann, depth, root in zip(anns, decoded[:, 2], roots, strict=True):
            pelvis = truth.loc[(take, ann["time_stamp"], ann["instance_id"])].to_numpy()
            camera_depth = (extrinsics[:3, :3] @ pelvis + extrinsics[:3, 3])[2]
            products.append((image["id"], depth * camera_depth))
            gaps.append(np.linalg.norm(root - pelvis))
    assert np.median(gaps) > 10  # metres: roots_3d are no world points
    per_frame = pd.DataFrame(products, columns=["image", "product"]).groupby("image")["product"]
    spread = per_frame.std().dropna() / per_frame.mean()
    scales = per_frame.median()
    assert scales.max() > 2 * scales.min()  # an unknown scale per frame
    assert spread.median() < 0.5  # within a frame, depth x released depth stays near that frame's scale


@pytest.mark.slow
def test_scrambled_ground_truth_changes_no_track(pipeline: Path, tmp_path: Path) -> None:
    """Acceptance (issue 27): every tracker in every mode on the sample, then again with the 3D ground truth
    (fit_poses3d, the released pickles' keypoints_3d) replaced by noise and the annotations' instance ids permuted
    at random per video (and each image's boxes reversed), the manifest rewritten: the tracks are byte-identical."""
    project = tmp_path / "project"
    shutil.copytree(pipeline / "data/egohumans/sample", project / "data/egohumans/sample")
    shutil.copy2(pipeline / "params.yaml", project / "params.yaml")
    root = project / "data/egohumans/sample"
    rng = np.random.default_rng(27)
    for path in sorted(root.glob("synthetic/*/processed_data/fit_poses3d/*.npy")):
        poses = read_pose_file(path)
        noise = {name: np.column_stack([rng.normal(0, 5, (17, 3)), np.ones(17)]) for name in poses}
        buffer = io.BytesIO()
        np.save(buffer, np.array(noise, dtype=object), allow_pickle=True)
        path.write_bytes(buffer.getvalue())
    for name in (ANNOTATION, EXO_ANNOTATION):
        doc = json.loads((root / name).read_text())
        people = range(1, SMALL["people"] + 1)  # each video's own random ids: unlike across views too
        ids = {
            v["id"]: dict(zip(people, rng.choice(1000, len(people), replace=False).tolist(), strict=True))
            for v in doc["videos"]
        }
        by_image: dict[int, list[dict[str, Any]]] = {}
        for ann in doc["annotations"]:
            ann["instance_id"] = ids[ann["video_id"]][ann["instance_id"]]
            by_image.setdefault(ann["image_id"], []).append(ann)
        doc["annotations"] = [ann for image in sorted(by_image) for ann in reversed(by_image[image])]
        (root / name).write_text(json.dumps(doc))
    for name in (OFFICIAL_PKL, EXO_PKL):
        released = pickle.loads((root / name).read_bytes())
        released["keypoints_3d"] = {k: [rng.normal(0, 5, v[0].shape)] for k, v in released["keypoints_3d"].items()}
        (root / name).write_bytes(pickle.dumps(released))
    write_manifest(root / "manifest.sha256", root, sorted(read_manifest(root / "manifest.sha256")))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(project)
        assert stage(fetching.write_fetched) == 0
        for mode in MODES:
            assert stage(partial(detection.write_detections, mode=mode)) == 0
            for tracker in TRACKERS:
                assert stage(partial(tracking.write_tracks, tracker=tracker, mode=mode)) == 0
    # the scrambling reached what the scorer reads
    assert _tree(project / "data/egohumans/fetched/gt") != _tree(pipeline / "data/egohumans/fetched/gt")
    before, after = (pd.read_parquet(p / "data/egohumans/fetched/world_roots.parquet") for p in (pipeline, project))
    assert not np.allclose(before[ROOT_COLUMNS].to_numpy(), after[ROOT_COLUMNS].to_numpy())
    for run in RUNS:
        assert _tree(project / TRACKS / run) == _tree(pipeline / TRACKS / run), run


def _official_conversion_root(pipeline: Path, dest: Path, annotation_boxes_in_pickle: bool) -> None:
    """A data root whose ego annotation and released pickle are written by the official conversion's formulas
    (egoeval.egohumans.official_conversion) from the sample's own files: each person's fit_poses3d keypoints projected
    through the image's calibration, boxed by ``pose_to_bbox``; ``roots_3d`` from the box-centre pixel and the mean of
    a relative inverse depth map through the extrinsics. ``annotation_boxes_in_pickle``: the pickle's boxes and roots
    are made from the annotation's integer boxes (``x, y, x + w, y + h``), not from the float box whose official
    ``int(bbx + bbw)`` ends may differ from the annotation's ``int(bbx) + int(bbw)`` by a pixel."""
    source = pipeline / "data/egohumans/sample"
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("benchmark", "detections", "manifest.sha256"))
    original = json.loads((source / ANNOTATION).read_text())
    images = pd.read_parquet(pipeline / "data/egohumans/fetched/images.parquet").set_index("path")
    doc: dict[str, Any] = {**original, "images": [], "annotations": []}
    released: dict[str, dict[str, Any]] = {"det_bboxes": {}, "keypoints_3d": {}, "roots_3d": {}}
    rng = np.random.default_rng(5)
    counts: dict[int, int] = {}
    for image in original["images"]:
        row = images.loc[(Path("data/egohumans/sample") / image["file_name"]).as_posix()]
        pose = camera_pose(row["calib_intrinsics"], row["extrinsics"], row["camera_model"])
        poses = read_pose_file(source / row["take"] / "processed_data/fit_poses3d" / f"{row['time_stamp']:05d}.npy")
        people = []
        for human, keypoints in sorted(poses.items()):
            if human == row["camera"]:
                continue
            camera = pose.to_camera(keypoints[:, :3])
            ahead = camera[:, 2] > 0.1
            pixels = np.zeros((17, 3))
            pixels[ahead, :2] = pose.camera.project(camera[ahead])
            pixels[ahead, 2] = 1.0
            box = pose_to_bbox(pixels, image["width"], image["height"])
            if box is not None:
                people.append((float(camera[11:13, 2].mean()), human, box, keypoints))
        if not people:
            continue  # as the official conversion: an image only where someone is in view
        depth = np.full((image["height"], image["width"]), 2.0)
        scale = rng.uniform(200, 800)
        for distance, _, box, _ in sorted(people, reverse=True):  # far to near, the nearest painted last
            x, y, w, h = (int(v) for v in box)
            depth[y : y + h, x : x + w] = scale / max(distance, 0.1)
        extrinsics = np.asarray(image["extrinsics"]).reshape(4, 4)
        image_id = len(doc["images"])
        frame_id = counts.get(image["video_id"], 0)
        counts[image["video_id"]] = frame_id + 1
        doc["images"].append({**image, "id": image_id, "frame_id": frame_id})
        rows, roots = [], []
        for _, human, box, _ in people:
            x, y, w, h = annotation_bbox(box)
            person, area = int(human.replace("aria", "")), int(box[2] * box[3])
            record = official_annotation(
                doc, image_id, image["video_id"], person, [x, y, w, h], area, row["camera"], int(row["time_stamp"])
            )
            doc["annotations"].append(record)
            if annotation_boxes_in_pickle:  # as if pose_to_bbox had given the annotation's integers
                box = (x, y, w, h)
            rows.append(released_bbox(box))
            roots.append(released_root(depth, box, extrinsics))
        released["det_bboxes"][image["file_name"]] = [np.array(rows)]
        released["keypoints_3d"][image["file_name"]] = [np.stack([p[3] for p in people])]
        released["roots_3d"][image["file_name"]] = [np.stack(roots)]
    (dest / ANNOTATION).parent.mkdir(parents=True)
    (dest / ANNOTATION).write_text(json.dumps(doc))
    (dest / OFFICIAL_PKL).write_bytes(pickle.dumps(released))


def _track_every_mode(project: Path, root: Path, modes: list[str]) -> None:
    """Pin ``root``, then fetch (ego RGB), detect each of ``modes`` and run every tracker in ``project``."""
    params = _params()
    local = {"source": "local", "path": str(root), "manifest": str(root / "manifest.sha256")}
    params["egohumans"]["fetch"] |= {**local, "modality": "ego_rgb", "detections": None}
    params["egohumans"]["detect"]["modes"] = modes
    project.mkdir()
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(project)
        assert stage(partial(fetching.pin_root, root)) == 0
        assert stage(fetching.write_fetched) == 0
        for mode in modes:
            assert stage(partial(detection.write_detections, mode=mode)) == 0
            for tracker in TRACKERS:
                assert stage(partial(tracking.write_tracks, tracker=tracker, mode=mode)) == 0


@pytest.mark.slow
def test_official_and_gt_modes_track_alike_on_an_official_conversion(pipeline: Path, tmp_path: Path) -> None:
    """Acceptance (issue 27): on a data root written by the official conversion's formulas, where the released
    pickle holds the annotation's boxes, modes official and gt feed every tracker the same inputs and give the same
    tracks (the decoded roots_3d stay beside them as released_depth, which no tracker reads). With the official
    int(bbx + bbw) box ends, the two modes' inputs differ only there, by at most a pixel."""
    _official_conversion_root(pipeline, tmp_path / "same", annotation_boxes_in_pickle=True)
    _track_every_mode(tmp_path / "project", tmp_path / "same", ["gt", "official"])
    detections = tmp_path / "project/data/egohumans/detections"
    gt, official = (read_detections_parquet(detections / f"{mode}.parquet") for mode in ("gt", "official"))
    assert len(gt) > 1000 and official[RELEASED_DEPTH].notna().all() and gt[RELEASED_DEPTH].isna().all()
    pd.testing.assert_frame_equal(official.drop(columns=RELEASED_DEPTH), gt.drop(columns=RELEASED_DEPTH))
    tracks = tmp_path / "project" / TRACKS
    for tracker in TRACKERS:
        assert _tree(tracks / f"{tracker}-official") == _tree(tracks / f"{tracker}-gt"), tracker
        assert sum(p.stat().st_size for p in (tracks / f"{tracker}-gt").glob("*.txt")) > 0, tracker
    # the official box ends int(bbx + bbw): the same boxes but for x2 and y2, a pixel beyond the annotation's at most;
    # their roots_3d decode (each pixel within a pixel of its box's centre)
    ends_root = tmp_path / "ends"
    _official_conversion_root(pipeline, ends_root, annotation_boxes_in_pickle=False)
    annotation = read_annotations(ends_root, _fetch_params(ends_root, modality="ego_rgb"), data_roots(ends_root))
    ends = read_detection_pickle(ends_root / OFFICIAL_PKL, annotation.images, released=True)
    assert len(ends) == len(gt) and ends[RELEASED_DEPTH].notna().all() and ends[ROOT_COLUMNS].isna().all().all()
    same, official_ends = (
        pickle.loads((root / OFFICIAL_PKL).read_bytes())["det_bboxes"] for root in (tmp_path / "same", ends_root)
    )
    assert sorted(same) == sorted(official_ends)
    off = np.concatenate([official_ends[name][0] - same[name][0] for name in same])
    assert (off[:, [0, 1, 4]] == 0).all() and np.isin(off[:, 2:4], [0.0, 1.0]).all() and off[:, 2:4].any()


def test_the_track_stage_reads_no_ground_truth() -> None:
    """The track stage's declared inputs (tests/test_dvc_deps.py holds them to what it really reads) name no ground
    truth: neither fetch's gt/ nor its world_roots.parquet (fit_poses3d), nor the fetched folder as a whole; ground
    truth reaches a tracker only as mode gt's boxes, through the detect stage."""
    stage = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["egohumans_track"]
    fetched = [dep for dep in stage["deps"] if dep.startswith("data/egohumans/fetched")]
    assert fetched == ["data/egohumans/fetched/sequences.json", "data/egohumans/fetched/images.parquet"]
