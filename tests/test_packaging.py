"""pyproject.toml says what the code needs."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shlex
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from conftest import REPO, copy_repo


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


def _probe_wheel(folder: Path, version: str) -> None:
    """A one-module wheel of ``egoeval-probe`` at ``version``, written into ``folder``."""
    info = f"egoeval_probe-{version}.dist-info"
    files = {
        "egoeval_probe/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: egoeval-probe\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).decode().rstrip('=')},"
        f"{len(text.encode())}"
        for name, text in files.items()
    ]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(folder / f"egoeval_probe-{version}-py3-none-any.whl", "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)


def _setup_install(venv: Path) -> tuple[str, str]:
    """`make setup`'s lines as `make -n` prints them for ``venv``: a fresh venv, pip upgraded and uv installed in it by
    the Makefile's line; returns its install line's python and script."""
    printed = subprocess.run(
        ["make", "-n", "-B", "setup", f"VENV={os.path.relpath(venv, REPO)}"],  # the Makefile's VENV is relative
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (upgrade,) = [line for line in printed.splitlines() if "pip install" in line and "--upgrade pip uv" in line]
    (install,) = [line for line in printed.splitlines() if ".ci/install.py" in line]
    python, script = shlex.split(install)[:2]
    assert Path(python).resolve() == (venv / "bin" / "python").resolve() and script == ".ci/install.py"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    upgraded = subprocess.run(shlex.split(upgrade), capture_output=True, text=True, timeout=600)
    if upgraded.returncode != 0:
        pytest.skip(f"no package index to install pip and uv from: {upgraded.stderr[-300:]}")
    return python, script


@pytest.mark.slow
def test_make_setup_installs_with_uv_from_the_package_sources_pip_is_set_up_with(tmp_path: Path) -> None:
    """`make setup`'s install line (``.ci/install.py``, as `make -n` prints it) hands pip's settings to uv: in a fresh
    venv, a package found only in pip's find-links (a PIP_* variable) installs at the version a constraint in pip's
    configuration file allows (its ``install`` section beats ``global``), no index asked."""
    python, script = _setup_install(tmp_path / "venv")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version in ("1.0", "2.0"):
        _probe_wheel(wheels, version)
    (tmp_path / "below-2.txt").write_text("egoeval-probe<2\n")
    (tmp_path / "pip.conf").write_text(
        f"[global]\nconstraint = /no/such/file\n[install]\nconstraint = {tmp_path}/below-2.txt\n"
    )
    env = {
        **os.environ,
        "PIP_CONFIG_FILE": str(tmp_path / "pip.conf"),
        "PIP_FIND_LINKS": str(wheels),
        "PIP_NO_INDEX": "1",
    }
    run = subprocess.run(
        [python, str(REPO / script), "egoeval-probe"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
    ).stdout.strip()
    package = Path(site) / "egoeval_probe"
    assert (package / "__init__.py").read_text() == "VERSION = '1.0'\n"


def test_the_makefiles_commands_write_bytecode_where_the_environment_says_not_to(tmp_path: Path) -> None:
    """`make setup` compiles no bytecode up front: the Makefile's commands write it on a module's first import, also
    under PYTHONDONTWRITEBYTECODE (else every process would compile torch and pandas again); outside make, the
    variable holds."""
    (tmp_path / "probe_module.py").write_text("VALUE = 1\n")
    command = f"python -c 'import sys; sys.path.insert(0, \"{tmp_path}\"); import probe_module'"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run(["sh", "-c", command], env=env, check=True, timeout=60)
    assert not (tmp_path / "__pycache__").exists()
    recipe = f"probe-bytecode: ; @{command}"
    run = subprocess.run(
        ["make", "-s", "--eval", recipe, "probe-bytecode"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert list((tmp_path / "__pycache__").glob("probe_module.*.pyc")), "make's command wrote no bytecode"


@pytest.mark.slow
def test_make_setup_installs_the_project_without_setuptools_editable_banner(tmp_path: Path) -> None:
    """`make setup`'s install line, the project alone (``--no-deps``) in a fresh venv: no "Editable installation"
    banner reaches the user; pip's plain editable install of the same project prints it (the check sees one)."""
    root = copy_repo(tmp_path / "repo")  # the build writes its files beside the project
    python, script = _setup_install(tmp_path / "venv")
    env = dict(os.environ)
    told = {}
    for name, command in (
        ("make", [python, str(REPO / script), "--no-deps", "--reinstall", "-e", str(root)]),
        ("plain", [python, "-m", "pip", "install", "--no-deps", "--force-reinstall", "-e", str(root)]),
    ):
        run = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
        if (
            run.returncode != 0
            and "setuptools" in run.stderr
            and ("No matching distribution" in run.stderr or "not found" in run.stderr)
        ):
            pytest.skip("no package index to build the project with (setuptools>=77)")
        assert run.returncode == 0, run.stderr[-3000:]
        told[name] = run.stdout + run.stderr
    assert "Editable installation" not in told["make"] and "!!" not in told["make"], told["make"][-3000:]
    assert "Editable installation" in told["plain"]
