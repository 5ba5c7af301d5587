"""Run every benchmark side by side in one process and print their tables (`make bench`)."""

from __future__ import annotations

import importlib
import sys

from bench import save

BENCHES = [
    "bench.frames",
    "bench.infer_throughput",
    "bench.batch_vs_online",
    "bench.score_tracks",
    "bench.official_protocol",
    "bench.trackers",
    "bench.placement",
    "bench.hostile_inputs",
    "bench.cli_help",
    "bench.audit",
    "bench.dvc_noop",
    "bench.scale_out",
]


def main(names: list[str]) -> int:
    results = {}
    for name in names or BENCHES:
        print(f"\n## {name}\n", flush=True)
        results[name] = importlib.import_module(name).run()
    save("all", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
