"""Stage egohumans_track: run one configured tracker over a detections table (``egoeval.egohumans.tracking``).

``--tracker NAME`` is a key of ``egohumans.track.config``; ``--mode`` picks the detections. Output
data/egohumans/tracks/<tracker>-<mode>/<seq>.txt (MOTChallenge), one file per sequence.
"""

from __future__ import annotations

from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage, stage_parser
from egoeval.egohumans.formats import DETECTION_MODES
from egoeval.egohumans.settings import EgoHumansSettings
from egoeval.egohumans.tracking import write_tracks


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser(__doc__)
    parser.add_argument("--tracker", required=True, help="a key of egohumans.track.config")
    parser.add_argument("--mode", required=True, choices=DETECTION_MODES, help="the detections to track")
    args = parser.parse_args(argv)
    return run_stage(
        lambda: write_tracks(benchmark_settings("egohumans", EgoHumansSettings), args.tracker, args.mode),
        benchmark="egohumans",
    )


if __name__ == "__main__":
    raise SystemExit(main())
