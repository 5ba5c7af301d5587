"""Where sharding pays: each sharded form (``python -m flows.shard``) beside its single-process stage on the same work,
and what any sharded run pays before its first shard (a temporary Prefect server, a Dask LocalCluster), measured in
one run on this machine. Tracking and scoring have no sharded form; their single-process stage times are measured
beside that fixed cost.

Needs a reproduced workspace (`make repro`); works in a copy of it. EgoNormia inference asks a loopback endpoint
(``LATENCY_S`` per call, ``concurrency: CONCURRENCY``, one budget for all shards); YOLO detection runs the untrained
yolo11n architecture at ``imgsz`` 640 on ``DETECT_SEQUENCES`` sequences (the compute of real weights; no download).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml
from openai_server import OpenAIServer

from bench import save

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
KEY_ENV = "EGOEVAL_BENCH_KEY"
LATENCY_S = 0.2
CONCURRENCY = 8
DETECT_SEQUENCES = 2
SHARDS = 2
ROUNDS = 2
COPIED = ("dvc.yaml", "params.yaml", "egoeval", "stages", "flows", "data")


def _env(prefect_home: Path, api_url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env |= {"PREFECT_HOME": str(prefect_home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", KEY_ENV: "sk-bench"}
    env |= {"PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180", "DVC_NO_ANALYTICS": "1"}
    env["PATH"] = os.pathsep.join([str(Path(PYTHON).parent), env.get("PATH", "")])
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return env


def _wall(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    run = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed in {cwd}: {run.stdout[-1500:]}{run.stderr[-1500:]}")
    return time.perf_counter() - start


Setup = dict[str, bytes]  # file under the copy -> its content for one kind of run


def workspace(folder: Path, server_url: str) -> tuple[Setup, Setup]:
    """A copy of the reproduced workspace (a DVC project without git) and two set-ups of it: as it is, and for the
    sharded forms' runs (the loopback endpoint as the model, the YOLO mode on, ``DETECT_SEQUENCES`` sequences)."""
    folder.mkdir(parents=True)
    for name in COPIED:
        source = ROOT / name
        copy = shutil.copytree if source.is_dir() else shutil.copy2
        copy(source, folder / name, **({"symlinks": True} if source.is_dir() else {}))
    subprocess.run([str(Path(PYTHON).with_name("dvc")), "init", "-q", "--no-scm"], cwd=folder, check=True)
    original = (folder / "params.yaml").read_text()
    params = yaml.safe_load(original)
    model = params["egonormia"]["model"]
    model |= {"backend": "openai", "name": "loopback-vlm", "base_url": server_url, "api_key_env": KEY_ENV}
    model |= {"concurrency": CONCURRENCY, "max_retries": 0}
    params["egonormia"]["baselines"] = []
    params["egohumans"]["detect"] |= {"modes": ["gt", "file", "yolo"], "yolo_weights": "arch-only", "yolo_imgsz": 640}
    images = "data/egohumans/fetched/images.parquet"
    table = pd.read_parquet(folder / images)
    kept = table[table["sequence"].isin(sorted(table["sequence"].unique())[:DETECT_SEQUENCES])]
    as_is = {"params.yaml": original.encode(), images: (folder / images).read_bytes()}
    sharding = {"params.yaml": yaml.safe_dump(params, sort_keys=False).encode(), images: kept.to_parquet(index=False)}
    return as_is, sharding


def use(folder: Path, setup: Setup) -> None:
    for name, content in setup.items():
        (folder / name).write_bytes(content)


def _fresh_cache(folder: Path) -> None:
    shutil.rmtree(folder / ".egoeval-cache", ignore_errors=True)  # every inference run pays for its calls


def fixed_costs(env: dict[str, str], cwd: Path) -> dict[str, float]:
    """What a sharded run pays before any shard: a temporary Prefect server and a 2-worker LocalCluster."""
    server = "from prefect import flow\n@flow\ndef f():\n    return 1\nf()"
    cluster = (
        "from distributed import Client, LocalCluster\n"
        f"with LocalCluster(n_workers={SHARDS}, threads_per_worker=1, dashboard_address=':0') as c, Client(c) as k:\n"
        "    k.submit(sum, [1]).result()"
    )
    return {
        "prefect temporary server + empty flow": _wall([PYTHON, "-c", server], cwd, env),
        f"LocalCluster of {SHARDS} workers, one task": _wall([PYTHON, "-c", cluster], cwd, env),
    }


def run() -> dict:
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-out-") as tmp, OpenAIServer(latency_s=LATENCY_S) as server:
        folder = Path(tmp) / "repo"
        as_is, sharding = workspace(folder, server.url)
        env = _env(Path(tmp) / "prefect")
        work = {
            "EgoNormia inference": (
                [PYTHON, "-m", "stages.egonormia.infer"],
                [PYTHON, "-m", "flows.shard", "egonormia_infer", "--shards", str(SHARDS)],
            ),
            f"EgoHumans YOLO detection ({DETECT_SEQUENCES} sequences)": (
                [PYTHON, "-m", "stages.egohumans.detect", "--mode", "yolo"],
                [PYTHON, "-m", "flows.shard", "egohumans_detect@yolo", "--shards", str(SHARDS)],
            ),
        }
        single_only = {
            "EgoHumans tracking (bytetrack, gt detections, whole sample)": [
                PYTHON,
                *("-m", "stages.egohumans.track", "--tracker", "bytetrack", "--mode", "gt"),
            ],
            "EgoHumans scoring (whole sample)": [PYTHON, "-m", "stages.egohumans.score"],
            "EgoNormia scoring": [PYTHON, "-m", "stages.egonormia.score"],
        }
        calls_before = len(server.requests)
        for _ in range(ROUNDS):
            use(folder, sharding)
            for label, (single, sharded) in work.items():
                _fresh_cache(folder)
                rows.setdefault(f"{label}: one process", []).append(_wall(single, folder, env))
                _fresh_cache(folder)
                rows.setdefault(f"{label}: {SHARDS} shards on a LocalCluster", []).append(_wall(sharded, folder, env))
            use(folder, as_is)
            for label, command in single_only.items():
                rows.setdefault(f"{label}: one process (no sharded form)", []).append(_wall(command, folder, env))
            for label, seconds in fixed_costs(env, folder).items():
                rows.setdefault(f"fixed cost of a sharded run: {label}", []).append(seconds)
        calls = (len(server.requests) - calls_before) // (2 * ROUNDS)
        peak = server.peak_in_flight
    print(f"| work ({ROUNDS} rounds, interleaved) | median (s) | sharded / one process |")
    print("|---|---|---|")
    medians = {label: statistics.median(times) for label, times in rows.items()}
    for label, median in medians.items():
        single = medians.get(label.replace(f"{SHARDS} shards on a LocalCluster", "one process"))
        ratio = f"{single / median:.2f}× as fast" if single and "shards" in label else ""
        print(f"| {label} | {median:.1f} | {ratio} |")
    print(f"\ninference: {calls} calls per run at {LATENCY_S} s, concurrency {CONCURRENCY}; peak in flight {peak}")
    result = {"rounds": ROUNDS, "times_s": rows, "calls_per_run": calls, "peak_in_flight": peak}
    result |= {"cpus": os.cpu_count(), "load": os.getloadavg()}
    save("scale_out", result)
    return result


if __name__ == "__main__":
    run()
