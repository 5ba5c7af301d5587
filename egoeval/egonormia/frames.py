"""EgoNormia frames strips, the image of the video setting: the dataset's pinned ``frame_all_prev.jpg``, or a strip
rendered from the context video (frames at ``fps`` read by ``reader``, each ``frame_height`` px high, left to right,
scaled down only when wider than ``max_width``; ``workers`` clips decode in parallel processes, which die with the
stage). A missing or broken file fails only its clip: the index records the reason and the other clips go on. Used by
the egonormia_frames stage (``write_frames``: data/egonormia/frames/<id>.jpg and data/egonormia/frames/index.parquet,
columns id, image, n_frames, times, video_fps, video_frames, width, height, error) and bench/frames.py.

Each other video variant (``egonormia.frames.variants``: ``frames``, ``native``) is rendered from ``video_prev.mp4`` by
the same reader into a folder of its own (``VideoVariant.folder``: data/egonormia/frames/frames8/, .../native/) with
its index (``VARIANT_COLUMNS``: id, files, times, width, height, error): a ``frames`` variant's JPEGs
``<id>-<k>.jpg`` and their times, a ``native`` variant's ``<id>.mp4`` (as fetched, or re-encoded) and the times of its
first and last frame.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
from PIL import Image
from tqdm import tqdm

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import atomic_write_bytes, write_parquet
from egoeval.core.io.commit import replaced_dir
from egoeval.core.io.paths import data_file
from egoeval.core.stage_shell import die_with_parent
from egoeval.egonormia.artifacts import FETCHED, FRAMES, ITEMS, read_table
from egoeval.egonormia.settings import FramesSettings, VideoVariant
from egoeval.video import (
    SampledFrames,
    at_rate,
    encode_jpeg,
    encode_mp4,
    frame_strip,
    load_frame_reader,
    read_sampled_frames,
    spread,
)

INDEX_COLUMNS = ["id", "image", "n_frames", "times", "video_fps", "video_frames", "width", "height", "error"]
VARIANT_COLUMNS = ["id", "files", "times", "width", "height", "error"]  # a variant's index: its files per clip


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


def _variant_from_video(
    clip_id: str, video: str, fetched_dir: Path, out_dir: Path, settings: FramesSettings, variant: VideoVariant
) -> dict[str, Any]:
    """One clip of a ``frames`` or ``native`` variant, written into ``out_dir`` (its folder): its row of the
    variant's index (``VARIANT_COLUMNS``; a failure recorded in ``error``)."""
    row: dict[str, Any] = {"id": clip_id, "files": [], "times": [], "width": 0, "height": 0, "error": ""}
    try:
        where = fetched_dir / "items.parquet"
        if not video:
            raise InputError(where, "clip has no context video (video_prev.mp4)", row=clip_id)
        source = data_file(fetched_dir, video, where, clip_id)
        if variant.kind == "frames":
            sampler = spread(variant.count) if variant.count is not None else at_rate(variant.per_second or 1.0)
            sampled = read_sampled_frames(source, sampler, variant.height, reader=settings.reader)
            files = [f"{clip_id}-{k:02d}.jpg" for k in range(len(sampled.times))]
            for name, frame in zip(files, sampled.frames, strict=True):
                atomic_write_bytes(out_dir / name, encode_jpeg(frame, settings.jpeg_quality))
            row.update(files=files, times=sampled.times)
        else:
            clip, sampled = _native_clip(source, settings.reader, variant)
            atomic_write_bytes(out_dir / f"{clip_id}.mp4", clip)
            row.update(files=[f"{clip_id}.mp4"], times=[sampled.times[0], sampled.times[-1]])
        row.update(width=int(sampled.frames.shape[2]), height=int(sampled.frames.shape[1]))
    except InputError as error:
        row["error"] = str(error)
    return row


def _every_frame(video_frames: int, video_fps: float) -> tuple[list[int], list[float]]:
    return list(range(video_frames)), [index / video_fps for index in range(video_frames)]


