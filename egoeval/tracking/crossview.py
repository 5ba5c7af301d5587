"""Cross-view tracking metrics of one take (every camera at once) and their block-bootstrap intervals.

``camera``: identity over every camera's boxes at once, the multi-camera IDF1, IDP and IDR of the DukeMTMC / MTMC
evaluations (Ristani et al. 2016): one global one-to-one match between ground-truth people and tracker identities
maximising the boxes matched (IoU >= threshold, per camera and frame) summed over every camera. A tracker that
calls one person 3 in aria01 and 7 in aria02 can match only one of the two. With one camera it is exactly
TrackEval's Identity (``egoeval.tracking.identity``).

``world``: tracking in the world frame, on 3D roots: ground truth is each person's root at every time stamp where
some camera sees them; a tracker identity's point is its box's world point (the mean over cameras where the same id
is in several). Similarity is TrackEval's Euclidean one, ``max(0, 1 - d / zero_distance)``; CLEAR and Identity
match at ``d <= distance`` (similarity >= 1 - distance / zero_distance), HOTA over its 19 alphas, i.e. distances
from 0.05 to 0.95 of ``zero_distance``. The units are egoeval's TrackEval ones (``CLEAR``, ``Identity``, ``HOTA``),
fed the distance similarity.

Tracker ids are global (one per person over the take's cameras) for multi-view trackers; a per-camera tracker's
ids are its own per camera (each numbers from 1), so they are scored as distinct identities per camera
(``shared_ids=False``).

Intervals: a block bootstrap over time (blocks of ``block`` consecutive time stamps of a take, drawn with
replacement, each take on its own; COMBINED sums the takes' draws). Identity re-solves its global assignment on
every draw (its co-occurrence counts add over blocks); CLEAR and HOTA keep each time stamp's matching of the full
data and redraw its counts (MOTA from per-time-stamp TP, FP, FN and switches; HOTA from its per-alpha matches, id
pair counts and id sizes). The interval is the basic (reverse-percentile) one: identity and association do not add
over time, and a resample that repeats some stretches and drops others hides fragmentation, so the resamples lean
above the estimate; reflecting their percentiles about it corrects for that lean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from egoeval.tracking.base import EPS, SequenceData
from egoeval.tracking.clear import CLEAR
from egoeval.tracking.hota import ALPHAS, HOTA
from egoeval.tracking.identity import Identity
from egoeval.tracking.identity import final_fields as identity_fields
from egoeval.tracking.matching import forced_matches, linear_sum_assignment
from egoeval.tracking.mot import WORLD_COLUMNS, MotTable
from egoeval.tracking.similarity import sequence_data

CAMERA_FIELDS = ["IDF1", "IDP", "IDR"]
INTERVAL_FIELDS = {"camera": CAMERA_FIELDS, "world": ["HOTA", "MOTA", "IDF1", "IDP", "IDR"]}


@dataclass(frozen=True)
class CameraView:
    """One camera of a take: its ground truth (kept rows), the tracker's rows (with WORLD_COLUMNS for the world
    frame) and each frame's time stamp."""

    gt: MotTable | pd.DataFrame
    pred: pd.DataFrame
    time_stamp: dict[int, int]  # frame -> time stamp


# ----------------------------------------------------------------------------------------- identity (counts)


@dataclass(frozen=True)
class IdentityCounts:
    """Identity evidence per time block: co-occurrence (B, G, H) of ground-truth and tracker identities matched
    (similarity >= threshold), and the ground-truth and tracker boxes (B,)."""

    cooccurrence: np.ndarray
    gt: np.ndarray
    pred: np.ndarray

    def resampled(self, weights: np.ndarray) -> np.ndarray:
        """(S, 3) IDTP, IDFN, IDFP under S rows of block weights (S, B), the assignment re-solved for each."""
        matrices = np.einsum("sb,bgh->sgh", weights, self.cooccurrence)
        matched = np.zeros(len(weights), np.int64)
        for k, matrix in enumerate(matrices):
            if matrix.any():
                rows, cols = linear_sum_assignment(matrix, maximize=True)
                matched[k] = matrix[rows, cols].sum()
        gt, pred = weights @ self.gt, weights @ self.pred
        return np.column_stack([matched, gt - matched, pred - matched])

    def weighted(self, weights: np.ndarray) -> tuple[int, int, int]:
        """(IDTP, IDFN, IDFP) with each block counted ``weights[b]`` times (the global assignment re-solved)."""
        matrix = np.tensordot(weights, self.cooccurrence, axes=1)
        matched = 0
        if matrix.size and matrix.any():
            rows, cols = linear_sum_assignment(matrix, maximize=True)
            matched = int(matrix[rows, cols].sum())
        gt, pred = int(weights @ self.gt), int(weights @ self.pred)
        return matched, gt - matched, pred - matched


