"""EgoHumans' part of ``egoeval audit``: a folder of MOTChallenge tracker results scored against the pinned ground
truth and compared with the re-derived run of that name (or the closest one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from egoeval.egohumans.artifacts import GT_DIR
from egoeval.findings import Findings, compare_numbers

if TYPE_CHECKING:
    from egoeval.egohumans.settings import ScoreSettings


def compare_tracks(path: Path, work: Path, settings: ScoreSettings, tolerance: float, findings: Findings) -> None:
    """Tracker results scored against the pinned ground truth, against the re-derived run of that name (or any),
    under the re-derivation's ``egohumans.score`` settings."""
    from egoeval.egohumans.evaluators import evaluator
    from egoeval.tracking.mot import read_mot, read_mot_folder

    gt = {name: read_mot(path, kind="pred") for name, path in read_mot_folder(work / GT_DIR).items()}
    found = read_mot_folder(path)
    unknown = sorted(set(found) - set(gt))
    if unknown:
        findings.differ(f"sequences not in the pinned ground truth: {unknown}")
    pred = {name: read_mot(path, kind="pred") for name, path in found.items() if name in gt}
    scored = evaluator(settings.protocol).evaluate(gt, pred, settings.iou_threshold)
    runs = json.loads((work / "metrics/egohumans.json").read_text())
    names = [path.name] if path.name in runs else sorted(runs)
    trials = []
    for name in names:
        trial = Findings()
        compare_numbers(scored, runs[name], tolerance, trial)
        trials.append((trial.differences, name, trial))
    differences, name, best = min(trials, key=lambda t: t[0])
    findings.note(f"compared with the re-derived run {name}" + ("" if len(names) == 1 else " (the closest)"))
    findings.lines += best.lines
    findings.differences += differences
