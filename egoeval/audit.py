"""``egoeval audit REPORTED``: do reported numbers reproduce from the pinned inputs?

1. The workspace is checked against dvc.lock: every changed dependency, parameter or output is named.
2. The metrics are re-derived in a temporary copy: pinned inputs are checked out of DVC's cache, every stage
   after fetching is forced to run again, and model answers come only from the durable response cache
   (``EGOEVAL_CACHE_ONLY=1``: nothing is sent to a model; a missing answer is reported, not fetched).
3. The re-derived numbers are compared with REPORTED: a metrics JSON (metrics/egonormia.json,
   metrics/egohumans.json or a baseline holding both), predictions in the official EgoNormia eval-JSON
   layout, or a folder of MOTChallenge tracker results.
Exit status 0 when the report reproduces, 1 when it does not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from egoeval.io import InputError

FETCH_STAGES = ("_sample", "_fetch")  # stages that bring inputs in: restored from the DVC cache, not re-run
EGONORMIA_METRICS = Path("metrics/egonormia.json")
EGOHUMANS_METRICS = Path("metrics/egohumans.json")
EVAL_JSON = Path("data/egonormia/predictions_eval.json")
PREDICTIONS = Path("data/egonormia/predictions.parquet")
GT_DIR = Path("data/egohumans/fetched/gt")
TRACKS_DIR = Path("data/egohumans/tracks")


@dataclass
class Findings:
    """What the audit saw, in the order it saw it; ``failed`` decides the exit status."""

    lines: list[str] = field(default_factory=list)
    failed: bool = False

    def ok(self, text: str) -> None:
        self.lines.append(f"  ok    {text}")

    def note(self, text: str) -> None:
        self.lines.append(f"  note  {text}")

    def differ(self, text: str) -> None:
        self.lines.append(f"  DIFF  {text}")
        self.failed = True

    def section(self, title: str) -> None:
        self.lines.append(f"\n{title}")


def _dvc(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    dvc = shutil.which("dvc") or str(Path(sys.executable).with_name("dvc"))
    return subprocess.run([dvc, *args], cwd=root, env=env, capture_output=True, text=True, check=False)


def lock_changes(root: Path) -> list[str]:
    """Human-readable differences between the workspace and dvc.lock (changed deps, params, outs)."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        status = repo.status()
    lines = []
    for stage, entries in sorted(status.items()):
        for entry in entries:
            if isinstance(entry, str):
                lines.append(f"{stage}: {entry}")
                continue
            for kind, changes in entry.items():
                for path, change in sorted(changes.items()):
                    if isinstance(change, dict):  # a params file: one line per parameter
                        lines += [f"{stage}: changed param {name} ({how})" for name, how in sorted(change.items())]
                    else:
                        lines.append(f"{stage}: {kind.replace('changed ', 'changed ')[:-1]} {path} ({change})")
    return lines


def stage_names(root: Path) -> list[str]:
    """Stages in the order dvc.yaml's DAG runs them (matrix stages expanded)."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo, repo.lock:
        import networkx as nx

        graph = repo.index.graph
        order = list(reversed(list(nx.topological_sort(graph))))
        return [stage.addressing for stage in order if stage.addressing.endswith(".yaml") is False]


def copy_workspace(root: Path, work: Path) -> None:
    """The git-tracked files plus dvc.lock into ``work``, sharing DVC's cache with the original."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = root / name
        if source.is_file():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, work / name)
    for extra in ("dvc.lock", "params.yaml", "dvc.yaml"):
        if (root / extra).is_file():
            shutil.copy2(root / extra, work / extra)
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    _dvc(work, "cache", "dir", "--local", str((root / ".dvc" / "cache").resolve()))


def rederive(root: Path, work: Path, findings: Findings) -> None:
    """Check out pinned inputs and re-run every later stage with answers from the response cache only."""
    copy_workspace(root, work)
    checkout = _dvc(work, "checkout", "--allow-missing")
    if checkout.returncode != 0:
        findings.differ(f"pinned outputs could not be checked out of the DVC cache: {checkout.stderr.strip()}")
    env = {**os.environ, "EGOEVAL_CACHE_ONLY": "1", "EGOEVAL_CACHE_DIR": str((root / ".egoeval-cache").resolve())}
    for name in stage_names(work):
        if name.split("@")[0].endswith(FETCH_STAGES):
            continue
        run = _dvc(work, "repro", "--force", "--single-item", name, env=env)
        if run.returncode != 0:
            tail = (run.stderr or run.stdout).strip().splitlines()[-3:]
            findings.differ(f"stage {name} did not re-run: {' | '.join(tail)}")
    for name, change in _out_changes(root, work):
        findings.differ(f"re-derived output {name} differs from the pinned one ({change})")


