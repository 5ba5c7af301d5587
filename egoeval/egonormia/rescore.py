"""``egoeval score-norms``: rescore predictions in the official EgoNormia eval-JSON layout.

Prints one aligned row per model key and, with ``--json``, writes ``{"models": {name: {action, justification,
both, sensible_iou, n}}}`` with the official scorer's numbers (percent; see scoring.score_official).
Exit 0 on success, 2 on bad input (the message names the file and the clip).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import write_json
from egoeval.core.io.bounded import read_json
from egoeval.core.io.commit import check_output
from egoeval.core.stage_shell import help_text


def format_table(models: dict[str, dict[str, float | int | None]]) -> str:
    """The scores as an aligned text table, one row per model, numbers to two decimals ("n/a": no clip counted)."""
    from egoeval.egonormia.scoring import METRICS

    header = ["model", "n", *METRICS]
    rows = [
        [name, str(scores["n"]), *("n/a" if scores[metric] is None else f"{scores[metric]:.2f}" for metric in METRICS)]
        for name, scores in models.items()
    ]
    widths = [max(len(row[k]) for row in [header, *rows]) for k in range(len(header))]
    lines = [
        "  ".join(cell.ljust(widths[k]) if k == 0 else cell.rjust(widths[k]) for k, cell in enumerate(row))
        for row in [header, *rows]
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="egoeval score-norms", description=help_text(__doc__))
    parser.add_argument("--official-eval", required=True, type=Path, help="eval JSON in the official layout")
    parser.add_argument("--json", type=Path, help="write the scores here as JSON")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    from egoeval.core.errors import ScorerInputError
    from egoeval.egonormia.scoring import score_official

    try:
        if args.json is not None:
            check_output(args.json, inputs=[args.official_eval])
        models = score_official(read_json(args.official_eval))
        if not models:
            raise ScorerInputError("no clip carries a model entry: nothing to score")
    except InputError as error:
        print(f"egoeval score-norms: {error}", file=sys.stderr)
        return 2
    except ScorerInputError as error:
        print(f"egoeval score-norms: {args.official_eval}: {error}", file=sys.stderr)
        return 2
    print(format_table(models))
    if args.json is not None:
        write_json(args.json, {"models": models})
    return 0
