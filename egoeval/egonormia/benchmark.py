"""EgoNormia as the shared front-ends see it (egoeval.core.benchmarks): settings, report sections, compare, audit."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from egoeval.core.benchmarks import AnswerOutput, Benchmark, ReportPart, ScaleOut

if TYPE_CHECKING:
    from egoeval.core.benchmarks import Findings
    from egoeval.egonormia.settings import EgoNormiaSettings


class EgoNormia(Benchmark["EgoNormiaSettings"]):
    name = "egonormia"
    title = "EgoNormia"
    order = 10
    commands: ClassVar[dict[str, tuple[str, str, str]]] = {
        "score-norms": (
            "egoeval.egonormia.rescore",
            "main",
            "rescore EgoNormia predictions in the official eval-JSON layout",
        ),
        "estimate": (
            "egoeval.egonormia.estimate",
            "main",
            "the calls, tokens and cost the next EgoNormia inference would take",
        ),
        "show": (
            "egoeval.egonormia.clip_log",
            "main",
            "one EgoNormia clip's log: the messages sent, raw replies, parsed answers, gold",
        ),
    }

    def settings_model(self) -> type[EgoNormiaSettings]:
        from egoeval.egonormia.settings import EgoNormiaSettings

        return EgoNormiaSettings

    def report(self, root: Path, settings: EgoNormiaSettings) -> ReportPart:
        from egoeval.egonormia.report import report

        return report(root, settings)

    def add_compare_arguments(self, parser: Any) -> None:
        parser.add_argument("--dataset", help="egonormia or ood_robot (default: egonormia.fetch.dataset)")
        parser.add_argument(
            "--split", choices=["full", "verified"], help="the published split (default: egonormia.fetch.split)"
        )
        parser.add_argument("--table", help="a bundled table by name (default: the primary one)")
        parser.add_argument("--map", action="append", default=[], metavar="OURS=PUBLISHED", help="a model name map")
        parser.add_argument("--published", action="store_true", help="also list the published table, ranked")
        parser.add_argument(
            "--models",
            nargs=2,
            metavar=("A", "B"),
            help="instead: A against B, paired, clip by clip (plots/egonormia/paired.csv: tests, intervals, gains)",
        )

    def check_metrics(self, metrics: Any, path: Path) -> None:
        from egoeval.egonormia.published import check_metrics_shape

        check_metrics_shape(metrics, path)

    def compare(self, metrics: Any, settings: EgoNormiaSettings, args: argparse.Namespace) -> str:
        from egoeval.core.errors import InputError
        from egoeval.egonormia.published import compare_report

        if args.models:
            from egoeval.egonormia.artifacts import PAIRED_FILE
            from egoeval.egonormia.paired import compare_models

            return compare_models(PAIRED_FILE, metrics, settings, *args.models)
        if any("=" not in item for item in args.map):
            raise InputError(args.metrics, "--map takes OURS=PUBLISHED")
        mapping = dict(item.split("=", 1) for item in args.map)
        return compare_report(metrics, settings, args.dataset, mapping, args.split, args.table, args.published)

    def answer_outputs(self) -> list[AnswerOutput]:
        from egoeval.egonormia.artifacts import DESCRIPTIONS, RESPONSES

        return [AnswerOutput(str(RESPONSES), "response"), AnswerOutput(str(DESCRIPTIONS), "description")]

    def response_cache_dir(self, settings: EgoNormiaSettings) -> str | None:
        return settings.infer.cache_dir

    def explain_output(self, path: str, pinned: Path, derived: Path) -> list[str]:
        from egoeval.egonormia.artifacts import PREDICTIONS
        from egoeval.egonormia.audit import explain_predictions

        return explain_predictions(pinned, derived) if path == str(PREDICTIONS) else []

    def audit_report_kind(self, path: Path, data: Any) -> str | None:
        from egoeval.egonormia.audit import is_eval_json

        return "eval-json" if isinstance(data, dict) and is_eval_json(data) else None

    def audit_outputs(self, kind: str, path: Path) -> list[str] | None:
        from egoeval.egonormia.artifacts import EVAL_JSON

        return [str(EVAL_JSON)]  # an eval-JSON is compared with the re-derived one

    def audit_compare(
        self,
        kind: str,
        path: Path,
        data: Any,
        work: Path,
        settings: EgoNormiaSettings,
        tolerance: float,
        findings: Findings,
    ) -> None:
        from egoeval.egonormia.audit import compare_eval_json

        compare_eval_json(path, data, work, tolerance, findings)

    def scale_out(self, form: str, settings: EgoNormiaSettings) -> ScaleOut | None:
        from egoeval.egonormia.scale_out import ShardedInference

        return ShardedInference(settings) if form == "infer" else None


BENCHMARK = EgoNormia()
