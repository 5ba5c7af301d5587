"""HOTA (Luiten et al. 2021) as TrackEval computes it: one matching per timestep, all alphas at once."""

from __future__ import annotations

import numpy as np

from egoeval.tracking.base import EPS, Metric, Result, SequenceData, combine_sum
from egoeval.tracking.matching import forced_matches, linear_sum_assignment
from egoeval.tracking.npsum import row_col_sums

ALPHAS = np.arange(0.05, 0.99, 0.05)  # TrackEval's expression, so the values are bit-identical
INTEGER_ARRAY_FIELDS = ["HOTA_TP", "HOTA_FN", "HOTA_FP"]
FLOAT_ARRAY_FIELDS = ["HOTA", "DetA", "AssA", "DetRe", "DetPr", "AssRe", "AssPr", "LocA", "OWTA"]
FLOAT_FIELDS = ["HOTA(0)", "LocA(0)", "HOTALocA(0)"]


class HOTA(Metric):
    """Fields are arrays over ALPHAS (0.05 ... 0.95), as in TrackEval; summaries average them."""

    name = "HOTA"
    fields = FLOAT_ARRAY_FIELDS + INTEGER_ARRAY_FIELDS + FLOAT_FIELDS

    def eval_sequence(self, data: SequenceData) -> Result:
        res: Result = {field: np.zeros(len(ALPHAS)) for field in FLOAT_ARRAY_FIELDS + INTEGER_ARRAY_FIELDS}
        res.update(dict.fromkeys(FLOAT_FIELDS, 0))
        if data.num_tracker_dets == 0 or data.num_gt_dets == 0:
            res["HOTA_FN"] = data.num_gt_dets * np.ones(len(ALPHAS))
            res["HOTA_FP"] = data.num_tracker_dets * np.ones(len(ALPHAS))
            res["LocA"] = np.ones(len(ALPHAS))
            res["LocA(0)"] = 1.0
            return res
        gt_count = np.bincount(data.gt_ids, minlength=data.num_gt_ids).astype(float)
        tracker_count = np.bincount(data.tracker_ids, minlength=data.num_tracker_ids).astype(float)
        score = self._matching_scores(data, gt_count, tracker_count)

        forced, matched = forced_matches(data, score)
        match_gt, match_tracker = [data.pair_gt[matched]], [data.pair_tracker[matched]]
        match_sim = [data.similarity[matched]]
        for t in np.flatnonzero(data.active & ~forced):
            rows, cols = linear_sum_assignment(-data.dense(t, score))
            match_sim.append(data.dense(t, data.similarity)[rows, cols])
            match_gt.append(rows + data.gt_start[t])
            match_tracker.append(cols + data.tracker_start[t])
        sim = np.concatenate(match_sim)
        # level = how many alphas a match passes (similarity >= alpha - eps)
        level = np.searchsorted(ALPHAS - EPS, sim, side="right")
        passed = level > 0
        level, sim = level[passed], sim[passed]
        gt_id = data.gt_ids[np.concatenate(match_gt)[passed]]
        tracker_id = data.tracker_ids[np.concatenate(match_tracker)[passed]]

        tp = _at_least(np.bincount(level, minlength=len(ALPHAS) + 1))
        res["HOTA_TP"] = tp.astype(float)
        res["HOTA_FN"] = data.num_gt_dets - tp.astype(float)
        res["HOTA_FP"] = data.num_tracker_dets - tp.astype(float)
        loc_sum = _at_least(np.bincount(level, weights=sim, minlength=len(ALPHAS) + 1))
        res["LocA"] = np.maximum(1e-10, loc_sum) / np.maximum(1e-10, res["HOTA_TP"])

        keys, inverse = np.unique(gt_id * data.num_tracker_ids + tracker_id, return_inverse=True)
        per_pair = np.bincount(inverse * (len(ALPHAS) + 1) + level, minlength=len(keys) * (len(ALPHAS) + 1))
        matches = _at_least(per_pair.reshape(len(keys), len(ALPHAS) + 1).T).T.astype(float)  # (pairs, alphas)
        pair_gt_count = gt_count[keys // data.num_tracker_ids][:, None]
        pair_tracker_count = tracker_count[keys % data.num_tracker_ids][:, None]
        denominator = np.maximum(1, res["HOTA_TP"])
        res["AssA"] = (
            np.sum(matches * (matches / np.maximum(1, pair_gt_count + pair_tracker_count - matches)), 0) / denominator
        )
        res["AssRe"] = np.sum(matches * (matches / np.maximum(1, pair_gt_count)), 0) / denominator
        res["AssPr"] = np.sum(matches * (matches / np.maximum(1, pair_tracker_count)), 0) / denominator
        return _final_fields(res)

    @staticmethod
    def _matching_scores(data: SequenceData, gt_count: np.ndarray, tracker_count: np.ndarray) -> np.ndarray:
        """Per pair: global alignment of its two ids times its similarity (TrackEval's Hungarian score)."""
        rows, cols = row_col_sums(data)
        sim = data.similarity
        denominator = cols[data.pair_tracker] + rows[data.pair_gt] - sim
        sim_iou = np.zeros_like(sim)
        usable = denominator > EPS
        sim_iou[usable] = sim[usable] / denominator[usable]
        pair_ids = data.gt_ids[data.pair_gt] * data.num_tracker_ids + data.tracker_ids[data.pair_tracker]
        keys, inverse = np.unique(pair_ids, return_inverse=True)
        potential = np.bincount(inverse, weights=sim_iou, minlength=len(keys))  # summed in timestep order
        key_gt, key_tracker = np.divmod(keys, data.num_tracker_ids)
        alignment = potential / (gt_count[key_gt] + tracker_count[key_tracker] - potential)
        return alignment[inverse] * sim

    def combine_sequences(self, per_seq: dict[str, Result]) -> Result:
        res: Result = {field: combine_sum(per_seq, field) for field in INTEGER_ARRAY_FIELDS}
        weight = np.maximum(1.0, res["HOTA_TP"])
        for field in ["AssRe", "AssPr", "AssA"]:
            res[field] = sum(r[field] * r["HOTA_TP"] for r in per_seq.values()) / weight
        loc_sum = sum(r["LocA"] * r["HOTA_TP"] for r in per_seq.values())
        res["LocA"] = np.maximum(1e-10, loc_sum) / np.maximum(1e-10, res["HOTA_TP"])
        return _final_fields(res)


def _at_least(counts: np.ndarray) -> np.ndarray:
    """From counts per level 0..A (along axis 0), per alpha a the total of levels > a."""
    return np.cumsum(counts[::-1], axis=0)[::-1][1:]


def _final_fields(res: Result) -> Result:
    res["DetRe"] = res["HOTA_TP"] / np.maximum(1, res["HOTA_TP"] + res["HOTA_FN"])
    res["DetPr"] = res["HOTA_TP"] / np.maximum(1, res["HOTA_TP"] + res["HOTA_FP"])
    res["DetA"] = res["HOTA_TP"] / np.maximum(1, res["HOTA_TP"] + res["HOTA_FN"] + res["HOTA_FP"])
    res["HOTA"] = np.sqrt(res["DetA"] * res["AssA"])
    res["OWTA"] = np.sqrt(res["DetRe"] * res["AssA"])
    res["HOTA(0)"] = res["HOTA"][0]
    res["LocA(0)"] = res["LocA"][0]
    res["HOTALocA(0)"] = res["HOTA(0)"] * res["LocA(0)"]
    return res
