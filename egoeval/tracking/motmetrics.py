"""mmtracking's ``eval_mot`` through py-motmetrics 1.4.0, re-implemented on NumPy 2 (lap 0.4.0's assignment).

mmtracking (``CocoVideoDataset.evaluate`` -> ``eval_mot``) feeds one py-motmetrics ``MOTAccumulator`` per video and
pools them into OVERALL. This module computes the same numbers without py-motmetrics (which needs NumPy < 2 through
mmtracking) and without its per-event DataFrames:

- boxes ``x1, y1, x2, y2`` in float32, IoU and IoF as mmdet's ``bbox_overlaps`` computes them (float32, union at
  least 1e-6); distance ``1 - IoU``; a pair matches when the distance is at most ``1 - iou_threshold``;
- ignore boxes (``conf == 0`` in MOTChallenge ground truth: a dataset's ``ignore``/``iscrowd``): in a frame that
  has any, a tracker box left unmatched by a plain assignment over all ground truth and covering an ignore box
  with IoF > ``ignore_iof`` is removed before accumulation (never counted);
- a frame with no ground truth and no (remaining) tracker box is skipped;
- per frame, first every ground-truth object keeps the tracker id it was **last** matched to, however many frames
  ago (py-motmetrics' ``m``), when that box still matches; the rest by a minimum-cost assignment on py-motmetrics'
  expensive-edge matrix, solved as mmtracking's environment solves it: lap 0.4.0's LAPJV (``egoeval.tracking.lapjv``),
  which decides exact ties (duplicate boxes); a match to another id than the last one is an ID switch;
- MT/PT/ML: matched share of the frames where the object is present (>= 0.8, [0.2, 0.8), < 0.2); Frag: runs of
  misses between the object's first and last match (frames where it is absent do not count);
- IDF1/IDP/IDR: one global assignment maximising the frames a ground-truth id and a tracker id match;
- a sequence without a single accumulated frame is left out of the per-sequence table and of the overall numbers
  (mmtracking's empty videos); OVERALL sums the counts and recomputes the ratios (py-motmetrics' ``compute_overall``).

Ground truth reaches it as the dataset reader passes it on (which boxes a dataset drops is the caller's rule). HOTA
is not part of ``eval_mot``.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from egoeval.tracking.lapjv import LARGE, lapjv
from egoeval.tracking.matching import linear_sum_assignment

OVERLAP_EPS = np.float32(1e-6)  # mmdet bbox_overlaps' eps


@dataclass
class Counts:
    """The counts py-motmetrics derives from one accumulator (its metric inputs)."""

    matches: int = 0  # MATCH events
    switches: int = 0  # SWITCH events
    misses: int = 0
    false_positives: int = 0
    distance_sum: float = 0.0  # sum of 1 - IoU over MATCH and SWITCH events
    objects: int = 0  # ground-truth boxes
    predictions: int = 0  # tracker boxes accumulated (after the ignore rule)
    idtp: int = 0
    mostly_tracked: int = 0
    partially_tracked: int = 0
    mostly_lost: int = 0
    fragmentations: int = 0
    frames: int = 0  # accumulated frames


def by_frame(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A read_mot table's rows stably sorted by frame (``order``): frames, ids and boxes ``x1, y1, x2, y2`` in
    float32, with ``x2 = x + w`` computed in float64 first (as mmdet's COCO reader), and ``order``."""
    order = np.argsort(df["frame"].to_numpy(np.int64), kind="stable")
    x, y, w, h = (df[name].to_numpy(np.float64)[order] for name in ("x", "y", "w", "h"))
    boxes = np.stack([x, y, x + w, y + h], axis=1).astype(np.float32)
    return df["frame"].to_numpy(np.int64)[order], df["id"].to_numpy(np.int64)[order], boxes, order


