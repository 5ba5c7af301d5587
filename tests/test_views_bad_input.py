"""Hostile multi-view inputs through the EgoHumans stage CLIs (issue 28 items 10-14, 18, 20, 21; issue 27 item 6).

A small sample (one take: five wearers and one exo camera) is generated, fetched, detected, tracked and scored once
by the stage CLIs in a scratch project; each case works on its own copy, breaks one input, and runs a stage: exit 2,
one error line naming the file and the row that hold the bad value, no traceback, and every stage output
byte-identical to before the run.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import EGOEVAL, REPO, tool_env

from egoeval.core.io.manifest import read_manifest, sha256_file

bad_input = pytest.mark.bad_input
ROOT = "data/egohumans/sample"
ANNOTATION = "benchmark/sample/all/coco_track/tracking_ego_rgb.json"
EXO_ANNOTATION = "benchmark/sample/all/coco_track/tracking_exo.json"
TAKE = "synthetic/001_synthetic"
COLMAP = f"{TAKE}/colmap/workplace"
FRAME = f"{TAKE}/ego/aria01/images/rgb/00002.jpg"
CALIB = f"{TAKE}/ego/aria01/calib/00001.txt"
POSES = f"{TAKE}/processed_data/fit_poses3d/00001.npy"
WATCHED = ("data/egohumans/fetched", "data/egohumans/detections", "data/egohumans/tracks", "metrics", "plots")
SAMPLE = {"sequences": 1, "frames": 20, "fps": 30, "width": 320, "height": 180, "people": 5, "exo_cameras": 1}
FETCH = ("stages.egohumans.fetch",)
TRACK_BOTSORT = ("stages.egohumans.track", "--tracker", "botsort", "--mode", "gt")
SCORE = ("stages.egohumans.score",)


def run(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m <args>`` (a stage; or ``python <args>`` for options such as ``-c``) in ``project``, this
    repository's code on the path."""
    path = os.pathsep.join(filter(None, [*(env or {}).get("PYTHONPATH", "").split(os.pathsep), str(REPO)]))
    environment = tool_env(**{**(env or {}), "PYTHONPATH": path})
    command = [sys.executable, *(args if args[0].startswith("-") else ("-m", *args))]
    return subprocess.run(command, cwd=project, env=environment, capture_output=True, text=True, timeout=600)


def watched(project: Path) -> dict[str, str]:
    """sha256 of every file the stages write."""
    found = {}
    for name in WATCHED:
        for file in sorted(p for p in (project / name).rglob("*") if p.is_file()):
            found[file.relative_to(project).as_posix()] = sha256_file(file)
    return found


def refused(project: Path, args: tuple[str, ...], *named: str, env: dict[str, str] | None = None) -> str:
    """Run ``args``: exit 2, one error line naming each of ``named``, no traceback, no output changed."""
    before = watched(project)
    done = run(project, *args, env=env)
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and len(lines) == 1, done.stdout[-2000:] + done.stderr[-4000:]
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    for name in named:
        assert name in lines[0], (name, lines[0])
    assert watched(project) == before
    return lines[0]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch project after sample, fetch, detect (gt), track (ByteTrack; BoT-SORT with sparseOptFlow, which
    reads the frames) and score, each through its CLI."""
    folder = tmp_path_factory.mktemp("views") / "project"
    folder.mkdir()
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    egohumans = params["egohumans"]
    egohumans["sample"] |= SAMPLE
    egohumans["detect"]["modes"] = ["gt"]
    egohumans["track"]["trackers"] = ["bytetrack", "botsort"]
    egohumans["track"]["config"]["botsort"]["gmc_method"] = "sparseOptFlow"
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    steps = [("stages.egohumans.sample",), FETCH, ("stages.egohumans.detect", "--mode", "gt")]
    steps += [("stages.egohumans.track", "--tracker", t, "--mode", "gt") for t in ("bytetrack", "botsort")]
    for step in [*steps, SCORE]:
        done = run(folder, *step)
        assert done.returncode == 0, (step, done.stderr[-4000:])
    return folder


@pytest.fixture
def work(project: Path, tmp_path: Path) -> Path:
    """This case's own copy of the project (its data root inside it)."""
    return Path(shutil.copytree(project, tmp_path / "project", symlinks=True))


