"""A third benchmark is a package, its stages under stages/, its params.yaml section and its dvc.yaml stages: no shared
module or stage changes (git says what changed), and the settings, repro, the report page (its report params too),
``egoeval compare``, the audit and the nightly flow all pick it up."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from code_closure import undeclared_code
from conftest import REPO, copy_workspace, dvc, nightly_env, tool_env

from egoeval.dvc_project import pipeline_stages

TOY_FILES = {
    "egoeval/toy/__init__.py": "",
    "egoeval/toy/answers.txt": "".join(f"{i / 10}\n" for i in range(10)),
    "egoeval/toy/settings.py": '''\
"""The toy benchmark's params.yaml section."""

from egoeval.core.settings import Fraction, Section


class ToyReport(Section):
    title: str


class ToySettings(Section):
    threshold: Fraction  # an answer scoring at least this is right
    published: dict[str, float]  # published accuracy (percent) by model
    report: ToyReport
''',
    "egoeval/toy/scoring.py": '''\
"""Accuracy of the toy answers with a Wilson 95% interval."""

import json
import math
from pathlib import Path

from egoeval.core.io.atomic import atomic_write_text

ANSWERS = Path(__file__).with_name("answers.txt")
METRICS = Path("metrics/toy.json")


def score(threshold: float) -> dict:
    scores = [float(line) for line in ANSWERS.read_text().split()]
    n, k = len(scores), sum(score >= threshold for score in scores)
    p, z = k / n, 1.959964
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return {"all": {"accuracy": 100 * p, "n": n, "ci95": {"accuracy": [100 * (centre - half), 100 * (centre + half)]}}}


def write_metrics(threshold: float) -> None:
    atomic_write_text(METRICS, json.dumps(score(threshold)) + "\\n")
''',
    "stages/toy/__init__.py": "",
    "stages/toy/score.py": '''\
"""Stage toy_score: metrics/toy.json."""

from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage
from egoeval.toy.scoring import write_metrics
from egoeval.toy.settings import ToySettings

if __name__ == "__main__":
    threshold = lambda: benchmark_settings("toy", ToySettings).threshold
    raise SystemExit(run_stage(lambda: write_metrics(threshold()), benchmark="toy"))
''',
    "stages/toy/report.py": '''\
"""Stage toy_report: the toy's part of the report page, reports/fragments/toy.json."""

from egoeval.report_page import write_fragment
from egoeval.core.stage_shell import run_stage

if __name__ == "__main__":
    raise SystemExit(run_stage(lambda: write_fragment("toy"), benchmark="toy"))
''',
    "egoeval/toy/benchmark.py": '''\
"""The toy benchmark as the shared front-ends see it."""

import argparse
import json
from pathlib import Path
from typing import Any

from egoeval.core.benchmarks import Benchmark, ReportPart, ReportSection
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
SHARED = ["egoeval/__init__.py", "egoeval/core"]  # what every stage runs in (the guide, step 4)
TOY_STAGES = {
    "toy_score": {
        "meta": {"benchmark": "toy"},
        "cmd": "python -m stages.toy.score",
        "deps": ["stages/toy/score.py", "egoeval/toy", *SHARED, "data/params.checked"],
        "params": ["toy.threshold"],
        "metrics": [{"metrics/toy.json": {"cache": False, "persist": True}}],
    },
    "toy_report": {  # its part of the page: the report stage finds it in reports/fragments
        "meta": {"benchmark": "toy"},
        "cmd": "python -m stages.toy.report",
        "deps": ["stages/toy/report.py", "egoeval/report_page.py", "egoeval/toy", *SHARED, "metrics/toy.json"],
        "params": ["toy.report"],
        "outs": [{"reports/fragments/toy.json": {"persist": True}}],
    },
}
GUIDE = "docs/developer-guide.md"
MAP = re.compile(r"(## What is where\n\n```\n)(.*?)(```)", re.S)  # as tests/test_readme.py reads it
TOY_MAP = {  # the guide's map: where each addition goes (after a whole line, or before one so begun), its lines
    "  egohumans/          sample, fetch, detect, track, score, report\n": "  toy/                score, report\n",
    "tests/              pytest suite": """\
  toy/                the toy benchmark
    benchmark.py        BENCHMARK: its settings, report section, compare
    settings.py         its params.yaml section, typed
    scoring.py          accuracy with a Wilson interval (the toy_score stage's work)
""",
}


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


