"""The endpoint's ``usage`` token counts, checked where they enter: a reply's ``usage`` (online or from a batch's
results) and the counts the response cache holds (the cache is an input too: a copied or hand-edited one may hold
anything). A count is believed when it is an integer in [0, MAX_USAGE_TOKENS]; any other value is dropped (the call
then counts as one that reported no usage, so the ledger shows its cost as a lower bound) and counted in
``DROPPED``, which the infer stage and ``egoeval estimate`` report."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

MAX_USAGE_TOKENS = 10**9  # the most tokens one call may report: a thousand times the largest context window
USAGE_FIELDS = ("prompt_tokens", "completion_tokens")


class DroppedUsage:
    """Usage counts dropped so far in this process, by where they came from (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._example: dict[str, str] = {}

    def add(self, source: str, example: str) -> None:
        with self._lock:
            self._counts[source] += 1
            self._example.setdefault(source, example)

    def take(self) -> str | None:
        """A line saying what was dropped since the last call (None: nothing), and start counting afresh."""
        with self._lock:
            counts, examples = dict(self._counts), dict(self._example)
            self._counts.clear()
            self._example.clear()
        if not counts:
            return None
        said = "; ".join(f"{n} from {source} (e.g. {examples[source]})" for source, n in sorted(counts.items()))
        return (
            f"dropped {sum(counts.values())} usage token counts that are not integers in [0, {MAX_USAGE_TOKENS:,}]: "
            f"{said}; those calls count as reporting no usage (their cost is a lower bound)"
        )


DROPPED = DroppedUsage()


def usage_counts(usage: Any, source: str) -> dict[str, int]:
    """The believable counts of a ``usage`` mapping (a reply's ``usage`` or a cached reply's meta): each of
    ``USAGE_FIELDS`` that is an integer in [0, MAX_USAGE_TOKENS]; a present value that is not one is dropped and
    counted under ``source`` (e.g. ``"the endpoint"``, ``"the response cache"``)."""
    if not isinstance(usage, Mapping):
        return {}
    counts = {}
    for name in USAGE_FIELDS:
        value = usage.get(name)
        if value is None:
            continue
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_USAGE_TOKENS:
            counts[name] = value
        else:
            huge = isinstance(value, int) and value.bit_length() > 128  # repr of a 5,000-digit int raises
            shown = f"an integer of {value.bit_length()} bits" if huge else repr(value)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            DROPPED.add(source, f"{name} {shown}")
    return counts
