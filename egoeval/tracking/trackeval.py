"""TrackEval's evaluation (MOT15 semantics), vectorised: HOTA, CLEAR and Identity per sequence and combined.

``evaluate_sequences(gt, pred)`` takes MOTChallenge rows (MotTable or read_mot DataFrames) per sequence and returns
percentages and counts per sequence and combined (TrackEval's COMBINED_SEQ rules). ``evaluate`` returns every
TrackEval field. Each metric is a unit with ``eval_sequence(SequenceData)`` and ``combine_sequences``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from tqdm import tqdm

from egoeval.tracking.base import Metric, Result
from egoeval.tracking.clear import CLEAR
from egoeval.tracking.hota import HOTA
from egoeval.tracking.identity import Identity
from egoeval.tracking.mot import MotTable, SequenceTables
from egoeval.tracking.similarity import sequence_data

if TYPE_CHECKING:
    import pandas as pd

PERCENT = {"HOTA": ["HOTA", "DetA", "AssA", "LocA", "DetRe", "DetPr", "AssRe", "AssPr"]}
PERCENT |= {"CLEAR": ["MOTA", "MOTP", "MODA"], "Identity": ["IDF1", "IDP", "IDR"]}
COUNTS = {"CLEAR": {"IDSW": "IDSW", "FP": "CLR_FP", "FN": "CLR_FN", "TP": "CLR_TP", "Frag": "Frag"}}
COUNTS["CLEAR"] |= {"MT": "MT", "PT": "PT", "ML": "ML"}
COUNTS |= {"Identity": {"IDTP": "IDTP", "IDFN": "IDFN", "IDFP": "IDFP"}}
COUNTS |= {"Count": {"GT_Dets": "GT_Dets", "GT_IDs": "GT_IDs", "Dets": "Dets", "IDs": "IDs"}}


def metric_units(iou_threshold: float = 0.5) -> list[Metric]:
    """HOTA (thresholds 0.05..0.95), CLEAR and Identity (match at IoU >= iou_threshold)."""
    return [HOTA(), CLEAR(iou_threshold), Identity(iou_threshold)]


def evaluate(
    gt: SequenceTables,
    pred: SequenceTables,
    iou_threshold: float = 0.5,
    seq_lengths: dict[str, int] | None = None,
    units: list[Metric] | None = None,
) -> dict[str, dict[str, dict[str, Result]]]:
    """All TrackEval fields: ``{"sequences": {seq: {metric: fields}}, "COMBINED": {metric: fields}}``.

    Sequences are those of ``gt``; one missing from ``pred`` is scored as empty tracker output, and
    ``pred`` sequences without ground truth are ignored (as TrackEval does with its seqmap).
    ``seq_lengths`` (seqinfo.ini's seqLength) only changes CLR_Frames and FP_per_frame; by default a
    sequence ends at its last box. ``units`` defaults to HOTA, CLEAR and Identity.
    """
    seq_lengths = seq_lengths or {}
    if not gt:
        raise ValueError("no ground-truth sequences to evaluate")
    units = metric_units(iou_threshold) if units is None else units
    per_seq: dict[str, dict[str, Result]] = {}
    for name in tqdm(sorted(gt), desc="scoring sequences", unit="seq", disable=None, leave=False):
        data = sequence_data(gt[name], pred[name] if name in pred else MotTable.empty(), seq_lengths.get(name))
        per_seq[name] = {unit.name: unit.eval_sequence(data) for unit in units}
        per_seq[name]["Count"] = {
            "GT_Dets": data.num_gt_dets,
            "GT_IDs": data.num_gt_ids,
            "Dets": data.num_tracker_dets,
            "IDs": data.num_tracker_ids,
            "Frames": data.num_timesteps,
        }
    combined = {unit.name: unit.combine_sequences({s: r[unit.name] for s, r in per_seq.items()}) for unit in units}
    combined["Count"] = {field: sum(r["Count"][field] for r in per_seq.values()) for field in COUNTS["Count"]}
    return {"sequences": per_seq, "COMBINED": combined}


def summarize(results: dict[str, Result]) -> dict[str, float | int]:
    """The headline numbers of one sequence (or COMBINED): percentages (HOTA ones averaged over alpha) and counts."""
    summary: dict[str, float | int] = {}
    for metric, fields in PERCENT.items():
        summary |= {field: float(100 * np.mean(results[metric][field])) for field in fields}
    for metric, fields in COUNTS.items():
        summary |= {key: int(results[metric][field]) for key, field in fields.items()}
    return summary


def evaluate_sequences(
    gt: SequenceTables,
    pred: SequenceTables,
    iou_threshold: float = 0.5,
    seq_lengths: dict[str, int] | None = None,
) -> dict[str, dict]:
    """``{"COMBINED": summary, "sequences": {name: summary}}`` for tables per sequence (gt already filtered)."""
    results = evaluate(gt, pred, iou_threshold, seq_lengths)
    return {
        "COMBINED": summarize(results["COMBINED"]),
        "sequences": {name: summarize(res) for name, res in results["sequences"].items()},
    }


def kept_ground_truth(gt: MotTable | pd.DataFrame) -> MotTable:
    """The rows TrackEval scores (MOT15): ``conf == 0`` rows (ignore boxes) dropped, as read_mot ``kind="gt"``."""
    table = MotTable.of(gt)
    return table.take(np.trunc(table.conf) != 0)
