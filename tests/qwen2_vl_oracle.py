"""transformers' Qwen2-VL processors, the reference ``egoeval.egonormia.estimate``'s ``qwen2_vl`` token rule and
``video_tokens`` are checked against: the processors vLLM runs for Qwen2-VL / Qwen2.5-VL, built in code from the
model's preprocessor config (nothing downloaded); a prompt holds ``grid_t * grid_h * grid_w / merge_size ** 2``
placeholder tokens for each image or clip (vLLM's qwen2_vl.py, ``get_replacement_qwen2vl``)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

# Qwen2-VL-7B-Instruct's preprocessor_config.json
# (https://huggingface.co/Qwen/Qwen2-VL-7B-Instruct/blob/main/preprocessor_config.json; Qwen2.5-VL-7B-Instruct's holds
# the same values): what transformers builds the image processor from and, the repository having no
# video_preprocessor_config.json, the video processor too (transformers/video_processing_utils.py)
QWEN2_VL_7B_PREPROCESSOR = {
    "min_pixels": 3136,
    "max_pixels": 12845056,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
}


@functools.cache
def processors() -> tuple[Any, Any]:
    """(image processor, video processor), built once (importing transformers takes seconds)."""
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    return Qwen2VLImageProcessor(**QWEN2_VL_7B_PREPROCESSOR), Qwen2VLVideoProcessor(**QWEN2_VL_7B_PREPROCESSOR)


def image_tokens(width: int, height: int) -> int:
    """The tokens of a ``width`` x ``height`` image: the image processor's ``image_grid_thw`` product over
    merge_size ** 2."""
    processor = processors()[0]
    pixels = np.zeros((height, width, 3), np.uint8)
    grid = processor(images=[pixels], input_data_format="channels_last", return_tensors="pt")["image_grid_thw"]
    return int(grid.prod()) // processor.merge_size**2


def video_tokens(frames: np.ndarray) -> int:
    """The tokens of the frames ``(n, height, width, 3)`` vLLM hands the video processor: its ``video_grid_thw``
    product over merge_size ** 2."""
    processor = processors()[1]
    grid = processor(videos=[frames], input_data_format="channels_last", return_tensors="pt")["video_grid_thw"]
    return int(grid.prod()) // processor.merge_size**2


def opencv_frames(path: str | Path) -> np.ndarray:
    """Every frame of a clip as vLLM's default video loader reads one of at most 32 frames (OpenCV, RGB)."""
    import cv2

    capture = cv2.VideoCapture(str(path))
    frames = []
    try:
        while True:
            ok, frame = capture.read()
            if not ok:
                break
            frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    finally:
        capture.release()
    return np.stack(frames)
