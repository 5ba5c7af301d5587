"""Tracker sweeps the DVC way: queued experiments over a params grid, then `dvc exp show` lists their metrics."""

from __future__ import annotations

import csv
import io
import subprocess
import time
from pathlib import Path

import pytest
from conftest import copy_workspace, dvc

KEY = "egohumans.track.config.bytetrack.match_thresh"
IDF1 = "metrics/egohumans/bytetrack-gt.json:IDF1"  # a headline row's column (egoeval.headline)


@pytest.mark.slow
def test_a_two_point_sweep_with_dvc_exp(reproduced: Path, tmp_path: Path) -> None:
    root = copy_workspace(reproduced, tmp_path / "ws")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "the reproduced sample", "--allow-empty"], cwd=root, check=True)

    queued = dvc(root, "exp", "run", "--queue", "-S", f"{KEY}=0.5,0.95")
    assert queued.returncode == 0, queued.stdout + queued.stderr
    started = dvc(root, "queue", "start", "-j", "1")
    assert started.returncode == 0, started.stdout + started.stderr
    deadline = time.monotonic() + 900
    while True:
        status = dvc(root, "queue", "status").stdout
        if "Queued" not in status and "Running" not in status:
            break
        assert time.monotonic() < deadline, status
        time.sleep(2)
    assert status.count("Success") == 2, status + dvc(root, "queue", "logs", "-f").stdout

    shown = dvc(root, "exp", "show", "--csv", "--no-pager")
    assert shown.returncode == 0, shown.stderr
    rows = list(csv.DictReader(io.StringIO(shown.stdout)))
    swept = {row[KEY]: row for row in rows if row["Experiment"]}
    assert sorted(swept) == ["0.5", "0.95"], rows
    for column in (
        IDF1,
        "metrics/egohumans/bytetrack-gt.json:MOTA",
        "metrics/egohumans/egomotion-gt.json:HOTA",
    ):
        assert all(row[column] for row in swept.values()), column
    assert swept["0.5"][IDF1] != swept["0.95"][IDF1]  # the threshold reached the tracker
