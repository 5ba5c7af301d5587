"""EgoHumans' scoring protocols, one :class:`~egoeval.egohumans.evaluators.base.Evaluator` per module, by name.

``official`` (EgoHumans' evaluation: mmtracking's dataset rules and ``eval_mot`` on py-motmetrics, TrackEval's HOTA
beside it) and ``trackeval`` (TrackEval's MOT15 semantics). A new protocol is a module here with an Evaluator,
listed in EVALUATORS, and its name in ``ScoreSettings.protocol``.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from egoeval.egohumans.evaluators.base import Evaluator

# protocol -> (module, Evaluator class); a module is imported when its protocol is first asked for (pandas, scipy:
# reading the names, as `egoeval score-tracks --help` does, loads neither)
EVALUATORS: dict[str, tuple[str, str]] = {
    "official": ("egoeval.egohumans.evaluators.official", "Official"),
    "trackeval": ("egoeval.egohumans.evaluators.trackeval", "TrackEval"),
}
PROTOCOLS = tuple(EVALUATORS)


@cache
def evaluator(protocol: str) -> Evaluator:
    """The evaluator of ``protocol`` (a name of EVALUATORS)."""
    if protocol not in EVALUATORS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    module, name = EVALUATORS[protocol]
    found: Evaluator = getattr(importlib.import_module(module), name)()
    assert found.name == protocol, f"{module}.{name} is named {found.name!r}, listed as {protocol!r}"
    return found
