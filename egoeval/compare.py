"""``egoeval compare METRICS_JSON``: reported numbers beside the published ones, for either benchmark.

The benchmark is the one dvc.yaml declares for that metrics file (``meta.benchmark``), else the file's stem; each
benchmark's half lives with its code (``compare_report(metrics, params, **options) -> str``). EgoNormia takes four
options: ``--dataset`` (default ``egonormia.fetch.dataset``), ``--split`` (the published split, default
``egonormia.fetch.split``, the one the metrics were run on), ``--table`` (a bundled table other than the primary one)
and ``--map OURS=PUBLISHED`` (beside ``published_as`` in params.yaml).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from egoeval.errors import InputError
from egoeval.io import PARAMS_FILE, read_json
from egoeval.settings import load_settings

HANDLERS = {"egohumans": "egoeval.egohumans.published", "egonormia": "egoeval.egonormia.published"}


def benchmark_of(path: Path, root: Path = Path(".")) -> str:
    """The benchmark a metrics file belongs to (dvc.yaml's ``meta.benchmark``, else the file name)."""
    from egoeval.pipeline import benchmark_metrics, pipeline_stages

    try:
        for benchmark, files in benchmark_metrics(pipeline_stages(root)).items():
            if any((root / f).resolve() == path.resolve() for f in files):
                return benchmark
    except InputError:
        pass
    return path.stem


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="egoeval compare", description=__doc__.splitlines()[0])
    parser.add_argument("metrics", type=Path, help="a metrics file, e.g. metrics/egohumans.json")
    parser.add_argument("--params", type=Path, default=PARAMS_FILE, help="params.yaml (default: ./params.yaml)")
    parser.add_argument("--dataset", help="EgoNormia: egonormia or ood_robot (default: egonormia.fetch.dataset)")
    parser.add_argument("--split", choices=["full", "verified"], help="EgoNormia: default egonormia.fetch.split")
    parser.add_argument("--table", help="EgoNormia: a bundled table by name (default: the primary one)")
    parser.add_argument("--map", action="append", default=[], metavar="OURS=PUBLISHED", help="EgoNormia: a name map")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    options: dict[str, object] = {}
    for key in ("dataset", "split", "table"):
        if getattr(args, key):
            options[key] = getattr(args, key)
    if args.map:
        if any("=" not in item for item in args.map):
            parser.error("--map takes OURS=PUBLISHED")
        options["mapping"] = dict(item.split("=", 1) for item in args.map)
    try:
        metrics = read_json(args.metrics)
        benchmark = benchmark_of(args.metrics)
        if benchmark not in HANDLERS:
            raise InputError(
                args.metrics, f"no published numbers for benchmark {benchmark!r} (known: {sorted(HANDLERS)})"
            )
        try:
            handler = importlib.import_module(HANDLERS[benchmark])
        except ModuleNotFoundError:
            raise InputError(args.metrics, f"no published numbers for {benchmark} yet") from None
        if options and benchmark != "egonormia":
            raise InputError(
                args.metrics, f"--dataset, --split, --table and --map are EgoNormia options, not {benchmark}'s"
            )
        print(handler.compare_report(metrics, load_settings(args.params).model_dump(), **options))
    except InputError as err:
        print(f"egoeval compare: {err}", file=sys.stderr)
        return 2
    return 0
