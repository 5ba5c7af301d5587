"""EgoHumans' part of ``egoeval audit``: a folder of MOTChallenge tracker results scored against the pinned ground
truth and compared with the re-derived run of that name, scored alike (or with the closest run of the re-derived
metrics)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from egoeval.core.benchmarks import Findings
from egoeval.egohumans.artifacts import GT_DIR, METRICS_FILE, TRACKS
from egoeval.reported import compare_numbers

if TYPE_CHECKING:
    from egoeval.egohumans.settings import ScoreSettings


def compare_tracks(path: Path, work: Path, settings: ScoreSettings, tolerance: float, findings: Findings) -> None:
    """Tracker results scored against the pinned ground truth, against the re-derived run of that name (its tracks,
    scored alike) or else the closest run of the re-derived metrics, under the re-derivation's ``egohumans.score``
    settings."""
    from egoeval.egohumans.evaluators import evaluator
    from egoeval.tracking.mot import read_mot, read_mot_folder

    gt = {name: read_mot(path, kind="pred") for name, path in read_mot_folder(work / GT_DIR).items()}
    found = read_mot_folder(path)
    unknown = sorted(set(found) - set(gt))
    if unknown:
        findings.differ(f"sequences not in the pinned ground truth: {unknown}")
    scorer = evaluator(settings.protocol)
    pred = {name: read_mot(path, kind="pred") for name, path in found.items() if name in gt}
    scored = scorer.evaluate(gt, pred, settings.iou_threshold)
    rederived = work / TRACKS / path.name
    if rederived.is_dir():  # named after a run: the audit re-derived that run's tracks; scored alike
        tracks = {name: read_mot(file, kind="pred") for name, file in read_mot_folder(rederived).items()}
        runs = {path.name: scorer.evaluate(gt, tracks, settings.iou_threshold)}
    else:
        runs = json.loads((work / METRICS_FILE).read_text())
    names = sorted(runs)
    trials = []
    for name in names:
        trial = Findings()
        compare_numbers(scored, runs[name], tolerance, trial)
        trials.append((trial.differences, name, trial))
    differences, name, best = min(trials, key=lambda t: t[0])
    findings.note(f"compared with the re-derived run {name}" + ("" if len(names) == 1 else " (the closest)"))
    findings.lines += best.lines
    findings.differences += differences
