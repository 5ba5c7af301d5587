"""A no-op ``dvc repro`` (every stage up to date) on this workspace beside a bare DVC project with the same number of
stages (one tiny dep and out each, no params), interleaved rounds: what our dvc.yaml costs DVC beyond its own floor.

Needs a reproduced workspace (`make repro`). ``--frames N [N ...]`` also times copies of it whose EgoHumans sample
has N frames per sequence (18 cameras' worth per take: the data root grows, reproduced once before timing).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench import save
from egoeval.pipeline import pipeline_stages

ROOT = Path(__file__).resolve().parent.parent
DVC = str(Path(sys.executable).with_name("dvc"))
ROUNDS = 5
ENV = {**os.environ, "DVC_NO_ANALYTICS": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def bare_project(folder: Path, stages: int) -> Path:
    """A git + DVC project of ``stages`` chained stages, reproduced once."""
    for command in (["git", "init", "-q"], [DVC, "init", "-q"]):
        subprocess.run(command, cwd=folder, env=ENV, check=True)
    (folder / "input.txt").write_text("0\n")
    chain = {}
    for i in range(stages):
        source = "input.txt" if i == 0 else f"out{i - 1}.txt"
        chain[f"s{i}"] = {"cmd": f"cp {source} out{i}.txt", "deps": [source], "outs": [f"out{i}.txt"]}
    (folder / "dvc.yaml").write_text(yaml.safe_dump({"stages": chain}))
    subprocess.run([DVC, "repro", "-q"], cwd=folder, env=ENV, check=True)
    return folder


def _wall(root: Path) -> float:
    start = time.perf_counter()
    run = subprocess.run([DVC, "repro"], cwd=root, env=ENV, capture_output=True, text=True, check=True)
    if "Running stage" in run.stdout + run.stderr:
        raise RuntimeError(f"not a no-op in {root}: {run.stdout[-1000:]}")
    return time.perf_counter() - start


def grown_copy(folder: Path, frames: int) -> tuple[Path, int]:
    """A copy of this workspace whose EgoHumans sample has ``frames`` frames per sequence, reproduced; with the
    number of files in its data root."""
    copy = folder / f"frames-{frames}"
    ignore = shutil.ignore_patterns(".venv")
    shutil.copytree(ROOT, copy, symlinks=True, ignore=ignore)
    (copy / ".venv").symlink_to(ROOT / ".venv")
    params = yaml.safe_load((copy / "params.yaml").read_text())
    params["egohumans"]["sample"]["frames"] = frames
    (copy / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run([DVC, "repro", "-q"], cwd=copy, env=ENV, check=True)
    root = copy / params["egohumans"]["fetch"]["path"]
    return copy, sum(1 for path in root.rglob("*") if path.is_file())


def run(frames: list[int] | None = None) -> dict:
    stages = len(pipeline_stages(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        bare = bare_project(Path(tmp), stages)
        roots = {f"this workspace ({stages} stages)": ROOT, f"bare DVC project ({stages} stages)": bare}
        for count in frames or []:
            copy, files = grown_copy(Path(tmp), count)
            roots[f"this workspace, {count} frames per sequence ({files} files in the data root)"] = copy
        times: dict[str, list[float]] = {label: [] for label in roots}
        for _ in range(ROUNDS):
            for label, root in roots.items():
                times[label].append(_wall(root))
    floor = statistics.median(times[f"bare DVC project ({stages} stages)"])
    print(f"| no-op `dvc repro` ({ROUNDS} rounds, interleaved) | median (s) | best (s) | vs bare |")
    print("|---|---|---|---|")
    for label, walls in times.items():
        median = statistics.median(walls)
        print(f"| {label} | {median:.2f} | {min(walls):.2f} | {median / floor:.2f}× |")
    result = {"rounds": ROUNDS, "stages": stages, "times_s": times, "load": os.getloadavg()}
    save("dvc_noop", result)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, nargs="*", default=[], help="also time grown copies (frames/sequence)")
    run(parser.parse_args().frames)
