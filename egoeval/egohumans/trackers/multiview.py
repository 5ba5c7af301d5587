"""The multi-view tracker: every camera of a take at once, people tracked with one id each over all of them.

A take (``egoeval.egohumans.views``: the wearers' Aria views and the secondary cameras, one time stamp being one
instant in all of them) is tracked in two steps:

1. Per camera, the world-frame tracker (``egoeval.egohumans.trackers.world``: ByteTrack's association on boxes
   carried by the camera's motion and each track's place in the world) follows each person as a tracklet, with this
   tracker's settings (tracking.py runs it). The ``linked`` baseline (``linked.yaml``) runs ultralytics' ByteTrack
   instead and stops after step 2.
2. Across cameras, tracklets are linked into people: every box becomes a world point with an uncertainty ellipsoid
   through its camera's pose and calibration at that frame (:func:`lift`:
   ``egoeval.egohumans.trackers.placement``: the foot on the take's floor, the height prior, metric roots only where
   the user's own detections carry them, fused). Two tracklets of different cameras are the same person
   when their points agree at the time stamps both are placed: the median squared Mahalanobis distance over those
   time stamps lies within the ``gate_probability`` quantile of chi-square with 3 degrees of freedom (the median:
   a few bad frames, a box cut by an occluder, do not part them). Compatible pairs are joined best supported first
   (the most time stamps where they agree; then the smallest median), a group never holding two tracklets one camera
   sees at one time stamp (two people) nor an incompatible pair; so a person's tracklets in every camera,
   and a camera's tracklets of one person before and after a gap linked through other cameras, get one id.
3. Across time: a person who no camera placed for a while continues one placed later (within ``track_buffer``
   time stamps) where the walk leads: the first one's velocity over its last time stamps carried over the gap,
   within the ``gate_probability`` quantile of their spreads plus ``walk_noise_m`` of velocity change per time
   stamp; closest pairs first.

Output: every camera's boxes of its tracklets with the person's global id (numbered from 1 in each take in order of
appearance), and the person's world root at each time stamp: the information-weighted mean of its boxes' points
then (ROOT_COLUMNS; the track stage keeps them in the run's world.parquet). A box on a frame without a pose keeps
its id and takes the root of its person's other boxes at that time stamp, if any.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from egoeval.core.errors import InputError
from egoeval.egohumans.formats import ROOT_COLUMNS
from egoeval.egohumans.settings import TrackerConfig
from egoeval.egohumans.trackers.egomotion import CameraPose
from egoeval.egohumans.trackers.placement import GroundPlane, Priors, place
from egoeval.egohumans.trackers.world import START_SPEED_STD_M, chi2_quantile

VELOCITY_STAMPS = 10  # a person's velocity at the end of a stretch: over its last this many time stamps
OUTPUT_COLUMNS = ["frame", "id", "x", "y", "w", "h", "conf", *ROOT_COLUMNS]
METRIC_COLUMNS = ["metric_x", "metric_y", "metric_z"]  # a tracklet box's detection's own metric root (file mode)
BYTETRACK_KEYS = ("track_high_thresh", "track_low_thresh", "new_track_thresh", "track_buffer", "match_thresh")
BYTETRACK_KEYS += ("fuse_score",)  # the linked baseline's per-camera tracker: ultralytics' ByteTrack


def make_multiview_tracker(args: Any) -> Any:
    """No per-frame tracker: the multi-view and linked trackers track whole takes
    (``egoeval.egohumans.tracking.track_views``)."""
    raise ValueError(f"the {args.tracker_type} tracker tracks whole takes: egoeval.egohumans.tracking.track_views")


def local_settings(config: TrackerConfig) -> TrackerConfig:
    """The per-camera tracker's settings within a take tracker's: the world tracker's (all of ``multiview``'s keys)
    or, for the ``linked`` baseline, ByteTrack's."""
    kept = config.model_dump()
    if config.tracker_type == "linked":
        return TrackerConfig(**{k: kept[k] for k in BYTETRACK_KEYS} | {"tracker_type": "bytetrack"})
    return TrackerConfig(**kept | {"tracker_type": "world"})


