"""The ``egoeval`` console script as a CLI: every subcommand's ``--help`` loads no heavy library (so it answers at
once: bench/cli_help.py times it), ``--version``, a suggestion for a mistyped subcommand, help texts without raw
reStructuredText."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import forked
import pytest
from conftest import EGOEVAL, REPO, tool_env

import egoeval
from egoeval.cli import commands

# what `--help` must not import: each takes from a tenth of a second to seconds to load on a loaded machine
HEAVY = ["pandas", "numpy", "scipy", "matplotlib", "dvc", "torch", "prefect", "huggingface_hub", "pydantic", "cv2"]
PROBE = """
import contextlib, io, json, sys
from egoeval.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exit_:
        code = exit_.code
print(json.dumps({"code": code, "help": out.getvalue(), "loaded": sorted(sys.modules)}))
"""


def egoeval_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return forked.run([EGOEVAL, *args], Path.cwd(), tool_env(), timeout=120)


@pytest.mark.parametrize("name", ["", *commands()])
def test_help_loads_no_heavy_library_and_shows_no_raw_markup(name: str) -> None:
    args = [name, "--help"] if name else ["--help"]
    run = subprocess.run(
        [sys.executable, "-c", PROBE, *args], env=tool_env(), capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    probe = json.loads(run.stdout)
    assert probe["code"] in (0, None), probe
    assert probe["help"].startswith("usage: egoeval")
    heavy = sorted(set(HEAVY) & set(probe["loaded"]))
    assert heavy == [], f"egoeval {name} --help imports {heavy}"
    assert "``" not in probe["help"] and ":func:" not in probe["help"] and ":class:" not in probe["help"]


@pytest.mark.parametrize("name", list(commands()))
def test_console_script_help_of_every_command(name: str) -> None:
    run = egoeval_cli(name, "--help")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"usage: egoeval {name}") and run.stderr == ""


def test_version_is_the_package_metadata() -> None:
    run = egoeval_cli("--version")
    assert run.returncode == 0, run.stderr
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert run.stdout == f"egoeval {version('egoeval')}\n"
    assert version("egoeval") == pyproject == egoeval.__version__


@pytest.mark.bad_input
def test_mistyped_command_gets_a_suggestion() -> None:
    run = egoeval_cli("compar", "metrics/egonormia.json")
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines() == ["egoeval: unknown command 'compar': did you mean 'compare'? (egoeval --help)"]
    far = egoeval_cli("frobnicate")
    assert far.returncode == 2 and "unknown command 'frobnicate'" in far.stderr and "did you mean" not in far.stderr
    assert "commands:" in far.stderr  # nothing close: the list of commands


def test_check_params_runs_and_rejects(tmp_path: Path) -> None:
    ok = subprocess.run(
        [EGOEVAL, "check-params"], cwd=REPO, env=tool_env(), capture_output=True, text=True, timeout=120
    )
    assert (ok.returncode, ok.stdout) == (0, "params.yaml: ok\n"), ok.stderr
    bad = tmp_path / "params.yaml"
    bad.write_text((REPO / "params.yaml").read_text() + "\nnot_a_section: 1\n")
    run = egoeval_cli("check-params", str(bad))
    assert run.returncode == 2 and "not_a_section" in run.stderr and "Traceback" not in run.stderr


def test_commands_find_the_project_root_from_a_subfolder_as_dvc_does(tmp_path: Path) -> None:
    from egoeval.core.io.paths import project_root

    (tmp_path / ".dvc").mkdir()
    (tmp_path / "docs/deep").mkdir(parents=True)
    assert project_root(tmp_path / "docs/deep") == tmp_path / "docs/deep/../.."
    assert project_root(tmp_path) == tmp_path
    assert project_root(tmp_path / "docs/deep").resolve() == tmp_path.resolve()
    elsewhere = tmp_path.parent / f"{tmp_path.name}-none"
    elsewhere.mkdir()
    assert project_root(elsewhere) == elsewhere  # no project above: the folder itself (the command says so)

    def from_docs(*args: str) -> subprocess.CompletedProcess[str]:
        return forked.run([EGOEVAL, *args], REPO / "docs", tool_env(), timeout=120)

    checked = from_docs("check-params")
    assert (checked.returncode, checked.stdout) == (0, "../params.yaml: ok\n"), checked.stderr
    compared = from_docs("compare", "../metrics/egonormia.json")  # a path relative to where the user stands
    assert compared.returncode == 0 and "ours, ranked by" in compared.stdout, compared.stderr


@pytest.mark.slow
def test_report_and_estimate_run_from_a_subfolder(reproduced: Path, tmp_path: Path) -> None:
    docs = reproduced / "docs"
    out = os.path.relpath(tmp_path / "page.html", docs)  # relative to where the user stands, not to the project

    def from_docs(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([EGOEVAL, *args], cwd=docs, env=tool_env(), capture_output=True, text=True, timeout=600)

    report = from_docs("report", "--out", out)
    assert report.returncode == 0 and f"report: wrote {out}" in report.stdout, report.stderr[-3000:]
    assert "<html" in (tmp_path / "page.html").read_text() and not (docs / "page.html").exists()
    estimate = from_docs("estimate", "--json")
    assert estimate.returncode == 0 and json.loads(estimate.stdout), estimate.stderr[-3000:]