def repin(work: Path, *names: str) -> None:
    """Pin ``names`` (relative to the data root) with their current bytes, as a user's sha256sum would."""
    manifest = work / ROOT / "manifest.sha256"
    pinned = read_manifest(manifest)
    for name in names:
        pinned[name] = hashlib.sha256((work / ROOT / name).read_bytes()).hexdigest()
    manifest.write_text("".join(f"{digest}  {name}\n" for name, digest in sorted(pinned.items())))


def edit_json(work: Path, name: str, edit: Callable[[dict[str, Any]], Any]) -> None:
    path = work / ROOT / name
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    repin(work, name)


def edit_line(work: Path, name: str, find: str, edit: Callable[[list[str]], list[str]]) -> int:
    """Replace the fields of the first line of ``name`` that contains ``find``; returns its 1-based number."""
    path = work / ROOT / name
    lines = path.read_text().splitlines()
    number = next(k for k, line in enumerate(lines) if find in line and not line.startswith("#"))
    lines[number] = " ".join(edit(lines[number].split()))
    path.write_text("\n".join(lines) + "\n")
    repin(work, name)
    return number + 1


def npy(obj: Any) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array(obj, dtype=object), allow_pickle=True)
    return buffer.getvalue()


# ----------------------------------------------------------------------------------------- item 10: physical bounds


@bad_input
@pytest.mark.parametrize(
    ("field", "value", "message"),
    [(5, "1e308", "the camera centre"), (6, "-2e6", "the camera centre")],
    ids=["tx 1e308", "ty -2e6"],
)
def test_an_exo_translation_beyond_the_room_is_refused(work: Path, field: int, value: str, message: str) -> None:
    """An exo camera 1e308 (or 2e6) COLMAP units away: refused at its images.txt line, which names it."""
    row = edit_line(work, f"{COLMAP}/images.txt", "cam01/", lambda f: [*f[:field], value, *f[field + 1 :]])
    refused(work, FETCH, f"{COLMAP}/images.txt, row {row}", "cam01/00001.jpg", message, "1000 m")


@bad_input
@pytest.mark.parametrize(("field", "value"), [(4, "1e308"), (5, "1e-308")], ids=["fx 1e308", "fy 1e-308"])
def test_exo_intrinsics_beyond_a_lens_are_refused(work: Path, field: int, value: str) -> None:
    row = edit_line(work, f"{COLMAP}/cameras.txt", "OPENCV_FISHEYE", lambda f: [*f[:field], value, *f[field + 1 :]])
    refused(work, FETCH, f"{COLMAP}/cameras.txt, row {row}", "camera 1", "focal length", "outside 1..100000 px")


@bad_input
def test_an_aria_focal_length_beyond_a_lens_is_refused(work: Path) -> None:
    path = work / ROOT / CALIB
    lines = path.read_text().splitlines()
    lines[2] = " ".join(["1e308", *lines[2].split()[1:]])  # the rgb camera's intrinsics: f first
    path.write_text("\n".join(lines) + "\n")
    repin(work, CALIB)
    refused(work, FETCH, f"{CALIB}, row 3", "focal length [1e+308] outside")


@bad_input
@pytest.mark.parametrize("case", ["singular", "mirrored", "far"])
def test_ego_extrinsics_that_are_no_camera_pose_are_refused_at_fetch(work: Path, case: str) -> None:
    """Item 14: singular ego extrinsics are named at their annotation row by fetch, not later in images.parquet."""
    matrix = {
        "singular": [0.0] * 12,
        "mirrored": [-1.0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0],
        "far": [1.0, 0, 0, 5e3, 0, 1, 0, 0, 0, 0, 1, 0],
    }[case]
    edit_json(work, ANNOTATION, lambda d: d["images"][0].update(extrinsics=[*matrix, 0, 0, 0, 1]))
    message = "the camera centre" if case == "far" else "is not a rotation"
    refused(work, FETCH, f"{ANNOTATION}, row images[0]", "extrinsics", message)


