"""Protocol ``trackeval``: TrackEval's MOT15 semantics (``egoeval.tracking.trackeval``).

Ground-truth rows with ``conf == 0`` (ignore boxes) are dropped, so tracker boxes on them are false positives; no
class filtering; every ground-truth sequence is scored (one without tracker output as empty).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pandas as pd

from egoeval.egohumans.evaluators.base import Evaluator
from egoeval.tracking.trackeval import evaluate_sequences, kept_ground_truth


class TrackEval(Evaluator):
    name: ClassVar[str] = "trackeval"

    def evaluate(
        self,
        gt: dict[str, pd.DataFrame],
        pred: dict[str, pd.DataFrame],
        iou_threshold: float = 0.5,
        seq_lengths: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        kept = {name: kept_ground_truth(df) for name, df in gt.items()}
        return {"protocol": self.name, **evaluate_sequences(kept, pred, iou_threshold, seq_lengths)}
