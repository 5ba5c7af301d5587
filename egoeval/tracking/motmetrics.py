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

from egoeval.tracking.lapjv import LARGE, lapjv
from egoeval.tracking.matching import frame_pairs, linear_sum_assignment
from egoeval.tracking.mot import MotTable, SequenceTables

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


def by_frame(table: MotTable) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A table's rows stably sorted by frame (``order``): frames, ids and boxes ``x1, y1, x2, y2`` in float32, with
    ``x2 = x + w`` computed in float64 first (as mmdet's COCO reader), and ``order``."""
    order = np.argsort(table.frame, kind="stable")
    x, y, w, h = (table.x[order], table.y[order], table.w[order], table.h[order])
    boxes = np.stack([x, y, x + w, y + h], axis=1).astype(np.float32)
    return table.frame[order], table.id[order], boxes, order


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


def accumulate(gt: MotTable, pred: MotTable, iou_threshold: float = 0.5, ignore_iof: float = 0.5) -> Counts:
    """One video's accumulator. ``gt`` holds every ground-truth row (``conf == 0``: ignore boxes); frames ascending,
    rows within a frame in file order (the order decides ties, as in py-motmetrics).

    Every frame's distances, and which tracker boxes cover an ignore box, are computed for all frames at once. In a
    frame where no box has two pairs within matching distance (and no id repeats), every such pair matches whatever
    the state: an object's last match is kept first, the rest is forced. Those frames are decided together; the walk
    from frame to frame (its state: the tracker id each object was last matched to) visits the others only. A match
    is a switch exactly where the object's previous match was another tracker id, and the distances are added in
    py-motmetrics' order: frame by frame, the kept last matches by row, then the others by row."""
    g_frames, g_ids, g_boxes, g_order = by_frame(gt)
    h_frames, h_ids, h_boxes, _ = by_frame(pred)
    ignored = np.trunc(gt.conf[g_order]) == 0
    o_frames, o_ids, o_boxes = g_frames[~ignored], g_ids[~ignored], g_boxes[~ignored]
    i_frames, i_boxes = g_frames[ignored], g_boxes[ignored]
    frames = np.unique(np.concatenate([o_frames, h_frames]))
    bounds = np.append(frames, np.iinfo(np.int64).max)
    o_at, h_at = np.searchsorted(o_frames, bounds), np.searchsorted(h_frames, bounds)
    i_at = np.searchsorted(i_frames, np.stack([frames, frames + 1]))  # ignore boxes of exactly that frame
    n_o, n_h = np.diff(o_at), np.diff(h_at)
    gi, hj, p_at = frame_pairs(o_at[:-1], n_o, h_at[:-1], n_h)
    dists = (np.float32(1) - pair_overlaps(o_boxes[gi], h_boxes[hj])).astype(np.float64)  # every frame's matrix
    dists[dists > np.float32(1 - iou_threshold)] = np.nan  # eval_mot compares float32 distances with its threshold
    hi, ii, _ = frame_pairs(h_at[:-1], n_h, i_at[0], i_at[1] - i_at[0])
    covers = np.zeros(len(h_ids), dtype=bool)  # tracker rows on an ignore box of their frame (IoF over the ignore rule)
    covers[hi[pair_overlaps(h_boxes[hi], i_boxes[ii], mode="iof") > np.float32(ignore_iof)]] = True

    # the frames decided at once: every pair within matching distance matches, tracker boxes on an ignore box
    # without one are removed
    near = np.flatnonzero(np.isfinite(dists))  # the pairs within matching distance, frame by frame, row-major
    near_t, near_o, near_h, near_d = np.searchsorted(p_at, near, side="right") - 1, gi[near], hj[near], dists[near]
    o_t, h_t = np.repeat(np.arange(len(frames)), n_o), np.repeat(np.arange(len(frames)), n_h)  # each row's frame
    walked = _walked_frames((o_t, o_ids, near_o), (h_t, h_ids, near_h), near_d)
    ignores = i_at[1] > i_at[0]
    has_near = np.zeros(len(h_ids), dtype=bool)
    has_near[near_h] = True
    kept = ~(covers & ~has_near & ignores[h_t] & ~walked[h_t])  # tracker boxes left after the ignore rule
    decided = ~walked[near_t]  # matches of the frames decided together
    d_t, d_o, d_h, d_d = near_t[decided], near_o[decided], near_h[decided], near_d[decided]
    left = np.bincount(h_t[kept], minlength=len(frames))
    counted = int((~walked & ((n_o > 0) | (left > 0))).sum())  # accumulated frames among them

    # the others, in order, from each object's last match decided at once (the walk updates kept)
    queries = np.flatnonzero(walked[o_t])  # the walk's ground-truth rows: their objects' last match decided at once
    before_t, before_hid = _previous(o_ids[d_o], d_t, h_ids[d_h], o_ids[queries], o_t[queries])
    walk = _Walk(dists, p_at, near, gi, hj, (o_ids, h_ids), kept)
    before = dict(zip(queries.tolist(), zip(before_t.tolist(), before_hid.tolist(), strict=True), strict=True))
    walk.run(np.flatnonzero(walked), (o_at, h_at), ignores, covers, before)

    # every match: switches where the previous match of the object (decided at once or walked) was another id
    states = [np.array(values, dtype=np.int64) for values in walk.states]  # after each walked frame
    events = [
        np.array(values, dtype=dtype)
        for values, dtype in zip(walk.events, (np.int64, bool, np.int64, np.float64), strict=True)
    ]
    prev_t, prev_hid = _previous(
        np.concatenate([o_ids[d_o], states[0]]),
        np.concatenate([d_t, states[1]]),
        np.concatenate([h_ids[d_h], states[2]]),
        o_ids[d_o],
        d_t,
    )
    kept_last = (prev_t >= 0) & (prev_hid == h_ids[d_h])  # step 1 of py-motmetrics: the object's last match kept
    switches = int(((prev_t >= 0) & (prev_hid != h_ids[d_h])).sum())
    events_t, events_step, events_o, events_d = (
        np.concatenate([d_t, events[0]]),
        np.concatenate([~kept_last, events[1]]),
        np.concatenate([d_o, events[2]]),
        np.concatenate([d_d, events[3]]),
    )
    order = np.lexsort((events_o, events_step, events_t))
    counts = Counts(
        matches=len(events_t) - switches - walk.switches,
        switches=switches + walk.switches,
        distance_sum=float(np.cumsum(events_d[order])[-1]) if len(order) else 0.0,
        frames=counted + walk.frames,
    )
    matched = np.zeros(len(o_ids), dtype=bool)  # ground-truth rows matched (MATCH or SWITCH)
    matched[events_o] = True
    counts.objects, counts.predictions = len(o_ids), int(kept.sum())
    counts.misses = counts.objects - int(matched.sum())
    counts.false_positives = counts.predictions - counts.matches - counts.switches
    _track_coverage(counts, o_ids, matched)
    finite = np.isfinite(dists) & kept[hj]  # pairs within matching distance, in accumulated frames
    counts.idtp = _idtp(o_ids[gi[finite]], h_ids[hj[finite]])
    return counts


def _walked_frames(
    objects: tuple[np.ndarray, np.ndarray, np.ndarray],
    tracks: tuple[np.ndarray, np.ndarray, np.ndarray],
    near_d: np.ndarray,
) -> np.ndarray:
    """Per frame: whether the walk decides it (its assignment may depend on the state): where a box has two pairs
    within matching distance, where an id appears twice, or where assign's fast path would not apply. ``objects``
    and ``tracks``: each row's frame and id, and the rows of the pairs within matching distance."""
    n_frames = int(max(objects[0].max(initial=-1), tracks[0].max(initial=-1))) + 1
    walked = np.zeros(n_frames, dtype=bool)
    rows_per_frame = []
    for row_t, ids, near in (objects, tracks):
        order = np.lexsort((ids, row_t))
        twice = (np.diff(row_t[order]) == 0) & (np.diff(ids[order]) == 0)
        walked[row_t[order][1:][twice]] = True
        walked[row_t[np.flatnonzero(np.bincount(near, minlength=len(row_t)) > 1)]] = True
        rows_per_frame.append(np.bincount(row_t, minlength=n_frames))
    largest = np.abs(near_d).max(initial=0)
    walked |= 2 * np.minimum(*rows_per_frame) * (largest + 1) + 2 >= LARGE
    return walked


def _previous(
    ids: np.ndarray, t: np.ndarray, values: np.ndarray, query_ids: np.ndarray, query_t: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each query: the frame and value of the latest record of its id in an earlier frame (frame -1: none); at
    most one record per id and frame."""
    if len(ids) == 0:
        return np.full(len(query_ids), -1, np.int64), np.full(len(query_ids), -1, np.int64)
    _, rank = np.unique(np.concatenate([ids, query_ids]), return_inverse=True)
    rank, query_rank = rank[: len(ids)], rank[len(ids) :]
    stride = int(max(t.max(), query_t.max(initial=0))) + 2
    order = np.argsort(rank * stride + t, kind="stable")
    keys = (rank * stride + t)[order]
    at = np.maximum(np.searchsorted(keys, query_rank * stride + query_t) - 1, 0)  # the last record before each query
    found = keys[at] // stride == query_rank
    found &= keys[at] < query_rank * stride + query_t
    return np.where(found, t[order[at]], -1), np.where(found, values[order[at]], -1)


class _Walk:
    """py-motmetrics' ``MOTAccumulator.update`` with mmtracking's ignore rule, in its order of operations, over the
    frames :func:`accumulate` does not decide at once. Rows are the ground-truth (``o``) and tracker (``h``) row
    numbers of the whole video; a frame's pairs within matching distance are visited only."""

    def __init__(
        self,
        dists: np.ndarray,
        p_at: np.ndarray,
        near: np.ndarray,
        gi: np.ndarray,
        hj: np.ndarray,
        ids: tuple[np.ndarray, np.ndarray],
        kept: np.ndarray,
    ) -> None:
        self.dists, self.p_at, self.near_at = dists, p_at, np.searchsorted(near, p_at)
        self.near_o, self.near_h, self.near_d = gi[near], hj[near], dists[near]
        self.o_ids, self.h_ids = ids[0].tolist(), ids[1].tolist()
        self.kept = kept  # the ignore rule drops tracker boxes of the walked frames here
        self.frames = self.switches = 0  # accumulated frames, SWITCH events
        self.events: tuple[list, list, list, list] = ([], [], [], [])  # frame, step 2?, ground-truth row, distance
        self.states: tuple[list, list, list] = ([], [], [])  # object, frame, its last tracker id after that frame

    def run(
        self,
        walked: np.ndarray,
        bounds: tuple[np.ndarray, np.ndarray],
        ignores: np.ndarray,
        covers: np.ndarray,
        before: dict[int, tuple[int, int]],
    ) -> None:
        """The frames ``walked``, in order (``bounds``: where each frame's ground-truth and tracker rows start);
        ``before``: per ground-truth row, the frame and tracker id of its object's last match decided at once before
        its frame (frame -1: none)."""
        o_at, h_at = bounds[0].tolist(), bounds[1].tolist()
        ignores_l, covers_l, o_ids, h_ids = ignores.tolist(), covers.tolist(), self.o_ids, self.h_ids
        walked_last: dict[int, tuple[int, int]] = {}  # object -> (frame, tracker id) after the latest walked frame

        def last(o: int) -> int | None:
            """The tracker id row ``o``'s object was last matched to, before this frame."""
            mine, theirs = walked_last.get(o_ids[o]), before[o]
            if mine is not None and mine[0] > theirs[0]:
                return mine[1]
            return theirs[1] if theirs[0] >= 0 else None

        for t in walked.tolist():
            o0, o1, h0, h1 = o_at[t], o_at[t + 1], h_at[t], h_at[t + 1]
            a, b = int(self.near_at[t]), int(self.near_at[t + 1])
            near = (self.near_o[a:b].tolist(), self.near_h[a:b].tolist(), self.near_d[a:b].tolist())
            pairs = list(zip(*near, strict=True))
            columns: Sequence[int] = range(h0, h1)  # the tracker rows accumulated
            if ignores_l[t] and h1 > h0:  # tracker boxes left unmatched on an ignore box are removed
                assigned = {h for _, h, _ in self._assign(t, pairs, columns, (o0, o1, h0))}
                dropped = [h for h in columns if covers_l[h] and h not in assigned]
                if dropped:
                    self.kept[dropped] = False
                    columns = [h for h in columns if h not in dropped]
                    pairs = [pair for pair in pairs if pair[1] not in dropped]
            if o1 == o0 and not columns:
                continue
            self.frames += 1
            column = {h_ids[h]: h for h in columns}  # an id's column (py-motmetrics': the last, were one repeated)
            o_done: set[int] = set()
            h_done: set[int] = set()
            for o, h, d in pairs:  # 1. keep each object's last match where it still matches
                if column.get(last(o)) == h and h not in h_done:
                    o_done.add(o)
                    h_done.add(h)
                    self._event(t, False, o, d)
            rest = [(o, h, d) for o, h, d in pairs if o not in o_done and h not in h_done]
            now: dict[int, int] = {}  # this frame's new last matches
            for o, h, d in self._assign(t, rest, columns, (o0, o1, h0), o_done, h_done):  # 2. the rest, least cost
                oid, hid = o_ids[o], h_ids[h]
                previous = now[oid] if oid in now else last(o)
                self.switches += previous is not None and previous != hid
                self._event(t, True, o, d)
                o_done.add(o)
                now[oid] = hid
            for oid, hid in now.items():
                walked_last[oid] = (t, hid)
                for values, value in zip(self.states, (oid, t, hid), strict=True):
                    values.append(value)

    def _event(self, t: int, step_2: bool, o: int, d: float) -> None:
        for values, value in zip(self.events, (t, step_2, o, d), strict=True):
            values.append(value)

    def _assign(
        self,
        t: int,
        pairs: list[tuple[int, int, float]],
        columns: Sequence[int],
        starts: tuple[int, int, int],
        o_done: Set[int] = frozenset(),
        h_done: Set[int] = frozenset(),
    ) -> list[tuple[int, int, float]]:
        """:func:`assign` on frame ``t``'s matrix (``starts``: its first ground-truth row, the row after its last, its
        first tracker row) of the tracker rows ``columns``, with the rows in ``o_done`` and the columns in ``h_done``
        missing edges (``pairs``: its pairs within matching distance, row-major, those rows and columns left out):
        (ground-truth row, tracker row, distance) by row. Where no row and no column holds two pairs, the matrix is
        not built: the answer is forced (assign's fast path, its condition included)."""
        if not pairs:
            return []
        o0, o1, h0 = starts
        rows, cols = {o for o, _, _ in pairs}, {h for _, h, _ in pairs}
        largest = max(abs(d) for _, _, d in pairs)
        if len(rows) == len(pairs) == len(cols) and 2 * min(o1 - o0, len(columns)) * (largest + 1) + 2 < LARGE:
            return pairs
        block = self.dists[self.p_at[t] : self.p_at[t + 1]].reshape(o1 - o0, -1)
        matrix = block[:, [h - h0 for h in columns]]  # a copy
        matrix[[o - o0 for o in o_done], :] = np.nan
        matrix[:, [k for k, h in enumerate(columns) if h in h_done]] = np.nan
        return [(o0 + i, columns[j], float(block[i, columns[j] - h0])) for i, j in assign(matrix)]


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
    gt: SequenceTables,
    pred: SequenceTables,
    iou_threshold: float = 0.5,
    ignore_iof: float = 0.5,
) -> dict[str, dict]:
    """``{"COMBINED": summary, "sequences": {name: summary}}`` as mmtracking's ``eval_mot`` reports them.

    ``gt`` holds every ground-truth row (read_mot ``kind="pred"``: ``conf == 0`` rows are the ignore boxes); a
    sequence missing from ``pred`` has no tracker boxes. Sequences with no accumulated frame are left out.
    """
    per_seq: dict[str, Counts] = {}
    for name in sorted(gt):
        tracks = MotTable.empty() if name not in pred else MotTable.of(pred[name])
        counts = accumulate(MotTable.of(gt[name]), tracks, iou_threshold, ignore_iof)
        if counts.frames:
            per_seq[name] = counts
    return {
        "COMBINED": summary(list(per_seq.values())),
        "sequences": {name: summary([c]) for name, c in per_seq.items()},
    }
