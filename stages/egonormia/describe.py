"""Stage egonormia_describe: the scene description each clip's pipeline setting is given.

``egonormia.describe.source``: ``dataset`` copies the pinned text; ``model`` asks ``egonormia.model`` given the
frames image. Output data/egonormia/descriptions.parquet: egoeval.egonormia.descriptions.
"""

from __future__ import annotations

from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage, stage_parser
from egoeval.egonormia.descriptions import write_descriptions
from egoeval.egonormia.settings import EgoNormiaSettings


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args(argv)
    return run_stage(
        lambda: write_descriptions(benchmark_settings("egonormia", EgoNormiaSettings)), benchmark="egonormia"
    )


if __name__ == "__main__":
    raise SystemExit(main())
