"""EgoNormia's part of ``egoeval audit``: why re-derived answers differ from the pinned ones, and predictions in the
official eval-JSON layout compared with the re-derived ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from egoeval.cache import CACHE_MISS
from egoeval.core.benchmarks import Findings
from egoeval.core.errors import InputError
from egoeval.egonormia.artifacts import EVAL_JSON, PREDICTIONS
from egoeval.reported import compare_numbers

SUBTASKS = ("action", "justification", "sensible")


def is_eval_json(data: dict[str, Any]) -> bool:
    """Whether a JSON object is predictions in the official eval-JSON layout (``{clip: {model: {"best": ...}}}``)."""
    values = list(data.values())
    return (
        bool(values)
        and isinstance(values[0], dict)
        and any(isinstance(entry, dict) and "best" in entry for entry in values[0].values())
    )


def _reason(error: str) -> str:
    if CACHE_MISS in error:
        return "missing item: the answer is not in the response cache"
    if error.startswith("parse: "):
        return f"parse failure: {error.removeprefix('parse: ')}"
    return error or "ok"


def explain_predictions(pinned_path: Path, derived_path: Path) -> list[str]:
    """One line per (clip, setting, model, subtask) whose re-derived answer differs from the pinned one, with why."""
    if not pinned_path.is_file():
        return [f"the pinned {PREDICTIONS} is not in the DVC cache: cannot name the differing answers"]
    both = pd.read_parquet(pinned_path).merge(
        pd.read_parquet(derived_path), on=["id", "setting", "model"], how="outer", suffixes=("_p", "_d"), indicator=True
    )
    lines = []
    for row in both.to_dict("records"):
        where = f"{row['id']} {row['setting']}/{row['model']}"
        if row["_merge"] != "both":
            side = "pinned" if row["_merge"] == "left_only" else "re-derived"
            lines.append(f"{where}: only in the {side} predictions (missing item)")
            continue
        for subtask in SUBTASKS:
            old, new = _answer(row[f"{subtask}_p"]), _answer(row[f"{subtask}_d"])
            old_error, new_error = row[f"{subtask}_error_p"], row[f"{subtask}_error_d"]
            if old != new or old_error != new_error:
                lines.append(
                    f"{where} {subtask}: pinned {old} ({_reason(old_error)}), re-derived {new} ({_reason(new_error)})"
                )
    return lines


def _answer(value: Any) -> int | list[int]:
    return int(value) if isinstance(value, int | float) else [int(v) for v in value]


def compare_eval_json(path: Path, data: dict[str, Any], work: Path, tolerance: float, findings: Findings) -> None:
    """The official scorer's numbers per model key, then every clip whose answers differ."""
    from egoeval.core.errors import ScorerInputError
    from egoeval.egonormia.scoring import score_official

    ours = json.loads((work / EVAL_JSON).read_text())
    try:
        theirs_scores = score_official(data)
    except ScorerInputError as error:
        raise InputError(path, str(error)) from None
    start = findings.differences
    compare_numbers(theirs_scores, score_official(ours), tolerance, findings)
    answers = []
    for clip, models in sorted(data.items()):
        for model, entry in sorted(models.items()):
            mine = ours.get(clip, {}).get(model)
            if mine is None:
                answers.append(f"{clip} {model}: reported, but not re-derived (missing item)")
            elif mine != entry:
                answers.append(f"{clip} {model}: reported {json.dumps(entry)}, re-derived {json.dumps(mine)}")
    findings.listed(answers, "answers")
    missing = sorted(set(ours) - set(data))
    if missing:
        findings.note(f"{len(missing)} re-derived clips are not in the report, e.g. {missing[:3]}")
    if findings.differences == start:
        findings.ok("every clip's answers reproduce")