def overlaps(a: np.ndarray, b: np.ndarray, mode: str = "iou") -> np.ndarray:
    """mmdet's ``bbox_overlaps`` (float32, non-legacy coordinates), vectorised: IoU, or IoF over ``a``'s area."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)), dtype=np.float32)
    return pair_overlaps(a[:, None, :], b[None, :, :], mode)


def pair_overlaps(a: np.ndarray, b: np.ndarray, mode: str = "iou") -> np.ndarray:
    """:func:`overlaps` of boxes paired element by element (broadcast ``a`` and ``b``: ``[..., 4]``), the same float32
    operations in the same order."""
    area_a = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
    area_b = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    width = np.maximum(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]), np.float32(0))
    height = np.maximum(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]), np.float32(0))
    overlap = width * height
    union = area_a + area_b - overlap if mode == "iou" else np.broadcast_to(area_a, overlap.shape)
    return overlap / np.maximum(union, OVERLAP_EPS)


def _expensive_edges(costs: np.ndarray) -> np.ndarray:
    """py-motmetrics' ``add_expensive_edges``: NaN becomes a cost no optimal assignment picks."""
    valid = np.isfinite(costs)
    if valid.all():
        return costs.copy()
    r = min(costs.shape)
    c = np.abs(costs[valid]).max() + 1
    return np.where(valid, costs, 2 * r * c + 1)


def assign(costs: np.ndarray) -> list[tuple[int, int]]:
    """py-motmetrics' ``linear_sum_assignment`` as mmtracking's environment runs it (``lsa_solve_lapjv`` on lap
    0.4.0): the finite pairs of LAPJV's assignment of the expensive-edge matrix, by row.

    Fast path: when no row and no column holds two finite costs, every optimal assignment takes all of them (leaving
    one out costs at least the expensive constant minus what the others can save, which is >= 1), and LAPJV returns
    an optimal one as long as each column of its padded matrix has a cost below its ``LARGE`` (which it otherwise
    takes for infinity): all costs there are at most the expensive constant + 1, hence the bound below.
    """
    valid = np.isfinite(costs)
    if not valid.any():
        return []  # py-motmetrics solves a zero matrix, and every pair is then a missing edge
    rows, cols = np.nonzero(valid)
    forced = len(np.unique(rows)) == len(rows) and len(np.unique(cols)) == len(cols)
    if forced and 2 * min(costs.shape) * (np.abs(costs[valid]).max() + 1) + 2 < LARGE:
        return list(zip(rows.tolist(), cols.tolist(), strict=True))
    row_to_col = lapjv(_expensive_edges(costs))
    return [(i, j) for i, j in enumerate(row_to_col.tolist()) if j >= 0 and valid[i, j]]


def accumulate(gt: pd.DataFrame, pred: pd.DataFrame, iou_threshold: float = 0.5, ignore_iof: float = 0.5) -> Counts:
    """One video's accumulator. ``gt`` holds every ground-truth row (``conf == 0``: ignore boxes); frames ascending,
    rows within a frame in file order (the order decides ties, as in py-motmetrics).

    Every frame's distances, and which tracker boxes cover an ignore box, are computed for all frames at once; the
    walk from frame to frame (its state: the tracker id each object was last matched to) then visits only the pairs
    within matching distance, and builds a frame's matrix only where its assignment is not forced."""
    g_frames, g_ids, g_boxes, g_order = by_frame(gt)
    h_frames, h_ids, h_boxes, _ = by_frame(pred)
    ignored = np.trunc(gt["conf"].to_numpy(np.float64)[g_order]) == 0
    o_frames, o_ids, o_boxes = g_frames[~ignored], g_ids[~ignored], g_boxes[~ignored]
    i_frames, i_boxes = g_frames[ignored], g_boxes[ignored]
    frames = np.unique(np.concatenate([o_frames, h_frames]))
    bounds = np.append(frames, np.iinfo(np.int64).max)
    o_at, h_at = np.searchsorted(o_frames, bounds), np.searchsorted(h_frames, bounds)
    i_at = np.searchsorted(i_frames, np.stack([frames, frames + 1]))  # ignore boxes of exactly that frame
    gi, hj, p_at = _frame_pairs(o_at[:-1], np.diff(o_at), h_at[:-1], np.diff(h_at))
    dists = (np.float32(1) - pair_overlaps(o_boxes[gi], h_boxes[hj])).astype(np.float64)  # every frame's matrix
    dists[dists > np.float32(1 - iou_threshold)] = np.nan  # eval_mot compares float32 distances with its threshold
    hi, ii, _ = _frame_pairs(h_at[:-1], np.diff(h_at), i_at[0], i_at[1] - i_at[0])
    covers = np.zeros(len(h_ids), dtype=bool)  # tracker rows on an ignore box of their frame (IoF over the ignore rule)
    covers[hi[pair_overlaps(h_boxes[hi], i_boxes[ii], mode="iof") > np.float32(ignore_iof)]] = True

    repeated = np.zeros(len(frames), dtype=bool)  # frames where a tracker id repeats (py-motmetrics: the last counts)
    order = np.lexsort((h_ids, h_frames))
    twice = (np.diff(h_frames[order]) == 0) & (np.diff(h_ids[order]) == 0)
    repeated[np.searchsorted(frames, h_frames[order][1:][twice])] = True

    walk = _Walk(dists, p_at, gi, hj, o_ids, h_ids)
    walk.run(o_at, h_at, i_at[1] > i_at[0], covers, repeated)
    counts = walk.counts
    counts.objects, counts.predictions = len(o_ids), int(walk.kept.sum())
    counts.misses = counts.objects - int(walk.matched.sum())
    counts.false_positives = counts.predictions - counts.matches - counts.switches
    _track_coverage(counts, o_ids, walk.matched)
    finite = np.isfinite(dists) & walk.kept[hj]  # pairs within matching distance, in accumulated frames
    counts.idtp = _idtp(o_ids[gi[finite]], h_ids[hj[finite]])
    return counts