def _native_clip(source: Path, reader: str, variant: VideoVariant) -> tuple[bytes, SampledFrames]:
    """The ``native`` variant's clip: the file as fetched, or re-encoded at ``variant.height`` px and ``variant.fps``
    (either kept as the video has it when unset); InputError naming ``source`` when the clip is over
    ``variant.max_bytes``."""
    limit = variant.max_bytes or 0
    if variant.height is None and variant.fps is None:
        if source.stat().st_size > limit:
            raise InputError(source, f"{source.stat().st_size:,} bytes, over the native variant's max_bytes {limit:,}")
        sampled = read_sampled_frames(source, spread(2), reader=reader)  # readable, and its first and last frame
        return source.read_bytes(), sampled
    sampled = read_sampled_frames(
        source, at_rate(variant.fps) if variant.fps else _every_frame, variant.height, reader=reader
    )
    clip = encode_mp4(sampled.frames, variant.fps or sampled.video_fps)
    if len(clip) > limit:
        raise InputError(source, f"re-encoded to {len(clip):,} bytes, over the native variant's max_bytes {limit:,}")
    return clip, sampled


def _in_workers(work: Callable[..., dict[str, Any]], args: list[tuple], settings: FramesSettings, desc: str) -> list:
    """``work(*a)`` for every ``a`` of ``args``, in ``settings.workers`` processes (which die with this one)."""
    # no bar when stderr is closed (sys.stderr is None then): the stage runs on, silent
    bar = {"total": len(args), "desc": desc, "unit": "clip", "file": sys.stderr, "disable": sys.stderr is None}
    if settings.workers == 1 or len(args) < 2:
        return [work(*a) for a in tqdm(args, **bar)]
    load_frame_reader(settings.reader)  # FFmpeg's libraries loaded once, here: the forked workers inherit them
    # workers die with this process, even a SIGKILLed one; an interrupted run does not wait for their clips
    pool = ProcessPoolExecutor(settings.workers, initializer=die_with_parent, initargs=(os.getpid(),))
    try:
        rows = list(tqdm(pool.map(work, *zip(*args, strict=True)), **bar))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return rows


def extract_frames(items: pd.DataFrame, fetched_dir: Path, out_dir: Path, settings: FramesSettings) -> pd.DataFrame:
    """Write one strip per clip into ``out_dir``; return the index table (failures recorded, never raised)."""
    clips = list(items.itertuples(index=False))
    if settings.source == "dataset":
        bar = {"total": len(clips), "desc": "frames", "unit": "clip", "file": sys.stderr, "disable": sys.stderr is None}
        rows = [_from_dataset(c.id, getattr(c, "strip", ""), fetched_dir, out_dir) for c in tqdm(clips, **bar)]
    else:
        args = [(c.id, c.video, fetched_dir, out_dir, settings) for c in clips]
        rows = _in_workers(_from_video, args, settings, "frames")
    index = pd.DataFrame(rows, columns=INDEX_COLUMNS)
    return index.sort_values("id", ignore_index=True)


def extract_variant(
    items: pd.DataFrame, fetched_dir: Path, out_dir: Path, settings: FramesSettings, variant: VideoVariant
) -> pd.DataFrame:
    """Write a ``frames`` or ``native`` variant's files of every clip into ``out_dir``; return its index table
    (``VARIANT_COLUMNS``, failures recorded, never raised)."""
    out_dir.mkdir(exist_ok=True)
    args = [(c.id, c.video, fetched_dir, out_dir, settings, variant) for c in items.itertuples(index=False)]
    rows = _in_workers(_variant_from_video, args, settings, variant.name)
    return pd.DataFrame(rows, columns=VARIANT_COLUMNS).sort_values("id", ignore_index=True)


def write_frames(settings: FramesSettings) -> None:
    """The egonormia_frames stage: every clip's strip and the index, and each other variant's files and index in a
    folder of its own (``VideoVariant.folder``), replacing data/egonormia/frames/ as a whole."""
    items = read_table(ITEMS, ["id", "video", "strip"])
    with replaced_dir(FRAMES) as work:
        index = extract_frames(items, FETCHED, work, settings)
        write_parquet(work / "index.parquet", index)
        indexes = {"video": index}
        for variant in settings.variants:
            if variant.kind != "strip":
                indexes[variant.name] = extract_variant(items, FETCHED, work / variant.folder, settings, variant)
                write_parquet(work / variant.folder / "index.parquet", indexes[variant.name])
    for name, table in indexes.items():
        said = "frames: " if name == "video" else f"frames: {name}: "  # the strip's lines as they always were
        failed = table[table["error"] != ""]
        for row in failed.itertuples(index=False):
            print(f"{said}{row.id}: {row.error}", file=sys.stderr)
        print(f"{said}{len(table) - len(failed)} of {len(table)} clips extracted", file=sys.stderr)
