"""Stage egohumans_fetch: check the pinned EgoHumans data root (laid out as the official download) and normalise it.

What is read, checked and written: egoeval.egohumans.fetching. ``--write-manifest ROOT`` pins instead the files the
annotation references (frames, calibration; the user's detections when there, whatever egohumans.detect.modes).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage, stage_parser
from egoeval.egohumans.fetching import pin_root, write_fetched
from egoeval.egohumans.settings import EgoHumansSettings


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser(__doc__)
    parser.add_argument("--write-manifest", metavar="ROOT", type=Path, help="pin a data root instead of fetching")
    parser.add_argument("--manifest", type=Path, help="for --write-manifest: its path (default ROOT/manifest.sha256)")
    args = parser.parse_args(argv)
    settings = partial(benchmark_settings, "egohumans", EgoHumansSettings)
    if args.write_manifest is not None:
        return run_stage(lambda: pin_root(args.write_manifest, settings(), args.manifest), benchmark="egohumans")
    return run_stage(lambda: write_fetched(settings()), benchmark="egohumans")


if __name__ == "__main__":
    raise SystemExit(main())