def lift(
    pose: CameraPose,
    boxes: np.ndarray,
    roots: np.ndarray,
    image_size: tuple[float, float],
    plane: GroundPlane | None,
    settings: dict[str, Any],
) -> tuple[np.ndarray, np.ndarray]:
    """World points (N, 3) and their covariances (N, 3, 3) of one camera frame's tracklet boxes (``boxes``: N x 4
    ``x, y, w, h``; ``roots``: N x 3, the metric roots of the detections they come from, NaN where none): placed as
    every box is (``egoeval.egohumans.trackers.placement.place``), the root the per-camera tracker placed ignored
    but for metric roots of the user's own detections (a linked ByteTrack run has none)."""
    return place(pose, boxes, roots, image_size, plane, Priors.of(settings))


def _points(
    tables: dict[str, pd.DataFrame],
    frames: pd.DataFrame,
    cameras: dict[str, dict[int, CameraPose]],
    plane: GroundPlane | None,
    settings: dict,
) -> pd.DataFrame:
    """Every box of every camera's tracklets: camera, tracklet, time stamp, row (in its table) and its world point
    and covariance (NaN where its frame has no pose)."""
    keys = list(zip(frames["sequence"], frames["frame"].astype(int), strict=True))
    stamp = dict(zip(keys, frames["time_stamp"].astype(int), strict=True))
    size = dict(zip(keys, zip(frames["width"].astype(float), frames["height"].astype(float), strict=True), strict=True))
    parts = []
    for camera, (sequence, table) in enumerate(sorted(tables.items())):
        if table.empty:
            continue
        frame = table["frame"].to_numpy(np.int64)
        missing = next((f for f in frame if (sequence, int(f)) not in stamp), None)
        if missing is not None:
            raise InputError(sequence, "a box on a frame the images table does not have", row=f"frame {missing}")
        points, spreads = np.full((len(table), 3), np.nan), np.full((len(table), 3, 3), np.nan)
        boxes = table[["x", "y", "w", "h"]].to_numpy(np.float64)
        roots = table.reindex(columns=METRIC_COLUMNS).to_numpy(np.float64)
        for f in np.unique(frame):
            pose = cameras.get(sequence, {}).get(int(f))
            if pose is None:
                continue  # no pose for this frame: its boxes cannot be placed
            rows = np.flatnonzero(frame == f)
            size_here = size[(sequence, int(f))]
            points[rows], spreads[rows] = lift(pose, boxes[rows], roots[rows], size_here, plane, settings)
        parts.append(
            pd.DataFrame(
                {
                    "camera": camera,
                    "tracklet": table["id"].to_numpy(np.int64),
                    "time_stamp": [stamp[(sequence, int(f))] for f in frame],
                    "row": np.arange(len(table)),
                    "point": list(points),
                    "spread": list(spreads),
                }
            )
        )
    columns = ["camera", "tracklet", "time_stamp", "row", "point", "spread"]
    return pd.concat([pd.DataFrame(columns=columns), *parts], ignore_index=True)


def _keys(boxes: pd.DataFrame) -> np.ndarray:
    """A tracklet's key over the take's cameras: camera * 2**32 + its id there."""
    return boxes["camera"].to_numpy(np.int64) * 2**32 + boxes["tracklet"].to_numpy(np.int64)


def _evidence(
    boxes: pd.DataFrame, gate: float
) -> tuple[dict[tuple[int, int], tuple[int, float]], set[tuple[int, int]]]:
    """For tracklet pairs (keys, the smaller first) of different cameras placed at common time stamps: at how many
    of those time stamps their points agree (squared Mahalanobis distance within ``gate``), and the median squared
    distance; and the pairs one camera sees at one time stamp (two people)."""
    table = boxes.assign(key=_keys(boxes))
    pairs = table.merge(table, on="time_stamp", suffixes=("_a", "_b"))
    pairs = pairs[pairs["key_a"] < pairs["key_b"]]
    same = (pairs["camera_a"] == pairs["camera_b"]).to_numpy()
    together = set(zip(pairs["key_a"][same].tolist(), pairs["key_b"][same].tolist(), strict=True))
    cross = pairs[~same]
    if cross.empty:
        return {}, together
    a, b = np.stack(cross["point_a"].to_numpy()), np.stack(cross["point_b"].to_numpy())
    placed = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
    if not placed.any():
        return {}, together
    spread = np.stack(cross["spread_a"].to_numpy()[placed]) + np.stack(cross["spread_b"].to_numpy()[placed])
    gap = (a - b)[placed]
    squared = np.einsum("ni,ni->n", gap, np.linalg.solve(spread, gap[..., None])[..., 0])
    grouped = pd.DataFrame({"a": cross["key_a"][placed], "b": cross["key_b"][placed], "d": squared})
    stats = grouped.groupby(["a", "b"], sort=True)["d"].agg(["size", "median"])
    evidence = {
        (int(a), int(b)): (int(n), float(m))
        for (a, b), n, m in zip(stats.index, stats["size"], stats["median"], strict=True)
    }
    return evidence, together


