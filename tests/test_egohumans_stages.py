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

from egoeval.egohumans.formats import (
    DETECTION_COLUMNS,
    read_det_txt,
    read_detection_pickle,
    read_detections_parquet,
    read_tracking_annotation,
)
from egoeval.io import InputError, verify_manifest, write_manifest
from egoeval.mot import read_mot
from stages.egohumans import detect, fetch, sample, score, track

REPO = Path(__file__).resolve().parents[1]
SMALL = {"sequences": 2, "frames": 150, "fps": 30, "width": 320, "height": 180, "people": 4, "seed": 3}
RUNS = ["botsort-file", "botsort-gt", "bytetrack-file", "bytetrack-gt"]


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


def _params(**sample_overrides: Any) -> dict[str, Any]:
    """The repository's params.yaml with a small egohumans sample."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["egohumans"]["sample"] = {**SMALL, **sample_overrides}
    return params


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Run every egohumans stage through its CLI in a scratch project folder; yield that folder."""
    root = tmp_path_factory.mktemp("egohumans")
    (root / "params.yaml").write_text(yaml.safe_dump(_params()))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        assert sample.main([]) == 0
        assert fetch.main([]) == 0
        for mode in ("gt", "file"):
            assert detect.main(["--mode", mode]) == 0
            for tracker in ("bytetrack", "botsort"):
                assert track.main(["--tracker", tracker, "--mode", mode]) == 0
        assert score.main([]) == 0
        yield root


# ----------------------------------------------------------------------------------------- sample


def test_sample_is_byte_identical_on_rerun(tmp_path: Path) -> None:
    small = sample.SampleParams(**{**SMALL, "sequences": 1, "frames": 40})
    sample.generate_sample(tmp_path / "a", small)
    sample.generate_sample(tmp_path / "b", small)
    first, second = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    assert first == second
    assert len([name for name in first if name.endswith(".jpg")]) == 40
    names = sorted(n for n in first if n != "manifest.sha256")
    verify_manifest(tmp_path / "a" / "manifest.sha256", tmp_path / "a", names)
    sample.generate_sample(tmp_path / "c", sample.SampleParams(**{**SMALL, "sequences": 1, "frames": 40, "seed": 4}))
    assert _tree(tmp_path / "c")["tracking_ego_rgb.json"] != first["tracking_ego_rgb.json"]


def test_sample_content(pipeline: Path) -> None:
    root = pipeline / "data/egohumans/sample"
    annotation = read_tracking_annotation(root / "tracking_ego_rgb.json")
    assert annotation.sequences["length"].tolist() == [SMALL["frames"]] * SMALL["sequences"]
    assert len(list(root.glob("frames/*/*.jpg"))) == SMALL["frames"] * SMALL["sequences"]
    assert sum(p.stat().st_size for p in root.rglob("*")) < 25e6 * (SMALL["frames"] * SMALL["sequences"]) / 720
    # extrinsics: a rotation and a translation whose camera centre sits at head height
    for extrinsics in annotation.images["extrinsics"]:
        pose = np.asarray(extrinsics).reshape(3, 4)
        rotation, centre = pose[:, :3], -pose[:, :3].T @ pose[:, 3]
        np.testing.assert_allclose(rotation @ rotation.T, np.eye(3), atol=1e-5)
        assert 1.5 < centre[1] < 1.7
    doc = json.loads((root / "tracking_ego_rgb.json").read_text())
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
    from_pickle = read_detection_pickle(root / "detections.pkl", annotation.images)
    from_txt = pd.concat([read_det_txt(p, p.stem) for p in sorted(root.glob("det/*.txt"))], ignore_index=True)
    assert len(from_pickle) == len(from_txt) > 0
    np.testing.assert_allclose(
        from_pickle[["frame", "x", "y", "w", "h", "score"]].to_numpy(),
        from_txt[["frame", "x", "y", "w", "h", "score"]].to_numpy(),
        atol=2e-3,
    )


