"""Stage report: reports/index.html, the report page, assembled from every benchmark's part in reports/fragments
(each written by that benchmark's report stage), in the registry's order. It names no benchmark: a new benchmark's
fragment lands in the folder and re-renders the page.
"""

from __future__ import annotations

import argparse

from egoeval.core.stage_shell import run_stage
from egoeval.report_page import write_page


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__).parse_args(argv)
    return run_stage(write_page, check_params=False)  # it reads no params: each fragment's stage declared its own


if __name__ == "__main__":
    raise SystemExit(main())
