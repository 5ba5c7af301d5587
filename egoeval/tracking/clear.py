"""CLEAR MOT metrics (MOTA, MOTP, IDSW, Frag, MT/PT/ML) as TrackEval computes them."""

from __future__ import annotations

import numpy as np

from egoeval.tracking.base import EPS, Metric, Result, SequenceData, combine_sum
from egoeval.tracking.matching import linear_sum_assignment

INTEGER_FIELDS = ["CLR_TP", "CLR_FN", "CLR_FP", "IDSW", "MT", "PT", "ML", "Frag", "CLR_Frames"]
FLOAT_FIELDS = ["MOTA", "MOTP", "MODA", "CLR_Re", "CLR_Pr", "MTR", "PTR", "MLR", "sMOTA"]
FLOAT_FIELDS += ["CLR_F1", "FP_per_frame", "MOTAL", "MOTP_sum"]


class CLEAR(Metric):
    """Per-timestep matching at IoU >= threshold that prefers continuing the previous timestep's matches."""

    name = "CLEAR"
    fields = FLOAT_FIELDS + INTEGER_FIELDS

    def __init__(self, threshold: float = 0.5) -> None:
        self.threshold = float(threshold)

    def eval_sequence(self, data: SequenceData) -> Result:
        res: Result = dict.fromkeys(self.fields, 0)
        if data.num_tracker_dets == 0 or data.num_gt_dets == 0:
            res["CLR_FN"], res["CLR_FP"] = data.num_gt_dets, data.num_tracker_dets
            res["ML"] = data.num_gt_ids if data.num_tracker_dets == 0 else 0
            res["MLR"] = 1.0
            return res
        match_gt, match_tracker, match_sim = self._matches(data)
        res["CLR_TP"] = len(match_gt)
        res["CLR_FN"] = data.num_gt_dets - res["CLR_TP"]
        res["CLR_FP"] = data.num_tracker_dets - res["CLR_TP"]
        res["MOTP_sum"] = float(np.sum(match_sim))
        res["CLR_Frames"] = data.num_timesteps

        # Order each gt id's matches in time; "step" counts only timesteps TrackEval matches in.
        step = (np.cumsum(data.active) - 1)[data.gt_t[match_gt]]
        gt_id, tracker_id = data.gt_ids[match_gt], data.tracker_ids[match_tracker]
        order = np.lexsort((step, gt_id))
        gt_id, tracker_id, step = gt_id[order], tracker_id[order], step[order]
        same_gt = gt_id[1:] == gt_id[:-1]
        res["IDSW"] = int(np.sum(same_gt & (tracker_id[1:] != tracker_id[:-1])))
        run_starts = np.sum(np.r_[True, ~same_gt | (step[1:] != step[:-1] + 1)]) if len(step) else 0
        res["Frag"] = int(run_starts - len(np.unique(gt_id)))

        tracked = np.bincount(gt_id, minlength=data.num_gt_ids) / np.bincount(data.gt_ids, minlength=data.num_gt_ids)
        res["MT"] = int(np.sum(tracked > 0.8))
        res["PT"] = int(np.sum(tracked >= 0.2)) - res["MT"]
        res["ML"] = data.num_gt_ids - res["MT"] - res["PT"]
        return _final_fields(res)

    def _matches(self, data: SequenceData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Matched (gt detection, tracker detection, similarity), in timestep order."""
        candidate = np.flatnonzero(data.similarity >= self.threshold - EPS)
        cand_gt, cand_tracker = data.pair_gt[candidate], data.pair_tracker[candidate]
        cand_step = data.gt_t[cand_gt]
        # Where no detection has two candidates, every candidate is matched whatever the scores.
        clash = (np.bincount(cand_gt, minlength=data.num_gt_dets)[cand_gt] > 1) | (
            np.bincount(cand_tracker, minlength=data.num_tracker_dets)[cand_tracker] > 1
        )
        hard = np.zeros(data.num_steps, bool)
        hard[cand_step[clash]] = True
        easy = candidate[~hard[cand_step]]
        easy_step = data.gt_t[data.pair_gt[easy]]

        active = np.flatnonzero(data.active)
        solved: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        previous = np.full(data.num_gt_ids, -1)  # tracker id matched to each gt id in the last active timestep
        for t in np.flatnonzero(hard):
            position = np.searchsorted(active, t)
            before = int(active[position - 1]) if position else -1
            if before in solved:
                prev_gt, prev_tracker, _ = solved[before]
            else:
                lo, hi = np.searchsorted(easy_step, [before, before + 1])
                prev_gt, prev_tracker = data.pair_gt[easy[lo:hi]], data.pair_tracker[easy[lo:hi]]
            previous[data.gt_ids[prev_gt]] = data.tracker_ids[prev_tracker]
            g0, g1, k0, k1 = data.gt_start[t], data.gt_start[t + 1], data.tracker_start[t], data.tracker_start[t + 1]
            sim = data.dense(t, data.similarity)
            score = 1000 * (data.tracker_ids[k0:k1][None, :] == previous[data.gt_ids[g0:g1]][:, None]) + sim
            score[sim < self.threshold - EPS] = 0
            rows, cols = linear_sum_assignment(-score)
            kept = score[rows, cols] > 0 + EPS
            solved[int(t)] = (rows[kept] + g0, cols[kept] + k0, sim[rows[kept], cols[kept]])
            previous[data.gt_ids[prev_gt]] = -1

        parts = [(data.pair_gt[easy], data.pair_tracker[easy], data.similarity[easy]), *solved.values()]
        return tuple(np.concatenate(column) for column in zip(*parts, strict=True))  # type: ignore[return-value]

    def combine_sequences(self, per_seq: dict[str, Result]) -> Result:
        res: Result = {field: combine_sum(per_seq, field) for field in [*INTEGER_FIELDS, "MOTP_sum"]}
        return _final_fields(res)


def _final_fields(res: Result) -> Result:
    """TrackEval's derived fields, from the counts (per sequence and for combined sequences)."""
    num_gt_ids = res["MT"] + res["ML"] + res["PT"]
    res["MTR"] = res["MT"] / np.maximum(1.0, num_gt_ids)
    res["MLR"] = res["ML"] / np.maximum(1.0, num_gt_ids)
    res["PTR"] = res["PT"] / np.maximum(1.0, num_gt_ids)
    res["CLR_Re"] = res["CLR_TP"] / np.maximum(1.0, res["CLR_TP"] + res["CLR_FN"])
    res["CLR_Pr"] = res["CLR_TP"] / np.maximum(1.0, res["CLR_TP"] + res["CLR_FP"])
    res["MODA"] = (res["CLR_TP"] - res["CLR_FP"]) / np.maximum(1.0, res["CLR_TP"] + res["CLR_FN"])
    res["MOTA"] = (res["CLR_TP"] - res["CLR_FP"] - res["IDSW"]) / np.maximum(1.0, res["CLR_TP"] + res["CLR_FN"])
    res["MOTP"] = res["MOTP_sum"] / np.maximum(1.0, res["CLR_TP"])
    res["sMOTA"] = (res["MOTP_sum"] - res["CLR_FP"] - res["IDSW"]) / np.maximum(1.0, res["CLR_TP"] + res["CLR_FN"])
    res["CLR_F1"] = res["CLR_TP"] / np.maximum(1.0, res["CLR_TP"] + 0.5 * res["CLR_FN"] + 0.5 * res["CLR_FP"])
    res["FP_per_frame"] = res["CLR_FP"] / np.maximum(1.0, res["CLR_Frames"])
    safe_log_idsw = np.log10(res["IDSW"]) if res["IDSW"] > 0 else res["IDSW"]
    res["MOTAL"] = (res["CLR_TP"] - res["CLR_FP"] - safe_log_idsw) / np.maximum(1.0, res["CLR_TP"] + res["CLR_FN"])
    return res
