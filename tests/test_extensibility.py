"""A third benchmark is a dvc.yaml entry, not a code change: repro, the nightly report and the audit pick it up."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import EGOEVAL, dvc, nightly_env, tool_env

TOY_STAGE = '''\
"""A toy benchmark: accuracy of the answers in toy/answers.txt, with a Wilson 95% interval."""
import json
import math
from pathlib import Path

import yaml

threshold = yaml.safe_load(Path("toy.yaml").read_text())["toy"]["threshold"]
scores = [float(line) for line in Path("toy/answers.txt").read_text().split()]
n, k = len(scores), sum(score >= threshold for score in scores)
p, z = k / n, 1.959964
centre = (p + z * z / (2 * n)) / (1 + z * z / n)
half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
metrics = {"all": {"accuracy": 100 * p, "n": n, "ci95": {"accuracy": [100 * (centre - half), 100 * (centre + half)]}}}
Path("metrics").mkdir(exist_ok=True)
Path("metrics/toy.json").write_text(json.dumps(metrics, indent=2) + "\\n")
'''


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True)


@pytest.mark.slow
def test_a_third_benchmark_needs_no_code_edit(reproduced: Path, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    shutil.copytree(reproduced, root, symlinks=True)
    (root / "toy").mkdir()
    (root / "toy/score.py").write_text(TOY_STAGE)
    (root / "toy/answers.txt").write_text("\n".join(str(i / 10) for i in range(10)) + "\n")
    (root / "toy.yaml").write_text(yaml.safe_dump({"toy": {"threshold": 0.35}}))
    pipeline = yaml.safe_load((root / "dvc.yaml").read_text())
    pipeline["stages"]["toy_score"] = {
        "meta": {"benchmark": "toy"},
        "cmd": "python toy/score.py",
        "deps": ["toy/score.py", "toy/answers.txt"],
        "params": [{"toy.yaml": ["toy"]}],
        "metrics": [{"metrics/toy.json": {"cache": False, "persist": True}}],
    }
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))

    run = dvc(root, "repro")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.count("Running stage") == 1 and "Running stage 'toy_score'" in run.stdout
    assert json.loads((root / "metrics/toy.json").read_text())["all"]["accuracy"] == 60.0
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "a third benchmark")

    nightly = subprocess.run(
        [sys.executable, "-m", "flows.nightly", "--once"],
        cwd=root,
        env=nightly_env(tmp_path / "prefect-home"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert nightly.returncode == 0, nightly.stdout[-3000:] + nightly.stderr[-3000:]
    assert "toy_score" in nightly.stdout
    report = (root / ".egoeval-cache/prefect/report.md").read_text()
    assert "## toy" in report and "accuracy" in report.split("## toy", 1)[1]

    audit = subprocess.run(
        [EGOEVAL, "audit", "metrics/toy.json"], cwd=root, env=tool_env(), capture_output=True, text=True, timeout=900
    )
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]
    assert "reported numbers reproduce" in audit.stdout and audit.stdout.rstrip().endswith("verdict: reproduces")

    metrics = json.loads((root / "metrics/toy.json").read_text())
    metrics["all"]["accuracy"] = 70.0
    (tmp_path / "claimed.json").write_text(json.dumps(metrics))
    audit = subprocess.run(
        [EGOEVAL, "audit", str(tmp_path / "claimed.json")],
        cwd=root,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert audit.returncode == 1, audit.stdout[-3000:] + audit.stderr[-3000:]
    assert "all/accuracy: reported 70.0, re-derived 60.0" in audit.stdout
