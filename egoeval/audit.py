"""``egoeval audit REPORTED...``: do reported numbers reproduce from the pinned inputs?

1. The workspace against dvc.lock: every changed parameter (key by key), input and output is named.
2. The numbers are re-derived in a temporary copy of the workspace (its code and params: section 1 names what
   differs from dvc.lock): the outputs of the input stages (``meta: {role: input}`` in dvc.yaml) are checked out of
   DVC's cache as dvc.lock pins them, and every later stage the report needs runs again (a few seconds on the bundled
   sample) with model answers from the durable response cache only (``EGOEVAL_CACHE_ONLY=1``: nothing is sent to a
   model; an answer missing from the cache is a missing item). Re-derived outputs that differ from dvc.lock
   are named, and so is every EgoNormia answer that differs from the pinned predictions, with its reason
   (missing item, parse failure).
3. Each REPORTED against the re-derived numbers: a metrics JSON of any benchmark dvc.yaml declares
   (metrics/egonormia.json, metrics/egohumans.json, ...) or a baseline ``{benchmark: metrics}``, predictions in the
   official EgoNormia eval-JSON layout, or a folder of MOTChallenge tracker results (``<seq>.txt``; a folder named
   after a run is compared with that run). A number reproduces within ``--tolerance``; a differing one shows
   ``delta = reported - re-derived`` and, where the metric has one, whether it lies inside the re-derived bootstrap
   interval.
Exit status: 0 when everything reproduces, 1 when something does not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from egoeval.cache import CACHE_DIR_ENV, CACHE_FILE, CACHE_ONLY_ENV, ResponseCache, cache_file
from egoeval.egohumans.artifacts import GT_DIR
from egoeval.egonormia.artifacts import DESCRIPTIONS, EVAL_JSON, RESPONSES
from egoeval.errors import InputError
from egoeval.io import flatten_dotted
from egoeval.pipeline import (
    StageInfo,
    benchmark_metrics,
    copy_workspace,
    pinned_output,
    pipeline_stages,
    read_lock,
    with_upstream,
)
from egoeval.reported import differences, flatten_metrics
from egoeval.settings import load_settings
from egoeval.stage import command_env

CACHE_MISS = "not in the response cache"
PREDICTIONS = "data/egonormia/predictions.parquet"
SUBTASKS = ("action", "justification", "sensible")
MAX_LISTED = 20


@dataclass
class Findings:
    """What the audit saw, in order; any ``differ`` makes the report not reproduce."""

    lines: list[str] = field(default_factory=list)
    differences: int = 0

    def section(self, title: str) -> None:
        self.lines.append(f"\n{title}")

    def ok(self, text: str) -> None:
        self.lines.append(f"  ok    {text}")

    def note(self, text: str) -> None:
        self.lines.append(f"  note  {text}")

    def differ(self, text: str) -> None:
        self.lines.append(f"  DIFF  {text}")
        self.differences += 1

    def listed(self, texts: list[str], what: str) -> None:
        """``differ`` for the first MAX_LISTED texts, then one line counting the rest."""
        for text in texts[:MAX_LISTED]:
            self.differ(text)
        if len(texts) > MAX_LISTED:
            self.differ(f"... and {len(texts) - MAX_LISTED} more {what}")


# ------------------------------------------------------------------------------------ 1. the workspace vs dvc.lock


def _lock_stages(root: Path) -> dict[str, Any]:
    if not (root / "dvc.lock").is_file():
        raise InputError(root / "dvc.lock", "no dvc.lock: nothing is pinned (run `dvc repro` first)")
    return read_lock(root)


def param_changes(root: Path) -> list[str]:
    """One line per parameter whose value in the params file differs from the one dvc.lock recorded."""
    changed: dict[tuple[str, str], tuple[Any, Any, list[str]]] = {}
    for stage, entry in sorted(_lock_stages(root).items()):
        for file, sections in (entry.get("params") or {}).items():
            now = flatten_dotted(yaml.safe_load((root / file).read_text()) or {}) if (root / file).is_file() else {}
            for key, pinned in flatten_dotted(sections).items():
                current = now.get(key, "<absent>")
                if current != pinned:
                    changed.setdefault((file, key), (pinned, current, []))[2].append(stage)
    return [
        f"param {key}: {pinned!r} in dvc.lock, {current!r} in {file} (used by {', '.join(users)})"
        for (file, key), (pinned, current, users) in sorted(changed.items())
    ]


def lock_changes(root: Path, stages: list[str] | None = None, outs_only: bool = False) -> list[tuple[bool, str]]:
    """(serious, line) for every dependency and output that differs from dvc.lock; a directory names its files.

    A pipeline output missing from the workspace is not serious: the audit checks out its own copy.
    """
    from dvc.repo import Repo

    outputs = [out["path"] for entry in _lock_stages(root).values() for out in entry.get("outs") or []]
    with contextlib.chdir(root), Repo(str(root)) as repo:  # DVC resolves targets against the working directory
        status = repo.status(targets=stages)
        files = repo.data_status(granular=True, untracked_files="no")
    changed_files = sorted(
        {name.rstrip("/") for names in files["uncommitted"].values() for name in names}
        | set(files.get("git", {}).get("unstaged", []))
    )
    paths: dict[tuple[str, str, str], list[str]] = {}  # (path, change, role) -> stages
    lines: list[tuple[bool, str]] = []
    for stage, entries in sorted(status.items()):
        for entry in entries:
            if isinstance(entry, str):  # e.g. "changed command"
                lines.append((True, f"stage {stage}: {entry} since dvc.lock"))
                continue
            for kind, changes in entry.items():
                role = "output" if kind == "changed outs" else "input"
                if outs_only and role == "input":
                    continue
                for path, change in changes.items():
                    if not isinstance(change, dict):  # a params file's entry: param_changes names the keys
                        paths.setdefault((path, change, role), []).append(stage)
    for (path, change, role), users in sorted(paths.items()):
        inside = [name[len(path) + 1 :] for name in changed_files if name.startswith(f"{path}/")]
        listed = f" ({', '.join(inside[:5])}{', ...' if len(inside) > 5 else ''})" if inside else ""
        produced = any(path == out or path.startswith(f"{out}/") for out in outputs)
        serious = not (change == "deleted" and produced)
        lines.append((serious, f"{role} {path}{listed}: {change} since dvc.lock ({role} of {', '.join(users)})"))
    return lines


# ----------------------------------------------------------------------------------------------- 2. re-deriving


def _stages(root: Path, targets: list[str]) -> list[StageInfo]:
    """The target stages and everything upstream of them, in run order (dvc.yaml is the only list of stages)."""
    stages = pipeline_stages(root)
    needed = with_upstream(stages, targets)
    return [stage for stage in stages if stage.name in needed]


def rederive(root: Path, work: Path, targets: list[str], findings: Findings) -> list[str] | None:
    """Check out the pinned inputs and re-run the stages up to ``targets``.

    Returns the re-derived outputs that differ from dvc.lock, or None when a stage could not run.
    """
    from dvc.exceptions import CheckoutError
    from dvc.repo import Repo

    stages = _stages(root, targets)
    runs = [stage for stage in stages if stage.role != "input"]
    objects = copy_workspace(root, work)
    try:
        with contextlib.chdir(work), Repo(str(work)) as repo:
            repo.checkout(targets=[stage.name for stage in stages if stage.role == "input"], force=True)
    except CheckoutError as error:
        findings.differ(f"pinned inputs are not in the DVC cache (dvc pull?): {error}")
        return None
    answers = work / ".egoeval-audit-answers"
    unpulled = gather_answers(root, objects, answers, findings)
    env = command_env(**{CACHE_ONLY_ENV: "1", CACHE_DIR_ENV: str(answers.resolve())})
    for stage in runs:
        run = subprocess.run(stage.cmd, shell=True, cwd=work, env=env, capture_output=True, text=True)
        if run.returncode != 0:
            tail = [line.strip() for line in run.stderr.splitlines() if line.strip()][-1:]
            missing = re.search(r"(\d+) of \d+ (?:answers|descriptions) failed", tail[0]) if tail else None
            if missing and CACHE_MISS in tail[0]:
                where = f"not pulled: {', '.join(unpulled)}" if unpulled else "not in the pinned outputs either"
                findings.differ(
                    f"stage {stage.name}: {missing.group(1)} model answers are missing ({where}); `dvc pull` from a "
                    f"remote that holds them, or re-deriving them costs {missing.group(1)} model calls"
                )
            else:
                findings.differ(f"stage {stage.name} failed (exit {run.returncode}): {' '.join(tail)}")
            return None
    changes = [line for _, line in lock_changes(work, [stage.name for stage in runs], outs_only=True)]
    findings.listed([f"re-derived {line}" for line in changes], "outputs")
    if any(PREDICTIONS in line for line in changes):
        pinned = pinned_output(root, PREDICTIONS)
        findings.listed(explain_predictions(objects / pinned[:2] / pinned[2:], work / PREDICTIONS), "answers")
    if not changes:
        findings.ok(f"{len(runs)} stages re-ran from pinned inputs and cached answers; every output equals dvc.lock's")
    return changes


ANSWER_OUTPUTS = ((RESPONSES, "response"), (DESCRIPTIONS, "description"))
"""Outputs that record model answers with their request keys: what a clone without the response cache replays."""


def gather_answers(root: Path, objects: Path, folder: Path, findings: Findings) -> list[str]:
    """A response cache in ``folder`` for a cache-only re-derivation: the local response cache, plus every answer
    the pinned outputs recorded (a clone that pulled them from a DVC remote needs no local cache). Returns the
    answer outputs that are pinned but not in the DVC cache."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / CACHE_FILE
    local = cache_file(root / load_settings(root / "params.yaml").egonormia.infer.cache_dir)
    from_local = 0
    if local.is_file():
        with ResponseCache(local) as cache:
            cache.copy_to(target)
            from_local = len(cache)
    unpulled, from_outputs = [], 0
    with ResponseCache(target) as cache:
        for path, column in ANSWER_OUTPUTS:
            try:
                md5 = pinned_output(root, str(path))
            except InputError:
                continue  # not a stage of this pipeline
            blob = objects / md5[:2] / md5[2:]
            if not blob.is_file():
                unpulled.append(str(path))
                continue
            table = pd.read_parquet(blob)
            if "request_key" in table:
                answered = table[(table["error"] == "") & (table["request_key"] != "")]
                served = answered["served_model"] if "served_model" in answered else pd.Series("", answered.index)
                for name, group in answered.groupby(served, sort=True):  # the served model travels with its answers
                    pairs = zip(group["request_key"], group[column], strict=True)
                    from_outputs += cache.seed(pairs, {"source": f"pinned {path}", "served_model": str(name)})
    findings.note(f"model answers: {from_local} from the local response cache, {from_outputs} more from pinned outputs")
    return unpulled


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


