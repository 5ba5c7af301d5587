"""The interface every EgoHumans scoring protocol implements (``egoeval.egohumans.evaluators`` lists them)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from egoeval.tracking.mot import MotTable, SequenceTables

if TYPE_CHECKING:
    import pandas as pd

Lengths = dict[str, int]  # frames by sequence
Scores = dict[str, Any]  # {"protocol": name, "COMBINED": summary, "sequences": {sequence: summary}}


class Evaluator(ABC):
    """One scoring protocol: which ground-truth rows its dataset reader passes on, and how tracks are scored.

    ``name`` is the protocol's name in the settings (``egohumans.score.protocol``), in ``egoeval score-tracks
    --protocol`` and in every result it returns.
    """

    name: ClassVar[str]
    uses_image_size: ClassVar[bool] = False  # whether dataset_ground_truth drops boxes outside the image

    def dataset_ground_truth(self, gt: MotTable | pd.DataFrame, image_size: tuple[int, int] | None) -> MotTable:
        """The rows of a MOTChallenge ground truth (every row, ``conf == 0``: ignore boxes) that the protocol's dataset
        reader passes on to its evaluation; ``image_size`` is ``(width, height)``, None where unknown. The fetch
        stage has applied these rules to the annotation already; ``egoeval score-tracks`` applies them to files."""
        return MotTable.of(gt)

    @abstractmethod
    def evaluate(
        self, gt: SequenceTables, pred: SequenceTables, iou: float = 0.5, seq_lengths: Lengths | None = None
    ) -> Scores:
        """``{"protocol": name, "COMBINED": summary, "sequences": {sequence: summary}}`` of MOTChallenge rows by
        sequence, boxes matching at IoU >= ``iou``. ``gt`` holds every row (``conf == 0`` marks ignore boxes); a
        sequence missing from ``pred`` has no tracker boxes. ``seq_lengths`` (seqinfo.ini's seqLength) matter where a
        protocol counts frames."""
