"""The nightly report: metric tables of every metrics file, a diff against the accepted baseline, and the rule that
turns a moved metric into a failed run.

A metrics file is any DVC ``metrics`` output (metrics/egonormia.json, metrics/egohumans.json); its benchmark is the one
its stage names in dvc.yaml (``meta.benchmark``); numbers and intervals are read by ``egoeval.reported``. The
baseline (``flows.baseline``, default metrics/baseline.json) is ``{benchmark: <metrics file content>}``; beside it,
``baseline.lock.json`` keeps the deps' hashes and params from dvc.lock at acceptance, so a report can say which
inputs changed since.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from egoeval.reported import Metric, MetricChange, compare, flatten_dotted, flatten_metrics


@dataclass(frozen=True)
class InputChange:
    """An input (a file's DVC hash or a param's value) that differs between two dvc.lock snapshots."""

    kind: str  # "param", "file" (a source) or "output" (written by another stage)
    name: str
    old: Any
    new: Any
    stages: tuple[str, ...]


def _inputs(snapshot: dict[str, Any], stages: set[str] | None) -> dict[tuple[str, str], tuple[Any, set[str]]]:
    """``(kind, name) -> (value, stages using it)`` over the chosen stages of a dvc.lock snapshot."""
    produced = [out for entry in snapshot.values() for out in entry.get("outs", ())]

    def kind(path: str) -> str:
        inside = any(path == o or path.startswith(f"{o}/") or o.startswith(f"{path}/") for o in produced)
        return "output" if inside else "file"

    found: dict[tuple[str, str], tuple[Any, set[str]]] = {}
    for stage, entry in snapshot.items():
        if stages is not None and stage not in stages:
            continue
        items = [((kind(path), path), value) for path, value in entry["deps"].items()]
        for params in entry["params"].values():
            items += [(("param", key), value) for key, value in flatten_dotted(params).items()]
        for ident, value in items:
            found.setdefault(ident, (value, set()))[1].add(stage)
    return found


def changed_inputs(old: dict[str, Any], new: dict[str, Any], stages: set[str] | None = None) -> list[InputChange]:
    """Inputs of ``stages`` (all when None) whose hash or value differs between two dvc.lock snapshots."""
    before, after = _inputs(old, stages), _inputs(new, stages)
    changes = []
    for ident in sorted(set(before) | set(after)):
        old_value, old_stages = before.get(ident, (None, set()))
        new_value, new_stages = after.get(ident, (None, set()))
        if old_value != new_value or ident not in before or ident not in after:
            changes.append(
                InputChange(ident[0], ident[1], old_value, new_value, tuple(sorted(old_stages | new_stages)))
            )
    return changes


@dataclass(frozen=True)
class Report:
    markdown: str
    regressions: list[MetricChange]
    inputs: dict[str, list[InputChange]]  # per benchmark, the inputs changed since the baseline

    def failure_message(self) -> str:
        return failure_message(self.regressions, self.inputs)


def failure_message(regressions: list[MetricChange], inputs: dict[str, list[InputChange]]) -> str:
    """One line per regressed metric: which moved, by how much, and which inputs changed."""
    lines = []
    for change in regressions:
        if change.new is None:
            moved = f"{change.benchmark} {change.metric} is missing (baseline {_fmt(change.old)})"
        else:
            moved = (
                f"{change.benchmark} {change.metric} moved {_fmt(change.old)} -> {_fmt(change.new)} "
                f"(delta {change.delta:+.4g}, allowed {_range(change.allowed)})"
            )
        found = inputs.get(change.benchmark, [])
        causes = [i for i in found if i.kind != "output"] or found  # sources and params first: the likely causes
        names = ", ".join(i.name for i in causes) or "none recorded"
        lines.append(f"{moved}; inputs changed: {names}")
    return "\n".join(lines)


def _fmt(metric: Metric | None) -> str:
    """``12`` for a whole number without an interval, else two decimals: ``45.20 [38.10, 52.30]``."""
    if metric is None:
        return "-"
    if metric.interval is None:
        return f"{metric.value:.0f}" if metric.value.is_integer() else f"{metric.value:.2f}"
    return f"{metric.value:.2f} {_range(metric.interval)}"


def _range(bounds: tuple[float, float] | None) -> str:
    return "-" if bounds is None else f"[{bounds[0]:.2f}, {bounds[1]:.2f}]"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text.replace("|", "\\|").replace("\n", " ")


def _short(change: InputChange, value: Any) -> Any:
    """A file's DVC md5 cut to 8 hex digits; a param's value as it is."""
    return value[:8] if change.kind != "param" and isinstance(value, str) else value


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def metric_table(metrics: dict[str, Metric]) -> list[str]:
    """Rows are a metric's path but its last key (e.g. ``blind / chance``), columns that last key (``action``)."""
    rows: dict[str, dict[str, Metric]] = {}
    columns: list[str] = []
    for path, metric in metrics.items():
        row, _, column = path.rpartition("/")
        rows.setdefault(row.replace("/", " / ") or "-", {})[column] = metric
        if column not in columns:
            columns.append(column)
    return _table(["", *columns], [[row] + [_fmt(cells.get(c)) for c in columns] for row, cells in rows.items()])