# -------------------------------------------------------------------------------------------- 3. the comparisons


@dataclass(frozen=True)
class Report:
    path: Path
    kind: str  # metrics | eval-json | tracks
    benchmarks: tuple[str, ...]
    data: dict[str, Any]


def _is_eval_json(values: list[Any]) -> bool:
    return any(isinstance(entry, dict) and "best" in entry for entry in values[0].values())


def read_report(path: Path, known: dict[str, Any] | None = None) -> Report:
    """What REPORTED is, from its content: a folder of tracker results, an EgoNormia eval-JSON, or a metrics JSON of
    one of the ``known`` benchmarks (``{benchmark: its current metrics}``: the one sharing most top-level keys), or
    a baseline ``{benchmark: metrics}``."""
    known = known or {}
    if path.is_dir():
        if not any(path.glob("*.txt")):
            raise InputError(path, "a MOTChallenge results folder needs <seq>.txt files")
        return Report(path, "tracks", ("egohumans",), {})
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(path, f"not a readable JSON file: {error}") from None
    values = list(data.values()) if isinstance(data, dict) and data else []
    if not values or not all(isinstance(value, dict) for value in values):
        raise InputError(path, "expected a JSON object of objects")
    if set(data) <= set(known):
        return Report(path, "metrics", tuple(sorted(data)), data)
    if _is_eval_json(values):
        return Report(path, "eval-json", ("egonormia",), data)
    shared = {name: len(set(data) & set(content or {})) for name, content in known.items()}
    best = max(shared, key=lambda name: shared[name], default=None)
    if best is not None and shared[best]:
        return Report(path, "metrics", (best,), data)
    names = ", ".join(sorted(known)) or "no benchmark (none is declared or run)"
    raise InputError(path, f"neither a metrics JSON of {names} nor an EgoNormia eval-JSON")


