"""The frames stage: 1 fps sampling with decord, strips, and per-clip failures that never stop the others."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest

from egoeval.egonormia.frames import extract_frames
from egoeval.egonormia.settings import FramesSettings
from egoeval.errors import InputError
from egoeval.video import decode_all_frames, read_sampled_frames, sample_indices

PARAMS = FramesSettings(source="video", fps=1, frame_height=48, max_width=4096, jpeg_quality=90, workers=1)


def test_sample_indices_at_one_fps_of_thirty() -> None:
    indices, times = sample_indices(video_frames=150, video_fps=30.0, fps=1.0)
    assert indices == [0, 30, 60, 90, 120]
    assert times == [0.0, 1.0, 2.0, 3.0, 4.0]
    indices, times = sample_indices(video_frames=160, video_fps=30.0, fps=2.0)
    assert indices == [0, 15, 30, 45, 60, 75, 90, 105, 120, 135, 150]


def test_sampled_frames_equal_the_same_frames_decoded_in_full(video_factory) -> None:
    path = video_factory(seconds=5.2)
    sampled = read_sampled_frames(path, fps=1.0)
    everything = decode_all_frames(path)
    assert sampled.video_frames == len(everything) == 156
    assert sampled.video_fps == pytest.approx(30.0)
    assert sampled.indices == [0, 30, 60, 90, 120, 150]
    np.testing.assert_array_equal(sampled.frames, everything[sampled.indices])


def test_bad_videos_name_the_file(tmp_path: Path, video_factory) -> None:
    good = video_factory(seconds=5)
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.mp4"
    truncated.write_bytes(good.read_bytes()[:600])
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(b"not a video at all" * 100)
    for bad in (empty, truncated, garbage, tmp_path / "missing.mp4"):
        with pytest.raises(InputError) as caught:
            read_sampled_frames(bad, fps=1.0)
        assert str(bad) in str(caught.value)


def test_wrong_fps_metadata_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "slow.mp4"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 0.5, (32, 32))
    for _ in range(4):
        writer.write(np.zeros((32, 32, 3), np.uint8))
    writer.release()
    with pytest.raises(InputError, match="frame rate"):
        read_sampled_frames(path, fps=1.0)


def test_stage_writes_strips_and_records_failures(tmp_path: Path, video_factory) -> None:
    fetched = tmp_path / "fetched"
    (fetched / "videos").mkdir(parents=True)
    video_factory("ok/a.mp4".replace("/", "_"), seconds=5).rename(fetched / "videos" / "a.mp4")
    (fetched / "videos" / "b.mp4").write_bytes(b"\x00" * 50)
    items = pd.DataFrame({"id": ["b", "a", "c"], "video": ["videos/b.mp4", "videos/a.mp4", ""]})
    out = tmp_path / "frames"
    out.mkdir()
    index = extract_frames(items, fetched, out, PARAMS)
    assert list(index["id"]) == ["a", "b", "c"]
    a, b, c = (index.iloc[i] for i in range(3))
    assert a.error == "" and a.image == "a.jpg" and a.n_frames == 5 and list(a.times) == [0.0, 1.0, 2.0, 3.0, 4.0]
    strip = cv2.imread(str(out / "a.jpg"))
    assert strip.shape == (48, 5 * 72, 3)  # 96x64 frames scaled to height 48 -> 72 wide, five side by side
    assert "b.mp4" in b.error and b.image == ""
    assert "no context video" in c.error
    assert sorted(p.name for p in out.iterdir()) == ["a.jpg"]


def test_strip_is_scaled_to_the_maximum_width(tmp_path: Path, video_factory) -> None:
    fetched = tmp_path / "fetched"
    (fetched / "videos").mkdir(parents=True)
    video_factory(seconds=6).rename(fetched / "videos" / "a.mp4")
    out = tmp_path / "frames"
    out.mkdir()
    extract_frames(
        pd.DataFrame({"id": ["a"], "video": ["videos/a.mp4"]}),
        fetched,
        out,
        PARAMS.model_copy(update={"max_width": 200}),
    )
    assert cv2.imread(str(out / "a.jpg")).shape[1] == 200


def test_default_strip_keeps_each_frame_legible() -> None:
    """A 24 s 1080p clip at 1 fps: each frame keeps a legible height under the largest accepted image side."""
    from egoeval.egonormia.settings import MAX_IMAGE_SIDE
    from egoeval.settings import load_settings
    from egoeval.video import frame_strip

    frames_params = load_settings(Path(__file__).resolve().parents[1] / "params.yaml").egonormia.frames
    frames = np.zeros((24, 1080, 1920, 3), np.uint8)
    strip = frame_strip(frames, frames_params.frame_height, frames_params.max_width)
    assert strip.shape[1] <= MAX_IMAGE_SIDE == 8000
    assert strip.shape[0] >= 180  # the old default (160 px squeezed into 2,048 px) gave 48 px
    short = frame_strip(frames[:5], frames_params.frame_height, frames_params.max_width)
    assert short.shape[:2] == (frames_params.frame_height, 5 * 640)  # no squeeze when it fits


def test_long_gop_h264_with_b_frames_samples_the_same_pixels_as_a_full_decode(tmp_path: Path) -> None:
    """One keyframe for the whole clip and B-frames: the sampler skips non-reference frames it is not asked for."""
    import av

    from egoeval.video import write_h264

    k = np.arange(180)[:, None, None, None]
    x = np.arange(160)[None, None, :, None]
    frames = np.broadcast_to(((x * 3 + k * 7) % 256).astype(np.uint8), (180, 96, 160, 3)).copy()
    frames[:, :, :, 1] = (k[:, :, :, 0] * 5) % 256  # every frame differs from its neighbours
    path = write_h264(tmp_path / "long_gop.mp4", frames, fps=30, gop=1000, bframes=3)
    with av.open(str(path)) as container:
        keyframes = sum(packet.is_keyframe for packet in container.demux(container.streams.video[0]) if packet.size)
        assert keyframes == 1
    sampled = read_sampled_frames(path, fps=1.0)
    everything = decode_all_frames(path)
    assert sampled.indices == [0, 30, 60, 90, 120, 150] and len(everything) == 180
    np.testing.assert_array_equal(sampled.frames, everything[sampled.indices])