@bad_input
@pytest.mark.parametrize("value", [1e308, float("inf"), 1500.0])
def test_3d_poses_beyond_the_room_are_refused(work: Path, value: float) -> None:
    """Item 18: a fit_poses3d keypoint at 1e308 (or infinite, or 1.5 km away) would turn world HOTA to 0 unseen."""
    path = work / ROOT / POSES
    keypoints = np.zeros((17, 4))
    keypoints[11, 0] = value
    path.write_bytes(npy({"aria01": np.ones((17, 4)), "aria02": keypoints}))
    repin(work, POSES)
    refused(work, FETCH, f"{POSES}, row aria02", "a keypoint beyond 1000 m")


@bad_input
@pytest.mark.parametrize(
    ("size", "bound"), [(1_100_000_000, "one input may hold (1,073,741,824)"), (2_000_000, "(1,048,576)")]
)
def test_a_fit_poses3d_file_is_sized_before_it_is_read(work: Path, size: int, bound: str) -> None:
    """Item 18: a 1.1 GB file (or one past the 1 MiB a pose file may hold) is refused by its size alone (a sparse
    file here: nothing of it is read)."""
    path = work / ROOT / POSES
    with path.open("r+b") as handle:
        handle.truncate(size)
    repin(work, POSES)  # what a user pinning the folder does (the hash reads it; fetch must not)
    refused(work, FETCH, POSES, f"{size:,} bytes: more than", bound)


@bad_input
def test_a_box_whose_far_corner_is_beyond_a_float_is_refused(work: Path) -> None:
    """Item 20: x + w = inf although x and w are finite."""
    edit_json(work, ANNOTATION, lambda d: d["annotations"][3].update(bbox=[1e308, 10.0, 1e308, 20.0]))
    refused(work, FETCH, f"{ANNOTATION}, row annotations[3]", "far corner (x + w, y + h) is beyond a float")


# ----------------------------------------------------------------------------------------- item 11: camera clocks


@bad_input
@pytest.mark.parametrize("clock", ["frozen", "reversed"])
def test_a_camera_clock_frozen_or_running_back_is_refused(work: Path, clock: str) -> None:
    def edit(doc: dict[str, Any]) -> None:
        video = doc["videos"][0]["id"]
        images = sorted((i for i in doc["images"] if i["video_id"] == video), key=lambda i: i["frame_id"])
        stamps = {i["id"]: 7 if clock == "frozen" else 1000 - i["frame_id"] for i in images}
        for ann in doc["annotations"]:
            if ann["image_id"] in stamps:
                ann["time_stamp"] = stamps[ann["image_id"]]

    edit_json(work, ANNOTATION, edit)
    line = refused(work, FETCH, ANNOTATION, "row annotations[", "does not follow", "frozen or reversed")
    doc = json.loads((work / ROOT / ANNOTATION).read_text())
    row = int(line.split("row annotations[")[1].split("]")[0])
    image = int(line.split("of images[")[1].split("]")[0])
    assert doc["annotations"][row]["image_id"] == doc["images"][image]["id"]  # the row that gives that time stamp


# ----------------------------------------------------------------------------------------- item 12: listed twice


@bad_input
def test_a_camera_in_two_annotations_is_named(work: Path) -> None:
    """An ego camera's image listed in tracking_exo.json too: a clear error, not pandas' InvalidIndexError."""
    ego = json.loads((work / ROOT / ANNOTATION).read_text())["images"][0]

    def edit(doc: dict[str, Any]) -> None:
        video = max(v["id"] for v in doc["videos"]) + 1
        doc["videos"].append({"id": video, "name": "again_aria01_rgb"})
        image = {**ego, "id": max(i["id"] for i in doc["images"]) + 1, "video_id": video, "frame_id": 0}
        doc["images"].append(image)

    edit_json(work, EXO_ANNOTATION, edit)
    count = len(json.loads((work / ROOT / EXO_ANNOTATION).read_text())["images"])
    listed = f"camera {TAKE}/ego/aria01/images/rgb is also listed in {ANNOTATION}"
    refused(work, FETCH, EXO_ANNOTATION, f"row images[{count - 1}]", listed)


