"""Where a clip's answers sit among its five options, and a seeded reordering that spreads them evenly.

The official protocol shows options in stored order, so a sample whose gold actions cluster in one position
rewards an answerer that always picks that position. ``balance_positions`` reorders every clip's options (the
behaviours with their aligned justifications and taxonomy, ``correct`` and ``sensibles`` remapped; nothing else
changes) so that

- the gold positions are balanced: each position holds the gold of ``n // 5`` or ``n // 5 + 1`` clips, which
  clips get which position drawn from ``random.Random(seed)``;
- within that, each clip's remaining options are placed so the sensible options and the empty "None" slot are
  spread over the positions as evenly as the clips allow (greedy, clip by clip in a seeded order, least squared
  imbalance first, ties drawn from the same generator).

The result depends on each clip's options, not on their stored order, so balancing twice changes nothing.

Justifications stay aligned with their behaviours (the format's ``correct`` indexes both), so under the official
protocol the gold justification sits where the gold action does.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from typing import Any

N_OPTIONS = 5


def reorder_clip(clip: Mapping[str, Any], order: Sequence[int]) -> dict[str, Any]:
    """The clip with its options reordered: new position p holds the option stored at ``order[p]``."""
    if sorted(order) != list(range(N_OPTIONS)):
        raise ValueError(f"order must be a permutation of 0..{N_OPTIONS - 1}, got {list(order)}")
    new_of = {old: new for new, old in enumerate(order)}
    moved = dict(clip)
    moved["behaviors"] = [clip["behaviors"][old] for old in order]
    moved["justifications"] = [clip["justifications"][old] for old in order]
    moved["correct"] = new_of[clip["correct"]]
    moved["sensibles"] = [new_of[k] for k in clip["sensibles"]]
    moved["taxonomy"] = {str(new): clip["taxonomy"][str(old)] for new, old in enumerate(order)}
    return moved


def canonical(clip: Mapping[str, Any]) -> dict[str, Any]:
    """The clip with its options in text order, so a reordering depends on the options, not on where they were."""
    return reorder_clip(clip, sorted(range(N_OPTIONS), key=lambda k: (clip["behaviors"][k], clip["justifications"][k])))


def position_counts(clips: Mapping[str, Mapping[str, Any]]) -> dict[str, list[int]]:
    """Per position, how many clips have there their gold option, a sensible option and the empty slot."""
    counts = {"gold": [0] * N_OPTIONS, "sensible": [0] * N_OPTIONS, "empty": [0] * N_OPTIONS}
    for clip in clips.values():
        counts["gold"][clip["correct"]] += 1
        for k in clip["sensibles"]:
            counts["sensible"][k] += 1
        for k, behavior in enumerate(clip["behaviors"]):
            counts["empty"][k] += behavior == ""
    return counts


def balance_positions(clips: Mapping[str, Mapping[str, Any]], seed: int) -> dict[str, dict[str, Any]]:
    """Every clip reordered so gold, sensible and empty positions spread evenly (see the module); keys keep order."""
    rng = random.Random(seed)
    ids = list(clips)
    targets = [k % N_OPTIONS for k in range(len(ids))]
    rng.shuffle(targets)
    visit = list(range(len(ids)))
    rng.shuffle(visit)
    sensible, empty = [0] * N_OPTIONS, [0] * N_OPTIONS
    placed: dict[str, dict[str, Any]] = {}
    for k in visit:
        clip, target = canonical(clips[ids[k]]), targets[k]
        candidates = [o for o in itertools.permutations(range(N_OPTIONS)) if o[target] == clip["correct"]]

        def imbalance(order: Sequence[int], clip: Mapping[str, Any] = clip) -> int:
            new_of = {old: new for new, old in enumerate(order)}
            s, e = list(sensible), list(empty)
            for old in clip["sensibles"]:
                s[new_of[old]] += 1
            for old, behavior in enumerate(clip["behaviors"]):
                e[new_of[old]] += behavior == ""
            return sum(c * c for c in s) + sum(c * c for c in e)

        best = min(imbalance(o) for o in candidates)
        order = rng.choice([o for o in candidates if imbalance(o) == best])
        placed[ids[k]] = reorder_clip(clip, order)
        for new in placed[ids[k]]["sensibles"]:
            sensible[new] += 1
        for new, behavior in enumerate(placed[ids[k]]["behaviors"]):
            empty[new] += behavior == ""
    return {clip_id: placed[clip_id] for clip_id in ids}