# ----------------------------------------------------------------------------------------- fetch


def test_fetch_outputs(pipeline: Path) -> None:
    fetched = pipeline / "data/egohumans/fetched"
    summary = json.loads((fetched / "sequences.json").read_text())
    names = [s["name"] for s in summary["sequences"]]
    assert summary["detections"] == "detections.pkl"
    assert sorted(p.stem for p in (fetched / "gt").glob("*.txt")) == names
    images = pd.read_parquet(fetched / "images.parquet")
    assert list(images.columns) == ["sequence", "frame", "path", "width", "height", "extrinsics"]
    assert len(images) == SMALL["sequences"] * SMALL["frames"]
    assert all((pipeline / p).is_file() and p.startswith("data/egohumans/sample/frames/") for p in images["path"])
    detections = pd.read_parquet(fetched / "detections_file.parquet")
    assert list(detections.columns) == DETECTION_COLUMNS
    gt_boxes = sum(len(read_mot(p, kind="gt")) for p in (fetched / "gt").glob("*.txt"))
    assert 0.5 * gt_boxes < len(detections) < 1.5 * gt_boxes


def _copy_sample(pipeline: Path, dest: Path) -> Path:
    shutil.copytree(pipeline / "data/egohumans/sample", dest)
    return dest


def test_fetch_from_det_txt_matches_pickle(pipeline: Path, tmp_path: Path) -> None:
    source = _copy_sample(pipeline, tmp_path / "src")
    (source / "detections.pkl").unlink()
    summary = fetch.fetch("local", source, source / "manifest.sha256", tmp_path / "fetched")
    assert summary["detections"] == "det"
    from_txt = read_detections_parquet(tmp_path / "fetched/detections_file.parquet")
    from_pickle = read_detections_parquet(pipeline / "data/egohumans/fetched/detections_file.parquet")
    np.testing.assert_allclose(from_txt.iloc[:, 1:].to_numpy(), from_pickle.iloc[:, 1:].to_numpy(), atol=2e-3)


def test_fetch_rejects_tampered_frame(pipeline: Path, tmp_path: Path) -> None:
    source = _copy_sample(pipeline, tmp_path / "src")
    frame = sorted(source.glob("frames/*/*.jpg"))[7]
    frame.write_bytes(frame.read_bytes() + b"\0")
    with pytest.raises(InputError, match="differs from the manifest") as err:
        fetch.fetch("local", source, source / "manifest.sha256", tmp_path / "fetched")
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
    (source / "detections.pkl").write_bytes(pickle.dumps({"det_bboxes": {}, "x": _Touch(marker)}))
    names = sorted(p.relative_to(source).as_posix() for p in source.rglob("*") if p.name != "manifest.sha256")
    write_manifest(source / "manifest.sha256", source, [n for n in names if (source / n).is_file()])
    with pytest.raises(InputError, match=r"refused global posix\.system") as err:
        fetch.fetch("local", source, source / "manifest.sha256", tmp_path / "fetched")
    assert str(source / "detections.pkl") in str(err.value)
    assert not marker.exists()


def test_fetch_requires_a_manifest(pipeline: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"egohumans\.fetch\.manifest"):
        fetch.fetch("sample", pipeline / "data/egohumans/sample", None, tmp_path / "fetched")


# ----------------------------------------------------------------------------------------- detect, track, score


