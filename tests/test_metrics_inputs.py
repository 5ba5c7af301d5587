"""Metrics files are inputs of the report, ``egoeval compare`` and ``egoeval audit`` (issue 28 item 16): a value that
is not a number, a cross-view entry without COMBINED or with short lists, a truncated dvc.lock and a headline row
given to the audit all stop with exit 2 naming the file and key, no traceback."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import forked
import pytest
from conftest import EGOEVAL, REPO, copy_repo, copy_workspace, tool_env, write_params

EGONORMIA = json.loads((REPO / "metrics/egonormia.json").read_text())
EGOHUMANS = json.loads((REPO / "metrics/egohumans.json").read_text())


def run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return forked.run([EGOEVAL, *args], root, tool_env(), timeout=300)


def edited(metrics: dict[str, Any], keys: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy with the value at ``keys`` replaced (``KeyError``: deleted)."""
    data = copy.deepcopy(metrics)
    node = data
    for key in keys[:-1]:
        node = node[key]
    if value is KeyError:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return data


RUN = next(iter(EGOHUMANS))
SETTING = next(iter(EGONORMIA))
MODEL = next(iter(EGONORMIA[SETTING]))
BAD = {  # (file, the damage, the key the message names)
    "ledger not a number": (
        "egonormia",
        edited(EGONORMIA, (SETTING, MODEL, "ledger", "calls"), "forty-eight"),
        f'key {SETTING}/{MODEL}/ledger/calls: "forty-eight" is not a number',
    ),
    "ledger a list": (
        "egonormia",
        edited(EGONORMIA, (SETTING, MODEL, "ledger"), [1, 2]),
        f"key {SETTING}/{MODEL}/ledger: a list where a number is expected",
    ),
    "served models a number": (
        "egonormia",
        edited(EGONORMIA, (SETTING, MODEL, "served_models"), 48),
        f"key {SETTING}/{MODEL}/served_models: expected an object",
    ),
    "served models not a count": (
        "egonormia",
        edited(EGONORMIA, (SETTING, MODEL, "served_models"), {"vlm-2026": 4.5}),
        f"key {SETTING}/{MODEL}/served_models/vlm-2026: 4.5 is not a count of calls",
    ),
    "a short interval": (
        "egonormia",
        edited(EGONORMIA, (SETTING, MODEL, "ci95", "both"), [1.0]),
        f"key {SETTING}/{MODEL}/ci95/both: an interval must be [low, high], got [1.0]",
    ),
    "cross view without COMBINED": (
        "egohumans",
        edited(EGOHUMANS, (RUN, "cross_view", "COMBINED"), KeyError),
        f"key {RUN}/cross_view/COMBINED: expected an object with camera and world",
    ),
    "cross view short list": (
        "egohumans",
        edited(EGOHUMANS, (RUN, "cross_view", "COMBINED", "camera", "ci95", "IDF1"), [87.0]),
        f"key {RUN}/cross_view/COMBINED/camera/ci95/IDF1: an interval must be [low, high], got [87.0]",
    ),
    "run without COMBINED": (
        "egohumans",
        edited(EGOHUMANS, (RUN, "COMBINED"), KeyError),
        f"key {RUN}/COMBINED: missing or not an object",
    ),
    "infinity": (
        "egohumans",
        edited(EGOHUMANS, (RUN, "COMBINED", "IDF1"), float("inf")),
        f"key {RUN}/COMBINED/IDF1: inf is not a finite number",
    ),
}


@pytest.mark.bad_input
@pytest.mark.parametrize("case", list(BAD))
def test_compare_refuses_a_damaged_metrics_file_naming_file_and_key(tmp_path: Path, case: str) -> None:
    benchmark, metrics, message = BAD[case]
    write_params(tmp_path)
    shutil.copytree(REPO / "data/published", tmp_path / "data/published")
    (tmp_path / "metrics").mkdir()
    (tmp_path / f"metrics/{benchmark}.json").write_text(json.dumps(metrics))
    done = run(tmp_path, "compare", f"metrics/{benchmark}.json")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"metrics/{benchmark}.json: {message}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.bad_input
def test_the_report_refuses_a_damaged_metrics_file_naming_file_and_key(tmp_path: Path) -> None:
    _, metrics, message = BAD["ledger not a number"]
    write_params(tmp_path)
    (tmp_path / "plots/egonormia").mkdir(parents=True)
    shutil.copy(REPO / "plots/egonormia/categories.csv", tmp_path / "plots/egonormia/categories.csv")
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics/egonormia.json").write_text(json.dumps(metrics))
    done = run(tmp_path, "report", "--out", "reports/index.html")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"metrics/egonormia.json: {message}" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "reports/index.html").exists()


@pytest.mark.slow
@pytest.mark.bad_input
@pytest.mark.parametrize("case", ["cross view without COMBINED", "cross view short list"])
def test_the_report_refuses_a_damaged_egohumans_metrics_file(reproduced: Path, tmp_path: Path, case: str) -> None:
    root = copy_workspace(reproduced, tmp_path / "ws")
    page = (root / "reports/index.html").read_bytes()
    _, metrics, message = BAD[case]
    (root / "metrics/egohumans.json").write_text(json.dumps(metrics))
    done = run(root, "report")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"metrics/egohumans.json: {message}" in done.stderr and "Traceback" not in done.stderr
    assert (root / "reports/index.html").read_bytes() == page  # the last good page stays


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_repo(tmp_path_factory.mktemp("audit"))


@pytest.mark.bad_input
def test_the_audit_names_a_truncated_dvc_lock(workspace: Path, tmp_path: Path) -> None:
    root = copy_workspace(workspace, tmp_path / "ws")
    lock = (root / "dvc.lock").read_text()
    (root / "dvc.lock").write_text(lock[: len(lock) // 2].rsplit("\n", 1)[0] + "\n      - path: [")
    done = run(root, "audit", "metrics/egonormia.json")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "dvc.lock: not valid YAML (truncated or edited?)" in done.stderr and "restore it from git" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.bad_input
def test_the_audit_of_a_headline_row_names_the_full_metrics_file(workspace: Path) -> None:
    row = next((workspace / "metrics/egohumans").glob("*.json")).relative_to(workspace)
    done = run(workspace, "audit", str(row))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{row}: a headline row of `dvc metrics show`" in done.stderr
    assert "audit the full metrics file instead: egoeval audit metrics/egohumans.json" in done.stderr
    assert "Traceback" not in done.stderr
