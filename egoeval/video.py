"""Video reading, once for the project: sample frames at a fixed rate with decord, decoding only those."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from egoeval.io import InputError

MIN_FPS, MAX_FPS = 1.0, 240.0


@dataclass(frozen=True)
class SampledFrames:
    frames: np.ndarray  # (n, height, width, 3) uint8 RGB
    times: list[float]  # seconds from the start of the video, one per frame
    indices: list[int]  # frame numbers decoded
    video_fps: float
    video_frames: int


def sample_indices(video_frames: int, video_fps: float, fps: float) -> tuple[list[int], list[float]]:
    """Frame numbers and times for sampling ``fps`` frames per second: t = 0, 1/fps, 2/fps, ... < duration."""
    duration = video_frames / video_fps
    count = max(1, math.ceil(duration * fps - 1e-9))
    times = [k / fps for k in range(count)]
    indices = [min(video_frames - 1, round(t * video_fps)) for t in times]
    return indices, times


def read_sampled_frames(path: str | Path, fps: float) -> SampledFrames:
    """Decode only the frames needed to sample ``fps`` frames per second; raise InputError on a bad video."""
    import decord  # imported here: decord starts threads at import

    path = Path(path)
    if not path.is_file():
        raise InputError(path, "video file is missing")
    if path.stat().st_size == 0:
        raise InputError(path, "video file is empty (0 bytes)")
    try:
        reader = decord.VideoReader(str(path), ctx=decord.cpu(0), num_threads=1)
        video_frames = len(reader)
        video_fps = float(reader.get_avg_fps())
    except Exception as error:  # decord raises its own DECORDError and RuntimeError subclasses
        raise InputError(path, f"cannot open video: {str(error).splitlines()[0][:200]}") from None
    if video_frames <= 0:
        raise InputError(path, "video has no frames")
    if not (MIN_FPS <= video_fps <= MAX_FPS) or not math.isfinite(video_fps):
        raise InputError(path, f"implausible frame rate in the metadata: {video_fps!r} fps")
    indices, times = sample_indices(video_frames, video_fps, fps)
    try:
        frames = reader.get_batch(indices).asnumpy()
    except Exception as error:
        raise InputError(path, f"cannot decode frames {indices}: {str(error).splitlines()[0][:200]}") from None
    return SampledFrames(frames, times, indices, video_fps, video_frames)


def decode_all_frames(path: str | Path) -> np.ndarray:
    """Every frame of a video (the slow baseline the sampled reader is measured against)."""
    import decord

    reader = decord.VideoReader(str(path), ctx=decord.cpu(0), num_threads=1)
    return reader.get_batch(list(range(len(reader)))).asnumpy()


def frame_strip(frames: np.ndarray, height: int, max_width: int) -> np.ndarray:
    """Frames scaled to ``height`` px each and concatenated left to right.

    Only when the strip would be wider than ``max_width`` is it scaled down as a whole (aspect kept).
    """
    scaled = []
    for frame in frames:
        width = max(1, round(frame.shape[1] * height / frame.shape[0]))
        scaled.append(cv2.resize(frame, (width, height), interpolation=cv2.INTER_AREA))
    strip = np.concatenate(scaled, axis=1)
    if strip.shape[1] > max_width:
        new_height = max(1, round(strip.shape[0] * max_width / strip.shape[1]))
        strip = cv2.resize(strip, (max_width, new_height), interpolation=cv2.INTER_AREA)
    return strip


def encode_jpeg(rgb: np.ndarray, quality: int) -> bytes:
    ok, buffer = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise RuntimeError("JPEG encoding failed")
    return buffer.tobytes()