def _add_to_map(guide: str) -> str:
    """The guide with the toy's lines in its map ("What is where"), each where TOY_MAP puts it."""
    block = MAP.search(guide).group(2)
    for after, lines in TOY_MAP.items():
        at = block.index(after) + (len(after) if after.endswith("\n") else 0)
        block = block[:at] + lines + block[at:]
    return MAP.sub(lambda found: found.group(1) + block + found.group(3), guide, count=1)


def add_toy_benchmark(root: Path) -> None:
    """The whole change, as the developer guide's "Adding a benchmark" says: its package, its stages under
    stages/toy/, its dvc.yaml stages (its report stage too), its params.yaml
    section (its report params too), and its lines in the guide's map."""
    for name, text in TOY_FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    params = yaml.safe_load((root / "params.yaml").read_text())
    (root / "params.yaml").write_text(yaml.safe_dump({**params, "toy": TOY_PARAMS}, sort_keys=False))
    pipeline = yaml.safe_load((root / "dvc.yaml").read_text())
    pipeline["stages"].update(TOY_STAGES)
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    (root / GUIDE).write_text(_add_to_map((root / GUIDE).read_text()))


def _at(root: Path, commit: str, path: str) -> str:
    return _git(root, "show", f"{commit}:{path}")


def assert_only_its_own_files_changed(root: Path, base: str) -> None:
    """What git says the change touched: its package, its stages, and in dvc.yaml, params.yaml and the guide only
    additions of its own; no shared module, no shared stage, no other section."""
    changed = _git(root, "diff", "--name-only", base, "HEAD").split()
    shared = [path for path in changed if not path.startswith(("egoeval/toy/", "stages/toy/"))]
    assert sorted(shared) == sorted(["dvc.yaml", "params.yaml", GUIDE]), changed
    assert sorted(path for path in changed if path not in shared) == sorted(TOY_FILES)

    before, after = (yaml.safe_load(_at(root, commit, "dvc.yaml"))["stages"] for commit in (base, "HEAD"))
    assert sorted(set(after) - set(before)) == sorted(TOY_STAGES) and set(before) <= set(after)
    assert {name: after[name] for name in before} == before, "a shared stage changed"

    before, after = (yaml.safe_load(_at(root, commit, "params.yaml")) for commit in (base, "HEAD"))
    assert {key: value for key, value in after.items() if key != "toy"} == before, "another section changed"

    before, after = (_at(root, commit, GUIDE) for commit in (base, "HEAD"))
    assert MAP.sub("", after) == MAP.sub("", before), "the guide changed outside its map"
    old, new = (MAP.search(text).group(2).splitlines() for text in (before, after))
    kept = iter(new)
    assert all(line in kept for line in old), "a line of the guide's map changed: only lines are added"


@pytest.mark.parametrize(
    ("also", "said"),
    [
        (lambda root: _append(root / "egoeval/report_page.py", "\n"), "egoeval/report_page.py"),
        (lambda root: _append_dep(root, "report", "egoeval/toy/benchmark.py"), "a shared stage changed"),
        (lambda root: _append_dep(root, "egonormia_report", "metrics/toy.json"), "a shared stage changed"),
        (lambda root: _append_dep(root, "params", "egoeval/toy"), "a shared stage changed"),
        (lambda root: _append(root / "stages/report.py", "# edited\n"), "stages/report.py"),
        (lambda root: _append(root / "params.yaml", "flows2: {}\n"), "another section changed"),
    ],
    ids=["shared module", "page stage", "other report stage", "params check", "shared stage module", "other section"],
)
def test_the_change_check_fails_when_more_than_the_benchmark_changes(
    tmp_path: Path, also: Callable[[Path], object], said: str
) -> None:
    """What the third-benchmark test holds the guide's steps to: the change as the guide says passes the check, and
    the same change with one edit to a shared module or stage, or to another section, fails it."""
    root = tmp_path / "repo"
    for name in (
        "dvc.yaml",
        "params.yaml",
        GUIDE,
        "egoeval/report_page.py",
        "stages/report.py",
    ):  # what the check reads
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, root / name)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    base = _git(root, "rev-parse", "HEAD").strip()
    add_toy_benchmark(root)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "a third benchmark")
    assert_only_its_own_files_changed(root, base)
    also(root)
    _git(root, "commit", "-qam", "and one edit more")
    with pytest.raises(AssertionError, match=re.escape(said)):
        assert_only_its_own_files_changed(root, base)


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def _append_dep(root: Path, stage: str, dep: str) -> None:
    pipeline = yaml.safe_load((root / "dvc.yaml").read_text())
    pipeline["stages"][stage]["deps"].append(dep)
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))


