"""The EgoHumans artifact contract: where every stage writes, so stages, the audit and the report share one list.

Table schemas and checked readers live beside the formats they read (egoeval.egohumans.formats, egoeval.tracking.mot).
"""

from __future__ import annotations

from pathlib import Path

SAMPLE = Path("data/egohumans/sample")  # the bundled sample, laid out as the official download
FETCHED = Path("data/egohumans/fetched")  # fetch: sequences.json, images.parquet, gt/<seq>.txt, detections_*.parquet
GT_DIR = FETCHED / "gt"
IMAGES = FETCHED / "images.parquet"
DETECTIONS = Path("data/egohumans/detections")  # detect: <mode>.parquet
TRACKS = Path("data/egohumans/tracks")  # track: <tracker>-<mode>/<seq>.txt and its boxes' world points
WORLD_POINTS = "world.parquet"  # in a run folder: sequence, frame, id, root_x, root_y, root_z (boxes with one)
METRICS_FILE = Path("metrics/egohumans.json")
HEADLINE_DIR = Path("metrics/egohumans")  # one headline row per run for dvc metrics show (egoeval.headline)
SEQUENCES_PLOT = Path("plots/egohumans/sequences.csv")
PAIRED_FILE = Path("plots/egohumans/paired.csv")  # paired comparisons of the trackers (egoeval.egohumans.paired)
HEAD_SPEED_PLOT = Path("plots/egohumans/head_speed.csv")
