"""EgoNormia as the shared front-ends see it (egoeval.benchmarks): its settings, report sections, compare, audit."""

from __future__ import annotations

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


BENCHMARK = EgoNormia()
