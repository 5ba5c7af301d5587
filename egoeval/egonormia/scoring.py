"""EgoNormia metric math, in one place: per-item outcomes, percentages, bootstrap intervals, categories,
failure rates, and the official scorer's semantics for rescoring an official eval JSON.

Conventions (the benchmark card's recipe; see FORMATS.md):

- accuracy = correct / n, ``both`` = action and justification both correct; an unusable answer (index -1)
  is simply wrong, so every item counts in n;
- sensible IoU per item = |pred ∩ gold| / |pred ∪ gold|, **0 when the union is empty**; the mean over items;
- metrics are percentages (0-100); ``coverage`` and the failure rates are shares (0-1):
  coverage = items whose three subtask answers all came back and parsed, parse_failure_rate = subtask answers
  whose call succeeded but could not be parsed, call_failure_rate = subtask answers whose call failed (or never
  happened), both over all 3·n subtask answers, so the two rates and the usable share add up to 1;
- intervals (``ci95``, at level ``confidence``): percentile bootstrap over items, ``samples`` resamples drawn
  once as an index matrix from ``numpy.random.default_rng(seed)``: every model scored on the same number of
  items sees the same resamples (paired comparisons);
- norm categories: an item belongs to every category of its *correct* option (``taxonomy[correct_idx]``);
  an item whose correct answer is the empty "None" slot has no categories and is in no category's count.

A protocol may leave items out (``egoeval.egonormia.protocols``: the official one counts as the official scorer
does): an item left out of n altogether is not scored, and one only ``uncounted`` stays in the sums but not in n.
So a metric is its sum over the items scored divided by the items counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from egoeval.core.errors import ScorerInputError
from egoeval.significance import resamples as bootstrap_resamples

METRICS = ("action", "justification", "both", "sensible_iou")
CALL_FAILED = "call failed: "  # prefix of a failure reason: the model call failed or never happened
PARSE_FAILED = "parse: "  # prefix of a failure reason: the call succeeded but no answer could be read
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


@dataclass(frozen=True)
class Outcomes:
    """Per-item results of one model on one setting, aligned with the items."""

    action: np.ndarray  # bool: predicted action == correct_idx
    justification: np.ndarray  # bool: predicted justification == correct_idx
    sensible_iou: np.ndarray  # float in [0, 1]
    counted: np.ndarray | None = None  # bool: the item is in n (None: every item; see Protocol.uncounted)

    @property
    def both(self) -> np.ndarray:
        return self.action & self.justification

    @property
    def in_n(self) -> np.ndarray:
        return np.ones(len(self.action), dtype=bool) if self.counted is None else self.counted

    def columns(self) -> np.ndarray:
        """A (len(METRICS), items) float matrix of the per-item values, in METRICS order."""
        return np.vstack([self.action, self.justification, self.both, self.sensible_iou]).astype(np.float64)

    def subset(self, mask: np.ndarray) -> Outcomes:
        counted = None if self.counted is None else self.counted[mask]
        return Outcomes(self.action[mask], self.justification[mask], self.sensible_iou[mask], counted)


def option_masks(index_lists: Sequence[Sequence[int]], n_options: int = 5) -> np.ndarray:
    """One bitmask per list (bit i set when option i is in it); indices must lie in 0..n_options-1."""
    masks = np.zeros(len(index_lists), dtype=np.uint64)
    for row, indices in enumerate(index_lists):
        for index in indices:
            if not 0 <= int(index) < n_options:
                raise ValueError(f"option index {index} outside 0..{n_options - 1} (list {row})")
            masks[row] |= np.uint64(1) << np.uint64(int(index))
    return masks


def _popcount(masks: np.ndarray) -> np.ndarray:
    as_bytes = masks.astype(np.uint64).view(np.uint8).reshape(len(masks), 8)
    return _POPCOUNT[as_bytes].sum(axis=1)


def set_iou(pred_masks: np.ndarray, gold_masks: np.ndarray) -> np.ndarray:
    """Per-item IoU of two option sets given as bitmasks; 0 where the union is empty."""
    inter = _popcount(pred_masks & gold_masks).astype(np.float64)
    union = _popcount(pred_masks | gold_masks).astype(np.float64)
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def outcomes(
    action: Sequence[int],
    justification: Sequence[int],
    sensible: Sequence[Sequence[int]],
    correct_idx: Sequence[int],
    sensible_gold: Sequence[Sequence[int]],
    n_options: int = 5,
) -> Outcomes:
    """Compare predictions (stored indices, -1 unusable) with the gold answers, item by item."""
    correct = np.asarray(correct_idx, dtype=np.int64)
    return Outcomes(
        action=np.asarray(action, dtype=np.int64) == correct,
        justification=np.asarray(justification, dtype=np.int64) == correct,
        sensible_iou=set_iou(option_masks(sensible, n_options), option_masks(sensible_gold, n_options)),
    )


def point_estimates(result: Outcomes) -> dict[str, float]:
    """The four metrics in percent (sum over the items scored / the items counted × 100: the mean when all are)."""
    values = result.columns()
    n = int(result.in_n.sum())
    return {name: float(values[k].sum() / n * 100.0) for k, name in enumerate(METRICS)}


def bootstrap_ci(result: Outcomes, samples: int, seed: int, confidence: float) -> dict[str, list[float]]:
    """Percentile bootstrap interval of each metric, in percent: ``{metric: [low, high]}`` (resampling items; a
    resample that counts none of its items is left out)."""
    values = result.columns()
    n = values.shape[1]
    resamples = bootstrap_resamples(n, samples, seed)
    counts = result.in_n[resamples].sum(axis=1)
    usable = counts > 0
    tail = (1.0 - confidence) / 2.0 * 100.0
    intervals = {}
    for k, name in enumerate(METRICS):
        means = values[k][resamples][usable].sum(axis=1) / counts[usable] * 100.0
        low, high = np.percentile(means, [tail, 100.0 - tail])
        intervals[name] = [float(low), float(high)]
    return intervals


def failure_rates(errors: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """coverage, parse_failure_rate and call_failure_rate from the per-subtask failure reasons ("" = fine)."""
    reasons = np.array([list(column) for column in errors.values()], dtype=object)
    ok = reasons == ""
    parse = np.strings.startswith(reasons.astype(str), PARSE_FAILED)
    return {
        "coverage": float(ok.all(axis=0).mean()),
        "parse_failure_rate": float(parse.mean()),
        "call_failure_rate": float((~ok & ~parse).mean()),
    }


def summarize(
    result: Outcomes, errors: Mapping[str, Sequence[str]], samples: int, seed: int, confidence: float
) -> dict[str, Any]:
    """Every reported number for one model on one setting (metrics None when no item is counted)."""
    n = int(result.in_n.sum())
    if n == 0:
        empty: dict[str, Any] = dict.fromkeys((*METRICS, "coverage", "parse_failure_rate", "call_failure_rate"))
        return {**empty, "n": 0, "ci95": None}
    return {
        **point_estimates(result),
        "n": n,
        **failure_rates(errors),
        "ci95": bootstrap_ci(result, samples, seed, confidence),
    }


def category_accuracy(action_correct: np.ndarray, categories: Sequence[Sequence[str]]) -> list[tuple[str, int, float]]:
    """(category, n, action accuracy in percent) for each category, sorted; ``categories[i]`` are item i's."""
    names = sorted({name for item in categories for name in item})
    member = np.array([[name in item for name in names] for item in map(set, categories)], dtype=bool)
    member = member.reshape(len(categories), len(names))
    correct = np.asarray(action_correct, dtype=np.float64)
    counts = member.sum(axis=0)
    hits = correct @ member
    return [(name, int(counts[k]), float(hits[k] / counts[k] * 100.0)) for k, name in enumerate(names)]