@bad_input
def test_an_image_listed_twice_in_colmap_images_is_named(work: Path) -> None:
    path = work / ROOT / COLMAP / "images.txt"
    lines = path.read_text().splitlines()
    first = next(k for k, line in enumerate(lines) if "cam01/" in line)
    again = lines[first].split()
    again[0] = "99"
    lines += [" ".join(again), ""]
    path.write_text("\n".join(lines) + "\n")
    repin(work, f"{COLMAP}/images.txt")
    refused(work, FETCH, f"{COLMAP}/images.txt, row {len(lines) - 1}", f"listed twice (line {first + 1} and here)")


# ----------------------------------------------------------------------------------------- item 13: bounded


@bad_input
def test_a_huge_cameras_txt_is_refused_unread(work: Path) -> None:
    """A 96 MB cameras.txt (sparse: nothing of it is read) is refused by its size before a line is read."""
    path = work / ROOT / COLMAP / "cameras.txt"
    with path.open("r+b") as handle:
        handle.truncate(96_000_000)
    repin(work, f"{COLMAP}/cameras.txt")
    refused(work, FETCH, f"{COLMAP}/cameras.txt", "96,000,000 bytes: more than this file may hold (1,048,576)")


# ----------------------------------------------------------------------------------------- item 14: the right file


@bad_input
def test_a_singular_anchor_transform_is_blamed_on_its_own_file(work: Path) -> None:
    path = work / ROOT / COLMAP / "colmap_from_aria_transforms.pkl"
    path.write_bytes(__import__("pickle").dumps({"aria01": np.diag([1.0, 1.0, 0.0, 1.0])}))
    repin(work, f"{COLMAP}/colmap_from_aria_transforms.pkl")
    line = refused(work, FETCH, f"{COLMAP}/colmap_from_aria_transforms.pkl, row aria01", "similarity")
    assert "images.txt" not in line


@bad_input
def test_an_exo_camera_folder_linked_out_of_the_root_is_named_as_such(work: Path, tmp_path: Path) -> None:
    """The folder exo/cam01 is a symlink to a copy outside the root: the error names tracking_exo.json's image and
    the folder that is the link (not tracking_ego_rgb.json)."""
    folder = work / ROOT / TAKE / "exo/cam01"
    outside = tmp_path / "elsewhere/cam01"
    shutil.move(folder, outside)
    folder.symlink_to(outside)
    line = refused(work, FETCH, f"{EXO_ANNOTATION}, row images[", f"the folder {folder} is a symlink to {outside}")
    assert "tracking_ego_rgb.json" not in line


# ----------------------------------------------------------------------------------------- item 18, 20: frames


@bad_input
def test_the_tracking_stage_reads_no_frame_linked_out_of_the_root(work: Path, tmp_path: Path) -> None:
    """A frame replaced by a link to the same bytes outside the data root: its sha256 matches, yet BoT-SORT's
    camera-motion compensation refuses it, as the report does (one rule: egoeval.core.io.manifest.read_pinned)."""
    frame = work / ROOT / FRAME
    outside = tmp_path / "outside.jpg"
    shutil.copyfile(frame, outside)
    frame.unlink()
    frame.symlink_to(outside)
    refused(work, TRACK_BOTSORT, "images.parquet", "frame 2", f"(a link to {outside})", "lies outside the data root")


@bad_input
def test_an_empty_frame_under_sparse_optical_flow_is_named(work: Path) -> None:
    """A 0-byte frame, pinned as such (so fetch records it): BoT-SORT with gmc_method sparseOptFlow stops naming it,
    not in cv2 with a traceback."""
    (work / ROOT / FRAME).write_bytes(b"")
    repin(work, FRAME)
    assert run(work, *FETCH).returncode == 0
    refused(work, TRACK_BOTSORT, FRAME, "an empty file (0 bytes)")


# ----------------------------------------------------------------------------------------- issue 27 item 6


def test_an_image_without_extrinsics_has_no_head_speed(work: Path) -> None:
    """``extrinsics: []`` (as fetch writes for an image without them) is the documented skip: the score stage runs,
    and that frame and the next have no head speed."""
    edit_json(work, ANNOTATION, lambda d: d["images"][3].pop("extrinsics"))
    for step in (
        FETCH,
        ("stages.egohumans.detect", "--mode", "gt"),
        *[("stages.egohumans.track", "--tracker", t, "--mode", "gt") for t in ("bytetrack", "botsort")],
        SCORE,
    ):
        done = run(work, *step)
        assert done.returncode == 0, (step, done.stderr[-3000:])
    images = pd.read_parquet(work / "data/egohumans/fetched/images.parquet")
    assert sum(len(e) == 0 for e in images["extrinsics"]) == 1


