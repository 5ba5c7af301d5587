"""``egoeval compare metrics/egohumans.json``: our runs beside the published EgoHumans table (a real CLI run)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import forked
import pytest
import yaml
from conftest import REPO, write_params

from egoeval.core.errors import InputError
from egoeval.egohumans.published import read_published

EGOEVAL = str(Path(sys.executable).with_name("egoeval"))
# what the score stage records of the data a run scored (egoeval.egohumans.scoring.run_data): the published data
PUBLISHED_DATA = {"dataset": "egohumans", "split": "all", "set": "test", "modality": ["ego_rgb"], "detections": "file"}
METRICS = {
    "bytetrack-file": {
        "protocol": "official",
        "COMBINED": {"IDF1": 51.0, "MOTA": 60.0, "MOTP": 79.0, "FP": 20000, "FN": 8000, "IDSW": 2700, "HOTA": 40.0},
        "sequences": {},
        **PUBLISHED_DATA,
    },
    "botsort-gt": {
        "protocol": "trackeval",
        "COMBINED": {"IDF1": 70.0, "MOTA": 80.0},
        "sequences": {},
        **PUBLISHED_DATA,
        "detections": "gt",
    },
}
# our data, not the published: each stands apart, saying why
NOT_PUBLISHED = {
    "sample": ({"dataset": "sample", "set": "sample"}, 'dataset "sample" (published: "egohumans")'),
    "smoke run": ({"limit": {"sequences": 1}}, 'limit {"sequences": 1} (published: null)'),
    "exo": ({"modality": ["ego_rgb", "exo"]}, 'modality ["ego_rgb", "exo"] (published: ["ego_rgb"])'),
    "another set": ({"set": "val"}, 'set "val" (published: "test")'),
    "gt boxes": ({"detections": "official"}, 'detections "official" (published: ["file", "yolo"])'),
    "unrecorded": ({"dataset": None}, "dataset unrecorded"),
}


def compare(root: Path, published: dict[str, str], metrics: dict | None = None) -> subprocess.CompletedProcess[str]:
    params = write_params(root)
    params["egohumans"]["compare"]["published"] = published  # the mapping replaced, not merged
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "data/published").mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "data/published/egohumans", root / "data/published/egohumans", dirs_exist_ok=True)
    (root / "metrics").mkdir(exist_ok=True)
    (root / "metrics/egohumans.json").write_text(json.dumps(METRICS if metrics is None else metrics))
    return forked.run([EGOEVAL, "compare", "metrics/egohumans.json"], root, dict(os.environ), timeout=120)


def test_runs_beside_published_rows(tmp_path: Path) -> None:
    done = compare(tmp_path, {"bytetrack-file": "ByteTrack", "botsort-gt": "SimpleBaseline"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "arXiv:2305.16487" in lines[0] and "protocol official" in lines[0]
    assert "bytetrack-file (official)  vs  ByteTrack" in lines
    assert any(line.split() == ["IDF1", "51.00", "50.90", "+0.10"] for line in lines)
    assert any(line.split() == ["IDSW", "2700", "2680", "+20"] for line in lines)
    (apart,) = [line for line in lines if line.startswith("botsort-gt  vs  SimpleBaseline")]
    assert "not beside the published figures, not ranked among them" in apart
    assert 'protocol "trackeval" (published: "official")' in apart and 'detections "gt"' in apart
    assert not any(line.split()[:2] == ["IDF1", "70.00"] for line in lines)


@pytest.mark.parametrize("case", list(NOT_PUBLISHED))
def test_the_sample_a_smoke_run_or_other_data_stand_apart_from_the_published_figures(tmp_path: Path, case: str) -> None:
    """Issue 27 item 5: published figures are ranked beside ours only for the published data."""
    changed, reason = NOT_PUBLISHED[case]
    entry = {k: v for k, v in (METRICS["bytetrack-file"] | changed).items() if v is not None}
    done = compare(tmp_path, {"bytetrack-file": "ByteTrack"}, {"bytetrack-file": entry})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    (apart,) = [line for line in lines if line.startswith("bytetrack-file  vs  ByteTrack")]
    assert "not beside the published figures, not ranked among them" in apart and reason in apart, apart
    assert not any(line.split()[:1] == ["IDF1"] and "50.90" in line for line in lines)  # no figure beside ours
    assert any(line.startswith("ByteTrack (published; no run of ours beside it): IDF1 50.9") for line in lines)


def test_the_reports_egohumans_table_keeps_other_data_apart() -> None:
    from egoeval.egohumans.report import tracking_section

    table = read_published(REPO / "data/published/egohumans/tracking.yaml")
    runs = [("bytetrack-file", "bytetrack", "file"), ("botsort-gt", "botsort", "gt")]
    page = tracking_section(METRICS, runs, table, {"bytetrack-file": "ByteTrack", "botsort-gt": "SimpleBaseline"})
    assert "bytetrack-file: IDF1 51.0" in page  # the published data: beside its row
    assert "botsort-gt: IDF1" not in page and "Not beside the published figures" in page
    sample = {run: entry | {"dataset": "sample"} for run, entry in METRICS.items()}
    page = tracking_section(sample, runs, table, {"bytetrack-file": "ByteTrack"})
    assert "bytetrack-file: IDF1" not in page and "<code>bytetrack-file</code> (mapped to ByteTrack)" in page


def test_bad_mapping_names_the_params_key(tmp_path: Path) -> None:
    done = compare(tmp_path, {"bytetrack-file": "EgoFormer"})
    assert done.returncode == 2
    assert "egohumans.compare.published.bytetrack-file: 'EgoFormer' is not a row of" in done.stderr
    done = compare(tmp_path, {"ocsort-file": "ByteTrack"})
    assert done.returncode == 2
    assert "run 'ocsort-file' is not in the metrics file" in done.stderr


def test_published_table_is_checked(tmp_path: Path) -> None:
    table = read_published(REPO / "data/published/egohumans/tracking.yaml")
    assert table.rows["ByteTrack"]["IDF1"] == 50.9 and table.rows["SimpleBaseline"]["MOTA"] == 59.5
    assert table.protocol == "official"
    doc = yaml.safe_load((REPO / "data/published/egohumans/tracking.yaml").read_text())
    doc["rows"]["ByteTrack"]["HOTA"] = 40.0
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError, match=r"t\.yaml, row ByteTrack: HOTA"):
        read_published(tmp_path / "t.yaml")
