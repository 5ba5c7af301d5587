"""EgoNormia frames strips, the image of the video setting: the dataset's pinned ``frame_all_prev.jpg``, or a strip
rendered from the context video (frames at ``fps``, each ``frame_height`` px high, left to right, scaled down only
when wider than ``max_width``; ``workers`` clips decode in parallel processes, which die with the stage). A missing
or broken file fails only its own clip. Used by the egonormia_frames stage and bench/frames.py.
"""

from __future__ import annotations

import os
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import cv2
import pandas as pd
from tqdm import tqdm

from egoeval.io import InputError, atomic_write_bytes
from egoeval.stage import die_with_parent
from egoeval.video import encode_jpeg, frame_strip, read_sampled_frames

INDEX_COLUMNS = ["id", "image", "n_frames", "times", "video_fps", "video_frames", "width", "height", "error"]


def _empty_row(clip_id: str) -> dict[str, Any]:
    return {
        "id": clip_id,
        "image": "",
        "n_frames": 0,
        "times": [],
        "video_fps": 0.0,
        "video_frames": 0,
        "width": 0,
        "height": 0,
        "error": "",
    }


def _from_video(clip_id: str, video: str, fetched_dir: Path, out_dir: Path, params: dict[str, Any]) -> dict[str, Any]:
    row = _empty_row(clip_id)
    try:
        if not video:
            raise InputError(f"{fetched_dir}/items.parquet", "clip has no context video (video_prev.mp4)", row=clip_id)
        sampled = read_sampled_frames(fetched_dir / video, float(params["fps"]), int(params["frame_height"]))
        strip = frame_strip(sampled.frames, int(params["frame_height"]), int(params["max_width"]))
        image = f"{clip_id}.jpg"
        atomic_write_bytes(out_dir / image, encode_jpeg(strip, int(params["jpeg_quality"])))
        row.update(
            image=image,
            n_frames=len(sampled.times),
            times=sampled.times,
            video_fps=sampled.video_fps,
            video_frames=sampled.video_frames,
            width=int(strip.shape[1]),
            height=int(strip.shape[0]),
        )
    except InputError as error:
        row["error"] = str(error)
    return row


def _from_dataset(clip_id: str, strip: str, fetched_dir: Path, out_dir: Path) -> dict[str, Any]:
    row = _empty_row(clip_id)
    source = fetched_dir / strip if strip else None
    image = cv2.imread(str(source)) if source is not None and source.is_file() else None
    if image is None:
        what = "clip has no frames strip (frame_all_prev.jpg)" if not strip else f"{strip}: not a readable JPEG"
        row["error"] = str(InputError(f"{fetched_dir}/items.parquet", what, row=clip_id))
        return row
    shutil.copyfile(source, out_dir / f"{clip_id}.jpg")
    row.update(image=f"{clip_id}.jpg", width=int(image.shape[1]), height=int(image.shape[0]))
    return row


def extract_frames(items: pd.DataFrame, fetched_dir: Path, out_dir: Path, params: dict[str, Any]) -> pd.DataFrame:
    """Write one strip per clip into ``out_dir``; return the index table (failures recorded, never raised)."""
    clips = list(items.itertuples(index=False))
    bar = {"total": len(clips), "desc": "frames", "unit": "clip", "file": sys.stderr}
    if params.get("source", "video") == "dataset":
        rows = [_from_dataset(c.id, getattr(c, "strip", ""), fetched_dir, out_dir) for c in tqdm(clips, **bar)]
    else:
        workers = int(params.get("workers", 1))
        args = [(c.id, c.video, fetched_dir, out_dir, params) for c in clips]
        if workers == 1 or len(clips) < 2:
            rows = [_from_video(*a) for a in tqdm(args, **bar)]
        else:
            import av  # noqa: F401  (FFmpeg's libraries loaded once, here: the forked workers inherit them)

            # workers die with this process, even a SIGKILLed one; an interrupted run does not wait for their clips
            pool = ProcessPoolExecutor(workers, initializer=die_with_parent, initargs=(os.getpid(),))
            try:
                rows = list(tqdm(pool.map(_from_video, *zip(*args, strict=True)), **bar))
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            pool.shutdown()
    index = pd.DataFrame(rows, columns=INDEX_COLUMNS)
    return index.sort_values("id", ignore_index=True)
