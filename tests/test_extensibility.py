"""A third benchmark is a package, a params.yaml section and its dvc.yaml stage: no shared module changes, and the
settings, repro, the report page, ``egoeval compare``, the audit and the nightly flow all pick it up."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from code_closure import undeclared_code
from conftest import dvc, nightly_env, tool_env

from egoeval.pipeline import pipeline_stages

TOY_FILES = {
    "egoeval/toy/__init__.py": "",
    "egoeval/toy/answers.txt": "".join(f"{i / 10}\n" for i in range(10)),
    "egoeval/toy/settings.py": '''\
"""The toy benchmark's params.yaml section."""

from egoeval.settings import Fraction, Section


class ToyReport(Section):
    title: str


class ToySettings(Section):
    threshold: Fraction  # an answer scoring at least this is right
    published: dict[str, float]  # published accuracy (percent) by model
    report: ToyReport
''',
    "egoeval/toy/scoring.py": '''\
"""Accuracy of the toy answers with a Wilson 95% interval; ``python -m egoeval.toy.scoring`` is the stage."""

import json
import math
from pathlib import Path

from egoeval.io import atomic_write_text
from egoeval.settings import benchmark_settings
from egoeval.stage import run_stage
from egoeval.toy.settings import ToySettings

ANSWERS = Path(__file__).with_name("answers.txt")
METRICS = Path("metrics/toy.json")


def score(threshold: float) -> dict:
    scores = [float(line) for line in ANSWERS.read_text().split()]
    n, k = len(scores), sum(score >= threshold for score in scores)
    p, z = k / n, 1.959964
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return {"all": {"accuracy": 100 * p, "n": n, "ci95": {"accuracy": [100 * (centre - half), 100 * (centre + half)]}}}


if __name__ == "__main__":
    threshold = lambda: benchmark_settings("toy", ToySettings).threshold
    body = lambda: atomic_write_text(METRICS, json.dumps(score(threshold())) + "\\n")
    raise SystemExit(run_stage(body, benchmark="toy"))
''',
    "egoeval/toy/benchmark.py": '''\
"""The toy benchmark as the shared front-ends see it."""

import argparse
import json
from pathlib import Path
from typing import Any

from egoeval.benchmarks import Benchmark, ReportPart, ReportSection
from egoeval.toy.settings import ToySettings


class Toy(Benchmark[ToySettings]):
    name = "toy"
    title = "Toy"
    order = 30

    def settings_model(self) -> type[ToySettings]:
        return ToySettings

    def report(self, root: Path, settings: ToySettings) -> ReportPart:
        accuracy = json.loads((root / "metrics/toy.json").read_text())["all"]["accuracy"]
        html = f'<h2 id="toy">{settings.report.title}</h2><p>toy accuracy {accuracy:.1f} %</p>'
        return ReportPart([ReportSection("toy", "Toy", html)], style=".toy-note{color:#555}")

    def add_compare_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--digits", type=int, default=1, help="decimals shown")

    def compare(self, metrics: Any, settings: ToySettings, args: argparse.Namespace) -> str:
        ours = metrics["all"]["accuracy"]
        rows = [f"{model}: published {value:.{args.digits}f}" for model, value in settings.published.items()]
        return "\\n".join([f"toy (ours, n={metrics['all']['n']}): {ours:.{args.digits}f}", *rows])


