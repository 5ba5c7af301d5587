"""``egoeval audit`` of both benchmarks' metrics on this workspace: stages re-run one at a time (``--jobs 1``, how
the audit ran before) beside side by side (the default, one per CPU), interleaved rounds.

Needs a reproduced workspace (`make repro`): the audit re-derives from the pinned inputs in DVC's cache.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import save

ROOT = Path(__file__).resolve().parent.parent
EGOEVAL = str(Path(sys.executable).with_name("egoeval"))
REPORTED = ["metrics/egonormia.json", "metrics/egohumans.json"]
ROUNDS = 2


def _wall(jobs: list[str]) -> float:
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    start = time.perf_counter()
    run = subprocess.run([EGOEVAL, "audit", *REPORTED, *jobs], cwd=ROOT, env=env, capture_output=True, text=True)
    if run.returncode not in (0, 1):  # 1: a difference (e.g. an edited workspace) still timed the same work
        raise RuntimeError(f"egoeval audit failed: {run.stderr[-2000:]}")
    return time.perf_counter() - start


def run() -> dict:
    rows = {"--jobs 1 (one stage at a time)": ["--jobs", "1"], f"default ({os.cpu_count()} CPUs)": []}
    times: dict[str, list[float]] = {label: [] for label in rows}
    for _ in range(ROUNDS):
        for label, jobs in rows.items():
            times[label].append(_wall(jobs))
    serial = statistics.median(next(iter(times.values())))
    print(f"| `egoeval audit {' '.join(REPORTED)}` ({ROUNDS} rounds, interleaved) | median (s) | vs one at a time |")
    print("|---|---|---|")
    for label, walls in times.items():
        median = statistics.median(walls)
        print(f"| {label} | {median:.1f} | {serial / median:.2f}× |")
    result = {"rounds": ROUNDS, "times_s": times, "cpus": os.cpu_count(), "load": os.getloadavg()}
    save("audit", result)
    return result


if __name__ == "__main__":
    run()
