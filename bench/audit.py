"""``egoeval audit`` on the sample: every stage re-derived from the pinned inputs (``--full``, as the audit ran before
issue 30) beside the default (only the stages writing what the reports are compared with re-run; the unchanged
stages above them give their pinned outputs), for the whole sample, metrics/egohumans.json alone and one tracker
folder; wall time and CPU time (the audit and every stage it ran), interleaved rounds.

Needs a reproduced workspace whose dvc.lock matches its code (`make repro`): the audit re-derives from the pinned
inputs in DVC's cache, and reuses only stages DVC finds unchanged. ``python -m bench.audit [ROOT]`` (default: this
repository).
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import save

ROOT = Path(__file__).resolve().parent.parent
EGOEVAL = str(Path(sys.executable).with_name("egoeval"))
RUN = "bytetrack-file"  # a tracking run of the sample
ROUNDS = 2


def _timed(root: Path, reported: list[str], options: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one audit; CPU counts the audit and every stage it ran."""
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run = subprocess.run([EGOEVAL, "audit", *reported, *options], cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        raise RuntimeError(f"egoeval audit {' '.join(reported)} did not reproduce: {run.stdout[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run(root: Path = ROOT) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="bench-audit-")) / RUN  # a copy outside: the audit's report is a folder
    shutil.copytree(root / "data/egohumans/tracks" / RUN, folder)
    targets = {
        "the sample (both metrics files)": ["metrics/egonormia.json", "metrics/egohumans.json"],
        "metrics/egohumans.json": ["metrics/egohumans.json"],
        f"one tracker folder ({RUN}/)": [str(folder)],
    }
    modes = {"`--full` (as before)": ["--full"], "default": []}
    times: dict[str, dict[str, list[tuple[float, float]]]] = {t: {m: [] for m in modes} for t in targets}
    for _ in range(ROUNDS):
        for target, reported in targets.items():
            for mode, options in modes.items():
                times[target][mode].append(_timed(root, reported, options))
    shutil.rmtree(folder.parent)
    print(f"| `egoeval audit` ({ROUNDS} rounds, interleaved) | mode | median wall (s) | median CPU (s) |")
    print("|---|---|---|---|")
    for target, by_mode in times.items():
        for mode, runs in by_mode.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"| {target} | {mode} | {wall:.1f} | {cpu:.1f} |")
    result = {"rounds": ROUNDS, "times_s": times, "cpus": os.cpu_count(), "load": os.getloadavg()}
    save("audit", result)
    return result


if __name__ == "__main__":
    run(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT)
