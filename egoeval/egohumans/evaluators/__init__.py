"""EgoHumans' scoring protocols, one :class:`~egoeval.egohumans.evaluators.base.Evaluator` per module, by name.

``official`` (EgoHumans' evaluation: mmtracking's dataset rules and ``eval_mot`` on py-motmetrics, TrackEval's HOTA
beside it) and ``trackeval`` (TrackEval's MOT15 semantics). A new protocol is a module here with an Evaluator,
registered in EVALUATORS (``egohumans.score.protocol`` then allows its name). ``dataset`` holds no protocol: the rules
of EgoHumans' dataset class, which the fetch stage applies too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from egoeval.core.registry import Registry

if TYPE_CHECKING:
    from egoeval.egohumans.evaluators.base import Evaluator

EVALUATORS: Registry[Evaluator] = Registry("protocol")
"""Every scoring protocol's evaluator by name; a module is imported when its protocol is first asked for (pandas,
scipy: reading the names, as `egoeval score-tracks --help` and the settings do, loads neither)."""
EVALUATORS.register_lazy("official", "egoeval.egohumans.evaluators.official:EVALUATOR")
EVALUATORS.register_lazy("trackeval", "egoeval.egohumans.evaluators.trackeval:EVALUATOR")


def evaluator(protocol: str) -> Evaluator:
    """The evaluator of ``protocol`` (a name of EVALUATORS; UnknownName otherwise)."""
    return EVALUATORS.get(protocol)
