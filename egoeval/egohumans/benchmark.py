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
        from egoeval.egohumans.published import compare_published

        return compare_published(metrics, settings.egohumans.compare)

    def audit_report_kind(self, path: Path, data: Any) -> str | None:
        return "tracks" if data is None and any(path.glob("*.txt")) else None

    def audit_compare(self, kind: str, path: Path, data: Any, work: Path, tolerance: float, findings: Any) -> None:
        from egoeval.egohumans.audit import compare_tracks

        compare_tracks(path, work, tolerance, findings)


BENCHMARK = EgoHumans()
