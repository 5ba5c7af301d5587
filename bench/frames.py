"""The frames stage (source video) on long-GOP 1080p H.264 with each frame reader, side by side with ffmpeg, same
clips, one run.

Clips: 10 s, 1920x1080, 30 fps, H.264 with one keyframe per clip and B-frames (what phones and Aria glasses
record), made here with tests/videos.py's ``write_h264``. Measured, best of ``REPEATS``:

- the single-thread decode bound: ``ffmpeg -threads 1 -i CLIP -f null -`` for every clip, one after another
  (long-GOP H.264 needs every reference frame decoded, so one core decoding everything sets the pace);
- the ffmpeg command a user would run for the same strip, threaded (ffmpeg's default), clip after clip:
  ``ffmpeg -i CLIP -vf fps=1,scale=-2:H,tile=Nx1 -frames:v 1 strip.jpg``;
- the frames stage's own code (``extract_frames``, ``workers`` = the cores), all clips, once per frame reader
  (``egonormia.frames.reader``: ``decord``, the default, and ``pyav``), whose strips must be byte-identical;
- for context, the machine's parallel ceiling: the same single-thread full decodes, one process per core side by
  side (no program that decodes every frame on these cores does better).

Each figure is the best of the runs, in wall seconds and in CPU seconds (this process and its children: the CPU time
barely moves when other jobs share the cores, the wall time does).

Goal (issue 8): the stage in at most 1/1.8 of the decode bound's time on 2 cores, and faster than the threaded
ffmpeg command; issue 29: decord's reader beside PyAV's, the faster one selectable. The ffmpeg binary comes from
the ``imageio-ffmpeg`` package (``pip install -e '.[bench]'``).

Issue 31: then each video variant's preparation beside the strip's on the same clips (``run_variants``; alone:
``python -m bench.frames variants``), one run each.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from videos import write_h264

from bench import OUT, save
from egoeval.egonormia.frames import extract_frames, extract_variant
from egoeval.egonormia.settings import MAX_CLIP_BYTES, FramesSettings, VideoVariant
from egoeval.video import FRAME_READERS

CLIPS, SECONDS, FPS, WIDTH, HEIGHT = 4, 10, 30, 1920, 1080
REPEATS = 3
FRAME_HEIGHT = 360


def ffmpeg_exe() -> str:
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()


def make_clips(folder: Path) -> list[Path]:
    """Deterministic moving 1080p texture, one keyframe per clip (made once, reused)."""
    folder.mkdir(parents=True, exist_ok=True)
    texture = np.random.default_rng(0).integers(0, 256, (HEIGHT // 4, WIDTH // 2, 3), dtype=np.uint8)
    texture = np.repeat(np.repeat(texture, 4, axis=0), 4, axis=1)  # 1080 x 3840
    paths = []
    for clip in range(CLIPS):
        path = folder / f"clip{clip}.mp4"
        if not path.is_file():
            frames = np.stack(
                [
                    texture[:, (k * 8 + clip * 97) % WIDTH : (k * 8 + clip * 97) % WIDTH + WIDTH]
                    for k in range(SECONDS * FPS)
                ]
            )
            write_h264(path, frames, FPS, gop=SECONDS * FPS, bframes=3)
        paths.append(path)
    return paths


def _cpu_seconds() -> float:
    """CPU time of this process and of its children that have exited (the stage's workers, ffmpeg)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``fn()``: the CPU time barely moves when other jobs share the cores."""
    start, cpu = time.perf_counter(), _cpu_seconds()
    fn()
    return time.perf_counter() - start, _cpu_seconds() - cpu


def _run(args: list[str]) -> None:
    subprocess.run(args, check=True, capture_output=True)


def run() -> dict[str, Any]:
    exe = ffmpeg_exe()
    clips = make_clips(OUT / "frames_h264_1080p")
    cores = os.cpu_count() or 1
    work = OUT / "frames_stage"
    work.mkdir(parents=True, exist_ok=True)
    items = pd.DataFrame({"id": [p.stem for p in clips], "video": [p.name for p in clips], "strip": ""})
    settings = {
        reader: FramesSettings(
            source="video",
            reader=reader,
            fps=1,
            frame_height=FRAME_HEIGHT,
            max_width=8000,
            jpeg_quality=90,
            workers=cores,
        )
        for reader in FRAME_READERS
    }

    def decode(clip: Path) -> None:
        _run([exe, "-v", "error", "-threads", "1", "-i", str(clip), "-f", "null", "-"])

    def bound() -> None:
        for clip in clips:
            decode(clip)

    def parallel_decodes() -> None:  # one thread per core, each running its share of the decodes in turn
        with ThreadPoolExecutor(cores) as pool:
            list(pool.map(lambda share: [decode(clip) for clip in share], [clips[k::cores] for k in range(cores)]))

    def ffmpeg_strip() -> None:
        for clip in clips:
            vf = f"fps=1,scale=-2:{FRAME_HEIGHT},tile={SECONDS}x1"
            _run([exe, "-v", "error", "-y", "-i", str(clip), "-vf", vf, "-frames:v", "1", str(work / "ffmpeg.jpg")])

    strips: dict[str, dict[str, bytes]] = {}

    def stage(reader: str) -> None:
        out = work / reader
        out.mkdir(exist_ok=True)
        index = extract_frames(items, clips[0].parent, out, settings[reader])
        assert (index["error"] == "").all() and (index["n_frames"] == SECONDS).all(), index["error"].tolist()
        strips[reader] = {row.image: (out / row.image).read_bytes() for row in index.itertuples()}

    stages = [f"stage_{reader}" for reader in FRAME_READERS]
    measured: dict[str, list[tuple[float, float]]] = {name: [] for name in ["bound", "ceiling", "ffmpeg", *stages]}
    for _ in range(REPEATS):  # interleaved, so a busy moment hits all alike
        measured["bound"].append(_timed(bound))
        measured["ceiling"].append(_timed(parallel_decodes))
        measured["ffmpeg"].append(_timed(ffmpeg_strip))
        for reader in FRAME_READERS:
            measured[f"stage_{reader}"].append(_timed(lambda reader=reader: stage(reader)))
    assert all(written == strips["decord"] for written in strips.values()), "the readers' strips differ"
    times = {name: [wall for wall, _ in values] for name, values in measured.items()}
    cpu = {name: min(used for _, used in values) for name, values in measured.items()}
    best = {name: min(values) for name, values in times.items()}
    result = {
        "clips": f"{CLIPS} x {SECONDS} s, {WIDTH}x{HEIGHT}, {FPS} fps, H.264, 1 keyframe per clip, B-frames",
        "cores": cores,
        "workers": cores,
        "seconds_best": {k: round(v, 3) for k, v in best.items()},
        "seconds_all": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "cpu_seconds_best": {k: round(v, 3) for k, v in cpu.items()},
        "bound_over_stage": {r: round(best["bound"] / best[f"stage_{r}"], 2) for r in FRAME_READERS},
        "ffmpeg_over_stage": {r: round(best["ffmpeg"] / best[f"stage_{r}"], 2) for r in FRAME_READERS},
        "decord_over_pyav": round(best["stage_decord"] / best["stage_pyav"], 2),
        "decord_over_pyav_cpu": round(cpu["stage_decord"] / cpu["stage_pyav"], 2),
        "bound_over_ceiling": round(best["bound"] / best["ceiling"], 2),
        "strips_identical": True,
    }
    save("frames", result)
    rows = {
        "bound": "single-thread decode bound (`ffmpeg -threads 1 … -f null -`)",
        "ceiling": f"{cores} single-thread full decodes side by side (the cores' ceiling)",
        "ffmpeg": f"threaded `ffmpeg -vf fps=1,scale=-2:{FRAME_HEIGHT},tile={SECONDS}x1`",
        **{f"stage_{reader}": f"frames stage, reader {reader} (workers {cores})" for reader in FRAME_READERS},
    }
    print(f"| frames ({CLIPS} clips x {SECONDS} s 1080p long-GOP H.264, {cores} cores) | seconds | CPU seconds |")
    print("|---|---|---|")
    for name, label in rows.items():
        print(f"| {label} | {best[name]:.2f} | {cpu[name]:.2f} |")
    for reader in FRAME_READERS:
        print(
            f"{reader}: bound / stage = {result['bound_over_stage'][reader]}x (goal >= 1.8x); "
            f"ffmpeg / stage = {result['ffmpeg_over_stage'][reader]}x"
        )
    print(
        f"decord / pyav = {result['decord_over_pyav']}x (CPU {result['decord_over_pyav_cpu']}x); "
        f"bound / ceiling = {result['bound_over_ceiling']}x"
    )
    return result | {"variants": run_variants()["variants"]}


VARIANTS = (  # each video variant's preparation (issue 31), beside the strip's; frames 360 px high as the strip's
    VideoVariant(kind="frames", count=8, height=FRAME_HEIGHT),
    VideoVariant(kind="native", max_bytes=MAX_CLIP_BYTES),  # the clip as fetched (checked, first and last frame)
    VideoVariant(kind="native", max_bytes=MAX_CLIP_BYTES, height=FRAME_HEIGHT, fps=2.0),  # re-encoded
)


def run_variants() -> dict[str, Any]:
    """``python -m bench.frames variants``: the frames stage's preparation of each video variant on the same clips,
    reader decord, ``workers`` = the cores, one run each: wall seconds and the clips' video frames per wall second (the
    rate at which context video is prepared), and the frames (or bytes) each variant sends per clip."""
    clips = make_clips(OUT / "frames_h264_1080p")
    cores = os.cpu_count() or 1
    work = OUT / "frames_variants"
    work.mkdir(parents=True, exist_ok=True)
    items = pd.DataFrame({"id": [p.stem for p in clips], "video": [p.name for p in clips], "strip": ""})
    settings = FramesSettings(
        source="video",
        reader="decord",
        fps=1,
        frame_height=FRAME_HEIGHT,
        max_width=8000,
        jpeg_quality=90,
        workers=cores,
    )
    video_frames = CLIPS * SECONDS * FPS
    rows: dict[str, dict[str, Any]] = {}
    wall, cpu = _timed(lambda: extract_frames(items, clips[0].parent, work, settings))
    rows["video (strip, 10 frames at 1 fps)"] = {"seconds": wall, "cpu_seconds": cpu, "sent_per_clip": "1 image"}
    indexes: dict[str, pd.DataFrame] = {}
    for variant in VARIANTS:
        out = work / f"{variant.folder}-{variant.height or 'copy'}"
        wall, cpu = _timed(
            lambda v=variant, o=out: indexes.__setitem__(
                o.name, extract_variant(items, clips[0].parent, o, settings, v)
            )
        )
        index = indexes[out.name]
        assert (index["error"] == "").all(), index["error"].tolist()
        size = sum((out / name).stat().st_size for files in index["files"] for name in files)
        sent = (
            f"{len(index['files'].iloc[0])} images"
            if variant.kind == "frames"
            else f"{size / CLIPS / 2**20:.1f} MiB clip"
        )
        how = f"re-encoded {variant.height} px, {variant.fps or 0:g} fps" if variant.height else "copied"
        label = variant.name + ("" if variant.kind == "frames" else f" ({how})")
        rows[label] = {"seconds": wall, "cpu_seconds": cpu, "sent_per_clip": sent}
    for row in rows.values():
        row["video_frames_per_s"] = round(video_frames / row["seconds"], 1)
        row["seconds"], row["cpu_seconds"] = round(row["seconds"], 3), round(row["cpu_seconds"], 3)
    result = {"clips": f"{CLIPS} x {SECONDS} s, {WIDTH}x{HEIGHT}, {FPS} fps, H.264, 1 keyframe", "cores": cores}
    result["variants"] = rows
    save("frames_variants", result)
    print(
        f"| variant ({CLIPS} clips x {SECONDS} s 1080p H.264, {cores} workers, decord) | seconds | CPU seconds | "
        "video frames/s | sent per clip |"
    )
    print("|---|---|---|---|---|")
    for label, row in rows.items():
        print(
            f"| {label} | {row['seconds']:.2f} | {row['cpu_seconds']:.2f} | {row['video_frames_per_s']:,.0f} | "
            f"{row['sent_per_clip']} |"
        )
    return result


if __name__ == "__main__":
    run_variants() if sys.argv[1:] == ["variants"] else run()
