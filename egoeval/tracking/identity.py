"""Identity metrics (IDF1, IDP, IDR; Ristani et al. 2016) as TrackEval computes them."""

from __future__ import annotations

import numpy as np

from egoeval.tracking.base import Metric, Result, SequenceData, combine_sum
from egoeval.tracking.matching import linear_sum_assignment

INTEGER_FIELDS = ["IDTP", "IDFN", "IDFP"]
FLOAT_FIELDS = ["IDF1", "IDR", "IDP"]


class Identity(Metric):
    """One global matching of whole tracks that maximises the detections matched at IoU >= threshold.

    TrackEval solves it on a (gt + tracker ids) square cost matrix of IDFN + IDFP; that cost is
    ``#gt + #tracker - 2 * matched``, so the same optimum (and the same IDTP/IDFN/IDFP, which do not
    depend on which optimal matching is picked) comes from a max-weight matching on the co-occurrence
    counts of the ids that ever overlap enough.
    """

    name = "Identity"
    fields = FLOAT_FIELDS + INTEGER_FIELDS

    def __init__(self, threshold: float = 0.5) -> None:
        self.threshold = float(threshold)

    def eval_sequence(self, data: SequenceData) -> Result:
        res: Result = dict.fromkeys(self.fields, 0)
        if data.num_tracker_dets == 0 or data.num_gt_dets == 0:
            res["IDFN"], res["IDFP"] = data.num_gt_dets, data.num_tracker_dets
            return res
        close = data.similarity >= self.threshold  # TrackEval: no epsilon here
        gt_id = data.gt_ids[data.pair_gt[close]]
        tracker_id = data.tracker_ids[data.pair_tracker[close]]
        matched = 0
        if len(gt_id):
            gt_rows, gt_index = np.unique(gt_id, return_inverse=True)
            tracker_cols, tracker_index = np.unique(tracker_id, return_inverse=True)
            shape = (len(gt_rows), len(tracker_cols))
            counts = np.bincount(gt_index * shape[1] + tracker_index, minlength=shape[0] * shape[1]).reshape(shape)
            rows, cols = linear_sum_assignment(counts, maximize=True)
            matched = int(counts[rows, cols].sum())
        res["IDTP"] = matched
        res["IDFN"] = data.num_gt_dets - matched
        res["IDFP"] = data.num_tracker_dets - matched
        return final_fields(res)

    def combine_sequences(self, per_seq: dict[str, Result]) -> Result:
        return final_fields({field: combine_sum(per_seq, field) for field in INTEGER_FIELDS})


def final_fields(res: Result) -> Result:
    res["IDR"] = res["IDTP"] / np.maximum(1.0, res["IDTP"] + res["IDFN"])
    res["IDP"] = res["IDTP"] / np.maximum(1.0, res["IDTP"] + res["IDFP"])
    res["IDF1"] = res["IDTP"] / np.maximum(1.0, res["IDTP"] + 0.5 * res["IDFP"] + 0.5 * res["IDFN"])
    return res
