"""Tracking speed: frames per second of each tracker on the bundled sample's simulated detections, one run.

Goal: the ego-motion tracker (egoeval/egohumans/trackers/egomotion.py) within 2x of ByteTrack's time; the
multi-view tracker (egoeval/egohumans/trackers/multiview.py: the world tracker per camera, then its tracklets linked
across each take's cameras) measured beside them. The sample is generated and fetched in a temporary folder by the
project's own stages, exactly as ``dvc repro`` would; each tracker then tracks every sequence (best of 3 runs), from
the detections table in memory. Frames are every camera's frames.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from bench import save
from egoeval.core.settings import load_settings
from egoeval.core.stage_shell import command_env
from egoeval.egohumans.trackers import places_people, tracks_takes
from egoeval.egohumans.trackers.placement import take_planes
from egoeval.egohumans.tracking import camera_poses, image_size, track_sequence, track_views

REPO = Path(__file__).resolve().parents[1]
REPEATS = 3


def _sample(work: Path) -> Path:
    """The bundled sample, fetched and its simulated detections extracted, under ``work``; returns fetched/."""
    shutil.copy(REPO / "params.yaml", work / "params.yaml")
    for stage in ("stages.egohumans.sample", "stages.egohumans.fetch"):
        subprocess.run([sys.executable, "-m", stage], cwd=work, env=command_env(), check=True, capture_output=True)
    subprocess.run(
        [sys.executable, "-m", "stages.egohumans.detect", "--mode", "file"],
        cwd=work,
        env=command_env(),
        check=True,
        capture_output=True,
    )
    return work / "data/egohumans/fetched"


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="egoeval-bench-trackers-") as folder:
        work = Path(folder)
        fetched = _sample(work)
        detections = pd.read_parquet(work / "data/egohumans/detections/file.parquet")
        sequences = json.loads((fetched / "sequences.json").read_text())["sequences"]
        images = pd.read_parquet(fetched / "images.parquet")
        images["path"] = [str(work / p) for p in images["path"]]
        cameras = camera_poses(images, fetched / "images.parquet")
        frames = {s: dict(zip(rows["frame"], rows["path"], strict=True)) for s, rows in images.groupby("sequence")}
        track = load_settings(work / "params.yaml").egohumans.track
        total = sum(int(s["length"]) for s in sequences)
        lengths = {s["name"]: int(s["length"]) for s in sequences}
        rows = []
        for name in track.trackers:
            config = track.config[name]
            grounds = {}
            if places_people(config):  # the world tracker: each take's floor, each camera's image size
                planes = take_planes(images, cameras, float(config.eye_height_m))
                by_sequence = images.groupby("sequence")
                grounds = {s: (planes[views["take"].iloc[0]], image_size(views)) for s, views in by_sequence}
            best = float("inf")
            for _ in range(REPEATS):
                start = time.perf_counter()
                if tracks_takes(config):
                    track_views(name, config, detections, images, cameras, lengths)
                for seq in [] if tracks_takes(config) else sequences:
                    part = detections[detections["sequence"] == seq["name"]]
                    sequence = seq["name"]
                    ground = grounds.get(sequence)
                    track_sequence(config, part, int(seq["length"]), frames[sequence], cameras[sequence], ground)
                best = min(best, time.perf_counter() - start)
            rows.append({"tracker": name, "seconds": best, "fps": total / best})
    byte = next(r["seconds"] for r in rows if r["tracker"] == "bytetrack")
    for row in rows:
        row["vs_bytetrack"] = row["seconds"] / byte
    print(f"{total} frames, {len(detections)} boxes, best of {REPEATS}\n")
    print("| tracker | frames/s | time vs ByteTrack |\n|---|---:|---:|")
    for row in rows:
        print(f"| {row['tracker']} | {row['fps']:,.0f} | {row['vs_bytetrack']:.2f}x |")
    result = {"frames": total, "boxes": len(detections), "trackers": rows}
    save("trackers", result)
    return result


if __name__ == "__main__":
    run()
