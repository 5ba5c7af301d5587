"""EgoNormia frames strips, the image of the video setting: the dataset's pinned ``frame_all_prev.jpg``, or a strip
rendered from the context video (frames at ``fps`` read by ``reader``, each ``frame_height`` px high, left to right,
scaled down only when wider than ``max_width``; ``workers`` clips decode in parallel processes, which die with the
stage). A missing or broken file fails only its clip: the index records the reason and the other clips go on. Used by
the egonormia_frames stage (``write_frames``: data/egonormia/frames/<id>.jpg and data/egonormia/frames/index.parquet,
columns id, image, n_frames, times, video_fps, video_frames, width, height, error) and bench/frames.py.
"""

from __future__ import annotations

import os
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
from PIL import Image
from tqdm import tqdm

from egoeval.egonormia.artifacts import FETCHED, FRAMES, ITEMS, read_table
from egoeval.egonormia.settings import FramesSettings
from egoeval.errors import InputError
from egoeval.io.atomic import atomic_write_bytes, write_parquet
from egoeval.io.commit import replaced_dir
from egoeval.io.paths import data_file
from egoeval.stage_shell import die_with_parent
from egoeval.video import encode_jpeg, frame_strip, load_frame_reader, read_sampled_frames

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


def _from_video(clip_id: str, video: str, fetched_dir: Path, out_dir: Path, settings: FramesSettings) -> dict[str, Any]:
    row = _empty_row(clip_id)
    try:
        where = fetched_dir / "items.parquet"
        if not video:
            raise InputError(where, "clip has no context video (video_prev.mp4)", row=clip_id)
        source = data_file(fetched_dir, video, where, clip_id)
        sampled = read_sampled_frames(source, settings.fps, settings.frame_height, reader=settings.reader)
        strip = frame_strip(sampled.frames, settings.frame_height, settings.max_width)
        image = f"{clip_id}.jpg"
        atomic_write_bytes(out_dir / image, encode_jpeg(strip, settings.jpeg_quality))
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
    """The dataset's pinned strip, copied as it is once it is known to be a whole JPEG (it is sent as
    ``image/jpeg``: a PNG named ``.jpg``, or a file cut short, fails its clip)."""
    row = _empty_row(clip_id)
    where = fetched_dir / "items.parquet"
    try:
        if not strip:
            raise InputError(where, "clip has no frames strip (frame_all_prev.jpg)", row=clip_id)
        source = data_file(fetched_dir, strip, where, clip_id)
        width, height = _whole_jpeg(source)
    except InputError as error:
        row["error"] = str(error)
        return row
    shutil.copyfile(source, out_dir / f"{clip_id}.jpg")
    row.update(image=f"{clip_id}.jpg", width=width, height=height)
    return row


def _whole_jpeg(path: Path) -> tuple[int, int]:
    """(width, height) of a JPEG decoded to its last byte; InputError naming it when it is another format (a PNG
    named ``.jpg``), cut short or unreadable."""
    try:
        with Image.open(path) as image:
            if image.format != "JPEG":
                raise InputError(path, f"not a JPEG but {image.format or 'another format'} data named .jpg")
            image.load()  # raises on a file cut short (Pillow's LOAD_TRUNCATED_IMAGES is off)
            return image.size
    except (OSError, Image.DecompressionBombError) as error:
        raise InputError(path, f"not a readable JPEG: {error}") from None


def extract_frames(items: pd.DataFrame, fetched_dir: Path, out_dir: Path, settings: FramesSettings) -> pd.DataFrame:
    """Write one strip per clip into ``out_dir``; return the index table (failures recorded, never raised)."""
    clips = list(items.itertuples(index=False))
    # no bar when stderr is closed (sys.stderr is None then): the stage runs on, silent
    bar = {"total": len(clips), "desc": "frames", "unit": "clip", "file": sys.stderr, "disable": sys.stderr is None}
    if settings.source == "dataset":
        rows = [_from_dataset(c.id, getattr(c, "strip", ""), fetched_dir, out_dir) for c in tqdm(clips, **bar)]
    else:
        workers = settings.workers
        args = [(c.id, c.video, fetched_dir, out_dir, settings) for c in clips]
        if workers == 1 or len(clips) < 2:
            rows = [_from_video(*a) for a in tqdm(args, **bar)]
        else:
            load_frame_reader(settings.reader)  # FFmpeg's libraries loaded once, here: the forked workers inherit them
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


def write_frames(settings: FramesSettings) -> None:
    """The egonormia_frames stage: every clip's strip and the index, replacing data/egonormia/frames/ as a whole."""
    items = read_table(ITEMS, ["id", "video", "strip"])
    with replaced_dir(FRAMES) as work:
        index = extract_frames(items, FETCHED, work, settings)
        write_parquet(work / "index.parquet", index)
    failed = index[index["error"] != ""]
    for row in failed.itertuples(index=False):
        print(f"frames: {row.id}: {row.error}", file=sys.stderr)
    print(f"frames: {len(index) - len(failed)} of {len(index)} clips extracted", file=sys.stderr)
