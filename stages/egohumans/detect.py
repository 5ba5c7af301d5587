"""Stage egohumans_detect: the boxes the trackers start from, one table per detection mode.

``--mode`` gt, official, file or yolo (``--arch-only``: yolo's untrained architecture, for plumbing checks); output
data/egohumans/detections/<mode>.parquet. What each mode reads: egoeval.egohumans.detection.
"""

from __future__ import annotations

from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage, stage_parser
from egoeval.egohumans.detection import write_detections
from egoeval.egohumans.formats import DETECTION_MODES
from egoeval.egohumans.settings import EgoHumansSettings


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser(__doc__)
    parser.add_argument("--mode", required=True, choices=DETECTION_MODES)
    parser.add_argument("--arch-only", action="store_true", help="yolo: untrained architecture from yolo_model")
    args = parser.parse_args(argv)
    return run_stage(
        lambda: write_detections(benchmark_settings("egohumans", EgoHumansSettings), args.mode, args.arch_only),
        benchmark="egohumans",
    )


if __name__ == "__main__":
    raise SystemExit(main())