def link(boxes: pd.DataFrame, gate_probability: float) -> dict[int, int]:
    """Tracklet key -> its person (the smallest key of its group), joining compatible cross-camera pairs closest
    first (see the module docstring)."""
    gate = chi2_quantile(gate_probability, 3)
    evidence, together = _evidence(boxes, gate)
    compatible = {pair for pair, (_, median) in evidence.items() if median <= gate}
    order = sorted(compatible, key=lambda pair: (-evidence[pair][0], evidence[pair][1], pair))
    person = {int(k): int(k) for k in np.unique(_keys(boxes))}
    members = {k: [k] for k in person}

    def joinable(one: list[int], other: list[int]) -> bool:
        pairs = [(min(m, n), max(m, n)) for m in one for n in other]
        return not any(p in together or (p in evidence and p not in compatible) for p in pairs)

    for a, b in order:
        keep, drop = sorted((person[a], person[b]))
        if keep != drop and joinable(members[keep], members[drop]):
            for m in members[drop]:
                person[m] = keep
            members[keep] += members.pop(drop)
    return person


def _fused(boxes: pd.DataFrame, person: np.ndarray) -> pd.DataFrame:
    """Per person and time stamp: its world root, the information-weighted mean of the points of its boxes then,
    and that mean's covariance (NaN where none of them has a point). Columns person, time_stamp, root, spread."""
    points, spreads = np.stack(boxes["point"].to_numpy()), np.stack(boxes["spread"].to_numpy())
    placed = np.isfinite(points).all(axis=1)
    information = np.zeros_like(spreads)
    information[placed] = np.linalg.inv(spreads[placed])
    weighted = np.einsum("nij,nj->ni", information, np.where(placed[:, None], points, 0.0))
    codes, uniques = pd.factorize(pd.MultiIndex.from_arrays([person, boxes["time_stamp"].to_numpy(np.int64)]))
    info_sum, vec_sum = np.zeros((len(uniques), 3, 3)), np.zeros((len(uniques), 3))
    np.add.at(info_sum, codes, information)
    np.add.at(vec_sum, codes, weighted)
    known = np.linalg.det(info_sum) > 0
    roots, covariances = np.full((len(uniques), 3), np.nan), np.full((len(uniques), 3, 3), np.nan)
    covariances[known] = np.linalg.inv(info_sum[known])
    roots[known] = np.einsum("nij,nj->ni", covariances[known], vec_sum[known])
    return pd.DataFrame(
        {
            "person": uniques.get_level_values(0).to_numpy(np.int64),
            "time_stamp": uniques.get_level_values(1).to_numpy(np.int64),
            "root": list(roots),
            "spread": list(covariances),
        }
    ).sort_values(["person", "time_stamp"], kind="stable")


