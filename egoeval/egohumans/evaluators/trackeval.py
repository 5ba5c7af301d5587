"""Protocol ``trackeval``: TrackEval's MOT15 semantics (``egoeval.tracking.trackeval``).

Ground-truth rows with ``conf == 0`` (ignore boxes) are dropped, so tracker boxes on them are false positives; no
class filtering; every ground-truth sequence is scored (one without tracker output as empty).
"""

from __future__ import annotations

from typing import ClassVar

from egoeval.egohumans.evaluators.base import Evaluator, Lengths, Scores
from egoeval.tracking.mot import SequenceTables
from egoeval.tracking.trackeval import evaluate_sequences, kept_ground_truth


class TrackEval(Evaluator):
    name: ClassVar[str] = "trackeval"

    def evaluate(
        self, gt: SequenceTables, pred: SequenceTables, iou: float = 0.5, seq_lengths: Lengths | None = None
    ) -> Scores:
        kept = {name: kept_ground_truth(df) for name, df in gt.items()}
        return {"protocol": self.name, **evaluate_sequences(kept, pred, iou, seq_lengths)}


EVALUATOR = TrackEval()