def _identity_rates(counts: np.ndarray) -> np.ndarray:
    """(S, 3) IDF1, IDP, IDR in percent from (S, 3) IDTP, IDFN, IDFP (TrackEval's formulas)."""
    tp, fn, fp = counts.T.astype(float)
    return 100 * np.column_stack(
        [tp / np.maximum(1.0, tp + 0.5 * fp + 0.5 * fn), tp / np.maximum(1.0, tp + fp), tp / np.maximum(1.0, tp + fn)]
    )


def _identity_fields(idtp: float, idfn: float, idfp: float) -> dict[str, float]:
    """IDF1, IDP, IDR in percent, as the per-camera summaries compute them (TrackEval's fractions, times 100)."""
    fields = identity_fields({"IDTP": idtp, "IDFN": idfn, "IDFP": idfp})
    return {name: float(100 * fields[name]) for name in CAMERA_FIELDS}


def _blocks(stamps: np.ndarray, first: int, block: int) -> np.ndarray:
    return (np.asarray(stamps, np.int64) - first) // block


def camera_counts(views: list[CameraView], threshold: float, shared_ids: bool, block: int) -> IdentityCounts:
    """Multi-camera identity evidence of a take (see the module docstring)."""
    gt_ids, tr_keys, gt_stamps, tr_stamps = [], [], [], []
    pair_gt, pair_tr, pair_stamp = [], [], []
    for camera, view in enumerate(views):
        gt = MotTable.of(view.gt)
        data = sequence_data(gt, view.pred)
        frames = np.unique(np.concatenate([gt.frame, view.pred["frame"].to_numpy(np.int64)]))
        stamp_of = np.array([view.time_stamp[int(f)] for f in frames], dtype=np.int64)
        gt_unique = np.unique(gt.id)
        tr_unique = np.unique(view.pred["id"].to_numpy(np.int64))
        own_gt = gt_unique[data.gt_ids]
        own_tr = tr_unique[data.tracker_ids]
        key = own_tr if shared_ids else own_tr + camera * (1 << 40)
        gt_ids.append(own_gt)
        tr_keys.append(key)
        gt_stamps.append(stamp_of[data.gt_t])
        tr_stamps.append(stamp_of[data.tracker_t])
        close = data.similarity >= threshold  # TrackEval's Identity: no epsilon
        pair_gt.append(own_gt[data.pair_gt[close]])
        pair_tr.append(key[data.pair_tracker[close]])
        pair_stamp.append(stamp_of[data.gt_t[data.pair_gt[close]]])
    return _identity_counts(gt_ids, tr_keys, gt_stamps, tr_stamps, pair_gt, pair_tr, pair_stamp, block)


def _identity_counts(
    gt_ids: list[np.ndarray],
    tr_keys: list[np.ndarray],
    gt_stamps: list[np.ndarray],
    tr_stamps: list[np.ndarray],
    pair_gt: list[np.ndarray],
    pair_tr: list[np.ndarray],
    pair_stamp: list[np.ndarray],
    block: int,
) -> IdentityCounts:
    empty = np.empty(0, np.int64)
    g, h = np.concatenate([empty, *gt_ids]), np.concatenate([empty, *tr_keys])
    gs, hs = np.concatenate([empty, *gt_stamps]), np.concatenate([empty, *tr_stamps])
    pg, ph, ps = (np.concatenate([empty, *part]) for part in (pair_gt, pair_tr, pair_stamp))
    first = int(min(gs.min(initial=2**62), hs.min(initial=2**62))) if len(gs) or len(hs) else 0
    n_blocks = int(max(_blocks(gs, first, block).max(initial=-1), _blocks(hs, first, block).max(initial=-1))) + 1
    g_values, h_values = np.unique(g), np.unique(h)
    cooccurrence = np.zeros((n_blocks, len(g_values), len(h_values)), np.int64)
    np.add.at(
        cooccurrence, (_blocks(ps, first, block), np.searchsorted(g_values, pg), np.searchsorted(h_values, ph)), 1
    )
    gt = np.bincount(_blocks(gs, first, block), minlength=n_blocks)
    pred = np.bincount(_blocks(hs, first, block), minlength=n_blocks)
    return IdentityCounts(cooccurrence, gt, pred)


