"""``egoeval audit REPORTED...``: do reported numbers reproduce from the pinned inputs?

It works on the project the current folder lies in (found as DVC finds it, from a subfolder too); REPORTED paths are
taken relative to the current folder. It re-derives and compares only what the reports depend on: the stages that
write what they are compared with, and the stages above those (dvc.yaml's graph).
1. The workspace against dvc.lock, for those stages: every changed parameter (key by key), input and output is named;
   so are the pinned outputs that are neither here nor in DVC's cache (a clone that did not ``dvc pull``).
2. The numbers are re-derived in a temporary copy of the workspace (its code and params: section 1 names what
   differs from dvc.lock): the outputs of the input stages (``meta: {role: input}`` in dvc.yaml) are checked out of
   DVC's cache as dvc.lock pins them. A stage above the reports' own whose pinned outputs are in DVC's cache and which
   DVC finds unchanged since dvc.lock (its code, params, inputs, and its outputs hashed again), as are all the stages
   above it, gives its pinned outputs; every other stage runs again (``--full``: every stage below the pinned inputs
   runs again), each as soon as its upstream stages are done, ``--jobs`` at a time (default one per CPU), saying on
   stderr as each ends, with model answers from the durable response cache only (``EGOEVAL_CACHE_ONLY=1``: nothing
   is sent to a model; an answer missing from the cache is a missing item). Re-derived outputs that differ from
   dvc.lock are named, and so is every EgoNormia answer that differs from the pinned predictions, with its reason
   (missing item, parse failure).
3. Each REPORTED against the re-derived numbers: a metrics JSON of any benchmark dvc.yaml declares
   (metrics/egonormia.json, metrics/egohumans.json, ...) or a baseline ``{benchmark: metrics}``, predictions in the
   official EgoNormia eval-JSON layout, or a folder of MOTChallenge tracker results (``<seq>.txt``; a folder named
   after a run is compared with that run's re-derived tracks, scored alike). A number reproduces within
   ``--tolerance``; a differing one shows ``delta = reported - re-derived`` and, where the metric has one, whether it
   lies inside the re-derived bootstrap interval.
Exit status: 0 when everything reproduces, 1 when something does not (DIFF lines), 2 on bad input, 3 when pinned
outputs the audit needs are not here (MISSING lines: a clone that did not ``dvc pull``; ``dvc pull`` fetches them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from egoeval.cache import (
    ANSWER_META,
    CACHE_DIR_ENV,
    CACHE_FILE,
    CACHE_MISS,
    CACHE_ONLY_ENV,
    ResponseCache,
    cache_file,
)
from egoeval.core.benchmarks import Findings, registry
from egoeval.core.errors import EXIT_BAD_INPUT, InputError
from egoeval.core.io.dvc_lock import read_lock
from egoeval.core.io.paths import project_root
from egoeval.core.stage_shell import command_env, help_text
from egoeval.dvc_project import (
    StageInfo,
    benchmark_metrics,
    cache_objects,
    cached,
    check_out,
    copy_workspace,
    pinned_output,
    pinned_outputs,
    pipeline_stages,
    stage_status,
    with_upstream,
)
from egoeval.reported import compare_numbers, flatten_dotted, read_metrics

if TYPE_CHECKING:
    from egoeval.core.settings import Params

EXIT_REPRODUCES = 0  # every reported number reproduces
EXIT_DIFFERS = 1  # something does not reproduce (the DIFF lines say what)
EXIT_NOT_PULLED = 3  # undecided: pinned outputs the audit needs are not here (MISSING lines); `dvc pull` fetches them

# ------------------------------------------------------------------------------------ 1. the workspace vs dvc.lock


def _lock_stages(root: Path) -> dict[str, Any]:
    if not (root / "dvc.lock").is_file():
        raise InputError(root / "dvc.lock", "no dvc.lock: nothing is pinned (run `dvc repro` first)")
    return read_lock(root)


def param_changes(root: Path, stages: list[str] | None = None) -> list[str]:
    """One line per parameter whose value in the params file differs from the one dvc.lock recorded (for ``stages``:
    default all)."""
    changed: dict[tuple[str, str], tuple[Any, Any, list[str]]] = {}
    for stage, entry in sorted(_lock_stages(root).items()):
        if stages is not None and stage not in stages:
            continue
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


def lock_changes(
    root: Path, stages: list[str] | None = None, outs_only: bool = False, absent: frozenset[str] = frozenset()
) -> list[tuple[bool, str]]:
    """(serious, line) for every dependency and output of ``stages`` (default all) that differs from dvc.lock; a
    directory names its files. Paths in, above or under an ``absent`` output (not pulled: ``not_pulled``) are left out.

    A pipeline output missing from the workspace is not serious: the audit checks out its own copy.
    """
    outputs = [out["path"] for entry in _lock_stages(root).values() for out in entry.get("outs") or []]
    status = stage_status(root, stages)
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
                    if _related(path, absent):
                        continue
                    if not isinstance(change, dict):  # a params file's entry: param_changes names the keys
                        paths.setdefault((path, change, role), []).append(stage)
    changed_files = _changed_files(root) if any((root / path).is_dir() for path, _, _ in paths) else []
    for (path, change, role), users in sorted(paths.items()):
        inside = [name[len(path) + 1 :] for name in changed_files if name.startswith(f"{path}/")]
        listed = f" ({', '.join(inside[:5])}{', ...' if len(inside) > 5 else ''})" if inside else ""
        produced = any(path == out or path.startswith(f"{out}/") for out in outputs)
        serious = not (change == "deleted" and produced)
        lines.append((serious, f"{role} {path}{listed}: {change} since dvc.lock ({role} of {', '.join(users)})"))
    return lines


def _changed_files(root: Path) -> list[str]:
    """Every file DVC or git finds changed in the workspace (naming the files inside a changed folder)."""
    from dvc.repo import Repo

    with contextlib.chdir(root), Repo(str(root)) as repo:
        files = repo.data_status(granular=True, untracked_files="no")
    return sorted(
        {name.rstrip("/") for names in files["uncommitted"].values() for name in names}
        | set(files.get("git", {}).get("unstaged", []))
    )


def _related(path: str, outputs: frozenset[str]) -> bool:
    """Whether ``path`` is one of ``outputs``, lies inside one or holds one."""
    return any(path == out or path.startswith(f"{out}/") or out.startswith(f"{path}/") for out in outputs)


def not_pulled(root: Path, stages: list[StageInfo], objects: Path) -> dict[str, str]:
    """The pinned outputs of ``stages`` that are neither in the workspace nor in the DVC cache (``objects``), each
    with the stage that writes it: a clone that did not ``dvc pull``."""
    pinned = pinned_outputs(root)
    return {
        path: stage.name
        for stage in stages
        for path in stage.outs
        if path in pinned and not (root / path).exists() and not cached(objects, pinned[path])
    }


# ----------------------------------------------------------------------------------------------- 2. re-deriving


def needed_stages(stages: list[StageInfo], targets: list[str]) -> list[StageInfo]:
    """The target stages and every stage upstream of them up to the pinned inputs (``meta.role: input``: checked out,
    so what is above them is not needed), in run order (dvc.yaml is the only list of stages)."""
    inputs = frozenset(stage.name for stage in stages if stage.role == "input")
    names = with_upstream(stages, targets, stop_at=inputs)
    return [stage for stage in stages if stage.name in names]


def rederive(
    root: Path,
    work: Path,
    stages: list[StageInfo],
    targets: list[str],
    findings: Findings,
    settings: Params,
    jobs: int | None = None,
    full: bool = False,
) -> list[str] | None:
    """Check out the pinned inputs and re-run ``stages`` (``needed_stages``: the ``targets`` and what they need;
    ``settings``: the workspace's params, which the copy in ``work`` runs under). Unless ``full``, a stage upstream of
    the targets whose pinned outputs are in the DVC cache and which DVC finds unchanged since dvc.lock (its outputs
    hashed again after the checkout), as are all its upstream stages, is not re-run: its pinned outputs are used.

    Returns the re-derived outputs that differ from dvc.lock, or None when a stage could not run.
    """
    objects = copy_workspace(root, work)
    pinned = pinned_outputs(root)
    inputs = [stage for stage in stages if stage.role == "input"]
    lacking = [(p, s.name) for s in inputs for p in s.outs if p not in pinned or not cached(objects, pinned[p])]
    for path, stage in lacking:
        findings.miss(f"{path} (a pinned input: output of {stage}) is neither here nor in the DVC cache")
    if lacking:
        findings.note("`dvc pull` fetches the pinned outputs from the project's DVC remote; then audit again")
        return None
    candidates = [] if full else [s for s in stages if _reusable_outputs(s, targets, pinned, objects)]
    for stage in inputs + candidates:
        for path in stage.outs:
            check_out(objects, pinned[path], work / path)
    reused = _unchanged(work, stages, candidates) if candidates else set()
    for stage in candidates:
        if stage.name not in reused:  # checked out, but it re-runs: from nothing, as the pipeline would
            for path in stage.outs:
                shutil.rmtree(work / path) if (work / path).is_dir() else (work / path).unlink(missing_ok=True)
    runs = [stage for stage in stages if stage.role != "input" and stage.name not in reused]
    if reused:
        findings.note(
            f"reused the pinned outputs of {len(reused)} stages unchanged since dvc.lock (their files hashed again) "
            f"(--full re-derives them too): {', '.join(s.name for s in stages if s.name in reused)}"
        )
    print(f"audit: re-deriving in {work}: {len(runs)} stages ({len(reused)} reused)", file=sys.stderr)
    answers = work / ".egoeval-audit-answers"
    recorded = {str(output.path) for benchmark in registry().values() for output in benchmark.answer_outputs()}
    if any(set(stage.outs) & recorded for stage in runs):
        unpulled = gather_answers(root, settings, objects, answers, findings)
    else:  # the stages that ask a model are reused: an answer asked for all the same is missing, not sent
        unpulled = []
        findings.note("model answers: none needed (the stages that ask a model are reused)")
    env = command_env(**{CACHE_ONLY_ENV: "1", CACHE_DIR_ENV: str(answers.resolve())})
    failed = run_stages(runs, work, env, jobs)
    if failed is not None:
        stage, run = failed
        tail = [line.strip() for line in run.stderr.splitlines() if line.strip()][-1:]
        missing = re.search(r"(\d+) of \d+ (?:answers|descriptions) failed", tail[0]) if tail else None
        if missing and CACHE_MISS in tail[0] and unpulled:
            findings.miss(
                f"stage {stage.name}: {missing.group(1)} model answers are missing (not pulled: {', '.join(unpulled)})"
                f"; `dvc pull` from a remote that holds them, or re-deriving them costs {missing.group(1)} model calls"
            )
        elif missing and CACHE_MISS in tail[0]:
            findings.differ(
                f"stage {stage.name}: {missing.group(1)} model answers are missing (not in the pinned outputs "
                f"either); re-deriving them costs {missing.group(1)} model calls"
            )
        else:
            findings.differ(f"stage {stage.name} failed (exit {run.returncode}): {' '.join(tail)}")
        return None
    changes = [line for _, line in lock_changes(work, [stage.name for stage in runs], outs_only=True)]
    findings.listed([f"re-derived {line}" for line in changes], "outputs")
    for stage in runs:
        for path in stage.outs:
            if path in pinned and any(f"output {path}" in line for line in changes):
                blob = objects / pinned[path][:2] / pinned[path][2:]
                for benchmark in registry().values():
                    findings.listed(benchmark.explain_output(path, blob, work / path), "answers")
    if not changes:
        findings.ok(f"{len(runs)} stages re-ran ({', '.join(s.name for s in runs)}); every output equals dvc.lock's")
    return changes


def _reusable_outputs(stage: StageInfo, targets: list[str], pinned: dict[str, str], objects: Path) -> bool:
    """Whether a stage may be reused rather than re-run: not a target nor a pinned input, and every output of it is
    pinned and in the DVC cache."""
    if stage.role == "input" or stage.name in targets or not stage.outs:
        return False
    return all(path in pinned and cached(objects, pinned[path]) for path in stage.outs)


def _unchanged(work: Path, stages: list[StageInfo], candidates: list[StageInfo]) -> set[str]:
    """The ``candidates`` (their pinned outputs copied into ``work``) that DVC finds unchanged since dvc.lock: their
    command, code, params, inputs and outputs (hashed again: a damaged cache object is caught), and whose upstream
    stages are pinned inputs or reused too."""
    status = stage_status(work, [stage.name for stage in candidates])
    clean = {stage.name for stage in candidates if not status.get(stage.name)}
    pinned = {stage.name for stage in stages if stage.role == "input"}
    reused: set[str] = set()
    for stage in stages:  # upstream first
        if stage.name in clean and all(up in reused or up in pinned for up in stage.upstream):
            reused.add(stage.name)
    return reused


def run_stages(
    stages: list[StageInfo], work: Path, env: dict[str, str], workers: int | None = None
) -> tuple[StageInfo, subprocess.CompletedProcess[str]] | None:
    """Run the stages' commands in ``work``, each once its upstream stages are done, up to ``workers`` at a time
    (default: one per CPU), saying on stderr as each ends. Returns the first that failed (and starts no more), or
    None. Concurrent stages are safe: their outputs differ, and commits take the folder's lock (egoeval.core.io)."""
    workers = workers or os.cpu_count() or 1
    names = {stage.name for stage in stages}
    waiting = {stage.name: stage for stage in stages}
    done: set[str] = set()
    failed: tuple[StageInfo, subprocess.CompletedProcess[str]] | None = None
    started = time.monotonic()

    def run(stage: StageInfo) -> subprocess.CompletedProcess[str]:
        return subprocess.run(stage.cmd, shell=True, cwd=work, env=env, capture_output=True, text=True)

    with ThreadPoolExecutor(workers) as pool:
        running: dict[Future[subprocess.CompletedProcess[str]], StageInfo] = {}
        while waiting or running:
            ready = [s for s in waiting.values() if failed is None and set(s.upstream) & names <= done]
            for stage in ready[: workers - len(running)]:
                running[pool.submit(run, stage)] = waiting.pop(stage.name)
            if not running:
                break  # a stage failed: the rest would only fail after it
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                stage, result = running.pop(future), future.result()
                done.add(stage.name)
                status = "done" if result.returncode == 0 else f"failed (exit {result.returncode})"
                elapsed = time.monotonic() - started
                print(f"audit: {stage.name} {status} ({len(done)} of {len(stages)}, {elapsed:.0f} s)", file=sys.stderr)
                if result.returncode != 0 and failed is None:
                    failed = (stage, result)
    return failed


def gather_answers(root: Path, settings: Params, objects: Path, folder: Path, findings: Findings) -> list[str]:
    """A response cache in ``folder`` for a cache-only re-derivation: the local response cache (where ``settings``,
    the workspace's params, put it), plus every answer the pinned outputs recorded (a clone that pulled them from a
    DVC remote needs no local cache). Returns the answer outputs that are pinned but not in the DVC cache."""
    import pandas as pd  # not for --help

    folder.mkdir(parents=True, exist_ok=True)
    target = folder / CACHE_FILE
    from_local = 0
    for benchmark in registry().values():
        configured = benchmark.response_cache_dir(settings.section(benchmark))
        local = cache_file(root / configured) if configured else None
        if local is not None and local.is_file() and not target.exists():  # one response cache serves them all
            with ResponseCache(local) as cache:
                cache.copy_to(target)
                from_local = len(cache)
    unpulled, from_outputs = [], 0
    outputs = [(o.path, o.column) for benchmark in registry().values() for o in benchmark.answer_outputs()]
    with ResponseCache(target) as cache:
        for path, column in outputs:
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
                recorded = [name for name in ANSWER_META if name in answered]  # they travel with their answers
                source = {"source": f"pinned {path}"}
                rows = answered[["request_key", column, *recorded]].itertuples(index=False, name=None)
                from_outputs += cache.seed(
                    (key, response, source | _meta(recorded, values)) for key, response, *values in rows
                )
    findings.note(f"model answers: {from_local} from the local response cache, {from_outputs} more from pinned outputs")
    return unpulled


def _meta(names: list[str], values: list[Any]) -> dict[str, Any]:
    """An answer's recorded meta as the response cache stores it (plain JSON values; a missing value left out)."""
    import pandas as pd

    return {
        name: value.item() if hasattr(value, "item") else value
        for name, value in zip(names, values, strict=True)
        if not pd.isna(value)
    }


# -------------------------------------------------------------------------------------------- 3. the comparisons


@dataclass(frozen=True)
class Report:
    path: Path
    kind: str  # metrics, or a kind of a benchmark's own (Benchmark.audit_report_kind)
    benchmarks: tuple[str, ...]
    data: dict[str, Any]


def read_report(path: Path, known: dict[str, Any] | None = None) -> Report:
    """What REPORTED is, from its content: a report of a benchmark's own kind (a folder of tracker results, an
    EgoNormia eval-JSON: ``Benchmark.audit_report_kind``), a metrics JSON of one of the ``known`` benchmarks
    (``{benchmark: its current metrics}``: the one sharing most top-level keys), or a baseline
    ``{benchmark: metrics}``."""
    known = known or {}
    if path.is_dir():
        for benchmark in registry().values():
            kind = benchmark.audit_report_kind(path, None)
            if kind:
                return Report(path, kind, (benchmark.name,), {})
        raise InputError(path, "not a results folder any benchmark reads (e.g. MOTChallenge <seq>.txt files)")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(path, f"not a readable JSON file: {error}") from None
    values = list(data.values()) if isinstance(data, dict) and data else []
    if not values or not all(isinstance(value, dict) for value in values):
        raise InputError(path, "expected a JSON object of objects")
    if set(data) <= set(known):
        return Report(path, "metrics", tuple(sorted(data)), data)
    for benchmark in registry().values():
        kind = benchmark.audit_report_kind(path, data)
        if kind:
            return Report(path, kind, (benchmark.name,), data)
    shared = {name: len(set(data) & set(content or {})) for name, content in known.items()}
    best = max(shared, key=lambda name: shared[name], default=None)
    if best is not None and shared[best]:
        return Report(path, "metrics", (best,), data)
    names = ", ".join(sorted(known)) or "no benchmark (none is declared or run)"
    raise InputError(path, f"neither a metrics JSON of {names} nor a report any benchmark reads")


def audit(
    paths: list[Path],
    root: Path,
    tolerance: float,
    keep: Path | None = None,
    jobs: int | None = None,
    full: bool = False,
) -> Findings:
    """Check the workspace, re-derive what the reports need, compare each report; the findings say what differs
    (``full``: re-derive every stage from the pinned inputs, reusing no pinned output)."""
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    read_lock(root)  # a truncated dvc.lock is named here, not in a DVC traceback
    try:
        stages = pipeline_stages(root)
    except InputError:
        for path in paths:  # a report that is not even readable is the first thing to say
            read_report(path)
        raise
    files = benchmark_metrics(stages)  # benchmark -> its metrics files, as dvc.yaml declares them
    for path in paths:
        _not_a_headline_row(path, root, files)
    current = {name: _load_metrics(root, paths_) for name, paths_ in files.items()}
    reports = [read_report(path, current) for path in paths]
    targets = _targets(reports, stages, files)
    needed = needed_stages(stages, targets)
    names = [stage.name for stage in needed]
    findings = Findings()
    print(f"audit: checking the workspace against {root / 'dvc.lock'}", file=sys.stderr)
    findings.section(f"1. the workspace against {root / 'dvc.lock'} (the {len(needed)} stages the reports need)")
    start = findings.differences
    absent = frozenset(not_pulled(root, stages, cache_objects(root)))  # any stage's: a folder input may hold one
    findings.listed(param_changes(root, names), "parameters")
    for serious, line in lock_changes(root, names, absent=absent):
        (findings.differ if serious else findings.note)(line)
    used = sorted(out for out in absent if any(_related(out, frozenset(s.outs + s.deps)) for s in needed))
    if used:
        listed = ", ".join(used[:8]) + (", ..." if len(used) > 8 else "")
        findings.note(f"{len(used)} pinned outputs are neither here nor in the DVC cache (not pulled): {listed}")
    if findings.differences == start:
        findings.ok(f"every parameter, input and output{' here' if used else ''} matches dvc.lock")

    findings.section("2. re-derived from pinned inputs and cached model answers")
    from egoeval.core.settings import workspace_settings  # pydantic: not for --help

    settings = workspace_settings(root)  # the copy in ``work`` re-derives under these params
    work = keep or Path(tempfile.mkdtemp(prefix="egoeval-audit-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        changed = rederive(root, work, needed, targets, findings, settings, jobs, full)
        if changed is None:
            return findings
        for report in reports:
            findings.section(f"3. {report.path} ({report.kind}) against the re-derived numbers")
            start = findings.differences
            if report.kind != "metrics":
                own = registry()[report.benchmarks[0]]
                own.audit_compare(
                    report.kind, report.path, report.data, work, settings.section(own), tolerance, findings
                )
            elif set(report.data) <= set(files):  # a baseline: {benchmark: metrics}
                derived = {name: _load_metrics(work, files[name]) for name in report.data}
                compare_numbers(report.data, derived, tolerance, findings)
            else:
                derived = _load_metrics(work, files[report.benchmarks[0]])
                compare_numbers(report.data, derived, tolerance, findings)
            if findings.differences > start and not changed:
                findings.note("the re-derived outputs equal dvc.lock's: the pinned inputs do not give these numbers")
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return findings


def _targets(reports: list[Report], stages: list[StageInfo], files: dict[str, list[str]]) -> list[str]:
    """The stages whose outputs the reports are compared with: a benchmark's metrics stages, or for a report of its
    own kind the stages writing ``Benchmark.audit_outputs`` (its metrics stages when no stage writes them)."""
    targets: list[str] = []
    for report in reports:
        outputs = None
        if report.kind != "metrics":
            outputs = registry()[report.benchmarks[0]].audit_outputs(report.kind, report.path)
        writers = [stage.name for stage in stages if set(stage.outs) & set(outputs or ())]
        if not writers:
            metrics = {path for name in report.benchmarks for path in files.get(name, [])}
            writers = [stage.name for stage in stages if set(stage.metrics) & metrics]
        targets += [name for name in writers if name not in targets]
    return targets


def _not_a_headline_row(path: Path, root: Path, files: dict[str, list[str]]) -> None:
    """A headline row (``metrics/<benchmark>/.../<row>.json``, egoeval.headline) holds a handful of one row's
    numbers, not what the audit re-derives: name the full metrics file to audit instead."""
    for metrics in (name for names in files.values() for name in names):
        rows = (root / metrics).with_suffix("")
        if path.resolve().is_relative_to(rows.resolve()) and path.resolve() != rows.resolve():
            raise InputError(
                path,
                f"a headline row of `dvc metrics show` (egoeval.headline), not a metrics file: audit the full "
                f"metrics file instead: egoeval audit {metrics}",
            )


def _load_metrics(root: Path, paths: list[str]) -> Any:
    """A benchmark's metrics: its one file's content (``{}`` when absent), or ``{file stem: content}`` for several;
    each read as an input (``egoeval.reported.read_metrics``: every value checked)."""
    contents = {Path(path).stem: read_metrics(root / path) for path in paths if (root / path).is_file()}
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


def jobs(text: str) -> int:
    """``--jobs``: a whole number from 1 to 256."""
    if not text.strip().isdigit() or not 1 <= int(text) <= 256:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 256, got {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="egoeval audit", description=help_text(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("reported", type=Path, nargs="+", help="metrics JSON, EgoNormia eval-JSON or MOT folder")
    parser.add_argument(
        "--root", type=Path, help="the egoeval workspace (default: the project this folder lies in, as DVC finds it)"
    )
    parser.add_argument("--tolerance", type=tolerance, default=1e-6, help="largest accepted difference (default 1e-6)")
    parser.add_argument("--keep", type=Path, help="re-derive into this folder and keep it")
    parser.add_argument("--jobs", type=jobs, help="stages re-run at a time (default: one per CPU)")
    parser.add_argument(
        "--full", action="store_true", help="re-derive every stage from the pinned inputs (reuse no pinned output)"
    )
    args = parser.parse_args(argv)
    try:
        for path in args.reported:
            if not path.exists():
                raise InputError(path, "no such file or folder")
        if args.keep is not None and args.keep.exists() and (not args.keep.is_dir() or any(args.keep.iterdir())):
            raise InputError(args.keep, "--keep must name a new or empty folder (the audit re-derives into it)")
        root = (args.root or project_root()).resolve()
        findings = audit(args.reported, root, args.tolerance, args.keep, args.jobs, args.full)
    except InputError as error:
        print(f"egoeval audit: bad input: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print("\n".join(findings.lines).lstrip("\n"))
    if findings.missing:
        also = f" ({findings.differences} differences besides)" if findings.differences else ""
        print(f"\nverdict: NOT PULLED: the pinned outputs marked MISSING are not here{also}; `dvc pull` fetches them")
        return EXIT_NOT_PULLED
    if findings.differences:
        print(f"\nverdict: DOES NOT REPRODUCE ({findings.differences} differences)")
        return EXIT_DIFFERS
    print("\nverdict: reproduces")
    return EXIT_REPRODUCES