class _Walk:
    """py-motmetrics' ``MOTAccumulator.update`` with mmtracking's ignore rule, one frame after another, in its order of
    operations. Rows are the ground-truth (``o``) and tracker (``h``) row numbers of the whole video; a frame's pairs
    within matching distance (``near``) are positions in ``near_o``, ``near_h`` and ``near_d``, row-major."""

    def __init__(
        self, dists: np.ndarray, p_at: np.ndarray, gi: np.ndarray, hj: np.ndarray, o_ids: np.ndarray, h_ids: np.ndarray
    ) -> None:
        near = np.flatnonzero(np.isfinite(dists))
        self.dists, self.p_at, self.near_at = dists, p_at.tolist(), np.searchsorted(near, p_at).tolist()
        self.near_o, self.near_h, self.near_d = gi[near].tolist(), hj[near].tolist(), dists[near].tolist()
        self.near_oid, self.near_hid = o_ids[gi[near]].tolist(), h_ids[hj[near]].tolist()
        self.o_ids, self.h_ids = o_ids.tolist(), h_ids.tolist()
        self.counts = Counts()  # run's
        self.kept = np.ones(len(h_ids), dtype=bool)  # tracker boxes left after the ignore rule
        self.matched = np.zeros(len(o_ids), dtype=bool)  # ground-truth rows matched (MATCH or SWITCH)

    def run(
        self, o_at: np.ndarray, h_at: np.ndarray, ignores: np.ndarray, covers: np.ndarray, repeated: np.ndarray
    ) -> None:
        """Every frame: ``o_at``/``h_at`` where each frame's rows start (one more: the end), ``ignores`` (frames with
        ignore boxes), ``covers`` (tracker rows on an ignore box), ``repeated`` (frames where a tracker id repeats)."""
        near_at, near_o, near_h, near_d = self.near_at, self.near_o, self.near_h, self.near_d
        near_oid, near_hid, o_ids, h_ids = self.near_oid, self.near_hid, self.o_ids, self.h_ids
        o_bounds, h_bounds = o_at.tolist(), h_at.tolist()
        ignores_l, covers_l, repeated_l = ignores.tolist(), covers.tolist(), repeated.tolist()
        last_hid: dict[int, int] = {}  # py-motmetrics' m: object -> the tracker id it was last matched to
        matched: list[int] = []
        frames = matches = switches = 0
        distance_sum = 0.0
        for t in range(len(o_bounds) - 1):
            o0, o1, h0, h1 = o_bounds[t], o_bounds[t + 1], h_bounds[t], h_bounds[t + 1]
            near: Sequence[int] = range(near_at[t], near_at[t + 1])
            columns: Sequence[int] = range(h0, h1)  # the tracker rows accumulated
            if ignores_l[t] and h1 > h0:  # tracker boxes left unmatched on an ignore box are removed
                assigned = {h for _, h, _ in self._assign(t, near, columns, (o0, o1, h0))}
                dropped = [h for h in columns if covers_l[h] and h not in assigned]
                if dropped:
                    self.kept[dropped] = False
                    columns = [h for h in columns if h not in dropped]
                    near = [p for p in near if near_h[p] not in dropped]
            if o1 == o0 and not columns:
                continue
            frames += 1
            if not near:
                continue
            o_done: set[int] = set()
            h_done: set[int] = set()
            column = {h_ids[h]: h for h in columns} if repeated_l[t] else None  # an id's column: the last one
            for p in near:  # 1. keep each object's last match where it still matches
                last = last_hid.get(near_oid[p])
                h = near_h[p]
                if (last == near_hid[p] if column is None else column.get(last) == h) and h not in h_done:
                    o_done.add(near_o[p])
                    h_done.add(h)
                    matches += 1
                    distance_sum += near_d[p]
            rest = [p for p in near if near_o[p] not in o_done and near_h[p] not in h_done]
            for o, h, d in self._assign(t, rest, columns, (o0, o1, h0), o_done, h_done) if rest else ():  # 2. the rest
                oid, hid = o_ids[o], h_ids[h]
                if last_hid.get(oid, hid) != hid:
                    switches += 1
                else:
                    matches += 1
                distance_sum += d
                o_done.add(o)
                last_hid[oid] = hid
            matched.extend(o_done)
        self.matched[matched] = True
        self.counts = Counts(matches=matches, switches=switches, distance_sum=distance_sum, frames=frames)

    def _assign(
        self,
        t: int,
        near: Sequence[int],
        columns: Sequence[int],
        starts: tuple[int, int, int],
        o_done: Set[int] = frozenset(),
        h_done: Set[int] = frozenset(),
    ) -> list[tuple[int, int, float]]:
        """:func:`assign` on frame ``t``'s matrix (``starts``: its first ground-truth row, the row after its last, its
        first tracker row) of the tracker rows ``columns``, with the rows in ``o_done`` and the
        columns in ``h_done`` missing edges (``near``: its pairs within matching distance): (ground-truth row, tracker
        row, distance) by row. Where no row and no column holds two pairs, the matrix is not built: the answer is
        forced (assign's fast path, its condition included)."""
        if not near:
            return []
        rows, cols = [self.near_o[p] for p in near], [self.near_h[p] for p in near]
        distances = [self.near_d[p] for p in near]
        o0, o1, h0 = starts
        forced = len(set(rows)) == len(rows) and len(set(cols)) == len(cols)
        if forced and 2 * min(o1 - o0, len(columns)) * (max(map(abs, distances)) + 1) + 2 < LARGE:
            return list(zip(rows, cols, distances, strict=True))
        block = self.dists[self.p_at[t] : self.p_at[t + 1]].reshape(o1 - o0, -1)
        matrix = block[:, [h - h0 for h in columns]]  # a copy
        matrix[[o - o0 for o in o_done], :] = np.nan
        matrix[:, [k for k, h in enumerate(columns) if h in h_done]] = np.nan
        return [(o0 + i, columns[j], float(block[i, columns[j] - h0])) for i, j in assign(matrix)]


