"""Test videos: written as phones and Aria glasses record them (long-GOP H.264 with B-frames), and decoded whole
(every frame, the oracle each sampled frame reader is compared with). bench/frames.py makes its clips here too."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np


def decode_all_frames(path: str | Path) -> np.ndarray:
    """Every frame of a video, decoded one after another by decord (RGB): the slow full decode each frame reader of
    ``egoeval.video`` must equal at the frame numbers it samples."""
    import decord

    reader = decord.VideoReader(str(path), ctx=decord.cpu(0), num_threads=1)
    return reader.get_batch(list(range(len(reader)))).asnumpy()


def write_h264(
    path: str | Path, frames: np.ndarray, fps: int | Fraction, gop: int = 300, bframes: int = 3, faststart: bool = False
) -> Path:
    """Encode RGB frames as H.264 (libx264 in PyAV) with one keyframe every ``gop`` frames and B-frames: the
    long-GOP shape phones and Aria glasses record. ``fps`` may be a Fraction (30000/1001). With ``faststart`` the
    index (``moov``) comes first, as streamed files have it: a copy cut short then opens and fails only in decoding."""
    import av

    path = Path(path)
    options = {"movflags": "faststart"} if faststart else {}
    with av.open(str(path), "w", options=options) as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = int(frames.shape[2]), int(frames.shape[1])
        stream.pix_fmt = "yuv420p"
        stream.codec_context.gop_size = gop
        stream.options = {"bf": str(bframes), "sc_threshold": "0", "keyint_min": str(gop), "preset": "veryfast"}
        for rgb in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
