"""``egoeval check-params [PARAMS]``: validate params.yaml; exit 0 when valid, 2 with every error otherwise."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from egoeval.errors import ParamsError
from egoeval.io import PARAMS_FILE
from egoeval.stage import help_text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="egoeval check-params", description=help_text(__doc__))
    parser.add_argument("params", type=Path, nargs="?", default=PARAMS_FILE, help="default: ./params.yaml")
    path = parser.parse_args(argv).params
    from egoeval.settings import load_settings  # pydantic: not for --help

    try:
        load_settings(path)
    except ParamsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{path}: ok")
    return 0