def _rejoined(fused: pd.DataFrame, settings: dict[str, Any]) -> dict[int, int]:
    """Person -> the person it continues: a person last placed at time stamp t1 and one first placed at t2 (later,
    at most ``track_buffer`` time stamps after) whose first root lies where the first one's walk leads (its
    velocity over its last time stamps carried over the gap) within the ``gate_probability`` quantile of their
    spreads and ``walk_noise_m`` of velocity change per time stamp; the closest pairs first, each person continued
    at most once and continuing at most one other."""
    placed = fused[fused["root"].map(lambda r: bool(np.isfinite(r).all()))]
    spans = []
    for person, rows in placed.groupby("person", sort=True):
        stamps, roots = rows["time_stamp"].to_numpy(np.int64), np.stack(rows["root"].to_numpy())
        back = max(0, len(stamps) - VELOCITY_STAMPS)
        velocity = (roots[-1] - roots[back]) / max(stamps[-1] - stamps[back], 1)
        spans.append((person, stamps[0], stamps[-1], roots[0], roots[-1], velocity, *rows["spread"].iloc[[0, -1]]))
    gate, walk = chi2_quantile(float(settings["gate_probability"]), 3), float(settings["walk_noise_m"])
    buffer = int(settings["track_buffer"])
    candidates = []
    for a, _, end, _, last, velocity, _, end_spread in spans:
        for b, start, _, first, _, _, start_spread, _ in spans:
            gap = start - end
            if not 0 < gap <= buffer:
                continue
            drift = walk**2 * gap**3 / 3 + START_SPEED_STD_M**2 * gap**2  # the walk's spread over the gap
            spread = end_spread + start_spread + np.eye(3) * drift
            miss = first - (last + velocity * gap)
            squared = float(miss @ np.linalg.solve(spread, miss))
            if squared <= gate:
                candidates.append((squared, a, b))
    after: dict[int, int] = {}
    before: set[int] = set()
    for _, a, b in sorted(candidates):
        if a not in after and b not in before:
            after[a], _ = b, before.add(b)
    continues = {}
    for a in sorted(set(after) - before):  # chains from their first person
        b = a
        while b in after:
            b = after[b]
            continues[b] = a
    return continues


def link_views(
    settings: dict[str, Any],
    tables: dict[str, pd.DataFrame],
    frames: pd.DataFrame,
    cameras: dict[str, dict[int, CameraPose]],
    plane: GroundPlane | None,
) -> dict[str, pd.DataFrame]:
    """One take: each camera's tracklets (``tables``: sequence -> the per-camera tracker's MOTChallenge table, with
    METRIC_COLUMNS: the metric roots of the user's detections, NaN where none) linked into people. ``frames``: the
    take's images (sequence, frame, time_stamp, width, height); ``cameras``: sequence -> frame -> pose; ``plane``:
    the take's ground. Returns each sequence's table (OUTPUT_COLUMNS) with global ids and roots."""
    sequences = sorted(tables)
    boxes = _points(tables, frames, cameras, plane, settings)
    if boxes.empty:
        return {name: pd.DataFrame(columns=OUTPUT_COLUMNS) for name in sequences}
    group = link(boxes, float(settings["gate_probability"]))
    key = _keys(boxes)
    person = np.array([group[int(k)] for k in key], dtype=np.int64)
    if settings["tracker_type"] == "multiview":  # the linked baseline stops at linking across cameras
        continues = _rejoined(_fused(boxes, person), settings)
        person = np.array([continues.get(int(p), int(p)) for p in person], dtype=np.int64)
    first = pd.DataFrame({"person": person, "t": boxes["time_stamp"].to_numpy(np.int64), "key": key})
    first = first.groupby("person").min()
    numbering = {p: k + 1 for k, p in enumerate(first.sort_values(["t", "key"], kind="stable").index)}
    fused = _fused(boxes, person).set_index(["person", "time_stamp"])["root"]
    roots = np.stack([fused[(int(p), int(t))] for p, t in zip(person, boxes["time_stamp"], strict=True)])
    out = {}
    for camera, name in enumerate(sequences):
        mine = np.flatnonzero(boxes["camera"].to_numpy() == camera)
        table = tables[name].copy()
        rows = boxes["row"].to_numpy(np.int64)[mine]
        table.loc[table.index[rows], "id"] = [numbering[p] for p in person[mine]]
        table.loc[table.index[rows], ROOT_COLUMNS] = np.round(roots[mine], 3)
        out[name] = table[OUTPUT_COLUMNS].sort_values(["frame", "id"], kind="stable").reset_index(drop=True)
    return out


def check_views(name: str, images: pd.DataFrame) -> None:
    """A tracker that places people by their takes' ground (world) or tracks whole takes (multiview, linked) needs
    every image's take, camera and time stamp (fetch's images table)."""
    missing = [c for c in ("take", "camera", "time_stamp") if c not in images.columns]
    if missing:
        raise InputError(f"egohumans.track.config.{name}", f"the tracker needs {missing} (fetch)")
    unplaced = images[(images["take"] == "") | images["time_stamp"].isna()]
    if len(unplaced):
        row = unplaced.iloc[0]
        raise InputError(
            row["sequence"],
            f"tracker {name!r} needs every image's take, camera and time_stamp (file names laid out as the "
            "official download: <big>/<seq>/ego/ariaXX/... or .../exo/camXX/...)",
            row=f"frame {row['frame']}",
        )