def _out_changes(root: Path, work: Path) -> list[tuple[str, str]]:
    """Outputs whose re-derived md5 differs from the md5 pinned in the original dvc.lock."""
    import yaml

    def outs(lock_path: Path) -> dict[str, str]:
        if not lock_path.is_file():
            return {}
        lock = yaml.safe_load(lock_path.read_text()) or {}
        found = {}
        for stage in (lock.get("stages") or {}).values():
            for out in stage.get("outs") or []:
                found[out["path"]] = out.get("md5", "")
        return found

    pinned, rederived = outs(root / "dvc.lock"), outs(work / "dvc.lock")
    return [
        (p, "missing" if p not in rederived else "changed") for p in sorted(pinned) if pinned[p] != rederived.get(p)
    ]


# ---------------------------------------------------------------------------------------------- comparisons


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict):
        flat: dict[str, Any] = {}
        for key, value in obj.items():
            flat.update(_flatten(value, f"{prefix}{key}."))
        return flat
    return {prefix[:-1]: obj}


def compare_metrics(reported: dict[str, Any], derived: dict[str, Any], tolerance: float, findings: Findings) -> None:
    """Every number in ``reported`` against the re-derived one; EgoNormia numbers also against their ci95."""
    flat_reported, flat_derived = _flatten(reported), _flatten(derived)
    checked = 0
    for key, value in sorted(flat_reported.items()):
        if not isinstance(value, int | float) or isinstance(value, bool) or ".ci95." in f".{key}.":
            continue
        checked += 1
        if key not in flat_derived:
            findings.differ(f"{key}: reported {value}, not re-derived (missing item, model or setting)")
            continue
        mine = flat_derived[key]
        if mine is None or not math.isfinite(float(mine)):
            findings.differ(f"{key}: reported {value}, re-derived {mine}")
        elif abs(float(mine) - float(value)) > tolerance:
            interval = _interval(flat_derived, key)
            inside = interval is not None and interval[0] <= float(value) <= interval[1]
            where = f"; inside the re-derived 95% interval {interval}" if inside else ""
            findings.differ(
                f"{key}: reported {value}, re-derived {mine} (delta {float(mine) - float(value):+.6g}{where})"
            )
    for key in sorted(set(flat_derived) - set(flat_reported)):
        if key.endswith((".action", ".IDF1")) and ".ci95." not in key:
            findings.note(f"{key}: re-derived {flat_derived[key]} but not in the report")
    if not findings.failed:
        findings.ok(f"{checked} reported numbers reproduce within {tolerance:g}")


def _interval(flat: dict[str, Any], key: str) -> list[float] | None:
    head, _, metric = key.rpartition(".")
    interval = flat.get(f"{head}.ci95.{metric}") if head else None
    if interval is None and head:  # the verified split nests its own ci95
        interval = flat.get(f"{head}.ci95.{metric}")
    return interval if isinstance(interval, list) else None


def _metrics_of(work: Path, reported: dict[str, Any]) -> dict[str, Any]:
    egonormia = json.loads((work / EGONORMIA_METRICS).read_text()) if (work / EGONORMIA_METRICS).is_file() else {}
    egohumans = json.loads((work / EGOHUMANS_METRICS).read_text()) if (work / EGOHUMANS_METRICS).is_file() else {}
    if set(reported) & {"egonormia", "egohumans"}:
        return {"egonormia": egonormia, "egohumans": egohumans}
    return egonormia if set(reported) & {"blind", "pipeline", "video"} else egohumans


def compare_eval_json(path: Path, reported: dict[str, Any], work: Path, tolerance: float, findings: Findings) -> None:
    """Official eval-JSON predictions against ours: scores per model, then the clips whose answers differ."""
    from egoeval.egonormia.scoring import score_official

    ours = json.loads((work / EVAL_JSON).read_text())
    theirs_scores, our_scores = score_official(reported), score_official(ours)
    for model, numbers in sorted(theirs_scores.items()):
        if model not in our_scores:
            findings.differ(f"{model}: in the report, not among the re-derived models {sorted(our_scores)}")
            continue
        for metric in ("action", "justification", "both", "sensible_iou", "n"):
            delta = our_scores[model][metric] - numbers[metric]
            if abs(delta) > tolerance:
                findings.differ(f"{model}.{metric}: reported {numbers[metric]}, re-derived {our_scores[model][metric]}")
    for clip, models in sorted(reported.items()):
        for model, entry in sorted(models.items()):
            mine = ours.get(clip, {}).get(model)
            if mine is None:
                findings.differ(f"{clip} / {model}: reported, but no re-derived answer (missing item)")
            elif mine != entry:
                findings.differ(f"{clip} / {model}: answers differ: reported {entry}, re-derived {mine}")
    missing = sorted(set(ours) - set(reported))
    if missing:
        findings.note(f"{len(missing)} re-derived clips are not in the report, e.g. {missing[:3]}")
    if not findings.failed:
        findings.ok(f"{path.name}: every model's scores and every clip's answers reproduce")


