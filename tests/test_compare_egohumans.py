"""``egoeval compare metrics/egohumans.json``: our runs beside the published EgoHumans table (a real CLI run)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, write_params

from egoeval.egohumans.published import read_published
from egoeval.errors import InputError

EGOEVAL = str(Path(sys.executable).with_name("egoeval"))
METRICS = {
    "bytetrack-file": {
        "protocol": "official",
        "COMBINED": {"IDF1": 51.0, "MOTA": 60.0, "MOTP": 79.0, "FP": 20000, "FN": 8000, "IDSW": 2700, "HOTA": 40.0},
        "sequences": {},
    },
    "botsort-gt": {"protocol": "trackeval", "COMBINED": {"IDF1": 70.0, "MOTA": 80.0}, "sequences": {}},
}


def compare(root: Path, published: dict[str, str]) -> subprocess.CompletedProcess[str]:
    params = write_params(root)
    params["egohumans"]["compare"]["published"] = published  # the mapping replaced, not merged
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "data/published").mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "data/published/egohumans", root / "data/published/egohumans", dirs_exist_ok=True)
    (root / "metrics").mkdir(exist_ok=True)
    (root / "metrics/egohumans.json").write_text(json.dumps(METRICS))
    return subprocess.run(
        [EGOEVAL, "compare", "metrics/egohumans.json"], cwd=root, capture_output=True, text=True, timeout=120
    )


def test_runs_beside_published_rows(tmp_path: Path) -> None:
    done = compare(tmp_path, {"bytetrack-file": "ByteTrack", "botsort-gt": "SimpleBaseline"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "arXiv:2305.16487" in lines[0] and "protocol official" in lines[0]
    assert "bytetrack-file (official)  vs  ByteTrack" in lines
    assert any(line.split() == ["IDF1", "51.00", "50.90", "+0.10"] for line in lines)
    assert any(line.split() == ["IDSW", "2700", "2680", "+20"] for line in lines)
    assert any("botsort-gt (trackeval)  vs  SimpleBaseline" in line and "not comparable" in line for line in lines)


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
