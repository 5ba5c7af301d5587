"""EgoHumans stages end to end on a small generated sample: sample, fetch, detect, track, score."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from oracle_env import MotmetricsOracle, assert_equal_to_oracle

from egoeval.egohumans import fetching, scoring, tracking
from egoeval.egohumans.formats import (
    DETECTION_COLUMNS,
    ROOT_COLUMNS,
    read_det_txt,
    read_detection_pickle,
    read_detections_parquet,
    read_tracking_annotation,
)
from egoeval.egohumans.settings import DetectSettings, FetchSettings, SampleSettings, ScoreSettings, TrackerConfig
from egoeval.errors import InputError
from egoeval.io import verify_manifest
from egoeval.settings import validate_params
from egoeval.tracking.mot import read_mot, write_mot
from stages.egohumans import detect, fetch, sample, score, track

REPO = Path(__file__).resolve().parents[1]
SMALL = {"sequences": 2, "frames": 150, "fps": 30, "width": 320, "height": 180, "people": 4, "seed": 3}
RUNS = sorted(f"{t}-{m}" for t in ("botsort", "bytetrack", "egomotion", "world") for m in ("file", "gt", "official"))
MODES = ["gt", "official", "file"]
ANNOTATION = "benchmark/sample/all/coco_track/tracking_ego_rgb.json"
OFFICIAL_PKL = "benchmark/sample/all/coco_track/detections_ego_rgb.pkl"
FRAMES = "synthetic/*/ego/aria01/images/rgb/*.jpg"
TRACKS = "data/egohumans/tracks"


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


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Run every egohumans stage through its CLI in a scratch project folder; yield that folder."""
    root = tmp_path_factory.mktemp("egohumans")
    (root / "params.yaml").write_text(yaml.safe_dump(_params()))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        assert sample.main([]) == 0
        assert fetch.main([]) == 0
        for mode in MODES:
            assert detect.main(["--mode", mode]) == 0
            for tracker in _params()["egohumans"]["track"]["trackers"]:
                assert track.main(["--tracker", tracker, "--mode", mode]) == 0
        assert score.main([]) == 0
        yield root


# ----------------------------------------------------------------------------------------- sample


def test_sample_is_byte_identical_on_rerun(tmp_path: Path) -> None:
    small = SampleSettings(**{**SMALL, "sequences": 1, "frames": 40})
    sample.generate_sample(tmp_path / "a", small)
    sample.generate_sample(tmp_path / "b", small)
    first, second = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    assert first == second
    assert len([name for name in first if name.endswith(".jpg")]) == 40
    assert len([name for name in first if "/calib/" in name]) == 40
    names = sorted(n for n in first if n != "manifest.sha256")
    verify_manifest(tmp_path / "a" / "manifest.sha256", tmp_path / "a", names)
    sample.generate_sample(tmp_path / "c", SampleSettings(**{**SMALL, "sequences": 1, "frames": 40, "seed": 4}))
    assert _tree(tmp_path / "c")[ANNOTATION] != first[ANNOTATION]


