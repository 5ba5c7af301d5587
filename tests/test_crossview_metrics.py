"""Cross-view metrics (egoeval/tracking/crossview.py) against independent computations: with one camera the
multi-camera identity is TrackEval's Identity; with several it is a brute-force search over every global assignment;
in the world frame CLEAR, Identity and HOTA are TrackEval's metric classes fed the same Euclidean similarity; the
bootstrap's evidence at unit weights gives back the point estimates."""

from __future__ import annotations

import contextlib
import io
import itertools

import numpy as np
import pandas as pd
import pytest
import trackeval
from hypothesis import given, settings
from hypothesis import strategies as st
from trackeval.datasets._base_dataset import _BaseDataset

from egoeval.tracking.crossview import (
    CameraView,
    CrossViewSettings,
    camera_counts,
    euclidean_similarity,
    evaluate_take,
    hota_from_sums,
    mota_from_sums,
    summarize_takes,
    world_counts,
    world_data,
)
from egoeval.tracking.identity import Identity
from egoeval.tracking.mot import WORLD_COLUMNS
from egoeval.tracking.similarity import sequence_data

SETTINGS = CrossViewSettings(0.5, 0.5, 1.0, block=3, samples=200, seed=0, confidence=0.95)


def frame(rows: list[tuple], world: bool = False) -> pd.DataFrame:
    """A read_mot-like frame from (frame, id, x, y, w, h[, X, Y, Z]) rows."""
    columns = ["frame", "id", "x", "y", "w", "h"] + (WORLD_COLUMNS if world else [])
    df = pd.DataFrame(rows, columns=columns) if rows else pd.DataFrame(columns=columns)
    df = df.astype({"frame": np.int64, "id": np.int64, **dict.fromkeys(columns[2:], float)})
    df.insert(6, "conf", 1.0)
    return df


@st.composite
def cameras(draw: st.DrawFn, max_cameras: int = 3) -> list[tuple[list[tuple], list[tuple], dict[int, int]]]:
    """Random cameras of one take: ground-truth people 1-3 and tracker ids 1-4 on a coarse grid (so IoU hits and
    misses 0.5, exactly too), a person in a camera only some frames, frames mapped to time stamps."""
    out = []
    for _ in range(draw(st.integers(1, max_cameras))):
        frames = draw(st.integers(1, 6))
        gt_rows, pred_rows = [], []
        for f in range(1, frames + 1):
            people = draw(st.lists(st.integers(1, 3), unique=True, max_size=3))
            ids = draw(st.permutations([1, 2, 3, 4]))
            for k, person in enumerate(people):
                x, y = draw(st.integers(0, 6)), draw(st.integers(0, 6))
                gt_rows.append((f, person, x, y, 2.0, 4.0))
                if draw(st.booleans()):  # a tracker box near it
                    pred_rows.append((f, ids[k], x + draw(st.integers(-1, 1)), y + draw(st.integers(-1, 1)), 2.0, 4.0))
            for k in range(len(people), len(people) + draw(st.integers(0, 1))):  # a stray one
                pred_rows.append((f, ids[k], draw(st.integers(0, 8)), draw(st.integers(0, 8)), 2.0, 4.0))
        offset = draw(st.integers(0, 4))
        out.append((gt_rows, pred_rows, {f: f + offset for f in range(1, frames + 1)}))
    return out


def views_of(drawn: list) -> list[CameraView]:
    return [CameraView(frame(gt), frame(pred), stamps) for gt, pred, stamps in drawn]


def iou(a: tuple, b: tuple) -> float:
    """IoU of two x, y, w, h boxes, in TrackEval's order of operations."""
    x0, y0, x1, y1 = max(a[0], b[0]), max(a[1], b[1]), min(a[0] + a[2], b[0] + b[2]), min(a[1] + a[3], b[1] + b[3])
    inter = max(x1 - x0, 0) * max(y1 - y0, 0)
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


