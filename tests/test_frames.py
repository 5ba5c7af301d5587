"""The frames stage: 1 fps sampling by either frame reader (decord, the default, or PyAV), equal to a full decode;
strips; per-clip failures that never stop the others."""

from __future__ import annotations

import shutil
from fractions import Fraction
from pathlib import Path
from typing import get_args

import cv2
import numpy as np
import pandas as pd
import pytest
from conftest import write_test_video
from videos import decode_all_frames, write_h264

from egoeval.core.errors import InputError
from egoeval.egonormia.frames import extract_frames
from egoeval.egonormia.settings import FramesSettings
from egoeval.video import FRAME_READERS, read_sampled_frames, sample_indices

READERS = list(FRAME_READERS)
PARAMS = FramesSettings(
    source="video", reader="decord", fps=1, frame_height=48, max_width=4096, jpeg_quality=90, workers=1
)


def moving_frames(count: int, height: int = 96, width: int = 160) -> np.ndarray:
    """RGB frames that all differ from their neighbours (a drifting ramp, green counting the frame)."""
    k = np.arange(count)[:, None, None, None]
    x = np.arange(width)[None, None, :, None]
    frames = np.broadcast_to(((x * 3 + k * 7) % 256).astype(np.uint8), (count, height, width, 3)).copy()
    frames[:, :, :, 1] = (k[:, :, :, 0] * 5) % 256
    return frames


def _opencv_video(path: Path, fourcc: str, fps: float, frames: np.ndarray) -> Path:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, (frames.shape[2], frames.shape[1]))
    assert writer.isOpened(), f"OpenCV cannot write {fourcc}"
    for rgb in frames:
        writer.write(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    writer.release()
    return path


# name -> how to write it into a folder: the codecs and frame rates the readers must agree with a full decode on
VIDEOS = {
    **{
        f"mp4v {fps} fps": lambda d, fps=fps: write_test_video(d / f"mp4v{fps}.mp4", 5.2, fps)
        for fps in (24, 25, 30, 60)
    },
    "MJPEG 30 fps (avi)": lambda d: _opencv_video(d / "mjpeg.avi", "MJPG", 30, moving_frames(156, 64, 96)),
    "Xvid 30 fps (avi)": lambda d: _opencv_video(d / "xvid.avi", "XVID", 30, moving_frames(156, 64, 96)),
    "H.264 30 fps, one keyframe, B-frames": lambda d: write_h264(d / "gop1000.mp4", moving_frames(180), 30, 1000, 3),
    "H.264 30 fps, keyframe every 12, B-frames": lambda d: write_h264(d / "gop12.mp4", moving_frames(180), 30, 12, 3),
    "H.264 25 fps, keyframe every 25": lambda d: write_h264(d / "gop25.mp4", moving_frames(150), 25, 25, 2),
    "H.264 60 fps, no B-frames": lambda d: write_h264(d / "gop250.mp4", moving_frames(360), 60, 250, 0),
    "H.264 29.97 fps, B-frames": lambda d: write_h264(d / "ntsc.mp4", moving_frames(200), Fraction(30000, 1001), 60, 3),
}


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, np.ndarray]]:
    """Each video of ``VIDEOS`` and its every frame (decoded once for the module)."""
    folder = tmp_path_factory.mktemp("videos")
    made = {name: write(folder) for name, write in VIDEOS.items()}
    return {name: (path, decode_all_frames(path)) for name, path in made.items()}


def test_the_readers_are_the_settings_choices() -> None:
    assert set(get_args(FramesSettings.model_fields["reader"].annotation)) == set(FRAME_READERS) == {"decord", "pyav"}


