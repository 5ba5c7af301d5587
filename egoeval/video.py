"""Video reading, once for the project: frames sampled at a fixed rate, by one of two readers (``FRAME_READERS``,
the ``egonormia.frames.reader`` param), each scaled as soon as it is decoded.

``decord`` (the default, the reader the design names) opens the video with its frame index and decodes from the
keyframe before each sampled frame up to it, converting only the sampled frames to RGB. ``pyav`` demuxes with PyAV
(FFmpeg) on one thread and tells the decoder to skip every non-reference frame it is not asked for
(``skip_frame = NONREF``): in long-GOP H.264 (phones, Aria glasses) every reference frame must still be decoded, but
B-frames nobody refers to are not. Both give the pixels of a full decode at the same frame numbers (tested on
mp4v, MJPEG, Xvid and long-GOP H.264 at 24 to 60 fps); bench/frames.py measures them side by side (PyAV takes
less CPU: BENCHMARKS.md). A file either cannot read is an InputError naming it.
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from egoeval.core.errors import InputError
from egoeval.core.io.manifest import read_pinned

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


def uniform_indices(video_frames: int, video_fps: float, count: int) -> tuple[list[int], list[float]]:
    """Frame numbers and times of ``count`` frames spread uniformly over the video, the first and the last frame
    included (``numpy.linspace`` over the frame numbers, rounded; as lmms-eval samples N frames), each once: a
    video shorter than ``count`` frames gives all its frames."""
    indices = sorted({round(x) for x in np.linspace(0, video_frames - 1, min(count, video_frames))})
    return indices, [index / video_fps for index in indices]


Sampler = Callable[[int, float], tuple[list[int], list[float]]]
"""Which frames to decode: (frame count, frame rate) -> (frame numbers, their times in seconds)."""


def at_rate(fps: float) -> Sampler:
    """``fps`` frames a second from t = 0 (``sample_indices``)."""
    return functools.partial(_at_rate, fps=fps)


def _at_rate(video_frames: int, video_fps: float, fps: float) -> tuple[list[int], list[float]]:
    return sample_indices(video_frames, video_fps, fps)


def spread(count: int) -> Sampler:
    """``count`` frames over the whole video (``uniform_indices``)."""
    return functools.partial(uniform_indices, count=count)


def _checked_sampling(
    path: Path, video_frames: int, video_fps: float, sampler: Sampler
) -> tuple[list[int], list[float]]:
    """``sampler``'s frames of a video whose metadata is plausible; InputError naming ``path`` otherwise."""
    if not (MIN_FPS <= video_fps <= MAX_FPS) or not math.isfinite(video_fps):
        raise InputError(path, f"implausible frame rate in the metadata: {video_fps!r} fps")
    if video_frames <= 0:
        raise InputError(path, "video has no frames")
    return sampler(video_frames, video_fps)


def _reason(error: Exception) -> str:
    """The first line of a reader's error, without decord's ``[hh:mm:ss] file.cc:line:`` log prefixes."""
    lines = re.sub(r"\[\d\d:\d\d:\d\d\] \S+:\d+: ", "", str(error)).strip().splitlines()
    return (lines[0] if lines else type(error).__name__)[:200]


def _read_with_decord(path: Path, sampler: Sampler, height: int | None) -> SampledFrames:
    """The sampled frames, read by decord one at a time in order (each decoded from its keyframe, or on from the
    previous one when that is nearer) and scaled at once."""
    import decord

    decord.logging.set_level(decord.logging.QUIET)  # FFmpeg's own messages: the InputError says what went wrong
    try:
        reader = decord.VideoReader(str(path), ctx=decord.cpu(0), num_threads=1)
    except Exception as error:  # decord raises DECORDError (a RuntimeError) for whatever FFmpeg cannot open
        raise InputError(path, f"cannot open video: {_reason(error)}") from None
    video_fps, video_frames = float(reader.get_avg_fps()), len(reader)
    indices, times = _checked_sampling(path, video_frames, video_fps, sampler)
    try:
        frames = [_scaled(reader[index].asnumpy(), height) for index in indices]
    except Exception as error:
        raise InputError(path, f"cannot decode frames: {_reason(error)}") from None
    return SampledFrames(np.stack(frames), times, indices, video_fps, video_frames)


def _frame_index(pts: int, start: int, time_base: float, fps: float) -> int:
    return round((pts - start) * time_base * fps)


