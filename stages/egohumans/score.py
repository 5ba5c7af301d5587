"""Stage egohumans_score: CLEAR, Identity and HOTA metrics of every tracking run against the ground truth.

Under ``egohumans.score.protocol``; writes metrics/egohumans.json, its headline rows and the plots' tables (what each
holds: egoeval.egohumans.scoring).
"""

from __future__ import annotations

from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage, stage_parser
from egoeval.egohumans.scoring import write_scores
from egoeval.egohumans.settings import EgoHumansSettings


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args(argv)
    return run_stage(lambda: write_scores(benchmark_settings("egohumans", EgoHumansSettings)), benchmark="egohumans")


if __name__ == "__main__":
    raise SystemExit(main())