def score_official(eval_json: Any) -> dict[str, dict[str, float | int | None]]:
    """The official scorer's numbers for every model key in an eval JSON (see FORMATS.md), as the newest
    ``compute_scores_final.py`` (default branch, commit 2019f27) computes them.

    Per model: the sums over the clips that carry an entry for it, divided by the clips counted, in percent.
    Action (justification) is correct when ``results[0] == correct[0]`` (``[1]``), both when both are; the
    sensible IoU is added only when the ``sensible`` entry is a non-empty dict, else 0 is added. When both
    sensible lists are empty the scorer's division by zero is caught after the action and justification were
    added: the clip stays in those sums but is not counted in n. An empty model name is skipped, as the script's
    ``if model:`` does; a model no clip is counted for gets n 0 and no numbers (the script divides by zero there).
    One departure, where the script prints an error and half-counts the entry: a malformed entry raises
    ScorerInputError naming the clip and model.
    """
    if not isinstance(eval_json, dict):
        raise ScorerInputError("the top level is not an object of clips")
    sums: dict[str, list[float]] = {}
    for clip, answers in eval_json.items():
        if not isinstance(answers, dict):
            raise ScorerInputError("not an object of model entries", clip)
        for model, entry in answers.items():
            if not model:
                continue
            best = _field(entry, "best", clip, model)
            results, correct = _list(best, "results", clip, model), _list(best, "correct", clip, model)
            if len(results) < 2 or len(correct) < 2:
                raise ScorerInputError("best results and correct need two entries each", clip, model)
            action, justification = results[0] == correct[0], results[1] == correct[1]
            sensible = _field(entry, "sensible", clip, model, require_dict=False)
            iou, counted = 0.0, True
            if isinstance(sensible, dict) and len(sensible) > 0:
                predicted = _hashable(_list(sensible, "results", clip, model), clip, model)
                gold = _hashable(_list(sensible, "correct", clip, model), clip, model)
                union = predicted | gold
                iou, counted = (len(predicted & gold) / len(union), True) if union else (0.0, False)
            total = sums.setdefault(model, [0.0, 0.0, 0.0, 0.0, 0.0])
            total[0] += action
            total[1] += justification
            total[2] += action and justification
            total[3] += iou
            total[4] += counted
    return {model: _percentages(*totals) for model, totals in sorted(sums.items())}