def test_sample_content(pipeline: Path) -> None:
    root = pipeline / "data/egohumans/sample"
    annotation = read_tracking_annotation(root / ANNOTATION)
    # as the official conversion: only images where someone is visible, frame_id counting those
    assert (annotation.sequences["length"] == annotation.sequences["images"]).all()
    assert (annotation.sequences["length"] <= SMALL["frames"]).all()
    assert len(list(root.glob(FRAMES))) == SMALL["frames"] * SMALL["sequences"]
    assert sum(p.stat().st_size for p in root.rglob("*")) < 25e6 * (SMALL["frames"] * SMALL["sequences"]) / 720
    # extrinsics: 4 x 4, a rotation and a translation whose camera centre sits at head height; time stamps from 1
    for extrinsics in annotation.images["extrinsics"]:
        pose = np.asarray(extrinsics).reshape(4, 4)
        rotation, centre = pose[:3, :3], -pose[:3, :3].T @ pose[:3, 3]
        np.testing.assert_allclose(rotation @ rotation.T, np.eye(3), atol=1e-5)
        assert 1.5 < centre[1] < 1.7
        assert pose[3].tolist() == [0, 0, 0, 1]
    assert (annotation.images["time_stamp"] >= 1).all()
    doc = json.loads((root / ANNOTATION).read_text())
    assert len(doc["images"][0]["extrinsics"]) == 16
    anns = pd.DataFrame(doc["annotations"])
    assert set(anns["instance_id"]) <= set(range(2, SMALL["people"] + 2))  # aria01 wears the camera
    assert anns["occluded"].any() and anns["truncated"].any()
    assert anns["visibility"].between(0, 1).all()
    assert (anns["visibility"] < 0.5).any() and (anns["visibility"] == 1).any()
    reentries = 0
    for gt in annotation.ground_truth.values():
        for _, track_rows in gt.groupby("id"):
            reentries += int((np.diff(track_rows["frame"].to_numpy()) > 1).sum())
    assert reentries > 0  # people leave the view and come back
    # the detector output is written twice, as EgoHumans' pickle and as MOTChallenge det.txt: they agree
    from_pickle = read_detection_pickle(root / "detections/simulated.pkl", annotation.images)
    det_files = sorted(root.glob("detections/det/*.txt"))
    from_txt = pd.concat([read_det_txt(p, p.stem) for p in det_files], ignore_index=True)
    assert len(from_pickle) == len(from_txt) > 0
    columns = ["frame", "x", "y", "w", "h", "score", *ROOT_COLUMNS]  # the roots too: det.txt's world x, y, z
    np.testing.assert_allclose(from_pickle[columns].to_numpy(), from_txt[columns].to_numpy(), atol=2e-3)
    assert from_pickle[ROOT_COLUMNS].notna().all().all()


# ----------------------------------------------------------------------------------------- fetch


def test_fetch_outputs(pipeline: Path) -> None:
    fetched = pipeline / "data/egohumans/fetched"
    summary = json.loads((fetched / "sequences.json").read_text())
    names = [s["name"] for s in summary["sequences"]]
    assert summary["detections"] == {"official": OFFICIAL_PKL, "file": "detections/simulated.pkl"}
    assert (summary["modality"], summary["annotation"], summary["dropped_videos"]) == ("ego_rgb", ANNOTATION, [])
    assert sorted(p.stem for p in (fetched / "gt").glob("*.txt")) == names
    images = pd.read_parquet(fetched / "images.parquet")
    assert list(images.columns) == [
        "sequence",
        "frame",
        "path",
        "width",
        "height",
        "extrinsics",
        "time_stamp",
        "calib_intrinsics",
        "camera_model",
        "calib_extrinsics",
    ]
    assert len(images) == sum(s["images"] for s in summary["sequences"])
    assert all((pipeline / p).is_file() and p.startswith("data/egohumans/sample/synthetic/") for p in images["path"])
    # the calibration's rgb extrinsics (3 x 4, stored column-major) are the image's world-to-camera pose
    for row in images.head(20).itertuples():
        pose = np.asarray(row.calib_extrinsics).reshape(4, 3).T
        np.testing.assert_allclose(pose, np.asarray(row.extrinsics).reshape(4, 4)[:3], atol=2e-6)
        assert len(row.calib_intrinsics) == 15
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
    pd.testing.assert_frame_equal(read_detections_parquet(detections / "official.parquet"), gt)
    assert gt[ROOT_COLUMNS].notna().all().all()
    file = pd.read_parquet(detections / "file.parquet")
    pd.testing.assert_frame_equal(file, pd.read_parquet(pipeline / "data/egohumans/fetched/detections_file.parquet"))


def test_detect_official_without_the_pickle_names_it(pipeline: Path, tmp_path: Path) -> None:
    source = _copy_sample(pipeline, tmp_path / "src")
    (source / OFFICIAL_PKL).unlink()
    fetching.fetch(_fetch_params(source), tmp_path / "fetched", MODES)
    with pytest.raises(InputError, match=r"no detections_ego_rgb\.pkl beside benchmark/sample/all/coco_track"):
        detect.detect("official", tmp_path / "fetched", tmp_path / "official.parquet", _detect_settings())


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
        ids = [read_mot(p, kind="pred")["id"].nunique() for p in (pipeline / "data/egohumans/tracks" / run).glob("*")]
        assert sum(ids) >= sum(gt_ids.values())
    table = pd.read_csv(pipeline / "plots/egohumans/sequences.csv")
    assert list(table.columns) == ["run", "sequence", "IDF1", "MOTA", "HOTA"]
    assert len(table) == len(RUNS) * (len(gt_ids) + 1)
    assert table.equals(table.sort_values(["run", "sequence"]).reset_index(drop=True))
    combined = table[table["sequence"] == "COMBINED"].set_index("run")
    for run in RUNS:
        assert combined.loc[run, "IDF1"] == pytest.approx(metrics[run]["COMBINED"]["IDF1"], abs=1e-4)


