"""Stage egohumans_track: run one configured tracker over a detections table (``egoeval.egohumans.tracking``).

``--tracker NAME`` is a key of ``egohumans.track.config`` (any tracker type of the pinned ultralytics'
``TRACKER_MAP`` or of egoeval's own, ``egoeval.egohumans.trackers``, set up in params.yaml); ``--mode`` picks the
detections. Output:
``data/egohumans/tracks/<tracker>-<mode>/<seq>.txt`` (MOTChallenge), one file per sequence.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from egoeval.egohumans.artifacts import DETECTIONS, FETCHED, TRACKS
from egoeval.egohumans.formats import DETECTION_MODES
from egoeval.egohumans.settings import EgoHumansSettings
from egoeval.egohumans.tracking import track
from egoeval.errors import InputError
from egoeval.settings import benchmark_settings
from egoeval.stage import PARAMS_FILE, run_stage

OUT_DIR = TRACKS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracker", required=True, help="a key of egohumans.track.config")
    parser.add_argument("--mode", required=True, choices=DETECTION_MODES, help="the detections to track")
    args = parser.parse_args(argv)

    def body() -> None:
        run = f"{args.tracker}-{args.mode}"
        settings = benchmark_settings("egohumans", EgoHumansSettings)
        configured = settings.track
        if args.tracker not in configured.config:
            known = ", ".join(sorted(configured.config))
            raise InputError(PARAMS_FILE, f"--tracker {args.tracker!r}: not a key of egohumans.track.config ({known})")
        config = configured.config[args.tracker]
        detections = DETECTIONS / f"{args.mode}.parquet"
        rows = track(args.tracker, config, detections, FETCHED, OUT_DIR / run, Path(settings.fetch.path))
        print(f"{run}: {rows} track boxes")

    return run_stage(body, benchmark="egohumans")


if __name__ == "__main__":
    raise SystemExit(main())
