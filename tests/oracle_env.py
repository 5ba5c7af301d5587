"""The official EgoHumans evaluation environment, built from PyPI for the tests, and a client for the oracle in it.

mmtracking's runtime requirements (the environment EgoHumans' numbers come from) are Python 3.8, NumPy 1.21.6,
pandas 1.3.5, SciPy 1.7.3, py-motmetrics 1.4.0 and ``lap``, whose only release then was 0.4.0. :func:`build` makes
that virtual environment with pyenv's (or the PATH's) Python 3.8, lap built from its sdist with Cython and
``--no-build-isolation``, under ``.egoeval-cache/oracle-env/<key of the pins>/`` of this checkout: built once,
reused by later runs. :class:`MotmetricsOracle` runs ``tests/motmetrics_oracle.py`` there as one long-lived
process. :func:`mot_dataset` turns MOTChallenge frames into the COCO-video annotation the official dataset class
reads (``area = w * h`` and ``conf == 0`` as ``ignore``, as the project's fetch stage writes them back).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
ORACLE = REPO / "tests" / "motmetrics_oracle.py"
PINS = [  # mmtracking's pins, and pinned versions of what they pull in, for Python 3.8
    "numpy==1.21.6",
    "pandas==1.3.5",
    "scipy==1.7.3",
    "motmetrics==1.4.0",
    "xmltodict==0.13.0",
    "python-dateutil==2.8.2",
    "pytz==2022.1",
    "six==1.16.0",
    "Cython==0.29.37",
    "setuptools==56.0.0",
    "wheel==0.37.1",
]
LAP = "lap==0.4.0"  # built from its sdist against the NumPy above
NETWORK_TROUBLE = re.compile(
    r"NewConnectionError|ConnectTimeoutError|ReadTimeoutError|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|ProxyError|Connection refused|SSLError"
)
REQUEST_TIMEOUT_S = 600
FRACTIONS = {"IDF1": "idf1", "IDP": "idp", "IDR": "idr", "MOTA": "mota", "MOTP": "motp"}
FRACTIONS |= {"Rcll": "recall", "Prcn": "precision"}
COUNTS = {"FP": "num_false_positives", "FN": "num_misses", "IDSW": "num_switches", "MT": "mostly_tracked"}
COUNTS |= {"PT": "partially_tracked", "ML": "mostly_lost", "Frag": "num_fragmentations"}
COUNTS |= {"GT_Dets": "num_objects", "Dets": "num_predictions"}


class OracleUnavailable(Exception):
    """The oracle environment cannot be built here (no Python 3.8, or PyPI out of reach): the reason."""


def find_python38() -> Path | None:
    """The newest pyenv 3.8.x, else a working ``python3.8`` on PATH (not a pyenv shim without 3.8 selected)."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    versions = sorted(root.glob("3.8.*/bin/python3.8"), key=lambda p: [int(x) for x in p.parts[-3].split(".")])
    on_path = shutil.which("python3.8")
    for python in [*reversed(versions), *([Path(on_path)] if on_path else [])]:
        probe = subprocess.run(
            [str(python), "-c", "import sys; print(sys.version_info[:2] == (3, 8))"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            return python
    return None


def env_dir(python: Path) -> Path:
    """The cache folder of one interpreter and set of pins."""
    version = subprocess.run(
        [str(python), "-c", "import sys; print(sys.version)"], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    key = hashlib.sha256(json.dumps([version, PINS, LAP]).encode()).hexdigest()[:16]
    return REPO / ".egoeval-cache" / "oracle-env" / key


def build() -> Path:
    """The oracle environment's interpreter, building the environment first where it is missing."""
    python = find_python38()
    if python is None:
        raise OracleUnavailable("no Python 3.8 (python3.8 on PATH or ~/.pyenv/versions/3.8.*) to build it with")
    target = env_dir(python)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time in this checkout
        if not (target / "complete").is_file():
            shutil.rmtree(target, ignore_errors=True)
            _run([str(python), "-m", "venv", str(target)])
            pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--retries", "2", "--timeout", "30"]
            _pip([*pip, "--only-binary", "numpy,pandas,scipy", *PINS])
            _pip([*pip, "--no-deps", "--no-build-isolation", "--no-binary", "lap", LAP])
            (target / "complete").write_text("\n".join([*PINS, LAP]) + "\n")
    return target / "bin" / "python"


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_REQUIRE", "VIRTUAL_ENV"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, command, done.stdout, done.stderr)
    return done


def _pip(command: list[str]) -> None:
    try:
        _run(command)
    except subprocess.CalledProcessError as err:
        output = f"{err.stdout}\n{err.stderr}"
        trouble = NETWORK_TROUBLE.search(output)
        if trouble:
            raise OracleUnavailable(f"PyPI is out of reach ({trouble.group(0)}): {' '.join(command[4:])}") from err
        raise RuntimeError(f"building the oracle environment failed: {' '.join(command)}\n{output[-4000:]}") from err


class MotmetricsOracle:
    """``tests/motmetrics_oracle.py`` in the oracle environment, one request at a time."""

    def __init__(self, python: Path) -> None:
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (open while the process runs)
        # as mmtracking's environment runs: no Python settings of ours, and OpenBLAS's default threads (egoeval sets
        # OPENBLAS_NUM_THREADS=1 for its own processes, egoeval/__init__.py; the reference keeps its authors' default)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k != "OPENBLAS_NUM_THREADS"}
        env["PYTHONNOUSERSITE"] = "1"
        self._process = subprocess.Popen(
            [str(python), "-u", str(ORACLE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=env,
            cwd=REPO,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put("")

    def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(payload) + "\n")
        self._process.stdin.flush()
        line = self._lines.get(timeout=REQUEST_TIMEOUT_S)
        if not line:
            self._stderr.seek(0)
            raise RuntimeError(f"the oracle process ended: {self._stderr.read()[-4000:]}")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"the oracle failed:\n{reply['error']}")
        return reply

    def versions(self) -> dict[str, str]:
        return self.request({"op": "versions"})

    def lapjv(self, matrices: list[np.ndarray]) -> list[list[int]]:
        """lap 0.4.0's row -> column choice for each matrix (``extend_cost=True``)."""
        return self.request({"op": "lapjv", "matrices": [m.tolist() for m in matrices]})["x"]

    def evaluate(self, dataset: dict[str, Any], results: dict[str, list[list[float]]]) -> dict[str, Any]:
        """EgoHumans' evaluation of a COCO-video annotation and tracker rows per image id (see the oracle): rates as
        fractions (NaN where py-motmetrics divides by zero), ``seconds`` and ``cpu_seconds`` its own compute time."""
        reply = self.request({"op": "evaluate", "dataset": dataset, "results": results})

        def numbers(row: dict[str, Any] | None) -> dict[str, float] | None:
            return None if row is None else {k: float(v) for k, v in row.items()}

        return {
            "sequences": {name: numbers(row) for name, row in reply["sequences"].items()},
            "COMBINED": numbers(reply["COMBINED"]),
            "seconds": reply["seconds"],
            "cpu_seconds": reply["cpu_seconds"],
        }

    def evaluate_mot(
        self,
        gt: dict[str, pd.DataFrame],
        pred: dict[str, pd.DataFrame],
        sizes: dict[str, tuple[int, int]] | None = None,
    ) -> dict[str, Any]:
        """:meth:`evaluate` on MOTChallenge frames (see :func:`mot_dataset`)."""
        return self.evaluate(*mot_dataset(gt, pred, sizes))

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._stderr.close()


def mot_dataset(
    gt: dict[str, pd.DataFrame], pred: dict[str, pd.DataFrame], sizes: dict[str, tuple[int, int]] | None = None
) -> tuple[dict[str, Any], dict[str, list[list[float]]]]:
    """A COCO-video annotation and tracker rows per image id from MOTChallenge frames (every row of ``gt``: conf 0
    marks ignore boxes): one video per sequence, one image per frame holding a ground-truth or tracker row, of size
    ``sizes[seq]`` (width, height; none: no size), boxes in file order within a frame. Tracker rows carry
    ``x2 = x + w`` computed in float64, as the project computes it."""
    sizes = sizes or {}
    dataset: dict[str, Any] = {"categories": [{"id": 1, "name": "pedestrian"}], "videos": [], "images": []}
    annotations: list[dict[str, Any]] = []
    results: dict[str, list[list[float]]] = {}
    for video_id, name in enumerate(sorted(gt), start=1):
        dataset["videos"].append({"id": video_id, "name": name})
        gt_rows, pred_rows = _rows_by_frame(gt[name]), _rows_by_frame(pred.get(name, gt[name].iloc[:0]))
        width, height = sizes.get(name, (None, None))
        for frame_id, frame in enumerate(sorted(gt_rows.keys() | pred_rows.keys())):
            image_id = len(dataset["images"]) + 1
            dataset["images"].append(
                {"id": image_id, "video_id": video_id, "frame_id": frame_id, "width": width, "height": height}
            )
            for tid, x, y, w, h, conf in gt_rows.get(frame, []):
                annotations.append(
                    {
                        "id": len(annotations) + 1,
                        "image_id": image_id,
                        "category_id": 1,
                        "instance_id": int(tid),
                        "bbox": [x, y, w, h],
                        "area": w * h,
                        "iscrowd": False,
                        "ignore": bool(np.trunc(conf) == 0),
                    }
                )
            results[str(image_id)] = [[int(t), x, y, x + w, y + h, c] for t, x, y, w, h, c in pred_rows.get(frame, [])]
    dataset["annotations"] = annotations
    return dataset, results


def _rows_by_frame(df: pd.DataFrame) -> dict[int, list[tuple]]:
    """Frame -> its rows ``(id, x, y, w, h, conf)`` as Python numbers, in file order."""
    out: dict[int, list[tuple]] = {}
    columns = [df[c].tolist() for c in ("frame", "id", "x", "y", "w", "h", "conf")]
    for frame, *row in zip(*columns, strict=True):
        out.setdefault(frame, []).append(tuple(row))
    return out


def assert_equal_to_oracle(ours: dict, theirs: dict) -> None:
    """Every sequence the official evaluation keeps, and OVERALL, to 1e-9 (NaN where py-motmetrics divides by 0)."""
    assert sorted(ours["sequences"]) == sorted(theirs["sequences"])
    pairs = [(ours["sequences"][n], theirs["sequences"][n], n) for n in theirs["sequences"]]
    if theirs["COMBINED"] is not None:
        pairs.append((ours["COMBINED"], theirs["COMBINED"], "COMBINED"))
    for mine, other, name in pairs:
        for key, field in FRACTIONS.items():
            expected = 100 * float(other[field])
            if math.isfinite(expected):
                assert mine[key] == pytest.approx(expected, abs=1e-9), (name, key)
            else:
                assert mine[key] is None or not math.isfinite(mine[key]), (name, key)
        for key, field in COUNTS.items():
            assert mine[key] == int(other[field]), (name, key)
