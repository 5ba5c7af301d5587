"""Stage egonormia_report: EgoNormia's part of the report page, reports/fragments/egonormia.json (its sections,
their style and script, and the title and place the page gives it); the report stage assembles the page from every
benchmark's part.
"""

from __future__ import annotations

import argparse

from egoeval.core.stage_shell import run_stage
from egoeval.report_page import write_fragment


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__).parse_args(argv)
    return run_stage(lambda: write_fragment("egonormia"), benchmark="egonormia")


if __name__ == "__main__":
    raise SystemExit(main())
