"""EgoHumans as the shared front-ends see it (egoeval.benchmarks): its settings, report sections, compare, audit."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from egoeval.benchmarks import Benchmark, ReportPart


class EgoHumans(Benchmark):
    name = "egohumans"
    title = "EgoHumans"
    order = 20

    def settings_model(self) -> Any:
        from egoeval.egohumans.settings import EgoHumansSettings

        return EgoHumansSettings

    def report(self, root: Path, settings: Any) -> ReportPart:
        from egoeval.egohumans.report import report

        return report(root, settings)

    def compare(self, metrics: Any, settings: Any, args: argparse.Namespace) -> str:
        from egoeval.egohumans.published import compare_report

        return compare_report(metrics, settings.egohumans.compare)


BENCHMARK = EgoHumans()
