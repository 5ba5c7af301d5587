"""Reported numbers, in one place: a metrics file flattened to numbers with their bootstrap intervals, and the two
comparisons every consumer makes — against a baseline (the nightly regression rule) and against a re-derivation or
a published figure within a tolerance (the audit, ``egoeval compare``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from egoeval.core.benchmarks import Findings
from egoeval.core.errors import InputError
from egoeval.core.io.bounded import read_json

INTERVAL_KEY = "ci95"  # a bootstrap interval [low, high]


def flatten_dotted(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves of nested dicts by dotted key (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``); an empty dict is a leaf."""
    if isinstance(obj, dict) and obj:
        flat: dict[str, Any] = {}
        for key, value in obj.items():
            flat.update(flatten_dotted(value, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: obj}


@dataclass(frozen=True)
class Metric:
    value: float
    interval: tuple[float, float] | None = None  # the bootstrap interval, when the metric has one


@dataclass(frozen=True)
class MetricChange:
    """A metric that differs from the baseline (``old``/``new`` None: missing on that side)."""

    benchmark: str
    metric: str
    old: Metric | None
    new: Metric | None
    allowed: tuple[float, float] | None  # the range of values that pass
    regressed: bool
    gated: bool  # False: a metric the rule does not check (listed for information)

    @property
    def delta(self) -> float | None:
        return None if self.old is None or self.new is None else self.new.value - self.old.value


TEXT_KEYS = frozenset({"protocol", "dataset", "split", "set", "detections", "ids"})  # the text a metrics file holds
TEXT_LIST_KEYS = frozenset({"modality"})  # and its lists of text


def check_metric_values(data: Any, path: str | os.PathLike[str]) -> None:
    """A metrics file is an input of the report, ``egoeval compare`` and the audit: every value must be what a
    metrics file holds (a finite number, null, true/false, text under ``TEXT_KEYS``, a ``[low, high]`` interval under
    ``ci95``, a list of text under ``TEXT_LIST_KEYS``, an object of those); else InputError naming the file and the
    key (slash-joined)."""

    def walk(value: Any, keys: tuple[str, ...]) -> None:
        where = "/".join(keys) or "the top level"
        if isinstance(value, dict):
            for key, child in value.items():
                walk(child, (*keys, str(key)))
        elif isinstance(value, list):
            if INTERVAL_KEY in keys[-2:]:
                ok = len(value) == 2 and all(v is None or _number(v) for v in value)
                if not ok:
                    raise InputError(path, f"key {where}: an interval must be [low, high], got {_shown(value)}")
            elif not (keys and keys[-1] in TEXT_LIST_KEYS and all(isinstance(v, str) for v in value)):
                raise InputError(path, f"key {where}: a list where a number is expected: {_shown(value)}")
        elif isinstance(value, str):
            if not (keys and keys[-1] in TEXT_KEYS):
                raise InputError(path, f"key {where}: {_shown(value)} is not a number")
        elif not (value is None or isinstance(value, bool) or _number(value)):
            raise InputError(path, f"key {where}: {_shown(value)} is not a finite number")

    if not isinstance(data, dict):
        raise InputError(path, "a metrics file is a JSON object")
    walk(data, ())


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read_metrics(path: str | os.PathLike[str], check: Callable[[Any, Path], None] | None = None) -> Any:
    """A metrics JSON read as an input: bounded (``read_json``), every value checked (``check_metric_values``) and,
    with ``check``, its benchmark's shape (``Benchmark.check_metrics``); InputError naming the file and key."""
    data = read_json(path)
    check_metric_values(data, path)
    if check is not None:
        check(data, Path(path))
    return data


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _interval(value: Any) -> tuple[float, float] | None:
    if isinstance(value, list | tuple) and len(value) == 2 and all(_number(v) for v in value):
        return float(value[0]), float(value[1])
    return None


def flatten_metrics(obj: Any, prefix: str = "") -> dict[str, Metric]:
    """Numeric leaves of a metrics JSON by slash-joined path, each with its bootstrap interval where one is given.

    Intervals: a sibling ``"ci95": {"x": [low, high]}`` belongs to ``"x"`` (metrics/egonormia.json), and
    ``{"value": x, "ci95": [low, high]}`` is one metric at that dict's path.
    """
    if _number(obj):
        return {prefix: Metric(float(obj))} if prefix else {}
    if not isinstance(obj, dict):
        return {}
    own = _interval(obj.get(INTERVAL_KEY))
    if own is not None and _number(obj.get("value")) and prefix:
        return {prefix: Metric(float(obj["value"]), own)}
    intervals = obj.get(INTERVAL_KEY) if isinstance(obj.get(INTERVAL_KEY), dict) else {}
    out: dict[str, Metric] = {}
    for key, value in obj.items():
        if key == INTERVAL_KEY:
            continue
        path = f"{prefix}/{key}" if prefix else str(key)
        if _number(value):
            out[path] = Metric(float(value), _interval(intervals.get(key)))
        else:
            out.update(flatten_metrics(value, path))
    return out


def compare(
    benchmark: str,
    baseline: dict[str, Metric],
    current: dict[str, Metric],
    tolerance: float,
    gate: list[str] | None = None,
) -> list[MetricChange]:
    """Metrics that differ from the baseline. A gated metric (its last path key in ``gate``; every metric when
    ``gate`` is None) regresses when it leaves the baseline's bootstrap interval widened by ``tolerance`` points on
    each side (without an interval: the baseline value +/- ``tolerance``), or when it disappears. New metrics pass."""
    changes = []
    for name in sorted(set(baseline) | set(current)):
        old, new = baseline.get(name), current.get(name)
        if old is not None and new is not None and old.value == new.value:
            continue
        gated = gate is None or name.rpartition("/")[2] in gate
        allowed = None
        if old is not None:
            low, high = old.interval or (old.value, old.value)
            allowed = (low - tolerance, high + tolerance)
        if not gated or old is None:
            regressed = False
        elif new is None:
            regressed = True
        else:
            regressed = not allowed[0] - 1e-9 <= new.value <= allowed[1] + 1e-9
        changes.append(MetricChange(benchmark, name, old, new, allowed, regressed, gated))
    return changes


@dataclass(frozen=True)
class Difference:
    """A reported number that differs from the reference one (``reference`` None: the reference lacks it)."""

    metric: str
    reported: Metric
    reference: Metric | None

    @property
    def delta(self) -> float | None:
        return None if self.reference is None else self.reported.value - self.reference.value

    @property
    def inside_interval(self) -> bool | None:
        """Whether the reported value lies inside the reference's bootstrap interval (None: no interval)."""
        if self.reference is None or self.reference.interval is None:
            return None
        low, high = self.reference.interval
        return low <= self.reported.value <= high

    def describe(self, reference: str = "reference") -> str:
        """One line: ``metric: reported X, <reference> Y (delta +d; inside the 95% interval [a, b])``."""
        if self.reference is None:
            return f"{self.metric}: reported {self.reported.value}, not {reference} (missing there)"
        where = ""
        if self.inside_interval is not None:
            where = (
                f"; {'inside' if self.inside_interval else 'outside'} the 95% interval {list(self.reference.interval)}"
            )
        return (
            f"{self.metric}: reported {self.reported.value}, {reference} {self.reference.value} "
            f"(delta {self.delta:+.6g}{where})"
        )


def differences(reported: dict[str, Metric], reference: dict[str, Metric], tolerance: float) -> list[Difference]:
    """Every reported number farther than ``tolerance`` from the reference's, or missing there."""
    found = []
    for name, metric in sorted(reported.items()):
        mine = reference.get(name)
        if mine is None or abs(metric.value - mine.value) > tolerance:
            found.append(Difference(name, metric, mine))
    return found


def load_json(path: Path) -> Any | None:
    """A JSON file's content, or None when it does not exist."""
    return read_json(path) if path.exists() else None


def compare_numbers(reported: dict[str, Any], derived: dict[str, Any], tolerance: float, findings: Findings) -> None:
    """Every number in ``reported`` against the re-derived one; a differing one says if it is inside the ci95."""
    numbers = flatten_metrics(reported)
    found = differences(numbers, flatten_metrics(derived), tolerance)
    for difference in found:
        findings.differ(difference.describe("re-derived"))
    if not found:
        findings.ok(f"{len(numbers)} reported numbers reproduce within {tolerance:g}")