def compare_tracks(folder: Path, work: Path, tolerance: float, findings: Findings) -> None:
    """A MOTChallenge results folder, scored against the pinned ground truth, against each re-derived run."""
    from egoeval.metrics import evaluate_sequences
    from egoeval.mot import read_mot

    gt = {p.stem: read_mot(p, kind="gt") for p in sorted((work / GT_DIR).glob("*.txt"))}
    theirs = {p.stem: read_mot(p, kind="pred") for p in sorted(folder.glob("*.txt"))}
    unknown = sorted(set(theirs) - set(gt))
    if unknown:
        findings.differ(f"sequences not in the pinned ground truth: {unknown}")
    reported = evaluate_sequences(gt, theirs)["COMBINED"]
    runs = json.loads((work / EGOHUMANS_METRICS).read_text())
    best = min(runs, key=lambda run: abs(runs[run]["COMBINED"]["IDF1"] - reported["IDF1"]))
    for metric in ("HOTA", "IDF1", "MOTA", "IDSW", "FP", "FN"):
        delta = runs[best]["COMBINED"][metric] - reported[metric]
        line = f"{metric}: results folder {reported[metric]}, re-derived run {best} {runs[best]['COMBINED'][metric]}"
        if abs(delta) > tolerance:
            findings.differ(line)
        else:
            findings.ok(line)


def audit(reported_path: Path, root: Path, tolerance: float, keep: Path | None = None) -> Findings:
    findings = Findings()
    findings.section(f"1. workspace against dvc.lock ({root / 'dvc.lock'})")
    changes = lock_changes(root)
    for line in changes:
        findings.differ(line)
    if not changes:
        findings.ok("every dependency, parameter and output matches dvc.lock")

    findings.section("2. re-derived from pinned inputs and cached responses")
    work = keep or Path(tempfile.mkdtemp(prefix="egoeval-audit-"))
    try:
        before = findings.failed
        findings.failed = False
        rederive(root, work, findings)
        if not findings.failed:
            findings.ok("every stage re-ran and reproduced its pinned outputs")
        findings.failed = findings.failed or before

        findings.section(f"3. {reported_path} against the re-derived numbers")
        before, findings.failed = findings.failed, False
        if reported_path.is_dir():
            compare_tracks(reported_path, work, tolerance, findings)
        else:
            reported = _read_json(reported_path)
            if _is_eval_json(reported):
                compare_eval_json(reported_path, reported, work, tolerance, findings)
            else:
                compare_metrics(reported, _metrics_of(work, reported), tolerance, findings)
        findings.failed = findings.failed or before
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return findings


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise InputError(path, f"not a readable JSON file: {error}") from None
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object")
    return data


def _is_eval_json(data: dict[str, Any]) -> bool:
    first = next(iter(data.values()), None)
    return isinstance(first, dict) and any(isinstance(v, dict) and "best" in v for v in first.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="egoeval audit", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("reported", type=Path, help="metrics JSON, official eval-JSON, or MOTChallenge folder")
    parser.add_argument("--root", type=Path, default=Path("."), help="the egoeval workspace (default: .)")
    parser.add_argument("--tolerance", type=float, default=1e-6, help="largest accepted difference (points)")
    parser.add_argument("--keep", type=Path, help="re-derive into this folder and keep it")
    args = parser.parse_args(argv)
    try:
        if not args.reported.exists():
            raise InputError(args.reported, "no such file or folder")
        findings = audit(args.reported, args.root.resolve(), args.tolerance, args.keep)
    except InputError as error:
        print(f"egoeval audit: bad input: {error}", file=sys.stderr)
        return 2
    print("\n".join(findings.lines).lstrip("\n"))
    print(f"\nverdict: {'DOES NOT REPRODUCE' if findings.failed else 'reproduces'}")
    return 1 if findings.failed else 0
