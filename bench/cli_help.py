"""``egoeval --help`` and every subcommand's ``--help``, beside a bare ``python -c pass``, one run, interleaved.

Goal: each answers in at most 1 s of wall time on the 2-core machine. Also timed: importing the libraries the
subcommands' ``--help`` used to load at module top (pandas, numpy, scipy, pydantic): what the help no longer pays.
``python -m bench.cli_help OTHER_CHECKOUT`` adds the same commands run from another checkout of egoeval (its folder
first on PYTHONPATH), e.g. a worktree of the commit before, as rows "before: ...".
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import save
from egoeval.cli import commands

EGOEVAL = str(Path(sys.executable).with_name("egoeval"))  # the console script beside this interpreter
ROUNDS = 7
GOAL_S = 1.0


def _wall(argv: list[str], code: Path | None = None) -> float:
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=120)
    return time.perf_counter() - start


def run(before: Path | None = None) -> dict:
    rows = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "egoeval --help": [EGOEVAL, "--help"],
        **{f"egoeval {name} --help": [EGOEVAL, name, "--help"] for name in commands()},
        "import pandas, numpy, scipy, pydantic (no longer paid)": [
            sys.executable,
            "-c",
            "import pandas, numpy, scipy.optimize, pydantic",
        ],
    }
    runs = {label: (argv, None) for label, argv in rows.items()}
    if before is not None:
        runs |= {f"before: {label}": (argv, before) for label, argv in rows.items() if label.endswith("--help")}
    times: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(ROUNDS):  # interleaved: load on the machine falls on every row alike
        for label, (argv, code) in runs.items():
            times[label].append(_wall(argv, code))
    bare = statistics.median(times["python -c pass"])
    print(f"| command ({ROUNDS} rounds, interleaved) | median (s) | best (s) | worst (s) | median / `python -c pass` |")
    print("|---|---|---|---|---|")
    for label, walls in times.items():
        median = statistics.median(walls)
        print(f"| {label} | {median:.2f} | {min(walls):.2f} | {max(walls):.2f} | {median / bare:.1f}× |")
    helps = {label: max(walls) for label, walls in times.items() if label.startswith("egoeval")}
    slowest = max(helps, key=helps.__getitem__)
    print(f"\nslowest help (worst round): {slowest}, {helps[slowest]:.2f} s (goal <= {GOAL_S} s)")
    result = {"rounds": ROUNDS, "times_s": times, "goal_met": helps[slowest] <= GOAL_S, "load": os.getloadavg()}
    save("cli_help", result)
    return result


if __name__ == "__main__":
    run(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else None)
