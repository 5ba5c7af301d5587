"""Stage egonormia_parse: raw model responses -> chosen options, in stored order, with every failure named.

Writes data/egonormia/predictions.parquet and data/egonormia/predictions_eval.json (the official eval-JSON layout);
what each holds and how answers are read: egoeval.egonormia.predictions.
"""

from __future__ import annotations

from egoeval.core.stage_shell import run_stage, stage_parser
from egoeval.egonormia.predictions import write_predictions


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args(argv)
    return run_stage(write_predictions, benchmark="egonormia")


if __name__ == "__main__":
    raise SystemExit(main())