def test_sample_indices_at_one_fps_of_thirty() -> None:
    indices, times = sample_indices(video_frames=150, video_fps=30.0, fps=1.0)
    assert indices == [0, 30, 60, 90, 120]
    assert times == [0.0, 1.0, 2.0, 3.0, 4.0]
    indices, times = sample_indices(video_frames=160, video_fps=30.0, fps=2.0)
    assert indices == [0, 15, 30, 45, 60, 75, 90, 105, 120, 135, 150]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("video", list(VIDEOS))
def test_sampled_frames_equal_the_same_frames_decoded_in_full(videos, video: str, reader: str) -> None:
    """Bit for bit (max abs pixel difference 0) at every sampled frame number, at 1 and 2 fps."""
    path, everything = videos[video]
    for fps in (1.0, 2.0):
        sampled = read_sampled_frames(path, fps=fps, reader=reader)
        assert sampled.video_frames == len(everything)
        assert sampled.indices == sample_indices(len(everything), sampled.video_fps, fps)[0]
        assert sampled.frames.shape == (len(sampled.indices), *everything.shape[1:])
        assert int(np.abs(sampled.frames.astype(int) - everything[sampled.indices]).max()) == 0


@pytest.mark.parametrize("reader", READERS)
def test_the_frame_rate_and_count_are_the_videos(videos, reader: str) -> None:
    rates = {name: read_sampled_frames(videos[name][0], 1.0, reader=reader).video_fps for name in VIDEOS}
    assert rates["mp4v 24 fps"] == 24.0 and rates["H.264 60 fps, no B-frames"] == 60.0
    assert rates["H.264 29.97 fps, B-frames"] == 30000 / 1001
    sampled = read_sampled_frames(videos["mp4v 30 fps"][0], fps=1.0, reader=reader)
    assert (sampled.video_frames, sampled.indices) == (156, [0, 30, 60, 90, 120, 150])


