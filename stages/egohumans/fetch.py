"""Stage egohumans_fetch: check the pinned EgoHumans data root (laid out as the official download) and normalise it.

The work is ``egoeval.egohumans.fetching`` (what is read, checked and written is described there).
``python -m stages.egohumans.fetch --write-manifest ROOT`` pins the files the annotation references (frames,
calibration, detections) in parallel, using params.yaml's annotation, modality and detections (pinned when there,
whatever egohumans.detect.modes).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from egoeval.egohumans.fetching import OUT_DIR, fetch, write_root_manifest
from egoeval.egohumans.settings import EgoHumansSettings
from egoeval.settings import benchmark_settings
from egoeval.stage import run_stage


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.egohumans.fetch", description=__doc__.splitlines()[0])
    parser.add_argument("--write-manifest", metavar="ROOT", type=Path, help="pin a data root instead of fetching")
    parser.add_argument(
        "--manifest", type=Path, help="manifest path for --write-manifest (default ROOT/manifest.sha256)"
    )
    args = parser.parse_args(argv)

    def body() -> None:
        settings = benchmark_settings("egohumans", EgoHumansSettings)
        if args.write_manifest is not None:
            names = write_root_manifest(args.write_manifest, settings.fetch, settings.detect.modes, args.manifest)
            print(f"pinned {len(names)} files under {args.write_manifest}", file=sys.stderr)
            return
        summary = fetch(settings.fetch, OUT_DIR, settings.detect.modes)
        found = [kind for kind, name in summary["detections"].items() if name]
        print(f"fetched {len(summary['sequences'])} sequences (detections: {found or 'none'}) to {OUT_DIR}")

    return run_stage(body, benchmark="egohumans")


if __name__ == "__main__":
    raise SystemExit(main())
