"""A folder laid out exactly as the official EgoHumans download, run through `dvc repro` with only params.yaml changed.

The folder follows rawalkhirodkar/egohumans (assets/DOWNLOAD.md, COCO_VIDEO.md and the conversion script that writes
``coco_track/``): a data root with ``<big>/<seq>/ego/ariaXX/{images/rgb/NNNNN.jpg, calib/NNNNN.txt}``, the benchmark
annotation at ``benchmark/<set>/all/coco_track/tracking_ego_rgb.json`` whose ``file_name``s are relative to the root
(the last 7 path parts), image ids from 0, ``frame_id`` counting annotated images only, 16-number extrinsics,
integer boxes, ``iscrowd``/``ignore`` booleans, bookkeeping keys (``video_num``, ``image_num``, ...), a camera that
never sees anyone (a video without images), and ``detections_ego_rgb.pkl`` pickled as the script does:
``{'det_bboxes': {file_name: [N x 5 float64, score 1.0]}, 'keypoints_3d': ..., 'roots_3d': ...}``.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import yaml
from conftest import copy_repo, dvc, official_annotation, tool_env, write_params

from egoeval.egohumans.official_conversion import released_root

pytestmark = pytest.mark.slow
SET = "benchmark/01_tagging/all/coco_track"
BIG, SEQ = "01_tagging", "001_tagging"
W, H = 96, 64


def _box(frame: int, person: int) -> list[int]:
    """An integer box walking right (person 2) or left (person 3); person 3 leaves the view for frames 5 to 6."""
    x = 4 + 3 * frame if person == 2 else 80 - 3 * frame
    return [x, 10 + person, 12, 30]


def build_official_download(root: Path, frames: int = 12) -> None:
    """The data root as downloaded (see the module docstring)."""
    doc = {"categories": [{"id": 0, "name": "pedestrian"}], "videos": [], "images": [], "annotations": []}
    doc |= {"video_num": 0, "video_image_num": {}, "video_instance_num": {}, "image_num": 0, "instance_num": 0}
    detections = {"det_bboxes": {}, "keypoints_3d": {}, "roots_3d": {}}
    for video_id, aria in ((1, "aria01"), (2, "aria02")):
        doc["videos"].append({"id": video_id, "name": f"{BIG.split('_')[1]}_{SEQ}_{aria}_rgb"})
        camera = f"{BIG}/{SEQ}/ego/{aria}"
        for t in range(1, frames + 1):
            image = np.full((H, W, 3), 30 * video_id, np.uint8)
            (root / camera / "images/rgb").mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(root / camera / f"images/rgb/{t:05d}.jpg"), image)
            (root / camera / "calib").mkdir(parents=True, exist_ok=True)
            pose = np.eye(4)
            pose[0, 3] = 0.1 * t
            line15 = " ".join(f"{v:.6f}" for v in [60.0, W / 2, H / 2, *[0.01] * 12])
            line12 = " ".join(f"{v:.6f}" for v in pose[:3].T.ravel())
            (root / camera / f"calib/{t:05d}.txt").write_text(
                "Serial, intrinsics (radtanthinprsim), extrinsic (3x4)\n" + aria + "\n" + f"{line15}\n{line12}\n" * 3
            )
            people = [] if aria == "aria02" else [p for p in (2, 3) if p == 2 or not 5 <= t <= 6]
            if not people:
                continue  # the official conversion writes an image only where someone is visible
            file_name = f"{camera}/images/rgb/{t:05d}.jpg"
            image_id = len(doc["images"])
            doc["images"].append(
                {
                    "file_name": file_name,
                    "height": H,
                    "width": W,
                    "id": image_id,
                    "video_id": video_id,
                    "frame_id": sum(1 for i in doc["images"] if i["video_id"] == video_id),
                    "extrinsics": pose.ravel().tolist(),
                    "depth_path": f"{camera}/depth/{t:05d}.npy",
                }
            )
            boxes = []
            for person in people:
                x, y, w, h = _box(t, person)
                record = official_annotation(doc, image_id, video_id, person, [x, y, w, h], w * h, aria, t)
                doc["annotations"].append(record)
                boxes.append(np.array([x, y, x + w, y + h, 1.0]).reshape(1, -1))
            detections["det_bboxes"][file_name] = [np.concatenate(boxes, axis=0)]
            detections["keypoints_3d"][file_name] = [np.zeros((len(boxes), 17, 4))]
            depth = np.full((H, W), 3.0)  # the official formula: box-centre pixel and mean depth through the extrinsics
            roots = [released_root(depth, tuple(_box(t, person)), pose) for person in people]
            detections["roots_3d"][file_name] = [np.stack(roots)]
    (root / SET).mkdir(parents=True)
    (root / SET / "tracking_ego_rgb.json").write_text(json.dumps(doc, indent=4))
    with open(root / SET / "detections_ego_rgb.pkl", "wb") as handle:
        pickle.dump(detections, handle)


def pinned_official_download(tmp_path: Path, **egohumans: Any) -> tuple[Path, Path]:
    """(download, repo): the official download built, a copy of this repository whose params point egohumans.fetch
    at it (``egohumans`` merged into the section), pinned with ``--write-manifest`` as the user guide shows."""
    download = tmp_path / "egohumans"
    build_official_download(download)
    repo = copy_repo(tmp_path / "repo")
    fetch_params = {
        "source": "local",
        "path": str(download),
        "annotation": f"{SET}/tracking_{{modality}}.json",
        "modality": "ego_rgb",
        "manifest": str(download / "manifest.sha256"),
        "detections": None,
        "duplicate_videos": "error",
    }
    fetch_params |= egohumans.pop("fetch", {})
    write_params(repo, {"egohumans": {"fetch": fetch_params, **egohumans}})
    pinned = subprocess.run(
        [sys.executable, "-m", "stages.egohumans.fetch", "--write-manifest", str(download)],
        cwd=repo,
        env=tool_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert pinned.returncode == 0, pinned.stderr
    return download, repo


def test_dvc_repro_on_the_official_download(tmp_path: Path) -> None:
    download, repo = pinned_official_download(
        tmp_path, detect={"modes": ["gt", "official"]}, track={"trackers": ["bytetrack"]}
    )
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["egohumans"]["compare"]["published"] = {"bytetrack-official": "ByteTrack"}  # replaced, not merged
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    names = [line.split("  ", 1)[1] for line in (download / "manifest.sha256").read_text().splitlines()]
    assert f"{SET}/detections_ego_rgb.pkl" in names and f"{BIG}/{SEQ}/ego/aria01/calib/00003.txt" in names
    assert f"{BIG}/{SEQ}/ego/aria02/images/rgb/00003.jpg" not in names  # never annotated: not read, not pinned

    run = dvc(repo, "repro", "egohumans_score")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for stage in ("egohumans_fetch", "egohumans_detect@gt", "egohumans_detect@official", "egohumans_score"):
        assert f"Running stage '{stage}'" in run.stdout
    assert "egohumans_sample" not in run.stdout
    fetched = json.loads((repo / "data/egohumans/fetched/sequences.json").read_text())
    assert fetched["detections"] == {"official": f"{SET}/detections_ego_rgb.pkl", "file": None}
    lengths = {s["name"]: s["length"] for s in fetched["sequences"]}
    assert lengths == {f"tagging_{SEQ}_aria01_rgb": 12, f"tagging_{SEQ}_aria02_rgb": 0}
    metrics = json.loads((repo / "metrics/egohumans.json").read_text())
    assert sorted(metrics) == ["bytetrack-gt", "bytetrack-official"]
    for result in metrics.values():
        assert result["protocol"] == "official"
        assert list(result["sequences"]) == [f"tagging_{SEQ}_aria01_rgb"]  # the empty camera is left out
        combined = result["COMBINED"]
        assert (combined["GT_Dets"], combined["FP"]) == (22, 0)
        assert combined["IDF1"] > 80 and combined["MOTA"] > 80
    compared = subprocess.run(
        [str(Path(sys.executable).with_name("egoeval")), "compare", "metrics/egohumans.json"],
        cwd=repo,
        env=tool_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert compared.returncode == 0, compared.stderr
    # the released pickle holds ground-truth boxes and this is not the published test data: the run stands apart,
    # saying why, never ranked beside the paper's ByteTrack row (issue 27 item 5)
    apart = "bytetrack-official  vs  ByteTrack: not beside the published figures, not ranked among them: "
    assert apart in compared.stdout and 'detections "official"' in compared.stdout, compared.stdout


def test_cameras_that_never_see_anyone_get_no_tracks_from_the_camera_trackers(tmp_path: Path) -> None:
    """The download has cameras without images (aria02 here); the egomotion and world trackers, which read each
    frame's camera pose, give such a video an empty track file instead of stopping the pipeline."""
    _, repo = pinned_official_download(
        tmp_path,
        fetch={"camera_model": "aria_fisheye"},  # the download's calibration: Aria's fisheye with distortion
        detect={"modes": ["official"]},
        track={"trackers": ["egomotion", "world"]},
    )
    run = dvc(repo, "repro", "egohumans_track@egomotion-official", "egohumans_track@world-official")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for tracker in ("egomotion", "world"):
        tracks = repo / "data/egohumans/tracks" / f"{tracker}-official"
        assert (tracks / f"tagging_{SEQ}_aria02_rgb.txt").read_text() == ""  # no image, no track
        assert (tracks / f"tagging_{SEQ}_aria01_rgb.txt").read_text().count("\n") > 10
