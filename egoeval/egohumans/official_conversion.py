"""EgoHumans' own conversion formulas: how the released annotation's boxes and the released pickle's ``roots_3d`` are
made, and the decoding of ``roots_3d`` back into what they hold.

Ported from rawalkhirodkar/egohumans at commit 3e8e7ef2f3f9f0a374eeb2793239ee88679cba12,
``egohumans/tools/create_benchmark/coco_video_format.py`` (``pose_to_bbox``, ``coco_add_to``), and
``egohumans/lib/utils/transforms.py`` (``linear_transform``, commit 5e2a6e04d42cc495f696602e67dbb0530c4aca91),
Apache-2.0. Per ego RGB image the official script:

- boxes each person from the 2D projection of their fitted 3D pose (``pose_to_bbox``: keypoints with confidence
  above 0.5 inside the image, at least 5 of them, the extremes' box scaled by 1.4 about its centre, its corner at
  least pixel 1); the annotation gets ``[int(bbx), int(bby), int(bbw), int(bbh)]``, the pickle's ``det_bboxes``
  ``[int(bbx), int(bby), int(bbx + bbw), int(bby + bbh), 1.0]`` (so a box end may differ by one pixel between the two);
- takes ``[bbx + bbw / 2, bby + bbh / 2, depth[int(bby):int(bby + bbh), int(bbx):int(bbx + bbw)].mean()]`` -- the box
  centre PIXEL and the mean of a MiDaS depth map (``processed_data/depth/<camera>/<t>.pfm``: a relative inverse
  depth with an unknown scale and shift, not metres; the public download does not contain it) -- and writes
  ``linear_transform(that, T=extrinsics)`` as the box's ``roots_3d``: no metric world point.

:func:`decode_released_roots` inverts that formula with the image's extrinsics, giving back each box's centre pixel
and its relative depth value. Pure arithmetic (no BLAS, no LAPACK): the same bytes on every CPU.
"""

from __future__ import annotations

import numpy as np

KEYPOINT_THRESHOLD = 0.5
BOX_PADDING = 1.4
MIN_KEYPOINTS = 5


def pose_to_bbox(
    pose: np.ndarray,
    image_width: int,
    image_height: int,
    keypoint_thres: float = KEYPOINT_THRESHOLD,
    padding: float = BOX_PADDING,
    min_keypoints: int = MIN_KEYPOINTS,
) -> tuple[float, float, float, float] | None:
    """The official box ``(bbx, bby, bbw, bbh)`` (floats) of a projected pose (K x 3: x, y, confidence), or None
    when fewer than ``min_keypoints`` keypoints are confident and inside the image."""
    valid = (pose[:, 2] > keypoint_thres) & (pose[:, 0] > 0) & (pose[:, 0] <= image_width)
    valid &= (pose[:, 1] > 0) & (pose[:, 1] <= image_height)
    if valid.sum() < min_keypoints:
        return None
    x1, x2 = pose[valid, 0].min(), pose[valid, 0].max()
    y1, y2 = pose[valid, 1].min(), pose[valid, 1].max()
    scale_x, scale_y = (x2 - x1) * padding, (y2 - y1) * padding
    bbx = max(1.0, float((x1 + x2) / 2 - scale_x / 2))
    bby = max(1.0, float((y1 + y2) / 2 - scale_y / 2))
    return bbx, bby, float(scale_x), float(scale_y)


def annotation_bbox(box: tuple[float, float, float, float]) -> list[int]:
    """The annotation's ``bbox`` of an official box: ``[int(bbx), int(bby), int(bbw), int(bbh)]``."""
    return [int(v) for v in box]


def released_bbox(box: tuple[float, float, float, float]) -> list[float]:
    """The pickle's ``det_bboxes`` row of an official box:
    ``[int(bbx), int(bby), int(bbx + bbw), int(bby + bbh), 1.0]``."""
    bbx, bby, bbw, bbh = box
    return [float(int(bbx)), float(int(bby)), float(int(bbx + bbw)), float(int(bby + bbh)), 1.0]


def box_depth(depth: np.ndarray, box: tuple[float, float, float, float]) -> float:
    """The official mean of a depth map over a box: ``depth[int(bby):int(bby + bbh), int(bbx):int(bbx + bbw)]``."""
    bbx, bby, bbw, bbh = box
    return float(depth[int(bby) : int(bby + bbh), int(bbx) : int(bbx + bbw)].mean())


def linear_transform(points: np.ndarray, transform: np.ndarray) -> np.ndarray:
    """The official ``linear_transform``: (N, 3) points through a 4 x 4 matrix in homogeneous coordinates, divided by
    the fourth coordinate. Products and sums in a fixed order (no BLAS)."""
    homogeneous = np.concatenate([np.asarray(points, np.float64), np.ones((len(points), 1))], axis=1)
    out = (np.asarray(transform, np.float64)[None, :, :] * homogeneous[:, None, :]).sum(axis=2)
    return out[:, :3] / out[:, 3:]


def released_root(depth: np.ndarray, box: tuple[float, float, float, float], extrinsics: np.ndarray) -> np.ndarray:
    """One box's ``roots_3d`` as the official script writes it: its centre pixel and mean depth through the image's
    4 x 4 ``extrinsics`` (:func:`linear_transform`)."""
    bbx, bby, bbw, bbh = box
    return linear_transform(np.array([[bbx + bbw / 2, bby + bbh / 2, box_depth(depth, box)]]), extrinsics)[0]


def decode_released_roots(roots: np.ndarray, extrinsics: np.ndarray) -> np.ndarray:
    """(N, 3) ``roots_3d`` of one image -> (N, 3) ``u, v, depth``: the box-centre pixel and the relative (not metric)
    depth value the official script put through ``extrinsics`` (a 4 x 4 matrix whose last row is ``0 0 0 1``).

    Inverts ``x -> A x + t`` exactly by the adjugate (no LAPACK), so the same bytes come out on every CPU."""
    matrix = np.asarray(extrinsics, np.float64).reshape(4, 4)
    a, t = matrix[:3, :3], matrix[:3, 3]
    r0, r1, r2 = a
    columns = [np.cross(r1, r2), np.cross(r2, r0), np.cross(r0, r1)]
    determinant = float((r0 * columns[0]).sum())
    if not np.isfinite(determinant) or abs(determinant) < 1e-12:
        raise ValueError("the extrinsics' 3 x 3 block is singular")
    inverse = np.stack(columns, axis=1) / determinant
    gaps = np.asarray(roots, np.float64).reshape(-1, 3) - t
    return (inverse[None, :, :] * gaps[:, None, :]).sum(axis=2)
