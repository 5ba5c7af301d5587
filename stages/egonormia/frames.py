"""Stage egonormia_frames: one JPEG strip per clip, frames sampled at ``fps`` from the context video.

A missing or broken video fails only its own clip: the index records the reason and the other clips go on.
Outputs: data/egonormia/frames/<id>.jpg and data/egonormia/frames/index.parquet
(id, image, n_frames, times, video_fps, video_frames, error).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from egoeval.egonormia.artifacts import FETCHED, FRAMES, ITEMS, read_table
from egoeval.io import InputError, atomic_write_bytes, load_params, replaced_dir, write_parquet
from egoeval.stage import run_stage
from egoeval.video import encode_jpeg, frame_strip, read_sampled_frames


def extract_frames(items: pd.DataFrame, fetched_dir: Path, out_dir: Path, params: dict[str, Any]) -> pd.DataFrame:
    """Write one strip per clip into ``out_dir``; return the index table (failures recorded, never raised)."""
    rows = []
    for item in tqdm(items.itertuples(index=False), total=len(items), desc="frames", unit="clip", file=sys.stderr):
        row: dict[str, Any] = {
            "id": item.id,
            "image": "",
            "n_frames": 0,
            "times": [],
            "video_fps": 0.0,
            "video_frames": 0,
            "error": "",
        }
        try:
            if not item.video:
                raise InputError(f"{fetched_dir}/items.parquet", "clip has no context video", row=item.id)
            sampled = read_sampled_frames(fetched_dir / item.video, float(params["fps"]))
            strip = frame_strip(sampled.frames, int(params["height"]), int(params["max_width"]))
            image = f"{item.id}.jpg"
            atomic_write_bytes(out_dir / image, encode_jpeg(strip, int(params["jpeg_quality"])))
            row.update(
                image=image,
                n_frames=len(sampled.times),
                times=sampled.times,
                video_fps=sampled.video_fps,
                video_frames=sampled.video_frames,
            )
        except InputError as error:
            row["error"] = str(error)
        rows.append(row)
    index = pd.DataFrame(rows, columns=["id", "image", "n_frames", "times", "video_fps", "video_frames", "error"])
    return index.sort_values("id", ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__).parse_args(argv)

    def run() -> None:
        params = load_params("egonormia.frames")
        items = read_table(ITEMS, ["id", "video"])
        with replaced_dir(FRAMES) as work:
            index = extract_frames(items, FETCHED, work, params)
            write_parquet(work / "index.parquet", index)
        failed = index[index["error"] != ""]
        for row in failed.itertuples(index=False):
            print(f"frames: {row.id}: {row.error}", file=sys.stderr)
        print(f"frames: {len(index) - len(failed)} of {len(index)} clips extracted", file=sys.stderr)

    return run_stage(run)


if __name__ == "__main__":
    raise SystemExit(main())