# ----------------------------------------------------------------------------------------- the world frame


def euclidean_similarity(gt: np.ndarray, tracker: np.ndarray, zero_distance: float) -> np.ndarray:
    """TrackEval's ``_calculate_euclidean_similarity``: ``max(0, 1 - distance / zero_distance)``, (G, T)."""
    distance = np.linalg.norm(gt[:, np.newaxis] - tracker[np.newaxis, :], axis=2)
    return np.maximum(0, 1 - distance / zero_distance)


def world_data(
    world_gt: pd.DataFrame, views: list[CameraView], shared_ids: bool, zero_distance: float
) -> tuple[SequenceData, np.ndarray, np.ndarray, np.ndarray] | None:
    """The take in the world frame as TrackEval's data (time stamps as timesteps), and the time stamp of each step,
    the ground-truth person and the tracker key of each relabelled id. ``world_gt``: time_stamp, person, WORLD_COLUMNS
    of every person seen by some camera. None when no tracker row has a world point."""
    parts = []
    for camera, view in enumerate(views):
        pred = view.pred.dropna(subset=WORLD_COLUMNS)
        stamps = np.array([view.time_stamp[int(f)] for f in pred["frame"]], dtype=np.int64)
        key = pred["id"].to_numpy(np.int64) + (0 if shared_ids else camera * (1 << 40))
        points = {c: pred[c].to_numpy(np.float64) for c in WORLD_COLUMNS}
        parts.append(pd.DataFrame({"time_stamp": stamps, "key": key, **points}))
    tracks = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if tracks.empty:
        return None
    tracks = tracks.groupby(["time_stamp", "key"], sort=True, as_index=False)[WORLD_COLUMNS].mean()
    gt = world_gt.sort_values(["time_stamp", "person"], kind="stable")
    steps = np.unique(np.concatenate([gt["time_stamp"].to_numpy(np.int64), tracks["time_stamp"].to_numpy(np.int64)]))
    gt_t = np.searchsorted(steps, gt["time_stamp"].to_numpy(np.int64))
    tr_t = np.searchsorted(steps, tracks["time_stamp"].to_numpy(np.int64))
    gt_points, tr_points = gt[WORLD_COLUMNS].to_numpy(np.float64), tracks[WORLD_COLUMNS].to_numpy(np.float64)
    gt_start, tr_start = (
        np.searchsorted(gt_t, np.arange(len(steps) + 1)),
        np.searchsorted(tr_t, np.arange(len(steps) + 1)),
    )
    rows, cols, values = [np.empty(0, np.int64)], [np.empty(0, np.int64)], [np.empty(0)]
    for t in range(len(steps)):
        g0, g1, k0, k1 = gt_start[t], gt_start[t + 1], tr_start[t], tr_start[t + 1]
        if g1 > g0 and k1 > k0:
            sim = euclidean_similarity(gt_points[g0:g1], tr_points[k0:k1], zero_distance)
            r, c = np.nonzero(sim)
            rows.append(r + g0)
            cols.append(c + k0)
            values.append(sim[r, c])
    gt_ids, tr_ids = gt["person"].to_numpy(np.int64), tracks["key"].to_numpy(np.int64)
    data = SequenceData.from_arrays(
        len(steps), len(steps), gt_t, gt_ids, tr_t, tr_ids, *(np.concatenate(v) for v in (rows, cols, values))
    )
    return data, steps, np.unique(gt_ids), np.unique(tr_ids)


