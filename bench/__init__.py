"""Speed benchmarks (`make bench`): each module's ``run()`` measures, prints its markdown table, saves its result
with ``save`` and returns it.

The test machinery the benchmarks share (the loopback OpenAI server, the test videos, the official environment) lives
in tests/; importing ``bench`` puts tests/ first on ``sys.path``, as pytest does, so ``from openai_server import
...`` works from ``python -m bench.run``, ``make bench`` and the tests alike."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "out"  # results and generated benchmark data (git-ignored)
TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


def save(name: str, result: dict[str, Any]) -> None:
    """Write a benchmark's result to bench/out/<name>.json."""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