def test_detect_gt_and_file(pipeline: Path) -> None:
    detections = pipeline / "data/egohumans/detections"
    gt = read_detections_parquet(detections / "gt.parquet")
    assert (gt["score"] == 1).all()
    fetched_gt = sum(len(read_mot(p, kind="gt")) for p in (pipeline / "data/egohumans/fetched/gt").glob("*.txt"))
    assert len(gt) == fetched_gt
    file = pd.read_parquet(detections / "file.parquet")
    pd.testing.assert_frame_equal(file, pd.read_parquet(pipeline / "data/egohumans/fetched/detections_file.parquet"))


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
        with_gt, with_file = metrics[f"{tracker}-gt"]["COMBINED"], metrics[f"{tracker}-file"]["COMBINED"]
        assert with_gt["IDF1"] > with_file["IDF1"]
        assert with_gt["MOTA"] > with_file["MOTA"]
        assert with_gt["MOTA"] > 80 and with_gt["DetA"] > 70  # the trackers keep (almost) every ground-truth box
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
    settings = _params()["egohumans"]["track"]["botsort"]
    data = pipeline / "data/egohumans"
    track.track(
        "botsort", data / "detections/file.parquet", data / "fetched/sequences.json", tmp_path / "again", settings
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
    settings = _params()["egohumans"]["track"]["bytetrack"]
    track.track("bytetrack", path, data / "fetched/sequences.json", tmp_path / "out", settings)
    assert (tmp_path / "out" / f"{first}.txt").read_text() == ""


def test_botsort_needs_gmc_none(pipeline: Path, tmp_path: Path) -> None:
    settings = {**_params()["egohumans"]["track"]["botsort"], "gmc_method": "sparseOptFlow"}
    data = pipeline / "data/egohumans"
    with pytest.raises(InputError, match="gmc_method must be none"):
        track.track(
            "botsort", data / "detections/gt.parquet", data / "fetched/sequences.json", tmp_path / "x", settings
        )


# ----------------------------------------------------------------------------------------- yolo


@pytest.fixture
def tiny_fetched(tmp_path: Path) -> Path:
    sample.generate_sample(tmp_path / "sample", sample.SampleParams(**{**SMALL, "sequences": 1, "frames": 3}))
    fetch.fetch("sample", tmp_path / "sample", tmp_path / "sample/manifest.sha256", tmp_path / "fetched")
    return tmp_path / "fetched"


def test_yolo_architecture_only_end_to_end(tiny_fetched: Path, tmp_path: Path) -> None:
    params = {
        **_params()["egohumans"]["detect"],
        "yolo_weights": "arch-only",
        "yolo_batch": 2,
        "yolo_imgsz": 320,
        "yolo_conf": 0.001,
    }
    out = tmp_path / "yolo.parquet"
    detect.detect("yolo", tiny_fetched, out, params)
    table = pd.read_parquet(out)  # random weights: maybe no boxes at all; the plumbing is what is checked
    assert list(table.columns) == DETECTION_COLUMNS
    assert table["frame"].dtype == np.int64 and table["score"].dtype == np.float64
    assert set(table["frame"]) <= {1, 2, 3}
    read_detections_parquet(out)


def test_yolo_without_weights_is_a_clear_error(tiny_fetched: Path, tmp_path: Path) -> None:
    params = {**_params()["egohumans"]["detect"], "yolo_weights": None}
    with pytest.raises(InputError, match=r"egohumans\.detect\.yolo_weights is not set"):
        detect.detect("yolo", tiny_fetched, tmp_path / "yolo.parquet", params)
    missing = tmp_path / "yolo11n.pt"
    with pytest.raises(InputError, match="names no such file") as err:
        detect.detect("yolo", tiny_fetched, tmp_path / "yolo.parquet", {**params, "yolo_weights": str(missing)})
    assert str(missing) in str(err.value)
    assert not missing.exists() and not (tmp_path / "yolo.parquet").exists()


def test_stage_cli_reports_bad_input(pipeline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The stage CLI turns the missing-weights error into exit code 2 and a one-line message."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(pipeline)
        assert detect.main(["--mode", "yolo"]) == 2
    assert "egohumans.detect.yolo_weights is not set" in capsys.readouterr().err


def test_scores_equal_trackeval(pipeline: Path, tmp_path: Path) -> None:
    """The score stage's numbers are TrackEval's (PyPI 1.3.0, MOT15 rules) on the same files."""
    from trackeval_oracle import run_trackeval, write_tree

    metrics = json.loads((pipeline / "metrics/egohumans.json").read_text())
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
