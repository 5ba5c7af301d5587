"""``egoeval compare METRICS``: our numbers beside the published ones, for either benchmark.

Dispatches on the metrics file's benchmark (dvc.yaml ``meta.benchmark`` of the stage that writes it, else the
file's name); each benchmark's half lives with its code (``COMPARERS``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from egoeval.io import PARAMS_FILE, InputError, load_params
from egoeval.pipeline import benchmark_metrics, pipeline_stages


def _egonormia(metrics: dict[str, Any], args: argparse.Namespace) -> list[str]:
    from egoeval.egonormia.published import PUBLISHED_FILE, comparison_lines, load_published, mapping_from_params

    params = load_params("egonormia", path=args.params) if Path(args.params).is_file() else {}
    mapping = mapping_from_params(params) if params else {}
    mapping |= dict(item.split("=", 1) for item in args.map)
    dataset = args.dataset or params.get("fetch", {}).get("dataset", "egonormia")
    return comparison_lines(metrics, load_published(args.published or PUBLISHED_FILE), dataset, mapping)


COMPARERS = {"egonormia": _egonormia}


def benchmark_of(path: Path) -> str:
    """The benchmark whose stages write ``path`` (dvc.yaml), else the file's stem."""
    try:
        declared = benchmark_metrics(pipeline_stages("."))
    except Exception:
        declared = {}
    for benchmark, files in declared.items():
        if any(Path(f).resolve() == path.resolve() for f in files):
            return benchmark
    return path.stem


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="egoeval compare", description=__doc__.splitlines()[0])
    parser.add_argument("metrics", type=Path)
    parser.add_argument("--params", default=str(PARAMS_FILE), help="params.yaml with the published_as mapping")
    parser.add_argument("--published", type=Path, help="published figures file (default: the bundled one)")
    parser.add_argument("--dataset", help="EgoNormia: egonormia or ood_robot (default: egonormia.fetch.dataset)")
    parser.add_argument("--map", action="append", default=[], metavar="OURS=PUBLISHED", help="extra name mapping")
    args = parser.parse_args(argv)
    try:
        metrics = json.loads(args.metrics.read_text())
        benchmark = benchmark_of(args.metrics)
        if benchmark not in COMPARERS:
            raise InputError(args.metrics, f"no published figures for benchmark {benchmark!r}")
        if any("=" not in item for item in args.map):
            raise InputError(PARAMS_FILE, "--map takes OURS=PUBLISHED")
        lines = COMPARERS[benchmark](metrics, args)
    except (OSError, json.JSONDecodeError, InputError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0