@dataclass(frozen=True)
class WorldCounts:
    """World-frame evidence per time block (B blocks, A alphas, P matched id pairs)."""

    identity: IdentityCounts
    clear: np.ndarray  # (B, 5): TP, FN, FP, IDSW, ground-truth boxes
    hota_tp: np.ndarray  # (B, A)
    hota_pairs: np.ndarray  # (B, P, A): matches of each (gt id, tracker id) pair
    pair_ids: np.ndarray  # (P, 2): the pair's gt and tracker id (relabelled)
    gt_sizes: np.ndarray  # (B, G): boxes of each gt id
    tracker_sizes: np.ndarray  # (B, T)
    dets: np.ndarray  # (B, 2): ground-truth and tracker boxes

    def clear_sums(self, weights: np.ndarray) -> np.ndarray:
        """(S, 5) TP, FN, FP, IDSW, ground-truth boxes under S rows of block weights (S, B)."""
        return weights @ self.clear

    def hota_sums(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Under S rows of block weights: HOTA's TP (S, A), ground-truth plus tracker boxes (S,), and the numerator of
        AssA (S, A): the sum over matched id pairs of matches x their association IoU."""
        tp = weights @ self.hota_tp
        boxes = (weights @ self.dets).sum(axis=1)
        matches = np.einsum("sb,bpa->spa", weights, self.hota_pairs)
        gt_size = (weights @ self.gt_sizes)[:, self.pair_ids[:, 0]][:, :, None]
        tracker_size = (weights @ self.tracker_sizes)[:, self.pair_ids[:, 1]][:, :, None]
        association = np.sum(matches * (matches / np.maximum(1, gt_size + tracker_size - matches)), axis=1)
        return tp, boxes, association


def world_counts(data: SequenceData, steps: np.ndarray, threshold: float, block: int) -> WorldCounts:
    """The per-block evidence of the world-frame metrics of one take (see the module docstring)."""
    stamp_block = _blocks(steps, int(steps[0]) if len(steps) else 0, block)
    n_blocks = int(stamp_block.max(initial=-1)) + 1
    gt_block, tr_block = stamp_block[data.gt_t], stamp_block[data.tracker_t]
    # identity: the relabelled ids' co-occurrence per block
    close = data.similarity >= threshold
    identity = _identity_counts(
        [data.gt_ids],
        [data.tracker_ids],
        [steps[data.gt_t]],
        [steps[data.tracker_t]],
        [data.gt_ids[data.pair_gt[close]]],
        [data.tracker_ids[data.pair_tracker[close]]],
        [steps[data.gt_t[data.pair_gt[close]]]],
        block,
    )
    clear = np.zeros((n_blocks, 5))
    gt_per, tr_per = np.bincount(gt_block, minlength=n_blocks), np.bincount(tr_block, minlength=n_blocks)
    hota_tp = np.zeros((n_blocks, len(ALPHAS)))
    if data.num_gt_dets and data.num_tracker_dets:
        match_gt, match_tracker, _ = CLEAR(threshold)._matches(data)
        tp = np.bincount(gt_block[match_gt], minlength=n_blocks)
        clear[:, 0], clear[:, 1], clear[:, 2] = tp, gt_per - tp, tr_per - tp
        clear[:, 3] = np.bincount(stamp_block[_switch_steps(data, match_gt, match_tracker)], minlength=n_blocks)
        h_gt, h_tracker, h_sim = hota_matches(data)
    else:
        clear[:, 1], clear[:, 2] = gt_per, tr_per
        h_gt, h_tracker, h_sim = (np.empty(0, np.int64),) * 2 + (np.empty(0),)
    clear[:, 4] = gt_per
    level = np.searchsorted(ALPHAS - EPS, h_sim, side="right")  # alphas a match passes
    passed = level > 0
    h_block = gt_block[h_gt[passed]]
    at_least = np.arange(len(ALPHAS))[None, :] < level[passed][:, None]  # (M, A)
    np.add.at(hota_tp, h_block, at_least)
    pairs = np.column_stack([data.gt_ids[h_gt[passed]], data.tracker_ids[h_tracker[passed]]])
    pair_ids, pair_index = np.unique(pairs.reshape(-1, 2), axis=0, return_inverse=True)
    hota_pairs = np.zeros((n_blocks, len(pair_ids), len(ALPHAS)))
    np.add.at(hota_pairs, (h_block, pair_index.reshape(-1)), at_least)
    gt_sizes = np.zeros((n_blocks, data.num_gt_ids))
    np.add.at(gt_sizes, (gt_block, data.gt_ids), 1)
    tracker_sizes = np.zeros((n_blocks, data.num_tracker_ids))
    np.add.at(tracker_sizes, (tr_block, data.tracker_ids), 1)
    dets = np.column_stack([gt_per, tr_per]).astype(float)
    return WorldCounts(identity, clear, hota_tp, hota_pairs, pair_ids, gt_sizes, tracker_sizes, dets)


def _switch_steps(data: SequenceData, match_gt: np.ndarray, match_tracker: np.ndarray) -> np.ndarray:
    """The step of each identity switch of CLEAR's matches (as ``CLEAR.eval_sequence`` counts them)."""
    step = data.gt_t[match_gt]
    gt_id, tracker_id = data.gt_ids[match_gt], data.tracker_ids[match_tracker]
    order = np.lexsort((step, gt_id))
    gt_id, tracker_id, step = gt_id[order], tracker_id[order], step[order]
    switched = (gt_id[1:] == gt_id[:-1]) & (tracker_id[1:] != tracker_id[:-1])
    return step[1:][switched]


def hota_matches(data: SequenceData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HOTA's matches (gt detection, tracker detection, similarity), as ``HOTA.eval_sequence`` makes them."""
    gt_count = np.bincount(data.gt_ids, minlength=data.num_gt_ids).astype(float)
    tracker_count = np.bincount(data.tracker_ids, minlength=data.num_tracker_ids).astype(float)
    score = HOTA._matching_scores(data, gt_count, tracker_count)
    forced, matched = forced_matches(data, score)
    match_gt, match_tracker, match_sim = (
        [data.pair_gt[matched]],
        [data.pair_tracker[matched]],
        [data.similarity[matched]],
    )
    for t in np.flatnonzero(data.active & ~forced):
        rows, cols = linear_sum_assignment(-data.dense(t, score))
        match_sim.append(data.dense(t, data.similarity)[rows, cols])
        match_gt.append(rows + data.gt_start[t])
        match_tracker.append(cols + data.tracker_start[t])
    return np.concatenate(match_gt), np.concatenate(match_tracker), np.concatenate(match_sim)


def hota_from_sums(tp: np.ndarray, boxes: np.ndarray, association: np.ndarray) -> np.ndarray:
    """HOTA (percent, the mean over alphas) from summed HOTA evidence (see ``WorldCounts.hota_sums``)."""
    det = tp / np.maximum(1, boxes[..., None] - tp)
    ass = association / np.maximum(1, tp)
    return 100 * np.mean(np.sqrt(det * ass), axis=-1)


def mota_from_sums(sums: np.ndarray) -> np.ndarray:
    """MOTA (percent) from summed CLEAR evidence (TP, FN, FP, IDSW, ground-truth boxes)."""
    tp, fn, fp, idsw = sums[..., 0], sums[..., 1], sums[..., 2], sums[..., 3]
    return 100 * (tp - fp - idsw) / np.maximum(1.0, tp + fn)


# ----------------------------------------------------------------------------------------- one take, all takes


@dataclass(frozen=True)
class TakeResult:
    """A take's point estimates and its bootstrap evidence."""

    camera: tuple[int, int, int]  # IDTP, IDFN, IDFP over every camera
    camera_counts: IdentityCounts
    world: dict | None  # the TrackEval units' results (CLEAR, Identity, HOTA, Count); None: no world points
    world_counts: WorldCounts | None


@dataclass(frozen=True)
class CrossViewSettings:
    iou_threshold: float  # per-camera boxes: a match at IoU >= this
    distance_m: float  # the world frame: a match at a distance <= this
    zero_distance_m: float  # similarity max(0, 1 - d / this)
    block: int  # time stamps per bootstrap block
    samples: int
    seed: int
    confidence: float

    @property
    def world_threshold(self) -> float:
        return 1.0 - self.distance_m / self.zero_distance_m


def world_units(settings: CrossViewSettings) -> list:
    return [HOTA(), CLEAR(settings.world_threshold), Identity(settings.world_threshold)]


def evaluate_take(
    views: list[CameraView], world_gt: pd.DataFrame | None, shared_ids: bool, settings: CrossViewSettings
) -> TakeResult:
    """The cross-view metrics of one take. ``world_gt``: time_stamp, person, WORLD_COLUMNS of the people some camera
    sees at each time stamp, or None where the take has no 3D ground truth."""
    counts = camera_counts(views, settings.iou_threshold, shared_ids, settings.block)
    camera = counts.weighted(np.ones(len(counts.gt), np.int64))
    world = world_counts_of = None
    found = None if world_gt is None else world_data(world_gt, views, shared_ids, settings.zero_distance_m)
    if found is not None:
        data, steps, _, _ = found
        world = {unit.name: unit.eval_sequence(data) for unit in world_units(settings)}
        world["Count"] = {
            "GT_Dets": data.num_gt_dets,
            "GT_IDs": data.num_gt_ids,
            "Dets": data.num_tracker_dets,
            "IDs": data.num_tracker_ids,
        }
        world_counts_of = world_counts(data, steps, settings.world_threshold, settings.block)
    return TakeResult(camera, counts, world, world_counts_of)


def _interval(values: np.ndarray, estimate: float, confidence: float, floor: float = 0.0) -> list[float]:
    """The basic (reverse-percentile) bootstrap interval of a percentage: the resamples' percentiles reflected
    about the estimate, kept within [floor, 100]."""
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return [float(max(floor, 2 * estimate - high)), float(min(100.0, 2 * estimate - low))]


def _draws(rng: np.random.Generator, blocks: int, samples: int) -> np.ndarray:
    """(samples, blocks) how often each block is drawn in each resample."""
    picks = rng.integers(0, blocks, size=(samples, blocks))
    return np.stack([np.bincount(row, minlength=blocks) for row in picks]).astype(np.int64)


def summarize_takes(takes: dict[str, TakeResult], settings: CrossViewSettings) -> dict:
    """``{"COMBINED": entry, "takes": {take: entry}}``; an entry is ``{"camera": {...}, "world": {...} or None}``
    with each block's ``ci95`` (the interval at ``settings.confidence``)."""
    from egoeval.tracking.trackeval import summarize  # the per-camera summaries' fields and scaling

    rng = np.random.default_rng(settings.seed)
    names = sorted(takes)
    draws = {name: _draws(rng, len(takes[name].camera_counts.gt), settings.samples) for name in names}
    camera_draws = {n: takes[n].camera_counts.resampled(draws[n]) for n in names}
    world_names = [n for n in names if takes[n].world is not None]
    world_draws = {}
    for n in world_names:
        counts, weights = takes[n].world_counts, _draws(rng, len(takes[n].world_counts.clear), settings.samples)
        identity = counts.identity.resampled(weights)
        world_draws[n] = (identity, counts.clear_sums(weights), counts.hota_sums(weights))

    def entry(members: list[str]) -> dict:
        idtp, idfn, idfp = (sum(takes[n].camera[k] for n in members) for k in range(3))
        sampled = sum(camera_draws[n] for n in members)
        camera = {**_identity_fields(idtp, idfn, idfp), "IDTP": idtp, "IDFN": idfn, "IDFP": idfp}
        fields = _identity_rates(sampled)
        camera["ci95"] = {
            f: _interval(fields[:, k], camera[f], settings.confidence) for k, f in enumerate(CAMERA_FIELDS)
        }
        worlds = [n for n in members if n in world_draws]
        if not worlds:
            return {"camera": camera, "world": None}
        units = world_units(settings)
        results = {u.name: u.combine_sequences({n: takes[n].world[u.name] for n in worlds}) for u in units}
        results["Count"] = {k: sum(takes[n].world["Count"][k] for n in worlds) for k in takes[worlds[0]].world["Count"]}
        world = summarize(results)
        world["distance_m"] = (1.0 - results["CLEAR"]["MOTP"]) * settings.zero_distance_m if world["TP"] else None
        identity = sum(world_draws[n][0] for n in worlds)
        idf = _identity_rates(identity)
        intervals = {f: _interval(idf[:, k], world[f], settings.confidence) for k, f in enumerate(CAMERA_FIELDS)}
        mota = mota_from_sums(sum(world_draws[n][1] for n in worlds))
        intervals["MOTA"] = _interval(mota, world["MOTA"], settings.confidence, floor=-np.inf)
        hota = [sum(world_draws[n][2][k] for n in worlds) for k in range(3)]
        intervals["HOTA"] = _interval(hota_from_sums(*hota), world["HOTA"], settings.confidence)
        world["ci95"] = {f: intervals[f] for f in INTERVAL_FIELDS["world"]}
        return {"camera": camera, "world": world}

    return {"COMBINED": entry(names), "takes": {n: entry([n]) for n in names}}
