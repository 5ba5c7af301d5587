"""Stage egohumans_sample: the bundled synthetic multi-view sample, generated deterministically.

What it holds and how it is made: egoeval.egohumans.sample. Written to data/egohumans/sample.
"""

from __future__ import annotations

from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage, stage_parser
from egoeval.egohumans.artifacts import SAMPLE
from egoeval.egohumans.sample import generate_sample
from egoeval.egohumans.settings import EgoHumansSettings


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args(argv)
    return run_stage(
        lambda: generate_sample(SAMPLE, benchmark_settings("egohumans", EgoHumansSettings).sample),
        benchmark="egohumans",
    )


if __name__ == "__main__":
    raise SystemExit(main())
