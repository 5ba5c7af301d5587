"""``egoeval compare``: published EgoNormia figures (data with their source) beside ours."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from egoeval.egonormia.published import PUBLISHED_FILE, figures_from_eval_json, load_published, setting_of
from egoeval.egonormia.scoring import score_official
from egoeval.io import sha256_file

REPO = Path(__file__).resolve().parents[1]
OOD_EVAL = REPO / "tests" / "data" / "egonormia" / "ood_robot_eval.json"


def test_bundled_figures_are_the_official_scorers_on_the_official_results() -> None:
    published = load_published()["datasets"]["ood_robot"]
    assert (
        sha256_file(OOD_EVAL) in published["source"]
        and "7eb7e8ed1e049e25c55fde721c87934ba99b9111" in published["source"]
    )
    assert published["figures"] == figures_from_eval_json(json.loads(OOD_EVAL.read_text()))
    raw = score_official(json.loads(OOD_EVAL.read_text()))
    assert published["figures"]["pipeline"]["gpt-o3-mini"] == raw["desc_gpt-o3-mini"]
    assert published["figures"]["video"]["gpt-4o-240513"]["action"] == pytest.approx(5 / 11 * 100)


def test_model_keys_name_their_setting() -> None:
    assert setting_of("blind_gpt-4o") == ("blind", "gpt-4o")
    assert setting_of("desc_gpt-o3-mini") == ("pipeline", "gpt-o3-mini")
    assert setting_of("gpt-4o-240513") == ("video", "gpt-4o-240513")


def _metrics(tmp_path: Path) -> Path:
    entry = {
        "protocol": "official",
        "action": 40.0,
        "justification": 30.0,
        "both": 20.0,
        "sensible_iou": 10.0,
        "n": 11,
        "ci95": {"action": [30.0, 50.0], "justification": [0.0, 10.0], "both": [0.0, 40.0], "sensible_iou": [5, 15]},
    }
    path = tmp_path / "metrics" / "egonormia.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"video": {"my-vlm": entry}}))
    return path


def compare(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if not (cwd / "params.yaml").exists():
        (cwd / "params.yaml").write_text((REPO / "params.yaml").read_text())
    return subprocess.run(
        [sys.executable, "-m", "egoeval.cli", "compare", *args], cwd=cwd, capture_output=True, text=True
    )


def test_compare_prints_published_figures_beside_ours(tmp_path: Path) -> None:
    metrics = _metrics(tmp_path)
    done = compare(tmp_path, str(metrics), "--dataset", "ood_robot", "--map", "my-vlm=gpt-4o-240513")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "video/gpt-4o-240513: action 45.45, justification 18.18, both 9.09, sensible_iou 25.00 (n 11)" in out
    assert "action: ours 40.00 [30.00, 50.00], published 45.45, ours - published -5.45, inside our 95%" in out
    assert "justification: ours 30.00 [0.00, 10.00], published 18.18, ours - published +11.82, outside our" in out
    assert "ours my-vlm (n 11, protocol official)" in out
    assert "pipeline/gpt-o3-mini" in out  # every published figure of the dataset is listed


def test_compare_reads_the_mapping_from_params_and_says_what_is_missing(tmp_path: Path) -> None:
    _metrics(tmp_path)
    params = (REPO / "params.yaml").read_text().replace("published_as: null", "published_as: rag", 1)
    params = params.replace("name: chance", "name: my-vlm", 1).replace("dataset: egonormia", "dataset: ood_robot", 1)
    (tmp_path / "params.yaml").write_text(params)
    done = compare(tmp_path, "metrics/egonormia.json")
    assert done.returncode == 0, done.stderr
    assert "video/rag:" in done.stdout and "ours my-vlm" in done.stdout
    done = compare(tmp_path, "metrics/egonormia.json", "--dataset", "egonormia")
    assert "no published figures for dataset 'egonormia' bundled (figures for: ood_robot)" in done.stdout


def test_compare_refuses_an_unknown_benchmark(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text("{}")
    done = compare(tmp_path, "other.json")
    assert done.returncode == 2 and "no published numbers for benchmark 'other'" in done.stderr
    (tmp_path / "egohumans.json").write_text("{}")
    done = compare(tmp_path, "egohumans.json", "--dataset", "ood_robot")
    assert done.returncode == 2 and "EgoNormia options" in done.stderr


def test_bundled_file_names_its_source_for_every_dataset() -> None:
    for dataset in load_published(PUBLISHED_FILE)["datasets"].values():
        assert dataset["source"]
