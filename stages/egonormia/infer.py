"""Stage egonormia_infer: ask every model (the one under evaluation and the baselines) every question.

Through the durable response cache, under ``egonormia.protocol``; output data/egonormia/responses.parquet, the
ledger beside the cache. What is asked, cached, retried and written: egoeval.egonormia.inference.
"""

from __future__ import annotations

from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage, stage_parser
from egoeval.egonormia.inference import write_responses
from egoeval.egonormia.settings import EgoNormiaSettings


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args(argv)
    return run_stage(lambda: write_responses(benchmark_settings("egonormia", EgoNormiaSettings)), benchmark="egonormia")


if __name__ == "__main__":
    raise SystemExit(main())
