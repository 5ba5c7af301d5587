"""The tracker registry: every tracker of the pinned ultralytics runs from params alone; BoT-SORT's camera motion
compensation runs on the fetched frames."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from egoeval.core.errors import InputError, ParamsError
from egoeval.core.settings import validate_params
from egoeval.egohumans import fetching
from egoeval.egohumans.sample import generate_sample
from egoeval.egohumans.settings import FetchSettings, SampleSettings, TrackerConfig, packaged_trackers
from egoeval.egohumans.trackers import OWN
from egoeval.egohumans.tracking import track, track_sequence

REPO = Path(__file__).resolve().parents[1]


def _runnable(kind: str) -> dict:
    """The packaged settings of ``kind`` without the parts that need a model download or frames."""
    settings = dict(packaged_trackers()[kind])
    settings |= {k: v for k, v in (("gmc_method", "none"), ("with_reid", False)) if k in settings}
    return settings


def _walkers(frames: int = 30) -> pd.DataFrame:
    """Two people walking apart, one box each per frame, score 0.9."""
    rows = [(f, 10 + 3 * f, 20, 30, 60, 0.9) for f in range(1, frames + 1)]
    rows += [(f, 300 - 3 * f, 40, 30, 60, 0.9) for f in range(1, frames + 1)]
    return pd.DataFrame(rows, columns=["frame", "x", "y", "w", "h", "score"])


def test_registry_is_ultralytics_tracker_map() -> None:
    from ultralytics.trackers.track import TRACKER_MAP

    assert sorted(packaged_trackers()) == sorted(
        [*TRACKER_MAP, "egomotion", "world", "multiview", "linked"]
    )  # and our own
    assert sorted(OWN) == [
        "egomotion",
        "linked",
        "multiview",
        "world",
    ]  # each of egoeval's own with its YAML of defaults


# egoeval's own need cameras: tests/test_egomotion.py, tests/test_world_tracker.py, tests/test_multiview.py
@pytest.mark.parametrize("kind", sorted(set(packaged_trackers()) - {"egomotion", "world", "multiview", "linked"}))
def test_every_tracker_runs_from_params(kind: str) -> None:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["egohumans"]["track"]["config"][f"my{kind}"] = _runnable(kind)
    params["egohumans"]["track"]["trackers"] = [f"my{kind}"]
    config = validate_params(params).egohumans.track.config[f"my{kind}"]
    out = track_sequence(config, _walkers(), 30)
    assert out["id"].nunique() >= 2 and out["frame"].max() >= 25


def test_tracker_settings_are_checked_against_the_packaged_yaml() -> None:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    bad = copy.deepcopy(params)
    bad["egohumans"]["track"]["config"]["ocsort"] = {**_runnable("ocsort"), "delta_t": "three"}
    bad["egohumans"]["track"]["config"]["fast"] = {**_runnable("fasttrack"), "surprise": 1}
    bad["egohumans"]["track"]["config"]["x"] = {**_runnable("bytetrack"), "tracker_type": "sort"}
    with pytest.raises(ParamsError) as err:
        validate_params(bad)
    message = str(err.value)
    assert (
        "egohumans.track.config.ocsort: Value error, delta_t = 'three': must be an integer"
        in message.replace("Value error, ", "Value error, ")
        or "delta_t = 'three': must be an integer" in message
    )
    assert "unknown ['surprise']" in message
    assert "tracker_type 'sort' must be one of" in message
    bad = copy.deepcopy(params)
    bad["egohumans"]["track"]["trackers"] = ["bytetrack", "sort"]
    with pytest.raises(ParamsError, match=r"trackers\[1\] = 'sort' has no entry in config"):
        validate_params(bad)


def test_botsort_camera_motion_compensation_uses_the_frames(tmp_path: Path) -> None:
    params = yaml.safe_load((REPO / "params.yaml").read_text())["egohumans"]
    small = {**params["sample"], "sequences": 1, "frames": 12, "width": 320, "height": 180}
    generate_sample(tmp_path / "sample", SampleSettings(**small))
    root = tmp_path / "sample"
    fetch_settings = FetchSettings(**{**params["fetch"], "path": str(root), "manifest": str(root / "manifest.sha256")})
    fetching.fetch(fetch_settings, tmp_path / "fetched", ["gt", "official"])
    detections = pd.read_parquet(tmp_path / "fetched/detections_official.parquet")
    detections.to_parquet(tmp_path / "det.parquet", index=False)
    config = TrackerConfig(**{**params["track"]["config"]["botsort"], "gmc_method": "sparseOptFlow"})
    assert track("botsort", config, tmp_path / "det.parquet", tmp_path / "fetched", tmp_path / "gmc", root) > 0
    # the frames are really read: a missing frame stops the run, naming it
    images = pd.read_parquet(tmp_path / "fetched/images.parquet")
    missing = Path(images["path"].iloc[3])
    missing.unlink()
    with pytest.raises(InputError, match="cannot read") as err:
        track("botsort", config, tmp_path / "det.parquet", tmp_path / "fetched", tmp_path / "gmc2", root)
    assert str(missing) in str(err.value)
    assert np.isfinite(detections[["x", "y"]].to_numpy()).all()