@bad_input
def test_malformed_extrinsics_in_images_parquet_are_named_by_the_score_stage(work: Path) -> None:
    path = work / "data/egohumans/fetched/images.parquet"
    images = pd.read_parquet(path)
    images.at[4, "extrinsics"] = [1.0, 2.0, 3.0]
    images.to_parquet(path, index=False)
    row = f"{images.at[4, 'sequence']} frame {images.at[4, 'frame']}"
    refused(work, SCORE, "images.parquet", f"row {row}", "16 finite numbers")


@bad_input
def test_a_venv_without_ultralytics_names_the_package(work: Path, tmp_path: Path) -> None:
    """``import ultralytics`` made to fail in the stage's interpreter (a sitecustomize on PYTHONPATH): the error
    names the package, not an empty list of tracker types."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(
        "import sys\n"
        "class _NoUltralytics:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'ultralytics' or name.startswith('ultralytics.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, _NoUltralytics())\n"
    )
    env = {"PYTHONPATH": str(shim)}
    probe = run(work, "-c", "import ultralytics", env=env)  # the shim holds: the package is unimportable
    assert probe.returncode == 1 and "No module named 'ultralytics'" in probe.stderr
    before = watched(work)
    done = run(work, *TRACK_BOTSORT, env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stderr.startswith("error: bad input: params.yaml: invalid params:"), done.stderr[-3000:]
    assert "egohumans.track.config.botsort" in done.stderr and "needs the package ultralytics" in done.stderr
    assert "must be one of []" not in done.stderr
    assert watched(work) == before


# ----------------------------------------------------------------------------------------- item 21: official gt


def test_the_official_protocol_reads_conf_half_as_a_person(tmp_path: Path) -> None:
    """Ground truth ``conf`` 0.5: an ignore box under egoeval's TrackEval rule (``int(conf) == 0``), a person under
    the official reader (``conf == 0`` only is ignored): unmatched, it is a miss there and nothing here."""
    for folder in ("gt", "pred"):
        (tmp_path / folder).mkdir()
    gt = [f"{f},1,10,10,20,40,0.5,-1,-1,-1\n{f},2,100,10,20,40,1,-1,-1,-1\n" for f in range(1, 6)]
    (tmp_path / "gt/seq.txt").write_text("".join(gt))
    (tmp_path / "pred/seq.txt").write_text("".join(f"{f},7,100,10,20,40,1,-1,-1,-1\n" for f in range(1, 6)))
    misses = {}
    for protocol in ("official", "trackeval"):
        out = tmp_path / f"{protocol}.json"
        args = [EGOEVAL, "score-tracks", "gt", "pred", "--protocol", protocol, "--json", str(out)]
        done = subprocess.run(args, cwd=tmp_path, env=tool_env(), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        misses[protocol] = json.loads(out.read_text())["COMBINED"]["FN"]
    assert misses == {"official": 5, "trackeval": 0}


# ----------------------------------------------------------------------------------------- item 20: stderr closed


def test_the_frames_stage_runs_with_stderr_closed(tmp_path: Path) -> None:
    """fd 2 closed (``sys.stderr`` is None in the stage): the progress bar stays silent, the stage finishes."""
    listed = subprocess.run(["git", "ls-files", "data/egonormia"], cwd=REPO, capture_output=True, text=True).stdout
    for name in listed.split():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / name, tmp_path / name)
    shutil.copyfile(REPO / "params.yaml", tmp_path / "params.yaml")
    for step in (("stages.egonormia.sample",), ("stages.egonormia.fetch",)):
        done = run(tmp_path, *step)
        assert done.returncode == 0, (step, done.stderr[-3000:])
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    closed = f"exec 2>&-; exec {sys.executable} -m stages.egonormia.frames"
    done = subprocess.run(
        ["bash", "-c", closed], cwd=tmp_path, env=tool_env(PYTHONPATH=path), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:]
    index = pd.read_parquet(tmp_path / "data/egonormia/frames/index.parquet")
    assert len(index) and (index["error"] == "").all()