def _frame_pairs(
    a_start: np.ndarray, a_count: np.ndarray, b_start: np.ndarray, b_count: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (row of a, row of b) of the same frame, frame by frame in row-major order (frame ``t``'s rows of a are
    ``a_start[t]`` and the ``a_count[t] - 1`` after it, of b likewise): their row indices and where each frame's
    ``a_count x b_count`` block starts."""
    p_at = np.concatenate([[0], np.cumsum(a_count * b_count)])
    row_frame = np.repeat(np.arange(len(a_count)), a_count)  # each row of a: its frame
    first = np.cumsum(a_count) - a_count  # where each frame's rows of a begin among them
    rows = a_start[row_frame] + np.arange(len(row_frame)) - first[row_frame]
    width = b_count[row_frame]  # pairs per row of a
    shift = b_start[row_frame] - (np.cumsum(width) - width)  # b's first row, less where the row's pairs begin
    return np.repeat(rows, width), np.arange(p_at[-1]) + np.repeat(shift, width), p_at


def _track_coverage(counts: Counts, o_ids: np.ndarray, matched: np.ndarray) -> None:
    """MT/PT/ML (matched share of the frames where the object is present) and Frag (a match after a run of misses
    that follows an earlier match), from the rows in frame order."""
    order = np.argsort(o_ids, kind="stable")  # by object, frames ascending within each
    ids, hit = o_ids[order], matched[order]
    _, start, present = np.unique(ids, return_index=True, return_counts=True)
    tracked = np.add.reduceat(hit.astype(np.int64), start) if len(ids) else np.zeros(0, np.int64)
    ratio = tracked / np.maximum(present, 1)
    counts.mostly_tracked = int((ratio >= 0.8).sum())
    counts.partially_tracked = int(((ratio >= 0.2) & (ratio < 0.8)).sum())
    counts.mostly_lost = int((ratio < 0.2).sum())
    first = np.zeros(len(ids), dtype=bool)
    first[start] = True
    earlier = np.cumsum(hit) - hit  # hits on earlier rows, over all objects
    earlier -= earlier[start][np.repeat(np.arange(len(start)), present)]  # ... of the same object
    after_miss = np.zeros(len(ids), dtype=bool)
    after_miss[1:] = ~hit[:-1]
    counts.fragmentations = int((hit & after_miss & ~first & (earlier > 0)).sum())


def _idtp(oids: np.ndarray, hids: np.ndarray) -> int:
    """The most frames a one-to-one pairing of ground-truth and tracker ids can match (py-motmetrics' IDTP), from
    every (object, tracker id) pair within matching distance, one per frame.

    py-motmetrics finds it with LAPJV too, on integer costs where every column has a cost below LAPJV's ``LARGE``
    (an id seen in fewer than a million frames), so LAPJV is exact there: only the optimum's value counts, and any
    exact solver gives it."""
    if len(oids) == 0:
        return 0
    rows, oi = np.unique(oids, return_inverse=True)
    cols, hi = np.unique(hids, return_inverse=True)
    weights = np.zeros((len(rows), len(cols)))
    np.add.at(weights, (oi, hi), 1)
    r, c = linear_sum_assignment(weights, maximize=True)
    return int(weights[r, c].sum())


def _ratio(a: float, b: float) -> float:
    """py-motmetrics' ``quiet_divide`` (x / 0 is inf or NaN)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.true_divide(a, b))


def summary(counts: list[Counts]) -> dict[str, float | int]:
    """The published fields of one accumulator or of several pooled (py-motmetrics' OVERALL): percentages and
    counts. MOTP is ``1 - mean distance`` (mmtracking's convention), NaN without a single match."""
    total = {f.name: sum(getattr(c, f.name) for c in counts) for f in fields(Counts)}
    detections = total["matches"] + total["switches"]
    idfn, idfp = total["objects"] - total["idtp"], total["predictions"] - total["idtp"]
    fractions = {
        "IDF1": _ratio(2 * total["idtp"], total["objects"] + total["predictions"]),
        "IDP": _ratio(total["idtp"], total["idtp"] + idfp),
        "IDR": _ratio(total["idtp"], total["idtp"] + idfn),
        "MOTA": 1.0 - _ratio(total["misses"] + total["switches"] + total["false_positives"], total["objects"]),
        "MOTP": 1.0 - _ratio(sum(c.distance_sum for c in counts), detections),
        "Rcll": _ratio(detections, total["objects"]),
        "Prcn": _ratio(detections, total["false_positives"] + detections),
    }
    out: dict[str, float | int] = {k: 100 * v for k, v in fractions.items()}
    out |= {
        "FP": total["false_positives"],
        "FN": total["misses"],
        "IDSW": total["switches"],
        "MT": total["mostly_tracked"],
        "PT": total["partially_tracked"],
        "ML": total["mostly_lost"],
        "Frag": total["fragmentations"],
        "GT_Dets": total["objects"],
        "Dets": total["predictions"],
        "IDTP": total["idtp"],
    }
    return out


def eval_mot(
    gt: dict[str, pd.DataFrame], pred: dict[str, pd.DataFrame], iou_threshold: float = 0.5, ignore_iof: float = 0.5
) -> dict[str, dict]:
    """``{"COMBINED": summary, "sequences": {name: summary}}`` as mmtracking's ``eval_mot`` reports them.

    ``gt`` holds every ground-truth row (read_mot ``kind="pred"``: ``conf == 0`` rows are the ignore boxes); a
    sequence missing from ``pred`` has no tracker boxes. Sequences with no accumulated frame are left out.
    """
    per_seq: dict[str, Counts] = {}
    for name in sorted(gt):
        frame = pred.get(name)
        counts = accumulate(gt[name], gt[name].iloc[:0] if frame is None else frame, iou_threshold, ignore_iof)
        if counts.frames:
            per_seq[name] = counts
    return {
        "COMBINED": summary(list(per_seq.values())),
        "sequences": {name: summary([c]) for name, c in per_seq.items()},
    }
