"""Stage egohumans_sample: a bundled synthetic EgoHumans-style sample, generated deterministically.

Each sequence is an egocentric walk: the wearer (``aria01``) drifts forward while turning the head (slow yaw, pitch
and roll, plus quick glances aside at up to 180 degrees/s, as people look at one another; a pinhole camera whose
per-frame pose is written to ``images[].extrinsics``). Several people
(articulated figures: head, torso, swinging arms and legs, distinct colours) walk between random waypoints, cross
and occlude one another (drawn far to near) and leave and re-enter the view. Written to ``data/egohumans/sample``,
a data root laid out as the official EgoHumans download (rawalkhirodkar/egohumans, assets/DOWNLOAD.md):

- ``synthetic/<seq>/ego/aria01/images/rgb/<00001>.jpg`` rendered frames (``time_stamp`` from 1) and
  ``synthetic/<seq>/ego/aria01/calib/<00001>.txt`` the per-frame calibration in the official text layout,
- ``benchmark/sample/all/coco_track/tracking_ego_rgb.json`` ground truth in the official COCO-video layout (videos
  ``synthetic_<seq>_aria01_rgb``; images only where someone is visible, ``frame_id`` counting those; 16-number
  extrinsics; amodal boxes clipped to the image, visibility = the fraction of the figure's pixels seen),
- ``benchmark/sample/all/coco_track/detections_ego_rgb.pkl`` as the official conversion script writes it: the
  ground-truth boxes with score 1.0 under ``det_bboxes`` and each box's pelvis in world coordinates under
  ``roots_3d`` (``{file_name: N x 3}``, the boxes' order; ``keypoints_3d`` empty),
- ``detections/simulated.pkl`` a simulated detector (misses under occlusion, jitter, duplicates, false positives,
  scores; roots as monocular depth gives them, about 10% depth error) in the same pickle layout, and the same boxes
  and roots as MOTChallenge ``detections/det/<video>.txt`` (world x, y, z in columns 8-10),
- ``manifest.sha256`` pinning every other file.

Extrinsics are the world-to-camera 4 x 4 matrix (row-major, OpenCV camera axes) with the world's y axis up.
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from tqdm import tqdm

from egoeval.egohumans.artifacts import SAMPLE
from egoeval.egohumans.settings import SampleSettings
from egoeval.io import atomic_write_bytes, atomic_write_text, replaced_dir, write_json, write_manifest
from egoeval.settings import benchmark_settings
from egoeval.stage import run_stage

OUT_DIR = SAMPLE
HFOV_DEG = 80.0
JPEG_QUALITY = 85
ARENA_X = (-7.0, 7.0)  # metres, world x (right)
ARENA_Z = (2.5, 11.0)  # metres, world z (ahead of the wearer's start)
NEAR = 0.3  # metres; figures with a joint closer than this to the camera plane are not drawn
SHIFT = 4  # cv2 sub-pixel bits
PALETTE_HUES = (0, 20, 40, 60, 95, 120, 150, 175)  # OpenCV hue units (0..179)
PELVIS = 0.52  # the hip joint's height, as a fraction of the person's: the figure's hip and the 3D root
DEPTH_ERROR = 0.1  # the simulated detector's roots: log-normal depth error (about 10%, as monocular depth)


@dataclass(frozen=True)
class Person:
    height: float
    shirt: tuple[int, int, int]
    pants: tuple[int, int, int]
    skin: tuple[int, int, int]
    positions: np.ndarray  # (frames, 2) ground x, z
    headings: np.ndarray  # (frames, 2) unit walking direction in x, z
    phases: np.ndarray  # (frames,) gait phase (radians)
    moving: np.ndarray  # (frames,) 0..1 swing amplitude factor


# ----------------------------------------------------------------------------------------- scene simulation
def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for 2-D arrays without BLAS: BLAS kernels differ in the last bit between CPUs (AVX-512 vs AVX2),
    so the sample's bytes would depend on the machine; products and sums in a fixed order do not."""
    return (a[:, :, None] * b[None, :, :]).sum(axis=1)


