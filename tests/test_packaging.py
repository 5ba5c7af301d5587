"""pyproject.toml says what the code needs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import REPO, copy_repo

WARNING_FILTER = "ignore:Editable installation"  # the Makefile's -W for pip


def test_requires_python_is_the_oldest_python_the_code_runs_on() -> None:
    """vermin reads every module (the standard-library members and syntax it uses) for the oldest Python it needs;
    ``requires-python`` states that floor and no ceiling the code does not have."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    floor = re.fullmatch(r">=(3\.\d+)", declared)
    assert floor, f"requires-python {declared!r}: a floor only (>=3.x)"
    run = subprocess.run(
        [
            str(Path(sys.executable).with_name("vermin")),
            "--no-tips",
            "--eval-annotations",
            "--no-parse-comments",
            "egoeval",
            "stages",
            "flows",
            "bench",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    needed = re.search(r"Minimum required versions: (3\.\d+)", run.stdout)
    assert needed and needed.group(1) == floor.group(1), run.stdout[-2000:]
    ruff = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]["target-version"]
    assert ruff == "py" + floor.group(1).replace(".", "")


def test_the_package_ships_no_test_machinery() -> None:
    """Nothing under egoeval/ imports from tests/ or holds what only tests and benchmarks use: the loopback OpenAI
    server, the full-decode oracle, the test video writer and TrackEval-layout constructor live in tests/."""
    moved = ["openai_server", "OpenAIServer", "decode_all_frames", "write_h264", "from_timesteps"]
    importing_tests = re.compile(r"^\s*(from|import)\s+tests\b|sys\.path.*tests", re.MULTILINE)
    found = []
    for path in sorted((REPO / "egoeval").rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(REPO)
        found += [f"{where}: imports from tests/" for _ in importing_tests.finditer(text)]
        found += [f"{where}: {name}" for name in moved if re.search(rf"\b{name}\b", text)]
    assert not (REPO / "egoeval" / "openai_server.py").exists()
    assert found == []
    for name in ("openai_server.py", "videos.py"):
        assert (REPO / "tests" / name).is_file()


def test_the_benchmarks_import_the_test_machinery_outside_pytest() -> None:
    """``python -m bench.run`` (``make bench``) finds tests/openai_server.py and tests/videos.py: importing ``bench``
    puts tests/ on sys.path, with no help from pytest."""
    code = (
        "import bench.frames, bench.infer_throughput, bench.official_protocol, bench.scale_out; "
        "print(bench.scale_out.OpenAIServer.__module__, bench.frames.write_h264.__module__)"
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["openai_server", "videos"]


@pytest.mark.slow
def test_make_setup_installs_without_setuptools_editable_banner(tmp_path: Path) -> None:
    """`make setup`'s lines, as `make -n` prints them, in a fresh venv (pip upgraded, then the project only,
    ``--no-deps``): pip prints no "Editable installation" banner; the same line without the Makefile's warning
    filter does (the check sees one)."""
    root = copy_repo(tmp_path / "repo")  # pip writes its build files beside the project
    venv = tmp_path / "venv"
    printed = subprocess.run(
        ["make", "-n", "-B", "setup", f"VENV={venv}"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    (upgrade,) = [line for line in printed.splitlines() if "pip install" in line and "--upgrade pip" in line]
    (install,) = [line for line in printed.splitlines() if "pip install" in line and "-e " in line]
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    upgraded = subprocess.run([str(python), *shlex.split(upgrade)[1:]], capture_output=True, text=True, timeout=600)
    if upgraded.returncode != 0:
        pytest.skip(f"no package index to upgrade pip from: {upgraded.stderr[-300:]}")
    command = [*shlex.split(install)[1:], "--no-deps", "--force-reinstall"]  # what follows the venv's python
    told = {}
    for name, args in (("make", command), ("plain", [a for a in command if a not in ("-W", WARNING_FILTER)])):
        run = subprocess.run([str(python), *args], cwd=root, capture_output=True, text=True, timeout=600)
        if run.returncode != 0 and "setuptools" in run.stderr and "No matching distribution" in run.stderr:
            pytest.skip("no package index to build the project with (setuptools>=77)")
        assert run.returncode == 0, run.stderr[-3000:]
        told[name] = run.stdout + run.stderr
    assert "Editable installation" not in told["make"] and "!!" not in told["make"], told["make"][-3000:]
    assert "Editable installation" in told["plain"]