def brute_force(drawn: list, shared_ids: bool) -> tuple[int, int, int]:
    """(IDTP, IDFN, IDFP) by trying every one-to-one map of people to tracker identities over all cameras."""
    counts: dict[tuple, int] = {}
    gt_total = pred_total = 0
    for camera, (gt_rows, pred_rows, _) in enumerate(drawn):
        gt_total, pred_total = gt_total + len(gt_rows), pred_total + len(pred_rows)
        for g in gt_rows:
            for p in pred_rows:
                if g[0] == p[0] and iou(g[2:6], p[2:6]) >= 0.5:
                    key = (g[1], p[1] if shared_ids else (camera, p[1]))
                    counts[key] = counts.get(key, 0) + 1
    people = sorted({k[0] for k in counts})
    identities = sorted({k[1] for k in counts}, key=str)
    best = 0
    for chosen in itertools.product([None, *identities], repeat=len(people)):
        picked = [c for c in chosen if c is not None]
        if len(picked) == len(set(picked)):
            best = max(best, sum(counts.get((p, c), 0) for p, c in zip(people, chosen, strict=True)))
    return best, gt_total - best, pred_total - best


@settings(max_examples=80, deadline=None)
@given(cameras(max_cameras=1))
def test_one_camera_is_trackeval_identity(drawn: list) -> None:
    views = views_of(drawn)
    counts = camera_counts(views, 0.5, True, block=2)
    mine = counts.weighted(np.ones(len(counts.gt), np.int64))
    reference = Identity(0.5).eval_sequence(sequence_data(views[0].gt, views[0].pred))
    assert mine == (reference["IDTP"], reference["IDFN"], reference["IDFP"])
    take = summarize_takes({"t": evaluate_take(views, None, True, SETTINGS)}, SETTINGS)["takes"]["t"]["camera"]
    for field in ("IDF1", "IDP", "IDR"):
        assert take[field] == 100 * reference[field]


@settings(max_examples=120, deadline=None)
@given(cameras(), st.booleans())
def test_several_cameras_equal_a_brute_force_global_assignment(drawn: list, shared_ids: bool) -> None:
    counts = camera_counts(views_of(drawn), 0.5, shared_ids, block=2)
    assert counts.weighted(np.ones(len(counts.gt), np.int64)) == brute_force(drawn, shared_ids)


def test_per_camera_ids_are_distinct_identities() -> None:
    """One person tracked perfectly in two cameras as id 1 in both: one identity with global ids, two without."""
    drawn = [([(f, 5, 0, 0, 2, 4)], [(f, 1, 0, 0, 2, 4)], {f: f}) for f in (1, 2)]
    views = views_of([(drawn[0][0] + drawn[1][0], drawn[0][1] + drawn[1][1], {1: 1, 2: 2})] * 2)
    assert camera_counts(views, 0.5, True, 2).weighted(np.ones(1, int)) == (4, 0, 0)
    assert camera_counts(views, 0.5, False, 2).weighted(np.ones(1, int)) == (2, 2, 2)


@st.composite
def world_cases(draw: st.DrawFn) -> tuple[pd.DataFrame, list[CameraView]]:
    """People's roots at time stamps and two cameras' tracker rows with world points near them (or not)."""
    gt_rows, views = [], []
    stamps = draw(st.integers(1, 8))
    for t in range(1, stamps + 1):
        for person in draw(st.lists(st.integers(1, 3), unique=True, max_size=3)):
            gt_rows.append((t, person, *(draw(st.floats(-3, 3, width=16)) for _ in range(3))))
    for _ in range(2):
        rows = []
        for t in range(1, stamps + 1):
            ids = draw(st.permutations([1, 2, 3, 4]))
            here = [r for r in gt_rows if r[0] == t]
            for k, root in enumerate(here):
                if draw(st.booleans()):
                    near = [c + draw(st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.7, 1.2])) for c in root[2:]]
                    rows.append((t, ids[k], 0.0, 0.0, 1.0, 1.0, *near))
        views.append(CameraView(frame([], world=False), frame(rows, world=True), {t: t for t in range(1, stamps + 1)}))
    world_gt = pd.DataFrame(gt_rows, columns=["time_stamp", "person", *WORLD_COLUMNS])
    return world_gt, views


def trackeval_data(data) -> dict:
    """TrackEval's per-timestep dict from our SequenceData (ids relabelled, similarity from the same pairs)."""
    gt_ids = [data.gt_ids[data.gt_start[t] : data.gt_start[t + 1]] for t in range(data.num_steps)]
    tracker_ids = [data.tracker_ids[data.tracker_start[t] : data.tracker_start[t + 1]] for t in range(data.num_steps)]
    return {
        "num_timesteps": data.num_timesteps,
        "num_gt_ids": data.num_gt_ids,
        "num_tracker_ids": data.num_tracker_ids,
        "num_gt_dets": data.num_gt_dets,
        "num_tracker_dets": data.num_tracker_dets,
        "gt_ids": gt_ids,
        "tracker_ids": tracker_ids,
        "similarity_scores": [data.dense(t, data.similarity) for t in range(data.num_steps)],
    }


