"""Published EgoHumans tracking numbers as data (``data/published/egohumans/tracking.yaml``, source in the README
beside it) and our runs printed beside them: the EgoHumans half of ``egoeval compare``.

The settings' ``egohumans.compare`` names the table (``published_file``) and maps our runs to its rows
(``published: {run: row}``). Our numbers are each run's COMBINED entry of ``metrics/egohumans.json``. A run stands
beside the published rows only when it scored the published data under the published protocol (the table's
``data``: the download's test set, ego_rgb, every sequence, boxes from a detector); the bundled sample, a smoke run
(``egohumans.fetch.limit``), ground-truth boxes or any other data stand apart, saying why (``mismatch``), as
EgoNormia's comparison does.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from egoeval.core.errors import InputError
from egoeval.egohumans.crossview import compare_lines
from egoeval.egohumans.settings import CompareSettings
from egoeval.reported import Difference, Metric, flatten_metrics

FIELDS = ("IDF1", "MOTA", "MOTP", "FP", "FN", "IDSW")
COUNTS = ("FP", "FN", "IDSW")


DATA_KEYS = ("dataset", "set", "modality", "detections", "limit")  # what the table's ``data`` says of its data


@dataclass(frozen=True)
class PublishedTable:
    path: Path
    source: str
    protocol: str
    rows: dict[str, dict[str, float]]  # row name -> field -> value
    data: dict[str, Any]  # the published data (DATA_KEYS): what a run of ours must have scored to stand beside it


def mismatch(entry: dict[str, Any], table: PublishedTable) -> str:
    """Why a run's metrics entry may not be ranked beside the published rows ('' when it may): it must have scored
    the published data (dataset, set, modalities, every sequence, detections from a detector: ``run_data``) under
    the published protocol; what a file written before these were recorded does not say is ``unrecorded``."""
    wanted = {"protocol": table.protocol, **table.data}
    reasons = []
    for key, want in wanted.items():
        have = entry.get(key, "unrecorded" if key != "limit" else None)
        ok = have in want if key == "detections" else have == want
        if not ok:
            shown = "unrecorded" if have == "unrecorded" else json.dumps(have)
            reasons.append(f"{key} {shown} (published: {json.dumps(want)})")
    return ", ".join(reasons)


def read_published(path: str | os.PathLike[str]) -> PublishedTable:
    """Read and check a published table: ``source``, ``protocol`` and ``rows: {name: {field: number}}``."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise InputError(path, f"not a readable YAML file: {err}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), dict) or not doc["rows"]:
        raise InputError(path, "expected a mapping with 'source', 'protocol' and 'rows: {name: {field: number}}'")
    rows: dict[str, dict[str, float]] = {}
    for name, fields in doc["rows"].items():
        if not isinstance(fields, dict) or not fields:
            raise InputError(path, "a row must map fields to numbers", row=name)
        for field, value in fields.items():
            if field not in FIELDS or isinstance(value, bool) or not isinstance(value, int | float):
                raise InputError(path, f"{field}: {value!r} (fields are numbers among {list(FIELDS)})", row=name)
        rows[str(name)] = {k: float(v) for k, v in fields.items()}
    data = doc.get("data")
    if not isinstance(data, dict) or set(data) != set(DATA_KEYS) or not isinstance(data["detections"], list):
        raise InputError(path, f"data: expected the published data's {', '.join(DATA_KEYS)} (detections a list)")
    source = doc.get("source")
    source = "; ".join(f"{k}: {v}" for k, v in source.items()) if isinstance(source, dict) else str(source)
    return PublishedTable(path, source, str(doc.get("protocol", "unknown")), rows, data)


def comparison(
    metrics: dict[str, Any], table: PublishedTable, mapping: dict[str, str]
) -> list[tuple[str, str, str, list[Difference]]]:
    """Per mapped run: (run, published row, our protocol, one Difference per published field: ours vs theirs)."""
    ours = flatten_metrics(metrics)
    out = []
    for run, row in mapping.items():
        key = f"egohumans.compare.published.{run}"
        if run not in metrics:
            raise InputError(key, f"run {run!r} is not in the metrics file ({sorted(metrics)})")
        if row not in table.rows:
            raise InputError(key, f"{row!r} is not a row of {table.path} ({sorted(table.rows)})")
        published = {f"{run}/COMBINED/{k}": Metric(v) for k, v in table.rows[row].items()}
        diffs = [
            Difference(name.rpartition("/")[2], ours.get(name, Metric(float("nan"))), published[name])
            for name in published
        ]
        out.append((run, row, str(metrics[run].get("protocol", "trackeval")), diffs))
    return out


def format_comparison(
    table: PublishedTable, rows: list[tuple[str, str, str, list[Difference]]], apart: dict[str, str]
) -> str:
    """Our runs beside the published rows, one block per mapped run that scored the published data; the others
    stand apart, saying why (``apart``: run -> ``mismatch``); then the published rows, not a ranking of ours."""
    lines = [f"EgoHumans tracking: ours beside published ({table.source}; protocol {table.protocol})"]
    for run, row, protocol, diffs in rows:
        if apart.get(run):
            lines.append(f"\n{run}  vs  {row}: not beside the published figures, not ranked among them: {apart[run]}")
            continue
        lines.append(f"\n{run} ({protocol})  vs  {row}")
        lines.append(f"  {'metric':<6} {'ours':>10} {'published':>10} {'delta':>10}")
        for d in diffs:
            digits = 0 if d.metric in COUNTS else 2
            ours, theirs, delta = d.reported.value, d.reference.value, d.delta
            lines.append(f"  {d.metric:<6} {ours:>10.{digits}f} {theirs:>10.{digits}f} {delta:>+10.{digits}f}")
    shown = {row for run, row, _, _ in rows if not apart.get(run)}
    for name in sorted(set(table.rows) - shown):
        values = "  ".join(f"{k} {v:g}" for k, v in table.rows[name].items())
        lines.append(f"\n{name} (published; no run of ours beside it): {values}")
    return "\n".join(lines)


def compare_published(metrics: dict[str, Any], settings: CompareSettings) -> str:
    """The EgoHumans part of ``egoeval compare``: our runs beside the published table of ``egohumans.compare``,
    where they scored the published data."""
    table = read_published(settings.published_file)
    apart = {run: mismatch(metrics.get(run, {}), table) for run in settings.published}
    return format_comparison(table, comparison(metrics, table, settings.published), apart) + compare_lines(metrics)