def _apply(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` without BLAS (see ``_matmul``)."""
    return _matmul(matrix, vector[:, None])[:, 0]


def _rotation(yaw: float, pitch_down: float, roll: float) -> np.ndarray:
    """World-to-camera rotation for a head turned by yaw (right +), pitch (down +), roll (radians)."""
    cy, sy = np.cos(yaw), np.sin(yaw)
    cp, sp = np.cos(pitch_down), np.sin(pitch_down)
    cr, sr = np.cos(roll), np.sin(roll)
    r_yaw = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    r_pitch = np.array([[1, 0, 0], [0, cp, -sp], [0, sp, cp]])
    r_roll = np.array([[cr, -sr, 0], [sr, cr, 0], [0, 0, 1]])
    flip = np.diag([1.0, -1.0, 1.0])  # camera y points down, world y up
    return _matmul(_matmul(_matmul(r_yaw, r_pitch), r_roll), flip).T


def _glances(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    """Yaw (radians) of quick looks aside, as a wearer glances at someone: about one every 3 s, each a turn of
    20-45 degrees in 0.4-0.8 s (peaks of 40-180 degrees/s), held 0.5-1.5 s, then back as fast."""
    yaw = np.zeros_like(t)
    start = rng.uniform(0.2, 1.5)
    while start < t[-1]:
        angle = np.radians(rng.uniform(20, 45)) * rng.choice([-1, 1])
        turn, hold = rng.uniform(0.4, 0.8), rng.uniform(0.5, 1.5)
        there = np.clip((t - start) / turn, 0, 1)
        back = np.clip((t - start - turn - hold) / turn, 0, 1)
        yaw += angle * (0.5 - 0.5 * np.cos(np.pi * there)) * (0.5 + 0.5 * np.cos(np.pi * back))
        start += 2 * turn + hold + rng.uniform(0.5, 2.0)
    return yaw


def _camera_path(rng: np.random.Generator, params: SampleSettings) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame world-to-camera rotations (F, 3, 3) and camera centres (F, 3)."""
    t = np.arange(params.frames) / params.fps
    a1, a2 = np.radians(rng.uniform(25, 40)), np.radians(rng.uniform(5, 12))
    p1, p2 = rng.uniform(5, 9), rng.uniform(1.2, 2.5)
    f1, f2, f3 = rng.uniform(0, 2 * np.pi, 3)
    yaw = a1 * np.sin(2 * np.pi * t / p1 + f1) + a2 * np.sin(2 * np.pi * t / p2 + f2) + _glances(rng, t)
    pitch = np.radians(8 + 3 * np.sin(2 * np.pi * t / rng.uniform(2, 4) + f3))
    roll = np.radians(2 * np.sin(2 * np.pi * t / rng.uniform(3, 5)))
    rotations = np.stack([_rotation(*angles) for angles in zip(yaw, pitch, roll, strict=True)])
    centres = np.stack(
        [0.3 * np.sin(2 * np.pi * t / 11 + f1), 1.6 + 0.015 * np.sin(2 * np.pi * 1.8 * t), 0.15 * t], axis=1
    )
    return rotations, centres


def _colour(hue: int, saturation: int, value: int) -> tuple[int, int, int]:
    bgr = cv2.cvtColor(np.uint8([[[hue, saturation, value]]]), cv2.COLOR_HSV2BGR)[0, 0]
    return int(bgr[0]), int(bgr[1]), int(bgr[2])


def _people(rng: np.random.Generator, params: SampleSettings) -> list[Person]:
    """People walking between random waypoints, pausing now and then; colours are distinct hues."""
    dt = 1.0 / params.fps
    hues = rng.permutation(PALETTE_HUES)
    people = []
    for k in range(params.people):
        height, speed = rng.uniform(1.55, 1.9), rng.uniform(0.9, 1.5)
        pos = np.array([rng.uniform(*ARENA_X), rng.uniform(*ARENA_Z)])
        target = np.array([rng.uniform(*ARENA_X), rng.uniform(*ARENA_Z)])
        heading, phase, pause, moving = (target - pos) / math.hypot(*(target - pos)), 0.0, 0, 0.0
        positions, headings, phases, movings = [], [], [], []
        for _ in range(params.frames):
            if pause > 0:
                pause -= 1
                moving = max(0.0, moving - 0.2)
            else:
                delta = target - pos
                dist = math.hypot(*delta)  # not np.linalg.norm: BLAS (see _matmul)
                if dist < speed * dt:
                    target = np.array([rng.uniform(*ARENA_X), rng.uniform(*ARENA_Z)])
                    pause = int(rng.integers(0, int(params.fps))) if rng.random() < 0.3 else 0
                else:
                    heading = delta / dist
                    pos = pos + heading * speed * dt
                    phase += 2 * np.pi * speed * dt / 1.4  # one gait cycle per 1.4 m
                    moving = min(1.0, moving + 0.2)
            positions.append(pos.copy())
            headings.append(heading.copy())
            phases.append(phase)
            movings.append(moving)
        hue = int(hues[k % len(hues)])
        people.append(
            Person(
                height=height,
                shirt=_colour(hue, 200, 220),
                pants=_colour((hue + 90) % 180, 120, 90 + 20 * (k % 3)),
                skin=_colour(int(rng.integers(5, 20)), int(rng.integers(60, 140)), int(rng.integers(150, 230))),
                positions=np.array(positions),
                headings=np.array(headings),
                phases=np.array(phases),
                moving=np.array(movings),
            )
        )
    return people


# ----------------------------------------------------------------------------------------- rendering


@dataclass(frozen=True)
class Figure:
    """One person projected into one frame: limb segments and the head, in padded-canvas pixels."""

    depth: float
    segments: list[tuple[np.ndarray, np.ndarray, float, tuple[int, int, int]]]  # p0, p1, thickness px, colour
    head: tuple[np.ndarray, float, tuple[int, int, int]]  # centre, radius px, colour
    roi: tuple[int, int, int, int]  # x0, y0, x1, y1 on the padded canvas (exclusive ends)


def _figure(
    person: Person,
    i: int,
    rot: np.ndarray,
    centre: np.ndarray,
    focal: float,
    principal: np.ndarray,
    canvas: tuple[int, int],
) -> Figure | None:
    """Project person ``person`` at frame ``i``; None when behind the camera or off the padded canvas."""
    h = person.height
    x, z = person.positions[i]
    dx, dz = person.headings[i]
    ground = np.array([x, 0.0, z])
    up, fwd, side = np.array([0.0, 1.0, 0.0]), np.array([dx, 0.0, dz]), np.array([dz, 0.0, -dx])
    swing = 0.45 * person.moving[i] * np.sin(person.phases[i])
    hip, neck, head = ground + up * PELVIS * h, ground + up * 0.80 * h, ground + up * 0.90 * h
    shoulder = neck - up * 0.03 * h
    joints = {"hip": hip, "neck": neck, "head": head}
    for sign, name in ((1, "r"), (-1, "l")):
        leg_root, angle = hip + sign * side * 0.06 * h, sign * swing
        joints[f"leg_{name}0"] = leg_root
        joints[f"leg_{name}1"] = leg_root + 0.50 * h * (fwd * np.sin(angle) - up * np.cos(angle))
        arm_root, angle = shoulder + sign * side * 0.13 * h, -0.8 * sign * swing
        joints[f"arm_{name}0"] = arm_root
        joints[f"arm_{name}1"] = arm_root + 0.36 * h * (fwd * np.sin(angle) - up * np.cos(angle))
    names = list(joints)
    cam = _matmul(np.stack([joints[n] for n in names]) - centre, rot.T)
    if cam[:, 2].min() < NEAR:
        return None
    pix = focal * cam[:, :2] / cam[:, 2:3] + principal
    at = dict(zip(names, pix, strict=True))
    depth_of = dict(zip(names, cam[:, 2], strict=True))

    def width(metres: float, *ends: str) -> float:
        return max(1.0, focal * metres / float(np.mean([depth_of[e] for e in ends])))

    segments = [
        (at["leg_l0"], at["leg_l1"], width(0.075 * h, "leg_l0", "leg_l1"), person.pants),
        (at["leg_r0"], at["leg_r1"], width(0.075 * h, "leg_r0", "leg_r1"), person.pants),
        (at["hip"], at["neck"], width(0.20 * h, "hip", "neck"), person.shirt),
        (at["arm_l0"], at["arm_l1"], width(0.055 * h, "arm_l0", "arm_l1"), person.shirt),
        (at["arm_r0"], at["arm_r1"], width(0.055 * h, "arm_r0", "arm_r1"), person.shirt),
    ]
    radius = max(1.0, focal * 0.065 * h / depth_of["head"])
    reach = max(radius, *(s[2] / 2 for s in segments)) + 2
    x0, y0 = np.floor(pix.min(axis=0) - reach).astype(int)
    x1, y1 = np.ceil(pix.max(axis=0) + reach).astype(int) + 1
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, canvas[0]), min(y1, canvas[1])
    if x0 >= x1 or y0 >= y1:
        return None
    return Figure(float(cam[:, 2].mean()), segments, (at["head"], radius, person.skin), (x0, y0, x1, y1))


def _root(person: Person, i: int) -> tuple[float, float, float]:
    """The person's pelvis (the hip joint of ``_figure``) in world coordinates."""
    x, z = person.positions[i]
    return float(x), float(PELVIS * person.height), float(z)


def _fixed(point: np.ndarray, offset: tuple[int, int] = (0, 0)) -> tuple[int, int]:
    return round((point[0] - offset[0]) * (1 << SHIFT)), round((point[1] - offset[1]) * (1 << SHIFT))


def _draw(figure: Figure, target: np.ndarray, offset: tuple[int, int], value: Any, line_type: int) -> None:
    """Draw a figure onto ``target`` whose pixel (0, 0) is ``offset`` on the padded canvas."""
    for p0, p1, thickness, colour in figure.segments:
        paint = colour if value is None else value
        cv2.line(target, _fixed(p0, offset), _fixed(p1, offset), paint, max(1, round(thickness)), line_type, SHIFT)
    centre, radius, colour = figure.head
    paint = colour if value is None else value
    cv2.circle(target, _fixed(centre, offset), round(radius * (1 << SHIFT)), paint, -1, line_type, SHIFT)


def _rays(width: int, height: int, focal: float) -> np.ndarray:
    """Unit-depth camera rays (N, 3) through the pixel centres of a half-resolution grid (the background's)."""
    u, v = np.meshgrid(np.arange(0, width, 2) + 1.0, np.arange(0, height, 2) + 1.0)
    rays = np.stack([(u.ravel() - width / 2) / focal, (v.ravel() - height / 2) / focal, np.ones(u.size)], axis=1)
    return rays.astype(np.float32)


def _background(rot: np.ndarray, centre: np.ndarray, rays: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Sky gradient above the horizon, a fogged 2 m checkerboard ground below; ray-cast at half resolution."""
    w, h = shape
    dirs = _matmul(rays, rot.astype(np.float32))  # camera rays in world axes
    sine = dirs[:, 1] / np.sqrt((dirs * dirs).sum(axis=1))  # sine of the ray's elevation
    t = -np.float32(centre[1]) / np.minimum(dirs[:, 1], np.float32(-1e-6))  # distance along the ray to the ground
    gx, gz = centre[0] + t * dirs[:, 0], centre[2] + t * dirs[:, 2]
    checker = (np.floor(gx / 2) + np.floor(gz / 2)) % 2 * 2 - 1
    shade = (14 * checker * np.exp(-t / 12))[:, None]
    blend = np.clip(-sine * 40, 0, 1)[:, None]
    ground = (np.array([70, 110, 95], np.float32) + shade) * blend + np.array([180, 180, 170], np.float32) * (1 - blend)
    up = np.clip(sine, 0, 1)[:, None]
    sky = np.array([235, 215, 190], np.float32) * (1 - up) + np.array([200, 140, 80], np.float32) * up
    pixels = np.where((sine < 0)[:, None], ground, sky)
    small = np.clip(pixels, 0, 255).astype(np.uint8).reshape((h + 1) // 2, (w + 1) // 2, 3)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)


@dataclass(frozen=True)
class FrameTruth:
    instance: int
    box: tuple[float, float, float, float]  # x, y, w, h clipped to the image
    visibility: float
    occluded: int
    truncated: int
    root: tuple[float, float, float]  # the pelvis in world coordinates, metres


def _render_frame(
    people: list[Person],
    i: int,
    rot: np.ndarray,
    centre: np.ndarray,
    params: SampleSettings,
    rays: np.ndarray,
    focal: float,
) -> tuple[np.ndarray, list[FrameTruth]]:
    """The frame image and the ground truth of every person whose box overlaps it."""
    w, h = params.width, params.height
    pad = (w // 2, h // 2)
    canvas = (w + 2 * pad[0], h + 2 * pad[1])
    principal = np.array([w / 2 + pad[0], h / 2 + pad[1]])
    figures = [(k, _figure(p, i, rot, centre, focal, principal, canvas)) for k, p in enumerate(people)]
    placed = sorted(((f.depth, k, f) for k, f in figures if f is not None), key=lambda e: (-e[0], e[1]))
    image = _background(rot, centre, rays, (w, h))
    labels = np.zeros((h, w), dtype=np.uint8)
    info: dict[int, tuple[tuple[int, int, int, int], int, int]] = {}  # k -> (canvas box, area, area in image)
    for _, k, figure in placed:
        x0, y0, x1, y1 = figure.roi
        mask = np.zeros((y1 - y0, x1 - x0), dtype=np.uint8)
        _draw(figure, mask, (x0, y0), 1, cv2.LINE_8)
        area = cv2.countNonZero(mask)
        if area == 0:
            continue
        bx, by, bw, bh = cv2.boundingRect(mask)
        ix0, iy0, ix1, iy1 = max(x0, pad[0]), max(y0, pad[1]), min(x1, pad[0] + w), min(y1, pad[1] + h)
        inside = 0
        if ix0 < ix1 and iy0 < iy1:
            part = mask[iy0 - y0 : iy1 - y0, ix0 - x0 : ix1 - x0]
            inside = cv2.countNonZero(part)
            labels[iy0 - pad[1] : iy1 - pad[1], ix0 - pad[0] : ix1 - pad[0]][part > 0] = k + 1
        info[k] = ((x0 + bx, y0 + by, x0 + bx + bw, y0 + by + bh), area, inside)
        _draw(figure, image, pad, None, cv2.LINE_AA)
    seen = np.bincount(labels.ravel(), minlength=len(people) + 1)
    truths = []
    for k in sorted(info):
        (x0, y0, x1, y1), area, inside = info[k]
        cx0, cy0 = max(x0 - pad[0], 0), max(y0 - pad[1], 0)
        cx1, cy1 = min(x1 - pad[0], w), min(y1 - pad[1], h)
        if cx1 - cx0 < 1 or cy1 - cy0 < 1:
            continue
        visible = int(seen[k + 1])
        truths.append(
            FrameTruth(
                instance=k + 2,  # aria01 wears the camera; the people in view are aria02, aria03, ...
                box=(float(cx0), float(cy0), float(cx1 - cx0), float(cy1 - cy0)),
                visibility=round(visible / area, 3),
                occluded=int(inside > 0 and visible < 0.75 * inside),
                truncated=int((cx0, cy0, cx1, cy1) != (x0 - pad[0], y0 - pad[1], x1 - pad[0], y1 - pad[1])),
                root=_root(people[k], i),
            )
        )
    return image, truths


# ----------------------------------------------------------------------------------------- simulated detector


def _detect(
    rng: np.random.Generator, truths: list[FrameTruth], width: int, height: int
) -> tuple[np.ndarray, np.ndarray]:
    """Detector boxes (N x 5: x1, y1, x2, y2, score) for one frame, rounded to 0.01 px and 0.001, and the index in
    ``truths`` each box comes from (-1: a false positive)."""
    rows = []
    for source, t in enumerate(truths):
        x, y, w, h = t.box
        p_hit = 0.97 * float(np.clip((t.visibility - 0.15) / 0.45, 0, 1)) * (0.3 if h < 12 else 1.0)
        if rng.random() >= p_hit:
            continue
        for duplicate in (False, True):
            if duplicate and rng.random() >= 0.03:
                break
            spread = 0.06 if duplicate else 0.03
            cx = x + w / 2 + rng.normal(0, spread * w)
            cy = y + h / 2 + rng.normal(0, spread * h)
            bw, bh = w * np.exp(rng.normal(0, 0.05)), h * np.exp(rng.normal(0, 0.05))
            score = float(np.clip(0.3 + 0.65 * t.visibility + rng.normal(0, 0.1), 0.02, 0.99))
            rows.append(
                [cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2, score * (0.6 if duplicate else 1.0), source]
            )
    for _ in range(int(rng.poisson(0.3))):
        bh = rng.uniform(30, 150)
        bw = bh * rng.uniform(0.3, 0.6)
        x0, y0 = rng.uniform(0, width - bw), rng.uniform(0, height - bh)
        rows.append([x0, y0, x0 + bw, y0 + bh, rng.uniform(0.05, 0.45), -1])
    boxes = np.asarray(rows, dtype=np.float64).reshape(-1, 6)
    boxes[:, [0, 2]] = np.clip(boxes[:, [0, 2]], 0, width)
    boxes[:, [1, 3]] = np.clip(boxes[:, [1, 3]], 0, height)
    boxes = boxes[(boxes[:, 2] - boxes[:, 0] >= 1) & (boxes[:, 3] - boxes[:, 1] >= 1)]
    boxes[:, :4] = np.round(boxes[:, :4], 2)
    boxes[:, 4] = np.round(boxes[:, 4], 3)
    boxes = boxes[np.lexsort((boxes[:, 0], -boxes[:, 4]))]
    return boxes[:, :5], boxes[:, 5].astype(np.int64)


def _detection_roots(
    rng: np.random.Generator,
    boxes: np.ndarray,
    sources: np.ndarray,
    truths: list[FrameTruth],
    camera: tuple[np.ndarray, np.ndarray, float, np.ndarray],
) -> np.ndarray:
    """A world root per detector box (N x 3), as monocular depth gives it: the point on the ray through the box
    centre at the person's depth (a false positive: the depth of a 1.7 m person of the box's height), times a
    log-normal error of DEPTH_ERROR; rounded to the millimetre."""
    rotation, centre, focal, principal = camera
    roots = np.zeros((len(boxes), 3))
    for n, ((x1, y1, x2, y2, _), source) in enumerate(zip(boxes, sources, strict=True)):
        ray = np.array([((x1 + x2) / 2 - principal[0]) / focal, ((y1 + y2) / 2 - principal[1]) / focal, 1.0])
        if source >= 0:
            depth = float(_apply(rotation, np.array(truths[source].root) - centre)[2])
        else:
            depth = focal * 1.7 / max(y2 - y1, 1.0)
        depth *= float(np.exp(rng.normal(0, DEPTH_ERROR)))
        roots[n] = centre + _apply(rotation.T, ray * depth)
    return np.round(roots, 3)


# ----------------------------------------------------------------------------------------- the sample


BIG_SEQUENCE = "synthetic"
ANNOTATION_DIR = "benchmark/sample/all/coco_track"


def sequence_name(index: int) -> str:
    return f"{index + 1:03d}_synthetic"


def video_name(index: int) -> str:
    """The official video name: ``<big sequence>_<sequence>_<camera>_<mode>``."""
    return f"{BIG_SEQUENCE}_{sequence_name(index)}_aria01_rgb"


def _calibration_text(focal: float, width: int, height: int, extrinsics: np.ndarray) -> str:
    """The official per-frame calib file: a header, the person, then intrinsics (15) and extrinsics (12, the 3 x 4
    matrix column-major, as the official reader reshapes to 4 x 3 and transposes) for rgb, left and right."""
    intrinsics = " ".join(f"{v:.6f}" for v in [focal, width / 2, height / 2, *[0.0] * 12])
    pose = " ".join(f"{v:.6f}" for v in extrinsics[:3].T.ravel())
    return "serial intrinsics(15) extrinsic(3x4)\naria01\n" + f"{intrinsics}\n{pose}\n" * 3


def _det_txt(frames: list[tuple[np.ndarray, np.ndarray]]) -> str:
    """MOTChallenge det.txt lines; the world x, y, z columns hold each box's root."""
    lines = [
        f"{frame},-1,{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},{score:.3f},{wx:.3f},{wy:.3f},{wz:.3f}"
        for frame, (boxes, roots) in enumerate(frames, start=1)
        for (x1, y1, x2, y2, score), (wx, wy, wz) in zip(boxes, roots, strict=True)
    ]
    return "".join(line + "\n" for line in lines)


def generate_sample(out_dir: str | os.PathLike[str], params: SampleSettings) -> None:
    """Render the whole sample into ``out_dir`` (replaced as a whole once everything is written)."""
    with replaced_dir(out_dir) as work:
        _generate_into(work, params)


def _generate_into(root: Path, params: SampleSettings) -> None:
    w, h = params.width, params.height
    focal = (w / 2) / np.tan(np.radians(HFOV_DEG) / 2)
    rays = _rays(w, h, focal)
    doc: dict[str, Any] = {
        "categories": [{"id": 0, "name": "pedestrian"}],
        "videos": [],
        "images": [],
        "annotations": [],
    }
    det_bboxes: dict[str, list[np.ndarray]] = {}
    det_roots: dict[str, np.ndarray] = {}
    gt_bboxes: dict[str, list[np.ndarray]] = {}
    gt_roots: dict[str, np.ndarray] = {}
    progress = tqdm(total=params.sequences * params.frames, desc="egohumans sample", unit="frame")
    for s in range(params.sequences):
        name = sequence_name(s)
        scene_rng = np.random.default_rng([params.seed, s, 0])
        det_rng = np.random.default_rng([params.seed, s, 1])
        depth_rng = np.random.default_rng([params.seed, s, 2])
        rotations, centres = _camera_path(scene_rng, params)
        people = _people(scene_rng, params)
        video = video_name(s)
        doc["videos"].append({"id": s + 1, "name": video})
        per_frame: list[tuple[np.ndarray, np.ndarray]] = []
        camera_dir = f"{BIG_SEQUENCE}/{name}/ego/aria01"
        for i in range(params.frames):
            time_stamp = i + 1
            image, truths = _render_frame(people, i, rotations[i], centres[i], params, rays, focal)
            file_name = f"{camera_dir}/images/rgb/{time_stamp:05d}.jpg"
            ok, jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
            if not ok:
                raise RuntimeError(f"JPEG encoding failed for {file_name}")
            atomic_write_bytes(root / file_name, jpeg.tobytes())
            extrinsics = np.eye(4)
            extrinsics[:3] = np.hstack([rotations[i], _apply(-rotations[i], centres[i])[:, None]])
            calib = _calibration_text(focal, w, h, extrinsics)
            atomic_write_text(root / f"{camera_dir}/calib/{time_stamp:05d}.txt", calib)
            boxes, sources = _detect(det_rng, truths, w, h)
            camera = (rotations[i], centres[i], focal, np.array([w / 2, h / 2]))
            roots = _detection_roots(depth_rng, boxes, sources, truths, camera)
            progress.update()
            if not truths:
                continue  # as the official conversion: an image only where someone is visible
            image_id = len(doc["images"])
            doc["images"].append(
                {
                    "file_name": file_name,
                    "height": h,
                    "width": w,
                    "id": image_id,
                    "video_id": s + 1,
                    "frame_id": len(per_frame),
                    "extrinsics": [round(float(e), 6) for e in extrinsics.ravel()],
                    "depth_path": f"{camera_dir}/depth/{time_stamp:05d}.npy",
                }
            )
            for t in truths:
                doc["annotations"].append(
                    {
                        "id": len(doc["annotations"]),
                        "image_id": image_id,
                        "video_id": s + 1,
                        "category_id": 0,
                        "instance_id": t.instance,
                        "bbox": list(t.box),
                        "area": t.box[2] * t.box[3],
                        "occluded": t.occluded,
                        "truncated": t.truncated,
                        "iscrowd": False,
                        "ignore": False,
                        "visibility": t.visibility,
                        "human_name": f"aria{t.instance:02d}",
                        "camera_name": "aria01",
                        "camera_mode": "rgb",
                        "time_stamp": time_stamp,
                    }
                )
            per_frame.append((boxes, roots))
            det_bboxes[file_name] = [boxes.astype(np.float32)]
            det_roots[file_name] = roots.astype(np.float32)
            gt = np.array([[x, y, x + bw, y + bh, 1.0] for x, y, bw, bh in (t.box for t in truths)])
            gt_bboxes[file_name] = [gt]
            gt_roots[file_name] = np.array([t.root for t in truths])
        atomic_write_text(root / "detections" / "det" / f"{video}.txt", _det_txt(per_frame))
    progress.close()
    write_json(root / ANNOTATION_DIR / "tracking_ego_rgb.json", doc)
    official = {"det_bboxes": gt_bboxes, "keypoints_3d": {}, "roots_3d": gt_roots}
    atomic_write_bytes(root / ANNOTATION_DIR / "detections_ego_rgb.pkl", pickle.dumps(official))
    simulated = {"det_bboxes": det_bboxes, "roots_3d": det_roots}
    atomic_write_bytes(root / "detections" / "simulated.pkl", pickle.dumps(simulated, protocol=4))
    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    write_manifest(root / "manifest.sha256", root, names)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    return run_stage(lambda: generate_sample(OUT_DIR, benchmark_settings("egohumans").sample), benchmark="egohumans")


if __name__ == "__main__":
    raise SystemExit(main())