@settings(max_examples=80, deadline=None)
@given(world_cases(), st.booleans())
def test_world_frame_metrics_are_trackevals_on_the_distance_similarity(case: tuple, shared_ids: bool) -> None:
    world_gt, views = case
    found = world_data(world_gt, views, shared_ids, zero_distance=1.0)
    if found is None:
        assert all(v.pred.empty for v in views)
        return
    data = found[0]
    reference = trackeval_data(data)
    # the similarity TrackEval's own datasets compute, from the same points
    tracks = pd.concat([v.pred.assign(cam=k) for k, v in enumerate(views)], ignore_index=True)
    for t in range(data.num_steps):
        stamp = found[1][t]
        gt_points = world_gt[world_gt["time_stamp"] == stamp].sort_values("person")[WORLD_COLUMNS].to_numpy()
        rows = tracks[tracks["frame"] == stamp].assign(key=lambda d: d["id"] + (0 if shared_ids else d["cam"] * 2**40))
        points = rows.groupby("key", sort=True)[WORLD_COLUMNS].mean().to_numpy()
        if len(gt_points) and len(points):
            expected = _BaseDataset._calculate_euclidean_similarity(gt_points, points, zero_distance=1.0)
            np.testing.assert_array_equal(reference["similarity_scores"][t], expected)
            np.testing.assert_array_equal(euclidean_similarity(gt_points, points, 1.0), expected)
    threshold = SETTINGS.world_threshold
    result = evaluate_take(views, world_gt, shared_ids, SETTINGS).world
    quiet = {"PRINT_CONFIG": False, "THRESHOLD": threshold}
    with contextlib.redirect_stdout(io.StringIO()):
        theirs = {
            "CLEAR": trackeval.metrics.CLEAR(quiet).eval_sequence(reference),
            "Identity": trackeval.metrics.Identity(quiet).eval_sequence(reference),
            "HOTA": trackeval.metrics.HOTA().eval_sequence(reference),
        }
    for metric, fields in theirs.items():
        for name, value in fields.items():
            np.testing.assert_allclose(np.asarray(result[metric][name], float), value, rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(world_cases(), cameras(max_cameras=2))
def test_bootstrap_evidence_at_unit_weights_is_the_point_estimate(case: tuple, drawn: list) -> None:
    world_gt, views = case
    found = world_data(world_gt, views, True, zero_distance=1.0)
    if found is None:
        return
    data, steps, _, _ = found
    counts = world_counts(data, steps, SETTINGS.world_threshold, block=2)
    ones = np.ones((1, len(counts.clear)))
    point = evaluate_take(views, world_gt, True, SETTINGS).world
    assert mota_from_sums(counts.clear_sums(ones))[0] == pytest.approx(100 * point["CLEAR"]["MOTA"], abs=1e-9)
    assert hota_from_sums(*counts.hota_sums(ones))[0] == pytest.approx(100 * np.mean(point["HOTA"]["HOTA"]), abs=1e-9)
    identity = counts.identity.weighted(np.ones(len(counts.identity.gt), np.int64))
    assert identity == (point["Identity"]["IDTP"], point["Identity"]["IDFN"], point["Identity"]["IDFP"])
    draws = np.random.default_rng(0).integers(0, 3, size=(4, len(counts.identity.gt)))
    assert counts.identity.resampled(draws).tolist() == [list(counts.identity.weighted(w)) for w in draws]


def test_intervals_are_seeded_and_bracket_a_steady_tracker() -> None:
    """A tracker right every other block: the interval is reproducible from its seed and holds the estimate."""
    rows = [(f, 1, 0, 0, 2, 4) for f in range(1, 61)]
    pred = [(f, 1 if (f - 1) // 3 % 2 else 2, 0, 0, 2, 4) for f in range(1, 61)]
    views = [CameraView(frame(rows), frame(pred), {f: f for f in range(1, 61)})]
    take = {"t": evaluate_take(views, None, True, SETTINGS)}
    first, again = summarize_takes(take, SETTINGS), summarize_takes(take, SETTINGS)
    assert first == again
    camera = first["COMBINED"]["camera"]
    low, high = camera["ci95"]["IDF1"]
    assert low <= camera["IDF1"] <= high and high - low > 0