@pytest.mark.bad_input
@pytest.mark.parametrize("reader", READERS)
def test_bad_videos_name_the_file(tmp_path: Path, video_factory, reader: str) -> None:
    good = video_factory(seconds=5)
    streamed = write_h264(tmp_path / "streamed.mp4", moving_frames(180), 30, 60, 3, faststart=True).read_bytes()
    damaged = bytearray(streamed)
    damaged[len(streamed) // 2 :: 50] = bytes(b ^ 0x5A for b in damaged[len(streamed) // 2 :: 50])
    cases = {
        "empty.mp4": b"",
        "truncated.mp4": good.read_bytes()[:600],
        "garbage.mp4": b"not a video at all" * 100,
        "zeros.mp4": b"\x00" * 50,
        "streamed_cut_short.mp4": streamed[: len(streamed) * 2 // 3],  # its index first, then two thirds of it
        "streamed_damaged.mp4": bytes(damaged),  # its index whole: it opens; its frames do not decode
    }
    messages = {}
    for name, data in [*cases.items(), ("missing.mp4", None)]:
        bad = tmp_path / name
        if data is not None:
            bad.write_bytes(data)
        with pytest.raises(InputError) as caught:
            read_sampled_frames(bad, fps=1.0, reader=reader)
        messages[name] = str(caught.value)
        assert messages[name].startswith(f"{bad}: "), messages[name]
        assert "\n" not in messages[name] and "github/workspace" not in messages[name]  # no decord log prefixes
    assert "cannot decode frames" in messages["streamed_damaged.mp4"]
    assert "missing" in messages["missing.mp4"] and "empty" in messages["empty.mp4"]


def test_an_unknown_reader_is_refused(video_factory) -> None:
    with pytest.raises(ValueError, match="no frame reader 'opencv'; the readers: decord, pyav"):
        read_sampled_frames(video_factory(seconds=1), fps=1.0, reader="opencv")


@pytest.mark.bad_input
@pytest.mark.parametrize("reader", READERS)
def test_wrong_fps_metadata_is_refused(tmp_path: Path, reader: str) -> None:
    path = tmp_path / "slow.mp4"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 0.5, (32, 32))
    for _ in range(4):
        writer.write(np.zeros((32, 32, 3), np.uint8))
    writer.release()
    with pytest.raises(InputError, match="frame rate"):
        read_sampled_frames(path, fps=1.0, reader=reader)


@pytest.mark.parametrize("reader", READERS)
def test_stage_writes_strips_and_records_failures(tmp_path: Path, video_factory, reader: str) -> None:
    fetched = tmp_path / "fetched"
    (fetched / "videos").mkdir(parents=True)
    video_factory("ok/a.mp4".replace("/", "_"), seconds=5).rename(fetched / "videos" / "a.mp4")
    (fetched / "videos" / "b.mp4").write_bytes(b"\x00" * 50)
    items = pd.DataFrame({"id": ["b", "a", "c"], "video": ["videos/b.mp4", "videos/a.mp4", ""]})
    out = tmp_path / "frames"
    out.mkdir()
    index = extract_frames(items, fetched, out, PARAMS.model_copy(update={"reader": reader}))
    assert list(index["id"]) == ["a", "b", "c"]
    a, b, c = (index.iloc[i] for i in range(3))
    assert a.error == "" and a.image == "a.jpg" and a.n_frames == 5 and list(a.times) == [0.0, 1.0, 2.0, 3.0, 4.0]
    strip = cv2.imread(str(out / "a.jpg"))
    assert strip.shape == (48, 5 * 72, 3)  # 96x64 frames scaled to height 48 -> 72 wide, five side by side
    assert "b.mp4" in b.error and b.image == ""
    assert "no context video" in c.error
    assert sorted(p.name for p in out.iterdir()) == ["a.jpg"]


def test_both_readers_write_the_same_strips(tmp_path: Path, videos) -> None:
    """The frames stage's outputs do not depend on the reader: the same JPEG bytes and index rows."""
    fetched = tmp_path / "fetched"
    fetched.mkdir()
    names = ["mp4v 25 fps", "H.264 30 fps, one keyframe, B-frames", "H.264 29.97 fps, B-frames"]
    items = pd.DataFrame({"id": [f"clip{k}" for k in range(len(names))], "video": [videos[n][0].name for n in names]})
    for name in names:
        shutil.copyfile(videos[name][0], fetched / videos[name][0].name)
    written = {}
    for reader in READERS:
        out = tmp_path / reader
        out.mkdir()
        index = extract_frames(items, fetched, out, PARAMS.model_copy(update={"reader": reader}))
        assert (index["error"] == "").all(), index["error"].tolist()
        written[reader] = (index.to_json(), {p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert written["decord"] == written["pyav"]


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
    from egoeval.core.settings import load_settings
    from egoeval.egonormia.settings import MAX_IMAGE_SIDE
    from egoeval.video import frame_strip

    frames_params = load_settings(Path(__file__).resolve().parents[1] / "params.yaml").egonormia.frames
    frames = np.zeros((24, 1080, 1920, 3), np.uint8)
    strip = frame_strip(frames, frames_params.frame_height, frames_params.max_width)
    assert strip.shape[1] <= MAX_IMAGE_SIDE == 8000
    assert strip.shape[0] >= 180  # the old default (160 px squeezed into 2,048 px) gave 48 px
    short = frame_strip(frames[:5], frames_params.frame_height, frames_params.max_width)
    assert short.shape[:2] == (frames_params.frame_height, 5 * 640)  # no squeeze when it fits


def test_the_long_gop_clip_has_one_keyframe(videos) -> None:
    """The sampled-equals-full test's hardest case is what it says: one keyframe for the whole clip (the PyAV reader
    skips non-reference frames it is not asked for; decord decodes on from that keyframe)."""
    import av

    with av.open(str(videos["H.264 30 fps, one keyframe, B-frames"][0])) as container:
        keyframes = sum(packet.is_keyframe for packet in container.demux(container.streams.video[0]) if packet.size)
    assert keyframes == 1
