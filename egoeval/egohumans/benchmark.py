"""EgoHumans as the shared front-ends see it (egoeval.core.benchmarks): settings, report sections, compare, audit."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from egoeval.core.benchmarks import Benchmark, ReportPart, ScaleOut

if TYPE_CHECKING:
    from egoeval.core.benchmarks import Findings
    from egoeval.egohumans.settings import EgoHumansSettings


class EgoHumans(Benchmark["EgoHumansSettings"]):
    name = "egohumans"
    title = "EgoHumans"
    order = 20
    commands: ClassVar[dict[str, tuple[str, str, str]]] = {
        "score-tracks": (
            "egoeval.egohumans.score_tracks",
            "main",
            "score MOTChallenge tracker output (CLEAR, Identity, HOTA)",
        )
    }

    def settings_model(self) -> type[EgoHumansSettings]:
        from egoeval.egohumans.settings import EgoHumansSettings

        return EgoHumansSettings

    def report(self, root: Path, settings: EgoHumansSettings) -> ReportPart:
        from egoeval.egohumans.report import report

        return report(root, settings)

    def check_metrics(self, metrics: Any, path: Path) -> None:
        from egoeval.egohumans.crossview import check_metrics_shape

        check_metrics_shape(metrics, path)

    def compare(self, metrics: Any, settings: EgoHumansSettings, args: argparse.Namespace) -> str:
        from egoeval.egohumans.published import compare_published

        return compare_published(metrics, settings.compare)

    def audit_report_kind(self, path: Path, data: Any) -> str | None:
        return "tracks" if data is None and any(path.glob("*.txt")) else None

    def audit_outputs(self, kind: str, path: Path) -> list[str] | None:
        from egoeval.egohumans.artifacts import TRACKS

        return [str(TRACKS / path.name)]  # a folder named after a run: that run's tracks (else: the metrics)

    def audit_compare(
        self,
        kind: str,
        path: Path,
        data: Any,
        work: Path,
        settings: EgoHumansSettings,
        tolerance: float,
        findings: Findings,
    ) -> None:
        from egoeval.egohumans.audit import compare_tracks

        compare_tracks(path, work, settings.score, tolerance, findings)

    def scale_out(self, form: str, settings: EgoHumansSettings) -> ScaleOut | None:
        from egoeval.egohumans.scale_out import ShardedDetection

        return ShardedDetection(settings) if form == "detect" else None


BENCHMARK = EgoHumans()
