"""Stage egohumans_detect: the boxes the trackers start from, one table per detection mode.

``--mode gt``: the ground-truth boxes (ignored ones left out) with score 1, which isolates association.
``--mode official``: the released ``detections_<modality>.pkl`` (ground-truth boxes with score 1.0, as the official
conversion script writes them). ``--mode file``: the detections named by ``egohumans.fetch.detections``.
``--mode yolo``: an ultralytics YOLO model over the frames, person class only, in batches. The weights are a local
file named by ``egohumans.detect.yolo_weights``; nothing is ever downloaded. ``yolo_weights: arch-only`` (or the
``--arch-only`` flag) builds the untrained architecture from ``yolo_model`` (a ``.yaml``) for plumbing checks.

Output: ``data/egohumans/detections/<mode>.parquet`` with columns sequence, frame, x, y, w, h, score.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from egoeval.egohumans.artifacts import FETCHED
from egoeval.egohumans.detection import OUT_DIR, detect
from egoeval.egohumans.formats import DETECTION_MODES
from egoeval.egohumans.settings import EgoHumansSettings
from egoeval.settings import benchmark_settings
from egoeval.stage import run_stage


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", required=True, choices=DETECTION_MODES)
    parser.add_argument("--arch-only", action="store_true", help="yolo: untrained architecture from yolo_model")
    args = parser.parse_args(argv)

    def body() -> None:
        settings = benchmark_settings("egohumans", EgoHumansSettings)
        out = OUT_DIR / f"{args.mode}.parquet"
        table = detect(args.mode, FETCHED, out, settings.detect, Path(settings.fetch.path), args.arch_only)
        print(f"{args.mode}: {len(table)} boxes over {table['sequence'].nunique()} sequences")

    return run_stage(body, benchmark="egohumans")


if __name__ == "__main__":
    raise SystemExit(main())
