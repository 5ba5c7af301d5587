"""Benchmark: model-call throughput of the infer stage against a loopback server with a fixed latency.

With latency L and concurrency C no client can beat C / L calls per second; the goal is >= 90% of that
bound, measured end to end through ``run_inference`` (cache lookups and writes, limiter, retries machinery,
prompt building, image encoding, thread pool) with an empty cache. Run: ``python -m bench.infer_throughput``.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
from PIL import Image

from bench import TESTS, save
from egoeval.egonormia.inference import run_inference
from egoeval.egonormia.protocols import registry
from egoeval.egonormia.settings import InferSettings, ModelSpec

REPO = Path(__file__).resolve().parents[1]
GOAL = 0.9
KEY_ENV = "EGOEVAL_BENCH_KEY"  # the models' api_key_env: the loopback server takes any key; the backend needs one


def _dataset(root: Path, clips: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Synthetic clips with a 640x160 frames strip each (the size the frames stage makes from a short clip)."""
    items, index = [], []
    for i in range(clips):
        clip_id = f"bench-{i:04d}"
        items.append(
            {
                "id": clip_id,
                "behaviors": [f"Action {k} of {i}" for k in range(4)] + [""],
                "justifications": [f"Reason {k} of {i}" for k in range(4)] + [""],
            }
        )
        buffer = io.BytesIO()
        Image.effect_noise((640, 160), 40 + i % 50).convert("RGB").save(buffer, format="JPEG", quality=90)
        (root / f"{clip_id}.jpg").write_bytes(buffer.getvalue())
        index.append({"id": clip_id, "image": f"{clip_id}.jpg", "error": ""})
    descriptions = pd.DataFrame(
        {"id": [r["id"] for r in items], "description": "People talk in a kitchen.", "source": "dataset", "error": ""}
    )
    return pd.DataFrame(items), pd.DataFrame(index), descriptions


@contextmanager
def _server(latency_s: float) -> Iterator[str]:
    """The loopback server in a process of its own, as a real endpoint would be (not sharing our GIL)."""
    command = [sys.executable, str(TESTS / "openai_server.py"), "--latency-s", str(latency_s)]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    os.environ.setdefault(KEY_ENV, "sk-bench")
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(timeout=10)


def measure(clips: int = 96, latency_s: float = 0.05, concurrency: int = 16) -> dict[str, Any]:
    """3 settings x 3 calls per clip (96 clips: 864 calls); returns the measured and bound rates."""
    with tempfile.TemporaryDirectory() as tmp, _server(latency_s) as url:
        root = Path(tmp)
        items, index, descriptions = _dataset(root, clips)
        spec = ModelSpec(
            backend="openai",
            name="bench",
            base_url=url,
            api_key_env=KEY_ENV,
            concurrency=concurrency,
            timeout_s=30.0,
            max_retries=2,
        )
        params = InferSettings(
            settings=["blind", "pipeline", "video"], seed=0, max_failure_rate=0.0, cache_dir=str(root / "cache")
        )
        start = time.perf_counter()
        responses = run_inference(items, index, root, descriptions, [spec], params, registry()["official"])
        elapsed = time.perf_counter() - start
        stats = httpx.get(f"{url}/stats").json()
    calls = int(stats["requests"])
    achieved = calls / elapsed
    bound = concurrency / latency_s
    result = {
        "calls": calls,
        "failed": int((responses["error"] != "").sum()),
        "latency_s": latency_s,
        "concurrency": concurrency,
        "seconds": round(elapsed, 4),
        "calls_per_s": round(achieved, 2),
        "bound_calls_per_s": round(bound, 2),
        "ratio": round(achieved / bound, 4),
        "goal_ratio": GOAL,
        "peak_in_flight": int(stats["peak_in_flight"]),
        "passed": achieved / bound >= GOAL,
    }
    return result


def run(latencies: tuple[float, ...] = (0.05, 0.2)) -> dict[str, Any]:
    """One measurement per latency, side by side in one run: a short latency shows the per-call overhead."""
    results = {f"{latency * 1000:.0f}ms": measure(latency_s=latency) for latency in latencies}
    print_table(list(results.values()))
    save("infer_throughput", results)
    return results


def print_table(results: list[dict[str, Any]]) -> None:
    print("| calls | latency | concurrency | seconds | calls/s | bound calls/s | ratio | goal |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for result in results:
        print(
            f"| {result['calls']} | {result['latency_s'] * 1000:.0f} ms | {result['concurrency']} "
            f"| {result['seconds']:.2f} | {result['calls_per_s']:.1f} | {result['bound_calls_per_s']:.1f} "
            f"| {result['ratio']:.1%} | {result['goal_ratio']:.0%} |"
        )


def main() -> int:
    results = run()
    return 0 if all(r["passed"] and not r["failed"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
