"""EgoNormia as the shared front-ends see it (egoeval.benchmarks): its settings, report sections, compare, audit."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from egoeval.benchmarks import Benchmark, ReportPart


class EgoNormia(Benchmark):
    name = "egonormia"
    title = "EgoNormia"
    order = 10

    def settings_model(self) -> Any:
        from egoeval.egonormia.settings import EgoNormiaSettings

        return EgoNormiaSettings

    def report(self, root: Path, settings: Any) -> ReportPart:
        from egoeval.egonormia.report import report

        return report(root, settings)

    def add_compare_arguments(self, parser: Any) -> None:
        parser.add_argument("--dataset", help="egonormia or ood_robot (default: egonormia.fetch.dataset)")
        parser.add_argument(
            "--split", choices=["full", "verified"], help="the published split (default: egonormia.fetch.split)"
        )
        parser.add_argument("--table", help="a bundled table by name (default: the primary one)")
        parser.add_argument("--map", action="append", default=[], metavar="OURS=PUBLISHED", help="a model name map")

    def compare(self, metrics: Any, settings: Any, args: argparse.Namespace) -> str:
        from egoeval.egonormia.published import compare_report
        from egoeval.errors import InputError

        if any("=" not in item for item in args.map):
            raise InputError(args.metrics, "--map takes OURS=PUBLISHED")
        mapping = dict(item.split("=", 1) for item in args.map)
        return compare_report(metrics, settings.egonormia, args.dataset, mapping, args.split, args.table)


BENCHMARK = EgoNormia()