def compare_numbers(reported: dict[str, Any], derived: dict[str, Any], tolerance: float, findings: Findings) -> None:
    """Every number in ``reported`` against the re-derived one; a differing one says if it is inside the ci95."""
    numbers = flatten_metrics(reported)
    found = differences(numbers, flatten_metrics(derived), tolerance)
    for difference in found:
        findings.differ(difference.describe("re-derived"))
    if not found:
        findings.ok(f"{len(numbers)} reported numbers reproduce within {tolerance:g}")


def compare_eval_json(report: Report, work: Path, tolerance: float, findings: Findings) -> None:
    """The official scorer's numbers per model key, then every clip whose answers differ."""
    from egoeval.egonormia.scoring import OfficialFormatError, score_official

    ours = json.loads((work / EVAL_JSON).read_text())
    try:
        theirs_scores = score_official(report.data)
    except OfficialFormatError as error:
        raise InputError(report.path, str(error)) from None
    start = findings.differences
    compare_numbers(theirs_scores, score_official(ours), tolerance, findings)
    answers = []
    for clip, models in sorted(report.data.items()):
        for model, entry in sorted(models.items()):
            mine = ours.get(clip, {}).get(model)
            if mine is None:
                answers.append(f"{clip} {model}: reported, but not re-derived (missing item)")
            elif mine != entry:
                answers.append(f"{clip} {model}: reported {json.dumps(entry)}, re-derived {json.dumps(mine)}")
    findings.listed(answers, "answers")
    missing = sorted(set(ours) - set(report.data))
    if missing:
        findings.note(f"{len(missing)} re-derived clips are not in the report, e.g. {missing[:3]}")
    if findings.differences == start:
        findings.ok("every clip's answers reproduce")


