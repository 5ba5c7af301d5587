"""Frames stage vs. decoding every frame: the same clips, the same machine, one run.

Goal: sampling 1 fps from 30 fps context videos is at least 5x faster than decoding every frame.
"""

from __future__ import annotations

import time
from pathlib import Path

import cv2
import numpy as np

from bench import OUT, save
from egoeval.video import decode_all_frames, read_sampled_frames


def make_videos(folder: Path, count: int = 8, seconds: float = 10.0, fps: float = 30.0) -> list[Path]:
    """Deterministic 640x360 30 fps clips with moving content."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    texture = rng.integers(0, 255, (360, 1280, 3), dtype=np.uint8)
    paths = []
    for clip in range(count):
        path = folder / f"clip{clip}.mp4"
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (640, 360))
        for k in range(round(seconds * fps)):
            offset = (k * 4 + clip * 37) % 640
            writer.write(np.ascontiguousarray(texture[:, offset : offset + 640]))
        writer.release()
        paths.append(path)
    return paths


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def run() -> dict:
    videos = make_videos(OUT / "frames_videos")
    sampled = best_of(3, lambda: [read_sampled_frames(v, fps=1.0) for v in videos])
    full = best_of(3, lambda: [decode_all_frames(v)[::30] for v in videos])
    same = all(
        np.array_equal(read_sampled_frames(v, 1.0).frames, decode_all_frames(v)[read_sampled_frames(v, 1.0).indices])
        for v in videos[:2]
    )
    result = {
        "clips": len(videos),
        "clip": "10 s, 640x360, 30 fps, mp4v",
        "sampled_1fps_s": round(sampled, 4),
        "decode_all_s": round(full, 4),
        "speedup": round(full / sampled, 2),
        "identical_frames": same,
    }
    save("frames", result)
    print("| frames (8 clips x 10 s) | sampled 1 fps | decode every frame | speed-up | same pixels |")
    print("|---|---|---|---|---|")
    print(f"| seconds (best of 3) | {sampled:.3f} | {full:.3f} | {full / sampled:.1f}x | {same} |")
    return result


if __name__ == "__main__":
    run()
