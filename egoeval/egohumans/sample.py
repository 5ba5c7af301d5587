"""The bundled synthetic EgoHumans-style sample of multi-view takes, generated deterministically.

Each take is filmed at once from every view, as EgoHumans' takes are: every person (``aria01``, ``aria02``, ...)
wears Aria glasses whose fisheye RGB camera records the others (each wearer with its own head motion: walking,
looking from one person to another with quick head turns, glances aside; and its own calibration), and
``exo_cameras`` static secondary cameras (``cam01``, ...) on tripods at the edge of the room film everyone. People are
articulated figures (head, torso, swinging arms and legs, distinct colours) walking between random waypoints; they
cross and occlude one another (drawn far to near) and leave and re-enter each view. One world frame (``y`` up, metres;
the anchor wearer ``aria01``'s Aria frame, as in EgoHumans) holds every pose. Written to ``data/egohumans/sample``, a
data root laid out as the official download (rawalkhirodkar/egohumans, assets/DOWNLOAD.md and COCO_VIDEO.md):

- ``synthetic/<seq>/ego/ariaXX/images/rgb/<00001>.jpg`` rendered frames (``time_stamp`` from 1, the same instant in
  every view) and ``ego/ariaXX/calib/<00001>.txt`` the per-frame calibration in the official text layout: Aria's 15
  fisheye intrinsics (FisheyeRadTanThinPrism, radial terms only) and the extrinsics in the wearer's own Aria frame;
- ``synthetic/<seq>/exo/camXX/images/<00001>.jpg`` the secondary cameras' frames, calibrated in
  ``synthetic/<seq>/colmap/workplace/`` as the official code reads it (``cameras.txt``: ``OPENCV_FISHEYE`` with
  fx != fy; ``images.txt``: each camera's pose at time stamp 1 in the COLMAP frame, a scaled and turned copy of the
  world; ``colmap_from_aria_transforms.pkl`` and its inverse: each wearer's Aria frame -> COLMAP; ``points3D.txt``);
- ``synthetic/<seq>/processed_data/fit_poses3d/<00001>.npy`` the 3D ground truth as the official files hold it:
  ``np.save`` of ``{ariaXX: 17 x 4}`` COCO keypoints (x, y, z, 1) in the world frame, every person every time stamp;
- ``benchmark/sample/all/coco_track/tracking_ego_rgb.json`` and ``tracking_exo.json`` in the official COCO-video
  layout (videos ``synthetic_<seq>_<camera>_rgb``; images only where someone is visible, in time-stamp order,
  ``frame_id`` counting a video's images; ego images with 16-number world-to-camera ``extrinsics``, exo images
  without, as the conversion script writes them; ``instance_id`` the wearer's number in every view; amodal boxes
  clipped to the image);
- ``benchmark/sample/all/coco_track/detections_ego_rgb.pkl`` and ``detections_exo.pkl`` as the conversion script
  writes them (``egoeval.egohumans.official_conversion``): the ground-truth boxes with score 1.0 under
  ``det_bboxes``, the 3D poses under ``keypoints_3d``, and for ego images ``roots_3d``: each box's centre pixel and
  the mean over the box of a MiDaS-like depth map (relative inverse depth with its own error and an unknown scale
  and shift per frame; the map itself is not written, as the download lacks it) through the image's extrinsics --
  no metric point (exo: none, as the script has no depth for them); each wrapped ``[array]`` as ``det_bboxes``;
  annotation boxes carry ``visibility`` 1.0 and no occlusion or truncation flags, as the script writes them;
- ``detections/simulated.pkl`` the user's own detector, simulated over every view (misses under occlusion, jitter,
  duplicates, false positives, scores; metric world roots as monocular metric depth gives them, about 10% depth
  error: mode ``file``, the only one with metric roots) in the same pickle layout, and
  the same boxes and roots as MOTChallenge ``detections/det/<video>.txt`` (world x, y, z in columns 8-10);
- ``manifest.sha256`` pinning every other file.

Extrinsics are world-to-camera 4 x 4 matrices (row-major, OpenCV camera axes, proper rotations). The generator uses
no BLAS (see ``_matmul``) and no transcendental function on pixels (NumPy's SIMD float32 ``exp`` rounds otherwise
on CPUs without AVX2), so its bytes are the same on every CPU.
"""

from __future__ import annotations

import io
import math
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from tqdm import tqdm

from egoeval.core.io.atomic import write_json
from egoeval.core.io.commit import replaced_dir
from egoeval.core.io.manifest import write_manifest
from egoeval.egohumans.official_conversion import released_root
from egoeval.egohumans.settings import SampleSettings

EGO_HFOV_DEG = 100.0  # the wearers' fisheye, across the image width
EXO_HFOV_DEG = 90.0
JPEG_QUALITY = 85
ARENA = (-3.5, 3.5)  # metres: the room's floor, x and z
EXO_RADIUS = (6.0, 7.0)  # metres from the room's centre to each tripod
NEAR = 0.3  # metres; figures with a joint closer than this to the camera plane are not drawn
SHIFT = 4  # cv2 sub-pixel bits
PALETTE_HUES = (0, 20, 40, 60, 95, 120, 150, 175)  # OpenCV hue units (0..179)
PELVIS = 0.52  # the hip joint's height, as a fraction of the person's: the figure's hip and the 3D root
EYE = 0.93  # the Aria glasses' height, as a fraction of the person's
TURN_RATE = math.radians(240)  # a walker turns toward the next waypoint at up to this (radians per second)
ACCELERATION = 2.0  # and changes speed by up to this (metres per second squared)
DEPTH_ERROR = 0.1  # monocular depth's log-normal error (about 10%): the detector's roots, the released depth maps
RELATIVE_SCALE = (200.0, 800.0)  # the released depth maps' unknown scale per frame (MiDaS: relative inverse depth)
RELATIVE_SHIFT = (0.0, 40.0)  # and shift
SKY_DEPTH = 30.0  # metres: where the depth maps put the sky (and the floor beyond it)
NEWTON_STEPS = 12
BACKGROUND_STEP = 4  # the background is ray-cast every this many pixels and scaled up


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


