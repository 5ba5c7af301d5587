"""Stage params: params.yaml checked whole before any other stage runs.

A misplaced or misspelt key (``egohumans.track.bytetrack.track_buffer`` outside ``config``, a section
``egonormai``) belongs to no stage's declared params, so no stage would re-run to refuse it. This stage depends on
the whole file, so ``dvc repro`` runs it whenever params.yaml changes, and every input stage depends on its output,
so it runs first: a bad key stops ``dvc repro`` here (exit 2, naming the key). The output never changes, so a
change to one key re-runs only this check (a second) and the stages that declare that key.
"""

from __future__ import annotations

from pathlib import Path

from egoeval.core.io.atomic import atomic_write_text
from egoeval.core.stage_shell import run_stage, stage_parser

CHECKED = Path("data/params.checked")


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args(argv)
    # run_stage validates params.yaml whole (types, ranges, unknown keys) before the body runs
    return run_stage(lambda: atomic_write_text(CHECKED, "params.yaml: every key known and valid\n"))


if __name__ == "__main__":
    raise SystemExit(main())
