"""Published EgoHumans tracking numbers as data (``data/published/egohumans/tracking.yaml``, source in the README
beside it) and our runs printed beside them: the EgoHumans half of ``egoeval compare``.

``egohumans.compare`` in params.yaml names the table (``published_file``) and maps our runs to its rows
(``published: {run: row}``). Our numbers are each run's COMBINED entry of ``metrics/egohumans.json``; a run scored
under another protocol than the table's is flagged, since the numbers are then not comparable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from egoeval.egohumans.crossview import compare_lines
from egoeval.egohumans.settings import CompareSettings
from egoeval.errors import InputError
from egoeval.io import PARAMS_FILE
from egoeval.reported import Difference, Metric, flatten_metrics

FIELDS = ("IDF1", "MOTA", "MOTP", "FP", "FN", "IDSW")
COUNTS = ("FP", "FN", "IDSW")


@dataclass(frozen=True)
class PublishedTable:
    path: Path
    source: str
    protocol: str
    rows: dict[str, dict[str, float]]  # row name -> field -> value


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
    source = doc.get("source")
    source = "; ".join(f"{k}: {v}" for k, v in source.items()) if isinstance(source, dict) else str(source)
    return PublishedTable(path, source, str(doc.get("protocol", "unknown")), rows)


def comparison(
    metrics: dict[str, Any], table: PublishedTable, mapping: dict[str, str]
) -> list[tuple[str, str, str, list[Difference]]]:
    """Per mapped run: (run, published row, our protocol, one Difference per published field: ours vs theirs)."""
    ours = flatten_metrics(metrics)
    out = []
    for run, row in mapping.items():
        key = f"egohumans.compare.published.{run}"
        if run not in metrics:
            raise InputError(PARAMS_FILE, f"{key}: run {run!r} is not in the metrics file ({sorted(metrics)})")
        if row not in table.rows:
            raise InputError(PARAMS_FILE, f"{key}: {row!r} is not a row of {table.path} ({sorted(table.rows)})")
        published = {f"{run}/COMBINED/{k}": Metric(v) for k, v in table.rows[row].items()}
        diffs = [
            Difference(name.rpartition("/")[2], ours.get(name, Metric(float("nan"))), published[name])
            for name in published
        ]
        out.append((run, row, str(metrics[run].get("protocol", "trackeval")), diffs))
    return out


def format_comparison(table: PublishedTable, rows: list[tuple[str, str, str, list[Difference]]]) -> str:
    """Our runs beside the published rows, one block per mapped run, then the published rows not mapped."""
    lines = [f"EgoHumans tracking: ours beside published ({table.source}; protocol {table.protocol})"]
    for run, row, protocol, diffs in rows:
        flag = (
            "" if protocol == table.protocol else f"  [scored under {protocol}, not {table.protocol}: not comparable]"
        )
        lines.append(f"\n{run} ({protocol})  vs  {row}{flag}")
        lines.append(f"  {'metric':<6} {'ours':>10} {'published':>10} {'delta':>10}")
        for d in diffs:
            digits = 0 if d.metric in COUNTS else 2
            ours, theirs, delta = d.reported.value, d.reference.value, d.delta
            lines.append(f"  {d.metric:<6} {ours:>10.{digits}f} {theirs:>10.{digits}f} {delta:>+10.{digits}f}")
    unmapped = sorted(set(table.rows) - {row for _, row, _, _ in rows})
    for name in unmapped:
        values = "  ".join(f"{k} {v:g}" for k, v in table.rows[name].items())
        lines.append(f"\n{name} (published, no run mapped to it): {values}")
    return "\n".join(lines)


def compare_published(metrics: dict[str, Any], settings: CompareSettings) -> str:
    """The EgoHumans part of ``egoeval compare``: our runs beside the published table of ``egohumans.compare``."""
    table = read_published(settings.published_file)
    return format_comparison(table, comparison(metrics, table, settings.published)) + compare_lines(metrics)