# ----------------------------------------------------------------------------------------- geometry without BLAS
def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for 2-D arrays without BLAS: BLAS kernels differ in the last bit between CPUs (AVX-512 vs AVX2),
    so the sample's bytes would depend on the machine; products and sums in a fixed order do not."""
    return (a[:, :, None] * b[None, :, :]).sum(axis=1)


def _apply(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` without BLAS (see ``_matmul``)."""
    return _matmul(matrix, vector[:, None])[:, 0]


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def _unit(v: np.ndarray) -> np.ndarray:
    return v / math.sqrt(float((v * v).sum()))


def _look(forward: np.ndarray, roll: float) -> np.ndarray:
    """World-to-camera rotation (rows: the camera's x right, y down, z ahead in world axes) of a camera looking along
    ``forward``, its x axis level with the ground (world y up), turned by ``roll`` about its axis."""
    z = _unit(forward)
    x = _unit(_cross(z, np.array([0.0, 1.0, 0.0])))
    y = _cross(z, x)
    c, s = math.cos(roll), math.sin(roll)
    return np.stack([c * x + s * y, -s * x + c * y, z])


def _head(yaw: float, pitch_down: float, roll: float) -> np.ndarray:
    """World-to-camera rotation of a head turned by yaw (about world y; 0 looks along +z), pitched down, rolled."""
    forward = np.array(
        [math.sin(yaw) * math.cos(pitch_down), -math.sin(pitch_down), math.cos(yaw) * math.cos(pitch_down)]
    )
    return _look(forward, roll)


def _quaternion_rotation(q: np.ndarray) -> np.ndarray:
    """The rotation of a unit quaternion (w, x, y, z), as COLMAP's ``qvec2rotmat``."""
    w, x, y, z = (float(v) for v in q)
    return np.array(
        [
            [1 - 2 * y * y - 2 * z * z, 2 * x * y - 2 * w * z, 2 * z * x + 2 * w * y],
            [2 * x * y + 2 * w * z, 1 - 2 * x * x - 2 * z * z, 2 * y * z - 2 * w * x],
            [2 * z * x - 2 * w * y, 2 * y * z + 2 * w * x, 1 - 2 * x * x - 2 * y * y],
        ]
    )


def _rotation_quaternion(r: np.ndarray) -> np.ndarray:
    """A unit quaternion (w, x, y, z; w >= 0) of a rotation matrix (the largest-component branch)."""
    trace = r[0, 0] + r[1, 1] + r[2, 2]
    if trace > 0:
        s = 2 * math.sqrt(1 + trace)
        q = [0.25 * s, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s]
    else:
        i = int(np.argmax([r[0, 0], r[1, 1], r[2, 2]]))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2 * math.sqrt(1 + r[i, i] - r[j, j] - r[k, k])
        q = [0.0] * 4
        q[0] = (r[k, j] - r[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (r[j, i] + r[i, j]) / s
        q[1 + k] = (r[k, i] + r[i, k]) / s
    out = np.array(q)
    return -out if out[0] < 0 else out


def _rigid(rotation: np.ndarray, translation: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """The 4 x 4 matrix ``x -> scale * rotation x + translation``."""
    out = np.eye(4)
    out[:3, :3], out[:3, 3] = scale * rotation, translation
    return out


def _inverse(matrix: np.ndarray) -> np.ndarray:
    """Inverse of ``scale * R | t`` (a similarity) without LAPACK."""
    block = matrix[:3, :3]
    scale2 = float((block[0] * block[0]).sum())
    inverse = block.T / scale2
    return _rigid(inverse, -_apply(inverse, matrix[:3, 3]))


@dataclass(frozen=True)
class Lens:
    """A camera model: equidistant fisheye with a radial polynomial in theta (Aria's FisheyeRadTanThinPrism without
    its tangential and thin-prism terms; COLMAP's OPENCV_FISHEYE), fx and fy."""

    fx: float
    fy: float
    cx: float
    cy: float
    radial: tuple[float, ...]  # theta_d = theta (1 + radial[0] theta^2 + radial[1] theta^4 + ...)

    def _distorted(self, theta: np.ndarray) -> np.ndarray:
        t2, power, total = theta * theta, np.ones_like(theta), np.ones_like(theta)
        for k in self.radial:
            power = power * t2
            total = total + k * power
        return theta * total

    def project(self, points: np.ndarray) -> np.ndarray:
        """(N, 3) camera points with z > 0 -> (N, 2) pixels."""
        a, b = points[:, 0] / points[:, 2], points[:, 1] / points[:, 2]
        r = np.sqrt(a * a + b * b)
        scale = np.ones_like(r)
        far = r > 1e-12
        scale[far] = self._distorted(np.arctan(r[far])) / r[far]
        return np.stack([self.fx * scale * a + self.cx, self.fy * scale * b + self.cy], axis=1)

    def unproject(self, pixels: np.ndarray) -> np.ndarray:
        """(N, 2) pixels -> (N, 3) rays with z = 1 (Newton's method on theta)."""
        u, v = (pixels[:, 0] - self.cx) / self.fx, (pixels[:, 1] - self.cy) / self.fy
        wanted = np.sqrt(u * u + v * v)
        theta = wanted.copy()
        for _ in range(NEWTON_STEPS):
            step = 1e-7
            slope = (self._distorted(theta + step) - self._distorted(theta - step)) / (2 * step)
            theta = np.clip(theta + (wanted - self._distorted(theta)) / slope, 0.0, 1.5)
        scale = np.ones_like(wanted)
        far = wanted > 1e-12
        scale[far] = np.tan(theta[far]) / wanted[far]
        return np.stack([u * scale, v * scale, np.ones_like(u)], axis=1)

    def aria_intrinsics(self) -> list[float]:
        """Aria's 15 calibration numbers: f, cx, cy, k0..k5, p0, p1, s0..s3."""
        radial = [*self.radial, *[0.0] * (6 - len(self.radial))]
        return [self.fx, self.cx, self.cy, *radial, *[0.0] * 6]

    def colmap_params(self) -> list[float]:
        """COLMAP's OPENCV_FISHEYE parameters: fx, fy, cx, cy, k1..k4."""
        return [self.fx, self.fy, self.cx, self.cy, *[*self.radial, 0.0, 0.0, 0.0, 0.0][:4]]


@dataclass(frozen=True)
class View:
    """One camera of a take: a wearer's Aria (``wearer`` = the person's index) or a tripod (``wearer`` = -1)."""

    name: str  # ariaXX or camXX
    lens: Lens
    rotations: np.ndarray  # (frames, 3, 3) world -> camera
    centres: np.ndarray  # (frames, 3)
    wearer: int
    rays: np.ndarray  # the background's rays in camera axes (N, 3), float32

    @property
    def ego(self) -> bool:
        return self.wearer >= 0

    @property
    def folder(self) -> str:
        return f"ego/{self.name}" if self.ego else f"exo/{self.name}"

    def image(self, time_stamp: int) -> str:
        return (
            f"{self.folder}/images/rgb/{time_stamp:05d}.jpg"
            if self.ego
            else f"{self.folder}/images/{time_stamp:05d}.jpg"
        )

    def extrinsics(self, i: int) -> np.ndarray:
        return _rigid(self.rotations[i], _apply(-self.rotations[i], self.centres[i]))


# ----------------------------------------------------------------------------------------- scene simulation
def _glances(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    """Yaw (radians) of quick looks aside, as a wearer glances around: about one every 2.5 s, each a turn of
    30-60 degrees in 0.3-0.6 s (peaks of 80-310 degrees/s), held 0.4-1.2 s, then back as fast."""
    yaw = np.zeros_like(t)
    start = rng.uniform(0.2, 1.5)
    while start < t[-1]:
        angle = np.radians(rng.uniform(30, 60)) * rng.choice([-1, 1])
        turn, hold = rng.uniform(0.3, 0.6), rng.uniform(0.4, 1.2)
        there = np.clip((t - start) / turn, 0, 1)
        back = np.clip((t - start - turn - hold) / turn, 0, 1)
        yaw += angle * (0.5 - 0.5 * np.cos(np.pi * there)) * (0.5 + 0.5 * np.cos(np.pi * back))
        start += 2 * turn + hold + rng.uniform(0.3, 1.5)
    return yaw


def _attention(rng: np.random.Generator, people: list[Person], wearer: int, params: SampleSettings) -> np.ndarray:
    """Per frame, the yaw at which the wearer's head points: at one of the others, switching to another every 1-3 s
    with a quick head turn (the head follows its target with a 0.1-0.25 s lag)."""
    others = [k for k in range(len(people)) if k != wearer]
    lag = 1.0 - math.exp(-1.0 / (params.fps * rng.uniform(0.1, 0.25)))
    target, switch = -1, 0.0
    yaw, out = None, np.zeros(params.frames)
    for i in range(params.frames):
        if i / params.fps >= switch:
            target = int(rng.choice([k for k in others if k != target] or others))
            switch = i / params.fps + rng.uniform(1.0, 3.0)
        dx, dz = people[target].positions[i] - people[wearer].positions[i]
        bearing = math.atan2(dx, dz)
        yaw = bearing if yaw is None else yaw + lag * math.remainder(bearing - yaw, 2 * math.pi)
        out[i] = yaw
    return out


def _wearer_path(
    rng: np.random.Generator, people: list[Person], wearer: int, params: SampleSettings
) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame world-to-camera rotations (F, 3, 3) and centres (F, 3) of a wearer's Aria: at eye height above the
    walking person, looking at the others, swaying, glancing aside, bobbing with the gait."""
    t = np.arange(params.frames) / params.fps
    sway, period, phase = np.radians(rng.uniform(5, 12)), rng.uniform(1.2, 2.5), rng.uniform(0, 2 * np.pi)
    yaw = _attention(rng, people, wearer, params) + sway * np.sin(2 * np.pi * t / period + phase) + _glances(rng, t)
    pitch = np.radians(8 + 3 * np.sin(2 * np.pi * t / rng.uniform(2, 4) + phase))
    roll = np.radians(2 * np.sin(2 * np.pi * t / rng.uniform(3, 5)))
    rotations = np.stack([_head(*angles) for angles in zip(yaw.tolist(), pitch.tolist(), roll.tolist(), strict=True)])
    person = people[wearer]
    bob = 0.015 * np.sin(person.phases * 2) * person.moving
    centres = np.stack([person.positions[:, 0], EYE * person.height + bob, person.positions[:, 1]], axis=1)
    return rotations, centres


def _colour(hue: int, saturation: int, value: int) -> tuple[int, int, int]:
    bgr = cv2.cvtColor(np.uint8([[[hue, saturation, value]]]), cv2.COLOR_HSV2BGR)[0, 0]
    return int(bgr[0]), int(bgr[1]), int(bgr[2])


def _people(rng: np.random.Generator, params: SampleSettings) -> list[Person]:
    """People walking between random waypoints in the room, pausing now and then, as people walk: turning toward
    the next waypoint at up to TURN_RATE and speeding up or slowing down at up to ACCELERATION; colours are distinct
    hues."""
    dt = 1.0 / params.fps
    hues = rng.permutation(PALETTE_HUES)
    people = []
    for k in range(params.people):
        height, pace = rng.uniform(1.55, 1.9), rng.uniform(0.6, 1.2)
        pos = np.array([rng.uniform(*ARENA), rng.uniform(*ARENA)])
        target = np.array([rng.uniform(*ARENA), rng.uniform(*ARENA)])
        angle, speed, phase, pause = math.atan2(*(target - pos)), 0.0, 0.0, 0
        positions, headings, phases, movings = [], [], [], []
        for _ in range(params.frames):
            delta = target - pos
            if pause == 0 and math.hypot(*delta) < 0.3:  # not np.linalg.norm: BLAS (see _matmul)
                target = np.array([rng.uniform(*ARENA), rng.uniform(*ARENA)])
                pause = int(rng.integers(0, int(params.fps))) if rng.random() < 0.3 else 0
                delta = target - pos
            turn = math.remainder(math.atan2(*delta) - angle, 2 * math.pi)
            angle += max(-TURN_RATE * dt, min(TURN_RATE * dt, turn))
            wanted = 0.0 if pause > 0 else pace * max(0.0, math.cos(turn))  # slow down for a sharp turn
            speed += max(-ACCELERATION * dt, min(ACCELERATION * dt, wanted - speed))
            pause = max(0, pause - 1)
            heading = np.array([math.sin(angle), math.cos(angle)])
            pos = pos + heading * speed * dt
            phase += 2 * np.pi * speed * dt / 1.4  # one gait cycle per 1.4 m
            positions.append(pos.copy())
            headings.append(heading)
            phases.append(phase)
            movings.append(min(1.0, speed / 0.6))
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


def _lens(rng: np.random.Generator, params: SampleSettings, hfov_deg: float, stretch: bool) -> Lens:
    """A calibration of its own: focal length from the field of view (+-3%), principal point off centre by up to 4
    px, small radial terms; ``stretch``: fy a little above fx (as COLMAP finds for real cameras)."""
    radial = (float(rng.uniform(-0.03, 0.03)), float(rng.uniform(-0.01, 0.01)))
    half = np.radians(hfov_deg / 2)
    theta_d = half * (1 + radial[0] * half**2 + radial[1] * half**4)
    fx = float(params.width / 2 / theta_d * rng.uniform(0.97, 1.03))
    fy = fx * float(rng.uniform(1.002, 1.006)) if stretch else fx
    cx, cy = params.width / 2 + rng.uniform(-4, 4), params.height / 2 + rng.uniform(-4, 4)
    return Lens(
        round(fx, 4), round(fy, 4), round(float(cx), 4), round(float(cy), 4), tuple(round(k, 6) for k in radial)
    )


def _rays(lens: Lens, width: int, height: int) -> np.ndarray:
    """Unit camera rays (N, 3) through the centres of the background's coarse grid (BACKGROUND_STEP pixels)."""
    u, v = np.meshgrid(
        np.arange(0, width, BACKGROUND_STEP) + BACKGROUND_STEP / 2,
        np.arange(0, height, BACKGROUND_STEP) + BACKGROUND_STEP / 2,
    )
    rays = lens.unproject(np.stack([u.ravel(), v.ravel()], axis=1))
    return (rays / np.sqrt((rays * rays).sum(axis=1))[:, None]).astype(np.float32)


def _views(rng: np.random.Generator, people: list[Person], params: SampleSettings) -> list[View]:
    """Every wearer's Aria, then the tripods (facing the room's centre from its edge, 2.6-3.2 m up)."""
    views = []
    for k in range(len(people)):
        lens = _lens(rng, params, EGO_HFOV_DEG, stretch=False)
        rotations, centres = _wearer_path(rng, people, k, params)
        views.append(View(f"aria{k + 1:02d}", lens, rotations, centres, k, _rays(lens, params.width, params.height)))
    start = rng.uniform(0, 2 * np.pi)
    for c in range(params.exo_cameras):
        lens = _lens(rng, params, EXO_HFOV_DEG, stretch=True)
        angle = start + 2 * np.pi * c / max(params.exo_cameras, 1) + rng.uniform(-0.3, 0.3)
        distance = rng.uniform(*EXO_RADIUS)
        centre = np.array([distance * math.sin(angle), rng.uniform(2.6, 3.2), distance * math.cos(angle)])
        aim = np.array([rng.uniform(-1, 1), 0.8, rng.uniform(-1, 1)])
        rotation = _look(aim - centre, float(rng.uniform(-0.02, 0.02)))
        views.append(
            View(
                f"cam{c + 1:02d}",
                lens,
                np.repeat(rotation[None], params.frames, axis=0),
                np.repeat(centre[None], params.frames, axis=0),
                -1,
                _rays(lens, params.width, params.height),
            )
        )
    return views


# ----------------------------------------------------------------------------------------- rendering


@dataclass(frozen=True)
class Figure:
    """One person projected into one frame: limb segments and the head, in padded-canvas pixels."""

    depth: float
    segments: list[tuple[np.ndarray, np.ndarray, float, tuple[int, int, int]]]  # p0, p1, thickness px, colour
    head: tuple[np.ndarray, float, tuple[int, int, int]]  # centre, radius px, colour
    roi: tuple[int, int, int, int]  # x0, y0, x1, y1 on the padded canvas (exclusive ends)


def _joints(person: Person, i: int) -> dict[str, np.ndarray]:
    """The figure's joints at frame ``i`` in world coordinates."""
    h = person.height
    x, z = person.positions[i]
    dx, dz = person.headings[i]
    ground = np.array([x, 0.0, z])
    up, fwd, side = np.array([0.0, 1.0, 0.0]), np.array([dx, 0.0, dz]), np.array([dz, 0.0, -dx])
    swing = 0.45 * person.moving[i] * np.sin(person.phases[i])
    hip, neck, head = ground + up * PELVIS * h, ground + up * 0.80 * h, ground + up * 0.90 * h
    shoulder = neck - up * 0.03 * h
    joints = {"hip": hip, "neck": neck, "head": head, "fwd": fwd, "side": side}
    for sign, name in ((1, "r"), (-1, "l")):
        leg_root, angle = hip + sign * side * 0.06 * h, sign * swing
        joints[f"leg_{name}0"] = leg_root
        joints[f"leg_{name}1"] = leg_root + 0.50 * h * (fwd * np.sin(angle) - up * np.cos(angle))
        arm_root, angle = shoulder + sign * side * 0.13 * h, -0.8 * sign * swing
        joints[f"arm_{name}0"] = arm_root
        joints[f"arm_{name}1"] = arm_root + 0.36 * h * (fwd * np.sin(angle) - up * np.cos(angle))
    return joints


def _figure(person: Person, i: int, view: View, pad: tuple[int, int], canvas: tuple[int, int]) -> Figure | None:
    """Project person ``person`` at frame ``i`` into ``view``; None when behind the camera or off the padded canvas."""
    h = person.height
    joints = _joints(person, i)
    names = [n for n in joints if n not in ("fwd", "side")]
    cam = _matmul(np.stack([joints[n] for n in names]) - view.centres[i], view.rotations[i].T)
    if cam[:, 2].min() < NEAR:
        return None
    pix = view.lens.project(cam) + np.array(pad, dtype=np.float64)
    at = dict(zip(names, pix, strict=True))
    depth_of = dict(zip(names, cam[:, 2], strict=True))
    focal = view.lens.fx

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


def _keypoints(person: Person, i: int) -> np.ndarray:
    """(17, 4) COCO keypoints (x, y, z, 1) of the figure, as the official fit_poses3d files hold them; the hips are
    the leg roots, whose midpoint is the pelvis."""
    j = _joints(person, i)
    h, up, fwd, side = person.height, np.array([0.0, 1.0, 0.0]), j["fwd"], j["side"]
    face = j["head"] + fwd * 0.06 * h
    points = [
        face,  # nose
        face - side * 0.03 * h + up * 0.02 * h,  # left eye
        face + side * 0.03 * h + up * 0.02 * h,  # right eye
        j["head"] - side * 0.06 * h,  # left ear
        j["head"] + side * 0.06 * h,  # right ear
        j["arm_l0"],
        j["arm_r0"],
        0.5 * (j["arm_l0"] + j["arm_l1"]),  # elbows
        0.5 * (j["arm_r0"] + j["arm_r1"]),
        j["arm_l1"],  # wrists
        j["arm_r1"],
        j["leg_l0"],  # hips
        j["leg_r0"],
        0.5 * (j["leg_l0"] + j["leg_l1"]),  # knees
        0.5 * (j["leg_r0"] + j["leg_r1"]),
        j["leg_l1"],  # ankles
        j["leg_r1"],
    ]
    return np.column_stack([np.stack(points), np.ones(17)])


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


def _background(rot: np.ndarray, centre: np.ndarray, rays: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Sky gradient above the horizon, a fogged 2 m checkerboard floor below; ray-cast on a coarse grid. ``rays``:
    unit camera rays (N, 3)."""
    w, h = shape
    r = rot.astype(np.float32)
    # the rays in world axes (rays @ rot, written out: no BLAS), then the floor's point along each
    dx = rays[:, 0] * r[0, 0] + rays[:, 1] * r[1, 0] + rays[:, 2] * r[2, 0]
    sine = rays[:, 0] * r[0, 1] + rays[:, 1] * r[1, 1] + rays[:, 2] * r[2, 1]  # the elevation's sine
    dz = rays[:, 0] * r[0, 2] + rays[:, 1] * r[1, 2] + rays[:, 2] * r[2, 2]
    t = -np.float32(centre[1]) / np.minimum(sine, np.float32(-1e-6))  # distance along the ray to the floor
    gx, gz = np.float32(centre[0]) + t * dx, np.float32(centre[2]) + t * dz
    checker = (np.floor(gx / 2) + np.floor(gz / 2)) % 2 * 2 - 1
    shade = (14 * checker * (12 / (12 + t)))[:, None]  # fog; arithmetic only: rounded alike on every CPU
    blend = np.clip(-sine * 40, 0, 1)[:, None]
    ground = (np.array([70, 110, 95], np.float32) + shade) * blend + np.array([180, 180, 170], np.float32) * (1 - blend)
    up = np.clip(sine, 0, 1)[:, None]
    sky = np.array([235, 215, 190], np.float32) * (1 - up) + np.array([200, 140, 80], np.float32) * up
    pixels = np.where((sine < 0)[:, None], ground, sky)
    small = np.clip(pixels, 0, 255).astype(np.uint8).reshape(-(-h // BACKGROUND_STEP), -(-w // BACKGROUND_STEP), 3)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)


@dataclass(frozen=True)
class FrameTruth:
    instance: int
    box: tuple[float, float, float, float]  # x, y, w, h clipped to the image
    visibility: float  # the fraction of the figure's pixels seen (the simulated detector's; not in the annotation)
    root: tuple[float, float, float]  # the pelvis in world coordinates, metres


def _render_frame(
    people: list[Person], i: int, view: View, params: SampleSettings
) -> tuple[np.ndarray, list[FrameTruth], np.ndarray]:
    """The frame image of ``view``, the ground truth of every person (but its wearer) whose box overlaps it, and the
    image's labels (``k + 1`` where person ``k`` is the nearest thing seen, 0 where the background is)."""
    w, h = params.width, params.height
    pad = (w // 2, h // 2)
    canvas = (w + 2 * pad[0], h + 2 * pad[1])
    figures = [(k, _figure(p, i, view, pad, canvas)) for k, p in enumerate(people) if k != view.wearer]
    placed = sorted(((f.depth, k, f) for k, f in figures if f is not None), key=lambda e: (-e[0], e[1]))
    image = _background(view.rotations[i], view.centres[i], view.rays, (w, h))
    labels = np.zeros((h, w), dtype=np.uint8)
    info: dict[int, tuple[tuple[int, int, int, int], int]] = {}  # k -> (canvas box, area)
    for _, k, figure in placed:
        x0, y0, x1, y1 = figure.roi
        mask = np.zeros((y1 - y0, x1 - x0), dtype=np.uint8)
        _draw(figure, mask, (x0, y0), 1, cv2.LINE_8)
        area = cv2.countNonZero(mask)
        if area == 0:
            continue
        bx, by, bw, bh = cv2.boundingRect(mask)
        ix0, iy0, ix1, iy1 = max(x0, pad[0]), max(y0, pad[1]), min(x1, pad[0] + w), min(y1, pad[1] + h)
        if ix0 < ix1 and iy0 < iy1:
            part = mask[iy0 - y0 : iy1 - y0, ix0 - x0 : ix1 - x0]
            labels[iy0 - pad[1] : iy1 - pad[1], ix0 - pad[0] : ix1 - pad[0]][part > 0] = k + 1
        info[k] = ((x0 + bx, y0 + by, x0 + bx + bw, y0 + by + bh), area)
        _draw(figure, image, pad, None, cv2.LINE_AA)
    seen = np.bincount(labels.ravel(), minlength=len(people) + 1)
    truths = []
    for k in sorted(info):
        (x0, y0, x1, y1), area = info[k]
        cx0, cy0 = max(x0 - pad[0], 0), max(y0 - pad[1], 0)
        cx1, cy1 = min(x1 - pad[0], w), min(y1 - pad[1], h)
        if cx1 - cx0 < 1 or cy1 - cy0 < 1:
            continue
        visible = int(seen[k + 1])
        truths.append(
            FrameTruth(
                instance=k + 1,  # person k wears aria0{k + 1}: the official instance_id in every view
                box=(float(cx0), float(cy0), float(cx1 - cx0), float(cy1 - cy0)),
                visibility=round(visible / area, 3),
                root=_root(people[k], i),
            )
        )
    return image, truths, labels


def _relative_depth(
    rng: np.random.Generator, people: list[Person], i: int, view: View, labels: np.ndarray
) -> np.ndarray:
    """The depth map the official conversion read for an ego image (``processed_data/depth``, not in the download),
    as MiDaS gives it: a relative inverse depth, ``scale / depth + shift`` with an unknown scale and shift per frame
    (RELATIVE_SCALE, RELATIVE_SHIFT), each person's inverse depth off by a log-normal error of DEPTH_ERROR; never
    metres. The background is the floor (its distance on the coarse ray grid, scaled up), the sky SKY_DEPTH; each
    person's pixels are at their pelvis's depth. Arithmetic only (see the module docstring), float64."""
    h, w = labels.shape
    rays, rotation = view.rays.astype(np.float64), view.rotations[i]
    sine = rays[:, 0] * rotation[0, 1] + rays[:, 1] * rotation[1, 1] + rays[:, 2] * rotation[2, 1]  # elevation
    floor = -view.centres[i][1] / np.minimum(sine, -1e-6) * rays[:, 2]
    coarse = np.where(sine < 0, np.minimum(floor, SKY_DEPTH), SKY_DEPTH).reshape(
        -(-h // BACKGROUND_STEP), -(-w // BACKGROUND_STEP)
    )
    inverse = 1.0 / np.repeat(np.repeat(coarse, BACKGROUND_STEP, axis=0), BACKGROUND_STEP, axis=1)[:h, :w]
    for k, person in enumerate(people):
        error = math.exp(float(rng.normal(0, DEPTH_ERROR)))
        if k == view.wearer:
            continue
        depth = float(_apply(rotation, np.array(_root(person, i)) - view.centres[i])[2])
        inverse[labels == k + 1] = error / max(depth, NEAR)
    return float(rng.uniform(*RELATIVE_SCALE)) * inverse + float(rng.uniform(*RELATIVE_SHIFT))


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
    rng: np.random.Generator, boxes: np.ndarray, sources: np.ndarray, truths: list[FrameTruth], view: View, i: int
) -> np.ndarray:
    """A world root per detector box (N x 3), as monocular depth gives it: the point on the ray through the box
    centre at the person's depth (a false positive: the depth of a 1.7 m person of the box's height), times a
    log-normal error of DEPTH_ERROR; rounded to the millimetre."""
    rotation, centre = view.rotations[i], view.centres[i]
    centres = np.stack([(boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2], axis=1)
    rays = view.lens.unproject(centres)
    roots = np.zeros((len(boxes), 3))
    for n, ((_, y1, _, y2, _), source) in enumerate(zip(boxes, sources, strict=True)):
        if source >= 0:
            depth = float(_apply(rotation, np.array(truths[source].root) - centre)[2])
        else:
            depth = view.lens.fy * 1.7 / max(y2 - y1, 1.0)
        depth *= float(np.exp(rng.normal(0, DEPTH_ERROR)))
        roots[n] = centre + _apply(rotation.T, rays[n] * depth)
    return np.round(roots, 3)


# ----------------------------------------------------------------------------------------- the official files


BIG_SEQUENCE = "synthetic"
ANNOTATION_DIR = "benchmark/sample/all/coco_track"
COLMAP_DIR = "colmap/workplace"
POSES_DIR = "processed_data/fit_poses3d"


def sequence_name(index: int) -> str:
    return f"{index + 1:03d}_synthetic"


def video_name(index: int, camera: str = "aria01") -> str:
    """The official video name: ``<big sequence>_<sequence>_<camera>_<mode>`` (exo cameras' mode is rgb too)."""
    return f"{BIG_SEQUENCE}_{sequence_name(index)}_{camera}_rgb"


def _calibration_text(name: str, intrinsics: list[float], extrinsics: np.ndarray) -> str:
    """The official per-frame calib file: a header, the person, then intrinsics (15) and extrinsics (12, the 3 x 4
    matrix column-major, as the official reader reshapes to 4 x 3 and transposes) for rgb, left and right."""
    line15 = " ".join(f"{v:.6f}" for v in intrinsics)
    pose = " ".join(f"{v:.6f}" for v in extrinsics[:3].T.ravel())
    return f"serial intrinsics(15) extrinsic(3x4)\n{name}\n" + f"{line15}\n{pose}\n" * 3


def _random_rotation(rng: np.random.Generator) -> np.ndarray:
    q = rng.normal(size=4)
    return _quaternion_rotation(q / math.sqrt(float((q * q).sum())))


def _colmap_files(
    rng: np.random.Generator, views: list[View], frames: dict[str, np.ndarray], params: SampleSettings
) -> dict[str, bytes]:
    """``colmap/workplace`` of a take, by file name: the exo cameras posed in a COLMAP frame (the world scaled by
    0.5-2, turned and moved) and each wearer's Aria frame (``frames``: world -> that frame) -> COLMAP."""
    colmap = _rigid(_random_rotation(rng), rng.uniform(-5, 5, 3), float(rng.uniform(0.5, 2.0)))  # world -> COLMAP
    cameras = ["# Camera list with one line of data per camera:", "#   CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]"]
    images = [
        "# Image list with two lines of data per image:",
        "#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME",
    ]
    images.append("#   POINTS2D[] as (X, Y, POINT3D_ID)")
    exo = [v for v in views if not v.ego]
    cameras.insert(2, f"# Number of cameras: {len(exo)}")
    images.insert(3, f"# Number of images: {len(exo)}, mean observations per image: 0")
    for n, view in enumerate(exo, start=1):
        params_text = " ".join(repr(v) for v in view.lens.colmap_params())
        cameras.append(f"{n} OPENCV_FISHEYE {params.width} {params.height} {params_text}")
        # COLMAP frame -> camera: the world pose composed with COLMAP -> world, times the scale (COLMAP's units)
        pose = _matmul(view.extrinsics(0), _inverse(colmap))
        scale = math.sqrt(float((colmap[0, :3] * colmap[0, :3]).sum()))
        rotation = pose[:3, :3] * scale
        q = _rotation_quaternion(rotation)
        t = pose[:3, 3] * scale
        fields = " ".join(repr(float(v)) for v in [*q, *t])
        images += [f"{n} {fields} {n} {view.name}/00001.jpg", ""]
    transforms = {name: _matmul(colmap, _inverse(frame)) for name, frame in frames.items()}
    return {
        "cameras.txt": ("\n".join(cameras) + "\n").encode(),
        "images.txt": ("\n".join(images) + "\n").encode(),
        "points3D.txt": b"# 3D point list with one line of data per point:\n# Number of points: 0\n",
        "colmap_from_aria_transforms.pkl": pickle.dumps(transforms, protocol=4),
        "aria_from_colmap_transforms.pkl": pickle.dumps({k: _inverse(v) for k, v in transforms.items()}, protocol=4),
    }


def _aria_frames(rng: np.random.Generator, views: list[View]) -> dict[str, np.ndarray]:
    """World -> each wearer's own Aria frame (gravity-aligned: a turn about y and a shift); aria01's is the world."""
    frames = {}
    for view in (v for v in views if v.ego):
        if view.name == "aria01":
            frames[view.name] = np.eye(4)
            continue
        angle = float(rng.uniform(-np.pi, np.pi))
        turn = np.array([[math.cos(angle), 0, math.sin(angle)], [0, 1, 0], [-math.sin(angle), 0, math.cos(angle)]])
        frames[view.name] = _rigid(turn, rng.uniform(-3, 3, 3))
    return frames


def _pose_file(people: list[Person], i: int) -> bytes:
    """``np.save`` of ``{ariaXX: 17 x 4}``, as the official fit_poses3d files are written."""
    buffer = io.BytesIO()
    poses = {f"aria{k + 1:02d}": _keypoints(p, i) for k, p in enumerate(people)}
    np.save(buffer, np.array(poses, dtype=object), allow_pickle=True)
    return buffer.getvalue()


def _det_txt(frames: list[tuple[np.ndarray, np.ndarray]]) -> str:
    """MOTChallenge det.txt lines; the world x, y, z columns hold each box's root."""
    lines = [
        f"{frame},-1,{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},{score:.3f},{wx:.3f},{wy:.3f},{wz:.3f}"
        for frame, (boxes, roots) in enumerate(frames, start=1)
        for (x1, y1, x2, y2, score), (wx, wy, wz) in zip(boxes, roots, strict=True)
    ]
    return "".join(line + "\n" for line in lines)


def _write(path: Path, data: bytes | str) -> None:
    """One file of the sample (the folder as a whole replaces the last sample once complete: no fsync per file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def generate_sample(out_dir: str | os.PathLike[str], params: SampleSettings) -> None:
    """Render the whole sample into ``out_dir`` (replaced as a whole once everything is written)."""
    with replaced_dir(out_dir) as work:
        _generate_into(work, params)


def _coco() -> dict[str, Any]:
    return {"categories": [{"id": 0, "name": "pedestrian"}], "videos": [], "images": [], "annotations": []}


def _generate_into(root: Path, params: SampleSettings) -> None:
    w, h = params.width, params.height
    docs = {"ego": _coco(), "exo": _coco()}
    official: dict[str, dict[str, Any]] = {m: {"det_bboxes": {}, "keypoints_3d": {}, "roots_3d": {}} for m in docs}
    det_bboxes: dict[str, list[np.ndarray]] = {}
    det_roots: dict[str, np.ndarray] = {}
    views_per_take = params.people + params.exo_cameras
    progress = tqdm(total=params.sequences * params.frames * views_per_take, desc="egohumans sample", unit="frame")
    for s in range(params.sequences):
        take = f"{BIG_SEQUENCE}/{sequence_name(s)}"
        scene_rng = np.random.default_rng([params.seed, s, 0])
        people = _people(scene_rng, params)
        views = _views(scene_rng, people, params)
        frames = _aria_frames(np.random.default_rng([params.seed, s, 3]), views)
        for name, data in _colmap_files(np.random.default_rng([params.seed, s, 4]), views, frames, params).items():
            _write(root / take / COLMAP_DIR / name, data)
        det_rngs = [np.random.default_rng([params.seed, s, 1, v]) for v in range(len(views))]
        relative_rngs = [np.random.default_rng([params.seed, s, 5, v]) for v in range(len(views))]
        depth_rngs = [np.random.default_rng([params.seed, s, 2, v]) for v in range(len(views))]
        video_ids, per_frame = {}, {v.name: [] for v in views}
        for view in views:
            doc = docs["ego" if view.ego else "exo"]
            video_ids[view.name] = len(doc["videos"]) + 1
            doc["videos"].append({"id": video_ids[view.name], "name": video_name(s, view.name)})
        for i in range(params.frames):
            time_stamp = i + 1
            _write(root / take / POSES_DIR / f"{time_stamp:05d}.npy", _pose_file(people, i))
            for v, view in enumerate(views):
                image, truths, labels = _render_frame(people, i, view, params)
                file_name = f"{take}/{view.image(time_stamp)}"
                ok, jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
                if not ok:
                    raise RuntimeError(f"JPEG encoding failed for {file_name}")
                _write(root / file_name, jpeg.tobytes())
                extrinsics = view.extrinsics(i)
                if view.ego:
                    own = _matmul(extrinsics, _inverse(frames[view.name]))  # the wearer's Aria frame -> camera
                    calib = _calibration_text(view.name, view.lens.aria_intrinsics(), own)
                    _write(root / take / f"{view.folder}/calib/{time_stamp:05d}.txt", calib)
                boxes, sources = _detect(det_rngs[v], truths, w, h)
                roots = _detection_roots(depth_rngs[v], boxes, sources, truths, view, i)
                progress.update()
                if not truths:
                    continue  # as the official conversion: an image only where someone is visible
                modality = "ego" if view.ego else "exo"
                doc = docs[modality]
                image_id = len(doc["images"])
                record = {
                    "file_name": file_name,
                    "height": h,
                    "width": w,
                    "id": image_id,
                    "video_id": video_ids[view.name],
                    "frame_id": len(per_frame[view.name]),
                }
                if view.ego:
                    record["extrinsics"] = [round(float(e), 6) for e in extrinsics.ravel()]
                    record["depth_path"] = f"{take}/processed_data/depth/{view.name}/{time_stamp:05d}.pfm"
                doc["images"].append(record)
                for t in truths:
                    doc["annotations"].append(
                        {
                            "id": len(doc["annotations"]),
                            "image_id": image_id,
                            "video_id": video_ids[view.name],
                            "category_id": 0,
                            "instance_id": t.instance,
                            "bbox": list(t.box),
                            "area": t.box[2] * t.box[3],
                            "occluded": False,  # as the official conversion writes every box: nothing
                            "truncated": False,  # about occlusion or truncation (trackers never see them)
                            "iscrowd": False,
                            "ignore": False,
                            "is_vid_train_frame": True,
                            "visibility": 1.0,
                            "human_name": f"aria{t.instance:02d}",
                            "camera_name": view.name,
                            "camera_mode": "rgb",
                            "time_stamp": time_stamp,
                        }
                    )
                per_frame[view.name].append((boxes, roots))
                det_bboxes[file_name] = [boxes.astype(np.float32)]
                det_roots[file_name] = roots.astype(np.float32)
                gt = np.array([[x, y, x + bw, y + bh, 1.0] for x, y, bw, bh in (t.box for t in truths)])
                official[modality]["det_bboxes"][file_name] = [gt]
                keypoints = [_keypoints(people[t.instance - 1], i) for t in truths]
                official[modality]["keypoints_3d"][file_name] = [np.stack(keypoints)]
                if view.ego:  # the official formula on a MiDaS-like map: box-centre pixel and mean depth -> extrinsics
                    depth = _relative_depth(relative_rngs[v], people, i, view, labels)
                    written = np.array(record["extrinsics"]).reshape(4, 4)
                    roots = [released_root(depth, t.box, written) for t in truths]
                    official[modality]["roots_3d"][file_name] = [np.stack(roots)]
        for view in views:
            text = _det_txt(per_frame[view.name])
            _write(root / "detections" / "det" / f"{video_name(s, view.name)}.txt", text)
    progress.close()
    for modality, name in (("ego", "ego_rgb"), ("exo", "exo")):
        write_json(root / ANNOTATION_DIR / f"tracking_{name}.json", docs[modality])
        _write(root / ANNOTATION_DIR / f"detections_{name}.pkl", pickle.dumps(official[modality]))
    simulated = {"det_bboxes": det_bboxes, "roots_3d": det_roots}
    _write(root / "detections" / "simulated.pkl", pickle.dumps(simulated, protocol=4))
    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    write_manifest(root / "manifest.sha256", root, names)
