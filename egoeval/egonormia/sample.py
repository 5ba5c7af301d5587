"""The bundled EgoNormia sample: its synthetic egocentric context videos, rendered (the egonormia_sample stage).

``python -m stages.egonormia.sample`` renders ``data/egonormia/sample/videos/<id>.mp4`` for every clip of
``data/egonormia/sample/clips.json`` (params ``egonormia.sample``: seconds, fps, width, height) and removes
videos of clips that are gone. Rendering is a pure function of the clip's ``video_spec`` and the params, so a
rerun gives byte-identical files (OpenCV ``VideoWriter``, fourcc ``mp4v``).

``python -m stages.egonormia.sample --write-manifest`` rewrites the committed
``data/egonormia/sample/manifest.sha256`` (clips.json and every video) from the files on disk; the fetch stage
checks the sample against it, which is how a regenerated sample is proven identical to the pinned one.

``python -m stages.egonormia.sample --balance-positions [--seed N]`` rewrites ``clips.json`` with every clip's
options reordered so gold actions, sensible options and the empty slot spread evenly over the five positions
(``egoeval.egonormia.positions``; seed 0 made the committed file). Videos do not depend on the option order.

A clip's ``video_spec`` (extra field, ignored by readers of the official layout)::

    {"background": [r, g, b],        # wall or sky
     "floor": [r, g, b],             # ground below the horizon
     "horizon": 0.55,                # horizon height, fraction of the frame height
     "walk": 0.5,                    # optional: floor stripes passing per second (camera wearer walking)
     "actors": [{"shape": "person", "color": [r, g, b], "size": 0.4,
                 "path": [[t, x, y], [t, x, y, scale], ...],  # seconds; x, y fractions of the frame
                 "pose": "stand" | [[t, pose], ...],            # person: stand, signal, wave, carry, sit
                 "attached": false,                             # true: moves with the camera (hands)
                 "show": [t0, t1]}]}                            # optional: only visible in [t0, t1)

Shapes: person, wheelchair, bike, car, ball, hand (``size`` a height fraction) and box, door, screen
(``size`` = [width, height] fractions; a door's path scale narrows it, i.e. opens it). The camera sways and
bobs like a head-mounted camera; actors are drawn in list order.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from tqdm import tqdm

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import atomic_write_text
from egoeval.core.io.manifest import write_manifest
from egoeval.egonormia.positions import balance_positions, position_counts
from egoeval.egonormia.schema import read_official_json, source_files
from egoeval.egonormia.settings import SampleSettings

SAMPLE_DIR = Path("data/egonormia/sample")
CLIPS_FILE = SAMPLE_DIR / "clips.json"
VIDEOS_DIR = SAMPLE_DIR / "videos"
MANIFEST = SAMPLE_DIR / "manifest.sha256"

SCALAR_SHAPES = frozenset({"person", "wheelchair", "bike", "car", "ball", "hand"})
RECT_SHAPES = frozenset({"box", "door", "screen"})
POSES = frozenset({"stand", "signal", "wave", "carry", "sit"})
SKIN = (224, 189, 160)
SWAY = (0.018, 0.012)  # head sway / bob amplitude, fractions of width / height
SWAY_HZ, BOB_HZ, ROLL_HZ = 0.35, 1.8, 0.25
STRIPES = 8
LINE = cv2.LINE_AA
NUMBER_LIST = re.compile(r"\[\s+(-?[0-9][0-9.eE+-]*(?:,\s+-?[0-9][0-9.eE+-]*)*)\s+\]")  # a multi-line [1, 2.5]
# ~300 kbit/s and a keyframe every 2 s keep a 6 s clip near 200 KB; fixed here so reruns are byte-identical
WRITER_PARAMS = [cv2.VIDEOWRITER_PROP_BITRATE, 300_000, cv2.VIDEOWRITER_PROP_GOP_SIZE, 60]


def _bgr(rgb: Sequence[float]) -> tuple[int, int, int]:
    return int(rgb[2]), int(rgb[1]), int(rgb[0])


def _shade(rgb: Sequence[float], factor: float) -> tuple[int, int, int]:
    return _bgr([min(255, max(0, round(c * factor))) for c in rgb])


def _pt(x: float, y: float) -> tuple[int, int]:
    return round(x), round(y)


def _is_color(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 3
        and all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255 for c in value)
    )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _actor_problem(actor: object) -> str | None:
    if not isinstance(actor, dict):
        return "an actor must be an object"
    shape = actor.get("shape")
    if shape not in SCALAR_SHAPES | RECT_SHAPES:
        return f"unknown shape {shape!r}"
    if not _is_color(actor.get("color")):
        return f"{shape}: color must be [r, g, b] in 0..255"
    size = actor.get("size")
    if shape in SCALAR_SHAPES and not (_is_number(size) and size > 0):
        return f"{shape}: size must be a positive number"
    if shape in RECT_SHAPES and not (
        isinstance(size, list) and len(size) == 2 and all(_is_number(s) and s > 0 for s in size)
    ):
        return f"{shape}: size must be [width, height] (positive fractions)"
    path = actor.get("path")
    if not isinstance(path, list) or not path:
        return f"{shape}: path must be a non-empty list of [t, x, y] or [t, x, y, scale]"
    if not all(isinstance(p, list) and len(p) in (3, 4) and all(_is_number(v) for v in p) for p in path):
        return f"{shape}: path entries must be [t, x, y] or [t, x, y, scale]"
    times = [p[0] for p in path]
    if any(b <= a for a, b in itertools.pairwise(times)):
        return f"{shape}: path times must increase"
    pose = actor.get("pose", "stand")
    poses = [pose] if isinstance(pose, str) else pose
    if isinstance(pose, list):
        if not all(isinstance(p, list) and len(p) == 2 and _is_number(p[0]) for p in pose):
            return f"{shape}: pose must be a name or a list of [t, name]"
        poses = [p[1] for p in pose]
    if not isinstance(poses, list) or not all(p in POSES for p in poses):
        return f"{shape}: unknown pose in {pose!r} (known: {', '.join(sorted(POSES))})"
    show = actor.get("show")
    if show is not None and not (isinstance(show, list) and len(show) == 2 and all(_is_number(v) for v in show)):
        return f"{shape}: show must be [t0, t1]"
    return None


def spec_problem(spec: object) -> str | None:
    """Why ``spec`` is not a usable video spec, or None."""
    if not isinstance(spec, dict):
        return "video_spec must be an object"
    for key in ("background", "floor"):
        if not _is_color(spec.get(key)):
            return f"video_spec.{key} must be [r, g, b] in 0..255"
    if not (_is_number(spec.get("horizon")) and 0 <= spec["horizon"] <= 1):
        return "video_spec.horizon must be a fraction of the frame height"
    if not _is_number(spec.get("walk", 0)):
        return "video_spec.walk must be a number"
    actors = spec.get("actors")
    if not isinstance(actors, list):
        return "video_spec.actors must be a list"
    for n, actor in enumerate(actors):
        if (problem := _actor_problem(actor)) is not None:
            return f"actor {n}: {problem}"
    return None


def load_specs(clips_path: str | Path) -> dict[str, dict[str, Any]]:
    """The video spec of every clip (validated, clip ids checked by the items schema), keyed by id."""
    ids = read_official_json(clips_path)["id"].tolist()
    data = json.loads(Path(clips_path).read_bytes())
    specs: dict[str, dict[str, Any]] = {}
    for clip_id in ids:
        spec = data[clip_id].get("video_spec")
        if (problem := spec_problem(spec)) is not None:
            raise InputError(clips_path, problem, row=clip_id)
        specs[clip_id] = spec
    return specs


def _path_state(path: list[list[float]], t: float, dt: float) -> tuple[float, float, float, float]:
    """x, y, scale at time t, and the screen speed (fractions of the frame per second)."""
    table = np.array([p if len(p) == 4 else [*p, 1.0] for p in path], dtype=np.float64)

    def at(u: float) -> np.ndarray:
        return np.array([np.interp(u, table[:, 0], table[:, k]) for k in (1, 2, 3)])

    here = at(t)
    speed = float(np.hypot(*(at(t + dt)[:2] - here[:2]))) / dt
    return float(here[0]), float(here[1]), float(here[2]), speed


def _pose_at(pose: str | list[list[Any]], t: float) -> str:
    if isinstance(pose, str):
        return pose
    current = pose[0][1]
    for start, name in pose:
        if start <= t:
            current = name
    return current


def _draw_person(img: np.ndarray, x: float, y: float, h: float, rgb: Sequence[int], pose: str, swing: float) -> None:
    """A stick figure standing on (x, y), h pixels tall; ``swing`` in -1..1 moves arms and legs."""
    color, skin = _bgr(rgb), _bgr(SKIN)
    width = max(2, round(h * 0.08))
    head_r = h * 0.1
    neck = (x, y - h + 2 * head_r)
    hip = (x, y - h * (0.3 if pose == "sit" else 0.45))
    shoulder = (x, neck[1] + h * 0.06)
    leg = h * 0.45
    if pose == "sit":
        knee_l, knee_r = (x - h * 0.12, hip[1] - h * 0.02), (x + h * 0.12, hip[1] - h * 0.02)
        cv2.line(img, _pt(*hip), _pt(*knee_l), color, width, LINE)
        cv2.line(img, _pt(*hip), _pt(*knee_r), color, width, LINE)
        cv2.line(img, _pt(*knee_l), _pt(knee_l[0], y), color, width, LINE)
        cv2.line(img, _pt(*knee_r), _pt(knee_r[0], y), color, width, LINE)
    else:
        for side in (-1, 1):
            angle = side * swing * 0.45
            cv2.line(img, _pt(*hip), _pt(x + math.sin(angle) * leg, hip[1] + math.cos(angle) * leg), color, width, LINE)
    cv2.line(img, _pt(*neck), _pt(*hip), color, width + 1, LINE)
    arm = h * 0.32
    hands: list[tuple[float, float]]
    if pose == "signal":
        hands = [(x - arm * 1.2, shoulder[1]), (x + arm * 0.2, shoulder[1] + arm)]
    elif pose == "wave":
        hands = [(x - arm * 0.5, shoulder[1] - arm * 0.9), (x + arm * (0.6 + 0.3 * swing), shoulder[1] - arm * 0.8)]
    elif pose == "carry":
        hands = [(x - arm * 0.45, shoulder[1] + arm * 0.55), (x + arm * 0.45, shoulder[1] + arm * 0.55)]
    else:
        hands = [(x + side * (arm * 0.25 - swing * side * arm * 0.35), shoulder[1] + arm * 0.9) for side in (-1, 1)]
    for hand in hands:
        cv2.line(img, _pt(*shoulder), _pt(*hand), color, max(1, width - 1), LINE)
    cv2.circle(img, _pt(x, y - h + head_r), max(2, round(head_r)), skin, -1, LINE)


def _draw_wheel(img: np.ndarray, cx: float, cy: float, r: float, rgb: Sequence[int], turn: float) -> None:
    cv2.circle(img, _pt(cx, cy), max(2, round(r)), _bgr(rgb), max(1, round(r * 0.18)), LINE)
    for k in range(3):
        a = turn + k * math.pi / 3
        cv2.line(
            img,
            _pt(cx - r * math.cos(a), cy - r * math.sin(a)),
            _pt(cx + r * math.cos(a), cy + r * math.sin(a)),
            _shade(rgb, 1.6),
            1,
            LINE,
        )


def _draw_rect(img: np.ndarray, x: float, y: float, w: float, h: float, rgb: Sequence[int]) -> None:
    cv2.rectangle(img, _pt(x - w / 2, y - h / 2), _pt(x + w / 2, y + h / 2), _bgr(rgb), -1, LINE)
    cv2.rectangle(img, _pt(x - w / 2, y - h / 2), _pt(x + w / 2, y + h / 2), _shade(rgb, 0.6), 1, LINE)


def _draw_actor(img: np.ndarray, actor: dict[str, Any], t: float, dt: float, shift: tuple[float, float]) -> None:
    show = actor.get("show")
    if show is not None and not show[0] <= t < show[1]:
        return
    height, width = img.shape[:2]
    fx, fy, scale, speed = _path_state(actor["path"], t, dt)
    x, y = fx * width + shift[0], fy * height + shift[1]
    shape, rgb = actor["shape"], actor["color"]
    if shape in RECT_SHAPES:
        w, h = actor["size"][0] * width * scale, actor["size"][1] * height * (1.0 if shape == "door" else scale)
        if shape == "door":
            _draw_rect(img, x, y, w, h, rgb)
            cv2.rectangle(
                img, _pt(x - w / 2 - 3, y - h / 2 - 3), _pt(x + w / 2 + 3, y + h / 2), _shade(rgb, 0.5), 2, LINE
            )
            cv2.circle(img, _pt(x + w * 0.35, y), max(1, round(h * 0.025)), (60, 200, 230), -1, LINE)
        elif shape == "screen":
            _draw_rect(img, x, y, w, h, (25, 25, 30))
            _draw_rect(img, x, y, w * 0.86, h * 0.86, rgb)
            for k in range(3):
                ly = y - h * 0.25 + k * h * 0.2
                cv2.line(img, _pt(x - w * 0.3, ly), _pt(x + w * (0.3 - 0.15 * k), ly), _shade(rgb, 0.55), 1, LINE)
        else:
            _draw_rect(img, x, y, w, h, rgb)
        return
    size = actor["size"] * height * scale
    phase = 2 * math.pi * BOB_HZ * t
    if shape == "person":
        pose = _pose_at(actor.get("pose", "stand"), t)
        swing = math.sin(phase) * (1.0 if pose == "wave" else min(1.0, speed * 6.0))
        _draw_person(img, x, y, size, rgb, pose, swing)
    elif shape == "wheelchair":
        r = size * 0.32
        _draw_person(img, x + r * 0.2, y - r * 0.6, size * 0.85, rgb, "sit", 0.0)
        _draw_wheel(img, x, y - r, r, (50, 50, 55), fx * width / max(r, 1.0))
        cv2.circle(img, _pt(x + r * 1.2, y - r * 0.25), max(1, round(r * 0.25)), (50, 50, 55), 2, LINE)
    elif shape == "bike":
        r = size * 0.25
        turn = 2 * math.pi * 1.5 * t
        for cx in (x - r * 1.6, x + r * 1.6):
            _draw_wheel(img, cx, y - r, r, (30, 30, 30), turn)
        frame = [(x - r * 1.6, y - r), (x - r * 0.2, y - r * 2.2), (x + r * 1.2, y - r * 2.2), (x + r * 1.6, y - r)]
        cv2.polylines(
            img, [np.array([_pt(*p) for p in frame], np.int32)], False, _bgr(rgb), max(1, round(r * 0.15)), LINE
        )
    elif shape == "car":
        length = size * 2.2
        _draw_rect(img, x, y - size * 0.45, length, size * 0.5, rgb)
        _draw_rect(img, x, y - size * 0.85, length * 0.55, size * 0.35, [min(255, c + 40) for c in rgb])
        for cx in (x - length * 0.3, x + length * 0.3):
            _draw_wheel(img, cx, y - size * 0.18, size * 0.18, (20, 20, 20), fx * width / max(size * 0.18, 1.0))
    elif shape == "ball":
        r = max(2.0, size / 2)
        turn = fx * width / r
        cv2.circle(img, _pt(x, y), round(r), _bgr(rgb), -1, LINE)
        cv2.line(
            img,
            _pt(x - r * math.cos(turn), y - r * math.sin(turn)),
            _pt(x + r * math.cos(turn), y + r * math.sin(turn)),
            _shade(rgb, 0.5),
            max(1, round(r * 0.15)),
            LINE,
        )
    else:  # hand
        cv2.ellipse(
            img, _pt(x, y), (max(2, round(size * 0.32)), max(2, round(size * 0.42))), 0, 0, 360, _bgr(rgb), -1, LINE
        )
        for k in range(4):
            fx0 = x - size * 0.24 + k * size * 0.16
            cv2.line(
                img,
                _pt(fx0, y - size * 0.3),
                _pt(fx0 - size * 0.05, y - size * 0.75),
                _bgr(rgb),
                max(2, round(size * 0.11)),
                LINE,
            )


def render_frame(spec: dict[str, Any], t: float, width: int, height: int, dt: float) -> np.ndarray:
    """One BGR frame of the clip at time t (seconds)."""
    sx = SWAY[0] * width * math.sin(2 * math.pi * SWAY_HZ * t)
    sy = SWAY[1] * height * math.sin(2 * math.pi * BOB_HZ * t)
    roll = 0.012 * width * math.sin(2 * math.pi * ROLL_HZ * t)
    img = np.empty((height, width, 3), np.uint8)
    img[:] = _bgr(spec["background"])
    horizon = spec["horizon"] * height + sy
    floor = np.array([_pt(0, horizon + roll), _pt(width, horizon - roll), _pt(width, height), _pt(0, height)], np.int32)
    cv2.fillPoly(img, [floor], _bgr(spec["floor"]), LINE)
    stripe = _shade(spec["floor"], 0.85)
    walked = spec.get("walk", 0) * t
    for k in range(STRIPES):
        u = ((k + walked) % STRIPES) / STRIPES
        ys = horizon + (height - horizon) * u * u
        cv2.line(img, _pt(0, ys + roll * (1 - u)), _pt(width, ys - roll * (1 - u)), stripe, 1, LINE)
    for actor in spec["actors"]:
        shift = (-0.4 * sx, -0.3 * sy) if actor.get("attached") else (sx, sy)
        _draw_actor(img, actor, t, dt, shift)
    cv2.putText(img, f"REC {t:05.2f}", (6, height - 8), cv2.FONT_HERSHEY_SIMPLEX, 0.35, (255, 255, 255), 1, LINE)
    return img


def render_video(spec: dict[str, Any], path: Path, seconds: float, fps: int, width: int, height: int) -> None:
    """Write one mp4 (fourcc mp4v) atomically: a temporary file in the same folder, then a rename."""
    tmp = path.with_name(f".{path.stem}.tmp.mp4")
    writer = cv2.VideoWriter(
        str(tmp), cv2.CAP_FFMPEG, cv2.VideoWriter_fourcc(*"mp4v"), float(fps), (width, height), WRITER_PARAMS
    )
    if not writer.isOpened():
        raise RuntimeError(f"OpenCV cannot write {tmp} with fourcc mp4v")
    try:
        for n in range(round(seconds * fps)):
            writer.write(render_frame(spec, n / fps, width, height, 1.0 / fps))
    finally:
        writer.release()
    os.replace(tmp, path)


def render_sample(clips_path: str | Path, out_dir: str | Path, settings: SampleSettings) -> list[Path]:
    """Render every clip's video into out_dir (stale mp4s removed); return the written paths."""
    specs = load_specs(clips_path)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for clip_id, spec in tqdm(specs.items(), desc="render sample", unit="clip", file=sys.stderr):
        path = out_dir / f"{clip_id}.mp4"
        render_video(spec, path, settings.seconds, settings.fps, settings.width, settings.height)
        written.append(path)
    for stale in set(out_dir.glob("*.mp4")) - set(written):
        stale.unlink()
    return written


