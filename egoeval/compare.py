"""``egoeval compare METRICS_JSON``: reported numbers beside the published ones, for any registered benchmark.

The benchmark is the one dvc.yaml declares for that metrics file (``meta.benchmark``), else the file's stem; its
comparison and its own options live with it (``egoeval.core.benchmarks``: ``add_compare_arguments``, ``compare``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from egoeval.core.benchmarks import Benchmark, registry
from egoeval.core.errors import InputError
from egoeval.core.io.bounded import read_json
from egoeval.core.stage_shell import help_text
from egoeval.reported import read_metrics


def benchmark_of(path: Path, root: Path = Path(".")) -> str:
    """The benchmark a metrics file belongs to (dvc.yaml's ``meta.benchmark``, else the file name)."""
    from egoeval.dvc_project import benchmark_metrics, pipeline_stages

    try:
        for benchmark, files in benchmark_metrics(pipeline_stages(root)).items():
            if any((root / f).resolve() == path.resolve() for f in files):
                return benchmark
    except InputError:
        pass
    return path.stem


def _parser(benchmarks: list[Benchmark]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="egoeval compare", description=help_text(__doc__.splitlines()[0]))
    parser.add_argument("metrics", type=Path, help="a metrics file, e.g. metrics/egohumans.json")
    parser.add_argument("--params", type=Path, help="the params file (default: this folder's project's)")
    for benchmark in benchmarks:
        benchmark.add_compare_arguments(parser.add_argument_group(f"{benchmark.title} metrics"))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("metrics", type=Path, nargs="?")
    path = first.parse_known_args(argv)[0].metrics
    if path is None:  # --help, or no file: every benchmark's options are shown
        _parser(list(registry().values())).parse_args(argv)
    try:
        read_json(path)  # an unreadable file is said before anything else
        from egoeval.core.io.paths import project_root

        root = project_root()  # from a subfolder too, as DVC finds the project
        name = benchmark_of(path, root)
        own = registry().get(name)
        if own is None:
            raise InputError(path, f"no published numbers for benchmark {name!r} (known: {sorted(registry())})")
        metrics = read_metrics(path, own.check_metrics)  # an input like any other: every value checked
        parser = _parser([own])
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            theirs = [
                b.title for b in registry().values() if not _parser([b]).parse_known_args([str(path), *unknown])[1]
            ]
            said = f" (they are the {' and '.join(theirs)} options)" if theirs else ""
            parser.error(f"not an option for {own.title} metrics: {' '.join(unknown)}{said}")
        from egoeval.core.settings import load_settings, params_file  # pydantic: not for --help

        print(own.compare(metrics, load_settings(args.params or params_file(root)).section(own), args))
    except InputError as err:
        print(f"egoeval compare: {err}", file=sys.stderr)
        return 2
    return 0
