"""EgoHumans' scoring protocols, one :class:`~egoeval.egohumans.evaluators.base.Evaluator` per module, by name.

``official`` (EgoHumans' evaluation: mmtracking's dataset rules and ``eval_mot`` on py-motmetrics, TrackEval's HOTA
beside it) and ``trackeval`` (TrackEval's MOT15 semantics). A new protocol is a module here with an Evaluator,
listed in EVALUATORS, and its name in ``ScoreSettings.protocol``.
"""

from __future__ import annotations

from egoeval.egohumans.evaluators.base import Evaluator
from egoeval.egohumans.evaluators.official import Official
from egoeval.egohumans.evaluators.trackeval import TrackEval

EVALUATORS: dict[str, Evaluator] = {evaluator.name: evaluator for evaluator in (Official(), TrackEval())}
PROTOCOLS = tuple(EVALUATORS)


def evaluator(protocol: str) -> Evaluator:
    """The evaluator of ``protocol`` (a name of EVALUATORS)."""
    if protocol not in EVALUATORS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    return EVALUATORS[protocol]