@pytest.mark.slow
def test_a_third_benchmark_is_its_own_package(reproduced: Path, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    copy_workspace(reproduced, root)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "reproduced", "--allow-empty")
    base = _git(root, "rev-parse", "HEAD").strip()
    add_toy_benchmark(root)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "a third benchmark, as the developer guide says")
    assert_only_its_own_files_changed(root, base)

    # the docs' checks hold on the copy: the guide's map names every module of the new package
    env = {key: value for key, value in tool_env().items() if not key.startswith("PYTEST")}
    readme = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_readme.py"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert readme.returncode == 0, readme.stdout[-3000:] + readme.stderr[-3000:]

    # its section is validated like the others: a bad value stops the run, naming the key
    good = (root / "params.yaml").read_text()
    (root / "params.yaml").write_text(good.replace("threshold: 0.35", "threshold: 35"))
    bad = dvc(root, "repro")
    assert bad.returncode != 0 and "toy.threshold = 35" in bad.stderr and "write 0.35" in bad.stderr, bad.stderr
    (root / "params.yaml").write_text(good)

    # only its stages, the params check and the page run; no other benchmark's stage re-runs
    run = dvc(root, "repro")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    ran = sorted(line.split("'")[1] for line in run.stdout.splitlines() if line.startswith("Running stage"))
    assert ran == ["params", "report", "toy_report", "toy_score"]
    assert json.loads((root / "metrics/toy.json").read_text())["all"]["accuracy"] == 60.0
    for info in pipeline_stages(root):  # its dvc.yaml entries declare what their commands import
        assert undeclared_code(root, info) == [], info.name

    page = (root / "reports/index.html").read_text()
    assert '<a href="#toy">Toy</a>' in page and '<h2 id="toy">Toy results</h2><p>toy accuracy 60.0 %</p>' in page
    assert "EgoNormia, EgoHumans and Toy results" in page and page.index('id="toy"') > page.index('id="egohumans-')
    rendered = _egoeval(root, "report", "--out", str(tmp_path / "page.html"))  # the same page, straight from the data
    assert rendered.returncode == 0 and (tmp_path / "page.html").read_text() == page, rendered.stderr

    # a report param of its own re-renders the page: its report stage is stale, then the page follows
    (root / "params.yaml").write_text(good.replace("title: Toy results", "title: Toy figures"))
    status = dvc(root, "status")
    stale = re.findall(r"^(\S+):$", status.stdout, re.M)
    assert status.returncode == 0 and sorted(stale) == ["params", "toy_report"], status.stdout
    run = dvc(root, "repro")
    ran = sorted(line.split("'")[1] for line in run.stdout.splitlines() if line.startswith("Running stage"))
    assert run.returncode == 0 and ran == ["params", "report", "toy_report"], run.stdout[-3000:] + run.stderr[-3000:]
    changed = (root / "reports/index.html").read_text()
    assert changed == page.replace('<h2 id="toy">Toy results</h2>', '<h2 id="toy">Toy figures</h2>') != page
    (root / "params.yaml").write_text(good)
    assert dvc(root, "repro").returncode == 0 and (root / "reports/index.html").read_text() == page

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