def write_sample_manifest(sample_dir: str | Path = SAMPLE_DIR, manifest: str | Path = MANIFEST) -> list[str]:
    """Pin clips.json and every clip's video in the manifest; every video must exist."""
    sample_dir = Path(sample_dir)
    items = read_official_json(sample_dir / CLIPS_FILE.name)
    missing = [i for i in items["id"] if not (sample_dir / "videos" / f"{i}.mp4").is_file()]
    if missing:
        raise InputError(
            sample_dir / "videos", f"{len(missing)} videos missing (first {missing[0]}); render the sample first"
        )
    names = source_files(sample_dir, items)
    write_manifest(manifest, sample_dir, names)
    return names


def _clips_json(clips: dict[str, Any]) -> str:
    """clips.json's layout: two-space indent, lists of numbers on one line."""
    text = json.dumps(clips, indent=2, ensure_ascii=False) + "\n"
    return NUMBER_LIST.sub(lambda m: "[" + re.sub(r",\s+", ", ", m[1]) + "]", text)


def write_balanced_clips(clips_path: str | Path, seed: int) -> dict[str, list[int]]:
    """Rewrite clips.json with its options spread over the positions; return the new per-position counts."""
    read_official_json(clips_path)  # the items schema checks every clip first
    clips = balance_positions(json.loads(Path(clips_path).read_bytes()), seed)
    atomic_write_text(clips_path, _clips_json(clips))
    return position_counts(clips)


def run_sample(
    settings: SampleSettings, write_manifest: bool = False, balance_positions: bool = False, seed: int = 0
) -> None:
    """The egonormia_sample stage: render every clip's video; or, as a tool, pin the sample (``write_manifest``) or
    spread clips.json's options over the positions (``balance_positions``, with ``seed``)."""
    if balance_positions:
        counts = write_balanced_clips(CLIPS_FILE, seed)
        print(f"rewrote {CLIPS_FILE}; clips per position: {counts}", file=sys.stderr)
    elif write_manifest:
        names = write_sample_manifest()
        print(f"wrote {MANIFEST} ({len(names)} files)", file=sys.stderr)
    else:
        written = render_sample(CLIPS_FILE, VIDEOS_DIR, settings)
        print(f"rendered {len(written)} videos into {VIDEOS_DIR}", file=sys.stderr)
