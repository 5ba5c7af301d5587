"""Stage egohumans_track: run an ultralytics tracker (ByteTrack or BoT-SORT) over a detections table.

The tracker gets the boxes frame by frame (every frame of the sequence, empty ones too) and no images, so BoT-SORT
must run with ``gmc_method: none`` and without ReID. Its settings are the packaged tracker YAML keys, kept in
``params.yaml`` under ``egohumans.track.<tracker>``. A fresh tracker per sequence; track ids start at 1.

Output: ``data/egohumans/tracks/<tracker>-<mode>/<seq>.txt`` (MOTChallenge), one file per sequence.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from egoeval.egohumans.formats import DETECTION_MODES, read_detections_parquet
from egoeval.io import PARAMS_FILE, InputError, load_params, replaced_dir
from egoeval.mot import write_mot
from egoeval.stage import run_stage

FETCHED = Path("data/egohumans/fetched")
DETECTIONS = Path("data/egohumans/detections")
OUT_DIR = Path("data/egohumans/tracks")
TRACKERS = ("bytetrack", "botsort")
MOT_COLUMNS = ["frame", "id", "x", "y", "w", "h", "conf"]


@dataclass(frozen=True)
class Boxes:
    """The detections of one frame in the shape ultralytics trackers read (numpy, boolean-mask indexable)."""

    xywh: np.ndarray  # (N, 4) centre x, centre y, width, height
    conf: np.ndarray  # (N,)
    cls: np.ndarray  # (N,)

    @property
    def xyxy(self) -> np.ndarray:
        centre, size = self.xywh[:, :2], self.xywh[:, 2:]
        return np.concatenate([centre - size / 2, centre + size / 2], axis=1)

    def __len__(self) -> int:
        return len(self.conf)

    def __getitem__(self, index: Any) -> Boxes:
        return Boxes(self.xywh[index], self.conf[index], self.cls[index])


def make_tracker(name: str, settings: dict[str, Any]) -> Any:
    """A new ultralytics tracker from its YAML settings (as in ``ultralytics/cfg/trackers/<name>.yaml``)."""
    from ultralytics.trackers.bot_sort import BOTSORT
    from ultralytics.trackers.byte_tracker import BYTETracker
    from ultralytics.utils import IterableSimpleNamespace

    if settings.get("tracker_type") != name:
        raise InputError(PARAMS_FILE, f"egohumans.track.{name}.tracker_type must be {name!r}")
    if name == "botsort" and str(settings.get("gmc_method")).lower() != "none":
        raise InputError(PARAMS_FILE, "egohumans.track.botsort.gmc_method must be none: the tracker gets no images")
    if settings.get("with_reid"):
        raise InputError(PARAMS_FILE, f"egohumans.track.{name}.with_reid must be false: the tracker gets no images")
    args = IterableSimpleNamespace(**settings)
    return BOTSORT(args) if name == "botsort" else BYTETracker(args)


def track_sequence(name: str, settings: dict[str, Any], detections: pd.DataFrame, length: int) -> pd.DataFrame:
    """Track one sequence of ``length`` frames; ``detections`` holds its rows (frame, x, y, w, h, score)."""
    tracker = make_tracker(name, settings)
    detections = detections.sort_values("frame", kind="mergesort")
    frames = detections["frame"].to_numpy(np.int64)
    xywh = detections[["x", "y", "w", "h"]].to_numpy(np.float32, copy=True)
    xywh[:, :2] += xywh[:, 2:] / 2
    conf = detections["score"].to_numpy(np.float32)
    bounds = np.searchsorted(frames, np.arange(1, length + 2))
    rows = []
    for frame in range(1, length + 1):
        lo, hi = bounds[frame - 1], bounds[frame]
        out = tracker.update(Boxes(xywh[lo:hi], conf[lo:hi], np.zeros(hi - lo, dtype=np.float32)))
        if len(out):
            out = out.astype(np.float64)
            rows.append(
                np.column_stack([np.full(len(out), frame), out[:, 4], out[:, :2], out[:, 2:4] - out[:, :2], out[:, 5]])
            )
    table = np.concatenate(rows) if rows else np.zeros((0, 7))
    df = pd.DataFrame(np.round(table, 3), columns=MOT_COLUMNS)
    df[["frame", "id"]] = df[["frame", "id"]].astype(np.int64)
    return df.sort_values(["frame", "id"]).reset_index(drop=True)


def track(name: str, detections_path: Path, sequences_path: Path, out_dir: Path, settings: dict[str, Any]) -> int:
    """Track every sequence listed in ``sequences.json``; write one MOTChallenge file each. Returns the row count."""
    if name not in TRACKERS:
        raise InputError(PARAMS_FILE, f"tracker must be one of {TRACKERS}, got {name!r}")
    try:
        sequences = json.loads(sequences_path.read_text(encoding="utf-8"))["sequences"]
    except (OSError, json.JSONDecodeError, KeyError) as err:
        raise InputError(sequences_path, f"not a readable sequences summary: {err}") from None
    detections = read_detections_parquet(detections_path)
    unknown = sorted(set(detections["sequence"]) - {s["name"] for s in sequences})
    if unknown:
        raise InputError(detections_path, f"detections for sequences not in {sequences_path}: {unknown}")
    by_sequence = dict(tuple(detections.groupby("sequence", sort=True)))
    total = 0
    with replaced_dir(out_dir) as work:
        for seq in tqdm(sequences, desc=f"{name} {out_dir.name}", unit="seq"):
            rows = by_sequence.get(seq["name"], detections.iloc[:0])
            if len(rows) and rows["frame"].max() > seq["length"]:
                raise InputError(
                    detections_path,
                    f"frame beyond the sequence's {seq['length']} frames",
                    row=f"{seq['name']} frame {rows['frame'].max()}",
                )
            table = track_sequence(name, settings, rows, int(seq["length"]))
            write_mot(work / f"{seq['name']}.txt", table)
            total += len(table)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracker", required=True, choices=TRACKERS)
    parser.add_argument("--mode", required=True, choices=DETECTION_MODES, help="the detections to track")
    args = parser.parse_args(argv)

    def body() -> None:
        run = f"{args.tracker}-{args.mode}"
        rows = track(
            args.tracker,
            DETECTIONS / f"{args.mode}.parquet",
            FETCHED / "sequences.json",
            OUT_DIR / run,
            load_params(f"egohumans.track.{args.tracker}"),
        )
        print(f"{run}: {rows} track boxes")

    return run_stage(body)


if __name__ == "__main__":
    raise SystemExit(main())