def _read_with_pyav(path: Path, sampler: Sampler, height: int | None) -> SampledFrames:
    """The sampled frames, demuxed by PyAV with every unneeded non-reference frame skipped, scaled at once."""
    import av  # imported here: PyAV loads FFmpeg's libraries

    try:
        container = av.open(str(path))
    except Exception as error:  # PyAV raises av.error.* (FFmpeg's errors) and OSError subclasses
        raise InputError(path, f"cannot open video: {_reason(error)}") from None
    with container:
        if not container.streams.video:
            raise InputError(path, "no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "SLICE"
        stream.codec_context.thread_count = 1  # one clip per core: the frames stage runs clips in parallel
        rate = stream.average_rate or stream.guessed_rate
        video_fps = float(rate) if rate else 0.0
        video_frames = int(stream.frames)
        if video_frames <= 0 and stream.duration is not None and MIN_FPS <= video_fps <= MAX_FPS:
            video_frames = round(float(stream.duration * stream.time_base) * video_fps)
        indices, times = _checked_sampling(path, video_frames, video_fps, sampler)
        wanted = set(indices)
        time_base = float(stream.time_base)
        start = stream.start_time or 0
        found: dict[int, np.ndarray] = {}
        try:
            for packet in container.demux(stream):
                if packet.pts is not None:
                    needed = _frame_index(packet.pts, start, time_base, video_fps) in wanted
                    stream.codec_context.skip_frame = "DEFAULT" if needed else "NONREF"
                for frame in packet.decode():
                    if frame.pts is None:
                        continue
                    index = _frame_index(frame.pts, start, time_base, video_fps)
                    if index in wanted and index not in found:
                        found[index] = _scaled(frame.to_ndarray(format="rgb24"), height)
                if len(found) == len(wanted):
                    break
        except Exception as error:
            raise InputError(path, f"cannot decode frames: {_reason(error)}") from None
    missing = [i for i in indices if i not in found]
    if missing:
        raise InputError(path, f"cannot decode frames {missing} (truncated or damaged video?)")
    return SampledFrames(np.stack([found[i] for i in indices]), times, indices, video_fps, video_frames)


FrameReader = Callable[[Path, Sampler, int | None], SampledFrames]
# name (the egonormia.frames.reader param) -> (the module that loads its FFmpeg libraries, the reader)
FRAME_READERS: dict[str, tuple[str, FrameReader]] = {
    "decord": ("decord", _read_with_decord),
    "pyav": ("av", _read_with_pyav),
}


def load_frame_reader(name: str) -> None:
    """Import reader ``name``'s library now (FFmpeg's libraries loaded once: worker processes forked later inherit
    them); ValueError for a name that is no reader."""
    if name not in FRAME_READERS:
        raise ValueError(f"no frame reader {name!r}; the readers: {', '.join(FRAME_READERS)}")
    importlib.import_module(FRAME_READERS[name][0])


def read_sampled_frames(
    path: str | Path, fps: float | Sampler, height: int | None = None, *, reader: str
) -> SampledFrames:
    """Decode what sampling ``fps`` frames per second needs (or the frames a ``Sampler`` names: ``spread(n)``), with
    frame reader ``reader`` (``FRAME_READERS``); InputError naming the file on a bad video.

    With ``height``, each sampled frame is scaled to that height as soon as it is decoded (as ``frame_strip`` would
    scale it), so full-resolution copies are never kept.
    """
    sampler = at_rate(fps) if isinstance(fps, int | float) else fps
    load_frame_reader(reader)
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "video file is missing")
    if path.stat().st_size == 0:
        raise InputError(path, "video file is empty (0 bytes)")
    return FRAME_READERS[reader][1](path, sampler, height)


def _scaled(frame: np.ndarray, height: int | None) -> np.ndarray:
    """``frame`` at ``height`` px high, aspect kept (INTER_AREA); unchanged without a height."""
    if height is None or frame.shape[0] == height:
        return frame
    width = max(1, round(frame.shape[1] * height / frame.shape[0]))
    return cv2.resize(frame, (width, height), interpolation=cv2.INTER_AREA)


def frame_strip(frames: np.ndarray, height: int, max_width: int) -> np.ndarray:
    """Frames scaled to ``height`` px each and concatenated left to right.

    Only when the strip would be wider than ``max_width`` is it scaled down as a whole (aspect kept).
    """
    strip = np.concatenate([_scaled(frame, height) for frame in frames], axis=1)
    if strip.shape[1] > max_width:
        new_height = max(1, round(strip.shape[0] * max_width / strip.shape[1]))
        strip = cv2.resize(strip, (max_width, new_height), interpolation=cv2.INTER_AREA)
    return strip


def encode_jpeg(rgb: np.ndarray, quality: int) -> bytes:
    ok, buffer = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise RuntimeError("JPEG encoding failed")
    return buffer.tobytes()


def read_pinned_image(
    path: str, sha256: str, roots: Iterable[Path], where: str | os.PathLike[str], row: object = None
) -> np.ndarray:
    """An image file's pixels (BGR, as OpenCV reads them), read as ``read_pinned`` reads it (inside the
    data root ``roots``, else an error naming ``where`` and ``row``; its bytes checked against the pinned sha256);
    InputError naming the file when it is empty or no image."""
    data = read_pinned(path, sha256, roots, where, row)
    if not data:
        raise InputError(path, "an empty file (0 bytes): not a frame image")
    try:
        image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    except cv2.error as error:
        raise InputError(path, f"cannot read this frame image: {str(error).strip().splitlines()[-1][:200]}") from None
    if image is None:
        raise InputError(path, "cannot read this frame image")
    return image


def encode_mp4(frames: np.ndarray, fps: float) -> bytes:
    """RGB frames ``(n, height, width, 3)`` as an MP4 (OpenCV's ``mp4v`` writer, which decord, PyAV and vLLM's
    OpenCV video loader read) at ``fps`` frames a second; a frame's odd width or height is cut to even first."""
    import tempfile

    height, width = frames.shape[1] // 2 * 2, frames.shape[2] // 2 * 2
    with tempfile.TemporaryDirectory(prefix="egoeval-mp4-") as folder:
        path = Path(folder) / "clip.mp4"
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), float(fps), (width, height))
        if not writer.isOpened():
            raise RuntimeError("OpenCV cannot write mp4v video here")
        try:
            for frame in frames:
                writer.write(cv2.cvtColor(np.ascontiguousarray(frame[:height, :width]), cv2.COLOR_RGB2BGR))
        finally:
            writer.release()
        return path.read_bytes()


def mp4_shape(data: bytes) -> tuple[int, int, int]:
    """(frames, width, height) of an MP4's first video stream as its header states them (PyAV; nothing decoded);
    ValueError when it holds no readable video stream."""
    import io

    import av

    try:
        with av.open(io.BytesIO(data)) as container:
            if not container.streams.video:
                raise ValueError("no video stream")
            stream = container.streams.video[0]
            return int(stream.frames), int(stream.codec_context.width), int(stream.codec_context.height)
    except av.error.FFmpegError as error:
        raise ValueError(f"not a readable MP4: {_reason(error)}") from None