def test_tracking_is_deterministic(pipeline: Path, tmp_path: Path) -> None:
    config = TrackerConfig(**_params()["egohumans"]["track"]["config"]["botsort"])
    data = pipeline / "data/egohumans"
    tracking.track("botsort", config, data / "detections/file.parquet", data / "fetched", tmp_path / "again")
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
    tracking.track("bytetrack", config, path, data / "fetched", tmp_path / "out")
    assert (tmp_path / "out" / f"{first}.txt").read_text() == ""


# ----------------------------------------------------------------------------------------- yolo


@pytest.fixture
def tiny_fetched(tmp_path: Path) -> Path:
    sample.generate_sample(tmp_path / "sample", SampleSettings(**{**SMALL, "sequences": 1, "frames": 3}))
    fetching.fetch(_fetch_params(tmp_path / "sample"), tmp_path / "fetched", MODES)
    return tmp_path / "fetched"


def test_yolo_architecture_only_end_to_end(tiny_fetched: Path, tmp_path: Path) -> None:
    settings = _detect_settings(yolo_weights="arch-only", yolo_batch=2, yolo_imgsz=320, yolo_conf=0.001)
    out = tmp_path / "yolo.parquet"
    detect.detect("yolo", tiny_fetched, out, settings)
    table = pd.read_parquet(out)  # random weights: maybe no boxes at all; the plumbing is what is checked
    assert list(table.columns) == DETECTION_COLUMNS
    assert table["frame"].dtype == np.int64 and table["score"].dtype == np.float64
    assert set(table["frame"]) <= {1, 2, 3}
    read_detections_parquet(out)


def test_yolo_without_weights_is_a_clear_error(tiny_fetched: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"egohumans\.detect\.yolo_weights is not set"):
        detect.detect("yolo", tiny_fetched, tmp_path / "yolo.parquet", _detect_settings(yolo_weights=None))
    missing = tmp_path / "yolo11n.pt"
    with pytest.raises(InputError, match="names no such file") as err:
        detect.detect("yolo", tiny_fetched, tmp_path / "yolo.parquet", _detect_settings(yolo_weights=str(missing)))
    assert str(missing) in str(err.value)
    assert not missing.exists() and not (tmp_path / "yolo.parquet").exists()


def test_stage_cli_reports_bad_input(pipeline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The stage CLI turns the missing-weights error into exit code 2 and a one-line message."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(pipeline)
        assert detect.main(["--mode", "yolo"]) == 2
    assert "egohumans.detect.yolo_weights is not set" in capsys.readouterr().err


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
    annotation = json.loads((pipeline / "data/egohumans/sample" / ANNOTATION).read_text())
    for run in ("bytetrack-file", "botsort-gt"):
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
            {"bbox": [x, y, w, h], "instance_id": 1},  # a second person on the box, later in the file, lower id
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
    ours = scoring.score(tmp_path / "fetched/gt", tracks, runs, ScoreSettings(protocol="official", iou_threshold=0.5))
    for run in runs:
        theirs = motmetrics_oracle.evaluate(annotation, official_results(annotation, tracks / run))
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
        data / "fetched/gt", data / "tracks", runs, ScoreSettings(protocol="trackeval", iou_threshold=0.5)
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
    assert ANNOTATION in names and OFFICIAL_PKL in names and "detections/simulated.pkl" in names
    assert sum("/calib/" in n for n in names) == sum("/images/rgb/" in n for n in names)  # one per annotated image
    frame = source / next(n for n in sorted(names) if "/images/rgb/" in n)
    frame.unlink()
    with pytest.raises(InputError, match="missing") as err:
        fetching.write_root_manifest(source, _fetch_params(source), MODES, tmp_path / "m2.sha256")
    assert str(frame) in str(err.value)
