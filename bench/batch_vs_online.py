"""Benchmark: the same EgoNormia requests sent online (``backend: openai``) and through the Batch API
(``backend: openai_batch``), wall time side by side, against the loopback server in its own process.

The official protocol, 3 settings x 3 calls per clip: online at a fixed latency per call and a concurrency; in
batches, one batch per round (3 rounds), the server answering each batch ``turnaround_s`` after it was created and
the client polling every ``poll_s``. With a zero turnaround this measures what the batch path itself costs (request
files, uploads, polls, reading and merging results, a discovery pass per round); the real API's turnaround is
minutes to 24 h per round, which then dominates. Run: ``python -m bench.batch_vs_online``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pandas as pd

from bench import save
from bench.infer_throughput import KEY_ENV, _dataset, _server
from egoeval.egonormia.inference import run_inference
from egoeval.egonormia.protocols import registry
from egoeval.egonormia.settings import InferSettings, ModelSpec

Dataset = tuple[Path, pd.DataFrame, pd.DataFrame, pd.DataFrame]  # frames folder, items, frames index, descriptions


def measure(backend: str, data: Dataset, latency_s: float, concurrency: int, poll_s: float) -> dict[str, Any]:
    """One run of ``backend`` with an empty cache: seconds, requests the server answered, batches created."""
    frames, items, index, descriptions = data
    with tempfile.TemporaryDirectory() as tmp, _server(latency_s) as url:
        root = Path(tmp)
        spec = ModelSpec(
            backend=backend,
            name="bench",
            base_url=url,
            api_key_env=KEY_ENV,
            concurrency=concurrency,
            timeout_s=30.0,
            max_retries=2,
            batch_poll_s=poll_s,
            batch_deadline_s=600.0,
        )
        params = InferSettings(
            settings=["blind", "pipeline", "video"], seed=0, max_failure_rate=0.0, cache_dir=str(root / "cache")
        )
        start = time.perf_counter()
        responses = run_inference(items, index, frames, descriptions, [spec], params, registry()["official"], root)
        elapsed = time.perf_counter() - start
        stats = httpx.get(f"{url}/stats").json()
    return {
        "backend": backend,
        "requests": int(stats["requests"]),
        "batches": int(stats["batches"]),
        "failed": int((responses["error"] != "").sum()),
        "seconds": round(elapsed, 3),
        "answers": responses.drop(columns=["backend"]).to_json(),
    }


def run(clips: int = 96, latency_s: float = 0.05, concurrency: int = 16, poll_s: float = 0.1) -> dict[str, Any]:
    """Both backends, one after the other in one run, on the same clips."""
    with tempfile.TemporaryDirectory() as tmp:
        data = (Path(tmp), *_dataset(Path(tmp), clips))
        online = measure("openai", data, latency_s, concurrency, poll_s)
        batch = measure("openai_batch", data, latency_s, concurrency, poll_s)
    result = {
        "clips": clips,
        "latency_s": latency_s,
        "concurrency": concurrency,
        "poll_s": poll_s,
        "turnaround_s": 0.0,
        "online": {k: v for k, v in online.items() if k != "answers"},
        "batch": {k: v for k, v in batch.items() if k != "answers"},
        "same_answers": online["answers"] == batch["answers"],
        "batch_over_online": round(batch["seconds"] / online["seconds"], 3),
    }
    print("| backend | requests | batches | seconds | vs online |")
    print("|---|---:|---:|---:|---:|")
    for name in ("online", "batch"):
        row = result[name]
        ratio = row["seconds"] / result["online"]["seconds"]
        print(f"| {row['backend']} | {row['requests']} | {row['batches']} | {row['seconds']:.2f} | {ratio:.2f}x |")
    print(f"same answers: {result['same_answers']}")
    save("batch_vs_online", result)
    return result


def main() -> int:
    result = run()
    return 0 if result["same_answers"] and not result["online"]["failed"] and not result["batch"]["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