def compare_tracks(report: Report, work: Path, tolerance: float, findings: Findings) -> None:
    """Tracker results scored against the pinned ground truth, against the re-derived run of that name (or any)."""
    from egoeval.egohumans.evaluators import evaluator
    from egoeval.tracking.mot import read_mot, read_mot_folder

    gt = {name: read_mot(path, kind="pred") for name, path in read_mot_folder(work / GT_DIR).items()}
    found = read_mot_folder(report.path)
    unknown = sorted(set(found) - set(gt))
    if unknown:
        findings.differ(f"sequences not in the pinned ground truth: {unknown}")
    pred = {name: read_mot(path, kind="pred") for name, path in found.items() if name in gt}
    settings = load_settings(work / "params.yaml").egohumans.score
    scored = evaluator(settings.protocol).evaluate(gt, pred, settings.iou_threshold)
    runs = json.loads((work / "metrics/egohumans.json").read_text())
    names = [report.path.name] if report.path.name in runs else sorted(runs)
    trials = []
    for name in names:
        trial = Findings()
        compare_numbers(scored, runs[name], tolerance, trial)
        trials.append((trial.differences, name, trial))
    differences, name, best = min(trials, key=lambda t: t[0])
    findings.note(f"compared with the re-derived run {name}" + ("" if len(names) == 1 else " (the closest)"))
    findings.lines += best.lines
    findings.differences += differences


