"""Protocol ``official``: EgoHumans' own evaluation, with TrackEval's HOTA beside it.

EgoHumans scores tracking with mmtracking: its dataset class reads the ground truth (the rules in
:func:`dataset_keeps`: boxes under 1 px, with ``area <= 0`` or outside the image dropped;
``ignore``/``iscrowd`` boxes kept as ignore boxes) and ``eval_mot`` scores the tracks on py-motmetrics 1.4.0
(``egoeval.tracking.motmetrics``: sequences it leaves out are left out here too). The official path computes no
HOTA: HOTA, DetA, AssA and LocA come from TrackEval's HOTA over the same sequences (ignore boxes dropped). NaN and
infinity (py-motmetrics' ``x / 0``) become None. An ignore box is a ground-truth row with ``conf == 0`` exactly, as
the official reader has it (:func:`official_ignore_rule`; ``conf`` 0.5 is a person there, an ignore box under the
``egoeval`` protocol's TrackEval rule).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from egoeval.egohumans.evaluators.base import Evaluator, Lengths, Scores
from egoeval.egohumans.evaluators.dataset import dataset_keeps
from egoeval.tracking.hota import HOTA
from egoeval.tracking.mot import MotTable, SequenceTables
from egoeval.tracking.motmetrics import eval_mot
from egoeval.tracking.trackeval import PERCENT, evaluate, kept_ground_truth

if TYPE_CHECKING:
    import pandas as pd


def _finite(summary: dict[str, float | int]) -> dict[str, float | int | None]:
    """NaN and infinity (py-motmetrics' x / 0) become None, so the numbers go into JSON."""
    return {k: v if isinstance(v, int) or np.isfinite(v) else None for k, v in summary.items()}


def official_ignore_rule(gt: MotTable | pd.DataFrame) -> MotTable:
    """Ground truth as the official reader marks its ignore boxes: ``conf == 0`` exactly (mmtracking's ``mot2coco``
    keeps ``mot_conf = float(conf)``, 0 meaning "ignored"; any other value is a person), where egoeval's protocol
    follows TrackEval's ``int(conf) == 0``. Rows are returned with ``conf`` 0 (ignore) or 1 (a person), so the
    scorers below, which truncate, read them the official way."""
    table = MotTable.of(gt)
    return table.with_conf(np.where(table.conf == 0, 0.0, 1.0))


class Official(Evaluator):
    name: ClassVar[str] = "official"
    uses_image_size: ClassVar[bool] = True

    def dataset_ground_truth(self, gt: MotTable | pd.DataFrame, image_size: tuple[int, int] | None) -> MotTable:
        """The rows EgoHumans' dataset class passes on to ``eval_mot`` (``area = w * h``, as mmtracking's
        ``mot2coco`` writes it); without an image size the boxes outside the image cannot be told, so they are kept."""
        table = MotTable.of(gt)
        boxes = np.column_stack([table.x, table.y, table.w, table.h])
        width, height = image_size if image_size is not None else (None, None)
        return table.take(dataset_keeps(boxes, table.w * table.h, width, height))

    def evaluate(
        self, gt: SequenceTables, pred: SequenceTables, iou: float = 0.5, seq_lengths: Lengths | None = None
    ) -> Scores:
        gt = {name: official_ignore_rule(table) for name, table in gt.items()}
        result = eval_mot(gt, pred, iou)
        names = list(result["sequences"])
        if names:
            kept = {name: kept_ground_truth(gt[name]) for name in names}
            hota = evaluate(kept, pred, iou, seq_lengths, units=[HOTA()])
            for name, res in [*hota["sequences"].items(), ("COMBINED", hota["COMBINED"])]:
                target = result["COMBINED"] if name == "COMBINED" else result["sequences"][name]
                target |= {field: float(100 * np.mean(res["HOTA"][field])) for field in PERCENT["HOTA"]}
        return {
            "protocol": self.name,
            "COMBINED": _finite(result["COMBINED"]),
            "sequences": {name: _finite(s) for name, s in result["sequences"].items()},
        }


EVALUATOR = Official()