BENCHMARK = Toy()
''',
}
TOY_PARAMS = {"threshold": 0.35, "published": {"toy-model": 55.25}, "report": {"title": "Toy results"}}
SHARED = [
    "egoeval/benchmarks.py",
    "egoeval/registry.py",
    "egoeval/settings",
    "egoeval/stage.py",
    "egoeval/io.py",
    "egoeval/errors.py",
]


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _egoeval(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The egoeval command of the copy at ``root`` (the console script would import the installed tree)."""
    command = [sys.executable, "-m", "egoeval.cli", *args]
    return subprocess.run(command, cwd=root, env=tool_env(), capture_output=True, text=True, timeout=900)


def add_toy_benchmark(root: Path) -> None:
    """The whole change: the package, its params.yaml section, its stage, and its files in the params and report
    stages' deps (what those stages import now)."""
    for name, text in TOY_FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    params = yaml.safe_load((root / "params.yaml").read_text())
    (root / "params.yaml").write_text(yaml.safe_dump({**params, "toy": TOY_PARAMS}, sort_keys=False))
    pipeline = yaml.safe_load((root / "dvc.yaml").read_text())
    stages = pipeline["stages"]
    stages["params"]["deps"] += ["egoeval/toy/benchmark.py", "egoeval/toy/settings.py"]
    stages["report"]["deps"] += ["egoeval/toy/benchmark.py", "egoeval/toy/settings.py", "metrics/toy.json"]
    stages["toy_score"] = {
        "meta": {"benchmark": "toy"},
        "cmd": "python -m egoeval.toy.scoring",
        "deps": ["egoeval/toy", *SHARED, "data/params.checked"],
        "params": ["toy.threshold"],
        "metrics": [{"metrics/toy.json": {"cache": False, "persist": True}}],
    }
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))


@pytest.mark.slow
def test_a_third_benchmark_is_its_own_package(reproduced: Path, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    shutil.copytree(reproduced, root, symlinks=True)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "reproduced", "--allow-empty")
    add_toy_benchmark(root)
    changed = _git(root, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert sorted(line[3:] for line in changed) == sorted(["dvc.yaml", "params.yaml", *TOY_FILES])

    # its section is validated like the others: a bad value stops the run, naming the key
    good = (root / "params.yaml").read_text()
    (root / "params.yaml").write_text(good.replace("threshold: 0.35", "threshold: 35"))
    bad = dvc(root, "repro")
    assert bad.returncode != 0 and "toy.threshold = 35" in bad.stderr and "write 0.35" in bad.stderr, bad.stderr
    (root / "params.yaml").write_text(good)

    # only its stage, the params check and the report run; no other benchmark's stage re-runs
    run = dvc(root, "repro")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    ran = sorted(line.split("'")[1] for line in run.stdout.splitlines() if line.startswith("Running stage"))
    assert ran == ["params", "report", "toy_score"]
    assert json.loads((root / "metrics/toy.json").read_text())["all"]["accuracy"] == 60.0
    for info in pipeline_stages(root):  # its dvc.yaml entries declare what their commands import
        assert undeclared_code(root, info) == [], info.name

    page = (root / "reports/index.html").read_text()
    assert '<a href="#toy">Toy</a>' in page and '<h2 id="toy">Toy results</h2><p>toy accuracy 60.0 %</p>' in page
    assert "EgoNormia, EgoHumans and Toy results" in page

    compared = _egoeval(root, "compare", "metrics/toy.json", "--digits", "2")
    assert compared.returncode == 0, compared.stderr
    assert compared.stdout.splitlines() == ["toy (ours, n=10): 60.00", "toy-model: published 55.25"]
    foreign = _egoeval(root, "compare", "metrics/toy.json", "--digits", "2", "--table", "x")
    assert foreign.returncode == 2 and "(they are the EgoNormia options)" in foreign.stderr, foreign.stderr
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "a third benchmark")

    audit = _egoeval(root, "audit", "metrics/toy.json")
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]
    assert "reported numbers reproduce" in audit.stdout and audit.stdout.rstrip().endswith("verdict: reproduces")
    metrics = json.loads((root / "metrics/toy.json").read_text())
    metrics["all"]["accuracy"] = 70.0
    (tmp_path / "claimed.json").write_text(json.dumps(metrics))
    audit = _egoeval(root, "audit", str(tmp_path / "claimed.json"))
    assert audit.returncode == 1, audit.stdout[-3000:] + audit.stderr[-3000:]
    assert "all/accuracy: reported 70.0, re-derived 60.0" in audit.stdout

    nightly = subprocess.run(
        [sys.executable, "-m", "flows.nightly", "--once"],
        cwd=root,
        env=nightly_env(tmp_path / "prefect-home"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert nightly.returncode == 0, nightly.stdout[-3000:] + nightly.stderr[-3000:]
    report = (root / ".egoeval-cache/prefect/report.md").read_text()
    assert "## toy" in report and "accuracy" in report.split("## toy", 1)[1]
