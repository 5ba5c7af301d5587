"""Stage egonormia_score: predictions -> metrics/egonormia.json, its headline rows and the plots' tables.

What each output holds and which items count under each protocol: egoeval.egonormia.metrics (the math:
egoeval.egonormia.scoring).
"""

from __future__ import annotations

from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage, stage_parser
from egoeval.egonormia.metrics import write_metrics
from egoeval.egonormia.settings import EgoNormiaSettings


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args(argv)
    return run_stage(lambda: write_metrics(benchmark_settings("egonormia", EgoNormiaSettings)), benchmark="egonormia")


if __name__ == "__main__":
    raise SystemExit(main())