MOVED_SHOWN = 10  # the changes listed under the verdict, the largest first (every one in the diff below)


def _change_table(changes: list[MetricChange]) -> list[str]:
    rows = [
        [
            c.benchmark,
            c.metric,
            _fmt(c.old),
            _fmt(c.new),
            "-" if c.delta is None else f"{c.delta:+.4g}",
            _range(c.allowed),
            "REGRESSED" if c.regressed else "ok" if c.gated else "info",
        ]
        for c in changes
    ]
    return _table(["benchmark", "metric", "baseline", "current", "delta", "allowed", "verdict"], rows)


def build_report(
    current: dict[str, Any],
    baseline: dict[str, Any] | None,
    lock_now: dict[str, Any],
    lock_baseline: dict[str, Any] | None,
    feeding: dict[str, set[str]],
    tolerance: float,
    gate: list[str] | None,
    stage_rows: list[list[str]],
    baseline_path: str,
) -> Report:
    """The markdown report and its verdict.

    ``current``/``baseline``: ``{benchmark: metrics JSON}``; ``lock_*``: dvc.lock snapshots (per stage ``deps``,
    ``params``, ``outs``); ``feeding``: per benchmark the stages its metrics file depends on; ``tolerance`` and
    ``gate``: see :func:`compare`; ``stage_rows``: the per-stage summary (stage, state, seconds, note).
    """
    flat = {name: flatten_metrics(content) for name, content in sorted(current.items())}
    changes: list[MetricChange] = []
    inputs: dict[str, list[InputChange]] = {}
    if baseline is not None:
        for name in sorted(set(flat) | set(baseline)):
            changes += compare(name, flatten_metrics(baseline.get(name, {})), flat.get(name, {}), tolerance, gate)
            if lock_baseline is not None:
                inputs[name] = changed_inputs(lock_baseline, lock_now, feeding.get(name))
    regressions = [c for c in changes if c.regressed]
    failed = [row[0] for row in stage_rows if row[1] not in ("Completed", "Cached")]
    lines = ["# egoeval nightly report", ""]
    # what a reader needs first: the verdict, then what moved most; the details follow
    if regressions:
        lines += ["## Verdict: FAILED", "", "```", failure_message(regressions, inputs), "```"]
    elif baseline is None:
        lines += ["## Verdict: no baseline yet", "", "Accept the current metrics with "]
        lines[-1] += "`python -m flows.nightly --accept-baseline`."
    else:
        lines += ["## Verdict: passed", "", f"No gated metric left its allowed range ({len(changes)} compared)."]
    if failed:
        lines += ["", f"Stages not completed: {', '.join(failed)}."]
    moved = [c for c in changes if c.regressed or c.delta]
    moved.sort(key=lambda c: (not c.regressed, -abs(c.delta or 0.0)))
    if moved:
        lines += ["", f"## Moved most ({min(len(moved), MOVED_SHOWN)} of {len(moved)} that moved)", ""]
        lines += _change_table(moved[:MOVED_SHOWN])
    lines += ["", "## Stages", ""]
    lines += _table(["stage", "state", "seconds", "note"], stage_rows)
    lines += ["", f"## Diff against the baseline (`{baseline_path}`)", ""]
    if baseline is None:
        lines.append("No baseline yet.")
    else:
        checked = "every metric" if gate is None else "the metrics " + ", ".join(gate)
        lines.append(
            f"Rule, for {checked}: the run fails when a metric leaves its baseline bootstrap interval widened by "
            f"{tolerance:g} points on each side (without an interval: baseline +/- {tolerance:g}), or disappears."
        )
        lines.append("")
        if changes:
            lines += _change_table(sorted(changes, key=lambda c: not c.regressed))
        else:
            lines.append("Every metric equals the baseline.")
        lines += ["", "### Inputs changed since the baseline", ""]
        if lock_baseline is None:
            lines.append("No dvc.lock snapshot beside the baseline: changed inputs unknown.")
        for name, found in sorted(inputs.items()):
            lines += [f"{name}:", ""]
            rows = [[i.name, i.kind, _short(i, i.old), _short(i, i.new), ", ".join(i.stages)] for i in found]
            lines += _table(["input", "kind", "baseline", "current", "stages"], rows) if rows else ["none"]
            lines.append("")
    for name, metrics in flat.items():
        lines += ["", f"## {name}", ""]
        lines += metric_table(metrics) if metrics else ["(no metrics)"]
    return Report("\n".join(lines).rstrip() + "\n", regressions, inputs)