def _percentages(a: float, j: float, b: float, s: float, n: float) -> dict[str, float | int | None]:
    if n == 0:
        return {**dict.fromkeys(METRICS), "n": 0}
    return {
        "action": a / n * 100.0,
        "justification": j / n * 100.0,
        "both": b / n * 100.0,
        "sensible_iou": s / n * 100.0,
        "n": int(n),
    }


def _field(entry: Any, key: str, clip: str, model: str, require_dict: bool = True) -> Any:
    if not isinstance(entry, dict):
        raise ScorerInputError(f"entry is not an object (looking for {key!r})", clip, model)
    if key not in entry:
        raise ScorerInputError(f"missing key {key!r}", clip, model)
    if require_dict and not isinstance(entry[key], dict):
        raise ScorerInputError(f"{key!r} is not an object", clip, model)
    return entry[key]


def _list(entry: dict, key: str, clip: str, model: str) -> list:
    value = _field(entry, key, clip, model, require_dict=False)
    if not isinstance(value, list):
        raise ScorerInputError(f"{key!r} is not a list", clip, model)
    return value


def _hashable(values: list, clip: str, model: str) -> set:
    if any(isinstance(value, (list, dict)) for value in values):
        raise ScorerInputError("sensible lists must hold plain values", clip, model)
    return set(values)


HEADLINE_KEYS = ("protocol", "dataset", "split", "n", *METRICS, "limit")


def headline_rows(metrics: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(setting, model) -> the row ``dvc metrics show`` prints: the four metrics with protocol, dataset, split, n
    (and a smoke run's limit)."""
    return {
        (setting, model): {key: entry[key] for key in HEADLINE_KEYS if key in entry}
        for setting, models in metrics.items()
        for model, entry in models.items()
    }
