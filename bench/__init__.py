"""Speed benchmarks (`make bench`): each module's ``run()`` measures, prints its markdown table, saves its result
with ``save`` and returns it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "out"  # results and generated benchmark data (git-ignored)


def save(name: str, result: dict[str, Any]) -> None:
    """Write a benchmark's result to bench/out/<name>.json."""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