def audit(paths: list[Path], root: Path, tolerance: float, keep: Path | None = None) -> Findings:
    """Check the workspace, re-derive what the reports need, compare each report; the findings say what differs."""
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    try:
        stages = pipeline_stages(root)
    except InputError:
        for path in paths:  # a report that is not even readable is the first thing to say
            read_report(path)
        raise
    files = benchmark_metrics(stages)  # benchmark -> its metrics files, as dvc.yaml declares them
    current = {name: _load_metrics(root, paths_) for name, paths_ in files.items()}
    reports = [read_report(path, current) for path in paths]
    findings = Findings()
    findings.section(f"1. the workspace against {root / 'dvc.lock'}")
    start = findings.differences
    findings.listed(param_changes(root), "parameters")
    for serious, line in lock_changes(root):
        (findings.differ if serious else findings.note)(line)
    if findings.differences == start:
        findings.ok("every parameter, input and output matches dvc.lock")

    findings.section("2. re-derived from pinned inputs and cached model answers")
    benchmarks = sorted({name for report in reports for name in report.benchmarks})
    targets = [info.name for info in stages if set(info.metrics) & {p for b in benchmarks for p in files.get(b, [])}]
    work = keep or Path(tempfile.mkdtemp(prefix="egoeval-audit-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        changed = rederive(root, work, targets, findings)
        if changed is None:
            return findings
        derived = {name: _load_metrics(work, files[name]) for name in benchmarks}
        for report in reports:
            findings.section(f"3. {report.path} ({report.kind}) against the re-derived numbers")
            start = findings.differences
            if report.kind == "tracks":
                compare_tracks(report, work, tolerance, findings)
            elif report.kind == "eval-json":
                compare_eval_json(report, work, tolerance, findings)
            else:
                single = not set(report.data) <= set(files)
                compare_numbers(report.data, derived[report.benchmarks[0]] if single else derived, tolerance, findings)
            if findings.differences > start and not changed:
                findings.note("the re-derived outputs equal dvc.lock's: the pinned inputs do not give these numbers")
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return findings


def _load_metrics(root: Path, paths: list[str]) -> Any:
    """A benchmark's metrics: its one file's content (``{}`` when absent), or ``{file stem: content}`` for several."""
    contents = {Path(path).stem: json.loads((root / path).read_text()) for path in paths if (root / path).is_file()}
    if len(paths) == 1:
        return next(iter(contents.values()), {})
    return contents


def tolerance(text: str) -> float:
    """``--tolerance``: a finite number >= 0 (NaN would let every difference pass, a negative one fail them all)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="egoeval audit", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("reported", type=Path, nargs="+", help="metrics JSON, EgoNormia eval-JSON or MOT folder")
    parser.add_argument("--root", type=Path, default=Path("."), help="the egoeval workspace (default: .)")
    parser.add_argument("--tolerance", type=tolerance, default=1e-6, help="largest accepted difference (default 1e-6)")
    parser.add_argument("--keep", type=Path, help="re-derive into this folder and keep it")
    args = parser.parse_args(argv)
    try:
        for path in args.reported:
            if not path.exists():
                raise InputError(path, "no such file or folder")
        if args.keep is not None and args.keep.exists() and (not args.keep.is_dir() or any(args.keep.iterdir())):
            raise InputError(args.keep, "--keep must name a new or empty folder (the audit re-derives into it)")
        findings = audit(args.reported, args.root.resolve(), args.tolerance, args.keep)
    except InputError as error:
        print(f"egoeval audit: bad input: {error}", file=sys.stderr)
        return 2
    print("\n".join(findings.lines).lstrip("\n"))
    verdict = "reproduces" if findings.differences == 0 else f"DOES NOT REPRODUCE ({findings.differences} differences)"
    print(f"\nverdict: {verdict}")
    return 0 if findings.differences == 0 else 1
